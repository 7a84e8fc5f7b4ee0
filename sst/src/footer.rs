//! The fixed-size footer at the end of every table section: where everything else is.
//!
//! 80 bytes, the same in every format version:
//!
//! ```text
//! footer := old_blocks_offset:u64le
//!           index:handle old_index:handle filter:handle properties:handle
//!           compression:u8 checksum:u8 format_version:u16le
//!           reserved:u64le (0)
//!           footer_crc:u32le   (crc32 of every footer byte before it)
//!           magic:u64le        (MAGIC)
//! handle := offset:u64le len:u32le
//! ```
//!
//! A section is laid out as: main data blocks, old-version blocks (from `old_blocks_offset`),
//! index, old-version index, filter, properties, footer. Every offset is relative to the start of
//! the section, every region is a checksummed block frame.

use crate::error::Corrupt;
use crate::index::BlockHandle;
use crate::varint;

pub const MAGIC: u64 = 0x5354_5241_5455_5353; // "SSUTARTS" little-endian: "STRATUSS"
/// The newest format version this build writes (and every older one it reads).
pub const FORMAT_VERSION: u16 = FormatVersion::NEWEST.as_u16();

/// A table format version: the layout of its data blocks (see [`crate::block`]); the footer,
/// index, filter and properties are the same in every version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FormatVersion {
    /// Fixed 8-byte versions, a length byte for every user meta, u32 entry offsets.
    V1,
    /// Versions as varint differences from the block's first, empty metas as a flag, u16
    /// entry offsets in blocks under 64 KiB: ~8 bytes less per entry.
    V2,
}

impl FormatVersion {
    /// Every version this build reads, oldest first.
    pub const ALL: [FormatVersion; 2] = [FormatVersion::V1, FormatVersion::V2];
    /// What a builder writes unless told otherwise. A cluster whose readers (servers and
    /// workers) are not all on a build that reads it must be told otherwise until they are.
    pub const NEWEST: FormatVersion = FormatVersion::V2;

    /// The number in the footer.
    pub const fn as_u16(self) -> u16 {
        match self {
            FormatVersion::V1 => 1,
            FormatVersion::V2 => 2,
        }
    }

    /// The version a footer's number names, if this build reads it.
    pub fn from_u16(v: u16) -> Option<FormatVersion> {
        match v {
            1 => Some(FormatVersion::V1),
            2 => Some(FormatVersion::V2),
            _ => None,
        }
    }
}
pub const CHECKSUM_CRC32: u8 = 1;
pub const FOOTER_LEN: usize = 80;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footer {
    pub old_blocks_offset: u64,
    pub index: BlockHandle,
    pub old_index: BlockHandle,
    pub filter: BlockHandle,
    pub properties: BlockHandle,
    pub compression: u8,
    pub checksum: u8,
    pub format_version: FormatVersion,
}

impl Footer {
    pub fn encode(&self) -> [u8; FOOTER_LEN] {
        let mut out = Vec::with_capacity(FOOTER_LEN);
        out.extend_from_slice(&self.old_blocks_offset.to_le_bytes());
        for h in [self.index, self.old_index, self.filter, self.properties] {
            out.extend_from_slice(&h.offset.to_le_bytes());
            out.extend_from_slice(&h.len.to_le_bytes());
        }
        out.push(self.compression);
        out.push(self.checksum);
        out.extend_from_slice(&self.format_version.as_u16().to_le_bytes());
        out.extend_from_slice(&0u64.to_le_bytes());
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out.extend_from_slice(&MAGIC.to_le_bytes());
        let mut arr = [0u8; FOOTER_LEN];
        arr.copy_from_slice(&out);
        arr
    }

    /// Decodes the footer from the last [`FOOTER_LEN`] bytes of `section`. Checks magic,
    /// checksum and format version; the caller checks the handles against the section size.
    pub fn decode(section: &[u8]) -> Result<Footer, FooterError> {
        if section.len() < FOOTER_LEN {
            return Err(FooterError::Corrupt(Corrupt(
                "section shorter than its footer",
            )));
        }
        let f = &section[section.len() - FOOTER_LEN..];
        let mut pos = FOOTER_LEN - 8;
        let magic = varint::get_fixed_u64(f, &mut pos).ok_or(Corrupt("footer magic"))?;
        if magic != MAGIC {
            return Err(Corrupt("bad table magic").into());
        }
        let mut pos = FOOTER_LEN - 12;
        let crc = varint::get_fixed_u32(f, &mut pos).ok_or(Corrupt("footer crc"))?;
        if crc32fast::hash(&f[..FOOTER_LEN - 12]) != crc {
            return Err(Corrupt("footer checksum mismatch").into());
        }
        let bad = Corrupt("footer truncated");
        let mut pos = 0;
        let old_blocks_offset = varint::get_fixed_u64(f, &mut pos).ok_or(bad)?;
        let mut handles = [BlockHandle { offset: 0, len: 0 }; 4];
        for h in &mut handles {
            h.offset = varint::get_fixed_u64(f, &mut pos).ok_or(bad)?;
            h.len = varint::get_fixed_u32(f, &mut pos).ok_or(bad)?;
        }
        let compression = f[pos];
        let checksum = f[pos + 1];
        let format_version = u16::from_le_bytes([f[pos + 2], f[pos + 3]]);
        let mut rpos = pos + 4;
        if varint::get_fixed_u64(f, &mut rpos) != Some(0) {
            return Err(Corrupt("footer reserved bytes are not zero").into());
        }
        let format_version =
            FormatVersion::from_u16(format_version).ok_or(FooterError::Version(format_version))?;
        if checksum != CHECKSUM_CRC32 {
            return Err(Corrupt("unknown checksum kind").into());
        }
        let [index, old_index, filter, properties] = handles;
        Ok(Footer {
            old_blocks_offset,
            index,
            old_index,
            filter,
            properties,
            compression,
            checksum,
            format_version,
        })
    }
}

/// Why a footer failed to decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FooterError {
    Corrupt(Corrupt),
    /// A valid footer of a format version this reader does not know.
    Version(u16),
}

impl From<Corrupt> for FooterError {
    fn from(c: Corrupt) -> Self {
        FooterError::Corrupt(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn footer_round_trips_and_detects_flips() {
        let f = Footer {
            old_blocks_offset: 100,
            index: BlockHandle {
                offset: 200,
                len: 30,
            },
            old_index: BlockHandle {
                offset: 230,
                len: 13,
            },
            filter: BlockHandle {
                offset: 243,
                len: 70,
            },
            properties: BlockHandle {
                offset: 313,
                len: 99,
            },
            compression: 1,
            checksum: CHECKSUM_CRC32,
            format_version: FormatVersion::NEWEST,
        };
        let bytes = f.encode();
        assert_eq!(Footer::decode(&bytes), Ok(f));
        for i in 0..FOOTER_LEN {
            let mut bad = bytes;
            bad[i] ^= 1;
            assert!(Footer::decode(&bad).is_err(), "flip at {i} not detected");
        }
    }
}
