//! [`AllVersionsIter`]: every key with every version, the walk a flush makes.

use std::ops::Bound;

use bytes::Bytes;
use crossbeam_skiplist::map::Entry;

use crate::cf_table::KeyMap;
use crate::version_chain::{VersionChain, Versions};

/// Iterator over the keys of a [`crate::CfTable`] in ascending order, each with all its
/// versions newest first. Unlike [`crate::CfIter`] it applies no read ts: a flush writes every
/// version, and compaction later decides which ones the GC safe point drops.
///
/// Meant for a frozen memtable; on a table still being written it sees each key's chain as of
/// the moment it reaches the key.
pub struct AllVersionsIter<'a> {
    pending: Option<Entry<'a, Bytes, VersionChain>>,
}

impl<'a> AllVersionsIter<'a> {
    pub(crate) fn new(map: &'a KeyMap, start: Bound<&[u8]>) -> Self {
        AllVersionsIter {
            pending: map.lower_bound(start),
        }
    }
}

impl<'a> Iterator for AllVersionsIter<'a> {
    type Item = KeyVersions<'a>;

    fn next(&mut self) -> Option<KeyVersions<'a>> {
        loop {
            let entry = self.pending.take()?;
            self.pending = entry.next();
            // An empty chain is a key whose first put is still in flight: not there yet.
            if !entry.value().is_empty() {
                let versions = entry.value().versions();
                return Some(KeyVersions { entry, versions });
            }
        }
    }
}

/// One key and its versions (newest first, as of when the iterator reached the key).
pub struct KeyVersions<'a> {
    entry: Entry<'a, Bytes, VersionChain>,
    versions: Versions,
}

impl KeyVersions<'_> {
    /// The user key.
    pub fn key(&self) -> &[u8] {
        self.entry.key()
    }

    /// The user key as a zero-copy `Bytes`.
    pub fn key_bytes(&self) -> Bytes {
        self.entry.key().clone()
    }

    /// The key's versions, newest first. Never empty.
    pub fn versions(&self) -> Versions {
        self.versions.clone()
    }
}
