//! [`ShipBuffers`]: a bounded pool of the buffers memtable data is written into.
//!
//! A transfer of a whole memtable writes tens of MB into one buffer. Allocated fresh each time,
//! every page of it is zeroed by the kernel on its first write: with the huge-page hint below
//! that zeroing was still half of `to_remote` in `stratus-bench txn-snapshot` (perf:
//! `clear_page_erms`). A server ships snapshots again and again, and a blob is dropped once its
//! offload is done (sent, retried, or answered), so the buffer of one transfer can serve the
//! next with its pages already resident: a [`MemtableDataWriter`] takes a buffer from the pool
//! and the blob it finishes hands the buffer back when its last reference is dropped. The
//! receiving side does the same with the arenas it rebuilds keys and metas into
//! (`kvengine/src/remote_rows.rs`): a worker rebuilds snapshots again and again.
//!
//! **Bounds.** Only a buffer of at least [`MIN_POOLED`] bytes of capacity is pooled (smaller
//! ones come from the allocator's heap, whose pages are reused anyway). The pool keeps at most
//! `max_buffers` idle buffers, and **owns** at most `max_bytes` of capacity: its idle buffers
//! and the ones it lent out, which stay counted until they come back (a small transfer may
//! hold a large, fully resident buffer meanwhile: without this count, the pool could refill
//! behind it and hold twice its bound). A buffer handed back past either bound is freed, on
//! every path ([`PoolBuf`] hands itself back when dropped). So what the pool adds to a
//! process's memory is at most `max_bytes` (see [`SHIP_BUFFERS`] for the process's bounds;
//! a server and a worker set the byte bound from their `ship-buffer-pool-size`),
//! held while idle: that is the price of not zeroing it again (`stratus-bench txn-snapshot`
//! ends with 76 MiB more resident). Capacity is counted, not the pages touched, so the bound
//! holds whatever part of a buffer was written.
//!
//! A taken buffer is the smallest idle one with the capacity asked for (a small transfer does
//! not hold the largest buffer while a large one allocates anew), or a new allocation.
//!
//! [`MemtableDataWriter`]: crate::MemtableDataWriter

use std::ops::{Deref, DerefMut};
use std::sync::Mutex;

use bytes::Bytes;

/// A buffer below this capacity is never pooled.
pub const MIN_POOLED: usize = 1 << 20;

/// The pool's byte bound by default: one full transfer of a default 64 MiB memtable and the
/// receiver's arenas, or several smaller transfers.
pub const DEFAULT_MAX_BYTES: usize = 128 << 20;

/// The process's pool of memtable-data buffers: at most 4 idle buffers, and
/// [`DEFAULT_MAX_BYTES`] of buffers the pool owns (idle or lent out) unless the process sets
/// another bound ([`ShipBuffers::set_max_bytes`]: a server's and a worker's
/// `ship-buffer-pool-size`).
pub static SHIP_BUFFERS: ShipBuffers = ShipBuffers::new(4, DEFAULT_MAX_BYTES);

/// A bounded pool of byte buffers (see the module docs).
#[derive(Debug)]
pub struct ShipBuffers {
    state: Mutex<PoolState>,
    max_buffers: usize,
}

#[derive(Debug)]
struct PoolState {
    idle: Vec<Vec<u8>>,
    /// Capacity of every buffer the pool owns: the idle ones and those lent out, each counted
    /// with its capacity when the pool took it in.
    owned: usize,
    /// The bound on `owned` ([`ShipBuffers::set_max_bytes`] changes it).
    max_bytes: usize,
}

/// A snapshot of what a [`ShipBuffers`] holds ([`ShipBuffers::usage`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolUsage {
    /// Capacity of the idle buffers, kept for the next transfer.
    pub idle_bytes: usize,
    /// Capacity of the pool's buffers in use by a transfer.
    pub lent_bytes: usize,
    /// The bound on both together.
    pub max_bytes: usize,
}

impl PoolUsage {
    /// Capacity the pool owns: its idle buffers and those it lent out.
    pub fn owned_bytes(&self) -> usize {
        self.idle_bytes + self.lent_bytes
    }
}

/// A buffer from a [`ShipBuffers`]: a `Vec<u8>` (through `Deref`) that goes back to its pool
/// when dropped, on every path (a finished blob, or a writer abandoned on an error).
#[derive(Debug)]
pub struct PoolBuf {
    buf: Vec<u8>,
    /// The capacity the pool counts for this buffer, when the pool owns it (it came from the
    /// idle list); `None` for a new allocation.
    owned: Option<usize>,
    pool: &'static ShipBuffers,
}

impl Deref for PoolBuf {
    type Target = Vec<u8>;

    fn deref(&self) -> &Vec<u8> {
        &self.buf
    }
}

impl DerefMut for PoolBuf {
    fn deref_mut(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }
}

impl AsRef<[u8]> for PoolBuf {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for PoolBuf {
    fn drop(&mut self) {
        self.pool
            .give(std::mem::take(&mut self.buf), self.owned.take());
    }
}

impl PoolBuf {
    /// `self[start..]` as `Bytes` that hand the buffer back to its pool when the last
    /// reference is dropped.
    pub fn into_bytes(self, start: usize) -> Bytes {
        Bytes::from_owner(self).slice(start..)
    }
}

impl ShipBuffers {
    /// An empty pool that keeps at most `max_buffers` idle buffers and owns at most
    /// `max_bytes` of buffers, idle or lent out.
    pub const fn new(max_buffers: usize, max_bytes: usize) -> ShipBuffers {
        ShipBuffers {
            state: Mutex::new(PoolState {
                idle: Vec::new(),
                owned: 0,
                max_bytes,
            }),
            max_buffers,
        }
    }

    /// Sets the bound on the bytes the pool owns (idle or lent out). Idle buffers are freed,
    /// largest first, until the pool is within it; buffers lent out stay counted and are freed
    /// on their return while the pool is over it. `0` pools nothing: every transfer allocates
    /// its buffers anew (and the kernel zeroes their pages again).
    pub fn set_max_bytes(&self, max_bytes: usize) {
        let mut state = self.lock();
        state.max_bytes = max_bytes;
        while state.owned > max_bytes {
            let largest = state
                .idle
                .iter()
                .enumerate()
                .max_by_key(|(_, b)| b.capacity())
                .map(|(i, _)| i);
            let Some(i) = largest else { break };
            let freed = state.idle.swap_remove(i);
            state.owned -= freed.capacity();
        }
    }

    /// An empty buffer with room for at least `capacity` bytes: the smallest idle buffer that
    /// has it, or a new one.
    pub fn take(&'static self, capacity: usize) -> PoolBuf {
        if capacity >= MIN_POOLED {
            let mut state = self.lock();
            let fit = state
                .idle
                .iter()
                .enumerate()
                .filter(|(_, b)| b.capacity() >= capacity)
                .min_by_key(|(_, b)| b.capacity())
                .map(|(i, _)| i);
            if let Some(i) = fit {
                let buf = state.idle.swap_remove(i);
                let owned = Some(buf.capacity());
                return PoolBuf {
                    buf,
                    owned,
                    pool: self,
                };
            }
        }
        let mut buf = Vec::with_capacity(capacity);
        advise_huge_pages(&mut buf);
        PoolBuf {
            buf,
            owned: None,
            pool: self,
        }
    }

    /// Takes `buf` back (`owned`: what the pool counted for it, if it lent it out): kept,
    /// emptied, when it is large enough to pool and both bounds allow (a full idle list gives
    /// up its smallest buffer for a larger one); else freed.
    fn give(&self, mut buf: Vec<u8>, owned: Option<usize>) {
        let capacity = buf.capacity();
        if owned.is_none() && capacity < MIN_POOLED {
            // Neither the pool's nor poolable: no lock to take.
            return;
        }
        let mut state = self.lock();
        if let Some(counted) = owned {
            state.owned = state.owned.saturating_sub(counted);
        }
        if capacity < MIN_POOLED {
            return;
        }
        // With the idle list full, only a buffer larger than its smallest gets in, in its
        // place: small buffers must not keep out the large transfers the pool is for.
        let evict = if state.idle.len() >= self.max_buffers {
            let smallest = state
                .idle
                .iter()
                .enumerate()
                .min_by_key(|(_, b)| b.capacity())
                .map(|(i, b)| (i, b.capacity()));
            match smallest {
                Some((i, smaller)) if smaller < capacity => Some((i, smaller)),
                _ => return,
            }
        } else {
            None
        };
        let freed = evict.map_or(0, |(_, c)| c);
        if state.owned - freed + capacity > state.max_bytes {
            return;
        }
        if let Some((i, c)) = evict {
            state.idle.swap_remove(i);
            state.owned -= c;
        }
        buf.clear();
        state.owned += capacity;
        state.idle.push(buf);
    }

    /// What the pool holds now, read under one lock (so that idle and lent add up to what it
    /// owns even while transfers take and return buffers).
    pub fn usage(&self) -> PoolUsage {
        let state = self.lock();
        let idle: usize = state.idle.iter().map(Vec::capacity).sum();
        PoolUsage {
            idle_bytes: idle,
            lent_bytes: state.owned - idle,
            max_bytes: state.max_bytes,
        }
    }

    /// Capacity of every idle buffer, in no particular order.
    pub fn idle_capacities(&self) -> Vec<usize> {
        self.lock().idle.iter().map(Vec::capacity).collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PoolState> {
        // A panic while holding the lock leaves only a list of buffers, each whole, and a
        // count: keep them.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A buffer at least this large asks for transparent huge pages.
pub(crate) const HUGE_PAGE_HINT: usize = 8 << 20;
/// The huge page size the hint aligns to (x86_64 and aarch64 with 4 KiB pages).
const HUGE_PAGE: usize = 2 << 20;

/// Asks the kernel to back `buf`'s capacity with transparent huge pages where it allows them
/// (`madvise(MADV_HUGEPAGE)`; the default "madvise" mode of most distributions).
///
/// The first transfer into a new buffer faults in each page it writes (exception, memory-cgroup
/// charge, zeroing): with 4 KiB pages that was a third of `to_remote` in `stratus-bench
/// txn-snapshot`; a 2 MiB page is one fault for 512 of them. Only whole huge pages inside the
/// capacity are advised; the hint changes no byte, and a refusal (no THP, another kernel)
/// leaves the buffer as it was. A buffer of 32 MiB or more is its own mapping in glibc and the
/// hint goes with it; a smaller one may sit in the heap, where the advised range stays eligible
/// after the buffer is freed: at most that range (under 32 MiB) may then be backed by huge
/// pages for later allocations.
fn advise_huge_pages(buf: &mut Vec<u8>) {
    let cap = buf.capacity();
    if cap < HUGE_PAGE_HINT {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        let start = buf.as_mut_ptr() as usize;
        let first = start.next_multiple_of(HUGE_PAGE);
        let end = (start + cap) / HUGE_PAGE * HUGE_PAGE;
        if end > first {
            // SAFETY: `[first, end)` lies inside `buf`'s allocation, which the caller owns;
            // MADV_HUGEPAGE only marks the range as eligible for huge pages and never changes
            // or frees its contents, so no reference into the buffer can observe it.
            #[allow(unsafe_code)]
            let _ = unsafe {
                libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_HUGEPAGE)
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_dropped_blob_hands_its_buffer_to_the_next_taker() {
        static POOL: ShipBuffers = ShipBuffers::new(2, 64 << 20);
        let mut buf = POOL.take(2 * MIN_POOLED);
        buf.extend_from_slice(b"headerrows");
        let base = buf.as_ptr();
        let blob = buf.into_bytes(6);
        assert_eq!(&blob[..], b"rows");
        let slice = blob.slice(1..3);
        drop(blob);
        // A slice still holds the buffer.
        assert!(POOL.idle_capacities().is_empty());
        assert_eq!(&slice[..], b"ow");
        drop(slice);
        assert_eq!(POOL.idle_capacities().len(), 1);
        let again = POOL.take(MIN_POOLED);
        assert_eq!(again.as_ptr(), base, "the pooled buffer is reused");
        assert!(again.is_empty(), "a reused buffer starts empty");
        assert!(POOL.idle_capacities().is_empty());
        // Lent out, it is still the pool's.
        assert_eq!(POOL.usage().owned_bytes(), again.capacity());
        // Dropped without becoming a blob (a writer abandoned on an error), it comes back too.
        drop(again);
        assert_eq!(POOL.idle_capacities().len(), 1);
    }

    #[test]
    fn small_buffers_are_neither_pooled_nor_taken_from_the_pool() {
        static POOL: ShipBuffers = ShipBuffers::new(2, 64 << 20);
        drop(POOL.take(MIN_POOLED - 1));
        assert!(POOL.idle_capacities().is_empty());
        drop(POOL.take(MIN_POOLED));
        // A small request allocates rather than holding a pooled buffer.
        assert!(POOL.take(100).capacity() < MIN_POOLED);
        assert_eq!(POOL.idle_capacities().len(), 1);
        let mut tiny = POOL.take(8);
        tiny.extend_from_slice(b"tiny");
        let blob = tiny.into_bytes(1);
        assert_eq!(&blob[..], b"iny");
        drop(blob);
        assert_eq!(POOL.idle_capacities().len(), 1);
    }

    #[test]
    fn a_small_transfer_holding_a_large_buffer_keeps_it_counted() {
        static POOL: ShipBuffers = ShipBuffers::new(4, 8 << 20);
        drop(POOL.take(6 << 20));
        // A small transfer that asks for a lot (a writer sized for the whole memtable) takes
        // the resident 6 MiB buffer...
        let held = POOL.take(MIN_POOLED);
        assert!(held.capacity() >= 6 << 20);
        // ...and while it holds it, a large transfer's new buffer is not kept: the pool would
        // own 12 MiB of its 8.
        drop(POOL.take(6 << 20));
        assert!(POOL.idle_capacities().is_empty());
        assert!(POOL.usage().owned_bytes() <= 8 << 20);
        drop(held);
        assert_eq!(POOL.idle_capacities().len(), 1);
    }

    #[test]
    fn lowering_the_bound_frees_idle_buffers_and_keeps_lent_ones_counted() {
        static POOL: ShipBuffers = ShipBuffers::new(4, 16 << 20);
        let (a, b, c) = (POOL.take(2 << 20), POOL.take(4 << 20), POOL.take(6 << 20));
        drop((a, b));
        // Lent out: `c` came from the allocator, so the pool does not count it yet.
        assert_eq!(POOL.usage().owned_bytes(), (2 << 20) + (4 << 20));
        let c_cap = c.capacity();
        drop(c);
        assert_eq!(POOL.usage().owned_bytes(), (12 << 20) + c_cap - (6 << 20));
        let lent = POOL.take(5 << 20);
        assert!(
            lent.capacity() >= 6 << 20,
            "the 6 MiB buffer is the smallest that fits"
        );
        // 3 MiB: the 4 MiB idle buffer goes first (largest), then the 2 MiB one; the lent
        // buffer stays counted.
        POOL.set_max_bytes(3 << 20);
        assert!(POOL.idle_capacities().is_empty());
        assert_eq!(POOL.usage().owned_bytes(), lent.capacity());
        assert_eq!(POOL.usage().max_bytes, 3 << 20);
        // Returned over the bound, it is freed.
        drop(lent);
        assert!(POOL.idle_capacities().is_empty());
        assert_eq!(POOL.usage().owned_bytes(), 0);
        // 0 pools nothing.
        POOL.set_max_bytes(0);
        drop(POOL.take(2 << 20));
        assert!(POOL.idle_capacities().is_empty());
        // Raised again, the pool keeps buffers again.
        POOL.set_max_bytes(16 << 20);
        drop(POOL.take(2 << 20));
        assert_eq!(POOL.idle_capacities().len(), 1);
    }

    #[derive(Clone, Debug)]
    enum Op {
        /// Take a buffer of this many MiB (a quarter MiB more, so sizes vary).
        Take(usize),
        /// Drop the held buffer at this index (modulo the number held).
        Drop(usize),
        /// Set the byte bound to this many MiB.
        SetMax(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0usize..6).prop_map(Op::Take),
            4 => any::<usize>().prop_map(Op::Drop),
            1 => (0usize..12).prop_map(Op::SetMax),
        ]
    }

    proptest! {
        /// Against a model that only counts: every take gets the capacity it asked for, empty;
        /// it reuses an idle buffer exactly when one fits (the smallest such); a dropped buffer
        /// is kept exactly when it is poolable and fits both bounds (a full idle list giving up
        /// a smaller buffer for it); a lowered bound frees idle buffers, largest first, until
        /// the pool fits it; and what the pool owns, idle or lent out, never exceeds its bound
        /// except by buffers lent out before the bound was lowered.
        #[test]
        fn the_pool_stays_bounded_and_reuses_the_smallest_fitting_buffer(
            max_buffers in 0usize..4,
            max_mib in 0usize..12,
            ops in proptest::collection::vec(op(), 0..40),
        ) {
            let mut max_bytes = max_mib << 20;
            let pool: &'static ShipBuffers =
                Box::leak(Box::new(ShipBuffers::new(max_buffers, max_bytes)));
            // Held buffers, each with what the model counts for it (if lent by the pool).
            let mut held: Vec<(PoolBuf, Option<usize>)> = Vec::new();
            let mut idle: Vec<usize> = Vec::new();
            let mut lent: usize = 0;
            for op in ops {
                match op {
                    Op::Take(mib) => {
                        let want = (mib << 20) + (256 << 10);
                        let fit = (want >= MIN_POOLED)
                            .then(|| idle.iter().copied().filter(|&c| c >= want).min())
                            .flatten();
                        let buf = pool.take(want);
                        prop_assert!(buf.capacity() >= want);
                        prop_assert!(buf.is_empty());
                        if let Some(c) = fit {
                            prop_assert_eq!(buf.capacity(), c);
                            let i = idle.iter().position(|&m| m == c).unwrap();
                            idle.swap_remove(i);
                            lent += c;
                        }
                        held.push((buf, fit));
                    }
                    Op::Drop(i) if !held.is_empty() => {
                        let (buf, counted) = held.swap_remove(i % held.len());
                        let c = buf.capacity();
                        lent -= counted.unwrap_or(0);
                        if c >= MIN_POOLED {
                            let smallest = idle.iter().copied().min();
                            let evict = match (idle.len() >= max_buffers, smallest) {
                                (false, _) => Some(None),
                                (true, Some(s)) if s < c => Some(Some(s)),
                                (true, _) => None,
                            };
                            if let Some(evict) = evict {
                                let after: usize =
                                    idle.iter().sum::<usize>() + lent - evict.unwrap_or(0) + c;
                                if after <= max_bytes {
                                    if let Some(s) = evict {
                                        let j = idle.iter().position(|&m| m == s).unwrap();
                                        idle.swap_remove(j);
                                    }
                                    idle.push(c);
                                }
                            }
                        }
                        drop(buf);
                    }
                    Op::Drop(_) => {}
                    Op::SetMax(mib) => {
                        max_bytes = mib << 20;
                        pool.set_max_bytes(max_bytes);
                        while idle.iter().sum::<usize>() + lent > max_bytes && !idle.is_empty() {
                            let largest = idle.iter().copied().max().unwrap();
                            let j = idle.iter().position(|&m| m == largest).unwrap();
                            idle.swap_remove(j);
                        }
                    }
                }
                let mut got = pool.idle_capacities();
                got.sort_unstable();
                let mut expected = idle.clone();
                expected.sort_unstable();
                prop_assert_eq!(&got, &expected);
                prop_assert!(got.len() <= max_buffers);
                prop_assert_eq!(pool.usage().owned_bytes(), idle.iter().sum::<usize>() + lent);
                prop_assert_eq!(
                    pool.usage(),
                    PoolUsage {
                        idle_bytes: idle.iter().sum::<usize>(),
                        lent_bytes: lent,
                        max_bytes,
                    }
                );
                prop_assert!(pool.usage().owned_bytes() <= max_bytes.max(lent));
            }
        }
    }
}
