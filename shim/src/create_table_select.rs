//! `CREATE [TEMPORARY] TABLE [IF NOT EXISTS] t [options] [AS] SELECT ...`:
//! a table with one column per result column (its type and nullability;
//! no keys, defaults or AUTO_INCREMENT, as MySQL copies none of those
//! from an expression), filled as by `INSERT INTO t SELECT ...`. When the
//! rows cannot be written the table is dropped again, as in MySQL.
//! Columns and keys declared beside the SELECT are merged with its
//! columns by name, as MySQL does ([`merged_columns`]). On a cluster's
//! primary it runs in steps that each replicate ([`in_steps`]).

use sqlparser::ast::{self, CreateTable, Statement};

use crate::error::{Result, ShimError, WireError};
use crate::exec::Engine;
use crate::output::{Kind, Output};
use crate::session::Session;
use crate::sqltext::parse;

/// A cluster node's `CREATE [TEMPORARY] TABLE ... SELECT` (`sql`), in two
/// statements that each replicate in order: the table, recorded in the
/// schema log as a CREATE TABLE with its columns, then its rows, as an
/// `INSERT ... SELECT` (the table dropped again if that fails). Run whole,
/// as one schema change, its rows' change-log entry came before the
/// record of the table they are in, and replicas stopped there ("Table
/// '.#13' doesn't exist"), acknowledging no write after it. `None`: `sql`
/// is no such statement (or makes no table: IF NOT EXISTS and it exists).
pub(crate) fn in_steps(
    e: &Engine,
    s: &mut Session,
    sql: &str,
) -> std::result::Result<Option<Output>, WireError> {
    let Ok(mut parsed) = parse(sql) else {
        return Ok(None);
    };
    let [Statement::CreateTable(ct)] = parsed.as_mut_slice() else {
        return Ok(None);
    };
    if ct.query.is_none() || ct.like.is_some() {
        return Ok(None);
    }
    let (db, name) = e.resolve(s, &ct.name)?;
    if ct.if_not_exists && e.storage.table(&db, &name).is_some() {
        return Ok(None);
    }
    let Some(query) = ct.query.take() else {
        return Ok(None);
    };
    let selected = result_columns(e, s, &query)?;
    let insert = insert_select(&db, &name, &selected, &query);
    ct.columns = merged_columns(std::mem::take(&mut ct.columns), selected);
    let create = Statement::CreateTable(ct.clone()).to_string();
    e.execute_inner(s, &create, Kind::Ddl)?;
    match e.execute_inner(s, &insert, Kind::Insert) {
        Ok(out) => Ok(Some(out)),
        Err(err) => {
            let temporary = if ct.temporary { "TEMPORARY " } else { "" };
            let drop = format!("DROP {temporary}TABLE IF EXISTS {}", qualified(&db, &name));
            if let Err(e) = e.execute_inner(s, &drop, Kind::Ddl) {
                tracing::warn!(error = %e.message, drop, "dropping a CREATE TABLE ... SELECT's table");
            }
            Err(err)
        }
    }
}

/// The columns of a table made from `query`'s result: each result
/// column's name, type and nullability.
fn result_columns(e: &Engine, s: &mut Session, query: &ast::Query) -> Result<Vec<ast::ColumnDef>> {
    let Output::Rows { columns, .. } = e.select(s, query)? else {
        return Err(ShimError::Parse(
            "CREATE TABLE ... SELECT needs a query".into(),
        ));
    };
    let defs: Vec<String> = columns
        .iter()
        .map(|c| {
            let null = if c.nullable { "" } else { " NOT NULL" };
            format!("`{}` {}{null}", c.name.replace('`', "``"), c.ty.sql_name())
        })
        .collect();
    let sql = format!("CREATE TABLE t ({})", defs.join(", "));
    match parse(&sql)?.into_iter().next() {
        Some(Statement::CreateTable(table)) => Ok(table.columns),
        _ => Err(ShimError::Parse(sql)),
    }
}

/// The columns of a table declared with columns `declared` and made from
/// a query with result columns `selected`, as MySQL merges them: the
/// declared columns the query has not, then the query's columns in its
/// order, each as declared if it is (MySQL's "columns named only in the
/// CREATE TABLE part come first").
fn merged_columns(
    declared: Vec<ast::ColumnDef>,
    selected: Vec<ast::ColumnDef>,
) -> Vec<ast::ColumnDef> {
    let same =
        |a: &ast::ColumnDef, b: &ast::ColumnDef| a.name.value.eq_ignore_ascii_case(&b.name.value);
    let mut merged: Vec<ast::ColumnDef> = declared
        .iter()
        .filter(|d| !selected.iter().any(|c| same(c, d)))
        .cloned()
        .collect();
    for c in selected {
        match declared.iter().find(|d| same(d, &c)) {
            Some(d) => merged.push(d.clone()),
            None => merged.push(c),
        }
    }
    merged
}

/// `INSERT INTO db.name (the query's columns) query`: the rows of a
/// table made from `query`, whose result columns are `selected`.
fn insert_select(db: &str, name: &str, selected: &[ast::ColumnDef], query: &ast::Query) -> String {
    let columns: Vec<String> = selected
        .iter()
        .map(|c| format!("`{}`", c.name.value.replace('`', "``")))
        .collect();
    let table = qualified(db, name);
    format!("INSERT INTO {table} ({}) {query}", columns.join(", "))
}

pub fn create_table_select(e: &Engine, s: &mut Session, mut ct: CreateTable) -> Result<Output> {
    let Some(query) = ct.query.take() else {
        return crate::ddl::create_table(e, s, ct);
    };
    if ct.like.is_some() {
        return Err(ShimError::Unsupported(
            "CREATE TABLE with LIKE and a SELECT".into(),
        ));
    }
    let (db, name) = e.resolve(s, &ct.name)?;
    if ct.if_not_exists && e.storage.table(&db, &name).is_some() {
        // MySQL 8 leaves the table as it is and inserts nothing.
        s.warn(1050, format!("Table '{name}' already exists"));
        return Ok(Output::ok());
    }
    // The declared name, keys and table options; the columns declared
    // and the query's.
    let selected = result_columns(e, s, &query)?;
    let insert = insert_select(&db, &name, &selected, &query);
    ct.columns = merged_columns(std::mem::take(&mut ct.columns), selected);
    crate::ddl::create_table(e, s, ct.clone())?;
    let filled = match parse(&insert)?.into_iter().next() {
        Some(Statement::Insert(ins)) => crate::dml::insert(e, s, ins),
        _ => Err(ShimError::Parse(insert)),
    };
    match filled {
        Ok(out) => Ok(out),
        Err(err) => {
            let table = ast::ObjectName(vec![ast::Ident::new(db), ast::Ident::new(name)]);
            let _ = crate::ddl::drop(e, s, ast::ObjectType::Table, true, vec![table]);
            Err(err)
        }
    }
}

fn qualified(db: &str, name: &str) -> String {
    format!("`{}`.`{}`", db.replace('`', "``"), name.replace('`', "``"))
}
