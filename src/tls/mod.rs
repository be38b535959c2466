//! TLS configuration building blocks: the choice of crypto provider, and session-ticket
//! keys shared across server instances ([`tickets`]).
//!
//! The provider is a value passed explicitly into every rustls config this crate builds;
//! the library never installs a process-wide default provider.

pub mod choices;
mod insecure;
pub mod kx_pool;
mod provider;
pub mod server_config;
pub mod tickets;

pub use insecure::InsecureVerifier;
pub use provider::Provider;
