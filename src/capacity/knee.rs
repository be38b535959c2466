//! The knee as a probability: what rate a server sustains, estimated from steps that
//! pass or fail by chance near it.
//!
//! **Definition.** A step at rate r passes the objective with some probability P(r),
//! falling as r rises. The capacity is the highest rate whose steps pass with
//! probability at least [`PASS_PROBABILITY`] (0.9): the rate r* where P(r*) = 0.9.
//!
//! **Model.** P(r) = ε + (1 − 2ε)·σ((m − ln r) ÷ s), a logistic curve in log rate:
//! m is the rate where the curve is at its middle, s how gradual the knee is (from
//! 90% to 10% over a factor e^(2·s·ln 9) of rate), σ the logistic function, and
//! ε = [`LAPSE`] a small chance that any step passes or fails whatever its rate (one
//! stall of the machine): without it, one such step would make the knee look gradual.
//! So ln r* = m − s·logit((0.9 − ε) ÷ (1 − 2ε)).
//!
//! **Estimate.** Bayesian, on a grid: m uniform in log rate over the steps' range
//! widened by a factor of 3 each way, s log-uniform over 0.004..0.2 (a knee from sharper
//! than 2% of rate to a factor of 2.4). The posterior of (m, s) given every valid step's
//! pass or fail gives that of r*: its median is the capacity, its 5th and 95th
//! percentiles the 90% credible interval. A knee that decides by chance (passes above
//! failures) widens the interval by itself; a sharp knee leaves about the gap between
//! the highest pass and the lowest failure.
//!
//! **How gradual the knee is**: the posterior median of s, given as the factor of rate
//! over which a step's chance to pass falls from 90% to 10% (e^(2·s·logit((0.9 − ε) ÷
//! (1 − 2ε))), [`Knee::spread`]): near 1 a sharp knee, which a few steps bound; ×1.3 or
//! more one where steps pass and fail by chance over a wide band of rates, and the 0.9
//! point, on the curve's shoulder, needs many steps to pin down.
//!
//! **Where to measure next** (the sequential design): the rate, among candidates spread
//! over r*'s current 95% interval, that minimises the expected entropy of r*'s posterior
//! after one more step: the psi-marginal method (Prins, "The psi-marginal adaptive
//! method", Journal of Vision 13(7):3, 2013), itself the psi method of Kontsevich and
//! Tyler ("Bayesian adaptive estimation of psychometric slope and threshold", Vision
//! Research 39:2729–2737, 1999) with the slope treated as a nuisance parameter. Near a
//! noisy knee it spends repeated short steps at and around r*; at a sharp one it
//! bisects.

/// The pass probability that defines the capacity.
pub const PASS_PROBABILITY: f64 = 0.9;

/// The chance that a step passes or fails whatever its rate (ε in the model).
pub const LAPSE: f64 = 0.02;

/// The credible interval reported: 90% (from the 5th to the 95th percentile).
pub const INTERVAL: f64 = 0.90;

const M_POINTS: usize = 240;
const S_POINTS: usize = 32;
const S_MIN: f64 = 0.004;
const S_MAX: f64 = 0.2;
/// The m grid reaches this factor beyond the lowest and highest rate observed.
const M_MARGIN: f64 = 3.0;
const CANDIDATES: usize = 25;
const ENTROPY_BINS: usize = 60;

/// One observation: a step at `rate` (per second) passed or failed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Trial {
    /// Offered rate (per second, above 0).
    pub rate: f64,
    /// True when the step met the objective.
    pub passed: bool,
}

/// The estimate from a set of trials ([`estimate`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Knee {
    /// The posterior median of r* (per second).
    pub capacity: f64,
    /// Its 90% credible interval (per second).
    pub interval: [f64; 2],
    /// How gradual the knee is: the factor of rate (≥ 1) over which a step's chance to
    /// pass falls from 90% to 10%, at the posterior median of the curve's slope.
    pub spread: f64,
}

impl Knee {
    /// The interval's width relative to its low end (`high ÷ low − 1`).
    pub fn width(&self) -> f64 {
        self.interval[1] / self.interval[0] - 1.0
    }
}

/// The posterior on the grid: each point's ln r* and weight (summing to 1), and the
/// grid it was computed on.
struct Posterior {
    m: Vec<f64>,
    s: Vec<f64>,
    /// Row-major [m][s].
    weight: Vec<f64>,
    ln_r_star: Vec<f64>,
}

fn logistic(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// P(pass) at log rate `x` for the curve (m, s).
fn p_pass(x: f64, m: f64, s: f64) -> f64 {
    LAPSE + (1.0 - 2.0 * LAPSE) * logistic((m - x) / s)
}

/// logit((p − ε) ÷ (1 − 2ε)): ln r* = m − s × this.
fn offset() -> f64 {
    let q = (PASS_PROBABILITY - LAPSE) / (1.0 - 2.0 * LAPSE);
    (q / (1.0 - q)).ln()
}

/// The factor of rate over which P falls from 90% to 10% for slope `s` (the curve is
/// symmetric in log rate, so the 10% point lies as far above its middle as the 90% point
/// below).
fn spread_of(s: f64) -> f64 {
    let q = (0.9 - LAPSE) / (1.0 - 2.0 * LAPSE);
    (2.0 * s * (q / (1.0 - q)).ln()).exp()
}

fn posterior(trials: &[Trial]) -> Option<Posterior> {
    let usable: Vec<(f64, bool)> = trials
        .iter()
        .filter(|t| t.rate.is_finite() && t.rate > 0.0)
        .map(|t| (t.rate.ln(), t.passed))
        .collect();
    let lo = usable.iter().map(|t| t.0).fold(f64::INFINITY, f64::min);
    let hi = usable.iter().map(|t| t.0).fold(f64::NEG_INFINITY, f64::max);
    if !(lo.is_finite() && hi.is_finite()) {
        return None;
    }
    let (lo, hi) = (lo - M_MARGIN.ln(), hi + M_MARGIN.ln());
    let m: Vec<f64> = (0..M_POINTS)
        .map(|i| lo + (hi - lo) * i as f64 / (M_POINTS - 1) as f64)
        .collect();
    let s: Vec<f64> = (0..S_POINTS)
        .map(|j| (S_MIN.ln() + (S_MAX / S_MIN).ln() * j as f64 / (S_POINTS - 1) as f64).exp())
        .collect();
    let c = offset();
    let mut log_w = Vec::with_capacity(M_POINTS * S_POINTS);
    let mut ln_r_star = Vec::with_capacity(M_POINTS * S_POINTS);
    for &mi in &m {
        for &sj in &s {
            let ll: f64 = usable
                .iter()
                .map(|&(x, passed)| {
                    let p = p_pass(x, mi, sj);
                    if passed { p.ln() } else { (1.0 - p).ln() }
                })
                .sum();
            log_w.push(ll);
            ln_r_star.push(mi - sj * c);
        }
    }
    let top = log_w.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mut weight: Vec<f64> = log_w.iter().map(|l| (l - top).exp()).collect();
    let total: f64 = weight.iter().sum();
    if !(total.is_finite() && total > 0.0) {
        return None;
    }
    weight.iter_mut().for_each(|w| *w /= total);
    Some(Posterior {
        m,
        s,
        weight,
        ln_r_star,
    })
}

impl Posterior {
    /// The given quantiles of ln r* (each within 0..=1, ascending).
    fn quantiles(&self, qs: &[f64]) -> Vec<f64> {
        let mut pts: Vec<(f64, f64)> = self
            .ln_r_star
            .iter()
            .copied()
            .zip(self.weight.iter().copied())
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut out = Vec::with_capacity(qs.len());
        let mut acc = 0.0;
        let mut it = pts.iter();
        let mut last = pts.first().map_or(0.0, |p| p.0);
        for &q in qs {
            while acc < q {
                match it.next() {
                    Some(&(v, w)) => {
                        acc += w;
                        last = v;
                    }
                    None => break,
                }
            }
            out.push(last);
        }
        out
    }

    /// The posterior of the slope s, marginal over m: one weight per grid slope.
    fn slope_marginal(&self) -> Vec<f64> {
        let mut marginal = vec![0.0; self.s.len()];
        for (idx, w) in self.weight.iter().enumerate() {
            marginal[idx % self.s.len()] += w;
        }
        marginal
    }

    /// The posterior median of the slope s.
    fn median_slope(&self) -> f64 {
        let mut acc = 0.0;
        for (j, w) in self.slope_marginal().iter().enumerate() {
            acc += w;
            if acc >= 0.5 {
                return self.s[j];
            }
        }
        self.s[self.s.len() - 1]
    }

    /// The entropy (nats) of ln r* binned over `[lo, hi]`, under the weights `w`
    /// (unnormalised).
    fn entropy(&self, w: &[f64], lo: f64, hi: f64) -> f64 {
        let mut bins = [0.0f64; ENTROPY_BINS];
        let span = (hi - lo).max(1e-12);
        let mut total = 0.0;
        for (&v, &wi) in self.ln_r_star.iter().zip(w) {
            let k = (((v - lo) / span) * ENTROPY_BINS as f64).floor();
            let k = (k.max(0.0) as usize).min(ENTROPY_BINS - 1);
            bins[k] += wi;
            total += wi;
        }
        if total <= 0.0 {
            return 0.0;
        }
        bins.iter()
            .filter(|&&b| b > 0.0)
            .map(|&b| {
                let p = b / total;
                -p * p.ln()
            })
            .sum()
    }
}

/// True when the trials bound r*: a pass and a failure among them.
fn bounded(trials: &[Trial]) -> bool {
    trials.iter().any(|t| t.passed) && trials.iter().any(|t| !t.passed)
}

/// The capacity and its interval from the trials, or `None` when they do not bound it
/// (no pass, or no failure: the curve's middle could then be anywhere beyond them).
pub fn estimate(trials: &[Trial]) -> Option<Knee> {
    if !bounded(trials) {
        return None;
    }
    let post = posterior(trials)?;
    let tail = (1.0 - INTERVAL) / 2.0;
    let q = post.quantiles(&[tail, 0.5, 1.0 - tail]);
    Some(Knee {
        capacity: q[1].exp(),
        interval: [q[0].exp(), q[2].exp()],
        spread: spread_of(post.median_slope()),
    })
}

/// The posterior of the knee's spread ([`Knee::spread`]) given the trials, marginal over
/// the curve's middle: each grid slope's spread and its probability (summing to 1), in
/// ascending order. `None` when the trials do not bound r* ([`estimate`]). Under the flat
/// prior in log slope, the product of several searches' posteriors is proportional to
/// the posterior of a spread they share (each with its own middle).
pub fn spread_posterior(trials: &[Trial]) -> Option<Vec<(f64, f64)>> {
    if !bounded(trials) {
        return None;
    }
    let post = posterior(trials)?;
    let marginal = post.slope_marginal();
    Some(post.s.iter().map(|&s| spread_of(s)).zip(marginal).collect())
}

/// The rate to run next: among [`CANDIDATES`] rates spread (in log) over r*'s 95%
/// interval and clamped to `[min, max]`, the one after which r*'s posterior is expected
/// to have the least entropy. `None` when the trials do not bound r* ([`estimate`]).
pub fn next_rate(trials: &[Trial], min: f64, max: f64) -> Option<f64> {
    if !bounded(trials) {
        return None;
    }
    let post = posterior(trials)?;
    let q = post.quantiles(&[0.0, 0.025, 0.975, 1.0]);
    let (all_lo, all_hi) = (q[0], q[3]);
    let (lo, hi) = (q[1].max(min.max(1e-9).ln()), q[2].min(max.max(1e-9).ln()));
    let (lo, hi) = if lo <= hi { (lo, hi) } else { (hi, lo) };
    let mut best: Option<(f64, f64)> = None;
    let mut w_pass = vec![0.0; post.weight.len()];
    let mut w_fail = vec![0.0; post.weight.len()];
    for k in 0..CANDIDATES {
        let x = if CANDIDATES == 1 {
            (lo + hi) / 2.0
        } else {
            lo + (hi - lo) * k as f64 / (CANDIDATES - 1) as f64
        };
        let mut pass_total = 0.0;
        for (i, &mi) in post.m.iter().enumerate() {
            for (j, &sj) in post.s.iter().enumerate() {
                let idx = i * post.s.len() + j;
                let p = p_pass(x, mi, sj);
                w_pass[idx] = post.weight[idx] * p;
                w_fail[idx] = post.weight[idx] * (1.0 - p);
                pass_total += w_pass[idx];
            }
        }
        let expected = pass_total * post.entropy(&w_pass, all_lo, all_hi)
            + (1.0 - pass_total) * post.entropy(&w_fail, all_lo, all_hi);
        if best.is_none_or(|(_, e)| expected < e - 1e-12) {
            best = Some((x, expected));
        }
    }
    best.map(|(x, _)| x.exp().clamp(min, max))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(rate: f64, passed: bool) -> Trial {
        Trial { rate, passed }
    }

    #[test]
    fn no_bound_without_both_outcomes() {
        assert_eq!(estimate(&[t(100.0, true), t(200.0, true)]), None);
        assert_eq!(estimate(&[t(100.0, false)]), None);
        assert_eq!(next_rate(&[t(100.0, true)], 1.0, 1e6), None);
    }

    #[test]
    fn a_sharp_knee_lies_in_the_gap() {
        let trials = [
            t(100.0, true),
            t(200.0, true),
            t(400.0, true),
            t(800.0, false),
            t(600.0, true),
            t(700.0, false),
            t(650.0, true),
        ];
        let k = estimate(&trials).unwrap();
        assert!(k.capacity > 600.0 && k.capacity < 700.0, "{k:?}");
        assert!(k.spread >= 1.0 && k.spread < 1.2, "{k:?}");
        assert!(k.interval[0] >= 400.0 && k.interval[1] <= 720.0, "{k:?}");
        // The next step bisects what is left, more or less.
        let next = next_rate(&trials, 10.0, 1e5).unwrap();
        assert!(next > 600.0 && next < 720.0, "{next}");
    }

    #[test]
    fn scatter_widens_the_interval() {
        let sharp = [
            t(500.0, true),
            t(600.0, true),
            t(700.0, false),
            t(800.0, false),
        ];
        let noisy = [
            t(500.0, true),
            t(600.0, false),
            t(700.0, true),
            t(800.0, false),
            t(550.0, true),
            t(650.0, true),
            t(750.0, false),
        ];
        let (a, b) = (estimate(&sharp).unwrap(), estimate(&noisy).unwrap());
        assert!(b.width() > a.width(), "{a:?} {b:?}");
        assert!(b.spread > a.spread, "{a:?} {b:?}");
    }

    /// Steps drawn from a known curve (90% to 10% over 9% of rate): the estimate's
    /// interval holds the true r* in most searches, and the design narrows it to within
    /// 25% in 25 steps in most of them.
    #[test]
    fn recovers_a_known_knee() {
        // P(pass) = σ((ln 1000 − ln r) / 0.02): r* = 1000 × e^(−0.02 × ln 9) ≈ 957.
        let truth = 1000.0 * (-0.02 * 9f64.ln()).exp();
        let mut seed = 0x2545F4914F6CDD1Du64;
        let mut uniform = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 11) as f64 / (1u64 << 53) as f64
        };
        let (mut covered, mut narrow) = (0, 0);
        let mut spreads = Vec::new();
        let runs = 12;
        for _ in 0..runs {
            let mut trials = Vec::new();
            let mut rate = 100.0;
            for _ in 0..25 {
                let p = logistic((1000f64.ln() - f64::ln(rate)) / 0.02);
                let passed = uniform() < p;
                trials.push(t(rate, passed));
                rate = match next_rate(&trials, 10.0, 1e5) {
                    Some(r) => r,
                    None if passed => rate * 2.0,
                    None => rate / 2.0,
                };
            }
            let k = estimate(&trials).unwrap();
            spreads.push(k.spread);
            if k.width() <= 0.25 {
                narrow += 1;
            }
            if k.interval[0] <= truth && truth <= k.interval[1] {
                covered += 1;
            }
        }
        assert!(
            covered >= 10,
            "{covered} of {runs} intervals held r* = {truth:.0}"
        );
        assert!(narrow >= 9, "{narrow} of {runs} intervals within 25%");
        // The curve falls from 90% to 10% over e^(2 × 0.02 × ln 9) ≈ ×1.092 of rate.
        spreads.sort_by(f64::total_cmp);
        let median = spreads[runs / 2];
        assert!(
            median > 1.04 && median < 1.16,
            "median spread {median} ({spreads:?})"
        );
    }
}
