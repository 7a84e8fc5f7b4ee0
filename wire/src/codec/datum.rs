//! Datums: one flag byte naming the encoding, then the value (TiDB's datum codec and flags).
//!
//! ```text
//! flag  name           value                                   used by
//! 0x00  NIL            (nothing)                                both modes
//! 0x01  BYTES          memcomparable bytes (codec::bytes)       comparable
//! 0x02  COMPACT_BYTES  varint length + bytes                    compact
//! 0x03  INT            memcomparable i64, 8 bytes               comparable
//! 0x04  UINT           memcomparable u64, 8 bytes               comparable
//! 0x05  FLOAT          memcomparable f64, 8 bytes               both modes
//! 0x08  VARINT         zigzag varint i64                        compact
//! 0x09  VARUINT        varint u64                               compact
//! ```
//!
//! The *comparable* mode is for index keys: two datums of the same type compare bytewise like
//! their values, and a datum is self-delimiting so key parts can follow. The *compact* mode is
//! for values (column defaults, result rows) where order does not matter. The decoder reads
//! either mode.

use super::bytes::{
    decode_bytes_comparable, decode_compact_bytes, encode_bytes_comparable, encode_compact_bytes,
};
use super::number::{
    decode_f64, decode_i64, decode_u64, decode_var_i64, decode_var_u64, encode_f64, encode_i64,
    encode_u64, encode_var_i64, encode_var_u64,
};
use crate::codec::CodecError;
use crate::datum::{Datum, FieldType};

pub const NIL_FLAG: u8 = 0;
pub const BYTES_FLAG: u8 = 1;
pub const COMPACT_BYTES_FLAG: u8 = 2;
pub const INT_FLAG: u8 = 3;
pub const UINT_FLAG: u8 = 4;
pub const FLOAT_FLAG: u8 = 5;
pub const VARINT_FLAG: u8 = 8;
pub const VARUINT_FLAG: u8 = 9;

/// Appends one datum: comparable (`comparable = true`, for index keys) or compact (for values
/// and results). See the module doc for the flags.
pub fn encode_datum(buf: &mut Vec<u8>, d: &Datum, comparable: bool) {
    match (d, comparable) {
        (Datum::Null, _) => buf.push(NIL_FLAG),
        (Datum::Int(v), true) => {
            buf.push(INT_FLAG);
            encode_i64(buf, *v);
        }
        (Datum::Int(v), false) => {
            buf.push(VARINT_FLAG);
            encode_var_i64(buf, *v);
        }
        (Datum::UInt(v), true) => {
            buf.push(UINT_FLAG);
            encode_u64(buf, *v);
        }
        (Datum::UInt(v), false) => {
            buf.push(VARUINT_FLAG);
            encode_var_u64(buf, *v);
        }
        (Datum::Real(v), _) => {
            buf.push(FLOAT_FLAG);
            encode_f64(buf, *v);
        }
        (Datum::Bytes(v), true) => {
            buf.push(BYTES_FLAG);
            encode_bytes_comparable(buf, v);
        }
        (Datum::Bytes(v), false) => {
            buf.push(COMPACT_BYTES_FLAG);
            encode_compact_bytes(buf, v);
        }
    }
}

/// Reads one datum of either mode and advances the cursor past it.
pub fn decode_datum(data: &mut &[u8]) -> Result<Datum, CodecError> {
    let Some((&flag, rest)) = data.split_first() else {
        return Err(CodecError::new(
            "datum",
            "expected a flag byte, found the end of input",
        ));
    };
    *data = rest;
    Ok(match flag {
        NIL_FLAG => Datum::Null,
        BYTES_FLAG => Datum::Bytes(decode_bytes_comparable(data)?),
        COMPACT_BYTES_FLAG => Datum::Bytes(decode_compact_bytes(data)?),
        INT_FLAG => Datum::Int(decode_i64(data)?),
        UINT_FLAG => Datum::UInt(decode_u64(data)?),
        FLOAT_FLAG => Datum::Real(decode_f64(data)?),
        VARINT_FLAG => Datum::Int(decode_var_i64(data)?),
        VARUINT_FLAG => Datum::UInt(decode_var_u64(data)?),
        other => {
            return Err(CodecError::new(
                "datum",
                format!("expected a flag in {{0, 1, 2, 3, 4, 5, 8, 9}}, found {other}"),
            ));
        }
    })
}

/// Appends the datums of one row in the compact mode, concatenated (the layout of
/// `SelectResponse.rows_data`: rows one after another, each its columns in order).
pub fn encode_row_datums(buf: &mut Vec<u8>, row: &[Datum]) {
    for d in row {
        encode_datum(buf, d, false);
    }
}

/// Reads exactly `n` datums that fill `data` (e.g. `row_count * column_count` datums of a
/// `SelectResponse`). Trailing bytes are an error: they mean the reader and the writer disagree
/// about the shape.
pub fn decode_datums(data: &[u8], n: usize) -> Result<Vec<Datum>, CodecError> {
    // Every datum takes at least its flag byte, so more datums than bytes cannot be there; the
    // check also bounds the allocation by the input size.
    if n > data.len() {
        return Err(CodecError::new(
            "datums",
            format!(
                "expected at most {} datums in {} bytes, asked for {n}",
                data.len(),
                data.len()
            ),
        ));
    }
    let mut cursor = data;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(decode_datum(&mut cursor)?);
    }
    if !cursor.is_empty() {
        return Err(CodecError::new(
            "datums",
            format!(
                "expected the input to end after {n} datums, found {} trailing bytes",
                cursor.len()
            ),
        ));
    }
    Ok(out)
}

/// Decodes a column default (`ColumnInfo.default_val`): empty bytes are NULL, otherwise exactly
/// one datum, converted to the column's type where lossless (an `Int` default of an unsigned
/// column, an integer default of a float column).
pub fn decode_default(bytes: &[u8], tp: FieldType) -> Result<Datum, CodecError> {
    if bytes.is_empty() {
        return Ok(Datum::Null);
    }
    let mut cursor = bytes;
    let d = decode_datum(&mut cursor)?;
    if !cursor.is_empty() {
        return Err(CodecError::new(
            "column default",
            format!("expected one datum, found {} trailing bytes", cursor.len()),
        ));
    }
    let converted = match (tp, &d) {
        (_, Datum::Null) => Some(Datum::Null),
        (FieldType::Int64, Datum::Int(_)) => Some(d.clone()),
        (FieldType::Int64, Datum::UInt(v)) => i64::try_from(*v).ok().map(Datum::Int),
        (FieldType::UInt64 | FieldType::DateTime, Datum::UInt(_)) => Some(d.clone()),
        (FieldType::UInt64 | FieldType::DateTime, Datum::Int(v)) => {
            u64::try_from(*v).ok().map(Datum::UInt)
        }
        (FieldType::Float64, Datum::Real(_)) => Some(d.clone()),
        (FieldType::Float64, Datum::Int(v)) => Some(Datum::Real(*v as f64)),
        (FieldType::Float64, Datum::UInt(v)) => Some(Datum::Real(*v as f64)),
        (FieldType::Bytes, Datum::Bytes(_)) => Some(d.clone()),
        _ => None,
    };
    converted.ok_or_else(|| {
        CodecError::new(
            "column default",
            format!("expected a value of type {tp:?}, found {d:?}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn more_datums_than_bytes_is_rejected_before_allocating() {
        let err = decode_datums(&[0], usize::MAX).unwrap_err();
        assert!(err.detail.contains("asked for"), "{err}");
    }

    #[test]
    fn unknown_flag_names_the_flag() {
        let err = decode_datum(&mut &[7u8][..]).unwrap_err();
        assert!(err.detail.contains("found 7"), "{err}");
    }

    #[test]
    fn negative_default_of_unsigned_column_is_rejected() {
        let mut buf = Vec::new();
        encode_datum(&mut buf, &Datum::Int(-1), false);
        assert!(decode_default(&buf, FieldType::UInt64).is_err());
        assert_eq!(decode_default(&[], FieldType::UInt64).unwrap(), Datum::Null);
    }
}
