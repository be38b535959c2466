//! Failure classification shared by every module.
//!
//! Library errors are `thiserror` enums owned by their modules; each says whether it was
//! caused by the user's input (exit code 2) or happened at run time (exit code 1) through
//! the [`Classify`] trait. The binary maps that class to the process exit code.

/// Whether a failure is the user's input or the run itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// Bad usage or bad input: a wrong flag value, a malformed file, a path that exists
    /// already. Exit code 2.
    Input,
    /// Something failed while running with valid input: I/O errors, a crypto backend
    /// failure. Exit code 1.
    Runtime,
    /// Stopped by the user (Ctrl-C) after writing what was measured. Exit code 130, as
    /// shells report a SIGINT.
    Interrupted,
    /// The run worked, but the load generator, not the thing measured, saturated, so no
    /// answer about the server is given (`capacity`). Exit code 3.
    GeneratorBound,
    /// The run worked but ended (its time limit) before it could answer (`capacity`
    /// without a confirmed capacity). Exit code 4.
    Unfinished,
    /// The program run behind a link (`tlsperf link`) ended with this exit code (128 + N
    /// for signal N), passed through as tlsperf's own.
    Program(u8),
}

impl ErrorClass {
    /// The process exit code for this class of failure.
    pub fn exit_code(self) -> u8 {
        match self {
            ErrorClass::Input => 2,
            ErrorClass::Interrupted => 130,
            ErrorClass::GeneratorBound => 3,
            ErrorClass::Unfinished => 4,
            ErrorClass::Program(code) => code,
            ErrorClass::Runtime => 1,
        }
    }
}

/// Implemented by every library error type: tells which [`ErrorClass`] it belongs to.
pub trait Classify {
    /// The class of this failure.
    fn class(&self) -> ErrorClass;
}

/// Classifies an I/O error met while opening or reading a file the user named: a missing
/// file, a permission problem, a directory in place of a file, a symbolic-link loop
/// (`ELOOP`) or a name the file system refuses is bad input; anything else (a disk
/// error, an interrupted read) is a run-time failure.
pub fn io_input_class(err: &std::io::Error) -> ErrorClass {
    use std::io::ErrorKind::*;
    // `ErrorKind::FilesystemLoop` is not stable: std reports ELOOP as `Uncategorized`.
    if matches!(err.raw_os_error(), Some(libc::ELOOP)) {
        return ErrorClass::Input;
    }
    match err.kind() {
        NotFound | PermissionDenied | IsADirectory | NotADirectory | InvalidInput | InvalidData
        | AlreadyExists | ReadOnlyFilesystem | InvalidFilename => ErrorClass::Input,
        _ => ErrorClass::Runtime,
    }
}

/// An error and its causes as one line (`cannot read x.pem: No such file or directory`),
/// for messages that embed an error as text.
pub fn sentence(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cause = c.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes() {
        assert_eq!(ErrorClass::Input.exit_code(), 2);
        assert_eq!(ErrorClass::Runtime.exit_code(), 1);
    }

    #[test]
    fn io_classes() {
        let nf = std::io::Error::from(std::io::ErrorKind::NotFound);
        assert_eq!(io_input_class(&nf), ErrorClass::Input);
        let other = std::io::Error::other("disk on fire");
        assert_eq!(io_input_class(&other), ErrorClass::Runtime);
        // A symbolic-link loop is the user's input, as a missing file is.
        let eloop = std::io::Error::from_raw_os_error(libc::ELOOP);
        assert_eq!(io_input_class(&eloop), ErrorClass::Input);
        let eio = std::io::Error::from_raw_os_error(libc::EIO);
        assert_eq!(io_input_class(&eio), ErrorClass::Runtime);
    }
}
