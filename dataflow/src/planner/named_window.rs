//! Named windows: `WINDOW w AS (PARTITION BY a ORDER BY b)` and the calls
//! that name one (`OVER w`, or `OVER (w ORDER BY c)` refining it), each
//! call's OVER replaced by the window it means before the SELECT is
//! planned, by MySQL 8's rules: a window may refine one defined before or
//! after it (MariaDB only before), never itself through others (3580); a
//! refining window names no PARTITION BY (3581), refines no window with a
//! frame (3582) and adds ORDER BY only to a window without one (3583); a
//! name is defined once (3591) and every name used is defined (3579).
//! Every definition is checked, used or not, as MySQL does.

use std::ops::ControlFlow;

use sqlparser::ast;

use super::expr::unsupported;
use super::syntax::visit_shallow_mut;
use crate::{Result, WindowError};

/// How MySQL names an unnamed window in its errors.
const UNNAMED: &str = "<unnamed window>";

/// The WINDOW clause: each definition by its name, resolved on demand.
struct Definitions<'a> {
    defs: Vec<(&'a ast::Ident, &'a ast::NamedWindowExpr)>,
}

impl<'a> Definitions<'a> {
    fn of(s: &'a ast::Select) -> Result<Definitions<'a>> {
        let mut defs: Vec<(&ast::Ident, &ast::NamedWindowExpr)> = Vec::new();
        for ast::NamedWindowDefinition(name, expr) in &s.named_window {
            if defs.iter().any(|(n, _)| same(n, name)) {
                return Err(WindowError::DuplicateName(name.value.clone()).into());
            }
            defs.push((name, expr));
        }
        Ok(Definitions { defs })
    }

    /// The window `name` means, its references to others resolved;
    /// `path` holds the definitions being resolved (a cycle's members).
    fn resolve(&self, name: &ast::Ident, path: &mut Vec<String>) -> Result<ast::WindowSpec> {
        let Some((own, expr)) = self.defs.iter().find(|(n, _)| same(n, name)) else {
            return Err(WindowError::NoSuchWindow(name.value.clone()).into());
        };
        let key = own.value.to_ascii_lowercase();
        if path.contains(&key) {
            return Err(WindowError::Circularity.into());
        }
        path.push(key);
        let spec = match expr {
            ast::NamedWindowExpr::WindowSpec(spec) => self.refine(spec, &own.value, path)?,
            // `WINDOW w2 AS w1` is BigQuery's, a syntax error in MySQL.
            ast::NamedWindowExpr::NamedWindow(_) => {
                return Err(unsupported("WINDOW w AS <name> without parentheses"))
            }
        };
        path.pop();
        Ok(spec)
    }

    /// `spec` (the window called `own` in errors) with the window it
    /// names, if any, folded in.
    fn refine(
        &self,
        spec: &ast::WindowSpec,
        own: &str,
        path: &mut Vec<String>,
    ) -> Result<ast::WindowSpec> {
        let Some(base_name) = &spec.window_name else {
            return Ok(spec.clone());
        };
        let base = self.resolve(base_name, path)?;
        if !spec.partition_by.is_empty() {
            return Err(WindowError::ChildPartitioning.into());
        }
        if base.window_frame.is_some() {
            return Err(WindowError::InheritFrame(base_name.value.clone()).into());
        }
        if !spec.order_by.is_empty() && !base.order_by.is_empty() {
            return Err(
                WindowError::RedefineOrderBy(own.to_string(), base_name.value.clone()).into(),
            );
        }
        Ok(ast::WindowSpec {
            window_name: None,
            partition_by: base.partition_by,
            order_by: if spec.order_by.is_empty() {
                base.order_by
            } else {
                spec.order_by.clone()
            },
            window_frame: spec.window_frame.clone(),
        })
    }

    /// The window an OVER means.
    fn over(&self, over: &ast::WindowType) -> Result<ast::WindowSpec> {
        match over {
            ast::WindowType::NamedWindow(name) => self.resolve(name, &mut Vec::new()),
            ast::WindowType::WindowSpec(spec) => self.refine(spec, UNNAMED, &mut Vec::new()),
        }
    }
}

/// Window names compare as MySQL's do: without regard to case.
fn same(a: &ast::Ident, b: &ast::Ident) -> bool {
    a.value.eq_ignore_ascii_case(&b.value)
}

/// Whether `e` calls a window function over a named window.
fn names_window(e: &ast::Expr) -> bool {
    matches!(e, ast::Expr::Function(ast::Function { over: Some(o), .. })
        if matches!(o, ast::WindowType::NamedWindow(_))
            || matches!(o, ast::WindowType::WindowSpec(w) if w.window_name.is_some()))
}

/// `s` and `q` (whose ORDER BY may call window functions too) with every
/// window call's OVER spelled out and the WINDOW clause gone; `None` when
/// `s` has neither. An unnamed select item keeps the name its call had.
pub(super) fn resolve_named_windows(
    s: &ast::Select,
    q: &ast::Query,
) -> Result<Option<(ast::Select, ast::Query)>> {
    let named = |e: &ast::Expr| super::syntax::any_shallow(e, names_window);
    let used = s.projection.iter().any(|i| match i {
        ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } => {
            named(e)
        }
        _ => false,
    }) || q
        .order_by
        .iter()
        .flat_map(|o| &o.exprs)
        .any(|o| named(&o.expr));
    if s.named_window.is_empty() && !used {
        return Ok(None);
    }
    let defs = Definitions::of(s)?;
    for (name, _) in &defs.defs {
        defs.resolve(name, &mut Vec::new())?;
    }
    let spell_out = |e: &mut ast::Expr| -> Result<()> {
        let flow = visit_shallow_mut(e, |x| {
            if let ast::Expr::Function(ast::Function { over: Some(o), .. }) = x {
                match defs.over(o) {
                    Ok(spec) => *o = ast::WindowType::WindowSpec(spec),
                    Err(e) => return ControlFlow::Break(e),
                }
            }
            ControlFlow::Continue(())
        });
        match flow {
            ControlFlow::Break(e) => Err(e),
            ControlFlow::Continue(()) => Ok(()),
        }
    };
    let mut s2 = s.clone();
    s2.named_window.clear();
    for item in s2.projection.iter_mut() {
        match item {
            ast::SelectItem::UnnamedExpr(e) => {
                let name = crate::expr_column_name(e);
                let named = named(e);
                spell_out(e)?;
                if named {
                    *item = ast::SelectItem::ExprWithAlias {
                        expr: e.clone(),
                        alias: ast::Ident::new(name),
                    };
                }
            }
            ast::SelectItem::ExprWithAlias { expr, .. } => spell_out(expr)?,
            _ => {}
        }
    }
    let mut q2 = q.clone();
    for o in q2.order_by.iter_mut().flat_map(|o| o.exprs.iter_mut()) {
        spell_out(&mut o.expr)?;
    }
    Ok(Some((s2, q2)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DataflowError;

    fn select(sql: &str) -> (ast::Select, ast::Query) {
        let stmts = sqlparser::parser::Parser::parse_sql(&sqlparser::dialect::MySqlDialect {}, sql)
            .expect("parses");
        let Some(ast::Statement::Query(q)) = stmts.into_iter().next() else {
            panic!("not a query")
        };
        let ast::SetExpr::Select(s) = &*q.body else {
            panic!("not a SELECT")
        };
        ((**s).clone(), *q)
    }

    fn resolved(sql: &str) -> Result<String> {
        let (s, q) = select(sql);
        let (s, _) = resolve_named_windows(&s, &q)?.expect("has named windows");
        Ok(s.projection
            .iter()
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(", "))
    }

    #[test]
    fn a_call_names_or_refines_a_window() {
        assert_eq!(
            resolved("SELECT ROW_NUMBER() OVER w FROM t WINDOW w AS (PARTITION BY a ORDER BY b)")
                .unwrap(),
            "ROW_NUMBER() OVER (PARTITION BY a ORDER BY b) AS ROW_NUMBER() OVER w"
        );
        assert_eq!(
            resolved("SELECT SUM(x) OVER (w ORDER BY c ROWS 1 PRECEDING) AS s FROM t WINDOW w AS (PARTITION BY a)")
                .unwrap(),
            "SUM(x) OVER (PARTITION BY a ORDER BY c ROWS 1 PRECEDING) AS s"
        );
        // A definition refining one defined after it (MySQL's rule).
        assert_eq!(
            resolved("SELECT RANK() OVER w2 r FROM t WINDOW w2 AS (w1 ORDER BY b), w1 AS (PARTITION BY a)")
                .unwrap(),
            "RANK() OVER (PARTITION BY a ORDER BY b) AS r"
        );
    }

    #[test]
    fn mysql_refuses_what_mysql_refuses() {
        let err = |sql: &str| match resolved(sql) {
            Err(DataflowError::Window(e)) => e,
            other => panic!("{sql}: {other:?}"),
        };
        use WindowError as E;
        assert_eq!(
            err("SELECT RANK() OVER x FROM t WINDOW w AS ()"),
            E::NoSuchWindow("x".into())
        );
        assert_eq!(
            err("SELECT 1 FROM t WINDOW w AS (), W AS ()"),
            E::DuplicateName("W".into())
        );
        assert_eq!(
            err("SELECT 1 FROM t WINDOW w1 AS (w2), w2 AS (w1)"),
            E::Circularity
        );
        assert_eq!(
            err("SELECT RANK() OVER (w PARTITION BY b) FROM t WINDOW w AS (ORDER BY a)"),
            E::ChildPartitioning
        );
        assert_eq!(
            err("SELECT 1 FROM t WINDOW w AS (ORDER BY a ROWS 2 PRECEDING), v AS (w)"),
            E::InheritFrame("w".into())
        );
        assert_eq!(
            err("SELECT 1 FROM t WINDOW w AS (ORDER BY a), v AS (w ORDER BY b)"),
            E::RedefineOrderBy("v".into(), "w".into())
        );
        assert_eq!(
            err("SELECT RANK() OVER (w ORDER BY b) FROM t WINDOW w AS (ORDER BY a)"),
            E::RedefineOrderBy(UNNAMED.into(), "w".into())
        );
    }

    #[test]
    fn a_subquery_keeps_its_own_windows() {
        let (s, q) =
            select("SELECT (SELECT MAX(y) OVER v FROM u WINDOW v AS (ORDER BY y) LIMIT 1) FROM t");
        assert!(resolve_named_windows(&s, &q).unwrap().is_none());
    }
}
