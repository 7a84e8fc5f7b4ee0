//! Arithmetic: result types, overflow errors at the exact boundaries, division by zero, and
//! NULL propagation.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use cop::error::EvalError;
use cop::expr::CompiledExpr;
use wire::coprocessor::eval_error_code as code;
use wire::coprocessor::{Expr as P, ScalarFuncSig as S};
use wire::datum::{Datum, EvalType};

fn eval(e: P) -> Result<Datum, EvalError> {
    let c = CompiledExpr::build(&e, &[])?;
    Ok(c.eval(&[], &[0])?.datum(0))
}

fn f(sig: S, a: P, b: P) -> P {
    P::func(sig, vec![a, b])
}

fn overflow(e: P, expected_msg_part: &str) {
    let err = eval(e).unwrap_err();
    assert_eq!(err.code, code::OVERFLOW, "{err}");
    assert!(err.msg.contains(expected_msg_part), "{err}");
}

#[test]
fn int_max_plus_one_overflows() {
    overflow(
        f(S::Plus, P::int(i64::MAX), P::int(1)),
        "9223372036854775807 + 1 (expected a result in BIGINT range",
    );
}

#[test]
fn int_min_minus_one_overflows() {
    overflow(
        f(S::Minus, P::int(i64::MIN), P::int(1)),
        "-9223372036854775808 - 1",
    );
}

#[test]
fn uint_zero_minus_one_overflows() {
    overflow(
        f(S::Minus, P::uint(0), P::uint(1)),
        "0 - 1 (expected a result in BIGINT UNSIGNED range",
    );
}

#[test]
fn uint_max_plus_one_overflows() {
    overflow(
        f(S::Plus, P::uint(u64::MAX), P::uint(1)),
        "18446744073709551615 + 1",
    );
}

#[test]
fn int_min_times_minus_one_overflows() {
    overflow(
        f(S::Multiply, P::int(i64::MIN), P::int(-1)),
        "-9223372036854775808 * -1",
    );
}

#[test]
fn uint_max_squared_overflows() {
    overflow(f(S::Multiply, P::uint(u64::MAX), P::uint(u64::MAX)), "*");
}

#[test]
fn int_min_int_div_minus_one_overflows() {
    overflow(
        f(S::IntDiv, P::int(i64::MIN), P::int(-1)),
        "-9223372036854775808 DIV -1",
    );
}

#[test]
fn negating_int_min_overflows() {
    overflow(
        P::func(S::UnaryMinus, vec![P::int(i64::MIN)]),
        "-(-9223372036854775808)",
    );
}

#[test]
fn negating_two_to_the_63_unsigned_gives_int_min() {
    let e = P::func(S::UnaryMinus, vec![P::uint(1 << 63)]);
    assert_eq!(eval(e).unwrap(), Datum::Int(i64::MIN));
    overflow(
        P::func(S::UnaryMinus, vec![P::uint((1 << 63) + 1)]),
        "-(9223372036854775809)",
    );
}

#[test]
fn int_with_uint_is_unsigned_when_the_result_is_non_negative() {
    assert_eq!(
        eval(f(S::Plus, P::int(-3), P::uint(5))).unwrap(),
        Datum::UInt(2)
    );
    assert_eq!(
        eval(f(S::Minus, P::uint(5), P::int(-3))).unwrap(),
        Datum::UInt(8)
    );
    assert_eq!(
        eval(f(S::Plus, P::int(i64::MAX), P::uint(i64::MAX as u64 + 1))).unwrap(),
        Datum::UInt(u64::MAX)
    );
}

#[test]
fn int_with_uint_below_zero_overflows() {
    overflow(f(S::Plus, P::int(-6), P::uint(5)), "-6 + 5");
    overflow(f(S::Multiply, P::int(-1), P::uint(1)), "-1 * 1");
}

#[test]
fn int_div_truncates_toward_zero() {
    assert_eq!(
        eval(f(S::IntDiv, P::int(7), P::int(2))).unwrap(),
        Datum::Int(3)
    );
    assert_eq!(
        eval(f(S::IntDiv, P::int(-7), P::int(2))).unwrap(),
        Datum::Int(-3)
    );
    assert_eq!(
        eval(f(S::IntDiv, P::int(-1), P::uint(2))).unwrap(),
        Datum::UInt(0)
    );
    overflow(f(S::IntDiv, P::int(-4), P::uint(2)), "-4 DIV 2");
}

#[test]
fn mod_has_the_sign_and_type_of_the_dividend() {
    assert_eq!(
        eval(f(S::Mod, P::int(-7), P::int(3))).unwrap(),
        Datum::Int(-1)
    );
    assert_eq!(
        eval(f(S::Mod, P::int(7), P::int(-3))).unwrap(),
        Datum::Int(1)
    );
    assert_eq!(
        eval(f(S::Mod, P::int(-7), P::uint(3))).unwrap(),
        Datum::Int(-1)
    );
    assert_eq!(
        eval(f(S::Mod, P::uint(7), P::int(-3))).unwrap(),
        Datum::UInt(1)
    );
    assert_eq!(
        eval(f(S::Mod, P::int(i64::MIN), P::int(-1))).unwrap(),
        Datum::Int(0)
    );
    assert_eq!(
        eval(f(S::Mod, P::real(-7.5), P::int(2))).unwrap(),
        Datum::Real(-1.5)
    );
}

#[test]
fn division_by_zero_is_null() {
    for sig in [S::Divide, S::IntDiv, S::Mod] {
        for (a, b) in [
            (P::int(1), P::int(0)),
            (P::uint(1), P::uint(0)),
            (P::real(1.0), P::real(0.0)),
            (P::real(1.0), P::real(-0.0)),
            (P::int(1), P::real(0.0)),
            (P::int(i64::MIN), P::int(0)),
        ] {
            assert_eq!(
                eval(f(sig, a.clone(), b.clone())).unwrap(),
                Datum::Null,
                "{sig:?} {a:?} {b:?}"
            );
        }
    }
}

#[test]
fn divide_is_always_real() {
    assert_eq!(
        eval(f(S::Divide, P::int(7), P::int(2))).unwrap(),
        Datum::Real(3.5)
    );
    assert_eq!(
        eval(f(S::Divide, P::uint(1), P::int(-4))).unwrap(),
        Datum::Real(-0.25)
    );
}

#[test]
fn any_real_operand_makes_real_arithmetic() {
    assert_eq!(
        eval(f(S::Plus, P::real(1.5), P::int(1))).unwrap(),
        Datum::Real(2.5)
    );
    assert_eq!(
        eval(f(S::Minus, P::uint(1), P::real(1.5))).unwrap(),
        Datum::Real(-0.5)
    );
    assert_eq!(
        eval(f(S::Multiply, P::real(-2.0), P::uint(3))).unwrap(),
        Datum::Real(-6.0)
    );
}

#[test]
fn real_result_beyond_double_range_overflows() {
    overflow(
        f(S::Multiply, P::real(1e308), P::int(10)),
        "expected a result in DOUBLE range",
    );
    overflow(f(S::Divide, P::real(1e308), P::real(1e-308)), "/");
}

#[test]
fn int_div_of_reals_truncates_to_an_int() {
    assert_eq!(
        eval(f(S::IntDiv, P::real(7.5), P::int(2))).unwrap(),
        Datum::Int(3)
    );
    assert_eq!(
        eval(f(S::IntDiv, P::real(-7.5), P::int(2))).unwrap(),
        Datum::Int(-3)
    );
    overflow(f(S::IntDiv, P::real(1e300), P::int(1)), "DIV");
}

#[test]
fn null_propagates_through_arithmetic() {
    for sig in [S::Plus, S::Minus, S::Multiply, S::Divide, S::IntDiv, S::Mod] {
        assert_eq!(
            eval(f(sig, P::null(), P::int(1))).unwrap(),
            Datum::Null,
            "{sig:?}"
        );
        assert_eq!(
            eval(f(sig, P::uint(1), P::null())).unwrap(),
            Datum::Null,
            "{sig:?}"
        );
        assert_eq!(
            eval(f(sig, P::real(1.0), P::null())).unwrap(),
            Datum::Null,
            "{sig:?}"
        );
    }
    assert_eq!(
        eval(P::func(S::UnaryMinus, vec![P::null()])).unwrap(),
        Datum::Null
    );
}

#[test]
fn result_types_follow_mysql() {
    let types = [EvalType::Int, EvalType::UInt, EvalType::Real];
    for (sig, table) in [
        (
            S::Plus,
            [
                ["Int", "UInt", "Real"],
                ["UInt", "UInt", "Real"],
                ["Real", "Real", "Real"],
            ],
        ),
        (S::Divide, [["Real"; 3], ["Real"; 3], ["Real"; 3]]),
        (
            S::IntDiv,
            [
                ["Int", "UInt", "Int"],
                ["UInt", "UInt", "Int"],
                ["Int", "Int", "Int"],
            ],
        ),
        (
            S::Mod,
            [
                ["Int", "Int", "Real"],
                ["UInt", "UInt", "Real"],
                ["Real", "Real", "Real"],
            ],
        ),
    ] {
        for (i, a) in types.iter().enumerate() {
            for (j, b) in types.iter().enumerate() {
                let e = f(sig, P::column(0), P::column(1));
                let c = CompiledExpr::build(&e, &[*a, *b]).unwrap();
                assert_eq!(
                    format!("{:?}", c.result_type()),
                    table[i][j],
                    "{sig:?} {a:?} {b:?}"
                );
            }
        }
    }
}

#[test]
fn arithmetic_on_bytes_is_a_type_error_at_build() {
    for sig in [S::Plus, S::Minus, S::Multiply, S::Divide, S::IntDiv, S::Mod] {
        let err = CompiledExpr::build(&f(sig, P::bytes("1"), P::int(1)), &[]).unwrap_err();
        assert_eq!(err.code, code::TYPE);
        assert_eq!(
            err.msg,
            format!("{sig:?}: expected two numbers, found Bytes, Int")
        );
    }
    let err = CompiledExpr::build(&P::func(S::UnaryMinus, vec![P::bytes("1")]), &[]).unwrap_err();
    assert_eq!(err.msg, "UnaryMinus: expected a number, found Bytes");
}
