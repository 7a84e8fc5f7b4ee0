//! The memtable-data codec: memtable rows shipped from a storage server to a worker.
//!
//! A worker rebuilding a shard's snapshot needs the rows still in memtables (not yet flushed to
//! SSTs). The server emits them with [`MemtableDataWriter`], **oldest first per key**, so that a
//! receiver reading a key's rows in order sees its versions ascending (the engine's receiver
//! indexes them, see `kvengine/src/remote_rows.rs`). The receiver walks the rows with [`rows`],
//! which checks each row's structure as it is reached and the checksum as it goes, reporting a
//! mismatch at the end (a receiver that builds an index from the rows discards it on the first
//! error), or calls [`decode`], which checks the whole input before returning any row.
//!
//! **Four formats** ([`Format`]). Version 1 stores every row whole, so a receiver can index the
//! rows in place. Version 2 ([`Format::V2`]): keys are prefix-compressed against the row
//! before, versions are deltas, the 17-byte WRITE meta (`kind, start_ts, commit_ts`, with
//! commit_ts = version) shrinks to a byte and a varint (to nothing when the row before had the
//! same kind and `version - start_ts`: the rows of one transaction), and the checksum is
//! xxh3-64 instead of CRC32 (~3× faster here). Version 3 ([`Format::V3`]) is version 2 with two
//! more tag bits: a key or a value as long as the row before's stores no length (rows of one
//! table often have keys of one length, and often values too). Version 4 ([`Format::V4`], the
//! newest) cuts version 3's rows into blocks of about [`BLOCK_TARGET`] bytes, each with its own
//! checksum, behind an index of where each block is and its first key: a receiver checks the
//! index ([`blocks`]) and decodes a block only when a read reaches it
//! ([`BlockIndex::rows`]), as an SST's blocks are read, instead of decoding every row before
//! its first read. Every layout is on [`MemtableDataWriter`]. Every build reads all four;
//! which one a sender writes is negotiated (a server writes the newest format the worker
//! advertised, v1 until it heard from it), so a rolling upgrade works in either order.
//!
//! The decoder never panics and never allocates more than the input justifies: the row count is
//! bounded by the body length divided by the smallest possible row, and a v2 key is written in
//! full every [`RESTART_INTERVAL`] rows, so decoded keys are at most that many times the input.

use std::cmp::Ordering;

use bytes::Bytes;

use crate::error::MemtableDataError;
use crate::ship_buffers::{PoolBuf, SHIP_BUFFERS, ShipBuffers};
use types::ColumnFamily;

/// First four bytes of every memtable-data blob: `SMTD` (Stratus MemTable Data).
pub const MAGIC: u32 = u32::from_le_bytes(*b"SMTD");

/// A memtable-data layout version (the byte after the magic).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Format {
    /// Rows stored whole, CRC32 (IEEE).
    V1,
    /// Keys prefix-compressed, version deltas, compact WRITE meta, xxh3-64.
    V2,
    /// V2, and key and value lengths equal to the previous row's are flags.
    V3,
    /// V3's rows cut into blocks, each with its own checksum, behind a checked index: a
    /// receiver reads a block when a read reaches it, instead of decoding every row up front.
    V4,
}

impl Format {
    /// Every format this build reads, oldest first.
    pub const ALL: [Format; 4] = [Format::V1, Format::V2, Format::V3, Format::V4];
    /// The newest format this build writes and reads.
    pub const NEWEST: Format = Format::V4;

    /// The version byte.
    pub fn as_u8(self) -> u8 {
        match self {
            Format::V1 => 1,
            Format::V2 => 2,
            Format::V3 => 3,
            Format::V4 => 4,
        }
    }

    /// `v1` to `v4`: the name in messages and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::V1 => "v1",
            Format::V2 => "v2",
            Format::V3 => "v3",
            Format::V4 => "v4",
        }
    }

    /// The format of a version byte, if this build reads it.
    pub fn from_u8(version: u8) -> Option<Format> {
        match version {
            1 => Some(Format::V1),
            2 => Some(Format::V2),
            3 => Some(Format::V3),
            4 => Some(Format::V4),
            _ => None,
        }
    }

    /// The newest format both sides read, given the newest a peer advertised (a number it may
    /// not know: a newer peer reads every older format too). `0` (nothing advertised: a peer
    /// from before the negotiation) means [`Format::V1`].
    pub fn agreed(advertised: u32) -> Format {
        Format::ALL
            .into_iter()
            .rev()
            .find(|f| u32::from(f.as_u8()) <= advertised)
            .unwrap_or(Format::V1)
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// v1 row flag: the row is a deletion marker hiding older versions.
const FLAG_TOMBSTONE: u8 = 0b0000_0001;

/// v2 row tag: bits 0–1 the column family.
const TAG_CF: u8 = 0b0000_0011;
/// v2 row tag: the row is a deletion marker.
const TAG_TOMBSTONE: u8 = 0b0000_0100;
/// v2 row tag: the row's key is the previous row's (no key fields follow).
const TAG_SAME_KEY: u8 = 0b0000_1000;
/// v2 row tag: the user meta is a WRITE meta `[kind, ts u64le, version u64le]` with
/// `ts <= version`, stored as the kind byte and a varint of `version - ts`.
const TAG_TS_META: u8 = 0b0001_0000;
/// v2 row tag, with [`TAG_TS_META`] only: the WRITE meta has the previous row's kind and
/// `version - ts` (the rows of one transaction), so neither follows.
const TAG_SAME_TS_META: u8 = 0b0010_0000;
const TAG_KNOWN: u8 = TAG_CF | TAG_TOMBSTONE | TAG_SAME_KEY | TAG_TS_META | TAG_SAME_TS_META;
/// v3 row tag (not with [`TAG_SAME_KEY`], not on the first row): the key is as long as the
/// previous row's, so its suffix length (that length minus the shared prefix) is not stored.
const TAG_SAME_KEY_LEN: u8 = 0b0100_0000;
/// v3 row tag (not on the first row): the value is as long as the previous row's, so its
/// length is not stored.
const TAG_SAME_VALUE_LEN: u8 = 0b1000_0000;
const TAG_KNOWN_V3: u8 = TAG_KNOWN | TAG_SAME_KEY_LEN | TAG_SAME_VALUE_LEN;

/// Length of a user meta [`TAG_TS_META`] applies to.
const TS_META_LEN: usize = 17;

/// A v2 row whose index is a multiple of this stores its key in full (shared prefix 0, never
/// [`TAG_SAME_KEY`]): it bounds the bytes of decoded keys to this many times the input.
pub const RESTART_INTERVAL: u64 = 16;

/// Smallest encoded v1 row: cf, flags, three one-byte varints (empty key, meta, value), version.
const MIN_ROW_LEN_V1: u64 = 1 + 1 + 1 + 8 + 1 + 1;
/// Smallest encoded v2 row: tag, version delta, value length (the same key, and the same WRITE
/// meta as the row before).
const MIN_ROW_LEN_V2: u64 = 1 + 1 + 1;
/// Smallest encoded v3 row: tag, version delta (and the same value length as well).
const MIN_ROW_LEN_V3: u64 = 1 + 1;

const CRC_LEN: usize = 4;
const XXH3_LEN: usize = 8;

/// Room the writer keeps in front of the rows for the header: magic (4), format version (1),
/// body_len, row_count and (v4) block_count and block_target (varints of at most 10 bytes
/// each), and (v4) the highest version (8).
const HEADER_RESERVE: usize = 4 + 1 + 10 + 10 + 10 + 10 + 8;

/// v4: a block ends before the first row of a new key once its rows reach this many bytes. A
/// block is what a receiver decodes at once: small enough to stay in the L1 and L2 caches
/// while a scan reads it, large enough that its checksum and index entry are noise.
pub const BLOCK_TARGET: usize = 16 * 1024;

/// v4: bytes of one block index entry (`u32` end of the block in the body, `u32` rows).
const BLOCK_ENTRY_LEN: usize = 8;

/// The writer feeds its checksum this many bytes of rows at a time: big enough for the
/// checksum's wide loop, small enough to still sit in the L2 cache just after being written.
const CHECKSUM_CHUNK: usize = 64 * 1024;

/// One memtable row, slicing the decoded input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemRow {
    /// Column family of the row.
    pub cf: ColumnFamily,
    /// User key.
    pub key: Bytes,
    /// Version (commit_ts for WRITE rows).
    pub version: u64,
    /// User meta (start_ts + commit_ts for WRITE rows).
    pub user_meta: Bytes,
    /// Value; empty for tombstones.
    pub value: Bytes,
    /// Whether the row hides older versions of its key.
    pub tombstone: bool,
}

impl MemRow {
    /// A borrowed view, as [`MemtableDataWriter::push`] takes.
    pub fn as_ref(&self) -> MemRowRef<'_> {
        MemRowRef {
            cf: self.cf,
            key: &self.key,
            version: self.version,
            user_meta: &self.user_meta,
            value: &self.value,
            tombstone: self.tombstone,
        }
    }
}

/// One memtable row, borrowing its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemRowRef<'a> {
    /// Column family of the row.
    pub cf: ColumnFamily,
    /// User key.
    pub key: &'a [u8],
    /// Version (commit_ts for WRITE rows).
    pub version: u64,
    /// User meta (start_ts + commit_ts for WRITE rows).
    pub user_meta: &'a [u8],
    /// Value; empty for tombstones.
    pub value: &'a [u8],
    /// Whether the row hides older versions of its key.
    pub tombstone: bool,
}

impl MemRowRef<'_> {
    /// The row with copies of its bytes.
    pub fn to_row(&self) -> MemRow {
        MemRow {
            cf: self.cf,
            key: Bytes::copy_from_slice(self.key),
            version: self.version,
            user_meta: Bytes::copy_from_slice(self.user_meta),
            value: Bytes::copy_from_slice(self.value),
            tombstone: self.tombstone,
        }
    }
}

/// Encodes memtable rows in one [`Format`].
///
/// Fixed-size integers are little-endian; a varint is unsigned LEB128 in its shortest form.
/// The decoder rejects every encoding the writer would not produce (padded varints, a shorter
/// shared prefix than the keys share, a WRITE meta stored whole), so an accepted blob has
/// exactly one encoding per format and re-encodes to the same bytes.
///
/// **Format version 1:**
///
/// ```text
/// size      field
/// 4         magic, bytes "SMTD" (0x44544d53 as a little-endian u32)
/// 1         format version = 1
/// varint    body_len: length of the body in bytes
/// body_len  body:
///             varint  row_count
///             row_count rows:
///               1       cf: 0 write, 1 lock, 2 extra
///               1       flags: bit 0 tombstone, other bits zero
///               varint  key_len,       then key_len bytes of key
///               8       version (u64)
///               varint  user_meta_len, then user_meta_len bytes
///               varint  value_len,     then value_len bytes
/// 4         CRC32 (IEEE, crc32fast) of every byte before it
/// ```
///
/// **Format version 2:**
///
/// ```text
/// size      field
/// 4         magic, bytes "SMTD"
/// 1         format version = 2
/// varint    body_len: length of the rows in bytes
/// varint    row_count
/// body_len  row_count rows:
///             1       tag: bits 0-1 cf (0 write, 1 lock, 2 extra), bit 2 tombstone,
///                     bit 3 same key as the previous row, bit 4 WRITE meta, bit 5 (with bit
///                     4 only) same WRITE meta fields as the previous row; other bits zero
///             unless same key:
///               varint  shared: bytes the key shares with the previous row's key
///                       (0 on every row whose index is a multiple of RESTART_INTERVAL)
///               varint  suffix_len, then suffix_len bytes: the key after the shared bytes
///             varint  zigzag(version - previous row's version) (wrapping; 0 before the first)
///             if WRITE meta (user meta = [kind u8, ts u64, version u64] with ts <= version)
///             and not the same WRITE meta fields (which must be used when the previous row
///             had a WRITE meta of this kind and version - ts):
///               1       kind
///               varint  version - ts
///             else:
///               varint  user_meta_len, then user_meta_len bytes
///             varint  value_len, then value_len bytes
/// 8         xxh3-64 of the rows (u64)
/// ```
///
/// **Format version 3** is version 2 (header, checksum, rows) with the version byte 3 and two
/// more tag bits, each of which must be used whenever it applies (never on the first row):
///
/// ```text
/// tag bit 6  same key length: the key (not the same key) is as long as the previous row's;
///            suffix_len is not stored, it is that length minus shared (on a restart row, the
///            whole length)
/// tag bit 7  same value length: the value is as long as the previous row's; value_len is
///            not stored
/// ```
///
/// **Format version 4** cuts version 3's rows into blocks that a receiver checks and decodes
/// one at a time, when a read reaches them, behind an index it checks up front:
///
/// ```text
/// size      field
/// 4         magic, bytes "SMTD"
/// 1         format version = 4
/// varint    body_len: length of the blocks in bytes
/// varint    row_count: rows of every block
/// varint    block_count (0 exactly when row_count is 0)
/// varint    block_target (at least 1)
/// 8         max_version (u64): the highest version of any row (0 when there are none)
/// body_len  block_count blocks, block i:
///             rows in the version 3 row layout, each block on its own: the block's first row
///             is a first row (no length flags, no same-meta flag, version delta from 0), its
///             rows count from 0 for RESTART_INTERVAL (so its first key is stored whole), and
///             it ends before the first row of a new key that starts at or past block_target
///             bytes of its rows (the writer's default is BLOCK_TARGET), or with the rows
///             8       xxh3-64 of the block's rows
/// 8 each    block_count index entries, entry i:
///             4       end of block i (after its checksum), from the start of the body (u32)
///             4       rows in block i (u32, at least 1)
/// 8         xxh3-64 of the blocks' first keys (each as its length, u32, then its bytes, in
///           block order), then the index entries, then the header (magic to max_version)
/// ```
///
/// The last checksum covers everything a receiver reads before it decodes a block: where
/// blocks are, how many rows each holds, and each block's first key, which a read searches
/// to find the block a key is in. A block's rows are checked (its checksum, structure, and
/// versions at most max_version) when it is decoded; a walk of every block also checks that
/// max_version is the rows' highest, so an accepted v4 blob, too, has one encoding for its rows
/// and block_target. A body must be under 4 GiB.
///
/// The header is outside the v2 checksum yet every corruption of it is caught: the magic and
/// version are checked, body_len must match the input length exactly, and the rows must end
/// exactly at body_len after exactly row_count rows (no row is empty).
///
/// Rows of one key are adjacent and oldest first (strictly increasing version); the writer
/// refuses a row that breaks this against the row before it, and the decoder checks the same.
///
/// **How the writer avoids a second pass.** The header precedes the rows but is only known at
/// the end, so the writer encodes each row straight into one buffer behind [`HEADER_RESERVE`]
/// spare bytes, feeding the rows to the checksum every [`CHECKSUM_CHUNK`] bytes, while they are
/// still in cache (one call per row would pay the checksum's setup on every short row);
/// [`MemtableDataWriter::finish`] writes the header into the tail of the spare bytes, appends
/// the checksum (for v1 combining the header's CRC with the rows', `crc32fast::Hasher::
/// combine`, with no re-read of the rows), and returns the buffer as [`Bytes`] starting at the
/// header. The rows are written once and never copied. A v4 writer appends each block's
/// checksum when it cuts the block (its rows are fed the same way, block by block), keeps the
/// index entries aside and feeds each block's first key to the index checksum as the block
/// starts, so `finish` appends the index and that checksum without reading any row again.
#[derive(Debug)]
pub struct MemtableDataWriter {
    format: Format,
    /// `HEADER_RESERVE` spare bytes, then the encoded rows; from a pool of shipping
    /// buffers, to which the finished blob (or a writer dropped unfinished) hands it back.
    buf: PoolBuf,
    checksum: RowsChecksum,
    /// End of the rows `checksum` covers; the rest is fed in [`CHECKSUM_CHUNK`] pieces.
    checked_end: usize,
    rows: u64,
    /// Column family and version of the previous row.
    last: Option<(ColumnFamily, u64)>,
    /// The previous row's key.
    last_key: Vec<u8>,
    /// v2: kind and `version - ts` of the previous row's WRITE meta (`None`: it had none).
    last_ts_meta: Option<(u8, u64)>,
    /// The previous row's value length.
    last_value_len: usize,
    /// Rows of the current block (v1-v3 have one block: every row).
    block_rows: u64,
    /// v4: where the current block's rows start in `buf`.
    block_start: usize,
    /// v4: the block index entries so far.
    index: Vec<u8>,
    /// v4: the checksum of the index, fed each block's first key as the block starts.
    index_checksum: RowsChecksum,
    /// v4: the highest version pushed so far.
    max_version: u64,
    /// v4: a block ends before a new key once its rows reach this many bytes.
    block_target: usize,
}

/// The running checksum of a writer's rows.
enum RowsChecksum {
    Crc32(crc32fast::Hasher),
    Xxh3(Box<xxhash_rust::xxh3::Xxh3>),
}

impl std::fmt::Debug for RowsChecksum {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RowsChecksum::Crc32(_) => "Crc32",
            RowsChecksum::Xxh3(_) => "Xxh3",
        })
    }
}

impl RowsChecksum {
    /// An empty checksum of the kind `format` stores.
    fn of(format: Format) -> RowsChecksum {
        match format {
            Format::V1 => RowsChecksum::Crc32(crc32fast::Hasher::new()),
            Format::V2 | Format::V3 | Format::V4 => {
                RowsChecksum::Xxh3(Box::new(xxhash_rust::xxh3::Xxh3::new()))
            }
        }
    }

    fn update(&mut self, bytes: &[u8]) {
        match self {
            RowsChecksum::Crc32(h) => h.update(bytes),
            RowsChecksum::Xxh3(h) => h.update(bytes),
        }
    }

    /// The checksum of the bytes fed so far, as stored (a CRC widened to u64).
    fn value(&self) -> u64 {
        match self {
            RowsChecksum::Crc32(h) => u64::from(h.clone().finalize()),
            RowsChecksum::Xxh3(h) => h.digest(),
        }
    }
}

/// The cursor reads this far at most past what it fed the checksum before feeding it the next
/// chunk (rows are short; a longer one is still checked, only not from the cache).
const VERIFY_SLACK: usize = 1024;

/// The checksum a [`RowIter`] verifies as it walks the rows.
///
/// **Why not up front.** Checking the whole blob before decoding it read every byte from memory
/// twice, once for the checksum and once for the rows: the checksum was a quarter of rebuilding
/// a snapshot from a blob too large for the cache. The cursor instead feeds the checksum a
/// chunk ([`CHECKSUM_CHUNK`]) ahead of the row it decodes, so each chunk comes from memory once
/// and is decoded from the cache.
///
/// **What that changes for a caller: nothing it could act on.** The rows of a corrupt blob may
/// be yielded before the corruption is known, so the cursor's last step (after the last row)
/// is where a mismatch is reported, and a malformed row of a blob whose checksum does not
/// match is reported as the mismatch: every blob gets the same error as when the checksum came
/// first. Every caller builds from the rows something it discards on an error (an index, a
/// vector of rows, a transcoded blob), and the decoder is bounds-checked, so unverified bytes
/// can make it fail but never misbehave.
struct Verify {
    format: Format,
    checksum: RowsChecksum,
    /// The checksum stored after the rows.
    expected: u64,
    /// End of the bytes fed so far.
    fed: usize,
    /// End of the rows (where the stored checksum starts).
    end: usize,
}

impl Verify {
    /// Feeds the checksum the next chunk once `pos`, where the cursor reads next, nears the end
    /// of what it was fed.
    #[inline(always)]
    fn ahead_of(&mut self, data: &[u8], pos: usize) {
        if pos.saturating_add(VERIFY_SLACK) >= self.fed && self.fed < self.end {
            self.feed_to(data, pos.saturating_add(CHECKSUM_CHUNK));
        }
    }

    #[inline(never)]
    fn feed_to(&mut self, data: &[u8], to: usize) {
        let to = to.min(self.end);
        if to > self.fed {
            self.checksum.update(&data[self.fed..to]);
            self.fed = to;
        }
    }

    /// Feeds the rest of the rows and compares.
    fn finish(&mut self, data: &[u8]) -> Result<(), MemtableDataError> {
        self.feed_to(data, self.end);
        let found = self.checksum.value();
        if found != self.expected {
            return Err(MemtableDataError::ChecksumMismatch {
                format: self.format.as_u8(),
                expected: self.expected,
                found,
            });
        }
        Ok(())
    }

    /// `err`, or the checksum mismatch that explains it.
    #[cold]
    fn blame(&mut self, data: &[u8], err: MemtableDataError) -> MemtableDataError {
        self.finish(data).err().unwrap_or(err)
    }
}

impl Default for MemtableDataWriter {
    fn default() -> Self {
        Self::with_capacity(0)
    }
}

impl MemtableDataWriter {
    /// An empty writer of the newest format.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty writer of the newest format whose buffer starts with room for `bytes` bytes of
    /// rows.
    pub fn with_capacity(bytes: usize) -> Self {
        Self::with_format(Format::NEWEST, bytes)
    }

    /// An empty writer of `format` whose buffer starts with room for `bytes` bytes of rows.
    pub fn with_format(format: Format, bytes: usize) -> Self {
        Self::with_format_in(format, bytes, &SHIP_BUFFERS)
    }

    /// [`MemtableDataWriter::with_format`] with its buffer taken from `pool`, and handed back
    /// to it when the finished blob is dropped (see `ship_buffers`).
    pub fn with_format_in(format: Format, bytes: usize, pool: &'static ShipBuffers) -> Self {
        let mut buf = pool.take(HEADER_RESERVE.saturating_add(bytes));
        buf.resize(HEADER_RESERVE, 0);
        Self {
            format,
            buf,
            checksum: RowsChecksum::of(format),
            checked_end: HEADER_RESERVE,
            rows: 0,
            last: None,
            last_key: Vec::new(),
            last_ts_meta: None,
            last_value_len: 0,
            block_rows: 0,
            block_start: HEADER_RESERVE,
            index: Vec::new(),
            index_checksum: RowsChecksum::of(Format::V4),
            max_version: 0,
            block_target: BLOCK_TARGET,
        }
    }

    /// v4: blocks of `bytes` (at least 1) instead of [`BLOCK_TARGET`] (the header records it,
    /// so a reader takes any size); tests cut small blocks to put block boundaries between few
    /// rows.
    pub fn with_block_target(mut self, bytes: usize) -> Self {
        self.block_target = bytes.max(1);
        self
    }

    /// The format this writer writes.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Appends a row. Fails, appending nothing, when the row has the same column family and
    /// key as the previous row but a version that is not newer, or (v4) when the rows would
    /// reach 4 GiB.
    pub fn push(&mut self, row: MemRowRef<'_>) -> Result<(), MemtableDataError> {
        // One scan gives both the prefix v2 and v3 share with the previous key and whether the
        // key repeats (the order check below, and what `last_key` must copy).
        let shared = common_prefix(&self.last_key, row.key);
        let same_key =
            self.last.is_some() && shared == self.last_key.len() && shared == row.key.len();
        if let Some((cf, version)) = self.last
            && row.version <= version
            && cf == row.cf
            && same_key
        {
            return Err(MemtableDataError::VersionOrder {
                row: self.rows,
                previous: version,
                version: row.version,
            });
        }
        if self.format == Format::V4 {
            // Every offset of a v4 index is a u32 from the start of the body.
            let bound = (self.buf.len() - HEADER_RESERVE)
                // A cut before this row adds the block's checksum, and the last block's follows.
                .saturating_add(1 + 5 * MAX_VARINT_LEN + 2 * XXH3_LEN)
                .saturating_add(row.key.len() + row.user_meta.len() + row.value.len());
            if bound > u32::MAX as usize {
                return Err(MemtableDataError::BadBlock {
                    block: self.index.len() as u64 / BLOCK_ENTRY_LEN as u64,
                    expected: "blocks of under 4 GiB in all",
                    found: format!("{bound} bytes with row {}", self.rows),
                });
            }
            if self.block_rows > 0
                && !same_key
                && self.buf.len() - self.block_start >= self.block_target
            {
                self.end_block();
            }
            if self.block_rows == 0 {
                // Each key's length first, so the keys' bounds are covered too.
                self.index_checksum
                    .update(&(row.key.len() as u32).to_le_bytes());
                self.index_checksum.update(row.key);
            }
        }
        match self.format {
            Format::V1 => self.push_v1(row),
            Format::V2 | Format::V3 | Format::V4 => self.push_v2(row, same_key, shared),
        }
        if self.buf.len() - self.checked_end >= CHECKSUM_CHUNK {
            self.checksum.update(&self.buf[self.checked_end..]);
            self.checked_end = self.buf.len();
        }
        if !same_key {
            self.last_key.truncate(shared);
            self.last_key.extend_from_slice(&row.key[shared..]);
        }
        self.last = Some((row.cf, row.version));
        self.last_value_len = row.value.len();
        self.rows += 1;
        self.block_rows += 1;
        self.max_version = self.max_version.max(row.version);
        Ok(())
    }

    /// v4: closes the current block: its checksum, its index entry, and a fresh start for the
    /// next one (the row state a block's first row must not lean on).
    fn end_block(&mut self) {
        self.checksum.update(&self.buf[self.checked_end..]);
        let digest = self.checksum.value();
        self.buf.extend_from_slice(&digest.to_le_bytes());
        self.checksum = RowsChecksum::of(self.format);
        self.checked_end = self.buf.len();
        // `push` keeps the body under 4 GiB, and a block has fewer rows than bytes.
        let end = (self.buf.len() - HEADER_RESERVE) as u32;
        self.index.extend_from_slice(&end.to_le_bytes());
        self.index
            .extend_from_slice(&(self.block_rows as u32).to_le_bytes());
        self.block_start = self.buf.len();
        self.block_rows = 0;
        self.last_ts_meta = None;
    }

    fn push_v1(&mut self, row: MemRowRef<'_>) {
        // One reservation per row: the extends below never regrow the buffer one by one.
        self.buf.reserve(
            2 + 3 * MAX_VARINT_LEN + row.key.len() + 8 + row.user_meta.len() + row.value.len(),
        );
        self.buf.push(row.cf.as_u8());
        self.buf
            .push(if row.tombstone { FLAG_TOMBSTONE } else { 0 });
        put_varint(&mut self.buf, row.key.len() as u64);
        self.buf.extend_from_slice(row.key);
        self.buf.extend_from_slice(&row.version.to_le_bytes());
        put_varint(&mut self.buf, row.user_meta.len() as u64);
        self.buf.extend_from_slice(row.user_meta);
        put_varint(&mut self.buf, row.value.len() as u64);
        self.buf.extend_from_slice(row.value);
    }

    /// A v2, v3 or v4 row (v3 and v4 add the length flags); `lcp` is the length of the prefix its key
    /// shares with the previous row's.
    fn push_v2(&mut self, row: MemRowRef<'_>, same_key: bool, lcp: usize) {
        let restart = self.block_rows.is_multiple_of(RESTART_INTERVAL);
        let same_key = same_key && !restart;
        let lengths = self.format >= Format::V3 && self.block_rows > 0;
        let same_key_len = lengths && !same_key && row.key.len() == self.last_key.len();
        let same_value_len = lengths && row.value.len() == self.last_value_len;
        let ts_meta = ts_meta_delta(row.user_meta, row.version).map(|d| (row.user_meta[0], d));
        let same_ts_meta = ts_meta.is_some() && ts_meta == self.last_ts_meta;
        let mut tag = row.cf.as_u8() & TAG_CF;
        if row.tombstone {
            tag |= TAG_TOMBSTONE;
        }
        if same_key {
            tag |= TAG_SAME_KEY;
        }
        if ts_meta.is_some() {
            tag |= TAG_TS_META;
        }
        if same_ts_meta {
            tag |= TAG_SAME_TS_META;
        }
        if same_key_len {
            tag |= TAG_SAME_KEY_LEN;
        }
        if same_value_len {
            tag |= TAG_SAME_VALUE_LEN;
        }
        let shared = if same_key || restart { 0 } else { lcp };
        let suffix = if same_key {
            &[][..]
        } else {
            &row.key[shared..]
        };
        self.buf
            .reserve(1 + 5 * MAX_VARINT_LEN + suffix.len() + row.user_meta.len() + row.value.len());
        self.buf.push(tag);
        if !same_key {
            put_varint(&mut self.buf, shared as u64);
            if !same_key_len {
                put_varint(&mut self.buf, suffix.len() as u64);
            }
            self.buf.extend_from_slice(suffix);
        }
        let previous = match self.last {
            Some((_, v)) if self.block_rows > 0 => v,
            _ => 0,
        };
        put_varint(
            &mut self.buf,
            zigzag(row.version.wrapping_sub(previous) as i64),
        );
        match ts_meta {
            Some(_) if same_ts_meta => {}
            Some((kind, delta)) => {
                self.buf.push(kind);
                put_varint(&mut self.buf, delta);
            }
            None => {
                put_varint(&mut self.buf, row.user_meta.len() as u64);
                self.buf.extend_from_slice(row.user_meta);
            }
        }
        if !same_value_len {
            put_varint(&mut self.buf, row.value.len() as u64);
        }
        self.buf.extend_from_slice(row.value);
        self.last_ts_meta = ts_meta;
    }

    /// Number of rows pushed so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Bytes of encoded rows so far (the blob adds the header and the checksum).
    pub fn rows_len(&self) -> usize {
        self.buf.len() - HEADER_RESERVE
    }

    /// The encoded blob (layouts on [`MemtableDataWriter`]), without copying the rows.
    pub fn finish(mut self) -> Bytes {
        if self.format == Format::V4 && self.block_rows > 0 {
            self.end_block();
        }
        let Self {
            format,
            mut buf,
            mut checksum,
            checked_end,
            rows,
            index,
            mut index_checksum,
            max_version,
            block_target,
            ..
        } = self;
        checksum.update(&buf[checked_end..]);
        let rows_len = (buf.len() - HEADER_RESERVE) as u64;
        let mut count = [0u8; MAX_VARINT_LEN];
        let count_len = put_varint_array(&mut count, rows);
        let mut header = [0u8; HEADER_RESERVE];
        header[..4].copy_from_slice(&MAGIC.to_le_bytes());
        header[4] = format.as_u8();
        let mut len = 5;
        let body_len = match format {
            // v1's body_len covers the row count too.
            Format::V1 => count_len as u64 + rows_len,
            Format::V2 | Format::V3 | Format::V4 => rows_len,
        };
        len += put_varint_array(&mut header[len..], body_len);
        header[len..len + count_len].copy_from_slice(&count[..count_len]);
        len += count_len;
        if format == Format::V4 {
            let blocks = (index.len() / BLOCK_ENTRY_LEN) as u64;
            len += put_varint_array(&mut header[len..], blocks);
            len += put_varint_array(&mut header[len..], block_target as u64);
            header[len..len + 8].copy_from_slice(&max_version.to_le_bytes());
            len += 8;
        }
        let start = HEADER_RESERVE - len;
        buf[start..HEADER_RESERVE].copy_from_slice(&header[..len]);
        if format == Format::V4 {
            // The rows' checksums are the blocks' own (`end_block`); what follows them is the
            // index and its checksum, which the first keys already fed.
            buf.extend_from_slice(&index);
            index_checksum.update(&index);
            index_checksum.update(&header[..len]);
            buf.extend_from_slice(&index_checksum.value().to_le_bytes());
            return buf.into_bytes(start);
        }
        match checksum {
            RowsChecksum::Crc32(rows_crc) => {
                let mut crc = crc32fast::Hasher::new();
                crc.update(&header[..len]);
                crc.combine(&rows_crc);
                buf.extend_from_slice(&crc.finalize().to_le_bytes());
            }
            RowsChecksum::Xxh3(h) => buf.extend_from_slice(&h.digest().to_le_bytes()),
        }
        buf.into_bytes(start)
    }
}

/// `version - ts` when `meta` is a WRITE meta `[kind, ts u64le, version u64le]` with
/// `ts <= version` (v2 stores it as the kind and that delta).
fn ts_meta_delta(meta: &[u8], version: u64) -> Option<u64> {
    if meta.len() != TS_META_LEN || meta[9..17] != version.to_le_bytes() {
        return None;
    }
    let mut ts = [0u8; 8];
    ts.copy_from_slice(&meta[1..9]);
    version.checked_sub(u64::from_le_bytes(ts))
}

/// Length of the longest common prefix of `a` and `b`, eight bytes at a time (a byte loop was
/// a seventh of `to_remote`, with a key comparison of its own beside it).
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let (words_a, _) = a[..n].as_chunks::<8>();
    let (words_b, _) = b[..n].as_chunks::<8>();
    for (i, (x, y)) in words_a.iter().zip(words_b).enumerate() {
        let diff = u64::from_le_bytes(*x) ^ u64::from_le_bytes(*y);
        if diff != 0 {
            // Little-endian: the lowest set bit is in the first differing byte.
            return i * 8 + (diff.trailing_zeros() / 8) as usize;
        }
    }
    let done = words_a.len() * 8;
    done + a[done..n]
        .iter()
        .zip(&b[done..n])
        .take_while(|(x, y)| x == y)
        .count()
}

fn zigzag(value: i64) -> u64 {
    ((value << 1) ^ (value >> 63)) as u64
}

fn unzigzag(value: u64) -> i64 {
    ((value >> 1) as i64) ^ -((value & 1) as i64)
}

/// Encodes `rows` in order in the newest format (see [`MemtableDataWriter`]).
pub fn encode(rows: &[MemRow]) -> Result<Vec<u8>, MemtableDataError> {
    encode_as(Format::NEWEST, rows)
}

/// Encodes `rows` in order in `format`.
pub fn encode_as(format: Format, rows: &[MemRow]) -> Result<Vec<u8>, MemtableDataError> {
    let mut writer = MemtableDataWriter::with_format(format, 0);
    for row in rows {
        writer.push(row.as_ref())?;
    }
    Ok(writer.finish().into())
}

/// The same rows in `format`: `data` itself when it already is in `format`, else decoded and
/// encoded again (a sender answering a peer that reads only an older format).
pub fn transcode(data: &Bytes, format: Format) -> Result<Bytes, MemtableDataError> {
    let mut iter = rows(data)?;
    if iter.format() == format {
        iter.verify_checksum()?;
        return Ok(data.clone());
    }
    let mut writer = MemtableDataWriter::with_format(format, data.len());
    while let Some(row) = iter.next_row() {
        writer.push(row?)?;
    }
    Ok(writer.finish())
}

/// Decodes a blob (any format) into rows. Rows of a v1 blob slice `data` (no copies); a v2-v4
/// blob's keys and metas are rebuilt, so they are copied, and its values slice `data`.
pub fn decode(data: &Bytes) -> Result<Vec<MemRow>, MemtableDataError> {
    let mut iter = rows(data)?;
    // Bounded by the body length (see `rows`), so the input justifies the allocation.
    let mut out = Vec::with_capacity(iter.row_count() as usize);
    let base: &[u8] = data;
    let in_data = |part: &[u8]| {
        let (start, end) = (base.as_ptr() as usize, base.as_ptr() as usize + base.len());
        let p = part.as_ptr() as usize;
        p >= start && p + part.len() <= end
    };
    let bytes_of = |part: &[u8]| {
        if in_data(part) {
            data.slice_ref(part)
        } else {
            Bytes::copy_from_slice(part)
        }
    };
    while let Some(row) = iter.next_row() {
        let row = row?;
        out.push(MemRow {
            cf: row.cf,
            key: bytes_of(row.key),
            version: row.version,
            user_meta: bytes_of(row.user_meta),
            value: bytes_of(row.value),
            tombstone: row.tombstone,
        });
    }
    Ok(out)
}

/// [`decode`] of a slice (the rows own copies of their bytes).
pub fn decode_slice(data: &[u8]) -> Result<Vec<MemRow>, MemtableDataError> {
    decode(&Bytes::copy_from_slice(data))
}

/// The format of a blob, from its magic and version byte alone (nothing else is checked): lets
/// a receiver refuse a format it was told not to read before paying for the checksum.
pub fn peek_format(data: &[u8]) -> Result<Format, MemtableDataError> {
    let mut header = Cursor::new(data, data.len());
    let magic = u32::from_le_bytes(header.take_array()?);
    if magic != MAGIC {
        return Err(MemtableDataError::BadMagic { found: magic });
    }
    let [version] = header.take_array()?;
    Format::from_u8(version).ok_or(MemtableDataError::UnsupportedVersion {
        found: version,
        supported: Format::NEWEST.as_u8(),
    })
}

/// The blob must be exactly the `needed` bytes its header announces.
fn exact_len(data: &[u8], needed: u64) -> Result<(), MemtableDataError> {
    let available = data.len() as u64;
    if available < needed {
        return Err(MemtableDataError::Truncated { needed, available });
    }
    if available > needed {
        return Err(MemtableDataError::TrailingBytes {
            count: available - needed,
        });
    }
    Ok(())
}

/// Checks a blob's header and length, and returns a cursor over its rows that checks each row
/// as it is reached (structure, column family, tag bits, canonical form, version order against
/// the row before) and, after the last row, the checksum and that no bytes follow. Once it
/// yields an error it ends. A caller must discard what it built from the rows when the cursor
/// ends in an error: the rows of a corrupt blob may come before the mismatch (see `Verify`).
pub fn rows(data: &[u8]) -> Result<RowIter<'_>, MemtableDataError> {
    let format = peek_format(data)?;
    if format == Format::V4 {
        let index = blocks(data)?;
        return Ok(RowIter::over_blocks(data, index));
    }
    let mut header = Cursor::new(data, data.len());
    header.pos = 5;
    let body_len = header.varint()?;
    // v2's row count sits in the header, before the rows body_len counts.
    let count = match format {
        Format::V1 => None,
        Format::V2 | Format::V3 | Format::V4 => Some(header.varint()?),
    };
    let body_start = header.pos;
    let checksum_len = match format {
        Format::V1 => CRC_LEN,
        Format::V2 | Format::V3 | Format::V4 => XXH3_LEN,
    };
    exact_len(
        data,
        (body_start as u64)
            .saturating_add(body_len)
            .saturating_add(checksum_len as u64),
    )?;
    // `needed == data.len()`, so these fit in usize.
    let body_end = data.len() - checksum_len;
    let mut stored = [0u8; XXH3_LEN];
    stored[..checksum_len].copy_from_slice(&data[body_end..]);
    let expected = u64::from_le_bytes(stored);
    // The checksum is not read up front: the cursor feeds it the rows a chunk ahead of the
    // row it decodes (see `Verify`), so the rows are read from memory once, not twice.
    let mut checksum = RowsChecksum::of(format);
    // v2's checksum covers the rows only, v1's the header too.
    if format == Format::V1 {
        checksum.update(&data[..body_start]);
    }
    let mut verify = Verify {
        format,
        checksum,
        expected,
        fed: body_start,
        end: body_end,
    };

    let mut body = Cursor::new(data, body_end);
    body.pos = body_start;
    let counted = match format {
        Format::V1 => body.varint().map(|count| (count, MIN_ROW_LEN_V1)),
        Format::V2 => Ok((count.unwrap_or_default(), MIN_ROW_LEN_V2)),
        Format::V3 | Format::V4 => Ok((count.unwrap_or_default(), MIN_ROW_LEN_V3)),
    };
    let (count, min_row) = counted.map_err(|e| verify.blame(data, e))?;
    let max = body.remaining() as u64 / min_row;
    if count > max {
        let e = MemtableDataError::RowCountTooLarge { count, max };
        return Err(verify.blame(data, e));
    }
    Ok(RowIter::segment(format, verify, body, count))
}

/// The rows of a blob whose header and checksum [`rows`] checked, in order. A lending cursor
/// ([`RowIter::next_row`]): a v2 row's key and meta are rebuilt in the cursor's own buffers,
/// so a row borrows the cursor until the next call.
pub struct RowIter<'a> {
    format: Format,
    /// The checksum of the current segment (the blob's rows, or one v4 block), fed as its rows
    /// are reached and compared after its last one.
    verify: Verify,
    /// The current segment's rows.
    body: Cursor<'a>,
    /// Rows of the current segment.
    count: u64,
    /// Rows of every segment.
    total: u64,
    /// Index of the next row in the current segment.
    index: u64,
    /// Rows before the current segment (error messages count rows from the blob's first).
    row_base: u64,
    /// v4, walking a whole blob: its blocks and the next one to read.
    walk: Option<BlockWalk>,
    /// The highest version a row may have (v4's header states it).
    max_version: u64,
    /// v4: a block ends before the first new key at or past this many bytes of its rows.
    block_target: u64,
    /// Where the current segment's rows start.
    segment_start: usize,
    /// The highest version of the rows so far (a v4 walk checks the header's against it).
    seen_max_version: u64,
    /// Column family and version of the row before, for the order check and version deltas.
    previous: Option<(ColumnFamily, u64)>,
    /// v1: the previous row's key (it slices the input).
    key_v1: &'a [u8],
    /// v2: the current row's key, rebuilt from the shared prefix and the suffix.
    key: Vec<u8>,
    /// v2: the current row's WRITE meta, when it had [`TAG_TS_META`].
    meta: [u8; TS_META_LEN],
    /// v2: kind and `version - ts` of the previous row's WRITE meta (`None`: it had none).
    prev_ts_meta: Option<(u8, u64)>,
    /// v3: the previous row's value length.
    prev_value_len: usize,
    /// The current row's key against the previous row's (`Greater` for the first row).
    order: Ordering,
    done: bool,
}

impl<'a> RowIter<'a> {
    /// The format of the blob.
    pub fn format(&self) -> Format {
        self.format
    }

    /// The row count the header announces (at most the body length over the smallest row).
    pub fn row_count(&self) -> u64 {
        self.total
    }

    /// Checks the blob's checksum (v4: every block's not yet read) now rather than after the
    /// last row, for a caller that passes the blob on without walking it.
    pub fn verify_checksum(&mut self) -> Result<(), MemtableDataError> {
        let data = self.body.data;
        self.verify.finish(data)?;
        if let Some(walk) = &self.walk {
            for block in &walk.index.blocks[walk.next..] {
                block.verify(data).finish(data)?;
            }
        }
        Ok(())
    }

    /// A cursor over one segment of rows (`count` rows in `body`, checked by `verify`) with no
    /// v4 rules yet: what every constructor starts from.
    fn segment(format: Format, verify: Verify, body: Cursor<'a>, count: u64) -> RowIter<'a> {
        let segment_start = body.pos;
        RowIter {
            format,
            verify,
            body,
            count,
            total: count,
            index: 0,
            row_base: 0,
            walk: None,
            max_version: u64::MAX,
            block_target: u64::MAX,
            segment_start,
            seen_max_version: 0,
            previous: None,
            key_v1: &[],
            key: Vec::new(),
            meta: [0; TS_META_LEN],
            prev_ts_meta: None,
            prev_value_len: 0,
            order: Ordering::Greater,
            done: false,
        }
    }

    /// A cursor over every row of a v4 blob whose index [`blocks`] checked, block after block.
    fn over_blocks(data: &'a [u8], index: BlockIndex) -> RowIter<'a> {
        // No rows yet: an empty segment, whose checksum is that of nothing.
        let checksum = RowsChecksum::of(Format::V4);
        let nothing = Verify {
            format: Format::V4,
            expected: checksum.value(),
            checksum,
            fed: 0,
            end: 0,
        };
        let mut iter = RowIter {
            total: index.row_count,
            max_version: index.max_version,
            block_target: index.block_target,
            walk: Some(BlockWalk { index, next: 0 }),
            ..RowIter::segment(Format::V4, nothing, Cursor::new(data, 0), 0)
        };
        iter.next_block();
        iter
    }

    /// The rows of one v4 block, on their own (the order of its first key against the block
    /// before is not checked: the index's keys are the caller's to order).
    fn over_block(data: &'a [u8], block: &BlockRef, index: &BlockIndex) -> RowIter<'a> {
        RowIter {
            row_base: block.row_base,
            max_version: index.max_version,
            block_target: index.block_target,
            ..RowIter::segment(Format::V4, block.verify(data), block.body(data), block.rows)
        }
    }

    /// After a v4 walk's last row: the header's max_version must be the rows' highest (a
    /// reader of one block can check only that none is above it).
    fn check_max_version(&self) -> Result<(), MemtableDataError> {
        match &self.walk {
            Some(walk) if self.seen_max_version != self.max_version => {
                Err(MemtableDataError::BadBlock {
                    block: walk.index.len().saturating_sub(1) as u64,
                    expected: "a max_version that is the rows' highest version",
                    found: format!(
                        "max_version={} highest={}",
                        self.max_version, self.seen_max_version
                    ),
                })
            }
            _ => Ok(()),
        }
    }

    /// Moves a walk onto its next block; false when there is none. The key and the previous
    /// row stay: the block's first key is ordered against the last block's last.
    fn next_block(&mut self) -> bool {
        let Some(walk) = &mut self.walk else {
            return false;
        };
        let Some(block) = walk.index.blocks.get(walk.next) else {
            return false;
        };
        walk.next += 1;
        let data = self.body.data;
        self.verify = block.verify(data);
        self.body = block.body(data);
        self.count = block.rows;
        self.index = 0;
        self.row_base = block.row_base;
        self.segment_start = block.start;
        self.prev_ts_meta = None;
        self.prev_value_len = 0;
        true
    }

    /// The next row, an error (after which the cursor ends), or `None` after the last row.
    #[allow(clippy::should_implement_trait)] // lending: a row borrows the cursor
    pub fn next_row(&mut self) -> Option<Result<MemRowRef<'_>, MemtableDataError>> {
        self.next_row_ordered().map(|row| row.map(|(row, _)| row))
    }

    /// [`RowIter::next_row`], with the row's key compared to the previous row's (`Greater` for
    /// the first row). A receiver that needs keys in order reads it here for free on a v2 or
    /// v3 blob: the decoder knows the exact shared prefix, so one byte decides, where comparing
    /// the rebuilt keys again was a seventh of indexing the rows.
    pub fn next_row_ordered(
        &mut self,
    ) -> Option<Result<(MemRowRef<'_>, Ordering), MemtableDataError>> {
        if self.done {
            return None;
        }
        while self.index == self.count {
            let data = self.body.data;
            if let Err(mismatch) = self.verify.finish(data) {
                self.done = true;
                return Some(Err(mismatch));
            }
            let count = self.body.remaining() as u64;
            if count != 0 {
                self.done = true;
                return Some(Err(MemtableDataError::TrailingBytes { count }));
            }
            if !self.next_block() {
                self.done = true;
                return self.check_max_version().err().map(Err);
            }
        }
        let data = self.body.data;
        self.verify.ahead_of(data, self.body.pos);
        let index = self.index;
        self.index += 1;
        let decoded = match self.format {
            Format::V1 => self.row_v1(index).map(Decoded::Whole),
            Format::V2 | Format::V3 | Format::V4 => self.row_v2(index).map(Decoded::Rebuilt),
        };
        let row = match decoded {
            Ok(Decoded::Whole(row)) => row,
            Ok(Decoded::Rebuilt(row)) => MemRowRef {
                cf: row.cf,
                key: &self.key,
                version: row.version,
                user_meta: row.stored_meta.unwrap_or(&self.meta),
                value: row.value,
                tombstone: row.tombstone,
            },
            Err(e) => {
                self.done = true;
                return Some(Err(self.verify.blame(data, e)));
            }
        };
        Some(Ok((row, self.order)))
    }

    fn check_order(
        &mut self,
        index: u64,
        cf: ColumnFamily,
        same_key: bool,
        version: u64,
    ) -> Result<(), MemtableDataError> {
        if let Some((prev_cf, prev_version)) = self.previous
            && version <= prev_version
            && prev_cf == cf
            && same_key
        {
            return Err(MemtableDataError::VersionOrder {
                row: index,
                previous: prev_version,
                version,
            });
        }
        self.previous = Some((cf, version));
        Ok(())
    }

    fn row_v1(&mut self, index: u64) -> Result<MemRowRef<'a>, MemtableDataError> {
        let body = &mut self.body;
        let [cf, flags] = body.take_array()?;
        let cf = ColumnFamily::ALL
            .get(usize::from(cf))
            .copied()
            .ok_or(MemtableDataError::UnknownColumnFamily { cf, row: index })?;
        if flags & !FLAG_TOMBSTONE != 0 {
            return Err(MemtableDataError::UnknownFlags { flags, row: index });
        }
        let key = body.length_prefixed()?;
        let version = u64::from_le_bytes(body.take_array()?);
        let user_meta = body.length_prefixed()?;
        let value = body.length_prefixed()?;
        self.order = match self.previous {
            None => Ordering::Greater,
            Some(_) => key.cmp(self.key_v1),
        };
        self.check_order(index, cf, self.order.is_eq(), version)?;
        self.key_v1 = key;
        Ok(MemRowRef {
            cf,
            key,
            version,
            user_meta,
            value,
            tombstone: flags & FLAG_TOMBSTONE != 0,
        })
    }

    /// Decodes a v2, v3 or v4 row (`index` counts from its segment's first) into the cursor's
    /// key and meta buffers; the rest slices the input.
    fn row_v2(&mut self, index: u64) -> Result<RowV2<'a>, MemtableDataError> {
        let row = self.row_base + index;
        let malformed = |expected: &'static str, found: String| MemtableDataError::MalformedRow {
            row,
            expected,
            found,
        };
        let lengths = self.format >= Format::V3;
        let known = if lengths { TAG_KNOWN_V3 } else { TAG_KNOWN };
        let row_start = self.body.pos;
        let [tag] = self.body.take_array()?;
        if tag & !known != 0 {
            return Err(MemtableDataError::UnknownFlags { flags: tag, row });
        }
        let cf = ColumnFamily::ALL
            .get(usize::from(tag & TAG_CF))
            .copied()
            .ok_or(MemtableDataError::UnknownColumnFamily {
                cf: tag & TAG_CF,
                row,
            })?;
        let restart = index.is_multiple_of(RESTART_INTERVAL);
        // The first row of its segment (of a v4 block); the blob's first has no row before.
        let first = index == 0;
        if first && tag & (TAG_SAME_KEY_LEN | TAG_SAME_VALUE_LEN) != 0 {
            return Err(malformed(
                "no length flag on the first row",
                format!("tag={tag:#04x}"),
            ));
        }
        self.order = if tag & TAG_SAME_KEY != 0 {
            if tag & TAG_SAME_KEY_LEN != 0 {
                return Err(malformed(
                    "the same-key flag or the same-key-length flag",
                    "both".into(),
                ));
            }
            if restart {
                return Err(malformed(
                    "a full key on a restart row",
                    "the same-key flag".into(),
                ));
            }
            Ordering::Equal
        } else {
            let shared = self.body.varint()?;
            let previous_len = self.key.len() as u64;
            if restart && shared != 0 {
                return Err(malformed(
                    "shared prefix 0 on a restart row",
                    format!("shared={shared}"),
                ));
            }
            if shared > previous_len {
                return Err(malformed(
                    "a shared prefix at most the previous key's length",
                    format!("shared={shared} previous_len={previous_len}"),
                ));
            }
            let suffix = if tag & TAG_SAME_KEY_LEN != 0 {
                self.body.take(previous_len - shared)?
            } else {
                let suffix = self.body.length_prefixed()?;
                if lengths && !first && shared + suffix.len() as u64 == previous_len {
                    return Err(malformed(
                        "the same-key-length flag for a key as long as the previous one",
                        "the suffix length stored".into(),
                    ));
                }
                suffix
            };
            let shared = shared as usize;
            // The writer shares as much as the keys share, and flags a repeated key.
            if !restart {
                if shared == self.key.len() && suffix.is_empty() {
                    return Err(malformed(
                        "the same-key flag for a repeated key",
                        "an empty suffix".into(),
                    ));
                }
                if suffix
                    .first()
                    .is_some_and(|&b| self.key.get(shared) == Some(&b))
                {
                    return Err(malformed(
                        "the longest shared prefix",
                        format!("shared={shared} with more bytes in common"),
                    ));
                }
            }
            let order = if self.previous.is_none() {
                Ordering::Greater
            } else if restart {
                suffix.cmp(&self.key)
            } else {
                // The keys share exactly `shared` bytes (checked above): the next byte of
                // each, or which one ends there, orders them.
                match (suffix.first(), self.key.get(shared)) {
                    (Some(new), Some(old)) => new.cmp(old),
                    (Some(_), None) => Ordering::Greater,
                    (None, Some(_)) => Ordering::Less,
                    (None, None) => Ordering::Equal,
                }
            };
            if first && order.is_eq() {
                // Only a v4 walk has a row before a segment's first: its block's last.
                return Err(malformed(
                    "a block starting with a new key",
                    "the previous block's last key".into(),
                ));
            }
            self.key.truncate(shared);
            self.key.extend_from_slice(suffix);
            order
        };
        // v4: the writer cuts a block before the first new key at or past its target.
        let into_block = (row_start - self.segment_start) as u64;
        if !first && !self.order.is_eq() && into_block >= self.block_target {
            return Err(malformed(
                "a block ending before the first new key past the block target",
                format!(
                    "a new key {into_block} bytes into the block, block_target={}",
                    self.block_target
                ),
            ));
        }
        let delta = unzigzag(self.body.varint()?);
        let base = match self.previous {
            Some((_, v)) if !first => v,
            _ => 0,
        };
        let version = base.wrapping_add(delta as u64);
        if version > self.max_version {
            return Err(malformed(
                "versions at most the header's max_version",
                format!("version={version} max_version={}", self.max_version),
            ));
        }
        self.seen_max_version = self.seen_max_version.max(version);
        let ts_meta = tag & TAG_TS_META != 0;
        if tag & TAG_SAME_TS_META != 0 && (!ts_meta || self.prev_ts_meta.is_none()) {
            return Err(malformed(
                "the same-WRITE-meta flag only after a row with a WRITE meta",
                format!("tag={tag:#04x} previous WRITE meta={:?}", self.prev_ts_meta),
            ));
        }
        let stored_meta = if ts_meta {
            let (kind, below) = match self.prev_ts_meta {
                Some(prev) if tag & TAG_SAME_TS_META != 0 => prev,
                prev => {
                    let [kind] = self.body.take_array()?;
                    let below = self.body.varint()?;
                    if prev == Some((kind, below)) {
                        return Err(malformed(
                            "the same-WRITE-meta flag for a repeated WRITE meta",
                            "the kind and version - ts stored again".into(),
                        ));
                    }
                    (kind, below)
                }
            };
            self.prev_ts_meta = Some((kind, below));
            let Some(ts) = version.checked_sub(below) else {
                return Err(malformed(
                    "a WRITE meta timestamp at most the version",
                    format!("version={version} version-ts={below}"),
                ));
            };
            self.meta[0] = kind;
            self.meta[1..9].copy_from_slice(&ts.to_le_bytes());
            self.meta[9..17].copy_from_slice(&version.to_le_bytes());
            None
        } else {
            self.prev_ts_meta = None;
            let meta = self.body.length_prefixed()?;
            if ts_meta_delta(meta, version).is_some() {
                return Err(malformed(
                    "the WRITE-meta flag for a WRITE meta",
                    "the meta stored whole".into(),
                ));
            }
            Some(meta)
        };
        let value = if tag & TAG_SAME_VALUE_LEN != 0 {
            self.body.take(self.prev_value_len as u64)?
        } else {
            let value = self.body.length_prefixed()?;
            if lengths && !first && value.len() == self.prev_value_len {
                return Err(malformed(
                    "the same-value-length flag for a value as long as the previous one",
                    "the value length stored".into(),
                ));
            }
            value
        };
        self.prev_value_len = value.len();
        self.check_order(row, cf, self.order.is_eq(), version)?;
        Ok(RowV2 {
            cf,
            version,
            stored_meta,
            value,
            tombstone: tag & TAG_TOMBSTONE != 0,
        })
    }
}

/// Where one v4 block sits in its blob (offsets from the blob's start).
#[derive(Clone, Copy, Debug)]
struct BlockRef {
    /// Its first row.
    start: usize,
    /// The end of its rows, where its checksum starts.
    rows_end: usize,
    rows: u64,
    /// Rows of the blocks before it.
    row_base: u64,
    /// Its first key, stored whole in its first row.
    first_key: (usize, usize),
}

impl BlockRef {
    /// A cursor over the block's rows.
    fn body<'d>(&self, data: &'d [u8]) -> Cursor<'d> {
        Cursor {
            data,
            pos: self.start,
            end: self.rows_end,
        }
    }

    /// The block's checksum, fed from nothing.
    fn verify(&self, data: &[u8]) -> Verify {
        let mut stored = [0u8; XXH3_LEN];
        stored.copy_from_slice(&data[self.rows_end..self.rows_end + XXH3_LEN]);
        Verify {
            format: Format::V4,
            checksum: RowsChecksum::of(Format::V4),
            expected: u64::from_le_bytes(stored),
            fed: self.start,
            end: self.rows_end,
        }
    }
}

/// A [`RowIter`]'s walk through a v4 blob's blocks.
struct BlockWalk {
    index: BlockIndex,
    next: usize,
}

/// The checked block index of a v4 blob ([`blocks`]): where each block is, its rows and its
/// first key. A receiver searches the first keys for the block a key is in and decodes only
/// that block ([`BlockIndex::rows`]).
#[derive(Clone, Debug)]
pub struct BlockIndex {
    blocks: Vec<BlockRef>,
    row_count: u64,
    max_version: u64,
    block_target: u64,
    /// Length of the blob it was read from.
    len: usize,
}

impl BlockIndex {
    /// Number of blocks.
    pub fn len(&self) -> usize {
        self.blocks.len()
    }

    /// Whether there are no blocks (and so no rows).
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// Rows of every block.
    pub fn row_count(&self) -> u64 {
        self.row_count
    }

    /// The highest version of any row, as the header states it (every decoded row is checked
    /// against it).
    pub fn max_version(&self) -> u64 {
        self.max_version
    }

    /// The first key of `block` (< [`BlockIndex::len`]) in `data`, the blob the index was read
    /// from.
    pub fn first_key<'d>(&self, data: &'d [u8], block: usize) -> &'d [u8] {
        let (start, end) = self.blocks[block].first_key;
        &data[start..end]
    }

    /// Heap bytes the index holds.
    pub fn memory_size(&self) -> usize {
        self.blocks.capacity() * std::mem::size_of::<BlockRef>()
    }

    /// The size the writer cut blocks at (see [`MemtableDataWriter::with_block_target`]).
    pub fn block_target(&self) -> u64 {
        self.block_target
    }

    /// Rows of the blocks before `block`.
    pub fn row_base(&self, block: usize) -> u64 {
        self.blocks[block].row_base
    }

    /// Where `block`'s first row sits in the blob.
    pub fn block_start(&self, block: usize) -> usize {
        self.blocks[block].start
    }

    /// A cursor over the rows of `block` (< [`BlockIndex::len`]) in `data`, the blob the
    /// index was read from, that checks them as [`rows`] does and the block's checksum after
    /// its last row. Its first row reads as the first (`Ordering::Greater`).
    pub fn rows<'d>(&self, data: &'d [u8], block: usize) -> Result<RowIter<'d>, MemtableDataError> {
        if data.len() != self.len {
            return Err(MemtableDataError::BadBlock {
                block: block as u64,
                expected: "the blob its index was read from",
                found: format!("a blob of {} bytes, not {}", data.len(), self.len),
            });
        }
        Ok(RowIter::over_block(data, &self.blocks[block], self))
    }
}

/// Checks a v4 blob's header, its block index and the checksum over them and the blocks'
/// first keys, without reading any block past its first key. The blocks' rows are checked
/// when read ([`BlockIndex::rows`]).
pub fn blocks(data: &[u8]) -> Result<BlockIndex, MemtableDataError> {
    let format = peek_format(data)?;
    if format != Format::V4 {
        return Err(MemtableDataError::NotBlocked {
            format: format.as_u8(),
        });
    }
    let mut header = Cursor::new(data, data.len());
    header.pos = 5;
    let body_len = header.varint()?;
    let row_count = header.varint()?;
    let block_count = header.varint()?;
    let block_target = header.varint()?;
    let max_version = u64::from_le_bytes(header.take_array()?);
    let body_start = header.pos;
    let index_len = block_count.saturating_mul(BLOCK_ENTRY_LEN as u64);
    exact_len(
        data,
        (body_start as u64)
            .saturating_add(body_len)
            .saturating_add(index_len)
            .saturating_add(XXH3_LEN as u64),
    )?;
    // `needed == data.len()`, so these fit in usize.
    let body_end = body_start + body_len as usize;
    let index_end = body_end + index_len as usize;
    let bad = |block: usize, expected: &'static str, found: String| MemtableDataError::BadBlock {
        block: block as u64,
        expected,
        found,
    };
    let mut checksum = xxhash_rust::xxh3::Xxh3::new();
    // At most one entry per 8 bytes of the input, so the input justifies the allocation.
    let mut blocks = Vec::with_capacity(block_count as usize);
    let (mut start, mut row_base) = (0u64, 0u64);
    let (entries, _) = data[body_end..index_end].as_chunks::<BLOCK_ENTRY_LEN>();
    for (i, entry) in entries.iter().enumerate() {
        let [e0, e1, e2, e3, r0, r1, r2, r3] = *entry;
        let end = u64::from(u32::from_le_bytes([e0, e1, e2, e3]));
        let rows = u64::from(u32::from_le_bytes([r0, r1, r2, r3]));
        let least = start + rows * MIN_ROW_LEN_V3 + XXH3_LEN as u64;
        if rows == 0 || end < least || end > body_len {
            return Err(bad(
                i,
                "at least one row, then a checksum, ending within the body",
                format!("rows={rows} start={start} end={end} body_len={body_len}"),
            ));
        }
        let block = BlockRef {
            start: body_start + start as usize,
            rows_end: body_start + end as usize - XXH3_LEN,
            rows,
            row_base,
            first_key: (0, 0),
        };
        // A first row that does not parse is blamed on the block's checksum when that does
        // not match, as a malformed row is (see `Verify`).
        let first_key = block_first_key(data, &block).map_err(|found| {
            let malformed = bad(i, "a first row storing its key whole", found);
            block.verify(data).blame(data, malformed)
        })?;
        // The key's length fits: it was read from a varint and lies within the input.
        checksum.update(&((first_key.1 - first_key.0) as u32).to_le_bytes());
        checksum.update(&data[first_key.0..first_key.1]);
        blocks.push(BlockRef { first_key, ..block });
        (start, row_base) = (end, row_base + rows);
    }
    checksum.update(&data[body_end..index_end]);
    checksum.update(&data[..body_start]);
    let mut stored = [0u8; XXH3_LEN];
    stored.copy_from_slice(&data[index_end..]);
    let (expected, found) = (u64::from_le_bytes(stored), checksum.digest());
    if expected != found {
        return Err(MemtableDataError::ChecksumMismatch {
            format: 4,
            expected,
            found,
        });
    }
    let last = blocks.len().saturating_sub(1);
    if start != body_len {
        return Err(bad(
            last,
            "blocks that fill the body",
            format!("the last ending at {start} of {body_len}"),
        ));
    }
    if row_base != row_count {
        return Err(bad(
            last,
            "as many rows in the blocks as the header counts",
            format!("{row_base} rows in the blocks, row_count={row_count}"),
        ));
    }
    if block_target == 0 {
        return Err(bad(last, "a block target of at least 1", "0".into()));
    }
    // Every block but the last was cut: its rows reached the target (where within the block
    // the cut fell is checked as its rows are read).
    if let Some(b) = blocks[..last.min(blocks.len())]
        .iter()
        .position(|b| ((b.rows_end - b.start) as u64) < block_target)
    {
        let short = &blocks[b];
        return Err(bad(
            b,
            "a block that is not the last to reach the block target",
            format!(
                "{} bytes of rows, block_target={block_target}",
                short.rows_end - short.start
            ),
        ));
    }
    Ok(BlockIndex {
        blocks,
        row_count,
        max_version,
        block_target,
        len: data.len(),
    })
}

/// Where the first key of `block` sits: its first row stores it whole (no same-key flags,
/// shared prefix 0). Only the key is read; the rest of the row is checked with the block.
fn block_first_key(data: &[u8], block: &BlockRef) -> Result<(usize, usize), String> {
    let mut row = block.body(data);
    let [tag] = row.take_array().map_err(|e| e.to_string())?;
    if tag & (TAG_SAME_KEY | TAG_SAME_KEY_LEN) != 0 {
        return Err(format!("tag={tag:#04x}"));
    }
    let shared = row.varint().map_err(|e| e.to_string())?;
    if shared != 0 {
        return Err(format!("shared={shared}"));
    }
    let key = row.length_prefixed().map_err(|e| e.to_string())?;
    let start = key.as_ptr() as usize - data.as_ptr() as usize;
    Ok((start, start + key.len()))
}

/// A row as its format decodes it.
enum Decoded<'a> {
    /// A v1 row, slicing the input.
    Whole(MemRowRef<'a>),
    /// A v2-v4 row, whose key and WRITE meta sit in the cursor.
    Rebuilt(RowV2<'a>),
}

/// A decoded v2 row but its key and (WRITE) meta, which sit in the [`RowIter`]'s buffers.
struct RowV2<'a> {
    cf: ColumnFamily,
    version: u64,
    /// The meta as stored, or `None` when it is the cursor's rebuilt WRITE meta.
    stored_meta: Option<&'a [u8]>,
    value: &'a [u8],
    tombstone: bool,
}

/// Longest LEB128 encoding of a u64.
const MAX_VARINT_LEN: usize = 10;

/// Appends `value` as a shortest-form unsigned LEB128 varint.
#[inline(always)]
fn put_varint(out: &mut Vec<u8>, value: u64) {
    // Nearly every varint of a row is one byte: a push, where a slice of varying length was a
    // call to `memcpy`.
    if value < 0x80 {
        out.push(value as u8);
        return;
    }
    let mut bytes = [0u8; MAX_VARINT_LEN];
    let len = put_varint_array(&mut bytes, value);
    out.extend_from_slice(&bytes[..len]);
}

/// Writes `value` as a shortest-form unsigned LEB128 varint at the start of `out` (which must
/// have room for it: [`MAX_VARINT_LEN`] bytes always suffice); returns its length.
fn put_varint_array(out: &mut [u8], mut value: u64) -> usize {
    let mut len = 0;
    while value >= 0x80 {
        out[len] = (value as u8) | 0x80;
        value >>= 7;
        len += 1;
    }
    out[len] = value as u8;
    len + 1
}

/// Reads `data[pos..end]`; error offsets count from the start of `data`.
struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
    end: usize,
}

impl<'a> Cursor<'a> {
    fn new(data: &'a [u8], end: usize) -> Self {
        Self { data, pos: 0, end }
    }

    fn remaining(&self) -> usize {
        self.end - self.pos
    }

    #[inline(always)]
    fn take(&mut self, len: u64) -> Result<&'a [u8], MemtableDataError> {
        if len > self.remaining() as u64 {
            return Err(MemtableDataError::Truncated {
                needed: (self.pos as u64).saturating_add(len),
                available: self.end as u64,
            });
        }
        let bytes = &self.data[self.pos..self.pos + len as usize];
        self.pos += len as usize;
        Ok(bytes)
    }

    #[inline(always)]
    fn take_array<const N: usize>(&mut self) -> Result<[u8; N], MemtableDataError> {
        let bytes = self.take(N as u64)?;
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    #[inline(always)]
    fn length_prefixed(&mut self) -> Result<&'a [u8], MemtableDataError> {
        let len = self.varint()?;
        self.take(len)
    }

    /// A shortest-form LEB128 varint of at most ten bytes.
    #[inline(always)]
    fn varint(&mut self) -> Result<u64, MemtableDataError> {
        // Nearly every varint of a row (lengths, shared prefixes, version deltas) is one byte:
        // read in line, with the general loop out of line.
        if let Some(&byte) = self.data[..self.end].get(self.pos)
            && byte < 0x80
        {
            self.pos += 1;
            return Ok(u64::from(byte));
        }
        self.varint_multi_byte()
    }

    /// [`Cursor::varint`] past its one-byte case.
    #[inline(never)]
    fn varint_multi_byte(&mut self) -> Result<u64, MemtableDataError> {
        let offset = self.pos as u64;
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let [byte] = self.take_array()?;
            // The tenth byte may only carry the top bit of a u64.
            if shift == 63 && byte > 1 {
                return Err(MemtableDataError::BadVarint { offset });
            }
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                // A zero final byte after the first only pads the encoding.
                if byte == 0 && shift > 0 {
                    return Err(MemtableDataError::BadVarint { offset });
                }
                return Ok(value);
            }
        }
        Err(MemtableDataError::BadVarint { offset })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ship_buffers::HUGE_PAGE_HINT;

    fn varint_bytes(value: u64) -> Vec<u8> {
        let mut out = Vec::new();
        put_varint(&mut out, value);
        out
    }

    #[test]
    fn varints_round_trip_at_the_byte_boundaries() {
        for value in [
            0,
            1,
            0x7f,
            0x80,
            0x3fff,
            0x4000,
            u64::from(u32::MAX),
            u64::MAX,
        ] {
            let bytes = varint_bytes(value);
            let mut cursor = Cursor::new(&bytes, bytes.len());
            assert_eq!(cursor.varint(), Ok(value));
            assert_eq!(cursor.remaining(), 0);
        }
        assert_eq!(varint_bytes(u64::MAX).len(), 10);
    }

    #[test]
    fn padded_and_overflowing_varints_are_rejected() {
        for bytes in [
            vec![0x80, 0x00],
            vec![0xff, 0x80, 0x00],
            vec![0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02],
            vec![0x80; 11],
        ] {
            let mut cursor = Cursor::new(&bytes, bytes.len());
            assert_eq!(
                cursor.varint(),
                Err(MemtableDataError::BadVarint { offset: 0 }),
                "{bytes:02x?}"
            );
        }
    }

    #[test]
    fn empty_v1_blob_has_the_documented_layout() {
        let blob = MemtableDataWriter::with_format(Format::V1, 0).finish();
        // magic, version 1, body_len 1, row_count 0, crc
        assert_eq!(&blob[..7], b"SMTD\x01\x01\x00");
        let crc = crc32fast::hash(&blob[..7]);
        assert_eq!(&blob[7..], crc.to_le_bytes());
        assert_eq!(decode_slice(&blob), Ok(Vec::new()));
    }

    #[test]
    fn empty_v2_and_v3_blobs_have_the_documented_layout() {
        for (format, version) in [(Format::V2, b'\x02'), (Format::V3, b'\x03')] {
            let blob = MemtableDataWriter::with_format(format, 0).finish();
            // magic, version, body_len 0, row_count 0, xxh3 of no rows
            assert_eq!(&blob[..7], [&b"SMTD"[..], &[version, 0, 0]].concat());
            assert_eq!(&blob[7..], xxhash_rust::xxh3::xxh3_64(&[]).to_le_bytes());
            assert_eq!(decode_slice(&blob), Ok(Vec::new()));
        }
    }

    #[test]
    fn empty_v4_blob_has_the_documented_layout() {
        let blob = MemtableDataWriter::new().finish();
        assert_eq!(MemtableDataWriter::new().format(), Format::V4);
        // magic, version 4, body_len 0, row_count 0, block_count 0, block_target 16384 (a
        // three-byte varint), max_version 0, no index, then the xxh3 of no first keys, no
        // entries, and the header.
        let header = [&b"SMTD"[..], &[4, 0, 0, 0], &[0x80, 0x80, 0x01], &[0; 8]].concat();
        assert_eq!(&blob[..19], header);
        assert_eq!(
            &blob[19..],
            xxhash_rust::xxh3::xxh3_64(&header).to_le_bytes()
        );
        assert_eq!(decode_slice(&blob), Ok(Vec::new()));
        assert!(blocks(&blob).unwrap().is_empty());
    }

    proptest::proptest! {
        #[test]
        fn common_prefix_is_the_byte_by_byte_one(
            a in proptest::collection::vec(0u8..3, 0..40),
            b in proptest::collection::vec(0u8..3, 0..40),
        ) {
            let naive = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
            proptest::prop_assert_eq!(common_prefix(&a, &b), naive);
            let long_shared: Vec<u8> = [&[7u8; 19][..], &b].concat();
            let other: Vec<u8> = [&[7u8; 19][..], &a].concat();
            proptest::prop_assert_eq!(common_prefix(&long_shared, &other), 19 + naive);
        }
    }

    #[test]
    fn zigzag_round_trips_at_the_extremes() {
        for value in [0i64, 1, -1, 63, -64, i64::MAX, i64::MIN] {
            assert_eq!(unzigzag(zigzag(value)), value);
        }
        assert_eq!(zigzag(-1), 1);
        assert_eq!(zigzag(1), 2);
    }

    #[test]
    fn a_buffer_advised_huge_pages_holds_every_row_written_into_it() {
        // Past the hint's threshold, so the capacity is advised (on Linux) before any row is
        // written; rows with distinct bytes everywhere, so a page that lost its contents shows.
        let rows: Vec<MemRow> = (0..6000u64)
            .map(|i| MemRow {
                cf: ColumnFamily::Write,
                key: Bytes::from(format!("key{i:08}")),
                version: i + 1,
                user_meta: Bytes::new(),
                value: Bytes::from(vec![(i % 251) as u8; 2000]),
                tombstone: false,
            })
            .collect();
        for format in Format::ALL {
            let mut w = MemtableDataWriter::with_format(format, 2 * HUGE_PAGE_HINT);
            assert!(w.buf.capacity() >= 2 * HUGE_PAGE_HINT);
            for r in &rows {
                w.push(r.as_ref()).unwrap();
            }
            let blob = w.finish();
            assert!(
                blob.len() > HUGE_PAGE_HINT,
                "{format}: {} bytes",
                blob.len()
            );
            assert_eq!(decode(&blob).unwrap(), rows, "{format}");
        }
    }

    #[test]
    fn a_blob_written_into_a_reused_buffer_holds_only_its_own_rows() {
        static POOL: ShipBuffers = ShipBuffers::new(1, 64 << 20);
        let rows = |n: u64, fill: u8| -> Vec<MemRow> {
            (0..n)
                .map(|i| MemRow {
                    cf: ColumnFamily::Write,
                    key: Bytes::from(format!("key{i:08}")),
                    version: i + 1,
                    user_meta: Bytes::new(),
                    value: Bytes::from(vec![fill; 1000]),
                    tombstone: false,
                })
                .collect()
        };
        for format in Format::ALL {
            // A long blob leaves its bytes in the buffer; a shorter one written over them
            // must decode to its own rows (a stale header or tail would show).
            let (long, short) = (rows(3000, 0xaa), rows(1000, 0x55));
            let mut w = MemtableDataWriter::with_format_in(format, 4 << 20, &POOL);
            long.iter().for_each(|r| w.push(r.as_ref()).unwrap());
            let first = w.finish();
            let base = first.as_ptr() as usize;
            assert_eq!(decode(&first).unwrap(), long, "{format}");
            drop(first);
            let mut w = MemtableDataWriter::with_format_in(format, 4 << 20, &POOL);
            short.iter().for_each(|r| w.push(r.as_ref()).unwrap());
            let second = w.finish();
            // Each header ends at the same reserve's end, so the blobs start within it.
            let distance = (second.as_ptr() as usize).abs_diff(base);
            assert!(
                distance < HEADER_RESERVE,
                "{format}: the buffer is not reused"
            );
            assert_eq!(decode(&second).unwrap(), short, "{format}");
        }
    }

    #[test]
    fn agreed_format_is_the_newest_both_sides_read() {
        assert_eq!(Format::agreed(0), Format::V1);
        assert_eq!(Format::agreed(1), Format::V1);
        assert_eq!(Format::agreed(2), Format::V2);
        assert_eq!(Format::agreed(3), Format::V3);
        assert_eq!(Format::agreed(9), Format::NEWEST);
    }
}
