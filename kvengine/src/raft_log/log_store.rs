//! [`RaftLog`]: the Raft log of every region on a server, on the segment writer the engine WAL
//! uses (format version 2), with every region's log in memory.
//!
//! A write checks the batch against the log, then — under the append lock, so that memory
//! changes in file order — writes its one record (rolling first if the segment is full, the new
//! segment starting with a checkpoint of the log as it is), applies it in memory, and finally
//! waits outside the lock for the fdatasync its sync policy asks for. Readers therefore see a
//! batch from the moment it is written, possibly before it is durable. For Raft that is
//! harmless: raft-rs only counts entries as persisted once the write returns
//! (`on_persist_ready`), and a batch that never becomes durable was never acknowledged. After
//! a failed write or fdatasync every later write fails and the log must be reopened.

use std::fs;
use std::path::PathBuf;

use parking_lot::{RwLock, RwLockUpgradableReadGuard};

use crate::error::{Error, Result};
use crate::raft_log::log_batch::{LogBatch, LogOp, RegionOp};
use crate::raft_log::log_entry::{LogEntry, RegionLogState};
use crate::raft_log::log_error::LogReadError;
use crate::raft_log::record_codec::{encode_batch_record, encode_checkpoint_record};
use crate::raft_log::region_log::RegionLogs;
use crate::raft_log::replay::replay;
use crate::wal::segment_codec::RAFT_LOG_FORMAT_VERSION;
use crate::wal::segment_writer::{SegmentWriter, SegmentWriterOptions};
use crate::wal::{DEFAULT_SEGMENT_SIZE, SyncPolicy, WalStats};

/// Settings of a [`RaftLog`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RaftLogOptions {
    /// Directory holding the segment files; created if missing. Not the engine WAL's
    /// directory: each log refuses the other's segments.
    pub dir: PathBuf,
    /// Roll threshold in bytes, as for the engine WAL
    /// ([`crate::wal::WalOptions::segment_size`]). Segments are the unit of deletion, and each
    /// new one starts with a checkpoint of every region's state (about 75 bytes per region
    /// plus 8 per peer), so very small segments cost checkpoint space. Default 64 MiB.
    pub segment_size: u64,
    /// When a write is durable; see [`SyncPolicy`]. Default `every-batch`.
    pub sync: SyncPolicy,
}

impl RaftLogOptions {
    /// Options with the defaults for everything but the directory.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            segment_size: DEFAULT_SEGMENT_SIZE,
            sync: SyncPolicy::default(),
        }
    }
}

/// The Raft log of every region on a server. `Send + Sync`; share it as `Arc<RaftLog>`.
pub struct RaftLog {
    writer: SegmentWriter,
    /// Lock order: the writer's append lock before this one.
    logs: RwLock<RegionLogs>,
}

impl RaftLog {
    /// Opens the log in `opts.dir` (creating the directory if needed): replays every segment,
    /// truncates a torn tail of the newest, and starts a new segment with a checkpoint. A
    /// damaged record followed by valid ones, damage in any segment but the newest, an append
    /// that leaves a gap ([`Error::RaftLogGap`]) or entries missing at the end of replay are
    /// errors of kind corruption naming the segment and offset.
    pub fn open(opts: RaftLogOptions) -> Result<RaftLog> {
        fs::create_dir_all(&opts.dir).map_err(Error::io("create dir", &opts.dir))?;
        let (replayed, logs) = replay(&opts.dir)?;
        let mut checkpoint = Vec::new();
        encode_checkpoint_record(&logs.checkpoint(), &mut checkpoint)?;
        let writer = SegmentWriter::open(
            SegmentWriterOptions {
                dir: opts.dir,
                segment_size: opts.segment_size,
                policy: opts.sync,
                version: RAFT_LOG_FORMAT_VERSION,
            },
            replayed,
            &checkpoint,
        )?;
        Ok(RaftLog {
            writer,
            logs: RwLock::new(logs),
        })
    }

    /// One durable write for records of many regions: one write(2) and, per the sync policy,
    /// one fdatasync. When it returns Ok, reads below see the batch. A batch that does not fit
    /// the log ([`crate::raft_log::BatchError`]) is refused whole, and nothing is written.
    pub fn write(&self, batch: &LogBatch) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        batch.check_shape()?;
        let mut record = Vec::new();
        encode_batch_record(batch, &mut record)?;
        let written = {
            let mut guard = self.writer.lock()?;
            let logs = self.logs.upgradable_read();
            logs.check_batch(batch)?;
            let written = guard.write(&record, || {
                let mut checkpoint = Vec::new();
                encode_checkpoint_record(&logs.checkpoint(), &mut checkpoint)?;
                Ok(checkpoint)
            })?;
            for RegionOp { region_id, op } in batch.ops() {
                if let LogOp::Append(entries) = op
                    && let Some(last) = entries.last()
                {
                    guard.note(*region_id, last.index);
                }
            }
            let mut logs = RwLockUpgradableReadGuard::upgrade(logs);
            if let Err(fault) = logs.apply_batch(batch) {
                // check_batch ran the same rule on the same log under the same lock.
                return Err(Error::Closed {
                    reason: format!("raft log batch failed after passing its check: {fault}"),
                });
            }
            written
        };
        self.writer.wait_durable(written)
    }

    /// The regions the log holds, by id.
    pub fn regions(&self) -> Vec<u64> {
        self.logs.read().regions()
    }

    pub fn state(&self, region_id: u64) -> Option<RegionLogState> {
        self.logs.read().state(region_id)
    }

    /// `truncated_index + 1` of [`RaftLog::state`], without copying the state (raft-rs asks
    /// for it whenever it checks a group for work, every round).
    pub fn first_index(&self, region_id: u64) -> Option<u64> {
        self.logs
            .read()
            .bounds(region_id)
            .map(|b| b.truncated_index + 1)
    }

    /// `last_index` of [`RaftLog::state`], without copying the state.
    pub fn last_index(&self, region_id: u64) -> Option<u64> {
        self.logs.read().bounds(region_id).map(|b| b.last_index)
    }

    /// Entries [low, high), at most `max_size` bytes ([`LogEntry::size`]) but always at least
    /// one. `low <= truncated_index` is `Compacted`, `high > last_index + 1` `Unavailable`.
    pub fn entries(
        &self,
        region_id: u64,
        low: u64,
        high: u64,
        max_size: Option<u64>,
    ) -> std::result::Result<Vec<LogEntry>, LogReadError> {
        self.logs.read().entries(region_id, low, high, max_size)
    }

    /// Term of `index`; `index == truncated_index` answers `truncated_term`.
    pub fn term(&self, region_id: u64, index: u64) -> std::result::Result<u64, LogReadError> {
        self.logs.read().term(region_id, index)
    }

    /// Deletes sealed segments none of whose records is still needed: a segment goes when
    /// each of its entries is at or below its region's truncated index (or its region is
    /// gone). Its hard, conf and truncated states are always superseded: the next segment
    /// starts with a checkpoint of them. What the decision relies on (truncations, removals)
    /// is made durable first. Returns how many segments were deleted.
    pub fn purge(&self) -> Result<usize> {
        let truncated = self.logs.read().truncated_indexes();
        self.writer.purge(|sealed| {
            let doomed: Vec<u64> = sealed
                .iter()
                .filter(|segment| {
                    segment.shard_max.iter().all(|(region_id, max_index)| {
                        truncated
                            .get(region_id)
                            .is_none_or(|truncated| max_index <= truncated)
                    })
                })
                .map(|segment| segment.seq)
                .collect();
            if !doomed.is_empty() {
                self.writer.sync_active()?;
            }
            Ok(doomed)
        })
    }

    /// Segment files that exist now, the active one included.
    pub fn segment_count(&self) -> usize {
        self.writer.segment_count()
    }

    /// Counters since open (records are batches; checkpoints are not counted), and the
    /// current segment count.
    pub fn stats(&self) -> WalStats {
        self.writer.stats()
    }
}
