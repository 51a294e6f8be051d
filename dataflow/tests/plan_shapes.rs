//! The shapes of the plans the planner builds, pinned as `EXPLAIN GRAPH`
//! text: one representative query per kind of plan (point lookup, index
//! prefix key, joins, aggregation, DISTINCT, subqueries, set operations, a
//! derived table's ORDER BY ... LIMIT window, ORDER BY ... LIMIT). A change to the planner that changes a plan shows
//! here as a diff; when the new shape is intended, rerun with
//! `UPDATE_EXPECT=1` and review the updated snapshots.

mod common;

use common::*;
use expect_test::{expect, Expect};
use ladle_common::{ColumnSchema, IndexSchema, TableSchema};

/// `users(id, name, city)` and `orders(id, user_id, status, amount)`, the
/// latter with a two-column index on `(user_id, status)`; views are
/// described, not installed, on a fresh engine so node ids are stable.
fn check(sql: &str, expected: Expect) {
    let e = env(1 << 30);
    e.table(
        "users",
        &[("id", int()), ("name", text()), ("city", text())],
    );
    let orders = TableSchema {
        id: 0,
        database: DB.into(),
        name: "orders".into(),
        columns: vec![
            ColumnSchema::new("id", int()),
            ColumnSchema::new("user_id", int()),
            ColumnSchema::new("status", text()),
            ColumnSchema::new("amount", int()),
        ],
        primary_key: Some(vec![0]),
        indexes: vec![IndexSchema {
            id: 0,
            name: "by_user_status".into(),
            columns: vec![1, 2],
            unique: false,
        }],
        version: 0,
    };
    e.storage.create_table(orders, false).unwrap();
    let graph =
        e.df.explain_graph(DB, &parse(sql))
            .unwrap_or_else(|err| panic!("explain {sql}: {err}"));
    expected.assert_eq(&graph);
}

#[test]
fn point_lookup() {
    check(
        "SELECT name, city FROM users WHERE id = ?",
        expect![[r#"
        view not installed (EXPLAIN GRAPH does not install it) keyed by ["id"]
        n0: Base users (table 1)
        n1: Project [#1, #2, #0] <- n0
        n2: Reader keyed by [2], ordered by [] <- n1
    "#]],
    );
}

#[test]
fn two_column_index_prefix_key() {
    check(
        "SELECT id, amount FROM orders WHERE user_id = ? AND status = ?",
        expect![[r#"
            view not installed (EXPLAIN GRAPH does not install it) keyed by ["user_id"], range status >= ?1 AND <= ?1 read from each key's rows ordered by status
            n0: Base orders (table 2)
            n1: Project [#0, #3, #1, #2] <- n0
            n2: Reader keyed by [2], ordered by [(3, false)] <- n1
        "#]],
    );
}

#[test]
fn join() {
    check(
        "SELECT u.name, o.amount FROM users u JOIN orders o ON o.user_id = u.id WHERE u.id = ?",
        expect![[r#"
            view not installed (EXPLAIN GRAPH does not install it) keyed by ["id"]
            n0: Base users (table 1)
            n1: Base orders (table 2)
            n2: Join Inner on left[0] = right[1] <- n0, n1
            n3: Project [#1, #6, #0] <- n2
            n4: Reader keyed by [2], ordered by [] <- n3
        "#]],
    );
}

#[test]
fn left_join() {
    check(
        "SELECT u.name, o.amount FROM users u LEFT JOIN orders o ON o.user_id = u.id AND o.status = 'open'",
        expect![[r#"
            view not installed (EXPLAIN GRAPH does not install it) keyed by []
            n0: Base users (table 1)
            n1: Base orders (table 2)
            n2: Filter (#2 Eq 'open') <- n1
            n3: Join Left on left[0] = right[1] <- n0, n2
            n4: Project [#1, #6] <- n3
            n5: Reader keyed by [], ordered by [] <- n4
        "#]],
    );
}

#[test]
fn group_by() {
    check(
        "SELECT user_id, COUNT(*), SUM(amount) FROM orders GROUP BY user_id HAVING COUNT(*) > 1",
        expect![[r#"
            view not installed (EXPLAIN GRAPH does not install it) keyed by []
            n0: Base orders (table 2)
            n1: Project [#1, 1, #3] <- n0
            n2: Aggregate group by 1 columns [CountStar(#1), Sum(#2)], state keyed by [] <- n1
            n3: Filter (#1 Gt 1) <- n2
            n4: Project [#0, #1, #2] <- n3
            n5: Reader keyed by [], ordered by [] <- n4
        "#]],
    );
}

#[test]
fn distinct() {
    check(
        "SELECT DISTINCT city FROM users",
        expect![[r#"
        view not installed (EXPLAIN GRAPH does not install it) keyed by []
        n0: Base users (table 1)
        n1: Project [#2] <- n0
        n2: Distinct over 1 columns, state keyed by [] <- n1
        n3: Reader keyed by [], ordered by [] <- n2
    "#]],
    );
}

#[test]
fn in_subquery() {
    check(
        "SELECT name FROM users WHERE id IN (SELECT user_id FROM orders WHERE status = ?)",
        expect![[r#"
            view not installed (EXPLAIN GRAPH does not install it) keyed by ["__c1"]
            n0: Base users (table 1)
            n1: Base orders (table 2)
            n2: Project [#1, #2] <- n1
            n3: Distinct over 2 columns, state keyed by [] <- n2
            n4: Join Inner on left[0] = right[0] <- n0, n3
            n5: Project [#1, #4] <- n4
            n6: Reader keyed by [1], ordered by [] <- n5
        "#]],
    );
}

#[test]
fn correlated_exists() {
    check(
        "SELECT name FROM users u WHERE EXISTS (SELECT 1 FROM orders o WHERE o.user_id = u.id AND o.amount > 10)",
        expect![[r#"
            view not installed (EXPLAIN GRAPH does not install it) keyed by []
            n0: Base users (table 1)
            n1: Base orders (table 2)
            n2: Filter (#3 Gt 10) <- n1
            n3: Join Semi on left[0] = right[1] <- n0, n2
            n4: Project [#1] <- n3
            n5: Reader keyed by [], ordered by [] <- n4
        "#]],
    );
}

#[test]
fn scalar_subquery() {
    check(
        "SELECT name, (SELECT COUNT(*) FROM orders o WHERE o.user_id = u.id) AS n FROM users u",
        expect![[r#"
            view not installed (EXPLAIN GRAPH does not install it) keyed by []
            n0: Base users (table 1)
            n1: Base orders (table 2)
            n2: Project [#1, 1] <- n1
            n3: Aggregate group by 1 columns [CountStar(#1)], state keyed by [0] <- n2
            n4: Join Left on left[0] = right[0] <- n0, n3
            n5: Project [#1, Coalesce(#4, 0)] <- n4
            n6: Reader keyed by [], ordered by [] <- n5
        "#]],
    );
}

#[test]
fn union() {
    check(
        "SELECT name FROM users WHERE city = 'Oslo' UNION SELECT status FROM orders",
        expect![[r#"
            view not installed (EXPLAIN GRAPH does not install it) keyed by []
            n0: Base users (table 1)
            n1: Filter (#2 Eq 'Oslo') <- n0
            n2: Project [#1] <- n1
            n3: Base orders (table 2)
            n4: Project [#2] <- n3
            n5: Union ALL of 2 <- n2, n4
            n6: Distinct over 1 columns, state keyed by [] <- n5
            n7: Reader keyed by [], ordered by [] <- n6
        "#]],
    );
}

#[test]
fn window_of_a_derived_table() {
    check(
        "SELECT d.id FROM (SELECT id, amount FROM orders ORDER BY amount DESC LIMIT 5) AS d WHERE d.amount > ?",
        expect![[r#"
            view not installed (EXPLAIN GRAPH does not install it) keyed by []
            n0: Base orders (table 2)
            n1: Project [#0, #3] <- n0
            n2: Reader keyed by [], ordered by [(1, true)] <- n1
        "#]],
    );
}

#[test]
fn order_by_limit() {
    check(
        "SELECT id, amount FROM orders WHERE user_id = ? ORDER BY amount DESC LIMIT 3",
        expect![[r#"
            view not installed (EXPLAIN GRAPH does not install it) keyed by ["user_id"]
            n0: Base orders (table 2)
            n1: Project [#0, #3, #1] <- n0
            n2: Reader keyed by [2], ordered by [(1, true)] <- n1
        "#]],
    );
}

#[test]
fn not_in_subquery() {
    check(
        "SELECT name FROM users WHERE id NOT IN (SELECT user_id FROM orders)",
        expect![[r#"
            view not installed (EXPLAIN GRAPH does not install it) keyed by []
            n0: Base users (table 1)
            n1: Base orders (table 2)
            n2: Project [#1] <- n1
            n3: Join Anti on left[0] = right[0] <- n0, n2
            n4: Project [#0] <- n2
            n5: Aggregate group by 0 columns [CountStar(#0), Count(#0)], state keyed by [] <- n4
            n6: Join Left on left[] = right[] <- n3, n5
            n7: Filter ((#3 Eq 0) Or ((#0 IS NOT NULL) And (#4 Eq #3))) <- n6
            n8: Project [#0, #1, #2] <- n7
            n9: Project [#1] <- n8
            n10: Reader keyed by [], ordered by [] <- n9
        "#]],
    );
}

#[test]
fn except() {
    check(
        "SELECT id FROM users EXCEPT SELECT user_id FROM orders",
        expect![[r#"
            view not installed (EXPLAIN GRAPH does not install it) keyed by []
            n0: Base users (table 1)
            n1: Project [#0] <- n0
            n2: Project [#0, 1] <- n1
            n3: Base orders (table 2)
            n4: Project [#1] <- n3
            n5: Project [#0, 2] <- n4
            n6: Union ALL of 2 <- n2, n5
            n7: Aggregate group by 1 columns [Min(#1), Max(#1)], state keyed by [] <- n6
            n8: Filter (#2 Eq 1) <- n7
            n9: Project [#0] <- n8
            n10: Reader keyed by [], ordered by [] <- n9
        "#]],
    );
}

#[test]
fn group_by_under_a_parameter_filter() {
    check(
        "SELECT user_id, COUNT(*) FROM orders WHERE amount > ? GROUP BY user_id",
        expect![[r#"
            view not installed (EXPLAIN GRAPH does not install it) keyed by [], range amount > ?0 read from each key's rows ordered by amount
            n0: Base orders (table 2)
            n1: Project [#1, 1, #3] <- n0
            n2: Reader keyed by [], ordered by [(2, false)] <- n1
        "#]],
    );
}

#[test]
fn order_by_limit_below_a_left_join_to_an_aggregate() {
    check(
        "SELECT u.id, u.name, COALESCE(o.total, 0) FROM users u LEFT JOIN (SELECT user_id, SUM(amount) AS total FROM orders GROUP BY user_id) o ON o.user_id = u.id WHERE u.city = 'x' ORDER BY u.id DESC LIMIT 10",
        expect![[r#"
            view not installed (EXPLAIN GRAPH does not install it) keyed by ["city"]
            n0: Base users (table 1)
            n1: Window partition by [2] order by [#0 DESC] rows 0..64, state keyed by [2] <- n0
            n2: Base orders (table 2)
            n3: Project [#1, #3] <- n2
            n4: Aggregate group by 1 columns [Sum(#1)], state keyed by [0] <- n3
            n5: Project [#0, #1] <- n4
            n6: Join Left on left[0] = right[0] <- n1, n5
            n7: Project [#0, #1, CAST(Coalesce(#4, 0) AS Decimal { precision: 32, scale: 0 }), #2] <- n6
            n8: Reader keyed by [3], ordered by [(0, true)] <- n7
        "#]],
    );
}

#[test]
fn where_that_cannot_overflow_keeps_no_mark() {
    // Lobsters' front page: a LEFT JOIN of an aggregate, WHERE on its
    // COALESCE; and its original variant's counters, INT - INT, which
    // fits BIGINT. No row is ever marked, so the stored rows have no
    // column carrying a mark.
    check(
        "SELECT u.id, u.name, COALESCE(o.total, 0) FROM users u LEFT JOIN (SELECT user_id, SUM(amount) AS total FROM orders GROUP BY user_id) o ON o.user_id = u.id WHERE u.city = ? AND COALESCE(o.total, 0) >= 0 ORDER BY u.id DESC LIMIT 10",
        expect![[r#"
            view not installed (EXPLAIN GRAPH does not install it) keyed by ["city"]
            n0: Base users (table 1)
            n1: Base orders (table 2)
            n2: Project [#1, #3] <- n1
            n3: Aggregate group by 1 columns [Sum(#1)], state keyed by [0] <- n2
            n4: Project [#0, #1] <- n3
            n5: Join Left on left[0] = right[0] <- n0, n4
            n6: Filter (CAST(Coalesce(#4, 0) AS Decimal { precision: 32, scale: 0 }) Ge 0) <- n5
            n7: Project [#0, #1, CAST(Coalesce(#4, 0) AS Decimal { precision: 32, scale: 0 }), #2] <- n6
            n8: Reader keyed by [3], ordered by [(0, true)] <- n7
        "#]],
    );
    check(
        "SELECT id FROM orders WHERE user_id = ? AND amount - id >= 0 ORDER BY id DESC LIMIT 10",
        expect![[r#"
            view not installed (EXPLAIN GRAPH does not install it) keyed by ["user_id"]
            n0: Base orders (table 2)
            n1: Filter ((#3 Sub #0) Ge 0) <- n0
            n2: Project [#0, #1] <- n1
            n3: Reader keyed by [1], ordered by [(0, true)] <- n2
        "#]],
    );
}

#[test]
fn where_that_may_overflow_keeps_a_mark_column() {
    // INT * INT * INT may pass BIGINT's range: the stored rows end with a
    // column (NULL) that carries a marked row's mark.
    check(
        "SELECT id FROM orders WHERE user_id = ? AND amount * amount * id >= 0",
        expect![[r#"
            view not installed (EXPLAIN GRAPH does not install it) keyed by ["user_id"]
            n0: Base orders (table 2)
            n1: Filter (((#3 Mul #3) Mul #0) Ge 0) <- n0
            n2: Project [#0, #1, NULL] <- n1
            n3: Reader keyed by [1], ordered by [] <- n2
        "#]],
    );
}
