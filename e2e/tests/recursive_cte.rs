//! WITH RECURSIVE where the sqllogic files cannot say it: MySQL 8's
//! iteration limit (`@@cte_max_recursion_depth`, 3636; MariaDB has no such
//! limit), parameters of a server-side prepared statement inside the CTE,
//! a REPEATABLE READ transaction's own writes, and nothing left behind by
//! many executions (hidden tables, views).

use ladle_e2e::{connect, ladle_binary, query_rows, LadleServer};
use mysql::prelude::Queryable;

fn scalar(conn: &mut mysql::Conn, sql: &str) -> String {
    let (rows, _) = query_rows(conn, sql).expect(sql);
    rows.expect("rows")[0][0].clone()
}

fn error(c: &mut mysql::Conn, sql: &str) -> (u16, String) {
    match query_rows(c, sql) {
        Err(mysql::Error::MySqlError(e)) => (e.code, e.message),
        other => panic!("{sql}: expected an error, got {other:?}"),
    }
}

fn series(limit: u32) -> String {
    format!(
        "WITH RECURSIVE c (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < {limit}) \
         SELECT COUNT(*) FROM c"
    )
}

fn server() -> (LadleServer, mysql::Conn) {
    let bin = ladle_binary().expect("ladle binary");
    let server = LadleServer::start_with(&bin, &[]).expect("start ladle");
    let mut c = connect(&server.url(), None).expect("connect");
    query_rows(&mut c, "CREATE DATABASE rec").expect("create");
    query_rows(&mut c, "USE rec").expect("use");
    (server, c)
}

#[test]
fn recursion_stops_at_cte_max_recursion_depth() {
    let (ladle, mut c) = server();
    assert_eq!(scalar(&mut c, "SELECT @@cte_max_recursion_depth"), "1000");
    // 999 iterations add rows, the 1000th adds none: within the limit.
    assert_eq!(scalar(&mut c, &series(1000)), "1000");
    let (code, message) = error(&mut c, &series(1001));
    assert_eq!(code, 3636);
    assert_eq!(
        message,
        "Recursive query aborted after 1001 iterations. \
         Try increasing @@cte_max_recursion_depth to a larger value."
    );
    query_rows(&mut c, "SET SESSION cte_max_recursion_depth = 10").expect("set");
    assert_eq!(scalar(&mut c, &series(10)), "10");
    assert_eq!(error(&mut c, &series(11)).0, 3636);
    query_rows(&mut c, "SET SESSION cte_max_recursion_depth = 5000").expect("set");
    assert_eq!(scalar(&mut c, &series(3000)), "3000");
    // A cycle under UNION ALL never ends by itself: the limit ends it.
    query_rows(&mut c, "SET SESSION cte_max_recursion_depth = 50").expect("set");
    let cycle =
        "WITH RECURSIVE c (n) AS (SELECT 1 UNION ALL SELECT 3 - n FROM c) SELECT COUNT(*) FROM c";
    assert_eq!(error(&mut c, cycle).0, 3636);
    // The same, from a prepared statement.
    let e = c.exec_drop(cycle, ()).expect_err("prepared");
    assert!(
        matches!(e, mysql::Error::MySqlError(ref m) if m.code == 3636),
        "{e:?}"
    );
    // SET GLOBAL: a new connection takes it; one with its own value keeps it.
    query_rows(&mut c, "SET GLOBAL cte_max_recursion_depth = 20").expect("set global");
    let mut d = connect(&ladle.url(), Some("rec")).expect("connect");
    assert_eq!(scalar(&mut d, "SELECT @@cte_max_recursion_depth"), "20");
    assert_eq!(error(&mut d, &series(21)).0, 3636);
    assert_eq!(scalar(&mut c, &series(40)), "40");
    query_rows(&mut c, "SET GLOBAL cte_max_recursion_depth = DEFAULT").expect("set global");
    assert_eq!(scalar(&mut d, "SELECT @@cte_max_recursion_depth"), "1000");
    // With no iteration limit, max_execution_time stops it (3024).
    query_rows(&mut d, "SET SESSION cte_max_recursion_depth = 4294967295").expect("set");
    query_rows(&mut d, "SET SESSION max_execution_time = 300").expect("set");
    let endless =
        "WITH RECURSIVE c (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c) SELECT COUNT(*) FROM c";
    assert_eq!(error(&mut d, endless).0, 3024);
    query_rows(&mut d, "SET SESSION max_execution_time = 0").expect("set");
    // Out of range: clamped, as in MySQL.
    query_rows(&mut d, "SET SESSION cte_max_recursion_depth = -5").expect("set");
    assert_eq!(scalar(&mut d, "SELECT @@cte_max_recursion_depth"), "0");
    assert_eq!(error(&mut d, &series(2)).0, 3636);
}

#[test]
fn prepared_parameters_reach_inside_the_cte() {
    let (_server, mut c) = server();
    let sql = "WITH RECURSIVE c (n) AS (SELECT ? UNION ALL SELECT n + ? FROM c WHERE n < ?) \
               SELECT n FROM c ORDER BY n";
    let stmt = c.prep(sql).expect("prepare");
    let got: Vec<i64> = c.exec(&stmt, (1, 1, 4)).expect("execute");
    assert_eq!(got, vec![1, 2, 3, 4]);
    let got: Vec<i64> = c.exec(&stmt, (10, 5, 20)).expect("execute");
    assert_eq!(got, vec![10, 15, 20]);
}

#[test]
fn restrictions_give_mysqls_errors() {
    let (_server, mut c) = server();
    query_rows(&mut c, "CREATE TABLE t (a INT)").expect("create");
    let w = |body: &str| format!("WITH RECURSIVE c (n) AS ({body}) SELECT * FROM c");
    for (body, code) in [
        ("SELECT n FROM c", 3573),
        ("SELECT n FROM c UNION ALL SELECT 1", 3574),
        ("SELECT 1 UNION ALL SELECT MAX(n) FROM c", 3575),
        (
            "SELECT 1 UNION ALL SELECT t.a FROM t LEFT JOIN c ON t.a = c.n",
            3576,
        ),
        (
            "SELECT 1 UNION ALL SELECT x.n FROM c AS x JOIN c AS y ON x.n = y.n",
            3577,
        ),
        (
            "SELECT 1 UNION ALL SELECT a FROM t WHERE a IN (SELECT n FROM c)",
            3577,
        ),
        (
            "SELECT 1 UNION ALL SELECT n + 1 FROM c ORDER BY n LIMIT 3",
            1235,
        ),
    ] {
        assert_eq!(error(&mut c, &w(body)).0, code, "{body}");
    }
    // Computed per execution only where a statement reads it: not in a
    // view, nor nested in a derived table (1235; MySQL allows both).
    let series = "WITH RECURSIVE c (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 3) \
                  SELECT n FROM c";
    let view = format!("CREATE VIEW v AS {series}");
    assert_eq!(error(&mut c, &view).0, 1235);
    let derived = format!("SELECT * FROM ({series}) AS d");
    assert_eq!(error(&mut c, &derived).0, 1235);
    // In a DELETE's subquery it is read like any SELECT.
    query_rows(&mut c, "INSERT INTO t VALUES (1), (5)").expect("insert");
    query_rows(&mut c, &format!("DELETE FROM t WHERE a IN ({series})")).expect("delete");
    assert_eq!(scalar(&mut c, "SELECT GROUP_CONCAT(a) FROM t"), "5");
    // The anchor's type bounds the recursive rows (strict mode).
    let grow = "WITH RECURSIVE s (t) AS (SELECT 'a' UNION ALL SELECT CONCAT(t, 'a') FROM s \
                WHERE LENGTH(t) < 4) SELECT t FROM s";
    assert_eq!(error(&mut c, grow).0, 1406);
}

#[test]
fn a_repeatable_read_transaction_reads_its_own_writes() {
    let (_server, mut c) = server();
    query_rows(&mut c, "CREATE TABLE e (a INT, b INT)").expect("create");
    query_rows(&mut c, "INSERT INTO e VALUES (1, 2), (2, 3)").expect("insert");
    let reach = "WITH RECURSIVE r (n) AS (SELECT 1 UNION SELECT e.b FROM e JOIN r ON e.a = r.n) \
                 SELECT COUNT(*) FROM r";
    query_rows(
        &mut c,
        "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ",
    )
    .expect("set");
    query_rows(&mut c, "BEGIN").expect("begin");
    assert_eq!(scalar(&mut c, reach), "3");
    // Another connection's commit is not seen; the transaction's own is.
    let mut other = connect(&_server.url(), Some("rec")).expect("connect");
    query_rows(&mut other, "INSERT INTO e VALUES (3, 4)").expect("insert");
    assert_eq!(scalar(&mut c, reach), "3");
    query_rows(&mut c, "INSERT INTO e VALUES (3, 5)").expect("insert");
    assert_eq!(scalar(&mut c, reach), "4");
    query_rows(&mut c, "COMMIT").expect("commit");
    assert_eq!(scalar(&mut c, reach), "5");
}

#[test]
fn executions_leave_no_tables_or_views_behind() {
    let (_server, mut c) = server();
    query_rows(&mut c, "CREATE TABLE t (id INT PRIMARY KEY, parent INT)").expect("create");
    query_rows(&mut c, "INSERT INTO t VALUES (1, NULL), (2, 1), (3, 2)").expect("insert");
    let walk = "WITH RECURSIVE w (id) AS (SELECT id FROM t WHERE parent IS NULL UNION ALL \
                SELECT t.id FROM t JOIN w ON t.parent = w.id) SELECT COUNT(*) FROM w JOIN t ON t.id = w.id";
    assert_eq!(scalar(&mut c, walk), "3");
    let views = |c: &mut mysql::Conn| {
        let (rows, _) = query_rows(c, "SHOW VIEWS").expect("show views");
        rows.expect("rows").len()
    };
    let before = views(&mut c);
    for _ in 0..30 {
        assert_eq!(scalar(&mut c, walk), "3");
    }
    // A failing execution cleans up too.
    query_rows(&mut c, "SET SESSION cte_max_recursion_depth = 2").expect("set");
    let _ = error(&mut c, walk);
    assert_eq!(views(&mut c), before);
    let (tables, _) = query_rows(&mut c, "SHOW TABLES").expect("show tables");
    assert_eq!(tables.expect("rows").len(), 1);
}
