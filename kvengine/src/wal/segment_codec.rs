//! The bytes of one WAL segment file: encoder and pure decoder.
//!
//! # Layout (WAL format version 1)
//!
//! A segment is the file `{segment_seq:016x}.wal`:
//!
//! ```text
//! segment := header record*
//! header  := magic "SWAL"  format_version:u16le  reserved:u16le (= 0)  segment_seq:u64le
//! record  := frame (see `frame.rs`: len:u32le body_crc:u32le header_crc:u32le body)
//! body    := shard_id:u64le  sequence:u64le  payload          (format version 1)
//! ```
//!
//! `payload` is an encoded write batch, opaque to the WAL. A body is at least 16 bytes and at
//! most [`MAX_RECORD_BODY`]. `segment_seq` repeats the number in the file name, so a segment
//! copied or renamed by hand is detected. A torn last record and corruption are told apart as
//! `frame.rs` describes.
//!
//! # Format versions
//!
//! The header and the frames are shared by two logs; the header's `format_version` says which
//! record bodies follow, and each reader accepts only its own:
//!
//! * **1** ([`WAL_FORMAT_VERSION`]): the engine's own WAL, bodies as above. Unchanged since the
//!   first release; the engine keeps writing it.
//! * **2** ([`RAFT_LOG_FORMAT_VERSION`]): the Raft log of many regions
//!   ([`crate::raft_log`]), whose bodies are laid out in `raft_log/record_codec.rs`.
//!
//! A segment of the other version is reported as [`SegmentHeaderFault::UnsupportedVersion`], so
//! pointing one log at the other's directory stops the open instead of misreading bytes.

use crate::wal::frame::{self, Frame, FrameLimits, FramesEnd};

/// Version of the segment and record layout above.
pub const WAL_FORMAT_VERSION: u16 = 1;

/// Version of segments holding the Raft log (`raft_log/record_codec.rs`).
pub const RAFT_LOG_FORMAT_VERSION: u16 = 2;

/// First bytes of every segment.
pub const SEGMENT_MAGIC: [u8; 4] = *b"SWAL";

/// Bytes of the segment header.
pub const SEGMENT_HEADER_LEN: usize = 16;

/// Bytes of a record body before the payload (shard id and sequence).
pub const RECORD_PREFIX_LEN: usize = 16;

/// Largest record body: one write batch may not exceed this (256 MiB).
pub const MAX_RECORD_BODY: u32 = 256 << 20;

/// Largest payload [`encode_record`] accepts.
pub const MAX_PAYLOAD_LEN: usize = MAX_RECORD_BODY as usize - RECORD_PREFIX_LEN;

pub(crate) const RECORD_LIMITS: FrameLimits = FrameLimits {
    min_body: RECORD_PREFIX_LEN as u32,
    max_body: MAX_RECORD_BODY,
};

/// The header of engine WAL (format version 1) segment `segment_seq`.
pub fn encode_segment_header(segment_seq: u64) -> [u8; SEGMENT_HEADER_LEN] {
    encode_versioned_segment_header(WAL_FORMAT_VERSION, segment_seq)
}

/// The header of segment `segment_seq` of format `version`.
pub fn encode_versioned_segment_header(version: u16, segment_seq: u64) -> [u8; SEGMENT_HEADER_LEN] {
    let mut header = [0; SEGMENT_HEADER_LEN];
    header[0..4].copy_from_slice(&SEGMENT_MAGIC);
    header[4..6].copy_from_slice(&version.to_le_bytes());
    // header[6..8]: reserved, zero.
    header[8..16].copy_from_slice(&segment_seq.to_le_bytes());
    header
}

/// Appends one record to `out`. The caller checks `payload.len() <= MAX_PAYLOAD_LEN`.
pub fn encode_record(shard_id: u64, sequence: u64, payload: &[u8], out: &mut Vec<u8>) {
    debug_assert!(payload.len() <= MAX_PAYLOAD_LEN);
    frame::encode_frame_parts(
        &[&shard_id.to_le_bytes(), &sequence.to_le_bytes(), payload],
        out,
    );
}

/// Bytes [`encode_record`] appends for a payload of `payload_len` bytes.
pub fn encoded_record_len(payload_len: usize) -> usize {
    frame::FRAME_HEADER_LEN + RECORD_PREFIX_LEN + payload_len
}

/// One record decoded from a segment, borrowing its payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentRecord<'a> {
    /// Offset of the record in the segment.
    pub offset: u64,
    pub shard_id: u64,
    pub sequence: u64,
    pub payload: &'a [u8],
}

/// Why a segment's header is unusable.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SegmentHeaderFault {
    /// Shorter than a header, or nothing but zeros: the segment was being created when the
    /// process stopped. Harmless for the last segment (it holds no record); corruption for any
    /// other, because a segment is durable before the next one is created.
    #[error("segment has no header len={len}")]
    Missing { len: u64 },
    #[error("segment has bad magic found={found:02x?}")]
    BadMagic { found: [u8; 4] },
    /// Another format version than the reader's: a segment of the other log, or of a newer
    /// release.
    #[error("unsupported segment format version found={found} expected={expected}")]
    UnsupportedVersion { found: u16, expected: u16 },
    #[error("segment header reserved field is not zero found={found:#06x}")]
    ReservedNotZero { found: u16 },
}

/// A decoded segment: its number, the valid records, and how the records end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodedSegment<'a> {
    /// The segment number its header states.
    pub segment_seq: u64,
    /// The records before the first damaged one, in file order.
    pub records: Vec<SegmentRecord<'a>>,
    /// Whether the records end cleanly, in a torn tail, or in corruption.
    pub end: FramesEnd,
}

impl DecodedSegment<'_> {
    /// Length of the valid prefix (header and whole records).
    pub fn valid_len(&self, input_len: usize) -> u64 {
        self.end.valid_len(input_len)
    }
}

/// The valid frames of a segment of format `version`, before their bodies are interpreted: the
/// part both logs share.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentFrames<'a> {
    /// The segment number its header states.
    pub segment_seq: u64,
    /// The frames before the first damaged one, in file order.
    pub frames: Vec<Frame<'a>>,
    /// Whether the frames end cleanly, in a torn tail, or in corruption.
    pub end: FramesEnd,
}

/// Checks the header of a segment of format `version` and decodes its frames (bodies between
/// `limits`). Never panics and never allocates more than the frames found.
pub fn decode_segment_frames(
    data: &[u8],
    version: u16,
    limits: FrameLimits,
) -> Result<SegmentFrames<'_>, SegmentHeaderFault> {
    if data.len() < SEGMENT_HEADER_LEN || data.iter().all(|&b| b == 0) {
        return Err(SegmentHeaderFault::Missing {
            len: data.len() as u64,
        });
    }
    let magic: [u8; 4] = data[0..4].try_into().expect("4 bytes");
    if magic != SEGMENT_MAGIC {
        return Err(SegmentHeaderFault::BadMagic { found: magic });
    }
    let found = u16::from_le_bytes([data[4], data[5]]);
    if found != version {
        return Err(SegmentHeaderFault::UnsupportedVersion {
            found,
            expected: version,
        });
    }
    let reserved = u16::from_le_bytes([data[6], data[7]]);
    if reserved != 0 {
        return Err(SegmentHeaderFault::ReservedNotZero { found: reserved });
    }
    let segment_seq = u64::from_le_bytes(data[8..16].try_into().expect("8 bytes"));
    let (frames, end) = frame::decode_frames(data, SEGMENT_HEADER_LEN, limits);
    Ok(SegmentFrames {
        segment_seq,
        frames,
        end,
    })
}

/// Decodes a whole engine WAL (format version 1) segment file. Never panics and never
/// allocates more than the records found.
pub fn decode_segment(data: &[u8]) -> Result<DecodedSegment<'_>, SegmentHeaderFault> {
    let SegmentFrames {
        segment_seq,
        frames,
        end,
    } = decode_segment_frames(data, WAL_FORMAT_VERSION, RECORD_LIMITS)?;
    Ok(DecodedSegment {
        segment_seq,
        records: frames.into_iter().map(record_of_frame).collect(),
        end,
    })
}

/// The format version 1 record a frame holds (its body is at least [`RECORD_PREFIX_LEN`]
/// bytes, which [`RECORD_LIMITS`] guarantees).
pub(crate) fn record_of_frame(f: Frame<'_>) -> SegmentRecord<'_> {
    let (prefix, payload) = f.body.split_at(RECORD_PREFIX_LEN);
    SegmentRecord {
        offset: f.offset,
        shard_id: u64::from_le_bytes(prefix[0..8].try_into().expect("8 bytes")),
        sequence: u64::from_le_bytes(prefix[8..16].try_into().expect("8 bytes")),
        payload,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pins format version 1: a segment with one record, byte for byte. A format change bumps
    /// [`WAL_FORMAT_VERSION`] and keeps decoding this.
    const V1_SEGMENT: &str = concat!(
        "5357414c",
        "0100",
        "0000",
        "0700000000000000", // header: magic, version, reserved, seq 7
        "12000000",
        "7763d2ae",
        "112da565", // frame: len 18, body crc, header crc
        "0300000000000000",
        "0900000000000000",
        "6162", // body: shard 3, sequence 9, "ab"
    );

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn format_v1_segment_bytes_are_pinned() {
        let mut data = encode_segment_header(7).to_vec();
        encode_record(3, 9, b"ab", &mut data);
        assert_eq!(data, unhex(V1_SEGMENT));
    }

    #[test]
    fn format_v1_segment_still_decodes() {
        let data = unhex(V1_SEGMENT);
        let decoded = decode_segment(&data).unwrap();
        assert_eq!(decoded.segment_seq, 7);
        assert_eq!(decoded.end, FramesEnd::Clean);
        assert_eq!(
            decoded.records,
            [SegmentRecord {
                offset: 16,
                shard_id: 3,
                sequence: 9,
                payload: b"ab"
            }]
        );
    }

    #[test]
    fn a_raft_log_segment_is_not_read_as_an_engine_wal_segment() {
        let mut data = encode_versioned_segment_header(RAFT_LOG_FORMAT_VERSION, 7).to_vec();
        encode_record(3, 9, b"ab", &mut data);
        assert_eq!(
            decode_segment(&data),
            Err(SegmentHeaderFault::UnsupportedVersion {
                found: 2,
                expected: 1
            })
        );
    }

    #[test]
    fn zero_filled_segment_has_no_header() {
        assert_eq!(
            decode_segment(&[0; 64]),
            Err(SegmentHeaderFault::Missing { len: 64 })
        );
        assert_eq!(
            decode_segment(b"SWA"),
            Err(SegmentHeaderFault::Missing { len: 3 })
        );
    }
}
