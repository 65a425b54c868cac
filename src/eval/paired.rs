//! Paired bootstrap intervals: how sure a difference between two methods is, from the
//! questions both answered.
//!
//! With 30 questions and a 0.5B answerer, F1 moves by several points between runs of the same
//! method; a difference between two rows means something only with its interval. The
//! difference is taken per question (method minus reference), the questions are resampled with
//! replacement, and the 2.5th and 97.5th percentiles of the resampled means bound the 95%
//! interval. The seed is fixed, so a report regenerates the same interval.
//!
//! Invariant: a pure function of the paired values; no question is paired unless both rows
//! scored it.

use serde::{Deserialize, Serialize};

/// Resamples per interval: enough for stable 2.5/97.5 percentiles at this sample size.
pub const RESAMPLES: usize = 4000;
/// The resampling seed.
pub const SEED: u64 = 0;

/// A mean paired difference with its 95% bootstrap interval.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// Pairs the difference is over.
    pub n: usize,
    /// Mean of (method - reference).
    pub mean: f64,
    pub low: f64,
    pub high: f64,
    /// Questions where the method scored higher, the same, lower.
    pub wins: usize,
    pub ties: usize,
    pub losses: usize,
}

impl Interval {
    /// Whether the interval excludes 0: the difference holds at the 95% level.
    pub fn excludes_zero(&self) -> bool {
        self.low > 0.0 || self.high < 0.0
    }
}

/// The paired bootstrap of `pairs` (method, reference); None without pairs.
pub fn interval(pairs: &[(f64, f64)]) -> Option<Interval> {
    interval_with(pairs, RESAMPLES, SEED)
}

/// [`interval`] with a chosen resample count and seed.
pub fn interval_with(pairs: &[(f64, f64)], resamples: usize, seed: u64) -> Option<Interval> {
    if pairs.is_empty() {
        return None;
    }
    let diffs: Vec<f64> = pairs.iter().map(|(m, r)| m - r).collect();
    let n = diffs.len();
    let mean = diffs.iter().sum::<f64>() / n as f64;
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut means: Vec<f64> = (0..resamples.max(1))
        .map(|_| (0..n).map(|_| diffs[rng.usize(..n)]).sum::<f64>() / n as f64)
        .collect();
    means.sort_by(f64::total_cmp);
    let at = |q: f64| means[((q * means.len() as f64) as usize).min(means.len() - 1)];
    const EPS: f64 = 1e-9;
    Some(Interval {
        n,
        mean,
        low: at(0.025),
        high: at(0.975),
        wins: diffs.iter().filter(|d| **d > EPS).count(),
        ties: diffs.iter().filter(|d| d.abs() <= EPS).count(),
        losses: diffs.iter().filter(|d| **d < -EPS).count(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_constant_difference_has_a_point_interval() {
        let pairs: Vec<(f64, f64)> = (0..10).map(|i| (i as f64 + 5.0, i as f64)).collect();
        let iv = interval(&pairs).unwrap();
        assert_eq!((iv.n, iv.wins, iv.ties, iv.losses), (10, 10, 0, 0));
        assert!((iv.mean - 5.0).abs() < 1e-12);
        assert!((iv.low - 5.0).abs() < 1e-12 && (iv.high - 5.0).abs() < 1e-12);
        assert!(iv.excludes_zero());
    }

    #[test]
    fn a_mixed_difference_brackets_its_mean_and_can_include_zero() {
        // Method wins 3 by 1.0, loses 2 by 1.0, ties 5: mean 0.1, the interval spans 0.
        let mut pairs = vec![(1.0, 0.0); 3];
        pairs.extend(vec![(0.0, 1.0); 2]);
        pairs.extend(vec![(0.5, 0.5); 5]);
        let iv = interval(&pairs).unwrap();
        assert_eq!((iv.wins, iv.ties, iv.losses), (3, 5, 2));
        assert!((iv.mean - 0.1).abs() < 1e-12);
        assert!(iv.low < iv.mean && iv.mean < iv.high, "{iv:?}");
        assert!(!iv.excludes_zero(), "{iv:?}");
        // The same seed gives the same interval; nothing without pairs.
        assert_eq!(interval(&pairs), Some(iv));
        assert_eq!(interval(&[]), None);
    }
}
