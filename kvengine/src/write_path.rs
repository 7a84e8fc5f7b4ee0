//! The write path: a batch gets the next sequence of its shard, is appended to the WAL
//! (durable per the sync policy), applied to the active memtable, and only then acknowledged.
//!
//! The shard's write lock covers exactly that; writers of different shards share only the WAL
//! append (and, with group commit, an fsync). A memtable over the size threshold is frozen
//! (its version = the SnapVersion at that moment) and queued for the flush threads; if frozen
//! memtables pile up past the limit, writers stall until a flush finishes.
//!
//! Nothing here touches a shard's file list: a write only ever adds to memtables.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use memtable::{ColumnFamily, Memtable};

use crate::engine::{Engine, Inner};
use crate::error::{Error, Result};
use crate::metrics;
use crate::shard::Shard;
use crate::shard_data::{FrozenMem, ShardData};
use crate::wal::Durability;
use crate::write_batch::WriteBatch;

impl Engine {
    /// Applies `batch` to shard `shard_id` durably (as the engine's `wal-sync` policy says);
    /// returns its sequence.
    ///
    /// `Internal` log mode only: with an external log, writes arrive as log entries through
    /// [`Engine::apply_write`] ([`Error::WrongLogMode`] here).
    pub fn write(&self, shard_id: u64, batch: &WriteBatch) -> Result<u64> {
        self.write_with(shard_id, batch, Durability::Policy)
    }

    /// [`Engine::write`], as durable as `durability` asks for this batch alone (an fsync for
    /// one batch and not the next, whatever the engine's policy).
    pub fn write_with(
        &self,
        shard_id: u64,
        batch: &WriteBatch,
        durability: Durability,
    ) -> Result<u64> {
        let wal = self.inner.own_wal("write")?;
        self.check_open()?;
        let shard = self.shard(shard_id)?;
        {
            let data = shard.data.load();
            if let Some(op) = batch.ops().find(|op| !data.contains_key(op.key)) {
                return Err(Error::KeyNotInShard {
                    shard_id,
                    key: op.key.to_vec(),
                });
            }
        }
        self.wait_for_flush_room(&shard)?;
        let payload = batch.as_bytes();
        let _w = shard.write.lock();
        if shard.splitting.load(Ordering::Acquire) {
            return Err(Error::ShardBusy {
                shard_id,
                reason: "splitting",
            });
        }
        let seq = shard.write_sequence.load(Ordering::Relaxed) + 1;
        if let Err(e) = wal.append_with(shard_id, seq, payload, durability) {
            // The WAL's state is unknown: refuse every later write rather than risk a gap.
            *self.inner.failure.lock() = Some(format!("wal append failed: {e}"));
            return Err(e);
        }
        let data = shard.data.load_full();
        apply_batch(&data.mem, batch, data.base_version() + seq);
        shard.write_sequence.store(seq, Ordering::Release);
        metrics::WRITES.inc();
        metrics::WRITE_BYTES.inc_by(payload.len() as u64);
        if data.mem.size() >= self.inner.opts.memtable_size {
            freeze_locked(&self.inner, &shard, seq);
        }
        Ok(seq)
    }

    /// Waits while the shard's frozen-memtable queue is full.
    fn wait_for_flush_room(&self, shard: &Shard) -> Result<()> {
        let limit = self.inner.opts.max_frozen_memtables;
        if shard.data.load().frozen.len() < limit {
            return Ok(());
        }
        metrics::STALLS.inc();
        let mut g = self.inner.flushed.lock();
        while shard.data.load().frozen.len() >= limit {
            self.check_open()?;
            self.inner
                .flushed_cv
                .wait_for(&mut g, Duration::from_millis(100));
        }
        Ok(())
    }
}

/// Freezes the active memtable (if not empty) and queues the shard for a flush when this engine
/// flushes it (not on a follower of an external log). Caller holds the shard's write lock;
/// `seq` is the shard's write sequence (with an external log, the Freeze entry's index).
/// Returns whether a memtable was frozen.
pub(crate) fn freeze_locked(inner: &Inner, shard: &Shard, seq: u64) -> bool {
    let cur = shard.data.load_full();
    if cur.mem.is_empty() {
        return false;
    }
    shard.data.store(Arc::new(frozen_state(&cur, seq)));
    // Later records go to a new segment, so this memtable's segment can be purged after its
    // flush. A failed roll only delays the purge.
    if let Some(wal) = &inner.wal
        && let Err(e) = wal.roll()
    {
        tracing::warn!(error = %e, "wal roll failed");
    }
    if inner.runs_jobs(shard.id) {
        queue_flush(inner, shard.id);
    }
    true
}

/// Hands the shard to the flush threads.
pub(crate) fn queue_flush(inner: &Inner, shard_id: u64) {
    inner.queue.lock().push_back(shard_id);
    inner.queue_cv.notify_one();
}

/// The state after freezing `cur`'s active memtable, whose last write has sequence `seq`: the
/// memtable's version becomes the SnapVersion at that moment (the version of the L0 file it
/// will become) and a new empty memtable takes writes.
pub(crate) fn frozen_state(cur: &ShardData, seq: u64) -> ShardData {
    cur.mem.set_version(cur.base_version() + seq);
    let mut next = cur.clone();
    next.frozen.insert(
        0,
        FrozenMem {
            mem: cur.mem.clone(),
            last_sequence: seq,
        },
    );
    next.mem = Arc::new(Memtable::new());
    next
}

/// Applies a batch to a memtable. LOCK-CF ops get `snap_version`; if a batch writes one lock
/// key twice, the last op wins (the earlier ones are skipped: with one version per batch, the
/// memtable would keep the first).
///
/// Ops apply in batch order. Which lock ops are superseded is found with one map from lock key
/// to its last op, built only when the batch has two lock ops or more: a prewrite of n keys is
/// O(n), not the O(n²) of looking ahead from every lock op.
pub(crate) fn apply_batch(mem: &Memtable, batch: &WriteBatch, snap_version: u64) {
    let mut locks = batch.ops().filter(|o| o.cf == ColumnFamily::Lock);
    let last_lock: Option<HashMap<&[u8], usize>> = match (locks.next(), locks.next()) {
        (Some(_), Some(_)) => Some(
            batch
                .ops()
                .enumerate()
                .filter(|(_, o)| o.cf == ColumnFamily::Lock)
                .map(|(i, o)| (o.key, i))
                .collect(),
        ),
        _ => None,
    };
    for (i, op) in batch.ops().enumerate() {
        let version = if op.cf == ColumnFamily::Lock {
            if last_lock.as_ref().is_some_and(|last| last[op.key] != i) {
                continue;
            }
            snap_version
        } else {
            op.version
        };
        match op.value {
            Some(v) => mem.put(op.cf, op.key, version, op.user_meta, v),
            None => mem.delete(op.cf, op.key, version, op.user_meta),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_op_on_a_lock_key_in_a_batch_wins() {
        let mut b = WriteBatch::new();
        b.put_lock(b"a", b"first");
        b.put_lock(b"b", b"only");
        b.put(ColumnFamily::Write, b"a", 5, b"", b"row");
        b.put_lock(b"a", b"second");
        b.put_lock(b"c", b"gone");
        b.delete_lock(b"c");
        let mem = Memtable::new();
        apply_batch(&mem, &b, 9);
        let locks = mem.cf(ColumnFamily::Lock);
        let newest = |k: &[u8]| {
            locks
                .get_newest(k)
                .map(|v| (v.version(), v.is_tombstone(), v.value().to_vec()))
        };
        assert_eq!(newest(b"a"), Some((9, false, b"second".to_vec())));
        assert_eq!(newest(b"b"), Some((9, false, b"only".to_vec())));
        assert_eq!(
            newest(b"c").map(|v| v.1),
            Some(true),
            "the delete came last"
        );
        let write = mem.cf(ColumnFamily::Write).get_newest(b"a").unwrap();
        assert_eq!((write.version(), write.value()), (5, &b"row"[..]));
    }

    #[test]
    fn a_batch_with_one_lock_applies_it() {
        let mut b = WriteBatch::new();
        b.put(ColumnFamily::Write, b"k", 3, b"", b"v");
        b.put_lock(b"k", b"lock");
        let mem = Memtable::new();
        apply_batch(&mem, &b, 4);
        let lock = mem.cf(ColumnFamily::Lock).get_newest(b"k").unwrap();
        assert_eq!((lock.version(), lock.value()), (4, &b"lock"[..]));
    }
}
