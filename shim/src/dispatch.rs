//! Statement routing: one SQL text in, one [`Output`] out, through one
//! list of handlers. A statement is routed by its parsed tree
//! ([`Engine::statement`]); the MySQL forms the SQL parser does not cover
//! (SHOW, DESCRIBE, KILL, TRUNCATE without TABLE, UPDATE ... ORDER BY/LIMIT,
//! ...) are routed by their first words ([`Engine::by_keywords`]) before
//! parsing. Synchronous (the connection handler runs it on a blocking
//! thread): storage writes may wait for an fsync.

use sqlparser::ast::{self, Statement};
use sqlparser::tokenizer::Token;

use crate::error::{Result, ShimError, WireError};
use crate::exec::Engine;
use crate::output::{Kind, Output};
use crate::select::{has_share_mode, select_deadline, strip_share_mode};
use crate::session::{Session, Transaction};
use crate::sqltext::{last_part, parse};
use crate::tokens::{classify, first_words, qualified_name, tokens, word};
use crate::transaction::{on_savepoint, set_transaction};
use crate::{catalog, ddl, dml};

impl Engine {
    /// Runs one SQL text (one statement; a trailing `;` is fine; several
    /// statements run in order and the last one's output is returned).
    pub fn execute(
        &self,
        s: &mut Session,
        sql: &str,
    ) -> (Kind, std::result::Result<Output, WireError>) {
        let opened = crate::sqltext::open_versioned_comments(sql);
        let plain_view = crate::view_options::strip(&opened);
        let sql = plain_view.as_deref().unwrap_or(&opened);
        let kind = classify(sql);
        // The columns of a view or table made from a SELECT are named as
        // MySQL names its items (`a+1`), not as the parser prints them.
        let aliased = match first_words(sql) {
            (w0, w1) if w0 == "CREATE" && matches!(&*w1, "VIEW" | "OR" | "TABLE" | "TEMPORARY") => {
                crate::sqltext::with_item_aliases(sql)
            }
            _ => None,
        };
        let sql = aliased.as_deref().unwrap_or(sql);
        let carried = carried_warnings(s, sql, kind);
        if self.must_forward(s, kind, sql) {
            // The primary's answer carries the session's warnings and
            // ROW_COUNT() as it left them. The text goes as the client
            // wrote it: the session there owns the TEMPORARY tables it
            // names, under its own connection id.
            return (kind, self.forward(s, sql));
        }
        let temporary = self.temporary_names(s, sql);
        let sql = temporary.as_deref().unwrap_or(sql);
        // Warnings of an earlier statement run on this thread are not ours.
        ladle_dataflow::take_eval_warnings();
        let _deadline = (kind == Kind::Select).then(|| select_deadline(s));
        let mut result = match kind {
            Kind::Select | Kind::Update | Kind::Delete => self
                .check_index_hints(s, sql)
                .map_err(WireError::from)
                .and_then(|()| self.execute_inner(s, sql, kind)),
            _ => self.execute_inner(s, sql, kind),
        };
        if temporary.is_some() {
            result = crate::temporary_names::shown(s.connection_id, sql, result);
        }
        self.settle_statement(s, sql, kind, carried, result)
    }

    /// `sql` naming the session's TEMPORARY tables by their stored names
    /// (see [`crate::temporary_names`]), or `None` if it names none.
    pub(crate) fn temporary_names(&self, s: &Session, sql: &str) -> Option<String> {
        if s.names_stored_tables {
            return None;
        }
        let owned = self.temporary_tables.owned_by(s.connection_id);
        crate::temporary_names::rewrite(sql, s.database.as_deref(), s.connection_id, &owned)
    }

    /// A prepared write whose values are bound into the tree parsed at
    /// PREPARE (see [`crate::params::ParsedWrite`]): as [`Engine::execute`]
    /// runs its text, without rendering, tokenizing, routing or parsing it
    /// again. `sql` is the prepared text (with its `?`s), for the privilege
    /// check and the session's bookkeeping.
    pub(crate) fn execute_write(
        &self,
        s: &mut Session,
        sql: &str,
        write: &crate::params::ParsedWrite,
        params: &[ladle_common::Value],
    ) -> (Kind, std::result::Result<Output, WireError>) {
        let kind = write.kind();
        let carried = carried_warnings(s, sql, kind);
        ladle_dataflow::take_eval_warnings();
        let result = crate::privileges::check_sql(self, s, sql)
            .map_err(WireError::from)
            .and_then(|()| {
                self.run_write_retrying(s, kind, |e, s| {
                    let stmt = write.bind(params)?;
                    e.statement(s, stmt).map_err(WireError::from)
                })
            });
        self.settle_statement(s, sql, kind, carried, result)
    }

    /// A text SELECT answered without blocking: its view is installed (the
    /// same text was read before in this database, or the query has the
    /// shape of an installed view: [`Engine::installed_select`]), the
    /// session's transaction (if any) reads the committed state, and the view holds the rows with
    /// the writes the read must see (see [`PreparedQuery::read_cached`]). `None`: run
    /// [`Engine::execute`] on a statement thread instead. Lets the
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
        // The cache is shared: a text naming another connection's
        // TEMPORARY table is refused on the blocking path, one naming
        // the session's own is rewritten there, and one naming those it
        // has on a cluster's primary is forwarded there.
        if self.temporary_tables.foreign_named_in(s.connection_id, sql)
            && crate::privileges::check_sql(self, s, sql).is_err()
        {
            return None;
        }
        if self.temporary_names(s, sql).is_some() || self.names_temporary_on_primary(s, sql) {
            return None;
        }
        let db = s.database.clone()?;
        let key = (db, sql.to_string());
        let cached = self.select_cache.get(&key);
        let (pq, new) = match cached {
            Some(pq) => (pq, false),
            // (A text that fails the hint check gets its error there.)
            None => {
                self.check_index_hints(s, sql).ok()?;
                (self.installed_select(s, &key.0, sql)?, true)
            }
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

    /// BEGIN, START TRANSACTION, COMMIT or ROLLBACK while the session's
    /// transaction (if any) has written nothing, run on the connection's
    /// task: there is nothing to persist or wait for, and the hand-off to a
    /// statement thread and back cost more than the statement (sysbench
    /// `oltp_read_only` sends two a transaction). `None`: any other
    /// statement, a transaction with writes to commit, or one a replica
    /// forwards to its primary.
    pub fn transaction_control_inline(
        &self,
        s: &mut Session,
        sql: &str,
    ) -> Option<(Kind, std::result::Result<Output, WireError>)> {
        let wrote = s.transaction.as_ref().is_some_and(|tx| !tx.ops.is_empty());
        if !plain_transaction_control(sql) || wrote || self.must_forward(s, classify(sql), sql) {
            return None;
        }
        Some(self.execute(s, sql))
    }

    /// What every statement leaves in its session besides its result:
    /// ROW_COUNT(), and the warnings SHOW WARNINGS lists (those the
    /// evaluator raised while it ran, or its error). `carried`: the
    /// earlier statements' warnings still listed when it started.
    pub(crate) fn settle_statement(
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
        // FOUND_ROWS(): a SELECT's rows (without its LIMIT under
        // SQL_CALC_FOUND_ROWS); other statements leave it.
        let calc = s.calc_found_rows.take();
        if let (Kind::Select, Ok(Output::Rows { rows, .. })) = (kind, &result) {
            s.found_rows_count = calc.unwrap_or(rows.len() as u64);
        }
        let mut raised = ladle_dataflow::take_eval_warnings();
        if !crate::vars::division_by_zero_warns(s) {
            raised.retain(|w| w.1 != ladle_dataflow::WARN_DIVISION_BY_ZERO);
        }
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
            if !s.probing {
                crate::refused::note(s.connection_id, sql, e);
            }
            if e.code.errno == crate::error::ER_UNKNOWN.errno {
                tracing::warn!(connection = s.connection_id, error = %e.message, sql, "statement failed");
            } else {
                tracing::debug!(connection = s.connection_id, errno = e.code.errno, error = %e.message, "statement failed");
            }
        }
        (kind, result)
    }

    pub(crate) fn execute_inner(
        &self,
        s: &mut Session,
        sql: &str,
        kind: Kind,
    ) -> std::result::Result<Output, WireError> {
        // Account statements are not DDL to the schema log: replicas must
        // not receive their passwords as statement text.
        let (w0, _) = first_words(sql);
        if crate::account_statements::is_account_statement(sql) {
            if !crate::account_statements::changes_accounts(sql) {
                return Ok(crate::account_statements::statement(self, s, sql)?);
            }
            self.implicit_commit(s)?;
            let Some(log) = self.schema_log.get() else {
                return Ok(crate::account_statements::statement(self, s, sql)?);
            };
            // A cluster node: as a schema change (only the primary runs
            // it; replicas install the resulting list at this position).
            log.check_writable()
                .map_err(|why| ShimError::Storage(ladle_storage::StorageError::ReadOnly(why)))?;
            let out = self
                .storage
                .fenced(|| self.recorded_account_statement(s, sql, log.as_ref()))?;
            log.acknowledge()
                .map_err(|why| ShimError::Storage(ladle_storage::StorageError::ReadOnly(why)))?;
            return Ok(out);
        }
        // (The parser does not read a view's WITH CHECK OPTION.)
        let checked = crate::view_check_option::split(sql);
        let unchecked = checked.as_ref().map_or(sql, |c| c.rest.as_str());
        crate::privileges::check_sql(self, s, unchecked)?;
        if kind == Kind::Ddl && self.schema_log.get().is_some() {
            if let Some(out) = crate::create_table_select::in_steps(self, s, sql)? {
                return Ok(out);
            }
        }
        // Held until the statement ends (outside the cluster's write fence:
        // the transactions it waits for must be able to commit).
        let _changing = if kind == Kind::Ddl || w0 == "TRUNCATE" {
            self.lock_schema_change_targets(s, sql)?
        } else {
            Vec::new()
        };
        if kind == Kind::Ddl {
            self.select_cache.invalidate();
            if let Some(log) = self.schema_log.get() {
                log.check_writable().map_err(|why| {
                    ShimError::Storage(ladle_storage::StorageError::ReadOnly(why))
                })?;
                if !s.names_stored_tables && crate::temporary_names::creates_temporary(sql) {
                    // A new primary first drops its predecessor's.
                    self.temporary_tables.await_creates();
                }
                let database = s.database.clone();
                let settings = crate::vars::schema_change_settings(s);
                let run = |s: &mut Session| {
                    let out = self.run_statement(s, sql, kind);
                    if out.is_ok() {
                        let carried = self.storage.record_carried();
                        log.record(database.as_deref(), &settings, sql, carried);
                    } else if let Err(e) = self.storage.withdraw_record() {
                        tracing::error!(error = %e, sql, "withdrawing a failed schema change's record");
                    }
                    out
                };
                let out = match log.prepare(database.as_deref(), &settings, sql) {
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
        self.run_write_retrying(s, kind, |e, s| e.run_statement(s, sql, kind))
    }

    /// Takes the tables a schema change names exclusive (see
    /// [`crate::metadata_locks`]): it waits for the transactions that wrote
    /// them. In table-id order, so two schema changes never wait for each
    /// other in a cycle. A table that does not exist is left to the
    /// statement to report.
    fn lock_schema_change_targets(
        &self,
        s: &Session,
        sql: &str,
    ) -> Result<Vec<crate::metadata_locks::SchemaChangeGuard>> {
        let Ok(toks) = tokens(sql) else {
            return Ok(Vec::new());
        };
        let mut ids: Vec<ladle_common::TableId> =
            crate::metadata_locks::schema_change_targets(&toks)
                .into_iter()
                .filter_map(|(db, table)| {
                    let db = db.or_else(|| s.database.clone())?;
                    self.storage.table(&db, &table).map(|t| t.id)
                })
                .collect();
        // DROP DATABASE drops every table in it.
        if let Some(db) = crate::metadata_locks::dropped_database(&toks) {
            ids.extend(self.storage.tables(&db).iter().map(|t| t.id));
        }
        ids.sort_unstable();
        ids.dedup();
        let timeout = crate::vars::lock_wait_timeout(s);
        ids.into_iter()
            .map(|id| self.metadata_locks.exclusive(s.connection_id, id, timeout))
            .collect()
    }

    /// [`Engine::run_statement`], run again when an autocommit write met a
    /// schema change that committed after it read the table's schema
    /// (storage's 1412: nothing was written): the statement is built again
    /// for the new columns. (A transaction holds the tables it wrote
    /// against schema changes, see [`crate::metadata_locks`], so its
    /// buffered ops never meet a newer schema at COMMIT.)
    fn run_write_retrying(
        &self,
        s: &mut Session,
        kind: Kind,
        mut run: impl FnMut(&Engine, &mut Session) -> std::result::Result<Output, WireError>,
    ) -> std::result::Result<Output, WireError> {
        const ATTEMPTS: usize = 8;
        // A write that waited for a row lock runs again with the lock held
        // (see `crate::row_locking`); each run waits for another lock.
        const LOCK_ATTEMPTS: usize = 64;
        let mut attempt = 1;
        let mut lock_attempt = 1;
        // (Left set only by a statement that did not come through here.)
        s.rerun_for_row_locks = false;
        let out = loop {
            let out = run(self, s);
            let rerun = std::mem::take(&mut s.rerun_for_row_locks) && out.is_err();
            if rerun && lock_attempt < LOCK_ATTEMPTS {
                ladle_dataflow::take_eval_warnings();
                lock_attempt += 1;
                continue;
            }
            let retry = matches!(kind, Kind::Insert | Kind::Update | Kind::Delete)
                && attempt < ATTEMPTS
                && s.transaction.is_none()
                && matches!(&out, Err(e) if e.code.errno == crate::error::ER_TABLE_DEF_CHANGED.errno);
            if !retry {
                break out;
            }
            ladle_dataflow::take_eval_warnings();
            attempt += 1;
        };
        // An autocommit statement's row locks end with it.
        s.statement_locks.release();
        out
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
        if kind == Kind::Select && !repeatable && !crate::vars::only_full_group_by(s) {
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
        // WITH CHECK OPTION, which the parser does not read, is recorded
        // once the view is made (the schema log keeps the whole text).
        if let Some(c) = crate::view_check_option::split(sql) {
            let out = self.run_statement(s, &c.rest, kind)?;
            crate::view_check_option::record(self, s, &c)?;
            return Ok(out);
        }
        let toks = tokens(sql)?;
        let toks: Vec<Token> = toks
            .into_iter()
            .filter(|t| !matches!(t, Token::SemiColon))
            .collect();
        if toks.is_empty() {
            return Err(ShimError::Parse("Query was empty".into()).into());
        }
        // `SET @x := v` is `SET @x = v` (the parser knows only `=`).
        let set_text;
        let (sql, toks) = match crate::user_assign::set_with_equals(&toks) {
            Some(toks) => {
                set_text = crate::tokens::render_tokens(&toks);
                (set_text.as_str(), toks)
            }
            None => (sql, toks),
        };
        if let Some(out) = crate::admin::route(self.admin.as_ref(), &toks) {
            return out;
        }
        // Statements the shim recognizes from their first words (MySQL
        // forms the SQL parser does not cover).
        if let Some(out) = self.by_keywords(s, &toks)? {
            return Ok(out);
        }
        // SQL_CALC_FOUND_ROWS: two reads (see `crate::found_rows`).
        if kind == Kind::Select {
            if let Some(plain) = crate::found_rows::strip_calc(sql) {
                return self.select_calc_found_rows(s, &plain);
            }
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
        if w0 == "SET" {
            if let Some(parts) = crate::set_list::split(t) {
                return Ok(Some(self.set_each(s, &parts)?));
            }
        }
        match (w0.as_str(), w1.as_str()) {
            ("SHOW", _) => Ok(Some(catalog::show(self, s, t)?)),
            ("PREPARE", _) => Ok(Some(self.sql_prepare(s, t)?)),
            ("EXECUTE", _) => Ok(Some(self.sql_execute(s, t)?)),
            ("DEALLOCATE" | "DROP", "PREPARE") => Ok(Some(self.sql_deallocate(s, t)?)),
            ("DO", _) if t.len() > 1 => self.do_statement(s, t),
            ("SELECT", _) if crate::user_assign::assigns(t) => {
                Ok(Some(self.select_assigning(s, t)?))
            }
            ("DESCRIBE" | "DESC", _) => Ok(Some(self.describe_named(s, t, "near DESCRIBE")?)),
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
                Ok(Some(self.describe_named(s, t, "near EXPLAIN")?))
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
            ("ALTER", "TABLE")
                if t.len() >= 4
                    && word(t, t.len() - 1).as_deref() == Some("KEYS")
                    && matches!(word(t, t.len() - 2).as_deref(), Some("DISABLE" | "ENABLE")) =>
            {
                Ok(Some(self.toggle_keys(s, t)?))
            }
            // sqlparser does not parse functional key parts `((expr))` or
            // ASC/DESC key parts in CREATE TABLE: it is parsed without
            // those index declarations, then given them.
            ("CREATE", "TABLE" | "TEMPORARY") if crate::functional_index::declared(t) => {
                self.implicit_commit(s)?;
                let (sql, decls) = crate::functional_index::split_create_table(t)?;
                let Some(Statement::CreateTable(ct)) = parse(&sql)?.into_iter().next() else {
                    return Err(ShimError::Parse("near CREATE TABLE".into()).into());
                };
                Ok(Some(ddl::create_table_with(self, s, ct, &decls)?))
            }
            // Every other ALTER TABLE, and RENAME TABLE (MySQL forms the
            // parser does not know).
            ("ALTER", "TABLE") => {
                self.implicit_commit(s)?;
                let sql = crate::tokens::render_tokens(t);
                Ok(Some(crate::alter_table::alter_statement(self, s, &sql)?))
            }
            ("RENAME", "TABLE" | "TABLES") => {
                self.implicit_commit(s)?;
                let sql = crate::tokens::render_tokens(t);
                Ok(Some(crate::alter_table::rename_tables(self, s, &sql)?))
            }
            ("SET", "TRANSACTION") => Ok(Some(set_transaction(s, t, false, false)?)),
            // `SET GLOBAL x = v` (the parser knows only `@@global.x`).
            ("SET", "GLOBAL") if word(t, 2).as_deref() != Some("TRANSACTION") => {
                let rest = crate::tokens::render_tokens(&t[2..]);
                Ok(Some(self.run_parsed(s, &format!("SET @@global.{rest}"))?))
            }
            // sqlparser does not know `WITH CONSISTENT SNAPSHOT`.
            ("START", "TRANSACTION")
                if t.iter().any(
                    |x| matches!(x, Token::Word(w) if w.value.eq_ignore_ascii_case("CONSISTENT")),
                ) =>
            {
                Ok(Some(self.start_consistent_snapshot(s)?))
            }
            ("SET", "SESSION" | "GLOBAL" | "LOCAL")
                if word(t, 2).as_deref() == Some("TRANSACTION") =>
            {
                Ok(Some(set_transaction(s, t, w1 != "GLOBAL", w1 == "GLOBAL")?))
            }
            ("CREATE", "DATABASE" | "SCHEMA") => Ok(Some(ddl::create_database(self, s, t)?)),
            ("DROP", "DATABASE" | "SCHEMA") => Ok(Some(ddl::drop_database(self, s, t)?)),
            ("DROP", "INDEX") => Ok(Some(crate::alter_table::drop_index(self, s, t)?)),
            ("TRUNCATE", _) => Ok(Some(self.truncate(s, t, w1 == "TABLE")?)),
            ("UPDATE", _) => self.update_by_keywords(s, t),
            ("DELETE", _) => self.delete_returning(s, t),
            ("INSERT" | "REPLACE", _) => match dml::rewrite_insert_set(t) {
                Some(sql) => Ok(Some(self.run_parsed(s, &sql)?)),
                None => Ok(None),
            },
            ("XA", _) => Err(ShimError::Unsupported(w0).into()),
            // Stored programs (a dump of a database with triggers or
            // routines has them): refused by name, not as a syntax error.
            ("CREATE", "TRIGGER" | "PROCEDURE" | "FUNCTION" | "EVENT") => {
                Err(ShimError::Unsupported(format!("CREATE {w1}")).into())
            }
            _ => Ok(None),
        }
    }

    /// Runs each statement of `sql`: the last one's output.
    pub(crate) fn run_parsed(&self, s: &mut Session, sql: &str) -> Result<Output> {
        let mut last = Output::ok();
        for stmt in parse(sql)? {
            last = self.statement(s, stmt)?;
        }
        Ok(last)
    }

    /// `DO expr, ...`: the expressions are evaluated for their effects
    /// (SLEEP, GET_LOCK, `@x := ...`, a subquery's errors) and no rows are
    /// returned.
    fn do_statement(
        &self,
        s: &mut Session,
        t: &[Token],
    ) -> std::result::Result<Option<Output>, WireError> {
        let select = format!("SELECT {}", crate::tokens::render_tokens(&t[1..]));
        // As a statement of its own, so its warnings replace the
        // earlier ones as a SELECT's do.
        match self.execute(s, &select).1 {
            // An error raised while evaluating (not while
            // resolving names) is left as an Error-level warning
            // and DO succeeds, as in MariaDB (its mysql_do clears
            // it); the inner statement already listed it.
            Err(e) if is_evaluation_error(e.code.errno) => Ok(Some(Output::ok())),
            Err(e) => Err(e),
            Ok(_) => Ok(Some(Output::ok())),
        }
    }

    /// `DESCRIBE t` and `EXPLAIN t`: the table named after the first word
    /// (`near` is the syntax error without one).
    fn describe_named(&self, s: &mut Session, t: &[Token], near: &str) -> Result<Output> {
        let mut i = 1;
        let (db, table) = qualified_name(t, &mut i).ok_or_else(|| ShimError::Parse(near.into()))?;
        catalog::describe(self, s, db, &table, false)
    }

    /// ALTER TABLE t DISABLE|ENABLE KEYS (dumps wrap their INSERTs in it):
    /// a no-op, as for InnoDB, once the table is known.
    fn toggle_keys(&self, s: &mut Session, t: &[Token]) -> Result<Output> {
        let mut i = 2;
        let (db, table) =
            qualified_name(t, &mut i).ok_or_else(|| ShimError::Parse("near ALTER TABLE".into()))?;
        let (db, table) = self.resolve(s, &object_name(db, table))?;
        if self.storage.table(&db, &table).is_none() {
            return Err(ShimError::UnknownTable {
                database: db,
                table,
            });
        }
        Ok(Output::ok())
    }

    /// `START TRANSACTION WITH CONSISTENT SNAPSHOT`.
    fn start_consistent_snapshot(&self, s: &mut Session) -> Result<Output> {
        self.start_transaction(s)?;
        // The read view is taken now, not at the first read (under
        // READ COMMITTED there is none to take, as in InnoDB).
        if let Some(tx) = &s.transaction {
            tx.read_view(|| self.storage.read_view());
        }
        Ok(Output::ok())
    }

    /// TRUNCATE [TABLE] name (the parser wants TABLE).
    fn truncate(&self, s: &mut Session, t: &[Token], table_word: bool) -> Result<Output> {
        let mut i = if table_word { 2 } else { 1 };
        let (db, table) =
            qualified_name(t, &mut i).ok_or_else(|| ShimError::Parse("near TRUNCATE".into()))?;
        self.implicit_commit(s)?;
        dml::truncate(self, s, &object_name(db, table))?;
        Ok(Output::ok())
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
                self.parsed_update(s, table, assignments, selection)
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
                crate::create_table_select::create_table_select(self, s, ct)
            }
            Statement::CreateIndex(ci) => {
                self.implicit_commit(s)?;
                crate::alter_table::create_index(self, s, ci)
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
                columns,
                query,
                ..
            } => {
                self.implicit_commit(s)?;
                self.create_view(s, &name, &columns, *query, or_replace)
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
}

/// The statement kind from its first word (cheap; used for metrics).
/// Whether a statement of `kind` reads or writes tables, which is when MySQL
/// clears the warnings of the statement before it. A SELECT without FROM
/// does not.
/// How many of the session's warnings a statement starting now keeps:
/// MySQL keeps the previous statement's warnings through statements that
/// use no table (`SELECT @@warning_count`, `SET @a = 1`); others clear them.
/// Also noted in the session: the OK packet counts only the statement's own.
pub(crate) fn carried_warnings(s: &mut Session, sql: &str, kind: Kind) -> usize {
    let carried = if kind != Kind::Show && !s.warnings.is_empty() && uses_tables(kind, sql) {
        s.clear_warnings();
        0
    } else {
        s.warnings.len()
    };
    s.carried_warnings = carried;
    carried
}

/// Whether `sql` is an INSERT, REPLACE, UPDATE or DELETE the SQL parser
/// reads as written: not one of the forms [`Engine::by_keywords`] rewrites
/// first (`UPDATE IGNORE`, multi-table UPDATE, `UPDATE ... ORDER BY/LIMIT`,
/// `DELETE ... RETURNING`, `INSERT ... SET`), nor with versioned comments. Such a
/// prepared write binds its values into its parsed tree
/// ([`crate::params::ParsedWrite`]).
pub(crate) fn bindable_write(sql: &str) -> bool {
    if !matches!(classify(sql), Kind::Insert | Kind::Update | Kind::Delete)
        || matches!(
            crate::sqltext::open_versioned_comments(sql),
            std::borrow::Cow::Owned(_)
        )
    {
        return false;
    }
    let Ok(t) = tokens(sql) else {
        return false;
    };
    match word(&t, 0).as_deref() {
        Some("UPDATE") => {
            let (t, ignore) = dml::strip_update_modifiers(&t);
            !ignore
                && !dml::is_multi_table_update(&t)
                && dml::split_update_order_limit(&t).is_none()
        }
        Some("DELETE") => dml::split_returning(&t).is_none(),
        Some("INSERT" | "REPLACE") => dml::rewrite_insert_set(&t).is_none(),
        _ => false,
    }
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

fn statement_name(s: &Statement) -> String {
    let text = s.to_string();
    text.split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The name `[db.]table`.
fn object_name(db: Option<String>, table: String) -> ast::ObjectName {
    ast::ObjectName(
        db.into_iter()
            .chain(std::iter::once(table))
            .map(ast::Ident::new)
            .collect(),
    )
}

/// Whether `errno` is an error a statement raises while it evaluates rows
/// (a scalar subquery's second row, an out-of-range result), which DO
/// turns into a warning.
fn is_evaluation_error(errno: u16) -> bool {
    [
        crate::error::ER_SUBQUERY_NO_1_ROW.errno,
        crate::error::ER_DATA_OUT_OF_RANGE.errno,
    ]
    .contains(&errno)
}

/// Whether `sql` is exactly BEGIN, START TRANSACTION, COMMIT or ROLLBACK
/// (any case and spacing, an optional `;`), with no characteristic (READ
/// ONLY, WITH CONSISTENT SNAPSHOT, AND CHAIN, WORK, TO SAVEPOINT) that would
/// need the full statement path.
pub(crate) fn plain_transaction_control(sql: &str) -> bool {
    // Every text statement that misses the SELECT cache is asked: the
    // longest form is 17 characters plus `;` and spaces.
    if sql.len() > 32 {
        return false;
    }
    let words: Vec<String> = sql
        .trim()
        .trim_end_matches(';')
        .split_ascii_whitespace()
        .map(str::to_ascii_lowercase)
        .collect();
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    matches!(
        words.as_slice(),
        ["begin"] | ["start", "transaction"] | ["commit"] | ["rollback"]
    )
}

#[cfg(test)]
mod tests {
    use super::plain_transaction_control;

    #[test]
    fn only_plain_transaction_control_is_recognised() {
        for sql in [
            "BEGIN",
            "begin;",
            " Start  Transaction ",
            "COMMIT",
            "rollback;",
        ] {
            assert!(plain_transaction_control(sql), "{sql}");
        }
        for sql in [
            "START TRANSACTION READ ONLY",
            "START TRANSACTION WITH CONSISTENT SNAPSHOT",
            "COMMIT AND CHAIN",
            "ROLLBACK TO SAVEPOINT a",
            "COMMIT WORK",
            "BEGIN WORK",
            "SELECT 1",
            "",
        ] {
            assert!(!plain_transaction_control(sql), "{sql}");
        }
    }
}
