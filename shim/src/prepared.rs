//! Prepared statements: PREPARE plans a SELECT once (or keeps the text of
//! any other statement), EXECUTE binds the parameters and reads.

use ladle_common::Value;
use ladle_dataflow::{OutputColumn, PreparedQuery, ResultRows};
use sqlparser::ast::Statement;
use sqlparser::tokenizer::Token;

use crate::catalog;
use crate::error::{Result, ShimError, WireError};
use crate::exec::Engine;
use crate::output::{Kind, Output};
use crate::select::{
    has_share_mode, select_deadline, strip_locks, strip_share_mode, takes_read_view,
};
use crate::session::{PreparedStatement, Session};
use crate::sqltext::parse;
use crate::tokens::{classify, tokens, word};

impl Engine {
    /// Plans prepared SELECT `id` again from its SQL after DDL, keeping
    /// its id (the client's handle) and the session's current database.
    fn reprepare(&self, s: &mut Session, id: u32, sql: &str) -> Result<PreparedQuery> {
        let generation = self.select_cache.generation();
        let bound = self.temporary_names(s, sql);
        let parsed = parse(bound.as_deref().unwrap_or(sql))?;
        let [Statement::Query(q)] = parsed.as_slice() else {
            return Err(ShimError::Internal(
                "a prepared SELECT no longer parses as one".into(),
            ));
        };
        let locking = matches!(
            s.statements.get(&id),
            Some(PreparedStatement::Select { locking: true, .. })
        );
        let mut q = strip_locks(q);
        crate::rollup::expand_nested(&mut q, false)?;
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
    /// [`Engine::execute_prepared`] on a statement thread instead.
    pub fn execute_prepared_cached(
        &self,
        s: &mut Session,
        id: u32,
        params: &[Value],
    ) -> Option<(Kind, std::result::Result<Output, WireError>)> {
        let Some(PreparedStatement::Select {
            query,
            sql,
            generation,
            locking: false,
        }) = s.statements.get(&id)
        else {
            return None;
        };
        if *generation != self.select_cache.generation()
            || !self.reads_shared_views_now(s)
            || self.names_temporary_on_primary(s, sql)
        {
            return None;
        }
        let query = query.clone();
        let start = std::time::Instant::now();
        let res = query.read_cached(params, self.read_lsn(s))?;
        s.clear_warnings();
        Some(self.finish_read(s, &query, start, res.map_err(ShimError::from)))
    }

    /// sql_mode=ONLY_FULL_GROUP_BY at an execution of prepared SELECT
    /// `sql`: the mode may have changed since PREPARE (or the client's
    /// statement cache prepared it under another), and MariaDB checks it at
    /// each execution.
    fn check_full_group_by_text(&self, s: &Session, sql: &str) -> Result<()> {
        let bound = self.temporary_names(s, sql);
        if let Ok([Statement::Query(q)]) = parse(bound.as_deref().unwrap_or(sql)).as_deref() {
            let mut q = strip_locks(q);
            crate::rollup::expand_nested(&mut q, false)?;
            let db = self.query_database(s, &q)?;
            self.dataflow.check_full_group_by(&db, &q)?;
        }
        Ok(())
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
        match &res {
            Ok(rows) => s.found_rows_count = rows.len() as u64,
            Err(err) => s.add_warning("Error", err.code.errno, err.message.clone()),
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
            Some(PreparedStatement::Select { sql, locking, .. })
                if s.forwarded_transaction
                    || *locking
                    || self.names_temporary_on_primary(s, sql) =>
            {
                // The open transaction is the primary's, or a TEMPORARY
                // table it names (planned here as the base table it
                // shadows): read there. A locking read runs as text: its
                // rows are locked first (see `crate::row_locking`).
                let marks = crate::params::placeholders(sql);
                if params.len() != marks.len() {
                    let e = ShimError::ParamCount {
                        expected: marks.len(),
                        got: params.len(),
                    };
                    return (Kind::Select, Err(e.into()));
                }
                let mut text = crate::params::substitute(sql, &marks, params);
                // `LOCK IN SHARE MODE` was cut from the kept text.
                let share_mode = *locking
                    && matches!(parse(sql).as_deref(), Ok([Statement::Query(q)]) if q.locks.is_empty());
                if share_mode {
                    text.push_str(" LOCK IN SHARE MODE");
                }
                self.execute(s, &text)
            }
            Some(PreparedStatement::Select {
                query,
                sql,
                generation,
                locking,
            }) => {
                let locking = *locking;
                let bound = self.temporary_names(s, sql);
                if let Err(e) =
                    crate::privileges::check_sql(self, s, bound.as_deref().unwrap_or(sql))
                {
                    return (Kind::Select, Err(e.into()));
                }
                if crate::vars::only_full_group_by(s) {
                    if let Err(e) = self.check_full_group_by_text(s, sql) {
                        return (Kind::Select, Err(e.into()));
                    }
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
            Some(PreparedStatement::Other {
                sql,
                marks,
                write,
                bound,
            }) => {
                if params.len() != marks.len() {
                    let e = ShimError::ParamCount {
                        expected: marks.len(),
                        got: params.len(),
                    };
                    return (Kind::Other, Err(e.into()));
                }
                // The tree was parsed with the TEMPORARY tables the session
                // had at PREPARE: used only while it has them still.
                let now = write.as_ref().and(self.temporary_names(s, sql));
                if let Some(w) = write
                    .as_ref()
                    .filter(|w| now == *bound && !self.must_forward(s, w.kind(), sql))
                {
                    let sql = now.unwrap_or_else(|| sql.clone());
                    let write = std::sync::Arc::clone(w);
                    return self.execute_write(s, &sql, &write, params);
                }
                let text = crate::params::substitute(sql, marks, params);
                self.execute(s, &text)
            }
        }
    }
}

impl Engine {
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
        let temporary = self.temporary_names(s, &opened);
        let sql = temporary.as_deref().unwrap_or(opened.as_ref());
        if classify(sql) == Kind::Select {
            self.check_index_hints(s, sql)?;
        }
        let unlocked = if classify(sql) == Kind::Select {
            strip_share_mode(sql)
        } else {
            None
        };
        let share_mode = unlocked.is_some() && has_share_mode(sql);
        let sql = unlocked.as_deref().unwrap_or(sql);
        // What is kept to run again: the text as the client named its
        // tables (TEMPORARY ones are found again at each planning).
        let named = match (&temporary, &unlocked) {
            (None, _) => sql.to_string(),
            (Some(_), None) => opened.to_string(),
            (Some(_), Some(_)) => strip_share_mode(&opened).unwrap_or_else(|| opened.to_string()),
        };
        let bound = temporary.as_ref().map(|_| sql.to_string());
        let marks = crate::params::placeholders(sql);
        // The reply counts parameters in 16 bits: past that the client
        // would read a wrong count and lose its place in the stream.
        if marks.len() > usize::from(u16::MAX) {
            return Err(ShimError::Wire(WireError {
                code: crate::error::ER_PS_MANY_PARAM,
                message: "Prepared statement contains too many placeholders".into(),
            }));
        }
        // Account statements have their own grammar (`'u'@'h'`, which the
        // SQL tokenizer refuses): checked and run at execution.
        if crate::account_statements::is_account_statement(sql) {
            let n = marks.len();
            let id = s.add_statement(PreparedStatement::Other {
                sql: sql.to_string(),
                marks,
                write: None,
                bound: None,
            });
            return Ok((id, n, Vec::new()));
        }
        let first = tokens(sql)?;
        // Naming the session's TEMPORARY tables on the primary (a
        // replica's client): checked and planned there, at each execution.
        let on_primary = self.names_temporary_on_primary(s, sql);
        if !on_primary {
            crate::privileges::check_sql(self, s, sql)?;
        }
        // SQL_CALC_FOUND_ROWS runs two reads: by text at each execution.
        let calc = crate::found_rows::strip_calc(sql).is_some();
        let is_select = !on_primary
            && !calc
            && (matches!(word(&first, 0).as_deref(), Some("SELECT" | "WITH"))
                || matches!(first.first(), Some(Token::LParen)));
        if is_select {
            if let Ok(stmts) = parse(sql) {
                if let [Statement::Query(q)] = stmts.as_slice() {
                    let session_only = marks.is_empty() && {
                        // Answered only to see that it can be: no SLEEP.
                        s.probing = true;
                        let answered = self.session_select(s, q);
                        s.probing = false;
                        answered?.is_some()
                    };
                    // WITH ROLLUP is merged per execution (`crate::rollup`).
                    if !session_only
                        && !catalog::is_information_schema_query(s, q)
                        && !crate::rollup::is_rollup(q)
                    {
                        let locking = share_mode || !q.locks.is_empty();
                        let mut q = strip_locks(q);
                        crate::rollup::expand_nested(&mut q, false)?;
                        let db = self.query_database(s, &q)?;
                        if crate::vars::only_full_group_by(s) {
                            self.dataflow.check_full_group_by(&db, &q)?;
                        }
                        let generation = self.select_cache.generation();
                        match self.dataflow.prepare(&db, &q) {
                            Ok(pq) => {
                                let cols = pq.columns().to_vec();
                                let n = pq.param_count();
                                let id = s.add_statement(PreparedStatement::Select {
                                    query: pq,
                                    sql: named,
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
        let probe = crate::found_rows::strip_calc(&probe).unwrap_or(probe);
        check_syntax(&first, &probe)?;
        let n = marks.len();
        let write = (!on_primary && crate::dispatch::bindable_write(sql))
            .then(|| crate::params::ParsedWrite::parse(sql, &marks, classify(sql)))
            .flatten()
            .map(std::sync::Arc::new);
        let marks = match bound {
            Some(_) => crate::params::placeholders(&named),
            None => marks,
        };
        let id = s.add_statement(PreparedStatement::Other {
            sql: named,
            marks,
            write,
            bound,
        });
        Ok((id, n, Vec::new()))
    }
}

/// Checks at PREPARE the syntax of a statement that is not a planned
/// SELECT (`first`: its tokens; `probe`: its text with NULL for each
/// `?`), each form by the grammar that reads it at execution.
fn check_syntax(first: &[Token], probe: &str) -> Result<()> {
    if crate::user_assign::assigns(first) {
        // `@x := ...`, which the SQL parser does not read: its items
        // are checked now, the rest at execution.
        if word(first, 0).as_deref() == Some("SELECT") {
            crate::user_assign::select_items(first)?;
        }
    } else if word(first, 0).as_deref() == Some("UPDATE")
        && crate::dml::is_multi_table_update(&crate::dml::strip_update_modifiers(first).0)
    {
        // The comma form has Ladle's own reading (see `dml::multi_update`).
        let probe = tokens(probe)?;
        let (t, _) = crate::dml::strip_update_modifiers(&probe);
        crate::dml::parse_multi_update(&crate::tokens::render_tokens(&t))?;
    } else if word(first, 0).as_deref() == Some("RENAME") {
        // ALTER TABLE and RENAME TABLE have Ladle's own grammar.
        crate::alter::parse_rename(probe)?;
    } else if word(first, 0).as_deref() == Some("ALTER") {
        if crate::metadata_locks::schema_change_targets(first).is_empty() {
            parse(probe)?;
        } else {
            crate::alter::parse(probe)?;
        }
    } else if !matches!(
        word(first, 0).as_deref(),
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
        parse(probe)?;
    }
    Ok(())
}
