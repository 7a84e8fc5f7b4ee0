//! One column family of a memtable: a concurrent skiplist of user keys, each with its version
//! chain.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crate::all_versions_iter::AllVersionsIter;
use crate::arena_skiplist::{Pushed, SkipList};
use crate::iter::CfIter;
use crate::size_estimate::{key_charge, version_charge};
use crate::version_chain::{VersionRef, Versions};

/// One column family's memtable: user keys in byte order, one skiplist node per key, the key's
/// versions chained newest first from its node.
///
/// # Why an arena skiplist
///
/// Like LevelDB's, Badger's and TiKV unistore's memtables, the table is a skiplist whose nodes
/// (key inline, tower of next pointers, branching factor 4) and version records (user meta and
/// value inline) are bump-allocated in large arena chunks that are freed all at once when the
/// last reference to the arena goes (see the `arena_skiplist` module for the layout and the
/// soundness argument). Compared with a general-purpose concurrent skiplist of heap-allocated
/// keys and reference-counted version nodes, which this replaced:
///
/// * **A put is a bump of a pointer**, not four heap allocations (node, key, version, payload);
///   nothing is freed version by version.
/// * **A search touches fewer cache lines**: the key is inline in its node, nodes are packed
///   together apart from the values, and there is no per-node reference count to bump.
/// * **Handles stay owned.** A [`VersionRef`] holds an `Arc` of the arena plus a pointer, so it
///   is valid for as long as it is held, even past the memtable; the price is that it keeps the
///   whole arena allocated meanwhile.
///
/// Memory is only returned when the arena goes: superseded versions stay until then, as they
/// did in the chains before. The `unsafe` code is confined to that one module, which exposes a
/// safe API to the rest of the crate.
///
/// # Concurrency
///
/// Writers are serialised by a mutex held only while one put links its record (the engine uses
/// one writer per memtable, so it is uncontended there); any number of concurrent writers stay
/// correct, and a put whose version is not newer than the key's newest is rejected. Readers
/// never lock: they follow pointers published with release stores.
#[derive(Default)]
pub struct CfTable {
    list: SkipList,
    /// Bytes charged so far, see [`crate::size_estimate`]. Relaxed: a threshold, not a barrier.
    size: AtomicUsize,
    /// Keys that have at least one version.
    len: AtomicUsize,
    /// Highest version accepted so far (0 when empty): lets a reader asking "is anything newer
    /// than ts here?" skip the table without walking it.
    max_version: AtomicU64,
}

impl CfTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a value version of `key`. Returns `false`, and changes nothing, if the key already
    /// has a version `>= version`.
    ///
    /// # Panics
    /// If the key or the user meta is longer than `u32::MAX` bytes, or the value longer than
    /// `u32::MAX - 1` (the arena records lengths in 32 bits).
    pub fn put(&self, key: &[u8], version: u64, user_meta: &[u8], value: &[u8]) -> bool {
        self.insert(key, version, user_meta, value, false)
    }

    /// Adds a tombstone version of `key`. Returns `false`, and changes nothing, if the key
    /// already has a version `>= version`.
    ///
    /// # Panics
    /// If the key or the user meta is longer than `u32::MAX` bytes.
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
        // Raised before the insert publishes the version (an ignored put raises it too, which
        // only makes the bound looser): a reader that sees the version in the list also sees
        // a max at least that high.
        self.max_version.fetch_max(version, Ordering::AcqRel);
        let charge = match self.list.insert(key, version, user_meta, value, tombstone) {
            Pushed::Ignored => return false,
            Pushed::Added => version_charge(user_meta.len(), value.len()),
            // Exactly one push per key creates it, so the key is charged once.
            Pushed::First => {
                self.len.fetch_add(1, Ordering::Relaxed);
                key_charge(key.len()) + version_charge(user_meta.len(), value.len())
            }
        };
        self.size.fetch_add(charge, Ordering::Relaxed);
        true
    }

    /// An upper bound of every version in the table (0 when empty). A reader that finds a
    /// version through the list and then reads this sees a value at least that high.
    pub fn max_version(&self) -> u64 {
        self.max_version.load(Ordering::Acquire)
    }

    /// The first version of `key` that is `<= ts`: the version a read at `ts` sees. It may be a
    /// tombstone; the caller decides what a tombstone means (it must still hide older versions
    /// in SSTs).
    pub fn get(&self, key: &[u8], ts: u64) -> Option<VersionRef> {
        self.list.get(key)?.visible_at(ts).map(VersionRef)
    }

    /// The newest version of `key`, whatever its version.
    pub fn get_newest(&self, key: &[u8]) -> Option<VersionRef> {
        self.list.get(key).map(|node| VersionRef(node.newest()))
    }

    /// All versions of `key`, newest first, as of this call.
    pub fn versions(&self, key: &[u8]) -> Versions {
        Versions::starting_at(self.list.get(key).map(|node| node.newest()))
    }

    /// An iterator over the keys visible at `ts`, each positioned on its first version `<= ts`.
    /// It starts unpositioned: call a seek first.
    pub fn iter(&self, ts: u64) -> CfIter<'_> {
        CfIter::new(&self.list, ts)
    }

    /// Every key in order with all its versions, newest first: the walk a flush (or a snapshot
    /// transfer of the whole memtable) needs.
    pub fn iter_all(&self) -> AllVersionsIter<'_> {
        AllVersionsIter::new(self.list.first())
    }

    /// Like [`CfTable::iter_all`], starting at the first key `>= start`.
    pub fn iter_all_from(&self, start: &[u8]) -> AllVersionsIter<'_> {
        AllVersionsIter::new(self.list.seek_ge(start))
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
