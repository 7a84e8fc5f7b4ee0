//! The engine WAL: appending `(shard_id, sequence, payload)` records (format version 1)
//! through the shared [`SegmentWriter`], replaying them on open, and purging segments whose
//! records every shard's flush covers.

use std::fs;

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::wal::options::{Durability, SyncPolicy, WalOptions};
use crate::wal::replay::{SegmentFormat, replay_segments};
use crate::wal::segment_codec::{
    MAX_PAYLOAD_LEN, RECORD_LIMITS, WAL_FORMAT_VERSION, encode_record, encoded_record_len,
    record_of_frame,
};
use crate::wal::segment_files::note_record;
use crate::wal::segment_writer::{SegmentWriter, SegmentWriterOptions};

/// One replayed record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WalRecord {
    /// The shard the write batch belongs to.
    pub shard_id: u64,
    /// The batch's sequence within its shard.
    pub sequence: u64,
    /// The encoded write batch, opaque to the WAL.
    pub payload: Bytes,
}

/// Counters of a WAL (or Raft log) since it was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WalStats {
    /// Bytes of records appended (frame headers included, segment headers not).
    pub bytes_written: u64,
    /// fdatasync calls made to make appended records durable: per append, per group-commit
    /// round, and per segment sealed by a roll.
    pub fsyncs: u64,
    /// Records appended.
    pub records: u64,
    /// Segment files that exist now, the active one included (a gauge, not a counter).
    pub segments: u64,
}

/// The segments of the engine WAL.
const FORMAT: SegmentFormat = SegmentFormat {
    version: WAL_FORMAT_VERSION,
    limits: RECORD_LIMITS,
    what: "wal segment",
};

/// The write-ahead log of every shard of an engine. `Send + Sync`; share it as `Arc<Wal>`.
pub struct Wal {
    writer: SegmentWriter,
}

impl Wal {
    /// Opens the WAL in `opts.dir` (creating the directory if needed), replays every segment
    /// oldest first calling `f` for each record in order, truncates a torn tail of the newest
    /// segment, and starts a new segment for appends. A damaged record followed by valid ones,
    /// or damage in any segment but the newest, is [`Error::Corruption`] naming the segment
    /// and offset. An error returned by `f` stops the open and is returned.
    pub fn open(opts: WalOptions, mut f: impl FnMut(WalRecord) -> Result<()>) -> Result<Wal> {
        fs::create_dir_all(&opts.dir).map_err(Error::io("create dir", &opts.dir))?;
        let replayed = replay_segments(&opts.dir, FORMAT, &mut |segment| {
            let mut shard_max = std::collections::BTreeMap::new();
            for frame in segment.frames {
                let record = record_of_frame(*frame);
                note_record(&mut shard_max, record.shard_id, record.sequence);
                f(WalRecord {
                    shard_id: record.shard_id,
                    sequence: record.sequence,
                    payload: segment.data.slice_ref(record.payload),
                })?;
            }
            Ok(shard_max)
        })?;
        let writer = SegmentWriter::open(
            SegmentWriterOptions {
                dir: opts.dir,
                segment_size: opts.segment_size,
                policy: opts.sync,
                version: WAL_FORMAT_VERSION,
            },
            replayed,
            &[],
        )?;
        Ok(Wal { writer })
    }

    /// Appends a record and returns once it is durable per the sync policy.
    pub fn append(&self, shard_id: u64, sequence: u64, payload: &[u8]) -> Result<()> {
        self.append_with(shard_id, sequence, payload, Durability::Policy)
    }

    /// Appends a record and returns once it is as durable as `durability` asks.
    pub fn append_with(
        &self,
        shard_id: u64,
        sequence: u64,
        payload: &[u8],
        durability: Durability,
    ) -> Result<()> {
        if payload.len() > MAX_PAYLOAD_LEN {
            return Err(Error::InvalidArgument {
                what: format!(
                    "wal record payload too large len={} max={MAX_PAYLOAD_LEN}",
                    payload.len()
                ),
            });
        }
        let mut record = Vec::with_capacity(encoded_record_len(payload.len()));
        encode_record(shard_id, sequence, payload, &mut record);
        let written = {
            let mut guard = self.writer.lock()?;
            let written = guard.write(&record, || Ok(Vec::new()))?;
            guard.note(shard_id, sequence);
            written
        };
        self.writer
            .wait_durable_as(written, durability.policy(self.writer.sync_policy()))
    }

    /// Seals the active segment and starts a new one, so that the records appended so far
    /// become purgeable once covered. Does nothing when the active segment holds no record.
    pub fn roll(&self) -> Result<()> {
        self.writer.roll(|| Ok(Vec::new()))
    }

    /// Deletes every sealed segment (never the active one) all of whose records have
    /// `sequence <= covered(shard_id)`, then fsyncs the directory. `covered` is called without
    /// any WAL lock held, once per shard per segment; for a shard that no longer exists (a
    /// split parent) it should return `u64::MAX`. Returns how many segments were deleted.
    pub fn purge(&self, covered: &dyn Fn(u64) -> u64) -> Result<usize> {
        self.writer.purge(|sealed| {
            Ok(sealed
                .iter()
                .filter(|segment| segment.is_covered(covered))
                .map(|segment| segment.seq)
                .collect())
        })
    }

    /// Counters since open, and the current segment count.
    pub fn stats(&self) -> WalStats {
        self.writer.stats()
    }

    /// Segment files that exist now, the active one included.
    pub fn segment_count(&self) -> usize {
        self.writer.segment_count()
    }

    /// The policy appends follow.
    pub fn sync_policy(&self) -> SyncPolicy {
        self.writer.sync_policy()
    }
}
