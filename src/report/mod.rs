//! Report sinks: turn results into human-readable text. They never open the engine's
//! sockets or files; JSON output is the results' own serde form.

pub mod crypto;
pub mod text;
