//! [`ClusterConfig`]: how a node joins the cluster.

use std::net::SocketAddr;
use std::time::Duration;

use crate::auth::ClusterSecret;

/// How a node joins the cluster.
#[derive(Clone, Debug)]
pub struct ClusterConfig {
    /// etcd endpoints (`http://127.0.0.1:2379`).
    pub etcd: Vec<String>,
    /// This node's id, unique in the cluster.
    pub node_id: u64,
    /// Where MySQL clients reach this node (published in etcd).
    pub mysql_addr: String,
    /// Where replicas connect to this node when it is primary.
    pub replication_listen: SocketAddr,
    /// The host other nodes reach this one at, when it is not the IP it
    /// listens on (a wildcard address, NAT, a container network): the
    /// replication address published in etcd is this host with the port
    /// bound (`mysql_addr` is already built with it).
    pub advertise: Option<String>,
    /// Replicas that must persist a write before it is acknowledged.
    pub sync_replicas: usize,
    /// The etcd lease's time to live (the primary's leadership lasts at most
    /// this long after its last successful keep-alive).
    pub lease_ttl: Duration,
    /// How long a write waits for its synchronous replicas before the client
    /// gets an error (the write may still survive).
    pub ack_timeout: Duration,
    /// Key prefix in etcd (one cluster per prefix).
    pub prefix: String,
    /// The node's data directory (bootstraps are received and sent there).
    pub data_dir: std::path::PathBuf,
    /// Change-log entries kept beyond what live members still need (a
    /// member further behind is bootstrapped from a checkpoint).
    pub log_keep_entries: u64,
    /// The secret every replication connection must prove it holds (both
    /// ways: see `auth`).
    pub secret: ClusterSecret,
}
