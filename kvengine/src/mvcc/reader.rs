//! Point reads at a start_ts: the lock check and the WRITE-CF walk that skips Lock and
//! Rollback records.

use memtable::ColumnFamily;

use super::records::{Lock, WriteKind, WriteMeta};
use crate::error::{Error, Result};
use crate::snap_access::{Item, RawVersion, SnapAccess};

/// Whether `lock` stops a read at `start_ts` that bypasses the transactions in `bypass`.
pub fn lock_blocks_read(lock: &Lock, start_ts: u64, bypass: &[u64]) -> bool {
    lock.start_ts <= start_ts
        && lock.lock_type.blocks_reads()
        && lock.min_commit_ts <= start_ts
        && !bypass.contains(&lock.start_ts)
}

pub(crate) fn decode_lock(key: &[u8], value: &[u8]) -> Result<Lock> {
    Lock::decode(value).map_err(|source| Error::Record {
        key: key.to_vec(),
        source,
    })
}

pub(crate) fn write_kind(key: &[u8], user_meta: &[u8]) -> Result<WriteKind> {
    WriteMeta::peek_kind(user_meta).map_err(|source| Error::Record {
        key: key.to_vec(),
        source,
    })
}

impl SnapAccess {
    /// Whether any LOCK-CF source of the snapshot may hold a lock: lets the common case (no
    /// transaction in flight) skip the lock lookups entirely.
    ///
    /// Always false on a snapshot rebuilt by [`SnapAccess::from_remote`]: locks are never
    /// shipped (the origin checked them before dispatch), and the LOCK sections of the L0 files
    /// that travel whole are a partial, stale view the worker must not act on.
    pub(crate) fn may_have_locks(&self) -> bool {
        if !self.is_origin {
            return false;
        }
        let d = &*self.data;
        let lock = ColumnFamily::Lock.index();
        d.memtables().any(|m| !m.cf(ColumnFamily::Lock).is_empty())
            || d.l0s.iter().any(|l0| l0.cf(ColumnFamily::Lock).is_some())
            || d.levels[lock].iter().any(|level| !level.is_empty())
    }

    /// The decoded lock on `key` in this snapshot, if any.
    pub fn lock(&self, key: &[u8]) -> Result<Option<Lock>> {
        if !self.may_have_locks() {
            // Still refuse keys outside the shard, as every read does.
            if !self.data.contains_key(key) {
                return Err(Error::KeyNotInShard {
                    shard_id: self.shard_id,
                    key: key.to_vec(),
                });
            }
            return Ok(None);
        }
        match self.get_lock(key)? {
            Some(item) => Ok(Some(decode_lock(key, &item.value)?)),
            None => Ok(None),
        }
    }

    /// Fails with [`Error::KeyIsLocked`] if a lock on `key` blocks a read at `start_ts`.
    /// Returns whether the key has any lock at all (a non-blocking one makes a result
    /// uncacheable).
    pub fn check_lock(&self, key: &[u8], start_ts: u64, bypass: &[u64]) -> Result<bool> {
        match self.lock(key)? {
            Some(lock) if lock_blocks_read(&lock, start_ts, bypass) => Err(Error::KeyIsLocked {
                lock: Box::new(lock.info(key)),
            }),
            Some(_) => Ok(true),
            None => Ok(false),
        }
    }

    /// Checks every lock in `[start, end)` (empty `end` = the shard's end): fails on the
    /// first one that blocks a read at `start_ts`; returns whether any lock was seen.
    pub fn check_locks_in_range(
        &self,
        start: &[u8],
        end: &[u8],
        start_ts: u64,
        bypass: &[u64],
    ) -> Result<bool> {
        if !self.may_have_locks() {
            return Ok(false);
        }
        let mut it = self.iter(ColumnFamily::Lock, start, end, self.snap_version(), false)?;
        let mut any = false;
        while it.valid() {
            let lock = decode_lock(it.key(), it.value())?;
            if lock_blocks_read(&lock, start_ts, bypass) {
                return Err(Error::KeyIsLocked {
                    lock: Box::new(lock.info(it.key())),
                });
            }
            any = true;
            it.next()?;
        }
        Ok(any)
    }

    /// The committed value of `key` a transaction reading at `start_ts` sees, after the lock
    /// check: `None` if the key is absent or deleted.
    pub fn mvcc_get(&self, key: &[u8], start_ts: u64, bypass: &[u64]) -> Result<Option<Item>> {
        self.check_lock(key, start_ts, bypass)?;
        self.committed_value(key, start_ts)
    }

    /// The committed value of `key` at `ts` without a lock check: the first WRITE version
    /// `<= ts` that is not a Lock or Rollback record.
    pub fn committed_value(&self, key: &[u8], ts: u64) -> Result<Option<Item>> {
        let mut ts = ts;
        loop {
            let Some(v) = self.get_raw(ColumnFamily::Write, key, ts)? else {
                return Ok(None);
            };
            if v.tombstone {
                return Ok(None);
            }
            if write_kind(key, &v.user_meta)?.is_skipped_by_reads() {
                if v.version == 0 {
                    return Ok(None);
                }
                ts = v.version - 1;
                continue;
            }
            return Ok(Some(Item {
                version: v.version,
                user_meta: v.user_meta,
                value: v.value,
            }));
        }
    }

    /// Every WRITE version of `key` with a version `>= min_ts`, newest first, tombstones and
    /// skipped kinds included: what a transaction command searches for its own commit or
    /// rollback record.
    pub fn write_versions_since(&self, key: &[u8], min_ts: u64) -> Result<Vec<RawVersion>> {
        let mut out = Vec::new();
        let mut ts = u64::MAX;
        while let Some(v) = self.get_raw(ColumnFamily::Write, key, ts)? {
            if v.version < min_ts {
                break;
            }
            let next = v.version.checked_sub(1);
            out.push(v);
            match next {
                Some(n) => ts = n,
                None => break,
            }
        }
        Ok(out)
    }

    /// The newest WRITE version of `key` (any kind), the version a conflict check compares
    /// with a prewrite's start_ts.
    pub fn newest_write(&self, key: &[u8]) -> Result<Option<RawVersion>> {
        self.get_raw(ColumnFamily::Write, key, u64::MAX)
    }
}
