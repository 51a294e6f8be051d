//! Catalog statements answered by the shim: SHOW ..., DESCRIBE, and the
//! `information_schema` virtual tables (SCHEMATA, TABLES, COLUMNS,
//! STATISTICS, KEY_COLUMN_USAGE, TABLE_CONSTRAINTS, VIEWS, plus empty
//! ROUTINES, TRIGGERS, REFERENTIAL_CONSTRAINTS). Virtual-table queries are
//! evaluated here: the rows are built from the catalog, joined (inner and
//! comma joins), filtered and projected by the view engine's evaluator
//! with the rows' values as literals ([`crate::vars::EvalContext`]), then
//! sorted and limited.

use std::cmp::Ordering;

use ladle_common::{ColumnDefault, SqlType, TableSchema, Value};
use ladle_dataflow::OutputColumn;
use sqlparser::ast::{self, Expr, SelectItem, SetExpr, TableFactor};
use sqlparser::tokenizer::Token;

use crate::error::{Result, ShimError};
use crate::exec::Engine;
use crate::output::{column, int_column, text_column, Output};
use crate::session::Session;
use crate::tokens::{ident, qualified_name, word};
use crate::vars::{self, compare, like, system_variables, truth, EvalContext, EvalError};

enum Filter {
    None,
    Like(String),
    Where(Box<Expr>),
}

/// Parses an optional trailing `LIKE 'p'` or `WHERE expr` at `i`.
fn filter_at(t: &[Token], i: usize) -> Result<Filter> {
    match word(t, i).as_deref() {
        Some("LIKE") => match t.get(i + 1) {
            Some(Token::SingleQuotedString(p)) | Some(Token::DoubleQuotedString(p)) => {
                Ok(Filter::Like(p.clone()))
            }
            _ => Err(ShimError::Parse("LIKE needs a pattern".into())),
        },
        Some("WHERE") => {
            let text = t[i + 1..]
                .iter()
                .map(render_token)
                .collect::<Vec<_>>()
                .join(" ");
            let e = crate::sqltext::parse_expr(&text)?;
            Ok(Filter::Where(Box::new(e)))
        }
        None if i >= t.len() => Ok(Filter::None),
        _ => Err(ShimError::Parse(format!(
            "near '{}'",
            t[i..]
                .iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(" ")
        ))),
    }
}

fn render_token(t: &Token) -> String {
    match t {
        Token::SingleQuotedString(s) => crate::params::quote(s),
        other => other.to_string(),
    }
}

fn finish(
    e: &Engine,
    s: &Session,
    columns: Vec<OutputColumn>,
    mut rows: Vec<Vec<Value>>,
    f: Filter,
) -> Result<Output> {
    match f {
        Filter::None => {}
        Filter::Like(p) => rows.retain(|r| like(&r[0].to_string(), &p)),
        Filter::Where(w) => {
            let names: Vec<(String, String)> = columns
                .iter()
                .map(|c| (String::new(), c.name.clone()))
                .collect();
            let mut kept = Vec::new();
            for r in rows {
                let ctx = EvalContext {
                    session: s,
                    facts: &e.facts,
                    columns: &names,
                    row: &r,
                };
                if truth(&eval(&ctx, &w)?) == Some(true) {
                    kept.push(r);
                }
            }
            rows = kept;
        }
    }
    Ok(Output::Rows {
        columns,
        rows: rows.into(),
    })
}

fn eval(ctx: &EvalContext<'_>, x: &Expr) -> Result<Value> {
    match ctx.eval(x) {
        Ok(v) => Ok(v),
        Err(EvalError::UnknownColumn(c)) => Err(ShimError::UnknownColumn(c, "where clause".into())),
        Err(EvalError::UnknownVariable(v)) => Err(ShimError::UnknownVariable(v)),
        Err(EvalError::Compile(_)) => Err(ShimError::Unsupported(format!(
            "expression {x} on a catalog table"
        ))),
        Err(EvalError::Eval(err)) => Err(err.into()),
    }
}

fn t(s: impl AsRef<str>) -> Value {
    Value::text(s.as_ref())
}

fn db_or(s: &Session, explicit: Option<String>) -> Result<String> {
    explicit
        .or_else(|| s.database.clone())
        .ok_or(ShimError::NoDatabase)
}

/// `FROM|IN db` at `*i`, if present.
fn from_db(tk: &[Token], i: &mut usize) -> Option<String> {
    if matches!(word(tk, *i).as_deref(), Some("FROM" | "IN")) {
        let d = ident(tk, *i + 1);
        *i += 2;
        d
    } else {
        None
    }
}

/// SHOW statements.
pub fn show(e: &Engine, s: &mut Session, tk: &[Token]) -> Result<Output> {
    let mut i = 1;
    let mut full = false;
    while matches!(
        word(tk, i).as_deref(),
        Some("FULL" | "EXTENDED" | "GLOBAL" | "SESSION" | "LOCAL")
    ) {
        if word(tk, i).as_deref() == Some("FULL") {
            full = true;
        }
        i += 1;
    }
    let what = word(tk, i).unwrap_or_default();
    i += 1;
    match what.as_str() {
        "DATABASES" | "SCHEMAS" => {
            let mut dbs = e.storage.databases();
            dbs.push("information_schema".into());
            dbs.retain(|d| crate::privileges::sees_database(e, s, d));
            dbs.sort();
            let rows = dbs.into_iter().map(|d| vec![t(d)]).collect();
            finish(e, s, vec![text_column("Database")], rows, filter_at(tk, i)?)
        }
        "TABLES" => {
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
        "COLUMNS" | "FIELDS" => {
            let mut j = i + 1;
            let (qdb, table) = qualified_name(tk, &mut j)
                .ok_or_else(|| ShimError::Parse("SHOW COLUMNS FROM".into()))?;
            let db = from_db(tk, &mut j).or(qdb);
            let out = describe(e, s, db, &table, full)?;
            let Output::Rows { columns, rows } = out else {
                return Ok(out);
            };
            finish(e, s, columns, rows.into_vec(), filter_at(tk, j)?)
        }
        "INDEX" | "INDEXES" | "KEYS" => {
            let mut j = i + 1;
            let (qdb, table) = qualified_name(tk, &mut j)
                .ok_or_else(|| ShimError::Parse("SHOW INDEX FROM".into()))?;
            let db = db_or(s, from_db(tk, &mut j).or(qdb))?;
            let schema = lookup(e, &db, &table)?;
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
            let rows = index_rows(&schema)
                .into_iter()
                .map(|(name, non_unique, seq, col)| {
                    let c = &schema.columns[col];
                    vec![
                        t(&schema.name),
                        Value::Int(non_unique),
                        t(name),
                        Value::Int(seq),
                        t(&c.name),
                        t("A"),
                        Value::Int(0),
                        Value::Null,
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
        "CREATE" => {
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
                        let cols = vec![
                            text_column("Table"),
                            column("Create Table", SqlType::Text(65535)),
                        ];
                        return Ok(Output::Rows {
                            columns: cols,
                            rows: vec![vec![
                                t(&schema.name),
                                t(create_table_sql(&schema, &checks, &keys)),
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
                    if word(tk, j).as_deref() == Some("IF") {
                        j += 3;
                    }
                    let db = ident(tk, j)
                        .ok_or_else(|| ShimError::Parse("SHOW CREATE DATABASE".into()))?;
                    if !e.storage.databases().contains(&db) {
                        return Err(ShimError::UnknownDatabase(db));
                    }
                    let sql =
                        format!("CREATE DATABASE `{db}` /*!40100 DEFAULT CHARACTER SET utf8mb4 */");
                    Ok(Output::Rows {
                        columns: vec![text_column("Database"), text_column("Create Database")],
                        rows: vec![vec![t(db), t(sql)]].into(),
                    })
                }
                other => Err(ShimError::Unsupported(format!("SHOW CREATE {other}"))),
            }
        }
        "VARIABLES" => {
            let rows = system_variables(s, &e.facts)
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
        "STATUS" => {
            let m = &e.metrics;
            let rows = vec![
                vec![t("Connections"), t(m.connections_total.get().to_string())],
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
        "WARNINGS" | "ERRORS" => {
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
        "COLLATION" => {
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
        "CHARACTER" | "CHARSET" => {
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
        "ENGINES" => {
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
        "VIEWS" => {
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
        "TABLE" if word(tk, i).as_deref() == Some("STATUS") => {
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
            let rows = e
                .storage
                .tables(&db)
                .iter()
                .map(|tb| {
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
                        t("utf8mb4_general_ci"),
                        t(""),
                    ]
                })
                .collect();
            finish(e, s, cols, rows, filter_at(tk, j)?)
        }
        "PROCESSLIST" => {
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
        "PLUGINS" | "TRIGGERS" | "EVENTS" | "PROCEDURE" | "FUNCTION" | "MASTER" | "SLAVE"
        | "REPLICA" | "BINARY" | "OPEN" => Ok(Output::Rows {
            columns: vec![text_column("Name")],
            rows: Vec::new().into(),
        }),
        other => Err(ShimError::Parse(format!("near 'SHOW {other}'"))),
    }
}

fn show_create_view(e: &Engine, db: &str, name: &str) -> Result<Output> {
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
            let sql = format!("CREATE VIEW `{name}` AS {}", q.unwrap_or_default());
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

fn lookup(e: &Engine, db: &str, table: &str) -> Result<std::sync::Arc<TableSchema>> {
    e.storage
        .table(db, table)
        .ok_or_else(|| ShimError::UnknownTable {
            database: db.to_string(),
            table: table.to_string(),
        })
}

/// (index name, non_unique, seq_in_index (1-based), column position) for
/// the primary key and every secondary index.
fn index_rows(schema: &TableSchema) -> Vec<(String, i64, i64, usize)> {
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

fn table_list(e: &Engine, db: &str) -> Result<Vec<Vec<Value>>> {
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

fn column_key(schema: &TableSchema, c: usize) -> &'static str {
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

fn default_text(c: &ladle_common::ColumnSchema) -> Value {
    match &c.default {
        ColumnDefault::None | ColumnDefault::Generated { .. } => Value::Null,
        ColumnDefault::Value(v) => t(v.temporal_text(c.ty.fsp()).unwrap_or_else(|| v.to_string())),
        ColumnDefault::CurrentTimestamp => t(current_timestamp_text(c)),
    }
}

/// `current_timestamp(n)` as MariaDB shows a DEFAULT or ON UPDATE of a
/// column of precision n (`current_timestamp()` for 0).
fn current_timestamp_text(c: &ladle_common::ColumnSchema) -> String {
    match c.ty.fsp() {
        0 => "current_timestamp()".into(),
        fsp => format!("current_timestamp({fsp})"),
    }
}

fn extra(c: &ladle_common::ColumnSchema) -> String {
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
            for (i, c) in schema.columns.iter().enumerate() {
                let mut r = vec![t(&c.name), t(c.ty.sql_name())];
                if full {
                    r.push(if c.ty.is_text() {
                        t(c.collation.name())
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
                    r.push(t(""));
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
            let q =
                crate::sqltext::parse(&format!("SELECT * FROM `{}`", table.replace('`', "``")))?;
            let Some(ast::Statement::Query(q)) = q.into_iter().next() else {
                return Err(ShimError::Internal("view probe did not parse".into()));
            };
            let pq = e.dataflow.prepare(&db, &q)?;
            for c in pq.columns() {
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

fn quote_ident(s: &str) -> String {
    format!("`{}`", s.replace('`', "``"))
}

/// SHOW CREATE TABLE text, in MariaDB's layout (SQLAlchemy parses it):
/// column CHECKs inline, table CHECKs as `CONSTRAINT name CHECK (...)`.
pub fn create_table_sql(
    schema: &TableSchema,
    checks: &[crate::checks::CheckConstraint],
    keys: &[crate::foreign_keys::ForeignKey],
) -> String {
    let mut lines = Vec::new();
    for c in &schema.columns {
        let mut l = format!("  {} {}", quote_ident(&c.name), c.ty.sql_name());
        if c.ty.is_text() && c.collation != ladle_common::Collation::GeneralCi {
            l.push_str(&format!(" COLLATE {}", c.collation.name()));
        }
        if !c.nullable {
            l.push_str(" NOT NULL");
        } else if matches!(c.ty, SqlType::Timestamp { .. }) {
            // MariaDB spells out NULL for a TIMESTAMP, which once could not be.
            l.push_str(" NULL");
        }
        match &c.default {
            ColumnDefault::Value(v) => {
                let numeric = matches!(
                    v,
                    Value::Int(_) | Value::UInt(_) | Value::Decimal(_) | Value::Double(_)
                );
                if numeric {
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
        for check in checks {
            if check
                .column
                .as_deref()
                .is_some_and(|col| col.eq_ignore_ascii_case(&c.name))
            {
                l.push_str(&format!(" CHECK ({})", check.sql));
            }
        }
        lines.push(l);
    }
    let cols = |idx: &[usize]| {
        idx.iter()
            .map(|&i| quote_ident(&schema.columns[i].name))
            .collect::<Vec<_>>()
            .join(",")
    };
    if let Some(pk) = &schema.primary_key {
        lines.push(format!("  PRIMARY KEY ({})", cols(pk)));
    }
    for idx in &schema.indexes {
        let kind = if idx.unique { "UNIQUE KEY" } else { "KEY" };
        lines.push(format!(
            "  {kind} {} ({})",
            quote_ident(&idx.name),
            cols(&idx.columns)
        ));
    }
    for k in keys {
        lines.push(format!("  {}", k.clause(&schema.database, false)));
    }
    for check in checks.iter().filter(|c| c.column.is_none()) {
        lines.push(format!(
            "  CONSTRAINT {} CHECK ({})",
            quote_ident(&check.name),
            check.sql
        ));
    }
    format!(
        "CREATE TABLE {} (\n{}\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci",
        quote_ident(&schema.name),
        lines.join(",\n")
    )
}

// ---------------------------------------------------------------------------
// information_schema

const VIRTUAL_TABLES: &[&str] = &[
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
fn process_rows(e: &Engine, s: &Session, full: bool) -> Vec<Vec<Value>> {
    let all = crate::privileges::has_global(e, s, crate::accounts::PROCESS);
    e.processes.rows(&s.user, all, full)
}

fn is_info_schema_name(s: &Session, name: &ast::ObjectName) -> bool {
    match name.0.as_slice() {
        [d, _] => d.value.eq_ignore_ascii_case("information_schema"),
        [_] => s
            .database
            .as_deref()
            .is_some_and(|d| d.eq_ignore_ascii_case("information_schema")),
        _ => false,
    }
}

/// Whether a SELECT reads information_schema tables.
pub fn is_information_schema_query(s: &Session, q: &ast::Query) -> bool {
    let SetExpr::Select(sel) = q.body.as_ref() else {
        return false;
    };
    sel.from.iter().any(|tw| {
        std::iter::once(&tw.relation)
            .chain(tw.joins.iter().map(|j| &j.relation))
            .any(|f| matches!(f, TableFactor::Table { name, .. } if is_info_schema_name(s, name)))
    })
}

/// A virtual table: column names and rows.
struct VTable {
    columns: Vec<&'static str>,
    rows: Vec<Vec<Value>>,
}

fn type_parts(ty: &SqlType) -> (String, Value, Value, Value, Value) {
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

fn build_vtable(e: &Engine, s: &Session, name: &str) -> Result<VTable> {
    // A stored account sees only what it holds privileges on.
    let mut dbs = e.storage.databases();
    dbs.retain(|d| crate::privileges::sees_database(e, s, d));
    let all_tables = || {
        dbs.iter()
            .flat_map(|d| e.storage.tables(d))
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
        "TABLES" => {
            let mut rows = Vec::new();
            for tb in all_tables() {
                rows.push(vec![
                    def.clone(),
                    t(&tb.database),
                    t(&tb.name),
                    t("BASE TABLE"),
                    t("InnoDB"),
                    Value::Int(10),
                    t("Dynamic"),
                    Value::UInt(e.storage.estimate_rows(tb.id)),
                    Value::Null,
                    t("utf8mb4_general_ci"),
                    t(""),
                ]);
            }
            for d in &dbs {
                for v in e.dataflow.named_views(d) {
                    rows.push(vec![
                        def.clone(),
                        t(d),
                        t(v),
                        t("VIEW"),
                        Value::Null,
                        Value::Null,
                        Value::Null,
                        Value::Null,
                        Value::Null,
                        Value::Null,
                        t("VIEW"),
                    ]);
                }
            }
            VTable {
                columns: vec![
                    "TABLE_CATALOG",
                    "TABLE_SCHEMA",
                    "TABLE_NAME",
                    "TABLE_TYPE",
                    "ENGINE",
                    "VERSION",
                    "ROW_FORMAT",
                    "TABLE_ROWS",
                    "AUTO_INCREMENT",
                    "TABLE_COLLATION",
                    "TABLE_COMMENT",
                ],
                rows,
            }
        }
        "COLUMNS" => {
            let mut rows = Vec::new();
            for tb in all_tables() {
                for (i, c) in tb.columns.iter().enumerate() {
                    let (dt, maxlen, octets, prec, scale) = type_parts(&c.ty);
                    let dt_prec = if matches!(
                        c.ty,
                        SqlType::DateTime { .. } | SqlType::Timestamp { .. } | SqlType::Time { .. }
                    ) {
                        Value::Int(i64::from(c.ty.fsp()))
                    } else {
                        Value::Null
                    };
                    let (cs, coll) = if c.ty.is_text() {
                        (t("utf8mb4"), t(c.collation.name()))
                    } else {
                        (Value::Null, Value::Null)
                    };
                    rows.push(vec![
                        def.clone(),
                        t(&tb.database),
                        t(&tb.name),
                        t(&c.name),
                        Value::Int(i as i64 + 1),
                        default_text(c),
                        t(if c.nullable { "YES" } else { "NO" }),
                        t(dt),
                        maxlen,
                        octets,
                        prec,
                        scale,
                        dt_prec,
                        cs,
                        coll,
                        t(c.ty.sql_name()),
                        t(column_key(&tb, i)),
                        t(extra(c)),
                        t("select,insert,update,references"),
                        t(""),
                        t(c.default.generation().unwrap_or("")),
                    ]);
                }
            }
            VTable {
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
            }
        }
        "STATISTICS" => {
            let mut rows = Vec::new();
            for tb in all_tables() {
                for (iname, non_unique, seq, col) in index_rows(&tb) {
                    let c = &tb.columns[col];
                    rows.push(vec![
                        def.clone(),
                        t(&tb.database),
                        t(&tb.name),
                        Value::Int(non_unique),
                        t(&tb.database),
                        t(iname),
                        Value::Int(seq),
                        t(&c.name),
                        t("A"),
                        Value::Int(0),
                        Value::Null,
                        Value::Null,
                        t(if c.nullable { "YES" } else { "" }),
                        t("BTREE"),
                        t(""),
                        t(""),
                    ]);
                }
            }
            VTable {
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
                ],
                rows,
            }
        }
        "KEY_COLUMN_USAGE" => {
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
                    for (k, &c) in cols.iter().enumerate() {
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
            VTable {
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
            }
        }
        "TABLE_CONSTRAINTS" => {
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
            VTable {
                columns: vec![
                    "CONSTRAINT_CATALOG",
                    "CONSTRAINT_SCHEMA",
                    "CONSTRAINT_NAME",
                    "TABLE_SCHEMA",
                    "TABLE_NAME",
                    "CONSTRAINT_TYPE",
                ],
                rows,
            }
        }
        "VIEWS" => {
            let stats = e.dataflow.view_stats();
            let mut rows = Vec::new();
            for d in &dbs {
                for v in e.dataflow.named_views(d) {
                    let q = crate::exec::view_definition(&e.storage, d, &v)
                        .or_else(|| {
                            stats
                                .iter()
                                .find(|s| s.name.eq_ignore_ascii_case(&v))
                                .map(|s| s.query.clone())
                        })
                        .unwrap_or_default();
                    rows.push(vec![def.clone(), t(d), t(v), t(q), t("NONE"), t("NO")]);
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
        "CHECK_CONSTRAINTS" => VTable {
            columns: vec![
                "CONSTRAINT_CATALOG",
                "CONSTRAINT_SCHEMA",
                "TABLE_NAME",
                "CONSTRAINT_NAME",
                "CHECK_CLAUSE",
            ],
            rows: Vec::new(),
        },
        "REFERENTIAL_CONSTRAINTS" => {
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
            VTable {
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
            }
        }
        _ => {
            return Err(ShimError::UnknownTable {
                database: "information_schema".into(),
                table: name.to_string(),
            })
        }
    })
}

fn is_count(e: &Expr) -> bool {
    matches!(e, Expr::Function(f) if f.name.to_string().eq_ignore_ascii_case("count"))
}

/// An output row with the source row it came from.
type OutAndSource = (Vec<Value>, Vec<Value>);

/// Evaluates a SELECT over information_schema tables.
pub fn information_schema_select(e: &Engine, s: &mut Session, q: &ast::Query) -> Result<Output> {
    let SetExpr::Select(sel) = q.body.as_ref() else {
        return Err(ShimError::Unsupported(
            "set operations over information_schema".into(),
        ));
    };
    // Sources and join conditions.
    let mut cols: Vec<(String, String)> = Vec::new();
    let mut rows: Vec<Vec<Value>> = vec![Vec::new()];
    let mut conds: Vec<&Expr> = Vec::new();
    let add = |f: &TableFactor,
               cols: &mut Vec<(String, String)>,
               rows: &mut Vec<Vec<Value>>|
     -> Result<()> {
        let TableFactor::Table { name, alias, .. } = f else {
            return Err(ShimError::Unsupported(
                "derived tables over information_schema".into(),
            ));
        };
        if !is_info_schema_name(s, name) {
            return Err(ShimError::Unsupported(
                "joining information_schema with user tables".into(),
            ));
        }
        let tname = crate::sqltext::last_part(name);
        let vt = build_vtable(e, s, &tname)?;
        let q = alias
            .as_ref()
            .map(|a| a.name.value.clone())
            .unwrap_or(tname);
        cols.extend(vt.columns.iter().map(|c| (q.clone(), c.to_string())));
        let mut out = Vec::with_capacity(rows.len() * vt.rows.len());
        for l in rows.iter() {
            for r in &vt.rows {
                let mut x = l.clone();
                x.extend(r.iter().cloned());
                out.push(x);
            }
        }
        *rows = out;
        Ok(())
    };
    for tw in &sel.from {
        add(&tw.relation, &mut cols, &mut rows)?;
        for j in &tw.joins {
            match &j.join_operator {
                ast::JoinOperator::Inner(ast::JoinConstraint::On(c)) => conds.push(c),
                ast::JoinOperator::Inner(ast::JoinConstraint::None)
                | ast::JoinOperator::CrossJoin => {}
                _ => {
                    return Err(ShimError::Unsupported(
                        "outer joins over information_schema".into(),
                    ))
                }
            }
            add(&j.relation, &mut cols, &mut rows)?;
        }
    }
    if let Some(w) = &sel.selection {
        conds.push(w);
    }
    let mut kept = Vec::new();
    for r in rows {
        let ctx = EvalContext {
            session: s,
            facts: &e.facts,
            columns: &cols,
            row: &r,
        };
        let mut ok = true;
        for c in &conds {
            if truth(&eval(&ctx, c)?) != Some(true) {
                ok = false;
                break;
            }
        }
        if ok {
            kept.push(r);
        }
    }
    // Projection.
    if sel.projection.len() == 1 {
        if let SelectItem::UnnamedExpr(x) | SelectItem::ExprWithAlias { expr: x, .. } =
            &sel.projection[0]
        {
            if is_count(x) {
                let name = match &sel.projection[0] {
                    SelectItem::ExprWithAlias { alias, .. } => alias.value.clone(),
                    _ => x.to_string(),
                };
                return Ok(Output::Rows {
                    columns: vec![int_column(&name)],
                    rows: vec![vec![Value::Int(kept.len() as i64)]].into(),
                });
            }
        }
    }
    let mut out_names: Vec<String> = Vec::new();
    let mut projections: Vec<Option<&Expr>> = Vec::new(); // None = source column i
    let mut source_cols: Vec<usize> = Vec::new();
    for item in &sel.projection {
        match item {
            SelectItem::Wildcard(_) => {
                for (i, (_, n)) in cols.iter().enumerate() {
                    out_names.push(n.clone());
                    projections.push(None);
                    source_cols.push(i);
                }
            }
            SelectItem::QualifiedWildcard(q, _) => {
                let qn = crate::sqltext::last_part(q);
                for (i, (qq, n)) in cols.iter().enumerate() {
                    if qq.eq_ignore_ascii_case(&qn) {
                        out_names.push(n.clone());
                        projections.push(None);
                        source_cols.push(i);
                    }
                }
            }
            SelectItem::UnnamedExpr(x) => {
                out_names.push(match x {
                    Expr::Identifier(i) => i.value.clone(),
                    Expr::CompoundIdentifier(ids) => {
                        ids.last().map(|i| i.value.clone()).unwrap_or_default()
                    }
                    other => other.to_string(),
                });
                projections.push(Some(x));
                source_cols.push(0);
            }
            SelectItem::ExprWithAlias { expr, alias } => {
                out_names.push(alias.value.clone());
                projections.push(Some(expr));
                source_cols.push(0);
            }
        }
    }
    let mut result: Vec<(Vec<Value>, Vec<Value>)> = Vec::new(); // (output row, source row)
    for r in kept {
        let ctx = EvalContext {
            session: s,
            facts: &e.facts,
            columns: &cols,
            row: &r,
        };
        let mut o = Vec::with_capacity(projections.len());
        for (p, &sc) in projections.iter().zip(&source_cols) {
            o.push(match p {
                None => r[sc].clone(),
                Some(x) => eval(&ctx, x)?,
            });
        }
        result.push((o, r));
    }
    if matches!(sel.distinct, Some(ast::Distinct::Distinct)) {
        let mut seen: Vec<Vec<Value>> = Vec::new();
        result.retain(|(o, _)| {
            if seen.contains(o) {
                false
            } else {
                seen.push(o.clone());
                true
            }
        });
    }
    // ORDER BY: an ordinal, an output alias, or an expression over the source.
    if let Some(ob) = &q.order_by {
        let mut keyed: Vec<(Vec<Value>, OutAndSource)> = Vec::new();
        for (o, r) in result {
            let ctx = EvalContext {
                session: s,
                facts: &e.facts,
                columns: &cols,
                row: &r,
            };
            let mut key = Vec::new();
            for k in &ob.exprs {
                let v = match &k.expr {
                    Expr::Value(ast::Value::Number(n, _)) => {
                        let i: usize = n.parse().unwrap_or(1);
                        o.get(i.saturating_sub(1)).cloned().unwrap_or(Value::Null)
                    }
                    Expr::Identifier(id)
                        if out_names.iter().any(|n| n.eq_ignore_ascii_case(&id.value)) =>
                    {
                        let i = out_names
                            .iter()
                            .position(|n| n.eq_ignore_ascii_case(&id.value))
                            .unwrap_or(0);
                        o[i].clone()
                    }
                    x => eval(&ctx, x)?,
                };
                key.push(v);
            }
            keyed.push((key, (o, r)));
        }
        keyed.sort_by(|a, b| {
            for (i, k) in ob.exprs.iter().enumerate() {
                let mut c = if a.0[i].is_null() || b.0[i].is_null() {
                    a.0[i].cmp(&b.0[i])
                } else {
                    compare(&a.0[i], &b.0[i])
                };
                if k.asc == Some(false) {
                    c = c.reverse();
                }
                if c != Ordering::Equal {
                    return c;
                }
            }
            Ordering::Equal
        });
        result = keyed.into_iter().map(|(_, x)| x).collect();
    }
    let mut out_rows: Vec<Vec<Value>> = result.into_iter().map(|(o, _)| o).collect();
    if let Some(off) = &q.offset {
        let n = e.eval_constant(s, &off.value)?.as_i64().unwrap_or(0).max(0) as usize;
        out_rows.drain(..n.min(out_rows.len()));
    }
    if let Some(l) = &q.limit {
        let n = e.eval_constant(s, l)?.as_i64().unwrap_or(i64::MAX).max(0) as usize;
        out_rows.truncate(n);
    }
    let columns = out_names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let is_int = out_rows
                .iter()
                .map(|r| &r[i])
                .find(|v| !v.is_null())
                .is_some_and(|v| matches!(v, Value::Int(_) | Value::UInt(_)));
            if is_int {
                int_column(n)
            } else {
                text_column(n)
            }
        })
        .collect();
    let _ = vars::SERVER_VERSION;
    Ok(Output::Rows {
        columns,
        rows: out_rows.into(),
    })
}
