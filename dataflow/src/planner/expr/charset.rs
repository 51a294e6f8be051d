//! Character sets as MariaDB names them: `CONVERT(x USING name)`'s target,
//! and what `CHARSET(x)` and `COLLATION(x)` answer. Ladle keeps all text as
//! utf8mb4; these are decided when the expression is planned, as MariaDB
//! decides them.

use ladle_common::{Collation, Value};
use sqlparser::ast;

use super::{collation_source, unsupported, ExprCx};
use crate::expr::{ByteCharset, CastType, Expr, Func};
use crate::{DataflowError, Result};

/// A character set `CONVERT(x USING name)` converts to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ConvertTarget {
    Utf8mb4,
    Utf8mb3,
    Latin1,
    Ascii,
    Binary,
}

/// MariaDB's other character sets: converting to one is a gap (1235), not
/// an unknown name (1115).
const OTHER_CHARSETS: &[&str] = &[
    "armscii8", "big5", "cp1250", "cp1251", "cp1256", "cp1257", "cp850", "cp852", "cp866", "cp932",
    "dec8", "eucjpms", "euckr", "gb2312", "gbk", "geostd8", "greek", "hebrew", "hp8", "keybcs2",
    "koi8r", "koi8u", "latin2", "latin5", "latin7", "macce", "macroman", "sjis", "swe7", "tis620",
    "ucs2", "ujis", "utf16", "utf16le", "utf32",
];

impl ConvertTarget {
    /// The character set `name` names: 1115 for one MariaDB does not have.
    pub(crate) fn named(name: &ast::ObjectName) -> Result<ConvertTarget> {
        let written = name.to_string();
        let bare = written.trim_matches(|c| c == '`' || c == '\'' || c == '"');
        Ok(match bare.to_ascii_lowercase().as_str() {
            "utf8mb4" => ConvertTarget::Utf8mb4,
            "utf8" | "utf8mb3" => ConvertTarget::Utf8mb3,
            "latin1" => ConvertTarget::Latin1,
            "ascii" => ConvertTarget::Ascii,
            "binary" => ConvertTarget::Binary,
            other if OTHER_CHARSETS.contains(&other) => {
                return Err(unsupported(format!("CONVERT(... USING {other})")))
            }
            _ => return Err(DataflowError::UnknownCharset(bare.to_string())),
        })
    }

    /// The single-byte set Ladle converts text to for this target.
    pub(crate) fn byte_charset(self) -> Option<ByteCharset> {
        match self {
            ConvertTarget::Latin1 => Some(ByteCharset::Latin1),
            ConvertTarget::Ascii => Some(ByteCharset::Ascii),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            ConvertTarget::Utf8mb4 => "utf8mb4",
            ConvertTarget::Utf8mb3 => "utf8mb3",
            ConvertTarget::Latin1 => "latin1",
            ConvertTarget::Ascii => "ascii",
            ConvertTarget::Binary => "binary",
        }
    }

    fn default_collation(self) -> &'static str {
        match self {
            ConvertTarget::Utf8mb4 => "utf8mb4_general_ci",
            ConvertTarget::Utf8mb3 => "utf8mb3_general_ci",
            ConvertTarget::Latin1 => "latin1_swedish_ci",
            ConvertTarget::Ascii => "ascii_general_ci",
            ConvertTarget::Binary => "binary",
        }
    }
}

/// A value's character set and collation, as `CHARSET()` and
/// `COLLATION()` name them.
pub(crate) struct Charset {
    pub name: String,
    pub collation: String,
}

impl Charset {
    fn binary() -> Charset {
        Charset::of(ConvertTarget::Binary)
    }

    fn of(target: ConvertTarget) -> Charset {
        Charset {
            name: target.name().into(),
            collation: target.default_collation().into(),
        }
    }

    fn byte_charset(&self) -> Option<ByteCharset> {
        match self.name.as_str() {
            "latin1" => Some(ByteCharset::Latin1),
            "ascii" => Some(ByteCharset::Ascii),
            _ => None,
        }
    }

    /// The set a collation name belongs to (`utf8_bin`: utf8mb3).
    fn of_collation(collation: &str) -> Charset {
        let collation = collation.to_ascii_lowercase();
        let collation = match collation.strip_prefix("utf8_") {
            Some(rest) => format!("utf8mb3_{rest}"),
            None => collation,
        };
        let name = collation.split('_').next().unwrap_or_default().to_string();
        Charset { name, collation }
    }
}

/// Functions whose result is (part of) their first argument's string, in
/// its character set (see [`collation_source`]).
const KEEPS_FIRST_ARGUMENT_CHARSET: &[&str] = &[
    "upper",
    "ucase",
    "lower",
    "lcase",
    "trim",
    "ltrim",
    "rtrim",
    "substring",
    "substr",
    "left",
    "right",
    "replace",
    "reverse",
    "lpad",
    "rpad",
];

impl ExprCx<'_> {
    /// `CHARSET(x)` (`name` "charset") or `COLLATION(x)`: a constant,
    /// decided by `x`'s type as MariaDB decides it.
    pub(crate) fn charset_function(&self, name: &str, x: &ast::Expr) -> Result<Expr> {
        let charset = self.charset_of(x)?;
        let answer = match name {
            "charset" => charset.name,
            _ => charset.collation,
        };
        Ok(Expr::Literal(Value::text(answer)))
    }

    /// `compiled`, the arguments `args` of `func`, each read as its bytes
    /// in the single-byte character set it is in when `func` counts bytes
    /// (`LENGTH(CONVERT('é' USING latin1))` is 1, its HEX `E9`).
    pub(super) fn bytes_in_charset(
        &self,
        func: Func,
        args: &[&ast::Expr],
        compiled: Vec<Expr>,
    ) -> Result<Vec<Expr>> {
        if !matches!(func, Func::Length | Func::Hex) {
            return Ok(compiled);
        }
        let mut read = Vec::with_capacity(compiled.len());
        for (arg, c) in args.iter().zip(compiled) {
            let byte_charset = match names_charset(arg) {
                true => self.charset_of(arg)?.byte_charset(),
                false => None,
            };
            read.push(match byte_charset {
                Some(cs) => Expr::Cast(Box::new(c), CastType::Encode(cs)),
                None => c,
            });
        }
        Ok(read)
    }

    /// The character set and collation of `e`'s value: an explicit
    /// COLLATE's, a CONVERT's target's (through functions that keep their
    /// argument's), a text column's, the connection's (utf8mb4) for other
    /// text, and `binary` for binary strings, numbers, dates and NULL.
    fn charset_of(&self, e: &ast::Expr) -> Result<Charset> {
        use ast::Expr as E;
        match e {
            E::Nested(x) => self.charset_of(x),
            E::Collate { expr, collation } => {
                self.compile(expr)?;
                Ok(Charset::of_collation(&collation.to_string()))
            }
            E::Convert {
                expr,
                data_type: None,
                charset: Some(cs),
                ..
            } => {
                self.compile(expr)?;
                Ok(Charset::of(ConvertTarget::named(cs)?))
            }
            E::Function(f) if self.keeps_first_argument_charset(f)? => match first_argument(f) {
                Some(x) => self.charset_of(x),
                None => self.typed_charset(e),
            },
            _ => self.typed_charset(e),
        }
    }

    /// Whether `f` is a string function (of a string argument) whose value
    /// keeps its first argument's character set.
    fn keeps_first_argument_charset(&self, f: &ast::Function) -> Result<bool> {
        let name = f.name.to_string().to_ascii_lowercase();
        if !KEEPS_FIRST_ARGUMENT_CHARSET.contains(&name.as_str()) {
            return Ok(false);
        }
        let compiled = self.compile(&ast::Expr::Function(f.clone()))?;
        Ok(compiled.result_type(&self.frame_types()).0.is_text())
    }

    /// `e`'s character set as its type says: text in its column's
    /// collation or the connection's, anything else binary.
    fn typed_charset(&self, e: &ast::Expr) -> Result<Charset> {
        let compiled = self.compile(e)?;
        // A bare NULL is typed as text elsewhere, but is binary here.
        let null = matches!(compiled, Expr::Literal(Value::Null));
        if null || !compiled.result_type(&self.frame_types()).0.is_text() {
            return Ok(Charset::binary());
        }
        let collation = match collation_source(&compiled) {
            Some(Expr::Column(i)) => self.col_info(*i).2,
            _ => Collation::GeneralCi,
        };
        Ok(Charset::of_collation(collation.name()))
    }
}

/// Whether `e` may be in a set other than its type's: a CONVERT USING or a
/// COLLATE, bare or under functions that keep their argument's set (what
/// [`ExprCx::charset_of`] looks through).
fn names_charset(e: &ast::Expr) -> bool {
    use ast::Expr as E;
    match e {
        E::Nested(x) => names_charset(x),
        E::Convert {
            data_type: None,
            charset: Some(_),
            ..
        }
        | E::Collate { .. } => true,
        E::Function(f) => {
            let name = f.name.to_string().to_ascii_lowercase();
            KEEPS_FIRST_ARGUMENT_CHARSET.contains(&name.as_str())
                && first_argument(f).is_some_and(names_charset)
        }
        _ => false,
    }
}

fn first_argument(f: &ast::Function) -> Option<&ast::Expr> {
    match &f.args {
        ast::FunctionArguments::List(l) => match l.args.first() {
            Some(ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(x))) => Some(x),
            _ => None,
        },
        _ => None,
    }
}
