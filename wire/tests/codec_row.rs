//! Row values: round trips with NULLs and absent columns in both layouts, typed decoding,
//! rejection of malformed rows, and truncated input. (Reading rows into the coprocessor's
//! columns is tested in `cop/tests/row_into_column.rs`.)

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::collections::BTreeMap;

use proptest::prelude::*;
use wire::codec::row::{
    ColumnValue, RowView, decode_f64, decode_int, decode_uint, decode_value, encode_row,
    encode_row_into,
};
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

fn check_round_trip(
    schema: &BTreeMap<i64, FieldType>,
    row: &[(i64, Datum)],
) -> Result<(), TestCaseError> {
    let bytes = encode_row(row).unwrap();
    let view = RowView::parse(&bytes).unwrap();
    for (&id, &tp) in schema {
        let stored = row.iter().find(|(i, _)| *i == id).map(|(_, d)| d);
        match (stored, view.find(id)) {
            (None, ColumnValue::Absent) | (Some(Datum::Null), ColumnValue::Null) => {}
            (Some(d), ColumnValue::Value(b)) => prop_assert_eq!(&decode_value(b, tp).unwrap(), d),
            (stored, found) => {
                prop_assert!(false, "id {}: stored {:?}, found {:?}", id, stored, found)
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn small_row_round_trips_with_nulls_and_absent_columns((schema, row) in schema_and_row(255)) {
        check_round_trip(&schema, &row)?;
        let bytes = encode_row(&row).unwrap();
        prop_assert!(!RowView::parse(&bytes).unwrap().is_large());
    }

    #[test]
    fn large_row_round_trips_with_nulls_and_absent_columns((schema, row) in schema_and_row(100_000)) {
        check_round_trip(&schema, &row)?;
    }

    #[test]
    fn row_lists_its_ids_ascending_and_split_by_nullness((_, row) in schema_and_row(1000)) {
        let bytes = encode_row(&row).unwrap();
        let view = RowView::parse(&bytes).unwrap();
        let mut not_null: Vec<i64> = row.iter().filter(|(_, d)| !d.is_null()).map(|(i, _)| *i).collect();
        let mut null: Vec<i64> = row.iter().filter(|(_, d)| d.is_null()).map(|(i, _)| *i).collect();
        not_null.sort_unstable();
        null.sort_unstable();
        prop_assert_eq!(view.not_null_ids().collect::<Vec<_>>(), not_null);
        prop_assert_eq!(view.null_ids().collect::<Vec<_>>(), null);
    }

    #[test]
    fn column_order_of_the_input_does_not_change_the_encoding((_, mut row) in schema_and_row(300)) {
        let a = encode_row(&row).unwrap();
        row.reverse();
        prop_assert_eq!(encode_row(&row).unwrap(), a);
    }

    #[test]
    fn every_truncation_of_a_row_is_an_error((_, row) in schema_and_row(1000)) {
        let bytes = encode_row(&row).unwrap();
        for cut in 0..bytes.len() {
            prop_assert!(RowView::parse(&bytes[..cut]).is_err(), "cut {}", cut);
        }
    }
}

#[test]
fn ids_above_255_use_the_large_layout() {
    let bytes = encode_row(&[(256, Datum::Int(1)), (1, Datum::Null)]).unwrap();
    let view = RowView::parse(&bytes).unwrap();
    assert!(view.is_large());
    assert_eq!(view.find(256), ColumnValue::Value(&[1]));
    assert_eq!(view.find(1), ColumnValue::Null);
    assert_eq!(view.find(0), ColumnValue::Absent);
}

#[test]
fn data_beyond_64_kib_uses_the_large_layout() {
    let big = vec![7u8; 70_000];
    let bytes = encode_row(&[(1, Datum::Bytes(big.clone())), (2, Datum::Int(-1))]).unwrap();
    let view = RowView::parse(&bytes).unwrap();
    assert!(view.is_large());
    assert_eq!(view.find(1), ColumnValue::Value(&big));
    assert_eq!(
        decode_int(match view.find(2) {
            ColumnValue::Value(b) => b,
            other => panic!("{other:?}"),
        })
        .unwrap(),
        -1
    );
}

#[test]
fn data_of_exactly_64_kib_minus_one_stays_small() {
    let bytes = encode_row(&[(1, Datum::Bytes(vec![0; 65_535]))]).unwrap();
    assert!(!RowView::parse(&bytes).unwrap().is_large());
}

#[test]
fn empty_row_is_a_bare_header() {
    let bytes = encode_row(&[]).unwrap();
    assert_eq!(bytes, [128, 0, 0, 0, 0, 0]);
    let view = RowView::parse(&bytes).unwrap();
    assert_eq!(view.find(1), ColumnValue::Absent);
}

#[test]
fn duplicate_column_ids_are_rejected() {
    let err = encode_row(&[(3, Datum::Int(1)), (3, Datum::Null)]).unwrap_err();
    assert_eq!(err.detail, "expected unique column ids, found 3 twice");
}

#[test]
fn column_ids_outside_u32_are_rejected() {
    for id in [-1, i64::from(u32::MAX) + 1] {
        let err = encode_row(&[(id, Datum::Int(1))]).unwrap_err();
        assert!(err.detail.contains("expected a column id within"), "{err}");
    }
}

#[test]
fn nan_is_rejected_naming_the_column() {
    let err = encode_row(&[(9, Datum::Real(f64::NAN))]).unwrap_err();
    assert_eq!(err.detail, "column 9: expected a number, found NaN");
}

#[test]
fn encode_row_into_appends_after_existing_bytes() {
    let mut buf = vec![0xaa];
    encode_row_into(&mut buf, &[(1, Datum::Int(5))]).unwrap();
    assert_eq!(buf[0], 0xaa);
    assert!(RowView::parse(&buf[1..]).is_ok());
}

#[test]
fn unknown_version_is_rejected() {
    let mut bytes = encode_row(&[(1, Datum::Int(5))]).unwrap();
    bytes[0] = 127;
    let err = RowView::parse(&bytes).unwrap_err();
    assert_eq!(err.detail, "expected version 128, found 127");
}

#[test]
fn reserved_flag_bits_are_rejected() {
    let mut bytes = encode_row(&[(1, Datum::Int(5))]).unwrap();
    bytes[1] = 0b10;
    assert!(RowView::parse(&bytes).is_err());
}

#[test]
fn unsorted_ids_are_rejected() {
    // 2 not-null columns with ids 5, 4 and one byte each.
    let row = [128, 0, 2, 0, 0, 0, 5, 4, 1, 0, 2, 0, 10, 11];
    let err = RowView::parse(&row).unwrap_err();
    assert_eq!(
        err.detail,
        "expected strictly ascending not-null column ids, found 4 after 5"
    );
}

#[test]
fn decreasing_offsets_are_rejected() {
    let row = [128, 0, 2, 0, 0, 0, 4, 5, 2, 0, 1, 0, 10, 11];
    let err = RowView::parse(&row).unwrap_err();
    assert_eq!(
        err.detail,
        "expected ascending value offsets, found 1 after 2"
    );
}

#[test]
fn offsets_past_the_data_are_rejected() {
    let row = [128, 0, 1, 0, 0, 0, 4, 9, 0, 10];
    let err = RowView::parse(&row).unwrap_err();
    assert_eq!(
        err.detail,
        "expected the values to end at 9, found 1 bytes of data"
    );
}

#[test]
fn typed_decoders_reject_odd_widths() {
    for len in [0, 3, 5, 6, 7, 9] {
        let b = vec![0u8; len];
        let err = decode_int(&b).unwrap_err();
        assert_eq!(
            err.detail,
            format!("expected 1, 2, 4 or 8 bytes, found {len}")
        );
        assert!(decode_uint(&b).is_err());
        assert!(decode_f64(&b).is_err());
    }
}

#[test]
fn ints_sign_extend_and_uints_zero_extend() {
    assert_eq!(decode_int(&[0xff]).unwrap(), -1);
    assert_eq!(decode_uint(&[0xff]).unwrap(), 255);
    assert_eq!(decode_int(&[0x00, 0x80]).unwrap(), i64::from(i16::MIN));
    assert_eq!(decode_uint(&[0x00, 0x80]).unwrap(), 0x8000);
}
