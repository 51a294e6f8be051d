//! Correlated subqueries in UPDATE and DELETE (Django's
//! `update(x=Subquery(... OuterRef("pk") ...))`, `filter(~Q(id__in=...))`):
//! `UPDATE t SET c = (SELECT MAX(u.x) FROM u WHERE u.t_id = t.id)`,
//! `DELETE FROM t WHERE NOT EXISTS (SELECT 1 FROM u WHERE u.t_id = t.id)`.
//!
//! Uncorrelated subqueries are evaluated once, before any row is visited
//! ([`super::write::inline_subqueries`]); the correlated ones left are
//! computed for every row at once by one SELECT over the target table,
//! planned by the view engine as any correlated SELECT is: `SELECT
//! <identity>, <subquery 1>, ... FROM <target> WHERE <the statement's
//! WHERE>`. Each subquery (a scalar subquery, `x [NOT] IN (SELECT ...)`,
//! `[NOT] EXISTS (...)`) is one value per row there. The statement then
//! writes as usual, each matched row's WHERE and SET compiled with its own
//! subquery values in place (the row's identity finds them); a row the
//! SELECT did not return is not matched.
//!
//! The SELECT runs before any row changes, so a subquery reading the
//! target table itself sees the table as it was (MariaDB 10.3+ allows that
//! and answers so; MySQL refuses it with 1093). Single-table UPDATE's SET
//! is evaluated left to right, a later value seeing an earlier assignment;
//! a correlated subquery that reads a column an earlier assignment sets is
//! refused (1235) rather than computed from the old value.

use std::collections::HashMap;

use ladle_common::{Row, TableSchema, Value};
use ladle_dataflow::{compile_row_expr, DataflowError, RowExpr};
use ladle_storage::ScanSpec;
use sqlparser::ast::{self, Expr, Ident, SelectItem, SetExpr, TableFactor, TableWithJoins};

use super::write::{compile_assignments, identity, identity_columns, same_name};
use crate::error::{Result, ShimError};
use crate::exec::Engine;
use crate::output::Output;
use crate::session::Session;

/// The prefix of the column a correlated subquery is replaced by until
/// its value for a row is known.
const MARKER: &str = "__ladle_row_subquery_";

/// A row's WHERE and SET, compiled with its subquery values in place.
pub(super) struct RowExprs {
    pub(super) pred: Option<RowExpr>,
    /// (column, value) in SET's order (empty for a DELETE).
    pub(super) set: Vec<(usize, RowExpr)>,
}

/// Per row the SELECT matched (by identity): its [`RowExprs`].
pub(super) struct PerRow {
    ident_cols: Vec<usize>,
    rows: HashMap<Vec<Value>, RowExprs>,
    /// The columns SET assigns (those of every row's `set`).
    columns: Vec<usize>,
}

impl PerRow {
    /// The expressions of `row`, `None` for a row the statement does not
    /// match.
    pub(super) fn of(&self, row: &Row) -> Option<&RowExprs> {
        self.rows.get(&identity(row, &self.ident_cols))
    }

    /// Whether the statement's WHERE holds for `row`.
    pub(super) fn matches(&self, row: &Row) -> std::result::Result<bool, DataflowError> {
        match self.of(row) {
            None => Ok(false),
            Some(RowExprs { pred: None, .. }) => Ok(true),
            Some(RowExprs { pred: Some(p), .. }) => p.eval_predicate(row),
        }
    }

    /// The columns SET assigns.
    pub(super) fn columns(&self) -> &[usize] {
        &self.columns
    }

    /// The rows the statement visits: those the SELECT matched, by key
    /// in key order (a table without a primary key: by its WHERE's key
    /// conditions, `selection`).
    pub(super) fn scan(&self, schema: &TableSchema, selection: Option<&Expr>) -> ScanSpec {
        match &schema.primary_key {
            Some(pk) if !pk.is_empty() => {
                let mut keys: Vec<Vec<Value>> = self.rows.keys().cloned().collect();
                keys.sort();
                ScanSpec::Keys(keys)
            }
            _ => super::write::scan_spec(schema, selection),
        }
    }
}

/// An UPDATE's or DELETE's correlated subqueries, computed per row.
/// `target`: the statement's table (as written, with its alias);
/// `assignments`: SET (none for a DELETE); `selection`: the WHERE, both
/// with their uncorrelated subqueries already inlined.
pub(super) fn per_row(
    e: &Engine,
    s: &mut Session,
    target: &TableWithJoins,
    schema: &TableSchema,
    assignments: &[ast::Assignment],
    selection: Option<&Expr>,
) -> Result<PerRow> {
    let qualifier = qualifier(target)?;
    refuse_reading_earlier_assignments(&qualifier, schema, assignments)?;
    let mut subqueries = Vec::new();
    let mut assignments = assignments.to_vec();
    for a in &mut assignments {
        take_subqueries(&mut a.value, &mut subqueries);
    }
    let mut pred = selection.cloned();
    if let Some(w) = &mut pred {
        take_subqueries(w, &mut subqueries);
    }
    let ident_cols = identity_columns(schema);
    let mut items = Vec::with_capacity(ident_cols.len() + subqueries.len());
    for &c in &ident_cols {
        let column = schema
            .columns
            .get(c)
            .ok_or_else(|| ShimError::Internal(format!("no column {c}")))?;
        let mut parts = qualifier.clone();
        parts.push(Ident::with_quote('`', column.name.clone()));
        items.push(Expr::CompoundIdentifier(parts));
    }
    let nulls = vec![Value::Null; subqueries.len()];
    items.extend(subqueries);
    let query = select_over(items, vec![target.clone()], selection.cloned())?;
    let rows = match e.select_for_write(s, &query)? {
        Output::Rows { rows, .. } => rows.into_vec(),
        _ => return Err(ShimError::Internal("an UPDATE/DELETE's subqueries".into())),
    };
    let columns = compile_assignments(schema, &with_values_all(&assignments, &nulls))?
        .into_iter()
        .map(|(pos, _)| pos)
        .collect();
    let n = ident_cols.len();
    let mut by_row = HashMap::with_capacity(rows.len());
    for row in rows {
        let (ident, values) = row.split_at(n.min(row.len()));
        if by_row.contains_key(ident) {
            continue;
        }
        let row_pred = pred
            .as_ref()
            .map(|w| compile_row_expr(&with_values(w, values), Some(schema)))
            .transpose()?;
        let set = compile_assignments(schema, &with_values_all(&assignments, values))?;
        by_row.insert(
            ident.to_vec(),
            RowExprs {
                pred: row_pred,
                set,
            },
        );
    }
    Ok(PerRow {
        ident_cols,
        rows: by_row,
        columns,
    })
}

/// `assignments` with each marker replaced by its value among `values`.
fn with_values_all(assignments: &[ast::Assignment], values: &[Value]) -> Vec<ast::Assignment> {
    assignments
        .iter()
        .map(|a| ast::Assignment {
            target: a.target.clone(),
            value: with_values(&a.value, values),
        })
        .collect()
}

/// How the statement names its table: its alias, else its name as written.
fn qualifier(target: &TableWithJoins) -> Result<Vec<Ident>> {
    match &target.relation {
        TableFactor::Table {
            alias: Some(alias), ..
        } => Ok(vec![alias.name.clone()]),
        TableFactor::Table { name, .. } => Ok(name.0.clone()),
        _ => Err(ShimError::Unsupported(
            "UPDATE/DELETE of a derived table".into(),
        )),
    }
}

/// Replaces each subquery of `x` (scalar, `[NOT] IN`, `[NOT] EXISTS`) by
/// a marker column, numbered after those already in `taken`, and adds it
/// to `taken`.
fn take_subqueries(x: &mut Expr, taken: &mut Vec<Expr>) {
    struct Take<'a>(&'a mut Vec<Expr>);
    impl ast::VisitorMut for Take<'_> {
        type Break = ();
        fn pre_visit_expr(&mut self, x: &mut Expr) -> std::ops::ControlFlow<()> {
            if matches!(
                x,
                Expr::Subquery(_) | Expr::InSubquery { .. } | Expr::Exists { .. }
            ) {
                let marker = Expr::Identifier(Ident::new(format!("{MARKER}{}", self.0.len())));
                self.0.push(std::mem::replace(x, marker));
            }
            std::ops::ControlFlow::Continue(())
        }
    }
    let _ = ast::VisitMut::visit(x, &mut Take(taken));
}

/// `x` with each marker replaced by its value among `values`.
fn with_values(x: &Expr, values: &[Value]) -> Expr {
    let mut x = x.clone();
    let _ = ast::visit_expressions_mut(&mut x, |e| {
        if let Expr::Identifier(id) = e {
            let at = id
                .value
                .strip_prefix(MARKER)
                .and_then(|n| n.parse::<usize>().ok());
            if let Some(v) = at.and_then(|n| values.get(n)) {
                *e = ladle_dataflow::value_expr(v);
            }
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    x
}

/// `SELECT items FROM from WHERE selection`, each item named apart (`c0`,
/// `c1`, ...): the one query that reads what an UPDATE or DELETE needs
/// per row (here, and for multi-table UPDATE).
pub(super) fn select_over(
    items: Vec<Expr>,
    from: Vec<TableWithJoins>,
    selection: Option<Expr>,
) -> Result<ast::Query> {
    let mut parser = crate::sqltext::parser("SELECT 1")?;
    let mut query = crate::sqltext::contain_parser_panic(|| parser.parse_query())?;
    let SetExpr::Select(select) = query.body.as_mut() else {
        return Err(ShimError::Internal("SELECT 1 parsed as no SELECT".into()));
    };
    select.projection = items
        .into_iter()
        .enumerate()
        .map(|(i, expr)| SelectItem::ExprWithAlias {
            expr,
            alias: Ident::new(format!("c{i}")),
        })
        .collect();
    select.from = from;
    select.selection = selection;
    Ok(*query)
}

/// Refuses (1235) a correlated subquery in SET that reads a column an
/// earlier assignment sets: single-table UPDATE gives it the new value
/// (SET runs left to right), which the SELECT computing the subqueries
/// before the write cannot see. A column named without its table counts
/// as the target's (it may be the subquery's own: refused all the same).
fn refuse_reading_earlier_assignments(
    qualifier: &[Ident],
    schema: &TableSchema,
    assignments: &[ast::Assignment],
) -> Result<()> {
    let mut assigned: Vec<String> = Vec::new();
    for a in assignments {
        let mut subqueries = Vec::new();
        take_subqueries(&mut a.value.clone(), &mut subqueries);
        let reads_assigned = |parts: &[Ident]| {
            let Some((column, table)) = parts.split_last() else {
                return false;
            };
            let ours = table.is_empty()
                || same_name(table, qualifier)
                || (qualifier.len() == 2 && same_name(table, &qualifier[1..]));
            ours && assigned
                .iter()
                .any(|c| c.eq_ignore_ascii_case(&column.value))
        };
        let found = ast::visit_expressions(&subqueries, |x| {
            let hit = match x {
                Expr::Identifier(id) => reads_assigned(std::slice::from_ref(id)),
                Expr::CompoundIdentifier(parts) => reads_assigned(parts),
                _ => false,
            };
            if hit {
                std::ops::ControlFlow::Break(())
            } else {
                std::ops::ControlFlow::Continue(())
            }
        });
        if found.is_break() {
            return Err(ShimError::Unsupported(
                "a correlated subquery in SET reading a column an earlier assignment sets".into(),
            ));
        }
        if let ast::AssignmentTarget::ColumnName(n) = &a.target {
            let name = crate::sqltext::last_part(n);
            if schema.column_index(&name).is_some() {
                assigned.push(name);
            }
        }
    }
    Ok(())
}
