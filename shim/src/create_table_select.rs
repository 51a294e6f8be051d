//! `CREATE [TEMPORARY] TABLE [IF NOT EXISTS] t [options] [AS] SELECT ...`:
//! a table with one column per result column (its type and nullability;
//! no keys, defaults or AUTO_INCREMENT, as MySQL copies none of those
//! from an expression), filled as by `INSERT INTO t SELECT ...`. When the
//! rows cannot be written the table is dropped again, as in MySQL.
//! Declaring columns beside the SELECT is refused (1235).

use sqlparser::ast::{self, CreateTable, Statement};

use crate::error::{Result, ShimError};
use crate::exec::Engine;
use crate::output::Output;
use crate::session::Session;
use crate::sqltext::parse;

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
    let Output::Rows { columns, .. } = e.select(s, &query)? else {
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
    let Some(Statement::CreateTable(mut table)) = parse(&sql)?.into_iter().next() else {
        return Err(ShimError::Parse(sql));
    };
    // The declared name and table options; the columns from the query.
    table.name = ct.name.clone();
    ct.columns = table.columns;
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
