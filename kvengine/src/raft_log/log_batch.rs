//! [`LogBatch`]: the records of many regions that one [`crate::raft_log::RaftLog::write`]
//! makes durable together (one `write(2)`, one fdatasync), in the order they were added.

use crate::raft_log::log_entry::{ConfState, HardState, LogEntry};
use crate::raft_log::log_error::BatchError;

/// One change to a region's log. Applied in batch order, by the same rules live and at replay
/// (`region_log.rs`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogOp {
    /// Entries with consecutive indexes, at least one. Entries at or after the first index that
    /// the log already holds are replaced (Raft's conflict overwrite).
    Append(Vec<LogEntry>),
    /// The region's newest hard state.
    HardState(HardState),
    /// The region's newest membership.
    ConfState(ConfState),
    /// Entries up to `index` are dropped and `(index, term)` becomes the truncated point;
    /// an `index` at or below the current truncated index changes nothing.
    Truncate { index: u64, term: u64 },
    /// The region is gone from this server: everything of it is dropped.
    RemoveRegion,
}

/// A [`LogOp`] and the region it changes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegionOp {
    pub region_id: u64,
    pub op: LogOp,
}

/// Records of many regions written together. Build one per Raft ready round.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogBatch {
    ops: Vec<RegionOp>,
}

impl LogBatch {
    /// Appends entries (consecutive indexes). The first index i must be in
    /// (truncated_index, last_index + 1]; entries at >= i already in the log are replaced
    /// (Raft's conflict overwrite). An empty `entries` adds nothing.
    pub fn append(&mut self, region_id: u64, entries: Vec<LogEntry>) {
        if !entries.is_empty() {
            self.push(region_id, LogOp::Append(entries));
        }
    }

    pub fn set_hard_state(&mut self, region_id: u64, hs: HardState) {
        self.push(region_id, LogOp::HardState(hs));
    }

    pub fn set_conf_state(&mut self, region_id: u64, cs: ConfState) {
        self.push(region_id, LogOp::ConfState(cs));
    }

    /// Drops entries <= index and records (index, term) as the truncated point. index may be
    /// above last_index (a snapshot was installed: the log becomes empty at (index, term)).
    /// An index at or below the current truncated index is ignored. The entries above index
    /// are kept as they are: to replace a log that disagrees with an installed snapshot,
    /// remove the region first in the same batch, then write its new state.
    pub fn truncate(&mut self, region_id: u64, index: u64, term: u64) {
        self.push(region_id, LogOp::Truncate { index, term });
    }

    /// The region is gone from this server (tombstone): its records are dropped.
    pub fn remove_region(&mut self, region_id: u64) {
        self.push(region_id, LogOp::RemoveRegion);
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// The operations, in the order they were added (and are applied).
    pub fn ops(&self) -> &[RegionOp] {
        &self.ops
    }

    pub(crate) fn push(&mut self, region_id: u64, op: LogOp) {
        self.ops.push(RegionOp { region_id, op });
    }

    /// Checks what does not depend on the log: every append's indexes are consecutive.
    pub(crate) fn check_shape(&self) -> Result<(), BatchError> {
        for RegionOp { region_id, op } in &self.ops {
            let LogOp::Append(entries) = op else { continue };
            for pair in entries.windows(2) {
                let expected = pair[0].index.checked_add(1);
                if expected != Some(pair[1].index) {
                    return Err(BatchError::NotConsecutive {
                        region_id: *region_id,
                        index: pair[1].index,
                        expected: expected.unwrap_or(u64::MAX),
                    });
                }
            }
        }
        Ok(())
    }
}
