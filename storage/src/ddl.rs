//! Opening a data directory and DDL, including index builds in bounded
//! batches: the half of [`Storage`]'s impl that changes the catalog.
//!
//! Every DDL statement runs under the commit lock, so it never interleaves
//! with a commit group. An index build writes a "building" marker first and
//! records the index in the table's catalog entry only when complete; on
//! open, a leftover marker means the build was interrupted and it is redone.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;

use ladle_common::{coerce, IndexSchema, Row, TableId, TableSchema, Value};
use parking_lot::Mutex;

use crate::catalog::v3::rekey_temporal_columns;
use crate::catalog::{
    encode, load, Building, Catalog, Ids, FORMAT_VERSION, LOCAL_IDS, OLDEST_READABLE_VERSION,
};
use crate::cf::{self, catalog_key};
use crate::config::Durability;
use crate::engine::{Batch, CfKind, KvEngine, KvRead};
use crate::error::{Result, StorageError};
use crate::ops::TableChange;
use crate::storage::Storage;
use crate::table::{encode_row, pad_value, TableCounters, TableEntry, TableState};
use crate::write::{Overlay, OverlayReader};
use crate::{keys, read};

/// Rows per index-build batch.
pub(crate) const INDEX_BUILD_BATCH: usize = 1024;

/// Test hook: an index build stops (as if the process died) after this many
/// batches.
pub(crate) static INDEX_BUILD_STOP_AFTER: AtomicUsize = AtomicUsize::new(usize::MAX);

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
            // Upgrade: every table record in the current encoding, and keys
            // over temporal columns re-encoded (version 4), written in the
            // same batch as the new version number.
            for entry in &loaded.tables {
                batch.put(
                    cf::CATALOG,
                    catalog_key::table(entry.schema.id),
                    encode(entry)?,
                );
            }
            engine.with_consistent(&mut |r| {
                for entry in &loaded.tables {
                    rekey_temporal_columns(r, entry, &mut batch)?;
                }
                Ok(())
            })?;
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
        let storage = Arc::new(Storage::new(engine, durability, catalog, loaded.lsn, epoch));
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
        crate::storage::attach_record(&mut batch);
        self.engine.write(batch, self.sync())
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

    /// A table in the in-memory catalog only (see
    /// [`Storage::create_local_table`]): ids from [`LOCAL_IDS`] up, its
    /// column families created, no catalog record written.
    pub(crate) fn ddl_create_local_table(
        &self,
        mut schema: TableSchema,
    ) -> Result<Arc<TableSchema>> {
        validate_schema(&schema)?;
        let key = (schema.database.clone(), schema.name.clone());
        {
            // Checked here and again when it is added; the families are
            // created in between, without holding up catalog readers.
            let mut c = self.catalog.write();
            local_table_free(&c, &key)?;
            let mut next = || {
                c.locals += 1;
                LOCAL_IDS + c.locals
            };
            schema.id = next();
            for index in &mut schema.indexes {
                index.id = next();
            }
        }
        let families: Vec<String> = std::iter::once(cf::primary(schema.id))
            .chain(schema.indexes.iter().map(|i| cf::secondary(i.id)))
            .collect();
        for name in &families {
            self.engine.create_cf(name, CfKind::Index)?;
        }
        let entry = TableEntry {
            pads: vec![Value::Null; schema.columns.len()],
            secondary_full_row: self.secondary_full_row.load(Ordering::Relaxed),
            schema,
        };
        let counters = Arc::new(TableCounters {
            auto_inc: Mutex::new(1),
            rows: AtomicI64::new(0),
        });
        let state = Arc::new(TableState::new(entry, counters));
        let schema = Arc::clone(&state.schema);
        let mut c = self.catalog.write();
        if let Err(e) = local_table_free(&c, &key) {
            drop(c);
            for name in &families {
                self.engine.drop_cf(name)?;
            }
            return Err(e);
        }
        Arc::make_mut(&mut c.tables).insert(schema.id, state);
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
        self.write_auto_increment(table, &mut t.counters.auto_inc.lock(), next)?;
        Ok(next)
    }

    /// `AUTO_INCREMENT = next` (CREATE or ALTER TABLE): the next generated
    /// value becomes at least `next`, durably (a table given a start and
    /// no rows keeps it across a restart).
    pub fn raise_auto_increment(&self, table: TableId, next: u64) -> Result<()> {
        let _guard = self.commit.lock();
        self.settle_observer();
        let t = self.table_state(table)?;
        let mut counter = t.counters.auto_inc.lock();
        if next <= *counter {
            return Ok(());
        }
        self.write_auto_increment(table, &mut counter, next)
    }

    /// Records `next` as `table`'s next AUTO_INCREMENT value, in the
    /// catalog and in its in-memory `counter` (the caller holds the commit
    /// lock).
    fn write_auto_increment(&self, table: TableId, counter: &mut u64, next: u64) -> Result<()> {
        let mut batch = Batch::default();
        batch.put(
            cf::CATALOG,
            catalog_key::auto_inc(table),
            next.to_be_bytes(),
        );
        self.write_catalog(batch)?;
        *counter = next;
        Ok(())
    }

    /// The value `table`'s next generated AUTO_INCREMENT key would take
    /// (SHOW CREATE TABLE shows it).
    pub fn next_auto_increment(&self, table: TableId) -> Result<u64> {
        Ok(*self.table_state(table)?.counters.auto_inc.lock())
    }

    pub(crate) fn ddl_drop_table(&self, database: &str, table: &str) -> Result<Arc<TableSchema>> {
        let _guard = self.commit.lock();
        self.settle_observer();
        let t = self.lookup_table(database, table)?;
        if t.schema.id < LOCAL_IDS {
            let mut batch = Batch::default();
            batch.delete(cf::CATALOG, catalog_key::table(t.schema.id));
            batch.delete(cf::CATALOG, catalog_key::auto_inc(t.schema.id));
            self.write_catalog(batch)?;
        }
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

/// Whether database `key.0` exists and has no table `key.1`.
fn local_table_free(c: &Catalog, key: &(String, String)) -> Result<()> {
    if !c.databases.contains(&key.0) {
        return Err(StorageError::NoSuchDatabase(key.0.clone()));
    }
    if c.names.contains_key(key) {
        return Err(StorageError::TableExists(key.1.clone()));
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

/// Rows between two progress lines of a table rewrite.
const REWRITE_PROGRESS: usize = 100_000;

impl Storage {
    /// See [`Storage::alter_table`].
    pub(crate) fn ddl_alter_table<E: From<StorageError>>(
        &self,
        database: &str,
        table: &str,
        change: TableChange,
        convert: &mut dyn FnMut(usize, Row) -> std::result::Result<Row, E>,
    ) -> std::result::Result<Arc<TableSchema>, E> {
        let _guard = self.commit.lock();
        self.settle_observer();
        let t = self.lookup_table(database, table)?;
        let TableChange {
            mut schema,
            rewrite_rows,
            meta,
        } = change;
        schema.id = t.schema.id;
        schema.version = t.schema.version + 1;
        let renamed = (schema.database != t.schema.database || schema.name != t.schema.name)
            .then(|| (schema.database.clone(), schema.name.clone()));
        if let Some((db, name)) = &renamed {
            if !self.catalog.read().databases.contains(db) {
                return Err(StorageError::NoSuchDatabase(db.clone()).into());
            }
            let taken = self
                .lookup_table(db, name)
                .is_ok_and(|o| o.schema.id != schema.id);
            if taken {
                return Err(StorageError::TableExists(name.clone()).into());
            }
        }
        let mut ids = self.catalog.read().ids;
        let mut created = Vec::new();
        for index in &mut schema.indexes {
            if index.id == 0 {
                index.id = ids.next_index;
                ids.next_index += 1;
                created.push(index.id);
            }
        }
        validate_schema(&schema).map_err(E::from)?;
        let kept: BTreeSet<u64> = schema.indexes.iter().map(|i| i.id).collect();
        let dropped: Vec<u64> = t
            .schema
            .indexes
            .iter()
            .map(|i| i.id)
            .filter(|id| !kept.contains(id))
            .collect();
        let pads = if rewrite_rows {
            vec![Value::Null; schema.columns.len()]
        } else {
            // The caller keeps the columns in place and appends any new
            // ones, which old rows read as their default.
            let old = t.schema.columns.len();
            let mut pads = t.entry.pads.clone();
            pads.resize(old, Value::Null);
            pads.extend(schema.columns.iter().skip(old).map(pad_value));
            pads
        };
        let entry = TableEntry {
            schema,
            pads,
            secondary_full_row: t.entry.secondary_full_row,
        };
        let new = TableState::new(entry.clone(), Arc::clone(&t.counters));
        let mut batch = Batch::default();
        self.put_ids(&mut batch, ids)?;
        for (key, value) in &meta {
            let key = catalog_key::meta(key);
            match value {
                Some(v) => batch.put(cf::CATALOG, key, v.clone()),
                None => batch.delete(cf::CATALOG, key),
            }
        }
        let mut next_auto = None;
        if rewrite_rows || !created.is_empty() {
            let rows = self.read_keyed(&t)?;
            let mut row_id = || self.next_row_id();
            let (puts, auto) = rewrite(
                &t,
                &new,
                rows,
                rewrite_rows,
                &mut batch,
                convert,
                &mut row_id,
            )?;
            batch.ops.extend(puts.ops);
            next_auto = auto;
        }
        for id in &created {
            self.engine.create_cf(&cf::secondary(*id), CfKind::Index)?;
        }
        let written = match self.replace_table(entry, Arc::clone(&t.counters), batch) {
            Ok(s) => s,
            Err(e) => {
                for id in &created {
                    let _ = self.engine.drop_cf(&cf::secondary(*id));
                }
                return Err(e.into());
            }
        };
        {
            let mut c = self.catalog.write();
            c.ids = ids;
            if let Some(key) = renamed {
                c.names
                    .remove(&(t.schema.database.clone(), t.schema.name.clone()));
                c.names.insert(key, written.id);
            }
        }
        if let Some(next) = next_auto {
            let mut counter = t.counters.auto_inc.lock();
            if *counter < next {
                let mut b = Batch::default();
                b.put(
                    cf::CATALOG,
                    catalog_key::auto_inc(written.id),
                    next.to_be_bytes(),
                );
                self.engine.write(b, self.sync())?;
                *counter = next;
            }
        }
        for id in dropped {
            self.engine.drop_cf(&cf::secondary(id))?;
        }
        Ok(written)
    }

    /// Every row of `t` with its primary key (or row id), in key order.
    fn read_keyed(&self, t: &TableState) -> Result<Vec<read::KeyedRow>> {
        let mut out = Vec::new();
        self.engine.with_consistent(&mut |r| {
            out = read::scan_all(r, t)?;
            Ok(())
        })?;
        Ok(out)
    }
}

/// Deletes (into `batch`) every entry of `old`'s rows and returns the
/// entries of the rows as `new` holds them (to be applied after the
/// deletes, so a key both old and new keeps its new value), and the next
/// AUTO_INCREMENT value the rows need. Rows go through `convert` when
/// `rewrite_rows`; a key the new rows share fails with 1062's error.
fn rewrite<E: From<StorageError>>(
    old: &TableState,
    new: &TableState,
    rows: Vec<read::KeyedRow>,
    rewrite_rows: bool,
    batch: &mut Batch,
    convert: &mut dyn FnMut(usize, Row) -> std::result::Result<Row, E>,
    row_id: &mut dyn FnMut() -> Vec<u8>,
) -> std::result::Result<(Batch, Option<u64>), E> {
    let total = rows.len();
    let mut converted = Vec::with_capacity(total);
    for (n, (pk, row)) in rows.into_iter().enumerate() {
        batch.delete(old.primary_cf(), pk.clone());
        for index in &old.schema.indexes {
            batch.delete(
                &cf::secondary(index.id),
                old.secondary_key(index, &row, &pk),
            );
        }
        let row = if rewrite_rows {
            let row = convert(n + 1, row)?;
            if row.len() != new.schema.columns.len() {
                return Err(StorageError::ColumnCount.into());
            }
            row.iter()
                .zip(&new.schema.columns)
                .map(|(v, c)| coerce(v, c).map_err(StorageError::from))
                .collect::<Result<Row>>()?
        } else {
            // Columns appended (read as their defaults) are stored now.
            let mut row = row;
            let have = row.len();
            row.extend(new.entry.pads.iter().skip(have).cloned());
            row
        };
        converted.push((pk, row));
        if (n + 1) % REWRITE_PROGRESS == 0 {
            tracing::info!(table = %new.schema.name, rows = n + 1, total, "rewriting table");
        }
    }
    // A column that becomes AUTO_INCREMENT numbers its NULL and 0 rows
    // after the largest value, as MariaDB does.
    let mut next_auto = None;
    if let Some(ai) = new.schema.auto_increment_column() {
        let was = old
            .schema
            .auto_increment_column()
            .is_some_and(|o| old.schema.columns[o].name == new.schema.columns[ai].name);
        let value = |v: &Value| match v {
            Value::UInt(u) => Some(*u),
            v => v.as_i64().and_then(|i| u64::try_from(i).ok()),
        };
        let mut next = converted
            .iter()
            .filter_map(|(_, r)| value(&r[ai]))
            .max()
            .unwrap_or(0)
            .saturating_add(1);
        if !was {
            for (_, row) in &mut converted {
                if value(&row[ai]).unwrap_or(0) == 0 {
                    row[ai] = coerce(&Value::UInt(next), &new.schema.columns[ai])
                        .map_err(StorageError::from)?;
                    next += 1;
                }
            }
        }
        next_auto = Some(next);
    }
    let mut puts = Batch::default();
    let mut seen: Vec<std::collections::HashSet<Vec<u8>>> =
        vec![Default::default(); new.schema.indexes.len() + 1];
    let duplicate = |key: &str, columns: &[usize], row: &Row| StorageError::DuplicateKey {
        key: key.to_string(),
        value: columns
            .iter()
            .map(|&c| row[c].to_string())
            .collect::<Vec<_>>()
            .join("-"),
    };
    for (old_pk, row) in converted {
        let pk = match new.primary_key(&row) {
            Some(pk) => {
                if !seen[0].insert(pk.clone()) {
                    let columns = new.schema.primary_key.clone().unwrap_or_default();
                    return Err(duplicate("PRIMARY", &columns, &row).into());
                }
                pk
            }
            // A table without a primary key keeps its row ids; the rows
            // of a table losing its key get new ones.
            None if old.schema.primary_key.is_none() => old_pk,
            None => row_id(),
        };
        for (i, index) in new.schema.indexes.iter().enumerate() {
            if index.unique && !index.columns.iter().any(|&c| row[c].is_null()) {
                let prefix = new.encode_columns(&index.columns, &row);
                if !seen[i + 1].insert(prefix) {
                    return Err(duplicate(&index.name, &index.columns, &row).into());
                }
            }
            puts.put(
                &cf::secondary(index.id),
                new.secondary_key(index, &row, &pk),
                new.secondary_value(&pk, &row)?,
            );
        }
        puts.put(new.primary_cf(), pk, encode_row(&row)?);
    }
    Ok((puts, next_auto))
}
