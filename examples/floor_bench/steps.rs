//! The run: memory on the fresh servers, the warm-up, the rounds (each step's rows, the
//! steps alternating in order round by round, the load average and the hypervisor's steal
//! recorded with each), and the checks of the servers' own counts at the end.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tlsperf::crypto::in_memory::FullOrResumed;
use tlsperf::load::usage::cpu_ticks;

use crate::measure::{self, Counter, Flights, Res, h2conn};
use crate::rows::{Rows, num};
use crate::{Run, SHAPES};

/// What the rounds measured, and what the report says beside it.
pub struct Measured {
    /// Every row.
    pub rows: Rows,
    /// Steal per round and step, % (round, step, text).
    pub steal: Vec<(u32, String, String)>,
    /// Connections started per second by h2load against serve in the warm-up.
    pub pace: u64,
    /// The suite h2load negotiated with serve.
    pub h2_cipher: String,
    /// The same for `tlsperf load --ciphers`.
    pub load_cipher: String,
    /// KiB per idle connection, serve's and the baseline's.
    pub mem_serve: String,
    /// The baseline's, when given.
    pub mem_base: Option<String>,
    /// Full and resumed handshakes serve --resumption off counted during the rounds.
    pub serve_counted: (u64, u64),
    /// The connections that count was checked against.
    pub expected: u64,
    /// Reused sessions and requests in nginx's full-only TLS server's log.
    pub nginx_reused: (u64, u64),
}

/// The 1-minute load average, as /proc/loadavg writes it.
fn load1() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|t| t.split_whitespace().next().map(str::to_string))
        .unwrap_or_default()
}

/// The steps of round R, in its order: odd rounds one way, even rounds the other.
pub fn order(r: u32, base: bool) -> Vec<&'static str> {
    let mut o = vec!["nginx", "serve-flights"];
    if base {
        o.push("base");
    }
    o.extend(["crypto", "client", "resume", "keep"]);
    if r.is_multiple_of(2) {
        o.reverse();
    }
    o
}

/// Connections of slice S (1–4) of N: a quarter, the last one the rest.
pub fn slice(n: u64, s: u32) -> u64 {
    if s == 4 { n - 3 * (n / 4) } else { n / 4 }
}

/// Measures everything; the report is written from what this returns.
pub fn measure(run: &Run) -> Res<Measured> {
    let t = &run.tools;
    let serve = run.peer("serve")?;
    let mem_serve = measure::held_kib(t, serve.pid, serve.port)?.1;
    let mem_base = match run.base {
        Some(_) => {
            let b = run.peer("base")?;
            Some(measure::held_kib(t, b.pid, b.port)?.1)
        }
        None => None,
    };

    // Warm-up: every server has done a few hundred handshakes before the first measured one.
    let mut urls = vec![
        format!("http://127.0.0.1:{}/", run.peer("nginx-plain")?.port),
        format!("https://127.0.0.1:{}/", run.peer("nginx-full")?.port),
        format!("https://127.0.0.1:{}/", serve.port),
    ];
    if run.base.is_some() {
        urls.push(format!("https://127.0.0.1:{}/", run.peer("base")?.port));
    }
    let (mut h2_cipher, mut pace) = (None, 0);
    for (i, u) in urls.iter().enumerate() {
        let out = measure::h2load_warm(t, u)?;
        if i == 2 {
            // The suite h2load negotiates with serve: tlsperf load is held to the same one
            // (rustls's default order prefers AES-256-GCM-SHA384, OpenSSL's h2load gets
            // AES-128-GCM-SHA256 here), so that the two generators do the same work. And
            // the connection rate h2load drives serve at: the flight floor is measured at it.
            h2_cipher = measure::h2load_cipher(&out);
            pace = measure::h2load_rate(&out).map_or(0, |r| r as u64);
        }
    }
    if pace == 0 {
        return Err("no connection rate from h2load's warm-up against serve".into());
    }
    for sh in SHAPES {
        if !measure::flight_warm(t, run.peer(&format!("flight-{sh}"))?.port, sh)? {
            return Err(format!("flight warm-up {sh}"));
        }
    }
    if !measure::flight_warm(t, run.peer("nginx-plain")?.port, "plain")? {
        return Err("flight warm-up against nginx plain".into());
    }
    let h2_cipher = h2_cipher.unwrap_or_default();
    let load_cipher = measure::load_cipher(&h2_cipher).ok_or_else(|| {
        let c = if h2_cipher.is_empty() {
            "nothing"
        } else {
            &h2_cipher
        };
        format!("h2load negotiated '{c}' with serve: not a TLS 1.3 suite this bench knows")
    })?;

    let counter = Counter::Stats(run.metrics("serve")?);
    let before = measure::server_counts(&counter)?;
    let mut m = Round {
        run,
        pace,
        load_cipher: &load_cipher,
        rows: Rows::default(),
        r: 0,
        l: String::new(),
    };
    let mut steal = Vec::new();
    for r in 1..=run.rounds {
        m.r = r;
        for what in order(r, run.base.is_some()) {
            m.l = load1();
            let t0 = cpu_ticks(None);
            m.step(what)?;
            let s = match (t0, cpu_ticks(None)) {
                (Some(a), Some(b)) => b.steal_since(&a).unwrap_or(0.0) * 100.0,
                _ => 0.0,
            };
            steal.push((r, what.to_string(), format!("{s:.1}")));
        }
    }

    // Every handshake h2load and tlsperf load made against the full-only serve was full.
    let after = measure::server_counts(&counter)?;
    let counted = (after.0 - before.0, after.1 - before.1);
    if counted.1 != 0 {
        return Err(format!(
            "serve --resumption off counted {} resumed handshakes",
            counted.1
        ));
    }
    // h2load -n N twice (serve's run, in slices, and the client comparison's), tlsperf
    // load -n N and the 50 connections of each of the 4 keep-alive slices, every round.
    let expected = u64::from(run.rounds) * (3 * run.n + 4 * 50);
    if counted.0 != expected {
        return Err(format!(
            "serve counted {} full handshakes, expected {expected}",
            counted.0
        ));
    }
    let nginx_reused = nginx_reuse(run)?;
    Ok(Measured {
        rows: m.rows,
        steal,
        pace,
        h2_cipher,
        load_cipher,
        mem_serve,
        mem_base,
        serve_counted: counted,
        expected,
        nginx_reused,
    })
}

/// nginx's own word: no request on the full-only TLS server came over a reused session.
/// nginx is stopped gracefully first (SIGQUIT), so that its log is complete.
fn nginx_reuse(run: &Run) -> Res<(u64, u64)> {
    let worker = run.peer("nginx-full")?.pid;
    // SAFETY: kill with a pid the script gave and a signal number; no memory involved.
    unsafe { libc::kill(run.nginx_master as libc::pid_t, libc::SIGQUIT) };
    let until = Instant::now() + Duration::from_secs(10);
    while std::path::Path::new(&format!("/proc/{worker}")).exists() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    let log = std::fs::read_to_string(run.tools.file("nginx/reused.log")).unwrap_or_default();
    let (_, reused) = measure::log_counts(&log);
    let total = log.lines().count() as u64;
    if reused != 0 {
        return Err(format!("nginx resumed {reused} of {total} sessions"));
    }
    let expected = u64::from(run.rounds) * run.n + 300;
    if total != expected {
        return Err(format!(
            "nginx logged {total} requests, expected {expected}"
        ));
    }
    Ok((reused, total))
}

/// One round's state: where its rows go, its number and the step's load average.
struct Round<'a> {
    run: &'a Run,
    pace: u64,
    load_cipher: &'a str,
    rows: Rows,
    r: u32,
    l: String,
}

impl Round<'_> {
    fn row(&mut self, key: &str, value: impl Into<String>, second: impl Into<String>) {
        let (r, l) = (self.r, self.l.clone());
        self.rows.push(r, key, value, second, &l);
    }

    fn step(&mut self, what: &str) -> Res<()> {
        match what {
            "nginx" | "base" => {
                let p = self
                    .run
                    .peer(if what == "base" { "base" } else { "nginx-full" })?;
                let url = format!("https://127.0.0.1:{}/", p.port);
                let (x, y) = h2conn(&self.run.tools, p.pid, &url, self.run.n, 1)?;
                self.row(what, x, y);
            }
            "crypto" => {
                let doc = measure::crypto_limit(&self.run.tools, "1.2", &[])?;
                for (kind, k) in [(FullOrResumed::Full, 'f'), (FullOrResumed::Resumed, 'r')] {
                    let s = measure::server_side(&doc, kind)?;
                    self.row(&format!("crypto1.2{k}"), format!("{:.1}", s.crypto), "0");
                    self.row(&format!("hs1.2{k}"), format!("{:.1}", s.handshake), "0");
                    self.row(&format!("tk1.2{k}"), format!("{:.1}", s.tickets), "0");
                }
            }
            "serve-flights" => self.serve_flights()?,
            "client" => self.client()?,
            "resume" => self.resume()?,
            "keep" => self.keep()?,
            other => return Err(format!("no step {other}")),
        }
        Ok(())
    }

    /// serve and every term of its floors (nginx plain under h2load, the flight shapes,
    /// TLS 1.3's crypto) interleaved in 4 slices of the round's N connections each, so
    /// that all of them are measured across the same seconds: steal, and what else
    /// disturbs a VM, comes and goes within seconds.
    fn serve_flights(&mut self) -> Res<()> {
        let (run, t) = (self.run, &self.run.tools);
        let serve = run.peer("serve")?;
        let plain = run.peer("nginx-plain")?;
        let mut tot: BTreeMap<String, String> = BTreeMap::new();
        // A running sum written with 3 decimals at every step.
        let mut add = |key: &str, x: &str, m: u64| {
            let t0 = tot.get(key).map_or(0.0, |v| num(v));
            tot.insert(key.to_string(), format!("{:.3}", t0 + num(x) * m as f64));
        };
        for s in 1..=4 {
            let sm = slice(run.n, s);
            for (key, p, scheme) in [("serve", serve, "https"), ("plain", plain, "http")] {
                let url = format!("{scheme}://127.0.0.1:{}/", p.port);
                let (x, y) = h2conn(t, p.pid, &url, sm, 3)?;
                add(key, &x, sm);
                add(&format!("{key}-h2"), &y, sm);
            }
            let doc = measure::crypto_limit(t, "1.3", &["--duration", "250ms"])?;
            for (kind, name) in [
                (FullOrResumed::Full, "full"),
                (FullOrResumed::Resumed, "resumed"),
            ] {
                let side = measure::server_side(&doc, kind)?;
                add(&format!("crypto-{name}"), &format!("{:.3}", side.crypto), 1);
                add(&format!("hs-{name}"), &format!("{:.3}", side.handshake), 1);
                add(&format!("tk-{name}"), &format!("{:.3}", side.tickets), 1);
            }
            for (key, busy) in [("pplain", true), ("pplain-sleep", false)] {
                let f = Flights {
                    shape: "plain",
                    n: sm,
                    at_once: 50,
                    rate: self.pace,
                    busy,
                };
                add(key, &measure::ffconn(t, plain.pid, plain.port, &f)?, sm);
            }
            for sh in SHAPES {
                let p = run.peer(&format!("flight-{sh}"))?;
                let f = Flights {
                    shape: sh,
                    n: sm,
                    at_once: 50,
                    rate: self.pace,
                    busy: true,
                };
                add(
                    &format!("f-{sh}"),
                    &measure::ffconn(t, p.pid, p.port, &f)?,
                    sm,
                );
            }
        }
        let get = |k: &str| tot.get(k).map_or(0.0, |v| num(v));
        let per = |k: &str| format!("{:.1}", get(k) / run.n as f64);
        let quarter = |k: &str| format!("{:.1}", get(k) / 4.0);
        self.row("serve", per("serve"), per("serve-h2"));
        self.row("plain", per("plain"), per("plain-h2"));
        for (key, term) in [
            ("crypto", "crypto-full"),
            ("crypto1.3r", "crypto-resumed"),
            ("hs", "hs-full"),
            ("hs1.3r", "hs-resumed"),
            ("tk1.3f", "tk-full"),
            ("tk1.3r", "tk-resumed"),
        ] {
            self.row(key, quarter(term), "0");
        }
        let mut keys = vec!["pplain".to_string(), "pplain-sleep".to_string()];
        keys.extend(SHAPES.iter().map(|s| format!("f-{s}")));
        for key in keys {
            self.row(&key, per(&key), "0");
        }
        Ok(())
    }

    /// h2load's own CPU in one whole run (one process start-up, as tlsperf load's), right
    /// before tlsperf load's, against the same server; tlsperf load verifies every chain.
    fn client(&mut self) -> Res<()> {
        let (run, t) = (self.run, &self.run.tools);
        let serve = run.peer("serve")?;
        let url = format!("https://127.0.0.1:{}/", serve.port);
        let (_, hy) = h2conn(t, serve.pid, &url, run.n, 1)?;
        self.row("h2client", hy, "0");
        let counter = Counter::Stats(run.metrics("serve")?);
        let f0 = measure::server_counts(&counter)?.0;
        let json = t.file("load.json");
        let status = t
            .command(true, &t.bin)
            .args([
                "load",
                &url,
                "--new-conn",
                "--resume",
                "off",
                "--no-verify-cache",
            ])
            .args(["-n", &run.n.to_string(), "-c", "50", "--http1"])
            .args(["--ciphers", self.load_cipher, "--cacert"])
            .arg(t.file("pki/root.pem"))
            .args(["--json", "-q"])
            .stdout(std::fs::File::create(&json).map_err(|e| e.to_string())?)
            .status()
            .map_err(|e| e.to_string())?;
        if !status.success() {
            return Err("tlsperf load against serve failed".into());
        }
        let doc = measure::load_doc(&json)?;
        if !measure::held_to(&doc, self.load_cipher) {
            return Err(format!("tlsperf load: not held to {}", self.load_cipher));
        }
        let f1 = measure::server_counts(&counter)?.0;
        let n = run.n;
        if doc.handshakes.kinds.get("full").copied().unwrap_or(0) != n {
            return Err(format!("tlsperf load: not {n} full handshakes"));
        }
        if doc.handshakes.chains_verified != n {
            return Err(format!("tlsperf load: not {n} chains verified"));
        }
        if doc.handshakes.chains_from_cache != 0 {
            return Err("tlsperf load: chains from cache".into());
        }
        if f1 - f0 != n {
            return Err(format!(
                "serve counted {} full handshakes for tlsperf load's {n}",
                f1 - f0
            ));
        }
        let us = doc
            .generator
            .cpu_us_per_handshake
            .ok_or("tlsperf load: no generator.cpu_us_per_handshake")?;
        self.row("load", format!("{us:.1}"), "0");
        Ok(())
    }

    /// Per version and kind of resumption (TLS 1.2 resumes by session id against the
    /// stateful server; TLS 1.3 always by ticket): a full run and a resumed one against
    /// serve, each followed by its floor's kernel and HTTP terms at the run's own pace
    /// (busy client after a full run, busy and sleeping after a resumed one); then the
    /// same two runs against nginx + OpenSSL, counted by its own `$ssl_session_reused`.
    fn resume(&mut self) -> Res<()> {
        let run = self.run;
        for v in ["1.3", "1.2"] {
            let idkind = if v == "1.3" {
                "resumed-ticket"
            } else {
                "resumed-session-id"
            };
            for kind in ["ids", "tickets"] {
                let (name, label, ck) = if kind == "tickets" {
                    ("tickets", "tickets", "resumed-ticket")
                } else {
                    ("stateful", "stateful", idkind)
                };
                let serve = Target {
                    peer: run.peer(name)?,
                    counter: Counter::Stats(run.metrics(name)?),
                };
                let (full_us, pace) =
                    self.resume_rows("", &format!("full{v}-{label}"), &serve, v, kind, None)?;
                let fl = self.floor_at(&format!("tls{v}-full"), pace, true)?;
                self.row(&format!("rf{v}-{kind}-full"), fl, "0");
                let res = Some((ck, full_us.as_str()));
                let (_, pace) =
                    self.resume_rows("", &format!("res{v}-{kind}"), &serve, v, kind, res)?;
                let fl = self.floor_at(&format!("tls{v}-resumed"), pace, true)?;
                self.row(&format!("rf{v}-{kind}-res"), fl, "0");
                let fl = self.floor_at(&format!("tls{v}-resumed"), pace, false)?;
                self.row(&format!("rf{v}-{kind}-res-sleep"), fl, "0");
                // nginx + OpenSSL, the same two runs: what a mature server's resumption
                // costs beside serve's (a reference, not a floor).
                let nginx = Target {
                    peer: run.peer(&format!("nginx-{kind}"))?,
                    counter: Counter::Log(run.tools.file(&format!("nginx/{kind}.log"))),
                };
                let (full_us, _) =
                    self.resume_rows("n", &format!("nfull{v}-{kind}"), &nginx, v, kind, None)?;
                let res = Some((ck, full_us.as_str()));
                self.resume_rows("n", &format!("nres{v}-{kind}"), &nginx, v, kind, res)?;
            }
        }
        Ok(())
    }

    /// One resumption run as rows: KEY (µs per handshake of the run's kind; for a resumed
    /// run, its CPU less its full handshakes at FULL_US each), PREFIXpaceV-KIND-SIDE
    /// (handshakes/s) and PREFIXbusyV-KIND-SIDE (tlsperf load's CPU use). Returns KEY's
    /// figure (the resumed run's cost needs the full one's) and the run's pace (its floor
    /// is taken at it).
    fn resume_rows(
        &mut self,
        prefix: &str,
        key: &str,
        target: &Target,
        v: &str,
        kind: &str,
        resumed: Option<(&str, &str)>,
    ) -> Res<(String, u64)> {
        let (run, t) = (self.run, &self.run.tools);
        let (p, c) = (target.peer, &target.counter);
        let (us, cr, side, out) = match resumed {
            None => {
                let out = measure::resume_run(t, p.pid, p.port, c, v, "off", "resumed", run.rn)?;
                (out.us.clone(), 0, "full", out)
            }
            Some((ck, full_us)) => {
                let out = measure::resume_run(t, p.pid, p.port, c, v, kind, ck, run.rn)?;
                let us = measure::resumed_us(&out.us, out.full, out.resumed, full_us, run.rn)?;
                (us, out.resumed, "res", out)
            }
        };
        self.row(key, us.clone(), cr.to_string());
        self.row(
            &format!("{prefix}pace{v}-{kind}-{side}"),
            out.pace.to_string(),
            "0",
        );
        self.row(&format!("{prefix}busy{v}-{kind}-{side}"), out.busy, "0");
        Ok((us, out.pace))
    }

    /// The kernel and HTTP floor of a connection with SHAPE's flights at the pace and
    /// concurrency of a resumption run (tlsperf load -c 8 drives serve much faster than
    /// h2load -c 50 does, and the pace moves a connection's cost): nginx plain at that
    /// pace + what SHAPE's flights cost the bare server over plain ones; µs, no crypto.
    /// The flight client is busy (tlsperf load's full runs keep it so) or sleeping (its
    /// resumed runs wait on the server part of the time, and waking it is charged to the
    /// server's writes).
    fn floor_at(&self, shape: &str, pace: u64, busy: bool) -> Res<String> {
        let (run, t) = (self.run, &self.run.tools);
        let f = |shape| Flights {
            shape,
            n: run.rn,
            at_once: 8,
            rate: pace,
            busy,
        };
        let nginx = run.peer("nginx-plain")?;
        let bare = run.peer("flight-plain")?;
        let shaped = run.peer(&format!("flight-{shape}"))?;
        let p = measure::ffconn(t, nginx.pid, nginx.port, &f("plain"))?;
        let a = measure::ffconn(t, bare.pid, bare.port, &f("plain"))?;
        let s = measure::ffconn(t, shaped.pid, shaped.port, &f(shape))?;
        Ok(format!("{:.1}", num(&p) + num(&s) - num(&a)))
    }

    /// 4 slices of K/4 s each per server, serve and base taking turns (the first of each
    /// pair alternating), so that both are measured across the same seconds.
    fn keep(&mut self) -> Res<()> {
        let run = self.run;
        let mut kt: BTreeMap<&str, String> = BTreeMap::new();
        for s in 1..=4u32 {
            let mut servers = vec!["serve"];
            if run.base.is_some() {
                servers.push("base");
                if (self.r + s).is_multiple_of(2) {
                    servers.reverse();
                }
            }
            for name in servers {
                let url = format!("https://127.0.0.1:{}/", run.peer(name)?.port);
                let rps = measure::keep_alive(&run.tools, name, &url, run.k)?;
                let t0 = kt.get(name).map_or(0.0, |v| num(v));
                kt.insert(name, format!("{:.2}", t0 + rps / 4.0));
            }
        }
        let mut names = vec!["serve"];
        if run.base.is_some() {
            names.push("base");
        }
        for name in names {
            let v = kt.get(name).cloned().unwrap_or_default();
            self.row(&format!("keep-{name}"), v, "0");
        }
        Ok(())
    }
}

/// A server of a resumption run and where it counts its handshakes.
struct Target {
    peer: crate::Peer,
    counter: Counter,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_alternate_their_order() {
        assert_eq!(
            order(1, true),
            [
                "nginx",
                "serve-flights",
                "base",
                "crypto",
                "client",
                "resume",
                "keep"
            ]
        );
        assert_eq!(
            order(2, false),
            [
                "keep",
                "resume",
                "client",
                "crypto",
                "serve-flights",
                "nginx"
            ]
        );
    }

    #[test]
    fn four_slices_hold_every_connection() {
        assert_eq!((1..=4).map(|s| slice(3001, s)).sum::<u64>(), 3001);
        assert_eq!(slice(3001, 1), 750);
        assert_eq!(slice(3001, 4), 751);
    }
}
