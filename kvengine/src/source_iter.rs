//! One sorted source of a snapshot read (a memtable, the shipped rows of a rebuilt snapshot, an
//! L0 section, or a whole level) behind a common cursor interface, each positioned on the
//! version visible at the read timestamp.

use memtable::CfIter;
use sst::{RunBound, RunRow, Table, TableIter};

use crate::error::Result;
use crate::remote_rows::RemoteRowsIter;

/// A cursor over one source. Tombstones are visible (flagged): the merge needs them.
pub(crate) enum Source<'a> {
    Mem(CfIter<'a>),
    /// The WRITE rows shipped with a rebuilt snapshot (see `remote_rows`).
    Remote(RemoteRowsIter<'a>),
    Table(TableIter),
    Level(LevelIter),
}

impl Source<'_> {
    pub fn seek(&mut self, key: &[u8]) -> Result<()> {
        match self {
            Source::Mem(it) => it.seek(key),
            Source::Remote(it) => it.seek(key)?,
            Source::Table(it) => it.seek(key)?,
            Source::Level(it) => it.seek(key)?,
        }
        Ok(())
    }

    pub fn seek_for_prev(&mut self, key: &[u8]) -> Result<()> {
        match self {
            Source::Mem(it) => it.seek_for_prev(key),
            Source::Remote(it) => it.seek_for_prev(key)?,
            Source::Table(it) => it.seek_for_prev(key)?,
            Source::Level(it) => it.seek_for_prev(key)?,
        }
        Ok(())
    }

    pub fn seek_to_last(&mut self) -> Result<()> {
        match self {
            Source::Mem(it) => it.seek_to_last(),
            Source::Remote(it) => it.seek_to_last()?,
            Source::Table(it) => it.seek_to_last()?,
            Source::Level(it) => it.seek_to_last()?,
        }
        Ok(())
    }

    pub fn next(&mut self) -> Result<()> {
        match self {
            Source::Mem(it) => it.next(),
            Source::Remote(it) => it.next()?,
            Source::Table(it) => it.next()?,
            Source::Level(it) => it.next()?,
        }
        Ok(())
    }

    pub fn prev(&mut self) -> Result<()> {
        match self {
            Source::Mem(it) => it.prev(),
            Source::Remote(it) => it.prev()?,
            Source::Table(it) => it.prev()?,
            Source::Level(it) => it.prev()?,
        }
        Ok(())
    }

    /// Whether [`Source::run`] can visit anything: tables have a block form, memtables and
    /// shipped rows do not (the caller takes their rows one at a time).
    pub fn has_block_form(&self) -> bool {
        matches!(self, Source::Table(_) | Source::Level(_))
    }

    /// Visits a run of rows block by block (see [`TableIter::next_run`]); sources that are not
    /// tables have no block form and visit nothing (the caller takes their rows one at a
    /// time).
    pub fn run(
        &mut self,
        bound: Option<RunBound<'_>>,
        reverse: bool,
        max: usize,
        visit: &mut impl FnMut(&RunRow<'_>) -> bool,
    ) -> Result<usize> {
        Ok(match self {
            Source::Mem(_) | Source::Remote(_) => 0,
            Source::Table(it) => it.next_run(bound, reverse, max, visit)?,
            Source::Level(it) => it.run(bound, reverse, max, visit)?,
        })
    }

    /// The key of the last row the latest [`Source::run`] consumed (see
    /// [`sst::TableIter::last_run_key`]); empty for a source with no block form.
    pub fn last_run_key(&self) -> &[u8] {
        match self {
            Source::Mem(_) | Source::Remote(_) => &[],
            Source::Table(it) => it.last_run_key(),
            Source::Level(it) => &it.run_key,
        }
    }

    pub fn valid(&self) -> bool {
        match self {
            Source::Mem(it) => it.valid(),
            Source::Remote(it) => it.valid(),
            Source::Table(it) => it.valid(),
            Source::Level(it) => it.valid(),
        }
    }

    pub fn key(&self) -> &[u8] {
        match self {
            Source::Mem(it) => it.key(),
            Source::Remote(it) => it.key(),
            Source::Table(it) => it.key(),
            Source::Level(it) => it.iter.key(),
        }
    }

    pub fn version(&self) -> u64 {
        match self {
            Source::Mem(it) => it.version().version(),
            Source::Remote(it) => it.version(),
            Source::Table(it) => it.version_number(),
            Source::Level(it) => it.iter.version_number(),
        }
    }

    pub fn is_tombstone(&self) -> bool {
        match self {
            Source::Mem(it) => it.version().is_tombstone(),
            Source::Remote(it) => it.is_tombstone(),
            Source::Table(it) => it.is_tombstone(),
            Source::Level(it) => it.iter.is_tombstone(),
        }
    }

    pub fn value(&self) -> &[u8] {
        match self {
            Source::Mem(it) => it.version().value(),
            Source::Remote(it) => it.value(),
            Source::Table(it) => it.value(),
            Source::Level(it) => it.iter.value(),
        }
    }

    pub fn user_meta(&self) -> &[u8] {
        match self {
            Source::Mem(it) => it.version().user_meta(),
            Source::Remote(it) => it.user_meta(),
            Source::Table(it) => it.user_meta(),
            Source::Level(it) => it.iter.user_meta(),
        }
    }
}

/// The tables of one level (sorted by key, not overlapping) read as one sorted source; only one
/// table is open at a time.
pub(crate) struct LevelIter {
    tables: Vec<Table>,
    ts: u64,
    idx: usize,
    iter: TableIter,
    /// The key of the last row the latest [`LevelIter::run`] consumed: a run may end in a
    /// later table than the one that consumed its last row.
    run_key: Vec<u8>,
    /// The scan's range `[lower, upper)`: each table's iterator reads ahead inside it
    /// ([`TableIter::bound_read_ahead`]).
    lower: Vec<u8>,
    upper: Vec<u8>,
}

impl LevelIter {
    /// Iterates `tables` (one level, in key order) at `ts` for a scan of `range`.
    pub fn new(tables: Vec<Table>, ts: u64, range: (&[u8], &[u8])) -> Option<LevelIter> {
        let mut first = tables.first()?.iter(ts);
        first.bound_read_ahead(range.0, range.1);
        Some(LevelIter {
            tables,
            ts,
            idx: 0,
            iter: first,
            run_key: Vec::new(),
            lower: range.0.to_vec(),
            upper: range.1.to_vec(),
        })
    }

    fn open(&mut self, idx: usize) {
        self.idx = idx;
        self.iter = self.tables[idx].iter(self.ts);
        self.iter.bound_read_ahead(&self.lower, &self.upper);
    }

    fn skip_forward(&mut self) -> Result<()> {
        while !self.iter.valid() && self.idx + 1 < self.tables.len() {
            self.open(self.idx + 1);
            self.iter.seek_to_first()?;
        }
        Ok(())
    }

    fn skip_backward(&mut self) -> Result<()> {
        while !self.iter.valid() && self.idx > 0 {
            self.open(self.idx - 1);
            self.iter.seek_to_last()?;
        }
        Ok(())
    }

    pub fn seek(&mut self, key: &[u8]) -> Result<()> {
        // The first table that may hold keys >= `key`; past the last one the table's own seek
        // leaves the cursor invalid.
        let i = self
            .tables
            .partition_point(|t| t.properties().biggest.as_slice() < key);
        self.open(i.min(self.tables.len() - 1));
        self.iter.seek(key)?;
        self.skip_forward()
    }

    pub fn seek_for_prev(&mut self, key: &[u8]) -> Result<()> {
        let i = self
            .tables
            .partition_point(|t| t.properties().smallest.as_slice() <= key);
        self.open(i.saturating_sub(1));
        self.iter.seek_for_prev(key)?;
        self.skip_backward()
    }

    pub fn seek_to_last(&mut self) -> Result<()> {
        self.open(self.tables.len() - 1);
        self.iter.seek_to_last()?;
        self.skip_backward()
    }

    pub fn next(&mut self) -> Result<()> {
        self.iter.next()?;
        self.skip_forward()
    }

    pub fn prev(&mut self) -> Result<()> {
        self.iter.prev()?;
        self.skip_backward()
    }

    pub fn valid(&self) -> bool {
        self.iter.valid()
    }

    /// A run across the level's tables: when one table ends inside the run, the next one
    /// continues it.
    pub fn run(
        &mut self,
        bound: Option<RunBound<'_>>,
        reverse: bool,
        max: usize,
        visit: &mut impl FnMut(&RunRow<'_>) -> bool,
    ) -> Result<usize> {
        let mut n = 0;
        loop {
            let taken = self.iter.next_run(bound, reverse, max - n, &mut *visit)?;
            if taken > 0 {
                self.run_key.clear();
                self.run_key.extend_from_slice(self.iter.last_run_key());
            }
            n += taken;
            // A valid table iterator stopped the run itself (bound, visitor, a row it leaves
            // to the row path, or `max`).
            if self.iter.valid() || n == max {
                return Ok(n);
            }
            if reverse {
                self.skip_backward()?;
            } else {
                self.skip_forward()?;
            }
            if !self.iter.valid() {
                return Ok(n);
            }
        }
    }
}
