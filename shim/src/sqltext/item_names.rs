//! The names MySQL and MariaDB give result columns without an alias: a
//! column reference is named by the column as written, a lone string
//! literal by its value, `NULL`/`TRUE`/`FALSE` by the keyword, and any
//! other item by the statement's own text of it, from its first token to
//! its last (spaces and comments inside kept, at most 255 characters):
//! `SELECT round(a,1)+0` names its
//! column `round(a,1)+0`, where the parser's rendering would say
//! `round(a, 1) + 0`. Drivers and ORMs that read a result without aliases
//! (`cursor.description`) see these names.
//!
//! The view a query reads may be shared by texts of the same shape, so
//! the names are taken from each statement's own text
//! ([`select_item_names`]) and laid over the view's columns
//! ([`ItemNames::apply`]).

use ladle_dataflow::OutputColumn;
use sqlparser::ast::{self, SelectItem};

use super::token_walk::SELECT_MODIFIERS;

/// MariaDB's longest item name, in characters.
const MAX_NAME_CHARS: usize = 255;

/// The names of a SELECT's result columns that its text decides, by
/// select-list position; `None` keeps the name the view gives (an alias,
/// or an item this module does not read).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ItemNames {
    /// The items before the first `*` (all of them without one).
    leading: Vec<Option<String>>,
    /// With a `*` or `t.*` in the list: the items after the last one,
    /// which name the last columns.
    trailing: Option<Vec<Option<String>>>,
}

impl ItemNames {
    /// Renames `columns` (the result of the statement these names were
    /// read from). Columns are left alone when their number cannot be
    /// the select list's.
    pub fn apply(&self, columns: &mut [OutputColumn]) {
        match &self.trailing {
            None if columns.len() != self.leading.len() => {}
            None => set_names(columns.iter_mut(), &self.leading),
            Some(trailing) => {
                if columns.len() < self.leading.len() + trailing.len() {
                    return;
                }
                set_names(columns.iter_mut(), &self.leading);
                let tail = columns.len() - trailing.len();
                set_names(columns[tail..].iter_mut(), trailing);
            }
        }
    }

    /// Whether applying these names changes nothing.
    pub fn is_empty(&self) -> bool {
        let none = |v: &[Option<String>]| v.iter().all(Option::is_none);
        none(&self.leading) && self.trailing.as_deref().is_none_or(none)
    }
}

fn set_names<'a>(columns: impl Iterator<Item = &'a mut OutputColumn>, names: &[Option<String>]) {
    for (c, n) in columns.zip(names) {
        if let Some(n) = n {
            c.name.clone_from(n);
        }
    }
}

/// The result-column names `sql`'s select list (or an INSERT's, REPLACE's
/// or DELETE's RETURNING list) decides (see the module docs); `None` when
/// `sql` is not one such statement whose list can be read.
pub fn select_item_names(sql: &str) -> Option<ItemNames> {
    let texts = select_item_texts(sql)?;
    let mut names = ItemNames::default();
    for text in texts {
        let name = match parse_item(&text) {
            Some(SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..)) => {
                names.trailing = Some(Vec::new());
                continue;
            }
            Some(SelectItem::UnnamedExpr(e)) => unaliased_name(&e, &text),
            _ => None,
        };
        match &mut names.trailing {
            Some(t) => t.push(name),
            None => names.leading.push(name),
        }
    }
    Some(names)
}

/// `sql`, a CREATE VIEW or CREATE TABLE ... SELECT, with each item of its
/// query's select list that has no alias given its MySQL name as one
/// (`a+1` becomes ``a+1 AS `a+1` ``), so that the view's or table's
/// columns are named as MariaDB names them (it stores the aliases too:
/// SHOW CREATE VIEW shows them); `None` when there is none to give.
pub fn with_item_aliases(sql: &str) -> Option<String> {
    let spans = select_item_spans(sql, true)?;
    let mut out = String::with_capacity(sql.len() + 32);
    let mut copied = 0;
    for (s, e) in spans {
        let text = &sql[s..e];
        let Some(SelectItem::UnnamedExpr(x)) = parse_item(text) else {
            continue;
        };
        let Some(name) = unaliased_name(&x, text) else {
            continue;
        };
        out.push_str(&sql[copied..e]);
        out.push_str(" AS `");
        out.push_str(&name.replace('`', "``"));
        out.push('`');
        copied = e;
    }
    (copied > 0).then(|| out + &sql[copied..])
}

/// The one select item `text` holds, if it parses as one.
fn parse_item(text: &str) -> Option<SelectItem> {
    let mut items = crate::sqltext::parse_select_items(text).ok()?;
    (items.len() == 1).then(|| items.pop()).flatten()
}

/// The name of select item `e` without an alias, written as `text`;
/// `None` for a bare column reference, which the view names already.
fn unaliased_name(e: &ast::Expr, text: &str) -> Option<String> {
    let mut bare = e;
    while let ast::Expr::Nested(inner) = bare {
        bare = inner;
    }
    let name = match bare {
        ast::Expr::Identifier(_) | ast::Expr::CompoundIdentifier(_) if bare == e => return None,
        // `(a)` and `(t.a)` are named `a`.
        ast::Expr::Identifier(id) => id.value.clone(),
        ast::Expr::CompoundIdentifier(ids) if !ids.is_empty() => ids[ids.len() - 1].value.clone(),
        ast::Expr::Value(ast::Value::Null) if bare == e => "NULL".into(),
        ast::Expr::Value(ast::Value::Boolean(b)) if bare == e => {
            if *b { "TRUE" } else { "FALSE" }.into()
        }
        ast::Expr::Value(
            ast::Value::SingleQuotedString(_)
            | ast::Value::DoubleQuotedString(_)
            | ast::Value::NationalStringLiteral(_),
        )
        | ast::Expr::IntroducedString { .. }
            if bare == e =>
        {
            ladle_dataflow::expr_column_name(e)
        }
        _ => text.chars().take(MAX_NAME_CHARS).collect(),
    };
    Some(name)
}

/// Words that end a select list.
const LIST_END: [&str; 14] = [
    "FROM",
    "INTO",
    "WHERE",
    "GROUP",
    "HAVING",
    "ORDER",
    "LIMIT",
    "UNION",
    "EXCEPT",
    "INTERSECT",
    "WINDOW",
    "FOR",
    "LOCK",
    "PROCEDURE",
];

/// One lexical piece of the text, as far as splitting a select list
/// needs: comments, quoted text, words, and single characters.
#[derive(Debug, PartialEq)]
enum Piece {
    Comment,
    Space,
    Quoted,
    Word,
    Char(u8),
}

/// The pieces of `sql` with their byte ranges; `None` if a quote or
/// comment is left open.
fn pieces(sql: &str) -> Option<Vec<(Piece, usize, usize)>> {
    let b = sql.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let start = i;
        let c = b[i];
        let piece = if c.is_ascii_whitespace() {
            while i < b.len() && b[i].is_ascii_whitespace() {
                i += 1;
            }
            Piece::Space
        } else if c == b'#' || (c == b'-' && b.get(i + 1) == Some(&b'-') && dash_comment(b, i)) {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            Piece::Comment
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            // An executable comment `/*! ... */` is SQL: not read here.
            if b.get(i + 2) == Some(&b'!') {
                return None;
            }
            let close = sql[i + 2..].find("*/")?;
            i += 2 + close + 2;
            Piece::Comment
        } else if matches!(c, b'\'' | b'"' | b'`') {
            i = quoted_end(b, i)?;
            Piece::Quoted
        } else if is_word_byte(c) {
            while i < b.len() && is_word_byte(b[i]) {
                i += 1;
            }
            Piece::Word
        } else {
            i += 1;
            Piece::Char(c)
        };
        out.push((piece, start, i));
    }
    Some(out)
}

/// `--` starts a comment when followed by a space, a control character
/// or the end of the text (MySQL's rule).
fn dash_comment(b: &[u8], i: usize) -> bool {
    b.get(i + 2).is_none_or(|&c| c <= b' ')
}

fn is_word_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c == b'@' || c == b'.' || c >= 0x80
}

/// One past the closing quote of the quoted text opening at `i`
/// (a doubled quote stays inside; a backslash escapes in strings).
fn quoted_end(b: &[u8], i: usize) -> Option<usize> {
    let q = b[i];
    let mut j = i + 1;
    while j < b.len() {
        if b[j] == b'\\' && q != b'`' {
            j += 2;
            continue;
        }
        if b[j] == q {
            if b.get(j + 1) == Some(&q) {
                j += 2;
                continue;
            }
            return Some(j + 1);
        }
        j += 1;
    }
    None
}

/// The texts of the items of `sql`'s (first) select list, or of its
/// RETURNING list, each from its first token to its last; `None` if `sql`
/// is not a single SELECT (possibly under WITH or in parentheses) or a
/// write with RETURNING.
fn select_item_texts(sql: &str) -> Option<Vec<String>> {
    let spans = select_item_spans(sql, false)?;
    Some(
        spans
            .into_iter()
            .map(|(s, e)| sql[s..e].to_string())
            .collect(),
    )
}

/// The byte ranges of [`select_item_texts`]; with `anywhere`, of the
/// first SELECT outside parentheses after any words (the query of a
/// CREATE VIEW or CREATE TABLE ... SELECT).
fn select_item_spans(sql: &str, anywhere: bool) -> Option<Vec<(usize, usize)>> {
    let ps = pieces(sql)?;
    let solid: Vec<usize> = (0..ps.len())
        .filter(|&k| !matches!(ps[k].0, Piece::Space | Piece::Comment))
        .collect();
    let word = |k: usize| match &ps[k] {
        (Piece::Word, s, e) => Some(sql[*s..*e].to_ascii_uppercase()),
        _ => None,
    };
    // A second statement after a `;` is not ours to name.
    let last_statement_piece = solid.iter().rposition(|&k| ps[k].0 != Piece::Char(b';'))?;
    if solid[..last_statement_piece]
        .iter()
        .any(|&k| ps[k].0 == Piece::Char(b';'))
    {
        return None;
    }
    let (select_at, base) = match find_returning(&ps, &solid, word) {
        Some(at) if !anywhere => (at, 0),
        _ => find_select(&ps, &solid, word, anywhere)?,
    };
    let mut k = select_at + 1;
    while k < ps.len()
        && (matches!(ps[k].0, Piece::Space | Piece::Comment)
            || word(k).is_some_and(|w| w == "STRAIGHT_JOIN" || SELECT_MODIFIERS.contains(&&*w)))
    {
        k += 1;
    }
    // Each item from its first token to its last, as written in between
    // (comments inside kept, as MariaDB keeps them).
    let mut items = Vec::new();
    let mut span: Option<(usize, usize)> = None;
    let mut depth = base;
    for (piece, s, e) in &ps[k..] {
        let at_base = depth == base;
        match piece {
            Piece::Char(b',') if at_base => {
                items.push(span.take()?);
                continue;
            }
            Piece::Char(b';' | b')') if at_base => break,
            Piece::Word if at_base && LIST_END.contains(&&*sql[*s..*e].to_ascii_uppercase()) => {
                break
            }
            Piece::Char(b'(') => depth += 1,
            Piece::Char(b')') => depth -= 1,
            _ => {}
        }
        if !matches!(piece, Piece::Space | Piece::Comment) {
            span = Some((span.map_or(*s, |(start, _)| start), *e));
        }
    }
    items.push(span?);
    Some(items)
}

/// The piece of the RETURNING keyword of an INSERT, REPLACE or DELETE
/// (outside parentheses), whose list names its result columns as a select
/// list does.
fn find_returning(
    ps: &[(Piece, usize, usize)],
    solid: &[usize],
    word: impl Fn(usize) -> Option<String>,
) -> Option<usize> {
    let first = word(*solid.first()?)?;
    if !matches!(first.as_str(), "INSERT" | "REPLACE" | "DELETE") {
        return None;
    }
    let mut depth = 0usize;
    let mut returning = None;
    for &k in solid {
        match (&ps[k].0, word(k).as_deref()) {
            (_, Some("RETURNING")) if depth == 0 => returning = Some(k),
            (Piece::Char(b'('), _) => depth += 1,
            (Piece::Char(b')'), _) => depth = depth.checked_sub(1)?,
            _ => {}
        }
    }
    returning
}

/// The piece of the main SELECT keyword and the parenthesis depth of its
/// list: the statement starts with it, after `(`s, or is a WITH clause
/// whose queries are all in parentheses (so the first SELECT outside
/// them is the main one).
fn find_select(
    ps: &[(Piece, usize, usize)],
    solid: &[usize],
    word: impl Fn(usize) -> Option<String>,
    anywhere: bool,
) -> Option<(usize, usize)> {
    let with = anywhere || word(*solid.first()?).as_deref() == Some("WITH");
    let mut depth = 0usize;
    for &k in solid {
        match (&ps[k].0, word(k).as_deref()) {
            (_, Some("SELECT")) if !with || depth == 0 => return Some((k, depth)),
            (Piece::Char(b'('), _) => depth += 1,
            (Piece::Char(b')'), _) => depth = depth.checked_sub(1)?,
            _ if !with => return None,
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(sql: &str) -> Vec<String> {
        select_item_texts(sql).unwrap_or_default()
    }

    #[test]
    fn returning_items_are_read_as_written() {
        assert_eq!(
            texts("INSERT INTO t (a) VALUES (1) RETURNING id, A+1, concat( b,'x' )"),
            ["id", "A+1", "concat( b,'x' )"]
        );
        assert_eq!(
            texts("DELETE FROM t WHERE (a) > 1 RETURNING a  *  2;"),
            ["a  *  2"]
        );
        assert_eq!(
            texts("REPLACE INTO t SELECT x, y FROM u RETURNING y+1"),
            ["y+1"]
        );
        assert!(texts("INSERT INTO t VALUES (1)").is_empty());
        assert!(texts("UPDATE t SET a = 1").is_empty());
    }

    #[test]
    fn items_are_split_at_top_level_commas() {
        assert_eq!(
            texts("SELECT round(a,1)+0, CONCAT( 'a' , 'b' ) FROM t"),
            ["round(a,1)+0", "CONCAT( 'a' , 'b' )"]
        );
        assert_eq!(texts("select a  +  1 from t"), ["a  +  1"]);
        assert_eq!(
            texts("SELECT DISTINCT SQL_NO_CACHE x, 'a,b' , `c,d`"),
            ["x", "'a,b'", "`c,d`"]
        );
        assert_eq!(
            texts("SELECT /* a */ a /* c */ + 1 /* d */, 2 -- x\n"),
            ["a /* c */ + 1", "2"]
        );
        assert_eq!(texts("(SELECT a+1 FROM t) UNION (SELECT 2)"), ["a+1"]);
        assert_eq!(
            texts("WITH c AS (SELECT 1 AS x) SELECT x+1 FROM c"),
            ["x+1"]
        );
        assert_eq!(
            texts("SELECT EXTRACT(YEAR FROM d), 1;"),
            ["EXTRACT(YEAR FROM d)", "1"]
        );
        assert_eq!(texts("SELECT 1 INTO @x"), ["1"]);
        // Not one SELECT.
        assert!(select_item_texts("SELECT 1; SELECT 2").is_none());
        assert!(select_item_texts("SHOW TABLES").is_none());
        assert!(select_item_texts("SELECT 'open").is_none());
        assert!(select_item_texts("SELECT /*!50000 1 */").is_none());
    }

    #[test]
    fn views_and_tables_from_a_select_get_the_names_as_aliases() {
        assert_eq!(
            with_item_aliases("CREATE VIEW v (x) AS SELECT a+1, b, c AS d, 'q' FROM t").as_deref(),
            Some("CREATE VIEW v (x) AS SELECT a+1 AS `a+1`, b, c AS d, 'q' AS `q` FROM t")
        );
        assert_eq!(
            with_item_aliases("CREATE TABLE t2 AS SELECT `x`*2 FROM t").as_deref(),
            Some("CREATE TABLE t2 AS SELECT `x`*2 AS ```x``*2` FROM t")
        );
        assert_eq!(
            with_item_aliases("CREATE VIEW v AS SELECT a, b FROM t"),
            None
        );
        assert_eq!(with_item_aliases("CREATE TABLE t (a INT)"), None);
    }

    #[test]
    fn names_follow_mysql() {
        let names = |sql: &str| select_item_names(sql).map(|n| (n.leading, n.trailing));
        let some = |v: &[&str]| v.iter().map(|s| Some(s.to_string())).collect::<Vec<_>>();
        assert_eq!(
            names("SELECT round(a,1)+0, 1+1, 'a', NULL, -1, true, (a), t.b, (a+1) FROM t"),
            Some((
                [
                    some(&["round(a,1)+0", "1+1", "a", "NULL", "-1", "TRUE", "a"]),
                    vec![None],
                    some(&["(a+1)"])
                ]
                .concat(),
                None
            ))
        );
        assert_eq!(
            names("SELECT a+1 AS x, a+1 y, *, b  *2 FROM t"),
            Some((vec![None, None], Some(some(&["b  *2"]))))
        );
        let long = vec!["a"; 200].join("+");
        let n = select_item_names(&format!("SELECT {long} FROM t")).unwrap();
        assert_eq!(n.leading[0].as_deref().map(str::len), Some(MAX_NAME_CHARS));
    }
}
