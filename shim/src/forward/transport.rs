//! The cluster's side of write forwarding: a node's [`Forwarder`] and one
//! client session's [`ForwardChannel`] to the primary (implemented by the
//! cluster crate).

use ladle_common::Lsn;

/// A cluster node's forwarding: installed on every cluster node.
pub trait Forwarder: Send + Sync {
    /// Whether writes sent here must run on another node now.
    fn forwards(&self) -> bool;
    /// A new link to the primary for one client session.
    fn open(&self) -> Box<dyn ForwardChannel>;
    /// Waits (bounded) until this node has applied position `lsn`;
    /// `Err` says why the read cannot be served yet.
    fn wait_applied(&self, lsn: Lsn) -> Result<(), String>;
}

/// One client session's link to the primary.
pub trait ForwardChannel: Send {
    /// Runs an encoded request on the primary. `continuing`: it must run
    /// in the same primary session as the previous one (an open
    /// transaction), or not at all.
    fn call(&mut self, request: &[u8], continuing: bool) -> Result<Vec<u8>, ForwardFailure>;
}

/// Why a forwarded statement has no answer.
#[derive(Debug)]
pub enum ForwardFailure {
    /// It did not run (no primary, or the session's primary is gone).
    NotSent(String),
    /// It may or may not have run.
    Unknown(String),
}
