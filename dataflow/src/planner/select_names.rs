//! Names ORDER BY, GROUP BY and HAVING find in the select list. A bare
//! name ambiguous among the FROM clause's tables is, as MariaDB resolves
//! it, the one column the select list selects under that name:
//! `SELECT a.id FROM a JOIN b .. ORDER BY id` orders by `a.id`.
//!
//! - ORDER BY and GROUP BY: an item that is the name alone, matched
//!   against the select list's unaliased columns (`SELECT a.id AS k ..
//!   ORDER BY id` stays ambiguous, as does `ORDER BY id + 1`).
//! - HAVING: the name anywhere outside aggregates, matched against the
//!   select list's columns (aliased or not) and GROUP BY's; one matching
//!   none of them is MariaDB's 1054 "Unknown column 'id' in 'HAVING'"
//!   (see `planner::aggregate`). Inside an aggregate it stays ambiguous.
//!
//! An explicit alias of the name is left to the alias lookups of each
//! clause; a name the FROM clause resolves is left as it is.

use std::ops::ControlFlow;

use sqlparser::ast;

use super::expr::{aggregate_name, Scope};
use crate::DataflowError;

/// `s`/`q` with their select-list names spelled as the select list spells
/// them (`id` -> `a.id`); `None` when no name needed it.
pub(super) fn select_list_names(
    s: &ast::Select,
    q: &ast::Query,
    scope: &Scope,
) -> Option<(ast::Select, ast::Query)> {
    // A name is ambiguous only where two FROM columns share it: most
    // SELECTs have none, and are not copied here.
    let mut seen = crate::hash::HashSet::default();
    if scope
        .cols
        .iter()
        .all(|c| seen.insert(c.name.to_ascii_lowercase()))
    {
        return None;
    }
    let names = SelectNames { s, scope };
    let (mut s2, mut q2) = (s.clone(), q.clone());
    let mut changed = false;
    let mut bare = |e: &mut ast::Expr| {
        if let Some(x) = names.unaliased(e) {
            *e = x;
            changed = true;
        }
    };
    if let Some(ob) = &mut q2.order_by {
        ob.exprs.iter_mut().for_each(|o| bare(&mut o.expr));
    }
    if let ast::GroupByExpr::Expressions(g, _) = &mut s2.group_by {
        g.iter_mut().for_each(&mut bare);
    }
    if let Some(h) = &mut s2.having {
        let _ = ast::VisitMut::visit(
            h,
            &mut Having {
                names: &names,
                depth: 0,
                changed: &mut changed,
            },
        );
    }
    changed.then_some((s2, q2))
}

/// The select list and the scope its names are looked up in.
struct SelectNames<'a> {
    s: &'a ast::Select,
    scope: &'a Scope,
}

impl SelectNames<'_> {
    /// The bare name `e`, when it is ambiguous in the FROM clause and no
    /// alias: its one column among the select list's unaliased ones.
    fn unaliased(&self, e: &ast::Expr) -> Option<ast::Expr> {
        let id = self.ambiguous(e)?;
        let items = self.s.projection.iter().filter_map(|i| match i {
            ast::SelectItem::UnnamedExpr(x) => Some(x),
            _ => None,
        });
        self.one_column(id, items)
    }

    /// HAVING's bare name `e` (ambiguous, no alias): its one column among
    /// the select list's (aliased or not) and GROUP BY's.
    fn selected_or_grouped(&self, e: &ast::Expr) -> Option<ast::Expr> {
        let id = self.ambiguous(e)?;
        let items = self.s.projection.iter().filter_map(|i| match i {
            ast::SelectItem::UnnamedExpr(x) | ast::SelectItem::ExprWithAlias { expr: x, .. } => {
                Some(x)
            }
            _ => None,
        });
        let grouped = match &self.s.group_by {
            ast::GroupByExpr::Expressions(g, _) => g.as_slice(),
            ast::GroupByExpr::All(_) => &[],
        };
        self.one_column(id, items.chain(grouped))
    }

    /// `e` when it is a name the FROM clause finds twice and no alias has.
    fn ambiguous<'e>(&self, e: &'e ast::Expr) -> Option<&'e ast::Ident> {
        let ast::Expr::Identifier(id) = e else {
            return None;
        };
        let aliased = self.s.projection.iter().any(|i| {
            matches!(i, ast::SelectItem::ExprWithAlias { alias, .. }
                if alias.value.eq_ignore_ascii_case(&id.value))
        });
        let resolved = self.scope.resolve(std::slice::from_ref(id));
        (!aliased && matches!(resolved, Err(DataflowError::AmbiguousColumn(..)))).then_some(id)
    }

    /// The column `items` name `id` by: when they are all one column of
    /// the scope, that column as the first of them writes it.
    fn one_column<'e>(
        &self,
        id: &ast::Ident,
        items: impl Iterator<Item = &'e ast::Expr>,
    ) -> Option<ast::Expr> {
        let mut found: Option<(usize, &ast::Expr)> = None;
        for x in items {
            let ast::Expr::CompoundIdentifier(ids) = x else {
                continue;
            };
            if !ids
                .last()
                .is_some_and(|n| n.value.eq_ignore_ascii_case(&id.value))
            {
                continue;
            }
            let c = self.scope.resolve(ids).ok()?;
            match found {
                Some((f, _)) if f != c => return None,
                Some(_) => {}
                None => found = Some((c, x)),
            }
        }
        found.map(|(_, x)| x.clone())
    }
}

/// HAVING's walk: names outside aggregates and subqueries.
struct Having<'a, 'b> {
    names: &'a SelectNames<'b>,
    /// Aggregates and subqueries the walk is inside.
    depth: usize,
    changed: &'a mut bool,
}

impl ast::VisitorMut for Having<'_, '_> {
    type Break = ();

    fn pre_visit_query(&mut self, _: &mut ast::Query) -> ControlFlow<()> {
        self.depth += 1;
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _: &mut ast::Query) -> ControlFlow<()> {
        self.depth -= 1;
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, e: &mut ast::Expr) -> ControlFlow<()> {
        if aggregate_name(e).is_some() {
            self.depth += 1;
        } else if self.depth == 0 {
            if let Some(x) = self.names.selected_or_grouped(e) {
                *e = x;
                *self.changed = true;
            }
        }
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, e: &mut ast::Expr) -> ControlFlow<()> {
        if aggregate_name(e).is_some() {
            self.depth -= 1;
        }
        ControlFlow::Continue(())
    }
}
