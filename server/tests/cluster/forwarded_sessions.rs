//! A replica's forwarded sessions as the primary sees them: each is a row
//! of the primary's process list (user, a Host naming the replica and its
//! client, db, Command, Time, State, Info), a KILL of that row's id ends
//! its statement or its client's connection as a local KILL would, and
//! `max_execution_time` stops a forwarded SELECT as it stops one on a
//! single node (3024); and each is a connection of the primary's
//! (Threads_connected, Max_used_connections, `--max-connections`).

use std::time::{Duration, Instant};

use mysql::prelude::*;
use mysql::Conn;

use super::{errno, fixture, metric, primary_and_replica, started, wait_for, Fixture};

/// One row of `information_schema.PROCESSLIST`.
type Row = (
    u64,
    String,
    String,
    Option<String>,
    String,
    i64,
    Option<String>,
    Option<String>,
);

/// The process list of the node `c` is connected to.
fn processes(c: &mut Conn) -> Vec<Row> {
    c.query(
        "SELECT ID, USER, HOST, DB, COMMAND, TIME, STATE, INFO \
         FROM information_schema.PROCESSLIST",
    )
    .expect("PROCESSLIST")
}

/// Waits until the node `c` is connected to lists both nodes (a KILL is
/// sent on where its last view of the members says).
fn await_both_listed(c: &mut Conn) {
    wait_for("the node to list both nodes", || {
        let rows: Vec<(u64, String, String, u64, u64, u32)> = c.query("SHOW CLUSTER").ok()?;
        (rows.len() == 2).then_some(())
    });
}

/// The primary's row for the forwarded session of node 2's client
/// `client` (its Host names both).
fn forwarded_row(c: &mut Conn, client: u64) -> Option<Row> {
    let prefix = format!("replica-2/{client}@");
    processes(c).into_iter().find(|r| r.2.starts_with(&prefix))
}

/// The primary lists node 2's client's forwarding session (Host
/// `replica-2/<client id>@<client host>`, the client's user and database,
/// the statement running there as Info, Command Query, State executing,
/// then Sleep once it ends; in SHOW PROCESSLIST too). KILL QUERY of its
/// id on the primary ends the forwarded UPDATE waiting there for a row
/// lock with 1317 on the replica's client, whose connection goes on; KILL
/// of its id (sent to node 2: the id names the primary) closes the
/// client's connection on node 2 (it holds no named lock whose loss would
/// close it), and the row goes (IS_USED_LOCK named its id while the
/// session held a lock). Another user
/// neither sees the row nor may kill it (1095). Before: the primary
/// listed no forwarding session, and a KILL of its id was 1094.
#[test]
fn a_forwarded_session_is_listed_and_killed_on_the_primary() {
    let Some(Fixture {
        nodes,
        etcd: _etcd,
        _temp,
    }) = primary_and_replica("cluster forwarded sessions in the process list test")
    else {
        return;
    };
    let mut c1 = Conn::new(nodes[0].opts()).expect("connect to node 1");
    for sql in [
        "CREATE DATABASE fs",
        "CREATE TABLE fs.t (id INT PRIMARY KEY, v INT)",
        "INSERT INTO fs.t VALUES (1, 0)",
    ] {
        c1.query_drop(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    c1.query_drop("CREATE USER app IDENTIFIED BY 'app-pw'")
        .unwrap();
    await_both_listed(&mut c1);
    let mut c2 = Conn::new(nodes[1].opts()).expect("connect to node 2");
    let id2: u64 = c2.query_first("SELECT CONNECTION_ID()").unwrap().unwrap();
    wait_for("node 2 to have the table", || {
        c2.query_drop("USE fs").ok()?;
        c2.query_drop("SELECT * FROM t").ok()
    });
    // A named lock taken through node 2 is held by the forwarded session.
    let held: Option<i64> = c2
        .query_first("SELECT GET_LOCK('held', 0)")
        .unwrap()
        .unwrap();
    assert_eq!(held, Some(1));
    // A forwarded UPDATE waits for node 1's row lock.
    c1.query_drop("BEGIN").unwrap();
    c1.query_drop("SELECT * FROM fs.t WHERE id = 1 FOR UPDATE")
        .unwrap();
    const UPDATE: &str = "UPDATE t SET v = 1 WHERE id = 1";
    let update = move |mut c2: Conn| {
        std::thread::spawn(move || {
            let started = Instant::now();
            let r = c2.query_drop(UPDATE);
            (r, started.elapsed(), c2)
        })
    };
    let writer = update(c2);
    let row = wait_for("node 1 to list the forwarded UPDATE", || {
        forwarded_row(&mut c1, id2).filter(|r| r.7.as_deref() == Some(UPDATE))
    });
    let (fid, user, host, db, command, _time, state, _) = row.clone();
    assert_eq!(
        fid >> super::NODE_SHIFT,
        1,
        "an id of the primary's: {row:?}"
    );
    assert_ne!(fid, id2);
    assert_eq!(user, "root", "{row:?}");
    assert!(host.ends_with("@localhost"), "{row:?}");
    assert_eq!(db.as_deref(), Some("fs"), "{row:?}");
    assert_eq!(command, "Query", "{row:?}");
    assert_eq!(state.as_deref(), Some("executing"), "{row:?}");
    let shown: Vec<(u64, String, String)> = c1
        .query_map("SHOW PROCESSLIST", |r: mysql::Row| {
            (
                r.get::<u64, _>(0).unwrap(),
                r.get::<String, _>(2).unwrap(),
                r.get::<Option<String>, _>(7).unwrap().unwrap_or_default(),
            )
        })
        .unwrap();
    assert!(
        shown
            .iter()
            .any(|(id, h, info)| *id == fid && *h == host && info == UPDATE),
        "SHOW PROCESSLIST: {shown:?}"
    );
    let holder: Option<u64> = c1
        .query_first("SELECT IS_USED_LOCK('held')")
        .unwrap()
        .unwrap();
    assert_eq!(holder, Some(fid), "IS_USED_LOCK names the listed session");
    // Another user neither sees it nor may kill it.
    let mut app = Conn::new(nodes[0].opts_as("app", "app-pw")).expect("app logs in");
    let theirs = processes(&mut app);
    assert!(theirs.iter().all(|r| r.0 != fid), "{theirs:?}");
    assert_eq!(errno(app.query_drop(format!("KILL QUERY {fid}"))), 1095);
    assert_eq!(errno(app.query_drop(format!("KILL {fid}"))), 1095);

    // KILL QUERY of the primary's row: the replica's client gets 1317.
    c1.query_drop(format!("KILL QUERY {fid}"))
        .expect("KILL QUERY of the forwarded session");
    let (r, took, mut c2) = writer.join().expect("the writer");
    assert_eq!(errno(r), 1317, "the forwarded UPDATE is interrupted");
    assert!(took < Duration::from_secs(15), "it ended after {took:?}");
    let same: u64 = c2.query_first("SELECT CONNECTION_ID()").unwrap().unwrap();
    assert_eq!(same, id2, "the connection goes on");
    let idle = wait_for("the forwarded session to be idle", || {
        forwarded_row(&mut c1, id2).filter(|r| r.4 == "Sleep")
    });
    assert_eq!(idle.0, fid, "the same forwarding session: {idle:?}");
    assert_eq!(idle.7, None, "no statement runs: {idle:?}");
    // (Without its named lock, the client's connection closes below only
    // because node 2 was told to close it.)
    let released: Option<i64> = c2
        .query_first("SELECT RELEASE_LOCK('held')")
        .unwrap()
        .unwrap();
    assert_eq!(released, Some(1));

    // KILL (CONNECTION) of the row, sent to node 2 (the id names node 1),
    // while the UPDATE waits again: the client's connection on node 2
    // closes, and the primary's row goes.
    let writer = update(c2);
    wait_for("node 1 to list the forwarded UPDATE again", || {
        forwarded_row(&mut c1, id2).filter(|r| r.7.as_deref() == Some(UPDATE))
    });
    let mut killer = Conn::new(nodes[1].opts()).expect("connect to node 2");
    killer
        .query_drop(format!("KILL {fid}"))
        .expect("KILL of the forwarded session");
    let (r, took, mut c2) = writer.join().expect("the writer");
    // As a local KILL CONNECTION of a running statement: 1317, then the
    // connection closes.
    assert_eq!(errno(r), 1317, "the killed connection's UPDATE");
    assert!(took < Duration::from_secs(15), "it ended after {took:?}");
    wait_for("node 2's connection to be closed", || {
        c2.query_drop("SELECT 1").is_err().then_some(())
    });
    wait_for("node 2 to drop the killed connection", || {
        let on_2: Vec<u64> = killer
            .query("SELECT ID FROM information_schema.PROCESSLIST")
            .ok()?;
        (!on_2.contains(&id2)).then_some(())
    });
    wait_for("node 1 to drop the forwarded session", || {
        forwarded_row(&mut c1, id2).is_none().then_some(())
    });
    assert_eq!(errno(c1.query_drop(format!("KILL QUERY {fid}"))), 1094);
    c1.query_drop("COMMIT").unwrap();
    let v: Option<i64> = c1
        .query_first("SELECT v FROM fs.t WHERE id = 1")
        .unwrap()
        .unwrap();
    assert_eq!(v, Some(0), "neither killed UPDATE ran on the primary");
}

/// A SELECT that runs too long on a single node: one 30 MB REPEAT per row.
const SLOW: &str = "SELECT COUNT(*) FROM fm.n WHERE LENGTH(REPEAT(v, 30000000)) = 1";

/// `max_execution_time` stops a forwarded SELECT (here: one of a
/// transaction whose writes are on the primary, so it runs there) with
/// 3024, as on the primary itself, and the session and its transaction go
/// on; the replica's client's own SELECT stops too.
#[test]
fn max_execution_time_stops_a_forwarded_select() {
    let Some(Fixture {
        nodes,
        etcd: _etcd,
        _temp,
    }) = primary_and_replica("cluster max_execution_time of a forwarded SELECT test")
    else {
        return;
    };
    let mut c1 = Conn::new(nodes[0].opts()).expect("connect to node 1");
    for sql in [
        "CREATE DATABASE fm",
        "CREATE TABLE fm.n (id INT PRIMARY KEY, v VARCHAR(10))",
        "INSERT INTO fm.n VALUES (1, 'a'), (2, 'b')",
    ] {
        c1.query_drop(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    for _ in 0..11 {
        c1.query_drop("INSERT INTO fm.n SELECT id + (SELECT MAX(id) FROM fm.n), v FROM fm.n")
            .expect("double");
    }
    c1.query_drop("SET max_execution_time = 300").unwrap();
    assert_eq!(errno(c1.query_drop(SLOW)), 3024, "on the primary itself");

    let mut c2 = Conn::new(nodes[1].opts()).expect("connect to node 2");
    wait_for("node 2 to have the rows", || {
        let n: Option<i64> = c2.query_first("SELECT COUNT(*) FROM fm.n").ok()?;
        (n == Some(4096)).then_some(())
    });
    c2.query_drop("SET max_execution_time = 300").unwrap();
    assert_eq!(errno(c2.query_drop(SLOW)), 3024, "on the replica itself");
    // The transaction's write is on the primary: its SELECT runs there.
    c2.query_drop("BEGIN").unwrap();
    c2.query_drop("INSERT INTO fm.n VALUES (0, 'z')").unwrap();
    let started = Instant::now();
    assert_eq!(errno(c2.query_drop(SLOW)), 3024, "forwarded");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "stopped after {:?}",
        started.elapsed()
    );
    // The session and its transaction go on there.
    let v: Option<String> = c2
        .query_first("SELECT v FROM fm.n WHERE id = 0")
        .unwrap()
        .unwrap();
    assert_eq!(v.as_deref(), Some("z"));
    c2.query_drop("ROLLBACK").unwrap();
}

/// KILL of a forwarded session whose replica cannot be told (node 2 is
/// stopped, SIGSTOP, while node 1 lists it) still ends it on the primary:
/// the KILL answers once the attempt to reach node 2 gives up, the row goes with the named lock
/// the session held, and once node 2 runs again its client learns at its
/// next statement that its locks were lost (1927, as for any lost link to
/// the primary) and its connection closes.
#[test]
fn a_forwarded_session_whose_replica_is_unreachable_is_killed_on_the_primary() {
    let Some(Fixture {
        nodes,
        etcd: _etcd,
        _temp,
    }) = primary_and_replica("cluster KILL of a forwarded session of a stopped replica test")
    else {
        return;
    };
    let mut c1 = Conn::new(nodes[0].opts()).expect("connect to node 1");
    await_both_listed(&mut c1);
    let mut c2 = Conn::new(nodes[1].opts()).expect("connect to node 2");
    let id2: u64 = c2.query_first("SELECT CONNECTION_ID()").unwrap().unwrap();
    let held: Option<i64> = c2
        .query_first("SELECT GET_LOCK('held', 0)")
        .unwrap()
        .unwrap();
    assert_eq!(held, Some(1));
    let fid = wait_for("node 1 to list the forwarded session", || {
        forwarded_row(&mut c1, id2).map(|r| r.0)
    });
    super::signal(&nodes[1], "-STOP");
    let started = Instant::now();
    let killed = c1.query_drop(format!("KILL {fid}"));
    let took = started.elapsed();
    super::signal(&nodes[1], "-CONT");
    killed.expect("KILL of the forwarded session");
    eprintln!("KILL of a stopped replica's forwarded session answered in {took:?}");
    assert!(took < Duration::from_secs(20), "KILL took {took:?}");
    wait_for("node 1 to drop the forwarded session", || {
        forwarded_row(&mut c1, id2).is_none().then_some(())
    });
    let free: Option<i64> = c1
        .query_first("SELECT IS_FREE_LOCK('held')")
        .unwrap()
        .unwrap();
    assert_eq!(free, Some(1), "its named lock went with it");
    assert_eq!(errno(c2.query_drop("SELECT 1")), 1927, "locks lost");
    assert!(c2.query_drop("SELECT 1").is_err(), "the connection closed");
}

/// A status variable of the node `c` is connected to (`global`: SHOW
/// GLOBAL STATUS, else SHOW STATUS).
fn status(c: &mut Conn, name: &str, global: bool) -> u64 {
    let scope = if global { "GLOBAL " } else { "" };
    let row: Option<(String, String)> = c
        .query_first(format!("SHOW {scope}STATUS LIKE '{name}'"))
        .unwrap_or_else(|e| panic!("SHOW STATUS {name}: {e}"));
    let (_, value) = row.unwrap_or_else(|| panic!("no status variable {name}"));
    value
        .parse()
        .unwrap_or_else(|e| panic!("{name} = {value}: {e}"))
}

/// A replica's forwarded session is a connection of the primary's, as a
/// MySQL operator expects (it holds locks, a transaction and memory
/// there): it counts in the primary's Threads_connected (SHOW STATUS and
/// SHOW GLOBAL STATUS), Max_used_connections and `ladle_connections`
/// gauge, and takes a place under its `--max-connections`. With every
/// place taken, a replica's client's write gets 1040 "Too many
/// connections" at once (it did not run; the client's connection goes on,
/// and the same write succeeds once a place is free), as does a direct
/// login. The place is given back when the replica's client leaves.
/// Before: the primary counted only its own clients, and the forwarded
/// write ran past the limit.
#[test]
fn forwarded_sessions_count_as_connections_of_the_primary() {
    let Some(mut f) = fixture("cluster forwarded sessions as connections test", 2) else {
        return;
    };
    f.nodes[0].args = vec!["--max-connections".into(), "3".into()];
    let Fixture {
        nodes,
        etcd: _etcd,
        _temp,
    } = started(f);
    let connected = |c: &mut Conn| {
        let session = status(c, "Threads_connected", false);
        let global = status(c, "Threads_connected", true);
        assert_eq!(session, global, "SHOW STATUS and SHOW GLOBAL STATUS");
        global
    };
    let gauge = |name: &str| metric(&nodes[0], &format!("{name} ")).expect(name);
    let mut c1 = Conn::new(nodes[0].opts()).expect("connect to node 1");
    for sql in [
        "CREATE DATABASE fc",
        "CREATE TABLE fc.t (id INT PRIMARY KEY)",
    ] {
        c1.query_drop(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    assert_eq!(connected(&mut c1), 1, "the primary's own client");
    let mut c2 = Conn::new(nodes[1].opts()).expect("connect to node 2");
    wait_for("node 2 to have the table", || {
        c2.query_drop("SELECT * FROM fc.t").ok()
    });
    c2.query_drop("INSERT INTO fc.t VALUES (1)")
        .expect("a forwarded write");
    assert_eq!(connected(&mut c1), 2, "with the forwarded session");
    assert_eq!(status(&mut c1, "Max_used_connections", true), 2);
    assert_eq!(gauge("ladle_connections"), 2.0);
    assert_eq!(gauge("ladle_connections_max_used"), 2.0);

    // The last place, taken by a direct client: a new login and a new
    // forwarded session are both refused.
    let c1b = Conn::new(nodes[0].opts()).expect("the third connection");
    assert_eq!(connected(&mut c1), 3);
    let refused_before = gauge("ladle_connections_refused_total");
    match Conn::new(nodes[0].opts()) {
        Err(mysql::Error::MySqlError(e)) => assert_eq!(e.code, 1040, "{e}"),
        other => panic!("a fourth login: {other:?}"),
    }
    let mut c3 = Conn::new(nodes[1].opts()).expect("connect to node 2");
    let started_at = Instant::now();
    let write = c3.query_drop("INSERT INTO fc.t VALUES (2)");
    assert_eq!(errno(write), 1040, "a forwarded session past the limit");
    assert!(
        started_at.elapsed() < Duration::from_secs(5),
        "refused after {:?}",
        started_at.elapsed()
    );
    assert_eq!(
        gauge("ladle_connections_refused_total"),
        refused_before + 2.0
    );
    let one: Option<i64> = c3.query_first("SELECT 1").expect("the client goes on");
    assert_eq!(one, Some(1));
    assert_eq!(connected(&mut c1), 3, "the refused session holds no place");
    let rows: Vec<i64> = c1.query("SELECT id FROM fc.t").unwrap();
    assert_eq!(rows, vec![1], "the refused write did not run");

    // A place freed: the same client's write is taken.
    drop(c1b);
    wait_for("the primary to release the direct client's place", || {
        (status(&mut c1, "Threads_connected", true) == 2).then_some(())
    });
    c3.query_drop("INSERT INTO fc.t VALUES (2)")
        .expect("the write once a place is free");
    assert_eq!(connected(&mut c1), 3);
    assert_eq!(status(&mut c1, "Max_used_connections", false), 3);
    // The replica's clients leave: their forwarded sessions' places go.
    drop(c2);
    drop(c3);
    wait_for(
        "the primary to release the forwarded sessions' places",
        || (status(&mut c1, "Threads_connected", true) == 1).then_some(()),
    );
    assert_eq!(gauge("ladle_connections"), 1.0);
    assert_eq!(gauge("ladle_connections_max_used"), 3.0);
}
