//! `tlsperf capacity` against `tlsperf serve --threads 1 --resumption off`: a small search
//! finishes with a consistent document, text, HTML and exit code; a generator held to a
//! tenth of a CPU (a cgroup CPU quota, as a container limit does) is reported as the
//! bottleneck, not the server; two processes share a rate, start together (`--start-at`)
//! and merge (load and capacity). Searches here are kept small (short steps, a loose
//! objective, a low --max-time): performance figures are bench/capacity.sh's.

#![allow(clippy::unwrap_used)] // tests unwrap: a panic is the failure report

mod common;

use std::path::Path;
use std::time::Duration;

use common::{Serve, tlsperf};
use serde_json::Value;

/// `serve --threads 1 --resumption off` with an RSA-2048 certificate: a full handshake
/// costs the server (an RSA signature) several times what it costs the client (an RSA
/// verification), so one server thread saturates before a generator of two threads.
fn serve(dir: &Path) -> (Serve, String) {
    let ca = dir.join("ca.pem").to_str().unwrap().to_string();
    let s = Serve::start(&[
        "--threads",
        "1",
        "--resumption",
        "off",
        "--gen-cert",
        "rsa-2048",
        "--write-ca",
        &ca,
    ]);
    (s, ca)
}

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The search options shared by the tests: a p50 objective (20 samples a step, so
/// short steps; on a 2-core machine shared with builds a p99 objective's tail would
/// be the machine's, not the server's), half-second steps, bounded in time.
const SMALL: [&str; 14] = [
    "--new-conn",
    "--step-min",
    "500ms",
    "--step-max",
    "2s",
    "--timeout",
    "2s",
    "--resolution",
    "0.25",
    "--max-time",
    "60s",
    "--start-rate",
    "25",
    "-q",
];

#[test]
fn a_search_finishes_with_a_consistent_result() {
    let dir = tempfile::tempdir().unwrap();
    let (s, ca) = serve(dir.path());
    let out = dir.path().join("cap.json");
    let html = dir.path().join("cap.html");
    let pid = s.pid().to_string();
    let started = std::time::Instant::now();
    let url = s.url();
    let mut args = vec!["capacity", &url[..], "--cacert", &ca, "--slo", "p50=100ms"];
    args.extend(SMALL);
    args.extend([
        "--threads",
        "2",
        "--server-pid",
        &pid,
        "--out",
        out.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    let run = tlsperf(&args);
    let took = started.elapsed();
    let v = read(&out);
    assert_eq!(v["schema"], "tlsperf-capacity/1");
    // The client's settings under the keys a load result uses.
    let o = &v["options"];
    assert_eq!(o["requests_per_conn"], 1, "{o}");
    assert_eq!(o["threads"], 2, "{o}");
    assert_eq!(o["verify_cache"], true, "{o}");
    assert_eq!(o["tls"], serde_json::json!([]), "{o}");
    let outcome = v["outcome"].as_str().unwrap();
    // The exit code is the outcome's.
    let code = match outcome {
        "capacity" | "above-max-rate" | "below-min-rate" => 0,
        "generator-bound" => 3,
        "time-limit" => 4,
        other => panic!("outcome {other}"),
    };
    assert_eq!(run.code, code, "{outcome}: {}", run.stderr);
    // Bounded: --max-time plus the last step's drain.
    assert!(took < Duration::from_secs(90), "{took:?}");
    let steps = v["steps"].as_array().unwrap();
    assert!(!steps.is_empty(), "{steps:?}");
    // The ramp doubles from the start rate while steps pass.
    assert_eq!(steps[0]["offered_per_s"], 25.0);
    assert_eq!(steps[0]["kind"], "ramp");
    for (a, b) in steps.iter().zip(&steps[1..]) {
        if b["kind"] == "ramp" && a["verdict"] == "pass" {
            assert_eq!(
                b["offered_per_s"].as_f64().unwrap(),
                2.0 * a["offered_per_s"].as_f64().unwrap()
            );
        }
    }
    for st in steps {
        let attempted = st["attempted"].as_u64().unwrap();
        let done = st["completed"].as_u64().unwrap() + st["failed"].as_u64().unwrap();
        assert_eq!(attempted, done, "{st}");
        // A warm-up of 1 s (the default) came first, and its requests count in no
        // figure: the step holds those due within its measured length only.
        assert!(st["warmup_s"].as_f64().unwrap() >= 1.0, "{st}");
        let due = st["offered_per_s"].as_f64().unwrap() * st["length_s"].as_f64().unwrap();
        assert!(
            attempted as f64 <= due.ceil() + 1.0,
            "{attempted} > {due}: {st}"
        );
        // Every answer's corrected latency is in the step's histogram (a step without
        // an answer has none).
        assert_eq!(
            st["latency_corrected"]["quantiles"]["count"]
                .as_u64()
                .unwrap_or(0),
            st["completed"].as_u64().unwrap(),
            "{st}"
        );
        assert!(st["server_cpu_seconds"].as_f64().is_some(), "{st}");
        assert!(["pass", "fail", "invalid"].contains(&st["verdict"].as_str().unwrap()));
    }
    if outcome == "capacity" {
        let cap = v["capacity_per_s"].as_f64().unwrap();
        let [lo, hi] = [
            v["interval_per_s"][0].as_f64().unwrap(),
            v["interval_per_s"][1].as_f64().unwrap(),
        ];
        assert!(lo <= cap && cap <= hi, "{lo} {cap} {hi}");
        assert!(hi > lo && hi / lo - 1.0 <= 0.25 + 1e-9, "{lo}..{hi}");
        // After the ramp, the design placed the steps: a pass and a failure at least.
        assert!(steps.iter().any(|s| s["verdict"] == "pass"), "{steps:?}");
        assert!(steps.iter().any(|s| s["verdict"] == "fail"), "{steps:?}");
        assert!(
            steps
                .iter()
                .all(|s| s["kind"] == "ramp" || s["kind"] == "probe"),
            "{steps:?}"
        );
    } else {
        eprintln!(
            "NOTE: no capacity on this machine now ({outcome}): {}",
            v["message"]
        );
    }
    // Every field is documented in docs/json.md, and every documented one is there.
    let documented = documented_fields();
    let mut seen = std::collections::BTreeSet::new();
    paths(&v, "", &documented, &mut seen);
    let undocumented: Vec<_> = seen
        .iter()
        .filter(|p| !documented.contains_key(*p))
        .collect();
    assert!(
        undocumented.is_empty(),
        "not in docs/json.md: {undocumented:?}"
    );
    // The page: the knee charts and the table of steps.
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("data-chart=\"knee-latency\""), "{page}");
    assert!(page.contains("data-chart=\"knee-errors\""));
    assert_eq!(page.matches("<tr class=").count(), steps.len());
    assert!(run.stdout.is_empty(), "-q: {}", run.stdout);

    // The terminal table, from the same kind of run, and compare on the result itself.
    let cmp = tlsperf([
        "compare",
        out.to_str().unwrap(),
        out.to_str().unwrap(),
        "--json",
    ]);
    if v["capacity_per_s"].is_f64() {
        assert_eq!(cmp.code, 0, "{}", cmp.stderr);
        let c: Value = serde_json::from_str(&cmp.stdout).unwrap();
        assert_eq!(c["schema"], "tlsperf-compare/1");
        assert_eq!(c["kind"], "capacity");
        assert_eq!(c["rows"][0]["outcome"], "no-difference", "{c}");
        assert_eq!(c["rows"][0]["ratio"], 1.0);
    } else {
        assert_eq!(cmp.code, 2, "{}", cmp.stderr);
        assert!(
            cmp.stderr.contains("its steps bound no capacity"),
            "{}",
            cmp.stderr
        );
    }
}

/// `--body-size`: every request a POST of that many bytes; each step counts what it sent
/// and gives the goodput of its bodies both ways, and the table shows the uploads'
/// column.
#[test]
fn uploads_are_counted_per_step_with_their_goodput() {
    let dir = tempfile::tempdir().unwrap();
    let (s, ca) = serve(dir.path());
    let out = dir.path().join("cap.json");
    let url = s.url();
    let mut args = vec!["capacity", &url[..], "--cacert", &ca, "--slo", "p50=100ms"];
    // Not -q: the table is checked too.
    args.extend(&SMALL[..SMALL.len() - 1]);
    args.extend([
        "--max-rate",
        "50",
        "--body-size",
        "20000",
        "--threads",
        "2",
        "--out",
        out.to_str().unwrap(),
    ]);
    let run = tlsperf(&args);
    let v = read(&out);
    assert_eq!(v["options"]["body_size"], 20000, "{}", v["options"]);
    let steps = v["steps"].as_array().unwrap();
    assert!(!steps.is_empty(), "{}", run.stderr);
    let mut sent = 0;
    for st in steps {
        let completed = st["completed"].as_u64().unwrap();
        let up = st["upload_bytes"].as_u64().unwrap();
        assert_eq!(up, completed * 20000, "{st}");
        sent += up;
        let secs = st["duration_s"].as_f64().unwrap();
        let rate = st["goodput"]["up_bytes_per_s"].as_f64().unwrap();
        assert!(
            (rate - up as f64 / secs).abs() <= 1e-6 * rate.max(1.0),
            "{st}"
        );
        // The answers' bodies came back too (serve's small JSON document).
        let down = st["body_bytes"].as_u64().unwrap();
        assert!(completed == 0 || down >= completed, "{st}");
    }
    assert!(sent > 0, "{steps:?}");
    assert!(run.stdout.contains("upload MB/s"), "{}", run.stdout);
    // Without --body-size the column is not there, nor the option.
    let get = dir.path().join("get.json");
    let mut args = vec!["capacity", &url[..], "--cacert", &ca, "--slo", "p50=100ms"];
    args.extend(&SMALL[..SMALL.len() - 1]);
    args.extend(["--max-rate", "25", "--out", get.to_str().unwrap()]);
    let run = tlsperf(&args);
    let v = read(&get);
    assert!(v["options"].get("body_size").is_none(), "{}", v["options"]);
    assert!(!run.stdout.contains("upload MB/s"), "{}", run.stdout);
    for st in v["steps"].as_array().unwrap() {
        assert_eq!(st["upload_bytes"], 0, "{st}");
    }
}

/// The field paths of docs/json.md's `tlsperf capacity` table, with their types.
fn documented_fields() -> std::collections::BTreeMap<String, String> {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/json.md")).unwrap();
    let section = text.split("## `tlsperf capacity`").nth(1).unwrap();
    let section = section.split("\n## ").next().unwrap();
    section
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .map(|row| {
            let (path, rest) = row.split_once('`').unwrap();
            let ty = rest.split('|').nth(1).unwrap_or("").trim().to_string();
            (path.to_string(), ty)
        })
        .collect()
}

/// Every field path of `v` (`steps[].verdict`), not descending into documented maps.
fn paths(
    v: &Value,
    prefix: &str,
    docs: &std::collections::BTreeMap<String, String>,
    out: &mut std::collections::BTreeSet<String>,
) {
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                out.insert(path.clone());
                if docs.get(&path).is_none_or(|t| t != "map") {
                    paths(child, &path, docs, out);
                }
            }
        }
        Value::Array(items) => {
            for item in items.iter().filter(|i| i.is_object()) {
                paths(item, &format!("{prefix}[]"), docs, out);
            }
        }
        _ => {}
    }
}

/// A cgroup (v1 `cpu` or v2) holding processes to `quota` CPUs, removed when dropped;
/// `None` (with the reason printed) where this machine cannot make one.
struct CpuCgroup {
    dir: std::path::PathBuf,
    procs: std::path::PathBuf,
}

impl CpuCgroup {
    fn new(quota: f64) -> Option<CpuCgroup> {
        let name = format!("tlsperf-test-{}", std::process::id());
        let v1 = Path::new("/sys/fs/cgroup/cpu");
        let made = if v1.join("cpu.cfs_quota_us").exists() {
            let dir = v1.join(&name);
            std::fs::create_dir(&dir)
                .and_then(|()| {
                    std::fs::write(
                        dir.join("cpu.cfs_quota_us"),
                        format!("{}", (quota * 100_000.0) as u64),
                    )
                })
                .map(|()| dir)
        } else {
            let v2 = Path::new("/sys/fs/cgroup");
            let dir = v2.join(&name);
            std::fs::create_dir(&dir)
                .and_then(|()| {
                    std::fs::write(
                        dir.join("cpu.max"),
                        format!("{} 100000", (quota * 100_000.0) as u64),
                    )
                })
                .map(|()| dir)
        };
        match made {
            Ok(dir) => Some(CpuCgroup {
                procs: dir.join("cgroup.procs"),
                dir,
            }),
            Err(e) => {
                eprintln!(
                    "SKIPPED: cannot make a CPU-limited cgroup here ({e}); not checking a generator-bound search"
                );
                None
            }
        }
    }
}

impl Drop for CpuCgroup {
    fn drop(&mut self) {
        // Empty once the child exited; the directory then goes.
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

#[test]
fn a_generator_held_to_a_tenth_of_a_cpu_is_reported_not_the_server() {
    let Some(cg) = CpuCgroup::new(0.1) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (s, ca) = serve(dir.path());
    let out = dir.path().join("cap.json");
    let url = s.url();
    let mut args = vec!["capacity", &url[..], "--cacert", &ca, "--slo", "p50=100ms"];
    args.extend(SMALL);
    args.extend(["--threads", "1", "--out", out.to_str().unwrap()]);
    // The child joins the cgroup before tlsperf starts: sh writes its own pid, then
    // execs.
    let output = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "echo $$ > {} && exec \"$0\" \"$@\"",
            cg.procs.display()
        ))
        .arg(common::bin())
        .args(&args)
        .env("NO_COLOR", "1")
        .env_remove("TLSPERF_LOG")
        .output()
        .unwrap();
    drop(cg);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    let v = read(&out);
    assert_eq!(v["outcome"], "generator-bound", "{}", v["message"]);
    assert!(v["capacity_per_s"].is_null());
    let msg = v["message"].as_str().unwrap();
    // "saturated" (its quota's CPU used up) or "fell behind" (its sends throttled late).
    assert!(msg.contains("the generator, not the server, "), "{msg}");
    assert!(msg.contains("run more generator processes"), "{msg}");
    assert!(stderr.contains("not the server"), "{stderr}");
    // The step the generator spoiled (after it, the search may go on below the
    // generator's ceiling, and stop when the server passes there).
    let invalid = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|s| s["verdict"] == "invalid")
        .unwrap_or_else(|| panic!("no invalid step: {}", v["steps"]))
        .clone();
    // The quota was seen: the CPU is measured against a tenth of a CPU, not a thread.
    let step_cpu = invalid["generator"]["utilization"].as_f64().unwrap();
    assert!(step_cpu > 0.5, "{invalid}");
}

/// A wall-clock instant `secs` from now, RFC 3339.
fn in_secs(secs: i64) -> String {
    let t = time::OffsetDateTime::now_utc() + time::Duration::seconds(secs);
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap()
}

fn started(v: &Value) -> time::OffsetDateTime {
    time::OffsetDateTime::parse(
        v["started"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap()
}

#[test]
fn two_processes_share_a_rate_start_together_and_merge() {
    let dir = tempfile::tempdir().unwrap();
    let (s, ca) = serve(dir.path());
    let url = s.url();
    let at = in_secs(3);
    let at_t =
        time::OffsetDateTime::parse(&at, &time::format_description::well_known::Rfc3339).unwrap();
    let spawn = |share: &str, out: &Path| {
        std::process::Command::new(common::bin())
            .args([
                "load",
                &url,
                "--cacert",
                &ca,
                "--rate",
                "200",
                "-d",
                "2s",
                "-c",
                "4",
                "--rate-share",
                share,
                "--start-at",
                &at,
                "-q",
                "--out",
            ])
            .arg(out)
            .env("NO_COLOR", "1")
            .spawn()
            .unwrap()
    };
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    let mut pa = spawn("1/2", &a);
    let mut pb = spawn("2/2", &b);
    assert!(pa.wait().unwrap().success());
    assert!(pb.wait().unwrap().success());
    let (va, vb) = (read(&a), read(&b));
    for v in [&va, &vb] {
        // Each sent its half: 100/s for 2 s.
        let n = v["requests"]["attempted"].as_u64().unwrap();
        assert!((170..=230).contains(&n), "{}", v["requests"]);
        // Not before the instant (3 s after the spawn), and soon after it: a loose bound,
        // as a busy machine delays a process's start (545 ms seen at load 10).
        let d = started(v) - at_t;
        assert!(
            d >= time::Duration::ZERO && d < time::Duration::milliseconds(1500),
            "{d}"
        );
    }
    assert_eq!(va["options"]["rate_share"], "1/2");
    let merged = dir.path().join("m.json");
    let m = tlsperf([
        "merge",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--out",
        merged.to_str().unwrap(),
        "-q",
    ]);
    assert_eq!(m.code, 0, "{}", m.stderr);
    let vm = read(&merged);
    assert_eq!(vm["machines"], 2);
    assert_eq!(
        vm["requests"]["attempted"].as_u64().unwrap(),
        va["requests"]["attempted"].as_u64().unwrap()
            + vb["requests"]["attempted"].as_u64().unwrap()
    );

    // A capacity plan in two shares: a loose objective and a low --max-rate, so both
    // processes pass every step, at the same instants.
    let at = in_secs(3);
    let cap = |share: &str, out: &Path| {
        let mut args: Vec<String> = vec![
            "capacity".into(),
            url.clone(),
            "--cacert".into(),
            ca.clone(),
        ];
        args.extend(SMALL.iter().map(|s| s.to_string()));
        args.extend(
            [
                "--slo",
                "p50=1s",
                "--max-rate",
                "100",
                "--threads",
                "1",
                "--plan",
                "25,50,100",
                "--rate-share",
                share,
                "--start-at",
                &at,
                "--out",
            ]
            .map(String::from),
        );
        args.push(out.to_str().unwrap().into());
        std::process::Command::new(common::bin())
            .args(args)
            .env("NO_COLOR", "1")
            .spawn()
            .unwrap()
    };
    let (a, b) = (dir.path().join("ca.json"), dir.path().join("cb.json"));
    let mut pa = cap("1/2", &a);
    let mut pb = cap("2/2", &b);
    let (ea, eb) = (pa.wait().unwrap(), pb.wait().unwrap());
    let (va, vb) = (read(&a), read(&b));
    assert!(
        ea.success() && eb.success(),
        "{} / {}",
        va["message"],
        vb["message"]
    );
    assert_eq!(va["outcome"], "above-max-rate", "{}", va["message"]);
    assert_eq!(va["rate_share"], "1/2");
    let d = started(&va) - started(&vb);
    // Together: one ignoring --start-at would be ~3 s apart from the other.
    assert!(d.abs() < time::Duration::milliseconds(1500), "{d}");
    let m = tlsperf([
        "merge",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--out",
        merged.to_str().unwrap(),
        "--force",
        "--json",
    ]);
    assert_eq!(m.code, 0, "{}", m.stderr);
    let vm: Value = serde_json::from_str(&m.stdout).unwrap();
    assert_eq!(vm["schema"], "tlsperf-capacity/1");
    assert_eq!(vm["machines"], 2);
    assert_eq!(vm["rate_share"], "1/2,2/2");
    let steps = vm["steps"].as_array().unwrap();
    assert_eq!(steps.len(), va["steps"].as_array().unwrap().len());
    for (i, st) in steps.iter().enumerate() {
        assert_eq!(st["machines"], 2);
        assert_eq!(st["share"], 1.0);
        assert_eq!(
            st["attempted"].as_u64().unwrap(),
            va["steps"][i]["attempted"].as_u64().unwrap()
                + vb["steps"][i]["attempted"].as_u64().unwrap()
        );
    }
    // Same share twice (as two files: one file given twice is refused before it is
    // read): refused.
    let a2 = dir.path().join("a2.json");
    std::fs::copy(&a, &a2).unwrap();
    let twice = tlsperf([
        "merge",
        a.to_str().unwrap(),
        a2.to_str().unwrap(),
        "--out",
        dir.path().join("x.json").to_str().unwrap(),
    ]);
    assert_eq!(twice.code, 2, "{}", twice.stderr);
    assert!(twice.stderr.contains("both share 1/2"), "{}", twice.stderr);
}

#[test]
fn bad_input_is_refused_in_plain_words() {
    let past = in_secs(-60);
    for (args, want) in [
        (
            vec!["capacity", "https://127.0.0.1:9/", "--slo", "p99"],
            "has no '='",
        ),
        (
            vec!["capacity", "https://127.0.0.1:9/", "--slo", "p99=30"],
            "has no unit",
        ),
        (
            vec![
                "capacity",
                "https://127.0.0.1:9/",
                "--slo",
                "p99=30ms",
                "--start-at",
                &past,
            ],
            "already past",
        ),
        (
            vec![
                "load",
                "https://127.0.0.1:9/",
                "-n",
                "1",
                "--rate",
                "5",
                "--start-at",
                &past,
            ],
            "already past",
        ),
        (
            vec![
                "load",
                "https://127.0.0.1:9/",
                "-n",
                "1",
                "--rate",
                "5",
                "--rate-share",
                "3/2",
            ],
            "i must be within 1..=n",
        ),
        (
            vec![
                "capacity",
                "https://127.0.0.1:9/",
                "--slo",
                "p99=30ms",
                "--start-rate",
                "500",
                "--max-rate",
                "100",
            ],
            "above --max-rate",
        ),
        // No rate above 10,000,000/s: `load --rate 1e300` reported "18446744073709472110
        // due but never sent".
        (
            vec![
                "load",
                "https://127.0.0.1:9/",
                "-d",
                "1s",
                "--rate",
                "1e300",
            ],
            "at most 10000000 requests/s",
        ),
        (
            vec![
                "capacity",
                "https://127.0.0.1:9/",
                "--slo",
                "p99=30ms",
                "--max-rate",
                "1e300",
            ],
            "--max-rate 1e300: at most 10000000 requests/s",
        ),
        // Share 10000 of 10000 at 1/s sends first 9999 s after the start: after -d 2s.
        // It used to run 0.05 s, send nothing and report "2.00 s".
        (
            vec![
                "load",
                "https://127.0.0.1:9/",
                "-d",
                "2s",
                "--rate",
                "1",
                "--rate-share",
                "10000/10000",
            ],
            "would send nothing",
        ),
    ] {
        let run = tlsperf(&args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(want), "{args:?}: {}", run.stderr);
        assert!(!run.stderr.contains("Error {"), "{}", run.stderr);
    }
}

/// A share whose `-n` schedule takes hours (`--rate 1 --rate-share 10000/10000 -n 5`: the
/// first send 2 h 46 min after the start, 13 h 53 min in all) says so before it waits,
/// instead of waiting silently; Ctrl-C then ends it at once (exit 130).
#[test]
fn a_share_whose_schedule_takes_hours_says_so() {
    use std::io::{BufRead, BufReader};
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tlsperf"))
        .args([
            "load",
            "https://127.0.0.1:9/",
            "-n",
            "5",
            "--rate",
            "1",
            "--rate-share",
            "10000/10000",
            "--json",
        ])
        .env_remove("TLSPERF_LOG")
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Read on a thread: a run that never warns must fail the test, not hang it.
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut line = String::new();
    while let Ok(l) = rx.recv_timeout(Duration::from_secs(60)) {
        if l.contains("--rate-share") {
            line = l;
            break;
        }
    }
    if line.is_empty() {
        let _ = child.kill();
        let _ = child.wait();
    }
    assert!(
        line.contains("this process's 5 requests take 13h 53m")
            && line.contains("give -d to bound the run"),
        "{line}"
    );
    // The warning comes before the runtime and its signal handler: give it time.
    std::thread::sleep(Duration::from_secs(2));
    let output = common::interrupt_and_wait(child, Duration::from_secs(30));
    assert_eq!(output.status.code(), Some(130), "{:?}", output);
    let v: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(v["requests"]["attempted"], 0, "{v}");
}

/// A server that never answers: step 1 fails entirely. The result is still printed and
/// written to --out and --html (outcome `no-answer`), and the exit code is 1 (it used to
/// exit 1 with neither file written, against the documented "written in every case").
#[test]
fn a_server_that_never_answers_still_gets_its_result_written() {
    let dir = tempfile::tempdir().unwrap();
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let out = dir.path().join("cap.json");
    let html = dir.path().join("cap.html");
    let url = format!("https://127.0.0.1:{closed}/");
    let mut args = vec![
        "capacity",
        &url,
        "--slo",
        "p50=100ms",
        "--out",
        out.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ];
    args.extend(SMALL);
    let run = tlsperf(&args);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("every request failed"),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    let v = read(&out);
    assert_eq!(v["outcome"], "no-answer", "{v}");
    assert!(
        v["message"].as_str().unwrap().contains("not answering"),
        "{v}"
    );
    assert!(
        std::fs::read_to_string(&html)
            .unwrap()
            .contains("no-answer")
    );
}

/// When nothing answers, capacity names the cause as `handshake` and `load` do: a
/// refused port, plain HTTP on the port, an expired certificate. The failures came in
/// the first step's warm-up, which counts in no figure, and the message said "every
/// request failed ()".
#[test]
fn the_cause_is_named_when_nothing_answers() {
    let dir = tempfile::tempdir().unwrap();
    let (pem, key) = common::expired_cert(dir.path());
    let expired = common::Serve::start(&["--cert", &pem, "--key", &key]);
    let cases = [
        (
            common::closed_port(),
            "connect-refused",
            "Connection refused",
        ),
        (
            common::plain_http_server(1_000),
            "tls-not-tls",
            "plain-HTTP port",
        ),
        (expired.port, "expired", "expired"),
    ];
    for (port, kind, says) in cases {
        let url = format!("https://localhost:{port}/");
        let mut args = vec!["capacity", &url, "--slo", "p50=100ms", "--cacert", &pem];
        args.extend(SMALL);
        let run = tlsperf(&args);
        assert_eq!(run.code, 1, "{}", run.stderr);
        assert!(!run.stderr.contains("()"), "{}", run.stderr);
        assert!(run.stderr.contains(kind), "{kind}: {}", run.stderr);
        assert!(run.stderr.contains(says), "{says}: {}", run.stderr);
    }
}

/// Two `load --new-conn --rate 200 --rate-share i/2 --start-at` processes interleave
/// exactly: the gaps between consecutive SYNs to the server (tcpdump on lo, both
/// processes' together) are 1/R = 5 ms at the quartiles, within ±25% (±10% on a quiet
/// machine, 4.92–5.06 ms measured; this test runs beside others in a debug build; the
/// gaps came out 2.05 and 7.92 ms at the quartiles before the fix). Before each
/// process anchored its schedule at `--start-at` itself, it anchored at its own wake-up
/// (tokio's millisecond timer): the two schedules were offset at random, and the gaps
/// alternated short and long (p25 0.647 ms, p75 2.685 ms against 1.667 ms in the issue).
#[test]
fn shared_rates_interleave_exactly() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    if !common::have(
        "tcpdump",
        "SYN gaps of shared rates (apt-get install tcpdump)",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    let s = Serve::ecdsa_writing_ca(&ca, &[]);
    let port = s.port.to_string();
    // Its lines go to a file: a pipe read only at the end would fill and block it.
    let lines = dir.path().join("syn.txt");
    let mut dump = Command::new("tcpdump")
        .args([
            "-i",
            "lo",
            "-n",
            "-tt",
            "-l",
            "--immediate-mode",
            "-B",
            "65536",
        ])
        .args(["tcp[tcpflags] == tcp-syn and dst port", &port])
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&lines).unwrap())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(dump.stderr.take().unwrap());
    let mut line = String::new();
    while err.read_line(&mut line).unwrap() > 0 && !line.contains("listening on") {
        line.clear();
    }
    let at = in_secs(2);
    let spawn = |share: &str| {
        Command::new(common::bin())
            .args(["load", &s.url(), "--cacert", ca.to_str().unwrap()])
            .args(["--new-conn", "--rate", "200", "-d", "3s", "-c", "16"])
            .args(["--rate-share", share, "--start-at", &at, "-q"])
            .env("NO_COLOR", "1")
            .spawn()
            .unwrap()
    };
    let (mut a, mut b) = (spawn("1/2"), spawn("2/2"));
    assert!(a.wait().unwrap().success());
    assert!(b.wait().unwrap().success());
    std::thread::sleep(Duration::from_millis(300));
    let _ = Command::new("kill")
        .args(["-INT", &dump.id().to_string()])
        .status();
    dump.wait().unwrap();
    let mut t: Vec<f64> = std::fs::read_to_string(&lines)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect();
    t.sort_by(f64::total_cmp);
    assert!(t.len() >= 540, "{} SYNs", t.len());
    let mut gaps: Vec<f64> = t.windows(2).map(|w| (w[1] - w[0]) * 1e3).collect();
    gaps.sort_by(f64::total_cmp);
    let q = |p: f64| gaps[((gaps.len() - 1) as f64 * p) as usize];
    let (p25, p75) = (q(0.25), q(0.75));
    assert!(
        (3.75..=6.25).contains(&p25) && (3.75..=6.25).contains(&p75),
        "SYN gaps p25 {p25:.3} ms, p75 {p75:.3} ms, against 5 ms"
    );
}

/// A process of a `--plan` that is stopped (SIGSTOP) past a step's instant notices it
/// fell behind the shared schedule: it skips the steps it reached late (invalid, with
/// their `late_start_s`), says so, and runs the rest of the plan at their instants, so
/// that its steps stay in step with the other processes'.
#[test]
fn a_plan_process_that_falls_behind_skips_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    let s = Serve::ecdsa_writing_ca(&ca, &[]);
    let out = dir.path().join("plan.json");
    let at = in_secs(2);
    let child = std::process::Command::new(common::bin())
        .args(["capacity", &s.url(), "--cacert", ca.to_str().unwrap()])
        .args(["--slo", "p50=1s", "--plan", "40,40,40,40", "--new-conn"])
        .args(["--step-min", "500ms", "--step-max", "1s", "--timeout", "1s"])
        .args(["--warmup", "0s"])
        .args(["--start-at", &at, "-q", "--out", out.to_str().unwrap()])
        .env("NO_COLOR", "1")
        .spawn()
        .unwrap();
    let pid = child.id().to_string();
    // Steps are 2 s apart (1 s step at most, 1 s timeout, 0.5 s cooldown); stopped 2.2 s
    // into the plan, for 3 s: it wakes past at least one step's instant.
    std::thread::sleep(Duration::from_millis(4200));
    let signal = |sig: &str| {
        std::process::Command::new("kill")
            .args([sig, &pid])
            .status()
            .unwrap()
    };
    assert!(signal("-STOP").success());
    std::thread::sleep(Duration::from_secs(3));
    assert!(signal("-CONT").success());
    let run = child.wait_with_output().unwrap();
    let v = read(&out);
    let steps = v["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 4, "{steps:?}: {:?}", run.status);
    let skipped: Vec<&Value> = steps
        .iter()
        .filter(|s| s["late_start_s"].as_f64().is_some_and(|l| l > 0.1))
        .collect();
    assert!(!skipped.is_empty(), "{steps:?}");
    for s in &skipped {
        assert_eq!(s["verdict"], "invalid", "{s}");
        assert_eq!(s["attempted"], 0, "{s}");
        assert!(s["why"].as_str().unwrap().starts_with("skipped"), "{s}");
    }
    // The steps after it ran again at their instants.
    assert_eq!(steps[3]["verdict"], "pass", "{}", steps[3]);
    let w = v["warnings"].to_string();
    assert!(w.contains("fell behind the shared schedule"), "{w}");
}

/// A server that sheds load with fast 503s above 150 requests/s (a token bucket) passes
/// no objective above that rate: its capacity is found where it starts shedding, not
/// at the rate its fast error answers would allow. Each connection carries one request
/// (`--new-conn`), answered on a thread of its own.
#[test]
fn a_server_shedding_with_503_gets_the_capacity_where_it_sheds() {
    use std::io::{Read, Write};
    use std::sync::{Arc, Mutex};
    use std::time::Instant;
    use tlsperf::pki::{PkiOptions, TestPki};
    const RATE: f64 = 150.0;
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::generate(&PkiOptions::default()).unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &pki.root.pem).unwrap();
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = Arc::new(
        rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(pki.server_chain(), pki.server.private_key_der())
            .unwrap(),
    );
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // (tokens, when last filled): at most RATE a second, bursts of a tenth of a second.
    let bucket = Arc::new(Mutex::new((RATE / 10.0, Instant::now())));
    let shed = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counted = Arc::clone(&shed);
    std::thread::spawn(move || {
        for stream in listener.incoming().take(200_000) {
            let Ok(tcp) = stream else { continue };
            let (config, bucket, shed) = (
                Arc::clone(&config),
                Arc::clone(&bucket),
                Arc::clone(&counted),
            );
            std::thread::spawn(move || {
                let _ = tcp.set_read_timeout(Some(Duration::from_secs(5)));
                let Ok(conn) = rustls::ServerConnection::new(config) else {
                    return;
                };
                let mut tls = rustls::StreamOwned::new(conn, tcp);
                let mut req = Vec::new();
                let mut buf = [0u8; 2048];
                while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tls.read(&mut buf) {
                        Ok(n) if n > 0 => req.extend_from_slice(&buf[..n]),
                        _ => return,
                    }
                }
                let allowed = {
                    let mut b = bucket.lock().unwrap();
                    let now = Instant::now();
                    b.0 = (b.0 + (now - b.1).as_secs_f64() * RATE).min(RATE / 10.0);
                    b.1 = now;
                    if b.0 >= 1.0 {
                        b.0 -= 1.0;
                        true
                    } else {
                        false
                    }
                };
                let status = if allowed {
                    "200 OK"
                } else {
                    shed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    "503 Service Unavailable"
                };
                let _ = write!(
                    tls,
                    "HTTP/1.1 {status}\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
                );
                tls.conn.send_close_notify();
                let _ = tls.flush();
            });
        }
    });
    let out = dir.path().join("shed.json");
    let url = format!("https://localhost:{port}/");
    let run = tlsperf([
        "capacity",
        &url,
        "--cacert",
        ca.to_str().unwrap(),
        "--slo",
        "p50=200ms",
        "--new-conn",
        "--start-rate",
        "40",
        "--step-min",
        "2s",
        "--step-max",
        "3s",
        "--timeout",
        "2s",
        "--resolution",
        "0.3",
        "--max-time",
        "100s",
        "-q",
        "--out",
        out.to_str().unwrap(),
    ]);
    let v = read(&out);
    assert!(
        shed.load(std::sync::atomic::Ordering::Relaxed) > 0,
        "the server never shed: {}",
        v["message"]
    );
    // Every step above the shedding rate failed on its 503s, counted as errors.
    for s in v["steps"].as_array().unwrap() {
        let rate = s["offered_per_s"].as_f64().unwrap();
        if rate >= 1.3 * RATE && s["verdict"] != "invalid" {
            assert_eq!(s["verdict"], "fail", "{s}");
            assert!(s["failed"].as_u64().unwrap() > 0, "{s}");
        }
    }
    let cap = v["capacity_per_s"]
        .as_f64()
        .unwrap_or_else(|| panic!("no capacity (exit {}): {}", run.code, v["message"]));
    assert!(
        (0.6 * RATE..=1.3 * RATE).contains(&cap),
        "capacity {cap}/s against shedding from {RATE}/s: {}",
        v["message"]
    );
    eprintln!("shedding from {RATE}/s: {}", v["message"]);
}

/// A `--plan` run alone starts each step once the one before has ended (it used to keep
/// a shared schedule's slots, leaving each step `--timeout` more in silence: the README's
/// two 2-s steps took 16.6 s, 13.5 s of it without a line), and its end says the plan
/// ended, not "--max-time or --max-steps". Shared (`--rate-share`), the schedule stays,
/// and the wait for a step's instant is said on its line.
#[test]
fn a_plan_alone_runs_back_to_back_and_a_shared_one_says_what_it_waits_for() {
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    let s = Serve::ecdsa_writing_ca(&ca, &[]);
    let out = dir.path().join("plan.json");
    let url = s.url();
    let common_args = [
        "capacity",
        &url,
        "--cacert",
        ca.to_str().unwrap(),
        "--slo",
        "p99=1s",
        "--new-conn",
        "--plan",
        "25,50",
        "--step-min",
        "1s",
        "--step-max",
        "1s",
        "--warmup",
        "0s",
    ];
    let mut args = common_args.to_vec();
    args.extend(["--timeout", "10s", "--out", out.to_str().unwrap()]);
    let run = tlsperf(&args);
    // Unfinished (a plan gives no narrow interval), or generator-bound on a busy machine.
    assert!(matches!(run.code, 3 | 4), "{}", run.stderr);
    let v = read(&out);
    let steps = v["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "{steps:?}");
    // Back to back: the second step's first request was due about 1.5 s after the
    // first's (its 1 s, the 0.5 s pause and the last answers), not 11.5 s (1 s + the
    // 10 s timeout + 0.5 s).
    let gap = started(&steps[1]) - started(&steps[0]);
    assert!(gap < time::Duration::seconds(6), "{gap}");
    assert!(
        !run.stderr.contains("--max-time or --max-steps"),
        "{}",
        run.stderr
    );
    if v["outcome"] == "time-limit" && steps.iter().all(|s| s["verdict"] == "pass") {
        assert!(
            run.stderr
                .contains("no step of the plan broke the objective: the capacity is at least 50/s"),
            "{}",
            run.stderr
        );
    }
    // Shared by processes (one of one here): the schedule's slots stay, and the wait is
    // said.
    let mut args = common_args.to_vec();
    args.extend(["--timeout", "3s", "--rate-share", "1/1"]);
    let run = tlsperf(&args);
    assert!(matches!(run.code, 3 | 4), "{}", run.stderr);
    assert!(
        run.stderr
            .contains("step 2 (plan) at 50/s for 1.0 s, starting in "),
        "{}",
        run.stderr
    );
}

/// A rate at which a step expects less than one request is refused before anything
/// runs (exit 2, in words): `--plan 1e-300` and `--start-rate 0.01` (30 s steps) sent no
/// request and concluded "the server broke the objective even at the lowest rate" with
/// exit 0. Shared by n processes, each must expect one: 0.1/s over 30 s steps is 3
/// requests, three quarters of one for each of 4.
#[test]
fn a_rate_at_which_a_step_sends_no_request_is_refused() {
    let base = [
        "capacity",
        "https://127.0.0.1:9/",
        "--slo",
        "p99=30ms",
        "-q",
    ];
    for extra in [
        &["--plan", "1e-300"][..],
        &["--plan", "50,0.01"],
        &["--start-rate", "0.01"],
        &["--start-rate", "0.5", "--step-max", "1s"],
        &["--plan", "0.1", "--rate-share", "1/4"],
    ] {
        let mut args = base.to_vec();
        args.extend(extra);
        let run = tlsperf(&args);
        assert_eq!(run.code, 2, "{extra:?}: {}", run.stderr);
        assert!(
            run.stderr.contains("expects fewer than one request"),
            "{extra:?}: {}",
            run.stderr
        );
        assert!(!run.stderr.contains("below-min-rate"), "{}", run.stderr);
    }
}

/// `--max-time` bounds the whole run: after a failed step the search waits for the
/// server to answer one request within the objective again (at most 10 s), and that
/// wait ignored `--max-time` (11.3 s for `--max-time 4s` here; 13.5–13.9 s for 5s in
/// the issue). An objective no answer can meet (p50 ≤ 10 µs) keeps the server from ever
/// "recovering". The bound is the tool's own promise (4 s) plus slack for a loaded
/// machine, not a performance target.
#[test]
fn max_time_bounds_the_wait_after_a_failed_step() {
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    let s = Serve::ecdsa_writing_ca(&ca, &[]);
    let out = dir.path().join("cap.json");
    let url = s.url();
    let started = std::time::Instant::now();
    let run = tlsperf([
        "capacity",
        &url,
        "--cacert",
        ca.to_str().unwrap(),
        "--slo",
        "p50=10us",
        "--new-conn",
        "--plan",
        "20,20,20",
        "--step-min",
        "500ms",
        "--step-max",
        "500ms",
        "--warmup",
        "0s",
        "--timeout",
        "1s",
        "--max-time",
        "4s",
        "-q",
        "--out",
        out.to_str().unwrap(),
    ]);
    let took = started.elapsed();
    assert_eq!(run.code, 4, "{}", run.stderr);
    let v = read(&out);
    let steps = v["steps"].as_array().unwrap();
    assert!(!steps.is_empty(), "{v}");
    assert!(steps.iter().all(|s| s["verdict"] != "pass"), "{steps:?}");
    assert!(took < Duration::from_secs(7), "--max-time 4s took {took:?}");
    // Too short for even one step (its warm-up, 500 ms and the 1 s timeout): refused.
    let run = tlsperf([
        "capacity",
        &url,
        "--slo",
        "p50=10us",
        "--step-min",
        "500ms",
        "--timeout",
        "1s",
        "--warmup",
        "0s",
        "--max-time",
        "1s",
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("--max-time 1s is shorter than the shortest step (1.5 s"),
        "{}",
        run.stderr
    );
}
