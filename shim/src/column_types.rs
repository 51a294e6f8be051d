//! MySQL's and MariaDB's column type names to Ladle's `SqlType`
//! ([`map_type`]), and MariaDB's spelling of JSON (`longtext ... CHECK
//! (json_valid(`c`))`, [`is_json_valid_of`]), which is how its SHOW CREATE
//! TABLE, and so a dump, writes a JSON column.

use ladle_common::SqlType;
use sqlparser::ast::{self, DataType};

use crate::error::{self, Result, ShimError, WireError};

/// Maps the declared type of column `column` to Ladle's.
pub fn map_type(column: &str, dt: &DataType) -> Result<SqlType> {
    if let DataType::Enum(labels) = dt {
        return Ok(SqlType::Enum(labels.clone()));
    }
    let s = dt.to_string().to_ascii_lowercase();
    let unsigned = s.contains("unsigned");
    let base: String = s
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    let args: Vec<u64> = match (s.find('('), s.find(')')) {
        (Some(a), Some(b)) if b > a => s[a + 1..b]
            .split(',')
            .filter_map(|x| x.trim().parse().ok())
            .collect(),
        _ => Vec::new(),
    };
    let arg = |i: usize, d: u64| args.get(i).copied().unwrap_or(d);
    let len = |d: u64| -> u32 { u32::try_from(arg(0, d)).unwrap_or(u32::MAX) };
    // A display width is kept only when it is not the type's default, so
    // `INT(11)` and `INT` are the same type (MariaDB shows both as int(11));
    // 0 means the default too.
    let display_width = |bytes: u8| -> Result<Option<u8>> {
        let Some(&w) = args.first() else {
            return Ok(None);
        };
        let w = u8::try_from(w).map_err(|_| {
            wire((
                error::ER_TOO_BIG_DISPLAYWIDTH,
                format!("Display width out of range for '{column}' (max = 255)"),
            ))
        })?;
        let default = SqlType::int_display_width(bytes, unsigned, None);
        Ok((w != 0 && w != default).then_some(w))
    };
    let int = |bytes: u8| -> Result<SqlType> {
        Ok(SqlType::Int {
            bytes,
            unsigned,
            display_width: display_width(bytes)?,
        })
    };
    let fsp = || -> Result<u8> {
        match arg(0, 0) {
            p @ 0..=6 => Ok(p as u8),
            _ => Err(wire((
                error::ER_TOO_BIG_PRECISION,
                format!("Too big precision specified for '{column}'. Maximum is 6"),
            ))),
        }
    };
    Ok(match base.as_str() {
        "tinyint" | "int1" => int(1)?,
        // BOOL is TINYINT(1), as MariaDB shows it.
        "bool" | "boolean" => SqlType::Int {
            bytes: 1,
            unsigned: false,
            display_width: Some(1),
        },
        "smallint" | "int2" => int(2)?,
        "mediumint" | "int3" | "middleint" => int(3)?,
        "int" | "integer" | "int4" => int(4)?,
        "bigint" | "int8" | "serial" => int(8)?,
        // BIT(0) is BIT(1), as in MariaDB.
        "bit" => match arg(0, 1) {
            0 => SqlType::Bit(1),
            n @ 1..=64 => SqlType::Bit(n as u8),
            _ => {
                return Err(wire((
                    error::ER_TOO_BIG_DISPLAYWIDTH,
                    format!(
                        "Display width out of range for '{column}' (max = {})",
                        ladle_common::MAX_BIT_WIDTH
                    ),
                )))
            }
        },
        "float" if arg(0, 0) > 24 => SqlType::Double,
        "float" | "float4" => SqlType::Float,
        "double" | "real" | "float8" => SqlType::Double,
        "decimal" | "numeric" | "dec" | "fixed" => {
            let p = arg(0, 10).min(65) as u8;
            let sc = arg(1, 0).min(30) as u8;
            SqlType::Decimal {
                precision: p.max(sc).max(1),
                scale: sc,
            }
        }
        "character" if s.starts_with("character varying") => SqlType::VarChar(len(255)),
        "char" | "character" | "nchar" => SqlType::Char(len(1)),
        "varchar" | "nvarchar" | "varcharacter" => {
            if args.is_empty() {
                return Err(ShimError::Parse("VARCHAR needs a length".into()));
            }
            SqlType::VarChar(len(255))
        }
        "tinytext" => SqlType::Text(255),
        "text" => SqlType::Text(match arg(0, 65535) {
            0..=255 => 255,
            256..=65535 => 65535,
            65536..=16777215 => 16777215,
            _ => u32::MAX,
        }),
        "mediumtext" | "long" => SqlType::Text(16777215),
        "longtext" => SqlType::Text(u32::MAX),
        "json" => SqlType::Json,
        "binary" => SqlType::Binary(len(1)),
        "varbinary" => SqlType::VarBinary(len(255)),
        "tinyblob" => SqlType::Blob(255),
        "blob" | "bytea" => SqlType::Blob(65535),
        "mediumblob" => SqlType::Blob(16777215),
        "longblob" => SqlType::Blob(u32::MAX),
        "date" => SqlType::Date,
        "datetime" => SqlType::DateTime { fsp: fsp()? },
        "timestamp" => SqlType::Timestamp { fsp: fsp()? },
        "time" => SqlType::Time { fsp: fsp()? },
        "year" => SqlType::Year,
        "uuid" => SqlType::Char(36),
        _ => return Err(ShimError::Unsupported(format!("column type {dt}"))),
    })
}

/// Whether `expr` is `json_valid(column)`.
pub(crate) fn is_json_valid_of(expr: &ast::Expr, column: &ast::Ident) -> bool {
    let ast::Expr::Function(f) = expr else {
        return false;
    };
    let ast::FunctionArguments::List(list) = &f.args else {
        return false;
    };
    f.name.to_string().eq_ignore_ascii_case("json_valid")
        && matches!(
            list.args.as_slice(),
            [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(ast::Expr::Identifier(i)))]
                if i.value.eq_ignore_ascii_case(&column.value)
        )
}

fn wire((code, message): (error::MysqlCode, String)) -> ShimError {
    ShimError::Wire(WireError { code, message })
}
