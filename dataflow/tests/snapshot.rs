//! Snapshots of view state and warm restarts (invariants 5 and 6): a
//! restart restores the newest snapshot, replays the change log after it,
//! and every view then equals a recompute from the base tables.
//!
//! A "restart" drops the engine and storage and reopens both on the same
//! directory (RocksDB, asynchronous durability to keep the tests fast; the
//! engine is closed cleanly, so nothing acknowledged is lost). A recompute
//! is a fresh engine without snapshots on the same storage: every read is
//! an upquery to the base tables.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use common::*;
use ladle_common::{ColumnSchema, Row, TableSchema, Value};
use ladle_dataflow::{
    Dataflow, DataflowConfig, RecoveryStats, SnapshotConfig, SnapshotStats, SnapshotStore,
};
use ladle_storage::{Durability, OnConflict, Storage, StorageConfig, WriteOp};

const BIG: usize = 1 << 30;

/// Every view the tests use, with the parameters they read it with.
const VIEWS: &[&str] = &[
    // fully materialized aggregate
    "SELECT article, COUNT(*) AS n, SUM(score) AS s FROM votes GROUP BY article",
    // partial aggregate keyed by the parameter
    "SELECT article, COUNT(*) AS n, MAX(score) AS m FROM votes WHERE article = ? GROUP BY article",
    // join with an aggregate below it
    "SELECT a.id, a.title, c.n FROM articles a LEFT JOIN (SELECT article, COUNT(*) AS n FROM votes GROUP BY article) c ON a.id = c.article WHERE a.id = ?",
    // diamond: one base table on two paths (a self-join)
    "SELECT v1.article, v1.id, v2.id FROM votes v1 JOIN votes v2 ON v1.usr = v2.usr WHERE v1.article = ?",
    // the same diamond under an aggregate
    "SELECT v1.article, COUNT(*) AS pairs FROM votes v1 JOIN votes v2 ON v1.usr = v2.usr WHERE v1.article = ? GROUP BY v1.article",
    // diamond: a UNION of two filters of one table, aggregated
    "SELECT k, COUNT(*) AS n FROM (SELECT article AS k FROM votes WHERE score > 2 UNION ALL SELECT article AS k FROM votes WHERE usr < 5) u GROUP BY k",
    // plain partial reader over a filter
    "SELECT id, usr, score FROM votes WHERE usr = ? AND score >= 0",
    // large partitions, saved as changes inside them: one reader key with
    // every row, and an aggregate partition with 187 groups
    "SELECT id, score FROM votes",
    "SELECT article, usr, COUNT(*) AS n, MAX(score) AS m FROM votes GROUP BY article, usr",
    // order matters: restored rows must come back sorted
    "SELECT id, score FROM votes WHERE article = ? ORDER BY score DESC, id LIMIT 5",
    "SELECT id, usr, score FROM votes ORDER BY usr, score DESC, id",
    // windows: partial (keyed by the parameter), full, and a top-k whose
    // one large partition is saved as the row deltas applied inside it
    "SELECT id, usr, ROW_NUMBER() OVER (PARTITION BY usr ORDER BY score DESC, id) AS rn FROM votes WHERE article = ?",
    "SELECT id, SUM(score) OVER (PARTITION BY article ORDER BY id) AS s FROM votes",
    "SELECT a.id, t.id FROM articles a JOIN (SELECT id, article FROM votes ORDER BY score DESC, id LIMIT 7) t ON t.article = a.id",
];

struct Node {
    storage: Arc<Storage>,
    df: Arc<Dataflow>,
    store: SnapshotStore,
}

fn open(dir: &Path) -> Node {
    let storage = Storage::open(StorageConfig {
        data_dir: dir.to_path_buf(),
        durability: Durability::Async,
        block_cache_bytes: 8 << 20,
        wal_dir: None,
        async_flush_interval: Duration::from_millis(5),
        wal_recovery: Default::default(),
        disk_reserve: 0,
    })
    .unwrap();
    storage.create_database(DB, true).unwrap();
    let df = engine(&storage);
    let store = SnapshotStore::open(dir.join("snapshots"), SnapshotConfig::default()).unwrap();
    Node { storage, df, store }
}

/// A dataflow engine over `storage` (no eviction).
fn engine(storage: &Arc<Storage>) -> Arc<Dataflow> {
    Dataflow::new(
        storage.clone(),
        DataflowConfig {
            memory_limit: BIG,
            ..Default::default()
        },
    )
    .unwrap()
}

/// Opens and recovers.
fn restart(dir: &Path) -> (Node, RecoveryStats) {
    let n = open(dir);
    let mut phases = Vec::new();
    let stats =
        n.df.recover(&n.store, &mut |p| phases.push(p.phase))
            .unwrap();
    assert!(phases.contains(&"load"));
    (n, stats)
}

fn env_of(n: &Node) -> Env {
    Env {
        storage: n.storage.clone(),
        df: n.df.clone(),
    }
}

fn create_tables(n: &Node) -> (Arc<TableSchema>, Arc<TableSchema>) {
    let e = env_of(n);
    let votes = e.table(
        "votes",
        &[
            ("id", int()),
            ("article", int()),
            ("usr", int()),
            ("score", int()),
        ],
    );
    let articles = e.table("articles", &[("id", int()), ("title", text())]);
    e.insert(
        &articles,
        (0..20).map(|k| r(&[i(k), s(&format!("t{k}"))])).collect(),
    );
    (votes, articles)
}

fn vote(id: i64) -> Row {
    r(&[i(id), i(id % 17), i(id % 11), i(id % 5)])
}

fn insert_votes(n: &Node, votes: &TableSchema, ids: std::ops::Range<i64>) {
    n.storage
        .write(vec![WriteOp::Insert {
            table: votes.id,
            schema_version: votes.version,
            rows: ids.map(vote).collect(),
            on_conflict: OnConflict::Error,
            auto_value_on_zero: true,
            id_batches: ladle_storage::IdBatches::PerRow,
            returning: None,
        }])
        .unwrap();
}

/// Reads every view at a fixed set of parameters (filling those keys).
fn answers(n: &Node) -> Vec<Vec<String>> {
    answers_for(n, VIEWS)
}

/// The views whose keys hold few rows (not the self-joins).
fn local_views() -> Vec<&'static str> {
    VIEWS
        .iter()
        .copied()
        .filter(|v| !v.contains("v1"))
        .collect()
}

fn answers_for(n: &Node, views: &[&str]) -> Vec<Vec<String>> {
    let e = env_of(n);
    let mut out = Vec::new();
    for sql in views {
        let p = e.prepare(sql);
        let params: Vec<Vec<Value>> = if p.param_count() == 0 {
            vec![vec![]]
        } else {
            (0..6).map(|k| vec![i(k * 3)]).collect()
        };
        for ps in params {
            out.push(render(p.execute(&ps).unwrap(), false));
        }
    }
    out
}

/// The same answers from a fresh engine without snapshots (the node's
/// engine is replaced as the storage's commit observer).
fn recompute(n: Node) -> Vec<Vec<String>> {
    recompute_for(n, VIEWS)
}

fn recompute_for(n: Node, views: &[&str]) -> Vec<Vec<String>> {
    let scratch = tempfile::tempdir().unwrap();
    let Node { storage, df, .. } = n;
    drop(df);
    let df = engine(&storage);
    answers_for(
        &Node {
            storage: storage.clone(),
            df,
            store: SnapshotStore::open(scratch.path(), Default::default()).unwrap(),
        },
        views,
    )
}

fn cached_keys(n: &Node) -> Vec<(String, u64, u64)> {
    let mut v: Vec<(String, u64, u64)> =
        n.df.view_stats()
            .into_iter()
            .map(|s| (s.query, s.cached_keys, s.cached_rows))
            .collect();
    v.sort();
    v
}

#[test]
fn restart_restores_views_and_replays_later_writes() {
    let dir = tempfile::tempdir().unwrap();
    let n = open(dir.path());
    let (votes, _) = create_tables(&n);
    insert_votes(&n, &votes, 0..300);
    let before = answers(&n);
    let snap: SnapshotStats = n.df.snapshot(&n.store).unwrap();
    assert_eq!(snap.epoch, 1);
    assert!(snap.full_nodes > 0 && snap.nodes == snap.full_nodes);
    assert!(snap.rows_written > 0);
    // Writes after the snapshot: only in the change log.
    insert_votes(&n, &votes, 300..400);
    n.storage
        .write(vec![WriteOp::Delete {
            table: votes.id,
            schema_version: votes.version,
            scan: ladle_storage::ScanSpec::Full,
            filter: Arc::new(|r: &Row| Ok(r[0] == Value::Int(7) || r[0] == Value::Int(301))),
        }])
        .unwrap();
    let expected = answers(&n);
    assert_ne!(before, expected);
    let keys_before = cached_keys(&n);
    drop(n);

    let (n, stats) = restart(dir.path());
    assert_eq!(stats.epoch, Some(1));
    assert_eq!(stats.nodes_cold, 0, "{stats:?}");
    assert!(stats.nodes_restored > 0);
    assert_eq!(stats.replayed_batches, 2);
    assert_eq!(stats.replayed_deltas, 102);
    // Holes stay holes: the same keys are cached as before the restart.
    assert_eq!(cached_keys(&n), keys_before);
    let got = answers(&n);
    assert_eq!(got, expected);
    // Every read was answered from restored state.
    assert!(n.df.view_stats().iter().all(|v| v.misses == 0));
    assert_eq!(recompute(n), expected);
}

#[test]
fn views_answer_before_interior_state_is_restored() {
    let dir = tempfile::tempdir().unwrap();
    let n = open(dir.path());
    let (votes, _) = create_tables(&n);
    insert_votes(&n, &votes, 0..300);
    let before = answers(&n);
    n.df.snapshot(&n.store).unwrap();
    drop(n);

    // Nothing to replay: the readers hold the current answers, so the views
    // answer before the aggregates below them are installed.
    let n = open(dir.path());
    let decoded = Dataflow::decode_snapshot(&n.store, &mut |_| {});
    let full = env_of(&n).prepare(VIEWS[0]);
    let mut early = None;
    let stats =
        n.df.install_snapshot(decoded, &mut |_| {}, &mut || {
            early = Some(render(full.execute(&[]).unwrap(), false));
        })
        .unwrap();
    assert_eq!(early.as_ref(), Some(&before[0]), "the callback ran, early");
    assert_eq!(stats.nodes_cold, 0, "{stats:?}");
    assert_eq!(answers(&n), before);
    // The interior state arrived: writes now go through it.
    insert_votes(&n, &votes, 300..360);
    set_score(&n, &votes, 5, 4);
    let after = answers(&n);
    assert_ne!(after, before);
    assert!(n.df.view_stats().iter().all(|v| v.misses == 0));
    assert_eq!(recompute(n), after);
}

/// A view over `articles` only: unchanged by vote writes.
const ARTICLE_VIEW: &str = "SELECT id, title FROM articles WHERE id = ?";

fn read_articles(n: &Node) -> Vec<String> {
    let e = env_of(n);
    (0..5).flat_map(|k| e.q(ARTICLE_VIEW, &[i(k)])).collect()
}

fn set_score(n: &Node, votes: &TableSchema, id: i64, score: i64) {
    n.storage
        .write(vec![WriteOp::Update {
            table: votes.id,
            schema_version: votes.version,
            scan: ladle_storage::ScanSpec::Full,
            update: Arc::new(move |r: &Row| {
                Ok((r[0] == Value::Int(id)).then(|| {
                    let mut r = r.clone();
                    r[3] = Value::Int(score);
                    r
                }))
            }),
        }])
        .unwrap();
}

#[test]
fn consistent_cut_under_concurrent_writes_across_diamonds() {
    let dir = tempfile::tempdir().unwrap();
    let n = open(dir.path());
    let (votes, _) = create_tables(&n);
    insert_votes(&n, &votes, 0..200);
    answers(&n);
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..3i64 {
        let storage = n.storage.clone();
        let votes = votes.clone();
        let stop = stop.clone();
        writers.push(thread::spawn(move || {
            let mut k = 0i64;
            while !stop.load(Ordering::Relaxed) {
                let id = 1000 + w * 100_000 + k;
                // An insert, an update crossing the UNION's filters, and a
                // delete of an older row, each its own commit.
                storage
                    .write(vec![WriteOp::Insert {
                        table: votes.id,
                        schema_version: votes.version,
                        rows: vec![vote(id)],
                        on_conflict: OnConflict::Error,
                        auto_value_on_zero: true,
                        id_batches: ladle_storage::IdBatches::PerRow,
                        returning: None,
                    }])
                    .unwrap();
                let target = (k * 7 + w) % 200;
                storage
                    .write(vec![WriteOp::Update {
                        table: votes.id,
                        schema_version: votes.version,
                        scan: ladle_storage::ScanSpec::Full,
                        update: Arc::new(move |r: &Row| {
                            Ok((r[0] == Value::Int(target)).then(|| {
                                let mut r = r.clone();
                                r[3] = Value::Int((r[3].as_i64().unwrap() + 1) % 5);
                                r[2] = Value::Int((r[2].as_i64().unwrap() + 3) % 11);
                                r
                            }))
                        }),
                    }])
                    .unwrap();
                if k % 3 == 0 {
                    let victim = id - 2;
                    storage
                        .write(vec![WriteOp::Delete {
                            table: votes.id,
                            schema_version: votes.version,
                            scan: ladle_storage::ScanSpec::Full,
                            filter: Arc::new(move |r: &Row| Ok(r[0] == Value::Int(victim))),
                        }])
                        .unwrap();
                }
                k += 1;
            }
        }));
    }
    // Readers fill keys while snapshots are taken.
    let mut last = None;
    for round in 0..6 {
        thread::sleep(Duration::from_millis(30));
        let e = env_of(&n);
        e.q(VIEWS[6], &[i(round % 11)]);
        e.q(VIEWS[1], &[i(round + 1)]);
        last = Some(n.df.snapshot(&n.store).unwrap());
    }
    thread::sleep(Duration::from_millis(30));
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    let last = last.unwrap();
    assert!(last.epoch >= 6);
    assert!(
        n.storage.last_lsn() > last.lsn,
        "writes after the last snapshot"
    );
    // Writes propagate asynchronously: let the views catch up first.
    n.df.settle();
    let keys_before = cached_keys(&n);
    drop(n);

    let (n, stats) = restart(dir.path());
    assert_eq!(stats.epoch, Some(last.epoch));
    assert_eq!(stats.lsn, last.lsn);
    assert!(stats.replayed_batches > 0);
    assert_eq!(stats.nodes_cold, 0);
    assert_eq!(cached_keys(&n), keys_before);
    let got = answers(&n);
    assert_eq!(got, recompute(n));
}

#[test]
fn incremental_epochs_write_only_what_changed() {
    let dir = tempfile::tempdir().unwrap();
    let n = open(dir.path());
    let (votes, _) = create_tables(&n);
    insert_votes(&n, &votes, 0..2000);
    answers_for(&n, &local_views());
    read_articles(&n);
    let first = n.df.snapshot(&n.store).unwrap();
    assert_eq!(first.full_nodes, first.nodes);

    // Nothing changed: every node is reused.
    let idle = n.df.snapshot(&n.store).unwrap();
    assert_eq!((idle.nodes, idle.nodes_written), (first.nodes, 0));

    // One vote of article 3 (user 3) changes score: only the nodes above
    // `votes` change, and only their partitions holding it.
    set_score(&n, &votes, 3, 4);
    let second = n.df.snapshot(&n.store).unwrap();
    assert_eq!(second.full_nodes, 0, "{second:?}");
    assert!(second.nodes_written > 0);
    assert!(
        second.nodes_written < second.nodes,
        "the articles view is reused: {second:?}"
    );
    // Small changed partitions are rewritten whole, large ones as the
    // changes inside them, unchanged ones not at all.
    assert!(
        second.rows_written * 20 < first.rows_written,
        "{second:?} vs {first:?}"
    );
    assert!(second.bytes_written * 20 < first.bytes_written);

    // An eviction-like change: a key that is no longer filled is a tombstone.
    set_score(&n, &votes, 6, 0);
    let third = n.df.snapshot(&n.store).unwrap();
    assert_eq!(third.full_nodes, 0);
    let expected = answers_for(&n, &local_views());
    let articles = read_articles(&n);
    let keys_before = cached_keys(&n);
    drop(n);

    let (n, stats) = restart(dir.path());
    assert_eq!(stats.epoch, Some(third.epoch));
    assert_eq!(stats.replayed_batches, 0);
    // Partial state comes back as it was: the same keys, holes stay holes.
    assert_eq!(cached_keys(&n), keys_before);
    assert_eq!(answers_for(&n, &local_views()), expected);
    assert_eq!(read_articles(&n), articles);
    assert!(n.df.view_stats().iter().all(|v| v.misses == 0));

    // Chains grow past the compaction limit; compaction merges them (row
    // deltas and group changes included) and the merged state restores.
    for k in 0..5 {
        set_score(&n, &votes, 9 + 17 * k, k % 5);
        insert_votes(&n, &votes, 5000 + k..5001 + k);
        n.df.snapshot(&n.store).unwrap();
    }
    let longest = n.store.retained().last().unwrap().longest_chain;
    assert!(longest > 4, "chain of {longest}");
    let compacted = n.df.compact_snapshots(&n.store).unwrap();
    assert!(compacted.nodes_compacted > 0, "{compacted:?}");
    assert_eq!(compacted.nodes_skipped, 0);
    set_score(&n, &votes, 9, 1);
    n.df.snapshot(&n.store).unwrap();
    // Chains of at most 4 files are left alone; the merged ones restart at 2.
    assert!(n.store.retained().last().unwrap().longest_chain <= 5);
    let expected = answers_for(&n, &local_views());
    drop(n);
    let (n, stats) = restart(dir.path());
    assert!(stats.epoch.is_some());
    assert_eq!(stats.nodes_cold, 0);
    assert_eq!(answers_for(&n, &local_views()), expected);
    assert_eq!(recompute_for(n, &local_views()), expected);
}

/// The node files of `epoch` (not the manifest), largest first.
fn node_files(dir: &Path, epoch: u64) -> Vec<std::path::PathBuf> {
    let d = dir.join("snapshots").join(format!("{epoch:020}"));
    let mut files: Vec<(u64, std::path::PathBuf)> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            !p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("MANIFEST")
        })
        .map(|p| (std::fs::metadata(&p).unwrap().len(), p))
        .collect();
    files.sort();
    files.reverse();
    files.into_iter().map(|f| f.1).collect()
}

fn damaged_newest_epoch_falls_back(damage: impl Fn(&Path)) {
    let dir = tempfile::tempdir().unwrap();
    let n = open(dir.path());
    let (votes, _) = create_tables(&n);
    insert_votes(&n, &votes, 0..300);
    answers(&n);
    let first = n.df.snapshot(&n.store).unwrap();
    insert_votes(&n, &votes, 300..350);
    set_score(&n, &votes, 17, 0);
    let second = n.df.snapshot(&n.store).unwrap();
    insert_votes(&n, &votes, 350..360);
    let expected = answers(&n);
    drop(n);

    let files = node_files(dir.path(), second.epoch);
    assert!(!files.is_empty());
    damage(&files[0]);
    let (n, stats) = restart(dir.path());
    assert_eq!(stats.epoch, Some(first.epoch), "{stats:?}");
    assert!(!stats.rejected.is_empty());
    // Replayed from the older epoch's LSN: the log was kept for it.
    assert!(stats.replayed_batches >= 3);
    assert_eq!(answers(&n), expected);
    assert_eq!(recompute(n), expected);
}

#[test]
fn corrupted_node_file_means_the_previous_epoch() {
    damaged_newest_epoch_falls_back(|p| {
        let mut bytes = std::fs::read(p).unwrap();
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0x5a;
        std::fs::write(p, bytes).unwrap();
    });
}

#[test]
fn truncated_node_file_means_the_previous_epoch() {
    damaged_newest_epoch_falls_back(|p| {
        let len = std::fs::metadata(p).unwrap().len();
        let f = std::fs::OpenOptions::new().write(true).open(p).unwrap();
        f.set_len(len / 2).unwrap();
    });
}

#[test]
fn log_truncation_never_drops_a_needed_entry() {
    let dir = tempfile::tempdir().unwrap();
    let n = open(dir.path());
    let (votes, _) = create_tables(&n);
    insert_votes(&n, &votes, 0..100);
    drop(n);
    let mut next_id = 100;
    for round in 0..8i64 {
        let (n, stats) = restart(dir.path());
        if round > 0 {
            assert!(stats.epoch.is_some() || round == 1, "{stats:?}");
        }
        assert!(!answers(&n).is_empty());
        // Writes, some snapshots (0, 1 or 2 per round), more writes.
        insert_votes(&n, &votes, next_id..next_id + 20);
        next_id += 20;
        set_score(&n, &votes, round * 5, (round + 2) % 5);
        for _ in 0..(round % 3) {
            n.df.snapshot(&n.store).unwrap();
            insert_votes(&n, &votes, next_id..next_id + 5);
            next_id += 5;
        }
        env_of(&n).q(VIEWS[6], &[i(round % 11)]);
        let expected = answers(&n);
        drop(n);
        let (n, _) = restart(dir.path());
        assert_eq!(answers(&n), expected, "round {round}");
        assert_eq!(recompute(n), expected, "round {round}");
    }
}

#[test]
fn add_column_after_a_snapshot_leaves_its_views_cold_but_correct() {
    let dir = tempfile::tempdir().unwrap();
    let n = open(dir.path());
    let (votes, articles) = create_tables(&n);
    insert_votes(&n, &votes, 0..200);
    answers(&n);
    read_articles(&n);
    n.df.snapshot(&n.store).unwrap();
    insert_votes(&n, &votes, 200..220);
    // ALTER TABLE votes ADD COLUMN extra, then rows that have it.
    n.storage
        .add_column(DB, "votes", ColumnSchema::new("extra", int()))
        .unwrap();
    n.df.table_changed(votes.id);
    let votes2 = n.storage.table(DB, "votes").unwrap();
    n.storage
        .write(vec![WriteOp::Insert {
            table: votes2.id,
            schema_version: votes2.version,
            rows: (220..230)
                .map(|id| {
                    let mut r = vote(id);
                    r.push(i(id));
                    r
                })
                .collect(),
            on_conflict: OnConflict::Error,
            auto_value_on_zero: true,
            id_batches: ladle_storage::IdBatches::PerRow,
            returning: None,
        }])
        .unwrap();
    n.storage
        .write(vec![WriteOp::Insert {
            table: articles.id,
            schema_version: articles.version,
            rows: vec![r(&[i(3000), s("late")])],
            on_conflict: OnConflict::Error,
            auto_value_on_zero: true,
            id_batches: ladle_storage::IdBatches::PerRow,
            returning: None,
        }])
        .unwrap();
    let expected = answers(&n);
    let e = env_of(&n);
    let late = e.q(ARTICLE_VIEW, &[i(3000)]);
    drop(e);
    drop(n);

    let (n, stats) = restart(dir.path());
    assert!(stats.epoch.is_some());
    assert!(
        stats.nodes_cold > 0,
        "views over votes start cold: {stats:?}"
    );
    assert!(
        stats.nodes_restored > 0,
        "the articles view is restored: {stats:?}"
    );
    assert_eq!(answers(&n), expected);
    assert_eq!(env_of(&n).q(ARTICLE_VIEW, &[i(3000)]), late);
    assert_eq!(recompute(n), expected);
}

/// Pairs of the self-join view for article `a`, from the base table.
fn self_join_truth(storage: &Storage, votes: &TableSchema, a: i64) -> usize {
    let rows = storage.scan(votes.id).unwrap();
    rows.iter()
        .filter(|x| x[1] == Value::Int(a))
        .map(|x| rows.iter().filter(|y| y[2] == x[2]).count())
        .sum()
}

/// Inserts, updates moving rows across join keys, and deletes of rows the
/// same ops inserted: as one commit, or as many.
fn churn(votes: &TableSchema) -> Vec<WriteOp> {
    let mut ops = Vec::new();
    for k in 0..60i64 {
        let id = 1000 + k;
        ops.push(WriteOp::Insert {
            table: votes.id,
            schema_version: votes.version,
            rows: vec![vote(id)],
            on_conflict: OnConflict::Error,
            auto_value_on_zero: true,
            id_batches: ladle_storage::IdBatches::PerRow,
            returning: None,
        });
        let target = (k * 7) % 200;
        ops.push(WriteOp::Update {
            table: votes.id,
            schema_version: votes.version,
            scan: ladle_storage::ScanSpec::Full,
            update: Arc::new(move |r: &Row| {
                Ok((r[0] == Value::Int(target)).then(|| {
                    let mut r = r.clone();
                    r[3] = Value::Int((r[3].as_i64().unwrap() + 1) % 5);
                    r[2] = Value::Int((r[2].as_i64().unwrap() + 3) % 11);
                    r
                }))
            }),
        });
        if k % 3 == 0 {
            let victim = id - 2;
            ops.push(WriteOp::Delete {
                table: votes.id,
                schema_version: votes.version,
                scan: ladle_storage::ScanSpec::Full,
                filter: Arc::new(move |r: &Row| Ok(r[0] == Value::Int(victim))),
            });
        }
    }
    ops
}

/// Regression: a self-join's input node lists the join twice among its
/// children; propagation sent it every delta twice, so deletes were
/// subtracted twice (with or without snapshots).
#[test]
fn self_join_sees_each_batch_once() {
    let e = env(BIG);
    let votes = e.table(
        "votes",
        &[
            ("id", int()),
            ("article", int()),
            ("usr", int()),
            ("score", int()),
        ],
    );
    e.insert(&votes, (0..200).map(vote).collect());
    let keys = [0i64, 3, 6, 9, 12, 15];
    for a in keys {
        e.q(VIEWS[3], &[i(a)]);
        e.q(VIEWS[4], &[i(a)]);
    }
    e.storage.write(churn(&votes)).unwrap();
    for a in keys {
        let truth = self_join_truth(&e.storage, &votes, a);
        assert_eq!(e.q(VIEWS[3], &[i(a)]).len(), truth, "article {a}");
        assert_eq!(e.q(VIEWS[4], &[i(a)]), vec![format!("{a} {truth}")]);
    }
}

/// Many commits after the snapshot, replayed as one batch through the
/// self-joins: exact.
#[test]
fn replay_of_many_commits_through_a_self_join_is_exact() {
    let dir = tempfile::tempdir().unwrap();
    let n = open(dir.path());
    let (votes, _) = create_tables(&n);
    insert_votes(&n, &votes, 0..200);
    answers(&n);
    n.df.snapshot(&n.store).unwrap();
    for op in churn(&votes) {
        n.storage.write(vec![op]).unwrap();
    }
    let expected = answers(&n);
    drop(n);
    let (n, stats) = restart(dir.path());
    assert!(stats.replayed_batches >= 100);
    assert_eq!(answers(&n), expected);
    for a in [0i64, 3, 6, 9, 12, 15] {
        assert_eq!(
            env_of(&n).q(VIEWS[3], &[i(a)]).len(),
            self_join_truth(&n.storage, &votes, a)
        );
    }
}

/// Run by `crash_at_each_phase_falls_back_to_the_previous_epoch` in a child
/// process: recovers, writes, and takes a snapshot that aborts the process
/// at the phase `LADLE_SNAPSHOT_CRASH` names.
#[test]
#[ignore]
fn crash_child() {
    let Ok(dir) = std::env::var("LADLE_CRASH_TEST_DIR") else {
        return;
    };
    let (n, _) = restart(Path::new(&dir));
    let votes = n.storage.table(DB, "votes").unwrap();
    insert_votes(&n, &votes, 250..300);
    set_score(&n, &votes, 4, 0);
    answers(&n);
    let _ = n.df.snapshot(&n.store);
    // Not reached when the hook works.
    std::process::exit(3);
}

#[test]
fn crash_at_each_phase_falls_back_to_the_previous_epoch() {
    for phase in ["capture", "write", "manifest", "rename"] {
        let dir = tempfile::tempdir().unwrap();
        let n = open(dir.path());
        let (votes, _) = create_tables(&n);
        insert_votes(&n, &votes, 0..200);
        answers(&n);
        let first = n.df.snapshot(&n.store).unwrap();
        insert_votes(&n, &votes, 200..250);
        drop(n);

        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["crash_child", "--exact", "--ignored", "--nocapture"])
            .env("LADLE_SNAPSHOT_CRASH", phase)
            .env("LADLE_CRASH_TEST_DIR", dir.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(
            !status.success() && status.code() != Some(3),
            "{phase}: {status:?}"
        );

        let (n, stats) = restart(dir.path());
        assert_eq!(stats.epoch, Some(first.epoch), "{phase}: {stats:?}");
        assert_eq!(stats.nodes_cold, 0, "{phase}");
        // The epoch the crash interrupted left nothing behind.
        let epochs = std::fs::read_dir(dir.path().join("snapshots"))
            .unwrap()
            .count();
        assert_eq!(epochs, 1, "{phase}");
        let got = answers(&n);
        // A snapshot after the crash works and builds on the old epoch.
        let next = n.df.snapshot(&n.store).unwrap();
        assert!(next.epoch > first.epoch);
        assert_eq!(got, recompute(n), "{phase}");
    }
}

#[test]
fn snapshots_of_another_database_are_not_restored() {
    let a = tempfile::tempdir().unwrap();
    let n = open(a.path());
    let (votes, _) = create_tables(&n);
    insert_votes(&n, &votes, 0..200);
    answers(&n);
    n.df.snapshot(&n.store).unwrap();
    drop(n);

    // Same schema and views, other rows, a later LSN.
    let b = tempfile::tempdir().unwrap();
    let n = open(b.path());
    let (votes, _) = create_tables(&n);
    insert_votes(&n, &votes, 100..150);
    insert_votes(&n, &votes, 150..170);
    insert_votes(&n, &votes, 170..180);
    answers(&n);
    drop(n);
    let target = b.path().join("snapshots");
    std::fs::remove_dir_all(&target).unwrap();
    std::fs::create_dir(&target).unwrap();
    for epoch in std::fs::read_dir(a.path().join("snapshots")).unwrap() {
        let epoch = epoch.unwrap().path();
        let to = target.join(epoch.file_name().unwrap());
        std::fs::create_dir(&to).unwrap();
        for f in std::fs::read_dir(&epoch).unwrap() {
            let f = f.unwrap().path();
            std::fs::copy(&f, to.join(f.file_name().unwrap())).unwrap();
        }
    }

    let (n, stats) = restart(b.path());
    assert_eq!(stats.epoch, None, "{stats:?}");
    assert!(stats
        .rejected
        .iter()
        .any(|r| r.contains("another database")));
    let got = answers(&n);
    assert_eq!(got, recompute(n));
}

#[test]
fn change_log_truncated_past_the_snapshot_means_a_cold_start() {
    let dir = tempfile::tempdir().unwrap();
    let n = open(dir.path());
    let (votes, _) = create_tables(&n);
    insert_votes(&n, &votes, 0..200);
    answers(&n);
    let snap = n.df.snapshot(&n.store).unwrap();
    insert_votes(&n, &votes, 200..210);
    insert_votes(&n, &votes, 210..220);
    // As if the log had been truncated beyond what this snapshot needs.
    n.storage.truncate_log(snap.lsn + 2).unwrap();
    n.storage
        .put_meta(
            "dataflow/snapshot/log-truncated-below",
            &(snap.lsn + 2).to_be_bytes(),
        )
        .unwrap();
    drop(n);
    let (n, stats) = restart(dir.path());
    assert_eq!(stats.epoch, None, "{stats:?}");
    assert!(
        stats.rejected.iter().any(|r| r.contains("truncated")),
        "{stats:?}"
    );
    assert_eq!(stats.nodes_restored, 0);
    let got = answers(&n);
    assert_eq!(got, recompute(n));
}
