//! KILL across the cluster: a connection id's high bits name the node that
//! gave it out (the SQL front end's `connection_node`), so a KILL sent to
//! any node for another node's connection is sent on to that node's
//! replication listener on a connection of its own (first and only frame
//! [`ToPrimary::Kill`], answered by [`ToReplica::Killed`]), where the front
//! end kills it as if the KILL had been sent there. The killer's user name
//! and whether it holds SUPER travel with it: the cluster secret
//! authenticates the sending node, and the owner check is the same as for
//! a local KILL.

use std::sync::Arc;
use std::time::Instant;

use crate::forward::{open_link, read_frame, write_frame};
use crate::node::Node;
use crate::protocol::{KillOutcome, ToPrimary, ToReplica, CONNECT_TIMEOUT};

impl Node {
    /// KILL [QUERY] (`connection`) of connection `id` of cluster node
    /// `owner`, as `user` (`any`: who holds SUPER), run there. A node the
    /// cluster does not list has no connections (`Unknown`); `Err` says
    /// why a listed node could not be asked. Blocking, bounded by a few
    /// seconds (the statement's thread waits).
    pub fn kill_on(
        &self,
        owner: u64,
        id: u64,
        user: &str,
        any: bool,
        connection: bool,
    ) -> Result<KillOutcome, String> {
        let addr = self
            .members()
            .into_iter()
            .find(|m| m.node_id == owner)
            .map(|m| m.replication);
        let Some(addr) = addr else {
            return Ok(KillOutcome::Unknown);
        };
        let started = Instant::now();
        let (mut stream, mut keys) = open_link(self, &addr, started)?;
        let kill = ToPrimary::Kill {
            id,
            user: user.to_string(),
            any,
            connection,
        };
        write_frame(&mut stream, Some(&mut keys.sealer), &kill).map_err(|e| e.to_string())?;
        let answer = read_frame(&mut stream, Some(&mut keys.opener), || {
            (started.elapsed() > 2 * CONNECT_TIMEOUT)
                .then(|| format!("node {owner} did not answer"))
        })?;
        match answer {
            ToReplica::Killed { outcome } => Ok(outcome),
            ToReplica::Reject { reason, .. } => Err(reason),
            other => Err(format!("unexpected answer from node {owner}: {other:?}")),
        }
    }
}

/// The listener's side: kills its connection `id` through the front end
/// and answers.
pub(crate) async fn serve(
    node: &Arc<Node>,
    id: u64,
    user: &str,
    any: bool,
    connection: bool,
    mut wr: crate::protocol::TcpWriter,
) -> anyhow::Result<()> {
    let Some(target) = node.forward_target.get() else {
        return wr
            .reject("this node takes no KILL yet (starting)".into(), false)
            .await;
    };
    // (Off the async workers: a KILL CONNECTION of a forwarded session is
    // sent on to its replica, which takes a connection of its own.)
    let (target, killer) = (target.clone(), user.to_string());
    let outcome = tokio::task::spawn_blocking(move || target.kill(id, &killer, any, connection))
        .await
        .map_err(|e| anyhow::anyhow!("a KILL from another node failed: {e}"))?;
    tracing::info!(id, user, connection, ?outcome, "KILL from another node");
    wr.send(&ToReplica::Killed { outcome }).await?;
    Ok(())
}
