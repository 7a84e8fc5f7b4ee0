//! The versions of one user key, newest first, and the handles readers get to them.
//!
//! A key's versions are records in the table's arena (see the `arena_skiplist` module), linked
//! newest first from the key's node. A record is immutable once published: a put builds the new
//! record in fresh arena memory, pointing at the current newest, and publishes it by storing the
//! node's chain head. Readers never take a lock and walk a chain that cannot change under them.
//! The handles here hold the arena alive, which is why a returned version stays valid after the
//! memtable moves on (or is even dropped).

use std::fmt;

use bytes::Bytes;

use crate::arena_skiplist::{RecordRef, VersionPtr};

/// A cheap owned handle to one version of a key: a pointer into the table's arena plus a
/// reference count on the arena.
///
/// It stays valid for as long as it is held, whatever the writers or the memtable do meanwhile.
/// Holding it keeps the whole arena of its column family table allocated (the same goes for the
/// zero-copy `Bytes` from [`VersionRef::value_bytes`] and friends): copy out what must outlive a
/// flushed memtable by long.
#[derive(Clone)]
pub struct VersionRef(pub(crate) VersionPtr);

impl VersionRef {
    /// The version: a commit ts (WRITE CF) or a sequence, depending on the column family.
    pub fn version(&self) -> u64 {
        self.0.version()
    }

    /// Whether this version is a delete. A tombstone hides every older version of its key.
    pub fn is_tombstone(&self) -> bool {
        self.0.is_tombstone()
    }

    /// The user meta bytes (WRITE CF: start_ts + commit_ts).
    pub fn user_meta(&self) -> &[u8] {
        self.0.user_meta()
    }

    /// The value bytes; empty for a tombstone.
    pub fn value(&self) -> &[u8] {
        self.0.value()
    }

    /// The user meta as a zero-copy `Bytes` into the arena (keeping the arena alive).
    pub fn user_meta_bytes(&self) -> Bytes {
        self.0.user_meta_bytes()
    }

    /// The value as a zero-copy `Bytes` into the arena (keeping the arena alive).
    pub fn value_bytes(&self) -> Bytes {
        self.0.value_bytes()
    }

    /// Whether two handles point at the very same version record.
    pub fn ptr_eq(&self, other: &VersionRef) -> bool {
        self.0.ptr_eq(&other.0)
    }
}

impl fmt::Debug for VersionRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VersionRef")
            .field("version", &self.version())
            .field("tombstone", &self.is_tombstone())
            .field("user_meta", &self.user_meta())
            .field("value", &self.value())
            .finish()
    }
}

/// Iterator over the versions of one key, newest first, from the head it was created with.
/// Versions added after that are not seen; nothing it yields can disappear.
#[derive(Clone, Default)]
pub struct Versions {
    next: Option<VersionPtr>,
}

impl Versions {
    pub(crate) fn starting_at(newest: Option<VersionPtr>) -> Self {
        Versions { next: newest }
    }
}

impl Iterator for Versions {
    type Item = VersionRef;

    fn next(&mut self) -> Option<VersionRef> {
        let version = self.next.take()?;
        self.next = version.older();
        Some(VersionRef(version))
    }
}

/// One version of a key borrowed from its table (see [`crate::KeyVersions::borrowed_versions`]):
/// the same reads as [`VersionRef`], valid while the table is borrowed, with no reference count.
#[derive(Clone, Copy)]
pub struct BorrowedVersion<'a>(RecordRef<'a>);

impl<'a> BorrowedVersion<'a> {
    /// The version: a commit ts (WRITE CF) or a sequence, depending on the column family.
    pub fn version(&self) -> u64 {
        self.0.version()
    }

    /// Whether this version is a delete.
    pub fn is_tombstone(&self) -> bool {
        self.0.is_tombstone()
    }

    /// The user meta bytes.
    pub fn user_meta(&self) -> &'a [u8] {
        self.0.user_meta()
    }

    /// The value bytes; empty for a tombstone.
    pub fn value(&self) -> &'a [u8] {
        self.0.value()
    }
}

impl fmt::Debug for BorrowedVersion<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BorrowedVersion")
            .field("version", &self.version())
            .field("tombstone", &self.is_tombstone())
            .field("user_meta", &self.user_meta())
            .field("value", &self.value())
            .finish()
    }
}

/// Iterator over the borrowed versions of one key, newest first, from the head it was created
/// with.
#[derive(Clone)]
pub struct BorrowedVersions<'a> {
    next: Option<RecordRef<'a>>,
}

impl<'a> BorrowedVersions<'a> {
    pub(crate) fn starting_at(newest: RecordRef<'a>) -> Self {
        BorrowedVersions { next: Some(newest) }
    }
}

impl<'a> Iterator for BorrowedVersions<'a> {
    type Item = BorrowedVersion<'a>;

    fn next(&mut self) -> Option<BorrowedVersion<'a>> {
        let record = self.next.take()?;
        self.next = record.older();
        Some(BorrowedVersion(record))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arena_skiplist::{Pushed, SkipList};

    const KEY: &[u8] = b"key";

    fn push(list: &SkipList, version: u64, meta: &[u8], value: &[u8]) -> Pushed {
        list.insert(KEY, version, meta, value, false)
    }

    fn versions(list: &SkipList) -> Versions {
        Versions::starting_at(list.get(KEY).map(|node| node.newest()))
    }

    fn versions_of(list: &SkipList) -> Vec<u64> {
        versions(list).map(|v| v.version()).collect()
    }

    #[test]
    fn push_keeps_versions_newest_first_and_ignores_stale_ones() {
        let list = SkipList::new();
        assert_eq!(push(&list, 5, b"m", b"v5"), Pushed::First);
        assert_eq!(push(&list, 7, b"m", b"v7"), Pushed::Added);
        assert_eq!(push(&list, 7, b"m", b"again"), Pushed::Ignored);
        assert_eq!(push(&list, 6, b"m", b"older"), Pushed::Ignored);
        assert_eq!(versions_of(&list), [7, 5]);
        let node = list.get(KEY).expect("key inserted");
        assert_eq!(node.visible_at(6).map(|v| v.version()), Some(5));
        assert_eq!(node.visible_at(4).map(|v| v.version()), None);
    }

    #[test]
    fn meta_and_value_share_one_buffer_but_read_apart() {
        let list = SkipList::new();
        push(&list, 1, b"meta", b"value");
        let v = VersionRef(list.get(KEY).expect("pushed one version").newest());
        assert_eq!(v.user_meta(), b"meta");
        assert_eq!(v.value(), b"value");
        assert_eq!(v.user_meta_bytes(), &b"meta"[..]);
        assert_eq!(v.value_bytes(), &b"value"[..]);
        assert_eq!(
            v.value_bytes().as_ptr(),
            v.value().as_ptr(),
            "slice is zero-copy"
        );
        assert_eq!(
            v.user_meta().as_ptr_range().end,
            v.value().as_ptr(),
            "meta and value are one buffer"
        );
    }

    #[test]
    fn tombstone_reads_as_empty_value_whatever_value_was_passed() {
        let list = SkipList::new();
        list.insert(KEY, 1, b"m", b"ignored", true);
        let v = VersionRef(list.get(KEY).expect("tombstone inserted").newest());
        assert!(v.is_tombstone());
        assert_eq!((v.user_meta(), v.value()), (&b"m"[..], &b""[..]));
        assert!(v.value_bytes().is_empty());
    }

    #[test]
    fn dropping_a_very_long_chain_does_not_overflow_the_stack() {
        // A recursive drop needs well over 100 bytes of stack per version; 256 KiB of stack for
        // 200k versions only suffices if the drop is iterative (the arena frees chunks, never
        // walking chains).
        std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(|| {
                let list = SkipList::new();
                let count = if cfg!(miri) { 2_000 } else { 200_000 };
                for v in 1..=count {
                    push(&list, v, b"", b"");
                }
                let held = versions(&list);
                drop(list);
                drop(held);
            })
            .expect("spawn thread")
            .join()
            .expect("drop finished without overflowing");
    }

    #[test]
    fn borrowed_versions_read_the_same_chain_as_owned_handles() {
        let list = SkipList::new();
        push(&list, 1, b"m1", b"v1");
        push(&list, 3, b"m3", b"v3");
        list.insert(KEY, 4, b"m4", b"ignored", true);
        let node = list.get(KEY).expect("key inserted");
        let owned: Vec<_> = versions(&list)
            .map(|v| {
                (
                    v.version(),
                    v.is_tombstone(),
                    v.user_meta().to_vec(),
                    v.value().to_vec(),
                )
            })
            .collect();
        let borrowed: Vec<_> = BorrowedVersions::starting_at(node.newest_ref())
            .map(|v| {
                (
                    v.version(),
                    v.is_tombstone(),
                    v.user_meta().to_vec(),
                    v.value().to_vec(),
                )
            })
            .collect();
        assert_eq!(borrowed, owned);
        assert_eq!(borrowed.iter().map(|v| v.0).collect::<Vec<_>>(), [4, 3, 1]);
        assert_eq!(
            (&borrowed[0].2[..], &borrowed[0].3[..]),
            (&b"m4"[..], &b""[..])
        );
    }

    #[test]
    fn a_held_version_keeps_its_older_versions_readable_after_the_chain_is_dropped() {
        let list = SkipList::new();
        for v in 1..=3 {
            push(&list, v, b"m", format!("v{v}").as_bytes());
        }
        let held = versions(&list);
        let value = held.clone().next().expect("three versions").value_bytes();
        drop(list);
        let values: Vec<_> = held.map(|v| v.value().to_vec()).collect();
        assert_eq!(values, [b"v3".to_vec(), b"v2".to_vec(), b"v1".to_vec()]);
        assert_eq!(value, &b"v3"[..], "zero-copy bytes outlive the list too");
    }
}
