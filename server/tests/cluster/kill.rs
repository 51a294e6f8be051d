//! KILL across the cluster: connection ids carry the id of the node that
//! gave them out in their high bits (unique across the cluster), and a
//! KILL sent to any node reaches the node that owns the connection.

use std::time::{Duration, Instant};

use mysql::prelude::*;
use mysql::Conn;

use super::{errno, primary_and_replica, wait_for, Fixture, NODE_SHIFT};

/// Connection ids of node 1 and node 2 carry their node ids; KILL QUERY
/// sent to node 1 stops a SLEEP running on node 2 (1 back at once), KILL
/// [CONNECTION] sent there closes node 2's connection; an id unknown on
/// its node, or of a node the cluster does not list, is 1094; a user
/// without SUPER cannot kill another's connection on another node (1095).
#[test]
fn kill_reaches_a_connection_on_another_node() {
    let Some(Fixture {
        nodes,
        etcd: _etcd,
        _temp,
    }) = primary_and_replica("cluster KILL test")
    else {
        return;
    };
    let mut c1 = Conn::new(nodes[0].opts()).expect("connect to node 1");
    // Node 1 sends a KILL where its last view of the members says.
    wait_for("node 1 to list node 2", || {
        let rows: Vec<(u64, String, String, u64, u64, u32)> = c1.query("SHOW CLUSTER").ok()?;
        (rows.len() == 2).then_some(())
    });
    let mut c2 = Conn::new(nodes[1].opts()).expect("connect to node 2");
    let id_of = |c: &mut Conn| -> u64 { c.query_first("SELECT CONNECTION_ID()").unwrap().unwrap() };
    let id1 = id_of(&mut c1);
    let id2 = id_of(&mut c2);
    assert_eq!(id1 >> NODE_SHIFT, 1, "node 1's connection id {id1}");
    assert_eq!(id2 >> NODE_SHIFT, 2, "node 2's connection id {id2}");
    assert_eq!(u64::from(c2.connection_id()), id2, "the handshake's id");

    // KILL QUERY through node 1 stops node 2's SLEEP.
    let sleeper = std::thread::spawn(move || {
        let started = Instant::now();
        let slept: Option<i64> = c2.query_first("SELECT SLEEP(60)").unwrap();
        (slept, started.elapsed(), c2)
    });
    wait_for("node 2 to run the SLEEP", || {
        let rows: Vec<(u64, Option<String>)> = Conn::new(nodes[1].opts())
            .ok()?
            .query("SELECT ID, INFO FROM information_schema.PROCESSLIST")
            .ok()?;
        rows.iter()
            .any(|(id, info)| *id == id2 && info.as_deref().is_some_and(|i| i.contains("SLEEP")))
            .then_some(())
    });
    c1.query_drop(format!("KILL QUERY {id2}"))
        .expect("KILL QUERY");
    let (slept, took, mut c2) = sleeper.join().expect("the sleeper");
    assert_eq!(slept, Some(1), "SLEEP cut short says 1");
    assert!(
        took < Duration::from_secs(30),
        "the SLEEP went on for {took:?}"
    );
    // The connection lives on.
    assert_eq!(id_of(&mut c2), id2);

    // Unknown ids: on node 2, and of a node the cluster does not list.
    let unknown_on_2 = (2 << NODE_SHIFT) | 999_999;
    assert_eq!(errno(c1.query_drop(format!("KILL {unknown_on_2}"))), 1094);
    let on_no_node = (9 << NODE_SHIFT) | 1;
    assert_eq!(
        errno(c1.query_drop(format!("KILL QUERY {on_no_node}"))),
        1094
    );

    // Another user without SUPER may not kill it from node 1.
    c1.query_drop("CREATE USER app IDENTIFIED BY 'app-pw'")
        .unwrap();
    let mut app = Conn::new(nodes[0].opts_as("app", "app-pw")).expect("app logs in");
    assert_eq!(errno(app.query_drop(format!("KILL QUERY {id2}"))), 1095);

    // KILL CONNECTION through node 1 closes it.
    c1.query_drop(format!("KILL {id2}"))
        .expect("KILL CONNECTION");
    wait_for("node 2's connection to be closed", || {
        c2.query_drop("SELECT 1").is_err().then_some(())
    });
    let mut check = Conn::new(nodes[1].opts()).expect("connect to node 2");
    let ids: Vec<u64> = check
        .query("SELECT ID FROM information_schema.PROCESSLIST")
        .unwrap();
    assert!(!ids.contains(&id2), "{ids:?}");
}

/// KILL QUERY of a replica's client whose statement was forwarded stops
/// it on the primary too, whichever node the KILL is sent to: an UPDATE
/// waiting there for a row lock ends with 1317 and never runs once the
/// lock is freed, and a GET_LOCK waiting there returns NULL and does not
/// take the lock once it is released (before: the replica's client waited
/// on, and the primary's forwarding session went on waiting, then wrote
/// the row or took the lock). The client's connection and its forwarding
/// session live on.
#[test]
fn kill_query_stops_a_forwarded_statement_on_the_primary() {
    let Some(Fixture {
        nodes,
        etcd: _etcd,
        _temp,
    }) = primary_and_replica("cluster KILL of a forwarded statement test")
    else {
        return;
    };
    let mut c1 = Conn::new(nodes[0].opts()).expect("connect to node 1");
    for sql in [
        "CREATE DATABASE fk",
        "CREATE TABLE fk.t (id INT PRIMARY KEY, v INT)",
        "INSERT INTO fk.t VALUES (1, 0)",
    ] {
        c1.query_drop(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    let mut c2 = Conn::new(nodes[1].opts()).expect("connect to node 2");
    let id2: u64 = c2.query_first("SELECT CONNECTION_ID()").unwrap().unwrap();
    let running = |what: &str| {
        wait_for(&format!("node 2 to run {what}"), || {
            let rows: Vec<(u64, Option<String>)> = Conn::new(nodes[1].opts())
                .ok()?
                .query("SELECT ID, INFO FROM information_schema.PROCESSLIST")
                .ok()?;
            rows.iter()
                .any(|(id, info)| *id == id2 && info.as_deref().is_some_and(|i| i.contains(what)))
                .then_some(())
        });
        // (Forwarded, and waiting on the primary.)
        std::thread::sleep(Duration::from_millis(500));
    };

    // A forwarded UPDATE waits for node 1's row lock; KILL QUERY sent to
    // node 2 ends it on both nodes.
    c1.query_drop("BEGIN").unwrap();
    c1.query_drop("SELECT * FROM fk.t WHERE id = 1 FOR UPDATE")
        .unwrap();
    let writer = std::thread::spawn(move || {
        let started = Instant::now();
        let r = c2.query_drop("UPDATE fk.t SET v = 1 WHERE id = 1");
        (r, started.elapsed(), c2)
    });
    running("UPDATE fk.t");
    let mut killer = Conn::new(nodes[1].opts()).expect("connect to node 2");
    killer
        .query_drop(format!("KILL QUERY {id2}"))
        .expect("KILL QUERY");
    let (r, took, mut c2) = writer.join().expect("the writer");
    assert_eq!(errno(r), 1317, "the forwarded UPDATE is interrupted");
    assert!(took < Duration::from_secs(15), "it ended after {took:?}");
    c1.query_drop("COMMIT").unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let v: Option<i64> = c1
        .query_first("SELECT v FROM fk.t WHERE id = 1")
        .unwrap()
        .unwrap();
    assert_eq!(v, Some(0), "the killed UPDATE did not run on the primary");

    // A forwarded GET_LOCK waits for node 1's lock; KILL QUERY sent to
    // node 1 ends it with NULL, and it takes nothing once released.
    let one = |c: &mut Conn, sql: &str| -> Option<i64> {
        c.query_first(sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .unwrap()
    };
    assert_eq!(one(&mut c1, "SELECT GET_LOCK('fk', 0)"), Some(1));
    assert_eq!(one(&mut c2, "SELECT GET_LOCK('mine', 0)"), Some(1));
    let waiter = std::thread::spawn(move || {
        let started = Instant::now();
        let got: Result<Option<Option<i64>>, _> = c2.query_first("SELECT GET_LOCK('fk', 100)");
        (got, started.elapsed(), c2)
    });
    running("GET_LOCK('fk'");
    c1.query_drop(format!("KILL QUERY {id2}"))
        .expect("KILL QUERY through node 1");
    let (got, took, mut c2) = waiter.join().expect("the waiter");
    assert_eq!(got.expect("GET_LOCK answers"), Some(None), "NULL, as MySQL");
    assert!(took < Duration::from_secs(15), "it ended after {took:?}");
    assert_eq!(one(&mut c1, "SELECT RELEASE_LOCK('fk')"), Some(1));
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        one(&mut c1, "SELECT IS_FREE_LOCK('fk')"),
        Some(1),
        "the killed GET_LOCK took nothing on the primary"
    );
    // The same connection and forwarding session go on.
    assert_eq!(one(&mut c2, "SELECT RELEASE_LOCK('mine')"), Some(1));
    assert_eq!(one(&mut c2, "SELECT GET_LOCK('fk', 0)"), Some(1));
}

/// KILL CONNECTION (sent to node 1) of a node 2 client waiting in a
/// forwarded GET_LOCK closes the connection, and its forwarding session on
/// the primary takes nothing once the lock is released, and goes with the
/// lock the client held (before: it went on waiting there and took it).
#[test]
fn kill_connection_ends_a_forwarded_lock_wait_on_the_primary() {
    let Some(Fixture {
        nodes,
        etcd: _etcd,
        _temp,
    }) = primary_and_replica("cluster KILL CONNECTION of a forwarded lock wait test")
    else {
        return;
    };
    let mut c1 = Conn::new(nodes[0].opts()).expect("connect to node 1");
    let mut c2 = Conn::new(nodes[1].opts()).expect("connect to node 2");
    let id2: u64 = c2.query_first("SELECT CONNECTION_ID()").unwrap().unwrap();
    let one = |c: &mut Conn, sql: &str| -> Option<i64> {
        c.query_first(sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .unwrap()
    };
    assert_eq!(one(&mut c2, "SELECT GET_LOCK('held', 0)"), Some(1));
    assert_eq!(one(&mut c1, "SELECT GET_LOCK('wanted', 0)"), Some(1));
    let waiter = std::thread::spawn(move || {
        // (NULL, as a local KILL of a waiting GET_LOCK answers, or a
        // closed connection.)
        let _ = c2.query_drop("SELECT GET_LOCK('wanted', 100)");
        c2
    });
    wait_for("node 2 to run the GET_LOCK", || {
        let rows: Vec<(u64, Option<String>)> = Conn::new(nodes[1].opts())
            .ok()?
            .query("SELECT ID, INFO FROM information_schema.PROCESSLIST")
            .ok()?;
        rows.iter()
            .any(|(id, info)| *id == id2 && info.as_deref().is_some_and(|i| i.contains("wanted")))
            .then_some(())
    });
    std::thread::sleep(Duration::from_millis(500));
    c1.query_drop(format!("KILL {id2}"))
        .expect("KILL CONNECTION through node 1");
    let started = Instant::now();
    let mut c2 = waiter.join().expect("the waiter");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "it ended after {:?}",
        started.elapsed()
    );
    wait_for("node 2's connection to be closed", || {
        c2.query_drop("SELECT 1").is_err().then_some(())
    });
    assert_eq!(one(&mut c1, "SELECT RELEASE_LOCK('wanted')"), Some(1));
    wait_for("the killed connection's lock to go", || {
        (one(&mut c1, "SELECT IS_FREE_LOCK('held')") == Some(1)).then_some(())
    });
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        one(&mut c1, "SELECT IS_FREE_LOCK('wanted')"),
        Some(1),
        "the killed connection's GET_LOCK took nothing on the primary"
    );
}
