//! Holds on writes (`Storage::hold_writes`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use super::{i, insert, row, t, users};
use crate::Storage;

/// A write to a held table waits until the hold ends; a write to
/// another table does not; a write that outwaits the bound goes ahead.
#[test]
fn writes_to_a_held_table_wait_for_the_hold() {
    let s = Storage::in_memory();
    let users = users(&s);
    let other = {
        let mut schema = (*users).clone();
        schema.name = "other".into();
        schema.id = 0;
        s.create_table(schema, false).expect("create other")
    };
    let hold = s.hold_writes(&[users.id]);
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let (s, users, done) = (s.clone(), users.clone(), done.clone());
        thread::spawn(move || {
            s.write(vec![insert(&users, vec![row(&[i(1), t("a"), i(1)])])])
                .expect("held write");
            done.store(true, Ordering::SeqCst);
        })
    };
    s.write(vec![insert(&other, vec![row(&[i(1), t("a"), i(1)])])])
        .expect("a write to a table nobody holds");
    thread::sleep(Duration::from_millis(200));
    assert!(!done.load(Ordering::SeqCst), "the held write went ahead");
    drop(hold);
    writer.join().expect("writer");
    assert!(done.load(Ordering::SeqCst));

    let _forever = s.hold_writes(&[users.id]);
    let started = Instant::now();
    s.write(vec![insert(&users, vec![row(&[i(2), t("b"), i(2)])])])
        .expect("a write past its wait");
    assert!(started.elapsed() >= Duration::from_secs(2));
}
