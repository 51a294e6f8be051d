//! The expression MariaDB names in 1690 ("BIGINT value is out of range in
//! '`db`.`t`.`v` + 1'"): the innermost operation that overflowed, printed
//! with its columns qualified by database and table. Found after the fact
//! by evaluating the parts of the expression as written over the row.

use std::ops::ControlFlow;

use ladle_common::{Row, TableSchema};
use ladle_dataflow::{compile_row_expr, DataflowError};
use sqlparser::ast;

/// 1690's message `m` (`BIGINT value is out of range`) raised evaluating
/// `written` over `row`, naming the operation that overflowed as MariaDB's
/// does (`... in '`db`.`t`.`v` + 1'`) where [`failing_operation`] finds it.
pub fn message_naming_operation(
    m: String,
    written: &ast::Expr,
    schema: &TableSchema,
    row: &Row,
) -> String {
    if m.contains(" in '") {
        return m;
    }
    match failing_operation(written, schema, row) {
        Some(text) => format!("{m} in '{text}'"),
        None => m,
    }
}

/// The text of the innermost part of `written` that is out of range over
/// `row` (a row of `schema`): the first such part, left to right, none of
/// whose own parts is. `None` when it holds more than operators, literals
/// and columns (printed otherwise by MariaDB) or no part fails alone.
pub fn failing_operation(written: &ast::Expr, schema: &TableSchema, row: &Row) -> Option<String> {
    let parts = parts_in_order(written);
    let fails = |e: &ast::Expr| {
        compile_row_expr(e, Some(schema))
            .is_ok_and(|x| matches!(x.eval(row), Err(DataflowError::OutOfRange(_))))
    };
    // Descend from the whole into the first failing part of each level.
    let (_, whole) = parts.first()?;
    if !fails(whole) {
        return None;
    }
    let mut at = 0;
    loop {
        let depth = parts[at].0;
        let next = parts[at + 1..]
            .iter()
            .enumerate()
            .take_while(|(_, (d, _))| *d > depth)
            .filter(|(_, (d, _))| *d == depth + 1)
            .find(|(_, (_, e))| fails(e))
            .map(|(i, _)| at + 1 + i);
        match next {
            Some(n) => at = n,
            None => break,
        }
    }
    printed(&parts[at].1, schema)
}

/// `e` and its parts, parents first, each with its depth.
fn parts_in_order(e: &ast::Expr) -> Vec<(usize, ast::Expr)> {
    struct Parts {
        depth: usize,
        out: Vec<(usize, ast::Expr)>,
    }
    impl ast::Visitor for Parts {
        type Break = ();
        fn pre_visit_expr(&mut self, e: &ast::Expr) -> ControlFlow<()> {
            self.out.push((self.depth, e.clone()));
            self.depth += 1;
            ControlFlow::Continue(())
        }
        fn post_visit_expr(&mut self, _: &ast::Expr) -> ControlFlow<()> {
            self.depth -= 1;
            ControlFlow::Continue(())
        }
    }
    let mut p = Parts {
        depth: 0,
        out: Vec::new(),
    };
    let _ = ast::Visit::visit(e, &mut p);
    p.out
}

/// `e` as MariaDB prints it, columns as `` `db`.`t`.`c` ``; `None` for
/// forms other than operators, literals and columns.
fn printed(e: &ast::Expr, schema: &TableSchema) -> Option<String> {
    struct Qualify<'a> {
        schema: &'a TableSchema,
    }
    impl ast::VisitorMut for Qualify<'_> {
        type Break = ();
        fn pre_visit_expr(&mut self, e: &mut ast::Expr) -> ControlFlow<()> {
            let name = match e {
                ast::Expr::Identifier(id) => id.value.clone(),
                ast::Expr::CompoundIdentifier(ids) => match ids.last() {
                    Some(id) => id.value.clone(),
                    None => return ControlFlow::Break(()),
                },
                ast::Expr::BinaryOp { .. }
                | ast::Expr::UnaryOp { .. }
                | ast::Expr::Nested(_)
                | ast::Expr::Value(_) => return ControlFlow::Continue(()),
                _ => return ControlFlow::Break(()),
            };
            let Some(c) = self
                .schema
                .columns
                .iter()
                .find(|c| c.name.eq_ignore_ascii_case(&name))
            else {
                return ControlFlow::Break(());
            };
            let quoted = |s: &str| ast::Ident::with_quote('`', s);
            *e = ast::Expr::CompoundIdentifier(vec![
                quoted(&self.schema.database),
                quoted(&self.schema.name),
                quoted(&c.name),
            ]);
            ControlFlow::Continue(())
        }
    }
    let mut e = e.clone();
    if ast::VisitMut::visit(&mut e, &mut Qualify { schema }).is_break() {
        return None;
    }
    Some(e.to_string())
}
