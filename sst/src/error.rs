//! Errors of the table format.
//!
//! A reader never returns wrong data: every inconsistency it can detect (checksum mismatch,
//! truncation, an offset out of bounds, a bad magic) is a [`Error::Corruption`] that names the
//! file and the byte offset of the smallest unit that failed (block, index, footer).

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Errors of the sst crate.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The bytes of a table are not what the writer produced.
    #[error("corrupt table: {what} file_id={file_id} offset={offset}")]
    Corruption {
        file_id: u64,
        /// Absolute offset in the file of the unit (block, index, footer) that failed.
        offset: u64,
        what: &'static str,
    },
    /// The file was written by a format version this reader does not know.
    #[error(
        "unsupported table format version: expected at most {expected} found={found} file_id={file_id}"
    )]
    UnsupportedVersion {
        file_id: u64,
        expected: u16,
        found: u16,
    },
    /// The builder was given entries out of order (a bug in the caller, not bad data). Boxed
    /// so that `Result<()>` stays small on the hot read paths.
    #[error("entries out of order: keys must ascend and versions of one key descend; {0}")]
    OutOfOrder(Box<OutOfOrder>),
    /// One entry is bigger than a table can hold.
    #[error("entry too large: key + user meta + value must be at most {max} bytes, found={len}")]
    EntryTooLarge { len: usize, max: usize },
    /// Reading the file from disk failed.
    #[error("table i/o failed: file_id={file_id}")]
    Io {
        file_id: u64,
        #[source]
        source: std::io::Error,
    },
    /// A builder option is out of its allowed range.
    #[error("invalid table option: {what}")]
    InvalidOption { what: String },
}

/// The two entries a builder saw out of order.
#[derive(Debug)]
pub struct OutOfOrder {
    pub previous: Vec<u8>,
    pub key: Vec<u8>,
    pub previous_version: u64,
    pub version: u64,
}

impl std::fmt::Display for OutOfOrder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "previous_key={:?} key={:?} previous_version={} version={}",
            self.previous, self.key, self.previous_version, self.version
        )
    }
}

impl Error {
    /// True when the error means the stored bytes are damaged (as opposed to I/O or misuse).
    pub fn is_corruption(&self) -> bool {
        matches!(
            self,
            Error::Corruption { .. } | Error::UnsupportedVersion { .. }
        )
    }
}

/// A corruption found inside one decoded unit, before the caller adds the file id and offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Corrupt(pub &'static str);

impl Corrupt {
    /// Attaches the file id and offset of the unit that failed.
    pub fn at(self, file_id: u64, offset: u64) -> Error {
        Error::Corruption {
            file_id,
            offset,
            what: self.0,
        }
    }
}
