use ladle_common::{ColumnSchema, SqlType, TableSchema, Value};
use rust_decimal::Decimal as Dec;
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;

use super::*;
use crate::expr::error::EvalError;
use crate::expr::func::{builtin_names, Lookup, UNIT_DAY, UNIT_SECOND, UNIT_YEAR};

fn int(bytes: u8, unsigned: bool) -> SqlType {
    SqlType::Int {
        bytes,
        unsigned,
        display_width: None,
    }
}

/// `t (i INT, b BIGINT, u INT UNSIGNED, d DECIMAL(10,2), f DOUBLE,
/// s VARCHAR(20), dt DATETIME, y TINYINT)`.
fn table() -> TableSchema {
    let col = |n: &str, ty| ColumnSchema::new(n, ty);
    TableSchema {
        id: 1,
        database: "d".into(),
        name: "t".into(),
        columns: vec![
            col("i", int(4, false)),
            col("b", int(8, false)),
            col("u", int(4, true)),
            col(
                "d",
                SqlType::Decimal {
                    precision: 10,
                    scale: 2,
                },
            ),
            col("f", SqlType::Double),
            col("s", SqlType::VarChar(20)),
            col("dt", SqlType::DateTime { fsp: 0 }),
            col("y", int(1, false)),
        ],
        primary_key: None,
        indexes: vec![],
        version: 1,
    }
}

/// Whether the predicate `sql` over `t` may overflow.
fn may(sql: &str) -> bool {
    let t = table();
    let stmts = Parser::parse_sql(&MySqlDialect {}, &format!("SELECT 1 FROM t WHERE {sql}"))
        .expect("parse");
    let sqlparser::ast::Statement::Query(q) = &stmts[0] else {
        panic!("not a query")
    };
    let sqlparser::ast::SetExpr::Select(s) = &*q.body else {
        panic!("not a select")
    };
    let e = crate::planner::compile_row_expr(s.selection.as_ref().expect("where"), Some(&t))
        .expect("compile");
    let kinds: Vec<NumKind> = t.columns.iter().map(|c| NumKind::of_type(&c.ty)).collect();
    e.may_overflow(&kinds)
}

#[test]
fn predicates_without_arithmetic_cannot_overflow() {
    for sql in [
        "COALESCE(i, 0) >= 0",
        "COALESCE(s, 0) >= 0",
        "IFNULL(b, 1) = 1 AND IF(i > 0, f, d) < 3",
        "CASE WHEN i > 0 THEN b ELSE 0 END > 5",
        "b IS NULL OR NOT (s LIKE 'a%')",
        "b IN (1, 2, 3) AND i BETWEEN 1 AND 5",
        "CONCAT(s, 'x') = 'ax' AND LENGTH(s) > 2 AND UPPER(s) <> 'A'",
        "YEAR(dt) = 2020 AND DATE_ADD(dt, INTERVAL 1 DAY) > '2020-01-01'",
        "GREATEST(i, b) > 1 AND LEAST(f, 2) < 1",
        "CAST(i AS SIGNED) > 0 AND CAST(f AS UNSIGNED) > 0 AND CAST(f AS SIGNED) > 0",
        "CAST(b AS DECIMAL(10, 2)) > 1 AND CAST(b AS CHAR) = '1'",
        "ROUND(f, 2) > 1 AND ROUND(d, 1) > 1 AND ROUND(i, -2) > 1 AND FLOOR(f) > 1",
        "ABS(i) > 1 AND ABS(d) > 1 AND ABS(f) > 1 AND SIGN(b) = 1 AND SQRT(f) > 1",
        "SIN(f) > 0 AND LN(d) > 0 AND LOG(2, b) > 0 AND ATAN(i) > 0 AND ACOS(s) > 0",
        "-i < 0 AND -d < 0 AND -f < 0",
        "b & 1 = 1 AND b | 2 > 0 AND b ^ 3 > 0",
        "b % 3 = 1 AND MOD(i, 2) = 0 AND f % 2 > 0",
        "b / 2 > 1 AND i DIV 2 > 1",
    ] {
        assert!(!may(sql), "{sql}");
    }
}

#[test]
fn integer_arithmetic_overflows_only_past_bigint() {
    // INT (below 2^32) plus or minus anything of the kind fits BIGINT.
    for sql in [
        "i + 1 > 0",
        "i - y >= 0",
        "i + i + y - 1 > 0",
        "y * i > 0",
        "i * 1000 > 0",
        "(i - y) * 1000 > 0",
        "-(i + 1) < 0",
    ] {
        assert!(!may(sql), "{sql}");
    }
    for sql in [
        "b + 1 > 0",
        "b - 1 > 0",
        "i * u > 0",
        "i * 2147483648 > 0",
        "-b < 0",
        "b DIV -1 > 0",
        "ABS(b) > 0",
        "ROUND(b, -1) > 0",
        "CAST(i AS UNSIGNED) - 1 > 0",
        // Arithmetic with an unsigned column is unsigned: 0 - 1 fails.
        "u - 1 > 0",
        "i + u > 0",
    ] {
        assert!(may(sql), "{sql}");
    }
}

#[test]
fn decimal_double_and_string_arithmetic_may_overflow() {
    for sql in [
        "d + 1 > 0",
        "d * d > 0",
        "i / d > 0",
        "f * 10 > 0",
        "f + f > 0",
        "i / f > 0",
        "s + 1 > 0",
        "-s < 0",
        "dt + 1 > 0",
        "CAST(d AS SIGNED) > 0",
        "CAST(s AS DOUBLE) * 1 > 0",
        "FLOOR(d) > 0",
        "ROUND(d, -2) > 0",
        "POW(f, 2) > 0",
        "EXP(i) > 0",
        "COS(s) > 0",
        "COALESCE(i + b, 0) > 0",
    ] {
        assert!(may(sql), "{sql}");
    }
}

#[test]
fn kinds_of_columns_and_literals() {
    assert_eq!(NumKind::of_type(&int(4, true)), Int(32));
    assert_eq!(NumKind::of_type(&int(8, true)), BIGINT);
    assert_eq!(NumKind::of_type(&SqlType::Float), Double);
    assert_eq!(NumKind::of_type(&SqlType::Bit(3)), Any);
    assert_eq!(NumKind::of_value(&Value::Int(-1)), Int(1));
    assert_eq!(NumKind::of_value(&Value::Int(255)), Int(8));
    assert_eq!(NumKind::of_value(&Value::Int(i64::MIN)), BIGINT);
    assert_eq!(NumKind::of_value(&Value::Null), Int(0));
    assert_eq!(NumKind::of_value(&Value::Double(f64::NAN)), Any);
    assert_eq!(Int(3).or(Int(8)), Int(8));
    assert_eq!(Int(3).or(Double), Any);
}

/// Values of each kind, its extremes among them (`Any`'s: the other kinds'
/// extremes, strings, a temporal value and an overflow marker).
fn samples(k: NumKind) -> Vec<Value> {
    let mut v = vec![Value::Null, Value::Int(0), Value::Int(1), Value::Int(-1)];
    match k {
        Int(n) if n < 64 => {
            let m = (1i64 << n) - 1;
            v.extend([Value::Int(m), Value::Int(-m)]);
            if n == 0 {
                v = vec![Value::Null, Value::Int(0)];
            }
        }
        Int(_) => v.extend([
            Value::Int(i64::MIN),
            Value::Int(i64::MAX),
            Value::UInt(u64::MAX),
            Value::UInt(0),
        ]),
        Decimal => {
            v = vec![
                Value::Null,
                Value::Decimal(Dec::new(15, 1)),
                Value::Decimal(Dec::MAX),
                Value::Decimal(Dec::MIN),
                Value::Decimal(Dec::new(1, 28)),
                Value::Decimal(Dec::new(-5, 0)),
            ]
        }
        Double => {
            v = vec![
                Value::Null,
                Value::Double(0.0),
                Value::Double(-1.5),
                Value::Double(f64::MAX),
                Value::Double(-f64::MAX),
                Value::Double(1e-300),
            ]
        }
        Any => v.extend([
            Value::Int(i64::MIN),
            Value::UInt(u64::MAX),
            Value::Decimal(Dec::MAX),
            Value::Decimal(Dec::new(1, 28)),
            Value::Double(f64::MAX),
            Value::Double(1e-300),
            Value::text("1e400"),
            Value::text("-9223372036854775808"),
            Value::text("2020-02-29 12:00:00"),
            Value::bytes(b"\xff"),
            crate::expr::out_of_range_marker("BIGINT value is out of range"),
        ]),
    }
    v
}

const KINDS: [NumKind; 8] = [
    Int(0),
    Int(8),
    Int(32),
    Int(62),
    BIGINT,
    Decimal,
    Double,
    Any,
];

/// The kinds tried for each argument of a function of three arguments.
const KINDS3: [NumKind; 3] = [Int(8), BIGINT, Any];

/// Whether `v` is a value of kind `k`.
fn holds(k: NumKind, v: &Value) -> bool {
    match (k, v) {
        (_, Value::Null) | (Any, _) => true,
        (Int(64), Value::Int(_) | Value::UInt(_)) => true,
        (Int(n), Value::Int(i)) => i.unsigned_abs() < 1u64 << n,
        (Decimal, Value::Decimal(_)) => true,
        (Double, Value::Double(f)) => f.is_finite(),
        _ => false,
    }
}

/// Every tuple of `n` kinds ([`KINDS3`]'s for three).
fn kind_tuples(n: usize) -> Vec<Vec<NumKind>> {
    let kinds: &[NumKind] = if n < 3 { &KINDS } else { &KINDS3 };
    (0..n).fold(vec![vec![]], |acc, _| {
        acc.into_iter()
            .flat_map(|t| {
                kinds.iter().map(move |k| {
                    let mut t = t.clone();
                    t.push(*k);
                    t
                })
            })
            .collect()
    })
}

/// Every row of samples of `kinds`.
fn rows(kinds: &[NumKind]) -> Vec<Vec<Value>> {
    kinds.iter().fold(vec![vec![]], |acc, k| {
        let s = samples(*k);
        acc.into_iter()
            .flat_map(|r| {
                s.iter().map(move |v| {
                    let mut r = r.clone();
                    r.push(v.clone());
                    r
                })
            })
            .collect()
    })
}

/// Evaluates `e` (over columns `0..arity`) on every row of every tuple of
/// kinds: where the classification says it cannot overflow, it does not,
/// and what it returns is of the kind [`Expr::num_kind`] says. Returns
/// whether any row overflowed.
fn check(e: &Expr, arity: usize) -> bool {
    let mut overflowed = false;
    for kinds in kind_tuples(arity) {
        let may = e.may_overflow(&kinds);
        let kind = e.num_kind(&kinds);
        for row in rows(&kinds) {
            let out = crate::expr::without_warnings(|| e.eval(&row));
            match out {
                Err(EvalError::OutOfRange(m)) => {
                    assert!(may, "{e} over {kinds:?} is classified safe: {m} on {row:?}");
                    overflowed = true;
                }
                Ok(v) => assert!(
                    holds(kind, &v) || crate::expr::out_of_range_in(&v).is_some(),
                    "{e} over {kinds:?} is {v:?} on {row:?}, not {kind:?}"
                ),
                Err(_) => {}
            }
        }
    }
    overflowed
}

fn columns(n: usize) -> Vec<Expr> {
    (0..n).map(Expr::Column).collect()
}

#[test]
fn every_operator_agrees_with_evaluation() {
    use ArithOp::*;
    for op in [
        Add, Sub, Mul, Div, IntDiv, Mod, BitAnd, BitOr, BitXor, Shl, Shr,
    ] {
        let e = Expr::Arith(op, Box::new(Expr::Column(0)), Box::new(Expr::Column(1)));
        let overflowed = check(&e, 2);
        let classified = e.may_overflow(&[Any, Any]);
        assert_eq!(overflowed, classified, "{op:?}");
    }
    assert!(check(&Expr::Neg(Box::new(Expr::Column(0))), 1));
    let neg_const = Expr::Neg(Box::new(Expr::Literal(Value::UInt(1 << 63))));
    assert!(!check(&neg_const, 0));
    for ty in [
        CastType::Signed,
        CastType::Unsigned,
        CastType::Char,
        CastType::CharN(2),
        CastType::TemporalChar { fsp: 3 },
        CastType::Decimal {
            precision: 10,
            scale: 2,
        },
        CastType::Double,
        CastType::Date,
        CastType::DateTime,
        CastType::Time,
        CastType::Binary,
        CastType::BitBytes { width: 3 },
        CastType::Shown { scale: 2 },
    ] {
        let e = Expr::Cast(Box::new(Expr::Column(0)), ty.clone());
        assert_eq!(check(&e, 1), e.may_overflow(&[Any]), "{ty:?}");
    }
}

/// Every function Ladle evaluates, with every argument count it takes up
/// to three, over columns of every kind; and those the planner builds
/// with a unit literal.
#[test]
fn every_function_agrees_with_evaluation() {
    let mut calls: Vec<(Func, Vec<Expr>)> = vec![];
    for name in builtin_names::names() {
        for n in 0..=3 {
            if let Lookup::Found(f) = Func::by_name(name, n) {
                calls.push((f, columns(n)));
            }
        }
    }
    for unit in [UNIT_SECOND, UNIT_DAY, UNIT_YEAR] {
        let mut args = columns(2);
        args.push(Expr::Literal(Value::Int(unit)));
        calls.push((Func::DateAdd, args));
        calls.push((
            Func::TimestampDiff,
            vec![
                Expr::Literal(Value::Int(unit)),
                Expr::Column(0),
                Expr::Column(1),
            ],
        ));
    }
    calls.push((Func::SingleRow, columns(2)));
    for places in [-25, -19, -1, 0, 2] {
        let args = vec![Expr::Column(0), Expr::Literal(Value::Int(places))];
        calls.push((Func::Round, args.clone()));
        calls.push((Func::Truncate, args));
    }
    assert!(calls.len() > 100, "{}", calls.len());
    for (f, args) in calls {
        let arity = args.iter().filter(|a| matches!(a, Expr::Column(_))).count();
        let e = Expr::Call(f, args);
        let overflowed = check(&e, arity);
        // Classified as failing only where something of the kinds does.
        if e.may_overflow(&vec![Any; arity]) {
            assert!(overflowed, "{e} never overflowed");
        }
    }
}
