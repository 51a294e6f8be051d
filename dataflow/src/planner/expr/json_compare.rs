//! A JSON value compared with a SQL string or boolean literal, as MySQL's
//! CASE and SQLAlchemy expect (MariaDB agrees): with a string, the JSON
//! value's text (a JSON string unquoted) against the string, so
//! `JSON_EXTRACT(..) = 'null'` holds for JSON null and the string "null"
//! but never for the number 0 (which a numeric comparison equalled); with
//! TRUE or FALSE, only JSON `true` or `false`. SQLAlchemy's JSON index
//! access sends `CASE JSON_EXTRACT(d, p) WHEN 'null' THEN NULL WHEN true
//! THEN true ELSE false END`.
//!
//! Extracted values are plain SQL values here (numbers as numbers, other
//! JSON as its text), so the comparison is rewritten: with a string,
//! `JSON_UNQUOTE(j) = s`; with a boolean, `j = 'true'` (or `'false'`),
//! both as binary text.

use ladle_common::{Collation, Value};
use sqlparser::ast;

use crate::expr::{CmpOp, Expr, Func};

/// Whether `e` is a JSON value as MySQL types it (an extraction).
pub(super) fn is_json(e: &Expr) -> bool {
    matches!(e, Expr::Call(Func::JsonExtract, _))
}

/// The literal `other` as a JSON scalar for comparison with a JSON value,
/// when it is a string or boolean literal.
enum Scalar {
    Text(String),
    Bool(bool),
}

fn scalar(other: &ast::Expr) -> Option<Scalar> {
    match other {
        ast::Expr::Nested(x) => scalar(x),
        ast::Expr::Value(ast::Value::SingleQuotedString(s))
        | ast::Expr::Value(ast::Value::DoubleQuotedString(s)) => Some(Scalar::Text(s.clone())),
        ast::Expr::Value(ast::Value::Boolean(b)) => Some(Scalar::Bool(*b)),
        _ => None,
    }
}

fn eq(l: Expr, r: Expr) -> Expr {
    Expr::Cmp {
        op: CmpOp::Eq,
        left: Box::new(l),
        right: Box::new(r),
        collation: Collation::Binary,
    }
}

/// `json = other` compared as described above, or None when `other` is not a string
/// or boolean literal (then the ordinary comparison applies).
pub(super) fn equals(json: &Expr, other: &ast::Expr) -> Option<Expr> {
    let text = |s: &str| Expr::Literal(Value::Text(s.into()));
    Some(match scalar(other)? {
        Scalar::Text(s) => eq(Expr::Call(Func::JsonUnquote, vec![json.clone()]), text(&s)),
        Scalar::Bool(b) => eq(json.clone(), text(if b { "true" } else { "false" })),
    })
}
