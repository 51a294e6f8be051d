//! Glue between the cluster node (`ladle_cluster`) and the SQL front end:
//! the shim's schema-log hook and the replica's replay of schema changes.

use std::sync::Arc;

use ladle_cluster::{DdlApplier, Node};
use ladle_shim::session::Session;
use ladle_shim::{Engine, SchemaLog};

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
