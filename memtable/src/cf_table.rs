//! One column family of a memtable: a concurrent skiplist of user keys, each with its version
//! chain.

use std::ops::Bound;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use crossbeam_skiplist::SkipMap;

use crate::all_versions_iter::AllVersionsIter;
use crate::iter::CfIter;
use crate::size_estimate::{key_charge, version_charge};
use crate::version_chain::{Pushed, VersionChain, VersionRef, Versions};

/// The skiplist behind a [`CfTable`]: user key → its version chain.
pub(crate) type KeyMap = SkipMap<Bytes, VersionChain>;

/// One column family's memtable: user keys in byte order, one skiplist node per key, the key's
/// versions chained newest first behind an atomically swapped head.
///
/// # Why `crossbeam_skiplist::SkipMap` + an `ArcSwapOption` chain head
///
/// Badger and TiKV's unistore use an arena skiplist: nodes and values bump-allocated in one big
/// buffer, offsets instead of pointers, the whole arena freed at once when the memtable is
/// dropped. That is the fastest layout, but it is built on `unsafe` pointer arithmetic, and every
/// value a reader returns is a borrow into the arena, so its lifetime is tied to the memtable by
/// convention rather than by the compiler. Here instead:
///
/// * **Safe reclamation for free.** crossbeam's epoch-based skiplist and `Arc`-linked version
///   nodes mean no code in this crate is `unsafe`. A [`VersionRef`] is an owned `Arc`, valid as
///   long as it is held, even past the memtable; that is what the engine's snapshot reads and
///   the offload path need.
/// * **A mature lock-free structure.** Readers never block the writer and vice versa; inserts
///   of new keys are lock-free and inserts of new versions are one compare-and-swap.
/// * **Immutable nodes.** Versions are only ever prepended, never edited, so a reader walking a
///   chain sees a consistent, strictly descending list without synchronising per node.
///
/// The cost: one skiplist node allocation + one key buffer per new key, and two allocations
/// (node + one buffer holding user meta and value together) per version, instead of a bump
/// pointer; plus atomic reference-count traffic when readers clone handles. Memory is returned
/// version by version rather than by freeing an arena, and the memory-footprint estimate in
/// [`crate::size_estimate`] has to account for per-node overhead explicitly.
///
/// # Concurrency
///
/// The engine uses one writer per memtable, but any number of concurrent writers stay correct:
/// a put whose version is not newer than the key's newest is rejected under compare-and-swap,
/// so chains are strictly descending whatever the interleaving. Readers are lock-free.
#[derive(Default)]
pub struct CfTable {
    map: KeyMap,
    /// Bytes charged so far, see [`crate::size_estimate`]. Relaxed: a threshold, not a barrier.
    size: AtomicUsize,
    /// Keys that have at least one version.
    len: AtomicUsize,
}

impl CfTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a value version of `key`. Returns `false`, and changes nothing, if the key already
    /// has a version `>= version`.
    pub fn put(&self, key: &[u8], version: u64, user_meta: &[u8], value: &[u8]) -> bool {
        self.insert(key, version, user_meta, value, false)
    }

    /// Adds a tombstone version of `key`. Returns `false`, and changes nothing, if the key
    /// already has a version `>= version`.
    pub fn delete(&self, key: &[u8], version: u64, user_meta: &[u8]) -> bool {
        self.insert(key, version, user_meta, &[], true)
    }

    fn insert(
        &self,
        key: &[u8],
        version: u64,
        user_meta: &[u8],
        value: &[u8],
        tombstone: bool,
    ) -> bool {
        // Fast path without allocating the key: the key usually exists already.
        let entry = match self.map.get(key) {
            Some(entry) => entry,
            // The chain starts empty and gets its first version below; readers skip empty
            // chains. If another writer inserts the same key concurrently, crossbeam returns the
            // one node that won and both writers push onto its chain.
            None => self
                .map
                .get_or_insert_with(Bytes::copy_from_slice(key), VersionChain::default),
        };
        let charge = match entry.value().push(version, user_meta, value, tombstone) {
            Pushed::Ignored => return false,
            Pushed::Added => version_charge(user_meta.len(), value.len()),
            // Exactly one push per key sees the empty chain, so the key is charged once.
            Pushed::First => {
                self.len.fetch_add(1, Ordering::Relaxed);
                key_charge(key.len()) + version_charge(user_meta.len(), value.len())
            }
        };
        self.size.fetch_add(charge, Ordering::Relaxed);
        true
    }

    /// The first version of `key` that is `<= ts`: the version a read at `ts` sees. It may be a
    /// tombstone; the caller decides what a tombstone means (it must still hide older versions
    /// in SSTs).
    pub fn get(&self, key: &[u8], ts: u64) -> Option<VersionRef> {
        self.map.get(key)?.value().visible_at(ts)
    }

    /// The newest version of `key`, whatever its version.
    pub fn get_newest(&self, key: &[u8]) -> Option<VersionRef> {
        self.map.get(key)?.value().newest()
    }

    /// All versions of `key`, newest first, as of this call.
    pub fn versions(&self, key: &[u8]) -> Versions {
        self.map
            .get(key)
            .map(|entry| entry.value().versions())
            .unwrap_or_default()
    }

    /// An iterator over the keys visible at `ts`, each positioned on its first version `<= ts`.
    /// It starts unpositioned: call a seek first.
    pub fn iter(&self, ts: u64) -> CfIter<'_> {
        CfIter::new(&self.map, ts)
    }

    /// Every key in order with all its versions, newest first: the walk a flush (or a snapshot
    /// transfer of the whole memtable) needs.
    pub fn iter_all(&self) -> AllVersionsIter<'_> {
        AllVersionsIter::new(&self.map, Bound::Unbounded)
    }

    /// Like [`CfTable::iter_all`], starting at the first key `>= start`.
    pub fn iter_all_from(&self, start: &[u8]) -> AllVersionsIter<'_> {
        AllVersionsIter::new(&self.map, Bound::Included(start))
    }

    /// Number of keys with at least one version.
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    /// Whether no key has a version yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes charged to this column family, see [`crate::size_estimate`].
    pub fn size(&self) -> usize {
        self.size.load(Ordering::Relaxed)
    }
}
