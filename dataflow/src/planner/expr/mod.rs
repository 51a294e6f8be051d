//! SQL AST expressions -> Ladle [`Expr`]: names resolved in a [`Scope`],
//! literals, columns and functions here, operators and special forms in
//! [`operators`].

mod charset;
mod json_compare;
mod operators;
mod walk;

use std::collections::HashMap;
use std::str::FromStr;

use ladle_common::{Collation, SqlType, Value};
use rust_decimal::Decimal;
use sqlparser::ast;

use super::clause::FIELD_LIST;
use crate::expr::func::{self, Lookup};
use crate::expr::{CastType, Expr, Func};
use crate::{DataflowError, FunctionName, Result};

/// The name the planner calls a WHERE's row-deciding `col IS NULL` by
/// (see `planner::zero_date`, which marks them; [`ExprCx::compile`] reads
/// them): not one a statement can write unquoted.
pub(crate) const MARKED_IS_NULL: &str = "ladle where is null";

pub(crate) use walk::{
    aggregate_name, collect_aggregates, collect_bare_columns, norm, visit_children,
};

/// One column visible to expressions.
#[derive(Clone, Debug, PartialEq)]
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
    /// Held as a table's column holds it (see `OutputColumn::stored`).
    pub stored: bool,
    /// A DECIMAL holding a quotient's full digits (an exact AVG of a
    /// scalar subquery or a window), read as `Cast(Column, Shown { scale
    /// })`: arithmetic and numeric functions take the digits, a shown
    /// value is rounded to `scale` (see [`CastType::Shown`]).
    pub shown: Option<u8>,
}

/// The columns of a relation in FROM (after joins).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Scope {
    pub cols: Vec<ScopeCol>,
    /// (left, right) positions of the columns a `JOIN .. USING (c)`
    /// merged: an unqualified `c` means the left one only,
    /// and `*` shows it once, first, as in MySQL (a qualified `t.c` or
    /// `t.*` still names the right one).
    pub coalesced: Vec<(usize, usize)>,
}

impl Scope {
    pub fn types(&self) -> Vec<(SqlType, bool)> {
        self.cols
            .iter()
            .map(|c| (c.ty.clone(), c.nullable))
            .collect()
    }

    /// Resolves `[qualifier.]name` (never to a functional key part's
    /// hidden column: a query cannot name it, as in MySQL).
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
            .filter(|(i, c)| {
                c.name.eq_ignore_ascii_case(name)
                    && qual
                        .as_ref()
                        .map_or(!self.coalesced.iter().any(|&(_, r)| r == *i), |q| {
                            *q == c.qualifier
                        })
                    && !c.name.starts_with(ladle_common::HIDDEN_COLUMN_PREFIX)
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
            0 => Err(DataflowError::UnknownColumn(full, FIELD_LIST.into())),
            _ => Err(DataflowError::AmbiguousColumn(full, FIELD_LIST.into())),
        }
    }
}

impl Scope {
    /// The positions an unqualified `*` shows, in order: a USING join's
    /// merged columns first (once, the left side's, in its order), then
    /// every other.
    pub fn wildcard_order(&self) -> Vec<usize> {
        // The merged columns in the left side's order (MariaDB's, not the
        // USING list's).
        let mut order: Vec<usize> = self.coalesced.iter().map(|&(l, _)| l).collect();
        order.sort_unstable();
        order.dedup();
        let first = order.len();
        for i in 0..self.cols.len() {
            if !order[..first].contains(&i) && !self.coalesced.iter().any(|&(_, r)| r == i) {
                order.push(i);
            }
        }
        order
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
    /// Aggregate output columns read as `Cast(Column, Shown { scale })`:
    /// an exact AVG's quotient digits, shown rounded where they leave
    /// arithmetic, and DOUBLE aggregates with fixed decimals.
    pub shown: HashMap<usize, u8>,
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

/// The SQL name under which the planner's scalar-subquery rewrite refers to
/// [`Func::SingleRow`].
pub(crate) const SINGLE_ROW_FN: &str = "__ladle_single_row";

pub(crate) fn unsupported(what: impl Into<String>) -> DataflowError {
    DataflowError::Unsupported(crate::Gap::from(what.into()))
}

/// [`unsupported`] because of NOW()/RAND() (or parameters beside them)
/// where a maintained view would freeze their value: the shim answers
/// such a statement with its clock fixed (`DataflowError::is_volatile_refusal`).
pub(crate) fn volatile(what: impl Into<String>) -> DataflowError {
    DataflowError::Unsupported(crate::Gap::volatile(what))
}

/// The built-in call `f` (named `parts`, `name` lower case) of `nargs`
/// arguments names: 1582 for a wrong argument count, 1235 for a built-in
/// Ladle does not evaluate, 1305 for a name no built-in has.
fn built_in(f: &ast::Function, parts: &[String], name: &str, nargs: usize) -> Result<Func> {
    match name {
        // The planner's rewrite of a scalar subquery without an aggregate.
        SINGLE_ROW_FN if nargs == 2 => Ok(Func::SingleRow),
        _ => match Func::by_name(name, nargs) {
            Lookup::Found(f) => Ok(f),
            Lookup::WrongArgCount => Err(DataflowError::FunctionParamCount(f.name.to_string())),
            Lookup::Unimplemented => Err(unsupported(format!("function {name}"))),
            Lookup::Unknown => Err(DataflowError::UnknownFunction(FunctionName::called(parts))),
        },
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
    // An integer past what a DECIMAL holds here (29 digits; MariaDB's 65):
    // out of range, as a sum past it is (it was 1210, "Incorrect
    // parameter").
    Decimal::from_str(s).map(Value::Decimal).map_err(|_| {
        if s.bytes().all(|b| b.is_ascii_digit()) {
            DataflowError::OutOfRange("DECIMAL value is out of range".into())
        } else {
            DataflowError::BadArgument(s.into())
        }
    })
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
            | SqlType::Bit(_)
            | SqlType::Float
            | SqlType::Double
            | SqlType::Decimal { .. }
    )
}

/// An ENUM value's index in `labels` (1-based, 0 for the empty value, NULL
/// for NULL): what MySQL sorts an ENUM column by, where Ladle holds the
/// label.
pub(crate) fn enum_index(e: &Expr, labels: &[String]) -> Expr {
    use crate::expr::CmpOp;
    let mut whens = vec![(
        Expr::IsNull {
            expr: Box::new(e.clone()),
            negated: false,
        },
        Expr::Literal(Value::Null),
    )];
    for (i, label) in labels.iter().enumerate() {
        let is_label = Expr::Cmp {
            op: CmpOp::Eq,
            left: Box::new(e.clone()),
            right: Box::new(Expr::Literal(Value::text(label))),
            collation: Collation::Binary,
        };
        whens.push((is_label, Expr::Literal(Value::Int(i as i64 + 1))));
    }
    Expr::Case {
        operand: None,
        whens,
        otherwise: Some(Box::new(Expr::Literal(Value::Int(0)))),
        collation: Collation::Binary,
    }
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

    /// Whether frame column `i` reads a base column declared NOT NULL
    /// (nullable here only because an outer join may find no row).
    fn outer_joined_not_null(&self, i: usize) -> bool {
        if self.post.is_some() {
            return false;
        }
        self.scope
            .cols
            .get(i)
            .and_then(|c| c.origin.as_ref())
            .and_then(|o| o.table.columns.get(o.column))
            .is_some_and(|c| !c.nullable)
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

    /// `x` as the number MySQL reads in a numeric context (arithmetic,
    /// CAST to a number, SUM, comparison with a number): an ENUM column's
    /// label index; anything else unchanged.
    pub(crate) fn enum_as_number(&self, x: Expr) -> Expr {
        match &x {
            Expr::Column(i) => match self.col_info(*i).0 {
                SqlType::Enum(labels) => enum_index(&x, &labels),
                _ => x,
            },
            _ => x,
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
                return Ok(match post.shown.get(&i) {
                    Some(&scale) => {
                        Expr::Cast(Box::new(Expr::Column(i)), CastType::Shown { scale })
                    }
                    None => Expr::Column(i),
                });
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
            E::Value(v) => self.value(v)?,
            E::TypedString { data_type, value } => self.typed_string(data_type, value)?,
            E::IntroducedString { introducer, value } => {
                self.introduced_string(introducer, value)?
            }
            E::Nested(x) => self.compile(x)?,
            E::Collate { expr, .. } => self.compile(expr)?,
            E::UnaryOp { op, expr } => self.unary_op(op, expr)?,
            E::BinaryOp { left, op, right } => self.binary_op(left, op, right)?,
            E::IsNull(x) | E::IsUnknown(x) => self.is_null(x, false)?,
            E::IsNotNull(x) | E::IsNotUnknown(x) => self.is_null(x, true)?,
            E::IsTrue(x) => self.is_bool(x, true, false)?,
            E::IsNotTrue(x) => self.is_bool(x, true, true)?,
            E::IsFalse(x) => self.is_bool(x, false, false)?,
            E::IsNotFalse(x) => self.is_bool(x, false, true)?,
            E::IsDistinctFrom(x, y) | E::IsNotDistinctFrom(x, y) => {
                self.is_distinct_from(x, y, matches!(e, E::IsDistinctFrom(..)))?
            }
            E::InList {
                expr,
                list,
                negated,
            } => self.in_list(expr, list, *negated)?,
            E::Between {
                expr,
                negated,
                low,
                high,
            } => self.between(expr, *negated, low, high)?,
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
            } => self.like(
                *negated,
                expr,
                pattern,
                escape_char.as_deref(),
                matches!(e, E::ILike { .. }),
            )?,
            E::RLike {
                negated,
                expr,
                pattern,
                ..
            } => self.rlike(*negated, expr, pattern)?,
            E::Case {
                operand,
                conditions,
                results,
                else_result,
            } => self.branches_as_common_type(self.case(
                operand.as_deref(),
                conditions,
                results,
                else_result.as_deref(),
            )?),
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
            } => self.cast(expr, data_type)?,
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
            } => self.convert_using(expr, charset.as_ref())?,
            E::Ceil {
                expr,
                field: ast::CeilFloorKind::DateTimeField(ast::DateTimeField::NoDateTime),
            } => Expr::Call(Func::Ceil, vec![self.exact_decimal(self.compile(expr)?)]),
            E::Floor {
                expr,
                field: ast::CeilFloorKind::DateTimeField(ast::DateTimeField::NoDateTime),
            } => Expr::Call(Func::Floor, vec![self.exact_decimal(self.compile(expr)?)]),
            E::Substring {
                expr,
                substring_from,
                substring_for,
                ..
            } => self.substring(expr, substring_from.as_deref(), substring_for.as_deref())?,
            E::Trim {
                expr,
                trim_where,
                trim_what,
                trim_characters: None,
            } => self.trim(expr, trim_where.as_ref(), trim_what.as_deref())?,
            E::Extract { field, expr, .. } => self.extract(field, expr)?,
            E::Function(f) => self.branches_as_common_type(self.function(f)?),
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
        let read = |c: usize| match self.scope.cols[i].shown {
            Some(scale) => Expr::Cast(Box::new(Expr::Column(c)), CastType::Shown { scale }),
            None => Expr::Column(c),
        };
        match self.post {
            None => Ok(read(i)),
            Some(p) => match p.by_col.get(&i) {
                Some(&o) => Ok(read(o)),
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
                // An ENUM among numbers compares by its index.
                _ if numeric => self.enum_as_number(c),
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

    /// The calls compiled as forms of their own: ANY_VALUE(x) (MySQL's;
    /// MariaDB 10.11 has none) is x (grouped, a column it reads is read as
    /// any other bare column, the group's MIN: see `planner::aggregate`;
    /// sql_mode=ONLY_FULL_GROUP_BY lets it through); ISNULL(x) is `x IS
    /// NULL`; VALUES(column) is the row an upsert proposes. `None`: any
    /// other call.
    fn special_form(
        &self,
        f: &ast::Function,
        name: &str,
        args: &[&ast::Expr],
    ) -> Result<Option<Expr>> {
        match (name, args) {
            ("any_value", [x]) => return self.compile(x).map(Some),
            ("any_value", _) => return Err(DataflowError::FunctionParamCount(f.name.to_string())),
            ("isnull", [x]) => return self.is_null(x, false).map(Some),
            ("charset" | "collation", [x]) => return self.charset_function(name, x).map(Some),
            _ => {}
        }
        if name == "values" || name == "value" {
            let [ast::Expr::Identifier(id)] = args else {
                return Err(DataflowError::BadArgument(
                    "VALUES() takes a column name".into(),
                ));
            };
            if !self.proposed {
                return Ok(Some(Expr::Literal(Value::Null)));
            }
            return Ok(Some(Expr::Proposed(
                self.scope.resolve(std::slice::from_ref(id))?,
            )));
        }
        Ok(None)
    }

    fn function(&self, f: &ast::Function) -> Result<Expr> {
        if let [name] = &f.name.0[..] {
            if name.value == MARKED_IS_NULL {
                return self.where_is_null(f);
            }
        }
        // As MariaDB resolves it: `abs`(x) is ABS(x), `db`.f(x) is no built-in.
        let parts: Vec<String> = f.name.0.iter().map(|i| i.value.clone()).collect();
        let name = parts.join(".").to_ascii_lowercase();
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
            return Err(DataflowError::Unsupported(
                format!("aggregate {name} in this position").into(),
            ));
        }
        if let Some(x) = self.special_form(f, &name, &args)? {
            return Ok(x);
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
        let func = built_in(f, &parts, &name, args.len())?;
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
            | Func::Sqrt => self.numeric_args(func, &args)?,
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
                    None => self.bit_as_bytes(a),
                })
                .collect(),
            _ => compiled
                .into_iter()
                .enumerate()
                .map(|(i, a)| match func.reads_string_at(i) {
                    true => self.bit_as_bytes(a),
                    false => a,
                })
                .collect(),
        };
        let compiled = self.bytes_in_charset(func, &args, compiled)?;
        if matches!(
            func,
            Func::Abs | Func::Greatest | Func::Least | Func::Mod | Func::NullIf
        ) {
            return Ok(self.quotient_passed_through(func, compiled));
        }
        Ok(Expr::Call(func, compiled))
    }
}

impl ExprCx<'_> {
    /// `x`, or its bytes when it is a BIT (what a string function or a
    /// cast to a string reads of it, see [`CastType::BitBytes`]).
    pub(super) fn bit_as_bytes(&self, x: Expr) -> Expr {
        match x.result_type(&self.frame_types()).0 {
            SqlType::Bit(width) => Expr::Cast(Box::new(x), CastType::BitBytes { width }),
            _ => x,
        }
    }

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
        D::Char(Some(ast::CharacterLength::IntegerLength { length, .. }))
        | D::Varchar(Some(ast::CharacterLength::IntegerLength { length, .. }))
        | D::Character(Some(ast::CharacterLength::IntegerLength { length, .. }))
        | D::Nvarchar(Some(ast::CharacterLength::IntegerLength { length, .. })) => {
            CastType::CharN(u32::try_from(*length).unwrap_or(u32::MAX))
        }
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
