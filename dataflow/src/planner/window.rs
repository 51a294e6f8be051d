//! A derived table's ORDER BY ... LIMIT window (`FROM (SELECT ... ORDER BY
//! ... LIMIT n) d`) as the only FROM item of the query, kept whole by the
//! view and taken at read time. Elsewhere (joined with other tables, in a
//! UNION branch, nested) such a subquery is a relation whose LIMIT a top-k
//! [`crate::ops::Window`] maintains (see `query.rs`).

use ladle_common::SqlType;
use sqlparser::ast;

use super::expr::{unsupported, Scope, ScopeCol};
use super::query::Planner;
use super::syntax::is_dual;
use crate::expr::Expr;
use crate::plan::{LNode, Window};
use crate::{DataflowError, Result};

impl Planner<'_> {
    /// `FROM (SELECT ... ORDER BY ... LIMIT n) [AS] d` as the only FROM item
    /// of a top-level query: the derived table planned as a view of its
    /// own (full ordered result, no parameters), its stored row exposed as
    /// `d`'s columns (hidden ones for ORDER BY columns not selected), and
    /// the window to take at read time.
    pub(super) fn windowed_derived(
        &self,
        s: &ast::Select,
        top: bool,
    ) -> Result<Option<(LNode, Scope, Window)>> {
        let [ast::TableWithJoins { relation, joins }] = s.from.as_slice() else {
            return Ok(None);
        };
        let ast::TableFactor::Derived {
            lateral: false,
            subquery,
            alias,
        } = relation
        else {
            return Ok(None);
        };
        if subquery.limit.is_none() && subquery.offset.is_none() {
            return Ok(None);
        }
        if !top || !joins.is_empty() {
            // Planned as a relation: a top-k window node.
            return Ok(None);
        }
        let Some(alias) = alias else {
            return Err(DataflowError::BadArgument(
                "Every derived table must have its own alias".into(),
            ));
        };
        let ast::SetExpr::Select(inner_s) = &*subquery.body else {
            return Err(unsupported("LIMIT in a subquery over UNION"));
        };
        if inner_s.from.is_empty() || is_dual(inner_s) {
            return Err(unsupported("LIMIT in a subquery without FROM"));
        }
        let pv = self
            .nested(self.database)?
            .select(inner_s, subquery, true)?;
        if !pv.key.is_empty()
            || pv.read_filter.is_some()
            || pv.finish.is_some()
            || pv.empty_default.is_some()
            || pv.output.iter().any(|e| e.has_params() || e.is_volatile())
        {
            return Err(unsupported(
                "parameters, NOW() or aggregates without GROUP BY in a subquery with LIMIT",
            ));
        }
        // One scope column per stored column: the selected ones by name.
        let width = pv.plan.width();
        let mut names: Vec<Option<usize>> = vec![None; width];
        for (i, e) in pv.output.iter().enumerate() {
            match e {
                Expr::Column(c) if *c < width && names[*c].is_none() => names[*c] = Some(i),
                _ => return Err(unsupported("this derived table with LIMIT")),
            }
        }
        let qualifier = alias.name.value.to_ascii_lowercase();
        let cols = (0..width)
            .map(|c| {
                let coll = pv.plan.colls[c];
                match names[c] {
                    Some(i) => {
                        let oc = &pv.columns[i];
                        let name = alias
                            .columns
                            .get(i)
                            .map(|n| n.value.clone())
                            .unwrap_or_else(|| oc.name.clone());
                        ScopeCol {
                            qualifier: qualifier.clone(),
                            name,
                            ty: oc.ty.clone(),
                            nullable: oc.nullable,
                            collation: coll,
                            table: oc.table.clone(),
                            origin: oc.origin.clone(),
                            stored: oc.stored,
                            shown: None,
                        }
                    }
                    None => ScopeCol {
                        qualifier: "__sqwindow".into(),
                        name: format!("__h{c}"),
                        // Only the window's ORDER BY reads it.
                        ty: SqlType::Int {
                            bytes: 8,
                            unsigned: false,
                            display_width: None,
                        },
                        nullable: true,
                        collation: coll,
                        table: String::new(),
                        origin: None,
                        stored: false,
                        shown: None,
                    },
                }
            })
            .collect();
        let window = Window {
            order: pv.order.clone(),
            offset: pv.offset.clone(),
            limit: pv.limit.clone(),
        };
        Ok(Some((
            pv.plan,
            Scope {
                cols,
                coalesced: Vec::new(),
            },
            window,
        )))
    }
}
