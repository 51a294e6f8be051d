//! Plain reads return rows shared with the view's reader (`rows.rs`)
//! instead of copies: a returned result must never change afterwards, and
//! projection and paging must give what copying gave.

mod common;

use common::*;
use ladle_common::{Lsn, Row};

/// The rows of `t` (id, k, name) with `k = 1`, as the view shows them:
/// (name, id) by id.
fn expected(rows: &[(i64, i64)], offset: usize, limit: usize) -> Vec<Row> {
    let mut want: Vec<(i64, i64)> = rows.iter().copied().filter(|r| r.1 == 1).collect();
    want.sort();
    want.iter()
        .skip(offset)
        .take(limit)
        .map(|&(id, _)| r(&[s(&format!("n{id}")), i(id)]))
        .collect()
}

#[test]
fn a_returned_result_does_not_change_with_later_writes() {
    let e = env(1 << 30);
    let t = e.table("t", &[("id", int()), ("k", int()), ("name", text())]);
    let data: Vec<(i64, i64)> = (0..300).map(|n| (n, n % 3)).collect();
    e.insert(
        &t,
        data.iter()
            .map(|&(id, k)| r(&[i(id), i(k), s(&format!("n{id}"))]))
            .collect(),
    );
    let q = e.prepare("SELECT name, id FROM t WHERE k = ? ORDER BY id");
    let before = q.read_after(&[i(1)], Lsn::MAX).unwrap();
    assert_eq!(before.len(), 100);
    let copy = before.clone().into_vec();
    assert_eq!(copy, expected(&data, 0, usize::MAX));

    // Writes to the very key the result came from.
    e.insert(&t, vec![r(&[i(1000), i(1), s("n1000")])]);
    e.delete_where(&t, |row| row[0] == i(1) || row[0] == i(4));
    e.update_where(&t, |row| {
        (row[0] == i(7)).then(|| r(&[i(7), i(1), s("renamed")]))
    });
    let now = q.execute(&[i(1)]).unwrap();
    assert_eq!(now.len(), 99);
    assert!(now.contains(&r(&[s("renamed"), i(7)])));

    assert_eq!(before.len(), 100);
    assert_eq!(
        before.iter().map(|row| row.to_row()).collect::<Vec<_>>(),
        copy
    );
    assert_eq!(before.into_vec(), copy);
}

#[test]
fn shared_pages_and_projections_match_a_recompute() {
    let e = env(1 << 30);
    let t = e.table("t", &[("id", int()), ("k", int()), ("name", text())]);
    let data: Vec<(i64, i64)> = (0..250).map(|n| ((n * 7919) % 1000, n % 3)).collect();
    e.insert(
        &t,
        data.iter()
            .map(|&(id, k)| r(&[i(id), i(k), s(&format!("n{id}"))]))
            .collect(),
    );
    for (limit, offset) in [(10, 0), (10, 75), (50, 60), (0, 0), (5, 500)] {
        let page = e.prepare(&format!(
            "SELECT name, id FROM t WHERE k = ? ORDER BY id LIMIT {limit} OFFSET {offset}"
        ));
        let got = page.read_after(&[i(1)], Lsn::MAX).unwrap();
        let want = expected(&data, offset, limit);
        assert_eq!(got.len(), want.len(), "LIMIT {limit} OFFSET {offset}");
        assert_eq!(got.into_vec(), want, "LIMIT {limit} OFFSET {offset}");
    }
    // A computed output is evaluated per row (not shared) and agrees.
    let computed = e.prepare("SELECT name, id + 0 FROM t WHERE k = ? ORDER BY id");
    assert_eq!(
        computed.execute(&[i(1)]).unwrap(),
        expected(&data, 0, usize::MAX)
    );
}
