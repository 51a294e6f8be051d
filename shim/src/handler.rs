//! The opensrv-mysql `AsyncMysqlShim` for one connection: authentication,
//! and each command handed to the [`Engine`] on a blocking thread, with
//! panics in lower layers turned into error 1105.

use std::io;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use ladle_common::Value;
use opensrv_mysql::{
    AsyncMysqlShim, ErrorKind, InitWriter, OkResponse, ParamParser, QueryResultWriter,
    StatementMetaWriter, StatusFlags,
};
use parking_lot::Mutex;
use tokio::io::AsyncWrite;

use crate::error::{WireError, ER_UNKNOWN};
use crate::exec::{Engine, Kind, Output};
use crate::net::AuthFailure;
use crate::session::Session;
use crate::wire::{param_column, param_value, wire_columns, write_row};

pub struct Connection {
    engine: Arc<Engine>,
    session: Arc<Mutex<Session>>,
    scramble: [u8; 20],
    user: String,
    password: String,
    connection_id: u32,
    host: String,
    auth: Arc<AuthFailure>,
}

impl Connection {
    pub fn new(
        engine: Arc<Engine>,
        connection_id: u32,
        host: String,
        user: String,
        password: String,
        auth: Arc<AuthFailure>,
    ) -> Connection {
        Connection {
            session: Arc::new(Mutex::new(Session::new(
                connection_id,
                user.clone(),
                host.clone(),
            ))),
            host,
            auth,
            engine,
            scramble: crate::auth::random_scramble(),
            user,
            password,
            connection_id,
        }
    }

    /// The scramble this connection's greeting carries.
    pub fn scramble(&self) -> [u8; 20] {
        self.scramble
    }

    /// Runs `f` on a blocking thread; a panic becomes error 1105.
    async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Engine, &mut Session) -> (Kind, Result<T, WireError>) + Send + 'static,
    ) -> (Kind, Result<T, WireError>) {
        let engine = self.engine.clone();
        let session = self.session.clone();
        let found_rows = self
            .auth
            .client_flags
            .load(std::sync::atomic::Ordering::SeqCst)
            & crate::net::CLIENT_FOUND_ROWS
            != 0;
        let task = tokio::task::spawn_blocking(move || {
            let _inflight = engine.inflight_guard();
            let mut s = session.lock();
            s.found_rows = found_rows;
            f(&engine, &mut s)
        });
        match task.await {
            Ok(r) => r,
            Err(e) => {
                let what = if e.is_panic() {
                    "a panic in the query engine"
                } else {
                    "a cancelled task"
                };
                tracing::error!(
                    connection = self.connection_id,
                    "statement aborted by {what}"
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

    fn status(&self) -> StatusFlags {
        let s = self.session.lock();
        let mut f = StatusFlags::empty();
        if s.autocommit {
            f |= StatusFlags::SERVER_STATUS_AUTOCOMMIT;
        }
        if s.in_transaction()
            && !s
                .transaction
                .as_ref()
                .is_some_and(|t| t.ops.is_empty() && !s.autocommit)
        {
            f |= StatusFlags::SERVER_STATUS_IN_TRANS;
        }
        f
    }

    fn record(&self, kind: Kind, started: Instant, result: &Result<Output, WireError>) {
        self.record_elapsed(kind, started.elapsed(), result);
    }

    fn record_elapsed(
        &self,
        kind: Kind,
        elapsed: std::time::Duration,
        result: &Result<Output, WireError>,
    ) {
        let m = &self.engine.metrics;
        let outcome = if result.is_ok() { "ok" } else { "error" };
        m.queries.with_label_values(&[kind.as_str(), outcome]).inc();
        m.query_seconds
            .with_label_values(&[kind.as_str()])
            .observe(elapsed.as_secs_f64());
        if let Err(e) = result {
            m.errors
                .with_label_values(&[&e.code.errno.to_string()])
                .inc();
        }
    }

    /// Has the socket writer put `warnings` and `status` into the next
    /// packet, an OK or EOF ending a result (see [`crate::net::EndPatch`]).
    fn patch_next_end(&self, warnings: u16, status: StatusFlags) {
        *self.auth.end_patch.lock() = Some(crate::net::EndPatch {
            warnings,
            status: status.bits(),
        });
    }

    /// Whether the client asked for every result of a multi-statement query.
    fn multi_statements(&self) -> bool {
        self.auth
            .client_flags
            .load(std::sync::atomic::Ordering::SeqCst)
            & crate::net::CLIENT_MULTI_STATEMENTS
            != 0
    }

    /// Replies to a multi-statement COM_QUERY: one result per statement, each
    /// but the last flagged SERVER_MORE_RESULTS_EXISTS; an error ends the
    /// reply (the statements after it did not run), as in MySQL.
    async fn reply_multi<W: AsyncWrite + Send + Unpin>(
        &self,
        outcomes: Vec<(Result<Output, WireError>, u16)>,
        results: QueryResultWriter<'_, W>,
    ) -> io::Result<()> {
        // Column definitions must outlive the writer that borrows them.
        let all_cols: Vec<_> = outcomes
            .iter()
            .map(|(o, _)| match o {
                Ok(Output::Rows { columns, rows }) => wire_columns(columns, rows),
                _ => Vec::new(),
            })
            .collect();
        let mut results = results;
        let n = outcomes.len();
        for (i, (outcome, warnings)) in outcomes.into_iter().enumerate() {
            let last = i + 1 == n;
            match outcome {
                Ok(Output::Rows { rows, .. }) => {
                    let cols = &all_cols[i];
                    let mut w = results.start(cols).await?;
                    for r in rows.iter() {
                        write_row(&mut w, cols, r, false)?;
                        w.end_row().await?;
                    }
                    if last {
                        return w.finish().await;
                    }
                    results = w.finish_one().await?;
                    // The packet ending these rows is written when the next
                    // result starts; without the flag the client stops here.
                    self.patch_next_end(warnings, StatusFlags::SERVER_MORE_RESULTS_EXISTS);
                }
                Ok(Output::Done {
                    affected_rows,
                    last_insert_id,
                    info,
                }) => {
                    let mut status_flags = self.status();
                    if !last {
                        status_flags |= StatusFlags::SERVER_MORE_RESULTS_EXISTS;
                    }
                    let ok = OkResponse {
                        affected_rows,
                        last_insert_id,
                        status_flags,
                        warnings,
                        info,
                        ..Default::default()
                    };
                    if last {
                        self.patch_next_end(warnings, StatusFlags::empty());
                        return results.completed(ok).await;
                    }
                    results = results.complete_one(ok).await?;
                    self.patch_next_end(warnings, StatusFlags::empty());
                }
                Err(e) => {
                    return results
                        .error(ErrorKind::from(e.code.errno), e.message.as_bytes())
                        .await;
                }
            }
        }
        results.no_more_results().await
    }

    async fn reply<W: AsyncWrite + Send + Unpin>(
        &self,
        result: Result<Output, WireError>,
        results: QueryResultWriter<'_, W>,
        binary: bool,
    ) -> io::Result<()> {
        match result {
            Ok(Output::Rows { columns, rows }) => {
                let cols = wire_columns(&columns, &rows);
                let mut w = results.start(&cols).await?;
                for r in rows.iter() {
                    write_row(&mut w, &cols, r, binary)?;
                    w.end_row().await?;
                }
                w.finish().await
            }
            Ok(Output::Done {
                affected_rows,
                last_insert_id,
                info,
            }) => {
                let warnings = self.session.lock().warnings.len().min(u16::MAX as usize) as u16;
                // opensrv-mysql writes no warning count; the writer patches it.
                self.patch_next_end(warnings, StatusFlags::empty());
                results
                    .completed(OkResponse {
                        affected_rows,
                        last_insert_id,
                        status_flags: self.status(),
                        warnings,
                        info,
                        ..Default::default()
                    })
                    .await
            }
            Err(e) => {
                results
                    .error(ErrorKind::from(e.code.errno), e.message.as_bytes())
                    .await
            }
        }
    }
}

#[async_trait]
impl<W: AsyncWrite + Send + Unpin> AsyncMysqlShim<W> for Connection {
    type Error = io::Error;

    fn version(&self) -> String {
        crate::vars::SERVER_VERSION.to_string()
    }

    fn connect_id(&self) -> u32 {
        self.connection_id
    }

    fn salt(&self) -> [u8; 20] {
        self.scramble
    }

    async fn authenticate(
        &self,
        auth_plugin: &str,
        username: &[u8],
        salt: &[u8],
        auth_data: &[u8],
    ) -> bool {
        let ok = auth_plugin == "mysql_native_password"
            && username == self.user.as_bytes()
            && crate::auth::verify(self.password.as_bytes(), salt, auth_data);
        if !ok {
            tracing::info!(
                connection = self.connection_id,
                user = %String::from_utf8_lossy(username),
                "access denied"
            );
            self.engine
                .metrics
                .errors
                .with_label_values(&["1045"])
                .inc();
            *self.auth.message.lock() = format!(
                "Access denied for user '{}'@'{}' (using password: {})",
                String::from_utf8_lossy(username),
                self.host,
                if auth_data.is_empty() { "NO" } else { "YES" }
            );
            self.auth
                .failed
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
        ok
    }

    async fn on_prepare<'a>(
        &'a mut self,
        query: &'a str,
        info: StatementMetaWriter<'a, W>,
    ) -> io::Result<()> {
        let sql = query.to_string();
        let (_, res) = self
            .run(move |e, s| {
                let r = e.prepare(s, &sql).map_err(WireError::from);
                if let Err(err) = &r {
                    // The error replaces what SHOW WARNINGS listed.
                    s.warnings.clear();
                    s.add_warning("Error", err.code.errno, err.message.clone());
                }
                (Kind::Other, r)
            })
            .await;
        match res {
            Ok((id, nparams, columns)) => {
                // Before the reply: the client may execute it right away.
                self.auth.statements.lock().insert(id);
                let params: Vec<_> = (0..nparams).map(|_| param_column()).collect();
                let cols = wire_columns(&columns, &ladle_dataflow::ResultRows::default());
                info.reply(id, params.iter(), cols.iter()).await
            }
            Err(e) => {
                self.engine
                    .metrics
                    .errors
                    .with_label_values(&[&e.code.errno.to_string()])
                    .inc();
                info.error(ErrorKind::from(e.code.errno), e.message.as_bytes())
                    .await
            }
        }
    }

    async fn on_execute<'a>(
        &'a mut self,
        id: u32,
        params: ParamParser<'a>,
        results: QueryResultWriter<'a, W>,
    ) -> io::Result<()> {
        let started = Instant::now();
        // opensrv-mysql panics on some malformed parameter blocks; contain it.
        let parsed = std::panic::catch_unwind(AssertUnwindSafe(|| {
            params
                .into_iter()
                .map(|p| param_value(p.value))
                .collect::<Vec<Value>>()
        }));
        let values = match parsed {
            Ok(v) => v,
            Err(_) => {
                let e = WireError {
                    code: crate::error::ER_WRONG_ARGUMENTS,
                    message: "Incorrect arguments to mysqld_stmt_execute".into(),
                };
                let r = Err(e);
                self.record(Kind::Other, started, &r);
                return self.reply(r, results, true).await;
            }
        };
        let (kind, res) = self
            .run(move |e, s| e.execute_prepared(s, id, &values))
            .await;
        self.record(kind, started, &res);
        self.reply(res, results, true).await
    }

    async fn on_close<'a>(&'a mut self, stmt: u32)
    where
        W: 'async_trait,
    {
        self.session.lock().statements.remove(&stmt);
        self.auth.statements.lock().remove(&stmt);
    }

    async fn on_query<'a>(
        &'a mut self,
        query: &'a str,
        results: QueryResultWriter<'a, W>,
    ) -> io::Result<()> {
        let started = Instant::now();
        if query.as_bytes() == crate::net::UNKNOWN_STATEMENT_QUERY {
            // The reader's stand-in for a statement command naming an id
            // this connection never prepared (or closed).
            let unknown = self.auth.unknown_statements.lock().pop_front();
            if let Some((id, command)) = unknown {
                let r = Err(WireError {
                    code: crate::error::ER_UNKNOWN_STMT_HANDLER,
                    message: format!(
                        "Unknown prepared statement handler ({id}) given to {command}"
                    ),
                });
                self.record(Kind::Other, started, &r);
                return self.reply(r, results, true).await;
            }
        }
        let sql = query.to_string();
        if self.multi_statements() && crate::sqltext::split_statements(&sql).len() > 1 {
            let (_, outcomes) = self
                .run(move |e, s| {
                    let mut outcomes = Vec::new();
                    for piece in crate::sqltext::split_statements(&sql) {
                        let started = Instant::now();
                        let (kind, res) = e.execute(s, piece);
                        let failed = res.is_err();
                        let warnings = s.warnings.len().min(usize::from(u16::MAX)) as u16;
                        outcomes.push((kind, started.elapsed(), res, warnings));
                        if failed {
                            break;
                        }
                    }
                    (Kind::Other, Ok(outcomes))
                })
                .await;
            let outcomes = match outcomes {
                Ok(o) => o,
                Err(e) => return self.reply(Err(e), results, false).await,
            };
            let replies = outcomes
                .into_iter()
                .map(|(kind, elapsed, res, warnings)| {
                    self.record_elapsed(kind, elapsed, &res);
                    (res, warnings)
                })
                .collect();
            return self.reply_multi(replies, results).await;
        }
        let (kind, res) = self.run(move |e, s| e.execute(s, &sql)).await;
        self.record(kind, started, &res);
        self.reply(res, results, false).await
    }

    async fn on_init<'a>(&'a mut self, db: &'a str, writer: InitWriter<'a, W>) -> io::Result<()> {
        // Some clients (mysql-connector) send an empty name when none is set.
        let db = db.trim().trim_matches('`').to_string();
        if db.is_empty() {
            return writer.ok().await;
        }
        let (_, res) = self
            .run(move |e, s| (Kind::Other, e.use_database(s, &db).map_err(WireError::from)))
            .await;
        match res {
            Ok(()) => writer.ok().await,
            Err(e) => {
                writer
                    .error(ErrorKind::from(e.code.errno), e.message.as_bytes())
                    .await
            }
        }
    }
}
