//! Errors of this crate.
//!
//! Messages are lowercase with the facts at the end as `key=value`; a wrapped source error's
//! text is never repeated. Every error here means the input is corrupt or was built wrongly:
//! none is retryable.

use thiserror::Error;

use types::ColumnFamily;

/// A ChangeSet could not be decoded.
#[derive(Debug, Error)]
pub enum ChangeSetDecodeError {
    /// The bytes are not a valid protobuf `ChangeSet`.
    #[error("changeset is not valid protobuf len={len}")]
    Protobuf {
        /// Length of the input in bytes.
        len: usize,
        /// What prost found wrong.
        #[source]
        source: prost::DecodeError,
    },
}

/// A ChangeSet could not be applied to a shard's file list. The file list is unchanged.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum ApplyError {
    /// The ChangeSet belongs to another shard.
    #[error(
        "changeset belongs to another shard expected_shard_id={expected} found_shard_id={found}"
    )]
    ShardIdMismatch {
        /// The shard's id.
        expected: u64,
        /// The ChangeSet's shard id.
        found: u64,
    },
    /// The ChangeSet was made for another version (epoch) of the shard, typically before or
    /// after a split.
    #[error(
        "changeset shard version does not match shard_id={shard_id} expected_ver={expected} found_ver={found}"
    )]
    ShardVerMismatch {
        /// The shard's id.
        shard_id: u64,
        /// The shard's version.
        expected: u64,
        /// The ChangeSet's shard version.
        found: u64,
    },
    /// The ChangeSet's content is inconsistent in itself or with the shard.
    #[error("malformed changeset: {reason} shard_id={shard_id} sequence={sequence}")]
    Malformed {
        /// The shard's id.
        shard_id: u64,
        /// The ChangeSet's sequence (for a snapshot being loaded, its meta_seq).
        sequence: u64,
        /// What is wrong.
        reason: MalformedReason,
    },
}

/// Why a ChangeSet or snapshot is malformed.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum MalformedReason {
    /// No change kind is set.
    #[error("no change kind is set")]
    MissingChange,
    /// A shard's removal was given to a file list: only a manifest applies it (it removes
    /// the shard, not a file).
    #[error("a shard's destruction does not apply to its file list")]
    DestroyNotAFileChange,
    /// A change kind that cannot build a shard was given where a snapshot was expected.
    #[error("change is not a snapshot")]
    NotASnapshot,
    /// A column family number is unknown.
    #[error("unknown column family cf={cf}")]
    UnknownColumnFamily {
        /// The number found.
        cf: u32,
    },
    /// A level is outside the range its role allows.
    #[error("level out of range level={level} min={min} max={max}")]
    LevelOutOfRange {
        /// The level found.
        level: u32,
        /// Smallest allowed level.
        min: u32,
        /// Biggest allowed level.
        max: u32,
    },
    /// A file's smallest key is bigger than its biggest key.
    #[error("file smallest key is above its biggest key id={id}")]
    InvertedKeyRange {
        /// The file id.
        id: u64,
    },
    /// A file id is created while a file with that id is already referenced.
    #[error("file id already referenced id={id}")]
    DuplicateFile {
        /// The file id.
        id: u64,
    },
    /// Two files of one level overlap, so a reader could not binary-search the level.
    #[error("files overlap within a level cf={cf} level={level} id={id} other_id={other}")]
    LevelOverlap {
        /// The column family of the level.
        cf: ColumnFamily,
        /// The level.
        level: u32,
        /// One of the overlapping files.
        id: u64,
        /// The other one.
        other: u64,
    },
    /// A shard range whose end is not above its start.
    #[error("shard range end is not above its start")]
    InvalidShardRange,
    /// A snapshot applied to a shard describes another key range.
    #[error("snapshot range differs from the shard range")]
    ShardRangeChanged,
    /// A snapshot applied to a shard has another base_version; only a split changes it.
    #[error("snapshot base_version differs from the shard's expected={expected} found={found}")]
    BaseVersionChanged {
        /// The shard's base_version.
        expected: u64,
        /// The snapshot's base_version.
        found: u64,
    },
    /// A compaction output is not at the compaction's target level or column family.
    #[error(
        "compaction output misplaced id={id} cf={cf} level={level} expected_cf={expected_cf} expected_level={expected_level}"
    )]
    CompactionOutputMisplaced {
        /// The output file id.
        id: u64,
        /// Its column family number.
        cf: u32,
        /// Its level.
        level: u32,
        /// The compaction's column family number (ignored for level 0 compactions).
        expected_cf: u32,
        /// The compaction's target level.
        expected_level: u32,
    },
    /// A split with fewer than two children.
    #[error("split needs at least two children count={count}")]
    SplitTooFewShards {
        /// Number of children given.
        count: usize,
    },
    /// Split children do not tile the parent's range in key order.
    #[error("split children do not tile the parent range child_index={index}")]
    SplitRangesDoNotTile {
        /// Index of the first child that breaks the tiling.
        index: usize,
    },
    /// The shard version cannot grow by one for the children of a split.
    #[error("split would overflow the shard version ver={ver}")]
    ShardVerOverflow {
        /// The parent's version.
        ver: u64,
    },
    /// Two split children have the same id.
    #[error("split children share an id id={id}")]
    SplitDuplicateShardId {
        /// The repeated id.
        id: u64,
    },
    /// A split child's data_sequence is below the parent's: writes the parent's files hold
    /// would be replayed into the child again.
    #[error(
        "split child data_sequence below the parent's id={id} data_sequence={data_sequence} parent_data_sequence={parent}"
    )]
    SplitDataSequenceBehind {
        /// The child's id.
        id: u64,
        /// The child's data_sequence.
        data_sequence: u64,
        /// The parent's data_sequence.
        parent: u64,
    },
    /// A child's base_version is not above the parent's SnapVersion; the parent's SnapVersion is
    /// at least its base_version + the child's data_sequence (the parent's write sequence at
    /// the split), so that sum is the bound checked.
    #[error(
        "split child base_version not above the parent's snap version id={id} base_version={base_version} min_exclusive={min_exclusive}"
    )]
    SplitBaseVersionTooLow {
        /// The child's id.
        id: u64,
        /// The child's base_version.
        base_version: u64,
        /// The lower bound it must exceed.
        min_exclusive: u64,
    },
}

/// Memtable data could not be encoded or decoded.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum MemtableDataError {
    /// The input ends before the data it announces.
    #[error("memtable data truncated needed={needed} available={available}")]
    Truncated {
        /// Bytes needed, counted from the start of the input.
        needed: u64,
        /// Bytes available.
        available: u64,
    },
    /// The input does not start with the memtable-data magic.
    #[error("memtable data has bad magic found={found:#010x}")]
    BadMagic {
        /// The first four bytes, little-endian.
        found: u32,
    },
    /// The format version is not one this build reads.
    #[error("unsupported memtable data format version found={found} supported={supported}")]
    UnsupportedVersion {
        /// The version byte found.
        found: u8,
        /// The version this build reads.
        supported: u8,
    },
    /// The stored checksum (CRC32 in v1, xxh3-64 in v2) does not match the bytes it covers.
    #[error(
        "memtable data checksum mismatch format=v{format} expected={expected:#x} found={found:#x}"
    )]
    ChecksumMismatch {
        /// The blob's format version.
        format: u8,
        /// The checksum stored in the input.
        expected: u64,
        /// The checksum computed over the input.
        found: u64,
    },
    /// Bytes follow the data the header announces.
    #[error("memtable data has trailing bytes count={count}")]
    TrailingBytes {
        /// How many.
        count: u64,
    },
    /// A varint is longer than its value needs or overflows 64 bits.
    #[error("memtable data has a malformed varint offset={offset}")]
    BadVarint {
        /// Offset of the varint's first byte.
        offset: u64,
    },
    /// The row count is more than the body could hold.
    #[error("memtable data row count exceeds what the body holds count={count} max={max}")]
    RowCountTooLarge {
        /// The count found.
        count: u64,
        /// The most rows the remaining body bytes could encode.
        max: u64,
    },
    /// A row names an unknown column family.
    #[error("memtable data row has unknown column family cf={cf} row={row}")]
    UnknownColumnFamily {
        /// The byte found.
        cf: u8,
        /// Row index.
        row: u64,
    },
    /// A row's flags byte has bits this version does not define.
    #[error("memtable data row has unknown flags flags={flags:#04x} row={row}")]
    UnknownFlags {
        /// The byte found.
        flags: u8,
        /// Row index.
        row: u64,
    },
    /// A v2 row is not in the one form the writer produces.
    #[error("memtable data row {row} is malformed: expected {expected}, found {found}")]
    MalformedRow {
        /// Row index.
        row: u64,
        /// What the writer would have written.
        expected: &'static str,
        /// What the row holds.
        found: String,
    },
    /// Two adjacent rows of one key are not oldest first (strictly increasing versions).
    #[error(
        "memtable data rows of a key are not oldest first row={row} previous_version={previous} version={version}"
    )]
    VersionOrder {
        /// Row index of the second row.
        row: u64,
        /// Version of the row before it.
        previous: u64,
        /// Its version.
        version: u64,
    },
    /// A v4 blob's block index does not describe its blocks (see `memtable_data::blocks`).
    #[error("memtable data block {block} is malformed: expected {expected}, found {found}")]
    BadBlock {
        /// Block index.
        block: u64,
        /// What the writer would have written.
        expected: &'static str,
        /// What the index or the block holds.
        found: String,
    },
    /// A blob of a format without a block index was read as blocks (only v4 has them).
    #[error("memtable data format v{format} has no block index (expected v4)")]
    NotBlocked {
        /// The blob's format version.
        format: u8,
    },
}
