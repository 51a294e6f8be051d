//! UPDATE through a view over a join, as MySQL merges it: the
//! multi-table UPDATE over the view's FROM, which may change the columns
//! of one of its tables only (1393). (Such a view's INSERT and DELETE are
//! in [`super::through_view`].)

use sqlparser::ast::{Assignment, AssignmentTarget, Expr, Ident, ObjectName};

use super::through_view::{names, ViewOfTable};
use super::UpdateClauses;
use crate::error::{Result, ShimError};
use crate::exec::Engine;
use crate::output::Output;
use crate::session::Session;

/// An UPDATE of one table: if `target` names a view over a join, the
/// statement run as the multi-table UPDATE it stands for; else `None`.
pub(super) fn update_join_view(
    e: &Engine,
    s: &mut Session,
    target: &sqlparser::ast::TableWithJoins,
    statement: (&[sqlparser::ast::Assignment], &Option<Expr>),
    clauses: &UpdateClauses<'_>,
) -> Result<Option<Output>> {
    let sqlparser::ast::TableFactor::Table { name, alias, .. } = &target.relation else {
        return Ok(None);
    };
    if !target.joins.is_empty() {
        return Ok(None);
    }
    let Some(view) = super::through_view::view_of_table(e, s, name, "UPDATE")? else {
        return Ok(None);
    };
    if view.join.is_none() {
        return Ok(None);
    }
    super::through_view::refuse_join_check(&view)?;
    if !clauses.order_by.is_empty() || clauses.limit.is_some() {
        let clause = if clauses.order_by.is_empty() {
            "LIMIT"
        } else {
            "ORDER BY"
        };
        return Err(ShimError::WrongUsage("UPDATE", clause));
    }
    let written = match alias {
        Some(a) => ObjectName(vec![a.name.clone()]),
        None => name.clone(),
    };
    let (assignments, selection) = (statement.0.to_vec(), statement.1.clone());
    update(
        e,
        s,
        view,
        &written,
        (assignments, selection),
        clauses.ignore,
    )
    .map(Some)
}

/// A single-table UPDATE of join view `view` (written `written` in the
/// statement) as the multi-table UPDATE of the view's FROM it stands for.
pub(super) fn update(
    e: &Engine,
    s: &mut Session,
    view: ViewOfTable,
    written: &ObjectName,
    (mut assignments, selection): (Vec<Assignment>, Option<Expr>),
    ignore: bool,
) -> Result<Output> {
    let names_view = |q: &[Ident]| names(written, q);
    let mut targets = Vec::new();
    for a in &mut assignments {
        if let AssignmentTarget::ColumnName(n) = &mut a.target {
            let column = view.joined_column(&crate::sqltext::last_part(n), "field list", false)?;
            *n = ObjectName(column.clone());
            targets.push(column);
        }
        view.to_base(&mut a.value, &names_view, None);
    }
    view.one_table(&targets)?;
    let selection = view.where_over_base(written, selection)?;
    let Some(tables) = view.join else {
        return Err(ShimError::Internal("a join view without a join".into()));
    };
    let update = super::MultiUpdate {
        tables,
        assignments,
        selection,
    };
    super::multi_update(e, s, update, ignore)
}
