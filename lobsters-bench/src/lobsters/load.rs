//! Open-loop load: Poisson arrivals at a target rate, spread over N
//! connections with a cap on requests in flight. Latency is the sojourn
//! time from each request's *scheduled* arrival, so queueing inside the
//! harness (a slow server) counts against the server.

use super::pages::{execute, page_mix, Page, Trace, World};
use super::prime::{EPOCH_START, PRIMED_SPAN_SECS};
use super::Variant;
use crate::cpu::{CpuMeter, CpuUsage};
use crate::db::connect;
use crate::dist::exp_interarrival;
use crate::stats::{round3, Latencies};
use crate::windows::{WindowRecorder, WindowSummary};
use anyhow::Result;
use mysql_async::Opts;
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, Mutex, OwnedSemaphorePermit, Semaphore};

/// How requests are generated and sent.
#[derive(Debug, Clone)]
pub struct LoadConfig {
    pub opts: Opts,
    pub variant: Variant,
    pub connections: usize,
    pub max_in_flight: usize,
    pub runtime: Duration,
    pub warmup: Duration,
    pub logged_in_fraction: f64,
    pub seed: u64,
    /// CPU of the server (when visible) and of this process, measured over
    /// each run's measured interval.
    pub cpu: CpuMeter,
}

/// How long requests still queued at the end of a run may take to finish
/// before the run gives up on them.
const GRACE: Duration = Duration::from_secs(10);

/// One page's results in a run.
#[derive(Debug, Clone, Default)]
pub struct PageStats {
    pub latencies: Latencies,
    pub errors: u64,
}

/// Outcome of one run at one target rate.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    pub target: f64,
    /// Arrivals scheduled inside the measurement window, per second (the
    /// target plus Poisson noise).
    pub offered: f64,
    /// Pages completed inside the measurement window, per second.
    pub achieved: f64,
    /// Pages completed inside the measurement window.
    pub completed_in_window: u64,
    /// When the run (its warm-up) started.
    pub started: Instant,
    /// Latency and rate per 10 s window, warm-up included.
    pub windows: Arc<WindowRecorder>,
    /// CPU spent during the measurement window.
    pub cpu: CpuUsage,
    pub pages: BTreeMap<Page, PageStats>,
    pub all: Latencies,
    pub errors: u64,
    /// Measured requests never issued or never completed (overload).
    pub incomplete: u64,
    pub first_error: Option<String>,
}

impl RunOutcome {
    /// Whether this rate held: p95 within the SLO, at least 95% of the
    /// offered load achieved (offered rather than target, so Poisson noise in
    /// short runs is not mistaken for overload), and at most 1% of requests
    /// failed or unfinished.
    pub fn held(&self, slo_p95_ms: f64) -> bool {
        let n = self.all.count() + self.incomplete;
        let bad = self.errors + self.incomplete;
        self.all.count() > 0
            && self.all.quantile_ms(0.95) <= slo_p95_ms
            && self.achieved >= 0.95 * self.offered
            && (bad as f64) <= 0.01 * n as f64
    }

    /// This run's windows, timed from `origin` (the first run's start).
    pub fn window_summaries(&self, origin: Instant, run: usize) -> Vec<WindowSummary> {
        self.windows.summaries(origin, run, Some(self.target))
    }

    /// JSON row for `runs`.
    pub fn summary(&self, slo_p95_ms: f64) -> RunSummary {
        let s = self.all.summary();
        RunSummary {
            target_pages_per_s: round3(self.target),
            offered_pages_per_s: round3(self.offered),
            achieved_pages_per_s: round3(self.achieved),
            p50_ms: s.p50_ms,
            p95_ms: s.p95_ms,
            p99_ms: s.p99_ms,
            completed: s.count,
            errors: self.errors,
            incomplete: self.incomplete,
            held: self.held(slo_p95_ms),
            first_error: self.first_error.clone(),
            server_cpu_ms_per_page: self.cpu.server_ms_per(self.completed_in_window),
            client_cpu_ms_per_page: self.cpu.client_ms_per(self.completed_in_window),
        }
    }
}

/// One run in the JSON report.
#[derive(Debug, Clone, Serialize)]
pub struct RunSummary {
    pub target_pages_per_s: f64,
    pub offered_pages_per_s: f64,
    pub achieved_pages_per_s: f64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub completed: u64,
    pub errors: u64,
    pub incomplete: u64,
    pub held: bool,
    pub first_error: Option<String>,
    /// Server CPU milliseconds per page completed in the measurement
    /// window (null when the server's CPU is not visible).
    pub server_cpu_ms_per_page: Option<f64>,
    /// The load generator's own CPU milliseconds per page.
    pub client_cpu_ms_per_page: Option<f64>,
}

struct Job {
    req: super::pages::Request,
    scheduled: Instant,
    measured: bool,
    _permit: OwnedSemaphorePermit,
}

#[derive(Default)]
struct WorkerTally {
    pages: BTreeMap<Page, PageStats>,
    all: Latencies,
    completed_in_window: u64,
    errors: u64,
    first_error: Option<String>,
}

/// Runs the page mix open-loop at `rate` pages/s for warmup + runtime.
pub async fn run_at(
    cfg: &LoadConfig,
    world: Arc<World>,
    rate: f64,
    run_index: u64,
) -> Result<RunOutcome> {
    let mut conns = Vec::with_capacity(cfg.connections);
    for _ in 0..cfg.connections.max(1) {
        conns.push(connect(&cfg.opts).await?);
    }
    let (tx, rx) = mpsc::unbounded_channel::<Job>();
    let rx = Arc::new(Mutex::new(rx));
    let sem = Arc::new(Semaphore::new(cfg.max_in_flight.max(1)));
    let start = Instant::now();
    let window_start = start + cfg.warmup;
    let end = window_start + cfg.runtime;
    let hard_stop = end + GRACE;
    let windows = Arc::new(WindowRecorder::new(start, cfg.warmup, cfg.runtime));
    let cpu = tokio::spawn({
        let meter = cfg.cpu.clone();
        async move { meter.measure_between(window_start, end).await }
    });

    let mut workers = Vec::new();
    for mut conn in conns {
        let rx = Arc::clone(&rx);
        let world = Arc::clone(&world);
        let windows = Arc::clone(&windows);
        let variant = cfg.variant;
        workers.push(tokio::spawn(async move {
            let mut t = WorkerTally::default();
            loop {
                let job = { rx.lock().await.recv().await };
                let Some(job) = job else { break };
                if Instant::now() >= hard_stop {
                    continue;
                }
                let res = execute(&mut conn, variant, &world, &job.req, &mut Trace::off()).await;
                let done = Instant::now();
                let page = job.req.page;
                let entry = t.pages.entry(page).or_default();
                if let Err(e) = res {
                    windows.error(done);
                    t.errors += u64::from(job.measured);
                    entry.errors += u64::from(job.measured);
                    if t.first_error.is_none() {
                        t.first_error = Some(format!("{}: {e:#}", page.name()));
                    }
                    continue;
                }
                if done >= window_start && done <= end {
                    t.completed_in_window += 1;
                }
                windows.record(done, done - job.scheduled);
                if job.measured {
                    let lat = done - job.scheduled;
                    entry.latencies.record(lat);
                    t.all.record(lat);
                }
            }
            let _ = conn.disconnect().await;
            t
        }));
    }

    // Generator: Poisson arrivals; waits for a slot when too many are in
    // flight (the wait counts in the latency of that request).
    let mix = page_mix();
    // The seed fixes the request mix; the wall clock is mixed in so that a
    // second invocation against the same primed database does not replay the
    // same new story/comment short ids (they are UNIQUE: replays got 1062).
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mut rng =
        StdRng::seed_from_u64(cfg.seed ^ run_index.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ nonce);
    let mut offset = 0.0f64;
    let total = (cfg.warmup + cfg.runtime).as_secs_f64();
    let mut issued_measured = 0u64;
    let mut skipped_measured = 0u64;
    loop {
        offset += exp_interarrival(&mut rng, rate);
        if offset >= total {
            break;
        }
        let scheduled = start + Duration::from_secs_f64(offset);
        let measured = scheduled >= window_start;
        if Instant::now() >= hard_stop {
            skipped_measured += u64::from(measured);
            continue;
        }
        tokio::time::sleep_until(scheduled.into()).await;
        let permit = tokio::select! {
            p = Arc::clone(&sem).acquire_owned() => p?,
            _ = tokio::time::sleep_until(hard_stop.into()) => {
                skipped_measured += u64::from(measured);
                continue;
            }
        };
        let page = mix.sample(&mut rng);
        let now_ts = EPOCH_START
            + PRIMED_SPAN_SECS
            + start.elapsed().as_secs() as i64
            + run_index as i64 * 3600;
        let req = world.request(&mut rng, page, cfg.logged_in_fraction, now_ts);
        issued_measured += u64::from(measured);
        if tx
            .send(Job {
                req,
                scheduled,
                measured,
                _permit: permit,
            })
            .is_err()
        {
            break;
        }
    }
    drop(tx);

    let mut out = RunOutcome {
        target: rate,
        offered: (issued_measured + skipped_measured) as f64 / cfg.runtime.as_secs_f64().max(1e-9),
        achieved: 0.0,
        completed_in_window: 0,
        started: start,
        windows,
        cpu: CpuUsage::default(),
        pages: BTreeMap::new(),
        all: Latencies::new(),
        errors: 0,
        incomplete: skipped_measured,
        first_error: None,
    };
    let mut completed = 0u64;
    let mut finished_measured = 0u64;
    for w in workers {
        let abort = w.abort_handle();
        let t = match tokio::time::timeout(
            hard_stop.saturating_duration_since(Instant::now()) + Duration::from_secs(1),
            w,
        )
        .await
        {
            Ok(joined) => joined?,
            Err(_) => {
                abort.abort();
                continue;
            }
        };
        completed += t.completed_in_window;
        out.errors += t.errors;
        out.all.merge(&t.all);
        finished_measured += t.all.count() + t.errors;
        if out.first_error.is_none() {
            out.first_error = t.first_error;
        }
        for (p, s) in t.pages {
            let e = out.pages.entry(p).or_default();
            e.latencies.merge(&s.latencies);
            e.errors += s.errors;
        }
    }
    out.incomplete += issued_measured.saturating_sub(finished_measured);
    out.achieved = completed as f64 / cfg.runtime.as_secs_f64().max(1e-9);
    out.completed_in_window = completed;
    out.cpu = cpu.await?;
    Ok(out)
}

/// Search settings for `--find-max`.
#[derive(Debug, Clone)]
pub struct FindMax {
    pub start_rate: f64,
    pub step_factor: f64,
    pub refine_steps: u32,
    pub max_rate: f64,
    pub slo_p95_ms: f64,
}

/// Raises the rate geometrically until a run misses the SLO (or achieves
/// under 95% of its target), then bisects (geometrically) between the last
/// rate that held and the first that did not. Returns every run, in order.
pub async fn find_max(
    cfg: &LoadConfig,
    world: Arc<World>,
    fm: &FindMax,
) -> Result<Vec<RunOutcome>> {
    let mut runs = Vec::new();
    let mut rate = fm.start_rate;
    let mut lo: Option<f64> = None;
    let mut hi: Option<f64> = None;
    let factor = fm.step_factor.max(1.05);
    let mut idx = 0u64;
    // Phase 1: find a bracket.
    for _ in 0..64 {
        let r = run_at(cfg, Arc::clone(&world), rate, idx).await?;
        idx += 1;
        let held = r.held(fm.slo_p95_ms);
        report_progress(&r, fm.slo_p95_ms);
        runs.push(r);
        if held {
            lo = Some(rate);
            if hi.is_some() || rate * factor > fm.max_rate {
                break;
            }
            rate *= factor;
        } else {
            hi = Some(rate);
            if lo.is_some() || rate / factor < 0.01 {
                break;
            }
            rate /= factor;
        }
    }
    // Phase 2: refine.
    if let (Some(mut l), Some(mut h)) = (lo, hi) {
        for _ in 0..fm.refine_steps {
            if h / l < 1.05 {
                break;
            }
            let mid = (l * h).sqrt();
            let r = run_at(cfg, Arc::clone(&world), mid, idx).await?;
            idx += 1;
            report_progress(&r, fm.slo_p95_ms);
            if r.held(fm.slo_p95_ms) {
                l = mid;
            } else {
                h = mid;
            }
            runs.push(r);
        }
    }
    Ok(runs)
}

/// One progress line per run on stderr.
pub fn report_progress(r: &RunOutcome, slo: f64) {
    eprintln!(
        "run: target {:.1}/s offered {:.1}/s achieved {:.1}/s p95 {:.2} ms p99 {:.2} ms errors {} incomplete {} -> {}",
        r.target,
        r.offered,
        r.achieved,
        r.all.quantile_ms(0.95),
        r.all.quantile_ms(0.99),
        r.errors,
        r.incomplete,
        if r.held(slo) { "held" } else { "missed" }
    );
    let cpu = r.summary(slo);
    eprint!(
        "{}",
        crate::cpu::cpu_line(
            "page",
            cpu.server_cpu_ms_per_page,
            cpu.client_cpu_ms_per_page
        )
    );
    if let Some(e) = &r.first_error {
        eprintln!("  first error: {e}");
    }
}
