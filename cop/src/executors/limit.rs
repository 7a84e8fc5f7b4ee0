//! Limit: the first `limit` rows, then drained (the scan below stops reading).

use crate::batch::Batch;
use crate::error::Result;
use crate::executors::{BatchExecutor, BatchResult};
use wire::datum::EvalType;

pub struct LimitExecutor<'a> {
    src: Box<dyn BatchExecutor + 'a>,
    remaining: u64,
}

impl<'a> LimitExecutor<'a> {
    pub(crate) fn new(src: Box<dyn BatchExecutor + 'a>, limit: u64) -> Self {
        LimitExecutor {
            src,
            remaining: limit,
        }
    }
}

impl BatchExecutor for LimitExecutor<'_> {
    fn schema(&self) -> &[EvalType] {
        self.src.schema()
    }

    /// Passes `scan_rows` through unchanged (as TiKV does): the last batch may read more rows
    /// than the limit needs, which keeps the batch sizes, and so which rows an expression below
    /// is evaluated on, independent of the limit.
    fn next_batch(&mut self, scan_rows: usize) -> Result<BatchResult> {
        if self.remaining == 0 {
            return Ok(BatchResult {
                batch: Batch::empty(self.src.schema()),
                is_drained: true,
            });
        }
        let mut r = self.src.next_batch(scan_rows)?;
        let n = r.batch.logical_rows.len() as u64;
        if n >= self.remaining {
            r.batch.logical_rows.truncate(self.remaining as usize);
            self.remaining = 0;
            r.is_drained = true;
        } else {
            self.remaining -= n;
        }
        Ok(r)
    }

    fn source(&self) -> Option<&dyn BatchExecutor> {
        Some(&*self.src)
    }
}
