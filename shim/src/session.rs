//! Per-connection state: current database, autocommit and the open
//! transaction, session and user variables, prepared statements, warnings.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};

use ladle_common::{Lsn, Value};
use ladle_dataflow::PreparedQuery;
use ladle_storage::WriteOp;

/// Transactions.
///
/// `BEGIN` / `START TRANSACTION` (or `SET autocommit = 0`) opens a
/// transaction. Each INSERT/UPDATE/DELETE/REPLACE inside it is validated
/// against the catalog and compiled into a storage `WriteOp`, which is
/// buffered in the session rather than applied. `COMMIT` submits every
/// buffered op as ONE `Storage::write` call, so the transaction is applied
/// atomically (all of it or none of it) and durably; a constraint violation
/// found then (duplicate key, NOT NULL, bad value) is returned by `COMMIT`
/// and nothing is applied. `ROLLBACK` discards the buffer. DDL inside a
/// transaction commits the buffered writes first, as MySQL's implicit
/// commit does.
///
/// Within the transaction:
/// - reads (SELECT) see committed state plus the transaction's own
///   uncommitted writes (READ COMMITTED with read-your-own-writes): a read
///   of a table the transaction wrote is computed by an upquery over the
///   committed rows with the buffered ops replayed (`dml::transaction_overlay`,
///   `PreparedQuery::execute_overlay`), not from the view's cache; reads of
///   other tables are ordinary view lookups;
/// - INSERT/REPLACE check PRIMARY/UNIQUE keys when they run, against the
///   table as the transaction sees it (committed rows with its earlier
///   writes replayed, plus the statement's own rows): a duplicate fails
///   that statement with 1062 and the transaction goes on; INSERT IGNORE
///   buffers only the rows that do not collide (`dml::insert_in_transaction`);
/// - AUTO_INCREMENT values are reserved from storage when the INSERT runs,
///   so the OK packet and `LAST_INSERT_ID()` report them before `COMMIT`
///   (a rolled-back transaction leaves a gap, as in MySQL);
/// - UPDATE/DELETE counts and ORDER BY ... LIMIT row choices are computed
///   over the table as the transaction's earlier statements leave it
///   (committed rows with the buffered ops replayed in memory), and at
///   COMMIT the ops apply in order, so later statements act on earlier
///   ones' effects as in MySQL.
///
/// Isolation: READ COMMITTED (the default; READ UNCOMMITTED is served the
/// same) reads as above. REPEATABLE READ (InnoDB's consistent reads) takes
/// one storage read view (a RocksDB snapshot) at the transaction's first
/// read, or at `START TRANSACTION WITH CONSISTENT SNAPSHOT`, and answers
/// every SELECT of the transaction from it, with the transaction's own
/// writes on top (`dml::snapshot_overlay`, `PreparedQuery::execute_snapshot`):
/// such reads are computed by upqueries over the snapshot, never from a
/// view's cache, so they cost what a read of a written table costs under
/// READ COMMITTED. Writes (UPDATE/DELETE, the key checks) read the latest
/// committed rows, as InnoDB's locking "current reads" do. A table created
/// or altered since the read view was taken fails the read with 1412
/// ("Table definition has changed"), as InnoDB does for a new table
/// (MariaDB reads an instantly added column as NULL instead). SERIALIZABLE is
/// refused: InnoDB gives it by turning every read into a locking read with
/// gap locks, which Ladle does not take, so it could not prevent the
/// anomalies (write skew, phantoms) SERIALIZABLE rules out.
///
/// Row locks (`crate::row_locks`, taken as `crate::row_locking` says):
/// locking reads lock the rows they read, the transaction's writes the rows
/// they change or insert, each when its statement runs; `row_locks` holds
/// them until the transaction ends (dropped with it).
///
/// Savepoints mark a length of the op buffer: `ROLLBACK TO SAVEPOINT`
/// truncates the buffer to it (the statements after it are undone, the
/// ones before it and the transaction stay), as InnoDB does.
pub struct Transaction {
    pub ops: Vec<WriteOp>,
    /// Per table, an index of the rows this transaction's plain INSERTs
    /// added, by unique key: statement-time key checks consult it instead
    /// of rescanning the ops (`dml::TransactionKeys`). Brought up to date
    /// from `ops` when used; a cell because checks read the session.
    pub(crate) added_keys: std::cell::RefCell<HashMap<ladle_common::TableId, AddedKeys>>,
    /// Savepoints in the order they were set: name (compared without
    /// case, as MySQL does), how many ops the buffer held then, and
    /// whether the transaction had neither written nor read then.
    savepoints: Vec<(String, usize, bool)>,
    /// REPEATABLE READ: reads come from `read_view`.
    pub repeatable_read: bool,
    /// The read view of a REPEATABLE READ transaction, taken at its first
    /// read (a cell because reads borrow the session).
    pub(crate) read_view: std::cell::OnceCell<ladle_storage::ReadView>,
    /// The tables it has written, held against schema changes until it
    /// ends: its buffered ops stay valid for their tables' schemas.
    pub(crate) locks: crate::metadata_locks::TransactionLocks,
    /// The rows it has locked (locking reads, its writes), held until it
    /// ends, as InnoDB holds them: `ROLLBACK TO SAVEPOINT` keeps them.
    pub(crate) row_locks: crate::row_locks::HeldLocks,
}

/// The rows a transaction's plain INSERTs added to one table, indexed by
/// each unique key (PRIMARY first) for the first `ops_seen` ops.
#[derive(Default)]
pub(crate) struct AddedKeys {
    pub ops_seen: usize,
    /// Per unique key: normalized key value -> the row.
    pub keys: Vec<HashMap<Vec<Value>, ladle_common::Row>>,
}

impl Transaction {
    /// The read view of a REPEATABLE READ transaction (taken by `take` on
    /// first use); `None` under READ COMMITTED.
    pub(crate) fn read_view(
        &self,
        take: impl FnOnce() -> ladle_storage::ReadView,
    ) -> Option<&ladle_storage::ReadView> {
        self.repeatable_read
            .then(|| self.read_view.get_or_init(take))
    }

    /// SAVEPOINT: marks the current point; a savepoint of the same name
    /// moves here.
    pub fn savepoint(&mut self, name: &str) {
        self.savepoints
            .retain(|(n, _, _)| !n.eq_ignore_ascii_case(name));
        let untouched = self.ops.is_empty() && self.read_view.get().is_none();
        self.savepoints
            .push((name.to_string(), self.ops.len(), untouched));
    }

    /// Whether it holds anything its later statements must see or
    /// release: writes, row locks, a REPEATABLE READ view.
    pub(crate) fn holds_anything(&self) -> bool {
        !self.ops.is_empty() || !self.row_locks.is_empty() || self.read_view.get().is_some()
    }

    /// The savepoints set, oldest first.
    pub fn savepoint_names(&self) -> impl Iterator<Item = &str> {
        self.savepoints.iter().map(|(name, _, _)| name.as_str())
    }

    /// ROLLBACK TO SAVEPOINT: undoes the ops after `name`, which stays set
    /// (the savepoints after it are gone). Back to a savepoint set before
    /// the transaction wrote or read anything, the REPEATABLE READ view
    /// goes too, so the next read takes a new one: InnoDB had not begun
    /// its transaction there and rolls all of it back (MariaDB 10.11
    /// shows a row committed after the first read). False if there is no
    /// such savepoint.
    pub fn rollback_to(&mut self, name: &str) -> bool {
        let Some(i) = self.position(name) else {
            return false;
        };
        let (_, len, untouched) = self.savepoints[i];
        self.ops.truncate(len);
        if untouched {
            self.read_view.take();
        }
        // The index of added rows may hold rows of the undone ops.
        self.added_keys.borrow_mut().clear();
        self.savepoints.truncate(i + 1);
        true
    }

    /// A READ COMMITTED transaction of connection `connection_id`. Its row
    /// locks are the connection's: a lock held under another owner would
    /// block the connection's own commit. (So no `Default`.)
    pub(crate) fn new(connection_id: u32) -> Transaction {
        Transaction {
            ops: Vec::new(),
            added_keys: Default::default(),
            savepoints: Vec::new(),
            repeatable_read: false,
            read_view: Default::default(),
            locks: Default::default(),
            row_locks: crate::row_locks::HeldLocks::new(connection_id),
        }
    }

    /// A transaction of one statement (READ COMMITTED), which an
    /// autocommit statement of several writes runs in to be atomic.
    pub(crate) fn for_statement(connection_id: u32) -> Transaction {
        Transaction::new(connection_id)
    }

    /// How many ops the buffer holds: where a statement's own ops start.
    pub(crate) fn statement_mark(&self) -> usize {
        self.ops.len()
    }

    /// Undoes the ops after `mark` ([`Transaction::statement_mark`]): a
    /// failed statement of several writes leaves the transaction as it
    /// was before it, as InnoDB rolls back the statement.
    pub(crate) fn undo_statement(&mut self, mark: usize) {
        if self.ops.len() > mark {
            self.ops.truncate(mark);
            // The index of added rows may hold rows of the undone ops.
            self.added_keys.borrow_mut().clear();
        }
    }

    /// RELEASE SAVEPOINT: forgets `name` and the savepoints after it.
    pub fn release(&mut self, name: &str) -> bool {
        let Some(i) = self.position(name) else {
            return false;
        };
        self.savepoints.truncate(i);
        true
    }

    fn position(&self, name: &str) -> Option<usize> {
        self.savepoints
            .iter()
            .rposition(|(n, _, _)| n.eq_ignore_ascii_case(name))
    }
}

/// A statement prepared with COM_STMT_PREPARE.
pub enum PreparedStatement {
    /// A SELECT bound to a dataflow view; executes as a reader lookup.
    /// Bound under DDL `generation` (see `exec::SelectCache`): after DDL
    /// it is planned again from `sql`, the text as the client sent it, so
    /// that its names reach the TEMPORARY tables the session has then (see
    /// `crate::temporary_names`; creating or dropping one is DDL).
    Select {
        query: PreparedQuery,
        sql: String,
        generation: u64,
        /// A locking read (`FOR UPDATE`, `LOCK IN SHARE MODE`): under
        /// REPEATABLE READ it reads the latest rows, not the snapshot.
        locking: bool,
    },
    /// Anything else. A plain write (`write`) binds the values into the
    /// tree parsed at PREPARE from the text its TEMPORARY table names were
    /// rewritten to then (`bound`: `None` if none were), used while that
    /// rewrite is still the session's; the rest (and such a write once the
    /// session's TEMPORARY tables changed) is re-planned at each execution
    /// after the values are substituted for the `?` tokens of `sql`, the
    /// text as the client sent it.
    Other {
        sql: String,
        marks: Vec<usize>,
        write: Option<std::sync::Arc<crate::params::ParsedWrite>>,
        bound: Option<String>,
    },
}

impl PreparedStatement {
    pub fn param_count(&self) -> usize {
        match self {
            PreparedStatement::Select { query, .. } => query.param_count(),
            PreparedStatement::Other { marks, .. } => marks.len(),
        }
    }
}

/// Prepared statements of every session of this process: MySQL's
/// `Prepared_stmt_count`, held under `@@max_prepared_stmt_count` (1461
/// past it) so that no client can grow the server without bound by
/// preparing statements it never closes.
static PREPARED_STATEMENTS: AtomicUsize = AtomicUsize::new(0);

/// How many statements are prepared across all sessions
/// (`Prepared_stmt_count`).
pub fn prepared_statement_count() -> usize {
    PREPARED_STATEMENTS.load(Ordering::Relaxed)
}

/// A session's prepared statements by id, counted in
/// [`prepared_statement_count`] from insertion until removal or the
/// session's end.
#[derive(Default)]
pub struct PreparedStatements(HashMap<u32, PreparedStatement>);

impl PreparedStatements {
    pub fn get(&self, id: &u32) -> Option<&PreparedStatement> {
        self.0.get(id)
    }

    pub fn contains_key(&self, id: &u32) -> bool {
        self.0.contains_key(id)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds or replaces statement `id`.
    pub fn insert(&mut self, id: u32, stmt: PreparedStatement) {
        if self.0.insert(id, stmt).is_none() {
            PREPARED_STATEMENTS.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn remove(&mut self, id: &u32) -> Option<PreparedStatement> {
        let removed = self.0.remove(id);
        if removed.is_some() {
            PREPARED_STATEMENTS.fetch_sub(1, Ordering::Relaxed);
        }
        removed
    }
}

impl Drop for PreparedStatements {
    fn drop(&mut self) {
        PREPARED_STATEMENTS.fetch_sub(self.0.len(), Ordering::Relaxed);
    }
}

/// A row of SHOW WARNINGS.
#[derive(Clone, Debug)]
pub struct Warning {
    pub level: &'static str,
    pub code: u16,
    pub message: String,
}

pub struct Session {
    pub connection_id: u32,
    pub user: String,
    pub host: String,
    /// The stored account the session is logged in as; `None` for the
    /// configured superuser and the server's own sessions, whose
    /// statements are not checked (see [`crate::privileges`]).
    pub grantee: Option<crate::accounts::Grantee>,
    pub database: Option<String>,
    pub autocommit: bool,
    /// The client set CLIENT_FOUND_ROWS: UPDATE reports the rows it
    /// matched, not only those it changed (Django relies on it).
    pub found_rows: bool,
    /// The client connected with CLIENT_INTERACTIVE: its `wait_timeout`
    /// starts as `interactive_timeout`.
    pub interactive: bool,
    /// `Some` while a transaction is open.
    pub transaction: Option<Transaction>,
    /// The isolation level `SET TRANSACTION ISOLATION LEVEL` (no scope)
    /// set for the next transaction only (`@@transaction_isolation` spelling).
    pub next_isolation: Option<&'static str>,
    /// Session variables set with SET (lower-case names).
    pub variables: BTreeMap<String, Value>,
    /// User variables (`@x`), lower-case names.
    pub user_variables: HashMap<String, Value>,
    pub last_insert_id: u64,
    /// What `ROW_COUNT()` returns: the previous statement's changed rows,
    /// -1 after a SELECT or an error.
    pub row_count: i64,
    /// What `FOUND_ROWS()` returns: the rows the last SELECT returned, or
    /// for a `SELECT SQL_CALC_FOUND_ROWS` those it would have returned
    /// without its LIMIT.
    pub found_rows_count: u64,
    /// The count a `SELECT SQL_CALC_FOUND_ROWS` running now leaves for
    /// `FOUND_ROWS()` (taken when the statement settles).
    pub calc_found_rows: Option<u64>,
    /// LSN of this connection's newest committed write: its reads wait
    /// until views reflect it (read-your-writes).
    pub last_write_lsn: Lsn,
    /// What SHOW WARNINGS lists: the last statement's warnings, or an
    /// earlier one's, which statements that use no table (BEGIN, COMMIT,
    /// SET, SELECT 1) keep.
    pub warnings: Vec<Warning>,
    /// How many of `warnings` an earlier statement left (kept for SHOW
    /// WARNINGS through statements that use no table): not the current
    /// statement's, so not in its OK packet's warning count.
    pub carried_warnings: usize,
    /// The statement runs only so that PREPARE learns its result columns:
    /// SLEEP does not sleep.
    pub probing: bool,
    pub statements: PreparedStatements,
    /// SQL PREPARE's names (lower-cased: MySQL's are case-insensitive) ->
    /// their ids in `statements`. A new session (disconnect, reset,
    /// change user) has none.
    pub statement_names: HashMap<String, u32>,
    next_statement: u32,
    /// On a cluster replica: this session's link to the primary, opened
    /// by its first forwarded statement (see `crate::forward`).
    pub forward: Option<Box<dyn crate::forward::ForwardChannel>>,
    /// The session's transaction is open on the primary and holds writes,
    /// row locks or a read view there: every statement goes there until
    /// it ends (see `crate::forward`).
    pub forwarded_transaction: bool,
    /// The session's forwarding session on the primary holds named locks
    /// (as its last answer said): if the link breaks, they are lost, and
    /// the client is told (see `Engine::forwarded_locks_lost`).
    pub forwarded_named_locks: bool,
    /// On a cluster replica: the TEMPORARY tables this session has on the
    /// primary (they were created there, by forwarded statements), as the
    /// primary's session last listed them: statements naming one run
    /// there.
    pub primary_temporary_tables: Vec<crate::temporary_names::Owned>,
    /// This session runs statements forwarded by a replica (on the
    /// primary): it never forwards them on, even if the node was demoted
    /// meanwhile (its writes then get 1290).
    pub serves_forwarded: bool,
    /// The row locks the running statement took outside a transaction
    /// (an autocommit locking read or write): released when it ends.
    pub(crate) statement_locks: crate::row_locks::HeldLocks,
    /// The running write waited for a row lock after it had found its
    /// rows: it runs again (see `crate::row_locking`).
    pub(crate) rerun_for_row_locks: bool,
    /// The server's own session (a replica's replay of the primary's
    /// schema changes, the cleanup of TEMPORARY tables): its statements
    /// name TEMPORARY tables by their stored names (`#tmp#5#t`), which are
    /// the same on every node, and are never rewritten for it.
    pub names_stored_tables: bool,
}

impl Session {
    pub fn new(connection_id: u32, user: String, host: String) -> Session {
        Session {
            connection_id,
            user,
            host,
            grantee: None,
            database: None,
            autocommit: true,
            found_rows: false,
            interactive: false,
            transaction: None,
            next_isolation: None,
            variables: BTreeMap::new(),
            user_variables: HashMap::new(),
            last_insert_id: 0,
            row_count: -1,
            found_rows_count: 0,
            calc_found_rows: None,
            last_write_lsn: 0,
            warnings: Vec::new(),
            carried_warnings: 0,
            probing: false,
            statements: PreparedStatements::default(),
            statement_names: HashMap::new(),
            next_statement: 1,
            forward: None,
            forwarded_transaction: false,
            forwarded_named_locks: false,
            primary_temporary_tables: Vec::new(),
            serves_forwarded: false,
            statement_locks: crate::row_locks::HeldLocks::new(connection_id),
            rerun_for_row_locks: false,
            names_stored_tables: false,
        }
    }

    /// COM_RESET_CONNECTION / COM_CHANGE_USER: the session becomes a new
    /// connection's. The open transaction is rolled back (its buffered
    /// writes dropped), autocommit is on again, session variables return
    /// to their defaults, user variables, prepared statements, warnings and
    /// LAST_INSERT_ID are gone. Kept: the connection id, user and host, the
    /// current database (COM_CHANGE_USER sets it after) and the LSN of the
    /// connection's last write (its reads still see that write).
    pub fn reset(&mut self) {
        let mut fresh = Session::new(self.connection_id, self.user.clone(), self.host.clone());
        fresh.grantee = self.grantee.take();
        let database = self.database.take();
        let last_write_lsn = self.last_write_lsn;
        let next_statement = self.next_statement;
        let found_rows = self.found_rows;
        let interactive = self.interactive;
        *self = Session {
            database,
            last_write_lsn,
            // A property of the connection's client, not of the session.
            found_rows,
            interactive,
            // Ids are not reused: a stale id from before the reset gets 1243.
            next_statement,
            ..fresh
        };
    }

    /// Records a committed write of this connection (its LSN).
    pub fn wrote(&mut self, lsn: Lsn) {
        self.last_write_lsn = self.last_write_lsn.max(lsn);
    }

    pub fn add_statement(&mut self, stmt: PreparedStatement) -> u32 {
        let id = self.next_statement;
        self.next_statement = self.next_statement.wrapping_add(1).max(1);
        self.statements.insert(id, stmt);
        id
    }

    /// Opens a transaction at the isolation level set for it (the next
    /// transaction's, else the session's).
    pub fn begin_transaction(&mut self) {
        let level = match self.next_isolation.take() {
            Some(l) => l,
            None => match self.variables.get("transaction_isolation") {
                Some(Value::Text(t)) if t.as_ref() == "REPEATABLE-READ" => "REPEATABLE-READ",
                _ => "READ-COMMITTED",
            },
        };
        self.transaction = Some(Transaction {
            repeatable_read: level == "REPEATABLE-READ",
            ..Transaction::new(self.connection_id)
        });
    }

    pub fn in_transaction(&self) -> bool {
        self.transaction.is_some()
    }

    /// Where the running statement's row locks go: the open transaction's
    /// (held until it ends), else the statement's own.
    pub(crate) fn row_locks_mut(&mut self) -> &mut crate::row_locks::HeldLocks {
        match &mut self.transaction {
            Some(tx) => &mut tx.row_locks,
            None => &mut self.statement_locks,
        }
    }

    /// Records a Note (SHOW WARNINGS level `Note`), e.g. for `DROP TABLE IF
    /// EXISTS` of a missing table.
    pub fn warn(&mut self, code: u16, message: impl Into<String>) {
        self.add_warning("Note", code, message);
    }

    /// Forgets every warning (a statement that uses a table starts over).
    pub fn clear_warnings(&mut self) {
        self.warnings.clear();
        self.carried_warnings = 0;
    }

    /// The warnings the current statement raised itself, which its OK or
    /// EOF packet counts.
    pub fn statement_warnings(&self) -> usize {
        self.warnings.len().saturating_sub(self.carried_warnings)
    }

    /// Records a SHOW WARNINGS row; the OK packet counts them.
    pub fn add_warning(&mut self, level: &'static str, code: u16, message: impl Into<String>) {
        self.warnings.push(Warning {
            level,
            code,
            message: message.into(),
        });
    }
}

/// The session's account as `CURRENT_USER()` names it.
pub fn current_user(s: &Session) -> (String, String) {
    match &s.grantee {
        Some(g) => (g.user.clone(), g.host.clone()),
        None => (s.user.clone(), "%".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reset_keeps_identity_and_database_only() {
        let mut s = Session::new(7, "root".into(), "h".into());
        s.database = Some("db".into());
        s.autocommit = false;
        s.transaction = Some(Transaction::new(7));
        s.variables.insert("sql_mode".into(), Value::text(""));
        s.user_variables.insert("x".into(), Value::Int(1));
        s.last_insert_id = 9;
        s.last_write_lsn = 5;
        s.warn(1051, "w");
        let id = s.add_statement(PreparedStatement::Other {
            sql: "DO 1".into(),
            marks: Vec::new(),
            write: None,
            bound: None,
        });
        s.reset();
        assert_eq!(
            (s.connection_id, s.user.as_str(), s.host.as_str()),
            (7, "root", "h")
        );
        assert_eq!(s.database.as_deref(), Some("db"));
        assert!(s.autocommit && !s.in_transaction());
        assert!(s.variables.is_empty() && s.user_variables.is_empty());
        assert!(s.warnings.is_empty() && s.statements.is_empty());
        assert_eq!((s.last_insert_id, s.last_write_lsn), (0, 5));
        let again = s.add_statement(PreparedStatement::Other {
            sql: "DO 1".into(),
            marks: Vec::new(),
            write: None,
            bound: None,
        });
        assert_ne!(again, id);
    }
}
