//! A fill's full scans and index lookups decode only the columns the nodes
//! above them read (a grouped count over comments reads `story_id`, not the
//! comment's text).
//! Rows a scan must take out or add (a transaction's own writes, read
//! through its overlay) are narrowed the same way, or a deleted row would
//! still be counted; and the graph's own pulls while a commit propagates,
//! which a join compares with the commit's rows, stay exact.

mod common;

use common::*;
use ladle_common::{Row, RowDelta, TableDeltas, Value};

#[test]
fn a_commit_writing_both_sides_of_a_join_stays_exact() {
    let e = env(1 << 30);
    let s = e.table("s", &[("id", int()), ("title", text())]);
    // No index on `sid`: a partition of the count is filled by a scan.
    let c = e.table("c", &[("id", int()), ("sid", int()), ("body", text())]);
    e.insert(&s, (0..5).map(|n| vec![i(n), s_(n)]).collect());
    e.insert(&c, (0..20).map(|n| vec![i(n), i(n % 5), body(n)]).collect());
    let q = "SELECT s.id, s.title, v.n FROM s LEFT JOIN \
             (SELECT sid, COUNT(*) AS n FROM c GROUP BY sid) AS v ON v.sid = s.id";
    let expected = |stories: i64, per: &dyn Fn(i64) -> i64| -> Vec<String> {
        let mut rows: Vec<String> = (0..stories)
            .map(|n| {
                let count = per(n);
                let count = if count == 0 {
                    "NULL".to_string()
                } else {
                    count.to_string()
                };
                format!("{n} t{n} {count}")
            })
            .collect();
        rows.sort();
        rows
    };
    assert_eq!(e.q(q, &[]), expected(5, &|_| 4));
    // One commit: a new story and its comments. The story's delta pulls
    // the count's partition for it, a scan of `c` that sees the comments
    // this same commit added, which its own deltas then count again unless
    // the scan takes them out first.
    for round in 0..3i64 {
        let id = 5 + round;
        e.storage
            .write(vec![
                insert_op(&s, vec![vec![i(id), s_(id)]]),
                insert_op(
                    &c,
                    (0..3)
                        .map(|k| vec![i(100 + 10 * id + k), i(id), body(k)])
                        .collect(),
                ),
            ])
            .unwrap();
        let stories = id + 1;
        assert_eq!(
            e.q(q, &[]),
            expected(stories, &|n| if n < 5 { 4 } else { 3 }),
            "round {round}"
        );
    }
}

#[test]
fn a_transaction_reads_its_own_deletes_and_inserts_through_a_narrowed_scan() {
    let e = env(1 << 30);
    // No index on `sid`: the count's partitions are filled by scans.
    let c = e.table("c", &[("id", int()), ("sid", int()), ("body", text())]);
    let committed: Vec<Row> = (0..20).map(|n| vec![i(n), i(n % 5), body(n)]).collect();
    e.insert(&c, committed.clone());
    let q = e.prepare("SELECT sid, COUNT(*) FROM c GROUP BY sid");
    // The transaction deleted two of story 1's comments and added one to
    // story 7.
    let overlay = [TableDeltas {
        table: c.id,
        deltas: vec![
            RowDelta::Delete(committed[1].clone()),
            RowDelta::Delete(committed[6].clone()),
            RowDelta::Insert(vec![i(100), i(7), body(100)]),
        ],
    }];
    let rows = q.execute_overlay(&[], &overlay).unwrap();
    assert_eq!(
        render(rows, false),
        v(&["0 4", "1 2", "2 4", "3 4", "4 4", "7 1"])
    );
    // Nothing of it was committed.
    assert_eq!(
        e.q("SELECT sid, COUNT(*) FROM c GROUP BY sid", &[]).len(),
        5
    );
}

#[test]
fn a_transaction_reads_its_own_writes_through_narrowed_lookups() {
    let e = env(1 << 30);
    e.table("c", &[("id", int()), ("sid", int()), ("body", text())]);
    // An index on `sid`: a partition is filled by looking its key up.
    let c = e.index("c", "by_sid", 1);
    let committed: Vec<Row> = (0..200).map(|n| vec![i(n), i(n % 50), body(n)]).collect();
    e.insert(&c, committed.clone());
    // The transaction deleted two of story 1's comments (of 4), changed
    // the text of one of story 2's, and added one to story 7.
    let mut changed = committed[2].clone();
    changed[2] = body(1000);
    let overlay = [TableDeltas {
        table: c.id,
        deltas: vec![
            RowDelta::Delete(committed[1].clone()),
            RowDelta::Delete(committed[51].clone()),
            RowDelta::Delete(committed[2].clone()),
            RowDelta::Insert(changed),
            RowDelta::Insert(vec![i(1000), i(7), body(1000)]),
        ],
    }];
    // One key (a point lookup) and many (one batched lookup).
    let one = e.prepare("SELECT sid, COUNT(*) FROM c WHERE sid = ? GROUP BY sid");
    for (sid, count) in [(1, "2"), (2, "4"), (7, "5")] {
        let rows = one.execute_overlay(&[i(sid)], &overlay).unwrap();
        assert_eq!(render(rows, false), v(&[&format!("{sid} {count}")]));
    }
    let many = e.prepare("SELECT sid, COUNT(*) FROM c WHERE sid IN (?, ?, ?, ?) GROUP BY sid");
    let rows = many
        .execute_overlay(&[i(1), i(2), i(7), i(8)], &overlay)
        .unwrap();
    assert_eq!(render(rows, false), v(&["1 2", "2 4", "7 5", "8 4"]));
    // Nothing of it was committed.
    assert_eq!(e.q("SELECT COUNT(*) FROM c WHERE sid = 1", &[]), v(&["4"]));
}

fn s_(n: i64) -> Value {
    s(&format!("t{n}"))
}

fn body(n: i64) -> Value {
    s(&format!("a comment body that no count reads, number {n}"))
}
