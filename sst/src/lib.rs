//! The Stratus table format.
//!
//! A table section holds entries `(key, version, user meta, value, tombstone)`; keys carry no
//! timestamp. The newest version of each key lives in the main data blocks, older versions in
//! separate old-version blocks that the main entry points at, so scans at a recent timestamp
//! read only main blocks. Every block is framed with a CRC32 and optionally zstd-compressed;
//! an index of block first keys, a cache-local Bloom filter and the table's properties follow,
//! then a fixed footer. An L0 file concatenates one section per column family.
//!
//! Modules follow the data: [`block`] (entries) → [`block_frame`] (compression + checksum) →
//! [`index`], [`filter`], [`properties`], [`footer`] → [`builder`] → [`table`] and
//! [`table_iter`] (reads) → [`l0`] (multi-CF files).
//!
//! Reads never return wrong data: a flipped bit anywhere is a [`Error::Corruption`] naming the
//! file id and offset, and a truncated file is an error, never a panic.

pub mod block;
pub mod block_cache;
pub mod block_frame;
pub mod block_rows;
pub mod builder;
pub mod error;
pub mod file_map;
pub mod filter;
pub mod footer;
pub mod fuzzing;
pub mod index;
pub mod l0;
pub mod options;
pub mod properties;
pub mod table;
pub mod table_iter;
mod varint;

pub use block::{Block, Version};
pub use block_cache::BlockCache;
pub use block_rows::{RunBound, RunRow};
pub use builder::{BuiltTable, TableBuilder};
pub use error::{Error, Result};
pub use footer::FormatVersion;
pub use l0::{L0Table, build_l0, l0_footer};
pub use options::{BuilderOptions, Compression, DEFAULT_BLOCK_SIZE};
pub use properties::Properties;
pub use table::Table;
pub use table_iter::TableIter;
