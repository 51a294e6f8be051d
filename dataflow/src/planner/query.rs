//! The planner's entry point: a query (SELECT, set operation, FROM-less
//! SELECT) to a [`Planned`] view or constant, and a subquery used as a
//! relation (derived table, named view, IN list) to a [`Rel`].

use std::collections::HashMap;

use ladle_common::{Collation, Row};
use ladle_storage::Storage;
use sqlparser::ast;

use super::expr::{aggregate_name, unsupported, volatile, ExprCx, ParamMode, Scope};
use super::memo::PlanMemo;
use super::relation::{ColInfo, Rel};
use super::syntax::{is_dual, one_row_from, select_has_subquery};
use crate::expr::Expr;
use crate::plan::{Constant, Count, LNode, LOp, Planned, PlannedView};
use crate::{DataflowError, OutputColumn, Result};

/// How deep relations (derived tables, views, IN lists) may nest in one
/// plan, each a level of the planner's recursion. Nesting in a statement's
/// text is bounded before this (MariaDB's 63, the shim's
/// `MAX_SELECT_NESTING`); views, each parsed on its own, nest only here.
pub(crate) const MAX_RELATION_DEPTH: usize = 128;

/// The most nodes a plan may have. A subquery's plan is in the plan tree
/// once per use (installing shares equal nodes): IN read as a value and
/// NOT IN over nullable columns read theirs twice, a correlated NOT IN
/// more, so each level of such nesting multiplies the tree (32 levels of
/// IN in a select list, or 8 of correlated NOT IN, exhausted the server's
/// memory). Past this the statement is refused instead: IN values nest to
/// 13 levels, correlated NOT IN to 4 (MariaDB: 63). 4,096 UNION branches
/// take some 20,000 nodes.
pub(crate) const MAX_PLAN_NODES: usize = 100_000;

/// Refuses a plan of more than [`MAX_PLAN_NODES`] nodes.
pub(super) fn bounded(plan: &LNode) -> Result<()> {
    if plan.has_more_nodes_than(MAX_PLAN_NODES) {
        return Err(unsupported(
            "a plan this large (IN subqueries read as values, nested this deeply)",
        ));
    }
    Ok(())
}

pub(crate) struct Planner<'a> {
    pub storage: &'a Storage,
    pub database: &'a str,
    /// Named views: (database, lower-case name) -> SQL text.
    pub views: &'a HashMap<(String, String), String>,
    pub depth: usize,
    /// Plan as `sql_mode=ONLY_FULL_GROUP_BY` reads a grouped select list
    /// (see [`crate::Dataflow::check_full_group_by`]).
    pub full_group_by: bool,
    /// The statement's subqueries planned so far, shared with the
    /// planners of its nested queries.
    pub memo: &'a PlanMemo,
}

impl Planner<'_> {
    /// Plans query `q`. A call of a function that does not exist is named
    /// in the planner's database, as MariaDB names it (see
    /// [`DataflowError::in_database`]).
    pub fn plan(&self, q: &ast::Query) -> Result<Planned> {
        // The user's WHERE clauses, before the planner writes its own tests.
        let mut q = q.clone();
        super::zero_date::mark_query(&mut q);
        super::syntax::refuse_limited_in(&q)?;
        let planned = self.plan_query(&q);
        if let Ok(Planned::View(v)) = &planned {
            bounded(&v.plan)?;
        }
        planned.map_err(|e| e.in_database(Some(self.database)))
    }

    fn plan_query(&self, q: &ast::Query) -> Result<Planned> {
        if q.with.is_some() {
            return Err(unsupported("WITH"));
        }
        // FOR UPDATE / LOCK IN SHARE MODE do not change the answer; the
        // session decides what they mean for the transaction.
        if q.fetch.is_some() || !q.limit_by.is_empty() {
            return Err(unsupported("FETCH/LIMIT BY"));
        }
        if let Some(q) = over_one_row(q) {
            return self.plan_query(&q);
        }
        match &*q.body {
            ast::SetExpr::Select(s) if s.from.is_empty() || is_dual(s) => self
                .constant(s, q)
                .map_err(|e| super::clause::name_the_clause(e, s, q)),
            ast::SetExpr::Select(s) => Ok(Planned::View(Box::new(self.select(s, q, true)?))),
            ast::SetExpr::Query(inner) if q.order_by.is_none() && q.limit.is_none() => {
                self.plan_query(inner)
            }
            // `(SELECT ...) ORDER BY .. LIMIT ..` over a parenthesized
            // query that orders and limits nothing itself: the outer
            // clauses are the inner query's.
            ast::SetExpr::Query(inner)
                if inner.order_by.is_none()
                    && inner.limit.is_none()
                    && inner.offset.is_none()
                    && inner.with.is_none() =>
            {
                let mut merged = (**inner).clone();
                merged.order_by = q.order_by.clone();
                merged.limit = q.limit.clone();
                merged.offset = q.offset.clone();
                self.plan_query(&merged)
            }
            ast::SetExpr::SetOperation { .. } => Ok(Planned::View(Box::new(self.union(q)?))),
            other => Err(unsupported(format!("query body {other}"))),
        }
    }

    pub(super) fn constant(&self, s: &ast::Select, q: &ast::Query) -> Result<Planned> {
        if q.order_by.is_some() && q.limit.is_none() {
            // ORDER BY over one row is a no-op.
        }
        let scope = Scope::default();
        let cx = ExprCx {
            scope: &scope,
            post: None,
            params: ParamMode::Slots,
            proposed: false,
            aliases: None,
        };
        let mut exprs = Vec::new();
        let mut columns = Vec::new();
        for item in &s.projection {
            let (e, name) = match item {
                ast::SelectItem::UnnamedExpr(e) => (e, e.to_string()),
                ast::SelectItem::ExprWithAlias { expr, alias } => (expr, alias.value.clone()),
                _ => return Err(DataflowError::BadArgument("No tables used".into())),
            };
            if aggregate_name(e).is_some() {
                return Err(unsupported("aggregate without FROM"));
            }
            let c = cx.compile(e)?;
            let (ty, nullable) = c.result_type(&[]);
            let decimals = match ty {
                ladle_common::SqlType::Double => c.fixed_decimals(&[]),
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
            exprs.push(c);
        }
        let filter = match &s.selection {
            Some(w) => Some(cx.compile(w)?),
            None => None,
        };
        if !matches!(&s.group_by, ast::GroupByExpr::Expressions(g, _) if g.is_empty())
            || s.having.is_some()
        {
            return Err(unsupported("GROUP BY without FROM"));
        }
        Ok(Planned::Constant(Constant {
            exprs,
            filter,
            columns,
        }))
    }

    /// The planner of a relation nested in this one (a derived table, a
    /// view, an IN list), planned in `database`; refused past
    /// [`MAX_RELATION_DEPTH`].
    pub(super) fn nested<'s>(&'s self, database: &'s str) -> Result<Planner<'s>> {
        if self.depth >= MAX_RELATION_DEPTH {
            return Err(unsupported("views nested this deeply"));
        }
        Ok(Planner {
            storage: self.storage,
            database,
            views: self.views,
            depth: self.depth + 1,
            full_group_by: self.full_group_by,
            memo: self.memo,
        })
    }

    /// A subquery used as a relation (derived table, IN list), planned
    /// once for the statement (see [`PlanMemo`]).
    pub(super) fn relation(&self, q: &ast::Query) -> Result<Rel> {
        self.relation_in(self.database, q)
    }

    /// [`Self::relation`] of a query whose names are those of `database`
    /// (a view's).
    pub(super) fn relation_in(&self, database: &str, q: &ast::Query) -> Result<Rel> {
        self.memo.relation(database, self.depth, q, || {
            let rel = self.nested(database)?.plan_relation(q)?;
            bounded(&rel.node)?;
            Ok(rel)
        })
    }

    /// Plans `q` as a relation at this planner's depth.
    fn plan_relation(&self, q: &ast::Query) -> Result<Rel> {
        if let Some(q) = over_one_row(q) {
            return self.plan_relation(&q);
        }
        let limited = q.limit.is_some() || q.offset.is_some();
        let pv = match &*q.body {
            // ORDER BY ... LIMIT planned as at the top, then maintained by a
            // top-k window below.
            ast::SetExpr::Select(s) if !s.from.is_empty() && !is_dual(s) => {
                self.select(s, q, limited)?
            }
            ast::SetExpr::Select(s) => {
                // A FROM-less SELECT: one constant row.
                let Planned::Constant(c) = self.constant(s, q)? else {
                    return Err(unsupported("this derived table"));
                };
                if c.exprs.iter().any(|e| e.is_volatile() || e.has_params()) {
                    return Err(volatile("NOW()/RAND()/parameters in a constant subquery"));
                }
                let rows = match &c.filter {
                    Some(f) if !f.eval_bool(&[], &[]).map_err(DataflowError::from)? => {
                        vec![]
                    }
                    _ => vec![c
                        .exprs
                        .iter()
                        .map(|e| e.eval(&[]))
                        .collect::<Result<Row, _>>()
                        .map_err(DataflowError::from)?],
                };
                let cols: Vec<ColInfo> = c
                    .columns
                    .iter()
                    .map(|o| ColInfo {
                        name: o.name.clone(),
                        table: String::new(),
                        origin: None,
                        stored: false,
                        ty: o.ty.clone(),
                        nullable: o.nullable,
                        coll: if o.ty.is_text() {
                            Collation::GeneralCi
                        } else {
                            Collation::Binary
                        },
                    })
                    .collect();
                let colls = cols.iter().map(|c| c.coll).collect();
                return Ok(Rel {
                    node: LNode {
                        op: LOp::Values(rows),
                        inputs: vec![],
                        colls,
                    },
                    cols,
                });
            }
            ast::SetExpr::Query(inner) if q.order_by.is_none() && q.limit.is_none() => {
                return self.plan_relation(inner)
            }
            ast::SetExpr::SetOperation { .. } => self.union(q)?,
            _ => return Err(unsupported("this derived table")),
        };
        if !pv.key.is_empty()
            || pv.read_filter.is_some()
            || pv.finish.is_some()
            || pv.empty_default.is_some()
        {
            return Err(unsupported("LIMIT or parameters in a subquery"));
        }
        let pv = top_k(pv)?;
        let identity = pv
            .output
            .iter()
            .enumerate()
            .all(|(i, e)| *e == Expr::Column(i))
            && pv.output.len() == pv.plan.width();
        let node = if identity {
            pv.plan
        } else {
            if pv
                .output
                .iter()
                .any(|e| e.is_volatile_besides_single_row() || e.has_params())
            {
                return Err(volatile("NOW()/RAND() in a subquery"));
            }
            let colls = pv
                .columns
                .iter()
                .map(|c| {
                    if c.ty.is_text() {
                        Collation::GeneralCi
                    } else {
                        Collation::Binary
                    }
                })
                .collect();
            LNode {
                op: LOp::Project(pv.output.clone()),
                inputs: vec![pv.plan],
                colls,
            }
        };
        let cols = pv
            .columns
            .iter()
            .zip(&node.colls)
            .map(|(c, coll)| ColInfo {
                name: c.name.clone(),
                table: c.table.clone(),
                origin: c.origin.clone(),
                stored: c.stored,
                ty: c.ty.clone(),
                nullable: c.nullable,
                coll: *coll,
            })
            .collect();
        Ok(Rel { node, cols })
    }
}

/// A subquery's ORDER BY ... LIMIT/OFFSET as a top-k [`LOp::Window`] over
/// its stored rows (one partition: the whole result), so only the rows
/// inside the limit flow on and a change lets at most one in and one out.
fn top_k(mut pv: PlannedView) -> Result<PlannedView> {
    if pv.limit.is_none() && pv.offset.is_none() {
        return Ok(pv);
    }
    let constant = |c: &Option<Count>| match c {
        None => Ok(None),
        Some(Count::Const(n)) => Ok(Some(usize::try_from(*n).unwrap_or(usize::MAX))),
        Some(Count::Slot(_)) => Err(unsupported("a parameter as LIMIT in a subquery")),
    };
    let limit = constant(&pv.limit)?;
    let offset = constant(&pv.offset)?.unwrap_or(0);
    let colls = pv.plan.colls.clone();
    pv.plan = LNode {
        op: LOp::Window {
            partition: vec![],
            order: std::mem::take(&mut pv.order),
            funcs: vec![],
            offset,
            limit,
            frame: None,
        },
        inputs: vec![LNode::take(&mut pv.plan)],
        colls,
    };
    pv.limit = None;
    pv.offset = None;
    Ok(pv)
}

/// `SELECT (SELECT ...)`, `SELECT x IN (SELECT ...)` without FROM: the
/// query over one constant row, planned as any SELECT with a FROM.
fn over_one_row(q: &ast::Query) -> Option<ast::Query> {
    let ast::SetExpr::Select(s) = &*q.body else {
        return None;
    };
    if !(s.from.is_empty() || is_dual(s)) || !select_has_subquery(s) {
        return None;
    }
    let mut q = q.clone();
    if let ast::SetExpr::Select(s) = &mut *q.body {
        s.from = vec![one_row_from()];
    }
    Some(q)
}
