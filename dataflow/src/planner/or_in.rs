//! `col = a OR col = b OR col IN (c, d) ...` read as the IN list it is,
//! `col IN (a, b, c, d)`, so that [`super::normalize`] can make one keyed
//! lookup per element of it instead of a filter over every row: ORMs send
//! thousands of such terms, and each term as a filter cost a full scan.
//!
//! MySQL defines `x IN (a, b)` as `x = a OR x = b`, NULLs included; the two
//! differ only where the list mixes types (IN compares all elements in one
//! type), so only lists of one kind are rewritten: all numbers without an
//! exponent, all quoted strings, or all the caller's placeholders.

use sqlparser::ast::{self, BinaryOperator, Expr};

/// The kind of an element, all of a list's being the same.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Number,
    Text,
    Placeholder,
}

fn kind(e: &Expr) -> Option<Kind> {
    match e {
        Expr::Value(ast::Value::Number(n, _)) if !n.contains(['e', 'E']) => Some(Kind::Number),
        Expr::Value(ast::Value::SingleQuotedString(_) | ast::Value::DoubleQuotedString(_)) => {
            Some(Kind::Text)
        }
        Expr::Value(ast::Value::Placeholder(_)) => Some(Kind::Placeholder),
        _ => None,
    }
}

fn is_column(e: &Expr) -> bool {
    matches!(e, Expr::Identifier(_) | Expr::CompoundIdentifier(_))
}

fn unnest(mut e: &Expr) -> &Expr {
    while let Expr::Nested(x) = e {
        e = x;
    }
    e
}

/// The column and the values of one term: `col = v`, `v = col` or `col IN
/// (v, ...)`.
fn term(e: &Expr) -> Option<(&Expr, Vec<&Expr>)> {
    match unnest(e) {
        Expr::BinaryOp {
            left,
            op: BinaryOperator::Eq,
            right,
        } => {
            let (l, r) = (unnest(left), unnest(right));
            if is_column(l) && kind(r).is_some() {
                Some((l, vec![r]))
            } else if is_column(r) && kind(l).is_some() {
                Some((r, vec![l]))
            } else {
                None
            }
        }
        Expr::InList {
            expr,
            list,
            negated: false,
        } if is_column(unnest(expr)) && !list.is_empty() => {
            Some((unnest(expr), list.iter().map(unnest).collect()))
        }
        _ => None,
    }
}

/// The IN list that `e`, an OR of at least two terms on one column with
/// values of one kind, is; `None` for anything else.
pub(crate) fn or_as_in_list(e: &Expr) -> Option<Expr> {
    let Expr::BinaryOp {
        op: BinaryOperator::Or,
        ..
    } = unnest(e)
    else {
        return None;
    };
    // The terms in text order (the chain may be rebalanced, see `depth`).
    let mut pending = vec![unnest(e)];
    let mut column: Option<&Expr> = None;
    let mut values: Vec<Expr> = Vec::new();
    let mut list_kind = None;
    while let Some(x) = pending.pop() {
        if let Expr::BinaryOp {
            left,
            op: BinaryOperator::Or,
            right,
        } = x
        {
            pending.push(unnest(right));
            pending.push(unnest(left));
            continue;
        }
        let (col, vals) = term(x)?;
        match column {
            None => column = Some(col),
            Some(c) if same_column(c, col) => {}
            Some(_) => return None,
        }
        for v in vals {
            let k = kind(v)?;
            if *list_kind.get_or_insert(k) != k {
                return None;
            }
            values.push(v.clone());
        }
    }
    Some(Expr::InList {
        expr: Box::new(column?.clone()),
        list: values,
        negated: false,
    })
}

fn same_column(a: &Expr, b: &Expr) -> bool {
    let names = |e: &Expr| -> Vec<String> {
        match e {
            Expr::Identifier(i) => vec![i.value.to_ascii_lowercase()],
            Expr::CompoundIdentifier(ids) => {
                ids.iter().map(|i| i.value.to_ascii_lowercase()).collect()
            }
            _ => Vec::new(),
        }
    };
    names(a) == names(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::dialect::MySqlDialect;
    use sqlparser::parser::Parser;

    fn rewritten(sql: &str) -> Option<String> {
        let e = Parser::new(&MySqlDialect {})
            .try_with_sql(sql)
            .and_then(|mut p| p.parse_expr())
            .expect("parses");
        or_as_in_list(&e).map(|x| x.to_string())
    }

    #[test]
    fn an_or_of_equalities_on_one_column_is_an_in_list() {
        assert_eq!(
            rewritten("id = 1 OR 2 = id OR (id = 3)").as_deref(),
            Some("id IN (1, 2, 3)")
        );
        assert_eq!(
            rewritten("t.a = 1 OR T.A IN (2, 3) OR t.a = 4").as_deref(),
            Some("t.a IN (1, 2, 3, 4)")
        );
        assert_eq!(
            rewritten("(s = 'x' OR s = 'y') OR s = 'z'").as_deref(),
            Some("s IN ('x', 'y', 'z')")
        );
    }

    #[test]
    fn other_ors_are_left_alone() {
        for sql in [
            "id = 1",
            "id = 1 OR b = 2",
            "id = 1 OR t.id = 2",
            "id = 1 OR id = 'x'",
            "id = 1 OR id = 1e0",
            "id = 1 OR id > 2",
            "id = 1 OR id NOT IN (2)",
            "id = 1 OR id = b",
            "id = 1 OR id = NULL",
            "id = 1 AND id = 2",
        ] {
            assert_eq!(rewritten(sql), None, "{sql}");
        }
    }
}
