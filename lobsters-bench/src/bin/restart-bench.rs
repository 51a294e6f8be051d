//! `restart-bench`: what view snapshots buy and cost, measured on a real
//! `ladle` process it starts and stops itself.
//!
//! 1. Loads the vote schema (`--articles`, `--votes`), warms the fully
//!    materialized `SELECT article_id, COUNT(*) FROM Vote GROUP BY
//!    article_id` and the vote read (a parameterized view) for `--keys`
//!    articles, and takes a snapshot (`SNAPSHOT VIEWS`).
//! 2. Restart time: from process start to the first correct answer of the
//!    grouped query, and to correct answers for every key, cold (snapshot
//!    directory removed) and warm (from the snapshot), `--rounds` times each,
//!    alternating.
//!    (One unmeasured restart first, kept up `--settle-seconds`: the first
//!    open after the load replays RocksDB's write-ahead log and starts
//!    compactions of the loaded tables, which have nothing to do with
//!    snapshots; cut short by each stop, a compaction would otherwise rerun
//!    at every measured start and compete with it for the CPU.) `/health` is
//!    polled every 5 ms.
//! 3. Durable write throughput: vote inserts from `--connections`
//!    connections for `--write-seconds`, with `--snapshot-interval 10s` and
//!    with `0`, alternating (A B B A) in the same run, each phase over warm
//!    views (the grouped query and every key read first).
//!    3b. The same comparison inside one server (`--windows` windows of
//!    `--window-seconds`, writers running throughout, A B B A, each A
//!    window starting with `SNAPSHOT VIEWS`): no restarts between the two
//!    sides, so start-up and phase order do not weigh on one of them.
//! 4. A large state: also warms `SELECT user, COUNT(*) FROM Vote GROUP BY
//!    user` (one group per distinct voter, about 0.63 x `--votes`), takes a
//!    snapshot and restarts from it: snapshot size and time, recovery time.
//!
//! Prints progress on stderr and one JSON report on stdout. Speaks only the
//! MySQL protocol and HTTP `/health` to the server, like the other
//! benchmarks of this crate.

// The harnesses' one way to start `ladle` (this crate depends on no Ladle
// crate, so the plain-std file is compiled in here; not all of it is used).
#[allow(dead_code)]
#[path = "../../../e2e/src/ports.rs"]
mod ports;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Parser;
use lobsters_bench::db::get_i64;
use lobsters_bench::lobsters::Variant;
use lobsters_bench::vote::{prime, READ_SQL, WRITE_SQL};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder, Row};
use rand::{Rng, SeedableRng};
use serde::Serialize;

const GROUPED_SQL: &str = "SELECT article_id, COUNT(*) FROM Vote GROUP BY article_id";
/// A view with about as many groups as there are votes (phase 4).
const BY_USER_SQL: &str = "SELECT user, COUNT(*) FROM Vote GROUP BY user";

#[derive(Parser, Debug)]
#[command(
    name = "restart-bench",
    about = "Ladle warm vs cold restart and snapshot overhead"
)]
struct Args {
    /// The ladle binary (default: `ladle` next to this program).
    #[arg(long)]
    ladle: Option<PathBuf>,
    /// Data directory (default: a new directory under the system temp dir;
    /// removed at the end unless --keep).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    #[arg(long)]
    keep: bool,
    #[arg(long, default_value_t = 100_000)]
    articles: u64,
    #[arg(long, default_value_t = 1_000_000)]
    votes: u64,
    /// Articles read through the parameterized view before the restart.
    #[arg(long, default_value_t = 10_000)]
    keys: u64,
    /// Cold and warm restarts measured, each.
    #[arg(long, default_value_t = 3)]
    rounds: u32,
    /// Seconds of writes per throughput phase (0 skips the write phases).
    #[arg(long, default_value_t = 30)]
    write_seconds: u64,
    #[arg(long, default_value_t = 8)]
    connections: usize,
    /// --snapshot-interval of the "with snapshots" write phases.
    #[arg(long, default_value = "10s")]
    snapshot_interval: String,
    /// Pairs of write phases, each pair A B B A (A with snapshots).
    #[arg(long, default_value_t = 1)]
    write_pairs: u32,
    /// Seconds the unmeasured restart before phase 2 stays up.
    #[arg(long, default_value_t = 3.0)]
    settle_seconds: f64,
    /// Skip the restart measurements (phase 2).
    #[arg(long)]
    skip_restarts: bool,
    /// Restart after kill -9 instead of a clean stop: the server is killed
    /// right after the snapshot, and every measured restart (warm and cold)
    /// starts from a copy of that crashed data directory, so each one
    /// replays what a crash leaves (RocksDB's write-ahead log, the change
    /// log since the snapshot).
    #[arg(long)]
    crash: bool,
    /// Skip the large-state measurement (phase 4).
    #[arg(long)]
    skip_large_state: bool,
    /// Windows of the in-process write comparison (phase 3b; 0 skips it).
    #[arg(long, default_value_t = 8)]
    windows: u32,
    /// Seconds per window of phase 3b.
    #[arg(long, default_value_t = 10)]
    window_seconds: u64,
}

#[derive(Serialize, Default)]
struct Restart {
    mode: &'static str,
    /// Process start to /health 200.
    ready_s: f64,
    /// Process start to a correct full answer of the grouped query.
    first_answer_s: f64,
    /// The same query once more, right after: the part of `first_answer_s`
    /// that is sending 100k rows rather than recovering.
    steady_read_s: f64,
    /// Process start to correct answers for every key of the vote read.
    all_keys_s: f64,
}

#[derive(Serialize)]
struct WritePhase {
    snapshot_interval: String,
    seconds: f64,
    writes: u64,
    writes_per_s: f64,
    snapshots_taken: f64,
}

/// Phase 3b: one window of writes in one server, with or without a
/// snapshot taken at its start.
#[derive(Serialize)]
struct WriteWindow {
    snapshot: bool,
    seconds: f64,
    writes: u64,
    writes_per_s: f64,
}

/// Phase 4: a snapshot of a large state and a restart from it.
#[derive(Serialize, Default)]
struct LargeState {
    groups: u64,
    snapshot_nodes_written: u64,
    snapshot_bytes_written: u64,
    snapshot_total_ms: u64,
    snapshot_capture_ms: u64,
    snapshot_dir_bytes: u64,
    restart_ready_s: f64,
    recovery_s: f64,
    recovery_rows: f64,
    recovery_bytes: f64,
    first_answer_s: f64,
}

#[derive(Serialize)]
struct Report {
    /// How the server went down before each measured restart: "clean stop"
    /// or "kill -9".
    restart_after: &'static str,
    articles: u64,
    votes: u64,
    keys: u64,
    load_s: f64,
    snapshot_epoch: u64,
    snapshot_bytes_written: u64,
    snapshot_total_ms: u64,
    snapshot_capture_ms: u64,
    snapshot_dir_bytes: u64,
    restarts: Vec<Restart>,
    cold_first_answer_s: f64,
    warm_first_answer_s: f64,
    first_answer_speedup: f64,
    cold_all_keys_s: f64,
    warm_all_keys_s: f64,
    all_keys_speedup: f64,
    writes: Vec<WritePhase>,
    write_ratio_with_snapshots: Option<f64>,
    windows: Vec<WriteWindow>,
    window_ratio_with_snapshots: Option<f64>,
    large_state: LargeState,
}

fn http_get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}

/// One `ladle` process.
struct Ladle {
    child: Child,
    port: u16,
    metrics_port: u16,
    started: Instant,
}

impl Ladle {
    /// Starts `bin` over `dir` on ports it picks itself ([`ports`]),
    /// returning once it listens (before recovery).
    fn spawn(bin: &Path, dir: &Path, interval: &str) -> Result<Ladle> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.with_extension("log"))?;
        let started = Instant::now();
        let mut cmd = Command::new(bin);
        let ports_file = ports::on_any_ports(&mut cmd, dir.with_extension("ports"));
        let mut child = cmd
            .arg("--data-dir")
            .arg(dir)
            .arg("--snapshot-interval")
            .arg(interval)
            .arg("--durability")
            .arg("sync")
            .arg("--memory-limit")
            .arg("4G")
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let bound = ports_file
            .wait(&mut child, Duration::from_secs(60))
            .map_err(anyhow::Error::msg)?;
        Ok(Ladle {
            child,
            port: bound.mysql,
            metrics_port: bound.metrics,
            started,
        })
    }

    fn opts(&self) -> Opts {
        OptsBuilder::default()
            .ip_or_hostname("127.0.0.1")
            .tcp_port(self.port)
            .user(Some("root"))
            .db_name(Some("bench"))
            .prefer_socket(false)
            .into()
    }

    /// Waits for /health 200; returns seconds since start.
    async fn ready(&mut self) -> Result<f64> {
        loop {
            if let Some(r) = http_get(self.metrics_port, "/health") {
                if r.starts_with("HTTP/1.1 200") {
                    return Ok(self.started.elapsed().as_secs_f64());
                }
            }
            if let Some(status) = self.child.try_wait()? {
                bail!("ladle exited during start-up: {status}");
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    fn metric(&self, name: &str) -> Option<f64> {
        let body = http_get(self.metrics_port, "/metrics")?;
        body.lines().find_map(|l| {
            let (n, v) = l.split_once(' ')?;
            (n == name).then(|| v.trim().parse().ok())?
        })
    }

    /// Waits until recovery has finished (a warm start serves before the
    /// interior state is installed); returns its duration in seconds.
    async fn recovered(&self) -> Result<f64> {
        let deadline = Instant::now() + Duration::from_secs(300);
        loop {
            match self.metric("ladle_recovery_seconds") {
                Some(s) if s > 0.0 => return Ok(s),
                _ if Instant::now() > deadline => bail!("recovery did not finish in 300 s"),
                _ => tokio::time::sleep(Duration::from_millis(5)).await,
            }
        }
    }

    /// kill -9: no drain, no final snapshot, no memtable flush.
    fn crash(mut self) -> Result<()> {
        self.child.kill()?;
        self.child.wait()?;
        Ok(())
    }

    fn stop(mut self) -> Result<()> {
        Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status()?;
        self.child.wait()?;
        Ok(())
    }
}

impl Drop for Ladle {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The reference answers recorded before the restarts.
struct Expected {
    grouped: HashMap<i64, i64>,
    keys: Vec<(i64, String)>,
}

async fn grouped(conn: &mut Conn) -> Result<HashMap<i64, i64>> {
    let rows: Vec<Row> = conn.query(GROUPED_SQL).await?;
    rows.iter()
        .map(|r| Ok((get_i64(r, 0)?, get_i64(r, 1)?)))
        .collect()
}

/// The vote read for every key, as (article, "title|votes") in key order.
async fn read_keys(conn: &mut Conn, keys: &[i64]) -> Result<Vec<(i64, String)>> {
    let stmt = conn.prep(READ_SQL).await?;
    let mut out = Vec::with_capacity(keys.len());
    for &k in keys {
        let rows: Vec<Row> = conn.exec(&stmt, (k,)).await?;
        let mut cells: Vec<String> = rows
            .iter()
            .map(|r| {
                let title: Option<String> = r.get::<Option<String>, _>(1).flatten();
                let votes: Option<i64> = r.get::<Option<i64>, _>(2).flatten();
                format!("{}|{:?}", title.unwrap_or_default(), votes)
            })
            .collect();
        cells.sort();
        out.push((k, cells.join(";")));
    }
    Ok(out)
}

fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// Copies directory `from` to `to` (which must not exist), recursively.
fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir(to).with_context(|| format!("creating {}", to.display()))?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let target = to.join(e.file_name());
        if e.file_type()?.is_dir() {
            copy_dir(&e.path(), &target)?;
        } else {
            std::fs::copy(e.path(), &target)?;
        }
    }
    Ok(())
}

async fn measure_restart(
    bin: &Path,
    dir: &Path,
    mode: &'static str,
    keys: &[i64],
    expected: &Expected,
) -> Result<Restart> {
    if mode == "cold" {
        let snaps = dir.join("snapshots");
        if snaps.exists() {
            std::fs::remove_dir_all(&snaps)?;
        }
    }
    let mut ladle = Ladle::spawn(bin, dir, "0")?;
    let ready_s = ladle.ready().await?;
    let mut conn = Conn::new(ladle.opts()).await?;
    let got = grouped(&mut conn).await?;
    let first_answer_s = ladle.started.elapsed().as_secs_f64();
    if got != expected.grouped {
        bail!("{mode} restart: the grouped query answered wrong");
    }
    let again = Instant::now();
    grouped(&mut conn).await?;
    let steady_read_s = again.elapsed().as_secs_f64();
    let got = read_keys(&mut conn, keys).await?;
    let all_keys_s = ladle.started.elapsed().as_secs_f64();
    if got != expected.keys {
        bail!("{mode} restart: the vote read answered wrong");
    }
    let epoch = ladle.metric("ladle_recovery_epoch").unwrap_or(-1.0);
    eprintln!(
        "{mode:>4} restart: ready {ready_s:.2}s, grouped answer {first_answer_s:.2}s \
         (steady read {steady_read_s:.2}s), {} keys {all_keys_s:.2}s (recovered epoch {epoch})",
        keys.len()
    );
    drop(conn);
    ladle.stop()?;
    Ok(Restart {
        mode,
        ready_s,
        first_answer_s,
        steady_read_s,
        all_keys_s,
    })
}

/// `--connections` connections inserting votes until stopped.
struct Writers {
    stop: Arc<AtomicBool>,
    writes: Arc<AtomicU64>,
    tasks: Vec<tokio::task::JoinHandle<Result<()>>>,
}

impl Writers {
    fn start(ladle: &Ladle, args: &Args) -> Writers {
        let stop = Arc::new(AtomicBool::new(false));
        let writes = Arc::new(AtomicU64::new(0));
        let mut tasks = Vec::new();
        for i in 0..args.connections {
            let opts = ladle.opts();
            let (stop, writes) = (stop.clone(), writes.clone());
            let articles = args.articles;
            tasks.push(tokio::spawn(async move {
                let mut conn = Conn::new(opts).await?;
                let stmt = conn.prep(WRITE_SQL).await?;
                let mut rng = rand::rngs::StdRng::seed_from_u64(i as u64 + 99);
                while !stop.load(Ordering::Relaxed) {
                    let a = rng.gen_range(1..=articles as i64);
                    conn.exec_drop(&stmt, (a, rng.gen_range(0..1_000_000i64)))
                        .await?;
                    writes.fetch_add(1, Ordering::Relaxed);
                }
                anyhow::Ok(())
            }));
        }
        Writers {
            stop,
            writes,
            tasks,
        }
    }

    /// Writes acknowledged so far.
    fn count(&self) -> u64 {
        self.writes.load(Ordering::Relaxed)
    }

    async fn stop(self) -> Result<()> {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.tasks {
            t.await??;
        }
        Ok(())
    }
}

/// Phase 3b: writers run throughout in one server started with
/// `--snapshot-interval 0`; windows alternate A B B A, each A window
/// starting with `SNAPSHOT VIEWS` (one epoch per window, as the interval
/// would take). No restarts in between, so start-up, compaction debt and
/// phase order weigh on both sides alike, unlike the phases of 3.
async fn write_windows(
    bin: &Path,
    dir: &Path,
    args: &Args,
    keys: &[i64],
) -> Result<Vec<WriteWindow>> {
    let mut ladle = Ladle::spawn(bin, dir, "0")?;
    ladle.ready().await?;
    let mut conn = Conn::new(ladle.opts()).await?;
    grouped(&mut conn).await?;
    read_keys(&mut conn, keys).await?;
    let writers = Writers::start(&ladle, args);
    // Let the writers connect and the first batches settle.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let length = Duration::from_secs(args.window_seconds.max(1));
    let mut windows = Vec::new();
    for i in 0..args.windows {
        let snapshot = matches!(i % 4, 0 | 3);
        let (started, before) = (Instant::now(), writers.count());
        if snapshot {
            snapshot_views(&mut conn).await?;
        }
        tokio::time::sleep_until((started + length).into()).await;
        let writes = writers.count() - before;
        let seconds = started.elapsed().as_secs_f64();
        eprintln!(
            "window {} ({}): {:.0} writes/s",
            i + 1,
            if snapshot { "snapshot" } else { "none" },
            writes as f64 / seconds
        );
        windows.push(WriteWindow {
            snapshot,
            seconds,
            writes,
            writes_per_s: writes as f64 / seconds,
        });
    }
    writers.stop().await?;
    drop(conn);
    ladle.stop()?;
    Ok(windows)
}

async fn write_phase(
    bin: &Path,
    dir: &Path,
    interval: &str,
    args: &Args,
    keys: &[i64],
) -> Result<WritePhase> {
    let mut ladle = Ladle::spawn(bin, dir, interval)?;
    ladle.ready().await?;
    // Warm views: snapshots have real state to save and writes real views
    // to maintain.
    let mut conn = Conn::new(ladle.opts()).await?;
    grouped(&mut conn).await?;
    read_keys(&mut conn, keys).await?;
    drop(conn);
    let before = ladle.metric("ladle_snapshots_total").unwrap_or(0.0);
    let writers = Writers::start(&ladle, args);
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(args.write_seconds)).await;
    let n = writers.count();
    let seconds = started.elapsed().as_secs_f64();
    writers.stop().await?;
    let snapshots_taken = ladle.metric("ladle_snapshots_total").unwrap_or(0.0) - before;
    let phase = WritePhase {
        snapshot_interval: interval.to_string(),
        seconds,
        writes: n,
        writes_per_s: n as f64 / seconds,
        snapshots_taken,
    };
    eprintln!(
        "writes with --snapshot-interval {interval}: {:.0}/s over {seconds:.1}s \
         ({snapshots_taken} snapshots)",
        phase.writes_per_s
    );
    ladle.stop()?;
    Ok(phase)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// `SNAPSHOT VIEWS`: (epoch, nodes_written, bytes_written, total_ms, capture_ms).
async fn snapshot_views(conn: &mut Conn) -> Result<(u64, u64, u64, u64, u64)> {
    let row: Row = conn
        .query_first("SNAPSHOT VIEWS")
        .await?
        .context("SNAPSHOT VIEWS returned no row")?;
    let field = |name: &str| -> Result<u64> {
        row.get_opt::<u64, _>(name)
            .and_then(|r| r.ok())
            .with_context(|| format!("SNAPSHOT VIEWS has no {name}"))
    };
    Ok((
        field("epoch")?,
        field("nodes_written")?,
        field("bytes_written")?,
        field("total_ms")?,
        field("capture_ms")?,
    ))
}

async fn large_state(bin: &Path, dir: &Path) -> Result<LargeState> {
    let mut ladle = Ladle::spawn(bin, dir, "0")?;
    ladle.ready().await?;
    let mut conn = Conn::new(ladle.opts()).await?;
    let rows: Vec<Row> = conn.query(BY_USER_SQL).await?;
    let groups = rows.len() as u64;
    let (_, nodes_written, bytes, total_ms, capture_ms) = snapshot_views(&mut conn).await?;
    let snapshot_dir_bytes = dir_bytes(&dir.join("snapshots"));
    eprintln!(
        "large state: {groups} more groups; snapshot wrote {nodes_written} nodes, {:.1} MB \
         in {total_ms} ms (capture {capture_ms} ms); snapshot directory {:.1} MB",
        bytes as f64 / 1e6,
        snapshot_dir_bytes as f64 / 1e6
    );
    drop(conn);
    ladle.stop()?;
    let mut ladle = Ladle::spawn(bin, dir, "0")?;
    let restart_ready_s = ladle.ready().await?;
    let mut conn = Conn::new(ladle.opts()).await?;
    let again: Vec<Row> = conn.query(BY_USER_SQL).await?;
    let first_answer_s = ladle.started.elapsed().as_secs_f64();
    if again.len() as u64 != groups {
        bail!(
            "large state: {} groups after the restart, {groups} before",
            again.len()
        );
    }
    let state = LargeState {
        groups,
        snapshot_nodes_written: nodes_written,
        snapshot_bytes_written: bytes,
        snapshot_total_ms: total_ms,
        snapshot_capture_ms: capture_ms,
        snapshot_dir_bytes,
        restart_ready_s,
        recovery_s: ladle.recovered().await?,
        recovery_rows: ladle.metric("ladle_recovery_rows").unwrap_or(f64::NAN),
        recovery_bytes: ladle.metric("ladle_recovery_bytes").unwrap_or(f64::NAN),
        first_answer_s,
    };
    eprintln!(
        "large state restart: ready {restart_ready_s:.2}s, by-user answer {first_answer_s:.2}s \
         (recovery done after {:.2}s, {} rows)",
        state.recovery_s, state.recovery_rows
    );
    drop(conn);
    ladle.stop()?;
    Ok(state)
}

async fn run(args: Args) -> Result<Report> {
    let bin = match &args.ladle {
        Some(b) => b.clone(),
        None => std::env::current_exe()?
            .parent()
            .context("no parent directory")?
            .join("ladle"),
    };
    let dir = match &args.data_dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("restart-bench-{}", std::process::id())),
    };
    if dir.exists() {
        bail!("{} exists; give a new --data-dir", dir.display());
    }
    std::fs::create_dir_all(&dir)?;
    eprintln!("data directory {}", dir.display());

    // 1. Load, warm, snapshot.
    let mut ladle = Ladle::spawn(&bin, &dir, "0")?;
    ladle.ready().await?;
    let mut root = Conn::new(OptsBuilder::from_opts(ladle.opts()).db_name(None::<String>)).await?;
    root.query_drop("CREATE DATABASE bench").await?;
    let mut conn = Conn::new(ladle.opts()).await?;
    let load = Instant::now();
    prime(&mut conn, Variant::Natural, args.articles, args.votes, 42).await?;
    let load_s = load.elapsed().as_secs_f64();
    let step = (args.articles / args.keys.max(1)).max(1);
    let keys: Vec<i64> = (0..args.keys.min(args.articles))
        .map(|i| (1 + i * step) as i64)
        .collect();
    let warm = Instant::now();
    let expected = Expected {
        grouped: grouped(&mut conn).await?,
        keys: read_keys(&mut conn, &keys).await?,
    };
    eprintln!(
        "warmed the grouped query ({} groups) and {} keys in {:.1}s",
        expected.grouped.len(),
        keys.len(),
        warm.elapsed().as_secs_f64()
    );
    let (epoch, _, bytes, total_ms, capture_ms) = snapshot_views(&mut conn).await?;
    let snapshot_dir_bytes = dir_bytes(&dir.join("snapshots"));
    eprintln!(
        "snapshot epoch {epoch}: {:.1} MB written in {total_ms} ms (capture {capture_ms} ms)",
        bytes as f64 / 1e6
    );
    drop(conn);
    drop(root);
    let crashed = dir.with_extension("crashed");
    if args.crash {
        ladle.crash()?;
        copy_dir(&dir, &crashed)?;
        eprintln!("killed with SIGKILL; crashed data directory kept for each restart");
    } else {
        ladle.stop()?;
        // 2. Restarts, after one that lets RocksDB replay its WAL and finish
        // the compactions the load left; warm first (cold removes the
        // snapshot).
        let mut settle = Ladle::spawn(&bin, &dir, "0")?;
        settle.ready().await?;
        tokio::time::sleep(Duration::from_secs_f64(args.settle_seconds.max(0.0))).await;
        settle.stop()?;
    }
    let mut restarts = Vec::new();
    let rounds = if args.skip_restarts { 0 } else { args.rounds };
    // Alternating, so that a noisy moment hits both. Each start begins from
    // the same state: the crashed data directory copied back, or (after a
    // clean stop) the snapshot put back before each warm start (the cold
    // ones write nothing else that matters).
    let saved = dir.with_extension("snapshots");
    if rounds > 0 && !args.crash {
        copy_dir(&dir.join("snapshots"), &saved)?;
    }
    let restore = |mode: &str| -> Result<()> {
        if args.crash {
            std::fs::remove_dir_all(&dir)?;
            return copy_dir(&crashed, &dir);
        }
        // A cold start leaves an empty snapshot directory behind.
        let snaps = dir.join("snapshots");
        if mode == "warm" {
            if snaps.exists() {
                std::fs::remove_dir_all(&snaps)?;
            }
            copy_dir(&saved, &snaps)?;
        }
        Ok(())
    };
    for _ in 0..rounds {
        for mode in ["warm", "cold"] {
            restore(mode)?;
            restarts.push(measure_restart(&bin, &dir, mode, &keys, &expected).await?);
        }
    }
    for leftover in [&saved, &crashed] {
        if leftover.exists() {
            std::fs::remove_dir_all(leftover)?;
        }
    }
    let pick = |mode: &str, f: fn(&Restart) -> f64| {
        median(restarts.iter().filter(|r| r.mode == mode).map(f).collect())
    };
    let cold_first = pick("cold", |r| r.first_answer_s);
    let warm_first = pick("warm", |r| r.first_answer_s);
    let cold_keys = pick("cold", |r| r.all_keys_s);
    let warm_keys = pick("warm", |r| r.all_keys_s);

    // 3. Write throughput, A B B A.
    let mut writes = Vec::new();
    if args.write_seconds > 0 {
        let with = args.snapshot_interval.as_str();
        for _ in 0..args.write_pairs.max(1) {
            for interval in [with, "0", "0", with] {
                writes.push(write_phase(&bin, &dir, interval, &args, &keys).await?);
            }
        }
    }
    let rate = |snap: bool| {
        let v: Vec<&WritePhase> = writes
            .iter()
            .filter(|w| (w.snapshot_interval != "0") == snap)
            .collect();
        v.iter().map(|w| w.writes as f64).sum::<f64>() / v.iter().map(|w| w.seconds).sum::<f64>()
    };
    let write_ratio = (!writes.is_empty()).then(|| rate(true) / rate(false));

    // 3b. Write throughput in one process, windows A B B A.
    let windows = if args.windows > 0 {
        write_windows(&bin, &dir, &args, &keys).await?
    } else {
        Vec::new()
    };
    let window_rate = |snap: bool| {
        let (n, s) = windows
            .iter()
            .filter(|w| w.snapshot == snap)
            .fold((0.0, 0.0), |(n, s), w| (n + w.writes as f64, s + w.seconds));
        n / s
    };
    let window_ratio = (args.windows >= 2).then(|| window_rate(true) / window_rate(false));

    // 4. A large state.
    let large_state = if args.skip_large_state {
        LargeState::default()
    } else {
        large_state(&bin, &dir).await?
    };

    if args.data_dir.is_none() && !args.keep {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(Report {
        restart_after: if args.crash { "kill -9" } else { "clean stop" },
        articles: args.articles,
        votes: args.votes,
        keys: keys.len() as u64,
        load_s,
        snapshot_epoch: epoch,
        snapshot_bytes_written: bytes,
        snapshot_total_ms: total_ms,
        snapshot_capture_ms: capture_ms,
        snapshot_dir_bytes,
        restarts,
        cold_first_answer_s: cold_first,
        warm_first_answer_s: warm_first,
        first_answer_speedup: cold_first / warm_first,
        cold_all_keys_s: cold_keys,
        warm_all_keys_s: warm_keys,
        all_keys_speedup: cold_keys / warm_keys,
        writes,
        write_ratio_with_snapshots: write_ratio,
        windows,
        window_ratio_with_snapshots: window_ratio,
        large_state,
    })
}

fn main() -> Result<()> {
    let args = Args::parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let report = rt.block_on(run(args))?;
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}
