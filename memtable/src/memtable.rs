//! [`Memtable`]: one [`CfTable`] per column family, switched and flushed as a unit.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::cf_table::CfTable;
use types::ColumnFamily;

/// A shard's in-memory write buffer: one skiplist per column family.
///
/// The engine applies a write batch to the active memtable, switches to a fresh one when
/// [`Memtable::size`] crosses its threshold, and flushes the frozen one into an L0 file with one
/// section per column family.
#[derive(Default)]
pub struct Memtable {
    cfs: [CfTable; ColumnFamily::COUNT],
    /// The shard's SnapVersion when this memtable was frozen; 0 while it is active.
    version: AtomicU64,
}

impl Memtable {
    /// An empty memtable.
    pub fn new() -> Self {
        Self::default()
    }

    /// The table of one column family.
    pub fn cf(&self, cf: ColumnFamily) -> &CfTable {
        &self.cfs[cf.index()]
    }

    /// Adds a value version of `key` in `cf`. Returns `false`, and changes nothing, if the key
    /// already has a version `>= version` there. Panics as [`CfTable::put`] does.
    pub fn put(
        &self,
        cf: ColumnFamily,
        key: &[u8],
        version: u64,
        user_meta: &[u8],
        value: &[u8],
    ) -> bool {
        self.cf(cf).put(key, version, user_meta, value)
    }

    /// Adds a tombstone version of `key` in `cf`. Returns `false`, and changes nothing, if the
    /// key already has a version `>= version` there. Panics as [`CfTable::delete`] does.
    pub fn delete(&self, cf: ColumnFamily, key: &[u8], version: u64, user_meta: &[u8]) -> bool {
        self.cf(cf).delete(key, version, user_meta)
    }

    /// Estimated memory of all column families, in bytes (see [`crate::size_estimate`]); what
    /// the engine compares with its memtable switch threshold.
    pub fn size(&self) -> usize {
        self.cfs.iter().map(CfTable::size).sum()
    }

    /// Whether no column family holds any version.
    pub fn is_empty(&self) -> bool {
        self.cfs.iter().all(CfTable::is_empty)
    }

    /// Records the shard's SnapVersion at freeze time.
    pub fn set_version(&self, version: u64) {
        self.version.store(version, Ordering::Release);
    }

    /// The SnapVersion recorded by [`Memtable::set_version`]; 0 if never set.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_families_are_independent() {
        let mt = Memtable::new();
        assert!(mt.put(ColumnFamily::Write, b"k", 5, b"", b"w"));
        assert!(
            mt.put(ColumnFamily::Lock, b"k", 1, b"", b"l"),
            "version 5 in WRITE does not shadow LOCK"
        );
        assert_eq!(
            mt.cf(ColumnFamily::Write)
                .get(b"k", 9)
                .map(|v| v.value().to_vec()),
            Some(b"w".to_vec())
        );
        assert_eq!(
            mt.cf(ColumnFamily::Lock)
                .get(b"k", 9)
                .map(|v| v.value().to_vec()),
            Some(b"l".to_vec())
        );
        assert!(mt.cf(ColumnFamily::Extra).get(b"k", 9).is_none());
    }

    #[test]
    fn version_is_zero_until_set() {
        let mt = Memtable::new();
        assert_eq!(mt.version(), 0);
        mt.set_version(42);
        assert_eq!(mt.version(), 42);
    }

    #[test]
    fn memtable_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Memtable>();
        assert_send_sync::<crate::VersionRef>();
        assert_send_sync::<crate::Versions>();
        assert_send_sync::<crate::CfIter<'static>>();
        assert_send_sync::<crate::AllVersionsIter<'static>>();
        assert_send_sync::<crate::KeyVersions<'static>>();
    }
}
