//! MySQL's zero-date rule for `IS NULL` in a WHERE clause: on a DATE or
//! DATETIME column declared NOT NULL, `col IS NULL` (and `ISNULL(col)`,
//! `NOT (col IS NOT NULL)`) matches the zero date `0000-00-00`, an ODBC
//! convention both MySQL and MariaDB keep ("For DATE and DATETIME columns
//! that are declared as NOT NULL, you can find the special date
//! '0000-00-00' by using ... WHERE date_column IS NULL"). Only where the
//! test decides which rows a WHERE keeps: the top of the condition and
//! under AND, OR and parentheses; in a select list, inside IF(), `= TRUE`
//! or XOR it is a plain IS NULL (MariaDB 10.11, checked case by case). On
//! the side an outer join may find no row for, a column declared NOT NULL
//! is NULL for the missing row or the zero date of a matched one, as in
//! MariaDB (an anti-join's `b.col IS NULL` keeps the missing rows).
//!
//! The statement's WHERE clauses are marked before planning (the user's
//! text only: IS NULL tests the planner writes itself, as in NOT IN's
//! rewrite, are never marked); the expression compiler, which knows the
//! column's type, turns a marked test into `col = <zero date>` (`col IS
//! NULL OR col = <zero date>` on an outer join's side) or leaves it an IS
//! NULL.

use std::ops::ControlFlow;

use sqlparser::ast::{self, VisitMut, VisitorMut};

use super::expr::MARKED_IS_NULL;
use super::syntax::call;

/// Marks the `IS NULL` tests of every WHERE in `q` (subqueries and derived
/// tables included) that decide which rows are kept.
pub(crate) fn mark_query(q: &mut ast::Query) {
    struct Marker;
    impl VisitorMut for Marker {
        type Break = ();
        fn pre_visit_query(&mut self, q: &mut ast::Query) -> ControlFlow<()> {
            mark_set_expr(&mut q.body);
            ControlFlow::Continue(())
        }
    }
    let _ = q.visit(&mut Marker);
}

fn mark_set_expr(body: &mut ast::SetExpr) {
    match body {
        ast::SetExpr::Select(s) => {
            if let Some(w) = &mut s.selection {
                mark_condition(w);
            }
        }
        ast::SetExpr::SetOperation { left, right, .. } => {
            mark_set_expr(left);
            mark_set_expr(right);
        }
        // A nested query is visited on its own.
        _ => {}
    }
}

/// Marks the row-deciding `IS NULL` tests of condition `e` (a WHERE, or an
/// UPDATE's or DELETE's).
pub(crate) fn mark_condition(e: &mut ast::Expr) {
    let tested = match e {
        ast::Expr::BinaryOp {
            left,
            op: ast::BinaryOperator::And | ast::BinaryOperator::Or,
            right,
        } => {
            mark_condition(left);
            mark_condition(right);
            return;
        }
        ast::Expr::Nested(inner) => {
            mark_condition(inner);
            return;
        }
        ast::Expr::IsNull(x) => x,
        ast::Expr::UnaryOp {
            op: ast::UnaryOperator::Not,
            expr,
        } => match strip_parens(expr) {
            ast::Expr::IsNotNull(x) => x,
            _ => return,
        },
        ast::Expr::Function(f) if is_isnull_call(f) => match single_arg(f) {
            Some(x) => x,
            None => return,
        },
        _ => return,
    };
    // Only a column can be the declared NOT NULL DATE/DATETIME.
    if !matches!(
        strip_parens(tested),
        ast::Expr::Identifier(_) | ast::Expr::CompoundIdentifier(_)
    ) {
        return;
    }
    let column = strip_parens(tested).clone();
    *e = call(MARKED_IS_NULL, vec![column]);
}

fn strip_parens(mut e: &mut ast::Expr) -> &mut ast::Expr {
    while let ast::Expr::Nested(inner) = e {
        e = inner;
    }
    e
}

fn is_isnull_call(f: &ast::Function) -> bool {
    matches!(&f.name.0[..], [name] if name.value.eq_ignore_ascii_case("isnull")) && f.over.is_none()
}

fn single_arg(f: &mut ast::Function) -> Option<&mut ast::Expr> {
    match &mut f.args {
        ast::FunctionArguments::List(l) if l.args.len() == 1 && l.clauses.is_empty() => {
            match &mut l.args[0] {
                ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(x)) => Some(x),
                _ => None,
            }
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::dialect::MySqlDialect;
    use sqlparser::parser::Parser;

    fn marked(sql: &str) -> String {
        let mut stmts = Parser::parse_sql(&MySqlDialect {}, sql).unwrap();
        let ast::Statement::Query(q) = &mut stmts[0] else {
            panic!("a query")
        };
        mark_query(q);
        q.to_string()
    }

    #[test]
    fn only_row_deciding_tests_are_marked() {
        let m = |w: &str| marked(&format!("SELECT a FROM t WHERE {w}"));
        let marker = format!("{MARKED_IS_NULL}(d)");
        assert!(m("d IS NULL").contains(&marker));
        assert!(m("(d IS NULL AND a = 1) OR b IS NULL").contains(&marker));
        assert!(m("NOT (d IS NOT NULL)").contains(&marker));
        assert!(m("ISNULL(d)").contains(&marker));
        for plain in [
            "NOT (d IS NULL)",
            "(d IS NULL) = 1",
            "IF(d IS NULL, 1, 0)",
            "d + 1 IS NULL",
        ] {
            assert!(!m(plain).contains(MARKED_IS_NULL), "{plain}");
        }
        let sub = marked("SELECT a FROM (SELECT * FROM t WHERE d IS NULL) x WHERE a IN (SELECT b FROM u WHERE e IS NULL)");
        assert_eq!(sub.matches(MARKED_IS_NULL).count(), 2, "{sub}");
        let select_list = marked("SELECT d IS NULL FROM t");
        assert!(!select_list.contains(MARKED_IS_NULL));
    }
}
