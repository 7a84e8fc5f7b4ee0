//! Stratus engine against fjall and, built with the bench crate's `rocksdb` feature, RocksDB
//! (both dependencies of this crate only) on the same workload in the same run: 24-byte keys,
//! 150-byte values, `entries` keys.
//!
//! Each engine runs the whole workload in its own child process (this binary re-executed with
//! the hidden `__vs-fjall-child` subcommand) so that its peak RSS (VmHWM) is its own. The child
//! prints `RESULT name rate` / `RSS kb` / `DISK name bytes` lines; the parent prints the table.
//!
//! Settings shared by every engine (see BENCHMARKS.md):
//! * WAL / journal: written to the OS on every batch, never fsynced (Stratus `SyncPolicy::Off`,
//!   fjall's default `PersistMode::Buffer` per batch, RocksDB `WriteOptions::sync = false`),
//!   except in the durable-writes phase, which fsyncs every batch (Stratus
//!   `Durability::Sync`, fjall `PersistMode::SyncData`, RocksDB `sync = true`).
//! * memtables: 64 MiB, at most one frozen beside the active one (Stratus
//!   `max_frozen_memtables = 1`, RocksDB's default `max_write_buffer_number = 2`).
//! * RocksDB: 64 MiB write buffer, an LRU block cache of the phase's size; the Debian build
//!   (see BENCHMARKS.md).
//! * memtable 64 MiB; two background threads each (Stratus 1 flush + 1 compaction, fjall 2
//!   workers, RocksDB 2 background jobs); 4 KiB data blocks, no compression and Bloom filters
//!   of 10 bits per key everywhere (Stratus `block_size`, `level_compression = None`; fjall's
//!   block size, compression and filter policies; RocksDB's block-based table options).
//! * cache: WARM_CACHE for the warm phases, SMALL_CACHE after a reopen for the small-cache
//!   phase (Stratus `block_cache_size`, fjall `cache_size`).
//! * the warm read phases (point, range, missing keys, two-thread point reads) run
//!   READ_REPEATS times over the same reads and report the median, and so does the
//!   durable-writes phase (other keys each time); the small-cache phase runs
//!   once (its point is a cold start).
//! * after the deletes, one full compaction per engine with nothing reading below them
//!   (Stratus: GC safe point past the last version, `compact_shard_full`; fjall
//!   `major_compact`; RocksDB `compact_range` over all keys), timed, then the size on disk.

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kvengine::{ColumnFamily, Durability, Engine, EngineOptions, LocalDfs, SyncPolicy, WriteBatch};

use crate::report::{dir_size, row, table_header};
use crate::workload::{key, rng, value};

const WARM_CACHE: usize = 256 * 1024 * 1024;
const SMALL_CACHE: usize = 8 * 1024 * 1024;
const MEMTABLE: usize = 64 * 1024 * 1024;
/// Data block size of every engine (fjall's and RocksDB's default; Stratus' is 64 KiB).
const BLOCK_SIZE: usize = 4096;
const BATCH: usize = 1000;

/// Operations per measured phase (N itself is not reduced).
const WARMUP_READS: usize = 400_000;
const POINT_READS: usize = 500_000;
const SMALL_CACHE_READS: usize = 300_000;
const RANGE_READS: usize = 200_000;
const MISSING_READS: usize = 500_000;
const WRITE_BATCHES: usize = 300;
const DELETE_BATCHES: usize = 300;
/// Durable-writes phase: batches of DURABLE_BATCH random keys, each fsynced.
const DURABLE_BATCHES: usize = 300;
const DURABLE_BATCH: usize = 100;

/// A key in the loaded key range that was never written: 24 bytes, sorts between loaded keys,
/// so neither engine can reject it by key range; only filters or a block search can.
fn missing_key(i: usize) -> Vec<u8> {
    format!("t0000001_r{i:013}x").into_bytes()
}

/// A pool of values (half random, half repeated), cycled over keys.
fn values() -> Vec<Vec<u8>> {
    let mut r = rng(42);
    (0..4096).map(|_| value(&mut r)).collect()
}

/// One engine under test. `Sync`: the two-thread read phase shares it.
trait Kv: Sync {
    /// Writes one batch; `durable`: on the device before it returns (fsync), else handed to the
    /// OS only.
    fn write_batch(&mut self, keys: &[Vec<u8>], vals: &[Vec<u8>], delete: bool, durable: bool);
    /// Makes everything written so far durable in tables (memtable flushed).
    fn flush(&mut self);
    /// Waits until background compaction has nothing left to do (untimed).
    fn settle(&mut self);
    /// Flushes and compacts every key into the last level, with every write so far older than
    /// what the engine keeps for readers (no snapshot open; Stratus' GC safe point moved past
    /// the last version): deleted keys' tombstones and values can go.
    fn compact_all(&mut self);
    fn get(&self, key: &[u8]) -> bool;
    /// Seek to `key` and read up to `n` entries; returns how many were read.
    fn range(&self, key: &[u8], n: usize) -> usize;
    /// Closes and reopens with `cache` bytes of block cache.
    fn reopen(&mut self, cache: usize);
    fn close(&mut self);
}

struct Stratus {
    dir: std::path::PathBuf,
    engine: Option<Engine>,
    version: u64,
}

impl Stratus {
    fn open(dir: &Path, cache: usize) -> Engine {
        let mut opts = EngineOptions::new(dir.join("engine"));
        opts.wal_sync = SyncPolicy::Off;
        opts.memtable_size = MEMTABLE;
        // One active and one frozen memtable at most, as RocksDB's max_write_buffer_number = 2:
        // the same memtable budget for every engine (the engine's default queues 4 frozen).
        opts.max_frozen_memtables = 1;
        opts.block_cache_size = cache as u64;
        opts.block_size = BLOCK_SIZE;
        opts.level_compression = sst::Compression::None;
        // One thread reads, as in fjall and RocksDB (uncompressed tables are read in place
        // and never read ahead anyway).
        opts.read_ahead = kvengine::ReadAhead::OFF;
        let e = Engine::open(
            opts,
            Arc::new(LocalDfs::open(dir.join("dfs")).expect("dfs")),
        )
        .expect("open stratus");
        if e.shard_ids().is_empty() {
            e.create_shard(1, b"", b"").expect("shard");
        }
        e
    }
    fn e(&self) -> &Engine {
        self.engine.as_ref().expect("open")
    }
}

impl Kv for Stratus {
    fn write_batch(&mut self, keys: &[Vec<u8>], vals: &[Vec<u8>], delete: bool, durable: bool) {
        let mut b = WriteBatch::new();
        for (i, k) in keys.iter().enumerate() {
            self.version += 1;
            if delete {
                b.delete(ColumnFamily::Write, k, self.version, b"");
            } else {
                b.put(ColumnFamily::Write, k, self.version, b"", &vals[i]);
            }
        }
        let durability = if durable {
            Durability::Sync
        } else {
            Durability::Policy
        };
        self.e().write_with(1, &b, durability).expect("write");
    }
    fn flush(&mut self) {
        self.e().flush_shard(1).expect("flush");
    }
    fn settle(&mut self) {
        self.e().compact_shard(1, false).expect("compact");
    }
    fn compact_all(&mut self) {
        self.flush();
        self.e().set_gc_safe_point(self.version);
        self.e().compact_shard_full(1).expect("full compaction");
    }
    fn get(&self, key: &[u8]) -> bool {
        self.e()
            .get(1, ColumnFamily::Write, key, u64::MAX)
            .expect("get")
            .is_some()
    }
    fn range(&self, key: &[u8], n: usize) -> usize {
        let s = self.e().snapshot(1).expect("snapshot");
        let mut it = s
            .iter(ColumnFamily::Write, key, b"", u64::MAX, false)
            .expect("iter");
        let mut got = 0;
        while got < n && it.valid() {
            std::hint::black_box((it.key(), it.value()));
            got += 1;
            if got < n {
                it.next().expect("next");
            }
        }
        got
    }
    fn reopen(&mut self, cache: usize) {
        self.close();
        self.engine = Some(Stratus::open(&self.dir, cache));
    }
    fn close(&mut self) {
        if let Some(e) = self.engine.take() {
            e.close(true).expect("close");
        }
    }
}

struct Fjall {
    dir: std::path::PathBuf,
    db: Option<(fjall::Database, fjall::Keyspace)>,
}

impl Fjall {
    fn open(dir: &Path, cache: usize) -> (fjall::Database, fjall::Keyspace) {
        let db = fjall::Database::builder(dir.join("fjall"))
            .cache_size(cache as u64)
            .open()
            .expect("open fjall");
        let ks = db
            .keyspace("bench", || {
                use fjall::config::{
                    BloomConstructionPolicy, CompressionPolicy, FilterPolicy, FilterPolicyEntry,
                };
                fjall::KeyspaceCreateOptions::default()
                    .max_memtable_size(MEMTABLE as u64)
                    .data_block_size_policy(fjall::config::BlockSizePolicy::all(BLOCK_SIZE as u32))
                    .data_block_compression_policy(CompressionPolicy::disabled())
                    .filter_policy(FilterPolicy::new([FilterPolicyEntry::Bloom(
                        BloomConstructionPolicy::BitsPerKey(10.0),
                    )]))
            })
            .expect("keyspace");
        (db, ks)
    }
    fn ks(&self) -> &fjall::Keyspace {
        &self.db.as_ref().expect("open").1
    }
}

impl Kv for Fjall {
    fn write_batch(&mut self, keys: &[Vec<u8>], vals: &[Vec<u8>], delete: bool, durable: bool) {
        let (db, ks) = self.db.as_ref().expect("open");
        // `db.batch()` writes the journal to the OS per commit (PersistMode::Buffer), no fsync;
        // a durable batch syncs the journal's data before the commit returns.
        let mut b = db
            .batch()
            .durability(durable.then_some(fjall::PersistMode::SyncData));
        for (i, k) in keys.iter().enumerate() {
            if delete {
                b.remove(ks, k.as_slice());
            } else {
                b.insert(ks, k.as_slice(), vals[i].as_slice());
            }
        }
        b.commit().expect("commit");
    }
    fn flush(&mut self) {
        let (db, ks) = self.db.as_ref().expect("open");
        db.persist(fjall::PersistMode::Buffer).expect("persist");
        ks.rotate_memtable_and_wait().expect("flush");
    }
    fn settle(&mut self) {
        let (db, _) = self.db.as_ref().expect("open");
        wait_until_quiet(|| db.active_compactions() > 0 || db.outstanding_flushes() > 0);
    }
    fn compact_all(&mut self) {
        self.flush();
        self.ks().major_compact().expect("major compaction");
    }
    fn get(&self, key: &[u8]) -> bool {
        self.ks().get(key).expect("get").is_some()
    }
    fn range(&self, key: &[u8], n: usize) -> usize {
        let mut got = 0;
        for g in self.ks().range::<&[u8], _>(key..).take(n) {
            std::hint::black_box(g.into_inner().expect("kv"));
            got += 1;
        }
        got
    }
    fn reopen(&mut self, cache: usize) {
        self.close();
        self.db = Some(Fjall::open(&self.dir, cache));
    }
    fn close(&mut self) {
        if let Some((db, ks)) = self.db.take() {
            db.persist(fjall::PersistMode::SyncAll).expect("persist");
            drop(ks);
            drop(db);
            // fjall's background workers stop asynchronously after the last handle drops.
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

/// RocksDB through rust-rocksdb, with the settings the module docs list.
#[cfg(feature = "rocksdb")]
struct Rocks {
    dir: std::path::PathBuf,
    db: Option<rocksdb::DB>,
}

#[cfg(feature = "rocksdb")]
impl Rocks {
    fn open(dir: &Path, cache: usize) -> rocksdb::DB {
        let mut table = rocksdb::BlockBasedOptions::default();
        table.set_block_size(BLOCK_SIZE);
        table.set_bloom_filter(10.0, false);
        table.set_block_cache(&rocksdb::Cache::new_lru_cache(cache).expect("block cache"));
        let mut opts = rocksdb::Options::default();
        opts.create_if_missing(true);
        opts.set_block_based_table_factory(&table);
        opts.set_write_buffer_size(MEMTABLE);
        opts.set_max_background_jobs(2);
        opts.set_compression_type(rocksdb::DBCompressionType::None);
        rocksdb::DB::open(&opts, dir.join("rocksdb")).expect("open rocksdb")
    }
    fn db(&self) -> &rocksdb::DB {
        self.db.as_ref().expect("open")
    }
}

#[cfg(feature = "rocksdb")]
impl Kv for Rocks {
    fn write_batch(&mut self, keys: &[Vec<u8>], vals: &[Vec<u8>], delete: bool, durable: bool) {
        let mut b = rocksdb::WriteBatch::default();
        for (i, k) in keys.iter().enumerate() {
            if delete {
                b.delete(k);
            } else {
                b.put(k, &vals[i]);
            }
        }
        let mut wo = rocksdb::WriteOptions::default();
        wo.set_sync(durable);
        self.db().write_opt(b, &wo).expect("write");
    }
    fn flush(&mut self) {
        self.db().flush().expect("flush");
    }
    fn settle(&mut self) {
        let db = self.db();
        let busy = |p: &str| db.property_int_value(p).ok().flatten().unwrap_or(0) > 0;
        wait_until_quiet(|| {
            busy("rocksdb.num-running-compactions")
                || busy("rocksdb.num-running-flushes")
                || busy("rocksdb.compaction-pending")
        });
    }
    fn compact_all(&mut self) {
        self.flush();
        self.db().compact_range::<&[u8], &[u8]>(None, None);
    }
    fn get(&self, key: &[u8]) -> bool {
        self.db().get_pinned(key).expect("get").is_some()
    }
    fn range(&self, key: &[u8], n: usize) -> usize {
        let mut it = self.db().raw_iterator();
        it.seek(key);
        let mut got = 0;
        while got < n && it.valid() {
            std::hint::black_box((it.key(), it.value()));
            got += 1;
            it.next();
        }
        got
    }
    fn reopen(&mut self, cache: usize) {
        self.close();
        self.db = Some(Rocks::open(&self.dir, cache));
    }
    fn close(&mut self) {
        if let Some(db) = self.db.take() {
            db.flush_wal(true).expect("flush wal");
            drop(db);
        }
    }
}

/// Waits until `busy` (background flushes or compactions running) was false for five polls in
/// a row, 200 ms apart, or five minutes passed: how the peer engines' settle waits, as neither
/// has a call that waits for its background work.
fn wait_until_quiet(busy: impl Fn() -> bool) {
    let t0 = Instant::now();
    let mut quiet = 0;
    while quiet < 5 && t0.elapsed() < Duration::from_secs(300) {
        std::thread::sleep(Duration::from_millis(200));
        if busy() {
            quiet = 0;
        } else {
            quiet += 1;
        }
    }
}

/// Bytes under each directory one and two levels below `p`, the files of each level-one
/// directory summed as `dir/files` (the engine's own layout: WAL, manifest, tables), for the
/// report's stderr.
fn disk_split(p: &Path) -> String {
    let mut parts = Vec::new();
    let mib = |b: u64| b as f64 / 1048576.0;
    for top in std::fs::read_dir(p).into_iter().flatten().flatten() {
        let name = top.file_name().to_string_lossy().into_owned();
        let mut files = 0;
        for e in std::fs::read_dir(top.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            match e.metadata() {
                Ok(m) if m.is_dir() => parts.push(format!(
                    "{name}/{} {:.1} MiB",
                    e.file_name().to_string_lossy(),
                    mib(dir_size(&e.path()))
                )),
                Ok(m) => files += m.len(),
                Err(_) => {}
            }
        }
        parts.push(format!("{name}/files {:.1} MiB", mib(files)));
    }
    parts.sort();
    parts.join(", ")
}

fn vm_hwm_kb() -> u64 {
    crate::report::proc_status_kb("VmHWM")
}

/// Current RSS split (anonymous vs file-backed, e.g. memory-mapped tables), for stderr.
fn rss_split() -> String {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("VmHWM") || l.starts_with("RssAnon") || l.starts_with("RssFile"))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join(", ")
}

fn result(name: &str, rate: f64) {
    println!("RESULT {name} {rate}");
    eprintln!(
        "  [{}] {name}: {rate:.0}/s ({})",
        std::process::id(),
        rss_split()
    );
}

/// Random indices in 0..n (deterministic, the same for both engines).
fn random_indices(count: usize, n: usize, seed: u64) -> Vec<usize> {
    use rand::Rng;
    let mut r = rng(seed);
    (0..count).map(|_| r.random_range(0..n)).collect()
}

fn timed_reads(kv: &dyn Kv, keys: &[Vec<u8>], expect_found: bool) -> f64 {
    let t0 = Instant::now();
    let mut found = 0usize;
    for k in keys {
        found += kv.get(k) as usize;
    }
    let d = t0.elapsed();
    if expect_found {
        assert_eq!(found, keys.len(), "every loaded key is found");
    } else {
        assert_eq!(found, 0, "no missing key is found");
    }
    keys.len() as f64 / d.as_secs_f64()
}

/// How many times each warm read phase runs (the same reads each time); the median rate is
/// reported, so one phase disturbed by a background flush or compaction does not decide it.
const READ_REPEATS: usize = 3;

/// The median of [`READ_REPEATS`] runs of a phase that returns a rate.
fn median_of(mut phase: impl FnMut() -> f64) -> f64 {
    let mut rates: Vec<f64> = (0..READ_REPEATS).map(|_| phase()).collect();
    rates.sort_by(f64::total_cmp);
    rates[rates.len() / 2]
}

/// The whole workload for one engine, in this (child) process.
pub fn child(engine: &str, n: usize) {
    let tmp = tempfile::tempdir_in(
        std::env::var("BENCH_DIR")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|_| std::env::temp_dir()),
    )
    .expect("tmp");
    let mut kv: Box<dyn Kv> = match engine {
        "stratus" => Box::new(Stratus {
            dir: tmp.path().to_path_buf(),
            engine: Some(Stratus::open(tmp.path(), WARM_CACHE)),
            version: 0,
        }),
        "fjall" => Box::new(Fjall {
            dir: tmp.path().to_path_buf(),
            db: Some(Fjall::open(tmp.path(), WARM_CACHE)),
        }),
        #[cfg(feature = "rocksdb")]
        "rocksdb" => Box::new(Rocks {
            dir: tmp.path().to_path_buf(),
            db: Some(Rocks::open(tmp.path(), WARM_CACHE)),
        }),
        other => panic!("unknown engine {other}"),
    };
    let vals = values();
    let batch_vals = |i: usize| -> Vec<Vec<u8>> {
        (0..BATCH)
            .map(|j| vals[(i * 7919 + j * 31) % vals.len()].clone())
            .collect()
    };

    // Bulk load: sorted keys, batches of 1000, then flush.
    let mut spent = Duration::ZERO;
    for b in 0..n.div_ceil(BATCH) {
        let keys: Vec<Vec<u8>> = (b * BATCH..((b + 1) * BATCH).min(n)).map(key).collect();
        let v = batch_vals(b);
        let t0 = Instant::now();
        kv.write_batch(&keys, &v[..keys.len()], false, false);
        spent += t0.elapsed();
    }
    let t0 = Instant::now();
    kv.flush();
    spent += t0.elapsed();
    result("bulk_load", n as f64 / spent.as_secs_f64());
    let t0 = Instant::now();
    kv.settle();
    eprintln!("  settle after load: {:.1} s", t0.elapsed().as_secs_f64());
    println!("DISK after_load {}", dir_size(tmp.path()));

    // Random point reads, cache warm.
    let warm: Vec<Vec<u8>> = random_indices(WARMUP_READS, n, 1)
        .into_iter()
        .map(key)
        .collect();
    timed_reads(kv.as_ref(), &warm, true);
    drop(warm);
    let keys: Vec<Vec<u8>> = random_indices(POINT_READS, n, 2)
        .into_iter()
        .map(key)
        .collect();
    result(
        "point_warm",
        median_of(|| timed_reads(kv.as_ref(), &keys, true)),
    );

    // The same reads from two threads at once, half each.
    result(
        "point_warm_2t",
        median_of(|| {
            let t0 = Instant::now();
            let kv = kv.as_ref();
            std::thread::scope(|s| {
                for half in keys.chunks(keys.len().div_ceil(2)) {
                    s.spawn(move || timed_reads(kv, half, true));
                }
            });
            keys.len() as f64 / t0.elapsed().as_secs_f64()
        }),
    );

    // Range reads: seek + 10 next (11 entries).
    let starts: Vec<Vec<u8>> = random_indices(RANGE_READS, n - 11, 3)
        .into_iter()
        .map(key)
        .collect();
    result(
        "range_11",
        median_of(|| {
            let t0 = Instant::now();
            let mut got = 0;
            for k in &starts {
                got += kv.range(k, 11);
            }
            let d = t0.elapsed();
            assert_eq!(got, RANGE_READS * 11);
            RANGE_READS as f64 / d.as_secs_f64()
        }),
    );
    drop(starts);

    // Missing-key reads (inside the key range).
    let missing: Vec<Vec<u8>> = random_indices(MISSING_READS, n, 4)
        .into_iter()
        .map(missing_key)
        .collect();
    result(
        "missing",
        median_of(|| timed_reads(kv.as_ref(), &missing, false)),
    );
    drop(missing);

    // Random point reads with a small cache (after a reopen: the cache starts cold and the
    // first reads are part of the measurement window; the OS page cache stays warm).
    kv.reopen(SMALL_CACHE);
    let t0 = Instant::now();
    kv.settle();
    eprintln!("  settle after reopen: {:.1} s", t0.elapsed().as_secs_f64());
    let keys: Vec<Vec<u8>> = random_indices(SMALL_CACHE_READS, n, 5)
        .into_iter()
        .map(key)
        .collect();
    result("point_small_cache", timed_reads(kv.as_ref(), &keys, true));
    drop(keys);

    // Batch writes: 1000 random existing keys per batch.
    let idx = random_indices(WRITE_BATCHES * BATCH, n, 6);
    let t0 = Instant::now();
    for (b, chunk) in idx.chunks(BATCH).enumerate() {
        let keys: Vec<Vec<u8>> = chunk.iter().map(|&i| key(i)).collect();
        let v = batch_vals(b + 1_000_000);
        kv.write_batch(&keys, &v, false, false);
    }
    result(
        "batch_write",
        (WRITE_BATCHES * BATCH) as f64 / t0.elapsed().as_secs_f64(),
    );

    // Durable writes: DURABLE_BATCH random existing keys per batch, each batch fsynced. An
    // fsync's cost swings with the device, so the phase runs READ_REPEATS times (other keys
    // each time, all overwrites) and reports the median, as the warm read phases do.
    let mut seed = 8;
    let durable = median_of(|| {
        let idx = random_indices(DURABLE_BATCHES * DURABLE_BATCH, n, seed);
        seed += 1;
        let t0 = Instant::now();
        for (b, chunk) in idx.chunks(DURABLE_BATCH).enumerate() {
            let keys: Vec<Vec<u8>> = chunk.iter().map(|&i| key(i)).collect();
            let v = batch_vals(b + 2_000_000);
            kv.write_batch(&keys, &v[..keys.len()], false, true);
        }
        (DURABLE_BATCHES * DURABLE_BATCH) as f64 / t0.elapsed().as_secs_f64()
    });
    result("durable_write", durable);

    // Deletes: 1000 random distinct keys per batch.
    let perm = crate::workload::shuffled(n, 7);
    let deletes = (DELETE_BATCHES * BATCH).min(n / 2);
    let t0 = Instant::now();
    for chunk in perm[..deletes].chunks(BATCH) {
        let keys: Vec<Vec<u8>> = chunk.iter().map(|&i| key(i)).collect();
        kv.write_batch(&keys, &[], true, false);
    }
    result("delete", deletes as f64 / t0.elapsed().as_secs_f64());
    // A deleted key reads as missing.
    assert!(!kv.get(&key(perm[0])));
    println!("DISK after_deletes {}", dir_size(tmp.path()));

    // A full compaction once nothing reads below the deletes: the space they free.
    let t0 = Instant::now();
    kv.compact_all();
    result("full_compaction", n as f64 / t0.elapsed().as_secs_f64());
    assert!(!kv.get(&key(perm[0])), "a deleted key came back");
    assert!(kv.get(&key(perm[deletes])), "a live key was lost");
    drop(perm);

    eprintln!("  before close: {}", rss_split());
    kv.close();
    eprintln!("  after close: {}", rss_split());
    println!("DISK end {}", dir_size(tmp.path()));
    eprintln!("  on disk at the end: {}", disk_split(tmp.path()));
    println!("RSS {}", vm_hwm_kb());
}

fn run_child(engine: &str, n: usize) -> HashMap<String, f64> {
    eprintln!("vs-fjall: running {engine} ({n} keys) in a child process");
    let t0 = Instant::now();
    let out = Command::new(std::env::current_exe().expect("exe"))
        .args(["__vs-fjall-child", engine, "--entries", &n.to_string()])
        .stderr(Stdio::inherit())
        .output()
        .expect("spawn child");
    assert!(
        out.status.success(),
        "{engine} child failed: {:?}",
        out.status
    );
    eprintln!(
        "vs-fjall: {engine} done in {:.0} s",
        t0.elapsed().as_secs_f64()
    );
    let mut m = HashMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let parts: Vec<&str> = line.split_whitespace().collect();
        match parts.as_slice() {
            ["RESULT", name, v] | ["DISK", name, v] => {
                m.insert(format!("{}:{name}", parts[0]), v.parse().expect("number"));
            }
            ["RSS", v] => {
                m.insert("RSS".into(), v.parse().expect("number"));
            }
            _ => {}
        }
    }
    m
}

/// The engines the parent runs: Stratus, fjall, and RocksDB when built in.
fn engines() -> Vec<&'static str> {
    let mut all = vec!["stratus", "fjall"];
    if cfg!(feature = "rocksdb") {
        all.push("rocksdb");
    }
    all
}

pub fn run(entries: usize) {
    let s = run_child("stratus", entries);
    let others: Vec<(&str, HashMap<String, f64>)> = engines()
        .into_iter()
        .skip(1)
        .map(|name| (name, run_child(name, entries)))
        .collect();
    for (other, o) in &others {
        table_header(&format!(
            "engine vs {other} ({entries} keys; cache {} MiB warm, {} MiB small; WAL/journal not fsynced but in the durable-writes phase; warm read phases and durable writes: median of {READ_REPEATS})",
            WARM_CACHE >> 20,
            SMALL_CACHE >> 20
        ));
        let rows = [
            (
                "bulk load (sorted, batches of 1000, then flush)",
                "bulk_load",
                "keys/s",
            ),
            ("random point reads, cache warm", "point_warm", "reads/s"),
            (
                "random point reads, cache warm, two threads",
                "point_warm_2t",
                "reads/s",
            ),
            (
                "random point reads, 8 MiB cache (after reopen)",
                "point_small_cache",
                "reads/s",
            ),
            ("range reads (seek + 10 next)", "range_11", "ranges/s"),
            ("batch writes (1000 random keys)", "batch_write", "keys/s"),
            (
                "durable writes (100 random keys per batch, fsync each)",
                "durable_write",
                "keys/s",
            ),
            ("deletes (1000 random keys per batch)", "delete", "keys/s"),
            ("missing-key reads (in key range)", "missing", "reads/s"),
            (
                "full compaction after the deletes (keys loaded / s)",
                "full_compaction",
                "keys/s",
            ),
        ];
        for (name, k, unit) in rows {
            let k = format!("RESULT:{k}");
            row(name, unit, s[&k], other, o[&k]);
        }
        let mib = |v: f64| v / 1048576.0;
        // Lower is better for memory and disk: the ratio column is theirs / stratus there, so
        // above 1 still means Stratus is ahead.
        println!(
            "| peak RSS (VmHWM, whole workload) | {:.0} MiB | {:.0} MiB ({other}) | {:.2} ({other} / stratus) |",
            s["RSS"] / 1024.0,
            o["RSS"] / 1024.0,
            o["RSS"] / s["RSS"]
        );
        for (label, k) in [
            ("after load + compaction", "after_load"),
            ("after the deletes", "after_deletes"),
            ("at end (after a full compaction past the deletes)", "end"),
        ] {
            let k = format!("DISK:{k}");
            println!(
                "| on-disk size, {label} | {:.0} MiB | {:.0} MiB ({other}) | {:.2} ({other} / stratus) |",
                mib(s[&k]),
                mib(o[&k]),
                o[&k] / s[&k]
            );
        }
    }
}
