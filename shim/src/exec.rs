//! The statement context: [`Engine`], everything a statement may touch
//! besides its session (storage, the dataflow, accounts, caches, cluster
//! hooks), and the lookups every handler shares (resolving names and the
//! database a query reads, evaluating constants). Routing is in
//! [`crate::dispatch`]; each kind of statement has its handler module.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::sync::Arc;

use ladle_common::Value;
use ladle_dataflow::{Dataflow, PreparedQuery};
use ladle_storage::Storage;
use sqlparser::ast::{self, Expr, SetExpr, TableFactor};

use crate::error::{Result, ShimError};
use crate::forward::KillOutcome;
use crate::metrics::Metrics;
use crate::session::Session;
use crate::vars::{EvalContext, EvalError, ServerFacts};

/// Everything a statement may touch besides its session.
pub struct Engine {
    pub storage: Arc<Storage>,
    /// User accounts and their privileges (see [`crate::accounts`]).
    pub accounts: crate::accounts::Accounts,
    /// The RSA key pair for `caching_sha2_password`'s full authentication
    /// over plaintext (`None`: such logins are refused; TLS ones work).
    pub rsa_keys: Option<Arc<crate::rsa_keys::RsaKeyPair>>,
    /// Failed logins per host (`max_connect_errors`, `FLUSH HOSTS`).
    pub host_errors: crate::throttle::HostErrors,
    /// Open connections (`SHOW PROCESSLIST`, `KILL`).
    pub processes: crate::processes::Processes,
    pub dataflow: Arc<Dataflow>,
    pub facts: ServerFacts,
    pub metrics: Arc<Metrics>,
    /// Places under `max_connections`: this node's clients and, on a
    /// cluster's primary, the sessions replicas forward to.
    pub admission: Arc<crate::Admission>,
    /// Server operations behind `SNAPSHOT VIEWS` / `SHOW SNAPSHOTS`.
    pub admin: Arc<dyn crate::admin::Admin>,
    /// Statements executing right now (shutdown waits for zero).
    pub inflight: AtomicUsize,
    /// Text SELECTs already bound to a view, by (database, SQL text), so a
    /// repeated ad-hoc query skips parsing and planning. Cleared by any DDL.
    pub select_cache: SelectCache,
    /// Result-column names decided by each SELECT's text (see
    /// [`crate::result_names`]).
    pub(crate) result_names: crate::result_names::ResultNames,
    /// Compiled CHECK constraints per table.
    pub checks: crate::checks::CheckCache,
    /// Every table's FOREIGN KEYs.
    pub foreign_keys: crate::foreign_keys::ForeignKeyCache,
    /// TEMPORARY tables and the connections that own them.
    pub temporary_tables: crate::temporary_tables::TemporaryTables,
    /// Transactions' and schema changes' holds on tables.
    pub(crate) metadata_locks: Arc<crate::metadata_locks::MetadataLocks>,
    /// Transactions' and statements' locks on rows (see [`crate::row_locks`]).
    pub(crate) row_locks: Arc<crate::row_locks::RowLocks>,
    /// Set on a cluster node: refuses DDL where writes are not taken and
    /// records each schema change for replicas (see [`SchemaLog`]).
    pub schema_log: std::sync::OnceLock<Arc<dyn SchemaLog>>,
    /// Set on a cluster node: writes sent here while it is not the
    /// primary run there ([`crate::forward`]).
    pub forwarder: std::sync::OnceLock<Arc<dyn crate::forward::Forwarder>>,
    /// The next connection id: clients' connections and, on a cluster's
    /// primary, the sessions replicas forward statements to (a connection
    /// id names its TEMPORARY tables, so no two sessions share one). 0 is
    /// the server's own sessions' (schema-log replay, cleanup).
    pub(crate) next_connection_id: std::sync::atomic::AtomicU32,
    /// The cluster node id whose connection ids this process gives out
    /// (0: a single node), see [`crate::connection_node`].
    pub(crate) connection_node: std::sync::atomic::AtomicU32,
}

/// A cluster node's view of schema changes. Replicas need the primary's
/// DDL as well as its row changes; the change log holds only rows, so each
/// successful DDL statement is recorded with the LSN it follows (it runs
/// inside [`Storage::fenced`](ladle_storage::Storage::fenced), so no write
/// commits meanwhile) and replayed by replicas at that position.
pub trait SchemaLog: Send + Sync {
    /// `Err(reason)` when this node takes no writes now (error 1290).
    fn check_writable(&self) -> std::result::Result<(), String>;
    /// The meta record (key, value) that records `sql` (run with
    /// `database` current): the schema change's own catalog batch carries
    /// it ([`Storage::fenced_with_record`](ladle_storage::Storage::fenced_with_record)),
    /// so a crash cannot keep one without the other.
    /// `settings`: the session variables `sql` ran under that replicas
    /// must set too ([`crate::vars::schema_change_settings`]).
    fn prepare(
        &self,
        database: Option<&str>,
        settings: &[(String, String)],
        sql: &str,
    ) -> Option<(String, Vec<u8>)>;
    /// Called after `sql` changed the schema, before any later write can
    /// commit; `carried`: a catalog write of the change already wrote the
    /// prepared record (else this writes it).
    fn record(
        &self,
        database: Option<&str>,
        settings: &[(String, String)],
        sql: &str,
        carried: bool,
    );
    /// The meta record (key, value) that hands the account list `state`
    /// ([`crate::accounts::Accounts::encoded`]) to replicas now: the batch
    /// that stores the list carries it, so a crash cannot keep one without
    /// the other. `None`: it could not be made (the list is not stored).
    fn prepare_accounts(&self, state: &str) -> Option<(String, Vec<u8>)>;
    /// Called after an account statement, with the whole account list:
    /// replicas install it (the statement's text, which may hold a
    /// password, is never sent). `carried`: the list's own batch already
    /// wrote the prepared record (else this writes it).
    fn record_accounts(&self, state: &str, carried: bool);
    /// Called after a recorded schema change, outside the fence: waits
    /// until replicas have it (semi-synchronous DDL); `Err(reason)`
    /// (error 1290) if they did not confirm it.
    fn acknowledge(&self) -> std::result::Result<(), String> {
        Ok(())
    }
}

/// Plans bound before the last DDL are stale: `SELECT *` over an altered
/// table, or a named view dropped and created again, must be planned anew
/// (MySQL re-prepares such statements transparently).
#[derive(Default)]
pub struct SelectCache {
    entries: parking_lot::Mutex<CachedSelects>,
    /// Bumped by every DDL statement; a prepared SELECT bound under an
    /// older generation is planned again from its SQL when executed.
    generation: std::sync::atomic::AtomicU64,
}

struct CachedSelects<P = PreparedQuery> {
    by_text: HashMap<(String, String), P>,
    /// Estimated heap the entries hold (see [`cached_select_bytes`]).
    bytes: usize,
}

impl<P> Default for CachedSelects<P> {
    fn default() -> Self {
        CachedSelects {
            by_text: HashMap::new(),
            bytes: 0,
        }
    }
}

impl<P> CachedSelects<P> {
    /// Keeps `p` for `key`, emptying the cache first when it is full (by
    /// count or by estimated bytes).
    fn insert(&mut self, key: (String, String), p: P) {
        let bytes = cached_select_bytes(&key.1);
        if self.by_text.len() >= SELECT_CACHE_LIMIT || self.bytes + bytes > SELECT_CACHE_BYTES {
            self.clear();
        }
        if self.by_text.insert(key, p).is_none() {
            self.bytes += bytes;
        }
    }

    fn clear(&mut self) {
        self.by_text.clear();
        self.bytes = 0;
    }
}

/// Entries kept in [`Engine::select_cache`] before it is emptied.
const SELECT_CACHE_LIMIT: usize = 4096;

/// Estimated heap kept in [`Engine::select_cache`] before it is emptied:
/// a count alone let 4,096 long IN lists hold ~700 MB outside the memory
/// limit.
const SELECT_CACHE_BYTES: usize = 32 << 20;

/// Estimated heap one cached SELECT holds: its bound plan keeps the parsed
/// query, ~48 bytes per byte of text (1,000 SELECTs with 500-element IN
/// lists, 3.5 KB each, held 169 MB), plus the text itself.
fn cached_select_bytes(sql: &str) -> usize {
    1024 + sql.len() * 49
}

impl SelectCache {
    pub(crate) fn get(&self, key: &(String, String)) -> Option<PreparedQuery> {
        self.entries.lock().by_text.get(key).cloned()
    }

    /// Keeps `pq`, the view `key.1` read in database `key.0`.
    pub(crate) fn insert(&self, key: (String, String), pq: &PreparedQuery) {
        self.entries.lock().insert(key, pq.clone());
    }

    /// DDL ran: every plan bound so far may be stale.
    pub(crate) fn invalidate(&self) {
        self.entries.lock().clear();
        self.generation.fetch_add(1, AtomicOrdering::SeqCst);
    }

    pub fn generation(&self) -> u64 {
        self.generation.load(AtomicOrdering::SeqCst)
    }
}

/// Decrements [`Engine::inflight`] when dropped.
pub struct InflightGuard<'a>(&'a AtomicUsize);

impl Drop for InflightGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, AtomicOrdering::SeqCst);
    }
}

impl Engine {
    /// A connection id no other session of this process has (from 1);
    /// in a cluster, no other session of the cluster has: the node's id
    /// in its high bits (see [`crate::connection_node`]).
    pub fn new_connection_id(&self) -> u32 {
        let node = self.connection_node.load(AtomicOrdering::SeqCst);
        if node == 0 {
            return self.next_connection_id.fetch_add(1, AtomicOrdering::SeqCst);
        }
        loop {
            // Wrapping within the node's range (0 is never an id).
            let local = self.next_connection_id.fetch_add(1, AtomicOrdering::SeqCst)
                & crate::processes::LOCAL_ID_MASK;
            if local != 0 {
                return (node << crate::processes::NODE_SHIFT) | local;
            }
        }
    }

    /// Makes this process give out cluster node `node`'s connection ids
    /// (before any client connects). `Err` when `node` does not fit the
    /// ids' high bits.
    pub fn set_connection_node(&self, node: u64) -> std::result::Result<(), String> {
        let fits = u32::try_from(node)
            .ok()
            .filter(|n| (1..=crate::processes::MAX_NODE).contains(n));
        let Some(node) = fits else {
            return Err(format!(
                "node id {node}: a cluster node id is 1 to {} (it makes up the high bits of \
                 the node's connection ids)",
                crate::processes::MAX_NODE
            ));
        };
        self.connection_node.store(node, AtomicOrdering::SeqCst);
        Ok(())
    }

    /// KILL [QUERY] (`connection`) of this node's connection `id`, as
    /// `user` (`any`: it holds SUPER): for a KILL sent here or from
    /// another node. KILL CONNECTION of a session forwarded here from a
    /// replica is sent on to its client's connection there (blocking,
    /// bounded): the client's connection closes as a local KILL closes
    /// it, and with it the forwarding session here; killed here only when
    /// the replica cannot be told (the session's link then closes).
    pub fn kill_local(&self, id: u64, user: &str, any: bool, connection: bool) -> KillOutcome {
        let p = match self.processes.killable(id, user, any) {
            Ok(p) => p,
            Err(crate::processes::KillError::Unknown) => return KillOutcome::Unknown,
            Err(crate::processes::KillError::NotOwner) => return KillOutcome::NotOwner,
        };
        let forwarder = self.forwarder.get();
        if let (true, Some(from), Some(forwarder)) = (connection, p.forwarded, forwarder) {
            // (The owner check is done, here, as the same user.)
            match forwarder.kill(from.node, from.client, user, true, true) {
                Ok(KillOutcome::Done) => return KillOutcome::Done,
                outcome => tracing::warn!(
                    id,
                    node = from.node,
                    client = from.client,
                    ?outcome,
                    "KILL of a forwarded session: its client on the replica was not killed; \
                     closing the forwarding session here"
                ),
            }
        }
        p.kill(connection);
        KillOutcome::Done
    }

    pub fn inflight_guard(&self) -> InflightGuard<'_> {
        self.inflight.fetch_add(1, AtomicOrdering::SeqCst);
        InflightGuard(&self.inflight)
    }

    pub fn eval_constant(&self, s: &Session, e: &Expr) -> Result<Value> {
        let ctx = EvalContext {
            session: s,
            facts: &self.facts,
            columns: &[],
            row: &[],
        };
        match ctx.eval(e) {
            Ok(v) => Ok(v),
            Err(EvalError::UnknownVariable(n)) => Err(ShimError::UnknownVariable(n)),
            Err(EvalError::UnknownColumn(c)) => {
                Err(ShimError::UnknownColumn(c, "field list".into()))
            }
            Err(EvalError::Compile(err) | EvalError::Eval(err)) => Err(err.into()),
            Err(EvalError::Refused(err)) => Err(ShimError::Wire(err)),
        }
    }

    /// The database a query runs in; 1046 if it needs one and none is
    /// selected.
    pub fn query_database(&self, s: &Session, q: &ast::Query) -> Result<String> {
        match &s.database {
            Some(d) => Ok(d.clone()),
            None => {
                if query_has_unqualified_table(q) {
                    Err(ShimError::NoDatabase)
                } else {
                    Ok(String::new())
                }
            }
        }
    }

    /// `(database, table)` for a possibly qualified name.
    pub fn resolve(&self, s: &Session, name: &ast::ObjectName) -> Result<(String, String)> {
        match name.0.as_slice() {
            [t] => Ok((
                s.database.clone().ok_or(ShimError::NoDatabase)?,
                t.value.clone(),
            )),
            [d, t] => Ok((d.value.clone(), t.value.clone())),
            _ => Err(ShimError::Parse(format!("bad name {name}"))),
        }
    }
}

/// The catalog meta key holding a named view's definition.
pub fn view_meta_key(db: &str, view: &str) -> String {
    format!("shim/view/{db}/{}", view.to_ascii_lowercase())
}

/// A named view's definition text, if recorded.
pub fn view_definition(storage: &Storage, db: &str, view: &str) -> Option<String> {
    let key = view_meta_key(db, view);
    let found = storage.list_meta(&key).ok()?;
    found
        .into_iter()
        .find(|(k, _)| *k == key)
        .map(|(_, v)| String::from_utf8_lossy(&v).into_owned())
}

fn query_has_unqualified_table(q: &ast::Query) -> bool {
    fn factor(f: &TableFactor) -> bool {
        match f {
            TableFactor::Table { name, .. } => name.0.len() < 2,
            TableFactor::Derived { subquery, .. } => query_has_unqualified_table(subquery),
            TableFactor::NestedJoin {
                table_with_joins, ..
            } => {
                factor(&table_with_joins.relation)
                    || table_with_joins.joins.iter().any(|j| factor(&j.relation))
            }
            _ => false,
        }
    }
    fn body(b: &SetExpr) -> bool {
        match b {
            SetExpr::Select(s) => s
                .from
                .iter()
                .any(|t| factor(&t.relation) || t.joins.iter().any(|j| factor(&j.relation))),
            SetExpr::Query(q) => query_has_unqualified_table(q),
            SetExpr::SetOperation { left, right, .. } => body(left) || body(right),
            _ => false,
        }
    }
    body(&q.body)
}

#[cfg(test)]
mod tests {
    use super::{CachedSelects, SELECT_CACHE_BYTES, SELECT_CACHE_LIMIT};

    #[test]
    fn the_select_cache_is_bounded_by_estimated_bytes_as_well_as_count() {
        let mut cache: CachedSelects<()> = CachedSelects::default();
        let in_list = |n: usize| {
            let ids: Vec<String> = (n * 500..n * 500 + 500).map(|i| i.to_string()).collect();
            format!("SELECT v FROM t WHERE id IN ({})", ids.join(","))
        };
        let mut most = 0;
        for n in 0..SELECT_CACHE_LIMIT {
            cache.insert(("db".into(), in_list(n)), ());
            assert!(cache.bytes <= SELECT_CACHE_BYTES);
            most = most.max(cache.by_text.len());
        }
        assert!(most < SELECT_CACHE_LIMIT / 4, "{most} long IN lists kept");
        // Short statements are bounded by count.
        cache.clear();
        for n in 0..SELECT_CACHE_LIMIT * 2 {
            cache.insert(("db".into(), format!("SELECT v FROM t WHERE id = {n}")), ());
            assert!(cache.by_text.len() <= SELECT_CACHE_LIMIT);
        }
        assert!(cache.by_text.len() > SELECT_CACHE_LIMIT / 2);
    }
}
