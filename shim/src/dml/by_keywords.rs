//! The UPDATE and DELETE forms the SQL parser does not read, routed here
//! by their first words (`DELETE [LOW_PRIORITY] [QUICK] [IGNORE]`,
//! `DELETE ... RETURNING` after ORDER BY/LIMIT,
//! `UPDATE [LOW_PRIORITY] [IGNORE] ... ORDER BY/LIMIT`, multi-table
//! UPDATE), and a parsed UPDATE sent to the one-table or multi-table path.

use sqlparser::ast::{self, Statement};
use sqlparser::parser::Parser;
use sqlparser::tokenizer::Token;

use crate::error::{Result, ShimError, WireError};
use crate::exec::Engine;
use crate::output::Output;
use crate::session::Session;
use crate::sqltext::{parse, parse_select_items};

impl Engine {
    /// `DELETE [LOW_PRIORITY] [QUICK] [IGNORE] ...` and `DELETE ... [ORDER
    /// BY ...] [LIMIT n] RETURNING ...`: the SQL parser reads a modifier as
    /// a table's name, wants RETURNING before ORDER BY, and reads it as the
    /// table's alias when there is no WHERE (`None`: neither, left to the
    /// parser).
    pub(crate) fn delete_returning(
        &self,
        s: &mut Session,
        t: &[Token],
    ) -> std::result::Result<Option<Output>, WireError> {
        // `DELETE [LOW_PRIORITY] [QUICK] [IGNORE] FROM t`: sqlparser would
        // read the modifiers as a table's name.
        let (t, ignore) = super::strip_delete_modifiers(t);
        let Some((base, items)) = super::split_returning(&t) else {
            if !matches!(t, std::borrow::Cow::Owned(_)) {
                return Ok(None);
            }
            let stmt = parse(&crate::tokens::render_tokens(&t))?.into_iter().next();
            let Some(Statement::Delete(d)) = stmt else {
                return Err(ShimError::Parse("near DELETE".into()).into());
            };
            return Ok(Some(super::delete_ignore(self, s, d, ignore)?));
        };
        if ignore {
            let refused = "RETURNING with IGNORE".to_string();
            return Err(ShimError::Unsupported(refused).into());
        }
        let stmt = parse(&base)?.into_iter().next();
        let Some(Statement::Delete(mut d)) = stmt else {
            return Err(ShimError::Parse("near RETURNING".into()).into());
        };
        d.returning = Some(parse_select_items(&items)?);
        Ok(Some(self.statement(s, Statement::Delete(d))?))
    }

    /// `UPDATE [LOW_PRIORITY] [IGNORE] ... [ORDER BY ...] [LIMIT n]` and
    /// multi-table UPDATE: the forms the SQL parser does not read (`None`:
    /// a plain UPDATE, left to the parser).
    pub(crate) fn update_by_keywords(
        &self,
        s: &mut Session,
        t: &[Token],
    ) -> std::result::Result<Option<Output>, WireError> {
        // `UPDATE [LOW_PRIORITY] [IGNORE] t ...`: sqlparser would read
        // IGNORE as the table's name.
        let (t, ignore) = super::strip_update_modifiers(t);
        if super::is_multi_table_update(&t) {
            let update = super::parse_multi_update(&crate::tokens::render_tokens(&t))?;
            return Ok(Some(super::multi_update(self, s, update, ignore)?));
        }
        let (base, order, limit) = match super::split_update_order_limit(&t) {
            Some(split) => split,
            None if ignore => (crate::tokens::render_tokens(&t), None, None),
            None => return Ok(None),
        };
        let stmt = parse(&base)?.into_iter().next();
        let Some(Statement::Update {
            table,
            assignments,
            from: None,
            selection,
            ..
        }) = stmt
        else {
            return Err(
                ShimError::Unsupported("this form of UPDATE ... ORDER BY/LIMIT".into()).into(),
            );
        };
        let order_by = match order {
            Some(text) => {
                let mut parser = crate::sqltext::parser(&text)?;
                let mut order = crate::sqltext::contain_parser_panic(|| {
                    parser.parse_comma_separated(Parser::parse_order_by_expr)
                })?;
                ladle_dataflow::bound_depth(&mut order).map_err(|_| ShimError::TooDeep)?;
                order
            }
            None => Vec::new(),
        };
        let limit = match limit {
            Some(text) => {
                let x = crate::sqltext::parse_expr(&text)?;
                match self.eval_constant(s, &x)?.as_i64() {
                    Some(n) if n >= 0 => Some(n as u64),
                    _ => return Err(ShimError::WrongArguments("LIMIT".into()).into()),
                }
            }
            None => None,
        };
        let clauses = super::UpdateClauses {
            order_by: &order_by,
            limit,
            ignore,
        };
        Ok(Some(super::update(
            self,
            s,
            table,
            assignments,
            selection,
            clauses,
        )?))
    }

    /// A parsed UPDATE: of one table, or of the tables its JOINs name.
    pub(crate) fn parsed_update(
        &self,
        s: &mut Session,
        table: ast::TableWithJoins,
        assignments: Vec<ast::Assignment>,
        selection: Option<ast::Expr>,
    ) -> Result<Output> {
        if table.joins.is_empty() {
            return super::update(self, s, table, assignments, selection, Default::default());
        }
        let update = super::MultiUpdate {
            tables: vec![table],
            assignments,
            selection,
        };
        super::multi_update(self, s, update, false)
    }
}
