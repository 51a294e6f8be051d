//! Write and load throughput of the snapshot store on about 100 MB of
//! row-like state (1M Lobsters-style story rows, postcard-encoded, in 16
//! node shards), with and without lz4. A benchmark, not a test: run it in
//! release mode with
//!
//! ```text
//! cargo test --release -p ladle-storage --lib snapshot::bench -- --ignored --nocapture
//! ```
//!
//! `LADLE_SNAPSHOT_BENCH_DIR` picks the directory (default: a temporary
//! directory under the system temp dir). Loads are timed with the files in
//! the page cache (best of three) and once after evicting them from it
//! (posix_fadvise, if python3 is installed).
//!
//! Measured 2026-11-22 on the 2-core development VM under a load average of
//! about 10 (other builds running), 129.5 MB of state:
//!
//! ```text
//!              on disk   write+fsync   load warm    load cold
//! none         129.5 MB  245-450 MB/s  600-900 MB/s  ~350 MB/s (0.37 s)
//! lz4           73.8 MB   52-76 MB/s   205-375 MB/s  ~120-160 MB/s (0.83-1.06 s)
//! codec alone: lz4 compress 54-76 MB/s, decompress 300-510 MB/s, crc32 2.3-3.9 GB/s
//! ```

use std::sync::Arc;
use std::time::Instant;

use ladle_common::{Row, Value};
use rand::{Rng, SeedableRng};

use super::*;

const ROWS: usize = 1_000_000;
const SHARDS: usize = 16;
const WORDS: &[&str] = &[
    "rust",
    "database",
    "release",
    "show",
    "ask",
    "why",
    "the",
    "a",
    "of",
    "for",
    "in",
    "on",
    "with",
    "new",
    "how",
    "we",
    "built",
    "faster",
    "postgres",
    "mysql",
    "linux",
    "kernel",
    "compiler",
    "memory",
    "safety",
    "async",
    "web",
    "browser",
    "security",
    "bug",
    "design",
    "programming",
    "language",
    "type",
    "system",
    "review",
    "paper",
    "video",
    "interview",
    "history",
    "unix",
    "network",
    "protocol",
    "performance",
    "cache",
    "query",
    "index",
    "storage",
    "engine",
    "distributed",
    "consensus",
    "raft",
    "paxos",
    "testing",
    "fuzzing",
    "formal",
    "methods",
    "haskell",
    "ocaml",
    "go",
    "python",
    "javascript",
    "c",
    "cpp",
    "zig",
    "lisp",
    "emacs",
    "vim",
    "editor",
    "terminal",
    "shell",
];

/// One shard of story rows: id, short id, user, title, url, score,
/// created_at, comment count.
fn shard_rows(shard: usize, rng: &mut impl Rng) -> Vec<Row> {
    let base = chrono::NaiveDate::from_ymd_opt(2024, 1, 1)
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .unwrap_or_default();
    (shard..ROWS)
        .step_by(SHARDS)
        .map(|id| {
            let title: Vec<&str> = (0..rng.gen_range(3..9))
                .map(|_| WORDS[rng.gen_range(0..WORDS.len())])
                .collect();
            let short: String = (0..6)
                .map(|_| char::from(b"abcdefghijklmnopqrstuvwxyz0123456789"[rng.gen_range(0..36)]))
                .collect();
            let url = format!(
                "https://{}.example.com/{}",
                WORDS[rng.gen_range(0..WORDS.len())],
                title.join("-")
            );
            vec![
                Value::Int(id as i64),
                Value::text(short),
                Value::Int(rng.gen_range(1..20_000)),
                Value::text(title.join(" ")),
                if rng.gen_bool(0.8) {
                    Value::text(url)
                } else {
                    Value::Null
                },
                Value::Int(rng.gen_range(-5..300)),
                Value::DateTime(base + chrono::Duration::seconds(rng.gen_range(0..60_000_000))),
                Value::Int(rng.gen_range(0..150)),
            ]
        })
        .collect()
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

#[test]
#[ignore = "benchmark: run in release mode with --ignored --nocapture"]
fn snapshot_throughput() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(42);
    let shards: Vec<Vec<u8>> = (0..SHARDS)
        .map(|s| postcard::to_stdvec(&shard_rows(s, &mut rng)).unwrap_or_default())
        .collect();
    let shards = Arc::new(shards);
    let raw: u64 = shards.iter().map(|s| s.len() as u64).sum();
    println!(
        "state: {ROWS} rows in {SHARDS} shards, {:.1} MB postcard-encoded",
        mb(raw)
    );

    // The codec alone, on one core.
    let started = Instant::now();
    let compressed: Vec<Vec<u8>> = shards
        .iter()
        .map(|s| lz4_flex::block::compress(s))
        .collect();
    let compress = started.elapsed();
    let started = Instant::now();
    for (c, s) in compressed.iter().zip(shards.iter()) {
        let d = lz4_flex::block::decompress(c, s.len()).unwrap_or_default();
        assert_eq!(d.len(), s.len());
    }
    let decompress = started.elapsed();
    let started = Instant::now();
    let crc = shards.iter().fold(0u32, |acc, s| acc ^ crc32fast::hash(s));
    let crc_time = started.elapsed();
    println!(
        "codec alone: lz4 compress {:.0} MB/s, decompress {:.0} MB/s, crc32 {:.0} MB/s (crc {crc:08x})",
        mb(raw) / compress.as_secs_f64(),
        mb(raw) / decompress.as_secs_f64(),
        mb(raw) / crc_time.as_secs_f64(),
    );

    let root = match std::env::var_os("LADLE_SNAPSHOT_BENCH_DIR") {
        Some(d) => tempfile::tempdir_in(d),
        None => tempfile::tempdir(),
    }
    .unwrap();
    for compression in [Compression::None, Compression::Lz4] {
        for threads in [1usize, 2] {
            let dir = root.path().join(format!("{compression:?}-{threads}"));
            let store = SnapshotStore::open(
                &dir,
                SnapshotConfig {
                    compression,
                    ..SnapshotConfig::default()
                },
            )
            .unwrap();
            let started = Instant::now();
            let w = store.begin_epoch(1, 1, 1).unwrap();
            std::thread::scope(|scope| {
                for t in 0..threads {
                    let (w, shards) = (&w, &shards);
                    scope.spawn(move || {
                        for (i, s) in shards.iter().enumerate().filter(|(i, _)| i % threads == t) {
                            w.write_node(i as u64, SnapshotKind::Full, s).unwrap();
                        }
                    });
                }
            });
            let info = w.publish().unwrap();
            let write = started.elapsed();

            let mut loads = Vec::new();
            for _ in 0..3 {
                let store = SnapshotStore::open(&dir, SnapshotConfig::default()).unwrap();
                let started = Instant::now();
                let s = store.load_latest().unwrap().unwrap();
                loads.push(started.elapsed());
                assert_eq!(s.nodes.len(), SHARDS);
                assert_eq!(
                    s.nodes.iter().map(|n| n.base.len() as u64).sum::<u64>(),
                    raw
                );
            }
            let load = loads.iter().min().copied().unwrap_or_default();
            let cold = evict_from_page_cache(&dir).then(|| {
                let store = SnapshotStore::open(&dir, SnapshotConfig::default()).unwrap();
                let started = Instant::now();
                let s = store.load_latest().unwrap().unwrap();
                assert_eq!(s.nodes.len(), SHARDS);
                started.elapsed()
            });
            println!(
                "{compression:?}, {threads} writer thread(s): on disk {:.1} MB ({:.0}%); write+fsync+publish {:.2} s = {:.0} MB/s of state; load+verify {:.3} s = {:.0} MB/s of state (best of 3, warm cache); cold cache {}",
                mb(info.bytes),
                info.bytes as f64 * 100.0 / raw as f64,
                write.as_secs_f64(),
                mb(raw) / write.as_secs_f64(),
                load.as_secs_f64(),
                mb(raw) / load.as_secs_f64(),
                cold.map_or("not measured".to_string(), |c| format!(
                    "{:.3} s = {:.0} MB/s of state",
                    c.as_secs_f64(),
                    mb(raw) / c.as_secs_f64()
                )),
            );
        }
    }

    // An incremental epoch: 1% of rows changed in every shard.
    let dir = root.path().join("incremental");
    let store = SnapshotStore::open(&dir, SnapshotConfig::default()).unwrap();
    let w = store.begin_epoch(1, 1, 1).unwrap();
    for (i, s) in shards.iter().enumerate() {
        w.write_node(i as u64, SnapshotKind::Full, s).unwrap();
    }
    w.publish().unwrap();
    let deltas: Vec<Vec<u8>> = shards.iter().map(|s| s[..s.len() / 100].to_vec()).collect();
    let started = Instant::now();
    let w = store.begin_epoch(2, 2, 1).unwrap();
    for (i, d) in deltas.iter().enumerate() {
        w.write_node(i as u64, SnapshotKind::Delta, d).unwrap();
    }
    let info = w.publish().unwrap();
    println!(
        "delta epoch (1% of the state, {:.1} MB in {} files): {:.3} s",
        mb(deltas.iter().map(|d| d.len() as u64).sum()),
        info.files - SHARDS,
        started.elapsed().as_secs_f64()
    );
}

/// Drops the snapshot files from the page cache (posix_fadvise DONTNEED via
/// python3, as the crate forbids unsafe code); false if that is unavailable.
fn evict_from_page_cache(dir: &std::path::Path) -> bool {
    let script = [
        "import os, sys",
        "for root, _, files in os.walk(sys.argv[1]):",
        "    for f in files:",
        "        fd = os.open(os.path.join(root, f), os.O_RDONLY)",
        "        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)",
        "        os.close(fd)",
    ]
    .join("\n");
    std::process::Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(dir)
        .status()
        .is_ok_and(|s| s.success())
}
