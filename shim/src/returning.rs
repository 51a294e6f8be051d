//! `INSERT ... RETURNING` and `DELETE ... RETURNING` (MariaDB's): the
//! statement answers with a result set, one row per row it inserted or
//! deleted, holding the listed expressions evaluated over that row. As in
//! MariaDB, INSERT IGNORE lists only the rows it wrote, REPLACE the new
//! rows, and ON DUPLICATE KEY UPDATE each row as the statement left it
//! (inserted, updated, or found unchanged). (`UPDATE ... RETURNING` is a
//! syntax error in MariaDB and refused here.)

use std::sync::Arc;

use ladle_common::{Row, TableSchema};
use ladle_dataflow::{
    compile_row_expr, BaseColumn, DataflowError, OutputColumn, ResultRows, RowExpr,
};
use sqlparser::ast::{self, SelectItem};

use crate::error::{Result, ShimError};
use crate::output::Output;

/// A compiled RETURNING list over one table's rows.
pub struct Returning {
    columns: Vec<OutputColumn>,
    exprs: Vec<RowExpr>,
    /// Each expression as written (`None`: a column of `*`), for the text
    /// of its 1690.
    written: Vec<Option<ast::Expr>>,
    schema: Arc<TableSchema>,
}

impl Returning {
    /// Compiles `items` (`*`, `t.*`, expressions with or without alias)
    /// against `schema`, before the statement changes anything, so a bad
    /// list fails it whole.
    pub fn compile(schema: &TableSchema, items: &[SelectItem]) -> Result<Returning> {
        let mut columns = Vec::new();
        let mut exprs = Vec::new();
        let mut written = Vec::new();
        for item in items {
            let (expr, alias) = match item {
                SelectItem::Wildcard(_) => {
                    Self::all_columns(schema, &mut columns, &mut exprs)?;
                    written.resize(exprs.len(), None);
                    continue;
                }
                SelectItem::QualifiedWildcard(name, _) => {
                    let named = crate::sqltext::last_part(name);
                    if !named.eq_ignore_ascii_case(&schema.name) {
                        return Err(ShimError::Dataflow(
                            ladle_dataflow::DataflowError::UnknownTable(named),
                        ));
                    }
                    Self::all_columns(schema, &mut columns, &mut exprs)?;
                    written.resize(exprs.len(), None);
                    continue;
                }
                SelectItem::UnnamedExpr(e) => (e, None),
                SelectItem::ExprWithAlias { expr, alias } => (expr, Some(alias.value.clone())),
            };
            let compiled = compile_row_expr(expr, Some(schema))?;
            let (ty, nullable) = compiled.result_type(schema);
            let column = match expr {
                ast::Expr::Identifier(_) | ast::Expr::CompoundIdentifier(_) => {
                    let name = match expr {
                        ast::Expr::CompoundIdentifier(ids) => ids.last().map(|i| i.value.clone()),
                        ast::Expr::Identifier(i) => Some(i.value.clone()),
                        _ => None,
                    }
                    .unwrap_or_default();
                    // Passed through unchanged: described by its place in
                    // the table (keys, AUTO_INCREMENT), as a SELECT's is.
                    let origin = schema
                        .columns
                        .iter()
                        .position(|c| c.name.eq_ignore_ascii_case(&name))
                        .map(|column| BaseColumn {
                            table: Arc::new(schema.clone()),
                            column,
                        });
                    OutputColumn {
                        name: alias.unwrap_or(name),
                        table: schema.name.clone(),
                        origin,
                        ty,
                        nullable,
                        decimals: None,
                        stored: false,
                    }
                }
                _ => OutputColumn {
                    name: alias.unwrap_or_else(|| ladle_dataflow::expr_column_name(expr)),
                    table: String::new(),
                    origin: None,
                    ty,
                    nullable,
                    decimals: None,
                    stored: false,
                },
            };
            columns.push(column);
            exprs.push(compiled);
            written.push(Some(expr.clone()));
        }
        Ok(Returning {
            columns,
            exprs,
            written,
            schema: Arc::new(schema.clone()),
        })
    }

    fn all_columns(
        schema: &TableSchema,
        columns: &mut Vec<OutputColumn>,
        exprs: &mut Vec<RowExpr>,
    ) -> Result<()> {
        let table = Arc::new(schema.clone());
        for (column, c) in schema.columns.iter().enumerate() {
            if c.is_hidden() {
                continue;
            }
            let id = ast::Expr::Identifier(ast::Ident::new(c.name.clone()));
            exprs.push(compile_row_expr(&id, Some(schema))?);
            columns.push(OutputColumn {
                name: c.name.clone(),
                table: schema.name.clone(),
                origin: Some(BaseColumn {
                    table: Arc::clone(&table),
                    column,
                }),
                ty: c.ty.clone(),
                nullable: c.nullable,
                decimals: None,
                stored: false,
            });
        }
        Ok(())
    }

    /// The result set for `rows` (as the table holds them: coerced to its
    /// column types).
    pub fn output(&self, rows: &[Row]) -> Result<Output> {
        let listed = rows.iter().map(|r| self.values(r)).collect::<Result<_>>()?;
        Ok(self.result(listed))
    }

    /// The values listed for `row` (as the table holds it).
    pub fn values(&self, row: &Row) -> Result<Row> {
        Ok(self
            .exprs
            .iter()
            .zip(&self.written)
            .map(|(x, w)| {
                x.eval(row)
                    .map_err(|e| self.out_of_range_in(e, w.as_ref(), row))
            })
            .collect::<std::result::Result<Row, _>>()?)
    }

    /// 1690's text as MariaDB's: `BIGINT value is out of range in
    /// '`db`.`t`.`v` + 1'`, naming the innermost operation of `written`
    /// that overflows over `row`, its columns qualified by database and
    /// table. (Only operators, literals and columns are written so.)
    fn out_of_range_in(
        &self,
        e: DataflowError,
        written: Option<&ast::Expr>,
        row: &Row,
    ) -> DataflowError {
        match (e, written) {
            (DataflowError::OutOfRange(m), Some(w)) if !m.contains(" in '") => {
                match crate::out_of_range::failing_operation(w, &self.schema, row) {
                    Some(text) => DataflowError::OutOfRange(format!("{m} in '{text}'")),
                    None => DataflowError::OutOfRange(m),
                }
            }
            (e, _) => e,
        }
    }

    /// The result set of rows whose [`Self::values`] were taken already.
    pub fn result(&self, listed: Vec<Row>) -> Output {
        Output::Rows {
            columns: self.columns.clone(),
            rows: ResultRows::from(listed),
        }
    }
}
