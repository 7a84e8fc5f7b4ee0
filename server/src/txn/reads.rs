//! Snapshot reads at a start_ts: memory locks first (which raises `max_ts` to start_ts, see
//! [`crate::concurrency_manager`]), then the engine snapshot and its MVCC read, which checks
//! the LOCK CF and skips Lock and Rollback records.
//!
//! The order matters: a snapshot taken before the memory-lock check could miss a 1PC or
//! async-commit write that lands between the two with a commit_ts at or below start_ts.

use super::error::{Result, TxnError};
use super::storage::Storage;

/// One key of a scan result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvEntry {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    /// The commit_ts of the version read.
    pub commit_ts: u64,
}

impl Storage {
    /// The value of `key` committed at or before `start_ts`, or `None` (absent or deleted).
    /// Fails with `KeyIsLocked` if a transaction that may commit at or below start_ts holds a
    /// lock on the key (unless its start_ts is in `bypass`).
    pub fn get(&self, key: &[u8], start_ts: u64, bypass: &[u64]) -> Result<Option<KvEntry>> {
        self.cm
            .check_key(key, start_ts, bypass)
            .map_err(TxnError::KeyIsLocked)?;
        // The barrier goes to the region the snapshot is taken from: a split may move the key
        // to another region between the lookup and the snapshot, then the barrier is taken
        // again there (once).
        let mut barrier_on = self.shard_for_key(key)?;
        if let Err(e) = self.read_barrier(barrier_on) {
            // A map made before a split this replica applied may name the left child for a
            // key of the right one (see `Storage::snapshots`): look again once.
            if !matches!(e, raftstore::RaftStoreError::NotLeader { .. }) {
                return Err(e.into());
            }
            self.refresh_shards_if_changed()?;
            let again = self.shard_for_key(key)?;
            if again == barrier_on {
                return Err(e.into());
            }
            barrier_on = again;
            self.read_barrier(barrier_on)?;
        }
        let mut snaps = self.snapshots(&[key])?;
        if snaps.shard(0) != barrier_on {
            barrier_on = snaps.shard(0);
            self.read_barrier(barrier_on)?;
            snaps = self.snapshots(&[key])?;
            if snaps.shard(0) != barrier_on {
                return Err(TxnError::InvalidRequest {
                    what: "the key's region changed twice while the read waited; retry".into(),
                });
            }
        }
        self.check_gc_safe_point(start_ts)?;
        Ok(snaps
            .of(0)
            .mvcc_get(key, start_ts, bypass)?
            .map(|item| KvEntry {
                key: key.to_vec(),
                value: item.value.to_vec(),
                commit_ts: item.version,
            }))
    }

    /// Up to `limit` (0 = no limit) keys of `[start, end)` (empty end = unbounded) at
    /// `start_ts`, ascending or, with `reverse`, descending. Fails with `KeyIsLocked` on the
    /// first blocking lock in the range.
    pub fn scan(
        &self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        start_ts: u64,
        reverse: bool,
    ) -> Result<Vec<KvEntry>> {
        self.cm
            .check_memory_locks(&[(start, end)], start_ts, &[])
            .map_err(TxnError::KeyIsLocked)?;
        let mut shards = self.shards_in_range(start, end)?;
        if reverse {
            shards.reverse();
        }
        let mut out = Vec::new();
        for shard in shards {
            let snap = self.snapshot(shard.id)?;
            self.check_gc_safe_point(start_ts)?;
            let mut scanner = snap.mvcc_scan(start, end, start_ts, reverse, &[])?;
            while scanner.valid() {
                if limit != 0 && out.len() >= limit {
                    return Ok(out);
                }
                out.push(KvEntry {
                    key: scanner.key().to_vec(),
                    value: scanner.value().to_vec(),
                    commit_ts: scanner.commit_ts(),
                });
                scanner.next()?;
            }
        }
        Ok(out)
    }
}
