//! The leader's side of `External` log mode: a flush or compaction result goes to the shard's
//! log instead of being applied at once.
//!
//! In `External` mode ([`crate::LogMode`]) a shard's files change only when its log delivers a
//! ChangeSet entry to [`Engine::apply_change_set_at`](crate::Engine::apply_change_set_at), on
//! every replica alike. So the leader's background jobs (flush, compaction) build their
//! outputs, put them to the object store, and hand the ChangeSet to the [`ChangeSetSink`] the
//! owner installed ([`propose`]); the sink proposes it and blocks until the entry is applied
//! locally, which happens on the owner's apply thread through the one apply path (`apply`).
//! The job therefore waits holding no lock the apply needs: only its own `flushing` or
//! `compacting` lock, which no apply takes.
//!
//! **Outputs.** The outputs belong to no file list until the entry is applied. They go to file
//! GC (which still checks that no file list names them) only when they are certainly unused:
//! the sink says the proposal was dropped ([`SinkError::Dropped`]): handed over here; or the
//! applied entry changed no file (`Conflicted`, or `Rejected` because the shard split or the
//! memtable was flushed meanwhile): the apply itself dooms the files the entry would have
//! added, on every replica (`apply_at_index`), so it does so also when the proposer never
//! learns the outcome. No replica's file list ever named them, so they wait for no other
//! replica (no retirement index). When the outcome is unknown here they are kept: a later
//! apply may still name them, or refuse them and doom them.

use changeset::{Change, ChangeSet};

use crate::apply::ApplyOutcome;
use crate::engine::Inner;
use crate::error::{Error, Result};
use crate::file_gc;
use crate::shard_data::OpenTables;

/// What an engine in `External` log mode needs from the log that carries its shards' entries.
/// The owner installs it with [`Engine::set_change_set_sink`](crate::Engine::set_change_set_sink).
pub trait ChangeSetSink: Send + Sync {
    /// Asks the log to carry a Freeze for `shard_id` (the leader's memtable reached
    /// memtable_size, or flush_shard was called). Fire and forget; duplicates are harmless.
    fn propose_freeze(&self, shard_id: u64);
    /// Proposes a ChangeSet (a flush or compaction result) and blocks until it is applied
    /// locally or known dropped. Never called with a shard lock held.
    ///
    /// The ChangeSet's `sequence` is not meaningful: the apply stamps the entry's log index.
    fn propose_change_set(&self, cs: &ChangeSet) -> std::result::Result<ApplyOutcome, SinkError>;
}

/// Why a proposed ChangeSet has no apply outcome.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SinkError {
    /// Definitely not applied (e.g. the index was taken by another term): outputs may be deleted.
    #[error("proposal dropped: {reason}")]
    Dropped { reason: String },
    /// Unknown (timeout, leadership lost): outputs are kept (a later apply may name them).
    #[error("proposal outcome unknown: {reason}")]
    Unknown { reason: String },
}

/// Hands a job's `change` for shard `shard_id` at version `shard_ver` (the version of the state
/// the job read: a split meanwhile makes the entry stale, and the apply rejects it) to the
/// installed sink and waits for its outcome. `outputs` are the tables the job wrote (module
/// docs say when they go to file GC).
pub(crate) fn propose(
    inner: &Inner,
    shard_id: u64,
    shard_ver: u64,
    change: Change,
    outputs: OpenTables,
) -> Result<ApplyOutcome> {
    let sink = inner.change_set_sink(shard_id)?;
    let cs = ChangeSet {
        shard_id,
        shard_ver,
        sequence: 0,
        properties: Default::default(),
        change: Some(change),
    };
    match sink.propose_change_set(&cs) {
        // A refused entry's outputs were doomed by its apply, here as on every replica
        // (`apply_at_index`): nothing to hand to file GC twice.
        Ok(outcome) => Ok(outcome),
        Err(source) => {
            if let SinkError::Dropped { .. } = source {
                file_gc::retire(inner, outputs, None, None);
            }
            Err(Error::Proposal { shard_id, source })
        }
    }
}
