//! SELECT -> logical plan + reader specification.

use std::collections::HashMap;
use std::sync::Arc;

use ladle_common::{Collation, Row, SqlType, TableSchema, Value};
use ladle_storage::Storage;
use sqlparser::ast;

use super::expr::{
    aggregate_name, collect_aggregates, collect_bare_columns, derived_collation, literal, norm,
    placeholder_slot, unsupported, ExprCx, ParamMode, PostAgg, Scope, ScopeCol,
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

/// The key column to narrow by at read time instead of keying by it, when a
/// one-table query's two `col = ?` keys are exactly the columns of one of the
/// table's two-column indexes (`user_id = ? AND story_id = ?` on an index
/// `(user_id, story_id)`): the view is keyed by the index's leading column
/// and each key holds that prefix's rows ordered by the other column, which
/// a read narrows by binary search ([`RangeIndex`]), as the index itself is
/// laid out. One fill (an index prefix scan) then serves every second value,
/// and an IN list of them (a page's 25 stories) reads one key: keyed by both
/// columns, each (user, story) pair was its own miss and its own, mostly
/// empty, entry. The index is the application's statement that rows are
/// found by its leading column first.
fn index_prefix_key(node: &LNode, key_frame: &[(usize, Vec<usize>)]) -> Option<usize> {
    let [(a, sa), (b, sb)] = key_frame else {
        return None;
    };
    if sa.len() != 1 || sb.len() != 1 {
        return None;
    }
    let mut base = node;
    while let (LOp::Filter(_), [input]) = (&base.op, &base.inputs[..]) {
        base = input;
    }
    let LOp::Base(t) = &base.op else {
        return None;
    };
    let pk = t.primary_key.iter().map(|k| &k[..]);
    let secondary = t.indexes.iter().map(|i| &i.columns[..]);
    pk.chain(secondary).find_map(|cols| match cols {
        [lead, rest] if (*lead, *rest) == (*a, *b) => Some(*b),
        [lead, rest] if (*lead, *rest) == (*b, *a) => Some(*a),
        _ => None,
    })
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
        // FOR UPDATE / LOCK IN SHARE MODE do not change the answer; the
        // session decides what they mean for the transaction.
        if q.fetch.is_some() || !q.limit_by.is_empty() {
            return Err(unsupported("FETCH/LIMIT BY"));
        }
        match &*q.body {
            ast::SetExpr::Select(s)
                if (s.from.is_empty() || is_dual(s)) && select_has_subquery(s) =>
            {
                // `SELECT (SELECT ...)`, `SELECT x IN (SELECT ...)`: over
                // one constant row, planned as any SELECT with a FROM.
                let mut q = q.clone();
                if let ast::SetExpr::Select(s) = &mut *q.body {
                    s.from = vec![one_row_from()];
                }
                self.plan(&q)
            }
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
                let cols = set_operation_columns(&l, &r)?;
                let width = cols.len();
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
            ast::SetExpr::SetOperation {
                op: op @ (ast::SetOperator::Intersect | ast::SetOperator::Except),
                set_quantifier,
                left,
                right,
            } => {
                if !matches!(
                    set_quantifier,
                    ast::SetQuantifier::None | ast::SetQuantifier::Distinct
                ) {
                    return Err(unsupported(format!("{op} {set_quantifier}")));
                }
                let l = self.set_expr(left)?;
                let r = self.set_expr(right)?;
                let cols = set_operation_columns(&l, &r)?;
                let node = intersect_or_except(
                    l.node,
                    r.node,
                    cols.iter().map(|c| c.coll).collect(),
                    matches!(op, ast::SetOperator::Intersect),
                );
                Ok(Rel { node, cols })
            }
            other => self.relation(&query_of(other.clone())),
        }
    }

    fn union(&self, q: &ast::Query) -> Result<PlannedView> {
        let rel = self.set_expr(&q.body)?;
        let width = rel.cols.len();
        let cols = rel.cols.clone();
        let colls: Vec<Collation> = cols.iter().map(|c| c.coll).collect();
        // The union's columns, unqualified, for ORDER BY expressions.
        let (mut node, scope) = rel_scope(rel, "");
        // ORDER BY / LIMIT over the union's columns; an expression over
        // them (Django's `other IS NULL, other` for NULLS LAST) is
        // computed into a hidden column after the union's.
        let mut order = Vec::new();
        let mut hidden: Vec<Expr> = Vec::new();
        let mut sort_colls = colls.clone();
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
                let pos = match pos.filter(|p| *p < width) {
                    Some(p) => p,
                    None => {
                        let x = ExprCx::row(&scope).compile(&o.expr)?;
                        if x.is_volatile() || x.has_params() {
                            return Err(unsupported("NOW()/RAND()/parameters in ORDER BY"));
                        }
                        let coll =
                            derived_collation(&x, |c| colls.get(c).copied().unwrap_or_default());
                        hidden.push(x);
                        sort_colls.push(coll);
                        width + hidden.len() - 1
                    }
                };
                order.push((pos, o.asc == Some(false), sort_colls[pos]));
            }
        }
        if !hidden.is_empty() {
            node = LNode {
                op: LOp::Project((0..width).map(Expr::Column).chain(hidden).collect()),
                inputs: vec![node],
                colls: sort_colls,
            };
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
        if super::stats::select_has_statistic(s, q) {
            // VAR_POP and the others become COUNT/SUM arithmetic, typed by
            // the FROM clause's columns.
            let (_, from_scope) = self.plan_from(&s.from, &mut Vec::new())?;
            let (s, q) = super::stats::expand_in_select(s, q, &from_scope)?;
            return self.select(&s, &q, top);
        }
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
        // The `col = ?` conjuncts behind key_frame's one-slot entries (a
        // candidate for `index_prefix_key`).
        let mut key_conjuncts: Vec<(usize, ast::Expr)> = Vec::new();
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
                        if slots.len() == 1 {
                            key_conjuncts.push((col, c.clone()));
                        }
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
            // A semi/anti-join where the shape allows; otherwise the
            // subqueries (correlated or not) join in as columns to filter on.
            let c = if has_subquery(&c) {
                match self.subquery_condition(c, &mut node, &mut scope, &mut nsub)? {
                    Some(c) => c,
                    None => continue,
                }
            } else {
                c
            };
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
            self.rewrite_subqueries(e, &mut node, &mut scope, &mut nsub)?;
            if let Some(n) = name {
                *item = ast::SelectItem::ExprWithAlias {
                    expr: e.clone(),
                    alias: ast::Ident::new(n),
                };
            }
        }

        // Subqueries in HAVING, as in the select list: joined to the rows
        // before aggregation, so each is a (bare) column of its group.
        // And in GROUP BY (`GROUP BY x, EXISTS(...)`): each group key a
        // joined column.
        let rewritten_having;
        let grouped_by_subquery = matches!(&s.group_by, ast::GroupByExpr::Expressions(g, _) if g.iter().any(has_subquery));
        let s = if s.having.as_ref().is_some_and(has_subquery) || grouped_by_subquery {
            if window.is_some() {
                return Err(unsupported(
                    "subqueries in HAVING or GROUP BY over a derived table with LIMIT",
                ));
            }
            let mut s2 = s.clone();
            if let Some(h) = &mut s2.having {
                self.rewrite_subqueries(h, &mut node, &mut scope, &mut nsub)?;
            }
            if let ast::GroupByExpr::Expressions(g, _) = &mut s2.group_by {
                for e in g.iter_mut().filter(|e| has_subquery(e)) {
                    self.rewrite_subqueries(e, &mut node, &mut scope, &mut nsub)?;
                }
            }
            rewritten_having = s2;
            &rewritten_having
        } else {
            s
        };
        // Subqueries in ORDER BY, as in the select list.
        let rewritten_order;
        let q = if q
            .order_by
            .iter()
            .flat_map(|ob| &ob.exprs)
            .any(|o| has_subquery(&o.expr))
        {
            if window.is_some() {
                return Err(unsupported(
                    "subqueries in ORDER BY over a derived table with LIMIT",
                ));
            }
            let mut q2 = q.clone();
            for o in q2.order_by.iter_mut().flat_map(|ob| &mut ob.exprs) {
                self.rewrite_subqueries(&mut o.expr, &mut node, &mut scope, &mut nsub)?;
            }
            rewritten_order = q2;
            &rewritten_order
        } else {
            q
        };

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
        // The slot of a key moved to the read-time filter by the rule below:
        // an IN list bound to it is read as one narrowing per element.
        let mut narrowed_slot: Option<usize> = None;
        if !aggregated && !distinct && window.is_none() {
            if let Some(narrowed) = index_prefix_key(&node, &key_frame) {
                narrowed_slot = key_frame
                    .iter()
                    .find(|k| k.0 == narrowed)
                    .and_then(|k| k.1.first().copied());
                key_frame.retain(|k| k.0 != narrowed);
                read_filters.extend(
                    key_conjuncts
                        .drain(..)
                        .filter(|(col, _)| *col == narrowed)
                        .map(|(_, c)| c),
                );
            }
        }
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
                    let coll = derived_collation(e, |c| scope.cols[c].collation);
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
            let by_index = match e {
                Expr::Column(c) => match frame_types.get(*c) {
                    Some((SqlType::Enum(labels), _)) => Some(enum_index(e, labels)),
                    _ => None,
                },
                _ => None,
            };
            let e = by_index.as_ref().unwrap_or(e);
            let p = slot_of(e, &mut stored);
            let coll = match e {
                Expr::Column(c) => frame_colls.get(*c).copied().unwrap_or(Collation::Binary),
                other => {
                    if t_is_text(&other.result_type(&frame_types).0) {
                        derived_collation(other, |c| {
                            frame_colls.get(c).copied().unwrap_or(Collation::GeneralCi)
                        })
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
        // time over the selected columns. So too when a read-time filter
        // remains over selected or key columns (`a = ? AND a = ?`, whose
        // second equality is no key): it must run before DISTINCT merges
        // rows.
        let distinct_at_read =
            distinct && (stored.len() > visible_width + key.len() || read_filter.is_some());
        if distinct_at_read
            && order
                .iter()
                .any(|(slot, ..)| !output.contains(&Expr::Column(*slot)))
        {
            return Err(unsupported(
                "DISTINCT with ORDER BY on columns not selected",
            ));
        }
        if distinct && output.iter().any(|e| !matches!(e, Expr::Column(_))) {
            return Err(unsupported("DISTINCT with read-time expressions"));
        }
        let stored_colls: Vec<Collation> = stored
            .iter()
            .map(|e| match e {
                Expr::Column(c) => frame_colls.get(*c).copied().unwrap_or(Collation::Binary),
                other => {
                    if t_is_text(&other.result_type(&frame_types).0) {
                        derived_collation(other, |c| {
                            frame_colls.get(c).copied().unwrap_or(Collation::GeneralCi)
                        })
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
        })
        .map(|r| r.with_list_slot(narrowed_slot));
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
        let coll = derived_collation(&arg, |c| {
            cx.scope
                .cols
                .get(c)
                .map(|c| c.collation)
                .unwrap_or_default()
        });
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
        let (mut inner, mut iscope) = self.plan_from(&s.from, &mut conj)?;
        // Subqueries nested in this one that read only its own rows
        // (numbered apart from the enclosing query's).
        let mut nested = 1000;
        let mut outer_cols = Vec::new();
        let mut inner_cols = Vec::new();
        let mut residual = Vec::new();
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
            if has_placeholder(&c) || (has_subquery(&c) && scope_reads_outer(&c, &iscope, scope)) {
                return Err(unsupported(format!(
                    "parameters or subqueries inside {context}"
                )));
            }
            // A nested subquery over this one's rows only: planned into
            // the inner plan as the enclosing WHERE plans its own.
            let c = if has_subquery(&c) {
                match self.subquery_condition(c, &mut inner, &mut iscope, &mut nested)? {
                    Some(c) => c,
                    None => continue,
                }
            } else {
                c
            };
            let e = match ExprCx::row(&iscope).compile(&c).and_then(stable) {
                Ok(e) => e,
                Err(DataflowError::UnknownColumn(..)) if scope_reads_outer(&c, &iscope, scope) => {
                    residual.push(c);
                    continue;
                }
                Err(DataflowError::UnknownColumn(..)) => return Err(unsupported(non_equality)),
                Err(other) => return Err(other),
            };
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
            residual,
        })
    }

    /// A correlated subquery body with conditions other than `inner =
    /// outer` (`WHERE b.price > p.id * 10`) made uncorrelated: the distinct
    /// values of the outer columns it reads (D) joined with the inner rows
    /// on the equalities and filtered by the other conditions. D's columns
    /// then are the correlation key, equal to the outer columns. Only
    /// NULL-rejecting conditions (comparisons of columns and arithmetic)
    /// are taken, so an outer row with a NULL in them matches no inner row
    /// and the caller's LEFT JOIN (which never matches a NULL key) gives
    /// the empty subquery's answer, as it should.
    fn decorrelate(
        &self,
        outer: &LNode,
        oscope: &Scope,
        c: Correlated,
        n: usize,
    ) -> Result<Correlated> {
        let qual = format!("__sqo{n}");
        let mut o_cols: Vec<usize> = Vec::new();
        for &o in &c.outer_cols {
            if !o_cols.contains(&o) {
                o_cols.push(o);
            }
        }
        let mut conds = Vec::new();
        for r in &c.residual {
            let reads_outer = |e: &ast::Expr| outer_columns_read(e, &c.scope, oscope);
            if !null_rejecting(r, &reads_outer) {
                return Err(unsupported(format!("the correlated condition {r}")));
            }
            let mut r = r.clone();
            let mut err = None;
            let _ = ast::visit_expressions_mut(&mut r, |e| {
                let ids = match e {
                    ast::Expr::Identifier(id) => vec![id.clone()],
                    ast::Expr::CompoundIdentifier(ids) => ids.clone(),
                    _ => return std::ops::ControlFlow::<()>::Continue(()),
                };
                if c.scope.resolve(&ids).is_ok() {
                    return std::ops::ControlFlow::Continue(());
                }
                match oscope.resolve(&ids) {
                    Ok(oc) => {
                        let i = o_cols.iter().position(|&x| x == oc).unwrap_or_else(|| {
                            o_cols.push(oc);
                            o_cols.len() - 1
                        });
                        *e = ast::Expr::CompoundIdentifier(vec![
                            ast::Ident::new(qual.clone()),
                            ast::Ident::new(format!("__o{i}")),
                        ]);
                    }
                    Err(e) => err = Some(e),
                }
                std::ops::ControlFlow::Continue(())
            });
            if let Some(e) = err {
                return Err(e);
            }
            conds.push(r);
        }
        let k = o_cols.len();
        let dcolls: Vec<Collation> = o_cols.iter().map(|&o| outer.colls[o]).collect();
        let distinct_outer = LNode {
            op: LOp::Aggregate {
                ngroup: k,
                aggs: vec![],
                scalar: false,
            },
            inputs: vec![LNode {
                op: LOp::Project(o_cols.iter().map(|&o| Expr::Column(o)).collect()),
                inputs: vec![outer.clone()],
                colls: dcolls.clone(),
            }],
            colls: dcolls.clone(),
        };
        let mut jscope = Scope {
            cols: o_cols
                .iter()
                .enumerate()
                .map(|(i, &o)| ScopeCol {
                    qualifier: qual.clone(),
                    name: format!("__o{i}"),
                    table: String::new(),
                    origin: None,
                    ..oscope.cols[o].clone()
                })
                .collect(),
        };
        jscope.cols.extend(c.scope.cols.iter().cloned());
        let mut jcolls = dcolls;
        jcolls.extend(c.inner.colls.iter().copied());
        let mut joined = LNode {
            op: LOp::Join {
                kind: JoinKind::Inner,
                left_cols: c
                    .outer_cols
                    .iter()
                    .map(|o| o_cols.iter().position(|x| x == o).unwrap_or_default())
                    .collect(),
                right_cols: c.inner_cols.clone(),
            },
            inputs: vec![distinct_outer, c.inner],
            colls: jcolls.clone(),
        };
        for r in &conds {
            let e = stable(ExprCx::row(&jscope).compile(r)?)?;
            joined = LNode {
                op: LOp::Filter(e),
                inputs: vec![joined],
                colls: jcolls.clone(),
            };
        }
        Ok(Correlated {
            inner: joined,
            scope: jscope,
            inner_cols: (0..k).collect(),
            outer_cols: o_cols,
            residual: vec![],
        })
    }

    /// `x IN (SELECT y ...)` as a value (in the select list, under OR, on
    /// an expression), with MySQL's three-valued answer: 1 when some `y`
    /// equals `x`; else 0 when the subquery is empty; else NULL when `x`
    /// or some `y` is NULL; else 0. The distinct `y`s join `x` (LEFT), and
    /// the subquery's row and non-NULL counts join every row (one row, key
    /// []). The subquery must be uncorrelated.
    fn in_value(
        &self,
        x: &ast::Expr,
        sub: &ast::Query,
        node: &mut LNode,
        scope: &mut Scope,
        n: usize,
    ) -> Result<ast::Expr> {
        let rel = match self.relation(sub) {
            Err(DataflowError::UnknownColumn(..)) => return correlated_in_value(x, sub, scope),
            r => r?,
        };
        if rel.cols.len() != 1 {
            return Err(DataflowError::BadArgument(
                "Operand should contain 1 column(s)".into(),
            ));
        }
        let qual = format!("__in{n}");
        let width = scope.cols.len();
        // `x` as a column of its own (named here, whatever it is).
        let xc = width;
        {
            let e = stable(ExprCx::row(scope).compile(x)?)?;
            let (ty, nullable) = e.result_type(&scope.types());
            let coll = if ty.is_text() {
                rel.cols[0].coll
            } else {
                Collation::Binary
            };
            let mut colls = node.colls.clone();
            colls.push(coll);
            let inner = LNode::take(node);
            *node = LNode {
                op: LOp::Project((0..width).map(Expr::Column).chain([e]).collect()),
                inputs: vec![inner],
                colls,
            };
            scope.cols.push(ScopeCol {
                qualifier: qual.clone(),
                name: "__x".into(),
                ty,
                nullable,
                collation: coll,
                table: String::new(),
                origin: None,
            });
        }
        let ycoll = rel.cols[0].coll;
        let bigint = SqlType::Int {
            bytes: 8,
            unsigned: false,
            display_width: None,
        };
        // The distinct values: (y, COUNT(*)), grouped by y.
        let values = LNode {
            op: LOp::Aggregate {
                ngroup: 1,
                aggs: vec![AggSpec::new(AggKind::CountStar, 0)],
                scalar: false,
            },
            inputs: vec![rel.node.clone()],
            colls: vec![ycoll, Collation::Binary],
        };
        let stats = row_counts(rel.node);
        let mut colls = node.colls.clone();
        colls.extend([ycoll, Collation::Binary]);
        let left = LNode::take(node);
        let with_values = LNode {
            op: LOp::Join {
                kind: JoinKind::Left,
                left_cols: vec![xc],
                right_cols: vec![0],
            },
            inputs: vec![left, values],
            colls: colls.clone(),
        };
        colls.extend([Collation::Binary, Collation::Binary]);
        *node = LNode {
            op: LOp::Join {
                kind: JoinKind::Left,
                left_cols: vec![],
                right_cols: vec![],
            },
            inputs: vec![with_values, stats],
            colls,
        };
        for (name, ty, coll) in [
            ("__y", rel.cols[0].ty.clone(), ycoll),
            ("__m", bigint.clone(), Collation::Binary),
            ("__rows", bigint.clone(), Collation::Binary),
            ("__nonnull", bigint, Collation::Binary),
        ] {
            scope.cols.push(ScopeCol {
                qualifier: qual.clone(),
                name: name.into(),
                ty,
                nullable: true,
                collation: coll,
                table: String::new(),
                origin: None,
            });
        }
        let col = |name: &str| {
            ast::Expr::CompoundIdentifier(vec![
                ast::Ident::new(qual.clone()),
                ast::Ident::new(name),
            ])
        };
        let x_col = col("__x");
        let is_null = |e: ast::Expr, negated: bool| {
            if negated {
                ast::Expr::IsNotNull(Box::new(e))
            } else {
                ast::Expr::IsNull(Box::new(e))
            }
        };
        let rows = call("COALESCE", vec![col("__rows"), number("0")]);
        Ok(ast::Expr::Case {
            operand: None,
            conditions: vec![
                is_null(col("__m"), true),
                ast::Expr::BinaryOp {
                    left: Box::new(rows.clone()),
                    op: ast::BinaryOperator::Eq,
                    right: Box::new(number("0")),
                },
                ast::Expr::BinaryOp {
                    left: Box::new(is_null(x_col, false)),
                    op: ast::BinaryOperator::Or,
                    right: Box::new(ast::Expr::BinaryOp {
                        left: Box::new(rows),
                        op: ast::BinaryOperator::Gt,
                        right: Box::new(col("__nonnull")),
                    }),
                },
            ],
            results: vec![number("1"), number("0"), ast::Expr::Value(ast::Value::Null)],
            else_result: Some(Box::new(number("0"))),
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
            residual,
        } = self.plan_correlated_params(
            s,
            scope,
            "a subquery",
            "correlated condition other than equality",
            Some(&mut params),
        )?;
        if !residual.is_empty() {
            return Err(unsupported(
                "parameters in a subquery with a correlated condition other than equality",
            ));
        }
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
            residual,
            ..
        } = self.plan_correlated(
            s,
            scope,
            "EXISTS",
            "correlated EXISTS condition other than equality",
        )?;
        if !residual.is_empty() {
            return Err(unsupported(
                "correlated EXISTS condition other than equality",
            ));
        }
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
        let planned = match e {
            ast::Expr::Subquery(q) => self
                .planner
                .scalar_subquery(q, self.node, self.scope, *self.n),
            ast::Expr::Exists { subquery, negated } => {
                let negated = *negated;
                exists_as_count(subquery).and_then(|count| {
                    let n = self
                        .planner
                        .scalar_subquery(&count, self.node, self.scope, *self.n)?;
                    Ok(ast::Expr::BinaryOp {
                        left: Box::new(n),
                        op: if negated {
                            ast::BinaryOperator::Eq
                        } else {
                            ast::BinaryOperator::Gt
                        },
                        right: Box::new(number("0")),
                    })
                })
            }
            ast::Expr::InSubquery {
                expr,
                subquery,
                negated,
            } => self
                .planner
                .in_value(expr, subquery, self.node, self.scope, *self.n)
                .map(|v| {
                    if *negated {
                        ast::Expr::UnaryOp {
                            op: ast::UnaryOperator::Not,
                            expr: Box::new(ast::Expr::Nested(Box::new(v))),
                        }
                    } else {
                        v
                    }
                }),
            _ => return std::ops::ControlFlow::Continue(()),
        };
        match planned {
            Ok(replacement) => {
                *self.n += 1;
                *e = replacement;
                std::ops::ControlFlow::Continue(())
            }
            Err(err) => {
                self.err = Some(err);
                std::ops::ControlFlow::Break(())
            }
        }
    }
}

/// The rows of `inner` that come first, per correlation key (`keys`), in
/// the order `order` (`ORDER BY z1 [DESC], ...`): for each `z` in turn,
/// its extreme per key (MIN or MAX, maintained) joins back the rows that
/// have it. Ties remain; `(SELECT y ... LIMIT 1)` takes MAX(y) of them,
/// one of the rows MySQL may return. Each `z` must be NOT NULL: MIN/MAX
/// skip NULLs, which MySQL sorts first (ascending) or last (descending).
fn first_in_order(
    inner: LNode,
    iscope: &Scope,
    keys: &[usize],
    order: &[ast::OrderByExpr],
) -> Result<LNode> {
    let width = inner.width();
    let k = keys.len();
    let mut rows = inner;
    for o in order {
        let z = stable(ExprCx::row(iscope).compile(&o.expr)?)?;
        let (_, nullable) = z.result_type(&iscope.types());
        if nullable {
            return Err(unsupported(
                "ORDER BY a nullable expression in a scalar subquery with LIMIT 1",
            ));
        }
        let zcoll = match &z {
            Expr::Column(c) => rows.colls[*c],
            _ => Collation::GeneralCi,
        };
        let mut zcolls = rows.colls.clone();
        zcolls.push(zcoll);
        let with_z = LNode {
            op: LOp::Project((0..width).map(Expr::Column).chain([z]).collect()),
            inputs: vec![rows],
            colls: zcolls.clone(),
        };
        let mut kcolls: Vec<Collation> = keys.iter().map(|&c| zcolls[c]).collect();
        kcolls.push(zcoll);
        let mut spec = AggSpec::new(
            if o.asc == Some(false) {
                AggKind::Max
            } else {
                AggKind::Min
            },
            k,
        );
        spec.collation = zcoll;
        let extreme = LNode {
            op: LOp::Aggregate {
                ngroup: k,
                aggs: vec![spec],
                scalar: false,
            },
            inputs: vec![LNode {
                op: LOp::Project(
                    keys.iter()
                        .map(|&c| Expr::Column(c))
                        .chain([Expr::Column(width)])
                        .collect(),
                ),
                inputs: vec![with_z.clone()],
                colls: kcolls.clone(),
            }],
            colls: kcolls.clone(),
        };
        let mut jcolls = zcolls.clone();
        jcolls.extend(kcolls);
        let joined = LNode {
            op: LOp::Join {
                kind: JoinKind::Inner,
                left_cols: keys.iter().copied().chain([width]).collect(),
                right_cols: (0..=k).collect(),
            },
            inputs: vec![with_z, extreme],
            colls: jcolls,
        };
        rows = LNode {
            op: LOp::Project((0..width).map(Expr::Column).collect()),
            colls: zcolls[..width].to_vec(),
            inputs: vec![joined],
        };
    }
    Ok(rows)
}

/// Whether planning a subquery on its own failed because it reads columns
/// of the enclosing query.
fn correlated<T>(planned: Result<T>) -> bool {
    matches!(planned, Err(DataflowError::UnknownColumn(..)))
}

/// `x` with every column qualified by its table in the outer `scope`, so
/// that inside `sub` it still means the outer row; refused when `sub`
/// uses the same table name or alias.
fn qualify_outer(x: &ast::Expr, scope: &Scope, sub: &ast::Query) -> Result<ast::Expr> {
    let ast::SetExpr::Select(s) = &*sub.body else {
        return Err(unsupported("IN over this correlated subquery"));
    };
    let inner_names: Vec<String> = s
        .from
        .iter()
        .flat_map(|t| std::iter::once(&t.relation).chain(t.joins.iter().map(|j| &j.relation)))
        .filter_map(|f| match f {
            ast::TableFactor::Table { name, alias, .. } => Some(
                alias
                    .as_ref()
                    .map(|a| a.name.value.clone())
                    .or_else(|| name.0.last().map(|i| i.value.clone()))
                    .unwrap_or_default()
                    .to_ascii_lowercase(),
            ),
            ast::TableFactor::Derived { alias, .. } => {
                alias.as_ref().map(|a| a.name.value.to_ascii_lowercase())
            }
            _ => None,
        })
        .collect();
    let mut x = x.clone();
    let mut err = None;
    let _ = ast::visit_expressions_mut(&mut x, |e| {
        let ids = match e {
            ast::Expr::Identifier(id) => vec![id.clone()],
            ast::Expr::CompoundIdentifier(ids) => ids.clone(),
            ast::Expr::Subquery(_) | ast::Expr::Exists { .. } | ast::Expr::InSubquery { .. } => {
                err = Some(unsupported("IN over a correlated subquery on a subquery"));
                return std::ops::ControlFlow::<()>::Continue(());
            }
            _ => return std::ops::ControlFlow::Continue(()),
        };
        match scope.resolve(&ids) {
            Ok(c) => {
                let col = &scope.cols[c];
                if col.qualifier.is_empty() || inner_names.contains(&col.qualifier) {
                    err = Some(unsupported(
                        "IN over a correlated subquery naming an outer table again",
                    ));
                } else {
                    *e = ast::Expr::CompoundIdentifier(vec![
                        ast::Ident::new(col.qualifier.clone()),
                        ast::Ident::new(col.name.clone()),
                    ]);
                }
            }
            Err(e) => err = Some(e),
        }
        std::ops::ControlFlow::Continue(())
    });
    match err {
        Some(e) => Err(e),
        None => Ok(x),
    }
}

/// `sub` (`SELECT y FROM ... WHERE w`) as `SELECT y FROM ... WHERE (w) AND
/// cond(y)`, for rewriting `x IN (sub)` into EXISTS forms.
fn subquery_and(sub: &ast::Query, cond: impl Fn(ast::Expr) -> ast::Expr) -> Result<ast::Query> {
    let mut q = sub.clone();
    let ast::SetExpr::Select(s) = &mut *q.body else {
        return Err(unsupported("IN over this correlated subquery"));
    };
    let y = match s.projection.as_slice() {
        [ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. }] => {
            e.clone()
        }
        _ => {
            return Err(DataflowError::BadArgument(
                "Operand should contain 1 column(s)".into(),
            ))
        }
    };
    let grouped = !matches!(&s.group_by, ast::GroupByExpr::Expressions(g, _) if g.is_empty());
    if grouped || s.having.is_some() || q.limit.is_some() || q.offset.is_some() {
        return Err(unsupported("IN over this correlated subquery"));
    }
    let c = cond(ast::Expr::Nested(Box::new(y)));
    s.selection = Some(match s.selection.take() {
        Some(w) => ast::Expr::BinaryOp {
            left: Box::new(ast::Expr::Nested(Box::new(w))),
            op: ast::BinaryOperator::And,
            right: Box::new(c),
        },
        None => c,
    });
    Ok(q)
}

/// `x IN (SELECT y ... correlated)` as a value, from three EXISTS: 1 when
/// some `y = x`; else 0 when the subquery is empty; else NULL when `x` or
/// some `y` is NULL; else 0.
fn correlated_in_value(x: &ast::Expr, sub: &ast::Query, scope: &Scope) -> Result<ast::Expr> {
    let x = qualify_outer(x, scope, sub)?;
    let exists = |q: ast::Query| ast::Expr::Exists {
        subquery: Box::new(q),
        negated: false,
    };
    let matched = exists(subquery_and(sub, |y| ast::Expr::BinaryOp {
        left: Box::new(y),
        op: ast::BinaryOperator::Eq,
        right: Box::new(x.clone()),
    })?);
    let any = exists(subquery_and(sub, |_| {
        ast::Expr::Value(ast::Value::Boolean(true))
    })?);
    let null_y = exists(subquery_and(sub, |y| ast::Expr::IsNull(Box::new(y)))?);
    Ok(ast::Expr::Case {
        operand: None,
        conditions: vec![
            matched,
            ast::Expr::UnaryOp {
                op: ast::UnaryOperator::Not,
                expr: Box::new(any),
            },
            ast::Expr::BinaryOp {
                left: Box::new(ast::Expr::IsNull(Box::new(x))),
                op: ast::BinaryOperator::Or,
                right: Box::new(null_y),
            },
        ],
        results: vec![number("1"), number("0"), ast::Expr::Value(ast::Value::Null)],
        else_result: Some(Box::new(number("0"))),
    })
}

/// A numeric literal.
fn number(n: &str) -> ast::Expr {
    ast::Expr::Value(ast::Value::Number(n.into(), false))
}

/// A call of the function `name` on `args`.
fn call(name: &str, args: Vec<ast::Expr>) -> ast::Expr {
    ast::Expr::Function(ast::Function {
        name: ast::ObjectName(vec![ast::Ident::new(name)]),
        parameters: ast::FunctionArguments::None,
        args: ast::FunctionArguments::List(ast::FunctionArgumentList {
            duplicate_treatment: None,
            args: args
                .into_iter()
                .map(|a| ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(a)))
                .collect(),
            clauses: vec![],
        }),
        filter: None,
        null_treatment: None,
        over: None,
        within_group: vec![],
    })
}

/// `EXISTS (SELECT ... [LIMIT n])` as `(SELECT COUNT(*) ...)`, to compare
/// with 0: the select list, DISTINCT, GROUP BY without HAVING, ORDER BY and
/// a LIMIT of at least one row do not change whether a row exists.
fn exists_as_count(sub: &ast::Query) -> Result<ast::Query> {
    let mut q = sub.clone();
    let zero_offset = match &q.offset {
        None => true,
        Some(o) => matches!(&o.value, ast::Expr::Value(ast::Value::Number(n, _)) if n == "0"),
    };
    match &q.limit {
        None if zero_offset => {}
        Some(ast::Expr::Value(ast::Value::Number(n, _)))
            if zero_offset && n.parse::<u64>().is_ok_and(|n| n > 0) => {}
        _ => return Err(unsupported("LIMIT or OFFSET inside EXISTS")),
    }
    q.limit = None;
    q.offset = None;
    q.order_by = None;
    let ast::SetExpr::Select(s) = &mut *q.body else {
        return Err(unsupported("EXISTS over this query"));
    };
    s.distinct = None;
    if s.having.is_none() {
        // Groups exist exactly when rows do.
        s.group_by = ast::GroupByExpr::Expressions(vec![], vec![]);
    }
    let mut count = call("COUNT", vec![]);
    if let ast::Expr::Function(ast::Function {
        args: ast::FunctionArguments::List(l),
        ..
    }) = &mut count
    {
        l.args = vec![ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Wildcard)];
    }
    s.projection = vec![ast::SelectItem::UnnamedExpr(count)];
    Ok(q)
}

/// Whether `c` reads a column of the outer query: one `inner` does not
/// have and `outer` does.
fn scope_reads_outer(c: &ast::Expr, inner: &Scope, outer: &Scope) -> bool {
    !outer_columns_read(c, inner, outer).is_empty()
}

/// The columns of `outer` that `c` reads (those `inner` does not have),
/// sorted.
fn outer_columns_read(c: &ast::Expr, inner: &Scope, outer: &Scope) -> Vec<usize> {
    let mut cols = Vec::new();
    let _ = ast::visit_expressions(c, |e| {
        let ids = match e {
            ast::Expr::Identifier(id) => std::slice::from_ref(id),
            ast::Expr::CompoundIdentifier(ids) => ids.as_slice(),
            _ => return std::ops::ControlFlow::<()>::Continue(()),
        };
        if inner.resolve(ids).is_err() {
            if let Ok(o) = outer.resolve(ids) {
                cols.push(o);
            }
        }
        std::ops::ControlFlow::Continue(())
    });
    cols.sort_unstable();
    cols.dedup();
    cols
}

/// Whether a correlated condition is false or NULL whenever a column it
/// reads is NULL: a comparison of columns, literals, arithmetic and
/// functions that give NULL for a NULL argument; an AND or OR of such
/// conditions (each side of an OR reading the same outer columns, as
/// `reads_outer` lists them). For those, an outer row
/// whose correlation values include a NULL matches no inner row, which
/// the decorrelated plan relies on.
fn null_rejecting(e: &ast::Expr, reads_outer: &dyn Fn(&ast::Expr) -> Vec<usize>) -> bool {
    fn strict(e: &ast::Expr) -> bool {
        use ast::BinaryOperator as B;
        match e {
            ast::Expr::Identifier(_) | ast::Expr::CompoundIdentifier(_) | ast::Expr::Value(_) => {
                true
            }
            ast::Expr::Nested(x) | ast::Expr::Extract { expr: x, .. } => strict(x),
            ast::Expr::Cast { expr, .. } => strict(expr),
            ast::Expr::UnaryOp {
                op: ast::UnaryOperator::Minus | ast::UnaryOperator::Plus,
                expr,
            } => strict(expr),
            ast::Expr::BinaryOp { left, op, right } => {
                matches!(
                    op,
                    B::Plus | B::Minus | B::Multiply | B::Divide | B::Modulo | B::MyIntegerDivide
                ) && strict(left)
                    && strict(right)
            }
            ast::Expr::Function(f) => {
                let name = f.name.to_string().to_ascii_lowercase();
                let null_in_null_out = matches!(
                    name.as_str(),
                    "year"
                        | "month"
                        | "day"
                        | "dayofmonth"
                        | "hour"
                        | "minute"
                        | "second"
                        | "date"
                        | "lower"
                        | "upper"
                        | "length"
                        | "char_length"
                        | "abs"
                        | "round"
                        | "floor"
                        | "ceil"
                        | "ceiling"
                        | "concat"
                        | "date_format"
                );
                let args_strict = match &f.args {
                    ast::FunctionArguments::List(l) => l.args.iter().all(|a| {
                        matches!(a, ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(x)) if strict(x))
                    }),
                    _ => false,
                };
                null_in_null_out && f.over.is_none() && f.filter.is_none() && args_strict
            }
            _ => false,
        }
    }
    use ast::BinaryOperator as B;
    match e {
        ast::Expr::Nested(x) => null_rejecting(x, reads_outer),
        ast::Expr::BinaryOp {
            left,
            op: B::Or,
            right,
        } => {
            // Each side must fail for a NULL in any outer column either reads.
            reads_outer(left) == reads_outer(right)
                && null_rejecting(left, reads_outer)
                && null_rejecting(right, reads_outer)
        }
        ast::Expr::BinaryOp {
            left,
            op: B::And,
            right,
        } => null_rejecting(left, reads_outer) && null_rejecting(right, reads_outer),
        ast::Expr::BinaryOp {
            left,
            op: B::Eq | B::NotEq | B::Lt | B::LtEq | B::Gt | B::GtEq,
            right,
        } => strict(left) && strict(right),
        ast::Expr::Between {
            expr, low, high, ..
        } => strict(expr) && strict(low) && strict(high),
        ast::Expr::Like {
            expr,
            pattern,
            escape_char: None,
            ..
        } => strict(expr) && strict(pattern),
        _ => false,
    }
}

/// A planned correlated subquery body (see `Planner::plan_correlated`).
struct Correlated {
    inner: LNode,
    scope: Scope,
    inner_cols: Vec<usize>,
    outer_cols: Vec<usize>,
    /// Conditions reading outer columns other than `inner = outer`
    /// (`b.price > p.id * 10`), for [`Planner::decorrelate`].
    residual: Vec<ast::Expr>,
}

impl Planner<'_> {
    /// Replaces every subquery in `e` (scalar, EXISTS, IN) by an expression
    /// over columns joined into `node` (see [`SubqueryRewriter`]); `n`
    /// numbers them apart.
    fn rewrite_subqueries(
        &self,
        e: &mut ast::Expr,
        node: &mut LNode,
        scope: &mut Scope,
        n: &mut usize,
    ) -> Result<()> {
        let mut rw = SubqueryRewriter {
            planner: self,
            node,
            scope,
            n,
            err: None,
        };
        let _ = ast::VisitMut::visit(e, &mut rw);
        rw.err.map_or(Ok(()), Err)
    }

    /// A WHERE condition with a subquery over `node`: `IN`/`EXISTS` as a
    /// semi- or anti-join where the shape allows (`None`: the condition is
    /// planned; a correlated `IN` as `EXISTS`); otherwise the condition with its subqueries joined in as
    /// values, for the caller to filter on.
    fn subquery_condition(
        &self,
        c: ast::Expr,
        node: &mut LNode,
        scope: &mut Scope,
        n: &mut usize,
    ) -> Result<Option<ast::Expr>> {
        // `x IN (SELECT y ... WHERE <reads the outer row>)` filters as
        // `EXISTS (SELECT ... WHERE ... AND y = x)`.
        let c = match c {
            ast::Expr::InSubquery {
                expr,
                subquery,
                negated,
            } if correlated(self.relation(&subquery)) => {
                if negated {
                    return Err(unsupported("NOT IN over a correlated subquery"));
                }
                let x = qualify_outer(&expr, scope, &subquery)?;
                ast::Expr::Exists {
                    subquery: Box::new(subquery_and(&subquery, |y| ast::Expr::BinaryOp {
                        left: Box::new(y),
                        op: ast::BinaryOperator::Eq,
                        right: Box::new(x.clone()),
                    })?),
                    negated: false,
                }
            }
            c => c,
        };
        let semi = match &c {
            ast::Expr::InSubquery {
                expr,
                subquery,
                negated,
            } => Some(self.semi_in(node.clone(), scope, expr, subquery, *negated)),
            ast::Expr::Exists { subquery, negated } => {
                Some(self.semi_exists(node.clone(), scope, subquery, *negated))
            }
            _ => None,
        };
        match semi {
            Some(Ok(joined)) => {
                *node = joined;
                return Ok(None);
            }
            Some(Err(DataflowError::Unsupported(_))) | None => {}
            Some(Err(e)) => return Err(e),
        }
        let mut c = c;
        self.rewrite_subqueries(&mut c, node, scope, n)?;
        Ok(Some(c))
    }

    /// A scalar subquery joined into `node` (LEFT, on its correlation
    /// columns); returns the expression that reads its value.
    ///
    /// Django's forms are taken apart first: `ORDER BY NULL` (or any
    /// ORDER BY without LIMIT) orders nothing, and `GROUP BY` on the inner side of `inner = outer`
    /// correlations makes no more than one group per outer row (but no
    /// group, so NULL, where no row matches: COUNT is then not 0).
    fn scalar_subquery(
        &self,
        q: &ast::Query,
        node: &mut LNode,
        scope: &mut Scope,
        n: usize,
    ) -> Result<ast::Expr> {
        let mut q = q.clone();
        // Without LIMIT, an order does not change the (one) value.
        if q.limit.is_none() && q.offset.is_none()
            || q.order_by.as_ref().is_some_and(|ob| {
                ob.exprs
                    .iter()
                    .all(|o| matches!(o.expr, ast::Expr::Value(ast::Value::Null)))
            })
        {
            q.order_by = None;
        }
        let mut grouped = Vec::new();
        if let ast::SetExpr::Select(s) = &mut *q.body {
            if let ast::GroupByExpr::Expressions(g, mods) = &mut s.group_by {
                if mods.is_empty() && s.having.is_none() {
                    grouped = std::mem::take(g);
                }
            }
        }
        self.scalar_subquery_grouped(&q, &grouped, node, scope, n)
    }

    fn scalar_subquery_grouped(
        &self,
        q: &ast::Query,
        grouped: &[ast::Expr],
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
        // `(SELECT y ... LIMIT 1)` without ORDER BY may give any row's y:
        // MAX(y) is one of them, and never several rows. With `ORDER BY
        // z...` the rows first narrow to those first in that order.
        let limit_one = q.offset.is_none()
            && matches!(&q.limit, Some(ast::Expr::Value(ast::Value::Number(one, _))) if one == "1");
        let first_by = match &q.order_by {
            Some(ob) if limit_one && top1_desc.is_none() && aggregate_name(&agg).is_none() => {
                if ob.interpolate.is_some()
                    || ob
                        .exprs
                        .iter()
                        .any(|o| o.nulls_first.is_some() || o.with_fill.is_some())
                {
                    return Err(unsupported("this scalar subquery"));
                }
                // `ORDER BY 1` or the alias: the select list's only column.
                let alias = match s.projection.first() {
                    Some(ast::SelectItem::ExprWithAlias { alias, .. }) => Some(&alias.value),
                    _ => None,
                };
                let mut order = ob.exprs.clone();
                for o in &mut order {
                    if let ast::Expr::Identifier(id) = &o.expr {
                        if alias.is_some_and(|a| a.eq_ignore_ascii_case(&id.value)) {
                            o.expr = agg.clone();
                        }
                    }
                    if let ast::Expr::Value(ast::Value::Number(n, _)) = &o.expr {
                        if n != "1" {
                            return Err(DataflowError::UnknownColumn(
                                n.clone(),
                                "order clause".into(),
                            ));
                        }
                        o.expr = agg.clone();
                    }
                }
                Some(order)
            }
            _ => None,
        };
        let any_row = limit_one && (q.order_by.is_none() || first_by.is_some());
        let simple = s.from.len() == 1
            && matches!(&s.group_by, ast::GroupByExpr::Expressions(g, _) if g.is_empty())
            && s.having.is_none()
            && s.distinct.is_none()
            && ((q.order_by.is_none() && q.limit.is_none()) || top1_desc.is_some() || any_row)
            && s.projection.len() == 1;
        if !simple {
            return Err(unsupported("this scalar subquery"));
        }
        // Without an aggregate, `(SELECT y ...)` is MAX(y) plus the row
        // count, which read time checks (MySQL error 1242 for several rows).
        let (agg, single) = match aggregate_name(&agg) {
            Some(_) => (agg, false),
            None if any_row => (call("MAX", vec![agg]), false),
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
        let mut correlated = self.plan_correlated(
            s,
            scope,
            "a scalar subquery",
            "correlated condition other than equality",
        )?;
        let mut agg = agg;
        if has_subquery(&agg) {
            // `(SELECT EXISTS(SELECT ... WHERE U0.x = V0.id) FROM V0 ...)`:
            // a subquery in the value over the inner rows only joins them.
            if scope_reads_outer(&agg, &correlated.scope, scope) {
                return Err(unsupported(
                    "a subquery reading the outer query inside a scalar subquery's value",
                ));
            }
            let mut nested = 2000;
            self.rewrite_subqueries(
                &mut agg,
                &mut correlated.inner,
                &mut correlated.scope,
                &mut nested,
            )?;
        }
        for g in grouped {
            let by_key = as_column(g)
                .and_then(|ids| correlated.scope.resolve(ids).ok())
                .is_some_and(|c| correlated.inner_cols.contains(&c));
            if !by_key {
                return Err(unsupported(
                    "GROUP BY other than the correlation columns in a scalar subquery",
                ));
            }
        }
        if !correlated.residual.is_empty() {
            correlated = self.decorrelate(node, scope, correlated, n)?;
        }
        let Correlated {
            mut inner,
            scope: iscope,
            inner_cols,
            outer_cols,
            ..
        } = correlated;
        let reads_outer = |e: DataflowError| match e {
            DataflowError::UnknownColumn(..) if scope_reads_outer(&agg, &iscope, scope) => {
                unsupported("a scalar subquery whose value reads the outer query")
            }
            other => other,
        };
        if let Some(order) = &first_by {
            inner = first_in_order(inner, &iscope, &inner_cols, order).map_err(reads_outer)?;
        }
        // Uncorrelated: a one-row aggregate joined to every row (key []).
        let k = inner_cols.len();
        let row_cx = ExprCx::row(&iscope);
        let (spec, arg, (ty, _, coll)) = self.agg_spec(&agg, &row_cx, k).map_err(reads_outer)?;
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
        if agg_name == "count" && grouped.is_empty() {
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

/// The result columns of a set operation (UNION, INTERSECT, EXCEPT): each
/// the type that holds both sides' values, without table provenance.
fn set_operation_columns(l: &Rel, r: &Rel) -> Result<Vec<ColInfo>> {
    if r.cols.len() != l.cols.len() {
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
    Ok(cols)
}

/// `L INTERSECT R` / `L EXCEPT R` (distinct): both sides' rows tagged 1
/// and 2, grouped by all their columns (so NULLs compare equal, as in
/// MariaDB's set operations) with the group's smallest and largest tag;
/// INTERSECT keeps the groups with both tags, EXCEPT those with only 1.
fn intersect_or_except(left: LNode, right: LNode, colls: Vec<Collation>, intersect: bool) -> LNode {
    let width = colls.len();
    let mut tagged_colls = colls.clone();
    tagged_colls.push(Collation::Binary);
    let tag = |node: LNode, t: i64| LNode {
        op: LOp::Project(
            (0..width)
                .map(Expr::Column)
                .chain([Expr::Literal(Value::Int(t))])
                .collect(),
        ),
        inputs: vec![node],
        colls: tagged_colls.clone(),
    };
    let both = LNode {
        op: LOp::Union,
        inputs: vec![tag(left, 1), tag(right, 2)],
        colls: tagged_colls.clone(),
    };
    let mut group_colls = colls.clone();
    group_colls.extend([Collation::Binary, Collation::Binary]);
    let groups = LNode {
        op: LOp::Aggregate {
            ngroup: width,
            aggs: vec![
                AggSpec::new(AggKind::Min, width),
                AggSpec::new(AggKind::Max, width),
            ],
            scalar: false,
        },
        inputs: vec![both],
        colls: group_colls.clone(),
    };
    let eq = |c: usize, v: i64| Expr::Cmp {
        op: crate::expr::CmpOp::Eq,
        left: Box::new(Expr::Column(c)),
        right: Box::new(Expr::Literal(Value::Int(v))),
        collation: Collation::Binary,
    };
    let keep = if intersect {
        Expr::Logic(
            crate::expr::LogicOp::And,
            Box::new(eq(width, 1)),
            Box::new(eq(width + 1, 2)),
        )
    } else {
        eq(width + 1, 1)
    };
    LNode {
        op: LOp::Project((0..width).map(Expr::Column).collect()),
        inputs: vec![LNode {
            op: LOp::Filter(keep),
            inputs: vec![groups],
            colls: group_colls,
        }],
        colls,
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

/// The row count and non-NULL count of a one-column `sub`: one row, for
/// `IN (SELECT ...)`'s NULL rules.
fn row_counts(sub: LNode) -> LNode {
    LNode {
        op: LOp::Aggregate {
            ngroup: 0,
            aggs: vec![
                AggSpec::new(AggKind::CountStar, 0),
                AggSpec::new(AggKind::Count, 0),
            ],
            scalar: true,
        },
        inputs: vec![sub],
        colls: vec![Collation::Binary, Collation::Binary],
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
    let stats = row_counts(LNode {
        op: LOp::Project(vec![Expr::Column(0)]),
        colls: vec![sub.colls.first().copied().unwrap_or_default()],
        inputs: vec![sub],
    });
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

/// Whether the select list or WHERE of `s` has a subquery.
fn select_has_subquery(s: &ast::Select) -> bool {
    s.projection.iter().any(|i| match i {
        ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } => {
            has_subquery(e)
        }
        _ => false,
    }) || s.selection.as_ref().is_some_and(has_subquery)
}

/// A query of `body` alone (no ORDER BY, LIMIT, WITH).
fn query_of(body: ast::SetExpr) -> ast::Query {
    ast::Query {
        with: None,
        body: Box::new(body),
        order_by: None,
        limit: None,
        limit_by: vec![],
        offset: None,
        fetch: None,
        locks: vec![],
        for_clause: None,
        settings: None,
        format_clause: None,
    }
}

/// `FROM (SELECT 1) AS __ladle_one`: one constant row.
fn one_row_from() -> ast::TableWithJoins {
    let one = query_of(ast::SetExpr::Select(Box::new(ast::Select {
        distinct: None,
        top: None,
        top_before_distinct: false,
        projection: vec![ast::SelectItem::UnnamedExpr(number("1"))],
        into: None,
        from: vec![],
        lateral_views: vec![],
        prewhere: None,
        selection: None,
        group_by: ast::GroupByExpr::Expressions(vec![], vec![]),
        cluster_by: vec![],
        distribute_by: vec![],
        sort_by: vec![],
        having: None,
        named_window: vec![],
        qualify: None,
        window_before_qualify: false,
        value_table_mode: None,
        connect_by: None,
    })));
    ast::TableWithJoins {
        relation: ast::TableFactor::Derived {
            lateral: false,
            subquery: Box::new(one),
            alias: Some(ast::TableAlias {
                name: ast::Ident::new("__ladle_one"),
                columns: vec![],
            }),
        },
        joins: vec![],
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

/// An ENUM value's index in `labels` (1-based, 0 for the empty value, NULL
/// for NULL): what MySQL sorts an ENUM column by, where Ladle holds the
/// label.
fn enum_index(e: &Expr, labels: &[String]) -> Expr {
    use crate::expr::CmpOp;
    let mut whens = vec![(
        Expr::IsNull {
            expr: Box::new(e.clone()),
            negated: false,
        },
        Expr::Literal(Value::Null),
    )];
    for (i, label) in labels.iter().enumerate() {
        let is_label = Expr::Cmp {
            op: CmpOp::Eq,
            left: Box::new(e.clone()),
            right: Box::new(Expr::Literal(Value::text(label))),
            collation: Collation::Binary,
        };
        whens.push((is_label, Expr::Literal(Value::Int(i as i64 + 1))));
    }
    Expr::Case {
        operand: None,
        whens,
        otherwise: Some(Box::new(Expr::Literal(Value::Int(0)))),
        collation: Collation::Binary,
    }
}
