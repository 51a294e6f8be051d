//! The vote micro-benchmark (from the Noria thesis): articles, votes, and
//! a read that counts an article's votes through a grouped derived table.

use crate::db::{connect, ensure_database, parse_url};
use crate::dist::Zipf;
use crate::stats::{round3, Latencies};
use anyhow::{bail, Context, Result};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use std::io::Write;
use std::time::{Duration, Instant};

/// The read: one article and its vote count.
pub const READ_SQL: &str = "SELECT Article.id, title, VoteCount.votes FROM Article LEFT JOIN \
(SELECT article_id, COUNT(user) AS votes FROM Vote GROUP BY article_id) AS VoteCount \
ON Article.id = VoteCount.article_id WHERE Article.id = ?";
/// The write: one vote.
pub const WRITE_SQL: &str = "INSERT INTO Vote (article_id, user) VALUES (?, ?)";

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
}

/// The JSON report of `lobsters-bench vote`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct VoteReport {
    pub workload: &'static str,
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
}

/// Creates the tables and loads articles and votes.
pub async fn prime(conn: &mut Conn, articles: u64, votes: u64, seed: u64) -> Result<()> {
    conn.query_drop("DROP TABLE IF EXISTS Vote").await?;
    conn.query_drop("DROP TABLE IF EXISTS Article").await?;
    conn.query_drop(
        "CREATE TABLE Article (id INT NOT NULL PRIMARY KEY, title VARCHAR(64) NOT NULL)",
    )
    .await?;
    conn.query_drop("CREATE TABLE Vote (article_id INT NOT NULL, user INT NOT NULL, KEY article_id (article_id))")
        .await?;
    let total = articles + votes;
    let start = Instant::now();
    let mut done = 0u64;
    let mut rng = StdRng::seed_from_u64(seed);
    // At most twice a second (and at the end): a captured log stays short.
    let mut last_print: Option<Instant> = None;
    let mut progress = |done: u64| {
        if done < total && last_print.is_some_and(|t| t.elapsed() < Duration::from_millis(500)) {
            return;
        }
        last_print = Some(Instant::now());
        eprint!(
            "\rpriming: {:5.1}% ({done} / {total} rows)   ",
            done as f64 / total.max(1) as f64 * 100.0
        );
        let _ = std::io::stderr().flush();
    };
    let mut id = 1;
    while id <= articles {
        let hi = (id + 999).min(articles);
        let rows: Vec<String> = (id..=hi)
            .map(|i| format!("({i}, 'Article #{i}')"))
            .collect();
        conn.query_drop(format!(
            "INSERT INTO Article (id, title) VALUES {}",
            rows.join(", ")
        ))
        .await
        .context("loading articles")?;
        done += hi - id + 1;
        progress(done);
        id = hi + 1;
    }
    let mut left = votes;
    while left > 0 {
        let n = left.min(1000);
        let rows: Vec<String> = (0..n)
            .map(|_| {
                format!(
                    "({}, {})",
                    rng.gen_range(1..=articles),
                    rng.gen_range(0..1_000_000u32)
                )
            })
            .collect();
        conn.query_drop(format!(
            "INSERT INTO Vote (article_id, user) VALUES {}",
            rows.join(", ")
        ))
        .await
        .context("loading votes")?;
        done += n;
        left -= n;
        progress(done);
    }
    eprintln!("\npriming: done in {:.1}s", start.elapsed().as_secs_f64());
    Ok(())
}

struct Tally {
    reads: Latencies,
    writes: Latencies,
    errors: u64,
    first_error: Option<String>,
}

/// Runs the closed-loop benchmark and returns the report.
pub async fn run(args: &VoteArgs) -> Result<VoteReport> {
    if args.articles == 0 || !(0.0..=1.0).contains(&args.read_fraction) {
        bail!("--articles must be positive and --read-fraction within 0..1");
    }
    let (opts, db) = parse_url(&args.url)?;
    ensure_database(&opts, &db, false).await?;
    if args.prime {
        let mut conn = connect(&opts).await?;
        prime(
            &mut conn,
            args.articles,
            args.prime_votes.unwrap_or(args.articles),
            args.seed,
        )
        .await?;
        conn.disconnect().await?;
    }
    let zipf = Zipf::new(args.articles, args.zipf_s);
    if args.distribution == Distribution::Zipf && zipf.is_none() {
        bail!("--zipf-s must be positive");
    }
    let start = Instant::now();
    let measure_from = start + Duration::from_secs_f64(args.warmup.max(0.0));
    let end = measure_from + Duration::from_secs_f64(args.runtime.max(0.1));
    let mut tasks = Vec::new();
    for i in 0..args.connections.max(1) {
        let mut conn = connect(&opts).await?;
        let zipf = zipf.clone();
        let (articles, dist, read_fraction) =
            (args.articles, args.distribution, args.read_fraction);
        let mut rng = StdRng::seed_from_u64(args.seed.wrapping_add(1 + i as u64));
        tasks.push(tokio::spawn(async move {
            let mut t = Tally {
                reads: Latencies::new(),
                writes: Latencies::new(),
                errors: 0,
                first_error: None,
            };
            loop {
                let begin = Instant::now();
                if begin >= end {
                    break;
                }
                let article = match (&zipf, dist) {
                    (Some(z), Distribution::Zipf) => z.sample(&mut rng),
                    _ => rng.gen_range(1..=articles),
                };
                let read = rng.gen_bool(read_fraction);
                let res = if read {
                    conn.exec::<Row, _, _>(READ_SQL, (article,))
                        .await
                        .map(|_| ())
                } else {
                    conn.exec_drop(WRITE_SQL, (article, rng.gen_range(0..1_000_000u32)))
                        .await
                };
                let done = Instant::now();
                if done < measure_from || done > end {
                    continue;
                }
                match res {
                    Ok(()) if read => t.reads.record(done - begin),
                    Ok(()) => t.writes.record(done - begin),
                    Err(e) => {
                        t.errors += 1;
                        if t.first_error.is_none() {
                            t.first_error = Some(format!(
                                "{} failed: {e}",
                                if read { "read" } else { "write" }
                            ));
                        }
                    }
                }
            }
            let _ = conn.disconnect().await;
            t
        }));
    }
    let mut reads = Latencies::new();
    let mut writes = Latencies::new();
    let mut errors = 0;
    let mut first_error = None;
    for task in tasks {
        let t = task.await?;
        reads.merge(&t.reads);
        writes.merge(&t.writes);
        errors += t.errors;
        first_error = first_error.or(t.first_error);
    }
    let (r, w) = (reads.summary(), writes.summary());
    Ok(VoteReport {
        workload: "vote",
        articles: args.articles,
        read_fraction: args.read_fraction,
        distribution: args.distribution,
        connections: args.connections,
        runtime_s: args.runtime,
        ops_per_s: round3((r.count + w.count) as f64 / args.runtime.max(0.1)),
        reads: r.count,
        writes: w.count,
        errors,
        read_p50_ms: r.p50_ms,
        read_p95_ms: r.p95_ms,
        read_p99_ms: r.p99_ms,
        write_p50_ms: w.p50_ms,
        write_p95_ms: w.p95_ms,
        write_p99_ms: w.p99_ms,
        first_error,
    })
}

/// Human summary for stdout.
pub fn render(r: &VoteReport) -> String {
    format!(
        "vote ({} articles, {:.0}% reads, {:?}, {} connections): {:.1} ops/s\n  reads  {:8}  p50 {:.2} ms  p95 {:.2} ms  p99 {:.2} ms\n  writes {:8}  p50 {:.2} ms  p95 {:.2} ms  p99 {:.2} ms\n  errors {}{}\n",
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
        r.first_error.as_ref().map(|e| format!(" (first: {e})")).unwrap_or_default()
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
        let rep = VoteReport {
            workload: "vote",
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
        };
        let v: serde_json::Value = serde_json::to_value(&rep).unwrap();
        assert_eq!(v["workload"], "vote");
        assert_eq!(v["distribution"], "zipf");
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
        assert!(render(&rep).contains("1000.0 ops/s"));
    }
}
