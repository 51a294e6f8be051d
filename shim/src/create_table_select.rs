//! `CREATE [TEMPORARY] TABLE [IF NOT EXISTS] t [options] [AS] SELECT ...`:
//! a table with one column per result column (its type and nullability;
//! no keys, defaults or AUTO_INCREMENT, as MySQL copies none of those
//! from an expression), filled as by `INSERT INTO t SELECT ...`. When the
//! rows cannot be written the table is dropped again, as in MySQL.
//! Declaring columns beside the SELECT is refused (1235). On a cluster's
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
    if ct.query.is_none() || !ct.columns.is_empty() || !ct.constraints.is_empty() {
        return Ok(None);
    }
    let (db, name) = e.resolve(s, &ct.name)?;
    if ct.if_not_exists && e.storage.table(&db, &name).is_some() {
        return Ok(None);
    }
    let Some(query) = ct.query.take() else {
        return Ok(None);
    };
    ct.columns = result_columns(e, s, &query)?;
    let create = Statement::CreateTable(ct.clone()).to_string();
    e.execute_inner(s, &create, Kind::Ddl)?;
    let insert = format!("INSERT INTO {} {query}", qualified(&db, &name));
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

pub fn create_table_select(e: &Engine, s: &mut Session, mut ct: CreateTable) -> Result<Output> {
    let Some(query) = ct.query.take() else {
        return crate::ddl::create_table(e, s, ct);
    };
    if !ct.columns.is_empty() || !ct.constraints.is_empty() || ct.like.is_some() {
        return Err(ShimError::Unsupported(
            "CREATE TABLE with columns and a SELECT".into(),
        ));
    }
    let (db, name) = e.resolve(s, &ct.name)?;
    if ct.if_not_exists && e.storage.table(&db, &name).is_some() {
        // MySQL 8 leaves the table as it is and inserts nothing.
        s.warn(1050, format!("Table '{name}' already exists"));
        return Ok(Output::ok());
    }
    // The declared name and table options; the columns from the query.
    ct.columns = result_columns(e, s, &query)?;
    crate::ddl::create_table(e, s, ct.clone())?;
    let insert = format!("INSERT INTO {} {query}", qualified(&db, &name));
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
