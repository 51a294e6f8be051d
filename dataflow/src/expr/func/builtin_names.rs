//! The names of MySQL's and MariaDB's built-in functions, whether Ladle
//! evaluates them or not (the table `builtin_names.txt`). A call of one
//! Ladle does not evaluate is a known gap (1235); a call of any other name
//! is of a function that does not exist (1305), as MariaDB reads it: a
//! stored function's, of which there are none.

use std::collections::HashSet;
use std::sync::OnceLock;

/// One lower-case name a line, sorted; `#` begins a comment (a note after
/// a name, or a line of its own).
const TABLE: &str = include_str!("builtin_names.txt");

fn entries() -> impl Iterator<Item = &'static str> {
    TABLE
        .lines()
        .map(|l| l.split('#').next().unwrap_or_default().trim())
        .filter(|name| !name.is_empty())
}

/// Every built-in's name (lower case).
#[cfg(test)]
pub(crate) fn names() -> impl Iterator<Item = &'static str> {
    entries()
}

/// Whether `name` (lower case) is a MySQL or MariaDB built-in function.
pub(crate) fn is_builtin(name: &str) -> bool {
    static NAMES: OnceLock<HashSet<&'static str>> = OnceLock::new();
    NAMES.get_or_init(|| entries().collect()).contains(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::func::{Func, Lookup};

    #[test]
    fn the_table_is_lower_case_sorted_and_unique() {
        let names: Vec<&str> = entries().collect();
        for pair in names.windows(2) {
            assert!(pair[0] < pair[1], "{} before {}", pair[0], pair[1]);
        }
        for n in names {
            assert!(
                n.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
                "{n}"
            );
        }
    }

    #[test]
    fn built_ins_ladle_lacks_are_gaps_and_other_names_unknown() {
        assert_eq!(Func::by_name("abs", 1), Lookup::Found(Func::Abs));
        for gap in [
            "aes_encrypt",
            "json_arrayagg",
            "st_astext",
            "uuid",
            "regexp_substr",
        ] {
            assert_eq!(Func::by_name(gap, 1), Lookup::Unimplemented, "{gap}");
        }
        for unknown in ["nosuchfn", "db.abs", "abs_"] {
            assert_eq!(Func::by_name(unknown, 1), Lookup::Unknown, "{unknown}");
        }
    }
}
