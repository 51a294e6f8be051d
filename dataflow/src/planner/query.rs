//! SELECT -> logical plan + reader specification.

use std::collections::HashMap;
use std::sync::Arc;

use ladle_common::{Collation, Row, SqlType, TableSchema, Value};
use ladle_storage::Storage;
use sqlparser::ast;

use super::expr::{
    aggregate_name, collect_aggregates, collect_bare_columns, literal, norm, placeholder_slot,
    unsupported, ExprCx, ParamMode, PostAgg, Scope, ScopeCol,
};
use super::pushdown::filter_below_joins;
use super::range::RangeIndex;
use crate::expr::{unify_types, Expr};
use crate::ops::reader::OrderSpec;
use crate::ops::{AggKind, AggSpec, JoinKind};
use crate::plan::{LNode, LOp, ReadAgg, ReadAggregate, Window};
use crate::BaseColumn;
use crate::{DataflowError, OutputColumn, Result};

/// A LIMIT/OFFSET value: a constant or a parameter slot.
#[derive(Clone, Debug)]
pub(crate) enum Count {
    Const(u64),
    Slot(usize),
}

/// Everything needed to install and read a view.
#[derive(Clone, Debug)]
pub(crate) struct PlannedView {
    /// The plan producing the reader's stored rows.
    pub plan: LNode,
    /// Reader key columns (of the stored row).
    pub key: Vec<usize>,
    /// Per key column, the parameter slots giving its values (several for IN).
    pub key_slots: Vec<Vec<usize>>,
    pub key_names: Vec<String>,
    pub key_types: Vec<SqlType>,
    pub order: OrderSpec,
    pub read_filter: Option<Expr>,
    /// Output columns computed from the stored row (and parameters).
    pub output: Vec<Expr>,
    pub columns: Vec<OutputColumn>,
    pub limit: Option<Count>,
    pub offset: Option<Count>,
    /// Stored row to return for a key with no rows (aggregates without GROUP BY).
    pub empty_default: Option<Row>,
    /// Several lookups may return equal rows that DISTINCT must merge.
    pub dedup: bool,
    /// Aggregation at read time, after `read_filter` and before
    /// OFFSET/LIMIT and `output` (see [`ReadAgg`]).
    pub finish: Option<ReadAgg>,
    /// A stored column `read_filter` bounds by parameters: the reader
    /// orders each key's rows by it first, and a read takes only the rows
    /// between the bounds (see [`super::range`]).
    pub range: Option<RangeIndex>,
}

impl PlannedView {
    /// The order the reader keeps each key's rows in.
    pub fn reader_order(&self) -> OrderSpec {
        match &self.range {
            Some(r) => r.reader_order(&self.order),
            None => self.order.clone(),
        }
    }
}

/// A query without FROM: evaluated directly.
#[derive(Clone, Debug)]
pub(crate) struct Constant {
    pub exprs: Vec<Expr>,
    pub filter: Option<Expr>,
    pub columns: Vec<OutputColumn>,
}

pub(crate) enum Planned {
    View(Box<PlannedView>),
    Constant(Constant),
}

/// Column metadata of a planned relation.
#[derive(Clone, Debug)]
struct ColInfo {
    name: String,
    table: String,
    origin: Option<BaseColumn>,
    ty: SqlType,
    nullable: bool,
    coll: Collation,
}

/// A planned relation (derived table, view, subquery).
struct Rel {
    node: LNode,
    cols: Vec<ColInfo>,
}

pub(crate) struct Planner<'a> {
    pub storage: &'a Storage,
    pub database: &'a str,
    /// Named views: (database, lower-case name) -> SQL text.
    pub views: &'a HashMap<(String, String), String>,
    pub depth: usize,
}

fn base_colls(t: &TableSchema) -> Vec<Collation> {
    t.columns
        .iter()
        .map(|c| {
            if c.ty.is_text() {
                c.collation
            } else {
                Collation::Binary
            }
        })
        .collect()
}

fn split_conjuncts(e: &ast::Expr, out: &mut Vec<ast::Expr>) {
    match e {
        ast::Expr::BinaryOp {
            left,
            op: ast::BinaryOperator::And,
            right,
        } => {
            split_conjuncts(left, out);
            split_conjuncts(right, out);
        }
        ast::Expr::Nested(x)
            if matches!(
                **x,
                ast::Expr::BinaryOp {
                    op: ast::BinaryOperator::And,
                    ..
                }
            ) =>
        {
            split_conjuncts(x, out)
        }
        other => out.push(other.clone()),
    }
}

fn has_placeholder(e: &ast::Expr) -> bool {
    let mut found = false;
    fn walk(e: &ast::Expr, found: &mut bool) {
        if let ast::Expr::Value(ast::Value::Placeholder(_)) = e {
            *found = true;
        }
        super::expr::visit_children(e, &mut |c| walk(c, found));
    }
    walk(e, &mut found);
    found
}

/// Whether every column `e` names is qualified (`t.col`).
fn columns_qualified(e: &ast::Expr) -> bool {
    !ast::visit_expressions(e, |x| {
        if matches!(x, ast::Expr::Identifier(_)) {
            std::ops::ControlFlow::Break(())
        } else {
            std::ops::ControlFlow::Continue(())
        }
    })
    .is_break()
}

/// Whether `e` has a placeholder anywhere, subqueries included.
fn has_placeholder_deep(e: &ast::Expr) -> bool {
    ast::visit_expressions(e, |x| {
        if let ast::Expr::Value(ast::Value::Placeholder(_)) = x {
            std::ops::ControlFlow::Break(())
        } else {
            std::ops::ControlFlow::Continue(())
        }
    })
    .is_break()
}

fn has_subquery(e: &ast::Expr) -> bool {
    let mut found = false;
    fn walk(e: &ast::Expr, found: &mut bool) {
        if matches!(
            e,
            ast::Expr::Subquery(_) | ast::Expr::Exists { .. } | ast::Expr::InSubquery { .. }
        ) {
            *found = true;
        }
        super::expr::visit_children(e, &mut |c| walk(c, found));
    }
    walk(e, &mut found);
    found
}

fn as_column(e: &ast::Expr) -> Option<&[ast::Ident]> {
    match e {
        ast::Expr::Identifier(i) => Some(std::slice::from_ref(i)),
        ast::Expr::CompoundIdentifier(ids) => Some(ids),
        ast::Expr::Nested(x) => as_column(x),
        _ => None,
    }
}

fn as_slot(e: &ast::Expr) -> Option<usize> {
    match e {
        ast::Expr::Value(ast::Value::Placeholder(p)) => placeholder_slot(p),
        _ => None,
    }
}

fn count_of(e: &ast::Expr) -> Result<Count> {
    match e {
        ast::Expr::Value(ast::Value::Placeholder(p)) => placeholder_slot(p)
            .map(Count::Slot)
            .ok_or_else(|| unsupported("placeholder")),
        ast::Expr::Value(v) => match literal(v)? {
            Value::Int(i) if i >= 0 => Ok(Count::Const(i as u64)),
            Value::UInt(u) => Ok(Count::Const(u)),
            _ => Err(DataflowError::BadArgument(
                "LIMIT/OFFSET must be a non-negative integer".into(),
            )),
        },
        _ => Err(unsupported("LIMIT expression")),
    }
}

impl<'a> Planner<'a> {
    pub fn plan(&self, q: &ast::Query) -> Result<Planned> {
        if q.with.is_some() {
            return Err(unsupported("WITH"));
        }
        if q.fetch.is_some() || !q.locks.is_empty() || !q.limit_by.is_empty() {
            return Err(unsupported("FETCH/FOR UPDATE/LIMIT BY"));
        }
        match &*q.body {
            ast::SetExpr::Select(s) if s.from.is_empty() || is_dual(s) => self.constant(s, q),
            ast::SetExpr::Select(s) => Ok(Planned::View(Box::new(self.select(s, q, true)?))),
            ast::SetExpr::Query(inner) if q.order_by.is_none() && q.limit.is_none() => {
                self.plan(inner)
            }
            ast::SetExpr::SetOperation { .. } => Ok(Planned::View(Box::new(self.union(q)?))),
            other => Err(unsupported(format!("query body {other}"))),
        }
    }

    fn constant(&self, s: &ast::Select, q: &ast::Query) -> Result<Planned> {
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
            columns.push(OutputColumn {
                name,
                table: String::new(),
                origin: None,
                ty,
                nullable,
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

    /// A subquery used as a relation (derived table, view, IN list).
    fn relation(&self, q: &ast::Query) -> Result<Rel> {
        if self.depth > 16 {
            return Err(unsupported("views nested this deeply"));
        }
        let sub = Planner {
            storage: self.storage,
            database: self.database,
            views: self.views,
            depth: self.depth + 1,
        };
        let pv = match &*q.body {
            ast::SetExpr::Select(s) if !s.from.is_empty() && !is_dual(s) => {
                sub.select(s, q, false)?
            }
            ast::SetExpr::Select(s) => {
                // A FROM-less SELECT: one constant row.
                let Planned::Constant(c) = sub.constant(s, q)? else {
                    return Err(unsupported("this derived table"));
                };
                if c.exprs.iter().any(|e| e.is_volatile() || e.has_params()) {
                    return Err(unsupported(
                        "NOW()/RAND()/parameters in a constant subquery",
                    ));
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
                return sub.relation(inner)
            }
            ast::SetExpr::SetOperation { .. } => sub.union(q)?,
            _ => return Err(unsupported("this derived table")),
        };
        if !pv.key.is_empty()
            || pv.read_filter.is_some()
            || pv.limit.is_some()
            || pv.offset.is_some()
        {
            return Err(unsupported("LIMIT or parameters in a subquery"));
        }
        let identity = pv
            .output
            .iter()
            .enumerate()
            .all(|(i, e)| *e == Expr::Column(i))
            && pv.output.len() == pv.plan.width();
        let node = if identity {
            pv.plan
        } else {
            if pv.output.iter().any(|e| e.is_volatile() || e.has_params()) {
                return Err(unsupported("NOW()/RAND() in a subquery"));
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
                ty: c.ty.clone(),
                nullable: c.nullable,
                coll: *coll,
            })
            .collect();
        Ok(Rel { node, cols })
    }

    /// A set operation tree: UNION [ALL] nests as written, so
    /// `A UNION B UNION ALL C` is `(A UNION B) UNION ALL C`.
    fn set_expr(&self, e: &ast::SetExpr) -> Result<Rel> {
        match e {
            ast::SetExpr::SetOperation {
                op: ast::SetOperator::Union,
                set_quantifier,
                left,
                right,
            } => {
                let l = self.set_expr(left)?;
                let r = self.set_expr(right)?;
                let width = l.cols.len();
                if r.cols.len() != width {
                    return Err(DataflowError::BadArgument(
                        "The used SELECT statements have a different number of columns".into(),
                    ));
                }
                let mut cols = l.cols.clone();
                for (i, c) in cols.iter_mut().enumerate() {
                    let tys = [
                        (l.cols[i].ty.clone(), l.cols[i].nullable),
                        (r.cols[i].ty.clone(), r.cols[i].nullable),
                    ];
                    let (t, n) = unify_types(&tys);
                    c.ty = t;
                    c.nullable = n;
                    c.table = String::new();
                    // MariaDB sends no key flags for a UNION's columns.
                    c.origin = None;
                    if c.ty.is_text() {
                        c.coll = Collation::GeneralCi;
                    }
                }
                let colls: Vec<Collation> = cols.iter().map(|c| c.coll).collect();
                let mut node = LNode {
                    op: LOp::Union,
                    inputs: vec![l.node, r.node],
                    colls: colls.clone(),
                };
                if !matches!(set_quantifier, ast::SetQuantifier::All) {
                    node = LNode {
                        op: LOp::Aggregate {
                            ngroup: width,
                            aggs: vec![],
                            scalar: false,
                        },
                        inputs: vec![node],
                        colls,
                    };
                }
                Ok(Rel { node, cols })
            }
            ast::SetExpr::SetOperation { op, .. } => Err(unsupported(format!("{op}"))),
            other => {
                let bq = ast::Query {
                    with: None,
                    body: Box::new(other.clone()),
                    order_by: None,
                    limit: None,
                    limit_by: vec![],
                    offset: None,
                    fetch: None,
                    locks: vec![],
                    for_clause: None,
                    settings: None,
                    format_clause: None,
                };
                self.relation(&bq)
            }
        }
    }

    fn union(&self, q: &ast::Query) -> Result<PlannedView> {
        let rel = self.set_expr(&q.body)?;
        let width = rel.cols.len();
        let cols = rel.cols;
        let colls: Vec<Collation> = cols.iter().map(|c| c.coll).collect();
        let node = rel.node;
        // ORDER BY / LIMIT over the union's columns.
        let mut order = Vec::new();
        if let Some(ob) = &q.order_by {
            for o in &ob.exprs {
                let pos = match &o.expr {
                    ast::Expr::Value(ast::Value::Number(n, _)) => {
                        n.parse::<usize>().ok().and_then(|p| p.checked_sub(1))
                    }
                    e => as_column(e).and_then(|ids| ids.last()).and_then(|id| {
                        cols.iter()
                            .position(|c| c.name.eq_ignore_ascii_case(&id.value))
                    }),
                };
                let pos = pos
                    .filter(|p| *p < width)
                    .ok_or_else(|| unsupported("ORDER BY over UNION by expression"))?;
                order.push((pos, o.asc == Some(false), colls[pos]));
            }
        }
        let columns = cols
            .iter()
            .map(|c| OutputColumn {
                name: c.name.clone(),
                table: c.table.clone(),
                origin: c.origin.clone(),
                ty: c.ty.clone(),
                nullable: c.nullable,
            })
            .collect();
        Ok(PlannedView {
            plan: node,
            key: vec![],
            key_slots: vec![],
            key_names: vec![],
            key_types: vec![],
            order,
            read_filter: None,
            range: None,
            output: (0..width).map(Expr::Column).collect(),
            columns,
            limit: q.limit.as_ref().map(count_of).transpose()?,
            offset: q.offset.as_ref().map(|o| count_of(&o.value)).transpose()?,
            empty_default: None,
            dedup: false,
            finish: None,
        })
    }

    // ------------------------------------------------------------------ FROM

    fn factor(&self, tf: &ast::TableFactor) -> Result<(LNode, Scope)> {
        match tf {
            ast::TableFactor::Table {
                name,
                alias,
                args: None,
                ..
            } => {
                let parts: Vec<String> = name.0.iter().map(|i| i.value.clone()).collect();
                let (db, table) = match parts.as_slice() {
                    [t] => (self.database.to_string(), t.clone()),
                    [d, t] => (d.clone(), t.clone()),
                    _ => return Err(DataflowError::UnknownTable(name.to_string())),
                };
                let qualifier = alias
                    .as_ref()
                    .map(|a| a.name.value.clone())
                    .unwrap_or_else(|| table.clone());
                if let Some(schema) = self.storage.table(&db, &table) {
                    let scope = super::table_scope(&schema, &qualifier);
                    let colls = base_colls(&schema);
                    return Ok((
                        LNode {
                            op: LOp::Base(schema),
                            inputs: vec![],
                            colls,
                        },
                        scope,
                    ));
                }
                let key = (db.to_ascii_lowercase(), table.to_ascii_lowercase());
                if let Some(sql) = self.views.get(&key) {
                    let q = super::parse_query(sql)?;
                    let sub = Planner {
                        storage: self.storage,
                        database: &db,
                        views: self.views,
                        depth: self.depth + 1,
                    };
                    if sub.depth > 16 {
                        return Err(unsupported("views nested this deeply"));
                    }
                    let rel = sub.relation(&q)?;
                    return Ok(rel_scope(rel, &qualifier));
                }
                Err(DataflowError::UnknownTable(format!("{db}.{table}")))
            }
            ast::TableFactor::Derived {
                lateral: false,
                subquery,
                alias,
            } => {
                let Some(alias) = alias else {
                    return Err(DataflowError::BadArgument(
                        "Every derived table must have its own alias".into(),
                    ));
                };
                let mut rel = self.relation(subquery)?;
                for (c, name) in rel.cols.iter_mut().zip(&alias.columns) {
                    c.name = name.value.clone();
                }
                Ok(rel_scope(rel, &alias.name.value))
            }
            ast::TableFactor::NestedJoin {
                table_with_joins,
                alias: None,
            } => {
                let mut w = Vec::new();
                let planned = self.plan_from_item(table_with_joins, &mut w)?;
                if !w.is_empty() {
                    // Parameters from an inner ON inside the parentheses:
                    // they cannot be applied outside (a LEFT JOIN may
                    // enclose them), so never drop them.
                    return Err(unsupported("parameters in a parenthesized join's ON"));
                }
                Ok(planned)
            }
            other => Err(unsupported(format!("FROM {other}"))),
        }
    }

    fn plan_from_item(
        &self,
        twj: &ast::TableWithJoins,
        where_conj: &mut Vec<ast::Expr>,
    ) -> Result<(LNode, Scope)> {
        let (mut node, mut scope) = self.factor(&twj.relation)?;
        for j in &twj.joins {
            let (rnode, rscope) = self.factor(&j.relation)?;
            let (kind, constraint) = match &j.join_operator {
                ast::JoinOperator::Inner(c) => (JoinKind::Inner, c.clone()),
                ast::JoinOperator::LeftOuter(c) => (JoinKind::Left, c.clone()),
                ast::JoinOperator::CrossJoin => (JoinKind::Inner, ast::JoinConstraint::None),
                other => {
                    return Err(unsupported(
                        format!("join {other:?}")
                            .chars()
                            .take(40)
                            .collect::<String>(),
                    ))
                }
            };
            let mut conj = Vec::new();
            match constraint {
                ast::JoinConstraint::On(e) => split_conjuncts(&e, &mut conj),
                ast::JoinConstraint::Using(ids) => {
                    for id in ids {
                        let lq = scope
                            .cols
                            .iter()
                            .find(|c| c.name.eq_ignore_ascii_case(&id.value))
                            .map(|c| c.qualifier.clone())
                            .ok_or_else(|| {
                                DataflowError::UnknownColumn(id.value.clone(), "from clause".into())
                            })?;
                        let rq = rscope
                            .cols
                            .first()
                            .map(|c| c.qualifier.clone())
                            .unwrap_or_default();
                        conj.push(ast::Expr::BinaryOp {
                            left: Box::new(ast::Expr::CompoundIdentifier(vec![
                                ast::Ident::new(lq),
                                id.clone(),
                            ])),
                            op: ast::BinaryOperator::Eq,
                            right: Box::new(ast::Expr::CompoundIdentifier(vec![
                                ast::Ident::new(rq),
                                id.clone(),
                            ])),
                        });
                    }
                }
                ast::JoinConstraint::None => {
                    // CROSS JOIN / JOIN without ON: take equalities from WHERE.
                    if kind == JoinKind::Inner {
                        let (mut taken, rest): (Vec<ast::Expr>, Vec<ast::Expr>) = where_conj
                            .drain(..)
                            .partition(|c| links(c, &scope, &rscope));
                        *where_conj = rest;
                        conj.append(&mut taken);
                    }
                }
                ast::JoinConstraint::Natural => return Err(unsupported("NATURAL JOIN")),
            }
            if kind == JoinKind::Inner {
                // An inner join's ON is part of WHERE: parameters there can
                // key the view (`JOIN b ON b.a_id = a.id AND b.user_id = ?`).
                // Qualified columns only: a bare name could become ambiguous
                // once later tables join in.
                let (params, rest): (Vec<ast::Expr>, Vec<ast::Expr>) = conj
                    .into_iter()
                    .partition(|c| has_placeholder(c) && columns_qualified(c));
                where_conj.extend(params);
                conj = rest;
            }
            let (n, s) = self.join(node, scope, rnode, rscope, kind, conj)?;
            node = n;
            scope = s;
        }
        Ok((node, scope))
    }

    fn join(
        &self,
        left: LNode,
        ls: Scope,
        right: LNode,
        rs: Scope,
        kind: JoinKind,
        conj: Vec<ast::Expr>,
    ) -> Result<(LNode, Scope)> {
        let mut lcols = Vec::new();
        let mut rcols = Vec::new();
        let mut rest = Vec::new();
        for c in conj {
            if let ast::Expr::BinaryOp {
                left: a,
                op: ast::BinaryOperator::Eq,
                right: b,
            } = &c
            {
                if let (Some(x), Some(y)) = (as_column(a), as_column(b)) {
                    // A text column equals a binary one byte for byte, which
                    // no hash of the two kinds of value agrees on: such a
                    // pair is compared by the filter after the join.
                    let keyable = |l: usize, r: usize| {
                        let (lt, rt) = (&ls.cols[l].ty, &rs.cols[r].ty);
                        !(lt.is_binary() && rt.is_text() || lt.is_text() && rt.is_binary())
                    };
                    match (ls.resolve(x), rs.resolve(y), ls.resolve(y), rs.resolve(x)) {
                        (Ok(l), Ok(r), Err(_), Err(_)) if keyable(l, r) => {
                            lcols.push(l);
                            rcols.push(r);
                            continue;
                        }
                        (Err(_), Err(_), Ok(l), Ok(r)) if keyable(l, r) => {
                            lcols.push(l);
                            rcols.push(r);
                            continue;
                        }
                        _ => {}
                    }
                }
            }
            rest.push(c);
        }
        // No equality: a cross join (every left row meets every right row,
        // key []), the conditions filtering after it. Each change to one
        // side is joined with the whole other side.
        let mut right = right;
        let mut scope = ls.clone();
        let mut rscope = rs.clone();
        if kind == JoinKind::Left {
            for c in &mut rscope.cols {
                c.nullable = true;
            }
        }
        scope.cols.extend(rscope.cols.iter().cloned());
        let mut post = Vec::new();
        let mut left_on = Vec::new();
        for c in rest {
            if kind == JoinKind::Left {
                // Conditions on the right side alone filter it before the join.
                let cx = ExprCx::row(&rs);
                match cx.compile(&c) {
                    Ok(e) if !has_placeholder(&c) && !e.is_volatile() => {
                        let colls = right.colls.clone();
                        right = LNode {
                            op: LOp::Filter(e),
                            inputs: vec![right],
                            colls,
                        };
                    }
                    Err(DataflowError::UnknownColumn(..)) => left_on.push(c),
                    Err(e) => return Err(e),
                    Ok(_) => return Err(unsupported("parameters or NOW()/RAND() in LEFT JOIN ON")),
                }
            } else {
                post.push(c);
            }
        }
        if !left_on.is_empty() {
            let mut conds = Vec::new();
            for c in &left_on {
                if has_placeholder(c) || has_subquery(c) {
                    return Err(unsupported("parameters or subqueries in LEFT JOIN ON"));
                }
                conds.push(stable(ExprCx::row(&scope).compile(c)?)?);
            }
            let node = left_join_on(left, right, lcols, rcols, conds);
            return Ok((node, scope));
        }
        let mut colls = left.colls.clone();
        colls.extend(right.colls.iter().copied());
        let mut node = LNode {
            op: LOp::Join {
                kind,
                left_cols: lcols,
                right_cols: rcols,
            },
            inputs: vec![left, right],
            colls,
        };
        for c in post {
            if has_placeholder(&c) || has_subquery(&c) {
                return Err(unsupported("parameters or subqueries in JOIN ON"));
            }
            let e = stable(ExprCx::row(&scope).compile(&c)?)?;
            let colls = node.colls.clone();
            node = LNode {
                op: LOp::Filter(e),
                inputs: vec![node],
                colls,
            };
        }
        Ok((node, scope))
    }

    fn plan_from(
        &self,
        from: &[ast::TableWithJoins],
        where_conj: &mut Vec<ast::Expr>,
    ) -> Result<(LNode, Scope)> {
        let (mut node, mut scope) = self.plan_from_item(&from[0], where_conj)?;
        for item in &from[1..] {
            let (rn, rs) = self.plan_from_item(item, where_conj)?;
            let (taken, rest): (Vec<ast::Expr>, Vec<ast::Expr>) =
                where_conj.drain(..).partition(|c| links(c, &scope, &rs));
            *where_conj = rest;
            let (n, s) = self.join(node, scope, rn, rs, JoinKind::Inner, taken)?;
            node = n;
            scope = s;
        }
        Ok((node, scope))
    }

    // ---------------------------------------------------------------- SELECT

    fn select(&self, s: &ast::Select, q: &ast::Query, top: bool) -> Result<PlannedView> {
        if s.top.is_some()
            || s.into.is_some()
            || !s.lateral_views.is_empty()
            || s.prewhere.is_some()
        {
            return Err(unsupported("TOP/INTO/LATERAL"));
        }
        if !s.cluster_by.is_empty()
            || !s.distribute_by.is_empty()
            || !s.sort_by.is_empty()
            || s.qualify.is_some()
        {
            return Err(unsupported("CLUSTER/DISTRIBUTE/SORT BY/QUALIFY"));
        }
        if !s.named_window.is_empty() || s.connect_by.is_some() {
            return Err(unsupported("WINDOW/CONNECT BY"));
        }
        let distinct = match &s.distinct {
            None => false,
            Some(ast::Distinct::Distinct) => true,
            Some(ast::Distinct::On(_)) => return Err(unsupported("DISTINCT ON")),
        };
        let mut conj = Vec::new();
        if let Some(w) = &s.selection {
            split_conjuncts(w, &mut conj);
        }
        // FROM (SELECT ... ORDER BY ... LIMIT n) d: the view keeps the
        // derived table's full ordered result; each read takes its window,
        // then evaluates this query over it.
        let (mut node, mut scope, window) = match self.windowed_derived(s, top)? {
            Some((n, sc, w)) => (n, sc, Some(w)),
            None => {
                let (n, sc) = self.plan_from(&s.from, &mut conj)?;
                (n, sc, None)
            }
        };

        // WHERE: keys, read-time filters, semi-joins, filters.
        let mut nsub = 0;
        let mut key_frame: Vec<(usize, Vec<usize>)> = Vec::new();
        let mut read_filters: Vec<ast::Expr> = Vec::new();
        for c in conj {
            if window.is_some() {
                if has_subquery(&c) {
                    return Err(unsupported(
                        "subqueries in WHERE over a derived table with LIMIT",
                    ));
                }
                read_filters.push(c);
                continue;
            }
            if top {
                if let Some((col, slots)) = self.key_conjunct(&c, &scope) {
                    if let Some(k) = key_frame.iter_mut().find(|k| k.0 == col) {
                        // `a = ? AND a = ?`: keep both as a read-time check.
                        let _ = k;
                        read_filters.push(c);
                    } else {
                        key_frame.push((col, slots));
                    }
                    continue;
                }
            }
            if top && has_placeholder_deep(&c) {
                let keyed = match &c {
                    ast::Expr::InSubquery {
                        expr,
                        subquery,
                        negated: false,
                    } if !has_placeholder(expr) => Some((Some(&**expr), subquery)),
                    ast::Expr::Exists {
                        subquery,
                        negated: false,
                    } => Some((None, subquery)),
                    _ => None,
                };
                if let Some((in_expr, sub)) = keyed {
                    self.keyed_semi(&mut node, &mut scope, &mut key_frame, in_expr, sub, nsub)?;
                    nsub += 1;
                    continue;
                }
            }
            if has_placeholder(&c) {
                if !top || has_subquery(&c) {
                    return Err(unsupported("parameters in a subquery"));
                }
                read_filters.push(c);
                continue;
            }
            match &c {
                ast::Expr::InSubquery {
                    expr,
                    subquery,
                    negated,
                } => {
                    node = self.semi_in(node, &scope, expr, subquery, *negated)?;
                    continue;
                }
                ast::Expr::Exists { subquery, negated } => {
                    node = self.semi_exists(node, &scope, subquery, *negated)?;
                    continue;
                }
                _ => {}
            }
            let mut c = c;
            if has_subquery(&c) {
                // Scalar subqueries (correlated or not) join in as columns.
                let mut rw = SubqueryRewriter {
                    planner: self,
                    node: &mut node,
                    scope: &mut scope,
                    n: &mut nsub,
                    err: None,
                };
                let _ = ast::VisitMut::visit(&mut c, &mut rw);
                if let Some(err) = rw.err {
                    return Err(err);
                }
            }
            let e = ExprCx::row(&scope).compile(&c)?;
            if e.is_volatile() {
                if !top {
                    return Err(unsupported(
                        "NOW()/RAND() or a scalar subquery without an aggregate in a subquery's WHERE",
                    ));
                }
                read_filters.push(c);
                continue;
            }
            node = filter_below_joins(node, e);
        }

        // Correlated scalar subqueries in the select list become LEFT JOINs
        // with an aggregate grouped by the correlation columns.
        let mut projection: Vec<ast::SelectItem> = s.projection.clone();
        for item in projection.iter_mut() {
            let (e, name) = match item {
                ast::SelectItem::UnnamedExpr(e) => {
                    let n = e.to_string();
                    (e, Some(n))
                }
                ast::SelectItem::ExprWithAlias { expr, .. } => (expr, None),
                _ => continue,
            };
            if !has_subquery(e) {
                continue;
            }
            if window.is_some() {
                return Err(unsupported(
                    "subqueries in the select list over a derived table with LIMIT",
                ));
            }
            let mut rw = SubqueryRewriter {
                planner: self,
                node: &mut node,
                scope: &mut scope,
                n: &mut nsub,
                err: None,
            };
            let _ = ast::VisitMut::visit(e, &mut rw);
            if let Some(err) = rw.err {
                return Err(err);
            }
            if let Some(n) = name {
                *item = ast::SelectItem::ExprWithAlias {
                    expr: e.clone(),
                    alias: ast::Ident::new(n),
                };
            }
        }

        // Aggregation.
        let group_asts: Vec<ast::Expr> = match &s.group_by {
            ast::GroupByExpr::Expressions(g, mods) if mods.is_empty() => g.clone(),
            _ => return Err(unsupported("GROUP BY modifiers")),
        };
        let mut aggs_ast = Vec::new();
        for item in &projection {
            if let ast::SelectItem::UnnamedExpr(e)
            | ast::SelectItem::ExprWithAlias { expr: e, .. } = item
            {
                collect_aggregates(e, &mut aggs_ast);
            }
        }
        if let Some(h) = &s.having {
            collect_aggregates(h, &mut aggs_ast);
        }
        if let Some(ob) = &q.order_by {
            for o in &ob.exprs {
                collect_aggregates(&o.expr, &mut aggs_ast);
            }
        }
        let aggregated = !group_asts.is_empty() || !aggs_ast.is_empty();
        // Select-list aliases (for GROUP BY alias).
        let alias_ast: HashMap<String, ast::Expr> = projection
            .iter()
            .filter_map(|i| match i {
                ast::SelectItem::ExprWithAlias { expr, alias } => {
                    Some((alias.value.to_ascii_lowercase(), expr.clone()))
                }
                _ => None,
            })
            .collect();

        let post: Option<PostAgg>;
        let mut key_post: Vec<usize> = Vec::new();
        let mut empty_default_needed = false;
        // Parameters that cannot key an aggregate's state (ranges, IN
        // lists, NOW()): aggregate at read time over the maintained
        // pre-aggregation rows instead.
        // An IN list on a GROUP BY column needs no merging: each element's
        // groups are its own (decided once the group columns are known).
        let mut late = aggregated && (window.is_some() || !read_filters.is_empty());
        let mut late_parts: Option<(Vec<usize>, Option<Expr>, ReadAgg)> = None;
        // The range parameters of a read-time aggregation's filter.
        let mut late_range: Option<RangeIndex> = None;
        if aggregated {
            let row_cx = ExprCx::row(&scope);
            let mut gexprs: Vec<Expr> = Vec::new();
            let mut by_text = HashMap::new();
            let mut by_col = HashMap::new();
            for g in &group_asts {
                let g = match g {
                    ast::Expr::Value(ast::Value::Number(n, _)) => {
                        let p: usize = n
                            .parse()
                            .map_err(|_| DataflowError::BadArgument(n.clone()))?;
                        match projection.get(p.wrapping_sub(1)) {
                            Some(
                                ast::SelectItem::UnnamedExpr(e)
                                | ast::SelectItem::ExprWithAlias { expr: e, .. },
                            ) => e.clone(),
                            _ => {
                                return Err(DataflowError::UnknownColumn(
                                    n.clone(),
                                    "group statement".into(),
                                ))
                            }
                        }
                    }
                    ast::Expr::Identifier(id)
                        if scope.resolve(std::slice::from_ref(id)).is_err() =>
                    {
                        alias_ast
                            .get(&id.value.to_ascii_lowercase())
                            .cloned()
                            .unwrap_or_else(|| g.clone())
                    }
                    other => other.clone(),
                };
                if aggregate_name(&g).is_some() {
                    return Err(DataflowError::BadArgument(
                        "Can't group on an aggregate".into(),
                    ));
                }
                let e = stable(row_cx.compile(&g)?)?;
                let i = gexprs.len();
                by_text.insert(norm(&g), i);
                if let Expr::Column(c) = e {
                    by_col.entry(c).or_insert(i);
                }
                gexprs.push(e);
            }
            late = late
                || key_frame
                    .iter()
                    .any(|k| k.1.len() > 1 && !by_col.contains_key(&k.0));
            for (c, _) in key_frame.iter().filter(|_| !late) {
                let pos = match by_col.get(c) {
                    Some(&p) => p,
                    None => {
                        let p = gexprs.len();
                        gexprs.push(Expr::Column(*c));
                        by_col.insert(*c, p);
                        p
                    }
                };
                key_post.push(pos);
            }
            let scalar = group_asts.is_empty() && (late || key_frame.is_empty());
            empty_default_needed = !late && group_asts.is_empty() && !key_frame.is_empty();
            let ngroup = gexprs.len();
            let ftypes = scope.types();
            let mut pre = gexprs.clone();
            let mut specs = Vec::new();
            let mut out: Vec<(SqlType, bool, Collation)> = gexprs
                .iter()
                .map(|e| {
                    let (t, n) = e.result_type(&ftypes);
                    let coll = match e {
                        Expr::Column(c) => scope.cols[*c].collation,
                        _ => Collation::GeneralCi,
                    };
                    let c = if t_is_text(&t) {
                        coll
                    } else {
                        Collation::Binary
                    };
                    (t, n, c)
                })
                .collect();
            for (i, a) in aggs_ast.iter().enumerate() {
                let (spec, arg, ty) = self.agg_spec(a, &row_cx, ngroup + i)?;
                pre.push(arg);
                specs.push(spec);
                by_text.insert(norm(a), ngroup + i);
                out.push(ty);
            }
            // Columns selected, or used by HAVING or ORDER BY, outside any
            // aggregate and not grouped: MySQL accepts those functionally
            // dependent on the GROUP BY columns (`SELECT b.id, b.isbn,
            // COUNT(*) ... GROUP BY b.id`), MariaDB any. Each is taken as
            // MIN: the group's one value when it is dependent, and one of
            // the group's values (as MariaDB gives) when it is not.
            let mut bare = Vec::new();
            for item in &projection {
                if let ast::SelectItem::UnnamedExpr(e)
                | ast::SelectItem::ExprWithAlias { expr: e, .. } = item
                {
                    collect_bare_columns(e, &mut bare);
                }
            }
            if let Some(h) = &s.having {
                collect_bare_columns(h, &mut bare);
            }
            for o in q.order_by.iter().flat_map(|ob| &ob.exprs) {
                collect_bare_columns(&o.expr, &mut bare);
            }
            for ids in bare {
                let Ok(c) = scope.resolve(&ids) else { continue };
                if by_col.contains_key(&c) {
                    continue;
                }
                let pos = pre.len();
                let col = &scope.cols[c];
                let mut spec = AggSpec::new(AggKind::Min, pos);
                if col.ty.is_text() {
                    spec.collation = col.collation;
                }
                out.push((col.ty.clone(), true, spec.collation));
                pre.push(Expr::Column(c));
                specs.push(spec);
                by_col.insert(c, pos);
            }
            let pre_colls: Vec<Collation> = out.iter().map(|o| o.2).collect();
            if let (true, Some(w)) = (late, &window) {
                // Stored: the derived table's rows; aggregated at read time.
                let where_cx = ExprCx {
                    scope: &scope,
                    post: None,
                    params: ParamMode::Slots,
                    proposed: false,
                    aliases: None,
                };
                let filter = conjunction(
                    read_filters
                        .iter()
                        .map(|c| where_cx.compile(c))
                        .collect::<Result<Vec<_>>>()?,
                );
                read_filters.clear();
                let ra = ReadAgg {
                    window: Some(w.clone()),
                    filter,
                    aggregate: Some(ReadAggregate {
                        pre: Some(pre),
                        ngroup,
                        aggs: specs,
                        colls: pre_colls[..ngroup].to_vec(),
                        scalar,
                    }),
                    having: None,
                    project: vec![],
                    distinct: false,
                    order: vec![],
                };
                late_parts = Some((vec![], None, ra));
            } else if late {
                // Stored: group columns, aggregate arguments, key columns,
                // columns the read-time WHERE needs.
                let mut pre = pre;
                let mut pre_colls = pre_colls;
                let scope_coll = |c: usize| {
                    let sc = &scope.cols[c];
                    if sc.ty.is_text() {
                        sc.collation
                    } else {
                        Collation::Binary
                    }
                };
                let slot_of = |c: usize, pre: &mut Vec<Expr>, colls: &mut Vec<Collation>| match pre
                    .iter()
                    .position(|x| *x == Expr::Column(c))
                {
                    Some(p) => p,
                    None => {
                        pre.push(Expr::Column(c));
                        colls.push(scope_coll(c));
                        pre.len() - 1
                    }
                };
                let key_pos: Vec<usize> = key_frame
                    .iter()
                    .map(|k| slot_of(k.0, &mut pre, &mut pre_colls))
                    .collect();
                let where_cx = ExprCx {
                    scope: &scope,
                    post: None,
                    params: ParamMode::Slots,
                    proposed: false,
                    aliases: None,
                };
                let mut rf: Option<Expr> = None;
                for c in &read_filters {
                    let e = where_cx.compile(c)?;
                    let mut map = HashMap::new();
                    for col in e.columns() {
                        map.insert(col, slot_of(col, &mut pre, &mut pre_colls));
                    }
                    let e = e.map_columns(&|c| Expr::Column(*map.get(&c).unwrap_or(&c)));
                    rf = Some(match rf {
                        None => e,
                        Some(prev) => {
                            Expr::Logic(crate::expr::LogicOp::And, Box::new(prev), Box::new(e))
                        }
                    });
                }
                read_filters.clear();
                late_range = RangeIndex::of(rf.as_ref(), |p| match pre.get(p) {
                    Some(Expr::Column(c)) => Some((
                        scope.cols[*c].ty.clone(),
                        pre_colls[p],
                        scope.cols[*c].name.clone(),
                    )),
                    _ => None,
                });
                let ra = ReadAgg {
                    window: None,
                    filter: None,
                    aggregate: Some(ReadAggregate {
                        pre: None,
                        ngroup,
                        aggs: specs,
                        colls: pre_colls[..ngroup].to_vec(),
                        scalar,
                    }),
                    having: None,
                    project: vec![],
                    distinct: false,
                    order: vec![],
                };
                node = LNode {
                    op: LOp::Project(pre),
                    inputs: vec![node],
                    colls: pre_colls,
                };
                late_parts = Some((key_pos, rf, ra));
            } else {
                node = LNode {
                    op: LOp::Project(pre),
                    inputs: vec![node],
                    colls: pre_colls.clone(),
                };
                node = LNode {
                    op: LOp::Aggregate {
                        ngroup,
                        aggs: specs,
                        scalar,
                    },
                    inputs: vec![node],
                    colls: pre_colls,
                };
            }
            post = Some(PostAgg {
                by_text,
                by_col,
                out,
            });
        } else {
            post = None;
            key_post = key_frame.iter().map(|k| k.0).collect();
        }

        // Frame after aggregation.
        let frame_types: Vec<(SqlType, bool)> = match &post {
            Some(p) => p.out.iter().map(|(t, n, _)| (t.clone(), *n)).collect(),
            None => scope.types(),
        };
        let frame_colls: Vec<Collation> = match &post {
            Some(p) => p.out.iter().map(|o| o.2).collect(),
            None => scope
                .cols
                .iter()
                .map(|c| {
                    if c.ty.is_text() {
                        c.collation
                    } else {
                        Collation::Binary
                    }
                })
                .collect(),
        };
        let cx = ExprCx {
            scope: &scope,
            post: post.as_ref(),
            params: ParamMode::Slots,
            proposed: false,
            aliases: None,
        };

        // Projection.
        let mut visible: Vec<Expr> = Vec::new();
        let mut aliases_ok: HashMap<String, Expr> = HashMap::new();
        let mut columns: Vec<OutputColumn> = Vec::new();
        for item in &projection {
            match item {
                ast::SelectItem::Wildcard(_) | ast::SelectItem::QualifiedWildcard(..) => {
                    if post.is_some() {
                        return Err(unsupported("* with GROUP BY"));
                    }
                    let q = match item {
                        ast::SelectItem::QualifiedWildcard(n, _) => Some(
                            n.0.last()
                                .map(|i| i.value.to_ascii_lowercase())
                                .unwrap_or_default(),
                        ),
                        _ => None,
                    };
                    let mut any = false;
                    for (i, c) in scope.cols.iter().enumerate() {
                        // Columns a subquery joined in (`__sq<n>`) are internal.
                        let internal = c.qualifier.starts_with("__sq");
                        if q.as_ref().map_or(!internal, |q| *q == c.qualifier) {
                            any = true;
                            visible.push(Expr::Column(i));
                            columns.push(OutputColumn {
                                name: c.name.clone(),
                                table: c.table.clone(),
                                origin: c.origin.clone(),
                                ty: c.ty.clone(),
                                nullable: c.nullable,
                            });
                        }
                    }
                    if !any {
                        return Err(DataflowError::UnknownTable(q.unwrap_or_default()));
                    }
                }
                ast::SelectItem::UnnamedExpr(e)
                | ast::SelectItem::ExprWithAlias { expr: e, .. } => {
                    if has_subquery(e) {
                        return Err(unsupported("subquery in the select list"));
                    }
                    let c = cx.compile(e)?;
                    let (ty, nullable) = c.result_type(&frame_types);
                    let name = match item {
                        ast::SelectItem::ExprWithAlias { alias, .. } => alias.value.clone(),
                        _ => match as_column(e) {
                            Some(ids) => ids.last().map(|i| i.value.clone()).unwrap_or_default(),
                            None => crate::expr_column_name(e),
                        },
                    };
                    // A bare column (aliased or not, grouped or not) keeps
                    // its base table and column, as MariaDB's metadata does.
                    let base = as_column(e).and_then(|ids| scope.resolve(ids).ok());
                    let table = base
                        .map(|i| scope.cols[i].table.clone())
                        .unwrap_or_default();
                    let origin = base.and_then(|i| scope.cols[i].origin.clone());
                    if let ast::SelectItem::ExprWithAlias { alias, .. } = item {
                        aliases_ok.insert(alias.value.to_ascii_lowercase(), c.clone());
                    }
                    columns.push(OutputColumn {
                        name,
                        table,
                        origin,
                        ty,
                        nullable,
                    });
                    visible.push(c);
                }
            }
        }
        let cx_alias = ExprCx {
            scope: &scope,
            post: post.as_ref(),
            params: ParamMode::Slots,
            proposed: false,
            aliases: Some(&aliases_ok),
        };

        // HAVING.
        let mut post_read_filter: Option<Expr> = None;
        if let Some(h) = &s.having {
            let Some(_) = &post else {
                return Err(unsupported("HAVING without aggregation"));
            };
            let e = cx_alias.compile(h)?;
            if e.is_volatile() {
                return Err(unsupported("NOW()/RAND() in HAVING"));
            }
            if let Some((_, _, ra)) = &mut late_parts {
                ra.having = Some(e);
            } else if e.has_params() {
                if !top {
                    return Err(unsupported("parameters in a subquery"));
                }
                post_read_filter = Some(e);
            } else {
                let colls = node.colls.clone();
                node = LNode {
                    op: LOp::Filter(e),
                    inputs: vec![node],
                    colls,
                };
            }
        }

        // Over a windowed derived table, WHERE runs after the window.
        let mut window_filter: Option<Expr> = None;
        if window.is_some() && late_parts.is_none() {
            let mut parts = Vec::new();
            for c in &read_filters {
                parts.push(cx.compile(c)?);
            }
            window_filter = conjunction(parts);
            read_filters.clear();
        }
        // Read-time filters (range parameters) over the pre-aggregation frame.
        let mut rf: Option<Expr> = post_read_filter;
        for c in &read_filters {
            let e = cx.compile(c)?;
            rf = Some(match rf {
                None => e,
                Some(prev) => Expr::Logic(crate::expr::LogicOp::And, Box::new(prev), Box::new(e)),
            });
        }

        // ORDER BY.
        let mut order_exprs: Vec<(Expr, bool)> = Vec::new();
        if let Some(ob) = &q.order_by {
            if top || q.limit.is_some() {
                for o in &ob.exprs {
                    let e = match &o.expr {
                        ast::Expr::Value(ast::Value::Number(n, _)) => {
                            let p: usize = n
                                .parse()
                                .map_err(|_| DataflowError::BadArgument(n.clone()))?;
                            visible.get(p.wrapping_sub(1)).cloned().ok_or_else(|| {
                                DataflowError::UnknownColumn(n.clone(), "order clause".into())
                            })?
                        }
                        // A bare name is the select-list alias first, even
                        // when a column has that name (WHERE and GROUP BY
                        // see the column), as MySQL resolves ORDER BY.
                        // (An alias of NOW() or a parameter is the same for
                        // every row: the column's order is as good.)
                        ast::Expr::Identifier(id)
                            if aliases_ok
                                .get(&id.value.to_ascii_lowercase())
                                .is_some_and(|e| !e.is_volatile() && !e.has_params()) =>
                        {
                            aliases_ok[&id.value.to_ascii_lowercase()].clone()
                        }
                        other => cx_alias.compile(other)?,
                    };
                    if e.is_volatile() || e.has_params() {
                        return Err(unsupported("NOW()/RAND()/parameters in ORDER BY"));
                    }
                    order_exprs.push((e, o.asc == Some(false)));
                }
            }
        }
        let limit = q.limit.as_ref().map(count_of).transpose()?;
        let offset = q.offset.as_ref().map(|o| count_of(&o.value)).transpose()?;
        if !top && (limit.is_some() || offset.is_some()) {
            return Err(unsupported("LIMIT in a subquery"));
        }

        // Stored row: visible non-volatile outputs, key columns, order
        // columns, columns read-time expressions need.
        let mut stored: Vec<Expr> = Vec::new();
        let slot_of = |e: &Expr, stored: &mut Vec<Expr>| -> usize {
            match stored.iter().position(|x| x == e) {
                Some(p) => p,
                None => {
                    stored.push(e.clone());
                    stored.len() - 1
                }
            }
        };
        let mut output = Vec::new();
        let mut deferred = Vec::new();
        for (i, e) in visible.iter().enumerate() {
            if e.is_volatile() || e.has_params() {
                deferred.push(i);
                output.push(Expr::Literal(Value::Null));
            } else {
                let p = slot_of(e, &mut stored);
                output.push(Expr::Column(p));
            }
        }
        let visible_width = stored.len();
        let key: Vec<usize> = key_post
            .iter()
            .map(|&c| slot_of(&Expr::Column(c), &mut stored))
            .collect();
        let mut order: OrderSpec = Vec::new();
        for (e, desc) in &order_exprs {
            let p = slot_of(e, &mut stored);
            let coll = match e {
                Expr::Column(c) => frame_colls.get(*c).copied().unwrap_or(Collation::Binary),
                other => {
                    if t_is_text(&other.result_type(&frame_types).0) {
                        Collation::GeneralCi
                    } else {
                        Collation::Binary
                    }
                }
            };
            order.push((p, *desc, coll));
        }
        let remap = |e: &Expr, stored: &mut Vec<Expr>| -> Expr {
            let cols = e.columns();
            let mut map = HashMap::new();
            for c in cols {
                map.insert(c, slot_of(&Expr::Column(c), stored));
            }
            e.map_columns(&|c| Expr::Column(*map.get(&c).unwrap_or(&c)))
        };
        for i in deferred {
            output[i] = remap(&visible[i], &mut stored);
        }
        let read_filter = rf.map(|e| remap(&e, &mut stored));
        if let (Some(w), None) = (&window, &late_parts) {
            // Not aggregated: the window, WHERE and the projection at read time.
            late_parts = Some((
                vec![],
                None,
                ReadAgg {
                    window: Some(w.clone()),
                    filter: window_filter.take(),
                    aggregate: None,
                    having: None,
                    project: vec![],
                    distinct: false,
                    order: vec![],
                },
            ));
        }
        if let Some((key_pos, late_filter, mut ra)) = late_parts {
            // Read-time aggregation: the view keeps the pre-aggregation rows.
            if distinct && stored.len() > visible_width {
                return Err(unsupported(
                    "DISTINCT with ORDER BY or filters on columns not selected",
                ));
            }
            if distinct && output.iter().any(|e| !matches!(e, Expr::Column(_))) {
                return Err(unsupported("DISTINCT with read-time expressions"));
            }
            ra.project = stored;
            ra.distinct = distinct;
            ra.order = order;
            // A window's rows are kept in its order, so taking it is cheap.
            let ra_window = ra.window.is_some();
            let reader_order = ra
                .window
                .as_ref()
                .map(|w| w.order.clone())
                .unwrap_or_default();
            return Ok(PlannedView {
                plan: node,
                key: key_pos,
                key_slots: key_frame.iter().map(|k| k.1.clone()).collect(),
                key_names: key_frame
                    .iter()
                    .map(|k| scope.cols[k.0].name.clone())
                    .collect(),
                key_types: key_frame
                    .iter()
                    .map(|k| scope.cols[k.0].ty.clone())
                    .collect(),
                order: reader_order,
                read_filter: late_filter,
                output,
                columns,
                limit,
                offset,
                empty_default: None,
                dedup: false,
                finish: Some(ra),
                // A window is taken in its own order, before the filter.
                range: if ra_window { None } else { late_range },
            });
        }
        // DISTINCT whose stored rows carry more than the selected columns
        // (a read-time filter or range needs them, as in sysbench's
        // `SELECT DISTINCT c ... WHERE id BETWEEN ? AND ? ORDER BY c`): the
        // view keeps the rows, and DISTINCT and ORDER BY are taken at read
        // time over the selected columns.
        let distinct_at_read = distinct && stored.len() > visible_width + key.len();
        if distinct_at_read
            && order
                .iter()
                .any(|(slot, ..)| !output.contains(&Expr::Column(*slot)))
        {
            return Err(unsupported(
                "DISTINCT with ORDER BY on columns not selected",
            ));
        }
        if distinct
            && ((read_filter.is_some() && !distinct_at_read)
                || output.iter().any(|e| !matches!(e, Expr::Column(_))))
        {
            return Err(unsupported("DISTINCT with read-time expressions"));
        }
        let stored_colls: Vec<Collation> = stored
            .iter()
            .map(|e| match e {
                Expr::Column(c) => frame_colls.get(*c).copied().unwrap_or(Collation::Binary),
                other => {
                    if t_is_text(&other.result_type(&frame_types).0) {
                        Collation::GeneralCi
                    } else {
                        Collation::Binary
                    }
                }
            })
            .collect();
        let range = RangeIndex::of(read_filter.as_ref(), |c| match stored.get(c) {
            Some(Expr::Column(f)) => Some((
                frame_types.get(*f)?.0.clone(),
                stored_colls[c],
                match &post {
                    None => scope.cols.get(*f)?.name.clone(),
                    Some(_) => columns
                        .iter()
                        .zip(&output)
                        .find(|(_, e)| **e == Expr::Column(c))
                        .map_or_else(|| format!("#{c}"), |(o, _)| o.name.clone()),
                },
            )),
            _ => None,
        });
        let empty_default = if empty_default_needed {
            // The aggregate row over no input: group columns NULL.
            let post = post
                .as_ref()
                .ok_or_else(|| DataflowError::Internal("no aggregate".into()))?;
            let LOp::Aggregate { ngroup, aggs, .. } = &node.op else {
                return Err(unsupported(
                    "HAVING on an aggregate without GROUP BY with parameters",
                ));
            };
            let a = crate::ops::Aggregate::new(*ngroup, aggs.clone(), vec![], true);
            let row = a.empty_row();
            let _ = post;
            Some(
                stored
                    .iter()
                    .map(|e| e.eval(&row).unwrap_or(Value::Null))
                    .collect::<Row>(),
            )
        } else {
            None
        };
        node = LNode {
            op: LOp::Project(stored.clone()),
            inputs: vec![node],
            colls: stored_colls.clone(),
        };
        if distinct && !distinct_at_read {
            node = LNode {
                op: LOp::Aggregate {
                    ngroup: stored.len(),
                    aggs: vec![],
                    scalar: false,
                },
                inputs: vec![node],
                colls: stored_colls,
            };
        }
        let key_slots: Vec<Vec<usize>> = key_frame.iter().map(|k| k.1.clone()).collect();
        let key_names = key_frame
            .iter()
            .map(|k| scope.cols[k.0].name.clone())
            .collect();
        let key_types = key_frame
            .iter()
            .map(|k| scope.cols[k.0].ty.clone())
            .collect();
        if distinct_at_read {
            // Each ORDER BY slot is a selected column (checked above).
            let order_out = order
                .iter()
                .filter_map(|&(slot, desc, coll)| {
                    let at = output.iter().position(|e| *e == Expr::Column(slot))?;
                    Some((at, desc, coll))
                })
                .collect();
            let finish = ReadAgg {
                window: None,
                filter: None,
                aggregate: None,
                having: None,
                project: output.clone(),
                distinct: true,
                order: order_out,
            };
            return Ok(PlannedView {
                plan: node,
                key,
                key_slots,
                key_names,
                key_types,
                order: vec![],
                read_filter,
                output: (0..output.len()).map(Expr::Column).collect(),
                columns,
                limit,
                offset,
                empty_default,
                dedup: false,
                finish: Some(finish),
                range,
            });
        }
        // Several lookups (IN lists, also when collapsed into `col = ?`)
        // may return equal rows; the reader merges them for DISTINCT.
        let dedup = distinct;
        Ok(PlannedView {
            plan: node,
            key,
            key_slots,
            key_names,
            key_types,
            order,
            read_filter,
            output,
            columns,
            limit,
            offset,
            empty_default,
            dedup,
            finish: None,
            range,
        })
    }

    /// `FROM (SELECT ... ORDER BY ... LIMIT n) [AS] d` as the only FROM item
    /// of a top-level query: the derived table planned as a view of its
    /// own (full ordered result, no parameters), its stored row exposed as
    /// `d`'s columns (hidden ones for ORDER BY columns not selected), and
    /// the window to take at read time.
    fn windowed_derived(
        &self,
        s: &ast::Select,
        top: bool,
    ) -> Result<Option<(LNode, Scope, Window)>> {
        let [ast::TableWithJoins { relation, joins }] = s.from.as_slice() else {
            return Ok(None);
        };
        let ast::TableFactor::Derived {
            lateral: false,
            subquery,
            alias,
        } = relation
        else {
            return Ok(None);
        };
        if subquery.limit.is_none() && subquery.offset.is_none() {
            return Ok(None);
        }
        if !top || !joins.is_empty() {
            return Err(unsupported(
                "LIMIT in a subquery (other than the only FROM item)",
            ));
        }
        let Some(alias) = alias else {
            return Err(DataflowError::BadArgument(
                "Every derived table must have its own alias".into(),
            ));
        };
        let ast::SetExpr::Select(inner_s) = &*subquery.body else {
            return Err(unsupported("LIMIT in a subquery over UNION"));
        };
        if inner_s.from.is_empty() || is_dual(inner_s) {
            return Err(unsupported("LIMIT in a subquery without FROM"));
        }
        let sub = Planner {
            storage: self.storage,
            database: self.database,
            views: self.views,
            depth: self.depth + 1,
        };
        let pv = sub.select(inner_s, subquery, true)?;
        if !pv.key.is_empty()
            || pv.read_filter.is_some()
            || pv.finish.is_some()
            || pv.empty_default.is_some()
            || pv.output.iter().any(|e| e.has_params() || e.is_volatile())
        {
            return Err(unsupported(
                "parameters, NOW() or aggregates without GROUP BY in a subquery with LIMIT",
            ));
        }
        // One scope column per stored column: the selected ones by name.
        let width = pv.plan.width();
        let mut names: Vec<Option<usize>> = vec![None; width];
        for (i, e) in pv.output.iter().enumerate() {
            match e {
                Expr::Column(c) if *c < width && names[*c].is_none() => names[*c] = Some(i),
                _ => return Err(unsupported("this derived table with LIMIT")),
            }
        }
        let qualifier = alias.name.value.to_ascii_lowercase();
        let cols = (0..width)
            .map(|c| {
                let coll = pv.plan.colls[c];
                match names[c] {
                    Some(i) => {
                        let oc = &pv.columns[i];
                        let name = alias
                            .columns
                            .get(i)
                            .map(|n| n.value.clone())
                            .unwrap_or_else(|| oc.name.clone());
                        ScopeCol {
                            qualifier: qualifier.clone(),
                            name,
                            ty: oc.ty.clone(),
                            nullable: oc.nullable,
                            collation: coll,
                            table: oc.table.clone(),
                            origin: oc.origin.clone(),
                        }
                    }
                    None => ScopeCol {
                        qualifier: "__sqwindow".into(),
                        name: format!("__h{c}"),
                        // Only the window's ORDER BY reads it.
                        ty: SqlType::Int {
                            bytes: 8,
                            unsigned: false,
                            display_width: None,
                        },
                        nullable: true,
                        collation: coll,
                        table: String::new(),
                        origin: None,
                    },
                }
            })
            .collect();
        let window = Window {
            order: pv.order.clone(),
            offset: pv.offset.clone(),
            limit: pv.limit.clone(),
        };
        Ok(Some((pv.plan, Scope { cols }, window)))
    }

    /// `col = ?`, `? = col`, `col IN (?, ...)` on a FROM column.
    fn key_conjunct(&self, c: &ast::Expr, scope: &Scope) -> Option<(usize, Vec<usize>)> {
        match c {
            ast::Expr::BinaryOp {
                left,
                op: ast::BinaryOperator::Eq,
                right,
            } => {
                let (col, slot) = match (
                    as_column(left),
                    as_slot(right),
                    as_column(right),
                    as_slot(left),
                ) {
                    (Some(col), Some(slot), _, _) => (col, slot),
                    (_, _, Some(col), Some(slot)) => (col, slot),
                    _ => return None,
                };
                Some((scope.resolve(col).ok()?, vec![slot]))
            }
            ast::Expr::InList {
                expr,
                list,
                negated: false,
            } if !list.is_empty() => {
                let col = scope.resolve(as_column(expr)?).ok()?;
                let slots: Option<Vec<usize>> = list.iter().map(as_slot).collect();
                Some((col, slots?))
            }
            ast::Expr::Nested(x) => self.key_conjunct(x, scope),
            _ => None,
        }
    }

    fn agg_spec(
        &self,
        a: &ast::Expr,
        cx: &ExprCx<'_>,
        out: usize,
    ) -> Result<(AggSpec, Expr, (SqlType, bool, Collation))> {
        let ast::Expr::Function(f) = a else {
            return Err(DataflowError::Internal("not an aggregate".into()));
        };
        let name = aggregate_name(a).unwrap_or_default();
        if f.over.is_some() || f.filter.is_some() {
            return Err(unsupported("window aggregates"));
        }
        let ast::FunctionArguments::List(list) = &f.args else {
            return Err(DataflowError::BadArgument(format!(
                "{name} needs an argument"
            )));
        };
        let distinct = matches!(
            list.duplicate_treatment,
            Some(ast::DuplicateTreatment::Distinct)
        );
        let mut separator = ",".to_string();
        let mut desc = false;
        for clause in &list.clauses {
            match clause {
                ast::FunctionArgumentClause::Separator(v) => {
                    separator = super::expr::literal(v)?.to_string()
                }
                ast::FunctionArgumentClause::OrderBy(obs)
                    if name == "group_concat" && obs.len() == 1 =>
                {
                    let arg = list
                        .args
                        .first()
                        .map(|a| a.to_string().to_ascii_lowercase());
                    if arg != Some(obs[0].expr.to_string().to_ascii_lowercase()) {
                        return Err(unsupported("GROUP_CONCAT ordered by another expression"));
                    }
                    desc = obs[0].asc == Some(false);
                }
                _ => return Err(unsupported(format!("{name} clause {clause}"))),
            }
        }
        if list.args.len() != 1 {
            return Err(unsupported(format!(
                "{name} with {} arguments",
                list.args.len()
            )));
        }
        let arg_ast = match &list.args[0] {
            ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Wildcard)
                if name == "count" && !distinct =>
            {
                let spec = AggSpec::new(AggKind::CountStar, out);
                return Ok((
                    spec,
                    Expr::Literal(Value::Int(1)),
                    (crate::expr::int_of_width(21), false, Collation::Binary),
                ));
            }
            ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => e,
            other => return Err(unsupported(format!("{name}({other})"))),
        };
        if has_placeholder(arg_ast) || has_subquery(arg_ast) {
            return Err(unsupported("parameters or subqueries in an aggregate"));
        }
        let arg = stable(cx.compile(arg_ast)?)?;
        let ftypes = cx.frame_types();
        let (aty, nullable) = arg.result_type(&ftypes);
        let coll = match &arg {
            Expr::Column(c) => cx
                .scope
                .cols
                .get(*c)
                .map(|c| c.collation)
                .unwrap_or_default(),
            _ => Collation::GeneralCi,
        };
        let kind = match name.as_str() {
            // MySQL counts a never-NULL argument without evaluating it (so
            // a value that overflowed in a view is not an error there).
            "count" if !distinct && !nullable => AggKind::CountStar,
            "count" => AggKind::Count,
            "sum" => AggKind::Sum,
            "avg" => AggKind::Avg,
            "min" => AggKind::Min,
            "max" => AggKind::Max,
            _ => AggKind::GroupConcat,
        };
        let mut spec = AggSpec::new(kind, out);
        spec.distinct = distinct;
        spec.separator = separator;
        spec.desc = desc;
        spec.collation = if t_is_text(&aty) {
            coll
        } else {
            Collation::Binary
        };
        spec.float = matches!(aty, SqlType::Float | SqlType::Double) || t_is_text(&aty);
        spec.scale = match aty {
            SqlType::Decimal { scale, .. } => u32::from(scale),
            _ => 0,
        };
        let ty = match kind {
            // MySQL's COUNT is a BIGINT 21 characters wide.
            AggKind::Count | AggKind::CountStar => {
                (crate::expr::int_of_width(21), false, Collation::Binary)
            }
            AggKind::Sum | AggKind::Avg => {
                if spec.float {
                    (SqlType::Double, true, Collation::Binary)
                } else {
                    // MySQL's precision: the argument's digits and 22 more
                    // for SUM, 4 more (as the scale) for AVG.
                    let digits = match &aty {
                        SqlType::Decimal { precision, .. } => u32::from(*precision),
                        t => crate::expr::type_chars(t).saturating_sub(1).max(1),
                    };
                    let (more, scale) = match kind {
                        AggKind::Avg => (4, spec.scale as u8 + 4),
                        _ => (22, spec.scale as u8),
                    };
                    (
                        SqlType::Decimal {
                            precision: (digits + more).min(65) as u8,
                            scale: scale.min(30),
                        },
                        true,
                        Collation::Binary,
                    )
                }
            }
            AggKind::Min | AggKind::Max => (aty.clone(), true, spec.collation),
            AggKind::GroupConcat => (SqlType::Text(65535), true, Collation::GeneralCi),
        };
        Ok((spec, arg, ty))
    }

    fn semi_in(
        &self,
        node: LNode,
        scope: &Scope,
        expr: &ast::Expr,
        sub: &ast::Query,
        negated: bool,
    ) -> Result<LNode> {
        let col = as_column(expr).ok_or_else(|| unsupported("IN (SELECT ...) on an expression"))?;
        let c = scope.resolve(col)?;
        let rel = self.relation(sub)?;
        if rel.cols.len() != 1 {
            return Err(DataflowError::BadArgument(
                "Operand should contain 1 column(s)".into(),
            ));
        }
        let nullable = scope.cols[c].nullable || rel.cols[0].nullable;
        let kind = if negated {
            JoinKind::Anti
        } else {
            JoinKind::Semi
        };
        let colls = node.colls.clone();
        let sub = rel.node;
        let joined = LNode {
            op: LOp::Join {
                kind,
                left_cols: vec![c],
                right_cols: vec![0],
            },
            inputs: vec![node, sub.clone()],
            colls: colls.clone(),
        };
        if !negated || !nullable {
            return Ok(joined);
        }
        Ok(not_in_nulls(joined, c, sub))
    }

    /// Plans a correlated subquery's FROM and WHERE: every `inner = outer`
    /// equality becomes a (inner, outer) column pair for the caller's join;
    /// every other condition filters the inner plan. `context` and
    /// `non_equality` name the construct in Unsupported errors.
    fn plan_correlated(
        &self,
        s: &ast::Select,
        scope: &Scope,
        context: &str,
        non_equality: &str,
    ) -> Result<Correlated> {
        self.plan_correlated_params(s, scope, context, non_equality, None)
    }

    /// [`Self::plan_correlated`], also collecting `inner = ?` conditions
    /// as (inner column, parameter slot) when `params` is given.
    fn plan_correlated_params(
        &self,
        s: &ast::Select,
        scope: &Scope,
        context: &str,
        non_equality: &str,
        mut params: Option<&mut Vec<(usize, usize)>>,
    ) -> Result<Correlated> {
        let mut conj = Vec::new();
        if let Some(w) = &s.selection {
            split_conjuncts(w, &mut conj);
        }
        let (mut inner, iscope) = self.plan_from(&s.from, &mut conj)?;
        let mut outer_cols = Vec::new();
        let mut inner_cols = Vec::new();
        for c in conj {
            if let ast::Expr::BinaryOp {
                left,
                op: ast::BinaryOperator::Eq,
                right,
            } = &c
            {
                if let (Some(a), Some(b)) = (as_column(left), as_column(right)) {
                    let pick = |x: &[ast::Ident], y: &[ast::Ident]| match (
                        iscope.resolve(x),
                        scope.resolve(y),
                    ) {
                        (Ok(i), Ok(o)) if iscope.resolve(y).is_err() => Some((i, o)),
                        _ => None,
                    };
                    if let Some((i, o)) = pick(a, b).or_else(|| pick(b, a)) {
                        inner_cols.push(i);
                        outer_cols.push(o);
                        continue;
                    }
                }
            }
            if let (
                Some(ps),
                ast::Expr::BinaryOp {
                    left,
                    op: ast::BinaryOperator::Eq,
                    right,
                },
            ) = (params.as_deref_mut(), &c)
            {
                let pair = match (as_column(left), as_slot(right)) {
                    (Some(col), Some(slot)) => Some((col, slot)),
                    _ => as_column(right).zip(as_slot(left)),
                };
                if let Some(i) =
                    pair.and_then(|(col, slot)| Some((iscope.resolve(col).ok()?, slot)))
                {
                    ps.push(i);
                    continue;
                }
            }
            if has_placeholder(&c) || has_subquery(&c) {
                return Err(unsupported(format!(
                    "parameters or subqueries inside {context}"
                )));
            }
            let e = ExprCx::row(&iscope)
                .compile(&c)
                .and_then(stable)
                .map_err(|e| match e {
                    DataflowError::UnknownColumn(..) => unsupported(non_equality),
                    other => other,
                })?;
            let colls = inner.colls.clone();
            inner = LNode {
                op: LOp::Filter(e),
                inputs: vec![inner],
                colls,
            };
        }
        Ok(Correlated {
            inner,
            scope: iscope,
            inner_cols,
            outer_cols,
        })
    }

    /// `x IN (SELECT y ... WHERE col = ? ...)` or `EXISTS (SELECT ... WHERE
    /// inner = outer AND col = ? ...)`: a semi-join whose right side depends
    /// on parameters. The right side, projected to (y, correlation columns,
    /// parameter columns) and made DISTINCT, is inner-joined, and the
    /// parameter columns become reader keys: for one key value each outer
    /// row meets at most one right row, so no row is repeated.
    fn keyed_semi(
        &self,
        node: &mut LNode,
        scope: &mut Scope,
        key_frame: &mut Vec<(usize, Vec<usize>)>,
        in_expr: Option<&ast::Expr>,
        sub: &ast::Query,
        n: usize,
    ) -> Result<()> {
        let ast::SetExpr::Select(s) = &*sub.body else {
            return Err(unsupported("parameters in this subquery"));
        };
        if s.from.is_empty()
            || !matches!(&s.group_by, ast::GroupByExpr::Expressions(g, _) if g.is_empty())
            || s.having.is_some()
            || sub.limit.is_some()
            || sub.offset.is_some()
        {
            return Err(unsupported("parameters in this subquery"));
        }
        let mut params = Vec::new();
        let Correlated {
            inner,
            scope: iscope,
            inner_cols,
            outer_cols,
        } = self.plan_correlated_params(
            s,
            scope,
            "a subquery",
            "correlated condition other than equality",
            Some(&mut params),
        )?;
        if params.is_empty() {
            return Err(unsupported("parameters in a subquery other than col = ?"));
        }
        let text_coll =
            |ty: &SqlType, c: Collation| if ty.is_text() { c } else { Collation::Binary };
        let mut proj: Vec<Expr> = Vec::new();
        let mut cols: Vec<ScopeCol> = Vec::new();
        let mut left_cols = Vec::new();
        let mut push_inner = |e: Expr, ty: SqlType, coll: Collation, proj: &mut Vec<Expr>| {
            proj.push(e);
            cols.push(ScopeCol {
                qualifier: format!("__sqk{n}"),
                name: format!("__c{}", proj.len() - 1),
                ty,
                nullable: true,
                collation: coll,
                table: String::new(),
                origin: None,
            });
        };
        if let Some(x) = in_expr {
            let xc = scope.resolve(
                as_column(x).ok_or_else(|| unsupported("IN (SELECT ...) on an expression"))?,
            )?;
            let y_ast = match s.projection.as_slice() {
                [ast::SelectItem::UnnamedExpr(e)
                | ast::SelectItem::ExprWithAlias { expr: e, .. }] => e,
                _ => {
                    return Err(DataflowError::BadArgument(
                        "Operand should contain 1 column(s)".into(),
                    ))
                }
            };
            if aggregate_name(y_ast).is_some() || has_subquery(y_ast) || has_placeholder(y_ast) {
                return Err(unsupported("parameters in this subquery"));
            }
            let y = stable(ExprCx::row(&iscope).compile(y_ast)?)?;
            let (ty, _) = y.result_type(&iscope.types());
            let coll = match &y {
                Expr::Column(c) => iscope.cols[*c].collation,
                _ => Collation::GeneralCi,
            };
            push_inner(y, ty.clone(), text_coll(&ty, coll), &mut proj);
            left_cols.push(xc);
        }
        for (&i, &o) in inner_cols.iter().zip(&outer_cols) {
            let ic = &iscope.cols[i];
            push_inner(
                Expr::Column(i),
                ic.ty.clone(),
                text_coll(&ic.ty, ic.collation),
                &mut proj,
            );
            left_cols.push(o);
        }
        if left_cols.is_empty() {
            return Err(unsupported("uncorrelated EXISTS"));
        }
        let nk = left_cols.len();
        for &(i, _) in &params {
            let ic = &iscope.cols[i];
            push_inner(
                Expr::Column(i),
                ic.ty.clone(),
                text_coll(&ic.ty, ic.collation),
                &mut proj,
            );
        }
        let rcolls: Vec<Collation> = cols.iter().map(|c| c.collation).collect();
        let right = LNode {
            op: LOp::Aggregate {
                ngroup: proj.len(),
                aggs: vec![],
                scalar: false,
            },
            inputs: vec![LNode {
                op: LOp::Project(proj),
                inputs: vec![inner],
                colls: rcolls.clone(),
            }],
            colls: rcolls.clone(),
        };
        let width = scope.cols.len();
        let mut colls = node.colls.clone();
        colls.extend(rcolls);
        let left = LNode::take(node);
        *node = LNode {
            op: LOp::Join {
                kind: JoinKind::Inner,
                left_cols,
                right_cols: (0..nk).collect(),
            },
            inputs: vec![left, right],
            colls,
        };
        scope.cols.extend(cols);
        for (j, &(_, slot)) in params.iter().enumerate() {
            key_frame.push((width + nk + j, vec![slot]));
        }
        Ok(())
    }

    /// Correlated `EXISTS (SELECT ... FROM ... WHERE inner = outer AND ...)`.
    fn semi_exists(
        &self,
        node: LNode,
        scope: &Scope,
        sub: &ast::Query,
        negated: bool,
    ) -> Result<LNode> {
        let ast::SetExpr::Select(s) = &*sub.body else {
            return Err(unsupported("EXISTS over this query"));
        };
        if s.from.is_empty()
            || !matches!(&s.group_by, ast::GroupByExpr::Expressions(g, _) if g.is_empty())
            || s.having.is_some()
        {
            return Err(unsupported("EXISTS over this query"));
        }
        let Correlated {
            inner,
            inner_cols,
            outer_cols,
            ..
        } = self.plan_correlated(
            s,
            scope,
            "EXISTS",
            "correlated EXISTS condition other than equality",
        )?;
        if outer_cols.is_empty() {
            return Err(unsupported("uncorrelated EXISTS"));
        }
        let kind = if negated {
            JoinKind::Anti
        } else {
            JoinKind::Semi
        };
        let colls = node.colls.clone();
        Ok(LNode {
            op: LOp::Join {
                kind,
                left_cols: outer_cols,
                right_cols: inner_cols,
            },
            inputs: vec![node, inner],
            colls,
        })
    }
}

/// Replaces `(SELECT agg(x) FROM ... WHERE inner = outer ...)` in a select
/// list by a column of a LEFT JOIN with that aggregate grouped by the
/// correlation columns.
struct SubqueryRewriter<'p, 'a> {
    planner: &'p Planner<'a>,
    node: &'p mut LNode,
    scope: &'p mut Scope,
    n: &'p mut usize,
    err: Option<DataflowError>,
}

impl ast::VisitorMut for SubqueryRewriter<'_, '_> {
    type Break = ();
    fn pre_visit_expr(&mut self, e: &mut ast::Expr) -> std::ops::ControlFlow<()> {
        if let ast::Expr::Subquery(q) = e {
            match self
                .planner
                .scalar_subquery(q, self.node, self.scope, *self.n)
            {
                Ok(replacement) => {
                    *self.n += 1;
                    *e = replacement;
                }
                Err(err) => {
                    self.err = Some(err);
                    return std::ops::ControlFlow::Break(());
                }
            }
        }
        std::ops::ControlFlow::Continue(())
    }
}

/// A planned correlated subquery body (see `Planner::plan_correlated`).
struct Correlated {
    inner: LNode,
    scope: Scope,
    inner_cols: Vec<usize>,
    outer_cols: Vec<usize>,
}

impl Planner<'_> {
    fn scalar_subquery(
        &self,
        q: &ast::Query,
        node: &mut LNode,
        scope: &mut Scope,
        n: usize,
    ) -> Result<ast::Expr> {
        let ast::SetExpr::Select(s) = &*q.body else {
            return Err(unsupported("this scalar subquery"));
        };
        let agg = match &s.projection.first() {
            Some(ast::SelectItem::UnnamedExpr(e))
            | Some(ast::SelectItem::ExprWithAlias { expr: e, .. }) => e.clone(),
            _ => return Err(unsupported("this scalar subquery")),
        };
        // `(SELECT y ... ORDER BY y [DESC] LIMIT 1)` is MAX(y) (MIN(y)).
        let top1_desc = match (&q.order_by, &q.limit, &q.offset) {
            (Some(ob), Some(ast::Expr::Value(ast::Value::Number(one, _))), None)
                if one == "1"
                    && ob.interpolate.is_none()
                    && ob.exprs.len() == 1
                    && ob.exprs[0].nulls_first.is_none()
                    && ob.exprs[0].with_fill.is_none()
                    && aggregate_name(&agg).is_none()
                    && norm(&ob.exprs[0].expr) == norm(&agg) =>
            {
                Some(ob.exprs[0].asc == Some(false))
            }
            _ => None,
        };
        let simple = s.from.len() == 1
            && matches!(&s.group_by, ast::GroupByExpr::Expressions(g, _) if g.is_empty())
            && s.having.is_none()
            && s.distinct.is_none()
            && ((q.order_by.is_none() && q.limit.is_none()) || top1_desc.is_some())
            && s.projection.len() == 1;
        if !simple {
            return Err(unsupported("this scalar subquery"));
        }
        // Without an aggregate, `(SELECT y ...)` is MAX(y) plus the row
        // count, which read time checks (MySQL error 1242 for several rows).
        let (agg, single) = match aggregate_name(&agg) {
            Some(_) => (agg, false),
            None => (
                ast::Expr::Function(ast::Function {
                    name: ast::ObjectName(vec![ast::Ident::new(match top1_desc {
                        Some(false) => "MIN",
                        _ => "MAX",
                    })]),
                    parameters: ast::FunctionArguments::None,
                    args: ast::FunctionArguments::List(ast::FunctionArgumentList {
                        duplicate_treatment: None,
                        args: vec![ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(agg))],
                        clauses: vec![],
                    }),
                    filter: None,
                    null_treatment: None,
                    over: None,
                    within_group: vec![],
                }),
                top1_desc.is_none(),
            ),
        };
        let agg_name = aggregate_name(&agg).unwrap_or_default();
        let Correlated {
            inner,
            scope: iscope,
            inner_cols,
            outer_cols,
        } = self.plan_correlated(
            s,
            scope,
            "a scalar subquery",
            "correlated condition other than equality",
        )?;
        // Uncorrelated: a one-row aggregate joined to every row (key []).
        let k = inner_cols.len();
        let row_cx = ExprCx::row(&iscope);
        let (spec, arg, (ty, _, coll)) = self.agg_spec(&agg, &row_cx, k)?;
        if top1_desc == Some(false) && arg.result_type(&iscope.types()).1 {
            return Err(unsupported(
                "ORDER BY ... ASC LIMIT 1 over a nullable expression in a scalar subquery",
            ));
        }
        let mut pre: Vec<Expr> = inner_cols.iter().map(|&c| Expr::Column(c)).collect();
        pre.push(arg);
        let mut colls: Vec<Collation> = inner_cols.iter().map(|&c| inner.colls[c]).collect();
        colls.push(coll);
        let mut specs = vec![spec];
        if single {
            pre.push(Expr::Literal(Value::Int(1)));
            colls.push(Collation::Binary);
            specs.push(AggSpec::new(AggKind::CountStar, k + 1));
        }
        let proj = LNode {
            op: LOp::Project(pre),
            inputs: vec![inner],
            colls: colls.clone(),
        };
        let aggn = LNode {
            op: LOp::Aggregate {
                ngroup: k,
                aggs: specs,
                scalar: k == 0,
            },
            inputs: vec![proj],
            colls: colls.clone(),
        };
        let qual = format!("__sq{n}");
        let mut jcolls = node.colls.clone();
        jcolls.extend(colls.iter().copied());
        let left = LNode::take(node);
        *node = LNode {
            op: LOp::Join {
                kind: JoinKind::Left,
                left_cols: outer_cols,
                right_cols: (0..k).collect(),
            },
            inputs: vec![left, aggn],
            colls: jcolls,
        };
        for (i, &c) in inner_cols.iter().enumerate() {
            let ic = &iscope.cols[c];
            scope.cols.push(ScopeCol {
                qualifier: qual.clone(),
                name: format!("__k{i}"),
                ty: ic.ty.clone(),
                nullable: true,
                collation: ic.collation,
                table: String::new(),
                origin: None,
            });
        }
        scope.cols.push(ScopeCol {
            qualifier: qual.clone(),
            name: "__v".into(),
            ty,
            nullable: true,
            collation: coll,
            table: String::new(),
            origin: None,
        });
        let col = ast::Expr::CompoundIdentifier(vec![
            ast::Ident::new(qual.clone()),
            ast::Ident::new("__v"),
        ]);
        if single {
            scope.cols.push(ScopeCol {
                qualifier: qual.clone(),
                name: "__n".into(),
                ty: SqlType::Int {
                    bytes: 8,
                    unsigned: false,
                    display_width: None,
                },
                nullable: true,
                collation: Collation::Binary,
                table: String::new(),
                origin: None,
            });
            let n =
                ast::Expr::CompoundIdentifier(vec![ast::Ident::new(qual), ast::Ident::new("__n")]);
            return Ok(ast::Expr::Function(ast::Function {
                name: ast::ObjectName(vec![ast::Ident::new(super::expr::SINGLE_ROW_FN)]),
                parameters: ast::FunctionArguments::None,
                args: ast::FunctionArguments::List(ast::FunctionArgumentList {
                    duplicate_treatment: None,
                    args: vec![
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(n)),
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(col)),
                    ],
                    clauses: vec![],
                }),
                filter: None,
                null_treatment: None,
                over: None,
                within_group: vec![],
            }));
        }
        if agg_name == "count" {
            // COUNT over no rows is 0, not NULL.
            return Ok(ast::Expr::Function(ast::Function {
                name: ast::ObjectName(vec![ast::Ident::new("COALESCE")]),
                parameters: ast::FunctionArguments::None,
                args: ast::FunctionArguments::List(ast::FunctionArgumentList {
                    duplicate_treatment: None,
                    args: vec![
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(col)),
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(ast::Expr::Value(
                            ast::Value::Number("0".into(), false),
                        ))),
                    ],
                    clauses: vec![],
                }),
                filter: None,
                null_treatment: None,
                over: None,
                within_group: vec![],
            }));
        }
        Ok(col)
    }
}

/// The AND of `parts` (`None` for none).
fn conjunction(parts: Vec<Expr>) -> Option<Expr> {
    parts
        .into_iter()
        .reduce(|a, b| Expr::Logic(crate::expr::LogicOp::And, Box::new(a), Box::new(b)))
}

/// `L LEFT JOIN R ON <equalities> AND <conditions on both sides>`, from
/// maintained operators: J = the inner join filtered by `conds`; the left
/// rows with no row in J (anti-join on an exact, NULL-free encoding of all
/// their columns) padded with NULLs; the union of both.
fn left_join_on(
    left: LNode,
    right: LNode,
    lcols: Vec<usize>,
    rcols: Vec<usize>,
    conds: Vec<Expr>,
) -> LNode {
    let lw = left.width();
    let rw = right.width();
    let mut colls = left.colls.clone();
    colls.extend(right.colls.iter().copied());
    let mut matched = LNode {
        op: LOp::Join {
            kind: JoinKind::Inner,
            left_cols: lcols,
            right_cols: rcols,
        },
        inputs: vec![left.clone(), right],
        colls: colls.clone(),
    };
    for e in conds {
        matched = LNode {
            op: LOp::Filter(e),
            inputs: vec![matched],
            colls: colls.clone(),
        };
    }
    // Identity of a left row: (col IS NULL, IFNULL(col, 0)) per column.
    let identity: Vec<Expr> = (0..lw)
        .flat_map(|i| {
            [
                Expr::IsNull {
                    expr: Box::new(Expr::Column(i)),
                    negated: false,
                },
                Expr::Call(
                    crate::expr::Func::IfNull,
                    vec![Expr::Column(i), Expr::Literal(Value::Int(0))],
                ),
            ]
        })
        .collect();
    let idw = identity.len();
    let id_colls = vec![Collation::Binary; idw];
    let matched_ids = LNode {
        op: LOp::Aggregate {
            ngroup: idw,
            aggs: vec![],
            scalar: false,
        },
        inputs: vec![LNode {
            op: LOp::Project(identity.clone()),
            inputs: vec![matched.clone()],
            colls: id_colls.clone(),
        }],
        colls: id_colls.clone(),
    };
    let mut lid_colls = left.colls.clone();
    lid_colls.extend(id_colls);
    let left_ids = LNode {
        op: LOp::Project((0..lw).map(Expr::Column).chain(identity).collect()),
        inputs: vec![left],
        colls: lid_colls.clone(),
    };
    let unmatched = LNode {
        op: LOp::Join {
            kind: JoinKind::Anti,
            left_cols: (lw..lw + idw).collect(),
            right_cols: (0..idw).collect(),
        },
        inputs: vec![left_ids, matched_ids],
        colls: lid_colls,
    };
    let padded = LNode {
        op: LOp::Project(
            (0..lw)
                .map(Expr::Column)
                .chain(std::iter::repeat_n(Expr::Literal(Value::Null), rw))
                .collect(),
        ),
        inputs: vec![unmatched],
        colls: colls.clone(),
    };
    LNode {
        op: LOp::Union,
        inputs: vec![matched, padded],
        colls,
    }
}

/// MySQL's `x NOT IN (SELECT y ...)` over nullable columns: true when the
/// subquery is empty; otherwise NULL (so not true) when `x` is NULL or any
/// `y` is NULL, else true exactly when no `y` equals `x`. `anti` is the
/// anti-join on `x = y` (which passes rows whose `x` is NULL); the subquery's
/// row count and non-NULL count join in as two columns (one row, key []),
/// filter, and are projected away.
fn not_in_nulls(anti: LNode, x: usize, sub: LNode) -> LNode {
    let width = anti.width();
    let stats_colls = vec![Collation::Binary, Collation::Binary];
    let stats = LNode {
        op: LOp::Aggregate {
            ngroup: 0,
            aggs: vec![
                AggSpec::new(AggKind::CountStar, 0),
                AggSpec::new(AggKind::Count, 0),
            ],
            scalar: true,
        },
        inputs: vec![LNode {
            op: LOp::Project(vec![Expr::Column(0)]),
            colls: vec![sub.colls.first().copied().unwrap_or_default()],
            inputs: vec![sub],
        }],
        colls: stats_colls.clone(),
    };
    let mut colls = anti.colls.clone();
    colls.extend(stats_colls);
    let joined = LNode {
        op: LOp::Join {
            kind: JoinKind::Left,
            left_cols: vec![],
            right_cols: vec![],
        },
        inputs: vec![anti, stats],
        colls: colls.clone(),
    };
    let (rows, non_null) = (Expr::Column(width), Expr::Column(width + 1));
    let eq = |a: Expr, b: Expr| Expr::Cmp {
        op: crate::expr::CmpOp::Eq,
        left: Box::new(a),
        right: Box::new(b),
        collation: Collation::Binary,
    };
    let and = |a, b| Expr::Logic(crate::expr::LogicOp::And, Box::new(a), Box::new(b));
    let keep = Expr::Logic(
        crate::expr::LogicOp::Or,
        Box::new(eq(rows.clone(), Expr::Literal(Value::Int(0)))),
        Box::new(and(
            Expr::IsNull {
                expr: Box::new(Expr::Column(x)),
                negated: true,
            },
            eq(non_null, rows),
        )),
    );
    let filtered = LNode {
        op: LOp::Filter(keep),
        inputs: vec![joined],
        colls: colls.clone(),
    };
    LNode {
        op: LOp::Project((0..width).map(Expr::Column).collect()),
        inputs: vec![filtered],
        colls: colls[..width].to_vec(),
    }
}

/// Rejects clock/random expressions where their value would be frozen
/// into maintained state.
fn stable(e: Expr) -> Result<Expr> {
    if e.is_volatile() {
        Err(unsupported("NOW()/RAND() inside a maintained view"))
    } else {
        Ok(e)
    }
}

/// `FROM DUAL` (MySQL's dummy table) without joins.
fn is_dual(s: &ast::Select) -> bool {
    match s.from.as_slice() {
        [ast::TableWithJoins {
            relation: ast::TableFactor::Table {
                name, alias: None, ..
            },
            joins,
        }] => joins.is_empty() && name.0.len() == 1 && name.0[0].value.eq_ignore_ascii_case("dual"),
        _ => false,
    }
}

fn t_is_text(t: &SqlType) -> bool {
    t.is_text()
}

/// Whether `c` is an equality between a column of `a` and a column of `b`.
fn links(c: &ast::Expr, a: &Scope, b: &Scope) -> bool {
    if let ast::Expr::BinaryOp {
        left,
        op: ast::BinaryOperator::Eq,
        right,
    } = c
    {
        if let (Some(x), Some(y)) = (as_column(left), as_column(right)) {
            let ab = a.resolve(x).is_ok()
                && b.resolve(y).is_ok()
                && a.resolve(y).is_err()
                && b.resolve(x).is_err();
            let ba = a.resolve(y).is_ok()
                && b.resolve(x).is_ok()
                && a.resolve(x).is_err()
                && b.resolve(y).is_err();
            return ab || ba;
        }
    }
    false
}

fn rel_scope(rel: Rel, qualifier: &str) -> (LNode, Scope) {
    let scope = Scope {
        cols: rel
            .cols
            .iter()
            .map(|c| ScopeCol {
                qualifier: qualifier.to_ascii_lowercase(),
                name: c.name.clone(),
                ty: c.ty.clone(),
                nullable: c.nullable,
                collation: c.coll,
                table: c.table.clone(),
                origin: c.origin.clone(),
            })
            .collect(),
    };
    (rel.node, scope)
}

#[allow(dead_code)]
fn _arc(_: Arc<TableSchema>) {}
