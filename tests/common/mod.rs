//! Helpers shared by the integration tests: run the binary as a user would.

#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

/// The outcome of one `tlsperf` run.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs the tlsperf binary with `args` (no color, no inherited log settings).
pub fn tlsperf<I, S>(args: I) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let out: Output = Command::new(env!("CARGO_BIN_EXE_tlsperf"))
        .args(args)
        .env_remove("TLSPERF_LOG")
        .env("NO_COLOR", "1")
        .output()
        .expect("the tlsperf binary runs");
    let run = Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert!(
        !run.stderr.contains("panicked") && !run.stderr.contains("RUST_BACKTRACE"),
        "tlsperf panicked:\n{}",
        run.stderr
    );
    run
}

/// True when `program` can be run; prints why a test part is skipped otherwise.
pub fn have(program: &str, why: &str) -> bool {
    let ok = Command::new(program)
        .arg("version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        eprintln!("SKIPPED: {program} is not installed; not checking {why}");
    }
    ok
}

/// Writes `text` to `dir/name` and returns the path as a string.
pub fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_string_lossy().into_owned()
}
