//! Forward and reverse iteration over a table at a read timestamp.
//!
//! The iterator walks main data blocks only, positioned on keys that have a version <= the read
//! timestamp; for a key whose newest version is too new it follows the pointer into the
//! old-version blocks. Keys with no visible version are skipped in both directions. Tombstones
//! are returned (flagged): a merging reader needs them to hide older versions in lower levels.

use std::ops::Range;

use crate::block::{Block, EntryPos, Version};
use crate::block_rows::{BlockRows, RunBound, RunRow};
use crate::error::Result;
use crate::table::{BlockKind, Table};

/// How many blocks ahead of a scan [`TableIter::prefetch_ahead`] loads.
const PREFETCH_DISTANCE: usize = 2;

pub struct TableIter {
    table: Table,
    ts: u64,
    block: Option<Block>,
    block_idx: usize,
    entry_idx: usize,
    key: Vec<u8>,
    /// Leading bytes of `key` known to equal the current block's first key.
    key_known: usize,
    /// The old-version block read last (see `Table::resolve`).
    last_old: Option<(usize, Block)>,
    current: Current,
    /// The block-at-a-time form of main block `rows_of` (see [`Self::next_run`]).
    rows: BlockRows,
    rows_of: Option<usize>,
    /// The key of the last row the latest [`Self::next_run`] consumed.
    run_key: Vec<u8>,
    /// Main blocks a read-ahead may load (those a scan of the range given to
    /// [`Self::bound_read_ahead`] can reach), and the cache's depth; `None`: no read-ahead.
    ahead_blocks: Option<(Range<usize>, usize)>,
    /// How far the loaders were asked to go: the direction (true: reverse) and the frontier,
    /// forward the first block not queued, reverse the last block queued.
    ahead: Option<(bool, usize)>,
}

/// The version the iterator is positioned on. A main-block entry is kept as positions into the
/// block, so a scan creates no `Bytes` handles (and pays no reference counting) per entry.
enum Current {
    None,
    Main(EntryPos),
    Old(Version),
}

impl Table {
    /// An iterator that sees, for each key, the version visible at `ts`. It starts unpositioned:
    /// call a seek first.
    pub fn iter(&self, ts: u64) -> TableIter {
        TableIter {
            table: self.clone(),
            ts,
            block: None,
            block_idx: 0,
            entry_idx: 0,
            key: Vec::new(),
            key_known: 0,
            last_old: None,
            current: Current::None,
            rows: BlockRows::default(),
            rows_of: None,
            run_key: Vec::new(),
            ahead_blocks: None,
            ahead: None,
        }
    }
}

impl TableIter {
    pub fn valid(&self) -> bool {
        !matches!(self.current, Current::None)
    }

    /// The current key. Only meaningful while `valid()`.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    fn main_entry(&self) -> Option<(&Block, &EntryPos)> {
        match (&self.current, &self.block) {
            (Current::Main(e), Some(b)) => Some((b, e)),
            _ => None,
        }
    }

    /// The value of the visible version (empty for a tombstone). Panics if not `valid()`.
    pub fn value(&self) -> &[u8] {
        match (&self.current, self.main_entry()) {
            (_, Some((b, e))) => &b.data()[e.value.0..e.value.1],
            (Current::Old(v), _) => &v.value,
            _ => panic!("iterator is not valid"),
        }
    }

    /// The user meta of the visible version. Panics if not `valid()`.
    pub fn user_meta(&self) -> &[u8] {
        match (&self.current, self.main_entry()) {
            (_, Some((b, e))) => &b.data()[e.meta.0..e.meta.1],
            (Current::Old(v), _) => &v.user_meta,
            _ => panic!("iterator is not valid"),
        }
    }

    /// The version number (commit ts or sequence) of the visible version.
    pub fn version_number(&self) -> u64 {
        match &self.current {
            Current::Main(e) => e.version,
            Current::Old(v) => v.version,
            Current::None => panic!("iterator is not valid"),
        }
    }

    pub fn is_tombstone(&self) -> bool {
        match &self.current {
            Current::Main(e) => e.tombstone(),
            Current::Old(v) => v.tombstone,
            Current::None => panic!("iterator is not valid"),
        }
    }

    /// The visible version as an owned value sharing the table's bytes. Panics if not
    /// `valid()`.
    pub fn version(&self) -> Version {
        match (&self.current, self.main_entry()) {
            (_, Some((b, e))) => b.version_of(e),
            (Current::Old(v), _) => v.clone(),
            _ => panic!("iterator is not valid"),
        }
    }

    /// Every version of the current key, newest first, regardless of the read timestamp
    /// (for compaction and flush rewrites).
    pub fn all_versions(&self) -> Result<Vec<Version>> {
        let Some(block) = &self.block else {
            return Ok(Vec::new());
        };
        let e = block
            .entry(self.entry_idx)
            .map_err(|c| self.table.corrupt(BlockKind::Main, self.block_idx, c))?;
        let mut out = vec![block.version_of(&e)];
        out.extend(self.table.old_versions_of(&self.key, &e)?);
        Ok(out)
    }

    fn invalidate(&mut self) {
        self.block = None;
        self.current = Current::None;
        self.rows_of = None;
    }

    fn load(&mut self, bi: usize) -> Result<()> {
        let step = match self.block {
            Some(_) if bi == self.block_idx + 1 => Some(false),
            Some(_) if bi + 1 == self.block_idx => Some(true),
            _ => None,
        };
        self.block_idx = bi;
        self.key_known = 0;
        match step {
            // A scan that moved from one block to the next reads ahead, as RocksDB's automatic
            // read-ahead does after two sequential reads; so a seek followed by a few rows in
            // one block loads nothing it will not read. Queued before this block's own load,
            // so a loader starts on the next ones while the scan reads this one.
            Some(reverse) => self.read_ahead(bi, reverse),
            None => self.ahead = None,
        }
        self.block = Some(self.table.block(BlockKind::Main, bi)?);
        Ok(())
    }

    /// Lets a scan of `[lower, upper)` (an empty `upper`: to the end) have the blocks ahead of
    /// it loaded on the block cache's loader threads (see [`crate::block_cache`]): once the
    /// scan has moved from one block to the next, it keeps the cache's depth of blocks queued
    /// ahead in its direction, never past the range. Without this call (point reads,
    /// compaction's merges, which read mapped tables) nothing is read ahead.
    pub fn bound_read_ahead(&mut self, lower: &[u8], upper: &[u8]) {
        self.ahead = None;
        self.ahead_blocks = None;
        // Most tables of a scan never read ahead (L0 files and uncompressed tables are read
        // in place): no search of their index.
        let depth = self.table.read_ahead_depth();
        if depth == 0 {
            return;
        }
        let index = self.table.index(BlockKind::Main);
        let first = index.find(lower).unwrap_or(0);
        let end = if upper.is_empty() {
            index.len()
        } else {
            index.count_before(upper)
        };
        self.ahead_blocks = (first < end).then_some((first..end, depth));
    }

    /// Queues the next blocks after `bi` (before it, in `reverse`) that the scan will read:
    /// the whole depth at first, then batches of half the depth, so that a scan hands work
    /// over once every few blocks. A batch the loaders' full queue refused is given up (the
    /// scan loads those blocks itself): asking again at every block would add a hand-over
    /// attempt per block exactly when the machine is busiest.
    fn read_ahead(&mut self, bi: usize, reverse: bool) {
        let Some((range, depth)) = self.ahead_blocks.clone() else {
            return;
        };
        let batch = (depth / 2).max(1);
        let (blocks, frontier) = if reverse {
            let to = match self.ahead {
                Some((true, f)) if f < bi => f,
                _ => bi.min(range.end),
            };
            let from = range.start.max(bi.saturating_sub(depth));
            if from >= to || (to - from < batch && from != range.start) {
                return;
            }
            (from..to, from)
        } else {
            let from = match self.ahead {
                Some((false, f)) if f > bi => f,
                _ => (bi + 1).max(range.start),
            };
            let to = range.end.min(bi + 1 + depth);
            if from >= to || (to - from < batch && to != range.end) {
                return;
            }
            (from..to, to)
        };
        self.table.read_ahead(blocks, reverse);
        self.ahead = Some((reverse, frontier));
    }

    /// Resolves the entry at the current position; positions on it if visible at ts.
    fn resolve_current(&mut self) -> Result<bool> {
        let Some(block) = &self.block else {
            return Ok(false);
        };
        let e = block
            .entry(self.entry_idx)
            .map_err(|c| self.table.corrupt(BlockKind::Main, self.block_idx, c))?;
        self.key_known = block.key_into_after(&e, &mut self.key, self.key_known);
        self.current = if e.version <= self.ts {
            Current::Main(e)
        } else {
            match self
                .table
                .resolve(block, &e, &self.key, self.ts, &mut self.last_old)?
            {
                Some(v) => Current::Old(v),
                None => Current::None,
            }
        };
        Ok(self.valid())
    }

    /// From the current position, moves forward to the first visible entry.
    fn settle_forward(&mut self) -> Result<()> {
        let n_blocks = self.table.index(BlockKind::Main).len();
        loop {
            let Some(block) = &self.block else {
                return Ok(());
            };
            if self.entry_idx >= block.len() {
                if self.block_idx + 1 >= n_blocks {
                    self.invalidate();
                    return Ok(());
                }
                self.load(self.block_idx + 1)?;
                self.prefetch_ahead(false);
                self.entry_idx = 0;
                continue;
            }
            if self.resolve_current()? {
                return Ok(());
            }
            self.entry_idx += 1;
        }
    }

    /// From the current position, moves backward to the first visible entry.
    fn settle_backward(&mut self) -> Result<()> {
        loop {
            if self.block.is_none() {
                return Ok(());
            }
            if self.resolve_current()? {
                return Ok(());
            }
            self.step_back()?;
        }
    }

    fn step_back(&mut self) -> Result<()> {
        if self.entry_idx > 0 {
            self.entry_idx -= 1;
            return Ok(());
        }
        if self.block_idx == 0 {
            self.invalidate();
            return Ok(());
        }
        self.load(self.block_idx - 1)?;
        self.prefetch_ahead(true);
        self.entry_idx = self.block.as_ref().map_or(0, |b| b.len() - 1);
        Ok(())
    }

    /// A scan that moved into a new block will read the blocks after it in its direction:
    /// start loading the one two blocks ahead into the CPU caches, so it is there by the time
    /// the scan gets to it (one block ahead arrives too late to hide all of its misses).
    fn prefetch_ahead(&self, reverse: bool) {
        let ahead = if reverse {
            self.block_idx.checked_sub(PREFETCH_DISTANCE)
        } else {
            Some(self.block_idx + PREFETCH_DISTANCE)
        };
        if let Some(i) = ahead {
            self.table.prefetch_main_block(i);
        }
    }

    fn guard(&mut self, r: Result<()>) -> Result<()> {
        if r.is_err() {
            self.invalidate();
        }
        r
    }

    /// Positions on the first visible key >= `key`.
    pub fn seek(&mut self, key: &[u8]) -> Result<()> {
        let r = self.seek_inner(key);
        self.guard(r)
    }

    fn seek_inner(&mut self, key: &[u8]) -> Result<()> {
        let index = self.table.index(BlockKind::Main);
        if index.is_empty() {
            self.invalidate();
            return Ok(());
        }
        let bi = index.find(key).unwrap_or(0);
        self.load(bi)?;
        let block = self.block.as_ref().expect("just loaded");
        self.entry_idx = block
            .lower_bound(key)
            .map_err(|c| self.table.corrupt(BlockKind::Main, bi, c))?;
        self.settle_forward()
    }

    /// Positions on the last visible key <= `key`.
    pub fn seek_for_prev(&mut self, key: &[u8]) -> Result<()> {
        let r = self.seek_for_prev_inner(key);
        self.guard(r)
    }

    fn seek_for_prev_inner(&mut self, key: &[u8]) -> Result<()> {
        let Some(bi) = self.table.index(BlockKind::Main).find(key) else {
            self.invalidate();
            return Ok(());
        };
        self.load(bi)?;
        let block = self.block.as_ref().expect("just loaded");
        let ub = block
            .upper_bound(key)
            .map_err(|c| self.table.corrupt(BlockKind::Main, bi, c))?;
        if ub == 0 {
            // The index promised a first key <= `key`; `Table::block` checked that the block's
            // first key is the index's, so this cannot happen with verified blocks.
            return Err(self.table.corrupt(
                BlockKind::Main,
                bi,
                crate::error::Corrupt("block first key disagrees with the index"),
            ));
        }
        self.entry_idx = ub - 1;
        self.settle_backward()
    }

    pub fn seek_to_first(&mut self) -> Result<()> {
        let r = self.seek_to_first_inner();
        self.guard(r)
    }

    fn seek_to_first_inner(&mut self) -> Result<()> {
        if self.table.index(BlockKind::Main).is_empty() {
            self.invalidate();
            return Ok(());
        }
        self.load(0)?;
        self.entry_idx = 0;
        self.settle_forward()
    }

    pub fn seek_to_last(&mut self) -> Result<()> {
        let r = self.seek_to_last_inner();
        self.guard(r)
    }

    fn seek_to_last_inner(&mut self) -> Result<()> {
        let n = self.table.index(BlockKind::Main).len();
        if n == 0 {
            self.invalidate();
            return Ok(());
        }
        self.load(n - 1)?;
        self.entry_idx = self.block.as_ref().map_or(0, |b| b.len() - 1);
        self.settle_backward()
    }

    /// Moves to the next visible key. No-op when not valid. (A fallible cursor, not an
    /// `Iterator`: errors must reach the caller.)
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<()> {
        if !self.valid() {
            return Ok(());
        }
        self.entry_idx += 1;
        let r = self.settle_forward();
        self.guard(r)
    }

    /// Visits rows block by block from the current position, in the scan direction (`reverse`
    /// for a scan that moves with [`Self::prev`]), and returns how many it consumed; the
    /// iterator is left on the first row not consumed, as `next`/`prev` would have left it.
    ///
    /// A run covers rows whose newest version is visible at the read timestamp and not a
    /// tombstone, that `bound` admits, up to `max`, while `visit` returns true (false: stop
    /// *before* that row, which stays current). Everything else ends the run and is left to
    /// the row-at-a-time path: keys whose newest version is too new (an old-version lookup),
    /// tombstones (a merging reader hides older versions with them), a position on an old
    /// version. So a run of 0 rows is normal; the caller then takes one row the slow way.
    ///
    /// Each block is decoded whole, once ([`BlockRows`]): the rows cost array reads, not a
    /// cursor step each. The key of the last row consumed is then [`Self::last_run_key`].
    pub fn next_run(
        &mut self,
        bound: Option<RunBound<'_>>,
        reverse: bool,
        max: usize,
        mut visit: impl FnMut(&RunRow<'_>) -> bool,
    ) -> Result<usize> {
        if !matches!(self.current, Current::Main(_)) || max == 0 {
            return Ok(0);
        }
        let r = self.run_inner(bound, reverse, max, &mut visit);
        let r = r.and_then(|n| {
            // Back to the row-at-a-time state on the first row not consumed.
            self.key_known = 0;
            if reverse {
                self.settle_backward()?;
            } else {
                self.settle_forward()?;
            }
            Ok(n)
        });
        if r.is_err() {
            self.invalidate();
        }
        r
    }

    /// The loop of [`Self::next_run`]. Leaves `block_idx`/`entry_idx` on the first row not
    /// consumed (or the iterator invalid when the table ended).
    fn run_inner(
        &mut self,
        bound: Option<RunBound<'_>>,
        reverse: bool,
        max: usize,
        visit: &mut impl FnMut(&RunRow<'_>) -> bool,
    ) -> Result<usize> {
        let n_blocks = self.table.index(BlockKind::Main).len();
        let mut n = 0;
        loop {
            let Some(block) = &self.block else {
                return Ok(n);
            };
            if self.rows_of != Some(self.block_idx) {
                self.rows_of = None;
                self.rows
                    .decode(block)
                    .map_err(|c| self.table.corrupt(BlockKind::Main, self.block_idx, c))?;
                self.rows_of = Some(self.block_idx);
                self.prefetch_ahead(reverse);
            }
            let (rows, data, ts) = (&self.rows, block.data().as_ref(), self.ts);
            let mut i = self.entry_idx;
            // A block's rows are in key order: when the bound admits the last row this run
            // can reach in the block, it admits every row before it, and no row of the block
            // needs the per-row key comparison (a memcmp that was a tenth of a warm scan).
            let check_bound = match bound {
                Some(b) if !rows.is_empty() => {
                    let last = if reverse { 0 } else { rows.len() - 1 };
                    !b.admits(rows.key(last), reverse)
                }
                _ => false,
            };
            // Whether the run ended inside this block (a row it may not take, or `max`).
            let mut stopped = false;
            // The last row of this block the run consumed.
            let mut last = None;
            while i < rows.len() {
                let key = rows.key(i);
                if n == max
                    || rows.version(i) > ts
                    || rows.is_tombstone(i)
                    || (check_bound && bound.is_some_and(|b| !b.admits(key, reverse)))
                    || !visit(&RunRow {
                        key,
                        version: rows.version(i),
                        user_meta: rows.user_meta(data, i),
                        value: rows.value(data, i),
                    })
                {
                    stopped = true;
                    break;
                }
                n += 1;
                last = Some(i);
                if reverse {
                    if i == 0 {
                        break;
                    }
                    i -= 1;
                } else {
                    i += 1;
                }
            }
            if let Some(last) = last {
                self.run_key.clear();
                self.run_key.extend_from_slice(rows.key(last));
            }
            if stopped {
                self.entry_idx = i;
                return Ok(n);
            }
            if reverse {
                // Consumed entry 0: the first row not consumed is the previous block's last.
                if self.block_idx == 0 {
                    self.invalidate();
                    return Ok(n);
                }
                self.load(self.block_idx - 1)?;
                self.entry_idx = self.block.as_ref().map_or(0, |b| b.len() - 1);
            } else {
                if self.block_idx + 1 >= n_blocks {
                    self.invalidate();
                    return Ok(n);
                }
                self.load(self.block_idx + 1)?;
                self.entry_idx = 0;
            }
        }
    }

    /// The key of the last row the latest [`Self::next_run`] consumed, when it consumed any
    /// (otherwise what an earlier run left). A caller that must know where a run ended (a
    /// paging resume point) reads it here once, instead of copying every visited key: the
    /// copy is made once per block the run leaves, not per row (per row it was a twentieth of
    /// a warm coprocessor scan).
    pub fn last_run_key(&self) -> &[u8] {
        &self.run_key
    }

    /// Moves to the previous visible key. No-op when not valid.
    pub fn prev(&mut self) -> Result<()> {
        if !self.valid() {
            return Ok(());
        }
        let r = self.step_back().and_then(|_| self.settle_backward());
        self.guard(r)
    }
}
