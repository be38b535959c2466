//! Result documents: every result tlsperf writes and reads back is a JSON object whose
//! `schema` field names its kind and version (`tlsperf-load/1`, `tlsperf-lab/2`,
//! `tlsperf-crypto-limit/2`…). This module owns what all of them share: reading an input
//! once, bounded, pipes included ([`Input`]); telling its kind from its `schema` without
//! keeping the rest ([`sniff`]); writing one atomically ([`write_json`]). Each kind's own
//! module parses its document from the bytes read here.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{Classify, ErrorClass, io_input_class};
use crate::files::{FileError, FileMode, InputKind};

/// A document (or sample file) read whole, once: so that telling its kind and parsing
/// it see the same bytes, also when it is a pipe.
#[derive(Debug, Clone)]
pub struct Input {
    /// Where it came from (as the user named it).
    pub path: PathBuf,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

impl Input {
    /// Reads `path` ([`InputKind::Results`]: at most 256 MiB; a regular file or a pipe).
    pub fn read(path: &Path) -> Result<Input, DocError> {
        let bytes = crate::files::read_input(path, InputKind::Results).map_err(|source| {
            DocError::Read {
                path: path.to_path_buf(),
                source,
            }
        })?;
        Ok(Input {
            path: path.to_path_buf(),
            bytes,
        })
    }

    /// The document's `schema`, if it is a JSON object with one ([`sniff`]).
    pub fn schema(&self) -> Option<String> {
        sniff(&self.bytes)
    }
}

/// The `schema` string of a JSON object, without building the rest of it; `None` for
/// anything else (sample files, other JSON, a `schema` that is not a string).
pub fn sniff(text: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Head {
        schema: Option<serde_json::Value>,
    }
    if text.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return None;
    }
    let head: Head = serde_json::from_slice(text).ok()?;
    match head.schema? {
        serde_json::Value::String(s) => Some(s),
        _ => None,
    }
}

/// Writes `value` as pretty JSON and a newline to `path`, atomically (a temporary name,
/// then a rename); an existing file only with `force`.
pub fn write_json<T: Serialize>(value: &T, path: &Path, force: bool) -> Result<(), DocError> {
    let mut json = serde_json::to_vec_pretty(value).map_err(|source| DocError::Encode {
        path: path.to_path_buf(),
        source,
    })?;
    json.push(b'\n');
    crate::files::write_atomic(path, &json, FileMode::Public, force)?;
    Ok(())
}

/// A document that could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum DocError {
    /// The input could not be read (missing, not a file or pipe, too large…).
    #[error("cannot read {}", .path.display())]
    Read {
        /// The path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The value could not be encoded (a path that is not UTF-8…).
    #[error("cannot encode {} as JSON", .path.display())]
    Encode {
        /// Where it was to go.
        path: PathBuf,
        /// Why.
        source: serde_json::Error,
    },
    /// The file could not be written.
    #[error(transparent)]
    Write(#[from] FileError),
}

impl Classify for DocError {
    fn class(&self) -> ErrorClass {
        match self {
            DocError::Read { source, .. } => io_input_class(source),
            DocError::Encode { .. } => ErrorClass::Runtime,
            DocError::Write(e) => e.class(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffs_the_schema_alone() {
        assert_eq!(
            sniff(br#" {"rows": [1, 2], "schema": "tlsperf-lab/2", "x": {"schema": 1}}"#),
            Some("tlsperf-lab/2".into())
        );
        assert_eq!(sniff(b"1.5\n2.5\n"), None);
        assert_eq!(sniff(br#"{"schema": 3}"#), None);
        assert_eq!(sniff(br#"{"no": "schema"}"#), None);
        assert_eq!(sniff(br#"{"schema": "a", oops"#), None);
    }
}
