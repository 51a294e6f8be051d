//! `EXPLAIN`: a view's dataflow graph in the shape the form asks for.

use ladle_common::{SqlType, Value};
use sqlparser::ast::Statement;
use sqlparser::tokenizer::Token;

use crate::error::{Result, ShimError};
use crate::exec::Engine;
use crate::output::{column, Output};
use crate::session::Session;
use crate::sqltext::parse;
use crate::tokens::word;

impl Engine {
    /// `EXPLAIN [GRAPH | FORMAT=TREE|JSON|TRADITIONAL | EXTENDED |
    /// PARTITIONS | ANALYZE] SELECT ...`: the view's dataflow graph, in
    /// the shape the form asks for. TREE (and ANALYZE, which describes
    /// without running) is one row of text in a column named `EXPLAIN`,
    /// JSON the same as a JSON document, TRADITIONAL MySQL's twelve
    /// columns with one graph node per row in `Extra` (also for EXTENDED
    /// and PARTITIONS); plain EXPLAIN and EXPLAIN GRAPH one node per row in
    /// a `GRAPH` column.
    pub(crate) fn explain_graph(&self, s: &mut Session, t: &[Token]) -> Result<Output> {
        let mut skip = 1;
        let mut format = ExplainFormat::Graph;
        loop {
            match word(t, skip).as_deref() {
                Some("GRAPH") => skip += 1,
                Some("EXTENDED" | "PARTITIONS") => {
                    format = ExplainFormat::Traditional;
                    skip += 1;
                }
                Some("ANALYZE") => {
                    format = ExplainFormat::Tree;
                    skip += 1;
                }
                Some("FORMAT") if matches!(t.get(skip + 1), Some(Token::Eq)) => {
                    format = match word(t, skip + 2).as_deref() {
                        Some("TREE") => ExplainFormat::Tree,
                        Some("JSON") => ExplainFormat::Json,
                        Some("TRADITIONAL" | "TEXT") => ExplainFormat::Traditional,
                        other => {
                            return Err(ShimError::Parse(format!(
                                "unknown EXPLAIN format {}",
                                other.unwrap_or_default()
                            )))
                        }
                    };
                    skip += 3;
                }
                _ => break,
            }
        }
        let sql: String = t[skip..]
            .iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(" ");
        let stmt = parse(&sql)?
            .into_iter()
            .next()
            .ok_or_else(|| ShimError::Parse("empty EXPLAIN".into()))?;
        let Statement::Query(q) = stmt else {
            return Err(ShimError::Unsupported(
                "EXPLAIN of a non-SELECT statement".into(),
            ));
        };
        let db = self.query_database(s, &q)?;
        let text = self.dataflow.explain_graph(&db, &q)?;
        let text_column = || column("EXPLAIN", SqlType::Text(65535));
        Ok(match format {
            ExplainFormat::Graph => Output::Rows {
                columns: vec![column("GRAPH", SqlType::Text(65535))],
                rows: text.lines().map(|l| vec![Value::text(l)]).collect(),
            },
            ExplainFormat::Tree => Output::Rows {
                columns: vec![text_column()],
                rows: vec![vec![Value::text(&text)]].into(),
            },
            ExplainFormat::Json => {
                let doc = serde_json::json!({
                    "query_block": {
                        "select_id": 1,
                        "ladle_view": { "graph": text.lines().collect::<Vec<_>>() }
                    }
                });
                Output::Rows {
                    columns: vec![text_column()],
                    rows: vec![vec![Value::text(doc.to_string())]].into(),
                }
            }
            ExplainFormat::Traditional => {
                const COLUMNS: [&str; 12] = [
                    "id",
                    "select_type",
                    "table",
                    "partitions",
                    "type",
                    "possible_keys",
                    "key",
                    "key_len",
                    "ref",
                    "rows",
                    "filtered",
                    "Extra",
                ];
                let columns = COLUMNS
                    .iter()
                    .map(|n| column(n, SqlType::VarChar(255)))
                    .collect();
                let rows = text
                    .lines()
                    .map(|l| {
                        let mut row = vec![Value::Int(1), Value::text("SIMPLE")];
                        row.extend(std::iter::repeat_n(Value::Null, 9));
                        row.push(Value::text(l));
                        row
                    })
                    .collect();
                Output::Rows { columns, rows }
            }
        })
    }
}

/// The output shape EXPLAIN was asked for.
enum ExplainFormat {
    Graph,
    Tree,
    Json,
    Traditional,
}
