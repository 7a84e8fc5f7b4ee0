//! How many bytes a put is charged, for the engine's memtable switch threshold.
//!
//! The charge is the data bytes (key once per key, user meta and value per version) plus a fixed
//! per-node overhead estimate. The estimate does not have to match the allocator to the byte; it
//! has to grow with what really grows, so that many tiny versions (a hot counter key, tombstones
//! with empty values) still fill the memtable and trigger a switch instead of growing memory
//! unaccounted. The constants are derived from the real struct sizes so they follow layout
//! changes.

use std::mem::size_of;
use std::sync::Arc;

use bytes::Bytes;

use crate::version_chain::{VersionChain, VersionNode};

/// Assumed bookkeeping of a general-purpose allocator per allocation (header and rounding).
const ALLOCATION_OVERHEAD: usize = 16;

/// Fixed charge for a new key, on top of the key's length:
/// the skiplist node (the key's `Bytes` handle, the chain head, crossbeam's reference count and
/// height word, and the tower, which holds 2 pointers on average with crossbeam's heights
/// of probability 1/2), plus two allocations: the node and the key buffer.
pub const KEY_OVERHEAD: usize = size_of::<Bytes>()
    + size_of::<VersionChain>()
    + size_of::<usize>()
    + 2 * size_of::<usize>()
    + 2 * ALLOCATION_OVERHEAD;

/// Fixed charge for each version, on top of its user meta and value lengths:
/// the chain node inside its `Arc` (two counters), plus two allocations: the node and the
/// payload buffer that holds meta and value together.
pub const VERSION_OVERHEAD: usize =
    2 * size_of::<usize>() + size_of::<VersionNode>() + 2 * ALLOCATION_OVERHEAD;

// Keep the estimate honest: an `Arc` to the node is what a chain link holds.
const _: () = assert!(size_of::<Option<Arc<VersionNode>>>() == size_of::<usize>());

/// Bytes charged when a key gets its first version.
pub const fn key_charge(key_len: usize) -> usize {
    KEY_OVERHEAD + key_len
}

/// Bytes charged for one accepted version (a tombstone has an empty value).
pub const fn version_charge(user_meta_len: usize, value_len: usize) -> usize {
    VERSION_OVERHEAD + user_meta_len + value_len
}
