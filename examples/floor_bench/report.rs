//! The report of a floor run (markdown): the tables, the floors and their ratios, issue
//! 20's targets each with a verdict, the steal per step and every row. Written from the
//! rows alone (and the run's settings), so that each figure can be recomputed from the
//! rows it prints.

use std::fmt::Write as _;

use crate::rows::{Rounds, Rows, div, median_of_ratios, num, py};
use crate::steps::Measured;
use crate::{Run, SHAPES};

/// The figures the targets section reads (key, value as written), in the order computed.
#[derive(Default)]
struct Figures(Vec<(String, String)>);

impl Figures {
    fn set(&mut self, key: &str, value: impl Into<String>) {
        self.0.push((key.into(), value.into()));
    }

    /// A figure written with 3 decimals (`nan` when there is none); the value itself.
    fn fig(&mut self, key: &str, value: f64) -> f64 {
        self.set(key, py(value, 3));
        value
    }

    fn of(&self, key: &str) -> String {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    }
}

/// The rows of a floor's terms, for one version and kind of resumption: the full and the
/// resumed handshake's crypto (or, with `hs`, rustls's whole in-memory handshake in its
/// place) and the ticket crypto each leaves out (a session-cache floor leaves it out; a
/// tickets floor keeps it).
fn floor_terms(v: &str, kind: &str, hs: bool) -> [String; 4] {
    let (mut cf, mut cr, mut tf, mut tr) = if v == "1.2" {
        ("crypto1.2f", "crypto1.2r", "tk1.2f", "tk1.2r")
    } else {
        ("crypto", "crypto1.3r", "tk1.3f", "tk1.3r")
    };
    let (hf, hr);
    if hs {
        hf = format!("hs{}", &cf["crypto".len()..]);
        hr = format!("hs{}", &cr["crypto".len()..]);
        (cf, cr) = (&hf, &hr);
    }
    if kind == "tickets" {
        (tf, tr) = ("none", "none");
    }
    [cf, cr, tf, tr].map(str::to_string)
}

/// A verdict: `**yes**`, `no`, or `no figure` when VALUE is not a number.
pub fn verdict(value: &str, at_most: bool, limit: f64) -> &'static str {
    if value.is_empty() || !value.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return "no figure";
    }
    let v = num(value);
    if (at_most && v <= limit) || (!at_most && v >= limit) {
        "**yes**"
    } else {
        "no"
    }
}

struct Report<'a> {
    rows: &'a Rows,
    out: String,
}

impl Report<'_> {
    fn line(&mut self, s: impl AsRef<str>) {
        self.out.push_str(s.as_ref());
        self.out.push('\n');
    }

    /// The floor's resumed ÷ full for one server and version, per round, then the
    /// median: each side is its run's kernel and HTTP floor at that run's pace + the
    /// server's crypto for the kind (or rustls's handshake, `hs`).
    fn floor_res(&self, v: &str, kind: &str, sleep: &str, hs: bool) -> String {
        let [cf, cr, tf, tr] = floor_terms(v, kind, hs);
        let g = |k: &str| self.rows.by_round(k);
        let (a, b) = (
            g(&format!("rf{v}-{kind}-full")),
            g(&format!("rf{v}-{kind}-res{sleep}")),
        );
        let (x, y, u, w) = (g(&cf), g(&cr), g(&tf), g(&tr));
        median_of_ratios(a.iter().filter_map(|(r, a)| {
            let (b, x, y) = (b.get(r)?, x.get(r)?, y.get(r)?);
            let (u, w) = (
                u.get(r).copied().unwrap_or(0.0),
                w.get(r).copied().unwrap_or(0.0),
            );
            (*a > 0.0 && *b > 0.0).then(|| (b + y - w) / (a + x - u))
        }))
    }

    /// serve's resumed handshake ÷ its own floor at the run's pace (busy client), per
    /// round, then the median: the full handshake's standard held to the resumed one.
    fn res_over_floor(&self, v: &str, kind: &str, hs: bool) -> String {
        let [_, cr, _, tr] = floor_terms(v, kind, hs);
        let g = |k: &str| self.rows.by_round(k);
        let (a, b) = (
            g(&format!("res{v}-{kind}")),
            g(&format!("rf{v}-{kind}-res")),
        );
        let (y, w) = (g(&cr), g(&tr));
        median_of_ratios(a.iter().filter_map(|(r, a)| {
            let (b, y) = (b.get(r)?, y.get(r)?);
            let w = w.get(r).copied().unwrap_or(0.0);
            (*b > 0.0).then(|| a / (b + y - w))
        }))
    }

    /// serve (or base) ÷ (plain + crypto), per round, then the median.
    fn floor_ratio(&self, key: &str) -> String {
        let g = |k: &str| self.rows.by_round(k);
        let (p, c, s) = (g("plain"), g("crypto"), g(key));
        median_of_ratios(s.iter().filter_map(|(r, s)| {
            let d = p.get(r).copied().unwrap_or(0.0) + c.get(r).copied().unwrap_or(0.0);
            div(*s, d)
        }))
    }
}

/// The report of a run.
pub fn render(run: &Run, m: &Measured) -> Result<String, String> {
    let rows = &m.rows;
    let mut rep = Report {
        rows,
        out: String::new(),
    };
    let mut figs = Figures::default();
    let (n, rn) = (run.n, run.rn);
    let med = |k: &str| rows.med(k);
    let rng = |k: &str| rows.rng(k);
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let placement = if run.tools.pin {
        "servers on CPU 1, clients on CPU 0"
    } else {
        "placement left to the scheduler"
    };
    let now = time::OffsetDateTime::now_utc()
        .format(time::macros::format_description!(
            "[year]-[month]-[day]T[hour]:[minute]:[second]Z"
        ))
        .map_err(|e| e.to_string())?;
    rep.line(format!(
        "# floor benchmark ({now}, {cores} cores, {placement}, {} rounds alternating, N={n})",
        run.rounds
    ));
    rep.line("");
    rep.line("Load average (1 min) at each measurement, round by round, is given with each row.");
    rep.line("");
    rep.line("| what | server CPU µs per connection (median) | range | h2load CPU µs per connection | load avg |");
    rep.line("|---|---:|---|---:|---|");
    let first = |what: &str, key: &str, h2: bool| {
        let h = if h2 {
            format!(" {} ", rows.med2(key))
        } else {
            " ".into()
        };
        format!(
            "| {what} | {} | {} |{h}| {} |",
            med(key),
            rng(key),
            rows.loads(key)
        )
    };
    rep.line(first(
        "nginx plain HTTP (kernel + HTTP floor)",
        "plain",
        true,
    ));
    rep.line(first(
        "server crypto of a full TLS 1.3 handshake (crypto limit, in-handshake)",
        "crypto",
        false,
    ));
    rep.line(first("nginx + OpenSSL full TLS 1.3", "nginx", true));
    rep.line(first(
        "tlsperf serve --resumption off, full TLS 1.3",
        "serve",
        true,
    ));
    if let Some(base) = &run.base {
        rep.line(first(
            &format!("baseline ({base}) serve, full TLS 1.3"),
            "base",
            true,
        ));
    }
    rep.line("");
    rep.line("- crypto limit times each crypto call on the thread's CPU clock (CLOCK_THREAD_CPUTIME_ID), as the servers' figures are CPU time");
    let floor_ratio = rep.floor_ratio("serve");
    rep.line(format!(
        "- floor = plain + crypto: {:.1} µs; serve ÷ floor (per round, median): **{floor_ratio}** (target ≤ 1.4)",
        num(&med("plain")) + num(&med("crypto"))
    ));
    if run.base.is_some() {
        let b = rep.floor_ratio("base");
        rep.line(format!(
            "- baseline ÷ floor: {b}; serve ÷ baseline: {}",
            rows.ratio("serve", "base")
        ));
    }
    rep.line(format!(
        "- serve ÷ nginx full TLS 1.3: {}",
        rows.ratio("serve", "nginx")
    ));
    rep.line("");
    rep.line("## The floor at serve's pace: a TLS connection's flights without crypto (examples/flight_floor)");
    rep.line("");
    rep.line(format!("Every row: server CPU µs per connection, {n} connections started at {}/s (h2load's rate against serve in the warm-up), at most 50 at once, by the flight client, which never sleeps (busy) but in the row \"sleeping client\" (not part of any floor).", m.pace));
    rep.line("");
    rep.line("| server | flights (bytes: C client, S server) | median | range |");
    rep.line("|---|---|---:|---|");
    let sizes = |sh: &str| -> String {
        let text =
            std::fs::read_to_string(run.tools.file(&format!("{sh}.sizes"))).unwrap_or_default();
        // What `flight_floor record` printed, less the shape's name.
        text.lines()
            .map(|l| l.split_once(' ').map_or(l, |(_, rest)| rest))
            .collect::<Vec<_>>()
            .join("\n")
    };
    rep.line(format!(
        "| nginx plain HTTP | {} (response: nginx's own) | {} | {} |",
        sizes("plain"),
        med("pplain"),
        rng("pplain")
    ));
    rep.line(format!(
        "| nginx plain HTTP, sleeping client | the same | {} | {} |",
        med("pplain-sleep"),
        rng("pplain-sleep")
    ));
    for sh in SHAPES {
        let k = format!("f-{sh}");
        rep.line(format!(
            "| bare epoll server, {sh} | {} | {} | {} |",
            sizes(sh),
            med(&k),
            rng(&k)
        ));
    }
    rep.line("");
    pace_floors(&mut rep, &mut figs);
    let (full, res) = m.serve_counted;
    let (reused, total) = m.nginx_reused;
    rep.line(format!("- full handshakes checked: serve /stats counted {full} full and {res} resumed for the {} connections of h2load, tlsperf load and the keep-alive runs; nginx logged $ssl_session_reused = r for {reused} of {total} requests", m.expected));
    rep.line("");
    rep.line("## Generator CPU per full handshake (against tlsperf serve --resumption off)");
    rep.line("");
    rep.line("| generator | CPU µs per handshake (median) | range |");
    rep.line("|---|---:|---|");
    rep.line(format!(
        "| h2load --h1 -c 50 -t 1 (verifies nothing; negotiated {}) | {} | {} |",
        m.h2_cipher,
        med("h2client"),
        rng("h2client")
    ));
    rep.line(format!("| tlsperf load --new-conn --resume off --no-verify-cache -c 50 --ciphers {} (every chain verified) | {} | {} |", m.load_cipher, med("load"), rng("load")));
    rep.line("");
    let h = rows.by_round("h2client");
    let gen_ratio = median_of_ratios(
        rows.by_round("load")
            .iter()
            .filter_map(|(r, t)| div(*t, h.get(r).copied().unwrap_or(0.0))),
    );
    figs.set("generator", gen_ratio.clone());
    rep.line(format!(
        "- tlsperf load ÷ h2load (per round, median): **{gen_ratio}** (target ≤ 0.5)"
    ));
    rep.line("");
    resumption(&mut rep, &mut figs, rn);
    rep.line("");
    rep.line("## Keep-alive and memory");
    rep.line("");
    rep.line(format!("| server | keep-alive req/s (h2load --h1 -c 50, 4 slices of {} s per round, median) | range | RSS KiB per idle TLS connection (5,000 held) |", f64::from(run.k) / 4.0));
    rep.line("|---|---:|---|---:|");
    rep.line(format!(
        "| serve | {} | {} | {} |",
        med("keep-serve"),
        rng("keep-serve"),
        m.mem_serve
    ));
    let mut keep = None;
    if run.base.is_some() {
        let mb = m.mem_base.clone().unwrap_or_default();
        rep.line(format!(
            "| baseline | {} | {} | {mb} |",
            med("keep-base"),
            rng("keep-base")
        ));
        rep.line("");
        let k = rows.ratio("keep-serve", "keep-base");
        rep.line(format!(
            "- serve ÷ baseline keep-alive req/s (per round, median): {k} (must stay ≥ 0.95)"
        ));
        keep = Some(k);
    }
    rep.line("");
    targets(&mut rep, &figs, m, keep.as_deref());
    steal_and_rows(&mut rep, run, m);
    Ok(rep.out)
}

/// The floor at serve's pace and the issue's floor, round by round.
fn pace_floors(rep: &mut Report, figs: &mut Figures) {
    let rounds = Rounds::of(rep.rows);
    // Kernel and HTTP of a connection with a shape's flights, at serve's pace: nginx's
    // plain connection there, plus what the shape's flights cost the bare server over
    // plain ones. It is a difference of measurements: a round where it comes out ≤ 0
    // (noise, e.g. steal in one of them) has no floor, and is left out (the targets
    // section lists such rounds).
    fn kern(g: &dyn Fn(&str) -> Option<f64>, sh: &str) -> Option<f64> {
        let k = g("pplain")? + g(&format!("f-{sh}"))? - g("f-plain")?;
        (k > 0.0).then_some(k)
    }
    let f13 = |g: &dyn Fn(&str) -> Option<f64>| Some(kern(g, "tls1.3-full")? + g("crypto")?);
    let h13 = |g: &dyn Fn(&str) -> Option<f64>| Some(kern(g, "tls1.3-full")? + g("hs")?);
    let literal = |g: &dyn Fn(&str) -> Option<f64>| Some(g("plain")? + g("crypto")?);
    let term = |k: &'static str| move |g: &dyn Fn(&str) -> Option<f64>| g(k);
    let serve_pace = figs.fig("serve/pace", rounds.median(|g| div(g("serve")?, f13(g)?)));
    rep.line(format!(
        "- floor at serve's pace, full TLS 1.3 = nginx plain at that pace + (TLS 1.3 flights − plain flights) + crypto: {} µs; serve ÷ it (per round, median): **{}** (target ≤ 1.4)",
        py(rounds.median(f13), 1),
        py(serve_pace, 3)
    ));
    // The same with rustls's whole in-memory server handshake (crypto limit's
    // measured_ns: its parsing, state machine and buffers as well as its crypto) in the
    // crypto's place: what a server built on rustls cannot go below; what serve spends
    // above it is HTTP (hyper), the runtime (tokio), the socket I/O glue and serve's own.
    rep.line(format!(
        "- the same with rustls's handshake in the crypto's place (crypto limit's in-memory server handshake, {} µs, of which crypto {}): {} µs; serve ÷ it (per round, median): {}",
        py(rounds.median(term("hs")), 1),
        py(rounds.median(term("crypto")), 1),
        py(rounds.median(h13), 1),
        py(rounds.median(|g| div(g("serve")?, h13(g)?)), 3)
    ));
    figs.fig("rustls/pace", rounds.median(|g| div(h13(g)?, f13(g)?)));
    rep.line(format!(
        "- the bare server ÷ nginx, plain flights, same client and pace: {} (the floor keeps nginx's plain connection as its base and adds only what the TLS flights cost the bare server over plain ones)",
        py(rounds.median(|g| div(g("f-plain")?, g("pplain")?)), 3)
    ));
    // The issue's own floor (nginx plain under h2load, at h2load's much higher plain
    // rate, + crypto) leaves out two costs no server at serve's rate avoids: the pace, and
    // the TLS flights. Held against it, the floor at serve's pace shows how much of the
    // 1.4 budget these two take before serve spends anything of its own.
    rep.line(format!(
        "- the issue's floor (nginx plain under h2load at its own rate + crypto): {} µs; what it leaves out, per round, median: the pace (nginx plain at serve's pace − under h2load) {} µs, the TLS 1.3 flights over plain ones on the bare server {} µs",
        py(rounds.median(literal), 1),
        signed(rounds.median(|g| Some(g("pplain")? - g("plain")?))),
        signed(rounds.median(|g| Some(g("f-tls1.3-full")? - g("f-plain")?)))
    ));
    let over = |g: &dyn Fn(&str) -> Option<f64>| div(f13(g)?, literal(g)?);
    let each: Vec<String> = rounds
        .each(over)
        .iter()
        .map(|x| format!("{x:.3}"))
        .collect();
    let serve_literal = figs.fig(
        "serve/literal",
        rounds.median(|g| div(g("serve")?, literal(g)?)),
    );
    rep.line(format!(
        "- **the floor at serve's pace ÷ the issue's floor: {}** (per round: {}); a server at serve's pace that spent nothing beyond the bare server's flights and the crypto would stand there against the issue's floor; serve ÷ the issue's floor: {}",
        py(rounds.median(over), 3),
        each.join(", "),
        py(serve_literal, 3)
    ));
    figs.fig(
        "rustls/literal",
        rounds.median(|g| div(h13(g)?, literal(g)?)),
    );
    rep.line("- the resumption floors are taken at the resumption runs' own pace: see the resumption table");
}

/// `+1.5`, `-0.3`, `nan`: a difference, with its sign.
fn signed(v: f64) -> String {
    if v.is_finite() {
        format!("{v:+.1}")
    } else {
        py(v, 1)
    }
}

/// The resumption table and its notes.
fn resumption(rep: &mut Report, figs: &mut Figures, rn: u64) {
    let rows = rep.rows;
    let med = |k: &str| rows.med(k);
    rep.line(format!("## Resumption: server CPU µs per connection, same client (tlsperf load --new-conn -c 8 -n {rn}, AES-128-GCM-SHA256)"));
    rep.line("");
    rep.line("| server | version | full | resumed | resumed ÷ full (per round, median) | the floor's resumed ÷ full at the same paces: busy / sleeping client in the resumed run | the same with rustls's handshake in the crypto's place: busy / sleeping | resumed ÷ its own floor (busy client): kernel + crypto / with rustls's handshake | handshakes/s: full run, resumed run | tlsperf load's CPU use: full run, resumed run (%) | resumed per run |");
    rep.line("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for v in ["1.3", "1.2"] {
        for kind in ["ids", "tickets"] {
            let (label, name, nname) = if kind == "tickets" {
                ("tickets", "tickets".to_string(), "tickets".to_string())
            } else {
                let what = if v == "1.2" {
                    "session ids"
                } else {
                    "stateful tickets"
                };
                (
                    "stateful",
                    format!("stateful ({what})"),
                    format!("session cache ({what})"),
                )
            };
            let rr = rows.ratio(&format!("res{v}-{kind}"), &format!("full{v}-{label}"));
            let rhs = rep.floor_res(v, kind, "", true);
            let rof = rep.res_over_floor(v, kind, true);
            figs.set(&format!("res{v}-{kind}"), rr.clone());
            figs.set(&format!("rustls-res{v}-{kind}"), rhs.clone());
            figs.set(&format!("own-res{v}-{kind}"), rof.clone());
            let vk = format!("{v}-{kind}");
            rep.line(format!(
                "| serve --resumption {name} | {v} | {} | {} | {rr} | {} / {} | {rhs} / {} | {} / {rof} | {}, {} | {}, {} | {} |",
                med(&format!("full{v}-{label}")),
                med(&format!("res{vk}")),
                rep.floor_res(v, kind, "", false),
                rep.floor_res(v, kind, "-sleep", false),
                rep.floor_res(v, kind, "-sleep", true),
                rep.res_over_floor(v, kind, false),
                med(&format!("pace{vk}-full")),
                med(&format!("pace{vk}-res")),
                med(&format!("busy{vk}-full")),
                med(&format!("busy{vk}-res")),
                rows.med2(&format!("res{vk}")),
            ));
            rep.line(format!(
                "| nginx + OpenSSL, {nname} | {v} | {} | {} | {} | (a reference, not a floor) | | | {}, {} | {}, {} | {} |",
                med(&format!("nfull{vk}")),
                med(&format!("nres{vk}")),
                rows.ratio(&format!("nres{vk}"), &format!("nfull{vk}")),
                med(&format!("npace{vk}-full")),
                med(&format!("npace{vk}-res")),
                med(&format!("nbusy{vk}-full")),
                med(&format!("nbusy{vk}-res")),
                rows.med2(&format!("nres{vk}")),
            ));
        }
    }
    rep.line("");
    let r = |a: &str, b: &str| rows.ratio(a, b);
    rep.line(format!("- serve ÷ nginx, same version, kind and client (per round, median): resumed TLS 1.3 {} (stateful) / {} (tickets), TLS 1.2 {} (session ids) / {} (tickets); full TLS 1.3 {} / {}, TLS 1.2 {} / {}. nginx's own $ssl_session_reused counted every run's full and resumed handshakes as tlsperf load did",
        r("res1.3-ids", "nres1.3-ids"), r("res1.3-tickets", "nres1.3-tickets"),
        r("res1.2-ids", "nres1.2-ids"), r("res1.2-tickets", "nres1.2-tickets"),
        r("full1.3-stateful", "nfull1.3-ids"), r("full1.3-tickets", "nfull1.3-tickets"),
        r("full1.2-stateful", "nfull1.2-ids"), r("full1.2-tickets", "nfull1.2-tickets")));
    rep.line(format!("- the floor of each run: nginx plain HTTP + (the shape's flights − plain flights on the bare server), all three at that run's handshakes/s with at most 8 connections at once (the flight client busy after a full run, busy / sleeping after a resumed one), + `crypto limit`'s server crypto for a full or a resumed handshake; median kernel and HTTP floor (no crypto) per connection, µs: TLS 1.3 full {} / resumed {}, TLS 1.2 full {} / resumed by session id {} / by ticket {}; server crypto (crypto limit), µs: TLS 1.3 full {} / resumed {}, TLS 1.2 full {} / resumed {}; rustls's whole in-memory server handshake (crypto limit's measured_ns, its crypto included; resumed by ticket), µs: TLS 1.3 full {} / resumed {}, TLS 1.2 full {} / resumed {}; of these, ticket crypto (left out of the session-cache floors), µs: TLS 1.3 full {} / resumed {}, TLS 1.2 full {} / resumed {}",
        med("rf1.3-ids-full"), med("rf1.3-ids-res"), med("rf1.2-ids-full"), med("rf1.2-ids-res"), med("rf1.2-tickets-res"),
        med("crypto"), med("crypto1.3r"), med("crypto1.2f"), med("crypto1.2r"),
        med("hs"), med("hs1.3r"), med("hs1.2f"), med("hs1.2r"),
        med("tk1.3f"), med("tk1.3r"), med("tk1.2f"), med("tk1.2r")));
}

/// Issue 20's targets, each held to its limit, beside where a server built on rustls
/// would stand if it spent nothing beyond rustls's own handshake and the kernel's cost of
/// the same flights at the same pace. A cost target that this column misses cannot be met
/// in this run by any server built on rustls; a resumed ÷ full target that it misses,
/// only by one whose full handshakes cost more over their floor than its resumed ones.
fn targets(rep: &mut Report, figs: &Figures, m: &Measured, keep: Option<&str>) {
    rep.line("## Issue 20's targets in this run");
    rep.line("");
    rep.line("| target | limit | this run | a server built on rustls, at its floor | met |");
    rep.line("|---|---:|---:|---:|---|");
    let mut row = |what: &str, at_most: bool, limit: &str, value: &str, rustls: &str| {
        let op = if at_most { "≤" } else { "≥" };
        let rustls = if rustls.is_empty() { "—" } else { rustls };
        let met = verdict(value, at_most, num(limit));
        rep.line(format!(
            "| {what} | {op} {limit} | {value} | {rustls} | {met} |"
        ));
    };
    let f = |k: &str| figs.of(k);
    row(
        "server CPU per full TLS 1.3 handshake ÷ the issue's floor (nginx plain under h2load at its own rate + crypto)",
        true,
        "1.4",
        &f("serve/literal"),
        &f("rustls/literal"),
    );
    row(
        "the same ÷ the floor at serve's pace (nginx plain at serve's pace + the TLS 1.3 flights + crypto)",
        true,
        "1.4",
        &f("serve/pace"),
        &f("rustls/pace"),
    );
    row(
        "TLS 1.3 resumed ÷ full, stateful tickets",
        true,
        "0.8",
        &f("res1.3-ids"),
        &f("rustls-res1.3-ids"),
    );
    row(
        "TLS 1.3 resumed ÷ full, tickets",
        true,
        "0.8",
        &f("res1.3-tickets"),
        &f("rustls-res1.3-tickets"),
    );
    row(
        "TLS 1.2 resumed ÷ full, session ids",
        true,
        "0.35",
        &f("res1.2-ids"),
        &f("rustls-res1.2-ids"),
    );
    row(
        "TLS 1.2 resumed ÷ full, tickets",
        true,
        "0.35",
        &f("res1.2-tickets"),
        &f("rustls-res1.2-tickets"),
    );
    let own = figs
        .0
        .iter()
        .filter(|(k, v)| k.starts_with("own-res") && verdict(v, true, 0.0) != "no figure")
        .map(|(_, v)| num(v))
        .fold(0.0, f64::max);
    let own = if own != 0.0 {
        format!("{own:.3}")
    } else {
        String::new()
    };
    row(
        "resumed ÷ its own floor with rustls's handshake, the largest of the four kinds above (proposed in their place)",
        true,
        "1.4",
        &own,
        "1.000",
    );
    row(
        "tlsperf load ÷ h2load, client CPU per full handshake (every chain verified)",
        true,
        "0.5",
        &f("generator"),
        "",
    );
    if let Some(k) = keep {
        row(
            "keep-alive requests/s, serve ÷ baseline",
            false,
            "0.95",
            k,
            "",
        );
    }
    row(
        "resident memory per idle TLS connection, KiB",
        true,
        "12",
        &m.mem_serve,
        "",
    );
    rep.line("");
    rep.line("- each ratio is the median of its per-round ratios (the tables above); memory is one measurement, on the fresh server");
    let no_floor = no_floor(rep.rows);
    let none = if no_floor.is_empty() {
        "none".to_string()
    } else {
        no_floor
    };
    rep.line(format!("- floors whose kernel part came out ≤ 0 (no floor: their rounds are left out of the ratios that use them): {none}"));
    rep.line("- every handshake this run calls full was full, and every one it calls resumed was resumed, by the servers' own counts (serve's /stats, nginx's $ssl_session_reused): the run stops with an error otherwise");
    rep.line("- a ratio of resumed ÷ full below the rustls floor's own is no gain: it comes from full handshakes that cost more over their floor than the resumed ones (see the resumption table's \"resumed ÷ its own floor\")");
}

/// A floor's kernel part is a difference of measurements (nginx plain + the shape's
/// flights − plain flights): the floors where noise drove it to ≤ 0, which have no floor
/// in their round.
pub fn no_floor(rows: &Rows) -> String {
    let mut out: Vec<String> = rows
        .0
        .iter()
        .filter(|r| r.key.starts_with("rf") && num(&r.value) <= 0.0)
        .map(|r| format!("{} in round {} ({} µs)", r.key, r.round, r.value))
        .collect();
    let (p, a, s) = (
        rows.by_round("pplain"),
        rows.by_round("f-plain"),
        rows.by_round("f-tls1.3-full"),
    );
    for (r, p) in &p {
        let k = p + s.get(r).copied().unwrap_or(0.0) - a.get(r).copied().unwrap_or(0.0);
        if k <= 0.0 {
            out.push(format!(
                "the full TLS 1.3 floor at serve's pace in round {r} ({k:.1} µs)"
            ));
        }
    }
    out.join("; ")
}

/// The steal table and every row.
fn steal_and_rows(rep: &mut Report, run: &Run, m: &Measured) {
    rep.line("");
    rep.line(
        "## Steal: the hypervisor's share of both CPUs during each measurement (%, /proc/stat)",
    );
    rep.line("");
    rep.line(
        "A round with much steal was measured on a CPU shared with other guests: its figures,",
    );
    rep.line("and the ratios taken in it, are the least trustworthy of the run.");
    rep.line("");
    let whats: Vec<&str> = m
        .steal
        .iter()
        .filter(|s| s.0 == 1)
        .map(|s| s.1.as_str())
        .collect();
    rep.line(format!("| round | {} |", whats.join(" | ")));
    rep.line(format!("|---|{}", "---:|".repeat(whats.len())));
    for r in 1..=run.rounds {
        let cells: Vec<&str> = whats
            .iter()
            .flat_map(|w| {
                m.steal
                    .iter()
                    .filter(move |s| s.0 == r && s.1 == *w)
                    .map(|s| s.2.as_str())
            })
            .collect();
        rep.line(format!("| {r} | {} |", cells.join(" | ")));
    }
    rep.line("");
    rep.line("<details><summary>rows (round, what, value, second value, load average)</summary>");
    rep.line("");
    rep.line("```");
    let mut rows = String::new();
    for r in &m.rows.0 {
        let _ = writeln!(rows, "{r}");
    }
    rep.out.push_str(&rows);
    rep.line("```");
    rep.line("</details>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::steps::Measured;

    fn rows(text: &str) -> Rows {
        let mut out = Rows::default();
        for l in text.lines().filter(|l| !l.trim().is_empty()) {
            let f: Vec<&str> = l.split_whitespace().collect();
            out.push(f[0].parse().unwrap(), f[1], f[2], f[3], f[4]);
        }
        out
    }

    /// The report of four rounds with a baseline (rows made for the test, two rounds
    /// without a floor among them), against what bench/floor.sh's shell and awk wrote
    /// from the same rows before its measuring moved here (bar the first line: the date).
    #[test]
    fn the_report_is_the_one_the_shell_script_wrote_from_the_same_rows() {
        let data =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/floor_bench/testdata");
        let read = |f: &str| std::fs::read_to_string(data.join(f)).unwrap();
        let work = tempfile::tempdir().unwrap();
        for sizes in [
            "plain: C54 S172",
            "tls1.3-full: C220 S1256 C64 C76 S218",
            "tls1.3-resumed: C411 S203 C64 C76 S626",
            "tls1.2-full: C142 S1151 C93 S51 C83 S232",
            "tls1.2-resumed: C338 S320 C51 C83 S232",
        ] {
            let shape = sizes.split(':').next().unwrap();
            std::fs::write(
                work.path().join(format!("{shape}.sizes")),
                format!("{sizes}\n"),
            )
            .unwrap();
        }
        let run = Run {
            tools: crate::measure::Tools {
                bin: "tlsperf".into(),
                flight: "flight_floor".into(),
                hold: "hold_connections".into(),
                work: work.path().into(),
                pin: true,
            },
            rounds: 4,
            n: 2000,
            rn: 8000,
            k: 8,
            base: Some("/opt/base-tlsperf".into()),
            nginx_master: 0,
            peers: Default::default(),
        };
        let steal = read("steal-4-rounds.txt")
            .lines()
            .map(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                (f[0].parse().unwrap(), f[1].to_string(), f[2].to_string())
            })
            .collect();
        let m = Measured {
            rows: rows(&read("rows-4-rounds.txt")),
            steal,
            pace: 2345,
            h2_cipher: "TLS_AES_128_GCM_SHA256".into(),
            load_cipher: "TLS13_AES_128_GCM_SHA256".into(),
            mem_serve: "5.2".into(),
            mem_base: Some("6.1".into()),
            serve_counted: (24800, 0),
            expected: 24800,
            nginx_reused: (0, 8300),
        };
        let text = render(&run, &m).unwrap();
        let (first, rest) = text.split_once('\n').unwrap();
        assert!(first.starts_with("# floor benchmark (20"), "{first}");
        assert!(
            first.ends_with(
                "cores, servers on CPU 1, clients on CPU 0, 4 rounds alternating, N=2000)"
            ),
            "{first}"
        );
        let expected = read("report-4-rounds.md");
        for (i, (got, want)) in rest.lines().zip(expected.lines()).enumerate() {
            assert_eq!(got, want, "line {}", i + 2);
        }
        assert_eq!(rest.lines().count(), expected.lines().count());
    }

    #[test]
    fn verdicts() {
        assert_eq!(verdict("1.362", true, 1.4), "**yes**");
        assert_eq!(verdict("1.462", true, 1.4), "no");
        assert_eq!(verdict("0.97", false, 0.95), "**yes**");
        assert_eq!(verdict("nan", true, 1.4), "no figure");
        assert_eq!(verdict("-", true, 1.4), "no figure");
        assert_eq!(verdict("", true, 1.4), "no figure");
    }

    #[test]
    fn a_session_cache_floor_leaves_the_ticket_crypto_out() {
        assert_eq!(
            floor_terms("1.3", "ids", false),
            ["crypto", "crypto1.3r", "tk1.3f", "tk1.3r"]
        );
        assert_eq!(
            floor_terms("1.2", "tickets", true),
            ["hs1.2f", "hs1.2r", "none", "none"]
        );
        assert_eq!(
            floor_terms("1.3", "tickets", true),
            ["hs", "hs1.3r", "none", "none"]
        );
    }

    #[test]
    fn floors_of_a_resumption_run() {
        let r = rows(
            "1 rf1.3-ids-full 40.0 0 0
             1 rf1.3-ids-res 30.0 0 0
             1 crypto 100.0 0 0
             1 crypto1.3r 20.0 0 0
             1 tk1.3f 2.0 0 0
             1 tk1.3r 4.0 0 0
             1 res1.3-ids 92.0 792 0
             2 rf1.3-ids-full 0 0 0
             2 rf1.3-ids-res 30.0 0 0
             2 crypto 100.0 0 0
             2 crypto1.3r 20.0 0 0",
        );
        let rep = Report {
            rows: &r,
            out: String::new(),
        };
        // (30 + 20 − 4) ÷ (40 + 100 − 2); round 2 has no full floor
        assert_eq!(rep.floor_res("1.3", "ids", "", false), "0.333");
        // tickets: nothing left out, and there are no tickets rows
        assert_eq!(rep.floor_res("1.3", "tickets", "", false), "-");
        // 92 ÷ (30 + 20 − 4)
        assert_eq!(rep.res_over_floor("1.3", "ids", false), "2.000");
    }

    #[test]
    fn rounds_without_a_floor_are_named() {
        let r = rows(
            "1 pplain 50.0 0 0
             1 f-plain 60.0 0 0
             1 f-tls1.3-full 5.0 0 0
             1 rf1.2-ids-res -3.5 0 0
             2 pplain 50.0 0 0
             2 f-plain 60.0 0 0
             2 f-tls1.3-full 80.0 0 0",
        );
        assert_eq!(
            no_floor(&r),
            "rf1.2-ids-res in round 1 (-3.5 µs); the full TLS 1.3 floor at serve's pace in round 1 (-5.0 µs)"
        );
    }

    #[test]
    fn the_floor_at_serves_pace() {
        let r = rows(
            "1 serve 280.0 900 0
             1 plain 60.0 300 0
             1 crypto 100.0 0 0
             1 hs 150.0 0 0
             1 pplain 70.0 0 0
             1 f-plain 60.0 0 0
             1 f-tls1.3-full 90.0 0 0",
        );
        let mut rep = Report {
            rows: &r,
            out: String::new(),
        };
        let mut figs = Figures::default();
        pace_floors(&mut rep, &mut figs);
        // floor = 70 + 90 − 60 + 100 = 200; serve ÷ it = 1.4; issue's floor 160
        assert!(
            rep.out
                .contains(": 200.0 µs; serve ÷ it (per round, median): **1.400**"),
            "{}",
            rep.out
        );
        assert!(
            rep.out
                .contains("the pace (nginx plain at serve's pace − under h2load) +10.0 µs")
        );
        assert!(rep.out.contains(
            "**the floor at serve's pace ÷ the issue's floor: 1.250** (per round: 1.250)"
        ));
        assert_eq!(figs.of("serve/pace"), "1.400");
        assert_eq!(figs.of("serve/literal"), "1.750");
        // rustls: 70 + 30 + 150 = 250, ÷ 200
        assert_eq!(figs.of("rustls/pace"), "1.250");
    }
}
