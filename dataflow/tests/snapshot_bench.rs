//! Snapshot figures for about 1M rows of view state (ignored by default):
//!
//! ```text
//! cargo test --release -p ladle-dataflow --test snapshot_bench -- --ignored --nocapture --test-threads 1
//! ```
//!
//! 1M votes over 100k articles (in-memory storage, so only the snapshot
//! files touch the disk): `SELECT article_id, COUNT(*) FROM votes GROUP BY
//! article_id` (100k groups, fully materialized) and `SELECT id, article_id,
//! user_id FROM votes WHERE article_id = ?` with every article's key filled
//! (1M reader rows). Prints the full and incremental snapshot cost, the
//! capture pause (commit lock held), and the restore time against a cold
//! recompute.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use ladle_common::{ColumnSchema, IndexSchema, TableSchema};
use ladle_dataflow::{Dataflow, DataflowConfig, SnapshotConfig, SnapshotStore};
use ladle_storage::{OnConflict, Storage, WriteOp};

const VOTES: i64 = 1_000_000;
const ARTICLES: i64 = 100_000;
const COUNTS: &str = "SELECT article_id, COUNT(*) FROM votes GROUP BY article_id";
const BY_ARTICLE: &str = "SELECT id, article_id, user_id FROM votes WHERE article_id = ?";

fn dir_bytes(dir: &std::path::Path) -> u64 {
    let mut total = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let m = e.metadata().unwrap();
        total += if m.is_dir() {
            dir_bytes(&e.path())
        } else {
            m.len()
        };
    }
    total
}

/// In-memory storage with `votes` (indexed by article) holding 1M votes.
fn load_votes() -> (Arc<Storage>, Arc<TableSchema>) {
    let storage = Storage::in_memory();
    storage.create_database(DB, true).unwrap();
    let votes = storage
        .create_table(
            TableSchema {
                id: 0,
                database: DB.into(),
                name: "votes".into(),
                columns: vec![
                    ColumnSchema::new("id", int()),
                    ColumnSchema::new("article_id", int()),
                    ColumnSchema::new("user_id", int()),
                ],
                primary_key: Some(vec![0]),
                indexes: vec![IndexSchema {
                    id: 0,
                    name: "by_article".into(),
                    columns: vec![1],
                    unique: false,
                }],
                version: 0,
            },
            false,
        )
        .unwrap();
    let t = Instant::now();
    for chunk in 0..(VOTES / 10_000) {
        let rows = (chunk * 10_000..(chunk + 1) * 10_000)
            .map(|id| r(&[i(id), i(id % ARTICLES), i(id % 7919)]))
            .collect();
        storage
            .write(vec![WriteOp::Insert {
                table: votes.id,
                schema_version: votes.version,
                rows,
                on_conflict: OnConflict::Error,
                auto_value_on_zero: true,
                id_batches: ladle_storage::IdBatches::PerRow,
                returning: None,
            }])
            .unwrap();
    }
    println!("loaded {VOTES} votes in {:?}", t.elapsed());
    (storage, votes)
}

#[test]
#[ignore]
fn snapshot_one_million_rows_of_view_state() {
    let (storage, votes) = load_votes();

    let config = DataflowConfig {
        memory_limit: 8 << 30,
        ..Default::default()
    };
    let df = Dataflow::new(storage.clone(), config.clone()).unwrap();
    let e = Env {
        storage: storage.clone(),
        df: df.clone(),
    };
    let t = Instant::now();
    let counts = e.q(COUNTS, &[]);
    println!(
        "cold first answer of the COUNT view: {:?} ({} rows)",
        t.elapsed(),
        counts.len()
    );
    let by_article = e.prepare(BY_ARTICLE);
    let t = Instant::now();
    for a in 0..ARTICLES {
        by_article.execute(&[i(a)]).unwrap();
    }
    println!("filled {ARTICLES} reader keys in {:?}", t.elapsed());
    let rows: u64 = df.view_stats().iter().map(|v| v.cached_rows).sum();
    println!(
        "view state: {rows} reader rows, {} MB accounted",
        df.memory_bytes() >> 20
    );

    let dir = tempfile::tempdir().unwrap();
    let store =
        SnapshotStore::open(dir.path().join("snapshots"), SnapshotConfig::default()).unwrap();
    let full = df.snapshot(&store).unwrap();
    println!(
        "full snapshot: {:?} total, capture (lock held) {:?}, {} nodes, {} rows, {} MB serialized, {} MB on disk",
        full.total,
        full.capture,
        full.nodes_written,
        full.rows_written,
        full.bytes_written >> 20,
        dir_bytes(dir.path()) >> 20
    );

    // 1000 new votes spread over 1000 articles, then an incremental epoch.
    let rows = (VOTES..VOTES + 1000)
        .map(|id| r(&[i(id), i((id * 97) % ARTICLES), i(id % 7919)]))
        .collect();
    storage
        .write(vec![WriteOp::Insert {
            table: votes.id,
            schema_version: votes.version,
            rows,
            on_conflict: OnConflict::Error,
            auto_value_on_zero: true,
            id_batches: ladle_storage::IdBatches::PerRow,
            returning: None,
        }])
        .unwrap();
    let inc = df.snapshot(&store).unwrap();
    println!(
        "incremental snapshot after 1000 votes: {:?} total, capture {:?}, {} nodes written ({} full), {} rows, {} KB",
        inc.total,
        inc.capture,
        inc.nodes_written,
        inc.full_nodes,
        inc.rows_written,
        inc.bytes_written >> 10
    );
    let expected = e.q(COUNTS, &[]);
    drop(e);
    drop(by_article);

    // Reading and verifying the files alone (the rest of `load` is decoding).
    let t = Instant::now();
    let loaded = store.load_latest().unwrap().unwrap();
    println!(
        "store load (read + verify {} files, {} MB): {:?}",
        loaded.files_read,
        loaded.bytes_read >> 20,
        t.elapsed()
    );
    drop(loaded);

    // Restart of the engine over the same storage: restore vs cold.
    drop(df);
    let t = Instant::now();
    let df = Dataflow::new(storage.clone(), config.clone()).unwrap();
    let mut last_progress = None;
    let stats = df
        .recover(&store, &mut |p| last_progress = Some(p.clone()))
        .unwrap();
    let e = Env {
        storage: storage.clone(),
        df: df.clone(),
    };
    let got = e.q(COUNTS, &[]);
    println!(
        "warm restart to the first answer: {:?} (load {:?}, replay {:?}, {} nodes, {} rows, {} MB read; last progress {:?})",
        t.elapsed(),
        stats.load,
        stats.replay,
        stats.nodes_restored,
        stats.rows_restored,
        stats.bytes_read >> 20,
        last_progress
    );
    assert_eq!(got, expected);
    assert_eq!(stats.nodes_cold, 0);
    let compact = df.compact_snapshots(&store).unwrap();
    println!("compaction: {compact:?}");
    drop(e);
    drop(df);
    let t = Instant::now();
    let df = Dataflow::new(storage.clone(), config).unwrap();
    let e = Env {
        storage: storage.clone(),
        df,
    };
    assert_eq!(e.q(COUNTS, &[]), expected);
    println!("cold restart to the first answer: {:?}", t.elapsed());
}

/// Single-vote writes from four threads for a few seconds with both views
/// maintained, without snapshots and with one every second (ten times the
/// server's default rate), alternating twice.
#[test]
#[ignore]
fn write_throughput_with_and_without_snapshots() {
    let (storage, votes) = load_votes();
    let config = DataflowConfig {
        memory_limit: 8 << 30,
        ..Default::default()
    };
    let df = Dataflow::new(storage.clone(), config).unwrap();
    let e = Env {
        storage: storage.clone(),
        df: df.clone(),
    };
    e.q(COUNTS, &[]);
    let by_article = e.prepare(BY_ARTICLE);
    for a in 0..ARTICLES {
        by_article.execute(&[i(a)]).unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let store =
        SnapshotStore::open(dir.path().join("snapshots"), SnapshotConfig::default()).unwrap();
    df.snapshot(&store).unwrap();
    let next_id = Arc::new(AtomicU64::new(VOTES as u64));
    let run = |with_snapshots: bool| -> f64 {
        let stop = Arc::new(AtomicBool::new(false));
        let writes = Arc::new(AtomicU64::new(0));
        let mut threads = Vec::new();
        for _ in 0..4 {
            let (storage, votes, stop, writes, next_id) = (
                storage.clone(),
                votes.clone(),
                stop.clone(),
                writes.clone(),
                next_id.clone(),
            );
            threads.push(std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let id = next_id.fetch_add(1, Ordering::Relaxed) as i64;
                    storage
                        .write(vec![WriteOp::Insert {
                            table: votes.id,
                            schema_version: votes.version,
                            rows: vec![r(&[i(id), i((id * 97) % ARTICLES), i(id % 7919)])],
                            on_conflict: OnConflict::Error,
                            auto_value_on_zero: true,
                            id_batches: ladle_storage::IdBatches::PerRow,
                            returning: None,
                        }])
                        .unwrap();
                    writes.fetch_add(1, Ordering::Relaxed);
                }
            }));
        }
        let t = Instant::now();
        let mut pauses = Vec::new();
        while t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_secs(1));
            if with_snapshots {
                let s = df.snapshot(&store).unwrap();
                pauses.push((s.capture, s.total, s.bytes_written >> 10));
            }
        }
        stop.store(true, Ordering::Relaxed);
        for t in threads {
            t.join().unwrap();
        }
        let rate = writes.load(Ordering::Relaxed) as f64 / t.elapsed().as_secs_f64();
        println!(
            "{} snapshots: {rate:.0} writes/s; (capture, total, KB) per snapshot: {pauses:?}",
            if with_snapshots { "with" } else { "without" }
        );
        rate
    };
    let mut ratios = Vec::new();
    for _ in 0..2 {
        let without = run(false);
        let with = run(true);
        ratios.push(with / without);
    }
    println!("throughput with / without snapshots: {ratios:?}");
}
