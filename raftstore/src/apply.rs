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

/// An entry that could not be applied for a reason that may pass (the object store did not
/// answer): nothing changed, and skipping it would make this replica diverge.
#[derive(Debug)]
pub(crate) struct Retryable(pub(crate) kvengine::Error);

/// Applies one committed entry of `region_id`.
pub(crate) fn apply_entry(
    engine: &Engine,
    region_id: u64,
    entry: &Entry,
) -> Result<(Result<Applied, RaftStoreError>, Effect), Retryable> {
    let index = entry.index;
    let applied = |outcome| Applied { index, outcome };
    if entry.data.is_empty() {
        // A new leader's empty entry.
        noop(engine, region_id, index)?;
        return Ok((Ok(applied(None)), Effect::None));
    }
    if entry.get_entry_type() != EntryType::EntryNormal {
        // Membership is static in this version: nothing proposes a conf change.
        noop(engine, region_id, index)?;
        let err = invalid(
            region_id,
            "conf changes are not supported: membership is static",
        );
        return Ok((Err(err), Effect::None));
    }
    let (region_ver, cmd) = match RaftCmd::decode_entry(&entry.data) {
        Ok(c) => c,
        Err(e) => {
            noop(engine, region_id, index)?;
            return Ok((Err(invalid(region_id, &e.to_string())), Effect::None));
        }
    };
    let current_ver = engine.shard_info(region_id).map_err(Retryable)?.ver;
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
            let batch = match WriteBatch::decode(&bytes) {
                Ok(b) => b,
                Err(e) => {
                    noop(engine, region_id, index)?;
                    return Ok((Err(invalid(region_id, &e.to_string())), Effect::None));
                }
            };
            match engine.apply_write(region_id, index, &batch) {
                Ok(()) => Ok((Ok(applied(None)), Effect::None)),
                Err(e) if is_retryable(&e) => Err(Retryable(e)),
                Err(e) => {
                    noop(engine, region_id, index)?;
                    Ok((Err(apply_failed(region_id, &e)), Effect::None))
                }
            }
        }
        Cmd::Freeze(_) => {
            with_retries(|| engine.apply_freeze(region_id, index))?;
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
                Err(Retryable(e)) if is_retryable(&e) => Err(Retryable(e)),
                Err(Retryable(e)) => {
                    noop(engine, region_id, index)?;
                    Ok((Err(apply_failed(region_id, &e)), Effect::None))
                }
            }
        }
        Cmd::Split(split) => {
            let outcome = match engine.apply_split(region_id, index, &split.key, split.right_id) {
                Ok(o) => o,
                Err(e) if is_retryable(&e) => return Err(Retryable(e)),
                Err(e) => {
                    noop(engine, region_id, index)?;
                    return Ok((Err(apply_failed(region_id, &e)), Effect::None));
                }
            };
            let effect = match &outcome {
                ApplyOutcome::Split { .. } => Effect::SplitRight {
                    right_id: split.right_id,
                },
                _ => Effect::None,
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

fn noop(engine: &Engine, region_id: u64, index: u64) -> Result<(), Retryable> {
    engine.apply_noop(region_id, index).map_err(Retryable)
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

/// Errors that say nothing about the entry (the object store or the disk did not answer).
fn is_retryable(e: &kvengine::Error) -> bool {
    matches!(e.kind(), ErrorKind::Io)
}

/// Runs `f` until it succeeds, fails for a reason that will not pass, or fails for a passing
/// reason ten times (then the caller stops the store: skipping the entry would diverge).
fn with_retries<T>(mut f: impl FnMut() -> kvengine::Result<T>) -> Result<T, Retryable> {
    let mut attempt = 0u32;
    loop {
        match f() {
            Ok(v) => return Ok(v),
            Err(e) if is_retryable(&e) && attempt < 10 => {
                attempt += 1;
                tracing::warn!(attempt, error = %e, "apply failed, retrying");
                std::thread::sleep(Duration::from_millis(100 * u64::from(attempt)));
            }
            Err(e) => return Err(Retryable(e)),
        }
    }
}
