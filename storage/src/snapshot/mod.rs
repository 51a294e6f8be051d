//! The on-disk store for snapshots of materialized view state.
//!
//! Entry point: [`SnapshotStore`]. The store keeps opaque byte blobs keyed by
//! a [`NodeId`] and knows nothing of SQL or dataflow types: the dataflow
//! engine serializes each materialized node (or shard) and hands the bytes in,
//! per snapshot epoch; on restart it gets them back, verified.
//!
//! # Layout
//!
//! ```text
//! <data-dir>/snapshots/                      (the directory given to `open`)
//!   00000000000000000007/                    one directory per epoch, 20 digits
//!     000000-n12.full                        node files written in epoch 7
//!     000001-n13.delta
//!     c000000-n14.full                       a compacted chain (see below)
//!     MANIFEST                               epoch 7's published manifest
//!   00000000000000000008/
//!     MANIFEST.tmp                           a manifest being published
//! ```
//!
//! A node file is immutable once written and may be referenced by the
//! manifests of later epochs (nodes that did not change are reused, not
//! copied). Anything under an epoch directory that no retained, published
//! manifest references is garbage: it is deleted when the store opens and
//! after every publish. (Exception: an epoch whose `MANIFEST` exists but
//! cannot be read, an I/O error rather than absence or a bad checksum, is
//! left alone and its number is not reused.)
//!
//! # Node file format (little endian)
//!
//! ```text
//! header  "LDLSNAP1" | version u16 = 1 | kind u8 (0 full, 1 delta)
//!         | compression u8 (0 none, 1 lz4 block) | node id length u32
//!         | state epoch u64 | base epoch u64 (u64::MAX for a full file)
//!         | raw (uncompressed) length u64 | node id bytes (UTF-8)
//! payload the caller's blob, lz4-compressed if the flag says so
//! footer  stored payload length u64 | crc32 u32 | "LDLE"
//! ```
//!
//! The CRC-32 (IEEE, `crc32fast`) covers every byte before the footer. The
//! manifest records the same CRC and the file size, so a file is accepted
//! only if its size, both CRCs, every header field and the decompressed
//! length agree with the manifest.
//!
//! # Manifest format
//!
//! `"LDLMANI1" | version u16 | body length u32 | body | crc32 u32` where the
//! CRC covers everything before it and the body is the postcard encoding of
//! [`Manifest`]: epoch, LSN S (every node reflects exactly the writes with
//! LSN <= S), graph version, creation time, and per node its chain of
//! [`FileEntry`]s: path, kind, state epoch, base epoch (deltas), size, raw
//! length, CRC and compression flag.
//!
//! # Chains and compaction
//!
//! A node's chain is one full file followed by zero or more deltas. A delta
//! written in epoch E applies on the node's state as of its base epoch, the
//! epoch before E; the file before it in the chain captures that state (its
//! state epoch is no newer, as the node may have been reused since). In a new
//! epoch a node is either written full ([`SnapshotKind::Full`]: chain = that
//! file), written as a delta ([`SnapshotKind::Delta`]: previous chain + the
//! delta), or reused ([`EpochWriter::reuse_node`]: previous chain as is).
//! Nodes the new epoch does not mention are dropped from it.
//!
//! To keep the number of files recovery reads bounded,
//! [`SnapshotStore::compact`] (run on any background thread) merges every
//! chain longer than a limit of the newest epoch into one full file with a
//! caller-supplied merge function; the next published epoch uses that file
//! instead of the chain. (A caller may equally load the chain itself and
//! write a full file in the next epoch.)
//!
//! # Publish protocol
//!
//! 1. `begin_epoch` creates the epoch directory and fsyncs the snapshot
//!    directory.
//! 2. `write_node` (from any thread) writes one node file with `create_new`
//!    and fsyncs it before returning.
//! 3. `publish` fsyncs the epoch directory (the node files' names), writes
//!    `MANIFEST.tmp`, fsyncs it, renames it to `MANIFEST` and fsyncs the epoch
//!    directory again. The rename is the commit point.
//! 4. Retention then keeps the newest `retain_epochs` published manifests,
//!    deletes the older manifests and every file no retained manifest
//!    references.
//!
//! A crash before the rename leaves an epoch directory without `MANIFEST`:
//! garbage, removed on the next open, and the previous epoch loads. After
//! the rename the new epoch is complete (every file was fsynced first); if a
//! power loss undoes the rename, the previous epoch loads.
//!
//! # Loading
//!
//! [`SnapshotStore::load_latest`] re-reads the newest manifest, reads and
//! verifies every file it references (node chains in parallel, on up to four
//! threads) and returns, per node, the base blob and the ordered deltas. If
//! anything is missing, truncated or corrupt it logs why (tracing `warn`)
//! and falls back to the next older retained epoch,
//! and finally to `None` (cold start); it never returns unverified bytes.
//! Rejected epochs are dropped from the store so later epochs do not build on
//! them. Progress (percent and bytes) is logged at `info` while loading.
//!
//! # Compression
//!
//! With [`Compression::Lz4`] each file's payload is lz4-compressed (block
//! format, `lz4_flex`) and stored compressed only if that saves at least an
//! eighth; the flag is recorded per file in the header and the manifest.
//! The default is no compression: on row-like state lz4 saves about 43% of
//! the bytes but, on a disk that reads over 1 GB/s, makes loading about twice
//! as slow and writing five times as slow (figures in `bench.rs`). It can pay
//! only where the disk reads slower than roughly 100-200 MB/s.
//!
//! # Concurrency
//!
//! One process opens a snapshot directory at a time (the server owns its
//! data directory); within it the store is shared by cloning. One epoch is
//! written at a time; [`SnapshotStore::compact`] may run concurrently with
//! writing and loading.

mod directory;
mod error;
mod format;
mod node_id;
mod store;
mod writer;

#[cfg(test)]
mod bench;
#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};

pub use directory::{EpochInfo, RejectedEpoch};
pub use error::{Result, SnapshotError};
pub use format::{FileEntry, Manifest, NodeChain};
pub use node_id::{IntoNodeId, InvalidNodeId, NodeId, MAX_NODE_ID_LEN};
pub use store::{CompactionStats, LoadedNode, LoadedSnapshot, SnapshotStore};
pub use writer::{CrashBefore, EpochWriter};

/// Name of the snapshot directory under the server's data directory.
pub const SNAPSHOT_DIR_NAME: &str = "snapshots";

/// Whether a file holds a node's whole state or the changes since the
/// previous epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SnapshotKind {
    Full,
    /// Changed keys and tombstones since the previous epoch, in the caller's
    /// encoding; applied in order on top of the full base.
    Delta,
}

impl SnapshotKind {
    fn extension(self) -> &'static str {
        match self {
            SnapshotKind::Full => "full",
            SnapshotKind::Delta => "delta",
        }
    }
}

/// Per-file payload compression.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Compression {
    #[default]
    None,
    /// lz4 block format, kept only where it saves at least an eighth.
    Lz4,
}

/// How the store writes and retains snapshots.
#[derive(Clone, Debug)]
pub struct SnapshotConfig {
    /// How many published epochs to keep (at least 1). Default 2.
    pub retain_epochs: usize,
    /// Compression for files written from now on. Default none.
    pub compression: Compression,
}

impl Default for SnapshotConfig {
    fn default() -> SnapshotConfig {
        SnapshotConfig {
            retain_epochs: 2,
            compression: Compression::None,
        }
    }
}
