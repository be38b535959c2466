//! Chain verification that stays flat as the trust store grows.
//!
//! - [`mod@bench`]: `verify bench`, the four ways to hold roots against store size.
//! - [`index`]: [`AnchorIndex`], anchors by subject (and key identifier).
//! - [`verifier`]: [`IndexedVerifier`], a rustls `ServerCertVerifier` over the index,
//!   with a detailed mode (path, phases, signature checks).
//! - [`reason`]: why a chain is not valid, in plain words and as a stable code.

pub mod bench;
pub mod index;
pub mod reason;
pub mod verifier;

pub use index::{AnchorIndex, Candidates};
pub use verifier::{IndexedVerifier, VerifyReport};
