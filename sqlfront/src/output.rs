//! What a statement answers, in the shape the endpoint writes: typed columns and rows of
//! cells, or a count of affected rows. Built from DataFusion's record batches or from the
//! client engine's datum rows.

use chrono::{NaiveDate, NaiveDateTime};
use datafusion::arrow::array::{
    Array, BinaryArray, BooleanArray, Float32Array, Float64Array, Int8Array, Int16Array,
    Int32Array, Int64Array, StringArray, UInt8Array, UInt16Array, UInt32Array, UInt64Array,
};
use datafusion::arrow::array::{Date32Array, TimestampMicrosecondArray};
use datafusion::arrow::datatypes::{DataType, TimeUnit};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::temporal_conversions::{date32_to_datetime, timestamp_us_to_datetime};
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use wire::datum::Datum;

use crate::error::FrontError;

/// The type class of a result column: decides the MySQL column type the endpoint announces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnKind {
    /// Signed integers (MySQL `BIGINT`).
    Int,
    /// Unsigned integers (MySQL `BIGINT UNSIGNED`).
    UInt,
    /// Floating point (MySQL `DOUBLE`).
    Float,
    /// Exact decimals, sent as their text (MySQL `DECIMAL`).
    Decimal,
    /// Text (MySQL `VARCHAR`), also dates and everything else sent as text.
    Text,
    /// Bytes that are not UTF-8 (MySQL `VARBINARY`).
    Bytes,
    /// Dates (MySQL `DATE`): a driver reads them as dates, not strings.
    Date,
    /// Date-times (MySQL `DATETIME`).
    DateTime,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ResultColumn {
    pub name: String,
    pub kind: ColumnKind,
}

impl ResultColumn {
    pub fn new(name: impl Into<String>, kind: ColumnKind) -> ResultColumn {
        ResultColumn {
            name: name.into(),
            kind,
        }
    }
}

/// One value of a result row.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Null,
    Int(i64),
    UInt(u64),
    Float(f64),
    Text(String),
    Bytes(Vec<u8>),
    Date(NaiveDate),
    DateTime(NaiveDateTime),
}

impl Cell {
    /// The value as the text protocol shows it (`None` for NULL).
    pub fn to_text(&self) -> Option<String> {
        match self {
            Cell::Null => None,
            Cell::Int(v) => Some(v.to_string()),
            Cell::UInt(v) => Some(v.to_string()),
            Cell::Float(v) => Some(v.to_string()),
            Cell::Text(s) => Some(s.clone()),
            Cell::Bytes(b) => Some(String::from_utf8_lossy(b).into_owned()),
            Cell::Date(d) => Some(d.format("%Y-%m-%d").to_string()),
            // MySQL's text: a fraction only when there is one.
            Cell::DateTime(t) => Some(t.format("%Y-%m-%d %H:%M:%S%.f").to_string()),
        }
    }
}

/// The answer of one statement: a result set (`columns` non-empty), or an OK with
/// `affected_rows`; warnings either way.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Output {
    pub columns: Vec<ResultColumn>,
    pub rows: Vec<Vec<Cell>>,
    pub affected_rows: u64,
    pub warnings: Vec<String>,
}

impl Output {
    /// An OK answer with no rows.
    pub fn ok(affected_rows: u64) -> Output {
        Output {
            affected_rows,
            ..Output::default()
        }
    }

    /// A result set of text columns.
    pub fn text(columns: &[&str], rows: Vec<Vec<Cell>>) -> Output {
        Output {
            columns: columns
                .iter()
                .map(|c| ResultColumn::new(*c, ColumnKind::Text))
                .collect(),
            rows,
            ..Output::default()
        }
    }

    /// DataFusion's answer: the batches' schema gives the columns.
    pub fn from_batches(
        schema: &datafusion::arrow::datatypes::Schema,
        batches: &[RecordBatch],
    ) -> Result<Output, FrontError> {
        let columns = schema
            .fields()
            .iter()
            .map(|f| ResultColumn::new(f.name().clone(), kind_of(f.data_type())))
            .collect();
        let mut rows = Vec::new();
        for batch in batches {
            // Column by column, then moved into rows.
            let mut by_column: Vec<std::vec::IntoIter<Cell>> = batch
                .columns()
                .iter()
                .map(|a| column_cells(a.as_ref()).map(Vec::into_iter))
                .collect::<Result<_, _>>()?;
            for _ in 0..batch.num_rows() {
                rows.push(
                    by_column
                        .iter_mut()
                        .map(|c| c.next().unwrap_or(Cell::Null))
                        .collect(),
                );
            }
        }
        Ok(Output {
            columns,
            rows,
            ..Output::default()
        })
    }

    /// The client engine's answer: a column's kind is that of its non-NULL values, text when
    /// there is none or they differ (the binary protocol writes a value only as its column's
    /// type).
    pub fn from_engine(r: client::sql::QueryResult) -> Output {
        if r.columns.is_empty() {
            return Output {
                affected_rows: r.affected_rows,
                warnings: r.warnings,
                ..Output::default()
            };
        }
        let rows: Vec<Vec<Cell>> = r
            .rows
            .into_iter()
            .map(|row| row.into_iter().map(cell_of_datum).collect())
            .collect();
        let columns = r
            .columns
            .into_iter()
            .enumerate()
            .map(|(i, name)| {
                let mut kinds = rows.iter().filter_map(|row| match &row[i] {
                    Cell::Null => None,
                    Cell::Int(_) => Some(ColumnKind::Int),
                    Cell::UInt(_) => Some(ColumnKind::UInt),
                    Cell::Float(_) => Some(ColumnKind::Float),
                    Cell::Bytes(_) => Some(ColumnKind::Bytes),
                    Cell::Text(_) => Some(ColumnKind::Text),
                    Cell::Date(_) => Some(ColumnKind::Date),
                    Cell::DateTime(_) => Some(ColumnKind::DateTime),
                });
                let kind = match kinds.next() {
                    Some(k) if kinds.all(|other| other == k) => k,
                    _ => ColumnKind::Text,
                };
                ResultColumn::new(name, kind)
            })
            .collect();
        Output {
            columns,
            rows,
            affected_rows: r.affected_rows,
            warnings: r.warnings,
        }
    }
}

impl Output {
    /// The answer as the client engine's result (column names and datum rows: integers,
    /// floats and text as bytes), for printers written against it.
    pub fn into_query_result(self) -> client::sql::QueryResult {
        client::sql::QueryResult {
            columns: self.columns.into_iter().map(|c| c.name).collect(),
            rows: self
                .rows
                .into_iter()
                .map(|row| {
                    row.into_iter()
                        .map(|c| match c {
                            Cell::Null => Datum::Null,
                            Cell::Int(v) => Datum::Int(v),
                            Cell::UInt(v) => Datum::UInt(v),
                            Cell::Float(v) => Datum::Real(v),
                            Cell::Text(s) => Datum::Bytes(s.into_bytes()),
                            Cell::Bytes(b) => Datum::Bytes(b),
                            c @ (Cell::Date(_) | Cell::DateTime(_)) => {
                                Datum::Bytes(c.to_text().unwrap_or_default().into_bytes())
                            }
                        })
                        .collect()
                })
                .collect(),
            affected_rows: self.affected_rows,
            warnings: self.warnings,
        }
    }
}

fn cell_of_datum(d: Datum) -> Cell {
    match d {
        Datum::Null => Cell::Null,
        Datum::Int(v) => Cell::Int(v),
        Datum::UInt(v) => Cell::UInt(v),
        Datum::Real(v) => Cell::Float(v),
        Datum::Bytes(b) => match String::from_utf8(b) {
            Ok(s) => Cell::Text(s),
            Err(e) => Cell::Bytes(e.into_bytes()),
        },
    }
}

/// The kind a column of Arrow type `t` is announced as.
pub fn kind_of(t: &DataType) -> ColumnKind {
    match t {
        DataType::Boolean
        | DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64 => ColumnKind::Int,
        DataType::UInt8 | DataType::UInt16 | DataType::UInt32 | DataType::UInt64 => {
            ColumnKind::UInt
        }
        DataType::Float16 | DataType::Float32 | DataType::Float64 => ColumnKind::Float,
        DataType::Decimal32(..)
        | DataType::Decimal64(..)
        | DataType::Decimal128(..)
        | DataType::Decimal256(..) => ColumnKind::Decimal,
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => ColumnKind::Bytes,
        DataType::Date32 => ColumnKind::Date,
        DataType::Timestamp(TimeUnit::Microsecond, None) => ColumnKind::DateTime,
        _ => ColumnKind::Text,
    }
}

macro_rules! cells {
    ($a:expr, $t:ty, $cell:expr) => {{
        let a = $a
            .as_any()
            .downcast_ref::<$t>()
            .ok_or_else(|| FrontError::Internal {
                what: format!("an array of {} that is not one", $a.data_type()),
            })?;
        (0..a.len())
            .map(|i| {
                if a.is_null(i) {
                    Cell::Null
                } else {
                    $cell(a.value(i))
                }
            })
            .collect()
    }};
}

/// The cells of one column.
fn column_cells(a: &dyn Array) -> Result<Vec<Cell>, FrontError> {
    Ok(match a.data_type() {
        DataType::Boolean => cells!(a, BooleanArray, |v: bool| Cell::Int(i64::from(v))),
        DataType::Int8 => cells!(a, Int8Array, |v: i8| Cell::Int(i64::from(v))),
        DataType::Int16 => cells!(a, Int16Array, |v: i16| Cell::Int(i64::from(v))),
        DataType::Int32 => cells!(a, Int32Array, |v: i32| Cell::Int(i64::from(v))),
        DataType::Int64 => cells!(a, Int64Array, Cell::Int),
        DataType::UInt8 => cells!(a, UInt8Array, |v: u8| Cell::UInt(u64::from(v))),
        DataType::UInt16 => cells!(a, UInt16Array, |v: u16| Cell::UInt(u64::from(v))),
        DataType::UInt32 => cells!(a, UInt32Array, |v: u32| Cell::UInt(u64::from(v))),
        DataType::UInt64 => cells!(a, UInt64Array, Cell::UInt),
        DataType::Float32 => cells!(a, Float32Array, |v: f32| Cell::Float(f64::from(v))),
        DataType::Float64 => cells!(a, Float64Array, Cell::Float),
        DataType::Utf8 => cells!(a, StringArray, |v: &str| Cell::Text(v.to_string())),
        DataType::Binary => cells!(a, BinaryArray, |v: &[u8]| Cell::Bytes(v.to_vec())),
        // A day or microsecond out of chrono's range (none a column holds) is NULL.
        DataType::Date32 => cells!(a, Date32Array, |v: i32| date32_to_datetime(v)
            .map_or(Cell::Null, |t| Cell::Date(t.date()))),
        DataType::Timestamp(TimeUnit::Microsecond, None) => {
            cells!(a, TimestampMicrosecondArray, |v: i64| {
                timestamp_us_to_datetime(v).map_or(Cell::Null, Cell::DateTime)
            })
        }
        _ => {
            // Everything else (decimals, dates, large and view strings, nested values) as
            // Arrow displays it.
            // MySQL's datetime text: a space before the time, a fraction only when not zero.
            let options = FormatOptions::default()
                .with_timestamp_format(Some("%Y-%m-%d %H:%M:%S%.f"))
                .with_datetime_format(Some("%Y-%m-%d %H:%M:%S%.f"));
            let f = ArrayFormatter::try_new(a, &options).map_err(|e| FrontError::Internal {
                what: format!("cannot display a {} column: {e}", a.data_type()),
            })?;
            (0..a.len())
                .map(|i| {
                    if a.is_null(i) {
                        Cell::Null
                    } else {
                        Cell::Text(f.value(i).to_string())
                    }
                })
                .collect()
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{ArrayRef, StringArray};
    use datafusion::arrow::datatypes::{Field, Schema};
    use std::sync::Arc;

    #[test]
    fn batches_become_typed_columns_and_cells_with_nulls_kept() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int32, true),
            Field::new("b", DataType::Utf8, true),
            Field::new("c", DataType::Float64, true),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int32Array::from(vec![Some(1), None])) as ArrayRef,
                Arc::new(StringArray::from(vec![None, Some("x")])),
                Arc::new(Float64Array::from(vec![Some(0.5), Some(-2.0)])),
            ],
        )
        .unwrap();
        let out = Output::from_batches(&schema, &[batch.clone(), batch]).unwrap();
        let kinds: Vec<ColumnKind> = out.columns.iter().map(|c| c.kind).collect();
        assert_eq!(
            kinds,
            [ColumnKind::Int, ColumnKind::Text, ColumnKind::Float]
        );
        assert_eq!(out.rows.len(), 4);
        assert_eq!(
            out.rows[1],
            [Cell::Null, Cell::Text("x".into()), Cell::Float(-2.0)]
        );
    }

    #[test]
    fn engine_rows_take_their_values_kind_or_text_when_kinds_differ() {
        let r = client::sql::QueryResult {
            columns: vec!["n".into(), "s".into(), "z".into()],
            rows: vec![
                vec![Datum::Null, Datum::Bytes(b"hi".to_vec()), Datum::Null],
                vec![Datum::Int(7), Datum::Bytes(vec![0xff]), Datum::Null],
                vec![Datum::Int(8), Datum::Bytes(b"x".to_vec()), Datum::Null],
            ],
            affected_rows: 0,
            warnings: vec!["w".into()],
        };
        let out = Output::from_engine(r);
        let kinds: Vec<ColumnKind> = out.columns.iter().map(|c| c.kind).collect();
        assert_eq!(kinds, [ColumnKind::Int, ColumnKind::Text, ColumnKind::Text]);
        assert_eq!(out.rows[1][1], Cell::Bytes(vec![0xff]));
        assert_eq!(out.warnings, ["w"]);
    }
}
