//! The snapshot directory shared by the store and its epoch writer: file
//! and directory names, the in-memory state of the published epochs, and
//! the file I/O both do (writing and verifying node files, collecting
//! garbage). The store owns it; an [`EpochWriter`](super::EpochWriter)
//! holds it while writing an epoch and publishes into it.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use tracing::{debug, warn};

use super::error::{IoContext, Result};
use super::format::{self, FileEntry, FileMeta, Manifest};
use super::{Compression, NodeId, SnapshotConfig};

pub(super) const MANIFEST_NAME: &str = "MANIFEST";
pub(super) const MANIFEST_TMP_NAME: &str = "MANIFEST.tmp";

/// What a snapshot store and its epoch writers share: the directory, the
/// configuration and the published-epoch state.
pub(super) struct StoreState {
    pub(super) dir: PathBuf,
    pub(super) config: SnapshotConfig,
    pub(super) state: Mutex<State>,
    /// Names compaction files uniquely within one process.
    pub(super) compaction_seq: AtomicU64,
}

pub(super) struct State {
    /// Retained published epochs that have not been rejected, oldest first.
    pub(super) published: BTreeMap<u64, Arc<Manifest>>,
    /// Highest epoch any directory or manifest has used.
    pub(super) max_epoch_seen: Option<u64>,
    /// The epoch an [`EpochWriter`] is writing.
    pub(super) writing: Option<u64>,
    /// Compacted chains of the newest epoch waiting for the next publish.
    pub(super) pending_compactions: HashMap<NodeId, Compacted>,
    /// Files (relative paths) that garbage collection must not touch:
    /// compaction output not yet registered or published.
    pub(super) protected: HashSet<String>,
    /// Epoch directories whose manifest could not be read (an I/O error, not
    /// absence or corruption): never garbage-collected, never reused.
    pub(super) untouchable: HashSet<u64>,
    /// Manifests rejected when the store opened, reported by `load_latest`.
    pub(super) rejected_on_open: Vec<RejectedEpoch>,
    pub(super) compaction_running: bool,
}

/// A node's chain of epoch `as_of`, merged into one full file.
#[derive(Clone, Debug)]
pub(super) struct Compacted {
    pub(super) as_of: u64,
    pub(super) entry: FileEntry,
}

/// Summary of one published epoch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EpochInfo {
    pub epoch: u64,
    pub lsn: u64,
    pub graph_version: u64,
    pub nodes: usize,
    pub files: usize,
    /// On-disk bytes of every file the manifest references.
    pub bytes: u64,
    /// Files in the longest node chain (recovery reads this many for it).
    pub longest_chain: usize,
    /// When the manifest was written (milliseconds since the Unix epoch),
    /// for a snapshot-age metric.
    pub created_unix_ms: u64,
}

impl EpochInfo {
    pub(super) fn of(m: &Manifest) -> EpochInfo {
        EpochInfo {
            epoch: m.epoch,
            lsn: m.lsn,
            graph_version: m.graph_version,
            nodes: m.nodes.len(),
            files: m.file_count(),
            bytes: m.total_bytes(),
            longest_chain: m.longest_chain(),
            created_unix_ms: m.created_unix_ms,
        }
    }
}

/// An epoch that `load_latest` refused, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RejectedEpoch {
    pub epoch: u64,
    pub reason: String,
}

pub(super) fn epoch_dir_name(epoch: u64) -> String {
    format!("{epoch:020}")
}

pub(super) fn parse_epoch_dir(name: &str) -> Option<u64> {
    if name.len() == 20 && name.bytes().all(|b| b.is_ascii_digit()) {
        name.parse().ok()
    } else {
        None
    }
}

pub(super) fn now_unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// fsyncs a directory so the names created or renamed in it are durable.
pub(super) fn sync_dir(dir: &Path) -> Result<()> {
    fs::File::open(dir).and_then(|f| f.sync_all()).at(dir)
}

/// Resolves a manifest path, refusing anything but `<epoch dir>/<file>`.
pub(super) fn resolve(dir: &Path, rel: &str) -> std::result::Result<PathBuf, String> {
    let p = Path::new(rel);
    let parts: Vec<_> = p.components().collect();
    let ok = parts.len() == 2
        && parts.iter().all(|c| matches!(c, Component::Normal(_)))
        && parts[0]
            .as_os_str()
            .to_str()
            .and_then(parse_epoch_dir)
            .is_some();
    if ok {
        Ok(dir.join(p))
    } else {
        Err(format!("manifest names an invalid path {rel:?}"))
    }
}

impl StoreState {
    /// Writes a node file, compressing per the configuration, and fsyncs it.
    /// Returns (size, crc32, compression used).
    pub(super) fn write_file(
        &self,
        file: fs::File,
        path: &Path,
        meta: &FileMeta<'_>,
        raw: &[u8],
    ) -> Result<(u64, u32, Compression)> {
        let compressed = match self.config.compression {
            Compression::Lz4 => {
                let c = lz4_flex::block::compress(raw);
                (c.len() <= raw.len() - raw.len() / 8).then_some(c)
            }
            Compression::None => None,
        };
        let (payload, compression) = match &compressed {
            Some(c) => (c.as_slice(), Compression::Lz4),
            None => (raw, Compression::None),
        };
        let meta = FileMeta {
            compression,
            ..*meta
        };
        let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
        let (size, crc) = format::write_node_file(&mut out, &meta, payload).at(path)?;
        let file = out.into_inner().map_err(|e| e.into_error()).at(path)?;
        file.sync_all().at(path)?;
        Ok((size, crc, compression))
    }

    /// Reads one file and verifies it against its manifest entry.
    pub(super) fn read_verified(
        &self,
        node: &NodeId,
        entry: &FileEntry,
    ) -> std::result::Result<Vec<u8>, String> {
        let path = resolve(&self.dir, &entry.path)?;
        let bytes = fs::read(&path).map_err(|e| format!("cannot read {}: {e}", entry.path))?;
        format::decode_node_file(bytes, node, entry)
            .map_err(|reason| format!("{}: {reason}", entry.path))
    }

    /// Deletes every file under an epoch directory that no retained manifest
    /// references, except the epoch being written and protected files, then
    /// empty epoch directories. Failures are logged, not returned: garbage
    /// left behind is retried at the next collection.
    pub(super) fn collect_garbage(&self, state: &State) -> Result<()> {
        let mut keep: HashSet<String> = state.protected.clone();
        for m in state.published.values() {
            keep.insert(format!("{}/{MANIFEST_NAME}", epoch_dir_name(m.epoch)));
            for f in m.nodes.iter().flat_map(|c| &c.files) {
                keep.insert(f.path.clone());
            }
        }
        for entry in fs::read_dir(&self.dir).at(&self.dir)? {
            let entry = entry.at(&self.dir)?;
            let dir_name = entry.file_name();
            let Some(epoch) = dir_name.to_str().and_then(parse_epoch_dir) else {
                continue;
            };
            if state.writing == Some(epoch) || state.untouchable.contains(&epoch) {
                continue;
            }
            let epoch_dir = entry.path();
            let files = match fs::read_dir(&epoch_dir) {
                Ok(f) => f,
                Err(e) => {
                    warn!(path = %epoch_dir.display(), error = %e, "cannot list snapshot epoch directory");
                    continue;
                }
            };
            let mut kept = 0usize;
            let mut removed = 0usize;
            for file in files.flatten() {
                let name = file.file_name();
                let rel = format!("{}/{}", epoch_dir_name(epoch), name.to_string_lossy());
                if keep.contains(&rel) {
                    kept += 1;
                    continue;
                }
                let path = file.path();
                let res = if path.is_dir() {
                    fs::remove_dir_all(&path)
                } else {
                    fs::remove_file(&path)
                };
                match res {
                    Ok(()) => {
                        removed += 1;
                        debug!(path = %path.display(), "removed snapshot garbage");
                    }
                    Err(e) => {
                        kept += 1;
                        warn!(path = %path.display(), error = %e, "cannot remove snapshot garbage");
                    }
                }
            }
            if kept == 0 {
                match fs::remove_dir(&epoch_dir) {
                    Ok(()) => debug!(epoch, "removed snapshot epoch directory"),
                    Err(e) => {
                        warn!(path = %epoch_dir.display(), error = %e, "cannot remove snapshot directory")
                    }
                }
            } else if removed > 0 {
                if let Err(e) = sync_dir(&epoch_dir) {
                    warn!(error = %e, "cannot sync snapshot directory after garbage collection");
                }
            }
        }
        if let Err(e) = sync_dir(&self.dir) {
            warn!(error = %e, "cannot sync snapshot directory after garbage collection");
        }
        Ok(())
    }
}
