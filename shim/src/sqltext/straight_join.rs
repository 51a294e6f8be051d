//! MySQL's `STRAIGHT_JOIN`, which sqlparser 0.52 does not read: as a join
//! operator (`a STRAIGHT_JOIN b [ON ...]`) it is an inner join that makes
//! MySQL read the left table first, and as a SELECT modifier (`SELECT
//! STRAIGHT_JOIN ...`) it does that for every join of the SELECT. Both
//! only steer MySQL's join order and never change an answer, and Ladle
//! plans its views itself, so the parser is given `JOIN` for the operator
//! and nothing for the modifier.

use sqlparser::tokenizer::{Token, TokenWithLocation, Whitespace};

use super::token_walk::{is_word, SELECT_MODIFIERS};

/// `toks` with each unquoted `STRAIGHT_JOIN` read as MySQL does: blank
/// after `SELECT` and its other modifiers, `JOIN` elsewhere.
pub(super) fn read_straight_join(mut toks: Vec<TokenWithLocation>) -> Vec<TokenWithLocation> {
    let mut prev: Option<usize> = None;
    for i in 0..toks.len() {
        if matches!(toks[i].token, Token::Whitespace(_)) {
            continue;
        }
        if is_straight_join(&toks[i].token) {
            toks[i].token = if prev.is_some_and(|p| is_select_modifier_slot(&toks[p].token)) {
                Token::Whitespace(Whitespace::Space)
            } else {
                Token::make_keyword("JOIN")
            };
            // A blanked modifier keeps the one before it as `prev`, so
            // `SELECT STRAIGHT_JOIN DISTINCT` still reads right.
            if matches!(toks[i].token, Token::Whitespace(_)) {
                continue;
            }
        }
        prev = Some(i);
    }
    toks
}

fn is_straight_join(t: &Token) -> bool {
    is_word(t, "STRAIGHT_JOIN")
}

/// `SELECT` or one of its modifiers: a `STRAIGHT_JOIN` after it is the
/// SELECT modifier.
fn is_select_modifier_slot(t: &Token) -> bool {
    is_word(t, "SELECT") || SELECT_MODIFIERS.iter().any(|m| is_word(t, m))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(sql: &str) -> String {
        let toks = crate::sqltext::tokenize(sql).expect("tokenizes");
        super::super::token_walk::rendered(read_straight_join(toks))
    }

    #[test]
    fn the_operator_is_a_join_and_the_modifier_goes() {
        assert_eq!(
            read("SELECT * FROM a STRAIGHT_JOIN b ON a.x = b.x"),
            "SELECT * FROM a JOIN b ON a.x = b.x"
        );
        assert_eq!(
            read("SELECT STRAIGHT_JOIN a.x FROM a, b"),
            "SELECT a.x FROM a, b"
        );
        assert_eq!(
            read("SELECT DISTINCT straight_join x FROM a straight_join b"),
            "SELECT DISTINCT x FROM a JOIN b"
        );
        // A quoted name is a name.
        assert_eq!(
            read("SELECT `STRAIGHT_JOIN` FROM t"),
            "SELECT `STRAIGHT_JOIN` FROM t"
        );
    }
}
