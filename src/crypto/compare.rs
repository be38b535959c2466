//! What two `tlsperf crypto` results of the same command compare on (`tlsperf compare
//! A.json B.json`, through [`crate::stats::rows::compare_rows`]): each measured item on
//! its rounds (ns/op, lower is better). Rows are identified, never positioned:
//!
//! - sign: algorithm, implementation and operation;
//! - kx: group, provider and side;
//! - handshake: provider, version, certificate and kind, one row per side (client and
//!   server are compared apart); what each configuration negotiated is its context;
//! - limit: each operation by name and side, each in-handshake category by kind, side and
//!   category, and each limit by kind and side on the rounds of its measured handshake
//!   rate (`measured_rounds_ns`). A limit file written before that field existed has
//!   only medians: its limits get the ratio of the medians and no test.
//!
//! The settings are the seconds and rounds of every command, the message length of
//! `sign`, and the provider, chain, group and version of `limit`.

use super::Measurement;
use super::in_memory::HandshakeReport;
use super::kx::KxReport;
use super::limit::LimitReport;
use super::sign::SignReport;
use crate::stats::Direction;
use crate::stats::rows::{Comparable, Context, Identity, Row, RowSet, Section};

/// The name of `value` as the document writes it (an enum's JSON string), so that
/// identities read the same as the files.
fn name<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

/// The unit of every crypto row.
const UNIT: &str = "ns/op";

fn row(section: &'static str, identity: Vec<(&'static str, String)>, m: &Measurement) -> Row {
    Row {
        section,
        identity: Identity(identity),
        unit: UNIT.into(),
        direction: Direction::LowerIsBetter,
        rounds: Some(m.rounds_ns.clone()),
        median: Some(m.ns_per_op).filter(|x| x.is_finite()),
        context: None,
    }
}

/// A row set of one section, `rows`, with the seconds and rounds as settings.
fn rows(seconds: f64, rounds: u32, rows: Vec<Row>) -> RowSet {
    RowSet {
        sections: vec![Section {
            name: "rows",
            title: "",
        }],
        rows,
        settings: vec![
            ("seconds".into(), seconds.to_string()),
            ("rounds".into(), rounds.to_string()),
        ],
        notes: Vec::new(),
    }
}

impl Comparable for SignReport {
    const KIND: &'static str = "sign";

    fn row_set(&self) -> RowSet {
        let mut set = rows(
            self.seconds,
            self.rounds,
            self.rows
                .iter()
                .map(|r| {
                    let id = vec![
                        ("alg", name(&r.alg)),
                        ("implementation", name(&r.implementation)),
                        ("op", name(&r.op)),
                    ];
                    row("rows", id, &r.m)
                })
                .collect(),
        );
        set.settings
            .push(("message_len".into(), self.message_len.to_string()));
        set
    }
}

impl Comparable for KxReport {
    const KIND: &'static str = "kx";

    fn row_set(&self) -> RowSet {
        rows(
            self.seconds,
            self.rounds,
            self.rows
                .iter()
                .map(|r| {
                    let id = vec![
                        ("group", name(&r.group)),
                        ("provider", name(&r.provider)),
                        ("side", name(&r.side)),
                    ];
                    row("rows", id, &r.m)
                })
                .collect(),
        )
    }
}

impl Comparable for HandshakeReport {
    const KIND: &'static str = "handshake";

    fn row_set(&self) -> RowSet {
        let mut out = Vec::new();
        for r in &self.rows {
            let subject = format!(
                "{} {} {} {}",
                name(&r.provider),
                name(&r.tls),
                name(&r.cert),
                name(&r.kind)
            );
            let n = &r.negotiated;
            let negotiated = format!(
                "{} / {} / {}",
                n.version,
                n.cipher_suite,
                n.group.as_deref().unwrap_or("-")
            );
            for (side, m) in [("client", &r.client), ("server", &r.server)] {
                let id = vec![
                    ("provider", name(&r.provider)),
                    ("tls", name(&r.tls)),
                    ("cert", name(&r.cert)),
                    ("kind", name(&r.kind)),
                    ("side", side.to_string()),
                ];
                let mut one = row("rows", id, m);
                one.context = Some(Context {
                    subject: subject.clone(),
                    what: "negotiated",
                    value: negotiated.clone(),
                });
                out.push(one);
            }
        }
        rows(self.seconds, self.rounds, out)
    }
}

impl Comparable for LimitReport {
    const KIND: &'static str = "limit";

    fn row_set(&self) -> RowSet {
        let ops = self.operations.iter().map(|o| {
            let id = vec![("name", o.name.clone()), ("side", name(&o.side))];
            row("operations", id, &o.m)
        });
        let inside = self.in_handshake.iter().flat_map(|ih| {
            ih.categories.iter().map(|c| Row {
                section: "in_handshake",
                identity: Identity(vec![
                    ("kind", name(&ih.kind)),
                    ("side", name(&ih.side)),
                    ("category", name(&c.category)),
                ]),
                unit: UNIT.into(),
                direction: Direction::LowerIsBetter,
                rounds: Some(c.rounds_ns.clone()),
                median: Some(c.ns),
                context: None,
            })
        });
        let limits = self.limits.iter().map(|l| Row {
            section: "limits",
            identity: Identity(vec![("kind", name(&l.kind)), ("side", name(&l.side))]),
            unit: UNIT.into(),
            direction: Direction::LowerIsBetter,
            rounds: (!l.measured_rounds_ns.is_empty()).then(|| l.measured_rounds_ns.clone()),
            median: Some(l.measured_ns).filter(|x| x.is_finite()),
            context: None,
        });
        let mut set = rows(
            self.seconds,
            self.rounds,
            ops.chain(inside).chain(limits).collect(),
        );
        set.sections = vec![
            Section {
                name: "operations",
                title: "Public-key operations of a handshake, in a tight loop",
            },
            Section {
                name: "in_handshake",
                title: "Crypto inside handshakes, per category (ns per handshake)",
            },
            Section {
                name: "limits",
                title: "Measured in-memory handshakes per side",
            },
        ];
        set.settings.extend([
            ("provider".into(), name(&self.provider)),
            ("cert".into(), name(&self.cert)),
            ("group".into(), name(&self.group)),
            ("tls".into(), name(&self.tls)),
        ]);
        if self.limits.iter().any(|l| l.measured_rounds_ns.is_empty()) {
            set.notes.push(
                "has no rounds of its measured handshake rates (written before \
                 limits[].measured_rounds_ns): its limits are compared by their medians only"
                    .into(),
            );
        }
        set
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::rows::{Outcome, RowOptions, compare_rows};

    const SLOW: [f64; 5] = [1000.0, 1010.0, 990.0, 1005.0, 995.0];
    const FAST: [f64; 5] = [500.0, 505.0, 495.0, 502.0, 498.0];

    fn limit(cert: &str, rounds: Option<&[f64]>) -> LimitReport {
        let m = |r: &[f64]| {
            serde_json::json!({"ns_per_op": r[0], "ops_per_sec": 1e9 / r[0], "min_ns": r[0],
                "max_ns": r[0], "q1_ns": r[0], "q3_ns": r[0], "rounds_ns": r,
                "outlier_rounds": 0, "ops": 10, "bytes_per_op": null, "allocs_per_op": null})
        };
        let op = |name: String| {
            let mut o = m(&SLOW);
            o["name"] = name.into();
            o["side"] = "server".into();
            o["per_full"] = 1.into();
            o["per_resumed"] = 0.into();
            o
        };
        let mut lim = serde_json::json!({"kind": "full", "side": "server", "crypto_ns": 5e4,
            "limit_per_sec": 2e4, "measured_per_sec": 1e6, "measured_ns": SLOW[0],
            "percent_of_limit": 10.0});
        if let Some(r) = rounds {
            lim["measured_rounds_ns"] = serde_json::json!(r);
        }
        let doc = serde_json::json!({"schema": "tlsperf-crypto-limit/1", "provider": "aws-lc-rs",
            "cert": cert, "group": "x25519", "tls": "1.3", "seconds": 1, "rounds": 5,
            "operations": [op("kx x25519 server".into()), op(format!("sign {cert}"))],
            "limits": [lim]});
        crate::doc::parse(std::path::Path::new("l.json"), doc.to_string().as_bytes()).unwrap()
    }

    /// A version 1 limit file reads; operations match by name, limits by kind and side,
    /// on their rounds or, without them, by their medians.
    #[test]
    fn limit_operations_by_name_and_limits_by_rounds_or_medians() {
        let (a, b) = (
            limit("ecdsa-p256", Some(&SLOW)),
            limit("ed25519", Some(&FAST)),
        );
        let c = compare_rows(&a.row_set(), &b.row_set(), &RowOptions::default()).unwrap();
        let got: Vec<_> = c.rows.iter().map(|r| (r.section, r.outcome)).collect();
        assert_eq!(
            got,
            [
                ("operations", Outcome::NoDifference),
                ("limits", Outcome::Faster)
            ]
        );
        assert_eq!(c.only_in_a[0].label, "sign ecdsa-p256 server");
        assert_eq!(c.warnings, ["cert differs: A ecdsa-p256, B ed25519"]);
        let old = limit("ecdsa-p256", None);
        let c = compare_rows(&old.row_set(), &b.row_set(), &RowOptions::default()).unwrap();
        let lim = &c.rows[1];
        assert_eq!(lim.outcome, Outcome::MediansOnly);
        assert_eq!(lim.a.median, Some(SLOW[0]));
        assert!((lim.ratio.unwrap() - SLOW[0] / 500.0).abs() < 1e-9);
        assert!(c.warnings.iter().any(|w| w.starts_with("A has no rounds")));
    }
}
