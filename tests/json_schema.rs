//! Every command's `--json` output against `docs/json.md`: each field printed is
//! documented there, and each documented top-level field is printed.

#![allow(clippy::unwrap_used)] // tests unwrap: a panic is the failure report

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;

use common::{Serve, spawn_tls_server, tlsperf, write};
use serde_json::Value;
use tlsperf::pki::{PkiOptions, TestPki};

/// Documented paths per command heading, with their type column.
fn documented() -> BTreeMap<String, BTreeMap<String, String>> {
    let text = fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/json.md")).unwrap();
    let mut out: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut current = None;
    for line in text.lines() {
        if let Some(h) = line.strip_prefix("## `tlsperf ") {
            current = Some(h.trim_end_matches('`').to_string());
            out.entry(current.clone().unwrap()).or_default();
        } else if line.starts_with("## ") {
            // A section of its own (shared fields, e.g. Link counters), not a command's.
            current = None;
        } else if let (Some(cmd), Some(row)) = (&current, line.strip_prefix("| `")) {
            let (path, rest) = row.split_once('`').unwrap();
            let ty = rest.split('|').nth(1).unwrap_or("").trim().to_string();
            out.get_mut(cmd).unwrap().insert(path.to_string(), ty);
        }
    }
    out
}

fn flatten(v: &Value, prefix: &str, docs: &BTreeMap<String, String>, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                out.insert(path.clone());
                if docs.get(&path).is_some_and(|t| t == "map") {
                    continue;
                }
                flatten(child, &path, docs, out);
            }
        }
        Value::Array(items) => {
            for item in items {
                if item.is_object() {
                    let path = format!("{prefix}[]");
                    if let Value::Object(map) = item {
                        for (k, child) in map {
                            let p = format!("{path}.{k}");
                            out.insert(p.clone());
                            if docs.get(&p).is_some_and(|t| t == "map") {
                                continue;
                            }
                            flatten(child, &p, docs, out);
                        }
                    }
                }
            }
        }
        _ => {}
    }
}

fn check(command: &str, run: common::Run, docs: &BTreeMap<String, BTreeMap<String, String>>) {
    assert_eq!(run.code, 0, "{command}: {}", run.stderr);
    let v: Value = serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{command}: {e}"));
    check_value(command, &v, docs);
}

/// Runs `tlsperf serve --listen 127.0.0.1:0 ARGS --duration 300ms --json` and checks its
/// two lines: the listening line, then the summary against the `summary` section.
fn check_serve(args: &[&str], summary: &str, docs: &BTreeMap<String, BTreeMap<String, String>>) {
    let mut all = vec!["serve", "--listen", "127.0.0.1:0"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--duration", "300ms", "--json"]);
    let run = tlsperf(&all);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let mut lines = run.stdout.lines();
    check_value(
        "serve (listening)",
        &serde_json::from_str(lines.next().unwrap()).unwrap(),
        docs,
    );
    check_value(
        summary,
        &serde_json::from_str(lines.next().unwrap()).unwrap(),
        docs,
    );
}

fn check_value(command: &str, v: &Value, docs: &BTreeMap<String, BTreeMap<String, String>>) {
    let doc = docs
        .get(command)
        .unwrap_or_else(|| panic!("docs/json.md has no section for `tlsperf {command}`"));
    let mut actual = BTreeSet::new();
    flatten(v, "", doc, &mut actual);
    let undocumented: Vec<_> = actual.iter().filter(|p| !doc.contains_key(*p)).collect();
    assert!(
        undocumented.is_empty(),
        "{command}: fields missing from docs/json.md: {undocumented:?}"
    );
    let top_missing: Vec<_> = doc
        .keys()
        .filter(|p| !p.contains('.') && !p.contains('['))
        .filter(|p| !actual.contains(*p) && !doc[*p].contains("optional"))
        .collect();
    assert!(
        top_missing.is_empty(),
        "{command}: documented but not printed: {top_missing:?}"
    );
}

#[test]
fn every_json_output_matches_the_documented_schema() {
    let docs = documented();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let pki_dir = d.join("pki");
    check(
        "pki init",
        tlsperf(["pki", "init", pki_dir.to_str().unwrap(), "--json"]),
        &docs,
    );
    let bundle = d.join("bundle.pem");
    check(
        "pki bundle",
        tlsperf([
            "pki",
            "bundle",
            "--count",
            "30",
            "--cross-signed",
            "3",
            "--out",
            bundle.to_str().unwrap(),
            "--json",
        ]),
        &docs,
    );
    let a = write(d, "a.txt", "1\n2\n3\n4\n100\n");
    let b = write(d, "b.txt", "2\n3\n4\n5\n6\n");
    check("compare", tlsperf(["compare", &a, &b, "--json"]), &docs);

    let img = d.join("img");
    fs::create_dir_all(img.join("etc/ssl/certs")).unwrap();
    fs::copy(&bundle, img.join("etc/ssl/certs/ca-certificates.crt")).unwrap();
    check(
        "trust probe",
        tlsperf(["trust", "probe", "--root", img.to_str().unwrap(), "--json"]),
        &docs,
    );

    // A bundle with a problem, so that problem fields are printed too.
    let damaged = d.join("damaged.pem");
    let mut text = fs::read_to_string(&bundle).unwrap();
    text.push_str("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n");
    fs::write(&damaged, text).unwrap();
    check(
        "trust load",
        tlsperf([
            "trust",
            "load",
            "--bundle",
            damaged.to_str().unwrap(),
            "--iterations",
            "3",
            "--x509",
            "--json",
        ]),
        &docs,
    );
    check(
        "trust load",
        tlsperf([
            "trust",
            "load",
            "--system",
            "--root",
            img.to_str().unwrap(),
            "--iterations",
            "2",
            "--json",
        ]),
        &docs,
    );
    // A damaged bundle: the analysis is printed, then exit 2 for the damage.
    let run = tlsperf([
        "trust",
        "analyze",
        damaged.to_str().unwrap(),
        "--list",
        "--json",
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("damaged block"), "{}", run.stderr);
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    check_value("trust analyze", &v, &docs);

    let p = TestPki::generate(&PkiOptions::default()).unwrap();
    let chain = write(
        d,
        "chain.pem",
        &format!("{}{}", p.server.pem, p.intermediate.pem),
    );
    let roots = write(d, "roots.pem", &p.root.pem);
    check(
        "verify",
        tlsperf([
            "verify",
            "--chain",
            &chain,
            "--host",
            "localhost",
            "--roots",
            &roots,
            "--json",
        ]),
        &docs,
    );
    check(
        "verify bench",
        tlsperf([
            "verify",
            "bench",
            "--sizes",
            "1,20",
            "--iterations",
            "5",
            "--max-time",
            "20ms",
            "--threads",
            "1",
            "--json",
        ]),
        &docs,
    );
    check_serve(&["--metrics", "127.0.0.1:0"], "serve (summary)", &docs);
    check_serve(&["--quic"], "serve (summary)", &docs);
    check_serve(
        &["--stack", "actix", "--threads", "1"],
        "serve --stack actix (summary)",
        &docs,
    );
    let ring = d.join("ticket.keys");
    check(
        "tickets",
        tlsperf(["tickets", "init", ring.to_str().unwrap(), "--json"]),
        &docs,
    );
    check(
        "tickets",
        tlsperf(["tickets", "rotate", ring.to_str().unwrap(), "--json"]),
        &docs,
    );
    let source = d.join("source.pem");
    fs::write(
        &source,
        format!("{}{}", fs::read_to_string(&bundle).unwrap(), p.root.pem),
    )
    .unwrap();
    let port = spawn_tls_server(p.server_chain(), p.server.private_key_der(), 1);
    let out = d.join("trimmed.pem");
    check(
        "trust trim",
        tlsperf([
            "trust",
            "trim",
            "--source",
            source.to_str().unwrap(),
            "--keep-for",
            &format!("127.0.0.1:{port}"),
            "--out",
            out.to_str().unwrap(),
            "--json",
        ]),
        &docs,
    );

    // Against a running `tlsperf serve`: with warm connections, and with none (`warm` null).
    let ca = d.join("serve-ca.pem");
    let ca = ca.to_str().unwrap();
    let served = Serve::start(&["--gen-cert", "ecdsa-p256", "--write-ca", ca]);
    for n in ["3", "1"] {
        check(
            "handshake",
            tlsperf([
                "handshake",
                &served.url(),
                "-n",
                n,
                "--cacert",
                ca,
                "--json",
            ]),
            &docs,
        );
    }

    // Load runs: with everything optional printed (--rate, --server-pid, both handshake
    // kinds), and with nothing answered (errors, null distributions); merge prints the
    // same schema.
    let pid = served.pid().to_string();
    let a = d.join("load-a.json");
    let run = tlsperf([
        "load",
        &served.url(),
        "-d",
        "600ms",
        "-c",
        "2",
        "--rate",
        "100",
        "--requests-per-conn",
        "5",
        "--server-pid",
        &pid,
        "--cacert",
        ca,
        "--out",
        a.to_str().unwrap(),
        "--json",
    ]);
    check("load", run, &docs);
    let refused = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let run = tlsperf([
        "load",
        &format!("https://127.0.0.1:{refused}/"),
        "-n",
        "2",
        "--insecure",
        "--json",
    ]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    check_value("load", &serde_json::from_str(&run.stdout).unwrap(), &docs);
    let b = d.join("load-b.json");
    let run = tlsperf([
        "load",
        &served.url(),
        "-n",
        "20",
        "--http2",
        "--cacert",
        ca,
        "--out",
        b.to_str().unwrap(),
        "-q",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        docs.contains_key("merge"),
        "docs/json.md has no `tlsperf merge` note"
    );
    let merged = d.join("merged.json");
    let run = tlsperf([
        "merge",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        // HTTP/1.1 and HTTP/2 runs: every optional field present in one of them.
        "--allow-mixed",
        "--out",
        merged.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    check_value("load", &serde_json::from_str(&run.stdout).unwrap(), &docs);

    // An observation of a capture without frames prints every top-level field (the
    // captures of real handshakes are in tests/observe.rs).
    let pcap = d.join("empty.pcap");
    let mut header = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0];
    header.extend([0; 8]);
    header.extend(65535u32.to_le_bytes());
    header.extend(1u32.to_le_bytes());
    fs::write(&pcap, header).unwrap();
    let obs = d.join("observe.json");
    check(
        "observe",
        tlsperf([
            "observe",
            "--pcap",
            pcap.to_str().unwrap(),
            "--out",
            obs.to_str().unwrap(),
            "--json",
        ]),
        &docs,
    );
    // The observation twice, as two files (one file given twice is refused).
    let obs2 = d.join("observe-2.json");
    fs::copy(&obs, &obs2).unwrap();
    let run = tlsperf([
        "merge",
        obs.to_str().unwrap(),
        obs2.to_str().unwrap(),
        "--out",
        d.join("observe-merged.json").to_str().unwrap(),
        "--json",
    ]);
    check("observe", run, &docs);
}

#[test]
fn lab_json_matches_the_documented_schema() {
    let docs = documented();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report");
    check(
        "lab",
        tlsperf([
            "lab",
            "--only",
            "mtls",
            "--rounds",
            "3",
            "--out",
            out.to_str().unwrap(),
            "--json",
        ]),
        &docs,
    );
}

/// `observe report --json` on a window stream of one window and one anomaly event.
#[test]
fn observe_report_json_matches_the_documented_schema() {
    let docs = documented();
    let dir = tempfile::tempdir().unwrap();
    let q = r#"{"count":10,"p50_ns":1000000,"p90_ns":2000000,"p95_ns":3000000,"p99_ns":4000000}"#;
    let series = r#"{"view":"wire","role":"server","process":"nginx","port":443}"#;
    let window = format!(
        r#"{{"type":"window","start_ns":1796428800000000000,"end_ns":1796428860000000000,"seconds":60.0,"wire_failures":{{}},"late":0,"series":[{{"view":"wire","role":"server","process":"nginx","port":443,"handshakes":10,"per_second":0.2,"peak_per_second":1,"failures":{{}},"resumed_share":0.0,"kinds":{{}},"versions":{{}},"groups":{{}},"sni":{{}},"phases":{{"first_app_byte":{q}}}}}]}}"#
    );
    let anomaly = format!(
        r#"{{"type":"anomaly","state":"start","series":{series},"quantile":"p90","phase":"first_app_byte","baseline_ns":1,"threshold_ns":2,"now_ns":3,"since_ns":1796428800000000000,"at_ns":1796428860000000000,"moved":"connect","share":1.0,"phases":[{{"phase":"connect","baseline_ns":1,"now_ns":3}}]}}"#
    );
    let file = write(dir.path(), "w.jsonl", &format!("{window}\n{anomaly}\n"));
    let run = tlsperf(["observe", "report", &file, "--slo", "p95=30ms", "--json"]);
    check("observe report`: the audit of window streams", run, &docs);
}
