//! Row locks with two (or more) connections: `SELECT ... FOR UPDATE` /
//! `FOR SHARE` block other transactions' locking reads and writes of the
//! same rows until COMMIT / ROLLBACK / disconnect / KILL; `innodb_lock_wait_timeout`
//! (1205), `NOWAIT`, `SKIP LOCKED`, deadlocks (1213, the victim rolled
//! back), and the lost-update pattern (N threads incrementing a counter
//! through SELECT ... FOR UPDATE + UPDATE must lose nothing).
//!
//! Each scenario runs against Ladle (spawned) and, when
//! `LADLE_TEST_MARIADB_URL` is set, against MariaDB too, so the scenarios
//! themselves are checked against the oracle. Both sessions run at READ
//! COMMITTED (Ladle's default; MariaDB's REPEATABLE READ adds gap locks).

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use ladle_e2e::{connect, fresh_database, ladle_binary, mariadb_url, LadleServer};
use mysql::prelude::Queryable;
use mysql::Conn;

const DB: &str = "ladle_row_locks";

/// Long enough that a statement still running after it is blocked.
const BLOCKED: Duration = Duration::from_millis(700);
/// Long enough for a statement unblocked to finish, even on a busy machine.
const PROCEEDS: Duration = Duration::from_secs(20);

fn session(url: &str) -> Conn {
    let mut c = connect(url, Some(DB)).expect("connect");
    c.query_drop("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
        .expect("isolation");
    c
}

fn errno(r: Result<(), mysql::Error>) -> Option<u16> {
    match r {
        Ok(()) => None,
        Err(mysql::Error::MySqlError(e)) => Some(e.code),
        Err(e) => panic!("not a server error: {e}"),
    }
}

fn balance(c: &mut Conn, sql: &str) -> i64 {
    c.query_first::<i64, _>(sql).expect("read").expect("a row")
}

/// A fresh `acct` table (ids 1..=3, balance 100 each) named `table`.
fn accounts(url: &str, table: &str) {
    let mut c = session(url);
    c.query_drop(format!("DROP TABLE IF EXISTS {table}"))
        .unwrap();
    c.query_drop(format!(
        "CREATE TABLE {table} (id INT PRIMARY KEY, bal INT NOT NULL)"
    ))
    .unwrap();
    c.query_drop(format!(
        "INSERT INTO {table} VALUES (1, 100), (2, 100), (3, 100)"
    ))
    .unwrap();
}

/// Runs `sql` on `c` in a thread; the receiver gets its outcome (errno).
fn spawn_statement(mut c: Conn, sql: String) -> mpsc::Receiver<(Option<u16>, Conn)> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let r = errno(c.query_drop(&sql));
        let _ = tx.send((r, c));
    });
    rx
}

fn block_then_proceed(url: &str) {
    accounts(url, "a1");
    let mut a = session(url);
    let mut b = session(url);
    a.query_drop("BEGIN").unwrap();
    assert_eq!(
        balance(&mut a, "SELECT bal FROM a1 WHERE id = 1 FOR UPDATE"),
        100
    );
    b.query_drop("BEGIN").unwrap();
    let (tx, rx) = mpsc::channel();
    let waiter = thread::spawn(move || {
        let start = Instant::now();
        let bal = balance(&mut b, "SELECT bal FROM a1 WHERE id = 1 FOR UPDATE");
        tx.send(start.elapsed()).unwrap();
        b.query_drop("COMMIT").unwrap();
        bal
    });
    assert!(
        rx.recv_timeout(BLOCKED).is_err(),
        "{url}: the second FOR UPDATE did not wait"
    );
    // Another row is free.
    let mut c = session(url);
    c.query_drop("BEGIN").unwrap();
    assert_eq!(
        balance(&mut c, "SELECT bal FROM a1 WHERE id = 2 FOR UPDATE"),
        100
    );
    c.query_drop("COMMIT").unwrap();
    a.query_drop("UPDATE a1 SET bal = 90 WHERE id = 1").unwrap();
    a.query_drop("COMMIT").unwrap();
    rx.recv_timeout(PROCEEDS).expect("proceeds after COMMIT");
    // A current read: it sees the committed 90.
    assert_eq!(waiter.join().unwrap(), 90, "{url}");
}

/// `share`: the shared-lock clause B uses (MariaDB 10.11 has no `FOR SHARE`).
fn shared_locks(url: &str, share: &str) {
    accounts(url, "a2");
    let mut a = session(url);
    let mut b = session(url);
    a.query_drop("BEGIN").unwrap();
    b.query_drop("BEGIN").unwrap();
    a.query_drop("SELECT bal FROM a2 WHERE id = 1 LOCK IN SHARE MODE")
        .unwrap();
    // Shared with shared: no wait.
    b.query_drop(format!("SELECT bal FROM a2 WHERE id = 1 {share}"))
        .unwrap();
    b.query_drop("COMMIT").unwrap();
    // An autocommit UPDATE of the row waits for the shared lock.
    let c = session(url);
    let rx = spawn_statement(c, "UPDATE a2 SET bal = bal + 1 WHERE id = 1".into());
    assert!(
        rx.recv_timeout(BLOCKED).is_err(),
        "{url}: UPDATE did not wait"
    );
    a.query_drop("COMMIT").unwrap();
    let (r, _) = rx.recv_timeout(PROCEEDS).expect("UPDATE proceeds");
    assert_eq!(r, None);
    assert_eq!(balance(&mut a, "SELECT bal FROM a2 WHERE id = 1"), 101);
}

fn timeout_rolls_back_the_statement_only(url: &str) {
    accounts(url, "a3");
    let mut a = session(url);
    let mut b = session(url);
    a.query_drop("BEGIN").unwrap();
    a.query_drop("SELECT * FROM a3 WHERE id = 1 FOR UPDATE")
        .unwrap();
    let default: Option<i64> = b.query_first("SELECT @@innodb_lock_wait_timeout").unwrap();
    assert_eq!(default, Some(50), "{url}");
    // KILL QUERY ends a wait (1317); the transaction goes on.
    b.query_drop("BEGIN").unwrap();
    let rx = spawn_statement(b, "SELECT * FROM a3 WHERE id = 1 FOR UPDATE".into());
    thread::sleep(Duration::from_millis(300));
    let (r, mut b) = {
        let mut killer = session(url);
        let ids: Vec<(u64, Option<String>)> = killer
            .query("SELECT ID, INFO FROM information_schema.PROCESSLIST")
            .unwrap();
        let id = ids
            .iter()
            .find(|(_, info)| {
                info.as_deref()
                    .is_some_and(|i| i.contains("a3 WHERE id = 1"))
            })
            .map(|(id, _)| *id)
            .expect("the waiting statement in the process list");
        killer.query_drop(format!("KILL QUERY {id}")).unwrap();
        rx.recv_timeout(PROCEEDS).expect("KILL QUERY ends the wait")
    };
    assert_eq!(r, Some(1317), "{url}");
    b.query_drop("ROLLBACK").unwrap();
    b.query_drop("SET innodb_lock_wait_timeout = 1").unwrap();
    b.query_drop("BEGIN").unwrap();
    b.query_drop("UPDATE a3 SET bal = bal + 5 WHERE id = 2")
        .unwrap();
    let start = Instant::now();
    let r = errno(b.query_drop("SELECT * FROM a3 WHERE id = 1 FOR UPDATE"));
    assert_eq!(r, Some(1205), "{url}");
    assert!(
        start.elapsed() >= Duration::from_millis(900),
        "{url}: too soon"
    );
    // An UPDATE of the locked row times out too.
    let r = errno(b.query_drop("UPDATE a3 SET bal = 0 WHERE id = 1"));
    assert_eq!(r, Some(1205), "{url}");
    // The transaction goes on: its earlier write commits.
    b.query_drop("COMMIT").unwrap();
    a.query_drop("ROLLBACK").unwrap();
    assert_eq!(balance(&mut a, "SELECT bal FROM a3 WHERE id = 2"), 105);
    assert_eq!(balance(&mut a, "SELECT bal FROM a3 WHERE id = 1"), 100);
}

fn nowait_and_skip_locked(url: &str, nowait_errno: &[u16]) {
    accounts(url, "a4");
    let mut a = session(url);
    let mut b = session(url);
    a.query_drop("BEGIN").unwrap();
    a.query_drop("SELECT * FROM a4 WHERE id = 2 FOR UPDATE")
        .unwrap();
    b.query_drop("BEGIN").unwrap();
    let start = Instant::now();
    let r = errno(b.query_drop("SELECT * FROM a4 WHERE id = 2 FOR UPDATE NOWAIT"));
    assert!(
        r.is_some_and(|e| nowait_errno.contains(&e)),
        "{url}: NOWAIT gave {r:?}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{url}: NOWAIT waited"
    );
    let ids: Vec<i64> = b
        .query("SELECT id FROM a4 WHERE id <= 3 ORDER BY id FOR UPDATE SKIP LOCKED")
        .unwrap();
    assert_eq!(ids, vec![1, 3], "{url}");
    // B now holds 1 and 3: A cannot take them without waiting.
    let r = errno(a.query_drop("SELECT * FROM a4 WHERE id = 3 FOR UPDATE NOWAIT"));
    assert!(r.is_some_and(|e| nowait_errno.contains(&e)), "{url}: {r:?}");
    b.query_drop("COMMIT").unwrap();
    a.query_drop("COMMIT").unwrap();
}

fn deadlock_rolls_back_the_victim(url: &str) {
    accounts(url, "a5");
    let mut a = session(url);
    let mut b = session(url);
    a.query_drop("BEGIN").unwrap();
    b.query_drop("BEGIN").unwrap();
    a.query_drop("UPDATE a5 SET bal = bal + 1 WHERE id = 1")
        .unwrap();
    b.query_drop("UPDATE a5 SET bal = bal + 10 WHERE id = 2")
        .unwrap();
    let rx = spawn_statement(a, "SELECT * FROM a5 WHERE id = 2 FOR UPDATE".into());
    assert!(rx.recv_timeout(BLOCKED).is_err(), "{url}: A did not wait");
    let rb = errno(b.query_drop("SELECT * FROM a5 WHERE id = 1 FOR UPDATE"));
    // One of the two is the victim (1213); the other gets its row.
    let (ra, mut a) = rx.recv_timeout(PROCEEDS).expect("A returns");
    let mut outcomes = [ra, rb];
    outcomes.sort();
    assert_eq!(outcomes, [None, Some(1213)], "{url}: A {ra:?}, B {rb:?}");
    // The victim's transaction is rolled back; the survivor commits.
    a.query_drop("COMMIT").unwrap();
    b.query_drop("COMMIT").unwrap();
    let one = balance(&mut a, "SELECT bal FROM a5 WHERE id = 1");
    let two = balance(&mut a, "SELECT bal FROM a5 WHERE id = 2");
    let expected = if rb.is_some() { (101, 100) } else { (100, 110) };
    assert_eq!((one, two), expected, "{url}");
}

fn released_at_rollback_disconnect_and_kill(url: &str) {
    accounts(url, "a6");
    for end in ["ROLLBACK", "disconnect", "KILL"] {
        let mut a = session(url);
        a.query_drop("BEGIN").unwrap();
        a.query_drop("SELECT * FROM a6 WHERE id = 1 FOR UPDATE")
            .unwrap();
        a.query_drop("SAVEPOINT s").unwrap();
        a.query_drop("UPDATE a6 SET bal = 0 WHERE id = 3").unwrap();
        // ROLLBACK TO SAVEPOINT keeps the locks (as InnoDB).
        a.query_drop("ROLLBACK TO SAVEPOINT s").unwrap();
        let mut b = session(url);
        b.query_drop("BEGIN").unwrap();
        let rx = spawn_statement(b, "UPDATE a6 SET bal = bal + 1 WHERE id IN (1, 3)".into());
        assert!(
            rx.recv_timeout(BLOCKED).is_err(),
            "{url}: no wait before {end}"
        );
        match end {
            "ROLLBACK" => a.query_drop("ROLLBACK").unwrap(),
            "KILL" => session(url)
                .query_drop(format!("KILL {}", a.connection_id()))
                .unwrap(),
            _ => drop(a),
        }
        let (r, mut b) = rx.recv_timeout(PROCEEDS).expect("proceeds");
        assert_eq!(r, None, "{url} after {end}");
        b.query_drop("COMMIT").unwrap();
    }
    let mut c = session(url);
    assert_eq!(balance(&mut c, "SELECT bal FROM a6 WHERE id = 1"), 103);
    assert_eq!(balance(&mut c, "SELECT bal FROM a6 WHERE id = 3"), 103);
}

/// `threads` connections each add 1 `rounds` times through SELECT ... FOR
/// UPDATE, a value computed by the client, and UPDATE: nothing is lost.
fn no_lost_updates(url: &str, threads: usize, rounds: usize) {
    accounts(url, "a7");
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let url = url.to_string();
            thread::spawn(move || {
                let mut c = session(&url);
                for _ in 0..rounds {
                    c.query_drop("BEGIN").unwrap();
                    let bal = balance(&mut c, "SELECT bal FROM a7 WHERE id = 1 FOR UPDATE");
                    c.query_drop(format!("UPDATE a7 SET bal = {} WHERE id = 1", bal + 1))
                        .unwrap();
                    c.query_drop("COMMIT").unwrap();
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let mut c = session(url);
    let expected = 100 + (threads * rounds) as i64;
    assert_eq!(
        balance(&mut c, "SELECT bal FROM a7 WHERE id = 1"),
        expected,
        "{url}"
    );
}

/// A `counter` table (ids 1..=3, n 0) and `src` (the same ids, step 1),
/// named `{prefix}_counter` and `{prefix}_src`.
fn counters(url: &str, prefix: &str) {
    let mut c = session(url);
    for (table, value) in [("counter", "n"), ("src", "step")] {
        c.query_drop(format!("DROP TABLE IF EXISTS {prefix}_{table}"))
            .unwrap();
        c.query_drop(format!(
            "CREATE TABLE {prefix}_{table} (id INT PRIMARY KEY, {value} INT NOT NULL)"
        ))
        .unwrap();
    }
    c.query_drop(format!(
        "INSERT INTO {prefix}_counter VALUES (1, 0), (2, 0), (3, 0)"
    ))
    .unwrap();
    c.query_drop(format!(
        "INSERT INTO {prefix}_src VALUES (1, 1), (2, 1), (3, 1)"
    ))
    .unwrap();
}

/// `threads` connections each run, `rounds` times (autocommit), a
/// multi-table UPDATE adding `src.step` to `counter.n`: the UPDATE locks
/// the rows it changes before it computes their values, so nothing is lost.
fn multi_table_no_lost_updates(url: &str, threads: usize, rounds: usize) {
    counters(url, "m7");
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let url = url.to_string();
            thread::spawn(move || {
                let mut c = session(&url);
                for _ in 0..rounds {
                    c.query_drop(
                        "UPDATE m7_counter c JOIN m7_src s ON s.id = c.id \
                         SET c.n = c.n + s.step WHERE c.id <= 2",
                    )
                    .unwrap();
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let mut c = session(url);
    let expected = (threads * rounds) as i64;
    for id in [1, 2] {
        let sql = format!("SELECT n FROM m7_counter WHERE id = {id}");
        assert_eq!(balance(&mut c, &sql), expected, "{url}: id {id}");
    }
    assert_eq!(balance(&mut c, "SELECT n FROM m7_counter WHERE id = 3"), 0);
}

/// Two transactions' multi-table UPDATEs taking rows in opposite orders:
/// one is the deadlock's victim (1213, rolled back), the other proceeds.
fn multi_table_deadlock(url: &str) {
    counters(url, "m8");
    let mut a = session(url);
    let mut b = session(url);
    let update = |id: i32| {
        format!(
            "UPDATE m8_counter c JOIN m8_src s ON s.id = c.id \
             SET c.n = c.n + s.step WHERE c.id = {id}"
        )
    };
    a.query_drop("BEGIN").unwrap();
    b.query_drop("BEGIN").unwrap();
    a.query_drop(update(1)).unwrap();
    b.query_drop(update(2)).unwrap();
    let rx = spawn_statement(a, update(2));
    assert!(rx.recv_timeout(BLOCKED).is_err(), "{url}: A did not wait");
    let rb = errno(b.query_drop(update(1)));
    let (ra, mut a) = rx.recv_timeout(PROCEEDS).expect("A returns");
    let mut outcomes = [ra, rb];
    outcomes.sort();
    assert_eq!(outcomes, [None, Some(1213)], "{url}: A {ra:?}, B {rb:?}");
    a.query_drop("COMMIT").unwrap();
    b.query_drop("COMMIT").unwrap();
    let one = balance(&mut a, "SELECT n FROM m8_counter WHERE id = 1");
    let two = balance(&mut a, "SELECT n FROM m8_counter WHERE id = 2");
    // The survivor changed both rows; the victim's change is rolled back.
    assert_eq!((one, two), (1, 1), "{url}");
}

/// A locking read over a join locks the rows of both tables (`OF t`, where
/// the server has it, only t's); a prepared locking read (binary protocol)
/// waits too; a table without a primary key is locked by whole rows.
fn joins_prepared_and_keyless(url: &str, of: bool) {
    let mut a = session(url);
    for ddl in [
        "DROP TABLE IF EXISTS o8, c8, k8",
        "CREATE TABLE c8 (id INT PRIMARY KEY, name VARCHAR(10))",
        "CREATE TABLE o8 (id INT PRIMARY KEY, cid INT)",
        "CREATE TABLE k8 (a INT, b VARCHAR(5))",
        "INSERT INTO c8 VALUES (1, 'x'), (2, 'y')",
        "INSERT INTO o8 VALUES (1, 1), (2, 2)",
        "INSERT INTO k8 VALUES (1, 'p'), (2, 'q')",
    ] {
        a.query_drop(ddl).unwrap();
    }
    a.query_drop("BEGIN").unwrap();
    a.query_drop(
        "SELECT o8.id, c8.name FROM o8 JOIN c8 ON c8.id = o8.cid WHERE o8.id = 1 FOR UPDATE",
    )
    .unwrap();
    let rx = spawn_statement(session(url), "UPDATE c8 SET name = 'z' WHERE id = 1".into());
    assert!(
        rx.recv_timeout(BLOCKED).is_err(),
        "{url}: joined row not locked"
    );
    // The other customer is free.
    session(url)
        .query_drop("UPDATE c8 SET name = 'w' WHERE id = 2")
        .unwrap();
    a.query_drop("COMMIT").unwrap();
    assert_eq!(rx.recv_timeout(PROCEEDS).expect("proceeds").0, None);
    if of {
        a.query_drop("BEGIN").unwrap();
        a.query_drop(
            "SELECT o8.id FROM o8 JOIN c8 ON c8.id = o8.cid WHERE o8.id = 1 FOR UPDATE OF o8",
        )
        .unwrap();
        session(url)
            .query_drop("UPDATE c8 SET name = 'v' WHERE id = 1")
            .unwrap();
        let mut b = session(url);
        b.query_drop("BEGIN").unwrap();
        let r = errno(b.query_drop("SELECT * FROM o8 WHERE id = 1 FOR UPDATE NOWAIT"));
        assert_eq!(r, Some(3572), "{url}: OF o8 did not lock o8");
        a.query_drop("COMMIT").unwrap();
        b.query_drop("COMMIT").unwrap();
        // A list after OF (as Django writes it) locks each table named.
        a.query_drop("BEGIN").unwrap();
        a.query_drop(
            "SELECT o8.id FROM o8 JOIN c8 ON c8.id = o8.cid WHERE o8.id = 1 FOR UPDATE OF o8, c8",
        )
        .unwrap();
        b.query_drop("BEGIN").unwrap();
        let r = errno(b.query_drop("SELECT * FROM c8 WHERE id = 1 FOR UPDATE NOWAIT"));
        assert_eq!(r, Some(3572), "{url}: OF o8, c8 did not lock c8");
        a.query_drop("COMMIT").unwrap();
        b.query_drop("COMMIT").unwrap();
    }
    a.query_drop("BEGIN").unwrap();
    a.query_drop("SELECT * FROM k8 WHERE a = 1 FOR UPDATE")
        .unwrap();
    let mut b = session(url);
    b.query_drop("BEGIN").unwrap();
    let (tx, rx) = mpsc::channel();
    let waiter = thread::spawn(move || {
        let r: Option<String> = b
            .exec_first("SELECT b FROM k8 WHERE a = ? FOR UPDATE", (1,))
            .unwrap();
        tx.send(()).unwrap();
        b.query_drop("COMMIT").unwrap();
        r
    });
    assert!(
        rx.recv_timeout(BLOCKED).is_err(),
        "{url}: prepared read did not wait"
    );
    // The other row of the keyless table is free.
    session(url)
        .query_drop("UPDATE k8 SET b = 'r' WHERE a = 2")
        .unwrap();
    a.query_drop("UPDATE k8 SET b = 's' WHERE a = 1").unwrap();
    a.query_drop("COMMIT").unwrap();
    rx.recv_timeout(PROCEEDS).expect("proceeds");
    assert_eq!(waiter.join().unwrap().as_deref(), Some("s"), "{url}");
    // Equal new rows of a keyless table are different rows: no wait. The
    // same new primary key waits for the first inserter (then 1062).
    a.query_drop("BEGIN").unwrap();
    a.query_drop("INSERT INTO k8 VALUES (9, 'n')").unwrap();
    a.query_drop("INSERT INTO c8 VALUES (9, 'n')").unwrap();
    let mut b = session(url);
    b.query_drop("BEGIN").unwrap();
    let rx = spawn_statement(b, "INSERT INTO k8 VALUES (9, 'n')".into());
    let (r, b) = rx
        .recv_timeout(BLOCKED)
        .expect("{url}: a keyless insert waited");
    assert_eq!(r, None);
    let rx = spawn_statement(b, "INSERT INTO c8 VALUES (9, 'm')".into());
    assert!(
        rx.recv_timeout(BLOCKED).is_err(),
        "{url}: same key did not wait"
    );
    a.query_drop("COMMIT").unwrap();
    let (r, mut b) = rx.recv_timeout(PROCEEDS).expect("proceeds");
    assert_eq!(r, Some(1062), "{url}");
    b.query_drop("COMMIT").unwrap();
}

/// The key a locking read finds (through a view) and the key a write
/// changes (a stored row) name the same row for keys of every kind: an
/// UPDATE of a row locked FOR UPDATE times out (1205).
fn keys_of_every_kind(url: &str) {
    let mut a = session(url);
    for ddl in [
        "DROP TABLE IF EXISTS ku, km, kt, ks",
        "CREATE TABLE ku (id BIGINT UNSIGNED PRIMARY KEY, n INT)",
        "CREATE TABLE km (id DECIMAL(10, 2) PRIMARY KEY, n INT)",
        "CREATE TABLE kt (id DATETIME PRIMARY KEY, n INT)",
        "CREATE TABLE ks (id VARCHAR(10) PRIMARY KEY, n INT)",
        "INSERT INTO ku VALUES (18446744073709551615, 0)",
        "INSERT INTO km VALUES (1.50, 0)",
        "INSERT INTO kt VALUES ('2020-01-01 10:00:00', 0)",
        "INSERT INTO ks VALUES ('abc', 0)",
    ] {
        a.query_drop(ddl).unwrap();
    }
    let mut b = session(url);
    b.query_drop("SET innodb_lock_wait_timeout = 1").unwrap();
    for (table, key) in [
        ("ku", "18446744073709551615"),
        ("km", "1.5"),
        ("kt", "'2020-01-01 10:00:00'"),
        ("ks", "'ABC'"),
    ] {
        a.query_drop("BEGIN").unwrap();
        a.query_drop(format!("SELECT * FROM {table} WHERE id = {key} FOR UPDATE"))
            .unwrap();
        let r = errno(b.query_drop(format!("UPDATE {table} SET n = 1 WHERE id = {key}")));
        assert_eq!(r, Some(1205), "{url}: {table} {key}");
        a.query_drop("COMMIT").unwrap();
    }
}

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// What differs between the servers: MySQL 8.0's spellings (Ladle's) or
/// MariaDB's.
struct Dialect {
    share: &'static str,
    nowait_errno: &'static [u16],
    /// `FOR UPDATE OF t` (MySQL 8.0; not MariaDB 10.11).
    of: bool,
}

fn all_scenarios(url: &str, dialect: &Dialect) {
    let nowait_errno = dialect.nowait_errno;
    fresh_database(url, DB).expect("fresh database");
    let timed = |name: &str, f: &dyn Fn()| {
        let start = Instant::now();
        f();
        eprintln!("{url}: {name} {:?}", start.elapsed());
    };
    timed("block_then_proceed", &|| block_then_proceed(url));
    timed("shared_locks", &|| shared_locks(url, dialect.share));
    timed("timeout", &|| timeout_rolls_back_the_statement_only(url));
    timed("nowait_skip_locked", &|| {
        nowait_and_skip_locked(url, nowait_errno)
    });
    timed("deadlock", &|| deadlock_rolls_back_the_victim(url));
    timed("released", &|| {
        released_at_rollback_disconnect_and_kill(url)
    });
    timed("joins_prepared_keyless", &|| {
        joins_prepared_and_keyless(url, dialect.of)
    });
    timed("keys_of_every_kind", &|| keys_of_every_kind(url));
    // `LADLE_LOCK_THREADS` x `LADLE_LOCK_ROUNDS` (default 4 x 15): a
    // long run sets them higher.
    let threads = env_or("LADLE_LOCK_THREADS", 4);
    let rounds = env_or("LADLE_LOCK_ROUNDS", 15);
    timed("no_lost_updates", &|| no_lost_updates(url, threads, rounds));
    timed("multi_table_no_lost_updates", &|| {
        multi_table_no_lost_updates(url, threads, rounds)
    });
    timed("multi_table_deadlock", &|| multi_table_deadlock(url));
}

#[test]
fn row_locks_block_like_innodb() {
    if let Some(maria) = mariadb_url() {
        // MariaDB answers NOWAIT with 1205; MySQL 8.0 (and Ladle) with 3572.
        let mariadb = Dialect {
            share: "LOCK IN SHARE MODE",
            nowait_errno: &[1205, 3572],
            of: false,
        };
        all_scenarios(&maria, &mariadb);
    }
    let bin = ladle_binary().expect("ladle binary");
    let ladle = LadleServer::start(&bin).expect("ladle starts");
    let mysql8 = Dialect {
        share: "FOR SHARE",
        nowait_errno: &[3572],
        of: true,
    };
    all_scenarios(&ladle.url(), &mysql8);
}
