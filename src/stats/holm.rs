//! Multiple comparisons: Holm's step-down adjustment of a family of p-values, so that the
//! chance of any false positive among them stays at most α however many are compared.

/// Holm's step-down adjustment of `p` (each adjusted p is at least its own and at most 1;
/// the order of `p` is kept).
pub fn holm(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| p[a].total_cmp(&p[b]));
    let mut out = vec![1.0; m];
    let mut running: f64 = 0.0;
    for (rank, &i) in order.iter().enumerate() {
        let adjusted = ((m - rank) as f64 * p[i]).min(1.0);
        running = running.max(adjusted);
        out[i] = running;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holm_adjusts_step_down_and_keeps_the_order() {
        let adj = holm(&[0.01, 0.04, 0.03, 0.005]);
        // Sorted: 0.005×4 = 0.02, 0.01×3 = 0.03, 0.03×2 = 0.06, 0.04×1 → max so far 0.06.
        let want = [0.03, 0.06, 0.06, 0.02];
        for (a, w) in adj.iter().zip(want) {
            assert!((a - w).abs() < 1e-12, "{adj:?}");
        }
        assert!(holm(&[]).is_empty());
        assert_eq!(holm(&[0.9, 0.8]), vec![1.0, 1.0]);
    }
}
