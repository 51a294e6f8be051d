//! Result columns of an INSERT's or DELETE's RETURNING named as MariaDB
//! names them: an expression by its text as written (`A+1`, not the
//! parser's `A + 1`), a column by its name. Run against Ladle, and
//! against MariaDB too when `LADLE_TEST_MARIADB_URL` is set: both must
//! give the answers written here (taken from MariaDB). Issue #15.

use ladle_e2e::{connect, fresh_database, on_mariadb_and_ladle};
use mysql::prelude::Queryable;

const NAMES_DB: &str = "ladle_returning_names";

/// The names of `sql`'s result columns.
fn names(c: &mut mysql::Conn, sql: &str) -> Vec<String> {
    let result = c.query_iter(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    let columns = result.columns();
    columns
        .as_ref()
        .iter()
        .map(|c| c.name_str().to_string())
        .collect()
}

/// An INSERT's or DELETE's RETURNING names its columns as a select list
/// does: an expression by its text as written, a column by its name.
fn check_returning_names(url: &str) {
    fresh_database(url, NAMES_DB).expect("fresh database");
    let mut c = connect(url, Some(NAMES_DB)).expect("connect");
    c.query_drop("CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, A INT, b VARCHAR(10))")
        .expect("create");
    assert_eq!(
        names(
            &mut c,
            "INSERT INTO t (A, b) VALUES (1, 'q') RETURNING id, A+1, concat(b,'x'), \
             a   +  1, `A` * 2 AS dbl, t.b, (A), A  IN (1,2)"
        ),
        [
            "id",
            "A+1",
            "concat(b,'x')",
            "a   +  1",
            "dbl",
            "b",
            "A",
            "A  IN (1,2)"
        ]
    );
    assert_eq!(
        names(
            &mut c,
            "DELETE FROM t WHERE id = 1 RETURNING id, A+1, concat( b , 'x' )"
        ),
        ["id", "A+1", "concat( b , 'x' )"]
    );
    c.query_drop(format!("DROP DATABASE {NAMES_DB}"))
        .expect("drop");
}

#[test]
fn returning_columns_are_named_as_written() {
    on_mariadb_and_ladle(check_returning_names);
}
