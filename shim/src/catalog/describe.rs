//! How a table is described: `DESCRIBE` / `SHOW COLUMNS` rows, its
//! indexes, and `SHOW CREATE TABLE` text.

use ladle_common::{ColumnDefault, SqlType, TableSchema, Value};
use sqlparser::ast::{self};

use super::filter::{db_or, t};
use crate::error::{Result, ShimError};
use crate::exec::Engine;
use crate::output::{text_column, Output};
use crate::session::Session;
use crate::table_notes::TableNotes;

pub(super) fn lookup(e: &Engine, db: &str, table: &str) -> Result<std::sync::Arc<TableSchema>> {
    e.storage
        .table(db, table)
        .ok_or_else(|| ShimError::UnknownTable {
            database: db.to_string(),
            table: table.to_string(),
        })
}

/// (index name, non_unique, seq_in_index (1-based), column position) for
/// the primary key and every secondary index.
pub(super) fn index_rows(schema: &TableSchema) -> Vec<(String, i64, i64, usize)> {
    let mut out = Vec::new();
    if let Some(pk) = &schema.primary_key {
        for (k, &c) in pk.iter().enumerate() {
            out.push(("PRIMARY".to_string(), 0, k as i64 + 1, c));
        }
    }
    for idx in &schema.indexes {
        for (k, &c) in idx.columns.iter().enumerate() {
            out.push((idx.name.clone(), i64::from(!idx.unique), k as i64 + 1, c));
        }
    }
    out
}

/// SHOW INDEX's and STATISTICS' COLLATION of index `index`'s key part over
/// `column`: `D` when declared DESC, else `A`.
pub(super) fn collation_letter(notes: &TableNotes, index: &str, column: &str) -> &'static str {
    if notes.is_descending(index, column) {
        "D"
    } else {
        "A"
    }
}

pub(super) fn column_key(schema: &TableSchema, c: usize) -> &'static str {
    if schema
        .primary_key
        .as_ref()
        .is_some_and(|pk| pk.contains(&c))
    {
        "PRI"
    } else if schema
        .indexes
        .iter()
        .any(|i| i.unique && i.columns.len() == 1 && i.columns[0] == c)
    {
        "UNI"
    } else if schema.indexes.iter().any(|i| i.columns.first() == Some(&c)) {
        "MUL"
    } else {
        ""
    }
}

pub(super) fn default_text(c: &ladle_common::ColumnSchema) -> Value {
    match &c.default {
        ColumnDefault::None | ColumnDefault::Generated { .. } => Value::Null,
        ColumnDefault::Value(v) => t(bit_default(c, v)
            .or_else(|| v.temporal_text(c.ty.fsp()))
            .unwrap_or_else(|| v.to_string())),
        ColumnDefault::CurrentTimestamp => t(current_timestamp_text(c)),
    }
}

/// A BIT column's default `v` as MariaDB shows it: `b'101'`.
fn bit_default(c: &ladle_common::ColumnSchema, v: &Value) -> Option<String> {
    matches!(c.ty, SqlType::Bit(_))
        .then(|| ladle_common::bit_literal(v))
        .flatten()
}

/// `current_timestamp(n)` as MariaDB shows a DEFAULT or ON UPDATE of a
/// column of precision n (`current_timestamp()` for 0).
pub(super) fn current_timestamp_text(c: &ladle_common::ColumnSchema) -> String {
    match c.ty.fsp() {
        0 => "current_timestamp()".into(),
        fsp => format!("current_timestamp({fsp})"),
    }
}

pub(super) fn extra(c: &ladle_common::ColumnSchema) -> String {
    let mut parts = Vec::new();
    if c.auto_increment {
        parts.push("auto_increment");
    }
    if let ColumnDefault::Generated { stored, .. } = &c.default {
        parts.push(if *stored {
            "STORED GENERATED"
        } else {
            "VIRTUAL GENERATED"
        });
    }
    let on_update;
    if c.on_update_current_timestamp {
        on_update = format!("on update {}", current_timestamp_text(c));
        parts.push(&on_update);
    }
    parts.join(" ")
}

/// DESCRIBE / SHOW [FULL] COLUMNS. Named views are described from their
/// result columns.
pub fn describe(
    e: &Engine,
    s: &Session,
    db: Option<String>,
    table: &str,
    full: bool,
) -> Result<Output> {
    let db = db_or(s, db)?;
    let mut rows = Vec::new();
    match e.storage.table(&db, table) {
        Some(schema) => {
            let notes = if full {
                crate::table_notes::load(&e.storage, schema.id)?
            } else {
                TableNotes::default()
            };
            for (i, c) in schema.columns.iter().enumerate() {
                if c.is_hidden() {
                    continue;
                }
                let mut r = vec![t(&c.name), t(c.ty.sql_name())];
                if full {
                    r.push(if c.ty == SqlType::Json {
                        // As SHOW CREATE TABLE writes it (MariaDB's JSON).
                        t("utf8mb4_bin")
                    } else if let Some(name) = notes.column_collation(c) {
                        t(name)
                    } else {
                        Value::Null
                    });
                }
                r.push(t(if c.nullable { "YES" } else { "NO" }));
                r.push(t(column_key(&schema, i)));
                r.push(default_text(c));
                r.push(t(extra(c)));
                if full {
                    r.push(t("select,insert,update,references"));
                    r.push(t(notes.column_comment(&c.name)));
                }
                rows.push(r);
            }
        }
        None => {
            let is_view = e
                .dataflow
                .named_views(&db)
                .iter()
                .any(|v| v.eq_ignore_ascii_case(table));
            if !is_view {
                return Err(ShimError::UnknownTable {
                    database: db,
                    table: table.to_string(),
                });
            }
            for c in view_columns(e, &db, table)? {
                let mut r = vec![t(&c.name), t(c.ty.sql_name())];
                if full {
                    r.push(Value::Null);
                }
                r.extend([
                    t(if c.nullable { "YES" } else { "NO" }),
                    t(""),
                    Value::Null,
                    t(""),
                ]);
                if full {
                    r.extend([t("select"), t("")]);
                }
                rows.push(r);
            }
        }
    }
    let names: &[&str] = if full {
        &[
            "Field",
            "Type",
            "Collation",
            "Null",
            "Key",
            "Default",
            "Extra",
            "Privileges",
            "Comment",
        ]
    } else {
        &["Field", "Type", "Null", "Key", "Default", "Extra"]
    };
    Ok(Output::Rows {
        columns: names.iter().map(|n| text_column(n)).collect(),
        rows: rows.into(),
    })
}

/// The result columns of named view `view` of `db` (planned, not
/// installed).
pub(super) fn view_columns(
    e: &Engine,
    db: &str,
    view: &str,
) -> Result<Vec<ladle_dataflow::OutputColumn>> {
    let q = crate::sqltext::parse(&format!("SELECT * FROM {}", quote_ident(view)))?;
    let Some(ast::Statement::Query(q)) = q.into_iter().next() else {
        return Err(ShimError::Internal("view probe did not parse".into()));
    };
    Ok(e.dataflow.query_columns(db, &q)?)
}

pub(super) fn quote_ident(s: &str) -> String {
    format!("`{}`", s.replace('`', "``"))
}

/// SHOW CREATE TABLE text, in MariaDB's layout (SQLAlchemy parses it),
/// a column's collation only where it differs from the table's; CHECK
/// constraints where MySQL 8.0 writes them (Ladle announces itself as
/// MySQL 8.0 and names them so): every one after the keys, by name, none
/// inline on its column. The condition is in one pair of parentheses, as
/// MariaDB writes it (MySQL 8.0 adds a second), so that a dump of Ladle's
/// dumps the same bytes after a trip through MariaDB.
pub fn create_table_sql(
    schema: &TableSchema,
    checks: &[crate::checks::CheckConstraint],
    keys: &[crate::foreign_keys::ForeignKey],
    notes: &TableNotes,
    next_auto_increment: u64,
) -> String {
    let mut lines = Vec::new();
    let table_collation = notes.collation_name();
    for c in schema.columns.iter().filter(|c| !c.is_hidden()) {
        let mut l = format!("  {} {}", quote_ident(&c.name), c.ty.sql_name());
        // JSON as MariaDB writes it, which both servers read back as JSON:
        // `longtext CHARACTER SET utf8mb4 COLLATE utf8mb4_bin ... CHECK
        // (json_valid(`c`))` (MySQL would write `json`).
        let json = c.ty == SqlType::Json;
        if json {
            if table_collation != "utf8mb4_bin" {
                l.push_str(" CHARACTER SET utf8mb4 COLLATE utf8mb4_bin");
            }
        } else if let Some(name) = notes.column_collation(c).filter(|n| *n != table_collation) {
            let charset = name.split('_').next().unwrap_or(name);
            l.push_str(&format!(" CHARACTER SET {charset} COLLATE {name}"));
        }
        if !c.nullable {
            l.push_str(" NOT NULL");
        } else if matches!(c.ty, SqlType::Timestamp { .. }) {
            // MariaDB spells out NULL for a TIMESTAMP, which once could not be.
            l.push_str(" NULL");
        }
        match &c.default {
            _ if notes.default_expression(&c.name).is_some() => {
                let sql = notes.default_expression(&c.name).unwrap_or_default();
                l.push_str(&format!(" DEFAULT ({sql})"));
            }
            ColumnDefault::Value(v) => {
                let numeric = matches!(
                    v,
                    Value::Int(_) | Value::UInt(_) | Value::Decimal(_) | Value::Double(_)
                );
                if let Some(bits) = bit_default(c, v) {
                    l.push_str(&format!(" DEFAULT {bits}"));
                } else if numeric {
                    l.push_str(&format!(" DEFAULT {v}"));
                } else {
                    let text = v.temporal_text(c.ty.fsp()).unwrap_or_else(|| v.to_string());
                    l.push_str(&format!(" DEFAULT {}", crate::params::quote(&text)));
                }
            }
            ColumnDefault::CurrentTimestamp => {
                l.push_str(&format!(" DEFAULT {}", current_timestamp_text(c)))
            }
            ColumnDefault::Generated { expr, stored } => l.push_str(&format!(
                " GENERATED ALWAYS AS ({expr}) {}",
                if *stored { "STORED" } else { "VIRTUAL" }
            )),
            ColumnDefault::None if c.nullable && !c.auto_increment => l.push_str(" DEFAULT NULL"),
            ColumnDefault::None => {}
        }
        if c.on_update_current_timestamp {
            l.push_str(&format!(" ON UPDATE {}", current_timestamp_text(c)));
        }
        if c.auto_increment {
            l.push_str(" AUTO_INCREMENT");
        }
        let comment = notes.column_comment(&c.name);
        if !comment.is_empty() {
            l.push_str(&format!(" COMMENT {}", crate::params::quote(comment)));
        }
        if json {
            // MariaDB's JSON is LONGTEXT with this check.
            l.push_str(&format!(" CHECK (json_valid({}))", quote_ident(&c.name)));
        }
        lines.push(l);
    }
    // A functional key part shows as its expression, `((abs(weight)))`;
    // a DESC one with DESC after it.
    let cols = |index: &str, idx: &[usize]| {
        idx.iter()
            .map(|&i| {
                let c = &schema.columns[i];
                let part = match crate::functional_index::expression(c) {
                    Some(sql) => format!("({sql})"),
                    None => match notes.prefix(index, &c.name) {
                        Some(n) => format!("{}({n})", quote_ident(&c.name)),
                        None => quote_ident(&c.name),
                    },
                };
                if notes.is_descending(index, &c.name) {
                    format!("{part} DESC")
                } else {
                    part
                }
            })
            .collect::<Vec<_>>()
            .join(",")
    };
    if let Some(pk) = &schema.primary_key {
        lines.push(format!("  PRIMARY KEY ({})", cols("PRIMARY", pk)));
    }
    for idx in &schema.indexes {
        let kind = if idx.unique { "UNIQUE KEY" } else { "KEY" };
        lines.push(format!(
            "  {kind} {} ({})",
            quote_ident(&idx.name),
            cols(&idx.name, &idx.columns)
        ));
    }
    // By name, as MySQL and MariaDB list them (not in declaration order).
    let mut keys: Vec<_> = keys.iter().collect();
    keys.sort_by(|a, b| a.name.cmp(&b.name));
    for k in keys {
        lines.push(format!("  {}", k.clause(&schema.database, false)));
    }
    let mut checks: Vec<_> = checks.iter().collect();
    checks.sort_by(|a, b| a.name.cmp(&b.name));
    for check in checks {
        lines.push(format!(
            "  CONSTRAINT {} CHECK {}",
            quote_ident(&check.name),
            crate::checks::shown_clause(&check.sql)
        ));
    }
    // MariaDB shows the counter once it has moved past 1.
    let auto_increment = match schema.auto_increment_column() {
        Some(_) if next_auto_increment > 1 => format!(" AUTO_INCREMENT={next_auto_increment}"),
        _ => String::new(),
    };
    let table_charset = table_collation.split('_').next().unwrap_or("utf8mb4");
    let mut sql = format!(
        "CREATE TABLE {} (\n{}\n) ENGINE=InnoDB{auto_increment} DEFAULT CHARSET={table_charset} COLLATE={table_collation}",
        quote_ident(&schema.name),
        lines.join(",\n")
    );
    if !notes.comment.is_empty() {
        sql.push_str(&format!(
            " COMMENT={}",
            crate::params::quote(&notes.comment)
        ));
    }
    sql
}
