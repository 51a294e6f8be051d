//! Collations by name: the names MySQL 8.0 knows for the character sets
//! Ladle keeps text in (utf8mb4, utf8mb3 alias utf8, latin1, and
//! `binary`), each with the comparison Ladle applies for it
//! ([`Collation`]). A column or table keeps the name it was declared with
//! ([`crate::table_notes`]) and reports it back (information_schema, SHOW
//! CREATE TABLE, SHOW FULL COLUMNS), as Django's `db_collation` expects.
//!
//! Compared exactly: `utf8mb4_general_ci`, `utf8mb3_general_ci`,
//! `utf8mb4_bin`, `utf8mb3_bin`, `utf8mb4_0900_bin` and `binary`;
//! `latin1_bin` orders as MySQL does (Ladle keeps the text as UTF-8, so it
//! does not refuse characters latin1 lacks). Every other one
//! approximately: a case-insensitive one (`_ci`, `_ai_ci`, `_as_ci`) as
//! `utf8mb4_general_ci` (no language's tailoring, no UCA 9.0 weights, and
//! PAD SPACE where the `_0900_` ones are NO PAD); a case-sensitive one
//! (`_cs`, `_as_cs`) as `utf8mb4_bin` (code point order, not the UCA's).

use ladle_common::Collation;

use crate::error::{self, Result, ShimError, WireError};

/// A collation as a statement names it: MySQL's name for it and the
/// comparison Ladle applies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamedCollation {
    /// Lower case, `utf8_` spelled `utf8mb3_` (as MySQL 8.0.30 on reports
    /// it).
    pub name: String,
    pub compare: Collation,
}

/// The `_ci` collations of MySQL's Unicode character sets, after the
/// character set's name (`utf8mb4_esperanto_ci`).
const UNICODE_CI: &[&str] = &[
    "general",
    "unicode",
    "unicode_520",
    "icelandic",
    "latvian",
    "romanian",
    "slovenian",
    "polish",
    "estonian",
    "spanish",
    "swedish",
    "turkish",
    "czech",
    "danish",
    "lithuanian",
    "slovak",
    "spanish2",
    "roman",
    "persian",
    "esperanto",
    "hungarian",
    "sinhala",
    "german2",
    "croatian",
    "vietnamese",
];

/// The locales of utf8mb4's UCA 9.0.0 collations, each with `_0900_ai_ci`
/// and `_0900_as_cs` (`utf8mb4_de_pb_0900_ai_ci`).
const LOCALES_0900: &[&str] = &[
    "de_pb", "is", "lv", "ro", "sl", "pl", "et", "es", "sv", "tr", "cs", "da", "lt", "sk",
    "es_trad", "la", "eo", "hu", "hr", "vi", "ru", "mn_cyrl", "sr_latn", "bs", "bg", "gl", "nb",
    "nn",
];

/// utf8mb4's other UCA 9.0.0 collations, after `utf8mb4_`.
const OTHER_0900: &[&str] = &[
    "0900_ai_ci",
    "0900_as_ci",
    "0900_as_cs",
    "0900_bin",
    "zh_0900_as_cs",
    "ja_0900_as_cs",
    "ja_0900_as_cs_ks",
];

/// latin1's collations, after `latin1_`.
const LATIN1: &[&str] = &[
    "german1_ci",
    "swedish_ci",
    "danish_ci",
    "german2_ci",
    "bin",
    "general_ci",
    "general_cs",
    "spanish_ci",
];

/// MySQL 8.0's other character sets: a collation of one of them is one
/// Ladle does not keep text in (1235), not an unknown one (1273).
const OTHER_CHARSETS: &[&str] = &[
    "armscii8", "ascii", "big5", "cp1250", "cp1251", "cp1256", "cp1257", "cp850", "cp852", "cp866",
    "cp932", "dec8", "eucjpms", "euckr", "gb18030", "gb2312", "gbk", "geostd8", "greek", "hebrew",
    "hp8", "keybcs2", "koi8r", "koi8u", "latin2", "latin5", "latin7", "macce", "macroman", "sjis",
    "swe7", "tis620", "ucs2", "ujis", "utf16", "utf16le", "utf32",
];

/// Whether MySQL 8.0 has a collation `suffix` of character set `charset`
/// (both lower case, `utf8` as `utf8mb3`).
fn known(charset: &str, suffix: &str) -> bool {
    let unicode_ci = || {
        suffix
            .strip_suffix("_ci")
            .is_some_and(|base| UNICODE_CI.contains(&base))
    };
    match charset {
        "utf8mb4" => {
            suffix == "bin"
                || unicode_ci()
                || OTHER_0900.contains(&suffix)
                || LOCALES_0900.iter().any(|l| {
                    suffix
                        .strip_prefix(l)
                        .is_some_and(|rest| rest == "_0900_ai_ci" || rest == "_0900_as_cs")
                })
        }
        "utf8mb3" => matches!(suffix, "bin" | "general_mysql500_ci" | "tolower_ci") || unicode_ci(),
        "latin1" => LATIN1.contains(&suffix),
        _ => false,
    }
}

/// The comparison Ladle applies for a collation named `suffix` after its
/// character set (see the module docs for which are exact).
fn comparison(suffix: &str) -> Collation {
    if suffix.ends_with("0900_bin") || suffix.contains("_as_cs") {
        // NO PAD and case-sensitive: trailing spaces count.
        Collation::Binary
    } else if suffix.ends_with("_bin") || suffix == "bin" || suffix.ends_with("_cs") {
        Collation::Bin
    } else {
        Collation::GeneralCi
    }
}

/// `name` with `utf8_` spelled `utf8mb3_`, as (charset, suffix).
fn split(name: &str) -> Option<(String, &str)> {
    let (charset, suffix) = name.split_once('_')?;
    let charset = if charset == "utf8" {
        "utf8mb3"
    } else {
        charset
    };
    Some((charset.to_string(), suffix))
}

/// The collation `COLLATE name` selects: 1273 "Unknown collation" for a
/// name MySQL 8.0 does not know, 1235 for one of a character set Ladle
/// does not keep text in.
pub fn by_name(name: &str) -> Result<NamedCollation> {
    let lower = name.to_ascii_lowercase();
    if lower == "binary" {
        return Ok(NamedCollation {
            name: lower,
            compare: Collation::Binary,
        });
    }
    match split(&lower) {
        Some((charset, suffix)) if known(&charset, suffix) => Ok(NamedCollation {
            compare: comparison(suffix),
            name: format!("{charset}_{suffix}"),
        }),
        Some((charset, _)) if OTHER_CHARSETS.contains(&charset.as_str()) => Err(
            ShimError::Unsupported(format!("collation '{name}' (character set {charset})")),
        ),
        _ => Err(ShimError::Wire(WireError {
            code: error::ER_UNKNOWN_COLLATION,
            message: format!("Unknown collation: '{name}'"),
        })),
    }
}

/// The collation `CHARACTER SET name` selects, its default one: 1115
/// "Unknown character set" for a name Ladle does not keep text in.
/// utf8mb4's is `utf8mb4_general_ci`, Ladle's default for every text
/// (MariaDB's; MySQL 8.0's would be `utf8mb4_0900_ai_ci`).
pub fn of_charset(name: &str) -> Result<NamedCollation> {
    let default = match name.to_ascii_lowercase().as_str() {
        "utf8mb4" => "utf8mb4_general_ci",
        "utf8" | "utf8mb3" => "utf8mb3_general_ci",
        "latin1" => "latin1_swedish_ci",
        "binary" => "binary",
        _ => {
            return Err(ShimError::Wire(WireError {
                code: error::ER_UNKNOWN_CHARACTER_SET,
                message: format!("Unknown character set: '{name}'"),
            }))
        }
    };
    by_name(default)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(name: &str) -> Option<u16> {
        by_name(name).err().map(|e| WireError::from(e).code.errno)
    }

    #[test]
    fn names_mysql_knows_keep_their_name() {
        let c = by_name("UTF8_Esperanto_CI").unwrap();
        assert_eq!(c.name, "utf8mb3_esperanto_ci");
        assert_eq!(c.compare, Collation::GeneralCi);
        assert_eq!(
            by_name("utf8mb4_0900_ai_ci").unwrap().compare,
            Collation::GeneralCi
        );
        assert_eq!(
            by_name("utf8mb4_0900_bin").unwrap().compare,
            Collation::Binary
        );
        assert_eq!(
            by_name("utf8mb4_de_pb_0900_as_cs").unwrap().compare,
            Collation::Binary
        );
        assert_eq!(by_name("utf8mb4_bin").unwrap().compare, Collation::Bin);
        assert_eq!(
            by_name("latin1_general_cs").unwrap().compare,
            Collation::Bin
        );
        assert_eq!(
            by_name("latin1_swedish_ci").unwrap().name,
            "latin1_swedish_ci"
        );
        assert_eq!(of_charset("utf8").unwrap().name, "utf8mb3_general_ci");
    }

    #[test]
    fn names_mysql_does_not_know_are_1273() {
        for name in [
            "utf8mb4_klingon_ci",
            "latin1_esperanto_ci",
            "nope",
            "utf8mb4_",
        ] {
            assert_eq!(code(name), Some(1273), "{name}");
        }
        assert_eq!(code("utf16_general_ci"), Some(1235));
        assert!(of_charset("klingon").is_err());
    }
}
