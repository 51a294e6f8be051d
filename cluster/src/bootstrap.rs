//! Bootstrap: a node that cannot follow the primary from its own log (it
//! holds a tail the primary never had, or the primary no longer keeps the
//! entries it lacks, or it is new and far behind) replaces its database
//! with a checkpoint of the primary's, streamed over the replication
//! listener, and restarts itself over it.
//!
//! ```text
//! node    -> primary   BootstrapHello { node }
//! primary -> node      BootstrapFile { name, offset, data }...  BootstrapDone { lsn, .. }
//! ```
//!
//! The primary takes a RocksDB checkpoint (SST files hard-linked, with no
//! write or schema change in progress: rows, catalog, schema and term
//! history, change log) into `<data_dir>/bootstrap-out-<n>` and streams its
//! files. The node writes them to `<data_dir>/bootstrap.incoming`, syncs
//! them, renames the directory to `bootstrap.ready` (the commit point) and
//! re-executes its own binary with the same arguments (same pid). At start
//! ([`install_pending`]), before storage opens, `bootstrap.ready` replaces
//! `<data_dir>/db`, and the node's view snapshots (of the discarded state)
//! are replaced by the primary's, shipped with the checkpoint (files named
//! `views/...`): the primary takes a view snapshot just before the
//! checkpoint, so the node's recovery loads it and replays the
//! checkpoint's change log after it, and its reads start warm. Without
//! one (a primary without durable storage) the views fill on demand.
//! The node then follows the primary from the checkpoint's LSN.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ladle_common::Lsn;
use tokio::io::AsyncReadExt;

use crate::node::{Node, Role};
use crate::protocol::{self, ToPrimary, ToReplica};

const INCOMING: &str = "bootstrap.incoming";
/// The view snapshot's files within a bootstrap (a directory of the
/// incoming copy, moved to the snapshot directory at install).
const VIEWS: &str = "views";
const READY: &str = "bootstrap.ready";
/// Bytes per `BootstrapFile` frame.
const CHUNK: usize = 1 << 20;
/// How long the primary keeps the change log after a checkpoint it sent.
const BOOTSTRAP_HOLD: Duration = Duration::from_secs(120);
/// A primary that sends nothing for this long has failed the bootstrap.
const SILENCE: Duration = Duration::from_secs(30);

/// At start, before storage opens: installs a bootstrap received before
/// the restart (`<data_dir>/bootstrap.ready` becomes `<data_dir>/db`;
/// `snapshot_dir`, the view snapshots of the old state, is removed) and
/// clears leftovers of interrupted ones. Returns whether one was installed.
pub fn install_pending(data_dir: &Path, snapshot_dir: &Path) -> anyhow::Result<bool> {
    let _ = std::fs::remove_dir_all(data_dir.join(INCOMING));
    if let Ok(entries) = std::fs::read_dir(data_dir) {
        for e in entries.flatten() {
            if e.file_name()
                .to_string_lossy()
                .starts_with("bootstrap-out-")
            {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    let ready = data_dir.join(READY);
    if !ready.exists() {
        return Ok(false);
    }
    let db = data_dir.join("db");
    if db.exists() {
        std::fs::remove_dir_all(&db)?;
    }
    if snapshot_dir.exists() {
        std::fs::remove_dir_all(snapshot_dir)?;
    }
    let views = ready.join(VIEWS);
    let with_views = views.exists();
    if with_views {
        std::fs::rename(&views, snapshot_dir)?;
    }
    std::fs::rename(&ready, &db)?;
    sync_dir(data_dir)?;
    tracing::warn!(
        data_dir = %data_dir.display(),
        with_views,
        "re-bootstrapped: this node's database is now the copy of the primary's \
         checkpoint received before the restart (its view snapshot too, when \
         with_views); its old data and view snapshots are gone"
    );
    Ok(true)
}

/// A file name received in a bootstrap: relative, no `..`.
fn safe_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != "..")
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// The primary's side: checkpoint, stream, clean up.
pub(crate) async fn serve(
    node: Arc<Node>,
    replica: u64,
    mut wr: crate::protocol::TcpWriter,
) -> anyhow::Result<()> {
    if node.role() != Role::Primary {
        return wr.reject(node.not_primary(), false).await;
    }
    let n = node.next_stream.fetch_add(1, Ordering::Relaxed);
    let dir = node.config.data_dir.join(format!("bootstrap-out-{n}"));
    let _ = std::fs::remove_dir_all(&dir);
    let started = Instant::now();
    let storage = node.storage.clone();
    let target = dir.clone();
    // Keep the entries after the checkpoint until the node follows on
    // (held from before it, so no trim can slip in between).
    let before = node.storage.last_lsn();
    node.bootstrap_holds
        .lock()
        .push((before, Instant::now() + BOOTSTRAP_HOLD));
    node.storage.lower_log_floor(before);
    // The view snapshot first: at or before the checkpoint, whose change
    // log keeps every entry after `before` (held above), so the node's
    // recovery replays from the snapshot on.
    let views = node
        .config
        .data_dir
        .join(format!("bootstrap-out-{n}-{VIEWS}"));
    let _ = std::fs::remove_dir_all(&views);
    let view_lsn = match node.view_snapshots.get().cloned() {
        Some(source) => {
            let into = views.clone();
            match tokio::task::spawn_blocking(move || source.link_into(&into)).await? {
                Ok(lsn) => Some(lsn),
                Err(e) => {
                    tracing::warn!(error = %e, "no view snapshot for the bootstrap: its views start cold");
                    let _ = std::fs::remove_dir_all(&views);
                    None
                }
            }
        }
        None => None,
    };
    let lsn = tokio::task::spawn_blocking(move || storage.checkpoint(&target)).await??;
    let mut sent = stream_dir(&dir, "", &mut wr).await;
    if view_lsn.is_some() {
        sent = match sent {
            Ok((f, b)) => stream_dir(&views, VIEWS, &mut wr)
                .await
                .map(|(vf, vb)| (f + vf, b + vb)),
            Err(e) => Err(e),
        };
    }
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&views);
    let (files, bytes) = sent?;
    wr.send(&ToReplica::BootstrapDone { lsn, files, bytes })
        .await?;
    node.metrics.bootstraps_sent.inc();
    tracing::info!(
        replica,
        lsn,
        ?view_lsn,
        files,
        mb = format_args!("{:.1}", bytes as f64 / 1e6),
        seconds = format_args!("{:.2}", started.elapsed().as_secs_f64()),
        "sent a checkpoint to bootstrap a replica"
    );
    Ok(())
}

/// Streams every file under `dir` (subdirectories too), named by its path
/// below `dir` after `prefix/`; returns how many files and bytes.
async fn stream_dir(
    dir: &Path,
    prefix: &str,
    wr: &mut crate::protocol::TcpWriter,
) -> anyhow::Result<(u32, u64)> {
    let mut files = 0u32;
    let mut bytes = 0u64;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let base = entry.file_name().to_string_lossy().into_owned();
        let name = if prefix.is_empty() {
            base
        } else {
            format!("{prefix}/{base}")
        };
        if entry.file_type()?.is_dir() {
            let (f, b) = Box::pin(stream_dir(&entry.path(), &name, wr)).await?;
            files += f;
            bytes += b;
            continue;
        }
        let mut f = tokio::fs::File::open(entry.path()).await?;
        let mut offset = 0u64;
        loop {
            let mut data = vec![0u8; CHUNK];
            let n = f.read(&mut data).await?;
            data.truncate(n);
            // An empty file still needs one frame to exist on the node.
            if n == 0 && offset > 0 {
                break;
            }
            wr.send(&ToReplica::BootstrapFile {
                name: name.clone(),
                offset,
                data,
            })
            .await?;
            offset += n as u64;
            if n == 0 {
                break;
            }
        }
        files += 1;
        bytes += offset;
    }
    Ok((files, bytes))
}

/// The node's side: fetches a checkpoint from the primary at `addr` into
/// `<data_dir>/bootstrap.ready` and returns its LSN (the caller restarts
/// the process to install it).
pub(crate) async fn fetch(node: &Arc<Node>, addr: &str) -> anyhow::Result<Lsn> {
    let started = Instant::now();
    let incoming: PathBuf = node.config.data_dir.join(INCOMING);
    let _ = std::fs::remove_dir_all(&incoming);
    std::fs::create_dir_all(&incoming)?;
    let stream = crate::protocol::connect(addr).await?;
    stream.set_nodelay(true)?;
    let (rd, mut wr) = stream.into_split();
    let mut rd = tokio::io::BufReader::with_capacity(1 << 20, rd);
    let keys = crate::auth::connect(&node.config.secret, &mut rd, &mut wr).await?;
    let (mut rd, mut wr) = protocol::sealed(rd, wr, keys);
    wr.send(&ToPrimary::BootstrapHello {
        node: node.config.node_id,
    })
    .await?;
    let mut open: Option<(String, std::fs::File)> = None;
    // Directories made for the files (synced with the files).
    let mut dirs: Vec<PathBuf> = Vec::new();
    let (lsn, files, bytes) = loop {
        let frame = tokio::time::timeout(SILENCE, rd.recv::<ToReplica>())
            .await
            .map_err(|_| anyhow::anyhow!("the primary went silent during the bootstrap"))??;
        match frame {
            Some(ToReplica::BootstrapFile { name, offset, data }) => {
                anyhow::ensure!(safe_name(&name), "bad file name {name:?} in a bootstrap");
                if offset == 0 || open.as_ref().is_none_or(|(n, _)| *n != name) {
                    if let Some((_, f)) = open.take() {
                        f.sync_all()?;
                    }
                    let path = incoming.join(&name);
                    if let Some(parent) = path.parent() {
                        if !parent.exists() {
                            std::fs::create_dir_all(parent)?;
                            dirs.push(parent.to_path_buf());
                        }
                    }
                    let f = std::fs::File::create(path)?;
                    open = Some((name, f));
                }
                let (_, f) = open.as_mut().expect("open");
                f.write_all(&data)?;
            }
            Some(ToReplica::BootstrapDone { lsn, files, bytes }) => break (lsn, files, bytes),
            Some(ToReplica::Reject { reason, .. }) => anyhow::bail!("bootstrap refused: {reason}"),
            Some(other) => anyhow::bail!("unexpected frame during a bootstrap: {other:?}"),
            None => anyhow::bail!("the primary closed the bootstrap stream"),
        }
    };
    if let Some((_, f)) = open.take() {
        f.sync_all()?;
    }
    for dir in dirs.iter().rev() {
        sync_dir(dir)?;
    }
    sync_dir(&incoming)?;
    let ready = node.config.data_dir.join(READY);
    let _ = std::fs::remove_dir_all(&ready);
    std::fs::rename(&incoming, &ready)?;
    sync_dir(&node.config.data_dir)?;
    tracing::warn!(
        node = node.config.node_id,
        lsn,
        files,
        mb = format_args!("{:.1}", bytes as f64 / 1e6),
        seconds = format_args!("{:.2}", started.elapsed().as_secs_f64()),
        "received the primary's checkpoint; restarting over it"
    );
    Ok(lsn)
}

/// The arguments [`restart_self`] runs the binary with, when set.
static RESTART_ARGS: std::sync::OnceLock<Vec<std::ffi::OsString>> = std::sync::OnceLock::new();

/// The arguments (without the program) a restart after a bootstrap runs
/// with instead of this process's own: the server's, with the addresses
/// its listeners bound, so that a node started on port 0 comes back on
/// the same ports (its peers and clients know those). Set once.
pub fn set_restart_args(args: Vec<std::ffi::OsString>) {
    let _ = RESTART_ARGS.set(args);
}

/// Replaces this process with a fresh run of the same binary and
/// arguments (same pid; open files and sockets are close-on-exec; see
/// [`set_restart_args`]), which installs the received checkpoint before
/// opening storage.
pub(crate) fn restart_self() -> anyhow::Error {
    use std::os::unix::process::CommandExt;
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => return e.into(),
    };
    let args = RESTART_ARGS
        .get()
        .cloned()
        .unwrap_or_else(|| std::env::args_os().skip(1).collect());
    let err = std::process::Command::new(exe).args(args).exec();
    anyhow::anyhow!("restarting after the bootstrap failed: {err}")
}
