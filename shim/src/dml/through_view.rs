//! Writes through a view: UPDATE, DELETE, INSERT and a multi-table
//! UPDATE's targets naming a view write its base table, as MySQL merges
//! an updatable view into the statement. The statement is rewritten over
//! the base table: the view's columns become the expressions they stand
//! for and the view's WHERE is added to the statement's (so rows the view
//! does not show are left alone; WITH CHECK OPTION is not enforced).
//!
//! Updatable here is MySQL's mergeable single-table view: one SELECT from
//! one table, without aggregates, DISTINCT, GROUP BY, HAVING, LIMIT,
//! window functions or subqueries in its select list. Any other view is
//! MariaDB's 1288 for UPDATE and DELETE and 1471 for INSERT, which also
//! needs every column to be a plain column. A view over a join or over
//! another view is a known gap (1235).

use std::ops::ControlFlow;

use sqlparser::ast::{
    self, Assignment, AssignmentTarget, Expr, Ident, ObjectName, SelectItem, SetExpr, TableFactor,
};

use crate::error::{Result, ShimError};
use crate::exec::Engine;
use crate::session::Session;

/// An updatable view over one base table.
pub(super) struct ViewOfTable {
    /// The view's name (messages).
    name: String,
    /// The base table, qualified by its database.
    pub(super) base: ObjectName,
    /// Each view column: its name and the expression over the base
    /// table's columns (unqualified) it stands for.
    columns: Vec<(String, Expr)>,
    /// The view's WHERE, over the base table's columns (unqualified).
    selection: Option<Expr>,
}

/// The updatable view `name` names, None if it names no view; a view
/// that is not updatable is 1288 (`statement`: "UPDATE", "DELETE") or
/// 1471 ("INSERT").
pub(super) fn view_of_table(
    e: &Engine,
    s: &Session,
    name: &ObjectName,
    statement: &'static str,
) -> Result<Option<ViewOfTable>> {
    let (db, view) = e.resolve(s, name)?;
    if e.storage.table(&db, &view).is_some() {
        return Ok(None);
    }
    let Some(definition) = crate::exec::view_definition(&e.storage, &db, &view) else {
        return Ok(None);
    };
    let not_updatable = || match statement {
        "INSERT" => ShimError::ViewNotInsertable(view.clone()),
        _ => ShimError::ViewNotUpdatable {
            view: view.clone(),
            statement,
        },
    };
    let query = match crate::sqltext::parse(&definition)?.into_iter().next() {
        Some(ast::Statement::Query(q)) => q,
        _ => return Err(ShimError::Internal("a view that is no query".into())),
    };
    let select = match query.body.as_ref() {
        SetExpr::Select(sel)
            if query.limit.is_none()
                && query.offset.is_none()
                && query.with.is_none()
                && sel.distinct.is_none()
                && sel.having.is_none()
                && matches!(&sel.group_by, ast::GroupByExpr::Expressions(g, _) if g.is_empty()) =>
        {
            sel
        }
        _ => return Err(not_updatable()),
    };
    let base = match select.from.as_slice() {
        [t] if t.joins.is_empty() => match &t.relation {
            TableFactor::Table { name, .. } => name.clone(),
            _ => return Err(not_updatable()),
        },
        [] => return Err(not_updatable()),
        _ => {
            return Err(ShimError::Unsupported(
                "a write through a view over a join".into(),
            ))
        }
    };
    let (base_db, base_name) = match base.0.as_slice() {
        [t] => (db.clone(), t.value.clone()),
        _ => e.resolve(s, &base)?,
    };
    let Some(schema) = e.storage.table(&base_db, &base_name) else {
        return Err(ShimError::Unsupported(
            "a write through a view over a view".into(),
        ));
    };
    let mut columns = Vec::new();
    for item in &select.projection {
        match item {
            SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..) => {
                for c in schema.columns.iter().filter(|c| !c.is_hidden()) {
                    columns.push((c.name.clone(), Expr::Identifier(Ident::new(&c.name))));
                }
            }
            SelectItem::UnnamedExpr(x) | SelectItem::ExprWithAlias { expr: x, .. } => {
                if !is_row_expression(x) {
                    return Err(not_updatable());
                }
                let name = match item {
                    SelectItem::ExprWithAlias { alias, .. } => alias.value.clone(),
                    _ => ladle_dataflow::expr_column_name(&unqualified(x)),
                };
                columns.push((name, unqualified(x)));
            }
        }
    }
    Ok(Some(ViewOfTable {
        name: view,
        base: ObjectName(vec![Ident::new(base_db), Ident::new(base_name)]),
        columns,
        selection: select.selection.as_ref().map(unqualified),
    }))
}

/// An INSERT into a view as an INSERT into its base table.
pub(super) fn insert_into_base(e: &Engine, s: &Session, ins: &mut ast::Insert) -> Result<()> {
    let Some(view) = view_of_table(e, s, &ins.table_name, "INSERT")? else {
        return Ok(());
    };
    if ins.on.is_some() {
        return Err(ShimError::Unsupported(
            "ON DUPLICATE KEY UPDATE through a view".into(),
        ));
    }
    ins.columns = view.insert_columns(&ins.columns)?;
    ins.table_name = view.base;
    Ok(())
}

/// Whether `x` is computed from one row: no aggregate, window function
/// or subquery.
fn is_row_expression(x: &Expr) -> bool {
    let found = ast::visit_expressions(x, |e| match e {
        Expr::Function(f) if f.over.is_some() || crate::sqltext::is_aggregate_function(&f.name) => {
            ControlFlow::Break(())
        }
        Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. } => ControlFlow::Break(()),
        _ => ControlFlow::Continue(()),
    });
    found.is_continue()
}

/// `x` with its column references unqualified (a one-table view's).
fn unqualified(x: &Expr) -> Expr {
    let mut x = x.clone();
    let _ = ast::visit_expressions_mut(&mut x, |e| {
        if let Expr::CompoundIdentifier(parts) = e {
            if let Some(last) = parts.last() {
                *e = Expr::Identifier(last.clone());
            }
        }
        ControlFlow::<()>::Continue(())
    });
    x
}

/// `x` with each column reference qualified by `qualifier`.
fn qualified(x: &Expr, qualifier: &[Ident]) -> Expr {
    let mut x = x.clone();
    let _ = ast::visit_expressions_mut(&mut x, |e| {
        if let Expr::Identifier(i) = e {
            let mut parts = qualifier.to_vec();
            parts.push(i.clone());
            *e = Expr::CompoundIdentifier(parts);
        }
        ControlFlow::<()>::Continue(())
    });
    x
}

impl ViewOfTable {
    fn column(&self, name: &str) -> Option<&Expr> {
        self.columns
            .iter()
            .find(|(c, _)| c.eq_ignore_ascii_case(name))
            .map(|(_, x)| x)
    }

    /// The base column view column `name` is, for a write to it: 1054 if
    /// the view has no such column, 1348 if it is computed.
    fn base_column(&self, name: &str, place: &str) -> Result<Ident> {
        match self.column(name) {
            Some(Expr::Identifier(i)) => Ok(i.clone()),
            Some(_) => Err(ShimError::ColumnNotUpdatable(name.into())),
            None => Err(ShimError::UnknownColumn(name.into(), place.into())),
        }
    }

    /// `x` over the base table: each reference to a view column (`c`, or
    /// `v.c` where `names_view` says `v` names the view) as the expression
    /// it stands for, qualified by `qualifier` if given.
    fn to_base(
        &self,
        x: &mut Expr,
        names_view: &dyn Fn(&[Ident]) -> bool,
        qualifier: Option<&[Ident]>,
    ) {
        let _ = ast::visit_expressions_mut(x, |e| {
            let column = match e {
                // Unqualified, only where the view is the one table.
                Expr::Identifier(i) if qualifier.is_none() => self.column(&i.value),
                Expr::CompoundIdentifier(parts) => match parts.split_last() {
                    Some((c, q)) if names_view(q) => self.column(&c.value),
                    _ => None,
                },
                _ => None,
            };
            if let Some(column) = column {
                let base = match qualifier {
                    Some(q) => qualified(column, q),
                    None => column.clone(),
                };
                *e = match base {
                    simple @ (Expr::Identifier(_) | Expr::CompoundIdentifier(_)) => simple,
                    other => Expr::Nested(Box::new(other)),
                };
            }
            ControlFlow::<()>::Continue(())
        });
    }

    /// `selection` (over the view) and the view's WHERE, over the base.
    fn both(&self, selection: Option<Expr>, qualifier: Option<&[Ident]>) -> Option<Expr> {
        let own = self.selection.as_ref().map(|w| match qualifier {
            Some(q) => qualified(w, q),
            None => w.clone(),
        });
        match (selection, own) {
            (Some(a), Some(b)) => Some(Expr::BinaryOp {
                left: Box::new(Expr::Nested(Box::new(a))),
                op: ast::BinaryOperator::And,
                right: Box::new(Expr::Nested(Box::new(b))),
            }),
            (a, b) => a.or(b),
        }
    }

    /// A single-table UPDATE's SET and WHERE over the view, rewritten over
    /// the base table (`view`: how the statement names the view, its
    /// alias or its name).
    pub(super) fn update(
        &self,
        view: &ObjectName,
        assignments: &mut [Assignment],
        selection: Option<Expr>,
    ) -> Result<Option<Expr>> {
        let names_view = |q: &[Ident]| names(view, q);
        for a in assignments.iter_mut() {
            if let AssignmentTarget::ColumnName(n) = &mut a.target {
                let name = crate::sqltext::last_part(n);
                *n = ObjectName(vec![self.base_column(&name, "SET")?]);
            }
            self.to_base(&mut a.value, &names_view, None);
        }
        self.where_over_base(view, selection)
    }

    /// A DELETE's or UPDATE's WHERE over the view, over the base table.
    pub(super) fn where_over_base(
        &self,
        view: &ObjectName,
        mut selection: Option<Expr>,
    ) -> Result<Option<Expr>> {
        if let Some(w) = &mut selection {
            self.to_base(w, &|q| names(view, q), None);
        }
        Ok(self.both(selection, None))
    }

    /// The base column view column `name` is, for an INSERT: a computed
    /// one makes the view not insertable-into (1471).
    fn insert_column(&self, name: &str) -> Result<Ident> {
        match self.column(name) {
            Some(Expr::Identifier(i)) => Ok(i.clone()),
            Some(_) => Err(ShimError::ViewNotInsertable(self.name.clone())),
            None => Err(ShimError::UnknownColumn(name.into(), "field list".into())),
        }
    }

    /// An INSERT's column list over the view (every view column if
    /// none), over the base table.
    pub(super) fn insert_columns(&self, columns: &[Ident]) -> Result<Vec<Ident>> {
        match columns.is_empty() {
            true => self
                .columns
                .iter()
                .map(|(c, _)| self.insert_column(c))
                .collect(),
            false => columns
                .iter()
                .map(|c| self.insert_column(&c.value))
                .collect(),
        }
    }
}

/// Whether `qualifier` (as a column reference writes it) names the table
/// or view written `name`.
fn names(name: &ObjectName, qualifier: &[Ident]) -> bool {
    let same = super::write::same_name;
    same(&name.0, qualifier) || (name.0.len() == 2 && same(&name.0[1..], qualifier))
}

/// A multi-table UPDATE whose SET assigns to views: each such view
/// becomes its base table under the view's name (its alias, else its
/// name), the statement's references to the view's columns the
/// expressions they stand for, and the view's WHERE part of the
/// statement's. A view only read stays as it is.
pub(super) fn merge_target_views(
    e: &Engine,
    s: &Session,
    (tables, assignments, selection): (
        &mut [ast::TableWithJoins],
        &mut [Assignment],
        &mut Option<Expr>,
    ),
) -> Result<()> {
    let assigned: Vec<Vec<Ident>> = assignments
        .iter()
        .filter_map(|a| match &a.target {
            AssignmentTarget::ColumnName(n) if n.0.len() > 1 => Some(n.0[..n.0.len() - 1].to_vec()),
            _ => None,
        })
        .collect();
    let mut merged: Vec<(Vec<Ident>, ViewOfTable)> = Vec::new();
    let mut failed = None;
    for t in tables.iter_mut() {
        let mut factors: Vec<&mut TableFactor> = vec![&mut t.relation];
        factors.extend(t.joins.iter_mut().map(|j| &mut j.relation));
        for f in factors {
            let TableFactor::Table { name, alias, .. } = f else {
                continue;
            };
            let qualifier = match alias {
                Some(a) => vec![a.name.clone()],
                None => vec![name.0.last().cloned().unwrap_or_else(|| Ident::new(""))],
            };
            let is_target = assigned.iter().any(|q| match alias {
                Some(_) => names(&ObjectName(qualifier.clone()), q),
                None => names(name, q),
            });
            if !is_target {
                continue;
            }
            match view_of_table(e, s, name, "UPDATE") {
                Ok(Some(view)) => {
                    *name = view.base.clone();
                    *alias = Some(ast::TableAlias {
                        name: qualifier[0].clone(),
                        columns: Vec::new(),
                    });
                    merged.push((qualifier, view));
                }
                Ok(None) => {}
                // Named as the statement names it.
                Err(ShimError::ViewNotUpdatable { statement, .. }) => {
                    failed = Some(ShimError::ViewNotUpdatable {
                        view: qualifier[0].value.clone(),
                        statement,
                    })
                }
                Err(err) => failed = Some(err),
            }
        }
    }
    if let Some(err) = failed {
        return Err(err);
    }
    for (qualifier, view) in &merged {
        let as_written = ObjectName(qualifier.clone());
        let names_view = |q: &[Ident]| names(&as_written, q);
        for a in assignments.iter_mut() {
            if let AssignmentTarget::ColumnName(n) = &mut a.target {
                if let Some((c, q)) = n.0.split_last() {
                    if names_view(q) {
                        let base = view.base_column(&c.value, "SET")?;
                        *n = ObjectName(vec![qualifier[0].clone(), base]);
                    }
                }
            }
            view.to_base(&mut a.value, &names_view, Some(qualifier));
        }
        for t in tables.iter_mut() {
            for join in &mut t.joins {
                if let Some(on) = on_condition(&mut join.join_operator) {
                    view.to_base(on, &names_view, Some(qualifier));
                }
            }
        }
        let mut own = selection.take();
        if let Some(w) = &mut own {
            view.to_base(w, &names_view, Some(qualifier));
        }
        *selection = view.both(own, Some(qualifier));
    }
    Ok(())
}

/// A join's ON condition.
fn on_condition(op: &mut ast::JoinOperator) -> Option<&mut Expr> {
    use ast::JoinOperator as J;
    match op {
        J::Inner(c)
        | J::LeftOuter(c)
        | J::RightOuter(c)
        | J::FullOuter(c)
        | J::LeftSemi(c)
        | J::RightSemi(c)
        | J::LeftAnti(c)
        | J::RightAnti(c) => match c {
            ast::JoinConstraint::On(x) => Some(x),
            _ => None,
        },
        _ => None,
    }
}
