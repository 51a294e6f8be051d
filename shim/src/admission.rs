//! Admission: counting authenticated connections against
//! `max_connections` (a connection over it gets 1040).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::metrics::Metrics;

/// Counts authenticated connections against `max_connections`. A socket
/// still in the connection phase holds no place (it is bounded by
/// `connect_timeout` instead), so sockets that never finish a handshake
/// cannot lock users out.
pub struct Admission {
    active: AtomicUsize,
    max: usize,
    metrics: Arc<Metrics>,
}

impl Admission {
    pub(crate) fn new(max: usize, metrics: Arc<Metrics>) -> Admission {
        Admission {
            active: AtomicUsize::new(0),
            max,
            metrics,
        }
    }

    /// Whether every place is taken (a new connection would get 1040).
    pub(crate) fn full(&self) -> bool {
        self.active.load(Ordering::SeqCst) >= self.max
    }

    /// A place for an authenticated connection, or `None` (1040) when all
    /// are taken.
    pub(crate) fn admit(self: &Arc<Admission>) -> Option<AdmissionSlot> {
        if self.active.fetch_add(1, Ordering::SeqCst) >= self.max {
            self.active.fetch_sub(1, Ordering::SeqCst);
            self.refused();
            return None;
        }
        self.metrics.connections.inc();
        Some(AdmissionSlot(self.clone()))
    }

    pub(crate) fn refused(&self) {
        self.metrics.connections_refused.inc();
        self.metrics.errors.with_label_values(&["1040"]).inc();
    }
}

/// An authenticated connection's place; released when the connection ends
/// (even by panic).
pub struct AdmissionSlot(Arc<Admission>);

impl Drop for AdmissionSlot {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::SeqCst);
        self.0.metrics.connections.dec();
    }
}
