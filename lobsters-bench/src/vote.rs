//! The vote micro-benchmark (from the Noria thesis): articles, votes, and
//! a read of one article's vote count. `--queries natural` counts through
//! a grouped derived table (what Ladle keeps current as a view);
//! `--queries original` keeps a `votes` counter column on `Article`,
//! incremented in each vote's transaction, as one would for MySQL.

use crate::cpu::{CpuArgs, CpuMeter, CpuUsage};
use crate::db::{connect, ensure_database, parse_url};
use crate::dist::Zipf;
use crate::lobsters::Variant;
use crate::stats::{round3, Latencies};
use crate::windows::{WindowRecorder, WindowSummary};
use anyhow::{bail, Context, Result};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, Row, TxOpts};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The natural read: one article and its vote count, counted.
pub const READ_SQL: &str = "SELECT Article.id, title, VoteCount.votes FROM Article LEFT JOIN \
(SELECT article_id, COUNT(user) AS votes FROM Vote GROUP BY article_id) AS VoteCount \
ON Article.id = VoteCount.article_id WHERE Article.id = ?";
/// The write: one vote (the whole write in `natural`).
pub const WRITE_SQL: &str = "INSERT INTO Vote (article_id, user) VALUES (?, ?)";
/// The original read: the counter column.
pub const ORIGINAL_READ_SQL: &str = "SELECT id, title, votes FROM Article WHERE id = ?";
/// The original write's second statement, in the vote's transaction.
pub const ORIGINAL_COUNT_SQL: &str = "UPDATE Article SET votes = votes + 1 WHERE id = ?";

/// How articles are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Distribution {
    Uniform,
    Zipf,
}

/// `lobsters-bench vote` options.
#[derive(Debug, Clone, clap::Args)]
pub struct VoteArgs {
    /// mysql://USER[:PW]@HOST:PORT/DB (the database is created if missing).
    #[arg(long)]
    pub url: String,
    /// `natural`: reads count votes through a grouped derived table.
    /// `original`: a `votes` counter on Article, incremented with each vote.
    #[arg(long, value_enum, default_value = "natural")]
    pub queries: Variant,
    /// Number of articles.
    #[arg(long, default_value_t = 100_000)]
    pub articles: u64,
    /// Votes loaded by --prime (default: one per article).
    #[arg(long)]
    pub prime_votes: Option<u64>,
    /// Share of operations that are reads.
    #[arg(long, default_value_t = 0.95)]
    pub read_fraction: f64,
    /// Article popularity.
    #[arg(long, value_enum, default_value = "uniform")]
    pub distribution: Distribution,
    /// Zipf exponent for --distribution zipf.
    #[arg(long, default_value_t = 1.08)]
    pub zipf_s: f64,
    /// Client connections, each running operations back to back.
    #[arg(long, default_value_t = 16)]
    pub connections: usize,
    /// Measured seconds.
    #[arg(long, default_value_t = 30.0)]
    pub runtime: f64,
    /// Unmeasured seconds first.
    #[arg(long, default_value_t = 5.0)]
    pub warmup: f64,
    /// Drop, recreate and load Article and Vote first.
    #[arg(long)]
    pub prime: bool,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Write the report here as JSON.
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
    /// Another node of a cluster (same user and database; repeatable):
    /// connections are spread over --url and these, and a connection
    /// whose node goes away (a lost connection, not an SQL error) moves on
    /// to the next node that answers.
    #[arg(long = "also-url")]
    pub also_urls: Vec<String>,
    #[command(flatten)]
    pub cpu: CpuArgs,
}

/// The JSON report of `lobsters-bench vote`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct VoteReport {
    pub workload: &'static str,
    pub queries: Variant,
    pub articles: u64,
    pub read_fraction: f64,
    pub distribution: Distribution,
    pub connections: usize,
    pub runtime_s: f64,
    pub ops_per_s: f64,
    pub reads: u64,
    pub writes: u64,
    pub errors: u64,
    pub read_p50_ms: f64,
    pub read_p95_ms: f64,
    pub read_p99_ms: f64,
    pub write_p50_ms: f64,
    pub write_p95_ms: f64,
    pub write_p99_ms: f64,
    pub first_error: Option<String>,
    /// Connections that moved to another node (or back to the same one)
    /// after theirs was lost.
    pub reconnects: u64,
    /// Server CPU ms per operation completed in the measured interval
    /// (null when the server's CPU is not visible).
    pub server_cpu_ms_per_op: Option<f64>,
    /// The load generator's own CPU ms per operation.
    pub client_cpu_ms_per_op: Option<f64>,
    /// 10 s windows (warm-up included): reads and writes together.
    pub windows: Vec<WindowSummary>,
}

/// Creates the tables and loads articles and votes. Both variants get the
/// same votes for the same seed; `original` also stores each article's
/// count in `Article.votes`.
pub async fn prime(
    conn: &mut Conn,
    variant: Variant,
    articles: u64,
    votes: u64,
    seed: u64,
) -> Result<()> {
    conn.query_drop("DROP TABLE IF EXISTS Vote").await?;
    conn.query_drop("DROP TABLE IF EXISTS Article").await?;
    conn.query_drop(match variant {
        Variant::Natural => {
            "CREATE TABLE Article (id INT NOT NULL PRIMARY KEY, title VARCHAR(64) NOT NULL)"
        }
        Variant::Original => {
            "CREATE TABLE Article (id INT NOT NULL PRIMARY KEY, title VARCHAR(64) NOT NULL, \
             votes INT NOT NULL DEFAULT 0)"
        }
    })
    .await?;
    conn.query_drop("CREATE TABLE Vote (article_id INT NOT NULL, user INT NOT NULL, KEY article_id (article_id))")
        .await?;
    let mut rng = StdRng::seed_from_u64(seed);
    let votes: Vec<(u64, u32)> = (0..votes)
        .map(|_| (rng.gen_range(1..=articles), rng.gen_range(0..1_000_000u32)))
        .collect();
    let mut progress = Progress::new(articles + votes.len() as u64);
    load_articles(conn, variant, articles, &votes, &mut progress).await?;
    for chunk in votes.chunks(1000) {
        let rows: Vec<String> = chunk.iter().map(|(a, u)| format!("({a}, {u})")).collect();
        conn.query_drop(format!(
            "INSERT INTO Vote (article_id, user) VALUES {}",
            rows.join(", ")
        ))
        .await
        .context("loading votes")?;
        progress.add(chunk.len() as u64);
    }
    eprintln!(
        "\npriming: done in {:.1}s",
        progress.start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Inserts articles 1..=n, 1,000 per statement, with their vote counts in
/// the `original` variant.
async fn load_articles(
    conn: &mut Conn,
    variant: Variant,
    articles: u64,
    votes: &[(u64, u32)],
    progress: &mut Progress,
) -> Result<()> {
    let mut counts = vec![0u32; articles as usize + 1];
    for (a, _) in votes {
        counts[*a as usize] += 1;
    }
    let mut id = 1;
    while id <= articles {
        let hi = (id + 999).min(articles);
        let rows: Vec<String> = (id..=hi)
            .map(|i| match variant {
                Variant::Natural => format!("({i}, 'Article #{i}')"),
                Variant::Original => format!("({i}, 'Article #{i}', {})", counts[i as usize]),
            })
            .collect();
        let columns = match variant {
            Variant::Natural => "id, title",
            Variant::Original => "id, title, votes",
        };
        conn.query_drop(format!(
            "INSERT INTO Article ({columns}) VALUES {}",
            rows.join(", ")
        ))
        .await
        .context("loading articles")?;
        progress.add(hi - id + 1);
        id = hi + 1;
    }
    Ok(())
}

/// Priming progress on stderr, at most twice a second (and at the end), so
/// a captured log stays short.
struct Progress {
    start: Instant,
    total: u64,
    done: u64,
    last_print: Option<Instant>,
}

impl Progress {
    fn new(total: u64) -> Progress {
        Progress {
            start: Instant::now(),
            total,
            done: 0,
            last_print: None,
        }
    }

    fn add(&mut self, rows: u64) {
        self.done += rows;
        let (done, total) = (self.done, self.total);
        if done < total
            && self
                .last_print
                .is_some_and(|t| t.elapsed() < Duration::from_millis(500))
        {
            return;
        }
        self.last_print = Some(Instant::now());
        eprint!(
            "\rpriming: {:5.1}% ({done} / {total} rows)   ",
            done as f64 / total.max(1) as f64 * 100.0
        );
        let _ = std::io::stderr().flush();
    }
}

/// One connection's results.
#[derive(Default)]
struct Tally {
    reads: Latencies,
    writes: Latencies,
    errors: u64,
    first_error: Option<String>,
    reconnects: u64,
}

impl Tally {
    fn merge(&mut self, other: Tally) {
        self.reads.merge(&other.reads);
        self.writes.merge(&other.writes);
        self.errors += other.errors;
        self.reconnects += other.reconnects;
        self.first_error = self.first_error.take().or(other.first_error);
    }
}

/// What every connection shares: the measured interval and how to pick
/// operations.
struct Plan {
    variant: Variant,
    articles: u64,
    distribution: Distribution,
    zipf: Option<Zipf>,
    read_fraction: f64,
    measure_from: Instant,
    end: Instant,
    windows: WindowRecorder,
}

/// One read of an article's vote count.
async fn read(conn: &mut Conn, variant: Variant, article: u64) -> mysql_async::Result<()> {
    let sql = match variant {
        Variant::Natural => READ_SQL,
        Variant::Original => ORIGINAL_READ_SQL,
    };
    conn.exec::<Row, _, _>(sql, (article,)).await.map(|_| ())
}

/// One vote: an INSERT, plus the counter's increment in the same
/// transaction in `original`.
async fn write(
    conn: &mut Conn,
    variant: Variant,
    article: u64,
    user: u32,
) -> mysql_async::Result<()> {
    match variant {
        Variant::Natural => conn.exec_drop(WRITE_SQL, (article, user)).await,
        Variant::Original => {
            let mut tx = conn.start_transaction(TxOpts::default()).await?;
            tx.exec_drop(WRITE_SQL, (article, user)).await?;
            tx.exec_drop(ORIGINAL_COUNT_SQL, (article,)).await?;
            tx.commit().await
        }
    }
}

/// How long connecting to one node may take before the next is tried.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// A connection to the first of `nodes` that answers, from `first` on
/// (wrapping), and its index; `None` once every node has been tried.
async fn connect_from(nodes: &[Opts], first: usize) -> Option<(Conn, usize)> {
    for k in 0..nodes.len() {
        let i = (first + k) % nodes.len();
        if let Ok(Ok(conn)) =
            tokio::time::timeout(CONNECT_TIMEOUT, Conn::new(nodes[i].clone())).await
        {
            return Some((conn, i));
        }
    }
    None
}

/// Whether `e` lost the connection (its node went away) rather than
/// being an answer from the server.
fn connection_lost(e: &mysql_async::Error) -> bool {
    !matches!(e, mysql_async::Error::Server(_))
}

/// Runs operations back to back on one connection until the plan's end;
/// a lost connection moves on to the next of `nodes` that answers.
async fn run_connection(
    mut conn: Conn,
    mut node: usize,
    nodes: &[Opts],
    plan: &Plan,
    mut rng: StdRng,
) -> Tally {
    let mut t = Tally::default();
    loop {
        let begin = Instant::now();
        if begin >= plan.end {
            break;
        }
        let article = match (&plan.zipf, plan.distribution) {
            (Some(z), Distribution::Zipf) => z.sample(&mut rng),
            _ => rng.gen_range(1..=plan.articles),
        };
        let is_read = rng.gen_bool(plan.read_fraction);
        let res = if is_read {
            read(&mut conn, plan.variant, article).await
        } else {
            let user = rng.gen_range(0..1_000_000u32);
            write(&mut conn, plan.variant, article, user).await
        };
        let done = Instant::now();
        match &res {
            Ok(()) => plan.windows.record(done, done - begin),
            Err(_) => plan.windows.error(done),
        }
        let lost = res.as_ref().err().is_some_and(connection_lost);
        if done >= plan.measure_from && done <= plan.end {
            match res {
                Ok(()) if is_read => t.reads.record(done - begin),
                Ok(()) => t.writes.record(done - begin),
                Err(e) => {
                    t.errors += 1;
                    if t.first_error.is_none() {
                        let what = if is_read { "read" } else { "write" };
                        t.first_error = Some(format!("{what} failed: {e}"));
                    }
                }
            }
        }
        if lost {
            // The next node first (a dead one refuses or times out).
            loop {
                if Instant::now() >= plan.end {
                    return t;
                }
                if let Some((c, i)) = connect_from(nodes, node + 1).await {
                    (conn, node) = (c, i);
                    t.reconnects += 1;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    let _ = conn.disconnect().await;
    t
}

/// Runs the closed-loop benchmark and returns the report.
pub async fn run(args: &VoteArgs) -> Result<VoteReport> {
    if args.articles == 0 || !(0.0..=1.0).contains(&args.read_fraction) {
        bail!("--articles must be positive and --read-fraction within 0..1");
    }
    let (opts, db) = parse_url(&args.url)?;
    // A wrong --server-pid or --metrics-url fails before priming.
    let meter = CpuMeter::from_args(&args.cpu);
    meter.check().await?;
    ensure_database(&opts, &db, false).await?;
    if args.prime {
        let mut conn = connect(&opts).await?;
        let votes = args.prime_votes.unwrap_or(args.articles);
        prime(&mut conn, args.queries, args.articles, votes, args.seed).await?;
        conn.disconnect().await?;
    }
    let zipf = Zipf::new(args.articles, args.zipf_s);
    if args.distribution == Distribution::Zipf && zipf.is_none() {
        bail!("--zipf-s must be positive");
    }
    // Connection i starts on node i (mod the node count), or the next
    // one that answers.
    let mut nodes = vec![opts.clone()];
    for url in &args.also_urls {
        nodes.push(parse_url(url)?.0);
    }
    let nodes = Arc::new(nodes);
    let mut conns = Vec::new();
    for i in 0..args.connections.max(1) {
        let (conn, node) = match connect_from(&nodes, i % nodes.len()).await {
            Some(found) => found,
            None => (connect(&opts).await?, 0),
        };
        conns.push((conn, node));
    }
    let start = Instant::now();
    let warmup = Duration::from_secs_f64(args.warmup.max(0.0));
    let runtime = Duration::from_secs_f64(args.runtime.max(0.1));
    let plan = Arc::new(Plan {
        variant: args.queries,
        articles: args.articles,
        distribution: args.distribution,
        zipf,
        read_fraction: args.read_fraction,
        measure_from: start + warmup,
        end: start + warmup + runtime,
        windows: WindowRecorder::new(start, warmup, runtime),
    });
    let cpu = tokio::spawn({
        let plan = Arc::clone(&plan);
        async move { meter.measure_between(plan.measure_from, plan.end).await }
    });
    let mut tasks = Vec::new();
    for (i, (conn, node)) in conns.into_iter().enumerate() {
        let rng = StdRng::seed_from_u64(args.seed.wrapping_add(1 + i as u64));
        let plan = Arc::clone(&plan);
        let nodes = Arc::clone(&nodes);
        tasks.push(tokio::spawn(async move {
            run_connection(conn, node, &nodes, &plan, rng).await
        }));
    }
    let mut tally = Tally::default();
    for task in tasks {
        tally.merge(task.await?);
    }
    let cpu = cpu.await?;
    Ok(build_report(
        args,
        tally,
        cpu,
        plan.windows.summaries(start, 0, None),
    ))
}

fn build_report(
    args: &VoteArgs,
    tally: Tally,
    cpu: CpuUsage,
    windows: Vec<WindowSummary>,
) -> VoteReport {
    let (r, w) = (tally.reads.summary(), tally.writes.summary());
    let ops = r.count + w.count;
    VoteReport {
        workload: "vote",
        queries: args.queries,
        articles: args.articles,
        read_fraction: args.read_fraction,
        distribution: args.distribution,
        connections: args.connections,
        runtime_s: args.runtime,
        ops_per_s: round3(ops as f64 / args.runtime.max(0.1)),
        reads: r.count,
        writes: w.count,
        errors: tally.errors,
        read_p50_ms: r.p50_ms,
        read_p95_ms: r.p95_ms,
        read_p99_ms: r.p99_ms,
        write_p50_ms: w.p50_ms,
        write_p95_ms: w.p95_ms,
        write_p99_ms: w.p99_ms,
        first_error: tally.first_error,
        reconnects: tally.reconnects,
        server_cpu_ms_per_op: cpu.server_ms_per(ops),
        client_cpu_ms_per_op: cpu.client_ms_per(ops),
        windows,
    }
}

/// Human summary for stdout.
pub fn render(r: &VoteReport) -> String {
    let cpu = crate::cpu::cpu_line("op", r.server_cpu_ms_per_op, r.client_cpu_ms_per_op);
    format!(
        "vote ({} queries, {} articles, {:.0}% reads, {:?}, {} connections): {:.1} ops/s\n{cpu}  reads  {:8}  p50 {:.2} ms  p95 {:.2} ms  p99 {:.2} ms\n  writes {:8}  p50 {:.2} ms  p95 {:.2} ms  p99 {:.2} ms\n  errors {}{}{}\n",
        r.queries.name(),
        r.articles,
        r.read_fraction * 100.0,
        r.distribution,
        r.connections,
        r.ops_per_s,
        r.reads,
        r.read_p50_ms,
        r.read_p95_ms,
        r.read_p99_ms,
        r.writes,
        r.write_p50_ms,
        r.write_p95_ms,
        r.write_p99_ms,
        r.errors,
        r.first_error.as_ref().map(|e| format!(" (first: {e})")).unwrap_or_default(),
        if r.reconnects > 0 {
            format!("\n  reconnects {} (to the next node after a lost connection)", r.reconnects)
        } else {
            String::new()
        }
    )
}

/// Entry point of `lobsters-bench vote`.
pub async fn main(args: VoteArgs) -> Result<()> {
    let rep = run(&args).await?;
    print!("{}", render(&rep));
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&rep)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: VoteArgs,
    }

    #[test]
    fn cli_and_json_contract() {
        let cli = Cli::parse_from([
            "x",
            "--url",
            "mysql://root@127.0.0.1:3307/vote",
            "--articles",
            "100000",
            "--read-fraction",
            "0.95",
            "--runtime",
            "30",
            "--warmup",
            "5",
            "--prime",
            "--json",
            "out.json",
        ]);
        assert_eq!(cli.args.articles, 100_000);
        assert!(cli.args.prime);
        assert_eq!(cli.args.queries, Variant::Natural);
        assert_eq!(cli.args.cpu.server_pid, None);
        let rep = VoteReport {
            workload: "vote",
            queries: Variant::Original,
            articles: 10,
            read_fraction: 0.95,
            distribution: Distribution::Zipf,
            connections: 4,
            runtime_s: 1.0,
            ops_per_s: 1000.0,
            reads: 950,
            writes: 50,
            errors: 0,
            read_p50_ms: 0.5,
            read_p95_ms: 1.0,
            read_p99_ms: 2.0,
            write_p50_ms: 1.5,
            write_p95_ms: 3.0,
            write_p99_ms: 4.0,
            first_error: None,
            reconnects: 0,
            server_cpu_ms_per_op: Some(0.05),
            client_cpu_ms_per_op: Some(0.02),
            windows: Vec::new(),
        };
        let v: serde_json::Value = serde_json::to_value(&rep).unwrap();
        assert_eq!(v["workload"], "vote");
        assert_eq!(v["distribution"], "zipf");
        assert_eq!(v["queries"], "original");
        assert_eq!(v["server_cpu_ms_per_op"], 0.05);
        assert_eq!(v["client_cpu_ms_per_op"], 0.02);
        assert!(v["windows"].is_array());
        for key in [
            "ops_per_s",
            "read_p95_ms",
            "write_p95_ms",
            "read_p50_ms",
            "write_p99_ms",
            "reads",
            "writes",
        ] {
            assert!(v[key].is_number(), "{key}");
        }
        let text = render(&rep);
        assert!(text.contains("1000.0 ops/s"), "{text}");
        assert!(text.contains("server 0.050 ms"), "{text}");
    }
}
