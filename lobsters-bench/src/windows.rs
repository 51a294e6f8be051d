//! Latency and throughput over time: a run's warm-up and measured interval,
//! each cut into 10-second windows, with the p50/p95/p99 and the rate of
//! the requests that finished in each. A single figure per run hides a
//! cold start or a stall; the windows (and the chart drawn from them) show
//! it.

use crate::stats::{round3, Latencies};
use serde::{Deserialize, Serialize};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Length of a window.
pub const WINDOW: Duration = Duration::from_secs(10);

/// One window's span.
#[derive(Debug, Clone, Copy)]
struct Span {
    from: Instant,
    to: Instant,
    warmup: bool,
}

#[derive(Debug, Default)]
struct Tally {
    latencies: Latencies,
    errors: u64,
}

/// Collects completions into the windows of one run; shared by the run's
/// connections (one short lock per completed request).
#[derive(Debug)]
pub struct WindowRecorder {
    spans: Vec<Span>,
    tallies: Mutex<Vec<Tally>>,
}

/// One window in the JSON report.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WindowSummary {
    /// Index of the run (rate step) within the invocation.
    pub run: usize,
    /// The run's offered rate (pages/s; null for the closed-loop vote).
    pub target_per_s: Option<f64>,
    /// Seconds from the start of the invocation's first run.
    pub start_s: f64,
    pub duration_s: f64,
    /// Inside the unmeasured warm-up.
    pub warmup: bool,
    /// Requests that finished in the window.
    pub completed: u64,
    /// Completed requests per second (pages/s or ops/s).
    pub achieved_per_s: f64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub errors: u64,
}

impl WindowRecorder {
    /// Windows for a run starting at `start`: the warm-up, then the measured
    /// `runtime`, each cut into [`WINDOW`]-long pieces (the last piece of
    /// each may be shorter).
    pub fn new(start: Instant, warmup: Duration, runtime: Duration) -> WindowRecorder {
        let mut spans = cut(start, warmup, true);
        spans.extend(cut(start + warmup, runtime, false));
        let tallies = Mutex::new(spans.iter().map(|_| Tally::default()).collect());
        WindowRecorder { spans, tallies }
    }

    /// Records a request that finished at `done` after `latency`; ignored
    /// outside every window.
    pub fn record(&self, done: Instant, latency: Duration) {
        self.with_window(done, |t| t.latencies.record(latency));
    }

    /// Records a failed request that finished at `done`.
    pub fn error(&self, done: Instant) {
        self.with_window(done, |t| t.errors += 1);
    }

    fn with_window(&self, done: Instant, f: impl FnOnce(&mut Tally)) {
        let i = self.spans.partition_point(|s| s.to <= done);
        if self.spans.get(i).is_some_and(|s| s.from <= done) {
            // A poisoned lock only means another connection panicked
            // mid-record; its counts are still usable.
            let mut tallies = self.tallies.lock().unwrap_or_else(|e| e.into_inner());
            f(&mut tallies[i]);
        }
    }

    /// The windows' summaries, timed from `origin`.
    pub fn summaries(
        &self,
        origin: Instant,
        run: usize,
        target_per_s: Option<f64>,
    ) -> Vec<WindowSummary> {
        let tallies = self.tallies.lock().unwrap_or_else(|e| e.into_inner());
        self.spans
            .iter()
            .zip(tallies.iter())
            .map(|(span, t)| {
                let duration = (span.to - span.from).as_secs_f64();
                let s = t.latencies.summary();
                WindowSummary {
                    run,
                    target_per_s: target_per_s.map(round3),
                    start_s: round3(span.from.saturating_duration_since(origin).as_secs_f64()),
                    duration_s: round3(duration),
                    warmup: span.warmup,
                    completed: s.count,
                    achieved_per_s: round3(s.count as f64 / duration.max(1e-9)),
                    p50_ms: s.p50_ms,
                    p95_ms: s.p95_ms,
                    p99_ms: s.p99_ms,
                    errors: t.errors,
                }
            })
            .collect()
    }
}

/// `length` from `from`, cut into windows of at most [`WINDOW`].
fn cut(from: Instant, length: Duration, warmup: bool) -> Vec<Span> {
    let end = from + length;
    let mut spans = Vec::new();
    let mut at = from;
    while at < end {
        let to = (at + WINDOW).min(end);
        spans.push(Span {
            from: at,
            to,
            warmup,
        });
        at = to;
    }
    spans
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warmup_and_measured_windows_are_cut_separately() {
        let start = Instant::now();
        let w = WindowRecorder::new(start, Duration::from_secs(3), Duration::from_secs(25));
        // 0-3 warm-up, then 3-13, 13-23, 23-28.
        w.record(start + Duration::from_secs(1), Duration::from_millis(500));
        for _ in 0..20 {
            w.record(start + Duration::from_secs(4), Duration::from_millis(2));
        }
        w.record(start + Duration::from_secs(14), Duration::from_millis(7));
        w.error(start + Duration::from_secs(14));
        w.record(start + Duration::from_secs(60), Duration::from_millis(1));
        let s = w.summaries(start, 2, Some(200.0));
        let spans: Vec<(f64, f64, bool)> = s
            .iter()
            .map(|w| (w.start_s, w.duration_s, w.warmup))
            .collect();
        assert_eq!(
            spans,
            [
                (0.0, 3.0, true),
                (3.0, 10.0, false),
                (13.0, 10.0, false),
                (23.0, 5.0, false)
            ]
        );
        assert_eq!(s[0].completed, 1);
        assert!((s[0].p95_ms - 500.0).abs() < 1.0);
        assert_eq!(s[1].completed, 20);
        assert_eq!(s[1].achieved_per_s, 2.0);
        assert_eq!((s[2].completed, s[2].errors), (1, 1));
        assert_eq!(s[3].completed, 0);
        assert!(s
            .iter()
            .all(|w| w.run == 2 && w.target_per_s == Some(200.0)));
    }
}
