//! Building expressions: what is rejected before any row is read, and how column references
//! and constants evaluate over logical rows.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use cop::batch::Column;
use cop::expr::{CompiledExpr, Expr};
use wire::coprocessor::eval_error_code as code;
use wire::coprocessor::{Expr as P, ExprType, ScalarFuncSig as S};
use wire::datum::{Datum, EvalType};

fn build_err(e: &P, input: &[EvalType]) -> String {
    let err = Expr::build(e, input).unwrap_err();
    assert_eq!(err.code, code::TYPE, "{err}");
    err.msg
}

#[test]
fn unknown_expression_type_is_rejected() {
    let e = P {
        tp: 99,
        ..P::default()
    };
    assert_eq!(
        build_err(&e, &[]),
        "unknown expression type: expected 0..=4, 10 or 20, found 99"
    );
}

#[test]
fn unknown_function_signature_is_rejected() {
    let e = P {
        sig: 999,
        ..P::func(S::Plus, vec![P::int(1), P::int(1)])
    };
    assert_eq!(
        build_err(&e, &[]),
        "unknown scalar function: expected a known signature, found 999"
    );
}

#[test]
fn wrong_arity_is_rejected() {
    let one = vec![P::int(1)];
    let two = vec![P::int(1), P::int(2)];
    let three = vec![P::int(1), P::int(2), P::int(3)];
    assert_eq!(
        build_err(&P::func(S::Plus, one.clone()), &[]),
        "Plus: expected 2 arguments, found 1"
    );
    assert_eq!(
        build_err(&P::func(S::Lt, three.clone()), &[]),
        "Lt: expected 2 arguments, found 3"
    );
    assert_eq!(
        build_err(&P::func(S::Like, one.clone()), &[]),
        "Like: expected 2 arguments, found 1"
    );
    assert_eq!(
        build_err(&P::func(S::Not, two.clone()), &[]),
        "Not: expected 1 argument, found 2"
    );
    assert_eq!(
        build_err(&P::func(S::IsNull, vec![]), &[]),
        "IsNull: expected 1 argument, found 0"
    );
    assert_eq!(
        build_err(&P::func(S::In, one), &[]),
        "In: expected at least 2 arguments, found 1"
    );
    assert!(Expr::build(&P::func(S::In, three), &[]).is_ok());
}

#[test]
fn column_offset_out_of_range_is_rejected() {
    assert_eq!(
        build_err(&P::column(2), &[EvalType::Int, EvalType::Int]),
        "column offset out of range: expected < 2, found 2"
    );
}

#[test]
fn constants_with_a_wrong_value_length_are_rejected() {
    let mut e = P::int(1);
    e.val.pop();
    assert_eq!(
        build_err(&e, &[]),
        "Int64 constant: expected 8 bytes, found 7"
    );
    let mut e = P::uint(1);
    e.val.push(0);
    assert_eq!(
        build_err(&e, &[]),
        "UInt64 constant: expected 8 bytes, found 9"
    );
    let mut e = P::real(1.0);
    e.val.clear();
    assert_eq!(
        build_err(&e, &[]),
        "Float64 constant: expected 8 bytes, found 0"
    );
    let mut e = P::null();
    e.val.push(1);
    assert_eq!(
        build_err(&e, &[]),
        "Null constant: expected 0 bytes, found 1"
    );
}

#[test]
fn nan_constant_is_rejected() {
    assert_eq!(
        build_err(&P::real(f64::NAN), &[]),
        "Float64 constant: expected a number, found NaN"
    );
}

#[test]
fn constant_with_children_is_rejected() {
    let e = P {
        children: vec![P::int(1)],
        ..P::int(1)
    };
    assert_eq!(
        build_err(&e, &[]),
        "constant: expected no children, found 1"
    );
}

#[test]
fn aggregate_is_not_a_scalar_expression() {
    let e = P::agg(ExprType::Sum, P::column(0));
    assert_eq!(
        build_err(&e, &[EvalType::Int]),
        "expected a scalar expression, found aggregate Sum"
    );
}

#[test]
fn errors_deep_in_the_tree_surface() {
    let bad = P::func(S::Plus, vec![P::int(1), P::column(9)]);
    let e = P::func(S::And, vec![P::int(1), P::func(S::Not, vec![bad])]);
    assert!(build_err(&e, &[EvalType::Int]).starts_with("column offset out of range"));
}

#[test]
fn too_deep_expression_is_rejected() {
    let mut e = P::int(1);
    for _ in 0..200 {
        e = P::func(S::Not, vec![e]);
    }
    assert!(build_err(&e, &[]).starts_with("expression too deep"));
}

#[test]
fn result_types_of_functions() {
    let input = [
        EvalType::Int,
        EvalType::UInt,
        EvalType::Real,
        EvalType::Bytes,
    ];
    let cases = [
        (P::column(3), EvalType::Bytes),
        (
            P::func(S::Lt, vec![P::column(3), P::bytes("a")]),
            EvalType::Int,
        ),
        (P::func(S::UnaryMinus, vec![P::column(1)]), EvalType::Int),
        (P::func(S::UnaryMinus, vec![P::column(2)]), EvalType::Real),
        (P::func(S::IsNull, vec![P::column(3)]), EvalType::Int),
        (
            P::func(S::Plus, vec![P::null(), P::column(1)]),
            EvalType::UInt,
        ),
        (
            P::func(S::Like, vec![P::column(3), P::null()]),
            EvalType::Int,
        ),
    ];
    for (e, tp) in cases {
        assert_eq!(Expr::build(&e, &input).unwrap().result_type(), tp, "{e:?}");
    }
}

#[test]
fn column_ref_copies_the_logical_rows_in_order() {
    let c = Expr::build(&P::column(1), &[EvalType::Int, EvalType::Bytes]).unwrap();
    assert_eq!(c.as_column_ref(), Some(1));
    let cols = [
        Column::Int(vec![Some(1), Some(2), Some(3)]),
        Column::Bytes(vec![Some(b"a".to_vec()), None, Some(b"c".to_vec())]),
    ];
    assert_eq!(
        c.eval(&cols, &[2, 0, 1]).unwrap(),
        Column::Bytes(vec![Some(b"c".to_vec()), Some(b"a".to_vec()), None])
    );
    assert_eq!(c.eval(&cols, &[]).unwrap(), Column::Bytes(vec![]));
}

#[test]
fn constants_broadcast_to_every_logical_row() {
    let c = Expr::build(&P::uint(7), &[EvalType::Int]).unwrap();
    assert_eq!(c.as_constant(), Some(Datum::UInt(7)));
    let cols = [Column::Int(vec![Some(1), Some(2), Some(3)])];
    assert_eq!(
        c.eval(&cols, &[0, 2]).unwrap(),
        Column::UInt(vec![Some(7), Some(7)])
    );
}

#[test]
fn eval_rejects_a_column_of_another_type_than_built_for() {
    let c = Expr::build(&P::column(0), &[EvalType::Int]).unwrap();
    let err = c.eval(&[Column::Real(vec![Some(1.0)])], &[0]).unwrap_err();
    assert_eq!(err.msg, "input column 0: expected Int, found Real");
}

#[test]
fn eval_rejects_missing_columns_and_logical_rows_beyond_them() {
    let c = Expr::build(&P::column(1), &[EvalType::Int, EvalType::Int]).unwrap();
    let one = [Column::Int(vec![Some(1)])];
    assert_eq!(
        c.eval(&one, &[0]).unwrap_err().msg,
        "column offset out of range: expected < 1, found 1"
    );
    let two = [Column::Int(vec![Some(1)]), Column::Int(vec![Some(1)])];
    assert_eq!(
        c.eval(&two, &[0, 1]).unwrap_err().msg,
        "logical row out of range: expected < 1, found 1"
    );
}

#[test]
fn compiled_expr_and_expr_name_the_same_type() {
    let a: CompiledExpr = Expr::build(&P::int(1), &[]).unwrap();
    assert_eq!(a.result_type(), EvalType::Int);
}
