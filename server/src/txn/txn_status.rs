//! What became of a transaction: `check_txn_status` on its primary (2PC: the primary decides)
//! and `check_secondary_locks` on the keys of an async-commit transaction (the transaction is
//! committed iff every key was prewritten).

use kvengine::mvcc::Lock;
use types::Ts;

use super::error::Result;
use super::rollback_marker::put_rollback;
use super::storage::{Batches, Storage, require_keys, unique_keys};
use super::write_records::{TxnRecord, find_txn_record};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnStatus {
    /// The primary's commit record exists.
    Committed { commit_ts: u64 },
    /// The transaction was rolled back (before this call, or by it because the primary's lock
    /// outlived its TTL).
    RolledBack,
    /// The primary still holds the transaction's lock. `ttl_expired` is only ever true for an
    /// async-commit primary: such a lock is not rolled back here, because the transaction may
    /// be committed already (every key prewritten); the caller must check the secondaries the
    /// lock lists ([`Storage::check_secondary_locks`]).
    Locked { lock: Box<Lock>, ttl_expired: bool },
    /// No lock and no record: the primary's prewrite never landed, and this call rolled it back
    /// so it never will (`rollback_if_not_exist`).
    LockNotExistRolledBack,
    /// No lock and no record, and the caller did not ask for a rollback: the prewrite may still
    /// be on its way. Wait for the TTL of the lock you met, then ask again with
    /// `rollback_if_not_exist`.
    LockNotExist,
}

/// What [`Storage::check_secondary_locks`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecondaryLocksStatus {
    /// Every key still holds the transaction's lock: it is committed at `min_commit_ts` (the
    /// maximum over these keys; take the max with the primary's as well).
    pub all_locked: bool,
    /// Some key has the transaction's commit record, at this ts.
    pub commit_ts: Option<u64>,
    /// The highest min_commit_ts over the locks found.
    pub min_commit_ts: u64,
}

/// Whether a lock taken at `lock_ts` with `ttl_ms` has expired by `current_ts` (physical
/// milliseconds of both timestamps).
pub fn lock_expired(lock_ts: u64, ttl_ms: u64, current_ts: u64) -> bool {
    Ts(current_ts).physical_millis() >= Ts(lock_ts).physical_millis().saturating_add(ttl_ms)
}

impl Storage {
    /// The status of transaction `lock_ts` whose primary key is `primary`. Raises `max_ts` to
    /// `caller_start_ts`. A 2PC primary lock whose TTL expired by `current_ts` is rolled back.
    pub fn check_txn_status(
        &self,
        primary: &[u8],
        lock_ts: u64,
        caller_start_ts: u64,
        current_ts: u64,
        rollback_if_not_exist: bool,
    ) -> Result<TxnStatus> {
        let keys = [primary];
        let _latches = self.latches.acquire(keys);
        self.cm.update_max_ts(caller_start_ts);
        let snaps = self.snapshots(&keys)?;
        let snap = snaps.of(0);
        let lock = snap.lock(primary)?;
        if let Some(lock) = lock.as_ref().filter(|l| l.start_ts == lock_ts) {
            let expired = lock_expired(lock_ts, lock.ttl_ms, current_ts);
            if !expired || lock.use_async_commit() {
                return Ok(TxnStatus::Locked {
                    lock: Box::new(lock.clone()),
                    ttl_expired: expired,
                });
            }
            self.cm.update_max_ts(lock_ts);
            let mut batches = Batches::default();
            let batch = batches.get(&snaps, 0);
            batch.delete_lock(primary);
            put_rollback(batch, snap, primary, lock_ts, false)?;
            batches.write(self)?;
            return Ok(TxnStatus::RolledBack);
        }
        match find_txn_record(snap, primary, lock_ts)? {
            TxnRecord::Committed { commit_ts, .. } => Ok(TxnStatus::Committed { commit_ts }),
            TxnRecord::RolledBack => Ok(TxnStatus::RolledBack),
            TxnRecord::Missing if rollback_if_not_exist => {
                self.cm.update_max_ts(lock_ts);
                let mut batches = Batches::default();
                put_rollback(
                    batches.get(&snaps, 0),
                    snap,
                    primary,
                    lock_ts,
                    lock.is_some(),
                )?;
                batches.write(self)?;
                Ok(TxnStatus::LockNotExistRolledBack)
            }
            TxnRecord::Missing => Ok(TxnStatus::LockNotExist),
        }
    }

    /// Checks the keys of async-commit transaction `start_ts` (usually the secondaries its
    /// primary lists). A key with neither the lock nor a record is rolled back here, so its
    /// prewrite can never land and the transaction can never become "all locked" later.
    /// Nothing is rolled back if some key is found committed.
    pub fn check_secondary_locks(
        &self,
        keys: &[Vec<u8>],
        start_ts: u64,
    ) -> Result<SecondaryLocksStatus> {
        require_keys(keys, "check_secondary_locks")?;
        let keys = unique_keys(keys);
        let _latches = self.latches.acquire(&keys);
        let snaps = self.snapshots(&keys)?;
        let mut min_commit_ts = 0;
        let mut all_locked = true;
        // (key index, another transaction's lock is on it)
        let mut to_roll_back = Vec::new();
        for (i, key) in keys.iter().enumerate() {
            let snap = snaps.of(i);
            let lock = snap.lock(key)?;
            if let Some(l) = lock.as_ref().filter(|l| l.start_ts == start_ts) {
                min_commit_ts = min_commit_ts.max(l.min_commit_ts);
                continue;
            }
            all_locked = false;
            match find_txn_record(snap, key, start_ts)? {
                TxnRecord::Committed { commit_ts, .. } => {
                    return Ok(SecondaryLocksStatus {
                        all_locked: false,
                        commit_ts: Some(commit_ts),
                        min_commit_ts,
                    });
                }
                TxnRecord::RolledBack => {}
                TxnRecord::Missing => to_roll_back.push((i, lock.is_some())),
            }
        }
        if !to_roll_back.is_empty() {
            self.cm.update_max_ts(start_ts);
            let mut batches = Batches::default();
            for (i, other_lock) in to_roll_back {
                put_rollback(
                    batches.get(&snaps, i),
                    snaps.of(i),
                    &keys[i],
                    start_ts,
                    other_lock,
                )?;
            }
            batches.write(self)?;
        }
        Ok(SecondaryLocksStatus {
            all_locked,
            commit_ts: None,
            min_commit_ts,
        })
    }
}
