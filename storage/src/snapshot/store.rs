//! [`SnapshotStore`]: opening, loading, retention, garbage collection and
//! compaction. Writing one epoch is in `writer.rs`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tracing::{debug, info, warn};

use super::directory::{
    epoch_dir_name, parse_epoch_dir, sync_dir, Compacted, EpochInfo, RejectedEpoch, State,
    StoreState, MANIFEST_NAME,
};
use super::error::{IoContext, Result, SnapshotError};
use super::format::{self, FileEntry, FileMeta, Manifest};
use super::writer::EpochWriter;
use super::{Compression, NodeId, SnapshotConfig, SnapshotKind};

/// Most threads one load reads and verifies files on.
const LOAD_THREADS: usize = 4;

/// The durable store of view-state snapshots. Cheap to clone; every clone
/// shares one state. All methods block on disk I/O: call them from snapshot
/// or recovery threads, never from an async runtime's workers.
#[derive(Clone)]
pub struct SnapshotStore {
    pub(super) inner: Arc<StoreState>,
}

/// One node's verified state: apply `deltas`, in order, on `base`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadedNode {
    pub node: NodeId,
    pub base: Vec<u8>,
    pub deltas: Vec<Vec<u8>>,
}

/// A verified snapshot.
#[derive(Clone, Debug)]
pub struct LoadedSnapshot {
    pub epoch: u64,
    /// Replay the change log after this LSN.
    pub lsn: u64,
    pub graph_version: u64,
    /// Sorted by node id.
    pub nodes: Vec<LoadedNode>,
    /// Epochs refused on the way: manifests rejected when the store opened,
    /// then newer epochs whose files failed verification.
    pub rejected: Vec<RejectedEpoch>,
    /// On-disk bytes read and verified.
    pub bytes_read: u64,
    pub files_read: usize,
    pub elapsed: Duration,
}

/// What one [`SnapshotStore::compact`] call did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompactionStats {
    /// The epoch whose chains were merged (None: nothing published).
    pub as_of: Option<u64>,
    pub nodes_compacted: usize,
    /// Files the merged chains held.
    pub files_merged: usize,
    pub bytes_written: u64,
    /// Chains skipped because a file failed verification.
    pub nodes_skipped: usize,
}

/// Checks that a chain starts with a full file and each delta applies on the
/// state before it.
fn check_chain(m: &Manifest, chain: &super::NodeChain) -> std::result::Result<(), String> {
    let Some(first) = chain.files.first() else {
        return Err(format!("node {} has no files", chain.node));
    };
    if first.kind != SnapshotKind::Full || first.base_epoch.is_some() {
        return Err(format!(
            "node {} chain does not start with a full file",
            chain.node
        ));
    }
    // A delta applies on the node's state as of its base epoch; the file
    // before it captures that state if it is no older (the node was reused
    // in between) and the delta itself is newer.
    for pair in chain.files.windows(2) {
        let applies = pair[1]
            .base_epoch
            .is_some_and(|b| b >= pair[0].state_epoch && b < pair[1].state_epoch);
        if pair[1].kind != SnapshotKind::Delta || !applies {
            return Err(format!(
                "node {}: {} does not apply on {} (state epoch {})",
                chain.node, pair[1].path, pair[0].path, pair[0].state_epoch
            ));
        }
    }
    if chain.files.iter().any(|f| f.state_epoch > m.epoch) {
        return Err(format!(
            "node {} references state newer than the epoch",
            chain.node
        ));
    }
    Ok(())
}

/// Logs loading progress every 10% or every two seconds.
struct Progress {
    epoch: u64,
    total: u64,
    done: u64,
    next_percent: u64,
    last_log: Instant,
}

impl Progress {
    fn advance(&mut self, bytes: u64) {
        self.done += bytes;
        let percent = self
            .done
            .saturating_mul(100)
            .checked_div(self.total)
            .unwrap_or(100);
        if percent >= self.next_percent || self.last_log.elapsed() >= Duration::from_secs(2) {
            info!(
                epoch = self.epoch,
                percent,
                bytes = self.done,
                total_bytes = self.total,
                "loading snapshot"
            );
            self.next_percent = (percent / 10 + 1) * 10;
            self.last_log = Instant::now();
        }
    }
}

impl SnapshotStore {
    /// Opens (creating if needed) the snapshot directory `dir`, normally
    /// `<data-dir>/`[`SNAPSHOT_DIR_NAME`](super::SNAPSHOT_DIR_NAME). Reads
    /// every manifest, rejects unreadable ones and deletes whatever no valid
    /// manifest references (unpublished epochs, temporary manifests).
    pub fn open(dir: impl Into<PathBuf>, config: SnapshotConfig) -> Result<SnapshotStore> {
        if config.retain_epochs == 0 {
            return Err(SnapshotError::InvalidConfig(
                "retain_epochs must be at least 1",
            ));
        }
        let dir = dir.into();
        fs::create_dir_all(&dir).at(&dir)?;
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            sync_dir(parent)?;
        }

        let mut published = BTreeMap::new();
        let mut max_epoch_seen = None;
        let mut untouchable = HashSet::new();
        let mut rejected_on_open = Vec::new();
        for entry in fs::read_dir(&dir).at(&dir)? {
            let entry = entry.at(&dir)?;
            let name = entry.file_name();
            let Some(epoch) = name.to_str().and_then(parse_epoch_dir) else {
                debug!(path = %entry.path().display(), "ignoring unknown entry in snapshot directory");
                continue;
            };
            let manifest_path = entry.path().join(MANIFEST_NAME);
            let bytes = match fs::read(&manifest_path) {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    info!(epoch, "snapshot epoch was never published; removing it");
                    continue;
                }
                Err(e) => {
                    warn!(epoch, error = %e, "cannot read snapshot manifest; leaving the epoch alone");
                    max_epoch_seen = max_epoch_seen.max(Some(epoch));
                    untouchable.insert(epoch);
                    rejected_on_open.push(RejectedEpoch {
                        epoch,
                        reason: format!("cannot read manifest: {e}"),
                    });
                    continue;
                }
            };
            let reason = match format::decode_manifest(&bytes) {
                Ok(m) if m.epoch == epoch => {
                    max_epoch_seen = max_epoch_seen.max(Some(epoch));
                    published.insert(epoch, Arc::new(m));
                    continue;
                }
                Ok(m) => format!("manifest of epoch {} is in the wrong directory", m.epoch),
                Err(reason) => reason,
            };
            warn!(epoch, %reason, "rejecting snapshot manifest; its files are garbage");
            rejected_on_open.push(RejectedEpoch { epoch, reason });
        }

        let store = SnapshotStore {
            inner: Arc::new(StoreState {
                dir,
                config,
                state: Mutex::new(State {
                    published,
                    max_epoch_seen,
                    writing: None,
                    pending_compactions: HashMap::new(),
                    protected: HashSet::new(),
                    untouchable,
                    rejected_on_open,
                    compaction_running: false,
                }),
                compaction_seq: AtomicU64::new(0),
            }),
        };
        {
            let state = store.inner.state.lock();
            store.inner.collect_garbage(&state)?;
            info!(
                dir = %store.inner.dir.display(),
                epochs = ?state.published.keys().collect::<Vec<_>>(),
                "opened snapshot store"
            );
        }
        Ok(store)
    }

    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    pub fn config(&self) -> &SnapshotConfig {
        &self.inner.config
    }

    /// Starts writing epoch `epoch`, which captures every node as of `lsn`.
    /// The epoch must be newer than any existing one and only one epoch is
    /// written at a time. Dropping the writer without publishing abandons
    /// the epoch and deletes its files.
    pub fn begin_epoch(&self, epoch: u64, lsn: u64, graph_version: u64) -> Result<EpochWriter> {
        let mut state = self.inner.state.lock();
        if let Some(w) = state.writing {
            return Err(SnapshotError::WriterBusy(w));
        }
        if let Some(last) = state.max_epoch_seen.filter(|&last| epoch <= last) {
            return Err(SnapshotError::EpochNotNewer { epoch, last });
        }
        let prev = state.published.values().next_back().cloned();
        if let Some(p) = prev.as_ref().filter(|p| lsn < p.lsn) {
            return Err(SnapshotError::LsnRegressed {
                epoch,
                lsn,
                last: p.lsn,
            });
        }
        let dir = self.inner.dir.join(epoch_dir_name(epoch));
        if dir.exists() {
            // Newer than every published epoch: an abandoned attempt whose
            // removal failed earlier.
            warn!(epoch, "removing leftovers of an unpublished snapshot epoch");
            fs::remove_dir_all(&dir).at(&dir)?;
        }
        fs::create_dir(&dir).at(&dir)?;
        sync_dir(&self.inner.dir)?;
        state.writing = Some(epoch);
        state.max_epoch_seen = Some(epoch);
        drop(state);
        debug!(epoch, lsn, graph_version, "snapshot epoch begun");
        Ok(EpochWriter::new(
            self.inner.clone(),
            epoch,
            lsn,
            graph_version,
            prev,
        ))
    }

    /// Loads the newest epoch whose manifest and files all verify, falling
    /// back to older retained epochs; `None` means cold start.
    pub fn load_latest(&self) -> Result<Option<LoadedSnapshot>> {
        let (candidates, mut rejected) = {
            let state = self.inner.state.lock();
            let candidates: Vec<Arc<Manifest>> = state.published.values().rev().cloned().collect();
            (candidates, state.rejected_on_open.clone())
        };
        let rejected_before = rejected.len();
        let mut loaded = None;
        for m in candidates {
            match self.inner.load_epoch(&m) {
                Ok(mut snap) => {
                    snap.rejected = std::mem::take(&mut rejected);
                    loaded = Some(snap);
                    break;
                }
                Err(reason) => {
                    warn!(epoch = m.epoch, %reason, "rejecting snapshot epoch; falling back to an older one");
                    rejected.push(RejectedEpoch {
                        epoch: m.epoch,
                        reason,
                    });
                }
            }
        }
        let rejected_epochs: Vec<u64> = match &loaded {
            Some(s) => s.rejected[rejected_before..]
                .iter()
                .map(|r| r.epoch)
                .collect(),
            None => rejected[rejected_before..]
                .iter()
                .map(|r| r.epoch)
                .collect(),
        };
        if !rejected_epochs.is_empty() {
            let mut state = self.inner.state.lock();
            for e in &rejected_epochs {
                state.published.remove(e);
            }
            state
                .pending_compactions
                .retain(|_, c| !rejected_epochs.contains(&c.as_of));
        }
        match &loaded {
            Some(s) => info!(
                epoch = s.epoch,
                lsn = s.lsn,
                nodes = s.nodes.len(),
                files = s.files_read,
                bytes = s.bytes_read,
                elapsed_ms = s.elapsed.as_millis() as u64,
                "loaded snapshot"
            ),
            None => info!(
                rejected = rejected_epochs.len(),
                "no usable snapshot; cold start"
            ),
        }
        Ok(loaded)
    }

    /// The LSN of the oldest retained epoch: the change log below it is no
    /// longer needed for recovery. None when nothing is published.
    pub fn oldest_retained_lsn(&self) -> Option<u64> {
        self.inner
            .state
            .lock()
            .published
            .values()
            .next()
            .map(|m| m.lsn)
    }

    /// The retained published epochs, oldest first.
    pub fn retained(&self) -> Vec<EpochInfo> {
        self.inner
            .state
            .lock()
            .published
            .values()
            .map(|m| EpochInfo::of(m))
            .collect()
    }

    /// The newest retained epoch's manifest.
    pub fn latest_manifest(&self) -> Option<Arc<Manifest>> {
        self.inner
            .state
            .lock()
            .published
            .values()
            .next_back()
            .cloned()
    }

    /// Merges every chain of the newest epoch longer than `max_chain_len`
    /// files into one full file with `merge(base, deltas)`, which must return
    /// the node's full state in the caller's encoding. The next published
    /// epoch uses the merged file wherever the node is reused or gets a new
    /// delta. Meant for a background thread; it does not block writers.
    pub fn compact<F>(&self, max_chain_len: usize, merge: F) -> Result<CompactionStats>
    where
        F: Fn(&[u8], &[&[u8]]) -> Vec<u8>,
    {
        let max_chain_len = max_chain_len.max(1);
        let (manifest, candidates) = {
            let mut state = self.inner.state.lock();
            if state.compaction_running {
                return Ok(CompactionStats::default());
            }
            let Some(m) = state.published.values().next_back().cloned() else {
                return Ok(CompactionStats::default());
            };
            let candidates: Vec<super::NodeChain> = m
                .nodes
                .iter()
                .filter(|c| c.files.len() > max_chain_len)
                .filter(|c| {
                    state.pending_compactions.get(&c.node).map(|p| p.as_of) != Some(m.epoch)
                })
                .cloned()
                .collect();
            state.compaction_running = true;
            (m, candidates)
        };
        /// Clears the running flag however compaction ends (a panicking
        /// merge function included).
        struct Running<'a>(&'a StoreState);
        impl Drop for Running<'_> {
            fn drop(&mut self) {
                self.0.state.lock().compaction_running = false;
            }
        }
        let _running = Running(&self.inner);
        self.compact_chains(&manifest, candidates, merge)
    }

    fn compact_chains<F>(
        &self,
        m: &Manifest,
        chains: Vec<super::NodeChain>,
        merge: F,
    ) -> Result<CompactionStats>
    where
        F: Fn(&[u8], &[&[u8]]) -> Vec<u8>,
    {
        let mut stats = CompactionStats {
            as_of: Some(m.epoch),
            ..CompactionStats::default()
        };
        let epoch_dir = self.inner.dir.join(epoch_dir_name(m.epoch));
        for chain in chains {
            let mut blobs = Vec::with_capacity(chain.files.len());
            let mut failed = None;
            for f in &chain.files {
                match self.inner.read_verified(&chain.node, f) {
                    Ok(b) => blobs.push(b),
                    Err(reason) => {
                        failed = Some(reason);
                        break;
                    }
                }
            }
            if let Some(reason) = failed {
                warn!(epoch = m.epoch, node = %chain.node, %reason, "not compacting a chain that fails verification");
                stats.nodes_skipped += 1;
                continue;
            }
            let deltas: Vec<&[u8]> = blobs[1..].iter().map(Vec::as_slice).collect();
            let merged = merge(&blobs[0], &deltas);

            let (rel, path, file) =
                self.create_compaction_file(&epoch_dir, m.epoch, &chain.node)?;
            let meta = FileMeta {
                node: &chain.node,
                kind: SnapshotKind::Full,
                compression: Compression::None,
                state_epoch: m.epoch,
                base_epoch: None,
                raw_len: merged.len() as u64,
            };
            let written = self.inner.write_file(file, &path, &meta, &merged);
            let entry = match written.and_then(|entry_of| sync_dir(&epoch_dir).map(|()| entry_of)) {
                Ok((size, crc32, compression)) => FileEntry {
                    path: rel.clone(),
                    kind: SnapshotKind::Full,
                    state_epoch: m.epoch,
                    base_epoch: None,
                    size,
                    raw_len: merged.len() as u64,
                    crc32,
                    compression,
                },
                Err(e) => {
                    let _ = fs::remove_file(&path);
                    self.inner.state.lock().protected.remove(&rel);
                    return Err(e);
                }
            };
            stats.nodes_compacted += 1;
            stats.files_merged += chain.files.len();
            stats.bytes_written += entry.size;

            let mut state = self.inner.state.lock();
            let still_newest = state.published.keys().next_back() == Some(&m.epoch);
            if still_newest {
                debug!(epoch = m.epoch, node = %chain.node, files = chain.files.len(), "compacted snapshot chain");
                let old = state.pending_compactions.insert(
                    chain.node.clone(),
                    Compacted {
                        as_of: m.epoch,
                        entry,
                    },
                );
                if let Some(old) = old {
                    state.protected.remove(&old.entry.path);
                }
            } else {
                // A newer epoch was published meanwhile; this merge is moot.
                state.protected.remove(&rel);
                drop(state);
                let _ = fs::remove_file(&path);
            }
        }
        info!(
            epoch = m.epoch,
            nodes = stats.nodes_compacted,
            files = stats.files_merged,
            bytes = stats.bytes_written,
            "snapshot compaction done"
        );
        Ok(stats)
    }

    /// Creates a fresh, protected compaction file in `epoch_dir`.
    fn create_compaction_file(
        &self,
        epoch_dir: &Path,
        epoch: u64,
        node: &NodeId,
    ) -> Result<(String, PathBuf, fs::File)> {
        loop {
            let seq = self.inner.compaction_seq.fetch_add(1, Ordering::Relaxed);
            let name = format!("c{seq:06}-{}.full", node.file_stem());
            let rel = format!("{}/{name}", epoch_dir_name(epoch));
            let path = epoch_dir.join(&name);
            self.inner.state.lock().protected.insert(rel.clone());
            match fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(f) => return Ok((rel, path, f)),
                Err(e) => {
                    self.inner.state.lock().protected.remove(&rel);
                    if e.kind() != std::io::ErrorKind::AlreadyExists {
                        return Err(SnapshotError::Io { path, source: e });
                    }
                }
            }
        }
    }
}

impl StoreState {
    /// Re-reads the epoch's manifest from disk, then reads and verifies every
    /// file it references.
    fn load_epoch(&self, m: &Manifest) -> std::result::Result<LoadedSnapshot, String> {
        let started = Instant::now();
        let manifest_path = self.dir.join(epoch_dir_name(m.epoch)).join(MANIFEST_NAME);
        let bytes = fs::read(&manifest_path).map_err(|e| format!("cannot read manifest: {e}"))?;
        let on_disk = format::decode_manifest(&bytes)?;
        if on_disk != *m {
            return Err("manifest changed on disk since the store was opened".to_string());
        }
        for chain in &m.nodes {
            check_chain(m, chain)?;
        }
        let total = m.total_bytes();
        info!(
            epoch = m.epoch,
            files = m.file_count(),
            total_bytes = total,
            "loading snapshot"
        );
        let progress = Mutex::new(Progress {
            epoch: m.epoch,
            total,
            done: 0,
            next_percent: 10,
            last_log: Instant::now(),
        });
        let load_chain = |chain: &super::NodeChain| -> std::result::Result<LoadedNode, String> {
            let mut blobs = Vec::with_capacity(chain.files.len());
            for f in &chain.files {
                blobs.push(self.read_verified(&chain.node, f)?);
                progress.lock().advance(f.size);
            }
            let mut blobs = blobs.into_iter();
            let base = blobs.next().unwrap_or_default();
            Ok(LoadedNode {
                node: chain.node.clone(),
                base,
                deltas: blobs.collect(),
            })
        };
        // Chains load on up to LOAD_THREADS threads, each taking the next
        // unclaimed chain; the first failure stops the others.
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, LOAD_THREADS)
            .min(m.nodes.len());
        let next = AtomicUsize::new(0);
        let failed = AtomicBool::new(false);
        let mut slots: Vec<Option<std::result::Result<LoadedNode, String>>> = Vec::new();
        slots.resize_with(m.nodes.len(), || None);
        let slots = Mutex::new(slots);
        let work = || {
            while !failed.load(Ordering::Relaxed) {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(chain) = m.nodes.get(i) else { break };
                let r = load_chain(chain);
                if r.is_err() {
                    failed.store(true, Ordering::Relaxed);
                }
                slots.lock()[i] = Some(r);
            }
        };
        if threads <= 1 {
            work();
        } else {
            std::thread::scope(|scope| {
                for _ in 0..threads {
                    scope.spawn(work);
                }
            });
        }
        let slots = slots.into_inner();
        if let Some(Some(Err(reason))) = slots.iter().find(|s| matches!(s, Some(Err(_)))) {
            return Err(reason.clone());
        }
        let mut nodes = Vec::with_capacity(m.nodes.len());
        for (slot, chain) in slots.into_iter().zip(&m.nodes) {
            match slot {
                Some(Ok(node)) => nodes.push(node),
                _ => return Err(format!("node {} was not loaded", chain.node)),
            }
        }
        Ok(LoadedSnapshot {
            epoch: m.epoch,
            lsn: m.lsn,
            graph_version: m.graph_version,
            nodes,
            rejected: Vec::new(),
            bytes_read: total,
            files_read: m.file_count(),
            elapsed: started.elapsed(),
        })
    }
}
