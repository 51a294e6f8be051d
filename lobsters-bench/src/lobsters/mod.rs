//! The Lobsters workload: schema and data (`prime`), the pages and their
//! queries in two variants (`pages`), the open-loop driver and max-rate
//! search (`load`), and a cross-variant result check.

pub mod load;
pub mod pages;
pub mod prime;
pub mod schema;
mod variant;

use crate::cpu::{cpu_line, CpuArgs, CpuMeter};
use crate::db::{connect, ensure_database, parse_url, with_db};
use crate::stats::{round3, LatencySummary};
use crate::windows::WindowSummary;
use anyhow::{bail, Context, Result};
use load::{find_max, report_progress, run_at, FindMax, LoadConfig, RunOutcome, RunSummary};
use pages::{execute, page_mix, Page, Trace, World};
use prime::{EPOCH_START, PRIMED_SPAN_SECS};
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

pub use variant::Variant;

/// Pages per second that lobste.rs served in 2018, per unit of scale.
pub const PRODUCTION_RATE_PER_SCALE: f64 = 46.0 / 60.0;

/// `lobsters-bench lobsters` options.
#[derive(Debug, Clone, clap::Args)]
pub struct LobstersArgs {
    /// mysql://USER[:PW]@HOST:PORT/DB (the database is created if missing).
    #[arg(long)]
    pub url: String,
    /// Query variant.
    #[arg(long, value_enum, default_value = "original")]
    pub queries: Variant,
    /// Data and load scale (1.0: 6,000 users, 40,000 stories, 120,000 comments).
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,
    /// Drop, recreate and load the tables first.
    #[arg(long)]
    pub prime: bool,
    /// Seed for data and requests.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Measured seconds per run.
    #[arg(long, default_value_t = 30.0)]
    pub runtime: f64,
    /// Unmeasured seconds before each run's measurement.
    #[arg(long, default_value_t = 10.0)]
    pub warmup: f64,
    /// Target rate as a multiple of production (46 * scale / 60 pages/s).
    #[arg(long, default_value_t = 1.0)]
    pub rate_multiplier: f64,
    /// Target rate in pages/s (overrides --rate-multiplier).
    #[arg(long)]
    pub target_rate: Option<f64>,
    /// Client connections.
    #[arg(long, default_value_t = 16)]
    pub connections: usize,
    /// Cap on requests issued and not yet answered.
    #[arg(long, default_value_t = 512)]
    pub max_in_flight: usize,
    /// Share of read pages served to a logged-in user.
    #[arg(long, default_value_t = 0.5)]
    pub logged_in_fraction: f64,
    /// Search for the highest rate whose p95 stays within --slo-p95-ms.
    #[arg(long)]
    pub find_max: bool,
    /// Latency SLO for --find-max.
    #[arg(long, default_value_t = 100.0)]
    pub slo_p95_ms: f64,
    /// --find-max: rate multiplier between steps.
    #[arg(long, default_value_t = 2.0)]
    pub step_factor: f64,
    /// --find-max: bisection steps after bracketing.
    #[arg(long, default_value_t = 3)]
    pub refine_steps: u32,
    /// --find-max: never try more than this many pages/s.
    #[arg(long, default_value_t = 1_000_000.0)]
    pub max_rate: f64,
    /// Instead of a load run: prime DB_original and DB_natural (with
    /// --prime), replay the same requests against both and compare pages.
    #[arg(long)]
    pub check: bool,
    /// --check: number of requests to replay.
    #[arg(long, default_value_t = 500)]
    pub check_requests: usize,
    #[command(flatten)]
    pub cpu: CpuArgs,
    /// Write the report here as JSON.
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
}

/// Per-page results in the report.
#[derive(Debug, Clone, Serialize)]
pub struct PageReport {
    #[serde(flatten)]
    pub latency: LatencySummary,
    pub errors: u64,
}

/// The JSON report of `lobsters-bench lobsters`.
#[derive(Debug, Clone, Serialize)]
pub struct LobstersReport {
    pub workload: &'static str,
    pub queries: Variant,
    pub scale: f64,
    pub seed: u64,
    pub connections: usize,
    pub max_in_flight: usize,
    pub runtime_s: f64,
    pub warmup_s: f64,
    pub slo_p95_ms: f64,
    /// Highest achieved pages/s among runs that held the SLO (null if none).
    pub max_pages_per_s: Option<f64>,
    pub runs: Vec<RunSummary>,
    /// Per page, from the best run that held (or the last run if none did).
    pub pages: BTreeMap<&'static str, PageReport>,
    /// Server CPU ms per page in the measurement window of that same run
    /// (null when neither --server-pid nor --metrics-url was given).
    pub server_cpu_ms_per_page: Option<f64>,
    /// The load generator's own CPU ms per page, same run.
    pub client_cpu_ms_per_page: Option<f64>,
    /// Every run's 10 s windows (warm-up included), in time order.
    pub windows: Vec<WindowSummary>,
}

/// Builds the report from the runs.
pub fn report(args: &LobstersArgs, runs: &[RunOutcome]) -> LobstersReport {
    let best = runs
        .iter()
        .filter(|r| r.held(args.slo_p95_ms))
        .max_by(|a, b| a.achieved.total_cmp(&b.achieved));
    let shown = best.or(runs.last());
    let shown_summary = shown.map(|r| r.summary(args.slo_p95_ms));
    let origin = runs.first().map(|r| r.started);
    let windows = runs
        .iter()
        .enumerate()
        .flat_map(|(i, r)| r.window_summaries(origin.unwrap_or(r.started), i))
        .collect();
    let pages = shown
        .map(|r| {
            r.pages
                .iter()
                .map(|(p, s)| {
                    (
                        p.name(),
                        PageReport {
                            latency: s.latencies.summary(),
                            errors: s.errors,
                        },
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    LobstersReport {
        workload: "lobsters",
        queries: args.queries,
        scale: args.scale,
        seed: args.seed,
        connections: args.connections,
        max_in_flight: args.max_in_flight,
        runtime_s: args.runtime,
        warmup_s: args.warmup,
        slo_p95_ms: args.slo_p95_ms,
        max_pages_per_s: best.map(|r| round3(r.achieved)),
        runs: runs.iter().map(|r| r.summary(args.slo_p95_ms)).collect(),
        pages,
        server_cpu_ms_per_page: shown_summary
            .as_ref()
            .and_then(|r| r.server_cpu_ms_per_page),
        client_cpu_ms_per_page: shown_summary.and_then(|r| r.client_cpu_ms_per_page),
        windows,
    }
}

/// Human summary for stdout.
pub fn render(rep: &LobstersReport) -> String {
    let mut s = format!(
        "lobsters ({} queries, scale {}): max {} pages/s within p95 <= {} ms\n",
        rep.queries.name(),
        rep.scale,
        rep.max_pages_per_s
            .map_or("n/a".to_owned(), |v| format!("{v:.1}")),
        rep.slo_p95_ms
    );
    s.push_str(&cpu_line(
        "page",
        rep.server_cpu_ms_per_page,
        rep.client_cpu_ms_per_page,
    ));
    s.push_str("  target/s  achieved/s   p50 ms   p95 ms   p99 ms  errors  held\n");
    for r in &rep.runs {
        s.push_str(&format!(
            "  {:8.1}  {:10.1} {:8.2} {:8.2} {:8.2} {:7}  {}\n",
            r.target_pages_per_s,
            r.achieved_pages_per_s,
            r.p50_ms,
            r.p95_ms,
            r.p99_ms,
            r.errors,
            r.held
        ));
    }
    s.push_str("  page               count   p50 ms   p95 ms   p99 ms  errors\n");
    for (name, p) in &rep.pages {
        s.push_str(&format!(
            "  {name:<16} {:7} {:8.2} {:8.2} {:8.2} {:7}\n",
            p.latency.count, p.latency.p50_ms, p.latency.p95_ms, p.latency.p99_ms, p.errors
        ));
    }
    s
}

/// Entry point of `lobsters-bench lobsters`.
pub async fn main(args: LobstersArgs) -> Result<()> {
    if args.scale.is_nan() || args.scale <= 0.0 {
        bail!("--scale must be positive");
    }
    if args.check {
        let out = check_variants(
            &args.url,
            args.scale,
            args.seed,
            args.prime,
            CheckPlan::Mix(args.check_requests),
        )
        .await?;
        if out.mismatches.is_empty() {
            println!(
                "check: {} requests ({} result lines) returned identical pages in both variants",
                out.requests, out.lines_compared
            );
            return Ok(());
        }
        for m in out.mismatches.iter().take(5) {
            println!("{m}");
        }
        bail!(
            "check: {} of {} pages differ between variants",
            out.mismatches.len(),
            out.requests
        );
    }
    let (opts, db) = parse_url(&args.url)?;
    // A wrong --server-pid or --metrics-url fails before priming.
    let cpu = CpuMeter::from_args(&args.cpu);
    cpu.check().await?;
    ensure_database(&opts, &db, false).await?;
    let mut conn = connect(&opts).await?;
    if args.prime {
        prime::prime(&mut conn, args.queries, args.scale, args.seed).await?;
    }
    let world = Arc::new(World::load(&mut conn).await?);
    conn.disconnect().await?;
    let cfg = LoadConfig {
        opts,
        variant: args.queries,
        connections: args.connections,
        max_in_flight: args.max_in_flight,
        runtime: Duration::from_secs_f64(args.runtime.max(0.1)),
        warmup: Duration::from_secs_f64(args.warmup.max(0.0)),
        logged_in_fraction: args.logged_in_fraction,
        seed: args.seed,
        cpu,
    };
    let rate = args
        .target_rate
        .unwrap_or(PRODUCTION_RATE_PER_SCALE * args.scale * args.rate_multiplier);
    let runs = if args.find_max {
        let fm = FindMax {
            start_rate: rate,
            step_factor: args.step_factor,
            refine_steps: args.refine_steps,
            max_rate: args.max_rate,
            slo_p95_ms: args.slo_p95_ms,
        };
        find_max(&cfg, world, &fm).await?
    } else {
        let r = run_at(&cfg, world, rate, 0).await?;
        report_progress(&r, args.slo_p95_ms);
        vec![r]
    };
    let rep = report(&args, &runs);
    print!("{}", render(&rep));
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&rep)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// Which requests a check replays.
#[derive(Debug, Clone)]
pub enum CheckPlan {
    /// This many requests drawn from the production page mix.
    Mix(usize),
    /// Exactly these pages, in order (random stories, users, ...).
    Pages(Vec<Page>),
}

/// What a check found.
#[derive(Debug, Clone, Default)]
pub struct CheckOutcome {
    pub requests: usize,
    /// Canonical result lines compared (per variant).
    pub lines_compared: usize,
    /// One description per page whose results differ.
    pub mismatches: Vec<String>,
}

/// Primes (optionally) `DB_original` and `DB_natural` on the server in
/// `url` with the same data, replays the same requests sequentially against
/// both, and describes every page whose canonical rendering differs.
pub async fn check_variants(
    url: &str,
    scale: f64,
    seed: u64,
    do_prime: bool,
    plan: CheckPlan,
) -> Result<CheckOutcome> {
    let (opts, db) = parse_url(url)?;
    let mut conns = Vec::new();
    let mut worlds = Vec::new();
    for v in [Variant::Original, Variant::Natural] {
        let name = format!("{db}_{}", v.name());
        ensure_database(&opts, &name, do_prime).await?;
        let mut conn = connect(&with_db(&opts, Some(&name))).await?;
        if do_prime {
            prime::prime(&mut conn, v, scale, seed).await?;
        }
        worlds.push(World::load(&mut conn).await?);
        conns.push(conn);
    }
    if worlds[0].stories != worlds[1].stories || worlds[0].comments != worlds[1].comments {
        bail!("the two databases hold different stories or comments: prime them with --prime");
    }
    let world = &worlds[0];
    let mix = page_mix();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut out = CheckOutcome::default();
    let requests = match &plan {
        CheckPlan::Mix(n) => *n,
        CheckPlan::Pages(p) => p.len(),
    };
    for i in 0..requests {
        let page = match &plan {
            CheckPlan::Mix(_) => mix.sample(&mut rng),
            CheckPlan::Pages(p) => p[i],
        };
        let now_ts = EPOCH_START + PRIMED_SPAN_SECS + i as i64 * 60;
        let req = world.request(&mut rng, page, 0.5, now_ts);
        let mut traces = Vec::new();
        for (conn, v) in conns.iter_mut().zip([Variant::Original, Variant::Natural]) {
            let mut t = Trace::on();
            execute(conn, v, world, &req, &mut t)
                .await
                .with_context(|| format!("{} page in the {} variant", page.name(), v.name()))?;
            traces.push(t.lines());
        }
        out.requests += 1;
        out.lines_compared += traces[0].len();
        if traces[0] != traces[1] {
            let diff: Vec<String> = traces[0]
                .iter()
                .zip(traces[1].iter())
                .filter(|(a, b)| a != b)
                .take(3)
                .map(|(a, b)| format!("    original: {a}\n    natural:  {b}"))
                .collect();
            out.mismatches.push(format!(
                "request {i} ({}, {} vs {} lines):\n{}",
                page.name(),
                traces[0].len(),
                traces[1].len(),
                diff.join("\n")
            ));
        }
    }
    for c in conns {
        c.disconnect().await?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::CpuUsage;
    use crate::stats::Latencies;
    use crate::windows::WindowRecorder;
    use clap::Parser;
    use std::time::Instant;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: LobstersArgs,
    }

    fn outcome(target: f64, achieved: f64, ms: u64) -> RunOutcome {
        let mut lat = Latencies::new();
        for _ in 0..100 {
            lat.record(Duration::from_millis(ms));
        }
        let mut pages = BTreeMap::new();
        pages.insert(
            Page::Story,
            load::PageStats {
                latencies: lat.clone(),
                errors: 0,
            },
        );
        let started = Instant::now();
        let windows = Arc::new(WindowRecorder::new(
            started,
            Duration::from_secs(1),
            Duration::from_secs(1),
        ));
        windows.record(
            started + Duration::from_millis(1500),
            Duration::from_millis(ms),
        );
        RunOutcome {
            target,
            offered: target,
            achieved,
            completed_in_window: (achieved * 10.0) as u64,
            started,
            windows,
            cpu: CpuUsage {
                server_s: Some(achieved / 100.0),
                client_s: achieved / 1000.0,
            },
            pages,
            all: lat,
            errors: 0,
            incomplete: 0,
            first_error: None,
        }
    }

    #[test]
    fn json_report_has_the_contract_fields() {
        let cli = Cli::parse_from([
            "x",
            "--url",
            "mysql://root@127.0.0.1:3307/lobsters",
            "--queries",
            "natural",
            "--scale",
            "1",
            "--prime",
            "--runtime",
            "30",
            "--warmup",
            "10",
            "--find-max",
            "--slo-p95-ms",
            "100",
            "--json",
            "out.json",
        ]);
        let args = cli.args;
        assert_eq!(args.queries, Variant::Natural);
        assert!(args.find_max && args.prime);
        // 10/s held, 20/s held, 40/s missed the SLO.
        let runs = vec![
            outcome(10.0, 10.0, 5),
            outcome(20.0, 19.5, 20),
            outcome(40.0, 39.0, 500),
        ];
        let v: serde_json::Value = serde_json::to_value(report(&args, &runs)).unwrap();
        assert_eq!(v["workload"], "lobsters");
        assert_eq!(v["queries"], "natural");
        assert_eq!(v["max_pages_per_s"], 19.5);
        let r = v["runs"].as_array().unwrap();
        assert_eq!(r.len(), 3);
        for key in ["target_pages_per_s", "achieved_pages_per_s", "p95_ms"] {
            assert!(r[0][key].is_number(), "{key}");
        }
        assert_eq!(r[2]["held"], false);
        let story = &v["pages"]["story"];
        for key in ["count", "p50_ms", "p95_ms", "p99_ms"] {
            assert!(story[key].is_number(), "{key}");
        }
        assert_eq!(story["count"], 100);
        // HdrHistogram reports the top of the 3-significant-digit bucket.
        let p95 = story["p95_ms"].as_f64().unwrap();
        assert!((20.0..20.1).contains(&p95), "{p95}");
        // CPU of the best held run: 0.195 s over 195 pages.
        assert_eq!(v["server_cpu_ms_per_page"], 1.0);
        assert_eq!(v["client_cpu_ms_per_page"], 0.1);
        assert_eq!(r[0]["server_cpu_ms_per_page"], 1.0);
        // Two windows per run (1 s warm-up, 1 s measured), runs in order.
        let w = v["windows"].as_array().unwrap();
        assert_eq!(w.len(), 6);
        assert_eq!(w[1]["run"], 0);
        assert_eq!(w[1]["completed"], 1);
        assert_eq!(w[5]["run"], 2);
        assert_eq!(w[5]["target_per_s"], 40.0);
        assert_eq!(w[0]["warmup"], true);
        for key in ["start_s", "achieved_per_s", "p50_ms", "p95_ms", "p99_ms"] {
            assert!(w[1][key].is_number(), "{key}");
        }
        let text = render(&report(&args, &runs));
        assert!(text.contains("max 19.5 pages/s"), "{text}");
        assert!(text.contains("server 1.000 ms"), "{text}");
    }

    #[test]
    fn a_run_holds_only_within_slo_and_rate() {
        assert!(outcome(10.0, 9.6, 50).held(100.0));
        assert!(!outcome(10.0, 9.0, 50).held(100.0));
        // Judged against the offered load, not the nominal target.
        let mut noisy = outcome(10.0, 9.0, 50);
        noisy.offered = 9.2;
        assert!(noisy.held(100.0));
        assert!(!outcome(10.0, 10.0, 150).held(100.0));
        let mut failing = outcome(10.0, 10.0, 5);
        failing.errors = 5;
        assert!(!failing.held(100.0));
    }
}
