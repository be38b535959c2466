//! `tlsperf lab`: a short run of two groups writes a complete report (results.json as
//! documented and as printed, report.md, index.html) whose HTML renders in headless
//! Chromium (when installed) with no console errors, every chart and the numbers of
//! results.json; two lab results compare; Ctrl-C keeps the finished groups; bad input
//! exits 2; the OCSP group runs, and the response it staples arrives whole; every group
//! has its A/A control and every comparison its MDE; a target that is down or does not
//! verify stops the run before the matrix (exit 1), a cell whose requests fail is marked
//! failed and never recommended, and a failed baseline exits 1.

#![allow(clippy::unwrap_used)] // tests unwrap: a panic is the failure report

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Serve, have, tlsperf};
use serde_json::Value;

/// Runs `tlsperf lab --only GROUPS --rounds 3 --out DIR --json` and returns the printed
/// result.
fn lab(dir: &Path, groups: &str) -> Value {
    let run = tlsperf([
        "lab",
        "--only",
        groups,
        "--rounds",
        "3",
        "--out",
        dir.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}", run.stdout))
}

fn cell<'a>(v: &'a Value, group: &str, name: &str) -> &'a Value {
    v["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["group"] == group)
        .and_then(|g| {
            g["cells"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["name"] == name)
        })
        .unwrap_or_else(|| panic!("no cell {group}/{name}"))
}

/// Every handshake of a round resumed but each connection slot's first (a round is a
/// load run of its own: its 4 slots start with empty session caches).
fn resumes_after_each_slots_first(c: &Value) {
    for r in c["rounds"].as_array().unwrap() {
        let n = r["completed"].as_f64().unwrap();
        let full = (1.0 - r["resumption_rate"].as_f64().unwrap()) * n;
        assert!(
            full < 4.5,
            "{}: {full} of {n} handshakes full: {r}",
            c["name"]
        );
    }
}

fn mean(c: &Value, metric: &str) -> f64 {
    c["summary"][metric]["mean"]
        .as_f64()
        .unwrap_or_else(|| panic!("no {metric} in {}", c["summary"]))
}

/// The value of `attr="…"` in `tag`.
fn attr<'a>(tag: &'a str, attr: &str) -> Option<&'a str> {
    let key = format!("{attr}=\"");
    let start = tag.find(&key)? + key.len();
    let end = tag[start..].find('"')?;
    Some(&tag[start..start + end])
}

#[test]
fn quick_groups_write_a_complete_report() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report");
    let v = lab(&out, "resumption,tls");

    // The result printed is the one written.
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(v, written);
    assert_eq!(v["schema"], "tlsperf-lab/2");
    // Pinned apart when there are two CPUs, and said so either way.
    let pinning = &v["machine"]["pinning"];
    assert!(pinning["note"].as_str().unwrap().len() > 10, "{pinning}");
    let available = pinning["available"].as_array().unwrap().len();
    assert_eq!(v["machine"]["cores"], available, "{}", v["machine"]);
    if available >= 2 {
        assert_ne!(pinning["client_cpu"], pinning["server_cpu"], "{pinning}");
        assert!(pinning["server_cpu"].is_u64(), "{pinning}");
    }
    assert_eq!(v["interrupted"], false);
    assert_eq!(v["options"]["rounds"], 3);
    let groups: Vec<&str> = v["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["group"].as_str().unwrap())
        .collect();
    assert_eq!(groups, ["resumption", "tls"]);
    // Nothing else in the report directory: no temporary files left.
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["index.html", "report.md", "results.json"]);

    for g in v["groups"].as_array().unwrap() {
        assert_eq!(g["baseline"], g["cells"][0]["name"]);
        // The A/A control: last, the baseline's settings, compared like any other cell.
        let cells = g["cells"].as_array().unwrap();
        let control = cells.last().unwrap();
        assert_eq!(control["name"], "baseline-again");
        assert_eq!(control["control"], true);
        assert_eq!(control["settings"], {
            let mut s = cells[0]["settings"].clone();
            s["name"] = control["name"].clone();
            s["label"] = control["label"].clone();
            s
        });
        assert_eq!(
            cells.iter().filter(|c| c["control"] == true).count(),
            1,
            "{}",
            g["group"]
        );
        for (i, c) in g["cells"].as_array().unwrap().iter().enumerate() {
            assert_eq!(c["failed"], false, "{}", c["name"]);
            let rounds = c["rounds"].as_array().unwrap();
            assert_eq!(rounds.len(), 3, "{}", c["name"]);
            for r in rounds {
                assert!(r["completed"].as_u64().unwrap() > 0, "{r}");
                assert_eq!(r["failed"], 0, "{} {r} {}", c["name"], c["errors"]);
                assert!(r["handshakes_per_s"].as_f64().unwrap() > 0.0, "{r}");
                assert!(
                    r["server_cpu_us_per_handshake"].as_f64().unwrap() > 0.0,
                    "{r}"
                );
                assert!(r["server_rss_kib"].as_u64().unwrap() > 0, "{r}");
            }
            // The summary is the mean of the rounds.
            let m: f64 = rounds
                .iter()
                .map(|r| r["handshakes_per_s"].as_f64().unwrap())
                .sum::<f64>()
                / 3.0;
            assert!((mean(c, "handshakes_per_s") - m).abs() < 1e-6 * m.max(1.0));
            assert_eq!(c["request_cdf"].as_array().unwrap().len(), 101);
            if i == 0 {
                assert!(c["vs_baseline"].as_object().unwrap().is_empty());
            } else {
                // Server CPU per handshake, throughput and latency: each its own verdict,
                // p and minimum detectable effect.
                for metric in [
                    "server_cpu_us_per_handshake",
                    "handshakes_per_s",
                    "request_mean_ms",
                ] {
                    let vs = &c["vs_baseline"][metric];
                    assert!(vs["p"].as_f64().unwrap() >= 0.0, "{metric} {vs}");
                    assert!(vs["mde"].as_f64().unwrap() > 0.0, "{metric} {vs}");
                    let verdict = vs["verdict"].as_str().unwrap();
                    if vs["significant"] == false {
                        assert!(verdict.contains("no difference larger than"), "{vs}");
                    }
                }
            }
        }
    }
    // What each cell is about, measured (not timings): resumption happens exactly where
    // it should, and tickets only survive a change of instance with shared keys.
    assert_eq!(mean(cell(&v, "resumption", "off"), "resumption_rate"), 0.0);
    for name in ["stateful", "tickets", "tickets-2-shared-keys"] {
        resumes_after_each_slots_first(cell(&v, "resumption", name));
    }
    let own = mean(
        cell(&v, "resumption", "tickets-2-own-keys"),
        "resumption_rate",
    );
    assert!(own < 0.8, "own keys: resumption rate {own}");
    assert!(
        cell(&v, "resumption", "tickets")["handshake_resumed_hist"]
            .as_array()
            .unwrap()
            .len()
            == 30
    );
    assert_eq!(mean(cell(&v, "tls", "1.2"), "resumption_rate"), 0.0);
    // The crypto limits of the configurations run, and each cell's share of its limit.
    let limits = v["crypto_limits"].as_array().unwrap();
    let tls: Vec<&str> = limits.iter().map(|l| l["tls"].as_str().unwrap()).collect();
    assert!(tls.contains(&"1.2") && tls.contains(&"1.3"), "{limits:?}");
    for l in limits {
        assert!(l["full_ns"].as_f64().unwrap() > 0.0, "{l}");
        assert!(l["full_per_s"].as_f64().unwrap() > 0.0, "{l}");
    }
    for g in v["groups"].as_array().unwrap() {
        for c in g["cells"].as_array().unwrap() {
            // The limit is timed on the wall clock, the server's CPU from /proc: on a busy
            // machine the ratio can pass 100%, so only its presence is checked here.
            let p = c["crypto_limit_pct"].as_f64().unwrap();
            assert!(
                p > 0.0 && p.is_finite(),
                "{}: {p}% of the crypto limit",
                c["name"]
            );
        }
    }

    // The A/A tally counts the controls' comparisons: three metrics in each group.
    let aa = &v["aa_control"];
    assert_eq!(aa["compared"], 6, "{aa}");
    let significant: u64 = v["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["cells"].as_array().unwrap())
        .filter(|c| c["control"] == true)
        .flat_map(|c| c["vs_baseline"].as_object().unwrap().values())
        .filter(|vs| vs["significant"] == true)
        .count() as u64;
    assert_eq!(aa["significant"].as_u64().unwrap(), significant, "{aa}");
    // Never recommended: the control is not a change.
    for r in v["recommendations"].as_array().unwrap() {
        assert_ne!(r["to"], "baseline-again", "{r}");
    }

    // Markdown: every cell's row.
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("## What to change"), "{md}");
    assert!(md.contains("A/A controls"), "{md}");
    assert!(md.contains("CPU pinning:"), "{md}");
    assert!(md.contains("server CPU/handshake vs baseline"), "{md}");
    assert!(md.contains("MDE ±"), "{md}");
    for name in [
        "tickets-2-shared-keys",
        "tickets-2-own-keys",
        "1.2",
        "baseline-again",
    ] {
        assert!(md.contains(&format!("| {name} (")), "{name}: {md}");
    }

    // Two lab results compare configuration by configuration.
    let run = tlsperf([
        "compare",
        out.join("results.json").to_str().unwrap(),
        out.join("results.json").to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // The one comparison document of every kind (lab results used to print an array of
    // per-cell objects): a row per configuration and compared metric.
    let doc: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(doc["schema"], "tlsperf-compare/1");
    assert_eq!(doc["kind"], "lab");
    let rows = doc["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 9 * 3, "{doc}");
    assert_eq!(rows[0]["identity"]["group"], "resumption");
    for metric in ["handshakes_per_s", "server_cpu_us_per_handshake"] {
        let first = rows
            .iter()
            .find(|r| r["identity"]["metric"] == metric)
            .unwrap();
        assert_eq!(first["identity"]["group"], "resumption");
        assert_eq!(first["significant"], false, "{first}");
    }
    // Identical inputs: nothing differs.
    assert!(rows.iter().all(|r| r["significant"] == false), "{doc}");

    render_in_chromium(&out.join("index.html"), &v);
}

/// Loads the page in headless Chromium: no console messages, every chart drawn, every
/// table figure equal to results.json's. Skipped (with the reason) without Chromium.
fn render_in_chromium(page: &Path, v: &Value) {
    let Some(chromium) = ["chromium", "chromium-browser"].into_iter().find(|c| {
        Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    }) else {
        common::missing(
            "chromium",
            "not rendering the report (apt-get install chromium)",
        );
        return;
    };
    let profile = tempfile::tempdir().unwrap();
    let output = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&output.stdout);
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "chromium: {log}");
    assert!(dom.contains("tlsperf lab report"), "{dom}");
    let console: Vec<&str> = log.lines().filter(|l| l.contains("CONSOLE")).collect();
    assert!(console.is_empty(), "console messages: {console:?}");
    // Charts: bars and CDF for every group, the full/resumed histogram where there are
    // resumed handshakes; each drawn (bars, lines or bins in it).
    let mut expected = 0;
    for g in v["groups"].as_array().unwrap() {
        expected += 2;
        if g["cells"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| !c["handshake_resumed_hist"].as_array().unwrap().is_empty())
        {
            expected += 1;
        }
    }
    let charts: Vec<&str> = dom.split("<svg class=\"chart\"").skip(1).collect();
    assert_eq!(charts.len(), expected, "charts in the page");
    for c in &charts {
        let body = &c[..c.find("</svg>").expect("a closed svg")];
        assert!(
            body.contains("class=\"bar\"")
                || body.contains("<polyline")
                || body.contains("class=\"bin\""),
            "an empty chart: {body}"
        );
    }
    // Tables: every figure is results.json's, rounded as shown.
    let mut checked = 0;
    for g in v["groups"].as_array().unwrap() {
        let section_start = dom
            .find(&format!(
                "<section class=\"group\" data-group=\"{}\"",
                g["group"].as_str().unwrap()
            ))
            .expect("a section per group");
        let section = &dom[section_start..];
        let section = &section[..section.find("</section>").unwrap()];
        for c in g["cells"].as_array().unwrap() {
            // Its row in the compact table and in the table of all figures.
            let tag = format!("<tr data-cell=\"{}\"", c["name"].as_str().unwrap());
            let rows: Vec<&str> = section
                .match_indices(&tag)
                .map(|(i, _)| {
                    let row = &section[i..];
                    &row[..row.find("</tr>").unwrap()]
                })
                .collect();
            assert_eq!(rows.len(), 2, "rows for {}", c["name"]);
            for td in rows.iter().flat_map(|row| row.split("<td").skip(1)) {
                let (Some(metric), Some(value)) = (attr(td, "data-metric"), attr(td, "data-value"))
                else {
                    continue;
                };
                let want = if metric == "crypto_limit_pct" {
                    c[metric].as_f64().unwrap()
                } else {
                    mean(c, metric)
                };
                let decimals = value.split('.').nth(1).map_or(0, str::len);
                assert_eq!(
                    value,
                    format!("{want:.decimals$}"),
                    "{}/{} {metric}",
                    g["group"],
                    c["name"]
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 7 * 10, "only {checked} figures checked");
    // At 1,400 px the compact tables fit the page: no sideways scrolling to reach a
    // verdict (measured in the page, loaded in a frame of that width).
    let frame = page.with_file_name("width-check.html");
    std::fs::write(
        &frame,
        r#"<!doctype html><html><body style="margin:0">
<iframe id="f" src="index.html" style="width:1400px;height:900px;border:0"></iframe>
<pre id="out">not measured</pre>
<script>
document.getElementById('f').onload = function () {
  var d = this.contentDocument, w = d.documentElement.clientWidth, bad = [];
  var t = d.querySelectorAll('table.compact');
  t.forEach(function (x) {
    var r = x.getBoundingClientRect();
    if (r.right > w || x.scrollWidth > x.clientWidth + 1) bad.push(x.closest('section').dataset.group + ':' + Math.round(r.right));
  });
  var hidden = d.querySelectorAll('details:not([open]) table').length;
  document.getElementById('out').textContent = 'viewport=' + w + ' compact=' + t.length + ' behind-details=' + hidden + ' too-wide=[' + bad.join(',') + ']';
};
</script></body></html>"#,
    )
    .unwrap();
    let profile = tempfile::tempdir().unwrap();
    let output = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--allow-file-access-from-files",
            "--window-size=1400,900",
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", frame.display()))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&output.stdout);
    let groups = v["groups"].as_array().unwrap().len();
    // The frame is 1,400 px wide; its page's viewport is that less a scroll bar.
    assert!(
        dom.contains("viewport=13"),
        "{}",
        &dom[dom.find("<pre").unwrap_or(0)..]
    );
    let want = format!(" compact={groups} behind-details={groups} too-wide=[]");
    assert!(
        dom.contains(&want),
        "want {want}: {}",
        &dom[dom.find("<pre").unwrap_or(0)..]
    );
}

#[test]
fn stack_group_runs_hyper_axum_and_actix_on_one_server_config() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report");
    let v = lab(&out, "stack");
    let groups = v["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 1);
    let g = &groups[0];
    assert_eq!(g["group"], "stack");
    assert_eq!(g["title"], "Server stack (same rustls ServerConfig)");
    assert_eq!(g["baseline"], "hyper");
    let names: Vec<&str> = g["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["hyper", "axum", "actix", "baseline-again"]);
    for c in g["cells"].as_array().unwrap() {
        let name = c["name"].as_str().unwrap();
        // The cell's settings say which stack served it (the A/A control: the
        // baseline's), and nothing else differs.
        let stack = if c["control"] == true { "hyper" } else { name };
        assert_eq!(c["settings"]["stack"], stack, "{}", c["settings"]);
        for key in [
            "cert",
            "provider",
            "server_resumption",
            "mtls",
            "version",
            "kx",
        ] {
            assert_eq!(
                c["settings"][key], g["cells"][0]["settings"][key],
                "{name}: {key}"
            );
        }
        let rounds = c["rounds"].as_array().unwrap();
        assert_eq!(rounds.len(), 3, "{name}");
        for r in rounds {
            assert!(r["completed"].as_u64().unwrap() > 0, "{name}: {r}");
            assert_eq!(r["failed"], 0, "{name}: {r} {}", c["errors"]);
            assert!(r["handshakes_per_s"].as_f64().unwrap() > 0.0, "{name}: {r}");
            // GETs: no upload figure.
            assert!(r.get("upload_bytes_per_s").is_none(), "{name}: {r}");
        }
    }
    let notes = v["notes"].to_string();
    assert!(!notes.contains("stacks"), "{notes}");
}

/// `lab --body-size`: every request a POST (each of the three stacks reads it), each
/// round's upload goodput in the result and in the report, the size in the options.
#[test]
fn uploads_run_through_every_stack_with_their_goodput() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report");
    let run = tlsperf([
        "lab",
        "--only",
        "stack",
        "--rounds",
        "3",
        "--body-size",
        "10000",
        "--out",
        out.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(v["options"]["body_size"], 10000, "{}", v["options"]);
    for c in v["groups"][0]["cells"].as_array().unwrap() {
        let name = c["name"].as_str().unwrap();
        for r in c["rounds"].as_array().unwrap() {
            assert_eq!(r["failed"], 0, "{name}: {r} {}", c["errors"]);
            let up = r["upload_bytes_per_s"].as_f64().unwrap();
            // Both over the round's duration: 10,000 bytes per answered request.
            let expected = r["requests_per_s"].as_f64().unwrap() * 10_000.0;
            assert!(
                up > 0.0 && (up - expected).abs() <= 1e-6 * up,
                "{name}: {r}"
            );
        }
        assert!(c["summary"]["upload_bytes_per_s"]["mean"].as_f64().unwrap() > 0.0);
    }
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("upload bytes/s"), "{md}");
}

#[test]
fn sigint_keeps_the_finished_groups_and_exits_130() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report");
    // Two groups: the first (two cells × 3 rounds × 0.7 s) finishes, the second is cut.
    let child = Command::new(env!("CARGO_BIN_EXE_tlsperf"))
        .args(["lab", "--only", "tls,certificate", "--out"])
        .arg(&out)
        .arg("--json")
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the first group is done: its three cells (with the A/A control) take
    // ~6.5 s after set-up.
    let started = Instant::now();
    std::thread::sleep(Duration::from_secs(11));
    let output = common::interrupt_and_wait(child, Duration::from_secs(20));
    let stderr = String::from_utf8_lossy(&output.stderr);
    if output.status.code() == Some(0) {
        // The machine was fast enough to finish both groups in 9 s: nothing to cut.
        eprintln!(
            "lab finished before the interrupt ({:?})",
            started.elapsed()
        );
        return;
    }
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    let printed: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(printed, written);
    assert_eq!(written["interrupted"], true);
    // Only whole groups: every cell kept has all its rounds.
    for g in written["groups"].as_array().unwrap() {
        for c in g["cells"].as_array().unwrap() {
            assert_eq!(c["rounds"].as_array().unwrap().len(), 8, "{}", c["name"]);
        }
    }
    assert!(out.join("index.html").exists());
    assert!(out.join("report.md").exists());
}

#[test]
fn bad_input_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    let o = out.to_str().unwrap();
    for (args, needle) in [
        (vec!["lab", "--rounds", "2", "--out", o], "--rounds"),
        (vec!["lab", "--only", "nonsense", "--out", o], "nonsense"),
        // As capacity's --max-time: a search shorter than its shortest step (1 s).
        (
            vec!["lab", "--slo", "p99=30ms", "--slo-time", "1ns", "--out", o],
            "--slo-time 1ns is shorter than the shortest step",
        ),
        (vec!["lab", "--quick", "--full", "--out", o], "--full"),
        (vec!["lab", "--cacert", "x.pem", "--out", o], "--target"),
        (
            vec!["lab", "--target", "ftp://example.test/", "--out", o],
            "ftp",
        ),
        (
            vec![
                "lab",
                "--target",
                "https://127.0.0.1:1/",
                "--cacert",
                "/nonexistent.pem",
                "--out",
                o,
            ],
            "/nonexistent.pem",
        ),
    ] {
        let run = tlsperf(&args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(needle), "{args:?}: {}", run.stderr);
        assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    }
    assert!(!out.exists(), "nothing written on bad input");
}

#[test]
fn target_runs_the_client_side_groups_against_nginx() {
    let Some(nginx) = common::nginx::Nginx::start(true) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report");
    let run = tlsperf([
        "lab",
        "--target",
        &nginx.url(),
        "--cacert",
        &nginx.root,
        "--only",
        "resumption,kx,mtls",
        "--rounds",
        "3",
        "--out",
        out.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(v["options"]["target"], nginx.url().as_str());
    // mTLS varies the server: not run against someone else's, and said so.
    let groups: Vec<&str> = v["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["group"].as_str().unwrap())
        .collect();
    assert_eq!(groups, ["resumption", "kx"]);
    assert!(
        v["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("mtls")),
        "{}",
        v["notes"]
    );
    assert!(v["crypto_limits"].as_array().unwrap().is_empty());
    assert_eq!(mean(cell(&v, "resumption", "off"), "resumption_rate"), 0.0);
    resumes_after_each_slots_first(cell(&v, "resumption", "resume"));
    // nginx saw every request the lab counted, and more: the request before the run and
    // the warm-ups, which are not counted.
    let completed: u64 = v["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["cells"].as_array().unwrap())
        .flat_map(|c| c["rounds"].as_array().unwrap())
        .map(|r| r["completed"].as_u64().unwrap())
        .sum();
    let lines = nginx.log_lines(completed as usize);
    // `$ssl_protocol $ssl_session_reused $status $remote_port $msec`.
    let ok = lines
        .iter()
        .filter(|l| l.split_whitespace().nth(2) == Some("200"))
        .count() as u64;
    assert!(ok > completed, "nginx {ok}, lab {completed}");
    // A group nginx cannot negotiate (OpenSSL 3.0 has no X25519MLKEM768) fails by
    // kind and is never compared or recommended.
    for c in cell(&v, "kx", "x25519mlkem768")
        .as_object()
        .into_iter()
        .filter(|c| !c["errors"].as_object().unwrap().is_empty())
    {
        assert!(c["vs_baseline"].as_object().unwrap().is_empty(), "{c:?}");
        assert!(
            !v["recommendations"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["to"] == "x25519mlkem768")
        );
    }
}

#[test]
fn ocsp_group_runs_both_cells() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report");
    let v = lab(&out, "ocsp");
    let groups = v["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 1, "{v}");
    assert_eq!(groups[0]["group"], "ocsp");
    assert_eq!(groups[0]["title"], "OCSP stapling");
    assert_eq!(groups[0]["baseline"], "off");
    let names: Vec<&str> = groups[0]["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["off", "on", "baseline-again"]);
    for (name, stapled) in [("off", false), ("on", true), ("baseline-again", false)] {
        let c = cell(&v, "ocsp", name);
        assert_eq!(c["settings"]["ocsp"], stapled, "{}", c["settings"]);
        let rounds = c["rounds"].as_array().unwrap();
        assert_eq!(rounds.len(), 3, "{name}");
        for r in rounds {
            assert!(r["completed"].as_u64().unwrap() > 0, "{name}: {r}");
            assert_eq!(r["failed"], 0, "{name}: {r} {}", c["errors"]);
        }
        assert!(
            c["errors"].as_object().unwrap().is_empty(),
            "{}",
            c["errors"]
        );
        assert!(mean(c, "handshakes_per_s") > 0.0);
    }
    // Compared with the baseline, and no longer said to be left out.
    let vs = &cell(&v, "ocsp", "on")["vs_baseline"]["handshakes_per_s"];
    assert!(vs["p"].as_f64().unwrap() >= 0.0, "{vs}");
    assert!(
        !v["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("OCSP")),
        "{}",
        v["notes"]
    );
}

/// The response `pki init --ocsp` writes (the one the lab's "on" cell staples, made by
/// the same function) is valid for OpenSSL, and `tlsperf serve --ocsp` staples it whole,
/// over TLS 1.3 and 1.2; without `--ocsp` nothing is stapled.
#[test]
fn generated_ocsp_response_is_stapled_whole() {
    let dir = tempfile::tempdir().unwrap();
    let pki = dir.path().join("pki");
    let run = tlsperf(["pki", "init", pki.to_str().unwrap(), "--ocsp", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let p = |name: &str| pki.join(name).to_str().unwrap().to_string();
    let ocsp = std::fs::read(pki.join("ocsp.der")).unwrap();
    assert!(ocsp.len() > 100, "{} bytes", ocsp.len());
    // Refused without an ECDSA P-256 CA key to sign it.
    let run = tlsperf(["pki", "init", &p("other"), "--ocsp", "--ca-key", "ed25519"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("--ocsp"), "{}", run.stderr);

    if have("openssl", "the OCSP response with openssl ocsp") {
        let out = Command::new("openssl")
            .args(["ocsp", "-respin", &p("ocsp.der"), "-issuer"])
            .args([&p("intermediate.pem"), "-cert", &p("server.pem")])
            .args(["-CAfile", &p("root.pem"), "-verify_other"])
            .arg(p("intermediate.pem"))
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{text}");
        assert!(text.contains("Response verify OK"), "{text}");
        assert!(text.contains("server.pem: good"), "{text}");
    }

    let chain = p("server-chain.pem");
    let key = p("server.key");
    let root = p("root.pem");
    let stapled = |s: &Serve, tls: &str| -> Value {
        let run = tlsperf([
            "handshake",
            &s.url(),
            "--cacert",
            &root,
            "--tls",
            tls,
            "--json",
        ]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let v: Value = serde_json::from_str(&run.stdout).unwrap();
        v["negotiated"]["ocsp_stapled_bytes"].clone()
    };
    let s = Serve::start(&["--cert", &chain, "--key", &key, "--ocsp", &p("ocsp.der")]);
    for tls in ["1.3", "1.2"] {
        assert_eq!(stapled(&s, tls), ocsp.len(), "TLS {tls}: {}", s.stderr());
    }
    drop(s);
    let s = Serve::start(&["--cert", &chain, "--key", &key]);
    assert!(stapled(&s, "1.3").is_null());
}

/// A port nothing listens on (bound, then released).
fn dead_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[test]
fn target_that_is_down_or_does_not_verify_stops_before_the_matrix() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report");
    let port = dead_port();
    let run = tlsperf([
        "lab",
        "--target",
        &format!("https://127.0.0.1:{port}/"),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!("127.0.0.1:{port}")),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("refused"), "{}", run.stderr);
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    // No matrix ran: nothing written, not even the directory.
    assert!(!out.exists(), "{:?}", std::fs::read_dir(&out).ok());

    // A live server whose certificate the lab cannot verify (its own test CA, no
    // --cacert): the verification failure, named.
    let s = Serve::start(&["--gen-cert", "ecdsa-p256"]);
    let run = tlsperf(["lab", "--target", &s.url(), "--out", out.to_str().unwrap()]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!("localhost:{}", s.port)),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("the server's certificate is not accepted: no trusted root issued its chain"),
        "{}",
        run.stderr
    );
    assert!(!out.exists());
}

#[test]
fn failing_cell_is_marked_failed_and_a_failed_baseline_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    let ca = ca.to_str().unwrap();
    // TLS 1.3 only: the tls group's 1.2 cell cannot handshake.
    let s = Serve::start(&["--gen-cert", "ecdsa-p256", "--write-ca", ca, "--tls", "1.3"]);
    let out = dir.path().join("report");
    let run = tlsperf([
        "lab",
        "--target",
        &s.url(),
        "--cacert",
        ca,
        "--only",
        "tls",
        "--rounds",
        "3",
        "--out",
        out.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    let bad = cell(&v, "tls", "1.2");
    assert_eq!(bad["failed"], true, "{bad}");
    assert!(bad["failure_rate"].as_f64().unwrap() > 0.01, "{bad}");
    assert!(!bad["errors"].as_object().unwrap().is_empty(), "{bad}");
    assert!(bad["vs_baseline"].as_object().unwrap().is_empty(), "{bad}");
    assert!(
        !v["recommendations"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["to"] == "1.2"),
        "{}",
        v["recommendations"]
    );
    // The baseline and its control ran clean and were compared.
    assert_eq!(cell(&v, "tls", "1.3")["failed"], false);
    let control = cell(&v, "tls", "baseline-again");
    assert_eq!(control["failed"], false);
    assert!(control["vs_baseline"]["handshakes_per_s"]["p"].is_f64());
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("## Failed requests"), "{md}");
    assert!(md.contains("tls/1.2: "), "{md}");
    assert!(!md.contains("instead of TLS 1.3"), "{md}");
    let what_to_change = &md[md.find("## What to change").unwrap()..md.find("## How far").unwrap()];
    assert!(!what_to_change.contains("TLS 1.2"), "{what_to_change}");
    drop(s);

    // TLS 1.2 only: the request before the run (resumption's baseline, any version)
    // passes, then the tls group's baseline (1.3) fails — exit 1, the report written.
    let s = Serve::start(&["--gen-cert", "ecdsa-p256", "--write-ca", ca, "--tls", "1.2"]);
    let out = dir.path().join("report2");
    let run = tlsperf([
        "lab",
        "--target",
        &s.url(),
        "--cacert",
        ca,
        "--only",
        "resumption,tls",
        "--rounds",
        "3",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("baseline failed"), "{}", run.stderr);
    assert!(run.stderr.contains("tls/1.3: "), "{}", run.stderr);
    // The summary printed the failure counts.
    assert!(run.stdout.contains("Failed requests:"), "{}", run.stdout);
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(cell(&v, "tls", "1.3")["failed"], true);
    for c in ["1.2", "baseline-again"] {
        assert!(
            cell(&v, "tls", c)["vs_baseline"]
                .as_object()
                .unwrap()
                .is_empty(),
            "{c}"
        );
    }
    assert!(cell(&v, "resumption", "resume")["vs_baseline"]["handshakes_per_s"]["p"].is_f64());
}

/// The `tlsperf serve` children of a process (its threads' `children` lists).
fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            if let Ok(text) = std::fs::read_to_string(t.path().join("children")) {
                out.extend(
                    text.split_whitespace()
                        .filter_map(|p| p.parse::<u32>().ok()),
                );
            }
        }
    }
    out
}

/// True while `pid` runs (a zombie or a reused pid of another program does not count).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| !s.contains(") Z ") && s.contains("(tlsperf)"))
}

/// SIGTERM, then a second SIGTERM at once (the supervisor that will not wait): every
/// `tlsperf serve` child is gone and the work directory with its private keys removed,
/// on both paths (the first stops cleanly, the second exits at once).
#[test]
fn sigterm_leaves_no_servers_and_no_keys_behind() {
    for signals in [1, 2] {
        let dir = tempfile::tempdir().unwrap();
        let tmp = dir.path().join("tmp");
        std::fs::create_dir(&tmp).unwrap();
        let out = dir.path().join("report");
        let child = Command::new(env!("CARGO_BIN_EXE_tlsperf"))
            .args(["lab", "--quick", "--only", "resumption", "--out"])
            .arg(&out)
            .env("TMPDIR", &tmp)
            .env("NO_COLOR", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        // Until its servers run.
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut servers = Vec::new();
        while servers.len() < 2 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(200));
            servers = children_of(pid);
        }
        assert!(servers.len() >= 2, "no servers started: {servers:?}");
        assert_eq!(
            std::fs::read_dir(&tmp).unwrap().count(),
            1,
            "one work directory"
        );
        for _ in 0..signals {
            let ok = Command::new("/bin/kill")
                .args(["-TERM", &pid.to_string()])
                .status()
                .unwrap()
                .success();
            assert!(ok);
            std::thread::sleep(Duration::from_millis(50));
        }
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            output.status.code(),
            Some(130),
            "{signals} signal(s): {stderr}"
        );
        // The kernel delivers the children's death signal as the parent exits.
        let deadline = Instant::now() + Duration::from_secs(5);
        while servers.iter().any(|&p| alive(p)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let left: Vec<_> = servers.iter().filter(|&&p| alive(p)).collect();
        assert!(
            left.is_empty(),
            "{signals} signal(s): servers left running: {left:?}"
        );
        let files: Vec<_> = std::fs::read_dir(&tmp)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        assert!(
            files.is_empty(),
            "{signals} signal(s): left in TMPDIR: {files:?}"
        );
    }
}

/// `--slo`: every configuration of a tiny matrix gets a bounded capacity search at the
/// objective, shown in the report's tables and the summary.
#[test]
fn slo_gives_every_configuration_its_capacity() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report");
    let t0 = Instant::now();
    let run = tlsperf([
        "lab",
        "--only",
        "tls",
        "--rounds",
        "3",
        "--slo",
        "p50=50ms",
        "--slo-time",
        "12s",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // Three cells (TLS 1.3, TLS 1.2, the control), each search at most 12 s.
    assert!(
        t0.elapsed() < Duration::from_secs(120),
        "{:?}",
        t0.elapsed()
    );
    let text = std::fs::read_to_string(out.join("results.json")).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["slo"]["latency"][0]["percentile"], 50.0);
    let cells = v["groups"][0]["cells"].as_array().unwrap();
    assert!(cells.len() >= 2, "{cells:?}");
    let mut concluded = 0;
    for c in cells {
        let cap = &c["capacity"];
        let outcome = cap["outcome"].as_str().unwrap_or_else(|| panic!("{c}"));
        assert!(cap["steps"].as_u64().unwrap() >= 1, "{cap}");
        assert!(!cap["message"].as_str().unwrap().is_empty(), "{cap}");
        // A capacity, whenever the steps bound one, lies within its 90% interval; the
        // outcome is `capacity` when that interval is within the lab's 20%.
        if let Some(v) = cap["capacity_per_s"].as_f64() {
            let lo = cap["interval_per_s"][0].as_f64().unwrap();
            let hi = cap["interval_per_s"][1].as_f64().unwrap();
            assert!(lo <= v && v <= hi, "{cap}");
            if outcome == "capacity" {
                assert!(hi / lo - 1.0 <= 0.2 + 1e-9, "{cap}");
                concluded += 1;
            }
        } else {
            assert_ne!(outcome, "capacity", "{cap}");
        }
    }
    eprintln!(
        "{concluded} of {} searches found a capacity within 20%",
        cells.len()
    );
    // Capacity recommendations say what they compare, in the objective's words.
    for rec in v["recommendations"].as_array().unwrap() {
        if rec["metric"] == "capacity_per_s" {
            let t = rec["text"].as_str().unwrap();
            assert!(t.contains("new connections/s at p50 ≤ 50 ms"), "{t}");
            assert!(rec["p"].is_null(), "{rec}");
        }
    }
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("| capacity at the SLO |"), "{md}");
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(html.contains("<th>capacity at the SLO</th>"));
    assert!(
        run.stdout.contains("Capacity at p50 ≤ 50 ms"),
        "{}",
        run.stdout
    );
    // Without --slo there is no such column, and --slo-time alone is refused.
    let bad = tlsperf(["lab", "--slo-time", "5s", "--out", out.to_str().unwrap()]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    let bad = tlsperf(["lab", "--slo", "p99", "--out", out.to_str().unwrap()]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert!(
        bad.stderr.contains("invalid value 'p99' for '--slo")
            && bad.stderr.contains("'p99' has no '='")
            && !bad.stderr.contains("--slo 'p99'"),
        "{}",
        bad.stderr
    );
}

/// A null lab (`--null`: every configuration its group's baseline again) run 20 times
/// with short rounds: "What to change" controls its error rate over each run (Holm), so
/// it should recommend something in at most 5% of runs. Tallied: at most 4 of 20 runs may
/// (were the rate 5%, 5 or more would happen in 0.26% of tallies; unadjusted, the run's 9
/// comparisons at 0.05 each could recommend in up to 1 − 0.95⁹ ≈ 37% of runs).
#[test]
fn a_null_lab_recommends_nothing_in_nineteen_runs_of_twenty() {
    let dir = tempfile::tempdir().unwrap();
    let mut recommending = Vec::new();
    for i in 0..20 {
        let out = dir.path().join(format!("null-{i}"));
        let run = tlsperf([
            "lab",
            "--null",
            "--only",
            "kx,tls",
            "--rounds",
            "4",
            "--out",
            out.to_str().unwrap(),
            "--json",
        ]);
        assert_eq!(run.code, 0, "run {i}: {}", run.stderr);
        let v: Value = serde_json::from_str(&run.stdout).unwrap();
        assert_eq!(v["options"]["null"], true, "{}", v["options"]);
        for g in v["groups"].as_array().unwrap() {
            for c in g["cells"].as_array().unwrap().iter().skip(1) {
                let name = c["name"].as_str().unwrap();
                assert!(
                    name.starts_with("null-") || name == "baseline-again",
                    "run {i}: {name} is not a copy of the baseline"
                );
            }
        }
        let recs = v["recommendations"].as_array().unwrap();
        if !recs.is_empty() {
            recommending.push((i, recs.clone()));
        }
    }
    assert!(
        recommending.len() <= 4,
        "{} of 20 null runs recommended something: {recommending:?}",
        recommending.len()
    );
}

/// Off a terminal (the bar draws nothing there) each group's end is a line on stderr, so
/// that a run of minutes is not silent until its summary.
#[test]
fn each_group_ends_with_a_line_off_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report");
    let run = tlsperf([
        "lab",
        "--only",
        "ocsp",
        "--rounds",
        "3",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("group 1 of 1 done: ocsp (3 configurations) at "),
        "{}",
        run.stderr
    );
    // Each round records how long the generator waited for a CPU, where the kernel
    // keeps the figure (it decides the group's warnings).
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    if std::path::Path::new("/proc/self/schedstat").exists() {
        let r = &v["groups"][0]["cells"][0]["rounds"][0];
        assert!(r["generator_waiting_share"].is_number(), "{r}");
    }
}
