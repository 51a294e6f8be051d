//! CHECK constraints: declared in CREATE TABLE (column or table level) or
//! added by ALTER TABLE, kept in the catalog beside the table, and enforced
//! on every row an INSERT, REPLACE, UPDATE or ON DUPLICATE KEY UPDATE
//! writes, as MariaDB does: a row for which a check is FALSE fails the
//! statement with 4025 (NULL passes); INSERT IGNORE does not skip it.
//!
//! A check is kept as SQL text and compiled against the table's current
//! columns (cached per schema version), so it follows ADD COLUMN and the
//! table's renames. Checks are evaluated over the row coerced to the
//! column types, i.e. the values that will be stored.
//!
//! Generated columns (`GENERATED ALWAYS AS (expr) STORED | VIRTUAL`, kept
//! in the column's schema) are compiled beside the checks, since every
//! write that checks a row first computes them: their values are computed
//! from the row's other columns, in column order (a generated column may
//! use an earlier one), and stored whichever kind was declared.

use std::collections::HashMap;
use std::sync::Arc;

use ladle_common::{Row, SqlType, TableId, TableSchema};
use ladle_dataflow::{compile_row_expr, RowExpr};
use ladle_storage::{Storage, StorageError};
use parking_lot::RwLock;
use serde::{Deserialize, Serialize};

use crate::error::{Result, ShimError};

/// The catalog meta key holding a table's checks.
fn meta_key(table: TableId) -> String {
    format!("check/{table}")
}

/// One CHECK constraint as declared.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct CheckConstraint {
    /// The constraint name: given, or `<table>_chk_<n>` for an unnamed
    /// check, column- or table-level (MySQL 8.0's naming; see
    /// [`table_check_name`]). Tables created before carry MariaDB's
    /// (`CONSTRAINT_<n>`, a column check its column's name).
    pub name: String,
    /// The condition, as SQL text.
    pub sql: String,
    /// Declared on this column (dropped with it).
    pub column: Option<String>,
}

impl CheckConstraint {
    /// The name error 4025 shows: a column check is `table.column`.
    fn error_name(&self, table: &str) -> String {
        match &self.column {
            Some(c) => format!("{table}.{c}"),
            None => self.name.clone(),
        }
    }
}

/// The checks of each table, compiled for the schema version they were
/// compiled against.
#[derive(Default)]
pub struct CheckCache {
    compiled: RwLock<HashMap<TableId, Arc<TableChecks>>>,
}

/// A table's checks compiled against one version of its schema.
pub struct TableChecks {
    version: u32,
    database: String,
    table: String,
    checks: Vec<(CheckConstraint, RowExpr)>,
    /// Checks the column types imply (not shown as declared).
    implicit: Vec<(CheckConstraint, RowExpr)>,
    /// Each generated column's position and expression, in column order.
    generated: Vec<(usize, RowExpr)>,
}

impl TableChecks {
    /// Compiles `declared` against `schema`'s columns.
    pub fn compile(schema: &TableSchema, declared: Vec<CheckConstraint>) -> Result<TableChecks> {
        let mut checks = Vec::with_capacity(declared.len());
        for c in declared {
            let expr = compile(&c.sql, schema)?;
            checks.push((c, expr));
        }
        // A JSON column holds JSON documents only: MariaDB's JSON type is
        // LONGTEXT with CHECK (json_valid(column)), failing with 4025.
        let mut implicit = Vec::new();
        for c in schema.columns.iter().filter(|c| c.ty == SqlType::Json) {
            let check = CheckConstraint {
                name: c.name.clone(),
                sql: format!("json_valid(`{}`)", c.name.replace('`', "``")),
                column: Some(c.name.clone()),
            };
            let expr = compile(&check.sql, schema)?;
            implicit.push((check, expr));
        }
        Ok(TableChecks {
            version: schema.version,
            database: schema.database.clone(),
            table: schema.name.clone(),
            checks,
            implicit,
            generated: compile_generated(schema)?,
        })
    }

    /// Computes the generated columns of `row` (not yet coerced) from its
    /// other columns. A value that does not fit its column is left for the
    /// write to report, as any other value.
    pub fn fill_generated(&self, schema: &TableSchema, row: &mut Row) -> Result<(), StorageError> {
        if self.generated.is_empty() {
            return Ok(());
        }
        let mut coerced = coerce_lenient(schema, row);
        for (pos, expr) in &self.generated {
            let v = expr
                .eval(&coerced)
                .map_err(|e| StorageError::Expression(e.to_string()))?;
            let (Some(slot), Some(seen), Some(column)) = (
                row.get_mut(*pos),
                coerced.get_mut(*pos),
                schema.columns.get(*pos),
            ) else {
                return Err(StorageError::Internal(format!(
                    "generated column {pos} is not in the row"
                )));
            };
            *seen = ladle_common::coerce(&v, column).unwrap_or_else(|_| v.clone());
            *slot = v;
        }
        Ok(())
    }

    /// The checks as declared, in declaration order: what
    /// information_schema (CHECK_CONSTRAINTS, TABLE_CONSTRAINTS) and SHOW
    /// CREATE TABLE list, as MySQL 8.0 does. A JSON column's implicit
    /// `json_valid` check is not one (MySQL's JSON is a type of its own;
    /// MariaDB 10.11 lists it, named after the column).
    pub fn declared(&self) -> impl Iterator<Item = &CheckConstraint> {
        self.checks.iter().map(|(c, _)| c)
    }

    pub fn is_empty(&self) -> bool {
        self.checks.is_empty() && self.implicit.is_empty()
    }

    /// Fails with 4025 if any check is FALSE for `row` (already coerced to
    /// the column types). NULL passes, as in SQL.
    pub fn verify(&self, row: &Row) -> Result<(), StorageError> {
        for (check, expr) in self.checks.iter().chain(&self.implicit) {
            let v = expr
                .eval(row)
                .map_err(|e| StorageError::Expression(e.to_string()))?;
            if !v.is_null() && !expr.eval_predicate(row).unwrap_or(false) {
                return Err(StorageError::CheckFailed {
                    constraint: check.error_name(&self.table),
                    database: self.database.clone(),
                    table: self.table.clone(),
                });
            }
        }
        Ok(())
    }

    /// Like [`TableChecks::verify`] for a row not yet coerced: values that
    /// do not coerce are left for the write to report.
    pub fn verify_uncoerced(&self, schema: &TableSchema, row: &Row) -> Result<(), StorageError> {
        if self.is_empty() {
            return Ok(());
        }
        self.verify(&coerce_lenient(schema, row))
    }
}

/// Error 1906 for a value given for `schema`'s generated column `column`.
pub fn generated_value_given(schema: &TableSchema, column: &str) -> crate::error::WireError {
    crate::error::WireError {
        code: crate::error::ER_WARNING_NON_DEFAULT_VALUE_FOR_GENERATED_COLUMN,
        message: format!(
            "The value specified for generated column '{column}' in table '{}' has been ignored",
            schema.name
        ),
    }
}

/// `row` converted to the column types where its values convert.
pub(crate) fn coerce_lenient(schema: &TableSchema, row: &Row) -> Row {
    row.iter()
        .zip(&schema.columns)
        .map(|(v, c)| ladle_common::coerce(v, c).unwrap_or_else(|_| v.clone()))
        .collect()
}

/// The generated columns of `schema`, compiled (an unknown column fails
/// here, when the table or column is created).
fn compile_generated(schema: &TableSchema) -> Result<Vec<(usize, RowExpr)>> {
    schema
        .columns
        .iter()
        .enumerate()
        .filter_map(|(i, c)| c.default.generation().map(|sql| (i, sql)))
        .map(|(i, sql)| Ok((i, compile(sql, schema)?)))
        .collect()
}

impl CheckCache {
    /// The checks of `schema`'s table, compiled for its current version.
    pub fn for_table(&self, storage: &Storage, schema: &TableSchema) -> Result<Arc<TableChecks>> {
        if let Some(c) = self.compiled.read().get(&schema.id) {
            if c.version == schema.version {
                return Ok(c.clone());
            }
        }
        let compiled = Arc::new(TableChecks::compile(schema, load(storage, schema.id)?)?);
        self.compiled.write().insert(schema.id, compiled.clone());
        Ok(compiled)
    }

    /// Forgets what was compiled for `table` (its checks changed).
    pub fn invalidate(&self, table: TableId) {
        self.compiled.write().remove(&table);
    }
}

fn compile(sql: &str, schema: &TableSchema) -> Result<RowExpr> {
    let expr = crate::sqltext::parse_expr(sql)?;
    Ok(compile_row_expr(&expr, Some(schema))?)
}

/// The checks declared on `table`, in declaration order.
pub fn load(storage: &Storage, table: TableId) -> Result<Vec<CheckConstraint>> {
    let key = meta_key(table);
    let found = storage.list_meta(&key)?;
    match found.into_iter().find(|(k, _)| *k == key) {
        Some((_, bytes)) => postcard::from_bytes(&bytes)
            .map_err(|e| ShimError::Internal(format!("bad CHECK constraint record: {e}"))),
        None => Ok(Vec::new()),
    }
}

/// A check's condition as information_schema.CHECK_CONSTRAINTS shows it:
/// in parentheses, as MySQL 8.0 (which Ladle announces itself as) does and
/// ActiveRecord strips; inside them as MariaDB writes it, columns quoted,
/// function names and keywords in lower case, no space after a comma
/// (`(abs(`a`) > 0 and `b` in ('x','y'))`); the text as kept when it does
/// not parse. SHOW CREATE TABLE shows it so too, after CHECK.
pub fn shown_clause(sql: &str) -> String {
    let Ok(expr) = crate::sqltext::parse_expr(sql) else {
        return format!("({sql})");
    };
    let text = crate::functional_index::as_mysql_shows(&expr).to_string();
    // Lower-case the bare words: what is quoted (columns, strings) stays.
    let mut out = String::with_capacity(text.len() + 2);
    out.push('(');
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in text.chars() {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' && q != '`' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                }
                out.push(c);
            }
            // MariaDB writes a list's commas with no space after them
            // (`coalesce(`a`,'x') in ('a','b')`).
            None if c == ' ' && out.ends_with(',') => {}
            None => {
                if matches!(c, '\'' | '"' | '`') {
                    quote = Some(c);
                }
                out.push(c.to_ascii_lowercase());
            }
        }
    }
    out.push(')');
    out
}

/// Compiles each check against `schema` (an unknown column fails here, as
/// in MariaDB), before the table or constraint is created.
pub fn validate(schema: &TableSchema, checks: &[CheckConstraint]) -> Result<()> {
    compile_generated(schema)?;
    for c in checks {
        compile(&c.sql, schema)?;
    }
    Ok(())
}

/// Records `checks` as `schema`'s table's constraints.
pub fn store(
    storage: &Storage,
    cache: &CheckCache,
    schema: &TableSchema,
    checks: &[CheckConstraint],
) -> Result<()> {
    validate(schema, checks)?;
    let (key, value) = meta_record(schema.id, checks)?;
    match value {
        None => storage.delete_meta(&key)?,
        Some(bytes) => storage.put_meta(&key, &bytes)?,
    }
    cache.invalidate(schema.id);
    Ok(())
}

/// The catalog meta record holding `checks` as table `table`'s constraints
/// (`None`: the record is deleted), for a schema change that writes it.
pub fn meta_record(
    table: TableId,
    checks: &[CheckConstraint],
) -> Result<(String, Option<Vec<u8>>)> {
    Ok((meta_key(table), encoded_list(checks, "CHECK constraints")?))
}

/// A list of constraints as its catalog meta record holds it: `None` for
/// none (the record is deleted).
pub fn encoded_list<T: Serialize>(items: &[T], what: &str) -> Result<Option<Vec<u8>>> {
    if items.is_empty() {
        return Ok(None);
    }
    postcard::to_allocvec(items)
        .map(Some)
        .map_err(|e| ShimError::Internal(format!("encoding {what}: {e}")))
}

/// Forgets a dropped table's checks.
pub fn forget(storage: &Storage, cache: &CheckCache, table: TableId) -> Result<()> {
    storage.delete_meta(&meta_key(table))?;
    cache.invalidate(table);
    Ok(())
}

/// The name a check of table `table` declared as `name` (if named) takes
/// beside `existing`: 1826 "Duplicate CHECK constraint name" if another
/// check has it (MariaDB's code; MySQL 8.0's is 3822). An unnamed one,
/// column- or table-level, is `<table>_chk_<n>` as in MySQL 8.0, n one
/// more than the highest such n the table has. (MySQL numbers a CREATE
/// TABLE's unnamed checks in the order they are written; Ladle numbers
/// its columns' first, then the table-level ones.)
pub fn table_check_name(
    table: &str,
    existing: &[CheckConstraint],
    name: Option<&str>,
) -> Result<String> {
    let name = match name {
        Some(n) => n.to_string(),
        None => unnamed(table, existing),
    };
    if existing.iter().any(|c| c.name.eq_ignore_ascii_case(&name)) {
        return Err(ShimError::Wire(crate::error::WireError {
            code: crate::error::ER_DUP_CONSTRAINT_NAME,
            message: format!("Duplicate CHECK constraint name '{name}'"),
        }));
    }
    Ok(name)
}

/// The name MySQL 8.0 gives the next unnamed check of table `table`.
fn unnamed(table: &str, existing: &[CheckConstraint]) -> String {
    let last = existing
        .iter()
        .filter_map(|c| generated_ordinal(table, &c.name))
        .max()
        .unwrap_or(0);
    format!("{table}_chk_{}", last + 1)
}

/// n if `name` is a name MySQL generates for table `table`'s checks,
/// `<table>_chk_<n>`.
fn generated_ordinal(table: &str, name: &str) -> Option<u64> {
    let prefix = format!("{table}_chk_");
    let head = name.get(..prefix.len())?;
    let digits = &name[prefix.len()..];
    if !head.eq_ignore_ascii_case(&prefix) || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|&n| n > 0)
}

/// Table `from` is now `to`: its checks' generated names follow (MySQL
/// 8.0 renames `from_chk_<n>` to `to_chk_<n>`). Whether any changed.
pub fn rename_generated(checks: &mut [CheckConstraint], from: &str, to: &str) -> bool {
    let mut changed = false;
    for c in checks {
        if let Some(n) = generated_ordinal(from, &c.name) {
            c.name = format!("{to}_chk_{n}");
            changed = true;
        }
    }
    changed
}

/// `checks` as `CREATE TABLE table LIKE ..` copies them: every name
/// generated anew, `<table>_chk_1` on, as MySQL 8.0 does.
pub fn regenerated(table: &str, checks: Vec<CheckConstraint>) -> Vec<CheckConstraint> {
    checks
        .into_iter()
        .zip(1..)
        .map(|(c, n)| CheckConstraint {
            name: format!("{table}_chk_{n}"),
            ..c
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(name: &str) -> CheckConstraint {
        CheckConstraint {
            name: name.into(),
            sql: "a > 0".into(),
            column: None,
        }
    }

    #[test]
    fn unnamed_checks_are_numbered_after_the_highest_generated_name() {
        assert_eq!(table_check_name("t", &[], None).unwrap(), "t_chk_1");
        let existing = [check("T_chk_4"), check("t_chk_x"), check("u_chk_9")];
        assert_eq!(table_check_name("t", &existing, None).unwrap(), "t_chk_5");
        assert!(table_check_name("t", &existing, Some("t_CHK_4")).is_err());
    }

    #[test]
    fn generated_names_follow_the_table() {
        let mut checks = vec![check("t_chk_2"), check("mine"), check("t_chk_")];
        assert!(rename_generated(&mut checks, "t", "u"));
        let names: Vec<_> = checks.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["u_chk_2", "mine", "t_chk_"]);
        let copied = regenerated("v", checks);
        let names: Vec<_> = copied.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["v_chk_1", "v_chk_2", "v_chk_3"]);
    }
}
