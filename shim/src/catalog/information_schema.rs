//! The `information_schema` virtual tables (SCHEMATA, TABLES, COLUMNS,
//! STATISTICS, KEY_COLUMN_USAGE, TABLE_CONSTRAINTS, VIEWS, plus empty
//! ROUTINES, TRIGGERS, REFERENTIAL_CONSTRAINTS), their rows built from the
//! catalog; [`super::virtual_select`] evaluates queries over them.

use std::sync::Arc;

use ladle_common::{SqlType, TableSchema, Value};
use sqlparser::ast::{self, SetExpr, TableFactor};

use super::describe::{collation_letter, column_key, default_text, extra, index_rows};
use super::filter::t;
use crate::error::{Result, ShimError};
use crate::exec::Engine;
use crate::session::Session;

// ---------------------------------------------------------------------------
// information_schema

pub(super) const VIRTUAL_TABLES: &[&str] = &[
    "SCHEMATA",
    "TABLES",
    "COLUMNS",
    "STATISTICS",
    "KEY_COLUMN_USAGE",
    "TABLE_CONSTRAINTS",
    "VIEWS",
    "ROUTINES",
    "TRIGGERS",
    "REFERENTIAL_CONSTRAINTS",
    "CHECK_CONSTRAINTS",
    "FILES",
    "PROCESSLIST",
];

/// The connections a session may list: all of them with PROCESS (or as
/// the superuser), else its user's own.
pub(super) fn process_rows(e: &Engine, s: &Session, full: bool) -> Vec<Vec<Value>> {
    let all = crate::privileges::has_global(e, s, crate::accounts::PROCESS);
    e.processes.rows(&s.user, all, full)
}

pub(super) fn is_info_schema_name(s: &Session, name: &ast::ObjectName) -> bool {
    match name.0.as_slice() {
        [d, _] => d.value.eq_ignore_ascii_case("information_schema"),
        [_] => s
            .database
            .as_deref()
            .is_some_and(|d| d.eq_ignore_ascii_case("information_schema")),
        _ => false,
    }
}

/// Whether a SELECT reads information_schema tables, directly or through
/// a derived table (`SELECT ... FROM (SELECT ... FROM
/// information_schema.tables ...) t`, as ActiveRecord lists tables).
pub fn is_information_schema_query(s: &Session, q: &ast::Query) -> bool {
    let SetExpr::Select(sel) = q.body.as_ref() else {
        return false;
    };
    sel.from.iter().any(|tw| {
        std::iter::once(&tw.relation)
            .chain(tw.joins.iter().map(|j| &j.relation))
            .any(|f| match f {
                TableFactor::Table { name, .. } => is_info_schema_name(s, name),
                TableFactor::Derived { subquery, .. } => is_information_schema_query(s, subquery),
                _ => false,
            })
    })
}

/// A virtual table: column names and rows.
pub(super) struct VTable {
    pub(super) columns: Vec<&'static str>,
    pub(super) rows: Vec<Vec<Value>>,
}

pub(super) fn type_parts(ty: &SqlType) -> (String, Value, Value, Value, Value) {
    // (DATA_TYPE, CHARACTER_MAXIMUM_LENGTH, CHARACTER_OCTET_LENGTH, NUMERIC_PRECISION, NUMERIC_SCALE)
    let full = ty.sql_name();
    let data_type: String = full
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric())
        .collect();
    let n = |x: u32| Value::Int(i64::from(x));
    match ty {
        SqlType::Char(l) | SqlType::VarChar(l) => (
            data_type,
            n(*l),
            Value::Int(i64::from(*l) * 4),
            Value::Null,
            Value::Null,
        ),
        SqlType::Text(l) | SqlType::Binary(l) | SqlType::VarBinary(l) | SqlType::Blob(l) => {
            (data_type, n(*l), n(*l), Value::Null, Value::Null)
        }
        SqlType::Int {
            bytes, unsigned, ..
        } => {
            let p = match (bytes, unsigned) {
                (1, _) => 3,
                (2, _) => 5,
                (3, _) => 7,
                (4, _) => 10,
                (_, false) => 19,
                (_, true) => 20,
            };
            (
                data_type,
                Value::Null,
                Value::Null,
                Value::Int(p),
                Value::Int(0),
            )
        }
        SqlType::Decimal { precision, scale } => (
            data_type,
            Value::Null,
            Value::Null,
            Value::Int(i64::from(*precision)),
            Value::Int(i64::from(*scale)),
        ),
        // MariaDB's: the width, no scale.
        SqlType::Bit(width) => (
            data_type,
            Value::Null,
            Value::Null,
            Value::Int(i64::from(*width)),
            Value::Null,
        ),
        SqlType::Float => (
            data_type,
            Value::Null,
            Value::Null,
            Value::Int(12),
            Value::Null,
        ),
        SqlType::Double => (
            data_type,
            Value::Null,
            Value::Null,
            Value::Int(22),
            Value::Null,
        ),
        _ => (
            data_type,
            Value::Null,
            Value::Null,
            Value::Null,
            Value::Null,
        ),
    }
}

pub(super) fn build_vtable(e: &Engine, s: &Session, name: &str) -> Result<VTable> {
    // A stored account sees only what it holds privileges on.
    let mut dbs = e.storage.databases();
    dbs.retain(|d| crate::privileges::sees_database(e, s, d));
    let all_tables = || {
        dbs.iter()
            .flat_map(|d| e.storage.tables(d))
            // MySQL lists no TEMPORARY table here.
            .filter(|tb| !e.temporary_tables.contains(&tb.database, &tb.name))
            .filter(|tb| crate::privileges::sees_table(e, s, &tb.database, &tb.name))
            .collect::<Vec<_>>()
    };
    let def = t("def");
    Ok(match name.to_ascii_uppercase().as_str() {
        "PROCESSLIST" => VTable {
            columns: vec![
                "ID", "USER", "HOST", "DB", "COMMAND", "TIME", "STATE", "INFO",
            ],
            rows: process_rows(e, s, true),
        },
        "SCHEMATA" => VTable {
            columns: vec![
                "CATALOG_NAME",
                "SCHEMA_NAME",
                "DEFAULT_CHARACTER_SET_NAME",
                "DEFAULT_COLLATION_NAME",
                "SQL_PATH",
            ],
            rows: std::iter::once("information_schema".to_string())
                .chain(dbs.iter().cloned())
                .map(|d| {
                    vec![
                        def.clone(),
                        t(d),
                        t("utf8mb4"),
                        t("utf8mb4_general_ci"),
                        Value::Null,
                    ]
                })
                .collect(),
        },
        "TABLES" => tables_table(e, &dbs, &all_tables, &def)?,
        "COLUMNS" => columns_table(e, s, &dbs, &all_tables, &def)?,
        "STATISTICS" => statistics_table(e, &all_tables, &def)?,
        "KEY_COLUMN_USAGE" => key_column_usage_table(e, &all_tables, &def)?,
        "TABLE_CONSTRAINTS" => table_constraints_table(e, &all_tables, &def)?,
        "VIEWS" => views_table(e, s, &dbs, &def),
        "ROUTINES" => VTable {
            columns: vec![
                "SPECIFIC_NAME",
                "ROUTINE_CATALOG",
                "ROUTINE_SCHEMA",
                "ROUTINE_NAME",
                "ROUTINE_TYPE",
                "DATA_TYPE",
                "ROUTINE_DEFINITION",
            ],
            rows: Vec::new(),
        },
        // Tablespace files (NDB's): none, as in MariaDB with InnoDB;
        // mariadb-dump asks.
        "FILES" => VTable {
            columns: vec![
                "FILE_ID",
                "FILE_NAME",
                "FILE_TYPE",
                "TABLESPACE_NAME",
                "TABLE_CATALOG",
                "TABLE_SCHEMA",
                "TABLE_NAME",
                "LOGFILE_GROUP_NAME",
                "LOGFILE_GROUP_NUMBER",
                "ENGINE",
                "FULLTEXT_KEYS",
                "DELETED_ROWS",
                "UPDATE_COUNT",
                "FREE_EXTENTS",
                "TOTAL_EXTENTS",
                "EXTENT_SIZE",
                "INITIAL_SIZE",
                "MAXIMUM_SIZE",
                "AUTOEXTEND_SIZE",
                "CREATION_TIME",
                "LAST_UPDATE_TIME",
                "LAST_ACCESS_TIME",
                "RECOVER_TIME",
                "TRANSACTION_COUNTER",
                "VERSION",
                "ROW_FORMAT",
                "TABLE_ROWS",
                "AVG_ROW_LENGTH",
                "DATA_LENGTH",
                "MAX_DATA_LENGTH",
                "INDEX_LENGTH",
                "DATA_FREE",
                "CREATE_TIME",
                "UPDATE_TIME",
                "CHECK_TIME",
                "CHECKSUM",
                "STATUS",
                "EXTRA",
            ],
            rows: Vec::new(),
        },
        "TRIGGERS" => VTable {
            columns: vec![
                "TRIGGER_CATALOG",
                "TRIGGER_SCHEMA",
                "TRIGGER_NAME",
                "EVENT_MANIPULATION",
                "EVENT_OBJECT_SCHEMA",
                "EVENT_OBJECT_TABLE",
                "ACTION_STATEMENT",
            ],
            rows: Vec::new(),
        },
        "CHECK_CONSTRAINTS" => check_constraints_table(e, &all_tables, &def)?,
        "REFERENTIAL_CONSTRAINTS" => referential_constraints_table(e, &all_tables, &def)?,
        _ => {
            return Err(ShimError::UnknownTable {
                database: "information_schema".into(),
                table: name.to_string(),
            })
        }
    })
}

/// CHECK_CONSTRAINTS: every declared check (MySQL 8.0's columns, with
/// MariaDB's TABLE_NAME and LEVEL besides). Listed as MySQL 8.0 names
/// them, unnamed ones `<table>_chk_<n>`: a MySQL client (Django) takes a
/// check named after its one column for an unnamed one and drops it under
/// a name of its own (MariaDB names a column's check after the column).
fn check_constraints_table(
    e: &Engine,
    all_tables: &dyn Fn() -> Vec<Arc<TableSchema>>,
    def: &Value,
) -> Result<VTable> {
    let mut rows = Vec::new();
    for tb in all_tables() {
        let checks = e.checks.for_table(&e.storage, &tb)?;
        for c in checks.declared() {
            let level = if c.column.is_some() {
                "Column"
            } else {
                "Table"
            };
            rows.push(vec![
                def.clone(),
                t(&tb.database),
                t(&tb.name),
                t(&c.name),
                t(level),
                t(crate::checks::shown_clause(&c.sql)),
            ]);
        }
    }
    Ok(VTable {
        columns: vec![
            "CONSTRAINT_CATALOG",
            "CONSTRAINT_SCHEMA",
            "TABLE_NAME",
            "CONSTRAINT_NAME",
            "LEVEL",
            "CHECK_CLAUSE",
        ],
        rows,
    })
}

fn tables_table(
    e: &Engine,
    dbs: &[String],
    all_tables: &dyn Fn() -> Vec<Arc<TableSchema>>,
    def: &Value,
) -> Result<VTable> {
    let notes = crate::table_notes::load_all(&e.storage)?;
    let mut rows = Vec::new();
    // Sizes are not measured: 0, as a client adding them up expects a
    // number (`mariadb-dump --order-by-size` sorts by DATA_LENGTH).
    let zero = Value::UInt(0);
    for tb in all_tables() {
        let note = notes.get(&tb.id).cloned().unwrap_or_default();
        let auto_increment = match tb.auto_increment_column() {
            Some(_) => Value::UInt(e.storage.next_auto_increment(tb.id)?),
            None => Value::Null,
        };
        rows.push(vec![
            def.clone(),
            t(&tb.database),
            t(&tb.name),
            t("BASE TABLE"),
            t("InnoDB"),
            Value::Int(10),
            t("Dynamic"),
            Value::UInt(e.storage.estimate_rows(tb.id)),
            zero.clone(),
            zero.clone(),
            zero.clone(),
            zero.clone(),
            zero.clone(),
            auto_increment,
            Value::Null,
            Value::Null,
            Value::Null,
            t(note.collation_name()),
            Value::Null,
            t(""),
            t(note.comment),
            zero.clone(),
            t("N"),
        ]);
    }
    for d in dbs {
        for v in e.dataflow.named_views(d) {
            let mut row = vec![def.clone(), t(d), t(v), t("VIEW")];
            row.extend(std::iter::repeat_n(Value::Null, 16));
            row.extend([t("VIEW"), Value::Null, Value::Null]);
            rows.push(row);
        }
    }
    Ok(VTable {
        columns: vec![
            "TABLE_CATALOG",
            "TABLE_SCHEMA",
            "TABLE_NAME",
            "TABLE_TYPE",
            "ENGINE",
            "VERSION",
            "ROW_FORMAT",
            "TABLE_ROWS",
            "AVG_ROW_LENGTH",
            "DATA_LENGTH",
            "MAX_DATA_LENGTH",
            "INDEX_LENGTH",
            "DATA_FREE",
            "AUTO_INCREMENT",
            "CREATE_TIME",
            "UPDATE_TIME",
            "CHECK_TIME",
            "TABLE_COLLATION",
            "CHECKSUM",
            "CREATE_OPTIONS",
            "TABLE_COMMENT",
            "MAX_INDEX_LENGTH",
            "TEMPORARY",
        ],
        rows,
    })
}

fn columns_table(
    e: &Engine,
    s: &Session,
    dbs: &[String],
    all_tables: &dyn Fn() -> Vec<Arc<TableSchema>>,
    def: &Value,
) -> Result<VTable> {
    let notes = crate::table_notes::load_all(&e.storage)?;
    let mut rows = Vec::new();
    for tb in all_tables() {
        let note = notes.get(&tb.id);
        // A functional key part's hidden column is not listed (nor
        // counted: columns added after it keep consecutive positions).
        let visible = tb
            .columns
            .iter()
            .enumerate()
            .filter(|(_, c)| !c.is_hidden());
        for (ordinal, (i, c)) in visible.enumerate() {
            let mut row = vec![
                def.clone(),
                t(&tb.database),
                t(&tb.name),
                t(&c.name),
                Value::Int(ordinal as i64 + 1),
                // An expression default as MariaDB lists it: `(3 + 5)`.
                match note.and_then(|n| n.default_expression(&c.name)) {
                    Some(sql) => t(format!("({sql})")),
                    None => default_text(c),
                },
                t(if c.nullable { "YES" } else { "NO" }),
            ];
            let collation = note.and_then(|n| n.column_collation(c));
            row.extend(type_columns(&c.ty, collation.unwrap_or(c.collation.name())));
            row.extend([
                t(column_key(&tb, i)),
                t(extra(c)),
                t("select,insert,update,references"),
                t(note.map_or("", |n| n.column_comment(&c.name))),
                t(c.default.generation().unwrap_or("")),
            ]);
            rows.push(row);
        }
    }
    // Named views list their result columns, as in MariaDB (a view that
    // no longer plans lists none).
    for d in dbs {
        for v in e.dataflow.named_views(d) {
            if !crate::privileges::sees_table(e, s, d, &v) {
                continue;
            }
            let Ok(columns) = super::describe::view_columns(e, d, &v) else {
                continue;
            };
            for (ordinal, c) in columns.iter().enumerate() {
                let mut row = vec![
                    def.clone(),
                    t(d),
                    t(&v),
                    t(&c.name),
                    Value::Int(ordinal as i64 + 1),
                    Value::Null,
                    t(if c.nullable { "YES" } else { "NO" }),
                ];
                row.extend(type_columns(&c.ty, "utf8mb4_general_ci"));
                row.extend([
                    t(""),
                    t(""),
                    t("select,insert,update,references"),
                    t(""),
                    t(""),
                ]);
                rows.push(row);
            }
        }
    }
    Ok(VTable {
        columns: vec![
            "TABLE_CATALOG",
            "TABLE_SCHEMA",
            "TABLE_NAME",
            "COLUMN_NAME",
            "ORDINAL_POSITION",
            "COLUMN_DEFAULT",
            "IS_NULLABLE",
            "DATA_TYPE",
            "CHARACTER_MAXIMUM_LENGTH",
            "CHARACTER_OCTET_LENGTH",
            "NUMERIC_PRECISION",
            "NUMERIC_SCALE",
            "DATETIME_PRECISION",
            "CHARACTER_SET_NAME",
            "COLLATION_NAME",
            "COLUMN_TYPE",
            "COLUMN_KEY",
            "EXTRA",
            "PRIVILEGES",
            "COLUMN_COMMENT",
            "GENERATION_EXPRESSION",
        ],
        rows,
    })
}

/// COLUMNS' type-dependent values of a column of type `ty` (collated by
/// `collation` if text): DATA_TYPE through COLUMN_TYPE.
fn type_columns(ty: &SqlType, collation: &str) -> [Value; 9] {
    let (dt, maxlen, octets, prec, scale) = type_parts(ty);
    let dt_prec = if matches!(
        ty,
        SqlType::DateTime { .. } | SqlType::Timestamp { .. } | SqlType::Time { .. }
    ) {
        Value::Int(i64::from(ty.fsp()))
    } else {
        Value::Null
    };
    let (cs, coll) = if *ty == SqlType::Json {
        // MariaDB's JSON is LONGTEXT COLLATE utf8mb4_bin (SHOW CREATE TABLE).
        (t("utf8mb4"), t("utf8mb4_bin"))
    } else if ty.is_text() {
        (t("utf8mb4"), t(collation))
    } else {
        (Value::Null, Value::Null)
    };
    [
        t(dt),
        maxlen,
        octets,
        prec,
        scale,
        dt_prec,
        cs,
        coll,
        t(ty.sql_name()),
    ]
}

fn statistics_table(
    e: &Engine,
    all_tables: &dyn Fn() -> Vec<Arc<TableSchema>>,
    def: &Value,
) -> Result<VTable> {
    let notes = crate::table_notes::load_all(&e.storage)?;
    let none = crate::table_notes::TableNotes::default();
    let mut rows = Vec::new();
    for tb in all_tables() {
        let note = notes.get(&tb.id).unwrap_or(&none);
        for (iname, non_unique, seq, col) in index_rows(&tb) {
            let c = &tb.columns[col];
            // A functional key part: no column, its expression instead.
            let expression = crate::functional_index::expression(c);
            rows.push(vec![
                def.clone(),
                t(&tb.database),
                t(&tb.name),
                Value::Int(non_unique),
                t(&tb.database),
                t(&iname),
                Value::Int(seq),
                if expression.is_some() {
                    Value::Null
                } else {
                    t(&c.name)
                },
                t(collation_letter(note, &iname, &c.name)),
                Value::Int(0),
                note.prefix(&iname, &c.name)
                    .map_or(Value::Null, |n| Value::Int(i64::from(n))),
                Value::Null,
                t(if c.nullable { "YES" } else { "" }),
                t("BTREE"),
                t(""),
                t(""),
                expression.map_or(Value::Null, t),
            ]);
        }
    }
    Ok(VTable {
        columns: vec![
            "TABLE_CATALOG",
            "TABLE_SCHEMA",
            "TABLE_NAME",
            "NON_UNIQUE",
            "INDEX_SCHEMA",
            "INDEX_NAME",
            "SEQ_IN_INDEX",
            "COLUMN_NAME",
            "COLLATION",
            "CARDINALITY",
            "SUB_PART",
            "PACKED",
            "NULLABLE",
            "INDEX_TYPE",
            "COMMENT",
            "INDEX_COMMENT",
            "EXPRESSION",
        ],
        rows,
    })
}

fn key_column_usage_table(
    e: &Engine,
    all_tables: &dyn Fn() -> Vec<Arc<TableSchema>>,
    def: &Value,
) -> Result<VTable> {
    let mut rows = Vec::new();
    for tb in all_tables() {
        let mut keys: Vec<(String, Vec<usize>)> = Vec::new();
        if let Some(pk) = &tb.primary_key {
            keys.push(("PRIMARY".into(), pk.clone()));
        }
        keys.extend(
            tb.indexes
                .iter()
                .filter(|i| i.unique)
                .map(|i| (i.name.clone(), i.columns.clone())),
        );
        for (kname, cols) in keys {
            // A functional key part has no column to name (as in MySQL).
            let named = cols.iter().filter(|&&c| !tb.columns[c].is_hidden());
            for (k, &c) in named.enumerate() {
                rows.push(vec![
                    def.clone(),
                    t(&tb.database),
                    t(&kname),
                    def.clone(),
                    t(&tb.database),
                    t(&tb.name),
                    t(&tb.columns[c].name),
                    Value::Int(k as i64 + 1),
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    Value::Null,
                ]);
            }
        }
        for fk in crate::foreign_keys::of_table(e, tb.id)? {
            for (k, (c, p)) in fk.columns.iter().zip(&fk.parent_columns).enumerate() {
                rows.push(vec![
                    def.clone(),
                    t(&tb.database),
                    t(&fk.name),
                    def.clone(),
                    t(&tb.database),
                    t(&tb.name),
                    t(c),
                    Value::Int(k as i64 + 1),
                    Value::Int(k as i64 + 1),
                    t(&fk.parent_database),
                    t(&fk.parent_table),
                    t(p),
                ]);
            }
        }
    }
    Ok(VTable {
        columns: vec![
            "CONSTRAINT_CATALOG",
            "CONSTRAINT_SCHEMA",
            "CONSTRAINT_NAME",
            "TABLE_CATALOG",
            "TABLE_SCHEMA",
            "TABLE_NAME",
            "COLUMN_NAME",
            "ORDINAL_POSITION",
            "POSITION_IN_UNIQUE_CONSTRAINT",
            "REFERENCED_TABLE_SCHEMA",
            "REFERENCED_TABLE_NAME",
            "REFERENCED_COLUMN_NAME",
        ],
        rows,
    })
}

fn table_constraints_table(
    e: &Engine,
    all_tables: &dyn Fn() -> Vec<Arc<TableSchema>>,
    def: &Value,
) -> Result<VTable> {
    let mut rows = Vec::new();
    for tb in all_tables() {
        if tb.primary_key.is_some() {
            rows.push(vec![
                def.clone(),
                t(&tb.database),
                t("PRIMARY"),
                t(&tb.database),
                t(&tb.name),
                t("PRIMARY KEY"),
            ]);
        }
        for i in tb.indexes.iter().filter(|i| i.unique) {
            rows.push(vec![
                def.clone(),
                t(&tb.database),
                t(&i.name),
                t(&tb.database),
                t(&tb.name),
                t("UNIQUE"),
            ]);
        }
        for fk in crate::foreign_keys::of_table(e, tb.id)? {
            rows.push(vec![
                def.clone(),
                t(&tb.database),
                t(&fk.name),
                t(&tb.database),
                t(&tb.name),
                t("FOREIGN KEY"),
            ]);
        }
        for c in e.checks.for_table(&e.storage, &tb)?.declared() {
            rows.push(vec![
                def.clone(),
                t(&tb.database),
                t(&c.name),
                t(&tb.database),
                t(&tb.name),
                t("CHECK"),
            ]);
        }
    }
    Ok(VTable {
        columns: vec![
            "CONSTRAINT_CATALOG",
            "CONSTRAINT_SCHEMA",
            "CONSTRAINT_NAME",
            "TABLE_SCHEMA",
            "TABLE_NAME",
            "CONSTRAINT_TYPE",
        ],
        rows,
    })
}

fn views_table(e: &Engine, s: &Session, dbs: &[String], def: &Value) -> VTable {
    let stats = e.dataflow.view_stats();
    let mut rows = Vec::new();
    for d in dbs {
        for v in e.dataflow.named_views(d) {
            let q = crate::exec::view_definition(&e.storage, d, &v)
                .or_else(|| {
                    stats
                        .iter()
                        .find(|s| s.name.eq_ignore_ascii_case(&v))
                        .map(|s| s.query.clone())
                })
                .unwrap_or_default();
            let check = crate::view_check_option::check_option(&e.storage, d, &v)
                .map_or("NONE", |c| c.as_str());
            let updatable = if crate::dml::is_updatable(e, s, d, &v) {
                "YES"
            } else {
                "NO"
            };
            rows.push(vec![def.clone(), t(d), t(&v), t(q), t(check), t(updatable)]);
        }
    }
    VTable {
        columns: vec![
            "TABLE_CATALOG",
            "TABLE_SCHEMA",
            "TABLE_NAME",
            "VIEW_DEFINITION",
            "CHECK_OPTION",
            "IS_UPDATABLE",
        ],
        rows,
    }
}

fn referential_constraints_table(
    e: &Engine,
    all_tables: &dyn Fn() -> Vec<Arc<TableSchema>>,
    def: &Value,
) -> Result<VTable> {
    let mut rows = Vec::new();
    for tb in all_tables() {
        for fk in crate::foreign_keys::of_table(e, tb.id)? {
            rows.push(vec![
                def.clone(),
                t(&tb.database),
                t(&fk.name),
                t(&fk.parent_database),
                t("PRIMARY"),
                t(fk.on_update.sql()),
                t(fk.on_delete.sql()),
                t(&tb.name),
                t(&fk.parent_table),
            ]);
        }
    }
    Ok(VTable {
        columns: vec![
            "CONSTRAINT_CATALOG",
            "CONSTRAINT_SCHEMA",
            "CONSTRAINT_NAME",
            "UNIQUE_CONSTRAINT_SCHEMA",
            "UNIQUE_CONSTRAINT_NAME",
            "UPDATE_RULE",
            "DELETE_RULE",
            "TABLE_NAME",
            "REFERENCED_TABLE_NAME",
        ],
        rows,
    })
}
