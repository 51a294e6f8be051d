//! GROUP BY and aggregates: the aggregation phase of a SELECT
//! ([`Planner::aggregation`]), maintained as an aggregate where its state
//! can be keyed and left to read time otherwise, and each aggregate call
//! to an [`AggSpec`] over its argument column.

use std::collections::HashMap;

use ladle_common::{Collation, SqlType, Value};
use sqlparser::ast;

use super::expr::{
    aggregate_name, collect_bare_columns, derived_collation, norm, unsupported, visit_children,
    ExprCx, ParamMode, PostAgg, Scope,
};
use super::query::Planner;
use super::relation::{column_collation, conjunction, stored, t_is_text};
use super::select_state::{Aggregation, Grouping, ReadTimeFinish, SelectState};
use super::syntax::{has_placeholder, has_subquery};
use crate::expr::{CastType, Expr};
use crate::ops::{AggKind, AggSpec};
use crate::plan::range::RangeIndex;
use crate::plan::{LNode, LOp, ReadAgg, ReadAggregate, Window};
use crate::{DataflowError, Result};
/// The aggregate's input row: group columns, then aggregate arguments,
/// then the bare columns taken as MIN; with each output column's type.
struct AggregateInput {
    pre: Vec<Expr>,
    specs: Vec<AggSpec>,
    ngroup: usize,
    /// No GROUP BY: one row even over no input.
    scalar: bool,
    out: Vec<(SqlType, bool, Collation)>,
}

impl AggregateInput {
    fn colls(&self) -> Vec<Collation> {
        self.out.iter().map(|o| o.2).collect()
    }

    fn read_aggregate(self, pre: Option<Vec<Expr>>, colls: &[Collation]) -> ReadAggregate {
        ReadAggregate {
            pre,
            ngroup: self.ngroup,
            aggs: self.specs,
            colls: colls[..self.ngroup].to_vec(),
            scalar: self.scalar,
        }
    }
}

impl Planner<'_> {
    /// GROUP BY and aggregates: maintained as an aggregate over the FROM
    /// row where its state can be keyed; otherwise the view keeps the rows
    /// before aggregation and each read aggregates them.
    pub(super) fn aggregation(
        &self,
        st: &mut SelectState,
        g: &Grouping,
        projection: &[ast::SelectItem],
        s: &ast::Select,
        q: &ast::Query,
    ) -> Result<Aggregation> {
        if !g.aggregated() {
            return Ok(Aggregation {
                post: None,
                key_post: st.key_frame.iter().map(|k| k.0).collect(),
                empty_default_needed: false,
                late: None,
                late_range: None,
            });
        }
        // Parameters that cannot key an aggregate's state (ranges, IN
        // lists, NOW()): aggregate at read time over the maintained
        // pre-aggregation rows instead.
        // An IN list on a GROUP BY column needs no merging: each element's
        // groups are its own (decided once the group columns are known).
        let late = st.window.is_some() || !st.read_filters.is_empty();
        let scope = &st.scope;
        let row_cx = ExprCx::row(scope);
        let GroupColumns {
            exprs: mut gexprs,
            mut by_text,
            mut by_col,
        } = group_exprs(&row_cx, g, projection)?;
        functionally_dependent(scope, &mut gexprs, &mut by_col);
        if self.full_group_by {
            check_full_group_by(scope, g, projection, s, (&by_col, &by_text))?;
        }
        check_having_columns(scope, g, projection, s, (&by_col, &by_text))?;
        let late = late
            || st
                .key_frame
                .iter()
                .any(|k| k.1.len() > 1 && !by_col.contains_key(&k.0));
        let mut key_post = Vec::new();
        for (c, _) in st.key_frame.iter().filter(|_| !late) {
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
        let scalar = g.group_by.is_empty() && (late || st.key_frame.is_empty());
        let empty_default_needed = !late && g.group_by.is_empty() && !st.key_frame.is_empty();
        let ngroup = gexprs.len();
        let ftypes = scope.types();
        let out: Vec<(SqlType, bool, Collation)> = gexprs
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
        let mut input = AggregateInput {
            pre: gexprs,
            specs: Vec::new(),
            ngroup,
            scalar,
            out,
        };
        let mut shown = HashMap::new();
        for (i, a) in g.aggregates.iter().enumerate() {
            let (mut spec, arg, ty) = self.agg_spec(a, &row_cx, ngroup + i)?;
            let (arg, shown_at) =
                exact_reading(&mut spec, arg, &ty.0, g.group_by.is_empty(), &ftypes);
            if let Some(d) = shown_at {
                shown.insert(ngroup + i, d);
            }
            input.pre.push(arg);
            input.specs.push(spec);
            by_text.insert(norm(a), ngroup + i);
            input.out.push(ty);
        }
        bare_columns_as_min(scope, projection, s, q, &mut input, &mut by_col);
        if input.specs.is_empty() && st.node.may_mark_rows() {
            // GROUP BY without an aggregate over rows whose WHERE may have
            // overflowed: a group of only key columns has nowhere to hold
            // a marked row's mark, so a hidden COUNT(*) holds it (the read
            // of a group MySQL failed on fails, see `Acc::Overflowed`).
            let at = input.pre.len();
            input.pre.push(Expr::Literal(Value::Int(1)));
            input.specs.push(AggSpec::new(AggKind::CountStar, at));
            input
                .out
                .push((crate::expr::int_of_width(21), false, Collation::Binary));
        }
        let out = input.out.clone();
        let mut late_range = None;
        let late = match (late, st.window.clone()) {
            (true, Some(w)) => Some(aggregate_over_window(st, input, w)?),
            (true, None) => {
                let (finish, range) = read_time_aggregate(st, input)?;
                late_range = range;
                Some(finish)
            }
            (false, _) => {
                let pre_colls = input.colls();
                let node = LNode {
                    op: LOp::Project(input.pre),
                    inputs: vec![LNode::take(&mut st.node)],
                    colls: pre_colls.clone(),
                };
                st.node = LNode {
                    op: LOp::Aggregate {
                        ngroup,
                        aggs: input.specs,
                        scalar,
                    },
                    inputs: vec![node],
                    colls: pre_colls,
                };
                None
            }
        };
        Ok(Aggregation {
            post: Some(PostAgg {
                by_text,
                by_col,
                out,
                shown,
            }),
            key_post,
            empty_default_needed,
            late,
            late_range,
        })
    }
}

/// How an aggregate (`spec`, of type `out`) reads its argument `arg`, and
/// the decimals its value is shown with (see [`shown_decimals`]): AVG of
/// an exact argument gives the quotient's digits; `ungrouped` (no GROUP
/// BY), SUM, AVG, MIN and MAX of a quotient take its full digits (`SUM(a /
/// b)`), shown rounded after; grouped, MariaDB aggregates the rounded
/// quotient its temporary table holds.
pub(super) fn exact_reading(
    spec: &mut AggSpec,
    arg: Expr,
    out: &SqlType,
    ungrouped: bool,
    frame: &[(SqlType, bool)],
) -> (Expr, Option<u8>) {
    spec.exact_avg = spec.kind == AggKind::Avg && !spec.float;
    let (arg, exact) = match arg {
        Expr::Cast(inner, CastType::Shown { .. })
            if ungrouped
                && matches!(
                    spec.kind,
                    AggKind::Sum | AggKind::Avg | AggKind::Min | AggKind::Max
                )
                && matches!(out, SqlType::Decimal { .. }) =>
        {
            (*inner, true)
        }
        other => (other, false),
    };
    let shown = shown_decimals(spec, &arg, out, exact, frame);
    (arg, shown)
}

/// The decimals an aggregate's value is shown with where it leaves
/// arithmetic ([`CastType::Shown`] over its column), as MariaDB shows it:
/// AVG of an exact argument keeps its quotient's digits for arithmetic
/// and shows its type's scale, and so do SUM, MIN and MAX of a quotient
/// (`exact`: the argument's full digits); SUM, MIN and MAX of a DOUBLE
/// with fixed decimals (`SUM(ROUND(x, 1))`) show the argument's, AVG 4
/// more. `None`: the column's value is shown as it is.
pub(super) fn shown_decimals(
    spec: &AggSpec,
    arg: &Expr,
    out: &SqlType,
    exact: bool,
    frame: &[(SqlType, bool)],
) -> Option<u8> {
    match (spec.kind, out) {
        (AggKind::Avg, SqlType::Decimal { scale, .. }) if spec.exact_avg => Some(*scale),
        (_, SqlType::Decimal { scale, .. }) if exact => Some(*scale),
        (AggKind::Sum | AggKind::Avg | AggKind::Min | AggKind::Max, SqlType::Double) => {
            if !matches!(arg.result_type(frame).0, SqlType::Double | SqlType::Float) {
                return None;
            }
            let d = arg.fixed_decimals(frame)?;
            let d = if spec.kind == AggKind::Avg { d + 4 } else { d };
            Some(d).filter(|&d| d <= 30)
        }
        _ => None,
    }
}

/// GROUP BY's expressions compiled, and where each is found.
struct GroupColumns {
    exprs: Vec<Expr>,
    /// By its normalized text.
    by_text: HashMap<String, usize>,
    /// By its column, for plain columns.
    by_col: HashMap<usize, usize>,
}

/// Adds to the group key every column of a table whose primary key is
/// grouped (each plain GROUP BY column): such columns have one value per
/// group, so MySQL lets the select list, HAVING and ORDER BY name them
/// (`SELECT t.* ... GROUP BY t.id`, as WordPress sends), and grouping by
/// them too changes no group.
fn functionally_dependent(
    scope: &Scope,
    gexprs: &mut Vec<Expr>,
    by_col: &mut HashMap<usize, usize>,
) {
    let mut tables: Vec<&str> = scope.cols.iter().map(|c| c.qualifier.as_str()).collect();
    tables.dedup();
    for q in tables {
        let cols: Vec<(usize, &crate::BaseColumn)> = scope
            .cols
            .iter()
            .enumerate()
            .filter(|(_, c)| c.qualifier == q)
            .filter_map(|(i, c)| Some((i, c.origin.as_ref()?)))
            .collect();
        let Some((_, first)) = cols.first() else {
            continue;
        };
        let table = &first.table;
        let Some(pk) = table.primary_key.as_deref().filter(|pk| !pk.is_empty()) else {
            continue;
        };
        let same_table = cols
            .iter()
            .all(|(_, b)| std::sync::Arc::ptr_eq(&b.table, table));
        let grouped = |k: &usize| {
            cols.iter()
                .any(|(i, b)| b.column == *k && by_col.contains_key(i))
        };
        if !same_table || !pk.iter().all(grouped) {
            continue;
        }
        for (i, _) in cols {
            if let std::collections::hash_map::Entry::Vacant(e) = by_col.entry(i) {
                e.insert(gexprs.len());
                gexprs.push(Expr::Column(i));
            }
        }
    }
}

/// GROUP BY's expressions compiled over the FROM row (a number is a
/// select-list position, an unknown name a select-list alias), with where
/// each is found by its text and, for plain columns, by its column.
fn group_exprs(
    row_cx: &ExprCx<'_>,
    g: &Grouping,
    projection: &[ast::SelectItem],
) -> Result<GroupColumns> {
    let mut gexprs: Vec<Expr> = Vec::new();
    let mut by_text = HashMap::new();
    let mut by_col = HashMap::new();
    for e in &g.group_by {
        let e = match e {
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
                if row_cx.scope.resolve(std::slice::from_ref(id)).is_err() =>
            {
                g.aliases
                    .get(&id.value.to_ascii_lowercase())
                    .cloned()
                    .unwrap_or_else(|| e.clone())
            }
            other => other.clone(),
        };
        if aggregate_name(&e).is_some() {
            return Err(DataflowError::BadArgument(
                "Can't group on an aggregate".into(),
            ));
        }
        let x = stored(row_cx.compile(&e)?)?;
        let i = gexprs.len();
        by_text.insert(norm(&e), i);
        if let Expr::Column(c) = x {
            by_col.entry(c).or_insert(i);
        }
        gexprs.push(x);
    }
    Ok(GroupColumns {
        exprs: gexprs,
        by_text,
        by_col,
    })
}

/// Columns selected (by name or `*`), or used by HAVING or ORDER BY,
/// outside any aggregate and not grouped: MySQL accepts those functionally
/// dependent on the GROUP BY columns (`SELECT b.id, b.isbn, COUNT(*) ...
/// GROUP BY b.id`), MariaDB (without ONLY_FULL_GROUP_BY) any, as
/// ANY_VALUE(column). Each is taken as MIN: the group's one value when it
/// is dependent, and one of the group's values (as MariaDB gives) when it
/// is not. MIN rather than the value of the group's first row (MariaDB's
/// pick): the aggregate operator already maintains MIN under inserts and
/// deletes, and it does not depend on the order rows arrive in, so a view
/// gives the same answer after a restart, a replay or on a replica, where
/// "first" would differ. (Two such columns may then come from different
/// rows of the group; MariaDB leaves which row unspecified too.)
fn bare_columns_as_min(
    scope: &Scope,
    projection: &[ast::SelectItem],
    s: &ast::Select,
    q: &ast::Query,
    input: &mut AggregateInput,
    by_col: &mut HashMap<usize, usize>,
) {
    let mut bare = Vec::new();
    for item in projection {
        match item {
            ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } => {
                collect_bare_columns(e, &mut bare)
            }
            _ => bare.extend(wildcard_columns(scope, item)),
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
        let pos = input.pre.len();
        let col = &scope.cols[c];
        let mut spec = AggSpec::new(AggKind::Min, pos);
        if col.ty.is_text() {
            spec.collation = col.collation;
        }
        input.out.push((col.ty.clone(), true, spec.collation));
        input.pre.push(Expr::Column(c));
        input.specs.push(spec);
        by_col.insert(c, pos);
    }
}

/// The columns `*` or `t.*` (`item`) selects, as `t.column` names; none
/// for any other item.
fn wildcard_columns(scope: &Scope, item: &ast::SelectItem) -> Vec<Vec<ast::Ident>> {
    let q = match item {
        ast::SelectItem::QualifiedWildcard(n, _) => Some(
            n.0.last()
                .map(|i| i.value.to_ascii_lowercase())
                .unwrap_or_default(),
        ),
        ast::SelectItem::Wildcard(_) => None,
        _ => return Vec::new(),
    };
    scope
        .cols
        .iter()
        .filter(|c| !c.name.starts_with(ladle_common::HIDDEN_COLUMN_PREFIX))
        .filter(|c| match &q {
            Some(q) => *q == c.qualifier,
            None => !c.qualifier.starts_with("__sq"),
        })
        .map(|c| {
            vec![
                ast::Ident::new(c.qualifier.clone()),
                ast::Ident::new(c.name.clone()),
            ]
        })
        .collect()
}

/// `sql_mode=ONLY_FULL_GROUP_BY` as MariaDB 10.11 applies it: a column the
/// select list reads outside an aggregate (and outside ANY_VALUE) must be
/// grouped, else 1055 names it `db.table.column` (the table as FROM writes
/// it); without GROUP BY, beside an aggregate, 1140. ORDER BY is not
/// checked (MariaDB does not). A column determined by a grouped primary
/// key passes, as MySQL's functional dependence lets it (MariaDB refuses
/// it: Ladle takes MySQL's side, so as not to refuse what MySQL 8, whose
/// default mode this is, accepts). Columns of a derived table or view are
/// not checked (MariaDB merges those into the outer query).
fn check_full_group_by(
    scope: &Scope,
    g: &Grouping,
    projection: &[ast::SelectItem],
    s: &ast::Select,
    (by_col, by_text): (&HashMap<usize, usize>, &HashMap<String, usize>),
) -> Result<()> {
    let mut bare = Vec::new();
    for item in projection {
        match item {
            ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } => {
                full_group_by_columns(e, by_text, &mut bare)
            }
            _ => bare.extend(wildcard_columns(scope, item)),
        }
    }
    for ids in bare {
        let Ok(c) = scope.resolve(&ids) else { continue };
        if by_col.contains_key(&c) {
            continue;
        }
        if g.group_by.is_empty() {
            return Err(DataflowError::MixOfGroupColumns);
        }
        let col = &scope.cols[c];
        let Some(origin) = &col.origin else { continue };
        let Some(written) = written_qualifier(s, &col.qualifier) else {
            continue;
        };
        let name = &origin.table.columns[origin.column].name;
        return Err(DataflowError::NotInGroupBy(format!(
            "{}.{written}.{name}",
            origin.table.database
        )));
    }
    Ok(())
}

/// A column HAVING reads outside aggregates must be grouped (or
/// determined by a grouped primary key: MySQL's rule, which MariaDB does
/// not have) or selected, by name, alias or `*`: MariaDB's 1054 "Unknown
/// column 'c' in 'HAVING'" otherwise (Ladle read it as the group's MIN),
/// also for a name ambiguous among the tables.
fn check_having_columns(
    scope: &Scope,
    g: &Grouping,
    projection: &[ast::SelectItem],
    s: &ast::Select,
    (by_col, by_text): (&HashMap<usize, usize>, &HashMap<String, usize>),
) -> Result<()> {
    let Some(having) = &s.having else {
        return Ok(());
    };
    let mut bare = Vec::new();
    full_group_by_columns(having, by_text, &mut bare);
    let mut selected = std::collections::HashSet::new();
    for item in projection {
        let names = match item {
            ast::SelectItem::UnnamedExpr(ast::Expr::Identifier(id))
            | ast::SelectItem::ExprWithAlias {
                expr: ast::Expr::Identifier(id),
                ..
            } => vec![vec![id.clone()]],
            ast::SelectItem::UnnamedExpr(ast::Expr::CompoundIdentifier(ids))
            | ast::SelectItem::ExprWithAlias {
                expr: ast::Expr::CompoundIdentifier(ids),
                ..
            } => vec![ids.clone()],
            _ => wildcard_columns(scope, item),
        };
        selected.extend(names.iter().filter_map(|ids| scope.resolve(ids).ok()));
    }
    for ids in bare {
        if let [one] = &ids[..] {
            if g.aliases.contains_key(&one.value.to_ascii_lowercase()) {
                continue;
            }
        }
        let c = match scope.resolve(&ids) {
            Ok(c) => c,
            // Ambiguous in FROM and no column of the name selected or
            // grouped (one would be read: see `planner::select_names`):
            // MariaDB finds no such column. (Several stay ambiguous.)
            Err(DataflowError::AmbiguousColumn(name, _))
                if !scope.cols.iter().enumerate().any(|(c, col)| {
                    col.name.eq_ignore_ascii_case(&name)
                        && (by_col.contains_key(&c) || selected.contains(&c))
                }) =>
            {
                return Err(DataflowError::UnknownColumn(name, "HAVING".into()))
            }
            Err(_) => continue,
        };
        // (A subquery the planner joined in, `__sq<n>`, is its own.)
        let internal = scope.cols[c].qualifier.starts_with("__");
        if internal || by_col.contains_key(&c) || selected.contains(&c) {
            continue;
        }
        let name: Vec<&str> = ids.iter().map(|i| i.value.as_str()).collect();
        return Err(DataflowError::UnknownColumn(
            name.join("."),
            "HAVING".into(),
        ));
    }
    Ok(())
}

/// The columns `e` reads outside aggregates, ANY_VALUE and expressions
/// grouped by (`by_text`: `SELECT a + 1 ... GROUP BY a + 1`).
fn full_group_by_columns(
    e: &ast::Expr,
    by_text: &HashMap<String, usize>,
    out: &mut Vec<Vec<ast::Ident>>,
) {
    match e {
        _ if aggregate_name(e).is_some() || by_text.contains_key(&norm(e)) => {}
        ast::Expr::Function(f)
            if f.name.0.len() == 1 && f.name.0[0].value.eq_ignore_ascii_case("any_value") => {}
        ast::Expr::Identifier(id) => out.push(vec![id.clone()]),
        ast::Expr::CompoundIdentifier(ids) => out.push(ids.clone()),
        _ => visit_children(e, &mut |c| full_group_by_columns(c, by_text, out)),
    }
}

/// The table name or alias (as FROM writes it) that `qualifier` (lower
/// case) is.
fn written_qualifier(s: &ast::Select, qualifier: &str) -> Option<String> {
    s.from
        .iter()
        .flat_map(|t| std::iter::once(&t.relation).chain(t.joins.iter().map(|j| &j.relation)))
        .find_map(|f| match f {
            ast::TableFactor::Table { name, alias, .. } => {
                let written = match alias {
                    Some(a) => a.name.value.clone(),
                    None => name.0.last()?.value.clone(),
                };
                (written.to_ascii_lowercase() == qualifier).then_some(written)
            }
            _ => None,
        })
}

/// WHERE's read-time conjuncts compiled over the FROM row, parameters as
/// slots.
fn where_cx(scope: &Scope) -> ExprCx<'_> {
    ExprCx {
        scope,
        post: None,
        params: ParamMode::Slots,
        proposed: false,
        aliases: None,
    }
}

/// Over a windowed derived table: the view stores the derived table's
/// rows; each read takes the window, filters and aggregates.
fn aggregate_over_window(
    st: &mut SelectState,
    mut input: AggregateInput,
    w: Window,
) -> Result<ReadTimeFinish> {
    let where_cx = where_cx(&st.scope);
    let filter = conjunction(
        st.read_filters
            .iter()
            .map(|c| where_cx.compile(c))
            .collect::<Result<Vec<_>>>()?,
    );
    st.read_filters.clear();
    let colls = input.colls();
    let pre = std::mem::take(&mut input.pre);
    let finish = ReadAgg {
        window: Some(w),
        filter,
        aggregate: Some(input.read_aggregate(Some(pre), &colls)),
        having: None,
        project: vec![],
        distinct: false,
        distinct_colls: vec![],
        order: vec![],
    };
    Ok(ReadTimeFinish {
        key: vec![],
        filter: None,
        finish,
    })
}

/// Parameters the aggregate's state cannot be keyed by: the view stores
/// the group columns, aggregate arguments, key columns and the columns the
/// read-time WHERE needs; each read filters (narrowed by the range
/// parameters returned) and aggregates.
fn read_time_aggregate(
    st: &mut SelectState,
    mut input: AggregateInput,
) -> Result<(ReadTimeFinish, Option<RangeIndex>)> {
    let scope = &st.scope;
    let mut pre_colls = input.colls();
    let mut pre = std::mem::take(&mut input.pre);
    let scope_coll = |c: usize| column_collation(&scope.cols[c].ty, scope.cols[c].collation);
    let ngroup = input.ngroup;
    // A column already stored as an aggregate's argument (`COUNT(s) ...
    // WHERE s = ?`) carries the aggregate's collation (binary unless MIN or
    // MAX); as a key or filter column it compares under its own.
    let slot_of = |c: usize, pre: &mut Vec<Expr>, colls: &mut Vec<Collation>| match pre
        .iter()
        .position(|x| *x == Expr::Column(c))
    {
        Some(p) => {
            if p >= ngroup {
                colls[p] = scope_coll(c);
            }
            p
        }
        None => {
            pre.push(Expr::Column(c));
            colls.push(scope_coll(c));
            pre.len() - 1
        }
    };
    let key_pos: Vec<usize> = st
        .key_frame
        .iter()
        .map(|k| slot_of(k.0, &mut pre, &mut pre_colls))
        .collect();
    let where_cx = where_cx(scope);
    let mut rf: Option<Expr> = None;
    for c in &st.read_filters {
        let e = where_cx.compile(c)?;
        let mut map = HashMap::new();
        for col in e.columns() {
            map.insert(col, slot_of(col, &mut pre, &mut pre_colls));
        }
        let e = e.map_columns(&|c| Expr::Column(*map.get(&c).unwrap_or(&c)));
        rf = Some(match rf {
            None => e,
            Some(prev) => Expr::Logic(crate::expr::LogicOp::And, Box::new(prev), Box::new(e)),
        });
    }
    let range = RangeIndex::of(rf.as_ref(), |p| match pre.get(p) {
        Some(Expr::Column(c)) => Some((
            scope.cols[*c].ty.clone(),
            pre_colls[p],
            scope.cols[*c].name.clone(),
        )),
        _ => None,
    });
    st.read_filters.clear();
    let finish = ReadAgg {
        window: None,
        filter: None,
        aggregate: Some(input.read_aggregate(None, &pre_colls)),
        having: None,
        project: vec![],
        distinct: false,
        distinct_colls: vec![],
        order: vec![],
    };
    st.node = LNode {
        op: LOp::Project(pre),
        inputs: vec![LNode::take(&mut st.node)],
        colls: pre_colls,
    };
    let finish = ReadTimeFinish {
        key: key_pos,
        filter: rf,
        finish,
    };
    Ok((finish, range))
}

impl Planner<'_> {
    pub(super) fn agg_spec(
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
        let arg = stored(cx.compile(arg_ast)?)?;
        // SUM and AVG of an ENUM add its indexes, as in MySQL.
        let arg = match name.as_str() {
            "sum" | "avg" => cx.enum_as_number(arg),
            _ => arg,
        };
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
}
