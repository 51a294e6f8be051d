//! The result type and nullability of an [`Expr`], as MySQL's result
//! metadata reports them.

use ladle_common::SqlType;

use super::func;
use super::tree::{ArithOp, CastType, CmpOp, Expr};
use super::typing::{
    expr_chars, expr_precision, int_of_width, is_float, literal_type, type_chars, type_scale,
    unify_types,
};

impl Expr {
    /// The result type and nullability, given the input columns' types.
    pub fn result_type(&self, input: &[(SqlType, bool)]) -> (SqlType, bool) {
        use Expr::*;
        // MySQL types a comparison as INT of display width 1.
        let boolean = SqlType::Int {
            bytes: 4,
            unsigned: false,
            display_width: Some(1),
        };
        match self {
            Column(i) | Proposed(i) => input
                .get(*i)
                .cloned()
                .unwrap_or((SqlType::VarChar(255), true)),
            Literal(v) => (literal_type(v), v.is_null()),
            Param(_) => (SqlType::VarChar(255), true),
            Neg(e) => match e.result_type(input) {
                // A BIGINT one character wider (the sign), as MySQL's.
                (t @ SqlType::Int { .. }, n) => (int_of_width(type_chars(&t) + 1), n),
                other => other,
            },
            Not(e) => (boolean, e.result_type(input).1),
            BitNot(_) => (
                SqlType::Int {
                    bytes: 8,
                    unsigned: true,
                    display_width: None,
                },
                false,
            ),
            Arith(op, l, r) => arith_type(*op, l, r, input),
            Cmp {
                op, left, right, ..
            } => {
                let n = left.result_type(input).1 || right.result_type(input).1;
                (boolean, n && *op != CmpOp::NullSafeEq)
            }
            Logic(_, l, r) => (boolean, l.result_type(input).1 || r.result_type(input).1),
            IsNull { .. } | IsBool { .. } => (boolean, false),
            InList { .. } | Between { .. } | Like { .. } => (boolean, true),
            Case {
                whens, otherwise, ..
            } => {
                let mut tys: Vec<(SqlType, bool)> =
                    whens.iter().map(|(_, t)| t.result_type(input)).collect();
                match otherwise {
                    Some(o) => tys.push(o.result_type(input)),
                    None => tys.push((SqlType::VarChar(0), true)),
                }
                unify_types(&tys)
            }
            Cast(e, t) => cast_type(e, t, input),
            Call(f, args) => func::result_type(*f, args, input),
        }
    }
}

/// The type of `l op r`: display widths and decimal precisions as MySQL's
/// metadata gives them.
fn arith_type(op: ArithOp, l: &Expr, r: &Expr, input: &[(SqlType, bool)]) -> (SqlType, bool) {
    let (lt, ln) = l.result_type(input);
    let (rt, rn) = r.result_type(input);
    let nullable = ln || rn || matches!(op, ArithOp::Div | ArithOp::IntDiv | ArithOp::Mod);
    // What clients size buffers from.
    let (lp, rp) = (expr_precision(l, &lt), expr_precision(r, &rt));
    let (ls, rs) = (u32::from(type_scale(&lt)), u32::from(type_scale(&rt)));
    let (lw, rw) = (expr_chars(l, &lt), expr_chars(r, &rt));
    let decimal = |precision: u32, scale: u32| SqlType::Decimal {
        precision: precision.clamp(1, 65) as u8,
        scale: scale.min(30) as u8,
    };
    let ty = match op {
        ArithOp::IntDiv => int_of_width(lp.saturating_sub(ls).max(1)),
        ArithOp::BitAnd | ArithOp::BitOr | ArithOp::BitXor | ArithOp::Shl | ArithOp::Shr => {
            SqlType::Int {
                bytes: 8,
                unsigned: true,
                display_width: None,
            }
        }
        ArithOp::Div => {
            if is_float(&lt) || is_float(&rt) || lt.is_text() || rt.is_text() {
                SqlType::Double
            } else {
                let scale = ls + 4;
                decimal(lp.saturating_sub(ls) + rs + scale, scale)
            }
        }
        _ => {
            if is_float(&lt) || is_float(&rt) || lt.is_text() || rt.is_text() {
                SqlType::Double
            } else if matches!(lt, SqlType::Decimal { .. }) || matches!(rt, SqlType::Decimal { .. })
            {
                match op {
                    ArithOp::Mul => decimal(lp + rp, ls + rs),
                    ArithOp::Mod => decimal(lp.max(rp), ls.max(rs)),
                    _ => {
                        let scale = ls.max(rs);
                        let int_part = lp.saturating_sub(ls).max(rp.saturating_sub(rs));
                        decimal(int_part + scale + 1, scale)
                    }
                }
            } else {
                let width = match op {
                    ArithOp::Mul => lw + rw,
                    ArithOp::Mod => lw.max(rw),
                    _ => lw.max(rw) + 1,
                };
                // An UNSIGNED operand makes it unsigned (the
                // evaluator's rule, see `ops::arith`).
                let unsigned = [&lt, &rt]
                    .iter()
                    .any(|t| matches!(t, SqlType::Int { unsigned: true, .. }));
                SqlType::Int {
                    bytes: 8,
                    unsigned: unsigned && op != ArithOp::Mod,
                    display_width: Some(width.min(255) as u8),
                }
            }
        }
    };
    (ty, nullable)
}

/// The type of `CAST(e AS SIGNED)` (`unsigned`: `AS UNSIGNED`) of an
/// operand printing as at most `chars` characters, as MariaDB's metadata
/// gives it: as wide as the operand (at most 20, at least 2 with a sign),
/// an INT while every such number fits one (9 digits and a sign, or 10
/// digits), else a BIGINT. (An UNSIGNED column's operand in arithmetic,
/// see the planner, so keeps its width.)
fn cast_int_type(chars: u32, unsigned: bool) -> SqlType {
    let width = chars.clamp(if unsigned { 1 } else { 2 }, 20);
    let int_digits = if unsigned { 10 } else { 9 };
    SqlType::Int {
        bytes: if width <= int_digits { 4 } else { 8 },
        unsigned,
        display_width: Some(width as u8),
    }
}

/// The characters operand `e` of type `t` of a CAST to an integer prints
/// as: a literal's own, an integer's type's whatever its display width
/// (an `INT(3)` column holds 123456: its CAST must not be typed narrower),
/// else [`expr_chars`].
fn cast_operand_chars(e: &Expr, t: &SqlType) -> u32 {
    match t {
        SqlType::Int {
            bytes, unsigned, ..
        } if !matches!(e, Expr::Literal(_)) => {
            u32::from(SqlType::int_display_width(*bytes, *unsigned, None))
        }
        _ => expr_chars(e, t),
    }
}

/// The type of `CAST(e AS t)`.
fn cast_type(e: &Expr, t: &CastType, input: &[(SqlType, bool)]) -> (SqlType, bool) {
    // Once: casts nest in long arithmetic chains (UNSIGNED
    // operands), so typing the operand twice is exponential.
    let (et, n) = e.result_type(input);
    let ty = match t {
        CastType::Signed => cast_int_type(cast_operand_chars(e, &et), false),
        CastType::Unsigned => cast_int_type(cast_operand_chars(e, &et), true),
        // As many characters as the value can print as.
        CastType::Char => SqlType::VarChar(expr_chars(e, &et)),
        CastType::CharN(n) => SqlType::VarChar(*n),
        // As many characters as the date or time prints as (MariaDB's).
        CastType::TemporalChar { .. } => match et {
            SqlType::Date
            | SqlType::DateTime { .. }
            | SqlType::Timestamp { .. }
            | SqlType::Time { .. } => SqlType::VarChar(type_chars(&et)),
            _ => SqlType::VarChar(65535),
        },
        // Bytes cast to bytes keep their length (a BIT's, see BitBytes).
        CastType::Binary => match et {
            SqlType::VarBinary(n) => SqlType::VarBinary(n),
            _ => SqlType::VarBinary(65535),
        },
        CastType::BitBytes { width } => SqlType::VarBinary(u32::from(*width)),
        CastType::Recode(_) => SqlType::VarChar(expr_chars(e, &et)),
        CastType::Encode(_) => SqlType::VarBinary(expr_chars(e, &et)),
        CastType::Shown { .. } => et.clone(),
        CastType::Decimal { precision, scale } => SqlType::Decimal {
            precision: *precision,
            scale: *scale,
        },
        CastType::Double => SqlType::Double,
        CastType::Date => SqlType::Date,
        CastType::DateTime => SqlType::DateTime { fsp: 0 },
        CastType::Time => SqlType::Time { fsp: 0 },
    };
    (
        ty,
        n || matches!(
            t,
            CastType::Date
                | CastType::DateTime
                | CastType::Time
                | CastType::Char
                | CastType::CharN(_)
        ),
    )
}
