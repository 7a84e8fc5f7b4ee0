//! What the Raft store answers when a command cannot be carried out.

/// Why a proposal or a region lookup failed. The first three are what a client retries on (a
/// routing error with a hint, or a command that a leader change dropped).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RaftStoreError {
    #[error(
        "region {region_id} is not led by this server (store {store_id}); leader={}",
        leader.map_or_else(|| "unknown".to_string(), |l| l.to_string())
    )]
    NotLeader {
        region_id: u64,
        store_id: u64,
        /// The leader's store id when this replica knows it.
        leader: Option<u64>,
    },
    #[error("region {region_id} epoch changed: expected ver={expected}, found ver={found}")]
    EpochNotMatch {
        region_id: u64,
        expected: u64,
        found: u64,
    },
    #[error(
        "the command to region {region_id} at index {index} was dropped by a leader change (proposed in term {term}, the entry there has term {found_term})"
    )]
    StaleCommand {
        region_id: u64,
        index: u64,
        term: u64,
        found_term: u64,
    },
    #[error("region {region_id} has no replica on store {store_id}")]
    RegionNotFound { region_id: u64, store_id: u64 },
    #[error(
        "no answer from region {region_id} within {timeout_ms} ms; the command may still apply"
    )]
    Timeout { region_id: u64, timeout_ms: u64 },
    #[error("the command to region {region_id} failed at apply: {detail}")]
    Apply { region_id: u64, detail: String },
    #[error("invalid command to region {region_id}: {detail}")]
    InvalidCommand { region_id: u64, detail: String },
    #[error("the raft store of store {store_id} stopped: {reason}")]
    Stopped { store_id: u64, reason: String },
    /// A replica read's check at the leader found a memory lock (an async-commit or 1PC
    /// prewrite not committed yet) that may commit at or below the read's start_ts: the
    /// reader resolves it, as a lock met in the data.
    #[error(
        "the read of region {region_id} at start_ts {start_ts} is blocked by a lock at the leader: key={:?} lock_version={}",
        String::from_utf8_lossy(&lock.key),
        lock.lock_version
    )]
    ReadLocked {
        region_id: u64,
        start_ts: u64,
        lock: Box<wire::coprocessor::LockInfo>,
    },
    /// The leader answered a replica read's read index without checking its memory locks (a
    /// build that does not know the check, or one not ready to check yet): this replica
    /// cannot serve the read; the leader can.
    #[error(
        "the leader of region {region_id} did not check the replica read's locks; read from the leader (store {})",
        leader.map_or_else(|| "unknown".to_string(), |l| l.to_string())
    )]
    ReadNotChecked { region_id: u64, leader: Option<u64> },
}

/// Why the store could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("raft log failed")]
    Log(#[source] kvengine::Error),
    #[error("engine failed")]
    Engine(#[source] kvengine::Error),
    #[error("raft rejected the configuration of region {region_id}: {detail}")]
    Raft { region_id: u64, detail: String },
    #[error("region {region_id} is in the raft log but not in the engine (or the other way round)")]
    Inconsistent { region_id: u64 },
    #[error(
        "region {region_id}: the engine applied up to index {applied} but the raft log ends at {last_index}; the log lost entries (a crash with wal-sync = \"off\"?) and new writes would be skipped"
    )]
    LogBehindEngine {
        region_id: u64,
        applied: u64,
        last_index: u64,
    },
    #[error("region {region_id} has no leader: {detail}")]
    NoLeader { region_id: u64, detail: String },
    #[error("cannot start the raft thread")]
    Thread(#[source] std::io::Error),
}
