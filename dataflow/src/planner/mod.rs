//! The only module that reads the SQL AST: turns queries into logical plans
//! and expressions into [`crate::expr::Expr`].

pub(crate) mod expr;

use std::sync::Arc;

use ladle_common::TableSchema;
use sqlparser::ast;

use crate::{BaseColumn, Result};
use expr::{ExprCx, Scope, ScopeCol};

/// The scope of one base table's row; each column knows it is that
/// table's (result metadata reports its keys).
pub(crate) fn table_scope(t: &Arc<TableSchema>, qualifier: &str) -> Scope {
    let mut scope = row_scope(t, qualifier);
    for (column, c) in scope.cols.iter_mut().enumerate() {
        c.origin = Some(BaseColumn {
            table: Arc::clone(t),
            column,
        });
    }
    scope
}

/// The scope of a row of `t`, without result-metadata provenance.
fn row_scope(t: &TableSchema, qualifier: &str) -> Scope {
    Scope {
        cols: t
            .columns
            .iter()
            .map(|c| ScopeCol {
                qualifier: qualifier.to_ascii_lowercase(),
                name: c.name.clone(),
                ty: c.ty.clone(),
                nullable: c.nullable,
                collation: c.collation,
                table: t.name.clone(),
                origin: None,
                stored: false,
                shown: None,
            })
            .collect(),
        coalesced: Vec::new(),
    }
}

pub(crate) fn compile_row_expr(
    e: &ast::Expr,
    table: Option<&TableSchema>,
) -> Result<crate::expr::Expr> {
    let scope = match table {
        Some(t) => row_scope(t, &t.name),
        None => Scope::default(),
    };
    let mut cx = ExprCx::row(&scope);
    cx.proposed = true;
    cx.compile(e)
}

pub mod depth;
pub(crate) mod normalize;
pub(crate) mod pushdown;
pub(crate) mod stats;

// The planner by clause: `query` is the entry point, `select` the list of
// the phases of one SELECT (handing each other the values in
// `select_state`), the others the clauses and subqueries those phases plan.
mod aggregate;
mod clause;
mod correlated;
mod cte;
mod from;
mod grouped_window;
mod layout;
mod memo;
mod named_window;
mod query;
mod relation;
mod scalar_subquery;
mod scalar_union;
mod select;
mod select_names;
mod select_state;
mod selection;
mod set_expr;
mod subquery;
mod syntax;
mod window;
mod window_fn;
pub(crate) mod zero_date;

pub(crate) use memo::PlanMemo;
pub(crate) use query::Planner;

/// Parses a stored view definition.
pub(crate) fn parse_query(sql: &str) -> Result<ast::Query> {
    let stmts = depth::parse_sql(sql)
        .map_err(|e| crate::DataflowError::Internal(format!("stored view does not parse: {e}")))?;
    match stmts.into_iter().next() {
        Some(ast::Statement::Query(mut q)) => {
            // Accepted once, so within bounds; rebalanced again (the text
            // re-parses left-deep).
            depth::bound_depth(&mut q).map_err(|_| {
                crate::DataflowError::Internal("stored view is nested too deeply".into())
            })?;
            Ok(*q)
        }
        _ => Err(crate::DataflowError::Internal(
            "stored view is not a query".into(),
        )),
    }
}
