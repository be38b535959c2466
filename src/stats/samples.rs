//! Sample files as users write them: one number a line; blank lines and `#` comments
//! (whole-line or trailing) are ignored. Errors name the file and the line.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::error::{Classify, ErrorClass, io_input_class};

/// Largest sample file read (64 MiB): a guard against pointing at the wrong file.
pub const MAX_SAMPLE_FILE: u64 = 64 << 20;

/// A sample file that cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SampleError {
    /// The file could not be read.
    #[error("cannot read sample file {}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file is too large to be a sample file.
    #[error("{}: {size} bytes is too large for a sample file (limit {MAX_SAMPLE_FILE} bytes)", .path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        size: u64,
    },
    /// A line is not a finite number.
    #[error("{}:{line}: not a number: '{text}'", .path.display())]
    NotANumber {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The offending text (truncated).
        text: String,
    },
    /// A value so large that the statistics of the sample overflow a 64-bit float.
    #[error("{}:{line}: {text} is too large to compare (at most 1e75 either side of 0)", .path.display())]
    TooLargeValue {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The value as written (truncated).
        text: String,
    },
    /// The file holds no samples at all.
    #[error("{}: no samples (only blank lines or comments)", .path.display())]
    Empty {
        /// The file.
        path: PathBuf,
    },
}

impl Classify for SampleError {
    fn class(&self) -> ErrorClass {
        match self {
            SampleError::Read { source, .. } => io_input_class(source),
            _ => ErrorClass::Input,
        }
    }
}

/// The largest magnitude a sample may have: Welch's degrees of freedom square the squared
/// standard error, so the fourth power of a sample's spread must stay finite.
const MAX_VALUE: f64 = 1e75;

/// Numbers read from one sample file.
#[derive(Debug, Clone, PartialEq)]
pub struct Samples {
    /// Where they came from (as shown to the user).
    pub source: String,
    /// The values, in file order.
    pub values: Vec<f64>,
}

impl Samples {
    /// Reads a sample file.
    pub fn read(path: &Path) -> Result<Samples, SampleError> {
        let read_err = |source| SampleError::Read {
            path: path.to_path_buf(),
            source,
        };
        let meta = std::fs::metadata(path).map_err(read_err)?;
        if meta.is_dir() {
            return Err(read_err(std::io::Error::from(
                std::io::ErrorKind::IsADirectory,
            )));
        }
        if meta.len() > MAX_SAMPLE_FILE {
            return Err(SampleError::TooLarge {
                path: path.to_path_buf(),
                size: meta.len(),
            });
        }
        let bytes =
            crate::files::read_input(path, crate::files::InputKind::Results).map_err(read_err)?;
        let text = String::from_utf8_lossy(&bytes);
        Self::parse(path, &text)
    }

    /// Parses sample text; `path` only names the source in errors.
    pub fn parse(path: &Path, text: &str) -> Result<Samples, SampleError> {
        let mut values = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let content = raw.split('#').next().unwrap_or("").trim();
            if content.is_empty() {
                continue;
            }
            match content.parse::<f64>() {
                Ok(v) if v.abs() <= MAX_VALUE => values.push(v),
                // Its square (the variance) would overflow.
                Ok(v) if v.is_finite() => {
                    return Err(SampleError::TooLargeValue {
                        path: path.to_path_buf(),
                        line: i + 1,
                        text: content.chars().take(60).collect(),
                    });
                }
                _ => {
                    return Err(SampleError::NotANumber {
                        path: path.to_path_buf(),
                        line: i + 1,
                        text: content.chars().take(60).collect(),
                    });
                }
            }
        }
        if values.is_empty() {
            return Err(SampleError::Empty {
                path: path.to_path_buf(),
            });
        }
        Ok(Samples {
            source: path.display().to_string(),
            values,
        })
    }
}

impl fmt::Display for Samples {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({} samples)", self.source, self.values.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_with_comments_and_blanks() {
        let s = Samples::parse(
            Path::new("a.txt"),
            "# header\n1.5\n\n  2 # trailing\r\n3e2\n",
        )
        .unwrap();
        assert_eq!(s.values, vec![1.5, 2.0, 300.0]);
    }

    #[test]
    fn names_file_and_line() {
        let err = Samples::parse(Path::new("b.txt"), "1\n2\nabc\n").unwrap_err();
        assert_eq!(err.to_string(), "b.txt:3: not a number: 'abc'");
        let err = Samples::parse(Path::new("h.txt"), "1\n-1e308\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "h.txt:2: -1e308 is too large to compare (at most 1e75 either side of 0)"
        );
        assert!(Samples::parse(Path::new("h.txt"), "1e75\n-1e75\n").is_ok());
        let err = Samples::parse(Path::new("b.txt"), "1\nNaN\n").unwrap_err();
        assert!(err.to_string().starts_with("b.txt:2:"), "{err}");
        let err = Samples::parse(Path::new("c.txt"), "# nothing\n\n").unwrap_err();
        assert!(matches!(err, SampleError::Empty { .. }));
    }
}
