//! Non-recursive common table expressions, inlined before a query is
//! normalized and planned: `WITH a AS (q) SELECT ... FROM a` reads as
//! `SELECT ... FROM (q) AS a`, each reference to `a` in a FROM clause
//! (of the query, its subqueries and later CTEs) becoming a derived table
//! of its own. A CTE that names itself reads the table of that name, as
//! in MySQL without RECURSIVE. A top-level `WITH RECURSIVE` is computed
//! per execution by the shim, which hands the planner only non-recursive
//! CTEs; one in a view, EXPLAIN, subquery or derived table is refused
//! (1235).

use std::ops::ControlFlow;

use sqlparser::ast::{self, VisitMut, VisitorMut};

use super::expr::unsupported;
use crate::{DataflowError, Result};

/// Replaces `q`'s WITH clause (and any nested one) by derived tables.
pub(crate) fn inline_ctes(q: &mut ast::Query) -> Result<()> {
    let Some(with) = q.with.take() else {
        return inline_nested(q, &[]);
    };
    if with.recursive {
        return Err(unsupported(
            "WITH RECURSIVE in a view, EXPLAIN, subquery or derived table",
        ));
    }
    let mut defs: Vec<Definition> = Vec::new();
    for cte in with.cte_tables {
        let mut body = *cte.query;
        // Earlier CTEs are visible in later ones.
        inline_ctes(&mut body)?;
        inline_nested(&mut body, &defs)?;
        defs.push(Definition {
            name: cte.alias.name,
            columns: cte.alias.columns,
            body,
        });
    }
    inline_nested(q, &defs)
}

/// One CTE: its name, its column names (if listed) and its query.
struct Definition {
    name: ast::Ident,
    columns: Vec<ast::Ident>,
    body: ast::Query,
}

fn inline_nested(q: &mut ast::Query, defs: &[Definition]) -> Result<()> {
    let mut inliner = Inliner { defs, error: None };
    let _ = q.visit(&mut inliner);
    match inliner.error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

struct Inliner<'a> {
    defs: &'a [Definition],
    error: Option<DataflowError>,
}

impl VisitorMut for Inliner<'_> {
    type Break = ();

    // A nested query's own WITH clause, inlined within it first.
    fn pre_visit_query(&mut self, query: &mut ast::Query) -> ControlFlow<()> {
        if query.with.is_some() {
            if let Err(e) = inline_ctes(query) {
                self.error = Some(e);
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    }

    // After the factor's own parts: the inlined body is not visited again.
    fn post_visit_table_factor(&mut self, factor: &mut ast::TableFactor) -> ControlFlow<()> {
        let ast::TableFactor::Table {
            name,
            alias,
            args: None,
            ..
        } = factor
        else {
            return ControlFlow::Continue(());
        };
        let [table] = name.0.as_slice() else {
            return ControlFlow::Continue(());
        };
        let Some(def) = self
            .defs
            .iter()
            .rev()
            .find(|d| d.name.value.eq_ignore_ascii_case(&table.value))
        else {
            return ControlFlow::Continue(());
        };
        let alias = match alias.take() {
            Some(a) if a.columns.is_empty() => ast::TableAlias {
                name: a.name,
                columns: def.columns.clone(),
            },
            Some(a) => a,
            None => ast::TableAlias {
                name: def.name.clone(),
                columns: def.columns.clone(),
            },
        };
        *factor = ast::TableFactor::Derived {
            lateral: false,
            subquery: Box::new(def.body.clone()),
            alias: Some(alias),
        };
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use sqlparser::dialect::MySqlDialect;
    use sqlparser::parser::Parser;

    use super::*;

    fn inlined(sql: &str) -> String {
        let mut stmts = Parser::parse_sql(&MySqlDialect {}, sql).unwrap();
        let ast::Statement::Query(q) = &mut stmts[0] else {
            panic!("not a query")
        };
        inline_ctes(q).unwrap();
        q.to_string()
    }

    #[test]
    fn references_become_derived_tables() {
        assert_eq!(
            inlined("WITH a AS (SELECT x FROM t), b AS (SELECT x FROM a) SELECT * FROM b JOIN a AS c ON b.x = c.x"),
            "SELECT * FROM (SELECT x FROM (SELECT x FROM t) AS a) AS b JOIN (SELECT x FROM t) AS c ON b.x = c.x"
        );
        assert_eq!(
            inlined("SELECT * FROM u WHERE y IN (WITH a AS (SELECT 1) SELECT * FROM a)"),
            "SELECT * FROM u WHERE y IN (SELECT * FROM (SELECT 1) AS a)"
        );
        // A CTE naming itself reads the table.
        assert_eq!(
            inlined("WITH t AS (SELECT * FROM t) SELECT * FROM t"),
            "SELECT * FROM (SELECT * FROM t) AS t"
        );
    }
}
