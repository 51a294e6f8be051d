//! `@x := expr` in a select list, read from a statement's tokens (the SQL
//! parser does not take `:=` there): which variables each item assigns
//! and the expression left once they are taken off. Only a SELECT without
//! FROM is answered ([`crate::exec::Engine::select_assigning`]): a view
//! cannot assign row by row.

use sqlparser::tokenizer::Token;

use crate::error::{Result, ShimError};

/// One select-list item: `@a := @b := expr [AS alias]`.
#[derive(Debug, PartialEq)]
pub struct Item {
    /// The variables it assigns (lower case, without `@`), outermost first.
    pub variables: Vec<String>,
    /// The item without its assignments.
    pub expr: Vec<Token>,
    /// Its column's name: the item as written.
    pub name: String,
}

/// Whether the statement assigns a user variable with `:=`.
pub fn assigns(toks: &[Token]) -> bool {
    toks.iter().any(|t| matches!(t, Token::Assignment))
}

/// `SET @x := v, ...` with each `:=` written `=`; `None` for any other
/// statement.
pub fn set_with_equals(toks: &[Token]) -> Option<Vec<Token>> {
    let is_set =
        matches!(toks.first(), Some(Token::Word(w)) if w.value.eq_ignore_ascii_case("SET"));
    if !is_set || !assigns(toks) {
        return None;
    }
    Some(
        toks.iter()
            .map(|t| match t {
                Token::Assignment => Token::Eq,
                other => other.clone(),
            })
            .collect(),
    )
}

/// The select-list items of `SELECT item, ... [FROM DUAL]` (`toks`
/// starts at SELECT).
pub fn select_items(toks: &[Token]) -> Result<Vec<Item>> {
    let toks = without_from_dual(toks);
    let mut items = Vec::new();
    let mut depth = 0usize;
    let mut start = 1;
    for (i, t) in toks.iter().enumerate().skip(1) {
        match t {
            Token::LParen => depth += 1,
            Token::RParen => depth = depth.saturating_sub(1),
            Token::Comma if depth == 0 => {
                items.push(item(&toks[start..i])?);
                start = i + 1;
            }
            Token::Word(w) if depth == 0 && w.quote_style.is_none() && ends_list(&w.value) => {
                return Err(unsupported());
            }
            _ => {}
        }
    }
    items.push(item(&toks[start..])?);
    Ok(items)
}

/// `toks` without a final `FROM DUAL` (no table at all).
fn without_from_dual(toks: &[Token]) -> &[Token] {
    let word = |t: &Token, k: &str| matches!(t, Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(k));
    match toks {
        [head @ .., from, dual] if word(from, "FROM") && word(dual, "DUAL") => head,
        _ => toks,
    }
}

/// A clause keyword ending the select list: a query over rows.
fn ends_list(word: &str) -> bool {
    [
        "FROM", "WHERE", "GROUP", "HAVING", "ORDER", "LIMIT", "UNION", "INTO", "WINDOW",
    ]
    .iter()
    .any(|k| word.eq_ignore_ascii_case(k))
}

fn item(toks: &[Token]) -> Result<Item> {
    let mut variables = Vec::new();
    let mut rest = toks;
    while let [Token::Word(w), Token::Assignment, tail @ ..] = rest {
        let Some(name) = w.value.strip_prefix('@').filter(|n| !n.starts_with('@')) else {
            // Only a user variable takes `:=` (MySQL: 1064).
            return Err(misplaced());
        };
        variables.push(name.to_ascii_lowercase());
        rest = tail;
    }
    if matches!(rest.first(), Some(Token::Assignment)) {
        return Err(misplaced());
    }
    if assigns(rest) {
        // `:=` inside an expression, e.g. `1 + (@x := 2)`.
        return Err(unsupported());
    }
    Ok(Item {
        variables,
        expr: rest.to_vec(),
        name: crate::tokens::render_tokens(toks),
    })
}

fn misplaced() -> ShimError {
    ShimError::Parse("near ':=': only a user variable (@name) is assigned".into())
}

fn unsupported() -> ShimError {
    ShimError::Unsupported(
        "user variable assignment (:=) other than in the select list of a SELECT without FROM"
            .into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(sql: &str) -> Result<Vec<Item>> {
        select_items(&crate::tokens::tokens(sql)?)
    }

    #[test]
    fn assignments_come_off_each_item() {
        let got = items("SELECT @a := @B := 1 + 2, @a, CONCAT('x', @c) AS y").expect("items");
        assert_eq!(got[0].variables, vec!["a", "b"]);
        assert_eq!(crate::tokens::render_tokens(&got[0].expr), "1 + 2");
        assert_eq!(got[0].name, "@a := @B := 1 + 2");
        assert!(got[1].variables.is_empty());
        assert_eq!(got.len(), 3);
        assert!(items("SELECT @a := id FROM t").is_err());
        assert_eq!(items("SELECT @a := 1 FROM DUAL").expect("dual").len(), 1);
        let set = set_with_equals(&crate::tokens::tokens("SET @a := 1, @b := 2").expect("tokens"));
        assert_eq!(
            crate::tokens::render_tokens(&set.expect("a SET")),
            "SET @a = 1 , @b = 2"
        );
        assert!(matches!(
            items("SELECT 1 + (@a := 2)"),
            Err(ShimError::Unsupported(_))
        ));
        assert!(matches!(items("SELECT @@a := 2"), Err(ShimError::Parse(_))));
        assert!(matches!(items("SELECT := 2"), Err(ShimError::Parse(_))));
    }
}
