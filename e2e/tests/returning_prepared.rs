//! `INSERT ... RETURNING` as a server-side prepared statement (binary
//! protocol: COM_STMT_PREPARE + COM_STMT_EXECUTE, which the sqllogictest
//! harness uses for SELECTs only): the rows carry the AUTO_INCREMENT values
//! the write generated, and a RETURNING expression that fails for a row
//! fails the statement with nothing of it written, autocommit or inside a
//! transaction (where the earlier statements stay). Run against Ladle, and
//! against MariaDB too when `LADLE_TEST_MARIADB_URL` is set: both must
//! give the answers written here (taken from MariaDB).

use ladle_e2e::{connect, exec_rows_with, fresh_database, on_mariadb_and_ladle, query_rows};
use mysql::Value;

const DB: &str = "ladle_returning_prepared";

const INSERT_TWO: &str = "INSERT INTO t (v) VALUES (?), (?) RETURNING id, v + 1";

/// A value past which `v + 1` is out of BIGINT's range (1690).
const BIGGEST: i64 = i64::MAX;

/// `sql` executed as a prepared statement with `params`: its rows.
fn rows(c: &mut mysql::Conn, sql: &str, params: &[i64]) -> Vec<Vec<String>> {
    let params = params.iter().map(|&p| Value::Int(p)).collect();
    let (rows, _) = exec_rows_with(c, sql, params).unwrap_or_else(|e| panic!("{sql}: {e}"));
    rows.expect("a result set")
}

/// The MySQL error code of `sql` executed with `params` (panics if it
/// succeeds).
fn error_code(c: &mut mysql::Conn, sql: &str, params: &[i64]) -> u16 {
    let params = params.iter().map(|&p| Value::Int(p)).collect();
    match exec_rows_with(c, sql, params) {
        Err(mysql::Error::MySqlError(e)) => e.code,
        other => panic!("{sql}: expected an error, got {other:?}"),
    }
}

/// A text-protocol query's rows.
fn query(c: &mut mysql::Conn, sql: &str) -> Vec<Vec<String>> {
    let (rows, _) = query_rows(c, sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    rows.unwrap_or_default()
}

fn table(list: &[&[&str]]) -> Vec<Vec<String>> {
    list.iter()
        .map(|r| r.iter().map(|v| v.to_string()).collect())
        .collect()
}

fn check(url: &str) {
    fresh_database(url, DB).expect("fresh database");
    let mut c = connect(url, Some(DB)).expect("connect");
    query(
        &mut c,
        "CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, v BIGINT)",
    );
    assert_eq!(
        rows(&mut c, INSERT_TWO, &[1, 2]),
        table(&[&["1", "2"], &["2", "3"]])
    );
    // The second row's RETURNING fails: neither row is written, their ids
    // are used up, and LAST_INSERT_ID() is the first row's.
    assert_eq!(error_code(&mut c, INSERT_TWO, &[3, BIGGEST]), 1690);
    assert_eq!(query(&mut c, "SELECT LAST_INSERT_ID()"), table(&[&["3"]]));
    assert_eq!(query(&mut c, "SELECT COUNT(*) FROM t"), table(&[&["2"]]));
    query(&mut c, "BEGIN");
    assert_eq!(
        rows(&mut c, "INSERT INTO t (v) VALUES (?) RETURNING id, v", &[5]),
        table(&[&["5", "5"]])
    );
    assert_eq!(error_code(&mut c, INSERT_TWO, &[6, BIGGEST]), 1690);
    assert_eq!(query(&mut c, "SELECT LAST_INSERT_ID()"), table(&[&["6"]]));
    query(&mut c, "COMMIT");
    assert_eq!(
        query(&mut c, "SELECT id, v FROM t ORDER BY id"),
        table(&[&["1", "1"], &["2", "2"], &["5", "5"]])
    );
    query(&mut c, &format!("DROP DATABASE {DB}"));
}

#[test]
fn prepared_insert_returning_writes_nothing_when_returning_fails() {
    on_mariadb_and_ladle(check);
}
