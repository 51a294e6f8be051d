//! Shared helpers for the dataflow integration tests.
#![allow(dead_code)]

use std::sync::Arc;

use ladle_common::{ColumnSchema, IndexSchema, Row, SqlType, TableSchema, Value};
use ladle_dataflow::{Dataflow, DataflowConfig, PreparedQuery};
use ladle_storage::{OnConflict, RowFilter, RowUpdater, ScanSpec, Storage, WriteOp};
use sqlparser::ast;
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;

pub const DB: &str = "test";

/// Expected result lines, as `Env::q` renders them.
pub fn v(x: &[&str]) -> Vec<String> {
    x.iter().map(|s| s.to_string()).collect()
}

pub fn int() -> SqlType {
    SqlType::Int {
        bytes: 4,
        unsigned: false,
        display_width: None,
    }
}

pub fn text() -> SqlType {
    SqlType::VarChar(64)
}

pub struct Env {
    pub storage: Arc<Storage>,
    pub df: Arc<Dataflow>,
}

pub fn env(memory_limit: usize) -> Env {
    env_with(DataflowConfig {
        memory_limit,
        ..Default::default()
    })
}

pub fn env_with(config: DataflowConfig) -> Env {
    let storage = Storage::in_memory();
    storage.create_database(DB, true).unwrap();
    let df = Dataflow::new(storage.clone(), config).unwrap();
    Env { storage, df }
}

pub fn parse(sql: &str) -> ast::Query {
    let stmts = Parser::parse_sql(&MySqlDialect {}, sql).expect("parse");
    match stmts.into_iter().next() {
        Some(ast::Statement::Query(q)) => *q,
        _ => panic!("not a query: {sql}"),
    }
}

/// The write inserting `rows` into `t` (to combine with others in one commit).
pub fn insert_op(t: &TableSchema, rows: Vec<Row>) -> WriteOp {
    WriteOp::Insert {
        table: t.id,
        schema_version: t.version,
        rows,
        on_conflict: OnConflict::Error,
        auto_value_on_zero: true,
        id_batches: ladle_storage::IdBatches::PerRow,
        returning: None,
    }
}

impl Env {
    /// Creates `name` with the given columns; the first is the primary key.
    pub fn table(&self, name: &str, cols: &[(&str, SqlType)]) -> Arc<TableSchema> {
        let columns = cols
            .iter()
            .map(|(n, t)| ColumnSchema::new(*n, t.clone()))
            .collect();
        let schema = TableSchema {
            id: 0,
            database: DB.into(),
            name: name.into(),
            columns,
            primary_key: Some(vec![0]),
            indexes: vec![],
            version: 0,
        };
        self.storage.create_table(schema, false).unwrap()
    }

    pub fn insert(&self, t: &TableSchema, rows: Vec<Row>) {
        self.storage.write(vec![insert_op(t, rows)]).unwrap();
    }

    /// Adds a one-column index `name` on column `col` of `table`.
    pub fn index(&self, table: &str, name: &str, col: usize) -> Arc<TableSchema> {
        self.storage
            .create_index(
                DB,
                table,
                IndexSchema {
                    id: 0,
                    name: name.into(),
                    columns: vec![col],
                    unique: false,
                },
            )
            .unwrap()
    }

    pub fn delete_where(&self, t: &TableSchema, f: impl Fn(&Row) -> bool + Send + Sync + 'static) {
        let filter: RowFilter = Arc::new(move |r: &Row| Ok(f(r)));
        self.storage
            .write(vec![WriteOp::Delete {
                table: t.id,
                schema_version: t.version,
                scan: ScanSpec::Full,
                filter,
            }])
            .unwrap();
    }

    pub fn update_where(
        &self,
        t: &TableSchema,
        f: impl Fn(&Row) -> Option<Row> + Send + Sync + 'static,
    ) {
        let update: RowUpdater = Arc::new(move |r: &Row| Ok(f(r)));
        self.storage
            .write(vec![WriteOp::Update {
                table: t.id,
                schema_version: t.version,
                scan: ScanSpec::Full,
                update,
            }])
            .unwrap();
    }

    pub fn prepare(&self, sql: &str) -> PreparedQuery {
        self.df
            .prepare(DB, &parse(sql))
            .unwrap_or_else(|e| panic!("prepare {sql}: {e}"))
    }

    /// Executes and renders rows as sorted strings (or in order if `ordered`).
    pub fn q(&self, sql: &str, params: &[Value]) -> Vec<String> {
        let p = self.prepare(sql);
        let rows = p
            .execute(params)
            .unwrap_or_else(|e| panic!("execute {sql}: {e}"));
        render(rows, sql.to_ascii_uppercase().contains("ORDER BY"))
    }
}

pub fn render(rows: Vec<Row>, ordered: bool) -> Vec<String> {
    let mut v: Vec<String> = rows
        .iter()
        .map(|r| {
            r.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    if !ordered {
        v.sort();
    }
    v
}

pub fn r(vals: &[Value]) -> Row {
    vals.to_vec()
}

pub fn i(v: i64) -> Value {
    Value::Int(v)
}

pub fn s(v: &str) -> Value {
    Value::text(v)
}
