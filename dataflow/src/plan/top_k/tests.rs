use std::sync::Arc;

use ladle_common::{ColumnSchema, IndexSchema, SqlType, TableSchema};

use super::*;
use crate::ops::AggSpec;
use crate::plan::Count;

fn int() -> SqlType {
    SqlType::Int {
        bytes: 4,
        unsigned: false,
        display_width: None,
    }
}

/// `comments (id INT PRIMARY KEY, flag INT, body TEXT, story INT, KEY (story))`.
fn comments() -> LNode {
    let table = TableSchema {
        id: 1,
        database: "d".into(),
        name: "comments".into(),
        columns: vec![
            ColumnSchema::new("id", int()),
            ColumnSchema::new("flag", int()),
            ColumnSchema::new("body", SqlType::Text(65535)),
            ColumnSchema::new("story", int()),
        ],
        primary_key: Some(vec![0]),
        indexes: vec![IndexSchema {
            id: 7,
            name: "story".into(),
            columns: vec![3],
            unique: false,
        }],
        version: 1,
    };
    node(LOp::Base(Arc::new(table)), vec![], 4)
}

/// `votes (id INT PRIMARY KEY, comment_id INT)`.
fn votes() -> LNode {
    let table = TableSchema {
        id: 2,
        database: "d".into(),
        name: "votes".into(),
        columns: vec![
            ColumnSchema::new("id", int()),
            ColumnSchema::new("comment_id", int()),
        ],
        primary_key: Some(vec![0]),
        indexes: vec![],
        version: 1,
    };
    node(LOp::Base(Arc::new(table)), vec![], 2)
}

fn node(op: LOp, inputs: Vec<LNode>, width: usize) -> LNode {
    LNode {
        op,
        inputs,
        colls: vec![Collation::default(); width],
    }
}

/// `SELECT comment_id, COUNT(*) FROM votes GROUP BY comment_id`.
fn vote_counts() -> LNode {
    let grouped = node(
        LOp::Project(vec![Expr::Column(1), Expr::Column(0)]),
        vec![votes()],
        2,
    );
    let count = AggSpec::new(crate::ops::AggKind::CountStar, 0);
    node(
        LOp::Aggregate {
            ngroup: 1,
            aggs: vec![count],
            scalar: false,
        },
        vec![grouped],
        2,
    )
}

/// `SELECT c.id, c.flag, v.n FROM comments c <kind> JOIN <right> ON
/// <right>.<right_col> = c.id`, keyed by `flag`, ordered by `order_col`.
fn view(kind: JoinKind, right: LNode, right_col: usize, order_col: usize) -> PlannedView {
    let rw = right.width();
    let join = node(
        LOp::Join {
            kind,
            left_cols: vec![0],
            right_cols: vec![right_col],
        },
        vec![comments(), right],
        4 + rw,
    );
    let top = node(
        LOp::Project(vec![Expr::Column(0), Expr::Column(1), Expr::Column(5)]),
        vec![join],
        3,
    );
    PlannedView {
        plan: top,
        key: vec![1],
        key_slots: vec![vec![0]],
        key_names: vec!["flag".into()],
        key_types: vec![int()],
        order: vec![(order_col, true, Collation::default())],
        read_filter: None,
        output: (0..3).map(Expr::Column).collect(),
        columns: vec![],
        limit: Some(Count::Slot(1)),
        offset: Some(Count::Slot(2)),
        empty_default: None,
        dedup: false,
        finish: None,
        range: None,
        sorts_all_rows: false,
    }
}

#[test]
fn bound_rounds_up_to_a_power_of_two_and_stops_past_the_maximum() {
    assert_eq!(bound(40, 0), Some(64));
    assert_eq!(bound(1, 0), Some(64));
    assert_eq!(bound(100, 20), Some(128));
    assert_eq!(bound(1024, 0), Some(1024));
    assert_eq!(bound(1000, 100), None);
    assert_eq!(bound(u64::MAX, 1), None);
}

#[test]
fn the_window_goes_below_a_left_join_to_an_aggregate_by_the_join_key() {
    let mut pv = view(JoinKind::Left, vote_counts(), 0, 0);
    assert!(push_below_left_joins(&mut pv, 64));
    let join = &pv.plan.inputs[0];
    let LOp::Window {
        partition,
        order,
        limit,
        funcs,
        ..
    } = &join.inputs[0].op
    else {
        panic!("no window below the join: {:?}", join.inputs[0].op);
    };
    assert_eq!(partition, &vec![1]);
    assert_eq!(order, &vec![(0, true, Collation::default())]);
    assert_eq!((*limit, funcs.len()), (Some(64), 0));
    // The unread TEXT body is not kept: NULL in its place.
    let LOp::Project(es) = &join.inputs[0].inputs[0].op else {
        panic!("no narrowing projection");
    };
    assert!(matches!(es[2], Expr::Literal(Value::Null)), "{es:?}");
    assert!(matches!(es[0], Expr::Column(0)) && matches!(es[1], Expr::Column(1)));
    assert!(matches!(
        join.inputs[0].inputs[0].inputs[0].op,
        LOp::Base(_)
    ));
}

/// Puts `WHERE <column c> + 1 > 0` over the comments of `pv`.
fn filter_comments(pv: &mut PlannedView, c: usize) {
    let join = &mut pv.plan.inputs[0];
    let base = LNode::take(&mut join.inputs[0]);
    let plus_one_positive = Expr::Cmp {
        op: crate::expr::CmpOp::Gt,
        left: Box::new(Expr::Arith(
            crate::expr::ArithOp::Add,
            Box::new(Expr::Column(c)),
            Box::new(Expr::Literal(Value::Int(1))),
        )),
        right: Box::new(Expr::Literal(Value::Int(0))),
        collation: Collation::Binary,
    };
    join.inputs[0] = node(LOp::Filter(plus_one_positive), vec![base], 4);
}

#[test]
fn the_window_goes_below_a_filter_that_cannot_overflow() {
    // `story + 1 > 0` over an INT fits BIGINT: no row is marked.
    let mut pv = view(JoinKind::Left, vote_counts(), 0, 0);
    filter_comments(&mut pv, 3);
    assert!(!pv.plan.may_mark_rows());
    assert!(push_below_left_joins(&mut pv, 64));
}

#[test]
fn no_window_where_the_join_can_change_the_rows_or_the_order() {
    // The order reads the right side.
    let mut pv = view(JoinKind::Left, vote_counts(), 0, 2);
    assert!(!push_below_left_joins(&mut pv, 64));
    // An inner join drops comments without votes.
    let mut pv = view(JoinKind::Inner, vote_counts(), 0, 0);
    assert!(!push_below_left_joins(&mut pv, 64));
    // Several votes per comment: one comment, several joined rows.
    let mut pv = view(JoinKind::Left, votes(), 1, 0);
    assert!(!push_below_left_joins(&mut pv, 64));
    // A primary key on the right: one row per comment.
    let mut pv = view(JoinKind::Left, votes(), 0, 0);
    assert!(push_below_left_joins(&mut pv, 64));
    // No key: one partition of every row, filled under the graph lock.
    let mut pv = view(JoinKind::Left, vote_counts(), 0, 0);
    pv.key.clear();
    assert!(!push_below_left_joins(&mut pv, 64));
    // A filter below that may mark rows whose WHERE overflowed (the TEXT
    // body read as a DOUBLE, plus one).
    let mut pv = view(JoinKind::Left, vote_counts(), 0, 0);
    filter_comments(&mut pv, 2);
    assert!(!push_below_left_joins(&mut pv, 64));
    // Read-time work between the stored rows and the limit.
    let mut pv = view(JoinKind::Left, vote_counts(), 0, 0);
    pv.dedup = true;
    assert!(!push_below_left_joins(&mut pv, 64));
}
