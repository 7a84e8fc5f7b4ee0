//! Replica reads (follower reads): a read served from a follower's data, at a read point its
//! leader gave and checked.
//!
//! A follower asks its leader for a read index as any replica would (raft-rs forwards
//! `MsgReadIndex`), with a [`ReadIndexContext`] naming the reader's start_ts and key ranges.
//! The leader's store, before stepping the request into raft-rs, hands the context to the
//! [`ReplicaReadCheck`] the server installed ([`crate::RaftStore::set_replica_read_check`]):
//! it raises the leader's `max_ts` to start_ts and looks for a memory lock in the ranges, and
//! the outcome is written into the context, which comes back to the follower with the index.
//! Why the leader: memory locks (prewrites of async commit and 1PC, whose entries are not
//! committed yet) and `max_ts` exist there only; everything committed is in the log the
//! follower applies up to the index before it reads.
//!
//! The order is the same as a leader's own read, shifted: the check happens before the read
//! index is taken (both in the leader's store round), so a prewrite that released its memory
//! lock before the check has an entry at or below the index, one holding it is reported, and
//! one taking it later sees `max_ts` at or above start_ts and commits above it.

use std::sync::Arc;

use raft::eraftpb;
use wire::coprocessor::{KeyRange, LockInfo};
use wire::read_index::ReadIndexContext;

/// What a replica read asks its leader to check (the [`ReadIndexContext`] it sends, but the
/// ids the store assigns).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaRead {
    /// The reader's start_ts (must not be 0: the leader checks locks that may commit at or
    /// below it).
    pub start_ts: u64,
    /// The key ranges the reader will read.
    pub ranges: Vec<KeyRange>,
}

/// The leader's side of a replica read, installed by the server that owns the concurrency
/// manager. Runs on the thread running the store round: keep it short.
pub trait ReplicaReadCheck: Send + Sync {
    /// Raises `max_ts` to `start_ts`, then returns a memory lock in `ranges` that blocks a
    /// read at `start_ts`, if there is one.
    fn check(&self, region_id: u64, start_ts: u64, ranges: &[KeyRange]) -> Option<LockInfo>;
}

/// On the leader, before raft-rs sees a forwarded `MsgReadIndex`: runs `check` on the
/// request's context and writes the outcome into it. Contexts that need no check (a leader's
/// own reads never travel) and bytes that are not a context are left alone; without a check
/// installed the context stays unchecked and the follower refuses to serve from it.
pub(crate) fn check_forwarded(
    check: Option<&Arc<dyn ReplicaReadCheck>>,
    region_id: u64,
    msg: &mut eraftpb::Message,
) {
    let Some(check) = check else {
        return;
    };
    let Some(entry) = msg.entries.first_mut() else {
        return;
    };
    let Some(mut ctx) = ReadIndexContext::decode_from(&entry.data) else {
        return;
    };
    if !ctx.needs_check() {
        return;
    }
    crate::metrics::REPLICA_READ_CHECKS.inc();
    ctx.locked = check.check(region_id, ctx.start_ts, &ctx.ranges);
    ctx.checked = true;
    entry.data = ctx.encode_to_bytes().into();
}
