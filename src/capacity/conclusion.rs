//! What a search's steps conclude ([`conclude`]: the same function for one run and for
//! merged runs): how the search ended ([`Outcome`]), the capacity and its credible
//! interval from the knee ([`super::knee`]), the band where the steps disagreed
//! ([`disputed`]), whether the generator rather than the server ended it (with
//! [`generator_ceiling`], [`retry`] and [`goes_on_past_invalid`], which also steer the
//! search), and the conclusion in words, naming the knee as gradual when that explains
//! a wide interval.

use serde::{Deserialize, Serialize};

use super::knee::{self, Trial};
use super::numbers::group;
use super::step::{Rules, Step, StepKind, Verdict};

/// How the search ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// A capacity estimated with an interval within the resolution ([`knee`]).
    Capacity,
    /// The generator could not keep up before the server broke the objective: no
    /// server capacity is reported.
    GeneratorBound,
    /// The server met the objective at the highest rate tried.
    AboveMaxRate,
    /// The server broke the objective at the lowest rate tried.
    BelowMinRate,
    /// `--max-time`, the step limit or the end of a `--plan` came before an answer
    /// within the resolution.
    TimeLimit,
    /// Stopped by the user (Ctrl-C, SIGTERM).
    Interrupted,
    /// Every request of a step failed in a way no rate explains (refused, not TLS, not
    /// trusted): the server is not answering, so there is no capacity to find.
    NoAnswer,
}

impl Outcome {
    /// The outcome's name in the document.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Capacity => "capacity",
            Outcome::GeneratorBound => "generator-bound",
            Outcome::AboveMaxRate => "above-max-rate",
            Outcome::BelowMinRate => "below-min-rate",
            Outcome::TimeLimit => "time-limit",
            Outcome::Interrupted => "interrupted",
            Outcome::NoAnswer => "no-answer",
        }
    }
}

/// What the steps say ([`conclude`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Conclusion {
    /// How the search ended.
    pub outcome: Outcome,
    /// The capacity: the rate at which a step meets the objective with probability 0.9,
    /// the posterior median ([`knee`]), whenever the steps bound it (a pass and a
    /// failure); the outcome is [`Outcome::Capacity`] when its interval is within the
    /// resolution.
    pub capacity_per_s: Option<f64>,
    /// Its 90% credible interval (per second), whenever the steps bound it (a pass and
    /// a failure), also when it is still wider than the resolution.
    pub interval_per_s: Option<[f64; 2]>,
    /// The highest rate that met the objective.
    pub best_pass_per_s: Option<f64>,
    /// With [`Outcome::GeneratorBound`]: the rate at which the generator could not keep
    /// up.
    pub generator_bound_at_per_s: Option<f64>,
    /// `[lowest failure, highest pass]` when the steps contradict each other ([`disputed`]).
    pub disputed_per_s: Option<[f64; 2]>,
    /// How gradual the knee is ([`knee::Knee::spread`]), whenever the steps bound it.
    pub knee_spread: Option<f64>,
    /// The conclusion in plain words.
    pub message: String,
}

/// Where the steps contradict each other: `[lowest failure, highest pass]` when some
/// step passed at a rate above one that failed (every valid step counts, the shorter
/// ones a confirmation overruled too). A server's latency rises with the rate, so such a
/// pair means that near its knee a run passes or fails by chance (a few stalls in a run
/// decide it), and another search may answer anywhere in that band.
pub fn disputed(steps: &[Step]) -> Option<[f64; 2]> {
    let lowest_fail = steps
        .iter()
        .filter(|s| s.verdict == Verdict::Fail)
        .map(|s| s.offered_per_s)
        .min_by(f64::total_cmp)?;
    let highest_pass = steps
        .iter()
        .filter(|s| s.verdict == Verdict::Pass)
        .map(|s| s.offered_per_s)
        .max_by(f64::total_cmp)?;
    (highest_pass > lowest_fail).then_some([lowest_fail, highest_pass])
}

/// The warning for a [`disputed`] band, in plain words.
pub fn disputed_warning(band: [f64; 2]) -> String {
    format!(
        "the steps disagreed between {}/s and {}/s: some passed at a rate above one that \
         failed, so near this server's knee a step passes or fails by chance (the \
         capacity's interval is estimated with that scatter)",
        group(band[0]),
        group(band[1])
    )
}

/// The highest rate that met the objective and the lowest that did not, over the valid
/// steps (invalid ones say nothing about the server). Near a knee that decides by chance
/// the first may lie above the second ([`disputed`]).
pub fn bracket(steps: &[Step]) -> (Option<f64>, Option<f64>) {
    let rates = |v: Verdict| {
        steps
            .iter()
            .filter(move |s| s.verdict == v)
            .map(|s| s.offered_per_s)
    };
    (
        rates(Verdict::Pass).max_by(f64::total_cmp),
        rates(Verdict::Fail).min_by(f64::total_cmp),
    )
}

/// The valid steps as the knee's observations ([`knee::estimate`]).
pub fn trials(steps: &[Step]) -> Vec<Trial> {
    steps
        .iter()
        .filter(|s| s.verdict != Verdict::Invalid)
        .map(|s| Trial {
            rate: s.offered_per_s,
            passed: s.verdict == Verdict::Pass,
        })
        .collect()
}

/// A step's offered rate as a set key: equal rates (`==`, 0 and −0 alike) give equal
/// keys.
fn rate_key(s: &Step) -> u64 {
    (s.offered_per_s + 0.0).to_bits()
}

/// The search's steps (not a plan's, not skipped) at `rate` the generator made invalid.
fn invalid_at(steps: &[Step], rate: f64) -> usize {
    steps
        .iter()
        .filter(|s| {
            s.verdict == Verdict::Invalid
                && !s.skipped()
                && s.kind != StepKind::Plan
                && s.offered_per_s == rate
        })
        .count()
}

/// True when the search's steps at `rate` were invalid twice or more: the search stops
/// there ([`retry`], [`goes_on_past_invalid`]).
fn invalid_twice(steps: &[Step], rate: f64) -> bool {
    invalid_at(steps, rate) >= 2
}

/// The first invalid step that no later valid step at the same rate replaced, leaving
/// out those at or above the lowest rate that failed validly (the server broke the
/// objective below them: they decide nothing) unless that rate was invalid twice in a
/// search: a step the generator spoiled only by
/// falling behind (not by spending its CPU) is run once more ([`retry`]), and a valid
/// re-run decides that rate instead.
fn undecided_invalid(steps: &[Step]) -> Option<&Step> {
    // From the last step back: the rates a valid step ran at so far are those of valid
    // steps after the one looked at. The earliest such step found last is the first.
    let mut valid_later = std::collections::HashSet::new();
    let mut first = None;
    let lowest_fail = bracket(steps).1;
    for s in steps.iter().rev() {
        if s.skipped() {
            // A step skipped to keep a shared schedule says nothing of the generator's
            // capacity (its warning says why).
            continue;
        }
        if s.verdict == Verdict::Invalid
            && lowest_fail.is_some_and(|h| s.offered_per_s >= h)
            && !(s.kind != StepKind::Plan && invalid_twice(steps, s.offered_per_s))
        {
            // The server already broke the objective, validly, at a rate no higher: a
            // step the generator could not judge up there decides nothing (unless the
            // search wanted that rate twice and the generator could not run it either
            // time: the search ended there, [`goes_on_past_invalid`]).
            continue;
        }
        if s.verdict == Verdict::Invalid {
            if !valid_later.contains(&rate_key(s)) {
                first = Some(s);
            }
        } else {
            valid_later.insert(rate_key(s));
        }
    }
    first
}

/// Of the lowest rate at which the generator saturated, the fraction the search still
/// runs steps at ([`generator_ceiling`]).
pub const GENERATOR_CEILING: f64 = 0.8;

/// The highest rate this generator can judge: [`GENERATOR_CEILING`] of the lowest rate of
/// a step made invalid by the generator's CPU reaching [`Rules::generator_cpu_max`]
/// (none such: no ceiling). Below it the search goes on, so that a server whose knee lies
/// between its last pass and the rate that saturated the generator still gets its
/// capacity.
pub fn generator_ceiling(steps: &[Step], rules: &Rules) -> Option<f64> {
    steps
        .iter()
        .filter(|s| {
            s.verdict == Verdict::Invalid
                && !s.skipped()
                && s.generator.utilization >= rules.generator_cpu_max
        })
        .map(|s| s.offered_per_s * GENERATOR_CEILING)
        .min_by(f64::total_cmp)
}

/// Whether the search goes on past its last step, an invalid one: that step's rate is at
/// or above a valid failure (it decides nothing), or the generator saturated there with
/// a passing step below its ceiling ([`generator_ceiling`]) left to search from. Never
/// when that rate was invalid twice: the search would ask for it again (the knee's next
/// step depends on the valid steps only), and a generator that could not run it twice
/// ends the search as generator-bound rather than re-run it until the time limit.
pub fn goes_on_past_invalid(steps: &[Step], rules: &Rules) -> bool {
    let Some(last) = steps.last() else {
        return false;
    };
    if invalid_twice(steps, last.offered_per_s) {
        return false;
    }
    let (pass, fail) = bracket(steps);
    if fail.is_some_and(|h| last.offered_per_s >= h) {
        return true;
    }
    last.generator.utilization >= rules.generator_cpu_max
        && generator_ceiling(steps, rules)
            .zip(pass)
            .is_some_and(|(ceiling, p)| p < ceiling)
}

/// Whether the search runs the last step again rather than stop as generator-bound: it
/// was invalid only because the generator fell behind (one scheduling stall on a
/// shared machine does that) with its CPU to spare, and no other step at its rate was
/// invalid (a rate invalid twice stops the search).
pub fn retry(steps: &[Step], rules: &Rules) -> bool {
    let Some(last) = steps.last() else {
        return false;
    };
    last.verdict == Verdict::Invalid
        && last.generator.utilization < rules.generator_cpu_max
        && !invalid_twice(steps, last.offered_per_s)
}

/// Reads the conclusion off the steps ([`knee`]: the capacity is the rate a step passes
/// with probability 0.9, estimated from every valid step). `unfinished` is how the
/// search ended when the steps alone do not conclude it (time limit, interrupt, a plan
/// run to its end).
pub fn conclude(steps: &[Step], rules: &Rules, unfinished: Outcome) -> Conclusion {
    let (lo, hi) = bracket(steps);
    let rate = |r: f64| format!("{}/s", group(r));
    let estimate = knee::estimate(&trials(steps));
    let mut c = Conclusion {
        outcome: unfinished,
        capacity_per_s: None,
        interval_per_s: estimate.map(|k| k.interval),
        best_pass_per_s: lo,
        generator_bound_at_per_s: None,
        disputed_per_s: disputed(steps),
        knee_spread: estimate.map(|k| k.spread),
        message: String::new(),
    };
    if let Some(bad) = undecided_invalid(steps) {
        c.outcome = Outcome::GeneratorBound;
        c.generator_bound_at_per_s = Some(bad.offered_per_s);
        let busy = bad.generator.utilization >= rules.generator_cpu_max;
        let starved = !busy && bad.generator.starved();
        c.message = format!(
            "the generator, not the server, {} at {} ({}): no server capacity is \
             reported{}; run more generator processes or machines (--rate-share i/n, \
             --plan, --start-at) and merge their results{}",
            if busy {
                "saturated"
            } else if starved {
                "was starved of CPU"
            } else {
                "fell behind"
            },
            rate(bad.offered_per_s),
            bad.why,
            lo.filter(|&l| l < bad.offered_per_s)
                .map_or(String::new(), |l| format!(
                    " (the server met the objective up to {} at least)",
                    rate(l)
                )),
            if busy {
                ""
            } else {
                ", or run it on a machine where other processes do not delay it"
            }
        );
        return c;
    }
    c.capacity_per_s = estimate.map(|k| k.capacity);
    let valid = steps
        .iter()
        .filter(|s| s.verdict != Verdict::Invalid)
        .count();
    let interval = |k: &knee::Knee| {
        format!(
            "{:.0}% credible interval {}–{}",
            knee::INTERVAL * 100.0,
            rate(k.interval[0]),
            rate(k.interval[1])
        )
    };
    match (lo, hi, estimate) {
        (Some(l), None, _) if l >= rules.max_rate => {
            c.outcome = Outcome::AboveMaxRate;
            c.message = format!(
                "the server met the objective at the highest rate tried, {}: its capacity is \
                 higher (raise --max-rate)",
                rate(l)
            );
        }
        (None, Some(h), _) if h <= rules.min_rate => {
            c.outcome = Outcome::BelowMinRate;
            c.message = format!(
                "the server broke the objective even at the lowest rate tried, {}",
                rate(h)
            );
        }
        (_, _, Some(k)) if k.width() <= rules.resolution => {
            c.outcome = Outcome::Capacity;
            c.message = format!(
                "capacity {}: the rate at which a step meets the objective with probability \
                 {:.0}% ({}, from {valid} steps)",
                rate(k.capacity),
                knee::PASS_PROBABILITY * 100.0,
                interval(&k)
            );
        }
        _ => {
            // A plan's steps are fixed: its end is no limit's doing (a plan cut short by
            // --max-time says so in a warning).
            let plan = !steps.is_empty() && steps.iter().all(|s| s.kind == StepKind::Plan);
            c.message = match (unfinished, lo, hi, estimate) {
                (Outcome::Interrupted, ..) => "interrupted before the search ended".to_string(),
                (_, _, _, Some(k)) => format!(
                    "the steps run leave the capacity at about {} with a {}, wider than \
                     --resolution {:.0}%: {} would narrow it{}",
                    rate(k.capacity),
                    interval(&k),
                    rules.resolution * 100.0,
                    if plan {
                        "more steps near it in the plan"
                    } else {
                        "a longer search (--max-time, --max-steps) or more steps near it"
                    },
                    gradual(&k, valid, rules.resolution)
                ),
                (_, Some(l), None, None) if plan => format!(
                    "no step of the plan broke the objective: the capacity is at least {}",
                    rate(l)
                ),
                (_, None, Some(h), None) if plan => format!(
                    "no step of the plan met the objective: the capacity is below {}",
                    rate(h)
                ),
                (_, None, None, None) if plan => {
                    "no step of the plan was valid: it concluded nothing".to_string()
                }
                (_, Some(l), None, None) => format!(
                    "the search ended before the objective broke (--max-time or --max-steps): \
                     the capacity is at least {}",
                    rate(l)
                ),
                (_, None, Some(h), None) => format!(
                    "the search ended before a step met the objective (--max-time or \
                     --max-steps): the capacity is below {}",
                    rate(h)
                ),
                _ => "the search ended before any step concluded (--max-time or --max-steps)"
                    .to_string(),
            };
        }
    }
    c
}

/// The knee's gradualness as a clause of the message when it explains a wide interval
/// (a spread of [`GRADUAL`] or more), else nothing: its spread; and, when even a knee as
/// gradual as the spread's 5th percentile needs more than the `valid` steps the search
/// ran for an interval within `resolution` whatever the design ([`knee::floor_steps`]),
/// that count.
fn gradual(k: &knee::Knee, valid: usize, resolution: f64) -> String {
    if k.spread < GRADUAL {
        return String::new();
    }
    let needed = knee::floor_steps(k.spread_low, resolution);
    let floor = if needed > valid {
        format!(
            "; the spread is ×{:.2} or more with 95% probability, and on such a knee an \
             interval within {:.0}% takes at least {needed} steps whatever the design, by the \
             Cramér–Rao bound: this search ran {valid}",
            k.spread_low,
            resolution * 100.0
        )
    } else {
        String::new()
    };
    format!(
        " (the knee is gradual: a step's chance to meet the objective falls from 90% to 10% \
         over ×{:.2} of rate, so its 90% point takes many steps to pin down{floor})",
        k.spread
    )
}

/// A knee spread ([`knee::Knee::spread`]) from which the message names the knee as
/// gradual: its 90%-to-10% band then spans 15% of rate or more.
pub const GRADUAL: f64 = 1.15;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capacity::judge::tests::{busy_step, late_step, p90_10ms, slow_step};
    use crate::capacity::step::StepKind;
    use crate::capacity::step::tests::{rules, step};

    /// Ramp steps at 100 and 200/s (pass) and 400/s (fail), a bisection at 300/s
    /// (pass).
    fn bracketing_steps() -> Vec<Step> {
        vec![
            step(1, StepKind::Ramp, 100.0, 2, 200),
            step(2, StepKind::Ramp, 200.0, 2, 200),
            step(3, StepKind::Ramp, 400.0, 50, 200),
            step(4, StepKind::Bisect, 300.0, 2, 200),
        ]
    }

    /// [`bracketing_steps`], then six probes each at 300/s (pass) and 320/s (fail).
    fn narrowed_steps() -> Vec<Step> {
        let mut steps = bracketing_steps();
        for i in 0..6 {
            steps.push(step(5 + 2 * i, StepKind::Probe, 300.0, 2, 200));
            steps.push(step(6 + 2 * i, StepKind::Probe, 320.0, 50, 200));
        }
        steps
    }

    /// [`narrowed_steps`], then [`late_step`].
    fn steps_ending_late() -> Vec<Step> {
        let mut steps = narrowed_steps();
        steps.push(late_step());
        steps
    }

    #[test]
    fn concludes_from_the_steps() {
        let r = rules();
        let steps = bracketing_steps();
        assert_eq!(steps[2].verdict, Verdict::Fail);
        assert_eq!(bracket(&steps), (Some(300.0), Some(400.0)));
        let c = conclude(&steps, &r, Outcome::TimeLimit);
        // Four steps leave the capacity wide: estimated, not concluded.
        assert_eq!(c.outcome, Outcome::TimeLimit);
        let [lo, hi] = c.interval_per_s.unwrap();
        assert!(lo < 300.0 && hi > 300.0, "{lo}..{hi}");
        assert!(
            c.message.contains("wider than --resolution 20%"),
            "{}",
            c.message
        );
        // Repeated steps at 300/s (pass) and 320/s (fail) narrow it.
        let c = conclude(&narrowed_steps(), &r, Outcome::TimeLimit);
        let cap = c.capacity_per_s.unwrap();
        let [lo, hi] = c.interval_per_s.unwrap();
        assert!(
            lo <= cap && cap <= hi && lo > 270.0 && hi <= 320.0,
            "{lo} {cap} {hi}"
        );
        assert!(c.message.contains("probability 90%"), "{}", c.message);
    }

    /// A search whose steps pass and fail by chance over a wide band (the rates and
    /// verdicts of a recorded search against `tlsperf serve`, 2026-12-02, pair 1-1)
    /// ends wide and names the knee as gradual, with its spread; a sharp knee's message
    /// does not.
    #[test]
    fn a_wide_interval_from_a_gradual_knee_says_so() {
        let r = rules();
        let recorded: [(f64, bool); 30] = [
            (100.0, true),
            (200.0, true),
            (400.0, true),
            (800.0, true),
            (1600.0, false),
            (1130.0, true),
            (1318.0, false),
            (1137.0, false),
            (1043.0, true),
            (1039.0, true),
            (1048.0, true),
            (1123.0, true),
            (1125.0, true),
            (1231.0, false),
            (1108.0, true),
            (1121.0, true),
            (1118.0, false),
            (1072.0, true),
            (1096.0, true),
            (1117.0, false),
            (1055.0, false),
            (1019.0, true),
            (1025.0, true),
            (1030.0, true),
            (1024.0, true),
            (1032.0, false),
            (997.0, true),
            (1001.0, true),
            (1008.0, true),
            (1012.0, false),
        ];
        // Probes in order: a pass at p90 2 ms, a failure at 50 ms (against 10 ms).
        let probes = |verdicts: &mut dyn Iterator<Item = (f64, bool)>| -> Vec<Step> {
            verdicts
                .enumerate()
                .map(|(i, (rate, pass))| {
                    step(
                        i as u32 + 1,
                        StepKind::Probe,
                        rate,
                        if pass { 2 } else { 50 },
                        200,
                    )
                })
                .collect()
        };
        let steps = probes(&mut recorded.iter().copied());
        let c = conclude(&steps, &r, Outcome::TimeLimit);
        assert_eq!(c.outcome, Outcome::TimeLimit, "{}", c.message);
        let spread = c.knee_spread.unwrap();
        assert!(spread > 1.2, "{spread}");
        assert!(c.message.contains("the knee is gradual"), "{}", c.message);
        assert!(
            c.message.contains(&format!("over ×{spread:.2} of rate")),
            "{}",
            c.message
        );
        // Even at the spread's 5th percentile (×1.18), this knee would let an interval
        // within 20% come from fewer than the 30 steps run: no floor is named.
        let low = knee::estimate(&trials(&steps)).unwrap().spread_low;
        assert!(knee::floor_steps(low, 0.2) <= 30, "{low}");
        assert!(!c.message.contains("Cramér–Rao"), "{}", c.message);
        // Passes thinning out from 400/s to 1,600/s, four steps at each rate: a knee
        // gradual enough, even at the 5th percentile of its spread, that an interval
        // within 20% takes more steps than were run, whatever the design.
        let verdicts = [
            (400.0, "PPPP"),
            (500.0, "PPPF"),
            (600.0, "PPFP"),
            (700.0, "PFPP"),
            (800.0, "PFPF"),
            (1000.0, "FPFP"),
            (1200.0, "FPFF"),
            (1400.0, "FFPF"),
            (1600.0, "FFFF"),
        ];
        let wide = probes(
            &mut [(100.0, "P"), (200.0, "P"), (300.0, "P")]
                .iter()
                .chain(&verdicts)
                .flat_map(|&(rate, vs)| vs.chars().map(move |v| (rate, v == 'P'))),
        );
        let c = conclude(&wide, &r, Outcome::TimeLimit);
        let k = knee::estimate(&trials(&wide)).unwrap();
        let floor = format!(
            "the spread is ×{:.2} or more with 95% probability, and on such a knee an \
             interval within 20% takes at least {} steps whatever the design, by the \
             Cramér–Rao bound: this search ran 39",
            k.spread_low,
            knee::floor_steps(k.spread_low, 0.2)
        );
        assert!(knee::floor_steps(k.spread_low, 0.2) > 39, "{k:?}");
        assert!(c.message.contains(&floor), "{}", c.message);
        // Sharp: passes up to 600/s, failures from 650/s.
        let sharp: Vec<Step> = [100.0, 200.0, 400.0, 800.0, 600.0, 700.0, 650.0, 620.0]
            .iter()
            .enumerate()
            .map(|(i, &rate)| {
                let ms = if rate <= 620.0 { 2 } else { 50 };
                step(i as u32 + 1, StepKind::Probe, rate, ms, 200)
            })
            .collect();
        let c = conclude(&sharp, &r, Outcome::TimeLimit);
        assert!(c.knee_spread.unwrap() < GRADUAL, "{:?}", c.knee_spread);
        assert!(!c.message.contains("gradual"), "{}", c.message);
    }

    /// Steps that rise with the rate dispute nothing; a pass above a failure (a short
    /// step overruled by a confirmation included) marks the band between them, and the
    /// result says so among its warnings.
    #[test]
    fn steps_that_contradict_each_other_mark_a_disputed_band() {
        let r = rules();
        let steady = vec![
            step(1, StepKind::Ramp, 100.0, 2, 200),
            step(2, StepKind::Ramp, 200.0, 2, 200),
            step(3, StepKind::Ramp, 400.0, 50, 200),
            step(4, StepKind::Bisect, 300.0, 2, 200),
            step(5, StepKind::Confirm, 300.0, 2, 2000),
            step(6, StepKind::Confirm, 400.0, 50, 2000),
        ];
        assert_eq!(disputed(&steady), None);
        assert_eq!(
            conclude(&steady, &r, Outcome::TimeLimit).disputed_per_s,
            None
        );
        // A 4-s step passed at 350/s, its confirmation failed, and 325/s failed too:
        // passes at 350 (short) and 300 sit around failures at 325 and 350.
        let mut noisy = steady[..4].to_vec();
        noisy.push(step(5, StepKind::Bisect, 350.0, 2, 200));
        noisy.push(step(6, StepKind::Confirm, 350.0, 50, 2000));
        noisy.push(step(7, StepKind::Bisect, 325.0, 50, 200));
        noisy.push(step(8, StepKind::Confirm, 300.0, 2, 2000));
        assert_eq!(disputed(&noisy), Some([325.0, 350.0]));
        let c = conclude(&noisy, &r, Outcome::TimeLimit);
        assert_eq!(c.disputed_per_s, Some([325.0, 350.0]));
        let w = disputed_warning([1_250.0, 1_500.0]);
        assert!(w.contains("between 1,250/s and 1,500/s"), "{w}");
        assert!(w.contains("passes or fails by chance"), "{w}");
        // An invalid step is no verdict on the server.
        let mut invalid = steady.clone();
        let mut late = step(7, StepKind::Bisect, 450.0, 50, 200);
        late.verdict = Verdict::Invalid;
        invalid.push(late);
        assert_eq!(disputed(&invalid), None);
    }

    /// The linear [`undecided_invalid`] agrees with its definition (every step against
    /// every other), on steps that repeat rates and leave some invalid.
    #[test]
    fn the_linear_conclusion_agrees_with_its_definition() {
        let kinds = [StepKind::Ramp, StepKind::Bisect, StepKind::Confirm];
        let verdicts = [Verdict::Pass, Verdict::Fail, Verdict::Invalid];
        let template = step(1, StepKind::Ramp, 100.0, 2, 20);
        for seed in 0..200u64 {
            let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            let mut next = |n: u64| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (x >> 33) % n
            };
            let steps: Vec<Step> = (0..12)
                .map(|i| {
                    let mut s = template.clone();
                    s.index = i + 1;
                    s.offered_per_s = 100.0 * (1 + next(6)) as f64;
                    s.kind = kinds[next(3) as usize];
                    s.verdict = verdicts[next(3) as usize];
                    s
                })
                .collect();
            let lowest_fail = steps
                .iter()
                .filter(|s| s.verdict == Verdict::Fail)
                .map(|s| s.offered_per_s)
                .min_by(f64::total_cmp);
            let want = steps.iter().enumerate().find_map(|(i, s)| {
                let replaced = steps[i + 1..]
                    .iter()
                    .any(|t| t.offered_per_s == s.offered_per_s && t.verdict != Verdict::Invalid);
                // A rate invalid twice ends a search there: not left out.
                let twice = steps
                    .iter()
                    .filter(|t| t.offered_per_s == s.offered_per_s && t.verdict == Verdict::Invalid)
                    .count()
                    >= 2;
                let above_a_failure = lowest_fail.is_some_and(|h| s.offered_per_s >= h) && !twice;
                (s.verdict == Verdict::Invalid && !replaced && !above_a_failure).then_some(s.index)
            });
            assert_eq!(
                undecided_invalid(&steps).map(|s| s.index),
                want,
                "seed {seed}"
            );
        }
    }

    #[test]
    fn a_busy_or_starved_generator_spoils_a_failure_not_a_pass() {
        let (slo, r) = (p90_10ms(), rules());
        // A busy generator spoils a failure whatever the latencies say…
        let busy = busy_step();
        assert_eq!(busy.verdict, Verdict::Invalid);
        assert!(busy.why.contains("busy 95% of the 1 CPU"), "{}", busy.why);
        // A starved generator (little CPU used, much of its wanted time on a run queue:
        // another process on its CPUs) spoils a failure too, as the generator's…
        let mut starved = slow_step();
        starved.generator.cpu_seconds = 0.1;
        starved.generator.runqueue_wait_s = Some(0.3);
        // On CPUs it may share with the server, the wait may be the server's: a failure.
        for apart in [None, Some(false)] {
            starved.generator.apart_from_server = apart;
            starved.judge(&slo, &r);
            assert_eq!(starved.verdict, Verdict::Fail, "{apart:?}: {}", starved.why);
        }
        starved.generator.apart_from_server = Some(true);
        starved.judge(&slo, &r);
        assert_eq!(starved.verdict, Verdict::Invalid, "{}", starved.why);
        assert!(
            starved
                .why
                .contains("starved: its threads waited for a CPU 75%"),
            "{}",
            starved.why
        );
        let c = conclude(&[starved.clone()], &r, Outcome::TimeLimit);
        assert_eq!(c.outcome, Outcome::GeneratorBound);
        assert!(
            c.message.contains("was starved of CPU at 310/s"),
            "{}",
            c.message
        );
        // …unless the server had no room left (97% of its CPUs and more): its failure.
        // (Search 4-1 of the ten pairs: the generator waited 26% of its time at 1,318/s,
        // the server used 99% of its one CPU.)
        for (busy, verdict) in [
            (0.99, Verdict::Fail),
            (0.97, Verdict::Fail),
            (0.9, Verdict::Invalid),
        ] {
            let mut s = starved.clone();
            s.server_cpus = Some(1.0);
            s.server_cpu_seconds = Some(busy * s.duration_s);
            s.judge(&slo, &r);
            assert_eq!(s.verdict, verdict, "{busy}: {}", s.why);
            if verdict == Verdict::Fail {
                assert!(
                    s.why.contains("the generator was starved (its threads waited for a CPU 75% of the time they wanted one), but the server used"),
                    "{}",
                    s.why
                );
            }
            // Without the server's CPUs, it cannot be told: the generator's.
            s.server_cpus = None;
            s.judge(&slo, &r);
            assert_eq!(s.verdict, Verdict::Invalid);
        }
        // …and a little waiting does not.
        starved.generator.runqueue_wait_s = Some(0.01);
        starved.judge(&slo, &r);
        assert_eq!(starved.verdict, Verdict::Fail, "{}", starved.why);
        assert!(
            !starved.why.contains("server was starved"),
            "{}",
            starved.why
        );
        // A failure whose server waited for its CPUs says so (still a failure: the
        // capacity on this machine, now).
        starved.server_cpu_seconds = Some(0.2);
        starved.server_runqueue_wait_s = Some(0.6);
        starved.judge(&slo, &r);
        assert_eq!(starved.verdict, Verdict::Fail, "{}", starved.why);
        assert!(
            starved
                .why
                .contains("the server was starved: its threads waited for a CPU 75%"),
            "{}",
            starved.why
        );
        // …but not a pass.
        let mut fine = step(8, StepKind::Ramp, 100.0, 2, 200);
        fine.generator.utilization = 0.95;
        fine.judge(&slo, &r);
        assert_eq!(fine.verdict, Verdict::Pass);
        assert!(fine.why.contains("passed although"), "{}", fine.why);
    }

    #[test]
    fn a_generator_that_fell_behind_is_retried_once() {
        let (slo, r) = (p90_10ms(), rules());
        let steps = steps_ending_late();
        let c = conclude(&steps, &r, Outcome::TimeLimit);
        assert_eq!(c.outcome, Outcome::GeneratorBound);
        assert_eq!(c.capacity_per_s, None);
        assert!(
            c.message.contains("not the server, fell behind at 310/s"),
            "{}",
            c.message
        );
        // Fallen behind with CPU to spare: the search runs that step once more…
        assert!(retry(&steps, &r));
        // …and a valid re-run at that rate decides it instead.
        let mut again = step(9, StepKind::Ramp, 310.0, 50, 200);
        again.judge(&slo, &r);
        assert_eq!(again.verdict, Verdict::Fail);
        let mut retried = steps.clone();
        retried.push(again);
        assert!(!retry(&retried, &r));
        let c = conclude(&retried, &r, Outcome::TimeLimit);
        assert_ne!(c.outcome, Outcome::GeneratorBound, "{}", c.message);
        assert!(c.interval_per_s.is_some());
        // Invalid twice at one rate: generator-bound, no third try.
        let mut twice = steps.clone();
        twice.push(late_step());
        assert!(!retry(&twice, &r));
        assert_eq!(
            conclude(&twice, &r, Outcome::TimeLimit).outcome,
            Outcome::GeneratorBound
        );
        // A busy generator is not retried.
        let mut spent = steps[..steps.len() - 1].to_vec();
        spent.push(busy_step());
        assert!(!retry(&spent, &r));
        // Invalid at or above a rate that already failed validly: it decides nothing.
        let mut above = steps[..steps.len() - 1].to_vec();
        let mut high = late_step();
        high.offered_per_s = 800.0;
        above.push(high);
        assert!(goes_on_past_invalid(&above, &r));
        assert_ne!(
            conclude(&above, &r, Outcome::TimeLimit).outcome,
            Outcome::GeneratorBound
        );
    }
}
