//! Snapshots and warm restarts, end to end: a real `ladle` process, killed
//! with SIGKILL (or crashed on purpose at each snapshot phase with
//! `LADLE_SNAPSHOT_CRASH`), restarted over the same data directory, and
//! asked the same questions. Every answer is compared with a recompute from
//! the rows the test wrote, and with MariaDB when `LADLE_TEST_MARIADB_URL`
//! is set.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::time::Duration;

use mysql::prelude::*;
use mysql::{Conn, Opts, OptsBuilder, Row};

mod common;
use common::{http_get, ladle_command};

const BIN: &str = env!("CARGO_BIN_EXE_ladle");

/// Every query the tests ask, before and after restarts.
const ALL_COUNTS: &str = "SELECT article_id, COUNT(*) FROM votes GROUP BY article_id";
const KEY_COUNT: &str =
    "SELECT article_id, COUNT(*) FROM votes WHERE article_id = ? GROUP BY article_id";
const KEY_TITLES: &str =
    "SELECT v.id, a.title FROM votes v JOIN articles a ON a.id = v.article_id WHERE v.article_id = ?";
/// The keys read through the parameterized views.
const KEYS: [i64; 8] = [1, 2, 3, 5, 8, 13, 21, 34];
const ARTICLES: i64 = 40;

/// A running `ladle`; killed on drop. Its log goes to `<dir>/../ladle-N.log`.
struct Ladle {
    child: Child,
    port: u16,
    metrics_port: u16,
    log: PathBuf,
}

impl Ladle {
    /// Starts ladle and waits until `/health` says 200. Every non-200
    /// answer seen on the way must be 503 (recovering).
    fn start(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Ladle {
        let mut l = Ladle::spawn(dir, args, env);
        l.wait_ready();
        l
    }

    fn spawn(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Ladle {
        let logs = dir.parent().expect("data dir has a parent");
        let n = std::fs::read_dir(logs).map(|d| d.count()).unwrap_or(0);
        let log = logs.join(format!("ladle-{n}.log"));
        let file = std::fs::File::create(&log).expect("log file");
        let (mut cmd, ports) = ladle_command(BIN, dir);
        cmd.args(args)
            .env_remove("LADLE_SNAPSHOT_CRASH")
            .env_remove("LADLE_SNAPSHOT_INTERVAL")
            .env("LADLE_LOG", "info")
            .stdout(file.try_clone().expect("log file"))
            .stderr(file);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn ladle");
        let bound = ports
            .wait(&mut child, Duration::from_secs(60))
            .unwrap_or_else(|e| {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                panic!("{e}; log:\n{text}")
            });
        Ladle {
            child,
            port: bound.mysql,
            metrics_port: bound.metrics,
            log,
        }
    }

    /// Waits for `/health` 200.
    fn wait_ready(&mut self) {
        for _ in 0..1200 {
            if let Ok(Some(_)) = self.child.try_wait() {
                panic!("ladle exited during start-up; log:\n{}", self.log_text());
            }
            if let Some(resp) = http_get(self.metrics_port, "/health") {
                if resp.starts_with("HTTP/1.1 200") {
                    return;
                }
                assert!(
                    resp.starts_with("HTTP/1.1 503"),
                    "/health before ready: {resp}"
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("ladle did not become ready; log:\n{}", self.log_text());
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn opts(&self, db: Option<&str>) -> Opts {
        OptsBuilder::new()
            .ip_or_hostname(Some("127.0.0.1"))
            .tcp_port(self.port)
            .user(Some("root"))
            .pass(Some(""))
            .db_name(db)
            .prefer_socket(false)
            .into()
    }

    fn conn(&self) -> Conn {
        Conn::new(self.opts(Some("lob"))).expect("connect to ladle")
    }

    /// A metric's value from `/metrics` (the first sample of that name).
    fn metric(&self, name: &str) -> Option<f64> {
        let body = http_get(self.metrics_port, "/metrics")?;
        body.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
            let (n, v) = l.split_once(' ')?;
            (n == name).then(|| v.trim().parse().ok())?
        })
    }

    /// A `ladle_recovery_*` metric once recovery has finished: a warm
    /// start serves (and /health says 200) before interior state is
    /// installed, and the server sets `ladle_recovery_seconds` last.
    fn recovery_metric(&self, name: &str) -> Option<f64> {
        for _ in 0..500 {
            if self.metric("ladle_recovery_seconds").unwrap_or(0.0) > 0.0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.metric(name)
    }

    fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn sigterm(&mut self) -> ExitStatus {
        let status = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status()
            .expect("run kill");
        assert!(status.success());
        self.child.wait().expect("wait for ladle")
    }

    /// Waits for the process to end by itself (an abort on purpose).
    fn wait_exit(&mut self) -> ExitStatus {
        self.child.wait().expect("wait for ladle")
    }
}

impl Drop for Ladle {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// The rows the test wrote: the recompute every answer is checked against.
#[derive(Default)]
struct Model {
    titles: BTreeMap<i64, String>,
    /// vote id -> (article id, user id)
    votes: BTreeMap<i64, (i64, i64)>,
    next_vote: i64,
}

impl Model {
    fn all_counts(&self) -> Vec<(i64, i64)> {
        let mut c: BTreeMap<i64, i64> = BTreeMap::new();
        for (a, _) in self.votes.values() {
            *c.entry(*a).or_default() += 1;
        }
        c.into_iter().collect()
    }

    fn key_count(&self, key: i64) -> Vec<(i64, i64)> {
        let n = self.votes.values().filter(|(a, _)| *a == key).count() as i64;
        if n == 0 {
            vec![]
        } else {
            vec![(key, n)]
        }
    }

    fn key_titles(&self, key: i64) -> Vec<(i64, String)> {
        self.votes
            .iter()
            .filter(|(_, (a, _))| *a == key)
            .map(|(id, _)| (*id, self.titles[&key].clone()))
            .collect()
    }
}

/// Ladle plus the optional MariaDB oracle, written to in lockstep.
struct World {
    model: Model,
    /// The MariaDB connection and its scratch database (dropped at the end).
    maria: Option<Conn>,
    maria_db: String,
    /// Varies the generated votes from round to round.
    round: i64,
}

impl World {
    fn new(name: &str) -> World {
        let db = format!("ladle_snap_{name}_{}", std::process::id());
        let maria = std::env::var("LADLE_TEST_MARIADB_URL").ok().map(|url| {
            let opts = Opts::from_url(&url).expect("LADLE_TEST_MARIADB_URL");
            let mut c = Conn::new(opts).expect("connect to MariaDB");
            c.query_drop(format!("DROP DATABASE IF EXISTS {db}"))
                .unwrap();
            c.query_drop(format!("CREATE DATABASE {db}")).unwrap();
            c.query_drop(format!("USE {db}")).unwrap();
            c
        });
        World {
            model: Model::default(),
            maria,
            maria_db: db,
            round: 0,
        }
    }

    fn exec(&mut self, ladle: &mut Conn, sql: &str) {
        ladle
            .query_drop(sql)
            .unwrap_or_else(|e| panic!("ladle: {sql}: {e}"));
        if let Some(m) = &mut self.maria {
            m.query_drop(sql)
                .unwrap_or_else(|e| panic!("MariaDB: {sql}: {e}"));
        }
    }

    fn create_schema(&mut self, ladle: &Ladle) {
        let mut root = Conn::new(ladle.opts(None)).expect("connect");
        root.query_drop("CREATE DATABASE lob").unwrap();
        let mut c = ladle.conn();
        self.exec(
            &mut c,
            "CREATE TABLE articles (id INT PRIMARY KEY, title VARCHAR(64) NOT NULL)",
        );
        self.exec(
            &mut c,
            "CREATE TABLE votes (id INT PRIMARY KEY, article_id INT NOT NULL, \
             user_id INT NOT NULL, KEY article_id (article_id))",
        );
        let rows: Vec<String> = (1..=ARTICLES)
            .map(|i| {
                let t = format!("article {i}");
                self.model.titles.insert(i, t.clone());
                format!("({i}, '{t}')")
            })
            .collect();
        self.exec(
            &mut c,
            &format!("INSERT INTO articles VALUES {}", rows.join(", ")),
        );
    }

    /// Inserts `n` votes spread unevenly over the articles.
    fn vote(&mut self, c: &mut Conn, n: i64) {
        self.round += 1;
        let mut rows = Vec::new();
        for i in 0..n {
            let id = self.model.next_vote + 1;
            self.model.next_vote = id;
            let article = (i * i + self.round * 7) % ARTICLES + 1;
            let user = (id * 31) % 97;
            self.model.votes.insert(id, (article, user));
            rows.push(format!("({id}, {article}, {user})"));
        }
        for chunk in rows.chunks(200) {
            self.exec(c, &format!("INSERT INTO votes VALUES {}", chunk.join(", ")));
        }
    }

    /// Deletes every vote of `user` and renames `article`: deltas that
    /// shrink groups and change joined rows.
    fn churn(&mut self, c: &mut Conn, user: i64, article: i64) {
        self.exec(c, &format!("DELETE FROM votes WHERE user_id = {user}"));
        self.model.votes.retain(|_, (_, u)| *u != user);
        self.round += 1;
        let title = format!("renamed {article} in round {}", self.round);
        self.exec(
            c,
            &format!("UPDATE articles SET title = '{title}' WHERE id = {article}"),
        );
        self.model.titles.insert(article, title);
    }

    /// Asks every question and checks each answer against the recompute
    /// (and MariaDB).
    fn check(&mut self, c: &mut Conn, when: &str) {
        let mut all: Vec<(i64, i64)> = c.query(ALL_COUNTS).unwrap();
        all.sort_unstable();
        assert_eq!(all, self.model.all_counts(), "{when}: {ALL_COUNTS}");
        if let Some(m) = &mut self.maria {
            let mut theirs: Vec<(i64, i64)> = m.query(ALL_COUNTS).unwrap();
            theirs.sort_unstable();
            assert_eq!(all, theirs, "{when}: MariaDB disagrees on {ALL_COUNTS}");
        }
        for key in KEYS {
            let got: Vec<(i64, i64)> = c.exec(KEY_COUNT, (key,)).unwrap();
            assert_eq!(got, self.model.key_count(key), "{when}: key {key}");
            let mut titles: Vec<(i64, String)> = c.exec(KEY_TITLES, (key,)).unwrap();
            titles.sort_unstable();
            assert_eq!(titles, self.model.key_titles(key), "{when}: key {key}");
            if let Some(m) = &mut self.maria {
                let theirs: Vec<(i64, i64)> = m.exec(KEY_COUNT, (key,)).unwrap();
                assert_eq!(got, theirs, "{when}: MariaDB disagrees, key {key}");
                let mut theirs: Vec<(i64, String)> = m.exec(KEY_TITLES, (key,)).unwrap();
                theirs.sort_unstable();
                assert_eq!(titles, theirs, "{when}: MariaDB disagrees, key {key}");
            }
        }
    }
}

impl Drop for World {
    fn drop(&mut self) {
        if let Some(m) = &mut self.maria {
            let _ = m.query_drop(format!("DROP DATABASE IF EXISTS {}", self.maria_db));
        }
    }
}

/// `SNAPSHOT VIEWS`: (epoch, nodes, nodes_written).
fn snapshot_views(c: &mut Conn) -> (u64, u64, u64) {
    let row: Row = c
        .query_first("SNAPSHOT VIEWS")
        .unwrap()
        .expect("SNAPSHOT VIEWS returns a row");
    let epoch: u64 = row.get("epoch").unwrap();
    let nodes: u64 = row.get("nodes").unwrap();
    let written: u64 = row.get("nodes_written").unwrap();
    let _: u64 = row.get("bytes_written").unwrap();
    let _: u64 = row.get("total_ms").unwrap();
    (epoch, nodes, written)
}

fn retained_epochs(c: &mut Conn) -> Vec<u64> {
    let rows: Vec<Row> = c.query("SHOW SNAPSHOTS").unwrap();
    rows.iter().map(|r| r.get("epoch").unwrap()).collect()
}

/// Per keyed view (non-empty key columns): (cached_keys, misses).
fn keyed_views(c: &mut Conn) -> Vec<(u64, u64)> {
    let rows: Vec<Row> = c.query("SHOW VIEWS").unwrap();
    rows.iter()
        .filter(|r| {
            let keys: String = r.get("key_columns").unwrap();
            !keys.is_empty()
        })
        .map(|r| {
            (
                r.get::<u64, _>("cached_keys").unwrap(),
                r.get::<u64, _>("misses").unwrap(),
            )
        })
        .collect()
}

/// Kills `srv` with SIGKILL and starts it again on `dir`, checking that
/// recovery used snapshot `epoch`.
fn killed_and_restarted_from(mut srv: Ladle, dir: &Path, args: &[&str], epoch: u64) -> Ladle {
    srv.kill9();
    let srv = Ladle::start(dir, args, &[]);
    assert_eq!(
        srv.recovery_metric("ladle_recovery_epoch"),
        Some(epoch as f64)
    );
    srv
}

fn data_dir(tmp: &tempfile::TempDir) -> PathBuf {
    tmp.path().join("data")
}

/// Creates the schema, writes, warms every view; returns the open server.
fn loaded(world: &mut World, dir: &Path, args: &[&str]) -> Ladle {
    let srv = Ladle::start(dir, args, &[]);
    world.create_schema(&srv);
    let mut c = srv.conn();
    world.vote(&mut c, 400);
    world.check(&mut c, "after loading");
    srv
}

#[test]
fn warm_restart_restores_cached_keys_and_replays_later_writes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = data_dir(&tmp);
    let mut world = World::new("warm");
    // Periodic snapshots off: SNAPSHOT VIEWS still takes one.
    let args = ["--snapshot-interval", "0"];
    let srv = loaded(&mut world, &dir, &args);
    let mut c = srv.conn();
    world.churn(&mut c, 5, 3);
    world.check(&mut c, "before the snapshot");
    let (epoch, nodes, written) = snapshot_views(&mut c);
    assert!(
        epoch >= 1 && nodes > 0 && written > 0,
        "{epoch} {nodes} {written}"
    );
    assert_eq!(retained_epochs(&mut c).last(), Some(&epoch));
    // Writes after the snapshot: the restart must replay them.
    world.vote(&mut c, 150);
    world.churn(&mut c, 11, 8);
    drop(c);
    let srv = killed_and_restarted_from(srv, &dir, &args, epoch);
    assert!(srv.recovery_metric("ladle_recovery_rows").unwrap_or(0.0) > 0.0);
    let mut c = srv.conn();
    // Restored, not cold: the keyed views hold the keys read before.
    let before = keyed_views(&mut c);
    assert!(
        before
            .iter()
            .filter(|(keys, _)| *keys >= KEYS.len() as u64)
            .count()
            >= 2,
        "keyed views after restart: {before:?}\n{}",
        srv.log_text()
    );
    world.check(&mut c, "after the warm restart");
    // Every key was answered from restored state: no reader missed.
    let after = keyed_views(&mut c);
    assert!(after.iter().all(|(_, misses)| *misses == 0), "{after:?}");
    // And the views keep up with new writes.
    world.vote(&mut c, 50);
    world.check(&mut c, "after more writes");
}

/// Bytes of RocksDB write-ahead log under `dir` (`db/*.log`).
fn wal_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir.join("db"))
        .expect("db directory")
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
        .map(|e| e.metadata().map_or(0, |m| m.len()))
        .sum()
}

/// A snapshot flushes the memtables, so RocksDB's write-ahead log holds
/// only what was written after it: a restart after kill -9 replays no
/// more than the views do (it replayed everything since the last memtable
/// flush, which under a steady load is most of the data).
#[test]
fn a_snapshot_retires_the_write_ahead_log() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = data_dir(&tmp);
    let mut world = World::new("wal");
    let args = ["--snapshot-interval", "0"];
    let mut srv = loaded(&mut world, &dir, &args);
    let mut c = srv.conn();
    world.churn(&mut c, 5, 3);
    let before = wal_bytes(&dir);
    assert!(before > 16 * 1024, "the load is in the log: {before} bytes");
    snapshot_views(&mut c);
    let after = wal_bytes(&dir);
    assert!(
        after < 4 * 1024,
        "{after} bytes of log left after the snapshot ({before} before)"
    );
    // Writes after the snapshot are in the new log and survive the crash.
    world.vote(&mut c, 50);
    assert!(wal_bytes(&dir) > after);
    drop(c);
    srv.kill9();
    let srv = Ladle::start(&dir, &args, &[]);
    let mut c = srv.conn();
    world.check(&mut c, "after kill -9 following a snapshot");
}

/// A start after a crash replays the change log written since the last
/// snapshot, and then takes a snapshot at once: a server killed again
/// before the next interval replays nothing twice. (It replayed the same
/// batches, plus whatever came after, at every restart until an interval
/// passed: under load with the 60 s interval and kills more often, the
/// time to /health grew with each round.)
#[test]
fn a_start_after_a_crash_snapshots_what_it_replayed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = data_dir(&tmp);
    let mut world = World::new("replayed");
    let args = ["--snapshot-interval", "1h"];
    let mut srv = loaded(&mut world, &dir, &args);
    let mut c = srv.conn();
    snapshot_views(&mut c);
    world.vote(&mut c, 60);
    drop(c);
    srv.kill9();

    let mut srv = Ladle::start(&dir, &args, &[]);
    let replayed = srv
        .recovery_metric("ladle_recovery_replayed_batches")
        .expect("recovery metric");
    assert!(
        replayed >= 1.0,
        "{replayed} batches replayed after the crash"
    );
    // The snapshot after the replay (the interval is an hour away).
    let mut taken = 0.0;
    for _ in 0..300 {
        taken = srv.metric("ladle_snapshots_total").unwrap_or(0.0);
        if taken >= 1.0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(taken >= 1.0, "no snapshot after a recovery that replayed");
    let mut c = srv.conn();
    world.check(&mut c, "after the first restart");
    drop(c);
    srv.kill9();

    let srv = Ladle::start(&dir, &args, &[]);
    let again = srv
        .recovery_metric("ladle_recovery_replayed_batches")
        .expect("recovery metric");
    assert_eq!(
        again, 0.0,
        "the second restart replayed {again} batches again"
    );
    let mut c = srv.conn();
    world.check(&mut c, "after the second restart");
}

/// Starts with a published epoch, crashes the next snapshot at `phase`,
/// restarts, and checks the answers and which epoch was used.
fn crash_during_snapshot(phase: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = data_dir(&tmp);
    let mut world = World::new(&format!("crash_{phase}"));
    let args = ["--snapshot-interval", "1h"];
    let mut srv = loaded(&mut world, &dir, &args);
    let mut c = srv.conn();
    let (first, _, _) = snapshot_views(&mut c);
    world.churn(&mut c, 7, 2);
    drop(c);
    srv.kill9();

    let mut srv = Ladle::start(&dir, &args, &[("LADLE_SNAPSHOT_CRASH", phase)]);
    let mut c = srv.conn();
    world.vote(&mut c, 120);
    world.check(&mut c, &format!("before crashing at {phase}"));
    let crashed = c.query_drop("SNAPSHOT VIEWS");
    assert!(
        crashed.is_err(),
        "SNAPSHOT VIEWS should have crashed the server"
    );
    let status = srv.wait_exit();
    assert!(!status.success(), "ladle exited with {status:?}");
    assert!(
        srv.log_text().contains("LADLE_SNAPSHOT_CRASH"),
        "{}",
        srv.log_text()
    );

    let srv = Ladle::start(&dir, &args, &[]);
    let used = srv
        .recovery_metric("ladle_recovery_epoch")
        .expect("recovery metric");
    assert!(
        used == first as f64 || used == -1.0,
        "crash at {phase}: recovered epoch {used}, expected {first} or a cold start"
    );
    let mut c = srv.conn();
    assert_eq!(retained_epochs(&mut c), vec![first], "crash at {phase}");
    world.check(&mut c, &format!("after crashing at {phase}"));
    // The epoch number of the torn snapshot is not reused for a different one.
    let (next, _, _) = snapshot_views(&mut c);
    assert!(next > first);
    world.vote(&mut c, 30);
    world.check(
        &mut c,
        &format!("after crashing at {phase} and a new snapshot"),
    );
}

#[test]
fn kill_while_capturing() {
    crash_during_snapshot("capture");
}

#[test]
fn kill_while_writing_files() {
    crash_during_snapshot("write");
}

#[test]
fn kill_between_files_and_manifest() {
    crash_during_snapshot("manifest");
}

#[test]
fn kill_during_manifest_rename() {
    crash_during_snapshot("rename");
}

/// Two epochs; the newest one's own files are damaged by `damage` while the
/// server is down: the restart uses the older epoch, answers stay right.
fn damaged_newest_epoch(name: &str, damage: fn(&Path)) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = data_dir(&tmp);
    let mut world = World::new(name);
    let args = ["--snapshot-interval", "1h"];
    let mut srv = loaded(&mut world, &dir, &args);
    let mut c = srv.conn();
    let (first, _, _) = snapshot_views(&mut c);
    world.vote(&mut c, 100);
    world.churn(&mut c, 3, 1);
    world.check(&mut c, "before the second snapshot");
    let (second, _, written) = snapshot_views(&mut c);
    assert!(second > first && written > 0);
    world.vote(&mut c, 40);
    drop(c);
    srv.kill9();

    let epoch_dir = dir.join("snapshots").join(format!("{second:020}"));
    let node_file = std::fs::read_dir(&epoch_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().is_some_and(|n| n != "MANIFEST"))
        .max_by_key(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
        .expect("the second epoch wrote a node file");
    damage(&node_file);

    let srv = Ladle::start(&dir, &args, &[]);
    assert_eq!(
        srv.recovery_metric("ladle_recovery_epoch"),
        Some(first as f64),
        "{}",
        srv.log_text()
    );
    assert!(
        srv.recovery_metric("ladle_recovery_rejected_epochs")
            .unwrap_or(0.0)
            >= 1.0
    );
    let mut c = srv.conn();
    world.check(&mut c, &format!("after {name}"));
}

#[test]
fn corrupted_snapshot_file_falls_back_to_the_previous_epoch() {
    damaged_newest_epoch("corrupt", |path| {
        let mut bytes = std::fs::read(path).unwrap();
        let (mid, end) = (bytes.len() / 2, (bytes.len() / 2 + 4).min(bytes.len()));
        for b in &mut bytes[mid..end] {
            *b ^= 0x5a;
        }
        std::fs::write(path, bytes).unwrap();
    });
}

#[test]
fn truncated_snapshot_file_falls_back_to_the_previous_epoch() {
    damaged_newest_epoch("truncated", |path| {
        let len = std::fs::metadata(path).unwrap().len();
        let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        f.set_len(len / 2).unwrap();
    });
}

#[test]
fn clean_shutdown_takes_a_snapshot_and_periodic_snapshots_run() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = data_dir(&tmp);
    let mut world = World::new("shutdown");
    let args = ["--snapshot-interval", "1s"];
    let mut srv = loaded(&mut world, &dir, &args);
    let mut c = srv.conn();
    // The scheduler publishes on its own.
    let mut periodic = Vec::new();
    for _ in 0..600 {
        periodic = retained_epochs(&mut c);
        if !periodic.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !periodic.is_empty(),
        "no periodic snapshot\n{}",
        srv.log_text()
    );
    // The counter moves just after the epoch is published.
    let mut published = 0.0;
    for _ in 0..200 {
        published = srv.metric("ladle_snapshots_total").unwrap_or(0.0);
        if published >= 1.0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(published >= 1.0, "ladle_snapshots_total = {published}");
    world.churn(&mut c, 13, 21);
    world.vote(&mut c, 60);
    world.check(&mut c, "before SIGTERM");
    drop(c);
    let status = srv.sigterm();
    assert!(status.success(), "exit status {status:?}");
    assert!(
        srv.log_text().contains("taking a final snapshot"),
        "{}",
        srv.log_text()
    );

    let srv = Ladle::start(&dir, &args, &[]);
    let used = srv.recovery_metric("ladle_recovery_epoch").unwrap();
    assert!(used >= 1.0, "recovered epoch {used}\n{}", srv.log_text());
    // The final snapshot came after every write: nothing to replay.
    assert_eq!(
        srv.recovery_metric("ladle_recovery_replayed_batches"),
        Some(0.0)
    );
    let mut c = srv.conn();
    let views = keyed_views(&mut c);
    assert!(
        views.iter().any(|(keys, _)| *keys >= KEYS.len() as u64),
        "{views:?}"
    );
    world.check(&mut c, "after a clean restart");
}

#[test]
fn health_is_503_until_recovery_finishes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = data_dir(&tmp);
    let mut world = World::new("health");
    let args = ["--snapshot-interval", "1h"];
    let mut srv = loaded(&mut world, &dir, &args);
    let mut c = srv.conn();
    world.vote(&mut c, 3000);
    world.check(&mut c, "before the snapshot");
    snapshot_views(&mut c);
    drop(c);
    srv.kill9();

    // Poll from the moment the process starts: nothing but 503 (or no
    // listener yet) until 200, and once 200, the views answer correctly.
    let srv = Ladle::spawn(&dir, &args, &[]);
    let mut seen_503 = false;
    let mut ready = false;
    for _ in 0..20_000 {
        match http_get(srv.metrics_port, "/health") {
            Some(r) if r.starts_with("HTTP/1.1 200") => {
                ready = true;
                break;
            }
            Some(r) => {
                assert!(r.starts_with("HTTP/1.1 503"), "{r}");
                seen_503 = true;
            }
            None => std::thread::sleep(Duration::from_millis(3)),
        }
    }
    assert!(ready, "never ready\n{}", srv.log_text());
    eprintln!("observed 503 while recovering: {seen_503}");
    assert!(srv.recovery_metric("ladle_recovery_seconds").is_some());
    let mut c = srv.conn();
    world.check(&mut c, "right after /health turned 200");
}

/// (epoch, longest_chain) of the newest retained epoch.
fn newest_chain(c: &mut Conn) -> (u64, u64) {
    let rows: Vec<Row> = c.query("SHOW SNAPSHOTS").unwrap();
    let last = rows.last().expect("a retained epoch");
    (
        last.get("epoch").unwrap(),
        last.get("longest_chain").unwrap(),
    )
}

#[test]
fn long_delta_chains_are_compacted_and_still_recover() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = data_dir(&tmp);
    let mut world = World::new("compact");
    let args = ["--snapshot-interval", "0"];
    let srv = loaded(&mut world, &dir, &args);
    let mut c = srv.conn();
    snapshot_views(&mut c);
    for round in 0..6 {
        world.vote(&mut c, 20);
        world.churn(&mut c, 20 + round, 1 + round);
        snapshot_views(&mut c);
    }
    // The scheduler thread merges the chains in the background, and may
    // have merged some already (a loaded machine gives it time between
    // rounds): either the chain is long or a compaction ran.
    let (_, longest) = newest_chain(&mut c);
    let early = srv
        .metric("ladle_snapshot_compactions_total")
        .unwrap_or(0.0);
    assert!(
        longest > 4 || early >= 1.0,
        "chain of {longest} files, no compaction"
    );
    let mut compactions = 0.0;
    for _ in 0..600 {
        compactions = srv
            .metric("ladle_snapshot_compactions_total")
            .unwrap_or(0.0);
        if compactions >= 1.0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(compactions >= 1.0, "no compaction\n{}", srv.log_text());
    // The next epochs build on the merged files (a compaction still
    // running when an epoch is taken shortens the one after it).
    let (mut epoch, mut longest) = (0, u64::MAX);
    for _ in 0..10 {
        world.vote(&mut c, 20);
        let (e, _, _) = snapshot_views(&mut c);
        let (newest, l) = newest_chain(&mut c);
        assert_eq!(newest, e);
        (epoch, longest) = (e, l);
        if longest <= 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(longest <= 2, "chain of {longest} files after compaction");
    world.vote(&mut c, 25);
    world.check(&mut c, "before the restart");
    drop(c);
    let srv = killed_and_restarted_from(srv, &dir, &args, epoch);
    let mut c = srv.conn();
    world.check(&mut c, "after restarting from compacted chains");
}

/// Waits until the scheduler has trimmed the change log twice more (the
/// second pass started after every write so far).
fn wait_for_trims(srv: &Ladle) {
    let metric = "ladle_change_log_trims_total";
    let start = srv.metric(metric).unwrap_or(0.0);
    for _ in 0..1200 {
        if srv.metric(metric).unwrap_or(0.0) >= start + 2.0 {
            return;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    panic!("the change log was not trimmed\n{}", srv.log_text());
}

#[test]
fn with_snapshots_off_the_change_log_is_trimmed_but_never_replayed_over_a_gap() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = data_dir(&tmp);
    let mut world = World::new("trim");
    let args = ["--snapshot-interval", "0"];
    let fast_trim = [("LADLE_LOG_TRIM_INTERVAL_MS", "100")];
    let mut srv = Ladle::start(&dir, &args, &fast_trim);
    world.create_schema(&srv);
    let mut c = srv.conn();
    world.vote(&mut c, 300);
    world.check(&mut c, "after loading");
    let (epoch, _, _) = snapshot_views(&mut c);
    world.vote(&mut c, 80);
    world.churn(&mut c, 4, 6);
    // Trimming keeps the log after this run's SNAPSHOT VIEWS...
    wait_for_trims(&srv);
    drop(c);
    srv.kill9();
    let mut srv = Ladle::start(&dir, &args, &fast_trim);
    assert_eq!(
        srv.recovery_metric("ladle_recovery_epoch"),
        Some(epoch as f64),
        "{}",
        srv.log_text()
    );
    assert!(
        srv.recovery_metric("ladle_recovery_replayed_batches")
            .unwrap_or(0.0)
            >= 1.0
    );
    let mut c = srv.conn();
    world.check(&mut c, "after a warm restart over a trimmed log");
    // ...but not for a snapshot of an earlier run: the log after it goes,
    // and the next start must notice the gap and start cold.
    world.vote(&mut c, 60);
    world.churn(&mut c, 9, 12);
    wait_for_trims(&srv);
    drop(c);
    srv.kill9();
    let srv = Ladle::start(&dir, &args, &fast_trim);
    assert_eq!(
        srv.recovery_metric("ladle_recovery_epoch"),
        Some(-1.0),
        "{}",
        srv.log_text()
    );
    let mut c = srv.conn();
    world.check(&mut c, "after a cold start over a trimmed log");
}

#[test]
fn snapshot_statements_report_errors_as_mysql_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = data_dir(&tmp);
    let code = |r: mysql::Result<()>| match r {
        Err(mysql::Error::MySqlError(e)) => e.code,
        other => panic!("expected a server error, got {other:?}"),
    };
    // Nothing on disk, so nothing to snapshot.
    let srv = Ladle::start(&dir, &["--durability", "memory"], &[]);
    let mut c = Conn::new(srv.opts(None)).unwrap();
    assert_eq!(code(c.query_drop("SNAPSHOT VIEWS")), 1105);
    assert_eq!(code(c.query_drop("SNAPSHOT VIEWS now")), 1064);
    assert_eq!(code(c.query_drop("SHOW SNAPSHOTS")), 1235);
    // The connection keeps working.
    let one: Option<i64> = c.query_first("SELECT 1").unwrap();
    assert_eq!(one, Some(1));
    drop(c);
    drop(srv);
    // With storage on disk: an empty list before the first snapshot.
    let srv = Ladle::start(&dir, &["--snapshot-interval", "0"], &[]);
    let mut c = Conn::new(srv.opts(None)).unwrap();
    assert!(retained_epochs(&mut c).is_empty());
    let (epoch, _, _) = snapshot_views(&mut c);
    assert_eq!(retained_epochs(&mut c), vec![epoch]);
}

/// A table with functional key parts (hidden generated columns) is
/// snapshotted and restored like any other: a view over it comes back from
/// the snapshot, writes after it are replayed, the hidden column stays out
/// of `SELECT *` and its UNIQUE index still holds.
#[test]
fn functional_indexes_survive_a_snapshot_and_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = data_dir(&tmp);
    let args = ["--snapshot-interval", "0"];
    let srv = Ladle::start(&dir, &args, &[]);
    let mut c = Conn::new(srv.opts(None)).unwrap();
    for sql in [
        "CREATE DATABASE lob",
        "CREATE TABLE lob.people (id INT PRIMARY KEY, name VARCHAR(20), team INT, UNIQUE KEY lname ((LOWER(name))))",
        "INSERT INTO lob.people VALUES (1, 'Ann', 1), (2, 'Bob', 1), (3, 'Cy', 2)",
    ] {
        c.query_drop(sql).unwrap();
    }
    let mut c = srv.conn();
    let team = "SELECT * FROM people WHERE team = ? ORDER BY id";
    let before: Vec<(i64, String, i64)> = c.exec(team, (1,)).unwrap();
    assert_eq!(before, vec![(1, "Ann".into(), 1), (2, "Bob".into(), 1)]);
    let (epoch, _, _) = snapshot_views(&mut c);
    c.query_drop("INSERT INTO people VALUES (4, 'Dee', 1)")
        .unwrap();
    drop(c);
    let srv = killed_and_restarted_from(srv, &dir, &args, epoch);
    let mut c = srv.conn();
    let after: Vec<(i64, String, i64)> = c.exec(team, (1,)).unwrap();
    let dee = (4, "Dee".into(), 1);
    assert_eq!(after, vec![before[0].clone(), before[1].clone(), dee]);
    let code = match c.query_drop("INSERT INTO people VALUES (5, 'ANN', 2)") {
        Err(mysql::Error::MySqlError(e)) => e.code,
        other => panic!("expected 1062, got {other:?}"),
    };
    assert_eq!(code, 1062);
}
