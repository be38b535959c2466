//! Recommendations from a finished lab: significant wins without losses, and the
//! configurations worth pairing. At a link, what the user feels comes first: the time to
//! the first byte, in milliseconds at that round trip, ranks the changes that save it
//! (then the relative gains, server CPU among them, rank the rest).
//!
//! One error rate for the whole run: a win counts only when its p-value, adjusted by
//! Holm's step-down method over every comparison the recommendations are drawn from (each
//! metric of each pair of the run), is below α; so the chance that a run recommends
//! anything when no configuration changes anything stays at most α (5%), however many
//! groups and metrics it compares. A loss blocks a recommendation at the unadjusted level
//! (the cautious side).
//!
//! A change that weakens security (an older TLS version, a weaker key, post-quantum
//! protection or client authentication given up) is never a recommendation: it is listed
//! as a trade-off, with what it costs in round trips.

use std::collections::BTreeMap;

use super::LabLink;
use super::matrix;
use super::matrix::Group;
use super::result::{CellResult, GroupResult, Recommendation, Versus};
use super::summarize::versus;
use crate::stats::compare::Direction;
use crate::stats::holm;

/// The metric the user feels at a link.
const FIRST_BYTE: &str = "first_byte_mean_ms";

/// One pair compared: its group, from, to, and the comparisons by metric.
type Pair<'a> = (
    &'a GroupResult,
    Group,
    &'a CellResult,
    &'a CellResult,
    BTreeMap<String, Versus>,
);

/// A round trip's cost where no link gives one: a typical client's round trip to a
/// server of its region.
pub const TYPICAL_RTT_MS: f64 = 50.0;

/// Why changing `from` to `to` in `group` weakens security, and the round trips it adds
/// to a full handshake; `None` when it does not.
fn weakens(group: Group, from: &str, to: &str) -> Option<(&'static str, u32)> {
    match (group, from, to) {
        (Group::Tls, _, "1.2") => Some((
            "TLS 1.2 is the older protocol (no encrypted certificate, weaker downgrade \
             protection, legacy cipher suites)",
            1,
        )),
        (Group::Transport, _, "tcp-1.2-full" | "tcp-1.2-resumed") => Some((
            "TLS 1.2 is the older protocol (no encrypted certificate, weaker downgrade \
             protection, legacy cipher suites)",
            u32::from(to == "tcp-1.2-full"),
        )),
        (Group::Certificate, f, "rsa-2048") if f != "rsa-2048" => Some((
            "an RSA-2048 key gives about 112 bits of security, P-256, Ed25519 and RSA-4096 \
             more",
            0,
        )),
        (Group::Kx, "x25519mlkem768", t) if t != "x25519mlkem768" => Some((
            "it gives up the post-quantum protection of recorded traffic",
            0,
        )),
        (Group::Mtls, "on", "off") => Some(("it gives up client authentication", 0)),
        (Group::Ocsp, "on", "off") => Some(("it gives up the stapled revocation status", 0)),
        _ => None,
    }
}

/// A metric the recommendations compare: its name in the results, which way is better,
/// and its name in words.
type Metric = (&'static str, Direction, &'static str);

/// A metric that won: (metric, its name in words, the gain (positive: better), Welch's p,
/// Holm's adjusted p).
type Win = (&'static str, &'static str, f64, f64, f64);

/// The recommendations and the trade-offs (changes that win but weaken security, or win
/// the first byte at a link and lose elsewhere).
pub(super) fn recommend(
    groups: &[GroupResult],
    link: Option<&LabLink>,
) -> (Vec<Recommendation>, Vec<Recommendation>) {
    let metrics = metrics(link);
    // Every pair of the run with its comparisons, before deciding: Holm needs them all.
    let all = pairs(groups, &metrics);
    let family: Vec<f64> = all
        .iter()
        .flat_map(|(.., vs)| metrics.iter().filter_map(|(m, ..)| vs.get(*m)).map(|v| v.p))
        .collect();
    let adjusted = holm(&family);
    let tests = family.len();
    let mut next_adjusted = adjusted.into_iter();
    let mut out = Vec::new();
    let mut trade_offs = Vec::new();
    for (g, group, from, to, vs) in all {
        // Recommend only when something got better and nothing got worse; a change that
        // takes time off the first byte at a link but costs elsewhere (QUIC's server CPU)
        // is a trade-off that says what it costs.
        let Some((wins, losses)) = wins(&vs, &metrics, &mut next_adjusted) else {
            continue;
        };
        let costs = (!losses.is_empty()).then(|| format!("it costs {}", losses.join(", ")));
        let weak =
            weakens(group, &from.name, &to.name).or_else(|| costs.as_deref().map(|c| (c, 0)));
        let r = recommendation(g, group, (from, to), &wins, weak, tests, link);
        if weak.is_some() {
            trade_offs.push(r);
        } else {
            out.push(r);
        }
    }
    // Milliseconds to the first byte first (at a link), then the relative gains.
    for list in [&mut out, &mut trade_offs] {
        list.sort_by(|a, b| {
            let ms = |r: &Recommendation| r.first_byte_saved_ms.unwrap_or(0.0);
            ms(b)
                .total_cmp(&ms(a))
                .then_with(|| b.gain.total_cmp(&a.gain))
        });
    }
    (out, trade_offs)
}

/// The metrics compared: server CPU, handshakes/s, mean latency, and at a link the time
/// to the first byte.
fn metrics(link: Option<&LabLink>) -> Vec<Metric> {
    let mut metrics = vec![
        (
            "server_cpu_us_per_handshake",
            Direction::LowerIsBetter,
            "server CPU per handshake",
        ),
        (
            "handshakes_per_s",
            Direction::HigherIsBetter,
            "handshakes/s",
        ),
        (
            "request_mean_ms",
            Direction::LowerIsBetter,
            "mean request latency",
        ),
    ];
    if link.is_some() {
        metrics.push((FIRST_BYTE, Direction::LowerIsBetter, "time to first byte"));
    }
    metrics
}

/// Every pair of the run worth recommending: each group's cells against its baseline
/// (neither the A/A control nor a failed cell), then the group's extra pairs.
fn pairs<'a>(groups: &'a [GroupResult], metrics: &[Metric]) -> Vec<Pair<'a>> {
    let mut all: Vec<Pair<'_>> = Vec::new();
    for g in groups {
        let Some(group) = Group::ALL
            .into_iter()
            .chain(Group::LINK_ONLY)
            .find(|x| x.name() == g.group)
        else {
            continue;
        };
        let Some(base) = g.cells.first().filter(|b| !b.failed) else {
            continue;
        };
        // Neither the A/A control nor a failed cell is a change to make.
        let mut pairs: Vec<(&CellResult, &CellResult, BTreeMap<String, Versus>)> = g
            .cells
            .iter()
            .skip(1)
            .filter(|c| !c.control && !c.failed)
            .map(|c| (base, c, c.vs_baseline.clone()))
            .collect();
        for (from, to) in matrix::extra_pairs(group) {
            let find = |n: &str| g.cells.iter().find(|c| c.name == n);
            let (Some(a), Some(b)) = (find(from), find(to)) else {
                continue;
            };
            if a.failed || b.failed {
                continue;
            }
            let vs = metrics
                .iter()
                .filter_map(|(m, d, _)| Some((m.to_string(), versus(&a.rounds, &b.rounds, m, *d)?)))
                .collect();
            pairs.push((a, b, vs));
        }
        for (from, to, vs) in pairs {
            all.push((g, group, from, to, vs));
        }
    }
    all
}

/// The metrics of one pair that won: each one's gain when significant after Holm's
/// adjustment (`adjusted` holds the adjusted p of every comparison of the run, in order:
/// this pair's are taken from it), and those that lost (significant unadjusted), in
/// words. `None` when none won, or when one lost and the first byte did not win.
fn wins(
    vs: &BTreeMap<String, Versus>,
    metrics: &[Metric],
    adjusted: &mut impl Iterator<Item = f64>,
) -> Option<(Vec<Win>, Vec<String>)> {
    let mut wins: Vec<Win> = Vec::new();
    let mut losses: Vec<String> = Vec::new();
    for (m, d, what) in metrics {
        let Some(v) = vs.get(*m) else { continue };
        let adj = adjusted.next().unwrap_or(1.0);
        let sign = if *d == Direction::HigherIsBetter {
            1.0
        } else {
            -1.0
        };
        let Some(gain) = v.relative_change.map(|c| c * sign) else {
            continue;
        };
        if gain <= 0.0 && v.significant {
            let change = v.relative_change.unwrap_or(0.0);
            let dir = if change > 0.0 { "up" } else { "down" };
            losses.push(format!("{what} {dir} {:.1}%", change.abs() * 100.0));
        } else if gain > 0.0 && adj < super::result::ALPHA {
            wins.push((*m, *what, gain, v.p, adj));
        }
    }
    let first_byte = wins.iter().any(|w| w.0 == FIRST_BYTE);
    (!wins.is_empty() && (losses.is_empty() || first_byte)).then_some((wins, losses))
}

/// The recommendation (or trade-off, when `weak`) of changing `from` to `to`, led by its
/// best win: at a link the first byte, else the largest relative gain.
fn recommendation(
    g: &GroupResult,
    group: Group,
    (from, to): (&CellResult, &CellResult),
    wins: &[Win],
    weak: Option<(&str, u32)>,
    tests: usize,
    link: Option<&LabLink>,
) -> Recommendation {
    // The first byte in milliseconds saved at the link's round trip.
    let saved_ms = wins.iter().find(|w| w.0 == FIRST_BYTE).and_then(|w| {
        let base = from.summary.get(FIRST_BYTE)?.mean;
        Some(w.2 * base)
    });
    let p_text = |w: &Win| {
        format!(
            "Welch p = {}, Holm-adjusted over {tests} = {}",
            crate::stats::compare::format_p(w.3),
            crate::stats::compare::format_p(w.4)
        )
    };
    let say = |w: &Win| {
        if let (FIRST_BYTE, Some(ms), Some(l)) = (w.0, saved_ms, link) {
            return format!(
                "\u{2212}{ms:.1} ms to the first byte at {} ({:.1}% sooner, {})",
                l.spec,
                w.2 * 100.0,
                p_text(w)
            );
        }
        let dir = if w.0 == "handshakes_per_s" {
            "up"
        } else {
            "down"
        };
        format!("{} {dir} {:.1}% ({})", w.1, w.2 * 100.0, p_text(w))
    };
    // At a link the first byte leads when it won; else the largest relative gain.
    let best = wins
        .iter()
        .copied()
        .find(|w| w.0 == FIRST_BYTE)
        .or_else(|| wins.iter().copied().max_by(|a, b| a.2.total_cmp(&b.2)))
        .unwrap_or(wins[0]);
    let others: Vec<String> = wins.iter().filter(|w| w.0 != best.0).map(say).collect();
    let also = (!others.is_empty()).then(|| others.join(", "));
    let caveat = match weak {
        // A trade-off's caveat is what it gives up, and its round trips.
        Some((why, rtts)) => Some(trade_off_cost(why, rtts, link)),
        None => matrix::caveat(group, link.is_some()).map(str::to_string),
    };
    let mut text = format!(
        "{}: {} instead of {} — {}",
        g.title,
        to.label,
        from.label,
        say(&best)
    );
    if let Some(a) = &also {
        text += &format!(", {a}");
    }
    if let Some(c) = &caveat {
        text += &format!(" ({c})");
    }
    Recommendation {
        group: g.group.clone(),
        from: from.name.clone(),
        to: to.name.clone(),
        metric: best.0.to_string(),
        gain: best.2,
        p: Some(best.3),
        p_adjusted: Some(best.4),
        also,
        caveat,
        text,
        first_byte_saved_ms: saved_ms,
    }
}

/// What a trade-off gives up, and its round trips at the link's RTT (or a typical one).
fn trade_off_cost(why: &str, rtts: u32, link: Option<&LabLink>) -> String {
    if rtts == 0 {
        return format!("a trade-off, not a recommendation: {why}");
    }
    let trips = if rtts == 1 {
        "one more round trip".to_string()
    } else {
        format!("{rtts} more round trips")
    };
    match link {
        Some(l) => format!(
            "a trade-off, not a recommendation: {why}; and {trips} per full handshake, \
             +{:.0} ms at {}",
            f64::from(rtts) * l.rtt.as_secs_f64() * 1e3,
            l.spec
        ),
        None => format!(
            "a trade-off, not a recommendation: {why}; and {trips} per full handshake, which \
             loopback hides: +{:.0} ms at a typical {TYPICAL_RTT_MS:.0} ms round trip",
            f64::from(rtts) * TYPICAL_RTT_MS
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::result::{self, RoundMetrics};
    use crate::lab::summarize::{aa_tally, direction};

    fn rounds(hs: &[f64], ms: &[f64]) -> Vec<RoundMetrics> {
        hs.iter()
            .zip(ms)
            .map(|(&h, &m)| RoundMetrics {
                completed: 100,
                handshakes_per_s: h,
                requests_per_s: h,
                request_mean_ms: m,
                ..RoundMetrics::default()
            })
            .collect()
    }

    fn cell(name: &str, r: Vec<RoundMetrics>, base: Option<&[RoundMetrics]>) -> CellResult {
        let mut vs_baseline = BTreeMap::new();
        if let Some(b) = base {
            for (m, d) in [
                ("handshakes_per_s", Direction::HigherIsBetter),
                ("request_mean_ms", Direction::LowerIsBetter),
            ] {
                vs_baseline.insert(m.to_string(), versus(b, &r, m, d).unwrap());
            }
        }
        CellResult {
            name: name.into(),
            label: format!("label {name}"),
            settings: serde_json::Value::Null,
            control: false,
            failed: false,
            failure_rate: 0.0,
            rounds: r,
            summary: BTreeMap::new(),
            vs_baseline,
            request_cdf: Vec::new(),
            handshake_full_hist: Vec::new(),
            handshake_resumed_hist: Vec::new(),
            errors: BTreeMap::new(),
            crypto_limit_pct: None,
            capacity: None,
        }
    }

    #[test]
    fn recommends_significant_wins_without_losses_and_the_shared_keys_pair() {
        let base = rounds(&[1000.0, 1010.0, 990.0], &[2.0, 2.02, 1.98]);
        let better = rounds(&[1500.0, 1510.0, 1490.0], &[1.5, 1.52, 1.48]);
        let same = rounds(&[1001.0, 1012.0, 989.0], &[2.01, 2.0, 1.99]);
        // Faster handshakes but slower requests: a trade-off, not a recommendation.
        let mixed = rounds(&[1500.0, 1510.0, 1490.0], &[3.0, 3.02, 2.98]);
        let own = rounds(&[1200.0, 1210.0, 1190.0], &[1.8, 1.82, 1.78]);
        let g = GroupResult {
            group: "resumption".into(),
            title: "Session resumption".into(),
            baseline: "off".into(),
            warnings: Vec::new(),
            cells: vec![
                cell("off", base.clone(), None),
                cell("stateful", better.clone(), Some(&base)),
                cell("tickets", same, Some(&base)),
                cell("tickets-2-own-keys", own, Some(&base)),
                cell("tickets-2-shared-keys", mixed, Some(&base)),
            ],
        };
        let (recs, _) = recommend(&[g], None);
        let pairs: Vec<(&str, &str)> = recs
            .iter()
            .map(|r| (r.from.as_str(), r.to.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [("off", "stateful"), ("off", "tickets-2-own-keys")],
            "{recs:#?}"
        );
        let r = &recs[0];
        assert_eq!(r.metric, "handshakes_per_s");
        assert!((r.gain - 0.5).abs() < 1e-9, "{r:?}");
        assert!(
            r.also
                .as_deref()
                .unwrap()
                .starts_with("mean request latency down 25.0%"),
            "{r:?}"
        );
        assert!(
            r.text.contains("label stateful instead of label off"),
            "{}",
            r.text
        );
        assert!(r.caveat.is_none());

        // The own-keys → shared-keys pair, computed from the rounds.
        let g = GroupResult {
            group: "resumption".into(),
            title: "Session resumption".into(),
            baseline: "off".into(),
            warnings: Vec::new(),
            cells: vec![
                cell("off", base.clone(), None),
                cell(
                    "tickets-2-own-keys",
                    rounds(&[1200.0, 1210.0, 1190.0], &[1.8, 1.82, 1.78]),
                    Some(&base),
                ),
                cell("tickets-2-shared-keys", better, Some(&base)),
            ],
        };
        let (recs, _) = recommend(&[g], None);
        assert!(
            recs.iter()
                .any(|r| r.from == "tickets-2-own-keys" && r.to == "tickets-2-shared-keys"),
            "{recs:#?}"
        );
    }

    fn with_cpu(mut r: Vec<RoundMetrics>, cpu: &[f64]) -> Vec<RoundMetrics> {
        for (m, c) in r.iter_mut().zip(cpu) {
            m.server_cpu_us_per_handshake = Some(*c);
        }
        r
    }

    fn compared(name: &str, r: Vec<RoundMetrics>, base: &[RoundMetrics]) -> CellResult {
        let mut c = cell(name, r, None);
        for (m, higher) in result::COMPARED {
            if let Some(v) = versus(base, &c.rounds, m, direction(higher)) {
                c.vs_baseline.insert(m.to_string(), v);
            }
        }
        c
    }

    #[test]
    fn server_cpu_is_compared_and_recommends_alone_but_controls_and_failed_cells_never() {
        let flat = [1000.0, 1010.0, 990.0, 1005.0];
        let ms = [2.0, 2.02, 1.98, 2.01];
        let base = with_cpu(rounds(&flat, &ms), &[300.0, 310.0, 295.0, 305.0]);
        // Throughput and latency the same (the client is the bottleneck), server CPU half.
        let cheaper = with_cpu(rounds(&flat, &ms), &[150.0, 155.0, 148.0, 152.0]);
        let costlier = with_cpu(rounds(&flat, &ms), &[600.0, 620.0, 590.0, 610.0]);
        let mut control = compared(matrix::CONTROL, cheaper.clone(), &base);
        control.control = true;
        let mut failed = compared("failed", cheaper.clone(), &base);
        failed.failed = true;
        let g = GroupResult {
            group: "certificate".into(),
            title: "Certificate type".into(),
            baseline: "ecdsa-p256".into(),
            warnings: Vec::new(),
            cells: vec![
                cell("ecdsa-p256", base.clone(), None),
                compared("cheaper", cheaper, &base),
                compared("costlier", costlier, &base),
                control,
                failed,
            ],
        };
        let v = &g.cells[2].vs_baseline["server_cpu_us_per_handshake"];
        assert!(v.significant && v.relative_change.unwrap() > 0.9, "{v:?}");
        assert!(
            v.verdict.starts_with("significantly worse"),
            "{}",
            v.verdict
        );
        let same = &g.cells[2].vs_baseline["handshakes_per_s"];
        assert!(!same.significant);
        let mde = same.mde.unwrap();
        assert!(mde > 0.0 && mde < 0.05, "{mde}");
        assert!(
            same.verdict.contains("no difference larger than"),
            "{}",
            same.verdict
        );
        let (recs, _) = recommend(std::slice::from_ref(&g), None);
        let to: Vec<&str> = recs.iter().map(|r| r.to.as_str()).collect();
        assert_eq!(to, ["cheaper"], "{recs:#?}");
        assert_eq!(recs[0].metric, "server_cpu_us_per_handshake");
        assert!(
            recs[0].text.contains("server CPU per handshake down 50.0%"),
            "{}",
            recs[0].text
        );
        // The tally counts the control's comparisons only: here one of three significant.
        let t = aa_tally(&[g]);
        assert_eq!((t.compared, t.significant), (3, 1), "{t:?}");
        assert_eq!(t.metrics["server_cpu_us_per_handshake"].significant, 1);
        assert_eq!(t.metrics["handshakes_per_s"].significant, 0);
    }

    #[test]
    fn a_tls_downgrade_is_a_trade_off_with_its_round_trip_never_a_recommendation() {
        let base = rounds(&[1000.0, 1010.0, 990.0], &[2.0, 2.02, 1.98]);
        let better = rounds(&[1500.0, 1510.0, 1490.0], &[1.5, 1.52, 1.48]);
        let g = GroupResult {
            group: "tls".into(),
            title: "TLS version".into(),
            baseline: "1.3".into(),
            warnings: Vec::new(),
            cells: vec![
                cell("1.3", base.clone(), None),
                cell("1.2", better, Some(&base)),
            ],
        };
        let (recs, trade_offs) = recommend(std::slice::from_ref(&g), None);
        assert!(recs.is_empty(), "{recs:#?}");
        assert_eq!(trade_offs.len(), 1);
        let c = trade_offs[0].caveat.as_deref().unwrap();
        assert!(c.starts_with("a trade-off, not a recommendation"), "{c}");
        assert!(
            c.contains("one more round trip per full handshake") && c.contains("+50 ms"),
            "{c}"
        );
        // At a link, the round trip at its RTT.
        let link = LabLink {
            spec: "rtt=80ms".into(),
            rtt: std::time::Duration::from_millis(80),
            server_netns: std::sync::Arc::new(std::fs::File::open("/dev/null").unwrap().into()),
        };
        let (recs, trade_offs) = recommend(&[g], Some(&link));
        assert!(recs.is_empty());
        assert!(
            trade_offs[0].text.contains("+80 ms at rtt=80ms"),
            "{}",
            trade_offs[0].text
        );
        // Weaker keys and lost protections likewise; a stronger or equal change is not.
        assert!(weakens(Group::Certificate, "ecdsa-p256", "rsa-2048").is_some());
        assert!(weakens(Group::Certificate, "ecdsa-p256", "ed25519").is_none());
        assert!(weakens(Group::Kx, "x25519mlkem768", "x25519").is_some());
        assert!(weakens(Group::Kx, "x25519", "x25519mlkem768").is_none());
        assert!(weakens(Group::Mtls, "on", "off").is_some());
        assert!(weakens(Group::Resumption, "off", "stateful").is_none());
    }

    /// At a link, a change that takes time off the first byte but costs server CPU (QUIC)
    /// is a trade-off saying what it costs; one that costs CPU and wins only elsewhere is
    /// neither.
    #[test]
    fn a_first_byte_win_that_costs_server_cpu_is_a_trade_off_saying_so() {
        let at = |fb: &[f64], cpu: &[f64], hs: &[f64]| -> Vec<RoundMetrics> {
            fb.iter()
                .zip(cpu)
                .zip(hs)
                .map(|((&f, &c), &h)| RoundMetrics {
                    completed: 100,
                    handshakes_per_s: h,
                    requests_per_s: h,
                    request_mean_ms: f,
                    first_byte_mean_ms: Some(f),
                    server_cpu_us_per_handshake: Some(c),
                    ..RoundMetrics::default()
                })
                .collect()
        };
        let with_vs = |name: &str, r: Vec<RoundMetrics>, base: &[RoundMetrics]| {
            let mut c = cell(name, r.clone(), None);
            for (m, d) in [
                ("server_cpu_us_per_handshake", Direction::LowerIsBetter),
                ("first_byte_mean_ms", Direction::LowerIsBetter),
            ] {
                c.vs_baseline
                    .insert(m.to_string(), versus(base, &r, m, d).unwrap());
            }
            c.summary.insert(
                FIRST_BYTE.into(),
                crate::lab::result::MeanSd {
                    mean: r.iter().filter_map(|x| x.first_byte_mean_ms).sum::<f64>()
                        / r.len() as f64,
                    sd: 0.0,
                },
            );
            c
        };
        let base = at(
            &[123.0, 124.0, 122.0],
            &[700.0, 710.0, 690.0],
            &[32.0, 32.0, 32.0],
        );
        let quic = at(
            &[85.0, 86.0, 84.0],
            &[2200.0, 2250.0, 2150.0],
            &[32.0, 32.0, 32.0],
        );
        let slower = at(
            &[123.0, 124.0, 122.0],
            &[2200.0, 2250.0, 2150.0],
            &[32.0, 32.0, 32.0],
        );
        let mut b = with_vs("tcp-1.3-full", base.clone(), &base);
        b.vs_baseline.clear();
        let g = GroupResult {
            group: "transport".into(),
            title: "Transport".into(),
            baseline: "tcp-1.3-full".into(),
            warnings: Vec::new(),
            cells: vec![
                b,
                with_vs("quic-full", quic, &base),
                with_vs("costly", slower, &base),
            ],
        };
        let link = LabLink {
            spec: "rtt=40ms".into(),
            rtt: std::time::Duration::from_millis(40),
            server_netns: std::sync::Arc::new(std::fs::File::open("/dev/null").unwrap().into()),
        };
        let (recs, trade_offs) = recommend(&[g], Some(&link));
        assert!(recs.is_empty(), "{recs:#?}");
        assert_eq!(trade_offs.len(), 1, "{trade_offs:#?}");
        let t = &trade_offs[0];
        assert_eq!(t.to, "quic-full");
        assert!(t.first_byte_saved_ms.unwrap() > 30.0, "{t:#?}");
        let c = t.caveat.as_deref().unwrap();
        assert!(
            c.starts_with(
                "a trade-off, not a recommendation: it costs server CPU per handshake up 2"
            ),
            "{c}"
        );
    }

    /// A win at p ≈ 0.03 alone is recommended; the same win among 24 other comparisons
    /// that find nothing is not (Holm: 0.03 × 25 > 0.05).
    #[test]
    fn one_borderline_win_among_many_null_comparisons_is_not_recommended() {
        let ms = [2.0, 2.02, 1.98, 2.01, 1.99, 2.0];
        let base = rounds(&[1000.0, 1020.0, 980.0, 1010.0, 990.0, 1005.0], &ms);
        let borderline = rounds(&[1025.0, 1045.0, 1005.0, 1035.0, 1015.0, 1030.0], &ms);
        let v = versus(
            &base,
            &borderline,
            "handshakes_per_s",
            Direction::HigherIsBetter,
        )
        .unwrap();
        assert!(v.p > 0.002 && v.p < 0.025, "{v:?}");
        let group = |cells: Vec<CellResult>| GroupResult {
            group: "resumption".into(),
            title: "Session resumption".into(),
            baseline: "off".into(),
            warnings: Vec::new(),
            cells,
        };
        let alone = group(vec![
            cell("off", base.clone(), None),
            cell("stateful", borderline.clone(), Some(&base)),
        ]);
        let (recs, _) = recommend(std::slice::from_ref(&alone), None);
        assert_eq!(recs.len(), 1, "{recs:#?}");
        assert!(recs[0].p_adjusted.unwrap() >= recs[0].p.unwrap());
        assert!(
            recs[0].text.contains("Holm-adjusted over 2"),
            "{}",
            recs[0].text
        );
        let mut cells = vec![
            cell("off", base.clone(), None),
            cell("stateful", borderline, Some(&base)),
        ];
        for i in 0..11 {
            cells.push(cell(&format!("same-{i}"), base.clone(), Some(&base)));
        }
        let (recs, _) = recommend(&[group(cells)], None);
        assert!(recs.is_empty(), "{recs:#?}");
    }

    #[test]
    fn at_a_link_the_first_byte_leads_in_milliseconds() {
        let link = LabLink {
            spec: "rtt=60ms".into(),
            rtt: std::time::Duration::from_millis(60),
            server_netns: std::sync::Arc::new(std::fs::File::open("/dev/null").unwrap().into()),
        };
        let with_fb = |r: Vec<RoundMetrics>, fb: &[f64]| -> Vec<RoundMetrics> {
            r.into_iter()
                .zip(fb)
                .map(|(m, &f)| RoundMetrics {
                    first_byte_mean_ms: Some(f),
                    ..m
                })
                .collect()
        };
        let flat = [30.0, 30.5, 29.5, 30.2];
        let base = with_fb(
            rounds(&flat, &[185.0, 186.0, 184.0, 185.5]),
            &[183.0, 184.0, 182.0, 183.5],
        );
        // Handshakes/s up a lot, the first byte a little sooner: ranked after …
        let resumed = with_fb(
            rounds(&[60.0, 60.5, 59.5, 60.2], &[184.0, 185.0, 183.0, 184.5]),
            &[180.0, 181.0, 179.0, 180.5],
        );
        // … one round trip off the first byte.
        let zero_rtt = with_fb(
            rounds(&flat, &[125.0, 126.0, 124.0, 125.5]),
            &[123.0, 124.0, 122.0, 123.5],
        );
        let mut base_cell = cell("full", base.clone(), None);
        base_cell.summary.insert(
            FIRST_BYTE.to_string(),
            crate::lab::result::MeanSd {
                mean: 183.125,
                sd: 0.85,
            },
        );
        let g = GroupResult {
            group: "first-byte".into(),
            title: "Time to first byte: full, resumed, 0-RTT".into(),
            baseline: "full".into(),
            warnings: Vec::new(),
            cells: vec![
                base_cell,
                compared("resumed", resumed, &base),
                compared("0rtt", zero_rtt, &base),
            ],
        };
        let (recs, _) = recommend(&[g], Some(&link));
        let to: Vec<&str> = recs.iter().map(|r| r.to.as_str()).collect();
        assert_eq!(to, ["0rtt", "resumed"], "{recs:#?}");
        let r = &recs[0];
        assert_eq!(r.metric, FIRST_BYTE);
        let saved = r.first_byte_saved_ms.unwrap();
        assert!((saved - 60.0).abs() < 0.5, "{saved}");
        assert!(
            r.text
                .contains("\u{2212}60.0 ms to the first byte at rtt=60ms"),
            "{}",
            r.text
        );
        // The TLS caveat about loopback does not apply at a link.
        assert!(matrix::caveat(Group::Tls, true).is_none());
    }
}
