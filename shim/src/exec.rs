//! Statement routing: one SQL text in, one [`Output`] out. Synchronous (the
//! connection handler runs it on a blocking thread): storage writes may wait
//! for an fsync.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::sync::Arc;

use ladle_common::{SqlType, Value};
use ladle_dataflow::{Dataflow, OutputColumn, PreparedQuery, ResultRows};
use ladle_storage::Storage;
use sqlparser::ast::{self, Expr, SelectItem, SetExpr, Statement, TableFactor};
use sqlparser::parser::Parser;
use sqlparser::tokenizer::{Token, Word};

use crate::error::{Result, ShimError, WireError};
use crate::metrics::Metrics;
use crate::session::{PreparedStatement, Session, Transaction};
use crate::vars::{EvalContext, EvalError, ReadConsistency, ServerFacts};
use crate::{catalog, ddl, dml};

/// What a statement produced.
#[derive(Debug)]
pub enum Output {
    Rows {
        columns: Vec<OutputColumn>,
        /// Shared with a view's reader for plain view reads.
        rows: ResultRows,
    },
    Done {
        affected_rows: u64,
        last_insert_id: u64,
        info: Info,
    },
}

impl Output {
    pub fn ok() -> Output {
        Output::affected(0)
    }
    pub fn affected(n: u64) -> Output {
        Output::Done {
            affected_rows: n,
            last_insert_id: 0,
            info: Info::None,
        }
    }
}

/// What an OK packet's info string (`mysql_info()`) reports; the
/// statement's warning count is filled in when the packet is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Info {
    None,
    /// A multi-row INSERT or REPLACE, or INSERT ... SELECT: rows given, and
    /// rows that met a duplicate key (skipped by IGNORE, replaced by
    /// REPLACE, updated by ON DUPLICATE KEY UPDATE).
    Records {
        records: u64,
        duplicates: u64,
    },
    /// An UPDATE: rows its WHERE matched, rows it changed.
    Matched {
        matched: u64,
        changed: u64,
    },
}

impl Info {
    /// The text MySQL sends (two spaces between items), or `""`.
    pub fn render(self, warnings: u16) -> String {
        match self {
            Info::None => String::new(),
            Info::Records {
                records,
                duplicates,
            } => format!("Records: {records}  Duplicates: {duplicates}  Warnings: {warnings}"),
            Info::Matched { matched, changed } => {
                format!("Rows matched: {matched}  Changed: {changed}  Warnings: {warnings}")
            }
        }
    }
}

/// Statement kinds, for metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Select,
    Insert,
    Update,
    Delete,
    Ddl,
    Transaction,
    Show,
    Other,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Select => "select",
            Kind::Insert => "insert",
            Kind::Update => "update",
            Kind::Delete => "delete",
            Kind::Ddl => "ddl",
            Kind::Transaction => "transaction",
            Kind::Show => "show",
            Kind::Other => "other",
        }
    }
}

/// Everything a statement may touch besides its session.
pub struct Engine {
    pub storage: Arc<Storage>,
    /// User accounts and their privileges (see [`crate::accounts`]).
    pub accounts: crate::accounts::Accounts,
    /// Failed logins per host (`max_connect_errors`, `FLUSH HOSTS`).
    pub host_errors: crate::throttle::HostErrors,
    /// Open connections (`SHOW PROCESSLIST`, `KILL`).
    pub processes: crate::processes::Processes,
    pub dataflow: Arc<Dataflow>,
    pub facts: ServerFacts,
    pub metrics: Arc<Metrics>,
    /// Server operations behind `SNAPSHOT VIEWS` / `SHOW SNAPSHOTS`.
    pub admin: Arc<dyn crate::admin::Admin>,
    /// Statements executing right now (shutdown waits for zero).
    pub inflight: AtomicUsize,
    /// Text SELECTs already bound to a view, by (database, SQL text), so a
    /// repeated ad-hoc query skips parsing and planning. Cleared by any DDL.
    pub select_cache: SelectCache,
    /// Compiled CHECK constraints per table.
    pub checks: crate::checks::CheckCache,
    /// Every table's FOREIGN KEYs.
    pub foreign_keys: crate::foreign_keys::ForeignKeyCache,
    /// Set on a cluster node: refuses DDL where writes are not taken and
    /// records each schema change for replicas (see [`SchemaLog`]).
    pub schema_log: std::sync::OnceLock<Arc<dyn SchemaLog>>,
    /// Set on a cluster node: writes sent here while it is not the
    /// primary run there ([`crate::forward`]).
    pub forwarder: std::sync::OnceLock<Arc<dyn crate::forward::Forwarder>>,
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
    fn prepare(&self, database: Option<&str>, sql: &str) -> Option<(String, Vec<u8>)>;
    /// Called after `sql` changed the schema, before any later write can
    /// commit; `carried`: a catalog write of the change already wrote the
    /// prepared record (else this writes it).
    fn record(&self, database: Option<&str>, sql: &str, carried: bool);
    /// Called after an account statement, with the whole account list
    /// ([`crate::accounts::Accounts::encoded`]): replicas install it (the
    /// statement's text, which may hold a password, is never sent).
    fn record_accounts(&self, state: &str);
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
    fn get(&self, key: &(String, String)) -> Option<PreparedQuery> {
        self.entries.lock().by_text.get(key).cloned()
    }

    /// Keeps `pq`, the view `key.1` read in database `key.0`.
    fn insert(&self, key: (String, String), pq: &PreparedQuery) {
        self.entries.lock().insert(key, pq.clone());
    }

    /// DDL ran: every plan bound so far may be stale.
    fn invalidate(&self) {
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

/// A result column of the given type (for shim-built result sets).
pub fn column(name: &str, ty: SqlType) -> OutputColumn {
    OutputColumn {
        name: name.to_string(),
        table: String::new(),
        origin: None,
        ty,
        nullable: true,
    }
}

pub fn text_column(name: &str) -> OutputColumn {
    column(name, SqlType::VarChar(255))
}

pub fn int_column(name: &str) -> OutputColumn {
    column(
        name,
        SqlType::Int {
            bytes: 8,
            unsigned: false,
            display_width: None,
        },
    )
}

/// Statements of `sql`, string literals unescaped as MySQL does (see
/// [`crate::sqltext`]).
pub fn parse(sql: &str) -> Result<Vec<Statement>> {
    crate::sqltext::parse_statements(sql)
}

/// A select list (`*`, `t.*`, expressions with aliases) given as text,
/// all of it: a RETURNING list the shim split off its statement.
fn parse_select_items(sql: &str) -> Result<Vec<SelectItem>> {
    let mut parser = crate::sqltext::parser(sql)?;
    let mut items = crate::sqltext::contain_parser_panic(|| {
        let items = parser.parse_comma_separated(Parser::parse_select_item)?;
        parser.expect_token(&Token::EOF)?;
        Ok(items)
    })?;
    ladle_dataflow::bound_depth(&mut items).map_err(|_| ShimError::TooDeep)?;
    Ok(items)
}

/// Tokens without whitespace and comments.
pub fn tokens(sql: &str) -> Result<Vec<Token>> {
    Ok(crate::sqltext::tokenize(sql)?
        .into_iter()
        .map(|t| t.token)
        .filter(|t| !matches!(t, Token::Whitespace(_)))
        .collect())
}

/// The upper-cased word at `i`, if that token is a word (quoted or not).
pub fn word(t: &[Token], i: usize) -> Option<String> {
    match t.get(i) {
        Some(Token::Word(Word {
            value,
            quote_style: None,
            ..
        })) => Some(value.to_ascii_uppercase()),
        _ => None,
    }
}

/// The identifier at `i` (a word, quoted or not).
pub fn ident(t: &[Token], i: usize) -> Option<String> {
    match t.get(i) {
        Some(Token::Word(w)) => Some(w.value.clone()),
        Some(Token::SingleQuotedString(s)) => Some(s.clone()),
        _ => None,
    }
}

/// Reads `name` or `db.name` at `*i`, advancing past it.
pub fn qualified_name(t: &[Token], i: &mut usize) -> Option<(Option<String>, String)> {
    let first = ident(t, *i)?;
    *i += 1;
    if matches!(t.get(*i), Some(Token::Period)) {
        let second = ident(t, *i + 1)?;
        *i += 2;
        Some((Some(first), second))
    } else {
        Some((None, first))
    }
}

impl Engine {
    pub fn inflight_guard(&self) -> InflightGuard<'_> {
        self.inflight.fetch_add(1, AtomicOrdering::SeqCst);
        InflightGuard(&self.inflight)
    }

    /// Runs one SQL text (one statement; a trailing `;` is fine; several
    /// statements run in order and the last one's output is returned).
    pub fn execute(
        &self,
        s: &mut Session,
        sql: &str,
    ) -> (Kind, std::result::Result<Output, WireError>) {
        let opened = crate::sqltext::open_versioned_comments(sql);
        let sql = opened.as_ref();
        let kind = classify(sql);
        let carried = carried_warnings(s, sql, kind);
        if self.must_forward(s, kind, sql) {
            // The primary's answer carries the session's warnings and
            // ROW_COUNT() as it left them.
            return (kind, self.forward(s, sql));
        }
        // Warnings of an earlier statement run on this thread are not ours.
        ladle_dataflow::take_eval_warnings();
        let _deadline = (kind == Kind::Select).then(|| select_deadline(s));
        let result = self.execute_inner(s, sql, kind);
        self.settle_statement(s, sql, kind, carried, result)
    }

    /// A text SELECT answered without blocking: its view is installed (the
    /// same text was read before in this database, or the query has the
    /// shape of an installed view: [`Engine::installed_select`]), the
    /// session's transaction (if any) reads the committed state, and the view holds the rows with
    /// the writes the read must see (see [`PreparedQuery::read_cached`]). `None`: run
    /// [`Engine::execute`] on a blocking thread instead. Lets the
    /// connection's task answer a repeated query, as
    /// [`Engine::execute_prepared_cached`] does for prepared ones.
    pub fn execute_cached(
        &self,
        s: &mut Session,
        sql: &str,
    ) -> Option<(Kind, std::result::Result<Output, WireError>)> {
        // A transaction's reads see its own writes, and under REPEATABLE
        // READ its snapshot: only one that has written nothing at READ
        // COMMITTED reads what everyone reads.
        if classify(sql) != Kind::Select || !self.reads_shared_views_now(s) {
            return None;
        }
        if matches!(
            crate::sqltext::open_versioned_comments(sql),
            std::borrow::Cow::Owned(_)
        ) {
            return None;
        }
        let db = s.database.clone()?;
        let key = (db, sql.to_string());
        let cached = self.select_cache.get(&key);
        let (pq, new) = match cached {
            Some(pq) => (pq, false),
            None => (self.installed_select(s, &key.0, sql)?, true),
        };
        ladle_dataflow::take_eval_warnings();
        let start = std::time::Instant::now();
        let rows = pq.read_cached(&[], self.read_lsn(s))?;
        if new {
            self.remember_select(key, &pq);
        }
        self.metrics
            .read_seconds
            .observe(start.elapsed().as_secs_f64());
        let result = rows
            .map(|rows| Output::Rows {
                columns: pq.columns().to_vec(),
                rows,
            })
            .map_err(|e| WireError::from(ShimError::from(e)));
        // (The read left the session's warnings alone.)
        let carried = carried_warnings(s, sql, Kind::Select);
        Some(self.settle_statement(s, sql, Kind::Select, carried, result))
    }

    /// Whether a read by `s` may be answered from the views at once: not
    /// in a transaction with a view of its own (its writes, or a REPEATABLE
    /// READ snapshot), nor in one the primary runs (a forwarded one), nor
    /// waiting for this node to apply the session's last write, nor by a
    /// stored account (its privileges are checked at each statement on the
    /// blocking path, so a REVOKE applies to statements prepared before).
    fn reads_shared_views_now(&self, s: &Session) -> bool {
        if s.grantee.is_some() {
            return false;
        }
        let own_view = s
            .transaction
            .as_ref()
            .is_some_and(|t| !t.ops.is_empty() || t.repeatable_read);
        !own_view && !s.forwarded_transaction && s.last_write_lsn <= self.storage.last_lsn()
    }

    /// The installed view a text SELECT reads, if it reads one: a plain
    /// query of tables (no DUAL, information_schema, locking or share-mode
    /// read, no constant query the shim answers itself) whose view exists
    /// already. Parses, plans nothing, never blocks; `None` leaves the
    /// statement to [`Engine::execute`].
    fn installed_select(&self, s: &Session, db: &str, sql: &str) -> Option<PreparedQuery> {
        if strip_share_mode(sql).is_some() {
            return None;
        }
        let mut stmts = parse(sql).ok()?;
        let Some(Statement::Query(q)) = stmts.pop() else {
            return None;
        };
        let plain = stmts.is_empty()
            && q.locks.is_empty()
            && matches!(q.body.as_ref(), SetExpr::Select(sel) if !sel.from.is_empty())
            && without_dual(&q).is_none()
            && !catalog::is_information_schema_query(s, &q);
        if !plain {
            return None;
        }
        self.dataflow.prepare_installed(db, &q).ok().flatten()
    }

    /// Keeps the view `sql` read in the select cache, so that the same text
    /// again skips parsing.
    fn remember_select(&self, key: (String, String), pq: &PreparedQuery) {
        self.select_cache.insert(key, pq);
    }

    /// What every statement leaves in its session besides its result:
    /// ROW_COUNT(), and the warnings SHOW WARNINGS lists (those the
    /// evaluator raised while it ran, or its error). `carried`: the
    /// earlier statements' warnings still listed when it started.
    fn settle_statement(
        &self,
        s: &mut Session,
        sql: &str,
        kind: Kind,
        carried: usize,
        result: std::result::Result<Output, WireError>,
    ) -> (Kind, std::result::Result<Output, WireError>) {
        // ROW_COUNT(): rows the statement changed, -1 for one that returned
        // rows or failed (MySQL's definition; 0 for DDL and SET).
        s.row_count = match &result {
            Ok(Output::Done { affected_rows, .. }) => {
                i64::try_from(*affected_rows).unwrap_or(i64::MAX)
            }
            _ => -1,
        };
        let raised = ladle_dataflow::take_eval_warnings();
        if result.is_ok() && !raised.is_empty() {
            // A statement with warnings replaces the earlier ones.
            s.warnings.drain(..carried.min(s.warnings.len()));
            s.carried_warnings = 0;
            for (level, code, message) in raised {
                s.add_warning(level, code, message);
            }
        }
        if let Err(e) = &result {
            // SHOW WARNINGS after a failed statement lists its error (and
            // no longer what an earlier statement left).
            if kind != Kind::Show {
                s.warnings.drain(..carried.min(s.warnings.len()));
                s.carried_warnings = 0;
            }
            s.add_warning("Error", e.code.errno, e.message.clone());
            if e.code.errno == crate::error::ER_UNKNOWN.errno {
                tracing::warn!(connection = s.connection_id, error = %e.message, sql, "statement failed");
            } else {
                tracing::debug!(connection = s.connection_id, errno = e.code.errno, error = %e.message, "statement failed");
            }
        }
        (kind, result)
    }

    fn execute_inner(
        &self,
        s: &mut Session,
        sql: &str,
        kind: Kind,
    ) -> std::result::Result<Output, WireError> {
        // Account statements are not DDL to the schema log: replicas must
        // not receive their passwords as statement text.
        let (w0, w1) = first_words(sql);
        if crate::accounts::is_account_statement(&w0, &w1) {
            if !crate::accounts::changes_accounts(&w0, &w1) {
                return Ok(crate::accounts::statement(self, s, sql)?);
            }
            self.implicit_commit(s)?;
            let Some(log) = self.schema_log.get() else {
                return Ok(crate::accounts::statement(self, s, sql)?);
            };
            // A cluster node: as a schema change (only the primary runs
            // it; replicas install the resulting list at this position).
            log.check_writable()
                .map_err(|why| ShimError::Storage(ladle_storage::StorageError::ReadOnly(why)))?;
            let out = self.storage.fenced(|| {
                let out = crate::accounts::statement(self, s, sql)?;
                log.record_accounts(&self.accounts.encoded()?);
                Ok::<_, ShimError>(out)
            })?;
            log.acknowledge()
                .map_err(|why| ShimError::Storage(ladle_storage::StorageError::ReadOnly(why)))?;
            return Ok(out);
        }
        crate::privileges::check_sql(self, s, sql)?;
        if kind == Kind::Ddl {
            self.select_cache.invalidate();
            if let Some(log) = self.schema_log.get() {
                log.check_writable().map_err(|why| {
                    ShimError::Storage(ladle_storage::StorageError::ReadOnly(why))
                })?;
                let database = s.database.clone();
                let run = |s: &mut Session| {
                    let out = self.run_statement(s, sql, kind);
                    if out.is_ok() {
                        log.record(database.as_deref(), sql, self.storage.record_carried());
                    } else if let Err(e) = self.storage.withdraw_record() {
                        tracing::error!(error = %e, sql, "withdrawing a failed schema change's record");
                    }
                    out
                };
                let out = match log.prepare(database.as_deref(), sql) {
                    Some((key, value)) => self.storage.fenced_with_record(&key, &value, || run(s)),
                    None => self.storage.fenced(|| run(s)),
                };
                if out.is_ok() {
                    log.acknowledge().map_err(|why| {
                        ShimError::Storage(ladle_storage::StorageError::ReadOnly(why))
                    })?;
                }
                return out;
            }
        }
        self.run_statement(s, sql, kind)
    }

    fn run_statement(
        &self,
        s: &mut Session,
        sql: &str,
        kind: Kind,
    ) -> std::result::Result<Output, WireError> {
        // (In a REPEATABLE READ transaction a locking read is a current
        // read, which only the parsed statement tells: no cached plan.)
        let repeatable = s.transaction.as_ref().is_some_and(|t| t.repeatable_read);
        if kind == Kind::Select && !repeatable {
            if let Some(db) = &s.database {
                let hit = self.select_cache.get(&(db.clone(), sql.to_string()));
                if let Some(pq) = hit {
                    let start = std::time::Instant::now();
                    let rows = self.read_rows(s, &pq, &[], false, false)?;
                    self.metrics
                        .read_seconds
                        .observe(start.elapsed().as_secs_f64());
                    return Ok(Output::Rows {
                        columns: pq.columns().to_vec(),
                        rows,
                    });
                }
            }
        }
        let toks = tokens(sql)?;
        let toks: Vec<Token> = toks
            .into_iter()
            .filter(|t| !matches!(t, Token::SemiColon))
            .collect();
        if toks.is_empty() {
            return Err(ShimError::Parse("Query was empty".into()).into());
        }
        if let Some(out) = crate::admin::route(self.admin.as_ref(), &toks) {
            return out;
        }
        // Statements the shim recognizes from their first words (MySQL
        // forms the SQL parser does not cover).
        if let Some(out) = self.by_keywords(s, &toks)? {
            return Ok(out);
        }
        // `LOCK IN SHARE MODE` (MySQL 5 spelling of FOR SHARE): reads take
        // no locks in Ladle, so it is dropped (the read stays a current
        // read, see `read_rows`).
        let mut share_mode = false;
        let unlocked;
        let sql = match strip_share_mode(sql) {
            Some(x) if kind == Kind::Select => {
                share_mode = has_share_mode(sql);
                unlocked = x;
                unlocked.as_str()
            }
            _ => sql,
        };
        let mut stmts = parse(sql)?;
        if kind == Kind::Select && stmts.len() == 1 {
            if let Some(Statement::Query(q)) = stmts.pop() {
                return Ok(self.select_text(s, &q, sql, share_mode)?);
            }
        }
        let mut last = Output::ok();
        for stmt in stmts {
            last = self.statement(s, stmt)?;
        }
        Ok(last)
    }

    fn by_keywords(
        &self,
        s: &mut Session,
        t: &[Token],
    ) -> std::result::Result<Option<Output>, WireError> {
        let w0 = word(t, 0).unwrap_or_default();
        let w1 = word(t, 1).unwrap_or_default();
        match (w0.as_str(), w1.as_str()) {
            ("SHOW", _) => Ok(Some(catalog::show(self, s, t)?)),
            ("DESCRIBE" | "DESC", _) => {
                let mut i = 1;
                let (db, table) = qualified_name(t, &mut i)
                    .ok_or_else(|| ShimError::Parse("near DESCRIBE".into()))?;
                Ok(Some(catalog::describe(self, s, db, &table, false)?))
            }
            ("EXPLAIN", w)
                if !matches!(
                    w,
                    "SELECT"
                        | "WITH"
                        | ""
                        | "GRAPH"
                        | "FORMAT"
                        | "EXTENDED"
                        | "PARTITIONS"
                        | "ANALYZE"
                ) || matches!(t.get(1), Some(Token::Word(w)) if w.quote_style.is_some()) =>
            {
                let mut i = 1;
                let (db, table) = qualified_name(t, &mut i)
                    .ok_or_else(|| ShimError::Parse("near EXPLAIN".into()))?;
                Ok(Some(catalog::describe(self, s, db, &table, false)?))
            }
            ("EXPLAIN", _) => Ok(Some(self.explain_graph(s, t)?)),
            ("KILL", _) => Ok(Some(self.kill(s, t)?)),
            ("FLUSH", "HOSTS") => {
                self.host_errors.flush();
                Ok(Some(Output::ok()))
            }
            ("LOCK" | "UNLOCK" | "FLUSH" | "ANALYZE" | "OPTIMIZE" | "CHECKSUM", _) => {
                Ok(Some(Output::ok()))
            }
            // ALTER TABLE t DISABLE|ENABLE KEYS (dumps wrap their INSERTs in
            // it): a no-op, as for InnoDB, once the table is known.
            ("ALTER", "TABLE")
                if t.len() >= 4
                    && word(t, t.len() - 1).as_deref() == Some("KEYS")
                    && matches!(word(t, t.len() - 2).as_deref(), Some("DISABLE" | "ENABLE")) =>
            {
                let mut i = 2;
                let (db, table) = qualified_name(t, &mut i)
                    .ok_or_else(|| ShimError::Parse("near ALTER TABLE".into()))?;
                let name = ast::ObjectName(
                    db.into_iter()
                        .chain(std::iter::once(table))
                        .map(ast::Ident::new)
                        .collect(),
                );
                let (db, table) = self.resolve(s, &name)?;
                if self.storage.table(&db, &table).is_none() {
                    return Err(ShimError::UnknownTable {
                        database: db,
                        table,
                    }
                    .into());
                }
                Ok(Some(Output::ok()))
            }
            // Every other ALTER TABLE, and RENAME TABLE (MySQL forms the
            // parser does not know).
            ("ALTER", "TABLE") => {
                self.implicit_commit(s)?;
                let sql = dml::render_tokens(t);
                Ok(Some(crate::alter_table::alter_statement(self, s, &sql)?))
            }
            ("RENAME", "TABLE" | "TABLES") => {
                self.implicit_commit(s)?;
                let sql = dml::render_tokens(t);
                Ok(Some(crate::alter_table::rename_tables(self, s, &sql)?))
            }
            ("SET", "TRANSACTION") => Ok(Some(set_transaction(s, t, false, false)?)),
            // `SET GLOBAL x = v` (the parser knows only `@@global.x`).
            ("SET", "GLOBAL") if word(t, 2).as_deref() != Some("TRANSACTION") => {
                let rest = dml::render_tokens(&t[2..]);
                let mut last = Output::ok();
                for stmt in parse(&format!("SET @@global.{rest}"))? {
                    last = self.statement(s, stmt)?;
                }
                Ok(Some(last))
            }
            // sqlparser does not know `WITH CONSISTENT SNAPSHOT`.
            ("START", "TRANSACTION")
                if t.iter().any(
                    |x| matches!(x, Token::Word(w) if w.value.eq_ignore_ascii_case("CONSISTENT")),
                ) =>
            {
                self.start_transaction(s)?;
                // The read view is taken now, not at the first read (under
                // READ COMMITTED there is none to take, as in InnoDB).
                if let Some(tx) = &s.transaction {
                    tx.read_view(|| self.storage.read_view());
                }
                Ok(Some(Output::ok()))
            }
            ("SET", "SESSION" | "GLOBAL" | "LOCAL")
                if word(t, 2).as_deref() == Some("TRANSACTION") =>
            {
                Ok(Some(set_transaction(s, t, w1 != "GLOBAL", w1 == "GLOBAL")?))
            }
            ("CREATE", "DATABASE" | "SCHEMA") => Ok(Some(ddl::create_database(self, s, t)?)),
            ("DROP", "DATABASE" | "SCHEMA") => Ok(Some(ddl::drop_database(self, s, t)?)),
            ("DROP", "INDEX") => Ok(Some(ddl::drop_index(self, s, t)?)),
            // TRUNCATE [TABLE] name (the parser wants TABLE).
            ("TRUNCATE", _) => {
                let mut i = if w1 == "TABLE" { 2 } else { 1 };
                let (db, table) = qualified_name(t, &mut i)
                    .ok_or_else(|| ShimError::Parse("near TRUNCATE".into()))?;
                self.implicit_commit(s)?;
                let name = ast::ObjectName(
                    db.into_iter()
                        .chain(std::iter::once(table))
                        .map(ast::Ident::new)
                        .collect(),
                );
                dml::truncate(self, s, &name)?;
                Ok(Some(Output::ok()))
            }
            ("UPDATE", _) => {
                // `UPDATE [LOW_PRIORITY] [IGNORE] t ...`: sqlparser would read
                // IGNORE as the table's name.
                let (t, ignore) = dml::strip_update_modifiers(t);
                let (base, order, limit) = match dml::split_update_order_limit(&t) {
                    Some(split) => split,
                    None if ignore => (dml::render_tokens(&t), None, None),
                    None => return Ok(None),
                };
                let stmt = parse(&base)?.into_iter().next();
                let Some(Statement::Update {
                    table,
                    assignments,
                    from: None,
                    selection,
                    ..
                }) = stmt
                else {
                    return Err(ShimError::Unsupported(
                        "this form of UPDATE ... ORDER BY/LIMIT".into(),
                    )
                    .into());
                };
                let order_by = match order {
                    Some(text) => {
                        let mut parser = crate::sqltext::parser(&text)?;
                        let mut order = crate::sqltext::contain_parser_panic(|| {
                            parser.parse_comma_separated(Parser::parse_order_by_expr)
                        })?;
                        ladle_dataflow::bound_depth(&mut order).map_err(|_| ShimError::TooDeep)?;
                        order
                    }
                    None => Vec::new(),
                };
                let limit = match limit {
                    Some(text) => {
                        let x = crate::sqltext::parse_expr(&text)?;
                        match self.eval_constant(s, &x)?.as_i64() {
                            Some(n) if n >= 0 => Some(n as u64),
                            _ => return Err(ShimError::WrongArguments("LIMIT".into()).into()),
                        }
                    }
                    None => None,
                };
                let clauses = dml::UpdateClauses {
                    order_by: &order_by,
                    limit,
                    ignore,
                };
                Ok(Some(dml::update(
                    self,
                    s,
                    table,
                    assignments,
                    selection,
                    clauses,
                )?))
            }
            // `DELETE ... [ORDER BY ...] [LIMIT n] RETURNING ...`: the SQL
            // parser wants RETURNING before ORDER BY, and reads it as the
            // table's alias when there is no WHERE.
            ("DELETE", _) => match dml::split_returning(t) {
                Some((base, items)) => {
                    let stmt = parse(&base)?.into_iter().next();
                    let Some(Statement::Delete(mut d)) = stmt else {
                        return Err(ShimError::Parse("near RETURNING".into()).into());
                    };
                    d.returning = Some(parse_select_items(&items)?);
                    Ok(Some(self.statement(s, Statement::Delete(d))?))
                }
                None => Ok(None),
            },
            ("INSERT" | "REPLACE", _) => match dml::rewrite_insert_set(t) {
                Some(sql) => {
                    let mut last = Output::ok();
                    for stmt in parse(&sql)? {
                        last = self.statement(s, stmt)?;
                    }
                    Ok(Some(last))
                }
                None => Ok(None),
            },
            ("XA", _) => Err(ShimError::Unsupported(w0).into()),
            _ => Ok(None),
        }
    }

    /// `EXPLAIN [GRAPH | FORMAT=TREE|JSON|TRADITIONAL | EXTENDED |
    /// PARTITIONS | ANALYZE] SELECT ...`: the view's dataflow graph, in
    /// the shape the form asks for. TREE (and ANALYZE, which describes
    /// without running) is one row of text in a column named `EXPLAIN`,
    /// JSON the same as a JSON document, TRADITIONAL MySQL's twelve
    /// columns with one graph node per row in `Extra` (also for EXTENDED
    /// and PARTITIONS); plain EXPLAIN and EXPLAIN GRAPH one node per row in
    /// a `GRAPH` column.
    fn explain_graph(&self, s: &mut Session, t: &[Token]) -> Result<Output> {
        let mut skip = 1;
        let mut format = ExplainFormat::Graph;
        loop {
            match word(t, skip).as_deref() {
                Some("GRAPH") => skip += 1,
                Some("EXTENDED" | "PARTITIONS") => {
                    format = ExplainFormat::Traditional;
                    skip += 1;
                }
                Some("ANALYZE") => {
                    format = ExplainFormat::Tree;
                    skip += 1;
                }
                Some("FORMAT") if matches!(t.get(skip + 1), Some(Token::Eq)) => {
                    format = match word(t, skip + 2).as_deref() {
                        Some("TREE") => ExplainFormat::Tree,
                        Some("JSON") => ExplainFormat::Json,
                        Some("TRADITIONAL" | "TEXT") => ExplainFormat::Traditional,
                        other => {
                            return Err(ShimError::Parse(format!(
                                "unknown EXPLAIN format {}",
                                other.unwrap_or_default()
                            )))
                        }
                    };
                    skip += 3;
                }
                _ => break,
            }
        }
        let sql: String = t[skip..]
            .iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(" ");
        let stmt = parse(&sql)?
            .into_iter()
            .next()
            .ok_or_else(|| ShimError::Parse("empty EXPLAIN".into()))?;
        let Statement::Query(q) = stmt else {
            return Err(ShimError::Unsupported(
                "EXPLAIN of a non-SELECT statement".into(),
            ));
        };
        let db = self.query_database(s, &q)?;
        let text = self.dataflow.explain_graph(&db, &q)?;
        let text_column = || column("EXPLAIN", SqlType::Text(65535));
        Ok(match format {
            ExplainFormat::Graph => Output::Rows {
                columns: vec![column("GRAPH", SqlType::Text(65535))],
                rows: text.lines().map(|l| vec![Value::text(l)]).collect(),
            },
            ExplainFormat::Tree => Output::Rows {
                columns: vec![text_column()],
                rows: vec![vec![Value::text(&text)]].into(),
            },
            ExplainFormat::Json => {
                let doc = serde_json::json!({
                    "query_block": {
                        "select_id": 1,
                        "ladle_view": { "graph": text.lines().collect::<Vec<_>>() }
                    }
                });
                Output::Rows {
                    columns: vec![text_column()],
                    rows: vec![vec![Value::text(doc.to_string())]].into(),
                }
            }
            ExplainFormat::Traditional => {
                const COLUMNS: [&str; 12] = [
                    "id",
                    "select_type",
                    "table",
                    "partitions",
                    "type",
                    "possible_keys",
                    "key",
                    "key_len",
                    "ref",
                    "rows",
                    "filtered",
                    "Extra",
                ];
                let columns = COLUMNS
                    .iter()
                    .map(|n| column(n, SqlType::VarChar(255)))
                    .collect();
                let rows = text
                    .lines()
                    .map(|l| {
                        let mut row = vec![Value::Int(1), Value::text("SIMPLE")];
                        row.extend(std::iter::repeat_n(Value::Null, 9));
                        row.push(Value::text(l));
                        row
                    })
                    .collect();
                Output::Rows { columns, rows }
            }
        })
    }

    /// Runs one parsed statement.
    pub fn statement(&self, s: &mut Session, stmt: Statement) -> Result<Output> {
        match stmt {
            Statement::Query(q) => self.select(s, &q),
            // UPDATE ... RETURNING: MariaDB has no such statement (a syntax
            // error there); refused before it runs.
            Statement::Update {
                returning: Some(_), ..
            } => Err(ShimError::Unsupported("UPDATE ... RETURNING".into())),
            Statement::Insert(ins) => dml::insert(self, s, ins),
            Statement::Update {
                table,
                assignments,
                from,
                selection,
                ..
            } => {
                if from.is_some() {
                    return Err(ShimError::Unsupported("UPDATE ... FROM".into()));
                }
                dml::update(self, s, table, assignments, selection, Default::default())
            }
            Statement::Delete(d) => dml::delete(self, s, d),
            Statement::Truncate { table_names, .. } => {
                let mut n = 0;
                for t in table_names {
                    n += dml::truncate(self, s, &t.name)?;
                }
                let _ = n;
                Ok(Output::ok())
            }
            Statement::CreateTable(ct) => {
                self.implicit_commit(s)?;
                ddl::create_table(self, s, ct)
            }
            Statement::CreateIndex(ci) => {
                self.implicit_commit(s)?;
                ddl::create_index(self, s, ci)
            }
            Statement::AlterTable {
                name, operations, ..
            } => {
                self.implicit_commit(s)?;
                let ops = operations.into_iter().map(crate::alter::Op::Parsed);
                crate::alter_table::alter_table(self, s, &name, ops.collect())
            }
            Statement::Drop {
                object_type,
                if_exists,
                names,
                ..
            } => {
                self.implicit_commit(s)?;
                ddl::drop(self, s, object_type, if_exists, names)
            }
            Statement::CreateView {
                or_replace,
                name,
                query,
                ..
            } => {
                self.implicit_commit(s)?;
                let (db, view) = self.resolve(s, &name)?;
                // The dataflow stores and re-parses the query's text.
                let query = crate::sqltext::display_safe(&query);
                self.dataflow.create_view(&db, &view, &query, or_replace)?;
                // The definition text, for SHOW CREATE VIEW and
                // information_schema.VIEWS.
                self.storage
                    .put_meta(&view_meta_key(&db, &view), query.to_string().as_bytes())?;
                Ok(Output::ok())
            }
            Statement::CreateDatabase {
                db_name,
                if_not_exists,
                ..
            } => {
                self.storage
                    .create_database(&last_part(&db_name), if_not_exists)?;
                Ok(Output::affected(1))
            }
            Statement::CreateSchema {
                schema_name,
                if_not_exists,
            } => {
                self.storage
                    .create_database(schema_name.to_string().trim_matches('`'), if_not_exists)?;
                Ok(Output::affected(1))
            }
            Statement::Use(u) => {
                let name = match u {
                    ast::Use::Object(n) | ast::Use::Database(n) | ast::Use::Schema(n) => {
                        last_part(&n)
                    }
                    _ => return Err(ShimError::Unsupported("this form of USE".into())),
                };
                self.use_database(s, &name)?;
                Ok(Output::ok())
            }
            Statement::StartTransaction { .. } => {
                self.start_transaction(s)?;
                Ok(Output::ok())
            }
            Statement::Commit { .. } => self.commit(s),
            Statement::Savepoint { name } => {
                // Outside a transaction a savepoint ends with its statement.
                if let Some(tx) = &mut s.transaction {
                    tx.savepoint(&name.value);
                }
                Ok(Output::ok())
            }
            Statement::ReleaseSavepoint { name } => {
                on_savepoint(s, name.value, Transaction::release)
            }
            Statement::Rollback {
                savepoint: Some(name),
                ..
            } => on_savepoint(s, name.value, Transaction::rollback_to),
            Statement::Rollback {
                savepoint: None, ..
            } => {
                s.transaction = None;
                if !s.autocommit {
                    s.begin_transaction();
                }
                Ok(Output::ok())
            }
            Statement::SetNames { .. } | Statement::SetNamesDefault {} => Ok(Output::ok()),
            Statement::SetTransaction { .. } => Ok(Output::ok()),
            Statement::SetTimeZone { .. } => Ok(Output::ok()),
            Statement::SetVariable {
                variables, value, ..
            } => {
                let names: Vec<ast::ObjectName> = match variables {
                    ast::OneOrManyWithParens::One(n) => vec![n],
                    ast::OneOrManyWithParens::Many(v) => v,
                };
                for (n, v) in names.iter().zip(value.iter()) {
                    self.set_variable(s, n, v)?;
                }
                Ok(Output::ok())
            }
            Statement::Kill { .. } => Err(ShimError::Unsupported("KILL".into())),
            other => Err(ShimError::Unsupported(statement_name(&other))),
        }
    }

    /// `KILL [CONNECTION | QUERY] id` (see [`crate::processes`]).
    fn kill(&self, s: &mut Session, t: &[Token]) -> Result<Output> {
        let (connection, from) = match word(t, 1).as_deref() {
            Some("QUERY") => (false, 2),
            Some("CONNECTION") => (true, 2),
            _ => (true, 1),
        };
        let text = dml::render_tokens(&t[from..]);
        let id = self
            .eval_constant(s, &crate::sqltext::parse_whole_expr(&text)?)?
            .as_i64()
            .and_then(|i| u64::try_from(i).ok())
            .ok_or_else(|| ShimError::WrongArguments("KILL".into()))?;
        let any = crate::privileges::has_global(self, s, crate::accounts::SUPER);
        let wire = |code, message| ShimError::Wire(WireError { code, message });
        match self.processes.kill(id, &s.user, any, connection) {
            Err(crate::processes::KillError::Unknown) => Err(wire(
                crate::error::ER_NO_SUCH_THREAD,
                format!("Unknown thread id: {id}"),
            )),
            Err(crate::processes::KillError::NotOwner) => Err(wire(
                crate::error::ER_KILL_DENIED,
                format!("You are not owner of thread {id}"),
            )),
            // Killing one's own connection answers as MariaDB does.
            Ok(()) if connection && id == u64::from(s.connection_id) => Err(wire(
                crate::error::ER_CONNECTION_KILLED,
                "Connection was killed".into(),
            )),
            Ok(()) => Ok(Output::ok()),
        }
    }

    /// Switches the session's current database (USE, COM_INIT_DB).
    pub fn use_database(&self, s: &mut Session, name: &str) -> Result<()> {
        let known = name.eq_ignore_ascii_case("information_schema")
            || self.storage.databases().iter().any(|d| d == name);
        crate::privileges::check_use(self, s, name)?;
        if !known {
            return Err(ShimError::UnknownDatabase(name.to_string()));
        }
        s.database = Some(name.to_string());
        Ok(())
    }

    /// BEGIN / START TRANSACTION: commits the open transaction and opens
    /// one. An idle one (autocommit = 0, nothing done yet) is kept: it is
    /// the transaction starting, with the level set for it.
    fn start_transaction(&self, s: &mut Session) -> Result<()> {
        let idle = s
            .transaction
            .as_ref()
            .is_some_and(|t| t.ops.is_empty() && t.read_view.get().is_none());
        if !idle || s.autocommit {
            self.commit(s)?;
            s.begin_transaction();
        }
        Ok(())
    }

    /// COMMIT: submits the buffered ops as one atomic write.
    pub fn commit(&self, s: &mut Session) -> Result<Output> {
        let tx = s.transaction.take();
        if !s.autocommit {
            s.begin_transaction();
        }
        if let Some(tx) = tx {
            if !tx.ops.is_empty() {
                let start = std::time::Instant::now();
                let check = crate::foreign_keys::commit_check(self, s, &tx.ops)?;
                let res = self.storage.write_checked(tx.ops, check)?;
                s.wrote(res.lsn);
                self.metrics
                    .commit_seconds
                    .observe(start.elapsed().as_secs_f64());
                if let Some(id) = res.ops.iter().filter_map(|o| o.last_insert_id).next() {
                    s.last_insert_id = id;
                }
            }
        }
        Ok(Output::ok())
    }

    /// DDL commits an open transaction first, as in MySQL.
    fn implicit_commit(&self, s: &mut Session) -> Result<()> {
        if s.in_transaction() {
            self.commit(s)?;
        }
        Ok(())
    }

    fn set_variable(&self, s: &mut Session, name: &ast::ObjectName, value: &Expr) -> Result<()> {
        let parts: Vec<String> = name.0.iter().map(|i| i.value.clone()).collect();
        let full = parts.join(".");
        // User variable.
        if let Some(u) = full.strip_prefix('@').filter(|u| !u.starts_with('@')) {
            let v = self.eval_constant(s, value)?;
            s.user_variables.insert(u.to_ascii_lowercase(), v);
            return Ok(());
        }
        let mut var = full.trim_start_matches("@@").to_ascii_lowercase();
        for scope in ["session.", "global.", "local."] {
            if let Some(rest) = var.strip_prefix(scope) {
                var = rest.to_string();
            }
        }
        let v = match value {
            // SET x = ON / OFF / DEFAULT / an identifier value.
            Expr::Identifier(id) if !id.value.starts_with('@') => Value::text(id.value.clone()),
            other => self.eval_constant(s, other)?,
        };
        if crate::vars::SECURITY_VARIABLES.contains(&var.as_str()) {
            let global = full.to_ascii_lowercase().starts_with("@@global.");
            return self.set_security_variable(&var, &v, global);
        }
        if var == "autocommit" {
            let on = match &v {
                Value::Text(t) => match t.to_ascii_uppercase().as_str() {
                    "ON" | "1" | "TRUE" => true,
                    "OFF" | "0" | "FALSE" => false,
                    _ => return Err(ShimError::WrongValueForVar(var, t.to_string())),
                },
                other => crate::vars::truth(other)
                    .ok_or_else(|| ShimError::WrongValueForVar(var.clone(), "NULL".into()))?,
            };
            if on && !s.autocommit {
                // Enabling autocommit commits the open transaction.
                s.autocommit = true;
                self.commit(s)?;
                s.transaction = None;
            } else if !on && s.autocommit {
                s.autocommit = false;
                if s.transaction.is_none() {
                    s.begin_transaction();
                }
            }
            return Ok(());
        }
        if var == "transaction_isolation" || var == "tx_isolation" {
            let level = match &v {
                Value::Text(t) if t.eq_ignore_ascii_case("DEFAULT") => "READ-COMMITTED",
                Value::Text(t) => isolation_level_name(t)?,
                other => return Err(ShimError::WrongValueForVar(var, other.to_string())),
            };
            // `SET @@transaction_isolation` without a scope is for the next
            // transaction only (MySQL's special case); the session keeps
            // its level.
            let next_only = full.starts_with("@@") && !full.contains('.');
            if next_only {
                set_next_isolation(s, level)?;
            } else {
                set_session_isolation(s, level);
            }
            return Ok(());
        }
        if var == ReadConsistency::VARIABLE {
            if let Value::Text(t) = &v {
                if let Some(c) = ReadConsistency::parse(t) {
                    s.variables.insert(var, Value::text(c.as_str()));
                    return Ok(());
                }
            }
            if !matches!(&v, Value::Text(t) if t.eq_ignore_ascii_case("DEFAULT")) {
                let shown = v.to_string();
                return Err(ShimError::WrongValueForVar(var, shown));
            }
        }
        let v = match v {
            Value::Text(t) if t.eq_ignore_ascii_case("DEFAULT") => {
                s.variables.remove(&var);
                return Ok(());
            }
            other => other,
        };
        if let Some(&(_, low, high)) = crate::vars::SESSION_TIMEOUTS.iter().find(|t| t.0 == var) {
            // Whole seconds, clamped to the variable's range as MySQL does.
            let secs = match &v {
                Value::Int(i) => i128::from(*i),
                Value::UInt(u) => i128::from(*u),
                other => return Err(ShimError::WrongValueForVar(var, other.to_string())),
            };
            let secs = secs.clamp(i128::from(low), i128::from(high)) as i64;
            s.variables.insert(var, Value::Int(secs));
            return Ok(());
        }
        if var == "connect_timeout" {
            return Err(ShimError::ReadOnlyVariable(var));
        }
        s.variables.insert(var, v);
        Ok(())
    }

    /// Evaluates an expression that refers to no table.
    /// `SET GLOBAL require_secure_transport | max_connect_errors |
    /// max_prepared_stmt_count = v`
    /// (SUPER was checked with the statement; see [`crate::privileges`]).
    fn set_security_variable(&self, var: &str, v: &Value, global: bool) -> Result<()> {
        use std::sync::atomic::Ordering::SeqCst;
        if !global {
            return Err(ShimError::Wire(WireError {
                code: crate::error::ER_GLOBAL_VARIABLE,
                message: format!(
                    "Variable '{var}' is a GLOBAL variable and should be set with SET GLOBAL"
                ),
            }));
        }
        let wrong = || ShimError::WrongValueForVar(var.to_string(), v.to_string());
        let g = &self.facts.security;
        if var == "require_secure_transport" {
            let on = match v {
                Value::Text(t) => match t.to_ascii_uppercase().as_str() {
                    "ON" | "TRUE" | "1" => true,
                    "OFF" | "FALSE" | "0" | "DEFAULT" => false,
                    _ => return Err(wrong()),
                },
                other => crate::vars::truth(other).ok_or_else(wrong)?,
            };
            g.require_secure_transport.store(on, SeqCst);
        } else {
            let (default, min, max, target) = if var == "max_prepared_stmt_count" {
                (
                    crate::vars::MAX_PREPARED_STMT_COUNT_DEFAULT,
                    0,
                    1_048_576,
                    &g.max_prepared_stmt_count,
                )
            } else {
                (100, 1, u64::MAX, &g.max_connect_errors)
            };
            let n = match v {
                Value::Int(i) => u64::try_from(*i).map_err(|_| wrong())?,
                Value::UInt(u) => *u,
                Value::Text(t) if t.eq_ignore_ascii_case("DEFAULT") => default,
                _ => return Err(wrong()),
            };
            // Out-of-range values are clamped, as MySQL does.
            target.store(n.clamp(min, max), SeqCst);
        }
        Ok(())
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
        }
    }

    /// A view read for the session. Inside a transaction that wrote to a
    /// table the query reads, the answer is computed over committed state
    /// plus the transaction's own writes (read-your-own-writes); under
    /// REPEATABLE READ over the transaction's read view instead, unless the
    /// read is a `locking` one (`FOR UPDATE`, `LOCK IN SHARE MODE`), which
    /// InnoDB answers from the latest rows (a "current read"); otherwise it
    /// is the view's reader lookup. A read whose WHERE is `impossible`
    /// (see [`crate::impossible`]) does not take the read view.
    fn read_rows(
        &self,
        s: &Session,
        pq: &PreparedQuery,
        params: &[Value],
        locking: bool,
        impossible: bool,
    ) -> Result<ResultRows> {
        self.await_session_writes(s).map_err(ShimError::Wire)?;
        if let Some(view) = s
            .transaction
            .as_ref()
            .filter(|tx| !(locking || impossible && tx.read_view.get().is_none()))
            .and_then(|tx| tx.read_view(|| self.storage.read_view()))
        {
            let tables = pq.tables();
            // A table created or altered since the view was taken cannot
            // be read in it: InnoDB's 1412 (the client retries).
            for &t in &tables {
                let now = self.storage.table_by_id(t).map(|x| x.version);
                if view.schema(t).map(|x| x.version) != now {
                    return Err(ShimError::Wire(WireError {
                        code: crate::error::ER_TABLE_DEF_CHANGED,
                        message: "Table definition has changed, please retry transaction".into(),
                    }));
                }
            }
            let overlay = crate::dml::snapshot_overlay(self, s, &tables, view)?;
            return Ok(pq.execute_snapshot(params, view, &overlay)?.into());
        }
        if s.in_transaction() {
            let overlay = crate::dml::transaction_overlay(self, s, &pq.tables())?;
            if !overlay.is_empty() {
                return Ok(pq.execute_overlay(params, &overlay)?.into());
            }
        }
        Ok(pq.read_after(params, self.read_lsn(s))?)
    }

    /// The writes a read by `s` must see: up to the session's last write
    /// (read-your-writes) or every acknowledged one.
    fn read_lsn(&self, s: &Session) -> ladle_common::Lsn {
        match ReadConsistency::of(s, &self.facts) {
            ReadConsistency::Session => s.last_write_lsn,
            ReadConsistency::Strong => ladle_common::Lsn::MAX,
        }
    }

    /// SELECT: session-only queries are answered here, information_schema
    /// from the catalog, everything else by a dataflow view.
    pub fn select(&self, s: &mut Session, q: &ast::Query) -> Result<Output> {
        self.select_cached(s, q, None, false)
    }

    /// A SELECT inside a write (`INSERT ... SELECT`, a subquery of
    /// UPDATE/DELETE): InnoDB reads its rows with locks, so from the latest
    /// state even under REPEATABLE READ, as the write itself does.
    pub fn select_for_write(&self, s: &mut Session, q: &ast::Query) -> Result<Output> {
        self.select_cached(s, q, None, true)
    }

    /// A text SELECT: like [`Engine::select`], remembering the view.
    fn select_text(
        &self,
        s: &mut Session,
        q: &ast::Query,
        sql: &str,
        share_mode: bool,
    ) -> Result<Output> {
        self.select_cached(s, q, Some(sql), share_mode)
    }

    /// `locking`: the text asked for a locking read (`LOCK IN SHARE MODE`,
    /// stripped before parsing); `FOR UPDATE`/`FOR SHARE` are in `q`.
    fn select_cached(
        &self,
        s: &mut Session,
        q: &ast::Query,
        sql: Option<&str>,
        locking: bool,
    ) -> Result<Output> {
        let locking = locking || !q.locks.is_empty();
        let stripped;
        let q = match without_dual(q) {
            Some(x) => {
                stripped = x;
                &stripped
            }
            None => q,
        };
        if let Some(out) = self.session_select(s, q)? {
            return Ok(out);
        }
        if catalog::is_information_schema_query(s, q) {
            return catalog::information_schema_select(self, s, q);
        }
        let q = strip_locks(q);
        let db = self.query_database(s, &q)?;
        let start = std::time::Instant::now();
        // A view with the clock fixed answers this statement only: it is
        // dropped after the read, not remembered for the text.
        let (pq, clock_fixed) = match self.dataflow.prepare(&db, &q) {
            Err(err) if err.is_volatile_refusal() => match crate::clock::fix_clock(self, s, &q)? {
                Some(fixed) => (self.dataflow.prepare(&db, &fixed)?, true),
                None => return Err(err.into()),
            },
            other => (other?, false),
        };
        let impossible = takes_read_view(s) && crate::impossible::select_is_impossible(&q, &[]);
        let rows = self.read_rows(s, &pq, &[], locking, impossible);
        if clock_fixed {
            // Its literals are this moment's: no later statement reads it.
            self.dataflow.discard(&pq);
        }
        let rows = rows?;
        if let (Some(sql), Some(current), false) = (sql, &s.database, clock_fixed) {
            self.remember_select((current.clone(), sql.to_string()), &pq);
        }
        self.metrics
            .read_seconds
            .observe(start.elapsed().as_secs_f64());
        Ok(Output::Rows {
            columns: pq.columns().to_vec(),
            rows,
        })
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

    fn session_select(&self, s: &mut Session, q: &ast::Query) -> Result<Option<Output>> {
        let SetExpr::Select(sel) = q.body.as_ref() else {
            return Ok(None);
        };
        if !sel.from.is_empty()
            || sel.selection.is_some()
            || sel.having.is_some()
            || q.with.is_some()
        {
            return Ok(None);
        }
        let ctx = EvalContext {
            session: s,
            facts: &self.facts,
            columns: &[],
            row: &[],
        };
        let mut columns = Vec::new();
        let mut row = Vec::new();
        for item in &sel.projection {
            let (expr, name) = match item {
                SelectItem::UnnamedExpr(e) => (e, ladle_dataflow::expr_column_name(e)),
                SelectItem::ExprWithAlias { expr, alias } => (expr, alias.value.clone()),
                _ => return Ok(None),
            };
            let v = match ctx.eval(expr) {
                Ok(v) => v,
                // Not a constant expression: a query for the view engine
                // itself (it reports what it cannot do).
                Err(EvalError::Compile(_)) => return Ok(None),
                Err(EvalError::Eval(err)) => return Err(err.into()),
                Err(EvalError::UnknownVariable(n)) => return Err(ShimError::UnknownVariable(n)),
                Err(EvalError::UnknownColumn(c)) => {
                    return Err(ShimError::UnknownColumn(c, "field list".into()))
                }
            };
            let ty = match &v {
                Value::Int(_) => SqlType::Int {
                    bytes: 8,
                    unsigned: false,
                    display_width: None,
                },
                Value::UInt(_) => SqlType::Int {
                    bytes: 8,
                    unsigned: true,
                    display_width: None,
                },
                Value::Double(_) => SqlType::Double,
                Value::Decimal(d) => SqlType::Decimal {
                    precision: 65,
                    scale: d.scale().min(30) as u8,
                },
                Value::Bytes(_) => SqlType::VarBinary(65535),
                Value::Date(_) => SqlType::Date,
                Value::DateTime(_) => SqlType::DateTime { fsp: 0 },
                Value::Time(_) => SqlType::Time { fsp: 0 },
                _ => SqlType::VarChar(255),
            };
            columns.push(OutputColumn {
                name,
                table: String::new(),
                origin: None,
                ty,
                nullable: v.is_null(),
            });
            row.push(v);
        }
        Ok(Some(Output::Rows {
            columns,
            rows: vec![row].into(),
        }))
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

    /// Plans a statement for COM_STMT_PREPARE.
    pub fn prepare(&self, s: &mut Session, sql: &str) -> Result<(u32, usize, Vec<OutputColumn>)> {
        let limit = self
            .facts
            .security
            .max_prepared_stmt_count
            .load(std::sync::atomic::Ordering::SeqCst);
        if crate::session::prepared_statement_count() as u64 >= limit {
            return Err(ShimError::Wire(WireError {
                code: crate::error::ER_MAX_PREPARED_STMT_COUNT_REACHED,
                message: format!(
                    "Can't create more than max_prepared_stmt_count statements (current value: {limit})"
                ),
            }));
        }
        let opened = crate::sqltext::open_versioned_comments(sql);
        let sql = opened.as_ref();
        let unlocked = if classify(sql) == Kind::Select {
            strip_share_mode(sql)
        } else {
            None
        };
        let share_mode = unlocked.is_some() && has_share_mode(sql);
        let sql = unlocked.as_deref().unwrap_or(sql);
        let marks = crate::params::placeholders(sql);
        // Account statements have their own grammar (`'u'@'h'`, which the
        // SQL tokenizer refuses): checked and run at execution.
        let (w0, w1) = first_words(sql);
        if crate::accounts::is_account_statement(&w0, &w1) {
            let n = marks.len();
            let id = s.add_statement(PreparedStatement::Other {
                sql: sql.to_string(),
                marks,
            });
            return Ok((id, n, Vec::new()));
        }
        let first = tokens(sql)?;
        crate::privileges::check_sql(self, s, sql)?;
        let is_select = matches!(word(&first, 0).as_deref(), Some("SELECT" | "WITH"))
            || matches!(first.first(), Some(Token::LParen));
        if is_select {
            if let Ok(stmts) = parse(sql) {
                if let [Statement::Query(q)] = stmts.as_slice() {
                    let session_only = marks.is_empty() && self.session_select(s, q)?.is_some();
                    if !session_only && !catalog::is_information_schema_query(s, q) {
                        let locking = share_mode || !q.locks.is_empty();
                        let q = strip_locks(q);
                        let db = self.query_database(s, &q)?;
                        let generation = self.select_cache.generation();
                        match self.dataflow.prepare(&db, &q) {
                            Ok(pq) => {
                                let cols = pq.columns().to_vec();
                                let n = pq.param_count();
                                let id = s.add_statement(PreparedStatement::Select {
                                    query: pq,
                                    sql: sql.to_string(),
                                    generation,
                                    locking,
                                });
                                return Ok((id, n, cols));
                            }
                            // A shape the view engine cannot parameterize
                            // (e.g. a range over `?`): plan it per execution
                            // with the values substituted as literals.
                            Err(ladle_dataflow::DataflowError::Unsupported(what)) => {
                                tracing::debug!(%what, "prepared SELECT re-planned per execution");
                            }
                            Err(e) => return Err(e.into()),
                        }
                    }
                }
            }
        }
        // Validate the syntax now with NULLs for the parameters, so a
        // malformed statement fails at PREPARE as in MySQL.
        let probe = crate::params::substitute(sql, &marks, &vec![Value::Null; marks.len()]);
        if !matches!(
            word(&first, 0).as_deref(),
            Some(
                "SHOW"
                    | "DESCRIBE"
                    | "DESC"
                    | "EXPLAIN"
                    | "CREATE"
                    | "DROP"
                    | "LOCK"
                    | "UNLOCK"
                    | "SET"
            )
        ) {
            parse(&probe)?;
        }
        let n = marks.len();
        let id = s.add_statement(PreparedStatement::Other {
            sql: sql.to_string(),
            marks,
        });
        Ok((id, n, Vec::new()))
    }

    /// Plans prepared SELECT `id` again from its SQL after DDL, keeping
    /// its id (the client's handle) and the session's current database.
    fn reprepare(&self, s: &mut Session, id: u32, sql: &str) -> Result<PreparedQuery> {
        let generation = self.select_cache.generation();
        let parsed = parse(sql)?;
        let [Statement::Query(q)] = parsed.as_slice() else {
            return Err(ShimError::Internal(
                "a prepared SELECT no longer parses as one".into(),
            ));
        };
        let locking = matches!(
            s.statements.get(&id),
            Some(PreparedStatement::Select { locking: true, .. })
        );
        let q = strip_locks(q);
        let db = self.query_database(s, &q)?;
        let query = self.dataflow.prepare(&db, &q)?;
        s.statements.insert(
            id,
            PreparedStatement::Select {
                query: query.clone(),
                sql: sql.to_string(),
                generation,
                locking,
            },
        );
        Ok(query)
    }

    /// Runs a prepared statement with its parameter values.
    /// Prepared SELECT `id` answered only if that needs no blocking: its
    /// plan is current, the transaction (if any) has written nothing, and
    /// the view holds every key the read needs, with the writes the read
    /// must see applied (see [`PreparedQuery::read_cached`]). `None`: run
    /// [`Engine::execute_prepared`] on a blocking thread instead.
    pub fn execute_prepared_cached(
        &self,
        s: &mut Session,
        id: u32,
        params: &[Value],
    ) -> Option<(Kind, std::result::Result<Output, WireError>)> {
        let Some(PreparedStatement::Select {
            query, generation, ..
        }) = s.statements.get(&id)
        else {
            return None;
        };
        if *generation != self.select_cache.generation() || !self.reads_shared_views_now(s) {
            return None;
        }
        let query = query.clone();
        let start = std::time::Instant::now();
        let res = query.read_cached(params, self.read_lsn(s))?;
        s.clear_warnings();
        Some(self.finish_read(s, &query, start, res.map_err(ShimError::from)))
    }

    /// A prepared SELECT's reply: an error is also SHOW WARNINGS' entry.
    fn finish_read(
        &self,
        s: &mut Session,
        query: &PreparedQuery,
        start: std::time::Instant,
        res: Result<ResultRows>,
    ) -> (Kind, std::result::Result<Output, WireError>) {
        let res = res.map_err(WireError::from);
        s.row_count = -1;
        if let Err(err) = &res {
            s.add_warning("Error", err.code.errno, err.message.clone());
        }
        self.metrics
            .read_seconds
            .observe(start.elapsed().as_secs_f64());
        (
            Kind::Select,
            res.map(|rows| Output::Rows {
                columns: query.columns().to_vec(),
                rows,
            }),
        )
    }

    pub fn execute_prepared(
        &self,
        s: &mut Session,
        id: u32,
        params: &[Value],
    ) -> (Kind, std::result::Result<Output, WireError>) {
        match s.statements.get(&id) {
            None => (Kind::Other, Err(ShimError::UnknownStatement(id).into())),
            Some(PreparedStatement::Select { sql, .. }) if s.forwarded_transaction => {
                // The open transaction is the primary's: read there.
                let marks = crate::params::placeholders(sql);
                if params.len() != marks.len() {
                    let e = ShimError::ParamCount {
                        expected: marks.len(),
                        got: params.len(),
                    };
                    return (Kind::Select, Err(e.into()));
                }
                let text = crate::params::substitute(sql, &marks, params);
                self.execute(s, &text)
            }
            Some(PreparedStatement::Select {
                query,
                sql,
                generation,
                locking,
            }) => {
                let locking = *locking;
                if let Err(e) = crate::privileges::check_sql(self, s, sql) {
                    return (Kind::Select, Err(e.into()));
                }
                let impossible = takes_read_view(s)
                    && matches!(
                        parse(sql).as_deref(),
                        Ok([Statement::Query(q)]) if crate::impossible::select_is_impossible(q, params)
                    );
                let query = if *generation == self.select_cache.generation() {
                    query.clone()
                } else {
                    match self.reprepare(s, id, &sql.clone()) {
                        Ok(q) => q,
                        Err(e) => return (Kind::Select, Err(e.into())),
                    }
                };
                if params.len() != query.param_count() {
                    let e = ShimError::ParamCount {
                        expected: query.param_count(),
                        got: params.len(),
                    };
                    return (Kind::Select, Err(e.into()));
                }
                s.clear_warnings();
                let start = std::time::Instant::now();
                let _deadline = select_deadline(s);
                let res = self.read_rows(s, &query, params, locking, impossible);
                self.finish_read(s, &query, start, res)
            }
            Some(PreparedStatement::Other { sql, marks }) => {
                if params.len() != marks.len() {
                    let e = ShimError::ParamCount {
                        expected: marks.len(),
                        got: params.len(),
                    };
                    return (Kind::Other, Err(e.into()));
                }
                let text = crate::params::substitute(sql, marks, params);
                self.execute(s, &text)
            }
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

/// `sql` without a trailing `LOCK IN SHARE MODE` or a `SQL_NO_CACHE` hint,
/// if it has either.
fn strip_share_mode(sql: &str) -> Option<String> {
    match strip_cache_hint(sql) {
        Some(x) => Some(strip_lock_in_share_mode(&x).unwrap_or(x)),
        None => strip_lock_in_share_mode(sql),
    }
}

/// `SELECT SQL_NO_CACHE ...` (or `SQL_CACHE`; dumps send
/// `SELECT /*!40001 SQL_NO_CACHE */ ...`) without the hint: there is no
/// query cache to skip or use.
fn strip_cache_hint(sql: &str) -> Option<String> {
    let rest = sql.trim_start();
    let after_select = rest
        .get(..6)
        .filter(|w| w.eq_ignore_ascii_case("SELECT"))
        .map(|_| &rest[6..])
        .filter(|r| r.starts_with(char::is_whitespace))?;
    let hint_at = after_select.trim_start();
    let hint_len = hint_at.find(char::is_whitespace)?;
    let hint = &hint_at[..hint_len];
    (hint.eq_ignore_ascii_case("SQL_NO_CACHE") || hint.eq_ignore_ascii_case("SQL_CACHE"))
        .then(|| format!("SELECT {}", &hint_at[hint_len..]))
}

/// Whether `sql` ends with `LOCK IN SHARE MODE` (a locking read).
fn has_share_mode(sql: &str) -> bool {
    strip_lock_in_share_mode(strip_cache_hint(sql).as_deref().unwrap_or(sql)).is_some()
}

fn strip_lock_in_share_mode(sql: &str) -> Option<String> {
    let trimmed = sql.trim_end().trim_end_matches(';').trim_end();
    let words: Vec<&str> = trimmed.rsplitn(5, char::is_whitespace).collect();
    if words.len() == 5
        && words[..4]
            .iter()
            .rev()
            .map(|w| w.to_ascii_uppercase())
            .eq(["LOCK", "IN", "SHARE", "MODE"])
    {
        Some(words[4].to_string())
    } else {
        None
    }
}

/// Whether the session's next consistent read takes its transaction's
/// REPEATABLE READ view (none taken yet).
fn takes_read_view(s: &Session) -> bool {
    s.transaction
        .as_ref()
        .is_some_and(|t| t.repeatable_read && t.read_view.get().is_none())
}

/// `SELECT ... FROM DUAL` as the same query without FROM.
fn without_dual(q: &ast::Query) -> Option<ast::Query> {
    let SetExpr::Select(sel) = q.body.as_ref() else {
        return None;
    };
    let [tw] = sel.from.as_slice() else {
        return None;
    };
    match &tw.relation {
        TableFactor::Table {
            name, alias: None, ..
        } if tw.joins.is_empty()
            && name.0.len() == 1
            && name.0[0].quote_style.is_none()
            && name.0[0].value.eq_ignore_ascii_case("dual") =>
        {
            let mut q = q.clone();
            if let SetExpr::Select(sel) = q.body.as_mut() {
                sel.from.clear();
            }
            Some(q)
        }
        _ => None,
    }
}

fn strip_locks(q: &ast::Query) -> ast::Query {
    let mut q = q.clone();
    q.locks.clear();
    q
}

/// The last part of a (possibly qualified) name.
pub fn last_part(n: &ast::ObjectName) -> String {
    n.0.last().map(|i| i.value.clone()).unwrap_or_default()
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

/// RELEASE / ROLLBACK TO savepoint `name` of the open transaction (`op`
/// says whether it had one); 1305 if there is none of that name.
fn on_savepoint(
    s: &mut Session,
    name: String,
    op: fn(&mut Transaction, &str) -> bool,
) -> Result<Output> {
    if s.transaction.as_mut().is_some_and(|tx| op(tx, &name)) {
        Ok(Output::ok())
    } else {
        Err(ShimError::NoSuchSavepoint(name))
    }
}

/// `SET [SESSION|GLOBAL] TRANSACTION ISOLATION LEVEL ... | READ ONLY |
/// READ WRITE`: checks the level is one Ladle provides and, for the
/// session, shows it in `@@transaction_isolation`. (Without SESSION the
/// level is for the next transaction only; Ladle's one level serves both.)
fn set_transaction(s: &mut Session, t: &[Token], session: bool, global: bool) -> Result<Output> {
    let words: Vec<String> = t
        .iter()
        .filter_map(|tok| match tok {
            Token::Word(w) => Some(w.value.to_ascii_uppercase()),
            Token::Comma => Some(",".into()),
            _ => None,
        })
        .collect();
    if let Some(at) = words.iter().position(|w| w == "LEVEL") {
        let level: Vec<&str> = words[at + 1..]
            .iter()
            .take_while(|w| *w != ",")
            .map(String::as_str)
            .collect();
        let level = isolation_level_name(&level.join(" "))?;
        if session {
            set_session_isolation(s, level);
        } else if !global {
            set_next_isolation(s, level)?;
        }
    }
    Ok(Output::ok())
}

/// The session's isolation level; with autocommit = 0 between transactions
/// also the idle one already open (it has not started yet).
fn set_session_isolation(s: &mut Session, level: &'static str) {
    s.variables
        .insert("transaction_isolation".into(), Value::text(level));
    s.variables
        .insert("tx_isolation".into(), Value::text(level));
    let autocommit = s.autocommit;
    if let Some(tx) = &mut s.transaction {
        if !autocommit && tx.ops.is_empty() && tx.read_view.get().is_none() {
            tx.repeatable_read = level == "REPEATABLE-READ";
        }
    }
}

/// The isolation level of the next transaction only (`SET TRANSACTION`
/// without a scope); not while one is running (MariaDB: 1568), as its
/// reads may have begun.
fn set_next_isolation(s: &mut Session, level: &'static str) -> Result<()> {
    let autocommit = s.autocommit;
    match &mut s.transaction {
        Some(tx) if autocommit || !tx.ops.is_empty() || tx.read_view.get().is_some() => {
            return Err(ShimError::Wire(WireError {
                code: crate::error::ER_CANT_CHANGE_TX_CHARACTERISTICS,
                message: "Transaction characteristics can't be changed while a transaction \
                          is in progress"
                    .into(),
            }));
        }
        // autocommit = 0 between transactions: the next one is the idle
        // one already open.
        Some(tx) => tx.repeatable_read = level == "REPEATABLE-READ",
        None => s.next_isolation = Some(level),
    }
    Ok(())
}

/// The `@@transaction_isolation` spelling of an isolation level Ladle
/// provides (see `session::Transaction`): READ COMMITTED (which also
/// satisfies READ UNCOMMITTED) and REPEATABLE READ (one read view per
/// transaction). SERIALIZABLE needs locking reads (no write skew), which
/// Ladle does not take, so it is refused rather than accepted and not
/// given.
fn isolation_level_name(level: &str) -> Result<&'static str> {
    match level.to_ascii_uppercase().replace(['-', '_'], " ").trim() {
        "READ COMMITTED" => Ok("READ-COMMITTED"),
        "READ UNCOMMITTED" => Ok("READ-UNCOMMITTED"),
        "REPEATABLE READ" => Ok("REPEATABLE-READ"),
        "SERIALIZABLE" => Err(ShimError::Unsupported(format!(
            "transaction isolation level {}: Ladle provides READ COMMITTED and REPEATABLE READ",
            level.to_ascii_uppercase()
        ))),
        other => Err(ShimError::WrongValueForVar(
            "transaction_isolation".into(),
            other.to_string(),
        )),
    }
}

fn statement_name(s: &Statement) -> String {
    let text = s.to_string();
    text.split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ")
}

/// A SELECT stops after the session's `max_execution_time` (milliseconds;
/// 0, the default, is no limit) with 3024, as in MySQL.
fn select_deadline(s: &Session) -> ladle_dataflow::interrupt::WatchGuard {
    let ms = match s.variables.get("max_execution_time") {
        Some(Value::Int(n)) => u64::try_from(*n).unwrap_or(0),
        Some(Value::UInt(n)) => *n,
        _ => 0,
    };
    let deadline =
        (ms > 0).then(|| std::time::Instant::now() + std::time::Duration::from_millis(ms));
    ladle_dataflow::interrupt::watch_deadline(deadline)
}

/// The first two words of a statement, upper case (cheap: no tokenizer;
/// leading comments are skipped).
pub(crate) fn first_words(sql: &str) -> (String, String) {
    let mut rest = sql.trim_start();
    loop {
        if let Some(after) = rest.strip_prefix("/*") {
            rest = after.split_once("*/").map_or("", |(_, r)| r);
        } else if rest.starts_with("--") || rest.starts_with('#') {
            rest = rest.split_once('\n').map_or("", |(_, r)| r);
        } else {
            break;
        }
        rest = rest.trim_start();
    }
    let mut words = rest
        .split(|c: char| !c.is_ascii_alphabetic() && c != '_')
        .filter(|w| !w.is_empty())
        .map(|w| w.to_ascii_uppercase());
    let w0 = words.next().unwrap_or_default();
    let w1 = words.next().unwrap_or_default();
    (w0, w1)
}

/// The statement kind from its first word (cheap; used for metrics).
/// Whether a statement of `kind` reads or writes tables, which is when MySQL
/// clears the warnings of the statement before it. A SELECT without FROM
/// does not.
/// How many of the session's warnings a statement starting now keeps:
/// MySQL keeps the previous statement's warnings through statements that
/// use no table (`SELECT @@warning_count`, `SET @a = 1`); others clear them.
/// Also noted in the session: the OK packet counts only the statement's own.
fn carried_warnings(s: &mut Session, sql: &str, kind: Kind) -> usize {
    let carried = if kind != Kind::Show && !s.warnings.is_empty() && uses_tables(kind, sql) {
        s.clear_warnings();
        0
    } else {
        s.warnings.len()
    };
    s.carried_warnings = carried;
    carried
}

fn uses_tables(kind: Kind, sql: &str) -> bool {
    match kind {
        Kind::Insert | Kind::Update | Kind::Delete | Kind::Ddl => true,
        Kind::Select => tokens(sql).map_or(true, |t| {
            (0..t.len()).any(|i| word(&t, i).as_deref() == Some("FROM"))
        }),
        _ => false,
    }
}

pub fn classify(sql: &str) -> Kind {
    let first = sql
        .trim_start_matches(|c: char| c.is_whitespace() || c == '(')
        .split(|c: char| !c.is_ascii_alphabetic())
        .next()
        .unwrap_or("")
        .to_ascii_uppercase();
    match first.as_str() {
        "SELECT" | "WITH" => Kind::Select,
        "INSERT" | "REPLACE" => Kind::Insert,
        "UPDATE" => Kind::Update,
        "DELETE" | "TRUNCATE" => Kind::Delete,
        "CREATE" | "DROP" | "ALTER" | "RENAME" => Kind::Ddl,
        "BEGIN" | "START" | "COMMIT" | "ROLLBACK" => Kind::Transaction,
        "SHOW" | "DESCRIBE" | "DESC" | "EXPLAIN" => Kind::Show,
        _ => Kind::Other,
    }
}

/// The output shape EXPLAIN was asked for.
enum ExplainFormat {
    Graph,
    Tree,
    Json,
    Traditional,
}

#[cfg(test)]
mod tests {
    use super::{first_words, CachedSelects, SELECT_CACHE_BYTES, SELECT_CACHE_LIMIT};

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

    #[test]
    fn first_words_skip_leading_comments() {
        let w = |s: &str| first_words(s);
        assert_eq!(w("CREATE USER 'u'@'%'"), ("CREATE".into(), "USER".into()));
        assert_eq!(
            w("/* app */ grant SELECT ON *.* TO u"),
            ("GRANT".into(), "SELECT".into())
        );
        assert_eq!(
            w("-- note\n  SET PASSWORD = ''"),
            ("SET".into(), "PASSWORD".into())
        );
        assert_eq!(w("# x\nSHOW GRANTS"), ("SHOW".into(), "GRANTS".into()));
        assert_eq!(w("/* unterminated"), (String::new(), String::new()));
    }
}
