//! The catalog: databases, tables, indexes, counters and the format version,
//! persisted in the catalog column family and mirrored in memory; opening a
//! data directory; DDL, including index builds in bounded batches.
//!
//! Every DDL statement runs under the commit lock, so it never interleaves
//! with a commit group. An index build writes a "building" marker first and
//! records the index in the table's catalog entry only when complete; on
//! open, a leftover marker means the build was interrupted and it is redone.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use ladle_common::{IndexSchema, TableId, TableSchema};
use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};

use crate::cf::{self, catalog_key};
use crate::engine::{Batch, CfKind, KvEngine, KvRead};
use crate::table::{pad_value, TableCounters, TableEntry, TableState};
use crate::write::{Overlay, OverlayReader};
use crate::{keys, read, Durability, Result, Storage, StorageError};

/// Bumped on any incompatible change to keys, rows or catalog records.
/// 2: text keys under utf8mb4_general_ci fold accents too (`'é'` keys as
/// `'E'`), so a version-1 directory's secondary and primary keys would not
/// be found by lookups; it is refused rather than misread.
/// 3: table records keep integer display widths and fractional-seconds
/// precisions; a version-2 directory is read through [`v2`] and its table
/// records rewritten on open.
pub(crate) const FORMAT_VERSION: u32 = 3;
/// The oldest version `open` still reads (and upgrades).
const OLDEST_READABLE_VERSION: u32 = 2;

mod v2;
/// Rows per index-build batch.
pub(crate) const INDEX_BUILD_BATCH: usize = 1024;

/// Test hook: an index build stops (as if the process died) after this many
/// batches.
pub(crate) static INDEX_BUILD_STOP_AFTER: AtomicUsize = AtomicUsize::new(usize::MAX);

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
struct Ids {
    next_table: u64,
    next_index: u64,
}

/// An index build in progress, as its marker records it.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Building {
    table: TableId,
    index: IndexSchema,
}

/// The in-memory catalog.
#[derive(Default)]
pub(crate) struct Catalog {
    pub databases: BTreeSet<String>,
    /// Shared with commit groups and read views; DDL copies on write.
    pub tables: Arc<HashMap<TableId, Arc<TableState>>>,
    pub names: BTreeMap<(String, String), TableId>,
    ids: Ids,
}

fn encode<T: Serialize>(v: &T) -> Result<Vec<u8>> {
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
struct Loaded {
    format: Option<u32>,
    epoch: u64,
    lsn: u64,
    ids: Ids,
    databases: Vec<String>,
    tables: Vec<TableEntry>,
    auto_inc: HashMap<TableId, u64>,
    building: Vec<Building>,
}

fn load(r: &dyn KvRead) -> Result<Loaded> {
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

impl Storage {
    /// Opens the storage layer over an engine: checks the format version,
    /// loads the catalog, bumps the row-id epoch, redoes interrupted builds.
    pub(crate) fn open_engine(
        engine: Arc<dyn KvEngine>,
        durability: Durability,
    ) -> Result<Arc<Storage>> {
        engine.create_cf(cf::CATALOG, CfKind::System)?;
        engine.create_cf(cf::CHANGE_LOG, CfKind::System)?;
        let mut loaded = None;
        engine.with_consistent(&mut |r| {
            loaded = Some(load(r)?);
            Ok(())
        })?;
        let loaded = loaded.ok_or_else(|| StorageError::Internal("catalog not loaded".into()))?;
        if let Some(found) = loaded.format {
            if !(OLDEST_READABLE_VERSION..=FORMAT_VERSION).contains(&found) {
                return Err(StorageError::FormatVersion {
                    found,
                    expected: FORMAT_VERSION,
                });
            }
        }
        let epoch = loaded.epoch + 1;
        let mut batch = Batch::default();
        if loaded.format.is_some_and(|f| f < FORMAT_VERSION) {
            // Upgrade: every table record in the current encoding, written
            // in the same batch as the new version number.
            for entry in &loaded.tables {
                batch.put(
                    cf::CATALOG,
                    catalog_key::table(entry.schema.id),
                    encode(entry)?,
                );
            }
            tracing::info!(
                from = loaded.format,
                to = FORMAT_VERSION,
                tables = loaded.tables.len(),
                "upgraded the catalog format"
            );
        }
        batch.put(
            cf::CATALOG,
            catalog_key::FORMAT,
            FORMAT_VERSION.to_be_bytes(),
        );
        batch.put(cf::CATALOG, catalog_key::EPOCH, epoch.to_be_bytes());
        engine.write(batch, durability == Durability::Sync)?;

        let mut catalog = Catalog {
            ids: loaded.ids,
            ..Catalog::default()
        };
        catalog.databases.extend(loaded.databases);
        for entry in loaded.tables {
            let id = entry.schema.id;
            let counters = Arc::new(TableCounters {
                auto_inc: Mutex::new(loaded.auto_inc.get(&id).copied().unwrap_or(1)),
                rows: AtomicI64::new(engine.estimate_keys(&cf::primary(id)) as i64),
            });
            catalog.names.insert(
                (entry.schema.database.clone(), entry.schema.name.clone()),
                id,
            );
            Arc::make_mut(&mut catalog.tables)
                .insert(id, Arc::new(TableState::new(entry, counters)));
        }
        let storage = Arc::new(Storage {
            engine,
            durability,
            catalog: RwLock::new(catalog),
            commit: Mutex::new(()),
            queue: Mutex::new(crate::CommitQueue::default()),
            observer: RwLock::new(None),
            last_lsn: AtomicU64::new(loaded.lsn),
            epoch,
            row_seq: AtomicU64::new(0),
            flusher: Mutex::new(None),
            disk_guard: Default::default(),
            gate: RwLock::new(None),
            fence: RwLock::new(()),
            log_floor: AtomicU64::new(u64::MAX),
            secondary_full_row: std::sync::atomic::AtomicBool::new(
                SECONDARY_FULL_ROW.load(Ordering::Relaxed),
            ),
        });
        // Families no table or build refers to: left by a crash between a
        // DROP's catalog write and its family drop, or a CREATE's family
        // creation and its catalog write.
        let mut wanted: BTreeSet<String> = [cf::CATALOG, cf::CHANGE_LOG, "default"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        for t in storage.catalog.read().tables.values() {
            wanted.insert(t.primary_cf().to_string());
            wanted.extend(t.schema.indexes.iter().map(|i| cf::secondary(i.id)));
        }
        wanted.extend(loaded.building.iter().map(|b| cf::secondary(b.index.id)));
        for name in storage.engine.cf_names() {
            if !wanted.contains(&name) {
                tracing::info!(column_family = %name, "dropping an orphaned column family");
                storage.engine.drop_cf(&name)?;
            }
        }
        for b in loaded.building {
            let _guard = storage.commit.lock();
            tracing::info!(index = %b.index.name, table = b.table, "redoing an interrupted index build");
            storage.engine.drop_cf(&cf::secondary(b.index.id))?;
            let table = storage.catalog.read().tables.get(&b.table).cloned();
            match table {
                Some(t) => {
                    storage
                        .engine
                        .create_cf(&cf::secondary(b.index.id), CfKind::Index)?;
                    match storage.build_index(&t, &b.index) {
                        Ok(()) => {
                            storage.finish_index(&t, b.index)?;
                        }
                        Err(e @ StorageError::DuplicateKey { .. }) => {
                            tracing::warn!(
                                "interrupted UNIQUE index build now fails: {e}; index dropped"
                            );
                            storage.abandon_index(b.index.id)?;
                        }
                        Err(e) => return Err(e),
                    }
                }
                None => storage.abandon_index(b.index.id)?,
            }
        }
        Ok(storage)
    }

    fn write_catalog(&self, mut batch: Batch) -> Result<()> {
        crate::attach_record(&mut batch);
        self.engine
            .write(batch, self.durability == Durability::Sync)
    }

    fn put_ids(&self, batch: &mut Batch, ids: Ids) -> Result<()> {
        batch.put(cf::CATALOG, catalog_key::IDS, encode(&ids)?);
        Ok(())
    }

    fn lookup_table(&self, database: &str, table: &str) -> Result<Arc<TableState>> {
        let c = self.catalog.read();
        c.names
            .get(&(database.to_string(), table.to_string()))
            .and_then(|id| c.tables.get(id))
            .cloned()
            .ok_or_else(|| StorageError::NoSuchTable {
                database: database.into(),
                table: table.into(),
            })
    }

    /// Records a new version of a table in the catalog (disk, then memory).
    fn replace_table(
        &self,
        entry: TableEntry,
        counters: Arc<TableCounters>,
        mut batch: Batch,
    ) -> Result<Arc<TableSchema>> {
        batch.put(
            cf::CATALOG,
            catalog_key::table(entry.schema.id),
            encode(&entry)?,
        );
        self.write_catalog(batch)?;
        let state = Arc::new(TableState::new(entry, counters));
        let schema = Arc::clone(&state.schema);
        Arc::make_mut(&mut self.catalog.write().tables).insert(schema.id, state);
        Ok(schema)
    }

    pub(crate) fn ddl_create_database(&self, name: &str, if_not_exists: bool) -> Result<()> {
        let _guard = self.commit.lock();
        self.settle_observer();
        if self.catalog.read().databases.contains(name) {
            return if if_not_exists {
                Ok(())
            } else {
                Err(StorageError::DatabaseExists(name.into()))
            };
        }
        let mut batch = Batch::default();
        batch.put(cf::CATALOG, catalog_key::database(name), Vec::new());
        self.write_catalog(batch)?;
        self.catalog.write().databases.insert(name.to_string());
        Ok(())
    }

    pub(crate) fn ddl_drop_database(
        &self,
        name: &str,
        if_exists: bool,
    ) -> Result<Vec<Arc<TableSchema>>> {
        let _guard = self.commit.lock();
        self.settle_observer();
        if !self.catalog.read().databases.contains(name) {
            return if if_exists {
                Ok(Vec::new())
            } else {
                Err(StorageError::NoSuchDatabase(name.into()))
            };
        }
        let tables: Vec<Arc<TableState>> = {
            let c = self.catalog.read();
            c.tables
                .values()
                .filter(|t| t.schema.database == name)
                .cloned()
                .collect()
        };
        let mut batch = Batch::default();
        for t in &tables {
            batch.delete(cf::CATALOG, catalog_key::table(t.schema.id));
            batch.delete(cf::CATALOG, catalog_key::auto_inc(t.schema.id));
        }
        batch.delete(cf::CATALOG, catalog_key::database(name));
        self.write_catalog(batch)?;
        {
            let mut c = self.catalog.write();
            c.databases.remove(name);
            for t in &tables {
                Arc::make_mut(&mut c.tables).remove(&t.schema.id);
                c.names
                    .remove(&(t.schema.database.clone(), t.schema.name.clone()));
            }
        }
        for t in &tables {
            self.drop_table_cfs(t)?;
        }
        let mut dropped: Vec<Arc<TableSchema>> =
            tables.iter().map(|t| Arc::clone(&t.schema)).collect();
        dropped.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(dropped)
    }

    fn drop_table_cfs(&self, t: &TableState) -> Result<()> {
        self.engine.drop_cf(t.primary_cf())?;
        for index in &t.schema.indexes {
            self.engine.drop_cf(&cf::secondary(index.id))?;
        }
        Ok(())
    }

    pub(crate) fn ddl_create_table(
        &self,
        mut schema: TableSchema,
        if_not_exists: bool,
    ) -> Result<Arc<TableSchema>> {
        let _guard = self.commit.lock();
        self.settle_observer();
        if !self.catalog.read().databases.contains(&schema.database) {
            return Err(StorageError::NoSuchDatabase(schema.database.clone()));
        }
        if let Ok(existing) = self.lookup_table(&schema.database, &schema.name) {
            return if if_not_exists {
                Ok(Arc::clone(&existing.schema))
            } else {
                Err(StorageError::TableExists(schema.name))
            };
        }
        validate_schema(&schema)?;
        let mut ids = self.catalog.read().ids;
        schema.id = ids.next_table;
        ids.next_table += 1;
        for index in &mut schema.indexes {
            index.id = ids.next_index;
            ids.next_index += 1;
        }
        self.engine
            .create_cf(&cf::primary(schema.id), CfKind::Index)?;
        for index in &schema.indexes {
            self.engine
                .create_cf(&cf::secondary(index.id), CfKind::Index)?;
        }
        let entry = TableEntry {
            pads: vec![ladle_common::Value::Null; schema.columns.len()],
            secondary_full_row: self.secondary_full_row.load(Ordering::Relaxed),
            schema,
        };
        let mut batch = Batch::default();
        self.put_ids(&mut batch, ids)?;
        let counters = Arc::new(TableCounters {
            auto_inc: Mutex::new(1),
            rows: AtomicI64::new(0),
        });
        let key = (entry.schema.database.clone(), entry.schema.name.clone());
        let schema = self.replace_table(entry, counters, batch)?;
        let mut c = self.catalog.write();
        c.ids = ids;
        c.names.insert(key, schema.id);
        Ok(schema)
    }

    /// Restarts `table`'s AUTO_INCREMENT counter after its rows are gone
    /// (TRUNCATE TABLE): the next value is one past the largest value still
    /// in the table, 1 when it is empty. Runs under the commit lock, so no
    /// insert interleaves; returns the new next value.
    pub fn reset_auto_increment(&self, table: TableId) -> Result<u64> {
        let _guard = self.commit.lock();
        self.settle_observer();
        let t = self
            .catalog
            .read()
            .tables
            .get(&table)
            .cloned()
            .ok_or_else(|| StorageError::Internal(format!("no table with id {table:?}")))?;
        let Some(ai) = t.schema.auto_increment_column() else {
            return Ok(1);
        };
        let largest = self
            .read_latest(|r| read::scan_all(r, &t))?
            .iter()
            .filter_map(|row| match &row[ai] {
                ladle_common::Value::UInt(u) => Some(*u),
                v => v.as_i64().and_then(|i| u64::try_from(i).ok()),
            })
            .max()
            .unwrap_or(0);
        let next = largest.saturating_add(1);
        let mut batch = Batch::default();
        batch.put(
            cf::CATALOG,
            catalog_key::auto_inc(table),
            next.to_be_bytes(),
        );
        self.write_catalog(batch)?;
        *t.counters.auto_inc.lock() = next;
        Ok(next)
    }

    pub(crate) fn ddl_drop_table(&self, database: &str, table: &str) -> Result<Arc<TableSchema>> {
        let _guard = self.commit.lock();
        self.settle_observer();
        let t = self.lookup_table(database, table)?;
        let mut batch = Batch::default();
        batch.delete(cf::CATALOG, catalog_key::table(t.schema.id));
        batch.delete(cf::CATALOG, catalog_key::auto_inc(t.schema.id));
        self.write_catalog(batch)?;
        {
            let mut c = self.catalog.write();
            Arc::make_mut(&mut c.tables).remove(&t.schema.id);
            c.names.remove(&(database.to_string(), table.to_string()));
        }
        self.drop_table_cfs(&t)?;
        Ok(Arc::clone(&t.schema))
    }

    pub(crate) fn ddl_add_column(
        &self,
        database: &str,
        table: &str,
        column: ladle_common::ColumnSchema,
    ) -> Result<Arc<TableSchema>> {
        let _guard = self.commit.lock();
        self.settle_observer();
        let t = self.lookup_table(database, table)?;
        if t.schema.column_index(&column.name).is_some() {
            return Err(StorageError::ColumnExists(column.name));
        }
        if column.auto_increment && t.schema.auto_increment_column().is_some() {
            return Err(StorageError::Expression(
                "Incorrect table definition; there can be only one auto column".into(),
            ));
        }
        let mut entry = t.entry.clone();
        entry
            .pads
            .resize(entry.schema.columns.len(), ladle_common::Value::Null);
        entry.pads.push(pad_value(&column));
        entry.schema.columns.push(column);
        entry.schema.version += 1;
        self.replace_table(entry, Arc::clone(&t.counters), Batch::default())
    }

    pub(crate) fn ddl_drop_index(
        &self,
        database: &str,
        table: &str,
        index: &str,
    ) -> Result<Arc<TableSchema>> {
        let _guard = self.commit.lock();
        self.settle_observer();
        let t = self.lookup_table(database, table)?;
        let Some(ix) = t.schema.index(index).cloned() else {
            return Err(StorageError::NoSuchIndex(index.into()));
        };
        let mut entry = t.entry.clone();
        entry.schema.indexes.retain(|i| i.id != ix.id);
        entry.schema.version += 1;
        let schema = self.replace_table(entry, Arc::clone(&t.counters), Batch::default())?;
        self.engine.drop_cf(&cf::secondary(ix.id))?;
        Ok(schema)
    }

    pub(crate) fn ddl_create_index(
        &self,
        database: &str,
        table: &str,
        mut index: IndexSchema,
    ) -> Result<Arc<TableSchema>> {
        let _guard = self.commit.lock();
        self.settle_observer();
        let t = self.lookup_table(database, table)?;
        if index.name.eq_ignore_ascii_case("PRIMARY") || t.schema.index(&index.name).is_some() {
            return Err(StorageError::IndexExists(index.name));
        }
        check_index_columns(&t.schema, &index)?;
        let mut ids = self.catalog.read().ids;
        index.id = ids.next_index;
        ids.next_index += 1;
        let mut batch = Batch::default();
        self.put_ids(&mut batch, ids)?;
        batch.put(
            cf::CATALOG,
            catalog_key::building(index.id),
            encode(&Building {
                table: t.schema.id,
                index: index.clone(),
            })?,
        );
        self.engine
            .create_cf(&cf::secondary(index.id), CfKind::Index)?;
        self.write_catalog(batch)?;
        self.catalog.write().ids = ids;
        match self.build_index(&t, &index) {
            Ok(()) => self.finish_index(&t, index),
            Err(e @ StorageError::DuplicateKey { .. }) => {
                self.abandon_index(index.id)?;
                Err(e)
            }
            // Anything else (I/O, the test hook) leaves the marker: the next
            // open redoes the build.
            Err(e) => Err(e),
        }
    }

    /// Writes the entries of `index` for every row of `t`, in batches of
    /// [`INDEX_BUILD_BATCH`] rows. Called with the commit lock held.
    fn build_index(&self, t: &TableState, index: &IndexSchema) -> Result<()> {
        let index_cf = cf::secondary(index.id);
        let mut after: Option<Vec<u8>> = None;
        let mut batches = 0usize;
        loop {
            let mut rows: Vec<read::KeyedRow> = Vec::new();
            let start = after.as_ref().map(|k| {
                let mut s = k.clone();
                s.push(0);
                s
            });
            let mut overlay = Overlay::default();
            let mut result = Ok(());
            self.engine.with_consistent(&mut |r| {
                rows.clear();
                r.scan(
                    t.primary_cf(),
                    start.as_deref().unwrap_or(&[]),
                    None,
                    &mut |k, v| {
                        rows.push((k.to_vec(), t.decode_row(v)?));
                        Ok(rows.len() < INDEX_BUILD_BATCH)
                    },
                )?;
                for (pk, row) in &rows {
                    if index.unique && !index.columns.iter().any(|&c| row[c].is_null()) {
                        let prefix = t.encode_columns(&index.columns, row);
                        let end = keys::prefix_successor(&prefix);
                        let mut dup = false;
                        OverlayReader {
                            base: r,
                            overlay: &overlay,
                        }
                        .scan(
                            &index_cf,
                            &prefix,
                            end.as_deref(),
                            &mut |_, _| {
                                dup = true;
                                Ok(false)
                            },
                        )?;
                        if dup {
                            let value = index
                                .columns
                                .iter()
                                .map(|&c| row[c].to_string())
                                .collect::<Vec<_>>()
                                .join("-");
                            result = Err(StorageError::DuplicateKey {
                                key: index.name.clone(),
                                value,
                            });
                            return Ok(());
                        }
                    }
                    overlay.put(
                        &index_cf,
                        t.secondary_key(index, row, pk),
                        t.secondary_value(pk, row)?,
                    );
                }
                Ok(())
            })?;
            result?;
            let Some((last, _)) = rows.last() else {
                return Ok(());
            };
            after = Some(last.clone());
            let full = rows.len() == INDEX_BUILD_BATCH;
            let mut batch = Batch::default();
            overlay.into_batch(&mut batch);
            if !batch.is_empty() {
                self.engine.write(batch, false)?;
            }
            batches += 1;
            if batches >= INDEX_BUILD_STOP_AFTER.load(Ordering::Relaxed) {
                return Err(StorageError::Internal(format!(
                    "index build stopped after {batches} batches (test hook)"
                )));
            }
            tracing::debug!(index = %index.name, rows = batches * INDEX_BUILD_BATCH, "building index");
            if !full {
                return Ok(());
            }
        }
    }

    /// Records a completely built index and removes its marker.
    fn finish_index(&self, t: &TableState, index: IndexSchema) -> Result<Arc<TableSchema>> {
        let mut entry = t.entry.clone();
        let id = index.id;
        entry.schema.indexes.push(index);
        entry.schema.version += 1;
        let mut batch = Batch::default();
        batch.delete(cf::CATALOG, catalog_key::building(id));
        self.replace_table(entry, Arc::clone(&t.counters), batch)
    }

    fn abandon_index(&self, id: u64) -> Result<()> {
        self.engine.drop_cf(&cf::secondary(id))?;
        let mut batch = Batch::default();
        batch.delete(cf::CATALOG, catalog_key::building(id));
        self.write_catalog(batch)
    }
}

fn check_index_columns(schema: &TableSchema, index: &IndexSchema) -> Result<()> {
    if index.columns.is_empty() {
        return Err(StorageError::Expression(format!(
            "index '{}' has no columns",
            index.name
        )));
    }
    for &c in &index.columns {
        if c >= schema.columns.len() {
            return Err(StorageError::Internal(format!(
                "index '{}' names column #{c}, which does not exist",
                index.name
            )));
        }
    }
    Ok(())
}

fn validate_schema(schema: &TableSchema) -> Result<()> {
    let mut seen = BTreeSet::new();
    for c in &schema.columns {
        if !seen.insert(c.name.to_ascii_lowercase()) {
            return Err(StorageError::ColumnExists(c.name.clone()));
        }
    }
    if let Some(pk) = &schema.primary_key {
        if pk.iter().any(|&c| c >= schema.columns.len()) {
            return Err(StorageError::Internal(
                "primary key names a column that does not exist".into(),
            ));
        }
    }
    let mut names = BTreeSet::new();
    for index in &schema.indexes {
        if !names.insert(index.name.to_ascii_lowercase())
            || index.name.eq_ignore_ascii_case("PRIMARY")
        {
            return Err(StorageError::IndexExists(index.name.clone()));
        }
        check_index_columns(schema, index)?;
    }
    if schema.columns.iter().filter(|c| c.auto_increment).count() > 1 {
        return Err(StorageError::Expression(
            "Incorrect table definition; there can be only one auto column".into(),
        ));
    }
    Ok(())
}
