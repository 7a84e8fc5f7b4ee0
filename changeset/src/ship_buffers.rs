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
//! `max_buffers` idle buffers holding at most `max_bytes` of capacity in total; a buffer handed
//! back past either bound is freed. So what the pool adds to a process's memory is at most
//! `max_bytes` (see [`SHIP_BUFFERS`] for the process's bounds), held while idle: that is the
//! price of not zeroing it again (`stratus-bench txn-snapshot` ends with 76 MiB more resident).
//! Capacity is counted, not the pages touched, so the bound holds whatever part of a buffer
//! was written.
//!
//! A taken buffer is the smallest idle one with the capacity asked for (a small transfer does
//! not hold the largest buffer while a large one allocates anew), or a new allocation.
//!
//! [`MemtableDataWriter`]: crate::MemtableDataWriter

use std::sync::Mutex;

use bytes::Bytes;

/// A buffer below this capacity is never pooled.
pub const MIN_POOLED: usize = 1 << 20;

/// The process's pool of memtable-data buffers: at most 4 idle buffers and 128 MiB of idle
/// capacity (two full transfers of a default 64 MiB memtable).
pub static SHIP_BUFFERS: ShipBuffers = ShipBuffers::new(4, 128 << 20);

/// A bounded pool of byte buffers (see the module docs).
#[derive(Debug)]
pub struct ShipBuffers {
    idle: Mutex<Vec<Vec<u8>>>,
    max_buffers: usize,
    max_bytes: usize,
}

impl ShipBuffers {
    /// An empty pool that keeps at most `max_buffers` idle buffers of at most `max_bytes` of
    /// capacity in total.
    pub const fn new(max_buffers: usize, max_bytes: usize) -> ShipBuffers {
        ShipBuffers {
            idle: Mutex::new(Vec::new()),
            max_buffers,
            max_bytes,
        }
    }

    /// An empty buffer with room for at least `capacity` bytes: the smallest idle buffer that
    /// has it, or a new one.
    pub fn take(&self, capacity: usize) -> Vec<u8> {
        if capacity >= MIN_POOLED {
            let mut idle = self.lock();
            let fit = idle
                .iter()
                .enumerate()
                .filter(|(_, b)| b.capacity() >= capacity)
                .min_by_key(|(_, b)| b.capacity())
                .map(|(i, _)| i);
            if let Some(i) = fit {
                return idle.swap_remove(i);
            }
        }
        let mut buf = Vec::with_capacity(capacity);
        advise_huge_pages(&mut buf);
        buf
    }

    /// Hands `buf` back: kept (emptied) when it is large enough to pool and both bounds allow,
    /// else freed.
    pub fn give(&self, mut buf: Vec<u8>) {
        let capacity = buf.capacity();
        if capacity < MIN_POOLED {
            return;
        }
        let mut idle = self.lock();
        let held: usize = idle.iter().map(Vec::capacity).sum();
        if idle.len() < self.max_buffers && held.saturating_add(capacity) <= self.max_bytes {
            buf.clear();
            idle.push(buf);
        }
    }

    /// Capacity of every idle buffer, in no particular order.
    pub fn idle_capacities(&self) -> Vec<usize> {
        self.lock().iter().map(Vec::capacity).collect()
    }

    /// `buf[start..]` as `Bytes` that hand `buf` back to this pool when the last reference is
    /// dropped (a buffer too small to pool is simply freed then).
    pub fn into_bytes(&'static self, buf: Vec<u8>, start: usize) -> Bytes {
        if buf.capacity() < MIN_POOLED {
            return Bytes::from(buf).slice(start..);
        }
        Bytes::from_owner(Pooled {
            buf: Some(buf),
            pool: self,
        })
        .slice(start..)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Vec<u8>>> {
        // A panic while holding the lock leaves only a list of buffers, each whole: keep it.
        self.idle
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The owner of a finished blob's buffer: hands it back to its pool on drop.
struct Pooled {
    /// Always `Some` until dropped.
    buf: Option<Vec<u8>>,
    pool: &'static ShipBuffers,
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        self.buf.as_deref().unwrap_or_default()
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        if let Some(buf) = self.buf.take() {
            self.pool.give(buf);
        }
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
        let blob = POOL.into_bytes(buf, 6);
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
    }

    #[test]
    fn small_buffers_are_neither_pooled_nor_taken_from_the_pool() {
        static POOL: ShipBuffers = ShipBuffers::new(2, 64 << 20);
        POOL.give(Vec::with_capacity(MIN_POOLED - 1));
        assert!(POOL.idle_capacities().is_empty());
        POOL.give(Vec::with_capacity(MIN_POOLED));
        // A small request allocates rather than holding a pooled buffer.
        assert!(POOL.take(100).capacity() < MIN_POOLED);
        assert_eq!(POOL.idle_capacities().len(), 1);
        let blob = POOL.into_bytes(b"tiny".to_vec(), 1);
        assert_eq!(&blob[..], b"iny");
        drop(blob);
        assert_eq!(POOL.idle_capacities().len(), 1);
    }

    #[derive(Clone, Debug)]
    enum Op {
        /// Take a buffer of this many MiB (a quarter MiB more, so sizes vary).
        Take(usize),
        /// Give back the held buffer at this index (modulo the number held).
        Give(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0usize..6).prop_map(Op::Take),
            any::<usize>().prop_map(Op::Give)
        ]
    }

    proptest! {
        /// Against a model that only counts: every take gets the capacity it asked for, empty;
        /// it reuses an idle buffer exactly when one fits (the smallest such); the idle buffers
        /// never exceed either bound; and a buffer handed back is kept exactly when it is
        /// poolable and fits both bounds.
        #[test]
        fn the_pool_stays_bounded_and_reuses_the_smallest_fitting_buffer(
            max_buffers in 0usize..4,
            max_mib in 0usize..12,
            ops in proptest::collection::vec(op(), 0..40),
        ) {
            let pool: &'static ShipBuffers =
                Box::leak(Box::new(ShipBuffers::new(max_buffers, max_mib << 20)));
            let mut held: Vec<Vec<u8>> = Vec::new();
            // The model: idle capacities.
            let mut model: Vec<usize> = Vec::new();
            for op in ops {
                match op {
                    Op::Take(mib) => {
                        let want = (mib << 20) + (256 << 10);
                        let fit = (want >= MIN_POOLED)
                            .then(|| model.iter().copied().filter(|&c| c >= want).min())
                            .flatten();
                        let buf = pool.take(want);
                        prop_assert!(buf.capacity() >= want);
                        prop_assert!(buf.is_empty());
                        if let Some(c) = fit {
                            prop_assert_eq!(buf.capacity(), c);
                            let i = model.iter().position(|&m| m == c).unwrap();
                            model.swap_remove(i);
                        }
                        held.push(buf);
                    }
                    Op::Give(i) if !held.is_empty() => {
                        let buf = held.swap_remove(i % held.len());
                        let c = buf.capacity();
                        let keep = c >= MIN_POOLED
                            && model.len() < max_buffers
                            && model.iter().sum::<usize>() + c <= max_mib << 20;
                        if keep {
                            model.push(c);
                        }
                        pool.give(buf);
                    }
                    Op::Give(_) => {}
                }
                let mut idle = pool.idle_capacities();
                idle.sort_unstable();
                let mut expected = model.clone();
                expected.sort_unstable();
                prop_assert_eq!(&idle, &expected);
                prop_assert!(idle.len() <= max_buffers);
                prop_assert!(idle.iter().sum::<usize>() <= max_mib << 20);
            }
        }
    }
}
