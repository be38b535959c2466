//! TLS configuration building blocks. For now: the choice of crypto provider.
//!
//! The provider is a value passed explicitly into every rustls config this crate builds;
//! the library never installs a process-wide default provider.

mod provider;

pub use provider::Provider;
