//! Vectorized executors: each pulls column batches from the one below it (TiKV's batch
//! executors).
//!
//! A DAG is a chain in post order: a scan ([`table_scan`], [`index_scan`]) at the bottom, then
//! any of [`selection`], [`simple_agg`] / [`hash_agg`] (partial aggregation, functions in
//! [`aggregation`]), [`top_n`], [`limit`], [`projection`]. [`build`] turns the wire DAG into
//! that chain, checking every enumeration and offset on the way, so that execution only meets
//! errors of the data (evaluation) or of the storage.
//!
//! **Batch sizes** grow 32 → 1024, doubling on every call ([`BatchSize`]): a query that needs a
//! few rows (a LIMIT, a point range) does little work, and a long scan quickly reaches batches
//! big enough to amortize per-batch costs.
//!
//! **Resumability** (paging): a page may only end where the rows returned so far are exactly
//! the result of the keys scanned so far: after a streaming executor returned a batch, or after
//! a paging aggregation flushed its groups. [`BatchExecutor::is_resumable`] says whether the
//! chain is at such a point; the scan says what it has covered
//! ([`ScanProgress::scanned_range`]).

pub mod aggregation;
pub mod hash_agg;
pub mod index_scan;
pub mod limit;
pub mod projection;
mod range_scanner;
pub mod selection;
pub mod simple_agg;
pub mod summary;
pub mod table_scan;
pub mod top_n;

use kvengine::SnapAccess;

use crate::batch::{Batch, Column};
use crate::error::{Error, EvalError, Result};
use crate::expr::{CompiledExpr, Expr};
use wire::coprocessor::{self as proto, ExecType, KeyRange};
use wire::datum::{EvalType, FieldType};

pub use range_scanner::is_point_range;

/// The first batch a scan returns holds at most this many rows...
pub const INITIAL_BATCH_SIZE: usize = 32;
/// ...and each next one twice as many, up to this.
pub const MAX_BATCH_SIZE: usize = 1024;

/// The growing batch size of one consumer (the handler, or a blocking executor reading its
/// source).
#[derive(Debug, Clone, Copy)]
pub struct BatchSize(usize);

impl Default for BatchSize {
    fn default() -> Self {
        BatchSize(INITIAL_BATCH_SIZE)
    }
}

impl BatchSize {
    /// The size to ask for now; the next call returns twice as much, up to [`MAX_BATCH_SIZE`].
    pub fn next_size(&mut self) -> usize {
        let n = self.0;
        self.0 = (self.0 * 2).min(MAX_BATCH_SIZE);
        n
    }
}

/// What one call of [`BatchExecutor::next_batch`] produced.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BatchResult {
    pub batch: Batch,
    /// Nothing more will come: the caller stops calling.
    pub is_drained: bool,
}

/// How far the scan at the bottom of a chain got: what the handler reports after execution.
pub trait ScanProgress {
    /// Keys the MVCC scanners visited (point gets count one each).
    fn scanned_keys(&self) -> u64;
    /// The key span the rows returned so far cover (see [`wire::paging`]); `None` before the
    /// first key.
    fn scanned_range(&self) -> Option<KeyRange>;
    /// Whether the span scanned so far is known to hold no version newer than the read's
    /// start_ts and no lock. `false` when newer-ts tracking was not asked for or a check
    /// failed (unknown counts as not cacheable).
    fn newer_ts_free(&self) -> bool;
}

/// One executor of a chain.
pub trait BatchExecutor {
    /// The types of the output columns.
    fn schema(&self) -> &[EvalType];

    /// Produces the next batch. `scan_rows` bounds how many rows a streaming chain may return
    /// (the scan reads at most that many); blocking executors size their own source reads.
    /// An [`Error::Eval`] is a property of the data and goes back inside the response data.
    fn next_batch(&mut self, scan_rows: usize) -> Result<BatchResult>;

    /// The executor this one reads from; `None` for a scan.
    fn source(&self) -> Option<&dyn BatchExecutor>;

    /// The scan at the bottom of the chain.
    fn scan_progress(&self) -> Option<&dyn ScanProgress> {
        self.source().and_then(|s| s.scan_progress())
    }

    /// Whether the rows returned so far are exactly the result of the keys scanned so far, so a
    /// page may end here. Streaming executors are resumable whenever their source is; blocking
    /// ones only while they hold nothing.
    fn is_resumable(&self) -> bool {
        self.source().is_none_or(|s| s.is_resumable())
    }

    /// Appends execution summaries of this chain, bottom first (only [`summary::Summarized`]
    /// records any).
    fn collect_summaries(&self, out: &mut Vec<proto::ExecutionSummary>) {
        if let Some(s) = self.source() {
            s.collect_summaries(out);
        }
    }
}

/// What building a chain needs besides the DAG.
pub struct BuildContext<'a> {
    pub snap: &'a SnapAccess,
    pub start_ts: u64,
    /// The request's ranges, ascending and non-overlapping.
    pub ranges: Vec<KeyRange>,
    /// Rows (or aggregation groups) per page; 0 = no paging.
    pub paging_size: u64,
    /// Ask the scan whether it met newer data (costs a check per scanned range): only when the
    /// request enabled the cache.
    pub track_newer_ts: bool,
    /// Wrap every executor to record an [`proto::ExecutionSummary`].
    pub collect_summaries: bool,
}

/// Builds the executor chain of a DAG.
///
/// Errors: a malformed DAG (unknown enumeration, missing executor body, bad offset) is
/// [`Error::InvalidRequest`]; an expression that cannot take its input types is
/// [`Error::Eval`] (it goes back inside the response data, as TiKV does).
pub fn build<'a>(
    dag: &proto::DagRequest,
    ctx: BuildContext<'a>,
) -> Result<Box<dyn BatchExecutor + 'a>> {
    let mut execs = dag.executors.iter();
    let Some(first) = execs.next() else {
        return Err(Error::InvalidRequest("dag has no executor".into()));
    };
    let collect = ctx.collect_summaries;
    let paging_size = ctx.paging_size;
    let mut root: Box<dyn BatchExecutor + 'a> = match exec_type(first)? {
        ExecType::TableScan => {
            let scan = first
                .tbl_scan
                .as_ref()
                .ok_or_else(|| missing_body("table scan"))?;
            Box::new(table_scan::TableScanExecutor::new(scan, ctx)?)
        }
        ExecType::IndexScan => {
            let scan = first
                .idx_scan
                .as_ref()
                .ok_or_else(|| missing_body("index scan"))?;
            Box::new(index_scan::IndexScanExecutor::new(scan, ctx)?)
        }
        other => {
            return Err(Error::InvalidRequest(format!(
                "the first executor must be a scan, found={other:?}"
            )));
        }
    };
    if collect {
        root = Box::new(summary::Summarized::new(root));
    }
    for e in execs {
        root = match exec_type(e)? {
            ExecType::TableScan | ExecType::IndexScan => {
                return Err(Error::InvalidRequest(
                    "a scan may only be the first executor".into(),
                ));
            }
            ExecType::Selection => {
                let s = e
                    .selection
                    .as_ref()
                    .ok_or_else(|| missing_body("selection"))?;
                Box::new(selection::SelectionExecutor::new(root, s)?)
            }
            ExecType::SimpleAgg => {
                let a = e
                    .aggregation
                    .as_ref()
                    .ok_or_else(|| missing_body("aggregation"))?;
                if !a.group_by.is_empty() {
                    return Err(Error::InvalidRequest(
                        "a simple aggregation has no group-by items".into(),
                    ));
                }
                Box::new(simple_agg::SimpleAggExecutor::new(root, a, paging_size)?)
            }
            ExecType::HashAgg => {
                let a = e
                    .aggregation
                    .as_ref()
                    .ok_or_else(|| missing_body("aggregation"))?;
                Box::new(hash_agg::HashAggExecutor::new(root, a, paging_size)?)
            }
            ExecType::TopN => {
                let t = e.top_n.as_ref().ok_or_else(|| missing_body("top n"))?;
                Box::new(top_n::TopNExecutor::new(root, t, paging_size)?)
            }
            ExecType::Limit => {
                let l = e.limit.as_ref().ok_or_else(|| missing_body("limit"))?;
                Box::new(limit::LimitExecutor::new(root, l.limit))
            }
            ExecType::Projection => {
                let p = e
                    .projection
                    .as_ref()
                    .ok_or_else(|| missing_body("projection"))?;
                Box::new(projection::ProjectionExecutor::new(root, p)?)
            }
        };
        if collect {
            root = Box::new(summary::Summarized::new(root));
        }
    }
    Ok(root)
}

fn exec_type(e: &proto::Executor) -> Result<ExecType> {
    ExecType::from_i32(e.tp)
        .ok_or_else(|| Error::InvalidRequest(format!("unknown executor type: tp={}", e.tp)))
}

fn missing_body(what: &str) -> Error {
    Error::InvalidRequest(format!("{what} executor without its body"))
}

pub(crate) fn field_type(tp: i32, column_id: i64) -> Result<FieldType> {
    FieldType::from_i32(tp).ok_or_else(|| {
        Error::InvalidRequest(format!(
            "unknown column type: tp={tp} column_id={column_id}"
        ))
    })
}

/// An expression input of an executor: a bare column reference is read in place (no copy),
/// anything else is evaluated per batch.
pub(crate) struct Operand(CompiledExpr);

impl Operand {
    pub(crate) fn build(e: &proto::Expr, input: &[EvalType]) -> Result<Operand, EvalError> {
        Ok(Operand(Expr::build(e, input)?))
    }

    pub(crate) fn result_type(&self) -> EvalType {
        self.0.result_type()
    }

    /// The value when the operand is a constant.
    pub(crate) fn constant(&self) -> Option<wire::datum::Datum> {
        self.0.as_constant()
    }

    /// Evaluates the operand over the batch's live rows (a column reference costs nothing).
    pub(crate) fn eval(&self, batch: &Batch) -> Result<Evaluated, EvalError> {
        if let Some(i) = self.0.as_column_ref() {
            return Ok(Evaluated::InPlace(i));
        }
        let col = self.0.eval(&batch.columns, &batch.logical_rows)?;
        if col.len() != batch.logical_rows.len() {
            return Err(EvalError::type_error(format!(
                "expression returned {} values for {} rows",
                col.len(),
                batch.logical_rows.len()
            )));
        }
        Ok(Evaluated::Dense(col))
    }
}

/// An operand's values for one batch.
pub(crate) enum Evaluated {
    /// A column of the batch, read through its logical rows.
    InPlace(usize),
    /// One value per logical row.
    Dense(Column),
}

impl Evaluated {
    /// `(column, rows)` where `rows[j]` is the physical index in `column` of logical row `j`.
    /// A dense column's rows are `identity[..n]`, which the caller sized with
    /// [`ensure_identity`].
    pub(crate) fn view<'b>(
        &'b self,
        batch: &'b Batch,
        identity: &'b [usize],
    ) -> (&'b Column, &'b [usize]) {
        match self {
            Evaluated::InPlace(i) => (&batch.columns[*i], &batch.logical_rows),
            Evaluated::Dense(col) => (col, &identity[..batch.logical_rows.len()]),
        }
    }
}

/// Grows `identity` to hold `0..n` (it is never shrunk, so it is built once per executor).
pub(crate) fn ensure_identity(identity: &mut Vec<usize>, n: usize) {
    while identity.len() < n {
        identity.push(identity.len());
    }
}
