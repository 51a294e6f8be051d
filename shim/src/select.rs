//! SELECT: text and parsed queries read through the dataflow's views (the
//! select cache, share-mode and locking reads, DUAL and constant queries
//! the shim answers itself, and a transaction's own writes laid over the
//! view: [`crate::dml::overlay`]).

use ladle_common::{SqlType, Value};
use ladle_dataflow::{OutputColumn, PreparedQuery, ResultRows};
use sqlparser::ast::{self, SelectItem, SetExpr, Statement, TableFactor};
use sqlparser::tokenizer::Token;

use crate::catalog;
use crate::error::{Result, ShimError, WireError};
use crate::exec::Engine;
use crate::output::Output;
use crate::session::Session;
use crate::sqltext::parse;
use crate::vars::{EvalContext, EvalError, ReadConsistency};

impl Engine {
    /// Whether a read by `s` may be answered from the views at once: not
    /// in a transaction with a view of its own (its writes, or a REPEATABLE
    /// READ snapshot), nor in one the primary runs (a forwarded one), nor
    /// waiting for this node to apply the session's last write, nor by a
    /// stored account (its privileges are checked at each statement on the
    /// blocking path, so a REVOKE applies to statements prepared before).
    pub(crate) fn reads_shared_views_now(&self, s: &Session) -> bool {
        // (A shared view was checked for no session's ONLY_FULL_GROUP_BY.)
        if s.grantee.is_some() || crate::vars::only_full_group_by(s) {
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
    pub(crate) fn installed_select(
        &self,
        s: &Session,
        db: &str,
        sql: &str,
    ) -> Option<PreparedQuery> {
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
    pub(crate) fn remember_select(&self, key: (String, String), pq: &PreparedQuery) {
        self.select_cache.insert(key, pq);
    }

    /// A view read for the session. Inside a transaction that wrote to a
    /// table the query reads, the answer is computed over committed state
    /// plus the transaction's own writes (read-your-own-writes); under
    /// REPEATABLE READ over the transaction's read view instead, unless the
    /// read is a `locking` one (`FOR UPDATE`, `LOCK IN SHARE MODE`), which
    /// InnoDB answers from the latest rows (a "current read"); otherwise it
    /// is the view's reader lookup. A read whose WHERE is `impossible`
    /// (see [`crate::impossible`]) does not take the read view.
    pub(crate) fn read_rows(
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
            let overlay = crate::dml::overlay::snapshot_overlay(self, s, &tables, view)?;
            return Ok(pq.execute_snapshot(params, view, &overlay)?.into());
        }
        if s.in_transaction() {
            let overlay = crate::dml::overlay::transaction_overlay(self, s, &pq.tables())?;
            if !overlay.is_empty() {
                return Ok(pq.execute_overlay(params, &overlay)?.into());
            }
        }
        // A locking read is a current read: every acknowledged write.
        let lsn = if locking {
            ladle_common::Lsn::MAX
        } else {
            self.read_lsn(s)
        };
        Ok(pq.read_after(params, lsn)?)
    }

    /// The writes a read by `s` must see: up to the session's last write
    /// (read-your-writes) or every acknowledged one.
    pub(crate) fn read_lsn(&self, s: &Session) -> ladle_common::Lsn {
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
    pub(crate) fn select_text(
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
        // (A write's own SELECT, `locking` without text, reads without row
        // locks, as InnoDB's READ COMMITTED INSERT ... SELECT does.)
        let request = crate::row_locking::LockRequest::of_query(q, locking && sql.is_some());
        let mut q = strip_locks(q);
        if q.with.as_ref().is_some_and(|w| w.recursive) {
            // Computed per execution, not a view (see the module).
            return crate::recursive_cte::select(self, s, &q);
        }
        // A ROLLUP in a derived table or subquery is a UNION ALL of its
        // levels; one over the whole SELECT is merged per execution.
        crate::rollup::expand_nested(&mut q, false)?;
        if crate::rollup::is_rollup(&q) {
            // Merged per execution from one view per level (see the module).
            return crate::rollup::select(self, s, &q);
        }
        let db = self.query_database(s, &q)?;
        let start = std::time::Instant::now();
        if let Some(request) = &request {
            // Row locks first; the read below then sees the latest rows.
            if let Some(skip) = self.lock_read_rows(s, &q, &db, request)? {
                q = crate::row_locking::with_filter(&q, skip);
            }
        }
        let out = self.read_selected(s, &q, &db, sql.filter(|_| request.is_none()), locking);
        if !s.in_transaction() {
            s.statement_locks.release();
        }
        let rows = out?;
        self.metrics
            .read_seconds
            .observe(start.elapsed().as_secs_f64());
        Ok(rows)
    }

    /// The rows of `q` for `s` (see [`Engine::read_rows`]); the view is
    /// remembered for text `sql`, if given.
    fn read_selected(
        &self,
        s: &mut Session,
        q: &ast::Query,
        db: &str,
        sql: Option<&str>,
        locking: bool,
    ) -> Result<Output> {
        if crate::vars::only_full_group_by(s) {
            self.dataflow.check_full_group_by(db, q)?;
        }
        // A view with the clock fixed answers this statement only: it is
        // dropped after the read, not remembered for the text.
        let (pq, clock_fixed) = match self.dataflow.prepare(db, q) {
            Err(err) if err.is_volatile_refusal() => match crate::clock::fix_clock(self, s, q)? {
                Some(fixed) => (self.dataflow.prepare(db, &fixed)?, true),
                None => return Err(err.into()),
            },
            other => (other?, false),
        };
        let impossible = takes_read_view(s) && crate::impossible::select_is_impossible(q, &[]);
        let rows = self.read_rows(s, &pq, &[], locking, impossible);
        if clock_fixed {
            // Its literals are this moment's: no later statement reads it.
            self.dataflow.discard(&pq);
        }
        let rows = rows?;
        if let (Some(sql), Some(current), false) = (sql, &s.database, clock_fixed) {
            self.remember_select((current.clone(), sql.to_string()), &pq);
        }
        Ok(Output::Rows {
            columns: pq.columns().to_vec(),
            rows,
        })
    }

    pub(crate) fn session_select(&self, s: &mut Session, q: &ast::Query) -> Result<Option<Output>> {
        self.select_without_table(s, q, &[])
    }

    /// `SELECT @x := expr, ...` without FROM (MySQL's assignment in a
    /// select list): items run left to right, each one's assignments seen
    /// by the items after it. `:=` anywhere else is refused (1235).
    pub(crate) fn select_assigning(&self, s: &mut Session, toks: &[Token]) -> Result<Output> {
        let items = crate::user_assign::select_items(toks)?;
        let sql = format!(
            "SELECT {}",
            items
                .iter()
                .map(|i| crate::tokens::render_tokens(&i.expr))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let Some(Statement::Query(q)) = parse(&sql)?.into_iter().next() else {
            return Err(ShimError::Parse(sql));
        };
        self.select_without_table(s, &q, &items)?
            .ok_or_else(|| ShimError::Unsupported("user variable assignment (:=) here".into()))
    }

    /// A SELECT of constant expressions (no FROM), evaluated here; item
    /// `i` then assigns its value to `assigning[i]`'s variables, if any.
    /// `None` when the view engine must answer it.
    fn select_without_table(
        &self,
        s: &mut Session,
        q: &ast::Query,
        assigning: &[crate::user_assign::Item],
    ) -> Result<Option<Output>> {
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
        let mut columns = Vec::new();
        let mut row = Vec::new();
        for (i, item) in sel.projection.iter().enumerate() {
            let assigns = assigning.get(i);
            let (expr, name) = match item {
                SelectItem::UnnamedExpr(e) => (
                    e,
                    assigns.map_or_else(|| ladle_dataflow::expr_column_name(e), |a| a.name.clone()),
                ),
                SelectItem::ExprWithAlias { expr, alias } => (expr, alias.value.clone()),
                _ => return Ok(None),
            };
            let ctx = EvalContext {
                session: s,
                facts: &self.facts,
                columns: &[],
                row: &[],
            };
            let typed = match ctx.eval_typed(expr) {
                Ok(typed) => typed,
                // Not a constant expression: a query for the view engine
                // itself (it reports what it cannot do).
                Err(EvalError::Compile(_)) => return Ok(None),
                Err(EvalError::Eval(err)) => return Err(err.into()),
                Err(EvalError::Refused(err)) => return Err(ShimError::Wire(err)),
                Err(EvalError::UnknownVariable(n)) => return Err(ShimError::UnknownVariable(n)),
                Err(EvalError::UnknownColumn(c)) => {
                    return Err(ShimError::UnknownColumn(c, "field list".into()))
                }
            };
            let crate::vars::Typed {
                value: v,
                ty: declared,
                nullable,
                decimals: fixed,
            } = typed;
            // A CAST is typed as it says (`DECIMAL(5,2)`, `CHAR`: as many
            // characters as its value may print as), as MariaDB types it.
            let (ty, nullable) = match crate::functional_index::strip_nested(expr) {
                ast::Expr::Cast { .. }
                | ast::Expr::Convert {
                    data_type: Some(_), ..
                } => (declared, nullable || v.is_null()),
                // A number as written is typed by its digits, as MariaDB
                // types a literal (`0.5`: DECIMAL(2,1); `0`: INT(1)).
                x if is_number_literal(x) => (declared, v.is_null()),
                _ => (constant_column_type(&v, &declared), v.is_null()),
            };
            let decimals = match ty {
                SqlType::Double => fixed,
                _ => None,
            };
            columns.push(OutputColumn {
                name,
                table: String::new(),
                origin: None,
                ty,
                nullable,
                decimals,
                stored: false,
            });
            for var in assigns.iter().flat_map(|a| &a.variables) {
                s.user_variables.insert(var.clone(), v.clone());
            }
            row.push(v);
        }
        Ok(Some(Output::Rows {
            columns,
            rows: vec![row].into(),
        }))
    }
}

/// `sql` without a trailing `LOCK IN SHARE MODE` or a `SQL_NO_CACHE` hint,
/// if it has either.
pub(crate) fn strip_share_mode(sql: &str) -> Option<String> {
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
pub(crate) fn has_share_mode(sql: &str) -> bool {
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
pub(crate) fn takes_read_view(s: &Session) -> bool {
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

pub(crate) fn strip_locks(q: &ast::Query) -> ast::Query {
    let mut q = q.clone();
    q.locks.clear();
    q
}

/// A SELECT stops after the session's `max_execution_time` (milliseconds;
/// 0, the default, is no limit) with 3024, as in MySQL.
pub(crate) fn select_deadline(s: &Session) -> ladle_dataflow::interrupt::WatchGuard {
    let ms = match s.variables.get("max_execution_time") {
        Some(Value::Int(n)) => u64::try_from(*n).unwrap_or(0),
        Some(Value::UInt(n)) => *n,
        _ => 0,
    };
    let deadline =
        (ms > 0).then(|| std::time::Instant::now() + std::time::Duration::from_millis(ms));
    ladle_dataflow::interrupt::watch_deadline(deadline)
}

/// The type of a column of a constant SELECT the shim answers, from the
/// value it computed (the declared type gives the fraction digits): as
/// MariaDB describes a computed column (BIGINT, DECIMAL(65, s), ...), not
/// as a literal is typed (`ladle_dataflow`'s literal typing, whose widths
/// follow the digits).
fn constant_column_type(v: &Value, declared: &SqlType) -> SqlType {
    match v {
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
        // The fraction digits the expression declares
        // (`TIMESTAMP('.. 10:11:12.5')` has one).
        Value::DateTime(_) => SqlType::DateTime {
            fsp: declared_fsp(declared),
        },
        Value::Time(_) => SqlType::Time {
            fsp: declared_fsp(declared),
        },
        _ => SqlType::VarChar(255),
    }
}

/// Whether `e` is a number as written, or its negation (`-0.5`).
fn is_number_literal(e: &ast::Expr) -> bool {
    match crate::functional_index::strip_nested(e) {
        ast::Expr::Value(ast::Value::Number(..)) => true,
        ast::Expr::UnaryOp {
            op: ast::UnaryOperator::Minus,
            expr,
        } => is_number_literal(expr),
        _ => false,
    }
}

/// The fractional-second digits of a temporal type (0 for other types).
fn declared_fsp(ty: &SqlType) -> u8 {
    match ty {
        SqlType::DateTime { fsp } | SqlType::Timestamp { fsp } | SqlType::Time { fsp } => *fsp,
        _ => 0,
    }
}
