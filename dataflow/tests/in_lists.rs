//! `col IN (...)` shares the view of `col = ?`: one lookup per distinct
//! element, results concatenated; ORDER BY/LIMIT/DISTINCT apply over the
//! union, aggregates keep the IN list as a filter.

mod common;

use common::*;

#[test]
fn in_lists_of_any_length_share_the_equality_view() {
    let e = env(1 << 30);
    let t = e.table(
        "users",
        &[("id", int()), ("name", text()), ("karma", int())],
    );
    e.insert(
        &t,
        (1..=6)
            .map(|k| r(&[i(k), s(&format!("u{k}")), i(k % 3)]))
            .collect(),
    );
    let eq = "SELECT name FROM users WHERE id = ?";
    assert_eq!(e.q(eq, &[i(2)]), v(&["u2"]));
    assert_eq!(
        e.q("SELECT name FROM users WHERE id IN (?, ?)", &[i(1), i(3)]),
        v(&["u1", "u3"])
    );
    assert_eq!(
        e.q(
            "SELECT name FROM users WHERE id IN (?, ?, ?)",
            &[i(1), i(4), i(9)]
        ),
        v(&["u1", "u4"])
    );
    assert_eq!(
        e.q("SELECT name FROM users WHERE id IN (5, 6, 2, 1)", &[]),
        v(&["u1", "u2", "u5", "u6"])
    );
    // A repeated element returns its rows once (as MySQL does).
    assert_eq!(
        e.q(
            "SELECT name FROM users WHERE id IN (?, ?, 2)",
            &[i(2), i(2)]
        ),
        v(&["u2"])
    );
    assert_eq!(e.df.view_stats().len(), 1, "{:?}", e.df.view_stats());
    // Mutate and requery through the shared view.
    e.update_where(&t, |r| {
        (r[0] == i(3)).then(|| vec![i(3), s("three"), r[2].clone()])
    });
    e.delete_where(&t, |r| r[0] == i(1));
    assert_eq!(
        e.q("SELECT name FROM users WHERE id IN (1, 3, 4)", &[]),
        v(&["three", "u4"])
    );
    // Other parameters keep their slots around the collapsed list.
    assert_eq!(
        e.q(
            "SELECT name FROM users WHERE karma = ? AND id IN (?, ?, ?) AND name <> ?",
            &[i(1), i(4), i(5), i(6), s("u5")]
        ),
        v(&["u4"])
    );
    // ORDER BY + LIMIT apply over the union of the lookups.
    let ordered = "SELECT id FROM users WHERE karma IN (?, ?) ORDER BY id DESC LIMIT 3";
    assert_eq!(e.q(ordered, &[i(0), i(2)]), v(&["6", "5", "3"]));
    assert_eq!(e.q(ordered, &[i(2), i(2)]), v(&["5", "2"]));
    // DISTINCT merges equal rows from different lookups.
    assert_eq!(
        e.q(
            "SELECT DISTINCT karma FROM users WHERE id IN (2, 5, 3)",
            &[]
        ),
        v(&["0", "2"])
    );
    // Aggregates over the IN list stay exact.
    assert_eq!(
        e.q("SELECT COUNT(*) FROM users WHERE id IN (2, 3, 3, 9)", &[]),
        v(&["2"])
    );
    assert_eq!(
        e.q("SELECT COUNT(*) FROM users WHERE id IN (9, 10)", &[]),
        v(&["0"])
    );
    assert_eq!(
        e.q("SELECT SUM(karma) FROM users WHERE id IN (2, 5)", &[]),
        v(&["4"])
    );
    // Case-insensitive text keys: elements equal under the collation are
    // one lookup.
    assert_eq!(
        e.q(
            "SELECT id FROM users WHERE name IN ('U2', 'u2', ?)",
            &[s("THREE")]
        ),
        v(&["2", "3"])
    );
    // NOT IN and IN over an expression stay filters.
    assert_eq!(
        e.q("SELECT id FROM users WHERE id NOT IN (2, 3, 4)", &[]),
        v(&["5", "6"])
    );
    assert_eq!(
        e.q("SELECT id FROM users WHERE id + 0 IN (2, 3)", &[]),
        v(&["2", "3"])
    );
}

/// `user_id = ? AND story_id = ?` on a table indexed by (user_id,
/// story_id): the view is keyed by user_id alone and narrows by story_id,
/// so one fill serves every story of a user, and a page's `story_id IN
/// (...)` reads one key. Answers, writes and misses as with both keyed.
#[test]
fn a_two_column_index_keys_by_its_leading_column() {
    let e = env(1 << 30);
    let mut schema = ladle_common::TableSchema {
        id: 0,
        database: DB.into(),
        name: "votes".into(),
        columns: [
            ("id", int()),
            ("user_id", int()),
            ("story_id", int()),
            ("vote", int()),
        ]
        .iter()
        .map(|(n, t)| ladle_common::ColumnSchema::new(*n, t.clone()))
        .collect(),
        primary_key: Some(vec![0]),
        indexes: vec![],
        version: 0,
    };
    schema.indexes.push(ladle_common::IndexSchema {
        id: 0,
        name: "user_story".into(),
        columns: vec![1, 2],
        unique: false,
    });
    let t = e.storage.create_table(schema, false).unwrap();
    // Users 1..=3 vote on stories; user 2 twice on story 5 (no UNIQUE).
    let mut id = 0;
    let mut vote = |u: i64, st: i64, v: i64| {
        id += 1;
        r(&[i(id), i(u), i(st), i(v)])
    };
    let rows = vec![
        vote(1, 1, 1),
        vote(1, 2, -1),
        vote(1, 7, 1),
        vote(2, 5, 1),
        vote(2, 5, -1),
        vote(3, 1, 1),
    ];
    e.insert(&t, rows);
    let one = "SELECT story_id, vote FROM votes WHERE user_id = ? AND story_id = ?";
    assert_eq!(e.q(one, &[i(1), i(2)]), v(&["2 -1"]));
    assert_eq!(e.q(one, &[i(2), i(5)]), v(&["5 -1", "5 1"]));
    assert!(e.q(one, &[i(3), i(2)]).is_empty());
    // A string and a fraction compared as numbers, as MySQL does.
    assert_eq!(e.q(one, &[i(1), s("7")]), v(&["7 1"]));
    assert!(e
        .q(one, &[i(1), ladle_common::Value::Double(1.5)])
        .is_empty());
    let list = |n: usize| {
        let marks = vec!["?"; n].join(", ");
        format!("SELECT story_id, vote FROM votes WHERE user_id = ? AND story_id IN ({marks}) ORDER BY story_id DESC, vote")
    };
    assert_eq!(
        e.q(&list(4), &[i(1), i(7), i(9), i(1), i(7)]),
        v(&["7 1", "1 1"]),
        "each row once, in the query's order, duplicates and misses in the list"
    );
    assert_eq!(
        e.q(&list(3), &[i(2), ladle_common::Value::Null, i(5), s("5")]),
        v(&["5 -1", "5 1"]),
        "NULL matches nothing; '5' and 5 are one element"
    );
    assert_eq!(
        e.q(
            "SELECT story_id FROM votes WHERE user_id = ? AND story_id IN (?, ?) ORDER BY story_id LIMIT 1",
            &[i(1), i(7), i(2)]
        ),
        v(&["2"])
    );
    // Writes reach the cached keys.
    e.insert(&t, vec![r(&[i(100), i(1), i(9), i(1)])]);
    e.delete_where(&t, |row| row[0] == i(1));
    e.df.settle();
    assert_eq!(
        e.q(&list(4), &[i(1), i(7), i(9), i(1), i(2)]),
        v(&["9 1", "7 1", "2 -1"])
    );
    assert_eq!(e.q(one, &[i(1), i(1)]), v(&[]));

    let stats = e.df.view_stats();
    let keyed: Vec<_> = stats
        .iter()
        .filter(|s| s.query.contains("story_id"))
        .collect();
    assert!(!keyed.is_empty());
    for s in &keyed {
        assert_eq!(s.key_columns, vec!["user_id", "story_id (range)"], "{s:?}");
        // One key per user read, not per (user, story) pair.
        assert!(s.cached_keys <= 3, "{s:?}");
    }
    assert_eq!(
        keyed.len(),
        3,
        "the one-story, list and LIMIT shapes: {stats:?}"
    );
}
