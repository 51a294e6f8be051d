//! Views no query has used for a while are dropped (with their catalog
//! records) and come back on the next use.

mod common;

use std::time::Duration;

use common::*;
use ladle_dataflow::{Dataflow, DataflowConfig};

const BY_ID: &str = "SELECT x FROM t WHERE id = ?";
const BY_X: &str = "SELECT id FROM t WHERE x = ?";

fn setup() -> Env {
    let e = env(1 << 30);
    let t = e.table("t", &[("id", int()), ("x", int())]);
    e.insert(&t, vec![r(&[i(1), i(10)]), r(&[i(2), i(20)])]);
    e
}

fn views(e: &Env) -> Vec<String> {
    let mut q: Vec<String> = e.df.view_stats().into_iter().map(|v| v.query).collect();
    q.sort();
    q
}

#[test]
fn sweep_drops_views_unread_since_the_previous_sweep() {
    let e = setup();
    let by_id = e.prepare(BY_ID);
    let by_x = e.prepare(BY_X);
    assert_eq!(by_id.execute(&[i(1)]).unwrap(), vec![vec![i(10)]]);
    assert_eq!(by_x.execute(&[i(20)]).unwrap(), vec![vec![i(2)]]);
    // Both were used since they were installed.
    assert_eq!(e.df.drop_unused_views(), 0);
    assert_eq!(views(&e).len(), 2);
    by_id.execute(&[i(2)]).unwrap();
    assert_eq!(e.df.drop_unused_views(), 1);
    let left = views(&e);
    assert_eq!(left.len(), 1);
    assert!(left[0].contains("id = "), "{left:?}");
    // The catalog forgot it: an engine started over this storage
    // reinstalls only the view still in use.
    let restarted = Dataflow::new(
        e.storage.clone(),
        DataflowConfig {
            memory_limit: 1 << 30,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(restarted.view_stats().len(), 1);
    drop(restarted);
    // The prepared query over the dropped view reinstalls it and answers
    // correctly, including a write made while it was gone.
    let t = e.storage.table(DB, "t").unwrap();
    e.insert(&t, vec![r(&[i(3), i(20)])]);
    let e2 = Env {
        storage: e.storage.clone(),
        df: Dataflow::new(
            e.storage.clone(),
            DataflowConfig {
                memory_limit: 1 << 30,
                ..Default::default()
            },
        )
        .unwrap(),
    };
    let by_x = e2.prepare(BY_X);
    let mut got = by_x.execute(&[i(20)]).unwrap();
    got.sort();
    assert_eq!(got, vec![vec![i(2)], vec![i(3)]]);
    assert_eq!(views(&e2).len(), 2);
}

#[test]
fn old_handles_reinstall_dropped_views() {
    let e = setup();
    let by_id = e.prepare(BY_ID);
    let by_x = e.prepare(BY_X);
    by_x.execute(&[i(10)]).unwrap();
    e.df.drop_unused_views();
    by_id.execute(&[i(1)]).unwrap();
    assert_eq!(e.df.drop_unused_views(), 1);
    assert_eq!(views(&e).len(), 1);
    let t = e.storage.table(DB, "t").unwrap();
    e.insert(&t, vec![r(&[i(3), i(10)])]);
    let mut got = by_x.execute(&[i(10)]).unwrap();
    got.sort();
    assert_eq!(got, vec![vec![i(1)], vec![i(3)]]);
    assert_eq!(views(&e).len(), 2);
}

#[test]
fn reads_sweep_after_the_idle_timeout() {
    let e = setup();
    let by_id = e.prepare(BY_ID);
    e.prepare(BY_X).execute(&[i(10)]).unwrap();
    e.df.set_view_idle_timeout(Some(Duration::from_millis(1)));
    // Reads of one view keep it; the other is dropped by a sweep that some
    // read runs once the timeout has passed twice.
    let mut rounds = 0;
    while views(&e).len() > 1 && rounds < 10_000 {
        by_id.execute(&[i(1)]).unwrap();
        std::thread::sleep(Duration::from_millis(1));
        rounds += 1;
    }
    let left = views(&e);
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(left[0].contains("id = "), "{left:?}");
    e.df.set_view_idle_timeout(None);
    assert_eq!(by_id.execute(&[i(2)]).unwrap(), vec![vec![i(20)]]);
}

/// Literals that cannot become parameters (a LIKE pattern, a function's
/// argument) install a view per value; one shape keeps at most
/// `MAX_LITERAL_VARIANTS` of them, dropping one nobody read lately, and
/// every value is still answered right, the dropped ones included.
#[test]
fn one_shape_keeps_a_bounded_number_of_literal_variants() {
    let e = setup();
    let t = e.storage.table(DB, "t").unwrap();
    e.insert(&t, (3..60).map(|k| r(&[i(k), i(k * 10)])).collect());
    let substring = |n: i64| format!("SELECT SUBSTRING(CAST(x AS CHAR), {n}) FROM t WHERE id = 12");
    let kept = "SELECT COUNT(*) FROM t WHERE x > 5 AND id LIKE '1%'";
    assert_eq!(e.prepare(kept).execute(&[]).unwrap(), vec![vec![i(11)]]);
    for round in 0..3 {
        for n in 1..=40 {
            let got = e.prepare(&substring(n)).execute(&[]).unwrap();
            let want = "120".get(n as usize - 1..).unwrap_or("");
            assert_eq!(
                got,
                vec![vec![ladle_common::Value::text(want)]],
                "SUBSTRING(.., {n}), round {round}"
            );
            // Read between the variants: the CLOCK sweep keeps it.
            assert_eq!(e.prepare(kept).execute(&[]).unwrap(), vec![vec![i(11)]]);
        }
    }
    let installed = views(&e);
    let variants = installed.iter().filter(|q| q.contains("SUBSTRING")).count();
    assert!(
        variants <= ladle_dataflow::MAX_LITERAL_VARIANTS,
        "{variants} variants installed: {installed:#?}"
    );
    assert!(
        installed.iter().any(|q| q.contains("LIKE")),
        "{installed:#?}"
    );
    let least = 40 - ladle_dataflow::MAX_LITERAL_VARIANTS as u64;
    assert!(
        e.df.variant_evictions() >= least,
        "{}",
        e.df.variant_evictions()
    );
}
