//! Named locks across the cluster: a statement calling GET_LOCK or kin on
//! a replica runs on the primary, so the lock is held in the forwarding
//! session there and excludes every other node's clients too; it goes when
//! the replica's client does.

use mysql::prelude::*;
use mysql::Conn;

use super::{
    errno, primary, primary_and_replica, primary_and_replicas, wait_for, Fixture, NODE_SHIFT,
};

/// GET_LOCK through node 2 (a replica) makes GET_LOCK of the same name
/// through node 1 (the primary) time out (0), and through another node 2
/// connection too; IS_USED_LOCK names the forwarding session (node 1's id
/// range); a waiter on node 1 gets it when node 2's client releases it,
/// and node 2's client closing releases what it holds.
#[test]
fn a_named_lock_taken_on_a_replica_excludes_the_primary() {
    let Some(Fixture {
        nodes,
        etcd: _etcd,
        _temp,
    }) = primary_and_replica("cluster named lock test")
    else {
        return;
    };
    let mut c1 = Conn::new(nodes[0].opts()).expect("connect to node 1");
    let mut c2 = Conn::new(nodes[1].opts()).expect("connect to node 2");
    let lock = |c: &mut Conn, sql: &str| -> Option<i64> {
        c.query_first(sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .unwrap()
    };

    assert_eq!(lock(&mut c2, "SELECT GET_LOCK('migrate', 0)"), Some(1));
    assert_eq!(lock(&mut c1, "SELECT GET_LOCK('migrate', 0)"), Some(0));
    let holder = lock(&mut c1, "SELECT IS_USED_LOCK('migrate')").expect("held");
    assert_eq!(
        holder >> NODE_SHIFT,
        1,
        "the forwarding session's id {holder}"
    );
    let mut c3 = Conn::new(nodes[1].opts()).expect("connect to node 2");
    assert_eq!(lock(&mut c3, "SELECT GET_LOCK('migrate', 0)"), Some(0));

    // Node 1 waits; node 2's release hands it over.
    let waiter = std::thread::spawn(move || {
        let got: Option<i64> = c1
            .query_first("SELECT GET_LOCK('migrate', 60)")
            .unwrap()
            .unwrap();
        (got, c1)
    });
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(lock(&mut c2, "SELECT RELEASE_LOCK('migrate')"), Some(1));
    let (got, mut c1) = waiter.join().expect("the waiter");
    assert_eq!(got, Some(1));
    assert_eq!(lock(&mut c3, "SELECT IS_FREE_LOCK('migrate')"), Some(0));

    // Node 2's client leaving releases its locks on the primary.
    assert_eq!(lock(&mut c3, "SELECT GET_LOCK('other', 0)"), Some(1));
    assert_eq!(lock(&mut c1, "SELECT GET_LOCK('other', 0)"), Some(0));
    drop(c3);
    wait_for("node 2's client's lock to go with it", || {
        (lock(&mut c1, "SELECT GET_LOCK('other', 0)") == Some(1)).then_some(())
    });
}

/// A replica's client waiting in GET_LOCK longer than the 30 s a
/// forwarded statement's answer is otherwise waited for gets the lock when
/// it is released (before: "the primary did not answer in 30 s", the link
/// dropped, and with it the forwarding session holding the client's other
/// locks).
#[test]
fn a_forwarded_lock_wait_outlasts_the_forwarding_bound() {
    let Some(Fixture {
        nodes,
        etcd: _etcd,
        _temp,
    }) = primary_and_replica("cluster long named lock wait test")
    else {
        return;
    };
    let mut c1 = Conn::new(nodes[0].opts()).expect("connect to node 1");
    // (The client waits longer than the fixture's 20 s read timeout.)
    let patient = mysql::OptsBuilder::from_opts(nodes[1].opts())
        .read_timeout(Some(std::time::Duration::from_secs(90)));
    let mut c2 = Conn::new(patient).expect("connect to node 2");
    let one = |c: &mut Conn, sql: &str| -> Option<i64> {
        c.query_first(sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .unwrap()
    };
    assert_eq!(one(&mut c1, "SELECT GET_LOCK('long', 0)"), Some(1));
    assert_eq!(one(&mut c2, "SELECT GET_LOCK('mine', 0)"), Some(1));
    let waiter = std::thread::spawn(move || {
        let got: Result<Option<i64>, _> = c2.query_first("SELECT GET_LOCK('long', 120)");
        (got, c2)
    });
    // (The bound, the cluster crate's `forward::MAX_WAIT`, is 30 s.)
    std::thread::sleep(std::time::Duration::from_secs(33));
    assert_eq!(one(&mut c1, "SELECT RELEASE_LOCK('long')"), Some(1));
    let (got, mut c2) = waiter.join().expect("the waiter");
    assert_eq!(got.expect("GET_LOCK answers"), Some(1));
    // Still the same forwarding session: the earlier lock is still held.
    assert_eq!(one(&mut c2, "SELECT RELEASE_LOCK('mine')"), Some(1));
}

/// A replica's client holding named locks (in its forwarding session on
/// the primary) when the primary dies: its next statement gets 1927 and
/// its connection closes, as a MySQL client's connection ends with the
/// server holding its locks (before: it went on, silently without its
/// locks, which the new primary grants to others). A client of the same
/// node that held none goes on, and the locks are free on the new primary.
#[test]
fn a_replicas_client_loses_its_connection_with_its_locks_in_a_failover() {
    let Some(Fixture {
        mut nodes,
        etcd: _etcd,
        _temp,
    }) = primary_and_replicas("cluster named locks failover test", 3)
    else {
        return;
    };
    let one = |c: &mut Conn, sql: &str| -> Option<i64> {
        c.query_first(sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .unwrap()
    };
    // A holder on each replica (either may be elected), and a client
    // that holds none.
    let mut holders: Vec<Conn> = (1..3)
        .map(|i| Conn::new(nodes[i].opts()).expect("connect to a replica"))
        .collect();
    for (i, c) in holders.iter_mut().enumerate() {
        let sql = format!("SELECT GET_LOCK('held{i}', 0)");
        assert_eq!(one(c, &sql), Some(1));
    }
    let mut bystander = Conn::new(nodes[2].opts()).expect("connect to node 3");
    assert_eq!(one(&mut bystander, "SELECT IS_FREE_LOCK('held0')"), Some(0));

    nodes[0].kill9();
    let new = wait_for("a new primary", || primary(&nodes[1..]));
    for (i, c) in holders.iter_mut().enumerate() {
        assert_eq!(
            errno(c.query_drop("SELECT 1")),
            1927,
            "node {}'s client that held a lock",
            i + 2
        );
        assert!(
            c.query_drop("SELECT 1").is_err(),
            "its connection is closed"
        );
    }
    assert_eq!(one(&mut bystander, "SELECT 1"), Some(1));
    let mut c = Conn::new(nodes[new + 1].opts()).expect("connect to the new primary");
    for i in 0..2 {
        let sql = format!("SELECT GET_LOCK('held{i}', 0)");
        assert_eq!(one(&mut c, &sql), Some(1), "the lock is free");
    }
}
