//! Errors of the engine. A caller matches on a small set of kinds ([`Error::kind`]); messages
//! are lowercase with the facts at the end as `key=value`.

use std::path::PathBuf;

use types::FileId;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bytes on local disk (WAL, manifest) are not what the writer produced.
    #[error("corrupt {what}: {detail} path={path} offset={offset}", path = .path.display())]
    Corruption {
        what: &'static str,
        detail: String,
        path: PathBuf,
        offset: u64,
    },
    /// Replaying the Raft log met an append that starts after its region's last index: the
    /// entries in between are missing.
    #[error("corrupt raft log: append leaves a gap region_id={region_id} expected={expected} found={found} path={path} offset={offset}", path = .path.display())]
    RaftLogGap {
        region_id: u64,
        /// The index the append had to start at (or before): last index + 1.
        expected: u64,
        /// The index it starts at.
        found: u64,
        path: PathBuf,
        offset: u64,
    },
    /// The Raft log refused a batch; nothing of it was written.
    #[error("raft log batch rejected")]
    RaftLogBatch(#[from] crate::raft_log::BatchError),
    /// A table read from the object store failed its checks.
    #[error("table error")]
    Table(#[from] sst::Error),
    /// A local file operation failed.
    #[error("i/o failed: {op} path={path}", path = .path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// An object store operation failed.
    #[error("object store {op} failed: file_id={file_id}")]
    Dfs {
        op: &'static str,
        file_id: FileId,
        #[source]
        source: std::io::Error,
    },
    /// The object store has no file with this id.
    #[error("object store has no file: file_id={file_id}")]
    FileNotFound { file_id: FileId },
    #[error("shard not found: shard_id={shard_id}")]
    ShardNotFound { shard_id: u64 },
    #[error("shard already exists: shard_id={shard_id}")]
    ShardExists { shard_id: u64 },
    /// The shard cannot take the request right now (it is splitting); retry, after refreshing
    /// the shard map if the shard is gone.
    #[error("shard busy: {reason} shard_id={shard_id}")]
    ShardBusy { shard_id: u64, reason: &'static str },
    /// A caller passed something the engine cannot take (e.g. a batch too large for the WAL).
    #[error("invalid argument: {what}")]
    InvalidArgument { what: String },
    /// Another process holds the engine directory.
    #[error("engine directory is in use by another process: path={path}", path = .path.display())]
    Locked { path: PathBuf },
    /// A write names a key outside the shard's range.
    #[error("key not in shard range: shard_id={shard_id} key={key:?}")]
    KeyNotInShard { shard_id: u64, key: Vec<u8> },
    /// A ChangeSet could not be applied to the shard's file list.
    #[error("changeset rejected")]
    ChangeSet(#[from] changeset::ApplyError),
    /// The engine is shutting down or a background job failed; no more writes are accepted.
    #[error("engine closed: {reason}")]
    Closed { reason: String },
    /// A read met a transaction's lock it must not ignore: resolve it, then retry.
    #[error("key is locked: key={key:?} primary={primary:?} start_ts={start_ts} min_commit_ts={min_commit_ts}", key = .lock.key, primary = .lock.primary, start_ts = .lock.start_ts, min_commit_ts = .lock.min_commit_ts)]
    KeyIsLocked { lock: Box<crate::mvcc::LockInfo> },
    /// A transaction record (lock or write meta) stored under `key` did not decode.
    #[error("bad transaction record: key={key:?}")]
    Record {
        key: Vec<u8>,
        #[source]
        source: crate::mvcc::RecordError,
    },
    /// The call exists only in the other log mode ([`crate::LogMode`]): `write` and `split`
    /// are the engine's own log, `apply_*` a log kept outside it.
    #[error("operation needs another log mode: op={op} expected={expected} found={found}")]
    WrongLogMode {
        op: &'static str,
        expected: crate::LogMode,
        found: crate::LogMode,
    },
    /// An entry was applied past the next index of the shard's log: the entries between are
    /// missing. Nothing changed.
    #[error("log index gap: shard_id={shard_id} applied={applied} index={index}")]
    LogGap {
        shard_id: u64,
        applied: u64,
        index: u64,
    },
    /// In `External` log mode, only the shard's leader flushes and compacts.
    #[error("shard is not led by this engine: op={op} shard_id={shard_id}")]
    NotLeader { shard_id: u64, op: &'static str },
    /// A ChangeSet handed to the shard's log was not applied.
    #[error("proposal to the shard's log failed: shard_id={shard_id}")]
    Proposal {
        shard_id: u64,
        #[source]
        source: crate::change_set_sink::SinkError,
    },
    /// Waiting for the shard's log to deliver what was proposed took too long.
    #[error("timed out waiting for the log: op={op} shard_id={shard_id} waited_ms={waited_ms}")]
    Timeout {
        op: &'static str,
        shard_id: u64,
        waited_ms: u64,
    },
    /// A configuration value is out of its allowed range.
    #[error("invalid engine option: {what}")]
    Config { what: String },
    /// A snapshot description shipped from another process ([`crate::SnapAccess::from_remote`])
    /// is not one a sender following the protocol produces.
    #[error("bad remote snapshot: {detail} shard_id={shard_id}")]
    RemoteSnapshot { shard_id: u64, detail: String },
    /// A compaction job (`compaction_exec`) that cannot run as described.
    #[error("bad compaction job: {detail} shard_id={shard_id}")]
    CompactionJob { shard_id: u64, detail: String },
    /// The memtable rows shipped with a remote snapshot did not decode (or, on the sending
    /// side, did not encode).
    #[error("bad remote memtable data: shard_id={shard_id}")]
    RemoteMemtableData {
        shard_id: u64,
        #[source]
        source: changeset::MemtableDataError,
    },
}

/// What a caller can do about an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    Corruption,
    NotFound,
    Io,
    Closed,
    /// Retryable: try again shortly.
    Busy,
    Config,
    Invalid,
    /// A transaction lock is in the way: resolve it, then retry.
    KeyIsLocked,
    /// Only the shard's leader may do this (`External` log mode): ask the leader.
    NotLeader,
}

impl Error {
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Corruption { .. }
            | Error::RaftLogGap { .. }
            | Error::Record { .. }
            | Error::RemoteMemtableData { .. } => ErrorKind::Corruption,
            Error::KeyIsLocked { .. } => ErrorKind::KeyIsLocked,
            Error::Table(e) if e.is_corruption() => ErrorKind::Corruption,
            Error::Table(_) | Error::Io { .. } | Error::Dfs { .. } => ErrorKind::Io,
            Error::FileNotFound { .. } | Error::ShardNotFound { .. } => ErrorKind::NotFound,
            Error::KeyNotInShard { .. }
            | Error::ChangeSet(_)
            | Error::ShardExists { .. }
            | Error::InvalidArgument { .. }
            | Error::RaftLogBatch(_)
            | Error::RemoteSnapshot { .. }
            | Error::CompactionJob { .. } => ErrorKind::Invalid,
            Error::Locked { .. } => ErrorKind::Io,
            Error::WrongLogMode { .. } | Error::LogGap { .. } => ErrorKind::Invalid,
            Error::NotLeader { .. } => ErrorKind::NotLeader,
            Error::ShardBusy { .. } | Error::Proposal { .. } | Error::Timeout { .. } => {
                ErrorKind::Busy
            }
            Error::Closed { .. } => ErrorKind::Closed,
            Error::Config { .. } => ErrorKind::Config,
        }
    }

    pub(crate) fn io(
        op: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io { op, path, source }
    }
}
