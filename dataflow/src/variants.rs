//! Bounds the views one query shape installs for its literals.
//!
//! Literals the normalizer cannot make parameters (a `LIKE '%term%'`
//! pattern, a function argument such as `SUBSTRING(c, 5)`, a value in the
//! select list) stay in the view's signature, so each new value would
//! install one more view: an application's search box would grow the graph
//! by a view per search until the idle sweep. The views of one *family*
//! (signatures equal once every literal is blanked) are capped at
//! [`MAX_LITERAL_VARIANTS`]; installing one more drops a variant nobody
//! read since it was last passed over (a CLOCK sweep over the family's
//! `used` bits), so the variants read again and again stay cached and a
//! stream of one-off values costs one install each, as a plain query does
//! in MySQL, with no growth.

use std::collections::{HashMap, VecDeque};
use std::ops::ControlFlow;
use std::sync::atomic::Ordering as AO;
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use sqlparser::ast::{self, VisitMut};

use crate::read::View;

/// The most views one family keeps installed.
pub const MAX_LITERAL_VARIANTS: usize = 16;

/// Families kept before the ones with no installed view are forgotten.
const FAMILIES_BEFORE_PURGE: usize = 4096;

/// The installed views of each family, oldest first.
#[derive(Default)]
pub(crate) struct LiteralVariants {
    families: Mutex<HashMap<String, VecDeque<Weak<View>>>>,
}

impl LiteralVariants {
    /// Records `view`, just installed for `query` (the normalized query of
    /// its signature) in `database`, and returns the views of its family
    /// to drop so that the family keeps at most [`MAX_LITERAL_VARIANTS`]
    /// (never `view` itself).
    pub(crate) fn installed(
        &self,
        database: &str,
        query: &ast::Query,
        view: &Arc<View>,
    ) -> Vec<Arc<View>> {
        let family = family_of(database, query);
        let mut families = self.families.lock();
        if families.len() >= FAMILIES_BEFORE_PURGE {
            families.retain(|_, members| {
                members.retain(is_live);
                !members.is_empty()
            });
        }
        let members = families.entry(family).or_default();
        members.retain(is_live);
        members.push_back(Arc::downgrade(view));
        let mut victims = Vec::new();
        // Two turns round the family at most: the first clears every
        // `used` bit, so the second finds victims.
        let mut turns = 2 * members.len();
        while members.len() > MAX_LITERAL_VARIANTS && turns > 0 {
            turns -= 1;
            let Some(member) = members.pop_front() else {
                break;
            };
            let Some(v) = member.upgrade() else {
                continue;
            };
            if Arc::ptr_eq(&v, view) || v.used.swap(false, AO::Relaxed) {
                members.push_back(member);
            } else {
                victims.push(v);
            }
        }
        victims
    }
}

fn is_live(member: &Weak<View>) -> bool {
    member.upgrade().is_some_and(|v| !v.is_dropped())
}

/// `query` in `database` with every literal and parameter as `?`: the
/// signature its literal variants share.
fn family_of(database: &str, query: &ast::Query) -> String {
    let mut blank = query.clone();
    let _ = blank.visit(&mut BlankLiterals);
    format!("{}\u{1}{}", database.to_ascii_lowercase(), blank)
}

struct BlankLiterals;

impl ast::VisitorMut for BlankLiterals {
    type Break = ();
    fn pre_visit_expr(&mut self, e: &mut ast::Expr) -> ControlFlow<()> {
        if let ast::Expr::Value(v) = e {
            if !matches!(v, ast::Value::Null) {
                *v = ast::Value::Placeholder("?".into());
            }
        }
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(sql: &str) -> ast::Query {
        let dialect = sqlparser::dialect::MySqlDialect {};
        match sqlparser::parser::Parser::parse_sql(&dialect, sql)
            .unwrap()
            .remove(0)
        {
            ast::Statement::Query(q) => *q,
            other => panic!("not a query: {other}"),
        }
    }

    #[test]
    fn literals_differing_only_in_value_share_a_family() {
        let a = family_of(
            "d",
            &query("SELECT SUBSTRING(c, 5) FROM t WHERE c LIKE '%a%'"),
        );
        let b = family_of(
            "D",
            &query("SELECT SUBSTRING(c, 7) FROM t WHERE c LIKE 'b'"),
        );
        assert_eq!(a, b);
        let other = family_of("d", &query("SELECT SUBSTRING(c, 5) FROM t WHERE c = 'a'"));
        assert_ne!(a, other);
        // NULL is no value to vary: `IS NULL` and `= NULL` stay apart.
        let null = family_of("d", &query("SELECT c FROM t WHERE c <=> NULL"));
        let value = family_of("d", &query("SELECT c FROM t WHERE c <=> 1"));
        assert_ne!(null, value);
    }
}
