//! The fault suite's crash and connection cases (issue #17, "Keep it so"):
//! a real `ladle` killed with SIGKILL in the middle of a long statement (a
//! bulk INSERT, an ALTER TABLE rewrite, a CREATE INDEX build, a TRUNCATE),
//! then started again over the same data directory; and a server held at
//! its connection limit while stalled sockets pile up beside it. Each case
//! checks what MySQL promises: every acknowledged write is there, the
//! statement the kill interrupted is all or nothing (rows, schema and
//! indexes agreeing), and the server serves and takes writes after the
//! restart. The other fault cases live beside the code they exercise; the
//! list is in docs/operations.md.
//!
//! Where the kill lands inside the statement depends on the machine: each
//! case kills at several delays after the statement shows in the process
//! list and asserts the all-or-nothing outcome whichever side it fell on
//! (the test's output says which).

use std::io::Read;
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql::prelude::*;
use mysql::{Conn, Opts, OptsBuilder};

mod common;
use common::{http_get, ladle_command};

const BIN: &str = env!("CARGO_BIN_EXE_ladle");

/// A running `ladle` over a data directory; killed on drop.
struct Ladle {
    child: Child,
    port: u16,
    metrics_port: u16,
}

impl Ladle {
    /// Starts ladle over `dir` and waits for it to serve (`/health` 200,
    /// or 503 because storage refuses writes).
    fn start(dir: &Path, args: &[&str]) -> Ladle {
        Ladle::start_with_output(dir, args, None)
    }

    /// As [`Ladle::start`], its log (stdout and stderr) written to `log`.
    fn start_logged(dir: &Path, args: &[&str], log: &Path) -> Ladle {
        Ladle::start_with_output(dir, args, Some(log))
    }

    fn start_with_output(dir: &Path, args: &[&str], log: Option<&Path>) -> Ladle {
        let (mut cmd, ports) = ladle_command(BIN, dir);
        let (out, err) = match log {
            Some(path) => {
                let f = std::fs::File::create(path).expect("log file");
                (
                    Stdio::from(f.try_clone().expect("log file")),
                    Stdio::from(f),
                )
            }
            None => (Stdio::null(), Stdio::null()),
        };
        cmd.args(args)
            .env("LADLE_PASSWORD", "")
            .env("LADLE_LOG", "info")
            .stdout(out)
            .stderr(err);
        let mut child = cmd.spawn().expect("spawn ladle");
        let bound = ports
            .wait(&mut child, Duration::from_secs(120))
            .unwrap_or_else(|e| panic!("ladle over {}: {e}", dir.display()));
        let deadline = Instant::now() + Duration::from_secs(120);
        while Instant::now() < deadline {
            // Serving; over a damaged table file storage may already
            // refuse writes (503 with the reason), which the test sees.
            let serving =
                |b: &String| b.starts_with("HTTP/1.1 200") || b.contains("storage refuses writes");
            if http_get(bound.metrics, "/health").is_some_and(|b| serving(&b)) {
                return Ladle {
                    child,
                    port: bound.mysql,
                    metrics_port: bound.metrics,
                };
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "ladle over {} exited during start-up ({status})",
                    dir.display()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("ladle did not start over {}", dir.display());
    }

    fn opts(&self) -> Opts {
        OptsBuilder::new()
            .ip_or_hostname(Some("127.0.0.1"))
            .tcp_port(self.port)
            .user(Some("root"))
            .prefer_socket(false)
            .into()
    }

    fn conn(&self) -> Conn {
        Conn::new(self.opts()).expect("connect")
    }

    fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Ladle {
    fn drop(&mut self) {
        self.kill9();
    }
}

fn count(c: &mut Conn, sql: &str) -> i64 {
    c.query_first::<i64, _>(sql)
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .unwrap_or_else(|| panic!("{sql}: no row"))
}

/// Fills `f.src` with `rows` rows (id, grp = id % 100, a 60-byte text).
fn source_table(c: &mut Conn, rows: i64) {
    c.query_drop("CREATE DATABASE f").unwrap();
    c.query_drop(
        "CREATE TABLE f.src (id INT PRIMARY KEY, grp INT NOT NULL, v VARCHAR(80) NOT NULL)",
    )
    .unwrap();
    for start in (0..rows).step_by(2_000) {
        let values: Vec<String> = (start..(start + 2_000).min(rows))
            .map(|i| format!("({i}, {}, '{i:0>60}')", i % 100))
            .collect();
        c.query_drop(format!("INSERT INTO f.src VALUES {}", values.join(",")))
            .unwrap();
    }
}

/// Runs `sql` on a fresh connection and kills the server with SIGKILL
/// `delay` after the statement shows as running in `SHOW PROCESSLIST` (or
/// has already answered); whether the statement was acknowledged first.
fn kill_during(server: &mut Ladle, sql: &str, delay: Duration) -> bool {
    let mut c = server.conn();
    let id = c.connection_id();
    let mut watcher = server.conn();
    let sql = sql.to_string();
    let running = std::thread::spawn(move || c.query_drop(&sql).is_ok());
    let deadline = Instant::now() + Duration::from_secs(30);
    while !running.is_finished() && Instant::now() < deadline {
        let command: Option<String> = watcher
            .query_first(format!(
                "SELECT COMMAND FROM information_schema.PROCESSLIST WHERE ID = {id}"
            ))
            .unwrap_or(None);
        if command.as_deref() == Some("Query") {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(delay);
    server.kill9();
    running.join().expect("statement thread")
}

const BULK_ROWS: i64 = 30_000;
/// Single-row writes acknowledged beside the bulk statement have ids from here.
const SINGLE_BASE: i64 = 10_000_000;

/// kill -9 while a 30,000-row `INSERT ... SELECT` runs (a single-row
/// writer acknowledging inserts beside it): after the restart every
/// acknowledged single row is there, the bulk statement's rows are all
/// there or none (also through the secondary index), and the table takes
/// the same bulk insert again.
#[test]
fn kill_9_during_a_bulk_insert_keeps_it_whole_or_absent() {
    let mut interrupted = 0;
    for delay_ms in [0u64, 400, 1_500] {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let mut server = Ladle::start(&data, &["--durability", "sync"]);
        let mut c = server.conn();
        source_table(&mut c, BULK_ROWS);
        c.query_drop("CREATE TABLE f.dst (id INT PRIMARY KEY, grp INT NOT NULL, v VARCHAR(80) NOT NULL, KEY by_grp (grp))")
            .unwrap();
        // The single-row writer, until the server dies.
        let acknowledged = Arc::new(AtomicI64::new(0));
        let writer = {
            let acknowledged = acknowledged.clone();
            let mut w = server.conn();
            std::thread::spawn(move || {
                for i in 0.. {
                    let sql = format!(
                        "INSERT INTO f.dst VALUES ({}, -1, 'single')",
                        SINGLE_BASE + i
                    );
                    if w.query_drop(sql).is_err() {
                        return;
                    }
                    acknowledged.store(i + 1, Ordering::SeqCst);
                }
            })
        };
        let bulk_ok = kill_during(
            &mut server,
            "INSERT INTO f.dst SELECT id, grp, v FROM f.src",
            Duration::from_millis(delay_ms),
        );
        writer.join().expect("writer thread");
        let acked = acknowledged.load(Ordering::SeqCst);

        let server = Ladle::start(&data, &["--durability", "sync"]);
        let mut c = server.conn();
        let singles = count(&mut c, "SELECT COUNT(*) FROM f.dst WHERE grp = -1");
        // The write in flight at the kill may or may not have landed.
        assert!(
            singles == acked || singles == acked + 1,
            "{acked} single rows acknowledged, {singles} after the restart (kill at {delay_ms} ms)"
        );
        let bulk = count(&mut c, "SELECT COUNT(*) FROM f.dst WHERE id < 10000000");
        assert!(
            bulk == 0 || bulk == BULK_ROWS,
            "a bulk INSERT cut by kill -9 left {bulk} of {BULK_ROWS} rows (kill at {delay_ms} ms)"
        );
        if bulk_ok {
            assert_eq!(bulk, BULK_ROWS, "an acknowledged bulk INSERT lost rows");
        }
        if bulk == 0 {
            interrupted += 1;
        }
        // The index agrees with the rows: one group read by key, the same
        // group counted by a scan of a computed column.
        let by_key = count(&mut c, "SELECT COUNT(*) FROM f.dst WHERE grp = 42");
        let scanned = count(&mut c, "SELECT SUM(grp + 0 = 42) FROM f.dst");
        assert_eq!(
            by_key, scanned,
            "index and rows disagree (kill at {delay_ms} ms)"
        );
        assert_eq!(by_key, bulk / 100);
        // And the table goes on: the whole bulk insert again, no duplicates.
        c.query_drop("DELETE FROM f.dst WHERE id < 10000000")
            .unwrap();
        c.query_drop("INSERT INTO f.dst SELECT id, grp, v FROM f.src")
            .unwrap();
        assert_eq!(
            count(&mut c, "SELECT COUNT(*) FROM f.dst WHERE grp = 42"),
            BULK_ROWS / 100
        );
        eprintln!(
            "kill at {delay_ms} ms: bulk {}, {acked} single rows acknowledged",
            if bulk == 0 { "absent" } else { "whole" }
        );
    }
    eprintln!("{interrupted} of 3 kills landed before the bulk INSERT committed");
}

/// One DDL statement killed part-way, and how to tell whether it happened.
struct DdlCase {
    name: &'static str,
    statement: &'static str,
    /// True when the statement's effect is visible after the restart.
    applied: fn(&mut Conn) -> bool,
    /// Checks the table in the state `applied` reported.
    check: fn(&mut Conn, bool),
}

fn has_column(c: &mut Conn, column: &str) -> bool {
    count(
        c,
        &format!(
            "SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'f' \
             AND TABLE_NAME = 'src' AND COLUMN_NAME = '{column}'"
        ),
    ) == 1
}

fn has_index(c: &mut Conn, index: &str) -> bool {
    count(
        c,
        &format!(
            "SELECT COUNT(*) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = 'f' \
             AND TABLE_NAME = 'src' AND INDEX_NAME = '{index}'"
        ),
    ) > 0
}

fn ddl_cases() -> Vec<DdlCase> {
    vec![
        DdlCase {
            name: "ALTER TABLE rewrite",
            statement: "ALTER TABLE f.src ADD COLUMN extra INT NOT NULL DEFAULT 5, MODIFY v VARCHAR(90) NOT NULL, ADD KEY by_v (v)",
            applied: |c| has_column(c, "extra"),
            check: |c, applied| {
                assert_eq!(has_index(c, "by_v"), applied, "column and index disagree");
                assert_eq!(count(c, "SELECT COUNT(*) FROM f.src"), BULK_ROWS);
                if applied {
                    assert_eq!(count(c, "SELECT SUM(extra) FROM f.src"), 5 * BULK_ROWS);
                    let v = format!("{:0>60}", 777);
                    assert_eq!(count(c, &format!("SELECT id FROM f.src WHERE v = '{v}'")), 777);
                }
            },
        },
        DdlCase {
            name: "CREATE INDEX",
            statement: "CREATE INDEX by_grp ON f.src (grp, v)",
            applied: |c| has_index(c, "by_grp"),
            check: |c, applied| {
                assert_eq!(count(c, "SELECT COUNT(*) FROM f.src"), BULK_ROWS);
                if !applied {
                    c.query_drop("CREATE INDEX by_grp ON f.src (grp, v)").unwrap();
                }
                // Through the index (now there either way) and by a scan.
                let by_key = count(c, "SELECT COUNT(*) FROM f.src WHERE grp = 42");
                let scanned = count(c, "SELECT SUM(grp + 0 = 42) FROM f.src");
                assert_eq!((by_key, scanned), (BULK_ROWS / 100, BULK_ROWS / 100));
                let e = c.query_drop("CREATE INDEX by_grp ON f.src (grp)").unwrap_err();
                assert!(e.to_string().contains("1061"), "{e}");
            },
        },
        DdlCase {
            name: "TRUNCATE",
            statement: "TRUNCATE TABLE f.src",
            applied: |c| count(c, "SELECT COUNT(*) FROM f.src") == 0,
            check: |c, applied| {
                let n = count(c, "SELECT COUNT(*) FROM f.src");
                assert_eq!(n, if applied { 0 } else { BULK_ROWS });
            },
        },
    ]
}

/// kill -9 during DDL over a 30,000-row table: after the restart the
/// statement happened wholly (schema, rows and indexes in the new shape)
/// or not at all, and the table takes reads, writes and more DDL.
#[test]
fn kill_9_during_ddl_leaves_the_old_table_or_the_new_one() {
    for case in ddl_cases() {
        for delay_ms in [0u64, 300, 1_000] {
            let dir = tempfile::tempdir().unwrap();
            let data = dir.path().join("data");
            let mut server = Ladle::start(&data, &["--durability", "sync"]);
            let mut c = server.conn();
            source_table(&mut c, BULK_ROWS);
            drop(c);
            let acknowledged =
                kill_during(&mut server, case.statement, Duration::from_millis(delay_ms));
            let server = Ladle::start(&data, &["--durability", "sync"]);
            let mut c = server.conn();
            let applied = (case.applied)(&mut c);
            if acknowledged {
                assert!(applied, "{}: acknowledged, then lost", case.name);
            }
            (case.check)(&mut c, applied);
            // Writes and another schema change still work.
            c.query_drop("INSERT INTO f.src (id, grp, v) VALUES (-1, 1, 'after')")
                .unwrap_or_else(|e| panic!("{}: insert after restart: {e}", case.name));
            c.query_drop("ALTER TABLE f.src ADD COLUMN later INT")
                .unwrap_or_else(|e| panic!("{}: ALTER after restart: {e}", case.name));
            assert_eq!(count(&mut c, "SELECT COUNT(*) FROM f.src WHERE id = -1"), 1);
            eprintln!(
                "{} killed at {delay_ms} ms: {}",
                case.name,
                if applied { "applied" } else { "not applied" }
            );
        }
    }
}

/// Whether the server closed `s` within `within` (end of stream or reset).
fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    s.set_read_timeout(Some(within)).unwrap();
    let mut buf = [0u8; 256];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) => return e.kind() == std::io::ErrorKind::ConnectionReset,
        }
    }
}

/// The server at its connection limit (1,000 logged-in connections, the
/// default `--max-connections`) with 500 stalled sockets beside them: the
/// next login gets 1040, every held connection still answers, the stalled
/// sockets are closed after `connect_timeout`, and once a held connection
/// leaves, a new client gets its place.
#[test]
fn a_thousand_connections_and_stalled_sockets() {
    const HELD: usize = 1_000;
    let dir = tempfile::tempdir().unwrap();
    let server = Ladle::start(
        &dir.path().join("data"),
        &["--durability", "memory", "--connect-timeout", "5s"],
    );
    let stalled: Vec<TcpStream> = (0..500)
        .map(|_| TcpStream::connect(("127.0.0.1", server.port)).expect("stalled socket"))
        .collect();
    let mut held: Vec<Conn> = (0..HELD)
        .map(|i| Conn::new(server.opts()).unwrap_or_else(|e| panic!("connection {i} refused: {e}")))
        .collect();
    let started = Instant::now();
    match Conn::new(server.opts()) {
        Err(mysql::Error::MySqlError(e)) => assert_eq!(e.code, 1040, "{e}"),
        Err(e) => panic!("connection {}: {e}", HELD + 1),
        Ok(_) => panic!("connection {} accepted past the limit", HELD + 1),
    }
    // Refused at once, not after a wait.
    assert!(started.elapsed() < Duration::from_secs(10));
    for (i, c) in held.iter_mut().enumerate().step_by(37) {
        assert_eq!(count(c, &format!("SELECT {i}")), i as i64);
    }
    for (i, mut s) in stalled.into_iter().enumerate().step_by(50) {
        assert!(
            closed_within(&mut s, Duration::from_secs(60)),
            "stalled socket {i} still open"
        );
    }
    drop(held.pop());
    let mut fresh = None;
    for _ in 0..100 {
        if let Ok(c) = Conn::new(server.opts()) {
            fresh = Some(c);
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut fresh = fresh.expect("a place freed by a leaving connection");
    assert_eq!(count(&mut fresh, "SELECT 7"), 7);
}

/// A table file (`.sst`) damaged on disk (16 flipped bytes): the server
/// starts (it does not read every block to open), a statement that reads
/// the damaged block gets MySQL's 1034 (as InnoDB's corrupt pages do; it
/// was 1105, "unknown error"), other tables keep being read, and once a
/// compaction has read the damaged block (forced here: whether one started
/// at open and read it, rather than moving the file down a level unread,
/// was chance) a write gets 1034 naming the file, never a crash.
#[test]
fn a_damaged_table_block_gets_1034_and_other_tables_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut server = Ladle::start(&data, &["--durability", "sync"]);
    let mut c = server.conn();
    source_table(&mut c, BULK_ROWS);
    c.query_drop("CREATE TABLE f.other (id INT PRIMARY KEY, v INT)")
        .unwrap();
    c.query_drop("INSERT INTO f.other VALUES (1, 10), (2, 20)")
        .unwrap();
    // Flushes every memtable into table files.
    c.query_drop("SNAPSHOT VIEWS").unwrap();
    drop(c);
    server.kill9();
    // The largest table file holds f.src's rows.
    damage_largest_table_file(&data);

    let log = dir.path().join("after.log");
    let server = Ladle::start_logged(&data, &["--durability", "sync"], &log);
    let mut c = server.conn();
    match c.query_drop("SELECT SUM(LENGTH(v)) FROM f.src") {
        Err(mysql::Error::MySqlError(e)) => assert_eq!(e.code, 1034, "{e}"),
        other => panic!("a scan over a damaged block: {other:?}"),
    }
    assert_eq!(count(&mut c, "SELECT SUM(v) FROM f.other"), 30);
    // Writes: once a RocksDB compaction has met the damaged block,
    // RocksDB keeps a background error and refuses every write to any
    // table until the data directory is repaired; the client sees 1034
    // with the damaged file's name, reads go on.
    compact_into_the_damage(&server, &mut c);
    match c.query_drop("INSERT INTO f.other VALUES (3, 30)") {
        Err(mysql::Error::MySqlError(e)) => {
            assert_eq!(e.code, 1034, "{e}");
            assert!(e.message.contains(".sst"), "{e}");
        }
        other => panic!("a write beside a damaged block: {other:?}"),
    }
    assert_eq!(count(&mut c, "SELECT SUM(v) FROM f.other"), 30);
    assert_eq!(
        count(&mut c, "SELECT COUNT(*) FROM f.other WHERE id = 1"),
        1
    );
    // Said once at error level, with what to do.
    let text = std::fs::read_to_string(&log).unwrap();
    let errors: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("ERROR") && l.contains("storage corruption"))
        .collect();
    assert_eq!(errors.len(), 1, "{text}");
    assert!(errors[0].contains("restore the data"), "{text}");
}

/// The largest table file (`.sst`) under `data`, with 16 bytes flipped
/// in its middle.
fn damage_largest_table_file(data: &Path) {
    let sst = std::fs::read_dir(data.join("db"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "sst"))
        .max_by_key(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
        .expect("a table file");
    let mut bytes = std::fs::read(&sst).unwrap();
    let mid = bytes.len() / 2;
    for b in &mut bytes[mid..mid + 16] {
        *b ^= 0xFF;
    }
    std::fs::write(&sst, &bytes).unwrap();
}

/// Makes RocksDB's compactions read the damaged table file of f.src
/// (after [`damage_largest_table_file`]) and returns `/health` once they
/// stopped writes (503). Compactions of the damaged table's family start
/// once it has four table files, and only a compaction that merges the
/// damaged file with files overlapping its keys reads it (one overlapping
/// nothing is moved down a level unread): each round writes keys of
/// f.src, then SNAPSHOT VIEWS flushes them into a new file.
fn compact_into_the_damage(server: &Ladle, c: &mut Conn) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut round = 0;
    loop {
        let health = http_get(server.metrics_port, "/health").unwrap_or_default();
        if health.starts_with("HTTP/1.1 503") {
            return health;
        }
        assert!(health.starts_with("HTTP/1.1 200"), "{health}");
        assert!(Instant::now() < deadline, "no compaction met the damage");
        round += 1;
        // Keys inside the damaged file's range (a point write: a scan
        // would stop at the damaged block), so that compactions merge it
        // with the new files.
        let update = format!("UPDATE f.src SET grp = grp + 1 WHERE id = {round}");
        // A write may already meet the stop; the flush then fails too.
        let _ = c.query_drop(update);
        let _ = c.query_drop("SNAPSHOT VIEWS");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Once a compaction meets a damaged block, RocksDB refuses every write
/// until a restart on a repaired directory: `/health` turns 503 naming the
/// reason (it said 200 while no write could succeed), the gauge
/// `ladle_storage_background_error` is 1, writes get 1034, reads go on.
#[test]
fn writes_stopped_by_a_damaged_block_turn_health_503() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut server = Ladle::start(&data, &["--durability", "sync"]);
    let mut c = server.conn();
    source_table(&mut c, 6_000);
    c.query_drop("CREATE TABLE f.other (id INT PRIMARY KEY, v INT)")
        .unwrap();
    c.query_drop("INSERT INTO f.other VALUES (1, 10), (2, 20)")
        .unwrap();
    c.query_drop("SNAPSHOT VIEWS").unwrap();
    let health = http_get(server.metrics_port, "/health").unwrap_or_default();
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    drop(c);
    server.kill9();
    damage_largest_table_file(&data);

    let log = dir.path().join("after.log");
    let server = Ladle::start_logged(&data, &["--durability", "sync"], &log);
    let mut c = server.conn();
    let health = compact_into_the_damage(&server, &mut c);
    assert!(health.contains("storage refuses writes"), "{health}");
    assert!(health.contains("Corruption"), "{health}");
    let metrics = http_get(server.metrics_port, "/metrics").unwrap_or_default();
    assert!(
        metrics.contains("\nladle_storage_background_error 1\n"),
        "{metrics}"
    );
    match c.query_drop("INSERT INTO f.other VALUES (3, 30)") {
        Err(mysql::Error::MySqlError(e)) => assert_eq!(e.code, 1034, "{e}"),
        other => panic!("a write while writes are stopped: {other:?}"),
    }
    assert_eq!(count(&mut c, "SELECT SUM(v) FROM f.other"), 30);
    let text = std::fs::read_to_string(&log).unwrap();
    let stops: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("storage refuses every write"))
        .collect();
    assert_eq!(stops.len(), 1, "said once: {text}");
}
