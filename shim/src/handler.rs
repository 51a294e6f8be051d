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

    /// Runs `f` on a blocking thread; a panic becomes error 1105.
    async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Engine, &mut Session) -> (Kind, Result<T, WireError>) + Send + 'static,
    ) -> (Kind, Result<T, WireError>) {
        let engine = self.engine.clone();
        let session = self.session.clone();
        let task = tokio::task::spawn_blocking(move || {
            let _inflight = engine.inflight_guard();
            let mut s = session.lock();
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
        let m = &self.engine.metrics;
        let outcome = if result.is_ok() { "ok" } else { "error" };
        m.queries.with_label_values(&[kind.as_str(), outcome]).inc();
        m.query_seconds
            .with_label_values(&[kind.as_str()])
            .observe(started.elapsed().as_secs_f64());
        if let Err(e) = result {
            m.errors
                .with_label_values(&[&e.code.errno.to_string()])
                .inc();
        }
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
                for r in &rows {
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
                self.auth
                    .ok_warnings
                    .store(warnings, std::sync::atomic::Ordering::SeqCst);
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
                s.warnings.clear();
                let r = e.prepare(s, &sql).map_err(WireError::from);
                if let Err(err) = &r {
                    s.add_warning("Error", err.code.errno, err.message.clone());
                }
                (Kind::Other, r)
            })
            .await;
        match res {
            Ok((id, nparams, columns)) => {
                let params: Vec<_> = (0..nparams).map(|_| param_column()).collect();
                let cols = wire_columns(&columns, &[]);
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
    }

    async fn on_query<'a>(
        &'a mut self,
        query: &'a str,
        results: QueryResultWriter<'a, W>,
    ) -> io::Result<()> {
        let started = Instant::now();
        let sql = query.to_string();
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
