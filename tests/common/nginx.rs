//! nginx (Debian's nginx-light) as an independent server for the tests: a child on a
//! loopback port with a `tlsperf pki init` certificate, everything it writes inside a
//! temporary directory, and an access log saying whether each session was resumed.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::tlsperf;

pub const NGINX: &str = "/usr/sbin/nginx";

/// Size of the body nginx serves at `/big`.
pub const BIG_BYTES: usize = 1 << 20;

/// What an nginx of [`Nginx::start_tls`] serves: its certificate chain and key (default:
/// its own `tlsperf pki init`'s), and lines for its server block.
#[derive(Default)]
pub struct Tls {
    pub chain: Option<String>,
    pub key: Option<String>,
    pub extra: String,
}

/// An nginx child on a loopback port with everything it writes inside a temporary
/// directory; killed when dropped.
pub struct Nginx {
    child: Child,
    /// Started with a master process (workers forked from it): stopped by SIGTERM.
    master: bool,
    conf: PathBuf,
    pub port: u16,
    access_log: PathBuf,
    error_log: PathBuf,
    /// The root CA of its certificate.
    pub root: String,
    _dir: tempfile::TempDir,
}

impl Nginx {
    /// Starts nginx with a `tlsperf pki init` certificate and a session cache; `tickets`
    /// turns session tickets on or off. `None` (with the reason printed) when nginx is
    /// not installed.
    pub fn start(tickets: bool) -> Option<Nginx> {
        Nginx::start_with(tickets, false, &Tls::default())
    }

    /// As [`Nginx::start`] (tickets off), with the certificate and key `tls` names, if it
    /// names them, and its lines added to the server block.
    pub fn start_tls(tls: &Tls) -> Option<Nginx> {
        Nginx::start_with(false, false, tls)
    }

    /// As [`Nginx::start`], with a master process and two workers forked from it (as
    /// nginx runs in production): [`Nginx::reload`] and [`Nginx::restart`] work.
    pub fn start_master(tickets: bool) -> Option<Nginx> {
        Nginx::start_with(tickets, true, &Tls::default())
    }

    fn start_with(tickets: bool, master: bool, tls: &Tls) -> Option<Nginx> {
        if !Path::new(NGINX).exists() {
            super::missing(NGINX, "apt-get install nginx-light");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let pki = d.join("pki");
        let run = tlsperf(["pki", "init", pki.to_str().unwrap(), "-q"]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        // A free loopback port: bind, note it, let it go.
        let port = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let p = |name: &str| d.join(name).to_str().unwrap().to_string();
        let conf = format!(
            r#"# Without a master, one process: killing the child stops nginx (workers outlive
# a killed master, so a master is stopped by SIGTERM).
master_process {master};
worker_processes {workers};
pid {pid};
error_log {error_log} info;
events {{ worker_connections 64; }}
http {{
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    log_format t '$ssl_protocol $ssl_session_reused $status $remote_port $msec';
    access_log {access_log} t;
    # Older nginx closes keep-alive connections after 100 requests.
    keepalive_requests 10000;
    server {{
        listen 127.0.0.1:{port} ssl;
        server_name localhost;
        ssl_certificate {chain};
        ssl_certificate_key {key};
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_session_tickets {tickets};
        ssl_session_cache shared:S:1m;
        # 0-RTT: nginx answers a request sent as early data before the handshake ends
        # (only clients given --early-data send any).
        ssl_early_data on;
        {extra}
        # A 1 MiB body: a request whose time is the server's and the transfer's.
        location = /big {{ alias {big}; }}
        location / {{ return 200 "ok\n"; }}
    }}
}}
"#,
            master = if master { "on" } else { "off" },
            workers = if master { 2 } else { 1 },
            pid = p("nginx.pid"),
            error_log = p("error.log"),
            tmp = d.to_str().unwrap(),
            access_log = p("access.log"),
            chain = tls.chain.clone().unwrap_or_else(|| pki
                .join("server-chain.pem")
                .to_str()
                .unwrap()
                .into()),
            key =
                tls.key
                    .clone()
                    .unwrap_or_else(|| pki.join("server.key").to_str().unwrap().into()),
            extra = tls.extra,
            tickets = if tickets { "on" } else { "off" },
            big = p("big.bin"),
        );
        std::fs::write(d.join("big.bin"), vec![b'x'; BIG_BYTES]).unwrap();
        let conf_path = p("nginx.conf");
        std::fs::write(&conf_path, conf).unwrap();
        let child = spawn(Path::new(&conf_path), d);
        let mut nginx = Nginx {
            child,
            master,
            conf: conf_path.into(),
            port,
            access_log: d.join("access.log"),
            error_log: d.join("error.log"),
            root: pki.join("root.pem").to_str().unwrap().to_string(),
            _dir: dir,
        };
        nginx.wait_until_listening();
        if master {
            nginx.wait_for_workers(&[]);
        }
        Some(nginx)
    }

    fn wait_until_listening(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            if let Some(status) = self.child.try_wait().unwrap() {
                let mut err = String::new();
                if let Some(mut e) = self.child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut e, &mut err);
                }
                panic!(
                    "nginx exited with {status}: {err}{}",
                    std::fs::read_to_string(&self.error_log).unwrap_or_default()
                );
            }
            assert!(
                Instant::now() < deadline,
                "nginx is not listening on port {} after 10 s: {}",
                self.port,
                std::fs::read_to_string(&self.error_log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `nginx -s reload`: the master reads its configuration again and replaces its
    /// workers with new ones (new pids); waits until the new workers run.
    pub fn reload(&self) {
        assert!(self.master, "reload needs Nginx::start_master");
        let before = self.workers();
        let out = Command::new(NGINX)
            .args(["-c", self.conf.to_str().unwrap(), "-p"])
            .arg(self.conf.parent().unwrap())
            .args(["-s", "reload"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "nginx -s reload: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.wait_for_workers(&before);
    }

    /// Waits until the master has both its workers, neither of them among `before`.
    fn wait_for_workers(&self, before: &[u32]) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let new = self
                .workers()
                .iter()
                .filter(|w| !before.contains(w))
                .count();
            if new >= 2 {
                return;
            }
            assert!(Instant::now() < deadline, "no new nginx workers after 10 s");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A full restart: the master stops (SIGQUIT, its workers finish what they serve),
    /// and a new one (a new pid) starts with the same configuration, port and logs.
    pub fn restart(&mut self) {
        assert!(self.master, "restart needs Nginx::start_master");
        let pid = self.child.id().to_string();
        let _ = Command::new("/bin/kill").args(["-QUIT", &pid]).status();
        let _ = self.child.wait();
        self.child = spawn(&self.conf, self.conf.parent().unwrap());
        self.wait_until_listening();
        self.wait_for_workers(&[]);
    }

    /// The master's workers (its children).
    pub fn workers(&self) -> Vec<u32> {
        let master = self.child.id();
        let mut out = Vec::new();
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            let ppid = stat
                .rfind(')')
                .and_then(|i| stat[i + 1..].split_whitespace().nth(1))
                .and_then(|p| p.parse::<u32>().ok());
            if ppid == Some(master) {
                out.push(pid);
            }
        }
        out
    }

    pub fn url(&self) -> String {
        format!("https://localhost:{}/", self.port)
    }

    /// Its process (the only one with `master_process off`; else the master).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The access log's lines, once there are at least `n` (nginx writes a line after
    /// the response has gone out, so the last may lag behind the client), and after a
    /// short wait for any more.
    pub fn log_lines(&self, n: usize) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let text = std::fs::read_to_string(&self.access_log).unwrap_or_default();
            let lines: Vec<String> = text.lines().map(str::to_string).collect();
            if lines.len() >= n || Instant::now() >= deadline {
                // Wait a little for any more (a test may expect exactly `n`).
                std::thread::sleep(Duration::from_millis(100));
                let text = std::fs::read_to_string(&self.access_log).unwrap_or_default();
                return text.lines().map(str::to_string).collect();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        if self.master {
            // A killed master leaves its workers running: it is asked to stop them.
            let pid = self.child.id().to_string();
            let _ = Command::new("/bin/kill").args(["-TERM", &pid]).status();
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline && matches!(self.child.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// nginx in the foreground with the configuration `conf`, prefix `dir`.
fn spawn(conf: &Path, dir: &Path) -> Child {
    Command::new(NGINX)
        .arg("-c")
        .arg(conf)
        .arg("-p")
        .arg(dir)
        .args(["-g", "daemon off;"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("nginx starts")
}

/// One access-log line: whether its session was resumed, the client's port and when
/// nginx wrote it (`$msec`, ms since the Unix epoch).
pub struct Entry {
    pub reused: bool,
    pub port: u16,
    pub ms: f64,
}

/// The access log's lines as entries.
pub fn entries(lines: &[String]) -> Vec<Entry> {
    lines
        .iter()
        .map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            assert_eq!(f.len(), 5, "access log line {line:?}");
            Entry {
                reused: f[1] == "r",
                port: f[3].parse().unwrap(),
                ms: f[4].parse::<f64>().unwrap() * 1000.0,
            }
        })
        .collect()
}

/// `(not reused, reused)` counts of `$ssl_session_reused` in access-log lines
/// `$ssl_protocol $ssl_session_reused $status $remote_port $msec`, checking the status
/// (200) and, when given, the protocol.
pub fn reused_counts(lines: &[String], protocol: Option<&str>) -> (u64, u64) {
    let (mut fresh, mut reused) = (0, 0);
    for line in lines {
        let fields: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(fields.len(), 5, "access log line {line:?}");
        if let Some(p) = protocol {
            assert_eq!(fields[0], p, "{line:?}");
        }
        assert_eq!(fields[2], "200", "{line:?}");
        match fields[1] {
            "." => fresh += 1,
            "r" => reused += 1,
            other => panic!("$ssl_session_reused {other:?} in {line:?}"),
        }
    }
    (fresh, reused)
}
