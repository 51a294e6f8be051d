//! Primary side of replication: accepts replicas and streams each one the
//! change log (and schema changes) from where it stands, in order.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use ladle_common::{Lsn, TableDeltas};
use ladle_storage::StorageError;
use tokio::net::{TcpListener, TcpStream};

use crate::node::{Node, ReplicaProgress, Role};
use crate::protocol::{self, ToPrimary, ToReplica};

/// Entries read from the change log per round.
const CHUNK: usize = 256;
/// A quiet stream sends a heartbeat this often.
const HEARTBEAT: Duration = Duration::from_millis(200);

pub(crate) async fn serve(node: Arc<Node>, listener: TcpListener) {
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                let node = node.clone();
                tokio::spawn(async move {
                    if let Err(e) = serve_replica(node, stream, peer).await {
                        tracing::info!(%peer, error = %e, "replication stream ended");
                    }
                });
            }
            Err(e) => {
                tracing::warn!(error = %e, "replication accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Removes a replica's progress when its stream ends.
struct Registration {
    node: Arc<Node>,
    id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.node.replicas.lock().retain(|(id, _)| *id != self.id);
    }
}

async fn serve_replica(
    node: Arc<Node>,
    stream: TcpStream,
    peer: std::net::SocketAddr,
) -> anyhow::Result<()> {
    stream.set_nodelay(true)?;
    let (mut rd, mut wr) = stream.into_split();
    let keys = match crate::auth::accept(&node.config.secret, &mut rd, &mut wr).await {
        Ok(keys) => keys,
        Err(why) => {
            match why {
                crate::auth::Refused::Secret(_) => node.metrics.auth_refused.inc(),
                crate::auth::Refused::Version(_) => node.metrics.protocol_mismatches.inc(),
            }
            tracing::warn!(%peer, "replication connection refused: {why}");
            return Ok(());
        }
    };
    let (mut rd, mut wr) = protocol::sealed(rd, wr, keys);
    let (replica, applied, ddl_seq, last_term) = match rd.recv().await? {
        Some(ToPrimary::Hello {
            node,
            applied,
            ddl_seq,
            last_term,
        }) => (node, applied, ddl_seq, last_term),
        Some(ToPrimary::ForwardHello {
            node: replica,
            term,
            client,
        }) => {
            return crate::forward::serve(node, replica, term, client, rd, wr).await;
        }
        Some(ToPrimary::BootstrapHello { node: replica }) => {
            return crate::bootstrap::serve(node, replica, wr).await;
        }
        Some(ToPrimary::Kill {
            id,
            user,
            any,
            connection,
        }) => {
            return crate::kill::serve(&node, id, &user, any, connection, wr).await;
        }
        _ => anyhow::bail!("the replica did not say hello"),
    };
    let term = node.term();
    if node.role() != Role::Primary {
        return wr.reject(node.not_primary(), false).await;
    }
    let my_last = node.storage.last_lsn();
    if node.history.diverges(last_term, applied, my_last) {
        let reason = format!(
            "node {replica} holds entries up to {applied} of term {last_term} that the \
             primary (node {}, term {term}, at {my_last}) never had",
            node.config.node_id
        );
        tracing::warn!(replica, "{reason}");
        return wr.reject(reason, true).await;
    }
    // Entries the replica lacks that this log no longer keeps: it must be
    // bootstrapped from a checkpoint.
    let first_kept = node.storage.first_log_lsn()?;
    if my_last > applied && first_kept.is_none_or(|first| first > applied + 1) {
        let reason = format!(
            "node {replica} is at {applied}; the primary (node {}) keeps change-log entries \
             from {} only",
            node.config.node_id,
            first_kept.map_or("none".to_string(), |f| f.to_string())
        );
        tracing::info!(replica, "{reason}");
        return wr.reject(reason, true).await;
    }
    let welcome = ToReplica::Welcome {
        term,
        history: node.history.all(),
    };
    wr.send(&welcome).await?;
    // Where the primary stands, before any entry: a replica far behind
    // reports itself catching-up from the start (it learned the primary's
    // position only from the entries it received, so a joiner 1,130
    // entries behind called itself a replica while it replayed them).
    wr.send(&ToReplica::Heartbeat {
        term,
        last: node.storage.last_lsn(),
    })
    .await?;
    tracing::info!(replica, applied, term, "replica connected");

    let stream_id = node.next_stream.fetch_add(1, Ordering::Relaxed);
    node.replicas.lock().push((
        stream_id,
        ReplicaProgress {
            node_id: replica,
            acked: applied,
            schema: (applied, ddl_seq),
        },
    ));
    let _registration = Registration {
        node: node.clone(),
        id: stream_id,
    };
    // Acknowledgements come back on their own task.
    let acks = {
        let node = node.clone();
        tokio::spawn(async move {
            while let Ok(Some(frame)) = rd.recv::<ToPrimary>().await {
                let mut replicas = node.replicas.lock();
                let Some((_, p)) = replicas.iter_mut().find(|(id, _)| *id == stream_id) else {
                    break;
                };
                match frame {
                    ToPrimary::Ack { applied } => p.acked = p.acked.max(applied),
                    ToPrimary::SchemaAck { after, count } => {
                        p.schema = p.schema.max((after, count));
                    }
                    _ => break,
                }
                let needed = node.config.sync_replicas;
                let acks = replicas.iter().map(|(_, p)| (p.node_id, p.acked));
                node.ack_waiters
                    .confirm(crate::ack_wait::confirmed_by(acks, needed));
                node.acked.notify_all();
            }
        })
    };
    let out = send_log(&node, &mut wr, term, applied, ddl_seq, &acks).await;
    acks.abort();
    out
}

/// Streams from position (`lsn`, `ddl_seq`) until the term ends or the
/// replica goes away.
async fn send_log(
    node: &Arc<Node>,
    wr: &mut protocol::TcpWriter,
    term: u64,
    mut lsn: Lsn,
    mut ddl_seq: u32,
    acks: &tokio::task::JoinHandle<()>,
) -> anyhow::Result<()> {
    let mut committed = node.committed.subscribe();
    loop {
        if node.role() != Role::Primary || node.term() != term {
            anyhow::bail!("no longer the primary of term {term}");
        }
        if acks.is_finished() {
            anyhow::bail!("the replica closed its side");
        }
        ddl_seq = send_ddl(node, wr, term, lsn, ddl_seq).await?;
        let entries = read_entries(node, lsn).await?;
        if entries.is_empty() {
            let hb = ToReplica::Heartbeat {
                term,
                last: node.storage.last_lsn(),
            };
            wr.send(&hb).await?;
            let _ = tokio::time::timeout(HEARTBEAT, committed.changed()).await;
            continue;
        }
        for (entry_lsn, changes) in entries {
            if entry_lsn != lsn + 1 {
                let reason = format!(
                    "the change log here no longer holds entry {} (next is {entry_lsn}): \
                     the replica must be re-bootstrapped",
                    lsn + 1
                );
                wr.reject(reason.clone(), false).await?;
                anyhow::bail!(reason);
            }
            let entry = ToReplica::Entry {
                term,
                lsn: entry_lsn,
                changes,
            };
            wr.send(&entry).await?;
            lsn = entry_lsn;
            ddl_seq = send_ddl(node, wr, term, lsn, 0).await?;
        }
    }
}

/// Sends the schema changes at `after` from `from` on; returns the next
/// sequence number there.
async fn send_ddl(
    node: &Node,
    wr: &mut protocol::TcpWriter,
    term: u64,
    after: Lsn,
    from: u32,
) -> anyhow::Result<u32> {
    let mut next = from;
    for (seq, record) in node.ddl.at(after, from) {
        let frame = ToReplica::Ddl {
            term,
            after,
            seq,
            database: record.database,
            sql: record.sql,
            settings: record.settings,
            accounts: record.accounts,
        };
        wr.send(&frame).await?;
        next = seq + 1;
    }
    Ok(next)
}

/// Up to [`CHUNK`] change-log entries after `after`: from memory when they
/// are recent (a replica keeping up), else read on a blocking thread
/// (RocksDB).
async fn read_entries(
    node: &Arc<Node>,
    after: Lsn,
) -> anyhow::Result<Vec<(Lsn, Vec<TableDeltas>)>> {
    if let Some(recent) = node.storage.read_recent_log(after, CHUNK) {
        return Ok(recent?);
    }
    let storage = node.storage.clone();
    let entries = tokio::task::spawn_blocking(move || {
        let mut out = Vec::new();
        let read = storage.read_log(after, &mut |lsn, changes| {
            out.push((lsn, changes));
            if out.len() >= CHUNK {
                // Stops the scan; not an error for the caller.
                return Err(StorageError::Internal(CHUNK_FULL.into()));
            }
            Ok(())
        });
        match read {
            Err(StorageError::Internal(m)) if m == CHUNK_FULL => Ok(out),
            Err(e) => Err(e),
            Ok(()) => Ok(out),
        }
    })
    .await??;
    Ok(entries)
}

const CHUNK_FULL: &str = "replication chunk full";

#[cfg(test)]
mod tests {
    use ladle_common::{ColumnSchema, RowDelta, SqlType, TableDeltas, TableSchema, Value};
    use ladle_storage::Storage;

    use super::*;
    use crate::node::tests::NoDdl;

    /// A primary holding three entries tells a replica that has none where
    /// it stands before it streams the first entry, so the replica reports
    /// itself catching-up from the start (it knew the primary's position
    /// only from the entries it had received).
    #[tokio::test]
    async fn a_replica_learns_the_primarys_position_before_any_entry() {
        let storage = Storage::in_memory();
        storage.create_database("d", false).unwrap();
        let int = SqlType::Int {
            bytes: 4,
            unsigned: false,
            display_width: None,
        };
        let table = storage
            .create_table(
                TableSchema {
                    id: 0,
                    database: "d".into(),
                    name: "t".into(),
                    columns: vec![ColumnSchema::new("id", int).not_null()],
                    primary_key: Some(vec![0]),
                    indexes: Vec::new(),
                    version: 1,
                },
                false,
            )
            .unwrap()
            .id;
        for lsn in 1..=3 {
            let changes = vec![TableDeltas {
                table,
                deltas: vec![RowDelta::Insert(vec![Value::Int(lsn as i64)])],
            }];
            storage.apply_replicated(lsn, changes, false).unwrap();
        }
        let node = Node::unstarted(storage.clone(), Arc::new(NoDdl));
        node.term.store(1, Ordering::Release);
        node.set_role(Role::Primary);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(serve(node.clone(), listener));

        let stream = TcpStream::connect(addr).await.unwrap();
        let (mut rd, mut wr) = stream.into_split();
        let keys = crate::auth::connect(&node.config.secret, &mut rd, &mut wr)
            .await
            .unwrap();
        let (mut rd, mut wr) = protocol::sealed(rd, wr, keys);
        wr.send(&ToPrimary::Hello {
            node: 3,
            applied: 0,
            ddl_seq: 0,
            last_term: 0,
        })
        .await
        .unwrap();
        let welcome = rd.recv::<ToReplica>().await.unwrap();
        assert!(
            matches!(welcome, Some(ToReplica::Welcome { term: 1, .. })),
            "{welcome:?}"
        );
        let first = rd.recv::<ToReplica>().await.unwrap();
        assert_eq!(first, Some(ToReplica::Heartbeat { term: 1, last: 3 }));
        server.abort();
    }
}
