//! The hooks a cluster uses: a replica applying the primary's change log
//! (`apply_replicated`), the write gate, the log floor and the fence. Each
//! runs against every engine.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ladle_common::{Lsn, TableDeltas, TableSchema, Value};
use parking_lot::Mutex;

use super::*;
use crate::{CommitObserver, IndexRef, ScanSpec, StorageError, WriteGate};

conformance!(
    a_replica_applying_the_log_reaches_the_same_state,
    a_replicated_entry_must_be_the_next_one,
    a_run_of_replicated_entries_is_written_whole_or_not_at_all,
    a_local_table_moves_no_id_a_replicated_schema_change_gets,
    the_applied_position_moves_once_the_observer_is_told,
    the_gate_refuses_writes_and_withholds_acknowledgements,
    the_log_floor_keeps_what_replicas_need,
    a_fenced_closure_can_write,
    a_record_attached_to_a_schema_change_is_in_its_batch,
);

/// Records what the observer is told, and the length of each run it is
/// told at once.
#[derive(Default)]
struct Told(Mutex<Vec<(Lsn, Vec<TableDeltas>)>>, Mutex<Vec<usize>>);

impl CommitObserver for Told {
    fn on_commit(&self, lsn: Lsn, changes: Vec<TableDeltas>) {
        self.0.lock().push((lsn, changes));
    }

    fn on_commit_run(&self, entries: Vec<(Lsn, Vec<TableDeltas>)>) {
        self.1.lock().push(entries.len());
        self.0.lock().extend(entries);
    }
}

fn log_of(s: &Storage) -> Vec<(Lsn, Vec<TableDeltas>)> {
    let mut out = Vec::new();
    s.read_log(0, &mut |lsn, d| {
        out.push((lsn, d));
        Ok(())
    })
    .unwrap();
    out
}

fn a_replica_applying_the_log_reaches_the_same_state(kind: Kind) {
    let (p, r) = (Harness::new(kind), Harness::new(kind));
    let (primary, replica) = (&p.storage, &r.storage);
    // The same schema changes in the same order give the same ids.
    let (u, l) = (users(primary), keyless(primary));
    let (ru, rl) = (users(replica), keyless(replica));
    assert_eq!((u.id, l.id), (ru.id, rl.id));
    assert_eq!(u.indexes, ru.indexes);
    let told = Arc::new(Told::default());
    replica.set_commit_observer(told.clone());

    let null = Value::Null;
    primary
        .write(vec![insert(
            &u,
            vec![
                row(&[null.clone(), t("ann"), i(30)]),
                row(&[null.clone(), t("bob"), i(40)]),
                row(&[i(10), t("cy"), i(30)]),
            ],
        )])
        .unwrap();
    let dup = row(&[i(1), t("x")]);
    primary
        .write(vec![insert(
            &l,
            vec![dup.clone(), dup.clone(), row(&[i(2), t("y")])],
        )])
        .unwrap();
    // An update that moves a row to another primary key and another
    // secondary key, a delete, and a delete of one of two equal keyless rows.
    let move_bob: crate::RowUpdater = Arc::new(|row| {
        Ok((row[1] == Value::text("bob")).then(|| vec![i(20), row[1].clone(), i(41)]))
    });
    primary
        .write(vec![WriteOp::Update {
            table: u.id,
            schema_version: u.version,
            scan: ScanSpec::Full,
            update: move_bob,
        }])
        .unwrap();
    let ann: crate::RowFilter = Arc::new(|row| Ok(row[1] == Value::text("ann")));
    let one_x = Arc::new(AtomicU64::new(0));
    let first_x: crate::RowFilter = {
        let one_x = one_x.clone();
        Arc::new(move |row| {
            Ok(row[1] == Value::text("x") && one_x.fetch_add(1, Ordering::SeqCst) == 0)
        })
    };
    primary
        .write(vec![
            WriteOp::Delete {
                table: u.id,
                schema_version: u.version,
                scan: ScanSpec::Full,
                filter: ann,
            },
            WriteOp::Delete {
                table: l.id,
                schema_version: l.version,
                scan: ScanSpec::Full,
                filter: first_x,
            },
        ])
        .unwrap();

    let log = log_of(primary);
    assert_eq!(log.len(), 4);
    for (lsn, changes) in log.clone() {
        // Unsynced but the last, as a replica applies a run of entries.
        let last = lsn == primary.last_lsn();
        replica.apply_replicated(lsn, changes, last).unwrap();
    }
    assert_eq!(replica.last_lsn(), primary.last_lsn());
    assert_eq!(
        log_of(replica),
        log,
        "the replica logs the same entries at the same LSNs"
    );
    assert_eq!(
        *told.0.lock(),
        log,
        "the replica's observer is told every entry"
    );
    for table in [u.id, l.id] {
        assert_eq!(
            sorted(replica.scan(table).unwrap()),
            sorted(primary.scan(table).unwrap())
        );
    }
    // Secondary index entries moved with the rows.
    let age = u.indexes.iter().find(|x| x.name == "age").unwrap().id;
    for a in [30, 40, 41] {
        assert_eq!(
            replica
                .lookup(u.id, IndexRef::Secondary(age), &[i(a)])
                .unwrap(),
            primary
                .lookup(u.id, IndexRef::Secondary(age), &[i(a)])
                .unwrap(),
            "age {a}"
        );
    }
    assert_eq!(replica.scan(l.id).unwrap().len(), 2);
    // AUTO_INCREMENT moved past the replicated ids: the replica, once
    // primary, continues where the primary was.
    let next_on_primary = primary.reserve_auto_increment(u.id, 1).unwrap();
    assert_eq!(
        replica.reserve_auto_increment(u.id, 1).unwrap(),
        next_on_primary
    );
}

fn a_replicated_entry_must_be_the_next_one(kind: Kind) {
    let (p, r) = (Harness::new(kind), Harness::new(kind));
    let (u, _) = (users(&p.storage), users(&r.storage));
    for n in 1..=3 {
        p.storage
            .write(vec![insert(
                &u,
                vec![row(&[i(n), t(&format!("n{n}")), i(0)])],
            )])
            .unwrap();
    }
    let log = log_of(&p.storage);
    // A gap and a repeat are both refused, and change nothing.
    let gap = r.storage.apply_replicated(2, log[1].1.clone(), true);
    assert!(matches!(gap, Err(StorageError::Internal(_))), "{gap:?}");
    r.storage
        .apply_replicated(1, log[0].1.clone(), true)
        .unwrap();
    let again = r.storage.apply_replicated(1, log[0].1.clone(), true);
    assert!(matches!(again, Err(StorageError::Internal(_))), "{again:?}");
    assert_eq!(r.storage.last_lsn(), 1);
    assert_eq!(r.storage.scan(u.id).unwrap().len(), 1);
}

/// A replica applies the entries it has received together as one write:
/// later entries of the run see the earlier ones (an update and a delete
/// of rows inserted in the same run), the run is all or nothing (an entry
/// that cannot be applied, or a gap, leaves no entry of it written, and
/// the observer told nothing), and the observer is told the whole run at
/// once, every entry at its LSN.
fn a_run_of_replicated_entries_is_written_whole_or_not_at_all(kind: Kind) {
    let (p, r) = (Harness::new(kind), Harness::new(kind));
    let (primary, replica) = (&p.storage, &r.storage);
    let (u, l) = (users(primary), keyless(primary));
    let (ru, rl) = (users(replica), keyless(replica));
    assert_eq!((u.id, l.id), (ru.id, rl.id));
    let told = Arc::new(Told::default());
    replica.set_commit_observer(told.clone());
    let null = Value::Null;
    let ann_bob = vec![
        row(&[null.clone(), t("ann"), i(30)]),
        row(&[null.clone(), t("bob"), i(40)]),
    ];
    primary.write(vec![insert(&u, ann_bob)]).unwrap();
    let move_bob: crate::RowUpdater = Arc::new(|row| {
        Ok((row[1] == Value::text("bob")).then(|| vec![i(20), row[1].clone(), i(41)]))
    });
    primary
        .write(vec![WriteOp::Update {
            table: u.id,
            schema_version: u.version,
            scan: ScanSpec::Full,
            update: move_bob,
        }])
        .unwrap();
    let dup = row(&[i(1), t("x")]);
    primary
        .write(vec![insert(&l, vec![dup.clone(), dup.clone()])])
        .unwrap();
    let ann: crate::RowFilter = Arc::new(|row| Ok(row[1] == Value::text("ann")));
    let one_x = Arc::new(AtomicU64::new(0));
    let first_x: crate::RowFilter = Arc::new(move |row| {
        Ok(row[1] == Value::text("x") && one_x.fetch_add(1, Ordering::SeqCst) == 0)
    });
    primary
        .write(vec![
            WriteOp::Delete {
                table: u.id,
                schema_version: u.version,
                scan: ScanSpec::Full,
                filter: ann,
            },
            WriteOp::Delete {
                table: l.id,
                schema_version: l.version,
                scan: ScanSpec::Full,
                filter: first_x,
            },
        ])
        .unwrap();
    let log = log_of(primary);
    assert_eq!(log.len(), 4);

    // An entry that matches nothing here (a keyless delete of a row never
    // inserted) third in the run: nothing of the run is written.
    let mut bad = log[..2].to_vec();
    bad.push((
        3,
        vec![TableDeltas {
            table: l.id,
            deltas: vec![ladle_common::RowDelta::Delete(row(&[i(9), t("never")]))],
        }],
    ));
    let failed = replica.apply_replicated_run(bad, true);
    assert!(
        matches!(failed, Err(StorageError::Corruption(_))),
        "{failed:?}"
    );
    // A gap inside the run: refused before anything is applied.
    let gap = replica.apply_replicated_run(vec![log[0].clone(), log[2].clone()], true);
    assert!(matches!(gap, Err(StorageError::Internal(_))), "{gap:?}");
    assert_eq!(replica.last_lsn(), 0);
    assert!(replica.scan(u.id).unwrap().is_empty());
    assert!(replica.scan(l.id).unwrap().is_empty());
    assert!(
        log_of(replica).is_empty(),
        "no entry of a failed run is logged"
    );
    assert!(
        told.0.lock().is_empty(),
        "the observer is told no failed run"
    );

    replica.apply_replicated_run(log.clone(), true).unwrap();
    assert_eq!(replica.last_lsn(), 4);
    assert_eq!(log_of(replica), log, "each entry logged at its own LSN");
    assert_eq!(*told.0.lock(), log, "the observer is told every entry");
    assert_eq!(*told.1.lock(), vec![4], "at once");
    for table in [u.id, l.id] {
        assert_eq!(
            sorted(replica.scan(table).unwrap()),
            sorted(primary.scan(table).unwrap())
        );
    }
    let age = u.indexes.iter().find(|x| x.name == "age").unwrap().id;
    for a in [30, 40, 41] {
        assert_eq!(
            replica
                .lookup(u.id, IndexRef::Secondary(age), &[i(a)])
                .unwrap(),
            primary
                .lookup(u.id, IndexRef::Secondary(age), &[i(a)])
                .unwrap(),
            "age {a}"
        );
    }
    assert_eq!(
        replica.reserve_auto_increment(u.id, 1).unwrap(),
        primary.reserve_auto_increment(u.id, 1).unwrap()
    );
    if matches!(kind, Kind::Rocks) {
        // The run's last position was written with it.
        let r = r.reopen();
        assert_eq!(r.storage.last_lsn(), 4);
        assert_eq!(log_of(&r.storage), log);
        assert_eq!(
            sorted(r.storage.scan(u.id).unwrap()),
            sorted(primary.scan(u.id).unwrap())
        );
    }
}

/// A local table (a recursive CTE's scratch table on a cluster node) is a
/// table like any other while it lives, but the tables created after it
/// get the ids they get on a node that never had it, and nothing of it
/// outlives a reopen.
fn a_local_table_moves_no_id_a_replicated_schema_change_gets(kind: Kind) {
    let (a, b) = (Harness::new(kind), Harness::new(kind));
    let (s, other) = (&a.storage, &b.storage);
    users(s);
    users(other);
    let scratch = TableSchema {
        id: 0,
        database: "db".into(),
        name: "scratch".into(),
        columns: vec![col("n", int())],
        primary_key: None,
        indexes: vec![ladle_common::IndexSchema {
            id: 0,
            name: "n".into(),
            columns: vec![0],
            unique: false,
        }],
        version: 0,
    };
    let local = s.create_local_table(scratch.clone()).unwrap();
    assert_eq!(s.table("db", "scratch").map(|t| t.id), Some(local.id));
    assert!(s.scan(local.id).unwrap().is_empty());
    let taken = s.create_local_table(scratch.clone());
    assert!(
        matches!(taken, Err(StorageError::TableExists(_))),
        "{taken:?}"
    );
    // The next table (and its index) has the ids it has on the other node.
    let (here, there) = (keyless(s), keyless(other));
    assert_eq!(here.id, there.id);
    assert_eq!(here.indexes[0].id, there.indexes[0].id);
    assert!(local.id > here.id && local.indexes[0].id > here.indexes[0].id);
    s.drop_table("db", "scratch").unwrap();
    assert!(s.table("db", "scratch").is_none());
    let again = s.create_local_table(scratch).unwrap();
    assert_ne!(again.id, local.id, "a local id is not reused in one open");
    if matches!(kind, Kind::Rocks) {
        let a = a.reopen();
        assert!(a.storage.table("db", "scratch").is_none(), "not persisted");
        assert_eq!(a.storage.table("db", "log").map(|t| t.id), Some(here.id));
    }
}

/// The position storage shows (`last_lsn`) while it tells its observer.
#[derive(Default)]
struct Positions {
    storage: Mutex<Option<std::sync::Weak<Storage>>>,
    seen: Mutex<Vec<Lsn>>,
}

impl Positions {
    fn note(&self) {
        let storage = self.storage.lock().as_ref().and_then(|w| w.upgrade());
        self.seen
            .lock()
            .push(storage.map_or(Lsn::MAX, |s| s.last_lsn()));
    }
}

impl CommitObserver for Positions {
    fn on_commit(&self, _lsn: Lsn, _changes: Vec<TableDeltas>) {
        self.note();
    }

    fn on_commit_run(&self, _entries: Vec<(Lsn, Vec<TableDeltas>)>) {
        self.note();
    }
}

/// A replica's applied position (what a read after the session's
/// forwarded write waits for, before it waits for the views) moves past a
/// run, or an entry, only once the observer (the dataflow) has been told
/// of it: the observer still sees the position before it.
fn the_applied_position_moves_once_the_observer_is_told(kind: Kind) {
    let (p, r) = (Harness::new(kind), Harness::new(kind));
    let (u, _) = (users(&p.storage), users(&r.storage));
    for n in 1..=3 {
        p.storage
            .write(vec![insert(
                &u,
                vec![row(&[i(n), t(&format!("n{n}")), i(0)])],
            )])
            .unwrap();
    }
    let log = log_of(&p.storage);
    let positions = Arc::new(Positions::default());
    *positions.storage.lock() = Some(Arc::downgrade(&r.storage));
    r.storage.set_commit_observer(positions.clone());
    r.storage
        .apply_replicated_run(log[..2].to_vec(), true)
        .unwrap();
    r.storage
        .apply_replicated(3, log[2].1.clone(), true)
        .unwrap();
    assert_eq!(*positions.seen.lock(), vec![0, 2]);
    assert_eq!(r.storage.last_lsn(), 3);
}

/// A gate that admits writes or not, and acknowledges them or not.
struct TestGate {
    admit: bool,
    acknowledge: bool,
    asked: Mutex<Vec<Lsn>>,
}

impl WriteGate for TestGate {
    fn admit(&self) -> crate::Result<()> {
        if self.admit {
            Ok(())
        } else {
            Err(StorageError::ReadOnly("a replica".into()))
        }
    }

    fn acknowledge(&self, lsn: Lsn) -> crate::Result<()> {
        self.asked.lock().push(lsn);
        if self.acknowledge {
            Ok(())
        } else {
            Err(StorageError::ReadOnly("no replica confirmed".into()))
        }
    }
}

fn the_gate_refuses_writes_and_withholds_acknowledgements(kind: Kind) {
    for (admit, acknowledge) in [(false, true), (true, false), (true, true)] {
        let h = Harness::new(kind);
        let s = &h.storage;
        let u = users(s);
        let gate = Arc::new(TestGate {
            admit,
            acknowledge,
            asked: Mutex::new(Vec::new()),
        });
        s.set_write_gate(gate.clone());
        let out = s.write(vec![insert(&u, vec![row(&[i(1), t("a"), i(1)])])]);
        match (admit, acknowledge) {
            (false, _) => {
                // Refused before anything is written.
                assert!(matches!(out, Err(StorageError::ReadOnly(_))), "{out:?}");
                assert_eq!(s.last_lsn(), 0);
                assert!(s.scan(u.id).unwrap().is_empty());
                assert!(gate.asked.lock().is_empty());
            }
            (true, false) => {
                // Committed here, but the client is not told it succeeded.
                assert!(matches!(out, Err(StorageError::ReadOnly(_))), "{out:?}");
                assert_eq!(*gate.asked.lock(), vec![1]);
                assert_eq!(s.scan(u.id).unwrap().len(), 1);
            }
            (true, true) => {
                assert_eq!(out.unwrap().lsn, 1);
                assert_eq!(*gate.asked.lock(), vec![1]);
            }
        }
        // The replicated path does not ask the gate.
        let (p, pu) = {
            let p = Harness::new(kind);
            let pu = users(&p.storage);
            (p, pu)
        };
        p.storage
            .write(vec![insert(&pu, vec![row(&[i(7), t("z"), i(7)])])])
            .unwrap();
        if !admit {
            let log = log_of(&p.storage);
            s.apply_replicated(1, log[0].1.clone(), true).unwrap();
            assert_eq!(s.scan(u.id).unwrap(), p.storage.scan(pu.id).unwrap());
        }
    }
}

fn the_log_floor_keeps_what_replicas_need(kind: Kind) {
    let h = Harness::new(kind);
    let s = &h.storage;
    let u = users(s);
    for n in 1..=10 {
        s.write(vec![insert(
            &u,
            vec![row(&[i(n), t(&format!("n{n}")), i(0)])],
        )])
        .unwrap();
    }
    let lsns = |s: &Storage| log_of(s).into_iter().map(|(l, _)| l).collect::<Vec<_>>();
    // A replica has applied 3: entries after it stay.
    s.set_log_floor(3);
    s.truncate_log(11).unwrap();
    assert_eq!(lsns(s), (4..=10).collect::<Vec<_>>());
    // Without a floor, truncation goes as far as asked.
    s.set_log_floor(u64::MAX);
    s.truncate_log(9).unwrap();
    assert_eq!(lsns(s), vec![9, 10]);
}

fn a_fenced_closure_can_write(kind: Kind) {
    let h = Harness::new(kind);
    let s = &h.storage;
    let u = users(s);
    // A schema change that writes rows (and records its position) inside
    // the fence must not wait for the fence it holds.
    let lsn = s.fenced(|| {
        s.write(vec![insert(&u, vec![row(&[i(1), t("a"), i(1)])])])
            .unwrap();
        s.last_lsn()
    });
    assert_eq!(lsn, 1);
    // Waiting for writes in flight is a no-op inside the fence (a locking
    // read inside a schema change must not wait for itself), and returns
    // at once outside with none in flight.
    s.fenced(|| s.await_writes_in_flight());
    s.await_writes_in_flight();
    // And writes go on after it.
    assert_eq!(
        s.write(vec![insert(&u, vec![row(&[i(2), t("b"), i(1)])])])
            .unwrap()
            .lsn,
        2
    );
}

/// A schema change's record is written by the change's own catalog batch
/// (so a crash keeps both or neither), and only inside the fence: a
/// change that writes nothing carries nothing, and later catalog writes do
/// not carry it again.
fn a_record_attached_to_a_schema_change_is_in_its_batch(kind: Kind) {
    let h = Harness::new(kind);
    let s = &h.storage;
    let meta = |s: &Storage| s.list_meta("cluster/").unwrap();
    let (before, users, after) =
        s.fenced_with_record("cluster/ddl/1", b"CREATE TABLE users", || {
            (s.record_carried(), users(s), s.record_carried())
        });
    assert!(!before && after);
    assert_eq!(users.name, "users");
    assert_eq!(
        meta(s),
        vec![("cluster/ddl/1".to_string(), b"CREATE TABLE users".to_vec())]
    );
    let carried = s.fenced_with_record("cluster/ddl/2", b"nothing", || s.record_carried());
    assert!(!carried, "no catalog write, no record");
    s.create_database("other", false).unwrap();
    assert_eq!(meta(s).len(), 1, "a later change carries no record");
    // A failed change withdraws the record it wrote.
    s.fenced_with_record("cluster/ddl/3", b"failed", || {
        s.create_database("third", false).unwrap();
        assert!(s.record_carried());
        s.withdraw_record().unwrap();
        s.create_database("fourth", false).unwrap();
    });
    assert_eq!(meta(s).len(), 1, "withdrawn");
    if !matches!(kind, Kind::Memory) {
        // (Durable as the table is.)
        let h = h.reopen();
        assert!(h.storage.table("db", "users").is_some());
        assert_eq!(meta(&h.storage).len(), 1);
    }
}
