//! The checksummed frame that both local logs (WAL segments and the MANIFEST) store their
//! records in, and the rule that tells a torn tail from corruption.
//!
//! # Layout (frame format version 1)
//!
//! ```text
//! frame := len:u32le  body_crc:u32le  header_crc:u32le  body[len]
//!   body_crc   = crc32(body)                        (IEEE, crc32fast)
//!   header_crc = crc32(len:u32le ++ body_crc:u32le)
//! ```
//!
//! The header has its own checksum so that a reader can reject a candidate frame after hashing
//! 8 bytes: a corrupt length is caught before it is used (it never drives an allocation or a
//! long hash), and the search for valid frames after a damaged one (see below) costs O(n).
//! `len` is further bounded by [`FrameLimits`] and by the bytes left in the input.
//!
//! # Torn tail or corruption
//!
//! Frames are decoded in order until one fails (incomplete header, bad header checksum, length
//! out of range, body past the end of the input, bad body checksum). The input is then searched
//! byte by byte for any valid frame starting after the failure:
//!
//! * none found: the bytes from the failure on are a **torn tail** — a prefix of a frame whose
//!   write did not complete, a frame whose body never reached the disk, or zero fill. The
//!   owner of the file truncates it there. This includes a last frame that is complete in
//!   length but fails its body checksum: after a power loss that is what a frame whose data
//!   blocks were not written looks like, and such a frame was never acknowledged (it would
//!   have been fsync'd). Bit rot confined to the very last frame looks the same and is
//!   truncated too; the owner logs a warning with the offset.
//! * found: the failure is **corruption** in the middle of the log, an error that stops the
//!   open. Bytes are never skipped silently.
//!
//! Known limit: a frame that is cut off (torn) while its body contains bytes that happen to
//! form a valid frame — which needs both checksums to match, so in practice only a crafted
//! value — is reported as corruption instead of a torn tail. The open fails loudly rather than
//! losing data.

/// Bytes of a frame header.
pub const FRAME_HEADER_LEN: usize = 12;

/// Bounds on a frame's body length; a length outside them is a damaged frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameLimits {
    /// Smallest valid body.
    pub min_body: u32,
    /// Largest valid body.
    pub max_body: u32,
}

/// One valid frame of the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame<'a> {
    /// Offset of the frame header in the input.
    pub offset: u64,
    /// The body bytes, a slice of the input.
    pub body: &'a [u8],
}

impl Frame<'_> {
    /// Offset just past the frame.
    pub fn end(&self) -> u64 {
        self.offset + (FRAME_HEADER_LEN + self.body.len()) as u64
    }
}

/// Why the bytes at an offset are not a valid frame.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameFault {
    /// The input ends inside the frame's header or body.
    #[error("frame truncated needed={needed} available={available}")]
    Incomplete { needed: u64, available: u64 },
    /// The header checksum does not match its length and body checksum fields.
    #[error("frame header checksum mismatch stored={stored:#010x} computed={computed:#010x}")]
    HeaderChecksum { stored: u32, computed: u32 },
    /// The header is intact but announces a length outside the limits.
    #[error("frame length out of range len={len} min={min} max={max}")]
    LengthOutOfRange { len: u32, min: u32, max: u32 },
    /// The body does not match its checksum.
    #[error("frame body checksum mismatch stored={stored:#010x} computed={computed:#010x}")]
    BodyChecksum { stored: u32, computed: u32 },
}

/// How a sequence of frames ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FramesEnd {
    /// Every byte belongs to a valid frame.
    Clean,
    /// The bytes from `offset` to the end hold no valid frame: a torn tail to truncate.
    Torn { offset: u64, fault: FrameFault },
    /// The frame at `offset` is damaged although a valid frame starts later, at `next_valid`.
    Corrupt {
        offset: u64,
        fault: FrameFault,
        next_valid: u64,
    },
}

impl FramesEnd {
    /// Length of the valid prefix: where the frames stop.
    pub fn valid_len(&self, input_len: usize) -> u64 {
        match self {
            FramesEnd::Clean => input_len as u64,
            FramesEnd::Torn { offset, .. } | FramesEnd::Corrupt { offset, .. } => *offset,
        }
    }
}

/// Appends one frame holding `body` to `out`.
///
/// The caller checks `body.len()` against its [`FrameLimits`]; this only requires that it fits
/// the u32 length field.
pub fn encode_frame(body: &[u8], out: &mut Vec<u8>) {
    encode_frame_parts(&[body], out);
}

/// Appends one frame whose body is the concatenation of `parts`, without first copying them
/// into one buffer.
pub fn encode_frame_parts(parts: &[&[u8]], out: &mut Vec<u8>) {
    let body_len: usize = parts.iter().map(|p| p.len()).sum();
    let len = u32::try_from(body_len).expect("frame body fits a u32 length");
    let mut hasher = crc32fast::Hasher::new();
    for part in parts {
        hasher.update(part);
    }
    let body_crc = hasher.finalize();
    out.reserve(FRAME_HEADER_LEN + body_len);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&body_crc.to_le_bytes());
    out.extend_from_slice(&header_crc(len, body_crc).to_le_bytes());
    for part in parts {
        out.extend_from_slice(part);
    }
}

fn header_crc(len: u32, body_crc: u32) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&len.to_le_bytes());
    h.update(&body_crc.to_le_bytes());
    h.finalize()
}

fn u32_at(data: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(data[at..at + 4].try_into().expect("4 bytes"))
}

/// Decodes the frame starting at `offset`, or says why there is none.
pub fn decode_frame(
    data: &[u8],
    offset: usize,
    limits: FrameLimits,
) -> Result<Frame<'_>, FrameFault> {
    let available = data.len().saturating_sub(offset);
    if available < FRAME_HEADER_LEN {
        return Err(FrameFault::Incomplete {
            needed: FRAME_HEADER_LEN as u64,
            available: available as u64,
        });
    }
    let len = u32_at(data, offset);
    let body_crc = u32_at(data, offset + 4);
    let stored = u32_at(data, offset + 8);
    let computed = header_crc(len, body_crc);
    if stored != computed {
        return Err(FrameFault::HeaderChecksum { stored, computed });
    }
    if len < limits.min_body || len > limits.max_body {
        return Err(FrameFault::LengthOutOfRange {
            len,
            min: limits.min_body,
            max: limits.max_body,
        });
    }
    let needed = FRAME_HEADER_LEN as u64 + u64::from(len);
    if needed > available as u64 {
        return Err(FrameFault::Incomplete {
            needed,
            available: available as u64,
        });
    }
    let start = offset + FRAME_HEADER_LEN;
    let body = &data[start..start + len as usize];
    let computed = crc32fast::hash(body);
    if computed != body_crc {
        return Err(FrameFault::BodyChecksum {
            stored: body_crc,
            computed,
        });
    }
    Ok(Frame {
        offset: offset as u64,
        body,
    })
}

/// Decodes the frames of `data[start..]` in order and classifies how they end (see the module
/// documentation). The frames before a failure are returned in every case.
pub fn decode_frames(
    data: &[u8],
    start: usize,
    limits: FrameLimits,
) -> (Vec<Frame<'_>>, FramesEnd) {
    let mut frames = Vec::new();
    let mut offset = start;
    while offset < data.len() {
        match decode_frame(data, offset, limits) {
            Ok(frame) => {
                offset = frame.end() as usize;
                frames.push(frame);
            }
            Err(fault) => {
                let end = match find_valid_frame(data, offset + 1, limits) {
                    None => FramesEnd::Torn {
                        offset: offset as u64,
                        fault,
                    },
                    Some(next_valid) => FramesEnd::Corrupt {
                        offset: offset as u64,
                        fault,
                        next_valid: next_valid as u64,
                    },
                };
                return (frames, end);
            }
        }
    }
    (frames, FramesEnd::Clean)
}

/// The first offset at or after `from` where a valid frame starts.
fn find_valid_frame(data: &[u8], from: usize, limits: FrameLimits) -> Option<usize> {
    let last_start = data.len().checked_sub(FRAME_HEADER_LEN)?;
    (from..=last_start).find(|&at| decode_frame(data, at, limits).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: FrameLimits = FrameLimits {
        min_body: 1,
        max_body: 1 << 20,
    };

    fn frames(bodies: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for body in bodies {
            encode_frame(body, &mut out);
        }
        out
    }

    #[test]
    fn encoded_frames_decode_clean() {
        let data = frames(&[b"one", b"two", b"three"]);
        let (decoded, end) = decode_frames(&data, 0, LIMITS);
        assert_eq!(end, FramesEnd::Clean);
        let bodies: Vec<&[u8]> = decoded.iter().map(|f| f.body).collect();
        assert_eq!(bodies, [&b"one"[..], b"two", b"three"]);
    }

    #[test]
    fn zero_fill_after_frames_is_a_torn_tail() {
        let mut data = frames(&[b"one"]);
        let valid = data.len() as u64;
        data.extend_from_slice(&[0; 100]);
        let (decoded, end) = decode_frames(&data, 0, LIMITS);
        assert_eq!(decoded.len(), 1);
        assert!(matches!(end, FramesEnd::Torn { offset, .. } if offset == valid));
    }

    #[test]
    fn damaged_length_before_a_valid_frame_is_corruption() {
        let mut data = frames(&[b"one", b"two"]);
        data[0] ^= 0x40;
        let (decoded, end) = decode_frames(&data, 0, LIMITS);
        assert!(decoded.is_empty());
        assert!(matches!(
            end,
            FramesEnd::Corrupt {
                offset: 0,
                fault: FrameFault::HeaderChecksum { .. },
                next_valid: 15
            }
        ));
    }

    #[test]
    fn huge_length_with_valid_header_is_rejected_without_reading_it() {
        let mut data = Vec::new();
        let len = u32::MAX;
        data.extend_from_slice(&len.to_le_bytes());
        data.extend_from_slice(&0u32.to_le_bytes());
        data.extend_from_slice(&header_crc(len, 0).to_le_bytes());
        assert!(matches!(
            decode_frame(&data, 0, LIMITS),
            Err(FrameFault::LengthOutOfRange { len: u32::MAX, .. })
        ));
    }
}
