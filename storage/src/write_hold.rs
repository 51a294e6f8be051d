//! Brief holds on writes to some tables (see
//! [`Storage::hold_writes`](crate::Storage::hold_writes)).
//!
//! A hold is a scheduling hint, never a correctness device: a write that
//! waited its bound goes ahead, and a write that slips past a hold (it
//! checked just before the hold began, or it cascades into a held table)
//! is caught by whatever the holder validates afterwards.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ladle_common::TableId;
use parking_lot::{Condvar, Mutex};

use crate::ops::WriteOp;

/// The longest a write waits for a hold on its tables: about the longest
/// reader fill seen (the Lobsters front page's cold fill, ~1.5 s on a
/// loaded 2-core machine), so a write is delayed at most once by a fill
/// and never stalls for long behind a slow one.
const MAX_WRITE_WAIT: Duration = Duration::from_secs(2);

/// Tables held, and writes in progress, per table.
#[derive(Default)]
pub(crate) struct WriteHolds {
    /// Non-zero while any table is held: writes check it without a lock.
    any: AtomicUsize,
    tables: Mutex<Tables>,
    /// Signalled when a hold ends or a write finishes.
    changed: Condvar,
}

#[derive(Default)]
struct Tables {
    /// Holders per held table.
    held: HashMap<TableId, usize>,
    /// Writes past their wait and not yet finished, per table: a new hold
    /// waits for them, or the first one to commit would defeat it.
    writing: HashMap<TableId, usize>,
}

/// A write in progress (see [`WriteHolds::enter`]).
pub(crate) struct Writing<'a> {
    holds: &'a WriteHolds,
    tables: Vec<TableId>,
}

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        let mut t = self.holds.tables.lock();
        release(&mut t.writing, &self.tables);
        if self.holds.any.load(Ordering::SeqCst) > 0 {
            self.holds.changed.notify_all();
        }
    }
}

/// Takes one count of each of `tables` off `counts`.
fn release(counts: &mut HashMap<TableId, usize>, tables: &[TableId]) {
    for t in tables {
        if let Some(n) = counts.get_mut(t) {
            *n -= 1;
            if *n == 0 {
                counts.remove(t);
            }
        }
    }
}

/// Writes to the held tables wait (a bounded time) until this is dropped.
pub struct WriteHold<'a> {
    holds: &'a WriteHolds,
    tables: Vec<TableId>,
}

impl Drop for WriteHold<'_> {
    fn drop(&mut self) {
        let mut t = self.holds.tables.lock();
        release(&mut t.held, &self.tables);
        self.holds.any.fetch_sub(1, Ordering::SeqCst);
        self.holds.changed.notify_all();
    }
}

impl WriteHolds {
    /// Holds `tables`, then waits (at most [`MAX_WRITE_WAIT`]) for the
    /// writes to them already in progress.
    pub(crate) fn hold(&self, tables: &[TableId]) -> WriteHold<'_> {
        let mut t = self.tables.lock();
        for table in tables {
            *t.held.entry(*table).or_default() += 1;
        }
        self.any.fetch_add(1, Ordering::SeqCst);
        let give_up = Instant::now() + MAX_WRITE_WAIT;
        while tables.iter().any(|table| t.writing.contains_key(table)) {
            if self.changed.wait_until(&mut t, give_up).timed_out() {
                break;
            }
        }
        WriteHold {
            holds: self,
            tables: tables.to_vec(),
        }
    }

    /// Waits while any table `ops` write is held, at most
    /// [`MAX_WRITE_WAIT`], then counts the write in progress until the
    /// returned guard is dropped.
    pub(crate) fn enter(&self, ops: &[WriteOp]) -> Writing<'_> {
        let mut tables: Vec<TableId> = ops.iter().map(WriteOp::table).collect();
        tables.sort_unstable();
        tables.dedup();
        let mut t = self.tables.lock();
        if self.any.load(Ordering::SeqCst) > 0 {
            let give_up = Instant::now() + MAX_WRITE_WAIT;
            while tables.iter().any(|table| t.held.contains_key(table)) {
                if self.changed.wait_until(&mut t, give_up).timed_out() {
                    tracing::debug!(
                        "a write waited {MAX_WRITE_WAIT:?} for a held table; going ahead"
                    );
                    break;
                }
            }
        }
        for table in &tables {
            *t.writing.entry(*table).or_default() += 1;
        }
        Writing {
            holds: self,
            tables,
        }
    }
}
