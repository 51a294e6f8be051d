//! A column's DEFAULT: the value a write gets ([`default_of`]) and, for an
//! expression default, the text SHOW CREATE TABLE shows
//! ([`default_expression`], kept in [`crate::table_notes`]).

use ladle_common::{coerce, ColumnDefault, ColumnSchema};
use sqlparser::ast::{self, Expr};

use crate::error::{Result, ShimError};
use crate::exec::Engine;
use crate::session::Session;

/// CURRENT_TIMESTAMP, NOW() and their synonyms (in parentheses too).
pub(crate) fn is_current_timestamp(e: &Expr) -> bool {
    let name = match e {
        Expr::Identifier(i) => i.value.to_ascii_lowercase(),
        Expr::Function(f) => f.name.to_string().to_ascii_lowercase(),
        Expr::Nested(e) => return is_current_timestamp(e),
        _ => return false,
    };
    matches!(
        name.as_str(),
        "current_timestamp" | "now" | "localtime" | "localtimestamp"
    )
}

/// A column's DEFAULT `expr`, checked against its type.
pub(crate) fn default_of(
    e: &Engine,
    s: &Session,
    col: &ColumnSchema,
    expr: &Expr,
) -> Result<ColumnDefault> {
    if is_current_timestamp(expr) {
        return Ok(ColumnDefault::CurrentTimestamp);
    }
    let v = e.eval_constant(s, expr)?;
    if v.is_null() {
        return Ok(ColumnDefault::None);
    }
    let v = coerce(&v, col).map_err(|_| {
        ShimError::WrongArguments(format!("Invalid default value for '{}'", col.name))
    })?;
    Ok(ColumnDefault::Value(v))
}

/// The text of an expression default, `DEFAULT (3 + 5)` (MySQL 8 writes
/// expression defaults in parentheses): `3 + 5`; None for a literal (even
/// in parentheses) and CURRENT_TIMESTAMP, whose value is the default.
pub(crate) fn default_expression(expr: &Expr) -> Option<String> {
    let ast::Expr::Nested(mut inner) = expr.clone() else {
        return None;
    };
    while let ast::Expr::Nested(x) = *inner {
        inner = x;
    }
    let literal = match inner.as_ref() {
        ast::Expr::Value(_) => true,
        ast::Expr::UnaryOp { expr, .. } => matches!(expr.as_ref(), ast::Expr::Value(_)),
        other => is_current_timestamp(other),
    };
    (!literal).then(|| crate::sqltext::expr_text(&inner))
}
