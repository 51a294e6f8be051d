//! One SELECT planned, phase by phase: FROM, WHERE, subqueries, GROUP BY
//! and aggregates, projection, HAVING, ORDER BY/LIMIT, the stored row and
//! the reader's keys.

use std::collections::HashMap;

use ladle_common::{Collation, Row, SqlType, Value};
use sqlparser::ast;

use super::expr::{
    aggregate_name, collect_aggregates, collect_bare_columns, derived_collation, norm, unsupported,
    ExprCx, ParamMode, PostAgg, Scope,
};
use super::pushdown::filter_below_joins;
use super::query::Planner;
use super::relation::{conjunction, stable, t_is_text};
use super::syntax::{
    as_column, as_slot, count_of, has_placeholder, has_placeholder_deep, has_subquery,
    split_conjuncts,
};
use crate::expr::Expr;
use crate::ops::reader::OrderSpec;
use crate::ops::{AggKind, AggSpec};
use crate::plan::range::RangeIndex;
use crate::plan::{LNode, LOp, PlannedView, ReadAgg, ReadAggregate};
use crate::{DataflowError, OutputColumn, Result};

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
pub(super) fn index_prefix_key(node: &LNode, key_frame: &[(usize, Vec<usize>)]) -> Option<usize> {
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

impl Planner<'_> {
    pub(super) fn select(&self, s: &ast::Select, q: &ast::Query, top: bool) -> Result<PlannedView> {
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

    /// `col = ?`, `? = col`, `col IN (?, ...)` on a FROM column.
    pub(super) fn key_conjunct(&self, c: &ast::Expr, scope: &Scope) -> Option<(usize, Vec<usize>)> {
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
}
