//! Writes through a view: UPDATE, DELETE, INSERT (REPLACE, ON DUPLICATE
//! KEY UPDATE) and a multi-table UPDATE's targets naming a view write its
//! base table, as MySQL merges an updatable view into the statement. The
//! statement is rewritten over the base table: the view's columns become
//! the expressions they stand for and the view's WHERE is added to the
//! statement's (so rows the view does not show are left alone). A view
//! over another view is merged down to the base tables; one over a join
//! is written as [`super::join_view`] says. WITH CHECK OPTION is enforced
//! on the rows written (see [`super::view_check`]).
//!
//! Updatable here is MySQL's mergeable view: one SELECT from tables or
//! updatable views, without aggregates, DISTINCT, GROUP BY, HAVING,
//! LIMIT, window functions or subqueries in its select list. Any other
//! view is MariaDB's 1288 for UPDATE and DELETE and 1471 for INSERT,
//! which also needs every column to be a plain column.

use std::ops::ControlFlow;

use sqlparser::ast::{
    self, Assignment, AssignmentTarget, Expr, Ident, ObjectName, SelectItem, SetExpr, TableFactor,
};

use ladle_common::TableSchema;

use crate::error::{Result, ShimError};
use crate::exec::Engine;
use crate::session::Session;

/// An updatable view, merged down to base tables: over one table, or
/// over a join ([`ViewOfTable::join`]). A view over another view is
/// merged with it: its columns and WHERE become expressions over the
/// lower view's base tables.
pub(super) struct ViewOfTable {
    /// The view's name, `db.view` (messages).
    pub(super) name: String,
    /// The base table, qualified by its database (a join view's: unused).
    pub(super) base: ObjectName,
    /// A join view's FROM: each table qualified by its database and named
    /// by an alias, which qualifies every column reference in `columns`
    /// and `selection`. `None` for a view over one table, whose
    /// expressions are unqualified.
    pub(super) join: Option<Vec<ast::TableWithJoins>>,
    /// Each view column: its name and the expression over the base
    /// table's columns it stands for.
    pub(super) columns: Vec<(String, Expr)>,
    /// The view's WHERE (and the WHEREs of views under it), over the base.
    pub(super) selection: Option<Expr>,
    /// The conditions a row written through the view must meet (WITH
    /// CHECK OPTION, here or under it), over the base.
    pub(super) checks: Vec<Expr>,
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
    view_in(e, s, (&db, &view), statement, 0)
}

/// [`view_of_table`] for view `db.view`, `depth` views above it.
pub(super) fn view_in(
    e: &Engine,
    s: &Session,
    (db, view): (&str, &str),
    statement: &'static str,
    depth: usize,
) -> Result<Option<ViewOfTable>> {
    if e.storage.table(db, view).is_some() {
        return Ok(None);
    }
    let Some(definition) = crate::exec::view_definition(&e.storage, db, view) else {
        return Ok(None);
    };
    let not_updatable = || match statement {
        "INSERT" => ShimError::ViewNotInsertable(view.to_string()),
        _ => ShimError::ViewNotUpdatable {
            view: view.to_string(),
            statement,
        },
    };
    // Views name views only as deep as the catalog lets them be made.
    if depth > 64 {
        return Err(not_updatable());
    }
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
    if select
        .projection
        .iter()
        .any(|i| matches!(i, SelectItem::UnnamedExpr(x) | SelectItem::ExprWithAlias { expr: x, .. } if !is_row_expression(x)))
    {
        return Err(not_updatable());
    }
    let check = crate::view_check_option::check_option(&e.storage, db, view);
    let name = format!("{db}.{view}");
    let (merged, own) = match select.from.as_slice() {
        [t] if t.joins.is_empty() => match &t.relation {
            TableFactor::Table { name: base, .. } => {
                let (base_db, base_name) = match base.0.as_slice() {
                    [t] => (db.to_string(), t.value.clone()),
                    _ => e.resolve(s, base)?,
                };
                match e.storage.table(&base_db, &base_name) {
                    Some(schema) => over_table(name, &base_db, &schema, select),
                    None => {
                        let Some(lower) =
                            view_in(e, s, (&base_db, &base_name), statement, depth + 1)?
                        else {
                            return Err(ShimError::UnknownTable {
                                database: base_db,
                                table: base_name,
                            });
                        };
                        over_view(name, lower, select)
                    }
                }
            }
            _ => return Err(not_updatable()),
        },
        [] => return Err(not_updatable()),
        _ => over_join(e, s, (db, name), (select, statement), depth)?,
    };
    Ok(Some(merged.with_check(check, own)))
}

/// information_schema.VIEWS.IS_UPDATABLE of view `db.view`: whether an
/// UPDATE can write through it and at least one of its columns is a base
/// column (MySQL's rule; a view of computed columns only is NO).
pub(crate) fn is_updatable(e: &Engine, s: &Session, db: &str, view: &str) -> bool {
    match view_in(e, s, (db, view), "UPDATE", 0) {
        Ok(Some(v)) => v
            .columns
            .iter()
            .any(|(_, x)| matches!(x, Expr::Identifier(_) | Expr::CompoundIdentifier(_))),
        _ => false,
    }
}

/// A view `name` selecting from the one base table `schema` (in `db`),
/// and its own WHERE over it.
fn over_table(
    name: String,
    db: &str,
    schema: &TableSchema,
    select: &ast::Select,
) -> (ViewOfTable, Option<Expr>) {
    let mut columns = Vec::new();
    for item in &select.projection {
        match item {
            SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..) => {
                for c in schema.columns.iter().filter(|c| !c.is_hidden()) {
                    columns.push((c.name.clone(), Expr::Identifier(Ident::new(&c.name))));
                }
            }
            SelectItem::UnnamedExpr(x) | SelectItem::ExprWithAlias { expr: x, .. } => {
                columns.push((item_name(item, x), unqualified(x)));
            }
        }
    }
    let selection = select.selection.as_ref().map(unqualified);
    let view = ViewOfTable {
        name,
        base: ObjectName(vec![Ident::new(db), Ident::new(&schema.name)]),
        join: None,
        columns,
        checks: Vec::new(),
        selection: selection.clone(),
    };
    (view, selection)
}

/// A view `name` selecting from the updatable view `lower`: its columns
/// and WHERE over `lower`'s base tables, `lower`'s WHERE and CHECK
/// OPTION conditions kept; and its own WHERE over those tables.
fn over_view(
    name: String,
    lower: ViewOfTable,
    select: &ast::Select,
) -> (ViewOfTable, Option<Expr>) {
    let over_lower = |x: &Expr| {
        let mut x = unqualified(x);
        lower.to_base(&mut x, &|_| false, None);
        x
    };
    let mut columns = Vec::new();
    for item in &select.projection {
        match item {
            SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..) => {
                columns.extend(lower.columns.iter().cloned())
            }
            SelectItem::UnnamedExpr(x) | SelectItem::ExprWithAlias { expr: x, .. } => {
                columns.push((item_name(item, x), over_lower(x)));
            }
        }
    }
    let own = select.selection.as_ref().map(over_lower);
    let view = ViewOfTable {
        name,
        selection: lower.both(own.clone(), None),
        columns,
        ..lower
    };
    (view, own)
}

/// The name of select item `item` (whose expression is `x`).
pub(super) fn item_name(item: &SelectItem, x: &Expr) -> String {
    match item {
        SelectItem::ExprWithAlias { alias, .. } => alias.value.clone(),
        _ => ladle_dataflow::expr_column_name(&unqualified(x)),
    }
}

/// An INSERT (REPLACE, ON DUPLICATE KEY UPDATE) into a view as one into
/// its base table; the view written, whose CHECK OPTION the rows must
/// meet, if it names one.
pub(super) fn insert_into_base(
    e: &Engine,
    s: &Session,
    ins: &mut ast::Insert,
) -> Result<Option<ViewOfTable>> {
    let Some(view) = view_of_table(e, s, &ins.table_name, "INSERT")? else {
        return Ok(None);
    };
    if view.join.is_some() {
        refuse_join_check(&view)?;
        // Into one of its tables, which may be a view (whose own CHECK
        // OPTION applies).
        insert_into_table(&view, ins)?;
        return insert_into_base(e, s, ins);
    }
    let written = ins.table_name.clone();
    if let Some(ast::OnInsert::DuplicateKeyUpdate(assignments)) = &mut ins.on {
        for a in assignments.iter_mut() {
            if let AssignmentTarget::ColumnName(n) = &mut a.target {
                let name = crate::sqltext::last_part(n);
                *n = ObjectName(vec![view.base_column(&name, "field list")?]);
            }
            view.to_base(&mut a.value, &|q| names(&written, q), None);
        }
    }
    ins.columns = view.insert_columns(&ins.columns)?;
    ins.table_name = view.base.clone();
    Ok(Some(view))
}

/// A write through a join view WITH CHECK OPTION (here or under it),
/// which would need the joined row checked: a known gap (1235; MySQL
/// checks it, 1369).
pub(super) fn refuse_join_check(view: &ViewOfTable) -> Result<()> {
    match view.checks.is_empty() {
        true => Ok(()),
        false => Err(ShimError::Unsupported(
            "a write through a view over a join WITH CHECK OPTION".into(),
        )),
    }
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
pub(super) fn unqualified(x: &Expr) -> Expr {
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
    /// The view with the conditions its CHECK OPTION adds (`own`: its
    /// WHERE over the base tables), as MySQL 8.0 applies them: LOCAL
    /// checks its WHERE and the checks of the views under it; CASCADED
    /// also the WHERE of every view under it; no option only the checks
    /// under it. (MariaDB's LOCAL and no option ignore the views under.)
    fn with_check(
        mut self,
        option: Option<crate::view_check_option::CheckOption>,
        own: Option<Expr>,
    ) -> Self {
        use crate::view_check_option::CheckOption;
        match option {
            None => {}
            Some(CheckOption::Local) => self.checks.extend(own),
            Some(CheckOption::Cascaded) => self.checks = self.selection.iter().cloned().collect(),
        }
        self
    }

    pub(super) fn column(&self, name: &str) -> Option<&Expr> {
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
    pub(super) fn to_base(
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
pub(super) fn names(name: &ObjectName, qualifier: &[Ident]) -> bool {
    let same = super::write::same_name;
    same(&name.0, qualifier) || (name.0.len() == 2 && same(&name.0[1..], qualifier))
}

/// A multi-table UPDATE whose SET assigns to views: each such view
/// becomes its base table under the view's name (its alias, else its
/// name), the statement's references to the view's columns the
/// expressions they stand for, and the view's WHERE part of the
/// statement's. A view only read stays as it is. Returns the merged
/// views WITH CHECK OPTION, under the names the statement now gives their
/// base tables.
pub(super) fn merge_target_views(
    e: &Engine,
    s: &Session,
    (tables, assignments, selection): (
        &mut [ast::TableWithJoins],
        &mut [Assignment],
        &mut Option<Expr>,
    ),
) -> Result<Vec<(Vec<Ident>, ViewOfTable)>> {
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
                Ok(Some(view)) if view.join.is_some() => {
                    failed = Some(ShimError::Unsupported(
                        "a multi-table UPDATE assigning through a view over a join".into(),
                    ))
                }
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
    merged.retain(|(_, view)| !view.checks.is_empty());
    Ok(merged)
}

/// A join's ON condition.
pub(super) fn on_condition(op: &mut ast::JoinOperator) -> Option<&mut Expr> {
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

/// One table of a join view's FROM: the alias that names it (its name if
/// it has none) and its column names.
struct JoinedTable {
    alias: Ident,
    columns: Vec<String>,
}

/// A view `name` (`db.view`, defined in `db`) over the join `select`
/// reads, merged: its FROM with each table qualified by its database and
/// aliased, its columns and WHERE qualified by those aliases; and its own
/// WHERE.
fn over_join(
    e: &Engine,
    s: &Session,
    (db, name): (&str, String),
    (select, statement): (&ast::Select, &'static str),
    depth: usize,
) -> Result<(ViewOfTable, Option<Expr>)> {
    let mut from = select.from.clone();
    let mut tables = Vec::new();
    for t in &mut from {
        let mut factors: Vec<&mut TableFactor> = vec![&mut t.relation];
        factors.extend(t.joins.iter_mut().map(|j| &mut j.relation));
        for f in factors {
            tables.push(qualify_table(e, s, db, f, (statement, depth))?);
        }
    }
    let qualify = |x: &Expr| qualified_by_table(x, &tables);
    for t in &mut from {
        for j in &mut t.joins {
            if let Some(on) = on_condition(&mut j.join_operator) {
                *on = qualify(on);
            }
        }
    }
    let mut columns = Vec::new();
    for item in &select.projection {
        match item {
            SelectItem::Wildcard(_) => {
                for t in &tables {
                    columns.extend(t.columns.iter().map(|c| column_of(&t.alias, c)));
                }
            }
            SelectItem::QualifiedWildcard(q, _) => {
                let written = q.0.last().map(|i| i.value.as_str()).unwrap_or("");
                for t in tables
                    .iter()
                    .filter(|t| t.alias.value.eq_ignore_ascii_case(written))
                {
                    columns.extend(t.columns.iter().map(|c| column_of(&t.alias, c)));
                }
            }
            SelectItem::UnnamedExpr(x) | SelectItem::ExprWithAlias { expr: x, .. } => {
                columns.push((item_name(item, x), qualify(x)));
            }
        }
    }
    let own = select.selection.as_ref().map(qualify);
    let view = ViewOfTable {
        name,
        base: ObjectName(Vec::new()),
        join: Some(from),
        columns,
        selection: own.clone(),
        checks: Vec::new(),
    };
    Ok((view, own))
}

/// View column `c` of the table named `alias`.
fn column_of(alias: &Ident, c: &str) -> (String, Expr) {
    let reference = Expr::CompoundIdentifier(vec![alias.clone(), Ident::new(c)]);
    (c.to_string(), reference)
}

/// Table factor `f` of a join view defined in `db`, qualified by its
/// database and given an alias (its name) if it has none; a derived
/// table or nested join makes the view not updatable.
fn qualify_table(
    e: &Engine,
    s: &Session,
    db: &str,
    f: &mut TableFactor,
    (statement, depth): (&'static str, usize),
) -> Result<JoinedTable> {
    let TableFactor::Table { name, alias, .. } = f else {
        return Err(ShimError::Unsupported(
            "a write through a view over a derived table or nested join".into(),
        ));
    };
    let (table_db, table) = match name.0.as_slice() {
        [t] => (db.to_string(), t.value.clone()),
        _ => e.resolve(s, name)?,
    };
    let columns = match e.storage.table(&table_db, &table) {
        Some(schema) => schema
            .columns
            .iter()
            .filter(|c| !c.is_hidden())
            .map(|c| c.name.clone())
            .collect(),
        None => match view_in(e, s, (&table_db, &table), statement, depth + 1)? {
            Some(view) => view.columns.iter().map(|(c, _)| c.clone()).collect(),
            None => {
                return Err(ShimError::UnknownTable {
                    database: table_db,
                    table,
                })
            }
        },
    };
    let named = match alias {
        Some(a) => a.name.clone(),
        None => Ident::new(&table),
    };
    *name = ObjectName(vec![Ident::new(table_db), Ident::new(table)]);
    *alias = Some(ast::TableAlias {
        name: named.clone(),
        columns: Vec::new(),
    });
    Ok(JoinedTable {
        alias: named,
        columns,
    })
}

/// `x` with each unqualified column reference qualified by the alias of
/// the one table in `tables` that has such a column (left alone if none
/// or several do, for the write to report).
fn qualified_by_table(x: &Expr, tables: &[JoinedTable]) -> Expr {
    let mut x = x.clone();
    let _ = ast::visit_expressions_mut(&mut x, |e| {
        if let Expr::Identifier(i) = e {
            let mut owners = tables
                .iter()
                .filter(|t| t.columns.iter().any(|c| c.eq_ignore_ascii_case(&i.value)));
            if let (Some(t), None) = (owners.next(), owners.next()) {
                *e = Expr::CompoundIdentifier(vec![t.alias.clone(), i.clone()]);
            }
        }
        ControlFlow::<()>::Continue(())
    });
    x
}

impl ViewOfTable {
    /// The table column (`[alias, column]`) join view column `name` is,
    /// for a write to it (`place` names the clause for 1054); a computed
    /// one is 1348 (`insert`: 1471).
    pub(super) fn joined_column(
        &self,
        name: &str,
        place: &str,
        insert: bool,
    ) -> Result<Vec<Ident>> {
        match self.column(name) {
            Some(Expr::CompoundIdentifier(parts)) if parts.len() == 2 => Ok(parts.clone()),
            Some(_) if insert => Err(ShimError::ViewNotInsertable(self.name.clone())),
            Some(_) => Err(ShimError::ColumnNotUpdatable(name.into())),
            None => Err(ShimError::UnknownColumn(name.into(), place.into())),
        }
    }

    /// The one table alias of `columns` (`[alias, column]` each), else
    /// 1393.
    pub(super) fn one_table(&self, columns: &[Vec<Ident>]) -> Result<Ident> {
        let first = columns
            .first()
            .and_then(|c| c.first())
            .ok_or_else(|| ShimError::JoinViewNoFieldList(self.name.clone()))?;
        if columns
            .iter()
            .any(|c| !c[0].value.eq_ignore_ascii_case(&first.value))
        {
            return Err(ShimError::JoinViewManyTables(self.name.clone()));
        }
        Ok(first.clone())
    }

    /// The table of the view's FROM that `alias` names, as written there
    /// (qualified by its database).
    fn table_named(&self, alias: &Ident) -> Option<ObjectName> {
        let from = self.join.as_ref()?;
        from.iter()
            .flat_map(|t| std::iter::once(&t.relation).chain(t.joins.iter().map(|j| &j.relation)))
            .find_map(|f| match f {
                TableFactor::Table {
                    name,
                    alias: Some(a),
                    ..
                } if a.name.value.eq_ignore_ascii_case(&alias.value) => Some(name.clone()),
                _ => None,
            })
    }
}

/// An INSERT (REPLACE, ON DUPLICATE KEY UPDATE) into join view `view` as
/// one into the table all its columns come from, which may be a view
/// itself.
fn insert_into_table(view: &ViewOfTable, ins: &mut ast::Insert) -> Result<()> {
    if ins.columns.is_empty() {
        return Err(ShimError::JoinViewNoFieldList(view.name.clone()));
    }
    let mut columns = Vec::with_capacity(ins.columns.len());
    for c in &ins.columns {
        columns.push(view.joined_column(&c.value, "field list", true)?);
    }
    let written = ins.table_name.clone();
    if let Some(ast::OnInsert::DuplicateKeyUpdate(assignments)) = &mut ins.on {
        for a in assignments.iter_mut() {
            if let AssignmentTarget::ColumnName(n) = &mut a.target {
                let column =
                    view.joined_column(&crate::sqltext::last_part(n), "field list", false)?;
                *n = ObjectName(vec![column[1].clone()]);
                columns.push(column);
            }
            view.to_base(&mut a.value, &|q| names(&written, q), None);
            a.value = super::through_view::unqualified(&a.value);
        }
    }
    let alias = view.one_table(&columns)?;
    let table = view
        .table_named(&alias)
        .ok_or_else(|| ShimError::Internal("a join view column of no table".into()))?;
    ins.columns = columns
        .iter()
        .take(ins.columns.len())
        .map(|c| c[1].clone())
        .collect();
    ins.table_name = table;
    Ok(())
}
