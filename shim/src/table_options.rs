//! Table options as MySQL writes them (`ENGINE=InnoDB`, `DEFAULT CHARSET
//! utf8mb4`, `COMMENT 'x'`, `ROW_FORMAT=DYNAMIC`, ...): in any order, with
//! or without `=`, separated by spaces or commas. One reader
//! ([`table_option`]) serves ALTER TABLE ([`crate::alter`]) and CREATE
//! TABLE ([`create_table`], called from the SQL dialect's statement hook:
//! sqlparser reads CREATE TABLE's options only in its own fixed order, some
//! only with `=`).

use sqlparser::ast::helpers::stmt_create_table::CreateTableBuilder;
use sqlparser::ast::{
    self, CommentDef, Expr, Ident, ObjectName, SqlOption, Statement, TableEngine,
};
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::Token;

use crate::collation_names::NamedCollation;

use crate::error::{Result, ShimError};

type ParseResult<T> = std::result::Result<T, ParserError>;

/// One table option, as far as Ladle keeps it.
#[derive(Debug, PartialEq)]
pub enum TableOption {
    /// `ENGINE [=] name`.
    Engine(String),
    /// `AUTO_INCREMENT [=] n`.
    AutoIncrement(u64),
    /// `COMMENT [=] 'text'`.
    Comment(String),
    /// `[DEFAULT] CHARACTER SET|CHARSET [=] x` or `[DEFAULT] COLLATE [=] y`.
    Charset(CharsetSpec),
    /// An option with no effect in Ladle (ROW_FORMAT, KEY_BLOCK_SIZE,
    /// MAX_ROWS, TABLESPACE, ...).
    Ignored,
}

/// A character set and/or collation a statement names, as written.
#[derive(Debug, Default, PartialEq)]
pub struct CharsetSpec {
    pub charset: Option<String>,
    pub collation: Option<String>,
    /// `CONVERT TO` (ALTER TABLE): existing text columns take it too.
    pub convert: bool,
}

/// The collation a character set and/or collation name selects: the
/// collation if named, else the character set's default (see
/// [`crate::collation_names`]). Ladle stores every text as utf8mb4, so a
/// character set only picks the comparison.
impl CharsetSpec {
    pub fn collation(&self) -> Result<NamedCollation> {
        if let Some(name) = &self.collation {
            return crate::collation_names::by_name(name);
        }
        let name = self.charset.as_deref().unwrap_or("utf8mb4");
        if name.eq_ignore_ascii_case("binary") {
            // MySQL turns text columns into binary string types then.
            return Err(ShimError::Unsupported("CHARACTER SET binary".into()));
        }
        if name.eq_ignore_ascii_case("default") {
            return crate::collation_names::of_charset("utf8mb4");
        }
        crate::collation_names::of_charset(name)
    }
}

/// The words that start a table option (CREATE TABLE and ALTER TABLE).
const TABLE_OPTIONS: &[&str] = &[
    "COMMENT",
    "ENGINE",
    "DEFAULT",
    "CHARSET",
    "CHARACTER",
    "COLLATE",
    "ROW_FORMAT",
    "AUTO_INCREMENT",
    "KEY_BLOCK_SIZE",
    "STATS_AUTO_RECALC",
    "STATS_PERSISTENT",
    "STATS_SAMPLE_PAGES",
    "PACK_KEYS",
    "CHECKSUM",
    "DELAY_KEY_WRITE",
    "MAX_ROWS",
    "MIN_ROWS",
    "AVG_ROW_LENGTH",
    "PAGE_CHECKSUM",
    "TRANSACTIONAL",
    "TABLESPACE",
    "INSERT_METHOD",
];

/// Whether `t` starts a table option.
pub fn is_table_option(t: &Token) -> bool {
    TABLE_OPTIONS.iter().any(|w| is_word(t, w))
}

/// Consumes the unquoted word `w` if it comes next.
pub fn eat(p: &mut Parser, w: &str) -> bool {
    if is_word(&p.peek_token().token, w) {
        p.next_token();
        return true;
    }
    false
}

/// Whether `t` is the unquoted word `w`.
pub fn is_word(t: &Token, w: &str) -> bool {
    matches!(t, Token::Word(x) if x.quote_style.is_none() && x.value.eq_ignore_ascii_case(w))
}

/// Consumes the words `ws` if they come next, in order.
pub fn eat_all(p: &mut Parser, ws: &[&str]) -> bool {
    if !ws
        .iter()
        .enumerate()
        .all(|(i, w)| is_word(&p.peek_nth_token(i).token, w))
    {
        return false;
    }
    for _ in ws {
        p.next_token();
    }
    true
}

/// A table option's value after its name: `[=] word|'text'`.
pub fn option_value(p: &mut Parser) -> ParseResult<String> {
    let _ = p.consume_token(&Token::Eq);
    match p.next_token().token {
        Token::Word(w) => Ok(w.value),
        Token::SingleQuotedString(s) | Token::DoubleQuotedString(s) => Ok(s),
        other => Err(ParserError::ParserError(format!(
            "Expected a table option value, found {other}"
        ))),
    }
}

/// One table option (the parser is at a word [`is_table_option`] accepts).
pub fn table_option(p: &mut Parser) -> ParseResult<TableOption> {
    let default = eat(p, "DEFAULT");
    if eat_all(p, &["CHARACTER", "SET"]) || eat(p, "CHARSET") {
        return Ok(TableOption::Charset(CharsetSpec {
            charset: Some(option_value(p)?),
            ..CharsetSpec::default()
        }));
    }
    if eat(p, "COLLATE") {
        return Ok(TableOption::Charset(CharsetSpec {
            collation: Some(option_value(p)?),
            ..CharsetSpec::default()
        }));
    }
    if default {
        // DEFAULT only qualifies a character set or collation.
        return p.expected("CHARACTER SET, CHARSET or COLLATE", p.peek_token());
    }
    if eat(p, "COMMENT") {
        let _ = p.consume_token(&Token::Eq);
        return Ok(TableOption::Comment(p.parse_literal_string()?));
    }
    if eat(p, "ENGINE") {
        return Ok(TableOption::Engine(option_value(p)?));
    }
    if eat(p, "AUTO_INCREMENT") {
        let _ = p.consume_token(&Token::Eq);
        return match p.next_token().token {
            Token::Number(n, _) => Ok(TableOption::AutoIncrement(n.parse().unwrap_or(0))),
            other => Err(ParserError::ParserError(format!(
                "Expected a number after AUTO_INCREMENT, found {other}"
            ))),
        };
    }
    p.next_token();
    let _ = p.consume_token(&Token::Eq);
    match p.next_token().token {
        Token::Word(_)
        | Token::Number(..)
        | Token::SingleQuotedString(_)
        | Token::DoubleQuotedString(_) => Ok(TableOption::Ignored),
        other => Err(ParserError::ParserError(format!(
            "Expected a table option value, found {other}"
        ))),
    }
}

const AUTO_INCREMENT: &str = "AUTO_INCREMENT";

fn is_auto_increment(o: &SqlOption) -> bool {
    matches!(o, SqlOption::KeyValue { key, .. } if key.value == AUTO_INCREMENT)
}

/// The `AUTO_INCREMENT = n` option of a CREATE TABLE [`create_table`] read.
pub fn auto_increment(properties: &[SqlOption]) -> Option<u64> {
    properties.iter().find_map(|o| match o {
        SqlOption::KeyValue {
            key,
            value: Expr::Value(ast::Value::Number(n, _)),
        } if key.value == AUTO_INCREMENT => n.parse().ok(),
        _ => None,
    })
}

/// `CREATE [TEMPORARY] TABLE [IF NOT EXISTS] name (columns) options [AS
/// query]` with MySQL's table options; `None` (nothing consumed) for the
/// other CREATE TABLE forms (LIKE, no column list), which sqlparser reads.
pub fn create_table(p: &mut Parser) -> Option<ParseResult<Statement>> {
    let temporary = is_word(&p.peek_nth_token(1).token, "TEMPORARY");
    let table_at = 1 + usize::from(temporary);
    if !is_word(&p.peek_token().token, "CREATE")
        || !is_word(&p.peek_nth_token(table_at).token, "TABLE")
        || !column_list_follows(p, table_at + 1)
    {
        return None;
    }
    for _ in 0..=table_at {
        p.next_token();
    }
    Some(create_table_body(p, temporary))
}

/// Whether `[IF NOT EXISTS] name (` starts at token `at`, and the
/// parenthesis is not `(LIKE other)`.
fn column_list_follows(p: &Parser, mut at: usize) -> bool {
    let word_at = |at: usize, w: &str| is_word(&p.peek_nth_token(at).token, w);
    if word_at(at, "IF") && word_at(at + 1, "NOT") && word_at(at + 2, "EXISTS") {
        at += 3;
    }
    if p.peek_nth_token(at + 1).token == Token::Period {
        at += 2;
    }
    let next = &p.peek_nth_token(at + 1).token;
    (*next == Token::LParen && !word_at(at + 2, "LIKE"))
        // `name [options] [AS] SELECT ...` (sqlparser wants AS).
        || is_word(next, "SELECT")
        || (is_table_option(next) && !is_word(next, "AS"))
}

fn create_table_body(p: &mut Parser, temporary: bool) -> ParseResult<Statement> {
    let if_not_exists = eat_all(p, &["IF", "NOT", "EXISTS"]);
    let name: ObjectName = p.parse_object_name(false)?;
    let (columns, constraints) = if p.peek_token().token == Token::LParen {
        p.parse_columns()?
    } else {
        (Vec::new(), Vec::new())
    };
    let mut table = CreateTableBuilder::new(name)
        .temporary(temporary)
        .if_not_exists(if_not_exists)
        .columns(columns)
        .constraints(constraints);
    while is_table_option(&p.peek_token().token) {
        table = with_option(table, table_option(p)?)?;
        // Options may be separated by commas.
        if p.peek_token().token == Token::Comma && is_table_option(&p.peek_nth_token(1).token) {
            p.next_token();
        }
    }
    if eat(p, "AS") || is_word(&p.peek_token().token, "SELECT") {
        table = table.query(Some(p.parse_query()?));
    }
    Ok(table.build())
}

/// The builder with `option` recorded where [`crate::ddl::create_table`]
/// reads it (a later option of the same kind wins, as in MySQL).
fn with_option(table: CreateTableBuilder, option: TableOption) -> ParseResult<CreateTableBuilder> {
    Ok(match option {
        TableOption::Engine(name) => table.engine(Some(TableEngine {
            name,
            parameters: None,
        })),
        // Kept as a table property: sqlparser's `auto_increment_offset` is
        // 32 bits wide, and a BIGINT key's counter (which SHOW CREATE TABLE
        // and so every dump shows) may be past it.
        TableOption::AutoIncrement(n) => {
            let mut properties = table.table_properties.clone();
            properties.retain(|o| !is_auto_increment(o));
            properties.push(SqlOption::KeyValue {
                key: Ident::new(AUTO_INCREMENT),
                value: Expr::Value(ast::Value::Number(n.to_string(), false)),
            });
            table.table_properties(properties)
        }
        TableOption::Comment(text) => table.comment(Some(CommentDef::WithEq(text))),
        TableOption::Charset(CharsetSpec {
            charset, collation, ..
        }) => match (charset, collation) {
            (Some(charset), _) => table.default_charset(Some(charset)),
            (_, collation) => table.collation(collation),
        },
        TableOption::Ignored => table,
    })
}

#[cfg(test)]
mod tests {
    use sqlparser::ast::Statement;

    use super::auto_increment;

    fn create(sql: &str) -> sqlparser::ast::CreateTable {
        match crate::sqltext::parse_statements(sql).unwrap().remove(0) {
            Statement::CreateTable(ct) => ct,
            other => panic!("not a CREATE TABLE: {other}"),
        }
    }

    #[test]
    fn options_in_any_order_reach_the_statement() {
        let ct = create(
            "CREATE TEMPORARY TABLE IF NOT EXISTS d.t (a INT) COMMENT 'c', DEFAULT CHARSET utf8mb4 \
             ROW_FORMAT=DYNAMIC AUTO_INCREMENT 9 COLLATE = utf8mb4_bin ENGINE InnoDB",
        );
        assert!(ct.temporary && ct.if_not_exists);
        assert_eq!(ct.name.to_string(), "d.t");
        assert_eq!(ct.columns.len(), 1);
        assert_eq!(ct.engine.map(|e| e.name).as_deref(), Some("InnoDB"));
        assert_eq!(auto_increment(&ct.table_properties), Some(9));
        assert_eq!(ct.default_charset.as_deref(), Some("utf8mb4"));
        assert_eq!(ct.collation.as_deref(), Some("utf8mb4_bin"));
        assert_eq!(
            ct.comment,
            Some(sqlparser::ast::CommentDef::WithEq("c".into()))
        );
    }

    #[test]
    fn auto_increment_takes_64_bits_and_the_last_wins() {
        // As SHOW CREATE TABLE (and so mariadb-dump) shows a BIGINT UNSIGNED
        // key's counter past 2^32; sqlparser's own field refused it.
        let ct =
            create("CREATE TABLE t (a INT) AUTO_INCREMENT=5 AUTO_INCREMENT=18446744073709551001");
        assert_eq!(
            auto_increment(&ct.table_properties),
            Some(18_446_744_073_709_551_001)
        );
    }

    #[test]
    fn other_forms_are_sqlparsers() {
        let ct = create("CREATE TABLE t2 LIKE t1");
        assert_eq!(ct.like.map(|l| l.to_string()).as_deref(), Some("t1"));
        assert!(crate::sqltext::parse_statements("CREATE TABLE t (a INT) ENGINE=InnoDB,").is_err());
        assert!(crate::sqltext::parse_statements("CREATE TABLE t (a INT) ROW_FORMAT=").is_err());
    }
}
