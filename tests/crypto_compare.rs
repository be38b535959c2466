//! `tlsperf compare A.json B.json` on two `tlsperf crypto` results: real short runs
//! compared row by row, synthetic pairs with a known answer (2× faster, identical), too
//! few rounds, the filter and alpha, and every way of giving it the wrong files (exit 2).
//! The JSON is checked against the `tlsperf compare` section of `docs/json.md` (one
//! comparison document for every kind of input).

#![allow(clippy::unwrap_used)] // tests unwrap: a panic is the failure report

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use common::{json_paths as paths, tlsperf, write};
use serde_json::{Value, json};

/// A `tlsperf-crypto-sign/1` document with one row per (alg, implementation, op, rounds).
fn sign_doc(seconds: f64, rows: &[(&str, &str, &str, &[f64])]) -> String {
    let rows: Vec<Value> = rows
        .iter()
        .map(|(alg, imp, op, r)| {
            json!({
                "alg": alg, "implementation": imp, "op": op, "signature_len": 64,
                "ns_per_op": r[0], "ops_per_sec": 1e9 / r[0], "min_ns": r[0], "max_ns": r[0],
                "q1_ns": r[0], "q3_ns": r[0], "rounds_ns": r, "outlier_rounds": 0,
                "ops": 1000, "bytes_per_op": 0.0, "allocs_per_op": 0.0,
            })
        })
        .collect();
    json!({
        "schema": "tlsperf-crypto-sign/1", "seconds": seconds, "rounds": 5,
        "message_len": 130, "allocations_counted": true, "rows": rows,
    })
    .to_string()
}

fn compare_json(a: &str, b: &str, extra: &[&str]) -> Value {
    let mut args = vec!["compare", a, b, "--json"];
    args.extend_from_slice(extra);
    let run = tlsperf(&args);
    assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
    serde_json::from_str(&run.stdout).expect("valid JSON")
}

/// The one matched row of a comparison.
fn only_row(v: &Value) -> &Value {
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{v}");
    &rows[0]
}

const SLOW: [f64; 6] = [1000.0, 1012.0, 991.0, 1004.0, 996.0, 1007.0];
const FAST: [f64; 6] = [500.0, 506.0, 495.0, 502.0, 498.0, 503.0];

/// Documented paths of the `## \`tlsperf compare\`` section of docs/json.md.
fn documented() -> BTreeSet<String> {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/json.md")).unwrap();
    let mut out = BTreeSet::new();
    let mut inside = false;
    for line in text.lines() {
        if line.starts_with("## ") {
            inside = line == "## `tlsperf compare`";
        } else if let (true, Some(row)) = (inside, line.strip_prefix("| `")) {
            out.insert(row.split_once('`').unwrap().0.to_string());
        }
    }
    assert!(
        !out.is_empty(),
        "docs/json.md has no `tlsperf compare` table"
    );
    out
}

/// Every printed field is documented; every documented top-level field is printed.
fn check_documented(v: &Value) {
    let doc = documented();
    let mut actual = BTreeSet::new();
    paths(v, "", &mut actual);
    // The identities of unmatched rows have the fields of `rows[].identity`, documented
    // once.
    let actual: BTreeSet<String> = actual
        .into_iter()
        .map(|p| {
            for list in ["only_in_a", "only_in_b"] {
                if let Some(field) = p.strip_prefix(&format!("{list}[].identity.")) {
                    return format!("rows[].identity.{field}");
                }
            }
            p
        })
        .collect();
    let undocumented: Vec<_> = actual.difference(&doc).collect();
    assert!(undocumented.is_empty(), "undocumented: {undocumented:?}");
    let missing: Vec<_> = doc
        .iter()
        .filter(|p| !p.contains('.') && !p.contains('['))
        .filter(|p| !actual.contains(*p))
        .collect();
    assert!(
        missing.is_empty(),
        "documented but not printed: {missing:?}"
    );
}

fn real_run(dir: &Path, name: &str, args: &[&str]) -> String {
    let mut all = vec!["--json", "crypto"];
    all.extend_from_slice(args);
    let run = tlsperf(&all);
    assert_eq!(run.code, 0, "{all:?}: {}", run.stderr);
    write(dir, name, &run.stdout)
}

#[test]
fn two_real_sign_runs_compare_row_by_row() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "sign",
        "--provider",
        "aws-lc-rs",
        "--alg",
        "ed25519",
        "--duration",
        "200ms",
        "--rounds",
        "4",
    ];
    let a = real_run(dir.path(), "a.json", &args);
    let b = real_run(dir.path(), "b.json", &args);
    let v = compare_json(&a, &b, &[]);
    assert_eq!(v["schema"], "tlsperf-compare/1");
    assert_eq!(v["kind"], "sign");
    assert_eq!(v["a"]["schema"], "tlsperf-crypto-sign/1");
    let rows = v["rows"].as_array().unwrap();
    let ops: Vec<_> = rows.iter().map(|r| r["identity"]["op"].clone()).collect();
    assert_eq!(ops, [json!("sign"), json!("verify")]);
    for r in rows {
        assert_eq!(r["identity"]["alg"], "ed25519");
        assert_eq!(r["identity"]["implementation"], "aws-lc-rs");
        assert_eq!(r["a"]["rounds"], 4);
        assert_eq!(r["b"]["rounds"], 4);
        let p = r["p"].as_f64().unwrap_or_else(|| panic!("no p-value: {r}"));
        assert!((0.0..=1.0).contains(&p), "{r}");
        assert_eq!(r["welch"]["p"].as_f64(), Some(p));
        assert!(
            ["faster", "slower", "no-difference"].contains(&r["outcome"].as_str().unwrap()),
            "{r}"
        );
        let (ma, mb) = (
            r["a"]["median"].as_f64().unwrap(),
            r["b"]["median"].as_f64().unwrap(),
        );
        assert!(ma > 0.0 && mb > 0.0);
        let ratio = r["ratio"].as_f64().unwrap();
        assert!((ratio - ma / mb).abs() < 1e-9 * ratio, "{r}");
    }
    assert_eq!(v["only_in_a"], json!([]));
    assert_eq!(v["only_in_b"], json!([]));
    assert_eq!(v["warnings"], json!([]));
    check_documented(&v);

    let run = tlsperf(["compare", &a, &b]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    for needle in [
        "tlsperf crypto sign results compared, B against A",
        "algorithm",
        "B/A ops/s",
        "ed25519",
        "aws-lc-rs",
        "verify",
        "2 rows in both",
    ] {
        assert!(
            run.stdout.contains(needle),
            "no {needle:?} in\n{}",
            run.stdout
        );
    }
}

#[test]
fn real_limit_runs_compare_operations_and_measured_rounds() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["limit", "--duration", "60ms", "--rounds", "3"];
    let a = real_run(dir.path(), "a.json", &args);
    let b = real_run(dir.path(), "b.json", &args);
    let v = compare_json(&a, &b, &[]);
    assert_eq!(v["kind"], "limit");
    let rows = v["rows"].as_array().unwrap();
    let count = |section: &str| rows.iter().filter(|r| r["section"] == section).count();
    assert_eq!((count("operations"), count("limits")), (5, 4), "{v}");
    for r in rows {
        // Every row, limits included, is tested on its rounds.
        assert!(r["p"].as_f64().is_some(), "{r}");
        assert_eq!(r["a"]["rounds"], 3, "{r}");
    }
    check_documented(&v);
    let run = tlsperf(["compare", &a, &b]);
    assert!(
        run.stdout
            .contains("Measured in-memory handshakes per side"),
        "{}",
        run.stdout
    );
}

#[test]
fn twice_as_fast_is_significantly_faster() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(
        dir.path(),
        "a.json",
        &sign_doc(1.0, &[("ecdsa-p256", "ring", "sign", &SLOW)]),
    );
    let b = write(
        dir.path(),
        "b.json",
        &sign_doc(1.0, &[("ecdsa-p256", "ring", "sign", &FAST)]),
    );
    let v = compare_json(&a, &b, &[]);
    let r = only_row(&v);
    assert_eq!(r["outcome"], "faster", "{r}");
    assert_eq!(r["significant"], true);
    assert!(r["p"].as_f64().unwrap() < 0.05, "{r}");
    let ratio = r["ratio"].as_f64().unwrap();
    assert!((ratio - 2.0).abs() < 0.05, "{r}");
    assert!(r["welch"]["diff"].as_f64().unwrap() < 0.0);
    check_documented(&v);
    // And the other way round.
    let v = compare_json(&b, &a, &[]);
    assert_eq!(only_row(&v)["outcome"], "slower");

    let run = tlsperf(["compare", &a, &b]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let line = run
        .stdout
        .lines()
        .find(|l| l.contains("ecdsa-p256"))
        .unwrap_or_else(|| panic!("no row in\n{}", run.stdout));
    assert!(line.contains("significantly faster"), "{line}");
    assert!(line.contains("2.0"), "{line}");
}

#[test]
fn identical_distributions_show_no_difference() {
    let dir = tempfile::tempdir().unwrap();
    let mut shuffled = SLOW;
    shuffled.reverse();
    let a = write(
        dir.path(),
        "a.json",
        &sign_doc(1.0, &[("ed25519", "aws-lc-rs", "verify", &SLOW)]),
    );
    let b = write(
        dir.path(),
        "b.json",
        &sign_doc(1.0, &[("ed25519", "aws-lc-rs", "verify", &shuffled)]),
    );
    let v = compare_json(&a, &b, &[]);
    let r = only_row(&v);
    assert_eq!(r["outcome"], "no-difference", "{r}");
    assert_eq!(r["significant"], false);
    assert!(r["p"].as_f64().unwrap() > 0.99, "{r}");
    let run = tlsperf(["compare", &a, &b]);
    assert!(
        run.stdout.contains("no significant difference"),
        "{}",
        run.stdout
    );
}

#[test]
fn alpha_and_no_filter_are_honoured() {
    let dir = tempfile::tempdir().unwrap();
    // Means 100 and 101, each standard deviation 1.58: t = −1, p ≈ 0.35.
    let a_rounds = [100.0, 102.0, 98.0, 101.0, 99.0];
    let b_rounds = [101.0, 103.0, 99.0, 102.0, 100.0];
    let a = write(
        dir.path(),
        "a.json",
        &sign_doc(1.0, &[("ed25519", "ring", "sign", &a_rounds)]),
    );
    let b = write(
        dir.path(),
        "b.json",
        &sign_doc(1.0, &[("ed25519", "ring", "sign", &b_rounds)]),
    );
    let v = compare_json(&a, &b, &[]);
    assert_eq!(only_row(&v)["outcome"], "no-difference");
    let v = compare_json(&a, &b, &["--alpha", "0.5"]);
    assert_eq!(v["alpha"], 0.5);
    assert_eq!(only_row(&v)["outcome"], "slower", "{v}");

    // One outlier round in A: dropped by default, kept with --no-filter.
    let with_outlier = [100.0, 102.0, 98.0, 101.0, 99.0, 100.0, 500.0];
    let c = write(
        dir.path(),
        "c.json",
        &sign_doc(1.0, &[("ed25519", "ring", "sign", &with_outlier)]),
    );
    let v = compare_json(&c, &a, &[]);
    let r = only_row(&v);
    assert_eq!(r["a"]["outliers_dropped"], 1, "{r}");
    assert_eq!(r["a"]["used"], 6);
    assert_eq!(r["a"]["median"], 100.0);
    let v = compare_json(&c, &a, &["--no-filter"]);
    assert_eq!(v["filter"], false);
    let r = only_row(&v);
    assert_eq!(r["a"]["outliers_dropped"], Value::Null, "{r}");
    assert_eq!(r["a"]["used"], 7);
}

#[test]
fn one_round_is_too_few_rounds_not_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(
        dir.path(),
        "a.json",
        &sign_doc(
            1.0,
            &[
                ("ed25519", "ring", "sign", &[1000.0]),
                ("ed25519", "ring", "verify", &SLOW),
                ("ecdsa-p384", "ring", "sign", &[7.0, 7.0, 7.0]),
            ],
        ),
    );
    let b = write(
        dir.path(),
        "b.json",
        &sign_doc(
            0.2,
            &[
                ("ed25519", "ring", "sign", &SLOW),
                ("ed25519", "ring", "verify", &SLOW),
                ("ed25519", "rustcrypto", "verify", &SLOW),
                ("ecdsa-p384", "ring", "sign", &[7.0, 7.0, 7.0]),
            ],
        ),
    );
    let v = compare_json(&a, &b, &[]);
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows[0]["outcome"], "too-few-rounds", "{v}");
    assert_eq!(rows[0]["p"], Value::Null);
    assert_eq!(rows[0]["a"]["rounds"], 1);
    assert_eq!(rows[0]["a"]["median"], 1000.0);
    assert!(rows[1]["p"].as_f64().is_some());
    // Both sides constant: Welch's t is undefined; a row, not an error.
    assert_eq!(rows[2]["outcome"], "untestable", "{v}");
    assert_eq!(rows[2]["p"], Value::Null);
    assert_eq!(v["only_in_b"][0]["label"], "ed25519 rustcrypto verify");
    assert_eq!(v["warnings"], json!(["seconds differs: A 1, B 0.2"]));
    check_documented(&v);
    let run = tlsperf(["compare", &a, &b]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    for needle in [
        "too few rounds (A 1, B 6)",
        "only in B: ed25519 rustcrypto verify",
        "warning: seconds differs: A 1, B 0.2",
        "not tested in 2",
        "untestable: ecdsa-p384 ring sign: cannot test: both samples have zero variance",
    ] {
        assert!(
            run.stdout.contains(needle),
            "no {needle:?} in\n{}",
            run.stdout
        );
    }
}

#[test]
fn wrong_pairs_exit_2_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let sign = write(
        d,
        "sign.json",
        &sign_doc(1.0, &[("ed25519", "ring", "sign", &SLOW)]),
    );
    let kx = write(
        d,
        "kx.json",
        &json!({
            "schema": "tlsperf-crypto-kx/1", "seconds": 1.0, "rounds": 5,
            "allocations_counted": true, "unavailable": [],
            "rows": [{"group": "x25519", "provider": "ring", "side": "client",
                      "share_len": 32, "ns_per_op": 1000.0, "rounds_ns": SLOW}],
        })
        .to_string(),
    );
    let samples = write(d, "samples.txt", "1\n2\n3\n");
    let load = write(d, "load.json", r#"{"schema": "tlsperf-load/1"}"#);
    let lab = write(
        d,
        "lab.json",
        r#"{"schema": "tlsperf-lab/1", "groups": []}"#,
    );
    let v9 = write(
        d,
        "v9.json",
        &sign_doc(1.0, &[]).replace("crypto-sign/1", "crypto-sign/9"),
    );
    let other_alg = write(
        d,
        "other.json",
        &sign_doc(1.0, &[("rsa-2048-pss", "ring", "sign", &SLOW)]),
    );
    let broken = write(
        d,
        "broken.json",
        r#"{"schema": "tlsperf-crypto-sign/1", "seconds": 1, "rounds": 5, "rows": [{}]}"#,
    );
    let cases: Vec<(&str, &str, &str, Vec<&str>)> = vec![
        (
            "kinds differ",
            &sign,
            &kx,
            vec![
                "sign.json",
                "tlsperf-crypto-sign/1",
                "kx.json",
                "tlsperf-crypto-kx/1",
            ],
        ),
        (
            "sample file",
            &sign,
            &samples,
            vec!["samples.txt", "sample file", "sign.json"],
        ),
        (
            "sample file first",
            &samples,
            &kx,
            vec!["samples.txt", "kx.json"],
        ),
        (
            "load result",
            &load,
            &sign,
            vec!["load.json", "tlsperf-load/1"],
        ),
        ("lab result", &sign, &lab, vec!["lab.json", "tlsperf-lab/1"]),
        (
            "unknown version",
            &v9,
            &sign,
            vec!["v9.json", "tlsperf-crypto-sign/9"],
        ),
        (
            "nothing in common",
            &sign,
            &other_alg,
            vec!["nothing in common"],
        ),
        ("malformed", &sign, &broken, vec!["broken.json:1:"]),
    ];
    for (what, a, b, needles) in cases {
        let run = tlsperf(["compare", a, b]);
        assert_eq!(run.code, 2, "{what}: {}", run.stderr);
        for n in needles {
            assert!(run.stderr.contains(n), "{what}: no {n:?} in {}", run.stderr);
        }
    }
    let run = tlsperf(["compare", &sign, &sign, "--higher-is-better"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    let run = tlsperf(["compare", &sign, &sign, "--alpha", "1.5"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("--alpha"), "{}", run.stderr);
}
