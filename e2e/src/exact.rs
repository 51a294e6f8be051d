//! Exact statement outcomes for differential tests: what a client sees of
//! one statement, over either protocol, kept as the wire delivered it
//! (bytes, not lossy strings), so two servers' answers compare exactly.
//!
//! [`Statement`] is SQL text with its literals kept apart: [`Statement::text`]
//! inlines them (COM_QUERY), [`Statement::prepared`] replaces each with `?`
//! and sends it as a parameter (COM_STMT_PREPARE + COM_STMT_EXECUTE, binary
//! result rows). [`run`] executes it and returns an [`Outcome`].

use mysql::consts::ColumnType;
use mysql::prelude::Queryable;
use mysql::{Conn, Value};

/// One literal of a statement: its SQL spelling and the parameter value a
/// prepared statement sends in its place.
#[derive(Clone, Debug)]
pub struct Literal {
    /// As written in a text-protocol statement (`'a'`, `X'00FF'`, `1.50`).
    pub sql: String,
    /// As sent to COM_STMT_EXECUTE.
    pub param: Value,
}

/// A piece of a [`Statement`].
#[derive(Clone, Debug)]
pub enum Piece {
    Sql(String),
    Lit(Literal),
}

/// SQL with its literals kept apart (see the module docs).
#[derive(Clone, Debug, Default)]
pub struct Statement {
    pub pieces: Vec<Piece>,
}

impl Statement {
    /// A statement without literals.
    pub fn sql(text: impl Into<String>) -> Statement {
        Statement {
            pieces: vec![Piece::Sql(text.into())],
        }
    }

    /// Appends SQL text.
    pub fn push(&mut self, text: impl AsRef<str>) -> &mut Self {
        match self.pieces.last_mut() {
            Some(Piece::Sql(s)) => s.push_str(text.as_ref()),
            _ => self.pieces.push(Piece::Sql(text.as_ref().to_string())),
        }
        self
    }

    /// Appends a literal.
    pub fn lit(&mut self, lit: Literal) -> &mut Self {
        self.pieces.push(Piece::Lit(lit));
        self
    }

    /// Appends another statement's pieces.
    pub fn append(&mut self, other: &Statement) -> &mut Self {
        for p in &other.pieces {
            match p {
                Piece::Sql(s) => self.push(s),
                Piece::Lit(l) => self.lit(l.clone()),
            };
        }
        self
    }

    /// The statement with its literals inlined.
    pub fn text(&self) -> String {
        self.pieces
            .iter()
            .map(|p| match p {
                Piece::Sql(s) => s.as_str(),
                Piece::Lit(l) => l.sql.as_str(),
            })
            .collect()
    }

    /// The statement with `?` for each literal, and the parameters.
    pub fn prepared(&self) -> (String, Vec<Value>) {
        let mut sql = String::new();
        let mut params = Vec::new();
        for p in &self.pieces {
            match p {
                Piece::Sql(s) => sql.push_str(s),
                Piece::Lit(l) => {
                    sql.push('?');
                    params.push(l.param.clone());
                }
            }
        }
        (sql, params)
    }
}

/// A value as a reproduction script spells it: bytes as a string with
/// `\xNN` for what is not printable UTF-8, nothing cut short.
pub fn show(v: &Value) -> String {
    match v {
        Value::Bytes(b) => {
            let mut out = String::from("'");
            for chunk in b.utf8_chunks() {
                for ch in chunk.valid().chars() {
                    match ch {
                        '\'' => out.push_str("\\'"),
                        '\\' => out.push_str("\\\\"),
                        c if c.is_control() => out.push_str(&format!("\\x{:02X}", c as u32)),
                        c => out.push(c),
                    }
                }
                for byte in chunk.invalid() {
                    out.push_str(&format!("\\x{byte:02X}"));
                }
            }
            out.push('\'');
            out
        }
        other => format!("{other:?}"),
    }
}

/// What one statement did, as a client sees it.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// A statement without a result set.
    Done {
        affected: u64,
        insert_id: u64,
        warnings: u16,
    },
    /// A result set: its columns' wire types and its rows as sent.
    Rows {
        types: Vec<ColumnType>,
        rows: Vec<Vec<Value>>,
    },
    /// An error packet's code.
    Error(u16),
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Rows { types, rows } => {
                let types: Vec<String> = types
                    .iter()
                    .map(|t| {
                        format!("{t:?}")
                            .trim_start_matches("MYSQL_TYPE_")
                            .to_string()
                    })
                    .collect();
                write!(f, "columns [{}]", types.join(", "))?;
                for row in rows {
                    let row: Vec<String> = row.iter().map(show).collect();
                    write!(f, "\n    ({})", row.join(", "))?;
                }
                Ok(())
            }
            other => write!(f, "{other:?}"),
        }
    }
}

impl Outcome {
    /// The same outcome with rows sorted (for queries whose order SQL leaves
    /// open).
    pub fn sorted(mut self) -> Outcome {
        if let Outcome::Rows { rows, .. } = &mut self {
            // By every byte (`Value`'s Debug cuts long bytes short).
            rows.sort_by_cached_key(|r| r.iter().map(show).collect::<Vec<_>>());
        }
        self
    }
}

/// Why a statement could not be compared: the connection failed (not a
/// server error packet).
#[derive(Debug)]
pub struct ClientError(pub String);

/// Runs `stmt` over the text protocol, or prepared with its literals as
/// parameters when `prepared`.
pub fn run(conn: &mut Conn, stmt: &Statement, prepared: bool) -> Result<Outcome, ClientError> {
    let outcome = if prepared {
        let (sql, params) = stmt.prepared();
        let params = if params.is_empty() {
            mysql::Params::Empty
        } else {
            mysql::Params::Positional(params)
        };
        match conn.exec_iter(sql, params) {
            Ok(result) => collect(result),
            Err(e) => Err(e),
        }
    } else {
        match conn.query_iter(stmt.text()) {
            Ok(result) => collect(result),
            Err(e) => Err(e),
        }
    };
    match outcome {
        Ok(o) => Ok(o),
        Err(mysql::Error::MySqlError(e)) => Ok(Outcome::Error(e.code)),
        Err(other) => Err(ClientError(other.to_string())),
    }
}

fn collect<P: mysql::prelude::Protocol>(
    mut result: mysql::QueryResult<'_, '_, '_, P>,
) -> Result<Outcome, mysql::Error> {
    let types: Vec<ColumnType> = result
        .columns()
        .as_ref()
        .iter()
        .map(|c| c.column_type())
        .collect();
    let affected = result.affected_rows();
    let insert_id = result.last_insert_id().unwrap_or(0);
    let warnings = result.warnings();
    let mut rows = Vec::new();
    for row in result.by_ref() {
        rows.push(
            row?.unwrap_raw()
                .into_iter()
                .map(|v| v.unwrap_or(Value::NULL))
                .collect(),
        );
    }
    while result.iter().is_some() {
        for row in result.by_ref() {
            row?;
        }
    }
    Ok(if types.is_empty() {
        Outcome::Done {
            affected,
            insert_id,
            warnings,
        }
    } else {
        Outcome::Rows { types, rows }
    })
}
