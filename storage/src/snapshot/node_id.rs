//! [`NodeId`], the key the snapshot store keeps blobs under, and its
//! validation error.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Longest accepted node id, in bytes.
pub const MAX_NODE_ID_LEN: usize = 512;

/// Identifies one saved unit of state: a materialized node or a shard of one.
/// Any non-empty string up to [`MAX_NODE_ID_LEN`] bytes; `From<u64>` gives the
/// decimal form.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct NodeId(String);

/// A node id that is empty or longer than [`MAX_NODE_ID_LEN`] bytes (the
/// caller's fault); the store reports it as
/// [`SnapshotError::InvalidNodeId`](super::SnapshotError::InvalidNodeId).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid snapshot node id {0:?}: must be 1 to {max} bytes", max = MAX_NODE_ID_LEN)]
pub struct InvalidNodeId(pub String);

impl NodeId {
    pub fn new(id: impl Into<String>) -> Result<NodeId, InvalidNodeId> {
        let id = id.into();
        if id.is_empty() || id.len() > MAX_NODE_ID_LEN {
            return Err(InvalidNodeId(id));
        }
        Ok(NodeId(id))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// A short, file-name-safe rendering for node file names (the manifest and
    /// file header carry the real id).
    pub(super) fn file_stem(&self) -> String {
        self.0
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
            .take(32)
            .collect()
    }
}

/// Anything that names a node: `u64`, `&str`, `String` or a [`NodeId`].
pub trait IntoNodeId {
    fn into_node_id(self) -> Result<NodeId, InvalidNodeId>;
}

impl IntoNodeId for NodeId {
    fn into_node_id(self) -> Result<NodeId, InvalidNodeId> {
        Ok(self)
    }
}

impl IntoNodeId for &NodeId {
    fn into_node_id(self) -> Result<NodeId, InvalidNodeId> {
        Ok(self.clone())
    }
}

impl IntoNodeId for u64 {
    fn into_node_id(self) -> Result<NodeId, InvalidNodeId> {
        Ok(NodeId::from(self))
    }
}

impl IntoNodeId for &str {
    fn into_node_id(self) -> Result<NodeId, InvalidNodeId> {
        NodeId::new(self)
    }
}

impl IntoNodeId for String {
    fn into_node_id(self) -> Result<NodeId, InvalidNodeId> {
        NodeId::new(self)
    }
}

impl From<u64> for NodeId {
    fn from(id: u64) -> NodeId {
        NodeId(id.to_string())
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
