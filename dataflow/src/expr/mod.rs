//! Ladle's scalar expressions: a closed tree over column positions, evaluated
//! with MySQL semantics (NULL propagation, three-valued logic, MySQL's
//! numeric result types, collation-aware string comparison).
//!
//! The planner builds these from the SQL AST; operators only ever see this
//! type.
//!
//! Code map, from the bottom up (each module imports only those above it):
//! - `error.rs`, `warnings.rs`, `func/catalog.rs`, `byte_charset.rs`:
//!   [`EvalError`]; the warnings evaluation raises, per thread; [`Func`],
//!   the functions by name; [`ByteCharset`], the single-byte character
//!   sets CONVERT converts text to.
//! - `tree.rs`: [`Expr`] and its operators, the evaluation context, walking
//!   and rewriting a tree.
//! - `typing.rs`: MySQL's typing rules (a literal's type, the common type of
//!   branches, a type's width).
//! - `ops.rs`: value-level operations (conversions, arithmetic, comparison,
//!   LIKE, CAST); `json.rs`, `dates.rs`: JSON and date helpers.
//! - `func/`: the scalar functions, one file per family.
//! - `eval.rs`, `result_type.rs`, `decimals.rs`: evaluating an [`Expr`],
//!   typing it, and the decimals a DOUBLE result of it is shown with;
//!   `overflow.rs`: whether evaluating it may fail with
//!   [`EvalError::OutOfRange`], from the kinds of number it reads.

mod byte_charset;
mod char_cast;
mod dates;
mod decimals;
mod error;
mod eval;
pub(crate) mod func;
mod json;
mod ops;
mod overflow;
mod result_type;
mod tree;
mod typing;
mod warnings;

#[cfg(test)]
mod tests;

pub use byte_charset::ByteCharset;
pub use error::EvalError;
pub(crate) use error::{
    evaluated, is_evaluated_rows, is_where_failed, out_of_range_in, out_of_range_marker,
    subquery_rows_evaluated, subquery_rows_marker, where_failed_marker, SUBQUERY_ROWS,
};
pub use func::Func;
pub(crate) use ops::{
    arith as arith_values, compare, like, quotient_digits, string_as_number, truth, value_to_f64,
};
pub(crate) use overflow::NumKind;
pub use tree::{ArithOp, CastType, CmpOp, Expr, LogicOp};
pub(crate) use typing::int_of_width;
pub use typing::{type_chars, unify_types};
pub(crate) use warnings::without_warnings;
pub use warnings::{
    constants_warn_once, raised_by, take_warnings, EvalWarning, WARN_DIVISION_BY_ZERO,
};
