//! Stratus ChangeSets: the metadata log of a shard's files.
//!
//! A shard (region) keeps its SST files in object storage and records every change to its file
//! list as a [`ChangeSet`]: a flush adds an L0 file, a compaction replaces files, a split hands
//! the files to child shards, an ingest adds prepared files. A full [`Snapshot`] describes the
//! file list at one point and is what a manifest rewrite stores and what a worker receives to
//! rebuild a read-only view of a shard.
//!
//! This crate holds only pure metadata logic, in the order data flows through it:
//!
//! * [`messages`]: the protobuf messages (prost derive, no protoc) and their encode/decode helpers.
//! * [`shard_files`]: a shard's file list and the pure, idempotent [`ShardFiles::apply`].
//! * [`memtable_data`]: the versioned, CRC-checked codec that ships memtable rows to a worker.
//! * [`ship_buffers`]: the bounded pool of buffers that codec writes into.
//! * [`error`]: the error types of all of the above.
//! * [`fuzzing`]: entry points shared by the cargo-fuzz targets and the corpus replay test.
//!
//! Nothing here performs I/O, so every rule can be tested without an object store.

pub mod compaction_job;
pub mod error;
pub mod fuzzing;
pub mod memtable_data;
pub mod messages;
pub mod shard_files;
pub mod ship_buffers;

pub use compaction_job::{
    CfInputs, CompactionJob, CompactionResult, InputFile, JobError, OutputOptions,
};
pub use error::{ApplyError, ChangeSetDecodeError, MalformedReason, MemtableDataError};
pub use memtable_data::{
    Format as MemtableDataFormat, MemRow, MemRowRef, MemtableDataWriter, RowIter,
};
pub use messages::{
    Change, ChangeSet, Compaction, Destroy, Flush, Ingest, L0Create, ShardSplitInfo, Snapshot,
    Split, TableCreate, decode_changeset, encode_changeset,
};
pub use shard_files::{Applied, FileMeta, MAX_LEVEL, ShardFiles};
pub use types::ColumnFamily;
