//! The transaction layer: Percolator 2PC, 1PC and async commit on the engine's LOCK, WRITE and
//! EXTRA column families.
//!
//! Records (layouts in `kvengine::mvcc::records`): a lock in LOCK holds the value to commit;
//! a commit writes a WRITE version at commit_ts whose user meta is `WriteMeta{kind, start_ts,
//! commit_ts}` (a Delete is a tombstone); a rollback leaves a WRITE Rollback record at
//! start_ts, or an EXTRA marker when WRITE cannot take it ([`rollback_marker`]).
//!
//! Modules, in the order a transaction uses them: [`storage`] (shards, latches, snapshots),
//! [`prewrite`], [`commit`], [`rollback`] (and lock resolution), [`txn_status`], [`reads`],
//! and the client side, [`coordinator`].

pub mod commit;
pub mod coordinator;
pub mod error;
pub mod prewrite;
pub mod reads;
pub mod rollback;
pub mod rollback_marker;
pub mod shard_map;
pub mod storage;
pub mod txn_status;
pub mod write_records;

pub use coordinator::{
    Abandoned, ClientOptions, CommitStage, Committed, Mode, ResolveOutcome, Transaction, TxnClient,
};
pub use error::{Result, TxnError, TxnErrorKind};
pub use prewrite::{Mutation, MutationOp, PrewriteRequest, PrewriteResponse};
pub use reads::KvEntry;
pub use storage::{PrewriteHook, PrewriteHookPoint, SplitGuard, Storage};
pub use txn_status::{SecondaryLocksStatus, TxnStatus, lock_expired};
