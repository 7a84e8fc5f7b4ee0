//! [`RemoteRows`]: the memtable rows a worker received with a remote snapshot, indexed.
//!
//! A snapshot rebuilt by [`crate::SnapAccess::from_remote`] never takes writes, so it does not
//! need a skiplist: the rows arrive sorted (key ascending, each key's versions oldest first, in
//! a layout of `changeset/src/memtable_data.rs`), and an index of where each row's parts sit is
//! enough to answer point reads (binary search) and to iterate in both directions. Building
//! that index is one pass over the rows with no copy of any value, where inserting every row
//! into a fresh skiplist cost several times the transfer itself.
//!
//! **When the index is built.** Rows of a v1-v3 blob are indexed when the snapshot is rebuilt,
//! all of them. A v4 blob comes in blocks of about 16 KiB behind a checked index of their
//! first keys: rebuilding checks only that index, and a read indexes the block it reaches
//! ([`RowIndex`] over one block), as an SST's blocks are read. A scan then decodes each block
//! just before it reads it, while the block is in the CPU's caches, instead of decoding every
//! row into index vectors and arenas far larger than the caches and reading them back later;
//! and a read of part of the range decodes only the blocks it touches. A block's rows are
//! checked (checksum, structure, order, range) when it is decoded, so a corrupt block is an
//! error of the read that reaches it.
//!
//! Values are always read in place from the received buffer. Keys and user metas are read in
//! place from a v1 buffer; a v2-v4 buffer stores keys as shared prefixes and WRITE metas
//! compactly, so the index copies each distinct key and each meta into an arena of its own
//! (about 30 bytes a row, a fraction of the value bytes it does not copy).
//!
//! The index holds, per key, where the key sits and its first row; per row, its version and
//! where its user meta and value sit. A key's rows are adjacent and ascending by version, so a
//! read at `ts` lands on the last row of the key whose version is `<= ts`.
//!
//! Offsets are 32-bit: a buffer or an arena of 4 GiB or more is refused when its rows are
//! indexed (a memtable is far smaller; a v4 writer refuses such a blob).
//!
//! A v4 blob's `max_version` is the header's: a reader of one block checks that none of its
//! rows is above it, and only a walk of every block that it is the highest, so a sender that
//! understated it (with every checksum valid) would make `newer_ts_in_range` skip rows. The
//! server's writer computes it from the rows it writes.
//!
//! A point read on a v4 blob indexes the whole block its key is in (~16 KiB, some
//! microseconds); a worker's reads are scans, and the MVCC scanner's point reads are rare (below
//! a Lock or Rollback record).

use bytes::Bytes;
use changeset::memtable_data::{self, BlockIndex, RowIter};
use changeset::ship_buffers::SHIP_BUFFERS;
use changeset::{ColumnFamily, MemtableDataFormat};

use crate::error::{Error, Result};
use crate::mvcc::records::WRITE_META_LEN;
use crate::snap_access::RawVersion;

/// `RowEntry::value_len` of a tombstone (whose value reads as empty whatever was shipped).
const TOMBSTONE: u32 = u32::MAX;

/// Where one key sits in the buffer, and its first row in [`RowIndex::rows`].
#[derive(Clone, Copy, Debug)]
struct KeyEntry {
    off: u32,
    len: u32,
    first_row: u32,
}

/// One row: its version and where its user meta and value sit in the buffer.
#[derive(Clone, Copy, Debug)]
struct RowEntry {
    version: u64,
    meta_off: u32,
    meta_len: u32,
    value_off: u32,
    /// [`TOMBSTONE`] for a tombstone.
    value_len: u32,
}

/// The WRITE rows of a rebuilt snapshot: every row indexed, or (v4) blocks indexed when read.
pub struct RemoteRows {
    shard_id: u64,
    kind: Kind,
}

enum Kind {
    /// v1-v3: every row, indexed when the snapshot was rebuilt.
    Indexed(RowIndex),
    /// v4: blocks, each indexed when a read reaches it.
    Blocks(RowBlocks),
}

impl std::fmt::Debug for RemoteRows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("RemoteRows");
        match &self.kind {
            Kind::Indexed(rows) => d
                .field("keys", &rows.keys.len())
                .field("rows", &rows.rows.len()),
            Kind::Blocks(blocks) => d
                .field("blocks", &blocks.index.len())
                .field("rows", &blocks.index.row_count()),
        };
        d.field("bytes", &self.encoded_len())
            .field("max_version", &self.max_version())
            .finish()
    }
}

/// The rows of one or more keys, indexed over the received buffer (and the key and meta arenas
/// of a v2-v4 buffer): all the rows of a v1-v3 blob, or one block of a v4 blob.
struct RowIndex {
    data: Bytes,
    /// Where [`KeyEntry::off`] points: `data` for v1, the key arena otherwise.
    key_bytes: Bytes,
    /// Where [`RowEntry::meta_off`] points: `data` for v1, the meta arena otherwise.
    meta_bytes: Bytes,
    /// Ascending by key, no duplicates.
    keys: Vec<KeyEntry>,
    /// Key `i` owns `rows[keys[i].first_row..keys[i + 1].first_row]` (to the end for the last
    /// key), ascending by version.
    rows: Vec<RowEntry>,
    /// Highest version of any row (0 when empty).
    max_version: u64,
}

/// The index vectors of a block no longer read, lent to the next block's index (emptied):
/// a scan indexes one block after another without allocating them again.
#[derive(Default)]
struct Spare {
    keys: Vec<KeyEntry>,
    rows: Vec<RowEntry>,
}

/// A v4 blob: its checked block index; blocks are indexed when read ([`RowBlocks::block`]).
struct RowBlocks {
    data: Bytes,
    index: BlockIndex,
    /// The shard's end (empty: unbounded): the last block's keys must fall below it.
    end: Vec<u8>,
}

/// Appends `part` to `arena`; its offset, or `None` once the arena would reach 4 GiB.
fn arena_push(arena: &mut Vec<u8>, part: &[u8]) -> Option<u32> {
    let off = u32::try_from(arena.len()).ok()?;
    u32::try_from(arena.len() + part.len()).ok()?;
    match <&[u8; WRITE_META_LEN]>::try_from(part) {
        // A WRITE meta's length (nearly every meta is one): a copy of known length is a few
        // moves in line, where a length-varying one is a call to `memcpy`.
        Ok(meta) => arena.extend_from_slice(meta),
        Err(_) => arena.extend_from_slice(part),
    }
    Some(off)
}

/// Shipped keys that do not ascend: `key` at blob row `row` after `previous`.
fn keys_out_of_order(shard_id: u64, key: &[u8], previous: &[u8], row: u64) -> Error {
    Error::RemoteSnapshot {
        shard_id,
        detail: format!(
            "expected keys in ascending order, found key={key:?} after key={previous:?} row={row}"
        ),
    }
}

/// A shipped key outside `range` (what the range is: the shard's, or a v4 block's).
fn key_outside(shard_id: u64, range: &str, key: &[u8], row: u64) -> Error {
    Error::RemoteSnapshot {
        shard_id,
        detail: format!("expected keys inside {range}, found key={key:?} row={row}"),
    }
}

/// Byte offset of `part` (a subslice of `base`) in `base`.
fn offset_in(base: &[u8], part: &[u8]) -> u32 {
    // Both pointers lie in the same allocation and `base` is shorter than 4 GiB (checked by
    // `RowIndex::build`), so the difference fits.
    (part.as_ptr() as usize - base.as_ptr() as usize) as u32
}

impl RemoteRows {
    /// Reads `data` (memtable data as `SnapAccess::to_remote` produces it) for a shard covering
    /// `[start, end)` (empty `end` = unbounded): v1-v3 rows are decoded and indexed now, a v4
    /// blob's block index is checked now and its blocks when read.
    ///
    /// Errors: undecodable data is [`Error::RemoteMemtableData`]; rows a sender following the
    /// protocol never produces (another column family, a key outside the shard, keys not
    /// ascending, a buffer of 4 GiB or more) are [`Error::RemoteSnapshot`]. On a v4 blob, those
    /// of a block come from the read that reaches it.
    pub(crate) fn decode(shard_id: u64, start: &[u8], end: &[u8], data: &Bytes) -> Result<Self> {
        let corrupt = |source| Error::RemoteMemtableData { shard_id, source };
        let format = memtable_data::peek_format(data).map_err(corrupt)?;
        let kind = if format == MemtableDataFormat::V4 {
            let index = memtable_data::blocks(data).map_err(corrupt)?;
            let blocks = RowBlocks {
                data: data.clone(),
                index,
                end: end.to_vec(),
            };
            blocks.check_first_keys(shard_id, start)?;
            Kind::Blocks(blocks)
        } else {
            let rows = memtable_data::rows(data).map_err(corrupt)?;
            Kind::Indexed(RowIndex::build(
                shard_id,
                (start, end, "the shard range"),
                0,
                data,
                rows,
                Spare::default(),
            )?)
        };
        Ok(RemoteRows { shard_id, kind })
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        match &self.kind {
            Kind::Indexed(rows) => rows.rows.is_empty(),
            Kind::Blocks(blocks) => blocks.index.is_empty(),
        }
    }

    /// Bytes of the received memtable data the rows are read from.
    pub fn encoded_len(&self) -> usize {
        match &self.kind {
            Kind::Indexed(rows) => rows.data.len(),
            Kind::Blocks(blocks) => blocks.data.len(),
        }
    }

    /// Heap bytes held beside the received blob for reading it: the index and arenas of every
    /// row (v1-v3), or the block index (v4; each cursor holds one block's index on top).
    pub fn index_memory(&self) -> usize {
        match &self.kind {
            Kind::Indexed(rows) => rows.memory_size(),
            Kind::Blocks(blocks) => blocks.index.memory_size(),
        }
    }

    /// Highest version of any row (0 when empty): lets "is anything newer than ts here?" skip
    /// the rows without walking them.
    pub fn max_version(&self) -> u64 {
        match &self.kind {
            Kind::Indexed(rows) => rows.max_version,
            Kind::Blocks(blocks) => blocks.index.max_version(),
        }
    }

    /// The version of `key` a read at `ts` lands on (it may be a tombstone).
    pub fn get(&self, key: &[u8], ts: u64) -> Result<Option<RawVersion>> {
        match &self.kind {
            Kind::Indexed(rows) => Ok(rows.get(key, ts).map(RawVersion::from)),
            Kind::Blocks(blocks) => match blocks.block_of(key) {
                None => Ok(None),
                Some(b) => {
                    let rows = blocks.block(self.shard_id, b, Spare::default())?;
                    Ok(rows.get(key, ts).map(RawVersion::from))
                }
            },
        }
    }

    /// A cursor over the keys visible at `ts`; it starts unpositioned (seek first).
    pub fn iter(&self, ts: u64) -> RemoteRowsIter<'_> {
        RemoteRowsIter {
            rows: self,
            ts,
            block: 0,
            decoded: None,
            pos: None,
        }
    }

    /// Calls `visit` with every key `>= lower` in ascending order, with all its versions, until
    /// it returns `false` or an error.
    pub fn visit_keys_from(
        &self,
        lower: &[u8],
        mut visit: impl FnMut(RemoteKey<'_>) -> Result<bool>,
    ) -> Result<()> {
        let mut visit_index = |rows: &RowIndex| -> Result<bool> {
            for k in rows.lower_bound(lower)..rows.keys.len() {
                if !visit(RemoteKey { rows, k })? {
                    return Ok(false);
                }
            }
            Ok(true)
        };
        match &self.kind {
            Kind::Indexed(rows) => {
                visit_index(rows)?;
            }
            Kind::Blocks(blocks) => {
                let mut spare = Spare::default();
                for b in blocks.block_of(lower).unwrap_or(0)..blocks.index.len() {
                    let rows = blocks.block(self.shard_id, b, spare)?;
                    if !visit_index(&rows)? {
                        break;
                    }
                    spare = rows.into_spare();
                }
            }
        }
        Ok(())
    }
}

impl RowBlocks {
    /// Checks what a read relies on before it decodes a block: the blocks' first keys ascend
    /// and fall in the shard's range (a block's other keys are checked against them when it is
    /// decoded).
    fn check_first_keys(&self, shard_id: u64, start: &[u8]) -> Result<()> {
        let mut previous: Option<&[u8]> = None;
        for b in 0..self.index.len() {
            let key = self.index.first_key(&self.data, b);
            let row = self.index.row_base(b);
            if let Some(previous) = previous
                && key <= previous
            {
                return Err(keys_out_of_order(shard_id, key, previous, row));
            }
            let outside = key < start || (!self.end.is_empty() && key >= self.end.as_slice());
            if outside {
                return Err(key_outside(shard_id, "the shard range", key, row));
            }
            previous = Some(key);
        }
        Ok(())
    }

    /// The block a read of `key` starts in: the last whose first key is `<= key` (`None`: the
    /// key is below every row).
    fn block_of(&self, key: &[u8]) -> Option<usize> {
        let (mut lo, mut hi) = (0, self.index.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.index.first_key(&self.data, mid) <= key {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo.checked_sub(1)
    }

    /// Decodes and indexes block `b`: its keys must lie from its first key to below the next
    /// block's (the shard's end after the last block).
    fn block(&self, shard_id: u64, b: usize, spare: Spare) -> Result<RowIndex> {
        let corrupt = |source| Error::RemoteMemtableData { shard_id, source };
        let rows = self.index.rows(&self.data, b).map_err(corrupt)?;
        let first = self.index.first_key(&self.data, b);
        let range = match b + 1 < self.index.len() {
            true => (
                first,
                self.index.first_key(&self.data, b + 1),
                "the block's range (below the next block's first key)",
            ),
            false => (first, self.end.as_slice(), "the shard range"),
        };
        let row_base = self.index.row_base(b);
        RowIndex::build(shard_id, range, row_base, &self.data, rows, spare)
    }
}

impl RowIndex {
    /// Indexes the rows `iter` walks over `data` (all of a v1-v3 blob, or one v4 block, after
    /// `row_base` rows of the blob); their keys must lie in `range` = `(start, end, what the
    /// range is)` (empty end = unbounded).
    fn build(
        shard_id: u64,
        range: (&[u8], &[u8], &'static str),
        row_base: u64,
        data: &Bytes,
        mut iter: RowIter<'_>,
        spare: Spare,
    ) -> Result<Self> {
        let (start, end, range_name) = range;
        let bad = |detail: String| Error::RemoteSnapshot { shard_id, detail };
        if data.len() >= u32::MAX as usize {
            return Err(bad(format!(
                "expected memtable data under 4 GiB, found len={}",
                data.len()
            )));
        }
        let outside = |key: &[u8], row: u64| key_outside(shard_id, range_name, key, row);
        let corrupt = |source| Error::RemoteMemtableData { shard_id, source };
        let in_place = iter.format() == MemtableDataFormat::V1;
        // The count is bounded by the body length, so the input justifies the allocations.
        // Every vector is sized up front: growing one by doubling copied it into fresh pages
        // at every step (a tenth of the decode in `stratus-bench txn-snapshot`). There are at
        // most as many keys as rows, and a v2 row's WRITE meta is 17 bytes (others are rare);
        // capacity never written costs no memory.
        let row_count = iter.row_count() as usize;
        let Spare { mut keys, mut rows } = spare;
        keys.clear();
        rows.clear();
        keys.reserve(row_count);
        rows.reserve(row_count);
        // The arenas come from the pool of shipping buffers, and go back to it with the
        // snapshot: a worker rebuilds snapshots again and again, and a fresh arena faulted in
        // every page it wrote.
        let mut key_arena = SHIP_BUFFERS.take(0);
        let mut meta_arena = if in_place {
            SHIP_BUFFERS.take(0)
        } else {
            SHIP_BUFFERS.take(row_count.saturating_mul(WRITE_META_LEN).min(data.len()))
        };
        let mut max_version = 0;
        let base: &[u8] = data;
        let key_range = |e: &KeyEntry| e.off as usize..e.off as usize + e.len as usize;
        let mut i = row_base;
        while let Some(row) = iter.next_row_ordered() {
            // The cursor orders each key against the one before (for v2 and v3 from the
            // shared prefix it decoded, with no second comparison of the keys).
            let (row, order) = row.map_err(corrupt)?;
            if row.cf != ColumnFamily::Write {
                return Err(bad(format!(
                    "expected only write rows, found cf={} row={i}",
                    row.cf
                )));
            }
            // The decoder already refused a repeated key whose version does not ascend.
            if order.is_lt() {
                let source: &[u8] = if in_place { base } else { &key_arena };
                let last = keys.last().map_or(&[][..], |e| &source[key_range(e)]);
                return Err(keys_out_of_order(shard_id, row.key, last, i));
            }
            if order.is_gt() {
                // Keys ascend, so only the first can fall below the range; the end is checked
                // once, on the last key, after the loop.
                if keys.is_empty() && row.key < start {
                    return Err(outside(row.key, i));
                }
                let off = if in_place {
                    offset_in(base, row.key)
                } else {
                    if keys.is_empty() {
                        // Keys of one range tend to share a length: a guess at the arena's
                        // size, bounded by the input.
                        let guess = row_count.saturating_mul(row.key.len()).min(data.len());
                        key_arena = SHIP_BUFFERS.take(guess);
                    }
                    arena_push(&mut key_arena, row.key).ok_or_else(|| {
                        bad("expected the keys to fit in 4 GiB, found more".to_owned())
                    })?
                };
                keys.push(KeyEntry {
                    off,
                    len: row.key.len() as u32,
                    first_row: rows.len() as u32,
                });
            }
            let meta_off = if in_place {
                offset_in(base, row.user_meta)
            } else {
                arena_push(&mut meta_arena, row.user_meta).ok_or_else(|| {
                    bad("expected the user metas to fit in 4 GiB, found more".to_owned())
                })?
            };
            max_version = max_version.max(row.version);
            rows.push(RowEntry {
                version: row.version,
                meta_off,
                meta_len: row.user_meta.len() as u32,
                value_off: offset_in(base, row.value),
                value_len: if row.tombstone {
                    TOMBSTONE
                } else {
                    row.value.len() as u32
                },
            });
            i += 1;
        }
        let (key_bytes, meta_bytes) = if in_place {
            (data.clone(), data.clone())
        } else {
            (key_arena.into_bytes(0), meta_arena.into_bytes(0))
        };
        let indexed = RowIndex {
            data: data.clone(),
            key_bytes,
            meta_bytes,
            keys,
            rows,
            max_version,
        };
        let n = indexed.keys.len();
        if !end.is_empty() && n > 0 && indexed.key_at(n - 1) >= end {
            // The first key at or past the end is the row to report.
            let k = indexed.keys.partition_point(|e| indexed.key_of(e) < end);
            let row = row_base + u64::from(indexed.keys[k].first_row);
            return Err(outside(indexed.key_at(k), row));
        }
        Ok(indexed)
    }

    /// Heap bytes of its index vectors and arenas (not the received buffer's).
    fn memory_size(&self) -> usize {
        let arena = |bytes: &Bytes| match bytes.as_ptr() == self.data.as_ptr() {
            true => 0,
            false => bytes.len(),
        };
        self.keys.capacity() * std::mem::size_of::<KeyEntry>()
            + self.rows.capacity() * std::mem::size_of::<RowEntry>()
            + arena(&self.key_bytes)
            + arena(&self.meta_bytes)
    }

    /// Its index vectors, for the next block's.
    fn into_spare(self) -> Spare {
        Spare {
            keys: self.keys,
            rows: self.rows,
        }
    }

    fn key_of(&self, e: &KeyEntry) -> &[u8] {
        &self.key_bytes[e.off as usize..e.off as usize + e.len as usize]
    }

    fn key_at(&self, k: usize) -> &[u8] {
        self.key_of(&self.keys[k])
    }

    /// The rows of key `k`, as indexes into `rows`.
    fn rows_of(&self, k: usize) -> std::ops::Range<usize> {
        let first = self.keys[k].first_row as usize;
        let end = self
            .keys
            .get(k + 1)
            .map_or(self.rows.len(), |e| e.first_row as usize);
        first..end
    }

    /// The row of key `k` a read at `ts` lands on: its newest version `<= ts`.
    fn visible_row(&self, k: usize, ts: u64) -> Option<usize> {
        let range = self.rows_of(k);
        let below = self.rows[range.clone()].partition_point(|r| r.version <= ts);
        (below > 0).then(|| range.start + below - 1)
    }

    /// Index of the first key `>= key`.
    fn lower_bound(&self, key: &[u8]) -> usize {
        self.keys.partition_point(|e| self.key_of(e) < key)
    }

    /// Index of the first key `> key`.
    fn upper_bound(&self, key: &[u8]) -> usize {
        self.keys.partition_point(|e| self.key_of(e) <= key)
    }

    /// (key, row) of the first key at index `>= k` with a version visible at `ts`.
    fn first_visible_from(&self, k: usize, ts: u64) -> Option<(usize, usize)> {
        (k..self.keys.len()).find_map(|k| self.visible_row(k, ts).map(|row| (k, row)))
    }

    /// (key, row) of the last key at index `< end` with a version visible at `ts`.
    fn last_visible_before(&self, end: usize, ts: u64) -> Option<(usize, usize)> {
        (0..end)
            .rev()
            .find_map(|k| self.visible_row(k, ts).map(|row| (k, row)))
    }

    fn version_at(&self, row: usize) -> RemoteVersion<'_> {
        RemoteVersion { rows: self, row }
    }

    /// The version of `key` a read at `ts` lands on (it may be a tombstone).
    fn get(&self, key: &[u8], ts: u64) -> Option<RemoteVersion<'_>> {
        let k = self.lower_bound(key);
        if k == self.keys.len() || self.key_at(k) != key {
            return None;
        }
        self.visible_row(k, ts).map(|row| self.version_at(row))
    }
}

/// One key of [`RemoteRows`] and its versions.
#[derive(Clone, Copy)]
pub struct RemoteKey<'a> {
    rows: &'a RowIndex,
    k: usize,
}

impl<'a> RemoteKey<'a> {
    /// The user key.
    pub fn key(&self) -> &'a [u8] {
        self.rows.key_at(self.k)
    }

    /// The key's versions, newest first. Never empty.
    pub fn versions_newest_first(
        &self,
    ) -> impl ExactSizeIterator<Item = RemoteVersion<'a>> + DoubleEndedIterator + use<'a> {
        let rows = self.rows;
        rows.rows_of(self.k)
            .rev()
            .map(move |row| rows.version_at(row))
    }
}

/// One version in [`RemoteRows`].
#[derive(Clone, Copy)]
pub struct RemoteVersion<'a> {
    rows: &'a RowIndex,
    row: usize,
}

impl<'a> RemoteVersion<'a> {
    fn entry(&self) -> RowEntry {
        self.rows.rows[self.row]
    }

    pub fn version(&self) -> u64 {
        self.entry().version
    }

    pub fn is_tombstone(&self) -> bool {
        self.entry().value_len == TOMBSTONE
    }

    pub fn user_meta(&self) -> &'a [u8] {
        let e = self.entry();
        &self.rows.meta_bytes[e.meta_off as usize..e.meta_off as usize + e.meta_len as usize]
    }

    /// The value; empty for a tombstone.
    pub fn value(&self) -> &'a [u8] {
        let e = self.entry();
        match e.value_len {
            TOMBSTONE => &[],
            len => &self.rows.data[e.value_off as usize..e.value_off as usize + len as usize],
        }
    }

    /// The user meta as a zero-copy `Bytes` of the received buffer (or of the meta arena).
    pub fn user_meta_bytes(&self) -> Bytes {
        self.rows.meta_bytes.slice_ref(self.user_meta())
    }

    /// The value as a zero-copy `Bytes` of the received buffer.
    pub fn value_bytes(&self) -> Bytes {
        match self.entry().value_len {
            TOMBSTONE => Bytes::new(),
            _ => self.rows.data.slice_ref(self.value()),
        }
    }
}

/// A cursor over the keys of [`RemoteRows`] visible at a read ts, each positioned on its newest
/// version `<= ts`; keys with no such version are skipped in both directions. Tombstones are
/// yielded (flagged): the merge with SSTs needs them. Moving an unpositioned cursor leaves it
/// unpositioned. Over a v4 blob it holds the block it is in, indexed, and moves to the next or
/// previous block past its ends; a block that fails to decode is the error of that move.
pub struct RemoteRowsIter<'a> {
    rows: &'a RemoteRows,
    ts: u64,
    /// v4: the block the cursor is in (0 before the first seek).
    block: usize,
    /// v4: that block's rows (`None` before the first seek, or after a block failed).
    decoded: Option<Box<RowIndex>>,
    /// (key index, row index) of the current position, in the rows [`Self::current`] returns.
    pos: Option<(usize, usize)>,
}

impl<'a> RemoteRowsIter<'a> {
    /// The rows the position indexes: all of them, or the current block's.
    fn current(&self) -> Option<&RowIndex> {
        match &self.rows.kind {
            Kind::Indexed(rows) => Some(rows),
            Kind::Blocks(_) => self.decoded.as_deref(),
        }
    }

    /// v4: makes block `b` the current one, decoding it unless it already is.
    fn load(&mut self, blocks: &RowBlocks, b: usize) -> Result<&RowIndex> {
        let rows = match self.decoded.take() {
            Some(rows) if self.block == b => rows,
            // The block it replaces lends its index vectors to the next.
            stale => {
                let spare = stale.map(|rows| rows.into_spare()).unwrap_or_default();
                Box::new(blocks.block(self.rows.shard_id, b, spare)?)
            }
        };
        self.block = b;
        Ok(self.decoded.insert(rows))
    }

    /// Positions on the first visible key at index `>= k` of block `b` (of the rows, for an
    /// indexed source), or of a later block.
    fn settle_forward(&mut self, mut b: usize, mut k: usize) -> Result<()> {
        self.pos = None;
        let (ts, source) = (self.ts, self.rows);
        match &source.kind {
            Kind::Indexed(rows) => self.pos = rows.first_visible_from(k, ts),
            Kind::Blocks(blocks) => {
                while b < blocks.index.len() {
                    if let Some(pos) = self.load(blocks, b)?.first_visible_from(k, ts) {
                        self.pos = Some(pos);
                        break;
                    }
                    (b, k) = (b + 1, 0);
                }
            }
        }
        Ok(())
    }

    /// Positions on the last visible key at index `< end` of block `b` (`None`: all of its
    /// keys), or of an earlier block.
    fn settle_backward(&mut self, mut b: usize, mut end: Option<usize>) -> Result<()> {
        self.pos = None;
        let (ts, source) = (self.ts, self.rows);
        match &source.kind {
            Kind::Indexed(rows) => {
                self.pos = rows.last_visible_before(end.unwrap_or(rows.keys.len()), ts);
            }
            Kind::Blocks(blocks) => loop {
                let rows = self.load(blocks, b)?;
                let pos = rows.last_visible_before(end.unwrap_or(rows.keys.len()), ts);
                if pos.is_some() || b == 0 {
                    self.pos = pos;
                    break;
                }
                (b, end) = (b - 1, None);
            },
        }
        Ok(())
    }

    /// Positions on the first visible key `>= key`.
    pub fn seek(&mut self, key: &[u8]) -> Result<()> {
        // Unpositioned until it lands: a block that fails to decode leaves no stale position.
        self.pos = None;
        let source = self.rows;
        match &source.kind {
            Kind::Indexed(rows) => self.settle_forward(0, rows.lower_bound(key)),
            Kind::Blocks(blocks) if blocks.index.is_empty() => Ok(()),
            Kind::Blocks(blocks) => {
                let b = blocks.block_of(key).unwrap_or(0);
                let k = self.load(blocks, b)?.lower_bound(key);
                self.settle_forward(b, k)
            }
        }
    }

    /// Positions on the last visible key `<= key`.
    pub fn seek_for_prev(&mut self, key: &[u8]) -> Result<()> {
        self.pos = None;
        let source = self.rows;
        match &source.kind {
            Kind::Indexed(rows) => self.settle_backward(0, Some(rows.upper_bound(key))),
            Kind::Blocks(blocks) => match blocks.block_of(key) {
                None => Ok(()),
                Some(b) => {
                    let end = self.load(blocks, b)?.upper_bound(key);
                    self.settle_backward(b, Some(end))
                }
            },
        }
    }

    /// Positions on the last visible key.
    pub fn seek_to_last(&mut self) -> Result<()> {
        self.pos = None;
        let source = self.rows;
        match &source.kind {
            Kind::Blocks(blocks) => match blocks.index.len().checked_sub(1) {
                None => Ok(()),
                Some(last) => self.settle_backward(last, None),
            },
            Kind::Indexed(_) => self.settle_backward(0, None),
        }
    }

    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<()> {
        match self.pos {
            Some((k, _)) => self.settle_forward(self.block, k + 1),
            None => Ok(()),
        }
    }

    pub fn prev(&mut self) -> Result<()> {
        match self.pos {
            Some((k, _)) => self.settle_backward(self.block, Some(k)),
            None => Ok(()),
        }
    }

    pub fn valid(&self) -> bool {
        self.pos.is_some()
    }

    /// The position and the rows it indexes; panics when the cursor is not valid.
    fn at(&self) -> (&RowIndex, usize, usize) {
        let (k, row) = self.pos.expect("iterator is not valid");
        let rows = self.current().expect("a valid cursor has rows");
        (rows, k, row)
    }

    pub fn key(&self) -> &[u8] {
        let (rows, k, _) = self.at();
        rows.key_at(k)
    }

    pub fn version(&self) -> u64 {
        let (rows, _, row) = self.at();
        rows.version_at(row).version()
    }

    pub fn is_tombstone(&self) -> bool {
        let (rows, _, row) = self.at();
        rows.version_at(row).is_tombstone()
    }

    pub fn user_meta(&self) -> &[u8] {
        let (rows, _, row) = self.at();
        rows.version_at(row).user_meta()
    }

    pub fn value(&self) -> &[u8] {
        let (rows, _, row) = self.at();
        rows.version_at(row).value()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use changeset::{MemRowRef, MemtableDataWriter};
    use proptest::prelude::*;

    use super::*;

    /// key -> version -> (tombstone, meta, value): the model.
    type Model = BTreeMap<Vec<u8>, BTreeMap<u64, (bool, Vec<u8>, Vec<u8>)>>;
    /// What a read sees: (key, version, tombstone, meta, value).
    type Seen = (Vec<u8>, u64, bool, Vec<u8>, Vec<u8>);

    /// A format and (v4) the block size its writer cuts at.
    type Shipping = (MemtableDataFormat, usize);

    fn encode(model: &Model, (format, block_target): Shipping) -> Bytes {
        let mut w = MemtableDataWriter::with_format(format, 0).with_block_target(block_target);
        for (key, versions) in model {
            for (&version, (tombstone, meta, value)) in versions {
                w.push(MemRowRef {
                    cf: ColumnFamily::Write,
                    key,
                    version,
                    user_meta: meta,
                    value: if *tombstone { &[] } else { value },
                    tombstone: *tombstone,
                })
                .expect("model rows are ordered");
            }
        }
        w.finish()
    }

    fn model_at(model: &Model, key: &[u8], ts: u64) -> Option<Seen> {
        let (&version, (tombstone, meta, value)) = model.get(key)?.range(..=ts).next_back()?;
        Some((
            key.to_vec(),
            version,
            *tombstone,
            meta.clone(),
            if *tombstone {
                Vec::new()
            } else {
                value.clone()
            },
        ))
    }

    /// The model's visible keys at `ts`, ascending.
    fn model_scan(model: &Model, ts: u64) -> Vec<Seen> {
        model
            .keys()
            .filter_map(|k| model_at(model, k, ts))
            .collect()
    }

    fn seen(it: &RemoteRowsIter<'_>) -> Seen {
        (
            it.key().to_vec(),
            it.version(),
            it.is_tombstone(),
            it.user_meta().to_vec(),
            it.value().to_vec(),
        )
    }

    fn model() -> impl Strategy<Value = Model> {
        let key = prop::collection::vec(b'a'..b'e', 0..3);
        let version = (
            any::<bool>(),
            prop::collection::vec(any::<u8>(), 0..3),
            prop::collection::vec(any::<u8>(), 0..4),
        );
        let versions = prop::collection::btree_map(1u64..20, version, 1..5);
        prop::collection::btree_map(key, versions, 0..12).prop_map(|mut model| {
            // Two-byte metas become WRITE metas (kind, start_ts, commit_ts = version), which
            // v2 ships compactly and the receiver rebuilds.
            for versions in model.values_mut() {
                for (&version, (_, meta, _)) in versions.iter_mut() {
                    if meta.len() == 2 {
                        let start_ts = version - u64::from(meta[1] % 2);
                        *meta = [
                            &[meta[0]][..],
                            &start_ts.to_le_bytes(),
                            &version.to_le_bytes(),
                        ]
                        .concat();
                    }
                }
            }
            model
        })
    }

    fn format() -> impl Strategy<Value = Shipping> {
        prop::sample::select(every_format())
    }

    /// Every format; v4 with blocks of one key, of a few, and of the default size.
    fn every_format() -> Vec<Shipping> {
        let mut all: Vec<Shipping> = MemtableDataFormat::ALL
            .into_iter()
            .map(|f| (f, memtable_data::BLOCK_TARGET))
            .collect();
        all.extend([1, 40].map(|target| (MemtableDataFormat::V4, target)));
        all
    }

    /// Rebuilds the rows and reads every block: the rows read, or the first error (a v4
    /// blob's blocks are checked only when read).
    fn read_all(start: &[u8], end: &[u8], data: &Bytes) -> Result<usize> {
        let rows = RemoteRows::decode(1, start, end, data)?;
        let mut count = 0;
        rows.visit_keys_from(b"", |k| {
            count += k.versions_newest_first().len();
            Ok(true)
        })?;
        Ok(count)
    }

    fn probe_key() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(b'a'..b'f', 0..4)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn point_reads_land_on_the_newest_version_at_or_below_ts(
            model in model(),
            format in format(),
            probes in prop::collection::vec((probe_key(), 0u64..22), 1..20),
        ) {
            let rows = RemoteRows::decode(1, b"", b"", &encode(&model, format)).unwrap();
            for (key, ts) in probes {
                let got = rows.get(&key, ts).unwrap().map(|v| {
                    (key.clone(), v.version, v.tombstone, v.user_meta.to_vec(), v.value.to_vec())
                });
                prop_assert_eq!(&got, &model_at(&model, &key, ts), "key={:?} ts={}", key, ts);
            }
        }

        #[test]
        fn iteration_at_ts_visits_the_visible_keys_in_both_directions(
            model in model(),
            format in format(),
            ts in 0u64..22,
        ) {
            let rows = RemoteRows::decode(1, b"", b"", &encode(&model, format)).unwrap();
            let expected = model_scan(&model, ts);
            let mut it = rows.iter(ts);
            it.seek(b"").unwrap();
            let mut forward = Vec::new();
            while it.valid() {
                forward.push(seen(&it));
                it.next().unwrap();
            }
            prop_assert_eq!(&forward, &expected);
            it.seek_to_last().unwrap();
            let mut backward = Vec::new();
            while it.valid() {
                backward.push(seen(&it));
                it.prev().unwrap();
            }
            backward.reverse();
            prop_assert_eq!(&backward, &expected);
        }

        #[test]
        fn seeks_then_steps_match_the_model(
            model in model(),
            format in format(),
            ts in 0u64..22,
            probes in prop::collection::vec((probe_key(), any::<bool>(), 0usize..4, any::<bool>()), 1..10),
        ) {
            let rows = RemoteRows::decode(1, b"", b"", &encode(&model, format)).unwrap();
            let expected = model_scan(&model, ts);
            let mut it = rows.iter(ts);
            for (key, for_prev, steps, forward) in probes {
                // Index in `expected` of the position the seek must land on.
                let mut at: Option<usize> = if for_prev {
                    expected.iter().rposition(|s| s.0 <= key)
                } else {
                    expected.iter().position(|s| s.0 >= key)
                };
                if for_prev { it.seek_for_prev(&key).unwrap() } else { it.seek(&key).unwrap() }
                for step in 0..=steps {
                    prop_assert_eq!(
                        it.valid().then(|| seen(&it)),
                        at.map(|i| expected[i].clone()),
                        "key={:?} for_prev={} step={}", key, for_prev, step
                    );
                    if !it.valid() {
                        break;
                    }
                    if forward {
                        it.next().unwrap();
                        at = at.and_then(|i| (i + 1 < expected.len()).then_some(i + 1));
                    } else {
                        it.prev().unwrap();
                        at = at.and_then(|i| i.checked_sub(1));
                    }
                }
            }
        }
    }

    #[test]
    fn keys_out_of_order_are_refused_in_every_format() {
        // A later key that sorts first, one that is a prefix of the key before it, and one
        // that differs after a shared prefix (v2 and v3 ship only the suffix).
        for pair in [[&b"b"[..], b"a"], [b"ab", b"a"], [b"ab", b"aa"]] {
            for (format, target) in every_format() {
                let mut w = MemtableDataWriter::with_format(format, 0).with_block_target(target);
                for key in pair {
                    w.push(MemRowRef {
                        cf: ColumnFamily::Write,
                        key,
                        version: 1,
                        user_meta: b"",
                        value: b"v",
                        tombstone: false,
                    })
                    .unwrap();
                }
                let err = read_all(b"", b"", &w.finish()).unwrap_err();
                assert!(
                    err.to_string().contains("ascending"),
                    "{format} {target} {pair:?}: {err}"
                );
            }
        }
    }

    #[test]
    fn keys_outside_the_shard_are_refused_naming_the_first_such_row() {
        /// The row and key the error names, or `None` for rows the shard accepts.
        type Refused = Option<(u64, &'static [u8])>;
        /// The rows' keys, the shard's start and end, and what is refused.
        type Case = (
            &'static [&'static [u8]],
            &'static [u8],
            &'static [u8],
            Refused,
        );
        let cases: [Case; 6] = [
            (&[b"z"], b"a", b"m", Some((0, b"z"))),
            (&[b"0", b"b"], b"a", b"m", Some((0, b"0"))),
            (&[b"b", b"c", b"c", b"m", b"n"], b"a", b"m", Some((3, b"m"))),
            (&[b"b", b"l", b"l"], b"a", b"m", None),
            (&[b"a", b"zz"], b"a", b"", None),
            (&[b"a", b"zz"], b"b", b"", Some((0, b"a"))),
        ];
        for (format, target) in every_format() {
            for (keys, start, end, want) in cases {
                let mut w = MemtableDataWriter::with_format(format, 0).with_block_target(target);
                for (n, key) in keys.iter().enumerate() {
                    w.push(MemRowRef {
                        cf: ColumnFamily::Write,
                        key,
                        version: n as u64 + 1,
                        user_meta: b"",
                        value: b"v",
                        tombstone: false,
                    })
                    .unwrap();
                }
                let got = read_all(start, end, &w.finish());
                match (want, got) {
                    (None, Ok(rows)) => assert_eq!(rows, keys.len()),
                    (Some((row, key)), Err(err @ Error::RemoteSnapshot { .. })) => {
                        let want = format!("found key={key:?} row={row}");
                        let case = format!("{format} {target} {keys:?}");
                        assert!(err.to_string().contains(&want), "{case}: {err}");
                    }
                    (want, got) => {
                        panic!("{format} {target} {keys:?}: expected {want:?}, found {got:?}")
                    }
                }
            }
        }
    }

    /// 50 keys of one version and a 100-byte value each, v4 with blocks of about 1 KiB.
    fn blob_of_several_blocks() -> Bytes {
        let mut w =
            MemtableDataWriter::with_format(MemtableDataFormat::V4, 0).with_block_target(1024);
        for i in 0..50u64 {
            w.push(MemRowRef {
                cf: ColumnFamily::Write,
                key: format!("k{i:03}").as_bytes(),
                version: 10 + i,
                user_meta: b"",
                value: &[i as u8; 100],
                tombstone: false,
            })
            .unwrap();
        }
        w.finish()
    }

    #[test]
    fn a_corrupt_v4_block_is_the_error_of_the_read_that_reaches_it() {
        let blob = blob_of_several_blocks();
        let index = memtable_data::blocks(&blob).unwrap();
        assert!(index.len() >= 4, "{} blocks", index.len());
        // A value byte of the third block: the rebuild checks only the index.
        let mut corrupt = blob.to_vec();
        corrupt[index.block_start(2) + 20] ^= 1;
        let corrupt = Bytes::from(corrupt);
        let rows = RemoteRows::decode(1, b"", b"", &corrupt).unwrap();
        // Reads of the first two blocks answer.
        let first_of_third = index.first_key(&blob, 2).to_vec();
        assert!(rows.get(b"k000", 100).unwrap().is_some());
        let mut it = rows.iter(100);
        it.seek(b"k000").unwrap();
        let mut read = 0;
        let err = loop {
            assert!(it.valid());
            assert!(it.key() < first_of_third.as_slice());
            read += 1;
            if let Err(err) = it.next() {
                break err;
            }
        };
        assert_eq!(read as u64, index.row_base(2));
        assert!(
            matches!(
                &err,
                Error::RemoteMemtableData {
                    source: changeset::MemtableDataError::ChecksumMismatch { .. },
                    ..
                }
            ),
            "{err}"
        );
        // A point read and a reverse scan into it fail the same way.
        assert!(rows.get(&first_of_third, 100).is_err());
        let mut it = rows.iter(100);
        it.seek_to_last().unwrap();
        let reverse = loop {
            assert!(
                it.valid(),
                "the reverse scan ended without reaching the corrupt block"
            );
            assert!(it.key() > first_of_third.as_slice());
            if let Err(err) = it.prev() {
                break err;
            }
        };
        assert!(
            matches!(reverse, Error::RemoteMemtableData { .. }),
            "{reverse}"
        );
    }

    #[test]
    fn a_v4_scan_crosses_blocks_in_both_directions_from_any_seek() {
        let blob = blob_of_several_blocks();
        let rows = RemoteRows::decode(1, b"", b"", &blob).unwrap();
        let keys: Vec<Vec<u8>> = (0..50u64)
            .map(|i| format!("k{i:03}").into_bytes())
            .collect();
        for (i, key) in keys.iter().enumerate() {
            let mut it = rows.iter(100);
            it.seek(key).unwrap();
            let mut forward = Vec::new();
            while it.valid() {
                forward.push(it.key().to_vec());
                it.next().unwrap();
            }
            assert_eq!(forward, keys[i..]);
            it.seek_for_prev(key).unwrap();
            let mut backward = Vec::new();
            while it.valid() {
                backward.push(it.key().to_vec());
                it.prev().unwrap();
            }
            backward.reverse();
            assert_eq!(backward, keys[..=i]);
        }
    }

    #[test]
    fn tombstone_reads_as_empty_value_whatever_was_shipped() {
        let mut w = MemtableDataWriter::new();
        w.push(MemRowRef {
            cf: ColumnFamily::Write,
            key: b"k",
            version: 3,
            user_meta: b"m",
            value: b"ignored",
            tombstone: true,
        })
        .unwrap();
        let rows = RemoteRows::decode(1, b"", b"", &w.finish()).unwrap();
        let v = rows.get(b"k", 5).unwrap().unwrap();
        assert!(v.tombstone);
        assert_eq!((&v.user_meta[..], &v.value[..]), (&b"m"[..], &b""[..]));
    }
}
