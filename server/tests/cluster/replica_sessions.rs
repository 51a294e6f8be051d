//! What a replica's client runs must behave as on the primary: SQL-level
//! and binary-protocol prepared writes, the session's TEMPORARY tables
//! (which live on the primary), and the other statement forms a
//! replica's client may send (INSERT ... SELECT, REPLACE, multi-table
//! UPDATE and DELETE, locking reads in a transaction, savepoints, user
//! variables, LAST_INSERT_ID()). Each statement runs on the primary and
//! through a replica that applies each entry late, and the answers must
//! be the same (reads right after writes included).

use mysql::prelude::*;
use mysql::Conn;

use super::{etcd_installed, metric, start_etcd, test_dir, transcript, Node};

/// The forwarded statements the replica has had answered.
const ANSWERED: &str = "ladle_cluster_forwarded_total{outcome=\"answered\"}";

/// Each statement, `{T}` standing for the session's table and `{T}_b` for
/// a second one; the primary's session and the replica's must see the
/// same answers and SHOW WARNINGS.
const SCRIPT: &[&str] = &[
    "USE rep",
    "INSERT INTO {T}_b VALUES (1, 'one'), (2, 'two'), (3, 'three')",
    // SQL-level prepared writes, and a prepared read.
    "SET @v = 'x', @n = 5",
    "PREPARE ins FROM 'INSERT INTO {T} (v, n) VALUES (?, ?)'",
    "EXECUTE ins USING @v, @n",
    "SELECT LAST_INSERT_ID(), ROW_COUNT()",
    "SELECT id, v, n FROM {T} ORDER BY id",
    "SET @n = 6",
    "EXECUTE ins USING @v, @n",
    "EXECUTE ins USING @v, @n",
    "PREPARE upd FROM 'UPDATE {T} SET v = ? WHERE n >= ?'",
    "SET @v = 'y'",
    "EXECUTE upd USING @v, 5",
    "SELECT ROW_COUNT()",
    "SELECT v, n FROM {T} ORDER BY n",
    "PREPARE sel FROM 'SELECT v FROM {T} WHERE n = ?'",
    "EXECUTE sel USING @n",
    "PREPARE del FROM 'DELETE FROM {T} WHERE n = ?'",
    "EXECUTE del USING @n",
    "SET @n = 5",
    "EXECUTE ins USING @v, @n",
    "SELECT ROW_COUNT()",
    "EXECUTE sel USING @n",
    "SELECT COUNT(*) FROM {T}",
    "DEALLOCATE PREPARE ins",
    "EXECUTE ins USING @v, @n",
    // The session's TEMPORARY tables.
    "CREATE TEMPORARY TABLE u (a INT, n INT)",
    "INSERT INTO u VALUES (1, 5), (2, 6)",
    "SELECT * FROM u ORDER BY a",
    "SELECT u.a, t.v FROM u JOIN {T} t ON t.n = u.n ORDER BY u.a",
    "SELECT u.a, b.w FROM u, {T}_b b WHERE b.id = u.a ORDER BY u.a",
    "UPDATE u SET a = a + 10 WHERE n = 6",
    "SELECT a FROM u ORDER BY a",
    "SELECT COUNT(*) FROM rep.u",
    "SHOW CREATE TABLE u",
    "PREPARE tsel FROM 'SELECT a FROM u WHERE n = ?'",
    "EXECUTE tsel USING @n",
    "INSERT INTO {T} (v, n) SELECT 'tmp', a FROM u",
    "SELECT v, n FROM {T} ORDER BY n",
    "DROP TEMPORARY TABLE u",
    "SELECT * FROM u",
    // Other statement forms.
    "INSERT INTO {T} (v, n) SELECT w, id + 100 FROM {T}_b",
    "SELECT LAST_INSERT_ID(), ROW_COUNT()",
    "REPLACE INTO {T}_b VALUES (1, 'uno'), (4, 'four')",
    "SELECT ROW_COUNT()",
    "UPDATE {T} t JOIN {T}_b b ON t.n = b.id + 100 SET t.v = b.w",
    "SELECT v, n FROM {T} ORDER BY n",
    "DELETE t FROM {T} t JOIN {T}_b b ON t.n = b.id + 100 WHERE b.id = 2",
    "SELECT n FROM {T} ORDER BY n",
    "BEGIN",
    "SELECT w FROM {T}_b WHERE id = 3 FOR UPDATE",
    "UPDATE {T}_b SET w = 'tres' WHERE id = 3",
    "COMMIT",
    "SELECT w FROM {T}_b ORDER BY id",
    "BEGIN",
    "SAVEPOINT sp",
    "INSERT INTO {T}_b VALUES (5, 'five')",
    "ROLLBACK TO SAVEPOINT sp",
    "INSERT INTO {T}_b VALUES (6, 'six')",
    "COMMIT",
    "SELECT id FROM {T}_b ORDER BY id",
    // Prepared statements are the session's here, also while its
    // transaction runs on the primary.
    "PREPARE ins FROM 'INSERT INTO {T}_b VALUES (?, ?)'",
    "BEGIN",
    "INSERT INTO {T}_b VALUES (9, 'nine')",
    "EXECUTE ins USING 10, 'ten'",
    "PREPARE cnt FROM 'SELECT COUNT(*) FROM {T}_b'",
    "EXECUTE cnt",
    "COMMIT",
    "EXECUTE cnt",
    "DEALLOCATE PREPARE cnt",
    // TEMPORARY tables in transactions.
    "CREATE TEMPORARY TABLE u2 (a INT)",
    "BEGIN",
    "INSERT INTO u2 VALUES (1)",
    "SELECT COUNT(*) FROM u2",
    "ROLLBACK",
    "SELECT COUNT(*) FROM u2",
    "BEGIN",
    "SELECT COUNT(*) FROM u2",
    "INSERT INTO {T}_b VALUES (11, 'eleven')",
    "SELECT COUNT(*) FROM u2",
    "COMMIT",
    // A failed write opens the transaction on the primary too; the
    // client's COMMIT must end it there.
    "BEGIN",
    "INSERT INTO {T}_b VALUES (1, 'dup')",
    "COMMIT",
    "INSERT INTO {T}_b VALUES (8, 'eight')",
    "SELECT @@in_transaction",
    "INSERT INTO {T}_b VALUES (8, 'dup') ON DUPLICATE KEY UPDATE w = 'ocho'",
    "SELECT w FROM {T}_b WHERE id = 8",
    "/* a comment */ INSERT INTO {T}_b VALUES (12, 'comment')",
    "-- a comment\nUPDATE {T}_b SET w = 'twelve' WHERE id = 12",
    "SELECT w FROM {T}_b WHERE id = 12",
    "SELECT 1; INSERT INTO {T}_b VALUES (13, 'multi')",
    "SELECT w FROM {T}_b WHERE id = 13",
    "WITH c AS (SELECT 13 AS id) DELETE FROM {T}_b WHERE id IN (SELECT id FROM c)",
    "SELECT w FROM {T}_b WHERE id = 13",
    "INSERT INTO {T} (v, n) VALUES ('ai', 400)",
    "SELECT AUTO_INCREMENT, TABLE_ROWS FROM information_schema.TABLES \
     WHERE TABLE_SCHEMA = 'rep' AND TABLE_NAME = '{T}'",
    "INSERT INTO {T} (v, n) VALUES ('ai', 401)",
    "SHOW CREATE TABLE {T}",
    "CREATE TEMPORARY TABLE u3 (a INT)",
    "INSERT INTO u3 VALUES (1), (2)",
    "SET @c = (SELECT COUNT(*) FROM u3)",
    "SELECT @c",
    "SELECT COUNT(*) INTO @d FROM u3",
    "SELECT @d",
    "TRUNCATE TABLE u3",
    "SELECT COUNT(*) FROM u3",
    "SELECT 1; SELECT COUNT(*) FROM u3",
    "SET @k = 7",
    "INSERT INTO {T}_b VALUES (@k, CONCAT('n', @k))",
    "SELECT * FROM {T}_b WHERE id = @k",
    // A TEMPORARY table shadows a base table of its name, also for a
    // text the replica answered from its views before.
    "SELECT COUNT(*) FROM {T}_b",
    "SELECT COUNT(*) FROM {T}_b",
    "CREATE TEMPORARY TABLE {T}_b (id INT)",
    "SELECT COUNT(*) FROM {T}_b",
    "DROP TEMPORARY TABLE {T}_b",
    "SELECT COUNT(*) FROM {T}_b",
    "CREATE TABLE {T}_c AS SELECT id, w FROM {T}_b WHERE id < 4",
    "SELECT * FROM {T}_c ORDER BY id",
    "CREATE TEMPORARY TABLE u7 AS SELECT id * 2 AS d FROM {T}_b",
    "SELECT COUNT(*), SUM(d) FROM u7",
    "CREATE TABLE {T}_d AS SELECT id DIV 0 AS x FROM {T}_b",
    "CREATE TEMPORARY TABLE u5 LIKE {T}_b",
    "INSERT INTO u5 SELECT * FROM {T}_b WHERE id < 4",
    "CREATE TEMPORARY TABLE u6 LIKE {T}_b",
    "INSERT INTO u6 SELECT * FROM u5",
    "ALTER TABLE u6 ADD COLUMN x INT DEFAULT 9",
    "DESCRIBE u6",
    "SHOW COLUMNS FROM u5",
    "SELECT * FROM u6 ORDER BY id",
    "USE mysql",
    "SELECT COUNT(*) FROM rep.u6",
    "USE rep",
    "SET autocommit = 0",
    "DELETE FROM u6 WHERE id = 1",
    "SELECT COUNT(*) FROM u6",
    "ROLLBACK",
    "SELECT COUNT(*) FROM u6",
    "SET autocommit = 1",
    "INSERT INTO u6 (id, w) VALUES (20, 'x'); SELECT COUNT(*) FROM u6",
    "SELECT COUNT(*) FROM u6",
    "DROP TEMPORARY TABLE u5, u6",
    "INSERT INTO {T} (v, n) VALUES ('last', 200)",
    "SELECT LAST_INSERT_ID() = (SELECT MAX(id) FROM {T})",
];

/// A replica's client runs [`SCRIPT`] as the primary's does, prepared
/// statements of the binary protocol too, and its prepared SELECT of a
/// base table is answered by the replica itself.
#[test]
fn a_replicas_client_runs_statements_as_on_the_primary() {
    if !etcd_installed() {
        eprintln!("SKIPPED replica sessions test: `etcd` is not installed");
        return;
    }
    let temp = test_dir();
    let etcd = start_etcd(temp.path());
    let url = etcd.url();
    let mut nodes: Vec<Node> = (1..=3).map(|id| Node::new(id, temp.path())).collect();
    let (mut direct, mut forwarded) = super::start_with_a_late_replica(&mut nodes, &url);
    direct.query_drop("CREATE DATABASE rep").unwrap();
    for table in ["t_direct", "t_fwd"] {
        direct
            .query_drop(format!(
                "CREATE TABLE rep.{table} (id INT AUTO_INCREMENT PRIMARY KEY, \
                 v VARCHAR(10), n INT UNIQUE)"
            ))
            .unwrap();
        direct
            .query_drop(format!(
                "CREATE TABLE rep.{table}_b (id INT PRIMARY KEY, w VARCHAR(10))"
            ))
            .unwrap();
    }
    super::wait_for("the replica to hold the tables", || {
        forwarded.query_drop("SELECT * FROM rep.t_fwd_b").ok()
    });
    let mut differ = Vec::new();
    for sql in SCRIPT {
        let want = transcript(&mut direct, sql, "t_direct");
        let got = transcript(&mut forwarded, sql, "t_fwd");
        if got != want {
            differ.push(format!(
                "on the primary:    {want}\nthrough a replica: {got}"
            ));
        }
    }
    assert!(
        differ.is_empty(),
        "answers through the replica differ from the primary's:\n{}",
        differ.join("\n")
    );
    // A prepared SELECT of a base table stays on the replica.
    let before = metric(&nodes[2], ANSWERED);
    let v: Option<String> = forwarded
        .query_first("EXECUTE sel USING 200")
        .expect("the prepared read");
    assert_eq!(v.as_deref(), Some("last"));
    assert_eq!(metric(&nodes[2], ANSWERED), before, "a read was forwarded");
    binary_protocol_writes(&mut direct, &mut forwarded);
    // Every write through the replica is committed: another session on
    // the primary reads the same rows in both tables.
    let mut other = Conn::new(nodes[0].opts()).expect("connect to the primary");
    for table in ["{T}", "{T}_b", "{T}_c"] {
        let mut rows = |name: &str| -> Vec<mysql::Row> {
            let sql = format!(
                "SELECT * FROM rep.{} ORDER BY id",
                table.replace("{T}", name)
            );
            other.query(sql).unwrap()
        };
        let (want, got) = (rows("t_direct"), rows("t_fwd"));
        let show = |rows: Vec<mysql::Row>| -> Vec<Vec<mysql::Value>> {
            rows.into_iter().map(mysql::Row::unwrap).collect()
        };
        assert_eq!(show(got), show(want), "{table}'s committed rows");
    }
    drop(etcd);
}

/// COM_STMT_PREPARE / COM_STMT_EXECUTE writes through the replica: the
/// same affected rows and insert ids as on the primary, and the next
/// (prepared) read sees each write; a TEMPORARY table's too.
fn binary_protocol_writes(direct: &mut Conn, forwarded: &mut Conn) {
    let run = |c: &mut Conn, table: &str| -> Vec<String> {
        let mut seen = Vec::new();
        let ins = c
            .prep(format!("INSERT INTO rep.{table} (v, n) VALUES (?, ?)"))
            .unwrap();
        let upd = c
            .prep(format!("UPDATE rep.{table} SET v = ? WHERE n = ?"))
            .unwrap();
        let del = c
            .prep(format!("DELETE FROM rep.{table} WHERE n = ?"))
            .unwrap();
        let read = c
            .prep(format!("SELECT v FROM rep.{table} WHERE n = ?"))
            .unwrap();
        for n in 300..303 {
            c.exec_drop(&ins, ("b", n)).unwrap();
            let (affected, id) = (c.affected_rows(), c.last_insert_id());
            let v: Option<String> = c.exec_first(&read, (n,)).unwrap();
            seen.push(format!("insert affected={affected} id={id} read={v:?}"));
        }
        c.exec_drop(&upd, ("c", 301)).unwrap();
        let affected = c.affected_rows();
        let v: Option<String> = c.exec_first(&read, (301,)).unwrap();
        seen.push(format!("update affected={affected} read={v:?}"));
        c.exec_drop(&del, (302,)).unwrap();
        let affected = c.affected_rows();
        let v: Option<String> = c.exec_first(&read, (302,)).unwrap();
        seen.push(format!("delete affected={affected} read={v:?}"));
        // The session's TEMPORARY table, which lives on the primary.
        c.query_drop("CREATE TEMPORARY TABLE rep.u4 (a INT)")
            .unwrap();
        let ins = c.prep("INSERT INTO rep.u4 VALUES (?)").unwrap();
        let read = c.prep("SELECT a FROM rep.u4 WHERE a = ?").unwrap();
        c.exec_drop(&ins, (7,)).unwrap();
        let affected = c.affected_rows();
        let a: Option<i64> = c.exec_first(&read, (7,)).unwrap();
        seen.push(format!("temporary insert affected={affected} read={a:?}"));
        // A statement prepared (and read) before a TEMPORARY table
        // shadows its base table reads the temporary one after.
        let count = c
            .prep(format!("SELECT COUNT(*) FROM rep.{table}_b"))
            .unwrap();
        let before: Option<i64> = c.exec_first(&count, ()).unwrap();
        c.query_drop(format!("CREATE TEMPORARY TABLE rep.{table}_b (id INT)"))
            .unwrap();
        let after: Option<i64> = c.exec_first(&count, ()).unwrap();
        c.query_drop(format!("DROP TEMPORARY TABLE rep.{table}_b"))
            .unwrap();
        let again: Option<i64> = c.exec_first(&count, ()).unwrap();
        seen.push(format!("shadowed {before:?} {after:?} {again:?}"));
        seen
    };
    let want = run(direct, "t_direct");
    // (What the primary answered is what a client expects.)
    assert!(
        want[..3]
            .iter()
            .all(|l| l.starts_with("insert affected=1 ") && !l.contains(" id=0 "))
            && want[3] == "update affected=1 read=Some(\"c\")"
            && want[4] == "delete affected=1 read=None",
        "{want:?}"
    );
    let got = run(forwarded, "t_fwd");
    assert_eq!(
        got, want,
        "binary protocol: through the replica vs on the primary"
    );
}
