//! The cluster's side of write forwarding: a node's [`Forwarder`] and one
//! client session's [`ForwardChannel`] to the primary (implemented by the
//! cluster crate).

use ladle_common::Lsn;

/// A cluster node's forwarding: installed on every cluster node.
pub trait Forwarder: Send + Sync {
    /// Whether writes sent here must run on another node now.
    fn forwards(&self) -> bool;
    /// A new link to the primary for the session of client connection
    /// `connection`, logged in as `user` from `host` (the primary lists
    /// the session under them).
    fn open(&self, connection: u32, user: &str, host: &str) -> Box<dyn ForwardChannel>;
    /// Waits (bounded) until this node has applied position `lsn`;
    /// `Err` says why the read cannot be served yet.
    fn wait_applied(&self, lsn: Lsn) -> Result<(), String>;
    /// `KILL [QUERY]` (`connection`) of connection `id`, which cluster
    /// node `node` gave out (see [`crate::connection_node`]), run on that
    /// node as `user` (`any`: the killer holds SUPER). `Err`: the node
    /// could not be asked (gone, unreachable).
    fn kill(
        &self,
        node: u32,
        id: u64,
        user: &str,
        any: bool,
        connection: bool,
    ) -> Result<KillOutcome, String>;
}

/// What a KILL did on the node that owns the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillOutcome {
    /// Killed (the statement, or the connection).
    Done,
    /// No such connection there (1094).
    Unknown,
    /// Another user's connection, and the killer lacks SUPER (1095).
    NotOwner,
}

/// One client session's link to the primary.
pub trait ForwardChannel: Send {
    /// Runs an encoded request on the primary. `continuing`: it must run
    /// in the same primary session as the previous one (an open
    /// transaction), or not at all. `patient`: it may wait on the primary
    /// for as long as it says (a named lock's timeout), not the cluster's
    /// bound for a stuck primary. `interrupted`: whether the client's
    /// statement was killed meanwhile (the primary is then told to stop
    /// it, and answers as a killed statement does).
    fn call(
        &mut self,
        request: &[u8],
        continuing: bool,
        patient: bool,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<Vec<u8>, ForwardFailure>;

    /// Why the link, and the primary's session behind it, is known to be
    /// gone (the primary died or no longer leads, or the link failed);
    /// `None` while usable.
    fn lost(&self) -> Option<String>;
}

/// Why a forwarded statement has no answer.
#[derive(Debug)]
pub enum ForwardFailure {
    /// It did not run (no primary, or the session's primary is gone).
    NotSent(String),
    /// It may or may not have run.
    Unknown(String),
}
