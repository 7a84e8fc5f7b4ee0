//! The hook through which a table shares decompressed blocks with an engine-wide cache.
//!
//! Uncompressed blocks are never cached: they are zero-copy slices of the table's bytes (a
//! memory map or a downloaded buffer), and the table remembers which ones passed their checksum.
//! Compressed blocks are decompressed once and kept by the cache the engine injects (a byte-
//! weighted moka cache in kvengine), keyed by file id and the block's absolute offset.

use crate::block::Block;

/// An engine-wide cache of decoded blocks.
pub trait BlockCache: Send + Sync {
    fn get(&self, file_id: u64, offset: u64) -> Option<Block>;
    fn insert(&self, file_id: u64, offset: u64, block: Block);
}
