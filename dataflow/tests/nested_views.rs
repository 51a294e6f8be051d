//! Views nest as deep as the planner's bound, and that bound fits a
//! statement thread's stack ([`THREAD_STACK_BYTES`]) in a debug build: the
//! deepest plan there is (a chain of views under derived tables nested to
//! MariaDB's 63, an expression nested to its own bound at the bottom)
//! plans, and one view more is refused with an error, not a stack overflow
//! that would abort the server. Each relation level takes about 150 KiB of
//! stack in a debug build; the worst case below about 40 MiB of the 64.

mod common;

use common::*;
use ladle_dataflow::{parse_sql, DataflowError, THREAD_STACK_BYTES};
use sqlparser::ast;

/// `sql` parsed as the shim parses it (deeper than sqlparser's default).
fn parse_deep(sql: &str) -> ast::Query {
    match parse_sql(sql).expect("parse").into_iter().next() {
        Some(ast::Statement::Query(q)) => *q,
        _ => panic!("not a query: {sql}"),
    }
}

/// `v0` over the table, with a 500-level expression, and `v1` .. `v<n>`
/// each over the previous one.
fn view_chain(e: &Env, n: usize) {
    e.table("deep", &[("id", int()), ("n", int())]);
    e.insert(
        &e.storage.table(DB, "deep").expect("deep"),
        vec![r(&[i(1), i(-5)]), r(&[i(2), i(7)])],
    );
    e.df.create_view(DB, "v0", &parse("SELECT id, n FROM deep"), false)
        .expect("v0");
    for k in 1..=n {
        let q = parse(&format!("SELECT * FROM v{}", k - 1));
        e.df.create_view(DB, &format!("v{k}"), &q, false)
            .unwrap_or_else(|err| panic!("v{k}: {err}"));
    }
    // Only now (each CREATE VIEW plans the chain below it).
    let abs = format!("{}n{}", "ABS(".repeat(500), ")".repeat(500));
    let v0 = parse_deep(&format!("SELECT id, {abs} AS n FROM deep"));
    e.df.create_view(DB, "v0", &v0, true).expect("v0");
}

/// Runs `f` on a thread with a statement thread's stack (as the server
/// runs CREATE VIEW and SELECT).
fn on_statement_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(THREAD_STACK_BYTES)
        .spawn(f)
        .expect("spawn")
        .join()
        .expect("planning overflowed or panicked")
}

/// Prepares and reads `sql`.
fn read(e: &Env, sql: &str) -> Result<Vec<String>, DataflowError> {
    let rows = e.df.prepare(DB, &parse_deep(sql))?.execute(&[])?;
    Ok(render(rows, false))
}

#[test]
fn views_nest_to_the_planners_bound_within_a_statement_threads_stack() {
    on_statement_stack(|| {
        let e = env(1 << 30);
        view_chain(&e, 128);
        assert_eq!(
            read(&e, "SELECT id, n FROM v127").expect("127 views"),
            v(&["1 5", "2 7"])
        );
        // 62 derived tables (63 queries nested in the text) over 65 views.
        let derived = |view: &str| {
            format!(
                "SELECT * FROM {}{view}{}",
                "(SELECT * FROM ".repeat(62),
                ") d".repeat(62)
            )
        };
        assert_eq!(
            read(&e, &derived("v65")).expect("derived over views"),
            v(&["1 5", "2 7"])
        );
        for refused in [derived("v66"), "SELECT id FROM v128".to_string()] {
            assert!(matches!(
                read(&e, &refused),
                Err(DataflowError::Unsupported(_))
            ));
        }
    });
}
