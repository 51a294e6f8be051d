//! Glue between the cluster node (`ladle_cluster`) and the SQL front end:
//! the shim's schema-log hook, the replica's replay of schema changes, and
//! write forwarding (the replica's link, the primary's sessions).

use std::sync::Arc;
use std::time::Duration;

use ladle_cluster::{DdlApplier, ForwardClient, ForwardError, Node};
use ladle_common::Lsn;
use ladle_shim::admin::{ClusterMember, RetainedSnapshot, SnapshotTaken};
use ladle_shim::forward::{ForwardChannel, ForwardFailure, Forwarder, KillOutcome};
use ladle_shim::session::Session;
use ladle_shim::{Admin, Engine, SchemaLog};

/// The shim asks the node whether DDL may run, and records what ran.
pub struct NodeSchemaLog(pub Arc<Node>);

impl SchemaLog for NodeSchemaLog {
    fn check_writable(&self) -> Result<(), String> {
        self.0.check_writable()
    }

    fn prepare(
        &self,
        database: Option<&str>,
        settings: &[(String, String)],
        sql: &str,
    ) -> Option<(String, Vec<u8>)> {
        self.0.prepare_ddl(database, settings, sql)
    }

    fn record(
        &self,
        database: Option<&str>,
        settings: &[(String, String)],
        sql: &str,
        carried: bool,
    ) {
        self.0.record_ddl(database, settings, sql, carried);
    }

    fn prepare_accounts(&self, state: &str) -> Option<(String, Vec<u8>)> {
        self.0.prepare_accounts(state)
    }

    fn record_accounts(&self, state: &str, carried: bool) {
        self.0.record_accounts(state, carried);
    }

    fn acknowledge(&self) -> Result<(), String> {
        self.0.acknowledge_schema()
    }
}

/// A replica replays the primary's schema changes through its own front
/// end, so its catalog, dataflow and caches change exactly as a client's
/// DDL would change them.
pub struct EngineDdlApplier(pub Arc<Engine>);

impl DdlApplier for EngineDdlApplier {
    fn apply(
        &self,
        database: Option<&str>,
        settings: &[(String, String)],
        sql: &str,
    ) -> Result<(), String> {
        let mut session = Session::new(0, "replication".into(), "localhost".into());
        // The primary's text names TEMPORARY tables as stored.
        session.names_stored_tables = true;
        session.database = database.map(str::to_string);
        let assignments = settings
            .iter()
            .map(|(name, literal)| format!("SET SESSION {name} = {literal}"));
        for statement in assignments.chain(std::iter::once(sql.to_string())) {
            let (_, result) = self.0.execute(&mut session, &statement);
            result.map_err(|e| format!("{statement}: {} ({})", e.message, e.code.errno))?;
        }
        Ok(())
    }

    fn apply_accounts(&self, state: &str) -> Result<(), String> {
        self.0.install_replicated_accounts(state)
    }

    /// Elected, the node drops the TEMPORARY tables no live session owns
    /// (their sessions were on the old primary), through the schema log.
    fn role_changed(&self, primary: bool) {
        self.0.temporary_tables_follow_role(primary);
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
                protocol: m.protocol,
            })
            .collect())
    }
}

/// A replica's forwarding, over the node's links to the primary.
pub struct NodeForwarder {
    pub node: Arc<Node>,
    /// How long a read waits for the session's forwarded write to arrive.
    pub ryw_timeout: Duration,
}

impl Forwarder for NodeForwarder {
    fn forwards(&self) -> bool {
        self.node.forwards_writes()
    }

    fn open(&self, connection: u32, user: &str, host: &str) -> Box<dyn ForwardChannel> {
        let client = ladle_cluster::protocol::ForwardedClient {
            connection: u64::from(connection),
            user: user.to_string(),
            host: host.to_string(),
        };
        Box::new(Channel {
            client: self.node.forward_client(client),
            schema_wait: self.ryw_timeout,
        })
    }

    fn wait_applied(&self, lsn: Lsn) -> Result<(), String> {
        self.node.wait_applied(lsn, 0, self.ryw_timeout)
    }

    fn kill(
        &self,
        node: u32,
        id: u64,
        user: &str,
        any: bool,
        connection: bool,
    ) -> Result<KillOutcome, String> {
        use ladle_cluster::protocol::KillOutcome as Sent;
        let outcome = self
            .node
            .kill_on(u64::from(node), id, user, any, connection)?;
        Ok(match outcome {
            Sent::Done => KillOutcome::Done,
            Sent::Unknown => KillOutcome::Unknown,
            Sent::NotOwner => KillOutcome::NotOwner,
        })
    }
}

struct Channel {
    client: ForwardClient,
    schema_wait: Duration,
}

impl ForwardChannel for Channel {
    fn call(
        &mut self,
        request: &[u8],
        continuing: bool,
        patient: bool,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<Vec<u8>, ForwardFailure> {
        self.client
            .call(request, continuing, self.schema_wait, patient, interrupted)
            .map_err(|e| match e {
                ForwardError::NotSent(why) => ForwardFailure::NotSent(why),
                ForwardError::Unknown(why) => ForwardFailure::Unknown(why),
            })
    }

    fn lost(&self) -> Option<String> {
        self.client.lost()
    }
}

/// The primary runs each forwarding connection's statements in a session
/// of its own front end.
pub struct EngineForwardTarget(pub Arc<Engine>);

impl ladle_cluster::ForwardTarget for EngineForwardTarget {
    fn open(
        &self,
        replica: u64,
        client: &ladle_cluster::protocol::ForwardedClient,
    ) -> Box<dyn ladle_cluster::ForwardedSession> {
        // A connection id of its own: it names the session's TEMPORARY
        // tables (`#tmp#<id>#t`), apart from every other session's, and
        // its row in this node's process list.
        let id = self.0.new_connection_id();
        let mut session = Session::new(id, client.user.clone(), "replica".into());
        session.serves_forwarded = true;
        let from = ladle_shim::ForwardedFrom {
            // (Node ids are 1 to 255: see `Engine::set_connection_node`.)
            node: u32::try_from(replica).unwrap_or(u32::MAX),
            client: client.connection,
        };
        // Listed only once it holds a place, as a client's connection.
        let admitted = self.0.admit_forwarded().map(|place| Admitted {
            process: self.0.processes.register_forwarded(
                id,
                from,
                client.user.clone(),
                &client.host,
            ),
            _place: place,
        });
        let interrupt = admitted
            .as_ref()
            .map_or_else(Default::default, |a| a.process.interrupt.clone());
        Box::new(ForwardedEngineSession {
            engine: self.0.clone(),
            session,
            admitted,
            interrupt,
            refusal_sent: false,
        })
    }

    /// On the front end's statement threads, as a client's statement here
    /// (tokio's blocking pool grows past the statements in flight under a
    /// contended CPU: see `ladle_shim::run_on_statement_thread`), watching
    /// `interrupt` as a client's statement watches its KILL flag.
    fn run(
        &self,
        mut session: Box<dyn ladle_cluster::ForwardedSession>,
        request: Vec<u8>,
        interrupt: Arc<std::sync::atomic::AtomicBool>,
    ) -> ladle_cluster::ForwardedRun {
        Box::pin(ladle_shim::run_on_statement_thread(move || {
            let _watch = ladle_dataflow::interrupt::watch_flag(interrupt);
            let response = session.run(&request);
            (session, response)
        }))
    }

    fn kill(
        &self,
        id: u64,
        user: &str,
        any: bool,
        connection: bool,
    ) -> ladle_cluster::protocol::KillOutcome {
        use ladle_cluster::protocol::KillOutcome as Answer;
        match self.0.kill_local(id, user, any, connection) {
            KillOutcome::Done => Answer::Done,
            KillOutcome::Unknown => Answer::Unknown,
            KillOutcome::NotOwner => Answer::NotOwner,
        }
    }
}

struct ForwardedEngineSession {
    engine: Arc<Engine>,
    session: Session,
    /// `None`: every place under `max_connections` was taken; each request
    /// is answered 1040 and the forwarding connection closes.
    admitted: Option<Admitted>,
    /// The flag its statements stop at (its process's, once admitted).
    interrupt: Arc<std::sync::atomic::AtomicBool>,
    /// A refused session's 1040 was given: it ends (not before, so that
    /// its first request is answered however late it comes).
    refusal_sent: bool,
}

/// A forwarded session's place under `max_connections` and its row in
/// this node's process list.
struct Admitted {
    process: Arc<ladle_shim::Process>,
    _place: ladle_shim::AdmissionSlot,
}

impl Drop for ForwardedEngineSession {
    /// The replica's client is gone (or its link): its row in the process
    /// list, its place and its TEMPORARY tables here go with it.
    fn drop(&mut self) {
        if let Some(admitted) = &self.admitted {
            self.engine.processes.unregister(admitted.process.id);
        }
        let ended = std::mem::replace(
            &mut self.session,
            Session::new(0, String::new(), String::new()),
        );
        self.engine.end_forwarded_session(ended);
    }
}

impl ladle_cluster::ForwardedSession for ForwardedEngineSession {
    fn run(&mut self, request: &[u8]) -> Vec<u8> {
        let _inflight = self.engine.inflight_guard();
        match &self.admitted {
            Some(admitted) => {
                self.engine
                    .serve_forwarded(&mut self.session, &admitted.process, request)
            }
            None => {
                self.refusal_sent = true;
                self.engine.refuse_forwarded(&mut self.session, request)
            }
        }
    }

    fn interrupt(&self) -> Arc<std::sync::atomic::AtomicBool> {
        self.interrupt.clone()
    }

    /// A session refused a place ends after its answer, as a killed one.
    fn killed(&self) -> bool {
        match &self.admitted {
            Some(admitted) => admitted.process.killed(),
            None => self.refusal_sent,
        }
    }
}

/// The server's view snapshots, shipped with bootstrap checkpoints.
pub struct SnapshotSource(pub Arc<crate::snapshots::Snapshots>);

impl ladle_cluster::ViewSnapshotSource for SnapshotSource {
    fn link_into(&self, into: &std::path::Path) -> Result<Lsn, String> {
        self.0.take_and_link(into).map_err(|e| format!("{e:#}"))
    }
}
