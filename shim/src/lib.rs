//! Ladle's MySQL front end: the wire protocol ([`protocol`]), sessions,
//! authentication, SQL parsing (`sqlparser`, MySQL dialect), statement
//! routing, compatibility statements, and the one table mapping errors to
//! MySQL error numbers and SQLSTATEs.
//!
//! Entry point: [`Frontend`]: build it over a `Storage` and a `Dataflow`,
//! then [`Frontend::serve`] a TCP listener. Each connection is served by
//! [`protocol::serve`] over a `handler::Connection`; every statement runs synchronously in
//! [`Engine`] on a statement thread (`statement_threads`: a pool with as
//! many threads as statements run at once), so an fsync never stalls a
//! tokio worker and a panic below becomes error 1105 for that client only. The
//! exception is a prepared SELECT the views answer from memory (every key
//! cached, no write to wait for): it runs on the connection's task, since
//! the hand-off would cost more than the read.
//!
//! Routing (`dispatch`, one place: the MySQL forms the SQL parser does not
//! read by their first words, the rest by the parsed statement; each kind
//! of statement has its handler module over the statement context, `exec`):
//! SELECTs go to `Dataflow::prepare` + `execute` (prepared SELECTs
//! are bound once and executed as reader lookups), except queries without
//! FROM over session state (`@@version`, `DATABASE()`...), answered here, and
//! `information_schema` queries, evaluated over virtual tables built from the
//! catalog. INSERT/UPDATE/DELETE become storage `WriteOp`s (see `dml`);
//! transactions buffer them (see [`session::Transaction`]); UPDATE IGNORE
//! decides which rows keep their keys in `update_ignore`. DDL goes to
//! storage's catalog and notifies the dataflow. FOREIGN KEY and CHECK
//! constraints are enforced when each statement runs (`foreign_keys`,
//! `checks`).
//!
//! The MySQL protocol is implemented here ([`protocol`]), directly on
//! tokio's `AsyncRead`/`AsyncWrite`: framing with an explicit read buffer
//! (pipelined commands are each read whole, in order), the handshake and
//! the TLS switch, a table mapping every command byte to its handling,
//! replies with real status flags and warning counts, and prepared
//! statements (long data, parameter types remembered across executions).
//! Decision: the shim owns this layer instead of using `opensrv-mysql`
//! (0.7.0 was used until then, under byte-level patches) or a vendored fork
//! of it: that crate lost pipelined commands (its packet reader returned
//! packets pointing into a freed buffer), answered commands MySQL leaves
//! unanswered (COM_STMT_CLOSE, COM_STMT_SEND_LONG_DATA), answered unknown
//! commands OK, and panicked on malformed input; owning the protocol makes
//! each of those a plain local fix. `wire` maps Ladle's types and values
//! to column definitions and cells; [`sqltext::from_bytes`] turns client
//! bytes into statement text without losing binary string literals.
//!
//! This crate must not depend on `rocksdb`; it sees storage only through
//! `ladle_storage`'s API.

mod account_replication;
mod account_statements;
mod accounts;
pub mod admin;
mod admission;
mod alter;
mod alter_table;
mod auth;
mod catalog;
mod checks;
mod clock;
mod collation_names;
mod column_default;
mod column_types;
mod create_table_select;
mod create_view;
mod ddl;
mod dispatch;
mod dml;
mod error;
mod exec;
mod explain;
mod foreign_keys;
pub mod forward;
mod found_rows;
mod functional_index;
mod handler;
mod impossible;
mod index_hint_check;
mod kill;
mod metadata_locks;
mod metrics;
pub mod named_locks;
mod net;
mod out_of_range;
mod output;
mod params;
mod prepared;
mod privileges;
mod processes;
pub mod protocol;
mod recursive_cte;
mod refused;
mod result_names;
mod returning;
mod rollup;
mod row_locking;
mod row_locks;
pub mod rsa_keys;
mod select;
pub mod session;
mod set_list;
mod set_variable;
mod sha2_crypt;
mod show_accounts;
mod sql_mode;
mod sql_prepare;
pub mod sqltext;
mod statement_threads;
mod strict_warnings;
mod table_notes;
mod table_options;
mod temporary_cleanup;
mod temporary_names;
mod temporary_tables;
mod throttle;
pub mod tls;
mod tokens;
mod transaction;
mod update_ignore;
mod user_assign;
pub mod vars;
mod view_check_option;
mod view_options;
mod wire;

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ladle_dataflow::Dataflow;
use ladle_storage::Storage;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

pub use admin::Admin;
pub use admission::{Admission, AdmissionSlot};
pub use error::{MysqlCode, ShimError};
pub use exec::{Engine, SchemaLog};
pub use metrics::Metrics;
pub use output::Output;
pub use processes::{connection_node, ForwardedFrom, Process};
pub use vars::{ReadConsistency, ServerFacts, Timeouts};

/// Runs `f` on a statement thread, as the front end runs its clients'
/// statements (`statement_threads`: the pool grows to the statements in
/// flight and no further, also under a contended CPU, where tokio's
/// blocking pool grows past them), for statements the server runs for
/// others: those a replica forwards. `Err`: `f` panicked, or no thread
/// could be started.
pub async fn run_on_statement_thread<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> std::result::Result<T, String> {
    statement_threads::global()
        .run(f)
        .await
        .map_err(|aborted| aborted.to_string())
}

/// Front-end settings.
#[derive(Clone, Debug)]
pub struct FrontendConfig {
    pub user: String,
    pub password: String,
    pub max_connections: usize,
    pub max_allowed_packet: usize,
    /// Offer TLS with this configuration (see [`tls::server_config`]).
    pub tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
    /// The key pair for `caching_sha2_password` over plaintext (see
    /// [`rsa_keys::RsaKeyPair::load_or_generate`]).
    pub rsa_keys: Option<Arc<rsa_keys::RsaKeyPair>>,
}

/// Accepts MySQL connections and serves them.
pub struct Frontend {
    engine: Arc<Engine>,
    config: FrontendConfig,
}

impl Frontend {
    pub fn new(
        storage: Arc<Storage>,
        dataflow: Arc<Dataflow>,
        facts: ServerFacts,
        metrics: Arc<Metrics>,
        admin: Arc<dyn Admin>,
        config: FrontendConfig,
    ) -> Result<Arc<Frontend>, ShimError> {
        let accounts = accounts::Accounts::load(&storage, &config.user, &config.password)?;
        let admission = Arc::new(Admission::new(config.max_connections, metrics.clone()));
        let engine = Arc::new(Engine {
            accounts,
            rsa_keys: config.rsa_keys.clone(),
            host_errors: Default::default(),
            processes: Default::default(),
            storage,
            dataflow,
            facts,
            metrics,
            admission,
            admin,
            inflight: AtomicUsize::new(0),
            select_cache: Default::default(),
            result_names: Default::default(),
            checks: Default::default(),
            foreign_keys: Default::default(),
            temporary_tables: Default::default(),
            metadata_locks: Default::default(),
            row_locks: Default::default(),
            schema_log: Default::default(),
            forwarder: Default::default(),
            next_connection_id: AtomicU32::new(1),
            connection_node: AtomicU32::new(0),
        });
        Ok(Arc::new(Frontend { engine, config }))
    }

    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// Accepts connections until `shutdown` turns true, then closes open
    /// connections and waits for statements already executing to finish.
    /// Repeated reads are parsed and answered on the calling runtime's
    /// threads, so give them [`ladle_dataflow::THREAD_STACK_BYTES`] stacks
    /// (as `ladle` does): a long operator chain nests as deep as it is long.
    pub async fn serve(
        self: Arc<Frontend>,
        listener: TcpListener,
        mut shutdown: watch::Receiver<bool>,
    ) {
        let mut tasks = tokio::task::JoinSet::new();
        let stop_rx = shutdown.clone();
        loop {
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => {
                        let me = self.clone();
                        let mut stop = stop_rx.clone();
                        tasks.spawn(async move {
                            tokio::select! {
                                _ = me.handle(stream) => {}
                                _ = stopped(&mut stop) => {}
                            }
                        });
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                },
                _ = stopped(&mut shutdown) => break,
                Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            }
        }
        drop(listener);
        tasks.shutdown().await;
        // Statements run on statement threads and finish even when their
        // connection is gone; wait for them before storage is dropped.
        while self.engine.inflight.load(Ordering::SeqCst) > 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Serves one client connection to completion.
    pub async fn handle(self: Arc<Frontend>, mut stream: TcpStream) {
        let metrics = self.engine.metrics.clone();
        // Refused before the greeting when already full (cheap); else the
        // place is taken once the client has authenticated.
        // Every attempt counts in Connections, and a refused one in
        // Aborted_connects, as MariaDB counts them.
        metrics.connections_total.inc();
        if self.engine.admission.full() {
            self.engine.admission.refused();
            metrics.connections_aborted.inc();
            let p = net::error_packet(0, 1040, "08004", "Too many connections");
            let _ = stream.write_all(&p).await;
            let _ = stream.shutdown().await;
            return;
        }
        let _ = stream.set_nodelay(true);
        // A loopback client is `localhost`, as MySQL names it.
        let host = match stream.peer_addr() {
            Ok(a) if a.ip().is_loopback() => "localhost".to_string(),
            Ok(a) => a.ip().to_string(),
            Err(_) => "unknown".into(),
        };
        let max_errors = self
            .engine
            .facts
            .security
            .max_connect_errors
            .load(Ordering::SeqCst);
        if self.engine.host_errors.blocked(&host, max_errors) {
            // Refused before the greeting, as MySQL does.
            let message = throttle::HostErrors::blocked_message(&host);
            let code = error::ER_HOST_IS_BLOCKED;
            let p = net::error_packet(0, code.errno, code.sqlstate, &message);
            metrics.errors.with_label_values(&["1129"]).inc();
            let _ = stream.write_all(&p).await;
            let _ = stream.shutdown().await;
            return;
        }
        let id = self.engine.new_connection_id();
        let conn = handler::Connection::new(self.engine.clone(), id, host);
        let settings = protocol::Settings {
            max_allowed_packet: self.config.max_allowed_packet,
            tls: self.config.tls.clone(),
            connect_timeout: Duration::from_secs(self.engine.facts.timeouts.connect.max(1)),
            admission: self.engine.admission.clone(),
        };
        tracing::debug!(connection = id, "connected");
        protocol::serve(stream, conn, &settings).await;
    }
}

/// Resolves once `rx` holds `true` (or its sender is gone).
pub async fn stopped(rx: &mut watch::Receiver<bool>) {
    loop {
        let stop = *rx.borrow_and_update();
        if stop {
            return;
        }
        if rx.changed().await.is_err() {
            return;
        }
    }
}
