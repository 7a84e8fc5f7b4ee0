//! Memcomparable and compact bytes: order (prefixes and zero bytes included), round trips,
//! and truncated input.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use proptest::prelude::*;
use wire::codec::bytes::{
    decode_bytes_comparable, decode_compact_bytes, encode_bytes_comparable, encode_compact_bytes,
};

/// Byte strings over a tiny alphabet so that prefixes, zero bytes, 0xff and group boundaries
/// (lengths around 8 and 16) are common.
fn tricky_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop::sample::select(vec![0u8, 1, b'a', 0xf7, 0xfe, 0xff]),
        0..20,
    )
}

fn comparable(v: &[u8]) -> Vec<u8> {
    let mut buf = Vec::new();
    encode_bytes_comparable(&mut buf, v);
    buf
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn memcomparable_bytes_order_like_the_bytes(a in tricky_bytes(), b in tricky_bytes()) {
        prop_assert_eq!(comparable(&a).cmp(&comparable(&b)), a.cmp(&b));
    }

    #[test]
    fn memcomparable_bytes_order_a_string_before_its_extensions(
        a in tricky_bytes(),
        tail in prop::collection::vec(any::<u8>(), 1..10),
    ) {
        let mut longer = a.clone();
        longer.extend_from_slice(&tail);
        prop_assert!(comparable(&a) < comparable(&longer));
    }

    #[test]
    fn memcomparable_bytes_round_trip_and_leave_what_follows(
        a in prop::collection::vec(any::<u8>(), 0..40),
        rest in prop::collection::vec(any::<u8>(), 0..10),
    ) {
        let mut buf = comparable(&a);
        prop_assert_eq!(buf.len() % 9, 0);
        buf.extend_from_slice(&rest);
        let mut cursor = buf.as_slice();
        prop_assert_eq!(decode_bytes_comparable(&mut cursor).unwrap(), a);
        prop_assert_eq!(cursor, rest.as_slice());
    }

    #[test]
    fn every_truncation_of_memcomparable_bytes_is_an_error(a in tricky_bytes()) {
        let e = comparable(&a);
        for cut in 0..e.len() {
            prop_assert!(decode_bytes_comparable(&mut &e[..cut]).is_err(), "cut {}", cut);
        }
    }

    #[test]
    fn compact_bytes_round_trip(a in prop::collection::vec(any::<u8>(), 0..300)) {
        let mut buf = Vec::new();
        encode_compact_bytes(&mut buf, &a);
        let mut cursor = buf.as_slice();
        prop_assert_eq!(decode_compact_bytes(&mut cursor).unwrap(), a);
        prop_assert!(cursor.is_empty());
    }

    #[test]
    fn every_truncation_of_compact_bytes_is_an_error(a in prop::collection::vec(any::<u8>(), 0..300)) {
        let mut buf = Vec::new();
        encode_compact_bytes(&mut buf, &a);
        for cut in 0..buf.len() {
            prop_assert!(decode_compact_bytes(&mut &buf[..cut]).is_err(), "cut {}", cut);
        }
    }
}

#[test]
fn empty_string_is_one_all_padding_group() {
    assert_eq!(comparable(b""), [0, 0, 0, 0, 0, 0, 0, 0, 0xf7]);
}

#[test]
fn compact_length_error_states_expected_and_found() {
    let mut buf = Vec::new();
    encode_compact_bytes(&mut buf, b"hello");
    let err = decode_compact_bytes(&mut &buf[..3]).unwrap_err();
    assert_eq!(err.detail, "expected a length within 0..=2, found 5");
}
