//! The snapshot store's error enum, by whose fault each error is.

use std::path::PathBuf;

use super::node_id::{InvalidNodeId, NodeId, MAX_NODE_ID_LEN};

/// Errors of the snapshot store.
///
/// Corruption found while *loading* is not an error: `load_latest` rejects the
/// damaged epoch, logs why and falls back. [`SnapshotError::Corrupt`] is only
/// returned by calls that need one specific file (compaction reads).
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    // --- the caller's fault (a bug in the snapshot coordinator) ---
    #[error("snapshot epoch {epoch} is not newer than epoch {last}, which already exists")]
    EpochNotNewer { epoch: u64, last: u64 },
    #[error("snapshot LSN {lsn} of epoch {epoch} is older than the last published LSN {last}")]
    LsnRegressed { epoch: u64, lsn: u64, last: u64 },
    #[error("snapshot epoch {0} is still being written; only one epoch is written at a time")]
    WriterBusy(u64),
    #[error("node {node} appears twice in snapshot epoch {epoch}")]
    DuplicateNode { node: NodeId, epoch: u64 },
    #[error(
        "node {node} has no snapshot in the previous epoch, so epoch {epoch} can neither reuse it \
         nor write a delta for it"
    )]
    NoBase { node: NodeId, epoch: u64 },
    #[error("node {node} of snapshot epoch {epoch} was never finished (its writer panicked)")]
    Unfinished { node: NodeId, epoch: u64 },
    #[error("invalid snapshot node id {0:?}: must be 1 to {max} bytes", max = MAX_NODE_ID_LEN)]
    InvalidNodeId(String),
    #[error("invalid snapshot configuration: {0}")]
    InvalidConfig(&'static str),

    // --- the data on disk ---
    #[error("corrupt snapshot file {path}: {reason}")]
    Corrupt { path: PathBuf, reason: String },

    // --- the environment ---
    #[error("snapshot I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },

    // --- our bug ---
    #[error("cannot encode snapshot manifest: {0}")]
    Encode(postcard::Error),
}

pub type Result<T> = std::result::Result<T, SnapshotError>;

impl From<InvalidNodeId> for SnapshotError {
    fn from(InvalidNodeId(id): InvalidNodeId) -> SnapshotError {
        SnapshotError::InvalidNodeId(id)
    }
}

/// Attaches a path to an I/O error.
pub(super) trait IoContext<T> {
    fn at(self, path: &std::path::Path) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn at(self, path: &std::path::Path) -> Result<T> {
        self.map_err(|source| SnapshotError::Io {
            path: path.to_path_buf(),
            source,
        })
    }
}
