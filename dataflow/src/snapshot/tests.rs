use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use ladle_common::{Row, RowDelta, Value};
use ladle_storage::snapshot::{LoadedNode, NodeId};
use proptest::prelude::*;

use super::decode::*;
use super::format::*;
use super::*;

fn sorted(mut rows: Vec<Row>) -> Vec<Row> {
    rows.sort();
    rows
}

proptest! {
    /// A reader patch (the effective row deltas, in order) applied to
    /// the previous rows gives the rows the live reader has.
    #[test]
    fn reader_patch_equals_applying_the_deltas(
        base in proptest::collection::vec(0i64..6, 0..20),
        ops in proptest::collection::vec((any::<bool>(), 0i64..6), 0..40),
    ) {
        let base: Vec<Row> = base.into_iter().map(|v| vec![Value::Int(v)]).collect();
        let mut live = base.clone();
        let mut log = Vec::new();
        for (insert, v) in ops {
            let row = vec![Value::Int(v)];
            if insert {
                live.push(row.clone());
                log.push(RowDelta::Insert(row));
            } else if let Some(p) = live.iter().position(|r| *r == row) {
                live.remove(p);
                log.push(RowDelta::Delete(row));
            }
        }
        let mut restored = base;
        restored.apply(log);
        prop_assert_eq!(sorted(restored), sorted(live));
    }
}

#[test]
fn merge_applies_upserts_patches_and_tombstones() {
    let key = |k: i64| vec![Value::Int(k)];
    let rows = |vs: &[i64]| -> Vec<Row> { vs.iter().map(|&v| vec![Value::Int(v)]).collect() };
    let blob = |upserts: Vec<(Vec<Value>, Vec<Row>)>,
                patches: Vec<(Vec<Value>, Vec<RowDelta>)>,
                removed: Vec<Vec<Value>>| {
        postcard::to_stdvec(&Blob::<Vec<Row>, Vec<RowDelta>> {
            format: FORMAT,
            kind: KIND_READER,
            unsorted: false,
            upserts,
            patches,
            removed,
        })
        .unwrap()
    };
    let base = blob(
        vec![(key(1), rows(&[1, 2])), (key(2), rows(&[5]))],
        vec![],
        vec![],
    );
    let d1 = blob(
        vec![(key(3), rows(&[7]))],
        vec![(
            key(1),
            vec![
                RowDelta::Delete(vec![Value::Int(1)]),
                RowDelta::Insert(vec![Value::Int(9)]),
            ],
        )],
        vec![key(2)],
    );
    let merged = merge_blobs(&base, &[&d1]);
    let map: HashMap<Vec<Value>, (Vec<Row>, bool)> = apply_chain::<Vec<Row>>(&merged, &[])
        .unwrap()
        .into_iter()
        .map(|(k, p, u)| (k, (p, u)))
        .collect();
    assert_eq!(map.len(), 2);
    // The patched key may be out of order: flagged for sorting.
    assert!(map[&key(1)].1);
    assert_eq!(sorted(map[&key(1)].0.clone()), rows(&[2, 9]));
    assert_eq!(map[&key(3)].0, rows(&[7]));
    // A patch for a partition the base lacks is refused (cold, not wrong).
    let bad = blob(vec![], vec![(key(4), vec![])], vec![]);
    assert!(apply_chain::<Vec<Row>>(&base, &[&bad]).is_err());
    assert!(merge_blobs(&base, &[&bad]).is_empty());
}

/// Interior nodes are decoded only once something wants them: before
/// that they would compete with opening storage and the first reads.
#[test]
fn interior_nodes_wait_behind_the_gate() {
    let node = |id: &str, kind: u8| LoadedNode {
        node: NodeId::new(id).unwrap(),
        base: postcard::to_stdvec(&Blob::<Vec<Row>, Vec<RowDelta>> {
            format: FORMAT,
            kind,
            unsorted: false,
            upserts: vec![(vec![Value::Int(1)], vec![vec![Value::Int(2)]])],
            patches: vec![],
            removed: vec![],
        })
        .unwrap(),
        deltas: vec![],
    };
    let nodes = vec![
        node("reader", KIND_READER),
        node("aggregate", KIND_AGGREGATE),
    ];
    let mut d = Decoding::start(nodes, vec![0, 1], Arc::new(HashSet::from([1])), 2, 0);
    d.receive(&mut |_| {}, |i| i == 0);
    assert!(d.got[0] && d.states.contains_key("reader"));
    // Both workers are free; only the gate holds the aggregate back.
    std::thread::sleep(Duration::from_millis(100));
    assert!(d.rx.try_recv().is_err(), "decoded before the gate opened");
    d.receive(&mut |_| {}, |_| true);
    assert!(d.got[1]);
}
