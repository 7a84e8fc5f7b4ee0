//! Execution summaries: a wrapper that times an executor and counts what it produced, used only
//! when the DAG asks for summaries (the timing calls are not free).

use std::time::Instant;

use crate::error::Result;
use crate::executors::{BatchExecutor, BatchResult, ScanProgress};
use wire::coprocessor::ExecutionSummary;
use wire::datum::EvalType;

pub struct Summarized<'a> {
    inner: Box<dyn BatchExecutor + 'a>,
    summary: ExecutionSummary,
}

impl<'a> Summarized<'a> {
    pub(crate) fn new(inner: Box<dyn BatchExecutor + 'a>) -> Self {
        Summarized {
            inner,
            summary: ExecutionSummary::default(),
        }
    }
}

impl BatchExecutor for Summarized<'_> {
    fn schema(&self) -> &[EvalType] {
        self.inner.schema()
    }

    /// Times include the executors below (as TiKV reports them).
    fn next_batch(&mut self, scan_rows: usize) -> Result<BatchResult> {
        let t0 = Instant::now();
        let r = self.inner.next_batch(scan_rows);
        self.summary.time_processed_ns += t0.elapsed().as_nanos() as u64;
        self.summary.num_iterations += 1;
        if let Ok(r) = &r {
            self.summary.num_produced_rows += r.batch.rows() as u64;
        }
        r
    }

    fn source(&self) -> Option<&dyn BatchExecutor> {
        self.inner.source()
    }

    fn scan_progress(&self) -> Option<&dyn ScanProgress> {
        self.inner.scan_progress()
    }

    fn is_resumable(&self) -> bool {
        self.inner.is_resumable()
    }

    fn collect_summaries(&self, out: &mut Vec<ExecutionSummary>) {
        self.inner.collect_summaries(out);
        out.push(self.summary.clone());
    }
}
