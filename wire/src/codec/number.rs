//! Numbers in two encodings.
//!
//! * **Memcomparable** (fixed 8 bytes, big-endian): the bytewise order of the encodings equals
//!   the numeric order, so numbers can sit inside keys (record handles, index values).
//! * **Varint** (LEB128, 1..=10 bytes, little-endian groups of 7 bits): short for small values,
//!   used in row values and results where order does not matter. Signed values are zigzag
//!   encoded first so that small negatives stay short.
//!
//! Decoders advance the `&mut &[u8]` cursor past what they read, so a caller reads a sequence
//! of values by calling them in turn; on error the cursor position is unspecified.

use crate::codec::CodecError;

const SIGN_MASK: u64 = 0x8000_0000_0000_0000;

/// The longest varint of a u64: ten groups of 7 bits.
pub const MAX_VARINT_LEN: usize = 10;

/// Takes the next `N` bytes off the cursor.
pub(crate) fn take_array<const N: usize>(
    data: &mut &[u8],
    what: &'static str,
) -> Result<[u8; N], CodecError> {
    match data.split_first_chunk::<N>() {
        Some((head, rest)) => {
            *data = rest;
            Ok(*head)
        }
        None => Err(CodecError::new(
            what,
            format!("expected {N} bytes, found {}", data.len()),
        )),
    }
}

/// Memcomparable i64: `(v as u64) ^ 0x8000_0000_0000_0000` as 8 bytes big-endian.
///
/// Flipping the sign bit maps `i64::MIN..=i64::MAX` onto `0..=u64::MAX` in order, and
/// big-endian bytes compare like the u64.
pub fn encode_i64(buf: &mut Vec<u8>, v: i64) {
    buf.extend_from_slice(&((v as u64) ^ SIGN_MASK).to_be_bytes());
}

/// Reads a value written by [`encode_i64`].
pub fn decode_i64(data: &mut &[u8]) -> Result<i64, CodecError> {
    let b = take_array::<8>(data, "memcomparable i64")?;
    Ok((u64::from_be_bytes(b) ^ SIGN_MASK) as i64)
}

/// Memcomparable u64: 8 bytes big-endian.
pub fn encode_u64(buf: &mut Vec<u8>, v: u64) {
    buf.extend_from_slice(&v.to_be_bytes());
}

/// Reads a value written by [`encode_u64`].
pub fn decode_u64(data: &mut &[u8]) -> Result<u64, CodecError> {
    Ok(u64::from_be_bytes(take_array::<8>(
        data,
        "memcomparable u64",
    )?))
}

/// The memcomparable bits of an f64 (TiDB's `EncodeFloat`): a non-negative value gets its sign
/// bit set, a negative one has every bit flipped.
///
/// Positives then sort above negatives, larger positives higher, and larger-magnitude
/// negatives lower (flipping reverses their order). `-0.0` counts as non-negative and encodes
/// exactly like `0.0`, so the two compare equal as SQL wants (and `-0.0` decodes as `0.0`).
/// NaN has no place in SQL order; it encodes to some bits above `+inf` or below `-inf` and
/// callers that store values reject it first (see [`crate::codec::row::encode_row`]).
pub fn f64_to_comparable_bits(v: f64) -> u64 {
    let bits = v.to_bits();
    if v >= 0.0 {
        bits | SIGN_MASK
    } else if v < 0.0 {
        !bits
    } else if bits & SIGN_MASK == 0 {
        // A NaN with the sign bit clear: like a positive.
        bits | SIGN_MASK
    } else {
        !bits
    }
}

/// The inverse of [`f64_to_comparable_bits`].
pub fn f64_from_comparable_bits(u: u64) -> f64 {
    if u & SIGN_MASK != 0 {
        f64::from_bits(u & !SIGN_MASK)
    } else {
        f64::from_bits(!u)
    }
}

/// Memcomparable f64: [`f64_to_comparable_bits`] as 8 bytes big-endian.
pub fn encode_f64(buf: &mut Vec<u8>, v: f64) {
    buf.extend_from_slice(&f64_to_comparable_bits(v).to_be_bytes());
}

/// Reads a value written by [`encode_f64`].
pub fn decode_f64(data: &mut &[u8]) -> Result<f64, CodecError> {
    let b = take_array::<8>(data, "memcomparable f64")?;
    Ok(f64_from_comparable_bits(u64::from_be_bytes(b)))
}

/// Unsigned LEB128 varint: 7 bits per byte, least significant group first, the high bit of a
/// byte set when another byte follows. 1 byte for `0..128`, at most [`MAX_VARINT_LEN`].
pub fn encode_var_u64(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

/// Reads a value written by [`encode_var_u64`]. Rejects a varint that runs off the end of the
/// input, is longer than [`MAX_VARINT_LEN`] bytes, or does not fit a u64.
pub fn decode_var_u64(data: &mut &[u8]) -> Result<u64, CodecError> {
    let mut v = 0u64;
    for (i, &b) in data.iter().enumerate() {
        if i == MAX_VARINT_LEN - 1 && b > 1 {
            return Err(CodecError::new(
                "varint",
                format!("expected a value within u64 (last byte 0 or 1), found last byte {b:#04x}"),
            ));
        }
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            *data = &data[i + 1..];
            return Ok(v);
        }
    }
    Err(CodecError::new(
        "varint",
        format!(
            "expected a final byte (high bit clear), found the end of input after {} bytes",
            data.len()
        ),
    ))
}

/// Signed varint: zigzag (`0, -1, 1, -2, ...` → `0, 1, 2, 3, ...`) then [`encode_var_u64`],
/// so values near zero of either sign are short.
pub fn encode_var_i64(buf: &mut Vec<u8>, v: i64) {
    encode_var_u64(buf, ((v << 1) ^ (v >> 63)) as u64);
}

/// Reads a value written by [`encode_var_i64`].
pub fn decode_var_i64(data: &mut &[u8]) -> Result<i64, CodecError> {
    let u = decode_var_u64(data)?;
    Ok(((u >> 1) as i64) ^ -((u & 1) as i64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negative_zero_encodes_like_zero() {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        encode_f64(&mut a, -0.0);
        encode_f64(&mut b, 0.0);
        assert_eq!(a, b);
    }

    #[test]
    fn eleven_byte_varint_is_rejected() {
        let data = [0x80u8; 11];
        let err = decode_var_u64(&mut &data[..]).unwrap_err();
        assert!(err.detail.contains("last byte"), "{err}");
    }

    #[test]
    fn varint_overflowing_u64_is_rejected() {
        let mut data = vec![0xffu8; 9];
        data.push(0x02);
        assert!(decode_var_u64(&mut &data[..]).is_err());
        let mut max = vec![0xffu8; 9];
        max.push(0x01);
        assert_eq!(decode_var_u64(&mut &max[..]).unwrap(), u64::MAX);
    }

    #[test]
    fn zigzag_keeps_small_negatives_short() {
        let mut buf = Vec::new();
        encode_var_i64(&mut buf, -1);
        assert_eq!(buf, [1]);
        buf.clear();
        encode_var_i64(&mut buf, i64::MIN);
        assert_eq!(decode_var_i64(&mut &buf[..]).unwrap(), i64::MIN);
    }
}
