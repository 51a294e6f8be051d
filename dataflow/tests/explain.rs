//! EXPLAIN GRAPH describes a view without installing it.

mod common;

use common::*;
use ladle_dataflow::{Dataflow, DataflowConfig};

const COUNTS: &str = "SELECT article, COUNT(*) AS n FROM v GROUP BY article";
const VOTED: &str =
    "SELECT article FROM (SELECT article, COUNT(*) AS n FROM v GROUP BY article) AS c WHERE n > ?";

#[test]
fn explain_does_not_install_and_shows_sharing() {
    let e = env(1 << 30);
    let t = e.table("v", &[("id", int()), ("article", int()), ("user", int())]);
    e.insert(&t, vec![r(&[i(1), i(1), i(7)])]);
    let g = e.df.explain_graph(DB, &parse(VOTED)).unwrap();
    assert!(g.starts_with("view not installed"), "{g}");
    assert!(g.contains("Aggregate") && g.contains("Reader"), "{g}");
    assert!(e.df.view_stats().is_empty());
    // Describing again gives the same node ids: nothing was left behind.
    assert_eq!(e.df.explain_graph(DB, &parse(VOTED)).unwrap(), g);
    // Nor recorded: a restarted engine installs nothing.
    let restarted = Dataflow::new(
        e.storage.clone(),
        DataflowConfig {
            memory_limit: 1 << 30,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(restarted.view_stats().is_empty());
    drop(restarted);

    // With COUNTS installed, the description of VOTED shares its aggregate.
    let e = env(1 << 30);
    let t = e.table("v", &[("id", int()), ("article", int()), ("user", int())]);
    e.insert(&t, vec![r(&[i(1), i(1), i(7)])]);
    assert_eq!(e.q(COUNTS, &[]), v(&["1 1"]));
    let counts = e.df.explain_graph(DB, &parse(COUNTS)).unwrap();
    assert!(counts.starts_with("view q_"), "{counts}");
    let aggregate = counts
        .lines()
        .find(|l| l.contains("Aggregate"))
        .unwrap()
        .split(':')
        .next()
        .unwrap()
        .to_string();
    let voted = e.df.explain_graph(DB, &parse(VOTED)).unwrap();
    assert!(voted.starts_with("view not installed"), "{voted}");
    assert_eq!(
        voted.lines().filter(|l| l.contains("Aggregate")).count(),
        1,
        "{voted}"
    );
    assert!(
        voted.contains(&format!("{aggregate}: Aggregate")),
        "{voted}"
    );
    assert_eq!(e.df.view_stats().len(), 1);
    // The view still works when a query installs it, and so does the one
    // it shares with.
    e.insert(&t, vec![r(&[i(2), i(1), i(8)]), r(&[i(3), i(2), i(9)])]);
    assert_eq!(e.q(VOTED, &[i(1)]), v(&["1"]));
    assert_eq!(e.q(COUNTS, &[]), v(&["1 2", "2 1"]));
    let installed = e.df.explain_graph(DB, &parse(VOTED)).unwrap();
    assert!(installed.starts_with("view q_"), "{installed}");
}

/// A WHERE conjunct over one join input is applied below the join, so a
/// filtered cross product never builds the whole product (the 2,000³ rows
/// of the hostile query below took the server to 23 GB), and a LEFT join's
/// WHERE on its right side stays above it (it must see NULL-extended rows).
#[test]
fn where_filters_are_applied_below_joins() {
    let e = env(1 << 30);
    let t = e.table("ck", &[("id", int()), ("v", int())]);
    e.insert(&t, (1..=20).map(|n| r(&[i(n), i(n % 4)])).collect());
    let cross = "SELECT COUNT(*) FROM ck a, ck b, ck c WHERE a.id < 3 AND b.id < 3 AND c.id < 3";
    let g = e.df.explain_graph(DB, &parse(cross)).unwrap();
    let line = |needle: &str| {
        g.lines()
            .position(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no {needle} in\n{g}"))
    };
    // Node lines are printed inputs first: the filter comes before the joins.
    assert!(line("Filter") < line("Join"), "{g}");
    assert_eq!(g.matches("Filter").count(), 1, "one shared filter\n{g}");
    assert_eq!(e.q(cross, &[]), v(&["8"]));

    let left = "SELECT a.id FROM ck a LEFT JOIN ck b ON b.v = a.id \
                WHERE a.v <> 0 AND b.id IS NULL ORDER BY a.id";
    let g = e.df.explain_graph(DB, &parse(left)).unwrap();
    let join = g
        .lines()
        .position(|l| l.contains("Join Left"))
        .expect("join");
    let filters: Vec<usize> = g
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains("Filter"))
        .map(|(n, _)| n)
        .collect();
    assert!(filters.iter().any(|&f| f < join), "a.v <> 0 below\n{g}");
    assert!(filters.iter().any(|&f| f > join), "b.id IS NULL above\n{g}");
    assert_eq!(
        e.q(left, &[]),
        v(&["5", "6", "7", "9", "10", "11", "13", "14", "15", "17", "18", "19"]),
        "rows of a with v <> 0 and no b.v = a.id"
    );
}
