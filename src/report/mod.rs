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

/// The top of a self-contained HTML page (the lab's, capacity's and the audit's): the
/// document's head with `title` and `style`, and the body opened.
pub fn page_head(title: &str, style: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{}</title><style>{style}</style></head><body>",
        svg::esc(title)
    )
}
