//! Each subquery planned once per statement. The planner tries shapes in
//! turn (a semi-join, then a joined count; a subquery alone to learn
//! whether it reads the outer query, then the join), and every try plans
//! the subqueries nested in the one tried: without remembering them,
//! planning doubled per level of nesting (16 nested EXISTS took 15 s in a
//! debug build). With them, each nested relation and each correlated body
//! is planned once for the statement, and a try after the first reads
//! the plans below it from here.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

use sqlparser::ast;

use super::expr::Scope;
use super::relation::{PlannedBody, Rel};
use crate::Result;

/// The plans one statement's planning has made (see the module docs),
/// shared by the planners of all its nested queries.
#[derive(Default)]
pub(crate) struct PlanMemo {
    relations: Memo<RelationKey, Rel>,
    bodies: Memo<BodyKey, PlannedBody>,
}

impl PlanMemo {
    /// The subquery `query` planned as a relation by a planner at `depth`
    /// in `database` (the answer of `plan` the first time).
    pub(super) fn relation(
        &self,
        database: &str,
        depth: usize,
        query: &ast::Query,
        plan: impl FnOnce() -> Result<Rel>,
    ) -> Result<Rel> {
        let key = RelationKey {
            database: database.to_string(),
            depth,
            query: query.clone(),
        };
        self.relations.get_or_plan(key, plan)
    }

    /// The FROM and WHERE of a correlated subquery planned over the outer
    /// query's `outer` scope (see `Planner::plan_correlated_params`).
    pub(super) fn body(
        &self,
        database: &str,
        depth: usize,
        s: &ast::Select,
        outer: &Scope,
        with_params: bool,
        plan: impl FnOnce() -> Result<PlannedBody>,
    ) -> Result<PlannedBody> {
        let key = BodyKey {
            database: database.to_string(),
            depth,
            from: s.from.clone(),
            selection: s.selection.clone(),
            outer: outer.clone(),
            with_params,
        };
        self.bodies.get_or_plan(key, plan)
    }
}

/// Answers by key, each computed once.
struct Memo<K, V> {
    answers: RefCell<HashMap<K, Result<V>>>,
}

impl<K, V> Default for Memo<K, V> {
    fn default() -> Self {
        Memo {
            answers: RefCell::new(HashMap::new()),
        }
    }
}

impl<K: Hash + Eq, V: Clone> Memo<K, V> {
    fn get_or_plan(&self, key: K, plan: impl FnOnce() -> Result<V>) -> Result<V> {
        if let Some(answer) = self.answers.borrow().get(&key) {
            return answer.clone();
        }
        // KILL QUERY stops a long planning here, between the subqueries
        // it plans, as it stops a long read.
        crate::interrupt::check()?;
        // (Not borrowed while planning: `plan` asks for the plans below.)
        let answer = plan();
        self.answers.borrow_mut().insert(key, answer.clone());
        answer
    }
}

#[derive(PartialEq, Eq, Hash)]
struct RelationKey {
    database: String,
    depth: usize,
    query: ast::Query,
}

#[derive(PartialEq)]
struct BodyKey {
    database: String,
    depth: usize,
    from: Vec<ast::TableWithJoins>,
    selection: Option<ast::Expr>,
    outer: Scope,
    with_params: bool,
}

impl Eq for BodyKey {}

/// Hashes all but the outer scope (compared on a hit only).
impl Hash for BodyKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.database.hash(state);
        self.depth.hash(state);
        self.from.hash(state);
        self.selection.hash(state);
        self.with_params.hash(state);
    }
}
