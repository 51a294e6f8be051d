//! [`Node`]: one cluster member's state (its role, term, leader, connected
//! replicas and metrics) and the calls the server and the shim make on it.
//! Starting it is `start`; the coordination loop (`coord`), the primary's
//! streams (`stream`) and the replica's side (`follow`) add their own
//! methods.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Instant;

use ladle_common::Lsn;
use ladle_storage::Storage;
use parking_lot::{Condvar, Mutex};
use prometheus::{IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry};

use crate::config::ClusterConfig;
use crate::ddl::{self, DdlApplier};
use crate::hooks::{ForwardTarget, ViewSnapshotSource};

/// Change-log entries kept in memory for the replication streams (about
/// a second of writes at a primary's full rate).
const RECENT_LOG_ENTRIES: usize = 4096;

/// What a node is doing now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Role {
    /// No leader known yet (start-up, or an election is under way).
    Candidate = 0,
    /// Holds the leader key: takes writes.
    Primary = 1,
    /// Follows the primary and is close to its position.
    Replica = 2,
    /// Follows (or looks for) a primary and is behind it.
    CatchingUp = 3,
    /// Has a change-log tail the primary never had: must be re-bootstrapped
    /// (see docs/cluster.md); serves no replication.
    Diverged = 4,
}

impl Role {
    fn from_u8(v: u8) -> Role {
        match v {
            1 => Role::Primary,
            2 => Role::Replica,
            3 => Role::CatchingUp,
            4 => Role::Diverged,
            _ => Role::Candidate,
        }
    }

    /// The name `/health`, `scripts/cluster.sh status` and metrics use.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Candidate => "candidate",
            Role::Primary => "primary",
            Role::Replica => "replica",
            Role::CatchingUp => "catching-up",
            Role::Diverged => "diverged",
        }
    }
}

/// A replica's progress as its primary sees it.
#[derive(Clone, Debug)]
pub struct ReplicaProgress {
    pub node_id: u64,
    /// The highest LSN the replica has persisted.
    pub acked: Lsn,
    /// The newest schema change it has replayed: (the entry it follows,
    /// how many at that entry).
    pub schema: (Lsn, u32),
}

/// A cluster member as etcd last listed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberInfo {
    pub node_id: u64,
    pub mysql: String,
    /// Its role, as it published it ([`Role::as_str`]).
    pub role: String,
    pub applied: Lsn,
    /// Its replication listener (where a KILL of its connections goes).
    pub replication: String,
    /// The replication protocol version it speaks (0: not published).
    pub protocol: u32,
}

/// Test hook: with `LADLE_TEST_CRASH_AFTER_DDL` set, a schema change
/// whose text contains it, or an account list that does (a user's name),
/// aborts the process (as a kill -9 would) once it has run, before this
/// node notes its record: the record must already be durable with the
/// change.
fn crash_point_after_ddl(text: &str) {
    if let Ok(marker) = std::env::var("LADLE_TEST_CRASH_AFTER_DDL") {
        if !marker.is_empty() && text.contains(&marker) {
            tracing::warn!(%marker, "LADLE_TEST_CRASH_AFTER_DDL: aborting");
            std::process::abort();
        }
    }
}

/// A replica more than this many entries behind its primary reports
/// itself catching-up.
const CATCHING_UP_ENTRIES: u64 = 64;

/// One cluster member (this process).
pub struct Node {
    pub(crate) config: ClusterConfig,
    pub(crate) storage: Arc<Storage>,
    role: AtomicU8,
    /// The term this node leads or follows (0: none yet).
    pub(crate) term: AtomicU64,
    /// The leader's MySQL address while this node is not primary.
    pub(crate) leader_mysql: Mutex<Option<String>>,
    /// The term and replication address of the primary this node follows
    /// (where forwarded writes go); `None` while there is none.
    pub(crate) leader_replication: Mutex<Option<(u64, String)>>,
    /// Positions of checkpoints sent to bootstrap nodes, with when they
    /// stop mattering: the log keeps what follows them until then, so the
    /// node can follow on after its restart.
    pub(crate) bootstrap_holds: Mutex<Vec<(Lsn, Instant)>>,
    /// The position of the newest schema change recorded here: (the entry
    /// it follows, how many at that entry).
    last_schema: Mutex<(Lsn, u32)>,
    /// Ships view snapshots with bootstrap checkpoints (set by the server
    /// when its storage is durable).
    pub(crate) view_snapshots: std::sync::OnceLock<Arc<dyn ViewSnapshotSource>>,
    /// Runs statements forwarded by replicas while this node is primary.
    pub(crate) forward_target: std::sync::OnceLock<Arc<dyn ForwardTarget>>,
    /// While primary: the instant until which its lease is certainly valid.
    pub(crate) lease_valid_until: Mutex<Option<Instant>>,
    /// Replicas connected to this primary, by connection.
    pub(crate) replicas: Mutex<Vec<(u64, ReplicaProgress)>>,
    /// Signalled when a replica acknowledges or the role changes (schema
    /// changes wait on it; writes wait in `ack_waiters`).
    pub(crate) acked: Condvar,
    /// Writes waiting for the synchronous replicas to confirm them.
    pub(crate) ack_waiters: crate::ack_wait::AckWaiters,
    /// The newest LSN committed here; streams to replicas wait on it.
    pub(crate) committed: tokio::sync::watch::Sender<Lsn>,
    /// The primary's last LSN as a replica last heard it.
    pub(crate) primary_last: AtomicU64,
    /// On the primary: the newest LSN acknowledged to a client.
    pub(crate) acknowledged: AtomicU64,
    /// The members etcd listed at the last coordination step, by node id.
    pub(crate) members: Mutex<Vec<MemberInfo>>,
    /// On the primary: when recent LSNs committed, oldest first (for
    /// replication lag in seconds); trimmed to what a replica still lacks.
    commit_times: Mutex<std::collections::VecDeque<(Lsn, Instant)>>,
    pub(crate) ddl: ddl::SchemaHistory,
    pub(crate) history: ddl::TermHistory,
    pub(crate) applier: std::sync::OnceLock<Arc<dyn DdlApplier>>,
    pub(crate) metrics: NodeMetrics,
    pub(crate) next_stream: AtomicU64,
}

pub(crate) struct NodeMetrics {
    pub(crate) role: IntGaugeVec,
    pub(crate) term: IntGauge,
    pub(crate) applied: IntGauge,
    pub(crate) acknowledged: IntGauge,
    pub(crate) replica_lag: IntGaugeVec,
    pub(crate) replica_lag_seconds: prometheus::GaugeVec,
    pub(crate) elections: IntCounter,
    pub(crate) not_acknowledged: IntCounter,
    pub(crate) apply_failures: IntCounter,
    pub(crate) forwarded: IntCounterVec,
    pub(crate) bootstraps_sent: IntCounter,
    pub(crate) auth_refused: IntCounter,
    pub(crate) protocol_mismatches: IntCounter,
}

impl NodeMetrics {
    fn new(registry: &Registry) -> anyhow::Result<NodeMetrics> {
        let m = NodeMetrics {
            role: IntGaugeVec::new(
                Opts::new("ladle_cluster_role", "1 for this node's current role"),
                &["role"],
            )?,
            term: IntGauge::new("ladle_cluster_term", "the term this node leads or follows")?,
            applied: IntGauge::new(
                "ladle_cluster_applied_lsn",
                "the newest change-log position applied here",
            )?,
            acknowledged: IntGauge::new(
                "ladle_cluster_acknowledged_lsn",
                "the newest change-log position this node acknowledged to a client while \
                 primary (--sync-replicas replicas held it)",
            )?,
            replica_lag: IntGaugeVec::new(
                Opts::new(
                    "ladle_cluster_replica_lag_entries",
                    "on the primary: change-log entries each replica has not acknowledged",
                ),
                &["replica"],
            )?,
            replica_lag_seconds: prometheus::GaugeVec::new(
                Opts::new(
                    "ladle_cluster_replica_lag_seconds",
                    "on the primary: how long ago the oldest entry each replica has not \
                     acknowledged was committed (0 when it has them all)",
                ),
                &["replica"],
            )?,
            elections: IntCounter::new(
                "ladle_cluster_elections_won_total",
                "elections this node won",
            )?,
            apply_failures: IntCounter::new(
                "ladle_cluster_apply_failures_total",
                "replicated entries (row or schema changes) this replica could not apply; \
                 each is tried again after a reconnect, so a rising count means it is stuck",
            )?,
            not_acknowledged: IntCounter::new(
                "ladle_cluster_writes_not_acknowledged_total",
                "writes committed here whose acknowledgement was refused \
                 (synchronous replicas missing or leadership uncertain)",
            )?,
            forwarded: IntCounterVec::new(
                Opts::new(
                    "ladle_cluster_forwarded_total",
                    "statements this node sent to the primary, by outcome: answered \
                     (whatever the answer), not_sent (no primary: 1290), unknown \
                     (the answer was lost)",
                ),
                &["outcome"],
            )?,
            bootstraps_sent: IntCounter::new(
                "ladle_cluster_bootstraps_sent_total",
                "checkpoints this node sent to bootstrap other nodes",
            )?,
            auth_refused: IntCounter::new(
                "ladle_cluster_auth_refused_total",
                "replication connections refused: no or wrong proof of the cluster secret",
            )?,
            protocol_mismatches: IntCounter::new(
                "ladle_cluster_protocol_mismatches_total",
                "replication connections (from or to this node) ended because the two \
                 nodes speak different replication protocol versions",
            )?,
        };
        registry.register(Box::new(m.role.clone()))?;
        registry.register(Box::new(m.protocol_mismatches.clone()))?;
        registry.register(Box::new(m.auth_refused.clone()))?;
        registry.register(Box::new(m.forwarded.clone()))?;
        registry.register(Box::new(m.bootstraps_sent.clone()))?;
        registry.register(Box::new(m.term.clone()))?;
        registry.register(Box::new(m.applied.clone()))?;
        registry.register(Box::new(m.acknowledged.clone()))?;
        registry.register(Box::new(m.replica_lag.clone()))?;
        registry.register(Box::new(m.replica_lag_seconds.clone()))?;
        registry.register(Box::new(m.elections.clone()))?;
        registry.register(Box::new(m.not_acknowledged.clone()))?;
        registry.register(Box::new(m.apply_failures.clone()))?;
        Ok(m)
    }
}

impl Node {
    /// A node that is not started (no etcd, no listener): for tests of the
    /// replication pieces.
    #[cfg(test)]
    pub(crate) fn unstarted(storage: Arc<Storage>, applier: Arc<dyn DdlApplier>) -> Arc<Node> {
        use std::time::Duration;

        use crate::auth::ClusterSecret;

        let config = ClusterConfig {
            etcd: Vec::new(),
            node_id: 2,
            mysql_addr: "127.0.0.1:0".into(),
            replication_listen: "127.0.0.1:0".parse().expect("address"),
            sync_replicas: 1,
            lease_ttl: Duration::from_secs(3),
            ack_timeout: Duration::from_secs(5),
            prefix: "/test".into(),
            advertise: None,
            data_dir: std::env::temp_dir(),
            log_keep_entries: 1000,
            secret: ClusterSecret::new(b"the test cluster secret").expect("secret"),
        };
        Node::new(config, storage, applier, &Registry::new()).expect("node")
    }

    /// The node's state, loaded from storage; nothing runs yet.
    pub(crate) fn new(
        config: ClusterConfig,
        storage: Arc<Storage>,
        applier: Arc<dyn DdlApplier>,
        registry: &Registry,
    ) -> anyhow::Result<Arc<Node>> {
        let (committed, _) = tokio::sync::watch::channel(storage.last_lsn());
        // What replication streams send next is read from memory.
        storage.keep_recent_log(RECENT_LOG_ENTRIES);
        let node = Node {
            config,
            ddl: ddl::SchemaHistory::load(&storage)?,
            history: ddl::TermHistory::load(&storage)?,
            storage,
            role: AtomicU8::new(Role::Candidate as u8),
            term: AtomicU64::new(0),
            leader_mysql: Mutex::new(None),
            leader_replication: Mutex::new(None),
            bootstrap_holds: Mutex::new(Vec::new()),
            last_schema: Mutex::new((0, 0)),
            forward_target: std::sync::OnceLock::new(),
            view_snapshots: std::sync::OnceLock::new(),
            lease_valid_until: Mutex::new(None),
            replicas: Mutex::new(Vec::new()),
            acked: Condvar::new(),
            ack_waiters: Default::default(),
            committed,
            primary_last: AtomicU64::new(0),
            acknowledged: AtomicU64::new(0),
            commit_times: Mutex::new(std::collections::VecDeque::new()),
            members: Mutex::new(Vec::new()),
            applier: std::sync::OnceLock::new(),
            metrics: NodeMetrics::new(registry)?,
            next_stream: AtomicU64::new(1),
        };
        let _ = node.applier.set(applier);
        Ok(Arc::new(node))
    }

    /// The address the replication listener bound (its port picked by
    /// the system when configured as 0).
    pub fn replication_listen(&self) -> std::net::SocketAddr {
        self.config.replication_listen
    }

    /// The replication address published in etcd (see
    /// [`ClusterConfig::advertise`]).
    pub(crate) fn replication_addr(&self) -> String {
        match &self.config.advertise {
            Some(host) => format!("{host}:{}", self.config.replication_listen.port()),
            None => self.config.replication_listen.to_string(),
        }
    }

    /// Why this node refuses a stream only the primary serves.
    pub(crate) fn not_primary(&self) -> String {
        format!("node {} is not the primary", self.config.node_id)
    }

    /// Ships view snapshots from `source` with the checkpoints this node
    /// sends to bootstrapping nodes.
    pub fn set_view_snapshots(&self, source: Arc<dyn ViewSnapshotSource>) {
        let _ = self.view_snapshots.set(source);
    }

    pub fn node_id(&self) -> u64 {
        self.config.node_id
    }

    pub fn role(&self) -> Role {
        Role::from_u8(self.role.load(Ordering::Acquire))
    }

    pub fn term(&self) -> u64 {
        self.term.load(Ordering::Acquire)
    }

    /// The newest change-log position applied on this node.
    pub fn applied(&self) -> Lsn {
        self.storage.last_lsn()
    }

    /// The cluster's members as etcd last listed them (at most a
    /// coordination step old), by node id.
    pub fn members(&self) -> Vec<MemberInfo> {
        self.members.lock().clone()
    }

    /// On the primary: each connected replica's acknowledged position.
    pub fn replicas(&self) -> Vec<ReplicaProgress> {
        self.replicas
            .lock()
            .iter()
            .map(|(_, p)| p.clone())
            .collect()
    }

    /// `Err(reason)` unless this node is the primary and certainly still
    /// holds its lease (the reason names the primary, when known).
    pub fn check_writable(&self) -> Result<(), String> {
        if ddl::applying_replicated() {
            return Ok(());
        }
        match self.role() {
            Role::Primary if self.lease_valid() => Ok(()),
            Role::Primary => Err("the primary's etcd lease may have expired; retry".into()),
            _ => match self.leader_mysql.lock().clone() {
                Some(addr) => Err(format!(
                    "node {} is a replica; the primary is at {addr}",
                    self.config.node_id
                )),
                None => Err("no primary: an election is under way; retry".into()),
            },
        }
    }

    /// Records a schema change that just ran here (called by the shim
    /// inside [`Storage::fenced`]): replicas replay it after the current LSN.
    pub fn record_ddl(
        &self,
        database: Option<&str>,
        settings: &[(String, String)],
        sql: &str,
        carried: bool,
    ) {
        crash_point_after_ddl(sql);
        let record = ddl::DdlRecord::statement(database, sql).with_settings(settings);
        self.record_schema(record, carried);
    }

    /// The meta record (key, value) [`Node::record_ddl`] would write for
    /// `sql` now: the shim has the schema change's own batch carry it, so
    /// a crash keeps both or neither (`Storage::fenced_with_record`).
    pub fn prepare_ddl(
        &self,
        database: Option<&str>,
        settings: &[(String, String)],
        sql: &str,
    ) -> Option<(String, Vec<u8>)> {
        let record = ddl::DdlRecord::statement(database, sql).with_settings(settings);
        self.prepare_schema(&record)
    }

    /// The meta record (key, value) [`Node::record_accounts`] would write
    /// for the account list `state` now: the shim writes it in the batch
    /// that stores the list, so a crash keeps both or neither.
    pub fn prepare_accounts(&self, state: &str) -> Option<(String, Vec<u8>)> {
        self.prepare_schema(&ddl::DdlRecord::account_list(state))
    }

    fn prepare_schema(&self, record: &ddl::DdlRecord) -> Option<(String, Vec<u8>)> {
        match self.ddl.prepare(self.storage.last_lsn(), record) {
            Ok(prepared) => Some(prepared),
            Err(e) => {
                tracing::error!(error = %e, what = record.what(), "encoding a schema change's record failed");
                None
            }
        }
    }

    /// Records the account list after an account statement ran here
    /// (called by the shim inside [`Storage::fenced`]): replicas install
    /// it after the current LSN, as a schema change. `carried`: the batch
    /// that stored the list wrote its record ([`Node::prepare_accounts`]).
    pub fn record_accounts(&self, state: &str, carried: bool) {
        crash_point_after_ddl(state);
        self.record_schema(ddl::DdlRecord::account_list(state), carried);
    }

    fn record_schema(&self, record: ddl::DdlRecord, carried: bool) {
        let after = self.storage.last_lsn();
        let what = record.what().to_string();
        if let Err(e) = self.ddl.record(&self.storage, after, record, carried) {
            tracing::error!(error = %e, what, "recording a schema change for replicas failed");
        }
        *self.last_schema.lock() = (after, self.ddl.count_at(after));
        self.committed.send_replace(self.storage.last_lsn());
    }

    /// Semi-synchronous DDL: on the primary, waits (at most
    /// `ack_timeout`) until `sync_replicas` replicas have replayed the
    /// newest schema change recorded here, as a write waits for its
    /// entry. `Err` when they did not in time or leadership changed: the
    /// change is made here and may or may not survive a failover.
    pub fn acknowledge_schema(&self) -> Result<(), String> {
        let needed = self.config.sync_replicas;
        if ddl::applying_replicated() || self.role() != Role::Primary || needed == 0 {
            return Ok(());
        }
        let target = *self.last_schema.lock();
        let term = self.term();
        let deadline = Instant::now() + self.config.ack_timeout;
        let mut replicas = self.replicas.lock();
        loop {
            if self.role() != Role::Primary || self.term() != term {
                return Err(
                    "the schema change was made but not acknowledged: this node \
                     may no longer be the primary"
                        .into(),
                );
            }
            // A replica past the entry the change follows has replayed it.
            let mut done: Vec<u64> = replicas
                .iter()
                .filter(|(_, p)| p.schema >= target || p.acked > target.0)
                .map(|(_, p)| p.node_id)
                .collect();
            done.sort_unstable();
            done.dedup();
            if done.len() >= needed {
                return Ok(());
            }
            if self.acked.wait_until(&mut replicas, deadline).timed_out() {
                return Err(format!(
                    "the schema change was made but not acknowledged: {needed} synchronous \
                     replica(s) did not replay it in time"
                ));
            }
        }
    }

    /// Counts a connection to a peer that `e` ended because the two speak
    /// different protocol versions (`version`).
    pub(crate) fn note_link_error(&self, e: &anyhow::Error) {
        if e.downcast_ref::<crate::version::VersionMismatch>()
            .is_some()
        {
            self.metrics.protocol_mismatches.inc();
        }
    }

    pub(crate) fn lease_valid(&self) -> bool {
        matches!(*self.lease_valid_until.lock(), Some(t) if Instant::now() < t)
    }

    pub(crate) fn set_role(&self, role: Role) {
        let old = Role::from_u8(self.role.swap(role as u8, Ordering::AcqRel));
        if old != role {
            tracing::info!(
                node = self.config.node_id,
                from = old.as_str(),
                to = role.as_str(),
                term = self.term(),
                "cluster role changed"
            );
            // Writers waiting for acknowledgements re-check their role.
            {
                let _guard = self.replicas.lock();
                self.acked.notify_all();
                self.ack_waiters.wake_all();
            }
            if let Some(applier) = self.applier.get() {
                applier.role_changed(role == Role::Primary);
            }
        }
        self.refresh_metrics();
    }

    pub(crate) fn refresh_metrics(&self) {
        let role = self.role();
        for r in [
            Role::Candidate,
            Role::Primary,
            Role::Replica,
            Role::CatchingUp,
            Role::Diverged,
        ] {
            self.metrics
                .role
                .with_label_values(&[r.as_str()])
                .set(i64::from(r == role));
        }
        self.metrics.term.set(self.term() as i64);
        let applied = self.applied();
        self.metrics.applied.set(applied as i64);
        self.metrics
            .acknowledged
            .set(self.acknowledged.load(Ordering::Acquire) as i64);
        self.metrics.replica_lag.reset();
        self.metrics.replica_lag_seconds.reset();
        if role == Role::Primary {
            let replicas = self.replicas();
            let mut times = self.commit_times.lock();
            // Entries every replica has are no longer needed here.
            if let Some(min) = replicas.iter().map(|p| p.acked).min() {
                while times.front().is_some_and(|(lsn, _)| *lsn <= min) {
                    times.pop_front();
                }
            }
            for p in replicas {
                let id = p.node_id.to_string();
                self.metrics
                    .replica_lag
                    .with_label_values(&[&id])
                    .set(applied.saturating_sub(p.acked) as i64);
                let oldest_missing = times.iter().find(|(lsn, _)| *lsn > p.acked);
                self.metrics
                    .replica_lag_seconds
                    .with_label_values(&[&id])
                    .set(oldest_missing.map_or(0.0, |(_, t)| t.elapsed().as_secs_f64()));
            }
        }
    }

    /// Notes when `lsn` committed (for the lag in seconds).
    pub(crate) fn note_commit(&self, lsn: Lsn) {
        /// Bounds the memory when no replica acknowledges.
        const KEEP: usize = 100_000;
        let mut times = self.commit_times.lock();
        if times.back().is_none_or(|(last, _)| *last < lsn) {
            times.push_back((lsn, Instant::now()));
            if times.len() > KEEP {
                times.pop_front();
            }
        }
    }

    /// Replica or catching-up, from how far behind the primary it is.
    pub(crate) fn follower_role(&self) -> Role {
        let behind = self
            .primary_last
            .load(Ordering::Acquire)
            .saturating_sub(self.applied());
        if behind > CATCHING_UP_ENTRIES {
            Role::CatchingUp
        } else {
            Role::Replica
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::time::Duration;

    use super::*;

    /// A schema-change applier that applies nothing: for tests of nodes
    /// that replay no DDL.
    pub(crate) struct NoDdl;

    impl DdlApplier for NoDdl {
        fn apply(
            &self,
            _database: Option<&str>,
            _settings: &[(String, String)],
            _sql: &str,
        ) -> Result<(), String> {
            Ok(())
        }

        fn apply_accounts(&self, _state: &str) -> Result<(), String> {
            Ok(())
        }
    }

    #[test]
    fn the_published_replication_address_uses_the_advertised_host() {
        let node = Node::unstarted(Storage::in_memory(), Arc::new(NoDdl));
        assert_eq!(node.replication_addr(), "127.0.0.1:0");
        let mut config = node.config.clone();
        config.advertise = Some("ladle-2".into());
        config.replication_listen = "0.0.0.0:7312".parse().expect("address");
        let node = Node::new(
            config,
            Storage::in_memory(),
            Arc::new(NoDdl),
            &Registry::new(),
        )
        .expect("node");
        assert_eq!(node.replication_addr(), "ladle-2:7312");
    }

    #[test]
    fn a_position_not_applied_yet_is_waited_for_with_a_bound() {
        let node = Node::unstarted(Storage::in_memory(), Arc::new(NoDdl));
        assert!(node.wait_applied(0, 0, Duration::ZERO).is_ok());
        let err = node
            .wait_applied(5, 0, Duration::from_millis(10))
            .expect_err("position 5 was never applied");
        assert!(err.contains("not yet 5"), "{err}");
        // A schema change the primary ran at the current position counts.
        let err = node
            .wait_applied(0, 1, Duration::from_millis(10))
            .expect_err("no schema change was replayed");
        assert!(err.contains("position 0"), "{err}");
        node.record_ddl(None, &[], "CREATE DATABASE x", false);
        assert!(node.wait_applied(0, 1, Duration::ZERO).is_ok());
    }

    /// The shim stores an account list and its prepared record in one
    /// batch, then the node notes it: a crash before the note still leaves
    /// the record for replicas once the node is back.
    #[test]
    fn an_account_lists_record_stored_with_the_list_outlives_a_crash_before_the_note() {
        let storage = Storage::in_memory();
        let node = Node::unstarted(storage.clone(), Arc::new(NoDdl));
        node.record_ddl(None, &[], "CREATE DATABASE x", false);
        let first = r#"{"version":1,"accounts":["ann"]}"#;
        let (key, value) = node.prepare_accounts(first).expect("prepared");
        storage
            .put_metas(&[("shim/accounts", first.as_bytes()), (&key, &value)])
            .unwrap();
        node.record_accounts(first, true);
        assert_eq!(node.ddl.count_at(0), 2);
        // The next list: stored with its record, then the node "crashes".
        let second = r#"{"version":1,"accounts":["ann","bob"]}"#;
        let (key, value) = node.prepare_accounts(second).expect("prepared");
        storage
            .put_metas(&[("shim/accounts", second.as_bytes()), (&key, &value)])
            .unwrap();
        let back = ddl::SchemaHistory::load(&storage).unwrap();
        let lists: Vec<(String, bool)> = back
            .at(0, 0)
            .into_iter()
            .map(|(_, r)| (r.sql, r.accounts))
            .collect();
        assert_eq!(
            lists,
            vec![
                ("CREATE DATABASE x".to_string(), false),
                (first.to_string(), true),
                (second.to_string(), true)
            ]
        );
    }
}
