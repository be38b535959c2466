//! `tlsperf crypto`: every command runs briefly with `--json` and reports every expected
//! row with positive figures; signatures made by one implementation verify with the
//! others (so the benchmark measures real operations); bad input exits 2. No timing is
//! asserted.

#![allow(clippy::unwrap_used)] // tests unwrap: a panic is the failure report

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::{json_paths as paths, tlsperf};
use serde_json::Value;

use tlsperf::crypto::Implementation;
use tlsperf::crypto::sign::{self, SigAlg, TestKey};

const QUICK: [&str; 4] = ["--duration", "50ms", "--rounds", "2"];

fn json(args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    all.extend_from_slice(&QUICK);
    let run = tlsperf(&all);
    assert_eq!(run.code, 0, "{all:?} failed: {}", run.stderr);
    serde_json::from_str(&run.stdout).expect("valid JSON")
}

/// `docs/json-crypto.md`: documented paths per `## \`tlsperf crypto X\`` heading.
fn documented() -> BTreeMap<String, BTreeSet<String>> {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/json-crypto.md"))
        .unwrap();
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut current = None;
    for line in text.lines() {
        if let Some(h) = line.strip_prefix("## `tlsperf ") {
            current = Some(h.trim_end_matches('`').to_string());
            out.entry(current.clone().unwrap()).or_default();
        } else if line.starts_with("## ") {
            current = None;
        } else if let (Some(cmd), Some(row)) = (&current, line.strip_prefix("| `")) {
            let (path, _) = row.split_once('`').unwrap();
            out.get_mut(cmd).unwrap().insert(path.to_string());
        }
    }
    out
}

/// Every field printed is documented in docs/json-crypto.md and every documented field
/// is printed.
fn check_schema(command: &str, v: &Value) {
    let docs = documented();
    let doc = docs
        .get(command)
        .unwrap_or_else(|| panic!("docs/json-crypto.md has no section for `tlsperf {command}`"));
    let mut actual = BTreeSet::new();
    paths(v, "", &mut actual);
    let undocumented: Vec<_> = actual.difference(doc).collect();
    assert!(
        undocumented.is_empty(),
        "{command}: undocumented fields {undocumented:?}"
    );
    let missing: Vec<_> = doc.difference(&actual).collect();
    assert!(
        missing.is_empty(),
        "{command}: documented but not printed {missing:?}"
    );
}

fn positive(row: &Value, field: &str) -> f64 {
    let x = row[field]
        .as_f64()
        .unwrap_or_else(|| panic!("{field} missing in {row}"));
    assert!(x > 0.0 && x.is_finite(), "{field} = {x} in {row}");
    x
}

/// The figures every measured row carries.
fn check_measurement(row: &Value) {
    let ns = positive(row, "ns_per_op");
    let ops = positive(row, "ops_per_sec");
    assert!((ns * ops / 1e9 - 1.0).abs() < 1e-6, "{row}");
    assert!(positive(row, "min_ns") <= ns && ns <= positive(row, "max_ns"));
    assert_eq!(row["rounds_ns"].as_array().unwrap().len(), 2);
    assert!(row["ops"].as_u64().unwrap() >= 2);
    // The binary's allocator counts; a count of zero is possible, a missing one is not.
    assert!(row["bytes_per_op"].as_f64().unwrap() >= 0.0, "{row}");
    assert!(row["allocs_per_op"].as_f64().unwrap() >= 0.0, "{row}");
}

#[test]
fn sign_reports_every_algorithm_implementation_and_operation() {
    let v = json(&["crypto", "sign"]);
    assert_eq!(v["schema"], "tlsperf-crypto-sign/1");
    assert_eq!(v["allocations_counted"], true);
    assert_eq!(v["message_len"], 130);
    let rows = v["rows"].as_array().unwrap();
    for alg in SigAlg::ALL {
        for imp in Implementation::ALL {
            for op in ["sign", "verify"] {
                let row = rows
                    .iter()
                    .find(|r| {
                        r["alg"] == alg.name() && r["implementation"] == imp.name() && r["op"] == op
                    })
                    .unwrap_or_else(|| panic!("no row for {alg} {imp} {op}"));
                check_measurement(row);
                assert!(row["signature_len"].as_u64().unwrap() >= 64);
            }
        }
    }
    assert_eq!(rows.len(), SigAlg::ALL.len() * 3 * 2);
    check_schema("crypto sign", &v);
}

#[test]
fn sign_selection_and_human_table() {
    let v = json(&[
        "crypto",
        "sign",
        "--provider",
        "ring",
        "--alg",
        "ed25519,ecdsa-p256",
    ]);
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4);
    assert!(rows.iter().all(|r| r["implementation"] == "ring"));
    let mut args = vec![
        "crypto",
        "sign",
        "--provider",
        "aws-lc-rs",
        "--alg",
        "ed25519",
    ];
    args.extend_from_slice(&QUICK);
    let run = tlsperf(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("ed25519") && run.stdout.contains("ops/s"),
        "{}",
        run.stdout
    );
}

#[test]
fn signatures_cross_verify_between_implementations() {
    let msg = sign::message();
    let key = TestKey::generate(SigAlg::EcdsaP256.key_type()).unwrap();
    let signer = sign::load(SigAlg::EcdsaP256, Implementation::AWS_LC_RS, &key).unwrap();
    let mut sig = Vec::new();
    signer.sign(&msg, &mut sig).unwrap();
    let mut other = msg.clone();
    other[100] ^= 1;
    for imp in [Implementation::RING, Implementation::RustCrypto] {
        let v = sign::load(SigAlg::EcdsaP256, imp, &key).unwrap();
        v.verify(&msg, &sig)
            .unwrap_or_else(|e| panic!("{imp} rejected aws-lc-rs's signature: {e}"));
        assert!(
            v.verify(&other, &sig).is_err(),
            "{imp} accepted a signature over another message"
        );
    }
    // Every pair, for every algorithm family (one RSA size is enough here).
    for alg in [
        SigAlg::Ed25519,
        SigAlg::EcdsaP384,
        SigAlg::Rsa2048Pkcs1,
        SigAlg::Rsa2048Pss,
    ] {
        let key = TestKey::generate(alg.key_type()).unwrap();
        sign::cross_check(alg, &key, &msg).unwrap_or_else(|e| panic!("{alg}: {e}"));
    }
}

/// A list of groups is `--groups` (as for `serve` and the clients); `--group`, its spelling
/// before 2026-12-07, still works.
#[test]
fn kx_takes_groups_and_its_old_spelling() {
    for flag in ["--groups", "--group"] {
        let v = json(&[
            "crypto",
            "kx",
            flag,
            "x25519,secp256r1",
            "--provider",
            "ring",
        ]);
        let groups: BTreeSet<&str> = v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["group"].as_str().unwrap())
            .collect();
        assert_eq!(groups, BTreeSet::from(["x25519", "secp256r1"]), "{flag}");
    }
    let help = tlsperf(["crypto", "kx", "--help"]).stdout;
    assert!(help.contains("--groups <GROUPS>"), "{help}");
    assert!(!help.contains("--group <"), "{help}");
}

#[test]
fn kx_reports_every_group_provider_and_side() {
    let v = json(&["crypto", "kx"]);
    assert_eq!(v["schema"], "tlsperf-crypto-kx/1");
    let rows = v["rows"].as_array().unwrap();
    let groups = ["x25519", "secp256r1", "secp384r1", "x25519mlkem768"];
    for group in groups {
        for provider in ["aws-lc-rs", "ring"] {
            if group == "x25519mlkem768" && provider == "ring" {
                continue;
            }
            for side in ["client", "server"] {
                let row = rows
                    .iter()
                    .find(|r| r["group"] == group && r["provider"] == provider && r["side"] == side)
                    .unwrap_or_else(|| panic!("no row for {group} {provider} {side}"));
                check_measurement(row);
                assert!(row["share_len"].as_u64().unwrap() >= 32);
            }
        }
    }
    assert_eq!(rows.len(), 14);
    assert_eq!(v["unavailable"], serde_json::json!(["x25519mlkem768/ring"]));
    check_schema("crypto kx", &v);
}

#[test]
fn handshake_reports_every_shape_for_both_sides() {
    let v = json(&["crypto", "handshake"]);
    assert_eq!(v["schema"], "tlsperf-crypto-handshake/1");
    let rows = v["rows"].as_array().unwrap();
    for provider in ["aws-lc-rs", "ring"] {
        for tls in ["1.2", "1.3"] {
            for cert in ["ecdsa-p256", "ed25519", "rsa-2048"] {
                for kind in ["full", "resumed"] {
                    let row = rows
                        .iter()
                        .find(|r| {
                            r["provider"] == provider
                                && r["tls"] == tls
                                && r["cert"] == cert
                                && r["kind"] == kind
                        })
                        .unwrap_or_else(|| panic!("no row for {provider} {tls} {cert} {kind}"));
                    for side in ["client", "server"] {
                        let m = &row[side];
                        positive(m, "ns_per_op");
                        positive(m, "ops_per_sec");
                        assert!(m["ops"].as_u64().unwrap() >= 2, "{row}");
                    }
                    positive(row, "bytes_per_handshake");
                    let suite = row["negotiated"]["cipher_suite"].as_str().unwrap();
                    let want = match (tls, cert) {
                        ("1.3", _) => "TLS13_AES_128_GCM_SHA256",
                        (_, "rsa-2048") => "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
                        _ => "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
                    };
                    assert_eq!(suite, want, "{row}");
                    let version = if tls == "1.3" { "TLSv1.3" } else { "TLSv1.2" };
                    assert_eq!(row["negotiated"]["version"], version, "{row}");
                    let group = &row["negotiated"]["group"];
                    if tls == "1.2" && kind == "resumed" {
                        assert!(group.is_null(), "{row}");
                    } else {
                        assert_eq!(group, "x25519", "{row}");
                    }
                }
            }
        }
    }
    assert_eq!(rows.len(), 24);
    check_schema("crypto handshake", &v);
}

/// The categories one side called in one handshake: name → calls.
fn categories(ih: &Value) -> BTreeMap<String, u64> {
    ih["categories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            positive(c, "calls");
            positive(c, "ns");
            assert!(!c["rounds_ns"].as_array().unwrap().is_empty(), "{c}");
            (
                c["category"].as_str().unwrap().to_string(),
                c["calls"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn limit_times_the_crypto_inside_handshakes() {
    for provider in ["aws-lc-rs", "ring"] {
        let v = json(&[
            "crypto",
            "limit",
            "--cert",
            "ecdsa-p256",
            "--group",
            "x25519",
            "--tls",
            "1.3",
            "--provider",
            provider,
        ]);
        assert_eq!(v["schema"], "tlsperf-crypto-limit/2");
        let bias = positive(&v, "clock_bias_ns");
        assert!(bias < 5_000.0, "{bias}");
        let ops = v["operations"].as_array().unwrap();
        assert_eq!(ops.len(), 5);
        for o in ops {
            check_measurement(o);
        }
        let inside = v["in_handshake"].as_array().unwrap();
        assert_eq!(inside.len(), 4);
        let limits = v["limits"].as_array().unwrap();
        assert_eq!(limits.len(), 4);
        for (l, ih) in limits.iter().zip(inside) {
            let (side, kind) = (l["side"].as_str().unwrap(), l["kind"].as_str().unwrap());
            assert_eq!(
                (ih["side"].as_str(), ih["kind"].as_str()),
                (Some(side), Some(kind))
            );
            let cats = categories(ih);
            // What each side must call, and must not.
            let want: &[(&str, u64)] = match (kind, side) {
                ("full", "client") => &[
                    ("key_exchange", 2),
                    ("verify_chain", 2),
                    ("verify_handshake", 1),
                ],
                ("full", "server") => &[("key_exchange", 1), ("sign", 1)],
                ("resumed", "client") => &[("key_exchange", 2)],
                _ => &[("key_exchange", 1)],
            };
            for (cat, n) in want {
                assert_eq!(cats.get(*cat), Some(n), "{kind} {side}: {cats:?}");
            }
            for cat in ["hash", "key_schedule", "aead"] {
                assert!(cats.contains_key(cat), "{kind} {side}: {cats:?}");
            }
            if kind == "resumed" {
                assert!(
                    !cats.contains_key("sign") && !cats.contains_key("verify_chain"),
                    "{cats:?}"
                );
            }
            // Only the server opens tickets, and only in a resumption.
            assert_eq!(
                cats.contains_key("tickets"),
                kind == "resumed" && side == "server",
                "{kind} {side}: {cats:?}"
            );
            let sum: f64 = ih["categories"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["ns"].as_f64().unwrap())
                .sum();
            let crypto = positive(l, "crypto_ns");
            assert!((crypto - sum).abs() <= 1e-6 * sum, "{l}");
            assert_eq!(ih["crypto_ns"].as_f64(), Some(crypto));
            positive(ih, "instrumented_ns");
            let public: f64 = ih["categories"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|c| {
                    ["key_exchange", "sign", "verify_chain", "verify_handshake"]
                        .contains(&c["category"].as_str().unwrap())
                })
                .map(|c| c["ns"].as_f64().unwrap())
                .sum();
            assert!(
                (positive(l, "public_key_ns") - public).abs() <= 1e-6 * public,
                "{l}"
            );
            // The tight-loop figure sums the operations this kind does on this side.
            let tight: f64 = ops
                .iter()
                .filter(|o| o["side"] == side)
                .map(|o| {
                    let n = o[if kind == "full" {
                        "per_full"
                    } else {
                        "per_resumed"
                    }]
                    .as_f64()
                    .unwrap();
                    n * o["ns_per_op"].as_f64().unwrap()
                })
                .sum();
            assert!((positive(l, "tight_loop_public_key_ns") - tight).abs() <= 1e-6 * tight);
            let limit = positive(l, "limit_per_sec");
            assert!((limit * crypto / 1e9 - 1.0).abs() < 1e-9);
            let measured = positive(l, "measured_per_sec");
            let pct = positive(l, "percent_of_limit");
            assert!((pct - measured / limit * 100.0).abs() < 1e-6 * pct);
        }
        check_schema("crypto limit", &v);
    }
    // TLS 1.2 resumption has no public-key operation, but hashing, the PRF and record
    // protection still have a cost: a limit, and no public-key time.
    let v = json(&["crypto", "limit", "--tls", "1.2", "--cert", "ed25519"]);
    let resumed: Vec<_> = v["limits"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["kind"] == "resumed")
        .collect();
    assert_eq!(resumed.len(), 2);
    for l in resumed {
        assert_eq!(l["public_key_ns"].as_f64(), Some(0.0), "{l}");
        positive(l, "limit_per_sec");
    }
    for ih in v["in_handshake"].as_array().unwrap() {
        let cats = categories(ih);
        let full = ih["kind"] == "full";
        assert_eq!(cats.contains_key("key_exchange"), full, "{ih}");
        assert!(cats.contains_key("key_schedule"), "{ih}");
    }
}

#[test]
fn bad_input_exits_2() {
    for args in [
        &["crypto", "sign", "--duration", "0"][..],
        &["crypto", "sign", "--duration=-1s"],
        &["crypto", "sign", "--duration", "abc"],
        &["crypto", "sign", "--duration", "2"],
        &["crypto", "sign", "--duration", "25h"],
        &["crypto", "sign", "--seconds", "2"],
        &["crypto", "sign", "--rounds", "0"],
        &["crypto", "sign", "--alg", "dsa-1024"],
        &["crypto", "sign", "--provider", "openssl"],
        &["crypto", "kx", "--group", "x448"],
        &["crypto", "kx", "--provider", "rustcrypto"],
        &["crypto", "kx", "-d", "0s"],
        &[
            "crypto",
            "kx",
            "--group",
            "x25519mlkem768",
            "--provider",
            "ring",
        ],
    ] {
        let run = tlsperf(args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains("error"), "{args:?}: {}", run.stderr);
    }
}
