//! The storage engine's health as `/health` and `/metrics` report it:
//! a background error that stops every write (RocksDB: a compaction that
//! met a damaged block; `/health` answers 503 with the reason, the gauge
//! `ladle_storage_background_error` is 1), and what a point-in-time WAL
//! recovery dropped at start-up (`ladle_wal_recovery_dropped_records`,
//! `..._writes`, `..._bytes`; 0 when nothing was).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use anyhow::Context;
use ladle_storage::Storage;
use parking_lot::RwLock;
use prometheus::{IntGauge, Registry};

pub struct StorageHealth {
    /// Weak: storage closes when the server drops it at shutdown.
    storage: RwLock<Weak<Storage>>,
    background_error: IntGauge,
    /// The stop was logged (once per process).
    reported: AtomicBool,
    wal_dropped_records: IntGauge,
    wal_dropped_writes: IntGauge,
    wal_dropped_bytes: IntGauge,
}

impl StorageHealth {
    pub fn new(registry: &Registry) -> anyhow::Result<StorageHealth> {
        let gauge = |name: &str, help: &str| -> anyhow::Result<IntGauge> {
            let g = IntGauge::new(name, help).context("static metric definition")?;
            registry
                .register(Box::new(g.clone()))
                .with_context(|| format!("registering {name}"))?;
            Ok(g)
        };
        Ok(StorageHealth {
            storage: RwLock::new(Weak::new()),
            background_error: gauge(
                "ladle_storage_background_error",
                "1 while a storage background error (a compaction meeting a damaged block) \
                 refuses every write",
            )?,
            reported: AtomicBool::new(false),
            wal_dropped_records: gauge(
                "ladle_wal_recovery_dropped_records",
                "Write batches (commits) a point-in-time WAL recovery dropped at start-up",
            )?,
            wal_dropped_writes: gauge(
                "ladle_wal_recovery_dropped_writes",
                "Key writes in the batches a point-in-time WAL recovery dropped at start-up",
            )?,
            wal_dropped_bytes: gauge(
                "ladle_wal_recovery_dropped_bytes",
                "Bytes of write-ahead log a point-in-time WAL recovery dropped at start-up",
            )?,
        })
    }

    /// Watches `storage` from now on, and reports what opening it dropped.
    pub fn watch(&self, storage: &Arc<Storage>) {
        *self.storage.write() = Arc::downgrade(storage);
        if let Some(r) = storage.wal_recovery() {
            let set = |g: &IntGauge, v: u64| g.set(i64::try_from(v).unwrap_or(i64::MAX));
            set(&self.wal_dropped_records, r.dropped_records);
            set(&self.wal_dropped_writes, r.dropped_writes);
            set(&self.wal_dropped_bytes, r.dropped_bytes);
        }
    }

    /// Why storage refuses every write, checked now (and the gauge set);
    /// `None` while writes are taken or before storage is open.
    pub async fn writes_stopped(&self) -> Option<String> {
        let storage = self.storage.read().upgrade()?;
        // Off the async workers: it may take RocksDB's write lock.
        let why = tokio::task::spawn_blocking(move || storage.background_error())
            .await
            .ok()
            .flatten();
        self.background_error.set(i64::from(why.is_some()));
        if let Some(reason) = &why {
            if !self.reported.swap(true, Ordering::Relaxed) {
                tracing::error!(
                    reason = %reason,
                    "storage refuses every write after a background error; /health \
                     answers 503. Stop the server and restore the data directory from a \
                     backup (docs/operations.md, damaged table files)"
                );
            }
        }
        why
    }
}
