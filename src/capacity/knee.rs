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
//!
//! **The floor** ([`floor_width`], [`floor_steps`]): how narrow any search of N steps can
//! make r*'s interval on a knee of a given spread, whatever its design. By the
//! Cramér–Rao bound, no unbiased estimate of ln r* from N pass/fail steps has a variance
//! below s²·V/N, where V is the least variance one step can leave in units of s²: the
//! c-optimal design for ln r* = m − s·c (Elfving's theorem; Wu, "Optimal design for
//! percentile estimation of a quantal response curve", 1988), steps at the two rates where
//! the curve stands at z = (m − ln r) ÷ s = ±2.14, most of them at the upper one: V ≈ 16.3
//! (all steps at r* itself: 16.7). The floor is the normal interval of that variance, in
//! rate: a designer who already knew the curve could not do better in the limit of many
//! steps, and the posterior interval of a real search, which must also find the curve, is
//! wider. (A prior can narrow a posterior below the bound with few steps; this one is
//! flat in the curve's middle, and the bound held against the estimator on simulated
//! steps: `tests::the_floor_holds_for_the_estimate`.)

/// The pass probability that defines the capacity.
pub const PASS_PROBABILITY: f64 = 0.9;

/// The chance that a step passes or fails whatever its rate (ε in the model).
pub const LAPSE: f64 = 0.02;

/// The credible interval reported: 90% (from the 5th to the 95th percentile).
pub const INTERVAL: f64 = 0.90;

/// The standard normal's 95th percentile: a normal 90% interval ([`INTERVAL`]) spans
/// ± this many standard deviations.
const Z_INTERVAL: f64 = 1.644_853_626_951_472_2;

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
    /// The spread's 5th percentile: the knee is at least this gradual with 95%
    /// probability (what [`floor_steps`] is taken at when a search ends wide).
    pub spread_low: f64,
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

/// P(pass) at log rate `x` for the curve (m, s), the lapse included.
pub fn p_pass(x: f64, m: f64, s: f64) -> f64 {
    LAPSE + (1.0 - 2.0 * LAPSE) * logistic((m - x) / s)
}

/// logit((p − ε) ÷ (1 − 2ε)): ln r* = m − s × this.
pub fn offset() -> f64 {
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

    /// The q-quantile (0..=1) of the slope s's posterior.
    fn slope_quantile(&self, q: f64) -> f64 {
        let mut acc = 0.0;
        for (j, w) in self.slope_marginal().iter().enumerate() {
            acc += w;
            if acc >= q {
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
        spread: spread_of(post.slope_quantile(0.5)),
        spread_low: spread_of(post.slope_quantile(tail)),
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

/// The best design for r* when the curve is known, and what it leaves (the module's
/// **floor**; [`floor_design`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FloorDesign {
    /// The least variance of ln r* one step can leave, in units of s² (V).
    pub variance: f64,
    /// Where to put the steps: each point's z = (m − ln r) ÷ s (positive below the
    /// curve's middle, where steps mostly pass) and the share of steps run there.
    pub points: [(f64, f64); 2],
}

impl FloorDesign {
    /// The rate of each of `steps` steps on the curve (m, s): each point gets its share
    /// of the steps so far, as nearly as whole steps can.
    pub fn rates(&self, m: f64, s: f64, steps: usize) -> Vec<f64> {
        let [(z1, share), (z2, _)] = self.points;
        let (r1, r2) = ((m - z1 * s).exp(), (m - z2 * s).exp());
        let mut at_first = 0.0;
        (0..steps)
            .map(|k| {
                if at_first < share * (k + 1) as f64 - 0.5 {
                    at_first += 1.0;
                    r1
                } else {
                    r2
                }
            })
            .collect()
    }
}

/// The c-optimal design for ln r* = m − s·c among every design of one rate or two, on a
/// grid of z = (m − ln r) ÷ s from −8 to 8 by 0.02. One step at z informs (m, s) by
/// k(z)·v·vᵀ, v = (1, −z), k(z) = P′(z)² ÷ (P(1 − P)); a two-point design (z₁, z₂) needs
/// (a, b) with a·v₁ + b·v₂ = (1, −c) and leaves (|a| ÷ √k₁ + |b| ÷ √k₂)² when the steps
/// are split in proportion to |a| ÷ √k₁ and |b| ÷ √k₂ (Elfving); one point at z = c
/// leaves 1 ÷ k(c).
pub fn floor_design() -> FloorDesign {
    static DESIGN: std::sync::OnceLock<FloorDesign> = std::sync::OnceLock::new();
    *DESIGN.get_or_init(|| {
        let c = offset();
        let k = |z: f64| {
            let f = logistic(z);
            let slope = (1.0 - 2.0 * LAPSE) * f * (1.0 - f);
            let p = LAPSE + (1.0 - 2.0 * LAPSE) * f;
            slope * slope / (p * (1.0 - p))
        };
        let zs: Vec<(f64, f64)> = (0..=800)
            .map(|i| {
                let z = -8.0 + 0.02 * f64::from(i);
                (z, k(z).sqrt())
            })
            .collect();
        let mut best = FloorDesign {
            variance: 1.0 / k(c),
            points: [(c, 1.0), (c, 0.0)],
        };
        for (i, &(z1, r1)) in zs.iter().enumerate() {
            for &(z2, r2) in &zs[i + 1..] {
                let a = (z2 - c) / (z2 - z1);
                let b = (c - z1) / (z2 - z1);
                let (u1, u2) = (a.abs() / r1, b.abs() / r2);
                let v = (u1 + u2).powi(2);
                if v < best.variance {
                    let share = u1 / (u1 + u2);
                    best = FloorDesign {
                        variance: v,
                        points: [(z1, share), (z2, 1.0 - share)],
                    };
                }
            }
        }
        best
    })
}

/// The slope s of a knee of this spread ([`Knee::spread`], at least 1).
pub fn slope_of(spread: f64) -> f64 {
    spread.max(1.0).ln() / (2.0 * offset())
}

/// The floor: the narrowest 90% interval for r* (as `high ÷ low − 1`, like
/// [`Knee::width`]) that `steps` pass/fail steps can give on a knee of this spread,
/// whatever the design (the module's **floor**). `steps` 0 gives infinity.
pub fn floor_width(spread: f64, steps: usize) -> f64 {
    if steps == 0 {
        return f64::INFINITY;
    }
    let sd = slope_of(spread) * (floor_design().variance / steps as f64).sqrt();
    (2.0 * Z_INTERVAL * sd).exp() - 1.0
}

/// The fewest steps whose floor ([`floor_width`]) is within `width` (above 0) on a knee
/// of this spread: no search reaches that width in fewer.
pub fn floor_steps(spread: f64, width: f64) -> usize {
    let half = (1.0 + width.max(1e-9)).ln() / (2.0 * Z_INTERVAL);
    let n = floor_design().variance * (slope_of(spread) / half).powi(2);
    (n.ceil() as usize).max(1)
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

    /// A seeded uniform draw in [0, 1) (xorshift).
    fn xorshift(mut seed: u64) -> impl FnMut() -> f64 {
        move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 11) as f64 / (1u64 << 53) as f64
        }
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
        let mut uniform = xorshift(0x2545F4914F6CDD1D);
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

    /// The floor's design: about V = 16.3 (below the 16.7 of every step at r* itself,
    /// 1 ÷ k(c), computed here on its own), at the curve's z = ±2.14, most steps at the
    /// upper one.
    #[test]
    fn the_floor_design_is_the_c_optimal_one() {
        let d = floor_design();
        let c = offset();
        let f = logistic(c);
        let slope = (1.0 - 2.0 * LAPSE) * f * (1.0 - f);
        let one_point = PASS_PROBABILITY * (1.0 - PASS_PROBABILITY) / (slope * slope);
        assert!((one_point - 16.7355).abs() < 1e-3, "{one_point}");
        assert!(d.variance < one_point && d.variance > 16.0, "{d:?}");
        assert!((d.points[0].0 + 2.14).abs() < 0.05, "{d:?}");
        assert!((d.points[1].0 - 2.14).abs() < 0.05, "{d:?}");
        assert!(d.points[0].1 > 0.03 && d.points[0].1 < 0.08, "{d:?}");
        assert!((d.points[0].1 + d.points[1].1 - 1.0).abs() < 1e-12, "{d:?}");
    }

    /// The floor widens with the spread and narrows with the steps (as 1 ÷ √N in log
    /// rate), and the fewest steps for a width are exactly where it gets there.
    #[test]
    fn floor_width_and_steps_agree() {
        assert_eq!(floor_width(1.0, 10), 0.0);
        assert_eq!(floor_width(1.5, 0), f64::INFINITY);
        assert!(floor_width(1.3, 31) < floor_width(1.5, 31));
        assert!(floor_width(1.5, 62) < floor_width(1.5, 31));
        // Quadruple the steps, half the log width.
        let (a, b) = (floor_width(1.5, 20), floor_width(1.5, 80));
        assert!(
            ((1.0 + a).ln() / (1.0 + b).ln() - 2.0).abs() < 1e-9,
            "{a} {b}"
        );
        // ×1.57 (the pooled spread of 2026-12-03 06:49Z): 31 steps cannot reach 25%.
        assert!(floor_width(1.57, 31) > 0.25, "{}", floor_width(1.57, 31));
        for spread in [1.05, 1.2, 1.36, 1.57, 1.93, 2.4] {
            for width in [0.1, 0.2, 0.25] {
                let n = floor_steps(spread, width);
                assert!(
                    floor_width(spread, n) <= width + 1e-12,
                    "{spread} {width} {n}"
                );
                if n > 1 {
                    assert!(floor_width(spread, n - 1) > width, "{spread} {width} {n}");
                }
            }
        }
    }

    /// The floor holds for the estimate: searches of 40 steps on a known knee (×1.3),
    /// placed by the floor's own design, which knows the curve, never give an interval
    /// narrower than the floor; their median is wider still (the estimate must find
    /// the slope too).
    #[test]
    fn the_floor_holds_for_the_estimate() {
        let spread = 1.3;
        let s = slope_of(spread);
        let m = 1000f64.ln();
        let mut uniform = xorshift(0x9E37_79B9_7F4A_7C15);
        let (steps, runs) = (40, 16);
        let floor = floor_width(spread, steps);
        let mut widths = Vec::new();
        for _ in 0..runs {
            let trials: Vec<Trial> = floor_design()
                .rates(m, s, steps)
                .into_iter()
                .map(|rate| t(rate, uniform() < p_pass(rate.ln(), m, s)))
                .collect();
            widths.push(estimate(&trials).map_or(f64::INFINITY, |k| k.width()));
        }
        widths.sort_by(f64::total_cmp);
        assert!(widths[0] >= floor, "floor {floor}, widths {widths:?}");
        assert!(
            widths[runs / 2] > 1.1 * floor,
            "floor {floor}, widths {widths:?}"
        );
    }
}
