//! A planned relation ([`Rel`]: a plan node and its columns' metadata) and
//! a planned correlated subquery body ([`Correlated`]), the scope their
//! columns are named by, and small helpers for the plans built over them.

use ladle_common::{Collation, SqlType, TableSchema};
use sqlparser::ast;

use super::expr::{volatile, Scope, ScopeCol};
use crate::expr::Expr;
use crate::plan::LNode;
use crate::BaseColumn;
use crate::Result;

/// Column metadata of a planned relation.
#[derive(Clone, Debug)]
pub(super) struct ColInfo {
    pub(super) name: String,
    pub(super) table: String,
    pub(super) origin: Option<BaseColumn>,
    /// Held as a table's column holds it (see `OutputColumn::stored`).
    pub(super) stored: bool,
    pub(super) ty: SqlType,
    pub(super) nullable: bool,
    pub(super) coll: Collation,
}

/// A planned relation (derived table, view, subquery).
#[derive(Clone)]
pub(super) struct Rel {
    pub(super) node: LNode,
    pub(super) cols: Vec<ColInfo>,
}

/// A correlated subquery's body as planned once, whatever construct asks
/// (the refusals that name the construct are left to the asker).
#[derive(Clone)]
pub(super) enum PlannedBody {
    /// The body, and its `inner = ?` conditions as (inner column,
    /// parameter slot) when they were asked for.
    Planned(Box<Correlated>, Vec<(usize, usize)>),
    /// A condition with a parameter the body cannot key on.
    Parameters,
    /// A condition reading the outer query other than `inner = outer`
    /// that the body cannot take as a residual.
    NonEquality,
}

/// A planned correlated subquery body (see `Planner::plan_correlated`).
#[derive(Clone)]
pub(super) struct Correlated {
    pub(super) inner: LNode,
    pub(super) scope: Scope,
    pub(super) inner_cols: Vec<usize>,
    pub(super) outer_cols: Vec<usize>,
    /// Conditions reading outer columns other than `inner = outer`
    /// (`b.price > p.id * 10`), for `Planner::decorrelate`.
    pub(super) residual: Vec<ast::Expr>,
    /// Positions in the key (`inner_cols`, `outer_cols`) where an outer
    /// NULL must meet the inner rows of NULL (D's NULL row, see
    /// `Planner::decorrelate`) instead of none.
    pub(super) null_safe: Vec<usize>,
}

/// The collation a column of type `ty` declared with `collation`
/// compares by: its own for text, bytes for everything else.
pub(super) fn column_collation(ty: &SqlType, collation: Collation) -> Collation {
    if ty.is_text() {
        collation
    } else {
        Collation::Binary
    }
}

pub(super) fn base_colls(t: &TableSchema) -> Vec<Collation> {
    t.columns
        .iter()
        .map(|c| column_collation(&c.ty, c.collation))
        .collect()
}

/// The AND of `parts` (`None` for none).
pub(super) fn conjunction(parts: Vec<Expr>) -> Option<Expr> {
    parts
        .into_iter()
        .reduce(|a, b| Expr::Logic(crate::expr::LogicOp::And, Box::new(a), Box::new(b)))
}

/// Rejects clock/random expressions where their value would be frozen
/// into maintained state.
pub(super) fn stable(e: Expr) -> Result<Expr> {
    if e.is_volatile() {
        Err(volatile("NOW()/RAND() inside a maintained view"))
    } else {
        Ok(e)
    }
}

/// [`stable`] for an expression a projection computes into maintained
/// state: a scalar subquery's row-count check may be there (a value from
/// several rows is stored as a marker that fails the read with 1242).
pub(super) fn stored(e: Expr) -> Result<Expr> {
    if e.is_volatile_besides_single_row() {
        Err(volatile("NOW()/RAND() inside a maintained view"))
    } else {
        Ok(e)
    }
}

pub(super) fn t_is_text(t: &SqlType) -> bool {
    t.is_text()
}

pub(super) fn rel_scope(rel: Rel, qualifier: &str) -> (LNode, Scope) {
    let scope = Scope {
        cols: rel
            .cols
            .iter()
            .map(|c| ScopeCol {
                qualifier: qualifier.to_ascii_lowercase(),
                name: c.name.clone(),
                ty: c.ty.clone(),
                nullable: c.nullable,
                collation: c.coll,
                table: c.table.clone(),
                origin: c.origin.clone(),
                stored: c.stored,
                shown: None,
            })
            .collect(),
        coalesced: Vec::new(),
    };
    (rel.node, scope)
}
