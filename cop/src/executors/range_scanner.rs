//! The key-range walk shared by the table and index scans: ranges in request order (reverse
//! order when descending), point ranges as MVCC gets, one MVCC scanner per other range, and
//! the bookkeeping the handler reports afterwards (scanned keys, the span covered, newer-ts
//! checks).

use kvengine::SnapAccess;
use kvengine::mvcc::MvccScanner;

use crate::error::Result;
use crate::executors::ScanProgress;
use wire::coprocessor::KeyRange;
use wire::paging;

/// Whether `r` covers exactly one key: `end == start + 0x00` (how a client asks for a point).
pub fn is_point_range(r: &KeyRange) -> bool {
    r.end.len() == r.start.len() + 1 && r.end.last() == Some(&0) && r.end.starts_with(&r.start)
}

pub(crate) struct RangeScanner<'a> {
    snap: &'a SnapAccess,
    start_ts: u64,
    desc: bool,
    /// In processing order: ascending, or reversed when `desc`.
    ranges: Vec<KeyRange>,
    next_range: usize,
    current: Option<MvccScanner<'a>>,
    /// Keys visited by finished scanners and point gets.
    finished_scanned_keys: u64,
    track_newer_ts: bool,
    /// False once a finished range had (or could not rule out) newer data.
    finished_newer_ts_free: bool,
    /// The last key handed to the row callback (or looked up by a point get).
    last_key: Vec<u8>,
    has_last_key: bool,
    drained: bool,
}

impl<'a> RangeScanner<'a> {
    /// `ranges` ascending and non-overlapping (the handler checks).
    pub(crate) fn new(
        snap: &'a SnapAccess,
        start_ts: u64,
        mut ranges: Vec<KeyRange>,
        desc: bool,
        track_newer_ts: bool,
    ) -> RangeScanner<'a> {
        ranges.retain(|r| r.end.is_empty() || r.start < r.end);
        if desc {
            ranges.reverse();
        }
        RangeScanner {
            snap,
            start_ts,
            desc,
            ranges,
            next_range: 0,
            current: None,
            finished_scanned_keys: 0,
            track_newer_ts,
            finished_newer_ts_free: true,
            last_key: Vec::new(),
            has_last_key: false,
            drained: false,
        }
    }

    pub(crate) fn is_drained(&self) -> bool {
        self.drained
    }

    /// Calls `row(key, value)` for up to `max_rows` visible rows, in scan order. Returns the
    /// number of rows visited; [`Self::is_drained`] tells whether the ranges are exhausted.
    ///
    /// The next range is opened (lock check, point get) only while rows are still wanted, so a
    /// page that ends at a range boundary does not pay for the next range.
    pub(crate) fn fill(
        &mut self,
        max_rows: usize,
        mut row: impl FnMut(&[u8], &[u8]) -> Result<()>,
    ) -> Result<usize> {
        let mut rows = 0;
        loop {
            if let Some(s) = &mut self.current {
                if !s.valid() {
                    self.finish_current();
                    continue;
                }
                if rows == max_rows {
                    break;
                }
                let n = s.fill(max_rows - rows, &mut row)?;
                // The scanner keeps the last row's key: one copy per call, not per row.
                if n > 0
                    && let Some(key) = s.last_emitted()
                {
                    self.last_key.clear();
                    self.last_key.extend_from_slice(key);
                    self.has_last_key = true;
                }
                rows += n;
                continue;
            }
            if self.next_range == self.ranges.len() {
                self.drained = true;
                break;
            }
            if rows == max_rows {
                break;
            }
            let r = &self.ranges[self.next_range];
            self.next_range += 1;
            if is_point_range(r) {
                let item = self.snap.mvcc_get(&r.start, self.start_ts, &[])?;
                self.finished_scanned_keys += 1;
                if self.track_newer_ts && self.finished_newer_ts_free {
                    self.finished_newer_ts_free = matches!(
                        self.snap.newer_ts_in_range(&r.start, &r.end, self.start_ts),
                        Ok(false)
                    );
                }
                if let Some(item) = item {
                    row(&r.start, &item.value)?;
                    rows += 1;
                }
                self.last_key.clear();
                self.last_key.extend_from_slice(&r.start);
                self.has_last_key = true;
            } else {
                self.current =
                    Some(
                        self.snap
                            .mvcc_scan(&r.start, &r.end, self.start_ts, self.desc, &[])?,
                    );
            }
        }
        Ok(rows)
    }

    /// Folds the current (exhausted) scanner into the totals.
    fn finish_current(&mut self) {
        if let Some(s) = self.current.take() {
            self.finished_scanned_keys += s.scanned_keys();
            if self.track_newer_ts && self.finished_newer_ts_free {
                self.finished_newer_ts_free = matches!(s.met_newer_ts_data(), Ok(false));
            }
        }
    }
}

impl ScanProgress for RangeScanner<'_> {
    fn scanned_keys(&self) -> u64 {
        self.finished_scanned_keys + self.current.as_ref().map_or(0, |s| s.scanned_keys())
    }

    fn scanned_range(&self) -> Option<KeyRange> {
        if !self.has_last_key {
            return None;
        }
        // The first range in processing order bounds the covered span on the far side.
        let first = self.ranges.first()?;
        Some(paging::scanned_range(first, &self.last_key, self.desc))
    }

    fn newer_ts_free(&self) -> bool {
        self.track_newer_ts
            && self.finished_newer_ts_free
            && self
                .current
                .as_ref()
                .is_none_or(|s| matches!(s.met_newer_ts_data(), Ok(false)))
    }
}
