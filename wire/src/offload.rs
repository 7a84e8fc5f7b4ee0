//! The offload body: what a storage server POSTs to a worker's `/coprocessor`.
//!
//! Byte layout (little endian):
//!
//! ```text
//! u32 format version (= 1)
//! u32 len | len bytes   the coprocessor::Request (protobuf), cache fields cleared but is_cache_enabled
//! u32 len | len bytes   the memtable rows (changeset::memtable_data layout, in the format
//!                       the worker advertised: MEMTABLE_DATA_FORMAT_HEADER)
//! u32 len | len bytes   the snapshot ChangeSet (protobuf)
//! ```
//!
//! Nothing may follow the last section. Decoding slices the input (no copy, no allocation
//! beyond the three handles), so a hostile length can only ever fail, never allocate.

use bytes::Bytes;

/// The layout version this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// Response header of a worker's `/coprocessor` (every answer, errors too): the newest
/// memtable-data format (`changeset::memtable_data::Format`, as its version number) the worker
/// reads. A server writes the memtable section in the newest format both read; a worker that
/// never answered, or answered without the header (a build from before the negotiation), gets
/// format 1, which every build reads. So servers and workers can be upgraded in either order.
pub const MEMTABLE_DATA_FORMAT_HEADER: &str = "x-stratus-memtable-data-format";

/// The format number a worker's answer advertises in [`MEMTABLE_DATA_FORMAT_HEADER`]; 0 when
/// the header is missing or is not a number.
pub fn advertised_memtable_data_format(value: Option<&[u8]>) -> u32 {
    value
        .and_then(|v| std::str::from_utf8(v).ok())
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// The three sections of a decoded body, sharing the input buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffloadBody {
    pub request: Bytes,
    pub memtable_data: Bytes,
    pub changeset: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OffloadDecodeError {
    #[error("offload body truncated in {what}: expected {expected} bytes, found {found}")]
    Truncated {
        what: &'static str,
        expected: u64,
        found: u64,
    },
    #[error("unsupported offload body format: expected version {FORMAT_VERSION}, found {found}")]
    UnsupportedVersion { found: u32 },
    #[error("offload body has trailing bytes: expected none after the ChangeSet, found {found}")]
    TrailingBytes { found: u64 },
}

/// The section names, in order (used in errors and metrics).
const SECTIONS: [&str; 3] = ["cop request", "memtable data", "changeset"];

/// Encodes a body; the output is exactly `16 + sum of section lengths` bytes.
///
/// Panics if a section is 4 GiB or larger: the server never builds one (it bounds the
/// memtable rows it ships far below that).
pub fn encode(request: &[u8], memtable_data: &[u8], changeset: &[u8]) -> Vec<u8> {
    let sections = [request, memtable_data, changeset];
    let total = 4 + sections.iter().map(|s| 4 + s.len()).sum::<usize>();
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    for s in sections {
        let len = u32::try_from(s.len()).expect("offload section below 4 GiB");
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(s);
    }
    out
}

/// Decodes a body produced by [`encode`].
pub fn decode(body: &Bytes) -> Result<OffloadBody, OffloadDecodeError> {
    let mut pos = 0usize;
    let version = read_u32(body, &mut pos, "format version")?;
    if version != FORMAT_VERSION {
        return Err(OffloadDecodeError::UnsupportedVersion { found: version });
    }
    let mut parts = [Bytes::new(), Bytes::new(), Bytes::new()];
    for (part, what) in parts.iter_mut().zip(SECTIONS) {
        let len = read_u32(body, &mut pos, what)? as usize;
        let left = body.len() - pos;
        if len > left {
            return Err(OffloadDecodeError::Truncated {
                what,
                expected: len as u64,
                found: left as u64,
            });
        }
        *part = body.slice(pos..pos + len);
        pos += len;
    }
    if pos != body.len() {
        return Err(OffloadDecodeError::TrailingBytes {
            found: (body.len() - pos) as u64,
        });
    }
    let [request, memtable_data, changeset] = parts;
    Ok(OffloadBody {
        request,
        memtable_data,
        changeset,
    })
}

fn read_u32(body: &[u8], pos: &mut usize, what: &'static str) -> Result<u32, OffloadDecodeError> {
    let left = body.len() - *pos;
    if left < 4 {
        return Err(OffloadDecodeError::Truncated {
            what,
            expected: 4,
            found: left as u64,
        });
    }
    let v = u32::from_le_bytes(body[*pos..*pos + 4].try_into().expect("4 bytes"));
    *pos += 4;
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn round_trips_any_sections(
            a in proptest::collection::vec(any::<u8>(), 0..300),
            b in proptest::collection::vec(any::<u8>(), 0..300),
            c in proptest::collection::vec(any::<u8>(), 0..300),
        ) {
            let enc = encode(&a, &b, &c);
            prop_assert_eq!(enc.len(), 16 + a.len() + b.len() + c.len());
            let dec = decode(&Bytes::from(enc)).unwrap();
            prop_assert_eq!(&dec.request[..], &a[..]);
            prop_assert_eq!(&dec.memtable_data[..], &b[..]);
            prop_assert_eq!(&dec.changeset[..], &c[..]);
        }

        #[test]
        fn every_truncation_is_an_error(
            a in proptest::collection::vec(any::<u8>(), 0..50),
            b in proptest::collection::vec(any::<u8>(), 0..50),
            cut in any::<prop::sample::Index>(),
        ) {
            let enc = encode(&a, &b, b"cs");
            let cut = cut.index(enc.len());
            prop_assert!(decode(&Bytes::copy_from_slice(&enc[..cut])).is_err());
        }
    }

    #[test]
    fn trailing_bytes_and_unknown_versions_are_rejected() {
        let mut enc = encode(b"r", b"m", b"c");
        enc.push(0);
        assert_eq!(
            decode(&Bytes::from(enc)),
            Err(OffloadDecodeError::TrailingBytes { found: 1 })
        );
        let mut enc = encode(b"r", b"m", b"c");
        enc[0] = 2;
        assert_eq!(
            decode(&Bytes::from(enc)),
            Err(OffloadDecodeError::UnsupportedVersion { found: 2 })
        );
    }

    #[test]
    fn a_length_beyond_the_body_names_the_section() {
        let mut enc = encode(b"req", b"", b"");
        // version (4) + request length (4) + "req" (3), then the memtable data length.
        enc[11..15].copy_from_slice(&u32::MAX.to_le_bytes());
        let err = decode(&Bytes::from(enc)).unwrap_err();
        assert_eq!(
            err,
            OffloadDecodeError::Truncated {
                what: "memtable data",
                expected: u32::MAX as u64,
                found: 4
            }
        );
        assert!(err.to_string().contains("memtable data"));
    }
}
