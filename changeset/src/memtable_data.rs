//! The memtable-data codec: memtable rows shipped from a storage server to a worker.
//!
//! A worker rebuilding a shard's snapshot needs the rows still in memtables (not yet flushed to
//! SSTs). The server emits them with [`MemtableDataWriter`], **oldest first per key**, so that a
//! receiver reading a key's rows in order sees its versions ascending (the engine's receiver
//! indexes them in place, see `kvengine/src/remote_rows.rs`). The receiver calls [`decode`]
//! (rows slicing a [`Bytes`]) or [`decode_ref`] (rows borrowing a slice), which check the whole
//! input (CRC, lengths, row order) before any row is returned, or walks the rows with [`rows`],
//! which checks the CRC up front and each row's structure as it is reached (a receiver that
//! builds an index from the rows discards it on the first error).
//!
//! The decoder never panics and never allocates more than the input justifies: the row count is
//! bounded by the body length divided by the smallest possible row.

use bytes::Bytes;

use crate::error::MemtableDataError;
use types::ColumnFamily;

/// First four bytes of every memtable-data blob: `SMTD` (Stratus MemTable Data).
pub const MAGIC: u32 = u32::from_le_bytes(*b"SMTD");

/// The format version this build writes and reads.
pub const FORMAT_VERSION: u8 = 1;

/// Row flag: the row is a deletion marker hiding older versions.
const FLAG_TOMBSTONE: u8 = 0b0000_0001;

/// Smallest encoded row: cf, flags, three one-byte varints (empty key, meta, value), version.
const MIN_ROW_LEN: u64 = 1 + 1 + 1 + 8 + 1 + 1;

const CRC_LEN: usize = 4;

/// Room the writer keeps in front of the rows for the header and the row count: magic (4),
/// format version (1), body_len and row_count (varints of at most 10 bytes each).
const HEADER_RESERVE: usize = 4 + 1 + 10 + 10;

/// The writer feeds its CRC this many bytes of rows at a time: big enough for the CRC's wide
/// loop, small enough to still sit in the L2 cache just after being written.
const CRC_CHUNK: usize = 64 * 1024;

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

/// Encodes memtable rows.
///
/// Byte layout, format version 1. Fixed-size integers are little-endian; a varint is unsigned
/// LEB128 in its shortest form (the decoder rejects padded varints, so an accepted blob has
/// exactly one encoding and re-encodes to the same bytes).
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
/// Rows of one key are adjacent and oldest first (strictly increasing version); the writer
/// refuses a row that breaks this against the row before it, and the decoder checks the same.
///
/// **How the writer avoids a second pass.** The header and the row count precede the rows but
/// are only known at the end, and the CRC covers them too. So the writer encodes each row
/// straight into one buffer behind [`HEADER_RESERVE`] spare bytes, feeding the rows to a CRC
/// every [`CRC_CHUNK`] bytes, while they are still in cache (one CRC call per row would pay
/// the CRC's setup on every short row); [`MemtableDataWriter::finish`] writes the header into the
/// tail of the spare bytes, combines the header's CRC with the rows' (`crc32fast::Hasher::
/// combine`, no re-read of the rows), appends it, and returns the buffer as [`Bytes`] starting
/// at the header. The rows are written once and never copied; the bytes are exactly the
/// layout above.
#[derive(Debug)]
pub struct MemtableDataWriter {
    /// `HEADER_RESERVE` spare bytes, then the encoded rows.
    buf: Vec<u8>,
    /// CRC of `buf[HEADER_RESERVE..crc_end]`.
    rows_crc: crc32fast::Hasher,
    /// End of the rows `rows_crc` covers; the rest is fed in [`CRC_CHUNK`] pieces.
    crc_end: usize,
    rows: u64,
    last: Option<LastRow>,
}

/// Where the previous row's key sits in the buffer, to check ordering without copying keys.
#[derive(Debug)]
struct LastRow {
    cf: ColumnFamily,
    key_start: usize,
    key_len: usize,
    version: u64,
}

impl Default for MemtableDataWriter {
    fn default() -> Self {
        Self::with_capacity(0)
    }
}

impl MemtableDataWriter {
    /// An empty writer.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty writer whose buffer starts with room for `bytes` bytes of rows.
    pub fn with_capacity(bytes: usize) -> Self {
        let mut buf = Vec::with_capacity(HEADER_RESERVE.saturating_add(bytes));
        buf.resize(HEADER_RESERVE, 0);
        Self {
            buf,
            rows_crc: crc32fast::Hasher::new(),
            crc_end: HEADER_RESERVE,
            rows: 0,
            last: None,
        }
    }

    /// Appends a row. Fails, appending nothing, when the row has the same column family and
    /// key as the previous row but a version that is not newer.
    pub fn push(&mut self, row: MemRowRef<'_>) -> Result<(), MemtableDataError> {
        if let Some(last) = &self.last {
            let last_key = &self.buf[last.key_start..last.key_start + last.key_len];
            // Version first: it rules out most rows without comparing keys.
            if row.version <= last.version && last.cf == row.cf && last_key == row.key {
                return Err(MemtableDataError::VersionOrder {
                    row: self.rows,
                    previous: last.version,
                    version: row.version,
                });
            }
        }
        // One reservation per row: the extends below never regrow the buffer one by one.
        self.buf.reserve(
            2 + 3 * MAX_VARINT_LEN + row.key.len() + 8 + row.user_meta.len() + row.value.len(),
        );
        self.buf.push(row.cf.as_u8());
        self.buf
            .push(if row.tombstone { FLAG_TOMBSTONE } else { 0 });
        put_varint(&mut self.buf, row.key.len() as u64);
        let key_start = self.buf.len();
        self.buf.extend_from_slice(row.key);
        self.buf.extend_from_slice(&row.version.to_le_bytes());
        put_varint(&mut self.buf, row.user_meta.len() as u64);
        self.buf.extend_from_slice(row.user_meta);
        put_varint(&mut self.buf, row.value.len() as u64);
        self.buf.extend_from_slice(row.value);
        if self.buf.len() - self.crc_end >= CRC_CHUNK {
            self.rows_crc.update(&self.buf[self.crc_end..]);
            self.crc_end = self.buf.len();
        }
        self.last = Some(LastRow {
            cf: row.cf,
            key_start,
            key_len: row.key.len(),
            version: row.version,
        });
        self.rows += 1;
        Ok(())
    }

    /// Number of rows pushed so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Bytes of encoded rows so far (the blob adds the header and the CRC).
    pub fn rows_len(&self) -> usize {
        self.buf.len() - HEADER_RESERVE
    }

    /// The encoded blob (layout on [`MemtableDataWriter`]), without copying the rows.
    pub fn finish(self) -> Bytes {
        let Self {
            mut buf,
            mut rows_crc,
            crc_end,
            rows,
            ..
        } = self;
        rows_crc.update(&buf[crc_end..]);
        let mut count = [0u8; MAX_VARINT_LEN];
        let count_len = put_varint_array(&mut count, rows);
        let body_len = (count_len + buf.len() - HEADER_RESERVE) as u64;
        let mut header = [0u8; HEADER_RESERVE];
        header[..4].copy_from_slice(&MAGIC.to_le_bytes());
        header[4] = FORMAT_VERSION;
        let mut len = 5;
        len += put_varint_array(&mut header[len..], body_len);
        header[len..len + count_len].copy_from_slice(&count[..count_len]);
        len += count_len;
        let start = HEADER_RESERVE - len;
        buf[start..HEADER_RESERVE].copy_from_slice(&header[..len]);
        let mut crc = crc32fast::Hasher::new();
        crc.update(&header[..len]);
        crc.combine(&rows_crc);
        buf.extend_from_slice(&crc.finalize().to_le_bytes());
        Bytes::from(buf).slice(start..)
    }
}

/// Encodes `rows` in order (see [`MemtableDataWriter`] for the layout and ordering rule).
pub fn encode(rows: &[MemRow]) -> Result<Vec<u8>, MemtableDataError> {
    let mut writer = MemtableDataWriter::new();
    for row in rows {
        writer.push(row.as_ref())?;
    }
    Ok(writer.finish().into())
}

/// Decodes a blob into rows that slice `data` (no copies).
pub fn decode(data: &Bytes) -> Result<Vec<MemRow>, MemtableDataError> {
    let rows = decode_ref(data)?;
    Ok(rows
        .into_iter()
        .map(|row| MemRow {
            cf: row.cf,
            key: data.slice_ref(row.key),
            version: row.version,
            user_meta: data.slice_ref(row.user_meta),
            value: data.slice_ref(row.value),
            tombstone: row.tombstone,
        })
        .collect())
}

/// Decodes a blob into rows that borrow `data`.
pub fn decode_ref(data: &[u8]) -> Result<Vec<MemRowRef<'_>>, MemtableDataError> {
    let iter = rows(data)?;
    // Bounded by the body length (see `rows`), so the input justifies the allocation.
    let mut out = Vec::with_capacity(iter.row_count() as usize);
    for row in iter {
        out.push(row?);
    }
    Ok(out)
}

/// Checks a blob's header, length and CRC, and returns an iterator over its rows that checks
/// each row as it is reached (structure, column family, flags, version order against the row
/// before) and, after the last row, that no bytes follow. Once it yields an error it ends.
pub fn rows(data: &[u8]) -> Result<RowIter<'_>, MemtableDataError> {
    let mut header = Cursor::new(data, data.len());
    let magic = u32::from_le_bytes(header.take_array()?);
    if magic != MAGIC {
        return Err(MemtableDataError::BadMagic { found: magic });
    }
    let [version] = header.take_array()?;
    if version != FORMAT_VERSION {
        return Err(MemtableDataError::UnsupportedVersion {
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    let body_len = header.varint()?;
    let body_start = header.pos;
    let needed = (body_start as u64)
        .saturating_add(body_len)
        .saturating_add(CRC_LEN as u64);
    let available = data.len() as u64;
    if available < needed {
        return Err(MemtableDataError::Truncated { needed, available });
    }
    if available > needed {
        return Err(MemtableDataError::TrailingBytes {
            count: available - needed,
        });
    }
    // `needed == data.len()`, so these fit in usize.
    let body_end = data.len() - CRC_LEN;
    let mut stored = [0u8; CRC_LEN];
    stored.copy_from_slice(&data[body_end..]);
    let expected = u32::from_le_bytes(stored);
    let found = crc32fast::hash(&data[..body_end]);
    if expected != found {
        return Err(MemtableDataError::ChecksumMismatch { expected, found });
    }

    let mut body = Cursor::new(data, body_end);
    body.pos = body_start;
    let count = body.varint()?;
    let max = body.remaining() as u64 / MIN_ROW_LEN;
    if count > max {
        return Err(MemtableDataError::RowCountTooLarge { count, max });
    }
    Ok(RowIter {
        body,
        count,
        index: 0,
        previous: None,
        done: false,
    })
}

/// The rows of a blob whose header and CRC [`rows`] checked, in order.
pub struct RowIter<'a> {
    body: Cursor<'a>,
    count: u64,
    index: u64,
    /// Column family, key and version of the row before, for the order check.
    previous: Option<(ColumnFamily, &'a [u8], u64)>,
    done: bool,
}

impl<'a> RowIter<'a> {
    /// The row count the header announces (at most the body length over the smallest row).
    pub fn row_count(&self) -> u64 {
        self.count
    }

    fn row(&mut self) -> Result<MemRowRef<'a>, MemtableDataError> {
        let index = self.index;
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
        // Version first: it rules out most rows without comparing keys.
        if let Some((prev_cf, prev_key, prev_version)) = self.previous
            && version <= prev_version
            && prev_cf == cf
            && prev_key == key
        {
            return Err(MemtableDataError::VersionOrder {
                row: index,
                previous: prev_version,
                version,
            });
        }
        self.previous = Some((cf, key, version));
        Ok(MemRowRef {
            cf,
            key,
            version,
            user_meta,
            value,
            tombstone: flags & FLAG_TOMBSTONE != 0,
        })
    }
}

impl<'a> Iterator for RowIter<'a> {
    type Item = Result<MemRowRef<'a>, MemtableDataError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if self.index == self.count {
            self.done = true;
            let count = self.body.remaining() as u64;
            return (count != 0).then_some(Err(MemtableDataError::TrailingBytes { count }));
        }
        let row = self.row();
        self.index += 1;
        self.done = row.is_err();
        Some(row)
    }
}

/// Longest LEB128 encoding of a u64.
const MAX_VARINT_LEN: usize = 10;

/// Appends `value` as a shortest-form unsigned LEB128 varint.
fn put_varint(out: &mut Vec<u8>, value: u64) {
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

    fn take_array<const N: usize>(&mut self) -> Result<[u8; N], MemtableDataError> {
        let bytes = self.take(N as u64)?;
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    fn length_prefixed(&mut self) -> Result<&'a [u8], MemtableDataError> {
        let len = self.varint()?;
        self.take(len)
    }

    /// A shortest-form LEB128 varint of at most ten bytes.
    fn varint(&mut self) -> Result<u64, MemtableDataError> {
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
    fn empty_blob_has_the_documented_layout() {
        let blob = MemtableDataWriter::new().finish();
        // magic, version 1, body_len 1, row_count 0, crc
        assert_eq!(&blob[..7], b"SMTD\x01\x01\x00");
        let crc = crc32fast::hash(&blob[..7]);
        assert_eq!(&blob[7..], crc.to_le_bytes());
        assert_eq!(decode_ref(&blob), Ok(Vec::new()));
    }
}
