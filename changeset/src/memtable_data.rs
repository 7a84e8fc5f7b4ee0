//! The memtable-data codec: memtable rows shipped from a storage server to a worker.
//!
//! A worker rebuilding a shard's snapshot needs the rows still in memtables (not yet flushed to
//! SSTs). The server emits them with [`MemtableDataWriter`], **oldest first per key**, so that a
//! receiver inserting them in order into a skiplist that ignores versions not newer than the one
//! it holds ends with the newest version of every key. The receiver calls [`decode`] (rows
//! slicing a [`Bytes`]) or [`decode_ref`] (rows borrowing a slice): the whole input is checked
//! (CRC, lengths, row order) before any row is returned, so a corrupt transfer never leaves a
//! half-built memtable behind.
//!
//! The decoder never panics and never allocates more than the input justifies: the row count is
//! bounded by the body length divided by the smallest possible row.

use bytes::Bytes;

use crate::column_family::ColumnFamily;
use crate::error::MemtableDataError;

/// First four bytes of every memtable-data blob: `SMTD` (Stratus MemTable Data).
pub const MAGIC: u32 = u32::from_le_bytes(*b"SMTD");

/// The format version this build writes and reads.
pub const FORMAT_VERSION: u8 = 1;

/// Row flag: the row is a deletion marker hiding older versions.
const FLAG_TOMBSTONE: u8 = 0b0000_0001;

/// Smallest encoded row: cf, flags, three one-byte varints (empty key, meta, value), version.
const MIN_ROW_LEN: u64 = 1 + 1 + 1 + 8 + 1 + 1;

const CRC_LEN: usize = 4;

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
#[derive(Debug, Default)]
pub struct MemtableDataWriter {
    body: Vec<u8>,
    rows: u64,
    last: Option<LastRow>,
}

/// Where the previous row's key sits in the body, to check ordering without copying keys.
#[derive(Debug)]
struct LastRow {
    cf: ColumnFamily,
    key_start: usize,
    key_len: usize,
    version: u64,
}

impl MemtableDataWriter {
    /// An empty writer.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty writer whose row buffer starts with room for `bytes` bytes.
    pub fn with_capacity(bytes: usize) -> Self {
        Self {
            body: Vec::with_capacity(bytes),
            ..Self::default()
        }
    }

    /// Appends a row. Fails, appending nothing, when the row has the same column family and
    /// key as the previous row but a version that is not newer.
    pub fn push(&mut self, row: MemRowRef<'_>) -> Result<(), MemtableDataError> {
        if let Some(last) = &self.last {
            let last_key = &self.body[last.key_start..last.key_start + last.key_len];
            if last.cf == row.cf && last_key == row.key && row.version <= last.version {
                return Err(MemtableDataError::VersionOrder {
                    row: self.rows,
                    previous: last.version,
                    version: row.version,
                });
            }
        }
        self.body.push(row.cf.as_u8());
        self.body
            .push(if row.tombstone { FLAG_TOMBSTONE } else { 0 });
        put_varint(&mut self.body, row.key.len() as u64);
        let key_start = self.body.len();
        self.body.extend_from_slice(row.key);
        self.body.extend_from_slice(&row.version.to_le_bytes());
        put_varint(&mut self.body, row.user_meta.len() as u64);
        self.body.extend_from_slice(row.user_meta);
        put_varint(&mut self.body, row.value.len() as u64);
        self.body.extend_from_slice(row.value);
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

    /// The encoded blob (layout on [`MemtableDataWriter`]).
    pub fn finish(self) -> Vec<u8> {
        let mut count = Vec::with_capacity(10);
        put_varint(&mut count, self.rows);
        let body_len = (count.len() + self.body.len()) as u64;
        let mut out = Vec::with_capacity(4 + 1 + 10 + body_len as usize + CRC_LEN);
        out.extend_from_slice(&MAGIC.to_le_bytes());
        out.push(FORMAT_VERSION);
        put_varint(&mut out, body_len);
        out.extend_from_slice(&count);
        out.extend_from_slice(&self.body);
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }
}

/// Encodes `rows` in order (see [`MemtableDataWriter`] for the layout and ordering rule).
pub fn encode(rows: &[MemRow]) -> Result<Vec<u8>, MemtableDataError> {
    let mut writer = MemtableDataWriter::new();
    for row in rows {
        writer.push(row.as_ref())?;
    }
    Ok(writer.finish())
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
    let expected = u32::from_le_bytes(data[body_end..].try_into().expect("four bytes"));
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
    let mut rows: Vec<MemRowRef<'_>> = Vec::with_capacity(count as usize);
    for index in 0..count {
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
        if let Some(previous) = rows.last()
            && previous.cf == cf
            && previous.key == key
            && version <= previous.version
        {
            return Err(MemtableDataError::VersionOrder {
                row: index,
                previous: previous.version,
                version,
            });
        }
        rows.push(MemRowRef {
            cf,
            key,
            version,
            user_meta,
            value,
            tombstone: flags & FLAG_TOMBSTONE != 0,
        });
    }
    if body.remaining() != 0 {
        return Err(MemtableDataError::TrailingBytes {
            count: body.remaining() as u64,
        });
    }
    Ok(rows)
}

/// Appends `value` as a shortest-form unsigned LEB128 varint.
fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
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
        Ok(bytes.try_into().expect("take returned N bytes"))
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
