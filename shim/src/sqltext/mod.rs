//! SQL text to tokens and statements with MySQL's string-literal rules.
//!
//! sqlparser's unescaping turns `'\_'` into `_`, but MySQL keeps the
//! backslash of `\%` and `\_` in a string literal so that `LIKE 'al\_%'`
//! matches a literal underscore. So the shim tokenizes without sqlparser's
//! unescaping and unescapes string literals itself ([`unescape_literal`]),
//! exactly as MySQL does, then hands the tokens to the parser.
//!
//! By concern: [`tokenize`] (text to tokens), [`dialect`] (what the parser
//! reads beyond sqlparser's MySQL dialect), [`parse`] (statements and
//! expressions), [`split`] (a multi-statement text, executable comments),
//! [`literal`] (string literals), [`bytes`] (text from a client's bytes)
//! and [`item_names`] (the names of result columns without an alias).

mod bytes;
mod dialect;
mod index_hints;
mod item_names;
mod literal;
mod parse;
mod split;
mod straight_join;
mod token_walk;
mod tokenize;
mod with_rollup;

pub use bytes::from_bytes;
pub use index_hints::{index_hints, IndexHint};
pub use item_names::{select_item_names, with_item_aliases, ItemNames};
pub use literal::{display_safe, expr_text, unescape_literal};
pub(crate) use parse::parse_select_items;
pub use parse::{
    contain_parser_panic, is_aggregate_function, last_part, parse, parse_expr, parse_statements,
    parse_whole_expr, parser, MAX_SELECT_NESTING,
};
pub use split::{open_versioned_comments, split_statements, COMMENT_VERSION};
pub use tokenize::tokenize;

#[cfg(test)]
mod tests;
