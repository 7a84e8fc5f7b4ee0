//! TopN: the first `limit` rows in ORDER BY order, kept in a bounded binary heap.
//!
//! Ordering is SQL's ([`Datum::sql_cmp`]): NULL first ascending (last descending); rows that
//! compare equal keep their input order, so the result is deterministic and equals a stable
//! sort of the input followed by a cut at `limit`.
//!
//! **Pass-through under paging**: when the request pages and `limit > paging_size`, the heap
//! would have to see the whole region before emitting anything, so no page could end early.
//! The executor then forwards its source's batches unchanged; the client applies the final
//! TopN over all pages. When `limit <= paging_size` the heap result fits in one page: it is
//! built over the whole range and returned without a resume range.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::Arc;

use crate::batch::{Batch, Column};
use crate::error::{EvalError, Result};
use crate::executors::{
    BatchExecutor, BatchResult, BatchSize, Evaluated, Operand, ensure_identity,
};
use wire::coprocessor as proto;
use wire::datum::{Datum, EvalType};

/// One heap entry. Ordered by the sort keys, then by arrival (`seq`), so the heap's top is the
/// row that goes first when a better one arrives.
struct Entry {
    keys: Vec<Datum>,
    seq: u64,
    row: Vec<Datum>,
    /// Which keys sort descending (shared by every entry).
    desc: Arc<[bool]>,
}

fn cmp_keys(a: &[Datum], b: &[Datum], desc: &[bool]) -> Ordering {
    for ((x, y), d) in a.iter().zip(b).zip(desc) {
        let o = x.sql_cmp(y);
        let o = if *d { o.reverse() } else { o };
        if o.is_ne() {
            return o;
        }
    }
    Ordering::Equal
}

impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        cmp_keys(&self.keys, &other.keys, &self.desc).then(self.seq.cmp(&other.seq))
    }
}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for Entry {}

pub struct TopNExecutor<'a> {
    src: Box<dyn BatchExecutor + 'a>,
    order_by: Vec<Operand>,
    desc: Arc<[bool]>,
    limit: usize,
    /// Forward source batches unchanged (paging with `limit > paging_size`).
    pass_through: bool,
    /// The best rows so far: a max-heap, its top the worst row kept.
    heap: BinaryHeap<Entry>,
    seq: u64,
    batch_size: BatchSize,
    drained: bool,
    identity: Vec<usize>,
}

impl<'a> TopNExecutor<'a> {
    pub(crate) fn new(
        src: Box<dyn BatchExecutor + 'a>,
        top: &proto::TopN,
        paging_size: u64,
    ) -> Result<Self> {
        let mut order_by = Vec::with_capacity(top.order_by.len());
        let mut desc = Vec::with_capacity(top.order_by.len());
        for item in &top.order_by {
            let e = item.expr.as_ref().ok_or_else(|| {
                crate::Error::InvalidRequest("order-by item without expression".into())
            })?;
            order_by.push(Operand::build(e, src.schema())?);
            desc.push(item.desc);
        }
        if order_by.is_empty() {
            return Err(crate::Error::InvalidRequest(
                "top n needs order-by items".into(),
            ));
        }
        Ok(TopNExecutor {
            src,
            order_by,
            desc: desc.into(),
            // A limit beyond memory cannot be reached anyway; usize caps it on 32-bit hosts.
            limit: usize::try_from(top.limit).unwrap_or(usize::MAX),
            pass_through: paging_size > 0 && top.limit > paging_size,
            heap: BinaryHeap::new(),
            seq: 0,
            batch_size: BatchSize::default(),
            drained: false,
            identity: Vec::new(),
        })
    }

    /// Offers every live row of `batch` to the heap.
    fn consume(&mut self, batch: &Batch) -> Result<()> {
        let n = batch.logical_rows.len();
        let evaluated = self
            .order_by
            .iter()
            .map(|o| o.eval(batch))
            .collect::<Result<Vec<Evaluated>, _>>()?;
        ensure_identity(&mut self.identity, n);
        let views: Vec<(&Column, &[usize])> = evaluated
            .iter()
            .map(|e| e.view(batch, &self.identity))
            .collect();
        for (j, &p) in batch.logical_rows.iter().enumerate() {
            let keys: Vec<Datum> = views.iter().map(|(c, rows)| c.datum(rows[j])).collect();
            let seq = self.seq;
            self.seq += 1;
            if self.heap.len() >= self.limit {
                let Some(top) = self.heap.peek() else { break };
                // Equal keys: the earlier row (in the heap) wins.
                if cmp_keys(&keys, &top.keys, &self.desc).is_ge() {
                    continue;
                }
                self.heap.pop();
            }
            let row = batch.columns.iter().map(|c| c.datum(p)).collect();
            self.heap.push(Entry {
                keys,
                seq,
                row,
                desc: self.desc.clone(),
            });
        }
        Ok(())
    }

    /// The kept rows, best first.
    fn emit(&mut self) -> Result<BatchResult> {
        let entries = std::mem::take(&mut self.heap).into_sorted_vec();
        let mut columns: Vec<Column> = self
            .src
            .schema()
            .iter()
            .map(|t| Column::with_capacity(*t, entries.len()))
            .collect();
        for e in &entries {
            for (col, d) in columns.iter_mut().zip(&e.row) {
                col.push_datum(d).map_err(EvalError::type_error)?;
            }
        }
        Ok(BatchResult {
            batch: Batch {
                columns,
                logical_rows: (0..entries.len()).collect(),
            },
            is_drained: true,
        })
    }
}

impl BatchExecutor for TopNExecutor<'_> {
    fn schema(&self) -> &[EvalType] {
        self.src.schema()
    }

    fn next_batch(&mut self, scan_rows: usize) -> Result<BatchResult> {
        if self.pass_through {
            return self.src.next_batch(scan_rows);
        }
        if self.drained || self.limit == 0 {
            self.drained = true;
            return Ok(BatchResult {
                batch: Batch::empty(self.src.schema()),
                is_drained: true,
            });
        }
        let r = self.src.next_batch(self.batch_size.next_size())?;
        if !r.batch.is_empty() {
            self.consume(&r.batch)?;
        }
        if r.is_drained {
            self.drained = true;
            return self.emit();
        }
        Ok(BatchResult {
            batch: Batch::empty(self.src.schema()),
            is_drained: false,
        })
    }

    fn source(&self) -> Option<&dyn BatchExecutor> {
        Some(&*self.src)
    }

    fn is_resumable(&self) -> bool {
        // Pass-through forwards whole batches; the heap holds rows not yet returned.
        (self.pass_through || self.heap.is_empty()) && self.src.is_resumable()
    }
}
