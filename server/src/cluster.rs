//! Glue between the cluster node (`ladle_cluster`) and the SQL front end:
//! the shim's schema-log hook and the replica's replay of schema changes.

use std::sync::Arc;

use ladle_cluster::{DdlApplier, Node};
use ladle_shim::admin::{ClusterMember, RetainedSnapshot, SnapshotTaken};
use ladle_shim::session::Session;
use ladle_shim::{Admin, Engine, SchemaLog};

/// The shim asks the node whether DDL may run, and records what ran.
pub struct NodeSchemaLog(pub Arc<Node>);

impl SchemaLog for NodeSchemaLog {
    fn check_writable(&self) -> Result<(), String> {
        self.0.check_writable()
    }

    fn record(&self, database: Option<&str>, sql: &str) {
        self.0.record_ddl(database, sql);
    }
}

/// A replica replays the primary's schema changes through its own front
/// end, so its catalog, dataflow and caches change exactly as a client's
/// DDL would change them.
pub struct EngineDdlApplier(pub Arc<Engine>);

impl DdlApplier for EngineDdlApplier {
    fn apply(&self, database: Option<&str>, sql: &str) -> Result<(), String> {
        let mut session = Session::new(0, "replication".into(), "localhost".into());
        session.database = database.map(str::to_string);
        let (_, result) = self.0.execute(&mut session, sql);
        result
            .map(|_| ())
            .map_err(|e| format!("{} ({})", e.message, e.code.errno))
    }
}

/// The server's admin statements with `SHOW CLUSTER` answered by the node
/// (set once it has joined; snapshots go to the server's snapshot admin).
pub struct ClusterAdmin {
    pub snapshots: Arc<dyn Admin>,
    pub node: std::sync::OnceLock<Arc<Node>>,
}

impl Admin for ClusterAdmin {
    fn snapshot_now(&self) -> Result<SnapshotTaken, String> {
        self.snapshots.snapshot_now()
    }

    fn snapshots(&self) -> Result<Vec<RetainedSnapshot>, String> {
        self.snapshots.snapshots()
    }

    fn cluster(&self) -> Result<Vec<ClusterMember>, String> {
        let Some(node) = self.node.get() else {
            return self.snapshots.cluster();
        };
        let members = node.members();
        let primary_applied = members
            .iter()
            .find(|m| m.role == "primary")
            .map(|m| m.applied);
        Ok(members
            .into_iter()
            .map(|m| ClusterMember {
                node: m.node_id,
                behind: primary_applied.map_or(0, |p| p.saturating_sub(m.applied)),
                mysql: m.mysql,
                role: m.role,
                applied: m.applied,
            })
            .collect())
    }
}
