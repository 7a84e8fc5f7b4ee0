//! Record and index keys: round trips, ordering by handle and by index values, ranges, and
//! malformed keys.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use proptest::prelude::*;
use wire::codec::table::{
    RECORD_KEY_LEN, decode_index_key, decode_record_key, decode_unique_index_value, index_key,
    index_range, prefix_next, record_key, record_prefix, record_range, unique_index_value,
};
use wire::datum::Datum;

fn value_of_type(tp: u8) -> BoxedStrategy<Datum> {
    let v = match tp {
        0 => any::<i64>().prop_map(Datum::Int).boxed(),
        1 => any::<u64>().prop_map(Datum::UInt).boxed(),
        2 => (-1e9f64..1e9).prop_map(Datum::Real).boxed(),
        _ => prop::collection::vec(0u8..4, 0..12)
            .prop_map(Datum::Bytes)
            .boxed(),
    };
    prop_oneof![1 => Just(Datum::Null), 6 => v].boxed()
}

/// Two rows of index values of the same column types.
fn index_rows() -> impl Strategy<Value = (Vec<Datum>, Vec<Datum>)> {
    prop::collection::vec(0u8..4, 1..4).prop_flat_map(|types| {
        let row = types.iter().map(|&t| value_of_type(t)).collect::<Vec<_>>();
        (row.clone(), row)
    })
}

fn lexicographic(a: &[Datum], b: &[Datum]) -> std::cmp::Ordering {
    a.iter()
        .zip(b)
        .map(|(x, y)| x.sql_cmp(y))
        .find(|o| o.is_ne())
        .unwrap_or(std::cmp::Ordering::Equal)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn record_key_round_trips(table in any::<i64>(), handle in any::<i64>()) {
        let k = record_key(table, handle);
        prop_assert_eq!(k.len(), RECORD_KEY_LEN);
        prop_assert_eq!(decode_record_key(&k).unwrap(), (table, handle));
        prop_assert!(k.starts_with(&record_prefix(table)));
    }

    #[test]
    fn record_keys_order_by_table_then_handle(
        t1 in -3i64..3, t2 in -3i64..3, h1 in any::<i64>(), h2 in any::<i64>(),
    ) {
        prop_assert_eq!(record_key(t1, h1).cmp(&record_key(t2, h2)), (t1, h1).cmp(&(t2, h2)));
    }

    #[test]
    fn record_range_holds_exactly_the_table_records(
        table in any::<i64>(), other in any::<i64>(), handle in any::<i64>(),
    ) {
        let (start, end) = record_range(table);
        let k = record_key(table, handle);
        prop_assert!(start <= k && k < end);
        if other != table {
            let o = record_key(other, handle);
            prop_assert!(o < start || o >= end);
        }
        let idx = index_key(table, 1, &[Datum::Int(handle)], Some(handle));
        prop_assert!(idx < start || idx >= end);
    }

    #[test]
    fn index_key_round_trips_with_and_without_handle(
        (values, _) in index_rows(), handle in any::<i64>(), unique in any::<bool>(),
    ) {
        let h = (!unique).then_some(handle);
        let k = index_key(5, -7, &values, h);
        let (t, i, decoded, dh) = decode_index_key(&k, values.len()).unwrap();
        prop_assert_eq!((t, i, dh), (5, -7, h));
        prop_assert_eq!(decoded, values);
    }

    #[test]
    fn index_keys_order_by_values_then_handle(
        (a, b) in index_rows(), ha in -5i64..5, hb in -5i64..5,
    ) {
        let (ka, kb) = (index_key(1, 2, &a, Some(ha)), index_key(1, 2, &b, Some(hb)));
        let expected = lexicographic(&a, &b).then(ha.cmp(&hb));
        prop_assert_eq!(ka.cmp(&kb), expected, "{:?} {} vs {:?} {}", a, ha, b, hb);
    }

    #[test]
    fn index_range_holds_exactly_the_index_entries((values, _) in index_rows(), h in any::<i64>()) {
        let (start, end) = index_range(3, 4);
        let k = index_key(3, 4, &values, Some(h));
        prop_assert!(start <= k && k < end);
        for other in [index_key(3, 5, &values, Some(h)), index_key(4, 4, &values, Some(h)), record_key(3, h)] {
            prop_assert!(other < start || other >= end);
        }
    }

    #[test]
    fn every_truncation_of_an_index_key_is_an_error((values, _) in index_rows(), h in any::<i64>()) {
        let k = index_key(1, 1, &values, Some(h));
        // A cut exactly after the values is a valid unique-index key without handle.
        let unique_len = index_key(1, 1, &values, None).len();
        for cut in 0..k.len() {
            if cut != unique_len {
                prop_assert!(decode_index_key(&k[..cut], values.len()).is_err(), "cut {}", cut);
            }
        }
    }

    #[test]
    fn prefix_next_bounds_every_extension(
        key in prop::collection::vec(prop::sample::select(vec![0u8, 1, 0xfe, 0xff]), 0..6),
        tail in prop::collection::vec(any::<u8>(), 0..4),
    ) {
        let next = prefix_next(&key);
        let mut extended = key.clone();
        extended.extend_from_slice(&tail);
        // An empty result means "unbounded".
        prop_assert!(next.is_empty() || extended < next);
        prop_assert!(next.is_empty() || key < next);
    }
}

#[test]
fn record_key_layout_is_t_table_r_handle() {
    let k = record_key(1, -1);
    assert_eq!(k[0], b't');
    assert_eq!(&k[1..9], &[0x80, 0, 0, 0, 0, 0, 0, 1]);
    assert_eq!(&k[9..11], b"_r");
    assert_eq!(&k[11..], &[0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
}

#[test]
fn truncated_record_key_is_an_error_stating_the_length() {
    let k = record_key(1, 2);
    for cut in 0..k.len() {
        let err = decode_record_key(&k[..cut]).unwrap_err();
        assert_eq!(err.detail, format!("expected 19 bytes, found {cut}"));
    }
}

#[test]
fn index_key_with_garbage_after_the_handle_is_an_error() {
    let mut k = index_key(1, 1, &[Datum::Int(1)], Some(9));
    k.push(0);
    assert!(decode_index_key(&k, 1).is_err());
}

#[test]
fn unique_index_value_round_trips_and_rejects_other_lengths() {
    for h in [i64::MIN, -1, 0, 1, i64::MAX] {
        assert_eq!(
            decode_unique_index_value(&unique_index_value(h)).unwrap(),
            h
        );
    }
    let err = decode_unique_index_value(&[1, 2, 3]).unwrap_err();
    assert_eq!(err.detail, "expected 8 bytes, found 3");
}
