//! The expression tree: [`Expr`], its operators and CAST targets, the
//! context it is evaluated in, and walking and rewriting a tree.

use std::fmt;

use ladle_common::{Collation, Value};

use super::byte_charset::ByteCharset;
use super::func::Func;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArithOp {
    Add,
    Sub,
    Mul,
    Div,
    IntDiv,
    Mod,
    BitAnd,
    BitOr,
    BitXor,
    Shl,
    Shr,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    /// `<=>`: NULL-safe equality.
    NullSafeEq,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LogicOp {
    And,
    Or,
    Xor,
}

/// A CAST target.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum CastType {
    Signed,
    Unsigned,
    Char,
    /// `CHAR(n)`: at most `n` characters (longer text is cut), typed
    /// `VARCHAR(n)`.
    CharN(u32),
    /// CHAR of a DATETIME/TIMESTAMP/TIME of precision `fsp`: as MariaDB
    /// prints it, with exactly `fsp` fractional digits (`.500` for (3)).
    TemporalChar {
        fsp: u8,
    },
    Decimal {
        precision: u8,
        scale: u8,
    },
    Double,
    Date,
    DateTime,
    Time,
    Binary,
    /// `CONVERT(x USING latin1)` / `USING ascii`: text of the characters
    /// the set has, each other one `?` (see `byte_charset`).
    Recode(ByteCharset),
    /// Not SQL's: the bytes of [`CastType::Recode`]'s text in its set, which
    /// the planner puts under a function counting bytes (LENGTH, HEX).
    Encode(ByteCharset),
    /// Not SQL's: a BIT(`width`) value as a string context reads it (its
    /// bytes: the number's last ceil(width / 8) bytes, big-endian), typed
    /// `VARBINARY(width)` as in MariaDB. The planner puts it over a BIT
    /// operand of a string function or a cast to a string.
    BitBytes {
        width: u8,
    },
    /// Not SQL's: a DECIMAL quotient, or arithmetic over one, rounded
    /// (half away from zero) or padded to the scale its type shows, as
    /// MariaDB rounds such a value where it leaves arithmetic (`a / b * 100`
    /// multiplies the quotient's full digits; the product is shown with
    /// `b`'s scale + 4). The planner puts it over the outermost arithmetic
    /// only (see `planner::expr::operators`); any other value passes.
    /// Over an aggregate's column it also rounds an exact AVG's quotient
    /// digits, and on a DOUBLE it carries the decimals the value is shown
    /// with (`SUM(ROUND(x, 1))`: 1), see `planner::aggregate`.
    Shown {
        scale: u8,
    },
}

/// A compiled scalar expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// The value of input column `n`.
    Column(usize),
    Literal(Value),
    /// A read-time parameter slot (bound when a reader is queried).
    Param(usize),
    /// `VALUES(col)` in ON DUPLICATE KEY UPDATE: column `n` of the proposed row.
    Proposed(usize),
    Neg(Box<Expr>),
    Not(Box<Expr>),
    BitNot(Box<Expr>),
    Arith(ArithOp, Box<Expr>, Box<Expr>),
    Cmp {
        op: CmpOp,
        left: Box<Expr>,
        right: Box<Expr>,
        collation: Collation,
    },
    Logic(LogicOp, Box<Expr>, Box<Expr>),
    IsNull {
        expr: Box<Expr>,
        negated: bool,
    },
    /// `IS [NOT] TRUE` (`value` true) and `IS [NOT] FALSE` (`value` false).
    IsBool {
        expr: Box<Expr>,
        value: bool,
        negated: bool,
    },
    InList {
        expr: Box<Expr>,
        list: Vec<Expr>,
        negated: bool,
        collation: Collation,
    },
    Between {
        expr: Box<Expr>,
        low: Box<Expr>,
        high: Box<Expr>,
        negated: bool,
        collation: Collation,
    },
    Like {
        expr: Box<Expr>,
        pattern: Box<Expr>,
        escape: char,
        negated: bool,
        collation: Collation,
    },
    Case {
        operand: Option<Box<Expr>>,
        whens: Vec<(Expr, Expr)>,
        otherwise: Option<Box<Expr>>,
        collation: Collation,
    },
    Cast(Box<Expr>, CastType),
    Call(Func, Vec<Expr>),
}

/// What an expression reads while it is evaluated: the input row, the
/// bound parameter slots and, in ON DUPLICATE KEY UPDATE, the proposed row.
pub(crate) struct Ctx<'a> {
    pub row: &'a [Value],
    pub params: &'a [Value],
    pub proposed: Option<&'a [Value]>,
    /// Reading a column that holds an overflow marker (a computed value
    /// that overflowed, `out_of_range_marker`) fails with its error, as
    /// MySQL's evaluation of that value would: a WHERE over a derived
    /// table's computed column (see `ops::Filter`).
    pub markers_fail: bool,
}

impl Expr {
    /// Whether the expression reads the clock or randomness (its value is
    /// not a function of its inputs).
    pub fn is_volatile(&self) -> bool {
        let mut v = false;
        self.walk(&mut |e| {
            if let Expr::Call(f, _) = e {
                if f.is_volatile() {
                    v = true;
                }
            }
        });
        v
    }

    /// [`Self::is_volatile`] but for a scalar subquery's row-count check
    /// ([`Func::SingleRow`]), which a projection that maintains state may
    /// compute (several rows become a marker a read fails on).
    pub fn is_volatile_besides_single_row(&self) -> bool {
        let mut v = false;
        self.walk(&mut |e| {
            if let Expr::Call(f, _) = e {
                if f.is_volatile() && *f != Func::SingleRow {
                    v = true;
                }
            }
        });
        v
    }

    pub fn has_params(&self) -> bool {
        let mut v = false;
        self.walk(&mut |e| {
            if matches!(e, Expr::Param(_)) {
                v = true;
            }
        });
        v
    }

    /// Whether the expression reads nothing of the row (no column, nor
    /// ON DUPLICATE KEY UPDATE's proposed row): a literal, a parameter,
    /// or a function of those.
    pub fn reads_no_row(&self) -> bool {
        let mut reads = false;
        self.walk(&mut |e| reads |= matches!(e, Expr::Column(_) | Expr::Proposed(_)));
        !reads
    }

    /// Input columns the expression reads.
    pub fn columns(&self) -> Vec<usize> {
        let mut out = Vec::new();
        self.walk(&mut |e| {
            if let Expr::Column(i) = e {
                if !out.contains(i) {
                    out.push(*i);
                }
            }
        });
        out
    }

    pub fn walk(&self, f: &mut dyn FnMut(&Expr)) {
        f(self);
        for ch in self.children() {
            ch.walk(f);
        }
    }

    fn children(&self) -> Vec<&Expr> {
        use Expr::*;
        match self {
            Column(_) | Literal(_) | Param(_) | Proposed(_) => vec![],
            Neg(e) | Not(e) | BitNot(e) | Cast(e, _) => vec![e],
            IsNull { expr, .. } | IsBool { expr, .. } => vec![expr],
            Arith(_, l, r) | Logic(_, l, r) => vec![l, r],
            Cmp { left, right, .. } => vec![left, right],
            InList { expr, list, .. } => std::iter::once(&**expr).chain(list.iter()).collect(),
            Between {
                expr, low, high, ..
            } => vec![expr, low, high],
            Like { expr, pattern, .. } => vec![expr, pattern],
            Case {
                operand,
                whens,
                otherwise,
                ..
            } => {
                let mut v: Vec<&Expr> = Vec::new();
                if let Some(o) = operand {
                    v.push(o);
                }
                for (a, b) in whens {
                    v.push(a);
                    v.push(b);
                }
                if let Some(o) = otherwise {
                    v.push(o);
                }
                v
            }
            Call(_, args) => args.iter().collect(),
        }
    }

    /// Rewrites column references through `map` (input position -> new
    /// expression).
    pub fn map_columns(&self, map: &dyn Fn(usize) -> Expr) -> Expr {
        use Expr::*;
        let m = |e: &Expr| Box::new(e.map_columns(map));
        match self {
            Column(i) => map(*i),
            Literal(_) | Param(_) | Proposed(_) => self.clone(),
            Neg(e) => Neg(m(e)),
            Not(e) => Not(m(e)),
            BitNot(e) => BitNot(m(e)),
            Cast(e, t) => Cast(m(e), t.clone()),
            IsNull { expr, negated } => IsNull {
                expr: m(expr),
                negated: *negated,
            },
            IsBool {
                expr,
                value,
                negated,
            } => IsBool {
                expr: m(expr),
                value: *value,
                negated: *negated,
            },
            Arith(op, l, r) => Arith(*op, m(l), m(r)),
            Logic(op, l, r) => Logic(*op, m(l), m(r)),
            Cmp {
                op,
                left,
                right,
                collation,
            } => Cmp {
                op: *op,
                left: m(left),
                right: m(right),
                collation: *collation,
            },
            InList {
                expr,
                list,
                negated,
                collation,
            } => InList {
                expr: m(expr),
                list: list.iter().map(|e| e.map_columns(map)).collect(),
                negated: *negated,
                collation: *collation,
            },
            Between {
                expr,
                low,
                high,
                negated,
                collation,
            } => Between {
                expr: m(expr),
                low: m(low),
                high: m(high),
                negated: *negated,
                collation: *collation,
            },
            Like {
                expr,
                pattern,
                escape,
                negated,
                collation,
            } => Like {
                expr: m(expr),
                pattern: m(pattern),
                escape: *escape,
                negated: *negated,
                collation: *collation,
            },
            Case {
                operand,
                whens,
                otherwise,
                collation,
            } => Case {
                operand: operand.as_ref().map(|o| m(o)),
                whens: whens
                    .iter()
                    .map(|(a, b)| (a.map_columns(map), b.map_columns(map)))
                    .collect(),
                otherwise: otherwise.as_ref().map(|o| m(o)),
                collation: *collation,
            },
            Call(f, args) => Call(*f, args.iter().map(|e| e.map_columns(map)).collect()),
        }
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use Expr::*;
        match self {
            Column(i) => write!(f, "#{i}"),
            Literal(v) => match v {
                Value::Text(s) => write!(f, "'{s}'"),
                other => write!(f, "{other}"),
            },
            Param(i) => write!(f, "?{i}"),
            Proposed(i) => write!(f, "VALUES(#{i})"),
            Neg(e) => write!(f, "-({e})"),
            Not(e) => write!(f, "NOT ({e})"),
            BitNot(e) => write!(f, "~({e})"),
            Arith(op, l, r) => write!(f, "({l} {op:?} {r})"),
            Cmp {
                op, left, right, ..
            } => write!(f, "({left} {op:?} {right})"),
            Logic(op, l, r) => write!(f, "({l} {op:?} {r})"),
            IsNull { expr, negated } => {
                write!(f, "({expr} IS {}NULL)", if *negated { "NOT " } else { "" })
            }
            IsBool {
                expr,
                value,
                negated,
            } => {
                write!(
                    f,
                    "({expr} IS {}{})",
                    if *negated { "NOT " } else { "" },
                    if *value { "TRUE" } else { "FALSE" }
                )
            }
            InList {
                expr,
                list,
                negated,
                ..
            } => {
                let items: Vec<String> = list.iter().map(|e| e.to_string()).collect();
                write!(
                    f,
                    "({expr} {}IN ({}))",
                    if *negated { "NOT " } else { "" },
                    items.join(", ")
                )
            }
            Between {
                expr,
                low,
                high,
                negated,
                ..
            } => {
                write!(
                    f,
                    "({expr} {}BETWEEN {low} AND {high})",
                    if *negated { "NOT " } else { "" }
                )
            }
            Like {
                expr,
                pattern,
                negated,
                ..
            } => write!(
                f,
                "({expr} {}LIKE {pattern})",
                if *negated { "NOT " } else { "" }
            ),
            Case { .. } => write!(f, "CASE(..)"),
            Cast(e, t) => write!(f, "CAST({e} AS {t:?})"),
            Call(func, args) => {
                let items: Vec<String> = args.iter().map(|e| e.to_string()).collect();
                write!(f, "{func:?}({})", items.join(", "))
            }
        }
    }
}
