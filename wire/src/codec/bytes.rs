//! Byte strings in two encodings.
//!
//! * **Memcomparable** (TiDB/TiKV group encoding), for keys: the bytewise order of encodings
//!   equals the lexicographic order of the strings, prefixes and zero bytes included, and an
//!   encoded string can be followed by more key parts (its end is self-delimiting).
//! * **Compact** (varint length + bytes), for row values and results: shorter, no order.

use super::number::{decode_var_i64, encode_var_i64};
use crate::codec::CodecError;

const GROUP_SIZE: usize = 8;
const MARKER: u8 = 0xff;
const PAD: u8 = 0;

/// Memcomparable bytes: the input cut into groups of 8 bytes, each written as 8 bytes followed
/// by a marker byte. A full group has marker `0xff`; the last group is padded with zero bytes to
/// 8 and has marker `0xff - pad_count`. There is always a last, padded group: an input whose
/// length is a multiple of 8 ends with an all-padding group (marker `0xf7`).
///
/// ```text
/// "abc"        → 61 62 63 00 00 00 00 00 | fa
/// "abcdefgh"   → 61 62 63 64 65 66 67 68 | ff   00 00 00 00 00 00 00 00 | f7
/// ```
///
/// Why it orders: within a group bytes compare directly; a string that ends inside a group is
/// padded with zeros and gets a smaller marker than a longer string with the same bytes (whose
/// marker is larger because it has fewer pad bytes, or `0xff` when it goes on).
pub fn encode_bytes_comparable(buf: &mut Vec<u8>, data: &[u8]) {
    buf.reserve((data.len() / GROUP_SIZE + 1) * (GROUP_SIZE + 1));
    let mut chunks = data.chunks_exact(GROUP_SIZE);
    for chunk in &mut chunks {
        buf.extend_from_slice(chunk);
        buf.push(MARKER);
    }
    let rest = chunks.remainder();
    let pad = GROUP_SIZE - rest.len();
    buf.extend_from_slice(rest);
    buf.extend(std::iter::repeat_n(PAD, pad));
    buf.push(MARKER - pad as u8);
}

/// Reads a value written by [`encode_bytes_comparable`]. Rejects a marker that claims more than
/// 8 pad bytes, pad bytes that are not zero, and input that ends inside a group.
pub fn decode_bytes_comparable(data: &mut &[u8]) -> Result<Vec<u8>, CodecError> {
    let mut out = Vec::new();
    loop {
        let Some((group, rest)) = data.split_first_chunk::<{ GROUP_SIZE + 1 }>() else {
            return Err(CodecError::new(
                "memcomparable bytes",
                format!(
                    "expected a group of {} bytes, found {}",
                    GROUP_SIZE + 1,
                    data.len()
                ),
            ));
        };
        *data = rest;
        let marker = group[GROUP_SIZE];
        let pad = usize::from(MARKER - marker);
        if pad > GROUP_SIZE {
            return Err(CodecError::new(
                "memcomparable bytes",
                format!("expected a group marker in 0xf7..=0xff, found {marker:#04x}"),
            ));
        }
        let real = GROUP_SIZE - pad;
        out.extend_from_slice(&group[..real]);
        if pad == 0 {
            continue;
        }
        if let Some(b) = group[real..GROUP_SIZE].iter().find(|&&b| b != PAD) {
            return Err(CodecError::new(
                "memcomparable bytes",
                format!("expected zero padding, found pad byte {b:#04x}"),
            ));
        }
        return Ok(out);
    }
}

/// Compact bytes: the length as a signed varint ([`encode_var_i64`], as TiDB writes it), then
/// the bytes.
pub fn encode_compact_bytes(buf: &mut Vec<u8>, data: &[u8]) {
    encode_var_i64(buf, data.len() as i64);
    buf.extend_from_slice(data);
}

/// Reads a value written by [`encode_compact_bytes`], borrowing the bytes from the input.
/// Rejects a negative length and a length beyond the input.
pub fn decode_compact_bytes_ref<'a>(data: &mut &'a [u8]) -> Result<&'a [u8], CodecError> {
    let len = decode_var_i64(data)?;
    if len < 0 || len as u64 > data.len() as u64 {
        return Err(CodecError::new(
            "compact bytes",
            format!("expected a length within 0..={}, found {len}", data.len()),
        ));
    }
    let (value, rest) = data.split_at(len as usize);
    *data = rest;
    Ok(value)
}

/// Reads a value written by [`encode_compact_bytes`].
pub fn decode_compact_bytes(data: &mut &[u8]) -> Result<Vec<u8>, CodecError> {
    decode_compact_bytes_ref(data).map(<[u8]>::to_vec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multiple_of_eight_ends_with_an_all_padding_group() {
        let mut buf = Vec::new();
        encode_bytes_comparable(&mut buf, b"abcdefgh");
        assert_eq!(buf.len(), 18);
        assert_eq!(buf[8], 0xff);
        assert_eq!(&buf[9..], &[0, 0, 0, 0, 0, 0, 0, 0, 0xf7]);
    }

    #[test]
    fn nonzero_padding_is_rejected() {
        let data = [b'a', 0, 0, 0, 0, 0, 0, 1, 0xf8];
        let err = decode_bytes_comparable(&mut &data[..]).unwrap_err();
        assert!(err.detail.contains("zero padding"), "{err}");
    }

    #[test]
    fn marker_claiming_nine_pad_bytes_is_rejected() {
        let data = [0u8, 0, 0, 0, 0, 0, 0, 0, 0xf6];
        assert!(decode_bytes_comparable(&mut &data[..]).is_err());
    }

    #[test]
    fn compact_length_beyond_input_is_rejected_without_allocating() {
        let mut buf = Vec::new();
        encode_var_i64(&mut buf, i64::MAX);
        assert!(decode_compact_bytes(&mut &buf[..]).is_err());
        buf.clear();
        encode_var_i64(&mut buf, -1);
        assert!(decode_compact_bytes(&mut &buf[..]).is_err());
    }
}
