//! Range-read micro-benchmark, sysbench's shapes: `sbtest1(id, k, c, pad)`
//! with `--rows` rows (default 20,000) in in-memory storage, then reads of
//! 100-id ranges. Run with
//!
//! ```text
//! cargo run --release -p ladle-dataflow --example range_bench [-- --rows 20000 --reads 2000]
//! ```
//!
//! Prints µs per read for each shape (after a first read that fills the
//! view) and the views' memory. Asserts only that the answers are right.

use std::time::Instant;

use ladle_common::{ColumnSchema, Lsn, SqlType, TableSchema, Value};
use ladle_dataflow::{Dataflow, DataflowConfig};
use ladle_storage::{OnConflict, Storage, WriteOp};
use sqlparser::ast;
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;

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

fn main() {
    let rows = arg("--rows", 20_000);
    let reads = arg("--reads", 2_000);
    let int = SqlType::Int {
        bytes: 4,
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
                name: "sbtest1".into(),
                columns: vec![
                    ColumnSchema::new("id", int.clone()),
                    ColumnSchema::new("k", int),
                    ColumnSchema::new("c", SqlType::Char(120)),
                    ColumnSchema::new("pad", SqlType::Char(60)),
                ],
                primary_key: Some(vec![0]),
                indexes: vec![],
                version: 0,
            },
            false,
        )
        .expect("table");
    let c_of = |i: i64| {
        format!(
            "{:011}-{:011}-{:011}-{:011}",
            i * 7919 % 100_003,
            i,
            i * 31,
            i * 17
        )
    };
    for chunk in (1..=rows).collect::<Vec<_>>().chunks(1000) {
        storage
            .write(vec![WriteOp::Insert {
                table: t.id,
                schema_version: t.version,
                rows: chunk
                    .iter()
                    .map(|&i| {
                        vec![
                            Value::Int(i),
                            Value::Int(i % 1000),
                            Value::text(c_of(i)),
                            Value::text(format!("{:059}", i)),
                        ]
                    })
                    .collect(),
                on_conflict: OnConflict::Error,
                auto_value_on_zero: true,
                id_batches: ladle_storage::IdBatches::PerRow,
                returning: None,
            }])
            .expect("write");
    }
    let shapes = [
        "SELECT c FROM sbtest1 WHERE id BETWEEN ? AND ?",
        "SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN ? AND ?",
        "SELECT c FROM sbtest1 WHERE id BETWEEN ? AND ? ORDER BY c",
        // Keyset pagination (the second parameter is unused).
        "SELECT c FROM sbtest1 WHERE id >= ? AND ? IS NOT NULL ORDER BY id LIMIT 100",
    ];
    for sql in shapes {
        let p = df.prepare("bench", &parse(sql)).expect("prepare");
        let params = |n: i64| {
            let lo = 1 + (n * 7919) % (rows - 100);
            [Value::Int(lo), Value::Int(lo + 99)]
        };
        let first = p.read_after(&params(0), Lsn::MAX).expect("read");
        let want = if sql.contains("SUM") { 1 } else { 100 };
        assert_eq!(first.len(), want, "{sql}");
        let start = Instant::now();
        for n in 0..reads {
            let r = p.read_after(&params(n), Lsn::MAX).expect("read");
            assert_eq!(r.len(), want);
        }
        println!(
            "{:.1} µs per read: {sql}",
            start.elapsed().as_secs_f64() * 1e6 / reads as f64
        );
    }
    println!(
        "views: {} bytes for {} cached rows",
        df.memory_bytes(),
        df.view_stats().iter().map(|s| s.cached_rows).sum::<u64>()
    );
}
