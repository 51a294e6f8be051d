//! `INSERT ... RETURNING` and `DELETE ... RETURNING` (MariaDB's): the
//! statement answers with a result set, one row per row it inserted or
//! deleted, holding the listed expressions evaluated over that row. As in
//! MariaDB, INSERT IGNORE lists only the rows it wrote, REPLACE the new
//! rows, and ON DUPLICATE KEY UPDATE each row as the statement left it
//! (inserted, updated, or found unchanged). (`UPDATE ... RETURNING` is a
//! syntax error in MariaDB and refused here.)

use std::ops::ControlFlow;
use std::sync::Arc;

use ladle_common::{Row, TableSchema};
use ladle_dataflow::{
    compile_row_expr, BaseColumn, DataflowError, OutputColumn, ResultRows, RowExpr,
};
use sqlparser::ast::{self, SelectItem};

use crate::error::{Result, ShimError, WireError};
use crate::output::Output;
use crate::strict_warnings::StrictWarnings;

/// A compiled RETURNING list over one table's rows.
pub struct Returning {
    columns: Vec<OutputColumn>,
    exprs: Vec<RowExpr>,
    /// Each expression as written (`None`: a column of `*`), for the text
    /// of its 1690.
    written: Vec<Option<ast::Expr>>,
    schema: Arc<TableSchema>,
    /// Which warnings evaluation raises fail the statement instead (see
    /// [`Returning::failing_on_warnings`]).
    strict: StrictWarnings,
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
                    let parts: Vec<&str> = name.0.iter().map(|i| i.value.as_str()).collect();
                    if !names_table(schema, &parts) {
                        // MariaDB's text: the table as written, in its
                        // database (the default one if none is written).
                        let (table, database) = match parts.as_slice() {
                            [.., d, t] => (*t, *d),
                            [t] => (*t, schema.database.as_str()),
                            [] => ("", schema.database.as_str()),
                        };
                        let (code, message) =
                            crate::error::unknown_table_drop(&format!("{database}.{table}"));
                        return Err(ShimError::Wire(WireError { code, message }));
                    }
                    Self::all_columns(schema, &mut columns, &mut exprs)?;
                    written.resize(exprs.len(), None);
                    continue;
                }
                SelectItem::UnnamedExpr(e) => (e, None),
                SelectItem::ExprWithAlias { expr, alias } => (expr, Some(alias.value.clone())),
            };
            check_qualified_columns(expr, schema)?;
            let compiled = compile_row_expr(expr, Some(schema)).map_err(|e| match e {
                DataflowError::UnknownColumn(column, _) => {
                    ShimError::UnknownColumn(column, "RETURNING".into())
                }
                e => e.into(),
            })?;
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
            strict: StrictWarnings::default(),
        })
    }

    /// The list for an INSERT: under strict `sql_mode` (without IGNORE)
    /// a warning its evaluation raises is the statement's error, as in
    /// MariaDB (see [`crate::strict_warnings`]). (A DELETE's RETURNING
    /// only warns there.)
    pub fn failing_on_warnings(self, strict: StrictWarnings) -> Returning {
        Returning { strict, ..self }
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
        self.exprs
            .iter()
            .zip(&self.written)
            .map(|(x, w)| {
                self.strict.evaluated(|| {
                    x.eval(row)
                        .map_err(|e| ShimError::from(self.out_of_range_in(e, w.as_ref(), row)))
                })
            })
            .collect()
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
            (DataflowError::OutOfRange(m), Some(w)) => DataflowError::OutOfRange(
                crate::out_of_range::message_naming_operation(m, w, &self.schema, row),
            ),
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

/// Whether `parts` (`[t]` or `[db, t]`, as written) name `schema`'s table:
/// exactly, as MariaDB compares table and database names where they are
/// case-sensitive (`lower_case_table_names` = 0, which Ladle reports).
fn names_table(schema: &TableSchema, parts: &[&str]) -> bool {
    match parts {
        [t] => *t == schema.name,
        [d, t] => *d == schema.database && *t == schema.name,
        _ => false,
    }
}

/// 1054 `Unknown column 'T.v' in 'RETURNING'` for a column of `expr`
/// qualified by another name than its table's (outside subqueries, whose
/// names are their own).
fn check_qualified_columns(expr: &ast::Expr, schema: &TableSchema) -> Result<()> {
    struct Qualified<'a> {
        schema: &'a TableSchema,
        in_query: usize,
    }
    impl ast::Visitor for Qualified<'_> {
        type Break = String;
        fn pre_visit_query(&mut self, _: &ast::Query) -> ControlFlow<String> {
            self.in_query += 1;
            ControlFlow::Continue(())
        }
        fn post_visit_query(&mut self, _: &ast::Query) -> ControlFlow<String> {
            self.in_query -= 1;
            ControlFlow::Continue(())
        }
        fn pre_visit_expr(&mut self, e: &ast::Expr) -> ControlFlow<String> {
            let ast::Expr::CompoundIdentifier(ids) = e else {
                return ControlFlow::Continue(());
            };
            let parts: Vec<&str> = ids.iter().map(|i| i.value.as_str()).collect();
            let qualifier = &parts[..parts.len().saturating_sub(1)];
            if self.in_query == 0 && !names_table(self.schema, qualifier) {
                return ControlFlow::Break(parts.join("."));
            }
            ControlFlow::Continue(())
        }
    }
    let mut check = Qualified {
        schema,
        in_query: 0,
    };
    match ast::Visit::visit(expr, &mut check) {
        ControlFlow::Break(column) => Err(ShimError::UnknownColumn(column, "RETURNING".into())),
        ControlFlow::Continue(()) => Ok(()),
    }
}
