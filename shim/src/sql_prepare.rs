//! SQL-level prepared statements: `PREPARE name FROM 'text' | @var`,
//! `EXECUTE name [USING @a, 5, ...]`, `{DEALLOCATE | DROP} PREPARE name`.
//!
//! A name holds a statement prepared exactly as COM_STMT_PREPARE prepares
//! one ([`Engine::prepare`]: the same planning, counted against
//! `max_prepared_stmt_count`) and runs as COM_STMT_EXECUTE runs it
//! ([`Engine::execute_prepared`]), the user variables' values bound to its
//! `?`s. Names belong to the session ([`Session::statement_names`]): a
//! disconnect, COM_RESET_CONNECTION or COM_CHANGE_USER (each a fresh
//! session) frees them. Errors as MySQL's: 1243 for an unknown name, 1210
//! for a wrong number of values, 1295 for preparing PREPARE, EXECUTE or
//! DEALLOCATE themselves (MariaDB prepares those; Ladle, as MySQL, does
//! not, so that no statement executes itself).

use ladle_common::Value;
use sqlparser::tokenizer::Token;

use crate::error::{Result, ShimError};
use crate::exec::Engine;
use crate::output::Output;
use crate::session::Session;
use crate::tokens::{ident, word};

impl Engine {
    /// `PREPARE name FROM 'text' | @var`. A name already prepared is
    /// freed first (and stays freed if the new text fails to prepare).
    pub(crate) fn sql_prepare(&self, s: &mut Session, t: &[Token]) -> Result<Output> {
        let t = without_semicolon(t);
        let name = statement_name(t, 1)?;
        if word(t, 2).as_deref() != Some("FROM") || t.len() != 4 {
            return Err(near(t, 2));
        }
        let text = match &t[3] {
            Token::SingleQuotedString(raw) => crate::sqltext::unescape_literal(raw, '\''),
            Token::DoubleQuotedString(raw) => crate::sqltext::unescape_literal(raw, '"'),
            Token::Word(w) if w.quote_style.is_none() && w.value.starts_with('@') => {
                variable_text(s, &w.value[1..])?
            }
            _ => return Err(near(t, 3)),
        };
        free(s, &name);
        let (w0, w1) = crate::tokens::first_words(&text);
        if matches!(w0.as_str(), "PREPARE" | "EXECUTE" | "DEALLOCATE")
            || (w0 == "DROP" && w1 == "PREPARE")
        {
            return Err(ShimError::NotPreparable);
        }
        let (id, _, _) = self.prepare(s, &text)?;
        s.statement_names.insert(name, id);
        Ok(Output::ok())
    }

    /// `EXECUTE name [USING @a, @b, ...]`: the statement with each `?`
    /// bound to a user variable's value (NULL if never set).
    pub(crate) fn sql_execute(&self, s: &mut Session, t: &[Token]) -> Result<Output> {
        let t = without_semicolon(t);
        let name = statement_name(t, 1)?;
        let mut values = Vec::new();
        if t.len() > 2 {
            if word(t, 2).as_deref() != Some("USING") || t.len() < 4 {
                return Err(near(t, 2));
            }
            for part in crate::tokens::top_level_parts(&t[3..]) {
                values.push(match part {
                    [Token::Word(w)] if w.quote_style.is_none() && w.value.starts_with('@') => {
                        let var = w.value[1..].to_ascii_lowercase();
                        s.user_variables.get(&var).cloned().unwrap_or(Value::Null)
                    }
                    [] => return Err(near(t, 3)),
                    // MariaDB also takes a constant expression.
                    _ => {
                        let x =
                            crate::sqltext::parse_whole_expr(&crate::tokens::render_tokens(part))?;
                        self.eval_constant(s, &x)?
                    }
                });
            }
        }
        let id = *s
            .statement_names
            .get(&name)
            .ok_or_else(|| ShimError::UnknownStatementName {
                name: name.clone(),
                given_to: "EXECUTE",
            })?;
        let expected = s.statements.get(&id).map_or(0, |p| p.param_count());
        if expected != values.len() {
            return Err(ShimError::WrongArguments("EXECUTE".into()));
        }
        let (_, out) = self.execute_prepared(s, id, &values);
        if let Err(err) = &out {
            // The run listed its error for SHOW WARNINGS; the EXECUTE
            // lists it again when it settles (MariaDB lists it once).
            let last = s.warnings.last();
            if last.is_some_and(|w| w.level == "Error" && w.code == err.code.errno) {
                s.warnings.pop();
            }
        }
        out.map_err(ShimError::Wire)
    }

    /// `DEALLOCATE PREPARE name` / `DROP PREPARE name`.
    pub(crate) fn sql_deallocate(&self, s: &mut Session, t: &[Token]) -> Result<Output> {
        let t = without_semicolon(t);
        let name = statement_name(t, 2)?;
        if t.len() != 3 {
            return Err(near(t, 3));
        }
        if !free(s, &name) {
            return Err(ShimError::UnknownStatementName {
                name,
                given_to: "DEALLOCATE PREPARE",
            });
        }
        Ok(Output::ok())
    }
}

/// Frees the statement SQL PREPARE named `name`; false if there was none.
fn free(s: &mut Session, name: &str) -> bool {
    match s.statement_names.remove(name) {
        Some(id) => {
            s.statements.remove(&id);
            true
        }
        None => false,
    }
}

/// The statement name at `i`, lower-cased.
fn statement_name(t: &[Token], i: usize) -> Result<String> {
    match (&t.get(i), ident(t, i)) {
        (Some(Token::Word(_)), Some(name)) => Ok(name.to_lowercase()),
        _ => Err(near(t, i)),
    }
}

/// A PREPARE's text from user variable `var`: MySQL takes its value as
/// text; an unset (NULL) one is a syntax error near 'NULL'.
fn variable_text(s: &Session, var: &str) -> Result<String> {
    match s.user_variables.get(&var.to_ascii_lowercase()) {
        None | Some(Value::Null) => Err(ShimError::Parse(
            "check the manual that corresponds to your MariaDB server version for the right \
             syntax to use near 'NULL' at line 1"
                .into(),
        )),
        Some(Value::Text(text)) => Ok(text.to_string()),
        Some(Value::Bytes(bytes)) => Ok(String::from_utf8_lossy(bytes).into_owned()),
        Some(other) => Ok(other.to_string()),
    }
}

fn without_semicolon(t: &[Token]) -> &[Token] {
    match t.split_last() {
        Some((Token::SemiColon, rest)) => rest,
        _ => t,
    }
}

/// MySQL's 1064 near the token at `i` (the end of the statement if none).
fn near(t: &[Token], i: usize) -> ShimError {
    let rest = crate::tokens::render_tokens(t.get(i..).unwrap_or_default());
    ShimError::Parse(format!(
        "check the manual that corresponds to your MariaDB server version for the right \
         syntax to use near '{rest}' at line 1"
    ))
}
