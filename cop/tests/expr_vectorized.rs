//! Vectorized evaluation over a batch with a subset of logical rows gives, row by row, what
//! evaluating each row alone (a batch of one) gives: the column loops, the constant
//! broadcasts and the logical-row gathers never mix rows up.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use cop::batch::Column;
use cop::expr::Expr;
use proptest::prelude::*;
use wire::coprocessor::{Expr as P, ScalarFuncSig as S};
use wire::datum::{Datum, EvalType};

/// Input columns: Int, UInt, Real, Bytes.
const INPUT: [EvalType; 4] = [
    EvalType::Int,
    EvalType::UInt,
    EvalType::Real,
    EvalType::Bytes,
];

fn int_value() -> impl Strategy<Value = i64> {
    prop_oneof![8 => -5i64..5, 1 => Just(i64::MIN), 1 => Just(i64::MAX)]
}

fn uint_value() -> impl Strategy<Value = u64> {
    prop_oneof![8 => 0u64..10, 1 => Just(u64::MAX), 1 => Just(1 << 63)]
}

fn real_value() -> impl Strategy<Value = f64> {
    prop_oneof![4 => -10.0f64..10.0, 1 => Just(0.0), 1 => Just(-0.5), 1 => Just(1e300)]
}

fn bytes_value() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(prop::sample::select(b"ab%_".to_vec()), 0..4)
}

fn bytes_expr() -> impl Strategy<Value = P> {
    prop_oneof![
        3 => Just(P::column(3)),
        2 => bytes_value().prop_map(P::bytes),
        1 => Just(P::null()),
    ]
}

fn num_leaf() -> impl Strategy<Value = P> {
    prop_oneof![
        2 => (0u32..3).prop_map(P::column),
        1 => int_value().prop_map(P::int),
        1 => uint_value().prop_map(P::uint),
        1 => real_value().prop_map(P::real),
        1 => Just(P::null()),
    ]
}

fn num_expr() -> impl Strategy<Value = P> {
    num_leaf().prop_recursive(4, 24, 3, |inner| {
        let arith = prop::sample::select(vec![
            S::Plus,
            S::Minus,
            S::Multiply,
            S::Divide,
            S::IntDiv,
            S::Mod,
        ]);
        let cmp = prop::sample::select(vec![S::Lt, S::Le, S::Gt, S::Ge, S::Eq, S::Ne]);
        prop_oneof![
            (arith, inner.clone(), inner.clone()).prop_map(|(s, a, b)| P::func(s, vec![a, b])),
            (cmp.clone(), inner.clone(), inner.clone())
                .prop_map(|(s, a, b)| P::func(s, vec![a, b])),
            (cmp, bytes_expr(), bytes_expr()).prop_map(|(s, a, b)| P::func(s, vec![a, b])),
            (
                prop::sample::select(vec![S::And, S::Or]),
                inner.clone(),
                inner.clone()
            )
                .prop_map(|(s, a, b)| P::func(s, vec![a, b])),
            (
                prop::sample::select(vec![S::Not, S::UnaryMinus, S::IsNull]),
                inner.clone()
            )
                .prop_map(|(s, a)| P::func(s, vec![a])),
            bytes_expr().prop_map(|a| P::func(S::IsNull, vec![a])),
            prop::collection::vec(inner, 2..5).prop_map(|items| P::func(S::In, items)),
            (bytes_expr(), bytes_expr()).prop_map(|(a, b)| P::func(S::Like, vec![a, b])),
        ]
    })
}

fn columns(n: usize) -> impl Strategy<Value = Vec<Column>> {
    (
        prop::collection::vec(prop::option::weighted(0.8, int_value()), n),
        prop::collection::vec(prop::option::weighted(0.8, uint_value()), n),
        prop::collection::vec(prop::option::weighted(0.8, real_value()), n),
        prop::collection::vec(prop::option::weighted(0.8, bytes_value()), n),
    )
        .prop_map(|(i, u, r, b)| {
            vec![
                Column::Int(i),
                Column::UInt(u),
                Column::Real(r),
                Column::Bytes(b),
            ]
        })
}

/// Columns and logical rows: a subset of the physical rows, in order.
fn batch() -> impl Strategy<Value = (Vec<Column>, Vec<usize>)> {
    (1usize..12).prop_flat_map(|n| {
        (columns(n), prop::collection::vec(any::<bool>(), n)).prop_map(|(cols, keep)| {
            let rows = keep
                .iter()
                .enumerate()
                .filter(|(_, k)| **k)
                .map(|(i, _)| i)
                .collect();
            (cols, rows)
        })
    })
}

/// Row `r` of the batch as a batch of one row.
fn single_row(cols: &[Column], r: usize) -> Vec<Column> {
    cols.iter()
        .map(|c| {
            let mut one = Column::with_capacity(c.eval_type(), 1);
            one.push_datum(&c.datum(r)).unwrap();
            one
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn batch_eval_equals_eval_of_each_row_alone(e in num_expr(), (cols, rows) in batch()) {
        let compiled = Expr::build(&e, &INPUT).expect("the generator builds well-typed expressions");
        let per_row: Vec<Result<Datum, _>> = rows
            .iter()
            .map(|&r| compiled.eval(&single_row(&cols, r), &[0]).map(|c| c.datum(0)))
            .collect();
        match compiled.eval(&cols, &rows) {
            Ok(out) => {
                prop_assert_eq!(out.eval_type(), compiled.result_type());
                prop_assert_eq!(out.len(), rows.len());
                for (i, single) in per_row.iter().enumerate() {
                    prop_assert_eq!(single.as_ref().ok(), Some(&out.datum(i)), "logical row {}", i);
                }
            }
            Err(err) => {
                prop_assert!(
                    per_row.iter().any(|r| r.as_ref().err() == Some(&err)),
                    "batch failed with {:?} but no row alone did: {:?}", err, per_row
                );
            }
        }
    }
}
