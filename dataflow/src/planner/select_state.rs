//! The values the phases of planning one SELECT (`Planner::select`, in
//! `select.rs`) hand each other: the state they build up, GROUP BY's
//! parts, the frame after aggregation, the compiled select list, and what
//! is left to read time.

use std::collections::HashMap;

use ladle_common::{Collation, SqlType};
use sqlparser::ast;

use super::expr::{collect_aggregates, derived_collation, unsupported, PostAgg, Scope};
use super::relation::{column_collation, t_is_text};
use crate::expr::Expr;
use crate::plan::range::RangeIndex;
use crate::plan::{LNode, ReadAgg, Window};
use crate::{OutputColumn, Result};

/// What the phases of planning one SELECT build up and hand on: the plan
/// so far and the names its columns go by, and what is decided so far
/// about the reader's keys and the work left to read time.
pub(super) struct SelectState {
    /// The plan so far.
    pub(super) node: LNode,
    /// The names `node`'s columns go by.
    pub(super) scope: Scope,
    /// FROM is a derived table with ORDER BY ... LIMIT: its window, which
    /// each read takes before evaluating the rest of the query over it.
    pub(super) window: Option<Window>,
    /// Subqueries joined in so far (their columns are named `__sq<n>`).
    pub(super) nsub: usize,
    /// Reader keys: a column of `scope` and the parameter slots giving its
    /// values (several for an IN list).
    pub(super) key_frame: Vec<(usize, Vec<usize>)>,
    /// The `col = ?` conjuncts behind `key_frame`'s one-slot entries (a
    /// candidate for [`super::selection::index_prefix_key`]).
    pub(super) key_conjuncts: Vec<(usize, ast::Expr)>,
    /// WHERE conjuncts evaluated at read time (parameters that cannot key
    /// the view, NOW()).
    pub(super) read_filters: Vec<ast::Expr>,
    /// The slot of a key moved to the read-time filter by
    /// [`super::selection::index_prefix_key`]: an IN list bound to it is
    /// read as one narrowing per element.
    pub(super) narrowed_slot: Option<usize>,
    /// Columns of `scope` typed nullable (as MySQL reports them) whose
    /// values are never NULL: window aggregates of a NOT NULL value over
    /// a frame holding the current row. What must not meet a NULL (a
    /// scalar subquery's `ORDER BY ... LIMIT 1`) may rely on them.
    pub(super) never_null: Vec<usize>,
}

/// GROUP BY's expressions, the aggregate calls of the select list, HAVING
/// and ORDER BY, and the select list's aliases (for GROUP BY alias).
pub(super) struct Grouping {
    pub(super) group_by: Vec<ast::Expr>,
    pub(super) aggregates: Vec<ast::Expr>,
    pub(super) aliases: HashMap<String, ast::Expr>,
}

impl Grouping {
    pub(super) fn of(
        projection: &[ast::SelectItem],
        s: &ast::Select,
        q: &ast::Query,
    ) -> Result<Grouping> {
        let group_by: Vec<ast::Expr> = match &s.group_by {
            ast::GroupByExpr::Expressions(g, mods) if mods.is_empty() => g.clone(),
            _ => return Err(unsupported("GROUP BY modifiers")),
        };
        let mut aggregates = Vec::new();
        for item in projection {
            if let ast::SelectItem::UnnamedExpr(e)
            | ast::SelectItem::ExprWithAlias { expr: e, .. } = item
            {
                collect_aggregates(e, &mut aggregates);
            }
        }
        if let Some(h) = &s.having {
            collect_aggregates(h, &mut aggregates);
        }
        if let Some(ob) = &q.order_by {
            for o in &ob.exprs {
                collect_aggregates(&o.expr, &mut aggregates);
            }
        }
        let aliases = projection
            .iter()
            .filter_map(|i| match i {
                ast::SelectItem::ExprWithAlias { expr, alias } => {
                    Some((alias.value.to_ascii_lowercase(), expr.clone()))
                }
                _ => None,
            })
            .collect();
        Ok(Grouping {
            group_by,
            aggregates,
            aliases,
        })
    }

    pub(super) fn aggregated(&self) -> bool {
        !self.group_by.is_empty() || !self.aggregates.is_empty()
    }
}

/// The types and collations of the columns the select list, HAVING and
/// ORDER BY are computed from: the aggregate's output when aggregated, the
/// FROM row otherwise.
pub(super) struct Frame {
    pub(super) types: Vec<(SqlType, bool)>,
    pub(super) colls: Vec<Collation>,
}

impl Frame {
    pub(super) fn after(scope: &Scope, post: Option<&PostAgg>) -> Frame {
        match post {
            Some(p) => Frame {
                types: p.out.iter().map(|(t, n, _)| (t.clone(), *n)).collect(),
                colls: p.out.iter().map(|o| o.2).collect(),
            },
            None => Frame {
                types: scope.types(),
                colls: scope
                    .cols
                    .iter()
                    .map(|c| column_collation(&c.ty, c.collation))
                    .collect(),
            },
        }
    }

    /// The collation `e` over the frame sorts and compares by.
    pub(super) fn collation_of(&self, e: &Expr) -> Collation {
        match e {
            Expr::Column(c) => self.colls.get(*c).copied().unwrap_or(Collation::Binary),
            other => {
                if t_is_text(&other.result_type(&self.types).0) {
                    derived_collation(other, |c| {
                        self.colls.get(c).copied().unwrap_or(Collation::GeneralCi)
                    })
                } else {
                    Collation::Binary
                }
            }
        }
    }
}

/// The select list compiled: each output's expression and metadata, and
/// the aliases ORDER BY and HAVING may name.
pub(super) struct Projection {
    pub(super) visible: Vec<Expr>,
    pub(super) aliases: HashMap<String, Expr>,
    pub(super) columns: Vec<OutputColumn>,
}

/// What the aggregation phase hands on.
pub(super) struct Aggregation {
    /// How expressions after aggregation find the aggregate's output
    /// columns; `None` when the query does not aggregate.
    pub(super) post: Option<PostAgg>,
    /// The frame columns the reader is keyed by.
    pub(super) key_post: Vec<usize>,
    /// No GROUP BY but keys: a key with no rows still reads the aggregate
    /// row over no input.
    pub(super) empty_default_needed: bool,
    /// Aggregation left to read time (or, set later, a derived table's
    /// window).
    pub(super) late: Option<ReadTimeFinish>,
    /// The range parameters of a read-time aggregation's filter.
    pub(super) late_range: Option<RangeIndex>,
}

/// Work each read finishes over the rows the view keeps: a read-time
/// aggregation, or a derived table's window.
pub(super) struct ReadTimeFinish {
    /// The reader's key columns in the stored row.
    pub(super) key: Vec<usize>,
    /// The view's read-time filter, before `finish`.
    pub(super) filter: Option<Expr>,
    pub(super) finish: ReadAgg,
}

impl ReadTimeFinish {
    /// A derived table's window, then `filter` (WHERE over its rows).
    pub(super) fn window(w: Window, filter: Option<Expr>) -> ReadTimeFinish {
        ReadTimeFinish {
            key: vec![],
            filter: None,
            finish: ReadAgg {
                window: Some(w),
                filter,
                aggregate: None,
                having: None,
                project: vec![],
                distinct: false,
                distinct_colls: vec![],
                order: vec![],
            },
        }
    }
}
