//! The compaction job: running what `compaction` picks, and proposing its result.
//!
//! A compaction thread walks the shards; for each, [`compaction::pick`] chooses the most urgent
//! merge, [`compaction::merge`] writes the outputs, each output is put to the object store and
//! opened as soon as it is built (one output table in memory at a time; if the merge or a put
//! fails midway, the outputs already stored go to file GC), and a Compaction ChangeSet (inputs to delete, outputs to create) is proposed through
//! the one apply path (`apply`). If a change that landed meanwhile removed an input (a split
//! handed the files to children, say), the apply reports the compaction conflicted, nothing
//! changes, and the outputs, which nobody references, go to file GC with everything else the
//! apply left unused.
//!
//! One compaction runs per shard at a time (`Shard::compacting`). The inputs it read stay
//! readable until file GC deletes them after the swap, when no snapshot holds them.
//!
//! With a log outside the engine (`LogMode::External`) only the shard's leader compacts: the
//! ChangeSet goes to the owner's sink (`change_set_sink`) and every replica applies it when
//! the log delivers it. The job waits for that holding only `compacting`, which no apply takes.

use std::sync::Arc;
use std::time::Duration;

use changeset::{Change, Compaction, TableCreate};
use memtable::ColumnFamily;

use crate::apply::{self, ApplyOutcome};
use crate::compaction::{self, CompactionConfig};
use crate::compaction_exec;
use crate::engine::{Engine, Inner};
use crate::error::{Error, Result};
use crate::file_gc;
use crate::metrics;
use crate::options::{EngineOptions, LogMode};
use crate::shard::Shard;
use crate::shard_data::{OpenTables, ShardData};

impl Engine {
    /// Compacts the shard on the calling thread until no level needs it; with `force_l0`, the
    /// first round merges L0 into L1 even below its trigger. Returns the number of compactions.
    ///
    /// In `External` log mode only on the shard's leader ([`Error::NotLeader`] elsewhere), and
    /// each compaction is proposed to the log and waited for: the calling thread must not be
    /// the one that applies the log's entries.
    pub fn compact_shard(&self, shard_id: u64, force_l0: bool) -> Result<usize> {
        self.check_compaction_caller(shard_id, "compact_shard")?;
        let shard = self.shard(shard_id)?;
        let cfg = compaction_config(&self.inner.opts);
        let mut n = 0;
        while compact_once(&self.inner, &shard, |d| {
            compaction::pick(d, &cfg, force_l0 && n == 0)
        })? {
            n += 1;
        }
        file_gc::collect(&self.inner);
        Ok(n)
    }

    /// A manual full compaction of the shard on the calling thread (RocksDB's `CompactRange`
    /// over every key): L0 into L1, then each column family's levels down into its deepest,
    /// whose last merge drops the tombstones and old versions at or below the GC safe point;
    /// a column family already in one level is rewritten one level down when its tables hold
    /// such versions (`compaction::manual_steps`). For a user who deleted much and wants the
    /// space back once [`Engine::set_gc_safe_point`] passed the deletes.
    ///
    /// One pass over the files there are when it starts: memtable rows (flush first) and L0
    /// files flushed meanwhile wait for the next call, so it ends under steady writes. It holds
    /// the shard's compaction lock from planning the steps to the last one (as RocksDB's
    /// exclusive manual compaction): a background compaction that ran between two steps could
    /// otherwise open a level below the deepest one planned, and the last step would then not
    /// be bottommost (nothing dropped, the data twice on disk). Background compaction threads
    /// skip the shard meanwhile and keep compacting the others. Replaced files are collected
    /// after every step, so the disk holds at most one step's inputs twice. Data already in
    /// the configured last level is not rewritten in place: tables there that no step touched
    /// keep what GC could drop. Returns the number of compactions; the same leader rule as
    /// [`Engine::compact_shard`].
    pub fn compact_shard_full(&self, shard_id: u64) -> Result<usize> {
        self.check_compaction_caller(shard_id, "compact_shard_full")?;
        let shard = self.shard(shard_id)?;
        let cfg = compaction_config(&self.inner.opts);
        let safe_point = self.gc_safe_point();
        let mut n = 0;
        let _c = shard.compacting.lock();
        // A statement of its own: a guard of the state in the `for` expression would live
        // through every step and keep each step's replaced files from being collected.
        let steps = compaction::manual_steps(&shard.data.load());
        for step in steps {
            if compact_locked(&self.inner, &shard, |d| {
                compaction::plan_manual_step(d, &cfg, step, safe_point)
            })? {
                n += 1;
            }
            file_gc::collect(&self.inner);
        }
        Ok(n)
    }

    /// Compaction on the caller's thread needs an open engine and, with an external log, the
    /// shard's leadership and a way to propose.
    fn check_compaction_caller(&self, shard_id: u64, op: &'static str) -> Result<()> {
        self.check_open()?;
        if self.inner.log_mode() == LogMode::External {
            if !self.inner.is_leader(shard_id) {
                return Err(Error::NotLeader { shard_id, op });
            }
            self.inner.change_set_sink(shard_id)?;
        }
        Ok(())
    }
}

/// A compaction thread: compacts every shard that needs it, collects garbage, and sleeps until
/// a flush finishes (which is what usually makes a compaction due) when nothing was due.
pub(crate) fn compaction_loop(inner: &Arc<Inner>) {
    let cfg = compaction_config(&inner.opts);
    while !inner.is_closed() {
        let shards: Vec<Arc<Shard>> = inner.shards.read().values().cloned().collect();
        let mut worked = false;
        for shard in shards {
            if inner.is_closed() {
                return;
            }
            if !inner.runs_jobs(shard.id) {
                continue;
            }
            // A shard whose compaction lock is held (a manual full compaction holds it for its
            // whole call, a split while it runs, another thread while it compacts) is skipped
            // this round instead of waited for: this thread serves every other shard too.
            let Some(_c) = shard.compacting.try_lock() else {
                continue;
            };
            match compact_locked(inner, &shard, |d| compaction::pick(d, &cfg, false)) {
                Ok(did) => worked |= did,
                Err(e) => tracing::warn!(shard_id = shard.id, error = %e, "compaction failed"),
            }
        }
        file_gc::collect(inner);
        if !worked {
            let mut g = inner.flushed.lock();
            inner
                .flushed_cv
                .wait_for(&mut g, Duration::from_millis(200));
        }
    }
}

fn compaction_config(o: &EngineOptions) -> CompactionConfig {
    CompactionConfig {
        l0_compaction_files: o.l0_compaction_files,
        l0_compaction_bytes: o.l0_compaction_bytes,
        base_level_size: o.base_level_size,
        max_level: o.max_level,
    }
}

/// Runs the compaction `pick` chooses for the shard's current state, if any. Returns whether
/// it compacted.
///
/// The plan becomes a job (`compaction_exec`); an installed offload may run it elsewhere
/// (verified outputs come back), else it runs here through the same `merge_job`.
fn compact_once(
    inner: &Inner,
    shard: &Shard,
    pick: impl FnOnce(&ShardData) -> Option<compaction::Plan>,
) -> Result<bool> {
    let _c = shard.compacting.lock();
    compact_locked(inner, shard, pick)
}

/// [`compact_once`] for a caller that holds the shard's compaction lock.
fn compact_locked(
    inner: &Inner,
    shard: &Shard,
    pick: impl FnOnce(&ShardData) -> Option<compaction::Plan>,
) -> Result<bool> {
    let data = shard.data.load_full();
    let Some(plan) = pick(&data) else {
        return Ok(false);
    };
    let safe_point = inner
        .gc_safe_point
        .load(std::sync::atomic::Ordering::Acquire);
    let job = compaction_exec::job_of(&plan, &inner.opts, safe_point, shard.id, data.ver());
    let input_bytes = compaction_exec::input_bytes(&plan);
    let remote = match inner.compaction_offload() {
        Some(offload) if offload.wants(shard.id, input_bytes) => {
            compaction_exec::try_offload(inner, offload.as_ref(), job.clone(), input_bytes)?
        }
        _ => None,
    };
    let ran_remote = remote.is_some();
    let (creates, outputs) = match remote {
        Some(done) => done,
        None => compact_here(inner, &plan, &job)?,
    };
    let change = Change::Compaction(Compaction {
        cf: plan.cf.map_or(0, ColumnFamily::as_u32),
        level: plan.level,
        top_deletes: plan.top.clone(),
        bottom_deletes: plan.bottom.clone(),
        table_creates: creates,
        conflicted: false,
        safe_point,
    });
    match apply::submit(inner, shard, &data, change, outputs)? {
        ApplyOutcome::Applied => {
            metrics::COMPACTIONS.inc();
            if ran_remote {
                metrics::REMOTE_COMPACTIONS.inc();
            }
            Ok(true)
        }
        outcome => {
            // Another change replaced the inputs first. The apply handed the outputs, which
            // nothing references, to file GC.
            tracing::debug!(shard_id = shard.id, ?outcome, "compaction not applied");
            Ok(false)
        }
    }
}

/// Runs `job` (planned as `plan`) on this thread: outputs get ids from the engine's
/// allocator as they are built, and are opened once stored. If the merge or a store fails
/// midway, the outputs already stored go to file GC (as a conflicted compaction's do).
fn compact_here(
    inner: &Inner,
    plan: &compaction::Plan,
    job: &changeset::CompactionJob,
) -> Result<(Vec<TableCreate>, OpenTables)> {
    let inputs: Vec<compaction_exec::OpenedCf> = ColumnFamily::ALL
        .iter()
        .filter(|cf| !plan.inputs[cf.index()].is_empty())
        .map(|cf| compaction_exec::OpenedCf {
            cf: *cf,
            bottommost: plan.bottommost[cf.index()],
            tables: plan.inputs[cf.index()].clone(),
        })
        .collect();
    let mut creates = Vec::new();
    let merged = compaction_exec::merge_job(
        inner.dfs.as_ref(),
        job,
        &inputs,
        &mut || inner.ids.next(),
        None,
        &mut creates,
    );
    let mut outputs = OpenTables::default();
    let mut opened = Ok(());
    if merged.is_ok() {
        for t in &creates {
            match inner.table_source().open_table(t.id) {
                Ok(table) => outputs.add_table(table),
                Err(e) => {
                    opened = Err(e);
                    break;
                }
            }
        }
    }
    if let Err(e) = merged.and(opened) {
        // Outputs already stored are referenced by nothing: they go to file GC.
        file_gc::doom(
            inner,
            compaction_exec::DoomedJob {
                ids: creates.iter().map(|t| t.id).collect(),
                not_before: std::time::SystemTime::now(),
                intent: None,
            },
        );
        return Err(e);
    }
    Ok((creates, outputs))
}
