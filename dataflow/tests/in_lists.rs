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
