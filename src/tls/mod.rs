//! TLS configuration building blocks: the choice of crypto provider, and session-ticket
//! keys shared across server instances ([`tickets`]), the choices server and client configs
//! share ([`choices`]), the verifier that skips certificate checks ([`danger`]), and
//! what a handshake negotiated ([`Negotiated`]).
//!
//! The provider is a value passed explicitly into every rustls config this crate builds;
//! the library never installs a process-wide default provider.

pub mod choices;
pub mod danger;
pub mod kx_pool;
mod negotiated;
mod provider;
mod signatures;
pub mod tickets;

pub use negotiated::{Negotiated, version_label, version_name};
pub use provider::Provider;
pub(crate) use signatures::handshake_signature_checks;
