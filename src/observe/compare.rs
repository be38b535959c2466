//! What two observations compare on (`tlsperf compare A.json B.json`, through
//! [`crate::stats::rows::compare_rows`]): for each handshake kind (`all`, `full`,
//! `full-hrr`, `resumed`, `0rtt`) and each phase of [`PHASES`], its p50 and its p99. An
//! observation holds one distribution per phase, not rounds, so each row is a percentile
//! compared by its ratio (A ÷ B, lower being better), without a significance test (a note says so). Only kinds
//! and phases with at least one handshake in an observation give rows; the ports
//! observed are the setting. The QUIC part, when there is one, gives the same rows in a
//! section of its own (`transport` quic). With `--probes`, a second section does the same for each
//! role and kind of the processes' view and each of its phases.

use super::result::{Dist, Observation, PHASES, QUIC_PHASES};
use crate::probes::report::PROBE_PHASES;
use crate::stats::Direction;
use crate::stats::rows::{Comparable, Identity, Row, RowSet, Section};

const SECTION: &str = "phases";
/// QUIC (the observation's `quic` part): per kind, each of its phases.
const QUIC: &str = "quic";
/// Inside the processes (`--probes`): per role and kind, each probe phase.
const PROBES: &str = "probes";

/// The kinds, in report order.
const KINDS: [&str; 5] = ["all", "full", "full-hrr", "resumed", "0rtt"];

/// The p50 and p99 rows of one distribution: `group` (the names and values that pick
/// it) and `phase`.
fn percentile_rows(
    rows: &mut Vec<Row>,
    section: &'static str,
    group: &[(&'static str, String)],
    phase: &str,
    d: &Dist,
) {
    for (stat, ns) in [("p50", d.quantiles.p50_ns), ("p99", d.quantiles.p99_ns)] {
        let mut identity = group.to_vec();
        identity.extend([
            ("phase", phase.to_string()),
            ("statistic", stat.to_string()),
        ]);
        rows.push(Row {
            section,
            identity: Identity(identity),
            unit: "ms".into(),
            direction: Direction::LowerIsBetter,
            rounds: None,
            median: Some(ns as f64 / 1e6),
            context: None,
        });
    }
}

impl Comparable for Observation {
    const KIND: &'static str = "observe";

    fn row_set(&self) -> RowSet {
        let mut rows = Vec::new();
        for kind in KINDS {
            let Some(ks) = self.handshakes.get(kind) else {
                continue;
            };
            for (phase, _) in PHASES {
                let Some(d) = ks.phases.get(phase).filter(|d| d.quantiles.count > 0) else {
                    continue;
                };
                percentile_rows(&mut rows, SECTION, &[("kind", kind.to_string())], phase, d);
            }
        }
        if let Some(q) = &self.quic {
            for kind in KINDS {
                let Some(ks) = q.handshakes.get(kind) else {
                    continue;
                };
                for (phase, _) in QUIC_PHASES {
                    let Some(d) = ks.phases.get(phase).filter(|d| d.quantiles.count > 0) else {
                        continue;
                    };
                    let group = [
                        ("transport", "quic".to_string()),
                        ("kind", kind.to_string()),
                    ];
                    percentile_rows(&mut rows, QUIC, &group, phase, d);
                }
            }
        }
        if let Some(p) = &self.probes {
            for (key, row) in &p.by_kind {
                // `ROLE KIND` ("server all"); the `(other)` row has no kind.
                let (role, kind) = key.split_once(' ').unwrap_or((key, ""));
                let group = [("role", role.to_string()), ("kind", kind.to_string())];
                for (phase, _) in PROBE_PHASES {
                    let Some(d) = row.phases.get(phase).filter(|d| d.quantiles.count > 0) else {
                        continue;
                    };
                    percentile_rows(&mut rows, PROBES, &group, phase, d);
                }
            }
        }
        let ports = if self.ports.is_empty() {
            "every port".to_string()
        } else {
            self.ports
                .iter()
                .map(u16::to_string)
                .collect::<Vec<_>>()
                .join(",")
        };
        RowSet {
            sections: vec![
                Section {
                    name: SECTION,
                    title: "Handshake phases by kind (percentiles of the capture)",
                },
                Section {
                    name: QUIC,
                    title: "QUIC handshake phases by kind (percentiles of the capture)",
                },
                Section {
                    name: PROBES,
                    title: "Inside the processes, by role and kind (percentiles of --probes)",
                },
            ],
            rows,
            settings: vec![("ports".to_string(), ports)],
            notes: vec![format!(
                "holds one distribution per phase ({}), not rounds: its percentiles are \
                 compared by ratio, without a significance test",
                counted(self)
            )],
        }
    }
}

/// What the distributions hold: captured handshakes, probed ones, or both.
fn counted(o: &Observation) -> String {
    let wire = o.count("all") + o.quic.as_ref().map_or(0, |q| q.count("all"));
    let probed: u64 = o.probes.as_ref().map_or(0, |p| {
        p.by_kind
            .iter()
            .filter(|(k, _)| k.ends_with(" all"))
            .map(|(_, r)| r.handshakes)
            .sum()
    });
    match (wire, probed) {
        (w, 0) => format!("{w} handshakes"),
        (0, p) => format!("{p} probed handshakes"),
        (w, p) => format!("{w} captured handshakes, {p} probed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::aggregate::Aggregate;
    use crate::observe::flow::Counters;
    use crate::observe::result::Packets;
    use crate::observe::timeline::{Handshake, HandshakeKind, Outcome, Phases};
    use crate::stats::rows::{Outcome as RowOutcome, RowOptions, compare_rows};

    /// An observation of `n` full handshakes whose client think is `think_ms`.
    fn observed(n: u64, think_ms: u64) -> Observation {
        let mut agg = Aggregate::new(Vec::new(), vec![443], usize::MAX);
        for i in 0..n {
            let ms = 1_000_000;
            agg.outcome(Outcome::Handshake(Box::new(Handshake {
                kind: HandshakeKind::Full,
                resumption: None,
                version: 0x0304,
                group: Some(0x1d),
                suite: 0x1301,
                sni: Some("localhost".into()),
                offer: Default::default(),
                client: "127.0.0.1:40000".parse().unwrap(),
                server: "127.0.0.1:443".parse().unwrap(),
                phases: Phases {
                    connect: Some(ms / 10),
                    server_think: Some(ms),
                    server_flight: Some(0),
                    client_think: Some(think_ms * ms + i * 1000),
                    tls: Some((think_ms + 1) * ms),
                    first_app_byte: None,
                    server_first_byte: Some(3 * ms),
                },
                server_flight_bytes: 1000,
                start_ns: None,
                hrr: false,
                retry: false,
                transport: crate::observe::timeline::Transport::Tcp,
                client_process: None,
                server_process: None,
            })));
        }
        agg.snapshot(Counters::default(), Packets::default(), 1.0)
    }

    #[test]
    fn rows_are_percentiles_per_kind_and_phase_compared_by_ratio() {
        let (a, b) = (observed(100, 2), observed(100, 40));
        let set = a.row_set();
        // all + full, six phases with values each (no first_app_byte), p50 and p99.
        assert_eq!(set.rows.len(), 2 * 6 * 2);
        let c = compare_rows(&set, &b.row_set(), &RowOptions::default()).unwrap();
        assert!(c.only_in_a.is_empty() && c.only_in_b.is_empty());
        let think = c
            .rows
            .iter()
            .find(|r| r.label == "full client_think p50")
            .unwrap();
        assert_eq!(think.outcome, RowOutcome::MediansOnly);
        let ratio = think.ratio.unwrap();
        // A ÷ B where lower is better: B is about 20 times worse.
        assert!((0.04..0.06).contains(&ratio), "{ratio}");
        let connect = c
            .rows
            .iter()
            .find(|r| r.label == "all connect p99")
            .unwrap();
        assert!((connect.ratio.unwrap() - 1.0).abs() < 1e-9);
        assert!(c.warnings.iter().any(|w| w.contains("not rounds")));
    }

    #[test]
    fn probe_phases_are_rows_of_their_own() {
        use crate::probes::report::{ProbeReport, ProbeRow};
        let mut a = observed(10, 2);
        let mut b = observed(10, 2);
        for (o, work_ms) in [(&mut a, 1), (&mut b, 21)] {
            let mut h = crate::stats::LatencyHistogram::new();
            h.record_ns(work_ms * 1_000_000).unwrap();
            let mut row = ProbeRow {
                handshakes: 1,
                ..ProbeRow::default()
            };
            row.phases
                .insert("work".into(), crate::stats::histogram::Dist::of(h));
            let mut p = ProbeReport::default();
            p.by_kind.insert("server all".into(), row);
            o.probes = Some(p);
        }
        let c = compare_rows(&a.row_set(), &b.row_set(), &RowOptions::default()).unwrap();
        let work = c
            .rows
            .iter()
            .find(|r| r.label == "server all work p50")
            .unwrap();
        assert!(work.ratio.unwrap() < 0.1, "{:?}", work.ratio);
        // The row's role and kind are fields of their own (the key was literally
        // "role, kind").
        let id = serde_json::to_value(&work.identity).unwrap();
        assert_eq!(
            id,
            serde_json::json!({"role": "server", "kind": "all", "phase": "work", "statistic": "p50"})
        );
    }

    #[test]
    fn a_probes_only_observation_counts_its_probed_handshakes() {
        use crate::probes::report::{ProbeReport, ProbeRow};
        let mut o = Observation::new(Vec::new(), Vec::new());
        let mut p = ProbeReport::default();
        for (key, n) in [("server all", 7), ("server full", 7), ("client all", 3)] {
            let row = ProbeRow {
                handshakes: n,
                ..ProbeRow::default()
            };
            p.by_kind.insert(key.into(), row);
        }
        o.probes = Some(p);
        let note = &o.row_set().notes[0];
        assert!(note.contains("(10 probed handshakes)"), "{note}");
        let both = observed(10, 2);
        assert!(both.row_set().notes[0].contains("(10 handshakes)"));
    }

    /// An observation as written before `server_first_byte` existed: read back from
    /// JSON without the phase anywhere.
    fn older(o: &Observation) -> Observation {
        let mut v = serde_json::to_value(o).unwrap();
        v["phases"]
            .as_object_mut()
            .unwrap()
            .remove("server_first_byte");
        for ks in v["handshakes"].as_object_mut().unwrap().values_mut() {
            ks["phases"]
                .as_object_mut()
                .unwrap()
                .remove("server_first_byte");
        }
        let old: Observation = serde_json::from_value(v).unwrap();
        assert!(!old.phases.contains_key("server_first_byte"));
        old
    }

    #[test]
    fn an_older_observation_without_the_server_first_byte_merges_and_compares() {
        let new = observed(10, 2);
        let old = older(&observed(30, 2));
        // Merged either way round: the phase is described, and its distribution is the
        // newer document's handshakes only.
        for pair in [[old.clone(), new.clone()], [new.clone(), old.clone()]] {
            let m = crate::observe::result::merge(&pair).unwrap();
            assert_eq!(m.count("all"), 40);
            assert!(m.phases.contains_key("server_first_byte"));
            let d = &m.handshakes["all"].phases["server_first_byte"];
            assert_eq!(d.hdr.len(), 10);
            assert_eq!(m.handshakes["all"].phases["tls"].hdr.len(), 40);
        }
        // Compared: its rows are in the newer document only, listed apart.
        let c = compare_rows(&new.row_set(), &old.row_set(), &RowOptions::default()).unwrap();
        assert_eq!(c.only_in_a.len(), 2 * 2, "{:?}", c.only_in_a);
        assert!(
            c.only_in_a
                .iter()
                .all(|r| r.label.contains("server_first_byte"))
        );
        assert!(c.only_in_b.is_empty());
        assert_eq!(c.rows.len(), 2 * 5 * 2);
    }

    #[test]
    fn kinds_in_one_observation_only_are_listed_apart() {
        let a = observed(10, 2);
        let mut b = observed(10, 2);
        b.handshakes.remove("full");
        let c = compare_rows(&a.row_set(), &b.row_set(), &RowOptions::default()).unwrap();
        assert_eq!(c.only_in_a.len(), 12);
        assert_eq!(c.rows.len(), 12);
    }
}
