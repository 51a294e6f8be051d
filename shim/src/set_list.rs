//! `SET a = 1, @b = 2, SESSION c = 3`: a SET of several assignments, read
//! from its tokens and run one assignment at a time. The SQL parser takes
//! everything after the first `=` as a list of values for the first
//! variable, so `SET @old = @@foreign_key_checks, foreign_key_checks = 0`
//! (the line every mysqldump/mariadb-dump file opens with) lost its second
//! assignment.
//!
//! As in MySQL, a `GLOBAL`/`SESSION`/`LOCAL` modifier applies to the
//! assignments after it that name none, every value is evaluated before
//! any variable is assigned, and when one assignment fails the statement
//! fails and changes no session or user variable.

use ladle_common::Value;
use sqlparser::ast::{self, Statement};
use sqlparser::tokenizer::Token;

use crate::error::Result;
use crate::exec::Engine;
use crate::output::Output;
use crate::session::Session;
use crate::tokens::{render_tokens, word};

const SCOPES: [&str; 3] = ["GLOBAL", "SESSION", "LOCAL"];

/// Each assignment of `SET x = v, y = w, ...` as the tokens of a SET of
/// its own (`SET [scope] y = w`); `None` unless the statement is a SET of
/// two or more assignments (or `NAMES ...` / `CHARACTER SET ...` parts).
pub fn split(toks: &[Token]) -> Option<Vec<Vec<Token>>> {
    if word(toks, 0).as_deref() != Some("SET") {
        return None;
    }
    let parts = crate::tokens::top_level_parts(&toks[1..]);
    if parts.len() < 2 || !parts.iter().all(|p| is_assignment(p)) {
        return None;
    }
    let mut scope: Option<Token> = None;
    let set = toks[0].clone();
    Some(
        parts
            .into_iter()
            .map(|p| {
                let mut out = vec![set.clone()];
                match word(p, 0) {
                    Some(w) if SCOPES.contains(&w.as_str()) => scope = Some(p[0].clone()),
                    // `@user` and `@@scope.name` say their own scope.
                    _ if starts_with_at(p) => {}
                    Some(w) if w == "NAMES" || w == "CHARACTER" || w == "CHARSET" => {}
                    _ => out.extend(scope.clone()),
                }
                out.extend(p.iter().cloned());
                out
            })
            .collect(),
    )
}

/// `[scope] name[.name...] = value`, `NAMES ...` or `CHARACTER SET ...`.
fn is_assignment(p: &[Token]) -> bool {
    match word(p, 0).as_deref() {
        Some("NAMES" | "CHARSET") => return p.len() > 1,
        Some("CHARACTER") => return word(p, 1).as_deref() == Some("SET"),
        _ => {}
    }
    let skip = usize::from(word(p, 0).is_some_and(|w| SCOPES.contains(&w.as_str())));
    let Some(eq) = p.iter().position(|t| matches!(t, Token::Eq)) else {
        return false;
    };
    eq > skip
        && eq + 1 < p.len()
        && p[skip..eq]
            .iter()
            .all(|t| matches!(t, Token::Word(_) | Token::Period))
}

fn starts_with_at(p: &[Token]) -> bool {
    matches!(p.first(), Some(Token::Word(w)) if w.value.starts_with('@'))
}

/// One assignment of a split SET, its value evaluated.
enum Step<'a> {
    Assign(ast::ObjectName, Value),
    /// `NAMES ...`, `CHARACTER SET ...`: run as a statement.
    Run(&'a [Token]),
}

/// `SET [scope] name = value` as the name (scope words as `@@scope.`) and
/// the value's expression; `None` for the other forms.
fn assignment(part: &[Token]) -> Result<Option<(ast::ObjectName, ast::Expr)>> {
    let text = match word(part, 1) {
        Some(w) if SCOPES.contains(&w.as_str()) => format!(
            "SET @@{}.{}",
            w.to_ascii_lowercase(),
            render_tokens(&part[2..])
        ),
        _ => render_tokens(part),
    };
    Ok(match crate::sqltext::parse(&text)?.pop() {
        Some(Statement::SetVariable {
            variables: ast::OneOrManyWithParens::One(name),
            mut value,
            ..
        }) if value.len() == 1 => value.pop().map(|v| (name, v)),
        _ => None,
    })
}

impl Engine {
    /// Runs a split SET (see [`split`]) as MySQL does: every value is
    /// evaluated first (`SET @e = 8, @f = @e + 1` gives @f the old @e plus
    /// one), then the assignments are made in order; when one fails, the
    /// session and user variables are put back as they were.
    pub(crate) fn set_each(&self, s: &mut Session, parts: &[Vec<Token>]) -> Result<Output> {
        let mut steps = Vec::with_capacity(parts.len());
        for p in parts {
            steps.push(match assignment(p)? {
                Some((name, expr)) => {
                    let v = self.variable_value(s, &name, &expr)?;
                    Step::Assign(name, v)
                }
                None => Step::Run(p),
            });
        }
        let variables = s.variables.clone();
        let user_variables = s.user_variables.clone();
        for step in steps {
            let done = match step {
                Step::Assign(name, v) => self.assign_variable(s, &name, v),
                Step::Run(p) => self.run_parsed(s, &render_tokens(p)).map(|_| ()),
            };
            if let Err(e) = done {
                s.variables = variables;
                s.user_variables = user_variables;
                return Err(e);
            }
        }
        Ok(Output::ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::tokens;

    fn parts(sql: &str) -> Option<Vec<String>> {
        split(&tokens(sql).ok()?).map(|v| v.iter().map(|p| render_tokens(p)).collect())
    }

    #[test]
    fn splits_assignments_and_carries_the_scope() {
        assert_eq!(
            parts("SET @OLD_FK=@@FOREIGN_KEY_CHECKS, FOREIGN_KEY_CHECKS=0").unwrap(),
            [
                "SET @OLD_FK = @@FOREIGN_KEY_CHECKS",
                "SET FOREIGN_KEY_CHECKS = 0"
            ]
        );
        assert_eq!(
            parts("SET SESSION a = IF(1, 2, 3), b = 'x,y', @c = 1, @@global.d = 2").unwrap(),
            [
                "SET SESSION a = IF ( 1 , 2 , 3 )",
                "SET SESSION b = 'x,y'",
                "SET @c = 1",
                "SET @@global . d = 2"
            ]
        );
    }

    #[test]
    fn leaves_other_sets_alone() {
        for sql in [
            "SET a = 1",
            "SET TRANSACTION ISOLATION LEVEL READ COMMITTED, READ ONLY",
            "SET DEFAULT ROLE r1, r2 TO u",
            "SET ROLE r1, r2",
            "SET a = 1,",
            "SELECT 1, 2",
        ] {
            assert_eq!(parts(sql), None, "{sql}");
        }
    }
}
