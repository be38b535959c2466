//! A live `tlsperf observe` for the tests: started until it captures (or probes), its
//! stderr kept by a thread, its `--windows FILE` read back as JSON records.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;

use serde_json::Value;

/// The records of a `--windows FILE` so far.
pub fn records(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// `tlsperf observe ARGS -d 600s`, returned once it captures; its stderr's further lines
/// kept by a thread.
pub fn observe(args: &[&str]) -> (Child, Receiver<String>) {
    observe_env(args, &[])
}

/// [`observe`] with these environment variables too.
pub fn observe_env(args: &[&str], env: &[(&str, &str)]) -> (Child, Receiver<String>) {
    let (child, _, rx) = spawn(args, env, &["capturing on"]);
    (child, rx)
}

/// `tlsperf observe ARGS -d 600s` with `env`, returned once a line of its stderr holds
/// one of `ready`: (the child, what it said until then, its further lines as a reader
/// thread gets them; dropping the receiver leaves the thread draining stderr, so that the
/// child never blocks on it).
pub fn spawn(
    args: &[&str],
    env: &[(&str, &str)],
    ready: &[&str],
) -> (Child, String, Receiver<String>) {
    let mut child = Command::new(super::bin())
        .envs(env.iter().copied())
        .arg("observe")
        .args(args)
        // Bounded: a test that panics before its Ctrl-C does not kill its children, and
        // an observe left behind would stay attached and capturing.
        .args(["-d", "600s"])
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (said, rx) = wait_ready(&mut child, ready);
    (child, said, rx)
}

/// Reads `child`'s piped stderr until a line holds one of `ready`: (what it said until
/// then, its further lines as a reader thread gets them; dropping the receiver leaves the
/// thread draining stderr, so that the child never blocks on it).
pub fn wait_ready(child: &mut Child, ready: &[&str]) -> (String, Receiver<String>) {
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut said = String::new();
    loop {
        let mut line = String::new();
        assert!(
            err.read_line(&mut line).unwrap() > 0,
            "observe exited: {said}"
        );
        said.push_str(&line);
        if ready.iter().any(|r| line.contains(r)) {
            break;
        }
    }
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        while err.read_line(&mut line).unwrap_or(0) > 0 {
            let _ = tx.send(std::mem::take(&mut line));
        }
    });
    (said, rx)
}
