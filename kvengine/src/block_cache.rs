//! The engine-wide cache of decompressed blocks: a moka cache weighted by bytes, keyed by file
//! id and the block's absolute offset in its file. Tables share it through [`sst::BlockCache`];
//! only compressed blocks go through it (uncompressed blocks are slices of the mapped file).
//!
//! moka applies its capacity asynchronously: an insert is visible at once, and evictions
//! happen on its maintenance pass (run by later reads and writes, or by
//! [`MokaBlockCache::run_pending_tasks`]), so the weighted size can overshoot the capacity by
//! the inserts since the last pass. When full, moka's TinyLFU admission may refuse a new block
//! that is less popular than the one it would evict.
//!
//! A cache may own **loader threads** ([`ReadAhead`]): scans hand them the blocks ahead of the
//! one they read (see [`sst::block_cache`]), which the loaders read, decompress and insert
//! while the scan works. The loaders' queue is bounded; what they load is charged to the cache
//! like any block, so read-ahead adds no memory beyond the cache's capacity and the queue.

use std::sync::Arc;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use moka::notification::RemovalCause;
use prometheus::{IntCounter, IntGauge};
use sst::Block;

use crate::metrics::{counter, gauge};

/// Bytes charged per block on top of its data: the key, the `Block` handle and moka's entry
/// (approximate; it keeps many tiny blocks from looking free).
pub const BLOCK_OVERHEAD: u32 = 128;

static HITS: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "stratus_kvengine_block_cache_hits_total",
        "Block cache lookups that found the decompressed block.",
    )
});
static MISSES: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "stratus_kvengine_block_cache_misses_total",
        "Block cache lookups that did not find the block (it is then decompressed).",
    )
});
static EVICTIONS: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "stratus_kvengine_block_cache_evictions_total",
        "Blocks evicted (or refused admission) to keep the block cache within its capacity.",
    )
});
static BYTES: LazyLock<IntGauge> = LazyLock::new(|| {
    gauge(
        "stratus_kvengine_block_cache_bytes",
        "Weighted size of the block cache: block bytes plus a fixed per-entry overhead.",
    )
});

static READ_AHEAD_QUEUED: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "stratus_kvengine_block_read_ahead_queued_total",
        "Batches of blocks scans handed to the block cache's loader threads.",
    )
});
static READ_AHEAD_REFUSED: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "stratus_kvengine_block_read_ahead_refused_total",
        "Batches of blocks the loader threads' full queue refused: the scan loads those blocks itself.",
    )
});

/// How a cache loads blocks ahead of scans.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadAhead {
    /// Blocks a sequential scan keeps queued ahead of the one it reads (0: no read-ahead).
    pub blocks: usize,
    /// Loader threads (0: no read-ahead).
    pub threads: usize,
}

impl ReadAhead {
    /// No loader threads: every scan loads its own blocks.
    pub const OFF: ReadAhead = ReadAhead {
        blocks: 0,
        threads: 0,
    };

    /// One loader, eight blocks ahead (512 KiB of the default 64 KiB blocks): a loader
    /// decompresses a block in about a third of the time a scan takes to read it, so one keeps
    /// up with a scan, and eight hide a loader's late start behind the scan's first blocks.
    pub const DEFAULT: ReadAhead = ReadAhead {
        blocks: 8,
        threads: 1,
    };
    /// The largest depth accepted: more only holds cache space for blocks a scan may never
    /// reach.
    pub const MAX_BLOCKS: usize = 256;
    /// The most loader threads accepted.
    pub const MAX_THREADS: usize = 64;

    /// Batches of blocks that may wait for a loader, per loader thread: a few concurrent
    /// scans' worth (a batch is half a scan's depth, its first one the whole depth); more
    /// would only queue loads that their scans reach first.
    pub const QUEUE_PER_THREAD: usize = 8;

    /// Which setting is refused and why, if one is.
    pub fn check(self) -> Result<(), (ReadAheadSetting, String)> {
        if self.blocks > Self::MAX_BLOCKS {
            return Err((
                ReadAheadSetting::Blocks,
                format!(
                    "read-ahead blocks must be at most {}, found={}",
                    Self::MAX_BLOCKS,
                    self.blocks
                ),
            ));
        }
        if self.threads > Self::MAX_THREADS {
            return Err((
                ReadAheadSetting::Threads,
                format!(
                    "read-ahead threads must be at most {}, found={}",
                    Self::MAX_THREADS,
                    self.threads
                ),
            ));
        }
        Ok(())
    }

    fn enabled(self) -> bool {
        self.blocks > 0 && self.threads > 0
    }
}

/// The two fields of [`ReadAhead`], as a config file names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadAheadSetting {
    Blocks,
    Threads,
}

impl ReadAheadSetting {
    /// The key of the setting in a server's `[kvengine]` and a worker's `[worker]` section.
    pub fn key(self) -> &'static str {
        match self {
            ReadAheadSetting::Blocks => "read-ahead-blocks",
            ReadAheadSetting::Threads => "read-ahead-threads",
        }
    }
}

/// The loader threads of a cache: they exit once the cache (the queue's sender) is dropped
/// and the queue is drained.
struct Loaders {
    queue: std::sync::mpsc::SyncSender<sst::block_cache::ReadAheadJob>,
    blocks: usize,
}

impl Loaders {
    /// Starts the loaders; `None` when not one thread could start. Loaders are optional
    /// (scans load their own blocks without them), so a thread that cannot start is logged
    /// and left out rather than failing the cache: the one decision every owner of a cache
    /// (an engine, a worker) takes the same way.
    fn start(read_ahead: ReadAhead) -> Option<Loaders> {
        let (queue, jobs) = std::sync::mpsc::sync_channel::<sst::block_cache::ReadAheadJob>(
            read_ahead.threads * ReadAhead::QUEUE_PER_THREAD,
        );
        let jobs = Arc::new(parking_lot::Mutex::new(jobs));
        let mut started = 0;
        for n in 0..read_ahead.threads {
            let jobs = jobs.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("stratus-read-ahead-{n}"))
                .spawn(move || {
                    loop {
                        // The lock is held while waiting, not while loading.
                        let job = jobs.lock().recv();
                        let Ok(job) = job else { return };
                        // A batch that panics (a bug: loads report errors, they do not
                        // panic) must not take the loader with it, or every later batch
                        // would wait in a queue no one drains until it refuses them all.
                        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)).is_err() {
                            tracing::error!(
                                "a block read-ahead batch panicked; the loader goes on"
                            );
                        }
                    }
                });
            match spawned {
                Ok(_) => started += 1,
                Err(e) => tracing::warn!(
                    error = %e,
                    started,
                    wanted = read_ahead.threads,
                    "a block read-ahead loader thread did not start"
                ),
            }
        }
        (started > 0).then_some(Loaders {
            queue,
            blocks: read_ahead.blocks,
        })
    }
}

/// Counters of one [`MokaBlockCache`] (the prometheus metrics add up every instance).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BlockCacheStats {
    pub hits: u64,
    pub misses: u64,
    pub evictions: u64,
    /// moka's weighted size (bytes + overhead) as of its last maintenance pass.
    pub weighted_size: u64,
    pub entry_count: u64,
    /// Batches of blocks handed to the loader threads, and refused by their full queue.
    pub read_ahead_queued: u64,
    pub read_ahead_refused: u64,
}

#[derive(Default)]
struct Counters {
    hits: AtomicU64,
    misses: AtomicU64,
    evictions: AtomicU64,
    read_ahead_queued: AtomicU64,
    read_ahead_refused: AtomicU64,
    /// The weighted size last added to the process-wide gauge.
    reported_size: AtomicI64,
}

/// A byte-weighted cache of decompressed blocks. Wrap it in an `Arc` and pass it to
/// `sst::Table::open_with_cache` / `sst::L0Table::open_with`.
pub struct MokaBlockCache {
    cache: moka::sync::Cache<(u64, u64), Block>,
    capacity: u64,
    counters: Arc<Counters>,
    loaders: Option<Loaders>,
}

fn weight(block: &Block) -> u32 {
    u32::try_from(block.data().len())
        .unwrap_or(u32::MAX)
        .saturating_add(BLOCK_OVERHEAD)
}

impl MokaBlockCache {
    /// A cache holding about `capacity_bytes` of blocks (data bytes plus [`BLOCK_OVERHEAD`]
    /// each).
    pub fn new(capacity_bytes: u64) -> MokaBlockCache {
        Self::build(capacity_bytes, None)
    }

    /// A cache of `capacity_bytes` whose loader threads read blocks ahead of scans; with
    /// [`ReadAhead::OFF`] (or either field 0) it is [`Self::new`]. Fails (`InvalidInput`) when
    /// the settings are out of bounds ([`ReadAhead::check`]); loader threads that cannot start
    /// are logged and left out.
    pub fn with_read_ahead(
        capacity_bytes: u64,
        read_ahead: ReadAhead,
    ) -> std::io::Result<MokaBlockCache> {
        if let Err((_, what)) = read_ahead.check() {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, what));
        }
        let loaders = read_ahead
            .enabled()
            .then(|| Loaders::start(read_ahead))
            .flatten();
        Ok(Self::build(capacity_bytes, loaders))
    }

    fn build(capacity_bytes: u64, loaders: Option<Loaders>) -> MokaBlockCache {
        let counters = Arc::new(Counters::default());
        let listener_counters = counters.clone();
        let cache = moka::sync::Cache::builder()
            .name("stratus-block-cache")
            .max_capacity(capacity_bytes)
            .weigher(|_key: &(u64, u64), block: &Block| weight(block))
            .eviction_listener(move |_key, _block, cause: RemovalCause| {
                if cause.was_evicted() {
                    listener_counters.evictions.fetch_add(1, Ordering::Relaxed);
                    EVICTIONS.inc();
                }
            })
            .build();
        MokaBlockCache {
            cache,
            capacity: capacity_bytes,
            counters,
            loaders,
        }
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Runs moka's pending maintenance (evictions, admission) now; tests and size reports use
    /// it to see a settled cache.
    pub fn run_pending_tasks(&self) {
        self.cache.run_pending_tasks();
        self.report_size();
    }

    pub fn stats(&self) -> BlockCacheStats {
        BlockCacheStats {
            hits: self.counters.hits.load(Ordering::Relaxed),
            misses: self.counters.misses.load(Ordering::Relaxed),
            evictions: self.counters.evictions.load(Ordering::Relaxed),
            weighted_size: self.cache.weighted_size(),
            entry_count: self.cache.entry_count(),
            read_ahead_queued: self.counters.read_ahead_queued.load(Ordering::Relaxed),
            read_ahead_refused: self.counters.read_ahead_refused.load(Ordering::Relaxed),
        }
    }

    /// Moves the process-wide gauge by this cache's change in weighted size since the last
    /// report, so that several caches in one process add up.
    fn report_size(&self) {
        let now = self.cache.weighted_size() as i64;
        let before = self.counters.reported_size.swap(now, Ordering::Relaxed);
        BYTES.add(now - before);
    }
}

impl sst::BlockCache for MokaBlockCache {
    fn get(&self, file_id: u64, offset: u64) -> Option<Block> {
        let found = self.cache.get(&(file_id, offset));
        if found.is_some() {
            self.counters.hits.fetch_add(1, Ordering::Relaxed);
            HITS.inc();
        } else {
            self.counters.misses.fetch_add(1, Ordering::Relaxed);
            MISSES.inc();
        }
        found
    }

    fn insert(&self, file_id: u64, offset: u64, block: Block) {
        self.cache.insert((file_id, offset), block);
        self.report_size();
    }

    fn contains(&self, file_id: u64, offset: u64) -> bool {
        self.cache.contains_key(&(file_id, offset))
    }

    fn read_ahead_blocks(&self) -> usize {
        self.loaders.as_ref().map_or(0, |l| l.blocks)
    }

    fn read_ahead(&self, job: sst::block_cache::ReadAheadJob) -> bool {
        let Some(loaders) = &self.loaders else {
            return false;
        };
        let queued = loaders.queue.try_send(job).is_ok();
        let (counter, metric) = match queued {
            true => (&self.counters.read_ahead_queued, &READ_AHEAD_QUEUED),
            false => (&self.counters.read_ahead_refused, &READ_AHEAD_REFUSED),
        };
        counter.fetch_add(1, Ordering::Relaxed);
        metric.inc();
        queued
    }
}

impl Drop for MokaBlockCache {
    fn drop(&mut self) {
        BYTES.sub(self.counters.reported_size.load(Ordering::Relaxed));
    }
}
