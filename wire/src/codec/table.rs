//! Record and index keys of a table (TiDB's table codec).
//!
//! ```text
//! record key: 't' | i64(table_id) | "_r" | i64(handle)                      19 bytes
//! index key:  't' | i64(table_id) | "_i" | i64(index_id) | datum(value)... [| datum(Int handle)]
//! ```
//!
//! `i64(x)` is the memcomparable i64 of [`super::number::encode_i64`] and `datum(x)` a
//! comparable datum of [`super::datum`]. Because every part is memcomparable, the keys of one
//! table sort by handle, and the entries of one index sort by the index values (then by handle
//! for a non-unique index, whose key carries the handle to stay unique). A unique index stores
//! the handle in the value instead ([`unique_index_value`]).

use super::datum::{INT_FLAG, decode_datum, encode_datum};
use super::number::{decode_i64, encode_i64};
use crate::codec::CodecError;
use crate::datum::Datum;

pub const TABLE_PREFIX: u8 = b't';
pub const RECORD_SEP: &[u8; 2] = b"_r";
pub const INDEX_SEP: &[u8; 2] = b"_i";

/// Length of `'t' | i64(table_id) | "_r"`.
pub const RECORD_PREFIX_LEN: usize = 11;
/// Length of a record key.
pub const RECORD_KEY_LEN: usize = RECORD_PREFIX_LEN + 8;

fn table_prefix(buf: &mut Vec<u8>, table_id: i64, sep: &[u8; 2]) {
    buf.push(TABLE_PREFIX);
    encode_i64(buf, table_id);
    buf.extend_from_slice(sep);
}

/// `'t' | i64(table_id) | "_r"`: every record key of the table starts with it.
pub fn record_prefix(table_id: i64) -> Vec<u8> {
    let mut buf = Vec::with_capacity(RECORD_PREFIX_LEN);
    table_prefix(&mut buf, table_id, RECORD_SEP);
    buf
}

/// The key of row `handle` of table `table_id`; see the module doc for the layout.
pub fn record_key(table_id: i64, handle: i64) -> Vec<u8> {
    let mut buf = Vec::with_capacity(RECORD_KEY_LEN);
    table_prefix(&mut buf, table_id, RECORD_SEP);
    encode_i64(&mut buf, handle);
    buf
}

/// `[start, end)` holding every record key of the table and nothing else.
pub fn record_range(table_id: i64) -> (Vec<u8>, Vec<u8>) {
    let start = record_prefix(table_id);
    let end = prefix_next(&start);
    (start, end)
}

/// `[start, end)` holding every key of the table, records and indexes: `'t' | i64(table_id)`
/// up to `'t' | i64(table_id + 1)` (the last table id ends at the key space's end).
pub fn table_range(table_id: i64) -> (Vec<u8>, Vec<u8>) {
    let key = |id: i64| {
        let mut buf = vec![TABLE_PREFIX];
        encode_i64(&mut buf, id);
        buf
    };
    let end = table_id
        .checked_add(1)
        .map_or_else(|| vec![TABLE_PREFIX + 1], key);
    (key(table_id), end)
}

/// Reads `'t' | i64 | sep` and returns the table id.
fn decode_table_prefix(
    key: &mut &[u8],
    sep: &[u8; 2],
    what: &'static str,
) -> Result<i64, CodecError> {
    match key.split_first() {
        Some((&TABLE_PREFIX, rest)) => *key = rest,
        Some((&b, _)) => {
            return Err(CodecError::new(
                what,
                format!("expected prefix byte 't', found {b:#04x}"),
            ));
        }
        None => {
            return Err(CodecError::new(
                what,
                "expected prefix 't', found empty key",
            ));
        }
    }
    let table_id = decode_i64(key).map_err(|e| CodecError::new(what, e.detail))?;
    match key.split_first_chunk::<2>() {
        Some((found, rest)) if found == sep => {
            *key = rest;
            Ok(table_id)
        }
        found => Err(CodecError::new(
            what,
            format!(
                "expected separator {:?}, found {:?}",
                String::from_utf8_lossy(sep),
                found.map(|(f, _)| f.as_slice()).unwrap_or(key)
            ),
        )),
    }
}

/// Splits a record key into `(table_id, handle)`. Rejects anything but exactly
/// [`RECORD_KEY_LEN`] bytes of the record layout.
pub fn decode_record_key(key: &[u8]) -> Result<(i64, i64), CodecError> {
    if key.len() != RECORD_KEY_LEN {
        return Err(CodecError::new(
            "record key",
            format!("expected {RECORD_KEY_LEN} bytes, found {}", key.len()),
        ));
    }
    let mut cursor = key;
    let table_id = decode_table_prefix(&mut cursor, RECORD_SEP, "record key")?;
    let handle = decode_i64(&mut cursor).map_err(|e| CodecError::new("record key", e.detail))?;
    Ok((table_id, handle))
}

/// `'t' | i64(table_id) | "_i" | i64(index_id)`: every key of the index starts with it.
pub fn index_prefix(table_id: i64, index_id: i64) -> Vec<u8> {
    let mut buf = Vec::with_capacity(RECORD_KEY_LEN);
    table_prefix(&mut buf, table_id, INDEX_SEP);
    encode_i64(&mut buf, index_id);
    buf
}

/// The key of an index entry: the index values as comparable datums, followed by the handle as a
/// comparable Int datum for a non-unique index (`handle = Some`) or nothing for a unique index
/// (`handle = None`, the handle goes in the value).
pub fn index_key(table_id: i64, index_id: i64, values: &[Datum], handle: Option<i64>) -> Vec<u8> {
    let mut buf = index_prefix(table_id, index_id);
    for v in values {
        encode_datum(&mut buf, v, true);
    }
    if let Some(h) = handle {
        encode_datum(&mut buf, &Datum::Int(h), true);
    }
    buf
}

/// Splits an index key into `(table_id, index_id, values, handle)`: `column_count` datums, then
/// either nothing (`handle = None`) or one Int datum (the handle of a non-unique index).
pub fn decode_index_key(
    key: &[u8],
    column_count: usize,
) -> Result<(i64, i64, Vec<Datum>, Option<i64>), CodecError> {
    let mut cursor = key;
    let table_id = decode_table_prefix(&mut cursor, INDEX_SEP, "index key")?;
    let index_id = decode_i64(&mut cursor).map_err(|e| CodecError::new("index key", e.detail))?;
    // Each datum takes at least one byte: the capacity never exceeds the key's length.
    let mut values = Vec::with_capacity(column_count.min(cursor.len()));
    for _ in 0..column_count {
        let v = decode_datum(&mut cursor).map_err(|e| {
            CodecError::new("index key", format!("value {}: {}", values.len(), e.detail))
        })?;
        values.push(v);
    }
    let handle = match cursor.split_first() {
        None => None,
        Some((&INT_FLAG, rest)) if rest.len() == 8 => {
            let mut rest = rest;
            Some(decode_i64(&mut rest)?)
        }
        Some(_) => {
            return Err(CodecError::new(
                "index key",
                format!(
                    "expected nothing or a 9-byte Int handle after {column_count} values, found {} bytes",
                    cursor.len()
                ),
            ));
        }
    };
    Ok((table_id, index_id, values, handle))
}

/// `[start, end)` holding every key of the index and nothing else.
pub fn index_range(table_id: i64, index_id: i64) -> (Vec<u8>, Vec<u8>) {
    let start = index_prefix(table_id, index_id);
    let end = prefix_next(&start);
    (start, end)
}

/// The value of a unique index entry: the handle as 8 bytes big-endian (two's complement),
/// as TiDB writes it.
pub fn unique_index_value(handle: i64) -> Vec<u8> {
    handle.to_be_bytes().to_vec()
}

/// Reads a value written by [`unique_index_value`].
pub fn decode_unique_index_value(value: &[u8]) -> Result<i64, CodecError> {
    let b: [u8; 8] = value.try_into().map_err(|_| {
        CodecError::new(
            "unique index value",
            format!("expected 8 bytes, found {}", value.len()),
        )
    })?;
    Ok(i64::from_be_bytes(b))
}

/// The smallest key greater than every key that starts with `key`: `key` with its trailing
/// `0xff` bytes dropped and the last remaining byte incremented (`"ab\xff"` → `"ac"`).
///
/// When no such key exists (`key` is empty or all `0xff`) the result is empty, which a
/// [`crate::coprocessor::KeyRange`] end reads as unbounded: still the right end of "all keys with
/// this prefix".
pub fn prefix_next(key: &[u8]) -> Vec<u8> {
    match key.iter().rposition(|&b| b != 0xff) {
        Some(i) => {
            let mut next = key[..=i].to_vec();
            next[i] += 1;
            next
        }
        None => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_next_drops_trailing_ff_and_increments() {
        assert_eq!(prefix_next(b"ab\xff\xff"), b"ac");
        assert_eq!(prefix_next(b"a"), b"b");
        assert_eq!(prefix_next(b"\xff\xff"), b"");
        assert_eq!(prefix_next(b""), b"");
    }

    #[test]
    fn a_tables_range_holds_its_records_and_indexes_and_nothing_of_its_neighbours() {
        for id in [1, 2, 1000, i64::MAX] {
            let (start, end) = table_range(id);
            let inside = |k: &[u8]| start.as_slice() <= k && k < end.as_slice();
            assert!(inside(&record_key(id, i64::MIN)) && inside(&record_key(id, i64::MAX)));
            assert!(inside(&index_key(id, 1, &[Datum::Int(5)], Some(3))));
            assert!(!inside(&record_key(id - 1, i64::MAX)));
            if id < i64::MAX {
                assert!(!inside(&record_key(id + 1, i64::MIN)));
            }
        }
    }

    #[test]
    fn record_key_of_other_length_is_rejected() {
        let mut k = record_key(1, 2);
        k.push(0);
        assert!(decode_record_key(&k).is_err());
    }

    #[test]
    fn index_key_is_not_a_record_key() {
        let k = index_key(1, 2, &[], None);
        let mut padded = k.clone();
        padded.resize(RECORD_KEY_LEN, 0);
        let err = decode_record_key(&padded).unwrap_err();
        assert!(err.detail.contains("separator"), "{err}");
    }
}
