//! Between values and the SQL AST: a value as a literal that compiles back
//! to it ([`value_expr`]), and an expression's result column name
//! ([`expr_column_name`]).

use ladle_common::Value;
use sqlparser::ast;

/// A SQL literal with `v`'s value and type: temporal values as typed
/// literals (`DATE '2024-01-02'`), binary strings as hex literals, doubles
/// in exponent notation (which keeps them DOUBLE). Compiling it gives `v`
/// back.
pub fn value_expr(v: &Value) -> ast::Expr {
    let typed = |data_type: ast::DataType| ast::Expr::TypedString {
        data_type,
        value: v.to_string(),
    };
    let lit = match v {
        Value::Null => ast::Value::Null,
        Value::Int(i) => ast::Value::Number(i.to_string(), false),
        Value::UInt(u) => ast::Value::Number(u.to_string(), false),
        Value::Double(f) => ast::Value::Number(format!("{f:e}"), false),
        Value::Decimal(d) => ast::Value::Number(d.to_string(), false),
        Value::Bytes(b) => {
            ast::Value::HexStringLiteral(b.iter().map(|x| format!("{x:02X}")).collect())
        }
        Value::Text(t) => ast::Value::SingleQuotedString(t.to_string()),
        Value::Date(_) => return typed(ast::DataType::Date),
        Value::DateTime(_) => return typed(ast::DataType::Datetime(None)),
        Value::Time(_) => return typed(ast::DataType::Time(None, ast::TimezoneInfo::None)),
    };
    ast::Expr::Value(lit)
}

/// The result column name of a select-list expression without an alias:
/// its SQL text, with a `_binary X'..'` shown as `X'..'` (the shim's
/// tokenizer introduces every `X'..'` literal, see `shim::sqltext`, and
/// MariaDB names the column as the literal was written).
pub fn expr_column_name(expr: &ast::Expr) -> String {
    // A string literal is named by its text, unquoted (MySQL's).
    if let ast::Expr::Value(ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s)) =
        expr
    {
        return s.clone();
    }
    // `X'..'` as the tokenizer introduced it.
    let plain_hex = |e: &ast::Expr| match e {
        ast::Expr::IntroducedString {
            introducer,
            value: v @ ast::Value::HexStringLiteral(_),
        } if introducer.eq_ignore_ascii_case("_binary") => Some(ast::Expr::Value(v.clone())),
        _ => None,
    };
    let mut found = false;
    let _ = ast::visit_expressions(expr, |e| {
        found |= plain_hex(e).is_some();
        std::ops::ControlFlow::<()>::Continue(())
    });
    if !found {
        return expr.to_string();
    }
    let mut plain = expr.clone();
    let _ = ast::visit_expressions_mut(&mut plain, |e| {
        if let Some(hex) = plain_hex(e) {
            *e = hex;
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    plain.to_string()
}

/// The fixed decimals MariaDB gives a DOUBLE select-list expression by its
/// text alone: ROUND(x) and FLOOR/CEILING(x) 0, ROUND(x, n) and
/// TRUNCATE(x, n) n (0 for a negative n); `None` for any other. For an
/// item that reads its group's column (`GROUP BY ROUND(x, 1)`), where
/// `Expr::fixed_decimals` sees only that column.
pub fn fixed_decimals(e: &ast::Expr) -> Option<u8> {
    fn strip_nested(mut e: &ast::Expr) -> &ast::Expr {
        while let ast::Expr::Nested(x) = e {
            e = x;
        }
        e
    }
    let f = match strip_nested(e) {
        ast::Expr::Function(f) => f,
        // sqlparser's own nodes for FLOOR(x) and CEIL(x).
        ast::Expr::Floor { .. } | ast::Expr::Ceil { .. } => return Some(0),
        _ => return None,
    };
    let [name] = &f.name.0[..] else {
        return None;
    };
    let ast::FunctionArguments::List(l) = &f.args else {
        return None;
    };
    let places = |a: &ast::FunctionArg| -> Option<u8> {
        let ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(x)) = a else {
            return None;
        };
        match strip_nested(x) {
            ast::Expr::Value(ast::Value::Number(n, _)) => n.parse::<u8>().ok().filter(|&n| n <= 30),
            ast::Expr::UnaryOp {
                op: ast::UnaryOperator::Minus,
                expr,
            } if matches!(strip_nested(expr), ast::Expr::Value(ast::Value::Number(..))) => Some(0),
            _ => None,
        }
    };
    match (name.value.to_ascii_lowercase().as_str(), &l.args[..]) {
        ("round" | "floor" | "ceil" | "ceiling", [_]) => Some(0),
        ("round" | "truncate", [_, n]) => places(n),
        _ => None,
    }
}
