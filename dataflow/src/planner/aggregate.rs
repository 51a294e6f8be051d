//! Aggregate functions: each call in a select list, HAVING or ORDER BY to
//! an [`AggSpec`] over its argument column.

use ladle_common::{Collation, SqlType, Value};
use sqlparser::ast;

use super::expr::{aggregate_name, derived_collation, unsupported, ExprCx};
use super::query::Planner;
use super::relation::{stable, t_is_text};
use super::syntax::{has_placeholder, has_subquery};
use crate::expr::Expr;
use crate::ops::{AggKind, AggSpec};
use crate::{DataflowError, Result};

impl Planner<'_> {
    pub(super) fn agg_spec(
        &self,
        a: &ast::Expr,
        cx: &ExprCx<'_>,
        out: usize,
    ) -> Result<(AggSpec, Expr, (SqlType, bool, Collation))> {
        let ast::Expr::Function(f) = a else {
            return Err(DataflowError::Internal("not an aggregate".into()));
        };
        let name = aggregate_name(a).unwrap_or_default();
        if f.over.is_some() || f.filter.is_some() {
            return Err(unsupported("window aggregates"));
        }
        let ast::FunctionArguments::List(list) = &f.args else {
            return Err(DataflowError::BadArgument(format!(
                "{name} needs an argument"
            )));
        };
        let distinct = matches!(
            list.duplicate_treatment,
            Some(ast::DuplicateTreatment::Distinct)
        );
        let mut separator = ",".to_string();
        let mut desc = false;
        for clause in &list.clauses {
            match clause {
                ast::FunctionArgumentClause::Separator(v) => {
                    separator = super::expr::literal(v)?.to_string()
                }
                ast::FunctionArgumentClause::OrderBy(obs)
                    if name == "group_concat" && obs.len() == 1 =>
                {
                    let arg = list
                        .args
                        .first()
                        .map(|a| a.to_string().to_ascii_lowercase());
                    if arg != Some(obs[0].expr.to_string().to_ascii_lowercase()) {
                        return Err(unsupported("GROUP_CONCAT ordered by another expression"));
                    }
                    desc = obs[0].asc == Some(false);
                }
                _ => return Err(unsupported(format!("{name} clause {clause}"))),
            }
        }
        if list.args.len() != 1 {
            return Err(unsupported(format!(
                "{name} with {} arguments",
                list.args.len()
            )));
        }
        let arg_ast = match &list.args[0] {
            ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Wildcard)
                if name == "count" && !distinct =>
            {
                let spec = AggSpec::new(AggKind::CountStar, out);
                return Ok((
                    spec,
                    Expr::Literal(Value::Int(1)),
                    (crate::expr::int_of_width(21), false, Collation::Binary),
                ));
            }
            ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => e,
            other => return Err(unsupported(format!("{name}({other})"))),
        };
        if has_placeholder(arg_ast) || has_subquery(arg_ast) {
            return Err(unsupported("parameters or subqueries in an aggregate"));
        }
        let arg = stable(cx.compile(arg_ast)?)?;
        let ftypes = cx.frame_types();
        let (aty, nullable) = arg.result_type(&ftypes);
        let coll = derived_collation(&arg, |c| {
            cx.scope
                .cols
                .get(c)
                .map(|c| c.collation)
                .unwrap_or_default()
        });
        let kind = match name.as_str() {
            // MySQL counts a never-NULL argument without evaluating it (so
            // a value that overflowed in a view is not an error there).
            "count" if !distinct && !nullable => AggKind::CountStar,
            "count" => AggKind::Count,
            "sum" => AggKind::Sum,
            "avg" => AggKind::Avg,
            "min" => AggKind::Min,
            "max" => AggKind::Max,
            _ => AggKind::GroupConcat,
        };
        let mut spec = AggSpec::new(kind, out);
        spec.distinct = distinct;
        spec.separator = separator;
        spec.desc = desc;
        spec.collation = if t_is_text(&aty) {
            coll
        } else {
            Collation::Binary
        };
        spec.float = matches!(aty, SqlType::Float | SqlType::Double) || t_is_text(&aty);
        spec.scale = match aty {
            SqlType::Decimal { scale, .. } => u32::from(scale),
            _ => 0,
        };
        let ty = match kind {
            // MySQL's COUNT is a BIGINT 21 characters wide.
            AggKind::Count | AggKind::CountStar => {
                (crate::expr::int_of_width(21), false, Collation::Binary)
            }
            AggKind::Sum | AggKind::Avg => {
                if spec.float {
                    (SqlType::Double, true, Collation::Binary)
                } else {
                    // MySQL's precision: the argument's digits and 22 more
                    // for SUM, 4 more (as the scale) for AVG.
                    let digits = match &aty {
                        SqlType::Decimal { precision, .. } => u32::from(*precision),
                        t => crate::expr::type_chars(t).saturating_sub(1).max(1),
                    };
                    let (more, scale) = match kind {
                        AggKind::Avg => (4, spec.scale as u8 + 4),
                        _ => (22, spec.scale as u8),
                    };
                    (
                        SqlType::Decimal {
                            precision: (digits + more).min(65) as u8,
                            scale: scale.min(30),
                        },
                        true,
                        Collation::Binary,
                    )
                }
            }
            AggKind::Min | AggKind::Max => (aty.clone(), true, spec.collation),
            AggKind::GroupConcat => (SqlType::Text(65535), true, Collation::GeneralCi),
        };
        Ok((spec, arg, ty))
    }
}
