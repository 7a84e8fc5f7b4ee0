//! `SnapAccess`: an O(1) consistent snapshot of a shard, and reads on it.
//!
//! A read at `ts` returns, for each key, the version with the highest version number <= ts
//! across every source (memtables — or, on a snapshot rebuilt by `from_remote`, the shipped
//! WRITE rows — L0 files, levels); on a tie the newer source wins. A
//! tombstone hides the key. Sources are consulted newest first, and a table whose `max_ts`
//! cannot beat the best version found so far is skipped.
//!
//! Consistency: the snapshot holds `Arc`s of the shard's memtables and files and the write
//! sequence read *before* them, so it contains every write up to `write_sequence()`. The active
//! memtable is shared with writers: a write applied after the snapshot with a version <= a
//! read's ts would also be seen. The transaction layer rules that out for reads at a start_ts
//! (max_ts and memory locks); LOCK-CF reads use the snapshot's SnapVersion as their ts, which
//! later writes exceed, so lock reads are exact.

use std::sync::Arc;

use bytes::Bytes;
use memtable::ColumnFamily;
use sst::{RunBound, RunRow};

use crate::error::Result;
use crate::shard_data::ShardData;

use crate::source_iter::{LevelIter, Source};

/// One visible version (never a tombstone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    pub version: u64,
    pub user_meta: Bytes,
    pub value: Bytes,
}

/// One version as stored, tombstones included: what the MVCC layer looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawVersion {
    pub version: u64,
    pub tombstone: bool,
    pub user_meta: Bytes,
    pub value: Bytes,
}

impl From<memtable::VersionRef> for RawVersion {
    fn from(v: memtable::VersionRef) -> RawVersion {
        RawVersion {
            version: v.version(),
            tombstone: v.is_tombstone(),
            user_meta: v.user_meta_bytes(),
            value: v.value_bytes(),
        }
    }
}

impl From<crate::remote_rows::RemoteVersion<'_>> for RawVersion {
    fn from(v: crate::remote_rows::RemoteVersion<'_>) -> RawVersion {
        RawVersion {
            version: v.version(),
            tombstone: v.is_tombstone(),
            user_meta: v.user_meta_bytes(),
            value: v.value_bytes(),
        }
    }
}

impl From<sst::Version> for RawVersion {
    fn from(v: sst::Version) -> RawVersion {
        RawVersion {
            version: v.version,
            tombstone: v.tombstone,
            user_meta: v.user_meta,
            value: v.value,
        }
    }
}

#[derive(Clone)]
pub struct SnapAccess {
    pub(crate) shard_id: u64,
    pub(crate) data: Arc<ShardData>,
    pub(crate) write_sequence: u64,
    /// False for a snapshot rebuilt from a remote description: it has no data version.
    pub(crate) is_origin: bool,
}

impl SnapAccess {
    pub(crate) fn new(shard_id: u64, data: Arc<ShardData>, write_sequence: u64) -> SnapAccess {
        SnapAccess {
            shard_id,
            data,
            write_sequence,
            is_origin: true,
        }
    }

    /// The shard's data version for the coprocessor cache: its SnapVersion (base_version +
    /// write_sequence). With the engine's own log it changes on every applied write and
    /// survives flush, compaction and restart; with an external (Raft) log it is the applied
    /// index, so every applied entry changes it and replicas at one index share it. It never
    /// repeats across a split. `None` on a snapshot rebuilt by
    /// [`SnapAccess::from_remote`]: only the origin may vouch for a version.
    pub fn data_version(&self) -> Option<u64> {
        self.is_origin.then(|| self.snap_version())
    }

    pub fn shard_id(&self) -> u64 {
        self.shard_id
    }

    pub fn ver(&self) -> u64 {
        self.data.ver()
    }

    pub fn start(&self) -> &[u8] {
        self.data.start()
    }

    pub fn end(&self) -> &[u8] {
        self.data.end()
    }

    /// Sequence of the last write batch this snapshot contains.
    pub fn write_sequence(&self) -> u64 {
        self.write_sequence
    }

    /// `base_version + write_sequence`: never decreases for a shard.
    pub fn snap_version(&self) -> u64 {
        self.data.base_version() + self.write_sequence
    }

    /// The version of `key` visible at `ts`, or `None` if absent or deleted. A key outside the
    /// shard's range is an error.
    pub fn get(&self, cf: ColumnFamily, key: &[u8], ts: u64) -> Result<Option<Item>> {
        get_in(&self.data, self.shard_id, cf, key, ts)
    }

    /// The version of `key` a read at `ts` lands on, tombstone or not. A key outside the
    /// shard's range is an error.
    pub fn get_raw(&self, cf: ColumnFamily, key: &[u8], ts: u64) -> Result<Option<RawVersion>> {
        get_raw_in(&self.data, self.shard_id, cf, key, ts)
    }

    /// The lock on `key` in this snapshot (LOCK CF, read at the snapshot's SnapVersion).
    pub fn get_lock(&self, key: &[u8]) -> Result<Option<Item>> {
        self.get(ColumnFamily::Lock, key, self.snap_version())
    }

    /// An iterator over `[start, end)` (empty `end` = unbounded, clipped to the shard's range)
    /// at `ts`, ascending or descending, positioned on the first visible key.
    pub fn iter(
        &self,
        cf: ColumnFamily,
        start: &[u8],
        end: &[u8],
        ts: u64,
        reverse: bool,
    ) -> Result<SnapIter<'_>> {
        let d = &*self.data;
        let lower = if start < d.start().as_ref() {
            d.start().as_ref()
        } else {
            start
        };
        let upper = match (end.is_empty(), d.end().is_empty()) {
            (true, _) => d.end().as_ref(),
            (false, true) => end,
            (false, false) => std::cmp::min(end, d.end().as_ref()),
        };
        let overlaps = |p: &sst::Properties| {
            p.biggest.as_slice() >= lower && (upper.is_empty() || p.smallest.as_slice() < upper)
        };
        let mut sources = Vec::new();
        for mem in d.memtables() {
            if !mem.cf(cf).is_empty() {
                sources.push(Source::Mem(mem.cf(cf).iter(ts)));
            }
        }
        if cf == ColumnFamily::Write
            && let Some(remote) = &d.remote
            && !remote.is_empty()
        {
            sources.push(Source::Remote(remote.iter(ts)));
        }
        for l0 in &d.l0s {
            if let Some(t) = l0.cf(cf)
                && overlaps(t.properties())
            {
                let mut it = t.iter(ts);
                it.bound_read_ahead(lower, upper);
                sources.push(Source::Table(it));
            }
        }
        for level in &d.levels[cf.index()] {
            let tables: Vec<_> = level
                .iter()
                .filter(|t| overlaps(t.properties()))
                .cloned()
                .collect();
            if let Some(it) = LevelIter::new(tables, ts, (lower, upper)) {
                sources.push(Source::Level(it));
            }
        }
        let mut it = SnapIter {
            sources,
            reverse,
            lower: lower.to_vec(),
            upper: upper.to_vec(),
            key: Vec::new(),
            current: None,
            run_bound: Vec::new(),
            run_source: 0,
        };
        it.start()?;
        Ok(it)
    }

    /// Bytes of WRITE-CF data blocks the ranges touch, from the SST indexes alone (memtables and
    /// the shipped rows of a rebuilt snapshot are not counted): the input of the offload
    /// decision.
    pub fn range_blocks_size<S: AsRef<[u8]>, E: AsRef<[u8]>>(&self, ranges: &[(S, E)]) -> u64 {
        let d = &*self.data;
        let clipped: Vec<(&[u8], &[u8])> = ranges
            .iter()
            .filter_map(|(s, e)| {
                let (s, e) = (s.as_ref(), e.as_ref());
                let s = s.max(d.start().as_ref());
                let e = match (e.is_empty(), d.end().is_empty()) {
                    (true, _) => d.end().as_ref(),
                    (false, true) => e,
                    (false, false) => e.min(d.end().as_ref()),
                };
                (e.is_empty() || s < e).then_some((s, e))
            })
            .collect();
        if clipped.is_empty() {
            return 0;
        }
        let write = ColumnFamily::Write.index();
        let mut total = 0;
        for l0 in &d.l0s {
            if let Some(t) = l0.cf(ColumnFamily::Write) {
                total += t.estimate_blocks_size(&clipped);
            }
        }
        for level in &d.levels[write] {
            for t in level {
                total += t.estimate_blocks_size(&clipped);
            }
        }
        total
    }
}

/// A merged, bounded cursor over a snapshot's sources. Moves in one direction only (the one it
/// was created with): `next()` advances in that direction.
pub struct SnapIter<'a> {
    sources: Vec<Source<'a>>,
    reverse: bool,
    lower: Vec<u8>,
    /// Exclusive; empty = unbounded.
    upper: Vec<u8>,
    key: Vec<u8>,
    /// Index of the source holding the current version.
    current: Option<usize>,
    /// The bound of the last run (see [`Self::next_run`]), a buffer reused across runs.
    run_bound: Vec<u8>,
    /// The source of the latest run that consumed rows.
    run_source: usize,
}

impl SnapIter<'_> {
    fn start(&mut self) -> Result<()> {
        for s in &mut self.sources {
            if self.reverse {
                if self.upper.is_empty() {
                    s.seek_to_last()?;
                } else {
                    s.seek_for_prev(&self.upper)?;
                    if s.valid() && s.key() == self.upper.as_slice() {
                        s.prev()?;
                    }
                }
            } else {
                s.seek(&self.lower)?;
            }
        }
        self.settle()
    }

    /// Positions on the next key (in the iteration direction) that has a visible, non-deleted
    /// version, or ends the iteration.
    fn settle(&mut self) -> Result<()> {
        loop {
            // The smallest (or, in reverse, the biggest) key among the valid sources.
            let mut pick: Option<usize> = None;
            for (i, s) in self.sources.iter().enumerate() {
                if !s.valid() {
                    continue;
                }
                pick = match pick {
                    None => Some(i),
                    Some(p) => {
                        let ord = s.key().cmp(self.sources[p].key());
                        let better = if self.reverse {
                            ord.is_gt()
                        } else {
                            ord.is_lt()
                        };
                        // Same key: the higher version wins; on a tie the newer (earlier) source.
                        let same_key_newer = ord.is_eq() && s.version() > self.sources[p].version();
                        if better || same_key_newer {
                            Some(i)
                        } else {
                            Some(p)
                        }
                    }
                };
            }
            let Some(p) = pick else {
                self.current = None;
                return Ok(());
            };
            let key = self.sources[p].key();
            let out_of_range = if self.reverse {
                key < self.lower.as_slice()
            } else {
                !self.upper.is_empty() && key >= self.upper.as_slice()
            };
            if out_of_range {
                self.current = None;
                return Ok(());
            }
            self.key.clear();
            self.key.extend_from_slice(key);
            if !self.sources[p].is_tombstone() {
                self.current = Some(p);
                return Ok(());
            }
            self.advance_past_key()?;
        }
    }

    /// Moves every source positioned on `self.key` one step in the iteration direction.
    fn advance_past_key(&mut self) -> Result<()> {
        for s in &mut self.sources {
            if s.valid() && s.key() == self.key.as_slice() {
                if self.reverse {
                    s.prev()?;
                } else {
                    s.next()?;
                }
            }
        }
        Ok(())
    }

    pub fn valid(&self) -> bool {
        self.current.is_some()
    }

    pub fn key(&self) -> &[u8] {
        &self.key
    }

    fn cur(&self) -> &Source<'_> {
        &self.sources[self.current.expect("iterator is not valid")]
    }

    pub fn value(&self) -> &[u8] {
        self.cur().value()
    }

    pub fn user_meta(&self) -> &[u8] {
        self.cur().user_meta()
    }

    pub fn version(&self) -> u64 {
        self.cur().version()
    }

    /// Visits rows from the current one on, in the iteration direction, for as long as they
    /// come from the current source alone, block by block (see [`sst::TableIter::next_run`]),
    /// and returns how many `visit` consumed; the iterator is left on the first row not
    /// consumed, as `next` would have left it.
    ///
    /// The run is bounded by the nearest key of every other source, so no row that must be
    /// merged with (or hidden by) another source's version is ever part of it, and by the
    /// scan's range. It stops early wherever the block form cannot answer alone (a tombstone, a
    /// key whose newest version is too new, a source with no block form): 0 means "take this
    /// row with `next`", not "ended".
    pub fn next_run(
        &mut self,
        max: usize,
        mut visit: impl FnMut(&RunRow<'_>) -> bool,
    ) -> Result<usize> {
        let Some(p) = self.current else {
            return Ok(0);
        };
        // Before working out the bound: a memtable-heavy scan would pay it on every row.
        if !self.sources[p].has_block_form() {
            return Ok(0);
        }
        let reverse = self.reverse;
        // The nearest key of the other sources, or the range's own end.
        let mut bound: Option<(&[u8], bool)> = if reverse {
            Some((self.lower.as_slice(), true))
        } else if self.upper.is_empty() {
            None
        } else {
            Some((self.upper.as_slice(), false))
        };
        for (i, s) in self.sources.iter().enumerate() {
            if i == p || !s.valid() {
                continue;
            }
            let k = s.key();
            let nearer = match bound {
                None => true,
                Some((b, _)) if reverse => k >= b,
                Some((b, _)) => k <= b,
            };
            if nearer {
                bound = Some((k, false));
            }
        }
        let inclusive = bound.is_some_and(|(_, incl)| incl);
        let has_bound = bound.is_some();
        if let Some((k, _)) = bound {
            self.run_bound.clear();
            self.run_bound.extend_from_slice(k);
        }
        let bound = has_bound.then_some(RunBound {
            key: &self.run_bound,
            inclusive,
        });
        let n = self.sources[p].run(bound, reverse, max, &mut visit)?;
        if n > 0 {
            self.run_source = p;
            self.settle()?;
        }
        Ok(n)
    }

    /// The key of the last row the latest [`Self::next_run`] consumed, when it consumed any.
    pub fn last_run_key(&self) -> &[u8] {
        self.sources
            .get(self.run_source)
            .map_or(&[], |s| s.last_run_key())
    }

    /// Moves to the next visible key in the iteration direction.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<()> {
        if self.current.is_none() {
            return Ok(());
        }
        self.advance_past_key()?;
        self.settle()
    }
}

/// [`SnapAccess::get`] over a shard state `d` (what `Engine::get` reads without taking a
/// snapshot).
pub(crate) fn get_in(
    d: &ShardData,
    shard_id: u64,
    cf: ColumnFamily,
    key: &[u8],
    ts: u64,
) -> Result<Option<Item>> {
    Ok(get_raw_in(d, shard_id, cf, key, ts)?.and_then(|v| {
        (!v.tombstone).then_some(Item {
            version: v.version,
            user_meta: v.user_meta,
            value: v.value,
        })
    }))
}

/// [`SnapAccess::get_raw`] over a shard state `d`.
fn get_raw_in(
    d: &ShardData,
    shard_id: u64,
    cf: ColumnFamily,
    key: &[u8],
    ts: u64,
) -> Result<Option<RawVersion>> {
    // Files shared with a split sibling hold keys of its range too.
    if !d.contains_key(key) {
        return Err(crate::error::Error::KeyNotInShard {
            shard_id,
            key: key.to_vec(),
        });
    }
    // The newest candidate so far: a source's row replaces it only when newer, and its bytes
    // are taken only then.
    let mut best: Option<RawVersion> = None;
    let newer =
        |best: &Option<RawVersion>, version: u64| best.as_ref().is_none_or(|b| version > b.version);
    for mem in d.memtables() {
        if let Some(v) = mem.cf(cf).get(key, ts)
            && newer(&best, v.version())
        {
            best = Some(v.into());
        }
    }
    if cf == ColumnFamily::Write
        && let Some(remote) = &d.remote
        && let Some(v) = remote.get(key, ts)?
        && newer(&best, v.version)
    {
        best = Some(v);
    }
    // A table is read only when its key range holds the key and it may hold a newer version.
    let tables =
        d.l0s
            .iter()
            .filter_map(|l0| l0.cf(cf))
            .chain(d.levels[cf.index()].iter().filter_map(|level| {
                level.get(level.partition_point(|t| t.properties().biggest.as_slice() < key))
            }));
    for t in tables {
        let p = t.properties();
        if key < p.smallest.as_slice() || key > p.biggest.as_slice() || !newer(&best, p.max_ts) {
            continue;
        }
        if let Some(v) = t.get(key, ts)?
            && newer(&best, v.version)
        {
            best = Some(v.into());
        }
    }
    Ok(best)
}
