//! Operators and special forms compiled: unary and binary operators, IS
//! DISTINCT FROM, IN lists, BETWEEN, LIKE, REGEXP, CASE, CAST, CONVERT,
//! SUBSTRING, TRIM, EXTRACT, IS tests, literals and parameters (each an
//! arm of [`ExprCx::compile`]).

use ladle_common::{Collation, SqlType, Value};
use sqlparser::ast;

use super::charset::ConvertTarget;
use super::json_compare;
use super::{
    cast_type, coerce_literal, hex_number, is_arith, is_interval, is_numeric_type, literal,
    placeholder_slot, strip_nested, unsupported, ExprCx, ParamMode,
};
use crate::expr::{ArithOp, CastType, CmpOp, Expr, Func, LogicOp};
use crate::{DataflowError, Result};

impl ExprCx<'_> {
    /// A literal, or a parameter where parameters are slots.
    pub(super) fn value(&self, v: &ast::Value) -> Result<Expr> {
        Ok(match v {
            ast::Value::Placeholder(p) => match (self.params, placeholder_slot(p)) {
                (ParamMode::Slots, Some(n)) => Expr::Param(n),
                _ => {
                    return Err(DataflowError::BadArgument(format!(
                        "unexpected placeholder {p}"
                    )))
                }
            },
            other => Expr::Literal(literal(other)?),
        })
    }

    /// `x IS [NOT] NULL` (and `IS [NOT] UNKNOWN`).
    pub(super) fn is_null(&self, x: &ast::Expr, negated: bool) -> Result<Expr> {
        Ok(Expr::IsNull {
            expr: Box::new(self.compile(x)?),
            negated,
        })
    }

    /// A WHERE's marked `col IS NULL` (see [`super::super::zero_date`]):
    /// the zero date on a NOT NULL DATE or DATETIME column, else IS NULL.
    /// A column declared NOT NULL that an outer join makes nullable is
    /// NULL (no matching row) or the zero date (a matched one), as in
    /// MariaDB.
    pub(super) fn where_is_null(&self, f: &ast::Function) -> Result<Expr> {
        let x = match &f.args {
            ast::FunctionArguments::List(l) => match &l.args[..] {
                [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(x))] => x,
                _ => return Err(unsupported("a marked IS NULL of several arguments")),
            },
            _ => return Err(unsupported("a marked IS NULL without arguments")),
        };
        let col = self.compile(x)?;
        let (ty, nullable) = col.result_type(&self.frame_types());
        let zero = match (&col, ty) {
            (Expr::Column(_), SqlType::Date) => Some(Value::zero_date()),
            (Expr::Column(_), SqlType::DateTime { .. }) => Some(Value::zero_datetime()),
            _ => None,
        };
        let declared_not_null = match &col {
            Expr::Column(i) if nullable => self.outer_joined_not_null(*i),
            _ => !nullable,
        };
        let is_null = || Expr::IsNull {
            expr: Box::new(col.clone()),
            negated: false,
        };
        Ok(match zero.filter(|_| declared_not_null) {
            Some(z) => {
                let is_zero = Expr::Cmp {
                    op: CmpOp::Eq,
                    left: Box::new(col.clone()),
                    right: Box::new(Expr::Literal(z)),
                    collation: Collation::default(),
                };
                if nullable {
                    Expr::Logic(LogicOp::Or, Box::new(is_null()), Box::new(is_zero))
                } else {
                    is_zero
                }
            }
            None => is_null(),
        })
    }

    /// `x IS [NOT] TRUE` / `x IS [NOT] FALSE`.
    pub(super) fn is_bool(&self, x: &ast::Expr, value: bool, negated: bool) -> Result<Expr> {
        Ok(Expr::IsBool {
            expr: Box::new(self.compile(x)?),
            value,
            negated,
        })
    }

    /// `DATE '...'`, `TIMESTAMP '...'`, `BINARY '...'`: a typed string literal.
    pub(super) fn typed_string(&self, data_type: &ast::DataType, value: &str) -> Result<Expr> {
        let b = |x: Expr| Box::new(x);
        let v = Value::text(value);
        Ok(match data_type {
            ast::DataType::Date => Expr::Cast(b(Expr::Literal(v)), CastType::Date),
            ast::DataType::Datetime(_) | ast::DataType::Timestamp(..) => {
                Expr::Cast(b(Expr::Literal(v)), CastType::DateTime)
            }
            ast::DataType::Time(..) => Expr::Cast(b(Expr::Literal(v)), CastType::Time),
            // `BINARY 'x'`: the string as a binary string, so that
            // comparisons with it are bytewise.
            ast::DataType::Binary(_) | ast::DataType::Varbinary(_) => {
                Expr::Literal(Value::bytes(value.as_bytes()))
            }
            _ => Expr::Literal(v),
        })
    }

    /// `_binary'..'` is a binary string; any other introducer (`_utf8mb4`,
    /// ...) a text one, made of the literal's bytes when they are UTF-8
    /// (`_utf8mb4 X'C3A9'` is 'é').
    pub(super) fn introduced_string(&self, introducer: &str, value: &ast::Value) -> Result<Expr> {
        let v = literal(value)?;
        let binary = introducer.eq_ignore_ascii_case("_binary");
        Ok(Expr::Literal(match v {
            Value::Text(t) if binary => Value::bytes(t.as_bytes()),
            Value::Bytes(b) if !binary => match std::str::from_utf8(&b) {
                Ok(t) => Value::text(t),
                Err(_) => Value::Bytes(b),
            },
            other => other,
        }))
    }

    /// `-x`, `+x`, `NOT x`, `~x` (a negated number literal stays a literal).
    pub(super) fn unary_op(&self, op: &ast::UnaryOperator, expr: &ast::Expr) -> Result<Expr> {
        let b = |x: Expr| Box::new(x);
        let x = match hex_number(expr) {
            Some(n) if *op == ast::UnaryOperator::Minus => Expr::Literal(n),
            _ => self.compile(expr)?,
        };
        Ok(match op {
            ast::UnaryOperator::Minus => match x {
                Expr::Literal(Value::Int(i)) if i != i64::MIN => Expr::Literal(Value::Int(-i)),
                Expr::Literal(Value::Decimal(d)) => Expr::Literal(Value::Decimal(-d)),
                Expr::Literal(Value::Double(d)) => Expr::Literal(Value::Double(-d)),
                Expr::Literal(Value::UInt(u)) if u == 1u64 << 63 => {
                    Expr::Literal(Value::Int(i64::MIN))
                }
                // The negated quotient keeps its digits for arithmetic
                // over it (`-(a / b) * 3`), see `shown_arith`.
                Expr::Cast(q, shown @ CastType::Shown { .. }) => Expr::Cast(b(Expr::Neg(q)), shown),
                x => Expr::Neg(b(self.enum_as_number(x))),
            },
            ast::UnaryOperator::Plus => x,
            ast::UnaryOperator::Not => Expr::Not(b(x)),
            ast::UnaryOperator::PGBitwiseNot => Expr::BitNot(b(x)),
            other => return Err(unsupported(format!("operator {other}"))),
        })
    }

    /// Arithmetic, comparisons, logic and the JSON arrows; `x +/- INTERVAL`
    /// and `INTERVAL + x` are DATE_ADD.
    pub(super) fn binary_op(
        &self,
        left: &ast::Expr,
        op: &ast::BinaryOperator,
        right: &ast::Expr,
    ) -> Result<Expr> {
        let b = |x: Expr| Box::new(x);
        use ast::BinaryOperator as B;
        // `INTERVAL n unit + x` is `x + INTERVAL n unit` (MySQL's; Django
        // writes `end < INTERVAL 0 MICROSECOND + start`).
        if *op == B::Plus && is_interval(left) && !is_interval(right) {
            return self.binary_op(right, op, left);
        }
        let l = self.compile(left)?;
        if matches!(op, B::Plus | B::Minus) && is_interval(right) {
            let ast::Expr::Interval(iv) = strip_nested(right) else {
                return Err(DataflowError::Internal("interval expected".into()));
            };
            let (amount, unit) = self.interval(iv)?;
            let amount = if *op == B::Minus {
                Expr::Neg(b(amount))
            } else {
                amount
            };
            return Ok(Expr::Call(
                Func::DateAdd,
                vec![l, amount, Expr::Literal(Value::Int(unit))],
            ));
        }
        let r = self.compile(right)?;
        // A JSON value and a string or boolean literal compare as JSON.
        if matches!(op, B::Eq | B::NotEq) {
            let as_json = if json_compare::is_json(&l) {
                json_compare::equals(&l, right)
            } else if json_compare::is_json(&r) {
                json_compare::equals(&r, left)
            } else {
                None
            };
            if let Some(e) = as_json {
                return Ok(if *op == B::Eq { e } else { Expr::Not(b(e)) });
            }
        }
        // Hex literals are numbers in arithmetic and when compared
        // with a number.
        let frame = self.frame_types();
        let numeric = |x: &Expr| is_numeric_type(&x.result_type(&frame).0);
        let (l, r) = if is_arith(op) {
            (
                hex_number(left).map(Expr::Literal).unwrap_or(l),
                hex_number(right).map(Expr::Literal).unwrap_or(r),
            )
        } else {
            let nl = numeric(&l) && hex_number(left).is_none();
            let nr = numeric(&r) && hex_number(right).is_none();
            (
                hex_number(left)
                    .filter(|_| nr)
                    .map(Expr::Literal)
                    .unwrap_or(l),
                hex_number(right)
                    .filter(|_| nl)
                    .map(Expr::Literal)
                    .unwrap_or(r),
            )
        };
        // An ENUM in arithmetic, or compared with a number, is its index.
        let (l, r) = if is_arith(op) {
            (self.enum_as_number(l), self.enum_as_number(r))
        } else if numeric(&r) {
            (self.enum_as_number(l), r)
        } else if numeric(&l) {
            (l, self.enum_as_number(r))
        } else {
            (l, r)
        };
        let (l, r) = if is_arith(op) {
            (l, r)
        } else {
            // Literals on both sides: the binary one wins.
            let text =
                |x: &Expr| !matches!(x, Expr::Literal(_)) && x.result_type(&frame).0.is_text();
            let (lt, rt) = (text(&l), text(&r));
            (coerce_literal(left, l, rt), coerce_literal(right, r, lt))
        };
        // An UNSIGNED column's values are stored as plain integers:
        // marked unsigned here, so `+ - * DIV` over one give an
        // unsigned result (below zero: 1690), as in MySQL.
        let unsigned = |x: Expr| match x.result_type(&frame).0 {
            SqlType::Int { unsigned: true, .. } if !matches!(x, Expr::Literal(_)) => {
                Expr::Cast(b(x), CastType::Unsigned)
            }
            _ => x,
        };
        let (l, r) = match op {
            B::Plus | B::Minus | B::Multiply | B::MyIntegerDivide | B::DuckIntegerDivide => {
                (unsigned(l), unsigned(r))
            }
            _ => (l, r),
        };
        let arith = |o: ArithOp| shown_arith(o, l.clone(), r.clone(), &frame);
        let cmp = |o: CmpOp| Expr::Cmp {
            op: o,
            left: b(l.clone()),
            right: b(r.clone()),
            collation: self.pair_collation(left, &l, right, &r),
        };
        Ok(match op {
            B::Plus => arith(ArithOp::Add),
            B::Minus => arith(ArithOp::Sub),
            B::Multiply => arith(ArithOp::Mul),
            B::Divide => arith(ArithOp::Div),
            B::Modulo => arith(ArithOp::Mod),
            B::MyIntegerDivide | B::DuckIntegerDivide => arith(ArithOp::IntDiv),
            B::BitwiseAnd => arith(ArithOp::BitAnd),
            B::BitwiseOr => arith(ArithOp::BitOr),
            B::BitwiseXor | B::PGBitwiseXor => arith(ArithOp::BitXor),
            B::PGBitwiseShiftLeft => arith(ArithOp::Shl),
            B::PGBitwiseShiftRight => arith(ArithOp::Shr),
            B::Eq => cmp(CmpOp::Eq),
            B::NotEq => cmp(CmpOp::Ne),
            B::Lt => cmp(CmpOp::Lt),
            B::LtEq => cmp(CmpOp::Le),
            B::Gt => cmp(CmpOp::Gt),
            B::GtEq => cmp(CmpOp::Ge),
            B::Spaceship => cmp(CmpOp::NullSafeEq),
            B::And => Expr::Logic(LogicOp::And, b(l), b(r)),
            B::Or | B::StringConcat => Expr::Logic(LogicOp::Or, b(l), b(r)),
            B::Xor => Expr::Logic(LogicOp::Xor, b(l), b(r)),
            B::Arrow => Expr::Call(Func::JsonExtract, vec![l, r]),
            B::LongArrow => Expr::Call(
                Func::JsonUnquote,
                vec![Expr::Call(Func::JsonExtract, vec![l, r])],
            ),
            other => return Err(unsupported(format!("operator {other}"))),
        })
    }

    /// `x IS [NOT] DISTINCT FROM y`: NOT `x <=> y` (`x <=> y`).
    pub(super) fn is_distinct_from(
        &self,
        x: &ast::Expr,
        y: &ast::Expr,
        distinct: bool,
    ) -> Result<Expr> {
        let b = |x: Expr| Box::new(x);
        let (cx, cy) = (self.compile(x)?, self.compile(y)?);
        let coll = self.pair_collation(x, &cx, y, &cy);
        let eq = Expr::Cmp {
            op: CmpOp::NullSafeEq,
            left: b(cx),
            right: b(cy),
            collation: coll,
        };
        Ok(if distinct { Expr::Not(b(eq)) } else { eq })
    }

    /// `x [NOT] IN (a, b, ...)`, compared as one group of values.
    pub(super) fn in_list(
        &self,
        expr: &ast::Expr,
        list: &[ast::Expr],
        negated: bool,
    ) -> Result<Expr> {
        let b = |x: Expr| Box::new(x);
        if let Some(rows) = row_in_list(expr, list) {
            let e = self.compile(&rows)?;
            return Ok(if negated { Expr::Not(b(e)) } else { e });
        }
        let members: Vec<&ast::Expr> = std::iter::once(expr).chain(list.iter()).collect();
        let mut compiled = self.compile_comparison_group(&members)?.into_iter();
        let x = compiled.next().unwrap_or(Expr::Literal(Value::Null));
        let mut coll = self.collation_of(expr, &x);
        let text = !matches!(x, Expr::Literal(_)) && x.result_type(&self.frame_types()).0.is_text();
        let mut items = Vec::new();
        for (item, c) in list.iter().zip(compiled) {
            let c = coerce_literal(item, c, text);
            if coll.is_none() {
                coll = self.collation_of(item, &c);
            }
            items.push(c);
        }
        Ok(Expr::InList {
            expr: b(x),
            list: items,
            negated,
            collation: coll.unwrap_or_default(),
        })
    }

    /// `x [NOT] BETWEEN low AND high`, compared as one group of values.
    pub(super) fn between(
        &self,
        expr: &ast::Expr,
        negated: bool,
        low: &ast::Expr,
        high: &ast::Expr,
    ) -> Result<Expr> {
        let b = |x: Expr| Box::new(x);
        let [x, lo, hi]: [Expr; 3] = self
            .compile_comparison_group(&[expr, low, high])?
            .try_into()
            .map_err(|_| DataflowError::Internal("BETWEEN operands".into()))?;
        let coll = self.collation_of(expr, &x).unwrap_or_default();
        Ok(Expr::Between {
            expr: b(x),
            low: b(lo),
            high: b(hi),
            negated,
            collation: coll,
        })
    }

    /// `x [NOT] LIKE p [ESCAPE c]` (ILIKE: case-insensitive).
    pub(super) fn like(
        &self,
        negated: bool,
        expr: &ast::Expr,
        pattern: &ast::Expr,
        escape_char: Option<&str>,
        ilike: bool,
    ) -> Result<Expr> {
        let b = |x: Expr| Box::new(x);
        let x = self.compile(expr)?;
        let p = self.compile(pattern)?;
        let mut coll = self.pair_collation(expr, &x, pattern, &p);
        if ilike {
            coll = Collation::GeneralCi;
        }
        let escape = match escape_char {
            None => '\\',
            Some(s) => {
                let mut it = s.chars();
                match (it.next(), it.next()) {
                    (Some(c), None) => c,
                    _ => {
                        return Err(DataflowError::BadArgument(
                            "Incorrect arguments to ESCAPE".into(),
                        ))
                    }
                }
            }
        };
        Ok(Expr::Like {
            expr: b(x),
            pattern: b(p),
            escape,
            negated,
            collation: coll,
        })
    }

    /// `s [NOT] REGEXP p`.
    pub(super) fn rlike(
        &self,
        negated: bool,
        expr: &ast::Expr,
        pattern: &ast::Expr,
    ) -> Result<Expr> {
        let b = |x: Expr| Box::new(x);
        // `s REGEXP p`: case-insensitive unless the comparison's
        // collation is binary (`REGEXP BINARY p`, a BINARY column).
        let x = self.compile(expr)?;
        let p = self.compile(pattern)?;
        let types = self.frame_types();
        let binary = [&x, &p].iter().any(|e| e.result_type(&types).0.is_binary());
        let mode = match self.pair_collation(expr, &x, pattern, &p) {
            _ if binary => "c",
            Collation::Binary | Collation::Bin => "c",
            Collation::GeneralCi => "i",
        };
        let m = Expr::Call(
            crate::expr::Func::RegexpLike,
            vec![x, p, Expr::Literal(Value::Text(mode.into()))],
        );
        Ok(if negated { Expr::Not(b(m)) } else { m })
    }

    /// `CASE [x] WHEN ... THEN ... [ELSE ...] END`.
    pub(super) fn case(
        &self,
        operand: Option<&ast::Expr>,
        conditions: &[ast::Expr],
        results: &[ast::Expr],
        else_result: Option<&ast::Expr>,
    ) -> Result<Expr> {
        let b = |x: Expr| Box::new(x);
        let op = match operand {
            Some(o) => Some(self.compile(o)?),
            None => None,
        };
        let coll = match (operand, &op) {
            (Some(o), Some(c)) => self.collation_of(o, c).unwrap_or_default(),
            _ => Collation::GeneralCi,
        };
        let mut whens = Vec::new();
        for (c, r) in conditions.iter().zip(results) {
            whens.push((self.compile(c)?, self.compile(r)?));
        }
        let otherwise = match else_result {
            Some(x) => Some(b(self.compile(x)?)),
            None => None,
        };
        // CASE json WHEN 'text' ...: each WHEN compared as JSON (then the
        // CASE is a searched one, its operand repeated in each WHEN).
        let json_op = op.as_ref().filter(|o| json_compare::is_json(o));
        if let Some(json) = json_op {
            if conditions
                .iter()
                .any(|c| json_compare::equals(json, c).is_some())
            {
                let whens = conditions
                    .iter()
                    .zip(whens)
                    .map(|(c, (compiled, then))| {
                        let test = json_compare::equals(json, c).unwrap_or_else(|| Expr::Cmp {
                            op: CmpOp::Eq,
                            left: b(json.clone()),
                            right: b(compiled),
                            collation: coll,
                        });
                        (test, then)
                    })
                    .collect();
                return Ok(Expr::Case {
                    operand: None,
                    whens,
                    otherwise,
                    collation: coll,
                });
            }
        }
        Ok(Expr::Case {
            operand: op.map(b),
            whens,
            otherwise,
            collation: coll,
        })
    }

    /// `e` without the [`CastType::Shown`] rounding of a DECIMAL quotient
    /// (or arithmetic over one): what a numeric function reads, as
    /// MariaDB's functions read a quotient's full digits (`ROUND(a / b,
    /// 10)` rounds 0.333333333; `FLOOR(a / b * 3)` floors 0.999999999).
    pub(super) fn exact_decimal(&self, e: Expr) -> Expr {
        match e {
            Expr::Cast(inner, CastType::Shown { .. })
                if matches!(
                    inner.result_type(&self.frame_types()).0,
                    SqlType::Decimal { .. }
                ) =>
            {
                *inner
            }
            other => other,
        }
    }

    /// CASE, IF, IFNULL and COALESCE return their branches' common type, as
    /// in MySQL. When that is DECIMAL, a branch of another type or scale is
    /// converted to it (`COALESCE(2147483648, -0.5)` is `2147483648.0`,
    /// `CASE ... THEN 4/7 ELSE 1.50 END` is `1.5000`). When it is a string,
    /// a number or temporal branch becomes its text (`IF(c, 1, 'a')` is
    /// `'1'`, so `IF(..) / 4` is DOUBLE arithmetic and `ORDER BY IF(..)`
    /// sorts strings), and any branch becomes bytes when one is binary.
    /// When it is DATETIME, a DATE branch becomes a DATETIME.
    pub(super) fn branches_as_common_type(&self, mut e: Expr) -> Expr {
        if !matches!(
            &e,
            Expr::Case { .. } | Expr::Call(Func::Coalesce | Func::IfNull | Func::If, _)
        ) {
            return e;
        }
        let frame = self.frame_types();
        let common = e.result_type(&frame).0;
        let branches: Vec<&mut Expr> = match &mut e {
            Expr::Case {
                whens, otherwise, ..
            } => whens
                .iter_mut()
                .map(|(_, then)| then)
                .chain(otherwise.as_deref_mut())
                .collect(),
            Expr::Call(Func::Coalesce | Func::IfNull, args) => args.iter_mut().collect(),
            Expr::Call(Func::If, args) => args.iter_mut().skip(1).collect(),
            _ => return e,
        };
        match common {
            SqlType::Decimal { precision, scale } if branches.iter().any(|b| self.is_shown(b)) => {
                // A quotient's digits pass through (`COALESCE(AVG(a), 0) *
                // 3` multiplies them, as MariaDB's does); the other
                // branches convert, and the value is shown at `scale`.
                for branch in branches {
                    let inner = std::mem::replace(branch, Expr::Literal(Value::Null));
                    *branch = match inner {
                        Expr::Cast(q, CastType::Shown { .. }) => *q,
                        other => match other.result_type(&frame) {
                            (SqlType::Decimal { .. }, _) | (SqlType::VarChar(0), true) => other,
                            _ => {
                                Expr::Cast(Box::new(other), CastType::Decimal { precision, scale })
                            }
                        },
                    };
                }
                Expr::Cast(Box::new(e), CastType::Shown { scale })
            }
            SqlType::Decimal { precision, scale } => {
                let conforms = branches.iter().all(|b| match b.result_type(&frame) {
                    (SqlType::Decimal { scale: s, .. }, _) => s == scale,
                    // NULL converts to nothing.
                    (SqlType::VarChar(0), true) => true,
                    _ => false,
                });
                if conforms {
                    return e;
                }
                Expr::Cast(Box::new(e), CastType::Decimal { precision, scale })
            }
            SqlType::VarChar(_) | SqlType::VarBinary(_) => {
                let binary = common.is_binary();
                for branch in branches {
                    let cast = match branch.result_type(&frame) {
                        // NULL converts to nothing.
                        (SqlType::VarChar(0), true) => continue,
                        (t, _) if t.is_binary() || (!binary && t.is_text()) => continue,
                        _ if binary => CastType::Binary,
                        _ => self.temporal_text_cast(branch).unwrap_or(CastType::Char),
                    };
                    let inner = std::mem::replace(branch, Expr::Literal(Value::Null));
                    *branch = Expr::Cast(Box::new(inner), cast);
                }
                e
            }
            SqlType::DateTime { .. } => {
                // A DATE branch beside a DATETIME one is its midnight.
                for branch in branches {
                    if matches!(branch.result_type(&frame).0, SqlType::Date) {
                        let inner = std::mem::replace(branch, Expr::Literal(Value::Null));
                        *branch = Expr::Cast(Box::new(inner), CastType::DateTime);
                    }
                }
                e
            }
            _ => e,
        }
    }

    /// Whether `e` is a DECIMAL quotient's full digits read as shown
    /// ([`CastType::Shown`]).
    pub(super) fn is_shown(&self, e: &Expr) -> bool {
        matches!(e, Expr::Cast(q, CastType::Shown { .. })
            if matches!(q.result_type(&self.frame_types()).0, SqlType::Decimal { .. }))
    }

    /// `func(args)` for a function whose value keeps its arguments' digits
    /// (ABS, GREATEST, LEAST, NULLIF; MOD's remainder): a quotient's digits
    /// pass through (`ABS(AVG(a)) * 3`, `MOD(AVG(a), 2) * 3`, as MariaDB's),
    /// shown at the result's scale.
    pub(super) fn quotient_passed_through(&self, func: Func, mut args: Vec<Expr>) -> Expr {
        if !args.iter().any(|a| self.is_shown(a)) {
            return Expr::Call(func, args);
        }
        for a in &mut args {
            if self.is_shown(a) {
                if let Expr::Cast(q, _) = std::mem::replace(a, Expr::Literal(Value::Null)) {
                    *a = *q;
                }
            }
        }
        let call = Expr::Call(func, args);
        match call.result_type(&self.frame_types()).0 {
            SqlType::Decimal { scale, .. } => Expr::Cast(Box::new(call), CastType::Shown { scale }),
            _ => call,
        }
    }

    /// The arguments of a numeric function: a hex literal is a number, an
    /// ENUM its index (as in arithmetic), and a quotient its full digits
    /// where the function's result has decimals of its own (ABS and MOD
    /// show the argument's).
    pub(super) fn numeric_args(&self, func: Func, args: &[&ast::Expr]) -> Result<Vec<Expr>> {
        args.iter()
            .map(|a| {
                let x = match hex_number(a) {
                    Some(n) => Expr::Literal(n),
                    None => self.enum_as_number(self.compile(a)?),
                };
                Ok(match func {
                    Func::Abs | Func::Mod => x,
                    _ => self.exact_decimal(x),
                })
            })
            .collect()
    }

    /// `CAST(x AS type)` (hex literals are numbers when cast to one).
    pub(super) fn cast(&self, expr: &ast::Expr, data_type: &ast::DataType) -> Result<Expr> {
        let b = |x: Expr| Box::new(x);
        let target = cast_type(data_type)?;
        let numeric = matches!(
            target,
            CastType::Signed | CastType::Unsigned | CastType::Decimal { .. } | CastType::Double
        );
        let x = match hex_number(expr) {
            Some(n) if numeric => Expr::Literal(n),
            _ => self.compile(expr)?,
        };
        let target = match target {
            CastType::Char => self.temporal_text_cast(&x).unwrap_or(target),
            _ => target,
        };
        let x = match target {
            CastType::Char | CastType::CharN(_) | CastType::Binary => self.bit_as_bytes(x),
            _ => x,
        };
        // A number cast reads a quotient's full digits (`CAST(a / b AS
        // DECIMAL(20, 12))`); a string cast its shown ones.
        let x = if numeric {
            self.exact_decimal(self.enum_as_number(x))
        } else {
            x
        };
        Ok(Expr::Cast(b(x), target))
    }

    /// `CONVERT(x USING charset)`: USING binary is a binary string, USING
    /// latin1 or ascii text of the characters the set has, USING utf8mb4
    /// (or utf8mb3) text.
    pub(super) fn convert_using(
        &self,
        expr: &ast::Expr,
        charset: Option<&ast::ObjectName>,
    ) -> Result<Expr> {
        let target = charset.map(ConvertTarget::named).transpose()?;
        let cast = match target {
            Some(ConvertTarget::Binary) => CastType::Binary,
            Some(t) => t.byte_charset().map_or(CastType::Char, CastType::Recode),
            None => CastType::Char,
        };
        Ok(Expr::Cast(
            Box::new(self.bit_as_bytes(self.compile(expr)?)),
            cast,
        ))
    }

    /// `SUBSTRING(x FROM a FOR n)`.
    pub(super) fn substring(
        &self,
        expr: &ast::Expr,
        substring_from: Option<&ast::Expr>,
        substring_for: Option<&ast::Expr>,
    ) -> Result<Expr> {
        let mut args = vec![self.compile(expr)?];
        args.push(match substring_from {
            Some(f) => self.compile(f)?,
            None => Expr::Literal(Value::Int(1)),
        });
        if let Some(f) = substring_for {
            args.push(self.compile(f)?);
        }
        Ok(Expr::Call(Func::Substring, args))
    }

    /// `TRIM([BOTH | LEADING | TRAILING] x)`.
    pub(super) fn trim(
        &self,
        expr: &ast::Expr,
        trim_where: Option<&ast::TrimWhereField>,
        trim_what: Option<&ast::Expr>,
    ) -> Result<Expr> {
        if trim_what.is_some() {
            return Err(unsupported("TRIM(... FROM ...)"));
        }
        let f = match trim_where {
            None | Some(ast::TrimWhereField::Both) => Func::Trim,
            Some(ast::TrimWhereField::Leading) => Func::LTrim,
            Some(ast::TrimWhereField::Trailing) => Func::RTrim,
        };
        Ok(Expr::Call(f, vec![self.compile(expr)?]))
    }

    /// `EXTRACT(field FROM x)`.
    pub(super) fn extract(&self, field: &ast::DateTimeField, expr: &ast::Expr) -> Result<Expr> {
        let f = match field {
            ast::DateTimeField::Year => Func::Year,
            ast::DateTimeField::Month => Func::Month,
            ast::DateTimeField::Day => Func::Day,
            ast::DateTimeField::Hour => Func::Hour,
            ast::DateTimeField::Minute => Func::Minute,
            ast::DateTimeField::Second => Func::Second,
            ast::DateTimeField::Quarter => Func::Quarter,
            ast::DateTimeField::Microsecond => Func::Microsecond,
            ast::DateTimeField::Week(None) => Func::Week,
            other => return Err(unsupported(format!("EXTRACT({other})"))),
        };
        Ok(Expr::Call(f, vec![self.compile(expr)?]))
    }
}

/// `(a, b) IN ((x, y), ...)` as `(a = x AND b = y) OR ...`, which has the
/// same answer, NULLs included; None unless `expr` and every item are
/// rows of one width. The `OR`s form a balanced tree: this runs after
/// [`bound_depth`](crate::planner::depth::bound_depth) rebalanced the
/// parsed chains, and a left-deep chain of 5,000 rows overflowed the
/// statement thread's stack in `compile` (the server aborted).
fn row_in_list(expr: &ast::Expr, list: &[ast::Expr]) -> Option<ast::Expr> {
    let row = |e: &ast::Expr| match e {
        ast::Expr::Tuple(xs) if xs.len() > 1 => Some(xs.clone()),
        _ => None,
    };
    let left = row(expr)?;
    let mut any = Vec::with_capacity(list.len());
    for item in list {
        let right = row(item).filter(|r| r.len() == left.len())?;
        let all = left
            .iter()
            .zip(right)
            .map(|(l, r)| ast::Expr::BinaryOp {
                left: Box::new(l.clone()),
                op: ast::BinaryOperator::Eq,
                right: Box::new(r),
            })
            .reduce(|a, e| ast::Expr::BinaryOp {
                left: Box::new(a),
                op: ast::BinaryOperator::And,
                right: Box::new(e),
            })?;
        any.push(ast::Expr::Nested(Box::new(all)));
    }
    if any.is_empty() {
        return None;
    }
    let any = crate::planner::depth::balanced(any, &ast::BinaryOperator::Or);
    Some(ast::Expr::Nested(Box::new(any)))
}

/// `l o r`, a DECIMAL quotient's full digits kept where arithmetic uses
/// them, as MariaDB keeps them (`a / b * 100`, `a / b / c`): the operands
/// lose their [`CastType::Shown`] rounding, and the result, if it has a
/// quotient in it and is a DECIMAL, is rounded to the scale its type shows.
fn shown_arith(o: ArithOp, l: Expr, r: Expr, frame: &[(SqlType, bool)]) -> Expr {
    // (A DOUBLE passes its Shown unchanged: it carries the decimals
    // the value is shown with, `SUM(ROUND(x, 1)) + 0`.)
    let unshown = |x: Expr| match x {
        Expr::Cast(inner, CastType::Shown { .. })
            if matches!(inner.result_type(frame).0, SqlType::Decimal { .. }) =>
        {
            (*inner, true)
        }
        other => (other, false),
    };
    let ((l, exact_l), (r, exact_r)) = (unshown(l), unshown(r));
    let e = Expr::Arith(o, Box::new(l), Box::new(r));
    if o != ArithOp::Div && !exact_l && !exact_r {
        return e;
    }
    match e.result_type(frame).0 {
        SqlType::Decimal { scale, .. } => Expr::Cast(Box::new(e), CastType::Shown { scale }),
        _ => e,
    }
}
