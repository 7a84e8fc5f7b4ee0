//! [`AllVersionsIter`]: every key with every version, the walk a flush makes.

use bytes::Bytes;

use crate::arena_skiplist::{NodeRef, RecordRef};
use crate::version_chain::{BorrowedVersions, Versions};

/// Iterator over the keys of a [`crate::CfTable`] in ascending order, each with all its
/// versions newest first. Unlike [`crate::CfIter`] it applies no read ts: a flush writes every
/// version, and compaction later decides which ones the GC safe point drops.
///
/// Meant for a frozen memtable; on a table still being written it sees each key's chain as of
/// the moment it reaches the key.
pub struct AllVersionsIter<'a> {
    pending: Option<NodeRef<'a>>,
}

impl<'a> AllVersionsIter<'a> {
    pub(crate) fn new(first: Option<NodeRef<'a>>) -> Self {
        AllVersionsIter { pending: first }
    }
}

impl<'a> Iterator for AllVersionsIter<'a> {
    type Item = KeyVersions<'a>;

    fn next(&mut self) -> Option<KeyVersions<'a>> {
        // A node is published with its first version: every key has at least one.
        let node = self.pending.take()?;
        self.pending = node.next();
        Some(KeyVersions {
            node,
            newest: node.newest_ref(),
        })
    }
}

/// One key and its versions (newest first, as of when the iterator reached the key).
pub struct KeyVersions<'a> {
    node: NodeRef<'a>,
    /// The chain head when the iterator reached the key (borrowed: walking a table pays no
    /// reference count per key).
    newest: RecordRef<'a>,
}

impl<'a> KeyVersions<'a> {
    /// The user key.
    pub fn key(&self) -> &'a [u8] {
        self.node.key()
    }

    /// The user key as a zero-copy `Bytes` (it keeps the table's arena alive).
    pub fn key_bytes(&self) -> Bytes {
        self.node.key_bytes()
    }

    /// The key's versions, newest first, as owned handles. Never empty.
    pub fn versions(&self) -> Versions {
        Versions::starting_at(Some(self.node.to_owned_version(self.newest)))
    }

    /// The key's versions, newest first, borrowed from the table: no reference count per
    /// version, for walks that copy the bytes out (a flush, a snapshot transfer). Never empty.
    pub fn borrowed_versions(&self) -> BorrowedVersions<'a> {
        BorrowedVersions::starting_at(self.newest)
    }
}
