//! The write-ahead log, and the segment machinery it shares with the Raft log.
//!
//! A write batch for a shard gets the shard's next sequence, is appended here as a record
//! `(shard_id, sequence, payload)`, then applied to the memtable, and only then acknowledged.
//! Records go to numbered segment files in one directory; a segment is sealed (fsync'd) when it
//! grows past the roll threshold or when a flush asks for a roll, and is deleted by
//! [`Wal::purge`] once every record in it is covered by its shard's `data_sequence`.
//!
//! The segments, their frames, their durable creation, rolling, group commit and replay are
//! not specific to those records: [`crate::raft_log`] stores the Raft log of every replicated
//! region in the same segments, with its own record bodies. The segment header's format
//! version tells them apart: **1** is this WAL (unchanged, still written by the engine), **2**
//! the Raft log; each refuses the other's segments.
//!
//! Modules, in the order data flows:
//!
//! * `options`: [`WalOptions`] and [`SyncPolicy`] (every batch, group commit, off).
//! * [`frame`]: the length + CRC frame, shared with the manifest, and the rule that tells a
//!   torn tail (truncated on open) from corruption (an error, never skipped).
//! * [`segment_codec`]: the segment file layout (header with the format version; version 1
//!   record bodies) and its pure decoder.
//! * `segment_files`: segment names, listing, durable creation (header plus an optional
//!   preamble, the Raft log's checkpoint).
//! * `segment_writer`: appending encoded records, rolling, deleting chosen sealed segments,
//!   stats; `group_commit`: the shared fdatasync. Both logs write through it.
//! * `replay`: reading every segment when a log opens, torn tail and corruption handling;
//!   each log interprets the frames.
//! * `writer`: [`Wal`], the version 1 records on top: append, roll, purge by coverage.
//! * [`fuzz_check`]: the fuzz target's entry point.

pub mod frame;
pub(crate) mod fuzzing;
mod group_commit;
mod options;
pub(crate) mod replay;
pub mod segment_codec;
pub(crate) mod segment_files;
pub(crate) mod segment_writer;
mod writer;

pub use fuzzing::fuzz_check;
pub use options::{DEFAULT_SEGMENT_SIZE, Durability, SyncPolicy, WalOptions};
pub use segment_codec::{DecodedSegment, SegmentRecord, decode_segment};
pub use writer::{Wal, WalRecord, WalStats};
