//! Three-valued logic (AND, OR, NOT), IS NULL and IN with NULLs.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use cop::error::EvalError;
use cop::expr::CompiledExpr;
use wire::coprocessor::eval_error_code as code;
use wire::coprocessor::{Expr as P, ScalarFuncSig as S};
use wire::datum::Datum;

fn eval(e: P) -> Result<Datum, EvalError> {
    let c = CompiledExpr::build(&e, &[])?;
    Ok(c.eval(&[], &[0])?.datum(0))
}

/// true, false, NULL as constants.
fn t() -> P {
    P::int(1)
}
fn fl() -> P {
    P::int(0)
}
fn n() -> P {
    P::null()
}

const T: Datum = Datum::Int(1);
const F: Datum = Datum::Int(0);
const N: Datum = Datum::Null;

#[test]
fn and_truth_table_with_null() {
    let cases = [
        (t(), t(), T),
        (t(), fl(), F),
        (t(), n(), N),
        (fl(), t(), F),
        (fl(), fl(), F),
        (fl(), n(), F),
        (n(), t(), N),
        (n(), fl(), F),
        (n(), n(), N),
    ];
    for (a, b, want) in cases {
        let e = P::func(S::And, vec![a.clone(), b.clone()]);
        assert_eq!(eval(e).unwrap(), want, "{a:?} AND {b:?}");
    }
}

#[test]
fn or_truth_table_with_null() {
    let cases = [
        (t(), t(), T),
        (t(), fl(), T),
        (t(), n(), T),
        (fl(), t(), T),
        (fl(), fl(), F),
        (fl(), n(), N),
        (n(), t(), T),
        (n(), fl(), N),
        (n(), n(), N),
    ];
    for (a, b, want) in cases {
        let e = P::func(S::Or, vec![a.clone(), b.clone()]);
        assert_eq!(eval(e).unwrap(), want, "{a:?} OR {b:?}");
    }
}

#[test]
fn not_truth_table_with_null() {
    for (a, want) in [(t(), F), (fl(), T), (n(), N)] {
        assert_eq!(
            eval(P::func(S::Not, vec![a.clone()])).unwrap(),
            want,
            "NOT {a:?}"
        );
    }
}

#[test]
fn any_non_zero_number_is_true() {
    assert_eq!(
        eval(P::func(S::And, vec![P::real(0.5), P::uint(7)])).unwrap(),
        T
    );
    assert_eq!(
        eval(P::func(S::And, vec![P::int(-3), P::real(-0.1)])).unwrap(),
        T
    );
    assert_eq!(eval(P::func(S::Not, vec![P::real(0.0)])).unwrap(), T);
    assert_eq!(eval(P::func(S::Not, vec![P::real(-0.0)])).unwrap(), T);
    assert_eq!(
        eval(P::func(S::Or, vec![P::uint(0), P::real(0.0)])).unwrap(),
        F
    );
}

#[test]
fn and_evaluates_both_sides_so_an_error_on_the_right_is_an_error() {
    let overflow = P::func(S::Plus, vec![P::int(i64::MAX), P::int(1)]);
    let err = eval(P::func(S::And, vec![fl(), overflow])).unwrap_err();
    assert_eq!(err.code, code::OVERFLOW);
}

#[test]
fn logic_on_bytes_is_a_type_error_at_build() {
    let err = CompiledExpr::build(&P::func(S::And, vec![P::bytes("x"), t()]), &[]).unwrap_err();
    assert_eq!(err.msg, "And: expected numbers, found Bytes, Int");
}

#[test]
fn is_null_is_never_null() {
    assert_eq!(eval(P::func(S::IsNull, vec![n()])).unwrap(), T);
    assert_eq!(eval(P::func(S::IsNull, vec![P::bytes("")])).unwrap(), F);
    assert_eq!(eval(P::func(S::IsNull, vec![P::real(0.0)])).unwrap(), F);
    let null_sum = P::func(S::Plus, vec![n(), t()]);
    assert_eq!(eval(P::func(S::IsNull, vec![null_sum])).unwrap(), T);
}

fn in_list(items: Vec<P>) -> Result<Datum, EvalError> {
    eval(P::func(S::In, items))
}

#[test]
fn in_finds_a_match_despite_a_null_in_the_list() {
    assert_eq!(in_list(vec![P::int(1), n(), P::int(1)]).unwrap(), T);
}

#[test]
fn in_without_a_match_but_with_a_null_in_the_list_is_null() {
    assert_eq!(in_list(vec![P::int(1), P::int(2), n()]).unwrap(), N);
}

#[test]
fn in_without_a_match_is_false() {
    assert_eq!(in_list(vec![P::int(1), P::int(2), P::int(3)]).unwrap(), F);
}

#[test]
fn null_in_anything_is_null() {
    assert_eq!(in_list(vec![n(), P::int(1)]).unwrap(), N);
    assert_eq!(in_list(vec![n(), n()]).unwrap(), N);
    assert_eq!(in_list(vec![n(), P::bytes("a")]).unwrap(), N);
}

#[test]
fn in_compares_mixed_numbers_by_value() {
    assert_eq!(in_list(vec![P::int(-1), P::uint(u64::MAX)]).unwrap(), F);
    assert_eq!(in_list(vec![P::int(3), P::uint(3)]).unwrap(), T);
    assert_eq!(in_list(vec![P::uint(2), P::real(2.0)]).unwrap(), T);
    assert_eq!(
        in_list(vec![P::real(2.5), P::int(2), P::int(3)]).unwrap(),
        F
    );
}

#[test]
fn in_compares_bytes_bytewise() {
    assert_eq!(
        in_list(vec![P::bytes("b"), P::bytes("a"), P::bytes("b")]).unwrap(),
        T
    );
    assert_eq!(in_list(vec![P::bytes("b"), P::bytes("B")]).unwrap(), F);
}

#[test]
fn in_mixing_bytes_and_numbers_is_a_type_error_at_build() {
    let err =
        CompiledExpr::build(&P::func(S::In, vec![P::int(1), P::bytes("1")]), &[]).unwrap_err();
    assert_eq!(err.code, code::TYPE);
}
