//! The tests' own start-up: a node's first start binds ports the system
//! picks (port 0) and says which in its ports file (`--ports-file`), so no
//! port handed over by a test can be taken before the node binds it.

use std::collections::BTreeSet;

use mysql::Conn;

use super::{fixture, primary, wait_for, Fixture};

/// Two nodes started at the same moment both serve, each on ports of its
/// own (MySQL, metrics, replication) as its ports file says, one the
/// primary and one its replica; a restart keeps them. Before: each start
/// was handed ports found free and released, which the other start, or
/// any process, could take first; the node exited ("Address already in
/// use") and the harness started it again on other ports with a fresh
/// data directory (up to five times).
#[test]
fn nodes_started_at_once_serve_on_ports_they_picked() {
    let Some(Fixture {
        mut nodes,
        etcd,
        _temp,
    }) = fixture("cluster start-up on ports the nodes pick test", 2)
    else {
        return;
    };
    let url = etcd.url();
    std::thread::scope(|s| {
        for node in nodes.iter_mut() {
            let url = &url;
            s.spawn(move || node.start(url));
        }
    });
    let mut seen = BTreeSet::new();
    for node in &nodes {
        for port in [node.port, node.metrics_port, node.replication_port] {
            assert_ne!(port, 0, "node {} said its ports", node.id);
            assert!(seen.insert(port), "port {port} bound twice");
        }
    }
    let p = wait_for("a primary", || primary(&nodes));
    wait_for("the other node to follow it", || {
        matches!(nodes[1 - p].health(), Some((r, _)) if r == "replica").then_some(())
    });
    for node in &nodes {
        Conn::new(node.opts()).expect("each node serves MySQL on its port");
    }
    // A restart keeps its ports.
    let node = &mut nodes[1 - p];
    let ports = (node.port, node.metrics_port, node.replication_port);
    node.kill9();
    node.start(&url);
    wait_for("the restarted node to follow", || {
        matches!(node.health(), Some((r, _)) if r == "replica").then_some(())
    });
    assert_eq!((node.port, node.metrics_port, node.replication_port), ports);
}
