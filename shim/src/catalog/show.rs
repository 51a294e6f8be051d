//! `SHOW ...`: one function per form, each building its rows from the
//! catalog, the session or the server state.

use ladle_common::{SqlType, Value};
use sqlparser::tokenizer::Token;

use super::describe::{collation_letter, create_table_sql, describe, index_rows, lookup};
use super::filter::{db_or, filter_at, finish, from_db, t};
use super::information_schema::{process_rows, VIRTUAL_TABLES};
use crate::error::{Result, ShimError};
use crate::exec::Engine;
use crate::output::{column, int_column, text_column, Output};
use crate::session::Session;
use crate::tokens::{ident, qualified_name, word};
use crate::vars::system_variables;

/// Whether `SHOW <what> ...` lists what the catalog holds (databases,
/// tables and their columns, indexes, definitions, status).
fn reads_catalog(what: &str) -> bool {
    matches!(
        what,
        "DATABASES"
            | "SCHEMAS"
            | "TABLES"
            | "COLUMNS"
            | "FIELDS"
            | "INDEX"
            | "INDEXES"
            | "KEYS"
            | "CREATE"
            | "VIEWS"
            | "TABLE"
    )
}

/// SHOW statements.
pub fn show(e: &Engine, s: &mut Session, tk: &[Token]) -> Result<Output> {
    let mut i = 1;
    let mut full = false;
    let mut global = false;
    while matches!(
        word(tk, i).as_deref(),
        Some("FULL" | "EXTENDED" | "GLOBAL" | "SESSION" | "LOCAL")
    ) {
        match word(tk, i).as_deref() {
            Some("FULL") => full = true,
            Some("GLOBAL") => global = true,
            _ => {}
        }
        i += 1;
    }
    let what = word(tk, i).unwrap_or_default();
    i += 1;
    if reads_catalog(&what) {
        // As a read of a table: after the session's writes made on a
        // cluster's primary (row counts, AUTO_INCREMENT, schema).
        e.await_session_writes(s).map_err(ShimError::Wire)?;
    }
    match what.as_str() {
        "DATABASES" | "SCHEMAS" => show_databases(e, s, tk, i),
        "TABLES" => show_tables(e, s, tk, i, full),
        "COLUMNS" | "FIELDS" => show_columns(e, s, tk, i, full),
        "INDEX" | "INDEXES" | "KEYS" => show_index(e, s, tk, i),
        "CREATE" => show_create(e, s, tk, i),
        "VARIABLES" => show_variables(e, s, tk, i, global),
        "STATUS" => show_status(e, s, tk, i),
        // SHOW COUNT(*) WARNINGS | ERRORS
        "COUNT"
            if matches!(tk.get(i), Some(Token::LParen))
                && matches!(tk.get(i + 1), Some(Token::Mul))
                && matches!(tk.get(i + 2), Some(Token::RParen)) =>
        {
            let (name, n) = match word(tk, i + 3).as_deref() {
                Some("WARNINGS") => ("@@session.warning_count", s.warnings.len()),
                Some("ERRORS") => (
                    "@@session.error_count",
                    s.warnings.iter().filter(|w| w.level == "Error").count(),
                ),
                _ => return Err(ShimError::Parse("near 'SHOW COUNT(*)'".into())),
            };
            Ok(Output::Rows {
                columns: vec![int_column(name)],
                rows: vec![vec![Value::Int(n as i64)]].into(),
            })
        }
        "WARNINGS" | "ERRORS" => show_warnings(s, &what),
        "COLLATION" => show_collation(e, s, tk, i),
        "CHARACTER" | "CHARSET" => show_character_set(e, s, tk, i, &what),
        "ENGINES" => show_engines(),
        "VIEWS" => show_views(e, s, tk, i),
        "TABLE" if word(tk, i).as_deref() == Some("STATUS") => show_table_status(e, s, tk, i),
        "PROCESSLIST" => show_processlist(e, s, full),
        "PLUGINS" | "TRIGGERS" | "EVENTS" | "PROCEDURE" | "FUNCTION" | "MASTER" | "SLAVE"
        | "REPLICA" | "BINARY" | "OPEN" => Ok(Output::Rows {
            columns: vec![text_column("Name")],
            rows: Vec::new().into(),
        }),
        other => Err(ShimError::Parse(format!("near 'SHOW {other}'"))),
    }
}

fn show_databases(e: &Engine, s: &mut Session, tk: &[Token], i: usize) -> Result<Output> {
    let mut dbs = e.storage.databases();
    dbs.push("information_schema".into());
    dbs.retain(|d| crate::privileges::sees_database(e, s, d));
    dbs.sort();
    let rows = dbs.into_iter().map(|d| vec![t(d)]).collect();
    finish(e, s, vec![text_column("Database")], rows, filter_at(tk, i)?)
}

fn show_tables(
    e: &Engine,
    s: &mut Session,
    tk: &[Token],
    mut i: usize,
    full: bool,
) -> Result<Output> {
    let db = db_or(s, from_db(tk, &mut i))?;
    crate::privileges::check_use(e, s, &db)?;
    let mut rows = table_list(e, &db)?;
    rows.retain(|r| match r.first() {
        Some(Value::Text(name)) => crate::privileges::sees_table(e, s, &db, name),
        _ => true,
    });
    if !full {
        for r in &mut rows {
            r.truncate(1);
        }
    }
    let mut cols = vec![text_column(&format!("Tables_in_{db}"))];
    if full {
        cols.push(text_column("Table_type"));
    }
    finish(e, s, cols, rows, filter_at(tk, i)?)
}

fn show_columns(e: &Engine, s: &mut Session, tk: &[Token], i: usize, full: bool) -> Result<Output> {
    let mut j = i + 1;
    let (qdb, table) =
        qualified_name(tk, &mut j).ok_or_else(|| ShimError::Parse("SHOW COLUMNS FROM".into()))?;
    let db = from_db(tk, &mut j).or(qdb);
    let out = describe(e, s, db, &table, full)?;
    let Output::Rows { columns, rows } = out else {
        return Ok(out);
    };
    finish(e, s, columns, rows.into_vec(), filter_at(tk, j)?)
}

fn show_index(e: &Engine, s: &mut Session, tk: &[Token], i: usize) -> Result<Output> {
    let mut j = i + 1;
    let (qdb, table) =
        qualified_name(tk, &mut j).ok_or_else(|| ShimError::Parse("SHOW INDEX FROM".into()))?;
    let db = db_or(s, from_db(tk, &mut j).or(qdb))?;
    let cols = [
        "Table",
        "Non_unique",
        "Key_name",
        "Seq_in_index",
        "Column_name",
        "Collation",
        "Cardinality",
        "Sub_part",
        "Packed",
        "Null",
        "Index_type",
        "Comment",
        "Index_comment",
    ];
    let columns = cols
        .iter()
        .map(|c| {
            if matches!(
                *c,
                "Non_unique" | "Seq_in_index" | "Cardinality" | "Sub_part"
            ) {
                int_column(c)
            } else {
                text_column(c)
            }
        })
        .collect();
    // A view has no keys (`mariadb-dump --xml` asks for them).
    let is_view = || {
        e.dataflow
            .named_views(&db)
            .iter()
            .any(|v| v.eq_ignore_ascii_case(&table))
    };
    if e.storage.table(&db, &table).is_none() && is_view() {
        return finish(e, s, columns, Vec::new(), filter_at(tk, j)?);
    }
    let schema = lookup(e, &db, &table)?;
    let notes = crate::table_notes::load(&e.storage, schema.id)?;
    let rows = index_rows(&schema)
        .into_iter()
        .map(|(name, non_unique, seq, col)| {
            let c = &schema.columns[col];
            let collation = collation_letter(&notes, &name, &c.name);
            let sub_part = notes
                .prefix(&name, &c.name)
                .map_or(Value::Null, |n| Value::Int(i64::from(n)));
            vec![
                t(&schema.name),
                Value::Int(non_unique),
                t(name),
                Value::Int(seq),
                // A functional key part has no column (MySQL 8).
                if c.is_hidden() {
                    Value::Null
                } else {
                    t(&c.name)
                },
                t(collation),
                Value::Int(0),
                sub_part,
                Value::Null,
                t(if c.nullable { "YES" } else { "" }),
                t("BTREE"),
                t(""),
                t(""),
            ]
        })
        .collect();
    finish(e, s, columns, rows, filter_at(tk, j)?)
}

fn show_create(e: &Engine, s: &mut Session, tk: &[Token], i: usize) -> Result<Output> {
    let kind = word(tk, i).unwrap_or_default();
    let mut j = i + 1;
    match kind.as_str() {
        "TABLE" => {
            let (qdb, table) = qualified_name(tk, &mut j)
                .ok_or_else(|| ShimError::Parse("SHOW CREATE TABLE".into()))?;
            let db = db_or(s, qdb)?;
            if let Some(schema) = e.storage.table(&db, &table) {
                let checks: Vec<_> = e
                    .checks
                    .for_table(&e.storage, &schema)?
                    .declared()
                    .cloned()
                    .collect();
                let keys = crate::foreign_keys::of_table(e, schema.id)?;
                let notes = crate::table_notes::load(&e.storage, schema.id)?;
                let next_auto_increment = e.storage.next_auto_increment(schema.id)?;
                let cols = vec![
                    text_column("Table"),
                    column("Create Table", SqlType::Text(65535)),
                ];
                return Ok(Output::Rows {
                    columns: cols,
                    rows: vec![vec![
                        t(&schema.name),
                        t(create_table_sql(
                            &schema,
                            &checks,
                            &keys,
                            &notes,
                            next_auto_increment,
                        )),
                    ]]
                    .into(),
                });
            }
            show_create_view(e, &db, &table)
        }
        "VIEW" => {
            let (qdb, view) = qualified_name(tk, &mut j)
                .ok_or_else(|| ShimError::Parse("SHOW CREATE VIEW".into()))?;
            let db = db_or(s, qdb)?;
            show_create_view(e, &db, &view)
        }
        "DATABASE" | "SCHEMA" => {
            let if_not_exists = word(tk, j).as_deref() == Some("IF");
            if if_not_exists {
                j += 3;
            }
            let db = ident(tk, j).ok_or_else(|| ShimError::Parse("SHOW CREATE DATABASE".into()))?;
            if !e.storage.databases().contains(&db) {
                return Err(ShimError::UnknownDatabase(db));
            }
            // As MariaDB 10.11 writes it; `mariadb-dump --databases` asks
            // with IF NOT EXISTS and copies the text into the dump.
            let sql = format!(
                "CREATE DATABASE {}{} /*!40100 DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci */",
                if if_not_exists { "/*!32312 IF NOT EXISTS*/ " } else { "" },
                super::describe::quote_ident(&db)
            );
            Ok(Output::Rows {
                columns: vec![text_column("Database"), text_column("Create Database")],
                rows: vec![vec![t(db), t(sql)]].into(),
            })
        }
        other => Err(ShimError::Unsupported(format!("SHOW CREATE {other}"))),
    }
}

/// SHOW [GLOBAL | SESSION] VARIABLES: the session's values, or with
/// GLOBAL those a new session would start with.
fn show_variables(
    e: &Engine,
    s: &mut Session,
    tk: &[Token],
    i: usize,
    global: bool,
) -> Result<Output> {
    let values = if global {
        crate::vars::global_system_variables(&e.facts)
    } else {
        system_variables(s, &e.facts)
    };
    let rows = values
        .into_iter()
        .map(|(n, v)| vec![t(n), t(v.to_string())])
        .collect();
    finish(
        e,
        s,
        vec![text_column("Variable_name"), text_column("Value")],
        rows,
        filter_at(tk, i)?,
    )
}

fn show_status(e: &Engine, s: &mut Session, tk: &[Token], i: usize) -> Result<Output> {
    let m = &e.metrics;
    // The public key a caching_sha2_password client may ask for (MySQL's
    // status variable; empty without a key pair).
    let public_key = e.rsa_keys.as_ref().map_or("", |k| k.public_pem());
    let rows = vec![
        vec![
            t("Aborted_connects"),
            t(m.connections_aborted.get().to_string()),
        ],
        vec![t("Caching_sha2_password_rsa_public_key"), t(public_key)],
        vec![t("Connections"), t(m.connections_total.get().to_string())],
        vec![
            t("Max_used_connections"),
            t(m.connections_max_used.get().to_string()),
        ],
        vec![
            t("Prepared_stmt_count"),
            t(crate::session::prepared_statement_count().to_string()),
        ],
        vec![t("Queries"), t(m.queries_count().to_string())],
        vec![t("Threads_connected"), t(m.connections.get().to_string())],
        vec![t("Uptime"), t(m.uptime_seconds().to_string())],
    ];
    finish(
        e,
        s,
        vec![text_column("Variable_name"), text_column("Value")],
        rows,
        filter_at(tk, i)?,
    )
}

fn show_warnings(s: &mut Session, what: &str) -> Result<Output> {
    let rows = if what == "WARNINGS" {
        s.warnings
            .iter()
            .map(|w| vec![t(w.level), Value::Int(i64::from(w.code)), t(&w.message)])
            .collect()
    } else {
        s.warnings
            .iter()
            .filter(|w| w.level == "Error")
            .map(|w| vec![t(w.level), Value::Int(i64::from(w.code)), t(&w.message)])
            .collect()
    };
    Ok(Output::Rows {
        columns: vec![
            text_column("Level"),
            int_column("Code"),
            text_column("Message"),
        ],
        rows,
    })
}

fn show_collation(e: &Engine, s: &mut Session, tk: &[Token], i: usize) -> Result<Output> {
    let cols = vec![
        text_column("Collation"),
        text_column("Charset"),
        int_column("Id"),
        text_column("Default"),
        text_column("Compiled"),
        int_column("Sortlen"),
    ];
    let rows = vec![
        vec![
            t("utf8mb4_general_ci"),
            t("utf8mb4"),
            Value::Int(45),
            t("Yes"),
            t("Yes"),
            Value::Int(1),
        ],
        vec![
            t("utf8mb4_bin"),
            t("utf8mb4"),
            Value::Int(46),
            t(""),
            t("Yes"),
            Value::Int(1),
        ],
        vec![
            t("utf8_general_ci"),
            t("utf8"),
            Value::Int(33),
            t("Yes"),
            t("Yes"),
            Value::Int(1),
        ],
        vec![
            t("binary"),
            t("binary"),
            Value::Int(63),
            t("Yes"),
            t("Yes"),
            Value::Int(1),
        ],
    ];
    finish(e, s, cols, rows, filter_at(tk, i)?)
}

fn show_character_set(
    e: &Engine,
    s: &mut Session,
    tk: &[Token],
    mut i: usize,
    what: &str,
) -> Result<Output> {
    if what == "CHARACTER" {
        i += 1; // SET
    }
    let cols = vec![
        text_column("Charset"),
        text_column("Description"),
        text_column("Default collation"),
        int_column("Maxlen"),
    ];
    let rows = vec![
        vec![
            t("utf8mb4"),
            t("UTF-8 Unicode"),
            t("utf8mb4_general_ci"),
            Value::Int(4),
        ],
        vec![
            t("utf8"),
            t("UTF-8 Unicode"),
            t("utf8_general_ci"),
            Value::Int(3),
        ],
        vec![
            t("binary"),
            t("Binary pseudo charset"),
            t("binary"),
            Value::Int(1),
        ],
    ];
    finish(e, s, cols, rows, filter_at(tk, i)?)
}

fn show_engines() -> Result<Output> {
    let cols = [
        "Engine",
        "Support",
        "Comment",
        "Transactions",
        "XA",
        "Savepoints",
    ]
    .iter()
    .map(|c| text_column(c))
    .collect();
    let rows = vec![vec![
        t("InnoDB"),
        t("DEFAULT"),
        t("Ladle: RocksDB base tables with incrementally maintained views (name kept for client compatibility)"),
        t("YES"),
        t("NO"),
        t("NO"),
    ]];
    Ok(Output::Rows {
        columns: cols,
        rows: rows.into(),
    })
}

fn show_views(e: &Engine, s: &mut Session, tk: &[Token], i: usize) -> Result<Output> {
    let cols = vec![
        text_column("name"),
        column("query", SqlType::Text(65535)),
        text_column("key_columns"),
        int_column("cached_keys"),
        int_column("cached_rows"),
        int_column("memory_bytes"),
        int_column("hits"),
        int_column("misses"),
        column("hit_rate", SqlType::Double),
        int_column("upqueries"),
    ];
    let rows = e
        .dataflow
        .view_stats()
        .into_iter()
        .map(|v| {
            let total = v.hits + v.misses;
            let rate = if total == 0 {
                Value::Null
            } else {
                Value::Double(v.hits as f64 / total as f64)
            };
            vec![
                t(v.name),
                t(v.query),
                t(v.key_columns.join(",")),
                Value::UInt(v.cached_keys),
                Value::UInt(v.cached_rows),
                Value::UInt(v.memory_bytes),
                Value::UInt(v.hits),
                Value::UInt(v.misses),
                rate,
                Value::UInt(v.upqueries),
            ]
        })
        .collect();
    finish(e, s, cols, rows, filter_at(tk, i)?)
}

fn show_table_status(e: &Engine, s: &mut Session, tk: &[Token], i: usize) -> Result<Output> {
    let mut j = i + 1;
    let db = db_or(s, from_db(tk, &mut j))?;
    let names = [
        "Name",
        "Engine",
        "Version",
        "Row_format",
        "Rows",
        "Avg_row_length",
        "Data_length",
        "Auto_increment",
        "Create_time",
        "Collation",
        "Comment",
    ];
    let cols = names
        .iter()
        .map(|c| {
            if matches!(
                *c,
                "Version" | "Rows" | "Avg_row_length" | "Data_length" | "Auto_increment"
            ) {
                int_column(c)
            } else {
                text_column(c)
            }
        })
        .collect();
    let notes = crate::table_notes::load_all(&e.storage)?;
    let mut rows: Vec<Vec<Value>> = e
        .storage
        .tables(&db)
        .iter()
        .filter(|tb| !e.temporary_tables.contains(&db, &tb.name))
        .map(|tb| {
            let note = notes.get(&tb.id).cloned().unwrap_or_default();
            vec![
                t(&tb.name),
                t("InnoDB"),
                Value::Int(10),
                t("Dynamic"),
                Value::UInt(e.storage.estimate_rows(tb.id)),
                Value::Int(0),
                Value::Int(0),
                Value::Null,
                Value::Null,
                t(note.collation_name()),
                t(note.comment),
            ]
        })
        .collect();
    // Views too, as in MariaDB (`mariadb-dump --xml` reads each one's).
    for v in e.dataflow.named_views(&db) {
        let mut row = vec![t(v)];
        row.extend(std::iter::repeat_n(Value::Null, 9));
        row.push(t("VIEW"));
        rows.push(row);
    }
    rows.sort_by_key(|r| match &r[0] {
        Value::Text(name) => name.to_string(),
        _ => String::new(),
    });
    finish(e, s, cols, rows, filter_at(tk, j)?)
}

fn show_processlist(e: &Engine, s: &mut Session, full: bool) -> Result<Output> {
    let cols = vec![
        int_column("Id"),
        text_column("User"),
        text_column("Host"),
        text_column("db"),
        text_column("Command"),
        int_column("Time"),
        text_column("State"),
        text_column("Info"),
    ];
    Ok(Output::Rows {
        columns: cols,
        rows: process_rows(e, s, full).into(),
    })
}

pub(super) fn show_create_view(e: &Engine, db: &str, name: &str) -> Result<Output> {
    let stats = e.dataflow.view_stats();
    let is_named = e
        .dataflow
        .named_views(db)
        .iter()
        .any(|v| v.eq_ignore_ascii_case(name));
    let query = crate::exec::view_definition(&e.storage, db, name).or_else(|| {
        stats
            .iter()
            .find(|v| v.name.eq_ignore_ascii_case(name))
            .map(|v| v.query.clone())
    });
    match (is_named, query) {
        (true, q) => {
            let mut sql = format!("CREATE VIEW `{name}` AS {}", q.unwrap_or_default());
            if let Some(c) = crate::view_check_option::check_option(&e.storage, db, name) {
                sql.push_str(&format!(" WITH {} CHECK OPTION", c.as_str()));
            }
            Ok(Output::Rows {
                columns: vec![
                    text_column("View"),
                    column("Create View", SqlType::Text(65535)),
                    text_column("character_set_client"),
                    text_column("collation_connection"),
                ],
                rows: vec![vec![t(name), t(sql), t("utf8mb4"), t("utf8mb4_general_ci")]].into(),
            })
        }
        (false, _) => Err(ShimError::UnknownTable {
            database: db.to_string(),
            table: name.to_string(),
        }),
    }
}

pub(super) fn table_list(e: &Engine, db: &str) -> Result<Vec<Vec<Value>>> {
    if db.eq_ignore_ascii_case("information_schema") {
        return Ok(VIRTUAL_TABLES
            .iter()
            .map(|n| vec![t(n), t("SYSTEM VIEW")])
            .collect());
    }
    if !e.storage.databases().iter().any(|d| d == db) {
        return Err(ShimError::UnknownDatabase(db.to_string()));
    }
    let mut rows: Vec<Vec<Value>> = e
        .storage
        .tables(db)
        .iter()
        .filter(|tb| !e.temporary_tables.contains(db, &tb.name))
        .map(|tb| vec![t(&tb.name), t("BASE TABLE")])
        .collect();
    rows.extend(
        e.dataflow
            .named_views(db)
            .into_iter()
            .map(|v| vec![t(v), t("VIEW")]),
    );
    rows.sort_by(|a, b| a[0].cmp(&b[0]));
    Ok(rows)
}
