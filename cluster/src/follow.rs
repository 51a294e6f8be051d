//! Replica side of replication: connects to the primary, applies its
//! entries and schema changes in order at the same positions, acknowledges
//! each entry once persisted, and refuses anything from a stale term.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use ladle_common::{Lsn, TableDeltas};

use crate::ddl;
use crate::node::{Node, Role};
use crate::protocol::{self, ToPrimary, ToReplica};

/// The primary's frames, buffered: whether another frame is already here
/// decides when to sync.
type FrameReader = protocol::FrameReader<tokio::io::BufReader<tokio::net::tcp::OwnedReadHalf>>;

/// How a follow session ended.
pub(crate) enum FollowEnd {
    /// The connection failed or the primary went away: try again.
    Retry(String),
    /// An entry (row changes or a schema change) could not be applied
    /// here. Tried again after a reconnect like [`FollowEnd::Retry`], but
    /// said loudly: the same entry comes again, so a replica that keeps
    /// ending this way is stuck.
    ApplyFailed(String),
    /// This node has entries the primary never had.
    Diverged(String),
}

/// An entry the primary sent that this node could not apply.
#[derive(Debug)]
struct ApplyFailed(String);

impl std::fmt::Display for ApplyFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ApplyFailed {}

/// How a follow session that failed with `e` ended.
fn end_of(e: anyhow::Error) -> FollowEnd {
    match e.downcast_ref::<ApplyFailed>() {
        Some(failed) => FollowEnd::ApplyFailed(failed.0.clone()),
        None => FollowEnd::Retry(format!("{e:#}")),
    }
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
        Err(e) => {
            node.note_link_error(&e);
            end_of(e)
        }
    }
}

/// The most received entries applied together (see the `Entry` arm of
/// [`follow_inner`]).
const MAX_RUN: usize = 256;

/// A received entry (`lsn`, `changes`) and the entries of `term` already
/// received after it, up to [`MAX_RUN`]; the first other frame read (of
/// another kind or term, or the end of the stream: `None`) comes back to be
/// handled next.
async fn gather_run(
    rd: &mut FrameReader,
    term: u64,
    lsn: Lsn,
    changes: Vec<TableDeltas>,
) -> anyhow::Result<(Vec<(Lsn, Vec<TableDeltas>)>, Option<ToReplica>)> {
    let mut run = vec![(lsn, changes)];
    while run.len() < MAX_RUN && whole_frame_buffered(rd.get_ref().buffer()) {
        match rd.recv::<ToReplica>().await? {
            Some(ToReplica::Entry {
                term: t,
                lsn,
                changes,
            }) if t == term => run.push((lsn, changes)),
            other => return Ok((run, other)),
        }
    }
    Ok((run, None))
}

/// Applies a run of entries on one blocking thread as one storage write
/// ([`Storage::apply_replicated_run`](ladle_storage::Storage::apply_replicated_run):
/// one RocksDB batch, one dataflow batch), syncing the WAL when `sync`.
async fn apply_run(
    node: &Arc<Node>,
    run: Vec<(Lsn, Vec<TableDeltas>)>,
    sync: bool,
) -> anyhow::Result<()> {
    if let Some(delay) = apply_delay() {
        tokio::time::sleep(delay * run.len() as u32).await;
    }
    let storage = node.storage.clone();
    tokio::task::spawn_blocking(move || storage.apply_replicated_run(run, sync)).await??;
    Ok(())
}

/// Whether `buf` begins with a whole length-prefixed frame, so reading it
/// cannot wait on the network (a paused primary must not hold a replica
/// outside its `stop` check).
fn whole_frame_buffered(buf: &[u8]) -> bool {
    match buf.get(..4) {
        Some(len) => {
            let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
            buf.len() - 4 >= len
        }
        None => false,
    }
}

/// A primary answers the handshake within this.
const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

enum Handshake {
    Accepted {
        /// Buffered: whether another frame is already here decides when
        /// to sync.
        /// Boxed: the keys make the halves large.
        rd: Box<FrameReader>,
        wr: Box<protocol::FrameWriter<tokio::net::tcp::OwnedWriteHalf>>,
        applied: ladle_common::Lsn,
    },
    Refused(FollowEnd),
}

/// Connects, says where this node stands, and reads the primary's answer.
async fn handshake(node: &Arc<Node>, addr: &str, term: u64) -> anyhow::Result<Handshake> {
    let stream = crate::protocol::connect(addr).await?;
    stream.set_nodelay(true)?;
    let (mut rd, mut wr) = stream.into_split();
    let keys = crate::auth::connect(&node.config.secret, &mut rd, &mut wr).await?;
    let rd = tokio::io::BufReader::with_capacity(1 << 16, rd);
    let (mut rd, mut wr) = protocol::sealed(rd, wr, keys);
    // What the primary is told is persisted here: entries applied unsynced
    // by an earlier stream are made durable first.
    let applied = sync_applied(node, 0).await?;
    let hello = ToPrimary::Hello {
        node: node.config.node_id,
        applied,
        ddl_seq: node.ddl.count_at(applied),
        last_term: node.history.last_term(),
    };
    wr.send(&hello).await?;
    match rd.recv::<ToReplica>().await? {
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
    Ok(Handshake::Accepted {
        rd: Box::new(rd),
        wr: Box::new(wr),
        applied,
    })
}

/// Makes every applied entry durable (if some after `synced` may not be);
/// returns the applied LSN.
/// Test hook: `LADLE_REPLICATION_APPLY_DELAY_MS` makes a replica wait
/// that long before applying each entry, so tests can tell a read that
/// waits for the session's forwarded write from one that happens to come
/// after it.
fn apply_delay() -> Option<std::time::Duration> {
    static DELAY: std::sync::OnceLock<Option<std::time::Duration>> = std::sync::OnceLock::new();
    *DELAY.get_or_init(|| {
        let ms: u64 = std::env::var("LADLE_REPLICATION_APPLY_DELAY_MS")
            .ok()?
            .parse()
            .ok()?;
        (ms > 0).then(|| std::time::Duration::from_millis(ms))
    })
}

async fn sync_applied(node: &Arc<Node>, synced: Lsn) -> anyhow::Result<Lsn> {
    let storage = node.storage.clone();
    let applied = storage.last_lsn();
    if applied > synced {
        tokio::task::spawn_blocking(move || storage.sync_wal()).await??;
    }
    Ok(applied)
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
        Handshake::Accepted { rd, wr, applied } => (*rd, *wr, applied),
        Handshake::Refused(end) => return Ok(end),
    };
    let mut synced = applied;
    tracing::info!(primary = addr, term, applied, "following the primary");
    // A frame read ahead while gathering a run of entries, handled next.
    let mut next: Option<ToReplica> = None;
    loop {
        let received = match next.take() {
            Some(frame) => Some(frame),
            None => tokio::select! {
                r = rd.recv::<ToReplica>() => r?,
                _ = stop.wait_for(|s| *s) => return Ok(FollowEnd::Retry("stopped".into())),
            },
        };
        let Some(frame) = received else {
            return Ok(FollowEnd::Retry("the primary closed the stream".into()));
        };
        // Fencing: a replica follows one term; anything else is refused.
        let frame_term = match &frame {
            ToReplica::Entry { term, .. }
            | ToReplica::Ddl { term, .. }
            | ToReplica::Heartbeat { term, .. } => *term,
            ToReplica::Welcome { .. }
            | ToReplica::Reject { .. }
            | ToReplica::ForwardReady
            | ToReplica::Forwarded { .. }
            | ToReplica::BootstrapFile { .. }
            | ToReplica::BootstrapDone { .. }
            | ToReplica::Challenge { .. }
            | ToReplica::Proven { .. }
            | ToReplica::Killed { .. } => 0,
        };
        if frame_term != term || node.term() != term {
            return Ok(FollowEnd::Retry(format!(
                "refused an entry of term {frame_term}: following term {}",
                node.term()
            )));
        }
        match frame {
            ToReplica::Entry { lsn, changes, .. } => {
                // The entries already received after this one are applied
                // with it, on one blocking thread, as one storage write
                // (one RocksDB batch, at most one WAL sync, one dataflow
                // batch), and only the last is acknowledged (a replica
                // group-commits a backlog): one hand-off per entry made the
                // replica, not the WAL syncs, the limit of a synchronous
                // primary's write rate. The run is all or nothing, so what
                // is acknowledged and what views show never covers part
                // of it.
                let (run, ahead) = gather_run(&mut rd, term, lsn, changes).await?;
                next = ahead;
                let first = run[0].0;
                let last = run[run.len() - 1].0;
                let sync = next.is_none() && rd.get_ref().buffer().is_empty();
                apply_run(node, run, sync).await.map_err(|e| {
                    ApplyFailed(format!("applying entries {first}..={last}: {e:#}"))
                })?;
                node.primary_last.fetch_max(last, Ordering::AcqRel);
                node.history.note(&node.storage, term, first)?;
                if sync {
                    synced = last;
                    wr.send(&ToPrimary::Ack { applied: last }).await?;
                }
            }
            ToReplica::Ddl {
                after,
                seq,
                database,
                sql,
                settings,
                accounts,
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
                let record = ddl::DdlRecord {
                    database,
                    sql,
                    settings,
                    accounts,
                };
                let sql_text = if accounts {
                    "the account list".to_string()
                } else {
                    record.sql.clone()
                };
                tokio::task::spawn_blocking(move || ddl::apply_replicated(&applier, &record))
                    .await?
                    .map_err(|e| ApplyFailed(format!("replaying `{sql_text}` failed: {e}")))?;
                if node.ddl.count_at(after) != next + 1 {
                    return Err(ApplyFailed(format!(
                        "replaying `{sql_text}` recorded no schema change"
                    ))
                    .into());
                }
                let ack = ToPrimary::SchemaAck {
                    after,
                    count: next + 1,
                };
                wr.send(&ack).await?;
            }
            ToReplica::Heartbeat { last, .. } => {
                node.primary_last.store(last, Ordering::Release);
                synced = sync_applied(node, synced).await?;
                wr.send(&ToPrimary::Ack { applied: synced }).await?;
            }
            other => anyhow::bail!("unexpected frame from the primary: {other:?}"),
        }
        if matches!(node.role(), Role::Replica | Role::CatchingUp) {
            node.set_role(node.follower_role());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use ladle_common::{ColumnSchema, RowDelta, SqlType, TableDeltas, TableSchema, Value};
    use ladle_storage::Storage;
    use parking_lot::Mutex;
    use tokio::net::TcpListener;

    use super::*;
    use crate::{ClusterSecret, DdlApplier};

    /// An entry that could not be applied ends the session as
    /// `ApplyFailed` (logged as a warning and counted), anything else as
    /// `Retry`, however deep in the error's context it was.
    #[test]
    fn a_failed_apply_is_told_from_a_lost_connection() {
        let failed = anyhow::Error::from(ApplyFailed("entry 7: disk".into())).context("following");
        assert!(matches!(end_of(failed), FollowEnd::ApplyFailed(r) if r == "entry 7: disk"));
        let lost = anyhow::anyhow!("connection reset");
        assert!(matches!(end_of(lost), FollowEnd::Retry(r) if r.contains("reset")));
    }

    /// Runs replicated schema changes against storage directly, noting
    /// whether the node let them through.
    struct Applier {
        storage: Arc<Storage>,
        node: Mutex<Option<Arc<Node>>>,
        ran: Mutex<Vec<(String, bool)>>,
    }

    impl DdlApplier for Applier {
        fn apply(
            &self,
            _database: Option<&str>,
            _settings: &[(String, String)],
            sql: &str,
        ) -> Result<(), String> {
            let node = self.node.lock().clone().expect("node set");
            let writable = node.check_writable().is_ok();
            self.ran.lock().push((sql.to_string(), writable));
            create_t(&self.storage).map_err(|e| e.to_string())?;
            node.record_ddl(Some("d"), &[], sql, false);
            Ok(())
        }

        fn apply_accounts(&self, state: &str) -> Result<(), String> {
            let node = self.node.lock().clone().expect("node set");
            let writable = node.check_writable().is_ok();
            self.ran.lock().push((state.to_string(), writable));
            node.record_accounts(state, false);
            Ok(())
        }
    }

    /// `d.t (id INT PRIMARY KEY)`; its table id.
    fn create_t(storage: &Storage) -> ladle_storage::Result<u64> {
        storage.create_database("d", false)?;
        let int = SqlType::Int {
            bytes: 4,
            unsigned: false,
            display_width: None,
        };
        let schema = TableSchema {
            id: 0,
            database: "d".into(),
            name: "t".into(),
            columns: vec![ColumnSchema::new("id", int).not_null()],
            primary_key: Some(vec![0]),
            indexes: Vec::new(),
            version: 1,
        };
        Ok(storage.create_table(schema, false)?.id)
    }

    fn entry(term: u64, lsn: u64, table: u64, id: i64) -> ToReplica {
        ToReplica::Entry {
            term,
            lsn,
            changes: vec![TableDeltas {
                table,
                deltas: vec![RowDelta::Insert(vec![Value::Int(id)])],
            }],
        }
    }

    /// A fake primary of term 5 sends a schema change, two entries (each
    /// acknowledged once applied), then an entry of the older term 4: the
    /// replica refuses it and stops, having applied nothing of it.
    #[tokio::test]
    async fn a_replica_applies_in_order_acknowledges_and_refuses_a_stale_term() {
        let storage = Storage::in_memory();
        let applier = Arc::new(Applier {
            storage: storage.clone(),
            node: Mutex::new(None),
            ran: Mutex::new(Vec::new()),
        });
        let node = Node::unstarted(storage.clone(), applier.clone());
        *applier.node.lock() = Some(node.clone());
        node.term.store(5, Ordering::Release);
        // The same schema change gives the same table id on any node.
        let table = create_t(&Storage::in_memory()).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let primary = tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let (mut rd, mut wr) = stream.into_split();
            let secret = ClusterSecret::new(b"the test cluster secret").unwrap();
            let keys = crate::auth::accept(&secret, &mut rd, &mut wr)
                .await
                .unwrap();
            let (mut rd, mut wr) = protocol::sealed(rd, wr, keys);
            let hello = rd.recv::<ToPrimary>().await.unwrap();
            let welcome = ToReplica::Welcome {
                term: 5,
                history: vec![(5, 1)],
            };
            wr.send(&welcome).await.unwrap();
            let ddl = ToReplica::Ddl {
                term: 5,
                after: 0,
                seq: 0,
                database: Some("d".into()),
                sql: "CREATE TABLE t (id INT PRIMARY KEY)".into(),
                settings: Vec::new(),
                accounts: false,
            };
            wr.send(&ddl).await.unwrap();
            // The replay is acknowledged (semi-synchronous DDL).
            let mut acks = vec![rd.recv::<ToPrimary>().await.unwrap()];
            // So is an account list (installed, not run as SQL).
            let accounts = ToReplica::Ddl {
                term: 5,
                after: 0,
                seq: 1,
                database: None,
                sql: "{the account list}".into(),
                settings: Vec::new(),
                accounts: true,
            };
            wr.send(&accounts).await.unwrap();
            acks.push(rd.recv::<ToPrimary>().await.unwrap());
            for lsn in 1..=2 {
                wr.send(&entry(5, lsn, table, lsn as i64)).await.unwrap();
                acks.push(rd.recv::<ToPrimary>().await.unwrap());
            }
            wr.send(&entry(4, 3, table, 3)).await.unwrap();
            (hello, acks)
        });
        let (_stop_tx, stop) = tokio::sync::watch::channel(false);
        let end = follow(node.clone(), addr, 5, stop).await;
        let (hello, acks) = primary.await.unwrap();
        assert_eq!(
            hello,
            Some(ToPrimary::Hello {
                node: 2,
                applied: 0,
                ddl_seq: 0,
                last_term: 0
            })
        );
        assert_eq!(
            acks,
            vec![
                Some(ToPrimary::SchemaAck { after: 0, count: 1 }),
                Some(ToPrimary::SchemaAck { after: 0, count: 2 }),
                Some(ToPrimary::Ack { applied: 1 }),
                Some(ToPrimary::Ack { applied: 2 })
            ]
        );
        match end {
            FollowEnd::Retry(reason) => assert!(reason.contains("term 4"), "{reason}"),
            FollowEnd::Diverged(reason) => panic!("diverged: {reason}"),
            FollowEnd::ApplyFailed(reason) => panic!("apply failed: {reason}"),
        }
        assert_eq!(storage.last_lsn(), 2, "the stale entry was not applied");
        let t = storage.table("d", "t").expect("replayed table");
        assert_eq!(storage.scan(t.id).unwrap().len(), 2);
        // The schema change ran as replication (a replica refuses clients'
        // DDL), and is recorded here for replicas of this node.
        assert_eq!(
            *applier.ran.lock(),
            vec![
                ("CREATE TABLE t (id INT PRIMARY KEY)".to_string(), true),
                ("{the account list}".to_string(), true)
            ]
        );
        assert_eq!(node.ddl.count_at(0), 2);
        assert!(node.ddl.at(0, 1)[0].1.accounts);
        assert!(node.check_writable().is_err(), "a replica takes no writes");
        assert_eq!(node.history.all(), vec![(5, 1)]);
    }
}
