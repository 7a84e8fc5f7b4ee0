//! [`TableCache`]: the tables a worker opened, kept open for its next rebuilds.
//!
//! A worker rebuilds a snapshot for every offloaded request ([`crate::SnapAccess::
//! from_remote_cached`]), and requests over one region name the same files again and again.
//! Opening a table reads its footer, indexes, filter and properties from the store and decodes
//! them: with a warm block cache that was most of what a rebuild did besides indexing the
//! shipped rows. Files are immutable and a file id is never reused, so a table opened once
//! stays right for as long as it is kept, with nothing to invalidate: RocksDB's table cache
//! rests on the same fact.
//!
//! **Bounds.** The cache is weighted by each table's [`sst::Table::memory_size`] (its index
//! entries and metadata, and the whole file when it was downloaded onto the heap), and every
//! table weighs at least [`MIN_TABLE_WEIGHT`]: a table read with positioned reads holds a file
//! descriptor, and the floor bounds how many the cache keeps open (capacity / 256 KiB: 256 at
//! the default 64 MiB). Like the block cache, moka applies the capacity on its maintenance
//! pass, so the size can overshoot it by the opens since the last pass. A table unused for
//! [`IDLE_EXPIRY`] goes on the cache's next activity.
//!
//! **What a kept table pins.**
//! * A mapped table (an L0 file, an uncompressed level table) keeps its map: the pages a read
//!   touched stay in the process's RSS until dropped. Its weight leaves them out, so the
//!   worker drops them when a request is done with its snapshot
//!   ([`crate::SnapAccess::release_pages`]), as unmapping did when every request reopened its
//!   files.
//! * A kept table keeps its file readable after the store deleted it (an unlinked local
//!   file, or one the S3 disk cache evicted, holds its disk space until closed): bounded by
//!   the count above and the idle expiry. So that the disk cache does not take the most used
//!   files for the least, every hit tells the store ([`Dfs::note_use`]).
//!
//! A failed open is not cached: the next request tries again. Concurrent misses of one file
//! each open it (the first insert wins); a worker's requests over one region mostly follow one
//! another.

use std::sync::Arc;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use prometheus::IntCounter;
use sst::{L0Table, Table};
use types::FileId;

use crate::dfs::Dfs;
use crate::error::Result;
use crate::metrics::counter;
use crate::shard_data::TableSource;

/// The least weight of a kept table, in bytes (see the module docs: it bounds the open files).
pub const MIN_TABLE_WEIGHT: u64 = 256 * 1024;

/// How long a table stays kept without being used.
pub const IDLE_EXPIRY: Duration = Duration::from_secs(600);

static HITS: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "stratus_kvengine_table_cache_hits_total",
        "Tables a snapshot rebuild found already open in the table cache.",
    )
});
static MISSES: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "stratus_kvengine_table_cache_misses_total",
        "Tables a snapshot rebuild had to open from the object store.",
    )
});

/// One open file: an L0 file (every column family's section) or a level table.
#[derive(Clone)]
enum OpenTable {
    L0(L0Table),
    Level(Table),
}

impl OpenTable {
    fn weight(&self) -> u32 {
        let size = match self {
            OpenTable::L0(t) => t.memory_size(),
            OpenTable::Level(t) => t.memory_size(),
        };
        u32::try_from(size.max(MIN_TABLE_WEIGHT)).unwrap_or(u32::MAX)
    }
}

/// Counters of one [`TableCache`] (the prometheus metrics add up every instance).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TableCacheStats {
    /// Lookups that found the table open.
    pub hits: u64,
    /// Lookups that opened it.
    pub misses: u64,
    /// Tables kept, as of moka's last maintenance pass.
    pub entry_count: u64,
    /// Their weight in bytes ([`sst::Table::memory_size`], [`MIN_TABLE_WEIGHT`] at least
    /// each), as of the same pass.
    pub weighted_size: u64,
}

/// Tables kept open by file id, opened from one object store through one block cache.
pub struct TableCache {
    dfs: Arc<dyn Dfs>,
    block_cache: Option<Arc<dyn sst::BlockCache>>,
    tables: moka::sync::Cache<u64, OpenTable>,
    /// Whether anything is kept (a capacity above 0).
    keeps: bool,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl std::fmt::Debug for TableCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableCache")
            .field("stats", &self.stats())
            .finish()
    }
}

impl TableCache {
    /// A cache of about `capacity_bytes` of open tables ([`MIN_TABLE_WEIGHT`] at least
    /// each), opening what it lacks from `dfs` with `block_cache` (the cache every table it
    /// opens shares). A capacity of 0 keeps nothing: every lookup opens the table.
    pub fn new(
        dfs: Arc<dyn Dfs>,
        block_cache: Option<Arc<dyn sst::BlockCache>>,
        capacity_bytes: u64,
    ) -> TableCache {
        // Exported at zero from the start, so a `rate()` sees the first rebuild.
        LazyLock::force(&HITS);
        LazyLock::force(&MISSES);
        let tables = moka::sync::Cache::builder()
            .name("stratus-table-cache")
            .max_capacity(capacity_bytes)
            .weigher(|_id: &u64, t: &OpenTable| t.weight())
            .time_to_idle(IDLE_EXPIRY)
            .build();
        TableCache {
            dfs,
            block_cache,
            tables,
            keeps: capacity_bytes > 0,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// The object store tables are opened from.
    pub fn dfs(&self) -> &Arc<dyn Dfs> {
        &self.dfs
    }

    /// The block cache every table opened here shares.
    pub fn block_cache(&self) -> Option<&Arc<dyn sst::BlockCache>> {
        self.block_cache.as_ref()
    }

    fn source(&self) -> TableSource<'_> {
        TableSource::new(&self.dfs, self.block_cache.as_ref())
    }

    /// The L0 file `id`, open.
    pub(crate) fn l0(&self, id: u64) -> Result<L0Table> {
        self.get_or_open(
            id,
            |t| match t {
                OpenTable::L0(t) => Some(t),
                OpenTable::Level(_) => None,
            },
            |source| source.open_l0(id),
            OpenTable::L0,
        )
    }

    /// The level table `id`, open.
    pub(crate) fn table(&self, id: u64) -> Result<Table> {
        self.get_or_open(
            id,
            |t| match t {
                OpenTable::Level(t) => Some(t),
                OpenTable::L0(_) => None,
            },
            |source| source.open_table(id),
            OpenTable::Level,
        )
    }

    /// File `id` as kept (`kept` picks the kind asked for: an id kept as the other kind is a
    /// miss, which then fails to open), else opened by `open` and kept.
    fn get_or_open<T: Clone>(
        &self,
        id: u64,
        kept: impl FnOnce(OpenTable) -> Option<T>,
        open: impl FnOnce(TableSource<'_>) -> Result<T>,
        wrap: impl FnOnce(T) -> OpenTable,
    ) -> Result<T> {
        if let Some(t) = self.tables.get(&id).and_then(kept) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            HITS.inc();
            self.dfs.note_use(FileId(id));
            return Ok(t);
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        MISSES.inc();
        let t = open(self.source())?;
        if self.keeps {
            self.tables.insert(id, wrap(t.clone()));
        }
        Ok(t)
    }

    /// Runs moka's pending maintenance (evictions) now; tests use it to see a settled cache.
    pub fn run_pending_tasks(&self) {
        self.tables.run_pending_tasks();
    }

    pub fn stats(&self) -> TableCacheStats {
        TableCacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            entry_count: self.tables.entry_count(),
            weighted_size: self.tables.weighted_size(),
        }
    }
}
