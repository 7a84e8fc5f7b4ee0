//! Simple aggregation (no GROUP BY): one partial row over all input rows, and **no row at all
//! over no input rows**, so that a region without matching rows adds nothing to the client's
//! merge (an empty region would otherwise contribute a COUNT of 0 and NULL sums, harmless for
//! COUNT/SUM but a wasted row per region).
//!
//! Paging: the single group counts as one group; with `paging_size` 1 the partial row is
//! emitted as soon as it exists, so the page ends after the first batch that had rows.

use crate::batch::Batch;
use crate::error::Result;
use crate::executors::aggregation::Aggregates;
use crate::executors::{BatchExecutor, BatchResult, BatchSize};
use wire::coprocessor as proto;
use wire::datum::EvalType;

pub struct SimpleAggExecutor<'a> {
    src: Box<dyn BatchExecutor + 'a>,
    aggs: Aggregates,
    schema: Vec<EvalType>,
    batch_size: BatchSize,
    /// 0 = no paging.
    paging_size: u64,
    drained: bool,
}

impl<'a> SimpleAggExecutor<'a> {
    pub(crate) fn new(
        src: Box<dyn BatchExecutor + 'a>,
        agg: &proto::Aggregation,
        paging_size: u64,
    ) -> Result<Self> {
        let aggs = Aggregates::build(&agg.agg_func, src.schema())?;
        let schema = aggs.output_types();
        Ok(SimpleAggExecutor {
            src,
            aggs,
            schema,
            batch_size: BatchSize::default(),
            paging_size,
            drained: false,
        })
    }

    fn emit(&mut self, is_drained: bool) -> Result<BatchResult> {
        let rows = self.aggs.groups();
        let columns = self.aggs.take_output()?;
        Ok(BatchResult {
            batch: Batch {
                columns,
                logical_rows: (0..rows).collect(),
            },
            is_drained,
        })
    }
}

impl BatchExecutor for SimpleAggExecutor<'_> {
    fn schema(&self) -> &[EvalType] {
        &self.schema
    }

    /// Consumes one source batch per call (so the caller can check its deadline between
    /// batches); returns the partial row when the source is drained or the page is full.
    fn next_batch(&mut self, _scan_rows: usize) -> Result<BatchResult> {
        if self.drained {
            return Ok(BatchResult {
                batch: Batch::empty(&self.schema),
                is_drained: true,
            });
        }
        let r = self.src.next_batch(self.batch_size.next_size())?;
        if !r.batch.is_empty() {
            if self.aggs.groups() == 0 {
                self.aggs.push_group();
            }
            self.aggs.update(&r.batch, None)?;
        }
        if r.is_drained {
            self.drained = true;
            return self.emit(true);
        }
        if self.paging_size > 0 && self.aggs.groups() as u64 >= self.paging_size {
            return self.emit(false);
        }
        Ok(BatchResult {
            batch: Batch::empty(&self.schema),
            is_drained: false,
        })
    }

    fn source(&self) -> Option<&dyn BatchExecutor> {
        Some(&*self.src)
    }

    fn is_resumable(&self) -> bool {
        self.aggs.groups() == 0 && self.src.is_resumable()
    }
}
