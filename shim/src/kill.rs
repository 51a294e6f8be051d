//! `KILL [CONNECTION | QUERY] id` (see [`crate::processes`]).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use sqlparser::tokenizer::Token;

use crate::error::{Result, ShimError, WireError};
use crate::exec::Engine;
use crate::forward::{Forwarder, KillOutcome};
use crate::output::Output;
use crate::session::Session;
use crate::tokens::word;

impl Engine {
    /// `KILL [CONNECTION | QUERY] id` (see [`crate::processes`]).
    pub(crate) fn kill(&self, s: &mut Session, t: &[Token]) -> Result<Output> {
        let (connection, from) = match word(t, 1).as_deref() {
            Some("QUERY") => (false, 2),
            Some("CONNECTION") => (true, 2),
            _ => (true, 1),
        };
        let text = crate::tokens::render_tokens(&t[from..]);
        let id = self
            .eval_constant(s, &crate::sqltext::parse_whole_expr(&text)?)?
            .as_i64()
            .and_then(|i| u64::try_from(i).ok())
            .ok_or_else(|| ShimError::WrongArguments("KILL".into()))?;
        let any = crate::privileges::has_global(self, s, crate::accounts::SUPER);
        let wire = |code, message| ShimError::Wire(WireError { code, message });
        let outcome =
            match self.node_elsewhere(id) {
                Some((node, forwarder)) => {
                    forwarder
                        .kill(node, id, &s.user, any, connection)
                        .map_err(|why| {
                            wire(
                        crate::error::ER_NO_SUCH_THREAD,
                        format!("Unknown thread id: {id} (its node {node} cannot be asked: {why})"),
                    )
                        })?
                }
                None => self.kill_local(id, &s.user, any, connection),
            };
        match outcome {
            KillOutcome::Unknown => Err(wire(
                crate::error::ER_NO_SUCH_THREAD,
                format!("Unknown thread id: {id}"),
            )),
            KillOutcome::NotOwner => Err(wire(
                crate::error::ER_KILL_DENIED,
                format!("You are not owner of thread {id}"),
            )),
            // Killing one's own connection answers as MariaDB does.
            KillOutcome::Done if connection && id == u64::from(s.connection_id) => Err(wire(
                crate::error::ER_CONNECTION_KILLED,
                "Connection was killed".into(),
            )),
            KillOutcome::Done => Ok(Output::ok()),
        }
    }

    /// The cluster node that gave out connection `id` when it is not this
    /// one, with the forwarding that reaches it; `None` on a single node
    /// or for this node's own connections.
    fn node_elsewhere(&self, id: u64) -> Option<(u32, &Arc<dyn Forwarder>)> {
        let ours = self.connection_node.load(Ordering::SeqCst);
        let node = crate::connection_node(id);
        if ours == 0 || node == ours {
            return None;
        }
        Some((node, self.forwarder.get()?))
    }
}
