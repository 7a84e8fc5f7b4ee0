//! Column batches: what executors pass to each other.
//!
//! A [`Batch`] holds columns of equal length plus `logical_rows`, the indexes of the rows still
//! alive: a selection shrinks `logical_rows` instead of copying columns (TiKV's design), and
//! only executors that must materialize (aggregation, TopN, projection output) read through it.
//!
//! A scan fills its columns straight from stored rows ([`Column::push_from_row`]), one cell at
//! a time, over the row codec of `wire::codec::row`.

use wire::codec::CodecError;
use wire::codec::row::{ColumnValue, RowView, decode_f64, decode_int, decode_uint};
use wire::datum::{Datum, EvalType, FieldType};

/// One column of values, NULL as `None`.
#[derive(Debug, Clone, PartialEq)]
pub enum Column {
    Int(Vec<Option<i64>>),
    UInt(Vec<Option<u64>>),
    Real(Vec<Option<f64>>),
    Bytes(Vec<Option<Vec<u8>>>),
}

impl Column {
    pub fn with_capacity(t: EvalType, n: usize) -> Column {
        match t {
            EvalType::Int => Column::Int(Vec::with_capacity(n)),
            EvalType::UInt => Column::UInt(Vec::with_capacity(n)),
            EvalType::Real => Column::Real(Vec::with_capacity(n)),
            EvalType::Bytes => Column::Bytes(Vec::with_capacity(n)),
        }
    }

    pub fn eval_type(&self) -> EvalType {
        match self {
            Column::Int(_) => EvalType::Int,
            Column::UInt(_) => EvalType::UInt,
            Column::Real(_) => EvalType::Real,
            Column::Bytes(_) => EvalType::Bytes,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Column::Int(v) => v.len(),
            Column::UInt(v) => v.len(),
            Column::Real(v) => v.len(),
            Column::Bytes(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value at physical row `i` as a datum.
    pub fn datum(&self, i: usize) -> Datum {
        match self {
            Column::Int(v) => v[i].map_or(Datum::Null, Datum::Int),
            Column::UInt(v) => v[i].map_or(Datum::Null, Datum::UInt),
            Column::Real(v) => v[i].map_or(Datum::Null, Datum::Real),
            Column::Bytes(v) => v[i].clone().map_or(Datum::Null, Datum::Bytes),
        }
    }

    /// Whether the value at physical row `i` is NULL.
    pub fn is_null(&self, i: usize) -> bool {
        match self {
            Column::Int(v) => v[i].is_none(),
            Column::UInt(v) => v[i].is_none(),
            Column::Real(v) => v[i].is_none(),
            Column::Bytes(v) => v[i].is_none(),
        }
    }

    /// Appends the value at physical row `i` of `src`, a column of the same type (without
    /// going through a [`Datum`]). Returns false, appending nothing, if the types differ.
    pub fn push_from(&mut self, src: &Column, i: usize) -> bool {
        match (self, src) {
            (Column::Int(d), Column::Int(s)) => d.push(s[i]),
            (Column::UInt(d), Column::UInt(s)) => d.push(s[i]),
            (Column::Real(d), Column::Real(s)) => d.push(s[i]),
            (Column::Bytes(d), Column::Bytes(s)) => d.push(s[i].clone()),
            _ => return false,
        }
        true
    }

    /// Appends a datum; a datum of another type than the column's is converted where lossless
    /// and otherwise an error (the caller names the column).
    pub fn push_datum(&mut self, d: &Datum) -> Result<(), String> {
        match (self, d) {
            (Column::Int(v), Datum::Null) => v.push(None),
            (Column::UInt(v), Datum::Null) => v.push(None),
            (Column::Real(v), Datum::Null) => v.push(None),
            (Column::Bytes(v), Datum::Null) => v.push(None),
            (Column::Int(v), Datum::Int(x)) => v.push(Some(*x)),
            (Column::Int(v), Datum::UInt(x)) if *x <= i64::MAX as u64 => v.push(Some(*x as i64)),
            (Column::UInt(v), Datum::UInt(x)) => v.push(Some(*x)),
            (Column::UInt(v), Datum::Int(x)) if *x >= 0 => v.push(Some(*x as u64)),
            (Column::Real(v), Datum::Real(x)) => v.push(Some(*x)),
            (Column::Real(v), Datum::Int(x)) => v.push(Some(*x as f64)),
            (Column::Real(v), Datum::UInt(x)) => v.push(Some(*x as f64)),
            (Column::Bytes(v), Datum::Bytes(x)) => v.push(Some(x.clone())),
            (c, d) => {
                return Err(format!("expected a {:?} value, found {d:?}", c.eval_type()));
            }
        }
        Ok(())
    }
}

impl Column {
    /// Decodes column `col_id` of type `tp` from `row` and appends it: the value, `None` for a
    /// NULL, or `default` when the row lacks the column. The scan executor's per-cell path.
    ///
    /// `self` must be a column of `tp.eval_type()`; another column type is an error, as is a
    /// value of the wrong size for `tp`. On error nothing is appended.
    #[inline]
    pub fn push_from_row(
        &mut self,
        row: &RowView<'_>,
        col_id: i64,
        tp: FieldType,
        default: &Datum,
    ) -> Result<(), CodecError> {
        match row.find(col_id) {
            ColumnValue::Value(b) => match (tp, self) {
                (FieldType::Int64, Column::Int(v)) => v.push(Some(decode_int(b)?)),
                (FieldType::UInt64 | FieldType::DateTime, Column::UInt(v)) => {
                    v.push(Some(decode_uint(b)?))
                }
                (FieldType::Float64, Column::Real(v)) => v.push(Some(decode_f64(b)?)),
                (FieldType::Bytes, Column::Bytes(v)) => v.push(Some(b.to_vec())),
                (tp, out) => return Err(column_type_error(col_id, tp, out)),
            },
            ColumnValue::Null => match (tp.eval_type() == self.eval_type(), self) {
                (true, Column::Int(v)) => v.push(None),
                (true, Column::UInt(v)) => v.push(None),
                (true, Column::Real(v)) => v.push(None),
                (true, Column::Bytes(v)) => v.push(None),
                (false, out) => return Err(column_type_error(col_id, tp, out)),
            },
            ColumnValue::Absent => {
                if tp.eval_type() != self.eval_type() {
                    return Err(column_type_error(col_id, tp, self));
                }
                self.push_datum(default).map_err(|msg| {
                    CodecError::new("column default", format!("column {col_id}: {msg}"))
                })?;
            }
        }
        Ok(())
    }
}

#[cold]
fn column_type_error(col_id: i64, tp: FieldType, out: &Column) -> CodecError {
    CodecError::new(
        "row column",
        format!(
            "column {col_id}: expected an output column of {:?} for field type {tp:?}, found {:?}",
            tp.eval_type(),
            out.eval_type()
        ),
    )
}

/// Columns of equal physical length and the physical indexes of the live rows, in order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Batch {
    pub columns: Vec<Column>,
    pub logical_rows: Vec<usize>,
}

impl Batch {
    /// A batch of no rows with columns of the given types.
    pub fn empty(schema: &[EvalType]) -> Batch {
        Batch {
            columns: schema
                .iter()
                .map(|t| Column::with_capacity(*t, 0))
                .collect(),
            logical_rows: Vec::new(),
        }
    }

    pub fn rows(&self) -> usize {
        self.logical_rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.logical_rows.is_empty()
    }

    /// Live row `i` (a logical index) as datums.
    pub fn row(&self, i: usize) -> Vec<Datum> {
        let p = self.logical_rows[i];
        self.columns.iter().map(|c| c.datum(p)).collect()
    }
}
