//! Result-set column metadata as a client reads it from the wire (type,
//! length, decimals, UNSIGNED), over the text and the binary protocol, for
//! expressions whose type MariaDB derives from their operands: COALESCE,
//! IFNULL, IF, GREATEST and CASE over signed beside unsigned integers (a
//! DECIMAL), over integers beside DECIMALs (a DECIMAL only as wide as its
//! operands), `CAST(x AS SIGNED/UNSIGNED)` (an INT or a BIGINT as wide as
//! the operand), numbers as written (as wide as their digits), and dates
//! and times read as text (as long as they print). Run against Ladle, and
//! against MariaDB too when `LADLE_TEST_MARIADB_URL` is set: both must give
//! the answers written here (taken from MariaDB). Issue #15.

use ladle_e2e::{connect, fresh_database, on_mariadb_and_ladle};
use mysql::consts::{ColumnFlags, ColumnType};
use mysql::prelude::Queryable;

const DB: &str = "ladle_result_metadata";

/// (type, length, decimals, unsigned) of one column.
type Meta = (ColumnType, u32, u8, bool);

fn meta_of(columns: &[mysql::Column]) -> Vec<Meta> {
    columns
        .iter()
        .map(|c| {
            (
                c.column_type(),
                c.column_length(),
                c.decimals(),
                c.flags().contains(ColumnFlags::UNSIGNED_FLAG),
            )
        })
        .collect()
}

/// `sql`'s column metadata over the text protocol, checked equal over the
/// binary one.
fn metadata(c: &mut mysql::Conn, sql: &str) -> Vec<Meta> {
    let text = {
        let result = c.query_iter(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
        meta_of(result.columns().as_ref())
    };
    let binary = {
        let result = c
            .exec_iter(sql, ())
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        meta_of(result.columns().as_ref())
    };
    assert_eq!(text, binary, "{sql}: text and binary protocol differ");
    text
}

fn check(url: &str) {
    use ColumnType::{MYSQL_TYPE_LONG as LONG, MYSQL_TYPE_LONGLONG as LONGLONG};
    use ColumnType::{MYSQL_TYPE_NEWDECIMAL as DECIMAL, MYSQL_TYPE_TINY as TINY};
    fresh_database(url, DB).expect("fresh database");
    let mut c = connect(url, Some(DB)).expect("connect");
    c.query_drop(
        "CREATE TABLE t (i INT, u INT UNSIGNED, bi BIGINT, bu BIGINT UNSIGNED, \
         ti TINYINT, tu TINYINT UNSIGNED, b8 BIT(8), d DECIMAL(10,3), m MEDIUMINT, \
         s VARCHAR(10))",
    )
    .expect("create");
    c.query_drop("INSERT INTO t VALUES (-3, 3, -5, 5, -1, 1, 7, 1.5, -2, '12')")
        .expect("insert");
    // Signed beside unsigned: a DECIMAL of the widest one's digits.
    assert_eq!(
        metadata(
            &mut c,
            "SELECT COALESCE(i, u), COALESCE(bi, bu), IFNULL(ti, tu), COALESCE(ti, bu), \
             COALESCE(b8, i), IF(i > 0, i, u), GREATEST(i, u), \
             CASE WHEN i > 0 THEN i ELSE u END FROM t"
        ),
        vec![
            (DECIMAL, 11, 0, false),
            (DECIMAL, 21, 0, false),
            (DECIMAL, 4, 0, false),
            (DECIMAL, 21, 0, false),
            (DECIMAL, 11, 0, false),
            (DECIMAL, 11, 0, false),
            (DECIMAL, 11, 0, false),
            (DECIMAL, 11, 0, false),
        ]
    );
    // Unsigned beside unsigned stays an unsigned integer.
    assert_eq!(
        metadata(&mut c, "SELECT COALESCE(b8, u), COALESCE(tu, tu) FROM t"),
        vec![(LONG, 10, 0, true), (TINY, 3, 0, true)]
    );
    // Integers beside DECIMALs: the most digits before the point, the
    // largest scale.
    assert_eq!(
        metadata(
            &mut c,
            "SELECT COALESCE(i, d), IFNULL(u, d), COALESCE(m, d), COALESCE(bi, d), \
             COALESCE(bu, d), COALESCE(ti, d), COALESCE(i, 1.5) FROM t"
        ),
        vec![
            (DECIMAL, 15, 3, false),
            (DECIMAL, 15, 3, false),
            (DECIMAL, 13, 3, false),
            (DECIMAL, 24, 3, false),
            (DECIMAL, 25, 3, false),
            (DECIMAL, 12, 3, false),
            (DECIMAL, 13, 1, false),
        ]
    );
    // CAST AS SIGNED/UNSIGNED: as wide as the operand, an INT while it
    // fits one.
    assert_eq!(
        metadata(
            &mut c,
            "SELECT CAST(i AS SIGNED), CAST(u AS UNSIGNED), CAST(s AS SIGNED), \
             CAST(d AS SIGNED), CAST(1 AS SIGNED), CAST('1' AS UNSIGNED), \
             CAST(bu AS UNSIGNED), CAST(ti AS SIGNED) FROM t"
        ),
        vec![
            (LONGLONG, 11, 0, false),
            (LONG, 10, 0, true),
            (LONGLONG, 10, 0, false),
            (LONGLONG, 12, 0, false),
            (LONG, 2, 0, false),
            (LONG, 1, 0, true),
            (LONGLONG, 20, 0, true),
            (LONG, 4, 0, false),
        ]
    );
    // A number as written is typed by its digits, with or without FROM
    // (`0.5` is DECIMAL(2,1): its 0 counts; `0` is INT(1)).
    for from in ["", " FROM t"] {
        assert_eq!(
            metadata(
                &mut c,
                &format!("SELECT 1.50, 123456789012.5, 0.5, -0.5, 0.05, 0, -1{from}")
            ),
            vec![
                (DECIMAL, 5, 2, false),
                (DECIMAL, 15, 1, false),
                (DECIMAL, 4, 1, false),
                (DECIMAL, 4, 1, false),
                (DECIMAL, 5, 2, false),
                (LONG, 1, 0, false),
                (LONG, 2, 0, false),
            ],
            "SELECT ...{from}"
        );
    }
    // A display width does not narrow them: INT(3) holds 123456.
    c.query_drop("CREATE TABLE w (c INT(3), tu TINYINT(1) UNSIGNED)")
        .expect("create");
    c.query_drop("INSERT INTO w VALUES (123456, 200)")
        .expect("insert");
    let sql = "SELECT CAST(c AS SIGNED), CAST(tu AS UNSIGNED), COALESCE(c, 1.5) FROM w";
    assert_eq!(
        metadata(&mut c, sql),
        vec![
            (LONGLONG, 11, 0, false),
            (LONG, 3, 0, true),
            (DECIMAL, 13, 1, false),
        ]
    );
    let row: Option<(String, String, String)> = c.query_first(sql).expect("select");
    assert_eq!(
        row,
        Some(("123456".into(), "200".into(), "123456.0".into()))
    );
    // A date or time read as text is as long as it prints (utf8mb4: four
    // bytes a character): DATETIME 19 characters, DATETIME(3) 23.
    c.query_drop("CREATE TABLE tt (dt DATETIME, d3 DATETIME(3), da DATE, v VARCHAR(10))")
        .expect("create");
    c.query_drop(
        "INSERT INTO tt VALUES ('2020-01-01', '2020-01-01 00:00:00.5', '2020-01-01', 'x')",
    )
    .expect("insert");
    let text = |len: u32| (ColumnType::MYSQL_TYPE_VAR_STRING, len, 39, false);
    assert_eq!(
        metadata(
            &mut c,
            "SELECT IFNULL(dt, v), CONCAT(dt, ''), COALESCE(d3, 'abc'), IFNULL(v, da), \
             CONCAT(d3) FROM tt"
        ),
        vec![text(76), text(76), text(92), text(40), text(92)]
    );
    c.query_drop(format!("DROP DATABASE {DB}")).expect("drop");
}

#[test]
fn derived_types_match_mariadb_metadata() {
    on_mariadb_and_ladle(check);
}
