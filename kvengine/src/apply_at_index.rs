//! Applying the entries of a log kept outside the engine (`LogMode::External`, a Raft group):
//! every entry point takes the entry's log index.
//!
//! **The index is the write sequence.** Each applied entry, of any kind (a write, a no-op, a
//! Freeze, a ChangeSet, a split, even one rejected at apply), sets the shard's
//! `write_sequence` to its index. Replicas that applied the same prefix of the log therefore
//! have the same SnapVersion (`base_version + index`), the same LOCK-CF versions (a write's
//! locks get `base_version + index`, as the engine's own write path gives them its sequence),
//! and the same memtable boundaries, because memtables freeze only at Freeze entries.
//!
//! **Order.** An index at or below `write_sequence` was applied before: nothing changes (a
//! replay is idempotent). An index above `write_sequence + 1` is a gap ([`Error::LogGap`]):
//! nothing changes. Each entry point holds the shard's `meta` then `write` lock, so one shard's
//! entries apply one at a time.
//!
//! **Decided at apply.** Whatever an entry does depends only on the shard's state at its index,
//! which is the same on every replica: a ChangeSet made for an older shard version (a split
//! came between) or a Flush of a memtable that is not the oldest frozen one (an earlier Flush
//! of it was applied) is rejected ([`ApplyOutcome::Rejected`]); a compaction whose inputs are
//! gone is conflicted (`changeset::ShardFiles::apply`); a split is decided in `split`.
//!
//! **Restart.** Recovery restores `write_sequence = data_sequence` with empty memtables, and
//! the owner re-applies the entries above it: writes and Freezes rebuild the memtables as they
//! were, and an entry whose ChangeSet the manifest already holds (`index <= meta_seq`) is
//! skipped, because its effect on the files is on disk. The state at each index is then the
//! one the engine had before the restart, so every decision above comes out the same again.
//!
//! **Freezes come from the leader.** An apply never freezes because a memtable is full: on the
//! shard's leader ([`Engine::set_leader`]), a write that brings the active memtable to
//! `memtable_size` asks the log for a Freeze entry ([`request_freeze`], once per memtable), and
//! every replica freezes when it applies it. An apply never waits for a flush either: the
//! flush needs this same apply thread to deliver its ChangeSet. Back-pressure on a full
//! frozen-memtable queue is the proposer's job (`ShardInfo::frozen_memtables`).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use changeset::{Change, ChangeSet};

use crate::apply::{ApplyOutcome, apply_locked};
use crate::change_set_sink::ChangeSetSink;
use crate::engine::{Engine, Inner};
use crate::error::{Error, Result};
use crate::metrics;
use crate::options::LogMode;
use crate::shard::Shard;
use crate::shard_data::{OpenTables, ShardData};
use crate::write_batch::WriteBatch;
use crate::write_path::{apply_batch, freeze_locked, queue_flush};

/// Where an entry stands against the shard's applied index.
pub(crate) enum Position {
    /// At or below `write_sequence`: applied before.
    Applied,
    /// `write_sequence + 1`.
    Next,
}

impl Engine {
    /// Applies the log entry `index` of shard `shard_id`, a write batch, to its active memtable.
    /// LOCK-CF records get the version `base_version + index`.
    ///
    /// A key outside the shard's range is [`Error::KeyNotInShard`] and nothing changes; the
    /// owner decides what the entry becomes (answering the proposer, it applies the index as a
    /// no-op). Errors on an `Internal` mode engine ([`Error::WrongLogMode`]).
    pub fn apply_write(&self, shard_id: u64, index: u64, batch: &WriteBatch) -> Result<()> {
        let shard = self.entry_shard("apply_write", shard_id)?;
        {
            let _m = shard.meta.lock();
            let _w = shard.write.lock();
            if let Position::Applied = position(&shard, index)? {
                return Ok(());
            }
            let data = shard.data.load_full();
            if let Some(op) = batch.ops().find(|op| !data.contains_key(op.key)) {
                return Err(Error::KeyNotInShard {
                    shard_id,
                    key: op.key.to_vec(),
                });
            }
            apply_batch(&data.mem, batch, data.base_version() + index);
            shard.write_sequence.store(index, Ordering::Release);
            metrics::WRITES.inc();
            metrics::WRITE_BYTES.inc_by(batch.size() as u64);
        }
        request_freeze(&self.inner, &shard, false);
        Ok(())
    }

    /// Applies an entry that changes no data (an empty entry of a new leader, a configuration
    /// change, a proposal the owner rejected): only `write_sequence` moves to `index`.
    pub fn apply_noop(&self, shard_id: u64, index: u64) -> Result<()> {
        let shard = self.entry_shard("apply_noop", shard_id)?;
        let _m = shard.meta.lock();
        let _w = shard.write.lock();
        if let Position::Next = position(&shard, index)? {
            shard.write_sequence.store(index, Ordering::Release);
        }
        Ok(())
    }

    /// Applies a Freeze entry: the active memtable, if not empty, becomes a frozen one whose
    /// `last_sequence` is `index` (a Flush of it later raises `data_sequence` to `index`), and
    /// the leader queues it for its flush thread.
    pub fn apply_freeze(&self, shard_id: u64, index: u64) -> Result<()> {
        let shard = self.entry_shard("apply_freeze", shard_id)?;
        let _m = shard.meta.lock();
        let _w = shard.write.lock();
        if let Position::Applied = position(&shard, index)? {
            return Ok(());
        }
        if freeze_locked(&self.inner, &shard, index) {
            shard.freeze_proposed_at.store(0, Ordering::Release);
        }
        shard.write_sequence.store(index, Ordering::Release);
        Ok(())
    }

    /// Applies a ChangeSet entry (a leader's flush or compaction result, an ingest) through the
    /// one apply path (`apply`), with the entry's `index` as its sequence: it becomes the
    /// shard's `meta_seq`, and a later apply of the same entry is skipped.
    ///
    /// Outcomes: `Applied`; `Conflicted` (a compaction whose inputs are gone); `Rejected` (made
    /// for an older shard version, or a Flush of a memtable that is not the oldest frozen one);
    /// `Skipped` (applied before). The write sequence is `index` after each. A Split is not
    /// taken here ([`Error::InvalidArgument`]): it is decided at apply by
    /// [`Engine::apply_split`].
    ///
    /// Errors: as [`Engine::apply_change_set`]; on any error nothing changed.
    pub fn apply_change_set_at(&self, index: u64, cs: &ChangeSet) -> Result<ApplyOutcome> {
        let shard = self.entry_shard("apply_change_set_at", cs.shard_id)?;
        if let Some(Change::Split(_)) = cs.change {
            return Err(Error::InvalidArgument {
                what: format!(
                    "a split entry is applied with apply_split: shard_id={} index={index}",
                    cs.shard_id
                ),
            });
        }
        let meta = shard.meta.lock();
        if let Position::Applied = position(&shard, index)? {
            return Ok(ApplyOutcome::Skipped);
        }
        let cur = shard.data.load_full();
        let outcome = if index <= cur.meta_seq() {
            // Re-applied after a restart: the manifest holds this entry's effect already.
            ApplyOutcome::Skipped
        } else if let Some(reason) = stale_reason(&cur, cs) {
            ApplyOutcome::Rejected { reason }
        } else {
            let mut stamped = cs.clone();
            stamped.sequence = index;
            apply_locked(&self.inner, &shard, &meta, &stamped, OpenTables::default())?
        };
        advance(&shard, index);
        if matches!(
            outcome,
            ApplyOutcome::Conflicted | ApplyOutcome::Rejected { .. }
        ) {
            doom_created_files(&self.inner, cs);
        }
        Ok(outcome)
    }

    /// Marks whether this engine leads shard `shard_id` (`External` log mode; no effect with
    /// the engine's own log). Only a leader flushes and compacts, proposes Freezes and deletes
    /// the files its applies retire. On becoming leader, frozen memtables go to the flush
    /// threads and a full active memtable gets its Freeze proposed.
    ///
    /// Kept by id: the left child of a split keeps the parent's id and stays led; the right
    /// child is a new group, led once its owner says so.
    pub fn set_leader(&self, shard_id: u64, leader: bool) {
        if !leader {
            self.inner.leaders.write().remove(&shard_id);
            return;
        }
        self.inner.leaders.write().insert(shard_id);
        if let Ok(shard) = self.shard(shard_id) {
            {
                let _w = shard.write.lock();
                // A Freeze proposed in an earlier term may never have been committed.
                shard.freeze_proposed_at.store(0, Ordering::Release);
            }
            self.queue_frozen(&shard);
            request_freeze(&self.inner, &shard, false);
        }
    }

    /// Installs where the leader's jobs send their ChangeSets and Freeze requests
    /// (`External` log mode). Until then, no shard flushes or compacts.
    pub fn set_change_set_sink(&self, sink: Arc<dyn ChangeSetSink>) {
        self.inner.set_change_set_sink(sink);
        let led: Vec<u64> = self.inner.leaders.read().iter().copied().collect();
        for id in led {
            if let Ok(shard) = self.shard(id) {
                self.queue_frozen(&shard);
            }
        }
    }

    /// Queues the shard for the flush threads if it has frozen memtables and this engine
    /// flushes it.
    fn queue_frozen(&self, shard: &Shard) {
        if self.inner.runs_jobs(shard.id) && !shard.data.load().frozen.is_empty() {
            queue_flush(&self.inner, shard.id);
        }
    }

    /// The shard an `apply_*` entry names, after checking the engine takes entries.
    pub(crate) fn entry_shard(&self, op: &'static str, shard_id: u64) -> Result<Arc<Shard>> {
        self.inner.expect_log_mode(op, LogMode::External)?;
        self.check_open()?;
        self.shard(shard_id)
    }
}

/// Where `index` stands against the shard's applied index; a gap is an error. The caller holds
/// the shard's `meta` lock, so `write_sequence` cannot move meanwhile.
pub(crate) fn position(shard: &Shard, index: u64) -> Result<Position> {
    let applied = shard.write_sequence.load(Ordering::Acquire);
    if index <= applied {
        Ok(Position::Applied)
    } else if index == applied + 1 {
        Ok(Position::Next)
    } else {
        Err(Error::LogGap {
            shard_id: shard.id,
            applied,
            index,
        })
    }
}

/// Records that the entry `index` is applied. The caller holds the shard's `meta` lock.
pub(crate) fn advance(shard: &Shard, index: u64) {
    let _w = shard.write.lock();
    shard.write_sequence.store(index, Ordering::Release);
}

/// Why a ChangeSet entry no longer fits the shard at its index, if it does not. Depends only on
/// the shard's state, which is the same on every replica at the same index.
fn stale_reason(cur: &ShardData, cs: &ChangeSet) -> Option<String> {
    if cs.shard_ver != cur.ver() {
        return Some(format!(
            "changeset made for another shard version: found={} expected={}",
            cs.shard_ver,
            cur.ver()
        ));
    }
    if let Some(Change::Flush(flush)) = &cs.change {
        // Frozen memtables flush oldest first, one entry each; a second Flush of the same
        // memtable (its first proposal's outcome was unknown, the leader retried) finds it gone.
        return match cur.frozen.last() {
            Some(oldest) if oldest.last_sequence == flush.data_sequence => None,
            Some(oldest) => Some(format!(
                "flush of a memtable that is not the oldest frozen one: data_sequence={} oldest={}",
                flush.data_sequence, oldest.last_sequence
            )),
            None => Some(format!(
                "flush with no frozen memtable: data_sequence={}",
                flush.data_sequence
            )),
        };
    }
    None
}

/// On the shard's leader (`External` log mode), asks the log for a Freeze of the active
/// memtable when it is due: with `force` (a flush was asked for), once per memtable; otherwise
/// when the memtable reached `memtable_size`, once, and again each time it grows by another
/// `memtable_size` (a proposal may be lost). Takes the shard's `write` lock only to decide;
/// the sink is called without it.
pub(crate) fn request_freeze(inner: &Inner, shard: &Shard, force: bool) {
    if inner.log_mode() != LogMode::External || !inner.is_leader(shard.id) {
        return;
    }
    let Ok(sink) = inner.change_set_sink(shard.id) else {
        return;
    };
    {
        let _w = shard.write.lock();
        let d = shard.data.load();
        if d.mem.is_empty() {
            return;
        }
        let size = d.mem.size();
        let limit = inner.opts.memtable_size;
        let proposed = shard.freeze_proposed_at.load(Ordering::Acquire);
        // A forced freeze (flush_shard) always proposes: a Freeze of an empty or already
        // frozen memtable only takes an index, and an earlier proposal may have been dropped.
        let due = if force {
            true
        } else {
            size >= limit && (proposed == 0 || size >= proposed.saturating_add(limit))
        };
        if !due {
            return;
        }
        shard
            .freeze_proposed_at
            .store(size.max(1), Ordering::Release);
    }
    sink.propose_freeze(shard.id);
}

/// The files a ChangeSet the log delivered but the apply refused (conflicted or stale) would
/// have added: only that ChangeSet names them, so they go to file GC on every replica. This
/// is the one place that does it: a proposer that never learns the outcome (its leadership
/// ended) could not, and they would leak.
fn doom_created_files(inner: &crate::engine::Inner, cs: &ChangeSet) {
    let ids: Vec<u64> = match &cs.change {
        Some(Change::Compaction(c)) => c.table_creates.iter().map(|t| t.id).collect(),
        Some(Change::Flush(f)) => f.l0_create.iter().map(|l| l.id).collect(),
        _ => Vec::new(),
    };
    if ids.is_empty() {
        return;
    }
    crate::file_gc::doom(
        inner,
        crate::compaction_exec::DoomedJob {
            ids,
            not_before: std::time::SystemTime::now(),
            intent: None,
        },
    );
}
