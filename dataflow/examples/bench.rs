//! Dataflow micro-benchmarks (run with `cargo run --release -p
//! ladle-dataflow --example bench`): warm reader lookups/s on 2 threads
//! (alone, then with a writer thread meanwhile), write propagation through
//! the vote graph (in-memory storage), cold-key upquery latency, and memory
//! per cached row; then the same batches through two independent views
//! (two domains). `--domain-threads N` sets the domain pool (default: one
//! per core). Prints figures; asserts nothing about speed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ladle_common::{ColumnSchema, IndexSchema, SqlType, TableSchema, Value};
use ladle_dataflow::{Dataflow, DataflowConfig};
use ladle_storage::{OnConflict, Storage, WriteOp};
use sqlparser::ast;
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;

const VOTE: &str = "SELECT Article.id, title, VoteCount.votes FROM Article LEFT JOIN (SELECT article_id, COUNT(user) AS votes FROM Vote GROUP BY article_id) AS VoteCount ON Article.id = VoteCount.article_id WHERE Article.id = ?";

fn parse(sql: &str) -> ast::Query {
    match Parser::parse_sql(&MySqlDialect {}, sql)
        .expect("parse")
        .remove(0)
    {
        ast::Statement::Query(q) => *q,
        _ => panic!("not a query"),
    }
}

fn table(name: &str, cols: &[(&str, SqlType)]) -> TableSchema {
    TableSchema {
        id: 0,
        database: "bench".into(),
        name: name.into(),
        columns: cols
            .iter()
            .map(|(n, t)| ColumnSchema::new(*n, t.clone()))
            .collect(),
        primary_key: Some(vec![0]),
        indexes: vec![],
        version: 0,
    }
}

/// Writes votes for `dur`, `per_write` per commit, then waits until every
/// view has applied them; votes per second including that wait.
fn vote_rate(
    df: &Dataflow,
    storage: &Storage,
    table: &TableSchema,
    vid: &mut i64,
    articles: i64,
    per_write: usize,
    dur: Duration,
) -> f64 {
    let start = Instant::now();
    let mut n = 0;
    while start.elapsed() < dur {
        let rows = (0..per_write)
            .map(|_| {
                *vid += 1;
                vec![
                    Value::Int(*vid),
                    Value::Int((*vid * 7919) % articles),
                    Value::Int(*vid),
                ]
            })
            .collect();
        storage
            .write(vec![WriteOp::Insert {
                table: table.id,
                schema_version: table.version,
                rows,
                on_conflict: OnConflict::Error,
                auto_value_on_zero: true,
                id_batches: ladle_storage::IdBatches::PerRow,
                returning: None,
            }])
            .expect("w");
        n += per_write;
    }
    // Writes are acknowledged before the views apply them: count the
    // propagation still queued.
    df.settle();
    n as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let domain_threads = std::env::args()
        .skip_while(|a| a != "--domain-threads")
        .nth(1)
        .map(|n| n.parse().expect("--domain-threads N"))
        .unwrap_or(0);
    let articles: i64 = 10_000;
    let int = SqlType::Int {
        bytes: 8,
        unsigned: false,
        display_width: None,
    };
    let storage = Storage::in_memory();
    storage.create_database("bench", true).expect("db");
    let df = Dataflow::new(
        storage.clone(),
        DataflowConfig {
            memory_limit: 1 << 30,
            domain_threads,
            ..Default::default()
        },
    )
    .expect("dataflow");
    let a = storage
        .create_table(
            table(
                "Article",
                &[("id", int.clone()), ("title", SqlType::VarChar(64))],
            ),
            false,
        )
        .expect("t");
    let v = storage
        .create_table(
            table(
                "Vote",
                &[
                    ("id", int.clone()),
                    ("article_id", int.clone()),
                    ("user", int.clone()),
                ],
            ),
            false,
        )
        .expect("t");
    storage
        .create_index(
            "bench",
            "Vote",
            IndexSchema {
                id: 0,
                name: "by_article".into(),
                columns: vec![1],
                unique: false,
            },
        )
        .expect("index");
    for chunk in (0..articles).collect::<Vec<_>>().chunks(1000) {
        let rows = chunk
            .iter()
            .map(|k| vec![Value::Int(*k), Value::text(format!("article {k}"))])
            .collect();
        storage
            .write(vec![WriteOp::Insert {
                table: a.id,
                schema_version: a.version,
                rows,
                on_conflict: OnConflict::Error,
                auto_value_on_zero: true,
                id_batches: ladle_storage::IdBatches::PerRow,
                returning: None,
            }])
            .expect("w");
    }
    let mut vid = 0i64;
    for chunk in 0..100 {
        let rows = (0..1000)
            .map(|n| {
                vid += 1;
                vec![
                    Value::Int(vid),
                    Value::Int((vid * 7919) % articles),
                    Value::Int(chunk * 1000 + n),
                ]
            })
            .collect();
        storage
            .write(vec![WriteOp::Insert {
                table: v.id,
                schema_version: v.version,
                rows,
                on_conflict: OnConflict::Error,
                auto_value_on_zero: true,
                id_batches: ladle_storage::IdBatches::PerRow,
                returning: None,
            }])
            .expect("w");
    }
    // Baseline: single-vote writes with no view installed (storage cost).
    let rate = vote_rate(
        &df,
        &storage,
        &v,
        &mut vid,
        articles,
        1,
        Duration::from_secs(2),
    );
    println!("baseline: {rate:.0} single-vote writes/s with no views");
    let p = df.prepare("bench", &parse(VOTE)).expect("prepare");

    // Cold-key upquery latency (first read of each key).
    let mut lat = Vec::new();
    for k in 0..articles {
        let t = Instant::now();
        p.execute(&[Value::Int(k)]).expect("read");
        lat.push(t.elapsed());
    }
    lat.sort();
    let mean = lat.iter().sum::<Duration>() / lat.len() as u32;
    println!(
        "cold-key upquery: mean {:?}, p50 {:?}, p99 {:?} ({} keys, 100k votes)",
        mean,
        lat[lat.len() / 2],
        lat[lat.len() * 99 / 100],
        lat.len()
    );

    // Memory per cached row.
    let stats = df.view_stats();
    let rows: u64 = stats.iter().map(|s| s.cached_rows).sum();
    println!(
        "memory: {} bytes of state, {} reader rows cached, {:.0} bytes per cached row (incl. aggregate state)",
        df.memory_bytes(),
        rows,
        df.memory_bytes() as f64 / rows.max(1) as f64
    );

    // Warm reader lookups on 2 threads, alone and then with a writer
    // thread publishing single-vote writes meanwhile (reads should barely
    // notice it, beyond sharing the 2 cores).
    let lookups = |with_writer: bool, vid: i64| {
        let dur = Duration::from_secs(3);
        let stop = Arc::new(AtomicBool::new(false));
        let writer = with_writer.then(|| {
            let (storage, stop, table) = (storage.clone(), stop.clone(), v.clone());
            std::thread::spawn(move || {
                let mut vid = vid;
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    vid += 1;
                    let row = vec![
                        Value::Int(vid),
                        Value::Int((vid * 7919) % articles),
                        Value::Int(vid),
                    ];
                    storage
                        .write(vec![WriteOp::Insert {
                            table: table.id,
                            schema_version: table.version,
                            rows: vec![row],
                            on_conflict: OnConflict::Error,
                            auto_value_on_zero: true,
                            id_batches: ladle_storage::IdBatches::PerRow,
                            returning: None,
                        }])
                        .expect("w");
                    n += 1;
                }
                (vid, n)
            })
        });
        let threads: Vec<_> = (0..2u64)
            .map(|tid| {
                let p = p.clone();
                std::thread::spawn(move || {
                    let start = Instant::now();
                    let mut n = 0u64;
                    let mut k = tid as i64;
                    while start.elapsed() < dur {
                        for _ in 0..1000 {
                            k = (k * 6364136223846793005i64.wrapping_add(1)).rem_euclid(articles);
                            let _ = p.execute(&[Value::Int(k)]);
                            n += 1;
                        }
                    }
                    n
                })
            })
            .collect();
        let total: u64 = threads.into_iter().map(|t| t.join().expect("join")).sum();
        stop.store(true, Ordering::Relaxed);
        let written = writer.map(|w| w.join().expect("join"));
        (total as f64 / dur.as_secs_f64(), written)
    };
    let (rate, _) = lookups(false, vid);
    println!("warm reader lookups: {rate:.0}/s on 2 threads");
    let (rate, written) = lookups(true, vid);
    let (last, writes) = written.unwrap_or((vid, 0));
    vid = last;
    println!(
        "warm reader lookups with 1 writer: {rate:.0}/s on 2 threads ({:.0} single-vote writes/s meanwhile)",
        writes as f64 / 3.0
    );

    // Write propagation: one vote per write, then batches of 100.
    let secs = Duration::from_secs(3);
    let rate = vote_rate(&df, &storage, &v, &mut vid, articles, 1, secs);
    println!("write propagation: {rate:.0} single-vote writes/s (all keys cached)");
    let rate = vote_rate(&df, &storage, &v, &mut vid, articles, 100, secs);
    println!("write propagation: {rate:.0} votes/s in batches of 100");

    // Two domains: a second grouped view over Vote that shares no state
    // with the vote count (another aggregate), fully materialized.
    let other = df
        .prepare(
            "bench",
            &parse("SELECT article_id, MAX(user) FROM Vote GROUP BY article_id"),
        )
        .expect("prepare");
    other.execute(&[]).expect("read");
    let rate = vote_rate(&df, &storage, &v, &mut vid, articles, 100, secs);
    println!(
        "write propagation, 2 views in {} domains on {} threads: {rate:.0} votes/s in batches of 100",
        df.domain_count(),
        if domain_threads == 0 {
            "all cores'".to_string()
        } else {
            domain_threads.to_string()
        }
    );
    // Sanity: the view equals the base table.
    let k = 42;
    let want = storage
        .lookup(
            v.id,
            ladle_storage::IndexRef::Secondary(
                storage.table("bench", "Vote").expect("t").indexes[0].id,
            ),
            &[Value::Int(k)],
        )
        .expect("l")
        .len();
    let got = p.execute(&[Value::Int(k)]).expect("read");
    println!("check: article {k} votes view={} base={want}", got[0][2]);
}
