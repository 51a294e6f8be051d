//! SELECT over the `information_schema` virtual tables
//! ([`super::information_schema`]): the tables' rows are joined (inner and
//! comma joins), filtered and projected by the view engine's evaluator with
//! the rows' values as literals ([`crate::vars::EvalContext`]), then sorted
//! and limited.

use std::cmp::Ordering;

use ladle_common::Value;
use ladle_dataflow::OutputColumn;
use sqlparser::ast::{self, Expr, SelectItem, SetExpr, TableFactor};

use super::filter::eval;
use super::information_schema::{build_vtable, is_info_schema_name};
use crate::error::{Result, ShimError};
use crate::exec::Engine;
use crate::output::{int_column, text_column, Output};
use crate::session::Session;
use crate::vars::{compare, truth, EvalContext};

fn is_count(e: &Expr) -> bool {
    matches!(e, Expr::Function(f) if f.name.to_string().eq_ignore_ascii_case("count"))
}

/// An output row with the source row it came from.
type OutAndSource = (Vec<Value>, Vec<Value>);

/// Evaluates a SELECT over information_schema tables.
pub fn information_schema_select(e: &Engine, s: &mut Session, q: &ast::Query) -> Result<Output> {
    let s: &Session = s;
    // As a read of a table: after the session's writes made on a
    // cluster's primary (TABLE_ROWS, AUTO_INCREMENT, schema).
    e.await_session_writes(s).map_err(ShimError::Wire)?;
    let (names, rows) = select_rows(e, s, q)?;
    let columns = result_columns(&names, &rows);
    Ok(Output::Rows {
        columns,
        rows: rows.into(),
    })
}

/// The result of a SELECT over information_schema tables (or derived
/// tables over them): the output columns' names and the rows.
fn select_rows(e: &Engine, s: &Session, q: &ast::Query) -> Result<(Vec<String>, Vec<Vec<Value>>)> {
    let SetExpr::Select(sel) = q.body.as_ref() else {
        return Err(ShimError::Unsupported(
            "set operations over information_schema".into(),
        ));
    };
    let mut source = Source::join(e, s, sel)?;
    let kept = source.take_matching(e, s)?;
    if let Some(count) = count_only(sel, kept.len()) {
        return Ok(count);
    }
    let projection = Projection::of(sel, &source.cols);
    let mut result = projection.apply(e, s, &source.cols, kept)?;
    if matches!(sel.distinct, Some(ast::Distinct::Distinct)) {
        let mut seen: Vec<Vec<Value>> = Vec::new();
        result.retain(|(o, _)| {
            if seen.contains(o) {
                false
            } else {
                seen.push(o.clone());
                true
            }
        });
    }
    if let Some(ob) = &q.order_by {
        result = order_rows(e, s, &source.cols, &projection.out_names, ob, result)?;
    }
    let mut out_rows: Vec<Vec<Value>> = result.into_iter().map(|(o, _)| o).collect();
    if let Some(off) = &q.offset {
        let n = e.eval_constant(s, &off.value)?.as_i64().unwrap_or(0).max(0) as usize;
        out_rows.drain(..n.min(out_rows.len()));
    }
    if let Some(l) = &q.limit {
        let n = e.eval_constant(s, l)?.as_i64().unwrap_or(i64::MAX).max(0) as usize;
        out_rows.truncate(n);
    }
    Ok((projection.out_names, out_rows))
}

/// The rows of a SELECT's FROM clause over information_schema tables (their
/// cross product), with the conditions they must meet: the joins' ON and
/// the WHERE.
struct Source<'q> {
    /// (qualifier, name) of each column.
    cols: Vec<(String, String)>,
    rows: Vec<Vec<Value>>,
    conds: Vec<&'q Expr>,
    /// Pairs of columns that must be equal: a `JOIN ... USING (c)`'s.
    same: Vec<(usize, usize)>,
}

impl<'q> Source<'q> {
    fn join(e: &Engine, s: &Session, sel: &'q ast::Select) -> Result<Source<'q>> {
        let mut source = Source {
            cols: Vec::new(),
            rows: vec![Vec::new()],
            conds: Vec::new(),
            same: Vec::new(),
        };
        for tw in &sel.from {
            source.add(e, s, &tw.relation)?;
            for j in &tw.joins {
                let left_width = source.cols.len();
                source.add(e, s, &j.relation)?;
                match &j.join_operator {
                    ast::JoinOperator::Inner(ast::JoinConstraint::On(c)) => source.conds.push(c),
                    ast::JoinOperator::Inner(ast::JoinConstraint::Using(names)) => {
                        for name in names {
                            source.using(left_width, &name.value)?;
                        }
                    }
                    ast::JoinOperator::Inner(ast::JoinConstraint::None)
                    | ast::JoinOperator::CrossJoin => {}
                    _ => {
                        return Err(ShimError::Unsupported(
                            "outer joins over information_schema".into(),
                        ))
                    }
                }
            }
        }
        if let Some(w) = &sel.selection {
            source.conds.push(w);
        }
        Ok(source)
    }

    /// `USING (name)` of a join whose right side starts at column
    /// `left_width`: the column of that name on each side must be equal.
    fn using(&mut self, left_width: usize, name: &str) -> Result<()> {
        let find =
            |cols: &[(String, String)]| cols.iter().position(|(_, c)| c.eq_ignore_ascii_case(name));
        let (Some(l), Some(r)) = (
            find(&self.cols[..left_width]),
            find(&self.cols[left_width..]),
        ) else {
            return Err(ShimError::UnknownColumn(
                name.to_string(),
                "from clause".into(),
            ));
        };
        self.same.push((l, left_width + r));
        Ok(())
    }

    /// Crosses the rows so far with the information_schema table `f` names,
    /// or with a derived table over information_schema tables.
    fn add(&mut self, e: &Engine, s: &Session, f: &TableFactor) -> Result<()> {
        let (q, columns, rows) = match f {
            TableFactor::Table { name, alias, .. } => {
                if !is_info_schema_name(s, name) {
                    return Err(ShimError::Unsupported(
                        "joining information_schema with user tables".into(),
                    ));
                }
                let tname = crate::sqltext::last_part(name);
                let vt = build_vtable(e, s, &tname)?;
                let q = alias
                    .as_ref()
                    .map(|a| a.name.value.clone())
                    .unwrap_or(tname);
                (
                    q,
                    vt.columns.iter().map(|c| c.to_string()).collect(),
                    vt.rows,
                )
            }
            TableFactor::Derived {
                subquery,
                alias: Some(alias),
                ..
            } => {
                let (names, rows) = select_rows(e, s, subquery)?;
                let names = if alias.columns.is_empty() {
                    names
                } else {
                    alias.columns.iter().map(|c| c.value.clone()).collect()
                };
                (alias.name.value.clone(), names, rows)
            }
            _ => {
                return Err(ShimError::Unsupported(
                    "this table expression over information_schema".into(),
                ))
            }
        };
        self.cols
            .extend(columns.into_iter().map(|c| (q.clone(), c)));
        let mut out = Vec::with_capacity(self.rows.len() * rows.len());
        for l in self.rows.iter() {
            for r in &rows {
                let mut x = l.clone();
                x.extend(r.iter().cloned());
                out.push(x);
            }
        }
        self.rows = out;
        Ok(())
    }

    /// Takes the rows out, keeping those every condition holds for.
    fn take_matching(&mut self, e: &Engine, s: &Session) -> Result<Vec<Vec<Value>>> {
        let mut kept = Vec::new();
        for r in std::mem::take(&mut self.rows) {
            let ctx = EvalContext {
                session: s,
                facts: &e.facts,
                columns: &self.cols,
                row: &r,
            };
            let mut ok = self
                .same
                .iter()
                .all(|&(a, b)| !r[a].is_null() && compare(&r[a], &r[b]) == Ordering::Equal);
            for c in &self.conds {
                if truth(&eval(&ctx, c)?) != Some(true) {
                    ok = false;
                    break;
                }
            }
            if ok {
                kept.push(r);
            }
        }
        Ok(kept)
    }
}

/// `SELECT COUNT(*)` (the only item): its one row, counting `rows`.
fn count_only(sel: &ast::Select, rows: usize) -> Option<(Vec<String>, Vec<Vec<Value>>)> {
    let [item] = sel.projection.as_slice() else {
        return None;
    };
    let (SelectItem::UnnamedExpr(x) | SelectItem::ExprWithAlias { expr: x, .. }) = item else {
        return None;
    };
    if !is_count(x) {
        return None;
    }
    let name = match item {
        SelectItem::ExprWithAlias { alias, .. } => alias.value.clone(),
        _ => x.to_string(),
    };
    Some((vec![name], vec![vec![Value::Int(rows as i64)]]))
}

/// A select list over the source's columns: each output column's name and
/// what it is.
struct Projection<'q> {
    out_names: Vec<String>,
    /// An expression, or None for source column `source_cols[i]`.
    projections: Vec<Option<&'q Expr>>,
    source_cols: Vec<usize>,
}

impl<'q> Projection<'q> {
    fn of(sel: &'q ast::Select, cols: &[(String, String)]) -> Projection<'q> {
        let mut p = Projection {
            out_names: Vec::new(),
            projections: Vec::new(),
            source_cols: Vec::new(),
        };
        for item in &sel.projection {
            match item {
                SelectItem::Wildcard(_) => {
                    for (i, (_, n)) in cols.iter().enumerate() {
                        p.push(n.clone(), None, i);
                    }
                }
                SelectItem::QualifiedWildcard(q, _) => {
                    let qn = crate::sqltext::last_part(q);
                    for (i, (qq, n)) in cols.iter().enumerate() {
                        if qq.eq_ignore_ascii_case(&qn) {
                            p.push(n.clone(), None, i);
                        }
                    }
                }
                SelectItem::UnnamedExpr(x) => {
                    let name = match x {
                        Expr::Identifier(i) => i.value.clone(),
                        Expr::CompoundIdentifier(ids) => {
                            ids.last().map(|i| i.value.clone()).unwrap_or_default()
                        }
                        other => other.to_string(),
                    };
                    p.push(name, Some(x), 0);
                }
                SelectItem::ExprWithAlias { expr, alias } => {
                    p.push(alias.value.clone(), Some(expr), 0);
                }
            }
        }
        p
    }

    fn push(&mut self, name: String, expr: Option<&'q Expr>, source_col: usize) {
        self.out_names.push(name);
        self.projections.push(expr);
        self.source_cols.push(source_col);
    }

    /// Each row's output row, beside the row.
    fn apply(
        &self,
        e: &Engine,
        s: &Session,
        cols: &[(String, String)],
        rows: Vec<Vec<Value>>,
    ) -> Result<Vec<OutAndSource>> {
        let mut result = Vec::new();
        for r in rows {
            let ctx = EvalContext {
                session: s,
                facts: &e.facts,
                columns: cols,
                row: &r,
            };
            let mut o = Vec::with_capacity(self.projections.len());
            for (p, &sc) in self.projections.iter().zip(&self.source_cols) {
                o.push(match p {
                    None => r[sc].clone(),
                    Some(x) => eval(&ctx, x)?,
                });
            }
            result.push((o, r));
        }
        Ok(result)
    }
}

/// ORDER BY: each key an ordinal, an output alias, or an expression over
/// the source row.
fn order_rows(
    e: &Engine,
    s: &Session,
    cols: &[(String, String)],
    out_names: &[String],
    ob: &ast::OrderBy,
    result: Vec<OutAndSource>,
) -> Result<Vec<OutAndSource>> {
    let mut keyed: Vec<(Vec<Value>, OutAndSource)> = Vec::new();
    for (o, r) in result {
        let ctx = EvalContext {
            session: s,
            facts: &e.facts,
            columns: cols,
            row: &r,
        };
        let mut key = Vec::new();
        for k in &ob.exprs {
            let v = match &k.expr {
                Expr::Value(ast::Value::Number(n, _)) => {
                    let i: usize = n.parse().unwrap_or(1);
                    o.get(i.saturating_sub(1)).cloned().unwrap_or(Value::Null)
                }
                Expr::Identifier(id)
                    if out_names.iter().any(|n| n.eq_ignore_ascii_case(&id.value)) =>
                {
                    let i = out_names
                        .iter()
                        .position(|n| n.eq_ignore_ascii_case(&id.value))
                        .unwrap_or(0);
                    o[i].clone()
                }
                x => eval(&ctx, x)?,
            };
            key.push(v);
        }
        keyed.push((key, (o, r)));
    }
    keyed.sort_by(|a, b| {
        for (i, k) in ob.exprs.iter().enumerate() {
            let mut c = if a.0[i].is_null() || b.0[i].is_null() {
                a.0[i].cmp(&b.0[i])
            } else {
                compare(&a.0[i], &b.0[i])
            };
            if k.asc == Some(false) {
                c = c.reverse();
            }
            if c != Ordering::Equal {
                return c;
            }
        }
        Ordering::Equal
    });
    Ok(keyed.into_iter().map(|(_, x)| x).collect())
}

/// The result's columns: integer where the first non-NULL value is one,
/// else text.
fn result_columns(out_names: &[String], out_rows: &[Vec<Value>]) -> Vec<OutputColumn> {
    out_names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let is_int = out_rows
                .iter()
                .map(|r| &r[i])
                .find(|v| !v.is_null())
                .is_some_and(|v| matches!(v, Value::Int(_) | Value::UInt(_)));
            if is_int {
                int_column(n)
            } else {
                text_column(n)
            }
        })
        .collect()
}
