//! String literals: unescaped as MySQL does, and escaped again where a
//! parsed tree is printed back to text that is parsed later.

use sqlparser::ast;

/// The body of a string literal as the tokenizer left it (backslash escapes
/// and doubled quotes intact), unescaped as MySQL does: `\0 \b \n \r \t \Z`
/// and `\\ \' \"` are the usual characters, `\%` and `\_` stay two characters
/// (so LIKE sees an escaped wildcard), any other `\x` is `x`, and a doubled
/// `quote` is one.
pub fn unescape_literal(raw: &str, quote: char) -> String {
    if !raw.contains(['\\', quote]) {
        return raw.to_string();
    }
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('0') => out.push('\0'),
                Some('b') => out.push('\u{8}'),
                Some('n') => out.push('\n'),
                Some('r') => out.push('\r'),
                Some('t') => out.push('\t'),
                Some('Z') => out.push('\u{1a}'),
                Some(w @ ('%' | '_')) => {
                    out.push('\\');
                    out.push(w);
                }
                Some(other) => out.push(other),
                None => out.push('\\'),
            }
        } else if c == quote && chars.peek() == Some(&quote) {
            chars.next();
            out.push(quote);
        } else {
            out.push(c);
        }
    }
    out
}

/// Rewrites `node`'s string literals so that its `Display` text, parsed
/// again (as stored view definitions, CHECK constraints and generated
/// columns are), yields the same values: sqlparser prints literals without
/// escaping backslashes, which MySQL's string syntax reads as escapes.
pub fn display_safe<T: ast::VisitMut + Clone>(node: &T) -> T {
    let mut q = node.clone();
    let _ = ast::visit_expressions_mut(&mut q, |e| {
        if let ast::Expr::Value(
            ast::Value::SingleQuotedString(s)
            | ast::Value::DoubleQuotedString(s)
            | ast::Value::NationalStringLiteral(s),
        ) = e
        {
            if s.contains('\\') {
                *s = s.replace('\\', "\\\\");
            }
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    q
}

/// An expression as text that parses back to the same expression (see
/// [`display_safe`]), for definitions stored as text.
pub fn expr_text(e: &ast::Expr) -> String {
    display_safe(e).to_string()
}
