//! CREATE VIEW: the query checked and stored. Its column names are
//! checked as MySQL checks them: distinct, ignoring case (1060, so `SELECT *` over two tables
//! that share a column name is refused), and a column list as long as the
//! select list (1353). A column list's names become the select items'
//! aliases (a UNION's first SELECT's, `*` spelled out first), so the
//! stored definition carries them, as MySQL's does.

use sqlparser::ast;

use crate::error::{MysqlCode, Result, ShimError, WireError, ER_DUP_FIELDNAME};
use crate::exec::{view_meta_key, Engine};
use crate::output::Output;
use crate::session::Session;

/// MySQL's ER_VIEW_WRONG_LIST.
const ER_VIEW_WRONG_LIST: MysqlCode = MysqlCode {
    errno: 1353,
    sqlstate: "HY000",
};

/// The alias of the derived table a column list renames through when it
/// cannot rename the select items in place.
const RENAMED: &str = "__ladle_view_columns";

impl Engine {
    /// Creates (or with `or_replace` replaces) view `name` with column
    /// list `columns` (empty when none) over `query`.
    pub(crate) fn create_view(
        &self,
        s: &Session,
        name: &ast::ObjectName,
        columns: &[ast::ViewColumnDef],
        mut query: ast::Query,
        or_replace: bool,
    ) -> Result<Output> {
        let (db, view) = self.resolve(s, name)?;
        // A view WITH ROLLUP is the UNION ALL of its levels.
        crate::rollup::expand_nested(&mut query, true)?;
        crate::temporary_cleanup::check_view_query(self, &db, &query)?;
        name_view_columns(self, &db, &mut query, columns)?;
        // The dataflow stores and re-parses the query's text.
        let query = crate::sqltext::display_safe(&query);
        self.dataflow.create_view(&db, &view, &query, or_replace)?;
        // The definition text, for SHOW CREATE VIEW and
        // information_schema.VIEWS.
        self.storage
            .put_meta(&view_meta_key(&db, &view), query.to_string().as_bytes())?;
        crate::view_check_option::forget(&self.storage, &db, &view)?;
        Ok(Output::ok())
    }
}

/// Checks the names of view `query` (in `db`) and applies column list
/// `list` (empty when the CREATE VIEW has none) to `query`.
fn name_view_columns(
    e: &Engine,
    db: &str,
    query: &mut ast::Query,
    list: &[ast::ViewColumnDef],
) -> Result<()> {
    let planned: Vec<String> = e
        .dataflow
        .query_columns(db, query)?
        .into_iter()
        .map(|c| c.name)
        .collect();
    if list.is_empty() {
        return check_distinct(&planned);
    }
    if list.len() != planned.len() {
        return Err(wire(
            ER_VIEW_WRONG_LIST,
            "In definition of view, derived table or common table expression, \
             SELECT list and column names list have different column counts"
                .into(),
        ));
    }
    let names: Vec<String> = list.iter().map(|c| c.name.value.clone()).collect();
    check_distinct(&names)?;
    expand_lone_wildcard(query, &planned);
    if let Some(first) = first_select(&mut query.body) {
        spell_out_wildcards(e, db, first)?;
    }
    if alias_select_items(query, &names) {
        rename_order_by(query, &planned, &names);
    } else {
        // `*` or a UNION: rename the result through a derived table,
        // whose own column names must then be distinct.
        check_distinct(&planned)?;
        rename_through_derived_table(query, &planned, &names)?;
    }
    Ok(())
}

/// 1060 for the first name that repeats an earlier one (ignoring case,
/// as column names do).
fn check_distinct(names: &[String]) -> Result<()> {
    let mut seen = std::collections::HashSet::new();
    for n in names {
        if !seen.insert(n.to_lowercase()) {
            return Err(wire(
                ER_DUP_FIELDNAME,
                format!("Duplicate column name '{n}'"),
            ));
        }
    }
    Ok(())
}

/// A plain SELECT of a lone `*` selects its columns `planned` by name
/// instead (when they are distinct), so that the column list can alias
/// them and the view stays one a write can go through.
fn expand_lone_wildcard(query: &mut ast::Query, planned: &[String]) {
    let ast::SetExpr::Select(select) = query.body.as_mut() else {
        return;
    };
    let lone_star = matches!(
        select.projection.as_slice(),
        [ast::SelectItem::Wildcard(options)] if *options == Default::default()
    );
    if lone_star && check_distinct(planned).is_ok() {
        select.projection = planned
            .iter()
            .map(|p| {
                ast::SelectItem::UnnamedExpr(ast::Expr::Identifier(ast::Ident::with_quote('`', p)))
            })
            .collect();
    }
}

/// The first SELECT of a query body: a set operation's names its columns.
fn first_select(body: &mut ast::SetExpr) -> Option<&mut ast::Select> {
    match body {
        ast::SetExpr::Select(s) => Some(s),
        ast::SetExpr::SetOperation { left, .. } => first_select(left),
        ast::SetExpr::Query(q) => first_select(&mut q.body),
        _ => None,
    }
}

/// Replaces each `*` and `t.*` of `select` (in `db`) by the columns it
/// selects, each qualified by its table, so that a column list can alias
/// them one by one. Leaves `select` as it is when its FROM merges columns
/// (`USING`, `NATURAL`) or a `*` names no table of it.
fn spell_out_wildcards(e: &Engine, db: &str, select: &mut ast::Select) -> Result<()> {
    let has_wildcard = select.projection.iter().any(|item| {
        matches!(
            item,
            ast::SelectItem::Wildcard(_) | ast::SelectItem::QualifiedWildcard(..)
        )
    });
    if !has_wildcard {
        return Ok(());
    }
    let mut relations = Vec::new();
    for twj in &select.from {
        relations.push(&twj.relation);
        for j in &twj.joins {
            let merges = match &j.join_operator {
                ast::JoinOperator::Inner(c)
                | ast::JoinOperator::LeftOuter(c)
                | ast::JoinOperator::RightOuter(c) => {
                    matches!(
                        c,
                        ast::JoinConstraint::Using(_) | ast::JoinConstraint::Natural
                    )
                }
                ast::JoinOperator::CrossJoin => false,
                _ => true,
            };
            if merges {
                return Ok(());
            }
            relations.push(&j.relation);
        }
    }
    // Each relation's qualifier and columns, in FROM order.
    let mut columns: Vec<(Vec<ast::Ident>, Vec<String>)> = Vec::new();
    for r in relations {
        let qualifier = match r {
            ast::TableFactor::Table { alias: Some(a), .. }
            | ast::TableFactor::Derived { alias: Some(a), .. } => vec![a.name.clone()],
            ast::TableFactor::Table { name, .. } => name.0.clone(),
            _ => return Ok(()),
        };
        let mut star = match crate::sqltext::parse("SELECT * FROM __ladle_view_star")?
            .into_iter()
            .next()
        {
            Some(ast::Statement::Query(q)) => *q,
            _ => return Err(ShimError::Internal("SELECT * did not parse".into())),
        };
        if let ast::SetExpr::Select(s) = star.body.as_mut() {
            s.from[0].relation = r.clone();
        }
        let names = e.dataflow.query_columns(db, &star)?;
        columns.push((qualifier, names.into_iter().map(|c| c.name).collect()));
    }
    let column = |q: &[ast::Ident], name: &str| {
        let mut ids = q.to_vec();
        ids.push(ast::Ident::with_quote('`', name));
        ast::SelectItem::UnnamedExpr(ast::Expr::CompoundIdentifier(ids))
    };
    let mut items = Vec::new();
    for item in std::mem::take(&mut select.projection) {
        match &item {
            ast::SelectItem::Wildcard(o) if *o == Default::default() => {
                for (q, names) in &columns {
                    items.extend(names.iter().map(|n| column(q, n)));
                }
            }
            ast::SelectItem::QualifiedWildcard(name, o) if *o == Default::default() => {
                let same = |q: &[ast::Ident]| {
                    q.last().map(|i| i.value.to_lowercase())
                        == name.0.last().map(|i| i.value.to_lowercase())
                };
                let Some((q, names)) = columns.iter().find(|(q, _)| same(q)) else {
                    items.push(item);
                    continue;
                };
                items.extend(names.iter().map(|n| column(q, n)));
            }
            _ => items.push(item),
        }
    }
    select.projection = items;
    Ok(())
}

/// A set operation's ORDER BY naming a column by its first SELECT's name
/// (`planned`) names it by its alias in `names` once those items are
/// aliased.
fn rename_order_by(query: &mut ast::Query, planned: &[String], names: &[String]) {
    if !matches!(query.body.as_ref(), ast::SetExpr::SetOperation { .. }) {
        return;
    }
    for o in query.order_by.iter_mut().flat_map(|ob| ob.exprs.iter_mut()) {
        if let ast::Expr::Identifier(id) = &o.expr {
            if let Some(i) = planned
                .iter()
                .position(|p| p.eq_ignore_ascii_case(&id.value))
            {
                o.expr = ast::Expr::Identifier(ast::Ident::with_quote('`', &names[i]));
            }
        }
    }
}

/// Gives the items of a query's first SELECT, when it has no `*`, the
/// aliases `names` (a set operation's column names are its first
/// SELECT's); false (and `query` untouched) for any other query.
fn alias_select_items(query: &mut ast::Query, names: &[String]) -> bool {
    let Some(select) = first_select(query.body.as_mut()) else {
        return false;
    };
    let plain = select.projection.iter().all(|item| {
        matches!(
            item,
            ast::SelectItem::UnnamedExpr(_) | ast::SelectItem::ExprWithAlias { .. }
        )
    });
    if !plain || select.projection.len() != names.len() {
        return false;
    }
    for (item, name) in select.projection.iter_mut().zip(names) {
        let expr = match item {
            ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } => {
                e.clone()
            }
            _ => return false,
        };
        *item = ast::SelectItem::ExprWithAlias {
            expr,
            alias: ast::Ident::with_quote('`', name),
        };
    }
    true
}

/// Replaces `query` with `SELECT d.planned AS name, ... FROM (query) AS d`.
fn rename_through_derived_table(
    query: &mut ast::Query,
    planned: &[String],
    names: &[String],
) -> Result<()> {
    let quote = |s: &str| format!("`{}`", s.replace('`', "``"));
    let items: Vec<String> = planned
        .iter()
        .zip(names)
        .map(|(p, n)| format!("{}.{} AS {}", quote(RENAMED), quote(p), quote(n)))
        .collect();
    let sql = format!(
        "SELECT {} FROM ({query}) AS {}",
        items.join(", "),
        quote(RENAMED)
    );
    match crate::sqltext::parse(&sql)?.into_iter().next() {
        Some(ast::Statement::Query(q)) => {
            *query = *q;
            Ok(())
        }
        _ => Err(ShimError::Internal("renamed view did not parse".into())),
    }
}

fn wire(code: MysqlCode, message: String) -> ShimError {
    ShimError::Wire(WireError { code, message })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_repeated_in_another_case_are_duplicates() {
        let names = ["id".to_string(), "ID".to_string()];
        let err = check_distinct(&names).unwrap_err();
        assert_eq!(err.mysql_code().errno, 1060);
        assert!(check_distinct(&["a".into(), "b".into()]).is_ok());
    }
}
