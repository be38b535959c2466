//! The merge of the documents of one shared search's processes (`--rate-share i/n`,
//! started together with `--start-at`), step by step ([`merge`]), and why documents
//! cannot be merged ([`MergeError`]).

use super::conclusion::{Outcome, conclude};
use super::result::CapacityResult;
use super::step::Step;
use crate::load::result::Dist;
use crate::stats::HistogramError;

/// Capacity results that cannot be merged.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MergeError {
    /// Nothing to merge.
    #[error("nothing to merge")]
    Empty,
    /// Made with other settings than the first.
    #[error(
        "capacity result {index} was made with other settings than result 1 ({what}): the \
         processes of one search share the URL, --slo and search options"
    )]
    Mixed {
        /// 1-based position.
        index: usize,
        /// What differs.
        what: String,
    },
    /// Two results of the same process share.
    #[error(
        "capacity results {first} and {index} are both share {share}: each process of a \
         shared search has its own --rate-share i/n"
    )]
    SameShare {
        /// 1-based position of the first.
        first: usize,
        /// 1-based position of the second.
        index: usize,
        /// The share.
        share: String,
    },
    /// No step in common.
    #[error("the searches diverged from their first step: nothing to merge step by step")]
    NoCommonStep,
    /// Histograms did not merge.
    #[error(transparent)]
    Histogram(#[from] HistogramError),
    /// A sum that a count cannot hold: refused rather than wrapped.
    #[error("the merged {what} would be more than a count holds (adding result {index})")]
    Overflow {
        /// The count.
        what: String,
        /// 1-based position of the result that overflowed it.
        index: usize,
    },
}

impl MergeError {
    /// The 1-based position of the result the error is about, when it is about one.
    pub fn index(&self) -> Option<usize> {
        match self {
            MergeError::Mixed { index, .. }
            | MergeError::SameShare { index, .. }
            | MergeError::Overflow { index, .. } => Some(*index),
            _ => None,
        }
    }
}

impl crate::error::Classify for MergeError {
    fn class(&self) -> crate::error::ErrorClass {
        crate::error::ErrorClass::Input
    }
}

/// Merges `b` into `a` ([`Dist::merge`]: a total a histogram cannot hold is refused).
fn merge_dist(a: &mut Option<Dist>, b: &Option<Dist>) -> Result<(), HistogramError> {
    match (a.as_mut(), b) {
        (Some(x), Some(y)) => x.merge(y)?,
        (None, Some(y)) => *a = Some(y.clone()),
        _ => {}
    }
    Ok(())
}

impl CapacityResult {
    /// A copy of everything but the steps (left empty): for a merge that copies only
    /// the steps it keeps.
    fn clone_without_steps(&self) -> CapacityResult {
        CapacityResult {
            schema: self.schema.clone(),
            target: self.target.clone(),
            started: self.started.clone(),
            slo: self.slo.clone(),
            rules: self.rules.clone(),
            options: self.options.clone(),
            rate_share: self.rate_share.clone(),
            machines: self.machines,
            outcome: self.outcome,
            capacity_per_s: self.capacity_per_s,
            interval_per_s: self.interval_per_s,
            best_pass_per_s: self.best_pass_per_s,
            generator_bound_at_per_s: self.generator_bound_at_per_s,
            disputed_per_s: self.disputed_per_s,
            knee_spread: self.knee_spread,
            message: self.message.clone(),
            steps: Vec::new(),
            warnings: self.warnings.clone(),
            link_counters: self.link_counters.clone(),
        }
    }
}

/// Combines the results of the processes of one shared search (`--rate-share i/n`,
/// started together with `--start-at`) step by step: counts add up, histograms merge
/// exactly, CPU seconds add up, each step is judged again on the merged figures and the
/// conclusion drawn again. Each process decided its next step on its own measurements;
/// where their searches diverged (a step at another rate), only the steps before are
/// merged, and a warning says so. Results of another URL, objective or search rules,
/// or two of the same share, are refused, as is a sum a count cannot hold (it is never
/// wrapped). Time and memory are linear in the results (the results are expected
/// valid: [`CapacityResult::validate`], as every reader checks).
pub fn merge(results: &[CapacityResult]) -> Result<CapacityResult, MergeError> {
    let (first, rest) = results.split_first().ok_or(MergeError::Empty)?;
    let shares = shares(first, results)?;
    let common = common_steps(first, rest);
    if common == 0 {
        return Err(MergeError::NoCommonStep);
    }
    let longest = results.iter().map(|r| r.steps.len()).max().unwrap_or(0);
    let mut m = CapacityResult {
        steps: first.steps[..common].to_vec(),
        ..first.clone_without_steps()
    };
    for (i, r) in rest.iter().enumerate() {
        let index = i + 2;
        m.machines = m
            .machines
            .checked_add(r.machines)
            .ok_or_else(|| overflow("machines", index))?;
        m.link_counters = match (m.link_counters.take(), &r.link_counters) {
            (Some(mut a), Some(b)) => {
                a.merge(b);
                Some(a)
            }
            (a, b) => a.or_else(|| b.clone()),
        };
        if r.started < m.started {
            m.started.clone_from(&r.started);
        }
        for (a, b) in m.steps.iter_mut().zip(&r.steps) {
            add_step(a, b, index)?;
        }
    }
    m.rate_share = (!shares.is_empty()).then(|| shares.join(","));
    let share_sum: f64 = m.steps.first().map_or(1.0, |s| s.share);
    m.warnings.clear();
    if (share_sum - 1.0).abs() > 1e-6 {
        m.warnings.push(format!(
            "the merged processes sent {:.0}% of the offered rate (shares {}): a share is \
             missing",
            share_sum * 100.0,
            m.rate_share.as_deref().unwrap_or("none")
        ));
    }
    if common < longest {
        m.warnings.push(format!(
            "the processes' searches diverged after step {common} (each decided on its own \
             measurements): only steps 1–{common} are merged"
        ));
    }
    for s in &mut m.steps {
        s.judge(&m.slo, &m.rules);
    }
    let unfinished = results
        .iter()
        .map(|r| r.outcome)
        .find(|o| matches!(o, Outcome::Interrupted | Outcome::TimeLimit))
        .unwrap_or(Outcome::TimeLimit);
    let c = conclude(&m.steps, &m.rules, unfinished);
    m.set_conclusion(c);
    Ok(m)
}

/// The `--rate-share` parts of the results, in order, once all are known to be of one
/// search (URL, objective, rules) and no part is taken twice.
fn shares(first: &CapacityResult, results: &[CapacityResult]) -> Result<Vec<String>, MergeError> {
    let mut shares: Vec<String> = Vec::new();
    let mut owner: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for (i, r) in results.iter().enumerate() {
        let what = if r.target != first.target {
            Some(format!("target {} vs {}", r.target, first.target))
        } else if r.slo != first.slo {
            Some(format!("--slo {} vs {}", r.slo, first.slo))
        } else if r.rules != first.rules {
            Some("search rules (--start-rate, --max-rate, --step-min…)".into())
        } else {
            None
        };
        if let Some(what) = what {
            return Err(MergeError::Mixed { index: i + 1, what });
        }
        if let Some(s) = &r.rate_share {
            for part in s.split(',') {
                if let Some(f) = owner.get(part) {
                    return Err(MergeError::SameShare {
                        first: *f,
                        index: i + 1,
                        share: part.to_string(),
                    });
                }
                owner.insert(part.to_string(), i + 1);
                shares.push(part.to_string());
            }
        }
    }
    Ok(shares)
}

/// How many first steps every search took alike (same kind, same offered rate).
fn common_steps(first: &CapacityResult, rest: &[CapacityResult]) -> usize {
    let mut common = first.steps.len();
    for r in rest {
        common = common.min(
            first
                .steps
                .iter()
                .zip(&r.steps)
                .take_while(|(a, b)| a.kind == b.kind && a.offered_per_s == b.offered_per_s)
                .count(),
        );
    }
    common
}

/// A count of the `index`th result (from 1) that the merged one cannot hold.
fn overflow(what: &str, index: usize) -> MergeError {
    MergeError::Overflow {
        what: what.to_string(),
        index,
    }
}

/// Adds step `b` of the `index`th result (from 1) to the merged step `a`: shares,
/// counts and CPU seconds add up, histograms merge, the longest duration and the worst
/// delays are kept, a server's figures only when one process sampled them.
fn add_step(a: &mut Step, b: &Step, index: usize) -> Result<(), MergeError> {
    let over = |what: &str| overflow(what, index);
    a.share += b.share;
    a.machines = a
        .machines
        .checked_add(b.machines)
        .ok_or_else(|| over("machines of a step"))?;
    if b.started < a.started {
        a.started.clone_from(&b.started);
    }
    a.duration_s = a.duration_s.max(b.duration_s);
    a.connections = a.connections.max(b.connections);
    a.attempted = a
        .attempted
        .checked_add(b.attempted)
        .ok_or_else(|| over("requests attempted"))?;
    a.completed = a
        .completed
        .checked_add(b.completed)
        .ok_or_else(|| over("requests completed"))?;
    a.failed = a
        .failed
        .checked_add(b.failed)
        .ok_or_else(|| over("requests failed"))?;
    a.body_bytes = a
        .body_bytes
        .checked_add(b.body_bytes)
        .ok_or_else(|| over("body bytes"))?;
    a.upload_bytes = a
        .upload_bytes
        .checked_add(b.upload_bytes)
        .ok_or_else(|| over("upload bytes"))?;
    merge_dist(&mut a.latency_corrected, &b.latency_corrected)?;
    merge_dist(&mut a.pacing_lateness, &b.pacing_lateness)?;
    merge_dist(&mut a.latency_from_send, &b.latency_from_send)?;
    a.generator.threads = a
        .generator
        .threads
        .checked_add(b.generator.threads)
        .ok_or_else(|| over("generator threads"))?;
    a.generator.cpus = a.generator.cpus.max(b.generator.cpus);
    a.generator.cpu_seconds += b.generator.cpu_seconds;
    if !a.generator.cpu_seconds.is_finite() {
        return Err(over("generator CPU seconds"));
    }
    a.generator.utilization = a.generator.utilization.max(b.generator.utilization);
    a.generator.runqueue_wait_s = match (a.generator.runqueue_wait_s, b.generator.runqueue_wait_s) {
        (Some(x), Some(y)) => Some(x + y),
        _ => None,
    };
    a.late_start_s = match (a.late_start_s, b.late_start_s) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, y) => x.or(y),
    };
    a.steal = match (a.steal, b.steal) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, y) => x.or(y),
    };
    // One server's CPU: kept when a single process sampled it.
    a.server_cpu_seconds = match (a.server_cpu_seconds, b.server_cpu_seconds) {
        (Some(x), None) | (None, Some(x)) => Some(x),
        _ => None,
    };
    a.server_runqueue_wait_s = match (a.server_runqueue_wait_s, b.server_runqueue_wait_s) {
        (Some(x), None) | (None, Some(x)) => Some(x),
        _ => None,
    };
    a.server_cpus = match (a.server_cpus, b.server_cpus) {
        (Some(x), None) | (None, Some(x)) => Some(x),
        _ => None,
    };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capacity::result::tests::halves;

    #[test]
    fn a_valid_result_validates_and_merges() {
        let (a, b) = halves();
        assert_eq!(a.outcome, Outcome::Capacity, "{}", a.message);
        assert_eq!(a.validate(), Ok(()));
        let a_capacity = a.capacity_per_s;
        let m = merge(&[a, b]).unwrap();
        assert_eq!(m.validate(), Ok(()));
        assert_eq!(m.machines, 2);
        assert_eq!(m.rate_share.as_deref(), Some("1/2,2/2"));
        assert_eq!(m.steps[0].attempted, 400);
        assert_eq!(m.steps[0].share, 1.0);
        // The same steps, merged: the same estimate.
        assert_eq!(m.capacity_per_s, a_capacity);
    }

    /// Counts that would wrap are refused, never wrapped (u64::MAX + u64::MAX was
    /// 18446744073709551614; 2 × u32::MAX machines 4294967294).
    #[test]
    fn merge_refuses_sums_a_count_cannot_hold() {
        let (a, b) = halves();
        let big = |r: &CapacityResult, f: fn(&mut Step)| {
            let mut r = r.clone();
            r.steps.iter_mut().for_each(f);
            r
        };
        let max = |s: &mut Step| {
            s.attempted = u64::MAX;
            s.completed = u64::MAX;
        };
        let e = merge(&[big(&a, max), big(&b, max)]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the merged requests attempted would be more than a count holds (adding result 2)"
        );
        assert_eq!(
            crate::error::Classify::class(&e),
            crate::error::ErrorClass::Input
        );
        let many = |r: &CapacityResult| {
            let mut r = big(r, |s| s.machines = u32::MAX);
            r.machines = u32::MAX;
            r
        };
        let e = merge(&[many(&a), many(&b)]).unwrap_err();
        assert!(
            e.to_string().contains("merged machines would be more"),
            "{e}"
        );
        let threads = |s: &mut Step| s.generator.threads = usize::MAX;
        let e = merge(&[big(&a, threads), big(&b, threads)]).unwrap_err();
        assert!(e.to_string().contains("generator threads"), "{e}");
        let cpu = |s: &mut Step| s.generator.cpu_seconds = f64::MAX;
        let e = merge(&[big(&a, cpu), big(&b, cpu)]).unwrap_err();
        assert!(e.to_string().contains("generator CPU seconds"), "{e}");
    }
}
