//! The FROM clause: tables, named views, derived tables and joins.

use ladle_common::{Collation, Value};
use sqlparser::ast;

use super::expr::{unsupported, volatile, ExprCx, Scope};
use super::query::Planner;
use super::relation::{base_colls, rel_scope, stable};
use super::syntax::{
    as_column, columns_qualified, has_placeholder, has_subquery, links, split_conjuncts,
};
use crate::expr::Expr;
use crate::ops::JoinKind;
use crate::plan::{LNode, LOp};
use crate::{DataflowError, Result};

impl Planner<'_> {
    pub(super) fn factor(&self, tf: &ast::TableFactor) -> Result<(LNode, Scope)> {
        match tf {
            ast::TableFactor::Table {
                name,
                alias,
                args: None,
                ..
            } => {
                let parts: Vec<String> = name.0.iter().map(|i| i.value.clone()).collect();
                let (db, table) = match parts.as_slice() {
                    [t] => (self.database.to_string(), t.clone()),
                    [d, t] => (d.clone(), t.clone()),
                    _ => return Err(DataflowError::UnknownTable(name.to_string())),
                };
                let qualifier = alias
                    .as_ref()
                    .map(|a| a.name.value.clone())
                    .unwrap_or_else(|| table.clone());
                if let Some(schema) = self.storage.table(&db, &table) {
                    let scope = super::table_scope(&schema, &qualifier);
                    let colls = base_colls(&schema);
                    return Ok((
                        LNode {
                            op: LOp::Base(schema),
                            inputs: vec![],
                            colls,
                        },
                        scope,
                    ));
                }
                let key = (db.to_ascii_lowercase(), table.to_ascii_lowercase());
                if let Some(sql) = self.views.get(&key) {
                    let q = super::parse_query(sql)?;
                    let rel = self.relation_in(&db, &q)?;
                    return Ok(rel_scope(rel, &qualifier));
                }
                Err(DataflowError::UnknownTable(format!("{db}.{table}")))
            }
            ast::TableFactor::Derived {
                lateral: false,
                subquery,
                alias,
            } => {
                let Some(alias) = alias else {
                    return Err(DataflowError::BadArgument(
                        "Every derived table must have its own alias".into(),
                    ));
                };
                let mut rel = self.relation(subquery)?;
                for (c, name) in rel.cols.iter_mut().zip(&alias.columns) {
                    c.name = name.value.clone();
                }
                Ok(rel_scope(rel, &alias.name.value))
            }
            ast::TableFactor::NestedJoin {
                table_with_joins,
                alias: None,
            } => {
                let mut w = Vec::new();
                let planned = self.plan_from_item(table_with_joins, &mut w)?;
                if !w.is_empty() {
                    // Parameters from an inner ON inside the parentheses:
                    // they cannot be applied outside (a LEFT JOIN may
                    // enclose them), so never drop them.
                    return Err(unsupported("parameters in a parenthesized join's ON"));
                }
                Ok(planned)
            }
            other => Err(unsupported(format!("FROM {other}"))),
        }
    }

    pub(super) fn plan_from_item(
        &self,
        twj: &ast::TableWithJoins,
        where_conj: &mut Vec<ast::Expr>,
    ) -> Result<(LNode, Scope)> {
        let (mut node, mut scope) = self.factor(&twj.relation)?;
        for j in &twj.joins {
            let (rnode, rscope) = self.factor(&j.relation)?;
            let (kind, constraint) = match &j.join_operator {
                ast::JoinOperator::Inner(c) => (JoinKind::Inner, c.clone()),
                ast::JoinOperator::LeftOuter(c) => (JoinKind::Left, c.clone()),
                ast::JoinOperator::CrossJoin => (JoinKind::Inner, ast::JoinConstraint::None),
                other => {
                    return Err(unsupported(
                        format!("join {other:?}")
                            .chars()
                            .take(40)
                            .collect::<String>(),
                    ))
                }
            };
            let mut conj = Vec::new();
            // The right side's USING columns, merged into the left side's.
            let mut merged = Vec::new();
            match constraint {
                ast::JoinConstraint::On(e) => split_conjuncts(&e, &mut conj),
                ast::JoinConstraint::Using(ids) => {
                    for id in ids {
                        let (lpos, lq) = scope
                            .cols
                            .iter()
                            .enumerate()
                            .find(|(_, c)| c.name.eq_ignore_ascii_case(&id.value))
                            .map(|(i, c)| (i, c.qualifier.clone()))
                            .ok_or_else(|| {
                                DataflowError::UnknownColumn(id.value.clone(), "from clause".into())
                            })?;
                        let rq = rscope
                            .cols
                            .first()
                            .map(|c| c.qualifier.clone())
                            .unwrap_or_default();
                        merged.extend(
                            rscope
                                .cols
                                .iter()
                                .position(|c| c.name.eq_ignore_ascii_case(&id.value))
                                .map(|i| (lpos, scope.cols.len() + i)),
                        );
                        conj.push(ast::Expr::BinaryOp {
                            left: Box::new(ast::Expr::CompoundIdentifier(vec![
                                ast::Ident::new(lq),
                                id.clone(),
                            ])),
                            op: ast::BinaryOperator::Eq,
                            right: Box::new(ast::Expr::CompoundIdentifier(vec![
                                ast::Ident::new(rq),
                                id.clone(),
                            ])),
                        });
                    }
                }
                ast::JoinConstraint::None => {
                    // CROSS JOIN / JOIN without ON: take equalities from WHERE.
                    if kind == JoinKind::Inner {
                        let (mut taken, rest): (Vec<ast::Expr>, Vec<ast::Expr>) = where_conj
                            .drain(..)
                            .partition(|c| links(c, &scope, &rscope));
                        *where_conj = rest;
                        conj.append(&mut taken);
                    }
                }
                ast::JoinConstraint::Natural => return Err(unsupported("NATURAL JOIN")),
            }
            if kind == JoinKind::Inner {
                // An inner join's ON is part of WHERE: parameters there can
                // key the view (`JOIN b ON b.a_id = a.id AND b.user_id = ?`).
                // Qualified columns only: a bare name could become ambiguous
                // once later tables join in.
                let (params, rest): (Vec<ast::Expr>, Vec<ast::Expr>) = conj
                    .into_iter()
                    .partition(|c| has_placeholder(c) && columns_qualified(c));
                where_conj.extend(params);
                conj = rest;
            }
            let (n, mut s) = self.join(node, scope, rnode, rscope, kind, conj)?;
            s.coalesced.extend(merged);
            node = n;
            scope = s;
        }
        Ok((node, scope))
    }

    pub(super) fn join(
        &self,
        left: LNode,
        ls: Scope,
        right: LNode,
        rs: Scope,
        kind: JoinKind,
        conj: Vec<ast::Expr>,
    ) -> Result<(LNode, Scope)> {
        let mut lcols = Vec::new();
        let mut rcols = Vec::new();
        let mut rest = Vec::new();
        for c in conj {
            if let ast::Expr::BinaryOp {
                left: a,
                op: ast::BinaryOperator::Eq,
                right: b,
            } = &c
            {
                if let (Some(x), Some(y)) = (as_column(a), as_column(b)) {
                    // A text column equals a binary one byte for byte, which
                    // no hash of the two kinds of value agrees on: such a
                    // pair is compared by the filter after the join.
                    let keyable = |l: usize, r: usize| {
                        let (lt, rt) = (&ls.cols[l].ty, &rs.cols[r].ty);
                        !(lt.is_binary() && rt.is_text() || lt.is_text() && rt.is_binary())
                    };
                    match (ls.resolve(x), rs.resolve(y), ls.resolve(y), rs.resolve(x)) {
                        (Ok(l), Ok(r), Err(_), Err(_)) if keyable(l, r) => {
                            lcols.push(l);
                            rcols.push(r);
                            continue;
                        }
                        (Err(_), Err(_), Ok(l), Ok(r)) if keyable(l, r) => {
                            lcols.push(l);
                            rcols.push(r);
                            continue;
                        }
                        _ => {}
                    }
                }
            }
            rest.push(c);
        }
        // No equality: a cross join (every left row meets every right row,
        // key []), the conditions filtering after it. Each change to one
        // side is joined with the whole other side.
        let mut right = right;
        let mut scope = ls.clone();
        let mut rscope = rs.clone();
        if kind == JoinKind::Left {
            for c in &mut rscope.cols {
                c.nullable = true;
            }
        }
        scope.cols.extend(rscope.cols.iter().cloned());
        let mut post = Vec::new();
        let mut left_on = Vec::new();
        for c in rest {
            if kind == JoinKind::Left {
                // A name both sides have is ambiguous, though the right
                // side alone would take it.
                if let Err(e @ DataflowError::AmbiguousColumn(..)) = ExprCx::row(&scope).compile(&c)
                {
                    return Err(e);
                }
                // Conditions on the right side alone filter it before the join.
                let cx = ExprCx::row(&rs);
                match cx.compile(&c) {
                    Ok(e) if !has_placeholder(&c) && !e.is_volatile() => {
                        let colls = right.colls.clone();
                        right = LNode {
                            op: LOp::Filter(e),
                            inputs: vec![right],
                            colls,
                        };
                    }
                    Err(DataflowError::UnknownColumn(..)) => left_on.push(c),
                    Err(e) => return Err(e),
                    Ok(_) => return Err(volatile("parameters or NOW()/RAND() in LEFT JOIN ON")),
                }
            } else {
                post.push(c);
            }
        }
        if !left_on.is_empty() {
            let mut conds = Vec::new();
            for c in &left_on {
                if has_placeholder(c) || has_subquery(c) {
                    return Err(unsupported("parameters or subqueries in LEFT JOIN ON"));
                }
                conds.push(stable(ExprCx::row(&scope).compile(c)?)?);
            }
            let node = left_join_on(left, right, lcols, rcols, conds);
            return Ok((node, scope));
        }
        let mut colls = left.colls.clone();
        colls.extend(right.colls.iter().copied());
        let mut node = LNode {
            op: LOp::Join {
                kind,
                left_cols: lcols,
                right_cols: rcols,
            },
            inputs: vec![left, right],
            colls,
        };
        for c in post {
            if has_placeholder(&c) || has_subquery(&c) {
                return Err(unsupported("parameters or subqueries in JOIN ON"));
            }
            let e = stable(ExprCx::row(&scope).compile(&c)?)?;
            let colls = node.colls.clone();
            node = LNode {
                op: LOp::Filter(e),
                inputs: vec![node],
                colls,
            };
        }
        Ok((node, scope))
    }

    pub(super) fn plan_from(
        &self,
        from: &[ast::TableWithJoins],
        where_conj: &mut Vec<ast::Expr>,
    ) -> Result<(LNode, Scope)> {
        if from.iter().map(tables_joined).sum::<usize>() > MAX_TABLES_JOINED {
            return Err(DataflowError::TooManyTables);
        }
        let (mut node, mut scope) = self.plan_from_item(&from[0], where_conj)?;
        for item in &from[1..] {
            let (rn, rs) = self.plan_from_item(item, where_conj)?;
            let (taken, rest): (Vec<ast::Expr>, Vec<ast::Expr>) =
                where_conj.drain(..).partition(|c| links(c, &scope, &rs));
            *where_conj = rest;
            let (n, s) = self.join(node, scope, rn, rs, JoinKind::Inner, taken)?;
            node = n;
            scope = s;
        }
        Ok((node, scope))
    }
}

/// MariaDB's `MAX_TABLES`: the most tables one SELECT's FROM clause may
/// join (1116 past it).
const MAX_TABLES_JOINED: usize = 61;

/// The tables `item` joins, as MariaDB counts them against
/// [`MAX_TABLES_JOINED`]: a parenthesized join's tables one by one, a
/// derived table (or table function) as one.
fn tables_joined(item: &ast::TableWithJoins) -> usize {
    let factor = |tf: &ast::TableFactor| match tf {
        ast::TableFactor::NestedJoin {
            table_with_joins, ..
        } => tables_joined(table_with_joins),
        _ => 1,
    };
    factor(&item.relation)
        + item
            .joins
            .iter()
            .map(|j| factor(&j.relation))
            .sum::<usize>()
}

/// `L LEFT JOIN R ON <equalities> AND <conditions on both sides>`, from
/// maintained operators: J = the inner join filtered by `conds`; the left
/// rows with no row in J (anti-join on an exact, NULL-free encoding of all
/// their columns) padded with NULLs; the union of both.
pub(super) fn left_join_on(
    left: LNode,
    right: LNode,
    lcols: Vec<usize>,
    rcols: Vec<usize>,
    conds: Vec<Expr>,
) -> LNode {
    let lw = left.width();
    let rw = right.width();
    let mut colls = left.colls.clone();
    colls.extend(right.colls.iter().copied());
    let mut matched = LNode {
        op: LOp::Join {
            kind: JoinKind::Inner,
            left_cols: lcols,
            right_cols: rcols,
        },
        inputs: vec![left.clone(), right],
        colls: colls.clone(),
    };
    for e in conds {
        matched = LNode {
            op: LOp::Filter(e),
            inputs: vec![matched],
            colls: colls.clone(),
        };
    }
    // Identity of a left row: (col IS NULL, IFNULL(col, 0)) per column.
    let identity: Vec<Expr> = (0..lw)
        .flat_map(|i| {
            [
                Expr::IsNull {
                    expr: Box::new(Expr::Column(i)),
                    negated: false,
                },
                Expr::Call(
                    crate::expr::Func::IfNull,
                    vec![Expr::Column(i), Expr::Literal(Value::Int(0))],
                ),
            ]
        })
        .collect();
    let idw = identity.len();
    let id_colls = vec![Collation::Binary; idw];
    let matched_ids = LNode {
        op: LOp::Aggregate {
            ngroup: idw,
            aggs: vec![],
            scalar: false,
        },
        inputs: vec![LNode {
            op: LOp::Project(identity.clone()),
            inputs: vec![matched.clone()],
            colls: id_colls.clone(),
        }],
        colls: id_colls.clone(),
    };
    let mut lid_colls = left.colls.clone();
    lid_colls.extend(id_colls);
    let left_ids = LNode {
        op: LOp::Project((0..lw).map(Expr::Column).chain(identity).collect()),
        inputs: vec![left],
        colls: lid_colls.clone(),
    };
    let unmatched = LNode {
        op: LOp::Join {
            kind: JoinKind::Anti,
            left_cols: (lw..lw + idw).collect(),
            right_cols: (0..idw).collect(),
        },
        inputs: vec![left_ids, matched_ids],
        colls: lid_colls,
    };
    let padded = LNode {
        op: LOp::Project(
            (0..lw)
                .map(Expr::Column)
                .chain(std::iter::repeat_n(Expr::Literal(Value::Null), rw))
                .collect(),
        ),
        inputs: vec![unmatched],
        colls: colls.clone(),
    };
    LNode {
        op: LOp::Union,
        inputs: vec![matched, padded],
        colls,
    }
}
