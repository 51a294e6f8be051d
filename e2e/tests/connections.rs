//! Connections that never finish: sockets that stall in the connection
//! phase hold no place under `max_connections` and are dropped after
//! `connect_timeout`; an idle session is closed after `wait_timeout`; a
//! packet that starts and stalls is dropped after `net_read_timeout`.
//! Against MariaDB too where the behaviour is MySQL's (`wait_timeout`).
//!
//! No assertion on timing beyond generous sanity limits: each test checks
//! what happens, not how fast (real clients beside stalled sockets may
//! take at most four times their time before, plus 100 ms).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use ladle_e2e::{connect, ladle_binary, mariadb_url, query_rows, LadleServer};

/// How long a test waits for the server to close a socket before failing.
const SANITY: Duration = Duration::from_secs(60);

fn socket(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(SANITY)).expect("timeout");
    s
}

/// Reads one packet: (sequence id, payload).
fn read_packet(s: &mut TcpStream) -> std::io::Result<(u8, Vec<u8>)> {
    let mut h = [0u8; 4];
    s.read_exact(&mut h)?;
    let len = usize::from(h[0]) | usize::from(h[1]) << 8 | usize::from(h[2]) << 16;
    let mut p = vec![0; len];
    s.read_exact(&mut p)?;
    Ok((h[3], p))
}

fn write_packet(s: &mut TcpStream, seq: u8, payload: &[u8]) {
    let len = payload.len() as u32;
    let mut p = len.to_le_bytes()[..3].to_vec();
    p.push(seq);
    p.extend_from_slice(payload);
    s.write_all(&p).expect("write");
}

/// A HandshakeResponse41 for `root` with an empty password.
fn handshake_response() -> Vec<u8> {
    // CLIENT_LONG_PASSWORD | PROTOCOL_41 | SECURE_CONNECTION | PLUGIN_AUTH
    let caps: u32 = 0x1 | 0x200 | 0x8000 | 0x80000;
    let mut p = caps.to_le_bytes().to_vec();
    p.extend_from_slice(&(1u32 << 24).to_le_bytes());
    p.push(33);
    p.extend_from_slice(&[0; 23]);
    p.extend_from_slice(b"root\0");
    p.push(0); // empty auth response
    p.extend_from_slice(b"mysql_native_password\0");
    p
}

/// A raw connection logged in as root (empty password), past the OK.
fn logged_in(port: u16) -> TcpStream {
    let mut s = socket(port);
    let (seq, _greeting) = read_packet(&mut s).expect("greeting");
    write_packet(&mut s, seq + 1, &handshake_response());
    let (_, ok) = read_packet(&mut s).expect("auth reply");
    assert_eq!(ok.first(), Some(&0), "login refused: {ok:?}");
    s
}

/// Whether the server closed `s` (end of stream or reset) before
/// [`SANITY`] ran out; any bytes it sent first are returned.
fn closed_by_server(s: &mut TcpStream) -> Result<Vec<u8>, String> {
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return Ok(got),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Ok(got),
            Err(e) => return Err(format!("still open after {SANITY:?}: {e}")),
        }
    }
}

fn scalar(conn: &mut mysql::Conn, sql: &str) -> String {
    let (rows, _) = query_rows(conn, sql).expect(sql);
    rows.expect("rows")[0][0].clone()
}

/// The time of each of `n` real clients to connect and run one query.
fn latencies(url: &str, n: usize) -> Vec<Duration> {
    (0..n)
        .map(|i| {
            let started = std::time::Instant::now();
            let mut c = connect(url, None).unwrap_or_else(|e| panic!("client {i} locked out: {e}"));
            assert_eq!(
                scalar(&mut c, &format!("SELECT {i} + 1")),
                (i + 1).to_string()
            );
            started.elapsed()
        })
        .collect()
}

fn median(times: &[Duration]) -> Duration {
    let mut sorted = times.to_vec();
    sorted.sort();
    sorted[sorted.len() / 2]
}

#[test]
fn stalled_sockets_neither_lock_users_out_nor_live_forever() {
    let bin = ladle_binary().expect("ladle binary");
    let server = LadleServer::start_with(
        &bin,
        &[
            "--max-connections",
            "100",
            "--connect-timeout",
            "5s",
            "--net-read-timeout",
            "5s",
        ],
    )
    .expect("start ladle");
    let port = server.port();
    // Real clients' connect-and-query time before any stalled socket.
    let before = latencies(&server.url(), 10);
    let mut stalled = Vec::new();
    // 2,000 sockets in the connection phase (20x max_connections): silent,
    // half a handshake, a header promising more than it sends.
    for i in 0..2000 {
        let mut s = socket(port);
        match i % 3 {
            0 => {}
            1 => {
                let (seq, _) = read_packet(&mut s).expect("greeting");
                let resp = handshake_response();
                let mut p = (resp.len() as u32).to_le_bytes()[..3].to_vec();
                p.push(seq + 1);
                p.extend_from_slice(&resp[..10]);
                s.write_all(&p).expect("write");
            }
            _ => {
                let (seq, _) = read_packet(&mut s).expect("greeting");
                s.write_all(&[0x60, 0xEA, 0x00, seq + 1, 1, 2, 3, 4, 5, 6, 7])
                    .expect("write");
            }
        }
        stalled.push(s);
    }
    // And logged-in connections whose command packet promises 16 MB and
    // brings 7 bytes.
    let mut half_packets = Vec::new();
    for _ in 0..20 {
        let mut s = logged_in(port);
        s.write_all(&[
            0xFF, 0xFF, 0xFF, 0x00, 3, b'S', b'E', b'L', b'E', b'C', b'T',
        ])
        .expect("write");
        half_packets.push(s);
    }
    // Real clients get in and are served meanwhile, about as fast as
    // before (a generous bound: this checks for waits behind the stalled
    // sockets, not for speed).
    let during = latencies(&server.url(), 30);
    let (b, d) = (median(&before), median(&during));
    eprintln!("connect + query median: {b:?} before, {d:?} beside 2,000 stalled sockets");
    assert!(
        d <= b * 4 + Duration::from_millis(100),
        "median {d:?} beside stalled sockets, {b:?} before"
    );
    // Every stalled socket is eventually closed by the server.
    for (i, s) in stalled.iter_mut().enumerate().step_by(97) {
        closed_by_server(s).unwrap_or_else(|e| panic!("stalled socket {i}: {e}"));
    }
    for s in &mut half_packets {
        closed_by_server(s).expect("half packet past net_read_timeout");
    }
    let mut c = connect(&server.url(), None).expect("connect after");
    assert_eq!(scalar(&mut c, "SELECT 1"), "1");
}

#[test]
fn timeouts_are_reported_settable_and_enforced() {
    let bin = ladle_binary().expect("ladle binary");
    let server = LadleServer::start_with(
        &bin,
        &[
            "--connect-timeout",
            "2s",
            "--wait-timeout",
            "3600s",
            "--net-read-timeout",
            "2s",
        ],
    )
    .expect("start ladle");
    let mut c = connect(&server.url(), None).expect("connect");
    assert_eq!(scalar(&mut c, "SELECT @@connect_timeout"), "2");
    assert_eq!(scalar(&mut c, "SELECT @@wait_timeout"), "3600");
    assert_eq!(scalar(&mut c, "SELECT @@interactive_timeout"), "28800");
    assert_eq!(scalar(&mut c, "SELECT @@net_read_timeout"), "2");
    assert_eq!(scalar(&mut c, "SELECT @@net_write_timeout"), "60");
    match query_rows(&mut c, "SET SESSION connect_timeout = 5") {
        Err(mysql::Error::MySqlError(e)) => assert_eq!(e.code, 1238),
        other => panic!("SET connect_timeout: {other:?}"),
    }

    // connect_timeout: a socket that reads the greeting and says nothing.
    let mut s = socket(server.port());
    read_packet(&mut s).expect("greeting");
    closed_by_server(&mut s).expect("closed after connect_timeout");

    // net_read_timeout: a command packet that starts and stalls.
    let mut s = logged_in(server.port());
    s.write_all(&[100, 0, 0, 0, 3, b'S', b'E', b'L'])
        .expect("write");
    closed_by_server(&mut s).expect("closed after net_read_timeout");

    // wait_timeout, per session, on Ladle and MariaDB alike.
    let mut urls = vec![server.url()];
    urls.extend(mariadb_url());
    for url in urls {
        let mut c = connect(&url, None).expect("connect");
        query_rows(&mut c, "SET SESSION wait_timeout = 0").expect("set");
        // Clamped to MySQL's minimum.
        assert_eq!(scalar(&mut c, "SELECT @@wait_timeout"), "1", "{url}");
        query_rows(&mut c, "SET SESSION wait_timeout = 2").expect("set");
        assert_eq!(
            scalar(&mut c, "SELECT @@session.wait_timeout"),
            "2",
            "{url}"
        );
        let mut idle_closed = false;
        for _ in 0..10 {
            std::thread::sleep(Duration::from_secs(4));
            match query_rows(&mut c, "SELECT 1") {
                Ok(_) => continue,
                // The server closed the connection: the client sees an I/O
                // or driver error, not a MySQL error reply.
                Err(mysql::Error::MySqlError(e)) => panic!("{url}: error reply {e}"),
                Err(_) => {
                    idle_closed = true;
                    break;
                }
            }
        }
        assert!(idle_closed, "{url}: still open after wait_timeout");
        // Other connections are unaffected.
        let mut d = connect(&url, None).expect("connect");
        assert_eq!(scalar(&mut d, "SELECT 2"), "2");
    }
}

/// A TEMPORARY table goes with the connection that created it: another
/// connection finds no such table once it has closed (on Ladle the drop
/// runs just after the close, so it is polled for), and the connection's
/// open transaction is rolled back, not committed by that drop.
#[test]
fn temporary_tables_go_with_their_connection() {
    let bin = ladle_binary().expect("ladle binary");
    let server = LadleServer::start_with(&bin, &[]).expect("start ladle");
    let mut urls = vec![server.url()];
    urls.extend(mariadb_url());
    for url in urls {
        let mut c = connect(&url, None).expect("connect");
        query_rows(&mut c, "DROP DATABASE IF EXISTS conn_tmp").expect("drop");
        query_rows(&mut c, "CREATE DATABASE conn_tmp").expect("create");
        query_rows(&mut c, "CREATE TABLE conn_tmp.base (a INT PRIMARY KEY)").expect("create");
        query_rows(&mut c, "CREATE TEMPORARY TABLE conn_tmp.t (a INT)").expect("create");
        query_rows(&mut c, "INSERT INTO conn_tmp.t VALUES (1)").expect("insert");
        assert_eq!(scalar(&mut c, "SELECT a FROM conn_tmp.t"), "1", "{url}");
        // Left open: the disconnect rolls it back (dropping the temporary
        // table must not commit it).
        query_rows(&mut c, "BEGIN").expect("begin");
        query_rows(&mut c, "INSERT INTO conn_tmp.base VALUES (1)").expect("insert");
        drop(c);
        let mut d = connect(&url, None).expect("connect");
        let started = std::time::Instant::now();
        loop {
            match query_rows(&mut d, "SELECT a FROM conn_tmp.t") {
                Err(mysql::Error::MySqlError(e)) if e.code == 1146 => break,
                other => assert!(
                    started.elapsed() < SANITY,
                    "{url}: the temporary table outlived its connection: {other:?}"
                ),
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(
            scalar(&mut d, "SELECT COUNT(*) FROM conn_tmp.base"),
            "0",
            "{url}: the closed connection's transaction was committed"
        );
        query_rows(&mut d, "DROP DATABASE conn_tmp").expect("drop");
    }
}

/// The MySQL error code of `sql` on `c` (panics if it succeeds).
fn error_code(c: &mut mysql::Conn, sql: &str) -> u16 {
    match query_rows(c, sql) {
        Err(mysql::Error::MySqlError(e)) => e.code,
        other => panic!("{sql}: expected an error, got {other:?}"),
    }
}

/// A TEMPORARY table is its own connection's: every other connection gets
/// 1146 for any statement naming it (1051 for DROP TABLE), a prepared
/// statement included and a SELECT the owner's repeated text cached; and
/// no view may be built over it (1352 for its owner).
#[test]
fn temporary_tables_are_invisible_to_other_connections() {
    let bin = ladle_binary().expect("ladle binary");
    let server = LadleServer::start_with(&bin, &[]).expect("start ladle");
    let mut urls = vec![server.url()];
    urls.extend(mariadb_url());
    for url in urls {
        let mut c = connect(&url, None).expect("connect");
        query_rows(&mut c, "DROP DATABASE IF EXISTS conn_iso").expect("drop");
        query_rows(&mut c, "CREATE DATABASE conn_iso").expect("create");
        query_rows(&mut c, "USE conn_iso").expect("use");
        query_rows(&mut c, "CREATE TABLE base (a INT)").expect("create");
        query_rows(&mut c, "CREATE TEMPORARY TABLE t (a INT PRIMARY KEY)").expect("create");
        query_rows(&mut c, "INSERT INTO t VALUES (1)").expect("insert");
        for _ in 0..2 {
            assert_eq!(scalar(&mut c, "SELECT a FROM t"), "1", "{url}");
        }
        let mut d = connect(&url, Some("conn_iso")).expect("connect");
        for sql in [
            "SELECT a FROM t",
            "SELECT a FROM conn_iso.t",
            "SELECT COUNT(*) FROM base JOIN t ON base.a = t.a",
            "INSERT INTO t VALUES (2)",
            "INSERT INTO base SELECT a FROM t",
            "UPDATE t SET a = 3",
            "DELETE FROM t",
            "TRUNCATE TABLE t",
            "SHOW CREATE TABLE t",
            "SHOW COLUMNS FROM t",
            "DESCRIBE t",
            "ALTER TABLE t ADD COLUMN b INT",
            "CREATE INDEX i ON t (a)",
            "CREATE VIEW v AS SELECT a FROM t",
            "CREATE TABLE l LIKE t",
        ] {
            assert_eq!(error_code(&mut d, sql), 1146, "{url}: {sql}");
        }
        use mysql::prelude::Queryable;
        match d.prep("SELECT a FROM t WHERE a = ?") {
            Err(mysql::Error::MySqlError(e)) => assert_eq!(e.code, 1146, "{url}"),
            other => panic!("{url}: prepared over another's temporary table: {other:?}"),
        }
        assert_eq!(error_code(&mut d, "DROP TABLE t"), 1051, "{url}");
        query_rows(&mut d, "DROP TABLE IF EXISTS t").expect("drop if exists");
        // The owner's table is untouched.
        assert_eq!(scalar(&mut c, "SELECT COUNT(*) FROM t"), "1", "{url}");
        assert_eq!(scalar(&mut c, "SELECT SUM(a) FROM t"), "1", "{url}");
        assert_eq!(
            scalar(&mut c, "SELECT COUNT(*) FROM base"),
            "0",
            "{url}: another connection wrote through the temporary table"
        );
        let cols = query_rows(&mut c, "SHOW COLUMNS FROM t").expect("columns");
        assert_eq!(cols.0.expect("rows").len(), 1, "{url}");
        assert_eq!(
            error_code(&mut c, "CREATE VIEW v AS SELECT a FROM t"),
            1352,
            "{url}"
        );
        // Nor can a FOREIGN KEY name it as its parent, from any connection.
        for conn in [&mut c, &mut d] {
            let sql = "CREATE TABLE ch (x INT, FOREIGN KEY (x) REFERENCES t (a))";
            assert_eq!(error_code(conn, sql), 1005, "{url}");
        }
        query_rows(&mut c, "DROP TEMPORARY TABLE t").expect("drop");
        query_rows(&mut c, "DROP DATABASE conn_iso").expect("drop");
    }
}

/// TEMPORARY table names are per connection, as in MySQL: two connections
/// may each have a `t`, and a connection's `t` shadows the base table `t`
/// for that connection only (reads, a prepared read, writes, SHOW CREATE
/// TABLE, errors naming it; DROP TABLE drops the temporary one first);
/// SHOW TABLES lists only the base table. Ladle had refused the second
/// `t` (1050) and read the base table through the name.
#[test]
fn temporary_tables_are_per_connection_and_shadow_base_tables() {
    use mysql::prelude::Queryable;
    let bin = ladle_binary().expect("ladle binary");
    let server = LadleServer::start_with(&bin, &[]).expect("start ladle");
    let mut urls = vec![server.url()];
    urls.extend(mariadb_url());
    for url in urls {
        let mut c = connect(&url, None).expect("connect");
        query_rows(&mut c, "DROP DATABASE IF EXISTS conn_shadow").expect("drop");
        query_rows(&mut c, "CREATE DATABASE conn_shadow").expect("create");
        query_rows(&mut c, "USE conn_shadow").expect("use");
        let mut d = connect(&url, Some("conn_shadow")).expect("connect");
        let mut e = connect(&url, Some("conn_shadow")).expect("connect");
        for sql in [
            "CREATE TABLE t (a INT)",
            "INSERT INTO t VALUES (10)",
            "CREATE TEMPORARY TABLE t (a INT PRIMARY KEY)",
            "INSERT INTO t VALUES (1)",
        ] {
            query_rows(&mut c, sql).unwrap_or_else(|err| panic!("{url}: {sql}: {err}"));
        }
        for sql in [
            "CREATE TEMPORARY TABLE t (b INT)",
            "INSERT INTO t VALUES (2)",
        ] {
            query_rows(&mut d, sql).unwrap_or_else(|err| panic!("{url}: {sql}: {err}"));
        }
        for _ in 0..2 {
            assert_eq!(scalar(&mut c, "SELECT a FROM t"), "1", "{url}");
            assert_eq!(scalar(&mut d, "SELECT b FROM t"), "2", "{url}");
            assert_eq!(scalar(&mut e, "SELECT a FROM t"), "10", "{url}");
        }
        query_rows(&mut c, "UPDATE t SET a = a + 1").expect("update");
        assert_eq!(
            scalar(&mut c, "SELECT t.a FROM conn_shadow.t WHERE t.a > 0"),
            "2",
            "{url}"
        );
        assert_eq!(
            scalar(&mut c, "SELECT COUNT(*) FROM t AS x JOIN t ON x.a = t.a"),
            "1",
            "{url}"
        );
        let got: Option<i64> = c
            .exec_first("SELECT a FROM t WHERE a = ?", (2,))
            .expect("exec");
        assert_eq!(got, Some(2), "{url}: prepared read");
        assert_eq!(
            scalar(&mut e, "SELECT a FROM t"),
            "10",
            "{url}: base untouched"
        );
        let create = query_rows(&mut c, "SHOW CREATE TABLE t")
            .expect("show")
            .0
            .expect("rows");
        assert_eq!(create[0][0], "t", "{url}");
        assert!(
            create[0][1].starts_with("CREATE TEMPORARY TABLE `t` (\n  `a` int(11) NOT NULL,"),
            "{url}: {}",
            create[0][1]
        );
        // LIKE copies the temporary t; RENAME TABLE keeps it temporary.
        for sql in ["CREATE TEMPORARY TABLE l LIKE t", "RENAME TABLE l TO m"] {
            query_rows(&mut c, sql).unwrap_or_else(|err| panic!("{url}: {sql}: {err}"));
        }
        assert_eq!(scalar(&mut c, "SELECT COUNT(*) FROM m"), "0", "{url}");
        assert_eq!(error_code(&mut d, "SELECT * FROM m"), 1146, "{url}");
        let tables = query_rows(&mut c, "SHOW TABLES")
            .expect("show")
            .0
            .expect("rows");
        assert_eq!(tables, vec![vec!["t".to_string()]], "{url}");
        match query_rows(&mut c, "CREATE TEMPORARY TABLE t (z INT)") {
            Err(mysql::Error::MySqlError(err)) => {
                assert_eq!(
                    (err.code, err.message.as_str()),
                    (1050, "Table 't' already exists"),
                    "{url}"
                )
            }
            other => panic!("{url}: a second temporary t: {other:?}"),
        }
        // DROP TABLE drops the temporary table first, then the base one.
        query_rows(&mut c, "DROP TABLE t").expect("drop");
        assert_eq!(scalar(&mut c, "SELECT a FROM t"), "10", "{url}");
        assert_eq!(scalar(&mut d, "SELECT b FROM t"), "2", "{url}");
        query_rows(&mut d, "DROP TABLE t").expect("drop");
        query_rows(&mut d, "DROP TABLE t").expect("drop");
        assert_eq!(error_code(&mut e, "SELECT a FROM t"), 1146, "{url}");
        assert_eq!(error_code(&mut c, "DROP TEMPORARY TABLE t"), 1051, "{url}");
        query_rows(&mut c, "DROP DATABASE conn_shadow").expect("drop");
    }
}

/// Statements prepared before a TEMPORARY table of their table's name is
/// made read and write it once it is, and the base table again once it is
/// dropped, as MySQL re-prepares them; a prepared write over the temporary
/// table goes back to the base table after DROP TEMPORARY TABLE. The
/// temporary name is also reached without INTO (`INSERT t VALUES`,
/// `REPLACE t VALUES`), by `SHOW INDEX IN t` (whose rows name `t`) and as a
/// multi-table DELETE's target. Ladle had kept the text rewritten at
/// PREPARE (reading the base table, or a dropped temporary one: 1146),
/// written `INSERT t` / `REPLACE t` and read `SHOW INDEX IN t` through the
/// base table, shown the stored name in SHOW KEYS, and refused the DELETE.
#[test]
fn temporary_tables_reach_prepared_statements_and_every_statement_form() {
    use mysql::prelude::Queryable;
    let bin = ladle_binary().expect("ladle binary");
    let server = LadleServer::start_with(&bin, &[]).expect("start ladle");
    let mut urls = vec![server.url()];
    urls.extend(mariadb_url());
    for url in urls {
        let mut c = connect(&url, None).expect("connect");
        for sql in [
            "DROP DATABASE IF EXISTS conn_reprep",
            "CREATE DATABASE conn_reprep",
            "USE conn_reprep",
            "CREATE TABLE t (id INT PRIMARY KEY, v INT)",
            "INSERT INTO t VALUES (1, 10)",
            "CREATE TABLE u (id INT PRIMARY KEY)",
            "INSERT INTO u VALUES (1), (2)",
        ] {
            query_rows(&mut c, sql).unwrap_or_else(|err| panic!("{url}: {sql}: {err}"));
        }
        let mut other = connect(&url, Some("conn_reprep")).expect("connect");
        let count = c.prep("SELECT COUNT(*) FROM t").expect("prepare");
        let sum = c
            .prep("SELECT SUM(v) FROM t WHERE id > ?")
            .expect("prepare");
        let insert = c.prep("INSERT INTO t VALUES (?, ?)").expect("prepare");
        let read = |c: &mut mysql::Conn, stmt: &mysql::Statement| -> Option<i64> {
            c.exec_first(stmt, ()).expect("exec")
        };
        assert_eq!(read(&mut c, &count), Some(1), "{url}");
        query_rows(
            &mut c,
            "CREATE TEMPORARY TABLE t (id INT PRIMARY KEY, v INT)",
        )
        .expect("create");
        assert_eq!(read(&mut c, &count), Some(0), "{url}: read the base table");
        c.exec_drop(&insert, (5, 50)).expect("insert");
        for sql in ["INSERT t VALUES (6, 60)", "REPLACE t VALUES (7, 70)"] {
            query_rows(&mut c, sql).unwrap_or_else(|err| panic!("{url}: {sql}: {err}"));
        }
        assert_eq!(read(&mut c, &count), Some(3), "{url}");
        let got: Option<i64> = c.exec_first(&sum, (5,)).expect("exec");
        assert_eq!(got, Some(130), "{url}");
        assert_eq!(
            scalar(&mut other, "SELECT COUNT(*) FROM t"),
            "1",
            "{url}: base"
        );
        let index = query_rows(&mut c, "SHOW INDEX IN t")
            .expect("show")
            .0
            .expect("rows");
        assert_eq!((index.len(), index[0][0].as_str()), (1, "t"), "{url}");
        let keys = query_rows(&mut c, "SHOW KEYS FROM t")
            .expect("show")
            .0
            .expect("rows");
        assert_eq!(keys[0][0], "t", "{url}");
        query_rows(&mut c, "DELETE t FROM t JOIN u ON t.id = u.id + 4").expect("delete");
        assert_eq!(
            scalar(&mut c, "SELECT GROUP_CONCAT(id ORDER BY id) FROM t"),
            "7",
            "{url}"
        );
        query_rows(&mut c, "DROP TEMPORARY TABLE t").expect("drop");
        assert_eq!(read(&mut c, &count), Some(1), "{url}: the base table again");
        c.exec_drop(&insert, (2, 20)).expect("insert");
        let got: Option<i64> = c.exec_first(&sum, (0,)).expect("exec");
        assert_eq!(got, Some(30), "{url}");
        assert_eq!(scalar(&mut other, "SELECT COUNT(*) FROM t"), "2", "{url}");
        query_rows(&mut c, "DROP DATABASE conn_reprep").expect("drop");
    }
}

/// A TEMPORARY table does not survive a server restart (here kill -9
/// while its connection is open): the restarted server has no such table,
/// the base table beside it is kept, and the name is free again (a base
/// table made under it survives the next restart).
#[test]
fn temporary_tables_do_not_survive_a_restart() {
    let bin = ladle_binary().expect("ladle binary");
    let dir = tempfile::tempdir().expect("tempdir");
    let server = LadleServer::start_in(&bin, dir.path(), "sync", &[]).expect("start");
    let mut c = connect(&server.url(), None).expect("connect");
    for sql in [
        "CREATE DATABASE d",
        "CREATE TABLE d.base (a INT)",
        "INSERT INTO d.base VALUES (7)",
        "CREATE TEMPORARY TABLE d.t (a INT)",
        "INSERT INTO d.t VALUES (1)",
        "CREATE TEMPORARY TABLE d.before (a INT)",
        "ALTER TABLE d.before RENAME TO d.renamed",
        "CREATE TEMPORARY TABLE d.gone (a INT)",
        "DROP TEMPORARY TABLE d.gone",
    ] {
        query_rows(&mut c, sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    drop(server); // SIGKILL, `c` still open
    drop(c);
    let server = LadleServer::start_in(&bin, dir.path(), "sync", &[]).expect("restart");
    let mut c = connect(&server.url(), None).expect("connect");
    for table in ["t", "renamed", "before", "gone"] {
        assert_eq!(
            error_code(&mut c, &format!("SELECT * FROM d.{table}")),
            1146,
            "d.{table} survived the restart"
        );
    }
    assert_eq!(scalar(&mut c, "SELECT a FROM d.base"), "7");
    query_rows(&mut c, "CREATE TABLE d.t (b INT)").expect("the name is free");
    query_rows(&mut c, "INSERT INTO d.t VALUES (2)").expect("insert");
    drop(server);
    drop(c);
    let server = LadleServer::start_in(&bin, dir.path(), "sync", &[]).expect("restart");
    let mut c = connect(&server.url(), None).expect("connect");
    assert_eq!(scalar(&mut c, "SELECT b FROM d.t"), "2");
    assert_eq!(scalar(&mut c, "SELECT a FROM d.base"), "7");
}

/// The COMMAND of connection `id` in `information_schema.PROCESSLIST`
/// (`None`: not listed).
fn command_of(c: &mut mysql::Conn, id: &str) -> Option<String> {
    let sql = format!("SELECT COMMAND FROM information_schema.PROCESSLIST WHERE ID = {id}");
    let rows = query_rows(c, &sql).expect("processlist").0;
    rows.unwrap_or_default()
        .into_iter()
        .next()
        .map(|r| r[0].clone())
}

/// A client that goes away while its statement runs stops the statement,
/// as a KILL QUERY stops it: a SELECT counting high in a recursive CTE, an
/// UPDATE and a DELETE whose WHERE costs milliseconds a row (minutes in
/// all) leave the process list within seconds, and the UPDATE's and
/// DELETE's rows are as they were (nothing of them is written). An UPDATE
/// or DELETE ran on to its end before: the row functions inside the write
/// never looked at the interrupt flag. Ladle only: MariaDB 10.11 notices a
/// gone client only when it next writes to it (its abandoned recursive
/// CTE ran on past 10 s).
#[test]
fn an_abandoned_statement_stops_and_writes_nothing() {
    let bin = ladle_binary().expect("ladle binary");
    let server = LadleServer::start_with(&bin, &[]).expect("start ladle");
    let url = server.url();
    const ROWS: usize = 20_000;
    // Within seconds: the statements would run for minutes.
    let slow_where = "LENGTH(REPEAT('x', 10000000)) > 0";
    let statements = [
        "WITH RECURSIVE c (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c \
         WHERE n < 1000000000) SELECT COUNT(*) FROM c"
            .to_string(),
        format!("UPDATE conn_gone.t SET v = v + 1 WHERE {slow_where}"),
        format!("DELETE FROM conn_gone.t WHERE {slow_where}"),
    ];
    {
        let mut root = connect(&url, None).expect("connect");
        fresh_table_of_zeros(&mut root, "conn_gone", ROWS);
        let opts = mysql::OptsBuilder::from_opts(ladle_e2e::opts(&url, None).expect("opts"))
            .read_timeout(Some(Duration::from_secs(1)));
        for sql in &statements {
            let mut impatient = mysql::Conn::new(opts.clone()).expect("connect");
            let id = scalar(&mut impatient, "SELECT CONNECTION_ID()");
            query_rows(
                &mut impatient,
                "SET SESSION cte_max_recursion_depth = 4294967295",
            )
            .expect("set");
            let r = query_rows(&mut impatient, sql);
            assert!(r.is_err(), "{url}: {sql}: answered within the read timeout");
            drop(impatient);
            wait_until_stopped(&mut root, &id, &format!("{url}: {sql}"));
            assert_eq!(
                scalar(
                    &mut root,
                    "SELECT CONCAT(COUNT(*), ' ', SUM(v)) FROM conn_gone.t"
                ),
                format!("{ROWS} 0"),
                "{url}: {sql}: the abandoned statement wrote rows"
            );
        }
        query_rows(&mut root, "DROP DATABASE conn_gone").expect("drop");
    }
}

/// An UPDATE or DELETE inside an explicit transaction (its rows are
/// visited when it runs, and its write buffered until COMMIT) stops on
/// KILL QUERY with 1317 and leaves the transaction as it was before the
/// statement, still open: the transaction's earlier write stays and
/// commits, nothing of the killed statement does (InnoDB rolls back only
/// the statement). A client gone during such a statement stops it too,
/// and its transaction is rolled back. Both ran on to their end before
/// (the visit never looked at the interrupt flag). The KILL QUERY half
/// runs against MariaDB too when it is given.
#[test]
fn a_statement_in_a_transaction_stops_on_kill_and_on_disconnect() {
    let bin = ladle_binary().expect("ladle binary");
    let server = LadleServer::start_with(&bin, &[]).expect("start ladle");
    const ROWS: usize = 20_000;
    // Milliseconds a row on both (minutes in all); MariaDB computes a
    // constant WHERE once, so this one reads the row.
    let slow_where = "LENGTH(REPEAT(id, 2000000)) > 0";
    let statements = [
        format!("UPDATE conn_tx.t SET v = v + 1 WHERE {slow_where}"),
        format!("DELETE FROM conn_tx.t WHERE {slow_where}"),
    ];
    let totals = "SELECT CONCAT(COUNT(*), ' ', SUM(v)) FROM conn_tx.t";
    let urls: Vec<String> = std::iter::once(server.url()).chain(mariadb_url()).collect();
    for url in &urls {
        let mut root = connect(url, None).expect("connect");
        fresh_table_of_zeros(&mut root, "conn_tx", ROWS);
        for sql in &statements {
            let mut tx = connect(url, None).expect("connect");
            let id = scalar(&mut tx, "SELECT CONNECTION_ID()");
            query_rows(&mut tx, "BEGIN").expect("begin");
            query_rows(&mut tx, "UPDATE conn_tx.t SET v = 7 WHERE id = 0").expect("write");
            let killer = {
                let (url, id) = (url.clone(), id.clone());
                std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(500));
                    let mut c = connect(&url, None).expect("connect");
                    query_rows(&mut c, &format!("KILL QUERY {id}")).expect("kill");
                })
            };
            let started = std::time::Instant::now();
            match query_rows(&mut tx, sql) {
                Err(mysql::Error::MySqlError(e)) => assert_eq!(e.code, 1317, "{url}: {sql}"),
                other => panic!("{url}: {sql}: {other:?}"),
            }
            assert!(
                started.elapsed() < STOPS_WITHIN,
                "{url}: {sql}: stopped only after {:?}",
                started.elapsed()
            );
            killer.join().expect("killer");
            let in_tx = format!("{ROWS} 7");
            assert_eq!(
                scalar(&mut tx, totals),
                in_tx,
                "{url}: {sql}: in the transaction"
            );
            assert_eq!(
                scalar(&mut root, totals),
                format!("{ROWS} 0"),
                "{url}: {sql}"
            );
            query_rows(&mut tx, "COMMIT").expect("commit");
            assert_eq!(scalar(&mut root, totals), in_tx, "{url}: {sql}: committed");
            query_rows(&mut root, "UPDATE conn_tx.t SET v = 0").expect("reset");
        }
        if *url != server.url() {
            continue;
        }
        // A client gone (Ladle only: MariaDB notices it only when it
        // next writes to the client).
        let opts = mysql::OptsBuilder::from_opts(ladle_e2e::opts(url, None).expect("opts"))
            .read_timeout(Some(Duration::from_secs(1)));
        for sql in &statements {
            let mut impatient = mysql::Conn::new(opts.clone()).expect("connect");
            let id = scalar(&mut impatient, "SELECT CONNECTION_ID()");
            query_rows(&mut impatient, "BEGIN").expect("begin");
            query_rows(&mut impatient, "UPDATE conn_tx.t SET v = 7 WHERE id = 0").expect("write");
            assert!(query_rows(&mut impatient, sql).is_err(), "{sql}: answered");
            drop(impatient);
            wait_until_stopped(&mut root, &id, sql);
            assert_eq!(scalar(&mut root, totals), format!("{ROWS} 0"), "{sql}");
        }
        query_rows(&mut root, "DROP DATABASE conn_tx").expect("drop");
    }
}

/// A new database `db` holding table `t (id INT PRIMARY KEY, v INT)` with
/// `rows` rows, ids 0.. and every `v` 0: what a slow statement works on.
fn fresh_table_of_zeros(root: &mut mysql::Conn, db: &str, rows: usize) {
    query_rows(root, &format!("DROP DATABASE IF EXISTS {db}")).expect("drop");
    query_rows(root, &format!("CREATE DATABASE {db}")).expect("create");
    query_rows(
        root,
        &format!("CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT)"),
    )
    .expect("create");
    let values: Vec<String> = (0..rows).map(|i| format!("({i}, 0)")).collect();
    query_rows(
        root,
        &format!("INSERT INTO {db}.t VALUES {}", values.join(",")),
    )
    .expect("insert");
}

/// How soon a statement whose client went away (or was killed) must stop.
const STOPS_WITHIN: Duration = Duration::from_secs(10);

/// Waits for connection `id`'s statement (`what`) to stop after its client
/// went away; fails past `STOPS_WITHIN`.
fn wait_until_stopped(root: &mut mysql::Conn, id: &str, what: &str) {
    let gone = std::time::Instant::now();
    while command_of(root, id).is_some() {
        assert!(
            gone.elapsed() < STOPS_WITHIN,
            "{what}: still running {STOPS_WITHIN:?} after its client went away"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
