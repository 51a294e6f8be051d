//! SQL AST expressions -> Ladle [`Expr`].

use std::collections::HashMap;
use std::str::FromStr;

use ladle_common::{Collation, SqlType, Value};
use rust_decimal::Decimal;
use sqlparser::ast;

use crate::expr::{func, ArithOp, CastType, CmpOp, Expr, Func, LogicOp};
use crate::{DataflowError, Result};

/// One column visible to expressions.
#[derive(Clone, Debug)]
pub(crate) struct ScopeCol {
    /// Lower-cased table name or alias qualifying the column.
    pub qualifier: String,
    pub name: String,
    pub ty: SqlType,
    pub nullable: bool,
    pub collation: Collation,
    /// Base table name for result metadata (empty for computed columns).
    pub table: String,
    /// The base column it reads unchanged, for result metadata.
    pub origin: Option<crate::BaseColumn>,
}

/// The columns of a relation in FROM (after joins).
#[derive(Clone, Debug, Default)]
pub(crate) struct Scope {
    pub cols: Vec<ScopeCol>,
}

impl Scope {
    pub fn types(&self) -> Vec<(SqlType, bool)> {
        self.cols
            .iter()
            .map(|c| (c.ty.clone(), c.nullable))
            .collect()
    }

    /// Resolves `[qualifier.]name`.
    pub fn resolve(&self, idents: &[ast::Ident]) -> Result<usize> {
        let (qual, name) = match idents {
            [n] => (None, &n.value),
            [.., t, n] => (Some(t.value.to_ascii_lowercase()), &n.value),
            [] => return Err(DataflowError::Internal("empty identifier".into())),
        };
        let hits: Vec<usize> = self
            .cols
            .iter()
            .enumerate()
            .filter(|(_, c)| {
                c.name.eq_ignore_ascii_case(name) && qual.as_ref().is_none_or(|q| *q == c.qualifier)
            })
            .map(|(i, _)| i)
            .collect();
        let full = idents
            .iter()
            .map(|i| i.value.clone())
            .collect::<Vec<_>>()
            .join(".");
        match hits.len() {
            1 => Ok(hits[0]),
            0 => Err(DataflowError::UnknownColumn(full, "field list".into())),
            _ => Err(DataflowError::AmbiguousColumn(full, "field list".into())),
        }
    }
}

/// After aggregation: which expressions map to which output columns.
#[derive(Clone, Debug, Default)]
pub(crate) struct PostAgg {
    /// Normalized expression text (group expressions, aggregate calls).
    pub by_text: HashMap<String, usize>,
    /// Pre-aggregation column -> output column (plain GROUP BY columns).
    pub by_col: HashMap<usize, usize>,
    /// Output column types.
    pub out: Vec<(SqlType, bool, Collation)>,
}

/// How placeholders are treated.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum ParamMode {
    /// Placeholders are an error (row expressions).
    Reject,
    /// `?N` becomes `Expr::Param(N)`.
    Slots,
}

pub(crate) struct ExprCx<'a> {
    pub scope: &'a Scope,
    pub post: Option<&'a PostAgg>,
    pub params: ParamMode,
    /// `VALUES(col)` allowed (ON DUPLICATE KEY UPDATE).
    pub proposed: bool,
    /// Output aliases usable in HAVING / ORDER BY: name -> output column
    /// expression (already compiled in this context).
    pub aliases: Option<&'a HashMap<String, Expr>>,
}

pub(crate) fn norm(e: &ast::Expr) -> String {
    e.to_string().to_ascii_lowercase()
}

/// The SQL name under which the planner's scalar-subquery rewrite refers to
/// [`Func::SingleRow`].
pub(crate) const SINGLE_ROW_FN: &str = "__ladle_single_row";

pub(crate) fn unsupported(what: impl Into<String>) -> DataflowError {
    DataflowError::Unsupported(what.into())
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

/// Converts a SQL literal.
pub(crate) fn literal(v: &ast::Value) -> Result<Value> {
    use ast::Value as V;
    Ok(match v {
        V::Number(s, _) => number(s)?,
        V::SingleQuotedString(s) | V::DoubleQuotedString(s) | V::EscapedStringLiteral(s) => {
            Value::text(s)
        }
        V::NationalStringLiteral(s) => Value::text(s),
        // A hex literal is a binary string (a number in numeric context:
        // see `hex_number`); `0xABC` reads as `0x0ABC`.
        V::HexStringLiteral(h) => {
            let padded = if h.len() % 2 == 1 {
                format!("0{h}")
            } else {
                h.clone()
            };
            let bytes: Option<Vec<u8>> = (0..padded.len())
                .step_by(2)
                .map(|i| {
                    padded
                        .get(i..i + 2)
                        .and_then(|x| u8::from_str_radix(x, 16).ok())
                })
                .collect();
            Value::bytes(
                bytes.ok_or_else(|| DataflowError::BadArgument(format!("bad hex literal {h}")))?,
            )
        }
        V::SingleQuotedByteStringLiteral(s) | V::DoubleQuotedByteStringLiteral(s) => {
            Value::bytes(s.as_bytes())
        }
        V::Boolean(b) => Value::Int(i64::from(*b)),
        V::Null => Value::Null,
        V::Placeholder(p) => return Err(unsupported(format!("placeholder {p} here"))),
        other => return Err(unsupported(format!("literal {other}"))),
    })
}

fn number(s: &str) -> Result<Value> {
    if s.contains(['e', 'E']) {
        return s
            .parse::<f64>()
            .map(Value::Double)
            .map_err(|_| DataflowError::BadArgument(s.into()));
    }
    if s.contains('.') {
        return Decimal::from_str(s)
            .map(Value::Decimal)
            .or_else(|_| s.parse::<f64>().map(Value::Double))
            .map_err(|_| DataflowError::BadArgument(s.into()));
    }
    if let Ok(i) = s.parse::<i64>() {
        return Ok(Value::Int(i));
    }
    if let Ok(u) = s.parse::<u64>() {
        return Ok(Value::UInt(u));
    }
    Decimal::from_str(s)
        .map(Value::Decimal)
        .map_err(|_| DataflowError::BadArgument(s.into()))
}

/// A hex literal (`X'41'`, `0x41`) read as the number MySQL makes of it in
/// numeric context (arithmetic, comparison with a number): its bytes as a
/// big-endian unsigned integer.
fn hex_number(e: &ast::Expr) -> Option<Value> {
    let ast::Expr::Value(v @ ast::Value::HexStringLiteral(_)) = strip_nested(e) else {
        return None;
    };
    let Ok(Value::Bytes(b)) = literal(v) else {
        return None;
    };
    let tail = &b[b.len().saturating_sub(8)..];
    Some(Value::UInt(
        tail.iter().fold(0u64, |acc, &x| acc << 8 | u64::from(x)),
    ))
}

/// A binary string literal (`X'..'`, `_binary'..'`) compared with a text
/// expression that is not a literal (a column, a function of one) takes its
/// character set and collation, as MariaDB
/// coerces literals: `name = _binary'alice'` is case-insensitive under a
/// `_ci` column, unlike `name = BINARY 'alice'` or a CAST (bytewise).
fn coerce_literal(e: &ast::Expr, compiled: Expr, other_is_text: bool) -> Expr {
    let literal_ast = matches!(
        strip_nested(e),
        ast::Expr::Value(ast::Value::HexStringLiteral(_)) | ast::Expr::IntroducedString { .. }
    );
    match compiled {
        Expr::Literal(Value::Bytes(b)) if literal_ast && other_is_text => {
            match std::str::from_utf8(&b) {
                Ok(t) => Expr::Literal(Value::text(t)),
                Err(_) => Expr::Literal(Value::Bytes(b)),
            }
        }
        other => other,
    }
}

fn is_numeric_type(t: &SqlType) -> bool {
    matches!(
        t,
        SqlType::Int { .. }
            | SqlType::Year
            | SqlType::Float
            | SqlType::Double
            | SqlType::Decimal { .. }
    )
}

/// Parses a `?N` placeholder name into its slot.
pub(crate) fn placeholder_slot(p: &str) -> Option<usize> {
    p.strip_prefix('?').and_then(|n| n.parse().ok())
}

impl<'a> ExprCx<'a> {
    pub fn row(scope: &'a Scope) -> ExprCx<'a> {
        ExprCx {
            scope,
            post: None,
            params: ParamMode::Reject,
            proposed: false,
            aliases: None,
        }
    }

    fn col_info(&self, i: usize) -> (SqlType, bool, Collation) {
        match self.post {
            Some(p) => {
                p.out
                    .get(i)
                    .cloned()
                    .unwrap_or((SqlType::VarChar(255), true, Collation::GeneralCi))
            }
            None => match self.scope.cols.get(i) {
                Some(c) => (c.ty.clone(), c.nullable, c.collation),
                None => (SqlType::VarChar(255), true, Collation::GeneralCi),
            },
        }
    }

    pub fn frame_types(&self) -> Vec<(SqlType, bool)> {
        match self.post {
            Some(p) => p.out.iter().map(|(t, n, _)| (t.clone(), *n)).collect(),
            None => self.scope.types(),
        }
    }

    /// The collation a comparison involving `e` uses, if `e` carries one
    /// (a text column, or an explicit COLLATE).
    fn collation_of(&self, e: &ast::Expr, compiled: &Expr) -> Option<Collation> {
        if let ast::Expr::Collate { collation, .. } = e {
            return Collation::from_name(&collation.to_string());
        }
        if let ast::Expr::Nested(x) = e {
            return self.collation_of(x, compiled);
        }
        if let Expr::Column(i) = compiled {
            let (ty, _, coll) = self.col_info(*i);
            if ty.is_text() || ty.is_binary() {
                return Some(if ty.is_binary() {
                    Collation::Binary
                } else {
                    coll
                });
            }
        }
        // JSON text compares case-sensitively (utf8mb4_bin).
        if let Expr::Call(Func::JsonExtract | Func::JsonUnquote, _) = compiled {
            return Some(Collation::Bin);
        }
        // `RTRIM(col)`, `UPPER(col)`, ...: the column's collation.
        if let (Expr::Call(..), Some(Expr::Column(i))) = (compiled, collation_source(compiled)) {
            let (ty, _, coll) = self.col_info(*i);
            if ty.is_text() {
                return Some(coll);
            }
        }
        None
    }

    fn pair_collation(&self, a: &ast::Expr, ca: &Expr, b: &ast::Expr, cb: &Expr) -> Collation {
        let explicit = |e: &ast::Expr| matches!(e, ast::Expr::Collate { .. });
        if explicit(a) {
            if let Some(c) = self.collation_of(a, ca) {
                return c;
            }
        }
        if explicit(b) {
            if let Some(c) = self.collation_of(b, cb) {
                return c;
            }
        }
        self.collation_of(a, ca)
            .or_else(|| self.collation_of(b, cb))
            .unwrap_or(Collation::GeneralCi)
    }

    pub fn compile(&self, e: &ast::Expr) -> Result<Expr> {
        use ast::Expr as E;
        if let Some(post) = self.post {
            if let Some(&i) = post.by_text.get(&norm(e)) {
                return Ok(Expr::Column(i));
            }
            if aggregate_name(e).is_some() {
                return Err(DataflowError::Internal(format!(
                    "aggregate {e} not planned"
                )));
            }
        }
        let b = |x: Expr| Box::new(x);
        Ok(match e {
            E::Identifier(id) => return self.column(std::slice::from_ref(id)),
            E::CompoundIdentifier(ids) => return self.column(ids),
            E::Value(v) => match v {
                ast::Value::Placeholder(p) => match (self.params, placeholder_slot(p)) {
                    (ParamMode::Slots, Some(n)) => Expr::Param(n),
                    _ => {
                        return Err(DataflowError::BadArgument(format!(
                            "unexpected placeholder {p}"
                        )))
                    }
                },
                other => Expr::Literal(literal(other)?),
            },
            E::TypedString { data_type, value } => {
                let v = Value::text(value);
                match data_type {
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
                }
            }
            // `_binary'..'` is a binary string; any other introducer
            // (`_utf8mb4`, ...) a text one, made of the literal's bytes
            // when they are UTF-8 (`_utf8mb4 X'C3A9'` is 'é').
            E::IntroducedString { introducer, value } => {
                let v = literal(value)?;
                let binary = introducer.eq_ignore_ascii_case("_binary");
                Expr::Literal(match v {
                    Value::Text(t) if binary => Value::bytes(t.as_bytes()),
                    Value::Bytes(b) if !binary => match std::str::from_utf8(&b) {
                        Ok(t) => Value::text(t),
                        Err(_) => Value::Bytes(b),
                    },
                    other => other,
                })
            }
            E::Nested(x) => self.compile(x)?,
            E::Collate { expr, .. } => self.compile(expr)?,
            E::UnaryOp { op, expr } => {
                let x = match hex_number(expr) {
                    Some(n) if *op == ast::UnaryOperator::Minus => Expr::Literal(n),
                    _ => self.compile(expr)?,
                };
                match op {
                    ast::UnaryOperator::Minus => match x {
                        Expr::Literal(Value::Int(i)) if i != i64::MIN => {
                            Expr::Literal(Value::Int(-i))
                        }
                        Expr::Literal(Value::Decimal(d)) => Expr::Literal(Value::Decimal(-d)),
                        Expr::Literal(Value::Double(d)) => Expr::Literal(Value::Double(-d)),
                        Expr::Literal(Value::UInt(u)) if u == 1u64 << 63 => {
                            Expr::Literal(Value::Int(i64::MIN))
                        }
                        x => Expr::Neg(b(x)),
                    },
                    ast::UnaryOperator::Plus => x,
                    ast::UnaryOperator::Not => Expr::Not(b(x)),
                    ast::UnaryOperator::PGBitwiseNot => Expr::BitNot(b(x)),
                    other => return Err(unsupported(format!("operator {other}"))),
                }
            }
            E::BinaryOp { left, op, right } => {
                use ast::BinaryOperator as B;
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
                let (l, r) = if is_arith(op) {
                    (l, r)
                } else {
                    // Literals on both sides: the binary one wins.
                    let text = |x: &Expr| {
                        !matches!(x, Expr::Literal(_)) && x.result_type(&frame).0.is_text()
                    };
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
                    B::Plus
                    | B::Minus
                    | B::Multiply
                    | B::MyIntegerDivide
                    | B::DuckIntegerDivide => (unsigned(l), unsigned(r)),
                    _ => (l, r),
                };
                let arith = |o: ArithOp| Expr::Arith(o, b(l.clone()), b(r.clone()));
                let cmp = |o: CmpOp| Expr::Cmp {
                    op: o,
                    left: b(l.clone()),
                    right: b(r.clone()),
                    collation: self.pair_collation(left, &l, right, &r),
                };
                match op {
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
                }
            }
            E::IsNull(x) => Expr::IsNull {
                expr: b(self.compile(x)?),
                negated: false,
            },
            E::IsNotNull(x) => Expr::IsNull {
                expr: b(self.compile(x)?),
                negated: true,
            },
            E::IsUnknown(x) => Expr::IsNull {
                expr: b(self.compile(x)?),
                negated: false,
            },
            E::IsNotUnknown(x) => Expr::IsNull {
                expr: b(self.compile(x)?),
                negated: true,
            },
            E::IsTrue(x) => Expr::IsBool {
                expr: b(self.compile(x)?),
                value: true,
                negated: false,
            },
            E::IsNotTrue(x) => Expr::IsBool {
                expr: b(self.compile(x)?),
                value: true,
                negated: true,
            },
            E::IsFalse(x) => Expr::IsBool {
                expr: b(self.compile(x)?),
                value: false,
                negated: false,
            },
            E::IsNotFalse(x) => Expr::IsBool {
                expr: b(self.compile(x)?),
                value: false,
                negated: true,
            },
            E::IsDistinctFrom(x, y) | E::IsNotDistinctFrom(x, y) => {
                let (cx, cy) = (self.compile(x)?, self.compile(y)?);
                let coll = self.pair_collation(x, &cx, y, &cy);
                let eq = Expr::Cmp {
                    op: CmpOp::NullSafeEq,
                    left: b(cx),
                    right: b(cy),
                    collation: coll,
                };
                if matches!(e, E::IsDistinctFrom(..)) {
                    Expr::Not(b(eq))
                } else {
                    eq
                }
            }
            E::InList {
                expr,
                list,
                negated,
            } => {
                let members: Vec<&ast::Expr> =
                    std::iter::once(&**expr).chain(list.iter()).collect();
                let mut compiled = self.compile_comparison_group(&members)?.into_iter();
                let x = compiled.next().unwrap_or(Expr::Literal(Value::Null));
                let mut coll = self.collation_of(expr, &x);
                let text = !matches!(x, Expr::Literal(_))
                    && x.result_type(&self.frame_types()).0.is_text();
                let mut items = Vec::new();
                for (item, c) in list.iter().zip(compiled) {
                    let c = coerce_literal(item, c, text);
                    if coll.is_none() {
                        coll = self.collation_of(item, &c);
                    }
                    items.push(c);
                }
                Expr::InList {
                    expr: b(x),
                    list: items,
                    negated: *negated,
                    collation: coll.unwrap_or_default(),
                }
            }
            E::Between {
                expr,
                negated,
                low,
                high,
            } => {
                let [x, lo, hi]: [Expr; 3] = self
                    .compile_comparison_group(&[expr, low, high])?
                    .try_into()
                    .map_err(|_| DataflowError::Internal("BETWEEN operands".into()))?;
                let coll = self.collation_of(expr, &x).unwrap_or_default();
                Expr::Between {
                    expr: b(x),
                    low: b(lo),
                    high: b(hi),
                    negated: *negated,
                    collation: coll,
                }
            }
            E::Like {
                negated,
                any: false,
                expr,
                pattern,
                escape_char,
            }
            | E::ILike {
                negated,
                any: false,
                expr,
                pattern,
                escape_char,
            } => {
                let x = self.compile(expr)?;
                let p = self.compile(pattern)?;
                let mut coll = self.pair_collation(expr, &x, pattern, &p);
                if matches!(e, E::ILike { .. }) {
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
                Expr::Like {
                    expr: b(x),
                    pattern: b(p),
                    escape,
                    negated: *negated,
                    collation: coll,
                }
            }
            E::RLike {
                negated,
                expr,
                pattern,
                ..
            } => {
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
                if *negated {
                    Expr::Not(b(m))
                } else {
                    m
                }
            }
            E::Case {
                operand,
                conditions,
                results,
                else_result,
            } => {
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
                Expr::Case {
                    operand: op.map(b),
                    whens,
                    otherwise,
                    collation: coll,
                }
            }
            // CAST(x AS JSON): x read as a JSON document, printed as JSON.
            E::Cast {
                expr,
                data_type: ast::DataType::JSON,
                format: None,
                ..
            } => Expr::Call(
                Func::JsonExtract,
                vec![self.compile(expr)?, Expr::Literal(Value::text("$"))],
            ),
            E::Cast {
                expr,
                data_type,
                format: None,
                ..
            } => {
                let target = cast_type(data_type)?;
                let numeric = matches!(
                    target,
                    CastType::Signed
                        | CastType::Unsigned
                        | CastType::Decimal { .. }
                        | CastType::Double
                );
                let x = match hex_number(expr) {
                    Some(n) if numeric => Expr::Literal(n),
                    _ => self.compile(expr)?,
                };
                let target = match target {
                    CastType::Char => self.temporal_text_cast(&x).unwrap_or(target),
                    _ => target,
                };
                Expr::Cast(b(x), target)
            }
            E::Convert {
                expr,
                data_type: Some(dt),
                charset: None,
                ..
            } => Expr::Cast(b(self.compile(expr)?), cast_type(dt)?),
            // CONVERT(x USING binary) is a binary string; USING another
            // character set, text.
            E::Convert {
                expr,
                data_type: None,
                charset,
                ..
            } => {
                let binary = charset
                    .as_ref()
                    .is_some_and(|c| c.to_string().eq_ignore_ascii_case("binary"));
                let target = if binary {
                    CastType::Binary
                } else {
                    CastType::Char
                };
                Expr::Cast(b(self.compile(expr)?), target)
            }
            E::Ceil {
                expr,
                field: ast::CeilFloorKind::DateTimeField(ast::DateTimeField::NoDateTime),
            } => Expr::Call(Func::Ceil, vec![self.compile(expr)?]),
            E::Floor {
                expr,
                field: ast::CeilFloorKind::DateTimeField(ast::DateTimeField::NoDateTime),
            } => Expr::Call(Func::Floor, vec![self.compile(expr)?]),
            E::Substring {
                expr,
                substring_from,
                substring_for,
                ..
            } => {
                let mut args = vec![self.compile(expr)?];
                args.push(match substring_from {
                    Some(f) => self.compile(f)?,
                    None => Expr::Literal(Value::Int(1)),
                });
                if let Some(f) = substring_for {
                    args.push(self.compile(f)?);
                }
                Expr::Call(Func::Substring, args)
            }
            E::Trim {
                expr,
                trim_where,
                trim_what,
                trim_characters: None,
            } => {
                if trim_what.is_some() {
                    return Err(unsupported("TRIM(... FROM ...)"));
                }
                let f = match trim_where {
                    None | Some(ast::TrimWhereField::Both) => Func::Trim,
                    Some(ast::TrimWhereField::Leading) => Func::LTrim,
                    Some(ast::TrimWhereField::Trailing) => Func::RTrim,
                };
                Expr::Call(f, vec![self.compile(expr)?])
            }
            E::Extract { field, expr, .. } => {
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
                Expr::Call(f, vec![self.compile(expr)?])
            }
            E::Function(f) => self.function(f)?,
            E::InSubquery { .. } | E::Exists { .. } | E::Subquery(_) => {
                return Err(unsupported("subquery in this position"))
            }
            other => return Err(unsupported(format!("expression {other}"))),
        })
    }

    fn column(&self, ids: &[ast::Ident]) -> Result<Expr> {
        if let (Some(aliases), [one]) = (self.aliases, ids) {
            let key = one.value.to_ascii_lowercase();
            if let Some(x) = aliases.get(&key) {
                if self.scope.resolve(ids).is_err() || self.post.is_some() {
                    return Ok(x.clone());
                }
            }
        }
        let i = self.scope.resolve(ids)?;
        match self.post {
            None => Ok(Expr::Column(i)),
            Some(p) => match p.by_col.get(&i) {
                Some(&o) => Ok(Expr::Column(o)),
                None => Err(unsupported(format!(
                    "column '{}' that is not in GROUP BY",
                    ids.iter()
                        .map(|i| i.value.clone())
                        .collect::<Vec<_>>()
                        .join(".")
                ))),
            },
        }
    }

    /// Compiles operands compared with each other (IN, BETWEEN, GREATEST):
    /// hex literals among them are numbers when another operand is one.
    fn compile_comparison_group(&self, exprs: &[&ast::Expr]) -> Result<Vec<Expr>> {
        let compiled: Vec<Expr> = exprs
            .iter()
            .map(|e| self.compile(e))
            .collect::<Result<_>>()?;
        let frame = self.frame_types();
        let numeric = exprs
            .iter()
            .zip(&compiled)
            .any(|(a, c)| hex_number(a).is_none() && is_numeric_type(&c.result_type(&frame).0));
        Ok(exprs
            .iter()
            .zip(compiled)
            .map(|(a, c)| match hex_number(a) {
                Some(n) if numeric => Expr::Literal(n),
                _ => c,
            })
            .collect())
    }

    fn interval(&self, iv: &ast::Interval) -> Result<(Expr, i64)> {
        let unit = match &iv.leading_field {
            Some(ast::DateTimeField::Microsecond) => func::UNIT_MICROSECOND,
            Some(ast::DateTimeField::Second) => func::UNIT_SECOND,
            Some(ast::DateTimeField::Minute) => func::UNIT_MINUTE,
            Some(ast::DateTimeField::Hour) => func::UNIT_HOUR,
            Some(ast::DateTimeField::Day) => func::UNIT_DAY,
            Some(ast::DateTimeField::Week(_)) => func::UNIT_WEEK,
            Some(ast::DateTimeField::Month) => func::UNIT_MONTH,
            Some(ast::DateTimeField::Quarter) => func::UNIT_QUARTER,
            Some(ast::DateTimeField::Year) => func::UNIT_YEAR,
            other => return Err(unsupported(format!("INTERVAL unit {other:?}"))),
        };
        if iv.last_field.is_some() {
            return Err(unsupported("compound INTERVAL"));
        }
        Ok((self.compile(&iv.value)?, unit))
    }

    fn function(&self, f: &ast::Function) -> Result<Expr> {
        let name = f.name.to_string().to_ascii_lowercase();
        if f.over.is_some() || f.filter.is_some() || !f.within_group.is_empty() {
            return Err(unsupported(format!("window or filtered function {name}")));
        }
        let args: Vec<&ast::Expr> = match &f.args {
            ast::FunctionArguments::None => vec![],
            ast::FunctionArguments::Subquery(_) => return Err(unsupported("subquery argument")),
            ast::FunctionArguments::List(l) => {
                if l.duplicate_treatment.is_some() || !l.clauses.is_empty() {
                    return Err(unsupported(format!("{name}(DISTINCT/ORDER BY ...) here")));
                }
                let mut v = Vec::new();
                for a in &l.args {
                    match a {
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(x)) => v.push(x),
                        _ => return Err(unsupported(format!("argument {a} of {name}"))),
                    }
                }
                v
            }
        };
        if aggregate_name(&ast::Expr::Function(f.clone())).is_some() {
            return Err(DataflowError::Unsupported(format!(
                "aggregate {name} in this position"
            )));
        }
        if name == "values" || name == "value" {
            let [ast::Expr::Identifier(id)] = args.as_slice() else {
                return Err(DataflowError::BadArgument(
                    "VALUES() takes a column name".into(),
                ));
            };
            if !self.proposed {
                return Ok(Expr::Literal(Value::Null));
            }
            return Ok(Expr::Proposed(
                self.scope.resolve(std::slice::from_ref(id))?,
            ));
        }
        if name == "date_add" || name == "date_sub" || name == "adddate" || name == "subdate" {
            if let [d, ast::Expr::Interval(iv)] = args.as_slice() {
                let (amount, unit) = self.interval(iv)?;
                let amount = if name.contains("sub") {
                    Expr::Neg(Box::new(amount))
                } else {
                    amount
                };
                return Ok(Expr::Call(
                    Func::DateAdd,
                    vec![self.compile(d)?, amount, Expr::Literal(Value::Int(unit))],
                ));
            }
            if let [d, n] = args.as_slice() {
                let amount = self.compile(n)?;
                let amount = if name.contains("sub") {
                    Expr::Neg(Box::new(amount))
                } else {
                    amount
                };
                return Ok(Expr::Call(
                    Func::DateAdd,
                    vec![
                        self.compile(d)?,
                        amount,
                        Expr::Literal(Value::Int(func::UNIT_DAY)),
                    ],
                ));
            }
        }
        if name == "timestampdiff" {
            if let [ast::Expr::Identifier(unit), a, b] = args.as_slice() {
                let upper = unit.value.to_ascii_uppercase();
                let unit = match upper.strip_prefix("SQL_TSI_").unwrap_or(&upper) {
                    "MICROSECOND" | "FRAC_SECOND" => func::UNIT_MICROSECOND,
                    "SECOND" => func::UNIT_SECOND,
                    "MINUTE" => func::UNIT_MINUTE,
                    "HOUR" => func::UNIT_HOUR,
                    "DAY" => func::UNIT_DAY,
                    "WEEK" => func::UNIT_WEEK,
                    "MONTH" => func::UNIT_MONTH,
                    "QUARTER" => func::UNIT_QUARTER,
                    "YEAR" => func::UNIT_YEAR,
                    other => return Err(unsupported(format!("TIMESTAMPDIFF unit {other}"))),
                };
                return Ok(Expr::Call(
                    Func::TimestampDiff,
                    vec![
                        Expr::Literal(Value::Int(unit)),
                        self.compile(a)?,
                        self.compile(b)?,
                    ],
                ));
            }
        }
        let func = match name.as_str() {
            // The planner's rewrite of a scalar subquery without an aggregate.
            SINGLE_ROW_FN if args.len() == 2 => Func::SingleRow,
            _ => Func::by_name(&name, args.len())
                .ok_or_else(|| unsupported(format!("function {name}")))?,
        };
        let compiled: Vec<Expr> = match func {
            // Numeric functions read hex literals as numbers.
            Func::Abs
            | Func::Round
            | Func::Truncate
            | Func::Floor
            | Func::Ceil
            | Func::Sign
            | Func::Mod
            | Func::Pow
            | Func::Sqrt => args
                .iter()
                .map(|a| match hex_number(a) {
                    Some(n) => Ok(Expr::Literal(n)),
                    None => self.compile(a),
                })
                .collect::<Result<_>>()?,
            Func::Greatest | Func::Least => self.compile_comparison_group(&args)?,
            _ => args
                .iter()
                .map(|a| self.compile(a))
                .collect::<Result<_>>()?,
        };
        // NOW(fsp) etc. ignore their precision argument.
        let compiled = match func {
            Func::Now | Func::UtcTimestamp | Func::CurTime => vec![],
            // A declared DATETIME(n)/TIME(n) joins the string with its n
            // digits, as CAST(.. AS CHAR) prints it.
            Func::Concat | Func::ConcatWs => compiled
                .into_iter()
                .map(|a| match self.temporal_text_cast(&a) {
                    Some(cast) => Expr::Cast(Box::new(a), cast),
                    None => a,
                })
                .collect(),
            _ => compiled,
        };
        Ok(Expr::Call(func, compiled))
    }
}

impl ExprCx<'_> {
    /// The cast printing `x` as MariaDB does in a string context when it
    /// is a DATETIME/TIMESTAMP/TIME of declared precision n (exactly n
    /// fractional digits); `None` for other types.
    fn temporal_text_cast(&self, x: &Expr) -> Option<CastType> {
        match x.result_type(&self.frame_types()).0 {
            SqlType::DateTime { fsp } | SqlType::Timestamp { fsp } | SqlType::Time { fsp } => {
                Some(CastType::TemporalChar { fsp })
            }
            _ => None,
        }
    }
}

fn strip_nested(e: &ast::Expr) -> &ast::Expr {
    match e {
        ast::Expr::Nested(x) => strip_nested(x),
        other => other,
    }
}

fn is_arith(op: &ast::BinaryOperator) -> bool {
    use ast::BinaryOperator as B;
    matches!(
        op,
        B::Plus
            | B::Minus
            | B::Multiply
            | B::Divide
            | B::Modulo
            | B::MyIntegerDivide
            | B::DuckIntegerDivide
            | B::BitwiseAnd
            | B::BitwiseOr
            | B::BitwiseXor
            | B::PGBitwiseXor
            | B::PGBitwiseShiftLeft
            | B::PGBitwiseShiftRight
    )
}

fn is_interval(e: &ast::Expr) -> bool {
    matches!(strip_nested(e), ast::Expr::Interval(_))
}

/// The CAST target for a SQL type.
pub(crate) fn cast_type(t: &ast::DataType) -> Result<CastType> {
    use ast::DataType as D;
    Ok(match t {
        D::Int(_)
        | D::Integer(_)
        | D::BigInt(_)
        | D::TinyInt(_)
        | D::SmallInt(_)
        | D::MediumInt(_) => CastType::Signed,
        D::UnsignedInt(_) | D::UnsignedInteger(_) | D::UnsignedBigInt(_) => CastType::Unsigned,
        D::Char(_) | D::Varchar(_) | D::Text | D::String(_) | D::Nvarchar(_) | D::Character(_) => {
            CastType::Char
        }
        D::Binary(_) | D::Varbinary(_) | D::Blob(_) => CastType::Binary,
        D::Decimal(info) | D::Numeric(info) | D::Dec(info) => {
            let (p, s) = match info {
                ast::ExactNumberInfo::None => (10, 0),
                ast::ExactNumberInfo::Precision(p) => (*p, 0),
                ast::ExactNumberInfo::PrecisionAndScale(p, s) => (*p, *s),
            };
            if p > 65 || s > 30 || s > p {
                return Err(DataflowError::BadArgument(format!("bad DECIMAL({p},{s})")));
            }
            CastType::Decimal {
                precision: p as u8,
                scale: s as u8,
            }
        }
        D::Double | D::DoublePrecision | D::Float(_) | D::Real | D::Float8 | D::Float64 => {
            CastType::Double
        }
        D::Date => CastType::Date,
        D::Datetime(_) | D::Timestamp(..) => CastType::DateTime,
        D::Time(..) => CastType::Time,
        D::Custom(name, _) => {
            let n = name.to_string().to_ascii_lowercase();
            match n.as_str() {
                "signed" | "signed integer" => CastType::Signed,
                "unsigned" | "unsigned integer" => CastType::Unsigned,
                _ => return Err(unsupported(format!("CAST AS {t}"))),
            }
        }
        D::Unspecified => CastType::Signed,
        other => return Err(unsupported(format!("CAST AS {other}"))),
    })
}

/// The column a string expression takes its collation from, as MariaDB
/// derives it: the column itself, or the first argument of a function that
/// returns (part of) its first argument (`RTRIM(col)`, `UPPER(col)`,
/// `SUBSTRING(col, ..)`); None for anything else (it carries the
/// connection's collation).
pub(crate) fn collation_source(e: &Expr) -> Option<&Expr> {
    match e {
        Expr::Column(_) => Some(e),
        Expr::Call(
            Func::Upper
            | Func::Lower
            | Func::Trim
            | Func::LTrim
            | Func::RTrim
            | Func::Substring
            | Func::Left
            | Func::Right
            | Func::Replace
            | Func::Reverse
            | Func::Lpad
            | Func::Rpad,
            args,
        ) => args.first().and_then(collation_source),
        _ => None,
    }
}

/// The collation of string expression `e` over columns whose collations
/// `column` gives (see [`collation_source`]); GeneralCi when it has none.
pub(crate) fn derived_collation(e: &Expr, column: impl Fn(usize) -> Collation) -> Collation {
    match collation_source(e) {
        Some(Expr::Column(c)) => column(*c),
        _ => Collation::GeneralCi,
    }
}
