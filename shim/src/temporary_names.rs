//! TEMPORARY table names are per connection: each connection's `t` is
//! stored under a name of its own ([`internal_name`]: `#tmp#<connection>#t`),
//! and the connection's statements name it as `t`, which the text is
//! rewritten for ([`rewrite`]) before it runs. So two connections may each
//! have a temporary `t`, and a connection's temporary `t` shadows a base
//! table `t` for that connection only (reads, writes, ALTER, DROP TABLE),
//! as in MySQL; other connections keep reaching the base table.
//!
//! The rewrite works on tokens: a name in a table position (after FROM,
//! JOIN, UPDATE, INTO, TABLE, `DROP TABLE IF EXISTS`, DESCRIBE, `CREATE
//! INDEX .. ON`, `CREATE TABLE .. LIKE`, `RENAME TABLE a TO b`, a
//! multi-table DELETE's targets and USING, lists of those), and `t.` column
//! qualifiers unless `t` is also an alias in the statement. The target of
//! `CREATE TEMPORARY TABLE` always gets the connection's name; that of a
//! plain `CREATE TABLE` never does (it makes a base table beside the
//! temporary one). Error messages and SHOW CREATE TABLE show `t` again
//! ([`visible_text`]).

use sqlparser::dialect::MySqlDialect;
use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Token, TokenWithLocation, Tokenizer, Word};

use crate::error::WireError;
use crate::output::Output;

/// The prefix of connection `owner`'s temporary table names.
pub fn prefix(owner: u32) -> String {
    format!("#tmp#{owner}#")
}

/// The stored name of connection `owner`'s temporary table `name`.
pub fn internal_name(owner: u32, name: &str) -> String {
    format!("{}{name}", prefix(owner))
}

/// The name a stored name shows its owner `owner` (itself for any other).
pub fn visible_name(owner: u32, stored: &str) -> &str {
    stored.strip_prefix(&prefix(owner)).unwrap_or(stored)
}

/// `text` with connection `owner`'s temporary table names as it names
/// them (error messages, SHOW CREATE TABLE).
pub fn visible_text(owner: u32, text: &str) -> String {
    text.replace(&prefix(owner), "")
}

/// A temporary table of the connection: (database, name as it names it).
pub type Owned = (String, String);

/// `sql` with the names of the connection's temporary tables `owned`
/// replaced by their stored names, or `None` if nothing changes (`db` is
/// the session's database, `owner` its connection id).
pub fn rewrite(sql: &str, db: Option<&str>, owner: u32, owned: &[Owned]) -> Option<String> {
    let creates_temporary = starts_with_words(sql, &["CREATE", "TEMPORARY"]);
    if owned.is_empty() && !creates_temporary {
        return None;
    }
    let lower = sql.to_ascii_lowercase();
    if !creates_temporary
        && !owned
            .iter()
            .any(|(_, t)| lower.contains(&t.to_ascii_lowercase()))
    {
        return None;
    }
    let tokens = Tokenizer::new(&MySqlDialect {}, sql)
        .with_unescape(false)
        .tokenize_with_location()
        .ok()?;
    let offsets = byte_offsets(sql, &tokens);
    let sig: Vec<usize> = (0..tokens.len())
        .filter(|&i| !matches!(tokens[i].token, Token::Whitespace(_)))
        .collect();
    let mut scan = Scan {
        tokens: &tokens,
        sig: &sig,
        db,
        owner,
        owned,
        replaced: Vec::new(),
        renamed: Vec::new(),
        aliases: Vec::new(),
    };
    scan.table_positions();
    scan.qualifiers();
    if scan.replaced.is_empty() {
        return None;
    }
    let mut replaced = scan.replaced;
    replaced.sort_by_key(|(i, _)| *i);
    let mut out = String::with_capacity(sql.len() + 16 * replaced.len());
    let mut at = 0;
    for (i, name) in replaced {
        let (start, end) = (offsets[i], offsets[i + 1]);
        out.push_str(&sql[at..start]);
        out.push('`');
        out.push_str(&name.replace('`', "``"));
        out.push('`');
        at = end;
    }
    out.push_str(&sql[at..]);
    Some(out)
}

/// Whether `sql` names one of the temporary tables `owned` in a table
/// position, as [`rewrite`] finds them (`db`: the session's database; a
/// CREATE TEMPORARY TABLE always counts: its target is one).
pub fn names_any(sql: &str, db: Option<&str>, owned: &[Owned]) -> bool {
    !owned.is_empty() && rewrite(sql, db, 0, owned).is_some()
}

/// Whether `sql` is a CREATE TEMPORARY TABLE.
pub(crate) fn creates_temporary(sql: &str) -> bool {
    starts_with_words(sql, &["CREATE", "TEMPORARY"])
}

fn starts_with_words(sql: &str, words: &[&str]) -> bool {
    let mut rest = sql.split_whitespace();
    words
        .iter()
        .all(|w| rest.next().is_some_and(|x| x.eq_ignore_ascii_case(w)))
}

/// The byte offset where each token starts, and the text's length last.
fn byte_offsets(sql: &str, tokens: &[TokenWithLocation]) -> Vec<usize> {
    let mut line_starts = vec![0];
    line_starts.extend(sql.match_indices('\n').map(|(i, _)| i + 1));
    let mut out: Vec<usize> = tokens
        .iter()
        .map(|t| {
            let line = (t.location.line as usize).saturating_sub(1);
            let start = line_starts.get(line).copied().unwrap_or(sql.len());
            let column = (t.location.column as usize).saturating_sub(1);
            sql[start..]
                .char_indices()
                .nth(column)
                .map_or(sql.len(), |(b, _)| start + b)
        })
        .collect();
    out.push(sql.len());
    out
}

/// What a name in a table position is.
#[derive(Clone, Copy, PartialEq)]
enum Target {
    /// An existing table (read or written).
    Existing,
    /// The table CREATE TEMPORARY TABLE makes.
    NewTemporary,
    /// The table a plain CREATE TABLE makes: a base table.
    NewBase,
}

struct Scan<'a> {
    tokens: &'a [TokenWithLocation],
    /// Indices (into `tokens`) of the tokens that are not whitespace.
    sig: &'a [usize],
    db: Option<&'a str>,
    owner: u32,
    owned: &'a [Owned],
    /// (token index, stored name) to write.
    replaced: Vec<(usize, String)>,
    /// Temporary tables named here: their `t.` qualifiers are rewritten
    /// too.
    renamed: Vec<String>,
    aliases: Vec<String>,
}

impl Scan<'_> {
    fn token(&self, k: usize) -> Option<&Token> {
        self.sig.get(k).map(|&i| &self.tokens[i].token)
    }

    /// The unquoted word at significant position `k`, upper-cased.
    fn keyword(&self, k: usize) -> Option<String> {
        match self.token(k) {
            Some(Token::Word(Word {
                value,
                quote_style: None,
                ..
            })) => Some(value.to_ascii_uppercase()),
            _ => None,
        }
    }

    fn ident(&self, k: usize) -> Option<&str> {
        match self.token(k) {
            Some(Token::Word(w)) if w.quote_style.is_none() || w.quote_style == Some('`') => {
                Some(&w.value)
            }
            _ => None,
        }
    }

    /// Whether INTO comes at `k`, past INSERT's and REPLACE's modifiers.
    fn has_into_at(&self, mut k: usize) -> bool {
        while matches!(
            self.keyword(k).as_deref(),
            Some("IGNORE" | "LOW_PRIORITY" | "DELAYED" | "HIGH_PRIORITY")
        ) {
            k += 1;
        }
        self.keyword(k).as_deref() == Some("INTO")
    }

    fn is_period(&self, k: usize) -> bool {
        matches!(self.token(k), Some(Token::Period))
    }

    /// Whether connection's temporary table `db`.`name` exists.
    fn owns(&self, db: Option<&str>, name: &str) -> bool {
        let Some(db) = db.or(self.db) else {
            return false;
        };
        self.owned.iter().any(|(d, t)| d == db && t == name)
    }

    /// Walks the statement, rewriting names in table positions.
    fn table_positions(&mut self) {
        let first = self.keyword(0).unwrap_or_default();
        let creating = first == "CREATE";
        let temporary = creating && self.keyword(1).as_deref() == Some("TEMPORARY");
        let index = creating && (1..4).any(|k| self.keyword(k).as_deref() == Some("INDEX"));
        let mut k = 0;
        let mut seen_table = false;
        let mut altered_temporary = false;
        while k < self.sig.len() {
            let word = self.keyword(k).unwrap_or_default();
            let opens = match word.as_str() {
                "FROM" | "JOIN" | "UPDATE" | "INTO" | "TRUNCATE" => Some(Target::Existing),
                "TABLE" | "TABLES" if creating && !seen_table => {
                    seen_table = true;
                    Some(if temporary {
                        Target::NewTemporary
                    } else {
                        Target::NewBase
                    })
                }
                "TABLE" | "TABLES" => Some(Target::Existing),
                "DESCRIBE" | "DESC" | "EXPLAIN" if k == 0 => Some(Target::Existing),
                // `INSERT t VALUES ...`, `REPLACE LOW_PRIORITY t ...`: the
                // table without INTO (with INTO, INTO opens it).
                "INSERT" | "REPLACE" if k == 0 && !self.has_into_at(1) => Some(Target::Existing),
                // `SHOW COLUMNS IN t`, `SHOW INDEX IN t`.
                "IN" if first == "SHOW" => Some(Target::Existing),
                // A multi-table DELETE's targets: `DELETE t FROM ...`.
                "DELETE" if k == 0 && self.keyword(1).as_deref() != Some("FROM") => {
                    Some(Target::Existing)
                }
                "USING" if first == "DELETE" => Some(Target::Existing),
                "ON" if index => Some(Target::Existing),
                "LIKE" if creating && seen_table => Some(Target::Existing),
                "RENAME" if altered_temporary => {
                    if matches!(self.keyword(k + 1).as_deref(), Some("TO" | "AS")) {
                        k += 1;
                    }
                    Some(Target::NewTemporary)
                }
                _ => None,
            };
            k += 1;
            let Some(target) = opens else {
                continue;
            };
            // A list of tables: `FROM a, b`, `DROP TABLE a, b`.
            loop {
                while matches!(
                    self.keyword(k).as_deref(),
                    Some(
                        "IF" | "NOT"
                            | "EXISTS"
                            | "TEMPORARY"
                            | "IGNORE"
                            | "LOW_PRIORITY"
                            | "QUICK"
                            | "DELAYED"
                            | "HIGH_PRIORITY"
                            | "TABLE"
                    )
                ) {
                    k += 1;
                }
                let Some(renamed) = self.table_name(&mut k, target) else {
                    break;
                };
                if word == "TABLE" && first == "ALTER" && renamed {
                    altered_temporary = true;
                }
                // `RENAME TABLE a TO b`: b is temporary if a is.
                if first == "RENAME" && self.keyword(k).as_deref() == Some("TO") {
                    k += 1;
                    let to = if renamed {
                        Target::NewTemporary
                    } else {
                        Target::NewBase
                    };
                    if self.table_name(&mut k, to).is_none() {
                        break;
                    }
                }
                self.skip_alias(&mut k);
                if matches!(self.token(k), Some(Token::Comma)) && word != "INTO" {
                    k += 1;
                } else {
                    break;
                }
            }
        }
    }

    /// Reads a possibly qualified table name at `k` (moving past it),
    /// rewriting it if it names the connection's temporary table (or is
    /// one CREATE TEMPORARY TABLE makes). `None` if no name is there;
    /// otherwise whether it was rewritten.
    fn table_name(&mut self, k: &mut usize, target: Target) -> Option<bool> {
        let first = self.ident(*k)?.to_string();
        let (db, name, at) = if self.is_period(*k + 1) && self.ident(*k + 2).is_some() {
            let name = self.ident(*k + 2)?.to_string();
            *k += 3;
            (Some(first), name, *k - 1)
        } else {
            *k += 1;
            (None, first, *k - 1)
        };
        let rewrite = match target {
            Target::NewTemporary => true,
            Target::NewBase => false,
            Target::Existing => self.owns(db.as_deref(), &name),
        };
        if rewrite {
            self.renamed.push(name.clone());
            let stored = internal_name(self.owner, &name);
            self.replaced.push((self.sig[at], stored));
        }
        Some(rewrite)
    }

    /// Moves past `AS alias` or a bare alias, remembering it.
    fn skip_alias(&mut self, k: &mut usize) {
        if self.keyword(*k).as_deref() == Some("AS") {
            if let Some(a) = self.ident(*k + 1) {
                self.aliases.push(a.to_string());
                *k += 2;
            }
            return;
        }
        if let Some(Token::Word(w)) = self.token(*k) {
            if w.quote_style == Some('`')
                || (w.quote_style.is_none() && w.keyword == Keyword::NoKeyword)
            {
                self.aliases.push(w.value.clone());
                *k += 1;
            }
        }
    }

    /// Rewrites `t.` column qualifiers of renamed tables (`t.a`, `t.*`,
    /// `db.t.a`) unless `t` is an alias here too.
    fn qualifiers(&mut self) {
        let is_table = |scan: &Scan<'_>, k: usize| {
            scan.sig
                .get(k)
                .is_some_and(|i| scan.replaced.iter().any(|(r, _)| r == i))
        };
        let mut found = Vec::new();
        for k in 0..self.sig.len() {
            if !self.is_period(k + 1) || is_table(self, k) || is_table(self, k + 2) {
                continue;
            }
            let Some(name) = self.ident(k) else {
                continue;
            };
            let column = matches!(self.token(k + 2), Some(Token::Word(_) | Token::Mul));
            if !column || self.is_period(k + 3) {
                continue;
            }
            let ours = if k >= 1 && self.is_period(k - 1) {
                // `db.t.a`; four parts are no column.
                !(k >= 3 && self.is_period(k - 3))
                    && self
                        .ident(k - 2)
                        .is_some_and(|db| self.owns(Some(db), name))
            } else {
                self.renamed.iter().any(|r| r == name) && !self.aliases.iter().any(|a| a == name)
            };
            if ours {
                found.push((self.sig[k], internal_name(self.owner, name)));
            }
        }
        self.replaced.extend(found);
    }
}

/// A statement's result with the session's TEMPORARY tables named as it
/// names them: in an error message, in SHOW's rows (SHOW INDEX's table),
/// and in SHOW CREATE TABLE (which says TEMPORARY, as MariaDB's does).
pub(crate) fn shown(
    owner: u32,
    sql: &str,
    result: Result<Output, WireError>,
) -> Result<Output, WireError> {
    let prefix = prefix(owner);
    match result {
        Err(mut e) => {
            e.message = visible_text(owner, &e.message);
            Err(e)
        }
        Ok(Output::Rows { columns, rows }) if crate::tokens::first_words(sql).0 == "SHOW" => {
            let rows: Vec<ladle_common::Row> = rows
                .iter()
                .map(|r| {
                    r.iter()
                        .map(|v| match v {
                            ladle_common::Value::Text(t) if t.contains(&prefix) => {
                                let shown = visible_text(owner, t);
                                let shown = match shown.strip_prefix("CREATE TABLE ") {
                                    Some(rest) => format!("CREATE TEMPORARY TABLE {rest}"),
                                    None => shown,
                                };
                                ladle_common::Value::Text(shown.into())
                            }
                            ladle_common::Value::Text(t) => {
                                ladle_common::Value::Text(visible_text(owner, t).into())
                            }
                            other => other.clone(),
                        })
                        .collect()
                })
                .collect();
            Ok(Output::Rows {
                columns,
                rows: rows.into(),
            })
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owned() -> Vec<Owned> {
        vec![("d".into(), "t".into())]
    }

    fn rw(sql: &str) -> String {
        rewrite(sql, Some("d"), 7, &owned()).unwrap_or_else(|| sql.to_string())
    }

    #[test]
    fn names_any_finds_the_tables_in_table_positions_only() {
        let named = |sql: &str, db: Option<&str>| names_any(sql, db, &owned());
        assert!(named("SELECT * FROM t", Some("d")));
        assert!(named("SELECT x.a FROM base x JOIN d.t ON 1", None));
        assert!(named("SHOW CREATE TABLE t", Some("d")));
        assert!(!named("SELECT * FROM t", Some("other")));
        assert!(!named("SELECT t FROM base WHERE a = 't'", Some("d")));
        assert!(!names_any("SELECT * FROM t", Some("d"), &[]));
    }

    #[test]
    fn table_positions_are_rewritten() {
        assert_eq!(rw("SELECT a FROM t"), "SELECT a FROM `#tmp#7#t`");
        assert_eq!(
            rw("SELECT 'é', \"ü\"\n  FROM\tt -- t\n WHERE a = 't'"),
            "SELECT 'é', \"ü\"\n  FROM\t`#tmp#7#t` -- t\n WHERE a = 't'"
        );
        assert_eq!(
            rw("SELECT t.a, x.t FROM base AS x JOIN t ON x.a = t.a WHERE t = 1"),
            "SELECT `#tmp#7#t`.a, x.t FROM base AS x JOIN `#tmp#7#t` ON x.a = `#tmp#7#t`.a WHERE t = 1"
        );
        assert_eq!(
            rw("INSERT INTO d.t VALUES (1)"),
            "INSERT INTO d.`#tmp#7#t` VALUES (1)"
        );
        assert_eq!(rw("UPDATE t SET a = 2"), "UPDATE `#tmp#7#t` SET a = 2");
        assert_eq!(rw("DELETE FROM `t`"), "DELETE FROM `#tmp#7#t`");
        assert_eq!(
            rw("DROP TABLE IF EXISTS u, t"),
            "DROP TABLE IF EXISTS u, `#tmp#7#t`"
        );
        assert_eq!(rw("DESCRIBE t"), "DESCRIBE `#tmp#7#t`");
        assert_eq!(rw("SHOW CREATE TABLE t"), "SHOW CREATE TABLE `#tmp#7#t`");
        assert_eq!(rw("SHOW COLUMNS FROM t"), "SHOW COLUMNS FROM `#tmp#7#t`");
        assert_eq!(rw("SHOW INDEX IN t"), "SHOW INDEX IN `#tmp#7#t`");
        assert_eq!(rw("INSERT t VALUES (1)"), "INSERT `#tmp#7#t` VALUES (1)");
        assert_eq!(
            rw("REPLACE LOW_PRIORITY t VALUES (1)"),
            "REPLACE LOW_PRIORITY `#tmp#7#t` VALUES (1)"
        );
        assert_eq!(
            rw("INSERT IGNORE INTO t SELECT a FROM t"),
            "INSERT IGNORE INTO `#tmp#7#t` SELECT a FROM `#tmp#7#t`"
        );
        assert_eq!(
            rw("SELECT REPLACE(t, 'a', 'b') FROM u"),
            "SELECT REPLACE(t, 'a', 'b') FROM u"
        );
        assert_eq!(
            rw("CREATE INDEX i ON t (a)"),
            "CREATE INDEX i ON `#tmp#7#t` (a)"
        );
        assert_eq!(
            rw("CREATE TABLE c LIKE t"),
            "CREATE TABLE c LIKE `#tmp#7#t`"
        );
        assert_eq!(
            rw("ALTER TABLE t RENAME TO u"),
            "ALTER TABLE `#tmp#7#t` RENAME TO `#tmp#7#u`"
        );
        assert_eq!(
            rw("RENAME TABLE b TO c, t TO u"),
            "RENAME TABLE b TO c, `#tmp#7#t` TO `#tmp#7#u`"
        );
        assert_eq!(
            rw("DELETE t.* FROM t JOIN b ON t.a = b.a"),
            "DELETE `#tmp#7#t`.* FROM `#tmp#7#t` JOIN b ON `#tmp#7#t`.a = b.a"
        );
        assert_eq!(
            rw("DELETE FROM t USING t, b"),
            "DELETE FROM `#tmp#7#t` USING `#tmp#7#t`, b"
        );
    }

    #[test]
    fn other_names_and_other_databases_are_left() {
        for sql in [
            "SELECT t FROM base",
            "SELECT 't' FROM base",
            "SELECT a FROM e.t",
            "SELECT x.a FROM base AS t, u AS x WHERE t.a = 1",
            "CREATE TABLE t (a INT)",
        ] {
            assert_eq!(rewrite(sql, Some("d"), 7, &owned()), None, "{sql}");
        }
        assert_eq!(rewrite("SELECT a FROM t", Some("e"), 7, &owned()), None);
        assert_eq!(rewrite("SELECT a FROM t", Some("d"), 7, &[]), None);
    }

    #[test]
    fn create_temporary_table_gets_the_connections_name() {
        assert_eq!(
            rewrite(
                "CREATE TEMPORARY TABLE IF NOT EXISTS d.n (a INT)",
                None,
                3,
                &[]
            )
            .as_deref(),
            Some("CREATE TEMPORARY TABLE IF NOT EXISTS d.`#tmp#3#n` (a INT)")
        );
        assert_eq!(
            rw("CREATE TEMPORARY TABLE n AS SELECT a FROM t"),
            "CREATE TEMPORARY TABLE `#tmp#7#n` AS SELECT a FROM `#tmp#7#t`"
        );
        assert_eq!(
            visible_text(3, "Table 'd.#tmp#3#n' already exists"),
            "Table 'd.n' already exists"
        );
    }
}
