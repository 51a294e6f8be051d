//! What the server hands the node: the capabilities of the SQL front end
//! and the dataflow the cluster calls into (schema changes are replayed
//! through [`DdlApplier`](crate::DdlApplier), in `ddl`).

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use ladle_common::Lsn;

use crate::protocol::{ForwardedClient, KillOutcome};

/// A forwarded statement's run ([`ForwardTarget::run`]): the session back
/// with its answer, or why there is none (the session is then gone).
pub type ForwardedRun =
    Pin<Box<dyn Future<Output = Result<(Box<dyn ForwardedSession>, Vec<u8>), String>> + Send>>;

/// The primary's side: opens a SQL session per forwarding connection.
pub trait ForwardTarget: Send + Sync {
    /// A session for `client` of node `replica` (listed in this node's
    /// process list under both, until it is dropped).
    fn open(&self, replica: u64, client: &ForwardedClient) -> Box<dyn ForwardedSession>;

    /// Runs `request` in `session` ([`ForwardedSession::run`], which
    /// blocks) on the threads the front end runs its own clients'
    /// statements on, never on an async worker. The statement stops (as
    /// a killed one) once `interrupt` is set: the replica's client was
    /// killed or is gone.
    fn run(
        &self,
        session: Box<dyn ForwardedSession>,
        request: Vec<u8>,
        interrupt: Arc<AtomicBool>,
    ) -> ForwardedRun;

    /// KILL [QUERY] (`connection`) of this node's client connection `id`,
    /// sent from another node by `user` (`any`: who holds SUPER). May
    /// block for a few seconds (a KILL CONNECTION of a forwarded session
    /// is sent on to its replica), so it runs off the async workers.
    fn kill(&self, id: u64, user: &str, any: bool, connection: bool) -> KillOutcome;
}

/// One forwarded client session on the primary.
pub trait ForwardedSession: Send {
    /// Runs one encoded request; returns the encoded answer.
    fn run(&mut self, request: &[u8]) -> Vec<u8>;

    /// The flag its statements stop at (a KILL QUERY of the session here,
    /// or the replica's cancel).
    fn interrupt(&self) -> Arc<AtomicBool>;

    /// Whether the session was killed here (KILL CONNECTION whose replica
    /// could not be told), or refused a place under `max_connections`
    /// (its answer said so): its forwarding connection is to close.
    fn killed(&self) -> bool;
}

/// The server's view snapshots, shipped with a bootstrap checkpoint so
/// that the new node's views start warm.
pub trait ViewSnapshotSource: Send + Sync {
    /// Takes a view snapshot now and links a consistent copy of the whole
    /// snapshot directory into `into`; returns the snapshot's LSN.
    fn link_into(&self, into: &Path) -> Result<Lsn, String>;
}
