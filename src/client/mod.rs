//! The client side: TLS client configurations from the user's choices ([`config`]), one
//! connection timed from inside, step by step ([`conn`]), the verifier's timing wrapper
//! ([`verifier`]) and its cache of chain verdicts for many connections ([`verdict_cache`]),
//! what our ClientHello offered ([`hello`]), a small HTTP/1.1 exchange
//! ([`http1`]), one connection plus one request ([`exchange`]) to a parsed URL
//! ([`target`]), the phases of a connection ([`timeline`]) with their boundaries stamped at
//! the system calls that moved the bytes ([`wire`]), a verifier that loads its roots in
//! every handshake, as slow clients do ([`reload`]), and a connector other Rust HTTP
//! clients can use to record the same phases for their own traffic ([`connector`]), and
//! which HTTP statuses count as a success ([`status`]); one QUIC connection and one
//! HTTP/3 request on the same timeline ([`quic`], `handshake --http3`).

pub mod config;
pub mod conn;
pub mod connector;
mod error;
pub mod exchange;
pub mod hello;
pub mod http1;
pub mod quic;
pub mod reload;
pub mod roots;
pub mod sessions;
pub mod status;
pub mod target;
pub mod timeline;
pub mod verdict_cache;
pub mod verifier;
pub mod wire;

pub use conn::{EarlyData, Handshake, HandshakeClass, TlsStream};
pub use error::ConnectError;
pub use timeline::{Phase, Timeline};
