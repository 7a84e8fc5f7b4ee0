//! Memcomparable and varint numbers: order, round trips, and truncated input.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use proptest::prelude::*;
use wire::codec::number::{
    decode_f64, decode_i64, decode_u64, decode_var_i64, decode_var_u64, encode_f64, encode_i64,
    encode_u64, encode_var_i64, encode_var_u64,
};

fn enc<T: Copy>(f: fn(&mut Vec<u8>, T), v: T) -> Vec<u8> {
    let mut buf = Vec::new();
    f(&mut buf, v);
    buf
}

fn non_nan_f64() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>().prop_filter("not NaN", |v| !v.is_nan()),
        Just(0.0),
        Just(-0.0),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(f64::MIN_POSITIVE),
        Just(-f64::MIN_POSITIVE),
        (-1000i32..1000).prop_map(f64::from),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn memcomparable_i64_orders_like_the_numbers(a in any::<i64>(), b in any::<i64>()) {
        let (ea, eb) = (enc(encode_i64, a), enc(encode_i64, b));
        prop_assert_eq!(ea.cmp(&eb), a.cmp(&b));
        prop_assert_eq!(decode_i64(&mut ea.as_slice()).unwrap(), a);
    }

    #[test]
    fn memcomparable_i64_orders_small_negatives(a in -300i64..300, b in -300i64..300) {
        prop_assert_eq!(enc(encode_i64, a).cmp(&enc(encode_i64, b)), a.cmp(&b));
    }

    #[test]
    fn memcomparable_u64_orders_like_the_numbers(a in any::<u64>(), b in any::<u64>()) {
        let (ea, eb) = (enc(encode_u64, a), enc(encode_u64, b));
        prop_assert_eq!(ea.cmp(&eb), a.cmp(&b));
        prop_assert_eq!(decode_u64(&mut ea.as_slice()).unwrap(), a);
    }

    #[test]
    fn memcomparable_f64_orders_like_the_numbers(a in non_nan_f64(), b in non_nan_f64()) {
        let (ea, eb) = (enc(encode_f64, a), enc(encode_f64, b));
        prop_assert_eq!(Some(ea.cmp(&eb)), a.partial_cmp(&b), "{} vs {}", a, b);
        prop_assert_eq!(decode_f64(&mut ea.as_slice()).unwrap(), a);
    }

    #[test]
    fn varints_round_trip(i in any::<i64>(), u in any::<u64>()) {
        let ei = enc(encode_var_i64, i);
        let eu = enc(encode_var_u64, u);
        prop_assert!(ei.len() <= 10 && eu.len() <= 10);
        let mut cursor = ei.as_slice();
        prop_assert_eq!(decode_var_i64(&mut cursor).unwrap(), i);
        prop_assert!(cursor.is_empty());
        let mut cursor = eu.as_slice();
        prop_assert_eq!(decode_var_u64(&mut cursor).unwrap(), u);
        prop_assert!(cursor.is_empty());
    }

    #[test]
    fn every_truncated_varint_is_an_error(u in any::<u64>()) {
        let e = enc(encode_var_u64, u);
        for cut in 0..e.len() {
            prop_assert!(decode_var_u64(&mut &e[..cut]).is_err(), "cut {}", cut);
        }
    }
}

#[test]
fn decoders_advance_the_cursor_past_what_they_read() {
    let mut buf = Vec::new();
    encode_i64(&mut buf, -5);
    encode_u64(&mut buf, 7);
    encode_f64(&mut buf, 1.5);
    encode_var_i64(&mut buf, -300);
    encode_var_u64(&mut buf, 300);
    let mut cursor = buf.as_slice();
    assert_eq!(decode_i64(&mut cursor).unwrap(), -5);
    assert_eq!(decode_u64(&mut cursor).unwrap(), 7);
    assert_eq!(decode_f64(&mut cursor).unwrap(), 1.5);
    assert_eq!(decode_var_i64(&mut cursor).unwrap(), -300);
    assert_eq!(decode_var_u64(&mut cursor).unwrap(), 300);
    assert!(cursor.is_empty());
}

#[test]
fn every_truncated_fixed_number_is_an_error_stating_the_length() {
    let e = enc(encode_i64, 1);
    for cut in 0..8 {
        let err = decode_i64(&mut &e[..cut]).unwrap_err();
        assert_eq!(err.detail, format!("expected 8 bytes, found {cut}"));
        assert!(decode_u64(&mut &e[..cut]).is_err());
        assert!(decode_f64(&mut &e[..cut]).is_err());
    }
}

#[test]
fn sign_bit_flip_puts_negatives_first() {
    assert_eq!(enc(encode_i64, i64::MIN), [0u8; 8]);
    assert_eq!(
        enc(encode_i64, -1),
        [0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]
    );
    assert_eq!(enc(encode_i64, 0), [0x80, 0, 0, 0, 0, 0, 0, 0]);
}
