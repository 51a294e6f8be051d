//! Nodes of different builds: the replication protocol version each speaks
//! is exchanged after the cluster-secret handshake, and two that differ
//! refuse each other (logged with both versions, counted, shown in SHOW
//! CLUSTER) instead of misreading each other's frames.

use mysql::prelude::*;
use mysql::Conn;

use super::{fixture, metric, wait_for, wait_role, Fixture};

/// A node claiming another protocol version (`LADLE_TEST_PROTOCOL_VERSION`,
/// as a node of another build would) never follows the primary and cannot
/// forward a write to it (1290); both sides log the two versions and count
/// the refusal; SHOW CLUSTER shows each node's version; a node of the same
/// version replicates as before.
#[test]
fn nodes_of_different_protocol_versions_refuse_each_other() {
    let Some(Fixture {
        mut nodes,
        etcd,
        _temp,
    }) = fixture("protocol version test", 3)
    else {
        return;
    };
    let url = etcd.url();
    let ours = ladle_cluster::PROTOCOL_VERSION;
    let other = ours + 1;
    nodes[2].env = vec![("LADLE_TEST_PROTOCOL_VERSION".into(), other.to_string())];
    nodes[0].start(&url);
    wait_role(&nodes[0], "primary");
    nodes[1].start(&url);
    nodes[2].start(&url);
    wait_role(&nodes[1], "replica");
    let mut c = Conn::new(nodes[0].opts()).expect("connect to the primary");
    c.query_drop("CREATE DATABASE pv").unwrap();
    c.query_drop("CREATE TABLE pv.t (id INT PRIMARY KEY)")
        .unwrap();
    c.query_drop("INSERT INTO pv.t VALUES (1)").unwrap();

    let primary_says = format!("this node speaks version {ours}, the peer version {other}");
    let node3_says = format!("this node speaks version {other}, the peer version {ours}");
    wait_for("the primary to log the mismatch", || {
        std::fs::read_to_string(&nodes[0].log)
            .ok()?
            .contains(&primary_says)
            .then_some(())
    });
    wait_for("node 3 to log the mismatch", || {
        std::fs::read_to_string(&nodes[2].log)
            .ok()?
            .contains(&node3_says)
            .then_some(())
    });
    let mismatches = "ladle_cluster_protocol_mismatches_total";
    wait_for("both sides to count the mismatch", || {
        (metric(&nodes[0], mismatches)? > 0.0 && metric(&nodes[2], mismatches)? > 0.0).then_some(())
    });
    assert_eq!(metric(&nodes[1], mismatches), Some(0.0));
    let (role, applied) = nodes[2].health().expect("node 3 answers");
    assert_ne!(role, "replica", "{}", nodes[2].log_tail());
    assert_eq!(applied, 0, "node 3 received no entry");
    let mut c3 = wait_for("a connection to node 3", || Conn::new(nodes[2].opts()).ok());
    match c3.query_drop("INSERT INTO pv.t VALUES (3)") {
        Err(mysql::Error::MySqlError(e)) => {
            assert_eq!(e.code, 1290, "{e}");
            assert!(e.message.contains(&node3_says), "{e}");
        }
        other => panic!("a write through node 3: {other:?}"),
    }

    // SHOW CLUSTER names each node's version.
    let versions = wait_for("SHOW CLUSTER to list the three nodes", || {
        let rows: Vec<(u64, String, String, u64, u64, u32)> = c.query("SHOW CLUSTER").ok()?;
        let versions: Vec<(u64, u32)> = rows.iter().map(|r| (r.0, r.5)).collect();
        (versions.len() == 3).then_some(versions)
    });
    assert_eq!(versions, vec![(1, ours), (2, ours), (3, other)]);

    // The node of the same version replicates as before.
    c.query_drop("INSERT INTO pv.t VALUES (2)").unwrap();
    let mut c2 = Conn::new(nodes[1].opts()).expect("connect to node 2");
    wait_for("node 2 to have both rows", || {
        let ids: Vec<i64> = c2.query("SELECT id FROM pv.t ORDER BY id").ok()?;
        (ids == vec![1, 2]).then_some(())
    });
}
