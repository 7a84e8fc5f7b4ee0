//! Errors of the Raft log that are not about bytes on disk: a batch the log refuses to write
//! ([`BatchError`], inside [`crate::Error::RaftLogBatch`]), and a read of entries the log does
//! not hold ([`LogReadError`], which a Raft `Storage` maps to raft-rs's `Compacted` and
//! `Unavailable`). Corruption found when the log opens is a [`crate::Error::Corruption`] or
//! [`crate::Error::RaftLogGap`].

/// Why [`crate::raft_log::RaftLog::write`] refused a batch. Nothing of the batch was written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    /// The entries of one append do not have consecutive indexes.
    #[error(
        "appended entries are not consecutive region_id={region_id} index={index} expected={expected}"
    )]
    NotConsecutive {
        region_id: u64,
        index: u64,
        expected: u64,
    },
    /// An append's first index is not in `(truncated_index, last_index + 1]` of the region as
    /// the batch's earlier operations leave it.
    #[error(
        "append does not fit the log region_id={region_id} first_index={first_index} truncated_index={truncated_index} last_index={last_index}"
    )]
    OutOfRange {
        region_id: u64,
        first_index: u64,
        truncated_index: u64,
        last_index: u64,
    },
    /// The encoded batch exceeds the largest record.
    #[error("batch too large len={len} max={max}")]
    TooLarge { len: u64, max: u64 },
}

/// Why a read of a region's log has no answer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LogReadError {
    /// The log holds no region with this id.
    #[error("raft log has no region region_id={region_id}")]
    UnknownRegion { region_id: u64 },
    /// The index is at or below the truncated index (for `term`: below it).
    #[error(
        "raft log entry compacted region_id={region_id} index={index} truncated_index={truncated_index}"
    )]
    Compacted {
        region_id: u64,
        index: u64,
        truncated_index: u64,
    },
    /// The index is above the last index.
    #[error(
        "raft log entry unavailable region_id={region_id} index={index} last_index={last_index}"
    )]
    Unavailable {
        region_id: u64,
        index: u64,
        last_index: u64,
    },
}
