//! Asynchronous propagation (writes are acknowledged before the views apply
//! them) and read-your-writes: invariant 3 of DESIGN.md.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use common::*;
use ladle_common::Value;
use ladle_storage::{OnConflict, WriteOp};

fn i(x: i64) -> Value {
    Value::Int(x)
}

/// Each writer thread inserts into its own key and immediately reads its
/// count with `execute_after(its write's LSN)`: the read must include the
/// write, while other writers keep the propagation worker busy.
#[test]
fn a_connection_reads_its_own_writes() {
    let e = Arc::new(env(1 << 30));
    let t = e.table("Vote", &[("id", int()), ("article", int())]);
    let q = e.prepare("SELECT COUNT(*) FROM Vote WHERE article = ?");
    let mut writers = Vec::new();
    for w in 0..4i64 {
        let (e, q, table, version) = (e.clone(), q.clone(), t.id, t.version);
        writers.push(thread::spawn(move || {
            for n in 1..=150i64 {
                let res = e
                    .storage
                    .write(vec![WriteOp::Insert {
                        table,
                        schema_version: version,
                        rows: vec![vec![i(w * 1_000_000 + n), i(w)]],
                        on_conflict: OnConflict::Error,
                        auto_value_on_zero: true,
                        id_batches: ladle_storage::IdBatches::PerRow,
                        returning: None,
                    }])
                    .unwrap();
                let got = q.execute_after(&[i(w)], res.lsn).unwrap();
                assert_eq!(got, vec![vec![i(n)]], "writer {w} after its write {n}");
            }
        }));
    }
    for w in writers {
        w.join().unwrap();
    }
}

/// `execute` (no LSN) reflects every write acknowledged before the call,
/// whichever thread made it: a reader that saw a writer's acknowledgement
/// (through a shared counter) must see the row.
#[test]
fn execute_reflects_every_acknowledged_write() {
    let e = Arc::new(env(1 << 30));
    let t = e.table("t", &[("id", int()), ("k", int())]);
    let q = e.prepare("SELECT COUNT(*) FROM t WHERE k = ?");
    let acked = Arc::new(std::sync::atomic::AtomicI64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (e, acked, stop, table, version) =
            (e.clone(), acked.clone(), stop.clone(), t.id, t.version);
        thread::spawn(move || {
            let mut n = 0i64;
            while !stop.load(Ordering::SeqCst) && n < 2_000 {
                n += 1;
                e.storage
                    .write(vec![WriteOp::Insert {
                        table,
                        schema_version: version,
                        rows: vec![vec![i(n), i(7)]],
                        on_conflict: OnConflict::Error,
                        auto_value_on_zero: true,
                        id_batches: ladle_storage::IdBatches::PerRow,
                        returning: None,
                    }])
                    .unwrap();
                acked.store(n, Ordering::SeqCst);
            }
        })
    };
    for _ in 0..300 {
        let seen = acked.load(Ordering::SeqCst);
        let got = q.execute(&[i(7)]).unwrap()[0][0].as_i64().unwrap();
        assert!(
            got >= seen,
            "read {got} rows after {seen} were acknowledged"
        );
    }
    stop.store(true, Ordering::SeqCst);
    writer.join().unwrap();
}

/// Once writes stop and the backlog drains, views equal the base tables
/// (eventual consistency), and `settle` drains it on demand.
#[test]
fn views_converge_and_settle_drains_the_backlog() {
    let e = env(1 << 30);
    let t = e.table("t", &[("id", int()), ("k", int())]);
    let q = e.prepare("SELECT COUNT(*) FROM t WHERE k = ?");
    assert_eq!(q.execute(&[i(1)]).unwrap(), vec![vec![i(0)]]);
    for n in 0..500i64 {
        e.insert(&t, vec![vec![i(n), i(n % 2)]]);
    }
    e.df.settle();
    assert_eq!(e.df.propagation_lag(), (0, 0));
    assert_eq!(e.df.applied_lsn(), e.storage.last_lsn());
    assert_eq!(q.execute(&[i(1)]).unwrap(), vec![vec![i(250)]]);
}

/// `read_cached` answers only what needs no blocking: `None` for a key the
/// view has not filled, the same rows as `execute` once it has, and never
/// an answer that misses a write the read must see (a reader thread keeps
/// reading its own writes' counts through it while they propagate).
#[test]
fn cached_reads_answer_hits_only_and_never_miss_a_write() {
    let e = Arc::new(env(1 << 30));
    let t = e.table("t", &[("id", int()), ("k", int())]);
    e.insert(&t, vec![vec![i(1), i(7)], vec![i(2), i(7)]]);
    let q = e.prepare("SELECT COUNT(*) FROM t WHERE k = ?");
    assert!(q.read_cached(&[i(7)], 0).is_none(), "a cold key is a miss");
    assert_eq!(q.execute(&[i(7)]).unwrap(), vec![vec![i(2)]]);
    let hit = q.read_cached(&[i(7)], 0).expect("a filled key is a hit");
    assert_eq!(hit.unwrap().into_vec(), vec![vec![i(2)]]);
    assert!(
        q.read_cached(&[i(1), i(2)], 0).is_none(),
        "a wrong parameter count is left to execute's error"
    );

    for n in 3..=300i64 {
        let res = e
            .storage
            .write(vec![WriteOp::Insert {
                table: t.id,
                schema_version: t.version,
                rows: vec![vec![i(n), i(7)]],
                on_conflict: OnConflict::Error,
                auto_value_on_zero: true,
                id_batches: ladle_storage::IdBatches::PerRow,
                returning: None,
            }])
            .unwrap();
        // Either no answer (not applied yet) or one that includes row n.
        if let Some(got) = q.read_cached(&[i(7)], res.lsn) {
            assert_eq!(got.unwrap().into_vec(), vec![vec![i(n)]], "after write {n}");
        }
        assert_eq!(q.execute_after(&[i(7)], res.lsn).unwrap(), vec![vec![i(n)]]);
    }
}
