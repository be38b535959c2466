//! `tlsperf compare` and the statistics core against reference values (scipy, numpy).

#![allow(clippy::unwrap_used)] // tests unwrap: a panic is the failure report

mod common;

use common::{tlsperf, write};
use tlsperf::stats::{IqrFilter, Summary, welch_t_test};

const A: &str = "# baseline, ms\n12.1\n11.8\n12.6\n13.0\n12.2\n11.9\n12.4\n12.8\n12.0\n12.5\n";
const B: &str = "13.4\n13.9\n\n12.9 # a comment\n14.2\n13.1\n13.8\n14.0\n13.3\n";

#[test]
fn library_reference_values() {
    let a = [12.1, 11.8, 12.6, 13.0, 12.2, 11.9, 12.4, 12.8, 12.0, 12.5];
    let b = [13.4, 13.9, 12.9, 14.2, 13.1, 13.8, 14.0, 13.3];
    let w = welch_t_test(&Summary::of(&a).unwrap(), &Summary::of(&b).unwrap(), 0.95).unwrap();
    assert!((w.t - -6.014952).abs() < 1e-6, "{}", w.t);
    assert!((w.df - 13.878281).abs() < 1e-6, "{}", w.df);
    assert!((w.p - 3.29168e-05).abs() < 1e-6, "{}", w.p);

    let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 100.0];
    let f = IqrFilter::apply(&x);
    assert!((f.q1 - 3.25).abs() < 1e-6 && (f.q3 - 7.75).abs() < 1e-6);
    assert_eq!(f.outliers, vec![100.0]);
}

#[test]
fn cli_json_matches_scipy() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a.txt", A);
    let b = write(dir.path(), "b.txt", B);
    let run = tlsperf(["compare", &a, &b, "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    // One `tlsperf-compare/1` document for every kind of input: two sample files are
    // one row.
    assert_eq!(doc["schema"], "tlsperf-compare/1");
    assert_eq!(doc["kind"], "samples");
    assert_eq!(doc["rows"].as_array().map(Vec::len), Some(1));
    let v = &doc["rows"][0];
    let f = |p: &str| {
        v.pointer(p)
            .and_then(|x| x.as_f64())
            .unwrap_or_else(|| panic!("{p}"))
    };
    assert!((f("/welch/t") - -6.014952).abs() < 1e-6);
    assert!((f("/welch/df") - 13.878281).abs() < 1e-6);
    assert!((f("/welch/p") - 3.29168e-05).abs() < 1e-6);
    assert_eq!(f("/a/summary/n"), 10.0);
    assert_eq!(f("/b/summary/n"), 8.0);
    assert_eq!(v["significant"], true);
    assert!(f("/welch/ci_low") > 0.0 && f("/welch/ci_high") > f("/welch/ci_low"));
    assert_eq!(
        v["verdict"],
        "B is 10.1% slower than A (p=3.3e-05, significant at α=0.05)"
    );
}

#[test]
fn cli_human_output() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a.txt", A);
    let b = write(dir.path(), "b.txt", B);
    let run = tlsperf(["compare", &a, &b]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    for needle in [
        "median",
        "stddev",
        "IQR outliers dropped",
        "95% CI",
        "t = -6.015",
        "df = 13.88",
        "p = 3.3e-05",
        "B is 10.1% slower than A",
    ] {
        assert!(
            run.stdout.contains(needle),
            "missing {needle:?} in:\n{}",
            run.stdout
        );
    }
    assert!(!run.stdout.contains('\u{1b}'), "no color with NO_COLOR");
    let run = tlsperf(["compare", &a, &b, "--color", "always"]);
    assert!(run.stdout.contains('\u{1b}'), "color with --color always");
}

#[test]
fn outliers_are_dropped_unless_no_filter() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a.txt", "1\n2\n3\n4\n5\n6\n7\n8\n9\n100\n");
    let b = write(dir.path(), "b.txt", "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n");
    let run = tlsperf(["compare", &a, &b, "--json"]);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let v = &doc["rows"][0];
    assert_eq!(v["a"]["outliers_dropped"], 1);
    assert_eq!(v["a"]["filter"]["outliers"], serde_json::json!([100.0]));
    assert_eq!(v["a"]["filter"]["q1"], 3.25);
    assert_eq!(v["a"]["filter"]["q3"], 7.75);
    assert_eq!(v["b"]["outliers_dropped"], 0);
    let run = tlsperf(["compare", &a, &b, "--json", "--no-filter"]);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(doc["filter"], false);
    let v = &doc["rows"][0];
    // Null, not 0: no filter ran.
    assert_eq!(v["a"]["outliers_dropped"], serde_json::Value::Null);
    assert_eq!(v["a"]["summary"]["n"], 10);
    assert_eq!(v["a"]["filter"], serde_json::Value::Null);
}

#[test]
fn no_difference_and_higher_is_better() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a.txt", "10\n11\n12\n13\n14\n");
    let b = write(dir.path(), "b.txt", "10.5\n11.5\n11\n13.5\n13\n");
    let run = tlsperf(["compare", &a, &b]);
    assert_eq!(run.code, 0);
    assert!(
        run.stdout.contains("no significant difference (p="),
        "{}",
        run.stdout
    );
    let fast = write(dir.path(), "c.txt", "20\n21\n22\n23\n24\n");
    let run = tlsperf([
        "compare",
        &a,
        &fast,
        "--higher-is-better",
        "--alpha",
        "0.01",
    ]);
    assert!(
        run.stdout.contains("higher (better) than A"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("α=0.01"), "{}", run.stdout);
}

#[test]
fn bad_sample_files_exit_2_naming_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let good = write(dir.path(), "good.txt", A);
    let empty = write(dir.path(), "empty.txt", "");
    let comments = write(dir.path(), "comments.txt", "# only\n\n");
    let bad = write(dir.path(), "bad.txt", "1.0\n2.0\n# fine\nfast\n");
    let one = write(dir.path(), "one.txt", "42\n");
    let missing = dir
        .path()
        .join("missing.txt")
        .to_string_lossy()
        .into_owned();
    let dirpath = dir.path().to_string_lossy().into_owned();

    let cases: Vec<(&str, Vec<&str>, Vec<&str>)> = vec![
        (
            "empty",
            vec![&good, &empty],
            vec!["empty.txt", "no samples"],
        ),
        (
            "only comments",
            vec![&comments, &good],
            vec!["comments.txt", "no samples"],
        ),
        (
            "non-numeric",
            vec![&good, &bad],
            vec!["bad.txt:4", "not a number", "'fast'"],
        ),
        (
            "one sample",
            vec![&one, &good],
            vec!["one.txt", "at least 2 samples, got 1"],
        ),
        (
            "missing",
            vec![&good, &missing],
            vec!["missing.txt", "No such file"],
        ),
        (
            "directory",
            vec![&dirpath, &good],
            vec!["cannot read", "it is a directory"],
        ),
    ];
    for (what, args, needles) in cases {
        let mut full = vec!["compare"];
        full.extend(args);
        let run = tlsperf(&full);
        assert_eq!(run.code, 2, "{what}: {}", run.stderr);
        for n in needles {
            assert!(
                run.stderr.contains(n),
                "{what}: missing {n:?} in {}",
                run.stderr
            );
        }
        assert!(run.stdout.is_empty(), "{what}: no output on error");
    }
    let run = tlsperf(["compare", &good, &good, "--alpha", "2"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("--alpha"), "{}", run.stderr);
    let zero = write(dir.path(), "zero.txt", "5\n5\n5\n");
    let run = tlsperf(["compare", &zero, &zero]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("zero variance"), "{}", run.stderr);
}

/// `compare <(…) <(…)`: each pipe is read once, whole (format sniffing used to consume
/// the first 256 bytes of each: 146 samples compared instead of 200).
#[test]
fn pipes_are_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = String::new();
    let mut b = String::new();
    for i in 0..100 {
        a += &format!("{}.{:03}\n", 10 + i % 7, i);
        b += &format!("{}.{:03}\n", 11 + i % 5, i);
    }
    let pa = dir.path().join("a.txt");
    let pb = dir.path().join("b.txt");
    std::fs::write(&pa, &a).unwrap();
    std::fs::write(&pb, &b).unwrap();
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "'{}' compare --json <(cat '{}') <(cat '{}')",
            env!("CARGO_BIN_EXE_tlsperf"),
            pa.display(),
            pb.display()
        ))
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let from_files = tlsperf([
        "compare",
        "--json",
        pa.to_str().unwrap(),
        pb.to_str().unwrap(),
    ]);
    let w: serde_json::Value = serde_json::from_str(&from_files.stdout).unwrap();
    let (v, w) = (&v["rows"][0], &w["rows"][0]);
    for side in ["a", "b"] {
        assert_eq!(v[side]["raw"]["n"], 100, "{side}: {}", v[side]);
        assert_eq!(v[side]["raw"]["mean"], w[side]["raw"]["mean"], "{side}");
    }
}

/// One rule for every kind of input: `--alpha` outside (0, 1) exits 2 (two lab results
/// used to print "too few rounds" and exit 0), and `--higher-is-better` is for sample
/// files only (results know the direction of each row).
#[test]
fn alpha_and_direction_rules_hold_for_every_kind() {
    let dir = tempfile::tempdir().unwrap();
    let samples = write(dir.path(), "a.txt", A);
    let docs: Vec<String> = [
        ("load.json", "tlsperf-load/1"),
        ("lab.json", "tlsperf-lab/2"),
        ("lab1.json", "tlsperf-lab/1"),
        ("sign.json", "tlsperf-crypto-sign/1"),
        ("limit.json", "tlsperf-crypto-limit/2"),
    ]
    .iter()
    .map(|(name, schema)| write(dir.path(), name, &format!("{{\"schema\": \"{schema}\"}}")))
    .collect();
    for input in docs.iter().chain([&samples]) {
        for alpha in ["2", "0", "-0.1", "1"] {
            let flag = format!("--alpha={alpha}");
            let run = tlsperf(["compare", input, input, &flag]);
            assert_eq!(run.code, 2, "{input} --alpha {alpha}: {}", run.stderr);
            assert!(run.stderr.contains("--alpha"), "{}", run.stderr);
            assert!(run.stdout.is_empty());
        }
    }
    for input in &docs {
        let run = tlsperf(["compare", input, input, "--higher-is-better"]);
        assert_eq!(run.code, 2, "{input}: {}", run.stderr);
        assert!(
            run.stderr
                .contains("--higher-is-better applies to sample files only"),
            "{}",
            run.stderr
        );
    }
}
