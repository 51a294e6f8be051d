//! The clause an unknown or ambiguous column is named in, as MariaDB's
//! 1054 and 1052 say it: `Unknown column 'c' in 'WHERE'`, `Column 'id' in
//! ORDER BY is ambiguous`. Names are resolved in many places (a WHERE
//! conjunct may be planned as a join condition), each reporting the
//! generic "field list"; once a SELECT fails, [`name_the_clause`] looks
//! for the name in its clauses, in the order MariaDB checks them.

use sqlparser::ast;

use super::expr::visit_children;
use crate::DataflowError;

/// What [`Scope::resolve`](super::expr::Scope) reports before a clause is
/// known.
pub(super) const FIELD_LIST: &str = "field list";

/// `e` with the clause of `s`/`q` that names its column, when `e` is an
/// unknown or ambiguous column not yet placed in a clause.
pub(super) fn name_the_clause(e: DataflowError, s: &ast::Select, q: &ast::Query) -> DataflowError {
    match e {
        DataflowError::UnknownColumn(name, clause) if clause == FIELD_LIST => {
            let clause = clause_naming(&name, s, q).unwrap_or(FIELD_LIST);
            DataflowError::UnknownColumn(name, clause.into())
        }
        DataflowError::AmbiguousColumn(name, clause) if clause == FIELD_LIST => {
            let clause = clause_naming(&name, s, q).unwrap_or(FIELD_LIST);
            DataflowError::AmbiguousColumn(name, clause.into())
        }
        other => other,
    }
}

/// The first clause of `s`/`q` naming column `name` (as written, `t.c` or
/// `c`) outside its subqueries, in MariaDB's order: the select list,
/// WHERE, ON, ORDER BY, GROUP BY, HAVING.
fn clause_naming(name: &str, s: &ast::Select, q: &ast::Query) -> Option<&'static str> {
    let names = |e: &ast::Expr| names_column(e, name);
    let select = s.projection.iter().any(|item| match item {
        ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } => {
            names(e)
        }
        _ => false,
    });
    let on = s.from.iter().flat_map(|t| &t.joins).any(|j| {
        let c = match &j.join_operator {
            ast::JoinOperator::Inner(c)
            | ast::JoinOperator::LeftOuter(c)
            | ast::JoinOperator::RightOuter(c)
            | ast::JoinOperator::FullOuter(c) => c,
            _ => return false,
        };
        matches!(c, ast::JoinConstraint::On(e) if names(e))
    });
    let order = q
        .order_by
        .iter()
        .flat_map(|ob| &ob.exprs)
        .any(|o| names(&o.expr));
    let group = matches!(&s.group_by, ast::GroupByExpr::Expressions(g, _) if g.iter().any(names));
    [
        (select, "SELECT"),
        (s.selection.as_ref().is_some_and(names), "WHERE"),
        (on, "ON"),
        (order, "ORDER BY"),
        (group, "GROUP BY"),
        (s.having.as_ref().is_some_and(names), "HAVING"),
    ]
    .into_iter()
    .find_map(|(found, clause)| found.then_some(clause))
}

/// Whether `e` reads column `name` (not in a subquery).
fn names_column(e: &ast::Expr, name: &str) -> bool {
    let written = match e {
        ast::Expr::Identifier(id) => Some(id.value.clone()),
        ast::Expr::CompoundIdentifier(ids) => Some(
            ids.iter()
                .map(|i| i.value.as_str())
                .collect::<Vec<_>>()
                .join("."),
        ),
        _ => None,
    };
    if let Some(w) = written {
        return w.eq_ignore_ascii_case(name);
    }
    let mut found = false;
    visit_children(e, &mut |c| found |= names_column(c, name));
    found
}
