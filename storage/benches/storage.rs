//! Storage throughput figures (a benchmark, not a test: no timed asserts).
//!
//! ```text
//! cargo bench -p ladle-storage --bench storage
//! LADLE_BENCH_ROWS=10000000 cargo bench -p ladle-storage --bench storage
//! ```
//!
//! 1. Durable inserts of vote-like rows (`votes(user INT, story INT,
//!    PRIMARY KEY (user, story), KEY (story))`), one row per `write`, from
//!    16 threads with `Durability::Sync` group commit, against the same rows
//!    appended to a plain file with the same leader/follower group fsync.
//! 2. Point lookups by primary and by secondary key over a loaded table.
//! 3. Full scan throughput.
//! 4. The replay (secondary lookup) path with primary-key-only secondary
//!    entries versus whole-row entries.
//! 5. A page's worth of secondary keys looked up one by one versus in one
//!    batched lookup (`Storage::lookup_many`, one iterator for all).
//!
//! `LADLE_BENCH_DIR` picks the directory (default: the system temp dir);
//! `LADLE_BENCH_ROUNDS`, `LADLE_BENCH_WRITES` (per thread), `LADLE_BENCH_ROWS`
//! (0 skips the read figures) and `LADLE_BENCH_LOOKUPS` size the runs.

use std::fs::File;
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ladle_common::{ColumnSchema, IndexSchema, SqlType, TableSchema, Value};
use ladle_storage::{Durability, IndexRef, OnConflict, Storage, StorageConfig, WriteOp};
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::{Condvar, Mutex};
use rand::{Rng, SeedableRng};

const THREADS: usize = 16;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn bench_dir() -> tempfile::TempDir {
    match std::env::var("LADLE_BENCH_DIR") {
        Ok(d) => tempfile::tempdir_in(d).expect("bench dir"),
        Err(_) => tempfile::tempdir().expect("temp dir"),
    }
}

fn config(dir: &std::path::Path, durability: Durability) -> StorageConfig {
    StorageConfig {
        data_dir: dir.to_path_buf(),
        durability,
        block_cache_bytes: 256 << 20,
        wal_dir: None,
        async_flush_interval: Duration::from_millis(10),
        wal_recovery: Default::default(),
        disk_reserve: 0,
    }
}

fn votes_table(s: &Storage, name: &str) -> Arc<TableSchema> {
    s.create_database("bench", true).expect("db");
    let int = SqlType::Int {
        bytes: 4,
        unsigned: false,
        display_width: None,
    };
    let schema = TableSchema {
        id: 0,
        database: "bench".into(),
        name: name.into(),
        columns: vec![
            ColumnSchema::new("user", int.clone()).not_null(),
            ColumnSchema::new("story", int).not_null(),
        ],
        primary_key: Some(vec![0, 1]),
        indexes: vec![IndexSchema {
            id: 0,
            name: "story".into(),
            columns: vec![1],
            unique: false,
        }],
        version: 1,
    };
    s.create_table(schema, false).expect("table")
}

fn vote(user: i64, story: i64) -> Vec<Value> {
    vec![Value::Int(user), Value::Int(story)]
}

/// A record and its caller's done flag.
type Waiting = (Vec<u8>, Arc<AtomicBool>);

/// A plain append-only file with group fsync: the floor any durable write
/// path pays.
struct PlainLog {
    file: Mutex<File>,
    /// Records waiting for the next group, and whether a leader is active.
    queue: Mutex<(Vec<Waiting>, bool)>,
    done: Condvar,
}

impl PlainLog {
    fn new(path: &std::path::Path) -> PlainLog {
        PlainLog {
            file: Mutex::new(File::create(path).expect("plain file")),
            queue: Mutex::new((Vec::new(), false)),
            done: Condvar::new(),
        }
    }

    fn append(&self, record: Vec<u8>) {
        let mine = Arc::new(AtomicBool::new(false));
        let mut q = self.queue.lock();
        q.0.push((record, Arc::clone(&mine)));
        loop {
            if mine.load(Ordering::Acquire) {
                return;
            }
            if !q.1 {
                q.1 = true;
                let group = std::mem::take(&mut q.0);
                drop(q);
                let mut buf = Vec::new();
                for (b, _) in &group {
                    buf.extend_from_slice(&(b.len() as u32).to_le_bytes());
                    buf.extend_from_slice(b);
                }
                {
                    let mut f = self.file.lock();
                    f.write_all(&buf).expect("append");
                    f.sync_data().expect("fsync");
                }
                for (_, d) in &group {
                    d.store(true, Ordering::Release);
                }
                q = self.queue.lock();
                q.1 = false;
                self.done.notify_all();
                continue;
            }
            self.done.wait(&mut q);
        }
    }
}

/// CPU seconds this process used so far (user + system), from /proc.
fn cpu_seconds() -> f64 {
    proc_cpu("/proc/self/stat")
}

/// CPU seconds the calling thread used so far (excludes RocksDB's
/// background flushes and compactions).
fn thread_cpu_seconds() -> f64 {
    proc_cpu("/proc/thread-self/stat")
}

fn proc_cpu(path: &str) -> f64 {
    let stat = std::fs::read_to_string(path).unwrap_or_default();
    // Fields after the command name (which ends with ')'): utime is the
    // 12th, stime the 13th, in clock ticks (100 per second on Linux).
    let rest = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

fn rate(n: usize, d: Duration) -> String {
    format!("{:>12.0}/s", n as f64 / d.as_secs_f64())
}

/// 1. Group-committed durable inserts vs a group-fsynced plain file.
fn durable_inserts(per_thread: usize) {
    let dir = bench_dir();
    let s = Storage::open(config(dir.path(), Durability::Sync)).expect("open");
    let t = votes_table(&s, "votes");
    let cpu = cpu_seconds();
    let start = Instant::now();
    let handles: Vec<_> = (0..THREADS)
        .map(|th| {
            let s = Arc::clone(&s);
            let (id, version) = (t.id, t.version);
            std::thread::spawn(move || {
                for k in 0..per_thread {
                    let op = WriteOp::Insert {
                        table: id,
                        schema_version: version,
                        rows: vec![vote(th as i64, k as i64)],
                        on_conflict: OnConflict::Error,
                        auto_value_on_zero: true,
                        id_batches: ladle_storage::IdBatches::PerRow,
                        returning: None,
                    };
                    s.write(vec![op]).expect("insert");
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("writer");
    }
    let ladle = start.elapsed();
    let ladle_cpu = cpu_seconds() - cpu;
    let n = THREADS * per_thread;
    let lsns = s.last_lsn();
    drop(s);

    // The same rows, postcard-encoded, appended to one file with the same
    // leader/follower scheme as storage's group commit: a caller with no
    // active leader writes and fsyncs everything queued.
    let plain = Arc::new(PlainLog::new(&dir.path().join("plain.log")));
    let start = Instant::now();
    let handles: Vec<_> = (0..THREADS)
        .map(|th| {
            let plain = Arc::clone(&plain);
            std::thread::spawn(move || {
                for k in 0..per_thread {
                    plain.append(postcard::to_stdvec(&vote(th as i64, k as i64)).expect("encode"));
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("appender");
    }
    let file_time = start.elapsed();
    println!("durable inserts, {THREADS} threads, one row per write, {n} rows");
    println!(
        "  ladle (sync group commit)    {} ({} groups, {:.1} rows/group)",
        rate(n, ladle),
        lsns,
        n as f64 / lsns as f64
    );
    println!(
        "  ladle CPU per row            {:>8.1} us",
        ladle_cpu * 1e6 / n as f64
    );
    println!("  plain file (group fsync)     {}", rate(n, file_time));
    println!(
        "  ratio ladle / plain file     {:.2}x",
        file_time.as_secs_f64() / ladle.as_secs_f64()
    );
}

/// Loads `rows` votes (about 10 per story) in large batches.
fn load(s: &Storage, t: &TableSchema, rows: usize) -> Duration {
    let cpu = cpu_seconds();
    let start = Instant::now();
    let users = 1000usize;
    let mut batch = Vec::with_capacity(10_000);
    for k in 0..rows {
        batch.push(vote(
            (k % users) as i64,
            (k / 10) as i64 * 7919 % (rows as i64 / 10 + 1),
        ));
        if batch.len() == 10_000 || k + 1 == rows {
            let op = WriteOp::Insert {
                table: t.id,
                schema_version: t.version,
                rows: std::mem::take(&mut batch),
                on_conflict: OnConflict::Ignore,
                auto_value_on_zero: true,
                id_batches: ladle_storage::IdBatches::PerRow,
                returning: None,
            };
            s.write(vec![op]).expect("load");
        }
    }
    let d = start.elapsed();
    println!(
        "  (load used {:.1} CPU-s in {:.1} s wall: {:.1} us CPU per row)",
        cpu_seconds() - cpu,
        d.as_secs_f64(),
        (cpu_seconds() - cpu) * 1e6 / rows as f64
    );
    d
}

/// 2-4. Lookups, scans and the two secondary layouts.
fn reads(rows: usize, lookups: usize) {
    let dir = bench_dir();
    let s = Storage::open(config(dir.path(), Durability::Async)).expect("open");
    ladle_storage::set_secondary_full_row_for_new_tables(false);
    let pk_only = votes_table(&s, "votes_pk");
    ladle_storage::set_secondary_full_row_for_new_tables(true);
    let full_row = votes_table(&s, "votes_row");
    ladle_storage::set_secondary_full_row_for_new_tables(true);
    let d = load(&s, &pk_only, rows);
    println!(
        "bulk load (10k-row writes, async)  {} rows {}",
        rows,
        rate(rows, d)
    );
    let d = load(&s, &full_row, rows);
    println!(
        "bulk load, full-row secondaries    {} rows {}",
        rows,
        rate(rows, d)
    );
    let stories = rows as i64 / 10 + 1;
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);

    let cpu = thread_cpu_seconds();
    let start = Instant::now();
    let mut found = 0usize;
    for _ in 0..lookups {
        let k = rng.gen_range(0..rows);
        let key = [
            Value::Int((k % 1000) as i64),
            Value::Int((k / 10) as i64 * 7919 % stories),
        ];
        found += s
            .lookup(pk_only.id, IndexRef::Primary, &key)
            .expect("lookup")
            .len();
    }
    println!(
        "primary point lookups              {} ({found} rows found of {lookups}, {:.1} us CPU/lookup)",
        rate(lookups, start.elapsed()),
        (thread_cpu_seconds() - cpu) * 1e6 / lookups as f64,
    );

    // Alternate the layouts so background compaction after the loads does
    // not favour the one measured last; thread CPU time is the steadier
    // figure on a shared machine.
    for round in 0..2 {
        for (label, t) in [
            ("pk-only entries ", &pk_only),
            ("full-row entries", &full_row),
        ] {
            let cpu = thread_cpu_seconds();
            let start = Instant::now();
            let mut found = 0usize;
            for _ in 0..lookups {
                let story = rng.gen_range(0..stories);
                found += s
                    .lookup(
                        t.id,
                        IndexRef::Secondary(t.indexes[0].id),
                        &[Value::Int(story)],
                    )
                    .expect("lookup")
                    .len();
            }
            let d = start.elapsed();
            println!(
                "secondary lookups, {label} (round {round})  {} ({:.1} rows/lookup, {:.1} us CPU/lookup)",
                rate(lookups, d),
                found as f64 / lookups as f64,
                (thread_cpu_seconds() - cpu) * 1e6 / lookups as f64,
            );
        }
    }

    // A page's misses: 51 stories' votes at once (the front page's IN
    // list), asked one key at a time or in one batched lookup.
    const PAGE: usize = 51;
    for round in 0..2 {
        for batched in [false, true] {
            let cpu = thread_cpu_seconds();
            let start = Instant::now();
            let mut found = 0usize;
            let index = IndexRef::Secondary(pk_only.indexes[0].id);
            for _ in 0..lookups / PAGE {
                let keys: Vec<Vec<Value>> = (0..PAGE)
                    .map(|_| vec![Value::Int(rng.gen_range(0..stories))])
                    .collect();
                found += if batched {
                    let rows = s
                        .lookup_many(pk_only.id, index, &keys, None)
                        .expect("lookup");
                    rows.iter().map(Vec::len).sum::<usize>()
                } else {
                    keys.iter()
                        .map(|k| s.lookup(pk_only.id, index, k).expect("lookup").len())
                        .sum::<usize>()
                };
            }
            let asked = lookups / PAGE * PAGE;
            println!(
                "{PAGE} secondary keys per call, {} (round {round})  {} ({:.1} rows/key, {:.1} us CPU/key)",
                if batched { "batched   " } else { "one by one" },
                rate(asked, start.elapsed()),
                found as f64 / asked.max(1) as f64,
                (thread_cpu_seconds() - cpu) * 1e6 / asked.max(1) as f64,
            );
        }
    }

    let start = Instant::now();
    let n = s.scan(pk_only.id).expect("scan").len();
    println!(
        "full scan                          {} rows {}",
        n,
        rate(n, start.elapsed())
    );
    let start = Instant::now();
    let view = s.read_view();
    let n = view.scan(full_row.id).expect("scan").len();
    println!(
        "full scan via a read view          {} rows {}",
        n,
        rate(n, start.elapsed())
    );
}

/// Latency of one durable write with no concurrency: storage vs a plain
/// file append + fdatasync.
fn single_writer(n: usize) {
    let dir = bench_dir();
    let s = Storage::open(config(dir.path(), Durability::Sync)).expect("open");
    let t = votes_table(&s, "votes");
    let start = Instant::now();
    for k in 0..n {
        let op = WriteOp::Insert {
            table: t.id,
            schema_version: t.version,
            rows: vec![vote(0, k as i64)],
            on_conflict: OnConflict::Error,
            auto_value_on_zero: true,
            id_batches: ladle_storage::IdBatches::PerRow,
            returning: None,
        };
        s.write(vec![op]).expect("insert");
    }
    let ladle = start.elapsed();
    let mut f = File::create(dir.path().join("plain.log")).expect("plain file");
    let start = Instant::now();
    for k in 0..n {
        let b = postcard::to_stdvec(&vote(0, k as i64)).expect("encode");
        f.write_all(&b).expect("append");
        f.sync_data().expect("fsync");
    }
    let plain = start.elapsed();
    println!("one writer, one row per durable write, {n} writes");
    println!(
        "  ladle       {:>8.0} us/write",
        ladle.as_secs_f64() * 1e6 / n as f64
    );
    println!(
        "  plain file  {:>8.0} us/write",
        plain.as_secs_f64() * 1e6 / n as f64
    );
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing
    // we use. Keep the quick mode for `cargo test`.
    let quick = !std::env::args().any(|a| a == "--bench");
    let per_thread = env_usize("LADLE_BENCH_WRITES", if quick { 50 } else { 1000 });
    let rows = env_usize("LADLE_BENCH_ROWS", if quick { 10_000 } else { 1_000_000 });
    let lookups = env_usize("LADLE_BENCH_LOOKUPS", if quick { 1000 } else { 100_000 });
    // The machine may be shared: three alternating rounds show the spread.
    let rounds = env_usize("LADLE_BENCH_ROUNDS", if quick { 1 } else { 3 });
    for _ in 0..rounds {
        single_writer(if quick { 20 } else { 300 });
        durable_inserts(per_thread);
    }
    if rows > 0 {
        reads(rows, lookups);
    }
}
