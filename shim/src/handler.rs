//! One connection's engine side: its session, and each command's work
//! handed to the [`Engine`] on a statement thread (a cached prepared read
//! runs in place), with panics in lower layers turned into error 1105. The protocol layer ([`crate::protocol`])
//! decodes commands, calls these methods and writes the replies.

use std::sync::Arc;
use std::time::Instant;

use ladle_common::Value;
use ladle_dataflow::OutputColumn;
use parking_lot::Mutex;

use crate::error::{WireError, ER_UNKNOWN};
use crate::exec::Engine;
use crate::output::{Kind, Output};
use crate::protocol::result::{SERVER_STATUS_AUTOCOMMIT, SERVER_STATUS_IN_TRANS};
use crate::session::Session;
use crate::statement_threads::Aborted;

/// A connection's timeouts, as [`Connection::timeouts`] reads them.
#[derive(Clone, Copy, Debug)]
pub struct SessionTimeouts {
    pub idle: std::time::Duration,
    pub read: std::time::Duration,
    pub write: std::time::Duration,
}

/// A statement's outcome and the warning count its reply carries.
pub type Outcome = (Result<Output, WireError>, u16);

pub struct Connection {
    engine: Arc<Engine>,
    session: Arc<Mutex<Session>>,
    scramble: [u8; 20],
    connection_id: u32,
    host: String,
    /// This connection in `SHOW PROCESSLIST`; its interrupt flag stops the
    /// running statement (KILL, client gone).
    process: Arc<crate::processes::Process>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        // A statement still running stops: nobody waits for its answer.
        self.process.client_gone();
        self.engine.processes.unregister(self.connection_id);
        self.release_named_locks();
        self.drop_temporary_tables();
    }
}

/// A statement prepared by [`Connection::prepare`].
pub struct Prepared {
    pub id: u32,
    pub params: usize,
    pub columns: Vec<OutputColumn>,
}

impl Connection {
    /// The connection's TEMPORARY tables go with it, as a `DROP TEMPORARY
    /// TABLE` run like a client's (the schema log, the SELECT cache, the
    /// metadata locks), after its open transaction is rolled back as a
    /// disconnect rolls it back; off the async worker when there is one.
    fn drop_temporary_tables(&self) {
        let owned = self.engine.temporary_tables.stored_by(self.connection_id);
        if owned.is_empty() {
            return;
        }
        let engine = Arc::clone(&self.engine);
        let session = Arc::clone(&self.session);
        let work = move || {
            let mut s = session.lock();
            engine.drop_ended_sessions_tables(&mut s, owned);
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => drop(rt.spawn_blocking(work)),
            Err(_) => work(),
        }
    }

    /// The connection's named locks go with it, as in MySQL. A statement
    /// still running (it holds the session) may take one after a release
    /// here (it stops at its next look at the interrupt flag, set above),
    /// so they are released again once it has ended.
    fn release_named_locks(&self) {
        let id = self.connection_id;
        let idle = self.session.try_lock();
        self.engine.facts.named_locks.release_all(id);
        if idle.is_some() {
            return;
        }
        let engine = Arc::clone(&self.engine);
        let session = Arc::clone(&self.session);
        let work = move || {
            let _ended = session.lock();
            engine.facts.named_locks.release_all(id);
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => drop(rt.spawn_blocking(work)),
            Err(_) => work(),
        }
    }

    pub fn new(engine: Arc<Engine>, connection_id: u32, host: String) -> Connection {
        let process = engine.processes.register(connection_id, host.clone());
        let mut session = Session::new(connection_id, String::new(), host.clone());
        engine.facts.globals.start_session(&mut session);
        Connection {
            process,
            session: Arc::new(Mutex::new(session)),
            host,
            engine,
            scramble: crate::auth::random_scramble(),
            connection_id,
        }
    }

    /// The scramble this connection's greeting carries.
    pub fn scramble(&self) -> [u8; 20] {
        self.scramble
    }

    pub fn connection_id(&self) -> u32 {
        self.connection_id
    }

    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// Checks a `mysql_native_password` login against the accounts and
    /// makes the session that account's. `secure`: the connection is TLS.
    /// On failure the error to send (1045; 3159 for plaintext while
    /// `require_secure_transport` is ON), counted and logged.
    pub fn authenticate(
        &self,
        user: &[u8],
        auth_response: &[u8],
        secure: bool,
    ) -> Result<(), WireError> {
        let login =
            self.engine
                .accounts
                .authenticate(user, &self.host, &self.scramble, auth_response);
        self.admit(user, login, !auth_response.is_empty(), secure)
    }

    /// [`Connection::authenticate`] for a `caching_sha2_password` fast
    /// authentication response (of either plugin's account, see
    /// `Accounts::authenticate_sha2`); `None` when it does not prove the
    /// password (the caller asks for what decides).
    pub fn authenticate_sha2(
        &self,
        user: &[u8],
        auth_response: &[u8],
        secure: bool,
    ) -> Option<Result<(), WireError>> {
        let login = self.engine.accounts.authenticate_sha2(
            user,
            &self.host,
            &self.scramble,
            auth_response,
        )?;
        Some(self.admit(user, Some(login), !auth_response.is_empty(), secure))
    }

    /// The authentication plugin `user` logs in with from this host.
    pub fn account_plugin(&self, user: &[u8]) -> crate::accounts::AuthPlugin {
        self.engine.accounts.plugin(user, &self.host)
    }

    /// `caching_sha2_password`'s full authentication with the password in
    /// clear; `None` when the client sent none that could be read (over
    /// plaintext without RSA, a ciphertext that does not decrypt), which
    /// is refused as a wrong password is.
    pub fn authenticate_password(
        &self,
        user: &[u8],
        password: Option<&[u8]>,
        secure: bool,
    ) -> Result<(), WireError> {
        let login = password.and_then(|pw| {
            self.engine
                .accounts
                .authenticate_password(user, &self.host, pw)
        });
        // "using password: YES" unless an empty one was sent.
        let used_password = !matches!(password, Some(p) if p.is_empty());
        self.admit(user, login, used_password, secure)
    }

    /// Makes the session `login`'s, or says why not.
    fn admit(
        &self,
        user: &[u8],
        login: Option<crate::accounts::Login>,
        used_password: bool,
        secure: bool,
    ) -> Result<(), WireError> {
        let refusal = match login {
            _ if !secure && self.engine.facts.secure_transport_required() => Some(WireError {
                code: crate::error::ER_SECURE_TRANSPORT_REQUIRED,
                message: "Connections using insecure transport are prohibited while --require_secure_transport=ON.".into(),
            }),
            // REQUIRE SSL over plaintext is refused as a wrong password is.
            Some(l) if l.require_ssl && !secure => None,
            Some(login) => {
                self.engine.host_errors.succeeded(&self.host);
                let mut s = self.session.lock();
                s.user = String::from_utf8_lossy(user).into_owned();
                s.grantee = login.grantee;
                self.process
                    .logged_in(s.user.clone(), s.grantee.clone(), s.database.clone());
                return Ok(());
            }
            None => None,
        };
        let refusal = refusal.unwrap_or_else(|| WireError {
            code: crate::error::ER_ACCESS_DENIED,
            message: format!(
                "Access denied for user '{}'@'{}' (using password: {})",
                String::from_utf8_lossy(user),
                self.host,
                if used_password { "YES" } else { "NO" }
            ),
        });
        if refusal.code == crate::error::ER_ACCESS_DENIED {
            let max = self
                .engine
                .facts
                .security
                .max_connect_errors
                .load(std::sync::atomic::Ordering::SeqCst);
            self.engine.host_errors.failed(&self.host, max);
        }
        tracing::info!(
            connection = self.connection_id,
            user = %String::from_utf8_lossy(user),
            errno = refusal.code.errno,
            "access denied"
        );
        self.count_error(refusal.code.errno);
        Err(refusal)
    }

    /// Counts an error reply in the metrics.
    pub fn count_error(&self, errno: u16) {
        self.engine
            .metrics
            .errors
            .with_label_values(&[&errno.to_string()])
            .inc();
    }

    /// Runs `f` on a statement thread ([`crate::statement_threads`]); a
    /// panic becomes error 1105.
    async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Engine, &mut Session) -> (Kind, Result<T, WireError>) + Send + 'static,
    ) -> (Kind, Result<T, WireError>) {
        let engine = self.engine.clone();
        let session = self.session.clone();
        let interrupt = self.process.interrupt.clone();
        let task = crate::statement_threads::global().run(move || {
            let _inflight = engine.inflight_guard();
            let _watch = ladle_dataflow::interrupt::watch_flag(interrupt);
            let mut s = session.lock();
            let _clock = ladle_dataflow::clock::fix(crate::vars::fixed_clock(&s));
            f(&engine, &mut s)
        });
        match task.await {
            Ok(r) => r,
            Err(aborted) => {
                let what = match &aborted {
                    Aborted::Panic(_) => "a panic in the query engine",
                    Aborted::NoThread => "no thread to run it on",
                };
                tracing::error!(
                    connection = self.connection_id,
                    "statement aborted by {what}: {aborted}"
                );
                (
                    Kind::Other,
                    Err(WireError {
                        code: ER_UNKNOWN,
                        message: format!("internal error: statement aborted by {what}"),
                    }),
                )
            }
        }
    }

    /// The status flags for the next OK/EOF packet.
    pub fn status(&self) -> u16 {
        let s = self.session.lock();
        let mut f = 0;
        if s.autocommit {
            f |= SERVER_STATUS_AUTOCOMMIT;
        }
        if s.in_transaction()
            && !s
                .transaction
                .as_ref()
                .is_some_and(|t| t.ops.is_empty() && !s.autocommit)
        {
            f |= SERVER_STATUS_IN_TRANS;
        }
        f
    }

    /// The session's warning count, as an OK packet carries it.
    pub fn warnings(&self) -> u16 {
        warning_count(&self.session.lock())
    }

    fn record(&self, kind: Kind, elapsed: std::time::Duration, result: &Result<Output, WireError>) {
        let m = &self.engine.metrics;
        let outcome = if result.is_ok() { "ok" } else { "error" };
        m.queries.with_label_values(&[kind.as_str(), outcome]).inc();
        m.query_seconds
            .with_label_values(&[kind.as_str()])
            .observe(elapsed.as_secs_f64());
        if let Err(e) = result {
            self.count_error(e.code.errno);
        }
    }

    /// Runs a COM_QUERY text. With `multi` (CLIENT_MULTI_STATEMENTS) every
    /// statement of the text runs and has its outcome, up to the first
    /// error, as in MySQL.
    pub async fn query(&self, sql: String, multi: bool) -> Vec<Outcome> {
        if let Some(lost) = self.forwarded_locks_lost() {
            return vec![(Err(lost), 0)];
        }
        self.process.begin(&sql);
        let outcomes = self.query_inner(sql, multi).await;
        self.process.end(self.session.lock().database.clone());
        outcomes
    }

    /// On a cluster replica, when the named locks the session held through
    /// the primary were lost with the link to it (the primary died or lost
    /// its lead): the statement gets 1927 saying so and the connection
    /// closes after it, as a MySQL client's connection ends with the
    /// server that held its locks (see docs/cluster.md).
    fn forwarded_locks_lost(&self) -> Option<WireError> {
        let why = self.engine.forwarded_locks_lost(&mut self.session.lock())?;
        tracing::warn!(
            connection = self.connection_id,
            reason = %why,
            "a session's named locks on the primary were lost; closing its connection"
        );
        self.process.close_after_reply();
        Some(WireError {
            code: crate::error::ER_CONNECTION_KILLED,
            message: format!(
                "Connection was killed: the named locks this session held (on the primary) \
                 were lost: {why}"
            ),
        })
    }

    /// The process of this connection (`SHOW PROCESSLIST`, `KILL`).
    pub fn process(&self) -> &crate::processes::Process {
        &self.process
    }

    async fn query_inner(&self, sql: String, multi: bool) -> Vec<Outcome> {
        let started = Instant::now();
        // Opened before the split: an executable comment may hold `;`.
        let sql = match crate::sqltext::open_versioned_comments(&sql) {
            std::borrow::Cow::Owned(opened) => opened,
            std::borrow::Cow::Borrowed(_) => sql,
        };
        // (Only a `;` can separate statements: most texts skip the split.)
        if multi && sql.contains(';') && crate::sqltext::split_statements(&sql).len() > 1 {
            let (_, outcomes) = self
                .run(move |e, s| {
                    let mut outcomes = Vec::new();
                    for piece in crate::sqltext::split_statements(&sql) {
                        let started = Instant::now();
                        let (kind, mut res) = e.execute(s, piece);
                        if let Ok(out) = &mut res {
                            e.result_names.apply(piece, out);
                        }
                        let failed = res.is_err();
                        outcomes.push((kind, started.elapsed(), res, warning_count(s)));
                        if failed {
                            break;
                        }
                    }
                    (Kind::Other, Ok(outcomes))
                })
                .await;
            return match outcomes {
                Ok(o) => o
                    .into_iter()
                    .map(|(kind, elapsed, res, warnings)| {
                        self.record(kind, elapsed, &res);
                        (res, warnings)
                    })
                    .collect(),
                Err(e) => vec![(Err(e), 0)],
            };
        }
        if let Some((kind, mut res)) = self
            .query_cached(&sql)
            .or_else(|| self.inline(|e, s| e.transaction_control_inline(s, &sql)))
        {
            self.record(kind, started.elapsed(), &res);
            if let Ok(out) = &mut res {
                self.engine.result_names.apply(&sql, out);
            }
            return vec![(res, self.warnings())];
        }
        let (kind, res) = self
            .run(move |e, s| {
                let (kind, mut res) = e.execute(s, &sql);
                if let Ok(out) = &mut res {
                    e.result_names.apply(&sql, out);
                }
                (kind, res)
            })
            .await;
        self.record(kind, started.elapsed(), &res);
        vec![(res, self.warnings())]
    }

    /// [`Engine::execute_cached`] on the connection's task (a repeated
    /// SELECT its view answers from memory), with a panic turned into
    /// error 1105 as [`Connection::run`] does.
    fn query_cached(&self, sql: &str) -> Option<(Kind, Result<Output, WireError>)> {
        self.inline(|engine, s| engine.execute_cached(s, sql))
    }

    /// Plans a statement for COM_STMT_PREPARE. A statement re-planned per
    /// execution that returns rows is run once with NULL parameters so that
    /// the reply announces its columns (clients check that the executed
    /// result has as many as were announced).
    pub async fn prepare(&self, sql: String) -> Result<Prepared, WireError> {
        let (_, res) = self
            .run(move |e, s| {
                let r = e.prepare(s, &sql).map_err(WireError::from);
                let r = r.map(|(id, params, mut columns)| {
                    if columns.is_empty() {
                        columns = probe_columns(e, s, id).unwrap_or_default();
                    }
                    e.result_names.apply_to_columns(&sql, &mut columns);
                    Prepared {
                        id,
                        params,
                        columns,
                    }
                });
                if let Err(err) = &r {
                    crate::refused::note(s.connection_id, &sql, err);
                    // The error replaces what SHOW WARNINGS listed.
                    s.clear_warnings();
                    s.add_warning("Error", err.code.errno, err.message.clone());
                }
                (Kind::Other, r)
            })
            .await;
        if let Err(e) = &res {
            self.count_error(e.code.errno);
        }
        res
    }

    /// Whether the session has prepared statement `id`.
    pub fn has_statement(&self, id: u32) -> bool {
        self.session.lock().statements.contains_key(&id)
    }

    /// Runs prepared statement `id` with `values`. A SELECT the views can
    /// answer from memory is answered here, on the connection's task: a
    /// hand-off to a statement thread and back costs more than the read.
    pub async fn execute(&self, id: u32, values: Vec<Value>) -> Outcome {
        if let Some(lost) = self.forwarded_locks_lost() {
            return (Err(lost), 0);
        }
        let started = Instant::now();
        let inline = self.execute_cached(id, &values).or_else(|| {
            self.inline(|e, s| {
                let sql = match s.statements.get(&id) {
                    Some(crate::session::PreparedStatement::Other { sql, .. })
                        if crate::dispatch::plain_transaction_control(sql) =>
                    {
                        sql.clone()
                    }
                    _ => return None,
                };
                e.transaction_control_inline(s, &sql)
            })
        });
        if let Some((kind, mut res)) = inline {
            self.record(kind, started.elapsed(), &res);
            self.name_prepared_result(id, &mut res);
            return (res, self.warnings());
        }
        let text = match self.session.lock().statements.get(&id) {
            Some(crate::session::PreparedStatement::Select { sql, .. })
            | Some(crate::session::PreparedStatement::Other { sql, .. }) => sql.clone(),
            None => String::new(),
        };
        self.process.begin(&text);
        let (kind, res) = self
            .run(move |e, s| e.execute_prepared(s, id, &values))
            .await;
        self.process.end(self.session.lock().database.clone());
        self.record(kind, started.elapsed(), &res);
        let mut res = res;
        self.name_prepared_result(id, &mut res);
        (res, self.warnings())
    }

    /// Names the columns of prepared statement `id`'s result as its text
    /// does (see [`crate::result_names`]).
    fn name_prepared_result(&self, id: u32, res: &mut Result<Output, WireError>) {
        let Ok(out) = res else {
            return;
        };
        let s = self.session.lock();
        if let Some(
            crate::session::PreparedStatement::Select { sql, .. }
            | crate::session::PreparedStatement::Other { sql, .. },
        ) = s.statements.get(&id)
        {
            self.engine.result_names.apply(sql, out);
        }
    }

    /// [`Engine::execute_prepared_cached`], with a panic turned into error
    /// 1105 as [`Connection::run`] does.
    fn execute_cached(
        &self,
        id: u32,
        values: &[Value],
    ) -> Option<(Kind, Result<Output, WireError>)> {
        self.inline(|engine, s| engine.execute_prepared_cached(s, id, values))
    }

    /// Runs `f` on the connection's task, for what never blocks; a panic
    /// becomes error 1105 as in [`Connection::run`].
    fn inline(
        &self,
        f: impl FnOnce(&Engine, &mut Session) -> Option<(Kind, Result<Output, WireError>)>,
    ) -> Option<(Kind, Result<Output, WireError>)> {
        let attempt = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _inflight = self.engine.inflight_guard();
            let mut s = self.session.lock();
            let _clock = ladle_dataflow::clock::fix(crate::vars::fixed_clock(&s));
            f(&self.engine, &mut s)
        }));
        attempt.unwrap_or_else(|_| {
            tracing::error!(
                connection = self.connection_id,
                "statement aborted by a panic in the query engine"
            );
            Some((
                Kind::Select,
                Err(WireError {
                    code: ER_UNKNOWN,
                    message: "internal error: statement aborted by a panic in the query engine"
                        .into(),
                }),
            ))
        })
    }

    /// Records a failure decided before execution (malformed parameters).
    pub fn fail(&self, e: WireError) -> Outcome {
        let res = Err(e);
        self.record(Kind::Other, std::time::Duration::ZERO, &res);
        (res, 0)
    }

    pub fn close(&self, id: u32) {
        self.session.lock().statements.remove(&id);
    }

    pub async fn use_database(&self, db: String) -> Result<(), WireError> {
        let (_, res) = self
            .run(move |e, s| (Kind::Other, e.use_database(s, &db).map_err(WireError::from)))
            .await;
        if let Err(e) = &res {
            self.count_error(e.code.errno);
        }
        res
    }

    /// COM_RESET_CONNECTION / COM_CHANGE_USER: the session as a new
    /// connection's (see [`Session::reset`]).
    /// Applies what the client's capability flags ask of statements
    /// (CLIENT_FOUND_ROWS: UPDATE reports matched rows).
    pub fn set_client_capabilities(&self, caps: u32) {
        use crate::protocol::handshake::{CLIENT_FOUND_ROWS, CLIENT_INTERACTIVE};
        let mut s = self.session.lock();
        s.found_rows = caps & CLIENT_FOUND_ROWS != 0;
        s.interactive = caps & CLIENT_INTERACTIVE != 0;
    }

    /// The session's timeouts: how long the connection may sit idle
    /// between commands (`wait_timeout`, which starts as
    /// `interactive_timeout` for an interactive client), how long a packet
    /// that has begun may take to arrive (`net_read_timeout`) and how long a
    /// reply may take to be written (`net_write_timeout`).
    pub fn timeouts(&self) -> SessionTimeouts {
        use crate::vars::session_timeout;
        let s = self.session.lock();
        let t = &self.engine.facts.timeouts;
        let wait = if s.interactive { t.interactive } else { t.wait };
        SessionTimeouts {
            idle: session_timeout(&s, "wait_timeout", wait),
            read: session_timeout(&s, "net_read_timeout", t.net_read),
            write: session_timeout(&s, "net_write_timeout", t.net_write),
        }
    }

    pub fn reset(&self) {
        let mut s = self.session.lock();
        s.reset();
        // COM_RESET_CONNECTION and COM_CHANGE_USER release the named locks.
        self.engine
            .facts
            .named_locks
            .release_all(self.connection_id);
        self.engine.facts.globals.start_session(&mut s);
    }
}

/// The warnings the statement just run raised (an OK or EOF packet's
/// count), without those an earlier statement left.
fn warning_count(s: &Session) -> u16 {
    s.statement_warnings().min(usize::from(u16::MAX)) as u16
}

/// The columns prepared statement `id` (re-planned per execution) returns,
/// found by running it with NULL parameters; `None` if it returns no rows.
/// The session's warnings and LAST_INSERT_ID are left as they were.
fn probe_columns(e: &Engine, s: &mut Session, id: u32) -> Option<Vec<OutputColumn>> {
    let crate::session::PreparedStatement::Other { sql, marks, .. } = s.statements.get(&id)? else {
        return None;
    };
    if !matches!(crate::tokens::classify(sql), Kind::Select | Kind::Show) {
        return None;
    }
    let probe = crate::params::substitute(sql, marks, &vec![Value::Null; marks.len()]);
    // The probe leaves no trace: warnings, LAST_INSERT_ID, user variables
    // (`@x := ...`), FOUND_ROWS() and ROW_COUNT() as they were, and no
    // SLEEP.
    let warnings = std::mem::take(&mut s.warnings);
    let found_rows = s.found_rows_count;
    let row_count = s.row_count;
    let carried = s.carried_warnings;
    let last_insert_id = s.last_insert_id;
    let user_variables = s.user_variables.clone();
    s.probing = true;
    let (_, res) = e.execute(s, &probe);
    s.probing = false;
    s.warnings = warnings;
    s.carried_warnings = carried;
    s.last_insert_id = last_insert_id;
    s.user_variables = user_variables;
    s.found_rows_count = found_rows;
    s.row_count = row_count;
    match res {
        Ok(Output::Rows { columns, .. }) => Some(columns),
        _ => None,
    }
}
