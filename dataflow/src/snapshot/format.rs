//! The snapshot files' format: node blobs (whole partitions, patches
//! inside partitions, tombstones), the epoch metadata, merging a chain of
//! blobs, and the catalog records snapshots rely on.

use std::collections::HashMap;
use std::sync::Arc;

use ladle_common::{Lsn, Row, RowDelta, TableId, Value};
use ladle_storage::snapshot::{LoadedNode, SnapshotError};
use ladle_storage::{Storage, StorageError};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::graph::RestoredState;
use crate::ops::aggregate::{Group, GroupPatch, Partition};
use crate::ops::Captured;
use crate::{DataflowError, Result};

/// Meta key: the change log was truncated below this LSN (big-endian u64).
pub(super) const LOG_TRUNCATED_META: &str = "dataflow/snapshot/log-truncated-below";
/// Meta key: a random identity of the storage, recorded in every snapshot so
/// that snapshots are never restored over another database.
pub(super) const STORAGE_ID_META: &str = "dataflow/snapshot/storage-id";
/// The snapshot node holding [`EpochMeta`].
pub(super) const TABLES_NODE: &str = "tables";

/// What an epoch records besides node state.
#[derive(Serialize, Deserialize)]
pub(super) struct EpochMeta {
    pub(super) storage_id: String,
    /// (table id, schema version) of every table at S.
    pub(super) tables: Vec<(TableId, u32)>,
}
pub(super) const FORMAT: u8 = 3;
pub(super) const KIND_READER: u8 = 0;
pub(super) const KIND_AGGREGATE: u8 = 1;
/// A window's state partitions, each saved as its input rows. (A new
/// kind, so snapshots written before windows existed still decode.)
pub(super) const KIND_WINDOW: u8 = 2;

/// A node file's payload (postcard): partitions saved whole, changes inside
/// partitions the previous state holds, and partitions that became holes. A
/// full file has only whole partitions.
#[derive(Serialize, Deserialize)]
pub(super) struct Blob<P, X> {
    pub(super) format: u8,
    pub(super) kind: u8,
    /// Reader rows may be out of order (a compaction applied row deltas):
    /// they are sorted on restore.
    pub(super) unsorted: bool,
    pub(super) upserts: Vec<(Vec<Value>, P)>,
    pub(super) patches: Vec<(Vec<Value>, X)>,
    pub(super) removed: Vec<Vec<Value>>,
}

/// The same encoding, written from a capture without copying it.
#[derive(Serialize)]
pub(super) struct BlobRef<'a, P, X> {
    pub(super) format: u8,
    pub(super) kind: u8,
    pub(super) unsorted: bool,
    pub(super) upserts: &'a [(Vec<Value>, Arc<P>)],
    pub(super) patches: &'a [(Vec<Value>, X)],
    pub(super) removed: &'a [Vec<Value>],
}

/// The state of one partition as saved, and how a patch applies to it.
pub(super) trait SavedPartition: Serialize + Sized {
    type Patch: Serialize + DeserializeOwned;
    /// What the saved bytes decode into before becoming `Self`: the same
    /// encoding, in a form that is cheaper to build.
    type Saved: DeserializeOwned;
    const KIND: u8;
    fn from_saved(saved: Self::Saved) -> Self;
    fn apply(&mut self, patch: Self::Patch);
    /// Rows (reader rows or aggregate groups) held.
    fn rows(&self) -> u64;
}

/// A reader key's rows; a patch is the row deltas applied since the
/// previous epoch (only effective ones, so the result is the multiset
/// `rows + inserts - deletes`; the reader sorts on restore).
impl SavedPartition for Vec<Row> {
    type Patch = Vec<RowDelta>;
    type Saved = Vec<Row>;
    const KIND: u8 = KIND_READER;
    fn from_saved(saved: Vec<Row>) -> Vec<Row> {
        saved
    }
    fn apply(&mut self, patch: Vec<RowDelta>) {
        let mut net: HashMap<Row, i64> = HashMap::new();
        for d in patch {
            let sign = d.sign();
            let row = match d {
                RowDelta::Insert(r) | RowDelta::Delete(r) => r,
            };
            *net.entry(row).or_insert(0) += sign;
        }
        let mut remove: HashMap<&Row, i64> = net
            .iter()
            .filter(|(_, &c)| c < 0)
            .map(|(r, &c)| (r, -c))
            .collect();
        if !remove.is_empty() {
            self.retain(|r| match remove.get_mut(r) {
                Some(c) if *c > 0 => {
                    *c -= 1;
                    false
                }
                _ => true,
            });
        }
        for (r, c) in net {
            for _ in 0..c.max(0) {
                self.push(r.clone());
            }
        }
    }
    fn rows(&self) -> u64 {
        self.len() as u64
    }
}

/// An aggregate partition; a patch is the new state of changed groups.
impl SavedPartition for Partition {
    type Patch = GroupPatch;
    /// A map is encoded as its length and then its entries, exactly like a
    /// sequence of pairs. Decoded as pairs, the map is then built at its
    /// final size: serde's map visitor starts from a capped size hint and
    /// grows, rehashing every key (SipHash of normalized values) each time:
    /// a 100k-group partition decoded in 49 ms, now 31.
    type Saved = Vec<(Vec<Value>, Group)>;
    const KIND: u8 = KIND_AGGREGATE;
    fn from_saved(saved: Vec<(Vec<Value>, Group)>) -> Partition {
        let mut part = Partition::with_capacity_and_hasher(saved.len(), Default::default());
        part.extend(saved);
        part
    }
    fn apply(&mut self, patch: GroupPatch) {
        for (gk, g) in patch {
            match g {
                Some(g) => {
                    self.insert(gk, g);
                }
                None => {
                    self.remove(&gk);
                }
            }
        }
    }
    fn rows(&self) -> u64 {
        self.len() as u64
    }
}

/// A window's state partition as saved: its input rows (the ordered state
/// is rebuilt from them on restore); a patch is the row deltas applied
/// since the previous epoch, as for a reader key.
#[derive(Serialize, Deserialize)]
#[serde(transparent)]
pub(super) struct WindowRows(pub(super) Vec<Row>);

impl SavedPartition for WindowRows {
    type Patch = Vec<RowDelta>;
    type Saved = Vec<Row>;
    const KIND: u8 = KIND_WINDOW;
    fn from_saved(saved: Vec<Row>) -> WindowRows {
        WindowRows(saved)
    }
    fn apply(&mut self, patch: Vec<RowDelta>) {
        self.0.apply(patch);
    }
    fn rows(&self) -> u64 {
        self.0.len() as u64
    }
}

/// Maps a snapshot store error to this crate's: damage and I/O are the
/// environment's; anything else is a bug of the coordinator here.
pub(super) fn snap_err(e: SnapshotError) -> DataflowError {
    match e {
        SnapshotError::Io { .. } => DataflowError::Storage(StorageError::Io(e.to_string())),
        SnapshotError::Corrupt { .. } => {
            DataflowError::Storage(StorageError::Corruption(e.to_string()))
        }
        other => DataflowError::Internal(format!("snapshot: {other}")),
    }
}

pub(super) fn encode_err(e: postcard::Error) -> DataflowError {
    DataflowError::Internal(format!("encoding snapshot state: {e}"))
}

/// (table id, schema version) of every table.
pub(super) fn table_versions(storage: &Storage) -> Vec<(TableId, u32)> {
    let mut out = Vec::new();
    for db in storage.databases() {
        for t in storage.tables(&db) {
            out.push((t.id, t.version));
        }
    }
    out.sort_unstable();
    out
}

/// The storage's identity, created on first use.
pub(super) fn storage_id(storage: &Storage) -> Result<String> {
    if let Some((_, v)) = storage
        .list_meta(STORAGE_ID_META)?
        .into_iter()
        .find(|(k, _)| k == STORAGE_ID_META)
    {
        return Ok(String::from_utf8_lossy(&v).into_owned());
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let id = crate::graph::stable_id(&format!("{nanos}/{}/{:p}", std::process::id(), storage));
    storage.put_meta(STORAGE_ID_META, id.as_bytes())?;
    Ok(id)
}

/// The LSN below which the change log may have been truncated.
pub(super) fn log_truncated_below(storage: &Storage) -> Result<Lsn> {
    Ok(storage
        .list_meta(LOG_TRUNCATED_META)?
        .into_iter()
        .find(|(k, _)| k == LOG_TRUNCATED_META)
        .and_then(|(_, v)| v.try_into().ok().map(u64::from_be_bytes))
        .unwrap_or(0))
}

/// Encodes a capture as a blob of `kind`. A reader captures its rows as the
/// persistent vector it holds ([`crate::ops::reader::Rows`]), which
/// serializes as the same sequence as the `Vec<Row>` restore decodes.
pub(super) fn encode_capture<P: Serialize, X: Serialize>(
    kind: u8,
    c: &Captured<P, X>,
) -> Result<Vec<u8>> {
    postcard::to_stdvec(&BlobRef {
        format: FORMAT,
        kind,
        unsorted: false,
        upserts: &c.upserts,
        patches: &c.patches,
        removed: &c.removed,
    })
    .map_err(encode_err)
}

/// Rows (or groups) a capture writes, and whether it is empty.
pub(super) fn capture_rows<P, X>(
    c: &Captured<P, X>,
    part_rows: impl Fn(&P) -> u64,
    patch_rows: impl Fn(&X) -> u64,
) -> u64 {
    c.upserts.iter().map(|(_, p)| part_rows(p)).sum::<u64>()
        + c.patches.iter().map(|(_, x)| patch_rows(x)).sum::<u64>()
}

/// A blob's (format, kind) header.
pub(super) fn blob_kind(bytes: &[u8]) -> std::result::Result<u8, String> {
    let ((format, kind), _) = postcard::take_from_bytes::<(u8, u8)>(bytes)
        .map_err(|e| format!("undecodable node state: {e}"))?;
    if format != FORMAT {
        return Err(format!("node state format {format}, expected {FORMAT}"));
    }
    Ok(kind)
}

/// Applies `deltas` on the full `base`: the node's partitions, each with
/// whether a patch touched it (reader rows then need sorting).
pub(super) fn apply_chain<P: SavedPartition>(
    base: &[u8],
    deltas: &[&[u8]],
) -> std::result::Result<Vec<(Vec<Value>, P, bool)>, String> {
    let decode = |bytes: &[u8]| -> std::result::Result<Blob<P::Saved, P::Patch>, String> {
        let b: Blob<P::Saved, P::Patch> =
            postcard::from_bytes(bytes).map_err(|e| format!("undecodable node state: {e}"))?;
        if b.format != FORMAT || b.kind != P::KIND {
            return Err("node state of another kind in the chain".into());
        }
        Ok(b)
    };
    let b = decode(base)?;
    if !b.patches.is_empty() || !b.removed.is_empty() {
        return Err("a chain's base holds changes, not whole state".into());
    }
    let unsorted = b.unsorted;
    if deltas.is_empty() {
        return Ok(b
            .upserts
            .into_iter()
            .map(|(k, p)| (k, P::from_saved(p), unsorted))
            .collect());
    }
    let mut map: HashMap<Vec<Value>, (P, bool)> = b
        .upserts
        .into_iter()
        .map(|(k, p)| (k, (P::from_saved(p), unsorted)))
        .collect();
    for d in deltas {
        let d = decode(d)?;
        for k in d.removed {
            map.remove(&k);
        }
        map.extend(
            d.upserts
                .into_iter()
                .map(|(k, p)| (k, (P::from_saved(p), false))),
        );
        for (k, patch) in d.patches {
            let e = map
                .get_mut(&k)
                .ok_or("a change to a partition the previous state lacks")?;
            e.0.apply(patch);
            e.1 = true;
        }
    }
    Ok(map.into_iter().map(|(k, (p, u))| (k, p, u)).collect())
}

/// Decodes a loaded node chain into restorable state and its row count.
pub(super) fn decode_node(n: &LoadedNode) -> std::result::Result<(RestoredState, u64), String> {
    let deltas: Vec<&[u8]> = n.deltas.iter().map(|d| d.as_slice()).collect();
    match blob_kind(&n.base)? {
        KIND_READER => {
            let keys = apply_chain::<Vec<Row>>(&n.base, &deltas)?;
            let rows = keys.iter().map(|k| k.1.rows()).sum();
            Ok((RestoredState::Reader(keys), rows))
        }
        KIND_AGGREGATE => {
            let parts = apply_chain::<Partition>(&n.base, &deltas)?;
            let rows = parts.iter().map(|p| p.1.rows()).sum();
            let parts = parts.into_iter().map(|(k, p, _)| (k, p)).collect();
            Ok((RestoredState::Aggregate(parts), rows))
        }
        KIND_WINDOW => {
            let parts = apply_chain::<WindowRows>(&n.base, &deltas)?;
            let rows = parts.iter().map(|p| p.1.rows()).sum();
            let parts = parts.into_iter().map(|(k, p, _)| (k, p.0)).collect();
            Ok((RestoredState::Window(parts), rows))
        }
        k => Err(format!("unknown node state kind {k}")),
    }
}

/// The compaction merge: base + deltas -> one full blob. On failure (never
/// for verified files written here) returns an empty blob, which recovery
/// rejects, so the node starts cold instead of wrong.
pub(super) fn merge_blobs(base: &[u8], deltas: &[&[u8]]) -> Vec<u8> {
    fn full<P: SavedPartition>(
        base: &[u8],
        deltas: &[&[u8]],
    ) -> std::result::Result<Vec<u8>, String> {
        let parts = apply_chain::<P>(base, deltas)?;
        postcard::to_stdvec(&Blob::<P, P::Patch> {
            format: FORMAT,
            kind: P::KIND,
            unsorted: parts.iter().any(|p| p.2),
            upserts: parts.into_iter().map(|(k, p, _)| (k, p)).collect(),
            patches: vec![],
            removed: vec![],
        })
        .map_err(|e| e.to_string())
    }
    let merged = match blob_kind(base) {
        Ok(KIND_READER) => full::<Vec<Row>>(base, deltas),
        Ok(KIND_AGGREGATE) => full::<Partition>(base, deltas),
        Ok(KIND_WINDOW) => full::<WindowRows>(base, deltas),
        Ok(_) if deltas.is_empty() => Ok(base.to_vec()),
        Ok(k) => Err(format!("unknown node state kind {k}")),
        Err(e) => Err(e),
    };
    merged.unwrap_or_else(|e| {
        tracing::warn!("cannot merge a snapshot chain ({e}); the node will start cold");
        Vec::new()
    })
}
