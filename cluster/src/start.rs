//! Starting a [`Node`]: binding the replication listener, installing the
//! write gate, and spawning the coordination loop and the stream server.

use std::sync::Arc;

use ladle_storage::Storage;
use prometheus::Registry;

use crate::config::ClusterConfig;
use crate::ddl::DdlApplier;
use crate::node::Node;
use crate::{coord, gate, stream};

impl Node {
    /// Joins the cluster: loads this node's schema and term history from
    /// storage, installs the write gate (writes are refused until this node
    /// is elected), and starts the coordination loop and the replication
    /// listener on the current tokio runtime. `applier` replays schema
    /// changes received from the primary.
    pub async fn start(
        mut config: ClusterConfig,
        storage: Arc<Storage>,
        applier: Arc<dyn DdlApplier>,
        registry: &Registry,
    ) -> anyhow::Result<Arc<Node>> {
        let listener = tokio::net::TcpListener::bind(config.replication_listen).await?;
        // Port 0 picks a free one: publish the address actually bound.
        config.replication_listen = listener.local_addr()?;
        let node = Node::new(config, storage.clone(), applier, registry)?;
        storage.set_write_gate(Arc::new(gate::Gate(node.clone())));
        // The change log is kept whole until the first coordination step
        // knows what the members still need (`coord::keep_log_for`).
        storage.set_log_floor(0);
        tokio::spawn(stream::serve(node.clone(), listener));
        tokio::spawn(coord::run(node.clone()));
        tracing::info!(
            node = node.config.node_id,
            etcd = ?node.config.etcd,
            "cluster node started; waiting for an election or a primary"
        );
        Ok(node)
    }
}
