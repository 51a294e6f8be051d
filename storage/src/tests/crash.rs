//! kill -9 crash test: a child process (this test binary re-invoked) writes
//! from several threads with sync group commit and prints every
//! acknowledged batch; the parent SIGKILLs it mid-run, reopens the data
//! directory and checks that every acknowledged batch is there, that no
//! batch is partially visible, and that AUTO_INCREMENT never hands out a
//! value that is already used. Three rounds over one directory.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;

use ladle_common::{IndexSchema, SqlType, TableSchema, Value};

use super::*;
use crate::{IndexRef, OnConflict, Storage, StorageConfig, StorageError, WalRecovery, WriteOp};

const DIR_ENV: &str = "LADLE_CRASH_CHILD_DIR";
const ROUND_ENV: &str = "LADLE_CRASH_CHILD_ROUND";
const THREADS: i64 = 8;

fn tables(s: &Storage) -> (Arc<TableSchema>, Arc<TableSchema>) {
    s.create_database("crash", true).expect("db");
    let mut id = col(
        "id",
        SqlType::Int {
            bytes: 8,
            unsigned: true,
            display_width: None,
        },
    )
    .not_null();
    id.auto_increment = true;
    let votes = TableSchema {
        id: 0,
        database: "crash".into(),
        name: "votes".into(),
        columns: vec![
            id,
            col("user", int()).not_null(),
            col("story", int()).not_null(),
        ],
        primary_key: Some(vec![0]),
        indexes: vec![IndexSchema {
            id: 0,
            name: "story".into(),
            columns: vec![2],
            unique: false,
        }],
        version: 1,
    };
    let log = TableSchema {
        id: 0,
        database: "crash".into(),
        name: "log".into(),
        columns: vec![col("user", int()), col("story", int())],
        primary_key: None,
        indexes: vec![],
        version: 1,
    };
    (
        s.create_table(votes, true).expect("votes"),
        s.create_table(log, true).expect("log"),
    )
}

/// The child: writes until killed. Ignored so that a plain `cargo test`
/// does not run it; `crash_kill_9_keeps_acknowledged_batches` starts it.
#[test]
#[ignore = "child process of crash_kill_9_keeps_acknowledged_batches"]
fn crash_child() {
    let Ok(dir) = std::env::var(DIR_ENV) else {
        return;
    };
    let round: i64 = std::env::var(ROUND_ENV)
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(0);
    let s =
        Storage::open(config(std::path::Path::new(&dir), Durability::Sync)).expect("child open");
    let (votes, log) = tables(&s);
    let threads: Vec<_> = (0..THREADS)
        .map(|th| {
            let s = Arc::clone(&s);
            let (votes, log) = (Arc::clone(&votes), Arc::clone(&log));
            std::thread::spawn(move || {
                for k in 0.. {
                    let story = round * 1_000_000 + k;
                    let ops = vec![
                        WriteOp::Insert {
                            table: votes.id,
                            schema_version: votes.version,
                            rows: vec![
                                vec![Value::Null, Value::Int(th), Value::Int(story)],
                                vec![Value::Null, Value::Int(th), Value::Int(story)],
                            ],
                            on_conflict: OnConflict::Error,
                            auto_value_on_zero: true,
                            id_batches: crate::IdBatches::PerRow,
                            returning: None,
                        },
                        WriteOp::Insert {
                            table: log.id,
                            schema_version: log.version,
                            rows: vec![vec![Value::Int(th), Value::Int(story)]],
                            on_conflict: OnConflict::Error,
                            auto_value_on_zero: true,
                            id_batches: crate::IdBatches::PerRow,
                            returning: None,
                        },
                    ];
                    let r = s.write(ops).expect("child write");
                    let first = r.ops[0].last_insert_id.expect("generated id");
                    // One write(2) per line: the parent sees whole lines.
                    println!("ACK {th} {story} {first} {} END", r.lsn);
                }
            })
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
}

/// `ACK <thread> <story> <first id> <lsn> END`, if the line is complete.
fn parse_ack(line: &str) -> Option<(i64, i64, u64)> {
    let parts: Vec<&str> = line.split(' ').collect();
    match parts[..] {
        ["ACK", th, story, first, _lsn, "END"] => {
            Some((th.parse().ok()?, story.parse().ok()?, first.parse().ok()?))
        }
        _ => None,
    }
}

#[test]
fn crash_kill_9_keeps_acknowledged_batches() {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    // Acknowledged batches of every round so far: all must survive.
    let mut acked: Vec<(i64, i64, u64)> = Vec::new();
    for round in 0..3i64 {
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "tests::crash::crash_child",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(DIR_ENV, dir.path())
            .env(ROUND_ENV, round.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let before = acked.len();
        // Kill after a few hundred acknowledged batches.
        while acked.len() - before < 300 + 100 * round as usize {
            match lines.next() {
                Some(Ok(line)) => acked.extend(parse_ack(&line)),
                _ => panic!("the child ended before it was killed"),
            }
        }
        child.kill().unwrap(); // SIGKILL
                               // Lines printed before the kill are still in the pipe.
        for line in lines.map_while(Result::ok) {
            acked.extend(parse_ack(&line));
        }
        child.wait().unwrap();
        verify(dir.path(), &acked);
    }
}

fn verify(dir: &std::path::Path, acked: &[(i64, i64, u64)]) {
    let s = Storage::open(config(dir, Durability::Sync)).expect("reopen after kill -9");
    let (votes, log) = tables(&s);
    let rows = s.scan(votes.id).unwrap();
    let by_id: BTreeMap<u64, (i64, i64)> = rows
        .iter()
        .map(|r| {
            (
                r[0].as_i64().unwrap() as u64,
                (r[1].as_i64().unwrap(), r[2].as_i64().unwrap()),
            )
        })
        .collect();
    // Every acknowledged batch is present, both rows with consecutive ids.
    for &(th, story, first) in acked {
        assert_eq!(
            by_id.get(&first),
            Some(&(th, story)),
            "acknowledged vote {first} lost"
        );
        assert_eq!(
            by_id.get(&(first + 1)),
            Some(&(th, story)),
            "acknowledged vote {} lost",
            first + 1
        );
    }
    // No partial batch: every (user, story) has two votes and one log row.
    let mut votes_per: BTreeMap<(i64, i64), usize> = BTreeMap::new();
    for v in by_id.values() {
        *votes_per.entry(*v).or_default() += 1;
    }
    let logged: Vec<(i64, i64)> = s
        .scan(log.id)
        .unwrap()
        .iter()
        .map(|r| (r[0].as_i64().unwrap(), r[1].as_i64().unwrap()))
        .collect();
    let logged_set: BTreeSet<(i64, i64)> = logged.iter().copied().collect();
    assert_eq!(logged.len(), logged_set.len(), "a log row appears twice");
    for (key, n) in &votes_per {
        assert_eq!(*n, 2, "batch {key:?} is partially visible");
        assert!(logged_set.contains(key), "batch {key:?} lost its log row");
    }
    assert_eq!(logged_set.len(), votes_per.len());
    // The secondary index agrees with the primary.
    for (&(_, story), _) in votes_per.iter().take(50) {
        let via_index = s
            .lookup(
                votes.id,
                IndexRef::Secondary(votes.indexes[0].id),
                &[Value::Int(story)],
            )
            .unwrap();
        assert_eq!(
            via_index.len(),
            votes_per.iter().filter(|((_, st), _)| *st == story).count() * 2
        );
    }
    // AUTO_INCREMENT hands out a fresh value.
    let max = by_id.keys().next_back().copied().unwrap_or(0);
    let r = s
        .write(vec![WriteOp::Insert {
            table: votes.id,
            schema_version: votes.version,
            rows: vec![vec![Value::Null, Value::Int(-1), Value::Int(-1)]],
            on_conflict: OnConflict::Error,
            auto_value_on_zero: true,
            id_batches: crate::IdBatches::PerRow,
            returning: None,
        }])
        .unwrap();
    assert!(r.ops[0].last_insert_id.unwrap() > max);
    // Remove the probe so the next round's invariants hold.
    let del = WriteOp::Delete {
        table: votes.id,
        schema_version: votes.version,
        scan: crate::ScanSpec::Prefix {
            index: IndexRef::Secondary(votes.indexes[0].id),
            key: vec![Value::Int(-1)],
        },
        filter: Arc::new(|_| Ok(true)),
    };
    assert_eq!(s.write(vec![del]).unwrap().ops[0].affected_rows, 1);
}

/// A process killed while RocksDB wrote a WAL record leaves part of it:
/// that write was never acknowledged, so the store opens without it (and
/// without `--wal-recovery point-in-time`), keeping every earlier write.
/// Simulated by cutting the newest WAL file inside its last record. (The
/// kill -9 test above met it now and then: "truncated record body".)
#[test]
fn a_torn_last_wal_record_is_dropped_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let written = {
        let s = Storage::open(config(dir.path(), Durability::Sync)).expect("open");
        let (votes, _) = tables(&s);
        for k in 0..20 {
            s.write(vec![WriteOp::Insert {
                table: votes.id,
                schema_version: votes.version,
                rows: vec![vec![Value::Null, Value::Int(1), Value::Int(k)]],
                on_conflict: OnConflict::Error,
                auto_value_on_zero: true,
                id_batches: crate::IdBatches::PerRow,
                returning: None,
            }])
            .expect("write");
        }
        20
        // Dropped without a clean close: the WAL holds the writes.
    };
    let wal = std::fs::read_dir(dir.path().join("db"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .max_by_key(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
        .expect("a WAL file");
    let len = std::fs::metadata(&wal).unwrap().len();
    // Inside the last record (a one-row insert's record is well over 8 bytes).
    let f = std::fs::OpenOptions::new().write(true).open(&wal).unwrap();
    f.set_len(len - 8).unwrap();
    drop(f);
    let s = Storage::open(config(dir.path(), Durability::Sync)).expect("reopen with a torn tail");
    let (votes, _) = tables(&s);
    let rows = s.scan(votes.id).unwrap();
    assert!(
        rows.len() == written || rows.len() == written - 1,
        "{} rows of {written}",
        rows.len()
    );
}

/// A damaged table file (`.sst`) is not a damaged write-ahead log: the
/// store refuses to open and says which it is, whatever `--wal-recovery`
/// says (it was reported as a damaged WAL, with advice to recover to the
/// last consistent point, which then failed on the same file).
#[test]
fn a_truncated_table_file_refuses_to_open_and_is_named() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = Storage::open(config(dir.path(), Durability::Sync)).expect("open");
        let (votes, _) = tables(&s);
        let rows = (0..2_000)
            .map(|k| vec![Value::Null, Value::Int(k % 7), Value::Int(k)])
            .collect();
        s.write(vec![WriteOp::Insert {
            table: votes.id,
            schema_version: votes.version,
            rows,
            on_conflict: OnConflict::Error,
            auto_value_on_zero: true,
            id_batches: crate::IdBatches::PerRow,
            returning: None,
        }])
        .expect("write");
        s.flush().expect("flush");
    }
    let sst = std::fs::read_dir(dir.path().join("db"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "sst"))
        .max_by_key(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
        .expect("a table file");
    let len = std::fs::metadata(&sst).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&sst).unwrap();
    f.set_len(len / 2).unwrap();
    drop(f);
    for recovery in [WalRecovery::AbsoluteConsistency, WalRecovery::PointInTime] {
        let cfg = StorageConfig {
            wal_recovery: recovery,
            ..config(dir.path(), Durability::Sync)
        };
        let msg = match Storage::open(cfg) {
            Err(e @ StorageError::Corruption(_)) => e.to_string(),
            Err(e) => panic!("{recovery:?}: not a corruption: {e}"),
            Ok(_) => panic!("{recovery:?}: opened over a truncated table file"),
        };
        assert!(msg.contains("a table file"), "{recovery:?}: {msg}");
        assert!(msg.contains(&sst.display().to_string()), "{msg}");
        assert!(!msg.contains("write-ahead log in"), "{msg}");
    }
}

/// One single-row insert into `votes` per call: one write batch each.
fn insert_vote(s: &Storage, votes: &TableSchema, story: i64) -> crate::Result<()> {
    s.write(vec![WriteOp::Insert {
        table: votes.id,
        schema_version: votes.version,
        rows: vec![vec![Value::Null, Value::Int(1), Value::Int(story)]],
        on_conflict: OnConflict::Error,
        auto_value_on_zero: true,
        id_batches: crate::IdBatches::PerRow,
        returning: None,
    }])
    .map(|_| ())
}

/// The largest file with extension `ext` in `dir`.
fn largest(dir: &std::path::Path, ext: &str) -> std::path::PathBuf {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .max_by_key(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
        .unwrap_or_else(|| panic!("a .{ext} file in {}", dir.display()))
}

/// Flips 16 bytes in the middle of `file`.
fn damage_middle(file: &std::path::Path) {
    let mut bytes = std::fs::read(file).unwrap();
    let mid = bytes.len() / 2;
    for b in &mut bytes[mid..mid + 16] {
        *b ^= 0xFF;
    }
    std::fs::write(file, &bytes).unwrap();
}

/// A compaction that meets a damaged block stops every write (RocksDB's
/// background error): `background_error` says so and why, and writes to
/// any table fail with the corruption (1034 for a client), where before
/// the compaction it said nothing.
#[test]
fn a_compaction_over_a_damaged_block_is_a_background_error() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = Storage::open(config(dir.path(), Durability::Sync)).expect("open");
        let (votes, _) = tables(&s);
        let rows = (0..5_000)
            .map(|k| vec![Value::Null, Value::Int(k % 7), Value::Int(k)])
            .collect();
        s.write(vec![WriteOp::Insert {
            table: votes.id,
            schema_version: votes.version,
            rows,
            on_conflict: OnConflict::Error,
            auto_value_on_zero: true,
            id_batches: crate::IdBatches::PerRow,
            returning: None,
        }])
        .expect("write");
        s.flush().expect("flush");
        assert_eq!(s.background_error(), None);
    }
    damage_middle(&largest(&dir.path().join("db"), "sst"));
    let s = Storage::open(config(dir.path(), Durability::Sync)).expect("reopen");
    let votes = s.table("crash", "votes").expect("votes");
    let log = s.table("crash", "log").expect("log");
    s.compact().expect("compact");
    let why = s
        .background_error()
        .expect("writes stopped after the compaction met the damage");
    assert!(why.contains("Corruption"), "{why}");
    // Every write is refused, to any table, as a corruption.
    let refused = s.write(vec![WriteOp::Insert {
        table: log.id,
        schema_version: log.version,
        rows: vec![vec![Value::Int(1), Value::Int(2)]],
        on_conflict: OnConflict::Error,
        auto_value_on_zero: true,
        id_batches: crate::IdBatches::PerRow,
        returning: None,
    }]);
    assert!(
        matches!(refused, Err(StorageError::Corruption(_))),
        "{refused:?}"
    );
    assert!(insert_vote(&s, &votes, 1).is_err());
    // Asking again is stable (the probe writes nothing).
    assert_eq!(s.background_error(), Some(why));
}

/// A point-in-time WAL recovery says what it dropped: the write batches
/// after the last consistent point (one per commit here), their writes
/// and bytes; every acknowledged batch is either still there or counted.
#[test]
fn a_point_in_time_recovery_counts_what_it_dropped() {
    const COMMITS: usize = 400;
    let dir = tempfile::tempdir().unwrap();
    {
        let s = Storage::open(config(dir.path(), Durability::Sync)).expect("open");
        let (votes, _) = tables(&s);
        // Opening with an intact WAL reports nothing.
        assert_eq!(s.wal_recovery(), None);
        for k in 0..COMMITS {
            insert_vote(&s, &votes, k as i64).expect("write");
        }
        // Dropped without a clean close: the WAL holds the commits.
    }
    let wal = largest(&dir.path().join("db"), "log");
    let wal_len = std::fs::metadata(&wal).unwrap().len();
    damage_middle(&wal);
    let cfg = StorageConfig {
        wal_recovery: WalRecovery::PointInTime,
        ..config(dir.path(), Durability::Sync)
    };
    let s = Storage::open(cfg).expect("point-in-time recovery");
    let votes = s.table("crash", "votes").expect("votes kept");
    let kept = s.scan(votes.id).unwrap().len();
    let report = s.wal_recovery().expect("a recovery report");
    println!("{kept} of {COMMITS} commits kept; {report:?}");
    assert!(kept < COMMITS, "{kept} rows kept: the damage was not met");
    // Each commit is one batch: kept + dropped covers every commit (the
    // damaged batch itself may be too damaged to count).
    let dropped = usize::try_from(report.dropped_records).unwrap();
    assert!(
        kept + dropped == COMMITS || kept + dropped + 1 == COMMITS,
        "{kept} kept + {dropped} dropped != {COMMITS}: {report:?}"
    );
    // A row, its secondary index entry and its change-log entry: writes
    // per batch are the same for every commit.
    assert_eq!(report.dropped_writes % report.dropped_records.max(1), 0);
    assert!(
        report.dropped_writes >= report.dropped_records,
        "{report:?}"
    );
    assert!(
        report.dropped_bytes > 0 && report.dropped_bytes < report.wal_bytes,
        "{report:?}"
    );
    assert!(report.wal_bytes >= wal_len, "{report:?}");
}
