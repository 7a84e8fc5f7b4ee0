//! Table scan: record keys `t{table_id}_r{handle}` and their row values, decoded into column
//! batches.
//!
//! Only the columns the DAG declares are decoded (the planner declares the ones it needs); a
//! `pk_handle` column comes from the key, a column the row lacks gets its default value (or
//! NULL). A key that is not a record key of the scanned table is corrupt data, reported as an
//! evaluation error: the range was the client's to choose, so a foreign key in it means the
//! stored data is not what the schema says.

use crate::batch::{Batch, Column};
use crate::error::{Error, EvalError, Result};
use crate::executors::range_scanner::RangeScanner;
use crate::executors::{BatchExecutor, BatchResult, BuildContext, ScanProgress, field_type};
use wire::codec::number::decode_i64;
use wire::codec::row::RowView;
use wire::codec::table::{RECORD_KEY_LEN, RECORD_PREFIX_LEN, decode_record_key, record_prefix};
use wire::coprocessor as proto;
use wire::datum::{Datum, EvalType, FieldType};

/// How one output column of a scan is filled.
pub(crate) struct ScanColumn {
    pub(crate) column_id: i64,
    pub(crate) field_type: FieldType,
    /// The row's handle, not a row value.
    pub(crate) pk_handle: bool,
    /// The value of a row that lacks the column.
    pub(crate) default: Datum,
}

impl ScanColumn {
    pub(crate) fn from_info(c: &proto::ColumnInfo) -> Result<ScanColumn> {
        let field_type = field_type(c.tp, c.column_id)?;
        if c.pk_handle
            && field_type.eval_type() != EvalType::Int
            && field_type.eval_type() != EvalType::UInt
        {
            return Err(Error::InvalidRequest(format!(
                "a pk_handle column must be an integer: column_id={} tp={}",
                c.column_id, c.tp
            )));
        }
        let default = if c.default_val.is_empty() {
            Datum::Null
        } else {
            wire::codec::datum::decode_default(&c.default_val, field_type).map_err(|e| {
                Error::InvalidRequest(format!(
                    "default value does not decode: {e} column_id={}",
                    c.column_id
                ))
            })?
        };
        Ok(ScanColumn {
            column_id: c.column_id,
            field_type,
            pk_handle: c.pk_handle,
            default,
        })
    }
}

/// Appends a handle to an integer column (an unsigned handle is stored as the i64 bits).
pub(crate) fn push_handle(col: &mut Column, handle: i64) {
    match col {
        Column::Int(v) => v.push(Some(handle)),
        Column::UInt(v) => v.push(Some(handle as u64)),
        // Ruled out when the scan is built.
        Column::Real(v) => v.push(None),
        Column::Bytes(v) => v.push(None),
    }
}

pub struct TableScanExecutor<'a> {
    scanner: RangeScanner<'a>,
    table_id: i64,
    columns: Vec<ScanColumn>,
    schema: Vec<EvalType>,
    /// Some column is read from the row value (otherwise the value is not parsed at all).
    needs_row: bool,
    /// Some column is the handle (otherwise the key is only checked, not decoded).
    needs_handle: bool,
    /// `t{table_id}_r`: the part every record key of the table shares (a fixed-size array, so
    /// the per-row comparison compiles to a few word compares).
    prefix: [u8; RECORD_PREFIX_LEN],
}

impl<'a> TableScanExecutor<'a> {
    pub(crate) fn new(scan: &proto::TableScan, ctx: BuildContext<'a>) -> Result<Self> {
        let columns = scan
            .columns
            .iter()
            .map(ScanColumn::from_info)
            .collect::<Result<Vec<_>>>()?;
        let schema = columns.iter().map(|c| c.field_type.eval_type()).collect();
        let needs_row = columns.iter().any(|c| !c.pk_handle);
        let needs_handle = columns.iter().any(|c| c.pk_handle);
        Ok(TableScanExecutor {
            scanner: RangeScanner::new(
                ctx.snap,
                ctx.start_ts,
                ctx.ranges,
                scan.desc,
                ctx.track_newer_ts,
            ),
            table_id: scan.table_id,
            columns,
            schema,
            needs_row,
            needs_handle,
            prefix: record_prefix(scan.table_id)
                .try_into()
                .map_err(|_| Error::InvalidRequest("record prefix of unexpected length".into()))?,
        })
    }
}

/// The handle of a record key of the table whose keys start with `prefix`; anything else is
/// corrupt data. The common case is a length check, a prefix comparison and 8 bytes.
#[inline]
fn record_handle(
    key: &[u8],
    prefix: &[u8; RECORD_PREFIX_LEN],
    table_id: i64,
    decode: bool,
) -> Result<i64> {
    if let Some((head, mut rest)) = key.split_first_chunk::<RECORD_PREFIX_LEN>()
        && head == prefix
        && rest.len() == RECORD_KEY_LEN - RECORD_PREFIX_LEN
    {
        if !decode {
            return Ok(0);
        }
        return Ok(decode_i64(&mut rest).map_err(EvalError::from)?);
    }
    // Say precisely what is wrong.
    let (tid, _) = decode_record_key(key).map_err(EvalError::from)?;
    Err(Error::Eval(EvalError::corrupt(format!(
        "key of another table in a table scan: table_id={tid} expected={table_id}"
    ))))
}

impl BatchExecutor for TableScanExecutor<'_> {
    fn schema(&self) -> &[EvalType] {
        &self.schema
    }

    fn next_batch(&mut self, scan_rows: usize) -> Result<BatchResult> {
        let mut out: Vec<Column> = self
            .schema
            .iter()
            .map(|t| Column::with_capacity(*t, scan_rows))
            .collect();
        let (table_id, columns, needs_row, needs_handle, prefix) = (
            self.table_id,
            &self.columns,
            self.needs_row,
            self.needs_handle,
            &self.prefix,
        );
        let rows = self.scanner.fill(scan_rows, |key, value| {
            let handle = record_handle(key, prefix, table_id, needs_handle)?;
            let row = if needs_row {
                Some(RowView::parse(value).map_err(EvalError::from)?)
            } else {
                None
            };
            for (c, col) in columns.iter().zip(out.iter_mut()) {
                match &row {
                    Some(row) if !c.pk_handle => col
                        .push_from_row(row, c.column_id, c.field_type, &c.default)
                        .map_err(EvalError::from)?,
                    _ => push_handle(col, handle),
                }
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
