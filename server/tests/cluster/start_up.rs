//! The tests' own start-up: a node's ports are found free ([`free_port`])
//! before it binds them, and another process (the tests run side by side)
//! can take one meanwhile.

use std::net::TcpListener;

use super::{fixture, wait_role, Fixture};

/// A node whose port was taken before its first start binds it exits
/// ("Address already in use") and is started again on fresh ports with a
/// fresh data directory; the failed attempt's log is kept beside its log.
/// Before: the node exited and the test waited 60 s for its role, then
/// failed.
#[test]
fn a_node_whose_port_was_taken_starts_on_fresh_ports() {
    let Some(Fixture {
        mut nodes,
        etcd,
        _temp,
    }) = fixture("cluster start-up on a taken port test", 1)
    else {
        return;
    };
    let node = &mut nodes[0];
    // The port bound last, once storage is open: the retry starts over.
    let taken = node.replication_port;
    let _holder = TcpListener::bind(("127.0.0.1", taken)).expect("take the port");
    node.start(&etcd.url());
    wait_role(node, "primary");
    assert_ne!(node.replication_port, taken, "started on a fresh port");
    let failed = node.log.with_file_name("node1.port-taken-1.log");
    let text = std::fs::read_to_string(&failed).expect("the failed start's log");
    assert!(text.contains("Address already in use"), "{text}");
    // A restart keeps its ports.
    let ports = (node.port, node.metrics_port, node.replication_port);
    node.kill9();
    node.start(&etcd.url());
    wait_role(node, "primary");
    assert_eq!((node.port, node.metrics_port, node.replication_port), ports);
}
