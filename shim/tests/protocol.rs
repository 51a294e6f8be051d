//! Protocol behaviour seen by a real client (`mysql_async`) against an
//! in-process front end over in-memory storage: the warning count in OK
//! packets, multi-statement COM_QUERY, unknown statement ids, TLS.

mod common;

use common::{raw_login, read_packet, self_signed, start, start_with, write_packet};
use mysql_async::prelude::*;
use mysql_async::Conn;

#[tokio::test]
async fn ok_packets_count_warnings() {
    let server = start().await;
    let mut c = server.connect().await;
    c.query_drop("CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(20))")
        .await
        .unwrap();
    c.query_drop(
        "INSERT IGNORE INTO items VALUES (1, 'a'), (1, 'b'), (2, 'c'), (2, 'd'), (3, 'e')",
    )
    .await
    .unwrap();
    assert_eq!(c.affected_rows(), 3);
    assert_eq!(c.get_warnings(), 2);
    let rows: Vec<(String, u16, String)> = c.query("SHOW WARNINGS").await.unwrap();
    assert_eq!(
        rows,
        vec![
            (
                "Warning".to_string(),
                1062,
                "Duplicate entry '1' for key 'PRIMARY'".to_string()
            ),
            (
                "Warning".to_string(),
                1062,
                "Duplicate entry '2' for key 'PRIMARY'".to_string()
            ),
        ]
    );

    // Through a prepared statement too.
    c.exec_drop("INSERT IGNORE INTO items VALUES (?, ?)", (3, "again"))
        .await
        .unwrap();
    assert_eq!((c.affected_rows(), c.get_warnings()), (0, 1));

    c.query_drop("DROP TABLE IF EXISTS nothing_here, nor_here")
        .await
        .unwrap();
    assert_eq!(c.get_warnings(), 1);
    c.query_drop("DROP DATABASE IF EXISTS no_such_db")
        .await
        .unwrap();
    assert_eq!(c.get_warnings(), 1);

    // A clean statement reports none.
    c.query_drop("INSERT INTO items VALUES (4, 'f')")
        .await
        .unwrap();
    assert_eq!(c.get_warnings(), 0);
}

#[tokio::test]
async fn multi_statement_queries_return_every_result() {
    let server = start().await;
    let mut c = server.connect().await;
    c.query_drop("CREATE TABLE n (id INT PRIMARY KEY, label VARCHAR(10))")
        .await
        .unwrap();

    // Rows, an OK, rows again: three results in order.
    let mut r = c
        .query_iter("SELECT 1 AS a; INSERT INTO n VALUES (1, 'x;y'), (2, 'z'); SELECT id, label FROM n ORDER BY id")
        .await
        .unwrap();
    let first: Vec<i64> = r.collect().await.unwrap();
    assert_eq!(first, vec![1]);
    let second: Vec<mysql_async::Row> = r.collect().await.unwrap();
    assert!(second.is_empty());
    assert_eq!(r.affected_rows(), 2);
    let third: Vec<(i64, String)> = r.collect().await.unwrap();
    assert_eq!(third, vec![(1, "x;y".to_string()), (2, "z".to_string())]);
    assert!(r.is_empty());
    drop(r);

    // An error ends the reply; the statements after it do not run.
    let mut r = c
        .query_iter("SELECT 10; SELECT * FROM no_such_table; INSERT INTO n VALUES (3, 'never')")
        .await
        .unwrap();
    let ten: Vec<i64> = r.collect().await.unwrap();
    assert_eq!(ten, vec![10]);
    let err = r.collect::<mysql_async::Row>().await.unwrap_err();
    match err {
        mysql_async::Error::Server(e) => assert_eq!(e.code, 1146),
        other => panic!("expected a server error, got {other:?}"),
    }
    drop(r);
    let count: Option<i64> = c.query_first("SELECT COUNT(*) FROM n").await.unwrap();
    assert_eq!(count, Some(2));

    // The connection is still in step after all that.
    let one: Option<i64> = c.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1));
}

#[tokio::test]
async fn unknown_statement_ids_get_1243_and_the_connection_lives_on() {
    let server = start().await;
    let mut s = raw_login(server.port).await;
    // COM_STMT_SEND_LONG_DATA for an unknown statement: no reply (as in
    // MySQL), and nothing breaks.
    write_packet(&mut s, 0, &[0x18, 77, 0, 0, 0, 0, 0, b'x']).await;
    // COM_STMT_EXECUTE: id 77, no cursor, one iteration.
    write_packet(&mut s, 0, &[0x17, 77, 0, 0, 0, 0, 1, 0, 0, 0]).await;
    let (seq, err) = read_packet(&mut s).await;
    assert_eq!((seq, err[0]), (1, 0xFF), "{err:?}");
    assert_eq!(u16::from_le_bytes([err[1], err[2]]), 1243);
    let message = String::from_utf8_lossy(&err[9..]).into_owned();
    assert_eq!(
        message,
        "Unknown prepared statement handler (77) given to mysqld_stmt_execute"
    );
    // COM_STMT_RESET of an unknown statement, too.
    write_packet(&mut s, 0, &[0x1A, 78, 0, 0, 0]).await;
    let (_, err) = read_packet(&mut s).await;
    assert_eq!(u16::from_le_bytes([err[1], err[2]]), 1243);
    // The connection still answers queries.
    write_packet(&mut s, 0, b"\x03SELECT 42").await;
    let (_, column_count) = read_packet(&mut s).await;
    assert_eq!(column_count, vec![1]);
}

/// The error number a failed connection attempt got from the server.
fn refused_with(r: Result<Conn, mysql_async::Error>) -> u16 {
    match r {
        Err(mysql_async::Error::Server(e)) => e.code,
        Err(other) => panic!("not a server error: {other}"),
        Ok(_) => panic!("connected"),
    }
}

/// `require_secure_transport` (settable by root only) refuses plaintext
/// logins with MySQL's 3159 (MariaDB 10.11 answers 1045); an account
/// `REQUIRE SSL` is refused over plaintext with 1045 (as MariaDB) and
/// logs in over TLS.
#[tokio::test]
async fn plaintext_logins_refused_when_tls_is_required() {
    let certs = tempfile::tempdir().unwrap();
    let (cert, key) = self_signed(certs.path());
    let config = ladle_shim::tls::server_config(&cert, &key).expect("tls config");
    let server = start_with(Some(config)).await;
    let ssl = || mysql_async::SslOpts::default().with_root_certs(vec![cert.clone().into()]);

    let mut root = Conn::new(server.opts().ssl_opts(Some(ssl())))
        .await
        .expect("TLS connect");
    root.query_drop("CREATE USER 'req'@'%' IDENTIFIED BY 'pw' REQUIRE SSL")
        .await
        .unwrap();
    root.query_drop("CREATE USER 'plain'@'%' IDENTIFIED BY 'pw'")
        .await
        .unwrap();
    let grants: Vec<String> = root.query("SHOW GRANTS FOR 'req'@'%'").await.unwrap();
    assert!(grants[0].ends_with(" REQUIRE SSL"), "{grants:?}");
    let as_user = |user: &str| server.opts().user(Some(user)).pass(Some("pw"));

    // REQUIRE SSL: refused in plaintext, served over TLS.
    assert_eq!(refused_with(Conn::new(as_user("req")).await), 1045);
    let mut req = Conn::new(as_user("req").ssl_opts(Some(ssl())))
        .await
        .expect("req over TLS");
    // Only root may require secure transport.
    let e = req
        .query_drop("SET GLOBAL require_secure_transport = ON")
        .await
        .unwrap_err();
    assert!(
        matches!(e, mysql_async::Error::Server(ref s) if s.code == 1227),
        "{e}"
    );
    req.disconnect().await.unwrap();
    let plain = Conn::new(as_user("plain"))
        .await
        .expect("plaintext allowed");
    plain.disconnect().await.unwrap();

    root.query_drop("SET GLOBAL require_secure_transport = ON")
        .await
        .unwrap();
    let on: Option<i64> = root
        .query_first("SELECT @@require_secure_transport")
        .await
        .unwrap();
    assert_eq!(on, Some(1));
    assert_eq!(refused_with(Conn::new(as_user("plain")).await), 3159);
    assert_eq!(refused_with(Conn::new(server.opts()).await), 3159);
    let plain = Conn::new(as_user("plain").ssl_opts(Some(ssl())))
        .await
        .expect("TLS still served");
    plain.disconnect().await.unwrap();

    root.query_drop("SET GLOBAL require_secure_transport = OFF")
        .await
        .unwrap();
    let plain = Conn::new(as_user("plain")).await.expect("plaintext again");
    plain.disconnect().await.unwrap();
    root.disconnect().await.unwrap();
}

#[tokio::test]
async fn tls_clients_and_plain_clients_both_connect() {
    let certs = tempfile::tempdir().unwrap();
    let (cert, key) = self_signed(certs.path());
    let config = ladle_shim::tls::server_config(&cert, &key).expect("tls config");
    let server = start_with(Some(config)).await;

    // A TLS client that verifies the server's certificate against our CA:
    // mysql_async refuses to go on in plain text once it asked for TLS.
    let ssl = mysql_async::SslOpts::default().with_root_certs(vec![cert.clone().into()]);
    let mut c = Conn::new(server.opts().ssl_opts(Some(ssl)))
        .await
        .expect("TLS connect");
    c.query_drop("CREATE DATABASE secure").await.unwrap();
    c.query_drop("USE secure").await.unwrap();
    c.query_drop("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))")
        .await
        .unwrap();
    c.exec_drop("INSERT INTO t VALUES (?, ?)", (1, "over tls"))
        .await
        .unwrap();
    let v: Option<String> = c
        .exec_first("SELECT v FROM t WHERE id = ?", (1,))
        .await
        .unwrap();
    assert_eq!(v.as_deref(), Some("over tls"));
    // Results patched by the front end still arrive whole under TLS.
    c.query_drop("INSERT IGNORE INTO t VALUES (1, 'dup')")
        .await
        .unwrap();
    assert_eq!(c.get_warnings(), 1);
    c.disconnect().await.unwrap();

    // TLS is offered, not required: a plain client is served too.
    let mut plain = Conn::new(server.opts().db_name(Some("secure")))
        .await
        .expect("plain connect");
    let n: Option<i64> = plain.query_first("SELECT COUNT(*) FROM t").await.unwrap();
    assert_eq!(n, Some(1));
    plain.disconnect().await.unwrap();

    let mut c = Conn::new(server.opts()).await.unwrap();
    let have_ssl: Option<(String, String)> = c
        .query_first("SHOW VARIABLES LIKE 'have_ssl'")
        .await
        .unwrap();
    assert_eq!(have_ssl.map(|(_, v)| v).as_deref(), Some("YES"));
    c.disconnect().await.unwrap();

    // A client that distrusts the certificate is refused by its own check.
    let wrong = mysql_async::SslOpts::default();
    assert!(Conn::new(server.opts().ssl_opts(Some(wrong)))
        .await
        .is_err());
}

/// What a pooled connection's next borrower must not inherit.
async fn assert_fresh_session(c: &mut Conn, other: &mut Conn) {
    let vars: Vec<(Option<i64>, i64, i64)> = c
        .query("SELECT @x, @@autocommit, LAST_INSERT_ID()")
        .await
        .unwrap();
    assert_eq!(vars, vec![(None, 1, 0)]);
    // SQL PREPARE's statements are gone (1243).
    match c.query_drop("EXECUTE sq USING 1").await {
        Err(mysql_async::Error::Server(e)) => assert_eq!(e.code, 1243, "{e:?}"),
        other => panic!("EXECUTE of a freed statement: {other:?}"),
    }
    // The abandoned transaction's row was rolled back, not committed.
    for conn in [c, other] {
        let n: Vec<i64> = conn.query("SELECT COUNT(*) FROM r").await.unwrap();
        assert_eq!(n, vec![0]);
    }
}

async fn dirty_session(c: &mut Conn) {
    c.query_drop("SET @x = 1").await.unwrap();
    c.query_drop("PREPARE sq FROM 'SELECT ?'").await.unwrap();
    let one: Vec<i64> = c.query("EXECUTE sq USING 1").await.unwrap();
    assert_eq!(one, vec![1]);
    c.query_drop("INSERT INTO seq (v) VALUES (1)")
        .await
        .unwrap();
    c.query_drop("SET autocommit = 0").await.unwrap();
    c.query_drop("INSERT INTO r VALUES (1)").await.unwrap();
}

#[tokio::test]
async fn reset_connection_and_change_user_reset_the_session() {
    let server = start().await;
    let mut c = server.connect().await;
    let mut other = server.connect().await;
    c.query_drop("CREATE TABLE r (id INT PRIMARY KEY)")
        .await
        .unwrap();
    c.query_drop("CREATE TABLE seq (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
        .await
        .unwrap();

    dirty_session(&mut c).await;
    assert!(c.reset().await.unwrap(), "COM_RESET_CONNECTION is used");
    assert_fresh_session(&mut c, &mut other).await;
    let db: Vec<Option<String>> = c.query("SELECT DATABASE()").await.unwrap();
    assert_eq!(db, vec![Some("t".to_string())], "the database is kept");

    dirty_session(&mut c).await;
    c.change_user(mysql_async::ChangeUserOpts::default())
        .await
        .unwrap();
    assert_fresh_session(&mut c, &mut other).await;

    // MariaDB does the same (the assertions above hold there too).
    if let Ok(url) = std::env::var("LADLE_TEST_MARIADB_URL") {
        let opts = mysql_async::Opts::from_url(&url).unwrap();
        let mut m = Conn::new(opts.clone()).await.unwrap();
        m.query_drop("CREATE DATABASE IF NOT EXISTS ladle_proto_reset")
            .await
            .unwrap();
        m.query_drop("USE ladle_proto_reset").await.unwrap();
        m.query_drop("DROP TABLE IF EXISTS r, seq").await.unwrap();
        m.query_drop("CREATE TABLE r (id INT PRIMARY KEY)")
            .await
            .unwrap();
        m.query_drop("CREATE TABLE seq (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
            .await
            .unwrap();
        let mut m_other = Conn::new(opts).await.unwrap();
        m_other.query_drop("USE ladle_proto_reset").await.unwrap();
        dirty_session(&mut m).await;
        assert!(m.reset().await.unwrap());
        assert_fresh_session(&mut m, &mut m_other).await;
        dirty_session(&mut m).await;
        m.change_user(
            mysql_async::ChangeUserOpts::default().with_db_name(Some("ladle_proto_reset".into())),
        )
        .await
        .unwrap();
        assert_fresh_session(&mut m, &mut m_other).await;
        m.query_drop("DROP DATABASE ladle_proto_reset")
            .await
            .unwrap();
    }

    // A wrong password: 1045, and the connection is closed.
    let err = c
        .change_user(mysql_async::ChangeUserOpts::default().with_pass(Some("wrong".into())))
        .await
        .unwrap_err();
    match err {
        mysql_async::Error::Server(e) => assert_eq!(e.code, 1045, "{e:?}"),
        other => panic!("{other:?}"),
    }
    assert!(c.query_drop("SELECT 1").await.is_err());
}

/// A table with one column of every type, and the statements reading it.
const EVERY_TYPE: &str = "CREATE TABLE every_type (
    id INT NOT NULL PRIMARY KEY,
    ti TINYINT, si SMALLINT, mi MEDIUMINT, i INT NOT NULL, bi BIGINT,
    ui INT UNSIGNED, ubi BIGINT UNSIGNED,
    f FLOAT, d DOUBLE, dec_c DECIMAL(10,2), dec_u DECIMAL(5,0),
    c CHAR(3), vc VARCHAR(20), tt TINYTEXT, tx TEXT, mt MEDIUMTEXT, lt LONGTEXT,
    b BINARY(4), vb VARBINARY(9), bl BLOB, lb LONGBLOB,
    dt DATE, dtm DATETIME, ts TIMESTAMP NULL, tm TIME, y YEAR,
    e ENUM('a', 'bcd'),
    flag TINYINT(1), w INT(5) UNSIGNED, dt6 DATETIME(6), tm3 TIME(3), ts2 TIMESTAMP(2) NULL
)";

/// Tables whose columns carry every key flag: primary (one column and
/// composite), UNIQUE (one column and composite), plain keys, AUTO_INCREMENT,
/// NOT NULL without a default, ON UPDATE CURRENT_TIMESTAMP.
const KEYED: [&str; 2] = [
    "CREATE TABLE keyed (id INT AUTO_INCREMENT PRIMARY KEY, a INT NOT NULL, b INT, c INT,
     d VARCHAR(5) NOT NULL DEFAULT 'x', e INT,
     ts TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
     UNIQUE KEY (b), KEY (c, e), UNIQUE KEY (a, d))",
    "CREATE TABLE pair (x INT, y INT NOT NULL, t1 TIMESTAMP NULL,
     t2 TIMESTAMP NOT NULL DEFAULT '2000-01-01 00:00:00', dt DATETIME DEFAULT CURRENT_TIMESTAMP,
     dt2 DATETIME ON UPDATE CURRENT_TIMESTAMP, z INT NOT NULL, PRIMARY KEY (x, y))",
];

/// The column metadata a statement's result carries: (name, type, flags,
/// length, decimals, character set).
async fn metadata(c: &mut Conn, sql: &str) -> Vec<(String, u8, u16, u32, u8, u16)> {
    let result = c.query_iter(sql).await.unwrap();
    let cols = result.columns().expect("a result set");
    let out = cols
        .iter()
        .map(|col| {
            (
                col.name_str().into_owned(),
                col.column_type() as u8,
                col.flags().bits(),
                col.column_length(),
                col.decimals(),
                col.character_set(),
            )
        })
        .collect();
    drop(result.drop_result().await);
    out
}

/// A connection to the MariaDB at `url` using database `db` (created if
/// missing) without an `every_type` table.
async fn mariadb_scratch(url: &str, db: &str) -> Conn {
    let mut maria = Conn::new(mysql_async::Opts::from_url(url).unwrap())
        .await
        .unwrap();
    maria
        .query_drop(format!("CREATE DATABASE IF NOT EXISTS {db}"))
        .await
        .unwrap();
    maria.query_drop(format!("USE {db}")).await.unwrap();
    maria
        .query_drop("DROP TABLE IF EXISTS every_type, keyed, pair")
        .await
        .unwrap();
    maria
}

/// An in-process Ladle and a connection to it, and a connection to the
/// MariaDB of `LADLE_TEST_MARIADB_URL` using database `db` (see
/// [`mariadb_scratch`]); `None` (the test is skipped) without that MariaDB.
async fn ladle_and_mariadb(db: &str) -> Option<(common::Server, Conn, Conn)> {
    let Ok(url) = std::env::var("LADLE_TEST_MARIADB_URL") else {
        eprintln!("LADLE_TEST_MARIADB_URL not set: skipped");
        return None;
    };
    let server = start().await;
    let ladle = server.connect().await;
    let maria = mariadb_scratch(&url, db).await;
    Some((server, ladle, maria))
}

/// Result column metadata agrees with MariaDB's for a table with every type
/// (when `LADLE_TEST_MARIADB_URL` names a MariaDB to compare with).
#[tokio::test]
async fn column_metadata_matches_mariadb() {
    let Some((_server, mut ladle, mut maria)) = ladle_and_mariadb("ladle_proto_meta").await else {
        return;
    };
    for c in [&mut ladle, &mut maria] {
        c.query_drop(EVERY_TYPE).await.unwrap();
        for sql in KEYED {
            c.query_drop(sql).await.unwrap();
        }
    }
    for sql in [
        "SELECT * FROM every_type",
        "SELECT * FROM every_type WHERE id = 1",
        "SELECT * FROM keyed",
        "SELECT * FROM keyed WHERE id = 1",
        "SELECT id AS renamed, b, keyed.c FROM keyed WHERE a = 2",
        "SELECT * FROM pair WHERE x = 1",
        "SELECT keyed.id, pair.x, pair.y FROM keyed LEFT JOIN pair ON pair.x = keyed.id",
        "SELECT c FROM keyed GROUP BY c",
        "SELECT * FROM (SELECT id, a FROM keyed) AS derived",
        // Constants the shim answers without a view: a CAST is typed as
        // it says (Ladle said DECIMAL(65, s) and VARCHAR(255) NOT NULL).
        "SELECT CAST(1.5 AS DECIMAL(5,2)), CAST(-1 AS DECIMAL(3,0)), (CAST(2 AS DECIMAL(10,1)))",
        "SELECT CAST(NULL AS DECIMAL(4,1)), CAST(12 AS DATE)",
    ] {
        let ours = metadata(&mut ladle, sql).await;
        let theirs = metadata(&mut maria, sql).await;
        assert_eq!(ours.len(), theirs.len());
        let differ: Vec<_> = ours.iter().zip(&theirs).filter(|(o, t)| o != t).collect();
        assert!(differ.is_empty(), "{sql}: (ours, MariaDB's) {differ:#?}");
    }
    maria
        .query_drop("DROP DATABASE ladle_proto_meta")
        .await
        .unwrap();
}

/// Binary-protocol rows (prepared statements) decode to the same values as
/// MariaDB's, for every type and NULLs, and text-protocol rows too.
#[tokio::test]
async fn prepared_rows_match_mariadb() {
    let Some((_server, mut ladle, mut maria)) = ladle_and_mariadb("ladle_proto_rows").await else {
        return;
    };
    for c in [&mut ladle, &mut maria] {
        c.query_drop(EVERY_TYPE).await.unwrap();
        c.query_drop(
            "INSERT INTO every_type VALUES (1, -3, -300, -70000, 5, -9000000000, 4000000000,
             18000000000000000000, 1.5, -2.25, 12.50, 99999, 'ab', 'héllo', 'tt', 'tx', 'mt', 'lt',
             'bins', 'vb', 'bl', 'lb', '2024-02-29', '2024-02-29 10:11:12', '2001-02-03 04:05:06',
             '-26:03:04', 2024, 'bcd', 1, 42, '2024-02-29 10:11:12.5', '12:34:56.789',
             '2001-02-03 04:05:06.25')",
        )
        .await
        .unwrap();
        c.query_drop("INSERT INTO every_type (id, i) VALUES (2, 0)")
            .await
            .unwrap();
    }
    let sql = "SELECT * FROM every_type WHERE id BETWEEN ? AND ? ORDER BY id";
    let ours: Vec<mysql_async::Row> = ladle.exec(sql, (1, 2)).await.unwrap();
    let theirs: Vec<mysql_async::Row> = maria.exec(sql, (1, 2)).await.unwrap();
    let values = |rows: &[mysql_async::Row]| -> Vec<Vec<mysql_async::Value>> {
        rows.iter().map(|r| r.clone().unwrap()).collect()
    };
    assert_eq!(values(&ours), values(&theirs));
    let text = "SELECT * FROM every_type ORDER BY id";
    let ours: Vec<mysql_async::Row> = ladle.query(text).await.unwrap();
    let theirs: Vec<mysql_async::Row> = maria.query(text).await.unwrap();
    assert_eq!(values(&ours), values(&theirs));
    maria
        .query_drop("DROP DATABASE ladle_proto_rows")
        .await
        .unwrap();
}

/// `BINARY ?` in a prepared statement compares bytewise, as in MariaDB
/// (Rails' case-sensitive uniqueness check binds the value).
#[tokio::test]
async fn binary_parameter_compares_bytewise_like_mariadb() {
    let Some((_server, mut ladle, mut maria)) = ladle_and_mariadb("ladle_proto_binary_param").await
    else {
        return;
    };
    maria
        .query_drop("DROP TABLE IF EXISTS people")
        .await
        .unwrap();
    for c in [&mut ladle, &mut maria] {
        c.query_drop("CREATE TABLE people (id INT PRIMARY KEY, name VARCHAR(16))")
            .await
            .unwrap();
        c.query_drop("INSERT INTO people VALUES (1, 'alice'), (2, 'ALICE'), (3, 'Alice ')")
            .await
            .unwrap();
    }
    for sql in [
        "SELECT id FROM people WHERE name = BINARY ? ORDER BY id",
        "SELECT id FROM people WHERE BINARY name = ? ORDER BY id",
        "SELECT id FROM people WHERE name = ? ORDER BY id",
    ] {
        for param in ["alice", "ALICE", "Alice", "Alice "] {
            let ours: Vec<i64> = ladle.exec(sql, (param,)).await.unwrap();
            let theirs: Vec<i64> = maria.exec(sql, (param,)).await.unwrap();
            assert_eq!(ours, theirs, "{sql} with {param:?}");
        }
    }
    maria
        .query_drop("DROP DATABASE ladle_proto_binary_param")
        .await
        .unwrap();
}

/// The OK packet's info string (`mysql_info()`: "Records: ..", "Rows
/// matched: ..") and `ROW_COUNT()` after every kind of write, in and out of
/// a transaction, equal MariaDB's.
#[tokio::test]
async fn ok_info_and_row_count_match_mariadb() {
    let Some((_server, mut ladle, mut maria)) = ladle_and_mariadb("ladle_proto_info").await else {
        return;
    };
    maria
        .query_drop("DROP TABLE IF EXISTS t, t2")
        .await
        .unwrap();
    let steps = [
        "CREATE TABLE t (id INT PRIMARY KEY, u INT UNIQUE, v VARCHAR(5))",
        "INSERT INTO t VALUES (1, 1, 'a')",
        "INSERT INTO t VALUES (2, 2, 'b'), (3, 3, 'c')",
        "INSERT IGNORE INTO t VALUES (3, 9, 'x'), (4, 4, 'd'), (5, 1, 'y')",
        "REPLACE INTO t VALUES (1, 1, 'z'), (6, 6, 'f')",
        "INSERT INTO t VALUES (2, 2, 'q'), (7, 7, 'g') ON DUPLICATE KEY UPDATE v = 'upd'",
        "INSERT INTO t SELECT id + 100, u + 100, v FROM t",
        "UPDATE t SET v = 'w' WHERE id < 4",
        "UPDATE t SET v = 'w' WHERE id < 4",
        "UPDATE t SET v = 'w' WHERE id = 999",
        "UPDATE IGNORE t SET u = u + 1",
        "DELETE FROM t WHERE id > 100",
        "SELECT 1",
        "CREATE TABLE t2 (a INT)",
        "INSERT INTO t2 VALUES (1), (2)",
        "INSERT IGNORE INTO t2 VALUES (1), ('x2')",
        "BEGIN",
        "UPDATE t SET v = 'in' WHERE id < 3",
        "INSERT INTO t VALUES (50, 50, 'a'), (51, 51, 'b')",
        "INSERT IGNORE INTO t VALUES (50, 50, 'a'), (52, 52, 'b')",
        "COMMIT",
    ];
    let mut infos = Vec::new();
    for sql in steps {
        let mut seen = Vec::new();
        for c in [&mut ladle, &mut maria] {
            c.query_drop(sql).await.unwrap();
            let info = c.info().into_owned();
            let affected = c.affected_rows();
            let row_count: Option<i64> = c.query_first("SELECT ROW_COUNT()").await.unwrap();
            seen.push((affected, info, row_count));
        }
        assert_eq!(seen[0], seen[1], "{sql}: (ours, MariaDB's)");
        infos.push(seen[1].1.clone());
    }
    // The comparison saw both kinds of info string.
    assert!(infos
        .iter()
        .any(|i| i.contains("Records: 2  Duplicates: 1")));
    assert!(infos
        .iter()
        .any(|i| i.contains("Rows matched: 3  Changed: 0")));
    maria
        .query_drop("DROP DATABASE ladle_proto_info")
        .await
        .unwrap();
}

/// A multi-table UPDATE's OK packet (affected rows, "Rows matched: N
/// Changed: M") and ROW_COUNT() are MariaDB's: a row the join matches
/// several times counts once, an unchanged one is matched not changed; in
/// and out of a transaction.
#[tokio::test]
async fn multi_table_update_counts_match_mariadb() {
    let Some((_server, mut ladle, mut maria)) = ladle_and_mariadb("ladle_proto_multi").await else {
        return;
    };
    maria.query_drop("DROP TABLE IF EXISTS a, b").await.unwrap();
    let steps = [
        "CREATE TABLE a (id INT PRIMARY KEY, x INT)",
        "CREATE TABLE b (id INT PRIMARY KEY, aid INT, y INT, z INT)",
        "INSERT INTO a VALUES (1, 0), (2, 0), (3, 0)",
        "INSERT INTO b VALUES (10, 1, 5, 0), (11, 1, 5, 0), (12, 2, 7, 0), (13, 9, 1, 0)",
        "UPDATE a JOIN b ON a.id = b.aid SET a.x = b.y, b.z = 1 WHERE b.y > 0",
        "UPDATE a JOIN b ON a.id = b.aid SET a.x = b.y, b.z = 1 WHERE b.y > 0",
        "UPDATE a, b SET a.x = a.x + 1 WHERE a.id = b.aid",
        "UPDATE a LEFT JOIN b ON a.id = b.aid SET a.x = COALESCE(b.y, -1), b.z = 2",
        "UPDATE a JOIN b ON a.id = b.aid SET b.z = 3 WHERE a.id = 99",
        "BEGIN",
        "UPDATE a, b SET a.x = 0, b.z = 0 WHERE a.id = b.aid",
        "ROLLBACK",
        "UPDATE a STRAIGHT_JOIN b ON a.id = b.aid SET b.z = b.z + 1",
    ];
    for sql in steps {
        let mut seen = Vec::new();
        for c in [&mut ladle, &mut maria] {
            c.query_drop(sql).await.unwrap();
            let info = c.info().into_owned();
            let affected = c.affected_rows();
            let row_count: Option<i64> = c.query_first("SELECT ROW_COUNT()").await.unwrap();
            seen.push((affected, info, row_count));
        }
        assert_eq!(seen[0], seen[1], "{sql}: (ours, MariaDB's)");
    }
    for c in [&mut ladle, &mut maria] {
        let rows: Vec<(i64, i64)> = c.query("SELECT id, z FROM b ORDER BY id").await.unwrap();
        assert_eq!(rows, vec![(10, 3), (11, 3), (12, 3), (13, 0)]);
    }
    // As a server-side prepared statement, and through SQL PREPARE.
    let mut seen = Vec::new();
    for c in [&mut ladle, &mut maria] {
        c.exec_drop(
            "UPDATE a JOIN b ON a.id = b.aid SET b.z = ?, a.x = ? WHERE a.id = ?",
            (7, 8, 1),
        )
        .await
        .unwrap();
        let first = (c.affected_rows(), c.info().into_owned());
        c.query_drop(
            "PREPARE mu FROM 'UPDATE a, b SET b.z = b.z + ? WHERE a.id = b.aid AND a.id = ?'",
        )
        .await
        .unwrap();
        c.query_drop("EXECUTE mu USING 1, 2").await.unwrap();
        let second = (c.affected_rows(), c.info().into_owned());
        let rows: Vec<(i64, i64)> = c.query("SELECT id, z FROM b ORDER BY id").await.unwrap();
        seen.push((first, second, rows));
    }
    assert_eq!(seen[0], seen[1], "prepared: (ours, MariaDB's)");
    assert_eq!(seen[1].2, vec![(10, 7), (11, 7), (12, 4), (13, 0)]);
    // A SET column no table has, or several have: MariaDB's errors.
    for sql in [
        "UPDATE a JOIN b ON a.id = b.aid SET id = 1",
        "UPDATE a JOIN b ON a.id = b.aid SET c.x = 1",
        "UPDATE a, b SET a.nope = 1",
    ] {
        let mut errors = Vec::new();
        for c in [&mut ladle, &mut maria] {
            match c.query_drop(sql).await {
                Err(mysql_async::Error::Server(e)) => errors.push((e.code, e.message)),
                other => panic!("{sql}: {other:?}"),
            }
        }
        assert_eq!(errors[0], errors[1], "{sql}: (ours, MariaDB's)");
    }
    maria
        .query_drop("DROP DATABASE ladle_proto_multi")
        .await
        .unwrap();
}

/// `max_connect_errors`: failed logins in a row from a host block it
/// (1129, before the greeting, whatever the password) until `FLUSH
/// HOSTS`, which needs RELOAD; a successful login resets the count.
#[tokio::test]
async fn hosts_with_many_failed_logins_are_blocked_until_flush_hosts() {
    let server = common::start_configured(None, 16 << 20, "rootpw").await;
    let root_opts = || server.opts().pass(Some("rootpw"));
    let wrong = || server.opts().pass(Some("guess"));
    let mut admin = Conn::new(root_opts()).await.expect("root");
    admin
        .query_drop("SET GLOBAL max_connect_errors = 3")
        .await
        .unwrap();
    admin
        .query_drop("CREATE USER 'app'@'%' IDENTIFIED BY 'pw'")
        .await
        .unwrap();

    // Two failures, a success (the count starts again), two failures: not
    // blocked.
    for _ in 0..2 {
        assert_eq!(refused_with(Conn::new(wrong()).await), 1045);
    }
    Conn::new(root_opts()).await.expect("not yet blocked");
    for _ in 0..2 {
        assert_eq!(refused_with(Conn::new(wrong()).await), 1045);
    }
    let mut app = Conn::new(server.opts().user(Some("app")).pass(Some("pw")))
        .await
        .expect("still not blocked");

    // Three in a row: blocked, even with the right password.
    for _ in 0..3 {
        assert_eq!(refused_with(Conn::new(wrong()).await), 1045);
    }
    assert_eq!(refused_with(Conn::new(root_opts()).await), 1129);

    // Sessions already open go on; FLUSH HOSTS needs RELOAD.
    let e = app.query_drop("FLUSH HOSTS").await.unwrap_err();
    assert!(
        matches!(e, mysql_async::Error::Server(ref s) if s.code == 1227),
        "{e}"
    );
    admin.query_drop("FLUSH HOSTS").await.unwrap();
    Conn::new(root_opts()).await.expect("unblocked");
    let max: Option<u64> = admin
        .query_first("SELECT @@max_connect_errors")
        .await
        .unwrap();
    assert_eq!(max, Some(3));
}

/// Statements that use no table (BEGIN, COMMIT, SET, SELECT 1, ...) keep
/// the previous statement's warnings for SHOW WARNINGS, but their own OK
/// packet counts none, as in MariaDB.
#[tokio::test]
async fn transaction_statements_count_no_earlier_warnings_like_mariadb() {
    let Some((_server, mut ladle, mut maria)) = ladle_and_mariadb("ladle_proto_tx_warnings").await
    else {
        return;
    };
    maria.query_drop("DROP TABLE IF EXISTS w").await.unwrap();
    for c in [&mut ladle, &mut maria] {
        c.query_drop("CREATE TABLE w (id INT PRIMARY KEY, s VARCHAR(2))")
            .await
            .unwrap();
    }
    let statements = [
        "BEGIN",
        "COMMIT",
        "START TRANSACTION",
        "SAVEPOINT a",
        "ROLLBACK TO SAVEPOINT a",
        "RELEASE SAVEPOINT a",
        "ROLLBACK",
        "SET autocommit = 1",
        "SET @x = 1",
        "SELECT 1",
    ];
    for (n, sql) in statements.iter().enumerate() {
        let mut seen = Vec::new();
        for c in [&mut ladle, &mut maria] {
            c.query_drop(format!("INSERT IGNORE INTO w VALUES ({n}, 'abc')"))
                .await
                .unwrap();
            let inserted = c.get_warnings();
            c.query_drop(*sql).await.unwrap();
            let own = c.get_warnings();
            let listed: Vec<(String, u16, String)> = c.query("SHOW WARNINGS").await.unwrap();
            seen.push((inserted, own, listed));
        }
        assert_eq!(seen[0], seen[1], "{sql}: (Ladle, MariaDB)");
        assert_eq!(seen[0].1, 0, "{sql}");
    }
    maria
        .query_drop("DROP DATABASE ladle_proto_tx_warnings")
        .await
        .unwrap();
}

/// Result metadata of computed columns (CONCAT, arithmetic, functions,
/// CAST, aggregates) agrees with MariaDB's where a client sizes buffers or
/// formats values from it: type, length, decimals, character set, flags.
#[tokio::test]
async fn computed_column_metadata_matches_mariadb() {
    let Some((_server, mut ladle, mut maria)) = ladle_and_mariadb("ladle_proto_meta_expr").await
    else {
        return;
    };
    for c in [&mut ladle, &mut maria] {
        c.query_drop(EVERY_TYPE).await.unwrap();
    }
    let mut differ = Vec::new();
    for expr in COMPUTED {
        let sql = format!("SELECT {expr} FROM every_type");
        let ours = metadata(&mut ladle, &sql).await;
        let theirs = metadata(&mut maria, &sql).await;
        if ours != theirs {
            differ.push((expr, ours, theirs));
        }
    }
    assert!(differ.is_empty(), "(ours, MariaDB's): {differ:#?}");
    maria
        .query_drop("DROP DATABASE ladle_proto_meta_expr")
        .await
        .unwrap();
}

/// The expressions [`computed_column_metadata_matches_mariadb`] compares.
/// Known differences left out: CAST(.. AS CHAR) and HEX() have decimals 0
/// in MariaDB (39 here, as its other string expressions), NULL has type
/// NULL there (VARCHAR here), SUBSTRING's length there is its argument's
/// bytes times 4, AVG of a FLOAT and ROUND of a DOUBLE have their own
/// lengths and decimals, and `bi * bi` is 39 characters there (40 here).
const COMPUTED: &[&str] = &[
    "CONCAT(vc, c)",
    "CONCAT(vc, i)",
    "CONCAT('ab', 'c')",
    "i + 1",
    "bi + 1",
    "i * 2",
    "i - ti",
    "dec_c + 1",
    "dec_c * 2",
    "dec_c / 3",
    "i / 3",
    "f + 1",
    "d * 2",
    "-i",
    "i DIV 2",
    "i % 3",
    "LENGTH(vc)",
    "UPPER(vc)",
    "ROUND(dec_c, 1)",
    "ABS(i)",
    "COALESCE(vc, 'x')",
    "IFNULL(i, 0)",
    "CAST(vc AS SIGNED)",
    "CAST(i AS DECIMAL(10,3))",
    "CAST(dt AS DATETIME)",
    "NOW()",
    "DATE(dtm)",
    "COUNT(*)",
    "SUM(i)",
    "AVG(i)",
    "MAX(vc)",
    "SUM(dec_c)",
    "AVG(dec_c)",
    "1",
    "'abc'",
    "1.5",
    "i = 1",
    "SUM(d)",
    "MAX(d)",
    "i + 1.5",
    "dec_c - i",
    "dec_c % 3",
    "CONCAT(vb, 'x')",
    "YEAR(dt)",
    "ui + 1",
    "COUNT(vc)",
    "i IS NULL",
    "NOT i",
    "CASE WHEN i > 0 THEN 'a' ELSE 'bc' END",
    "IF(i > 0, i, bi)",
];

/// The column names a prepared statement announces, and those its
/// execution (without parameters) returns.
async fn prepared_names(c: &mut Conn, sql: &str) -> (Vec<String>, Vec<String>) {
    let stmt = c.prep(sql).await.unwrap();
    let announced: Vec<String> = stmt
        .columns()
        .iter()
        .map(|c| c.name_str().into_owned())
        .collect();
    let result = c.exec_iter(&stmt, ()).await.unwrap();
    let executed: Vec<String> = result
        .columns()
        .map(|cols| cols.iter().map(|c| c.name_str().into_owned()).collect())
        .unwrap_or_default();
    drop(result.drop_result().await);
    (announced, executed)
}

/// Result columns without an alias are named by the statement's own text
/// of the item, as MariaDB names them (spaces and inner comments kept,
/// 255 characters at most; a lone string by its value, NULL and TRUE by
/// the keyword, `(a)` by the column), over the text protocol and in a
/// prepared statement's announced and executed columns. Texts of one
/// shape written differently share a view, yet each keeps its names.
#[tokio::test]
async fn column_names_are_the_items_text_like_mariadb() {
    let Some((_server, mut ladle, mut maria)) = ladle_and_mariadb("ladle_proto_names").await else {
        return;
    };
    for c in [&mut ladle, &mut maria] {
        c.query_drop("DROP TABLE IF EXISTS named").await.unwrap();
        c.query_drop("CREATE TABLE named (id INT PRIMARY KEY, a INT, x DOUBLE)")
            .await
            .unwrap();
        c.query_drop("INSERT INTO named VALUES (1, 2, 0.5), (2, 3, 1.25)")
            .await
            .unwrap();
    }
    let long = vec!["a"; 150].join(" + ");
    let texts = [
        "SELECT round(a,1)+0 FROM named".to_string(),
        "SELECT round(a, 1) + 0 FROM named".to_string(),
        "SELECT a  +  1, (a+1), (a), ((named.a)), a AS al, a+1 al2 FROM named WHERE id = 1"
            .to_string(),
        "SELECT a /* note */ + 2, CONCAT( 'x' , a ) FROM named WHERE id = 2".to_string(),
        "SELECT 1+1, 'a', NULL, -1, true, 1.50, COUNT( * ), sum(x) FROM named".to_string(),
        "SELECT *, a*2 FROM named".to_string(),
        "select 1+1, 'a', NULL, -1".to_string(),
        "(SELECT a*3 FROM named WHERE id = 1) UNION (SELECT 1)".to_string(),
        format!("SELECT {long} FROM named"),
    ];
    let names = |meta: Vec<(String, u8, u16, u32, u8, u16)>| -> Vec<String> {
        meta.into_iter().map(|m| m.0).collect()
    };
    let mut differ = Vec::new();
    for sql in &texts {
        let ours = names(metadata(&mut ladle, sql).await);
        let theirs = names(metadata(&mut maria, sql).await);
        if ours != theirs {
            differ.push(("text", sql.clone(), ours, theirs));
        }
        let ours = prepared_names(&mut ladle, sql).await;
        let theirs = prepared_names(&mut maria, sql).await;
        if ours != theirs {
            differ.push((
                "prepared",
                sql.clone(),
                [ours.0, ours.1].concat(),
                [theirs.0, theirs.1].concat(),
            ));
        }
    }
    assert!(differ.is_empty(), "(ours, MariaDB's): {differ:#?}");
    maria
        .query_drop("DROP DATABASE ladle_proto_names")
        .await
        .unwrap();
}

/// A statement's warnings do not depend on whether its view was cached: a
/// read that fills a view (cold) reports what a read of the filled view
/// (warm) does, inside a transaction too. A SELECT's own warnings (one
/// evaluated per statement, as without a table) are counted in its result's
/// end packet, as MariaDB counts them.
#[tokio::test]
async fn view_reads_warn_alike_cold_and_warm() {
    let server = start().await;
    let mut c = server.connect().await;
    c.query_drop("CREATE TABLE tw (id INT PRIMARY KEY, s VARCHAR(10))")
        .await
        .unwrap();
    c.query_drop("INSERT INTO tw VALUES (1, '12abc'), (2, 'x')")
        .await
        .unwrap();
    for (sql, tx) in [
        ("SELECT id, s * 2 FROM tw WHERE id = 1", false),
        ("SELECT SUM(s) FROM tw", false),
        ("SELECT id FROM tw WHERE s = 12", false),
        ("SELECT id, s * 3 FROM tw WHERE id = 2", true),
    ] {
        let mut seen = Vec::new();
        for _ in 0..2 {
            if tx {
                c.query_drop("BEGIN").await.unwrap();
                c.query_drop("UPDATE tw SET s = s WHERE id = 2")
                    .await
                    .unwrap();
            }
            let _: Vec<mysql_async::Row> = c.query(sql).await.unwrap();
            let count = c.get_warnings();
            let listed: Vec<(String, u16, String)> = c.query("SHOW WARNINGS").await.unwrap();
            seen.push((count, listed));
            if tx {
                c.query_drop("COMMIT").await.unwrap();
                let committed: Vec<(String, u16, String)> = c.query("SHOW WARNINGS").await.unwrap();
                assert!(committed.is_empty(), "{sql}: COMMIT got {committed:?}");
            }
        }
        assert_eq!(seen[0], seen[1], "{sql}: (cold, warm)");
    }

    let Ok(url) = std::env::var("LADLE_TEST_MARIADB_URL") else {
        return;
    };
    let mut maria = Conn::new(mysql_async::Opts::from_url(&url).unwrap())
        .await
        .unwrap();
    for sql in [
        "SELECT '1abc' = 1",
        "SELECT 'x' * 2, '3.5z' - 1",
        "SELECT 1",
    ] {
        let mut counts = Vec::new();
        for conn in [&mut c, &mut maria] {
            let _: Vec<mysql_async::Row> = conn.query(sql).await.unwrap();
            counts.push(conn.get_warnings());
        }
        assert_eq!(counts[0], counts[1], "{sql}: (Ladle, MariaDB)");
    }
}

/// COM_STMT_PREPARE's reply counts parameters in 16 bits: 65,535
/// placeholders prepare (and the connection stays in step), 65,536 are
/// MySQL's 1390. Ladle had answered with a count of 65,535 and then sent
/// 65,536 parameter definitions, so the client read the last one as the
/// next reply.
#[tokio::test]
async fn too_many_placeholders_are_refused_and_the_stream_stays_in_step() {
    let server = start().await;
    let mut c = server.connect().await;
    c.query_drop("CREATE TABLE p (id INT PRIMARY KEY)")
        .await
        .unwrap();
    let marks = |n: usize| vec!["?"; n].join(",");
    let most = c
        .prep(format!("SELECT id FROM p WHERE id IN ({})", marks(65_535)))
        .await
        .expect("65,535 placeholders");
    assert_eq!(most.num_params(), 65_535);
    match c
        .prep(format!("SELECT id FROM p WHERE id IN ({})", marks(65_536)))
        .await
    {
        Err(mysql_async::Error::Server(e)) => {
            assert_eq!(e.code, 1390);
            assert_eq!(
                e.message,
                "Prepared statement contains too many placeholders"
            );
        }
        other => panic!("expected 1390, got {other:?}"),
    }
    let one: Option<u8> = c.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1));
}
