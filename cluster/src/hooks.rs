//! What the server hands the node: the capabilities of the SQL front end
//! and the dataflow the cluster calls into (schema changes are replayed
//! through [`DdlApplier`](crate::DdlApplier), in `ddl`).

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use ladle_common::Lsn;

use crate::protocol::KillOutcome;

/// A forwarded statement's run ([`ForwardTarget::run`]): the session back
/// with its answer, or why there is none (the session is then gone).
pub type ForwardedRun =
    Pin<Box<dyn Future<Output = Result<(Box<dyn ForwardedSession>, Vec<u8>), String>> + Send>>;

/// The primary's side: opens a SQL session per forwarding connection.
pub trait ForwardTarget: Send + Sync {
    fn open(&self) -> Box<dyn ForwardedSession>;

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
    /// sent from another node by `user` (`any`: who holds SUPER). Quick
    /// (it flags the connection), so it runs on the async worker.
    fn kill(&self, id: u64, user: &str, any: bool, connection: bool) -> KillOutcome;
}

/// One forwarded client session on the primary.
pub trait ForwardedSession: Send {
    /// Runs one encoded request; returns the encoded answer.
    fn run(&mut self, request: &[u8]) -> Vec<u8>;
}

/// The server's view snapshots, shipped with a bootstrap checkpoint so
/// that the new node's views start warm.
pub trait ViewSnapshotSource: Send + Sync {
    /// Takes a view snapshot now and links a consistent copy of the whole
    /// snapshot directory into `into`; returns the snapshot's LSN.
    fn link_into(&self, into: &Path) -> Result<Lsn, String>;
}
