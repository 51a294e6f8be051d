//! Write forwarding (cluster replicas): a statement that writes, sent to a
//! node that is not the primary, runs on the primary in a session that
//! mirrors the client's, and its outcome (rows, affected rows, insert id,
//! info, warnings, error) comes back unchanged. So does a statement calling
//! a named lock function (GET_LOCK and kin: the locks are the primary's,
//! held in the forwarding session there, so cluster-wide), and one naming
//! one of the session's TEMPORARY tables, which live there. Once a
//! forwarded statement leaves a transaction with writes (or row locks, or
//! a read view) open on the primary, every statement of the session goes
//! there until that transaction ends (its reads must see its writes), but
//! PREPARE, EXECUTE and DEALLOCATE, whose names are the session's here. Reads after a forwarded write wait until this node has
//! applied the write's position (read-your-writes, bounded by the
//! [`Forwarder`]'s timeout).
//!
//! The transport is the cluster's ([`ForwardChannel`], one per client
//! session); this module encodes what crosses it: the session state that
//! changes how a statement runs (database, autocommit, session and user
//! variables, LAST_INSERT_ID, warnings, the next transaction's isolation)
//! goes with each request, and the primary's session state after the
//! statement comes back and replaces the client's.

use std::collections::HashMap;
use std::sync::OnceLock;

use ladle_common::{Lsn, Row, SqlType, TableSchema, Value};
use ladle_dataflow::{BaseColumn, OutputColumn};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::error::{MysqlCode, WireError, ER_CON_COUNT, ER_OPTION_PREVENTS_STATEMENT};
use crate::exec::Engine;
use crate::output::{Info, Kind, Output};
use crate::session::{Session, Warning};

mod transport;

pub use transport::{ForwardChannel, ForwardFailure, Forwarder, KillOutcome};

#[derive(Serialize, Deserialize)]
struct Request {
    /// Who the client logged in as here: the primary checks the
    /// statement's privileges as that account (replicas hold the same
    /// accounts) and answers CURRENT_USER() as here.
    identity: Identity,
    state: State,
    transaction: ClientTransaction,
    sql: String,
}

/// The client's transaction, which the primary's session takes on before
/// the statement runs.
#[derive(Serialize, Deserialize)]
enum ClientTransaction {
    /// None: a transaction the primary's session still has is one an
    /// earlier statement opened there and left idle (no writes, locks or
    /// read view: else the client would be continuing it), which the
    /// client has ended since; it goes.
    None,
    /// Opened here: the primary's session opens one (REPEATABLE READ or
    /// not) in place of any idle one, with the savepoints the client set,
    /// oldest first (all before any write: every write of the transaction
    /// runs there).
    Open {
        repeatable_read: bool,
        savepoints: Vec<String>,
    },
    /// The one open on the primary (see [`Response::transaction_holds`]).
    Continuing,
}

#[derive(Serialize, Deserialize)]
struct Identity {
    user: String,
    host: String,
    /// The stored account (user, host pattern); `None` for the superuser.
    grantee: Option<(String, String)>,
}

#[derive(Serialize, Deserialize)]
struct Response {
    state: State,
    outcome: Result<Answer, Failure>,
    row_count: i64,
    /// The session's newest committed write on the primary.
    last_write_lsn: Lsn,
    /// Whether the primary's session has a transaction open, and whether
    /// that transaction holds anything a later statement of it must see
    /// or release there (writes, row locks, a REPEATABLE READ view): then
    /// the session's statements go there until it ends.
    in_transaction: bool,
    transaction_holds: bool,
    /// The primary session's TEMPORARY tables (database, name as the
    /// client names it): the session's statements naming one go there.
    temporary_tables: Vec<crate::temporary_names::Owned>,
    /// Whether the primary's session holds named locks.
    named_locks: bool,
}

/// The session state a forwarded statement carries both ways.
#[derive(Serialize, Deserialize)]
struct State {
    database: Option<String>,
    autocommit: bool,
    found_rows: bool,
    variables: Vec<(String, Value)>,
    user_variables: Vec<(String, Value)>,
    last_insert_id: u64,
    next_isolation: Option<String>,
    warnings: Vec<(String, u16, String)>,
}

#[derive(Serialize, Deserialize)]
enum Answer {
    Rows {
        columns: Vec<Column>,
        rows: Vec<Row>,
    },
    Done {
        affected_rows: u64,
        last_insert_id: u64,
        info: Info,
    },
}

#[derive(Serialize, Deserialize)]
struct Column {
    name: String,
    table: String,
    origin: Option<(TableSchema, usize)>,
    ty: SqlType,
    nullable: bool,
}

#[derive(Serialize, Deserialize)]
struct Failure {
    errno: u16,
    sqlstate: String,
    message: String,
}

impl State {
    fn of(s: &Session) -> State {
        State {
            database: s.database.clone(),
            autocommit: s.autocommit,
            found_rows: s.found_rows,
            variables: s
                .variables
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            user_variables: s
                .user_variables
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            last_insert_id: s.last_insert_id,
            next_isolation: s.next_isolation.map(str::to_string),
            warnings: s
                .warnings
                .iter()
                .map(|w| (w.level.to_string(), w.code, w.message.clone()))
                .collect(),
        }
    }

    fn install(self, s: &mut Session) {
        s.database = self.database;
        s.autocommit = self.autocommit;
        s.found_rows = self.found_rows;
        s.variables = self.variables.into_iter().collect();
        s.user_variables = self.user_variables.into_iter().collect();
        s.last_insert_id = self.last_insert_id;
        s.next_isolation = self.next_isolation.as_deref().map(isolation);
        s.warnings = self
            .warnings
            .into_iter()
            .map(|(level, code, message)| Warning {
                level: level_name(&level),
                code,
                message,
            })
            .collect();
    }
}

fn isolation(name: &str) -> &'static str {
    match name {
        "REPEATABLE-READ" => "REPEATABLE-READ",
        "READ-UNCOMMITTED" => "READ-UNCOMMITTED",
        "SERIALIZABLE" => "SERIALIZABLE",
        _ => "READ-COMMITTED",
    }
}

fn level_name(level: &str) -> &'static str {
    match level {
        "Error" => "Error",
        "Note" => "Note",
        _ => "Warning",
    }
}

/// A SQLSTATE as the `&'static str` error codes hold (each distinct one
/// is interned once).
fn sqlstate(state: &str) -> &'static str {
    static STATES: OnceLock<Mutex<HashMap<String, &'static str>>> = OnceLock::new();
    let mut states = STATES.get_or_init(Default::default).lock();
    if let Some(s) = states.get(state) {
        return s;
    }
    let leaked: &'static str = Box::leak(state.to_string().into_boxed_str());
    states.insert(state.to_string(), leaked);
    leaked
}

fn encode(outcome: &Result<Output, WireError>) -> Result<Answer, Failure> {
    match outcome {
        Ok(Output::Rows { columns, rows }) => Ok(Answer::Rows {
            columns: columns
                .iter()
                .map(|c| Column {
                    name: c.name.clone(),
                    table: c.table.clone(),
                    origin: c.origin.as_ref().map(|o| ((*o.table).clone(), o.column)),
                    ty: c.ty.clone(),
                    nullable: c.nullable,
                })
                .collect(),
            rows: rows.clone().into_vec(),
        }),
        Ok(Output::Done {
            affected_rows,
            last_insert_id,
            info,
        }) => Ok(Answer::Done {
            affected_rows: *affected_rows,
            last_insert_id: *last_insert_id,
            info: *info,
        }),
        Err(e) => Err(Failure {
            errno: e.code.errno,
            sqlstate: e.code.sqlstate.to_string(),
            message: e.message.clone(),
        }),
    }
}

fn decode(answer: Result<Answer, Failure>) -> Result<Output, WireError> {
    match answer {
        Ok(Answer::Rows { columns, rows }) => Ok(Output::Rows {
            columns: columns
                .into_iter()
                .map(|c| OutputColumn {
                    name: c.name,
                    table: c.table,
                    origin: c.origin.map(|(table, column)| BaseColumn {
                        table: std::sync::Arc::new(table),
                        column,
                    }),
                    ty: c.ty,
                    nullable: c.nullable,
                    decimals: None,
                    stored: false,
                })
                .collect(),
            rows: rows.into(),
        }),
        Ok(Answer::Done {
            affected_rows,
            last_insert_id,
            info,
        }) => Ok(Output::Done {
            affected_rows,
            last_insert_id,
            info,
        }),
        Err(f) => Err(WireError {
            code: MysqlCode {
                errno: f.errno,
                sqlstate: sqlstate(&f.sqlstate),
            },
            message: f.message,
        }),
    }
}

fn refused(message: String) -> WireError {
    WireError {
        code: ER_OPTION_PREVENTS_STATEMENT,
        message,
    }
}

/// Whether `sql` is an account statement that changes accounts (GRANT,
/// REVOKE and SET PASSWORD are not of a writing kind).
fn changes_accounts(sql: &str) -> bool {
    crate::account_statements::changes_accounts(sql)
}

/// Whether a SELECT locks rows (`FOR UPDATE`, `FOR SHARE`, `LOCK IN
/// SHARE MODE`): the locks are the primary's (see [`crate::row_locks`]).
fn locking_read(kind: Kind, sql: &str) -> bool {
    if kind != Kind::Select {
        return false;
    }
    let Ok(t) = crate::tokens::tokens(sql) else {
        return false;
    };
    let word = |i: usize| crate::tokens::word(&t, i);
    (0..t.len()).any(|i| {
        word(i).as_deref() == Some("FOR")
            && matches!(word(i + 1).as_deref(), Some("UPDATE" | "SHARE"))
    }) || crate::select::has_share_mode(sql)
}

/// Whether `sql` calls a named lock function (GET_LOCK and kin): the
/// locks are the primary's, held in the forwarding session there, so that
/// they exclude each other across the cluster.
fn calls_named_lock(sql: &str) -> bool {
    const NAMES: [&str; 5] = [
        "GET_LOCK",
        "RELEASE_LOCK",
        "IS_FREE_LOCK",
        "IS_USED_LOCK",
        "RELEASE_ALL_LOCKS",
    ];
    // (Most statements name no lock: no tokenizing, no copy for them; a
    // replica's every read passes here.)
    if !sql
        .as_bytes()
        .windows(4)
        .any(|w| w.eq_ignore_ascii_case(b"LOCK"))
    {
        return false;
    }
    let Ok(t) = crate::tokens::tokens(sql) else {
        return false;
    };
    (0..t.len()).any(|i| {
        crate::tokens::word(&t, i).is_some_and(|w| NAMES.contains(&w.as_str()))
            && matches!(t.get(i + 1), Some(sqlparser::tokenizer::Token::LParen))
    })
}

/// The primary's side: the forwarding session `s` takes on the client's
/// transaction (see [`ClientTransaction`]).
fn take_on(s: &mut Session, transaction: ClientTransaction) {
    match transaction {
        ClientTransaction::Continuing => {}
        ClientTransaction::None => s.transaction = None,
        ClientTransaction::Open {
            repeatable_read,
            savepoints,
        } => {
            s.transaction = None;
            s.next_isolation = Some(if repeatable_read {
                "REPEATABLE-READ"
            } else {
                "READ-COMMITTED"
            });
            s.begin_transaction();
            if let Some(t) = s.transaction.as_mut() {
                for name in &savepoints {
                    t.savepoint(name);
                }
            }
        }
    }
}

/// Whether `sql` is PREPARE, EXECUTE or DEALLOCATE: the session's
/// prepared statements are its own, here; the statement EXECUTE runs is
/// routed by itself.
fn names_prepared_statement(sql: &str) -> bool {
    match crate::tokens::first_words(sql) {
        (w0, _) if matches!(w0.as_str(), "PREPARE" | "EXECUTE" | "DEALLOCATE") => true,
        (w0, w1) => w0 == "DROP" && w1 == "PREPARE",
    }
}

/// Whether `sql` names one of the TEMPORARY tables `s` has on the
/// primary.
fn names_primary_temporary(s: &Session, sql: &str) -> bool {
    !s.primary_temporary_tables.is_empty()
        && crate::temporary_names::names_any(
            sql,
            s.database.as_deref(),
            &s.primary_temporary_tables,
        )
}

/// Whether a statement of this kind changes data or schema.
fn writes(kind: Kind) -> bool {
    matches!(kind, Kind::Insert | Kind::Update | Kind::Delete | Kind::Ddl)
}

impl Engine {
    /// Installs forwarding (a cluster node).
    pub fn set_forwarder(&self, forwarder: std::sync::Arc<dyn Forwarder>) {
        let _ = self.forwarder.set(forwarder);
    }

    /// Whether `s`'s statement of `kind` runs on the primary instead of
    /// here: on a node that is not the primary, a write, a locking read,
    /// a call of a named lock function, or a statement naming one of the session's TEMPORARY tables (they
    /// live there); anything while the session's transaction is open
    /// there, but PREPARE, EXECUTE and DEALLOCATE (see
    /// [`names_prepared_statement`]).
    pub(crate) fn must_forward(&self, s: &Session, kind: Kind, sql: &str) -> bool {
        match self.forwarder.get() {
            None => false,
            Some(_) if s.serves_forwarded => false,
            Some(_) if s.forwarded_transaction => !names_prepared_statement(sql),
            Some(f) => {
                (writes(kind)
                    || changes_accounts(sql)
                    || locking_read(kind, sql)
                    || calls_named_lock(sql)
                    || names_primary_temporary(s, sql))
                    && f.forwards()
            }
        }
    }

    /// Whether `sql` names a TEMPORARY table of `s` that lives on the
    /// primary (`s` is a replica's client's): PREPARE keeps its text,
    /// planned nowhere here, and each execution runs there.
    pub(crate) fn names_temporary_on_primary(&self, s: &Session, sql: &str) -> bool {
        self.forwarder.get().is_some() && !s.serves_forwarded && names_primary_temporary(s, sql)
    }

    /// Runs `sql` on the primary for `s` (see the module documentation).
    pub(crate) fn forward(&self, s: &mut Session, sql: &str) -> Result<Output, WireError> {
        let Some(forwarder) = self.forwarder.get() else {
            return Err(refused("no primary to forward to".into()));
        };
        let continuing = s.forwarded_transaction;
        let transaction = match &s.transaction {
            _ if continuing => ClientTransaction::Continuing,
            Some(t) => ClientTransaction::Open {
                repeatable_read: t.repeatable_read,
                savepoints: t.savepoint_names().map(str::to_string).collect(),
            },
            None => ClientTransaction::None,
        };
        let request = Request {
            identity: Identity {
                user: s.user.clone(),
                host: s.host.clone(),
                grantee: s.grantee.as_ref().map(|g| (g.user.clone(), g.host.clone())),
            },
            state: State::of(s),
            transaction,
            sql: sql.to_string(),
        };
        let bytes = postcard::to_stdvec(&request)
            .map_err(|e| refused(format!("could not encode a forwarded statement: {e}")))?;
        let (id, user, host) = (s.connection_id, s.user.clone(), s.host.clone());
        let channel = s
            .forward
            .get_or_insert_with(|| forwarder.open(id, &user, &host));
        // A KILL of the client's statement stops it there. Not
        // max_execution_time: the primary applies the session's own (its
        // variables go with the request), as to any SELECT it runs, so a
        // SELECT is timed where it runs, with no cancel frame to race its
        // answer, and a deadline that passes while the link is slow still
        // answers 3024 from the primary, never a 1290 from here.
        let interrupted = || {
            matches!(
                ladle_dataflow::interrupt::check(),
                Err(ladle_dataflow::DataflowError::Interrupted { timeout: false })
            )
        };
        // A named lock's wait there is as long as its timeout.
        let reply = match channel.call(&bytes, continuing, calls_named_lock(sql), &interrupted) {
            Ok(reply) => reply,
            Err(failure) => {
                if continuing {
                    // The primary's session (and its transaction) is gone.
                    s.forwarded_transaction = false;
                    s.transaction = None;
                    if !s.autocommit {
                        s.begin_transaction();
                    }
                }
                let message = match failure {
                    ForwardFailure::NotSent(why) => why,
                    ForwardFailure::Unknown(why) => {
                        // (With the primary's session, its TEMPORARY
                        // tables.)
                        s.forward = None;
                        s.primary_temporary_tables.clear();
                        why
                    }
                };
                return Err(refused(message));
            }
        };
        let response: Response = postcard::from_bytes(&reply).map_err(|e| {
            s.forward = None;
            s.primary_temporary_tables.clear();
            refused(format!("could not decode the primary's answer: {e}"))
        })?;
        if matches!(&response.outcome, Err(f) if f.errno == ER_CON_COUNT.errno) {
            // Only a session refused a place there is answered 1040
            // ([`Engine::refuse_forwarded`]); the primary closes it, and
            // the next statement asks for a place again.
            s.forward = None;
        }
        response.state.install(s);
        s.row_count = response.row_count;
        s.wrote(response.last_write_lsn);
        s.forwarded_transaction = response.transaction_holds;
        s.primary_temporary_tables = response.temporary_tables;
        s.forwarded_named_locks = response.named_locks;
        // The client's transaction state follows the primary's (status
        // flags; the ops are the primary's).
        match (response.in_transaction, s.transaction.is_some()) {
            (false, true) => s.transaction = None,
            (true, false) => s.begin_transaction(),
            _ => {}
        }
        decode(response.outcome)
    }

    /// The primary's side: a place under `max_connections` for a session
    /// a replica forwards statements to (as a client's connection here
    /// takes one: it holds locks, a transaction and memory here), counted
    /// in `Connections`; `None` when every place is taken (its statements
    /// are then answered by [`Engine::refuse_forwarded`]; counted in
    /// `Aborted_connects`, as a client's refusal).
    pub fn admit_forwarded(&self) -> Option<crate::AdmissionSlot> {
        self.metrics.connections_total.inc();
        let place = self.admission.admit();
        if place.is_none() {
            self.metrics.connections_aborted.inc();
        }
        place
    }

    /// The primary's side: runs one forwarded request in `s` (this
    /// forwarding connection's session, listed as `process`) and encodes
    /// the answer.
    pub fn serve_forwarded(
        &self,
        s: &mut Session,
        process: &crate::processes::Process,
        request: &[u8],
    ) -> Vec<u8> {
        self.answer_forwarded(s, request, |s, sql| {
            let db = s.database.clone();
            process.begin_forwarded(&s.user, s.grantee.clone(), db, sql);
            let (_, outcome) = self.execute(s, sql);
            process.end(s.database.clone());
            outcome
        })
    }

    /// The primary's side: the answer to a request of a forwarding session
    /// refused a place ([`Engine::admit_forwarded`]): 1040 "Too many
    /// connections", the statement not run. The replica drops the session
    /// on this answer, and its client's next statement asks for a place
    /// again.
    pub fn refuse_forwarded(&self, s: &mut Session, request: &[u8]) -> Vec<u8> {
        self.answer_forwarded(s, request, |s, _| {
            s.row_count = -1;
            Err(WireError {
                code: ER_CON_COUNT,
                message: "Too many connections".into(),
            })
        })
    }

    /// Decodes a forwarded request into `s`, runs its statement with `run`
    /// and encodes the answer with the session's state after it.
    fn answer_forwarded(
        &self,
        s: &mut Session,
        request: &[u8],
        run: impl FnOnce(&mut Session, &str) -> Result<Output, WireError>,
    ) -> Vec<u8> {
        let response = match postcard::from_bytes::<Request>(request) {
            Ok(req) => {
                s.user = req.identity.user;
                s.host = req.identity.host;
                s.grantee = req
                    .identity
                    .grantee
                    .map(|(user, host)| crate::accounts::Grantee { user, host });
                req.state.install(s);
                take_on(s, req.transaction);
                let outcome = run(s, &req.sql);
                Response {
                    outcome: encode(&outcome),
                    state: State::of(s),
                    row_count: s.row_count,
                    last_write_lsn: s.last_write_lsn,
                    in_transaction: s.in_transaction(),
                    transaction_holds: s.transaction.as_ref().is_some_and(|t| t.holds_anything()),
                    temporary_tables: self.temporary_tables.owned_by(s.connection_id),
                    named_locks: self.facts.named_locks.holds_any(s.connection_id),
                }
            }
            Err(e) => Response {
                outcome: Err(Failure {
                    errno: ER_OPTION_PREVENTS_STATEMENT.errno,
                    sqlstate: ER_OPTION_PREVENTS_STATEMENT.sqlstate.into(),
                    message: format!("could not decode a forwarded statement: {e}"),
                }),
                state: State::of(s),
                row_count: -1,
                last_write_lsn: s.last_write_lsn,
                in_transaction: s.in_transaction(),
                transaction_holds: false,
                temporary_tables: self.temporary_tables.owned_by(s.connection_id),
                named_locks: self.facts.named_locks.holds_any(s.connection_id),
            },
        };
        postcard::to_stdvec(&response).unwrap_or_default()
    }

    /// Why the named locks `s` held through the primary are gone, if they
    /// are: the link to the primary broke (the primary died, lost its
    /// lead, or the link failed), and the primary's session that held them
    /// with it. MySQL loses a connection's locks only with the connection,
    /// so the caller ends the client's connection (see docs/cluster.md).
    /// Cheap when the session holds none.
    pub(crate) fn forwarded_locks_lost(&self, s: &mut Session) -> Option<String> {
        if !s.forwarded_named_locks {
            return None;
        }
        let why = match &s.forward {
            None => "the link to the primary was dropped".to_string(),
            Some(channel) => channel.lost()?,
        };
        s.forwarded_named_locks = false;
        s.forward = None;
        Some(why)
    }

    /// Read-your-writes across nodes: before `s` reads here, this node
    /// must have applied the session's newest write (made on the primary).
    pub(crate) fn await_session_writes(&self, s: &Session) -> Result<(), WireError> {
        let Some(forwarder) = self.forwarder.get() else {
            return Ok(());
        };
        if s.last_write_lsn <= self.storage.last_lsn() {
            return Ok(());
        }
        forwarder
            .wait_applied(s.last_write_lsn)
            .map_err(|why| WireError {
                code: crate::error::ER_LOCK_WAIT_TIMEOUT,
                message: format!(
                    "read-your-writes: this session wrote position {} on the primary and {why}; \
                 retry, or read on the primary",
                    s.last_write_lsn
                ),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::calls_named_lock;

    /// A call of a lock function is forwarded; the name in a string, as a
    /// column name or LOCK TABLES is not a call.
    #[test]
    fn a_named_lock_call_is_recognised_by_its_tokens() {
        assert!(calls_named_lock("SELECT GET_LOCK('a', 10)"));
        assert!(calls_named_lock("do release_all_locks ()"));
        assert!(calls_named_lock("SELECT 1 + Is_Used_Lock(@n)"));
        assert!(!calls_named_lock("SELECT 'GET_LOCK(1)'"));
        assert!(!calls_named_lock("SELECT get_lock FROM t"));
        assert!(!calls_named_lock("LOCK TABLES t READ"));
        assert!(!calls_named_lock("SELECT 1"));
    }
}
