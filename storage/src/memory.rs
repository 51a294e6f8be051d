//! The in-memory engine (`Durability::Memory`, unit tests): one ordered map
//! per column family behind a read-write lock.
//!
//! Each map sits in an `Arc`, so a snapshot is a copy of the map of `Arc`s;
//! the first write to a column family while a snapshot holds it copies that
//! one map (copy-on-write), later writes do not.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::Arc;

use parking_lot::RwLock;

use crate::engine::{Batch, BatchOp, CfKind, KvEngine, KvRead, KvSnapshot, ScanFn, SnapshotJob};
use crate::{Result, StorageError};

type Cf = Arc<BTreeMap<Vec<u8>, Vec<u8>>>;
type Cfs = HashMap<String, Cf>;

#[derive(Default)]
pub(crate) struct MemoryEngine {
    cfs: RwLock<Cfs>,
}

impl MemoryEngine {
    pub fn new() -> MemoryEngine {
        MemoryEngine::default()
    }
}

fn missing(cf: &str) -> StorageError {
    StorageError::Internal(format!("column family {cf} does not exist"))
}

struct CfsReader<'a>(&'a Cfs);

impl KvRead for CfsReader<'_> {
    fn get(&self, cf: &str, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.0.get(cf).ok_or_else(|| missing(cf))?.get(key).cloned())
    }

    fn scan(&self, cf: &str, lower: &[u8], upper: Option<&[u8]>, f: ScanFn<'_>) -> Result<()> {
        let map = self.0.get(cf).ok_or_else(|| missing(cf))?;
        let upper = match upper {
            Some(u) => Bound::Excluded(u),
            None => Bound::Unbounded,
        };
        if let Bound::Excluded(u) = upper {
            if u <= lower {
                return Ok(());
            }
        }
        for (k, v) in map.range::<[u8], _>((Bound::Included(lower), upper)) {
            if !f(k, v)? {
                break;
            }
        }
        Ok(())
    }
}

impl KvEngine for MemoryEngine {
    fn cf_names(&self) -> Vec<String> {
        self.cfs.read_recursive().keys().cloned().collect()
    }

    fn flush(&self) -> Result<()> {
        Ok(())
    }

    fn checkpoint(&self, _dir: &std::path::Path) -> Result<()> {
        Err(StorageError::Internal(
            "an in-memory database has no checkpoint".into(),
        ))
    }

    fn create_cf(&self, name: &str, _kind: CfKind) -> Result<()> {
        self.cfs.write().entry(name.to_string()).or_default();
        Ok(())
    }

    fn drop_cf(&self, name: &str) -> Result<()> {
        self.cfs.write().remove(name);
        Ok(())
    }

    fn write(&self, batch: Batch, _sync: bool) -> Result<()> {
        let mut cfs = self.cfs.write();
        // Check first so that a bad batch changes nothing.
        for op in &batch.ops {
            let (BatchOp::Put { cf, .. } | BatchOp::Delete { cf, .. }) = op;
            if !cfs.contains_key(cf) {
                return Err(missing(cf));
            }
        }
        for op in batch.ops {
            match op {
                BatchOp::Put { cf, key, value } => {
                    if let Some(map) = cfs.get_mut(&cf) {
                        Arc::make_mut(map).insert(key, value);
                    }
                }
                BatchOp::Delete { cf, key } => {
                    if let Some(map) = cfs.get_mut(&cf) {
                        Arc::make_mut(map).remove(&key);
                    }
                }
            }
        }
        Ok(())
    }

    fn sync_wal(&self) -> Result<()> {
        Ok(())
    }

    fn get_latest(&self, cf: &str, key: &[u8]) -> Result<Option<Vec<u8>>> {
        CfsReader(&self.cfs.read_recursive()).get(cf, key)
    }

    fn with_consistent(&self, f: &mut dyn FnMut(&dyn KvRead) -> Result<()>) -> Result<()> {
        // Reads never queue behind a waiting writer (`read_recursive`): a
        // long consistent read (the propagation worker's snapshot) holds the
        // lock while another thread may need a read to finish what the
        // worker waits for; a fair read would deadlock behind a queued write.
        let cfs = self.cfs.read_recursive();
        f(&CfsReader(&cfs))
    }

    fn snapshot(&self) -> Result<Box<dyn KvSnapshot>> {
        Ok(Box::new(MemorySnapshot(self.cfs.read_recursive().clone())))
    }

    fn estimate_keys(&self, cf: &str) -> u64 {
        self.cfs
            .read_recursive()
            .get(cf)
            .map_or(0, |m| m.len() as u64)
    }
}

struct MemorySnapshot(Cfs);

impl KvSnapshot for MemorySnapshot {
    fn run(&self, job: SnapshotJob) {
        job(&CfsReader(&self.0))
    }
}
