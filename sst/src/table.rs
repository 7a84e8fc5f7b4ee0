//! Reading one table section: open (footer, indexes, filter, properties), block access with
//! checksum verification, point reads at a timestamp, and range size estimates.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;

use crate::block::{Block, EntryPos, Version};
use crate::block_cache::BlockCache;
use crate::block_frame::{self, COMPRESSION_NONE, TRAILER_LEN};
use crate::error::{Corrupt, Error, Result};
use crate::filter::Filter;
use crate::footer::{FOOTER_LEN, FORMAT_VERSION, Footer, FooterError, FormatVersion};
use crate::index::{BlockHandle, Index};
use crate::properties::Properties;

/// Which of a table's two block sequences a block belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BlockKind {
    Main,
    Old,
}

/// A readable table section. Cheap to clone: clones share the bytes and the decoded metadata.
#[derive(Clone)]
pub struct Table {
    inner: Arc<TableInner>,
}

/// Where a table's bytes are read from.
pub(crate) enum Data {
    /// In memory (a download) or memory-mapped: blocks are read in place.
    Mapped(Bytes),
    /// A local file read with positioned reads (`pread`), block by block, through the block
    /// cache: what compressed tables use, since their blocks are cached decompressed anyway. A
    /// mapped compressed table would count every page it ever touched toward the process' RSS
    /// (file-backed) on top of the cache holding the same data decompressed.
    File { file: std::fs::File, len: u64 },
}

impl From<Bytes> for Data {
    fn from(b: Bytes) -> Data {
        Data::Mapped(b)
    }
}

impl Data {
    fn len(&self) -> u64 {
        match self {
            Data::Mapped(b) => b.len() as u64,
            Data::File { len, .. } => *len,
        }
    }

    /// `len` bytes at `offset`; the caller has checked the range against `len()`.
    fn read(&self, file_id: u64, offset: u64, len: u64) -> Result<Bytes> {
        match self {
            Data::Mapped(b) => Ok(b.slice(offset as usize..(offset + len) as usize)),
            Data::File { file, .. } => read_at(file, file_id, offset, len).map(Bytes::from),
        }
    }

    /// `len` bytes at `offset` where they already sit in memory (mapped or downloaded); `None`
    /// for a positioned file or a range past the end.
    fn in_place(&self, offset: u64, len: u64) -> Option<&[u8]> {
        match self {
            Data::Mapped(b) => b.get(offset as usize..offset.checked_add(len)? as usize),
            Data::File { .. } => None,
        }
    }
}

/// Asks the CPU to start loading every cache line of `data`, without waiting for any.
///
/// A 4 KiB block is one page: the hardware prefetcher does not cross pages and needs a few
/// misses within one to ramp up, so a scan over tables larger than the caches stalled at the
/// start of every block (half the block decode's samples sat on an entry's first byte).
/// Issuing a block's loads ahead of the scan lets its misses overlap the work on the blocks
/// before it.
#[inline(always)]
#[allow(unsafe_code)]
fn prefetch(data: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    for line in data.chunks(64) {
        // SAFETY: `_mm_prefetch` needs SSE, which every x86_64 CPU has (the target enables it
        // by default), and it is only a hint: it never faults and reads nothing the program
        // sees, whatever the address. The address here is inside `data` anyway.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                line.as_ptr().cast(),
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = data;
}

/// `len` bytes of `file` at `offset`, with one positioned read.
fn read_at(file: &std::fs::File, file_id: u64, offset: u64, len: u64) -> Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; len as usize];
    file.read_exact_at(&mut buf, offset)
        .map_err(|source| Error::Io { file_id, source })?;
    Ok(buf)
}

struct TableInner {
    file_id: u64,
    /// The layout of its data blocks (from the footer).
    format: FormatVersion,
    /// Offset of this section inside its file (non-zero for the CF sections of an L0 file).
    base: u64,
    data: Data,
    index: Index,
    old_index: Index,
    filter: Filter,
    props: Properties,
    /// Offset of the old-version index, reported when a main entry points past it.
    old_index_at: u64,
    /// One flag per block (main blocks first, then old-version blocks): set once the block's
    /// checksum has been verified, so repeated reads of an uncompressed block skip the CRC.
    verified: Box<[AtomicBool]>,
    cache: Option<Arc<dyn BlockCache>>,
    /// Bytes of the metadata regions (indexes, filter, properties) as stored.
    meta_len: u64,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("file_id", &self.inner.file_id)
            .field("size", &self.inner.data.len())
            .field("positioned", &self.reads_positioned())
            .field("entries", &self.inner.props.entries)
            .finish()
    }
}

impl Table {
    /// Opens a table held in memory (a downloaded file or a memory map).
    pub fn open(file_id: u64, data: Bytes) -> Result<Table> {
        Self::open_section(file_id, 0, data, None)
    }

    /// Opens a table whose compressed blocks are shared through `cache`.
    pub fn open_with_cache(file_id: u64, data: Bytes, cache: Arc<dyn BlockCache>) -> Result<Table> {
        Self::open_section(file_id, 0, data, Some(cache))
    }

    /// Opens a local file through a read-only memory map.
    pub fn open_file(file_id: u64, path: &std::path::Path) -> Result<Table> {
        Self::open(file_id, map_file(file_id, path)?)
    }

    /// Opens a local table file: a compressed one (by its footer) with a cache is read with
    /// positioned reads into the cache; any other is memory-mapped and read in place (an
    /// uncompressed block read in place costs nothing, and with no cache a compressed one would
    /// be read and decompressed on every visit).
    pub fn open_local(
        file_id: u64,
        file: std::fs::File,
        cache: Option<Arc<dyn BlockCache>>,
    ) -> Result<Table> {
        let len = file
            .metadata()
            .map_err(|source| Error::Io { file_id, source })?
            .len();
        let tail_len = len.min(FOOTER_LEN as u64);
        let tail = read_at(&file, file_id, len - tail_len, tail_len)?;
        let compressed = Footer::decode(&tail).is_ok_and(|f| f.compression != COMPRESSION_NONE);
        match cache {
            Some(cache) if compressed => {
                Self::open_section(file_id, 0, Data::File { file, len }, Some(cache))
            }
            cache => Self::open_section(file_id, 0, map_open_file(file_id, &file)?, cache),
        }
    }

    /// Drops the table's pages from this process' resident set when it is read in place
    /// from a file map ([`crate::file_map`]): what a sequential reader done with the table
    /// (a compaction's merge) calls, so that its inputs do not stay resident until they are
    /// retired. Reads stay correct (a page comes back from the page cache); a positioned or
    /// downloaded table is left alone. Returns the bytes released.
    pub fn release_pages(&self) -> usize {
        match &self.inner.data {
            Data::Mapped(b) => crate::file_map::release(b),
            Data::File { .. } => 0,
        }
    }

    /// Whether blocks are read with positioned reads (see [`Table::open_local`]) rather than
    /// in place.
    pub fn reads_positioned(&self) -> bool {
        matches!(self.inner.data, Data::File { .. })
    }

    pub(crate) fn open_section(
        file_id: u64,
        base: u64,
        data: impl Into<Data>,
        cache: Option<Arc<dyn BlockCache>>,
    ) -> Result<Table> {
        let data: Data = data.into();
        let len = data.len();
        let footer_at = base + len.saturating_sub(FOOTER_LEN as u64);
        let tail = data.read(
            file_id,
            len.saturating_sub(FOOTER_LEN as u64),
            len.min(FOOTER_LEN as u64),
        )?;
        let footer = Footer::decode(&tail).map_err(|e| match e {
            FooterError::Corrupt(c) => c.at(file_id, footer_at),
            FooterError::Version(found) => Error::UnsupportedVersion {
                file_id,
                expected: FORMAT_VERSION,
                found,
            },
        })?;
        let meta_end = len - FOOTER_LEN as u64;
        let corrupt = |what| Corrupt(what).at(file_id, footer_at);
        // Regions must follow each other in the documented order.
        let regions = [
            footer.index,
            footer.old_index,
            footer.filter,
            footer.properties,
        ];
        let mut expect = regions[0].offset;
        if footer.old_blocks_offset > expect {
            return Err(corrupt("old-version blocks start after the index"));
        }
        for h in regions {
            if h.offset != expect || (h.len as usize) < TRAILER_LEN {
                return Err(corrupt("metadata regions are not contiguous"));
            }
            expect = h
                .offset
                .checked_add(u64::from(h.len))
                .filter(|end| *end <= meta_end)
                .ok_or_else(|| corrupt("metadata region past the footer"))?;
        }
        if expect != meta_end {
            return Err(corrupt("metadata does not end at the footer"));
        }
        let meta = |h: BlockHandle| -> Result<Bytes> {
            let frame = data.read(file_id, h.offset, u64::from(h.len))?;
            block_frame::decode(&frame).map_err(|c| c.at(file_id, base + h.offset))
        };
        let index = Index::decode(meta(footer.index)?)
            .map_err(|c| c.at(file_id, base + footer.index.offset))?;
        let old_index = Index::decode(meta(footer.old_index)?)
            .map_err(|c| c.at(file_id, base + footer.old_index.offset))?;
        let filter = Filter::decode(meta(footer.filter)?)
            .map_err(|c| c.at(file_id, base + footer.filter.offset))?;
        let props = Properties::decode(&meta(footer.properties)?)
            .map_err(|c| c.at(file_id, base + footer.properties.offset))?;
        check_handles(&index, 0, footer.old_blocks_offset)
            .map_err(|c| c.at(file_id, base + footer.index.offset))?;
        check_handles(&old_index, footer.old_blocks_offset, footer.index.offset)
            .map_err(|c| c.at(file_id, base + footer.old_index.offset))?;
        if props.block_count as usize != index.len()
            || props.old_block_count as usize != old_index.len()
            || (props.entries == 0) != index.is_empty()
        {
            return Err(Corrupt("properties disagree with the indexes")
                .at(file_id, base + footer.properties.offset));
        }
        let verified = (0..index.len() + old_index.len())
            .map(|_| AtomicBool::new(false))
            .collect();
        Ok(Table {
            inner: Arc::new(TableInner {
                file_id,
                base,
                data,
                index,
                old_index,
                filter,
                props,
                format: footer.format_version,
                old_index_at: footer.old_index.offset,
                verified,
                cache,
                meta_len: meta_end - regions[0].offset,
            }),
        })
    }

    pub fn file_id(&self) -> u64 {
        self.inner.file_id
    }

    pub fn properties(&self) -> &Properties {
        &self.inner.props
    }

    /// The format version the table was written in.
    pub fn format_version(&self) -> FormatVersion {
        self.inner.format
    }

    /// How many handles (clones of this table, including its iterators) are alive. The engine
    /// deletes a replaced file only once its own handle is the last one.
    pub fn handle_count(&self) -> usize {
        Arc::strong_count(&self.inner)
    }

    /// The memory this open table holds of its own, in bytes, beyond what the kernel can take
    /// back: its index entries and per-block flags, and the bytes its metadata (indexes,
    /// filter, properties) is read from — read into memory for a positioned table, part of the
    /// section for a download on the heap, which counts whole. A mapped table's pages are the
    /// page cache's (the process can drop them: [`Table::release_pages`]), and blocks in the
    /// block cache are the cache's, so neither is counted. What a cache of open tables weighs
    /// them by.
    pub fn memory_size(&self) -> u64 {
        let inner = &*self.inner;
        let blocks = (inner.index.len() + inner.old_index.len()) as u64;
        // Per block: an index entry (a key slice, a handle, a running size) and a flag.
        let per_block = (std::mem::size_of::<Bytes>() + 16 + 8 + 1) as u64;
        let bytes = match &inner.data {
            // The metadata is a slice of the download.
            Data::Mapped(b) if !crate::file_map::is_mapped(b) => b.len() as u64,
            // The metadata sits in the map, where every lookup keeps it resident.
            Data::Mapped(_) | Data::File { .. } => inner.meta_len,
        };
        bytes + blocks * per_block
    }

    /// Size of the section in bytes.
    pub fn size(&self) -> u64 {
        self.inner.data.len()
    }

    pub fn is_empty(&self) -> bool {
        self.inner.props.entries == 0
    }

    pub(crate) fn index(&self, kind: BlockKind) -> &Index {
        match kind {
            BlockKind::Main => &self.inner.index,
            BlockKind::Old => &self.inner.old_index,
        }
    }

    /// Starts loading main block `i` into the CPU caches when the table is read in place, so a
    /// scan finds it there when it gets to it; no-op for positioned tables (their blocks come
    /// through the block cache) and past the end.
    pub(crate) fn prefetch_main_block(&self, i: usize) {
        let t = &*self.inner;
        if i >= t.index.len() {
            return;
        }
        let h = t.index.handle(i);
        if let Some(frame) = t.data.in_place(h.offset, u64::from(h.len)) {
            prefetch(frame);
        }
    }

    /// Loads block `i` of `kind`: verified, decompressed, ready to search.
    pub(crate) fn block(&self, kind: BlockKind, i: usize) -> Result<Block> {
        let t = &*self.inner;
        // Every block of a positioned table goes through the cache: a hit reads nothing.
        if self.reads_positioned()
            && let Some(cache) = &t.cache
            && let Some(b) = cache.get(t.file_id, self.block_offset(kind, i))
        {
            return Ok(b);
        }
        self.load_block(kind, i)
    }

    /// Where block `i` of `kind` starts in its file: the block cache's key.
    fn block_offset(&self, kind: BlockKind, i: usize) -> u64 {
        self.inner.base + self.index(kind).handle(i).offset
    }

    /// The miss path of [`Self::block`]: reads the block's frame, verifies and decodes it,
    /// and shares it through the cache.
    fn load_block(&self, kind: BlockKind, i: usize) -> Result<Block> {
        let t = &*self.inner;
        let h = self.index(kind).handle(i);
        let abs = self.block_offset(kind, i);
        let slot = match kind {
            BlockKind::Main => i,
            BlockKind::Old => t.index.len() + i,
        };
        let positioned = self.reads_positioned();
        let frame = t.data.read(t.file_id, h.offset, u64::from(h.len))?;
        let compressed = frame[frame.len() - TRAILER_LEN] != COMPRESSION_NONE;
        if !compressed && !positioned && t.verified[slot].load(Ordering::Relaxed) {
            let raw = frame.slice(..frame.len() - TRAILER_LEN);
            return Block::decode(raw, t.format).map_err(|c| c.at(t.file_id, abs));
        }
        if compressed
            && !positioned
            && let Some(cache) = &t.cache
            && let Some(b) = cache.get(t.file_id, abs)
        {
            return Ok(b);
        }
        let raw = block_frame::decode(&frame).map_err(|c| c.at(t.file_id, abs))?;
        let block = Block::decode(raw, t.format).map_err(|c| c.at(t.file_id, abs))?;
        // Each frame's checksum covers only its own bytes: a block written in the wrong place
        // (equal-length blocks swapped) would pass it. The index pins each block's first key.
        if block.first_key() != self.index(kind).first_key(i) {
            return Err(Corrupt("block first key disagrees with the index").at(t.file_id, abs));
        }
        if compressed || positioned {
            if let Some(cache) = &t.cache {
                cache.insert(t.file_id, abs, block.clone());
            }
        } else {
            t.verified[slot].store(true, Ordering::Relaxed);
        }
        Ok(block)
    }

    /// How many main blocks a sequential scan of this table keeps loading ahead of it: the
    /// cache's depth for a positioned table (its blocks are loaded into the cache), 0 for one
    /// read in place (nothing to load) or with no cache.
    pub(crate) fn read_ahead_depth(&self) -> usize {
        match (&self.inner.data, &self.inner.cache) {
            (Data::File { .. }, Some(cache)) => cache.read_ahead_blocks(),
            _ => 0,
        }
    }

    /// Hands main blocks `blocks` to the cache's loader threads, which load the ones not yet
    /// cached, in the scan's order (descending for a `reverse` one). Nothing is handed over
    /// when the batch's farthest block is already cached (a loader or an earlier scan has
    /// been there); a cache with no loaders or a full queue refuses the batch, and the scan
    /// loads those blocks itself. A load that fails is left for the scan to meet: its own read
    /// of the block reports the error where it is needed.
    pub(crate) fn read_ahead(&self, blocks: std::ops::Range<usize>, reverse: bool) {
        let Some(cache) = &self.inner.cache else {
            return;
        };
        if blocks.is_empty() {
            return;
        }
        // A scan over cached blocks (a warm one) hands over nothing: the batch's farthest
        // block cached means a loader or an earlier scan has been there, and waking a loader
        // costs the scan more than the lookup.
        let farthest = if reverse {
            blocks.start
        } else {
            blocks.end - 1
        };
        if cache.contains(
            self.inner.file_id,
            self.block_offset(BlockKind::Main, farthest),
        ) {
            return;
        }
        // A queued batch holds the table weakly: it keeps no retired file from its deletion
        // (file GC waits for a table's last handle), and loads nothing for a table whose
        // handles are all gone (retired and dropped). While it runs it holds a handle.
        let weak = Arc::downgrade(&self.inner);
        cache.read_ahead(Box::new(move || {
            let Some(inner) = weak.upgrade() else { return };
            let table = Table { inner };
            let t = &*table.inner;
            let Some(cache) = &t.cache else { return };
            // In the scan's order: the block it needs first is loaded first.
            for k in 0..blocks.len() {
                let i = if reverse {
                    blocks.end - 1 - k
                } else {
                    blocks.start + k
                };
                if !cache.contains(t.file_id, table.block_offset(BlockKind::Main, i)) {
                    // The error, if any, is the scan's to report (above).
                    let _ = table.load_block(BlockKind::Main, i);
                }
            }
        }));
    }

    pub(crate) fn corrupt(&self, kind: BlockKind, i: usize, c: Corrupt) -> Error {
        c.at(self.inner.file_id, self.block_offset(kind, i))
    }

    /// True if the filter says `key` may be present.
    pub fn may_contain(&self, key: &[u8]) -> bool {
        self.inner.filter.may_contain(key)
    }

    /// The version of `key` visible at `ts` (the first version <= ts), tombstones included.
    pub fn get(&self, key: &[u8], ts: u64) -> Result<Option<Version>> {
        if !self.inner.filter.may_contain(key) {
            return Ok(None);
        }
        match self.find_main(key)? {
            Some((block, e)) => self.resolve(&block, &e, key, ts, &mut None),
            None => Ok(None),
        }
    }

    /// Resolves a main entry to the version visible at `ts`. `last_old` keeps the old-version
    /// block read last, so a scan at an old timestamp reads (and decompresses) each old-version
    /// block once instead of once per key.
    #[inline]
    pub(crate) fn resolve(
        &self,
        block: &Block,
        e: &EntryPos,
        key: &[u8],
        ts: u64,
        last_old: &mut Option<(usize, Block)>,
    ) -> Result<Option<Version>> {
        if e.version <= ts {
            return Ok(Some(block.version_of(e)));
        }
        if !e.has_old() {
            return Ok(None);
        }
        let mut found = None;
        self.walk_old_versions(key, e.old_block as usize, last_old, |v| {
            if v.version <= ts {
                found = Some(v);
                false
            } else {
                true
            }
        })?;
        Ok(found)
    }

    /// Calls `f` on the old versions of `key` (newest first) starting at old-version block
    /// `start`, until `f` returns false or the versions end.
    fn walk_old_versions(
        &self,
        key: &[u8],
        start: usize,
        last_old: &mut Option<(usize, Block)>,
        mut f: impl FnMut(Version) -> bool,
    ) -> Result<()> {
        let n = self.inner.old_index.len();
        if start >= n {
            return Err(Corrupt("old-version pointer past the old index").at(
                self.inner.file_id,
                self.inner.base + self.inner.old_index_at,
            ));
        }
        let mut bi = start;
        let block = self.old_block(bi, last_old)?;
        let err = |bi, c| self.corrupt(BlockKind::Old, bi, c);
        let mut i = block.lower_bound(key).map_err(|c| err(bi, c))?;
        let first = match i < block.len() {
            true => Some(block.entry(i).map_err(|c| err(bi, c))?),
            false => None,
        };
        if !first.is_some_and(|e| block.cmp_key(&e, key).is_eq()) {
            return Err(err(bi, Corrupt("old versions missing from their block")));
        }
        let mut block = block;
        loop {
            while i < block.len() {
                let e = block.entry(i).map_err(|c| err(bi, c))?;
                if !block.cmp_key(&e, key).is_eq() || !f(block.version_of(&e)) {
                    return Ok(());
                }
                i += 1;
            }
            bi += 1;
            if bi >= n {
                return Ok(());
            }
            block = self.old_block(bi, last_old)?;
            i = 0;
        }
    }

    fn old_block(&self, bi: usize, last_old: &mut Option<(usize, Block)>) -> Result<Block> {
        if let Some((i, b)) = last_old
            && *i == bi
        {
            return Ok(b.clone());
        }
        let b = self.block(BlockKind::Old, bi)?;
        *last_old = Some((bi, b.clone()));
        Ok(b)
    }

    /// Every version of `key`, newest first.
    pub fn versions(&self, key: &[u8]) -> Result<Vec<Version>> {
        if !self.inner.filter.may_contain(key) {
            return Ok(Vec::new());
        }
        let Some((block, e)) = self.find_main(key)? else {
            return Ok(Vec::new());
        };
        let mut out = vec![block.version_of(&e)];
        out.extend(self.old_versions_of(key, &e)?);
        Ok(out)
    }

    fn find_main(&self, key: &[u8]) -> Result<Option<(Block, EntryPos)>> {
        let Some(bi) = self.inner.index.find(key) else {
            return Ok(None);
        };
        let block = self.block(BlockKind::Main, bi)?;
        let i = block
            .lower_bound(key)
            .map_err(|c| self.corrupt(BlockKind::Main, bi, c))?;
        if i == block.len() {
            return Ok(None);
        }
        let e = block
            .entry(i)
            .map_err(|c| self.corrupt(BlockKind::Main, bi, c))?;
        if block.cmp_key(&e, key) != std::cmp::Ordering::Equal {
            return Ok(None);
        }
        Ok(Some((block, e)))
    }

    /// Old versions of the main entry `e` (found in a scan), newest first.
    pub(crate) fn old_versions_of(&self, key: &[u8], e: &EntryPos) -> Result<Vec<Version>> {
        let mut out = Vec::new();
        if e.has_old() {
            self.walk_old_versions(key, e.old_block as usize, &mut None, |v| {
                out.push(v);
                true
            })?;
        }
        Ok(out)
    }

    /// Bytes of main data blocks that reads of `ranges` would touch, answered from the index
    /// alone. Each range is `[start, end)` with an empty `end` meaning unbounded. A block is
    /// counted once even if several ranges touch it. The estimate never undercounts and
    /// overcounts by at most the first block of a range whose keys all sort before its start.
    pub fn estimate_blocks_size<S: AsRef<[u8]>, E: AsRef<[u8]>>(&self, ranges: &[(S, E)]) -> u64 {
        let index = &self.inner.index;
        if index.is_empty() {
            return 0;
        }
        let biggest = self.inner.props.biggest.as_slice();
        let mut spans: Vec<(usize, usize)> = Vec::with_capacity(ranges.len());
        for (start, end) in ranges {
            let (start, end) = (start.as_ref(), end.as_ref());
            if start > biggest || (!end.is_empty() && end <= start) {
                continue;
            }
            let first = index.find(start).unwrap_or(0);
            let last = if end.is_empty() {
                index.len()
            } else {
                index.count_before(end)
            };
            if first < last {
                spans.push((first, last));
            }
        }
        spans.sort_unstable();
        let mut total = 0;
        let mut cur: Option<(usize, usize)> = None;
        for (a, b) in spans {
            match &mut cur {
                Some((_, ce)) if a <= *ce => *ce = (*ce).max(b),
                _ => {
                    if let Some((ca, ce)) = cur {
                        total += index.size_of(ca, ce);
                    }
                    cur = Some((a, b));
                }
            }
        }
        if let Some((ca, ce)) = cur {
            total += index.size_of(ca, ce);
        }
        total
    }

    /// Sizes of the main data blocks, in key order (for tests and diagnostics).
    pub fn block_sizes(&self) -> Vec<u64> {
        self.inner
            .index
            .handles()
            .iter()
            .map(|h| u64::from(h.len))
            .collect()
    }

    /// First key of every main data block.
    pub fn block_first_keys(&self) -> Vec<Vec<u8>> {
        (0..self.inner.index.len())
            .map(|i| self.inner.index.first_key(i).to_vec())
            .collect()
    }

    /// Every key stored in main data block `i`, read and verified (for exact size checks).
    pub fn block_keys(&self, i: usize) -> Result<Vec<Vec<u8>>> {
        if i >= self.inner.index.len() {
            return Ok(Vec::new());
        }
        let block = self.block(BlockKind::Main, i)?;
        let mut keys = Vec::with_capacity(block.len());
        let mut buf = Vec::new();
        for j in 0..block.len() {
            let e = block
                .entry(j)
                .map_err(|c| self.corrupt(BlockKind::Main, i, c))?;
            block.key_into(&e, &mut buf);
            keys.push(buf.clone());
        }
        Ok(keys)
    }
}

/// Every handle must lie inside `[lo, hi)` and follow the previous one without overlap.
fn check_handles(index: &Index, lo: u64, hi: u64) -> Result<(), Corrupt> {
    let mut next = lo;
    for h in index.handles() {
        if h.offset != next || (h.len as usize) < TRAILER_LEN {
            return Err(Corrupt("block handles are not contiguous"));
        }
        next = h
            .offset
            .checked_add(u64::from(h.len))
            .filter(|end| *end <= hi)
            .ok_or(Corrupt("block handle past its region"))?;
    }
    if next != hi {
        return Err(Corrupt("block handles do not cover their region"));
    }
    Ok(())
}

/// Maps a local file read-only and wraps it as `Bytes` without copying.
pub fn map_file(file_id: u64, path: &std::path::Path) -> Result<Bytes> {
    let file = std::fs::File::open(path).map_err(|source| Error::Io { file_id, source })?;
    map_open_file(file_id, &file)
}

/// Maps an open table file read-only (see [`map_file`] and [`crate::file_map`]).
pub fn map_open_file(file_id: u64, file: &std::fs::File) -> Result<Bytes> {
    crate::file_map::map_open_file(file_id, file)
}
