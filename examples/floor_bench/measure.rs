//! One measurement each: the clients the floor run starts (h2load, the flight client,
//! `tlsperf load`, `crypto limit`, `hold_connections`), the server CPU around them, the
//! servers' own counts of full and resumed handshakes, and the parsing of what each tool
//! prints.
//!
//! Server CPU is the server process's CPU clock (`load::usage::proc_cpu_precise`: every
//! thread's run time, user + kernel) read before and after a run; a client's CPU is its
//! own (h2load's from this process's children's rusage, `tlsperf load`'s from its
//! document). Nothing of a client is charged to a server, nor the other way round.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use tlsperf::crypto::in_memory::FullOrResumed;
use tlsperf::crypto::instrument::Category;
use tlsperf::crypto::kx::Role;
use tlsperf::crypto::limit::LimitReport;
use tlsperf::load::LoadResult;
use tlsperf::load::usage::{proc_cpu_precise, proc_rss_kib};

/// What a failed step says (printed as `CHECK FAILED: …`).
pub type Res<T> = Result<T, String>;

/// The programs and files of a run, and where its clients and servers run.
pub struct Tools {
    /// The tlsperf binary measured.
    pub bin: PathBuf,
    /// examples/flight_floor.
    pub flight: PathBuf,
    /// examples/hold_connections.
    pub hold: PathBuf,
    /// The run's directory: `pki/`, `nginx/*.log`, `SHAPE.fl`, scratch files.
    pub work: PathBuf,
    /// Clients on CPU 0 and servers (and `crypto limit`) on CPU 1.
    pub pin: bool,
}

impl Tools {
    /// A command run where the clients run (`client`) or the servers do.
    pub fn command(&self, client: bool, program: impl AsRef<std::ffi::OsStr>) -> Command {
        if self.pin {
            let mut c = Command::new("taskset");
            c.arg("-c").arg(if client { "0" } else { "1" }).arg(program);
            c
        } else {
            Command::new(program)
        }
    }

    /// A file of the run's directory.
    pub fn file(&self, name: &str) -> PathBuf {
        self.work.join(name)
    }
}

/// Server CPU so far, ns (every thread of the process).
pub fn cpu_ns(pid: u32) -> Res<f64> {
    proc_cpu_precise(pid)
        .map(|d| d.as_nanos() as f64)
        .map_err(|e| e.to_string())
}

/// User + system CPU of this process's waited-for children so far, seconds.
fn children_cpu() -> f64 {
    // SAFETY: getrusage only writes the struct passed; zeroed is a valid rusage.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_CHILDREN with a valid pointer.
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) } != 0 {
        return 0.0;
    }
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    s(ru.ru_utime) + s(ru.ru_stime)
}

/// How a run of a client ended.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Ended {
    /// It exited, successfully or not.
    Exited(bool),
    /// It was still running at its time limit, and was killed.
    Killed,
}

/// Runs COMMAND with stdout and stderr into FILE, for at most LIMIT: h2load at times
/// stops its clients at the end of a `-D` run and never exits (seen here under load,
/// spinning on a CPU), and a bench run must end.
fn run_into(mut command: Command, file: &Path, limit: Duration) -> Res<Ended> {
    let out = File::create(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let err = out
        .try_clone()
        .map_err(|e| format!("{}: {e}", file.display()))?;
    let mut child = command
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(|e| format!("{command:?}: {e}"))?;
    let until = std::time::Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            return Ok(Ended::Exited(status.success()));
        }
        if std::time::Instant::now() >= until {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(Ended::Killed);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The longest an h2load run bounded by a count of connections may take.
const COUNTED_LIMIT: Duration = Duration::from_secs(600);

/// The last lines of a text, joined as `tail -3` prints them.
pub fn tail(text: &str, lines: usize) -> String {
    let v: Vec<&str> = text.lines().collect();
    v[v.len().saturating_sub(lines)..].join("\n")
}

/// h2load's succeeded requests (`requests: … N succeeded, …`).
pub fn h2load_succeeded(out: &str) -> Option<u64> {
    let line = out.lines().find(|l| l.starts_with("requests:"))?;
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words
        .iter()
        .position(|w| w.trim_end_matches(',') == "succeeded")?;
    words.get(at.checked_sub(1)?)?.parse().ok()
}

/// h2load's requests per second (`finished in 1.2s, 2500.50 req/s, …`).
pub fn h2load_rate(out: &str) -> Option<f64> {
    let line = out.lines().find(|l| l.starts_with("finished in"))?;
    line.split_whitespace()
        .nth(3)?
        .replace(',', "")
        .parse()
        .ok()
}

/// The cipher suite h2load negotiated (`Cipher: TLS_AES_128_GCM_SHA256`).
pub fn h2load_cipher(out: &str) -> Option<String> {
    let line = out.lines().find(|l| l.starts_with("Cipher:"))?;
    line.split_whitespace().nth(1).map(str::to_string)
}

/// The rustls name `tlsperf load --ciphers` takes for the TLS 1.3 suite h2load names.
pub fn load_cipher(h2: &str) -> Option<String> {
    match h2 {
        "TLS_AES_128_GCM_SHA256" | "TLS_AES_256_GCM_SHA384" | "TLS_CHACHA20_POLY1305_SHA256" => {
            Some(format!("TLS13_{}", &h2["TLS_".len()..]))
        }
        _ => None,
    }
}

/// One h2load run, one connection per request: server CPU and h2load's own CPU per
/// connection, µs, written with `decimals`.
pub fn h2conn(t: &Tools, pid: u32, url: &str, m: u64, decimals: usize) -> Res<(String, String)> {
    let out = t.file("h2.out");
    let b = cpu_ns(pid)?;
    let c0 = children_cpu();
    let mut cmd = t.command(true, "h2load");
    cmd.args(["--h1", "-n", &m.to_string(), "-c", "50", "-t", "1"])
        .args(["-H", "Connection: close", url]);
    if run_into(cmd, &out, COUNTED_LIMIT)? == Ended::Killed {
        return Err(format!(
            "h2load {url}: still running after {COUNTED_LIMIT:?}"
        ));
    }
    let c1 = children_cpu();
    let a = cpu_ns(pid)?;
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    let ok = h2load_succeeded(&text);
    if ok != Some(m) {
        let ok = ok.map_or(String::new(), |v| v.to_string());
        return Err(format!("h2load {url}: {ok} of {m} requests succeeded"));
    }
    let n = m as f64;
    Ok((
        format!("{:.*}", decimals, (a - b) / 1000.0 / n),
        format!("{:.*}", decimals, (c1 - c0) * 1e6 / n),
    ))
}

/// A warm-up run of h2load (300 connections); its output.
pub fn h2load_warm(t: &Tools, url: &str) -> Res<String> {
    let out = t.file("warm.out");
    let mut cmd = t.command(true, "h2load");
    cmd.args(["--h1", "-n", "300", "-c", "50", "-t", "1"])
        .args(["-H", "Connection: close", url]);
    let ended = run_into(cmd, &out, COUNTED_LIMIT)?;
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    if ended != Ended::Exited(true) {
        return Err(format!(
            "h2load's warm-up against {url}: {}",
            tail(&text, 3)
        ));
    }
    Ok(text)
}

/// One keep-alive run of h2load for K/4 seconds after a 300 ms warm-up: requests/s. An
/// h2load that has not exited 30 s after its run should have ended is killed and run
/// again, once (what it measured is lost with it: it prints its figures as it exits).
pub fn keep_alive(t: &Tools, name: &str, url: &str, k: u32) -> Res<f64> {
    let out = t.file("keep.out");
    let limit = Duration::from_millis(u64::from(k) * 250 + 300) + Duration::from_secs(30);
    let mut ended = Ended::Killed;
    for attempt in 1..=2 {
        let mut cmd = t.command(true, "h2load");
        cmd.args([
            "--h1",
            "-c",
            "50",
            "-t",
            "1",
            "-D",
            &format!("{}ms", k * 250),
        ])
        .args(["--warm-up-time", "300ms", url]);
        ended = run_into(cmd, &out, limit)?;
        if ended != Ended::Killed {
            break;
        }
        eprintln!(
            "floor_bench: h2load against {name} had not exited {limit:?} after it started (attempt {attempt}): killed"
        );
    }
    if ended == Ended::Killed {
        return Err(format!(
            "keep-alive run against {name}: h2load did not exit, twice"
        ));
    }
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    let rate = h2load_rate(&text);
    match rate {
        Some(r) if text.contains(" succeeded, 0 failed, 0 errored, 0 timeout") => Ok(r),
        _ => Err(format!(
            "keep-alive run against {name} failed: {}",
            tail(&text, 3)
        )),
    }
}

/// A run of the flight client against PORT.
pub struct Flights<'a> {
    /// The shape replayed (`plain`, `tls1.3-full`, …).
    pub shape: &'a str,
    /// Connections.
    pub n: u64,
    /// At most this many at once.
    pub at_once: u32,
    /// Started per second (0: as fast as the slots allow).
    pub rate: u64,
    /// A client that never sleeps.
    pub busy: bool,
}

/// Runs the flight client; its exit status and what it printed.
fn flight_client(t: &Tools, port: u16, f: &Flights) -> Res<(bool, String)> {
    let mut cmd = t.command(true, &t.flight);
    cmd.arg("client")
        .arg(format!("127.0.0.1:{port}"))
        .arg(t.file(&format!("{}.fl", f.shape)))
        .args([f.n.to_string(), f.at_once.to_string(), f.rate.to_string()]);
    if f.busy {
        cmd.arg("busy");
    }
    let out = cmd
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("{}: {e}", t.flight.display()))?;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).trim_end().to_string(),
    ))
}

/// A warm-up run of the flight client (300 connections, 50 at once, unpaced).
pub fn flight_warm(t: &Tools, port: u16, shape: &str) -> Res<bool> {
    let f = Flights {
        shape,
        n: 300,
        at_once: 50,
        rate: 0,
        busy: false,
    };
    Ok(flight_client(t, port, &f)?.0)
}

/// One paced run of the flight client: server PID's CPU per connection, µs (3 decimals).
pub fn ffconn(t: &Tools, pid: u32, port: u16, f: &Flights) -> Res<String> {
    let b = cpu_ns(pid)?;
    let (ok, out) = flight_client(t, port, f)?;
    if !ok {
        return Err(format!("flight client, {} on port {port}: {out}", f.shape));
    }
    let a = cpu_ns(pid)?;
    Ok(format!("{:.3}", (a - b) / 1000.0 / f.n as f64))
}

/// Where a server counts its full and resumed handshakes.
pub enum Counter {
    /// A serve's `/stats` on this metrics port.
    Stats(u16),
    /// An nginx access log of `$ssl_session_reused` (`r`: reused, `.`: not).
    Log(PathBuf),
}

/// The full and resumed handshakes an nginx `$ssl_session_reused` log counts.
pub fn log_counts(text: &str) -> (u64, u64) {
    let (mut f, mut r) = (0, 0);
    for l in text.lines() {
        match l.split_whitespace().next() {
            Some("r") => r += 1,
            Some(".") => f += 1,
            _ => {}
        }
    }
    (f, r)
}

/// The count of handshakes of KIND in a serve's `/stats` document.
pub fn stats_count(stats: &serde_json::Value, kind: &str) -> u64 {
    stats["handshakes"][kind]["count"].as_u64().unwrap_or(0)
}

/// A serve's `/stats` document.
pub fn stats(port: u16) -> Res<serde_json::Value> {
    let out = Command::new("curl")
        .args(["-s", &format!("http://127.0.0.1:{port}/stats")])
        .output()
        .map_err(|e| format!("curl: {e}"))?;
    serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("serve's /stats on port {port} is not JSON: {e}"))
}

/// Full and resumed handshakes a server has counted so far.
pub fn server_counts(c: &Counter) -> Res<(u64, u64)> {
    match c {
        Counter::Stats(port) => {
            let s = stats(*port)?;
            Ok((stats_count(&s, "full"), stats_count(&s, "resumed")))
        }
        Counter::Log(path) => Ok(log_counts(
            &std::fs::read_to_string(path).unwrap_or_default(),
        )),
    }
}

/// What one `tlsperf load` run against a counting server gave.
#[derive(Debug)]
pub struct ResumeRun {
    /// Server CPU per connection, µs, one decimal.
    pub us: String,
    /// Full handshakes.
    pub full: u64,
    /// Resumed handshakes.
    pub resumed: u64,
    /// Handshakes per second (whole).
    pub pace: u64,
    /// tlsperf load's CPU use of its one thread, %.
    pub busy: String,
}

/// A `tlsperf load --json` document.
pub fn load_doc(path: &Path) -> Res<LoadResult> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Whether a load document says it was held to SUITE alone.
pub fn held_to(doc: &LoadResult, suite: &str) -> bool {
    doc.options.get("ciphers") == Some(&serde_json::json!([suite]))
}

/// Server CPU per connection of one `tlsperf load --new-conn -c 8` run of RN connections
/// against a server that counts its handshakes; checks that the server counted what the
/// client did. RESUMED is the client's name for a resumed handshake of the run.
#[allow(clippy::too_many_arguments)]
pub fn resume_run(
    t: &Tools,
    pid: u32,
    port: u16,
    counter: &Counter,
    tls: &str,
    resume: &str,
    resumed: &str,
    rn: u64,
) -> Res<ResumeRun> {
    let (f0, r0) = server_counts(counter)?;
    let b = cpu_ns(pid)?;
    // The suite `crypto limit` measures (its crypto is the floor's term), not rustls's
    // default order (AES-256-GCM-SHA384 first): SHA-384 runs on SHA-512's block function,
    // which aws-lc runs without hardware help on this AMD CPU, and it is paid more often in
    // a resumption (binder, resumption secrets, tickets) than in a full handshake.
    let suite = if tls == "1.2" {
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"
    } else {
        "TLS13_AES_128_GCM_SHA256"
    };
    let json = t.file("resume.json");
    let err = t.file("resume.err");
    let status = t
        .command(true, &t.bin)
        .arg("load")
        .arg(format!("https://127.0.0.1:{port}/"))
        .args(["--new-conn", "-n", &rn.to_string(), "-c", "8", "--http1"])
        .args(["--tls", tls, "--resume", resume, "--ciphers", suite])
        .arg("--cacert")
        .arg(t.file("pki/root.pem"))
        .args(["--json", "-q"])
        .stdout(File::create(&json).map_err(|e| e.to_string())?)
        .stderr(File::create(&err).map_err(|e| e.to_string())?)
        .status()
        .map_err(|e| e.to_string())?;
    if !status.success() {
        // Its warning that the generator may be the bottleneck is expected here (its CPU
        // use is printed in the report), and is kept out of the report.
        let e = std::fs::read_to_string(&err).unwrap_or_default();
        return Err(format!(
            "tlsperf load against port {port} (tls {tls}, resume {resume}): {}",
            tail(&e, 3)
        ));
    }
    let doc = load_doc(&json)?;
    if !held_to(&doc, suite) {
        return Err(format!("port {port} tls {tls}: not held to {suite}"));
    }
    let a = cpu_ns(pid)?;
    let kind = |k: &str| doc.handshakes.kinds.get(k).copied().unwrap_or(0);
    let (cf, cr) = (kind("full"), kind(resumed));
    // nginx writes a request's log line after its response: give the last ones a moment.
    let (mut f1, mut r1) = (0, 0);
    for _ in 0..20 {
        (f1, r1) = server_counts(counter)?;
        if f1 - f0 == cf && r1 - r0 == cr {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if f1 - f0 != cf || r1 - r0 != cr {
        return Err(format!(
            "port {port} tls {tls} resume {resume}: server counted {} full + {} resumed, client {cf} + {cr}",
            f1 - f0,
            r1 - r0
        ));
    }
    if cf + cr != rn {
        return Err(format!("port {port}: {} of {rn} handshakes", cf + cr));
    }
    if resume == "off" && cr != 0 {
        return Err(format!("port {port}: {cr} resumed with --resume off"));
    }
    Ok(ResumeRun {
        us: format!("{:.1}", (a - b) / 1000.0 / rn as f64),
        full: cf,
        resumed: cr,
        pace: doc.handshakes.per_second as u64,
        busy: format!("{:.0}", doc.generator.utilization * 100.0),
    })
}

/// The cost of one resumed handshake in a run of RN connections that cost CPU_US each
/// and held FULL full handshakes at FULL_US each: (CPU − full × FULL_US) ÷ resumed, µs.
pub fn resumed_us(cpu_us: &str, full: u64, resumed: u64, full_us: &str, rn: u64) -> Res<String> {
    if resumed == 0 {
        return Err("a resumption run resumed no handshake".into());
    }
    let c = crate::rows::num(cpu_us) * rn as f64;
    Ok(format!(
        "{:.1}",
        (c - full as f64 * crate::rows::num(full_us)) / resumed as f64
    ))
}

/// Runs `tlsperf crypto limit --json --group x25519 --cert ecdsa-p256` for TLS
/// version TLS (on the servers' CPU), with EXTRA arguments.
pub fn crypto_limit(t: &Tools, tls: &str, extra: &[&str]) -> Res<LimitReport> {
    let out = t
        .command(false, &t.bin)
        .args(["crypto", "limit", "--json", "--tls", tls])
        .args(["--group", "x25519", "--cert", "ecdsa-p256"])
        .args(extra)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("crypto limit: {e}"))?;
    if !out.status.success() {
        return Err(format!("crypto limit --tls {tls} failed"));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("crypto limit's document: {e}"))
}

/// What a `crypto limit` document says of the server's side of one handshake KIND, µs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ServerSide {
    /// Its crypto, measured inside real handshakes.
    pub crypto: f64,
    /// rustls's whole in-memory server handshake (its crypto included).
    pub handshake: f64,
    /// Of the crypto, the ticket crypto (opening the ticket offered, sealing new ones): a
    /// server resuming by session id or stateful ticket looks its session up instead.
    pub tickets: f64,
}

/// The server side of KIND in a `crypto limit` document.
pub fn server_side(doc: &LimitReport, kind: FullOrResumed) -> Res<ServerSide> {
    let limit = doc
        .limits
        .iter()
        .find(|x| x.kind == kind && x.side == Role::Server)
        .ok_or_else(|| format!("crypto limit has no server {kind:?} row"))?;
    let tickets = doc
        .in_handshake
        .iter()
        .find(|x| x.kind == kind && x.side == Role::Server)
        .ok_or_else(|| format!("crypto limit has no server {kind:?} in_handshake row"))?
        .categories
        .iter()
        .filter(|c| c.category == Category::Tickets)
        .map(|c| c.ns)
        .sum::<f64>();
    Ok(ServerSide {
        crypto: limit.crypto_ns / 1000.0,
        handshake: limit.measured_ns / 1000.0,
        tickets: tickets / 1000.0,
    })
}

/// Memory per idle TLS connection, 5,000 held open on a fresh server: connections held
/// and KiB each.
pub fn held_kib(t: &Tools, pid: u32, port: u16) -> Res<(u64, String)> {
    let rss = |pid| proc_rss_kib(pid).map_err(|e| e.to_string());
    let r0 = rss(pid)?;
    let file = t.file("hold");
    let mut child = t
        .command(true, &t.hold)
        .args([format!("127.0.0.1:{port}"), "5000".into(), "4".into()])
        .stdout(File::create(&file).map_err(|e| e.to_string())?)
        .spawn()
        .map_err(|e| format!("{}: {e}", t.hold.display()))?;
    while std::fs::metadata(&file).map_or(0, |m| m.len()) == 0
        && child.try_wait().map_err(|e| e.to_string())?.is_none()
    {
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_millis(500));
    let r1 = rss(pid)?;
    child.wait().map_err(|e| e.to_string())?;
    let text = std::fs::read_to_string(&file).unwrap_or_default();
    let n: u64 = text
        .split_whitespace()
        .next()
        .and_then(|w| w.parse().ok())
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("hold_connections held nothing: {text}"))?;
    Ok((n, format!("{:.1}", (r1 as f64 - r0 as f64) / n as f64)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const H2LOAD: &str = "starting benchmark...
Application protocol: http/1.1
progress: 10% done
finished in 1.25s, 2402.30 req/s, 331.71KB/s
requests: 3000 total, 3000 started, 3000 done, 2998 succeeded, 2 failed, 0 errored, 0 timeout
Cipher: TLS_AES_128_GCM_SHA256
";

    #[test]
    fn h2load_output() {
        assert_eq!(h2load_succeeded(H2LOAD), Some(2998));
        assert_eq!(h2load_rate(H2LOAD), Some(2402.30));
        assert_eq!(
            h2load_cipher(H2LOAD).as_deref(),
            Some("TLS_AES_128_GCM_SHA256")
        );
        assert_eq!(h2load_succeeded("nothing"), None);
        assert_eq!(
            h2load_rate("finished in 3.2s, 61,234.5 req/s"),
            Some(61234.5)
        );
    }

    #[test]
    fn the_generators_suite() {
        assert_eq!(
            load_cipher("TLS_AES_128_GCM_SHA256").as_deref(),
            Some("TLS13_AES_128_GCM_SHA256")
        );
        assert_eq!(load_cipher("ECDHE-ECDSA-AES128-GCM-SHA256"), None);
    }

    #[test]
    fn nginx_reuse_log() {
        assert_eq!(log_counts("r\n.\n.\nr\nr\n\n"), (2, 3));
    }

    #[test]
    fn serve_stats() {
        let s = serde_json::json!({"handshakes": {"full": {"count": 12}}});
        assert_eq!(stats_count(&s, "full"), 12);
        assert_eq!(stats_count(&s, "resumed"), 0);
    }

    #[test]
    fn a_resumed_handshake_is_what_the_run_spent_beyond_its_full_ones() {
        // 800 connections at 60 µs: 8 full at 200 µs, 792 resumed.
        assert_eq!(resumed_us("60.0", 8, 792, "200.0", 800).unwrap(), "58.6");
        assert!(resumed_us("60.0", 800, 0, "60.0", 800).is_err());
    }

    #[test]
    fn last_lines() {
        assert_eq!(tail("a\nb\nc\nd\n", 3), "b\nc\nd");
        assert_eq!(tail("a", 3), "a");
    }
}
