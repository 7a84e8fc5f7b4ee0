//! Installing a Raft snapshot is two durable writes in two files: the engine's manifest takes
//! the snapshot's file list as the region's state at its index, then the Raft log drops every
//! entry up to that index (and records its term). The engine goes first (a log truncated past
//! entries the engine never got could not be replayed), so a crash between the two leaves an
//! engine *ahead* of its log.
//!
//! Such a replica is repaired at start, not refused: the engine half also records the
//! snapshot's `(index, term)` as a shard property ([`SNAPSHOT_PROPERTY`], 16 bytes: index then
//! term, big-endian), and when the engine's applied index is exactly a recorded snapshot's
//! index the store writes the log half it missed ([`complete_interrupted`]). The term matters:
//! a replica's last log term decides elections, so a guessed one could either win an election
//! it must not (too high) or vote for a candidate missing committed entries (too low). An
//! engine ahead of its log for any other reason (the log lost its tail) is still refused
//! (`StartError::LogBehindEngine`).

use changeset::ChangeSet;
use kvengine::raft_log::{HardState, LogBatch, RaftLog};
use kvengine::{ApplyOutcome, Engine};

/// The shard property naming the last Raft snapshot the engine installed.
pub const SNAPSHOT_PROPERTY: &str = "raft_snapshot_index_term";

/// The engine half of a snapshot install: `cs` (the leader's file list at `index`) becomes the
/// region's state, recording `(index, term)` with it. The store writes the log half right
/// after (tests call this alone to leave what a crash between the two leaves).
pub fn install_in_engine(
    engine: &Engine,
    index: u64,
    term: u64,
    cs: &ChangeSet,
) -> kvengine::Result<ApplyOutcome> {
    let mut cs = cs.clone();
    let mut point = Vec::with_capacity(16);
    point.extend_from_slice(&index.to_be_bytes());
    point.extend_from_slice(&term.to_be_bytes());
    cs.properties.insert(SNAPSHOT_PROPERTY.to_string(), point);
    engine.install_raft_snapshot(index, &cs)
}

/// The `(index, term)` of the last snapshot installed in `region_id`'s engine state, if any.
fn installed_point(engine: &Engine, region_id: u64) -> Option<(u64, u64)> {
    let files = engine.shard_files(region_id).ok()?;
    let bytes = files.properties().get(SNAPSHOT_PROPERTY)?;
    let index = u64::from_be_bytes(bytes.get(..8)?.try_into().ok()?);
    let term = u64::from_be_bytes(bytes.get(8..16)?.try_into().ok()?);
    Some((index, term))
}

/// At start, for a region whose engine applied `applied` while its log ends below it: when
/// `applied` is the index of the snapshot the engine installed last, writes the log half of
/// that install (truncation at the snapshot's index and term, commit raised to it) and returns
/// true; otherwise false (the caller refuses to start).
pub(crate) fn complete_interrupted(
    engine: &Engine,
    log: &RaftLog,
    region_id: u64,
    applied: u64,
) -> kvengine::Result<bool> {
    let Some((index, term)) = installed_point(engine, region_id) else {
        return Ok(false);
    };
    if index != applied {
        return Ok(false);
    }
    let hard_state = log
        .state(region_id)
        .map(|s| s.hard_state)
        .unwrap_or_default();
    let mut batch = LogBatch::default();
    batch.truncate(region_id, index, term);
    batch.set_hard_state(
        region_id,
        HardState {
            commit: hard_state.commit.max(index),
            ..hard_state
        },
    );
    log.write(&batch)?;
    tracing::warn!(
        region_id,
        index,
        term,
        "completed a raft snapshot install a crash interrupted: the log now starts after the snapshot"
    );
    Ok(true)
}
