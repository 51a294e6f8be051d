//! The conformance suite: every test in `suite` runs against both engines
//! (RocksDB in a temporary directory, and memory). Tests that need a restart
//! (durability, epochs, interrupted index builds, crashes) are RocksDB-only
//! and live in `durable`.

/// Runs each named `fn(Kind)` as a test against every engine (and both
/// secondary-entry layouts).
macro_rules! conformance {
    ($($name:ident),* $(,)?) => {
        mod memory {
            $( #[test] fn $name() { super::$name(super::Kind::Memory) } )*
        }
        mod rocks {
            $( #[test] fn $name() { super::$name(super::Kind::Rocks) } )*
        }
        mod rocks_pk_only {
            $( #[test] fn $name() { super::$name(super::Kind::RocksPkOnly) } )*
        }
    };
}

mod crash;
mod durable;
mod holds;
mod replication;
mod suite;

use std::sync::Arc;
use std::time::Duration;

use ladle_common::{ColumnSchema, IndexSchema, Row, SqlType, TableSchema, Value};

use crate::{Durability, OnConflict, Storage, StorageConfig, WriteOp};

/// Which engine a conformance test runs against.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Kind {
    Memory,
    Rocks,
    /// RocksDB with primary-key-only secondary entries.
    RocksPkOnly,
}

/// A storage under test and the directory it lives in.
pub(crate) struct Harness {
    pub storage: Arc<Storage>,
    pub dir: Option<tempfile::TempDir>,
}

pub(crate) fn config(dir: &std::path::Path, durability: Durability) -> StorageConfig {
    StorageConfig {
        data_dir: dir.to_path_buf(),
        durability,
        block_cache_bytes: 8 << 20,
        wal_dir: None,
        async_flush_interval: Duration::from_millis(5),
        wal_recovery: Default::default(),
        disk_reserve: 0,
    }
}

impl Harness {
    pub fn new(kind: Kind) -> Harness {
        match kind {
            Kind::Memory => Harness {
                storage: Storage::in_memory(),
                dir: None,
            },
            Kind::Rocks | Kind::RocksPkOnly => {
                let dir = tempfile::tempdir().expect("tempdir");
                let storage = Storage::open(config(dir.path(), Durability::Sync)).expect("open");
                if matches!(kind, Kind::RocksPkOnly) {
                    storage
                        .secondary_full_row
                        .store(false, std::sync::atomic::Ordering::Relaxed);
                }
                Harness {
                    storage,
                    dir: Some(dir),
                }
            }
        }
    }

    /// Closes and reopens a RocksDB-backed storage.
    pub fn reopen(self) -> Harness {
        let Harness { storage, dir } = self;
        drop(storage);
        let dir = dir.expect("reopen needs a RocksDB harness");
        let storage = Storage::open(config(dir.path(), Durability::Sync)).expect("reopen");
        Harness {
            storage,
            dir: Some(dir),
        }
    }
}

pub(crate) fn int() -> SqlType {
    SqlType::Int {
        bytes: 4,
        unsigned: false,
        display_width: None,
    }
}

pub(crate) fn col(name: &str, ty: SqlType) -> ColumnSchema {
    ColumnSchema::new(name, ty)
}

/// `users(id INT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(20) NOT NULL
/// UNIQUE, age INT, KEY age(age))`.
pub(crate) fn users(s: &Storage) -> Arc<TableSchema> {
    s.create_database("db", true).expect("db");
    let mut id = col("id", int()).not_null();
    id.auto_increment = true;
    let schema = TableSchema {
        id: 0,
        database: "db".into(),
        name: "users".into(),
        columns: vec![
            id,
            col("name", SqlType::VarChar(20)).not_null(),
            col("age", int()),
        ],
        primary_key: Some(vec![0]),
        indexes: vec![
            IndexSchema {
                id: 0,
                name: "name".into(),
                columns: vec![1],
                unique: true,
            },
            IndexSchema {
                id: 0,
                name: "age".into(),
                columns: vec![2],
                unique: false,
            },
        ],
        version: 1,
    };
    s.create_table(schema, false).expect("create users")
}

/// `log(a INT, b VARCHAR(10))`: no primary key.
pub(crate) fn keyless(s: &Storage) -> Arc<TableSchema> {
    s.create_database("db", true).expect("db");
    let schema = TableSchema {
        id: 0,
        database: "db".into(),
        name: "log".into(),
        columns: vec![col("a", int()), col("b", SqlType::VarChar(10))],
        primary_key: None,
        indexes: vec![IndexSchema {
            id: 0,
            name: "a".into(),
            columns: vec![0],
            unique: false,
        }],
        version: 1,
    };
    s.create_table(schema, false).expect("create log")
}

pub(crate) fn row(values: &[Value]) -> Row {
    values.to_vec()
}

pub(crate) fn insert(table: &TableSchema, rows: Vec<Row>) -> WriteOp {
    WriteOp::Insert {
        table: table.id,
        schema_version: table.version,
        rows,
        on_conflict: OnConflict::Error,
        auto_value_on_zero: true,
        id_batches: crate::IdBatches::PerRow,
        returning: None,
    }
}

pub(crate) fn i(v: i64) -> Value {
    Value::Int(v)
}

pub(crate) fn t(s: &str) -> Value {
    Value::text(s)
}

/// Rows sorted, for order-insensitive comparison.
pub(crate) fn sorted(mut rows: Vec<Row>) -> Vec<Row> {
    rows.sort();
    rows
}
