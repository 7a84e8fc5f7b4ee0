//! Compaction: which files to merge (size scores), how versions are garbage-collected while
//! merging, and what the merge produces. Applying the result (object store, manifest, shard
//! state) is the engine's job.
//!
//! Scores: L0 by file count and bytes against their triggers (`l0_compaction_files`,
//! `l0_compaction_bytes`); level n of a column family by its bytes against
//! `base_level_size × 10^(n-1)`. The highest score at or above 1 is compacted: L0 → L1 merges
//! every L0 file with the L1 tables they overlap, in every column family; Ln → Ln+1 merges the
//! largest table of the level with the Ln+1 tables it overlaps, for one column family.
//!
//! A manual full compaction ([`manual_steps`], `Engine::compact_shard_full`) moves each column
//! family's levels down into its deepest instead, one whole level at a time.
//!
//! GC, with `safe_point` = the GC safe point (no reader uses a timestamp below it): every
//! version above the safe point is kept; of the versions at or below it only the newest is kept;
//! the LOCK column family keeps only each key's newest record. A tombstone that ends up as a
//! key's oldest kept version is dropped when no deeper level of the column family overlaps the
//! compaction (nothing older remains for it to hide).

use memtable::ColumnFamily;
use sst::{BuilderOptions, BuiltTable, Table, TableBuilder, Version};

use crate::error::Result;
use crate::shard_data::ShardData;

/// Compaction knobs, copied from the engine options.
#[derive(Debug, Clone)]
pub struct CompactionConfig {
    pub l0_compaction_files: usize,
    pub l0_compaction_bytes: u64,
    pub base_level_size: u64,
    pub max_level: u32,
}

/// What to merge.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Upper level: 0 for L0 → L1.
    pub level: u32,
    /// The column family of an Ln → Ln+1 compaction; `None` for L0 (every CF).
    pub cf: Option<ColumnFamily>,
    /// Input file ids of the upper level.
    pub top: Vec<u64>,
    /// Input file ids of the lower level.
    pub bottom: Vec<u64>,
    /// Per column family: the input tables, newest data first.
    pub inputs: [Vec<Table>; ColumnFamily::COUNT],
    /// Per column family: whether tombstones may be dropped (no deeper overlapping level).
    pub bottommost: [bool; ColumnFamily::COUNT],
    /// The shard's range: inputs shared with a split sibling hold keys outside it, which the
    /// merge drops.
    pub start: bytes::Bytes,
    pub end: bytes::Bytes,
}

fn overlaps(t: &Table, smallest: &[u8], biggest: &[u8]) -> bool {
    let p = t.properties();
    p.biggest.as_slice() >= smallest && p.smallest.as_slice() <= biggest
}

/// True if no level below `level` of `cf` holds keys in `[smallest, biggest]`.
fn nothing_below(d: &ShardData, cf: usize, level: u32, smallest: &[u8], biggest: &[u8]) -> bool {
    d.levels[cf]
        .iter()
        .skip(level as usize)
        .all(|lvl| !lvl.iter().any(|t| overlaps(t, smallest, biggest)))
}

/// The most urgent compaction of a shard, if any score reaches 1 (or L0 is non-empty and
/// `force_l0`).
pub fn pick(d: &ShardData, cfg: &CompactionConfig, force_l0: bool) -> Option<Plan> {
    let mut best: Option<(f64, u32, Option<usize>)> = None;
    let l0_bytes: u64 = d.l0s.iter().map(|f| f.size()).sum();
    let l0_score = f64::max(
        d.l0s.len() as f64 / cfg.l0_compaction_files.max(1) as f64,
        l0_bytes as f64 / cfg.l0_compaction_bytes.max(1) as f64,
    );
    if l0_score >= 1.0 || (force_l0 && !d.l0s.is_empty()) {
        best = Some((l0_score.max(1.0), 0, None));
    }
    for cf in 0..ColumnFamily::COUNT {
        for (i, lvl) in d.levels[cf].iter().enumerate() {
            let level = i as u32 + 1;
            if level >= cfg.max_level || lvl.is_empty() {
                continue;
            }
            let bytes: u64 = lvl.iter().map(|t| t.size()).sum();
            let target = cfg
                .base_level_size
                .saturating_mul(10u64.saturating_pow(level - 1));
            let score = bytes as f64 / target.max(1) as f64;
            if score >= 1.0 && best.is_none_or(|b| score > b.0) {
                best = Some((score, level, Some(cf)));
            }
        }
    }
    let (_, level, cf) = best?;
    Some(match cf {
        None => l0_plan(d),
        Some(c) => {
            let largest = d.levels[c][level as usize - 1]
                .iter()
                .max_by_key(|t| t.size())
                .expect("level is not empty")
                .clone();
            level_plan(d, c, level, vec![largest])
        }
    })
}

/// One step of a manual full compaction (`Engine::compact_shard_full`), planned against the
/// shard's state when the step runs ([`plan_manual_step`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ManualStep {
    /// Every L0 file into L1.
    L0,
    /// Every table of `level` of column family `cf` into the next level.
    Level { cf: usize, level: u32 },
    /// Column family `cf`'s only level, one level down as bottommost, when its tables hold
    /// versions GC may drop.
    Sole { cf: usize },
}

/// The steps of a manual full compaction of `d`, in order: L0 into L1 if L0 holds files; then,
/// per column family, every level from the shallowest with data down to the one above the
/// deepest, each into the next, so the last step merges into the deepest level as bottommost
/// and drops the tombstones (and old versions) at or below the GC safe point, as RocksDB's
/// `CompactRange` over all keys does. Each column family ends with a [`ManualStep::Sole`]
/// step, planned once the others ran: it rewrites the one level the data is in by then if its
/// tables still hold what GC may drop. That covers data already in one level, and the tables
/// a merge into the deepest level did not touch (an L0 step rewrites only the L1 tables its
/// files overlap; a level step only the deepest tables the level above overlaps).
///
/// The steps are fixed from the state the call starts with, so the call ends even while
/// writes go on: L0 files flushed meanwhile wait for the next call.
pub fn manual_steps(d: &ShardData) -> Vec<ManualStep> {
    let mut steps = Vec::new();
    if !d.l0s.is_empty() {
        steps.push(ManualStep::L0);
    }
    for c in 0..ColumnFamily::COUNT {
        let levels = &d.levels[c];
        let in_l0 = d.l0s.iter().any(|f| f.cf(ColumnFamily::ALL[c]).is_some());
        let shallowest = levels.iter().position(|l| !l.is_empty());
        let deepest = levels.iter().rposition(|l| !l.is_empty());
        let (first, deepest) = match (shallowest, deepest) {
            (Some(_), Some(d)) if in_l0 => (1, d as u32 + 1),
            (Some(s), Some(d)) => (s as u32 + 1, d as u32 + 1),
            // Only L0 data: the L0 step puts it in L1, bottommost already.
            _ => continue,
        };
        steps.extend((first..deepest).map(|level| ManualStep::Level { cf: c, level }));
        steps.push(ManualStep::Sole { cf: c });
    }
    steps
}

/// The plan of `step` against the shard's state now, or `None` when it has nothing to do (the
/// level emptied meanwhile, or a sole level holds nothing GC may drop at `safe_point`).
pub fn plan_manual_step(
    d: &ShardData,
    cfg: &CompactionConfig,
    step: ManualStep,
    safe_point: u64,
) -> Option<Plan> {
    match step {
        ManualStep::L0 => (!d.l0s.is_empty()).then(|| l0_plan(d)),
        ManualStep::Level { cf, level } => {
            let tables = d.levels[cf].get(level as usize - 1)?;
            (!tables.is_empty()).then(|| level_plan(d, cf, level, tables.clone()))
        }
        ManualStep::Sole { cf } => {
            let levels = &d.levels[cf];
            let mut non_empty = levels.iter().enumerate().filter(|(_, l)| !l.is_empty());
            let (i, tables) = non_empty.next()?;
            let level = i as u32 + 1;
            // Never below the configured last level.
            if non_empty.next().is_some() || level >= cfg.max_level {
                return None;
            }
            let lock = cf == ColumnFamily::Lock.index();
            let droppable = tables.iter().any(|t| {
                let p = t.properties();
                (p.tombstones > 0 || p.old_entries > 0) && (lock || p.min_ts <= safe_point)
            });
            droppable.then(|| level_plan(d, cf, level, tables.clone()))
        }
    }
}

fn empty_plan(d: &ShardData, level: u32, cf: Option<usize>) -> Plan {
    Plan {
        level,
        cf: cf.map(|c| ColumnFamily::ALL[c]),
        top: Vec::new(),
        bottom: Vec::new(),
        inputs: Default::default(),
        bottommost: [false; ColumnFamily::COUNT],
        start: d.start().clone(),
        end: d.end().clone(),
    }
}

/// Every L0 file with the L1 tables they overlap, in every column family.
fn l0_plan(d: &ShardData) -> Plan {
    let mut plan = empty_plan(d, 0, None);
    plan.top = d.l0s.iter().map(|f| f.file_id()).collect();
    for c in 0..ColumnFamily::COUNT {
        let sections: Vec<Table> = d
            .l0s
            .iter()
            .filter_map(|f| f.cf(ColumnFamily::ALL[c]).cloned())
            .collect();
        add_inputs(d, &mut plan, c, 0, sections);
    }
    plan
}

/// `top` (tables of `level` in column family `c`, not empty) with the tables of the next level
/// they overlap.
fn level_plan(d: &ShardData, c: usize, level: u32, top: Vec<Table>) -> Plan {
    let mut plan = empty_plan(d, level, Some(c));
    plan.top = top.iter().map(|t| t.file_id()).collect();
    add_inputs(d, &mut plan, c, level, top);
    plan
}

/// Makes `top` (tables of `level` in column family `c`; L0 sections for level 0) and the
/// tables of the level below that overlap their key span the plan's inputs in `c`, and
/// decides whether the merge is bottommost there. Nothing for an empty `top`.
fn add_inputs(d: &ShardData, plan: &mut Plan, c: usize, level: u32, top: Vec<Table>) {
    let props = || top.iter().map(Table::properties);
    let (Some(smallest), Some(biggest)) = (
        props().map(|p| p.smallest.clone()).min(),
        props().map(|p| p.biggest.clone()).max(),
    ) else {
        return;
    };
    let mut inputs = top;
    // `levels[c][i]` is level i + 1: the level below `level` is at index `level`.
    if let Some(next) = d.levels[c].get(level as usize) {
        for t in next.iter().filter(|t| overlaps(t, &smallest, &biggest)) {
            plan.bottom.push(t.file_id());
            inputs.push(t.clone());
        }
    }
    plan.bottommost[c] = nothing_below(d, c, level + 1, &smallest, &biggest);
    plan.inputs[c] = inputs;
}

/// The versions of one key that survive GC, newest first. `versions` come newest source
/// first; equal version numbers keep the first (newest source).
pub fn gc_versions(
    mut versions: Vec<Version>,
    cf: ColumnFamily,
    safe_point: u64,
    bottommost: bool,
) -> Vec<Version> {
    versions.sort_by_key(|v| std::cmp::Reverse(v.version));
    versions.dedup_by(|later, earlier| later.version == earlier.version);
    if cf == ColumnFamily::Lock {
        versions.truncate(1);
    } else if let Some(first_old) = versions.iter().position(|v| v.version <= safe_point) {
        // A read at the safe point needs the newest version at or below it that reads do not
        // skip: in the WRITE CF a Lock or Rollback record is skipped (`WriteKind`), so the
        // value under it must stay, and the skipped records below the safe point can go.
        let kept_old = if cf == ColumnFamily::Write {
            versions[first_old..]
                .iter()
                .position(|v| !skipped_by_reads(v))
                .map(|i| first_old + i)
        } else {
            Some(first_old)
        };
        match kept_old {
            Some(i) => {
                versions.drain(first_old..i);
                versions.truncate(first_old + 1);
            }
            None => versions.truncate(first_old),
        }
    }
    if bottommost
        && versions.last().is_some_and(|v| v.tombstone)
        && (cf == ColumnFamily::Lock || versions.last().is_some_and(|v| v.version <= safe_point))
    {
        versions.pop();
    }
    versions
}

/// Whether reads skip `v` (a WRITE-CF Lock or Rollback record). A version whose meta does not
/// decode counts as data: GC keeps it rather than guess.
fn skipped_by_reads(v: &Version) -> bool {
    crate::mvcc::WriteMeta::peek_kind(&v.user_meta).is_ok_and(|k| k.is_skipped_by_reads())
}

/// Merges `inputs` (newest data first) into tables of about `target_file_size`, keeping only
/// keys in `[start, end)` (empty `end` = unbounded), and hands each output table to `emit` as
/// soon as it is finished, in key order.
///
/// One output at a time: the caller stores each before the next is built, so a compaction
/// holds at most one output table in memory, not all of them (collecting them made a
/// compaction of a whole L0 hold its entire compressed output at once: +175 MiB at the close
/// of the vs-fjall suite).
#[allow(clippy::too_many_arguments)]
pub fn merge(
    inputs: &[Table],
    range: (&[u8], &[u8]),
    cf: ColumnFamily,
    safe_point: u64,
    bottommost: bool,
    opts: &BuilderOptions,
    target_file_size: u64,
    mut emit: impl FnMut(BuiltTable) -> Result<()>,
) -> Result<()> {
    let (start, end) = range;
    // One cursor per sorted run (a level's tables are one), in the inputs' order.
    let mut iters = crate::sorted_runs::group(inputs)
        .into_iter()
        .map(|run| crate::sorted_runs::RunIter::new(run, start))
        .collect::<Result<Vec<_>>>()?;
    let mut builder: Option<TableBuilder> = None;
    let mut key = Vec::new();
    while let Some(min) = iters.iter().filter(|i| i.valid()).map(|i| i.key()).min() {
        if !end.is_empty() && min >= end {
            break;
        }
        key.clear();
        key.extend_from_slice(min);
        let mut versions = Vec::new();
        for it in iters
            .iter_mut()
            .filter(|i| i.valid() && i.key() == key.as_slice())
        {
            versions.extend(it.all_versions()?);
            it.next()?;
        }
        let kept = gc_versions(versions, cf, safe_point, bottommost);
        if kept.is_empty() {
            continue;
        }
        if builder
            .as_ref()
            .is_some_and(|b| b.estimated_size() as u64 >= target_file_size)
            && let Some(done) = builder.take()
        {
            emit(done.finish())?;
        }
        let b = match &mut builder {
            Some(b) => b,
            None => builder.insert(TableBuilder::new(opts.clone())?),
        };
        for v in &kept {
            b.add(&key, v.version, &v.user_meta, &v.value, v.tombstone)?;
        }
    }
    if let Some(b) = builder
        && !b.is_empty()
    {
        emit(b.finish())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn v(version: u64, tombstone: bool) -> Version {
        Version {
            version,
            user_meta: Bytes::new(),
            value: Bytes::from_static(b"x"),
            tombstone,
        }
    }

    /// A WRITE-CF record of `kind` committed at `version`.
    fn w(version: u64, kind: crate::mvcc::WriteKind) -> Version {
        let meta = crate::mvcc::WriteMeta {
            kind,
            start_ts: version.saturating_sub(1),
            commit_ts: version,
        };
        Version {
            version,
            user_meta: Bytes::copy_from_slice(&meta.encode()),
            value: Bytes::from_static(b"x"),
            tombstone: kind == crate::mvcc::WriteKind::Delete,
        }
    }

    #[test]
    fn gc_keeps_the_value_under_lock_and_rollback_records_below_the_safe_point() {
        use crate::mvcc::WriteKind::{Lock, Put, Rollback};
        // put@10, lock@50, rollback@55; safe point 60: a read at 60 skips the lock and the
        // rollback and must still find the put.
        let got = gc_versions(
            vec![w(55, Rollback), w(50, Lock), w(10, Put), w(5, Put)],
            ColumnFamily::Write,
            60,
            true,
        );
        assert_eq!(nums(&got), vec![(10, false)]);
        // Above the safe point every record stays.
        let got = gc_versions(
            vec![w(70, Lock), w(50, Lock), w(10, Put)],
            ColumnFamily::Write,
            60,
            false,
        );
        assert_eq!(nums(&got), vec![(70, false), (10, false)]);
        // Only skipped records at or below it: nothing to read there, they all go.
        let got = gc_versions(
            vec![w(70, Put), w(50, Lock), w(40, Rollback)],
            ColumnFamily::Write,
            60,
            false,
        );
        assert_eq!(nums(&got), vec![(70, false)]);
    }

    fn nums(vs: &[Version]) -> Vec<(u64, bool)> {
        vs.iter().map(|v| (v.version, v.tombstone)).collect()
    }

    #[test]
    fn gc_keeps_everything_above_the_safe_point_and_the_newest_below() {
        let got = gc_versions(
            vec![v(9, false), v(7, false), v(4, false), v(2, false)],
            ColumnFamily::Write,
            5,
            false,
        );
        assert_eq!(nums(&got), vec![(9, false), (7, false), (4, false)]);
    }

    #[test]
    fn gc_drops_a_bottom_tombstone_only_below_the_safe_point() {
        let got = gc_versions(vec![v(4, true), v(2, false)], ColumnFamily::Write, 5, true);
        assert!(got.is_empty());
        let got = gc_versions(vec![v(4, true), v(2, false)], ColumnFamily::Write, 5, false);
        assert_eq!(nums(&got), vec![(4, true)]);
        let got = gc_versions(vec![v(8, true), v(2, false)], ColumnFamily::Write, 5, true);
        assert_eq!(nums(&got), vec![(8, true), (2, false)]);
    }

    #[test]
    fn gc_keeps_only_the_newest_lock() {
        let got = gc_versions(vec![v(3, false), v(9, false)], ColumnFamily::Lock, 0, false);
        assert_eq!(nums(&got), vec![(9, false)]);
        assert!(gc_versions(vec![v(9, true), v(3, false)], ColumnFamily::Lock, 0, true).is_empty());
    }

    #[test]
    fn gc_prefers_the_newer_source_on_equal_versions() {
        let mut newer = v(5, false);
        newer.value = Bytes::from_static(b"new");
        let got = gc_versions(vec![newer, v(5, false)], ColumnFamily::Write, 0, false);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].value.as_ref(), b"new");
    }
}
