//! Stratus column types as Arrow types, and coprocessor rows as Arrow record batches.
//!
//! | SQL type | stored datum | Arrow |
//! |----------|--------------|-------|
//! | `INT`    | `Int` (32-bit range) | `Int64` |
//! | `BIGINT` | `Int`        | `Int64` |
//! | `DOUBLE` | `Real`       | `Float64` |
//! | `VARCHAR`| `Bytes` (UTF-8) | `Utf8` |
//! | `DECIMAL(p,s)` | `Int` (value × 10^s) | `Decimal128(p, s)` (the same integer) |
//! | `DATE` | `Int` (days since 1970-01-01) | `Date32` |
//! | `DATETIME`, `TIMESTAMP` | `Int` (µs since 1970-01-01 UTC) | `Timestamp(µs)` |
//! | `BOOLEAN` | `Int` (0 or 1) | `Boolean` |
//!
//! The encoded types' stored integers are Arrow's own representation of the value (the
//! `client::sql::value` layouts were chosen so), so a datum becomes an array value with no
//! conversion but a widening, and a region's partial SUM of a DECIMAL (the sum of scaled
//! integers) is the partial state DataFusion expects.
//!
//! `INT` is read as `Int64` so that arithmetic over it is 64-bit, as MySQL's is
//! (DataFusion's `Int32` arithmetic wraps: `i + i` of 2147483647 would be -2); writes still
//! refuse values outside its 32-bit range.
//!
//! A datum of another kind than its column's, an `INT` out of 32-bit range or a `VARCHAR`
//! that is not UTF-8 is an error naming the column: the rows come from the cluster, and a mismatch means a row written by
//! something else.

use std::sync::Arc;

use client::sql::{SqlType, TableSchema};
use datafusion::arrow::array::{
    ArrayRef, BooleanBuilder, Date32Builder, Decimal128Builder, Float64Builder, Int32Builder,
    Int64Builder, StringBuilder, TimestampMicrosecondBuilder, UInt64Builder,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::arrow::record_batch::{RecordBatch, RecordBatchOptions};
use wire::datum::Datum;

use crate::error::FrontError;

pub fn arrow_type(t: SqlType) -> DataType {
    match t {
        SqlType::Int | SqlType::BigInt => DataType::Int64,
        SqlType::Double => DataType::Float64,
        SqlType::Varchar => DataType::Utf8,
        // Scale ≤ precision ≤ 18: always a valid Decimal128 (scale as i8 cannot wrap).
        SqlType::Decimal { precision, scale } => DataType::Decimal128(precision, scale as i8),
        SqlType::Date => DataType::Date32,
        SqlType::DateTime { .. } => DataType::Timestamp(TimeUnit::Microsecond, None),
        SqlType::Boolean => DataType::Boolean,
    }
}

/// The Arrow schema of `table` (every column nullable but the primary key).
pub fn table_schema(table: &TableSchema) -> SchemaRef {
    Arc::new(Schema::new(
        table
            .columns
            .iter()
            .enumerate()
            .map(|(i, c)| Field::new(&c.name, arrow_type(c.ty), i != table.pk))
            .collect::<Vec<_>>(),
    ))
}

/// The record batch of `rows`, each holding the values of `columns` (the table's column
/// indexes, in `schema`'s order).
pub fn rows_to_batch(
    table: &TableSchema,
    columns: &[usize],
    schema: SchemaRef,
    rows: &[Vec<Datum>],
) -> Result<RecordBatch, FrontError> {
    let mut arrays: Vec<ArrayRef> = Vec::with_capacity(columns.len());
    for (pos, &c) in columns.iter().enumerate() {
        let col = &table.columns[c];
        let mismatch = |d: &Datum| FrontError::Internal {
            what: format!(
                "table {} column {}: expected a {} value, found {d:?}",
                table.name,
                col.name,
                col.ty.name()
            ),
        };
        if col.ty == SqlType::Int
            && let Some(d) = rows
                .iter()
                .filter_map(|r| r.get(pos))
                .find(|d| matches!(d, Datum::Int(v) if i32::try_from(*v).is_err()))
        {
            return Err(mismatch(d));
        }
        arrays.push(array_of(&arrow_type(col.ty), rows, pos, &mismatch)?);
    }
    batch(schema, arrays, rows.len())
}

/// A record batch of `schema` whose field `i` takes column `sources[i]` of `rows`: the
/// partial aggregates of a pushed aggregation, typed as DataFusion's partial aggregation
/// types them ([`convertible`]).
pub fn values_to_batch(
    schema: SchemaRef,
    sources: &[usize],
    rows: &[Vec<Datum>],
) -> Result<RecordBatch, FrontError> {
    let mut arrays: Vec<ArrayRef> = Vec::with_capacity(sources.len());
    for (field, &src) in schema.fields().iter().zip(sources) {
        let mismatch = |d: &Datum| FrontError::Internal {
            what: format!(
                "partial aggregate {}: expected a {} value, found {d:?}",
                field.name(),
                field.data_type()
            ),
        };
        arrays.push(array_of(field.data_type(), rows, src, &mismatch)?);
    }
    batch(schema, arrays, rows.len())
}

/// Column `src` of `rows` as an array of type `t` ([`convertible`]). An integer fills a
/// `Float64` too (a DOUBLE written as an integer by an older front; the integer sum of an
/// AVG over integers), a non-negative one a `UInt64` (a count); any other datum, an `Int32`
/// out of range or bytes that are not UTF-8 are `mismatch`.
fn array_of(
    t: &DataType,
    rows: &[Vec<Datum>],
    src: usize,
    mismatch: &dyn Fn(&Datum) -> FrontError,
) -> Result<ArrayRef, FrontError> {
    let values = rows.iter().map(|r| r.get(src).unwrap_or(&Datum::Null));
    macro_rules! build {
        ($builder:expr, $convert:expr) => {{
            let mut b = $builder;
            for d in values {
                match d {
                    Datum::Null => b.append_null(),
                    d => b.append_value($convert(d).ok_or_else(|| mismatch(d))?),
                }
            }
            Arc::new(b.finish()) as ArrayRef
        }};
    }
    let n = rows.len();
    Ok(match t {
        DataType::Int32 => build!(Int32Builder::with_capacity(n), |d: &Datum| match d {
            Datum::Int(v) => i32::try_from(*v).ok(),
            _ => None,
        }),
        DataType::Int64 => build!(Int64Builder::with_capacity(n), |d: &Datum| match d {
            Datum::Int(v) => Some(*v),
            _ => None,
        }),
        DataType::UInt64 => build!(UInt64Builder::with_capacity(n), |d: &Datum| match d {
            Datum::Int(v) => u64::try_from(*v).ok(),
            Datum::UInt(v) => Some(*v),
            _ => None,
        }),
        DataType::Float64 => build!(Float64Builder::with_capacity(n), |d: &Datum| match d {
            Datum::Real(v) => Some(*v),
            Datum::Int(v) => Some(*v as f64),
            _ => None,
        }),
        DataType::Decimal128(p, sc) => {
            let b = Decimal128Builder::with_capacity(n)
                .with_precision_and_scale(*p, *sc)
                .map_err(|e| FrontError::Internal {
                    what: format!("no decimal array of type {t}: {e}"),
                })?;
            build!(b, |d: &Datum| match d {
                Datum::Int(v) => Some(i128::from(*v)),
                _ => None,
            })
        }
        DataType::Date32 => build!(Date32Builder::with_capacity(n), |d: &Datum| match d {
            Datum::Int(v) => i32::try_from(*v).ok(),
            _ => None,
        }),
        DataType::Timestamp(TimeUnit::Microsecond, None) => build!(
            TimestampMicrosecondBuilder::with_capacity(n),
            |d: &Datum| match d {
                Datum::Int(v) => Some(*v),
                _ => None,
            }
        ),
        DataType::Boolean => build!(BooleanBuilder::with_capacity(n), |d: &Datum| match d {
            Datum::Int(v) => Some(*v != 0),
            _ => None,
        }),
        DataType::Utf8 => {
            fn text(d: &Datum) -> Option<&str> {
                match d {
                    Datum::Bytes(v) => std::str::from_utf8(v).ok(),
                    _ => None,
                }
            }
            build!(StringBuilder::with_capacity(n, 16 * n), text)
        }
        other => {
            return Err(FrontError::Internal {
                what: format!("no conversion of datums to {other}"),
            });
        }
    })
}

/// The stored datums of `batches`, whose columns are `table`'s in declaration order (a
/// `SELECT *` over it): the inverse of [`rows_to_batch`], for a write that read its rows
/// through DataFusion.
pub fn batches_to_rows(
    table: &TableSchema,
    batches: &[RecordBatch],
) -> Result<Vec<Vec<Datum>>, FrontError> {
    use datafusion::arrow::array::{Array, AsArray};
    use datafusion::arrow::datatypes::{
        Date32Type, Decimal128Type, Float64Type, Int64Type, TimestampMicrosecondType,
    };
    let mut out = Vec::new();
    for b in batches {
        if b.num_columns() != table.columns.len() {
            return Err(FrontError::Internal {
                what: format!(
                    "rows of table {}: expected {} columns, found {}",
                    table.name,
                    table.columns.len(),
                    b.num_columns()
                ),
            });
        }
        let mut rows: Vec<Vec<Datum>> = (0..b.num_rows())
            .map(|_| Vec::with_capacity(table.columns.len()))
            .collect();
        for (col, a) in table.columns.iter().zip(b.columns()) {
            let want = arrow_type(col.ty);
            if a.data_type() != &want {
                return Err(FrontError::Internal {
                    what: format!(
                        "table {} column {}: expected {want}, found {}",
                        table.name,
                        col.name,
                        a.data_type()
                    ),
                });
            }
            for (i, row) in rows.iter_mut().enumerate() {
                row.push(if a.is_null(i) {
                    Datum::Null
                } else {
                    match &want {
                        DataType::Int64 => Datum::Int(a.as_primitive::<Int64Type>().value(i)),
                        DataType::Float64 => Datum::Real(a.as_primitive::<Float64Type>().value(i)),
                        DataType::Utf8 => {
                            Datum::Bytes(a.as_string::<i32>().value(i).as_bytes().to_vec())
                        }
                        DataType::Decimal128(..) => {
                            let v = a.as_primitive::<Decimal128Type>().value(i);
                            Datum::Int(i64::try_from(v).map_err(|_| FrontError::Internal {
                                what: format!("column {}: decimal {v} out of range", col.name),
                            })?)
                        }
                        DataType::Date32 => {
                            Datum::Int(i64::from(a.as_primitive::<Date32Type>().value(i)))
                        }
                        DataType::Timestamp(..) => {
                            Datum::Int(a.as_primitive::<TimestampMicrosecondType>().value(i))
                        }
                        DataType::Boolean => Datum::Int(i64::from(a.as_boolean().value(i))),
                        other => {
                            return Err(FrontError::Internal {
                                what: format!("no datum of Arrow type {other}"),
                            });
                        }
                    }
                });
            }
        }
        out.extend(rows);
    }
    Ok(out)
}

/// A batch of `arrays` with `rows` rows (a projection of no column, COUNT(*) over the scan,
/// still has a row count).
fn batch(schema: SchemaRef, arrays: Vec<ArrayRef>, rows: usize) -> Result<RecordBatch, FrontError> {
    let options = RecordBatchOptions::new().with_row_count(Some(rows));
    RecordBatch::try_new_with_options(schema, arrays, &options).map_err(|e| FrontError::Internal {
        what: format!("cannot build a record batch: {e}"),
    })
}

/// Whether [`values_to_batch`] can fill a field of type `t`.
pub fn convertible(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Int32
            | DataType::Int64
            | DataType::UInt64
            | DataType::Float64
            | DataType::Utf8
            | DataType::Decimal128(..)
            | DataType::Date32
            | DataType::Timestamp(TimeUnit::Microsecond, None)
            | DataType::Boolean
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Array, AsArray};
    use datafusion::arrow::datatypes::{Float64Type, Int64Type};

    fn table() -> TableSchema {
        crate::test_table(
            1,
            &[
                ("id", SqlType::BigInt),
                ("n", SqlType::Int),
                ("x", SqlType::Double),
                ("s", SqlType::Varchar),
            ],
        )
    }

    fn project(t: &TableSchema, cols: &[usize]) -> SchemaRef {
        Arc::new(table_schema(t).project(cols).unwrap())
    }

    #[test]
    fn rows_of_every_type_and_nulls_become_columns() {
        let t = table();
        let rows = vec![
            vec![
                Datum::Int(1),
                Datum::Int(-5),
                Datum::Real(0.25),
                Datum::Bytes(b"a".to_vec()),
            ],
            vec![Datum::Int(2), Datum::Null, Datum::Int(3), Datum::Null],
        ];
        let b = rows_to_batch(&t, &[0, 1, 2, 3], project(&t, &[0, 1, 2, 3]), &rows).unwrap();
        assert_eq!(b.column(0).as_primitive::<Int64Type>().values(), &[1, 2]);
        let n = b.column(1).as_primitive::<Int64Type>();
        assert_eq!((n.value(0), n.is_null(1)), (-5, true));
        assert_eq!(
            b.column(2).as_primitive::<Float64Type>().values(),
            &[0.25, 3.0]
        );
        let s = b.column(3).as_string::<i32>();
        assert_eq!((s.value(0), s.is_null(1)), ("a", true));
    }

    #[test]
    fn a_projection_keeps_the_row_count_even_with_no_column() {
        let t = table();
        let rows = vec![vec![], vec![], vec![]];
        let b = rows_to_batch(&t, &[], project(&t, &[]), &rows).unwrap();
        assert_eq!((b.num_rows(), b.num_columns()), (3, 0));
    }

    #[test]
    fn a_value_of_the_wrong_kind_or_range_is_an_error_naming_the_column() {
        let t = table();
        for (col, d) in [
            (1, Datum::Int(i64::from(i32::MAX) + 1)),
            (1, Datum::Real(1.0)),
            (3, Datum::Bytes(vec![0xff])),
            (0, Datum::Bytes(b"x".to_vec())),
        ] {
            let e = rows_to_batch(&t, &[col], project(&t, &[col]), &[vec![d]]).unwrap_err();
            assert!(
                e.to_string().contains(&t.columns[col].name),
                "{e} should name column {}",
                t.columns[col].name
            );
        }
    }
}
