//! The measuring side of `bench/compare-builds.sh` (issue 56): the headline CPU figures of
//! two builds of tlsperf, BASE and NEW, measured alternately in one run, each with its
//! ratio NEW ÷ BASE, the spread of that ratio over the rounds and a verdict from Welch's
//! test over the rounds. The script builds both binaries; this starts the servers, runs the
//! clients, and prints a markdown report on stdout (progress on stderr).
//!
//! Figures (loopback; servers on CPU 1 and clients on CPU 0 with `--pin`; every client run
//! bounded by a count of requests and a time limit):
//!
//! - `server full 1.3`: server CPU per full TLS 1.3 handshake of each build's
//!   `serve --threads 1 --resumption stateful --groups x25519`, driven by NEW's
//!   `load --new-conn --resume off -c 20`; the server's CPU is its process CPU clock (every
//!   thread, user + kernel) read by `load --server-pid` before and after the run;
//! - `server full 1.2` and `server resumed 1.2 (ids)`: the same with `--tls 1.2`, and
//!   `--resume ids` (TLS 1.2 session ids; the run must say ≥ 95% resumed), and their ratio
//!   per round (`resumed ÷ full 1.2`); each with the same figures of
//!   `examples/rustls_floor` (a bare tokio-rustls server, same certificate, versions,
//!   group and session cache) as the anchor;
//! - `generator`: client CPU per full handshake of each build's
//!   `load --new-conn --resume off --no-verify-cache -c 20` against one nginx worker (full
//!   TLS 1.3 only), from the run's own `generator.cpu_us_per_handshake` (the process's CPU,
//!   every chain verified); h2load's CPU per connection against the same nginx in the same
//!   round (its rusage) is printed as the anchor, and under the table the generator's
//!   floors: rustls's whole client handshake in memory (`crypto limit`), the chain verified,
//!   and a bare tokio-rustls client over sockets (`examples/rustls_client_floor`);
//! - `observe`: handshakes per CPU-second of each build's `observe --pcap FILE --json` on a
//!   capture of 30,000 handshakes of NEW's load against nginx taken once at the start (the
//!   child's rusage: its whole run, start-up included);
//! - `probes cost`: nginx's CPU per full handshake while each build's
//!   `observe --probes --pid NGINX_WORKER` runs, and with no observer (the anchor); only
//!   when both builds have `--probes` and the machine can attach uprobes.
//!
//! Verdict: Welch's two-sided test of BASE's per-round values against NEW's; `same` when
//! p ≥ 0.05, else `better` or `worse` in the figure's own direction (less CPU is better,
//! more handshakes per CPU-second is better).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tlsperf::crypto::in_memory::FullOrResumed;
use tlsperf::crypto::kx::Role;
use tlsperf::crypto::limit::LimitReport;
use tlsperf::load::LoadResult;
use tlsperf::stats::{Summary, welch_t_test};

type Res<T> = Result<T, String>;

/// The two builds and how to run them.
struct Run {
    base: PathBuf,
    new: PathBuf,
    /// examples/rustls_floor: the servers' anchor.
    floor: PathBuf,
    /// examples/rustls_client_floor: the generator's.
    client_floor: PathBuf,
    work: PathBuf,
    rounds: usize,
    n: u64,
    pin: bool,
    /// Children to kill when the run ends (servers, observers).
    children: Vec<Child>,
}

impl Drop for Run {
    /// Stops every child with SIGTERM (nginx's master then stops its worker), and kills
    /// what is still running 3 s later.
    fn drop(&mut self) {
        for c in &mut self.children {
            if let Ok(None) = c.try_wait() {
                // SAFETY: plain kill(2) of a child we started and have not reaped.
                unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            }
        }
        let until = Instant::now() + Duration::from_secs(3);
        for c in &mut self.children {
            while Instant::now() < until && matches!(c.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Which build a value belongs to.
#[derive(Clone, Copy, PartialEq)]
enum Build {
    Base,
    New,
}

impl Run {
    fn bin(&self, b: Build) -> &Path {
        match b {
            Build::Base => &self.base,
            Build::New => &self.new,
        }
    }

    /// PROGRAM on the clients' CPU (`client`) or the servers'.
    fn command(&self, client: bool, program: impl AsRef<std::ffi::OsStr>) -> Command {
        if self.pin {
            let mut c = Command::new("taskset");
            c.arg("-c").arg(if client { "0" } else { "1" }).arg(program);
            c
        } else {
            Command::new(program)
        }
    }

    fn file(&self, name: &str) -> PathBuf {
        self.work.join(name)
    }

    /// Starts a server or observer that lives until the run ends; its pid.
    fn start(&mut self, mut cmd: Command, log: &str) -> Res<u32> {
        let out = std::fs::File::create(self.file(log)).map_err(|e| format!("{log}: {e}"))?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out.try_clone().map_err(|e| e.to_string())?)
            .stderr(out)
            .spawn()
            .map_err(|e| format!("starting {cmd:?}: {e}"))?;
        let pid = child.id();
        self.children.push(child);
        Ok(pid)
    }

    /// Runs CMD to its end within LIMIT; its stdout+stderr and the CPU seconds it used.
    fn run(&self, mut cmd: Command, limit: Duration) -> Res<(String, f64)> {
        let out = self.file("client.out");
        let f = std::fs::File::create(&out).map_err(|e| e.to_string())?;
        let c0 = children_cpu();
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(f.try_clone().map_err(|e| e.to_string())?)
            .stderr(f)
            .spawn()
            .map_err(|e| format!("starting {cmd:?}: {e}"))?;
        let until = Instant::now() + limit;
        let status = loop {
            if let Some(s) = child.try_wait().map_err(|e| e.to_string())? {
                break s;
            }
            if Instant::now() >= until {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{cmd:?}: still running after {limit:?}, killed"));
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let cpu = children_cpu() - c0;
        let text = std::fs::read_to_string(&out).unwrap_or_default();
        if !status.success() {
            return Err(format!("{cmd:?} failed ({status}):\n{}", tail(&text, 5)));
        }
        Ok((text, cpu))
    }

    /// One `load` run of BUILD against PORT (server PID sampled); its document.
    fn load(&self, b: Build, port: u16, server: u32, args: &[&str]) -> Res<LoadResult> {
        self.load_n(b, port, server, self.n, args)
    }

    /// [`Run::load`] with N requests.
    fn load_n(&self, b: Build, port: u16, server: u32, n: u64, args: &[&str]) -> Res<LoadResult> {
        let doc = self.file("load.json");
        let _ = std::fs::remove_file(&doc);
        let mut cmd = self.command(true, self.bin(b));
        cmd.arg("load")
            .arg(format!("https://localhost:{port}/"))
            .args(["-n", &n.to_string(), "-c", "20", "--new-conn", "-q"])
            .arg("--cacert")
            .arg(self.file("pki/root.pem"))
            .args(["--server-pid", &server.to_string(), "--out"])
            .arg(&doc)
            .args(args);
        self.run(cmd, Duration::from_secs(300))?;
        let text = std::fs::read_to_string(&doc).map_err(|e| format!("{}: {e}", doc.display()))?;
        let r: LoadResult =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", doc.display()))?;
        if r.requests.failed > 0 || r.requests.completed < n {
            return Err(format!(
                "load {port} {args:?}: {} of {n} requests completed",
                r.requests.completed
            ));
        }
        Ok(r)
    }
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

fn tail(text: &str, lines: usize) -> String {
    let v: Vec<&str> = text.lines().collect();
    v[v.len().saturating_sub(lines)..].join("\n")
}

fn server_us(r: &LoadResult) -> Res<f64> {
    r.server
        .as_ref()
        .and_then(|s| s.cpu_us_per_handshake)
        .ok_or_else(|| "the load document has no server CPU per handshake".to_string())
}

/// Waits until PORT accepts connections (at most 10 s).
fn wait_port(port: u16) -> Res<()> {
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(format!("nothing listens on 127.0.0.1:{port} after 10 s"))
}

/// Whether BIN's observe has `--probes`.
fn has_probes(bin: &Path) -> bool {
    Command::new(bin)
        .args(["observe", "--help"])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("--probes"))
}

/// The values of one figure, per round, for each build.
struct Figure {
    name: &'static str,
    unit: &'static str,
    /// More is better (handshakes per CPU-second) rather than less (µs of CPU).
    more_is_better: bool,
    base: Vec<f64>,
    new: Vec<f64>,
    /// The anchor's per-round values, when the figure has one (printed beside it).
    anchor: Option<(&'static str, Vec<f64>)>,
}

impl Figure {
    fn new(name: &'static str, unit: &'static str, more_is_better: bool) -> Figure {
        Figure {
            name,
            unit,
            more_is_better,
            base: Vec::new(),
            new: Vec::new(),
            anchor: None,
        }
    }

    fn push(&mut self, b: Build, v: f64) {
        match b {
            Build::Base => self.base.push(v),
            Build::New => self.new.push(v),
        }
    }

    /// The report's row: means, ratio NEW ÷ BASE with the range of the per-round ratios,
    /// Welch's p and the verdict.
    fn row(&self) -> String {
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
        let (b, n) = (mean(&self.base), mean(&self.new));
        let ratios: Vec<f64> = self
            .base
            .iter()
            .zip(&self.new)
            .map(|(b, n)| n / b)
            .collect();
        let lo = ratios.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let (p, verdict) = match (Summary::of(&self.base), Summary::of(&self.new)) {
            (Ok(sb), Ok(sn)) => match welch_t_test(&sb, &sn, 0.95) {
                Ok(w) => {
                    let better = (n > b) == self.more_is_better;
                    let v = if w.p >= 0.05 {
                        "same"
                    } else if better {
                        "better"
                    } else {
                        "worse"
                    };
                    (format!("{:.3}", w.p), v)
                }
                Err(_) => ("–".into(), "too few rounds"),
            },
            _ => ("–".into(), "too few rounds"),
        };
        let anchor = self.anchor.as_ref().map_or("–".to_string(), |(name, v)| {
            let m = mean(v);
            let d = if m.abs() < 10.0 { 3 } else { 1 };
            format!("{name} {m:.d$} (NEW ÷ it {:.3})", n / m)
        });
        let d = if b.abs() < 10.0 { 3 } else { 1 };
        format!(
            "| {} | {:.d$} | {:.d$} | {} | **{:.3}** ({:.3}–{:.3}) | {} | {} | {} |",
            self.name,
            b,
            n,
            self.unit,
            n / b,
            lo,
            hi,
            p,
            verdict,
            anchor
        )
    }
}

fn parse_args() -> Res<Run> {
    let mut args = std::env::args().skip(1);
    let (mut base, mut new, mut work, mut floor, mut client_floor) = (None, None, None, None, None);
    let (mut rounds, mut n, mut pin) = (5usize, 2000u64, false);
    while let Some(a) = args.next() {
        let mut val = |what: &str| args.next().ok_or_else(|| format!("{what} needs a value"));
        match a.as_str() {
            "--base" => base = Some(PathBuf::from(val("--base")?)),
            "--new" => new = Some(PathBuf::from(val("--new")?)),
            "--work" => work = Some(PathBuf::from(val("--work")?)),
            "--floor" => floor = Some(PathBuf::from(val("--floor")?)),
            "--client-floor" => client_floor = Some(PathBuf::from(val("--client-floor")?)),
            "--rounds" => {
                rounds = val("--rounds")?
                    .parse()
                    .map_err(|_| "--rounds: a whole number, 2 or more".to_string())?
            }
            "-n" => {
                n = val("-n")?
                    .parse()
                    .map_err(|_| "-n: a whole number of handshakes".to_string())?
            }
            "--pin" => pin = true,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if rounds < 2 {
        return Err("--rounds: at least 2 (Welch's test needs two values per build)".into());
    }
    if n < 100 {
        return Err("-n: at least 100 handshakes per run".into());
    }
    Ok(Run {
        base: base.ok_or("--base BIN is required")?,
        new: new.ok_or("--new BIN is required")?,
        work: work.ok_or("--work DIR is required")?,
        floor: floor.ok_or("--floor BIN (examples/rustls_floor) is required")?,
        client_floor: client_floor
            .ok_or("--client-floor BIN (examples/rustls_client_floor) is required")?,
        rounds,
        n,
        pin,
        children: Vec::new(),
    })
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

const PORT_NEW: u16 = 19581;
const PORT_BASE: u16 = 19582;
const PORT_NGINX: u16 = 19583;
const PORT_FLOOR: u16 = 19584;
/// Handshakes in the capture observe reads: enough for about a CPU-second of reading, so
/// that its start-up and the clock's granularity do not weigh.
const PCAP_HANDSHAKES: u64 = 30_000;

fn main() {
    let mut run = match parse_args() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("compare_builds: {e}");
            std::process::exit(2);
        }
    };
    match measure(&mut run) {
        Ok(report) => print!("{report}"),
        Err(e) => {
            eprintln!("CHECK FAILED: {e}");
            drop(run);
            std::process::exit(1);
        }
    }
}

fn measure(run: &mut Run) -> Res<String> {
    let pki = run.file("pki");
    let status = Command::new(&run.new)
        .args(["pki", "init"])
        .arg(&pki)
        .args(["--key", "ecdsa-p256", "-q"])
        .status()
        .map_err(|e| e.to_string())?;
    if !status.success() {
        return Err("pki init failed".into());
    }
    let (chain, key) = (pki.join("server-chain.pem"), pki.join("server.key"));
    let mut servers = Vec::new();
    for (b, port) in [(Build::New, PORT_NEW), (Build::Base, PORT_BASE)] {
        let mut cmd = run.command(false, run.bin(b));
        cmd.arg("serve")
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .arg("--cert")
            .arg(&chain)
            .arg("--key")
            .arg(&key)
            .args(["--threads", "1", "--resumption", "stateful"])
            .args(["--tls", "1.2,1.3", "--groups", "x25519", "-q"]);
        let log = if b == Build::New {
            "serve-new.log"
        } else {
            "serve-base.log"
        };
        let pid = run.start(cmd, log)?;
        servers.push((b, port, pid));
    }
    let mut cmd = run.command(false, &run.floor);
    cmd.arg(format!("127.0.0.1:{PORT_FLOOR}"))
        .arg(&chain)
        .arg(&key);
    let floor = run.start(cmd, "floor.log")?;
    let ngx = run.file("nginx");
    std::fs::create_dir_all(&ngx).map_err(|e| e.to_string())?;
    let conf = format!(
        "worker_processes 1; daemon off; pid {d}/nginx.pid; error_log {d}/error.log;\n\
         events {{ worker_connections 16384; }}\n\
         http {{ access_log off; ssl_certificate {c}; ssl_certificate_key {k}; ssl_ecdh_curve X25519;\n\
         server {{ listen 127.0.0.1:{PORT_NGINX} ssl; ssl_protocols TLSv1.3; ssl_session_tickets off;\n\
         ssl_session_cache off; location / {{ return 200 'ok'; }} }} }}\n",
        d = ngx.display(),
        c = chain.display(),
        k = key.display()
    );
    std::fs::write(ngx.join("nginx.conf"), conf).map_err(|e| e.to_string())?;
    let mut cmd = run.command(false, "nginx");
    cmd.arg("-c")
        .arg(ngx.join("nginx.conf"))
        .arg("-p")
        .arg(&ngx);
    let master = run.start(cmd, "nginx.log")?;
    for p in [PORT_NEW, PORT_BASE, PORT_NGINX, PORT_FLOOR] {
        wait_port(p)?;
    }
    let worker = nginx_worker(master)?;

    // The capture observe reads: NEW's load against nginx, once.
    let pcap = run.file("handshakes.pcap");
    let mut dump = Command::new("tcpdump");
    dump.args(["-i", "lo", "-w"]).arg(&pcap).args([
        "-U",
        "-s",
        "0",
        "tcp",
        "port",
        &PORT_NGINX.to_string(),
    ]);
    let dump_pid = run.start(dump, "tcpdump.log")?;
    std::thread::sleep(Duration::from_millis(800));
    run.load_n(
        Build::New,
        PORT_NGINX,
        worker,
        PCAP_HANDSHAKES,
        &["--resume", "off"],
    )?;
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: plain kill(2) of a child we started.
    unsafe { libc::kill(dump_pid as i32, libc::SIGINT) };
    std::thread::sleep(Duration::from_millis(500));

    let probes = has_probes(&run.new) && has_probes(&run.base);
    let mut full13 = Figure::new("server full TLS 1.3", "µs CPU", false);
    let mut full12 = Figure::new("server full TLS 1.2", "µs CPU", false);
    let mut res12 = Figure::new("server resumed TLS 1.2 (ids)", "µs CPU", false);
    let mut ratio12 = Figure::new("resumed ÷ full, TLS 1.2", "ratio", false);
    let mut generator = Figure::new("generator, full TLS 1.3", "µs CPU", false);
    let mut obs = Figure::new("observe --pcap", "handshakes/CPU-s", true);
    let mut probe = Figure::new("nginx under observe --probes", "µs CPU", false);
    let mut h2 = Vec::new();
    let mut client_floor: Vec<(f64, f64)> = Vec::new();
    let mut floor13 = Vec::new();
    let mut floor12 = Vec::new();
    let mut floor_res = Vec::new();
    let mut floor_ratio = Vec::new();
    let mut bare = Vec::new();
    let mut bare_client = Vec::new();
    let mut loads = Vec::new();
    for r in 0..run.rounds {
        let order = if r % 2 == 0 {
            [Build::New, Build::Base]
        } else {
            [Build::Base, Build::New]
        };
        eprintln!(
            "round {}/{} (load average {})",
            r + 1,
            run.rounds,
            loadavg()
        );
        loads.push(loadavg());
        for &(b, port, pid) in servers.iter().cycle().skip(r % 2).take(2) {
            let [f13, f12, s12] = server_figures(run, port, pid)?;
            full13.push(b, f13);
            full12.push(b, f12);
            res12.push(b, s12);
            ratio12.push(b, s12 / f12);
        }
        let [f13, f12, s12] = server_figures(run, PORT_FLOOR, floor)?;
        floor13.push(f13);
        floor12.push(f12);
        floor_res.push(s12);
        floor_ratio.push(s12 / f12);
        for b in order {
            let r = run.load(
                b,
                PORT_NGINX,
                worker,
                &["--resume", "off", "--no-verify-cache"],
            )?;
            let us = r
                .generator
                .cpu_us_per_handshake
                .ok_or("the load document has no generator CPU per handshake")?;
            generator.push(b, us);
        }
        let mut cmd = run.command(true, "h2load");
        cmd.args(["--h1", "-n", &run.n.to_string(), "-c", "20", "-t", "1"])
            .args(["-H", "Connection: close"])
            .arg(format!("https://localhost:{PORT_NGINX}/"));
        let (_, cpu) = run.run(cmd, Duration::from_secs(300))?;
        h2.push(cpu * 1e6 / run.n as f64);
        let mut cmd = run.command(true, &run.client_floor);
        cmd.arg(format!("localhost:{PORT_NGINX}"))
            .arg(run.file("pki/root.pem"))
            .args([run.n.to_string(), "20".into()]);
        let (_, cpu) = run.run(cmd, Duration::from_secs(300))?;
        bare_client.push(cpu * 1e6 / run.n as f64);
        client_floor.push(client_in_memory(run)?);
        for b in order {
            let mut cmd = run.command(true, run.bin(b));
            cmd.args(["observe", "--pcap"]).arg(&pcap).args([
                "--port",
                &PORT_NGINX.to_string(),
                "--json",
            ]);
            let (text, cpu) = run.run(cmd, Duration::from_secs(300))?;
            let hs = observed_handshakes(&text)?;
            obs.push(b, hs / cpu.max(1e-6));
        }
        if probes {
            let nginx_cpu = |run: &Run| -> Res<f64> {
                server_us(&run.load(Build::New, PORT_NGINX, worker, &["--resume", "off"])?)
            };
            bare.push(nginx_cpu(run)?);
            for b in order {
                let mut cmd = run.command(true, run.bin(b));
                cmd.args(["observe", "--probes", "--pid", &worker.to_string()])
                    .args(["-d", "600s"]);
                let pid = run.start(cmd, "observe-probes.log")?;
                wait_probing(&run.file("observe-probes.log"))?;
                let v = nginx_cpu(run);
                // SAFETY: plain kill(2) of a child we started.
                unsafe { libc::kill(pid as i32, libc::SIGINT) };
                if let Some(c) = run.children.iter_mut().find(|c| c.id() == pid) {
                    let _ = c.wait();
                }
                probe.push(b, v?);
            }
        }
    }
    generator.anchor = Some(("h2load", h2));
    full13.anchor = Some(("rustls floor", floor13));
    full12.anchor = Some(("rustls floor", floor12));
    res12.anchor = Some(("rustls floor", floor_res));
    ratio12.anchor = Some(("rustls floor", floor_ratio));
    let n = client_floor.len().max(1) as f64;
    let (hs, crypto) = client_floor
        .iter()
        .fold((0.0, 0.0), |(a, b), (h, c)| (a + h / n, b + c / n));
    let h2_mean = generator.anchor.as_ref().map_or(f64::NAN, |(_, v)| {
        v.iter().sum::<f64>() / v.len().max(1) as f64
    });
    let gen_mean = generator.new.iter().sum::<f64>() / generator.new.len().max(1) as f64;
    let bare_mean = bare_client.iter().sum::<f64>() / bare_client.len().max(1) as f64;
    let floor_line = format!(
        "\nThe generator's floor, same rounds: rustls's whole client handshake in memory (NEW's \
         `crypto limit`, no sockets, the chain verified) {hs:.1} µs, of it crypto {crypto:.1} µs: \
         {:.3} and {:.3} × h2load's CPU per connection; NEW's generator is {:.3} × the in-memory handshake.\n\
         \nA bare tokio-rustls client over sockets (examples/rustls_client_floor: one thread, -c 20, \
         every chain verified, no resumption), same nginx, same rounds: {bare_mean:.1} µs per \
         handshake (rounds {}): {:.3} × h2load's; NEW's generator is {:.3} × it.\n",
        hs / h2_mean,
        crypto / h2_mean,
        gen_mean / hs,
        bare_client
            .iter()
            .map(|v| format!("{v:.1}"))
            .collect::<Vec<_>>()
            .join(", "),
        bare_mean / h2_mean,
        gen_mean / bare_mean,
    );
    let mut figures = vec![full13, full12, res12, ratio12, generator, obs];
    if probes {
        probe.anchor = Some(("no observer", bare));
        figures.push(probe);
    }
    let mut out = String::new();
    out.push_str(&format!(
        "# compare-builds: NEW {} ÷ BASE {}\n\n{} rounds of {} handshakes per run, alternating; load average at each round: {}\n\n",
        run.new.display(),
        run.base.display(),
        run.rounds,
        run.n,
        loads.join(", ")
    ));
    out.push_str("| figure | BASE | NEW | unit | NEW ÷ BASE (per-round range) | Welch p | verdict | anchor, same run |\n");
    out.push_str("|---|---:|---:|---|---|---:|---|---|\n");
    for f in &figures {
        out.push_str(&f.row());
        out.push('\n');
    }
    if !probes {
        out.push_str("\nprobes cost: not compared (a build without `observe --probes`).\n");
    }
    out.push_str(&floor_line);
    Ok(out)
}

/// A server's CPU per handshake, µs: full TLS 1.3, full TLS 1.2, resumed TLS 1.2 (session
/// ids; at least 95% of them resumed), each one run of NEW's `load`.
fn server_figures(run: &Run, port: u16, pid: u32) -> Res<[f64; 3]> {
    let f13 = server_us(&run.load(Build::New, port, pid, &["--resume", "off", "--tls", "1.3"])?)?;
    let f12 = server_us(&run.load(Build::New, port, pid, &["--resume", "off", "--tls", "1.2"])?)?;
    let res = run.load(Build::New, port, pid, &["--resume", "ids", "--tls", "1.2"])?;
    if res.handshakes.resumption_rate < 0.95 {
        return Err(format!(
            "the server on port {port} resumed only {:.1}% of TLS 1.2 handshakes",
            res.handshakes.resumption_rate * 100.0
        ));
    }
    Ok([f13, f12, server_us(&res)?])
}

/// rustls's whole full TLS 1.3 client handshake in memory and its crypto, µs (NEW's
/// `crypto limit`, X25519, an ECDSA P-256 chain, on the clients' CPU): the least a client
/// that verifies every chain spends per handshake before any socket.
fn client_in_memory(run: &Run) -> Res<(f64, f64)> {
    let mut cmd = run.command(true, &run.new);
    cmd.args([
        "crypto", "limit", "--json", "--tls", "1.3", "--group", "x25519",
    ])
    .args([
        "--key-type",
        "ecdsa-p256",
        "--duration",
        "250ms",
        "--rounds",
        "1",
    ]);
    let (text, _) = run.run(cmd, Duration::from_secs(120))?;
    let doc: LimitReport =
        serde_json::from_str(&text).map_err(|e| format!("crypto limit's document: {e}"))?;
    let l = doc
        .limits
        .iter()
        .find(|x| x.kind == FullOrResumed::Full && x.side == Role::Client)
        .ok_or("crypto limit has no full client row")?;
    Ok((l.measured_ns / 1000.0, l.crypto_ns / 1000.0))
}

/// Handshakes an observe document counts (`handshakes.all.count`).
fn observed_handshakes(json: &str) -> Res<f64> {
    let v: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("observe's document: {e}"))?;
    v.pointer("/handshakes/all/count")
        .and_then(serde_json::Value::as_f64)
        .filter(|n| *n > 0.0)
        .ok_or_else(|| "observe's document counts no handshakes".to_string())
}

/// The worker of an nginx master (its first child).
fn nginx_worker(master: u32) -> Res<u32> {
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        let path = format!("/proc/{master}/task/{master}/children");
        if let Some(pid) = std::fs::read_to_string(&path)
            .ok()
            .and_then(|s| s.split_whitespace().next().and_then(|p| p.parse().ok()))
        {
            return Ok(pid);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err("nginx started no worker".into())
}

/// Waits until an observer's log says it is probing (at most 30 s).
fn wait_probing(log: &Path) -> Res<()> {
    let until = Instant::now() + Duration::from_secs(30);
    while Instant::now() < until {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.contains("probing") {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(format!(
        "observe --probes did not start probing within 30 s: {}",
        tail(&std::fs::read_to_string(log).unwrap_or_default(), 3)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figure(more_is_better: bool, base: &[f64], new: &[f64]) -> String {
        let mut f = Figure::new("f", "µs", more_is_better);
        f.base = base.to_vec();
        f.new = new.to_vec();
        f.row()
    }

    #[test]
    fn the_verdict_follows_welch_and_the_figures_direction() {
        let base = [100.0, 102.0, 98.0, 101.0, 99.0];
        let more = [120.0, 122.0, 118.0, 121.0, 119.0];
        let noisy = [90.0, 112.0, 95.0, 108.0, 99.0];
        assert!(figure(false, &base, &more).contains("| worse |"));
        assert!(figure(true, &base, &more).contains("| better |"));
        assert!(figure(false, &base, &noisy).contains("| same |"));
        let row = figure(false, &base, &more);
        assert!(row.contains("**1.200** (1.196–1.204)"), "{row}");
        assert!(figure(false, &[100.0], &[120.0]).contains("too few rounds"));
    }
}
