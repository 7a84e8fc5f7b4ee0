//! Index scan: index keys `t{table_id}_i{index_id}{values}[{handle}]`, decoded into column
//! batches.
//!
//! The index columns come from the key (memcomparable datums, in index order). The handle, for
//! a trailing `pk_handle` column, comes from the key; a unique index keeps it in the value
//! instead, except for entries whose key already carries it (TiDB appends the handle to a
//! unique key that holds a NULL, since NULLs do not collide).

use crate::batch::{Batch, Column};
use crate::error::{Error, EvalError, Result};
use crate::executors::range_scanner::RangeScanner;
use crate::executors::table_scan::{ScanColumn, push_handle};
use crate::executors::{BatchExecutor, BatchResult, BuildContext, ScanProgress};
use wire::codec::table::{decode_index_key, decode_unique_index_value};
use wire::coprocessor as proto;
use wire::datum::EvalType;

pub struct IndexScanExecutor<'a> {
    scanner: RangeScanner<'a>,
    table_id: i64,
    index_id: i64,
    unique: bool,
    /// The index columns, in index order.
    index_columns: usize,
    /// A trailing column receives the handle.
    has_handle: bool,
    schema: Vec<EvalType>,
}

impl<'a> IndexScanExecutor<'a> {
    pub(crate) fn new(scan: &proto::IndexScan, ctx: BuildContext<'a>) -> Result<Self> {
        let columns = scan
            .columns
            .iter()
            .map(ScanColumn::from_info)
            .collect::<Result<Vec<_>>>()?;
        let has_handle = columns.last().is_some_and(|c| c.pk_handle);
        let index_columns = columns.len() - usize::from(has_handle);
        if columns[..index_columns].iter().any(|c| c.pk_handle) {
            return Err(Error::InvalidRequest(
                "only the last column of an index scan may be the pk_handle".into(),
            ));
        }
        if index_columns == 0 {
            return Err(Error::InvalidRequest(
                "an index scan needs at least one index column".into(),
            ));
        }
        Ok(IndexScanExecutor {
            scanner: RangeScanner::new(
                ctx.snap,
                ctx.start_ts,
                ctx.ranges,
                scan.desc,
                ctx.track_newer_ts,
            ),
            table_id: scan.table_id,
            index_id: scan.index_id,
            unique: scan.unique,
            index_columns,
            has_handle,
            schema: columns.iter().map(|c| c.field_type.eval_type()).collect(),
        })
    }
}

impl BatchExecutor for IndexScanExecutor<'_> {
    fn schema(&self) -> &[EvalType] {
        &self.schema
    }

    fn next_batch(&mut self, scan_rows: usize) -> Result<BatchResult> {
        let mut out: Vec<Column> = self
            .schema
            .iter()
            .map(|t| Column::with_capacity(*t, scan_rows))
            .collect();
        let (table_id, index_id, unique, n, has_handle) = (
            self.table_id,
            self.index_id,
            self.unique,
            self.index_columns,
            self.has_handle,
        );
        let rows = self.scanner.fill(scan_rows, |key, value| {
            let (tid, iid, datums, key_handle) =
                decode_index_key(key, n).map_err(EvalError::from)?;
            if tid != table_id || iid != index_id {
                return Err(Error::Eval(EvalError::corrupt(format!(
                    "key of another index in an index scan: table_id={tid} index_id={iid} expected_table_id={table_id} expected_index_id={index_id}"
                ))));
            }
            if datums.len() != n {
                return Err(Error::Eval(EvalError::corrupt(format!(
                    "index key holds {} values, expected={n}",
                    datums.len()
                ))));
            }
            for (i, (d, col)) in datums.iter().zip(out.iter_mut()).enumerate() {
                col.push_datum(d).map_err(|e| {
                    EvalError::corrupt(format!("index value does not fit its column: {e} column={i}"))
                })?;
            }
            if has_handle {
                let handle = match key_handle {
                    Some(h) => h,
                    None if unique => {
                        decode_unique_index_value(value).map_err(EvalError::from)?
                    }
                    None => {
                        return Err(Error::Eval(EvalError::corrupt(
                            "non-unique index key without a handle",
                        )));
                    }
                };
                push_handle(&mut out[n], handle);
            }
            Ok(())
        })?;
        Ok(BatchResult {
            batch: Batch {
                columns: out,
                logical_rows: (0..rows).collect(),
            },
            is_drained: self.scanner.is_drained(),
        })
    }

    fn source(&self) -> Option<&dyn BatchExecutor> {
        None
    }

    fn scan_progress(&self) -> Option<&dyn ScanProgress> {
        Some(&self.scanner)
    }
}
