//! Applying committed entries to the engine: the one place that decides what an entry does.
//!
//! Every replica applies the same entries in the same order, and every decision here depends
//! only on the entry and the region's applied state, so replicas at the same index hold the
//! same data (and the same `snap_version`). That is why a command that cannot be carried out
//! (a write proposed before a split that moved its keys away, an undecodable entry) still
//! consumes its index: it is applied as a no-op on every replica alike and answers an error to
//! its proposer.
//!
//! What the epoch check covers: writes and splits name the region `ver` they were proposed
//! under and are rejected when it changed; a ChangeSet carries its own `shard_ver`, which the
//! engine's apply path checks; a Freeze or a CompactLog is valid under any epoch.

use std::time::Duration;

use changeset::ChangeSet;
use kvengine::{ApplyOutcome, Engine, ErrorKind, WriteBatch};
use prost::Message;
use raft::eraftpb::{Entry, EntryType};
use wire::raft_cmd::{Cmd, RaftCmd};

use crate::error::RaftStoreError;

/// What a proposer is told once its entry applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The entry's index: the region's data version is `base_version + index` from here on.
    pub index: u64,
    /// What the engine did with a ChangeSet or a split.
    pub outcome: Option<ApplyOutcome>,
}

/// What the store does after an entry applied, beyond answering its proposer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Effect {
    None,
    /// A split created `right_id` here: its Raft group starts on this server.
    SplitRight {
        right_id: u64,
    },
    /// Entries at or below `index` may leave the log.
    CompactLog {
        index: u64,
        term: u64,
    },
}

/// An entry this replica could not apply for a reason of its own (the object store did not
/// answer, a table is missing, the engine closed): nothing changed, and skipping the entry
/// would make this replica diverge, so the store stops.
#[derive(Debug)]
pub(crate) struct Fatal(pub(crate) String);

fn fatal(e: kvengine::Error) -> Fatal {
    Fatal(e.to_string())
}

/// The Raft log side of a split: the right child's log must exist before the engine records
/// the split (a crash between the two then leaves a log-only region, which the store drops at
/// start; the split entry is re-delivered and makes it again).
pub(crate) trait ChildLog {
    /// Writes the right child's initial log state: truncated at the split's `(index, term)`.
    fn prepare(&mut self, right_id: u64, index: u64, term: u64) -> Result<(), String>;
    /// The split did not happen: the child's log state goes.
    fn abandon(&mut self, right_id: u64) -> Result<(), String>;
}

/// Applies one committed entry of `region_id`.
pub(crate) fn apply_entry(
    engine: &Engine,
    region_id: u64,
    entry: &Entry,
    child_log: &mut dyn ChildLog,
) -> Result<(Result<Applied, RaftStoreError>, Effect), Fatal> {
    let index = entry.index;
    let applied = |outcome| Applied { index, outcome };
    if entry.data.is_empty() {
        // A new leader's empty entry.
        noop(engine, region_id, index)?;
        return Ok((Ok(applied(None)), Effect::None));
    }
    if entry.get_entry_type() != EntryType::EntryNormal {
        // The store applies conf changes itself (raft-rs takes them: `membership`); one that
        // reaches here is a no-op, as everywhere.
        noop(engine, region_id, index)?;
        let err = invalid(region_id, "a conf change is applied by the store, not here");
        return Ok((Err(err), Effect::None));
    }
    let (region_ver, cmd) = match RaftCmd::decode_entry(&entry.data) {
        Ok(c) => c,
        Err(e) => {
            noop(engine, region_id, index)?;
            return Ok((Err(invalid(region_id, &e.to_string())), Effect::None));
        }
    };
    let current_ver = engine.snapshot(region_id).map_err(fatal)?.ver();
    if matches!(cmd, Cmd::Write(_) | Cmd::Split(_)) && region_ver != current_ver {
        noop(engine, region_id, index)?;
        let err = RaftStoreError::EpochNotMatch {
            region_id,
            expected: region_ver,
            found: current_ver,
        };
        return Ok((Err(err), Effect::None));
    }
    match cmd {
        Cmd::Write(bytes) => {
            let batch = match WriteBatch::from_vec(bytes) {
                Ok(b) => b,
                Err(e) => {
                    noop(engine, region_id, index)?;
                    return Ok((Err(invalid(region_id, &e.to_string())), Effect::None));
                }
            };
            match engine.apply_write(region_id, index, &batch) {
                Ok(()) => Ok((Ok(applied(None)), Effect::None)),
                Err(e) if !is_entry_error(&e) => Err(fatal(e)),
                Err(e) => {
                    noop(engine, region_id, index)?;
                    Ok((Err(apply_failed(region_id, &e)), Effect::None))
                }
            }
        }
        Cmd::Freeze(_) => {
            with_retries(|| engine.apply_freeze(region_id, index)).map_err(fatal)?;
            Ok((Ok(applied(None)), Effect::None))
        }
        Cmd::ChangeSet(bytes) => {
            let cs = match ChangeSet::decode(bytes.as_slice()) {
                Ok(cs) if cs.shard_id == region_id => cs,
                Ok(cs) => {
                    noop(engine, region_id, index)?;
                    let detail = format!("change set names region {}", cs.shard_id);
                    return Ok((Err(invalid(region_id, &detail)), Effect::None));
                }
                Err(e) => {
                    noop(engine, region_id, index)?;
                    return Ok((Err(invalid(region_id, &e.to_string())), Effect::None));
                }
            };
            match with_retries(|| engine.apply_change_set_at(index, &cs)) {
                Ok(outcome) => Ok((Ok(applied(Some(outcome))), Effect::None)),
                Err(e) if !is_entry_error(&e) => Err(fatal(e)),
                Err(e) => {
                    noop(engine, region_id, index)?;
                    Ok((Err(apply_failed(region_id, &e)), Effect::None))
                }
            }
        }
        Cmd::Split(split) => {
            let right_id = split.right_id;
            let already = engine.shard_info(region_id).map_err(fatal)?.write_sequence >= index;
            if !already {
                child_log
                    .prepare(right_id, index, entry.term)
                    .map_err(Fatal)?;
            }
            let outcome = match engine.apply_split(region_id, index, &split.key, right_id) {
                Ok(o) => o,
                Err(e) if !is_entry_error(&e) => return Err(fatal(e)),
                Err(e) => {
                    abandon(child_log, right_id, already)?;
                    noop(engine, region_id, index)?;
                    return Ok((Err(apply_failed(region_id, &e)), Effect::None));
                }
            };
            let effect = match &outcome {
                ApplyOutcome::Split { .. } if !already => Effect::SplitRight { right_id },
                ApplyOutcome::Split { .. } => Effect::None,
                _ => {
                    abandon(child_log, right_id, already)?;
                    Effect::None
                }
            };
            Ok((Ok(applied(Some(outcome))), effect))
        }
        Cmd::CompactLog(c) => {
            noop(engine, region_id, index)?;
            let effect = Effect::CompactLog {
                index: c.index,
                term: c.term,
            };
            Ok((Ok(applied(None)), effect))
        }
    }
}

fn abandon(child_log: &mut dyn ChildLog, right_id: u64, already: bool) -> Result<(), Fatal> {
    if already {
        return Ok(());
    }
    child_log.abandon(right_id).map_err(Fatal)
}

fn noop(engine: &Engine, region_id: u64, index: u64) -> Result<(), Fatal> {
    engine.apply_noop(region_id, index).map_err(fatal)
}

fn invalid(region_id: u64, detail: &str) -> RaftStoreError {
    RaftStoreError::InvalidCommand {
        region_id,
        detail: detail.to_string(),
    }
}

fn apply_failed(region_id: u64, e: &kvengine::Error) -> RaftStoreError {
    RaftStoreError::Apply {
        region_id,
        detail: e.to_string(),
    }
}

/// Errors that say nothing about the entry (the object store or the disk did not answer):
/// worth trying again.
fn is_retryable(e: &kvengine::Error) -> bool {
    matches!(e.kind(), ErrorKind::Io)
}

/// Errors decided by the entry and the applied state alone, so every replica gets the same
/// one: the entry becomes a no-op everywhere and its proposer is told. Any other error (a
/// missing or corrupt table, a closed engine, a local id clash) is this replica's own: turning
/// the entry into a no-op here only would make it diverge, so the store stops instead.
fn is_entry_error(e: &kvengine::Error) -> bool {
    matches!(
        e,
        kvengine::Error::KeyNotInShard { .. }
            | kvengine::Error::InvalidArgument { .. }
            | kvengine::Error::ChangeSet(_)
    )
}

/// Runs `f` until it succeeds, fails for a reason that will not pass, or fails for a passing
/// reason ten times (then the caller stops the store: skipping the entry would diverge).
/// The sleeps stall the store loop: acceptable for a rare object-store hiccup.
fn with_retries<T>(mut f: impl FnMut() -> kvengine::Result<T>) -> kvengine::Result<T> {
    let mut attempt = 0u32;
    loop {
        match f() {
            Ok(v) => return Ok(v),
            Err(e) if is_retryable(&e) && attempt < 10 => {
                attempt += 1;
                tracing::warn!(attempt, error = %e, "apply failed, retrying");
                std::thread::sleep(Duration::from_millis(100 * u64::from(attempt)));
            }
            Err(e) => return Err(e),
        }
    }
}
