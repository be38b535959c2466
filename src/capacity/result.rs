//! The document of a capacity search (`tlsperf-capacity/1`): the objective, the rules a
//! step is judged by, every step measured (with its corrected-latency and pacing HDR
//! histograms, so that steps of several generator processes merge exactly), and the
//! conclusion drawn from the steps ([`conclude`]: the same function for one run and for
//! merged runs). Schema in docs/json.md. Its parts: the steps ([`super::step`]) and how
//! each is judged ([`super::judge`]), the conclusion ([`super::conclusion`]); the checks
//! of a document read back are in [`super::validate`], the merge of a shared search's
//! documents in [`super::merge`].

use serde::{Deserialize, Serialize};

use super::conclusion::{Conclusion, disputed_warning};
pub use super::conclusion::{Outcome, conclude, trials};
use super::slo::Slo;
pub use super::step::{Rules, Step, StepCpu, StepKind, Verdict};

/// Schema name and version written in every capacity result.
pub const SCHEMA: &str = "tlsperf-capacity/1";

/// Everything a capacity search found.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CapacityResult {
    /// [`SCHEMA`].
    pub schema: String,
    /// The URL.
    pub target: String,
    /// When the first step was due (RFC 3339).
    pub started: String,
    /// The objective.
    pub slo: Slo,
    /// The search's rules.
    pub rules: Rules,
    /// The options, as given.
    pub options: std::collections::BTreeMap<String, serde_json::Value>,
    /// With `--rate-share i/n`: this process's share (`i/n`); after a merge, the shares
    /// merged, comma-separated.
    pub rate_share: Option<String>,
    /// Processes merged into this document (1 for a single run).
    pub machines: u32,
    /// How the search ended.
    pub outcome: Outcome,
    /// The capacity (per second): the rate at which a step meets the objective with
    /// probability 0.9 ([`knee`]), whenever the steps bound it; outcome `capacity` when
    /// its interval is within the resolution. (Documents written before the probability
    /// estimate: the confirmed highest pass, only with outcome `capacity`.)
    ///
    /// [`knee`]: super::knee
    pub capacity_per_s: Option<f64>,
    /// The capacity's 90% credible interval (per second), whenever the steps bound it.
    /// (Documents written before the probability estimate: `[highest pass, lowest
    /// failure]`; `compare` and `merge` recompute it from the steps.)
    pub interval_per_s: Option<[f64; 2]>,
    /// The highest rate that met the objective.
    pub best_pass_per_s: Option<f64>,
    /// With outcome `generator-bound`: the rate at which the generator could not keep
    /// up.
    pub generator_bound_at_per_s: Option<f64>,
    /// `[lowest failure, highest pass]` when some step passed at a rate above one that
    /// failed ([`disputed`]); absent when the steps agree.
    ///
    /// [`disputed`]: super::conclusion::disputed
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disputed_per_s: Option<[f64; 2]>,
    /// How gradual the knee is, whenever the steps bound it: the factor of rate (≥ 1)
    /// over which a step's chance to meet the objective falls from 90% to 10%, at the
    /// posterior median of the curve's slope ([`knee::Knee::spread`]). Absent from
    /// documents written before it.
    ///
    /// [`knee::Knee::spread`]: super::knee::Knee::spread
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knee_spread: Option<f64>,
    /// The conclusion in plain words.
    pub message: String,
    /// Every step, in the order run. Read back, at most [`MAX_STEPS`].
    #[serde(deserialize_with = "bounded_steps")]
    pub steps: Vec<Step>,
    /// What makes figures of this result doubtful, in plain words.
    #[serde(default)]
    pub warnings: Vec<String>,
    /// `--link`: what the link did during the run (absent without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_counters: Option<crate::link::LinkCounters>,
}

/// The most steps a capacity result may hold: twice the most a search runs
/// (`capacity --max-steps` is at most 1,000, and a merge keeps only the steps its
/// results share). Each step holds three histograms, so a document cannot declare
/// tens of thousands.
pub const MAX_STEPS: usize = 2_000;

/// Reads `steps`, refusing more than [`MAX_STEPS`] before decoding the next one.
fn bounded_steps<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Step>, D::Error> {
    struct Bounded;
    impl<'de> serde::de::Visitor<'de> for Bounded {
        type Value = Vec<Step>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            write!(f, "a list of at most {MAX_STEPS} steps")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            loop {
                if out.len() == MAX_STEPS {
                    // One more is one too many; the end of the list is fine.
                    return match seq.next_element::<serde::de::IgnoredAny>()? {
                        None => Ok(out),
                        Some(_) => Err(serde::de::Error::custom(format!(
                            "more than {MAX_STEPS} steps (a search runs at most 1,000)"
                        ))),
                    };
                }
                match seq.next_element::<Step>()? {
                    Some(step) => out.push(step),
                    None => return Ok(out),
                }
            }
        }
    }
    d.deserialize_seq(Bounded)
}

impl CapacityResult {
    /// Sets the conclusion fields from `c`.
    pub fn set_conclusion(&mut self, c: Conclusion) {
        self.outcome = c.outcome;
        self.capacity_per_s = c.capacity_per_s;
        self.interval_per_s = c.interval_per_s;
        self.best_pass_per_s = c.best_pass_per_s;
        self.generator_bound_at_per_s = c.generator_bound_at_per_s;
        self.disputed_per_s = c.disputed_per_s;
        self.knee_spread = c.knee_spread;
        self.message = c.message;
        if let Some(band) = self.disputed_per_s {
            self.warnings.push(disputed_warning(band));
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::capacity::step::tests::{knee_steps, rules};

    /// A result of `steps` (objective p90=10ms, [`rules`]), concluded as a search that
    /// ended on its time limit would be.
    pub(crate) fn result_of(steps: Vec<Step>) -> CapacityResult {
        let rules = rules();
        let c = conclude(&steps, &rules, Outcome::TimeLimit);
        let mut r = CapacityResult {
            schema: SCHEMA.into(),
            target: "https://x/".into(),
            started: String::new(),
            slo: "p90=10ms".parse().unwrap(),
            rules,
            options: Default::default(),
            rate_share: None,
            machines: 1,
            outcome: Outcome::TimeLimit,
            capacity_per_s: None,
            interval_per_s: None,
            best_pass_per_s: None,
            generator_bound_at_per_s: None,
            disputed_per_s: None,
            knee_spread: None,
            message: String::new(),
            steps,
            warnings: vec![],
            link_counters: None,
        };
        r.set_conclusion(c);
        r
    }

    /// A merged pair of shares (1/2, 2/2) of one search: valid, concluded.
    pub(crate) fn halves() -> (CapacityResult, CapacityResult) {
        let mut a = result_of(knee_steps(100.0, 105.0));
        for s in &mut a.steps {
            s.share = 0.5;
        }
        let mut b = a.clone();
        a.rate_share = Some("1/2".into());
        b.rate_share = Some("2/2".into());
        (a, b)
    }

    /// A document cannot declare more than [`MAX_STEPS`] steps: refused while reading,
    /// before the next one is built.
    #[test]
    fn a_document_cannot_declare_thousands_of_steps() {
        let (a, _) = halves();
        let mut doc = serde_json::to_value(&a).unwrap();
        let one = doc["steps"][0].clone();
        doc["steps"] = serde_json::Value::Array(vec![one.clone(); MAX_STEPS]);
        let r: CapacityResult = serde_json::from_value(doc.clone()).unwrap();
        assert_eq!(r.steps.len(), MAX_STEPS);
        doc["steps"] = serde_json::Value::Array(vec![one; MAX_STEPS + 1]);
        let e = serde_json::from_value::<CapacityResult>(doc).err().unwrap();
        assert!(e.to_string().contains("more than 2000 steps"), "{e}");
    }
}
