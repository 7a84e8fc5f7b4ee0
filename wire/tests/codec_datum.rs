//! Flag-prefixed datums: round trips in both modes, order of comparable datums, sequences,
//! column defaults, and truncated input.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::cmp::Ordering;

use proptest::prelude::*;
use wire::codec::datum::{
    decode_datum, decode_datums, decode_default, encode_datum, encode_row_datums,
};
use wire::datum::{Datum, FieldType};

fn datum() -> impl Strategy<Value = Datum> {
    prop_oneof![
        Just(Datum::Null),
        any::<i64>().prop_map(Datum::Int),
        (-200i64..200).prop_map(Datum::Int),
        any::<u64>().prop_map(Datum::UInt),
        any::<f64>()
            .prop_filter("not NaN", |v| !v.is_nan())
            .prop_map(Datum::Real),
        prop::collection::vec(any::<u8>(), 0..30).prop_map(Datum::Bytes),
    ]
}

fn encode(d: &Datum, comparable: bool) -> Vec<u8> {
    let mut buf = Vec::new();
    encode_datum(&mut buf, d, comparable);
    buf
}

/// Datums of the same type, for order checks.
fn same_type_pair() -> impl Strategy<Value = (Datum, Datum)> {
    prop_oneof![
        (any::<i64>(), any::<i64>()).prop_map(|(a, b)| (Datum::Int(a), Datum::Int(b))),
        (any::<u64>(), any::<u64>()).prop_map(|(a, b)| (Datum::UInt(a), Datum::UInt(b))),
        (-1e6f64..1e6, -1e6f64..1e6).prop_map(|(a, b)| (Datum::Real(a), Datum::Real(b))),
        (
            prop::collection::vec(0u8..3, 0..12),
            prop::collection::vec(0u8..3, 0..12)
        )
            .prop_map(|(a, b)| (Datum::Bytes(a), Datum::Bytes(b))),
        datum().prop_map(|d| (Datum::Null, d)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn datum_round_trips_in_both_modes(d in datum()) {
        for comparable in [false, true] {
            let e = encode(&d, comparable);
            let mut cursor = e.as_slice();
            prop_assert_eq!(decode_datum(&mut cursor).unwrap(), d.clone());
            prop_assert!(cursor.is_empty());
        }
    }

    #[test]
    fn comparable_datums_of_one_type_order_like_their_values((a, b) in same_type_pair()) {
        let (ea, eb) = (encode(&a, true), encode(&b, true));
        let expected = a.sql_cmp(&b);
        // NULL sorts first through its flag 0; equal values encode equally.
        prop_assert_eq!(ea.cmp(&eb), expected, "{:?} vs {:?}", a, b);
    }

    #[test]
    fn row_datums_round_trip(rows in prop::collection::vec(prop::collection::vec(datum(), 3), 0..5)) {
        let mut buf = Vec::new();
        for row in &rows {
            encode_row_datums(&mut buf, row);
        }
        let flat: Vec<Datum> = rows.concat();
        prop_assert_eq!(decode_datums(&buf, flat.len()).unwrap(), flat);
    }

    #[test]
    fn every_truncation_of_a_datum_sequence_is_an_error(
        row in prop::collection::vec(datum(), 1..6),
        comparable in any::<bool>(),
    ) {
        let mut buf = Vec::new();
        for d in &row {
            encode_datum(&mut buf, d, comparable);
        }
        for cut in 0..buf.len() {
            prop_assert!(decode_datums(&buf[..cut], row.len()).is_err(), "cut {}", cut);
        }
    }
}

#[test]
fn compact_mode_is_shorter_for_small_numbers_and_short_bytes() {
    assert_eq!(encode(&Datum::Int(1), false), [8, 2]);
    assert_eq!(encode(&Datum::UInt(1), false), [9, 1]);
    assert_eq!(
        encode(&Datum::Bytes(b"ab".to_vec()), false),
        [2, 4, b'a', b'b']
    );
    assert_eq!(encode(&Datum::Int(1), true).len(), 9);
}

#[test]
fn decode_datums_rejects_trailing_bytes() {
    let mut buf = encode(&Datum::Int(1), false);
    buf.push(0);
    let err = decode_datums(&buf, 1).unwrap_err();
    assert_eq!(
        err.detail,
        "expected the input to end after 1 datums, found 1 trailing bytes"
    );
}

#[test]
fn empty_default_is_null() {
    for tp in [FieldType::Int64, FieldType::Bytes, FieldType::Float64] {
        assert_eq!(decode_default(&[], tp).unwrap(), Datum::Null);
    }
}

#[test]
fn default_converts_losslessly_to_the_column_type() {
    let int = encode(&Datum::Int(7), false);
    assert_eq!(
        decode_default(&int, FieldType::Int64).unwrap(),
        Datum::Int(7)
    );
    assert_eq!(
        decode_default(&int, FieldType::UInt64).unwrap(),
        Datum::UInt(7)
    );
    assert_eq!(
        decode_default(&int, FieldType::DateTime).unwrap(),
        Datum::UInt(7)
    );
    assert_eq!(
        decode_default(&int, FieldType::Float64).unwrap(),
        Datum::Real(7.0)
    );
    let big = encode(&Datum::UInt(u64::MAX), true);
    assert!(decode_default(&big, FieldType::Int64).is_err());
}

#[test]
fn default_of_another_type_is_an_error_naming_both() {
    let bytes = encode(&Datum::Bytes(b"x".to_vec()), false);
    let err = decode_default(&bytes, FieldType::Int64).unwrap_err();
    assert_eq!(
        err.detail,
        "expected a value of type Int64, found Bytes([120])"
    );
}

#[test]
fn default_with_trailing_bytes_is_an_error() {
    let mut two = encode(&Datum::Int(1), false);
    two.extend(encode(&Datum::Int(2), false));
    assert!(decode_default(&two, FieldType::Int64).is_err());
}

#[test]
fn null_sorts_before_every_comparable_value() {
    let null = encode(&Datum::Null, true);
    for d in [
        Datum::Int(i64::MIN),
        Datum::UInt(0),
        Datum::Real(f64::NEG_INFINITY),
        Datum::Bytes(vec![]),
    ] {
        assert_eq!(null.cmp(&encode(&d, true)), Ordering::Less, "{d:?}");
    }
}
