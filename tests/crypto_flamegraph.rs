//! `tlsperf crypto … --flamegraph FILE.svg`: a short run writes an SVG flame graph whose
//! stacks reach from tlsperf's engine into the crypto library, for `sign`, `kx` and
//! `handshake`; the output path is checked before anything is measured.

#![allow(clippy::unwrap_used)] // tests unwrap: a panic is the failure report

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::tlsperf;

/// Runs `tlsperf crypto ARGS --duration 200ms --rounds 1 --flamegraph PATH`; returns the
/// SVG and the run's stderr.
fn flamegraph(args: &[&str], duration: &str, path: &Path) -> (String, String) {
    let mut all = vec!["crypto"];
    all.extend_from_slice(args);
    let p = path.to_str().unwrap();
    all.extend_from_slice(&["--duration", duration, "--rounds", "1", "--flamegraph", p]);
    let run = tlsperf(&all);
    assert_eq!(run.code, 0, "{all:?}: {}", run.stderr);
    assert!(
        run.stderr.contains(p) && run.stderr.contains("samples"),
        "stderr does not say where the flame graph went: {}",
        run.stderr
    );
    assert!(!run.stdout.is_empty(), "the results are still printed");
    let svg = std::fs::read_to_string(path).expect("the SVG was written");
    assert!(
        svg.starts_with("<?xml"),
        "not XML: {}",
        &svg[..svg.len().min(100)]
    );
    assert!(svg.contains("<svg") && svg.trim_end().ends_with("</svg>"));
    (svg, run.stderr)
}

/// The function names of the flame graph's frames (`<title>NAME (N samples, P%)`).
fn frames(svg: &str) -> Vec<&str> {
    svg.split("<g><title>")
        .skip(1)
        .filter_map(|g| {
            g.split_once(" samples, ")?
                .0
                .rsplit_once(" (")
                .map(|(n, _)| n)
        })
        .collect()
}

fn has_frame(svg: &str, what: impl Fn(&str) -> bool) -> bool {
    frames(svg).into_iter().any(what)
}

/// No temporary file of the atomic write is left beside the SVG.
fn only(dir: &Path, names: &[&str]) {
    let mut found: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    found.sort();
    assert_eq!(found, names, "files in {}", dir.display());
}

#[test]
fn sign_flamegraph_reaches_from_tlsperf_into_aws_lc() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.svg");
    let (svg, _) = flamegraph(
        &["sign", "--provider", "aws-lc-rs", "--alg", "ed25519"],
        "300ms",
        &path,
    );
    assert!(
        svg.contains("tlsperf crypto sign --provider aws-lc-rs --alg ed25519 --duration 300ms"),
        "the title says what was profiled"
    );
    assert!(
        has_frame(&svg, |f| f.starts_with("tlsperf::crypto::sign::")),
        "no frame of tlsperf's sign engine: {:?}",
        frames(&svg)
    );
    assert!(
        has_frame(&svg, |f| f.starts_with("tlsperf::crypto::measure::")),
        "no frame of the measurement loop: {:?}",
        frames(&svg)
    );
    // AWS-LC's symbols carry its version prefix (aws_lc_0_NN_N_ED25519_sign, …).
    assert!(
        has_frame(&svg, |f| f.starts_with("aws_lc_")
            && f.to_ascii_lowercase().contains("25519")),
        "no Ed25519 frame of AWS-LC: {:?}",
        frames(&svg)
    );
    assert!(
        !has_frame(&svg, |f| f.contains("perf_signal_handler")),
        "the profiler's own frames are cut"
    );
    only(dir.path(), &["f.svg"]);
}

#[test]
fn kx_and_handshake_write_flamegraphs() {
    let dir = tempfile::tempdir().unwrap();
    let kx = dir.path().join("kx.svg");
    let (svg, _) = flamegraph(
        &["kx", "--provider", "ring", "--group", "x25519"],
        "200ms",
        &kx,
    );
    assert!(has_frame(&svg, |f| f.starts_with("tlsperf::crypto::kx::")));
    assert!(
        has_frame(&svg, |f| f.starts_with("ring_core_")
            || f.starts_with("ring::")),
        "no frame of ring: {:?}",
        frames(&svg)
    );

    let hs = dir.path().join("hs.svg");
    let (svg, _) = flamegraph(
        &[
            "handshake",
            "--provider",
            "aws-lc-rs",
            // The spelling before 2026-12-07, still accepted; the title uses the new one.
            "--cert",
            "ecdsa-p256",
            "--tls",
            "1.3",
            "--kind",
            "full",
        ],
        "200ms",
        &hs,
    );
    assert!(svg.contains("tlsperf crypto handshake --provider aws-lc-rs --key-type ecdsa-p256"));
    assert!(has_frame(&svg, |f| f.starts_with("tlsperf::crypto::in_memory::")));
    assert!(
        has_frame(&svg, |f| f.starts_with("rustls::")),
        "no rustls frame: {:?}",
        frames(&svg)
    );
    assert!(has_frame(&svg, |f| f.starts_with("aws_lc_")));
    only(dir.path(), &["hs.svg", "kx.svg"]);
}

#[test]
fn an_existing_flamegraph_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.svg");
    std::fs::write(&path, "old").unwrap();
    let (svg, _) = flamegraph(
        &["kx", "--provider", "ring", "--group", "x25519"],
        "200ms",
        &path,
    );
    assert_ne!(svg, "old");
    only(dir.path(), &["f.svg"]);
}

/// A long run with a bad path must fail at once (exit 2), not after measuring.
#[test]
fn a_bad_path_fails_before_measuring() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("missing").join("f.svg");
    // Hours of measurement if the path were checked only at the end.
    let mut child = Command::new(env!("CARGO_BIN_EXE_tlsperf"))
        .args(["crypto", "sign", "--duration", "1h", "--flamegraph"])
        .arg(&path)
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > Duration::from_secs(60) {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("still running after 60 s: the path was not checked first");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(path.to_str().unwrap()), "{stderr}");
    assert!(stderr.contains("--flamegraph"), "{stderr}");
    assert!(out.stdout.is_empty(), "nothing was measured");
    assert!(!path.exists());
    only(dir.path(), &[]);
}
