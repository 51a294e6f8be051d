//! The view engine's scalar evaluator, for the shim's row-at-a-time work
//! (UPDATE SET/WHERE, DELETE WHERE, INSERT VALUES, constant expressions):
//! the same evaluator views use, so both agree.

use ladle_common::{Collation, Row, SqlType, TableSchema, Value};
use sqlparser::ast;

use crate::error::{DataflowError, Result};
use crate::{expr, planner};

/// A scalar expression over one table's row (UPDATE SET/WHERE, DELETE WHERE,
/// INSERT VALUES, ON DUPLICATE KEY UPDATE).
#[derive(Clone, Debug)]
pub struct RowExpr {
    expr: expr::Expr,
}

impl RowExpr {
    /// Evaluates against `row` (laid out as the table's columns).
    pub fn eval(&self, row: &Row) -> Result<Value> {
        self.expr.eval(row).map_err(eval_err)
    }
    /// The value's type and whether it may be NULL, over `table`'s rows.
    pub fn result_type(&self, table: &TableSchema) -> (SqlType, bool) {
        let input: Vec<(SqlType, bool)> = table
            .columns
            .iter()
            .map(|c| (c.ty.clone(), c.nullable))
            .collect();
        self.expr.result_type(&input)
    }
    /// The value's type, and whether it may be NULL, when the expression
    /// reads no column (a constant).
    pub fn constant_type(&self) -> (SqlType, bool) {
        self.expr.result_type(&[])
    }
    /// The decimals a DOUBLE result is shown with when the expression reads
    /// no column (`ROUND(1.25e0, 1) + 0`: 1), `None` if not fixed.
    pub fn constant_decimals(&self) -> Option<u8> {
        self.expr.fixed_decimals(&[])
    }
    /// Evaluates with `VALUES(col)` referring to `proposed` (ON DUPLICATE KEY
    /// UPDATE).
    pub fn eval_with_proposed(&self, row: &Row, proposed: &Row) -> Result<Value> {
        self.expr.eval_proposed(row, proposed).map_err(eval_err)
    }
    /// SQL truth of the value (for WHERE): NULL and 0 are false.
    pub fn eval_predicate(&self, row: &Row) -> Result<bool> {
        self.expr.eval_bool(row, &[]).map_err(eval_err)
    }
}

fn eval_err(e: expr::EvalError) -> DataflowError {
    DataflowError::from(e)
}

/// SQL truth of a value, as WHERE and IF read it: `None` for NULL, numbers
/// when non-zero, strings by their numeric prefix (`'12abc'` is true).
pub fn value_truth(v: &Value) -> Option<bool> {
    expr::truth(v)
}

/// SQL comparison under `collation` (`None` when either side is NULL):
/// numbers with strings numerically, binary strings bytewise, as the view
/// engine compares.
pub fn compare_values(a: &Value, b: &Value, collation: Collation) -> Option<std::cmp::Ordering> {
    expr::compare(a, b, collation)
}

/// `s LIKE pattern` (escape `\`) under `collation`.
pub fn like_text(s: &str, pattern: &str, collation: Collation) -> bool {
    expr::like(s, pattern, '\\', collation)
}

/// Marks the row-deciding `col IS NULL` tests of an UPDATE's or DELETE's
/// WHERE `e`, which then match the zero date on a NOT NULL DATE or DATETIME
/// column, as a SELECT's WHERE does (MySQL's rule; see the planner's
/// `zero_date` module). Before [`compile_row_expr`] and any index choice.
pub fn mark_where_is_null(e: &mut ast::Expr) {
    planner::zero_date::mark_condition(e);
}

/// Compiles `expr` over the columns of `table` (or over no columns when
/// `table` is `None`, e.g. INSERT VALUES). Placeholders are an error: the
/// caller substitutes parameter values into the AST first.
pub fn compile_row_expr(expr: &ast::Expr, table: Option<&TableSchema>) -> Result<RowExpr> {
    Ok(RowExpr {
        expr: planner::compile_row_expr(expr, table)?,
    })
}
