//! Differential test: random tables (random schema, rows, versions and deletes spread over the
//! levels, an L0 file and the memtable, with a non-unique secondary index and sometimes a unique
//! one whose entries follow the rows' versions and deletes) and random DAGs (a table scan or an
//! index scan over a whole index, an optional selection, then none / simple aggregation / hash
//! aggregation / TopN / limit / projection) executed by the handler at a random start_ts,
//! against a small reference interpreter over a `Vec` of the rows visible at that timestamp (for
//! an index scan: their index values and handle, in (memcomparable values, handle) order).
//!
//! The reference calls nothing of the cop crate's expressions or executors: it has its own
//! typing rules and its own row-at-a-time evaluator with SQL NULL semantics, written from the
//! semantics documented in `cop::expr` and `cop::executors`. Partial aggregates are compared as
//! multisets; an evaluation error must be an error on both sides.
//!
//! One vectorized detail the reference reproduces on purpose: below a LIMIT, the scan reads
//! batches of 32, 64, 128, ... rows, and every row of a batch is evaluated even when the limit
//! is reached inside it, so an error in a later row of that batch is an error, and an error in
//! a batch never read is not.
//!
//! A failing case prints the table id, the schema, the visible rows, the ranges and the DAG in SQL-like form;
//! the sizes (rows, columns, expression depth) shrink.
//!
//! The generator (tables, histories, DAGs, their executors and key ranges) lives in
//! `common/dag_gen.rs`, shared with the end-to-end differential test in `e2e/`.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

mod common;
#[path = "common/dag_gen.rs"]
mod dag_gen;

use std::cmp::Ordering;
use std::fmt::Write as _;

use common::*;
use cop::handler::{HandlerOptions, handle};
use dag_gen::*;
use proptest::prelude::*;
use wire::codec::table::record_key;
use wire::coprocessor::{Expr, ExprType, ScalarFuncSig, eval_error_code};
use wire::datum::{Datum, EvalType};

/// Tables per engine: opening, compacting and closing an engine costs far more than a query,
/// so each case shares one engine among several tables (whose keys interleave in its files).
const TABLES_PER_CASE: i64 = 5;
/// DAGs run against each generated table.
const DAGS_PER_TABLE: usize = 10;

// ---------------------------------------------------------------------------------------------
// Writing the table and building the request.

/// Writes the tables' histories in three phases, each table's operations in commit order: the
/// first 40% of every history ends up in the levels, the next 30% in an L0 file, the rest in
/// the memtable.
fn write_tables(e: &TestEngine, tables: &[TableCase]) {
    let phases = [(0, 4), (4, 7), (7, 10)];
    let index_writes: Vec<Vec<Vec<IndexWrite>>> = tables.iter().map(index_writes).collect();
    for (p, (from, to)) in phases.into_iter().enumerate() {
        for (t, index_writes) in tables.iter().zip(&index_writes) {
            let n = t.history.len();
            let part = n * from / 10..n * to / 10;
            for ((ts, op), writes) in t.history[part.clone()].iter().zip(&index_writes[part]) {
                for (key, w) in writes {
                    match w {
                        Some(value) => e.put(key, *ts, value),
                        None if matches!(op, Op::Rollback(_)) => e.rollback(key, *ts),
                        None => e.delete(key, *ts),
                    }
                }
                let key = record_key(t.id, op_handle(op));
                match op {
                    Op::Put(_, values) => {
                        let row: Vec<(i64, Datum)> = t
                            .cols
                            .iter()
                            .zip(values)
                            .filter(|(c, _)| !c.pk)
                            .filter_map(|(c, v)| v.clone().map(|v| (c.id, v)))
                            .collect();
                        e.put(&key, *ts, &wire::codec::row::encode_row(&row).unwrap());
                    }
                    Op::Delete(_) => e.delete(&key, *ts),
                    Op::Rollback(_) => e.rollback(&key, *ts),
                }
            }
        }
        match p {
            0 => e.compact(),
            1 => e.flush(),
            _ => {}
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The reference: typing.

/// Why the reference rejects a DAG or a row, by the kind the handler must report.
#[derive(Debug, Clone, Copy, PartialEq)]
enum RefErrorKind {
    /// A type error of the DAG (the executor reports it when the DAG is built).
    Type,
    /// A value out of range while evaluating a row.
    Overflow,
}

impl RefErrorKind {
    /// The handler's code for this kind (`wire::coprocessor::eval_error_code`): the typed part
    /// of an evaluation error; its message is free text.
    fn code(self) -> i32 {
        match self {
            RefErrorKind::Type => eval_error_code::TYPE,
            RefErrorKind::Overflow => eval_error_code::OVERFLOW,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
struct RefError {
    kind: RefErrorKind,
    what: String,
}

type RefResult<T> = Result<T, RefError>;

fn type_error<T>(msg: impl Into<String>) -> RefResult<T> {
    Err(RefError {
        kind: RefErrorKind::Type,
        what: msg.into(),
    })
}

fn overflow<T>(msg: impl Into<String>) -> RefResult<T> {
    Err(RefError {
        kind: RefErrorKind::Overflow,
        what: msg.into(),
    })
}

/// `None` = a NULL literal, whose type is its peer's.
type Ty = Option<EvalType>;

fn is_num(t: Ty) -> bool {
    t != Some(EvalType::Bytes)
}

fn type_of(e: &Expr, input: &[EvalType]) -> RefResult<Ty> {
    let tp = ExprType::from_i32(e.tp).expect("generated types are known");
    Ok(match tp {
        ExprType::Null => None,
        ExprType::Int64 => Some(EvalType::Int),
        ExprType::UInt64 => Some(EvalType::UInt),
        ExprType::Float64 => Some(EvalType::Real),
        ExprType::Bytes => Some(EvalType::Bytes),
        ExprType::ColumnRef => Some(input[e.column_offset as usize]),
        ExprType::ScalarFunc => {
            let ts = e
                .children
                .iter()
                .map(|c| type_of(c, input))
                .collect::<RefResult<Vec<Ty>>>()?;
            let all_num = ts.iter().all(|t| is_num(*t));
            let all_bytes = ts
                .iter()
                .all(|t| t.is_none() || *t == Some(EvalType::Bytes));
            use ScalarFuncSig::*;
            match sig(e) {
                Lt | Le | Gt | Ge | Eq | Ne | In => {
                    if !(all_num || all_bytes) {
                        return type_error("comparison of a number with bytes");
                    }
                    Some(EvalType::Int)
                }
                Plus | Minus | Multiply | IntDiv => {
                    if !all_num {
                        return type_error("arithmetic on bytes");
                    }
                    let real = ts.contains(&Some(EvalType::Real));
                    if real && sig(e) != IntDiv {
                        Some(EvalType::Real)
                    } else if real {
                        Some(EvalType::Int)
                    } else if ts.contains(&Some(EvalType::UInt)) {
                        Some(EvalType::UInt)
                    } else {
                        Some(EvalType::Int)
                    }
                }
                Divide => {
                    if !all_num {
                        return type_error("arithmetic on bytes");
                    }
                    Some(EvalType::Real)
                }
                Mod => {
                    if !all_num {
                        return type_error("arithmetic on bytes");
                    }
                    if ts.contains(&Some(EvalType::Real)) {
                        Some(EvalType::Real)
                    } else {
                        // The dividend's type (a NULL dividend takes the divisor's).
                        Some(ts[0].or(ts[1]).unwrap_or(EvalType::Int))
                    }
                }
                UnaryMinus => match ts[0] {
                    Some(EvalType::Real) => Some(EvalType::Real),
                    Some(EvalType::Bytes) => return type_error("negation of bytes"),
                    _ => Some(EvalType::Int),
                },
                And | Or | Not => {
                    if !all_num {
                        return type_error("logic on bytes");
                    }
                    Some(EvalType::Int)
                }
                IsNull => Some(EvalType::Int),
                Like => {
                    if !all_bytes {
                        return type_error("like on a number");
                    }
                    Some(EvalType::Int)
                }
            }
        }
        _ => return type_error("aggregate inside an expression"),
    })
}

fn check_bool(e: &Expr, input: &[EvalType]) -> RefResult<()> {
    match type_of(e, input)? {
        Some(EvalType::Bytes) => type_error("a condition of bytes"),
        _ => Ok(()),
    }
}

/// Types the whole DAG, as the executors do when they are built.
fn check_dag(case: &DagCase, input: &[EvalType]) -> RefResult<()> {
    for c in &case.selection {
        check_bool(c, input)?;
    }
    let check_aggs = |aggs: &[Expr]| -> RefResult<()> {
        for a in aggs {
            let t = type_of(&a.children[0], input)?;
            let tp = ExprType::from_i32(a.tp).unwrap();
            if matches!(tp, ExprType::Sum | ExprType::Avg) && t == Some(EvalType::Bytes) {
                return type_error("sum of bytes");
            }
        }
        Ok(())
    };
    match &case.tail {
        Tail::None | Tail::Limit(_) => {}
        Tail::SimpleAgg(a) => check_aggs(a)?,
        Tail::HashAgg(g, a) => {
            check_aggs(a)?;
            for e in g {
                type_of(e, input)?;
            }
        }
        Tail::TopN(o, _) => {
            for (e, _) in o {
                type_of(e, input)?;
            }
        }
        Tail::Projection(p) => {
            for e in p {
                type_of(e, input)?;
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The reference: evaluation, one row at a time, every child always evaluated.

fn truth(d: &Datum) -> Option<bool> {
    match d {
        Datum::Null => None,
        Datum::Int(v) => Some(*v != 0),
        Datum::UInt(v) => Some(*v != 0),
        Datum::Real(v) => Some(*v != 0.0),
        Datum::Bytes(_) => None,
    }
}

fn bool_datum(b: Option<bool>) -> Datum {
    b.map_or(Datum::Null, |b| Datum::Int(i64::from(b)))
}

fn as_f64(d: &Datum) -> f64 {
    match d {
        Datum::Int(v) => *v as f64,
        Datum::UInt(v) => *v as f64,
        Datum::Real(v) => *v,
        _ => unreachable!("typed as a number"),
    }
}

fn as_i128(d: &Datum) -> i128 {
    match d {
        Datum::Int(v) => i128::from(*v),
        Datum::UInt(v) => i128::from(*v),
        _ => unreachable!("typed as an integer"),
    }
}

/// SQL comparison of two non-NULL values of comparable types.
fn compare(a: &Datum, b: &Datum) -> Ordering {
    match (a, b) {
        (Datum::Bytes(x), Datum::Bytes(y)) => x.cmp(y),
        (Datum::Real(_), _) | (_, Datum::Real(_)) => as_f64(a)
            .partial_cmp(&as_f64(b))
            .expect("no NaN is generated"),
        _ => as_i128(a).cmp(&as_i128(b)),
    }
}

fn int_result(v: Option<i128>, t: EvalType) -> RefResult<Datum> {
    let Some(v) = v else {
        return overflow("overflow");
    };
    match t {
        EvalType::UInt => u64::try_from(v)
            .map(Datum::UInt)
            .or_else(|_| overflow("overflow")),
        _ => i64::try_from(v)
            .map(Datum::Int)
            .or_else(|_| overflow("overflow")),
    }
}

fn real_result(v: f64) -> RefResult<Datum> {
    if v.is_finite() {
        Ok(Datum::Real(v))
    } else {
        overflow("real overflow")
    }
}

fn like(v: &[u8], p: &[u8]) -> bool {
    match p.split_first() {
        None => v.is_empty(),
        Some((b'%', rest)) => (0..=v.len()).any(|i| like(&v[i..], rest)),
        Some((b'_', rest)) => !v.is_empty() && like(&v[1..], rest),
        Some((b'\\', rest)) if !rest.is_empty() => {
            v.first() == Some(&rest[0]) && like(&v[1..], &rest[1..])
        }
        Some((c, rest)) => v.first() == Some(c) && like(&v[1..], rest),
    }
}

fn eval(e: &Expr, row: &[Datum], input: &[EvalType]) -> RefResult<Datum> {
    let tp = ExprType::from_i32(e.tp).unwrap();
    let word = |e: &Expr| <[u8; 8]>::try_from(e.val.as_slice()).unwrap();
    Ok(match tp {
        ExprType::Null => Datum::Null,
        ExprType::Int64 => Datum::Int(i64::from_le_bytes(word(e))),
        ExprType::UInt64 => Datum::UInt(u64::from_le_bytes(word(e))),
        ExprType::Float64 => Datum::Real(f64::from_bits(u64::from_le_bytes(word(e)))),
        ExprType::Bytes => Datum::Bytes(e.val.clone()),
        ExprType::ColumnRef => row[e.column_offset as usize].clone(),
        ExprType::ScalarFunc => {
            let args = e
                .children
                .iter()
                .map(|c| eval(c, row, input))
                .collect::<RefResult<Vec<Datum>>>()?;
            let t = type_of(e, input)?.unwrap();
            use ScalarFuncSig::*;
            match sig(e) {
                IsNull => Datum::Int(i64::from(args[0].is_null())),
                And => bool_datum(match (truth(&args[0]), truth(&args[1])) {
                    (Some(false), _) | (_, Some(false)) => Some(false),
                    (Some(true), Some(true)) => Some(true),
                    _ => None,
                }),
                Or => bool_datum(match (truth(&args[0]), truth(&args[1])) {
                    (Some(true), _) | (_, Some(true)) => Some(true),
                    (Some(false), Some(false)) => Some(false),
                    _ => None,
                }),
                Not => bool_datum(truth(&args[0]).map(|b| !b)),
                In => {
                    if args[0].is_null() {
                        Datum::Null
                    } else if args[1..]
                        .iter()
                        .any(|x| !x.is_null() && compare(&args[0], x).is_eq())
                    {
                        Datum::Int(1)
                    } else if args[1..].iter().any(Datum::is_null) {
                        Datum::Null
                    } else {
                        Datum::Int(0)
                    }
                }
                _ if args.iter().any(Datum::is_null) => Datum::Null,
                Lt | Le | Gt | Ge | Eq | Ne => {
                    let o = compare(&args[0], &args[1]);
                    let b = match sig(e) {
                        Lt => o.is_lt(),
                        Le => o.is_le(),
                        Gt => o.is_gt(),
                        Ge => o.is_ge(),
                        Eq => o.is_eq(),
                        _ => o.is_ne(),
                    };
                    Datum::Int(i64::from(b))
                }
                Like => match (&args[0], &args[1]) {
                    (Datum::Bytes(v), Datum::Bytes(p)) => Datum::Int(i64::from(like(v, p))),
                    _ => unreachable!("typed as bytes"),
                },
                UnaryMinus => match &args[0] {
                    Datum::Real(v) => Datum::Real(-v),
                    d => int_result(Some(-as_i128(d)), EvalType::Int)?,
                },
                Plus | Minus | Multiply if t == EvalType::Real => {
                    let (a, b) = (as_f64(&args[0]), as_f64(&args[1]));
                    real_result(match sig(e) {
                        Plus => a + b,
                        Minus => a - b,
                        _ => a * b,
                    })?
                }
                Plus | Minus | Multiply => {
                    let (a, b) = (as_i128(&args[0]), as_i128(&args[1]));
                    let v = match sig(e) {
                        Plus => a.checked_add(b),
                        Minus => a.checked_sub(b),
                        _ => a.checked_mul(b),
                    };
                    int_result(v, t)?
                }
                Divide => {
                    let (a, b) = (as_f64(&args[0]), as_f64(&args[1]));
                    if b == 0.0 {
                        Datum::Null
                    } else {
                        // Finite operands can still give an infinite quotient (1e300 /
                        // 1e-300): MySQL raises ERROR 1690, as for `+ - *`.
                        real_result(a / b)?
                    }
                }
                IntDiv => {
                    let real =
                        matches!(args[0], Datum::Real(_)) || matches!(args[1], Datum::Real(_));
                    if real {
                        let (a, b) = (as_f64(&args[0]), as_f64(&args[1]));
                        if b == 0.0 {
                            Datum::Null
                        } else {
                            let q = (a / b).trunc();
                            if (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&q) {
                                Datum::Int(q as i64)
                            } else {
                                return overflow("overflow");
                            }
                        }
                    } else {
                        let (a, b) = (as_i128(&args[0]), as_i128(&args[1]));
                        if b == 0 {
                            Datum::Null
                        } else {
                            int_result(Some(a / b), t)?
                        }
                    }
                }
                Mod => {
                    if t == EvalType::Real {
                        let (a, b) = (as_f64(&args[0]), as_f64(&args[1]));
                        if b == 0.0 {
                            Datum::Null
                        } else {
                            Datum::Real(a % b)
                        }
                    } else {
                        let (a, b) = (as_i128(&args[0]), as_i128(&args[1]));
                        if b == 0 {
                            Datum::Null
                        } else {
                            int_result(Some(a % b), t)?
                        }
                    }
                }
            }
        }
        _ => unreachable!("typed"),
    })
}

/// The quotient of two finite reals can lie beyond the DOUBLE range: `1e300 / -5e-300`, from
/// the counter-example `(1 - c0) / (5 / c0)` at `c0 = -1e300`. MySQL raises ERROR 1690 there
/// ("DOUBLE value is out of range"), TiDB's and TiKV's real division return their overflow
/// error, and so does the coprocessor (`expr_arith::real_result_beyond_double_range_overflows`);
/// the reference used to return `-inf` and let the row through.
#[test]
fn reference_divide_beyond_double_range_is_an_overflow() {
    use ScalarFuncSig::{Divide, Minus};
    let input = [EvalType::Real];
    let row = [Datum::Real(-1e300)];
    let quotient = Expr::func(
        Divide,
        vec![
            Expr::func(Minus, vec![Expr::int(1), Expr::column(0)]),
            Expr::func(Divide, vec![Expr::uint(5), Expr::column(0)]),
        ],
    );
    let err = eval(&quotient, &row, &input).unwrap_err();
    assert_eq!(err.kind, RefErrorKind::Overflow, "{err:?}");
    assert_eq!(err.kind.code(), eval_error_code::OVERFLOW);
    // A quotient that stays in range is still a value, and a zero divisor still NULL.
    let small = Expr::func(Divide, vec![Expr::real(1e300), Expr::real(4.0)]);
    assert_eq!(eval(&small, &row, &input), Ok(Datum::Real(2.5e299)));
    let by_zero = Expr::func(Divide, vec![Expr::real(1e300), Expr::real(0.0)]);
    assert_eq!(eval(&by_zero, &row, &input), Ok(Datum::Null));
}

// ---------------------------------------------------------------------------------------------
// The reference: executors.

/// A value as it reads back from storage or from a response: the float encoding of rows and
/// datums folds `-0.0` into `0.0` (they are equal in SQL).
fn stored(d: Datum) -> Datum {
    match d {
        // `-0.0 + 0.0` is `0.0`; every other value is unchanged.
        Datum::Real(v) => Datum::Real(v + 0.0),
        d => d,
    }
}

/// Memcomparable order of the values of one index column: NULL first, then by value (all the
/// column's non-NULL values have the same type; `-0.0` was folded into `0.0`).
fn index_order(a: &Datum, b: &Datum) -> Ordering {
    match (a, b) {
        (Datum::Null, Datum::Null) => Ordering::Equal,
        (Datum::Null, _) => Ordering::Less,
        (_, Datum::Null) => Ordering::Greater,
        (Datum::Int(x), Datum::Int(y)) => x.cmp(y),
        (Datum::UInt(x), Datum::UInt(y)) => x.cmp(y),
        (Datum::Real(x), Datum::Real(y)) => x.partial_cmp(y).expect("no NaN"),
        (Datum::Bytes(x), Datum::Bytes(y)) => x.cmp(y),
        _ => unreachable!("one type per column: {a:?} {b:?}"),
    }
}

/// Rows visible at `ts`, as the scan's output columns, in scan order.
fn visible_rows(t: &TableCase, case: &DagCase) -> Vec<Vec<Datum>> {
    let (cols, history) = (&t.cols, &t.history);
    let mut latest: std::collections::BTreeMap<i64, Option<&Vec<Option<Datum>>>> =
        Default::default();
    for (ts, op) in history {
        if *ts > case.start_ts {
            continue;
        }
        match op {
            Op::Put(h, v) => {
                latest.insert(*h, Some(v));
            }
            Op::Delete(h) => {
                latest.insert(*h, None);
            }
            Op::Rollback(_) => {}
        }
    }
    let value = |values: &[Option<Datum>], i: usize| {
        stored(values[i].clone().unwrap_or_else(|| cols[i].default.clone()))
    };
    if let Some(s) = &case.index {
        // Every visible row's entry, ordered by (index values, handle).
        let index = &t.indexes[s.index];
        let mut keyed: Vec<(Vec<Datum>, i64)> = latest
            .into_iter()
            .filter_map(|(h, v)| v.map(|v| (index.cols.iter().map(|&i| value(v, i)).collect(), h)))
            .collect();
        keyed.sort_by(|(a, ha), (b, hb)| {
            a.iter()
                .zip(b)
                .map(|(x, y)| index_order(x, y))
                .find(|o| o.is_ne())
                .unwrap_or(Ordering::Equal)
                .then(ha.cmp(hb))
        });
        if case.desc {
            keyed.reverse();
        }
        return keyed
            .into_iter()
            .map(|(mut r, h)| {
                if s.handle {
                    r.push(Datum::Int(h));
                }
                r
            })
            .collect();
    }
    let in_ranges = |h: i64| {
        case.ranges.iter().any(|&(lo, hi)| {
            if (lo, hi) == (i64::MIN, i64::MAX) {
                true
            } else {
                lo <= h && h < hi
            }
        })
    };
    let mut out: Vec<Vec<Datum>> = latest
        .into_iter()
        .filter(|(h, _)| in_ranges(*h))
        .filter_map(|(_, v)| v)
        .map(|values| case.scan_cols.iter().map(|&i| value(values, i)).collect())
        .collect();
    if case.desc {
        out.reverse();
    }
    out
}

/// Keeps the rows for which every condition is true; each condition sees only the rows the
/// previous ones kept.
fn select(rows: Vec<Vec<Datum>>, conds: &[Expr], input: &[EvalType]) -> RefResult<Vec<Vec<Datum>>> {
    let mut rows = rows;
    for c in conds {
        let mut kept = Vec::new();
        for r in rows {
            if truth(&eval(c, &r, input)?) == Some(true) {
                kept.push(r);
            }
        }
        rows = kept;
    }
    Ok(rows)
}

fn aggregate(
    rows: &[Vec<Datum>],
    group_by: &[Expr],
    aggs: &[Expr],
    input: &[EvalType],
) -> RefResult<Vec<Vec<Datum>>> {
    // Every expression over every row first: an error anywhere is an error.
    let keys = rows
        .iter()
        .map(|r| group_by.iter().map(|g| eval(g, r, input)).collect())
        .collect::<RefResult<Vec<Vec<Datum>>>>()?;
    let args = rows
        .iter()
        .map(|r| {
            aggs.iter()
                .map(|a| eval(&a.children[0], r, input))
                .collect()
        })
        .collect::<RefResult<Vec<Vec<Datum>>>>()?;
    // Groups in order of first appearance; `==` on reals folds -0.0 into 0.0.
    let mut groups: Vec<(Vec<Datum>, Vec<usize>)> = Vec::new();
    for (i, k) in keys.into_iter().enumerate() {
        match groups.iter_mut().find(|(g, _)| *g == k) {
            Some((_, members)) => members.push(i),
            None => groups.push((k, vec![i])),
        }
    }
    let mut out = Vec::new();
    for (key, members) in groups {
        let mut row = Vec::new();
        for (j, a) in aggs.iter().enumerate() {
            let values: Vec<&Datum> = members
                .iter()
                .map(|&i| &args[i][j])
                .filter(|d| !d.is_null())
                .collect();
            let t = type_of(&a.children[0], input)?;
            let count = Datum::Int(values.len() as i64);
            let sum = || -> RefResult<Datum> {
                if values.is_empty() {
                    return Ok(Datum::Null);
                }
                match t {
                    Some(EvalType::Real) => {
                        Ok(Datum::Real(values.iter().fold(0.0, |s, d| s + as_f64(d))))
                    }
                    Some(t) => int_result(Some(values.iter().map(|d| as_i128(d)).sum()), t),
                    None => Ok(Datum::Null),
                }
            };
            let extreme = |max: bool| -> Datum {
                let mut best: Option<&Datum> = None;
                for v in &values {
                    let better = best.is_none_or(|b| {
                        let o = v.sql_cmp(b);
                        if max { o.is_gt() } else { o.is_lt() }
                    });
                    if better {
                        best = Some(v);
                    }
                }
                best.cloned().unwrap_or(Datum::Null)
            };
            match ExprType::from_i32(a.tp).unwrap() {
                ExprType::Count => row.push(count),
                ExprType::Sum => row.push(sum()?),
                ExprType::Avg => {
                    row.push(count);
                    row.push(sum()?);
                }
                ExprType::Min => row.push(extreme(false)),
                ExprType::Max => row.push(extreme(true)),
                _ => unreachable!("generated aggregates"),
            }
        }
        row.extend(key);
        out.push(row);
    }
    Ok(out)
}

/// The batch sizes the handler asks for: 32, 64, ... 1024.
fn batches(rows: Vec<Vec<Datum>>) -> Vec<Vec<Vec<Datum>>> {
    let mut out = Vec::new();
    let mut size = 32;
    let mut rest = rows.into_iter().peekable();
    while rest.peek().is_some() {
        out.push(rest.by_ref().take(size).collect());
        size = (size * 2).min(1024);
    }
    out
}

/// What the DAG returns: rows, and whether they are partial aggregates (compared as multisets).
fn reference(t: &TableCase, case: &DagCase) -> RefResult<(Vec<Vec<Datum>>, bool)> {
    let input = scan_types(&t.cols, &t.indexes, &case.scan_cols, case.index.as_ref());
    check_dag(case, &input)?;
    let rows = visible_rows(t, case);
    if let Tail::Limit(n) = case.tail {
        let n = n as usize;
        let mut out = Vec::new();
        if n == 0 {
            return Ok((out, false));
        }
        for batch in batches(rows) {
            out.extend(select(batch, &case.selection, &input)?);
            if out.len() >= n {
                out.truncate(n);
                break;
            }
        }
        return Ok((out, false));
    }
    if let Tail::TopN(_, 0) = case.tail {
        return Ok((Vec::new(), false));
    }
    let rows = select(rows, &case.selection, &input)?;
    Ok(match &case.tail {
        Tail::None => (rows, false),
        Tail::Limit(_) => unreachable!("handled above"),
        Tail::SimpleAgg(a) => {
            if rows.is_empty() {
                (Vec::new(), true)
            } else {
                (aggregate(&rows, &[], a, &input)?, true)
            }
        }
        Tail::HashAgg(g, a) => (aggregate(&rows, g, a, &input)?, true),
        Tail::TopN(order, n) => {
            let mut keyed = rows
                .into_iter()
                .map(|r| {
                    let k = order
                        .iter()
                        .map(|(e, _)| eval(e, &r, &input))
                        .collect::<RefResult<Vec<Datum>>>()?;
                    Ok((k, r))
                })
                .collect::<RefResult<Vec<_>>>()?;
            keyed.sort_by(|(a, _), (b, _)| {
                a.iter()
                    .zip(b)
                    .zip(order)
                    .map(|((x, y), (_, desc))| {
                        let o = x.sql_cmp(y);
                        if *desc { o.reverse() } else { o }
                    })
                    .find(|o| o.is_ne())
                    .unwrap_or(Ordering::Equal)
            });
            keyed.truncate(*n as usize);
            (keyed.into_iter().map(|(_, r)| r).collect(), false)
        }
        Tail::Projection(p) => (
            rows.iter()
                .map(|r| p.iter().map(|e| eval(e, r, &input)).collect())
                .collect::<RefResult<Vec<Vec<Datum>>>>()?,
            false,
        ),
    })
}

// ---------------------------------------------------------------------------------------------
// Readable counter-examples.

fn show_case(t: &TableCase, case: &DagCase) -> String {
    let cols = &t.cols;
    let mut s = String::new();
    let scan_cols: Vec<usize> = match &case.index {
        None => case.scan_cols.clone(),
        Some(i) => t.indexes[i.index].cols.clone(),
    };
    let mut scan: Vec<String> = scan_cols
        .iter()
        .enumerate()
        .map(|(i, &c)| {
            let c = &cols[c];
            format!(
                "c{i}=id{}:{:?}{}{}",
                c.id,
                c.ft,
                if c.pk { " pk" } else { "" },
                if c.default.is_null() {
                    String::new()
                } else {
                    format!(" default {:?}", c.default)
                }
            )
        })
        .collect();
    let kind = match &case.index {
        None => "table scan".to_string(),
        Some(i) => {
            let index = &t.indexes[i.index];
            if i.handle {
                scan.push(format!("c{}=handle", scan.len()));
            }
            format!(
                "index scan (index {}{})",
                index.id,
                if index.unique { " unique" } else { "" }
            )
        }
    };
    let _ = writeln!(
        s,
        "{kind} [{}] desc={} start_ts={}",
        scan.join(", "),
        case.desc,
        case.start_ts
    );
    if case.index.is_none() {
        let _ = writeln!(s, "ranges (handles) {:?}", case.ranges);
    }
    for (i, r) in visible_rows(t, case).iter().enumerate() {
        let _ = writeln!(s, "  row {i}: {r:?}");
    }
    let conds: Vec<String> = case.selection.iter().map(show_expr).collect();
    if !conds.is_empty() {
        let _ = writeln!(s, "WHERE {}", conds.join(" AND "));
    }
    let list = |v: &[Expr]| v.iter().map(show_expr).collect::<Vec<_>>().join(", ");
    let _ = writeln!(
        s,
        "{}",
        match &case.tail {
            Tail::None => "(no tail)".to_string(),
            Tail::SimpleAgg(a) => format!("SELECT {}", list(a)),
            Tail::HashAgg(g, a) => format!("SELECT {} GROUP BY {}", list(a), list(g)),
            Tail::TopN(o, n) => format!(
                "ORDER BY {} LIMIT {n}",
                o.iter()
                    .map(|(e, d)| format!("{}{}", show_expr(e), if *d { " DESC" } else { "" }))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Tail::Limit(n) => format!("LIMIT {n}"),
            Tail::Projection(p) => format!("SELECT {}", list(p)),
        }
    );
    s
}

// ---------------------------------------------------------------------------------------------
// The property.

/// What the DAGs of a run exercised. A differential whose cases mostly err, or return nothing,
/// compares nothing: the test asserts these at the end.
#[derive(Debug, Default, Clone, Copy)]
struct Outcomes {
    dags: usize,
    /// Both sides returned rows (possibly none), and they were equal.
    with_rows: usize,
    /// ... and at least one row.
    non_empty: usize,
    /// Both sides erred, with the same kind.
    matching_errors: usize,
    /// Rows compared, over all DAGs.
    rows: usize,
}

impl Outcomes {
    fn add(&mut self, o: Outcomes) {
        self.dags += o.dags;
        self.with_rows += o.with_rows;
        self.non_empty += o.non_empty;
        self.matching_errors += o.matching_errors;
        self.rows += o.rows;
    }
}

fn check_tables(
    seed: u64,
    columns: usize,
    ops: usize,
    max_depth: u32,
    outcomes: &mut Outcomes,
) -> Result<(), TestCaseError> {
    let mut g = Gen::new(seed, max_depth);
    let handles = handles_for(ops);
    let tables = g.tables(TABLES_PER_CASE, columns, ops);
    let e = TestEngine::new();
    write_tables(&e, &tables);
    let snap = e.snap();
    for t in &tables {
        let max_ts = t.history.last().map_or(1, |(ts, _)| *ts);
        for _ in 0..DAGS_PER_TABLE {
            let case = g.dag(&t.cols, &t.indexes, max_ts, handles);
            let d = dag(executors(t, &case));
            let ranges = request_ranges(t, &case);
            let req = request(&d, ranges, case.start_ts);
            let resp = handle(&req, &snap, &HandlerOptions::worker());
            let got = rows(&resp);
            let want = reference(t, &case);
            let shown = || format!("table {}: {}", t.id, show_case(t, &case));
            outcomes.dags += 1;
            match (got, want) {
                (Ok(got), Ok((want, partial))) => {
                    let want: Vec<Vec<Datum>> = want
                        .into_iter()
                        .map(|r| r.into_iter().map(stored).collect())
                        .collect();
                    outcomes.with_rows += 1;
                    outcomes.non_empty += usize::from(!want.is_empty());
                    outcomes.rows += want.len();
                    if partial {
                        prop_assert_eq!(sorted(got), sorted(want), "\n{}", shown());
                    } else {
                        prop_assert_eq!(got, want, "\n{}", shown());
                    }
                }
                (Err(got), Err(want)) => {
                    prop_assert_eq!(
                        got.code,
                        want.kind.code(),
                        "both sides failed, with different kinds: cop={:?} reference={:?}\n{}",
                        got,
                        want,
                        shown()
                    );
                    outcomes.matching_errors += 1;
                }
                (got, want) => {
                    prop_assert!(
                        false,
                        "one side failed: cop={:?} reference={:?}\n{}",
                        got,
                        want,
                        shown()
                    );
                }
            }
        }
    }
    Ok(())
}

/// 60 cases x 5 tables x 10 DAGs = 3000 DAGs. Each case: one engine holding five random
/// tables, ten random DAGs on each. A `TestRunner` rather than `proptest!`, so that the
/// outcomes of the whole run can be asserted once it passed.
#[test]
fn dag_results_equal_the_reference_evaluator() {
    use proptest::test_runner::{Config, TestRunner};
    let config = Config {
        cases: 60,
        source_file: Some(file!()),
        ..Config::default()
    };
    let total = std::cell::RefCell::new(Outcomes::default());
    let strategy = (any::<u64>(), 2usize..=6, 1usize..80, 0u32..=3);
    let result = TestRunner::new(config).run(&strategy, |(seed, columns, ops, max_depth)| {
        let mut outcomes = Outcomes::default();
        check_tables(seed, columns, ops, max_depth, &mut outcomes)?;
        total.borrow_mut().add(outcomes);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let o = total.into_inner();
    println!("{o:?}");
    // At least: persisted regressions run first and count too.
    assert!(
        o.dags >= 60 * TABLES_PER_CASE as usize * DAGS_PER_TABLE,
        "{o:?}"
    );
    assert_eq!(o.with_rows + o.matching_errors, o.dags, "{o:?}");
    assert!(
        o.with_rows * 100 >= o.dags * MIN_WITH_ROWS_PERCENT,
        "too few DAGs answered with rows: {o:?}"
    );
    assert!(
        o.non_empty * 100 >= o.dags * MIN_NON_EMPTY_PERCENT,
        "too few DAGs returned a row: {o:?}"
    );
    assert!(
        o.matching_errors * 100 >= o.dags * MIN_ERROR_PERCENT,
        "too few error paths compared: {o:?}"
    );
    assert!(o.rows >= MIN_ROWS, "too few rows compared: {o:?}");
}

// Floors for a run of 3000 DAGs, far below what was measured over seven runs (with rows
// 88-91%, at least one row 48-52%, both sides erring 9-12%, 6900-8600 rows compared), so that
// only a broken generator or executor trips them, never an unlucky seed.
const MIN_WITH_ROWS_PERCENT: usize = 75;
const MIN_NON_EMPTY_PERCENT: usize = 35;
const MIN_ERROR_PERCENT: usize = 3;
const MIN_ROWS: usize = 3000;
