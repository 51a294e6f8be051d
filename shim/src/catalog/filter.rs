//! What the SHOW statements share: the optional `LIKE` / `WHERE` filter of
//! their rows and the result set it leaves.

use ladle_common::Value;
use ladle_dataflow::OutputColumn;
use sqlparser::ast::Expr;
use sqlparser::tokenizer::Token;

use crate::error::{Result, ShimError};
use crate::exec::Engine;
use crate::output::Output;
use crate::session::Session;
use crate::tokens::{ident, render_token, word};
use crate::vars::{like, truth, EvalContext, EvalError};

pub(super) enum Filter {
    None,
    Like(String),
    Where(Box<Expr>),
}

/// Parses an optional trailing `LIKE 'p'` or `WHERE expr` at `i`.
pub(super) fn filter_at(t: &[Token], i: usize) -> Result<Filter> {
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

pub(super) fn finish(
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

pub(super) fn eval(ctx: &EvalContext<'_>, x: &Expr) -> Result<Value> {
    match ctx.eval(x) {
        Ok(v) => Ok(v),
        Err(EvalError::UnknownColumn(c)) => Err(ShimError::UnknownColumn(c, "where clause".into())),
        Err(EvalError::UnknownVariable(v)) => Err(ShimError::UnknownVariable(v)),
        Err(EvalError::Compile(_)) => Err(ShimError::Unsupported(format!(
            "expression {x} on a catalog table"
        ))),
        Err(EvalError::Eval(err)) => Err(err.into()),
        Err(EvalError::Refused(err)) => Err(ShimError::Wire(err)),
    }
}

pub(super) fn t(s: impl AsRef<str>) -> Value {
    Value::text(s.as_ref())
}

pub(super) fn db_or(s: &Session, explicit: Option<String>) -> Result<String> {
    explicit
        .or_else(|| s.database.clone())
        .ok_or(ShimError::NoDatabase)
}

/// `FROM|IN db` at `*i`, if present.
pub(super) fn from_db(tk: &[Token], i: &mut usize) -> Option<String> {
    if matches!(word(tk, *i).as_deref(), Some("FROM" | "IN")) {
        let d = ident(tk, *i + 1);
        *i += 2;
        d
    } else {
        None
    }
}
