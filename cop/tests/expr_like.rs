//! LIKE: `%`, `_`, `\` escapes, constant and per-row patterns, and NULL.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use cop::batch::Column;
use cop::expr::{CompiledExpr, LikePattern};
use proptest::prelude::*;
use wire::coprocessor::{Expr as P, ScalarFuncSig as S};
use wire::datum::{Datum, EvalType};

fn like(value: &[u8], pattern: &[u8]) -> bool {
    let e = P::func(S::Like, vec![P::bytes(value), P::bytes(pattern)]);
    match CompiledExpr::build(&e, &[])
        .unwrap()
        .eval(&[], &[0])
        .unwrap()
        .datum(0)
    {
        Datum::Int(v) => v == 1,
        other => panic!("expected Int, found {other:?}"),
    }
}

#[test]
fn percent_at_the_end_is_a_prefix_match() {
    assert!(like(b"abcdef", b"abc%"));
    assert!(like(b"abc", b"abc%"));
    assert!(!like(b"ab", b"abc%"));
    assert!(!like(b"xabc", b"abc%"));
    assert_eq!(
        LikePattern::compile(b"abc%"),
        LikePattern::Prefix(b"abc".to_vec())
    );
}

#[test]
fn percent_at_the_start_is_a_suffix_match() {
    assert!(like(b"xyzabc", b"%abc"));
    assert!(!like(b"abcx", b"%abc"));
}

#[test]
fn percent_at_both_ends_is_a_substring_match() {
    assert!(like(b"xxabcxx", b"%abc%"));
    assert!(like(b"abc", b"%abc%"));
    assert!(!like(b"abxc", b"%abc%"));
}

#[test]
fn pattern_without_wildcards_must_match_exactly() {
    assert!(like(b"abc", b"abc"));
    assert!(!like(b"abcd", b"abc"));
    assert!(like(b"", b""));
    assert!(!like(b"a", b""));
}

#[test]
fn underscore_matches_exactly_one_byte() {
    assert!(like(b"abc", b"a_c"));
    assert!(!like(b"ac", b"a_c"));
    assert!(!like(b"abbc", b"a_c"));
    assert!(like(b"a\xffc", b"a_c"));
}

#[test]
fn percent_matches_any_run_including_empty() {
    assert!(like(b"ac", b"a%c"));
    assert!(like(b"abbbbc", b"a%c"));
    assert!(like(b"", b"%"));
    assert!(like(b"a_b_c", b"%_%_%"));
    assert!(!like(b"a", b"%_%_%"));
}

#[test]
fn backtracking_finds_a_later_match() {
    assert!(like(b"aXbYbZc", b"a%b_c"));
    assert!(like(b"mississippi", b"%iss%ipp%"));
    assert!(!like(b"mississippi", b"%iss%ipx%"));
}

#[test]
fn escaped_wildcards_match_only_themselves() {
    assert!(like(b"50%", br"50\%"));
    assert!(!like(b"500", br"50\%"));
    assert!(like(b"a_b", br"a\_b"));
    assert!(!like(b"axb", br"a\_b"));
    assert!(like(br"a\b", br"a\\b"));
    assert!(like(b"ab", br"\a\b"));
}

#[test]
fn trailing_backslash_is_a_literal_backslash() {
    assert!(like(br"ab\", br"ab\"));
    assert!(!like(b"ab", br"ab\"));
}

#[test]
fn like_is_case_sensitive_and_bytewise() {
    assert!(!like(b"ABC", b"abc"));
    assert!(like(b"a\x00c", b"a%c"));
}

#[test]
fn null_value_or_pattern_is_null() {
    for (v, p) in [(P::null(), P::bytes("a%")), (P::bytes("a"), P::null())] {
        let e = P::func(S::Like, vec![v, p]);
        let out = CompiledExpr::build(&e, &[])
            .unwrap()
            .eval(&[], &[0])
            .unwrap();
        assert_eq!(out, Column::Int(vec![None]));
    }
}

#[test]
fn pattern_from_a_column_is_compiled_per_row() {
    let e = P::func(S::Like, vec![P::column(0), P::column(1)]);
    let c = CompiledExpr::build(&e, &[EvalType::Bytes, EvalType::Bytes]).unwrap();
    let values = Column::Bytes(vec![
        Some(b"abc".to_vec()),
        Some(b"abc".to_vec()),
        Some(b"x".to_vec()),
        None,
    ]);
    let patterns = Column::Bytes(vec![
        Some(b"a%".to_vec()),
        Some(b"b%".to_vec()),
        Some(b"b%".to_vec()),
        Some(b"%".to_vec()),
    ]);
    assert_eq!(
        c.eval(&[values, patterns], &[0, 1, 2, 3]).unwrap(),
        Column::Int(vec![Some(1), Some(0), Some(0), None])
    );
}

#[test]
fn like_on_a_number_is_a_type_error_at_build() {
    let err =
        CompiledExpr::build(&P::func(S::Like, vec![P::int(1), P::bytes("1")]), &[]).unwrap_err();
    assert_eq!(err.msg, "Like: expected two byte strings, found Int, Bytes");
}

/// A straightforward recursive matcher, the definition the fast paths must agree with.
fn reference(v: &[u8], p: &[u8]) -> bool {
    match p.split_first() {
        None => v.is_empty(),
        Some((b'%', rest)) => (0..=v.len()).any(|i| reference(&v[i..], rest)),
        Some((b'_', rest)) => !v.is_empty() && reference(&v[1..], rest),
        Some((b'\\', rest)) => {
            let (lit, rest) = match rest.split_first() {
                Some((c, r)) => (*c, r),
                None => (b'\\', rest),
            };
            v.first() == Some(&lit) && reference(&v[1..], rest)
        }
        Some((c, rest)) => v.first() == Some(c) && reference(&v[1..], rest),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn compiled_patterns_agree_with_the_recursive_definition(
        v in prop::collection::vec(prop::sample::select(b"ab%_\\".to_vec()), 0..8),
        p in prop::collection::vec(prop::sample::select(b"ab%_\\".to_vec()), 0..6),
    ) {
        prop_assert_eq!(LikePattern::compile(&p).matches(&v), reference(&v, &p));
    }
}
