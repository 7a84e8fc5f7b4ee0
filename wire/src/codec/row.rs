//! Row values: a compact, versioned format modelled on TiDB's row format v2.
//!
//! A row is stored as the value of its record key. It lists which columns are present and
//! not NULL (with their values), which are present and NULL, and nothing about the others: a
//! column added to the table after the row was written is *absent* and reads as the column's
//! default. Values carry no type: the reader decodes them with the type the schema declares.
//!
//! The byte layout is documented on [`encode_row`], the encoder that produces it.
//!
//! NaN is rejected by the writer: SQL has no place for it in comparisons or ordering.
//!
//! Reading is per value: [`RowView::find`] locates a column's bytes and [`decode_value`] (or
//! [`decode_int`], [`decode_uint`], [`decode_f64`]) reads them with the schema's type. Filling
//! the coprocessor's column batches from rows is execution and lives there
//! (`cop::batch::Column::push_from_row`), built on these.

use super::number::{f64_from_comparable_bits, f64_to_comparable_bits};
use crate::codec::CodecError;
use crate::datum::{Datum, FieldType};

/// The version byte of the layout documented on [`encode_row`].
pub const ROW_VERSION: u8 = 128;
/// Flags bit: column ids are u32 and offsets u32 (otherwise u8 and u16).
pub const FLAG_LARGE: u8 = 1;

const HEADER_LEN: usize = 6;

/// Encodes a row of `(column_id, value)` pairs in any order.
///
/// # Layout, version 128
///
/// ```text
/// offset  size                     field
/// 0       1                        version = 128
/// 1       1                        flags: bit 0 = large, other bits reserved (0)
/// 2       2  (u16 LE)              not_null_count = N
/// 4       2  (u16 LE)              null_count = M
/// 6       N * id_size              not-null column ids, strictly ascending
/// ..      M * id_size              null column ids, strictly ascending
/// ..      N * offset_size          end offset in `data` of each not-null value, in id order
/// ..      rest                     data: the not-null values, concatenated in id order
///
/// small (large = 0): id_size = 1 (u8),     offset_size = 2 (u16 LE)
/// large (large = 1): id_size = 4 (u32 LE), offset_size = 4 (u32 LE)
/// ```
///
/// The writer picks the large layout only when a column id exceeds 255 or the data exceeds
/// 65535 bytes. A column id appears at most once in the two lists together. The last end offset
/// equals the length of `data` (nothing trails the values).
///
/// Values, by the column's [`FieldType`]:
///
/// ```text
/// Int64               shortest of 1, 2, 4, 8 bytes LE that sign-extends back to the value
/// UInt64, DateTime    shortest of 1, 2, 4, 8 bytes LE that zero-extends back to the value
/// Float64             8 bytes: memcomparable f64 bits, big-endian (codec::number::encode_f64)
/// Bytes               the bytes
/// ```
///
/// Rejects a column id outside `0..=u32::MAX`, a duplicate id, a NaN, and rows beyond the
/// format's limits (more than 65535 not-null or null columns, more than 4 GiB of data).
pub fn encode_row(cols: &[(i64, Datum)]) -> Result<Vec<u8>, CodecError> {
    let mut buf = Vec::new();
    encode_row_into(&mut buf, cols)?;
    Ok(buf)
}

/// [`encode_row`] appending to `buf` (reused across rows by bulk loaders). On error `buf` is
/// left as it was.
pub fn encode_row_into(buf: &mut Vec<u8>, cols: &[(i64, Datum)]) -> Result<(), CodecError> {
    let start = buf.len();
    let r = encode_row_inner(buf, cols);
    if r.is_err() {
        buf.truncate(start);
    }
    r
}

fn encode_row_inner(buf: &mut Vec<u8>, cols: &[(i64, Datum)]) -> Result<(), CodecError> {
    let mut sorted: Vec<(u32, &Datum)> = Vec::with_capacity(cols.len());
    for (id, d) in cols {
        let id = u32::try_from(*id).map_err(|_| {
            CodecError::new(
                "row",
                format!("expected a column id within 0..={}, found {id}", u32::MAX),
            )
        })?;
        sorted.push((id, d));
    }
    sorted.sort_unstable_by_key(|(id, _)| *id);
    if let Some(w) = sorted.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(CodecError::new(
            "row",
            format!("expected unique column ids, found {} twice", w[0].0),
        ));
    }

    let mut data = Vec::new();
    let mut ends = Vec::new();
    let mut not_null_ids = Vec::new();
    let mut null_ids = Vec::new();
    for (id, d) in &sorted {
        if d.is_null() {
            null_ids.push(*id);
            continue;
        }
        encode_value(&mut data, d)
            .map_err(|e| CodecError::new("row", format!("column {id}: {}", e.detail)))?;
        not_null_ids.push(*id);
        ends.push(data.len());
    }

    for (what, n) in [("not-null", not_null_ids.len()), ("null", null_ids.len())] {
        if n > usize::from(u16::MAX) {
            return Err(CodecError::new(
                "row",
                format!("expected at most {} {what} columns, found {n}", u16::MAX),
            ));
        }
    }
    if data.len() > u32::MAX as usize {
        return Err(CodecError::new(
            "row",
            format!(
                "expected at most {} bytes of values, found {}",
                u32::MAX,
                data.len()
            ),
        ));
    }
    let max_id = sorted.last().map_or(0, |(id, _)| *id);
    let large = max_id > u32::from(u8::MAX) || data.len() > usize::from(u16::MAX);

    let (id_size, off_size) = if large { (4, 4) } else { (1, 2) };
    buf.reserve(
        HEADER_LEN
            + (not_null_ids.len() + null_ids.len()) * id_size
            + ends.len() * off_size
            + data.len(),
    );
    buf.push(ROW_VERSION);
    buf.push(if large { FLAG_LARGE } else { 0 });
    buf.extend_from_slice(&(not_null_ids.len() as u16).to_le_bytes());
    buf.extend_from_slice(&(null_ids.len() as u16).to_le_bytes());
    for id in not_null_ids.iter().chain(&null_ids) {
        if large {
            buf.extend_from_slice(&id.to_le_bytes());
        } else {
            buf.push(*id as u8);
        }
    }
    for end in ends {
        if large {
            buf.extend_from_slice(&(end as u32).to_le_bytes());
        } else {
            buf.extend_from_slice(&(end as u16).to_le_bytes());
        }
    }
    buf.extend_from_slice(&data);
    Ok(())
}

/// Appends one not-null value in the row format (see the module doc).
pub fn encode_value(buf: &mut Vec<u8>, d: &Datum) -> Result<(), CodecError> {
    match d {
        Datum::Null => {
            return Err(CodecError::new(
                "row value",
                "expected a not-null value, found NULL",
            ));
        }
        Datum::Int(v) => {
            let v = *v;
            if let Ok(x) = i8::try_from(v) {
                buf.extend_from_slice(&x.to_le_bytes());
            } else if let Ok(x) = i16::try_from(v) {
                buf.extend_from_slice(&x.to_le_bytes());
            } else if let Ok(x) = i32::try_from(v) {
                buf.extend_from_slice(&x.to_le_bytes());
            } else {
                buf.extend_from_slice(&v.to_le_bytes());
            }
        }
        Datum::UInt(v) => {
            let v = *v;
            if let Ok(x) = u8::try_from(v) {
                buf.push(x);
            } else if let Ok(x) = u16::try_from(v) {
                buf.extend_from_slice(&x.to_le_bytes());
            } else if let Ok(x) = u32::try_from(v) {
                buf.extend_from_slice(&x.to_le_bytes());
            } else {
                buf.extend_from_slice(&v.to_le_bytes());
            }
        }
        Datum::Real(v) => {
            if v.is_nan() {
                return Err(CodecError::new("row value", "expected a number, found NaN"));
            }
            buf.extend_from_slice(&f64_to_comparable_bits(*v).to_be_bytes());
        }
        Datum::Bytes(v) => buf.extend_from_slice(v),
    }
    Ok(())
}

/// Decodes an Int64 value: 1, 2, 4 or 8 bytes little-endian, sign-extended.
#[inline]
pub fn decode_int(b: &[u8]) -> Result<i64, CodecError> {
    Ok(match b.len() {
        1 => i64::from(b[0] as i8),
        2 => i64::from(i16::from_le_bytes([b[0], b[1]])),
        4 => i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        8 => i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
        n => return Err(int_len_error("Int64 value", n)),
    })
}

/// Decodes a UInt64 or DateTime value: 1, 2, 4 or 8 bytes little-endian, zero-extended.
#[inline]
pub fn decode_uint(b: &[u8]) -> Result<u64, CodecError> {
    Ok(match b.len() {
        1 => u64::from(b[0]),
        2 => u64::from(u16::from_le_bytes([b[0], b[1]])),
        4 => u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        8 => u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
        n => return Err(int_len_error("UInt64 value", n)),
    })
}

#[cold]
fn int_len_error(what: &'static str, n: usize) -> CodecError {
    CodecError::new(what, format!("expected 1, 2, 4 or 8 bytes, found {n}"))
}

/// Decodes a Float64 value: 8 bytes of memcomparable f64 bits, big-endian.
#[inline]
pub fn decode_f64(b: &[u8]) -> Result<f64, CodecError> {
    let bits: [u8; 8] = b.try_into().map_err(|_| {
        CodecError::new(
            "Float64 value",
            format!("expected 8 bytes, found {}", b.len()),
        )
    })?;
    Ok(f64_from_comparable_bits(u64::from_be_bytes(bits)))
}

/// Decodes a not-null value of a column of type `tp`.
pub fn decode_value(b: &[u8], tp: FieldType) -> Result<Datum, CodecError> {
    Ok(match tp {
        FieldType::Int64 => Datum::Int(decode_int(b)?),
        FieldType::UInt64 | FieldType::DateTime => Datum::UInt(decode_uint(b)?),
        FieldType::Float64 => Datum::Real(decode_f64(b)?),
        FieldType::Bytes => Datum::Bytes(b.to_vec()),
    })
}

/// What a row holds for one column id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnValue<'a> {
    /// The row does not mention the column: it reads as the column's default.
    Absent,
    /// The row holds NULL.
    Null,
    /// The row holds this encoded value (decode with [`decode_int`] etc.).
    Value(&'a [u8]),
}

/// A parsed row that borrows its bytes: lookups decode nothing but the asked column.
///
/// [`RowView::parse`] checks every structural invariant once (ids ascending and unique,
/// offsets ascending and ending at the end of the data), so lookups afterwards cannot go out
/// of bounds.
#[derive(Debug, Clone, Copy)]
pub struct RowView<'a> {
    large: bool,
    not_null_count: usize,
    null_count: usize,
    /// `not_null_count` ids, 1 or 4 bytes each.
    not_null_ids: &'a [u8],
    /// `null_count` ids, 1 or 4 bytes each.
    null_ids: &'a [u8],
    /// `not_null_count` end offsets, 2 or 4 bytes each.
    offsets: &'a [u8],
    data: &'a [u8],
}

impl<'a> RowView<'a> {
    /// Parses and validates a row; see the module doc for the layout.
    pub fn parse(row: &'a [u8]) -> Result<RowView<'a>, CodecError> {
        let Some((header, rest)) = row.split_first_chunk::<HEADER_LEN>() else {
            return Err(CodecError::new(
                "row",
                format!(
                    "expected a {HEADER_LEN}-byte header, found {} bytes",
                    row.len()
                ),
            ));
        };
        if header[0] != ROW_VERSION {
            return Err(CodecError::new(
                "row",
                format!("expected version {ROW_VERSION}, found {}", header[0]),
            ));
        }
        let flags = header[1];
        if flags & !FLAG_LARGE != 0 {
            return Err(CodecError::new(
                "row",
                format!("expected flags 0 or {FLAG_LARGE}, found {flags:#04x}"),
            ));
        }
        let large = flags & FLAG_LARGE != 0;
        let not_null_count = usize::from(u16::from_le_bytes([header[2], header[3]]));
        let null_count = usize::from(u16::from_le_bytes([header[4], header[5]]));
        let (id_size, off_size) = if large { (4, 4) } else { (1, 2) };
        // At most 2 * 65535 * 4 + 65535 * 4 bytes: no overflow.
        let ids_len = (not_null_count + null_count) * id_size;
        let offsets_len = not_null_count * off_size;
        if rest.len() < ids_len + offsets_len {
            return Err(CodecError::new(
                "row",
                format!(
                    "expected {} bytes of ids and offsets for {not_null_count} not-null and \
                     {null_count} null columns, found {}",
                    ids_len + offsets_len,
                    rest.len()
                ),
            ));
        }
        let (not_null_ids, rest) = rest.split_at(not_null_count * id_size);
        let (null_ids, rest) = rest.split_at(null_count * id_size);
        let (offsets, data) = rest.split_at(offsets_len);
        let view = RowView {
            large,
            not_null_count,
            null_count,
            not_null_ids,
            null_ids,
            offsets,
            data,
        };
        view.validate()?;
        Ok(view)
    }

    fn validate(&self) -> Result<(), CodecError> {
        for (what, ids, n) in [
            ("not-null", self.not_null_ids, self.not_null_count),
            ("null", self.null_ids, self.null_count),
        ] {
            for i in 1..n {
                let (a, b) = (self.id_at(ids, i - 1), self.id_at(ids, i));
                if a >= b {
                    return Err(CodecError::new(
                        "row",
                        format!(
                            "expected strictly ascending {what} column ids, found {b} after {a}"
                        ),
                    ));
                }
            }
        }
        // Both lists are sorted: a merge walk finds an id in both.
        let (mut i, mut j) = (0, 0);
        while i < self.not_null_count && j < self.null_count {
            let (a, b) = (
                self.id_at(self.not_null_ids, i),
                self.id_at(self.null_ids, j),
            );
            match a.cmp(&b) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
                std::cmp::Ordering::Equal => {
                    return Err(CodecError::new(
                        "row",
                        format!("expected each column id once, found {a} both not-null and null"),
                    ));
                }
            }
        }
        let mut prev = 0usize;
        for i in 0..self.not_null_count {
            let end = self.offset_at(i);
            if end < prev {
                return Err(CodecError::new(
                    "row",
                    format!("expected ascending value offsets, found {end} after {prev}"),
                ));
            }
            prev = end;
        }
        if prev != self.data.len() {
            return Err(CodecError::new(
                "row",
                format!(
                    "expected the values to end at {prev}, found {} bytes of data",
                    self.data.len()
                ),
            ));
        }
        Ok(())
    }

    #[inline]
    fn id_at(&self, ids: &[u8], i: usize) -> u32 {
        if self.large {
            let b = &ids[i * 4..i * 4 + 4];
            u32::from_le_bytes([b[0], b[1], b[2], b[3]])
        } else {
            u32::from(ids[i])
        }
    }

    #[inline]
    fn offset_at(&self, i: usize) -> usize {
        if self.large {
            let b = &self.offsets[i * 4..i * 4 + 4];
            u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize
        } else {
            usize::from(u16::from_le_bytes([
                self.offsets[i * 2],
                self.offsets[i * 2 + 1],
            ]))
        }
    }

    /// Index of `id` in a sorted id list of `n` entries.
    #[inline]
    fn search(&self, ids: &[u8], n: usize, id: u32) -> Option<usize> {
        if !self.large {
            // One byte per id: the slice is the sorted id list itself.
            let id = u8::try_from(id).ok()?;
            if n <= 16 {
                return ids.iter().position(|&x| x == id);
            }
            return ids.binary_search(&id).ok();
        }
        let (mut lo, mut hi) = (0, n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.id_at(ids, mid).cmp(&id) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(mid),
            }
        }
        None
    }

    /// What the row holds for column `col_id`.
    #[inline]
    pub fn find(&self, col_id: i64) -> ColumnValue<'a> {
        let Ok(id) = u32::try_from(col_id) else {
            return ColumnValue::Absent;
        };
        if let Some(i) = self.search(self.not_null_ids, self.not_null_count, id) {
            // `validate` proved the offsets ascending and within `data`.
            let start = if i == 0 { 0 } else { self.offset_at(i - 1) };
            return ColumnValue::Value(&self.data[start..self.offset_at(i)]);
        }
        if self.search(self.null_ids, self.null_count, id).is_some() {
            ColumnValue::Null
        } else {
            ColumnValue::Absent
        }
    }

    /// Whether the row uses the large layout (u32 ids and offsets).
    pub fn is_large(&self) -> bool {
        self.large
    }

    /// The ids of the columns that hold a value, ascending.
    pub fn not_null_ids(&self) -> impl Iterator<Item = i64> + '_ {
        (0..self.not_null_count).map(|i| i64::from(self.id_at(self.not_null_ids, i)))
    }

    /// The ids of the columns that hold NULL, ascending.
    pub fn null_ids(&self) -> impl Iterator<Item = i64> + '_ {
        (0..self.null_count).map(|i| i64::from(self.id_at(self.null_ids, i)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ints_take_the_shortest_width() {
        for (v, len) in [(0i64, 1), (-128, 1), (128, 2), (-32769, 4), (1 << 40, 8)] {
            let mut buf = Vec::new();
            encode_value(&mut buf, &Datum::Int(v)).unwrap();
            assert_eq!(buf.len(), len, "{v}");
            assert_eq!(decode_int(&buf).unwrap(), v);
        }
    }

    #[test]
    fn uints_take_the_shortest_width() {
        for (v, len) in [(255u64, 1), (256, 2), (65536, 4), (u64::MAX, 8)] {
            let mut buf = Vec::new();
            encode_value(&mut buf, &Datum::UInt(v)).unwrap();
            assert_eq!(buf.len(), len, "{v}");
            assert_eq!(decode_uint(&buf).unwrap(), v);
        }
    }

    #[test]
    fn nan_is_rejected_and_buffer_is_left_unchanged() {
        let mut buf = vec![1, 2, 3];
        assert!(encode_row_into(&mut buf, &[(1, Datum::Real(f64::NAN))]).is_err());
        assert_eq!(buf, [1, 2, 3]);
    }

    #[test]
    fn id_in_both_lists_is_rejected() {
        // version, flags, 1 not-null, 1 null, ids [5] [5], offsets [1], data [7].
        let row = [128u8, 0, 1, 0, 1, 0, 5, 5, 1, 0, 7];
        let err = RowView::parse(&row).unwrap_err();
        assert!(err.detail.contains("both"), "{err}");
    }

    #[test]
    fn trailing_data_is_rejected() {
        let mut row = encode_row(&[(1, Datum::Int(1))]).unwrap();
        row.push(0);
        assert!(RowView::parse(&row).is_err());
    }
}
