//! RocksDB-only tests: what must survive a restart.

use std::sync::atomic::Ordering;

use super::*;
use crate::{IndexRef, StorageError};

#[test]
fn rows_catalog_and_lsn_survive_reopen() {
    let h = Harness::new(Kind::Rocks);
    let u = users(&h.storage);
    h.storage
        .write(vec![insert(
            &u,
            vec![
                row(&[Value::Null, t("a"), i(1)]),
                row(&[Value::Null, t("b"), i(2)]),
            ],
        )])
        .unwrap();
    h.storage.put_meta("k", b"v").unwrap();
    let h = h.reopen();
    let s = &h.storage;
    assert_eq!(s.last_lsn(), 1);
    assert_eq!(s.table("db", "users").as_deref(), Some(&*u));
    assert_eq!(s.scan(u.id).unwrap().len(), 2);
    assert_eq!(s.estimate_rows(u.id), 2);
    assert_eq!(
        s.list_meta("k").unwrap(),
        vec![("k".to_string(), b"v".to_vec())]
    );
    // AUTO_INCREMENT continues after the last committed value.
    let r = s
        .write(vec![insert(&u, vec![row(&[Value::Null, t("c"), i(1)])])])
        .unwrap();
    assert_eq!(r.ops[0].last_insert_id, Some(3));
    assert_eq!(r.lsn, 2);
    // A new table after reopen never reuses an id.
    let l = keyless(s);
    assert!(l.id > u.id);
}

/// The row count a restart starts from is the table's, also when its rows
/// are all in table files: the dataflow picks a full scan over key lookups
/// by it, and a count of 0 made every upquery of a few keys scan the
/// table (a story page's miss read all 360k votes).
#[test]
fn row_estimate_after_reopen_counts_rows_in_table_files() {
    let h = Harness::new(Kind::Rocks);
    let u = users(&h.storage);
    let rows: Vec<Row> = (1..=3000)
        .map(|n| row(&[i(n), t(&format!("n{n}")), i(n % 9)]))
        .collect();
    h.storage.write(vec![insert(&u, rows)]).unwrap();
    h.storage.engine.flush().unwrap();
    // And a few only in the log, replayed into the memtable on reopen.
    let late: Vec<Row> = (3001..=3010)
        .map(|n| row(&[i(n), t(&format!("n{n}")), i(1)]))
        .collect();
    h.storage.write(vec![insert(&u, late)]).unwrap();
    let h = h.reopen();
    let estimate = h.storage.estimate_rows(u.id);
    assert!((2700..=3300).contains(&estimate), "{estimate}");
    // Writes after the reopen move it from there.
    h.storage
        .write(vec![insert(&u, vec![row(&[i(5000), t("late"), i(1)])])])
        .unwrap();
    assert_eq!(h.storage.estimate_rows(u.id), estimate + 1);
}

/// `CREATE TABLE ... AUTO_INCREMENT = n` on a table with no rows yet:
/// the start survives a restart; a lower value never moves it back.
#[test]
fn raised_auto_increment_survives_reopen() {
    let h = Harness::new(Kind::Rocks);
    let u = users(&h.storage);
    h.storage.raise_auto_increment(u.id, 100).unwrap();
    h.storage.raise_auto_increment(u.id, 50).unwrap();
    let h = h.reopen();
    assert_eq!(h.storage.next_auto_increment(u.id).unwrap(), 100);
    let r = h
        .storage
        .write(vec![insert(&u, vec![row(&[Value::Null, t("a"), i(1)])])])
        .unwrap();
    assert_eq!(r.ops[0].last_insert_id, Some(100));
    assert_eq!(h.storage.next_auto_increment(u.id).unwrap(), 101);
}

#[test]
fn keyless_row_ids_do_not_collide_across_opens() {
    let h = Harness::new(Kind::Rocks);
    let l = keyless(&h.storage);
    h.storage
        .write(vec![insert(&l, vec![row(&[i(1), t("x")])])])
        .unwrap();
    let h = h.reopen();
    h.storage
        .write(vec![insert(&l, vec![row(&[i(1), t("x")])])])
        .unwrap();
    let h = h.reopen();
    assert_eq!(h.storage.scan(l.id).unwrap().len(), 2);
    assert_eq!(
        h.storage
            .lookup(l.id, IndexRef::Secondary(l.indexes[0].id), &[i(1)])
            .unwrap()
            .len(),
        2
    );
}

#[test]
fn format_version_mismatch_is_a_clear_error() {
    let h = Harness::new(Kind::Rocks);
    let mut b = crate::engine::Batch::default();
    b.put(
        crate::cf::CATALOG,
        crate::cf::catalog_key::FORMAT,
        99u32.to_be_bytes(),
    );
    h.storage.engine.write(b, true).unwrap();
    let dir = h.dir.unwrap();
    drop(h.storage);
    match Storage::open(config(dir.path(), Durability::Sync)) {
        Err(StorageError::FormatVersion {
            found: 99,
            expected,
        }) => assert_eq!(expected, crate::catalog::FORMAT_VERSION),
        Err(e) => panic!("expected a format version error, got {e}"),
        Ok(_) => panic!("expected a format version error, got a storage"),
    }
}

/// A table record as format version 2 wrote it: encoded by the previous
/// release's `ladle-common` (commit 2cc3287) as storage's `TableEntry` for
/// `app.events (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, flag TINYINT
/// UNSIGNED, name VARCHAR(20) UNIQUE, created DATETIME DEFAULT
/// CURRENT_TIMESTAMP, at TIMESTAMP, during TIME, amount DECIMAL(10,2),
/// kind ENUM('a','b'))`, table id 7, unique index id 3.
const V2_TABLE_RECORD: &[u8] = include_bytes!("fixtures/v2_table_entry.bin");

#[test]
fn format_version_2_directory_opens_and_is_upgraded() {
    use crate::cf::{self, catalog_key};
    use crate::engine::{Batch, CfKind};
    let h = Harness::new(Kind::Rocks);
    // A version-2 data directory holding the `events` table.
    let e = &h.storage.engine;
    e.create_cf(&cf::primary(7), CfKind::Index).unwrap();
    e.create_cf(&cf::secondary(3), CfKind::Index).unwrap();
    let mut b = Batch::default();
    b.put(cf::CATALOG, catalog_key::FORMAT, 2u32.to_be_bytes());
    b.put(cf::CATALOG, catalog_key::database("app"), Vec::new());
    b.put(cf::CATALOG, catalog_key::table(7), V2_TABLE_RECORD.to_vec());
    e.write(b, true).unwrap();
    let h = h.reopen();
    let events = h.storage.table("app", "events").expect("the v2 table");
    let types: Vec<String> = events.columns.iter().map(|c| c.ty.sql_name()).collect();
    assert_eq!(
        types,
        [
            "int(11)",
            "tinyint(3) unsigned",
            "varchar(20)",
            "datetime",
            "timestamp",
            "time",
            "decimal(10,2)",
            "enum('a','b')"
        ]
    );
    assert!(events.columns[0].auto_increment && !events.columns[0].nullable);
    assert_eq!(
        events.columns[3].default,
        ladle_common::ColumnDefault::CurrentTimestamp
    );
    assert_eq!(events.indexes[0].id, 3);
    assert!(events.indexes[0].unique);
    // Rows go in and come back out, through the unique index too.
    let mut r = vec![Value::Null; 8];
    r[2] = t("x");
    h.storage
        .write(vec![insert(&events, vec![row(&r)])])
        .unwrap();
    assert_eq!(
        h.storage
            .lookup(events.id, IndexRef::Secondary(3), &[t("x")])
            .unwrap()
            .len(),
        1
    );
    // The upgrade was written: the directory is version 3 now, and opens
    // again (as version 3) with the same table.
    let h = h.reopen();
    let format = h
        .storage
        .engine
        .get_latest(cf::CATALOG, catalog_key::FORMAT)
        .unwrap()
        .unwrap();
    assert_eq!(format, crate::catalog::FORMAT_VERSION.to_be_bytes());
    assert_eq!(h.storage.table("app", "events"), Some(events));
    assert_eq!(h.storage.scan(7).unwrap().len(), 1);
}

#[test]
fn declared_widths_and_precisions_survive_reopen() {
    let h = Harness::new(Kind::Rocks);
    h.storage.create_database("db", true).unwrap();
    let types = [
        SqlType::Int {
            bytes: 1,
            unsigned: false,
            display_width: Some(1),
        },
        SqlType::DateTime { fsp: 6 },
        SqlType::Timestamp { fsp: 2 },
        SqlType::Time { fsp: 3 },
    ];
    let schema = TableSchema {
        id: 0,
        database: "db".into(),
        name: "typed".into(),
        columns: types
            .iter()
            .enumerate()
            .map(|(n, ty)| col(&format!("c{n}"), ty.clone()))
            .collect(),
        primary_key: None,
        indexes: vec![],
        version: 1,
    };
    let created = h.storage.create_table(schema, false).unwrap();
    let h = h.reopen();
    let reopened = h.storage.table("db", "typed").unwrap();
    assert_eq!(reopened, created);
    let reread: Vec<SqlType> = reopened.columns.iter().map(|c| c.ty.clone()).collect();
    assert_eq!(reread, types);
}

#[test]
fn interrupted_index_build_is_redone_on_open() {
    let h = Harness::new(Kind::Rocks);
    let l = keyless(&h.storage);
    let n = crate::ddl::INDEX_BUILD_BATCH * 3 + 5;
    let rows: Vec<Row> = (0..n as i64)
        .map(|k| row(&[i(k), t(&format!("b{}", k % 5))]))
        .collect();
    h.storage.write(vec![insert(&l, rows)]).unwrap();
    let ix = IndexSchema {
        id: 0,
        name: "b".into(),
        columns: vec![1],
        unique: false,
    };
    crate::ddl::INDEX_BUILD_STOP_AFTER.store(2, Ordering::Relaxed);
    let r = h.storage.create_index("db", "log", ix);
    crate::ddl::INDEX_BUILD_STOP_AFTER.store(usize::MAX, Ordering::Relaxed);
    assert!(matches!(r, Err(StorageError::Internal(_))));
    // Not recorded: the index is not visible.
    assert!(h.storage.table("db", "log").unwrap().index("b").is_none());
    let h = h.reopen();
    let v = h.storage.table("db", "log").unwrap();
    let b = v.index("b").expect("the build was redone").id;
    assert_eq!(
        h.storage
            .lookup(l.id, IndexRef::Secondary(b), &[t("b4")])
            .unwrap()
            .len(),
        n / 5
    );
    assert_eq!(
        h.storage
            .range(
                l.id,
                IndexRef::Secondary(b),
                std::ops::Bound::Unbounded,
                std::ops::Bound::Unbounded
            )
            .unwrap()
            .len(),
        n
    );
}

#[test]
fn async_durability_commits() {
    let dir = tempfile::tempdir().unwrap();
    let s = Storage::open(config(dir.path(), Durability::Async)).unwrap();
    let u = users(&s);
    s.write(vec![insert(&u, vec![row(&[i(1), t("a"), i(1)])])])
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    drop(s);
    let s = Storage::open(config(dir.path(), Durability::Sync)).unwrap();
    assert_eq!(s.scan(u.id).unwrap().len(), 1);
}

#[test]
fn lookups_after_flush_use_the_on_disk_path() {
    let h = Harness::new(Kind::Rocks);
    let s = &h.storage;
    let u = users(s);
    let rows: Vec<Row> = (1..=3000)
        .map(|n| row(&[i(n), t(&format!("name{n}")), i(n % 37)]))
        .collect();
    s.write(vec![insert(&u, rows)]).unwrap();
    s.engine.flush().unwrap();
    // More rows in the memtable on top of the SSTs.
    s.write(vec![insert(&u, vec![row(&[i(5000), t("late"), i(3)])])])
        .unwrap();
    let age = u.index("age").unwrap().id;
    let name = u.index("name").unwrap().id;
    for a in [0i64, 3, 36] {
        let expect = (1..=3000).filter(|n| n % 37 == a).count() + usize::from(a == 3);
        assert_eq!(
            s.lookup(u.id, IndexRef::Secondary(age), &[i(a)])
                .unwrap()
                .len(),
            expect
        );
    }
    assert!(s
        .lookup(u.id, IndexRef::Secondary(age), &[i(99)])
        .unwrap()
        .is_empty());
    assert_eq!(
        s.lookup(u.id, IndexRef::Primary, &[i(1234)]).unwrap()[0][1],
        t("name1234")
    );
    assert!(s
        .lookup(u.id, IndexRef::Primary, &[i(4000)])
        .unwrap()
        .is_empty());
    assert_eq!(
        s.lookup(u.id, IndexRef::Secondary(name), &[t("NAME77")])
            .unwrap()[0][0],
        i(77)
    );
    let r = s
        .range(
            u.id,
            IndexRef::Primary,
            std::ops::Bound::Included(&[i(100)][..]),
            std::ops::Bound::Excluded(&[i(200)][..]),
        )
        .unwrap();
    assert_eq!(r.len(), 100);
    assert_eq!(s.scan(u.id).unwrap().len(), 3001);
}

#[test]
fn orphaned_column_families_are_dropped_on_open() {
    let h = Harness::new(Kind::Rocks);
    h.storage
        .engine
        .create_cf("t999", crate::engine::CfKind::Index)
        .unwrap();
    let u = users(&h.storage);
    let h = h.reopen();
    let names = h.storage.engine.cf_names();
    assert!(!names.contains(&"t999".to_string()));
    assert!(names.contains(&crate::cf::primary(u.id)));
}

/// Binary values keep every byte (all 256 values, in a primary key and in
/// a plain column) in rows, key lookups and the change log, across a
/// restart.
#[test]
fn every_byte_value_survives_reopen() {
    let h = Harness::new(Kind::Rocks);
    h.storage.create_database("db", true).unwrap();
    let schema = TableSchema {
        id: 0,
        database: "db".into(),
        name: "blobs".into(),
        columns: vec![
            col("k", SqlType::VarBinary(300)).not_null(),
            col("b", SqlType::Blob(65535)),
        ],
        primary_key: Some(vec![0]),
        indexes: vec![],
        version: 1,
    };
    let table = h.storage.create_table(schema, false).unwrap();
    let all: Vec<u8> = (0..=255u8).collect();
    let reversed: Vec<u8> = all.iter().rev().copied().collect();
    let rows = vec![
        row(&[Value::bytes(&all), Value::bytes(&reversed)]),
        // Keys that differ only past a 0x00 byte or in the last byte.
        row(&[Value::bytes([0u8, 0]), Value::bytes([0xFFu8])]),
        row(&[Value::bytes([0u8]), Value::bytes([] as [u8; 0])]),
    ];
    h.storage.write(vec![insert(&table, rows.clone())]).unwrap();
    let h = h.reopen();
    let s = &h.storage;
    assert_eq!(sorted(s.scan(table.id).unwrap()), sorted(rows.clone()));
    for r in &rows {
        assert_eq!(
            s.lookup(table.id, IndexRef::Primary, &r[..1]).unwrap(),
            vec![r.clone()]
        );
    }
    let mut logged = Vec::new();
    s.read_log(0, &mut |_, deltas| {
        for d in deltas {
            logged.extend(d.deltas.iter().map(|d| d.row().clone()));
        }
        Ok(())
    })
    .unwrap();
    assert_eq!(sorted(logged), sorted(rows));
}

/// A DATE/DATETIME key as format version 3 encoded it (chrono's day count,
/// microseconds since the epoch), an INT key as every version does.
fn v3_key_value(v: &Value) -> Vec<u8> {
    use chrono::Datelike;
    let n = match v {
        Value::Date(d) => i64::from(d.num_days_from_ce()),
        Value::DateTime(dt) => dt.and_utc().timestamp_micros(),
        Value::Int(i) => *i,
        other => panic!("no v3 key for {other:?}"),
    };
    let mut k = vec![0x01];
    k.extend_from_slice(&((n as u64) ^ (1 << 63)).to_be_bytes());
    k
}

#[test]
fn format_version_3_temporal_keys_are_rewritten() {
    use crate::cf::{self, catalog_key};
    use crate::engine::Batch;
    let h = Harness::new(Kind::Rocks);
    h.storage.create_database("db", true).unwrap();
    let schema = TableSchema {
        id: 0,
        database: "db".into(),
        name: "ev".into(),
        columns: vec![
            col("d", SqlType::Date).not_null(),
            col("n", int()),
            col("at", SqlType::DateTime { fsp: 0 }),
        ],
        primary_key: Some(vec![0]),
        indexes: vec![
            IndexSchema {
                id: 0,
                name: "n".into(),
                columns: vec![1],
                unique: false,
            },
            IndexSchema {
                id: 0,
                name: "at".into(),
                columns: vec![2],
                unique: false,
            },
        ],
        version: 1,
    };
    let ev = h.storage.create_table(schema, false).unwrap();
    let date = |y, m, d| Value::Date(ladle_common::date_from_parts(y, m, d).unwrap());
    let at = |y, m, d| match date(y, m, d) {
        Value::Date(d) => Value::DateTime(d.and_hms_opt(1, 2, 3).unwrap()),
        _ => unreachable!(),
    };
    let rows = vec![
        row(&[date(2020, 1, 1), i(1), at(2020, 1, 1)]),
        row(&[date(2020, 0, 15), i(2), at(2020, 0, 15)]),
        row(&[date(2019, 12, 31), i(3), at(2019, 12, 31)]),
    ];
    h.storage.write(vec![insert(&ev, rows.clone())]).unwrap();
    // Turn the directory into what version 3 wrote: the same rows under
    // keys in the old encoding.
    let e = &h.storage.engine;
    let (primary, by_n, by_at) = (
        cf::primary(ev.id),
        cf::secondary(ev.indexes[0].id),
        cf::secondary(ev.indexes[1].id),
    );
    let mut b = Batch::default();
    let mut entries: Vec<(String, Vec<u8>, Vec<u8>)> = Vec::new();
    e.with_consistent(&mut |r| {
        for family in [&primary, &by_n, &by_at] {
            r.scan(family, &[], None, &mut |k, v| {
                entries.push((family.clone(), k.to_vec(), v.to_vec()));
                Ok(true)
            })?;
        }
        Ok(())
    })
    .unwrap();
    for (family, k, _) in &entries {
        b.delete(family, k.clone());
    }
    let primary_values: Vec<Vec<u8>> = entries
        .iter()
        .filter(|(f, ..)| *f == primary)
        .map(|(_, _, v)| v.clone())
        .collect();
    let secondary_value = entries
        .iter()
        .find(|(f, ..)| *f == by_n)
        .map(|(_, _, v)| v.clone())
        .unwrap();
    for (value, r) in primary_values.iter().zip([&rows[2], &rows[1], &rows[0]]) {
        let pk = v3_key_value(&r[0]);
        b.put(&primary, pk.clone(), value.clone());
        b.put(
            &by_n,
            [v3_key_value(&r[1]), pk.clone()].concat(),
            secondary_value.clone(),
        );
        b.put(
            &by_at,
            [v3_key_value(&r[2]), pk].concat(),
            secondary_value.clone(),
        );
    }
    b.put(cf::CATALOG, catalog_key::FORMAT, 3u32.to_be_bytes());
    e.write(b, true).unwrap();

    let h = h.reopen();
    let s = &h.storage;
    // Primary order is MySQL's date order now, and every index finds
    // every row under its new key, with no entry left behind.
    assert_eq!(
        s.scan(ev.id).unwrap(),
        vec![rows[2].clone(), rows[1].clone(), rows[0].clone()]
    );
    for r in &rows {
        assert_eq!(
            s.lookup(ev.id, IndexRef::Primary, &r[..1]).unwrap(),
            vec![r.clone()]
        );
        assert_eq!(
            s.lookup(ev.id, IndexRef::Secondary(ev.indexes[0].id), &r[1..2])
                .unwrap(),
            vec![r.clone()]
        );
        assert_eq!(
            s.lookup(ev.id, IndexRef::Secondary(ev.indexes[1].id), &r[2..3])
                .unwrap(),
            vec![r.clone()]
        );
    }
    let mut count = 0;
    s.engine
        .with_consistent(&mut |r| {
            for family in [&primary, &by_n, &by_at] {
                r.scan(family, &[], None, &mut |_, _| {
                    count += 1;
                    Ok(true)
                })?;
            }
            Ok(())
        })
        .unwrap();
    assert_eq!(count, 9);
}
