//! Tests run against every engine (and both secondary-entry layouts).

use std::ops::Bound;
use std::sync::Arc;

use ladle_common::{Lsn, RowDelta, TableDeltas, Value};
use parking_lot::Mutex;

use super::*;
use crate::{CommitObserver, IndexRef, ScanSpec, StorageError};

conformance!(
    insert_lookup_scan,
    lookup_many_answers_as_lookups_do,
    auto_increment,
    unique_violations,
    collation_keys,
    insert_ignore_replace_odku,
    update_and_delete,
    update_changes_primary_key,
    keyless_duplicates,
    group_is_atomic_per_caller,
    validation_errors,
    ranges_and_prefixes,
    add_column_pads_old_rows,
    ops_built_for_an_old_schema_are_refused,
    alter_table_rewrites_rows_in_one_batch,
    create_and_drop_index,
    unique_index_over_duplicates_fails,
    observer_sees_commits_and_can_read,
    change_log_and_truncate,
    read_view_is_consistent,
    catalog_and_meta,
    concurrent_writers,
    panicking_row_function_fails_its_caller_only,
    exclusive_sees_what_observers_were_told,
    commit_check_sees_the_write_and_fails_its_caller_only,
    returning_lists_rows_and_its_error_fails_the_op,
);

fn insert_lookup_scan(kind: Kind) {
    let h = Harness::new(kind);
    let s = &h.storage;
    let u = users(s);
    let r = s
        .write(vec![insert(
            &u,
            vec![
                row(&[i(1), t("alice"), i(30)]),
                row(&[i(2), t("bob"), i(25)]),
            ],
        )])
        .unwrap();
    assert_eq!(r.ops[0].affected_rows, 2);
    assert_eq!(r.lsn, 1);
    assert_eq!(s.last_lsn(), 1);
    assert_eq!(
        s.lookup(u.id, IndexRef::Primary, &[i(2)]).unwrap(),
        vec![row(&[i(2), t("bob"), i(25)])]
    );
    // Key values are coerced: a string '1' finds id 1; garbage finds nothing.
    assert_eq!(
        s.lookup(u.id, IndexRef::Primary, &[t("1")]).unwrap().len(),
        1
    );
    assert!(s
        .lookup(u.id, IndexRef::Primary, &[t("x")])
        .unwrap()
        .is_empty());
    let age = u.index("age").unwrap().id;
    assert_eq!(
        s.lookup(u.id, IndexRef::Secondary(age), &[i(30)]).unwrap(),
        vec![row(&[i(1), t("alice"), i(30)])]
    );
    assert_eq!(s.scan(u.id).unwrap().len(), 2);
    assert_eq!(s.estimate_rows(u.id), 2);
}

/// One batched lookup (one RocksDB iterator for every key) gives each key
/// exactly what its own lookup gives: keys in any order, repeated, absent,
/// not coercible, over table files and the memtable on top of them; asked
/// for some columns, the same rows with the others NULL.
fn lookup_many_answers_as_lookups_do(kind: Kind) {
    let h = Harness::new(kind);
    let s = &h.storage;
    let u = users(s);
    let rows: Vec<Row> = (1..=500)
        .map(|n| row(&[i(n), t(&format!("name{n}")), i(n % 7)]))
        .collect();
    s.write(vec![insert(&u, rows)]).unwrap();
    s.engine.flush().unwrap();
    s.write(vec![insert(&u, vec![row(&[i(900), t("late"), i(3)])])])
        .unwrap();
    let age = IndexRef::Secondary(u.index("age").unwrap().id);
    let name = IndexRef::Secondary(u.index("name").unwrap().id);
    let cases: Vec<(IndexRef, Vec<Vec<Value>>)> = vec![
        (
            IndexRef::Primary,
            vec![
                vec![i(900)],
                vec![i(3)],
                vec![t("x")],
                vec![i(3)],
                vec![i(4000)],
                vec![t("17")],
            ],
        ),
        (
            age,
            vec![
                vec![i(6)],
                vec![i(3)],
                vec![i(99)],
                vec![i(0)],
                vec![i(3)],
                vec![t("x")],
            ],
        ),
        (
            name,
            vec![vec![t("NAME77")], vec![t("late")], vec![t("nobody")]],
        ),
        (IndexRef::Primary, vec![]),
        // One full primary key: a point read.
        (IndexRef::Primary, vec![vec![i(900)]]),
    ];
    for (index, keys) in cases {
        let each: Vec<Vec<Row>> = keys
            .iter()
            .map(|k| s.lookup(u.id, index, k).unwrap())
            .collect();
        assert_eq!(
            s.lookup_many(u.id, index, &keys, None).unwrap(),
            each,
            "{index:?}"
        );
        // Without the name (an index's own column included).
        let keep = [true, false, true];
        let narrowed: Vec<Vec<Row>> = each
            .iter()
            .map(|rows| {
                rows.iter()
                    .map(|r| vec![r[0].clone(), Value::Null, r[2].clone()])
                    .collect()
            })
            .collect();
        assert_eq!(
            s.lookup_many(u.id, index, &keys, Some(&keep)).unwrap(),
            narrowed,
            "{index:?} narrowed"
        );
    }
    // The lookups found what was asked, so the comparison above is not
    // between two empty answers.
    let found = s.lookup_many(u.id, age, &[vec![i(3)]], None).unwrap();
    // 3, 10, ..., 500 (72 rows) and the late row.
    assert_eq!(found[0].len(), 73);
}

fn auto_increment(kind: Kind) {
    let h = Harness::new(kind);
    let s = &h.storage;
    let u = users(s);
    let r = s
        .write(vec![insert(
            &u,
            vec![
                row(&[Value::Null, t("a"), i(1)]),
                row(&[i(0), t("b"), i(1)]),
            ],
        )])
        .unwrap();
    assert_eq!(r.ops[0].last_insert_id, Some(1));
    // An explicit larger value bumps the counter.
    s.write(vec![insert(&u, vec![row(&[i(10), t("c"), i(1)])])])
        .unwrap();
    let r = s
        .write(vec![insert(&u, vec![row(&[Value::Null, t("d"), i(1)])])])
        .unwrap();
    assert_eq!(r.ops[0].last_insert_id, Some(11));
    let r = s
        .write(vec![insert(&u, vec![row(&[i(5), t("e"), i(1)])])])
        .unwrap();
    assert_eq!(r.ops[0].last_insert_id, None);
    // The OK packet reports an explicit id (the last row's) when nothing
    // was generated, and the first generated value otherwise.
    assert_eq!(r.ops[0].insert_id, 5);
    let r = s
        .write(vec![insert(
            &u,
            vec![row(&[i(3), t("f"), i(1)]), row(&[i(4), t("g"), i(1)])],
        )])
        .unwrap();
    assert_eq!((r.ops[0].last_insert_id, r.ops[0].insert_id), (None, 4));
    let r = s
        .write(vec![insert(
            &u,
            vec![
                row(&[i(6), t("h"), i(1)]),
                row(&[Value::Null, t("j"), i(1)]),
            ],
        )])
        .unwrap();
    assert_eq!(
        (r.ops[0].last_insert_id, r.ops[0].insert_id),
        (Some(12), 12)
    );
    for id in [3, 4, 6, 12] {
        s.write(vec![WriteOp::Delete {
            table: u.id,
            schema_version: u.version,
            scan: ScanSpec::Full,
            filter: Arc::new(move |r: &Row| Ok(r[0] == i(id))),
        }])
        .unwrap();
    }
    let ids: Vec<Value> = s
        .scan(u.id)
        .unwrap()
        .into_iter()
        .map(|r| r[0].clone())
        .collect();
    assert_eq!(ids, vec![i(1), i(2), i(5), i(10), i(11)]);
}

fn unique_violations(kind: Kind) {
    let h = Harness::new(kind);
    let s = &h.storage;
    let u = users(s);
    s.write(vec![insert(&u, vec![row(&[i(1), t("alice"), i(30)])])])
        .unwrap();
    match s.write(vec![insert(&u, vec![row(&[i(1), t("zed"), i(1)])])]) {
        Err(StorageError::DuplicateKey { key, value }) => {
            assert_eq!((key.as_str(), value.as_str()), ("PRIMARY", "1"))
        }
        other => panic!("expected a duplicate primary key, got {other:?}"),
    }
    match s.write(vec![insert(&u, vec![row(&[i(2), t("alice"), i(1)])])]) {
        Err(StorageError::DuplicateKey { key, value }) => {
            assert_eq!((key.as_str(), value.as_str()), ("name", "alice"))
        }
        other => panic!("expected a duplicate unique key, got {other:?}"),
    }
    // Two rows in one statement that collide with each other.
    assert!(matches!(
        s.write(vec![insert(
            &u,
            vec![row(&[i(3), t("x"), i(1)]), row(&[i(4), t("x"), i(1)])]
        )]),
        Err(StorageError::DuplicateKey { .. })
    ));
    assert_eq!(s.scan(u.id).unwrap().len(), 1);
}

fn collation_keys(kind: Kind) {
    let h = Harness::new(kind);
    let s = &h.storage;
    let u = users(s);
    s.write(vec![insert(&u, vec![row(&[i(1), t("Alice"), i(30)])])])
        .unwrap();
    // general_ci: 'alice' collides with 'Alice'...
    assert!(matches!(
        s.write(vec![insert(&u, vec![row(&[i(2), t("alice "), i(1)])])]),
        Err(StorageError::DuplicateKey { .. })
    ));
    // ...and a lookup for 'ALICE' finds the row as stored.
    let name = u.index("name").unwrap().id;
    assert_eq!(
        s.lookup(u.id, IndexRef::Secondary(name), &[t("ALICE")])
            .unwrap(),
        vec![row(&[i(1), t("Alice"), i(30)])]
    );
}

fn insert_ignore_replace_odku(kind: Kind) {
    let h = Harness::new(kind);
    let s = &h.storage;
    let u = users(s);
    s.write(vec![insert(
        &u,
        vec![row(&[i(1), t("a"), i(1)]), row(&[i(2), t("b"), i(2)])],
    )])
    .unwrap();
    // RETURNING that lists each row as stored.
    let as_stored: crate::RowReturning = Arc::new(|r, _| Ok(r.clone()));
    let ignore = WriteOp::Insert {
        table: u.id,
        schema_version: u.version,
        rows: vec![row(&[i(1), t("z"), i(9)]), row(&[i(3), t("c"), i(3)])],
        on_conflict: OnConflict::Ignore,
        auto_value_on_zero: true,
        id_batches: crate::IdBatches::PerRow,
        returning: Some(Arc::clone(&as_stored)),
    };
    let ignored = s.write(vec![ignore]).unwrap().ops.remove(0);
    assert_eq!(ignored.affected_rows, 1);
    // The rows written, for RETURNING: not the skipped one.
    assert_eq!(ignored.rows, vec![row(&[i(3), t("c"), i(3)])]);
    // REPLACE conflicting with two rows (id 1 and name 'b') deletes both.
    let replace = WriteOp::Insert {
        table: u.id,
        schema_version: u.version,
        rows: vec![row(&[i(1), t("b"), i(7)])],
        on_conflict: OnConflict::Replace,
        auto_value_on_zero: true,
        id_batches: crate::IdBatches::PerRow,
        returning: Some(Arc::clone(&as_stored)),
    };
    let replaced = s.write(vec![replace]).unwrap().ops.remove(0);
    assert_eq!(replaced.affected_rows, 3);
    assert_eq!(replaced.rows, vec![row(&[i(1), t("b"), i(7)])]);
    assert_eq!(
        sorted(s.scan(u.id).unwrap()),
        vec![row(&[i(1), t("b"), i(7)]), row(&[i(3), t("c"), i(3)])]
    );
    let bump: crate::ConflictUpdater = Arc::new(|old, _new| {
        let mut r = old.clone();
        r[2] = Value::Int(old[2].as_i64().unwrap_or(0) + 1);
        Ok(r)
    });
    let odku = |rows| WriteOp::Insert {
        table: u.id,
        schema_version: u.version,
        rows,
        on_conflict: OnConflict::Update(Arc::clone(&bump)),
        auto_value_on_zero: true,
        id_batches: crate::IdBatches::PerRow,
        returning: Some(Arc::clone(&as_stored)),
    };
    let updated = s
        .write(vec![odku(vec![row(&[i(3), t("q"), i(0)])])])
        .unwrap()
        .ops
        .remove(0);
    assert_eq!(updated.affected_rows, 2);
    assert_eq!(updated.rows, vec![row(&[i(3), t("c"), i(4)])]);
    assert_eq!(
        s.write(vec![odku(vec![row(&[i(4), t("d"), i(0)])])])
            .unwrap()
            .ops[0]
            .affected_rows,
        1
    );
    let same: crate::ConflictUpdater = Arc::new(|old, _| Ok(old.clone()));
    let unchanged = WriteOp::Insert {
        table: u.id,
        schema_version: u.version,
        rows: vec![row(&[i(4), t("d"), i(0)])],
        on_conflict: OnConflict::Update(same),
        auto_value_on_zero: true,
        id_batches: crate::IdBatches::PerRow,
        returning: Some(Arc::clone(&as_stored)),
    };
    let found = s.write(vec![unchanged]).unwrap().ops.remove(0);
    assert_eq!(found.affected_rows, 0);
    assert_eq!(found.rows, vec![row(&[i(4), t("d"), i(0)])]);
    assert_eq!(
        s.lookup(u.id, IndexRef::Primary, &[i(3)]).unwrap(),
        vec![row(&[i(3), t("c"), i(4)])]
    );
}

fn update_and_delete(kind: Kind) {
    let h = Harness::new(kind);
    let s = &h.storage;
    let u = users(s);
    s.write(vec![insert(
        &u,
        (1..=5)
            .map(|n| row(&[i(n), t(&format!("u{n}")), i(n % 2)]))
            .collect(),
    )])
    .unwrap();
    let age = u.index("age").unwrap().id;
    // UPDATE ... SET age = 1 WHERE age = 1 changes nothing; WHERE age = 0 changes 2.
    let set_age_1: crate::RowUpdater = Arc::new(|r| {
        let mut n = r.clone();
        n[2] = Value::Int(1);
        Ok(Some(n))
    });
    let upd = |key: i64| WriteOp::Update {
        table: u.id,
        schema_version: u.version,
        scan: ScanSpec::Prefix {
            index: IndexRef::Secondary(age),
            key: vec![i(key)],
        },
        update: Arc::clone(&set_age_1),
    };
    assert_eq!(s.write(vec![upd(1)]).unwrap().ops[0].affected_rows, 0);
    assert_eq!(s.write(vec![upd(0)]).unwrap().ops[0].affected_rows, 2);
    assert_eq!(
        s.lookup(u.id, IndexRef::Secondary(age), &[i(1)])
            .unwrap()
            .len(),
        5
    );
    assert!(s
        .lookup(u.id, IndexRef::Secondary(age), &[i(0)])
        .unwrap()
        .is_empty());
    let del = WriteOp::Delete {
        table: u.id,
        schema_version: u.version,
        scan: ScanSpec::Full,
        filter: Arc::new(|r| Ok(r[0].as_i64() > Some(3))),
    };
    assert_eq!(s.write(vec![del]).unwrap().ops[0].affected_rows, 2);
    assert_eq!(s.scan(u.id).unwrap().len(), 3);
    assert!(s
        .lookup(u.id, IndexRef::Primary, &[i(4)])
        .unwrap()
        .is_empty());
    assert_eq!(s.estimate_rows(u.id), 3);
}

fn update_changes_primary_key(kind: Kind) {
    let h = Harness::new(kind);
    let s = &h.storage;
    let u = users(s);
    s.write(vec![insert(
        &u,
        vec![row(&[i(1), t("a"), i(1)]), row(&[i(2), t("b"), i(2)])],
    )])
    .unwrap();
    let to: fn(i64) -> crate::RowUpdater = |id| {
        Arc::new(move |r| {
            let mut n = r.clone();
            n[0] = Value::Int(id);
            Ok(Some(n))
        })
    };
    let upd = |from: i64, id: i64| WriteOp::Update {
        table: u.id,
        schema_version: u.version,
        scan: ScanSpec::Prefix {
            index: IndexRef::Primary,
            key: vec![i(from)],
        },
        update: to(id),
    };
    assert_eq!(s.write(vec![upd(1, 10)]).unwrap().ops[0].affected_rows, 1);
    assert!(s
        .lookup(u.id, IndexRef::Primary, &[i(1)])
        .unwrap()
        .is_empty());
    assert_eq!(
        s.lookup(u.id, IndexRef::Primary, &[i(10)]).unwrap(),
        vec![row(&[i(10), t("a"), i(1)])]
    );
    let name = u.index("name").unwrap().id;
    assert_eq!(
        s.lookup(u.id, IndexRef::Secondary(name), &[t("a")])
            .unwrap(),
        vec![row(&[i(10), t("a"), i(1)])]
    );
    assert!(matches!(
        s.write(vec![upd(2, 10)]),
        Err(StorageError::DuplicateKey { .. })
    ));
}

fn keyless_duplicates(kind: Kind) {
    let h = Harness::new(kind);
    let s = &h.storage;
    let l = keyless(s);
    let dup = row(&[i(1), t("x")]);
    s.write(vec![insert(
        &l,
        vec![dup.clone(), dup.clone(), row(&[i(2), t("y")])],
    )])
    .unwrap();
    assert_eq!(s.scan(l.id).unwrap().len(), 3);
    // DELETE ... LIMIT 1 style: a filter that accepts only the first match.
    let seen = Arc::new(Mutex::new(false));
    let first_only: crate::RowFilter = {
        let seen = Arc::clone(&seen);
        Arc::new(move |r| {
            let mut s = seen.lock();
            if r[0] == Value::Int(1) && !*s {
                *s = true;
                return Ok(true);
            }
            Ok(false)
        })
    };
    let a = l.indexes[0].id;
    let del = WriteOp::Delete {
        table: l.id,
        schema_version: l.version,
        scan: ScanSpec::Prefix {
            index: IndexRef::Secondary(a),
            key: vec![i(1)],
        },
        filter: first_only,
    };
    let r = s.write(vec![del]).unwrap();
    assert_eq!(r.ops[0].affected_rows, 1);
    assert_eq!(
        s.lookup(l.id, IndexRef::Secondary(a), &[i(1)]).unwrap(),
        vec![dup.clone()]
    );
    assert_eq!(s.scan(l.id).unwrap().len(), 2);
    // A primary lookup with a key on a keyless table matches nothing; an
    // empty key is every row.
    assert!(s
        .lookup(l.id, IndexRef::Primary, &[i(1)])
        .unwrap()
        .is_empty());
    assert_eq!(s.lookup(l.id, IndexRef::Primary, &[]).unwrap().len(), 2);
    // Updating one of the duplicates changes one row.
    s.write(vec![insert(&l, vec![dup.clone()])]).unwrap();
    let upd = WriteOp::Update {
        table: l.id,
        schema_version: l.version,
        scan: ScanSpec::Full,
        update: Arc::new(|r| {
            Ok((r[1] == Value::text("y")).then(|| vec![Value::Int(3), r[1].clone()]))
        }),
    };
    assert_eq!(s.write(vec![upd]).unwrap().ops[0].affected_rows, 1);
    assert_eq!(
        sorted(s.scan(l.id).unwrap()),
        vec![dup.clone(), dup, row(&[i(3), t("y")])]
    );
}

fn group_is_atomic_per_caller(kind: Kind) {
    let h = Harness::new(kind);
    let s = &h.storage;
    let u = users(s);
    s.write(vec![insert(&u, vec![row(&[i(1), t("a"), i(1)])])])
        .unwrap();
    // The second op fails: the first op's row must not stay.
    let r = s.write(vec![
        insert(&u, vec![row(&[i(2), t("b"), i(1)])]),
        insert(&u, vec![row(&[i(3), t("a"), i(1)])]),
    ]);
    assert!(matches!(r, Err(StorageError::DuplicateKey { .. })));
    assert_eq!(s.scan(u.id).unwrap().len(), 1);
    // Ops of one caller see each other.
    let r = s
        .write(vec![
            insert(&u, vec![row(&[i(2), t("b"), i(1)])]),
            WriteOp::Delete {
                table: u.id,
                schema_version: u.version,
                scan: ScanSpec::Prefix {
                    index: IndexRef::Primary,
                    key: vec![i(2)],
                },
                filter: Arc::new(|_| Ok(true)),
            },
        ])
        .unwrap();
    assert_eq!(r.ops[1].affected_rows, 1);
    assert_eq!(s.scan(u.id).unwrap().len(), 1);
}

fn validation_errors(kind: Kind) {
    let h = Harness::new(kind);
    let s = &h.storage;
    let u = users(s);
    assert!(matches!(
        s.write(vec![insert(&u, vec![row(&[i(1), Value::Null, i(1)])])]),
        Err(StorageError::NotNull { .. })
    ));
    assert!(matches!(
        s.write(vec![insert(&u, vec![row(&[i(1), t("a")])])]),
        Err(StorageError::ColumnCount)
    ));
    assert!(matches!(
        s.write(vec![insert(&u, vec![row(&[i(1), t("a"), t("old")])])]),
        Err(StorageError::BadValueAt(_))
    ));
    assert!(matches!(
        s.write(vec![insert(
            &u,
            vec![row(&[i(1), t(&"x".repeat(21)), i(1)])]
        )]),
        Err(StorageError::BadValueAt(_))
    ));
    // Values are coerced on the way in.
    s.write(vec![insert(
        &u,
        vec![row(&[t("7"), t("a"), Value::Double(2.6)])],
    )])
    .unwrap();
    assert_eq!(s.scan(u.id).unwrap(), vec![row(&[i(7), t("a"), i(3)])]);
    // Row size limit.
    s.create_database("db", true).unwrap();
    let big = TableSchema {
        id: 0,
        database: "db".into(),
        name: "big".into(),
        columns: vec![
            col("a", SqlType::VarChar(40_000)),
            col("b", SqlType::VarChar(40_000)),
        ],
        primary_key: None,
        indexes: vec![],
        version: 1,
    };
    let big = s.create_table(big, false).unwrap();
    let long = t(&"x".repeat(40_000));
    assert!(matches!(
        s.write(vec![insert(&big, vec![row(&[long.clone(), long])])]),
        Err(StorageError::RowTooLarge { .. })
    ));
    assert!(s.last_lsn() >= 1);
}

fn ranges_and_prefixes(kind: Kind) {
    let h = Harness::new(kind);
    let s = &h.storage;
    s.create_database("db", false).unwrap();
    let schema = TableSchema {
        id: 0,
        database: "db".into(),
        name: "pairs".into(),
        columns: vec![
            col("a", int()),
            col("b", SqlType::VarChar(10)),
            col("c", int()),
        ],
        primary_key: Some(vec![0, 1]),
        indexes: vec![IndexSchema {
            id: 0,
            name: "cb".into(),
            columns: vec![2, 1],
            unique: false,
        }],
        version: 1,
    };
    let p = s.create_table(schema, false).unwrap();
    let mut rows = Vec::new();
    for a in 0..5 {
        for b in ["x", "y"] {
            rows.push(row(&[
                i(a),
                t(b),
                if a == 2 { Value::Null } else { i(a * 10) },
            ]));
        }
    }
    s.write(vec![insert(&p, rows)]).unwrap();
    assert_eq!(s.lookup(p.id, IndexRef::Primary, &[i(3)]).unwrap().len(), 2);
    assert_eq!(
        s.lookup(p.id, IndexRef::Primary, &[i(3), t("Y")]).unwrap(),
        vec![row(&[i(3), t("y"), i(30)])]
    );
    let r = s
        .range(
            p.id,
            IndexRef::Primary,
            Bound::Included(&[i(1)][..]),
            Bound::Excluded(&[i(3)][..]),
        )
        .unwrap();
    assert_eq!(r.len(), 4);
    let r = s
        .range(
            p.id,
            IndexRef::Primary,
            Bound::Excluded(&[i(1)][..]),
            Bound::Included(&[i(3)][..]),
        )
        .unwrap();
    assert_eq!(
        r.iter().map(|r| r[0].clone()).collect::<Vec<_>>(),
        vec![i(2), i(2), i(3), i(3)]
    );
    let r = s
        .range(p.id, IndexRef::Primary, Bound::Unbounded, Bound::Unbounded)
        .unwrap();
    assert_eq!(r.len(), 10);
    let cb = p.indexes[0].id;
    // NULL sorts first; a NULL key finds NULLs.
    assert_eq!(
        s.lookup(p.id, IndexRef::Secondary(cb), &[Value::Null])
            .unwrap()
            .len(),
        2
    );
    let r = s
        .range(
            p.id,
            IndexRef::Secondary(cb),
            Bound::Unbounded,
            Bound::Excluded(&[i(10)][..]),
        )
        .unwrap();
    assert_eq!(
        r.iter().map(|r| r[2].clone()).collect::<Vec<_>>(),
        vec![Value::Null, Value::Null, i(0), i(0)]
    );
    assert!(s
        .range(
            p.id,
            IndexRef::Secondary(cb),
            Bound::Included(&[t("nope")][..]),
            Bound::Unbounded
        )
        .unwrap()
        .is_empty());
}

fn add_column_pads_old_rows(kind: Kind) {
    let h = Harness::new(kind);
    let s = &h.storage;
    let u = users(s);
    s.write(vec![insert(&u, vec![row(&[i(1), t("a"), i(1)])])])
        .unwrap();
    let mut c = col("score", int()).not_null();
    c.default = ladle_common::ColumnDefault::Value(i(42));
    let v2 = s.add_column("db", "users", c).unwrap();
    assert_eq!(v2.version, u.version + 1);
    assert_eq!(v2.columns.len(), 4);
    assert!(matches!(
        s.add_column("db", "users", col("SCORE", int())),
        Err(StorageError::ColumnExists(_))
    ));
    s.write(vec![insert(&v2, vec![row(&[i(2), t("b"), i(1), i(7)])])])
        .unwrap();
    assert_eq!(
        s.scan(u.id).unwrap(),
        vec![
            row(&[i(1), t("a"), i(1), i(42)]),
            row(&[i(2), t("b"), i(1), i(7)])
        ]
    );
    let age = u.index("age").unwrap().id;
    assert_eq!(
        s.lookup(u.id, IndexRef::Secondary(age), &[i(1)])
            .unwrap()
            .len(),
        2
    );
}

fn alter_table_rewrites_rows_in_one_batch(kind: Kind) {
    let h = Harness::new(kind);
    let s = &h.storage;
    let u = users(s);
    s.write(vec![insert(
        &u,
        vec![row(&[i(1), t("a"), i(10)]), row(&[i(2), t("b"), i(10)])],
    )])
    .unwrap();
    // Drop `name` (and its index), make `age` the first column, index it
    // UNIQUE: the rows share age 10, so nothing changes.
    let mut shape = (*u).clone();
    shape.columns = vec![u.columns[2].clone(), u.columns[0].clone()];
    shape.primary_key = Some(vec![1]);
    shape.indexes = vec![IndexSchema {
        id: 0,
        name: "age_u".into(),
        columns: vec![0],
        unique: true,
    }];
    let change = |schema: &TableSchema| crate::TableChange {
        schema: schema.clone(),
        rewrite_rows: true,
        meta: vec![("m/1".into(), Some(b"x".to_vec()))],
    };
    let mut convert = |_: usize, r: Row| Ok::<_, StorageError>(vec![r[2].clone(), r[0].clone()]);
    assert!(matches!(
        s.alter_table("db", "users", change(&shape), &mut convert),
        Err(StorageError::DuplicateKey { .. })
    ));
    assert_eq!(s.table("db", "users").unwrap().version, u.version);
    assert_eq!(s.scan(u.id).unwrap().len(), 2);
    assert!(s.list_meta("m/").unwrap().is_empty());
    shape.indexes[0].unique = false;
    let mut seen = Vec::new();
    let mut convert = |n: usize, r: Row| {
        seen.push(n);
        Ok::<_, StorageError>(vec![r[2].clone(), r[0].clone()])
    };
    let v2 = s
        .alter_table("db", "users", change(&shape), &mut convert)
        .unwrap();
    assert_eq!(seen, vec![1, 2]);
    assert_eq!(v2.columns.len(), 2);
    assert_eq!(s.list_meta("m/").unwrap().len(), 1);
    assert_eq!(
        s.scan(u.id).unwrap(),
        vec![row(&[i(10), i(1)]), row(&[i(10), i(2)])]
    );
    let ix = v2.index("age_u").unwrap().id;
    assert_eq!(
        s.lookup(u.id, IndexRef::Secondary(ix), &[i(10)])
            .unwrap()
            .len(),
        2
    );
    // Writes see the new shape; a rename moves the name.
    s.write(vec![insert(&v2, vec![row(&[i(11), Value::Null])])])
        .unwrap();
    assert_eq!(s.scan(u.id).unwrap().len(), 3);
    let mut renamed = (*v2).clone();
    renamed.name = "people".into();
    let mut keep = |_: usize, r: Row| Ok::<_, StorageError>(r);
    let v3 = s
        .alter_table(
            "db",
            "users",
            crate::TableChange {
                schema: renamed,
                rewrite_rows: false,
                meta: Vec::new(),
            },
            &mut keep,
        )
        .unwrap();
    assert!(s.table("db", "users").is_none());
    assert_eq!(s.table("db", "people").unwrap().id, v3.id);
    assert_eq!(s.scan(v3.id).unwrap().len(), 3);
}

fn create_and_drop_index(kind: Kind) {
    let h = Harness::new(kind);
    let s = &h.storage;
    let l = keyless(s);
    let n = crate::ddl::INDEX_BUILD_BATCH * 2 + 17;
    let rows: Vec<Row> = (0..n as i64)
        .map(|k| row(&[i(k), t(&format!("b{}", k % 7))]))
        .collect();
    s.write(vec![insert(&l, rows)]).unwrap();
    let ix = IndexSchema {
        id: 0,
        name: "b".into(),
        columns: vec![1],
        unique: false,
    };
    let v = s.create_index("db", "log", ix.clone()).unwrap();
    let b = v.index("b").unwrap().id;
    assert_ne!(b, l.indexes[0].id);
    assert_eq!(
        s.lookup(l.id, IndexRef::Secondary(b), &[t("B3")])
            .unwrap()
            .len(),
        (0..n).filter(|k| k % 7 == 3).count()
    );
    assert!(matches!(
        s.create_index("db", "log", ix),
        Err(StorageError::IndexExists(_))
    ));
    // The new index is maintained by later writes.
    s.write(vec![insert(&v, vec![row(&[i(-1), t("new")])])])
        .unwrap();
    assert_eq!(
        s.lookup(l.id, IndexRef::Secondary(b), &[t("new")])
            .unwrap()
            .len(),
        1
    );
    let v = s.drop_index("db", "log", "b").unwrap();
    assert!(v.index("b").is_none());
    assert!(matches!(
        s.drop_index("db", "log", "b"),
        Err(StorageError::NoSuchIndex(_))
    ));
    s.write(vec![insert(&v, vec![row(&[i(-2), t("new")])])])
        .unwrap();
    assert_eq!(s.scan(l.id).unwrap().len(), n + 2);
}

fn unique_index_over_duplicates_fails(kind: Kind) {
    let h = Harness::new(kind);
    let s = &h.storage;
    let l = keyless(s);
    s.write(vec![insert(
        &l,
        vec![
            row(&[i(1), t("x")]),
            row(&[i(2), t("X")]),
            row(&[i(3), Value::Null]),
            row(&[i(4), Value::Null]),
        ],
    )])
    .unwrap();
    let ix = IndexSchema {
        id: 0,
        name: "ub".into(),
        columns: vec![1],
        unique: true,
    };
    match s.create_index("db", "log", ix) {
        Err(StorageError::DuplicateKey { key, .. }) => assert_eq!(key, "ub"),
        other => panic!("expected DuplicateKey, got {other:?}"),
    }
    assert!(s.table("db", "log").unwrap().index("ub").is_none());
    // NULLs do not collide in a UNIQUE index.
    let ia = IndexSchema {
        id: 0,
        name: "ua".into(),
        columns: vec![0],
        unique: true,
    };
    let v = s.create_index("db", "log", ia).unwrap();
    assert!(matches!(
        s.write(vec![insert(&v, vec![row(&[i(1), t("q")])])]),
        Err(StorageError::DuplicateKey { .. })
    ));
}

#[derive(Default)]
struct Recorder {
    storage: Mutex<Option<std::sync::Weak<Storage>>>,
    seen: Mutex<Vec<(Lsn, Vec<TableDeltas>, usize)>>,
}

impl CommitObserver for Recorder {
    fn on_commit(&self, lsn: Lsn, changes: Vec<TableDeltas>) {
        // Reads from inside the observer must not deadlock and must see
        // the batch.
        let rows = match self.storage.lock().as_ref().and_then(|w| w.upgrade()) {
            Some(s) => s
                .scan(changes[0].table)
                .map(|r| r.len())
                .unwrap_or(usize::MAX),
            None => usize::MAX,
        };
        self.seen.lock().push((lsn, changes, rows));
    }
}

fn observer_sees_commits_and_can_read(kind: Kind) {
    let h = Harness::new(kind);
    let s = &h.storage;
    let u = users(s);
    let rec = Arc::new(Recorder::default());
    *rec.storage.lock() = Some(Arc::downgrade(s));
    s.set_commit_observer(rec.clone());
    s.write(vec![insert(&u, vec![row(&[i(1), t("a"), i(1)])])])
        .unwrap();
    let upd = WriteOp::Update {
        table: u.id,
        schema_version: u.version,
        scan: ScanSpec::Full,
        update: Arc::new(|r| {
            let mut n = r.clone();
            n[2] = Value::Int(5);
            Ok(Some(n))
        }),
    };
    s.write(vec![upd]).unwrap();
    // A failing write is not reported.
    assert!(s
        .write(vec![insert(&u, vec![row(&[i(1), t("a"), i(1)])])])
        .is_err());
    let seen = rec.seen.lock().clone();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].0, 1);
    assert_eq!(seen[0].2, 1);
    assert_eq!(
        seen[1].1,
        vec![TableDeltas {
            table: u.id,
            deltas: vec![
                RowDelta::Delete(row(&[i(1), t("a"), i(1)])),
                RowDelta::Insert(row(&[i(1), t("a"), i(5)]))
            ],
        }]
    );
    // exclusive() allows reads.
    assert_eq!(s.exclusive(|| s.scan(u.id).unwrap().len()), 1);
}

fn change_log_and_truncate(kind: Kind) {
    let h = Harness::new(kind);
    let s = &h.storage;
    let u = users(s);
    for n in 1..=600 {
        s.write(vec![insert(
            &u,
            vec![row(&[i(n), t(&format!("n{n}")), i(0)])],
        )])
        .unwrap();
    }
    let mut lsns = Vec::new();
    s.read_log(0, &mut |lsn, deltas| {
        assert_eq!(deltas[0].deltas.len(), 1);
        lsns.push(lsn);
        Ok(())
    })
    .unwrap();
    assert_eq!(lsns, (1..=600).collect::<Vec<_>>());
    s.truncate_log(590).unwrap();
    let mut left = Vec::new();
    s.read_log(0, &mut |lsn, _| {
        left.push(lsn);
        Ok(())
    })
    .unwrap();
    assert_eq!(left, (590..=600).collect::<Vec<_>>());
    let mut after = Vec::new();
    s.read_log(598, &mut |lsn, _| {
        after.push(lsn);
        Ok(())
    })
    .unwrap();
    assert_eq!(after, vec![599, 600]);
}

fn read_view_is_consistent(kind: Kind) {
    let h = Harness::new(kind);
    let s = Arc::clone(&h.storage);
    let l = keyless(&s);
    // Each batch inserts 10 rows with the same `a`: a view must always see
    // a multiple of 10 rows and its LSN's worth of batches.
    let writer = {
        let s = Arc::clone(&s);
        let l = Arc::clone(&l);
        std::thread::spawn(move || {
            for k in 0..200 {
                s.write(vec![insert(
                    &l,
                    (0..10).map(|_| row(&[i(k), t("v")])).collect(),
                )])
                .unwrap();
            }
        })
    };
    for _ in 0..50 {
        let v = s.read_view();
        let rows = v.scan(l.id).unwrap();
        assert_eq!(rows.len() % 10, 0);
        assert_eq!(rows.len() as u64, v.lsn() * 10);
        let a = l.indexes[0].id;
        let k = rows.len() as i64 / 10 - 1;
        if k >= 0 {
            assert_eq!(
                v.lookup(l.id, IndexRef::Secondary(a), &[i(k)])
                    .unwrap()
                    .len(),
                10
            );
        }
        let plain = s.scan(l.id).unwrap();
        assert_eq!(plain.len() % 10, 0);
    }
    writer.join().unwrap();
    let v = s.read_view();
    assert_eq!(v.lsn(), 200);
    assert_eq!(
        v.range(l.id, IndexRef::Primary, Bound::Unbounded, Bound::Unbounded)
            .unwrap()
            .len(),
        2000
    );
}

fn catalog_and_meta(kind: Kind) {
    let h = Harness::new(kind);
    let s = &h.storage;
    s.create_database("a", false).unwrap();
    assert!(matches!(
        s.create_database("a", false),
        Err(StorageError::DatabaseExists(_))
    ));
    s.create_database("a", true).unwrap();
    let u = users(s);
    assert_eq!(s.databases(), vec!["a".to_string(), "db".to_string()]);
    assert!(matches!(
        s.create_table((*u).clone(), false),
        Err(StorageError::TableExists(_))
    ));
    assert_eq!(s.create_table((*u).clone(), true).unwrap().id, u.id);
    assert_eq!(s.tables("db").len(), 1);
    assert_eq!(s.table_by_id(u.id).unwrap().name, "users");
    let mut other = (*u).clone();
    other.database = "nope".into();
    assert!(matches!(
        s.create_table(other, false),
        Err(StorageError::NoSuchDatabase(_))
    ));
    s.put_meta("view/b", b"2").unwrap();
    s.put_meta("view/a", b"1").unwrap();
    s.put_meta("graph", b"g").unwrap();
    assert_eq!(
        s.list_meta("view/").unwrap(),
        vec![
            ("view/a".into(), b"1".to_vec()),
            ("view/b".into(), b"2".to_vec())
        ]
    );
    s.delete_meta("view/a").unwrap();
    assert_eq!(s.list_meta("").unwrap().len(), 2);
    s.put_metas(&[("pair/list", b"l"), ("pair/record", b"r")])
        .unwrap();
    assert_eq!(
        s.list_meta("pair/").unwrap(),
        vec![
            ("pair/list".into(), b"l".to_vec()),
            ("pair/record".into(), b"r".to_vec())
        ]
    );
    s.delete_meta("pair/list").unwrap();
    s.delete_meta("pair/record").unwrap();
    s.write(vec![insert(&u, vec![row(&[i(1), t("a"), i(1)])])])
        .unwrap();
    let dropped = s.drop_table("db", "users").unwrap();
    assert_eq!(dropped.id, u.id);
    assert!(s.table("db", "users").is_none());
    assert!(s.scan(u.id).is_err());
    assert!(matches!(
        s.drop_table("db", "users"),
        Err(StorageError::NoSuchTable { .. })
    ));
    let u2 = users(s);
    assert_ne!(u2.id, u.id);
    assert!(s.scan(u2.id).unwrap().is_empty());
    assert_eq!(s.drop_database("db", false).unwrap().len(), 1);
    assert!(s.drop_database("db", true).unwrap().is_empty());
    assert!(matches!(
        s.drop_database("db", false),
        Err(StorageError::NoSuchDatabase(_))
    ));
    assert_eq!(s.databases(), vec!["a".to_string()]);
}

fn concurrent_writers(kind: Kind) {
    let h = Harness::new(kind);
    let s = Arc::clone(&h.storage);
    let u = users(&s);
    let threads: Vec<_> = (0..8)
        .map(|th| {
            let s = Arc::clone(&s);
            let u = Arc::clone(&u);
            std::thread::spawn(move || {
                let mut ids = Vec::new();
                for k in 0..50 {
                    let r = s
                        .write(vec![insert(
                            &u,
                            vec![row(&[Value::Null, t(&format!("t{th}-{k}")), i(th)])],
                        )])
                        .unwrap();
                    ids.push(r.ops[0].last_insert_id.unwrap());
                    // Every writer also fails sometimes; others are unaffected.
                    assert!(s
                        .write(vec![insert(&u, vec![row(&[i(1), t("dup"), i(0)])])])
                        .is_err());
                }
                ids
            })
        })
        .collect();
    let mut all: Vec<u64> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), 400);
    assert_eq!(s.scan(u.id).unwrap().len(), 400);
    assert_eq!(all, (1..=400).collect::<Vec<u64>>());
}

/// A write op carries the schema version its rows were laid out for; after
/// a schema change the commit refuses it (the caller builds it again)
/// instead of storing values under the wrong columns.
fn ops_built_for_an_old_schema_are_refused(kind: Kind) {
    let h = Harness::new(kind);
    let s = &h.storage;
    let old = users(s);
    let new = s.add_column("db", "users", col("score", int())).unwrap();
    assert_eq!(new.version, old.version + 1);
    let stale = s.write(vec![insert(&old, vec![row(&[i(1), t("a"), i(1)])])]);
    assert!(
        matches!(stale, Err(StorageError::SchemaChanged { ref table }) if table == "users"),
        "{stale:?}"
    );
    let delete = WriteOp::Delete {
        table: old.id,
        schema_version: old.version,
        scan: ScanSpec::Full,
        filter: Arc::new(|_| Ok(true)),
    };
    assert!(matches!(
        s.write(vec![delete]),
        Err(StorageError::SchemaChanged { .. })
    ));
    assert!(s.scan(old.id).unwrap().is_empty());
    s.write(vec![insert(&new, vec![row(&[i(1), t("a"), i(1), i(5)])])])
        .unwrap();
    assert_eq!(s.scan(new.id).unwrap().len(), 1);
}

fn panicking_row_function_fails_its_caller_only(kind: Kind) {
    let h = Harness::new(kind);
    let s = &h.storage;
    let u = users(s);
    s.write(vec![insert(&u, vec![row(&[i(1), t("a"), i(1)])])])
        .unwrap();
    let boom = WriteOp::Update {
        table: u.id,
        schema_version: u.version,
        scan: ScanSpec::Full,
        update: Arc::new(|_| panic!("row function bug (expected by this test)")),
    };
    // The same caller's earlier op is rolled back with it.
    let r = s.write(vec![insert(&u, vec![row(&[i(2), t("b"), i(1)])]), boom]);
    assert!(matches!(r, Err(StorageError::Internal(_))));
    assert_eq!(s.scan(u.id).unwrap().len(), 1);
    s.write(vec![insert(&u, vec![row(&[i(3), t("c"), i(1)])])])
        .unwrap();
    assert_eq!(s.scan(u.id).unwrap().len(), 2);
}

/// Counts the rows observers were told about.
struct Counter(Mutex<i64>);

impl CommitObserver for Counter {
    fn on_commit(&self, _lsn: Lsn, changes: Vec<TableDeltas>) {
        let d: i64 = changes
            .iter()
            .flat_map(|c| &c.deltas)
            .map(|d| d.sign())
            .sum();
        *self.0.lock() += d;
    }
}

fn exclusive_sees_what_observers_were_told(kind: Kind) {
    let h = Harness::new(kind);
    let s = Arc::clone(&h.storage);
    let u = users(&s);
    let counter = Arc::new(Counter(Mutex::new(0)));
    s.set_commit_observer(counter.clone());
    let writers: Vec<_> = (0..4)
        .map(|th| {
            let s = Arc::clone(&s);
            let u = Arc::clone(&u);
            std::thread::spawn(move || {
                for k in 0..100 {
                    let name = format!("w{th}-{k}");
                    s.write(vec![insert(
                        &u,
                        vec![row(&[Value::Null, t(&name), i(k % 3)])],
                    )])
                    .unwrap();
                }
            })
        })
        .collect();
    for _ in 0..50 {
        s.exclusive(|| {
            let stored = s.scan(u.id).unwrap().len() as i64;
            assert_eq!(stored, *counter.0.lock());
        });
    }
    for w in writers {
        w.join().unwrap();
    }
    assert_eq!(*counter.0.lock(), 400);
}

fn commit_check_sees_the_write_and_fails_its_caller_only(kind: Kind) {
    let h = Harness::new(kind);
    let s = &h.storage;
    let u = users(s);
    // At most two rows: the check reads the state being committed, and
    // gets this caller's deltas.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let check: crate::CommitCheck = {
        let (id, seen) = (u.id, seen.clone());
        Arc::new(move |reads, deltas| {
            seen.lock().push(deltas.len());
            if reads.scan(id)?.len() > 2 {
                return Err(StorageError::NoReferencedRow("too many rows".into()));
            }
            Ok(())
        })
    };
    s.write_checked(
        vec![insert(&u, vec![row(&[i(1), t("a"), i(1)])])],
        Some(check.clone()),
    )
    .unwrap();
    let r = s.write_checked(
        vec![insert(
            &u,
            vec![row(&[i(2), t("b"), i(1)]), row(&[i(3), t("c"), i(1)])],
        )],
        Some(check.clone()),
    );
    assert!(matches!(r, Err(StorageError::NoReferencedRow(m)) if m == "too many rows"));
    assert_eq!(s.scan(u.id).unwrap().len(), 1);
    assert_eq!(*seen.lock(), vec![1, 2]);
    // The failed caller left nothing behind: the next write commits.
    s.write_checked(
        vec![insert(&u, vec![row(&[i(2), t("b"), i(1)])])],
        Some(check),
    )
    .unwrap();
    assert_eq!(s.scan(u.id).unwrap().len(), 2);
}

fn returning_lists_rows_and_its_error_fails_the_op(kind: Kind) {
    let h = Harness::new(kind);
    let s = &h.storage;
    let u = users(s);
    // Lists (id, generated id); fails on a row aged 99.
    let returning: crate::RowReturning = Arc::new(|r, generated| {
        if r[2] == i(99) {
            return Err(StorageError::OutOfRange("age 99".into()));
        }
        Ok(vec![
            r[0].clone(),
            generated.map_or(Value::Null, Value::UInt),
        ])
    });
    let op = |rows| WriteOp::Insert {
        table: u.id,
        schema_version: u.version,
        rows,
        on_conflict: OnConflict::Error,
        auto_value_on_zero: true,
        id_batches: crate::IdBatches::PerRow,
        returning: Some(Arc::clone(&returning)),
    };
    let listed = s
        .write(vec![op(vec![
            row(&[Value::Null, t("a"), i(1)]),
            row(&[i(7), t("b"), i(1)]),
        ])])
        .unwrap()
        .ops
        .remove(0);
    assert_eq!(
        listed.rows,
        vec![vec![i(1), Value::UInt(1)], vec![i(7), Value::Null]]
    );
    // The second row's RETURNING fails: the first row is not written.
    let r = s.write(vec![op(vec![
        row(&[Value::Null, t("c"), i(1)]),
        row(&[Value::Null, t("d"), i(99)]),
    ])]);
    assert!(matches!(r, Err(StorageError::OutOfRange(m)) if m == "age 99"));
    assert_eq!(s.scan(u.id).unwrap().len(), 2);
    // Its values were used up, as a failed INSERT's are.
    let next = s.write(vec![op(vec![row(&[Value::Null, t("e"), i(1)])])]);
    assert_eq!(
        next.unwrap().ops[0].rows,
        vec![vec![i(10), Value::UInt(10)]]
    );
}
