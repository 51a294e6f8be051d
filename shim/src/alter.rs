//! ALTER TABLE's pure half: the statement's operations as MySQL writes
//! them ([`parse`]), and [`Shape`], a table's new schema built one
//! operation at a time, which remembers where each new column's values
//! come from and how each existing row becomes a row of the new table
//! ([`Shape::convert_value`]). [`crate::alter_table`] runs the
//! statement (constraints, foreign keys, the storage call) over these;
//! nothing here reads or writes the database.

use std::ops::ControlFlow;

use ladle_common::{
    coerce, coerce_adjusting, Adjustment, CoerceError, Collation, ColumnDefault, ColumnSchema,
    IndexSchema, SqlType, TableSchema, Value,
};
use sqlparser::ast::{self, AlterTableOperation, Expr, Ident, MySQLColumnPosition};
use sqlparser::keywords::Keyword;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::Token;

use crate::checks::CheckConstraint;
use crate::error::{self, Result, ShimError, WireError};
pub use crate::table_options::CharsetSpec;
use crate::table_options::{self, eat, eat_all, is_word, option_value, TableOption};

/// One operation of an ALTER TABLE statement.
// A statement's few operations live as long as the statement: boxing the
// parsed one would only cost the matches on it their patterns.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Op {
    /// An operation sqlparser parses.
    Parsed(AlterTableOperation),
    /// `ADD COLUMN IF NOT EXISTS` (MariaDB).
    AddColumnIfNotExists(ast::ColumnDef, Option<MySQLColumnPosition>),
    /// `MODIFY [COLUMN] def` or `CHANGE [COLUMN] old def`: column `old`
    /// takes the definition (sqlparser's own forms drop its COLLATE).
    Redefine {
        old: String,
        def: ast::ColumnDef,
        position: Option<MySQLColumnPosition>,
    },
    /// `ADD [UNIQUE] INDEX|KEY [name] (... (expr) ...)`: an index with a
    /// functional key part ([`crate::functional_index`]).
    AddFunctionalIndex(crate::functional_index::IndexDecl),
    /// `DROP INDEX|KEY [IF EXISTS] name`.
    DropIndex { name: String, if_exists: bool },
    /// `DROP FOREIGN KEY [IF EXISTS] name`.
    DropForeignKey { name: String, if_exists: bool },
    /// `DROP CHECK name` (MySQL) or `DROP CONSTRAINT name` (a CHECK, a
    /// FOREIGN KEY or a UNIQUE key).
    DropConstraint {
        name: String,
        if_exists: bool,
        check_only: bool,
    },
    /// `RENAME INDEX|KEY a TO b`.
    RenameIndex { from: String, to: String },
    /// `RENAME [TO|AS] name`.
    RenameTable(ast::ObjectName),
    /// `AUTO_INCREMENT [=] n`.
    AutoIncrement(u64),
    /// `COMMENT [=] 'text'`.
    Comment(String),
    /// `[DEFAULT] CHARACTER SET|CHARSET [=] x`, `[DEFAULT] COLLATE [=] y`
    /// (the table's default for columns added later), or with `convert`,
    /// `CONVERT TO CHARACTER SET x [COLLATE y]` (every text column too).
    Charset(CharsetSpec),
    /// `ENGINE [=] name`.
    Engine(String),
    /// A table option with no effect in Ladle (ALGORITHM, LOCK, FORCE,
    /// ROW_FORMAT, ...).
    Ignored,
}

/// Parses `ALTER [ONLINE] [IGNORE] TABLE name op [, op ...]`.
pub fn parse(sql: &str) -> Result<(ast::ObjectName, Vec<Op>)> {
    let mut p = crate::sqltext::parser(sql)?;
    crate::sqltext::contain_parser_panic(|| statement(&mut p))
}

fn statement(p: &mut Parser) -> std::result::Result<(ast::ObjectName, Vec<Op>), ParserError> {
    p.expect_keyword(Keyword::ALTER)?;
    eat(p, "ONLINE");
    eat(p, "IGNORE");
    p.expect_keyword(Keyword::TABLE)?;
    let name = p.parse_object_name(false)?;
    let mut ops = Vec::new();
    while !at_end(p) {
        ops.push(op(p)?);
        // Table options may follow one another without commas.
        if !p.consume_token(&Token::Comma) && !at_end(p) && !is_table_option(p) {
            return p.expected("',' or the end of the statement", p.peek_token());
        }
    }
    Ok((name, ops))
}

/// `RENAME TABLE a TO b [, c TO d ...]`: the pairs.
pub fn parse_rename(sql: &str) -> Result<Vec<(ast::ObjectName, ast::ObjectName)>> {
    let mut p = crate::sqltext::parser(sql)?;
    crate::sqltext::contain_parser_panic(|| {
        p.expect_keyword(Keyword::RENAME)?;
        if !eat(&mut p, "TABLE") {
            p.expect_keyword(Keyword::TABLES)?;
        }
        let mut pairs = Vec::new();
        loop {
            let from = p.parse_object_name(false)?;
            p.expect_keyword(Keyword::TO)?;
            let to = p.parse_object_name(false)?;
            pairs.push((from, to));
            if !p.consume_token(&Token::Comma) {
                break;
            }
        }
        if !at_end(&mut p) {
            return p.expected("the end of the statement", p.peek_token());
        }
        Ok(pairs)
    })
}

fn at_end(p: &mut Parser) -> bool {
    while p.consume_token(&Token::SemiColon) {}
    matches!(p.peek_token().token, Token::EOF)
}

/// Words that start an option only ALTER TABLE takes.
const ALTER_ONLY_OPTIONS: &[&str] = &["ALGORITHM", "LOCK", "FORCE"];

fn is_table_option(p: &Parser) -> bool {
    let t = p.peek_token().token;
    table_options::is_table_option(&t) || ALTER_ONLY_OPTIONS.iter().any(|w| is_word(&t, w))
}

fn ident(p: &mut Parser) -> std::result::Result<String, ParserError> {
    Ok(p.parse_identifier(false)?.value)
}

fn op(p: &mut Parser) -> std::result::Result<Op, ParserError> {
    if is_table_option(p) {
        return table_option(p);
    }
    if eat(p, "DROP") {
        let if_exists = |p: &mut Parser| eat_all(p, &["IF", "EXISTS"]);
        if eat(p, "INDEX") || eat(p, "KEY") {
            let if_exists = if_exists(p);
            let name = ident(p)?;
            return Ok(Op::DropIndex { name, if_exists });
        }
        if eat_all(p, &["FOREIGN", "KEY"]) {
            let if_exists = if_exists(p);
            let name = ident(p)?;
            return Ok(Op::DropForeignKey { name, if_exists });
        }
        for (word, check_only) in [("CHECK", true), ("CONSTRAINT", false)] {
            if eat(p, word) {
                let if_exists = if_exists(p);
                let name = ident(p)?;
                return Ok(Op::DropConstraint {
                    name,
                    if_exists,
                    check_only,
                });
            }
        }
        if eat_all(p, &["PRIMARY", "KEY"]) {
            return Ok(Op::Parsed(AlterTableOperation::DropPrimaryKey));
        }
        eat(p, "COLUMN");
        let if_exists = if_exists(p);
        let column_name = p.parse_identifier(false)?;
        let cascade = eat(p, "CASCADE");
        eat(p, "RESTRICT");
        return Ok(Op::Parsed(AlterTableOperation::DropColumn {
            column_name,
            if_exists,
            cascade,
        }));
    }
    if eat(p, "RENAME") {
        if eat(p, "INDEX") || eat(p, "KEY") {
            let from = ident(p)?;
            p.expect_keyword(Keyword::TO)?;
            let to = ident(p)?;
            return Ok(Op::RenameIndex { from, to });
        }
        if eat(p, "COLUMN") {
            let old_column_name = p.parse_identifier(false)?;
            p.expect_keyword(Keyword::TO)?;
            let new_column_name = p.parse_identifier(false)?;
            return Ok(Op::Parsed(AlterTableOperation::RenameColumn {
                old_column_name,
                new_column_name,
            }));
        }
        let _ = eat(p, "TO") || eat(p, "AS");
        return Ok(Op::RenameTable(p.parse_object_name(false)?));
    }
    if crate::functional_index::at_added_decl(p) {
        eat(p, "ADD");
        return Ok(Op::AddFunctionalIndex(crate::functional_index::parse_decl(
            p,
        )?));
    }
    if eat_all(p, &["ADD", "COLUMN", "IF", "NOT", "EXISTS"])
        || eat_all(p, &["ADD", "IF", "NOT", "EXISTS"])
    {
        let def = p.parse_column_def()?;
        return Ok(Op::AddColumnIfNotExists(def, column_position(p)?));
    }
    if eat(p, "MODIFY") || is_word(&p.peek_token().token, "CHANGE") {
        let old = if eat(p, "CHANGE") {
            eat(p, "COLUMN");
            Some(ident(p)?)
        } else {
            eat(p, "COLUMN");
            None
        };
        let def = p.parse_column_def()?;
        return Ok(Op::Redefine {
            old: old.unwrap_or_else(|| def.name.value.clone()),
            def,
            position: column_position(p)?,
        });
    }
    if eat_all(p, &["CONVERT", "TO"]) {
        if !eat_all(p, &["CHARACTER", "SET"]) && !eat(p, "CHARSET") {
            return p.expected("CHARACTER SET", p.peek_token());
        }
        let charset = Some(option_value(p)?);
        let collation = if eat(p, "COLLATE") {
            Some(option_value(p)?)
        } else {
            None
        };
        return Ok(Op::Charset(CharsetSpec {
            charset,
            collation,
            convert: true,
        }));
    }
    Ok(Op::Parsed(p.parse_alter_table_operation()?))
}

/// `FIRST`, `AFTER col` or nothing (the end).
fn column_position(
    p: &mut Parser,
) -> std::result::Result<Option<MySQLColumnPosition>, ParserError> {
    Ok(if eat(p, "FIRST") {
        Some(MySQLColumnPosition::First)
    } else if eat(p, "AFTER") {
        Some(MySQLColumnPosition::After(p.parse_identifier(false)?))
    } else {
        None
    })
}

/// A table option (see [`table_options::table_option`]), or `FORCE`,
/// `ALGORITHM [=] x`, `LOCK [=] x`.
fn table_option(p: &mut Parser) -> std::result::Result<Op, ParserError> {
    if eat(p, "FORCE") {
        return Ok(Op::Ignored);
    }
    if eat(p, "ALGORITHM") || eat(p, "LOCK") {
        option_value(p)?;
        return Ok(Op::Ignored);
    }
    Ok(match table_options::table_option(p)? {
        TableOption::Engine(name) => Op::Engine(name),
        TableOption::AutoIncrement(n) => Op::AutoIncrement(n),
        TableOption::Comment(text) => Op::Comment(text),
        TableOption::Charset(spec) => Op::Charset(spec),
        TableOption::Ignored => Op::Ignored,
    })
}

/// A table's new schema, built one ALTER TABLE operation at a time, with
/// where each column's values come from.
#[derive(Clone, Debug)]
pub struct Shape {
    pub old: TableSchema,
    pub schema: TableSchema,
    /// Per column of `schema`: its position in `old`, or `None` for a
    /// column this statement adds.
    pub sources: Vec<Option<usize>>,
    /// Per column of `schema`: its definition changed (MODIFY, CHANGE, a
    /// new PRIMARY KEY), so its values are converted to it.
    pub converted: Vec<bool>,
    pub checks: Vec<CheckConstraint>,
    pub checks_changed: bool,
    /// Checks added (existing rows must pass them).
    pub checks_added: bool,
    /// The primary key changed.
    pub primary_changed: bool,
    /// Names of the old columns dropped so far.
    pub dropped: Vec<String>,
}

impl Shape {
    pub fn new(old: &TableSchema, checks: Vec<CheckConstraint>) -> Shape {
        Shape {
            old: old.clone(),
            schema: old.clone(),
            sources: (0..old.columns.len()).map(Some).collect(),
            converted: vec![false; old.columns.len()],
            checks,
            checks_changed: false,
            checks_added: false,
            primary_changed: false,
            dropped: Vec::new(),
        }
    }

    /// The position of column `name`, or MySQL's 1054 naming the table.
    pub fn column(&self, name: &str) -> Result<usize> {
        self.schema
            .column_index(name)
            .filter(|&c| !self.schema.columns[c].is_hidden())
            .ok_or_else(|| ShimError::UnknownColumn(name.into(), self.schema.name.clone()))
    }

    /// Whether every existing row stays as it is (columns kept in place,
    /// unconverted, new ones appended with plain defaults, same primary
    /// key): then only the schema changes, and old rows read the new
    /// columns' defaults.
    pub fn rows_unchanged(&self) -> bool {
        let old = self.old.columns.len();
        self.sources.len() >= old
            && self.sources[..old]
                .iter()
                .enumerate()
                .all(|(i, s)| *s == Some(i))
            && self.sources[old..].iter().all(Option::is_none)
            && !self.converted.iter().any(|c| *c)
            && !self.primary_changed
            && !self.checks_added
            && self.schema.columns[old..]
                .iter()
                .all(|c| c.default.generation().is_none() && !c.auto_increment)
    }

    /// Inserts `column` at `position` (`None`: last).
    pub fn add_column(
        &mut self,
        column: ColumnSchema,
        position: Option<&MySQLColumnPosition>,
    ) -> Result<usize> {
        let at = self.position(position)?;
        self.schema.columns.insert(at, column);
        self.sources.insert(at, None);
        self.converted.insert(at, false);
        self.remap(|c| if c >= at { Some(c + 1) } else { Some(c) });
        Ok(at)
    }

    /// Where FIRST / AFTER col / nothing (the end) puts a column.
    fn position(&self, position: Option<&MySQLColumnPosition>) -> Result<usize> {
        Ok(match position {
            None => self.schema.columns.len(),
            Some(MySQLColumnPosition::First) => 0,
            Some(MySQLColumnPosition::After(c)) => self.column(&c.value)? + 1,
        })
    }

    /// Moves column `from` to FIRST / AFTER col.
    pub fn move_column(&mut self, from: usize, position: &MySQLColumnPosition) -> Result<()> {
        if let MySQLColumnPosition::After(c) = position {
            if self.column(&c.value)? == from {
                return Ok(());
            }
        }
        let column = self.schema.columns.remove(from);
        let source = self.sources.remove(from);
        let converted = self.converted.remove(from);
        // Positions as if `from` were gone.
        self.remap(|c| match c {
            c if c == from => Some(usize::MAX),
            c if c > from => Some(c - 1),
            c => Some(c),
        });
        let to = self.position(Some(position))?;
        self.schema.columns.insert(to, column);
        self.sources.insert(to, source);
        self.converted.insert(to, converted);
        self.remap(|c| match c {
            usize::MAX => Some(to),
            c if c >= to => Some(c + 1),
            c => Some(c),
        });
        Ok(())
    }

    /// Drops column `at` as MariaDB does: it leaves every index that has
    /// it (an index left without columns goes; a multi-column UNIQUE key
    /// or primary key refuses with 1072), a CHECK on it alone goes with
    /// it, and a CHECK or generated column using it with others is 1054.
    pub fn drop_column(&mut self, at: usize) -> Result<()> {
        let name = self.schema.columns[at].name.clone();
        if self.schema.columns.len() == 1 {
            return Err(wire(
                error::ER_CANT_REMOVE_ALL_FIELDS,
                "You can't delete all columns with ALTER TABLE; use DROP TABLE instead".into(),
            ));
        }
        let missing_key_column = || {
            wire(
                error::ER_KEY_COLUMN_DOES_NOT_EXIST,
                format!("Key column '{name}' doesn't exist in table"),
            )
        };
        if let Some(pk) = &self.schema.primary_key {
            if pk.contains(&at) && pk.len() > 1 {
                return Err(missing_key_column());
            }
        }
        if self
            .schema
            .indexes
            .iter()
            .any(|i| i.unique && i.columns.len() > 1 && i.columns.contains(&at))
        {
            return Err(missing_key_column());
        }
        self.check_no_functional_dependency(&name)?;
        for (i, c) in self.schema.columns.iter().enumerate() {
            if let Some(sql) = c.default.generation() {
                if i != at && mentions(sql, &name)? {
                    return Err(ShimError::UnknownColumn(name, "GENERATED ALWAYS AS".into()));
                }
            }
        }
        self.dropped.push(name.clone());
        let mut kept = Vec::new();
        for check in std::mem::take(&mut self.checks) {
            let on_column = check
                .column
                .as_deref()
                .is_some_and(|c| c.eq_ignore_ascii_case(&name));
            let names = identifiers(&check.sql)?;
            let uses = names.iter().any(|n| n.eq_ignore_ascii_case(&name));
            let only_dropped = names
                .iter()
                .all(|n| self.dropped.iter().any(|d| d.eq_ignore_ascii_case(n)));
            if on_column || (uses && only_dropped) {
                self.checks_changed = true;
                continue;
            }
            if uses {
                return Err(ShimError::UnknownColumn(name, "CHECK".into()));
            }
            kept.push(check);
        }
        self.checks = kept;
        self.schema.columns.remove(at);
        self.sources.remove(at);
        self.converted.remove(at);
        if self.in_primary_key(at) {
            self.primary_changed = true;
        }
        self.remap(|c| match c {
            c if c == at => None,
            c if c > at => Some(c - 1),
            c => Some(c),
        });
        Ok(())
    }

    /// Renames column `at` to `to`, in the checks and generated columns
    /// that use it too.
    pub fn rename_column(&mut self, at: usize, to: &str) -> Result<()> {
        let from = self.schema.columns[at].name.clone();
        if from == to {
            return Ok(());
        }
        if self
            .schema
            .column_index(to)
            .is_some_and(|other| other != at)
        {
            return Err(wire(
                error::ER_DUP_FIELDNAME,
                format!("Duplicate column name '{to}'"),
            ));
        }
        self.check_no_functional_dependency(&from)?;
        self.schema.columns[at].name = to.to_string();
        for c in &mut self.schema.columns {
            if let ColumnDefault::Generated { expr, .. } = &mut c.default {
                *expr = rename_identifier(expr, &from, to)?;
            }
        }
        for check in &mut self.checks {
            let sql = rename_identifier(&check.sql, &from, to)?;
            let on_column = check
                .column
                .as_deref()
                .is_some_and(|c| c.eq_ignore_ascii_case(&from));
            if sql != check.sql || on_column {
                self.checks_changed = true;
            }
            check.sql = sql;
            if on_column {
                check.column = Some(to.to_string());
                if check.name.eq_ignore_ascii_case(&from) {
                    check.name = to.to_string();
                }
            }
        }
        Ok(())
    }

    /// A column a functional key part reads cannot be dropped or renamed
    /// (MySQL's 3837): the index must go first.
    fn check_no_functional_dependency(&self, name: &str) -> Result<()> {
        for c in self.schema.columns.iter().filter(|c| c.is_hidden()) {
            if c.default
                .generation()
                .map(|sql| mentions(sql, name))
                .transpose()?
                == Some(true)
            {
                return Err(wire(
                    error::ER_DEPENDENT_BY_FUNCTIONAL_INDEX,
                    format!(
                        "Column '{name}' has a functional index dependency and cannot be dropped or renamed."
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Replaces column `at`'s definition (MODIFY / CHANGE): its values are
    /// converted to the new one when its type, collation or constraints
    /// differ.
    pub fn redefine_column(&mut self, at: usize, mut column: ColumnSchema) {
        let old = &self.schema.columns[at];
        let same_values = old.ty == column.ty
            && old.collation == column.collation
            && (column.nullable || !old.nullable)
            && old.auto_increment == column.auto_increment
            && old.default.generation() == column.default.generation();
        if !same_values {
            self.converted[at] = true;
        }
        if self.in_primary_key(at) {
            column.nullable = false;
        }
        self.schema.columns[at] = column;
    }

    /// CONVERT TO CHARACTER SET: every character column takes `collation`
    /// (JSON keeps its own, as in MySQL); rows are rewritten under it, so
    /// a UNIQUE key it makes collide fails the statement (1062). The
    /// positions of the character columns.
    pub fn convert_text_columns(&mut self, collation: Collation) -> Vec<usize> {
        let mut character_columns = Vec::new();
        for (at, column) in self.schema.columns.iter_mut().enumerate() {
            if column.ty.is_text() && column.ty != SqlType::Json {
                character_columns.push(at);
                if column.collation != collation {
                    column.collation = collation;
                    self.converted[at] = true;
                }
            }
        }
        character_columns
    }

    fn in_primary_key(&self, column: usize) -> bool {
        self.schema
            .primary_key
            .as_ref()
            .is_some_and(|pk| pk.contains(&column))
    }

    /// Adds index `index` (its columns already positions of `schema`).
    pub fn add_index(&mut self, index: IndexSchema) -> Result<()> {
        if index.name.eq_ignore_ascii_case("PRIMARY") || self.schema.index(&index.name).is_some() {
            return Err(wire(
                error::ER_DUP_KEYNAME,
                format!("Duplicate key name '{}'", index.name),
            ));
        }
        self.schema.indexes.push(index);
        Ok(())
    }

    /// Makes `columns` the primary key (NOT NULL: their values are checked).
    pub fn set_primary_key(&mut self, columns: Vec<usize>) -> Result<()> {
        if self.schema.primary_key.is_some() {
            return Err(ShimError::MultiplePrimaryKey);
        }
        for &c in &columns {
            if self.schema.columns[c].nullable {
                self.schema.columns[c].nullable = false;
                self.converted[c] = true;
            }
        }
        self.schema.primary_key = Some(columns);
        self.primary_changed = true;
        Ok(())
    }

    pub fn drop_primary_key(&mut self) -> Result<()> {
        if self.schema.primary_key.take().is_none() {
            return Err(wire(
                error::ER_CANT_DROP_FIELD_OR_KEY,
                "Can't DROP INDEX `PRIMARY`; check that it exists".into(),
            ));
        }
        self.primary_changed = true;
        Ok(())
    }

    /// Applies `f` to every column position in the indexes and primary
    /// key (`None`: the column leaves the index; an index left without
    /// columns goes).
    fn remap(&mut self, f: impl Fn(usize) -> Option<usize>) {
        let apply = |cols: &mut Vec<usize>| {
            *cols = cols.iter().filter_map(|&c| f(c)).collect();
        };
        if let Some(pk) = &mut self.schema.primary_key {
            apply(pk);
            if pk.is_empty() {
                self.schema.primary_key = None;
            }
        }
        for index in &mut self.schema.indexes {
            apply(&mut index.columns);
        }
        self.schema.indexes.retain(|i| !i.columns.is_empty());
    }

    /// The AUTO_INCREMENT column must be the first column of a key (1075).
    pub fn check_auto_increment(&self) -> Result<()> {
        let autos: Vec<usize> = (0..self.schema.columns.len())
            .filter(|&c| self.schema.columns[c].auto_increment)
            .collect();
        let keyed = |c: usize| {
            self.schema
                .primary_key
                .as_ref()
                .is_some_and(|pk| pk.first() == Some(&c))
                || self
                    .schema
                    .indexes
                    .iter()
                    .any(|i| i.columns.first() == Some(&c))
        };
        if autos.len() > 1 || autos.iter().any(|&c| !keyed(c)) {
            return Err(wire(
                error::ER_WRONG_AUTO_KEY,
                "Incorrect table definition; there can be only one auto column and it must be defined as a key".into(),
            ));
        }
        Ok(())
    }

    /// Column `column`'s value for row number `row` of the old table,
    /// converted to its new definition as MariaDB's ALTER TABLE converts
    /// it: in strict mode a value that does not fit fails the statement
    /// (1292, 1264, 1406; NULL into NOT NULL 1265); otherwise it is
    /// adjusted, with a warning in `warnings`.
    pub fn convert_value(
        column: &ColumnSchema,
        v: Value,
        row: usize,
        strict: bool,
        warnings: &mut Vec<(u16, String)>,
    ) -> Result<Value> {
        let name = &column.name;
        if v.is_null() {
            if column.nullable || column.auto_increment || column.default.generation().is_some() {
                return Ok(Value::Null);
            }
            let message = format!("Data truncated for column '{name}' at row {row}");
            if strict {
                return Err(wire(error::ER_WARN_DATA_TRUNCATED, message));
            }
            warnings.push((error::ER_WARN_DATA_TRUNCATED.errno, message));
            let mut implicit = column.clone();
            implicit.default = ColumnDefault::None;
            return Ok(ladle_storage::added_column_value(&implicit));
        }
        if strict {
            return coerce(&v, column).map_err(|e| value_error(e, column, &v, row));
        }
        match coerce_adjusting(&v, column) {
            Ok((fits, None)) => Ok(fits),
            Ok((adjusted, Some(how))) => {
                let (code, message) = match how {
                    Adjustment::Clamped => (
                        error::ER_WARN_DATA_OUT_OF_RANGE,
                        format!("Out of range value for column '{name}' at row {row}"),
                    ),
                    Adjustment::Zeroed => (
                        error::ER_TRUNCATED_WRONG_VALUE,
                        truncated_incorrect(&column.ty, &v),
                    ),
                    Adjustment::Truncated | Adjustment::Replaced => (
                        error::ER_WARN_DATA_TRUNCATED,
                        format!("Data truncated for column '{name}' at row {row}"),
                    ),
                };
                warnings.push((code.errno, message));
                Ok(adjusted)
            }
            Err(e) => Err(value_error(e, column, &v, row)),
        }
    }
}

/// MariaDB's error for an existing value that does not fit a column's new
/// definition.
fn value_error(e: CoerceError, column: &ColumnSchema, v: &Value, row: usize) -> ShimError {
    let name = &column.name;
    match e {
        CoerceError::OutOfRange { .. } => wire(
            error::ER_WARN_DATA_OUT_OF_RANGE,
            format!("Out of range value for column '{name}' at row {row}"),
        ),
        // A string cut shorter is "truncated"; a number's text too long.
        CoerceError::TooLong { .. } if matches!(v, Value::Text(_)) => wire(
            error::ER_WARN_DATA_TRUNCATED,
            format!("Data truncated for column '{name}' at row {row}"),
        ),
        CoerceError::TooLong { .. } => wire(
            error::ER_DATA_TOO_LONG,
            format!("Data too long for column '{name}' at row {row}"),
        ),
        CoerceError::Incorrect { .. } if is_numeric(&column.ty) => wire(
            error::ER_TRUNCATED_WRONG_VALUE,
            truncated_incorrect(&column.ty, v),
        ),
        CoerceError::Incorrect { .. } if matches!(column.ty, SqlType::Enum(_)) => wire(
            error::ER_WARN_DATA_TRUNCATED,
            format!("Data truncated for column '{name}' at row {row}"),
        ),
        other => other.into(),
    }
}

fn is_numeric(ty: &SqlType) -> bool {
    matches!(
        ty,
        SqlType::Int { .. } | SqlType::Decimal { .. } | SqlType::Float | SqlType::Double
    )
}

/// "Truncated incorrect INTEGER value: 'abc'" (1292).
fn truncated_incorrect(ty: &SqlType, v: &Value) -> String {
    let kind = match ty {
        SqlType::Int { .. } => "INTEGER",
        SqlType::Decimal { .. } => "DECIMAL",
        _ => "DOUBLE",
    };
    format!("Truncated incorrect {kind} value: '{v}'")
}

/// The column names expression `sql` uses.
pub fn identifiers(sql: &str) -> Result<Vec<String>> {
    let expr = crate::sqltext::parse_expr(sql)?;
    let mut names = Vec::new();
    let _ = ast::visit_expressions(&expr, |e| {
        match e {
            Expr::Identifier(i) => names.push(i.value.clone()),
            Expr::CompoundIdentifier(parts) => {
                if let Some(last) = parts.last() {
                    names.push(last.value.clone());
                }
            }
            _ => {}
        }
        ControlFlow::<()>::Continue(())
    });
    Ok(names)
}

/// Whether expression `sql` uses column `name`.
pub fn mentions(sql: &str, name: &str) -> Result<bool> {
    Ok(identifiers(sql)?
        .iter()
        .any(|n| n.eq_ignore_ascii_case(name)))
}

/// Expression `sql` with column `from` renamed to `to`.
fn rename_identifier(sql: &str, from: &str, to: &str) -> Result<String> {
    if !mentions(sql, from)? {
        return Ok(sql.to_string());
    }
    let mut expr = crate::sqltext::parse_expr(sql)?;
    let _ = ast::visit_expressions_mut(&mut expr, |e| {
        let ident = match e {
            Expr::Identifier(i) => Some(i),
            Expr::CompoundIdentifier(parts) => parts.last_mut(),
            _ => None,
        };
        if let Some(i) = ident {
            if i.value.eq_ignore_ascii_case(from) {
                *i = Ident::with_quote('`', to);
            }
        }
        ControlFlow::<()>::Continue(())
    });
    Ok(crate::sqltext::expr_text(&expr))
}

fn wire(code: error::MysqlCode, message: String) -> ShimError {
    ShimError::Wire(WireError { code, message })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ops(sql: &str) -> Vec<Op> {
        parse(sql).unwrap().1
    }

    #[test]
    fn mysql_forms_parse() {
        let o = ops("ALTER TABLE t DROP INDEX a, DROP KEY IF EXISTS b, DROP FOREIGN KEY c, DROP CHECK d, RENAME INDEX e TO f, RENAME TO g, COMMENT = 'x', ENGINE=InnoDB DEFAULT CHARSET=utf8mb4, AUTO_INCREMENT = 5");
        assert!(matches!(&o[0], Op::DropIndex { name, if_exists: false } if name == "a"));
        assert!(matches!(&o[1], Op::DropIndex { name, if_exists: true } if name == "b"));
        assert!(matches!(&o[2], Op::DropForeignKey { name, .. } if name == "c"));
        assert!(matches!(
            &o[3],
            Op::DropConstraint {
                check_only: true,
                ..
            }
        ));
        assert!(matches!(&o[4], Op::RenameIndex { from, to } if from == "e" && to == "f"));
        assert!(matches!(&o[5], Op::RenameTable(_)));
        assert!(matches!(&o[6], Op::Comment(c) if c == "x"));
        assert!(matches!(&o[7], Op::Engine(e) if e == "InnoDB"));
        assert!(
            matches!(&o[8], Op::Charset(c) if c.charset.as_deref() == Some("utf8mb4") && !c.convert)
        );
        assert!(matches!(o[9], Op::AutoIncrement(5)));
        let o = ops("ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_bin, COLLATE = utf8mb4_general_ci");
        let convert = CharsetSpec {
            charset: Some("utf8mb4".into()),
            collation: Some("utf8mb4_bin".into()),
            convert: true,
        };
        assert!(matches!(&o[0], Op::Charset(c) if *c == convert));
        assert!(
            matches!(&o[1], Op::Charset(c) if c.collation.as_deref() == Some("utf8mb4_general_ci"))
        );
        let o = ops("ALTER TABLE t MODIFY c INT NOT NULL FIRST, CHANGE COLUMN a b TEXT, DROP COLUMN IF EXISTS z, ADD COLUMN IF NOT EXISTS q INT AFTER b");
        assert_eq!(o.len(), 4);
        assert!(matches!(&o[3], Op::AddColumnIfNotExists(d, Some(_)) if d.name.value == "q"));
        assert!(parse("ALTER TABLE t DROP INDEX").is_err());
        assert!(parse("ALTER TABLE t DROP COLUMN a b").is_err());
    }

    #[test]
    fn renames_reach_expressions() {
        assert_eq!(rename_identifier("a > b", "A", "c").unwrap(), "`c` > b");
        assert_eq!(identifiers("(a + t.b) > 0").unwrap(), vec!["a", "b"]);
    }
}
