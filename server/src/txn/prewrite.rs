//! Prewrite: the first phase of Percolator, and the whole of 1PC.
//!
//! Per key, with the latches held and a fresh snapshot:
//! * a lock of the same start_ts: the prewrite already landed (a retry): accepted, its
//!   min_commit_ts reported, nothing rewritten;
//! * another transaction's lock: `KeyIsLocked` with the lock's full info;
//! * our own commit record (`TxnAlreadyCommitted`), our WRITE Rollback record (at version
//!   start_ts) or an EXTRA rollback marker of start_ts (see [`super::rollback_marker`])
//!   (`TxnAlreadyRolledBack`);
//! * a WRITE version `> start_ts`: `WriteConflict`.
//!
//! Another transaction's commit at exactly `commit_ts == start_ts` is **not** a conflict: a
//! read at start_ts sees it (its lock, or its memory lock, blocks our reads until it is
//! written, see [`crate::concurrency_manager`]), so it is in our snapshot, not concurrent with
//! us. It happens all the time: 1PC and async commit take `commit_ts = max_ts + 1`, which is
//! often the next timestamp the TSO hands out. The one thing that may not happen at that
//! version is our rollback record, and [`super::rollback_marker`] puts it in EXTRA then.
//!
//! All keys are checked before anything is written: a prewrite that fails writes nothing.
//! Then the memory locks go in (`ConcurrencyManager::lock_keys`, which fixes `min_commit_ts =
//! max(max_ts + 1, start_ts + 1)`), the locks (or, for 1PC, the commit records at
//! `commit_ts = min_commit_ts`) are written, and only then are the memory locks removed.

use kvengine::mvcc::{Lock, LockType};

use super::error::{Result, TxnError};
use super::rollback_marker::marker_exists;
use super::storage::{Batches, PrewriteHookPoint, Storage};
use super::write_records::{TxnRecord, decode_write_meta, find_txn_record, put_commit_record};

/// What a mutation does to its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MutationOp {
    Put,
    Delete,
    /// Locks the key without changing it: conflicts like a write, readers ignore it.
    Lock,
}

impl MutationOp {
    fn lock_type(self) -> LockType {
        match self {
            MutationOp::Put => LockType::Put,
            MutationOp::Delete => LockType::Delete,
            MutationOp::Lock => LockType::Lock,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mutation {
    pub op: MutationOp,
    pub key: Vec<u8>,
    /// The new value of a Put (ignored otherwise).
    pub value: Vec<u8>,
}

impl Mutation {
    pub fn put(key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) -> Mutation {
        Mutation {
            op: MutationOp::Put,
            key: key.into(),
            value: value.into(),
        }
    }

    pub fn delete(key: impl Into<Vec<u8>>) -> Mutation {
        Mutation {
            op: MutationOp::Delete,
            key: key.into(),
            value: Vec::new(),
        }
    }

    pub fn lock(key: impl Into<Vec<u8>>) -> Mutation {
        Mutation {
            op: MutationOp::Lock,
            key: key.into(),
            value: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrewriteRequest {
    pub mutations: Vec<Mutation>,
    pub primary: Vec<u8>,
    pub start_ts: u64,
    pub lock_ttl_ms: u64,
    /// Keys the whole transaction writes (a hint stored in each lock).
    pub txn_size: u64,
    pub use_async_commit: bool,
    /// Async commit only: every key of the transaction but the primary, stored in the
    /// primary's lock so a resolver can check them. Ignored on other keys' locks.
    pub secondaries: Vec<Vec<u8>>,
    /// Commit in this one phase if every key is in one shard (and none is already locked by
    /// this transaction); otherwise prewrite normally.
    pub try_one_pc: bool,
    /// With `try_one_pc`: commit in one phase only at or below this ts (0 = any); above it,
    /// prewrite normally.
    pub max_commit_ts: u64,
}

impl PrewriteRequest {
    /// A 2PC prewrite of `mutations` with the first one's key as primary.
    pub fn new(mutations: Vec<Mutation>, start_ts: u64, lock_ttl_ms: u64) -> PrewriteRequest {
        let primary = mutations.first().map(|m| m.key.clone()).unwrap_or_default();
        let txn_size = mutations.len() as u64;
        PrewriteRequest {
            mutations,
            primary,
            start_ts,
            lock_ttl_ms,
            txn_size,
            use_async_commit: false,
            secondaries: Vec::new(),
            try_one_pc: false,
            max_commit_ts: 0,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrewriteResponse {
    /// The highest min_commit_ts of the locks of this request: the transaction must commit at
    /// or above it (and an async-commit transaction commits at the maximum over every
    /// prewrite of the transaction).
    pub min_commit_ts: u64,
    /// `Some(commit_ts)` if the request committed in one phase. `None` with `try_one_pc` set
    /// means 1PC was not possible (keys in several shards, or a retry of a prewrite that
    /// already wrote locks) and locks were written: commit with the second phase.
    pub one_pc_commit_ts: Option<u64>,
}

enum KeyCheck {
    /// Our lock is already there (a retried prewrite), with this min_commit_ts.
    AlreadyLocked(u64),
    Fresh,
}

impl Storage {
    pub fn prewrite(&self, req: &PrewriteRequest) -> Result<PrewriteResponse> {
        validate(req)?;
        let start_ts = req.start_ts;
        let keys: Vec<&[u8]> = req.mutations.iter().map(|m| m.key.as_slice()).collect();
        let _latches = self.latches.acquire(keys.iter().copied());
        let snaps = self.snapshots(&keys)?;
        // A transaction older than the safe point may have read versions since dropped; its
        // conflict checks would miss them too.
        self.check_gc_safe_point(start_ts)?;
        // Async commit and 1PC take their commit_ts from max_ts (a 2PC commit_ts comes from
        // the TSO after the prewrite, above every read before it).
        if req.use_async_commit || req.try_one_pc {
            for id in snaps.shard_ids() {
                self.sync_max_ts(id)?;
            }
        }

        let mut existing_min_commit_ts = 0;
        let mut fresh = Vec::with_capacity(keys.len());
        for (i, m) in req.mutations.iter().enumerate() {
            match check_key(snaps.of(i), &m.key, start_ts)? {
                KeyCheck::AlreadyLocked(min) => {
                    existing_min_commit_ts = existing_min_commit_ts.max(min);
                }
                KeyCheck::Fresh => fresh.push(i),
            }
        }
        if fresh.is_empty() {
            return Ok(PrewriteResponse {
                min_commit_ts: existing_min_commit_ts,
                one_pc_commit_ts: None,
            });
        }
        let one_pc =
            req.try_one_pc && snaps.shard_count() == 1 && fresh.len() == req.mutations.len();

        let mem_keys: Vec<(Vec<u8>, LockType)> = fresh
            .iter()
            .map(|&i| {
                let m = &req.mutations[i];
                (m.key.clone(), m.op.lock_type())
            })
            .collect();
        let guard = self.cm.lock_keys(&mem_keys, |max_ts| Lock {
            lock_type: LockType::Put,
            primary: req.primary.clone(),
            start_ts,
            ttl_ms: req.lock_ttl_ms,
            min_commit_ts: max_ts.max(start_ts).saturating_add(1),
            txn_size: req.txn_size,
            value: None,
            // Memory locks say whether the transaction is async (for a resolver), not which
            // keys it has: readers never need the list.
            secondaries: (req.use_async_commit && !one_pc).then(Vec::new),
        });
        let min_commit_ts = guard.lock().min_commit_ts;
        let past_max = req.max_commit_ts != 0 && min_commit_ts > req.max_commit_ts;
        // An async-commit lock past the bound would let a resolver commit the transaction
        // there: refuse before anything is written (dropping `guard` frees the memory locks).
        if past_max && req.use_async_commit {
            return Err(TxnError::CommitTsTooLarge {
                start_ts,
                min_commit_ts,
                max_commit_ts: req.max_commit_ts,
            });
        }
        // A (non-async) 1PC prewrite past the bound locks the keys instead and the caller
        // decides.
        let one_pc = one_pc && !past_max;
        self.fire_prewrite_hook(|| PrewriteHookPoint {
            start_ts,
            min_commit_ts,
            keys: mem_keys.iter().map(|(k, _)| k.clone()).collect(),
            one_pc,
        });

        let mut batches = Batches::default();
        for &i in &fresh {
            let m = &req.mutations[i];
            let batch = batches.get(&snaps, i);
            if one_pc {
                put_commit_record(
                    batch,
                    &m.key,
                    m.op.lock_type(),
                    &m.value,
                    start_ts,
                    min_commit_ts,
                );
                continue;
            }
            let secondaries = req.use_async_commit.then(|| {
                if m.key == req.primary {
                    req.secondaries.clone()
                } else {
                    Vec::new()
                }
            });
            let lock = Lock {
                lock_type: m.op.lock_type(),
                primary: req.primary.clone(),
                start_ts,
                ttl_ms: req.lock_ttl_ms,
                min_commit_ts,
                txn_size: req.txn_size,
                value: (m.op == MutationOp::Put).then(|| m.value.clone()),
                secondaries,
            };
            batch.put_lock(&m.key, &lock.encode());
        }
        batches.write(self)?;
        // The locks (or records) are in the engine: readers find them there from now on.
        drop(guard);
        Ok(PrewriteResponse {
            min_commit_ts: min_commit_ts.max(existing_min_commit_ts),
            one_pc_commit_ts: one_pc.then_some(min_commit_ts),
        })
    }
}

fn validate(req: &PrewriteRequest) -> Result<()> {
    let invalid = |what: String| Err(TxnError::InvalidRequest { what });
    if req.mutations.is_empty() {
        return invalid("prewrite: expected at least one mutation, found none".into());
    }
    if req.start_ts == 0 {
        return invalid("prewrite: expected start_ts > 0, found 0".into());
    }
    if req.primary.is_empty() && !req.mutations.iter().any(|m| m.key.is_empty()) {
        return invalid("prewrite: expected a primary key, found an empty one".into());
    }
    let mut keys: Vec<&[u8]> = req.mutations.iter().map(|m| m.key.as_slice()).collect();
    keys.sort_unstable();
    if let Some(w) = keys.windows(2).find(|w| w[0] == w[1]) {
        return invalid(format!(
            "prewrite: expected each key once, found {:?} twice",
            String::from_utf8_lossy(w[0])
        ));
    }
    Ok(())
}

fn check_key(snap: &kvengine::SnapAccess, key: &[u8], start_ts: u64) -> Result<KeyCheck> {
    if let Some(lock) = snap.lock(key)? {
        if lock.start_ts == start_ts {
            return Ok(KeyCheck::AlreadyLocked(lock.min_commit_ts));
        }
        return Err(TxnError::KeyIsLocked(Box::new(lock.info(key))));
    }
    let newest = snap.newest_write(key)?;
    // Our own records live at versions >= start_ts: search them only if such versions exist
    // (the common case reads one WRITE version and no EXTRA marker).
    let record = match &newest {
        Some(v) if v.version >= start_ts => find_txn_record(snap, key, start_ts)?,
        _ if marker_exists(snap, key, start_ts)? => TxnRecord::RolledBack,
        _ => TxnRecord::Missing,
    };
    match record {
        TxnRecord::Committed { commit_ts, .. } => Err(TxnError::TxnAlreadyCommitted {
            key: key.to_vec(),
            start_ts,
            commit_ts,
        }),
        TxnRecord::RolledBack => Err(TxnError::TxnAlreadyRolledBack {
            key: key.to_vec(),
            start_ts,
        }),
        TxnRecord::Missing => match newest {
            Some(v) if v.version > start_ts => {
                let meta = decode_write_meta(key, &v.user_meta)?;
                Err(TxnError::WriteConflict {
                    key: key.to_vec(),
                    start_ts,
                    conflict_start_ts: meta.start_ts,
                    conflict_commit_ts: v.version,
                })
            }
            _ => Ok(KeyCheck::Fresh),
        },
    }
}
