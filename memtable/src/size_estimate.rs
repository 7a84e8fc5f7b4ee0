//! How many bytes a put is charged, for the engine's memtable switch threshold.
//!
//! The charge is the data bytes (key once per key, user meta and value per version) plus a fixed
//! per-node overhead estimate. The estimate does not have to match the allocator to the byte; it
//! has to grow with what really grows, so that many tiny versions (a hot counter key, tombstones
//! with empty values) still fill the memtable and trigger a switch instead of growing memory
//! unaccounted. The constants are derived from the real arena layout (see
//! the `arena_skiplist` module) so they follow layout changes. The tail of an arena chunk left
//! unused when the next allocation does not fit in it is not charged (it is smaller than that
//! allocation, and chunks grow to 4 MiB).

use crate::arena_skiplist::{ARENA_ALIGN, NODE_HEADER_SIZE, RECORD_HEADER_SIZE, TOWER_SLOT_SIZE};

/// Average bytes lost to rounding an arena allocation up to the arena's alignment.
const ALIGNMENT_PADDING: usize = (ARENA_ALIGN - 1) / 2;

/// Fixed charge for a new key, on top of the key's length: the skiplist node in the arena (its
/// header, and its tower, which holds 4/3 slots on average with the skiplist's branching factor
/// of 4), plus the average alignment padding. The key itself is stored inline in the node.
pub const KEY_OVERHEAD: usize = NODE_HEADER_SIZE + TOWER_SLOT_SIZE * 4 / 3 + ALIGNMENT_PADDING;

/// Fixed charge for each version, on top of its user meta and value lengths: the version
/// record's header in the arena (version, link to the older version, two lengths), plus the
/// average alignment padding. Meta and value are stored inline after the header.
pub const VERSION_OVERHEAD: usize = RECORD_HEADER_SIZE + ALIGNMENT_PADDING;

// The estimate must grow with every version, however small.
const _: () = assert!(KEY_OVERHEAD > 0 && VERSION_OVERHEAD > 0);

/// Bytes charged when a key gets its first version.
pub const fn key_charge(key_len: usize) -> usize {
    KEY_OVERHEAD + key_len
}

/// Bytes charged for one accepted version (a tombstone has an empty value).
pub const fn version_charge(user_meta_len: usize, value_len: usize) -> usize {
    VERSION_OVERHEAD + user_meta_len + value_len
}
