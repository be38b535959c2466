//! The measuring side of `bench/floor.sh` (issue 20): how far `tlsperf serve` is from the
//! floor of a TLS connection, and what resumption and the load generator cost, all in one
//! run with the servers alternating round by round. The script builds, writes the PKI and
//! nginx's configuration, starts the servers (nginx, one `examples/flight_floor` server
//! per shape, `tlsperf serve` three ways and a baseline's), calls this, and stops them on
//! every exit path. This runs the clients, reads the servers' CPU and counts, checks that
//! every handshake called full or resumed was so by the servers' own counts, and prints
//! the report (markdown) on stdout; docs/benchmarks.md says how to read it.
//!
//! What a run measures (written for `bench/floor.sh`, which runs this):
//!
//! ```text
//! How far `tlsperf serve` is from the floor of a TLS connection, and what resumption and the
//! load generator cost, all in ONE run with the servers alternating round by round (issue 20).
//!
//! Per round (loopback; every load bounded by -n or -D; load average recorded with each round):
//!   plain   nginx, plain HTTP/1.1, one worker: server CPU per connection (the kernel + HTTP
//!           floor of a connection) — h2load --h1 -n N -c 50 -t 1 -H 'Connection: close'
//!           (in serve's slices, below);
//!   nginx   nginx + OpenSSL, full TLS 1.3 (ssl_session_tickets off, ssl_session_cache off),
//!           same h2load; `$ssl_session_reused` is logged and must be "." for every request;
//!   serve   `tlsperf serve --threads 1 --resumption off --groups x25519`, same h2load; its
//!           /stats must count N more full handshakes and no resumed one;
//!   base    the same for a baseline binary (BASE=path, e.g. main's), when given;
//!   crypto  `tlsperf crypto limit --json`: the public-key crypto and hashing of one full
//!           TLS 1.3 server handshake measured inside real handshakes (`limits[full,server]
//!           .crypto_ns`, each call timed on the thread's CPU clock, so a busy machine
//!           inflates it about as much as it inflates the servers' CPU figures). TLS 1.3's
//!           is taken in serve's slices (below, --duration 250ms each, their mean): this VM's
//!           CPUs run the same code at one speed for some seconds and up to 1.4× slower for
//!           the next (`crypto limit` alone: 86, 88 and 114 µs in three runs a minute apart),
//!           so a term measured minutes away from serve's run moves the ratio by as much.
//!           TLS 1.2's, for the resumption floor, is its own step.
//!           floor = plain + crypto; the target is serve ≤ 1.4 × floor;
//!   client  generator CPU per full handshake, same server (serve): h2load's (rusage of the
//!           h2load process, one whole run of N right before tlsperf load's) vs
//!           `tlsperf load --new-conn --resume off --no-verify-cache` (its own
//!           generator.cpu_us_per_handshake: the process's CPU during the run, every chain
//!           verified — the run must say chains_verified = N, chains_from_cache = 0),
//!           held with --ciphers to the TLS 1.3 suite h2load negotiated with serve in the
//!           warm-up (rustls's default would be AES-256-GCM-SHA384: more work than h2load's);
//!   resume  server CPU per connection, full vs resumed, same client (tlsperf load --new-conn
//!           -c 8 -n 4N, held to the AES-128-GCM-SHA256 suite `crypto limit` measures),
//!           against `serve --resumption stateful` (TLS 1.2 session ids, TLS 1.3
//!           stateful tickets) and `serve --resumption tickets` (TLS 1.2 and 1.3 tickets).
//!           The first handshake of a connection slot is full, so the resumed cost is
//!           (CPU − full × cost of a full one) ÷ resumed, both counts from the server's own
//!           /stats, which must match the client's. Each run's floor is taken right after
//!           it, at its own handshakes/s and 8 connections at once (floor_at): tlsperf load
//!           -c 8 drives serve 3–10× faster than h2load does, and a floor taken at h2load's
//!           pace (as until 2026-12-01) is no floor for it. The resumed run's floor is taken
//!           with a busy and with a sleeping flight client: tlsperf load is CPU-bound in the
//!           full runs but waits on the server part of the time in the resumed ones (its CPU
//!           use is printed), and waking it is charged to the server's writes. The same
//!           runs against nginx + OpenSSL (TLS 1.2 and 1.3, a session cache or tickets),
//!           counted by nginx's own `$ssl_session_reused` log, are a reference beside
//!           serve's: what a mature server's resumption costs, and its resumed ÷ full.
//!           Each floor is also taken with rustls's whole in-memory server handshake
//!           (`crypto limit`'s measured_ns) in the crypto's place: the floor of a server
//!           built on rustls. And each resumed handshake is held against its own floor, as
//!           the full one is: a resumed ÷ full held against the floor's resumed ÷ full
//!           bounds nothing (a server slow at full handshakes beats it);
//!   keep    keep-alive requests/s: h2load --h1 -c 50 -t 1 -D K/4 s --warm-up-time 300ms
//!           (serve, and base if given), in 4 slices per round with serve and base taking turns,
//!           so that both span the same seconds (this VM's keep-alive rate jumps between two
//!           levels, ~40k and ~60k/s, from second to second, and whole back-to-back runs put
//!           the two binaries on different levels: per-round ratios of 0.79–1.07 in one run).
//!           h2load counts only the requests of the measured seconds, after every connection's
//!           handshake (done in the warm-up); a server's figure is the mean of its slices;
//!   flights what the kernel must cost for a TLS connection's flights, without crypto, at the
//!           rate h2load drives serve (its warm-up's requests/s): examples/flight_floor
//!           replays the bytes of real rustls connections (TLS 1.3 and 1.2, full and
//!           resumed, the request and response inside) between a bare one-thread epoll
//!           server and a paced client (-c 50) that never sleeps (`busy`: it polls without
//!           blocking, as h2load, busy with its own crypto, does; a sleeping client would
//!           make the server pay for waking it, which h2load never does; the row "sleeping
//!           client" shows by how much). Its plain-HTTP shape is measured too, and so
//!           is nginx's plain HTTP with that client and pace, so the bare server can be held
//!           against nginx. serve's own run and every flight run are interleaved, in 4
//!           slices of N/4 connections each, so that all are measured across the same
//!           seconds. The floor at serve's pace = nginx plain at that pace + (TLS
//!           flights − plain flights on the bare server) + crypto; the same for each
//!           resumption ratio, with `crypto limit`'s resumed server crypto (TLS 1.2 too).
//! First, on the fresh servers: resident memory per idle TLS connection, 5,000 held open.
//! Last, issue 20's targets, each held to its limit with a verdict, beside where a server built
//! on rustls would stand if it spent nothing beyond rustls's handshake and the flights' kernel
//! cost at the same pace: a cost target that this floor misses no rustls server can meet in the
//! run, and a resumed ÷ full one only a server that spends more over its floor on full
//! handshakes than on resumed ones.
//!
//! With two CPUs or more, every server runs on CPU 1 and every client on CPU 0 (taskset), as
//! h2load and serve end up anyway (h2load keeps its CPU busy): the floor's servers meet
//! their clients in the same places serve meets h2load. FLOOR_PIN=0 leaves placement to
//! the scheduler.
//!
//! Server CPU is the process's CPU clock (clock_getcpuclockid: every thread's run time,
//! user + kernel, the scheduler's figure /proc/PID/task/*/schedstat shows, exited threads
//! included) around the run; generator CPU is the client process's own. Nothing of the
//! client is charged to the server and the other way round. On a loaded machine CPU time
//! per connection is inflated less than wall time but still is (cache, frequency,
//! scheduler): read the ratios, which are taken round by round in the same conditions, and
//! the load average printed with them.
//! ```
//!
//! Usage (the script's call):
//! `floor_bench --work DIR --bin TLSPERF [--base PATH] --rounds R -n N -k K [--pin]
//!   --nginx-master PID --peer NAME=PID:PORT[:METRICS_PORT]…`
//! with the peers `nginx-plain`, `nginx-full`, `nginx-ids`, `nginx-tickets` (nginx's
//! worker and its four servers), `serve`, `stateful`, `tickets` (and `base` with
//! `--base`) with their metrics ports, and `flight-SHAPE` for the five shapes. DIR holds
//! `pki/root.pem`, `nginx/{reused,ids,tickets}.log`, and per shape `SHAPE.fl` and
//! `SHAPE.sizes` (what `flight_floor record` wrote). Exits 1 with `CHECK FAILED: …` when
//! a check fails, 2 on bad arguments.

mod measure;
mod report;
mod rows;
mod steps;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

use measure::{Res, Tools};

/// The flight shapes, in the report's order.
pub const SHAPES: [&str; 5] = [
    "plain",
    "tls1.3-full",
    "tls1.3-resumed",
    "tls1.2-full",
    "tls1.2-resumed",
];

#[derive(Parser)]
#[command(name = "floor_bench", about = "the measuring side of bench/floor.sh")]
struct Args {
    /// The run's directory (written by bench/floor.sh).
    #[arg(long)]
    work: PathBuf,
    /// The tlsperf binary measured.
    #[arg(long)]
    bin: PathBuf,
    /// The baseline binary (its serve is the peer `base`).
    #[arg(long)]
    base: Option<String>,
    /// Rounds.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..100))]
    rounds: u32,
    /// Connections per run.
    #[arg(short, value_parser = clap::value_parser!(u64).range(200..10_000_000))]
    n: u64,
    /// Keep-alive seconds per server and round.
    #[arg(short, value_parser = clap::value_parser!(u32).range(1..100))]
    k: u32,
    /// Clients on CPU 0, servers on CPU 1.
    #[arg(long)]
    pin: bool,
    /// nginx's master process.
    #[arg(long)]
    nginx_master: u32,
    /// A server: NAME=PID:PORT[:METRICS_PORT].
    #[arg(long = "peer", value_parser = parse_peer)]
    peers: Vec<(String, Peer)>,
}

/// A server the script started.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Peer {
    /// Its process (for nginx: the worker).
    pub pid: u32,
    /// Where it listens.
    pub port: u16,
    /// A serve's metrics port (its /stats).
    pub metrics: Option<u16>,
}

fn parse_peer(s: &str) -> Result<(String, Peer), String> {
    let bad = || format!("{s}: expected NAME=PID:PORT[:METRICS_PORT]");
    let (name, rest) = s.split_once('=').ok_or_else(bad)?;
    let f: Vec<&str> = rest.split(':').collect();
    if !(2..=3).contains(&f.len()) {
        return Err(bad());
    }
    let pid = f[0].parse().map_err(|_| bad())?;
    let port = f[1].parse().map_err(|_| bad())?;
    let metrics = match f.get(2) {
        Some(m) => Some(m.parse().map_err(|_| bad())?),
        None => None,
    };
    Ok((name.to_string(), Peer { pid, port, metrics }))
}

/// The run's settings and servers.
pub struct Run {
    /// Programs, files, placement.
    pub tools: Tools,
    /// Rounds.
    pub rounds: u32,
    /// Connections per run.
    pub n: u64,
    /// Connections per resumption run and its floor runs (4N).
    pub rn: u64,
    /// Keep-alive seconds per server and round.
    pub k: u32,
    /// The baseline binary, when given.
    pub base: Option<String>,
    /// nginx's master process.
    pub nginx_master: u32,
    peers: BTreeMap<String, Peer>,
}

impl Run {
    /// The peer NAME.
    pub fn peer(&self, name: &str) -> Res<Peer> {
        self.peers
            .get(name)
            .copied()
            .ok_or_else(|| format!("no peer {name} given"))
    }

    /// A serve's metrics port.
    pub fn metrics(&self, name: &str) -> Res<u16> {
        self.peer(name)?
            .metrics
            .ok_or_else(|| format!("peer {name} has no metrics port"))
    }
}

fn main() -> ExitCode {
    let a = Args::parse();
    let dir = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(PathBuf::from))
        .unwrap_or_default();
    let run = Run {
        tools: Tools {
            bin: a.bin,
            flight: dir.join("flight_floor"),
            hold: dir.join("hold_connections"),
            work: a.work,
            pin: a.pin,
        },
        rounds: a.rounds,
        n: a.n,
        rn: 4 * a.n,
        k: a.k,
        base: a.base,
        nginx_master: a.nginx_master,
        peers: a.peers.into_iter().collect(),
    };
    match steps::measure(&run).and_then(|m| report::render(&run, &m)) {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("CHECK FAILED: {e}");
            ExitCode::from(1)
        }
    }
}
