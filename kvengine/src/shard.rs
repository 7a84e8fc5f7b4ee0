//! A shard (region) of the key space: its live state behind an `ArcSwap`, its write sequence,
//! and the locks that order the jobs changing it.
//!
//! Lock order: `compacting` (or `flushing`), then `meta`, then `write`. `meta` serializes the
//! ChangeSets of the shard (each one's sequence is `meta_seq + 1`) with the state swap that
//! applies it; `write` serializes writers with every swap of `data`. With an external log,
//! every `apply_*` entry point holds `meta` then `write`, so a shard's entries apply one at a
//! time; no apply takes `compacting` or `flushing`, which a leader's job holds while it waits
//! for its entry to be applied.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};

use arc_swap::ArcSwap;
use parking_lot::Mutex;

use crate::shard_data::ShardData;

pub struct Shard {
    pub(crate) id: u64,
    /// Serializes writers of this shard and every swap of `data`. Held across the WAL append
    /// and the memtable apply, never across a flush.
    pub(crate) write: Mutex<()>,
    /// Sequence of the last applied write batch. Raised after the memtable apply, so a snapshot
    /// that reads it before loading `data` holds every write up to it.
    pub(crate) write_sequence: AtomicU64,
    pub(crate) data: ArcSwap<ShardData>,
    /// Held by the flush of this shard: frozen memtables flush one at a time, oldest first.
    pub(crate) flushing: Mutex<()>,
    /// Held by the compaction of this shard: one at a time.
    pub(crate) compacting: Mutex<()>,
    /// Set while the shard splits: writes are refused (checked under `write`).
    pub(crate) splitting: AtomicBool,
    /// Serializes recording a ChangeSet (its sequence is `meta_seq + 1`) with the state swap
    /// that applies it. Taken before `write`, never while holding it.
    pub(crate) meta: Mutex<()>,
    /// External log mode, on the leader: the active memtable's size when a Freeze was last
    /// proposed for it (0: none yet). Reset when a Freeze is applied and when the engine
    /// becomes leader, so a Freeze is proposed once per memtable, and again only if the
    /// memtable grows by another `memtable_size` (the first proposal was lost).
    pub(crate) freeze_proposed_at: AtomicUsize,
}

impl Shard {
    pub(crate) fn new(id: u64, write_sequence: u64, data: ShardData) -> Shard {
        Shard {
            id,
            write: Mutex::new(()),
            write_sequence: AtomicU64::new(write_sequence),
            data: ArcSwap::from_pointee(data),
            flushing: Mutex::new(()),
            compacting: Mutex::new(()),
            meta: Mutex::new(()),
            splitting: AtomicBool::new(false),
            freeze_proposed_at: AtomicUsize::new(0),
        }
    }
}
