//! The manifest: the durable record of every shard's files, and the file-id allocator.
//!
//! Every change to a shard's file list (flush, compaction, split, ingest) is a
//! [`changeset::ChangeSet`]. The manifest applies it to its in-memory map of
//! [`changeset::ShardFiles`] and appends it to `MANIFEST` (length + CRC framed, fdatasync'd);
//! now and then the file is rewritten as one snapshot per shard. Opening the engine replays it.
//!
//! Modules, in the order data flows:
//!
//! * `shard_map`: the live shards and the pure rules for changing them (unknown shard, split).
//! * [`file_format`]: the MANIFEST layout (format version 1) and its pure replay.
//! * `manifest_file`: [`Manifest`]: open and replay, record, create shard, rewrite.
//! * `file_ids`: [`IdAllocator`], persistent and crash-safe file ids.
//! * [`fuzz_check`]: the fuzz target's entry point.

pub mod file_format;
mod file_ids;
mod fuzzing;
mod manifest_file;
mod shard_map;

pub use file_ids::{COUNTER_BITS, ID_BATCH, IdAllocator, NEXT_FILE_ID_FILE_NAME};
pub use fuzzing::fuzz_check;
pub use manifest_file::{
    DEFAULT_REWRITE_AFTER, MANIFEST_FILE_NAME, Manifest, ManifestOptions, Recorded, Staged,
};
