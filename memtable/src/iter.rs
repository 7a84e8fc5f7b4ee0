//! [`CfIter`]: the view of one column family at a read ts, in either direction.

use crate::arena_skiplist::{NodeRef, SkipList};
use crate::version_chain::VersionRef;

/// A cursor over the keys of a [`crate::CfTable`] that are visible at a read ts, each positioned
/// on its first version `<= ts`.
///
/// Keys whose versions are all newer than `ts` (or that have no version yet) are skipped in both
/// directions. Tombstones are yielded, flagged by [`VersionRef::is_tombstone`]: the engine's
/// merge with SSTs needs them to hide older versions there.
///
/// The cursor starts unpositioned; position it with a seek. Moving an unpositioned cursor with
/// [`CfIter::next`] or [`CfIter::prev`] leaves it unpositioned, so a scan that ran off one end
/// must seek again.
///
/// Writers may insert while the cursor moves: it never sees a torn version, the visible version
/// of the current key is fixed when the cursor lands on it, and keys inserted concurrently are
/// seen or not depending on timing (the engine reads at a ts below any in-flight write).
pub struct CfIter<'a> {
    list: &'a SkipList,
    ts: u64,
    current: Option<Position<'a>>,
}

struct Position<'a> {
    node: NodeRef<'a>,
    version: VersionRef,
}

impl<'a> CfIter<'a> {
    pub(crate) fn new(list: &'a SkipList, ts: u64) -> Self {
        CfIter {
            list,
            ts,
            current: None,
        }
    }

    /// The read ts this cursor sees the table at.
    pub fn ts(&self) -> u64 {
        self.ts
    }

    /// Positions on the first visible key `>= key`.
    pub fn seek(&mut self, key: &[u8]) {
        let start = self.list.seek_ge(key);
        self.current = self.settle_forward(start);
    }

    /// Positions on the last visible key `<= key`.
    pub fn seek_for_prev(&mut self, key: &[u8]) {
        let start = self.list.seek_le(key);
        self.current = self.settle_backward(start);
    }

    /// Positions on the first visible key.
    pub fn seek_to_first(&mut self) {
        let start = self.list.first();
        self.current = self.settle_forward(start);
    }

    /// Positions on the last visible key.
    pub fn seek_to_last(&mut self) {
        let start = self.list.last();
        self.current = self.settle_backward(start);
    }

    /// Moves to the next visible key; no effect when unpositioned.
    pub fn next(&mut self) {
        if let Some(pos) = self.current.take() {
            self.current = self.settle_forward(pos.node.next());
        }
    }

    /// Moves to the previous visible key; no effect when unpositioned.
    pub fn prev(&mut self) {
        if let Some(pos) = self.current.take() {
            self.current = self.settle_backward(pos.node.prev());
        }
    }

    /// Whether the cursor is on a key.
    pub fn valid(&self) -> bool {
        self.current.is_some()
    }

    /// The current key.
    ///
    /// # Panics
    /// If the cursor is not [`valid`](CfIter::valid): reading an unpositioned cursor is a bug in
    /// the caller.
    pub fn key(&self) -> &[u8] {
        self.position().node.key()
    }

    /// The current key as a zero-copy `Bytes`.
    ///
    /// # Panics
    /// If the cursor is not [`valid`](CfIter::valid).
    pub fn key_bytes(&self) -> bytes::Bytes {
        self.position().node.key_bytes()
    }

    /// The current key's first version `<= ts` (possibly a tombstone).
    ///
    /// # Panics
    /// If the cursor is not [`valid`](CfIter::valid).
    pub fn version(&self) -> &VersionRef {
        &self.position().version
    }

    fn position(&self) -> &Position<'a> {
        self.current
            .as_ref()
            .expect("CfIter read while not valid: seek first and check valid()")
    }

    /// From `entry` forward, the first key with a version `<= ts`.
    fn settle_forward(&self, mut node: Option<NodeRef<'a>>) -> Option<Position<'a>> {
        while let Some(n) = node {
            if let Some(version) = n.visible_at(self.ts) {
                return Some(Position {
                    node: n,
                    version: VersionRef(version),
                });
            }
            node = n.next();
        }
        None
    }

    /// From `entry` backward, the first key with a version `<= ts`.
    fn settle_backward(&self, mut node: Option<NodeRef<'a>>) -> Option<Position<'a>> {
        while let Some(n) = node {
            if let Some(version) = n.visible_at(self.ts) {
                return Some(Position {
                    node: n,
                    version: VersionRef(version),
                });
            }
            node = n.prev();
        }
        None
    }
}
