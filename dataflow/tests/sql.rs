//! Mutate-and-requery tests: every supported SQL shape is prepared, the
//! base tables are changed through `Storage::write`, and the view re-read.

mod common;

use common::*;
use ladle_common::Value;
use ladle_dataflow::DataflowError;

#[test]
fn point_lookup_with_params_and_literals_share_a_view() {
    let e = env(1 << 30);
    let t = e.table(
        "users",
        &[("id", int()), ("name", text()), ("karma", int())],
    );
    e.insert(
        &t,
        vec![r(&[i(1), s("alice"), i(10)]), r(&[i(2), s("bob"), i(5)])],
    );
    assert_eq!(
        e.q("SELECT name FROM users WHERE id = ?", &[i(1)]),
        v(&["alice"])
    );
    assert_eq!(e.q("SELECT name FROM users WHERE id = 2", &[]), v(&["bob"]));
    assert!(e
        .q("SELECT name FROM users WHERE id = ?", &[Value::Double(1.5)])
        .is_empty());
    assert_eq!(
        e.q("SELECT name FROM users WHERE id = ?", &[s("2")]),
        v(&["bob"])
    );
    assert_eq!(e.df.view_stats().len(), 1);
    e.update_where(&t, |r| {
        (r[0] == i(1)).then(|| vec![r[0].clone(), s("alicia"), r[2].clone()])
    });
    assert_eq!(
        e.q("SELECT name FROM users WHERE id = 1", &[]),
        v(&["alicia"])
    );
    e.delete_where(&t, |r| r[0] == i(1));
    assert!(e
        .q("SELECT name FROM users WHERE id = ?", &[i(1)])
        .is_empty());
    // Case-insensitive key on a text column.
    assert_eq!(
        e.q("SELECT id FROM users WHERE name = 'BOB'", &[]),
        v(&["2"])
    );
    assert_eq!(
        e.q("SELECT id FROM users WHERE name IN ('BOB', 'nobody')", &[]),
        v(&["2"])
    );
}

#[test]
fn filters_order_limit_and_ranges() {
    let e = env(1 << 30);
    let t = e.table("s", &[("id", int()), ("grp", int()), ("score", int())]);
    e.insert(
        &t,
        (1..=10).map(|k| r(&[i(k), i(k % 2), i(k * 10)])).collect(),
    );
    let top = "SELECT id FROM s WHERE grp = ? ORDER BY score DESC LIMIT 2";
    assert_eq!(e.q(top, &[i(0)]), v(&["10", "8"]));
    // A row leaving the top-k is refilled from the full result.
    e.delete_where(&t, |r| r[0] == i(10));
    assert_eq!(e.q(top, &[i(0)]), v(&["8", "6"]));
    // An update moving a row into the top-k (and across groups).
    e.update_where(&t, |r| (r[0] == i(3)).then(|| vec![i(3), i(0), i(1000)]));
    assert_eq!(e.q(top, &[i(0)]), v(&["3", "8"]));
    assert_eq!(
        e.q(
            "SELECT id FROM s WHERE score > ? AND score < 50 ORDER BY id",
            &[i(15)]
        ),
        v(&["2", "4"])
    );
    assert_eq!(
        e.q(
            "SELECT id FROM s WHERE score BETWEEN ? AND ? ORDER BY id",
            &[i(60), i(80)]
        ),
        v(&["6", "7", "8"])
    );
    assert_eq!(
        e.q(
            "SELECT id FROM s WHERE grp = 1 AND score >= 50 ORDER BY id LIMIT ? OFFSET 1",
            &[i(2)]
        ),
        v(&["7", "9"])
    );
    assert_eq!(
        e.q("SELECT id, score * 2 AS d FROM s WHERE id = 2", &[]),
        v(&["2 40"])
    );
}

#[test]
fn aggregates_group_by_having() {
    let e = env(1 << 30);
    let t = e.table("v", &[("id", int()), ("article", int()), ("user", int())]);
    e.insert(
        &t,
        vec![
            r(&[i(1), i(1), i(7)]),
            r(&[i(2), i(1), i(8)]),
            r(&[i(3), i(2), i(7)]),
        ],
    );
    let q = "SELECT article, COUNT(*), COUNT(DISTINCT user), SUM(user), MIN(user), MAX(user) FROM v GROUP BY article";
    assert_eq!(e.q(q, &[]), v(&["1 2 2 15 7 8", "2 1 1 7 7 7"]));
    e.delete_where(&t, |r| r[0] == i(2));
    assert_eq!(e.q(q, &[]), v(&["1 1 1 7 7 7", "2 1 1 7 7 7"]));
    e.delete_where(&t, |r| r[0] == i(3));
    assert_eq!(e.q(q, &[]), v(&["1 1 1 7 7 7"]));
    // No GROUP BY: exactly one row, even over nothing.
    assert_eq!(
        e.q(
            "SELECT COUNT(*), SUM(user) FROM v WHERE article = ?",
            &[i(99)]
        ),
        v(&["0 NULL"])
    );
    assert_eq!(
        e.q("SELECT COUNT(*), SUM(user) FROM v WHERE article = 1", &[]),
        v(&["1 7"])
    );
    assert_eq!(
        e.q("SELECT COUNT(*), AVG(user) FROM v", &[]),
        v(&["1 7.0000"])
    );
    e.delete_where(&t, |_| true);
    assert_eq!(
        e.q("SELECT COUNT(*), AVG(user) FROM v", &[]),
        v(&["0 NULL"])
    );
    e.insert(
        &t,
        vec![
            r(&[i(4), i(5), i(1)]),
            r(&[i(5), i(5), i(2)]),
            r(&[i(6), i(6), i(3)]),
        ],
    );
    assert_eq!(
        e.q(
            "SELECT article, COUNT(*) AS c FROM v GROUP BY article HAVING c > 1",
            &[]
        ),
        v(&["5 2"])
    );
    assert_eq!(e.q("SELECT article, GROUP_CONCAT(user ORDER BY user SEPARATOR '|') FROM v GROUP BY article", &[]), v(&["5 1|2", "6 3"]));
    assert_eq!(
        e.q("SELECT DISTINCT article FROM v ORDER BY article DESC", &[]),
        v(&["6", "5"])
    );
    // IN lists with aggregation filter (they are not several lookups).
    assert_eq!(
        e.q("SELECT COUNT(*) FROM v WHERE article IN (5, 6)", &[]),
        v(&["3"])
    );
    // ... and IN (?, ?) lists are read per element, then aggregated.
    assert_eq!(
        e.q(
            "SELECT COUNT(*) FROM v WHERE article IN (?, ?)",
            &[i(5), i(6)]
        ),
        v(&["3"])
    );
    // Aliases after a qualified wildcard.
    assert_eq!(
        e.q("SELECT v.*, user AS u FROM v WHERE id = 4 ORDER BY u", &[]),
        v(&["4 5 1 1"])
    );
}

#[test]
fn joins_inner_left_comma() {
    let e = env(1 << 30);
    let a = e.table("Article", &[("id", int()), ("title", text())]);
    let vt = e.table(
        "Vote",
        &[("id", int()), ("article_id", int()), ("user", int())],
    );
    e.insert(&a, vec![r(&[i(1), s("one")]), r(&[i(2), s("two")])]);
    e.insert(&vt, vec![r(&[i(1), i(1), i(10)]), r(&[i(2), i(1), i(11)])]);
    let vote = "SELECT Article.id, title, VoteCount.votes FROM Article LEFT JOIN (SELECT article_id, COUNT(user) AS votes FROM Vote GROUP BY article_id) AS VoteCount ON Article.id = VoteCount.article_id WHERE Article.id = ?";
    assert_eq!(e.q(vote, &[i(1)]), v(&["1 one 2"]));
    assert_eq!(e.q(vote, &[i(2)]), v(&["2 two NULL"]));
    e.insert(&vt, vec![r(&[i(3), i(2), i(10)])]);
    assert_eq!(e.q(vote, &[i(2)]), v(&["2 two 1"]));
    e.delete_where(&vt, |r| r[1] == i(1));
    assert_eq!(e.q(vote, &[i(1)]), v(&["1 one NULL"]));
    e.update_where(&a, |r| (r[0] == i(2)).then(|| vec![i(2), s("TWO")]));
    assert_eq!(e.q(vote, &[i(2)]), v(&["2 TWO 1"]));
    let inner = "SELECT title, user FROM Article JOIN Vote ON Vote.article_id = Article.id";
    assert_eq!(e.q(inner, &[]), v(&["TWO 10"]));
    let comma =
        "SELECT title, user FROM Article, Vote WHERE Vote.article_id = Article.id AND user = ?";
    assert_eq!(e.q(comma, &[i(10)]), v(&["TWO 10"]));
    e.insert(&vt, vec![r(&[i(4), i(1), i(10)])]);
    assert_eq!(e.q(comma, &[i(10)]), v(&["TWO 10", "one 10"]));
    assert_eq!(
        e.q(
            "SELECT id FROM Article WHERE id IN (SELECT article_id FROM Vote WHERE user = 10)",
            &[]
        ),
        v(&["1", "2"])
    );
    let sub = "SELECT title, (SELECT COUNT(*) FROM Vote WHERE Vote.article_id = Article.id) AS n, (SELECT MAX(user) FROM Vote v WHERE v.article_id = Article.id AND user > 10) FROM Article WHERE id = ?";
    assert_eq!(e.q(sub, &[i(1)]), v(&["one 1 NULL"]));
    e.insert(&vt, vec![r(&[i(9), i(1), i(12)])]);
    assert_eq!(e.q(sub, &[i(1)]), v(&["one 2 12"]));
    assert_eq!(
        e.prepare(sub).columns()[2].name,
        "(SELECT MAX(user) FROM Vote AS v WHERE v.article_id = Article.id AND user > 10)"
    );
    e.delete_where(&vt, |r| r[0] == i(9));
    assert_eq!(
        e.q("SELECT id FROM Article WHERE NOT EXISTS (SELECT 1 FROM Vote WHERE Vote.article_id = Article.id AND user = 11)", &[]),
        v(&["1", "2"])
    );
}

#[test]
fn unions_views_constants_and_errors() {
    let e = env(1 << 30);
    let t = e.table("t", &[("id", int()), ("x", int())]);
    e.insert(
        &t,
        vec![r(&[i(1), i(5)]), r(&[i(2), i(5)]), r(&[i(3), i(6)])],
    );
    assert_eq!(
        e.q(
            "SELECT x FROM t WHERE id = 1 UNION SELECT x FROM t WHERE id = 2",
            &[]
        ),
        v(&["5"])
    );
    assert_eq!(
        e.q(
            "SELECT x FROM t WHERE id = 1 UNION ALL SELECT x FROM t WHERE id = 2",
            &[]
        ),
        v(&["5", "5"])
    );
    // An uncorrelated scalar subquery over the same table.
    let above = "SELECT id FROM t WHERE x > (SELECT AVG(x) FROM t)";
    assert_eq!(e.q(above, &[]), v(&["3"]));
    e.insert(&t, vec![r(&[i(7), i(1)])]);
    assert_eq!(e.q(above, &[]), v(&["1", "2", "3"]));
    e.delete_where(&t, |r| r[0] == i(7));
    assert_eq!(e.q(above, &[]), v(&["3"]));
    // Mixed UNION / UNION ALL nest left to right.
    assert_eq!(
        e.q("SELECT x FROM t WHERE id = 1 UNION SELECT x FROM t WHERE id = 2 UNION ALL SELECT x FROM t WHERE id = 2", &[]),
        v(&["5", "5"])
    );
    assert_eq!(
        e.q("SELECT x FROM t WHERE id = 1 UNION ALL SELECT 4", &[]),
        v(&["4", "5"])
    );
    assert_eq!(e.q("SELECT 'ok' FROM DUAL", &[]), v(&["ok"]));
    e.df.create_view(DB, "big", &parse("SELECT id, x FROM t WHERE x > 5"), false)
        .unwrap();
    assert_eq!(e.df.named_views(DB), vec!["big".to_string()]);
    assert_eq!(e.q("SELECT id FROM big", &[]), v(&["3"]));
    e.insert(&t, vec![r(&[i(4), i(9)])]);
    assert_eq!(e.q("SELECT id FROM big", &[]), v(&["3", "4"]));
    assert_eq!(
        e.q(
            "SELECT d.id FROM (SELECT id, x FROM t WHERE x = 5) AS d",
            &[]
        ),
        v(&["1", "2"])
    );
    assert_eq!(e.q("SELECT 1 + 1, 'a' = 'A'", &[]), v(&["2 1"]));
    assert_eq!(e.q("SELECT ? + 1", &[i(4)]), v(&["5"]));
    let now = e.q("SELECT NOW(), id FROM t WHERE id = 1", &[]);
    assert!(now[0].starts_with("20"));
    // NOW() in WHERE is evaluated at read time; with GROUP BY it cannot be.
    assert_eq!(
        e.q("SELECT id FROM t WHERE x < UNIX_TIMESTAMP() AND x > 5", &[]),
        v(&["3", "4"])
    );
    // Under aggregation, the clock is read at read time too.
    assert_eq!(
        e.q("SELECT COUNT(*) FROM t WHERE x < UNIX_TIMESTAMP()", &[]),
        e.q("SELECT COUNT(*) FROM t", &[])
    );
    let err =
        e.df.prepare(DB, &parse("SELECT id FROM t ORDER BY RAND()"))
            .err()
            .unwrap();
    assert!(matches!(err, DataflowError::Unsupported(_)), "{err}");
    // A comma join without a linking condition is a cross join.
    assert_eq!(
        e.q("SELECT COUNT(*) FROM t a, t b", &[]),
        e.q("SELECT COUNT(*) * COUNT(*) FROM t", &[])
    );
    assert!(matches!(
        e.df.prepare(DB, &parse("SELECT nope FROM t"))
            .err()
            .unwrap(),
        DataflowError::UnknownColumn(..)
    ));
    assert!(matches!(
        e.df.prepare(DB, &parse("SELECT 1 FROM nope"))
            .err()
            .unwrap(),
        DataflowError::UnknownTable(..)
    ));
    let p = e.prepare("SELECT x FROM t WHERE id = ?");
    assert!(matches!(
        p.execute(&[]).err().unwrap(),
        DataflowError::ParamCount { .. }
    ));
    assert_eq!(p.param_count(), 1);
    assert_eq!(p.columns()[0].name, "x");
    let c = e.prepare("SELECT COUNT(*) FROM t").columns()[0].clone();
    assert_eq!(c.name, "COUNT(*)");
    // A BIGINT 21 characters wide, as MySQL's metadata describes COUNT.
    assert_eq!(
        c.ty,
        ladle_common::SqlType::Int {
            bytes: 8,
            unsigned: false,
            display_width: Some(21),
        }
    );
    assert!(e
        .df
        .explain_graph(DB, &parse("SELECT x FROM t WHERE id = ?"))
        .unwrap()
        .contains("Reader"));
    let _ = Value::Null;
    // View definitions persist in the catalog: a new engine sees them.
    let df2 = ladle_dataflow::Dataflow::new(
        e.storage.clone(),
        ladle_dataflow::DataflowConfig {
            memory_limit: 1 << 20,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(df2.named_views(DB), vec!["big".to_string()]);
}

#[test]
fn self_join_is_exact() {
    let e = env(1 << 30);
    let t = e.table("p", &[("id", int()), ("parent", int())]);
    e.insert(&t, vec![r(&[i(1), i(0)]), r(&[i(2), i(1)])]);
    let q = "SELECT c.id, p.id FROM p AS c JOIN p AS p ON c.parent = p.id";
    assert_eq!(e.q(q, &[]), v(&["2 1"]));
    // One batch touching both sides of the self-join.
    e.insert(&t, vec![r(&[i(3), i(3)])]);
    assert_eq!(e.q(q, &[]), v(&["2 1", "3 3"]));
    e.update_where(&t, |r| (r[0] == i(3)).then(|| vec![i(3), i(2)]));
    assert_eq!(e.q(q, &[]), v(&["2 1", "3 2"]));
    e.delete_where(&t, |r| r[0] == i(1));
    assert_eq!(e.q(q, &[]), v(&["3 2"]));
}

#[test]
fn explain_renders_graph_and_shares_subgraphs() {
    let e = env(1 << 30);
    let t = e.table("v", &[("id", int()), ("article", int()), ("user", int())]);
    e.insert(&t, vec![r(&[i(1), i(1), i(7)])]);
    let q1 = "SELECT article, COUNT(*) AS n FROM v GROUP BY article";
    let g1 = e.df.explain_graph(DB, &parse(q1)).unwrap();
    let expected = "\
n0: Base v (table ID)
n1: Project [#1, 1] <- n0
n2: Aggregate group by 1 columns [CountStar(#1)], state keyed by [] <- n1
n3: Project [#0, #1] <- n2
n4: Reader keyed by [], ordered by [] <- n3
";
    let id = t.id.to_string();
    let body: String = g1.lines().skip(1).map(|l| format!("{l}\n")).collect();
    assert_eq!(body, expected.replace("ID", &id), "{g1}");
    // A second query over the same aggregate reuses n0..n2.
    let q2 = "SELECT article FROM (SELECT article, COUNT(*) AS n FROM v GROUP BY article) AS c WHERE n > 0";
    let g2 = e.df.explain_graph(DB, &parse(q2)).unwrap();
    assert!(g2.contains("n2: Aggregate"), "{g2}");
    assert!(
        !g2.contains("n5: Aggregate") && !g2.contains("n6: Aggregate"),
        "{g2}"
    );
    assert_eq!(e.q(q2, &[]), vec!["1".to_string()]);
}

#[test]
fn limit_literals_share_a_view_and_comma_form_is_exact() {
    let e = env(1 << 30);
    let t = e.table("s", &[("id", int()), ("score", int())]);
    e.insert(&t, (1..=9).map(|k| r(&[i(k), i(100 - k)])).collect());
    // MySQL `LIMIT offset, count`.
    assert_eq!(
        e.q("SELECT id FROM s ORDER BY id LIMIT 2, 3", &[]),
        v(&["3", "4", "5"])
    );
    assert_eq!(
        e.q("SELECT id FROM s ORDER BY id LIMIT 3 OFFSET 2", &[]),
        v(&["3", "4", "5"])
    );
    assert_eq!(
        e.q("SELECT id FROM s ORDER BY id LIMIT 6, 10", &[]),
        v(&["7", "8", "9"])
    );
    // Every page and page size reads the same view.
    assert_eq!(e.q("SELECT id FROM s ORDER BY id LIMIT 1", &[]), v(&["1"]));
    assert_eq!(e.df.view_stats().len(), 1);
    // One parameter: its position is unambiguous.
    assert_eq!(
        e.q("SELECT id FROM s ORDER BY id LIMIT 1, ?", &[i(2)]),
        v(&["2", "3"])
    );
    assert_eq!(
        e.q("SELECT id FROM s ORDER BY id LIMIT ?, 2", &[i(4)]),
        v(&["5", "6"])
    );
    assert_eq!(
        e.q("SELECT id FROM s ORDER BY id LIMIT ? OFFSET 7", &[i(5)]),
        v(&["8", "9"])
    );
    // `LIMIT ?, ?` and `LIMIT ? OFFSET ?` parse alike, so the order of the
    // values is unknown here: refused (the shim substitutes them instead).
    for sql in [
        "SELECT id FROM s ORDER BY id LIMIT ?, ?",
        "SELECT id FROM s ORDER BY id LIMIT ? OFFSET ?",
    ] {
        let err = e.df.prepare(DB, &parse(sql)).err().unwrap();
        assert!(matches!(err, DataflowError::Unsupported(_)), "{err}");
    }
    // Non-integer LIMIT literals keep their error.
    assert!(e
        .df
        .prepare(DB, &parse("SELECT id FROM s LIMIT 1.5"))
        .is_err());
}

#[test]
fn range_literals_share_the_view_of_their_prepared_form() {
    let e = env(1 << 30);
    let t = e.table("s", &[("id", int()), ("k", int()), ("c", text())]);
    e.insert(
        &t,
        (1..=20)
            .map(|n| r(&[i(n), i(n % 4), s(&format!("c{:02}", 21 - n))]))
            .collect(),
    );
    // sysbench's text-protocol shapes: every execution has new bounds.
    for (lo, hi) in [(3, 5), (10, 12), (18, 40)] {
        let want: Vec<String> = (lo..=hi.min(20)).map(|n| n.to_string()).collect();
        let want: Vec<&str> = want.iter().map(String::as_str).collect();
        assert_eq!(
            e.q(
                &format!("SELECT id FROM s WHERE id BETWEEN {lo} AND {hi} ORDER BY id"),
                &[]
            ),
            v(&want)
        );
        let sum: i64 = (lo..=hi.min(20)).map(|n| n % 4).sum();
        assert_eq!(
            e.q(
                &format!("SELECT SUM(k) FROM s WHERE id BETWEEN {lo} AND {hi}"),
                &[]
            ),
            v(&[&sum.to_string()])
        );
        assert_eq!(
            e.q(
                &format!("SELECT DISTINCT k FROM s WHERE id >= {lo} AND {hi} >= id ORDER BY k"),
                &[]
            )
            .len(),
            (hi.min(20) - lo + 1).min(4) as usize
        );
    }
    assert_eq!(
        e.q(
            "SELECT id FROM s WHERE id BETWEEN ? AND ? ORDER BY id",
            &[i(19), i(25)]
        ),
        v(&["19", "20"])
    );
    // One view per shape, however many bounds were read.
    assert_eq!(e.df.view_stats().len(), 3, "{:?}", e.df.view_stats());
    // Strings against a text column, and a number against a text column
    // (compared as numbers by MySQL: it stays in the view's text).
    assert_eq!(
        e.q("SELECT id FROM s WHERE c < 'c03' ORDER BY id", &[]),
        v(&["19", "20"])
    );
    assert_eq!(
        e.q("SELECT id FROM s WHERE c > 'c18' ORDER BY id", &[]),
        v(&["1", "2"])
    );
    assert!(e.q("SELECT id FROM s WHERE c > 5", &[]).is_empty());
    // The view still follows writes, inside and outside the bounds read.
    e.delete_where(&t, |r| r[0] == i(4));
    e.insert(&t, vec![r(&[i(21), i(1), s("c00")])]);
    assert_eq!(
        e.q("SELECT id FROM s WHERE id BETWEEN 3 AND 5 ORDER BY id", &[]),
        v(&["3", "5"])
    );
    assert_eq!(
        e.q("SELECT id FROM s WHERE id > 19 ORDER BY id", &[]),
        v(&["20", "21"])
    );
}

#[test]
fn range_parameters_and_in_lists_under_aggregation() {
    let e = env(1 << 30);
    let t = e.table(
        "s",
        &[
            ("id", int()),
            ("grp", int()),
            ("score", int()),
            ("author", text()),
        ],
    );
    e.insert(
        &t,
        vec![
            r(&[i(1), i(1), i(10), s("ann")]),
            r(&[i(2), i(1), i(20), s("bob")]),
            r(&[i(3), i(2), i(30), s("ann")]),
            r(&[i(4), i(2), i(40), s("ann")]),
            r(&[i(5), i(3), Value::Null, s("bob")]),
        ],
    );
    let q = "SELECT grp, COUNT(*), SUM(score), MIN(score), MAX(score), AVG(score) FROM s WHERE score > ? GROUP BY grp";
    assert_eq!(
        e.q(q, &[i(15)]),
        v(&["1 1 20 20 20 20.0000", "2 2 70 30 40 35.0000"])
    );
    assert_eq!(e.q(q, &[i(35)]), v(&["2 1 40 40 40 40.0000"]));
    assert!(e.q(q, &[i(99)]).is_empty());
    // Writes are reflected: the view maintains the rows under the filter.
    e.insert(&t, vec![r(&[i(6), i(3), i(50), s("bob")])]);
    e.update_where(&t, |r| {
        (r[0] == i(1)).then(|| vec![i(1), i(1), i(16), s("ann")])
    });
    assert_eq!(
        e.q(q, &[i(15)]),
        v(&[
            "1 2 36 16 20 18.0000",
            "2 2 70 30 40 35.0000",
            "3 1 50 50 50 50.0000"
        ])
    );
    // One view serves every value.
    let views = e.df.view_stats().len();
    assert_eq!(e.q(q, &[i(0)]).len(), 3);
    assert_eq!(e.df.view_stats().len(), views);
    // No GROUP BY: one row, even when nothing passes.
    let scalar = "SELECT COUNT(*), SUM(score) FROM s WHERE score BETWEEN ? AND ?";
    assert_eq!(e.q(scalar, &[i(20), i(40)]), v(&["3 90"]));
    assert_eq!(e.q(scalar, &[i(41), i(49)]), v(&["0 NULL"]));
    // With an equality key, HAVING with a parameter, ORDER BY and LIMIT.
    let keyed = "SELECT grp, COUNT(*) AS n FROM s WHERE author = ? AND score >= ? GROUP BY grp HAVING n >= ? ORDER BY grp DESC LIMIT 1";
    assert_eq!(e.q(keyed, &[s("ann"), i(0), i(1)]), v(&["2 2"]));
    assert_eq!(e.q(keyed, &[s("ANN"), i(0), i(3)]), Vec::<String>::new());
    assert_eq!(
        e.q(
            "SELECT COUNT(*) FROM s WHERE author = ? AND score > ?",
            &[s("nobody"), i(0)]
        ),
        v(&["0"])
    );
    // COUNT(DISTINCT) and GROUP_CONCAT aggregate at read time too.
    assert_eq!(
        e.q(
            "SELECT COUNT(DISTINCT author), GROUP_CONCAT(id ORDER BY id) FROM s WHERE score < ?",
            &[i(35)]
        ),
        v(&["2 1,2,3"])
    );
    // IN (?, ?) with GROUP BY: one lookup per element, then aggregation.
    let inq = "SELECT author, COUNT(*) FROM s WHERE grp IN (?, ?, ?) GROUP BY author";
    assert_eq!(e.q(inq, &[i(1), i(3), i(1)]), v(&["ann 1", "bob 3"]));
    assert_eq!(
        e.q(
            "SELECT SUM(score) FROM s WHERE grp IN (1, 2) AND score > ?",
            &[i(16)]
        ),
        v(&["90"])
    );
    // DISTINCT over aggregated rows.
    assert_eq!(
        e.q(
            "SELECT DISTINCT COUNT(*) FROM s WHERE score > ? GROUP BY grp",
            &[i(0)]
        ),
        v(&["1", "2"])
    );
    e.delete_where(&t, |r| r[1] == i(2));
    assert_eq!(
        e.q(q, &[i(15)]),
        v(&["1 2 36 16 20 18.0000", "3 1 50 50 50 50.0000"])
    );
}

#[test]
fn non_equi_and_cross_joins() {
    let e = env(1 << 30);
    let a = e.table("a", &[("id", int()), ("x", int()), ("g", int())]);
    let b = e.table("b", &[("id", int()), ("y", int()), ("g", int())]);
    e.insert(
        &a,
        vec![
            r(&[i(1), i(1), i(1)]),
            r(&[i(2), i(5), i(1)]),
            r(&[i(3), i(9), i(2)]),
        ],
    );
    e.insert(
        &b,
        vec![
            r(&[i(10), i(4), i(1)]),
            r(&[i(11), i(6), i(2)]),
            r(&[i(12), Value::Null, i(1)]),
        ],
    );
    let lt = "SELECT a.id, b.id FROM a JOIN b ON a.x < b.y";
    assert_eq!(e.q(lt, &[]), v(&["1 10", "1 11", "2 11"]));
    // Equality plus a non-equi condition: the extra one filters the join.
    let eq_lt = "SELECT a.id, b.id FROM a JOIN b ON a.g = b.g AND a.x < b.y";
    assert_eq!(e.q(eq_lt, &[]), v(&["1 10"]));
    let cross = "SELECT a.id, b.id FROM a CROSS JOIN b WHERE b.y IS NOT NULL";
    assert_eq!(e.q(cross, &[]).len(), 6);
    // LEFT JOIN with a right-side-only condition and no equality.
    let left = "SELECT a.id, b.id FROM a LEFT JOIN b ON b.y > 5";
    assert_eq!(e.q(left, &[]), v(&["1 11", "2 11", "3 11"]));
    // Changes on either side.
    e.insert(&b, vec![r(&[i(13), i(100), i(2)])]);
    e.update_where(&a, |r| (r[0] == i(3)).then(|| vec![i(3), i(0), i(2)]));
    assert_eq!(
        e.q(lt, &[]),
        v(&["1 10", "1 11", "1 13", "2 11", "2 13", "3 10", "3 11", "3 13"])
    );
    assert_eq!(e.q(eq_lt, &[]), v(&["1 10", "3 11", "3 13"]));
    assert_eq!(e.q(cross, &[]).len(), 9);
    e.delete_where(&b, |r| r[0] == i(11) || r[0] == i(13));
    assert_eq!(e.q(lt, &[]), v(&["1 10", "3 10"]));
    assert_eq!(e.q(left, &[]), v(&["1 NULL", "2 NULL", "3 NULL"]));
    assert_eq!(
        e.q(
            "SELECT a.id, b.id FROM a, b WHERE a.x BETWEEN b.y - 4 AND b.y ORDER BY a.id",
            &[]
        ),
        v(&["1 10", "3 10"])
    );
}

#[test]
fn not_in_subquery_with_nulls() {
    let e = env(1 << 30);
    let t = e.table("t", &[("id", int()), ("x", int())]);
    let u = e.table("u", &[("id", int()), ("y", int())]);
    e.insert(
        &t,
        vec![r(&[i(1), i(1)]), r(&[i(2), i(2)]), r(&[i(3), Value::Null])],
    );
    let q = "SELECT id FROM t WHERE x NOT IN (SELECT y FROM u)";
    let q_in = "SELECT id FROM t WHERE x IN (SELECT y FROM u)";
    // Empty subquery: NOT IN is true, even for a NULL x.
    assert_eq!(e.q(q, &[]), v(&["1", "2", "3"]));
    e.insert(&u, vec![r(&[i(10), i(1)])]);
    assert_eq!(e.q(q, &[]), v(&["2"]));
    assert_eq!(e.q(q_in, &[]), v(&["1"]));
    // A NULL in the subquery: NOT IN is never true.
    e.insert(&u, vec![r(&[i(11), Value::Null])]);
    assert!(e.q(q, &[]).is_empty());
    assert_eq!(e.q(q_in, &[]), v(&["1"]));
    e.delete_where(&u, |r| r[0] == i(11));
    assert_eq!(e.q(q, &[]), v(&["2"]));
    // With a key parameter and a filtered subquery.
    let keyed = "SELECT id FROM t WHERE id = ? AND x NOT IN (SELECT y FROM u WHERE id > 10)";
    assert_eq!(e.q(keyed, &[i(1)]), v(&["1"]));
    assert_eq!(e.q(keyed, &[i(3)]), v(&["3"]));
    e.insert(&u, vec![r(&[i(12), i(5)])]);
    assert_eq!(e.q(keyed, &[i(3)]), Vec::<String>::new());
    assert_eq!(e.q(keyed, &[i(1)]), v(&["1"]));
    e.delete_where(&u, |_| true);
    assert_eq!(e.q(q, &[]), v(&["1", "2", "3"]));
}

#[test]
fn wildcard_hides_subquery_columns() {
    let e = env(1 << 30);
    let t = e.table("t", &[("id", int()), ("x", int())]);
    e.insert(&t, vec![r(&[i(1), i(1)]), r(&[i(2), i(5)])]);
    assert_eq!(
        e.q("SELECT * FROM t WHERE x > (SELECT AVG(x) FROM t)", &[]),
        v(&["2 5"])
    );
}

#[test]
fn scalar_subquery_without_aggregate() {
    let e = env(1 << 30);
    let users = e.table("users", &[("id", int()), ("name", text())]);
    let st = e.table(
        "stories",
        &[("id", int()), ("user_id", int()), ("score", int())],
    );
    e.insert(&users, vec![r(&[i(1), s("alice")]), r(&[i(2), s("bob")])]);
    e.insert(
        &st,
        vec![
            r(&[i(10), i(1), i(5)]),
            r(&[i(11), i(1), i(7)]),
            r(&[i(12), i(2), i(1)]),
        ],
    );
    let above = "SELECT id FROM stories WHERE score > (SELECT score FROM stories WHERE id = 12)";
    assert_eq!(e.q(above, &[]), v(&["10", "11"]));
    e.update_where(&st, |r| (r[0] == i(12)).then(|| vec![i(12), i(2), i(6)]));
    assert_eq!(e.q(above, &[]), v(&["11"]));
    // No row: the subquery is NULL, so nothing compares true.
    e.delete_where(&st, |r| r[0] == i(12));
    assert!(e.q(above, &[]).is_empty());
    // Correlated, in the select list: a lookup per row.
    let names = "SELECT s.id, (SELECT name FROM users u WHERE u.id = s.user_id) FROM stories s";
    assert_eq!(e.q(names, &[]), v(&["10 alice", "11 alice"]));
    e.insert(&st, vec![r(&[i(13), i(3), i(0)])]);
    assert_eq!(e.q(names, &[]), v(&["10 alice", "11 alice", "13 NULL"]));
    // Several rows: MySQL's error 1242, at read time.
    let many = |min: i64| {
        format!("SELECT id FROM users WHERE id = (SELECT user_id FROM stories WHERE score > {min})")
    };
    assert_eq!(e.q(&many(6), &[]), v(&["1"]));
    let err = e.prepare(&many(0)).execute(&[]).err().unwrap();
    assert!(
        err.to_string().contains("Subquery returns more than 1 row"),
        "{err}"
    );
    // ... also with a filter inside the subquery.
    e.insert(&users, vec![r(&[i(3), s("carol")]), r(&[i(4), s("carol")])]);
    let by_name = |n: &str| {
        format!("SELECT id FROM stories s WHERE s.user_id = (SELECT id FROM users u WHERE u.name = '{n}')")
    };
    assert_eq!(e.q(&by_name("bob"), &[]), Vec::<String>::new());
    assert_eq!(e.q(&by_name("alice"), &[]), v(&["10", "11"]));
    assert!(e.prepare(&by_name("carol")).execute(&[]).is_err());
    // With GROUP BY: the check and the filter run before aggregating.
    assert_eq!(
        e.q(
            "SELECT user_id, COUNT(*) FROM stories WHERE score >= (SELECT score FROM stories WHERE id = 10) GROUP BY user_id",
            &[]
        ),
        v(&["1 2"])
    );
}

#[test]
fn parameters_inside_in_and_exists_subqueries_key_the_view() {
    let e = env(1 << 30);
    let st = e.table(
        "stories",
        &[("id", int()), ("title", text()), ("score", int())],
    );
    let votes = e.table(
        "votes",
        &[("id", int()), ("story_id", int()), ("user_id", int())],
    );
    e.insert(
        &st,
        vec![
            r(&[i(1), s("a"), i(10)]),
            r(&[i(2), s("b"), i(20)]),
            r(&[i(3), s("c"), i(30)]),
        ],
    );
    e.insert(
        &votes,
        vec![
            r(&[i(1), i(1), i(7)]),
            r(&[i(2), i(1), i(7)]),
            r(&[i(3), i(2), i(7)]),
            r(&[i(4), i(2), i(8)]),
        ],
    );
    let voted =
        "SELECT id, title FROM stories WHERE id IN (SELECT story_id FROM votes WHERE user_id = ?)";
    // Two votes of user 7 on story 1 still return story 1 once.
    assert_eq!(e.q(voted, &[i(7)]), v(&["1 a", "2 b"]));
    assert_eq!(e.q(voted, &[i(8)]), v(&["2 b"]));
    assert!(e.q(voted, &[i(9)]).is_empty());
    let exists = "SELECT s.id FROM stories s WHERE EXISTS (SELECT 1 FROM votes v WHERE v.story_id = s.id AND v.user_id = ?) AND s.score > 15";
    assert_eq!(e.q(exists, &[i(7)]), v(&["2"]));
    let counted = "SELECT COUNT(*), SUM(score) FROM stories WHERE id IN (SELECT story_id FROM votes WHERE user_id = ?)";
    assert_eq!(e.q(counted, &[i(7)]), v(&["2 30"]));
    assert_eq!(e.q(counted, &[i(9)]), v(&["0 NULL"]));
    let star = "SELECT * FROM stories WHERE id IN (SELECT story_id FROM votes WHERE user_id = ?) ORDER BY id";
    assert_eq!(e.q(star, &[i(8)]), v(&["2 b 20"]));
    // Maintained: votes come and go, stories change.
    e.insert(&votes, vec![r(&[i(5), i(3), i(8)])]);
    e.delete_where(&votes, |r| r[0] == i(1));
    assert_eq!(e.q(voted, &[i(7)]), v(&["1 a", "2 b"]));
    e.delete_where(&votes, |r| r[0] == i(2));
    assert_eq!(e.q(voted, &[i(7)]), v(&["2 b"]));
    assert_eq!(e.q(voted, &[i(8)]), v(&["2 b", "3 c"]));
    e.update_where(&st, |r| (r[0] == i(3)).then(|| vec![i(3), s("c2"), i(31)]));
    assert_eq!(e.q(voted, &[i(8)]), v(&["2 b", "3 c2"]));
    assert_eq!(e.q(exists, &[i(8)]), v(&["2", "3"]));
    assert_eq!(e.q(counted, &[i(8)]), v(&["2 51"]));
    // One view for every user.
    let views = e.df.view_stats().len();
    assert_eq!(e.q(voted, &[i(100)]).len(), 0);
    assert_eq!(e.df.view_stats().len(), views);
    // Range parameters inside a subquery stay refused.
    let err =
        e.df.prepare(
            DB,
            &parse(
                "SELECT id FROM stories WHERE id IN (SELECT story_id FROM votes WHERE user_id > ?)",
            ),
        )
        .err()
        .unwrap();
    assert!(matches!(err, DataflowError::Unsupported(_)), "{err}");
}

#[test]
fn literals_inside_semi_join_subqueries_share_a_view() {
    let e = env(1 << 30);
    let st = e.table("stories", &[("id", int()), ("score", int())]);
    let hidden = e.table(
        "hidden",
        &[("id", int()), ("story_id", int()), ("user_id", int())],
    );
    e.insert(&st, (1..=4).map(|k| r(&[i(k), i(k * 10)])).collect());
    e.insert(
        &hidden,
        vec![
            r(&[i(1), i(1), i(7)]),
            r(&[i(2), i(3), i(7)]),
            r(&[i(3), i(3), i(8)]),
        ],
    );
    assert_eq!(
        e.q(
            "SELECT id FROM stories WHERE id IN (SELECT story_id FROM hidden WHERE user_id = 7)",
            &[]
        ),
        v(&["1", "3"])
    );
    let views = e.df.view_stats().len();
    assert_eq!(
        e.q(
            "SELECT id FROM stories WHERE id IN (SELECT story_id FROM hidden WHERE user_id = 8)",
            &[]
        ),
        v(&["3"])
    );
    assert_eq!(
        e.q("SELECT s.id FROM stories s WHERE EXISTS (SELECT 1 FROM hidden h WHERE h.story_id = s.id AND h.user_id = 8) AND s.id = 3", &[]),
        v(&["3"])
    );
    assert_eq!(e.df.view_stats().len(), views + 1);
    // Shapes the keyed semi-join does not plan keep their literal filter.
    assert_eq!(
        e.q("SELECT id FROM stories WHERE id NOT IN (SELECT story_id FROM hidden WHERE user_id = 7)", &[]),
        v(&["2", "4"])
    );
    assert_eq!(
        e.q("SELECT id FROM stories WHERE score IN (SELECT MAX(story_id) * 10 FROM hidden WHERE user_id = 7)", &[]),
        v(&["3"])
    );
}

#[test]
fn left_join_on_conditions_over_both_sides() {
    let e = env(1 << 30);
    let users = e.table("users", &[("id", int()), ("seen", int()), ("name", text())]);
    let msgs = e.table("msgs", &[("id", int()), ("user_id", int()), ("at", int())]);
    e.insert(
        &users,
        vec![
            r(&[i(1), i(10), s("ann")]),
            r(&[i(2), i(20), s("bob")]),
            r(&[i(3), Value::Null, s("cy")]),
            r(&[i(4), i(10), Value::Null]),
        ],
    );
    e.insert(
        &msgs,
        vec![
            r(&[i(100), i(1), i(5)]),
            r(&[i(101), i(1), i(15)]),
            r(&[i(102), i(2), i(15)]),
            r(&[i(103), i(3), i(1)]),
        ],
    );
    // Unread messages per user: the ON condition compares both sides.
    let q = "SELECT u.id, m.id FROM users u LEFT JOIN msgs m ON m.user_id = u.id AND m.at > u.seen";
    assert_eq!(e.q(q, &[]), v(&["1 101", "2 NULL", "3 NULL", "4 NULL"]));
    let counted = "SELECT u.id, COUNT(m.id) FROM users u LEFT JOIN msgs m ON m.user_id = u.id AND m.at > u.seen GROUP BY u.id";
    assert_eq!(e.q(counted, &[]), v(&["1 1", "2 0", "3 0", "4 0"]));
    // A non-equi LEFT JOIN without any equality.
    let ne =
        "SELECT u.id, m.id FROM users u LEFT JOIN msgs m ON m.at < u.seen AND m.user_id <> u.id";
    assert_eq!(
        e.q(ne, &[]),
        v(&["1 103", "2 100", "2 101", "2 103", "3 NULL", "4 100", "4 103"])
    );
    // Keyed by a parameter, and maintained through writes on both sides.
    let one = "SELECT m.id FROM users u LEFT JOIN msgs m ON m.user_id = u.id AND m.at > u.seen WHERE u.id = ?";
    assert_eq!(e.q(one, &[i(2)]), v(&["NULL"]));
    e.insert(&msgs, vec![r(&[i(104), i(2), i(25)])]);
    assert_eq!(e.q(one, &[i(2)]), v(&["104"]));
    e.update_where(&users, |r| {
        (r[0] == i(1)).then(|| vec![i(1), i(20), s("ann")])
    });
    assert_eq!(e.q(q, &[]), v(&["1 NULL", "2 104", "3 NULL", "4 NULL"]));
    e.update_where(&users, |r| {
        (r[0] == i(3)).then(|| vec![i(3), i(0), s("cy")])
    });
    assert_eq!(e.q(q, &[]), v(&["1 NULL", "2 104", "3 103", "4 NULL"]));
    e.delete_where(&msgs, |r| r[0] == i(104));
    e.insert(&users, vec![r(&[i(5), i(0), s("dee")])]);
    assert_eq!(
        e.q(q, &[]),
        v(&["1 NULL", "2 NULL", "3 103", "4 NULL", "5 NULL"])
    );
    assert_eq!(e.q(counted, &[]), v(&["1 0", "2 0", "3 1", "4 0", "5 0"]));
    // Identical left rows stay separate.
    let dup = "SELECT u.seen, m.id FROM users u LEFT JOIN msgs m ON m.at > u.seen + 100";
    assert_eq!(
        e.q(dup, &[]),
        v(&["0 NULL", "0 NULL", "10 NULL", "20 NULL", "20 NULL"])
    );
}

#[test]
fn parameters_in_inner_join_on_key_the_view() {
    let e = env(1 << 30);
    let st = e.table("stories", &[("id", int()), ("title", text())]);
    let votes = e.table(
        "votes",
        &[("id", int()), ("story_id", int()), ("user_id", int())],
    );
    e.insert(&st, vec![r(&[i(1), s("a")]), r(&[i(2), s("b")])]);
    e.insert(
        &votes,
        vec![
            r(&[i(1), i(1), i(7)]),
            r(&[i(2), i(2), i(7)]),
            r(&[i(3), i(2), i(8)]),
        ],
    );
    let q = "SELECT s.title FROM stories s JOIN votes v ON v.story_id = s.id AND v.user_id = ?";
    assert_eq!(e.q(q, &[i(7)]), v(&["a", "b"]));
    assert_eq!(e.q(q, &[i(8)]), v(&["b"]));
    let views = e.df.view_stats().len();
    e.delete_where(&votes, |r| r[0] == i(2));
    assert_eq!(e.q(q, &[i(7)]), v(&["a"]));
    assert_eq!(e.df.view_stats().len(), views);
    let ranged =
        "SELECT s.title FROM stories s JOIN votes v ON v.story_id = s.id AND v.user_id > ?";
    assert_eq!(e.q(ranged, &[i(7)]), v(&["b"]));
}

#[test]
fn literals_in_inner_join_on_share_a_view() {
    let e = env(1 << 30);
    let st = e.table("stories", &[("id", int()), ("title", text())]);
    let votes = e.table(
        "votes",
        &[("id", int()), ("story_id", int()), ("user_id", int())],
    );
    e.insert(&st, vec![r(&[i(1), s("a")]), r(&[i(2), s("b")])]);
    e.insert(
        &votes,
        vec![
            r(&[i(1), i(1), i(7)]),
            r(&[i(2), i(2), i(7)]),
            r(&[i(3), i(2), i(8)]),
        ],
    );
    let q = |u: i64| {
        format!("SELECT s.title, v.id FROM stories s JOIN votes v ON v.story_id = s.id AND v.user_id = {u} WHERE s.id > 0")
    };
    assert_eq!(e.q(&q(7), &[]), v(&["a 1", "b 2"]));
    let views = e.df.view_stats().len();
    assert_eq!(e.q(&q(8), &[]), v(&["b 3"]));
    assert!(e.q(&q(9), &[]).is_empty());
    assert_eq!(e.df.view_stats().len(), views);
    // LEFT JOIN ON literals stay part of the join.
    assert_eq!(
        e.q("SELECT s.id, v.id FROM stories s LEFT JOIN votes v ON v.story_id = s.id AND v.user_id = 8", &[]),
        v(&["1 NULL", "2 3"])
    );
}

#[test]
fn parameters_in_a_parenthesized_join_are_never_dropped() {
    let e = env(1 << 30);
    let a = e.table("a", &[("id", int())]);
    let b = e.table("b", &[("id", int()), ("u", int())]);
    let c = e.table("c", &[("id", int()), ("b_id", int())]);
    e.insert(&a, vec![r(&[i(1)]), r(&[i(2)])]);
    e.insert(&b, vec![r(&[i(1), i(7)]), r(&[i(2), i(8)])]);
    e.insert(&c, vec![r(&[i(1), i(1)]), r(&[i(2), i(2)])]);
    let sql =
        "SELECT a.id, b.id FROM a LEFT JOIN (b JOIN c ON c.b_id = b.id AND b.u = ?) ON b.id = a.id";
    match e.df.prepare(DB, &parse(sql)) {
        Err(err) => assert!(matches!(err, DataflowError::Unsupported(_)), "{err}"),
        Ok(p) => assert_eq!(
            render(p.execute(&[i(7)]).unwrap(), false),
            v(&["1 1", "2 NULL"])
        ),
    }
    // With a literal, the condition filters inside the parentheses.
    assert_eq!(
        e.q(
            "SELECT a.id, b.id FROM a LEFT JOIN (b JOIN c ON c.b_id = b.id AND b.u = 7) ON b.id = a.id",
            &[]
        ),
        v(&["1 1", "2 NULL"])
    );
}

#[test]
fn scalar_subquery_top_one_is_max_or_min() {
    let e = env(1 << 30);
    let st = e.table("stories", &[("id", int()), ("title", text())]);
    let cm = e.table(
        "comments",
        &[("id", int()), ("story_id", int()), ("at", int())],
    );
    e.insert(
        &st,
        vec![r(&[i(1), s("a")]), r(&[i(2), s("b")]), r(&[i(3), s("c")])],
    );
    e.insert(
        &cm,
        vec![
            r(&[i(10), i(1), i(5)]),
            r(&[i(11), i(1), i(9)]),
            r(&[i(12), i(2), Value::Null]),
            r(&[i(13), i(2), i(4)]),
        ],
    );
    let latest = "SELECT s.id, (SELECT at FROM comments c WHERE c.story_id = s.id ORDER BY at DESC LIMIT 1) FROM stories s";
    assert_eq!(e.q(latest, &[]), v(&["1 9", "2 4", "3 NULL"]));
    // (ASC over a NOT NULL column is MIN: tests/sql/subqueries/scalar_lookup.test.)
    e.delete_where(&cm, |r| r[0] == i(11) || r[0] == i(12));
    e.insert(&cm, vec![r(&[i(14), i(3), i(1)])]);
    assert_eq!(e.q(latest, &[]), v(&["1 5", "2 4", "3 1"]));
    // ASC over a nullable column returns a NULL first, as MySQL sorts it.
    let first = "SELECT s.id, (SELECT at FROM comments c WHERE c.story_id = s.id ORDER BY at LIMIT 1) FROM stories s";
    assert_eq!(e.q(first, &[]), v(&["1 5", "2 4", "3 1"]));
    e.insert(&cm, vec![r(&[i(15), i(2), Value::Null])]);
    assert_eq!(e.q(first, &[]), v(&["1 5", "2 NULL", "3 1"]));
    e.delete_where(&cm, |r| r[0] == i(15));
    assert_eq!(e.q(first, &[]), v(&["1 5", "2 4", "3 1"]));
}

#[test]
fn derived_table_with_order_by_limit() {
    let e = env(1 << 30);
    let t = e.table(
        "stories",
        &[("id", int()), ("grp", int()), ("score", int())],
    );
    e.insert(
        &t,
        (1..=8).map(|k| r(&[i(k), i(k % 3), i(k * 10)])).collect(),
    );
    // The three best stories, shown oldest first.
    let q = "SELECT id, score FROM (SELECT id, score FROM stories ORDER BY score DESC LIMIT 3) AS top ORDER BY id";
    assert_eq!(e.q(q, &[]), v(&["6 60", "7 70", "8 80"]));
    // Aggregates over the window; ORDER BY on a column not selected.
    let avg =
        "SELECT COUNT(*), SUM(score) FROM (SELECT score FROM stories ORDER BY id DESC LIMIT 4) d";
    assert_eq!(e.q(avg, &[]), v(&["4 260"]));
    let grouped = "SELECT grp, COUNT(*) FROM (SELECT grp FROM stories ORDER BY score LIMIT 2, 4) d WHERE grp > ? GROUP BY grp ORDER BY grp";
    assert_eq!(e.q(grouped, &[i(0)]), v(&["1 1", "2 1"]));
    // WHERE applies after the window, with parameters.
    let filtered = "SELECT d.id FROM (SELECT * FROM stories ORDER BY score DESC LIMIT 4) d WHERE d.grp = ? ORDER BY d.id";
    assert_eq!(e.q(filtered, &[i(2)]), v(&["5", "8"]));
    assert_eq!(e.q(filtered, &[i(1)]), v(&["7"]));
    // Maintained: a row entering and one leaving the window.
    e.insert(&t, vec![r(&[i(9), i(0), i(1000)])]);
    e.delete_where(&t, |r| r[0] == i(7));
    assert_eq!(e.q(q, &[]), v(&["6 60", "8 80", "9 1000"]));
    assert_eq!(e.q(avg, &[]), v(&["4 1190"]));
    assert_eq!(e.q(filtered, &[i(2)]), v(&["5", "8"]));
    // In a join, the derived table is a maintained top-k window.
    let joined = "SELECT s.id FROM stories s JOIN (SELECT id FROM stories ORDER BY score LIMIT 2) d ON d.id = s.id ORDER BY s.id";
    assert_eq!(e.q(joined, &[]), v(&["1", "2"]));
    e.insert(&t, vec![r(&[i(10), i(1), i(5)])]);
    assert_eq!(e.q(joined, &[]), v(&["1", "10"]));
}

#[test]
fn in_list_on_a_group_by_column_reads_maintained_groups() {
    let e = env(1 << 30);
    let votes = e.table(
        "votes",
        &[("id", int()), ("story_id", int()), ("up", int())],
    );
    e.insert(
        &votes,
        vec![
            r(&[i(1), i(1), i(1)]),
            r(&[i(2), i(1), i(0)]),
            r(&[i(3), i(2), i(1)]),
            r(&[i(4), i(3), i(1)]),
        ],
    );
    let q = "SELECT story_id, COUNT(*), SUM(up) FROM votes WHERE story_id IN (?, ?, ?) GROUP BY story_id ORDER BY story_id";
    assert_eq!(e.q(q, &[i(1), i(3), i(9)]), v(&["1 2 1", "3 1 1"]));
    assert_eq!(e.q(q, &[i(2), i(2), i(1)]), v(&["1 2 1", "2 1 1"]));
    e.insert(&votes, vec![r(&[i(5), i(3), i(1)])]);
    e.delete_where(&votes, |r| r[0] == i(2));
    assert_eq!(e.q(q, &[i(1), i(3), i(9)]), v(&["1 1 1", "3 2 2"]));
    // The reader holds one maintained aggregate row per story read (1, 2,
    // 3), not the votes themselves.
    let view =
        e.df.view_stats()
            .into_iter()
            .find(|v| v.query.contains("GROUP BY story_id ORDER BY story_id"))
            .unwrap();
    assert_eq!(view.cached_rows, 3, "{view:?}");
    // Not grouped by the IN column: the elements' rows merge at read time.
    assert_eq!(
        e.q(
            "SELECT COUNT(*) FROM votes WHERE story_id IN (?, ?)",
            &[i(1), i(3)]
        ),
        v(&["3"])
    );
    assert_eq!(
        e.q(
            "SELECT up, COUNT(*) FROM votes WHERE story_id IN (?, ?) GROUP BY up",
            &[i(1), i(3)]
        ),
        v(&["1 3"])
    );
}

#[test]
fn literal_in_lists_on_group_by_columns_share_a_view() {
    let e = env(1 << 30);
    let votes = e.table(
        "votes",
        &[("id", int()), ("story_id", int()), ("up", int())],
    );
    e.insert(
        &votes,
        vec![
            r(&[i(1), i(1), i(1)]),
            r(&[i(2), i(1), i(0)]),
            r(&[i(3), i(2), i(1)]),
        ],
    );
    let q = |ids: &str| {
        format!("SELECT story_id, COUNT(*) FROM votes WHERE story_id IN ({ids}) GROUP BY story_id")
    };
    assert_eq!(e.q(&q("1, 2"), &[]), v(&["1 2", "2 1"]));
    let views = e.df.view_stats().len();
    assert_eq!(e.q(&q("2, 3, 2"), &[]), v(&["2 1"]));
    assert_eq!(e.q(&q("1"), &[]), v(&["1 2"]));
    assert_eq!(e.df.view_stats().len(), views);
    // Not a GROUP BY column: still one filter per list.
    assert_eq!(
        e.q(
            "SELECT up, COUNT(*) FROM votes WHERE story_id IN (1, 2) GROUP BY up",
            &[]
        ),
        v(&["0 1", "1 2"])
    );
}

#[test]
fn nested_subqueries_with_literals_still_plan() {
    let e = env(1 << 30);
    let st = e.table("stories", &[("id", int()), ("user_id", int())]);
    let votes = e.table(
        "votes",
        &[("id", int()), ("story_id", int()), ("user_id", int())],
    );
    let users = e.table("users", &[("id", int()), ("banned", int())]);
    e.insert(&st, vec![r(&[i(1), i(1)]), r(&[i(2), i(2)])]);
    e.insert(&votes, vec![r(&[i(1), i(1), i(7)]), r(&[i(2), i(2), i(8)])]);
    e.insert(&users, vec![r(&[i(7), i(0)]), r(&[i(8), i(1)])]);
    assert_eq!(
        e.q(
            "SELECT id FROM stories WHERE id IN (SELECT story_id FROM votes WHERE story_id > 0 AND user_id IN (SELECT id FROM users WHERE banned = 0))",
            &[]
        ),
        v(&["1"])
    );
    assert_eq!(
        e.q(
            "SELECT id FROM stories WHERE id IN (SELECT story_id FROM votes WHERE story_id = 2 AND user_id IN (SELECT id FROM users WHERE banned = 1))",
            &[]
        ),
        v(&["2"])
    );
}

#[test]
fn bare_names_in_join_on_stay_in_the_join() {
    let e = env(1 << 30);
    let a = e.table("a", &[("id", int())]);
    let b = e.table("b", &[("id", int()), ("a_id", int()), ("y", int())]);
    let c = e.table("c", &[("id", int()), ("b_id", int()), ("y", int())]);
    e.insert(&a, vec![r(&[i(1)])]);
    e.insert(&b, vec![r(&[i(1), i(1), i(5)]), r(&[i(2), i(1), i(6)])]);
    e.insert(&c, vec![r(&[i(1), i(1), i(9)]), r(&[i(2), i(2), i(9)])]);
    // `y` is b.y inside the first ON, ambiguous after c joins in.
    let sql = "SELECT b.id FROM a JOIN b ON b.a_id = a.id AND y = 5 JOIN c ON c.b_id = b.id";
    assert_eq!(e.q(sql, &[]), v(&["1"]));
    let with_param = "SELECT b.id FROM a JOIN b ON b.a_id = a.id AND y = ? JOIN c ON c.b_id = b.id";
    match e.df.prepare(DB, &parse(with_param)) {
        Ok(p) => assert_eq!(render(p.execute(&[i(6)]).unwrap(), false), v(&["2"])),
        Err(err) => assert!(matches!(err, DataflowError::Unsupported(_)), "{err}"),
    }
}

/// Expressions that yield bytes are typed binary in the result metadata (so
/// the wire layer sends charset 63); HEX() is text, UNHEX() binary.
#[test]
fn binary_expressions_have_binary_result_types() {
    let e = env(1 << 30);
    e.table(
        "b",
        &[
            ("id", int()),
            ("bl", ladle_common::SqlType::Blob(65535)),
            ("name", text()),
        ],
    );
    let p = e.prepare(
        "SELECT X'00FF', CAST(name AS BINARY), HEX(bl), UNHEX(name), CONCAT(name, bl), \
         CONCAT(name, 'x'), SUBSTRING(bl, 2), bl FROM b",
    );
    let binary: Vec<bool> = p.columns().iter().map(|c| c.ty.is_binary()).collect();
    assert_eq!(
        binary,
        vec![true, true, false, true, true, false, true, true],
        "{:?}",
        p.columns()
    );
}

/// A number bound to `text_col = ?` compares numerically, as MySQL does
/// ('1abc', '01' and '1.0' equal 1), not as the string '1'; a string bound
/// to `int_col = ?` is read as a number too.
#[test]
fn numbers_and_strings_compare_numerically_through_parameters() {
    let e = env(1 << 30);
    let js = e.table("js", &[("id", int()), ("s", text())]);
    let ji = e.table("ji", &[("id", int()), ("n", int())]);
    e.insert(
        &js,
        ["1abc", "01", "abc", "1", " 10", "1.0"]
            .iter()
            .enumerate()
            .map(|(i, s)| vec![Value::Int(i as i64 + 1), Value::text(s)])
            .collect(),
    );
    e.insert(
        &ji,
        vec![
            vec![Value::Int(1), Value::Int(1)],
            vec![Value::Int(2), Value::Int(0)],
        ],
    );
    let by_s = "SELECT id FROM js WHERE s = ?";
    assert_eq!(e.q(by_s, &[Value::Int(1)]), v(&["1", "2", "4", "6"]));
    assert_eq!(e.q(by_s, &[Value::text("1")]), v(&["4"]));
    assert_eq!(e.q(by_s, &[Value::Int(10)]), v(&["5"]));
    let in_s = "SELECT id FROM js WHERE s IN (?, ?)";
    assert_eq!(
        e.q(in_s, &[Value::Int(0), Value::text("01")]),
        v(&["2", "3"])
    );
    let by_n = "SELECT id FROM ji WHERE n = ?";
    assert_eq!(e.q(by_n, &[Value::text("1abc")]), v(&["1"]));
    assert_eq!(e.q(by_n, &[Value::text("abc")]), v(&["2"]));
    assert_eq!(e.q(by_n, &[Value::text("1.5")]), v(&[]));
}

/// Range parameters are read from the reader's order (SHOW VIEWS lists the
/// range column after the key); every bound kind, NULLs, empty ranges,
/// text under the column's collation, DATETIME, and deltas on both sides
/// of a range already read.
#[test]
fn range_parameters_read_from_the_reader_order() {
    let e = env(1 << 30);
    let dt = |x: &str| Value::DateTime(ladle_common::parse_datetime_prefix(x).unwrap());
    let t = e.table(
        "t",
        &[
            ("id", int()),
            ("k", int()),
            ("n", int()),
            ("name", text()),
            ("at", ladle_common::SqlType::DateTime { fsp: 0 }),
        ],
    );
    let row = |id: i64, k: i64, n: Option<i64>, name: Option<&str>, at: Option<&str>| {
        vec![
            i(id),
            i(k),
            n.map(i).unwrap_or(Value::Null),
            name.map(s).unwrap_or(Value::Null),
            at.map(dt).unwrap_or(Value::Null),
        ]
    };
    e.insert(
        &t,
        vec![
            row(1, 1, Some(10), Some("apple"), Some("2024-01-01 00:00:00")),
            row(2, 1, Some(20), Some("Banana"), Some("2024-01-02 10:00:00")),
            row(3, 2, Some(20), Some("cherry"), Some("2024-01-02 23:59:59")),
            row(4, 2, Some(30), Some("DATE"), Some("2024-01-03 00:00:00")),
            row(5, 1, None, None, None),
            row(6, 2, Some(40), Some("2nd"), Some("2024-02-01 00:00:00")),
        ],
    );
    let between = "SELECT id FROM t WHERE n BETWEEN ? AND ? ORDER BY n DESC, id";
    assert_eq!(e.q(between, &[i(20), i(30)]), v(&["4", "2", "3"]));
    assert_eq!(e.q(between, &[i(30), i(20)]), v(&[]));
    assert_eq!(e.q(between, &[Value::Null, i(30)]), v(&[]));
    // A string bound against a number column compares as a number.
    assert_eq!(e.q(between, &[s("15"), s("20.0")]), v(&["2", "3"]));
    let open = "SELECT id FROM t WHERE n > ? AND n <= ?";
    assert_eq!(e.q(open, &[i(10), i(30)]), v(&["2", "3", "4"]));
    assert_eq!(e.q(open, &[i(-5), i(10)]), v(&["1"]));
    assert_eq!(e.q("SELECT id FROM t WHERE ? > n", &[i(20)]), v(&["1"]));
    assert_eq!(e.q("SELECT id FROM t WHERE n < ?", &[i(100)]).len(), 5);
    // An equality prefix keys the view; the range is read inside a key.
    let keyed = "SELECT id FROM t WHERE k = ? AND n >= ?";
    assert_eq!(e.q(keyed, &[i(2), i(25)]), v(&["4", "6"]));
    assert_eq!(e.q(keyed, &[i(1), i(15)]), v(&["2"]));
    // Text under the column's (case-insensitive) collation.
    let names = "SELECT name FROM t WHERE name BETWEEN ? AND ? ORDER BY name";
    assert_eq!(e.q(names, &[s("b"), s("CZ")]), v(&["Banana", "cherry"]));
    assert_eq!(e.q(names, &[s("A"), s("b")]), v(&["2nd", "apple"][1..]));
    // A number bound against a text column compares numerically (no
    // narrowing by the text order): '2nd' reads as 2, others as 0.
    assert_eq!(e.q("SELECT id FROM t WHERE name > ?", &[i(1)]), v(&["6"]));
    // DATETIME against datetimes and strings that read as one.
    let at = "SELECT id FROM t WHERE at >= ? AND at < ?";
    assert_eq!(e.q(at, &[s("2024-01-02"), s("2024-01-03")]), v(&["2", "3"]));
    assert_eq!(
        e.q(at, &[dt("2024-01-01 00:00:00"), s("2024-01-02 10:00:00")]),
        v(&["1"])
    );
    // Aggregates over a range, also an empty one.
    let sum = "SELECT COUNT(*), SUM(n) FROM t WHERE id BETWEEN ? AND ?";
    assert_eq!(e.q(sum, &[i(2), i(4)]), v(&["3 70"]));
    assert_eq!(e.q(sum, &[i(9), i(10)]), v(&["0 NULL"]));

    let stats = e.df.view_stats();
    let keys = |q: &str| {
        stats
            .iter()
            .find(|s| s.query.contains(q))
            .map(|s| s.key_columns.clone())
            .unwrap_or_else(|| panic!("no view for {q}"))
    };
    assert_eq!(keys("BETWEEN ? AND ? ORDER BY n"), vec!["n (range)"]);
    assert_eq!(keys("k = ? AND n >="), vec!["k", "n (range)"]);
    assert_eq!(keys("SUM(n)"), vec!["id (range)"]);
    assert!(e
        .df
        .explain_graph(DB, &parse(between))
        .unwrap()
        .contains("range n >= ?"));

    // Deltas inside and outside the ranges read above, a row moving
    // across a bound, a NULL becoming a value.
    e.insert(
        &t,
        vec![
            row(7, 2, Some(25), Some("bb"), Some("2024-01-02 12:00:00")),
            row(8, 1, Some(99), Some("zz"), Some("2025-01-01 00:00:00")),
        ],
    );
    e.update_where(&t, |r| {
        (r[0] == i(1)).then(|| {
            let mut n = r.clone();
            n[2] = i(21);
            n
        })
    });
    e.update_where(&t, |r| {
        (r[0] == i(5)).then(|| {
            let mut n = r.clone();
            n[2] = i(30);
            n[3] = s("BZ");
            n
        })
    });
    e.delete_where(&t, |r| r[0] == i(3));
    assert_eq!(e.q(between, &[i(20), i(30)]), v(&["4", "5", "7", "1", "2"]));
    assert_eq!(e.q(keyed, &[i(1), i(15)]), v(&["1", "2", "5", "8"]));
    assert_eq!(e.q(names, &[s("b"), s("CZ")]), v(&["Banana", "bb", "BZ"]));
    assert_eq!(e.q(at, &[s("2024-01-02"), s("2024-01-03")]), v(&["2", "7"]));
    assert_eq!(e.q(sum, &[i(2), i(8)]), v(&["6 244"]));
}

/// A range read in its own order stops at OFFSET + LIMIT (the filter runs
/// as rows come); other orders sort the whole range first.
#[test]
fn range_reads_with_limit() {
    let e = env(1 << 30);
    let t = e.table("p", &[("id", int()), ("n", int()), ("name", text())]);
    e.insert(
        &t,
        (1..=50)
            .map(|x| {
                vec![
                    i(x),
                    if x % 7 == 0 { Value::Null } else { i(x % 10) },
                    s(&format!("n{x:02}")),
                ]
            })
            .collect(),
    );
    let page = "SELECT id FROM p WHERE id > ? AND n <> 3 ORDER BY id LIMIT 3 OFFSET 1";
    assert_eq!(e.q(page, &[i(10)]), v(&["12", "15", "16"]));
    // 49 has a NULL n.
    assert_eq!(e.q(page, &[i(47)]), v(&["50"]));
    let no_order = "SELECT id FROM p WHERE id BETWEEN ? AND ? LIMIT 2";
    assert_eq!(e.q(no_order, &[i(5), i(6)]), v(&["5", "6"]));
    let other = "SELECT id FROM p WHERE id >= ? ORDER BY n DESC, id LIMIT 3";
    assert_eq!(e.q(other, &[i(30)]), v(&["39", "38", "48"]));
    e.delete_where(&t, |r| r[0] == i(12));
    e.update_where(&t, |r| {
        (r[0] == i(13)).then(|| vec![r[0].clone(), i(4), r[2].clone()])
    });
    assert_eq!(e.q(page, &[i(10)]), v(&["13", "15", "16"]));
}
