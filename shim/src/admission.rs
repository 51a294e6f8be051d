//! Admission: counting connections against `max_connections` (a
//! connection over it gets 1040): the authenticated clients of this node
//! and, on a cluster's primary, the sessions its replicas forward
//! statements to.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::metrics::Metrics;

/// Counts connections against `max_connections`. A socket still in the
/// connection phase holds no place (it is bounded by `connect_timeout`
/// instead), so sockets that never finish a handshake cannot lock users
/// out.
pub struct Admission {
    active: AtomicUsize,
    max: usize,
    /// The most places ever taken at once (`Max_used_connections`); the
    /// lock keeps its gauge from going back when two admissions race.
    max_used: Mutex<usize>,
    metrics: Arc<Metrics>,
}

impl Admission {
    pub(crate) fn new(max: usize, metrics: Arc<Metrics>) -> Admission {
        Admission {
            active: AtomicUsize::new(0),
            max,
            max_used: Mutex::new(0),
            metrics,
        }
    }

    /// Whether every place is taken (a new connection would get 1040).
    pub(crate) fn full(&self) -> bool {
        self.active.load(Ordering::SeqCst) >= self.max
    }

    /// A place for a connection (an authenticated client, or a session
    /// forwarded by a replica), or `None` (1040, counted as refused) when
    /// all are taken.
    pub fn admit(self: &Arc<Admission>) -> Option<AdmissionSlot> {
        let taken = self.active.fetch_add(1, Ordering::SeqCst);
        if taken >= self.max {
            self.active.fetch_sub(1, Ordering::SeqCst);
            self.refused();
            return None;
        }
        self.metrics.connections.inc();
        let mut max_used = self.max_used.lock();
        if taken + 1 > *max_used {
            *max_used = taken + 1;
            self.metrics
                .connections_max_used
                .set(i64::try_from(*max_used).unwrap_or(i64::MAX));
        }
        Some(AdmissionSlot(self.clone()))
    }

    pub(crate) fn refused(&self) {
        self.metrics.connections_refused.inc();
        self.metrics.errors.with_label_values(&["1040"]).inc();
    }
}

/// A connection's place; released when the connection ends (even by
/// panic).
pub struct AdmissionSlot(Arc<Admission>);

impl Drop for AdmissionSlot {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::SeqCst);
        self.0.metrics.connections.dec();
    }
}
