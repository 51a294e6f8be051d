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
