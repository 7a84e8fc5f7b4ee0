//! Rollback and lock resolution.
//!
//! Rollback of `start_ts` on a key removes our lock if present and leaves a rollback trace
//! (WRITE record or EXTRA marker, see [`super::rollback_marker`]) so a late prewrite fails and
//! a commit reports "rolled back". A key already rolled back is left alone; a key with our
//! commit record fails the whole call with `TxnAlreadyCommitted`.
//!
//! Every rollback raises `max_ts` to the rolled-back start_ts. The transaction that holds a
//! lock on a key where a marker went to EXTRA may still commit at a commit_ts equal to that
//! start_ts; that is harmless (different CFs), and raising `max_ts` keeps later 1PC and
//! async-commit timestamps of this server above every timestamp it has rolled back.
//!
//! `resolve_lock` is what a resolver runs once it knows a transaction's fate: commit
//! (`commit_ts > 0`) or roll back (`commit_ts == 0`) each of the given keys that still holds
//! that transaction's lock; keys without it are skipped (resolved already).

use kvengine::ColumnFamily;
use kvengine::mvcc::{Lock, LockInfo};

use super::error::{Result, TxnError};
use super::rollback_marker::put_rollback;
use super::storage::{Batches, Storage, require_keys, unique_keys};
use super::write_records::{TxnRecord, check_commit_ts_free, find_txn_record, put_commit_record};

impl Storage {
    pub fn rollback(&self, keys: &[Vec<u8>], start_ts: u64) -> Result<()> {
        require_keys(keys, "rollback")?;
        let keys = unique_keys(keys);
        let _latches = self.latches.acquire(&keys);
        self.cm.update_max_ts(start_ts);
        let snaps = self.snapshots(&keys)?;
        let mut batches = Batches::default();
        for (i, key) in keys.iter().enumerate() {
            let snap = snaps.of(i);
            let lock = snap.lock(key)?;
            if lock.as_ref().is_some_and(|l| l.start_ts == start_ts) {
                let batch = batches.get(&snaps, i);
                batch.delete_lock(key);
                put_rollback(batch, snap, key, start_ts, false)?;
                continue;
            }
            match find_txn_record(snap, key, start_ts)? {
                TxnRecord::Committed { commit_ts, .. } => {
                    return Err(TxnError::TxnAlreadyCommitted {
                        key: key.clone(),
                        start_ts,
                        commit_ts,
                    });
                }
                TxnRecord::RolledBack => {}
                TxnRecord::Missing => {
                    put_rollback(batches.get(&snaps, i), snap, key, start_ts, lock.is_some())?;
                }
            }
        }
        batches.write(self)
    }

    /// Commits (`commit_ts > 0`) or rolls back (`commit_ts == 0`) the locks of transaction
    /// `start_ts` on `keys`; returns how many locks it resolved.
    pub fn resolve_lock(&self, start_ts: u64, commit_ts: u64, keys: &[Vec<u8>]) -> Result<usize> {
        if keys.is_empty() {
            return Ok(0);
        }
        if commit_ts != 0 && commit_ts <= start_ts {
            return Err(TxnError::InvalidRequest {
                what: format!(
                    "resolve_lock: expected commit_ts 0 or > start_ts, found commit_ts={commit_ts} start_ts={start_ts}"
                ),
            });
        }
        let keys = unique_keys(keys);
        let _latches = self.latches.acquire(&keys);
        if commit_ts == 0 {
            self.cm.update_max_ts(start_ts);
        }
        let snaps = self.snapshots(&keys)?;
        let mut batches = Batches::default();
        let mut resolved = 0;
        for (i, key) in keys.iter().enumerate() {
            let snap = snaps.of(i);
            let Some(lock) = snap.lock(key)?.filter(|l| l.start_ts == start_ts) else {
                continue;
            };
            let batch = batches.get(&snaps, i);
            if commit_ts == 0 {
                batch.delete_lock(key);
                put_rollback(batch, snap, key, start_ts, false)?;
            } else {
                if commit_ts < lock.min_commit_ts {
                    return Err(TxnError::CommitTsExpired {
                        key: key.clone(),
                        commit_ts,
                        min_commit_ts: lock.min_commit_ts,
                    });
                }
                check_commit_ts_free(snap, key, commit_ts)?;
                put_commit_record(
                    batch,
                    key,
                    lock.lock_type,
                    lock.value.as_deref().unwrap_or_default(),
                    start_ts,
                    commit_ts,
                );
                batch.delete_lock(key);
            }
            resolved += 1;
        }
        batches.write(self)?;
        Ok(resolved)
    }

    /// [`Storage::resolve_lock`] on every lock of transaction `start_ts` in `[start, end)`
    /// (empty end = unbounded).
    pub fn resolve_lock_in_range(
        &self,
        start: &[u8],
        end: &[u8],
        start_ts: u64,
        commit_ts: u64,
    ) -> Result<usize> {
        let keys: Vec<Vec<u8>> = self
            .scan_full_locks(start, end, start_ts, 0)?
            .into_iter()
            .filter(|(_, l)| l.start_ts == start_ts)
            .map(|(k, _)| k)
            .collect();
        self.resolve_lock(start_ts, commit_ts, &keys)
    }

    /// Locks in `[start, end)` (empty end = unbounded) with `start_ts <= max_ts`, in key order,
    /// at most `limit` of them (0 = no limit).
    pub fn scan_locks(
        &self,
        start: &[u8],
        end: &[u8],
        max_ts: u64,
        limit: usize,
    ) -> Result<Vec<LockInfo>> {
        Ok(self
            .scan_full_locks(start, end, max_ts, limit)?
            .into_iter()
            .map(|(k, l)| l.info(&k))
            .collect())
    }

    /// The smallest start_ts of the locks in every region held here, led or not (`None`: no
    /// lock). The placement driver keeps the GC safe point below it (`pd::gc`). It reads the
    /// LOCK CF, which holds only transactions in flight.
    pub fn oldest_lock_ts(&self) -> Result<Option<u64>> {
        let mut oldest: Option<u64> = None;
        for id in self.engine.shard_ids() {
            let snap = match self.engine.snapshot(id) {
                Ok(s) => s,
                // Destroyed or split since the listing: its locks are elsewhere now.
                Err(kvengine::Error::ShardNotFound { .. }) => continue,
                Err(e) => return Err(e.into()),
            };
            each_lock(&snap, b"", b"", |_, lock| {
                oldest = Some(oldest.map_or(lock.start_ts, |o| o.min(lock.start_ts)));
                true
            })?;
        }
        Ok(oldest)
    }

    /// Like [`Storage::scan_locks`], with the whole lock records (values, secondaries).
    pub fn scan_full_locks(
        &self,
        start: &[u8],
        end: &[u8],
        max_ts: u64,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Lock)>> {
        let mut out = Vec::new();
        for shard in self.shards_in_range(start, end)? {
            let snap = self.snapshot(shard.id)?;
            let full = !each_lock(&snap, start, end, |key, lock| {
                if lock.start_ts <= max_ts {
                    out.push((key.to_vec(), lock));
                }
                limit == 0 || out.len() < limit
            })?;
            if full {
                return Ok(out);
            }
        }
        Ok(out)
    }
}

/// Calls `f` with every lock of `snap` in `[start, end)` (empty end = unbounded), in key order,
/// until it returns false; whether it went through all of them. A record that does not decode
/// fails with its key.
fn each_lock(
    snap: &kvengine::SnapAccess,
    start: &[u8],
    end: &[u8],
    mut f: impl FnMut(&[u8], Lock) -> bool,
) -> Result<bool> {
    let mut it = snap.iter(ColumnFamily::Lock, start, end, snap.snap_version(), false)?;
    while it.valid() {
        let lock = Lock::decode(it.value()).map_err(|source| {
            TxnError::Engine(kvengine::Error::Record {
                key: it.key().to_vec(),
                source,
            })
        })?;
        if !f(it.key(), lock) {
            return Ok(false);
        }
        it.next()?;
    }
    Ok(true)
}
