//! Arithmetic: `Plus Minus Multiply Divide IntDiv Mod` and `UnaryMinus`.
//!
//! Integer arithmetic runs in i128, where no operation on two 64-bit values overflows except
//! `u64 * u64` (checked), and the result is then fitted into the result type: one rule covers
//! Int, UInt and mixed operands, with no case analysis of signs.

use super::ArithOp;
use super::operand::{Ctx, IntNum, Num, NumVals, Operand, Vals};
use crate::batch::Column;
use crate::error::EvalError;
use wire::datum::EvalType;

impl ArithOp {
    fn symbol(self) -> &'static str {
        match self {
            ArithOp::Plus => "+",
            ArithOp::Minus => "-",
            ArithOp::Multiply => "*",
            ArithOp::Divide => "/",
            ArithOp::IntDiv => "DIV",
            ArithOp::Mod => "%",
        }
    }

    /// The result type for operands of types `a` and `b` (both numeric), or `None` when the
    /// operation does not take them. See the module doc of [`crate::expr`].
    pub(super) fn result_type(self, a: EvalType, b: EvalType) -> Option<EvalType> {
        use EvalType::*;
        if a == Bytes || b == Bytes {
            return None;
        }
        let real = a == Real || b == Real;
        let unsigned = a == UInt || b == UInt;
        Some(match self {
            ArithOp::Divide => Real,
            ArithOp::Plus | ArithOp::Minus | ArithOp::Multiply if real => Real,
            ArithOp::IntDiv if real => Int,
            ArithOp::Mod if real => Real,
            ArithOp::Mod => a,
            _ if unsigned => UInt,
            _ => Int,
        })
    }
}

/// An integer result type: where an i128 result must fit.
trait IntResult: Sized {
    const RANGE: &'static str;
    fn from_i128(v: i128) -> Option<Self>;
}

impl IntResult for i64 {
    const RANGE: &'static str = "BIGINT range [-9223372036854775808, 9223372036854775807]";
    #[inline(always)]
    fn from_i128(v: i128) -> Option<i64> {
        i64::try_from(v).ok()
    }
}

impl IntResult for u64 {
    const RANGE: &'static str = "BIGINT UNSIGNED range [0, 18446744073709551615]";
    #[inline(always)]
    fn from_i128(v: i128) -> Option<u64> {
        u64::try_from(v).ok()
    }
}

#[cold]
fn overflow(
    x: impl std::fmt::Display,
    op: &str,
    y: impl std::fmt::Display,
    range: &str,
) -> EvalError {
    EvalError::overflow(format!("{x} {op} {y} (expected a result in {range})"))
}

fn int_loop<A: IntNum, B: IntNum, R: IntResult>(
    n: usize,
    a: Vals<'_, A>,
    b: Vals<'_, B>,
    op: ArithOp,
) -> Result<Vec<Option<R>>, EvalError> {
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let (Some(&x), Some(&y)) = (a.get(i), b.get(i)) else {
            out.push(None);
            continue;
        };
        let (xi, yi) = (x.to_i128(), y.to_i128());
        let r = match op {
            ArithOp::Plus => xi.checked_add(yi),
            ArithOp::Minus => xi.checked_sub(yi),
            ArithOp::Multiply => xi.checked_mul(yi),
            ArithOp::IntDiv | ArithOp::Mod if yi == 0 => {
                out.push(None);
                continue;
            }
            // |xi / yi| <= 2^64: no i128 overflow.
            ArithOp::IntDiv => Some(xi / yi),
            ArithOp::Mod => Some(xi % yi),
            ArithOp::Divide => {
                return Err(EvalError::type_error(
                    "Divide: expected a Real result, found an integer one",
                ));
            }
        };
        match r.and_then(R::from_i128) {
            Some(v) => out.push(Some(v)),
            None => return Err(overflow(x, op.symbol(), y, R::RANGE)),
        }
    }
    Ok(out)
}

fn real_loop<A: Num, B: Num>(
    n: usize,
    a: Vals<'_, A>,
    b: Vals<'_, B>,
    op: ArithOp,
) -> Result<Vec<Option<f64>>, EvalError> {
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let (Some(&x), Some(&y)) = (a.get(i), b.get(i)) else {
            out.push(None);
            continue;
        };
        let (xf, yf) = (x.to_f64(), y.to_f64());
        let r = match op {
            ArithOp::Plus => xf + yf,
            ArithOp::Minus => xf - yf,
            ArithOp::Multiply => xf * yf,
            ArithOp::Divide | ArithOp::Mod if yf == 0.0 => {
                out.push(None);
                continue;
            }
            ArithOp::Divide => xf / yf,
            ArithOp::Mod => xf % yf,
            ArithOp::IntDiv => {
                return Err(EvalError::type_error(
                    "DIV: expected an Int result, found a Real one",
                ));
            }
        };
        if !r.is_finite() {
            return Err(overflow(x, op.symbol(), y, "DOUBLE range (finite)"));
        }
        out.push(Some(r));
    }
    Ok(out)
}

/// `DIV` with a Real operand: the quotient truncated toward zero, as an Int.
fn real_int_div<A: Num, B: Num>(
    n: usize,
    a: Vals<'_, A>,
    b: Vals<'_, B>,
) -> Result<Vec<Option<i64>>, EvalError> {
    // 2^63 exactly; every f64 in [-2^63, 2^63) converts to i64 without loss of range.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let (Some(&x), Some(&y)) = (a.get(i), b.get(i)) else {
            out.push(None);
            continue;
        };
        let (xf, yf) = (x.to_f64(), y.to_f64());
        if yf == 0.0 {
            out.push(None);
            continue;
        }
        let q = (xf / yf).trunc();
        // Written so that NaN fails the test too.
        if !(-LIMIT..LIMIT).contains(&q) {
            return Err(overflow(x, "DIV", y, i64::RANGE));
        }
        out.push(Some(q as i64));
    }
    Ok(out)
}

/// `a op b` for each logical row, `tp` being the result type chosen at build time.
pub(super) fn binary(
    op: ArithOp,
    tp: EvalType,
    a: &Operand<'_>,
    b: &Operand<'_>,
    ctx: &Ctx<'_>,
) -> Result<Column, EvalError> {
    let n = ctx.n();
    let name = op.symbol();
    let (x, y) = (a.num(ctx, name)?, b.num(ctx, name)?);
    use NumVals::{Int, Real, UInt};
    Ok(match (tp, x, y) {
        (EvalType::Real, x, y) => Column::Real(super::operand::with_num2!(x, y, |x, y| {
            real_loop(n, x, y, op)
        })?),
        (EvalType::Int, Real(x), y) => {
            Column::Int(super::operand::with_num!(y, |y| { real_int_div(n, x, y) })?)
        }
        (EvalType::Int, x, Real(y)) => {
            Column::Int(super::operand::with_num!(x, |x| { real_int_div(n, x, y) })?)
        }
        (EvalType::Int, Int(x), Int(y)) => Column::Int(int_loop(n, x, y, op)?),
        (EvalType::Int, Int(x), UInt(y)) => Column::Int(int_loop(n, x, y, op)?),
        (EvalType::Int, UInt(x), Int(y)) => Column::Int(int_loop(n, x, y, op)?),
        (EvalType::Int, UInt(x), UInt(y)) => Column::Int(int_loop(n, x, y, op)?),
        (EvalType::UInt, Int(x), Int(y)) => Column::UInt(int_loop(n, x, y, op)?),
        (EvalType::UInt, Int(x), UInt(y)) => Column::UInt(int_loop(n, x, y, op)?),
        (EvalType::UInt, UInt(x), Int(y)) => Column::UInt(int_loop(n, x, y, op)?),
        (EvalType::UInt, UInt(x), UInt(y)) => Column::UInt(int_loop(n, x, y, op)?),
        (tp, _, _) => {
            return Err(EvalError::type_error(format!(
                "{name}: expected a result type the operands allow, found {tp:?}"
            )));
        }
    })
}

/// `-a` for each logical row: Int → Int, UInt → Int, Real → Real.
pub(super) fn unary_minus(a: &Operand<'_>, ctx: &Ctx<'_>) -> Result<Column, EvalError> {
    let n = ctx.n();
    Ok(match a.num(ctx, "unary minus")? {
        NumVals::Int(v) => {
            let mut out = Vec::with_capacity(n);
            for i in 0..n {
                out.push(match v.get(i) {
                    None => None,
                    Some(&x) => Some(x.checked_neg().ok_or_else(|| {
                        EvalError::overflow(format!("-({x}) (expected a result in {})", i64::RANGE))
                    })?),
                });
            }
            Column::Int(out)
        }
        NumVals::UInt(v) => {
            let mut out = Vec::with_capacity(n);
            for i in 0..n {
                out.push(match v.get(i) {
                    None => None,
                    Some(&x) => Some(i64::from_i128(-i128::from(x)).ok_or_else(|| {
                        EvalError::overflow(format!("-({x}) (expected a result in {})", i64::RANGE))
                    })?),
                });
            }
            Column::Int(out)
        }
        NumVals::Real(v) => Column::Real((0..n).map(|i| v.get(i).map(|x| -x)).collect()),
    })
}
