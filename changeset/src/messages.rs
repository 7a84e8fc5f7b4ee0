//! The ChangeSet and the snapshot description as protobuf messages.
//!
//! The messages are written as prost-derived Rust structs instead of a `.proto` file so that the
//! build needs no `protoc`. They are protobuf on the wire so that old and new servers and workers
//! interoperate during a rolling upgrade: a field is never renumbered or reused, a new field gets
//! a new tag, and a reader ignores tags it does not know. The golden file
//! `tests/data/changeset_v1.bin` pins the encoding.
//!
//! Key fields hold [`Bytes`]: decoding from a `Bytes` buffer slices it instead of copying.

use std::collections::{BTreeMap, BTreeSet};

use bytes::{Buf, Bytes};
use prost::Message;

use crate::error::ChangeSetDecodeError;

/// One change to a shard's file list, or a full description of it.
///
/// ChangeSets are applied in `sequence` order by [`crate::ShardFiles::apply`]; the sequence of
/// the last applied one is the shard's `meta_seq`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ChangeSet {
    /// The shard (region) the change belongs to.
    #[prost(uint64, tag = "1")]
    pub shard_id: u64,
    /// The shard's version (epoch) when the change was made. It grows by one at each split, so a
    /// change prepared before a split is rejected by the children.
    #[prost(uint64, tag = "2")]
    pub shard_ver: u64,
    /// Position in the shard's ChangeSet log. A change whose sequence is not above the shard's
    /// `meta_seq` was already applied and is skipped; this is what makes replay idempotent.
    #[prost(uint64, tag = "3")]
    pub sequence: u64,
    /// Shard properties set by this change; each key overwrites the shard's previous value.
    /// Kept as a sorted map so the encoding is deterministic.
    #[prost(btree_map = "string, bytes", tag = "4")]
    pub properties: BTreeMap<String, Vec<u8>>,
    /// What changed. A ChangeSet without it is malformed.
    #[prost(oneof = "Change", tags = "10, 11, 12, 13, 14, 15, 16")]
    pub change: Option<Change>,
}

/// The kinds of change. Exactly one is set in a valid [`ChangeSet`].
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Change {
    /// The whole file list at `sequence` (a manifest rewrite, or the description shipped to a
    /// worker). Applying it replaces the file list.
    #[prost(message, tag = "10")]
    Snapshot(Snapshot),
    /// A frozen memtable became an L0 file.
    #[prost(message, tag = "11")]
    Flush(Flush),
    /// Files of one level were merged into the next level.
    #[prost(message, tag = "12")]
    Compaction(Compaction),
    /// The shard split into children that share its files.
    #[prost(message, tag = "13")]
    Split(Split),
    /// The first flush of a split child: its own files replace the list it inherited from the
    /// parent, so it stops depending on the parent's files.
    #[prost(message, tag = "14")]
    InitialFlush(Snapshot),
    /// Prepared files (bulk load, restore) were added.
    #[prost(message, tag = "15")]
    Ingest(Ingest),
    /// The shard left this server (its replica was removed from the region's Raft group).
    /// Only a manifest records it; its files stay in the object store for the other replicas.
    #[prost(message, tag = "16")]
    Destroy(Destroy),
}

/// The body of [`Change::Destroy`]: nothing beyond the ChangeSet's shard id and sequence.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Destroy {}

/// The description of a shard's files: what a reader needs to open every SST of the shard.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Snapshot {
    /// First key of the shard's range, inclusive.
    #[prost(bytes = "bytes", tag = "1")]
    pub start: Bytes,
    /// End of the shard's range, exclusive; empty means unbounded.
    #[prost(bytes = "bytes", tag = "2")]
    pub end: Bytes,
    /// Offset added to the shard's write sequence to form its SnapVersion, so the SnapVersion of
    /// a split child never repeats one of its parent.
    #[prost(uint64, tag = "3")]
    pub base_version: u64,
    /// Highest write sequence persisted in the SSTs; WAL replay starts after it.
    #[prost(uint64, tag = "4")]
    pub data_sequence: u64,
    /// L0 files, newest first (a read consults them in this order).
    #[prost(message, repeated, tag = "5")]
    pub l0_creates: Vec<L0Create>,
    /// Files of level 1 and below, each naming its column family and level.
    #[prost(message, repeated, tag = "6")]
    pub table_creates: Vec<TableCreate>,
}

impl Snapshot {
    /// Every file id the snapshot references, for garbage collection.
    pub fn file_ids(&self) -> BTreeSet<u64> {
        let l0s = self.l0_creates.iter().map(|f| f.id);
        l0s.chain(self.table_creates.iter().map(|t| t.id)).collect()
    }
}

/// An L0 file: one section per column family, covering every column family.
#[derive(Clone, PartialEq, prost::Message)]
pub struct L0Create {
    /// Globally unique file id; the object name is derived from it.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Smallest user key in any section, inclusive.
    #[prost(bytes = "bytes", tag = "2")]
    pub smallest: Bytes,
    /// Biggest user key in any section, inclusive.
    #[prost(bytes = "bytes", tag = "3")]
    pub biggest: Bytes,
    /// File size in bytes.
    #[prost(uint64, tag = "4")]
    pub size: u64,
}

/// A file of level 1 or below, holding one column family.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TableCreate {
    /// Globally unique file id; the object name is derived from it.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Level, from 1 to [`crate::MAX_LEVEL`].
    #[prost(uint32, tag = "2")]
    pub level: u32,
    /// Column family wire number (see [`crate::ColumnFamily`]).
    #[prost(uint32, tag = "3")]
    pub cf: u32,
    /// Smallest user key, inclusive.
    #[prost(bytes = "bytes", tag = "4")]
    pub smallest: Bytes,
    /// Biggest user key, inclusive.
    #[prost(bytes = "bytes", tag = "5")]
    pub biggest: Bytes,
    /// File size in bytes.
    #[prost(uint64, tag = "6")]
    pub size: u64,
}

/// A memtable was flushed.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Flush {
    /// The new L0 file; absent when the memtable held no rows but `data_sequence` still advances.
    #[prost(message, optional, tag = "1")]
    pub l0_create: Option<L0Create>,
    /// Highest write sequence contained in the flushed memtable.
    #[prost(uint64, tag = "2")]
    pub data_sequence: u64,
    /// The memtable's SnapVersion (base_version + its last write sequence). Informational: the
    /// file list does not depend on it, but logs and the coprocessor cache do.
    #[prost(uint64, tag = "3")]
    pub version: u64,
}

/// Files of one level merged into the next.
///
/// For `level` 0 the inputs are L0 files (`top_deletes`, covering every column family) and the
/// level-1 files they overlap in any column family (`bottom_deletes`); outputs are level-1 files
/// of any column family and `cf` is ignored. For `level` n > 0 the inputs are files of column
/// family `cf` at level n (`top_deletes`) and n + 1 (`bottom_deletes`); outputs are files of `cf`
/// at level n + 1. A file moved down unchanged is deleted from one level and created in the
/// next with the same id.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Compaction {
    /// Column family of a level n > 0 compaction; ignored for level 0.
    #[prost(uint32, tag = "1")]
    pub cf: u32,
    /// The upper level of the compaction; outputs go to `level + 1`.
    #[prost(uint32, tag = "2")]
    pub level: u32,
    /// Input file ids of the upper level.
    #[prost(uint64, repeated, tag = "3")]
    pub top_deletes: Vec<u64>,
    /// Input file ids of the lower level.
    #[prost(uint64, repeated, tag = "4")]
    pub bottom_deletes: Vec<u64>,
    /// Output files, all at `level + 1`.
    #[prost(message, repeated, tag = "5")]
    pub table_creates: Vec<TableCreate>,
    /// Set when the compaction was recorded although its inputs were already gone (a concurrent
    /// change replaced them). A conflicted compaction changes no files; its outputs are garbage.
    #[prost(bool, tag = "6")]
    pub conflicted: bool,
    /// The GC safe point the outputs were written at (versions below it may be gone): a
    /// replica applying this raises its own safe point to it first, so it never serves a read
    /// below it from these files (0: none, as before the field existed).
    #[prost(uint64, tag = "7")]
    pub safe_point: u64,
}

/// The shard split into children.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Split {
    /// The children, in key order; their ranges tile the parent's range.
    #[prost(message, repeated, tag = "1")]
    pub new_shards: Vec<ShardSplitInfo>,
}

/// One child of a split.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ShardSplitInfo {
    /// The child's shard id.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// First key of the child's range, inclusive.
    #[prost(bytes = "bytes", tag = "2")]
    pub start: Bytes,
    /// End of the child's range, exclusive; empty means unbounded.
    #[prost(bytes = "bytes", tag = "3")]
    pub end: Bytes,
    /// The child's base_version, above the parent's SnapVersion so that the child's SnapVersions
    /// never repeat one the parent already handed out.
    #[prost(uint64, tag = "4")]
    pub base_version: u64,
    /// The child's data_sequence, and so the write sequence it starts at. 0 (what a ChangeSet
    /// written before this field existed decodes to) means the parent's data_sequence: an
    /// engine with its own WAL flushes every write before it splits, so the two are equal.
    /// A shard whose log lives outside the engine splits with writes applied above its
    /// data_sequence (Freeze and Flush entries sit between); there the split stamps its log
    /// index here, and both children continue from it. It is never below the parent's
    /// data_sequence.
    #[prost(uint64, tag = "5")]
    pub data_sequence: u64,
}

/// Prepared files added to the shard.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Ingest {
    /// New L0 files, newest first; they become newer than every existing L0 file.
    #[prost(message, repeated, tag = "1")]
    pub l0_creates: Vec<L0Create>,
    /// New files of level 1 and below; each must fit between the files already in its level.
    #[prost(message, repeated, tag = "2")]
    pub table_creates: Vec<TableCreate>,
}

/// Encodes a ChangeSet as protobuf. The encoding is deterministic: fields in tag order and
/// properties in key order.
pub fn encode_changeset(changeset: &ChangeSet) -> Vec<u8> {
    changeset.encode_to_vec()
}

/// Decodes a ChangeSet from protobuf bytes.
///
/// Pass a [`Bytes`] to make key fields slices of it instead of copies. Only the encoding is
/// checked here; [`crate::ShardFiles::apply`] checks that the content makes sense.
pub fn decode_changeset(mut buf: impl Buf) -> Result<ChangeSet, ChangeSetDecodeError> {
    let len = buf.remaining();
    ChangeSet::decode(&mut buf).map_err(|source| ChangeSetDecodeError::Protobuf { len, source })
}
