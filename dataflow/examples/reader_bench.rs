//! Reader micro-benchmark: one view key holding many rows (Lobsters' front
//! page keeps every story under one key and takes ORDER BY ... LIMIT at
//! read time). Run with
//!
//! ```text
//! cargo run --release -p ladle-dataflow --example reader_bench [-- --rows 40000 --deltas 2000]
//! ```
//!
//! In-memory storage, `stories(id, score, title)` with `--rows` rows and the
//! view `SELECT id, score, title FROM stories ORDER BY score DESC, id` read
//! with `LIMIT 25` and `LIMIT 25 OFFSET (rows / 2)`. Prints:
//! - bytes per cached row: resident memory growth across the fill, and the
//!   reader's own accounting (`memory_bytes`);
//! - µs per single-row write with the key cached, against the same writes
//!   with only a one-row view installed (each write waits for its
//!   propagation, so the difference is what applying one delta to the large
//!   views costs);
//! - µs per read of the first 25 rows and of 25 rows at the middle offset.
//!
//! Asserts nothing about speed.

use std::time::Instant;

use ladle_common::{ColumnSchema, Lsn, SqlType, TableSchema, Value};
use ladle_dataflow::{Dataflow, DataflowConfig};
use ladle_storage::{OnConflict, Storage, WriteOp};
use sqlparser::ast;
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;

/// Resident set size in bytes (from /proc; the crate forbids the unsafe
/// code a counting allocator needs). Large blocks are returned to the
/// system when freed, so the growth across a fill is the cached rows'
/// footprint plus some freed small blocks glibc keeps.
fn rss() -> i64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("statm");
    let pages: i64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("rss pages");
    pages * 4096
}

fn parse(sql: &str) -> ast::Query {
    match Parser::parse_sql(&MySqlDialect {}, sql)
        .expect("parse")
        .remove(0)
    {
        ast::Statement::Query(q) => *q,
        _ => panic!("not a query"),
    }
}

fn arg(name: &str, default: i64) -> i64 {
    std::env::args()
        .skip_while(|a| a != name)
        .nth(1)
        .map(|n| n.parse().expect("a number"))
        .unwrap_or(default)
}

/// A deterministic pseudo-random score.
fn score(i: i64) -> i64 {
    (i.wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407)
        >> 33)
        .rem_euclid(1 << 20)
}

fn story(i: i64) -> Vec<Value> {
    vec![
        Value::Int(i),
        Value::Int(score(i)),
        Value::text(format!("story number {i} about something")),
    ]
}

fn main() {
    let rows = arg("--rows", 40_000);
    let deltas = arg("--deltas", 2_000);
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
            memory_limit: 1 << 32,
            domain_threads: 0,
            ..Default::default()
        },
    )
    .expect("dataflow");
    let t = storage
        .create_table(
            TableSchema {
                id: 0,
                database: "bench".into(),
                name: "stories".into(),
                columns: vec![
                    ColumnSchema::new("id", int.clone()),
                    ColumnSchema::new("score", int),
                    ColumnSchema::new("title", SqlType::VarChar(64)),
                ],
                primary_key: Some(vec![0]),
                indexes: vec![],
                version: 0,
            },
            false,
        )
        .expect("table");
    for chunk in (0..rows).collect::<Vec<_>>().chunks(1000) {
        storage
            .write(vec![WriteOp::Insert {
                table: t.id,
                schema_version: t.version,
                rows: chunk.iter().map(|&i| story(i)).collect(),
                on_conflict: OnConflict::Error,
                auto_value_on_zero: true,
                id_batches: ladle_storage::IdBatches::PerRow,
                returning: None,
            }])
            .expect("write");
    }
    let mut next = rows;
    let write_one = |next: &mut i64| {
        storage
            .write(vec![WriteOp::Insert {
                table: t.id,
                schema_version: t.version,
                rows: vec![story(*next)],
                on_conflict: OnConflict::Error,
                auto_value_on_zero: true,
                id_batches: ladle_storage::IdBatches::PerRow,
                returning: None,
            }])
            .expect("write");
        *next += 1;
        df.settle();
    };
    // Writes through a small view (one cached key, which the writes do not
    // touch): storage and propagation alone.
    let point = df
        .prepare(
            "bench",
            &parse("SELECT id, score, title FROM stories WHERE id = ?"),
        )
        .expect("prepare");
    assert_eq!(point.execute(&[Value::Int(0)]).expect("read").len(), 1);
    let start = Instant::now();
    for _ in 0..deltas {
        write_one(&mut next);
    }
    let base_us = start.elapsed().as_secs_f64() * 1e6 / deltas as f64;

    let first = df
        .prepare(
            "bench",
            &parse("SELECT id, score, title FROM stories ORDER BY score DESC, id LIMIT 25"),
        )
        .expect("prepare");
    let mid = df
        .prepare(
            "bench",
            &parse(&format!(
                "SELECT id, score, title FROM stories ORDER BY score DESC, id LIMIT 25 OFFSET {}",
                rows / 2
            )),
        )
        .expect("prepare");
    let before = rss();
    let mem_before = df.memory_bytes();
    let got = first.read_after(&[], Lsn::MAX).expect("read");
    assert_eq!(got.len(), 25);
    let cached: u64 = df.view_stats().iter().map(|s| s.cached_rows).sum();
    let heap = rss() - before;
    println!(
        "memory: {cached} rows cached, {:.0} bytes of RSS per cached row (measured), {:.0} accounted",
        heap as f64 / cached as f64,
        (df.memory_bytes() - mem_before) as f64 / cached as f64
    );
    // The second view shares nothing with the first: fill it too, so that
    // every delta below is applied to two keys of `rows` rows.
    assert_eq!(mid.read_after(&[], Lsn::MAX).expect("read").len(), 25);

    let start = Instant::now();
    for _ in 0..deltas {
        write_one(&mut next);
    }
    let with_us = start.elapsed().as_secs_f64() * 1e6 / deltas as f64;
    println!(
        "single-row writes: {with_us:.1} µs each with 2 views of {rows}+ rows cached, {base_us:.1} µs with a one-row view: {:.1} µs per delta applied to a view",
        (with_us - base_us) / 2.0
    );

    for (name, p) in [("first 25 rows", &first), ("25 rows at the middle", &mid)] {
        let reads = 20_000;
        let start = Instant::now();
        let mut n = 0;
        for _ in 0..reads {
            let r = p.read_after(&[], Lsn::MAX).expect("read");
            // What the wire encoder does: look at every value.
            n += r.iter().map(|row| row.len()).sum::<usize>();
        }
        assert_eq!(n, reads * 25 * 3);
        println!(
            "read of the {name}: {:.2} µs",
            start.elapsed().as_secs_f64() * 1e6 / reads as f64
        );
    }
    // Sanity: the view equals the table.
    let all = df
        .prepare(
            "bench",
            &parse("SELECT id, score, title FROM stories ORDER BY score DESC, id"),
        )
        .expect("prepare")
        .execute(&[])
        .expect("read");
    let mut want: Vec<(i64, i64)> = (0..next).map(|i| (-score(i), i)).collect();
    want.sort();
    let got: Vec<(i64, i64)> = all
        .iter()
        .map(|r| (-r[1].as_i64().expect("int"), r[0].as_i64().expect("int")))
        .collect();
    assert_eq!(got, want);
    println!("check: {} rows in order", got.len());
}
