//! Reading stored rows into column batches (`Column::push_from_row`, the table scan's per-cell
//! path over `wire::codec::row`): every column of a random schema reads back as what was
//! written, its default when absent and NULL when NULL, in both row layouts; a mismatched
//! output column or default is an error that appends nothing.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::collections::BTreeMap;

use cop::batch::Column;
use proptest::prelude::*;
use wire::codec::row::{RowView, encode_row};
use wire::datum::{Datum, FieldType};

const TYPES: [FieldType; 5] = [
    FieldType::Int64,
    FieldType::UInt64,
    FieldType::Float64,
    FieldType::Bytes,
    FieldType::DateTime,
];

fn value(tp: FieldType) -> BoxedStrategy<Datum> {
    let v = match tp {
        FieldType::Int64 => prop_oneof![
            any::<i64>(),
            -130i64..130,
            Just(i64::MIN),
            Just(i64::MAX),
            Just(i64::from(i16::MIN)),
            Just(i64::from(i32::MAX) + 1)
        ]
        .prop_map(Datum::Int)
        .boxed(),
        FieldType::UInt64 | FieldType::DateTime => {
            prop_oneof![any::<u64>(), 0u64..300, Just(u64::MAX)]
                .prop_map(Datum::UInt)
                .boxed()
        }
        FieldType::Float64 => any::<f64>()
            .prop_filter("not NaN", |v| !v.is_nan())
            .prop_map(Datum::Real)
            .boxed(),
        FieldType::Bytes => prop::collection::vec(any::<u8>(), 0..20)
            .prop_map(Datum::Bytes)
            .boxed(),
    };
    prop_oneof![1 => Just(Datum::Null), 4 => v].boxed()
}

/// A schema (column id → type) and a row over part of it: the other columns are absent.
fn schema_and_row(
    max_id: i64,
) -> impl Strategy<Value = (BTreeMap<i64, FieldType>, Vec<(i64, Datum)>)> {
    prop::collection::btree_map(0..=max_id, prop::sample::select(TYPES.to_vec()), 1..12)
        .prop_flat_map(|schema| {
            let cols = schema
                .iter()
                .map(|(&id, &tp)| (Just(id), any::<bool>(), value(tp)))
                .collect::<Vec<_>>();
            (Just(schema), cols)
        })
        .prop_map(|(schema, cols)| {
            let row = cols
                .into_iter()
                .filter(|(_, present, _)| *present)
                .map(|(id, _, d)| (id, d))
                .collect();
            (schema, row)
        })
}

fn check_columns(
    schema: &BTreeMap<i64, FieldType>,
    row: &[(i64, Datum)],
) -> Result<(), TestCaseError> {
    let bytes = encode_row(row).unwrap();
    let view = RowView::parse(&bytes).unwrap();
    for (&id, &tp) in schema {
        let stored = row.iter().find(|(i, _)| *i == id).map(|(_, d)| d.clone());
        let default = match tp {
            FieldType::Bytes => Datum::Bytes(b"default".to_vec()),
            _ => Datum::Null,
        };
        let mut out = Column::with_capacity(tp.eval_type(), 1);
        out.push_from_row(&view, id, tp, &default).unwrap();
        prop_assert_eq!(out.len(), 1);
        prop_assert_eq!(out.datum(0), stored.unwrap_or(default), "id {}", id);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn small_rows_read_into_columns((schema, row) in schema_and_row(255)) {
        check_columns(&schema, &row)?;
    }

    #[test]
    fn large_rows_read_into_columns((schema, row) in schema_and_row(100_000)) {
        check_columns(&schema, &row)?;
    }
}

#[test]
fn push_from_row_pushes_default_for_absent_and_none_for_null() {
    let bytes = encode_row(&[(1, Datum::Null), (2, Datum::Int(-3))]).unwrap();
    let view = RowView::parse(&bytes).unwrap();
    let mut out = Column::with_capacity(FieldType::Int64.eval_type(), 3);
    for id in [1, 2, 3] {
        out.push_from_row(&view, id, FieldType::Int64, &Datum::Int(42))
            .unwrap();
    }
    assert_eq!(out, Column::Int(vec![None, Some(-3), Some(42)]));
}

#[test]
fn push_from_row_rejects_an_output_column_of_another_type() {
    let bytes = encode_row(&[(1, Datum::Int(1))]).unwrap();
    let view = RowView::parse(&bytes).unwrap();
    let mut out = Column::with_capacity(FieldType::Bytes.eval_type(), 1);
    for id in [1, 2] {
        let err = out
            .push_from_row(&view, id, FieldType::Int64, &Datum::Null)
            .unwrap_err();
        assert!(
            err.detail.contains("expected an output column of Int"),
            "{err}"
        );
    }
    assert!(out.is_empty());
}

#[test]
fn push_from_row_rejects_a_default_of_another_type() {
    let bytes = encode_row(&[]).unwrap();
    let view = RowView::parse(&bytes).unwrap();
    let mut out = Column::with_capacity(FieldType::Int64.eval_type(), 1);
    let err = out
        .push_from_row(&view, 1, FieldType::Int64, &Datum::Bytes(b"x".to_vec()))
        .unwrap_err();
    assert!(err.detail.contains("column 1"), "{err}");
}
