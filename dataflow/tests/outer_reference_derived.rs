//! A scalar subquery reading the outer row from inside its derived table
//! (MySQL 8.0.14's outer references; MariaDB answers 1054, so no
//! sqllogictest file can compare it): `(SELECT x FROM (SELECT a.v AS x
//! FROM a WHERE a.t = t.id UNION SELECT b.v FROM b WHERE b.t = t.id) u
//! ORDER BY x LIMIT 1)` is the UNION's own ORDER BY x LIMIT 1 (a NULL
//! first, as MySQL sorts it). Ladle answered 1054.

mod common;

use common::*;
use ladle_common::Value;

#[test]
fn a_derived_table_reading_the_outer_row_is_its_query_with_the_order_and_limit() {
    let e = env(1 << 30);
    let t = e.table("t", &[("id", int())]);
    let a = e.table("a", &[("id", int()), ("t", int()), ("v", int())]);
    let b = e.table("b", &[("id", int()), ("t", int()), ("v", int())]);
    e.insert(&t, vec![r(&[i(1)]), r(&[i(2)]), r(&[i(3)]), r(&[i(4)])]);
    e.insert(
        &a,
        vec![
            r(&[i(1), i(1), i(5)]),
            r(&[i(2), i(1), i(3)]),
            r(&[i(3), i(2), i(9)]),
        ],
    );
    e.insert(
        &b,
        vec![
            r(&[i(1), i(1), i(4)]),
            r(&[i(2), i(3), i(7)]),
            r(&[i(3), i(2), i(1)]),
        ],
    );
    let first = "SELECT id, (SELECT x FROM (SELECT a.v AS x FROM a WHERE a.t = t.id \
                 UNION SELECT b.v FROM b WHERE b.t = t.id) u ORDER BY x LIMIT 1) FROM t";
    assert_eq!(e.q(first, &[]), v(&["1 3", "2 1", "3 7", "4 NULL"]));
    let last = "SELECT id, (SELECT u.x FROM (SELECT a.v AS x FROM a WHERE a.t = t.id \
                UNION SELECT b.v FROM b WHERE b.t = t.id) AS u ORDER BY u.x DESC LIMIT 1) FROM t";
    assert_eq!(e.q(last, &[]), v(&["1 5", "2 9", "3 7", "4 NULL"]));
    let one_select = "SELECT id, (SELECT x FROM (SELECT a.v AS x FROM a WHERE a.t = t.id) u \
                      ORDER BY x LIMIT 1) FROM t";
    assert_eq!(e.q(one_select, &[]), v(&["1 3", "2 9", "3 NULL", "4 NULL"]));
    // A NULL comes first, as MySQL orders it; writes move the answers.
    e.insert(&b, vec![r(&[i(4), i(3), Value::Null])]);
    assert_eq!(e.q(first, &[]), v(&["1 3", "2 1", "3 NULL", "4 NULL"]));
    e.delete_where(&a, |r| r[0] == i(2));
    e.insert(&a, vec![r(&[i(5), i(4), i(2)])]);
    assert_eq!(e.q(first, &[]), v(&["1 4", "2 1", "3 NULL", "4 2"]));
    assert_eq!(e.q(last, &[]), v(&["1 5", "2 9", "3 7", "4 2"]));
    // Several rows without LIMIT: 1242.
    let all = "SELECT id, (SELECT x FROM (SELECT a.v AS x FROM a WHERE a.t = t.id \
               UNION SELECT b.v FROM b WHERE b.t = t.id) u) FROM t";
    let err = e.prepare(all).execute(&[]).err().unwrap();
    assert!(err.to_string().contains("more than 1 row"), "{err}");
}
