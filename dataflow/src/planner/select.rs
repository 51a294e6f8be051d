//! One SELECT planned as the list of its phases ([`Planner::select`]):
//! FROM, WHERE, window functions, subqueries in the other clauses, GROUP
//! BY and aggregates, projection, HAVING, read-time filters, ORDER
//! BY/LIMIT, then the stored row and the reader's keys. The phases hand each other a
//! [`SelectState`] (see [`super::select_state`]); each phase is a function
//! of its own, in the module of its clause.

use std::borrow::Cow;
use std::collections::HashMap;

use sqlparser::ast;

use super::expr::{norm, unsupported, volatile, ExprCx, ParamMode};
use super::layout::StoredRow;
use super::query::Planner;
use super::relation::conjunction;
use super::select_state::{Frame, Grouping, Projection, ReadTimeFinish, SelectState};
use super::syntax::{as_column, count_of, has_subquery, split_conjuncts};
use crate::expr::Expr;
use crate::plan::{LNode, LOp, PlannedView};
use crate::{DataflowError, OutputColumn, Result};
use ladle_common::SqlType;

impl Planner<'_> {
    /// Plans one SELECT; `top` when it is the query itself (not a
    /// subquery, derived table or view), the only place parameters may key
    /// the view or be read at read time.
    pub(super) fn select(&self, s: &ast::Select, q: &ast::Query, top: bool) -> Result<PlannedView> {
        self.select_phases(s, q, top)
            .map_err(|e| super::clause::name_the_clause(e, s, q))
    }

    /// [`Self::select`], its errors' columns not yet placed in a clause.
    fn select_phases(&self, s: &ast::Select, q: &ast::Query, top: bool) -> Result<PlannedView> {
        // OVER w and OVER (w ...): the window spelled out, WINDOW gone.
        if let Some((s, q)) = super::named_window::resolve_named_windows(s, q)? {
            return self.select(&s, &q, top);
        }
        super::window_fn::misplaced_window_calls(s, q)?;
        // Windows beside GROUP BY: over a derived table of the groups.
        if let Some((s, q)) = super::grouped_window::grouped_windows(s, q)? {
            return self.select(&s, &q, top);
        }
        let distinct = supported_select(s)?;
        if super::stats::select_has_statistic(s, q) {
            // VAR_POP and the others become COUNT/SUM arithmetic, typed by
            // the FROM clause's columns.
            let (_, from_scope) = self.plan_from(&s.from, &mut Vec::new())?;
            let (s, q) = super::stats::expand_in_select(s, q, &from_scope)?;
            return self.select(&s, &q, top);
        }
        // A derived table with LIMIT is taken at read time, after which
        // no window could be maintained: under windows it is a relation
        // (a top-k node).
        let read_time_limit = top && !super::window_fn::has_window_calls(s, q);
        let (mut st, conj) = self.select_from(s, read_time_limit)?;
        self.select_where(&mut st, conj, top)?;
        // Window functions: columns of window nodes over FROM and WHERE.
        let windowed = self.window_functions(&mut st, s, q)?;
        let (s, q) = match &windowed {
            Some((s, q)) => (s, q),
            None => (s, q),
        };
        // ORDER BY, GROUP BY and HAVING names ambiguous in FROM that the
        // select list selects once.
        let named = super::select_names::select_list_names(s, q, &st.scope);
        let (s, q) = match &named {
            Some((s, q)) => (s, q),
            None => (s, q),
        };
        let (projection, s, q) = self.clause_subqueries(&mut st, s, q)?;
        let grouping = Grouping::of(&projection, &s, &q)?;
        // (A key narrowed at read time would filter after the windows.)
        if !grouping.aggregated() && !distinct && st.window.is_none() && windowed.is_none() {
            st.narrow_by_index_prefix();
        }
        let mut agg = self.aggregation(&mut st, &grouping, &projection, &s, &q)?;
        let frame = Frame::after(&st.scope, agg.post.as_ref());
        let cx = ExprCx {
            scope: &st.scope,
            post: agg.post.as_ref(),
            params: ParamMode::Slots,
            proposed: false,
            aliases: None,
        };
        let p = project(&cx, &projection, &frame)?;
        let cx_alias = ExprCx {
            aliases: Some(&p.aliases),
            ..cx
        };
        let post_read_filter = having(
            s.having.as_ref(),
            &cx_alias,
            &mut agg.late,
            &mut st.node,
            top,
        )?;
        let (window_filter, read_filter) = read_time_filters(
            &cx,
            &mut st.read_filters,
            st.window.is_some() && agg.late.is_none(),
            post_read_filter,
        )?;
        let order_exprs = order_by(&cx_alias, &p, q.order_by.as_ref(), top || q.limit.is_some())?;
        let limit = q.limit.as_ref().map(count_of).transpose()?;
        let offset = q.offset.as_ref().map(|o| count_of(&o.value)).transpose()?;
        if !top && (limit.is_some() || offset.is_some()) {
            return Err(unsupported("LIMIT in a subquery"));
        }
        let stored = StoredRow::of(&p.visible, &agg.key_post, &order_exprs, &frame, read_filter);
        if let (Some(w), None) = (&st.window, &agg.late) {
            // Not aggregated: the window, WHERE and the projection at read time.
            agg.late = Some(ReadTimeFinish::window(w.clone(), window_filter));
        }
        let counts = (limit, offset);
        match agg.late.take() {
            Some(mut late) => {
                // DISTINCT merges projected rows equal under their collations.
                late.finish.distinct_colls = stored
                    .stored
                    .iter()
                    .map(|e| frame.collation_of(e))
                    .collect();
                st.read_time_view(late, stored, p.columns, counts, distinct, agg)
            }
            None => st.maintained_view(stored, p.columns, counts, distinct, agg, &frame),
        }
    }

    /// FROM: the relation WHERE and the rest are planned over, and WHERE's
    /// conjuncts not taken as join conditions; `read_time_limit`: a
    /// derived table with LIMIT may be taken at read time.
    fn select_from(
        &self,
        s: &ast::Select,
        read_time_limit: bool,
    ) -> Result<(SelectState, Vec<ast::Expr>)> {
        let mut conj = Vec::new();
        if let Some(w) = &s.selection {
            split_conjuncts(w, &mut conj);
        }
        // FROM (SELECT ... ORDER BY ... LIMIT n) d: the view keeps the
        // derived table's full ordered result; each read takes its window,
        // then evaluates this query over it.
        let (node, scope, window) = match self.windowed_derived(s, read_time_limit)? {
            Some((n, sc, w)) => (n, sc, Some(w)),
            None => {
                let (n, sc) = self.plan_from(&s.from, &mut conj)?;
                (n, sc, None)
            }
        };
        let st = SelectState {
            node,
            scope,
            window,
            nsub: 0,
            key_frame: Vec::new(),
            key_conjuncts: Vec::new(),
            read_filters: Vec::new(),
            narrowed_slot: None,
            never_null: Vec::new(),
        };
        Ok((st, conj))
    }

    /// Subqueries in the select list, HAVING, GROUP BY and ORDER BY, joined
    /// in as columns: returns the select list, the SELECT and the query
    /// with each such subquery replaced by its column.
    fn clause_subqueries<'s, 'q>(
        &self,
        st: &mut SelectState,
        s: &'s ast::Select,
        q: &'q ast::Query,
    ) -> Result<(
        Vec<ast::SelectItem>,
        Cow<'s, ast::Select>,
        Cow<'q, ast::Query>,
    )> {
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
            if st.window.is_some() {
                return Err(unsupported(
                    "subqueries in the select list over a derived table with LIMIT",
                ));
            }
            self.rewrite_subqueries(e, &mut st.node, &mut st.scope, &mut st.nsub)?;
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
        let grouped_by_subquery = matches!(&s.group_by, ast::GroupByExpr::Expressions(g, _) if g.iter().any(has_subquery));
        let s = if s.having.as_ref().is_some_and(has_subquery) || grouped_by_subquery {
            if st.window.is_some() {
                return Err(unsupported(
                    "subqueries in HAVING or GROUP BY over a derived table with LIMIT",
                ));
            }
            let mut s2 = s.clone();
            if let Some(h) = &mut s2.having {
                self.rewrite_subqueries(h, &mut st.node, &mut st.scope, &mut st.nsub)?;
            }
            if let ast::GroupByExpr::Expressions(g, _) = &mut s2.group_by {
                for e in g.iter_mut().filter(|e| has_subquery(e)) {
                    self.rewrite_subqueries(e, &mut st.node, &mut st.scope, &mut st.nsub)?;
                }
            }
            Cow::Owned(s2)
        } else {
            Cow::Borrowed(s)
        };
        // Subqueries in ORDER BY, as in the select list.
        let q = if q
            .order_by
            .iter()
            .flat_map(|ob| &ob.exprs)
            .any(|o| has_subquery(&o.expr))
        {
            if st.window.is_some() {
                return Err(unsupported(
                    "subqueries in ORDER BY over a derived table with LIMIT",
                ));
            }
            let mut q2 = q.clone();
            for o in q2.order_by.iter_mut().flat_map(|ob| &mut ob.exprs) {
                // The select list's own subquery (Django orders by an
                // annotation by repeating it): its joined column, which a
                // DISTINCT's rows carry.
                let selected = s
                    .projection
                    .iter()
                    .position(|item| item_expr(item).is_some_and(|e| norm(e) == norm(&o.expr)));
                if let Some(e) = selected.and_then(|i| item_expr(&projection[i])) {
                    o.expr = e.clone();
                    continue;
                }
                self.rewrite_subqueries(&mut o.expr, &mut st.node, &mut st.scope, &mut st.nsub)?;
            }
            Cow::Owned(q2)
        } else {
            Cow::Borrowed(q)
        };
        Ok((projection, s, q))
    }
}

/// The expression of a select-list item (not a `*`).
fn item_expr(item: &ast::SelectItem) -> Option<&ast::Expr> {
    match item {
        ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } => Some(e),
        _ => None,
    }
}

/// Refuses the SELECT clauses Ladle does not plan; returns whether it is
/// SELECT DISTINCT.
fn supported_select(s: &ast::Select) -> Result<bool> {
    if s.top.is_some() || s.into.is_some() || !s.lateral_views.is_empty() || s.prewhere.is_some() {
        return Err(unsupported("TOP/INTO/LATERAL"));
    }
    if !s.cluster_by.is_empty()
        || !s.distribute_by.is_empty()
        || !s.sort_by.is_empty()
        || s.qualify.is_some()
    {
        return Err(unsupported("CLUSTER/DISTRIBUTE/SORT BY/QUALIFY"));
    }
    // (A WINDOW clause is spelled out into its calls before this.)
    if !s.named_window.is_empty() || s.connect_by.is_some() {
        return Err(unsupported("WINDOW/CONNECT BY"));
    }
    match &s.distinct {
        None => Ok(false),
        Some(ast::Distinct::Distinct) => Ok(true),
        Some(ast::Distinct::On(_)) => Err(unsupported("DISTINCT ON")),
    }
}

/// The select list: each item compiled over the frame, with its name and
/// result metadata; `*` expanded over the FROM row.
fn project(cx: &ExprCx<'_>, projection: &[ast::SelectItem], frame: &Frame) -> Result<Projection> {
    let scope = cx.scope;
    let mut visible: Vec<Expr> = Vec::new();
    let mut aliases: HashMap<String, Expr> = HashMap::new();
    let mut columns: Vec<OutputColumn> = Vec::new();
    for item in projection {
        match item {
            ast::SelectItem::Wildcard(_) | ast::SelectItem::QualifiedWildcard(..) => {
                let q = match item {
                    ast::SelectItem::QualifiedWildcard(n, _) => Some(
                        n.0.last()
                            .map(|i| i.value.to_ascii_lowercase())
                            .unwrap_or_default(),
                    ),
                    _ => None,
                };
                let mut any = false;
                let order = match &q {
                    None => scope.wildcard_order(),
                    Some(_) => (0..scope.cols.len()).collect(),
                };
                for i in order {
                    let c = &scope.cols[i];
                    // Columns a subquery joined in (`__sq<n>`) are internal;
                    // a functional key part's hidden column is not shown.
                    if c.name.starts_with(ladle_common::HIDDEN_COLUMN_PREFIX) {
                        continue;
                    }
                    let internal = c.qualifier.starts_with("__sq");
                    if q.as_ref().map_or(!internal, |q| *q == c.qualifier) {
                        any = true;
                        // Grouped, each column is read as its name would
                        // be (`SELECT t.* ... GROUP BY t.id`: determined by
                        // the key, as MySQL reads it).
                        visible.push(match cx.post {
                            Some(_) => cx.compile(&ast::Expr::CompoundIdentifier(vec![
                                ast::Ident::new(c.qualifier.clone()),
                                ast::Ident::new(c.name.clone()),
                            ]))?,
                            None => Expr::Column(i),
                        });
                        columns.push(OutputColumn {
                            name: c.name.clone(),
                            table: c.table.clone(),
                            origin: c.origin.clone(),
                            ty: c.ty.clone(),
                            nullable: c.nullable,
                            decimals: None,
                            stored: c.stored,
                        });
                    }
                }
                if !any {
                    return Err(DataflowError::UnknownTable(q.unwrap_or_default()));
                }
            }
            ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } => {
                if has_subquery(e) {
                    return Err(unsupported("subquery in the select list"));
                }
                let c = cx.compile(e)?;
                let (ty, nullable) = c.result_type(&frame.types);
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
                let stored = base.is_some_and(|i| scope.cols[i].stored);
                if let ast::SelectItem::ExprWithAlias { alias, .. } = item {
                    aliases.insert(alias.value.to_ascii_lowercase(), c.clone());
                }
                // A grouped expression reads its group's column: its
                // decimals are then the text's own (`ROUND(x, 1)`).
                let decimals = match ty {
                    SqlType::Double => c
                        .fixed_decimals(&frame.types)
                        .or_else(|| crate::sql_ast::fixed_decimals(e)),
                    _ => None,
                };
                columns.push(OutputColumn {
                    name,
                    table,
                    origin,
                    ty,
                    nullable,
                    decimals,
                    stored,
                });
                visible.push(c);
            }
        }
    }
    Ok(Projection {
        visible,
        aliases,
        columns,
    })
}

/// HAVING: a filter over the aggregate's rows where it can be maintained,
/// part of the read-time aggregation where there is one; returned when it
/// has parameters (then it is a read-time filter).
fn having(
    h: Option<&ast::Expr>,
    cx_alias: &ExprCx<'_>,
    late: &mut Option<ReadTimeFinish>,
    node: &mut LNode,
    top: bool,
) -> Result<Option<Expr>> {
    let Some(h) = h else {
        return Ok(None);
    };
    if cx_alias.post.is_none() {
        return Err(unsupported("HAVING without aggregation"));
    }
    let e = cx_alias.compile(h)?;
    if e.is_volatile() {
        return Err(volatile("NOW()/RAND() in HAVING"));
    }
    if let Some(late) = late {
        late.finish.having = Some(e);
    } else if e.has_params() {
        if !top {
            return Err(unsupported("parameters in a subquery"));
        }
        return Ok(Some(e));
    } else {
        let colls = node.colls.clone();
        *node = LNode {
            op: LOp::Filter(e),
            inputs: vec![LNode::take(node)],
            colls,
        };
    }
    Ok(None)
}

/// WHERE's read-time conjuncts compiled over the frame: over a windowed
/// derived table (`after_window`), the filter the window's rows pass
/// (first); otherwise the read-time filter, after a HAVING with
/// parameters (second).
fn read_time_filters(
    cx: &ExprCx<'_>,
    read_filters: &mut Vec<ast::Expr>,
    after_window: bool,
    having: Option<Expr>,
) -> Result<(Option<Expr>, Option<Expr>)> {
    // Over a windowed derived table, WHERE runs after the window.
    let mut window_filter: Option<Expr> = None;
    if after_window {
        let mut parts = Vec::new();
        for c in read_filters.iter() {
            parts.push(cx.compile(c)?);
        }
        window_filter = conjunction(parts);
        read_filters.clear();
    }
    // Read-time filters (range parameters) over the pre-aggregation frame.
    let mut rf: Option<Expr> = having;
    for c in read_filters.iter() {
        let e = cx.compile(c)?;
        rf = Some(match rf {
            None => e,
            Some(prev) => Expr::Logic(crate::expr::LogicOp::And, Box::new(prev), Box::new(e)),
        });
    }
    Ok((window_filter, rf))
}

/// ORDER BY's expressions and directions (when `sorted`: at the top or
/// under a LIMIT; elsewhere the order is not observable).
fn order_by(
    cx_alias: &ExprCx<'_>,
    p: &Projection,
    order_by: Option<&ast::OrderBy>,
    sorted: bool,
) -> Result<Vec<(Expr, bool)>> {
    let mut order_exprs: Vec<(Expr, bool)> = Vec::new();
    let Some(ob) = order_by.filter(|_| sorted) else {
        return Ok(order_exprs);
    };
    for o in &ob.exprs {
        let e = match &o.expr {
            ast::Expr::Value(ast::Value::Number(n, _)) => {
                let pos: usize = n
                    .parse()
                    .map_err(|_| DataflowError::BadArgument(n.clone()))?;
                p.visible
                    .get(pos.wrapping_sub(1))
                    .cloned()
                    .ok_or_else(|| DataflowError::UnknownColumn(n.clone(), "order clause".into()))?
            }
            // A bare name is the select-list alias first, even
            // when a column has that name (WHERE and GROUP BY
            // see the column), as MySQL resolves ORDER BY.
            // (An alias of NOW() or a parameter is the same for
            // every row: the column's order is as good.)
            ast::Expr::Identifier(id)
                if p.aliases
                    .get(&id.value.to_ascii_lowercase())
                    .is_some_and(|e| !e.is_volatile() && !e.has_params()) =>
            {
                p.aliases[&id.value.to_ascii_lowercase()].clone()
            }
            other => cx_alias.compile(other)?,
        };
        if e.is_volatile() || e.has_params() {
            return Err(volatile("NOW()/RAND()/parameters in ORDER BY"));
        }
        order_exprs.push((e, o.asc == Some(false)));
    }
    Ok(order_exprs)
}
