//! The write-ahead log.
//!
//! A write batch for a shard gets the shard's next sequence, is appended here as a record
//! `(shard_id, sequence, payload)`, then applied to the memtable, and only then acknowledged.
//! Records go to numbered segment files in one directory; a segment is sealed (fsync'd) when it
//! grows past the roll threshold or when a flush asks for a roll, and is deleted by
//! [`Wal::purge`] once every record in it is covered by its shard's `data_sequence`.
//!
//! Modules, in the order data flows:
//!
//! * `options`: [`WalOptions`] and [`SyncPolicy`] (every batch, group commit, off).
//! * [`frame`]: the length + CRC frame, shared with the manifest, and the rule that tells a
//!   torn tail (truncated on open) from corruption (an error, never skipped).
//! * [`segment_codec`]: the segment file layout (format version 1) and its pure decoder.
//! * `segment_files`: segment names, listing, durable creation.
//! * `writer`: [`Wal`]: append, roll, purge, stats. `group_commit`: the shared fdatasync.
//! * `replay`: reading every segment when the WAL opens.
//! * [`fuzz_check`]: the fuzz target's entry point.

pub mod frame;
mod fuzzing;
mod group_commit;
mod options;
pub(crate) mod replay;
pub mod segment_codec;
pub(crate) mod segment_files;
pub(crate) mod segment_writer;
mod writer;

pub use fuzzing::fuzz_check;
pub use options::{DEFAULT_SEGMENT_SIZE, SyncPolicy, WalOptions};
pub use segment_codec::{DecodedSegment, SegmentRecord, decode_segment};
pub use writer::{Wal, WalRecord, WalStats};
