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
    let mut out = Vec::new();
    for b in batches {
        out.extend(batch_rows(table, b.columns())?);
    }
    Ok(out)
}

/// The rows of `arrays`, one per column of `table` in declaration order, each of exactly
/// its column's Arrow type, as stored datums.
pub fn batch_rows(table: &TableSchema, arrays: &[ArrayRef]) -> Result<Vec<Vec<Datum>>, FrontError> {
    if arrays.len() != table.columns.len() {
        return Err(FrontError::Internal {
            what: format!(
                "rows of table {}: expected {} columns, found {}",
                table.name,
                table.columns.len(),
                arrays.len()
            ),
        });
    }
    let rows = arrays.first().map_or(0, |a| a.len());
    let mut out: Vec<Vec<Datum>> = (0..rows)
        .map(|_| Vec::with_capacity(table.columns.len()))
        .collect();
    for (col, a) in table.columns.iter().zip(arrays) {
        for (row, d) in out.iter_mut().zip(stored_datums(&table.name, col, a)?) {
            row.push(d);
        }
    }
    Ok(out)
}

/// The stored datums of `a`, an array of exactly `col`'s Arrow type.
fn stored_datums(
    table: &str,
    col: &client::sql::Column,
    a: &ArrayRef,
) -> Result<Vec<Datum>, FrontError> {
    use datafusion::arrow::array::{Array, AsArray};
    use datafusion::arrow::datatypes::{
        Date32Type, Decimal128Type, Float64Type, Int64Type, TimestampMicrosecondType,
    };
    let want = arrow_type(col.ty);
    if a.data_type() != &want {
        return Err(FrontError::Internal {
            what: format!(
                "table {table} column {}: expected {want}, found {}",
                col.name,
                a.data_type()
            ),
        });
    }
    (0..a.len())
        .map(|i| {
            if a.is_null(i) {
                return Ok(Datum::Null);
            }
            Ok(match &want {
                DataType::Int64 => Datum::Int(a.as_primitive::<Int64Type>().value(i)),
                DataType::Float64 => Datum::Real(a.as_primitive::<Float64Type>().value(i)),
                DataType::Utf8 => Datum::Bytes(a.as_string::<i32>().value(i).as_bytes().to_vec()),
                DataType::Decimal128(..) => {
                    let v = a.as_primitive::<Decimal128Type>().value(i);
                    Datum::Int(i64::try_from(v).map_err(|_| FrontError::Internal {
                        what: format!("column {}: decimal {v} out of range", col.name),
                    })?)
                }
                DataType::Date32 => Datum::Int(i64::from(a.as_primitive::<Date32Type>().value(i))),
                DataType::Timestamp(..) => {
                    Datum::Int(a.as_primitive::<TimestampMicrosecondType>().value(i))
                }
                DataType::Boolean => Datum::Int(i64::from(a.as_boolean().value(i))),
                other => {
                    return Err(FrontError::Internal {
                        what: format!("no datum of Arrow type {other}"),
                    });
                }
            })
        })
        .collect()
}

/// `v` (a decimal at `scale`) rounded half away from zero to `to` digits of scale.
fn round_decimal(v: i128, scale: i8, to: i8) -> Option<i128> {
    if scale <= to {
        return v.checked_mul(10i128.checked_pow(u32::try_from(to - scale).ok()?)?);
    }
    let d = 10i128.checked_pow(u32::try_from(scale - to).ok()?)?;
    let half = d / 2;
    Some(if v >= 0 {
        (v + half) / d
    } else {
        (v - half) / d
    })
}

/// The values of `a` (an expression's answer, of any type) stored as column `col`, with
/// MySQL's assignment rules where Arrow's casts differ: a fractional number into an integer
/// column or into a DECIMAL of smaller scale rounds half away from zero (Arrow truncates);
/// text into a DECIMAL, DATE or DATETIME column reads as an INSERT literal would; a
/// DATETIME's fraction rounds to its fsp; a value out of the column's range is an error
/// naming the column (MySQL's strict mode), never a wrapped or NULL value.
pub fn assigned_datums(col: &client::sql::Column, a: &ArrayRef) -> Result<Vec<Datum>, FrontError> {
    use client::sql::value::{parse_date, parse_datetime, parse_decimal};
    use datafusion::arrow::array::{Array, AsArray, Decimal128Array};
    use datafusion::arrow::compute::{CastOptions, cast_with_options};
    use datafusion::arrow::datatypes::{Decimal128Type, Float64Type};
    let bad = |reason: String| -> FrontError {
        client::sql::SqlError::BadValue {
            column: col.name.clone(),
            reason,
        }
        .into()
    };
    let text_of = |a: &ArrayRef| -> Result<Option<Vec<Option<String>>>, FrontError> {
        if !matches!(
            a.data_type(),
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
        ) {
            return Ok(None);
        }
        let utf8 = cast_with_options(a, &DataType::Utf8, &CastOptions::default())
            .map_err(|e| bad(e.to_string()))?;
        let s = utf8.as_string::<i32>();
        Ok(Some(
            (0..s.len())
                .map(|i| (!s.is_null(i)).then(|| s.value(i).to_string()))
                .collect(),
        ))
    };
    // Text into the encoded types: the INSERT literal rules.
    if col.ty.is_encoded()
        && col.ty != SqlType::Boolean
        && let Some(texts) = text_of(a)?
    {
        return texts
            .into_iter()
            .map(|t| {
                let Some(t) = t else { return Ok(Datum::Null) };
                match col.ty {
                    SqlType::Decimal { precision, scale } => parse_decimal(&t, precision, scale),
                    SqlType::Date => parse_date(&t),
                    SqlType::DateTime { fsp } => parse_datetime(&t, fsp),
                    _ => Err(format!("no text form for {}", col.ty.name())),
                }
                .map(Datum::Int)
                .map_err(bad)
            })
            .collect();
    }
    let strict = CastOptions {
        safe: false,
        ..CastOptions::default()
    };
    let target = arrow_type(col.ty);
    // What Arrow's cast would truncate, rounded first.
    let prepared: ArrayRef = match (col.ty, a.data_type()) {
        (
            SqlType::Int | SqlType::BigInt,
            DataType::Float16 | DataType::Float32 | DataType::Float64,
        ) => {
            let f = cast_with_options(a, &DataType::Float64, &strict)
                .map_err(|e| bad(e.to_string()))?;
            Arc::new(
                f.as_primitive::<Float64Type>()
                    .unary::<_, Float64Type>(f64::round),
            )
        }
        (SqlType::Int | SqlType::BigInt, DataType::Decimal128(_, s)) if *s > 0 => {
            let d = a.as_primitive::<Decimal128Type>();
            let rounded: Decimal128Array = d
                .iter()
                .map(|v| v.and_then(|v| round_decimal(v, *s, 0)))
                .collect();
            Arc::new(
                rounded
                    .with_precision_and_scale(38, 0)
                    .map_err(|e| bad(e.to_string()))?,
            )
        }
        (SqlType::Decimal { scale, .. }, DataType::Decimal128(_, s)) if *s > scale as i8 => {
            let d = a.as_primitive::<Decimal128Type>();
            let rounded: Decimal128Array = d
                .iter()
                .map(|v| v.and_then(|v| round_decimal(v, *s, scale as i8)))
                .collect();
            Arc::new(
                rounded
                    .with_precision_and_scale(38, scale as i8)
                    .map_err(|e| bad(e.to_string()))?,
            )
        }
        _ => a.clone(),
    };
    // A DECIMAL goes through the widest precision first, so that a value too large for the
    // column meets the range check below (with MySQL's message), not Arrow's.
    let prepared = match col.ty {
        SqlType::Decimal { scale, .. } => {
            let wide =
                cast_with_options(&prepared, &DataType::Decimal128(38, scale as i8), &strict)
                    .map_err(|e| {
                        bad(format!(
                            "cannot store a {} value as DECIMAL: {e}",
                            a.data_type()
                        ))
                    })?;
            let d = wide.as_primitive::<Decimal128Type>();
            if let SqlType::Decimal { precision, scale } = col.ty
                && let Some(v) = d
                    .iter()
                    .flatten()
                    .find(|v| v.abs() >= 10i128.pow(u32::from(precision)))
            {
                return Err(bad(format!(
                    "out of range for DECIMAL({precision},{scale}): expected at most {} digits \
                     before the point, found {}",
                    precision - scale,
                    client::sql::value::format_decimal(v, scale)
                )));
            }
            wide
        }
        _ => prepared,
    };
    let cast = cast_with_options(&prepared, &target, &strict).map_err(|e| {
        bad(format!(
            "cannot store a {} value as {}: {e}",
            a.data_type(),
            col.ty.name()
        ))
    })?;
    let mut out = stored_datums("", col, &cast)?;
    // What the Arrow type does not hold to: INT's 32 bits, the DATETIME's fraction digits,
    // the years 0001..9999 of DATE and DATETIME.
    let year_range = |days: i64| {
        if client::sql::value::date_in_range(days) {
            Ok(())
        } else {
            Err(bad(format!(
                "out of {} range: expected a year from 0001 to 9999, found {}",
                col.ty.name(),
                client::sql::value::format_date(days)
            )))
        }
    };
    for d in &mut out {
        let Datum::Int(v) = d else { continue };
        match col.ty {
            SqlType::Int if i32::try_from(*v).is_err() => {
                return Err(bad(format!("out of INT range: {v}")));
            }
            SqlType::Date => year_range(*v)?,
            SqlType::DateTime { fsp } => {
                if fsp < 6 {
                    let unit = 10i64.pow(6 - u32::from(fsp));
                    *v = round_decimal(i128::from(*v), 6, fsp as i8)
                        .and_then(|r| i64::try_from(r * i128::from(unit)).ok())
                        .ok_or_else(|| bad(format!("datetime out of range: {v}")))?;
                }
                year_range(v.div_euclid(86_400_000_000))?;
            }
            _ => {}
        }
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
    fn assigned_values_round_as_mysql_stores_them_and_refuse_what_does_not_fit() {
        use datafusion::arrow::array::{
            Decimal128Array, Float64Array, Int64Array, StringArray, TimestampMicrosecondArray,
        };
        let col = |ty| client::sql::Column {
            name: "c".into(),
            id: 2,
            ty,
        };
        let assign = |ty, a: ArrayRef| assigned_datums(&col(ty), &a);
        let ints = |v: &[i64]| v.iter().map(|&x| Datum::Int(x)).collect::<Vec<_>>();
        // Half away from zero, where Arrow's casts would truncate.
        let f: ArrayRef = Arc::new(Float64Array::from(vec![2.5, -2.5, 0.49]));
        assert_eq!(assign(SqlType::Int, f).unwrap(), ints(&[3, -3, 0]));
        let d: ArrayRef = Arc::new(
            Decimal128Array::from(vec![12_345, -12_345, 12_344])
                .with_precision_and_scale(10, 3)
                .unwrap(),
        );
        let dec = SqlType::Decimal {
            precision: 5,
            scale: 2,
        };
        assert_eq!(assign(dec, d.clone()).unwrap(), ints(&[1235, -1235, 1234]));
        assert_eq!(assign(SqlType::BigInt, d).unwrap(), ints(&[12, -12, 12]));
        // Text reads as an INSERT literal; NULL stays NULL.
        let t: ArrayRef = Arc::new(StringArray::from(vec![Some("2024-02-29"), None]));
        assert_eq!(
            assign(SqlType::Date, t).unwrap(),
            vec![Datum::Int(19_782), Datum::Null]
        );
        // A DATETIME(0) keeps whole seconds, rounded.
        let at: ArrayRef = Arc::new(TimestampMicrosecondArray::from(vec![1_500_000, 1_499_999]));
        assert_eq!(
            assign(SqlType::DateTime { fsp: 0 }, at).unwrap(),
            ints(&[2_000_000, 1_000_000])
        );
        // Out of range: an error naming the column, never a wrapped or NULL value.
        let big: ArrayRef = Arc::new(Int64Array::from(vec![i64::from(i32::MAX) + 1]));
        let e = assign(SqlType::Int, big).unwrap_err();
        assert!(
            e.to_string().contains("column=c") && e.to_string().contains("INT range"),
            "{e}"
        );
        let wide: ArrayRef = Arc::new(Int64Array::from(vec![1000]));
        let e = assign(dec, wide).unwrap_err();
        assert!(
            e.to_string().contains("out of range for DECIMAL(5,2)"),
            "{e}"
        );
        let text: ArrayRef = Arc::new(StringArray::from(vec!["abc"]));
        assert!(assign(SqlType::BigInt, text).is_err());
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
