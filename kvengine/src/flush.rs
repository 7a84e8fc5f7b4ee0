//! Flush: a frozen memtable becomes an L0 file in the object store and a Flush ChangeSet.
//!
//! A flush thread takes the oldest frozen memtable of a queued shard, writes an L0 file from it
//! ([`write_l0`]: one table section per column family) to the object store, opens it,
//! and proposes a Flush ChangeSet (the new L0 file and `data_sequence` = the memtable's last
//! sequence) through the one apply path (`apply`): the derived state holds the new L0 file and
//! no longer the frozen memtable, whose writes `data_sequence` now covers. Then WAL segments
//! that every shard has flushed past are purged.
//!
//! A failed flush changes nothing: the frozen memtable and its WAL records stay, and the flush
//! is retried with backoff.
//!
//! With a log outside the engine (`LogMode::External`) only the shard's leader flushes: the
//! Flush ChangeSet goes to the owner's sink (`change_set_sink`), and the frozen memtable
//! leaves when the log delivers the entry, on every replica alike. Memtables are frozen only
//! by Freeze entries (`apply_at_index`), so every replica freezes at the same index and the
//! Flush entry drops the same memtable everywhere. [`Engine::flush_shard`] on the leader
//! proposes a Freeze and waits for the flushes to be applied.
//!
//! In the L0 file, WRITE and EXTRA keep every version (the GC of old versions is compaction's
//! job); LOCK keeps only each key's newest record, tombstone or not (a tombstone must still
//! hide a lock in an older L0 file).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use changeset::{Change, Flush, L0Create};
use memtable::{ColumnFamily, Memtable};
use sst::{BuilderOptions, TableBuilder};
use types::FileId;

use crate::apply::{self, ApplyOutcome};
use crate::apply_at_index::request_freeze;
use crate::engine::{Engine, Inner};
use crate::error::{Error, Result};
use crate::metrics;
use crate::options::LogMode;
use crate::shard_data::OpenTables;
use crate::write_path::freeze_locked;

impl Engine {
    /// Freezes the shard's active memtable (if not empty) and waits until every frozen memtable
    /// of the shard is flushed.
    ///
    /// In `External` log mode only the shard's leader flushes ([`Error::NotLeader`] elsewhere):
    /// it proposes a Freeze and waits until every write applied before the call is in a file,
    /// at most `external_flush_timeout` ([`Error::Timeout`]: the log did not deliver).
    pub fn flush_shard(&self, shard_id: u64) -> Result<()> {
        self.check_open()?;
        if self.inner.log_mode() == LogMode::External {
            return self.flush_shard_through_log(shard_id);
        }
        let shard = self.shard(shard_id)?;
        {
            let _w = shard.write.lock();
            let seq = shard.write_sequence.load(Ordering::Relaxed);
            freeze_locked(&self.inner, &shard, seq);
        }
        let mut g = self.inner.flushed.lock();
        while !shard.data.load().frozen.is_empty() {
            self.check_open()?;
            self.inner
                .flushed_cv
                .wait_for(&mut g, Duration::from_millis(50));
        }
        Ok(())
    }
}

impl Engine {
    fn flush_shard_through_log(&self, shard_id: u64) -> Result<()> {
        let op = "flush_shard";
        let not_leader = || Error::NotLeader { shard_id, op };
        if !self.inner.is_leader(shard_id) {
            return Err(not_leader());
        }
        self.inner.change_set_sink(shard_id)?;
        let target = self.shard(shard_id)?.write_sequence.load(Ordering::Acquire);
        let started = Instant::now();
        loop {
            self.check_open()?;
            if !self.inner.is_leader(shard_id) {
                return Err(not_leader());
            }
            // Looked up each round: a split replaces the shard (the left child keeps the id).
            let shard = self.shard(shard_id)?;
            {
                let d = shard.data.load();
                // Writes up to `target` are in files once a flush covers it; with no memtable
                // left, nothing applied before the call is outside a file either.
                if d.data_sequence() >= target || (d.mem.is_empty() && d.frozen.is_empty()) {
                    return Ok(());
                }
                if d.frozen.is_empty() {
                    request_freeze(&self.inner, &shard, true);
                }
            }
            let waited = started.elapsed();
            if waited >= self.inner.opts.external_flush_timeout {
                return Err(Error::Timeout {
                    op,
                    shard_id,
                    waited_ms: waited.as_millis() as u64,
                });
            }
            let mut g = self.inner.flushed.lock();
            self.inner
                .flushed_cv
                .wait_for(&mut g, Duration::from_millis(20));
        }
    }
}

/// A flush thread: takes queued shards and flushes their oldest frozen memtable, retrying a
/// failed flush with backoff until it succeeds or the engine closes.
pub(crate) fn flush_loop(inner: &Arc<Inner>) {
    loop {
        let shard_id = {
            let mut q = inner.queue.lock();
            loop {
                if inner.is_closed() {
                    return;
                }
                if let Some(id) = q.pop_front() {
                    break id;
                }
                inner.queue_cv.wait_for(&mut q, Duration::from_millis(200));
            }
        };
        let mut attempt = 0u32;
        loop {
            match flush_one(inner, shard_id) {
                Ok(()) => {
                    // One queue entry flushes one memtable; WAL replay can freeze several
                    // without queueing each, so requeue while any is left.
                    let more = inner.runs_jobs(shard_id)
                        && inner
                            .shards
                            .read()
                            .get(&shard_id)
                            .is_some_and(|s| !s.data.load().frozen.is_empty());
                    if more {
                        inner.queue.lock().push_back(shard_id);
                    }
                    break;
                }
                Err(e) => {
                    // The frozen memtable and its WAL records stay; retry with backoff.
                    attempt += 1;
                    tracing::warn!(shard_id, attempt, error = %e, "flush failed, retrying");
                    if inner.is_closed() {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(50 * u64::from(attempt.min(20))));
                }
            }
        }
        inner.notify_flushed();
    }
}

/// Flushes the oldest frozen memtable of a shard (if any, and if this engine flushes the
/// shard: not a follower of an external log).
fn flush_one(inner: &Inner, shard_id: u64) -> Result<()> {
    if !inner.runs_jobs(shard_id) {
        return Ok(());
    }
    let Some(shard) = inner.shards.read().get(&shard_id).cloned() else {
        return Ok(());
    };
    let _f = shard.flushing.lock();
    let data = shard.data.load_full();
    let Some(frozen) = data.frozen.last().cloned() else {
        return Ok(());
    };
    let opts = BuilderOptions {
        block_size: inner.opts.block_size,
        compression: inner.opts.l0_compression,
        filter_bits_per_key: 10,
        format_version: inner.opts.table_format_version,
    };
    let mut outputs = OpenTables::default();
    let empty = ColumnFamily::ALL
        .iter()
        .all(|&cf| frozen.mem.cf(cf).is_empty());
    let l0_create = if empty {
        None
    } else {
        let id = inner.ids.next()?;
        let mut bounds = None;
        // Streamed: the store's local file (or, for S3, its upload buffer) receives the table
        // as it is built, a block run at a time.
        let size = inner.dfs.put_with(id, &mut |w| {
            bounds = write_l0(id, &frozen.mem, &opts, w)?;
            Ok(())
        })?;
        match bounds {
            Some((smallest, biggest)) => {
                metrics::FLUSH_BYTES.inc_by(size);
                outputs.add_l0(inner.table_source().open_l0(id.get())?);
                Some(L0Create {
                    id: id.get(),
                    smallest: Bytes::from(smallest),
                    biggest: Bytes::from(biggest),
                    size,
                })
            }
            // Every table was empty after all: nothing to keep.
            None => {
                inner.dfs.delete(id)?;
                None
            }
        }
    };
    let change = Change::Flush(Flush {
        l0_create,
        data_sequence: frozen.last_sequence,
        version: frozen.mem.version(),
    });
    if apply::submit(inner, &shard, &data, change, outputs)? == ApplyOutcome::Applied {
        metrics::FLUSHES.inc();
    }
    let Some(wal) = &inner.wal else {
        return Ok(());
    };
    let shards = inner.shards.read();
    // A shard that no longer exists was retired by a split after a full flush: covered.
    let covered = |sid: u64| {
        shards
            .get(&sid)
            .map_or(u64::MAX, |s| s.data.load().data_sequence())
    };
    if let Err(e) = wal.purge(&covered) {
        tracing::warn!(error = %e, "wal purge failed");
    }
    Ok(())
}

/// The smallest and the biggest key of an L0 file.
pub type KeyBounds = (Vec<u8>, Vec<u8>);

/// Finished main blocks a section builder keeps before handing them to the writer.
const SPILL_AT: usize = 1 << 20;

/// Writes `mem` to `w` as L0 file `file_id` (`sst/src/l0.rs`): each column family's section as
/// it is built (a MiB of blocks at a time), then the footer. Returns the file's smallest and
/// biggest key, or `None` when the memtable holds nothing (nothing is written then but the
/// footer). A write `w` refuses is an [`Error::Dfs`] put of `file_id`.
pub fn write_l0(
    file_id: FileId,
    mem: &Memtable,
    opts: &BuilderOptions,
    w: &mut dyn std::io::Write,
) -> Result<Option<KeyBounds>> {
    let io = |source| Error::Dfs {
        op: "put",
        file_id,
        source,
    };
    let mut handles = [(0u64, 0u64); ColumnFamily::COUNT];
    let mut written = 0u64;
    let mut smallest: Option<Vec<u8>> = None;
    let mut biggest: Option<Vec<u8>> = None;
    for cf in ColumnFamily::ALL {
        let table = mem.cf(cf);
        if table.is_empty() {
            continue;
        }
        let mut b = TableBuilder::new(opts.clone())?;
        for kv in table.iter_all() {
            for v in kv.versions() {
                b.add(
                    kv.key(),
                    v.version(),
                    v.user_meta(),
                    v.value(),
                    v.is_tombstone(),
                )?;
                if cf == ColumnFamily::Lock {
                    break;
                }
            }
            if b.buffered() >= SPILL_AT {
                b.spill(w).map_err(io)?;
            }
        }
        if b.is_empty() {
            continue;
        }
        let built = b.finish();
        w.write_all(&built.data).map_err(io)?;
        handles[cf.index()] = (written, built.len());
        written += built.len();
        let p = &built.properties;
        if smallest.as_ref().is_none_or(|s| p.smallest < *s) {
            smallest = Some(p.smallest.clone());
        }
        if biggest.as_ref().is_none_or(|s| p.biggest > *s) {
            biggest = Some(p.biggest.clone());
        }
    }
    w.write_all(&sst::l0_footer(&handles)).map_err(io)?;
    Ok(smallest.zip(biggest))
}
