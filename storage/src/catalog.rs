//! The catalog: databases, tables, indexes, counters and the format version,
//! persisted in the catalog column family and mirrored in memory
//! ([`Catalog`]), and reading it back on open ([`load`]). Opening a data
//! directory and the DDL that changes the catalog are in `ddl.rs`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use ladle_common::{IndexSchema, TableId};
use serde::{Deserialize, Serialize};

use crate::cf::{self, catalog_key};
use crate::engine::KvRead;
use crate::error::{Result, StorageError};
use crate::keys;
use crate::table::{TableEntry, TableState};

/// Bumped on any incompatible change to keys, rows or catalog records.
/// 2: text keys under utf8mb4_general_ci fold accents too (`'é'` keys as
/// `'E'`), so a version-1 directory's secondary and primary keys would not
/// be found by lookups; it is refused rather than misread.
/// 3: table records keep integer display widths and fractional-seconds
/// precisions; a version-2 directory is read through [`v2`] and its table
/// records rewritten on open.
/// 4: DATE, DATETIME and TIMESTAMP keys encode the date's fields (the zero
/// date and `2020-00-15` sort where MySQL sorts them) instead of chrono's
/// day count; an older directory's keys over such columns are rewritten
/// on open ([`v3`]).
pub(crate) const FORMAT_VERSION: u32 = 4;
/// The oldest version `open` still reads (and upgrades).
pub(crate) const OLDEST_READABLE_VERSION: u32 = 2;

mod v2;
pub(crate) mod v3;
/// Whether new tables store whole rows in secondary entries (the default).
/// A secondary lookup is then one range scan instead of a scan plus one
/// primary read per row. Measured on 1M cached vote rows (10 rows per key):
/// equal CPU per lookup, 1.15-4x the lookups per second in wall time across
/// runs on a shared 2-core machine, equal bulk-load cost; with a cold cache
/// the primary reads would be random I/O, which whole rows avoid. The cost is
/// larger secondary entries. The choice is recorded per table, so existing
/// tables keep their layout.
pub(crate) static SECONDARY_FULL_ROW: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(true);

#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub(crate) struct Ids {
    pub(crate) next_table: u64,
    pub(crate) next_index: u64,
}

/// An index build in progress, as its marker records it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Building {
    pub(crate) table: TableId,
    pub(crate) index: IndexSchema,
}

/// The in-memory catalog.
#[derive(Default)]
pub(crate) struct Catalog {
    pub databases: BTreeSet<String>,
    /// Shared with commit groups and read views; DDL copies on write.
    pub tables: Arc<HashMap<TableId, Arc<TableState>>>,
    pub names: BTreeMap<(String, String), TableId>,
    pub(crate) ids: Ids,
    /// Local tables created in this open (not persisted; see
    /// [`LOCAL_IDS`]).
    pub(crate) locals: u64,
}

/// Table and index ids of local tables (`Storage::create_local_table`)
/// start here, far above any id the persisted counters ([`Ids`]) reach,
/// so the ids every node of a cluster assigns in step by replaying the
/// same schema changes never move because of them.
pub(crate) const LOCAL_IDS: u64 = 1 << 40;

pub(crate) fn encode<T: Serialize>(v: &T) -> Result<Vec<u8>> {
    postcard::to_stdvec(v)
        .map_err(|e| StorageError::Internal(format!("encoding a catalog record: {e}")))
}

fn decode<'a, T: Deserialize<'a>>(what: &str, bytes: &'a [u8]) -> Result<T> {
    postcard::from_bytes(bytes)
        .map_err(|e| StorageError::Corruption(format!("catalog record {what}: {e}")))
}

fn scan_prefix(r: &dyn KvRead, prefix: &str) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let start = prefix.as_bytes();
    let end = keys::prefix_successor(start);
    let mut out = Vec::new();
    r.scan(cf::CATALOG, start, end.as_deref(), &mut |k, v| {
        out.push((k.to_vec(), v.to_vec()));
        Ok(true)
    })?;
    Ok(out)
}

/// Everything `open` reads from the catalog.
pub(crate) struct Loaded {
    pub(crate) format: Option<u32>,
    pub(crate) epoch: u64,
    pub(crate) lsn: u64,
    pub(crate) ids: Ids,
    pub(crate) databases: Vec<String>,
    pub(crate) tables: Vec<TableEntry>,
    pub(crate) auto_inc: HashMap<TableId, u64>,
    pub(crate) building: Vec<Building>,
}

pub(crate) fn load(r: &dyn KvRead) -> Result<Loaded> {
    let format = match r.get(cf::CATALOG, catalog_key::FORMAT)? {
        Some(b) => Some(u32::from_be_bytes(b.as_slice().try_into().map_err(
            |_| StorageError::Corruption("format version record".into()),
        )?)),
        None => None,
    };
    let u64_of = |b: Option<Vec<u8>>| b.as_deref().and_then(keys::decode_lsn).unwrap_or(0);
    let epoch = u64_of(r.get(cf::CATALOG, catalog_key::EPOCH)?);
    let lsn = u64_of(r.get(cf::CATALOG, catalog_key::LSN)?);
    let ids = match r.get(cf::CATALOG, catalog_key::IDS)? {
        Some(b) => decode("ids", &b)?,
        None => Ids {
            next_table: 1,
            next_index: 1,
        },
    };
    let mut databases = Vec::new();
    for (k, _) in scan_prefix(r, catalog_key::DATABASE)? {
        databases.push(String::from_utf8_lossy(&k[catalog_key::DATABASE.len()..]).into_owned());
    }
    let mut tables = Vec::new();
    for (_, v) in scan_prefix(r, catalog_key::TABLE)? {
        tables.push(match format {
            Some(2) => decode::<v2::TableEntryV2>("table (version 2)", &v)?.into(),
            _ => decode::<TableEntry>("table", &v)?,
        });
    }
    let mut auto_inc = HashMap::new();
    for (k, v) in scan_prefix(r, catalog_key::AUTO_INC)? {
        let id = std::str::from_utf8(&k[catalog_key::AUTO_INC.len()..])
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .ok_or_else(|| StorageError::Corruption("auto-increment record key".into()))?;
        auto_inc.insert(id, keys::decode_lsn(&v).unwrap_or(1));
    }
    let mut building = Vec::new();
    for (_, v) in scan_prefix(r, catalog_key::BUILDING)? {
        building.push(decode::<Building>("index build", &v)?);
    }
    Ok(Loaded {
        format,
        epoch,
        lsn,
        ids,
        databases,
        tables,
        auto_inc,
        building,
    })
}
