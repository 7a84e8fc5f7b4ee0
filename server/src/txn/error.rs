//! Errors of the transaction layer. A caller matches on [`TxnError::kind`] to decide what to
//! do: resolve a lock and retry, restart the transaction, give up.

use kvengine::mvcc::LockInfo;

use crate::tso::TsoError;

pub type Result<T, E = TxnError> = std::result::Result<T, E>;

/// Shows a key as text when it is printable ASCII, else as bytes.
pub(crate) struct KeyDisplay<'a>(pub &'a [u8]);

impl std::fmt::Display for KeyDisplay<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.iter().all(|b| b.is_ascii_graphic()) {
            write!(f, "{:?}", String::from_utf8_lossy(self.0))
        } else {
            write!(f, "{:?}", self.0)
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TxnError {
    /// Another transaction's lock (in the engine or in memory) is in the way: resolve it
    /// (`TxnClient::resolve_locks_for_read`), then retry.
    #[error("key is locked: key={key} primary={primary} lock_start_ts={start_ts} min_commit_ts={min_commit_ts} ttl_ms={ttl_ms}", key = KeyDisplay(&.0.key), primary = KeyDisplay(&.0.primary), start_ts = .0.start_ts, min_commit_ts = .0.min_commit_ts, ttl_ms = .0.ttl_ms)]
    KeyIsLocked(Box<LockInfo>),
    /// A version committed at or after the prewrite's start_ts exists: the transaction must
    /// restart with a new start_ts.
    #[error("write conflict: expected no version at or above start_ts, found one key={key} start_ts={start_ts} conflict_start_ts={conflict_start_ts} conflict_commit_ts={conflict_commit_ts}", key = KeyDisplay(.key))]
    WriteConflict {
        key: Vec<u8>,
        start_ts: u64,
        conflict_start_ts: u64,
        conflict_commit_ts: u64,
    },
    /// Commit (or resolve) found neither the transaction's lock nor its commit or rollback
    /// record: the prewrite never landed.
    #[error("transaction lock not found: expected a lock or a commit record key={key} start_ts={start_ts}", key = KeyDisplay(.key))]
    TxnLockNotFound { key: Vec<u8>, start_ts: u64 },
    /// The transaction was rolled back on this key (a rollback record or marker exists).
    #[error("transaction already rolled back: key={key} start_ts={start_ts}", key = KeyDisplay(.key))]
    TxnAlreadyRolledBack { key: Vec<u8>, start_ts: u64 },
    /// A rollback (or a prewrite) met the transaction's own commit record.
    #[error("transaction already committed: key={key} start_ts={start_ts} commit_ts={commit_ts}", key = KeyDisplay(.key))]
    TxnAlreadyCommitted {
        key: Vec<u8>,
        start_ts: u64,
        commit_ts: u64,
    },
    /// A commit below the lock's min_commit_ts: readers up to min_commit_ts - 1 may already
    /// have ignored the lock.
    #[error("commit ts expired: expected commit_ts >= min_commit_ts, found commit_ts={commit_ts} min_commit_ts={min_commit_ts} key={key}", key = KeyDisplay(.key))]
    CommitTsExpired {
        key: Vec<u8>,
        commit_ts: u64,
        min_commit_ts: u64,
    },
    /// A commit record would land on a version another record already holds (the engine would
    /// keep only one of them). The rollback rules make this impossible; seeing it is a bug.
    #[error("commit would overwrite a record: expected no WRITE version at or above commit_ts, found version={found_version} (start_ts={found_start_ts}) key={key} commit_ts={commit_ts}", key = KeyDisplay(.key))]
    CommitTsCollision {
        key: Vec<u8>,
        commit_ts: u64,
        found_version: u64,
        found_start_ts: u64,
    },
    /// An async-commit prewrite whose `min_commit_ts` would pass the caller's
    /// `max_commit_ts` (its schema lease): nothing was locked, and the caller commits some
    /// other way (TiKV's `CommitTsTooLarge`).
    #[error(
        "commit ts too large: expected min_commit_ts <= max_commit_ts={max_commit_ts}, found min_commit_ts={min_commit_ts} start_ts={start_ts}"
    )]
    CommitTsTooLarge {
        start_ts: u64,
        min_commit_ts: u64,
        max_commit_ts: u64,
    },
    /// No shard of this server owns the key.
    #[error("key outside every shard: key={key}", key = KeyDisplay(.key))]
    KeyOutsideShards { key: Vec<u8> },
    /// The request itself is malformed.
    #[error("invalid request: {what}")]
    InvalidRequest { what: String },
    /// A lock stayed in the way until the caller's deadline.
    #[error("lock not resolved before the deadline: key={key} lock_start_ts={lock_start_ts} waited_ms={waited_ms}", key = KeyDisplay(.key))]
    LockWaitTimeout {
        key: Vec<u8>,
        lock_start_ts: u64,
        waited_ms: u64,
    },
    /// A stored transaction record (EXTRA-CF rollback marker) did not decode.
    #[error("bad rollback marker: {detail} key={key} version={version}", key = KeyDisplay(.key))]
    BadRollbackMarker {
        key: Vec<u8>,
        version: u64,
        detail: String,
    },
    /// A read or prewrite at a timestamp below the GC safe point: versions it needs may be
    /// gone. The transaction must restart with a new start_ts.
    #[error(
        "timestamp below the GC safe point: expected a read or start ts at or above {safe_point}, found {ts} (the transaction ran longer than the placement driver's gc-life-time; restart it)"
    )]
    BelowGcSafePoint { ts: u64, safe_point: u64 },
    #[error("timestamp oracle failed")]
    Tso(#[from] TsoError),
    #[error("engine failed")]
    Engine(#[source] kvengine::Error),
    /// The region's Raft group did not take the write here: not the leader, a stale epoch, a
    /// leader change that dropped the entry, a timeout (the outcome is unknown), or a stopped
    /// store.
    #[error("replication failed")]
    Raft(#[from] raftstore::RaftStoreError),
}

impl From<kvengine::Error> for TxnError {
    /// An engine lock error is the same condition as the transaction layer's own.
    fn from(e: kvengine::Error) -> TxnError {
        match e {
            kvengine::Error::KeyIsLocked { lock } => TxnError::KeyIsLocked(lock),
            other => TxnError::Engine(other),
        }
    }
}

/// What a caller can do about an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnErrorKind {
    /// Resolve the lock, then retry the same request.
    Locked,
    /// Restart the transaction with a new start_ts.
    Conflict,
    /// The transaction is over (rolled back, committed, or its locks are gone): do not retry.
    TxnFinished,
    /// Refresh the shard map or fix the request.
    Invalid,
    /// Stored bytes did not decode.
    Corruption,
    /// I/O, the engine or the TSO failed; the outcome of a write may be unknown.
    Io,
    /// Retry shortly.
    Busy,
    /// The commit would pass the caller's `max_commit_ts`: nothing was written.
    CommitTsTooLarge,
}

impl TxnError {
    pub fn kind(&self) -> TxnErrorKind {
        match self {
            TxnError::KeyIsLocked(_) => TxnErrorKind::Locked,
            TxnError::WriteConflict { .. } | TxnError::CommitTsExpired { .. } => {
                TxnErrorKind::Conflict
            }
            TxnError::TxnLockNotFound { .. }
            | TxnError::TxnAlreadyRolledBack { .. }
            | TxnError::TxnAlreadyCommitted { .. } => TxnErrorKind::TxnFinished,
            TxnError::KeyOutsideShards { .. }
            | TxnError::InvalidRequest { .. }
            | TxnError::BelowGcSafePoint { .. } => TxnErrorKind::Invalid,
            TxnError::CommitTsCollision { .. } | TxnError::BadRollbackMarker { .. } => {
                TxnErrorKind::Corruption
            }
            TxnError::LockWaitTimeout { .. } => TxnErrorKind::Busy,
            TxnError::CommitTsTooLarge { .. } => TxnErrorKind::CommitTsTooLarge,
            TxnError::Tso(_) => TxnErrorKind::Io,
            TxnError::Raft(e) => match e {
                // Routing: ask elsewhere or again shortly.
                raftstore::RaftStoreError::NotLeader { .. }
                | raftstore::RaftStoreError::ReadNotChecked { .. }
                | raftstore::RaftStoreError::StaleCommand { .. } => TxnErrorKind::Busy,
                raftstore::RaftStoreError::ReadLocked { .. } => TxnErrorKind::Locked,
                raftstore::RaftStoreError::EpochNotMatch { .. }
                | raftstore::RaftStoreError::RegionNotFound { .. }
                | raftstore::RaftStoreError::InvalidCommand { .. } => TxnErrorKind::Invalid,
                raftstore::RaftStoreError::Timeout { .. }
                | raftstore::RaftStoreError::Apply { .. }
                | raftstore::RaftStoreError::Stopped { .. } => TxnErrorKind::Io,
            },
            TxnError::Engine(e) => match e.kind() {
                kvengine::ErrorKind::Corruption => TxnErrorKind::Corruption,
                kvengine::ErrorKind::Busy => TxnErrorKind::Busy,
                kvengine::ErrorKind::Invalid | kvengine::ErrorKind::NotFound => {
                    TxnErrorKind::Invalid
                }
                kvengine::ErrorKind::KeyIsLocked => TxnErrorKind::Locked,
                _ => TxnErrorKind::Io,
            },
        }
    }

    /// The lock in the way, for a `KeyIsLocked` error.
    pub fn lock_info(&self) -> Option<&LockInfo> {
        match self {
            TxnError::KeyIsLocked(l) => Some(l),
            _ => None,
        }
    }
}
