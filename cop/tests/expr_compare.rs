//! Comparisons: mixed numeric types by value, bytes bytewise, NULL, and type errors.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use cop::batch::Column;
use cop::error::EvalError;
use cop::expr::CompiledExpr;
use wire::coprocessor::eval_error_code as code;
use wire::coprocessor::{Expr as P, ScalarFuncSig as S};
use wire::datum::{Datum, EvalType};

const OPS: [S; 6] = [S::Lt, S::Le, S::Gt, S::Ge, S::Eq, S::Ne];

fn eval(e: P) -> Result<Datum, EvalError> {
    let c = CompiledExpr::build(&e, &[])?;
    Ok(c.eval(&[], &[0])?.datum(0))
}

/// The results of all six comparisons of `a` and `b`, as 0/1.
fn all_ops(a: P, b: P) -> [i64; 6] {
    OPS.map(
        |sig| match eval(P::func(sig, vec![a.clone(), b.clone()])).unwrap() {
            Datum::Int(v) => v,
            other => panic!("{sig:?}: expected Int, found {other:?}"),
        },
    )
}

/// Expected [Lt, Le, Gt, Ge, Eq, Ne] for an ordering.
fn expected(o: std::cmp::Ordering) -> [i64; 6] {
    use std::cmp::Ordering::*;
    match o {
        Less => [1, 1, 0, 0, 0, 1],
        Equal => [0, 1, 0, 1, 1, 0],
        Greater => [0, 0, 1, 1, 0, 1],
    }
}

#[test]
fn minus_one_is_less_than_u64_max() {
    use std::cmp::Ordering::*;
    assert_eq!(all_ops(P::int(-1), P::uint(u64::MAX)), expected(Less));
    assert_eq!(all_ops(P::uint(u64::MAX), P::int(-1)), expected(Greater));
}

#[test]
fn uint_above_i64_max_is_greater_than_every_int() {
    use std::cmp::Ordering::*;
    assert_eq!(
        all_ops(P::uint(i64::MAX as u64 + 1), P::int(i64::MAX)),
        expected(Greater)
    );
    assert_eq!(all_ops(P::int(i64::MIN), P::uint(0)), expected(Less));
}

#[test]
fn int_equals_uint_of_the_same_value() {
    assert_eq!(
        all_ops(P::int(5), P::uint(5)),
        expected(std::cmp::Ordering::Equal)
    );
}

#[test]
fn integers_compare_with_reals_by_value() {
    use std::cmp::Ordering::*;
    assert_eq!(all_ops(P::int(1), P::real(1.5)), expected(Less));
    assert_eq!(all_ops(P::real(2.0), P::int(2)), expected(Equal));
    assert_eq!(all_ops(P::uint(3), P::real(-0.5)), expected(Greater));
    assert_eq!(all_ops(P::int(-3), P::real(-2.5)), expected(Less));
}

#[test]
fn negative_zero_equals_zero() {
    assert_eq!(
        all_ops(P::real(-0.0), P::real(0.0)),
        expected(std::cmp::Ordering::Equal)
    );
    assert_eq!(
        all_ops(P::real(-0.0), P::int(0)),
        expected(std::cmp::Ordering::Equal)
    );
}

#[test]
fn bytes_compare_bytewise() {
    use std::cmp::Ordering::*;
    assert_eq!(all_ops(P::bytes("a"), P::bytes("ab")), expected(Less));
    assert_eq!(
        all_ops(P::bytes(vec![0u8]), P::bytes("")),
        expected(Greater)
    );
    assert_eq!(
        all_ops(P::bytes(vec![0xffu8]), P::bytes("z")),
        expected(Greater)
    );
    assert_eq!(all_ops(P::bytes("B"), P::bytes("a")), expected(Less));
    assert_eq!(all_ops(P::bytes("x"), P::bytes("x")), expected(Equal));
}

#[test]
fn comparison_with_null_is_null() {
    for sig in OPS {
        for (a, b) in [
            (P::null(), P::int(1)),
            (P::bytes("a"), P::null()),
            (P::null(), P::null()),
        ] {
            assert_eq!(
                eval(P::func(sig, vec![a.clone(), b])).unwrap(),
                Datum::Null,
                "{sig:?}"
            );
        }
    }
}

#[test]
fn bytes_against_a_number_is_a_type_error_at_build() {
    let err =
        CompiledExpr::build(&P::func(S::Lt, vec![P::bytes("1"), P::int(1)]), &[]).unwrap_err();
    assert_eq!(err.code, code::TYPE);
    assert_eq!(
        err.msg,
        "Lt: expected all numbers or all byte strings, found Bytes, Int"
    );
}

#[test]
fn null_literal_takes_the_type_of_a_bytes_column() {
    let e = P::func(S::Eq, vec![P::column(0), P::null()]);
    let c = CompiledExpr::build(&e, &[EvalType::Bytes]).unwrap();
    let col = Column::Bytes(vec![Some(b"a".to_vec()), None]);
    assert_eq!(
        c.eval(&[col], &[0, 1]).unwrap(),
        Column::Int(vec![None, None])
    );
}

#[test]
fn column_against_constant_compares_each_logical_row() {
    let e = P::func(S::Gt, vec![P::column(0), P::int(10)]);
    let c = CompiledExpr::build(&e, &[EvalType::Int]).unwrap();
    let col = Column::Int(vec![Some(5), Some(11), None, Some(10), Some(100)]);
    assert_eq!(
        c.eval(&[col], &[4, 2, 1, 0]).unwrap(),
        Column::Int(vec![Some(1), None, Some(1), Some(0)])
    );
}

#[test]
fn constant_against_column_compares_each_logical_row() {
    let e = P::func(S::Lt, vec![P::uint(10), P::column(0)]);
    let c = CompiledExpr::build(&e, &[EvalType::Int]).unwrap();
    let col = Column::Int(vec![Some(-5), Some(11), None]);
    assert_eq!(
        c.eval(&[col], &[0, 1, 2]).unwrap(),
        Column::Int(vec![Some(0), Some(1), None])
    );
}
