//! The physical frame around every block stored in a table (data, old-version, index, filter,
//! properties): optional compression plus a checksum, so any flipped bit is detected before a
//! byte of the block is interpreted.
//!
//! ```text
//! frame := payload compression:u8 raw_len:u32le crc32:u32le
//! ```
//!
//! `payload` is the logical block, or its zstd frame when `compression = 1`; `raw_len` is the
//! logical length (equal to the payload length when uncompressed); `crc32` (crc32fast, IEEE)
//! covers payload, compression and raw_len. A block handle's length includes the 9-byte trailer.

use bytes::Bytes;

use crate::error::Corrupt;
use crate::options::Compression;

pub const TRAILER_LEN: usize = 9;
pub const COMPRESSION_NONE: u8 = 0;
pub const COMPRESSION_ZSTD: u8 = 1;

/// The largest logical block a reader accepts. Builders cut blocks near the target size, so a
/// bigger claim is corruption; the cap keeps a damaged `raw_len` from driving a huge allocation.
pub const MAX_RAW_LEN: usize = 256 * 1024 * 1024;

/// zstd cannot expand a frame by more than this factor (a 4-byte RLE block yields at most
/// 128 KiB); a claim above it is corruption, so allocation stays proportional to the input.
const MAX_ZSTD_RATIO: usize = 1 << 16;

/// Compresses and frames blocks. Keeps one zstd context for the whole table.
pub(crate) struct FrameWriter {
    compression: Compression,
    compressor: Option<zstd::bulk::Compressor<'static>>,
}

impl FrameWriter {
    pub fn new(compression: Compression) -> std::io::Result<Self> {
        let compressor = match compression {
            Compression::None => None,
            Compression::Zstd(level) => Some(zstd::bulk::Compressor::new(level)?),
        };
        Ok(FrameWriter {
            compression,
            compressor,
        })
    }

    /// Appends `raw` framed to `out`, compressed if that saves at least 1/8. Returns the frame
    /// length.
    pub fn write(&mut self, raw: &[u8], out: &mut Vec<u8>, allow_compression: bool) -> usize {
        let start = out.len();
        let mut kind = COMPRESSION_NONE;
        if allow_compression
            && let (Compression::Zstd(_), Some(c)) = (self.compression, self.compressor.as_mut())
            && let Ok(compressed) = c.compress(raw)
            && compressed.len() < raw.len() - raw.len() / 8
        {
            out.extend_from_slice(&compressed);
            kind = COMPRESSION_ZSTD;
        }
        if kind == COMPRESSION_NONE {
            out.extend_from_slice(raw);
        }
        out.push(kind);
        out.extend_from_slice(&(raw.len() as u32).to_le_bytes());
        let crc = crc32fast::hash(&out[start..]);
        out.extend_from_slice(&crc.to_le_bytes());
        out.len() - start
    }
}

/// Splits a frame into (compression kind, raw_len, payload) after checking its checksum.
pub fn verify(frame: &[u8]) -> Result<(u8, usize, &[u8]), Corrupt> {
    if frame.len() < TRAILER_LEN {
        return Err(Corrupt("block frame shorter than its trailer"));
    }
    let body_end = frame.len() - 4;
    let stored = u32::from_le_bytes(frame[body_end..].try_into().map_err(|_| Corrupt("crc"))?);
    if crc32fast::hash(&frame[..body_end]) != stored {
        return Err(Corrupt("block checksum mismatch"));
    }
    let payload_end = frame.len() - TRAILER_LEN;
    let kind = frame[payload_end];
    let raw_len = u32::from_le_bytes(
        frame[payload_end + 1..body_end]
            .try_into()
            .map_err(|_| Corrupt("raw length"))?,
    ) as usize;
    Ok((kind, raw_len, &frame[..payload_end]))
}

/// Verifies and, if needed, decompresses a frame. Uncompressed blocks are returned as a
/// zero-copy slice of `frame`.
pub fn decode(frame: &Bytes) -> Result<Bytes, Corrupt> {
    let (kind, raw_len, payload) = verify(frame)?;
    match kind {
        COMPRESSION_NONE => {
            if raw_len != payload.len() || raw_len > MAX_RAW_LEN {
                return Err(Corrupt("uncompressed block length mismatch"));
            }
            Ok(frame.slice(..payload.len()))
        }
        COMPRESSION_ZSTD => decompress(payload, raw_len).map(Bytes::from),
        _ => Err(Corrupt("unknown block compression")),
    }
}

thread_local! {
    /// One zstd decompression context per thread, reused for every block: creating a context
    /// (its window and entropy tables) per block was the largest single cost of reading a
    /// compressed table, above the decompression itself (perf, `stratus-bench sst`).
    static DECOMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

/// Decompresses a zstd payload whose logical length is claimed to be `raw_len`.
pub fn decompress(payload: &[u8], raw_len: usize) -> Result<Vec<u8>, Corrupt> {
    if raw_len > MAX_RAW_LEN || raw_len > payload.len().saturating_mul(MAX_ZSTD_RATIO) {
        return Err(Corrupt("block raw length out of range"));
    }
    let out = DECOMPRESSOR
        .with(|d| {
            let mut d = d.borrow_mut();
            if d.is_none() {
                *d = Some(zstd::bulk::Decompressor::new()?);
            }
            match d.as_mut() {
                Some(d) => d.decompress(payload, raw_len),
                None => Err(std::io::Error::other("no zstd context")),
            }
        })
        .map_err(|_| Corrupt("zstd decode failed"))?;
    if out.len() != raw_len {
        return Err(Corrupt("decompressed block length mismatch"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compressible_block_round_trips_through_zstd() {
        let raw = vec![7u8; 10_000];
        let mut w = FrameWriter::new(Compression::Zstd(3)).unwrap();
        let mut out = Vec::new();
        let n = w.write(&raw, &mut out, true);
        assert!(n < 1000, "frame should be compressed, len={n}");
        assert_eq!(out[n - TRAILER_LEN], COMPRESSION_ZSTD);
        assert_eq!(decode(&Bytes::from(out)).unwrap(), Bytes::from(raw));
    }

    #[test]
    fn incompressible_block_is_stored_raw() {
        // xorshift64: bytes with no structure for zstd to find.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let raw: Vec<u8> = (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect();
        let mut w = FrameWriter::new(Compression::Zstd(3)).unwrap();
        let mut out = Vec::new();
        let n = w.write(&raw, &mut out, true);
        assert_eq!(out[n - TRAILER_LEN], COMPRESSION_NONE);
        assert_eq!(decode(&Bytes::from(out)).unwrap(), Bytes::from(raw));
    }

    #[test]
    fn every_flipped_byte_is_detected() {
        let raw = b"hello block".to_vec();
        let mut w = FrameWriter::new(Compression::None).unwrap();
        let mut out = Vec::new();
        w.write(&raw, &mut out, true);
        for i in 0..out.len() {
            let mut bad = out.clone();
            bad[i] ^= 0x10;
            assert!(
                decode(&Bytes::from(bad)).is_err(),
                "flip at {i} not detected"
            );
        }
    }
}
