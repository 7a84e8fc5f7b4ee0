//! The Raft log store: the entries, hard state and membership of every region replicated on
//! this server, in the engine's own WAL segments (format version 2). Raft-agnostic: the types
//! mirror raft-rs's `eraftpb` fields, and the Raft store (in the server) implements raft-rs's
//! `Storage` over [`RaftLog`]: `initial_state` from [`RaftLog::state`], `entries`, `term`,
//! `first_index = truncated_index + 1`, `last_index`. Its ready loop writes the entries and
//! hard states of every region of one round with **one** [`RaftLog::write`]: one `write(2)`
//! and one fdatasync for the whole server, whatever the number of regions.
//!
//! # Why the engine WAL and not `raft-engine`
//!
//! `raft-engine` (TiKV's log store) would put the protobuf 2 parser on the recovery path (its
//! `log_batch.rs` requires `protobuf::Message` entries), bring a second prometheus registry
//! (0.13; ours is 0.14, so its metrics would never reach `/metrics`), a C build (`lz4-sys`)
//! and a dozen more dependencies, keep its format outside our contracts (format versions,
//! golden files, fuzz targets), and add a second fsync stream next to the engine WAL. What a
//! Raft log needs, the WAL already had: segment files of checksummed frames with the
//! torn-tail-versus-corruption rule (`wal/frame.rs`), durable creation and rolling, group
//! commit, sync policies, deletion of sealed segments. This module reuses them through
//! `wal/segment_writer.rs` and `wal/replay.rs` and adds only the record format, the in-memory
//! logs and the purge rule (design: issue 16, section 2).
//!
//! # Format and replay
//!
//! A segment's header says format version 2; the engine WAL keeps writing version 1 and each
//! refuses the other's segments. The records (`record_codec.rs`, layout beside the encoder)
//! are batches — entries, hard state, conf state, truncated, region removed, for any number of
//! regions, one frame per [`RaftLog::write`], so a batch survives a crash whole or not at all —
//! and checkpoints. Replay applies every operation by the rule a live write follows
//! (`region_log.rs`): per region, an append at index `i <= last` replaces the suffix from
//! `i`; an append above `last + 1` (a gap above the truncated index) is
//! [`crate::Error::RaftLogGap`] naming the region, the expected and found index, the file and
//! the offset; the records of a removed region are dropped; a torn tail is truncated as in the
//! engine WAL, and damage anywhere else stops the open.
//!
//! # Purge, and why every segment starts with a checkpoint
//!
//! [`RaftLog::purge`] deletes a sealed segment when each of its entries is at or below its
//! region's truncated index (or its region is gone). Its state records (hard state, conf
//! state, truncated point) never hold a segment back, because **every new segment begins with
//! a checkpoint**: the truncated point, last index, hard state and conf state of every live
//! region, written with the segment header and made durable before the segment takes a record.
//! So the newest state of each region is always in the newest segment or a later record.
//!
//! The alternative, re-appending a region's live state records before purging the only segment
//! holding them, was rejected: the re-appended states would land *after* the entries of the
//! surviving segments, so replay would meet entries of a region whose truncated point it does
//! not know yet, and could no longer tell a gap from a purge. With checkpoints, replay knows
//! every region's bounds from the start of the first surviving segment on, and the gap rule
//! stays strict. The cost is one checkpoint per segment (about 75 bytes per region plus 8 per
//! peer, against 64 MiB segments) and a walk over the regions at each roll.
//!
//! Why replay of what remains still gives the live log: at a checkpoint, replay takes the
//! recorded bounds and states and drops the regions it does not list (they were removed).
//! From then on it sees every record of every region, so bounds stay exact and gaps are real.
//! Entries of a deleted segment were at or below their region's truncated index when it was
//! deleted, and the truncation is durable by then (purge fsyncs the active segment first), so
//! they are below the truncated point that replay reaches at the end. Every entry above it is
//! the last write to its index, kept in a surviving segment, and replayed after any stale
//! entry an older surviving segment holds at that index; stale entries above the checkpoint's
//! last index are dropped when the checkpoint is replayed. Entries that do not reach the
//! checkpoint's last index sit below a deleted segment's entries, hence below the final
//! truncated point, and are dropped to keep the held entries a run ending at `last`. A region
//! still lacking entries when replay ends — a segment deleted by hand — is corruption.
//!
//! A region that never truncates keeps every segment holding one of its entries. The Raft
//! store truncates regions after their flushes (design section 4.3); an idle region must be
//! truncated too, or old segments stay (as an unflushed shard keeps engine WAL segments).
//!
//! Modules, in the order data flows: `log_entry` (entries, hard and conf state), `log_batch`
//! ([`LogBatch`], the operations), `record_codec` (format version 2), `region_log` (the
//! in-memory logs and the one apply rule), `replay`, `log_store` ([`RaftLog`]), `log_error`,
//! `fuzzing`.

mod fuzzing;
mod log_batch;
mod log_entry;
mod log_error;
mod log_store;
pub mod record_codec;
mod region_log;
mod replay;

pub use fuzzing::fuzz_check;
pub use log_batch::{LogBatch, LogOp, RegionOp};
pub use log_entry::{ConfState, EntryKind, HardState, LogEntry, RegionLogState};
pub use log_error::{BatchError, LogReadError};
pub use log_store::{RaftLog, RaftLogOptions};
