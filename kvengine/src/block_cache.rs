//! The engine-wide cache of decompressed blocks: a moka cache weighted by bytes, keyed by file
//! id and the block's absolute offset in its file. Tables share it through [`sst::BlockCache`];
//! only compressed blocks go through it (uncompressed blocks are slices of the mapped file).
//!
//! moka applies its capacity asynchronously: an insert is visible at once, and evictions
//! happen on its maintenance pass (run by later reads and writes, or by
//! [`MokaBlockCache::run_pending_tasks`]), so the weighted size can overshoot the capacity by
//! the inserts since the last pass. When full, moka's TinyLFU admission may refuse a new block
//! that is less popular than the one it would evict.

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

/// Counters of one [`MokaBlockCache`] (the prometheus metrics add up every instance).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BlockCacheStats {
    pub hits: u64,
    pub misses: u64,
    pub evictions: u64,
    /// moka's weighted size (bytes + overhead) as of its last maintenance pass.
    pub weighted_size: u64,
    pub entry_count: u64,
}

#[derive(Default)]
struct Counters {
    hits: AtomicU64,
    misses: AtomicU64,
    evictions: AtomicU64,
    /// The weighted size last added to the process-wide gauge.
    reported_size: AtomicI64,
}

/// A byte-weighted cache of decompressed blocks. Wrap it in an `Arc` and pass it to
/// `sst::Table::open_with_cache` / `sst::L0Table::open_with`.
pub struct MokaBlockCache {
    cache: moka::sync::Cache<(u64, u64), Block>,
    capacity: u64,
    counters: Arc<Counters>,
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
}

impl Drop for MokaBlockCache {
    fn drop(&mut self) {
        BYTES.sub(self.counters.reported_size.load(Ordering::Relaxed));
    }
}
