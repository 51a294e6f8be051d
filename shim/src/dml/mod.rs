//! INSERT / REPLACE / UPDATE / DELETE / TRUNCATE -> storage `WriteOp`s, one
//! module per statement (multi-table UPDATE in its own, over UPDATE's
//! write path) over the shared write helpers ([`write`]), and the
//! transaction overlay ([`overlay`]) reads and foreign-key checks see a
//! transaction's writes through.
//!
//! UPDATE and DELETE read rows through `ScanSpec::Prefix` when the WHERE
//! clause has `column = literal` conjuncts covering a prefix of the primary
//! key or of a secondary index (text columns only under a binary collation,
//! since a case-insensitive match may not share the key's bytes), and
//! through `ScanSpec::Full` otherwise; the full WHERE is always re-checked
//! on each row.

mod by_keywords;
mod correlated;
mod delete;
mod insert;
mod insert_ids;
mod insert_returning;
mod join_view;
mod multi_update;
pub(crate) mod overlay;
mod through_view;
mod transaction_insert;
mod transaction_keys;
mod update;
mod upsert;
mod view_check;
pub(crate) mod write;

pub use delete::{delete, delete_ignore, split_returning, truncate};
pub use insert::{insert, rewrite_insert_set};
pub use multi_update::{is_multi_table_update, multi_update, parse_multi_update, MultiUpdate};
pub(crate) use overlay::candidate_rows;
pub(crate) use through_view::is_updatable;
pub use update::{
    split_update_order_limit, strip_delete_modifiers, strip_update_modifiers, UpdateClauses,
};

/// UPDATE of one table, or of one view: a view over a join as the
/// multi-table UPDATE it stands for ([`join_view`]), any other through
/// [`update::update`].
pub fn update(
    e: &crate::exec::Engine,
    s: &mut crate::session::Session,
    target: sqlparser::ast::TableWithJoins,
    assignments: Vec<sqlparser::ast::Assignment>,
    selection: Option<sqlparser::ast::Expr>,
    clauses: UpdateClauses<'_>,
) -> crate::error::Result<crate::output::Output> {
    let statement = (assignments.as_slice(), &selection);
    if let Some(out) = join_view::update_join_view(e, s, &target, statement, &clauses)? {
        return Ok(out);
    }
    update::update(e, s, target, assignments, selection, clauses)
}
