//! A shard (region) of the key space and its live state.
//!
//! The state a reader needs is one immutable [`ShardData`] behind an `ArcSwap`: memtables
//! (active, then frozen ones newest first), L0 files newest first, and per-CF levels sorted by
//! key. Every change (memtable switch, flush) builds a new `ShardData` and swaps it in, so a
//! snapshot is one `Arc` clone plus the write sequence, taken in O(1).

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use arc_swap::ArcSwap;
use bytes::Bytes;
use memtable::{ColumnFamily, Memtable};
use parking_lot::Mutex;
use sst::{L0Table, Table};

use crate::remote_rows::RemoteRows;

/// A memtable waiting for flush.
#[derive(Clone)]
pub struct FrozenMem {
    pub mem: Arc<Memtable>,
    /// Sequence of the last write batch the memtable holds: the shard's data_sequence once the
    /// memtable is flushed.
    pub last_sequence: u64,
}

/// The immutable state of a shard at one moment.
#[derive(Clone)]
pub struct ShardData {
    pub ver: u64,
    pub start: Bytes,
    /// Exclusive; empty means unbounded.
    pub end: Bytes,
    pub base_version: u64,
    /// Sequence of the last ChangeSet applied to the shard's file list.
    pub meta_seq: u64,
    /// Highest write sequence persisted in the shard's SST files.
    pub data_sequence: u64,
    /// The memtable writes go to.
    pub mem: Arc<Memtable>,
    /// Frozen memtables, newest first; the last one is flushed next.
    pub frozen: Vec<FrozenMem>,
    /// L0 files, newest first.
    pub l0s: Vec<L0Table>,
    /// `levels[cf][level - 1]`: tables sorted by smallest key, not overlapping.
    pub levels: [Vec<Vec<Table>>; ColumnFamily::COUNT],
    /// Only on a snapshot rebuilt by `SnapAccess::from_remote`: the shipped WRITE rows, read in
    /// place. They take the place of the origin's memtables (the rebuilt snapshot's memtable
    /// stays empty) and are the newest source of its WRITE CF.
    pub(crate) remote: Option<Arc<RemoteRows>>,
}

impl ShardData {
    /// The state of a shard described by its manifest entry, with its tables already open and
    /// an empty memtable (after open, the WAL replay fills it; after a split, writes do).
    pub fn from_files(
        files: &changeset::ShardFiles,
        l0s: Vec<L0Table>,
        levels: [Vec<Vec<Table>>; ColumnFamily::COUNT],
    ) -> ShardData {
        ShardData {
            ver: files.ver(),
            start: files.start().clone(),
            end: files.end().clone(),
            base_version: files.base_version(),
            meta_seq: files.meta_seq(),
            data_sequence: files.data_sequence(),
            mem: Arc::new(Memtable::new()),
            frozen: Vec::new(),
            l0s,
            levels,
            remote: None,
        }
    }

    pub fn contains_key(&self, key: &[u8]) -> bool {
        key >= self.start.as_ref() && (self.end.is_empty() || key < self.end.as_ref())
    }

    /// Memtables newest first: the active one, then the frozen ones.
    pub fn memtables(&self) -> impl Iterator<Item = &Arc<Memtable>> {
        std::iter::once(&self.mem).chain(self.frozen.iter().map(|f| &f.mem))
    }
}

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
    pub(crate) splitting: std::sync::atomic::AtomicBool,
    /// Serializes recording a ChangeSet (its sequence is `meta_seq + 1`) with the state swap
    /// that applies it. Taken before `write`, never while holding it.
    pub(crate) meta: Mutex<()>,
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
            splitting: std::sync::atomic::AtomicBool::new(false),
        }
    }

    pub fn id(&self) -> u64 {
        self.id
    }
}
