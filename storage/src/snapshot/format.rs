//! Byte layout of node files and manifests (see the module docs for the
//! picture). Encoding and decoding live only here.

use std::io::Write;

use serde::{Deserialize, Serialize};

use super::{Compression, NodeId, SnapshotKind};

/// First bytes of every node file.
pub(super) const FILE_MAGIC: &[u8; 8] = b"LDLSNAP1";
/// Last bytes of every node file.
pub(super) const FOOTER_MAGIC: &[u8; 4] = b"LDLE";
/// First bytes of every manifest.
pub(super) const MANIFEST_MAGIC: &[u8; 8] = b"LDLMANI1";
pub(super) const FORMAT_VERSION: u16 = 1;

/// magic, version u16, kind u8, compression u8, node id length u32,
/// state epoch u64, base epoch u64 (`u64::MAX` = none), raw length u64.
pub(super) const HEADER_LEN: usize = 8 + 2 + 1 + 1 + 4 + 8 + 8 + 8;
/// stored payload length u64, crc32 u32, magic.
pub(super) const FOOTER_LEN: usize = 8 + 4 + 4;
/// magic, version u16, body length u32 ... body ... crc32 u32.
const MANIFEST_HEADER_LEN: usize = 8 + 2 + 4;

/// One immutable node file, as the manifest records it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    /// Relative to the snapshot directory: `<epoch dir>/<file name>`.
    pub path: String,
    pub kind: SnapshotKind,
    /// The epoch whose state the file captures (for a delta: the state after
    /// applying it).
    pub state_epoch: u64,
    /// For a delta: the epoch of the state it applies on.
    pub base_epoch: Option<u64>,
    /// Size of the whole file on disk, header and footer included.
    pub size: u64,
    /// Length of the caller's blob (after decompression).
    pub raw_len: u64,
    /// CRC-32 (IEEE, crc32fast) of every byte before the footer.
    pub crc32: u32,
    pub compression: Compression,
}

/// One node of a manifest: its full base file and the deltas to apply on it,
/// oldest first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeChain {
    pub node: NodeId,
    pub files: Vec<FileEntry>,
}

/// The published description of one snapshot epoch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub epoch: u64,
    /// Every saved node reflects exactly the writes with LSN <= `lsn`.
    pub lsn: u64,
    pub graph_version: u64,
    pub created_unix_ms: u64,
    /// Sorted by node id.
    pub nodes: Vec<NodeChain>,
}

impl Manifest {
    pub fn chain(&self, node: &NodeId) -> Option<&NodeChain> {
        self.nodes
            .binary_search_by(|c| c.node.cmp(node))
            .ok()
            .map(|i| &self.nodes[i])
    }

    pub fn total_bytes(&self) -> u64 {
        self.nodes
            .iter()
            .flat_map(|c| &c.files)
            .map(|f| f.size)
            .sum()
    }

    pub fn file_count(&self) -> usize {
        self.nodes.iter().map(|c| c.files.len()).sum()
    }

    pub fn longest_chain(&self) -> usize {
        self.nodes.iter().map(|c| c.files.len()).max().unwrap_or(0)
    }
}

fn kind_byte(kind: SnapshotKind) -> u8 {
    match kind {
        SnapshotKind::Full => 0,
        SnapshotKind::Delta => 1,
    }
}

fn compression_byte(c: Compression) -> u8 {
    match c {
        Compression::None => 0,
        Compression::Lz4 => 1,
    }
}

/// What the header of a node file says.
pub(super) struct FileMeta<'a> {
    pub node: &'a NodeId,
    pub kind: SnapshotKind,
    pub compression: Compression,
    pub state_epoch: u64,
    pub base_epoch: Option<u64>,
    pub raw_len: u64,
}

/// Writes a whole node file to `out`; returns (bytes written, crc32).
pub(super) fn write_node_file(
    out: &mut impl Write,
    meta: &FileMeta<'_>,
    payload: &[u8],
) -> std::io::Result<(u64, u32)> {
    let node = meta.node.as_str().as_bytes();
    let mut header = Vec::with_capacity(HEADER_LEN + node.len());
    header.extend_from_slice(FILE_MAGIC);
    header.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    header.push(kind_byte(meta.kind));
    header.push(compression_byte(meta.compression));
    header.extend_from_slice(&(node.len() as u32).to_le_bytes());
    header.extend_from_slice(&meta.state_epoch.to_le_bytes());
    header.extend_from_slice(&meta.base_epoch.unwrap_or(u64::MAX).to_le_bytes());
    header.extend_from_slice(&meta.raw_len.to_le_bytes());
    header.extend_from_slice(node);

    let mut crc = crc32fast::Hasher::new();
    crc.update(&header);
    crc.update(payload);
    let crc = crc.finalize();

    let mut footer = [0u8; FOOTER_LEN];
    footer[..8].copy_from_slice(&(payload.len() as u64).to_le_bytes());
    footer[8..12].copy_from_slice(&crc.to_le_bytes());
    footer[12..].copy_from_slice(FOOTER_MAGIC);

    out.write_all(&header)?;
    out.write_all(payload)?;
    out.write_all(&footer)?;
    Ok(((header.len() + payload.len() + FOOTER_LEN) as u64, crc))
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    let mut a = [0u8; 2];
    a.copy_from_slice(&b[at..at + 2]);
    u16::from_le_bytes(a)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// Verifies a node file read whole into `bytes` against its manifest entry and
/// returns the caller's blob. Every check says what it found on failure.
pub(super) fn decode_node_file(
    mut bytes: Vec<u8>,
    node: &NodeId,
    entry: &FileEntry,
) -> Result<Vec<u8>, String> {
    if bytes.len() as u64 != entry.size {
        return Err(format!(
            "size is {} bytes, the manifest says {}",
            bytes.len(),
            entry.size
        ));
    }
    if bytes.len() < HEADER_LEN + FOOTER_LEN {
        return Err(format!(
            "{} bytes is shorter than header and footer",
            bytes.len()
        ));
    }
    if &bytes[..8] != FILE_MAGIC {
        return Err("bad magic at start of file".to_string());
    }
    let footer_at = bytes.len() - FOOTER_LEN;
    if &bytes[footer_at + 12..] != FOOTER_MAGIC {
        return Err("bad magic at end of file (truncated?)".to_string());
    }
    let computed = crc32fast::hash(&bytes[..footer_at]);
    let stored = u32_at(&bytes, footer_at + 8);
    if computed != stored || computed != entry.crc32 {
        return Err(format!(
            "checksum mismatch: computed {computed:08x}, footer {stored:08x}, manifest {:08x}",
            entry.crc32
        ));
    }
    let version = u16_at(&bytes, 8);
    if version != FORMAT_VERSION {
        return Err(format!("unknown format version {version}"));
    }
    let node_len = u32_at(&bytes, 12) as usize;
    let payload_at = HEADER_LEN.saturating_add(node_len);
    if payload_at > footer_at {
        return Err(format!("node id length {node_len} overruns the file"));
    }
    let payload_len = u64_at(&bytes, footer_at);
    if payload_len != (footer_at - payload_at) as u64 {
        return Err(format!(
            "footer says {payload_len} payload bytes, file holds {}",
            footer_at - payload_at
        ));
    }
    let checks = [
        (bytes[10] == kind_byte(entry.kind), "kind"),
        (
            bytes[11] == compression_byte(entry.compression),
            "compression",
        ),
        (
            &bytes[HEADER_LEN..payload_at] == node.as_str().as_bytes(),
            "node id",
        ),
        (u64_at(&bytes, 16) == entry.state_epoch, "state epoch"),
        (
            u64_at(&bytes, 24) == entry.base_epoch.unwrap_or(u64::MAX),
            "base epoch",
        ),
        (u64_at(&bytes, 32) == entry.raw_len, "raw length"),
    ];
    if let Some((_, what)) = checks.iter().find(|(ok, _)| !ok) {
        return Err(format!("header {what} does not match the manifest"));
    }
    let raw = match entry.compression {
        Compression::None => {
            bytes.truncate(footer_at);
            bytes.drain(..payload_at);
            bytes
        }
        Compression::Lz4 => {
            let raw_len = usize::try_from(entry.raw_len)
                .map_err(|_| "raw length overflows usize".to_string())?;
            lz4_flex::block::decompress(&bytes[payload_at..footer_at], raw_len)
                .map_err(|e| format!("lz4 decompression failed: {e}"))?
        }
    };
    if raw.len() as u64 != entry.raw_len {
        return Err(format!(
            "decoded {} bytes, the manifest says {}",
            raw.len(),
            entry.raw_len
        ));
    }
    Ok(raw)
}

/// Encodes a manifest with its framing and checksum.
pub(super) fn encode_manifest(m: &Manifest) -> Result<Vec<u8>, postcard::Error> {
    let body = postcard::to_stdvec(m)?;
    let mut out = Vec::with_capacity(MANIFEST_HEADER_LEN + body.len() + 4);
    out.extend_from_slice(MANIFEST_MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&body);
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    Ok(out)
}

/// Decodes and verifies a manifest.
pub(super) fn decode_manifest(bytes: &[u8]) -> Result<Manifest, String> {
    if bytes.len() < MANIFEST_HEADER_LEN + 4 {
        return Err(format!("{} bytes is too short for a manifest", bytes.len()));
    }
    if &bytes[..8] != MANIFEST_MAGIC {
        return Err("bad manifest magic".to_string());
    }
    let body_len = u32_at(bytes, 10) as usize;
    if MANIFEST_HEADER_LEN + body_len + 4 != bytes.len() {
        return Err(format!(
            "manifest says {body_len} body bytes, file is {} bytes",
            bytes.len()
        ));
    }
    let crc_at = bytes.len() - 4;
    let computed = crc32fast::hash(&bytes[..crc_at]);
    let stored = u32_at(bytes, crc_at);
    if computed != stored {
        return Err(format!(
            "manifest checksum mismatch: computed {computed:08x}, stored {stored:08x}"
        ));
    }
    let version = u16_at(bytes, 8);
    if version != FORMAT_VERSION {
        return Err(format!("unknown manifest version {version}"));
    }
    postcard::from_bytes(&bytes[MANIFEST_HEADER_LEN..crc_at])
        .map_err(|e| format!("manifest does not decode: {e}"))
}
