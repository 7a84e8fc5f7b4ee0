//! Options a table is built with. A table records its compression in the footer and in every
//! block, so a reader never needs the options that wrote it.

use crate::error::{Error, Result};
use crate::footer::FormatVersion;

/// The largest key + user meta + value one entry may hold. With blocks of at most 64 MiB this
/// keeps every block under the reader's `block_frame::MAX_RAW_LEN`, and every length in a u32.
pub const MAX_ENTRY_LEN: usize = 128 * 1024 * 1024;

/// Default target size of a data block before compression.
pub const DEFAULT_BLOCK_SIZE: usize = 64 * 1024;

/// Block compression. Chosen per LSM level by the engine: cheap or none near the top, where
/// files are short-lived, and stronger at the bottom, where most bytes live for long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    /// zstd at the given level (1..=22; 3 is zstd's default).
    Zstd(i32),
}

impl Compression {
    /// The kind byte stored in the footer and in block trailers.
    pub fn kind(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Zstd(_) => 1,
        }
    }
}

/// Options of a [`crate::TableBuilder`].
#[derive(Debug, Clone)]
pub struct BuilderOptions {
    /// Target uncompressed size of a data block (1 byte ..= 64 MiB). A block is cut before the
    /// entry that would start past the target, so it may exceed it by up to one entry; main
    /// blocks are cut only between keys. Smaller blocks make point reads cheaper and the
    /// index bigger.
    pub block_size: usize,
    pub compression: Compression,
    /// Bits of filter per distinct key: 10 gives about 1% false positives.
    pub filter_bits_per_key: u32,
    /// The layout to write ([`FormatVersion::NEWEST`] by default); an older one while readers
    /// that do not know the newest may still open the table (a rolling upgrade).
    pub format_version: FormatVersion,
}

impl Default for BuilderOptions {
    fn default() -> Self {
        BuilderOptions {
            block_size: DEFAULT_BLOCK_SIZE,
            compression: Compression::None,
            filter_bits_per_key: 10,
            format_version: FormatVersion::NEWEST,
        }
    }
}

impl BuilderOptions {
    pub(crate) fn validate(&self) -> Result<()> {
        if self.block_size == 0 || self.block_size > 64 * 1024 * 1024 {
            return Err(Error::InvalidOption {
                what: format!("block_size must be in 1..=64MiB, found={}", self.block_size),
            });
        }
        if let Compression::Zstd(level) = self.compression
            && !(1..=22).contains(&level)
        {
            return Err(Error::InvalidOption {
                what: format!("zstd level must be in 1..=22, found={level}"),
            });
        }
        // Zero bits would build an empty filter, which answers "absent" for every key.
        if !(1..=64).contains(&self.filter_bits_per_key) {
            return Err(Error::InvalidOption {
                what: format!(
                    "filter_bits_per_key must be in 1..=64, found={}",
                    self.filter_bits_per_key
                ),
            });
        }
        Ok(())
    }
}
