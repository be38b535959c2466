//! How many steps a capacity search needs for a knee as gradual as the one measured:
//! the search's estimate and design (`tlsperf::capacity::knee`) run on simulated steps,
//! and the spread of recorded searches' knees, pooled.
//!
//! Usage:
//!   `knee_design pooled FILE...` — capacity documents (`capacity --out`): each one's
//!   valid steps as pass/fail trials; prints each search's knee spread (posterior median)
//!   and the posterior of one spread shared by all of them (each with its own capacity):
//!   its median and 90% interval.
//!   `knee_design simulate SPREAD STEPS [RUNS] [SEED]` — RUNS (default 200) searches of at most
//!   STEPS steps against a knee that does not move: a step at rate r passes with
//!   probability σ((ln 1000 − ln r) ÷ s), s such that the chance falls from 90% to 10%
//!   over ×SPREAD of rate. Each search ramps from 100/s by ×2 until a step fails, then
//!   runs each step where `knee::next_rate` puts it, and stops when the 90% interval is
//!   within 20% (`--resolution`'s default). Prints the share of searches whose interval
//!   ended within 25%, the median and 90th percentile width, how often the interval held
//!   the true capacity, and the median step count at which the interval first came
//!   within 25%. SEED (a number, default 1) seeds the simulated verdicts; the share that
//!   held the capacity moves by several points from seed to seed at 400 searches.
//!
//!   `knee_design floor SPREAD STEPS [RUNS] [SEED]` — the floor (`knee::floor_width`):
//!   the narrowest 90% interval any design of STEPS steps can give on a knee of that
//!   spread (the Cramér–Rao bound), the fewest steps for 25% and for 20%, and RUNS
//!   (default 200) searches whose steps the design that reaches the floor places, knowing
//!   the curve (no ramp, no search): the estimate's width on them, median and 10th
//!   percentile, and how often it held the true capacity.
//!   `knee_design floor [--steps N] FILE...` — for each capacity document: its knee spread
//!   (posterior median, and its 5th percentile), its valid steps, its interval's width,
//!   and the floor for that spread and step count (at the median and at the 5th
//!   percentile of the spread): how much of the width the knee itself forces; and the
//!   posterior probability that its knee was so gradual that no design of its steps
//!   could have narrowed the interval to 25%. With `--steps N`, the floors are those of N
//!   steps rather than the document's own count (what a search allowed N steps could
//!   have reached on that knee).
//!
//! The simulated search leaves out what the real one adds (a generator ceiling, invalid
//! steps, a time limit rather than a step count): a step count stands for the time
//! limit (`capacity` ran 27–31 steps in its 3 minutes at 4-s steps on 2026-12-02).

use std::process::ExitCode;

use tlsperf::capacity::CapacityResult;
use tlsperf::capacity::knee::{self, Trial};
use tlsperf::capacity::result::trials;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let run = match args.first().map(String::as_str) {
        Some("pooled") if args.len() > 1 => pooled(&args[1..]),
        Some("simulate") if (3..=5).contains(&args.len()) => simulate(&args[1..]),
        Some("floor") if args.len() > 3 && args[1] == "--steps" => match args[2].parse() {
            Ok(n) if n > 0 => floor_of_documents(&args[3..], Some(n)),
            _ => Err(format!("--steps '{}': not a count above 0", args[2])),
        },
        Some("floor") if args.len() > 1 && args[1].parse::<f64>().is_err() => {
            floor_of_documents(&args[1..], None)
        }
        Some("floor") if (3..=5).contains(&args.len()) => floor(&args[1..]),
        _ => Err(
            "usage: knee_design pooled FILE... | knee_design simulate SPREAD STEPS \
             [RUNS] [SEED] | knee_design floor SPREAD STEPS [RUNS] [SEED] | knee_design floor \
             [--steps N] FILE..."
                .to_string(),
        ),
    };
    match run {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn pooled(files: &[String]) -> Result<(), String> {
    let mut log_sum: Option<Vec<(f64, f64)>> = None;
    for f in files {
        let t = read_trials(f)?;
        let Some(post) = knee::spread_posterior(&t) else {
            println!(
                "{f}: {} trials do not bound the capacity; left out",
                t.len()
            );
            continue;
        };
        println!(
            "{f}: {} trials, spread ×{:.2}",
            t.len(),
            quantile(&post, 0.5)
        );
        let acc = log_sum.get_or_insert_with(|| post.iter().map(|&(x, _)| (x, 0.0)).collect());
        for (a, (_, p)) in acc.iter_mut().zip(&post) {
            a.1 += p.max(1e-300).ln();
        }
    }
    let acc = log_sum.ok_or("no document bounds a capacity")?;
    let top = acc.iter().map(|a| a.1).fold(f64::NEG_INFINITY, f64::max);
    let total: f64 = acc.iter().map(|a| (a.1 - top).exp()).sum();
    let post: Vec<(f64, f64)> = acc
        .iter()
        .map(|a| (a.0, (a.1 - top).exp() / total))
        .collect();
    println!(
        "shared spread: ×{:.2} (90% interval ×{:.2}–×{:.2})",
        quantile(&post, 0.5),
        quantile(&post, 0.05),
        quantile(&post, 0.95)
    );
    Ok(())
}

/// The q-quantile of a discrete distribution given in ascending order.
fn quantile(post: &[(f64, f64)], q: f64) -> f64 {
    let mut acc = 0.0;
    for &(x, p) in post {
        acc += p;
        if acc >= q {
            return x;
        }
    }
    post.last().map_or(f64::NAN, |p| p.0)
}

/// A capacity document's valid steps as trials.
fn read_trials(f: &str) -> Result<Vec<Trial>, String> {
    let text = std::fs::read_to_string(f).map_err(|e| format!("{f}: {e}"))?;
    let r: CapacityResult =
        serde_json::from_str(&text).map_err(|e| format!("{f}: not a capacity result: {e}"))?;
    Ok(trials(&r.steps))
}

/// `SPREAD STEPS [RUNS] [SEED]`, each checked: RUNS 200 and SEED 1 by default.
fn spread_steps_runs_seed(args: &[String]) -> Result<(f64, usize, usize, u64), String> {
    let spread: f64 = args[0]
        .parse()
        .map_err(|_| format!("SPREAD '{}': not a number", args[0]))?;
    let steps: usize = args[1]
        .parse()
        .map_err(|_| format!("STEPS '{}': not a count", args[1]))?;
    let runs: usize = match args.get(2) {
        Some(a) => a.parse().map_err(|_| format!("RUNS '{a}': not a count"))?,
        None => 200,
    };
    if !(1.001..=3.0).contains(&spread)
        || !(2..=1000).contains(&steps)
        || !(1..=100_000).contains(&runs)
    {
        return Err(
            "SPREAD must be within 1.001..=3, STEPS within 2..=1000, RUNS within 1..=100000".into(),
        );
    }
    let seed: u64 = match args.get(3) {
        Some(a) => a.parse().map_err(|_| format!("SEED '{a}': not a number"))?,
        None => 1,
    };
    Ok((spread, steps, runs, seed))
}

fn floor_of_documents(files: &[String], steps: Option<usize>) -> Result<(), String> {
    let of = steps.map_or("its valid steps".to_string(), |n| format!("{n} steps"));
    println!(
        "document\tvalid steps\tspread (median, p5)\twidth\tfloor of {of} at median spread\t\
         at p5 spread\twidth ÷ floor\tP(floor > 25%)"
    );
    for f in files {
        let t = read_trials(f)?;
        let (Some(post), Some(k)) = (knee::spread_posterior(&t), knee::estimate(&t)) else {
            println!("{f}\t{}\tthe steps do not bound the capacity", t.len());
            continue;
        };
        let (median, p5) = (quantile(&post, 0.5), quantile(&post, 0.05));
        let n = steps.unwrap_or(t.len());
        let (fm, f5) = (knee::floor_width(median, n), knee::floor_width(p5, n));
        let beyond: f64 = post
            .iter()
            .filter(|&&(spread, _)| knee::floor_width(spread, n) > 0.25)
            .map(|&(_, p)| p)
            .sum();
        println!(
            "{f}\t{}\t×{median:.2}, ×{p5:.2}\t{:.1}%\t{:.1}%\t{:.1}%\t{:.2}\t{beyond:.3}",
            t.len(),
            k.width() * 100.0,
            fm * 100.0,
            f5 * 100.0,
            k.width() / fm
        );
    }
    Ok(())
}

/// A seeded uniform draw in [0, 1) (xorshift; any seed, 0 included).
fn uniform_from(seed_arg: u64) -> impl FnMut() -> f64 {
    let mut seed = 0x2545_F491_4F6C_DD1Du64 ^ seed_arg.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    if seed == 0 {
        seed = 1;
    }
    move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn floor(args: &[String]) -> Result<(), String> {
    let (spread, steps, runs, seed) = spread_steps_runs_seed(args)?;
    let design = knee::floor_design();
    let s = knee::slope_of(spread);
    let m = 1000f64.ln();
    let truth = (m - s * knee::offset()).exp();
    let mut uniform = uniform_from(seed);
    let (mut widths, mut covered) = (Vec::new(), 0);
    for _ in 0..runs {
        let t: Vec<Trial> = design
            .rates(m, s, steps)
            .into_iter()
            .map(|rate| Trial {
                rate,
                passed: uniform() < knee::p_pass(rate.ln(), m, s),
            })
            .collect();
        match knee::estimate(&t) {
            Some(est) => {
                widths.push(est.width());
                if (est.interval[0]..=est.interval[1]).contains(&truth) {
                    covered += 1;
                }
            }
            None => widths.push(f64::INFINITY),
        }
    }
    widths.sort_by(f64::total_cmp);
    println!(
        "knee spread ×{spread} (capacity {truth:.0}/s), {steps} steps: floor {:.1}% (variance \
         {:.2}·s² a step; design z = {:.2} for {:.0}% of steps, {:.2} for {:.0}%); fewest steps \
         for 25%: {}, for 20%: {}",
        knee::floor_width(spread, steps) * 100.0,
        design.variance,
        design.points[0].0,
        design.points[0].1 * 100.0,
        design.points[1].0,
        design.points[1].1 * 100.0,
        knee::floor_steps(spread, 0.25),
        knee::floor_steps(spread, 0.20)
    );
    println!(
        "{runs} searches on that design at {:.0}/s and {:.0}/s: width median {:.1}%, p10 {:.1}%; \
         the interval held the capacity in {covered} ({:.0}%)",
        (m - design.points[0].0 * s).exp(),
        (m - design.points[1].0 * s).exp(),
        widths[runs / 2] * 100.0,
        widths[runs / 10] * 100.0,
        100.0 * covered as f64 / runs as f64
    );
    Ok(())
}

fn simulate(args: &[String]) -> Result<(), String> {
    let (spread, steps, runs, seed) = spread_steps_runs_seed(args)?;
    // P falls from 90% to 10% between ln r = m ∓ s·ln 9.
    let s = spread.ln() / (2.0 * 9f64.ln());
    let m = 1000f64.ln();
    let truth = (m - s * 9f64.ln()).exp();
    let mut uniform = uniform_from(seed);
    let (mut widths, mut reached) = (Vec::new(), Vec::new());
    let mut covered = 0;
    for _ in 0..runs {
        let mut t: Vec<Trial> = Vec::new();
        let mut rate: f64 = 100.0;
        let mut first = None;
        for k in 0..steps {
            let p = 1.0 / (1.0 + ((rate.ln() - m) / s).exp());
            let passed = uniform() < p;
            t.push(Trial { rate, passed });
            if let Some(est) = knee::estimate(&t) {
                if est.width() <= 0.25 && first.is_none() {
                    first = Some(k + 1);
                }
                if est.width() <= 0.20 {
                    break;
                }
            }
            rate = match knee::next_rate(&t, 1.0, 1e5) {
                Some(r) => r,
                None if passed => rate * 2.0,
                None => rate / 2.0,
            };
        }
        let Some(est) = knee::estimate(&t) else {
            widths.push(f64::INFINITY);
            continue;
        };
        widths.push(est.width());
        if (est.interval[0]..=est.interval[1]).contains(&truth) {
            covered += 1;
        }
        if let Some(k) = first {
            reached.push(k);
        }
    }
    widths.sort_by(f64::total_cmp);
    reached.sort_unstable();
    let within = widths.iter().filter(|&&w| w <= 0.25).count();
    println!(
        "knee spread ×{spread} (capacity {truth:.0}/s), at most {steps} steps, {runs} searches: \
         {within} within 25% ({:.0}%); width median {:.1}%, p90 {:.1}%; the interval held the \
         capacity in {covered} ({:.0}%); first within 25% after {} steps (median of those that were)",
        100.0 * within as f64 / runs as f64,
        widths[runs / 2] * 100.0,
        widths[(runs * 9 / 10).min(runs - 1)] * 100.0,
        100.0 * covered as f64 / runs as f64,
        reached
            .get(reached.len() / 2)
            .map_or("-".to_string(), |k| k.to_string())
    );
    Ok(())
}
