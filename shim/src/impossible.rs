//! SELECTs whose WHERE the MariaDB optimizer finds impossible before it
//! reads a table ("Impossible WHERE"): a constant false conjunct, or two
//! equalities giving one column different constants (`a = 1 AND a = 2`).
//! Such a SELECT reads no rows, so in a REPEATABLE READ transaction it does
//! not take InnoDB's read view: the snapshot starts at the next read. Its
//! answer depends on no row, so Ladle answers it without taking the view
//! either.
//!
//! Only what is certain counts: a conjunct this does not understand makes
//! the WHERE possible (the view is taken, as for any read).

use std::collections::HashMap;

use ladle_common::Value;
use sqlparser::ast::{self, BinaryOperator, Expr, SetExpr};

/// Whether `q` is a single SELECT whose WHERE is impossible, with `params`
/// bound to its `?` placeholders in order (a statement with placeholders
/// outside its WHERE is not judged).
pub fn select_is_impossible(q: &ast::Query, params: &[Value]) -> bool {
    let SetExpr::Select(select) = q.body.as_ref() else {
        return false;
    };
    let Some(selection) = &select.selection else {
        return false;
    };
    let mut conjuncts = Vec::new();
    flatten_and(selection, &mut conjuncts);
    let mut constants = Vec::new();
    for c in &conjuncts {
        collect_constants(c, &mut constants);
    }
    let placeholders = constants.iter().filter(|c| c.is_none()).count();
    if placeholders != params.len() || placeholders != placeholder_count(q) {
        return false;
    }
    let mut bound = params.iter();
    let mut equal_to: HashMap<String, Constant> = HashMap::new();
    for c in conjuncts {
        match c {
            Expr::Value(v) if constant(v).is_some_and(|k| k.is_false()) => return true,
            Expr::BinaryOp {
                left,
                op: BinaryOperator::Eq,
                right,
            } => {
                let (l, r) = (operand(left, &mut bound), operand(right, &mut bound));
                match (l, r) {
                    (Operand::Constant(a), Operand::Constant(b)) if a.differs(&b) => return true,
                    (Operand::Column(col), Operand::Constant(k))
                    | (Operand::Constant(k), Operand::Column(col)) => {
                        if let Some(prev) = equal_to.get(&col) {
                            if prev.differs(&k) {
                                return true;
                            }
                        } else {
                            equal_to.insert(col, k);
                        }
                    }
                    _ => {}
                }
            }
            other => {
                // Keep the placeholders of other conjuncts in step.
                let mut skipped = Vec::new();
                collect_constants(other, &mut skipped);
                for _ in skipped.iter().filter(|c| c.is_none()) {
                    bound.next();
                }
            }
        }
    }
    false
}

/// A constant as the comparison sees it: a number, or text compared
/// without case and trailing spaces (the default collation; under another
/// two such texts may still be equal, so only numbers and texts that
/// differ even so count as different).
#[derive(Clone, Debug)]
enum Constant {
    Number(f64),
    Text(String),
    /// NULL, or a value of another kind: never provably different.
    Other,
}

impl Constant {
    fn is_false(&self) -> bool {
        matches!(self, Constant::Number(n) if *n == 0.0)
    }

    fn differs(&self, other: &Constant) -> bool {
        match (self, other) {
            (Constant::Number(a), Constant::Number(b)) => a != b,
            (Constant::Text(a), Constant::Text(b)) => a != b,
            _ => false,
        }
    }
}

enum Operand {
    Column(String),
    Constant(Constant),
    Other,
}

fn constant(v: &ast::Value) -> Option<Constant> {
    Some(match v {
        ast::Value::Number(n, _) => Constant::Number(n.parse().ok()?),
        ast::Value::Boolean(b) => Constant::Number(f64::from(u8::from(*b))),
        ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) => text(s),
        ast::Value::Null => Constant::Other,
        _ => return None,
    })
}

fn text(s: &str) -> Constant {
    Constant::Text(s.trim_end_matches(' ').to_lowercase())
}

fn bound_constant(v: &Value) -> Constant {
    match v {
        Value::Int(i) => Constant::Number(*i as f64),
        Value::UInt(u) => Constant::Number(*u as f64),
        Value::Double(d) => Constant::Number(*d),
        Value::Text(s) => text(s),
        _ => Constant::Other,
    }
}

fn operand<'a>(e: &Expr, bound: &mut impl Iterator<Item = &'a Value>) -> Operand {
    match e {
        Expr::Identifier(i) => Operand::Column(i.value.to_lowercase()),
        Expr::CompoundIdentifier(parts) => Operand::Column(
            parts
                .iter()
                .map(|p| p.value.to_lowercase())
                .collect::<Vec<_>>()
                .join("."),
        ),
        Expr::Value(ast::Value::Placeholder(_)) => match bound.next() {
            Some(p) => Operand::Constant(bound_constant(p)),
            None => Operand::Other,
        },
        Expr::Value(v) => constant(v).map_or(Operand::Other, Operand::Constant),
        Expr::Nested(inner) => operand(inner, bound),
        _ => {
            // Its placeholders are not this operand's constant.
            let mut skipped = Vec::new();
            collect_constants(e, &mut skipped);
            for _ in skipped.iter().filter(|c| c.is_none()) {
                bound.next();
            }
            Operand::Other
        }
    }
}

fn flatten_and<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
    match e {
        Expr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => {
            flatten_and(left, out);
            flatten_and(right, out);
        }
        Expr::Nested(inner) => flatten_and(inner, out),
        other => out.push(other),
    }
}

/// The literal values under `e` in source order: `None` for a `?`.
fn collect_constants(e: &Expr, out: &mut Vec<Option<()>>) {
    let _ = ast::visit_expressions(e, |x: &Expr| {
        if let Expr::Value(v) = x {
            out.push((!matches!(v, ast::Value::Placeholder(_))).then_some(()));
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
}

fn placeholder_count(q: &ast::Query) -> usize {
    let mut n = 0;
    let _ = ast::visit_expressions(q, |x: &Expr| {
        if matches!(x, Expr::Value(v) if matches!(v, ast::Value::Placeholder(_))) {
            n += 1;
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::dialect::MySqlDialect;
    use sqlparser::parser::Parser;

    fn impossible(sql: &str, params: &[Value]) -> bool {
        let stmt = Parser::parse_sql(&MySqlDialect {}, sql).expect("test SQL parses");
        let Some(ast::Statement::Query(q)) = stmt.into_iter().next() else {
            panic!("not a query: {sql}");
        };
        select_is_impossible(&q, params)
    }

    #[test]
    fn contradictions_are_impossible() {
        assert!(impossible("SELECT a FROM t WHERE a = 1 AND a = 2", &[]));
        assert!(impossible("SELECT a FROM t WHERE 1 = 0", &[]));
        assert!(impossible(
            "SELECT a FROM t WHERE b > 3 AND (t.a = 'x' AND t.a = 'y')",
            &[]
        ));
        assert!(impossible(
            "SELECT a FROM t WHERE a = ? AND b > ? AND a = ?",
            &[Value::Int(1), Value::Int(5), Value::Int(2)]
        ));
    }

    #[test]
    fn anything_else_is_possible() {
        assert!(!impossible("SELECT a FROM t WHERE a = 1 AND a = 1.0", &[]));
        assert!(!impossible(
            "SELECT a FROM t WHERE a = 'x' AND a = 'X '",
            &[]
        ));
        assert!(!impossible("SELECT a FROM t WHERE a = 1 OR a = 2", &[]));
        assert!(!impossible("SELECT a FROM t WHERE a = 1 AND b = 2", &[]));
        assert!(!impossible("SELECT a FROM t WHERE a = 1 AND a = '2'", &[]));
        assert!(!impossible(
            "SELECT ? FROM t WHERE a = ? AND a = ?",
            &[Value::Int(0), Value::Int(1), Value::Int(2)]
        ));
    }
}
