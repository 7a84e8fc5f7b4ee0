//! Memory-mapped table files, and dropping their resident pages behind a sequential read.
//!
//! An uncompressed table on local disk is read in place through a read-only map of its file
//! ([`map_open_file`]). Every page a read touches then counts toward the process' RSS
//! (file-backed) for as long as the map lives, although the kernel keeps the same bytes in its
//! page cache anyway. A compaction reads each of its inputs once from start to end; mapped, it
//! would leave every input page resident until the inputs are retired, on top of what the reads
//! of the live state keep resident, and a compaction whose second merge reads the first one's
//! outputs doubled the peak RSS (BENCHMARKS.md, vs-fjall). [`release`] drops a range's pages
//! from this process once a reader is done with them: the page cache keeps them, so a later
//! read of the same range costs a minor fault, not a disk read.
//!
//! `madvise(MADV_DONTNEED)` is only sound on a file-backed map (on anonymous memory it zeroes
//! the pages), and a table's bytes may as well be a download on the heap. So every map made
//! here registers its address range in [`MAPS`] until it is unmapped, and [`release`] advises
//! only pages inside a registered map: for anything else it does nothing.

use std::collections::BTreeMap;

use bytes::Bytes;
use std::sync::{Mutex, MutexGuard};

use crate::error::{Error, Result};

/// Start address → length of every live map made by [`map_open_file`].
static MAPS: Mutex<BTreeMap<usize, usize>> = Mutex::new(BTreeMap::new());

/// The registry; a panic while holding it leaves a consistent map (each change is one call).
fn maps() -> MutexGuard<'static, BTreeMap<usize, usize>> {
    MAPS.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The owner of a map behind the `Bytes` a table reads: registered while it lives.
struct FileMap(memmap2::Mmap);

impl FileMap {
    fn new(map: memmap2::Mmap) -> FileMap {
        if !map.is_empty() {
            maps().insert(map.as_ptr() as usize, map.len());
        }
        FileMap(map)
    }
}

impl AsRef<[u8]> for FileMap {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for FileMap {
    fn drop(&mut self) {
        // Before the unmap (the field drops after this body): no `release` can advise an
        // address range that is no longer this map.
        maps().remove(&(self.0.as_ptr() as usize));
    }
}

/// Maps an open table file read-only and wraps it as `Bytes` without copying.
// One of the two `unsafe` of this crate (besides `prefetch`): mapping a file, sound for the
// reason given at the call.
#[allow(unsafe_code)]
pub fn map_open_file(file_id: u64, file: &std::fs::File) -> Result<Bytes> {
    // SAFETY: table files are write-once (written to a temp name, fsynced, renamed); nothing
    // writes to or truncates a file after it is published, which is what memmap2 requires.
    let map =
        unsafe { memmap2::Mmap::map(file) }.map_err(|source| Error::Io { file_id, source })?;
    Ok(Bytes::from_owner(FileMap::new(map)))
}

/// Whether `data` lies wholly inside a live map made by [`map_open_file`]: bytes the kernel
/// can drop and read back from the file, as opposed to a download on the heap.
pub fn is_mapped(data: &[u8]) -> bool {
    containing_map(data).is_some()
}

/// The registered map `data` lies wholly inside, as (start, length).
fn containing_map(data: &[u8]) -> Option<(usize, usize)> {
    if data.is_empty() {
        return None;
    }
    let lo = data.as_ptr() as usize;
    let (&start, &len) = maps().range(..=lo).next_back()?;
    (lo + data.len() <= start + len).then_some((start, len))
}

/// The page-aligned part of `data` inside a registered map, as (start, length).
fn mapped_range(data: &[u8]) -> Option<(usize, usize)> {
    let (start, len) = containing_map(data)?;
    let lo = data.as_ptr() as usize;
    let hi = lo + data.len();
    let page = page_size();
    // Whole pages only: a partial page at either end may hold bytes someone still reads, and
    // madvise wants an aligned start. A map starts on a page boundary, so its own first and
    // last pages round inside it.
    let first = lo.next_multiple_of(page);
    let last = if hi == start + len {
        hi.next_multiple_of(page)
    } else {
        hi / page * page
    };
    (last > first).then(|| (first, last - first))
}

fn page_size() -> usize {
    static PAGE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *PAGE.get_or_init(|| {
        // SAFETY: sysconf reads a constant of the system; it touches no memory of ours.
        #[allow(unsafe_code)]
        let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        usize::try_from(p).ok().filter(|p| *p > 0).unwrap_or(4096)
    })
}

/// Drops the pages of `data` from this process' resident set if `data` lies in a map made by
/// [`map_open_file`] (module docs); nothing otherwise. The bytes stay readable: the next read
/// faults them back in from the page cache. Returns the bytes released.
#[allow(unsafe_code)]
pub fn release(data: &[u8]) -> usize {
    let Some((start, len)) = mapped_range(data) else {
        return 0;
    };
    // SAFETY: [start, start + len) is whole pages inside a live read-only map of a file that
    // is never written after it is published (`map_open_file`); `data` borrows from the map's
    // owner, so the map outlives this call. MADV_DONTNEED on such a map only drops this
    // process' page table entries: later reads see the file's bytes again, unchanged.
    let rc = unsafe { libc::madvise(start as *mut libc::c_void, len, libc::MADV_DONTNEED) };
    if rc == 0 { len } else { 0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn mapped(len: usize) -> (tempfile::TempDir, Bytes) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t");
        let mut f = std::fs::File::create(&path).unwrap();
        let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        f.write_all(&data).unwrap();
        drop(f);
        let file = std::fs::File::open(&path).unwrap();
        (dir, map_open_file(1, &file).unwrap())
    }

    #[test]
    fn released_pages_of_a_map_read_back_unchanged() {
        let (_dir, b) = mapped(64 * 1024 + 100);
        let before = b.to_vec();
        let released = release(&b[..]);
        assert!(released >= 64 * 1024, "released {released} bytes");
        assert_eq!(&b[..], &before[..]);
        // A slice inside the map releases only its whole pages.
        let page = page_size();
        assert_eq!(release(&b[1..page + 1]), 0);
        assert_eq!(release(&b[page..3 * page]), 2 * page);
        assert_eq!(&b[..], &before[..]);
    }

    /// The resident KiB of this process' mapping that starts at `addr` (`/proc/self/smaps`):
    /// per mapping, so other tests' memory does not blur it.
    fn resident_kib(addr: usize) -> u64 {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut lines = smaps.lines();
        while let Some(line) = lines.next() {
            let Some((range, _)) = line.split_once(' ') else {
                continue;
            };
            let Some((start, _)) = range.split_once('-') else {
                continue;
            };
            if usize::from_str_radix(start, 16) != Ok(addr) {
                continue;
            }
            for field in lines.by_ref() {
                if let Some(kib) = field.strip_prefix("Rss:") {
                    return kib.trim().trim_end_matches("kB").trim().parse().unwrap();
                }
            }
        }
        panic!("no mapping at {addr:#x} in /proc/self/smaps");
    }

    #[test]
    fn a_released_map_leaves_the_resident_set() {
        let (_dir, b) = mapped(1024 * 1024);
        let sum: u64 = b.iter().map(|x| u64::from(*x)).sum();
        assert!(sum > 0);
        let addr = b.as_ptr() as usize;
        let read = resident_kib(addr);
        assert!(read >= 1000, "reading the map made {read} KiB resident");
        release(&b[..]);
        let after = resident_kib(addr);
        assert!(after < 16, "{after} KiB still resident after the release");
        // Reading again brings the same bytes back.
        assert_eq!(b.iter().map(|x| u64::from(*x)).sum::<u64>(), sum);
    }

    #[test]
    fn heap_bytes_and_unmapped_maps_are_never_advised() {
        let heap = vec![7u8; 256 * 1024];
        assert!(mapped_range(&heap).is_none());
        assert_eq!(release(&heap), 0);
        assert!(heap.iter().all(|b| *b == 7));
        let (_dir, b) = mapped(16 * 1024);
        assert!(mapped_range(&b).is_some());
        let copy: Vec<u8> = b.iter().copied().collect();
        assert!(
            mapped_range(&copy).is_none(),
            "a copy of a map is heap memory"
        );
    }

    #[test]
    fn only_bytes_inside_a_live_map_count_as_mapped() {
        let heap = vec![7u8; 4096];
        assert!(!is_mapped(&heap));
        assert!(!is_mapped(&[]));
        let (_dir, b) = mapped(16 * 1024);
        assert!(is_mapped(&b));
        assert!(is_mapped(&b[100..200]), "a slice of a map");
        let addr = b.as_ptr() as usize;
        drop(b);
        // The map is gone: the registry no longer vouches for its range.
        assert!(!maps().contains_key(&addr));
    }
}
