//! Replica side of replication: connects to the primary, applies its
//! entries and schema changes in order at the same positions, acknowledges
//! each entry once persisted, and refuses anything from a stale term.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::net::TcpStream;

use crate::protocol::{self, ToPrimary, ToReplica};
use crate::{ddl, Node, Role};

/// How a follow session ended.
pub(crate) enum FollowEnd {
    /// The connection failed or the primary went away: try again.
    Retry(String),
    /// This node has entries the primary never had.
    Diverged(String),
}

/// Follows the primary of `term` at `addr` until the stream ends.
/// `stop` turning true ends it between two frames (never while an entry is
/// being applied).
pub(crate) async fn follow(
    node: Arc<Node>,
    addr: String,
    term: u64,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> FollowEnd {
    match follow_inner(&node, &addr, term, &mut stop).await {
        Ok(end) => end,
        Err(e) => FollowEnd::Retry(format!("{e:#}")),
    }
}

/// A primary answers the handshake within this.
const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

enum Handshake {
    Accepted {
        rd: tokio::net::tcp::OwnedReadHalf,
        wr: tokio::net::tcp::OwnedWriteHalf,
        applied: ladle_common::Lsn,
    },
    Refused(FollowEnd),
}

/// Connects, says where this node stands, and reads the primary's answer.
async fn handshake(node: &Arc<Node>, addr: &str, term: u64) -> anyhow::Result<Handshake> {
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let (mut rd, mut wr) = stream.into_split();
    let applied = node.storage.last_lsn();
    let hello = ToPrimary::Hello {
        node: node.config.node_id,
        applied,
        ddl_seq: node.ddl.count_at(applied),
        last_term: node.history.last_term(),
    };
    protocol::send(&mut wr, &hello).await?;
    match protocol::recv::<ToReplica>(&mut rd).await? {
        Some(ToReplica::Welcome {
            term: their_term,
            history,
        }) => {
            if their_term != term {
                return Ok(Handshake::Refused(FollowEnd::Retry(format!(
                    "expected the primary of term {term}, found term {their_term}"
                ))));
            }
            for (t, start) in history {
                node.history.note(&node.storage, t, start)?;
            }
        }
        Some(ToReplica::Reject {
            reason,
            diverged: true,
        }) => return Ok(Handshake::Refused(FollowEnd::Diverged(reason))),
        Some(ToReplica::Reject { reason, .. }) => {
            return Ok(Handshake::Refused(FollowEnd::Retry(reason)))
        }
        other => anyhow::bail!("unexpected first frame from the primary: {other:?}"),
    }
    Ok(Handshake::Accepted { rd, wr, applied })
}

async fn follow_inner(
    node: &Arc<Node>,
    addr: &str,
    term: u64,
    stop: &mut tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<FollowEnd> {
    // The handshake applies nothing, so it may be cut short: by `stop`, or
    // by a primary that does not answer (paused, or gone).
    let handshake = tokio::select! {
        r = tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake(node, addr, term)) => match r {
            Ok(r) => r?,
            Err(_) => return Ok(FollowEnd::Retry(format!("{addr} did not answer in time"))),
        },
        _ = stop.wait_for(|s| *s) => return Ok(FollowEnd::Retry("stopped".into())),
    };
    let (mut rd, mut wr, applied) = match handshake {
        Handshake::Accepted { rd, wr, applied } => (rd, wr, applied),
        Handshake::Refused(end) => return Ok(end),
    };
    tracing::info!(primary = addr, term, applied, "following the primary");
    loop {
        let received = tokio::select! {
            r = protocol::recv::<ToReplica>(&mut rd) => r?,
            _ = stop.wait_for(|s| *s) => return Ok(FollowEnd::Retry("stopped".into())),
        };
        let Some(frame) = received else {
            return Ok(FollowEnd::Retry("the primary closed the stream".into()));
        };
        // Fencing: a replica follows one term; anything else is refused.
        let frame_term = match &frame {
            ToReplica::Entry { term, .. }
            | ToReplica::Ddl { term, .. }
            | ToReplica::Heartbeat { term, .. } => *term,
            ToReplica::Welcome { .. } | ToReplica::Reject { .. } => 0,
        };
        if frame_term != term || node.term() != term {
            return Ok(FollowEnd::Retry(format!(
                "refused an entry of term {frame_term}: following term {}",
                node.term()
            )));
        }
        match frame {
            ToReplica::Entry { lsn, changes, .. } => {
                let storage = node.storage.clone();
                tokio::task::spawn_blocking(move || storage.apply_replicated(lsn, changes))
                    .await??;
                node.primary_last.fetch_max(lsn, Ordering::AcqRel);
                node.history.note(&node.storage, term, lsn)?;
                protocol::send(&mut wr, &ToPrimary::Ack { applied: lsn }).await?;
            }
            ToReplica::Ddl {
                after,
                seq,
                database,
                sql,
                ..
            } => {
                let here = node.storage.last_lsn();
                let next = node.ddl.count_at(after);
                if after != here || seq > next {
                    anyhow::bail!(
                        "schema change {seq} after {after} arrived out of order (here: {here}, {next})"
                    );
                }
                if seq < next {
                    continue; // already run here
                }
                let applier = node
                    .applier
                    .get()
                    .cloned()
                    .ok_or_else(|| anyhow::anyhow!("no schema-change applier installed"))?;
                let sql_text = sql.clone();
                tokio::task::spawn_blocking(move || {
                    ddl::apply_replicated(&applier, database.as_deref(), &sql)
                })
                .await?
                .map_err(|e| anyhow::anyhow!("replaying `{sql_text}` failed: {e}"))?;
                if node.ddl.count_at(after) != next + 1 {
                    anyhow::bail!("replaying `{sql_text}` recorded no schema change");
                }
            }
            ToReplica::Heartbeat { last, .. } => {
                node.primary_last.store(last, Ordering::Release);
                let applied = node.storage.last_lsn();
                protocol::send(&mut wr, &ToPrimary::Ack { applied }).await?;
            }
            other => anyhow::bail!("unexpected frame from the primary: {other:?}"),
        }
        if matches!(node.role(), Role::Replica | Role::CatchingUp) {
            node.set_role(node.follower_role());
        }
    }
}
