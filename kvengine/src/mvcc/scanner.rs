//! Range scans at a start_ts: locks checked up front, Lock and Rollback records skipped, and
//! newer-timestamp tracking for the coprocessor cache.
//!
//! **Newer-ts data**: a result may be cached only if nothing in the scanned span could change
//! it for a later reader of the same data version: no committed version newer than start_ts
//! (the reader chose not to see it, a later one with a bigger ts would) and no lock at all.
//! The check runs once, over the span actually scanned, when asked: sources whose newest
//! version is `<= start_ts` (table `max_ts` properties, memtable and shipped-row max versions) are skipped
//! without reading them, so in the common case it reads nothing. It is conservative: a
//! `false` answer is exact (nothing newer and no lock in the span), a `true` may be caused by
//! a newer Rollback record or by a lock anywhere in the scanned ranges.

use bytes::Bytes;
use memtable::ColumnFamily;

use super::reader::write_kind;
use super::records::WriteMeta;
use crate::error::{Error, Result};
use crate::snap_access::{SnapAccess, SnapIter};

/// A forward or reverse scan of committed values in `[start, end)` at `start_ts`.
pub struct MvccScanner<'a> {
    snap: &'a SnapAccess,
    iter: SnapIter<'a>,
    start_ts: u64,
    reverse: bool,
    /// The scan's bounds, clipped to the shard (`upper` empty = unbounded).
    lower: Vec<u8>,
    upper: Vec<u8>,
    /// The value of the current key when the iterator's version was a skipped record.
    resolved: Option<(u64, Bytes, Bytes)>,
    saw_lock: bool,
    /// The last key visited (valid when `has_last_key`); a buffer reused across keys, so the
    /// scan allocates nothing per key.
    last_key: Vec<u8>,
    has_last_key: bool,
    /// The key of the last row [`MvccScanner::fill`] handed out (valid when `has_emitted`):
    /// a caller that resumes after it (the coprocessor's paging) reads it once per call
    /// instead of copying every row's key itself.
    emitted: Vec<u8>,
    has_emitted: bool,
    scanned_keys: u64,
}

impl SnapAccess {
    /// A scan at `start_ts` over `[start, end)` (empty `end` = the shard's end). Every lock in
    /// the range is checked first: one that blocks the read fails the call with
    /// [`crate::Error::KeyIsLocked`].
    pub fn mvcc_scan(
        &self,
        start: &[u8],
        end: &[u8],
        start_ts: u64,
        reverse: bool,
        bypass: &[u64],
    ) -> Result<MvccScanner<'_>> {
        let saw_lock = self.check_locks_in_range(start, end, start_ts, bypass)?;
        let iter = self.iter(ColumnFamily::Write, start, end, start_ts, reverse)?;
        let (lower, upper) = self.clip(start, end);
        let mut s = MvccScanner {
            snap: self,
            iter,
            start_ts,
            reverse,
            lower,
            upper,
            resolved: None,
            saw_lock,
            last_key: Vec::new(),
            has_last_key: false,
            emitted: Vec::new(),
            has_emitted: false,
            scanned_keys: 0,
        };
        s.settle()?;
        Ok(s)
    }

    /// `[start, end)` clipped to the shard's range (empty end = unbounded).
    pub(crate) fn clip(&self, start: &[u8], end: &[u8]) -> (Vec<u8>, Vec<u8>) {
        let d = &*self.data;
        let lower = start.max(d.start().as_ref());
        let upper = match (end.is_empty(), d.end().is_empty()) {
            (true, _) => d.end().as_ref(),
            (false, true) => end,
            (false, false) => end.min(d.end().as_ref()),
        };
        (lower.to_vec(), upper.to_vec())
    }

    /// Whether `[lower, upper)` holds a WRITE version newer than `start_ts` or any lock
    /// (see the module docs). Exact when it answers `false`.
    pub fn newer_ts_in_range(&self, lower: &[u8], upper: &[u8], start_ts: u64) -> Result<bool> {
        let (lower, upper) = self.clip(lower, upper);
        if !upper.is_empty() && lower >= upper {
            return Ok(false);
        }
        let below_upper = |k: &[u8]| upper.is_empty() || k < upper.as_slice();
        let d = &*self.data;
        for mem in d.memtables() {
            let cf = mem.cf(ColumnFamily::Write);
            if cf.max_version() <= start_ts {
                continue;
            }
            for kv in cf.iter_all_from(&lower) {
                if !below_upper(kv.key()) {
                    break;
                }
                if kv.versions().next().is_some_and(|v| v.version() > start_ts) {
                    return Ok(true);
                }
            }
        }
        if let Some(remote) = &d.remote
            && remote.max_version() > start_ts
        {
            let mut newer = false;
            remote.visit_keys_from(&lower, |k| {
                if !below_upper(k.key()) {
                    return Ok(false);
                }
                newer = k
                    .versions_newest_first()
                    .next()
                    .is_some_and(|v| v.version() > start_ts);
                Ok(!newer)
            })?;
            if newer {
                return Ok(true);
            }
        }
        let write = ColumnFamily::Write.index();
        let tables = d
            .l0s
            .iter()
            .filter_map(|l0| l0.cf(ColumnFamily::Write))
            .chain(d.levels[write].iter().flatten());
        for t in tables {
            let p = t.properties();
            if p.max_ts <= start_ts
                || p.biggest.as_slice() < lower.as_slice()
                || !below_upper(&p.smallest)
            {
                continue;
            }
            let mut it = t.iter(u64::MAX);
            it.seek(&lower)?;
            while it.valid() && below_upper(it.key()) {
                if it.version_number() > start_ts {
                    return Ok(true);
                }
                it.next()?;
            }
        }
        if self.may_have_locks() {
            let it = self.iter(
                ColumnFamily::Lock,
                &lower,
                &upper,
                self.snap_version(),
                false,
            )?;
            if it.valid() {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

impl MvccScanner<'_> {
    /// Skips keys whose visible record is a Lock or Rollback with nothing committed below.
    fn settle(&mut self) -> Result<()> {
        self.resolved = None;
        while self.iter.valid() {
            let key = self.iter.key();
            self.scanned_keys += 1;
            self.last_key.clear();
            self.last_key.extend_from_slice(key);
            self.has_last_key = true;
            if !write_kind(key, self.iter.user_meta())?.is_skipped_by_reads() {
                return Ok(());
            }
            // Rare: look below the skipped record with point reads.
            let below = self.iter.version().checked_sub(1);
            if let Some(ts) = below
                && let Some(item) = self.snap.committed_value(key, ts)?
            {
                self.resolved = Some((item.version, item.user_meta, item.value));
                return Ok(());
            }
            self.iter.next()?;
        }
        Ok(())
    }

    pub fn valid(&self) -> bool {
        self.iter.valid()
    }

    pub fn key(&self) -> &[u8] {
        self.iter.key()
    }

    pub fn value(&self) -> &[u8] {
        match &self.resolved {
            Some((_, _, v)) => v,
            None => self.iter.value(),
        }
    }

    /// The commit_ts of the current value.
    pub fn commit_ts(&self) -> u64 {
        match &self.resolved {
            Some((version, _, _)) => *version,
            None => self.iter.version(),
        }
    }

    pub fn user_meta(&self) -> &[u8] {
        match &self.resolved {
            Some((_, m, _)) => m,
            None => self.iter.user_meta(),
        }
    }

    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<()> {
        if !self.iter.valid() {
            return Ok(());
        }
        self.iter.next()?;
        self.settle()
    }

    /// Hands up to `max` rows (key, committed value) to `row`, in scan order, and returns how
    /// many it handed; the scanner is left on the next row. The same rows as `key`/`value`/
    /// `next`, read block by block where they can be ([`SnapIter::next_run`]): the kind of each
    /// row's WRITE record is checked inside the run, and a Lock or Rollback record (or one
    /// that does not decode) ends the run so the row-at-a-time path handles it.
    ///
    /// An error from `row` stops the scan and is returned as is.
    pub fn fill<E: From<Error>>(
        &mut self,
        max: usize,
        mut row: impl FnMut(&[u8], &[u8]) -> std::result::Result<(), E>,
    ) -> std::result::Result<usize, E> {
        let mut n = 0;
        while n < max && self.iter.valid() {
            if self.resolved.is_none() {
                let mut failed: Option<E> = None;
                let run = self.iter.next_run(max - n, |r| {
                    if !WriteMeta::peek_kind(r.user_meta).is_ok_and(|k| !k.is_skipped_by_reads()) {
                        return false;
                    }
                    if let Err(e) = row(r.key, r.value) {
                        failed = Some(e);
                        return false;
                    }
                    true
                })?;
                // (An error from the run itself returns above with `emitted` not updated: a
                // failed fill is not resumed, so nothing reads it then.)
                if run > 0 {
                    // The run's last row, copied once (not per row inside the run).
                    self.emitted.clear();
                    self.emitted.extend_from_slice(self.iter.last_run_key());
                    self.has_emitted = true;
                }
                if let Some(e) = failed {
                    return Err(e);
                }
                if run > 0 {
                    n += run;
                    // Every row of the run was visited; `settle` below records the row the run
                    // stopped on, if any, and otherwise the run's last row is the last visited.
                    self.last_key.clear();
                    self.last_key.extend_from_slice(&self.emitted);
                    // The run's first row was the current one, counted when the scanner
                    // settled on it; `settle` counts the row the run stopped on.
                    self.scanned_keys += run as u64 - 1;
                    self.settle()?;
                    continue;
                }
            }
            row(self.key(), self.value())?;
            self.emitted.clear();
            self.emitted.extend_from_slice(self.iter.key());
            self.has_emitted = true;
            n += 1;
            self.next()?;
        }
        Ok(n)
    }

    /// The key of the last row [`MvccScanner::fill`] handed to its callback, if any.
    pub fn last_emitted(&self) -> Option<&[u8]> {
        self.has_emitted.then_some(self.emitted.as_slice())
    }

    /// Keys the scan has visited (including skipped ones).
    pub fn scanned_keys(&self) -> u64 {
        self.scanned_keys
    }

    /// The last key the scan visited, if any.
    pub fn last_key(&self) -> Option<&[u8]> {
        self.has_last_key.then_some(self.last_key.as_slice())
    }

    pub fn start_ts(&self) -> u64 {
        self.start_ts
    }

    /// Whether the span scanned so far (from the scan's start to the current position, or the
    /// whole range once the scan ended) holds a version newer than start_ts or a lock. A
    /// `false` is exact; see the module docs.
    pub fn met_newer_ts_data(&self) -> Result<bool> {
        if self.saw_lock {
            return Ok(true);
        }
        let (lower, upper) = match (self.iter.valid(), self.last_key()) {
            // Ended: the whole range was scanned.
            (false, _) | (_, None) => (self.lower.clone(), self.upper.clone()),
            (true, Some(last)) if self.reverse => (last.to_vec(), self.upper.clone()),
            (true, Some(last)) => {
                let mut end = last.to_vec();
                end.push(0);
                (self.lower.clone(), end)
            }
        };
        self.snap.newer_ts_in_range(&lower, &upper, self.start_ts)
    }
}
