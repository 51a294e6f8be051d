//! A column's DEFAULT: the value a write gets ([`default_of`]), what an
//! UPDATE's `DEFAULT` and `DEFAULT(col)` stand for ([`default_literal`],
//! [`replace_default_calls`]) and, for an expression default, the text
//! SHOW CREATE TABLE shows ([`default_expression`], kept in
//! [`crate::table_notes`]).

use std::ops::ControlFlow;

use ladle_common::{coerce, ColumnDefault, ColumnSchema, SqlType, Value};
use ladle_storage::StorageError;
use sqlparser::ast::{self, Expr, Ident};

use crate::error::{Result, ShimError, WireError};
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
        ShimError::Wire(WireError {
            code: crate::error::ER_INVALID_DEFAULT,
            message: format!("Invalid default value for '{}'", col.name),
        })
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

/// What `DEFAULT` stands for as a value of `col` (an UPDATE's `SET c =
/// DEFAULT`, `DEFAULT(c)`): its default as a literal. An AUTO_INCREMENT
/// column's is 0, and a NOT NULL column without one is 1364, as in
/// MariaDB.
pub(crate) fn default_literal(col: &ColumnSchema) -> Result<Expr> {
    let value = match default_value(col) {
        _ if col.auto_increment && !col.nullable => Value::Int(0),
        Some(v) => v,
        None => {
            return Err(StorageError::NoDefault {
                column: col.name.clone(),
            }
            .into())
        }
    };
    Ok(ladle_dataflow::value_expr(&value))
}

/// Replaces each `DEFAULT(col)` in `expr` by `col`'s default (see
/// [`default_literal`]); `column_of` finds the column a reference (`c`,
/// `t.c`) names.
pub(crate) fn replace_default_calls(
    expr: &mut Expr,
    column_of: &dyn Fn(&[Ident]) -> Result<ColumnSchema>,
) -> Result<()> {
    let mut failed = None;
    let _ = ast::visit_expressions_mut(expr, |x| {
        if let Some(parts) = default_call_argument(x) {
            match column_of(&parts).and_then(|c| default_literal(&c)) {
                Ok(literal) => *x = literal,
                Err(err) => {
                    failed = Some(err);
                    return ControlFlow::Break(());
                }
            }
        }
        ControlFlow::Continue(())
    });
    failed.map_or(Ok(()), Err)
}

/// The column reference `DEFAULT(col)` names, if `e` is such a call.
fn default_call_argument(e: &Expr) -> Option<Vec<Ident>> {
    let Expr::Function(f) = e else { return None };
    if !f.name.to_string().eq_ignore_ascii_case("default") {
        return None;
    }
    let ast::FunctionArguments::List(list) = &f.args else {
        return None;
    };
    match list.args.as_slice() {
        [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(arg))] => match arg {
            Expr::Identifier(i) => Some(vec![i.clone()]),
            Expr::CompoundIdentifier(parts) => Some(parts.clone()),
            _ => None,
        },
        _ => None,
    }
}

/// The value an omitted column gets.
pub fn default_value(col: &ColumnSchema) -> Option<Value> {
    match &col.default {
        ColumnDefault::Value(v) => Some(v.clone()),
        ColumnDefault::CurrentTimestamp => Some(current_timestamp()),
        // Computed once the row's other columns are known.
        ColumnDefault::Generated { .. } => Some(Value::Null),
        ColumnDefault::None if col.nullable || col.auto_increment => Some(Value::Null),
        // An ENUM NOT NULL defaults to its first label (MariaDB).
        ColumnDefault::None => match &col.ty {
            SqlType::Enum(labels) => labels.first().map(Value::text),
            _ => None,
        },
    }
}

/// CURRENT_TIMESTAMP as a column value: local time in microseconds; a
/// column keeps as many fractional digits as its precision (coercion
/// truncates, so DATETIME gets whole seconds, DATETIME(6) all six).
pub fn current_timestamp() -> Value {
    let now = chrono::DateTime::from_timestamp_micros(ladle_dataflow::clock::now_micros())
        .unwrap_or_default()
        .with_timezone(&chrono::Local)
        .naive_local();
    Value::DateTime(ladle_common::truncate_datetime(now, 6))
}
