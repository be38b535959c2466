//! Report sinks: turn results into human-readable text (and the lab's Markdown and
//! self-contained HTML with SVG charts). They never open the engine's sockets or files;
//! JSON output is the results' own serde form.

pub mod audit;
pub mod capacity;
pub mod compare;
pub mod crypto;
pub mod lab;
pub mod svg;
pub mod text;
