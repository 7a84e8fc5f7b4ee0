//! The hook through which a table shares decompressed blocks with an engine-wide cache, and
//! through which a scan has the blocks ahead of it loaded on the cache's own threads.
//!
//! Uncompressed blocks are never cached: they are zero-copy slices of the table's bytes (a
//! memory map or a downloaded buffer), and the table remembers which ones passed their checksum.
//! Compressed blocks are decompressed once and kept by the cache the engine injects (a byte-
//! weighted moka cache in kvengine), keyed by file id and the block's absolute offset.
//!
//! **Read-ahead.** Loading a block of a positioned table (read, verify, decompress, check,
//! insert) is a third of a cold scan, most of it zstd. A cache that owns loader threads
//! ([`BlockCache::read_ahead_blocks`] > 0) lets a sequential scan hand it the next blocks of
//! its range ([`crate::TableIter::bound_read_ahead`]) while the scan works on the current one:
//! the same CPU spent on another core, and the scan finds the blocks cached when it gets there
//! (SlateDB's scans fetch ahead the same way). The cache decides how far ahead and how many
//! loads may wait; a full queue refuses a load, and the scan then loads that block itself.

use crate::block::Block;

/// Work handed to the cache's loader threads: loads a run of blocks into the cache.
pub type ReadAheadJob = Box<dyn FnOnce() + Send>;

/// An engine-wide cache of decoded blocks.
pub trait BlockCache: Send + Sync {
    fn get(&self, file_id: u64, offset: u64) -> Option<Block>;
    fn insert(&self, file_id: u64, offset: u64, block: Block);

    /// Whether the block is cached, without counting a hit or a miss (a loader checking
    /// whether a block still needs loading is not a read).
    fn contains(&self, file_id: u64, offset: u64) -> bool;

    /// How many blocks a sequential scan keeps queued ahead of the one it reads; 0 when the
    /// cache has no loader threads (the default).
    fn read_ahead_blocks(&self) -> usize {
        0
    }

    /// Queues `job` for a loader thread; false (and `job` dropped) when the cache has no
    /// loaders or their queue is full.
    fn read_ahead(&self, job: ReadAheadJob) -> bool {
        drop(job);
        false
    }
}
