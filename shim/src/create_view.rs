//! CREATE VIEW: the query checked and stored. Its column names are
//! checked as MySQL checks them: distinct, ignoring case (1060, so `SELECT *` over two tables
//! that share a column name is refused), and a column list as long as the
//! select list (1353). A column list's names become the select items'
//! aliases, so the stored definition carries them.

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
    if !alias_select_items(query, &names) {
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

/// Gives the items of a plain SELECT without `*` the aliases `names`;
/// false (and `query` untouched) for any other query.
fn alias_select_items(query: &mut ast::Query, names: &[String]) -> bool {
    let ast::SetExpr::Select(select) = query.body.as_mut() else {
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
