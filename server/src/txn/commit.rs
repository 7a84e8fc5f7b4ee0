//! Commit: the second phase. Per key, in one batch per shard: the commit record at commit_ts
//! (`WriteMeta{kind, start_ts, commit_ts}`; a Put carries the value from the lock, a Delete is
//! a tombstone, a Lock-type key a Lock record) and the removal of the lock.
//!
//! * our lock, `commit_ts < lock.min_commit_ts` → `CommitTsExpired` (a reader between the two
//!   may have ignored the lock);
//! * no lock of ours: our commit record exists → success (commit is idempotent); a rollback
//!   record or marker → `TxnAlreadyRolledBack`; neither → `TxnLockNotFound`.
//!
//! Nothing is written unless every key passes.

use super::error::{Result, TxnError};
use super::storage::{Batches, Storage, require_keys, unique_keys};
use super::write_records::{TxnRecord, check_commit_ts_free, find_txn_record, put_commit_record};

impl Storage {
    pub fn commit(&self, keys: &[Vec<u8>], start_ts: u64, commit_ts: u64) -> Result<()> {
        require_keys(keys, "commit")?;
        if commit_ts <= start_ts {
            return Err(TxnError::InvalidRequest {
                what: format!(
                    "commit: expected commit_ts > start_ts, found commit_ts={commit_ts} start_ts={start_ts}"
                ),
            });
        }
        let keys = unique_keys(keys);
        let _latches = self.latches.acquire(&keys);
        let snaps = self.snapshots(&keys)?;
        let mut batches = Batches::default();
        for (i, key) in keys.iter().enumerate() {
            let snap = snaps.of(i);
            match snap.lock(key)? {
                Some(lock) if lock.start_ts == start_ts => {
                    if commit_ts < lock.min_commit_ts {
                        return Err(TxnError::CommitTsExpired {
                            key: key.clone(),
                            commit_ts,
                            min_commit_ts: lock.min_commit_ts,
                        });
                    }
                    check_commit_ts_free(snap, key, commit_ts)?;
                    let batch = batches.get(&snaps, i);
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
                _ => match find_txn_record(snap, key, start_ts)? {
                    TxnRecord::Committed { .. } => {}
                    TxnRecord::RolledBack => {
                        return Err(TxnError::TxnAlreadyRolledBack {
                            key: key.clone(),
                            start_ts,
                        });
                    }
                    TxnRecord::Missing => {
                        return Err(TxnError::TxnLockNotFound {
                            key: key.clone(),
                            start_ts,
                        });
                    }
                },
            }
        }
        batches.write(self)
    }
}
