//! `WITH RECURSIVE`: answered per execution, not maintained. A recursive
//! CTE would need a cyclic dataflow graph to be kept up to date, so each
//! execution computes it afresh by iteration, as MySQL does:
//!
//! 1. Its body's UNION chain splits into anchor branches (not naming the
//!    CTE; they come first) and recursive branches (naming it once, in
//!    their FROM clause). The anchor's result types the CTE's columns
//!    (MySQL's rule): a hidden, session-private TEMPORARY table with
//!    those columns, never written, stands for the CTE in the queries
//!    below.
//! 2. Each iteration reads the recursive branches with the hidden table
//!    holding the previous iteration's new rows, laid over it as a
//!    transaction's own writes are ([`ladle_dataflow::PreparedQuery::execute_overlay`]).
//!    The rows are converted to the column types as an INSERT converts
//!    them (strict mode: a value too long is 1406); with UNION DISTINCT
//!    rows already produced (compared by the columns' collations) are
//!    dropped. It stops when an iteration adds nothing, or fails with
//!    3636 past `@@cte_max_recursion_depth` iterations. The rows held
//!    count against the statement's memory budget; KILL and
//!    `max_execution_time` stop it between and within iterations.
//! 3. Later CTEs and the outer query read the hidden table holding every
//!    row. The views made over hidden tables and the tables themselves
//!    are dropped when the statement ends, also on error.
//!
//! The hidden tables are local tables (`Storage::create_local_table`:
//! in the node's memory only, with ids of their own), so on a cluster node
//! they leave the catalog the schema log keeps in step on every node as it
//! was: a replica answers from its own applied data; a write with a
//! recursive CTE (INSERT ... WITH RECURSIVE) is forwarded to the primary
//! as any write, and computed there.
//!
//! MySQL's restrictions on the recursive branches give MySQL's errors:
//! 3573 (no UNION), 3574 (anchor not first), 3575 (aggregation, window
//! functions, GROUP BY), 3576 (the CTE on the inner side of an outer
//! join), 3577 (named more than once or in a subquery); ORDER BY, LIMIT
//! and DISTINCT in a recursive branch are 1235, as in MySQL 8.0.

use std::collections::HashSet;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ladle_common::{Collation, Row, RowDelta, TableDeltas, TableId, TableSchema, Value};
use ladle_dataflow::{OutputColumn, PreparedQuery};
use sqlparser::ast::{self, SetExpr, Statement, VisitMut, VisitorMut};

use crate::error::{MysqlCode, Result, ShimError, WireError};
use crate::exec::Engine;
use crate::output::Output;
use crate::session::Session;

/// `Recursive Common Table Expression '%s' should contain a UNION`.
const ER_CTE_RECURSIVE_REQUIRES_UNION: MysqlCode = MysqlCode {
    errno: 3573,
    sqlstate: "HY000",
};
/// Anchor branches must come first.
const ER_CTE_RECURSIVE_REQUIRES_NONRECURSIVE_FIRST: MysqlCode = MysqlCode {
    errno: 3574,
    sqlstate: "HY000",
};
/// No aggregation or window functions in a recursive branch.
const ER_CTE_RECURSIVE_FORBIDS_AGGREGATION: MysqlCode = MysqlCode {
    errno: 3575,
    sqlstate: "HY000",
};
/// The recursive table on the inner side of an outer join.
const ER_CTE_RECURSIVE_FORBIDDEN_JOIN_ORDER: MysqlCode = MysqlCode {
    errno: 3576,
    sqlstate: "HY000",
};
/// The recursive table named more than once, or in a subquery.
const ER_CTE_RECURSIVE_REQUIRES_SINGLE_REFERENCE: MysqlCode = MysqlCode {
    errno: 3577,
    sqlstate: "HY000",
};
/// Past `@@cte_max_recursion_depth`.
const ER_CTE_MAX_RECURSION_DEPTH: MysqlCode = MysqlCode {
    errno: 3636,
    sqlstate: "HY000",
};

/// Numbers the hidden tables (unique in the server's life; a restart
/// drops any left behind, as every temporary table).
static HIDDEN_SEQ: AtomicU64 = AtomicU64::new(0);

/// The prefix of hidden tables' names.
const HIDDEN_PREFIX: &str = "__ladle_cte_";

/// Answers `q`, whose WITH is RECURSIVE.
pub(crate) fn select(e: &Engine, s: &mut Session, q: &ast::Query) -> Result<Output> {
    select_homed(e, s, q, None)
}

/// [`select`] for a statement that also names database `home` outside
/// `q` (`INSERT INTO db.t WITH RECURSIVE ...`): the hidden tables may live
/// there when there is no current database and `q` names none.
pub(crate) fn select_homed(
    e: &Engine,
    s: &mut Session,
    q: &ast::Query,
    home: Option<String>,
) -> Result<Output> {
    let mut q = q.clone();
    let Some(mut with) = q.with.take() else {
        return e.select(s, &q);
    };
    if !with
        .cte_tables
        .iter()
        .any(|c| names_table(&c.query, &c.alias.name.value))
    {
        // Nothing recursive after all: an ordinary WITH.
        with.recursive = false;
        q.with = Some(with);
        return e.select(s, &q);
    }
    // The hidden tables live in the current database, else in the first
    // one the query names, else in the statement's `home`.
    let db = match s
        .database
        .clone()
        .or_else(|| first_database(&q, &with))
        .or(home)
    {
        Some(d) => d,
        None => return Err(ShimError::NoDatabase),
    };
    let _budget = e.dataflow.watch_statement_memory();
    let mut run = Run {
        e,
        db,
        plain: Vec::new(),
        hidden: Vec::new(),
        created: Vec::new(),
        views: Vec::new(),
    };
    let out = run.answer(s, with.cte_tables, q);
    run.clean_up();
    out
}

/// A recursive CTE once computed: the hidden table standing for it.
struct Hidden {
    /// The CTE's name.
    name: String,
    schema: Arc<TableSchema>,
    /// Every row.
    rows: Vec<Row>,
}

/// One statement's evaluation.
struct Run<'a> {
    e: &'a Engine,
    /// Where the hidden tables live (the session's database).
    db: String,
    /// The non-recursive CTEs so far, for the queries after them.
    plain: Vec<ast::Cte>,
    /// The recursive CTEs computed so far.
    hidden: Vec<Hidden>,
    /// The hidden tables created (dropped at the end).
    created: Vec<(String, TableId)>,
    /// Views made over hidden tables (dropped at the end).
    views: Vec<PreparedQuery>,
}

impl Run<'_> {
    fn answer(
        &mut self,
        s: &mut Session,
        ctes: Vec<ast::Cte>,
        outer: ast::Query,
    ) -> Result<Output> {
        for cte in ctes {
            if names_table(&cte.query, &cte.alias.name.value) {
                self.recursive(s, cte)?;
            } else {
                self.plain.push(cte);
            }
        }
        let (columns, rows) = self.read(s, outer, None)?;
        Ok(Output::Rows {
            columns,
            rows: rows.into(),
        })
    }

    /// Computes recursive CTE `cte` into a hidden table.
    fn recursive(&mut self, s: &mut Session, cte: ast::Cte) -> Result<()> {
        let name = cte.alias.name.value.clone();
        let parts = Parts::split(&name, &cte.query)?;
        let anchor = self.query_of(&cte.query, parts.anchor);
        let (columns, anchor_rows) = self.read(s, anchor, None)?;
        let names: Vec<String> = if cte.alias.columns.is_empty() {
            columns.iter().map(|c| c.name.clone()).collect()
        } else if cte.alias.columns.len() == columns.len() {
            cte.alias.columns.iter().map(|c| c.value.clone()).collect()
        } else {
            return Err(wire(
                crate::error::MysqlCode {
                    errno: 1353,
                    sqlstate: "HY000",
                },
                "In definition of view, derived table or common table expression, \
                 SELECT list and column names list have different column counts"
                    .into(),
            ));
        };
        let schema = self.create_hidden(s, &columns, &names)?;
        let mut seen = Seen::new(&schema, parts.distinct);
        let mut work = seen.keep_new(convert(s, &schema, anchor_rows, 0)?);
        ladle_dataflow::interrupt::charge(&work)?;
        let mut all = work.clone();
        let limit = crate::vars::cte_max_recursion_depth(s, &self.e.facts);
        let step = self.query_of(&cte.query, parts.recursive);
        let step = rename(step, &name, &self.hidden_ref(&schema));
        let step = self.prepare(self.bound(step))?;
        let mut iteration: u64 = 0;
        while !work.is_empty() {
            iteration += 1;
            if iteration > limit {
                return Err(wire(
                    ER_CTE_MAX_RECURSION_DEPTH,
                    format!(
                        "Recursive query aborted after {iteration} iterations. \
                         Try increasing @@cte_max_recursion_depth to a larger value."
                    ),
                ));
            }
            ladle_dataflow::interrupt::check()?;
            let rows = self.execute(s, &step, Some((schema.id, &work)))?;
            work = seen.keep_new(convert(s, &schema, rows, all.len())?);
            ladle_dataflow::interrupt::charge(&work)?;
            all.extend(work.iter().cloned());
        }
        self.hidden.push(Hidden {
            name,
            schema,
            rows: all,
        });
        Ok(())
    }

    /// `body` as a query with `template`'s (a CTE body's) WITH and
    /// without its ORDER BY and LIMIT.
    fn query_of(&self, template: &ast::Query, body: SetExpr) -> ast::Query {
        let mut q = template.clone();
        q.body = Box::new(body);
        q.order_by = None;
        q.limit = None;
        q.offset = None;
        q
    }

    /// The (qualified) name of hidden table `schema`.
    fn hidden_ref(&self, schema: &TableSchema) -> ast::ObjectName {
        ast::ObjectName(vec![
            ast::Ident::with_quote('`', self.db.clone()),
            ast::Ident::with_quote('`', schema.name.clone()),
        ])
    }

    /// Creates a hidden table with the anchor's column types (every column
    /// nullable) and `names`: a local table (in this node's memory only,
    /// with ids of its own: a cluster's nodes, which assign table ids in
    /// step by replaying the same schema changes, stay in step), private
    /// to the session as a TEMPORARY table is.
    fn create_hidden(
        &mut self,
        s: &mut Session,
        columns: &[OutputColumn],
        names: &[String],
    ) -> Result<Arc<TableSchema>> {
        let n = HIDDEN_SEQ.fetch_add(1, Ordering::Relaxed);
        let table = format!("{HIDDEN_PREFIX}{}_{n}", s.connection_id);
        let defs: Vec<String> = columns
            .iter()
            .zip(names)
            .map(|(c, name)| format!("`{}` {} NULL", name.replace('`', "``"), c.ty.sql_name()))
            .collect();
        // The column types as CREATE TABLE reads them.
        let sql = format!("CREATE TEMPORARY TABLE `{table}` ({})", defs.join(", "));
        let Some(Statement::CreateTable(ct)) = crate::sqltext::parse(&sql)?.into_iter().next()
        else {
            return Err(ShimError::Parse(sql));
        };
        let schema = TableSchema {
            id: 0,
            database: self.db.clone(),
            name: table.clone(),
            columns: crate::ddl::declared_columns(self.e, s, &table, &ct.columns)?,
            primary_key: None,
            indexes: Vec::new(),
            version: 0,
        };
        if !self.e.storage.databases().contains(&self.db) {
            return Err(ShimError::UnknownDatabase(self.db.clone()));
        }
        let schema = self.e.storage.create_local_table(schema)?;
        self.e
            .temporary_tables
            .add(&self.db, &table, s.connection_id, schema.id);
        // Dropped at the end, also when the CTE fails below.
        self.created.push((table, schema.id));
        Ok(schema)
    }

    /// `q` preceded by the non-recursive CTEs so far, each finished
    /// recursive CTE it names reading its hidden table.
    fn bound(&self, mut q: ast::Query) -> ast::Query {
        if !self.plain.is_empty() {
            // The CTE body's own WITH (if any) after them: its names are
            // the nearer ones.
            let own = q.with.take();
            let mut cte_tables = self.plain.clone();
            cte_tables.extend(own.iter().flat_map(|w| w.cte_tables.iter().cloned()));
            q.with = Some(ast::With {
                recursive: own.is_some_and(|w| w.recursive),
                cte_tables,
            });
        }
        for h in &self.hidden {
            q = rename(q, &h.name, &self.hidden_ref(&h.schema));
        }
        q
    }

    /// Reads `q` with every finished recursive CTE bound to its hidden
    /// table; `work`: the table of the CTE being computed and the rows it
    /// holds for this read.
    fn read(
        &mut self,
        s: &mut Session,
        q: ast::Query,
        work: Option<(TableId, &[Row])>,
    ) -> Result<(Vec<OutputColumn>, Vec<Row>)> {
        let q = self.bound(q);
        let pq = match self.prepare(q.clone()) {
            Ok(pq) => pq,
            // A query of constants the view engine does not plan, which
            // the shim answers itself.
            Err(ShimError::Dataflow(err)) => match self.e.session_select(s, &q)? {
                Some(Output::Rows { columns, rows }) => return Ok((columns, rows.into_vec())),
                _ => return Err(ShimError::Dataflow(err)),
            },
            Err(err) => return Err(err),
        };
        let rows = self.execute(s, &pq, work)?;
        Ok((pq.columns().to_vec(), rows))
    }

    /// The view answering `q`; remembered for dropping if it reads a
    /// hidden table.
    fn prepare(&mut self, q: ast::Query) -> Result<PreparedQuery> {
        let pq = self.e.dataflow.prepare(&self.db, &q)?;
        if pq.tables().iter().any(|t| self.is_hidden(*t)) {
            self.views.push(pq.clone());
        }
        Ok(pq)
    }

    fn is_hidden(&self, t: TableId) -> bool {
        self.created.iter().any(|(_, id)| *id == t)
    }

    /// Runs `pq` (no parameters), the hidden tables holding their rows.
    fn execute(
        &self,
        s: &Session,
        pq: &PreparedQuery,
        work: Option<(TableId, &[Row])>,
    ) -> Result<Vec<Row>> {
        let tables = pq.tables();
        if !tables.iter().any(|t| self.is_hidden(*t)) {
            return Ok(self.e.read_rows(s, pq, &[], false, false)?.into_vec());
        }
        self.e.await_session_writes(s).map_err(ShimError::Wire)?;
        let mut overlay = Vec::new();
        for h in &self.hidden {
            if tables.contains(&h.schema.id) {
                overlay.push(inserts(h.schema.id, &h.rows));
            }
        }
        if let Some((id, rows)) = work {
            overlay.push(inserts(id, rows));
        }
        let base: Vec<TableId> = tables
            .iter()
            .copied()
            .filter(|t| !self.is_hidden(*t))
            .collect();
        let read_view = s
            .transaction
            .as_ref()
            .and_then(|tx| tx.read_view(|| self.e.storage.read_view()));
        if let Some(view) = read_view {
            check_versions(self.e, view, &base)?;
            let mut own = crate::dml::overlay::snapshot_overlay(self.e, s, &base, view)?;
            own.extend(overlay);
            return Ok(pq.execute_snapshot(&[], view, &own)?);
        }
        if s.in_transaction() {
            let mut own = crate::dml::overlay::transaction_overlay(self.e, s, &base)?;
            own.extend(overlay);
            return Ok(pq.execute_overlay(&[], &own)?);
        }
        Ok(pq.execute_overlay(&[], &overlay)?)
    }

    /// Drops the views over hidden tables and the tables.
    fn clean_up(&mut self) {
        for pq in self.views.drain(..) {
            self.e.dataflow.discard(&pq);
        }
        for (table, id) in self.created.drain(..) {
            self.e.temporary_tables.remove(&self.db, &table);
            match self.e.storage.drop_table(&self.db, &table) {
                Ok(_) => self.e.dataflow.table_changed(id),
                Err(err) => {
                    tracing::warn!(%table, %err, "dropping a recursive CTE's table failed")
                }
            }
        }
    }
}

/// A table created after a REPEATABLE READ view was taken cannot be read
/// in it: 1412, as [`Engine::read_rows`] says.
fn check_versions(e: &Engine, view: &ladle_storage::ReadView, tables: &[TableId]) -> Result<()> {
    for &t in tables {
        let now = e.storage.table_by_id(t).map(|x| x.version);
        if view.schema(t).map(|x| x.version) != now {
            return Err(wire(
                crate::error::ER_TABLE_DEF_CHANGED,
                "Table definition has changed, please retry transaction".into(),
            ));
        }
    }
    Ok(())
}

fn inserts(table: TableId, rows: &[Row]) -> TableDeltas {
    TableDeltas {
        table,
        deltas: rows.iter().cloned().map(RowDelta::Insert).collect(),
    }
}

fn wire(code: MysqlCode, message: String) -> ShimError {
    ShimError::Wire(WireError { code, message })
}

/// `rows` converted to the hidden table's column types, as an INSERT
/// converts them: in strict mode a value that does not fit is the error
/// the INSERT would fail with; otherwise it is adjusted, with a warning
/// numbering the row after the `before` rows the CTE holds already.
fn convert(
    s: &mut Session,
    schema: &TableSchema,
    rows: Vec<Row>,
    before: usize,
) -> Result<Vec<Row>> {
    let strict = crate::vars::strict_mode(s);
    let mut out = Vec::with_capacity(rows.len());
    for (i, mut row) in rows.into_iter().enumerate() {
        if row.len() != schema.columns.len() {
            return Err(ladle_storage::StorageError::ColumnCount.into());
        }
        if !strict {
            for (code, message) in
                crate::dml::write::adjust_ignored_row(schema, &mut row, None, before + i + 1, true)
            {
                s.add_warning("Warning", code, message);
            }
        }
        let converted: std::result::Result<Row, _> = row
            .iter()
            .zip(&schema.columns)
            .map(|(v, c)| ladle_common::coerce(v, c))
            .collect();
        out.push(converted.map_err(ladle_storage::StorageError::from)?);
    }
    Ok(out)
}

/// The rows produced so far, by their values as the columns compare
/// them, when the CTE's UNION is DISTINCT.
struct Seen {
    colls: Vec<Collation>,
    keys: Option<HashSet<Vec<Value>>>,
}

impl Seen {
    fn new(schema: &TableSchema, distinct: bool) -> Seen {
        Seen {
            colls: schema
                .columns
                .iter()
                .map(|c| c.compare_collation())
                .collect(),
            keys: distinct.then(HashSet::new),
        }
    }

    /// `rows` without those produced before (and repeats among them).
    fn keep_new(&mut self, rows: Vec<Row>) -> Vec<Row> {
        let Some(keys) = self.keys.as_mut() else {
            return rows;
        };
        rows.into_iter()
            .filter(|r| {
                let key = r
                    .iter()
                    .zip(&self.colls)
                    .map(|(v, c)| v.key_normalized(*c))
                    .collect();
                keys.insert(key)
            })
            .collect()
    }
}

/// A recursive CTE's body split: its anchor and recursive branches, and
/// whether its UNION drops repeated rows.
struct Parts {
    anchor: SetExpr,
    recursive: SetExpr,
    distinct: bool,
}

impl Parts {
    fn split(name: &str, body: &ast::Query) -> Result<Parts> {
        let mut branches = Vec::new();
        let mut quantifiers = Quantifiers::default();
        flatten(&body.body, &mut branches, &mut quantifiers);
        if quantifiers.all && quantifiers.distinct {
            // MySQL dedups the branches up to the last UNION DISTINCT
            // only; MariaDB refuses the mix, as Ladle does.
            return Err(ShimError::Unsupported(
                "mix of UNION ALL and UNION DISTINCT in a recursive Common Table Expression".into(),
            ));
        }
        let distinct = quantifiers.distinct;
        if branches.len() < 2 {
            return Err(wire(
                ER_CTE_RECURSIVE_REQUIRES_UNION,
                format!("Recursive Common Table Expression '{name}' should contain a UNION"),
            ));
        }
        if body.order_by.is_some() || body.limit.is_some() || body.offset.is_some() {
            return Err(ShimError::Unsupported(
                "ORDER BY / LIMIT over UNION in recursive Common Table Expression".into(),
            ));
        }
        let first_recursive = branches
            .iter()
            .position(|b| names_table_in(b, name))
            .unwrap_or(branches.len());
        if first_recursive == 0
            || branches[first_recursive..]
                .iter()
                .any(|b| !names_table_in(b, name))
        {
            return Err(wire(
                ER_CTE_RECURSIVE_REQUIRES_NONRECURSIVE_FIRST,
                format!(
                    "Recursive Common Table Expression '{name}' should have one or more \
                     non-recursive query blocks followed by one or more recursive ones"
                ),
            ));
        }
        for b in &branches[first_recursive..] {
            check_recursive_branch(name, b)?;
        }
        let recursive = branches.split_off(first_recursive);
        Ok(Parts {
            anchor: union(branches, distinct),
            recursive: union(recursive, false),
            distinct,
        })
    }
}

/// Which UNIONs a chain has: ALL, DISTINCT (the default).
#[derive(Default)]
struct Quantifiers {
    all: bool,
    distinct: bool,
}

/// The branches of a UNION chain, left to right, and its UNIONs' kinds.
fn flatten(e: &SetExpr, out: &mut Vec<SetExpr>, quantifiers: &mut Quantifiers) {
    match e {
        SetExpr::SetOperation {
            op: ast::SetOperator::Union,
            set_quantifier,
            left,
            right,
        } => {
            if matches!(set_quantifier, ast::SetQuantifier::All) {
                quantifiers.all = true;
            } else {
                quantifiers.distinct = true;
            }
            flatten(left, out, quantifiers);
            flatten(right, out, quantifiers);
        }
        // A parenthesized branch: `(SELECT ...) UNION ALL (SELECT ...)`.
        SetExpr::Query(q)
            if q.with.is_none()
                && q.order_by.is_none()
                && q.limit.is_none()
                && q.offset.is_none() =>
        {
            flatten(&q.body, out, quantifiers)
        }
        other => out.push(other.clone()),
    }
}

/// `branches` (at least one) as one UNION (ALL unless `distinct`).
fn union(branches: Vec<SetExpr>, distinct: bool) -> SetExpr {
    let quantifier = if distinct {
        ast::SetQuantifier::Distinct
    } else {
        ast::SetQuantifier::All
    };
    let mut it = branches.into_iter();
    let Some(first) = it.next() else {
        unreachable!("a UNION of no branches");
    };
    it.fold(first, |left, right| SetExpr::SetOperation {
        op: ast::SetOperator::Union,
        set_quantifier: quantifier,
        left: Box::new(left),
        right: Box::new(right),
    })
}

/// MySQL's restrictions on a recursive branch.
fn check_recursive_branch(name: &str, b: &SetExpr) -> Result<()> {
    let single = || {
        wire(
            ER_CTE_RECURSIVE_REQUIRES_SINGLE_REFERENCE,
            format!(
                "In recursive query block of Recursive Common Table Expression '{name}', \
                 the recursive table must be referenced only once, and not in any subquery"
            ),
        )
    };
    let SetExpr::Select(sel) = b else {
        return Err(single());
    };
    let aggregation = || {
        wire(
            ER_CTE_RECURSIVE_FORBIDS_AGGREGATION,
            format!(
                "Recursive Common Table Expression '{name}' can contain neither aggregation \
                 nor window functions in recursive query block"
            ),
        )
    };
    let grouped = !matches!(&sel.group_by, ast::GroupByExpr::Expressions(v, _) if v.is_empty());
    if grouped || sel.having.is_some() || aggregates(sel) {
        return Err(aggregation());
    }
    if sel.distinct.is_some() {
        return Err(ShimError::Unsupported(
            "DISTINCT in recursive query block of Common Table Expression".into(),
        ));
    }
    // The top-level FROM items, in order: where the CTE is named.
    let mut top = Vec::new();
    for twj in &sel.from {
        top.push((is_named(&twj.relation, name), None));
        for j in &twj.joins {
            top.push((is_named(&j.relation, name), Some(&j.join_operator)));
        }
    }
    let direct = top.iter().filter(|(named, _)| *named).count();
    let mut all = Counter { name, count: 0 };
    let mut probe = SetExpr::Select(sel.clone());
    let _ = probe.visit(&mut all);
    if direct != 1 || all.count != 1 {
        return Err(single());
    }
    let at = top.iter().position(|(named, _)| *named).unwrap_or(0);
    let inner_side = matches!(top[at].1, Some(ast::JoinOperator::LeftOuter(_)))
        || top[at + 1..]
            .iter()
            .any(|(_, op)| matches!(op, Some(ast::JoinOperator::RightOuter(_))));
    if inner_side {
        return Err(wire(
            ER_CTE_RECURSIVE_FORBIDDEN_JOIN_ORDER,
            format!(
                "In recursive query block of Recursive Common Table Expression '{name}', the \
                 recursive table must neither be in the right argument of a LEFT JOIN, nor be \
                 forced to be non-first with join order hints"
            ),
        ));
    }
    Ok(())
}

/// Whether `sel` calls an aggregate or window function.
fn aggregates(sel: &ast::Select) -> bool {
    let mut found = false;
    let _ = ast::visit_expressions(sel, |e| {
        if let ast::Expr::Function(f) = e {
            if f.over.is_some() || crate::sqltext::is_aggregate_function(&f.name) {
                found = true;
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    });
    found
}

fn is_named(f: &ast::TableFactor, name: &str) -> bool {
    matches!(f, ast::TableFactor::Table { name: n, args: None, .. }
        if matches!(n.0.as_slice(), [t] if t.value.eq_ignore_ascii_case(name)))
}

/// Counts the FROM items naming `name` (anywhere, subqueries included).
struct Counter<'a> {
    name: &'a str,
    count: usize,
}

impl VisitorMut for Counter<'_> {
    type Break = ();
    fn pre_visit_table_factor(&mut self, f: &mut ast::TableFactor) -> ControlFlow<()> {
        if is_named(f, self.name) {
            self.count += 1;
        }
        ControlFlow::Continue(())
    }
}

/// The database of the first qualified table `q` or `with` names.
fn first_database(q: &ast::Query, with: &ast::With) -> Option<String> {
    let mut found = None;
    let mut probe = q.clone();
    probe.with = Some(with.clone());
    let _ = ast::visit_relations(&probe, |name| match name.0.as_slice() {
        [db, _] => {
            found = Some(db.value.clone());
            ControlFlow::Break(())
        }
        _ => ControlFlow::Continue(()),
    });
    found
}

/// Whether query `q` names table `name` (unqualified) anywhere.
fn names_table(q: &ast::Query, name: &str) -> bool {
    let mut c = Counter { name, count: 0 };
    let _ = q.clone().visit(&mut c);
    c.count > 0
}

fn names_table_in(b: &SetExpr, name: &str) -> bool {
    let mut c = Counter { name, count: 0 };
    let _ = b.clone().visit(&mut c);
    c.count > 0
}

/// `q` with each unqualified reference to `name` reading `table` instead,
/// under the alias it had (or `name`).
fn rename(mut q: ast::Query, name: &str, table: &ast::ObjectName) -> ast::Query {
    let mut r = Renamer { name, table };
    let _ = q.visit(&mut r);
    q
}

struct Renamer<'a> {
    name: &'a str,
    table: &'a ast::ObjectName,
}

impl VisitorMut for Renamer<'_> {
    type Break = ();
    fn pre_visit_table_factor(&mut self, f: &mut ast::TableFactor) -> ControlFlow<()> {
        if is_named(f, self.name) {
            if let ast::TableFactor::Table { name, alias, .. } = f {
                if alias.is_none() {
                    *alias = Some(ast::TableAlias {
                        name: name.0[0].clone(),
                        columns: Vec::new(),
                    });
                }
                *name = self.table.clone();
            }
        }
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(sql: &str) -> ast::Query {
        match crate::sqltext::parse(sql).unwrap().pop() {
            Some(Statement::Query(q)) => *q,
            _ => panic!("not a query"),
        }
    }

    fn cte_body(sql: &str) -> ast::Query {
        *query(sql).with.unwrap().cte_tables[0].query.clone()
    }

    fn split_err(sql: &str) -> u16 {
        match Parts::split("c", &cte_body(sql)) {
            Err(e) => e.mysql_code().errno,
            Ok(_) => 0,
        }
    }

    #[test]
    fn splits_anchor_from_recursive_branches() {
        let p = Parts::split(
            "c",
            &cte_body("WITH RECURSIVE c AS (SELECT 1 UNION SELECT 2 UNION SELECT n + 1 FROM c) SELECT * FROM c"),
        )
        .unwrap();
        assert!(p.distinct);
        assert_eq!(p.anchor.to_string(), "SELECT 1 UNION DISTINCT SELECT 2");
        assert_eq!(p.recursive.to_string(), "SELECT n + 1 FROM c");
    }

    #[test]
    fn refuses_what_mysql_refuses() {
        let w = |body: &str| format!("WITH RECURSIVE c AS ({body}) SELECT * FROM c");
        assert_eq!(split_err(&w("SELECT n FROM c")), 3573);
        assert_eq!(split_err(&w("SELECT n FROM c UNION SELECT 1")), 3574);
        assert_eq!(
            split_err(&w("SELECT 1 UNION ALL SELECT COUNT(*) FROM c")),
            3575
        );
        assert_eq!(
            split_err(&w(
                "SELECT 1 UNION ALL SELECT t.a FROM t LEFT JOIN c ON t.a = c.n"
            )),
            3576
        );
        assert_eq!(
            split_err(&w("SELECT 1 UNION ALL SELECT a.n FROM c AS a JOIN c AS b")),
            3577
        );
        assert_eq!(
            split_err(&w(
                "SELECT 1 UNION ALL SELECT n FROM t WHERE n IN (SELECT n FROM c)"
            )),
            3577
        );
        assert_eq!(
            split_err(&w("SELECT 1 UNION ALL SELECT DISTINCT n FROM c")),
            1235
        );
        assert_eq!(
            split_err(&w("SELECT 1 UNION SELECT 2 UNION ALL SELECT n FROM c")),
            1235
        );
        assert_eq!(
            split_err(&w("SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 3")),
            0
        );
    }

    #[test]
    fn references_read_the_hidden_table_under_their_alias() {
        let table = ast::ObjectName(vec![ast::Ident::new("d"), ast::Ident::new("h")]);
        let q = rename(
            query("SELECT c.n, x.n FROM c JOIN c AS x ON c.n = x.n JOIN d.c"),
            "c",
            &table,
        );
        assert_eq!(
            q.to_string(),
            "SELECT c.n, x.n FROM d.h AS c JOIN d.h AS x ON c.n = x.n JOIN d.c"
        );
    }
}
