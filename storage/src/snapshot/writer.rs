//! [`EpochWriter`]: writing and publishing one snapshot epoch.

use std::collections::BTreeMap;
use std::fs;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use tracing::{debug, error, info, warn};

use super::directory::{
    epoch_dir_name, now_unix_ms, sync_dir, EpochInfo, StoreState, MANIFEST_NAME, MANIFEST_TMP_NAME,
};
use super::error::{IoContext, Result, SnapshotError};
use super::format::{self, FileEntry, FileMeta, Manifest, NodeChain};
use super::{IntoNodeId, NodeId, SnapshotKind};

/// Test hook: where a simulated crash stops [`EpochWriter::crash_at`]. The
/// dataflow's `LADLE_SNAPSHOT_CRASH` hook aborts the process right after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashBefore {
    /// Node files written and synced, no manifest yet.
    Manifest,
    /// `MANIFEST.tmp` written and synced, not renamed.
    Rename,
    /// Renamed, epoch directory not yet fsynced.
    DirSync,
}

/// What the new epoch holds for one node.
enum Slot {
    /// A `write_node` call is writing the file.
    Writing,
    Written(FileEntry),
    Reused,
}

/// Writes one snapshot epoch. `write_node` and `reuse_node` take `&self` and
/// may be called concurrently from worker threads (share the writer by
/// reference or in an `Arc`); `publish` makes the epoch durable and visible.
/// Dropping an unpublished writer deletes its files.
pub struct EpochWriter {
    inner: Arc<StoreState>,
    epoch: u64,
    lsn: u64,
    graph_version: u64,
    /// The newest published epoch when this one began: deltas apply on it.
    prev: Option<Arc<Manifest>>,
    dir: PathBuf,
    slots: Mutex<BTreeMap<NodeId, Slot>>,
    seq: AtomicU64,
    /// Published, or crashed on purpose (tests): leave the files alone.
    done: bool,
}

impl EpochWriter {
    pub(super) fn new(
        inner: Arc<StoreState>,
        epoch: u64,
        lsn: u64,
        graph_version: u64,
        prev: Option<Arc<Manifest>>,
    ) -> EpochWriter {
        let dir = inner.dir.join(epoch_dir_name(epoch));
        EpochWriter {
            inner,
            epoch,
            lsn,
            graph_version,
            prev,
            dir,
            slots: Mutex::new(BTreeMap::new()),
            seq: AtomicU64::new(0),
            done: false,
        }
    }

    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The epoch deltas written now apply on (None: no previous epoch, so
    /// only full files can be written).
    pub fn base_epoch(&self) -> Option<u64> {
        self.prev.as_ref().map(|p| p.epoch)
    }

    /// How many files node `node`'s chain would hold if this epoch wrote a
    /// delta for it (None: no previous state, so only a full file can be
    /// written). A caller that keeps chains short without
    /// [`SnapshotStore::compact`](super::SnapshotStore::compact) writes a full
    /// file instead once this passes its limit.
    pub fn chain_len_with_delta(&self, node: impl IntoNodeId) -> Result<Option<usize>> {
        let node = node.into_node_id()?;
        let Some(prev) = &self.prev else {
            return Ok(None);
        };
        let compacted = self
            .inner
            .state
            .lock()
            .pending_compactions
            .get(&node)
            .is_some_and(|c| c.as_of == prev.epoch);
        Ok(prev
            .chain(&node)
            .map(|c| if compacted { 2 } else { c.files.len() + 1 }))
    }

    /// Writes `bytes` as node `node`'s full state, or (`Delta`) as the changes
    /// since the previous epoch, and fsyncs the file before returning.
    pub fn write_node(
        &self,
        node: impl IntoNodeId,
        kind: SnapshotKind,
        bytes: &[u8],
    ) -> Result<FileEntry> {
        let node = node.into_node_id()?;
        let base_epoch = match kind {
            SnapshotKind::Full => None,
            SnapshotKind::Delta => Some(self.require_base(&node)?),
        };
        self.reserve(&node, Slot::Writing)?;
        let result = self.write_file(&node, kind, base_epoch, bytes);
        let mut slots = self.slots.lock();
        match &result {
            Ok(entry) => {
                slots.insert(node, Slot::Written(entry.clone()));
            }
            Err(_) => {
                slots.remove(&node);
            }
        }
        result
    }

    /// Records that `node` did not change since the previous epoch: the new
    /// manifest references the previous epoch's files for it.
    pub fn reuse_node(&self, node: impl IntoNodeId) -> Result<()> {
        let node = node.into_node_id()?;
        self.require_base(&node)?;
        self.reserve(&node, Slot::Reused)
    }

    /// Makes the epoch durable and visible (see the publish protocol in the
    /// module docs), then applies retention and collects garbage.
    pub fn publish(self) -> Result<EpochInfo> {
        self.publish_until(None)
    }

    /// Test hook: runs `publish` up to `point` and stops, leaving the disk as
    /// a crash there would (the caller then aborts the process, or drops the
    /// store and reopens it). Never use outside crash tests.
    #[doc(hidden)]
    pub fn crash_at(self, point: CrashBefore) -> Result<()> {
        self.publish_until(Some(point)).map(|_| ())
    }

    fn require_base(&self, node: &NodeId) -> Result<u64> {
        match &self.prev {
            Some(p) if p.chain(node).is_some() => Ok(p.epoch),
            _ => Err(SnapshotError::NoBase {
                node: node.clone(),
                epoch: self.epoch,
            }),
        }
    }

    fn reserve(&self, node: &NodeId, slot: Slot) -> Result<()> {
        let mut slots = self.slots.lock();
        if slots.contains_key(node) {
            return Err(SnapshotError::DuplicateNode {
                node: node.clone(),
                epoch: self.epoch,
            });
        }
        slots.insert(node.clone(), slot);
        Ok(())
    }

    fn write_file(
        &self,
        node: &NodeId,
        kind: SnapshotKind,
        base_epoch: Option<u64>,
        bytes: &[u8],
    ) -> Result<FileEntry> {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let name = format!("{seq:06}-{}.{}", node.file_stem(), kind.extension());
        let path = self.dir.join(&name);
        let file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .at(&path)?;
        let meta = FileMeta {
            node,
            kind,
            compression: self.inner.config.compression,
            state_epoch: self.epoch,
            base_epoch,
            raw_len: bytes.len() as u64,
        };
        match self.inner.write_file(file, &path, &meta, bytes) {
            Ok((size, crc32, compression)) => Ok(FileEntry {
                path: format!("{}/{name}", epoch_dir_name(self.epoch)),
                kind,
                state_epoch: self.epoch,
                base_epoch,
                size,
                raw_len: bytes.len() as u64,
                crc32,
                compression,
            }),
            Err(e) => {
                let _ = fs::remove_file(&path);
                Err(e)
            }
        }
    }

    /// Builds the manifest: each node's chain from this epoch's slot, the
    /// previous epoch's chain, or a compacted chain of the previous epoch.
    fn build_manifest(&self) -> Result<Manifest> {
        let slots = self.slots.lock();
        let pending = self.inner.state.lock().pending_compactions.clone();
        let mut nodes = Vec::with_capacity(slots.len());
        for (node, slot) in slots.iter() {
            let base_chain = || -> Result<Vec<FileEntry>> {
                let prev = self.prev.as_ref().ok_or_else(|| SnapshotError::NoBase {
                    node: node.clone(),
                    epoch: self.epoch,
                })?;
                if let Some(c) = pending.get(node).filter(|c| c.as_of == prev.epoch) {
                    return Ok(vec![c.entry.clone()]);
                }
                prev.chain(node)
                    .map(|c| c.files.clone())
                    .ok_or_else(|| SnapshotError::NoBase {
                        node: node.clone(),
                        epoch: self.epoch,
                    })
            };
            let files = match slot {
                // `publish` owns the writer, so no `write_node` is running:
                // this one panicked mid-write.
                Slot::Writing => {
                    return Err(SnapshotError::Unfinished {
                        node: node.clone(),
                        epoch: self.epoch,
                    })
                }
                Slot::Written(f) if f.kind == SnapshotKind::Full => vec![f.clone()],
                Slot::Written(f) => {
                    let mut chain = base_chain()?;
                    chain.push(f.clone());
                    chain
                }
                Slot::Reused => base_chain()?,
            };
            nodes.push(NodeChain {
                node: node.clone(),
                files,
            });
        }
        Ok(Manifest {
            epoch: self.epoch,
            lsn: self.lsn,
            graph_version: self.graph_version,
            created_unix_ms: now_unix_ms(),
            nodes,
        })
    }

    /// The publish protocol; `crash` stops it early, leaving the disk as a
    /// crash at that point would (tests only).
    fn publish_until(mut self, crash: Option<CrashBefore>) -> Result<EpochInfo> {
        let manifest = self.build_manifest()?;
        let info = EpochInfo::of(&manifest);
        sync_dir(&self.dir)?;
        if crash == Some(CrashBefore::Manifest) {
            self.done = true;
            return Ok(info);
        }

        let bytes = format::encode_manifest(&manifest).map_err(SnapshotError::Encode)?;
        let tmp = self.dir.join(MANIFEST_TMP_NAME);
        let final_path = self.dir.join(MANIFEST_NAME);
        {
            use std::io::Write;
            let mut f = fs::File::create(&tmp).at(&tmp)?;
            f.write_all(&bytes).at(&tmp)?;
            f.sync_all().at(&tmp)?;
        }
        if crash == Some(CrashBefore::Rename) {
            self.done = true;
            return Ok(info);
        }
        fs::rename(&tmp, &final_path).at(&final_path)?;
        // From here on the epoch may be visible: never delete it on error.
        self.done = true;
        if crash == Some(CrashBefore::DirSync) {
            return Ok(info);
        }
        if let Err(e) = sync_dir(&self.dir) {
            error!(epoch = self.epoch, error = %e, "cannot sync the published snapshot manifest");
            self.inner.state.lock().writing = None;
            return Err(e);
        }

        let mut state = self.inner.state.lock();
        state.published.insert(self.epoch, Arc::new(manifest));
        state.writing = None;
        while state.published.len() > self.inner.config.retain_epochs {
            state.published.pop_first();
        }
        // Compactions of older epochs are used or moot now.
        let moot: Vec<String> = state
            .pending_compactions
            .values()
            .filter(|c| c.as_of < self.epoch)
            .map(|c| c.entry.path.clone())
            .collect();
        state
            .pending_compactions
            .retain(|_, c| c.as_of >= self.epoch);
        for p in moot {
            state.protected.remove(&p);
        }
        if let Err(e) = self.inner.collect_garbage(&state) {
            warn!(epoch = self.epoch, error = %e, "snapshot garbage collection failed");
        }
        let retained: Vec<u64> = state.published.keys().copied().collect();
        drop(state);
        info!(
            epoch = info.epoch,
            lsn = info.lsn,
            nodes = info.nodes,
            files = info.files,
            bytes = info.bytes,
            longest_chain = info.longest_chain,
            ?retained,
            "published snapshot epoch"
        );
        Ok(info)
    }
}

impl Drop for EpochWriter {
    fn drop(&mut self) {
        let mut state = self.inner.state.lock();
        if state.writing == Some(self.epoch) {
            state.writing = None;
        }
        drop(state);
        if !self.done {
            debug!(epoch = self.epoch, "abandoning unpublished snapshot epoch");
            if let Err(e) = fs::remove_dir_all(&self.dir) {
                warn!(epoch = self.epoch, error = %e, "cannot remove abandoned snapshot epoch");
            }
        }
    }
}
