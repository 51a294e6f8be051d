//! Set operations: UNION [ALL], INTERSECT and EXCEPT, and the ORDER BY and
//! LIMIT over their result.

use ladle_common::{Collation, SqlType, Value};
use sqlparser::ast;

use super::expr::{derived_collation, unsupported, volatile, ExprCx};
use super::query::Planner;
use super::relation::{rel_scope, ColInfo, Rel};
use super::syntax::{as_column, count_of, query_of};
use crate::expr::{type_chars, unify_types, CastType, Expr};
use crate::ops::{AggKind, AggSpec};
use crate::plan::{LNode, LOp, PlannedView};
use crate::{DataflowError, OutputColumn, Result};

impl Planner<'_> {
    /// A set operation tree: UNION [ALL] nests as written, so
    /// `A UNION B UNION ALL C` is `(A UNION B) UNION ALL C`.
    pub(super) fn set_expr(&self, e: &ast::SetExpr) -> Result<Rel> {
        match e {
            ast::SetExpr::SetOperation {
                op: ast::SetOperator::Union,
                set_quantifier,
                left,
                right,
            } => {
                let l = self.set_expr(left)?;
                let r = self.set_expr(right)?;
                let cols = set_operation_columns(&l, &r)?;
                let (l, r) = (as_result_types(l, &cols), as_result_types(r, &cols));
                let width = cols.len();
                let colls: Vec<Collation> = cols.iter().map(|c| c.coll).collect();
                let mut node = LNode {
                    op: LOp::Union,
                    inputs: vec![l.node, r.node],
                    colls: colls.clone(),
                };
                if !matches!(set_quantifier, ast::SetQuantifier::All) {
                    node = LNode {
                        op: LOp::Aggregate {
                            ngroup: width,
                            aggs: vec![],
                            scalar: false,
                        },
                        inputs: vec![node],
                        colls,
                    };
                }
                Ok(Rel { node, cols })
            }
            ast::SetExpr::SetOperation {
                op: op @ (ast::SetOperator::Intersect | ast::SetOperator::Except),
                set_quantifier,
                left,
                right,
            } => {
                if !matches!(
                    set_quantifier,
                    ast::SetQuantifier::None | ast::SetQuantifier::Distinct
                ) {
                    return Err(unsupported(format!("{op} {set_quantifier}")));
                }
                let l = self.set_expr(left)?;
                let r = self.set_expr(right)?;
                let cols = set_operation_columns(&l, &r)?;
                let (l, r) = (as_result_types(l, &cols), as_result_types(r, &cols));
                let node = intersect_or_except(
                    l.node,
                    r.node,
                    cols.iter().map(|c| c.coll).collect(),
                    matches!(op, ast::SetOperator::Intersect),
                );
                Ok(Rel { node, cols })
            }
            other => self.relation(&query_of(other.clone())),
        }
    }

    pub(super) fn union(&self, q: &ast::Query) -> Result<PlannedView> {
        let rel = self.set_expr(&q.body)?;
        let width = rel.cols.len();
        let cols = rel.cols.clone();
        let colls: Vec<Collation> = cols.iter().map(|c| c.coll).collect();
        // The union's columns, unqualified, for ORDER BY expressions.
        let (mut node, scope) = rel_scope(rel, "");
        // ORDER BY / LIMIT over the union's columns; an expression over
        // them (Django's `other IS NULL, other` for NULLS LAST) is
        // computed into a hidden column after the union's.
        let mut order = Vec::new();
        let mut hidden: Vec<Expr> = Vec::new();
        let mut sort_colls = colls.clone();
        if let Some(ob) = &q.order_by {
            for o in &ob.exprs {
                let pos = match &o.expr {
                    ast::Expr::Value(ast::Value::Number(n, _)) => {
                        n.parse::<usize>().ok().and_then(|p| p.checked_sub(1))
                    }
                    e => as_column(e).and_then(|ids| ids.last()).and_then(|id| {
                        cols.iter()
                            .position(|c| c.name.eq_ignore_ascii_case(&id.value))
                    }),
                };
                let pos = match pos.filter(|p| *p < width) {
                    Some(p) => p,
                    None => {
                        let x = ExprCx::row(&scope).compile(&o.expr)?;
                        if x.is_volatile() || x.has_params() {
                            return Err(volatile("NOW()/RAND()/parameters in ORDER BY"));
                        }
                        let coll =
                            derived_collation(&x, |c| colls.get(c).copied().unwrap_or_default());
                        hidden.push(x);
                        sort_colls.push(coll);
                        width + hidden.len() - 1
                    }
                };
                order.push((pos, o.asc == Some(false), sort_colls[pos]));
            }
        }
        if !hidden.is_empty() {
            node = LNode {
                op: LOp::Project((0..width).map(Expr::Column).chain(hidden).collect()),
                inputs: vec![node],
                colls: sort_colls,
            };
        }
        let columns = cols
            .iter()
            .map(|c| OutputColumn {
                name: c.name.clone(),
                table: c.table.clone(),
                origin: c.origin.clone(),
                ty: c.ty.clone(),
                nullable: c.nullable,
                decimals: None,
                stored: c.stored,
            })
            .collect();
        Ok(PlannedView {
            plan: node,
            key: vec![],
            key_slots: vec![],
            key_names: vec![],
            key_types: vec![],
            order,
            read_filter: None,
            range: None,
            output: (0..width).map(Expr::Column).collect(),
            columns,
            limit: q.limit.as_ref().map(count_of).transpose()?,
            offset: q.offset.as_ref().map(|o| count_of(&o.value)).transpose()?,
            empty_default: None,
            dedup: false,
            finish: None,
            sorts_all_rows: false,
        })
    }
}

/// The result columns of a set operation (UNION, INTERSECT, EXCEPT): each
/// the type that holds both sides' values, without table provenance.
pub(super) fn set_operation_columns(l: &Rel, r: &Rel) -> Result<Vec<ColInfo>> {
    if r.cols.len() != l.cols.len() {
        return Err(DataflowError::BadArgument(
            "The used SELECT statements have a different number of columns".into(),
        ));
    }
    let mut cols = l.cols.clone();
    for (i, c) in cols.iter_mut().enumerate() {
        let tys = [
            (l.cols[i].ty.clone(), l.cols[i].nullable),
            (r.cols[i].ty.clone(), r.cols[i].nullable),
        ];
        let (t, n) = set_operation_type(&tys);
        c.ty = t;
        c.nullable = n;
        c.table = String::new();
        // MariaDB sends no key flags for a UNION's columns, and holds its
        // rows in a temporary table.
        c.origin = None;
        c.stored = true;
        if c.ty.is_text() {
            c.coll = Collation::GeneralCi;
        }
    }
    Ok(cols)
}

/// The type of a set operation's column whose sides have types `tys`
/// (type, nullable): MariaDB holds the rows in a temporary table, so BIT
/// sides make a BIT as wide as the widest (sent as its bytes), and BIT
/// beside any other type a binary string of the BIT's digits (`b'1000001'
/// UNION 5` is `'65'`, `'5'`); else the common type of [`unify_types`].
pub(super) fn set_operation_type(tys: &[(SqlType, bool)]) -> (SqlType, bool) {
    let nullable = tys.iter().any(|t| t.1);
    // A NULL literal's side takes any type.
    let typed = || tys.iter().filter(|t| !(t.1 && t.0 == SqlType::VarChar(0)));
    let bit_width = |t: &SqlType| match t {
        SqlType::Bit(n) => Some(*n),
        _ => None,
    };
    if !typed().any(|t| bit_width(&t.0).is_some()) {
        return unify_types(tys);
    }
    if let Some(widths) = typed()
        .map(|t| bit_width(&t.0))
        .collect::<Option<Vec<u8>>>()
    {
        return (
            SqlType::Bit(widths.into_iter().max().unwrap_or(1)),
            nullable,
        );
    }
    let chars = typed().map(|t| type_chars(&t.0)).max().unwrap_or(1);
    (SqlType::VarBinary(chars), nullable)
}

/// One side of a set operation as the result's column types hold it: a
/// DATE column that is DATETIME in the result (`SELECT d ... UNION SELECT
/// dt ...`) converted to midnight, so a DATE equals its midnight in a
/// distinct UNION, as in MySQL; a BIT column that is a binary string in
/// the result, its digits (see [`set_operation_type`]).
pub(super) fn as_result_types(side: Rel, cols: &[ColInfo]) -> Rel {
    let conversion = |i: usize| match (&side.cols[i].ty, &cols[i].ty) {
        (SqlType::Date, SqlType::DateTime { .. }) => Some(CastType::DateTime),
        (SqlType::Bit(_), SqlType::VarBinary(_)) => Some(CastType::Binary),
        _ => None,
    };
    if !(0..cols.len()).any(|i| conversion(i).is_some()) {
        return side;
    }
    let exprs = (0..cols.len())
        .map(|i| match conversion(i) {
            Some(to) => Expr::Cast(Box::new(Expr::Column(i)), to),
            None => Expr::Column(i),
        })
        .collect();
    let colls = side.node.colls.clone();
    let node = LNode {
        op: LOp::Project(exprs),
        inputs: vec![side.node],
        colls,
    };
    Rel {
        node,
        cols: side.cols,
    }
}

/// `L INTERSECT R` / `L EXCEPT R` (distinct): both sides' rows tagged 1
/// and 2, grouped by all their columns (so NULLs compare equal, as in
/// MariaDB's set operations) with the group's smallest and largest tag;
/// INTERSECT keeps the groups with both tags, EXCEPT those with only 1.
pub(super) fn intersect_or_except(
    left: LNode,
    right: LNode,
    colls: Vec<Collation>,
    intersect: bool,
) -> LNode {
    let width = colls.len();
    let mut tagged_colls = colls.clone();
    tagged_colls.push(Collation::Binary);
    let tag = |node: LNode, t: i64| LNode {
        op: LOp::Project(
            (0..width)
                .map(Expr::Column)
                .chain([Expr::Literal(Value::Int(t))])
                .collect(),
        ),
        inputs: vec![node],
        colls: tagged_colls.clone(),
    };
    let both = LNode {
        op: LOp::Union,
        inputs: vec![tag(left, 1), tag(right, 2)],
        colls: tagged_colls.clone(),
    };
    let mut group_colls = colls.clone();
    group_colls.extend([Collation::Binary, Collation::Binary]);
    let groups = LNode {
        op: LOp::Aggregate {
            ngroup: width,
            aggs: vec![
                AggSpec::new(AggKind::Min, width),
                AggSpec::new(AggKind::Max, width),
            ],
            scalar: false,
        },
        inputs: vec![both],
        colls: group_colls.clone(),
    };
    let eq = |c: usize, v: i64| Expr::Cmp {
        op: crate::expr::CmpOp::Eq,
        left: Box::new(Expr::Column(c)),
        right: Box::new(Expr::Literal(Value::Int(v))),
        collation: Collation::Binary,
    };
    let keep = if intersect {
        Expr::Logic(
            crate::expr::LogicOp::And,
            Box::new(eq(width, 1)),
            Box::new(eq(width + 1, 2)),
        )
    } else {
        eq(width + 1, 1)
    };
    LNode {
        op: LOp::Project((0..width).map(Expr::Column).collect()),
        inputs: vec![LNode {
            op: LOp::Filter(keep),
            inputs: vec![groups],
            colls: group_colls,
        }],
        colls,
    }
}
