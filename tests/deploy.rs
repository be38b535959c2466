//! deploy/: the Prometheus rules (`promtool check rules`, their unit tests with
//! `promtool test rules`, the metric names against what `observe --metrics` serves, and a
//! real Prometheus scraping a live `observe`), the systemd unit (`systemd-analyze
//! verify` and `security`), the Kubernetes DaemonSet (parsed by python3's yaml, then its
//! structure) and the Grafana dashboard (its structure and names, and every query run
//! against a real Prometheus scraping a live `observe --probes` on nginx).

#![allow(clippy::unwrap_used)] // tests unwrap: a panic is the failure report

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Serve, have, missing};
use serde_json::Value;

fn deploy(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy")
        .join(path)
}

/// `program args`, its status, stdout and stderr.
fn run(program: &str, args: &[&str], dir: &Path) -> (bool, String, String) {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The YAML documents of `path` as JSON (python3's yaml), or `None` (said) without it.
fn yaml(path: &Path) -> Option<Vec<Value>> {
    let script = "import json, sys, yaml\n\
                  print(json.dumps(list(yaml.safe_load_all(open(sys.argv[1])))))";
    let why = "not parsing deploy/'s YAML (apt-get install python3-yaml)";
    let Ok(out) = Command::new("python3")
        .args(["-c", script])
        .arg(path)
        .output()
    else {
        missing("python3", why);
        return None;
    };
    let err = String::from_utf8_lossy(&out.stderr);
    if err.contains("No module named 'yaml'") {
        missing("python3-yaml", why);
        return None;
    }
    assert!(out.status.success(), "{}: {err}", path.display());
    Some(serde_json::from_slice(&out.stdout).unwrap())
}

/// The metric names (`tlsperf_observe_…`, not the recorded `level:metric:op` names) in
/// `text`, without the `_total`, `_bucket`, `_count` and `_sum` suffixes.
fn metric_names(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .filter(|t| t.starts_with("tlsperf_observe_") && !t.contains(':'))
        .map(|t| {
            ["_total", "_bucket", "_count", "_sum"]
                .iter()
                .find_map(|s| t.strip_suffix(s))
                .unwrap_or(t)
                .to_string()
        })
        .collect()
}

#[test]
fn the_prometheus_rules_pass_promtool_and_their_unit_tests() {
    if !have("promtool", "deploy/prometheus (apt-get install prometheus)") {
        return;
    }
    let dir = deploy("prometheus");
    let (ok, out, err) = run("promtool", &["check", "rules", "tlsperf.rules.yml"], &dir);
    assert!(ok, "{out}{err}");
    let text = std::fs::read_to_string(dir.join("tlsperf.rules.yml")).unwrap();
    let rules = text
        .lines()
        .filter(|l| {
            let l = l.trim_start();
            l.starts_with("- record:") || l.starts_with("- alert:")
        })
        .count();
    assert!(
        out.contains(&format!("SUCCESS: {rules} rules found")),
        "{out}"
    );
    let (ok, out, err) = run(
        "promtool",
        &["test", "rules", "tlsperf.rules.test.yml"],
        &dir,
    );
    assert!(ok, "{out}{err}");
    assert!(out.contains("SUCCESS"), "{out}");
}

#[test]
fn the_rules_and_their_tests_name_only_metrics_that_observe_serves() {
    // The names registered in src/observe/metrics.rs (a family shows in the exposition
    // only once it has a series), with the registry's prefix.
    let served = served_names();
    assert_eq!(served.len(), 10, "{served:?}");
    // And the prefix is the registry's: the counters, which have series from the start.
    let text = tlsperf::observe::metrics::ObserveMetrics::new().prometheus_text();
    assert!(
        text.contains("# TYPE tlsperf_observe_handshake_failures counter"),
        "{text}"
    );
    for file in ["tlsperf.rules.yml", "tlsperf.rules.test.yml"] {
        let text = std::fs::read_to_string(deploy("prometheus").join(file)).unwrap();
        let used = metric_names(&text);
        assert!(used.len() >= 6, "{file}: {used:?}");
        let unknown: Vec<&String> = used.difference(&served).collect();
        assert!(
            unknown.is_empty(),
            "{file} names {unknown:?}; served: {served:?}"
        );
    }
    // Every alert says how bad and what.
    let Some(docs) = yaml(&deploy("prometheus/tlsperf.rules.yml")) else {
        return;
    };
    let mut alerts = 0;
    for group in docs[0]["groups"].as_array().unwrap() {
        for rule in group["rules"].as_array().unwrap() {
            if rule.get("alert").is_some() {
                alerts += 1;
                assert!(rule["labels"]["severity"].is_string(), "{rule}");
                assert!(rule["annotations"]["summary"].is_string(), "{rule}");
                assert!(rule["annotations"]["description"].is_string(), "{rule}");
            }
        }
    }
    assert_eq!(alerts, 6);
}

#[test]
fn the_systemd_unit_verifies_and_is_hardened() {
    if !have(
        "systemd-analyze",
        "deploy/systemd's unit (apt-get install systemd)",
    ) {
        return;
    }
    let text = std::fs::read_to_string(deploy("systemd/tlsperf-observe.service")).unwrap();
    for line in [
        "KillSignal=SIGINT",
        "SuccessExitStatus=130",
        "ExecReload=/bin/kill -HUP $MAINPID",
        "Restart=on-failure",
        "ProtectSystem=strict",
        "StateDirectory=tlsperf-observe",
        "NoNewPrivileges=yes",
    ] {
        assert!(text.lines().any(|l| l == line), "{line}");
    }
    let bounding = text
        .lines()
        .find_map(|l| l.strip_prefix("CapabilityBoundingSet="))
        .unwrap();
    let caps: BTreeSet<&str> = bounding.split(' ').collect();
    for cap in ["CAP_NET_RAW", "CAP_BPF", "CAP_PERFMON", "CAP_SYS_RESOURCE"] {
        assert!(caps.contains(cap), "{bounding}");
    }
    assert!(!caps.contains("CAP_SYS_ADMIN"), "{bounding}");
    // The unit as installed, but running this build (verify checks that ExecStart's
    // program exists).
    let dir = tempfile::tempdir().unwrap();
    let unit = dir.path().join("tlsperf-observe.service");
    std::fs::write(
        &unit,
        text.replace("/usr/local/bin/tlsperf", common::bin().to_str().unwrap()),
    )
    .unwrap();
    let unit = unit.to_str().unwrap();
    // verify exits 0 on an unknown key, but says so: nothing must be said about the unit.
    let (ok, out, err) = run("systemd-analyze", &["verify", unit], dir.path());
    assert!(ok, "{out}{err}");
    assert!(!err.contains("tlsperf-observe.service"), "{err}");
    // systemd's own exposure score (0 best, 10 worst): "OK" or better.
    let (ok, out, err) = run(
        "systemd-analyze",
        &[
            "security",
            "--offline=yes",
            "--threshold=50",
            "--no-pager",
            unit,
        ],
        dir.path(),
    );
    assert!(ok, "{out}{err}");
}

/// A JSON array of strings.
fn strings(v: &Value) -> Vec<&str> {
    let items = v.as_array().unwrap_or_else(|| panic!("not an array: {v}"));
    items.iter().map(|a| a.as_str().unwrap()).collect()
}

#[test]
fn the_daemonset_runs_observe_with_probes_on_the_host_without_privilege() {
    let Some(docs) = yaml(&deploy("kubernetes/daemonset.yaml")) else {
        return;
    };
    let ds = docs
        .iter()
        .find(|d| d["kind"] == "DaemonSet")
        .expect("a DaemonSet");
    assert_eq!(ds["apiVersion"], "apps/v1");
    assert_eq!(
        ds["spec"]["selector"]["matchLabels"],
        ds["spec"]["template"]["metadata"]["labels"]
    );
    let pod = &ds["spec"]["template"]["spec"];
    assert_eq!(pod["hostNetwork"], true);
    assert_eq!(pod["hostPID"], true);
    let c = &pod["containers"][0];
    let args = strings(&c["args"]);
    assert_eq!(args[0], "observe");
    assert!(
        args.contains(&"--probes") && args.contains(&"--interface"),
        "{args:?}"
    );
    // The annotations, the port and --metrics agree.
    let annotations = &ds["spec"]["template"]["metadata"]["annotations"];
    assert_eq!(annotations["prometheus.io/scrape"], "true");
    let port = annotations["prometheus.io/port"].as_str().unwrap();
    let metrics = args[args.iter().position(|a| *a == "--metrics").unwrap() + 1];
    assert_eq!(metrics, format!("0.0.0.0:{port}"));
    assert_eq!(c["ports"][0]["containerPort"].to_string(), port);
    // Not privileged: the capabilities instead.
    let sc = &c["securityContext"];
    assert_eq!(sc["privileged"], false);
    assert_eq!(sc["capabilities"]["drop"][0], "ALL");
    let added: BTreeSet<&str> = strings(&sc["capabilities"]["add"]).into_iter().collect();
    for cap in ["NET_RAW", "BPF", "PERFMON"] {
        assert!(added.contains(cap), "{added:?}");
    }
    assert!(!added.contains("SYS_ADMIN"), "{added:?}");
    // tracefs and bpffs from the host, mounted where tlsperf looks.
    let mounts: BTreeSet<(String, String)> = c["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["name"].as_str().unwrap().to_string(),
                m["mountPath"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for volume in pod["volumes"].as_array().unwrap() {
        let name = volume["name"].as_str().unwrap().to_string();
        let host = volume["hostPath"]["path"].as_str().unwrap();
        let at = mounts
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, p)| p.as_str());
        if host.starts_with("/sys/") {
            assert_eq!(at, Some(host), "{name}");
        }
    }
    for path in ["/sys/kernel/tracing", "/sys/fs/bpf"] {
        assert!(mounts.iter().any(|(_, p)| p == path), "{mounts:?}");
    }
    assert!(c["resources"]["limits"]["memory"].is_string());
}

/// A child killed and waited for when dropped (every exit path of a test).
struct Killed(Option<Child>);

impl Killed {
    fn take(&mut self) -> Child {
        self.0.take().unwrap()
    }
}

impl Drop for Killed {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// GET `url` with curl (5 s at most); `None` when it fails.
fn get(url: &str, query: Option<&str>) -> Option<String> {
    let mut cmd = Command::new("curl");
    cmd.args(["-sf", "--max-time", "5", "-G", url]);
    if let Some(q) = query {
        cmd.args(["--data-urlencode", &format!("query={q}")]);
    }
    let out = cmd.stderr(Stdio::null()).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// An instant query's first value, when it has one.
fn instant(prometheus: &str, query: &str) -> Option<f64> {
    let body = get(&format!("http://{prometheus}/api/v1/query"), Some(query))?;
    let v: Value = serde_json::from_str(&body).ok()?;
    let first = v["data"]["result"].as_array()?.first()?.clone();
    first["value"][1].as_str()?.parse().ok()
}

/// A real Prometheus (the Debian package) scraping `metrics` every second with
/// deploy/prometheus's rules evaluated every second, its data and log in `dir`; killed
/// when dropped.
struct Prometheus {
    _child: Killed,
    /// Where it answers (`127.0.0.1:PORT`).
    addr: String,
    log: PathBuf,
}

impl Prometheus {
    fn start(dir: &Path, metrics: &str) -> Prometheus {
        let config = format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             rule_files:\n  - {}\n\
             scrape_configs:\n  - job_name: tlsperf\n    static_configs:\n      - targets: ['{metrics}']\n",
            deploy("prometheus/tlsperf.rules.yml").display()
        );
        let config_path = common::write(dir, "prometheus.yml", &config);
        let addr = format!("127.0.0.1:{}", free_port());
        let log = dir.join("prometheus.err");
        let child = Command::new("prometheus")
            .arg(format!("--config.file={config_path}"))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("tsdb").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let prometheus = Prometheus {
            _child: Killed(Some(child)),
            addr,
            log,
        };
        // Ready before any query: until then its port refuses, and a query gets no body.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ready = Command::new("curl")
                .args(["-sf", "--max-time", "2", "-o", "/dev/null"])
                .arg(format!("http://{}/-/ready", prometheus.addr))
                .status()
                .is_ok_and(|s| s.success());
            if ready {
                return prometheus;
            }
            assert!(
                Instant::now() < deadline,
                "prometheus was not ready within 30 s: {}",
                prometheus.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// What it said on stderr.
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

#[test]
fn a_real_prometheus_scraping_observe_records_the_rules_and_agrees_on_p90() {
    if !have("prometheus", "a live scrape (apt-get install prometheus)")
        || !have("curl", "a live scrape")
    {
        return;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        missing(
            "root",
            "live capture needs CAP_NET_RAW; not scraping a live observe",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    let serve = Serve::ecdsa_writing_ca(&ca, &[]);
    let metrics = format!("127.0.0.1:{}", free_port());
    let observe_err = std::fs::File::create(dir.path().join("observe.err")).unwrap();
    let mut observe = Killed(Some(
        Command::new(common::bin())
            .args([
                "observe",
                "--interface",
                "lo",
                "--json",
                "--duration",
                "120s",
            ])
            .args(["--port", &serve.port.to_string(), "--metrics", &metrics])
            .env("NO_COLOR", "1")
            .env_remove("TLSPERF_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(observe_err)
            .spawn()
            .unwrap(),
    ));
    let deadline = Instant::now() + Duration::from_secs(20);
    while get(&format!("http://{metrics}/metrics"), None).is_none() {
        assert!(
            Instant::now() < deadline,
            "{}",
            std::fs::read_to_string(dir.path().join("observe.err")).unwrap()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let prometheus = Prometheus::start(dir.path(), &metrics);
    let prometheus_addr = prometheus.addr.clone();
    let prometheus_log = || prometheus.log();
    // Handshakes until the recording rules have values (60 s at most).
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        serve.handshakes(&ca, 10);
        let rate = instant(
            &prometheus_addr,
            "sum(role_process:tlsperf_observe_handshakes:rate1m)",
        );
        if rate.is_some_and(|r| r > 0.0) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no rate recorded: {}",
            prometheus_log()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // Every rule loaded and evaluated without error.
    let rules: Value = serde_json::from_str(
        &get(&format!("http://{prometheus_addr}/api/v1/rules"), None).unwrap(),
    )
    .unwrap();
    let groups = rules["data"]["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 2, "{rules}");
    for g in groups {
        for r in g["rules"].as_array().unwrap() {
            assert_eq!(r["health"], "ok", "{r}");
        }
    }
    // Two scrapes and an evaluation after the last handshake: the recording rule's p90
    // has a value; and observe's own p90 of the handshake against Prometheus's from
    // the same handshakes' buckets (all of them: a rate leaves out those before the
    // series' first scrape) agree within the buckets' resolution (a factor of 2).
    std::thread::sleep(Duration::from_millis(3500));
    let query = r#"max(role_process_phase:tlsperf_observe_handshake_phase_seconds:quantile_rate1m{phase="tls"})"#;
    let recorded = instant(&prometheus_addr, query)
        .unwrap_or_else(|| panic!("{query}: nothing; {}", prometheus_log()));
    assert!(
        recorded.is_finite() && recorded > 0.0,
        "{query}: {recorded}"
    );
    let query = r#"histogram_quantile(0.9, sum by (le) (tlsperf_observe_handshake_phase_seconds_bucket{phase="tls"}))"#;
    let from_prometheus = instant(&prometheus_addr, query)
        .unwrap_or_else(|| panic!("{query}: nothing; {}", prometheus_log()));
    let out = common::interrupt_and_wait(observe.take(), Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(130), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let p90_ns = v["handshakes"]["all"]["phases"]["tls"]["quantiles"]["p90_ns"]
        .as_u64()
        .unwrap_or_else(|| panic!("{}", v["handshakes"]["all"]));
    let own = p90_ns as f64 / 1e9;
    eprintln!(
        "p90 of the handshake: Prometheus {from_prometheus} s (recorded over 1m: \
         {recorded} s), observe {own} s"
    );
    assert!(
        from_prometheus.is_finite() && from_prometheus > own / 2.0 && from_prometheus < own * 2.0,
        "Prometheus p90 {from_prometheus} s, observe's {own} s"
    );
}

/// Queries of the dashboard: (where, query text).
type Queries = Vec<(String, String)>;

/// deploy/grafana's dashboard, parsed.
fn dashboard() -> Value {
    let path = deploy("grafana/tlsperf-observe.json");
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every query of the dashboard: (where, PromQL) for each panel target, and (variable,
/// `label_values(…)` query) for each query variable.
fn dashboard_queries(d: &Value) -> (Queries, Queries) {
    let mut exprs = Vec::new();
    for p in d["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().into_iter().flatten() {
            let title = p["title"].as_str().unwrap();
            let refid = t["refId"].as_str().unwrap();
            exprs.push((
                format!("{title} ({refid})"),
                t["expr"].as_str().unwrap().to_string(),
            ));
        }
    }
    let vars = d["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["type"] == "query")
        .map(|v| {
            (
                v["name"].as_str().unwrap().to_string(),
                v["definition"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    (exprs, vars)
}

/// The names `registry.register` gives in src/observe/metrics.rs, with the registry's
/// prefix.
fn served_names() -> BTreeSet<String> {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/observe/metrics.rs"))
        .unwrap()
        .split("registry.register(")
        .skip(1)
        .filter_map(|rest| rest.split('"').nth(1))
        .map(|name| format!("tlsperf_observe_{name}"))
        .collect()
}

/// A dashboard query as Prometheus runs it: every query variable's "All" (`.*`), the
/// transport `tcp` (what the live tests serve), and Grafana's `$__rate_interval` as 1
/// minute (four times the scrape interval or more, as Grafana makes it).
fn as_grafana_sends(expr: &str) -> String {
    expr.replace("$__rate_interval", "1m")
        .replace("$job", ".*")
        .replace("$instance", ".*")
        .replace("$process", ".*")
        .replace("$transport", "tcp")
}

#[test]
fn the_grafana_dashboard_is_well_formed_and_names_what_observe_serves_and_the_rules_record() {
    let d = dashboard();
    assert!(d["title"].is_string() && d["uid"].is_string(), "{d}");
    let panels = d["panels"].as_array().unwrap();
    let mut ids = BTreeSet::new();
    for p in panels {
        assert!(ids.insert(p["id"].as_u64().unwrap()), "id twice: {p}");
        let g = &p["gridPos"];
        let (x, w, h) = (
            g["x"].as_u64().unwrap(),
            g["w"].as_u64().unwrap(),
            g["h"].as_u64().unwrap(),
        );
        assert!(w > 0 && h > 0 && x + w <= 24, "{}: {g}", p["title"]);
        if p["type"] == "row" {
            continue;
        }
        assert!(p["description"].is_string(), "{}", p["title"]);
        assert_eq!(p["datasource"]["uid"], "${datasource}", "{}", p["title"]);
        let targets = p["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "{}", p["title"]);
        for t in targets {
            assert_eq!(t["datasource"]["uid"], "${datasource}", "{t}");
        }
    }
    let (exprs, vars) = dashboard_queries(&d);
    assert!(exprs.len() >= 15, "{exprs:?}");
    // Every metric a query names is one observe registers, and every one it registers
    // is on the dashboard.
    let served = served_names();
    let all: String = exprs
        .iter()
        .chain(&vars)
        .map(|(_, e)| e.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    let used = metric_names(&all);
    assert_eq!(
        used, served,
        "the dashboard names {used:?}; observe serves {served:?}"
    );
    // Every recorded series it names is one the rules record.
    let rules = std::fs::read_to_string(deploy("prometheus/tlsperf.rules.yml")).unwrap();
    let recorded: BTreeSet<&str> = rules
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("- record: "))
        .collect();
    let names_recorded: BTreeSet<&str> = all
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .filter(|t| t.contains(':') && t.contains("tlsperf_observe_"))
        .collect();
    assert!(!names_recorded.is_empty());
    for n in &names_recorded {
        assert!(
            recorded.contains(n),
            "{n} is recorded by no rule: {recorded:?}"
        );
    }
    // Every variable a query uses is defined (or Grafana's own).
    let defined: BTreeSet<&str> = d["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    for (at, e) in exprs.iter().chain(&vars) {
        for var in e.split('$').skip(1) {
            let name: String = var
                .trim_start_matches('{')
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            assert!(
                name == "__rate_interval" || defined.contains(name.as_str()),
                "{at}: ${name} is not defined ({defined:?})"
            );
        }
        // What the live test sends has no variable left.
        assert!(!as_grafana_sends(e).contains('$'), "{at}: {e}");
    }
}

/// A GET of Prometheus's HTTP API `path` with one query parameter, as JSON.
fn api(prometheus: &str, path: &str, param: &str, value: &str) -> Value {
    let out = Command::new("curl")
        .args(["-s", "--max-time", "5", "-G"])
        .arg(format!("http://{prometheus}/api/v1/{path}"))
        .args(["--data-urlencode", &format!("{param}={value}")])
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{path} {value}: {e}: {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// The metric whose series appear only once an event happened (an anomaly began):
/// its queries must parse, and may return nothing on a steady run.
const EVENT_ONLY: &str = "tlsperf_observe_anomaly";

#[test]
fn every_query_of_the_grafana_dashboard_returns_series_from_a_live_observe_with_probes() {
    if !have(
        "prometheus",
        "the dashboard's queries (apt-get install prometheus)",
    ) || !have("curl", "the dashboard's queries")
        || !common::probes::root()
    {
        return;
    }
    let Some(nginx) = common::nginx::Nginx::start(true) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let metrics = format!("127.0.0.1:{}", free_port());
    let (port, pid) = (nginx.port.to_string(), nginx.pid().to_string());
    let windows = dir.path().join("w.jsonl");
    let (observe, _, _) = common::watch::spawn(
        &[
            "--interface",
            "lo",
            "--port",
            &port,
            "--probes",
            "--pid",
            &pid,
            "--metrics",
            &metrics,
            "--window",
            "2s",
            "--windows",
            windows.to_str().unwrap(),
        ],
        &[],
        &["probing ", "capturing on "],
    );
    let _observe = Killed(Some(observe));
    let prometheus = Prometheus::start(dir.path(), &metrics);
    let (exprs, vars) = dashboard_queries(&dashboard());
    // Handshakes until every query has series (90 s at most): a rate needs two scrapes
    // of a series, a recorded quantile an evaluation after them, the long baseline a
    // closed window.
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        common::handshakes(&nginx.url(), Path::new(&nginx.root), 5);
        let mut empty = Vec::new();
        for (at, e) in &exprs {
            let sent = as_grafana_sends(e);
            let v = api(&prometheus.addr, "query", "query", &sent);
            if v["status"] != "success" {
                // Not up yet, or the query does not parse: the latter fails at once.
                assert!(v["errorType"] != "bad_data", "{at}: {sent}: {}", v["error"]);
                empty.push(format!("{at}: {v}"));
                continue;
            }
            if v["data"]["result"].as_array().unwrap().is_empty() && !e.contains(EVENT_ONLY) {
                empty.push(format!("{at}: {sent}"));
            }
        }
        for (name, q) in &vars {
            // label_values(SELECTOR, LABEL): some series of SELECTOR has LABEL.
            let inner = q
                .strip_prefix("label_values(")
                .and_then(|r| r.strip_suffix(')'))
                .unwrap_or_else(|| panic!("${name}: {q}"));
            let (selector, label) = inner.rsplit_once(',').unwrap();
            let v = api(
                &prometheus.addr,
                "series",
                "match[]",
                &as_grafana_sends(selector.trim()),
            );
            let has = v["data"]
                .as_array()
                .is_some_and(|s| s.iter().any(|s| s[label.trim()].is_string()));
            if !has {
                empty.push(format!("${name}: {q}: {v}"));
            }
        }
        if empty.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no series after 90 s of traffic:\n{}\n{}",
            empty.join("\n"),
            prometheus.log()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}
