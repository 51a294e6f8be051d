//! Latency histograms (microseconds, HdrHistogram) and their JSON summaries.

use hdrhistogram::Histogram;
use serde::Serialize;
use std::time::Duration;

/// Latency recorder: microsecond resolution, 3 significant digits, values
/// above one hour saturate.
#[derive(Debug, Clone)]
pub struct Latencies {
    hist: Histogram<u64>,
}

impl Default for Latencies {
    fn default() -> Self {
        Latencies::new()
    }
}

impl Latencies {
    /// An empty recorder.
    pub fn new() -> Latencies {
        // Bounds are constants that hdrhistogram accepts (low >= 1,
        // high >= 2 * low, sigfig <= 5), so this cannot fail.
        let hist = Histogram::new_with_bounds(1, 3_600_000_000, 3)
            .expect("constant histogram bounds are valid");
        Latencies { hist }
    }

    /// Records one latency.
    pub fn record(&mut self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX).max(1);
        self.hist.saturating_record(us);
    }

    /// Adds every sample of `other`.
    pub fn merge(&mut self, other: &Latencies) {
        // Same bounds on both sides, so `add` cannot fail; saturate anyway.
        if self.hist.add(&other.hist).is_err() {
            for v in other.hist.iter_recorded() {
                self.hist
                    .saturating_record_n(v.value_iterated_to(), v.count_at_value());
            }
        }
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    /// The `q` quantile (0..=1) in milliseconds; 0 when empty.
    pub fn quantile_ms(&self, q: f64) -> f64 {
        if self.hist.is_empty() {
            0.0
        } else {
            self.hist.value_at_quantile(q) as f64 / 1000.0
        }
    }

    /// Mean in milliseconds.
    pub fn mean_ms(&self) -> f64 {
        self.hist.mean() / 1000.0
    }

    /// Count and quantiles for reports.
    pub fn summary(&self) -> LatencySummary {
        LatencySummary {
            count: self.count(),
            p50_ms: round3(self.quantile_ms(0.50)),
            p95_ms: round3(self.quantile_ms(0.95)),
            p99_ms: round3(self.quantile_ms(0.99)),
            max_ms: round3(self.quantile_ms(1.0)),
            mean_ms: round3(self.mean_ms()),
        }
    }
}

/// Count and latency quantiles of one kind of request.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LatencySummary {
    /// Completed requests measured.
    pub count: u64,
    /// Median latency.
    pub p50_ms: f64,
    /// 95th percentile.
    pub p95_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Largest sample.
    pub max_ms: f64,
    /// Mean.
    pub mean_ms: f64,
}

/// Rounds to three decimals so reports stay readable.
pub fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_and_merge() {
        let mut a = Latencies::new();
        for ms in 1..=100 {
            a.record(Duration::from_millis(ms));
        }
        let mut b = Latencies::new();
        b.record(Duration::from_secs(10));
        a.merge(&b);
        let s = a.summary();
        assert_eq!(s.count, 101);
        assert!((s.p50_ms - 51.0).abs() < 0.1, "{s:?}");
        assert!((s.p95_ms - 96.0).abs() < 0.1, "{s:?}");
        assert!((s.max_ms - 10_000.0).abs() < 10.0, "{s:?}");
        assert_eq!(Latencies::new().summary().p99_ms, 0.0);
    }
}
