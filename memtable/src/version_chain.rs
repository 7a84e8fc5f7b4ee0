//! The versions of one user key: an immutable linked list, newest first, whose head is swapped
//! atomically.
//!
//! Every node is immutable once published. A put builds a new node pointing at the current head
//! and installs it with a compare-and-swap on the head, so readers never see a half-built node
//! and never take a lock: they load the head (an `Arc` clone or an arc-swap guard) and walk
//! `next` pointers that cannot change under them. Old nodes stay alive as long as anyone holds a
//! [`VersionRef`] into them, which is why a returned version stays valid after the memtable
//! moves on (or is even dropped).

use std::fmt;
use std::ptr;
use std::sync::Arc;

use arc_swap::{ArcSwapOption, Guard};
use bytes::Bytes;

/// One version of a key. Immutable after it is published in a chain.
pub(crate) struct VersionNode {
    version: u64,
    tombstone: bool,
    /// `payload[..meta_len]` is the user meta, `payload[meta_len..]` the value. One buffer for
    /// both keeps a put at two allocations (this node and the payload), and lets the accessors
    /// hand out zero-copy `Bytes` slices (the first such slice turns the buffer into a shared
    /// one, a small one-off allocation; plain `&[u8]` reads never do).
    meta_len: usize,
    payload: Bytes,
    /// The next older version of the same key.
    next: Option<Arc<VersionNode>>,
}

impl VersionNode {
    fn new(version: u64, user_meta: &[u8], value: &[u8], tombstone: bool) -> Self {
        // Exact capacity so `Bytes::from` takes the buffer over without reallocating.
        let mut buf = Vec::with_capacity(user_meta.len() + value.len());
        buf.extend_from_slice(user_meta);
        buf.extend_from_slice(value);
        VersionNode {
            version,
            tombstone,
            meta_len: user_meta.len(),
            payload: Bytes::from(buf),
            next: None,
        }
    }
}

impl Drop for VersionNode {
    /// Drops the older part of the chain iteratively. The derived drop would recurse once per
    /// version, and a hot key with a few hundred thousand versions would overflow the stack.
    /// `Arc::into_inner` (unlike `try_unwrap`) guarantees that when several threads drop the last
    /// references at once, exactly one of them takes the node over, so nothing leaks.
    fn drop(&mut self) {
        let mut next = self.next.take();
        while let Some(node) = next {
            next = match Arc::into_inner(node) {
                // `older` is dropped at the end of this arm with `next == None`: no recursion.
                Some(mut older) => older.next.take(),
                // Someone else still holds the rest of the chain; they will free it.
                None => None,
            };
        }
    }
}

/// A cheap owned handle to one version of a key (an `Arc` to its chain node).
///
/// It stays valid for as long as it is held, whatever the writers or the memtable do meanwhile.
#[derive(Clone)]
pub struct VersionRef(Arc<VersionNode>);

impl VersionRef {
    /// The version: a commit ts (WRITE CF) or a sequence, depending on the column family.
    pub fn version(&self) -> u64 {
        self.0.version
    }

    /// Whether this version is a delete. A tombstone hides every older version of its key.
    pub fn is_tombstone(&self) -> bool {
        self.0.tombstone
    }

    /// The user meta bytes (WRITE CF: start_ts + commit_ts).
    pub fn user_meta(&self) -> &[u8] {
        &self.0.payload[..self.0.meta_len]
    }

    /// The value bytes; empty for a tombstone.
    pub fn value(&self) -> &[u8] {
        &self.0.payload[self.0.meta_len..]
    }

    /// The user meta as a zero-copy `Bytes` that shares the version's buffer.
    pub fn user_meta_bytes(&self) -> Bytes {
        self.0.payload.slice(..self.0.meta_len)
    }

    /// The value as a zero-copy `Bytes` that shares the version's buffer.
    pub fn value_bytes(&self) -> Bytes {
        self.0.payload.slice(self.0.meta_len..)
    }

    /// Whether two handles point at the very same chain node.
    pub fn ptr_eq(&self, other: &VersionRef) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
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
    next: Option<Arc<VersionNode>>,
}

impl Iterator for Versions {
    type Item = VersionRef;

    fn next(&mut self) -> Option<VersionRef> {
        let node = self.next.take()?;
        self.next = node.next.clone();
        Some(VersionRef(node))
    }
}

/// How a push changed the chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pushed {
    /// The version was not newer than the newest one; the chain is unchanged.
    Ignored,
    /// The version became the new head of a chain that already had versions.
    Added,
    /// The version is the first of the key: the key became visible with this push.
    First,
}

/// The head of one key's version chain, stored as the value of the key's skiplist node.
///
/// Empty only between the moment a writer inserts a new key into the skiplist and the moment it
/// installs the first version; readers treat an empty chain like a key that is not there.
#[derive(Default)]
pub(crate) struct VersionChain {
    head: ArcSwapOption<VersionNode>,
}

fn raw(node: &Option<Arc<VersionNode>>) -> *const VersionNode {
    node.as_ref().map_or(ptr::null(), Arc::as_ptr)
}

impl VersionChain {
    /// Makes `version` the newest version of the key, unless the chain already holds a version
    /// `>= version`.
    ///
    /// Safe under concurrent pushes: the head is replaced by compare-and-swap only if it is still
    /// the head the new node points at; on a lost race the node is re-linked to the new head and
    /// the staleness check runs again. The chain therefore stays strictly descending and no
    /// accepted version is ever lost.
    pub(crate) fn push(
        &self,
        version: u64,
        user_meta: &[u8],
        value: &[u8],
        tombstone: bool,
    ) -> Pushed {
        let mut current = self.head.load_full();
        if current.as_ref().is_some_and(|h| h.version >= version) {
            return Pushed::Ignored;
        }
        let mut node = VersionNode::new(version, user_meta, value, tombstone);
        node.next = current.clone();
        let mut node = Arc::new(node);
        loop {
            let previous = self
                .head
                .compare_and_swap(&current, Some(Arc::clone(&node)));
            if raw(&previous) == raw(&current) {
                return if current.is_none() {
                    Pushed::First
                } else {
                    Pushed::Added
                };
            }
            // Lost a race with another writer: retry on top of its head.
            current = Guard::into_inner(previous);
            if current.as_ref().is_some_and(|h| h.version >= version) {
                return Pushed::Ignored;
            }
            match Arc::get_mut(&mut node) {
                // The clone handed to the failed CAS is dropped, so the node is ours again.
                Some(unpublished) => unpublished.next = current.clone(),
                // Not expected, but a fresh node is always correct.
                None => {
                    node = Arc::new(VersionNode {
                        version,
                        tombstone,
                        meta_len: node.meta_len,
                        payload: node.payload.clone(),
                        next: current.clone(),
                    })
                }
            }
        }
    }

    /// The newest version, if any.
    pub(crate) fn newest(&self) -> Option<VersionRef> {
        self.head.load_full().map(VersionRef)
    }

    /// The first (newest) version `<= ts`, if any.
    pub(crate) fn visible_at(&self, ts: u64) -> Option<VersionRef> {
        // A short-lived guard avoids touching the reference counts of the versions walked over.
        let head = self.head.load();
        let mut node = head.as_ref();
        while let Some(n) = node {
            if n.version <= ts {
                return Some(VersionRef(Arc::clone(n)));
            }
            node = n.next.as_ref();
        }
        None
    }

    /// All versions, newest first, as of now.
    pub(crate) fn versions(&self) -> Versions {
        Versions {
            next: self.head.load_full(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.head.load().is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn versions_of(chain: &VersionChain) -> Vec<u64> {
        chain.versions().map(|v| v.version()).collect()
    }

    #[test]
    fn push_keeps_versions_newest_first_and_ignores_stale_ones() {
        let chain = VersionChain::default();
        assert_eq!(chain.push(5, b"m", b"v5", false), Pushed::First);
        assert_eq!(chain.push(7, b"m", b"v7", false), Pushed::Added);
        assert_eq!(chain.push(7, b"m", b"again", false), Pushed::Ignored);
        assert_eq!(chain.push(6, b"m", b"older", false), Pushed::Ignored);
        assert_eq!(versions_of(&chain), [7, 5]);
        assert_eq!(chain.visible_at(6).map(|v| v.version()), Some(5));
        assert_eq!(chain.visible_at(4).map(|v| v.version()), None);
    }

    #[test]
    fn meta_and_value_share_one_buffer_but_read_apart() {
        let chain = VersionChain::default();
        chain.push(1, b"meta", b"value", false);
        let v = chain.newest().expect("pushed one version");
        assert_eq!(v.user_meta(), b"meta");
        assert_eq!(v.value(), b"value");
        assert_eq!(v.user_meta_bytes(), &b"meta"[..]);
        assert_eq!(v.value_bytes(), &b"value"[..]);
        assert_eq!(
            v.value_bytes().as_ptr(),
            v.value().as_ptr(),
            "slice is zero-copy"
        );
    }

    #[test]
    fn dropping_a_very_long_chain_does_not_overflow_the_stack() {
        // A recursive drop needs well over 100 bytes of stack per version; 256 KiB of stack for
        // 200k versions only suffices if the drop is iterative.
        std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(|| {
                let chain = VersionChain::default();
                for v in 1..=200_000 {
                    chain.push(v, b"", b"", false);
                }
                drop(chain);
            })
            .expect("spawn thread")
            .join()
            .expect("drop finished without overflowing");
    }

    #[test]
    fn a_held_version_keeps_its_older_versions_readable_after_the_chain_is_dropped() {
        let chain = VersionChain::default();
        for v in 1..=3 {
            chain.push(v, b"m", format!("v{v}").as_bytes(), false);
        }
        let held = chain.versions();
        drop(chain);
        let values: Vec<_> = held.map(|v| v.value().to_vec()).collect();
        assert_eq!(values, [b"v3".to_vec(), b"v2".to_vec(), b"v1".to_vec()]);
    }
}
