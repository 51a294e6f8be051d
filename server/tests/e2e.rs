//! End-to-end tests: a real `ladle` process on a random loopback port with a
//! temporary data directory, driven by real MySQL client libraries
//! (`mysql_async`) and, for malformed input, raw TCP.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use mysql_async::prelude::*;
use mysql_async::{Conn, Opts, OptsBuilder, Row, Value as MyValue};

mod common;
use common::{http_get, ladle_command};

const BIN: &str = env!("CARGO_BIN_EXE_ladle");

/// A running server; killed on drop.
struct Server {
    child: Child,
    port: u16,
    metrics_port: u16,
    password: String,
}

impl Server {
    fn start(dir: &Path, extra: &[&str]) -> Server {
        Server::start_with(dir, extra, "")
    }

    fn start_env(dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Server {
        Server::start_full(dir, extra, "", env)
    }

    fn start_with(dir: &Path, extra: &[&str], password: &str) -> Server {
        Server::start_full(dir, extra, password, &[])
    }

    fn start_full(dir: &Path, extra: &[&str], password: &str, env: &[(&str, &str)]) -> Server {
        let (mut cmd, ports) = ladle_command(BIN, dir);
        cmd.args(extra)
            .env("LADLE_PASSWORD", password)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut child = cmd.spawn().expect("spawn ladle");
        let bound = ports
            .wait(&mut child, Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("{e}"));
        let mut s = Server {
            child,
            port: bound.mysql,
            metrics_port: bound.metrics,
            password: password.to_string(),
        };
        s.wait_ready();
        s
    }

    /// Waits for `/health` 200.
    fn wait_ready(&mut self) {
        for _ in 0..600 {
            if let Some(body) = http_get(self.metrics_port, "/health") {
                if body.starts_with("HTTP/1.1 200") {
                    return;
                }
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("the server exited during start-up ({status})");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("server did not become ready");
    }

    fn opts(&self, db: Option<&str>) -> Opts {
        OptsBuilder::default()
            .ip_or_hostname("127.0.0.1")
            .tcp_port(self.port)
            .user(Some("root"))
            .pass(Some(self.password.clone()))
            .db_name(db)
            .prefer_socket(false)
            .into()
    }

    async fn conn(&self, db: Option<&str>) -> Conn {
        Conn::new(self.opts(db)).await.expect("connect")
    }

    fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill9();
    }
}

fn server_code(e: mysql_async::Error) -> u16 {
    match e {
        mysql_async::Error::Server(s) => s.code,
        other => panic!("expected a server error, got {other:?}"),
    }
}

/// A cell as MySQL's text protocol would show it.
fn text_of(v: &MyValue) -> String {
    match v {
        MyValue::NULL => "NULL".into(),
        MyValue::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        MyValue::Int(i) => i.to_string(),
        MyValue::UInt(u) => u.to_string(),
        MyValue::Float(f) => f.to_string(),
        MyValue::Double(d) => d.to_string(),
        MyValue::Date(y, mo, d, 0, 0, 0, 0) => format!("{y:04}-{mo:02}-{d:02}"),
        MyValue::Date(y, mo, d, h, mi, s, _) => {
            format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}")
        }
        MyValue::Time(neg, days, h, m, s, _) => {
            format!(
                "{}{:02}:{m:02}:{s:02}",
                if *neg { "-" } else { "" },
                days * 24 + u32::from(*h)
            )
        }
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

#[test]
fn help_lists_every_flag() {
    let out = Command::new(BIN)
        .arg("--help")
        .output()
        .expect("run --help");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--listen",
        "--data-dir",
        "--metrics-listen",
        "--user",
        "--password",
        "--durability",
        "--memory-limit",
        "--snapshot-interval",
        "--max-connections",
        "--threads",
        "--tls-cert",
        "--tls-key",
        "--read-consistency",
        "--etcd",
        "--node-id",
        "--sync-replicas",
    ] {
        assert!(text.contains(flag), "--help does not mention {flag}");
    }
    assert!(text.contains("LADLE_DATA_DIR"));
}

/// The server runs with transparent huge pages off (see `main`): with
/// them, memory mimalloc handed back and touched again was faulted in as
/// zeroed 2 MiB pages, 16% of the CPU of a cold start. Linux reports the
/// flag in /proc/PID/status (5.0 and later); elsewhere there is nothing
/// to check.
#[test]
fn the_server_runs_without_transparent_huge_pages() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(dir.path(), &[]);
    let status = std::fs::read_to_string(format!("/proc/{}/status", s.child.id()));
    let flag = status.ok().and_then(|st| {
        st.lines()
            .find_map(|l| l.strip_prefix("THP_enabled:").map(|v| v.trim().to_string()))
    });
    if let Some(flag) = flag {
        assert_eq!(flag, "0", "THP_enabled in /proc/PID/status");
    }
}

#[test]
fn empty_password_is_refused_off_loopback() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .arg("--listen")
        .arg("0.0.0.0:0")
        .arg("--metrics-listen")
        .arg("127.0.0.1:0")
        .arg("--data-dir")
        .arg(dir.path())
        .env_remove("LADLE_PASSWORD")
        .output()
        .expect("run ladle");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("empty password"), "stderr: {err}");
}

#[test]
fn ddl_dml_and_select_over_the_text_protocol() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path(), &["--durability", "memory"]);
    rt().block_on(async {
        let mut c = srv.conn(None).await;
        c.query_drop("CREATE DATABASE shop").await.unwrap();
        c.query_drop("USE shop").await.unwrap();
        c.query_drop(
            "CREATE TABLE items (id INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, name VARCHAR(40) NOT NULL, \
             price DECIMAL(8,2) NOT NULL DEFAULT 0.00, qty INT DEFAULT 1, UNIQUE KEY uq_name (name), KEY by_qty (qty)) \
             ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
        )
        .await
        .unwrap();
        c.query_drop("INSERT INTO items (name, price) VALUES ('apple', 1.25), ('pear', 2.50)").await.unwrap();
        assert_eq!(c.last_insert_id(), Some(1));
        assert_eq!(c.affected_rows(), 2);
        c.query_drop("INSERT INTO items (name, qty) VALUES ('fig', 7)").await.unwrap();
        assert_eq!(c.last_insert_id(), Some(3));
        let id: Option<u64> = c.query_first("SELECT LAST_INSERT_ID()").await.unwrap();
        assert_eq!(id, Some(3));

        c.query_drop("UPDATE items SET qty = qty + 1 WHERE id = 2").await.unwrap();
        assert_eq!(c.affected_rows(), 1);
        c.query_drop("DELETE FROM items WHERE name = 'apple'").await.unwrap();
        assert_eq!(c.affected_rows(), 1);
        let rows: Vec<(u32, String, String, Option<i32>)> =
            c.query("SELECT id, name, price, qty FROM items ORDER BY id").await.unwrap();
        assert_eq!(rows, vec![(2, "pear".into(), "2.50".into(), Some(2)), (3, "fig".into(), "0.00".into(), Some(7))]);

        // ON DUPLICATE KEY UPDATE, INSERT IGNORE, REPLACE.
        c.query_drop("INSERT INTO items (name, qty) VALUES ('fig', 5) ON DUPLICATE KEY UPDATE qty = qty + VALUES(qty)")
            .await
            .unwrap();
        let q: Option<i32> = c.query_first("SELECT qty FROM items WHERE name = 'fig'").await.unwrap();
        assert_eq!(q, Some(12));
        c.query_drop("INSERT IGNORE INTO items (name) VALUES ('fig')").await.unwrap();
        assert_eq!(c.affected_rows(), 0);
        c.query_drop("REPLACE INTO items (id, name, qty) VALUES (2, 'pear', 100)").await.unwrap();
        let q: Option<i32> = c.query_first("SELECT qty FROM items WHERE id = 2").await.unwrap();
        assert_eq!(q, Some(100));

        // Catalog statements clients and ORMs send.
        let tables: Vec<String> = c.query("SHOW TABLES").await.unwrap();
        assert_eq!(tables, vec!["items".to_string()]);
        let cols: Vec<Row> = c.query("DESCRIBE items").await.unwrap();
        assert_eq!(cols.len(), 4);
        let create: Option<(String, String)> = c.query_first("SHOW CREATE TABLE items").await.unwrap();
        assert!(create.unwrap().1.contains("UNIQUE KEY `uq_name` (`name`)"));
        let idx: Vec<Row> = c.query("SHOW INDEX FROM items").await.unwrap();
        assert_eq!(idx.len(), 3);
        let n: Option<i64> = c
            .query_first(
                "SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = 'items'",
            )
            .await
            .unwrap();
        assert_eq!(n, Some(4));
        let v: Option<String> = c.query_first("SELECT @@version").await.unwrap();
        assert!(v.unwrap().contains("ladle"));
        let dbs: Vec<String> = c.query("SHOW DATABASES").await.unwrap();
        assert!(dbs.contains(&"shop".to_string()));
        c.query_drop("SET NAMES utf8mb4").await.unwrap();
        c.query_drop("SET SESSION sql_mode = 'STRICT_TRANS_TABLES'").await.unwrap();
        let m: Option<String> = c.query_first("SELECT @@session.sql_mode").await.unwrap();
        assert_eq!(m.as_deref(), Some("STRICT_TRANS_TABLES"));

        // DDL: index, add column, drop.
        c.query_drop("CREATE INDEX by_price ON items (price)").await.unwrap();
        c.query_drop("ALTER TABLE items ADD COLUMN note TEXT").await.unwrap();
        let note: Option<Option<String>> = c.query_first("SELECT note FROM items WHERE id = 3").await.unwrap();
        assert_eq!(note, Some(None));
        c.query_drop("DROP TABLE items").await.unwrap();
        let e = c.query_drop("SELECT * FROM items").await.unwrap_err();
        assert_eq!(server_code(e), 1146);
        c.query_drop("DROP TABLE IF EXISTS items").await.unwrap();
        c.query_drop("DROP DATABASE shop").await.unwrap();
        c.disconnect().await.unwrap();
    });
}

#[test]
fn every_column_type_round_trips_in_text_and_binary_protocols() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path(), &["--durability", "memory"]);
    rt().block_on(async {
        let mut c = srv.conn(None).await;
        c.query_drop("CREATE DATABASE types").await.unwrap();
        c.query_drop("USE types").await.unwrap();
        c.query_drop(
            "CREATE TABLE t (id BIGINT PRIMARY KEY, ti TINYINT, tu TINYINT UNSIGNED, si SMALLINT, mi MEDIUMINT, \
             i INT, bu BIGINT UNSIGNED, f FLOAT, d DOUBLE, dec_ DECIMAL(10,3), c CHAR(3), vc VARCHAR(10), tx TEXT, \
             bn VARBINARY(8), bl BLOB, dt DATE, dtm DATETIME, ts TIMESTAMP NULL, tm TIME, yr YEAR, en ENUM('a','b'), \
             js JSON)",
        )
        .await
        .unwrap();
        let insert = "INSERT INTO t VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
        let dt = MyValue::Date(2024, 2, 29, 0, 0, 0, 0);
        let dtm = MyValue::Date(2024, 2, 29, 13, 14, 15, 0);
        let tm = MyValue::Time(false, 0, 10, 20, 30, 0);
        let params: Vec<MyValue> = vec![
            1.into(),
            (-128).into(),
            255u8.into(),
            (-32768).into(),
            8_388_607.into(),
            (-2_147_483_648i64).into(),
            u64::MAX.into(),
            1.5f32.into(),
            2.25f64.into(),
            "1234.567".into(),
            "abc".into(),
            "héllo".into(),
            "long text".into(),
            MyValue::Bytes(vec![0, 1, 2, 255]),
            MyValue::Bytes(vec![9; 10]),
            dt.clone(),
            dtm.clone(),
            dtm.clone(),
            tm.clone(),
            2024.into(),
            "b".into(),
            "{\"k\": 1}".into(),
        ];
        c.exec_drop(insert, params).await.unwrap();
        c.query_drop(
            "INSERT INTO t (id, ti, tu, si, mi, i, bu, f, d, dec_, c, vc, tx, bn, bl, dt, dtm, ts, tm, yr, en, js) VALUES \
             (2, 127, 0, 32767, -8388608, 2147483647, 0, -0.5, -1e10, -0.001, '', 'x', '', X'00', '', '1999-12-31', \
             '1999-12-31 23:59:59', NULL, '-01:02:03', 1999, 'a', '[]')",
        )
        .await
        .unwrap();
        c.query_drop("INSERT INTO t (id) VALUES (3)").await.unwrap();

        type Wide = (i64, Option<i8>, Option<u8>, Option<i16>, Option<i32>, Option<i32>, Option<u64>, Option<f32>);
        type Wide2 = (Option<f64>, Option<String>, Option<String>, Option<String>, Option<String>, Option<Vec<u8>>, Option<Vec<u8>>);
        for binary in [false, true] {
            let q1 = "SELECT id, ti, tu, si, mi, i, bu, f FROM t ORDER BY id";
            let q2 = "SELECT d, dec_, c, vc, tx, bn, bl FROM t ORDER BY id";
            let q3 = "SELECT dt, dtm, ts, tm, yr, en, js FROM t ORDER BY id";
            let (a, b, r3): (Vec<Wide>, Vec<Wide2>, Vec<Row>) = if binary {
                (c.exec(q1, ()).await.unwrap(), c.exec(q2, ()).await.unwrap(), c.exec(q3, ()).await.unwrap())
            } else {
                (c.query(q1).await.unwrap(), c.query(q2).await.unwrap(), c.query(q3).await.unwrap())
            };
            assert_eq!(a.len(), 3, "binary={binary}");
            assert_eq!(
                a[0],
                (1, Some(-128), Some(255), Some(-32768), Some(8_388_607), Some(-2_147_483_648), Some(u64::MAX), Some(1.5)),
                "binary={binary}"
            );
            assert_eq!(a[1], (2, Some(127), Some(0), Some(32767), Some(-8_388_608), Some(2_147_483_647), Some(0), Some(-0.5)));
            assert_eq!(a[2], (3, None, None, None, None, None, None, None));
            assert_eq!(
                b[0],
                (
                    Some(2.25),
                    Some("1234.567".into()),
                    Some("abc".into()),
                    Some("héllo".into()),
                    Some("long text".into()),
                    Some(vec![0, 1, 2, 255]),
                    Some(vec![9; 10])
                ),
                "binary={binary}"
            );
            assert_eq!(b[1].0, Some(-1e10));
            assert_eq!(b[1].1.as_deref(), Some("-0.001"));
            let r = &r3[0];
            let cell = |i: usize| text_of(r.as_ref(i).unwrap());
            assert_eq!(cell(0), "2024-02-29", "binary={binary}");
            assert_eq!(cell(1), "2024-02-29 13:14:15", "binary={binary}");
            assert_eq!(cell(2), "2024-02-29 13:14:15", "binary={binary}");
            assert_eq!(cell(3), "10:20:30", "binary={binary}");
            assert_eq!(cell(4), "2024", "binary={binary}");
            assert_eq!(cell(5), "b");
            assert!(cell(6).contains("\"k\""));
            assert_eq!(r3[1].as_ref(2), Some(&MyValue::NULL));
            assert_eq!(text_of(r3[1].as_ref(3).unwrap()), "-01:02:03", "binary={binary}");
        }

        // Prepared SELECT with parameters (a reader lookup).
        let got: Option<String> = c.exec_first("SELECT vc FROM t WHERE id = ?", (1,)).await.unwrap();
        assert_eq!(got.as_deref(), Some("héllo"));
        let got: Option<String> = c.exec_first("SELECT vc FROM t WHERE id = ?", (2u64,)).await.unwrap();
        assert_eq!(got.as_deref(), Some("x"));
        // Prepared UPDATE and DELETE.
        c.exec_drop("UPDATE t SET vc = ? WHERE id = ?", ("it's", 3)).await.unwrap();
        let got: Option<String> = c.exec_first("SELECT vc FROM t WHERE id = ?", (3,)).await.unwrap();
        assert_eq!(got.as_deref(), Some("it's"));
        c.exec_drop("DELETE FROM t WHERE id = ?", (3,)).await.unwrap();
        let n: Option<i64> = c.query_first("SELECT COUNT(*) FROM t").await.unwrap();
        assert_eq!(n, Some(2));
        c.disconnect().await.unwrap();
    });
}

/// Writes are acknowledged before views apply them. A connection always
/// reads its own writes; with `ladle_read_consistency = STRONG` (per
/// connection, or `--read-consistency strong`, the default) a read also reflects every
/// write other connections had acknowledged before it, while a SESSION read
/// may not (yet). Propagation is slowed down by the test hook so that reads
/// that do not wait are caught.
#[test]
fn reads_wait_for_the_writes_their_consistency_level_requires() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start_env(
        dir.path(),
        &["--durability", "memory", "--read-consistency", "session"],
        &[("LADLE_PROPAGATION_DELAY_MS", "20")],
    );
    rt().block_on(async {
        let mut writer = srv.conn(None).await;
        writer.query_drop("CREATE DATABASE rc").await.unwrap();
        writer
            .query_drop("CREATE TABLE rc.v (id INT PRIMARY KEY, k INT NOT NULL)")
            .await
            .unwrap();
        writer.query_drop("USE rc").await.unwrap();
        let mut reader = srv.conn(Some("rc")).await;
        let level: String = reader
            .query_first("SELECT @@ladle_read_consistency")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(level, "SESSION");
        let bad = reader
            .query_drop("SET ladle_read_consistency = 'sometimes'")
            .await
            .unwrap_err();
        assert_eq!(server_code(bad), 1231);
        reader
            .query_drop("SET SESSION ladle_read_consistency = 'strong'")
            .await
            .unwrap();
        let level: String = reader
            .query_first("SELECT @@ladle_read_consistency")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(level, "STRONG");
        let count = "SELECT COUNT(*) FROM v WHERE k = 1";
        let mut eventual = srv.conn(Some("rc")).await;
        let mut stale_reads = 0;
        for n in 1..=30i64 {
            writer
                .query_drop(format!("INSERT INTO v VALUES ({n}, 1)"))
                .await
                .unwrap();
            // Another connection's write, SESSION level: eventually.
            let maybe: i64 = eventual.query_first(count).await.unwrap().unwrap();
            assert!(maybe <= n);
            if maybe < n {
                stale_reads += 1;
            }
            // Own write, default level.
            let own: i64 = writer.query_first(count).await.unwrap().unwrap();
            assert_eq!(own, n, "the writer's own read after write {n}");
            // Another connection's acknowledged write, STRONG level.
            writer
                .query_drop(format!("INSERT INTO v VALUES ({}, 2)", 1000 + n))
                .await
                .unwrap();
            let seen: i64 = reader
                .query_first("SELECT COUNT(*) FROM v WHERE k = 2")
                .await
                .unwrap()
                .unwrap();
            assert_eq!(seen, n, "a STRONG read after write {n} was acknowledged");
        }
        // Propagation is slowed down, so the SESSION reader must have run
        // ahead of it at least once (else nothing here is tested).
        assert!(stale_reads > 0, "no SESSION read ran ahead of propagation");
    });
}

/// One server per data directory: a second one on the same directory
/// exits with a message instead of touching the first one's files.
#[test]
fn a_second_server_on_the_same_data_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let _first = Server::start(dir.path(), &["--durability", "memory"]);
    let out = Command::new(BIN)
        .arg("--listen")
        .arg("127.0.0.1:0")
        .arg("--metrics-listen")
        .arg("127.0.0.1:0")
        .arg("--data-dir")
        .arg(dir.path())
        .arg("--durability")
        .arg("memory")
        .output()
        .expect("run a second ladle");
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("another ladle process is using the data directory"),
        "{text}"
    );
}

#[test]
fn transactions_commit_and_roll_back_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path(), &["--durability", "memory"]);
    rt().block_on(async {
        let mut c = srv.conn(None).await;
        c.query_drop("CREATE DATABASE tx").await.unwrap();
        c.query_drop("CREATE TABLE tx.acct (id INT PRIMARY KEY, bal INT NOT NULL)")
            .await
            .unwrap();
        c.query_drop("USE tx").await.unwrap();
        c.query_drop("INSERT INTO acct VALUES (1, 100), (2, 0)")
            .await
            .unwrap();
        let mut other = srv.conn(Some("tx")).await;

        c.query_drop("BEGIN").await.unwrap();
        c.query_drop("UPDATE acct SET bal = bal - 30 WHERE id = 1")
            .await
            .unwrap();
        assert_eq!(c.affected_rows(), 1);
        c.query_drop("UPDATE acct SET bal = bal + 30 WHERE id = 2")
            .await
            .unwrap();
        // Not visible to anyone before COMMIT.
        let b: Option<i32> = other
            .query_first("SELECT bal FROM acct WHERE id = 2")
            .await
            .unwrap();
        assert_eq!(b, Some(0));
        c.query_drop("COMMIT").await.unwrap();
        let rows: Vec<(i32, i32)> = other
            .query("SELECT id, bal FROM acct ORDER BY id")
            .await
            .unwrap();
        assert_eq!(rows, vec![(1, 70), (2, 30)]);

        c.query_drop("START TRANSACTION").await.unwrap();
        c.query_drop("DELETE FROM acct WHERE id = 1").await.unwrap();
        c.query_drop("ROLLBACK").await.unwrap();
        let n: Option<i64> = other
            .query_first("SELECT COUNT(*) FROM acct")
            .await
            .unwrap();
        assert_eq!(n, Some(2));

        // A duplicate key fails its statement inside the transaction...
        c.query_drop("SET autocommit = 0").await.unwrap();
        c.query_drop("INSERT INTO acct VALUES (3, 5)")
            .await
            .unwrap();
        let e = c
            .query_drop("INSERT INTO acct VALUES (1, 5)")
            .await
            .unwrap_err();
        assert_eq!(server_code(e), 1062);
        // ... and a concurrent writer of a key the transaction inserted
        // waits for its row lock, as in InnoDB (1205 past
        // innodb_lock_wait_timeout), then finds the key taken once the
        // transaction committed (1062).
        c.query_drop("INSERT INTO acct VALUES (5, 5)")
            .await
            .unwrap();
        other
            .query_drop("SET innodb_lock_wait_timeout = 1")
            .await
            .unwrap();
        let e = other
            .query_drop("INSERT INTO acct VALUES (5, 9)")
            .await
            .unwrap_err();
        assert_eq!(server_code(e), 1205);
        c.query_drop("COMMIT").await.unwrap();
        let e = other
            .query_drop("INSERT INTO acct VALUES (5, 9)")
            .await
            .unwrap_err();
        assert_eq!(server_code(e), 1062);
        other
            .query_drop("DELETE FROM acct WHERE id IN (3, 5)")
            .await
            .unwrap();
        c.query_drop("SET autocommit = 1").await.unwrap();
        let n: Option<i64> = other
            .query_first("SELECT COUNT(*) FROM acct")
            .await
            .unwrap();
        assert_eq!(n, Some(2));

        // The mysql_async transaction API.
        let mut t = c.start_transaction(Default::default()).await.unwrap();
        t.exec_drop("INSERT INTO acct VALUES (?, ?)", (4, 40))
            .await
            .unwrap();
        t.commit().await.unwrap();
        let b: Option<i32> = other
            .query_first("SELECT bal FROM acct WHERE id = 4")
            .await
            .unwrap();
        assert_eq!(b, Some(40));
    });
}

/// A PRIMARY KEY declared DESC comes back as declared after a restart
/// (SHOW INDEX's Collation D, SHOW CREATE TABLE's DESC), still unique,
/// still read in either order; DROP PRIMARY KEY after the restart takes
/// the order along.
#[test]
fn descending_primary_keys_come_back_after_kill_9() {
    let (_dir, srv) = restarted_after_kill_9(&[
        "CREATE DATABASE pk",
        "CREATE TABLE pk.t (a INT, b INT, v VARCHAR(5), PRIMARY KEY (a, b DESC))",
        "INSERT INTO pk.t VALUES (1, 1, 'x'), (1, 2, 'y'), (2, 1, 'z')",
        "CREATE TABLE pk.u (a INT NOT NULL, v INT)",
        "ALTER TABLE pk.u ADD PRIMARY KEY (a DESC)",
    ]);
    rt().block_on(async {
        let mut c = srv.conn(Some("pk")).await;
        let index: Vec<(String, String, String)> = c
            .query_map("SHOW INDEX FROM t", |r: Row| {
                (text_of(&r[2]), text_of(&r[4]), text_of(&r[5]))
            })
            .await
            .unwrap();
        assert_eq!(
            index,
            vec![
                ("PRIMARY".into(), "a".into(), "A".into()),
                ("PRIMARY".into(), "b".into(), "D".into()),
            ]
        );
        let (_, create): (String, String) =
            c.query_first("SHOW CREATE TABLE u").await.unwrap().unwrap();
        assert!(create.contains("PRIMARY KEY (`a` DESC)"), "{create}");
        let e = c
            .query_drop("INSERT INTO t VALUES (1, 2, 'w')")
            .await
            .unwrap_err();
        assert_eq!(server_code(e), 1062);
        let rows: Vec<(i64, i64)> = c
            .query("SELECT a, b FROM t ORDER BY a DESC, b DESC")
            .await
            .unwrap();
        assert_eq!(rows, vec![(2, 1), (1, 2), (1, 1)]);
        c.query_drop("ALTER TABLE u DROP PRIMARY KEY, ADD PRIMARY KEY (a)")
            .await
            .unwrap();
        let collation: Option<String> = c
            .query_first("SELECT COLLATION FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = 'pk' AND TABLE_NAME = 'u'")
            .await
            .unwrap();
        assert_eq!(collation.as_deref(), Some("A"));
    });
}

#[test]
fn errors_carry_mysql_codes() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path(), &["--durability", "memory"]);
    rt().block_on(async {
        let mut c = srv.conn(None).await;
        assert_eq!(
            server_code(c.query_drop("SELEC 1").await.unwrap_err()),
            1064
        );
        assert_eq!(
            server_code(c.query_drop("SELECT * FROM t").await.unwrap_err()),
            1046
        );
        assert_eq!(
            server_code(c.query_drop("USE nope").await.unwrap_err()),
            1049
        );
        c.query_drop("CREATE DATABASE e").await.unwrap();
        assert_eq!(
            server_code(c.query_drop("CREATE DATABASE e").await.unwrap_err()),
            1007
        );
        c.query_drop("USE e").await.unwrap();
        c.query_drop("CREATE TABLE t (id INT PRIMARY KEY, s VARCHAR(3) NOT NULL, n TINYINT)")
            .await
            .unwrap();
        assert_eq!(
            server_code(c.query_drop("CREATE TABLE t (id INT)").await.unwrap_err()),
            1050
        );
        assert_eq!(
            server_code(c.query_drop("SELECT * FROM missing").await.unwrap_err()),
            1146
        );
        assert_eq!(
            server_code(c.query_drop("SELECT nope FROM t").await.unwrap_err()),
            1054
        );
        assert_eq!(
            server_code(
                c.query_drop("INSERT INTO t (id) VALUES (1)")
                    .await
                    .unwrap_err()
            ),
            1364
        );
        assert_eq!(
            server_code(
                c.query_drop("INSERT INTO t VALUES (1, NULL, 1)")
                    .await
                    .unwrap_err()
            ),
            1048
        );
        assert_eq!(
            server_code(
                c.query_drop("INSERT INTO t VALUES (1, 'abcd', 1)")
                    .await
                    .unwrap_err()
            ),
            1406
        );
        assert_eq!(
            server_code(
                c.query_drop("INSERT INTO t VALUES (1, 'a', 300)")
                    .await
                    .unwrap_err()
            ),
            1264
        );
        assert_eq!(
            server_code(
                c.query_drop("INSERT INTO t VALUES (1, 'a')")
                    .await
                    .unwrap_err()
            ),
            1136
        );
        assert_eq!(
            server_code(
                c.query_drop("INSERT INTO t (id, zz) VALUES (1, 2)")
                    .await
                    .unwrap_err()
            ),
            1054
        );
        c.query_drop("INSERT INTO t VALUES (1, 'a', 1)")
            .await
            .unwrap();
        assert_eq!(
            server_code(
                c.query_drop("INSERT INTO t VALUES (1, 'b', 1)")
                    .await
                    .unwrap_err()
            ),
            1062
        );
        assert_eq!(
            server_code(c.query_drop("DROP TABLE missing").await.unwrap_err()),
            1051
        );
        assert_eq!(
            server_code(c.query_drop("SELECT @@no_such_variable").await.unwrap_err()),
            1193
        );
        assert_eq!(
            server_code(
                c.prep("SELECT * FROM missing WHERE id = ?")
                    .await
                    .unwrap_err()
            ),
            1146
        );
        // The connection still works after all of that.
        let one: Option<i64> = c.query_first("SELECT 1").await.unwrap();
        assert_eq!(one, Some(1));
    });
}

#[test]
fn password_is_checked() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start_with(dir.path(), &["--durability", "memory"], "s3cret");
    rt().block_on(async {
        let mut c = srv.conn(None).await;
        let one: Option<i64> = c.query_first("SELECT 1").await.unwrap();
        assert_eq!(one, Some(1));
        for bad in ["wrong", ""] {
            let opts: Opts = OptsBuilder::from_opts(srv.opts(None))
                .pass(Some(bad))
                .into();
            let e = Conn::new(opts).await.unwrap_err();
            assert_eq!(server_code(e), 1045, "password {bad:?}");
        }
        let opts: Opts = OptsBuilder::from_opts(srv.opts(None))
            .user(Some("nobody"))
            .into();
        assert_eq!(server_code(Conn::new(opts).await.unwrap_err()), 1045);
    });
}

/// Two servers started at the same moment, both asked for port 0 (the
/// same "port"), both serve: each binds a port of its own and says which
/// in its `--ports-file` (each answers `@@port` with the MySQL port it
/// reported, and /health on the metrics port it reported). Before: there
/// was no way to learn a port 0 server's ports (`--ports-file` was
/// refused), so harnesses handed servers ports found free, which another
/// process could take before the server bound them.
#[test]
fn servers_started_at_once_on_port_zero_both_serve() {
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let servers: Vec<Server> = std::thread::scope(|s| {
        let starts: Vec<_> = dirs
            .iter()
            .map(|d| s.spawn(|| Server::start(d.path(), &["--durability", "memory"])))
            .collect();
        starts.into_iter().map(|t| t.join().unwrap()).collect()
    });
    assert_ne!(servers[0].port, servers[1].port);
    assert_ne!(servers[0].metrics_port, servers[1].metrics_port);
    for srv in &servers {
        let health = http_get(srv.metrics_port, "/health").unwrap_or_default();
        assert!(health.starts_with("HTTP/1.1 200"), "{health}");
        let port: Option<u16> = rt().block_on(async {
            let mut c = srv.conn(None).await;
            c.query_first("SELECT @@port").await.unwrap()
        });
        assert_eq!(port, Some(srv.port), "the port it reported");
    }
}

/// A global status counter of the server `c` is connected to.
async fn global_status(c: &mut Conn, name: &str) -> u64 {
    let row: Option<(String, String)> = c
        .query_first(format!("SHOW GLOBAL STATUS LIKE '{name}'"))
        .await
        .unwrap();
    let (_, value) = row.unwrap_or_else(|| panic!("no status variable {name}"));
    value.parse().unwrap()
}

/// `Connections`, `Aborted_connects` and `Max_used_connections` mean what
/// they mean on MariaDB 10.11 (measured there, each attempt made as here):
/// every connection attempt counts in Connections, successful or not; an
/// attempt that fails before the connection is established (a wrong
/// password, an unknown database named at login, a malformed handshake, a
/// client closing before it, a refusal past max_connections: 1040)
/// counts in Aborted_connects too, a successful one does not; Max_used_connections is the most connections
/// open at once, kept after they close. Before: Aborted_connects and
/// Max_used_connections did not exist.
#[test]
fn connection_status_counters_mean_what_mariadb_says() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start_with(
        dir.path(),
        &["--durability", "memory", "--max-connections", "3"],
        "pw",
    );
    rt().block_on(async {
        let mut c = srv.conn(None).await;
        // (Connections, Aborted_connects) once one more attempt was made,
        // `aborted` or not.
        let mut seen = status_pair(&mut c).await;
        let mut expect = |aborted: u64| {
            seen = (seen.0 + 1, seen.1 + aborted);
            seen
        };
        drop(srv.conn(None).await);
        let want = expect(0);
        wait_for_pair(&mut c, want, "a successful login").await;

        let wrong = OptsBuilder::from_opts(srv.opts(None)).pass(Some("wrong"));
        assert_eq!(server_code(Conn::new(wrong).await.unwrap_err()), 1045);
        let want = expect(1);
        wait_for_pair(&mut c, want, "a wrong password").await;

        let unknown = srv.opts(Some("no_such_db"));
        assert_eq!(server_code(Conn::new(unknown).await.unwrap_err()), 1049);
        let want = expect(1);
        wait_for_pair(&mut c, want, "an unknown database").await;

        let mut s = raw_connect(srv.port);
        let _ = s.write_all(&[0x05, 0, 0, 1, 0xde, 0xad, 0xbe, 0xef, 0x00]);
        let _ = s.read_to_end(&mut Vec::new());
        let want = expect(1);
        wait_for_pair(&mut c, want, "a malformed handshake").await;

        drop(raw_connect(srv.port));
        let want = expect(1);
        wait_for_pair(&mut c, want, "a client gone before logging in").await;

        let held = [srv.conn(None).await, srv.conn(None).await];
        assert_eq!(global_status(&mut c, "Max_used_connections").await, 3);
        let _ = (expect(0), expect(0));
        let refused = Conn::new(srv.opts(None)).await.unwrap_err();
        assert_eq!(server_code(refused), 1040);
        let want = expect(1);
        wait_for_pair(&mut c, want, "a refusal (1040)").await;
        drop(held);
        let mut closed = false;
        for _ in 0..100 {
            if global_status(&mut c, "Threads_connected").await == 1 {
                closed = true;
                break;
            }
            a_moment().await;
        }
        assert!(closed, "the held connections closed");
        assert_eq!(
            global_status(&mut c, "Max_used_connections").await,
            3,
            "kept after they close"
        );
    });
}

/// (Connections, Aborted_connects) of the server `c` is connected to.
async fn status_pair(c: &mut Conn) -> (u64, u64) {
    (
        global_status(c, "Connections").await,
        global_status(c, "Aborted_connects").await,
    )
}

/// Waits (the server sees a failed attempt end a moment after the
/// client) until [`status_pair`] is `want`.
async fn wait_for_pair(c: &mut Conn, want: (u64, u64), what: &str) {
    let mut now = status_pair(c).await;
    for _ in 0..100 {
        if now == want {
            return;
        }
        a_moment().await;
        now = status_pair(c).await;
    }
    assert_eq!(now, want, "(Connections, Aborted_connects) after {what}");
}

#[test]
fn connections_beyond_the_limit_get_1040() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(
        dir.path(),
        &["--durability", "memory", "--max-connections", "2"],
    );
    rt().block_on(async {
        let a = srv.conn(None).await;
        let b = srv.conn(None).await;
        let e = Conn::new(srv.opts(None)).await.unwrap_err();
        assert_eq!(server_code(e), 1040);
        drop(a);
        a_moment().await;
        // A slot frees up once a client leaves.
        let mut ok = None;
        for _ in 0..50 {
            if let Ok(c) = Conn::new(srv.opts(None)).await {
                ok = Some(c);
                break;
            }
            a_moment().await;
        }
        assert!(ok.is_some());
        drop(b);
    });
}

async fn a_moment() {
    tokio::time::sleep(Duration::from_millis(50)).await;
}

/// Reads the server greeting from a raw socket.
fn raw_connect(port: u16) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut hdr = [0u8; 4];
    s.read_exact(&mut hdr).unwrap();
    let len = usize::from(hdr[0]) | usize::from(hdr[1]) << 8 | usize::from(hdr[2]) << 16;
    let mut body = vec![0; len];
    s.read_exact(&mut body).unwrap();
    assert_eq!(body[0], 10, "protocol version 10 greeting");
    s
}

#[test]
fn malformed_input_gets_an_error_or_a_closed_socket_and_others_keep_working() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path(), &["--durability", "memory"]);
    // Garbage instead of a handshake response: an error packet or EOF, not
    // a hang.
    let mut s = raw_connect(srv.port);
    let _ = s.write_all(&[0x05, 0, 0, 1, 0xde, 0xad, 0xbe, 0xef, 0x00]);
    let mut got = Vec::new();
    assert!(
        s.read_to_end(&mut got).is_ok(),
        "server kept a garbage handshake open"
    );
    assert!(got.is_empty() || got[4] == 0xff, "{got:?}");
    // A truncated packet, then hang up.
    let mut s = raw_connect(srv.port);
    let _ = s.write_all(&[0x40, 0, 0, 1, 1, 2, 3]);
    drop(s);
    // A packet chain beyond max_allowed_packet (64 MiB): refused with 1153
    // and closed.
    let mut s = raw_connect(srv.port);
    let chunk = vec![0u8; 1 << 20];
    let mut refused = false;
    'send: for seq in 1u8..=6 {
        if s.write_all(&[0xff, 0xff, 0xff, seq]).is_err() {
            refused = true;
            break;
        }
        for _ in 0..16 {
            if s.write_all(&chunk).is_err() {
                refused = true;
                break 'send;
            }
        }
    }
    let mut got = Vec::new();
    let closed = s.read_to_end(&mut got).is_ok();
    assert!(refused || closed, "server kept reading an oversize packet");
    if got.len() >= 7 {
        assert_eq!(&got[4..7], &[0xff, 0x81, 0x04], "ERR 1153");
    }
    drop(s);

    rt().block_on(async {
        let mut c = srv.conn(None).await;
        // A well-formed client: unknown statement id and junk SQL.
        assert_eq!(
            server_code(c.query_drop("\u{1}\u{2}garbage").await.unwrap_err()),
            1064
        );
        let one: Option<i64> = c.query_first("SELECT 1").await.unwrap();
        assert_eq!(one, Some(1));
    });
}

#[test]
fn oversize_query_gets_1153() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path(), &["--durability", "memory"]);
    rt().block_on(async {
        let mut c = srv.conn(None).await;
        let big = format!("SELECT '{}'", "x".repeat(65 * 1024 * 1024));
        let e = c.query_drop(big).await.unwrap_err();
        match e {
            mysql_async::Error::Server(s) => assert_eq!(s.code, 1153),
            mysql_async::Error::Io(_) | mysql_async::Error::Driver(_) => {} // closed while still sending
            other => panic!("unexpected {other:?}"),
        }
        let mut c2 = srv.conn(None).await;
        let one: Option<i64> = c2.query_first("SELECT 1").await.unwrap();
        assert_eq!(one, Some(1));
    });
}

#[test]
fn acknowledged_writes_survive_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let mut srv = Server::start(dir.path(), &[]);
    rt().block_on(async {
        let mut c = srv.conn(None).await;
        c.query_drop("CREATE DATABASE dur").await.unwrap();
        c.query_drop("CREATE TABLE dur.t (id INT PRIMARY KEY AUTO_INCREMENT, v VARCHAR(10))")
            .await
            .unwrap();
        for i in 0..20 {
            c.exec_drop("INSERT INTO dur.t (v) VALUES (?)", (format!("v{i}"),))
                .await
                .unwrap();
        }
    });
    srv.kill9();
    let srv = Server::start(dir.path(), &[]);
    rt().block_on(async {
        let mut c = srv.conn(Some("dur")).await;
        let n: Option<i64> = c.query_first("SELECT COUNT(*) FROM t").await.unwrap();
        assert_eq!(n, Some(20));
        let last: Option<String> = c
            .query_first("SELECT v FROM t WHERE id = 20")
            .await
            .unwrap();
        assert_eq!(last.as_deref(), Some("v19"));
    });
}

/// A server on a new data directory that ran `statements`, was killed
/// with SIGKILL and started again on the same directory.
fn restarted_after_kill_9(statements: &[&str]) -> (tempfile::TempDir, Server) {
    let dir = tempfile::tempdir().unwrap();
    let mut srv = Server::start(dir.path(), &[]);
    rt().block_on(async {
        let mut c = srv.conn(None).await;
        for sql in statements {
            c.query_drop(*sql).await.unwrap();
        }
    });
    srv.kill9();
    let srv = Server::start(dir.path(), &[]);
    (dir, srv)
}

/// ALTER TABLE's rewrite is durable with its schema: after kill -9 the
/// table comes back in its new shape (columns, converted values, renamed
/// table, indexes, constraints, comments, a converted collation), and
/// writes and reads use it.
#[test]
fn altered_tables_come_back_altered_after_kill_9() {
    let (_dir, srv) = restarted_after_kill_9(&[
            "CREATE DATABASE mig",
            "CREATE TABLE mig.t (id INT PRIMARY KEY, a VARCHAR(10), b INT, KEY by_b (b))",
            "INSERT INTO mig.t VALUES (1, '10', 5), (2, '20', 6)",
            "SELECT a FROM mig.t WHERE b = 5",
            "ALTER TABLE mig.t DROP COLUMN b, MODIFY a INT NOT NULL FIRST, ADD UNIQUE KEY ua (a), ADD CONSTRAINT small CHECK (a < 100)",
            "RENAME TABLE mig.t TO mig.u",
            "CREATE TABLE mig.c (id INT PRIMARY KEY, s VARCHAR(5) COMMENT 'col') COMMENT='tbl'",
            "INSERT INTO mig.c VALUES (1, 'a'), (2, 'A')",
            "ALTER TABLE mig.c CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
    ]);
    rt().block_on(async {
        let mut c = srv.conn(Some("mig")).await;
        let rows: Vec<(i64, i64)> = c.query("SELECT * FROM u ORDER BY id").await.unwrap();
        assert_eq!(rows, vec![(10, 1), (20, 2)]);
        let id: Option<i64> = c
            .query_first("SELECT id FROM u WHERE a = 20")
            .await
            .unwrap();
        assert_eq!(id, Some(2));
        let e = c
            .query_drop("INSERT INTO u VALUES (10, 3)")
            .await
            .unwrap_err();
        assert_eq!(server_code(e), 1062);
        let e = c
            .query_drop("INSERT INTO u VALUES (500, 3)")
            .await
            .unwrap_err();
        assert_eq!(server_code(e), 4025);
        let e = c.query_drop("SELECT * FROM t").await.unwrap_err();
        assert_eq!(server_code(e), 1146);
        c.query_drop("INSERT INTO u VALUES (30, 3)").await.unwrap();
        let n: Option<i64> = c.query_first("SELECT COUNT(*) FROM u").await.unwrap();
        assert_eq!(n, Some(3));
        let table: Option<(String, String)> = c
            .query_first("SELECT TABLE_COMMENT, TABLE_COLLATION FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'mig' AND TABLE_NAME = 'c'")
            .await
            .unwrap();
        assert_eq!(table, Some(("tbl".into(), "utf8mb4_bin".into())));
        let column: Option<(String, String)> = c
            .query_first("SELECT COLUMN_COMMENT, COLLATION_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'mig' AND TABLE_NAME = 'c' AND COLUMN_NAME = 's'")
            .await
            .unwrap();
        assert_eq!(column, Some(("col".into(), "utf8mb4_bin".into())));
        let n: Option<i64> = c
            .query_first("SELECT COUNT(*) FROM c WHERE s = 'a'")
            .await
            .unwrap();
        assert_eq!(n, Some(1));
    });
}

/// MySQL 8's functional key parts: the hidden column and its index come
/// back after a restart, still hidden, still enforcing UNIQUE, still
/// following writes; DROP INDEX after the restart takes the column along.
#[test]
fn functional_indexes_come_back_after_kill_9() {
    let (_dir, srv) = restarted_after_kill_9(&[
            "CREATE DATABASE fx",
            "CREATE TABLE fx.t (id INT PRIMARY KEY, weight INT, name VARCHAR(20), KEY k_sum ((weight + id)))",
            "INSERT INTO fx.t VALUES (1, -5, 'Ann'), (2, 3, 'bob')",
            "CREATE INDEX idx ON fx.t ((ABS(weight)) DESC)",
            "CREATE UNIQUE INDEX u ON fx.t ((LOWER(name)))",
    ]);
    rt().block_on(async {
        let mut c = srv.conn(Some("fx")).await;
        let rows: Vec<(i64, i64, String)> = c.query("SELECT * FROM t ORDER BY id").await.unwrap();
        assert_eq!(rows, vec![(1, -5, "Ann".into()), (2, 3, "bob".into())]);
        let e = c
            .query_drop("INSERT INTO t VALUES (3, 1, 'ANN')")
            .await
            .unwrap_err();
        assert_eq!(server_code(e), 1062);
        c.query_drop("INSERT INTO t VALUES (3, 5, 'Cy')").await.unwrap();
        let ids: Vec<i64> = c
            .query("SELECT id FROM t WHERE ABS(weight) = 5 ORDER BY id")
            .await
            .unwrap();
        assert_eq!(ids, vec![1, 3]);
        let fields: Vec<String> = c
            .query_map("DESCRIBE t", |r: Row| text_of(&r[0]))
            .await
            .unwrap();
        assert_eq!(fields, vec!["id", "weight", "name"]);
        let (_, create): (String, String) =
            c.query_first("SHOW CREATE TABLE t").await.unwrap().unwrap();
        assert!(create.contains("KEY `idx` ((abs(`weight`)) DESC)"), "{create}");
        assert!(create.contains("UNIQUE KEY `u` ((lower(`name`)))"), "{create}");
        assert!(create.contains("KEY `k_sum` ((`weight` + `id`))"), "{create}");
        assert!(!create.contains("hidden"), "{create}");
        // Django's introspection: SHOW INDEX names the index, with no
        // column for the expression, Non_unique 0 for the UNIQUE one and
        // the DESC part's Collation D.
        let index: Vec<(String, i64, String, String)> = c
            .query_map("SHOW INDEX FROM t", |r: Row| {
                let non_unique = text_of(&r[1]).parse().unwrap();
                (text_of(&r[2]), non_unique, text_of(&r[4]), text_of(&r[5]))
            })
            .await
            .unwrap();
        let u = ("u".into(), 0, "NULL".into(), "A".into());
        let idx = ("idx".into(), 1, "NULL".into(), "D".into());
        assert!(index.contains(&u), "{index:?}");
        assert!(index.contains(&idx), "{index:?}");
        c.query_drop("DROP INDEX u ON t").await.unwrap();
        c.query_drop("INSERT INTO t VALUES (4, 1, 'ANN')").await.unwrap();
        let n: Option<i64> = c
            .query_first("SELECT COUNT(*) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = 'fx' AND TABLE_NAME = 't'")
            .await
            .unwrap();
        // PRIMARY, k_sum and idx.
        assert_eq!(n, Some(3));
    });
}

#[test]
fn metrics_health_and_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let mut srv = Server::start(
        dir.path(),
        &["--durability", "memory", "--view-idle-timeout", "0"],
    );
    rt().block_on(async {
        let mut c = srv.conn(None).await;
        let _: Option<i64> = c.query_first("SELECT 1").await.unwrap();
        let _ = c.query_drop("SELEC").await;
        // One reader miss, filled by an upquery.
        c.query_drop("CREATE DATABASE m").await.unwrap();
        c.query_drop("CREATE TABLE m.t (id INT PRIMARY KEY)")
            .await
            .unwrap();
        let n: Option<i64> = c
            .query_first("SELECT COUNT(*) FROM m.t WHERE id = 1")
            .await
            .unwrap();
        assert_eq!(n, Some(0));
    });
    let health = http_get(srv.metrics_port, "/health").unwrap();
    assert!(health.starts_with("HTTP/1.1 200"));
    let m = http_get(srv.metrics_port, "/metrics").unwrap();
    assert!(
        m.contains("ladle_queries_total{kind=\"select\",outcome=\"ok\"}"),
        "{m}"
    );
    assert!(m.contains("ladle_errors_total{code=\"1064\"} 1"));
    assert!(m.contains("ladle_connections_total"));
    assert!(m.contains("ladle_query_duration_seconds_bucket"));
    let fills: i64 = ["unlocked", "conflict", "locked"]
        .iter()
        .map(|p| {
            let prefix = format!("ladle_view_fills{{path=\"{p}\"}} ");
            m.lines()
                .find_map(|l| l.strip_prefix(prefix.as_str()))
                .unwrap_or_else(|| panic!("no {prefix} in {m}"))
                .trim()
                .parse::<i64>()
                .unwrap()
        })
        .sum();
    assert!(fills >= 1, "{m}");
    assert_process_metrics(&m);
    let pid = srv.child.id();
    let status = Command::new("kill")
        .arg("-TERM")
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success());
    let exit = srv.child.wait().unwrap();
    assert!(exit.success(), "exit status {exit:?}");
}

/// The standard process metrics that benchmarks read (`lobsters-bench
/// --metrics-url`): CPU seconds and resident memory, with plausible values.
fn assert_process_metrics(m: &str) {
    let value = |name: &str| metric(m, name);
    assert!(value("process_cpu_seconds_total") >= 0.0);
    assert!(value("process_resident_memory_bytes") > 1e6, "{m}");
    assert!(value("process_open_fds") >= 3.0, "{m}");
    assert!(value("process_start_time_seconds") > 1e9, "{m}");
}

#[test]
fn views_show_views_and_explain_graph() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path(), &["--durability", "memory"]);
    rt().block_on(async {
        let mut c = srv.conn(None).await;
        c.query_drop("CREATE DATABASE v").await.unwrap();
        c.query_drop("USE v").await.unwrap();
        c.query_drop("CREATE TABLE s (id INT PRIMARY KEY, uid INT, score INT)")
            .await
            .unwrap();
        c.query_drop("INSERT INTO s VALUES (1, 1, 5), (2, 1, 7), (3, 2, 1)")
            .await
            .unwrap();
        c.query_drop("CREATE VIEW totals AS SELECT uid, SUM(score) AS total FROM s GROUP BY uid")
            .await
            .unwrap();
        let rows: Vec<(i32, i64)> = c
            .query("SELECT uid, total FROM totals ORDER BY uid")
            .await
            .unwrap();
        assert_eq!(rows, vec![(1, 12), (2, 1)]);
        c.query_drop("INSERT INTO s VALUES (4, 2, 10)")
            .await
            .unwrap();
        let t: Option<i64> = c
            .exec_first("SELECT total FROM totals WHERE uid = ?", (2,))
            .await
            .unwrap();
        assert_eq!(t, Some(11));
        let tables: Vec<(String, String)> = c.query("SHOW FULL TABLES").await.unwrap();
        assert_eq!(
            tables,
            vec![
                ("s".into(), "BASE TABLE".into()),
                ("totals".into(), "VIEW".into())
            ]
        );
        let create: Option<(String, String, String, String)> =
            c.query_first("SHOW CREATE VIEW totals").await.unwrap();
        assert!(create.unwrap().1.contains("GROUP BY uid"));
        let views: Vec<Row> = c.query("SHOW VIEWS").await.unwrap();
        assert!(!views.is_empty());
        let graph: Vec<String> = c
            .query("EXPLAIN GRAPH SELECT * FROM s WHERE uid = 1")
            .await
            .unwrap();
        assert!(graph.iter().any(|l| l.contains("Reader")), "{graph:?}");
        c.query_drop("DROP VIEW totals").await.unwrap();
        let tables: Vec<String> = c.query("SHOW TABLES").await.unwrap();
        assert_eq!(tables, vec!["s".to_string()]);
    });
}

/// A read answered with its clock fixed (NOW() inside an aggregate) is
/// answered by a view made for that statement, dropped after it: running
/// it every second must not leave a view per second behind.
#[test]
fn reads_with_the_clock_fixed_leave_no_view_behind() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path(), &["--durability", "memory"]);
    rt().block_on(async {
        let mut c = srv.conn(None).await;
        c.query_drop("CREATE DATABASE clk").await.unwrap();
        c.query_drop("USE clk").await.unwrap();
        c.query_drop("CREATE TABLE ev (id INT PRIMARY KEY, at DATETIME, grp INT)")
            .await
            .unwrap();
        c.query_drop("INSERT INTO ev VALUES (1, NULL, 1), (2, '2001-01-01 00:00:00', 2)")
            .await
            .unwrap();
        for _ in 0..3 {
            let rows: Vec<(i32, i32)> = c
                .query("SELECT grp, MAX(COALESCE(at, NOW())) > '2020-01-01' FROM ev GROUP BY grp ORDER BY grp")
                .await
                .unwrap();
            assert_eq!(rows, vec![(1, 1), (2, 0)]);
            tokio::time::sleep(Duration::from_millis(1100)).await;
        }
        let views: Vec<Row> = c.query("SHOW VIEWS").await.unwrap();
        let about_ev = views
            .iter()
            .filter(|r| {
                let query: Option<String> = r.get(1);
                query.is_some_and(|q| q.contains("FROM ev"))
            })
            .count();
        assert_eq!(about_ev, 0, "{views:?}");
    });
}

fn read_packet(s: &mut TcpStream) -> (u8, Vec<u8>) {
    let mut hdr = [0u8; 4];
    s.read_exact(&mut hdr).unwrap();
    let len = usize::from(hdr[0]) | usize::from(hdr[1]) << 8 | usize::from(hdr[2]) << 16;
    let mut body = vec![0; len];
    s.read_exact(&mut body).unwrap();
    (hdr[3], body)
}

fn write_packet(s: &mut TcpStream, seq: u8, payload: &[u8]) {
    let len = payload.len();
    let mut p = vec![
        (len & 0xff) as u8,
        ((len >> 8) & 0xff) as u8,
        ((len >> 16) & 0xff) as u8,
        seq,
    ];
    p.extend_from_slice(payload);
    s.write_all(&p).unwrap();
}

fn native_scramble(password: &[u8], salt: &[u8]) -> Vec<u8> {
    use sha1::{Digest, Sha1};
    let stage1 = Sha1::digest(password);
    let stage2 = Sha1::digest(stage1);
    let mut h = Sha1::new();
    h.update(salt);
    h.update(stage2);
    let mix = h.finalize();
    stage1.iter().zip(mix.iter()).map(|(a, b)| a ^ b).collect()
}

/// A MySQL 8 client opens with a caching_sha2_password response; the server
/// must switch it to mysql_native_password and then accept the password.
#[test]
fn caching_sha2_clients_are_switched_to_native_password() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start_with(dir.path(), &["--durability", "memory"], "pw");
    let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let (_, greeting) = read_packet(&mut s);
    assert_eq!(greeting[0], 10);
    let caps: u32 = 0x1 | 0x200 | 0x2000 | 0x8000 | 0x8_0000 | 0x20_0000;
    let mut resp = caps.to_le_bytes().to_vec();
    resp.extend_from_slice(&(16u32 << 20).to_le_bytes());
    resp.push(33);
    resp.extend_from_slice(&[0; 23]);
    resp.extend_from_slice(b"root\0");
    resp.push(32);
    resp.extend_from_slice(&[0x5a; 32]);
    resp.extend_from_slice(b"caching_sha2_password\0");
    write_packet(&mut s, 1, &resp);
    let (seq, switch) = read_packet(&mut s);
    assert_eq!(
        switch[0], 0xfe,
        "expected an AuthSwitchRequest, got {switch:?}"
    );
    let name_end = switch.iter().position(|&b| b == 0).unwrap();
    assert_eq!(&switch[1..name_end], b"mysql_native_password");
    let salt = &switch[name_end + 1..name_end + 21];
    write_packet(&mut s, seq + 1, &native_scramble(b"pw", salt));
    let (_, ok) = read_packet(&mut s);
    assert_eq!(ok[0], 0x00, "expected OK after the switch, got {ok:?}");
}

/// The newest RocksDB write-ahead log file under `dir`.
fn newest_wal(dir: &Path) -> std::path::PathBuf {
    let mut logs: Vec<_> = std::fs::read_dir(dir.join("db"))
        .expect("db dir")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    logs.sort();
    logs.pop().expect("a WAL file")
}

/// Runs `ladle` over `dir` with `extra` flags until it exits by itself (a
/// refusal) or becomes ready; its exit status (None when it started) and
/// its output. The server, if started, is left running in the returned
/// child.
fn start_or_refuse(dir: &Path, extra: &[&str]) -> (Option<i32>, String, Child, u16, u16) {
    let (mut cmd, ports) = ladle_command(BIN, dir);
    let out_path = dir.with_extension("out");
    let out = std::fs::File::create(&out_path).expect("output file");
    let err = out.try_clone().expect("output file");
    let mut child = cmd
        .args(["--durability", "sync"])
        .args(extra)
        .env("LADLE_PASSWORD", "")
        .stdout(out)
        .stderr(err)
        .spawn()
        .expect("spawn ladle");
    let read = || std::fs::read_to_string(&out_path).unwrap_or_default();
    // (A refusal may come before the listeners are bound: no ports then.)
    let bound = ports.wait(&mut child, Duration::from_secs(60)).ok();
    let (port, metrics_port) = bound.map_or((0, 0), |b| (b.mysql, b.metrics));
    for _ in 0..1200 {
        if let Ok(Some(status)) = child.try_wait() {
            return (
                Some(status.code().unwrap_or(-1)),
                read(),
                child,
                port,
                metrics_port,
            );
        }
        if http_get(metrics_port, "/health").is_some_and(|b| b.starts_with("HTTP/1.1 200")) {
            return (None, read(), child, port, metrics_port);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    panic!("ladle neither started nor exited within 60 s:\n{}", read());
}

#[test]
fn a_damaged_wal_refuses_to_start_unless_recovery_is_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut srv = Server::start(&data, &["--durability", "sync"]);
    rt().block_on(async {
        let mut c = srv.conn(None).await;
        c.query_drop("CREATE DATABASE w").await.unwrap();
        c.query_drop("CREATE TABLE w.t (id INT PRIMARY KEY, v VARCHAR(40))")
            .await
            .unwrap();
        for i in 0..500 {
            c.exec_drop(
                "INSERT INTO w.t VALUES (?, ?)",
                (i, format!("acknowledged row {i}")),
            )
            .await
            .unwrap();
        }
    });
    srv.kill9();
    // 16 flipped bytes in the middle of the WAL.
    let wal = newest_wal(&data);
    let mut bytes = std::fs::read(&wal).unwrap();
    assert!(bytes.len() > 4096, "WAL of {} bytes", bytes.len());
    let mid = bytes.len() / 2;
    for b in &mut bytes[mid..mid + 16] {
        *b ^= 0xFF;
    }
    std::fs::write(&wal, &bytes).unwrap();

    let (status, output, _child, _, _) = start_or_refuse(&data, &[]);
    assert!(
        matches!(status, Some(code) if code != 0),
        "started on a damaged WAL:\n{output}"
    );
    assert!(
        output.contains("write-ahead log") && output.contains("--wal-recovery point-in-time"),
        "{output}"
    );

    let (status, output, mut child, port, metrics_port) =
        start_or_refuse(&data, &["--wal-recovery", "point-in-time"]);
    assert_eq!(
        status, None,
        "refused with point-in-time recovery:\n{output}"
    );
    assert!(
        output.contains("recovering to the last consistent point"),
        "{output}"
    );
    let rows = rt().block_on(async {
        let opts: Opts = OptsBuilder::default()
            .ip_or_hostname("127.0.0.1")
            .tcp_port(port)
            .user(Some("root"))
            .prefer_socket(false)
            .into();
        let mut c = Conn::new(opts).await.expect("connect");
        let n: Option<i64> = c.query_first("SELECT COUNT(*) FROM w.t").await.unwrap();
        n.unwrap_or(0)
    });
    // Recovery stopped at the damage: the rows after it are gone (which is
    // why it takes the operator's word).
    assert!(rows < 500, "{rows} rows");
    // What was dropped is counted, in the log and as metrics: a write
    // batch per INSERT after the last consistent point (the damaged one
    // too, unless its framing was hit).
    let metrics = http_get(metrics_port, "/metrics").unwrap_or_default();
    let gauge = |name: &str| -> i64 {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("{name} not in /metrics:\n{metrics}"))
    };
    let dropped = gauge("ladle_wal_recovery_dropped_records");
    // (A view snapshot's own records may fall after the damage too.)
    assert!(
        (499..=520).contains(&(rows + dropped)),
        "{rows} rows kept, {dropped} batches counted as dropped"
    );
    assert!(gauge("ladle_wal_recovery_dropped_bytes") > 0);
    assert!(gauge("ladle_wal_recovery_dropped_writes") >= dropped);
    assert!(
        output.contains(&format!("dropped_records={dropped}")),
        "{output}"
    );
    // The damaged log is kept, byte for byte, beside the database.
    let kept: Vec<_> = std::fs::read_dir(&data)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("damaged-wal-"))
        })
        .collect();
    assert_eq!(kept.len(), 1, "{output}");
    let copy = kept[0].join(wal.file_name().unwrap());
    assert_eq!(std::fs::read(&copy).ok(), Some(bytes), "{}", copy.display());
    assert!(output.contains(&kept[0].display().to_string()), "{output}");
    let _ = child.kill();
    let _ = child.wait();
}

/// A small tmpfs mounted at a directory (root only), unmounted on drop.
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    /// `None` where mounting is not allowed (not root, no CAP_SYS_ADMIN).
    fn mount(at: &Path, size: &str) -> Option<Tmpfs> {
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .stderr(Stdio::null())
            .status()
            .ok()?
            .success();
        ok.then(|| Tmpfs(at.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[test]
fn a_full_disk_refuses_writes_with_1021_keeps_reads_and_recovers_without_restart() {
    let dir = tempfile::tempdir().unwrap();
    let small = dir.path().join("small");
    std::fs::create_dir(&small).unwrap();
    let Some(_fs) = Tmpfs::mount(&small, "64m") else {
        eprintln!("skipped: cannot mount a tmpfs here (needs root)");
        return;
    };
    let data = small.join("data");
    let srv = Server::start(&data, &["--durability", "sync", "--disk-reserve", "8M"]);
    // Most of the file system taken by something else, to be freed later.
    let filler = small.join("filler");
    std::fs::write(&filler, vec![7u8; 40 << 20]).unwrap();
    rt().block_on(async {
        let mut c = srv.conn(None).await;
        c.query_drop("CREATE DATABASE full").await.unwrap();
        c.query_drop("CREATE TABLE full.t (id INT PRIMARY KEY, v TEXT)")
            .await
            .unwrap();
        let row = "x".repeat(16 << 10);
        let mut acknowledged = 0i64;
        let mut refused = None;
        for i in 0..4000 {
            match c
                .exec_drop("INSERT INTO full.t VALUES (?, ?)", (i, &row))
                .await
            {
                Ok(()) => acknowledged += 1,
                Err(e) => {
                    refused = Some(server_code(e));
                    break;
                }
            }
        }
        assert_eq!(refused, Some(1021), "after {acknowledged} rows");
        assert!(acknowledged > 0);
        // Reads go on, with every acknowledged row.
        let n: Option<i64> = c.query_first("SELECT COUNT(*) FROM full.t").await.unwrap();
        assert_eq!(n, Some(acknowledged));
        // Space freed: writes resume on the same server.
        std::fs::remove_file(&filler).unwrap();
        c.exec_drop("INSERT INTO full.t VALUES (?, ?)", (100_000, "after"))
            .await
            .unwrap();
        let n: Option<i64> = c.query_first("SELECT COUNT(*) FROM full.t").await.unwrap();
        assert_eq!(n, Some(acknowledged + 1));
    });
    drop(srv);
}

/// Resident memory of process `pid` (VmRSS), in bytes.
fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmRSS in kB")
        * 1024
}

/// A value of an unlabelled (or fully labelled) metric line.
fn metric(m: &str, name: &str) -> f64 {
    let prefix = format!("{name} ");
    m.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .unwrap_or_else(|| panic!("no {name} in {m}"))
        .trim()
        .parse()
        .unwrap()
}

/// A table costs storage little memory of its own: each table and index
/// is a RocksDB column family, and per-family buffers sized by the write
/// buffer (a memtable bloom filter zeroed at CREATE TABLE) once cost 1.3
/// MB each, 750 MB of resident memory for 200 small tables with an index;
/// an application's schema (Django's test suite creates hundreds of
/// tables) must not cost more than its data.
#[test]
#[ignore = "measures resident memory: run alone (scripts/test.sh: --ignored --test-threads=1)"]
fn many_tables_cost_little_resident_memory() {
    const TABLES: u64 = 150;
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(
        dir.path(),
        &["--durability", "async", "--snapshot-interval", "0"],
    );
    let pid = srv.child.id();
    rt().block_on(async {
        let mut c = srv.conn(None).await;
        c.query_drop("CREATE DATABASE many").await.unwrap();
        c.query_drop("USE many").await.unwrap();
        // One table first: what any table costs once (the engine's first
        // use of a path) is not in the per-table figure.
        c.query_drop("CREATE TABLE t (id INT PRIMARY KEY, v INT, KEY (v))")
            .await
            .unwrap();
        c.query_drop("INSERT INTO t VALUES (1, 1)").await.unwrap();
        let baseline = rss_bytes(pid);
        for i in 0..TABLES {
            c.query_drop(format!(
                "CREATE TABLE t{i} (id INT PRIMARY KEY, v INT, KEY (v))"
            ))
            .await
            .unwrap();
            c.query_drop(format!("INSERT INTO t{i} VALUES (1, {i})"))
                .await
                .unwrap();
        }
        let n: Option<i64> = c
            .query_first(format!("SELECT v FROM t{} WHERE id = 1", TABLES - 1))
            .await
            .unwrap();
        assert_eq!(n, Some(TABLES as i64 - 1));
        let per_table = rss_bytes(pid).saturating_sub(baseline) / TABLES;
        eprintln!("{} KB of resident memory per table", per_table >> 10);
        assert!(
            per_table < 1 << 20,
            "each table with one index grew resident memory by {per_table} bytes"
        );
    });
    drop(srv);
}

/// `--memory-limit` bounds the process, not only the view state's own
/// estimate: reading ten times the limit in distinct keys keeps the
/// server's resident memory within 1.5 times the limit above what it held
/// before (answers right, keys evicted), a statement whose working set
/// would pass the limit fails with 1041 instead of growing the process,
/// and the server goes on answering. (MariaDB streams the three-way join
/// instead; this is the bound a materializing engine keeps.)
#[test]
#[ignore = "measures resident memory: run alone (scripts/test.sh: --ignored --test-threads=1)"]
fn memory_limit_bounds_the_process_and_refuses_oversized_statements() {
    const LIMIT: u64 = 32 << 20;
    const GROUPS: i64 = 2_000;
    const PER_GROUP: i64 = 10;
    // Each row of the view below holds 100 * 160 = 16,000 bytes of text:
    // 160 KB a key, 320 MB for every key, ten times the limit.
    const REPEATS: usize = 160;
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(
        dir.path(),
        &[
            "--durability",
            "memory",
            "--memory-limit",
            &LIMIT.to_string(),
            "--snapshot-interval",
            "0",
        ],
    );
    let pid = srv.child.id();
    let pad = |id: i64| format!("{id:0>100}");
    rt().block_on(async {
        let mut c = srv.conn(None).await;
        c.query_drop("CREATE DATABASE m").await.unwrap();
        c.query_drop("USE m").await.unwrap();
        c.query_drop("CREATE TABLE big (id INT PRIMARY KEY, grp INT NOT NULL, s VARCHAR(100) NOT NULL, KEY (grp))")
            .await
            .unwrap();
        let ids: Vec<i64> = (0..GROUPS * PER_GROUP).collect();
        for chunk in ids.chunks(1_000) {
            let values: Vec<String> = chunk
                .iter()
                .map(|id| format!("({id}, {}, '{}')", id % GROUPS, pad(*id)))
                .collect();
            c.query_drop(format!("INSERT INTO big VALUES {}", values.join(",")))
                .await
                .unwrap();
        }
        let read = format!("SELECT id, REPEAT(s, {REPEATS}) FROM big WHERE grp = ?");
        // The view and the client's buffers exist before the baseline.
        let _: Vec<(i64, String)> = c.exec(&read, (0,)).await.unwrap();
        let baseline = rss_bytes(pid);
        let mut peak = baseline;
        for grp in 0..GROUPS {
            let rows: Vec<(i64, String)> = c.exec(&read, (grp,)).await.unwrap();
            assert_eq!(rows.len(), PER_GROUP as usize, "group {grp}");
            for (id, text) in rows {
                assert_eq!(id % GROUPS, grp);
                assert_eq!(text, pad(id).repeat(REPEATS), "row {id}");
            }
            if grp % 50 == 0 {
                peak = peak.max(rss_bytes(pid));
            }
        }
        peak = peak.max(rss_bytes(pid));
        let grown = peak.saturating_sub(baseline);
        eprintln!(
            "RSS {} MB before, {} MB at peak: grew {} MB for a {} MB limit",
            baseline >> 20,
            peak >> 20,
            grown >> 20,
            LIMIT >> 20
        );
        assert!(
            grown <= LIMIT * 3 / 2,
            "RSS grew {grown} bytes (limit {LIMIT}): {} -> {}",
            baseline,
            peak
        );

        // A three-way join of 2,000 groups of 10: 2M rows to count, far
        // past half the limit, refused before they are built.
        let before = rss_bytes(pid);
        let e = c
            .query_drop("SELECT COUNT(*) FROM big a JOIN big b ON a.grp = b.grp JOIN big c ON b.grp = c.grp")
            .await
            .unwrap_err();
        assert_eq!(server_code(e), 1041);
        let after = rss_bytes(pid);
        assert!(
            after.saturating_sub(before) <= LIMIT * 3 / 2,
            "RSS {before} -> {after} for a refused statement"
        );
        // The same shape, filtered below the join, is small and answered.
        let n: Option<i64> = c
            .query_first("SELECT COUNT(*) FROM big a, big b, big c WHERE a.id < 3 AND b.id < 3 AND c.id < 3")
            .await
            .unwrap();
        assert_eq!(n, Some(27));
        let rows: Vec<(i64, String)> = c.exec(&read, (7,)).await.unwrap();
        assert_eq!(rows.len(), PER_GROUP as usize);
    });
    let m = http_get(srv.metrics_port, "/metrics").unwrap();
    assert!(metric(&m, "process_resident_memory_bytes") > 1e6, "{m}");
    assert_eq!(metric(&m, "ladle_memory_limit_bytes"), LIMIT as f64);
    let evicted: f64 = m
        .lines()
        .filter(|l| l.starts_with("ladle_view_evicted_keys{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(evicted >= 1_000.0, "{m}");
    assert!(m.contains("ladle_errors_total{code=\"1041\"} 1"), "{m}");
}

/// Threads of process `pid` now (/proc).
fn thread_count(pid: u32) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("Threads")
}

/// Statements run on as many threads as run at once, also when the cores
/// are contended (issue #17): tokio's blocking pool, which ran them before,
/// started a thread whenever the one that had just answered a connection
/// was descheduled before it counted itself free, so 4 connections on 2
/// busy cores added threads past 4 (here 7-9; 24 over 4 minutes of reads
/// in scripts/rss-contention.sh), each allocator thread heap holding view
/// state (about 1 MB of resident memory a thread under a 256 MB limit).
/// Here 4 connections of writes and uncached point reads, beside two
/// spinning threads, may add at most 4 threads (3 beside the one the
/// set-up used, and one for any other).
#[test]
#[ignore = "measures the server's threads under CPU contention: run alone (scripts/test.sh: --ignored --test-threads=1)"]
fn statement_threads_stay_within_the_statements_in_flight_under_cpu_contention() {
    const CONNECTIONS: usize = 4;
    const STATEMENTS: i64 = 300;
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(
        dir.path(),
        &["--durability", "memory", "--snapshot-interval", "0"],
    );
    let pid = srv.child.id();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (baseline, peak) = rt().block_on(async {
        let mut c = srv.conn(None).await;
        c.query_drop("CREATE DATABASE th").await.unwrap();
        c.query_drop("CREATE TABLE th.t (id INT PRIMARY KEY, v INT NOT NULL)")
            .await
            .unwrap();
        let mut conns = Vec::new();
        for _ in 0..CONNECTIONS {
            let mut c = srv.conn(Some("th")).await;
            let _: Option<i64> = c
                .query_first("SELECT v FROM t WHERE id = -1")
                .await
                .unwrap();
            conns.push(c);
        }
        let baseline = thread_count(pid);
        let spinners: Vec<_> = (0..2)
            .map(|_| {
                let stop = std::sync::Arc::clone(&stop);
                std::thread::spawn(move || {
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        let sampler = {
            let stop = std::sync::Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut peak = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    peak = peak.max(thread_count(pid));
                    std::thread::sleep(Duration::from_millis(5));
                }
                peak
            })
        };
        let load: Vec<_> = conns
            .into_iter()
            .enumerate()
            .map(|(n, mut c)| {
                tokio::spawn(async move {
                    for i in 0..STATEMENTS {
                        let id = i * CONNECTIONS as i64 + n as i64;
                        c.query_drop(format!("INSERT INTO t VALUES ({id}, {i})"))
                            .await
                            .unwrap();
                        // A key no earlier read cached: a miss, so not
                        // answered on the connection's task.
                        let v: Option<i64> = c
                            .query_first(format!("SELECT v FROM t WHERE id = {id}"))
                            .await
                            .unwrap();
                        assert_eq!(v, Some(i));
                    }
                })
            })
            .collect();
        for l in load {
            l.await.unwrap();
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for s in spinners {
            s.join().unwrap();
        }
        (baseline, sampler.join().unwrap())
    });
    eprintln!(
        "threads: {baseline} before, at most {peak} under {CONNECTIONS} connections on busy cores"
    );
    assert!(
        peak <= baseline + CONNECTIONS,
        "{CONNECTIONS} connections grew the server from {baseline} to {peak} threads"
    );
    let m = http_get(srv.metrics_port, "/metrics").unwrap();
    let statement_threads = metric(&m, "ladle_statement_threads");
    assert!(
        (1.0..=CONNECTIONS as f64).contains(&statement_threads),
        "{statement_threads} statement threads"
    );
}
