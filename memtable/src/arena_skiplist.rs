//! The arena skiplist behind a [`crate::CfTable`]: one node per user key, each with its version
//! chain, everything bump-allocated in an [`arena::Arena`] and linked by raw pointers.
//!
//! This is the only module of the crate with `unsafe` code. Its safe API is
//! [`SkipList`] (insert and the searches), [`NodeRef`] (a borrowed node), [`VersionPtr`] (an
//! owned handle to one version) and [`RecordRef`] (a borrowed one, for walks that must not pay
//! a reference count per version).
//!
//! # Layout
//!
//! A node, 8-aligned in the node region of the arena:
//!
//! ```text
//! newest: AtomicPtr<Record>        8 bytes, the key's newest version; never null once published
//! key_len: u32, height: u32        8 bytes
//! tower: [AtomicPtr<Node>; height] next node at each level, 1 <= height <= MAX_HEIGHT
//! key: [u8; key_len]
//! ```
//!
//! A version record, 8-aligned in the record region:
//!
//! ```text
//! version: u64
//! older: *const Record             the next older version of the key, null for the first
//! meta_len: u32, value_len: u32    value_len == u32::MAX marks a tombstone (whose value is empty)
//! meta: [u8; meta_len], value: [u8; value_len]
//! ```
//!
//! # Why it is sound
//!
//! * **Memory stays valid.** Chunks are freed only when the [`arena::Arena`] drops, and the arena
//!   is held in an `Arc` by the list and by every owned handle ([`VersionPtr`], the owners behind
//!   zero-copy `Bytes`). Borrowed handles ([`NodeRef`], [`RecordRef`]) borrow the list (or an
//!   owned handle). So whatever a pointer
//!   can be reached from, its memory is alive.
//! * **Nothing is read before it is written.** Writers are serialised by the list's mutex. A
//!   writer fully initialises a node or record in fresh arena memory that no one else can reach,
//!   then publishes it with a `Release` store (of a tower slot or of a node's `newest`). Readers
//!   reach nodes and records only through `Acquire` loads of those slots (or through `older`
//!   pointers of records so reached, which were written before the record's own publication), so
//!   every plain field they read happens-before their read.
//! * **Published memory is immutable except for atomics.** After publication a writer only
//!   stores to tower slots and `newest`, both atomics; keys, record headers and payloads never
//!   change. Readers may therefore hand out `&[u8]` into the arena.
//!
//! Pointers are derived with raw-pointer arithmetic from the chunk's base pointer, never from a
//! reference to a header, so they carry provenance over the whole chunk.

mod arena;

use std::cmp::Ordering as CmpOrdering;
use std::marker::PhantomData;
use std::mem::{align_of, size_of};
use std::ptr::{self, NonNull};
use std::slice;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;

use self::arena::{ALIGN, Arena, Region};

/// Most levels a node can have. With branching factor 4, 16 levels serve 4^16 keys before the
/// top level gets crowded.
pub(crate) const MAX_HEIGHT: usize = 16;

/// A node gets level `h + 1` with probability 1 / `BRANCHING` given level `h`.
const BRANCHING: u64 = 4;

/// Node heights with a region of their own (see `Writer::nodes`).
const NODE_REGIONS: usize = 4;

/// `value_len` of a tombstone.
const TOMBSTONE: u32 = u32::MAX;

#[repr(C)]
struct NodeHeader {
    newest: AtomicPtr<RecordHeader>,
    key_len: u32,
    height: u32,
}

#[repr(C)]
struct RecordHeader {
    version: u64,
    older: *const RecordHeader,
    meta_len: u32,
    value_len: u32,
}

type Link = AtomicPtr<NodeHeader>;

/// Bytes of a node header; the tower starts right after it.
pub(crate) const NODE_HEADER_SIZE: usize = size_of::<NodeHeader>();
/// Bytes of one tower slot.
pub(crate) const TOWER_SLOT_SIZE: usize = size_of::<Link>();
/// Bytes of a version record header; the user meta starts right after it.
pub(crate) const RECORD_HEADER_SIZE: usize = size_of::<RecordHeader>();
/// Alignment (and so the rounding) of every node and record.
pub(crate) const ARENA_ALIGN: usize = ALIGN;

const _: () = assert!(align_of::<NodeHeader>() <= ALIGN && align_of::<Link>() <= ALIGN);
const _: () = assert!(align_of::<RecordHeader>() <= ALIGN);
const _: () = assert!(NODE_HEADER_SIZE.is_multiple_of(align_of::<Link>()));

/// How a push changed the list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pushed {
    /// The version was not newer than the key's newest one; nothing changed.
    Ignored,
    /// The version became the newest of a key that already had versions.
    Added,
    /// The key was new: it became visible with this version.
    First,
}

/// The tower slot of `node` at `level`.
///
/// # Safety
/// `node` points to an initialised node (published, or being built by the writer) in an arena
/// that outlives `'a`, and `level` is below its height.
unsafe fn link<'a>(node: NonNull<NodeHeader>, level: usize) -> &'a Link {
    // SAFETY: by the caller's contract the node and its `height` slots are initialised; slot
    // `level` lies inside the node's allocation, is 8-aligned (the header size is a multiple of
    // the slot alignment and nodes are 8-aligned), and lives as long as the arena.
    unsafe {
        &*node
            .as_ptr()
            .cast::<u8>()
            .add(NODE_HEADER_SIZE + level * TOWER_SLOT_SIZE)
            .cast::<Link>()
    }
}

/// The key of `node`.
///
/// # Safety
/// `node` points to an initialised node in an arena that outlives `'a`.
unsafe fn node_key<'a>(node: NonNull<NodeHeader>) -> &'a [u8] {
    let header = node.as_ptr();
    // SAFETY: the header is initialised and its plain fields never change after the node is
    // built; the key bytes follow the tower, are initialised, and are never written again.
    unsafe {
        let (key_len, height) = ((*header).key_len as usize, (*header).height as usize);
        let key = header
            .cast::<u8>()
            .add(NODE_HEADER_SIZE + height * TOWER_SLOT_SIZE);
        slice::from_raw_parts(key, key_len)
    }
}

/// The chain head of `node`.
///
/// # Safety
/// As for [`node_key`].
unsafe fn node_newest<'a>(node: NonNull<NodeHeader>) -> &'a AtomicPtr<RecordHeader> {
    // SAFETY: the caller guarantees an initialised node that outlives `'a`; this borrows only
    // the `newest` field, an atomic.
    unsafe { &(*node.as_ptr()).newest }
}

/// Asks the CPU to start loading the cache line at `ptr`; never faults, whatever `ptr` is.
#[inline(always)]
fn prefetch<T>(ptr: *const T) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: a prefetch is a hint that never faults and has no effect on memory contents,
        // for any address; SSE is part of the x86_64 baseline.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(ptr.cast::<i8>()) };
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    let _ = ptr;
}

/// Byte-wise lexicographic order, as `<[u8]>::cmp`, comparing eight bytes at a time: keys
/// often share long prefixes, and this avoids a `memcmp` call per skiplist node.
#[inline]
fn key_cmp(a: &[u8], b: &[u8]) -> CmpOrdering {
    let common = a.len().min(b.len());
    let (mut a_words, mut b_words) = (a[..common].chunks_exact(8), b[..common].chunks_exact(8));
    for (x, y) in (&mut a_words).zip(&mut b_words) {
        let x = u64::from_be_bytes(x.try_into().expect("chunk of 8"));
        let y = u64::from_be_bytes(y.try_into().expect("chunk of 8"));
        if x != y {
            return x.cmp(&y);
        }
    }
    for (x, y) in a_words.remainder().iter().zip(b_words.remainder()) {
        if x != y {
            return x.cmp(y);
        }
    }
    a.len().cmp(&b.len())
}

/// Where [`SkipList::descend`] ended.
enum Descent {
    /// On a node whose key is the target.
    Found(NonNull<NodeHeader>),
    /// At level 0 between the last node (or the head) before the target and the first node
    /// after it, if any.
    Between(NonNull<NodeHeader>, Option<NonNull<NodeHeader>>),
}

/// The state only the (single, locked) writer touches.
struct Writer {
    /// Nodes by height: `nodes[h - 1]` holds height `h`, the last one all taller nodes too. A
    /// search visits only nodes of height > `level` at `level`, so keeping tall nodes apart
    /// packs the upper levels into few cache lines and pages (three quarters of all nodes have
    /// height 1, and each level up has a quarter as many).
    nodes: [Region; NODE_REGIONS],
    records: Region,
    /// xorshift64 state for node heights.
    rng: u64,
    /// Where the last new node went (as RocksDB's `Splice`): at each level, the last node (or
    /// the head) before it, the node itself below its height. It is always a valid descent
    /// path: `splice[l]` has more than `l` levels, `splice[l + 1]` is not after `splice[l]`,
    /// and the link of `splice[l + 1]` at `l + 1` points past `splice[l]`. So a key after
    /// `splice[0]` and before the node `splice[0]` links to at level 0 lies between the two
    /// at every level, and an insert there (a sorted load) needs no descent from the head.
    splice: [NonNull<NodeHeader>; MAX_HEIGHT],
}

impl Writer {
    fn random_height(&mut self) -> usize {
        let mut height = 1;
        while height < MAX_HEIGHT {
            self.rng ^= self.rng << 13;
            self.rng ^= self.rng >> 7;
            self.rng ^= self.rng << 17;
            if !self.rng.is_multiple_of(BRANCHING) {
                break;
            }
            height += 1;
        }
        height
    }

    /// A fully built, unpublished version record.
    fn new_record(
        &mut self,
        arena: &Arena,
        version: u64,
        older: *const RecordHeader,
        payload: &Payload<'_>,
    ) -> NonNull<RecordHeader> {
        let (meta, value) = (payload.meta, payload.value);
        let ptr = self
            .records
            .alloc(arena, RECORD_HEADER_SIZE + meta.len() + value.len());
        // SAFETY: `alloc` returned `RECORD_HEADER_SIZE + meta.len() + value.len()` fresh bytes,
        // 8-aligned (enough for the header), that nobody else can reach yet; the copies fill
        // exactly the bytes after the header, from slices that cannot overlap fresh memory.
        unsafe {
            ptr.cast::<RecordHeader>().write(RecordHeader {
                version,
                older,
                meta_len: payload.meta_len,
                value_len: payload.value_len,
            });
            let meta_at = ptr.as_ptr().add(RECORD_HEADER_SIZE);
            ptr::copy_nonoverlapping(meta.as_ptr(), meta_at, meta.len());
            ptr::copy_nonoverlapping(value.as_ptr(), meta_at.add(meta.len()), value.len());
        }
        ptr.cast()
    }

    /// A node for `key` with `height` levels whose tower is all null, not yet published.
    fn new_node(
        &mut self,
        arena: &Arena,
        key: &[u8],
        key_len: u32,
        height: usize,
        newest: NonNull<RecordHeader>,
    ) -> NonNull<NodeHeader> {
        let region = &mut self.nodes[height.min(NODE_REGIONS) - 1];
        let ptr = region.alloc_in_line(
            arena,
            NODE_HEADER_SIZE + height * TOWER_SLOT_SIZE + key.len(),
        );
        // SAFETY: `alloc` returned fresh, 8-aligned bytes for the header, `height` slots and the
        // key, reachable by no one else; each write below stays inside them.
        unsafe {
            ptr.cast::<NodeHeader>().write(NodeHeader {
                newest: AtomicPtr::new(newest.as_ptr()),
                key_len,
                height: height as u32,
            });
            let tower = ptr.as_ptr().add(NODE_HEADER_SIZE).cast::<Link>();
            for level in 0..height {
                tower.add(level).write(Link::new(ptr::null_mut()));
            }
            let key_at = ptr
                .as_ptr()
                .add(NODE_HEADER_SIZE + height * TOWER_SLOT_SIZE);
            ptr::copy_nonoverlapping(key.as_ptr(), key_at, key.len());
        }
        ptr.cast()
    }
}

/// A version's meta and value, with lengths checked to fit the record header.
struct Payload<'p> {
    meta: &'p [u8],
    value: &'p [u8],
    meta_len: u32,
    value_len: u32,
}

impl<'p> Payload<'p> {
    fn new(meta: &'p [u8], value: &'p [u8], tombstone: bool) -> Self {
        let meta_len = u32::try_from(meta.len()).expect("user meta longer than u32::MAX bytes");
        let (value, value_len) = if tombstone {
            (&[][..], TOMBSTONE)
        } else {
            match u32::try_from(value.len()) {
                Ok(len) if len != TOMBSTONE => (value, len),
                _ => panic!("value longer than u32::MAX - 1 bytes"),
            }
        };
        Payload {
            meta,
            value,
            meta_len,
            value_len,
        }
    }
}

/// A sorted map from user key to a newest-first chain of versions. Single writer at a time
/// (writers queue on a mutex), any number of lock-free readers.
pub(crate) struct SkipList {
    arena: Arc<Arena>,
    /// A node with `MAX_HEIGHT` levels, no key and no versions; never yielded.
    head: NonNull<NodeHeader>,
    /// Levels in use. Relaxed: a reader that sees a stale value starts lower, and levels above
    /// the ones linked are null in the head, so either way the search is correct.
    height: AtomicUsize,
    /// On its own cache lines: the writer dirties it on every put, and readers, which read the
    /// fields above on every search, must not miss the cache because of that.
    writer: CacheAligned<Mutex<Writer>>,
}

/// A value aligned (and so padded) to 128 bytes: two cache lines, as adjacent-line prefetchers
/// pull pairs of lines.
#[repr(align(128))]
struct CacheAligned<T>(T);

// SAFETY: the list shares its nodes between threads exactly as described in the module docs:
// published memory is immutable except for atomics, writers are serialised by `writer`, and
// `head` points into the list's own arena, which lives as long as the list. Nothing in it is
// tied to a thread.
unsafe impl Send for SkipList {}
// SAFETY: as for `Send`; every `&self` method is either a lock-free read or takes the mutex.
unsafe impl Sync for SkipList {}

impl Default for SkipList {
    fn default() -> Self {
        Self::new()
    }
}

impl SkipList {
    pub(crate) fn new() -> Self {
        let arena = Arc::new(Arena::new());
        let mut writer = Writer {
            nodes: std::array::from_fn(|_| Region::new()),
            records: Region::new(),
            rng: 0x9E37_79B9_7F4A_7C15,
            splice: [NonNull::dangling(); MAX_HEIGHT],
        };
        let ptr = writer.nodes[NODE_REGIONS - 1]
            .alloc(&arena, NODE_HEADER_SIZE + MAX_HEIGHT * TOWER_SLOT_SIZE);
        // SAFETY: fresh, 8-aligned memory sized for a header and `MAX_HEIGHT` slots; the list is
        // not shared yet, so these plain writes happen-before any reader (which gets the list
        // through whatever synchronisation shares it).
        let head = unsafe {
            ptr.cast::<NodeHeader>().write(NodeHeader {
                newest: AtomicPtr::new(ptr::null_mut()),
                key_len: 0,
                height: MAX_HEIGHT as u32,
            });
            let tower = ptr.as_ptr().add(NODE_HEADER_SIZE).cast::<Link>();
            for level in 0..MAX_HEIGHT {
                tower.add(level).write(Link::new(ptr::null_mut()));
            }
            ptr.cast::<NodeHeader>()
        };
        writer.splice = [head; MAX_HEIGHT];
        SkipList {
            arena,
            head,
            height: AtomicUsize::new(1),
            writer: CacheAligned(Mutex::new(writer)),
        }
    }

    /// Walks down from the head towards a target described by `order`, which says where a
    /// node's key lies relative to it: `Less` (walk past it), `Equal` (it is the target: stop
    /// and return it) or `Greater`. `order` must be monotone in key order.
    ///
    /// Unless it stops on the target, it fills `preds[level]` with the last node (or the head)
    /// passed at each level below the list's height, and returns the last node passed at level
    /// 0 and the node after it, if any.
    fn descend(
        &self,
        order: impl Fn(&[u8]) -> CmpOrdering,
        preds: &mut [NonNull<NodeHeader>; MAX_HEIGHT],
    ) -> Descent {
        let mut x = self.head;
        let mut level = self.height.load(Ordering::Relaxed) - 1;
        // The node that stopped the walk one level up: known to be after the target.
        let mut stop: *mut NodeHeader = ptr::null_mut();
        loop {
            // SAFETY: `x` is the head (height MAX_HEIGHT) or a node reached at a level >= `level`
            // through a tower link, so its height exceeds `level`; it is initialised and lives
            // in `self.arena`, which outlives `&self`.
            let next = unsafe { link(x, level) }.load(Ordering::Acquire);
            if level > 0 {
                // Where the walk goes if `next` stops it: start fetching that node now, so its
                // cache miss overlaps the one on `next`.
                // SAFETY: as above, `x` has a slot at `level - 1`.
                prefetch(unsafe { link(x, level - 1) }.load(Ordering::Relaxed));
            }
            if next != stop
                && let Some(n) = NonNull::new(next)
            {
                // SAFETY: `n` was published by a Release store this Acquire load read from.
                match order(unsafe { node_key(n) }) {
                    CmpOrdering::Less => {
                        x = n;
                        continue;
                    }
                    CmpOrdering::Equal => return Descent::Found(n),
                    CmpOrdering::Greater => {}
                }
            }
            preds[level] = x;
            if level == 0 {
                return Descent::Between(x, NonNull::new(next));
            }
            stop = next;
            level -= 1;
        }
    }

    /// Where `key` goes if it lies right after the last new node's level-0 predecessor in
    /// `splice` (see [`Writer::splice`]): then every level's predecessor is the splice's, and
    /// the answer costs two key comparisons instead of a descent. `None` when it lies
    /// elsewhere. Writer only (the caller holds the lock).
    fn after_splice(
        &self,
        splice: &[NonNull<NodeHeader>; MAX_HEIGHT],
        key: &[u8],
    ) -> Option<Descent> {
        let prev = splice[0];
        // SAFETY: splice nodes are the head or published nodes of this list with a level 0;
        // only the writer, whose lock the caller holds, stores links.
        unsafe {
            if prev != self.head && key_cmp(node_key(prev), key) != CmpOrdering::Less {
                return None;
            }
            let Some(next) = NonNull::new(link(prev, 0).load(Ordering::Relaxed)) else {
                return Some(Descent::Between(prev, None));
            };
            match key_cmp(node_key(next), key) {
                CmpOrdering::Greater => Some(Descent::Between(prev, Some(next))),
                CmpOrdering::Equal => Some(Descent::Found(next)),
                CmpOrdering::Less => None,
            }
        }
    }

    fn node(&self, ptr: NonNull<NodeHeader>) -> Option<NodeRef<'_>> {
        (ptr != self.head).then_some(NodeRef {
            list: self,
            node: ptr,
        })
    }

    /// Adds `version` to `key`'s chain, creating the key if needed, unless the key already has
    /// a version `>= version`. The value is ignored (stored empty) for a tombstone.
    ///
    /// # Panics
    /// If the key or the user meta is longer than `u32::MAX` bytes, or the value longer than
    /// `u32::MAX - 1`.
    pub(crate) fn insert(
        &self,
        key: &[u8],
        version: u64,
        meta: &[u8],
        value: &[u8],
        tombstone: bool,
    ) -> Pushed {
        let key_len = u32::try_from(key.len()).expect("key longer than u32::MAX bytes");
        let payload = Payload::new(meta, value, tombstone);
        // All checks that can panic are above: a panic while holding the lock would leave the
        // list consistent anyway (links are published last), so poisoning is ignored.
        let mut writer = self.writer.0.lock().unwrap_or_else(PoisonError::into_inner);
        let mut preds = writer.splice;
        let descent = match self.after_splice(&preds, key) {
            Some(d) => d,
            None => {
                preds = [self.head; MAX_HEIGHT];
                self.descend(|k| key_cmp(k, key), &mut preds)
            }
        };
        if let Descent::Found(node) = descent {
            // SAFETY: `node` is a published node of this list.
            let newest = unsafe { node_newest(node) };
            // Only writers store `newest`, and they hold the lock we hold.
            let head = newest.load(Ordering::Relaxed);
            // SAFETY: a published node's `newest` is never null and points to a published record.
            if unsafe { (*head).version } >= version {
                return Pushed::Ignored;
            }
            let record = writer.new_record(&self.arena, version, head, &payload);
            // Publishes the fully built record to readers, who load `newest` with Acquire.
            newest.store(record.as_ptr(), Ordering::Release);
            return Pushed::Added;
        }

        let height = writer.random_height();
        let current = self.height.load(Ordering::Relaxed);
        if height > current {
            // `preds` above `current` are already the head.
            self.height.store(height, Ordering::Relaxed);
        }
        let record = writer.new_record(&self.arena, version, ptr::null(), &payload);
        let node = writer.new_node(&self.arena, key, key_len, height, record);
        for (level, &pred) in preds.iter().enumerate().take(height) {
            // SAFETY: `pred` is the head or a node linked at `level`, so it has that level;
            // `node` was built above with `height > level` slots.
            let (pred_link, node_link) = unsafe { (link(pred, level), link(node, level)) };
            // The node is not reachable yet: a plain (Relaxed) store suffices for its own link.
            node_link.store(pred_link.load(Ordering::Relaxed), Ordering::Relaxed);
            // Publishes the node (and its first record) at this level; bottom level first, so
            // a reader that finds it at a higher level also finds it below.
            pred_link.store(node.as_ptr(), Ordering::Release);
        }
        // The new node's splice: itself below its height, its predecessors above.
        writer.splice = preds;
        writer.splice[..height].fill(node);
        Pushed::First
    }

    /// The node of `key`, if the key has been inserted.
    pub(crate) fn get(&self, key: &[u8]) -> Option<NodeRef<'_>> {
        let mut preds = [self.head; MAX_HEIGHT];
        match self.descend(|k| key_cmp(k, key), &mut preds) {
            Descent::Found(node) => self.node(node),
            Descent::Between(..) => None,
        }
    }

    /// The first node with a key `>= key`.
    pub(crate) fn seek_ge(&self, key: &[u8]) -> Option<NodeRef<'_>> {
        let mut preds = [self.head; MAX_HEIGHT];
        match self.descend(|k| key_cmp(k, key), &mut preds) {
            Descent::Found(node) => self.node(node),
            Descent::Between(_, next) => self.node(next?),
        }
    }

    /// The last node with a key `<= key`.
    pub(crate) fn seek_le(&self, key: &[u8]) -> Option<NodeRef<'_>> {
        let mut preds = [self.head; MAX_HEIGHT];
        match self.descend(|k| key_cmp(k, key), &mut preds) {
            Descent::Found(node) | Descent::Between(node, _) => self.node(node),
        }
    }

    /// The last node with a key `< key`.
    pub(crate) fn seek_lt(&self, key: &[u8]) -> Option<NodeRef<'_>> {
        let mut preds = [self.head; MAX_HEIGHT];
        // Never `Equal`: the walk must go on to the node before `key`.
        let order = |k: &[u8]| match key_cmp(k, key) {
            CmpOrdering::Less => CmpOrdering::Less,
            _ => CmpOrdering::Greater,
        };
        match self.descend(order, &mut preds) {
            Descent::Found(node) | Descent::Between(node, _) => self.node(node),
        }
    }

    /// The node with the smallest key.
    pub(crate) fn first(&self) -> Option<NodeRef<'_>> {
        // SAFETY: the head has every level and lives in our arena.
        let next = unsafe { link(self.head, 0) }.load(Ordering::Acquire);
        self.node(NonNull::new(next)?)
    }

    /// The node with the largest key.
    pub(crate) fn last(&self) -> Option<NodeRef<'_>> {
        let mut preds = [self.head; MAX_HEIGHT];
        match self.descend(|_| CmpOrdering::Less, &mut preds) {
            Descent::Found(node) | Descent::Between(node, _) => self.node(node),
        }
    }
}

/// A borrowed node of a [`SkipList`]: a key with at least one version.
#[derive(Clone, Copy)]
pub(crate) struct NodeRef<'a> {
    list: &'a SkipList,
    /// A published node of `list` (never its head).
    node: NonNull<NodeHeader>,
}

// SAFETY: a `NodeRef` is a shared borrow of the list plus a pointer to one of its published
// nodes, whose fields are immutable or atomic; it may move to and be shared by any thread, like
// `&SkipList` (which is `Send + Sync`).
unsafe impl Send for NodeRef<'_> {}
// SAFETY: as for `Send`.
unsafe impl Sync for NodeRef<'_> {}

impl<'a> NodeRef<'a> {
    /// The user key.
    pub(crate) fn key(self) -> &'a [u8] {
        // SAFETY: `node` is a published node of `list`, whose arena outlives `'a`.
        unsafe { node_key(self.node) }
    }

    /// The user key as a zero-copy `Bytes` that keeps the arena alive.
    pub(crate) fn key_bytes(self) -> Bytes {
        self.list.arena_bytes(self.key())
    }

    /// The next node in key order, at the time of the call.
    pub(crate) fn next(self) -> Option<NodeRef<'a>> {
        // SAFETY: every node has level 0; `node` is published in `list`'s arena.
        let next = unsafe { link(self.node, 0) }.load(Ordering::Acquire);
        Some(NodeRef {
            list: self.list,
            node: NonNull::new(next)?,
        })
    }

    /// The previous node in key order, at the time of the call (a search from the head).
    pub(crate) fn prev(self) -> Option<NodeRef<'a>> {
        self.list.seek_lt(self.key())
    }

    fn newest_record(self) -> NonNull<RecordHeader> {
        // SAFETY: `node` is a published node of `list`.
        let newest = unsafe { node_newest(self.node) }.load(Ordering::Acquire);
        NonNull::new(newest).expect("a published node has a version")
    }

    /// The newest version, borrowed from the list (no reference count).
    pub(crate) fn newest_ref(self) -> RecordRef<'a> {
        RecordRef {
            record: self.newest_record(),
            _arena: PhantomData,
        }
    }

    /// An owned handle to `record`, a version of this node's list.
    pub(crate) fn to_owned_version(self, record: RecordRef<'a>) -> VersionPtr {
        VersionPtr {
            arena: Arc::clone(&self.list.arena),
            record: record.record,
        }
    }

    /// The newest version.
    pub(crate) fn newest(self) -> VersionPtr {
        VersionPtr {
            arena: Arc::clone(&self.list.arena),
            record: self.newest_record(),
        }
    }

    /// The first (newest) version `<= ts`, if any.
    pub(crate) fn visible_at(self, ts: u64) -> Option<VersionPtr> {
        let mut record = self.newest_record().as_ptr().cast_const();
        while let Some(r) = NonNull::new(record.cast_mut()) {
            // SAFETY: `r` is the chain head loaded with Acquire or an `older` pointer of a record
            // so reached: a published, immutable record in `list`'s arena (see module docs).
            let header = unsafe { r.as_ref() };
            if header.version <= ts {
                return Some(VersionPtr {
                    arena: Arc::clone(&self.list.arena),
                    record: r,
                });
            }
            record = header.older;
        }
        None
    }
}

impl SkipList {
    /// A zero-copy `Bytes` over `bytes`, which must lie in this list's arena.
    fn arena_bytes(&self, bytes: &[u8]) -> Bytes {
        arena_bytes(&self.arena, bytes)
    }
}

/// `bytes` (which lie in `arena`, in published memory) as a `Bytes` that keeps `arena` alive.
fn arena_bytes(arena: &Arc<Arena>, bytes: &[u8]) -> Bytes {
    if bytes.is_empty() {
        return Bytes::new();
    }
    Bytes::from_owner(ArenaSlice {
        _arena: Arc::clone(arena),
        ptr: NonNull::from(bytes).cast(),
        len: bytes.len(),
    })
}

/// Owner of a zero-copy `Bytes` into an arena.
struct ArenaSlice {
    _arena: Arc<Arena>,
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the slice is immutable published arena memory kept alive by `_arena`; reading it from
// any thread is fine.
unsafe impl Send for ArenaSlice {}
// SAFETY: as for `Send`.
unsafe impl Sync for ArenaSlice {}

impl AsRef<[u8]> for ArenaSlice {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `ptr..ptr + len` was a `&[u8]` into published, never-again-written arena
        // memory, and `_arena` keeps that memory allocated for as long as `self` lives.
        unsafe { slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

/// An owned handle to one published version record; keeps the arena alive.
#[derive(Clone)]
pub(crate) struct VersionPtr {
    arena: Arc<Arena>,
    record: NonNull<RecordHeader>,
}

// SAFETY: the record is immutable published memory in `arena`, which this handle keeps alive;
// the `Arc` is `Send + Sync`.
unsafe impl Send for VersionPtr {}
// SAFETY: as for `Send`.
unsafe impl Sync for VersionPtr {}

impl VersionPtr {
    /// The record, borrowed for as long as this handle (which keeps the arena alive).
    fn borrowed(&self) -> RecordRef<'_> {
        RecordRef {
            record: self.record,
            _arena: PhantomData,
        }
    }

    pub(crate) fn version(&self) -> u64 {
        self.borrowed().version()
    }

    pub(crate) fn is_tombstone(&self) -> bool {
        self.borrowed().is_tombstone()
    }

    pub(crate) fn user_meta(&self) -> &[u8] {
        self.borrowed().user_meta()
    }

    pub(crate) fn value(&self) -> &[u8] {
        self.borrowed().value()
    }

    pub(crate) fn user_meta_bytes(&self) -> Bytes {
        arena_bytes(&self.arena, self.user_meta())
    }

    pub(crate) fn value_bytes(&self) -> Bytes {
        arena_bytes(&self.arena, self.value())
    }

    /// The next older version of the same key.
    pub(crate) fn older(&self) -> Option<VersionPtr> {
        Some(VersionPtr {
            arena: Arc::clone(&self.arena),
            record: self.borrowed().older()?.record,
        })
    }

    pub(crate) fn ptr_eq(&self, other: &VersionPtr) -> bool {
        self.record == other.record
    }
}

/// A borrowed handle to one published version record: what [`VersionPtr`] reads, without the
/// reference count. Valid for `'a`, a borrow of something that keeps the record's arena alive
/// (the list, through a [`NodeRef`], or a [`VersionPtr`]).
#[derive(Clone, Copy)]
pub(crate) struct RecordRef<'a> {
    record: NonNull<RecordHeader>,
    _arena: PhantomData<&'a Arena>,
}

// SAFETY: the record is immutable published memory whose arena outlives `'a`; reading it from
// any thread is fine, as for `NodeRef`.
unsafe impl Send for RecordRef<'_> {}
// SAFETY: as for `Send`.
unsafe impl Sync for RecordRef<'_> {}

impl<'a> RecordRef<'a> {
    fn header(self) -> &'a RecordHeader {
        // SAFETY: `record` is a published record (reached through an `Acquire` load of a
        // node's `newest` or through `older` links of such records) in an arena kept alive for
        // `'a` by the borrow this handle was made from; published headers never change.
        unsafe { self.record.as_ref() }
    }

    /// Meta followed by value, as one slice, and the meta's length.
    fn payload(self) -> (&'a [u8], usize) {
        let header = self.header();
        let meta_len = header.meta_len as usize;
        let value_len = match header.value_len {
            TOMBSTONE => 0,
            len => len as usize,
        };
        // SAFETY: the writer copied `meta_len + value_len` bytes right after the header before
        // publishing the record; they are never written again and live as long as the arena,
        // which outlives `'a`.
        let payload = unsafe {
            slice::from_raw_parts(
                self.record.as_ptr().cast::<u8>().add(RECORD_HEADER_SIZE),
                meta_len + value_len,
            )
        };
        (payload, meta_len)
    }

    pub(crate) fn version(self) -> u64 {
        self.header().version
    }

    pub(crate) fn is_tombstone(self) -> bool {
        self.header().value_len == TOMBSTONE
    }

    pub(crate) fn user_meta(self) -> &'a [u8] {
        let (payload, meta_len) = self.payload();
        &payload[..meta_len]
    }

    pub(crate) fn value(self) -> &'a [u8] {
        let (payload, meta_len) = self.payload();
        &payload[meta_len..]
    }

    /// The next older version of the same key (same arena, same lifetime).
    pub(crate) fn older(self) -> Option<RecordRef<'a>> {
        Some(RecordRef {
            record: NonNull::new(self.header().older.cast_mut())?,
            _arena: PhantomData,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::atomic::AtomicBool;
    use std::thread;

    use proptest::prelude::*;

    use super::*;

    /// What a version looks like to the tests: (version, meta, value, tombstone).
    type Seen = (u64, Vec<u8>, Vec<u8>, bool);

    fn seen(v: &VersionPtr) -> Seen {
        (
            v.version(),
            v.user_meta().to_vec(),
            v.value().to_vec(),
            v.is_tombstone(),
        )
    }

    fn chain(node: NodeRef<'_>) -> Vec<Seen> {
        let mut out = Vec::new();
        let mut next = Some(node.newest());
        while let Some(v) = next {
            out.push(seen(&v));
            next = v.older();
        }
        out
    }

    /// Keys over a tiny alphabet, up to 19 bytes: they collide, are prefixes of each other,
    /// and cross the 8-byte word boundaries of `key_cmp`.
    fn key() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            prop::collection::vec(prop::sample::select(vec![0u8, 1, b'a', 0xff]), 0..4),
            prop::collection::vec(prop::sample::select(vec![0u8, 1, b'a', 0xff]), 7..20),
        ]
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert {
            key: Vec<u8>,
            version: u64,
            meta: Vec<u8>,
            value: Vec<u8>,
            tombstone: bool,
        },
        Get(Vec<u8>),
        SeekGe(Vec<u8>),
        SeekLe(Vec<u8>),
        SeekLt(Vec<u8>),
        FirstAndLast,
    }

    fn op() -> impl Strategy<Value = Op> {
        let bytes = || prop::collection::vec(any::<u8>(), 0..12);
        prop_oneof![
            4 => (key(), 0..8u64, bytes(), bytes(), any::<bool>()).prop_map(
                |(key, version, meta, value, tombstone)| Op::Insert { key, version, meta, value, tombstone }
            ),
            1 => key().prop_map(Op::Get),
            1 => key().prop_map(Op::SeekGe),
            1 => key().prop_map(Op::SeekLe),
            1 => key().prop_map(Op::SeekLt),
            1 => Just(Op::FirstAndLast),
        ]
    }

    /// The oracle: key → its versions, newest first.
    type Model = BTreeMap<Vec<u8>, Vec<Seen>>;

    fn key_of(node: Option<NodeRef<'_>>) -> Option<Vec<u8>> {
        node.map(|n| n.key().to_vec())
    }

    fn check(list: &SkipList, model: &mut Model, op: &Op) -> Result<(), TestCaseError> {
        match op {
            Op::Insert {
                key,
                version,
                meta,
                value,
                tombstone,
            } => {
                let versions = model.entry(key.clone()).or_default();
                let expected = match versions.first() {
                    None => Pushed::First,
                    Some(newest) if newest.0 >= *version => Pushed::Ignored,
                    Some(_) => Pushed::Added,
                };
                if expected != Pushed::Ignored {
                    let value = if *tombstone {
                        Vec::new()
                    } else {
                        value.clone()
                    };
                    versions.insert(0, (*version, meta.clone(), value, *tombstone));
                }
                let got = list.insert(key, *version, meta, value, *tombstone);
                prop_assert_eq!(got, expected);
            }
            Op::Get(key) => {
                let got = list.get(key).map(chain);
                prop_assert_eq!(got.as_ref(), model.get(key));
                // A version visible at each ts is the first one <= ts.
                if let Some(node) = list.get(key) {
                    for ts in 0..9 {
                        let got = node.visible_at(ts).map(|v| seen(&v));
                        let expected = model[key].iter().find(|v| v.0 <= ts).cloned();
                        prop_assert_eq!(got, expected, "visible_at ts={}", ts);
                    }
                }
            }
            Op::SeekGe(key) => {
                let expected = model.range(key.clone()..).next().map(|(k, _)| k.clone());
                prop_assert_eq!(key_of(list.seek_ge(key)), expected);
            }
            Op::SeekLe(key) => {
                let expected = model
                    .range(..=key.clone())
                    .next_back()
                    .map(|(k, _)| k.clone());
                prop_assert_eq!(key_of(list.seek_le(key)), expected);
            }
            Op::SeekLt(key) => {
                let expected = model
                    .range(..key.clone())
                    .next_back()
                    .map(|(k, _)| k.clone());
                prop_assert_eq!(key_of(list.seek_lt(key)), expected);
            }
            Op::FirstAndLast => {
                prop_assert_eq!(key_of(list.first()), model.keys().next().cloned());
                prop_assert_eq!(key_of(list.last()), model.keys().next_back().cloned());
            }
        }
        Ok(())
    }

    /// The whole list, walked forward with `next` and backward with `prev`.
    fn check_walks(list: &SkipList, model: &Model) -> Result<(), TestCaseError> {
        let expected: Vec<(Vec<u8>, Vec<Seen>)> =
            model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        let mut forward = Vec::new();
        let mut node = list.first();
        while let Some(n) = node {
            forward.push((n.key().to_vec(), chain(n)));
            node = n.next();
        }
        prop_assert_eq!(&forward, &expected);
        let mut backward = Vec::new();
        let mut node = list.last();
        while let Some(n) = node {
            backward.push(n.key().to_vec());
            node = n.prev();
        }
        backward.reverse();
        let keys: Vec<Vec<u8>> = model.keys().cloned().collect();
        prop_assert_eq!(backward, keys);
        Ok(())
    }

    /// Every level, walked through its links from the head: keys strictly ascending, every
    /// node tall enough for the level, and the level's keys among the level below's.
    fn check_levels(list: &SkipList) -> Result<(), TestCaseError> {
        let mut below: Option<Vec<Vec<u8>>> = None;
        for level in 0..MAX_HEIGHT {
            let mut keys: Vec<Vec<u8>> = Vec::new();
            // SAFETY: the head and every node linked at `level` have a slot there; the list is
            // not written while the test walks it.
            let mut next = unsafe { link(list.head, level) }.load(Ordering::Acquire);
            while let Some(n) = NonNull::new(next) {
                // SAFETY: `n` was published at `level` by a Release store this walk read.
                let (key, height) = unsafe { (node_key(n).to_vec(), (*n.as_ptr()).height) };
                prop_assert!(
                    height as usize > level,
                    "a node of height {} on level {}",
                    height,
                    level
                );
                if let Some(last) = keys.last() {
                    prop_assert!(
                        last < &key,
                        "level {} not ascending: {:?} then {:?}",
                        level,
                        last,
                        key
                    );
                }
                keys.push(key);
                // SAFETY: `n` is linked at `level`, so it has a slot there.
                next = unsafe { link(n, level) }.load(Ordering::Acquire);
            }
            if let Some(below) = &below {
                let mut rest = below.iter();
                for k in &keys {
                    prop_assert!(
                        rest.any(|b| b == k),
                        "{:?} on level {} but not below it",
                        k,
                        level
                    );
                }
            }
            below = Some(keys);
        }
        Ok(())
    }

    fn cases(n: u32) -> ProptestConfig {
        // Miri runs everything a few thousand times slower.
        let cases = if cfg!(miri) { 4 } else { n };
        ProptestConfig {
            cases,
            failure_persistence: None,
            ..ProptestConfig::default()
        }
    }

    proptest! {
        #![proptest_config(cases(1000))]

        #[test]
        fn skiplist_matches_btreemap_model(ops in prop::collection::vec(op(), 1..120)) {
            let list = SkipList::new();
            let mut model = Model::new();
            for op in &ops {
                check(&list, &mut model, op)?;
            }
            check_walks(&list, &model)?;
            check_levels(&list)?;
        }

        /// Sorted runs take the splice path (no descent from the head) insert after insert;
        /// the single inserts between them land elsewhere, before or inside the last run, or
        /// on a key already there, so the splice must be left behind or found stale.
        #[test]
        fn sorted_runs_between_scattered_inserts_keep_every_level_sorted(
            runs in prop::collection::vec(
                (prop::collection::vec(key(), 0..40), key(), 0..8u64),
                1..8,
            ),
        ) {
            let list = SkipList::new();
            let mut model = Model::new();
            let insert = |key: &[u8], version| Op::Insert {
                key: key.to_vec(),
                version,
                meta: Vec::new(),
                value: vec![version as u8],
                tombstone: false,
            };
            for (mut run, scattered, version) in runs {
                run.sort();
                for key in &run {
                    check(&list, &mut model, &insert(key, version))?;
                }
                check(&list, &mut model, &insert(&scattered, version))?;
                check(&list, &mut model, &Op::SeekGe(scattered.clone()))?;
                check(&list, &mut model, &Op::SeekLt(scattered))?;
            }
            check_walks(&list, &model)?;
            check_levels(&list)?;
        }

        #[test]
        fn key_cmp_is_slice_order(a in key(), b in key()) {
            prop_assert_eq!(key_cmp(&a, &b), a.cmp(&b));
        }
    }

    proptest! {
        #![proptest_config(cases(48))]

        /// Readers walk, seek and get while one writer inserts: they only ever see keys in
        /// strict order, each key a real one with a chain of real versions newest first, and
        /// every insert the writer has announced as done.
        #[test]
        fn concurrent_readers_see_sorted_published_prefixes(
            keys in prop::collection::vec(key(), 1..150),
        ) {
            // Version `i + 1` goes to `keys[i]`; a key's versions are its positions, ascending.
            let list = SkipList::new();
            let done = AtomicUsize::new(0);
            let stop = AtomicBool::new(false);
            let value_of = |v: u64| v.to_le_bytes().repeat((v % 3) as usize);
            thread::scope(|s| {
                let readers: Vec<_> = (0..2)
                    .map(|r| {
                        let (list, done, stop, keys) = (&list, &done, &stop, &keys);
                        s.spawn(move || -> Result<(), TestCaseError> {
                            let mut round = r;
                            loop {
                                let finished = stop.load(Ordering::Acquire);
                                let published = done.load(Ordering::Acquire);
                                // Forward walk: strictly ascending, all versions real.
                                let mut prev: Option<&[u8]> = None;
                                let mut node = list.first();
                                let mut seen_keys = 0;
                                while let Some(n) = node {
                                    prop_assert!(prev.is_none_or(|p| p < n.key()), "order");
                                    let mut last = u64::MAX;
                                    for v in chain(n) {
                                        prop_assert!(v.0 < last, "chain not newest first");
                                        last = v.0;
                                        let i = (v.0 - 1) as usize;
                                        prop_assert_eq!(&keys[i], n.key(), "version under wrong key");
                                        prop_assert_eq!(&v.2, &value_of(v.0), "value");
                                    }
                                    prev = Some(n.key());
                                    seen_keys += 1;
                                    node = n.next();
                                }
                                // Everything announced is there, with at least that version.
                                let i = round % keys.len();
                                round += 1;
                                if i < published {
                                    let node = list.get(&keys[i]);
                                    prop_assert!(node.is_some(), "published key missing");
                                    let newest = node.map_or(0, |n| n.newest().version());
                                    prop_assert!(newest > i as u64, "published version missing");
                                    prop_assert_eq!(key_of(list.seek_ge(&keys[i])), Some(keys[i].clone()));
                                    prop_assert_eq!(key_of(list.seek_le(&keys[i])), Some(keys[i].clone()));
                                    if let Some(before) = list.seek_lt(&keys[i]) {
                                        prop_assert!(before.key() < keys[i].as_slice(), "seek_lt");
                                    }
                                }
                                if finished {
                                    let distinct: std::collections::BTreeSet<_> = keys.iter().collect();
                                    prop_assert_eq!(seen_keys, distinct.len(), "final walk");
                                    return Ok(());
                                }
                            }
                        })
                    })
                    .collect();
                for (i, key) in keys.iter().enumerate() {
                    let v = i as u64 + 1;
                    list.insert(key, v, b"m", &value_of(v), false);
                    done.store(i + 1, Ordering::Release);
                }
                stop.store(true, Ordering::Release);
                for reader in readers {
                    reader.join().expect("reader panicked")?;
                }
                Ok::<(), TestCaseError>(())
            })?;
        }
    }

    #[test]
    fn values_larger_than_a_chunk_get_their_own_and_read_back() {
        let list = SkipList::new();
        // Above the 1 MiB dedicated-chunk threshold; under Miri, which is slow, smaller but
        // still larger than the first chunks.
        let len = if cfg!(miri) { 20_000 } else { 5 << 20 };
        let big: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        let big = &big[..];
        list.insert(b"big", 1, b"meta", big, false);
        list.insert(b"small", 1, b"", b"after", false);
        let v = list.get(b"big").expect("inserted").newest();
        assert_eq!((v.user_meta(), v.value()), (&b"meta"[..], big));
        assert_eq!(
            list.get(b"small").expect("inserted").newest().value(),
            b"after"
        );
    }

    #[test]
    fn racing_writers_serialise_and_every_key_lands_once() {
        let list = SkipList::new();
        let per_writer = if cfg!(miri) { 30 } else { 3000 };
        thread::scope(|s| {
            for w in 0..3u64 {
                let list = &list;
                s.spawn(move || {
                    for i in 0..per_writer {
                        let key = format!("k{:05}", (i * 7 + w) % per_writer);
                        list.insert(key.as_bytes(), i * 3 + w + 1, b"", b"v", false);
                    }
                });
            }
        });
        let mut node = list.first();
        let mut count = 0;
        while let Some(n) = node {
            count += 1;
            node = n.next();
        }
        assert_eq!(count, per_writer);
    }
}
