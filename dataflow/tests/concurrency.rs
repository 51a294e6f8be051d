//! Concurrency stress: writers, readers, upqueries and evictions at once;
//! afterwards every view equals a recompute. Also races a write with a
//! replay (invariant 4: no delta lost or doubled).

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;

use common::*;
use ladle_common::{Row, Value};
use ladle_storage::{OnConflict, RowFilter, ScanSpec, WriteOp};

const VOTE: &str = "SELECT Article.id, title, VoteCount.votes FROM Article LEFT JOIN (SELECT article_id, COUNT(user) AS votes FROM Vote GROUP BY article_id) AS VoteCount ON Article.id = VoteCount.article_id WHERE Article.id = ?";

fn expected_votes(e: &Env, vote: u64, article: i64) -> Option<i64> {
    let n = e
        .storage
        .scan(vote)
        .unwrap()
        .iter()
        .filter(|r| r[1] == Value::Int(article) && !r[2].is_null())
        .count();
    (n > 0).then_some(n as i64)
}

fn stress(memory_limit: usize) {
    let e = Arc::new(env(memory_limit));
    let a = e.table("Article", &[("id", int()), ("title", text())]);
    let v = e.table(
        "Vote",
        &[("id", int()), ("article_id", int()), ("user", int())],
    );
    e.insert(
        &a,
        (0..50).map(|k| r(&[i(k), s(&format!("t{k}"))])).collect(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let mut handles = Vec::new();
    for w in 0..3i64 {
        let (e, stop) = (e.clone(), stop.clone());
        let (vid, aid) = (v.id, a.id);
        let (v_version, a_version) = (v.version, a.version);
        handles.push(thread::spawn(move || {
            let mut n = 0i64;
            while !stop.load(Ordering::Relaxed) && n < 400 {
                n += 1;
                let id = w * 1_000_000 + n;
                let row: Row = vec![
                    Value::Int(id),
                    Value::Int((id * 7) % 50),
                    Value::Int(n % 13),
                ];
                let mut ops = vec![WriteOp::Insert {
                    table: vid,
                    schema_version: v_version,
                    rows: vec![row],
                    on_conflict: OnConflict::Error,
                    auto_value_on_zero: true,
                    id_batches: ladle_storage::IdBatches::PerRow,
                    returning: None,
                }];
                if n % 5 == 0 {
                    let victim = id - 3;
                    let filter: RowFilter = Arc::new(move |r: &Row| Ok(r[0] == Value::Int(victim)));
                    ops.push(WriteOp::Delete {
                        table: vid,
                        schema_version: v_version,
                        scan: ScanSpec::Full,
                        filter,
                    });
                }
                if n % 17 == 0 {
                    let t = (n % 50, format!("title{n}"));
                    let up: ladle_storage::RowUpdater =
                        Arc::new(move |r: &Row| {
                            Ok((r[0] == Value::Int(t.0))
                                .then(|| vec![r[0].clone(), Value::text(&t.1)]))
                        });
                    ops.push(WriteOp::Update {
                        table: aid,
                        schema_version: a_version,
                        scan: ScanSpec::Full,
                        update: up,
                    });
                }
                e.storage.write(ops).unwrap();
            }
        }));
    }
    for rd in 0..3i64 {
        let (e, stop) = (e.clone(), stop.clone());
        handles.push(thread::spawn(move || {
            let p = e.prepare(VOTE);
            let c = e.prepare("SELECT article_id, COUNT(*) FROM Vote GROUP BY article_id");
            let mut k = rd;
            while !stop.load(Ordering::Relaxed) {
                k = (k * 31 + 7) % 50;
                let rows = p.execute(&[Value::Int(k)]).unwrap();
                assert_eq!(rows.len(), 1);
                if k % 10 == 0 {
                    c.execute(&[]).unwrap();
                }
            }
        }));
    }
    // Let the writers finish, then stop readers.
    for h in handles.drain(..3) {
        h.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().unwrap();
    }
    let p = e.prepare(VOTE);
    for k in 0..50 {
        let rows = p.execute(&[Value::Int(k)]).unwrap();
        let want = expected_votes(&e, v.id, k)
            .map(Value::Int)
            .unwrap_or(Value::Null);
        assert_eq!(rows[0][2], want, "article {k}");
    }
    let c = e.prepare("SELECT article_id, COUNT(*) FROM Vote GROUP BY article_id");
    let mut got: Vec<(i64, i64)> = c
        .execute(&[])
        .unwrap()
        .iter()
        .map(|r| (r[0].as_i64().unwrap(), r[1].as_i64().unwrap()))
        .collect();
    got.sort();
    let mut want: Vec<(i64, i64)> = (0..50)
        .filter_map(|k| expected_votes(&e, v.id, k).map(|n| (k, n)))
        .collect();
    want.sort();
    assert_eq!(got, want);
    if memory_limit < 10_000 {
        assert!(
            e.df.memory_bytes() <= memory_limit,
            "memory {} over {}",
            e.df.memory_bytes(),
            memory_limit
        );
    }
}

#[test]
fn stress_with_plenty_of_memory() {
    stress(1 << 30);
}

#[test]
fn stress_with_tiny_memory_limit() {
    stress(4_000);
}

/// A reader miss (replay) racing writes to the key it fills: the count
/// must equal the number of rows, never one more or less.
#[test]
fn replay_races_write() {
    let e = Arc::new(env(1 << 30));
    let v = e.table(
        "Vote",
        &[("id", int()), ("article_id", int()), ("user", int())],
    );
    let q = "SELECT COUNT(*) FROM Vote WHERE article_id = ?";
    for round in 0..30i64 {
        let e2 = e.clone();
        let (vid, v_version) = (v.id, v.version);
        let writer = thread::spawn(move || {
            for n in 0..20i64 {
                let id = round * 1000 + n;
                e2.storage
                    .write(vec![WriteOp::Insert {
                        table: vid,
                        schema_version: v_version,
                        rows: vec![vec![Value::Int(id), Value::Int(round), Value::Int(n)]],
                        on_conflict: OnConflict::Error,
                        auto_value_on_zero: true,
                        id_batches: ladle_storage::IdBatches::PerRow,
                        returning: None,
                    }])
                    .unwrap();
            }
        });
        // The first read of this key is a miss racing the writer.
        let p = e.prepare(q);
        let _ = p.execute(&[Value::Int(round)]).unwrap();
        writer.join().unwrap();
        let rows = p.execute(&[Value::Int(round)]).unwrap();
        assert_eq!(rows, vec![vec![Value::Int(20)]], "round {round}");
    }
    let stats = e.df.view_stats();
    assert_eq!(stats.len(), 1);
    assert!(stats[0].upqueries >= 30 && stats[0].misses >= 30 && stats[0].hits >= 1);
}

#[test]
fn table_changed_rebuilds_views() {
    let e = env(1 << 30);
    let t = e.table("t", &[("id", int()), ("x", int())]);
    e.insert(&t, vec![r(&[i(1), i(2)])]);
    let p = e.prepare("SELECT * FROM t WHERE id = ?");
    assert_eq!(p.execute(&[i(1)]).unwrap(), vec![vec![i(1), i(2)]]);
    let col = ladle_common::ColumnSchema::new("y", int());
    let t2 = e.storage.add_column(DB, "t", col).unwrap();
    e.df.table_changed(t2.id);
    assert!(e.df.view_stats().is_empty());
    // The old handle re-plans; a new prepare sees the new column.
    assert_eq!(p.execute(&[i(1)]).unwrap()[0][0], i(1));
    assert_eq!(e.prepare("SELECT * FROM t WHERE id = ?").columns().len(), 3);
}

/// Misses filled outside the locks race writes (inserts, deletes and a
/// joined row's update) to the keys they fill, on views without an
/// aggregate, with a join, and with a keyed aggregate. A fill installed
/// over a write it did not see would lose that row; one installed after
/// seeing it, and then also getting its delta, would double it: either
/// differs from the recompute.
#[test]
fn unlocked_fills_race_writes() {
    let e = Arc::new(env(1 << 30));
    let a = e.table("Article", &[("id", int()), ("title", text())]);
    let v = e.table(
        "Vote",
        &[("id", int()), ("article_id", int()), ("user", int())],
    );
    let queries = [
        "SELECT id, user FROM Vote WHERE article_id = ?",
        "SELECT Vote.id, Article.title FROM Vote JOIN Article ON Vote.article_id = Article.id WHERE Vote.article_id = ?",
        "SELECT article_id, COUNT(*), SUM(user) FROM Vote WHERE article_id = ? GROUP BY article_id",
        // Shares the aggregate above: its fills read the partition the
        // real graph holds instead of recomputing it.
        "SELECT SUM(user), COUNT(*) FROM Vote WHERE article_id = ? GROUP BY article_id",
    ];
    let ps: Vec<_> = queries.iter().map(|q| e.prepare(q)).collect();
    for round in 0..30i64 {
        e.insert(&a, vec![r(&[i(round), s("before")])]);
        let (e2, vid, aid) = (e.clone(), v.id, a.id);
        let (v_version, a_version) = (v.version, a.version);
        let writer = thread::spawn(move || {
            for n in 0..20i64 {
                let id = round * 1000 + n;
                let mut ops = vec![WriteOp::Insert {
                    table: vid,
                    schema_version: v_version,
                    rows: vec![vec![Value::Int(id), Value::Int(round), Value::Int(n)]],
                    on_conflict: OnConflict::Error,
                    auto_value_on_zero: true,
                    id_batches: ladle_storage::IdBatches::PerRow,
                    returning: None,
                }];
                if n % 3 == 2 {
                    let victim = id - 1;
                    let filter: RowFilter = Arc::new(move |r: &Row| Ok(r[0] == Value::Int(victim)));
                    ops.push(WriteOp::Delete {
                        table: vid,
                        schema_version: v_version,
                        scan: ScanSpec::Full,
                        filter,
                    });
                }
                if n == 10 {
                    let up: ladle_storage::RowUpdater = Arc::new(move |r: &Row| {
                        Ok((r[0] == Value::Int(round))
                            .then(|| vec![r[0].clone(), Value::text("after")]))
                    });
                    ops.push(WriteOp::Update {
                        table: aid,
                        schema_version: a_version,
                        scan: ScanSpec::Full,
                        update: up,
                    });
                }
                e2.storage.write(ops).unwrap();
            }
        });
        // The first read of each view for this key is a miss racing the
        // writer.
        for k in [2, 3, 1, 0] {
            ps[k].execute(&[Value::Int(round)]).unwrap();
        }
        writer.join().unwrap();
        let votes = e.storage.scan(v.id).unwrap();
        let mine: Vec<&Row> = votes.iter().filter(|r| r[1] == Value::Int(round)).collect();
        let sorted = |mut rows: Vec<Row>| {
            rows.sort();
            rows
        };
        let got = sorted(ps[0].execute(&[Value::Int(round)]).unwrap());
        let want = sorted(
            mine.iter()
                .map(|r| vec![r[0].clone(), r[2].clone()])
                .collect(),
        );
        assert_eq!(got, want, "rows, round {round}");
        let got = sorted(ps[1].execute(&[Value::Int(round)]).unwrap());
        let want = sorted(
            mine.iter()
                .map(|r| vec![r[0].clone(), s("after")])
                .collect(),
        );
        assert_eq!(got, want, "joined rows, round {round}");
        let got = ps[2].execute(&[Value::Int(round)]).unwrap();
        let sum: i64 = mine.iter().map(|r| r[2].as_i64().unwrap()).sum();
        assert_eq!(got.len(), 1, "round {round}");
        assert_eq!(
            got[0][1],
            Value::Int(mine.len() as i64),
            "count, round {round}"
        );
        assert_eq!(got[0][2].as_f64(), Some(sum as f64), "sum, round {round}");
        let got = ps[3].execute(&[Value::Int(round)]).unwrap();
        assert_eq!(got.len(), 1, "round {round}");
        assert_eq!(
            got[0][0].as_f64(),
            Some(sum as f64),
            "shared sum, round {round}"
        );
        assert_eq!(
            got[0][1],
            Value::Int(mine.len() as i64),
            "shared count, round {round}"
        );
    }
    let unlocked = e.df.fill_stats().unlocked;
    assert!(unlocked > 0, "no miss was filled outside the locks");
}

/// Concurrent misses on one key are filled once: the other readers wait
/// for that fill and take its rows (a cold start's popular keys would
/// otherwise be computed by every page at once). Readers wait for the fill
/// however slow it is (a loaded machine, a cold start): a second fill is
/// allowed only for a key evicted as soon as it was filled, so the bound
/// below is 2, where uncoalesced reads upquery about once per reader (with
/// a 200 ms wait, a loaded machine made it 8 of 8).
#[test]
fn concurrent_misses_on_one_key_fill_it_once() {
    let e = Arc::new(env(1 << 30));
    let t = e.table("t", &[("id", int()), ("k", int())]);
    e.insert(&t, (0..20_000).map(|n| vec![i(n), i(n % 2)]).collect());
    let q = e.prepare("SELECT COUNT(*) FROM t WHERE k = ?");
    let readers = 8;
    let start = Arc::new(std::sync::Barrier::new(readers));
    let handles: Vec<_> = (0..readers)
        .map(|_| {
            let (q, start) = (q.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                q.execute(&[i(1)]).unwrap()
            })
        })
        .collect();
    let want = vec![vec![i(10_000)]];
    for h in handles {
        assert_eq!(h.join().unwrap(), want);
    }
    let stats = e.df.view_stats();
    let view = stats
        .iter()
        .find(|v| v.query.contains("FROM t WHERE k"))
        .expect("the view");
    assert!(
        view.upqueries <= 2,
        "{} upqueries for one key",
        view.upqueries
    );
}

/// A thread inserting rows `(n, n % 7)` into a table, from `n = first`,
/// one commit at a time, until stopped: the writes a fill races.
struct RacingWriter {
    done: Arc<AtomicBool>,
    thread: thread::JoinHandle<()>,
}

impl RacingWriter {
    /// Returns once the writer has committed twice (a loaded machine may
    /// start the thread late), so the read that follows races it.
    fn start(e: &Arc<Env>, t: &Arc<ladle_common::TableSchema>, first: i64) -> RacingWriter {
        let done = Arc::new(AtomicBool::new(false));
        let commits = Arc::new(AtomicUsize::new(0));
        let thread = {
            let (e, t, done, commits) = (e.clone(), t.clone(), done.clone(), commits.clone());
            thread::spawn(move || {
                let mut n = first;
                while !done.load(Ordering::SeqCst) {
                    e.insert(&t, vec![vec![i(n), i(n % 7)]]);
                    commits.fetch_add(1, Ordering::SeqCst);
                    n += 1;
                }
            })
        };
        while commits.load(Ordering::SeqCst) < 2 {
            thread::yield_now();
        }
        RacingWriter { done, thread }
    }

    fn stop(self) {
        self.done.store(true, Ordering::SeqCst);
        self.thread.join().unwrap();
    }
}

/// A fill under the locks (one that lost its race to writes, or a view with
/// no detached copy) holds the graph lock and reads a storage snapshot the
/// graph is caught up to, while writers keep committing (it held the commit
/// lock before: a cold fill of the Lobsters front page, ~1 s, stalled every
/// writer). Commits racing the fill must be neither lost nor counted twice:
/// those in the snapshot are in the filled rows, the rest reach the filled
/// key as deltas once the fill releases the graph lock.
#[test]
fn a_locked_fill_at_a_snapshot_stays_exact_under_racing_writes() {
    let e = Arc::new(env(1 << 30));
    let t = e.table("t", &[("id", int()), ("k", int())]);
    e.insert(&t, (0..60_000).map(|n| vec![i(n), i(n % 7)]).collect());
    for round in 0..3i64 {
        // A new view each round, so each round fills.
        let q = e.prepare(&format!("SELECT k, COUNT(*), {round} FROM t GROUP BY k"));
        let writer = RacingWriter::start(&e, &t, 1_000_000 * (round + 1));
        let rows = q.execute(&[]).unwrap();
        writer.stop();
        assert_eq!(rows.len(), 7, "round {round}");
        let total: i64 = q
            .execute(&[])
            .unwrap()
            .iter()
            .map(|r| r[1].as_i64().unwrap())
            .sum();
        assert_eq!(
            total as usize,
            e.storage.scan(t.id).unwrap().len(),
            "round {round}"
        );
    }
    // An aggregate over the whole table has no detached copy: its fills
    // run locked.
    let locked = e.df.fill_stats().locked;
    assert!(locked > 0, "no fill ran under the locks");
}

/// A long fill with a detached copy that loses its race to a writer runs
/// once more outside the locks while the writers of the view's tables wait
/// (`Storage::hold_writes`), instead of under the graph lock: the retry is
/// installed ("held"), the writer goes on afterwards, and the view stays
/// exact (the rows the writer committed before and after the hold reach it).
#[test]
fn a_long_fill_raced_by_a_writer_holds_the_writers_for_its_retry() {
    let e = Arc::new(env(1 << 30));
    let a = e.table("a", &[("id", int())]);
    let t = e.table("t", &[("id", int()), ("k", int())]);
    e.insert(&a, (0..7).map(|n| vec![i(n)]).collect());
    // Long enough that a fill outlasts a write (about 0.3-1 s in a debug
    // build), short enough to end within the writers' longest wait (2 s).
    e.insert(&t, (0..20_000).map(|n| vec![i(n), i(n % 7)]).collect());
    for round in 0..3i64 {
        // A new view each round, so each round fills.
        let q = e.prepare(&format!(
            "SELECT a.id, v.n, {round} FROM a LEFT JOIN \
             (SELECT k, COUNT(*) AS n FROM t GROUP BY k) AS v ON v.k = a.id"
        ));
        let writer = RacingWriter::start(&e, &t, 1_000_000 * (round + 1));
        let rows = q.execute(&[]).unwrap();
        writer.stop();
        assert_eq!(rows.len(), 7, "round {round}");
        let total: i64 = q
            .execute(&[])
            .unwrap()
            .iter()
            .map(|r| r[1].as_i64().unwrap())
            .sum();
        assert_eq!(
            total as usize,
            e.storage.scan(t.id).unwrap().len(),
            "round {round}"
        );
    }
    let fills = e.df.fill_stats();
    assert!(fills.held > 0, "no retry held the writers: {fills:?}");
    // The lost attempts stopped when the write came instead of finishing
    // the whole fill for nothing.
    assert!(fills.stopped > 0, "no lost fill stopped early: {fills:?}");
}
