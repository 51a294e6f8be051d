//! Walking the SQL AST of an expression: its aggregate calls, its bare
//! columns, its direct children (never into subqueries).

use sqlparser::ast;

/// An expression's text, lowercased: how the planner matches an expression
/// with one it planned already (a GROUP BY item, an aggregate).
pub(crate) fn norm(e: &ast::Expr) -> String {
    e.to_string().to_ascii_lowercase()
}

/// The aggregate function name, if `e` is an aggregate call.
pub(crate) fn aggregate_name(e: &ast::Expr) -> Option<String> {
    if let ast::Expr::Function(f) = e {
        let n = f.name.to_string().to_ascii_lowercase();
        if matches!(
            n.as_str(),
            "count" | "sum" | "avg" | "min" | "max" | "group_concat"
        ) {
            return Some(n);
        }
    }
    None
}

/// Every aggregate call inside `e` (not descending into subqueries).
pub(crate) fn collect_aggregates(e: &ast::Expr, out: &mut Vec<ast::Expr>) {
    if aggregate_name(e).is_some() {
        if !out.iter().any(|x| norm(x) == norm(e)) {
            out.push(e.clone());
        }
        return;
    }
    visit_children(e, &mut |c| collect_aggregates(c, out));
}

/// Column references of `e` outside aggregate calls (a subquery's columns
/// are its own: children stop there).
pub(crate) fn collect_bare_columns(e: &ast::Expr, out: &mut Vec<Vec<ast::Ident>>) {
    match e {
        _ if aggregate_name(e).is_some() => {}
        ast::Expr::Identifier(id) => out.push(vec![id.clone()]),
        ast::Expr::CompoundIdentifier(ids) => out.push(ids.clone()),
        _ => visit_children(e, &mut |c| collect_bare_columns(c, out)),
    }
}

/// Calls `f` on each direct child expression.
pub(crate) fn visit_children(e: &ast::Expr, f: &mut dyn FnMut(&ast::Expr)) {
    use ast::Expr as E;
    match e {
        E::IsFalse(x)
        | E::IsNotFalse(x)
        | E::IsTrue(x)
        | E::IsNotTrue(x)
        | E::IsNull(x)
        | E::IsNotNull(x) => f(x),
        E::IsUnknown(x) | E::IsNotUnknown(x) | E::Nested(x) => f(x),
        E::IsDistinctFrom(a, b) | E::IsNotDistinctFrom(a, b) => {
            f(a);
            f(b)
        }
        E::InList { expr, list, .. } => {
            f(expr);
            list.iter().for_each(&mut *f)
        }
        E::InSubquery { expr, .. } => f(expr),
        E::Between {
            expr, low, high, ..
        } => {
            f(expr);
            f(low);
            f(high)
        }
        E::BinaryOp { left, right, .. } => {
            f(left);
            f(right)
        }
        E::Like { expr, pattern, .. }
        | E::ILike { expr, pattern, .. }
        | E::RLike { expr, pattern, .. } => {
            f(expr);
            f(pattern)
        }
        E::UnaryOp { expr, .. } | E::Cast { expr, .. } | E::Collate { expr, .. } => f(expr),
        E::Ceil { expr, .. } | E::Floor { expr, .. } => f(expr),
        E::Substring {
            expr,
            substring_from,
            substring_for,
            ..
        } => {
            f(expr);
            if let Some(x) = substring_from {
                f(x)
            }
            if let Some(x) = substring_for {
                f(x)
            }
        }
        E::Trim {
            expr, trim_what, ..
        } => {
            f(expr);
            if let Some(x) = trim_what {
                f(x)
            }
        }
        E::Function(func) => {
            if let ast::FunctionArguments::List(l) = &func.args {
                for a in &l.args {
                    if let ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(x)) = a {
                        f(x)
                    }
                }
            }
        }
        E::Case {
            operand,
            conditions,
            results,
            else_result,
        } => {
            if let Some(o) = operand {
                f(o)
            }
            conditions.iter().for_each(&mut *f);
            results.iter().for_each(&mut *f);
            if let Some(x) = else_result {
                f(x)
            }
        }
        E::Interval(i) => f(&i.value),
        E::Tuple(xs) => xs.iter().for_each(f),
        _ => {}
    }
}
