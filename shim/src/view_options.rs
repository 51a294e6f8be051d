//! `CREATE [OR REPLACE] [ALGORITHM = x] [DEFINER = user] [SQL SECURITY x]
//! VIEW ...`: the view options MariaDB and MySQL write in SHOW CREATE VIEW,
//! and so in every dump of a view (`/*!50001 CREATE ALGORITHM=UNDEFINED */
//! /*!50013 DEFINER=`root`@`localhost` SQL SECURITY DEFINER */ /*!50001
//! VIEW ...`). The SQL parser knows none of them (and cannot even tokenize
//! `` `root`@`localhost` ``), so they are taken out of the text before it is
//! read. A DEFINER before TRIGGER, PROCEDURE, FUNCTION or EVENT is taken
//! out too, so that those are refused by name (1235), as without one.
//!
//! Ladle keeps none of them: every view is evaluated as it is written
//! (ALGORITHM only picks how a server runs it), and a view's reader needs
//! the privileges on its tables that the reader has (as SQL SECURITY
//! INVOKER: a DEFINER grants nothing more, so dropping it grants nothing).

use crate::tokens::first_words;

/// The statement without its view options; `None` when it is not a CREATE
/// VIEW that has some (or they are malformed: the parser then reports it).
pub fn strip(sql: &str) -> Option<String> {
    // (Every statement comes here: most leave at this first look.)
    let start = sql.trim_start().get(..6)?;
    if !start.eq_ignore_ascii_case("CREATE") {
        return None;
    }
    let (w0, w1) = first_words(sql);
    if w0 != "CREATE" || !matches!(w1.as_str(), "ALGORITHM" | "DEFINER" | "SQL" | "OR") {
        return None;
    }
    let mut i = skip_space(sql, 0);
    let (_, end) = word_at(sql, i)?;
    i = skip_space(sql, end);
    if word_at(sql, i)?.0 == "OR" {
        let (_, end) =
            word_at(sql, skip_space(sql, word_at(sql, i)?.1)).filter(|(w, _)| w == "REPLACE")?;
        i = skip_space(sql, end);
    }
    let kept = i;
    let mut stripped = false;
    loop {
        let (w, end) = word_at(sql, i)?;
        i = match w.as_str() {
            "ALGORITHM" => {
                let (v, end) = word_at(sql, after_equals(sql, end)?)?;
                ["UNDEFINED", "MERGE", "TEMPTABLE"]
                    .contains(&v.as_str())
                    .then_some(end)?
            }
            "DEFINER" => user_end(sql, after_equals(sql, end)?)?,
            "SQL" => {
                let (security, end) = word_at(sql, skip_space(sql, end))?;
                let (v, end) = word_at(sql, skip_space(sql, end))?;
                (security == "SECURITY" && (v == "DEFINER" || v == "INVOKER")).then_some(end)?
            }
            "VIEW" if stripped => return Some(format!("{}{}", &sql[..kept], &sql[i..])),
            // Stored programs, which Ladle does not have, are refused by
            // name (1235) once their DEFINER is out of the way (a dump
            // writes `/*!50017 DEFINER=`u`@`h`*/ /*!50003 TRIGGER ...`).
            "TRIGGER" | "PROCEDURE" | "FUNCTION" | "EVENT" if stripped => {
                return Some(format!("{}{}", &sql[..kept], &sql[i..]))
            }
            _ => return None,
        };
        i = skip_space(sql, i);
        stripped = true;
    }
}

fn skip_space(sql: &str, i: usize) -> usize {
    i + sql[i..].len() - sql[i..].trim_start().len()
}

/// The upper-cased word at `i` and where it ends.
fn word_at(sql: &str, i: usize) -> Option<(String, usize)> {
    let len = sql[i..]
        .find(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .unwrap_or(sql.len() - i);
    (len > 0).then(|| (sql[i..i + len].to_ascii_uppercase(), i + len))
}

/// Past `=` (and the spaces around it) at `i`.
fn after_equals(sql: &str, i: usize) -> Option<usize> {
    let i = skip_space(sql, i);
    sql[i..].starts_with('=').then(|| skip_space(sql, i + 1))
}

/// The end of an account name at `i` (`` `u`@`h` ``, `'u'@'h'`, `u@h`,
/// `CURRENT_USER[()]`): up to the next space outside quotes.
fn user_end(sql: &str, mut i: usize) -> Option<usize> {
    let b = sql.as_bytes();
    let start = i;
    while i < b.len() && !b[i].is_ascii_whitespace() {
        if let q @ (b'`' | b'\'' | b'"') = b[i] {
            i += 1 + sql[i + 1..].find(q as char)?;
        }
        i += 1;
    }
    (i > start).then_some(i)
}

#[cfg(test)]
mod tests {
    use super::strip;

    #[test]
    fn drops_the_options_mariadb_dump_writes() {
        let dumped =
            "  CREATE ALGORITHM=UNDEFINED   DEFINER=`root`@`localhost` SQL SECURITY DEFINER   \
                      VIEW `v` AS select `p`.`id` AS `id` from `p`";
        assert_eq!(
            strip(dumped).as_deref(),
            Some("  CREATE VIEW `v` AS select `p`.`id` AS `id` from `p`")
        );
        assert_eq!(
            strip("create or replace definer = 'a b'@'%' sql security invoker view v as select 1")
                .as_deref(),
            Some("create or replace view v as select 1")
        );
        assert_eq!(
            strip("CREATE DEFINER=CURRENT_USER() VIEW v AS SELECT 1").as_deref(),
            Some("CREATE VIEW v AS SELECT 1")
        );
        assert_eq!(
            strip("CREATE  DEFINER=`u`@`h`  TRIGGER t BEFORE INSERT ON x FOR EACH ROW SET @a = 1")
                .as_deref(),
            Some("CREATE  TRIGGER t BEFORE INSERT ON x FOR EACH ROW SET @a = 1")
        );
    }

    #[test]
    fn leaves_everything_else_to_the_parser() {
        for sql in [
            "CREATE VIEW v AS SELECT 1",
            "CREATE OR REPLACE VIEW v AS SELECT 1",
            "CREATE TABLE t (a INT)",
            "CREATE ALGORITHM=FAST VIEW v AS SELECT 1",
            "CREATE SQL SECURITY NOBODY VIEW v AS SELECT 1",
            "CREATE DEFINER=`unterminated VIEW v AS SELECT 1",
            "CREATE OR",
        ] {
            assert_eq!(strip(sql), None, "{sql}");
        }
    }
}
