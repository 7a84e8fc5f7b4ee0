//! The memory behind an [`super::SkipList`]: chunks from the global allocator that never move
//! and are freed all at once when the last owner of the [`Arena`] drops it.
//!
//! Allocation is a bump pointer ([`Region::alloc`]) in the current chunk of a region; the
//! skiplist keeps nodes and version records in two regions, so that a search walks over densely
//! packed nodes instead of nodes interleaved with values.

use std::alloc::{self, Layout};
use std::ptr::NonNull;
use std::sync::{Mutex, PoisonError};

/// Alignment of every allocation; enough for the node and record headers (checked at compile
/// time in the parent module).
pub(crate) const ALIGN: usize = 8;

/// Cache line size assumed by [`Region::alloc_in_line`]; chunks are aligned to it.
const CACHE_LINE: usize = 64;

/// Size of a region's first chunk: small, so that an empty table (a memtable has three, most
/// of them small) costs little.
const FIRST_CHUNK: usize = 4 * 1024;

/// Chunks double in size up to this, so a large table makes few calls to the allocator.
const MAX_CHUNK: usize = 4 * 1024 * 1024;

/// Allocations larger than this get a chunk of their own, so a huge value does not waste the
/// rest of the current chunk.
const DEDICATED_ABOVE: usize = MAX_CHUNK / 4;

/// One chunk from the global allocator, freed by [`Arena`]'s drop.
struct Chunk {
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: a `Chunk` is the unique owner of its allocation, like a `Box<[u8]>`; the only thing
// done with it after creation is freeing it in `Arena::drop`, from whichever thread drops last.
unsafe impl Send for Chunk {}

/// Owner of the chunks. Shared through an `Arc` by the skiplist and by every handle that points
/// into the arena ([`super::VersionPtr`], zero-copy `Bytes`), so memory a reader can still reach
/// is never freed.
pub(crate) struct Arena {
    /// Locked only to add a chunk (and once in drop); readers never touch it.
    chunks: Mutex<Vec<Chunk>>,
}

impl Arena {
    pub(crate) fn new() -> Self {
        Arena {
            chunks: Mutex::new(Vec::new()),
        }
    }

    /// A new chunk of `size` bytes (a multiple of [`ALIGN`], not zero), aligned to a cache line,
    /// that stays valid and in place until the arena is dropped.
    fn new_chunk(&self, size: usize) -> NonNull<u8> {
        let layout = Layout::from_size_align(size, CACHE_LINE).expect("arena chunk size overflows");
        debug_assert!(layout.size() > 0);
        // SAFETY: the layout has a non-zero size (every caller asks for at least one header).
        let raw = unsafe { alloc::alloc(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            alloc::handle_alloc_error(layout)
        };
        self.chunks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Chunk { ptr, layout });
        ptr
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        let chunks = self
            .chunks
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        for chunk in chunks.drain(..) {
            // SAFETY: `chunk.ptr` came from `alloc::alloc(chunk.layout)` in `new_chunk` and is
            // freed only here, once. Nothing can point into it any more: every pointer into the
            // arena is held by something that also holds an `Arc<Arena>` (or borrows one), and
            // this is the drop of the last such `Arc`.
            unsafe { alloc::dealloc(chunk.ptr.as_ptr(), chunk.layout) };
        }
    }
}

/// A bump allocator over chunks of one [`Arena`]. Used only by the writer (under its lock).
pub(crate) struct Region {
    /// Start of the current chunk; dangling while `capacity` is 0.
    base: NonNull<u8>,
    used: usize,
    capacity: usize,
    next_chunk: usize,
}

// SAFETY: a `Region` only records where the next allocation goes in a chunk owned by an
// `Arena` (which is `Send + Sync`); it owns nothing and is used under the writer's mutex.
unsafe impl Send for Region {}

impl Region {
    pub(crate) fn new() -> Self {
        Region {
            base: NonNull::dangling(),
            used: 0,
            capacity: 0,
            next_chunk: FIRST_CHUNK,
        }
    }

    /// `size` fresh bytes (`size > 0`) aligned to [`ALIGN`], from a chunk of `arena`. They are
    /// handed out once, never move, and stay valid until `arena` is dropped. Every region used
    /// with a given `Region` must be the same arena.
    pub(crate) fn alloc(&mut self, arena: &Arena, size: usize) -> NonNull<u8> {
        let size = size
            .checked_next_multiple_of(ALIGN)
            .expect("arena allocation size overflows");
        self.bump(arena, size)
    }

    /// Like [`Region::alloc`], but an allocation that fits in one cache line does not straddle
    /// two: a reader then misses the cache once per skiplist node, not twice.
    pub(crate) fn alloc_in_line(&mut self, arena: &Arena, size: usize) -> NonNull<u8> {
        let size = size
            .checked_next_multiple_of(ALIGN)
            .expect("arena allocation size overflows");
        let offset = self.used % CACHE_LINE;
        if size <= CACHE_LINE && offset + size > CACHE_LINE {
            // Skip to the next line; if the chunk is full, `bump` starts a new (aligned) one.
            self.used = (self.used + CACHE_LINE - offset).min(self.capacity);
        }
        self.bump(arena, size)
    }

    fn bump(&mut self, arena: &Arena, size: usize) -> NonNull<u8> {
        if size > self.capacity - self.used {
            if size > DEDICATED_ABOVE {
                return arena.new_chunk(size);
            }
            let chunk = self.next_chunk.max(size);
            self.next_chunk = (self.next_chunk * 2).min(MAX_CHUNK);
            self.base = arena.new_chunk(chunk);
            self.used = 0;
            self.capacity = chunk;
        }
        // SAFETY: `used + size <= capacity`, the size of the chunk `base` points to, so the
        // offset stays inside that allocation; the pointer keeps the chunk's provenance.
        let ptr = unsafe { self.base.add(self.used) };
        self.used += size;
        ptr
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_are_aligned_disjoint_and_writable() {
        let arena = Arena::new();
        let mut region = Region::new();
        let mut spans = Vec::new();
        for (i, size) in [
            1,
            7,
            8,
            9,
            100,
            4000,
            40,
            5000,
            DEDICATED_ABOVE + 1,
            3,
            64,
            56,
        ]
        .into_iter()
        .enumerate()
        {
            let ptr = if i % 2 == 0 {
                region.alloc(&arena, size)
            } else {
                let ptr = region.alloc_in_line(&arena, size);
                if size <= CACHE_LINE {
                    let line = ptr.as_ptr().addr() / CACHE_LINE;
                    assert_eq!(
                        line,
                        (ptr.as_ptr().addr() + size - 1) / CACHE_LINE,
                        "size={size}"
                    );
                }
                ptr
            };
            assert_eq!(ptr.as_ptr().addr() % ALIGN, 0, "alignment of size={size}");
            // SAFETY: `alloc` handed out `size` writable bytes at `ptr`.
            unsafe { ptr.as_ptr().write_bytes(0xAB, size) };
            spans.push((ptr.as_ptr().addr(), size));
        }
        spans.sort();
        for pair in spans.windows(2) {
            assert!(pair[0].0 + pair[0].1 <= pair[1].0, "overlap: {pair:?}");
        }
    }
}
