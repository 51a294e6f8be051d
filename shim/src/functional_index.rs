//! Functional key parts (MySQL 8): `KEY idx ((expr))`, `CREATE INDEX idx
//! ON t ((LOWER(name)), pub_date DESC)`, `ALTER TABLE t ADD UNIQUE
//! ((a + b))`.
//!
//! As in MySQL, each expression part becomes a hidden VIRTUAL generated
//! column, `!hidden!<index>!<part>!<n>` (see
//! [`ColumnSchema::is_hidden`]), and the index covers that column like any
//! other: the generated-column machinery ([`crate::checks`]) computes it
//! on every write, storage keeps it and enforces a UNIQUE index over it
//! (1062), and DROP INDEX drops it with the index. It is left out
//! wherever a table's columns are listed to a client (`SELECT *`,
//! DESCRIBE, information_schema.COLUMNS, INSERT without a column list);
//! SHOW CREATE TABLE, SHOW INDEX and information_schema.STATISTICS show
//! the expression in its place.
//!
//! This module parses the declarations and turns them into hidden columns
//! and an [`IndexSchema`]; CREATE TABLE ([`crate::ddl`]) and ALTER TABLE
//! ([`crate::alter_table`]) add them to the table they build. Declarations
//! with ASC / DESC key parts (which sqlparser does not read in CREATE
//! TABLE or ALTER TABLE either), a PRIMARY KEY's included, take the same
//! path; a part's order is noted in the table's notes
//! ([`crate::table_notes`]) for SHOW INDEX, STATISTICS and SHOW CREATE
//! TABLE.

use std::ops::ControlFlow;

use ladle_common::{ColumnDefault, ColumnSchema, IndexSchema, SqlType, TableSchema};
use sqlparser::ast;
use sqlparser::keywords::Keyword;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::Token;

use crate::error::{self, Result, ShimError, WireError};
use crate::table_options::{eat, eat_all};

/// One key part of an index declaration.
#[derive(Clone, Debug)]
pub enum KeyPart {
    /// A column (a prefix length after it is accepted and ignored, as for
    /// any Ladle index).
    Column(String),
    /// `(expr)`: a functional key part.
    Expression(Box<ast::Expr>),
}

/// An index declaration sqlparser does not read: with a functional key
/// part, or a part declared ASC or DESC.
#[derive(Clone, Debug)]
pub struct IndexDecl {
    pub name: Option<String>,
    pub unique: bool,
    /// `PRIMARY KEY ((expr))`: refused (3756).
    pub primary: bool,
    pub parts: Vec<KeyPart>,
    /// Per part: declared DESC.
    pub descending: Vec<bool>,
    /// Per part: the prefix length it was declared with (`c(191)`), kept
    /// in the table's notes for SHOW CREATE TABLE; the key is on whole
    /// values.
    pub prefixes: Vec<Option<u32>>,
}

impl IndexDecl {
    /// The names of the columns at `positions` (of `columns`: the key
    /// [`add_index`] or [`primary_key`] made from this declaration) whose
    /// part is DESC.
    pub fn descending_columns(&self, columns: &[ColumnSchema], positions: &[usize]) -> Vec<String> {
        positions
            .iter()
            .zip(&self.descending)
            .filter(|(_, desc)| **desc)
            .map(|(&c, _)| columns[c].name.clone())
            .collect()
    }

    /// `(column name, length)` of the parts at `positions` (as for
    /// [`Self::descending_columns`]) declared with a prefix length.
    pub fn prefix_columns(
        &self,
        columns: &[ColumnSchema],
        positions: &[usize],
    ) -> Vec<(String, u32)> {
        positions
            .iter()
            .zip(&self.prefixes)
            .filter_map(|(&c, n)| Some((columns[c].name.clone(), (*n)?)))
            .collect()
    }
}

/// Whether the tokens of a CREATE TABLE or ALTER TABLE declare an index
/// sqlparser does not read: `KEY|INDEX|UNIQUE [name] (... (expr) ...)`,
/// a key part with a prefix length, or one with ASC or DESC.
pub fn declared(t: &[Token]) -> bool {
    (0..t.len()).any(|i| key_list_at(t, i).is_some_and(|open| needs_decl(t, open)))
}

fn is_key_word(x: Option<&Token>) -> bool {
    matches!(x, Some(Token::Word(w)) if w.quote_style.is_none()
        && ["KEY", "INDEX", "UNIQUE"].iter().any(|k| w.value.eq_ignore_ascii_case(k)))
}

/// If an index's key word is at `i`, the position of its key-part list's
/// opening parenthesis.
fn key_list_at(t: &[Token], i: usize) -> Option<usize> {
    if !is_key_word(t.get(i)) {
        return None;
    }
    let mut j = i + 1;
    // UNIQUE KEY, UNIQUE INDEX.
    if is_key_word(t.get(j)) {
        j += 1;
    }
    // The index's name, if it has one.
    if matches!(t.get(j), Some(Token::Word(_))) {
        j += 1;
    }
    matches!(t.get(j), Some(Token::LParen)).then_some(j)
}

/// The position of the parenthesis closing the one at `open`.
fn closing(t: &[Token], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (k, tok) in t.iter().enumerate().skip(open) {
        match tok {
            Token::LParen => depth += 1,
            Token::RParen => {
                depth -= 1;
                if depth == 0 {
                    return Some(k);
                }
            }
            _ => {}
        }
    }
    None
}

/// Whether a part of the key-part list opening at `open` is `(expr)`, has
/// a prefix length (`` `name`(191) ``, which every utf8mb4 dump of a long
/// VARCHAR key has: sqlparser reads neither) or has ASC or DESC.
fn needs_decl(t: &[Token], open: usize) -> bool {
    let Some(close) = closing(t, open) else {
        return false;
    };
    // Any parenthesis in the list is an expression part or a prefix length.
    t[open + 1..close].iter().any(|tok| match tok {
        Token::LParen => true,
        Token::Word(w) => {
            w.quote_style.is_none()
                && (w.value.eq_ignore_ascii_case("ASC") || w.value.eq_ignore_ascii_case("DESC"))
        }
        _ => false,
    })
}

/// Parses `[CONSTRAINT [sym]] {PRIMARY KEY | UNIQUE [INDEX|KEY] | INDEX |
/// KEY} [name] (part, ...)` and the index options after it (ignored), up
/// to a top-level comma or the end.
pub fn parse_decl(p: &mut Parser) -> std::result::Result<IndexDecl, ParserError> {
    let mut name = None;
    if eat(p, "CONSTRAINT") && !starts_key(p) {
        name = Some(p.parse_identifier(false)?.value);
    }
    let primary = eat_all(p, &["PRIMARY", "KEY"]);
    let unique = primary || eat(p, "UNIQUE");
    let keyword = eat(p, "INDEX") || eat(p, "KEY");
    if !primary && !unique && !keyword {
        return p.expected("INDEX, KEY or UNIQUE", p.peek_token());
    }
    if !matches!(p.peek_token().token, Token::LParen) {
        name = Some(p.parse_identifier(false)?.value);
    }
    p.expect_token(&Token::LParen)?;
    let mut parts = Vec::new();
    let mut descending = Vec::new();
    let mut prefixes = Vec::new();
    loop {
        if p.consume_token(&Token::LParen) {
            let expr = p.parse_expr()?;
            p.expect_token(&Token::RParen)?;
            parts.push(KeyPart::Expression(Box::new(expr)));
            prefixes.push(None);
        } else {
            let column = p.parse_identifier(false)?.value;
            // A prefix length.
            let mut prefix = None;
            if p.consume_token(&Token::LParen) {
                let n = p.parse_literal_uint()?;
                prefix = Some(u32::try_from(n).map_err(|_| {
                    ParserError::ParserError(format!("prefix length {n} is out of range"))
                })?);
                p.expect_token(&Token::RParen)?;
            }
            parts.push(KeyPart::Column(column));
            prefixes.push(prefix);
        }
        let order = p.parse_one_of_keywords(&[Keyword::ASC, Keyword::DESC]);
        descending.push(order == Some(Keyword::DESC));
        if !p.consume_token(&Token::Comma) {
            break;
        }
    }
    p.expect_token(&Token::RParen)?;
    // Index options (USING BTREE, COMMENT '...', VISIBLE, ...).
    let mut depth = 0usize;
    loop {
        match p.peek_token().token {
            Token::EOF | Token::SemiColon => break,
            Token::Comma if depth == 0 => break,
            Token::RParen if depth == 0 => break,
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            _ => {}
        }
        p.next_token();
    }
    Ok(IndexDecl {
        name,
        unique,
        primary,
        parts,
        descending,
        prefixes,
    })
}

/// A key part of CREATE INDEX, which sqlparser reads as an expression: a
/// column, a column with a prefix length (`c(10)`, read as a call, the
/// length ignored as for any Ladle index), or `(expr)`. Any other
/// expression (`a + b`, `LOWER(a)`) is MySQL's and MariaDB's syntax error
/// (1064): an expression key part takes parentheses of its own.
pub fn created_part(e: &ast::Expr) -> Result<KeyPart> {
    match e {
        ast::Expr::Nested(x) => Ok(KeyPart::Expression(x.clone())),
        ast::Expr::Identifier(i) => Ok(KeyPart::Column(i.value.clone())),
        ast::Expr::Function(f) if is_prefix_length(f) => {
            Ok(KeyPart::Column(crate::sqltext::last_part(&f.name)))
        }
        other => Err(ShimError::Parse(format!(
            "check the manual that corresponds to your MariaDB server version for the right \
             syntax to use near '{other}' at line 1"
        ))),
    }
}

/// The prefix length of a CREATE INDEX key part `column(length)`, if any.
pub fn created_prefix(e: &ast::Expr) -> Option<u32> {
    match e {
        ast::Expr::Function(f) if is_prefix_length(f) => match &f.args {
            ast::FunctionArguments::List(list) => match list.args.as_slice() {
                [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(ast::Expr::Value(
                    ast::Value::Number(n, _),
                )))] => n.parse().ok(),
                _ => None,
            },
            _ => None,
        },
        _ => None,
    }
}

/// Whether a call is `column(length)`.
fn is_prefix_length(f: &ast::Function) -> bool {
    let ast::FunctionArguments::List(list) = &f.args else {
        return false;
    };
    f.name.0.len() == 1
        && f.over.is_none()
        && f.filter.is_none()
        && list.duplicate_treatment.is_none()
        && list.clauses.is_empty()
        && matches!(
            list.args.as_slice(),
            [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(
                ast::Expr::Value(ast::Value::Number(..))
            ))]
        )
}

fn starts_key(p: &Parser) -> bool {
    let t = p.peek_token().token;
    ["PRIMARY", "UNIQUE", "INDEX", "KEY"]
        .iter()
        .any(|k| crate::table_options::is_word(&t, k))
}

/// Whether `ADD` is followed by an index declaration with a functional key
/// part (the parser is at ADD).
pub fn at_added_decl(p: &Parser) -> bool {
    // The rest of the statement (the key-part list may be long).
    let mut tokens: Vec<Token> = Vec::new();
    loop {
        let t = p.peek_nth_token(tokens.len()).token;
        if t == Token::EOF {
            break;
        }
        tokens.push(t);
    }
    if tokens.is_empty() {
        return false;
    }
    if !matches!(&tokens[0], Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case("ADD"))
    {
        return false;
    }
    let mut i = 1;
    if matches!(&tokens[i], Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case("CONSTRAINT"))
    {
        i += 1;
        if !is_key_word(tokens.get(i)) && !is_primary(tokens.get(i)) {
            i += 1;
        }
    }
    let primary = is_primary(tokens.get(i));
    if primary {
        i += 1;
    }
    key_list_at(&tokens, i).is_some_and(|open| needs_decl(&tokens, open))
}

fn is_primary(x: Option<&Token>) -> bool {
    matches!(x, Some(Token::Word(w)) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case("PRIMARY"))
}

/// A CREATE TABLE whose element list declares indexes with functional key
/// parts: the statement's text without those elements, and them.
pub fn split_create_table(t: &[Token]) -> Result<(String, Vec<IndexDecl>)> {
    let open = t
        .iter()
        .position(|x| matches!(x, Token::LParen))
        .ok_or_else(|| ShimError::Parse("near CREATE TABLE".into()))?;
    let close = closing(t, open).ok_or_else(|| ShimError::Parse("near CREATE TABLE".into()))?;
    let elements = crate::tokens::top_level_parts(&t[open + 1..close]);
    let mut kept: Vec<Token> = t[..=open].to_vec();
    let mut decls = Vec::new();
    // From the first declaration sqlparser cannot read on, every key is
    // read here: the keys are added in the order they are declared (which
    // SHOW CREATE TABLE, and so a dump, keeps).
    let mut reading = false;
    for element in elements {
        // `CONSTRAINT [name]` before the key word.
        let mut i = 0;
        if matches!(element.first(), Some(Token::Word(w)) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case("CONSTRAINT"))
        {
            i = if is_key_word(element.get(1)) || is_primary(element.get(1)) {
                1
            } else {
                2
            };
        }
        let primary = is_primary(element.get(i));
        if primary {
            i += 1;
        }
        let key_list = key_list_at(element, i);
        let unreadable = key_list.is_some_and(|o| needs_decl(element, o));
        reading |= unreadable;
        // (A PRIMARY KEY sqlparser reads stays: it comes first anyway.)
        if unreadable || (reading && key_list.is_some() && !primary) {
            let sql = crate::tokens::render_tokens(element);
            let mut p = crate::sqltext::parser(&sql)?;
            decls.push(crate::sqltext::contain_parser_panic(|| parse_decl(&mut p))?);
            continue;
        }
        if !matches!(kept.last(), Some(Token::LParen)) {
            kept.push(Token::Comma);
        }
        kept.extend_from_slice(element);
    }
    kept.extend_from_slice(&t[close..]);
    Ok((crate::tokens::render_tokens(&kept), decls))
}

/// Adds the hidden columns of `decl`'s expression parts to the end of
/// `schema`'s columns and returns the index over them (not yet added: its
/// name is checked by the caller). The index's name, if not given, is
/// MySQL's: `functional_index`, `functional_index_2`, ... (or the first
/// column's, when the first part is a column). Not for a PRIMARY KEY
/// (see [`primary_key`]).
pub fn add_index(schema: &mut TableSchema, decl: &IndexDecl) -> Result<IndexSchema> {
    if decl.primary {
        return Err(ShimError::Internal(
            "a PRIMARY KEY declaration read as an index".into(),
        ));
    }
    let name = match &decl.name {
        Some(n) => n.clone(),
        None => {
            let base = match decl.parts.first() {
                Some(KeyPart::Column(c)) => c.clone(),
                _ => "functional_index".into(),
            };
            free_index_name(&schema.indexes, base)
        }
    };
    let mut columns = Vec::new();
    for (n, part) in decl.parts.iter().enumerate() {
        let at = match part {
            KeyPart::Column(c) => column_at(&schema.columns, c)?,
            KeyPart::Expression(e) => {
                let column = hidden_column(schema, &name, n, e)?;
                schema.columns.push(column);
                schema.columns.len() - 1
            }
        };
        columns.push(at);
    }
    Ok(IndexSchema {
        id: 0,
        name,
        columns,
        unique: decl.unique,
    })
}

/// The positions in `columns` of a `PRIMARY KEY` declaration's columns
/// (the caller makes them the primary key, and notes its DESC parts under
/// [`PRIMARY`]): its parts must be columns (3756, as in MySQL).
pub fn primary_key(columns: &[ColumnSchema], decl: &IndexDecl) -> Result<Vec<usize>> {
    decl.parts
        .iter()
        .map(|part| match part {
            KeyPart::Column(c) => column_at(columns, c),
            KeyPart::Expression(_) => Err(wire(
                error::ER_FUNCTIONAL_INDEX_PRIMARY_KEY,
                "The primary key cannot be a functional index".into(),
            )),
        })
        .collect()
}

/// The position of the (visible) column a key part names.
fn column_at(columns: &[ColumnSchema], column: &str) -> Result<usize> {
    columns
        .iter()
        .position(|c| c.name.eq_ignore_ascii_case(column) && !c.is_hidden())
        .ok_or_else(|| ShimError::UnknownColumn(column.to_string(), "table definition".into()))
}

/// The name of the primary key, as SHOW INDEX and the table's notes give it.
pub const PRIMARY: &str = "PRIMARY";

/// Functions whose value is not a function of the row: refused in a
/// functional key part (3758), as MySQL refuses them.
const DISALLOWED: &[&str] = &[
    "RAND",
    "UUID",
    "UUID_SHORT",
    "NOW",
    "CURRENT_TIMESTAMP",
    "LOCALTIME",
    "LOCALTIMESTAMP",
    "SYSDATE",
    "CURDATE",
    "CURRENT_DATE",
    "CURTIME",
    "CURRENT_TIME",
    "UTC_DATE",
    "UTC_TIME",
    "UTC_TIMESTAMP",
    "UNIX_TIMESTAMP",
    "CONNECTION_ID",
    "LAST_INSERT_ID",
    "USER",
    "CURRENT_USER",
    "SESSION_USER",
    "SYSTEM_USER",
    "DATABASE",
    "SCHEMA",
    "FOUND_ROWS",
    "ROW_COUNT",
    "SLEEP",
    "GET_LOCK",
    "RELEASE_LOCK",
    "VERSION",
];

/// The hidden column for expression part `part` of index `index`.
fn hidden_column(
    schema: &TableSchema,
    index: &str,
    part: usize,
    e: &ast::Expr,
) -> Result<ColumnSchema> {
    let e = strip_nested(e);
    if matches!(
        e,
        ast::Expr::Identifier(_) | ast::Expr::CompoundIdentifier(_)
    ) {
        return Err(wire(
            error::ER_FUNCTIONAL_INDEX_ON_FIELD,
            "Functional index on a column is not supported. Consider using a regular index instead."
                .into(),
        ));
    }
    let mut disallowed = false;
    let mut read: Vec<usize> = Vec::new();
    let _ = ast::visit_expressions(e, |x| {
        match x {
            ast::Expr::Function(f) => {
                let name = crate::sqltext::last_part(&f.name).to_ascii_uppercase();
                disallowed |= DISALLOWED.contains(&name.as_str());
            }
            ast::Expr::Subquery(_) | ast::Expr::Exists { .. } | ast::Expr::InSubquery { .. } => {
                disallowed = true
            }
            ast::Expr::Identifier(i) if i.value.starts_with('@') => disallowed = true,
            ast::Expr::Identifier(i) => read.extend(schema.column_index(&i.value)),
            ast::Expr::CompoundIdentifier(parts) => {
                read.extend(parts.last().and_then(|i| schema.column_index(&i.value)));
            }
            _ => {}
        }
        ControlFlow::<()>::Continue(())
    });
    if disallowed {
        return Err(wire(
            error::ER_FUNCTIONAL_INDEX_FUNCTION_IS_NOT_ALLOWED,
            format!("Expression of functional index '{index}' contains a disallowed function."),
        ));
    }
    if read.iter().any(|&c| schema.columns[c].auto_increment) {
        return Err(wire(
            error::ER_FUNCTIONAL_INDEX_REF_AUTO_INCREMENT,
            format!("Expression of functional index '{index}' cannot refer to an auto-increment column."),
        ));
    }
    let (ty, collation) = typed(schema, e, &read)?;
    let sql = crate::sqltext::expr_text(&as_mysql_shows(e));
    let base = format!("{}{index}!{part}!", ladle_common::HIDDEN_COLUMN_PREFIX);
    let name = (0..)
        .map(|n| format!("{base}{n}"))
        .find(|n| schema.column_index(n).is_none())
        .unwrap_or(base);
    let mut column = ColumnSchema::new(name, ty);
    if let Some(c) = collation {
        column.collation = c;
    }
    column.default = ColumnDefault::Generated {
        expr: sql,
        stored: false,
    };
    Ok(column)
}

/// The type of a hidden column computing `e` over `schema`'s rows (whose
/// columns `read` it reads), and for text, its collation: that of the
/// first text column it reads (MySQL derives it from the arguments).
fn typed(
    schema: &TableSchema,
    e: &ast::Expr,
    read: &[usize],
) -> Result<(SqlType, Option<ladle_common::Collation>)> {
    let compiled = ladle_dataflow::compile_row_expr(e, Some(schema))?;
    let (ty, _) = compiled.result_type(schema);
    let ty = match ty {
        SqlType::Text(_) | SqlType::Blob(_) | SqlType::Json => {
            return Err(wire(
                error::ER_FUNCTIONAL_INDEX_ON_LOB,
                "Cannot create a functional index on an expression that returns a BLOB or TEXT. Please consider using CAST.".into(),
            ))
        }
        // LOWER(an ENUM) is any string, not one of the labels.
        SqlType::Enum(labels) => {
            SqlType::VarChar(labels.iter().map(|l| l.chars().count() as u32).max().unwrap_or(1))
        }
        ty => ty,
    };
    let collation = read
        .iter()
        .map(|&c| &schema.columns[c])
        .find(|c| c.ty.is_text())
        .map(|c| c.collation)
        .filter(|_| ty.is_text());
    Ok((ty, collation))
}

/// After ALTER TABLE changed the columns a functional key part reads
/// (MODIFY name VARCHAR(30)), its hidden column takes the type the
/// expression now has, as MySQL re-derives it: the positions of the
/// hidden columns whose type or collation changed.
pub fn retype_hidden(schema: &mut TableSchema) -> Result<Vec<usize>> {
    let mut changed = Vec::new();
    for at in 0..schema.columns.len() {
        let Some(sql) = expression(&schema.columns[at]) else {
            continue;
        };
        let e = crate::sqltext::parse_expr(sql)?;
        let mut read = Vec::new();
        let _ = ast::visit_expressions(&e, |x| {
            if let ast::Expr::Identifier(i) = x {
                read.extend(schema.column_index(&i.value));
            }
            ControlFlow::<()>::Continue(())
        });
        let (ty, collation) = typed(schema, &e, &read)?;
        let column = &mut schema.columns[at];
        let collation = collation.unwrap_or(column.collation);
        if column.ty != ty || column.collation != collation {
            column.ty = ty;
            column.collation = collation;
            changed.push(at);
        }
    }
    Ok(changed)
}

/// `e` as MySQL keeps and shows a functional key part: function names in
/// lower case, columns quoted (`lower(`name`)`).
pub(crate) fn as_mysql_shows(e: &ast::Expr) -> ast::Expr {
    let mut shown = e.clone();
    let _ = ast::visit_expressions_mut(&mut shown, |x| {
        match x {
            ast::Expr::Function(f) => {
                for part in &mut f.name.0 {
                    part.value = part.value.to_ascii_lowercase();
                }
            }
            ast::Expr::Identifier(i) => i.quote_style = Some('`'),
            ast::Expr::CompoundIdentifier(parts) => {
                for part in parts {
                    part.quote_style = Some('`');
                }
            }
            _ => {}
        }
        ControlFlow::<()>::Continue(())
    });
    shown
}

/// `e` inside its parentheses.
pub(crate) fn strip_nested(mut e: &ast::Expr) -> &ast::Expr {
    while let ast::Expr::Nested(inner) = e {
        e = inner;
    }
    e
}

/// The hidden columns only index `at` of `schema` covers, highest
/// position first (DROP INDEX drops them with it).
pub fn hidden_columns_of(schema: &TableSchema, at: usize) -> Vec<usize> {
    let mut cols: Vec<usize> = schema.indexes[at]
        .columns
        .iter()
        .copied()
        .filter(|&c| schema.columns[c].is_hidden())
        .filter(|c| {
            !schema
                .indexes
                .iter()
                .enumerate()
                .any(|(i, x)| i != at && x.columns.contains(c))
        })
        .collect();
    cols.sort_unstable_by(|a, b| b.cmp(a));
    cols.dedup();
    cols
}

/// The expression a hidden column computes, as SHOW CREATE TABLE and
/// information_schema.STATISTICS show a functional key part.
pub fn expression(c: &ColumnSchema) -> Option<&str> {
    if c.is_hidden() {
        c.default.generation()
    } else {
        None
    }
}

/// A user column named like a hidden one is refused (1166), so the
/// prefix only ever means hidden.
pub fn check_column_name(name: &str) -> Result<()> {
    if name.starts_with(ladle_common::HIDDEN_COLUMN_PREFIX) {
        return Err(wire(
            error::ER_WRONG_COLUMN_NAME,
            format!("Incorrect column name '{name}'"),
        ));
    }
    Ok(())
}

/// `base`, or `base_2`, `base_3`... when taken.
pub(crate) fn free_index_name(existing: &[IndexSchema], base: String) -> String {
    if !existing.iter().any(|i| i.name.eq_ignore_ascii_case(&base)) {
        return base;
    }
    (2..)
        .map(|n| format!("{base}_{n}"))
        .find(|c| !existing.iter().any(|i| i.name.eq_ignore_ascii_case(c)))
        .unwrap_or(base)
}

fn wire(code: error::MysqlCode, message: String) -> ShimError {
    ShimError::Wire(WireError { code, message })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(sql: &str) -> Vec<Token> {
        crate::tokens::tokens(sql).unwrap()
    }

    #[test]
    fn declarations_are_found_in_any_part() {
        assert!(declared(&toks("CREATE TABLE t (a INT, KEY k ((a + 1)))")));
        assert!(declared(&toks("CREATE TABLE t (a INT, KEY (a, (a + 1)))")));
        assert!(declared(&toks(
            "ALTER TABLE t ADD UNIQUE INDEX ((LOWER(a)))"
        )));
        assert!(declared(&toks("CREATE TABLE t (a INT, KEY k (a DESC))")));
        assert!(declared(&toks(
            "CREATE TABLE t (a INT, PRIMARY KEY (a DESC))"
        )));
        // A prefix length, as dumps write them (sqlparser reads none).
        assert!(declared(&toks(
            "CREATE TABLE t (a TEXT, KEY k (a), KEY p (`a`(191)))"
        )));
        assert!(declared(&toks(
            "CREATE TABLE t (a INT, KEY k (a), UNIQUE (a(10)))"
        )));
        let plain = [
            "CREATE TABLE t (a INT, KEY k (a), UNIQUE (a))",
            "CREATE TABLE t (a INT CHECK ((a + 1) > 0))",
            "SELECT * FROM t ORDER BY a DESC",
        ];
        for sql in plain {
            assert!(!declared(&toks(sql)), "{sql}");
        }
    }

    #[test]
    fn a_long_added_declaration_is_read_whole() {
        let sum = (0..100).map(|i| format!("a + {i}")).collect::<Vec<_>>();
        let sql = format!(
            "ALTER TABLE t ADD INDEX k (({})), ADD COLUMN b INT",
            sum.join(" + ")
        );
        let mut p = crate::sqltext::parser(&sql).unwrap();
        for _ in 0..3 {
            p.next_token();
        }
        assert!(at_added_decl(&p));
        p.next_token();
        let decl = parse_decl(&mut p).unwrap();
        assert_eq!(decl.name.as_deref(), Some("k"));
        assert!(p.consume_token(&Token::Comma));
    }

    #[test]
    fn create_table_keeps_the_other_elements() {
        let (sql, decls) = split_create_table(&toks(
            "CREATE TABLE t (a INT, b VARCHAR(5), INDEX ((a + 1)) USING BTREE, KEY kb (b), CONSTRAINT u UNIQUE KEY ((LOWER(b)), a DESC))",
        ))
        .unwrap();
        // `kb`, after the first declaration, is read here too: keys are
        // added in their declared order.
        assert_eq!(decls.len(), 3);
        assert_eq!(sql.replace(' ', ""), "CREATETABLEt(aINT,bVARCHAR(5))");
        assert_eq!(decls[1].name.as_deref(), Some("kb"));
        assert_eq!(decls[2].name.as_deref(), Some("u"));
        assert!(decls[2].unique);
        assert!(matches!(&decls[2].parts[1], KeyPart::Column(c) if c == "a"));
        assert_eq!(decls[2].descending, vec![false, true]);
        assert!(decls[0].name.is_none());
    }

    #[test]
    fn a_descending_primary_key_is_a_declaration() {
        let (sql, decls) = split_create_table(&toks(
            "CREATE TABLE t (a INT, b INT, CONSTRAINT pk PRIMARY KEY (a, b DESC), KEY (b))",
        ))
        .unwrap();
        assert_eq!(sql.replace(' ', ""), "CREATETABLEt(aINT,bINT)");
        assert!(decls[0].primary);
        assert!(!decls[1].primary);
        assert_eq!(decls[0].descending, vec![false, true]);
        let (sql, decls) =
            split_create_table(&toks("CREATE TABLE t (a INT, PRIMARY KEY (a))")).unwrap();
        assert!(decls.is_empty(), "{sql}");
    }

    #[test]
    fn create_index_parts_are_columns_prefixes_or_parenthesized() {
        let part = |sql: &str| {
            let e = crate::sqltext::parse_expr(sql).unwrap();
            created_part(&e).map_err(|e| e.mysql_code().errno)
        };
        assert!(matches!(part("a"), Ok(KeyPart::Column(c)) if c == "a"));
        assert!(matches!(part("c(10)"), Ok(KeyPart::Column(c)) if c == "c"));
        assert!(matches!(part("(a + b)"), Ok(KeyPart::Expression(_))));
        for bare in ["a + b", "LOWER(c)", "c(a)", "t.a"] {
            assert_eq!(part(bare).err(), Some(1064), "{bare}");
        }
    }
}
