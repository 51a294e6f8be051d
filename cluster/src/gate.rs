//! The storage write gate: only the primary takes writes, and it
//! acknowledges one only after `sync_replicas` replicas persisted it and
//! while its etcd lease is certainly still valid (semi-synchronous
//! replication, with fencing by lease).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use ladle_common::Lsn;
use ladle_storage::{StorageError, WriteGate};

use crate::ack_wait::Confirmation;
use crate::node::{Node, Role};

pub(crate) struct Gate(pub Arc<Node>);

impl WriteGate for Gate {
    fn admit(&self) -> ladle_storage::Result<()> {
        self.0.check_writable().map_err(StorageError::ReadOnly)
    }

    fn acknowledge(&self, lsn: Lsn) -> ladle_storage::Result<()> {
        let node = &self.0;
        node.note_commit(lsn);
        node.committed.send_replace(node.storage.last_lsn());
        let term = node.term();
        let demoted = || node.role() != Role::Primary || node.term() != term;
        let needed = node.config.sync_replicas;
        let deadline = Instant::now() + node.config.ack_timeout;
        let confirmation = if needed == 0 {
            Confirmation::Confirmed
        } else {
            node.ack_waiters.wait(lsn, deadline, demoted)
        };
        // The lease is checked after the replicas answered: if it is valid
        // now, no other node can have been elected yet.
        if confirmation == Confirmation::Confirmed && !demoted() && node.lease_valid() {
            node.acknowledged.fetch_max(lsn, Ordering::AcqRel);
            return Ok(());
        }
        node.metrics.not_acknowledged.inc();
        Err(StorageError::ReadOnly(match confirmation {
            Confirmation::TimedOut => format!(
                "committed at position {lsn} but not acknowledged: \
                 {needed} synchronous replica(s) did not confirm it in time"
            ),
            _ => format!(
                "committed at position {lsn} but not acknowledged: this node may no \
                 longer be the primary; retry"
            ),
        }))
    }
}
