//! The fuzz targets' seed corpora (`fuzz/corpus/TARGET/`), replayed through the targets'
//! functions (`tlsperf::fuzzing`) in a normal test run: every seed, and every crash once
//! found and added there, passes for good. Running the fuzzer itself is `fuzz/README.md`.

#![allow(clippy::unwrap_used)] // tests unwrap: a panic is the failure report

use std::collections::BTreeSet;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use tlsperf::fuzzing::TARGETS;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

/// The names of the entries of `dir` (with `ext` stripped, those that have it, when given).
fn names(dir: &Path, ext: Option<&str>) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter_map(|p| match ext {
            Some(ext) if p.extension()? != ext => None,
            _ => Some(p.file_stem()?.to_str()?.to_string()),
        })
        .collect()
}

/// Every seed of `target` through its function: each panic is caught, and the test fails
/// naming every seed that panicked and why. A target without seeds fails too.
fn replay(target: &str) {
    let (_, run) = TARGETS
        .iter()
        .find(|(name, _)| *name == target)
        .unwrap_or_else(|| panic!("no function for {target} in tlsperf::fuzzing::TARGETS"));
    let dir = fuzz_dir().join("corpus").join(target);
    let mut seeds: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    seeds.sort();
    assert!(!seeds.is_empty(), "{}: no seed", dir.display());
    let mut failed = Vec::new();
    for seed in &seeds {
        let data = std::fs::read(seed).unwrap();
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| run(&data))) {
            let why = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "(no message)".into());
            failed.push(format!("{}: {why}", seed.display()));
        }
    }
    assert!(
        failed.is_empty(),
        "{target}: {} of {} seeds panicked:\n{}",
        failed.len(),
        seeds.len(),
        failed.join("\n")
    );
    eprintln!("{target}: {} seeds replayed", seeds.len());
}

/// The list the replay goes by is the fuzz crate's: each target in `fuzz/fuzz_targets/`
/// is a `[[bin]]` of `fuzz/Cargo.toml` that calls its function of `tlsperf::fuzzing`, and
/// has a corpus directory; no function or corpus belongs to no target.
#[test]
fn every_fuzz_target_has_a_function_a_bin_and_a_corpus() {
    let fuzz = fuzz_dir();
    let functions: BTreeSet<String> = TARGETS.iter().map(|(n, _)| n.to_string()).collect();
    let sources = names(&fuzz.join("fuzz_targets"), Some("rs"));
    let corpora = names(&fuzz.join("corpus"), None);
    assert_eq!(
        functions, sources,
        "tlsperf::fuzzing::TARGETS vs fuzz/fuzz_targets"
    );
    assert_eq!(
        functions, corpora,
        "tlsperf::fuzzing::TARGETS vs fuzz/corpus"
    );
    let manifest = std::fs::read_to_string(fuzz.join("Cargo.toml")).unwrap();
    for name in &functions {
        assert!(
            manifest.contains(&format!(
                "name = \"{name}\"\npath = \"fuzz_targets/{name}.rs\""
            )),
            "fuzz/Cargo.toml has no [[bin]] {name}"
        );
        let source = fuzz.join("fuzz_targets").join(format!("{name}.rs"));
        let text = std::fs::read_to_string(&source).unwrap();
        assert!(
            text.contains(&format!("tlsperf::fuzzing::{name}(data)")),
            "{} does not call tlsperf::fuzzing::{name}",
            source.display()
        );
    }
}

#[test]
fn pem_bundle_seeds_pass() {
    replay("pem_bundle");
}

#[test]
fn trust_analyze_seeds_pass() {
    replay("trust_analyze");
}

#[test]
fn load_result_merge_seeds_pass() {
    replay("load_result_merge");
}

#[test]
fn ticket_decrypt_seeds_pass() {
    replay("ticket_decrypt");
}

#[test]
fn observe_flow_seeds_pass() {
    replay("observe_flow");
}

#[test]
fn observe_quic_seeds_pass() {
    replay("observe_quic");
}
