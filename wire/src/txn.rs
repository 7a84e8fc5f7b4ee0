//! The transaction commands of a storage server (Percolator 2PC, 1PC, async commit, lock
//! resolution, MVCC reads). Every response carries an optional [`KeyError`]; transport-level
//! failures (a body that does not decode) are HTTP 400.

use crate::coprocessor::LockInfo;
use prost::Message;

/// What a caller can do about a [`KeyError`] (`KeyError.kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum ErrorKind {
    Unknown = 0,
    /// Resolve `locked`, then retry the same request.
    Locked = 1,
    /// Restart the transaction with a new start_ts.
    Conflict = 2,
    /// The transaction is over (rolled back, committed, or its locks are gone).
    TxnFinished = 3,
    /// Refresh the region cache or fix the request.
    Invalid = 4,
    /// Stored bytes did not decode.
    Corruption = 5,
    /// I/O, the engine or the TSO failed; the outcome of a write may be unknown.
    Io = 6,
    /// Retry shortly.
    Busy = 7,
    /// An async-commit prewrite would have committed past the request's `max_commit_ts`:
    /// nothing was locked by it. (An older client reads it as `Unknown` and fails the
    /// statement.)
    CommitTsTooLarge = 8,
}

#[derive(Clone, PartialEq, Message)]
pub struct KeyError {
    #[prost(enumeration = "ErrorKind", tag = "1")]
    pub kind: i32,
    /// The lock in the way, for `Locked`.
    #[prost(message, optional, tag = "2")]
    pub locked: Option<LockInfo>,
    /// The server's full error text.
    #[prost(string, tag = "3")]
    pub message: String,
    /// For a write conflict: the conflicting commit.
    #[prost(uint64, tag = "4")]
    pub conflict_commit_ts: u64,
    /// Set when the command failed because of where it was sent (not the leader, a stale
    /// epoch, a leader change mid-command): the client refreshes its region cache and sends it
    /// again. `kind` stays `Busy`/`Invalid` for clients that do not read this field.
    #[prost(message, optional, tag = "5")]
    pub region_error: Option<crate::coprocessor::RegionError>,
    /// For `TxnAlreadyCommitted`-style answers (a rollback of, or a retried 1PC prewrite of, a
    /// transaction that committed): its commit timestamp; 0 otherwise.
    #[prost(uint64, tag = "6")]
    pub committed_ts: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum Op {
    Put = 0,
    Delete = 1,
    /// Locks the key without changing it.
    Lock = 2,
}

#[derive(Clone, PartialEq, Message)]
pub struct Mutation {
    #[prost(enumeration = "Op", tag = "1")]
    pub op: i32,
    #[prost(bytes = "vec", tag = "2")]
    pub key: Vec<u8>,
    #[prost(bytes = "vec", tag = "3")]
    pub value: Vec<u8>,
}

#[derive(Clone, PartialEq, Message)]
pub struct PrewriteRequest {
    #[prost(message, repeated, tag = "1")]
    pub mutations: Vec<Mutation>,
    #[prost(bytes = "vec", tag = "2")]
    pub primary: Vec<u8>,
    #[prost(uint64, tag = "3")]
    pub start_ts: u64,
    #[prost(uint64, tag = "4")]
    pub lock_ttl_ms: u64,
    #[prost(uint64, tag = "5")]
    pub txn_size: u64,
    #[prost(bool, tag = "6")]
    pub use_async_commit: bool,
    #[prost(bytes = "vec", repeated, tag = "7")]
    pub secondaries: Vec<Vec<u8>>,
    #[prost(bool, tag = "8")]
    pub try_one_pc: bool,
    /// The highest commit ts the transaction accepts (0 = any). A 1PC prewrite whose commit
    /// ts would be higher writes locks instead (the client then commits with two phases and
    /// checks its commit ts itself); an async-commit prewrite whose `min_commit_ts` would be
    /// higher is refused with `CommitTsTooLarge` and locks nothing (its lock would let a
    /// resolver commit past the bound). A 2PC prewrite ignores it. A statement that read a table's schema
    /// without locking it must commit within the schema lease of its start
    /// (`client::sql::txn_write`).
    #[prost(uint64, tag = "9")]
    pub max_commit_ts: u64,
}

#[derive(Clone, PartialEq, Message)]
pub struct PrewriteResponse {
    #[prost(uint64, tag = "1")]
    pub min_commit_ts: u64,
    /// Non-zero when the request committed in one phase, at this ts.
    #[prost(uint64, tag = "2")]
    pub one_pc_commit_ts: u64,
    #[prost(message, optional, tag = "3")]
    pub error: Option<KeyError>,
}

#[derive(Clone, PartialEq, Message)]
pub struct CommitRequest {
    #[prost(bytes = "vec", repeated, tag = "1")]
    pub keys: Vec<Vec<u8>>,
    #[prost(uint64, tag = "2")]
    pub start_ts: u64,
    #[prost(uint64, tag = "3")]
    pub commit_ts: u64,
}

/// The response of commands that only succeed or fail (commit, rollback).
#[derive(Clone, PartialEq, Message)]
pub struct CommandResponse {
    #[prost(message, optional, tag = "1")]
    pub error: Option<KeyError>,
}

#[derive(Clone, PartialEq, Message)]
pub struct RollbackRequest {
    #[prost(bytes = "vec", repeated, tag = "1")]
    pub keys: Vec<Vec<u8>>,
    #[prost(uint64, tag = "2")]
    pub start_ts: u64,
}

#[derive(Clone, PartialEq, Message)]
pub struct CheckTxnStatusRequest {
    #[prost(bytes = "vec", tag = "1")]
    pub primary: Vec<u8>,
    #[prost(uint64, tag = "2")]
    pub lock_ts: u64,
    /// The caller's current ts: the lock's TTL is judged against it.
    #[prost(uint64, tag = "3")]
    pub current_ts: u64,
    #[prost(bool, tag = "4")]
    pub rollback_if_not_exist: bool,
    /// The start_ts of the reader or writer asking: the server raises its max_ts to it.
    #[prost(uint64, tag = "5")]
    pub caller_start_ts: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum TxnState {
    Unknown = 0,
    Committed = 1,
    RolledBack = 2,
    Locked = 3,
    LockNotExistRolledBack = 4,
    LockNotExist = 5,
}

#[derive(Clone, PartialEq, Message)]
pub struct CheckTxnStatusResponse {
    #[prost(enumeration = "TxnState", tag = "1")]
    pub state: i32,
    /// For `Committed`.
    #[prost(uint64, tag = "2")]
    pub commit_ts: u64,
    /// For `Locked`: the primary's lock.
    #[prost(message, optional, tag = "3")]
    pub lock: Option<LockInfo>,
    /// For `Locked`: an async-commit primary whose TTL passed (check its secondaries).
    #[prost(bool, tag = "4")]
    pub ttl_expired: bool,
    /// For `Locked` with async commit: the secondaries listed in the primary's lock.
    #[prost(bytes = "vec", repeated, tag = "5")]
    pub secondaries: Vec<Vec<u8>>,
    #[prost(message, optional, tag = "6")]
    pub error: Option<KeyError>,
}

#[derive(Clone, PartialEq, Message)]
pub struct CheckSecondaryLocksRequest {
    #[prost(bytes = "vec", repeated, tag = "1")]
    pub keys: Vec<Vec<u8>>,
    #[prost(uint64, tag = "2")]
    pub start_ts: u64,
}

#[derive(Clone, PartialEq, Message)]
pub struct CheckSecondaryLocksResponse {
    #[prost(bool, tag = "1")]
    pub all_locked: bool,
    /// Non-zero when some key has the transaction's commit record, at this ts.
    #[prost(uint64, tag = "2")]
    pub commit_ts: u64,
    #[prost(uint64, tag = "3")]
    pub min_commit_ts: u64,
    #[prost(message, optional, tag = "4")]
    pub error: Option<KeyError>,
}

/// Commits (`commit_ts` > 0) or rolls back (`commit_ts` = 0) the locks of transaction
/// `start_ts`: on `keys` when given, else on every lock of it in `[start, end)`.
#[derive(Clone, PartialEq, Message)]
pub struct ResolveLockRequest {
    #[prost(uint64, tag = "1")]
    pub start_ts: u64,
    #[prost(uint64, tag = "2")]
    pub commit_ts: u64,
    #[prost(bytes = "vec", repeated, tag = "3")]
    pub keys: Vec<Vec<u8>>,
    #[prost(bytes = "vec", tag = "4")]
    pub start: Vec<u8>,
    #[prost(bytes = "vec", tag = "5")]
    pub end: Vec<u8>,
}

#[derive(Clone, PartialEq, Message)]
pub struct ResolveLockResponse {
    #[prost(uint64, tag = "1")]
    pub resolved: u64,
    #[prost(message, optional, tag = "2")]
    pub error: Option<KeyError>,
}

/// Locks in `[start, end)` with start_ts <= `max_ts`, at most `limit` (0 = all).
#[derive(Clone, PartialEq, Message)]
pub struct ScanLockRequest {
    #[prost(bytes = "vec", tag = "1")]
    pub start: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub end: Vec<u8>,
    #[prost(uint64, tag = "3")]
    pub max_ts: u64,
    #[prost(uint64, tag = "4")]
    pub limit: u64,
}

#[derive(Clone, PartialEq, Message)]
pub struct ScanLockResponse {
    #[prost(message, repeated, tag = "1")]
    pub locks: Vec<LockInfo>,
    #[prost(message, optional, tag = "2")]
    pub error: Option<KeyError>,
}

#[derive(Clone, PartialEq, Message)]
pub struct GetRequest {
    #[prost(bytes = "vec", tag = "1")]
    pub key: Vec<u8>,
    #[prost(uint64, tag = "2")]
    pub start_ts: u64,
    /// Start timestamps of transactions whose locks this read may ignore.
    #[prost(uint64, repeated, tag = "3")]
    pub bypass_locks: Vec<u64>,
}

#[derive(Clone, PartialEq, Message)]
pub struct GetResponse {
    #[prost(bool, tag = "1")]
    pub found: bool,
    #[prost(bytes = "vec", tag = "2")]
    pub value: Vec<u8>,
    #[prost(uint64, tag = "3")]
    pub commit_ts: u64,
    #[prost(message, optional, tag = "4")]
    pub error: Option<KeyError>,
}

#[derive(Clone, PartialEq, Message)]
pub struct ScanRequest {
    #[prost(bytes = "vec", tag = "1")]
    pub start: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub end: Vec<u8>,
    #[prost(uint64, tag = "3")]
    pub limit: u64,
    #[prost(uint64, tag = "4")]
    pub start_ts: u64,
    #[prost(bool, tag = "5")]
    pub reverse: bool,
}

#[derive(Clone, PartialEq, Eq, Message)]
pub struct ScanEntry {
    #[prost(bytes = "vec", tag = "1")]
    pub key: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub value: Vec<u8>,
    #[prost(uint64, tag = "3")]
    pub commit_ts: u64,
}

#[derive(Clone, PartialEq, Message)]
pub struct ScanResponse {
    #[prost(message, repeated, tag = "1")]
    pub entries: Vec<ScanEntry>,
    #[prost(message, optional, tag = "2")]
    pub error: Option<KeyError>,
}
