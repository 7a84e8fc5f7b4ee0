//! Comparisons (`Lt Le Gt Ge Eq Ne`) and `In`.

use std::cmp::Ordering;

use super::CmpOp;
use super::operand::{Ctx, Operand, Vals, with_num2};
use crate::batch::Column;
use crate::error::EvalError;
use wire::datum::EvalType;

impl CmpOp {
    /// The orderings for which the comparison holds, as bits: Less = 1, Equal = 2,
    /// Greater = 4. Testing a bit is branch-free in the per-row loop.
    fn mask(self) -> u8 {
        match self {
            CmpOp::Lt => 0b001,
            CmpOp::Le => 0b011,
            CmpOp::Gt => 0b100,
            CmpOp::Ge => 0b110,
            CmpOp::Eq => 0b010,
            CmpOp::Ne => 0b101,
        }
    }
}

#[inline(always)]
fn holds(mask: u8, o: Ordering) -> i64 {
    i64::from((mask >> (o as i8 + 1)) & 1)
}

/// Numeric order across the three numeric types.
pub(super) trait NumCmp<B> {
    fn num_cmp(&self, b: &B) -> Ordering;
}

/// IEEE order (`-0.0 = 0.0`); NaN, which stored data and constants never hold, falls back to
/// the total order so that the answer is at least deterministic.
#[inline(always)]
fn real_cmp(a: f64, b: f64) -> Ordering {
    a.partial_cmp(&b).unwrap_or_else(|| a.total_cmp(&b))
}

impl NumCmp<i64> for i64 {
    #[inline(always)]
    fn num_cmp(&self, b: &i64) -> Ordering {
        self.cmp(b)
    }
}
impl NumCmp<u64> for u64 {
    #[inline(always)]
    fn num_cmp(&self, b: &u64) -> Ordering {
        self.cmp(b)
    }
}
impl NumCmp<u64> for i64 {
    #[inline(always)]
    fn num_cmp(&self, b: &u64) -> Ordering {
        match u64::try_from(*self) {
            Ok(a) => a.cmp(b),
            Err(_) => Ordering::Less,
        }
    }
}
impl NumCmp<i64> for u64 {
    #[inline(always)]
    fn num_cmp(&self, b: &i64) -> Ordering {
        b.num_cmp(self).reverse()
    }
}
impl NumCmp<f64> for f64 {
    #[inline(always)]
    fn num_cmp(&self, b: &f64) -> Ordering {
        real_cmp(*self, *b)
    }
}
macro_rules! int_real_cmp {
    ($($t:ty),*) => {$(
        impl NumCmp<f64> for $t {
            #[inline(always)]
            fn num_cmp(&self, b: &f64) -> Ordering {
                real_cmp(*self as f64, *b)
            }
        }
        impl NumCmp<$t> for f64 {
            #[inline(always)]
            fn num_cmp(&self, b: &$t) -> Ordering {
                real_cmp(*self, *b as f64)
            }
        }
    )*};
}
int_real_cmp!(i64, u64);

/// One comparison per logical row, NULL where either side is NULL.
#[inline(always)]
fn cmp_loop<A, B>(
    n: usize,
    a: Vals<'_, A>,
    b: Vals<'_, B>,
    mask: u8,
    f: impl Fn(&A, &B) -> Ordering,
) -> Vec<Option<i64>> {
    match (a, b) {
        // `col op constant`, the shape of almost every filter: one pass over the column.
        (Vals::Gather(v, rows), Vals::Const(Some(k))) => rows
            .iter()
            .map(|&r| v[r].as_ref().map(|x| holds(mask, f(x, k))))
            .collect(),
        (Vals::Dense(v), Vals::Const(Some(k))) => v
            .iter()
            .map(|x| x.as_ref().map(|x| holds(mask, f(x, k))))
            .collect(),
        (_, Vals::Const(None)) | (Vals::Const(None), _) => vec![None; n],
        _ => (0..n)
            .map(|i| match (a.get(i), b.get(i)) {
                (Some(x), Some(y)) => Some(holds(mask, f(x, y))),
                _ => None,
            })
            .collect(),
    }
}

fn compare_vec(
    op: CmpOp,
    a: &Operand<'_>,
    b: &Operand<'_>,
    ctx: &Ctx<'_>,
) -> Result<Vec<Option<i64>>, EvalError> {
    let (n, mask) = (ctx.n(), op.mask());
    if a.eval_type() == EvalType::Bytes || b.eval_type() == EvalType::Bytes {
        let what = "comparison";
        let (x, y) = (a.bytes(ctx, what)?, b.bytes(ctx, what)?);
        return Ok(cmp_loop(n, x, y, mask, |p, q| {
            p.as_slice().cmp(q.as_slice())
        }));
    }
    let what = "comparison";
    let (x, y) = (a.num(ctx, what)?, b.num(ctx, what)?);
    Ok(with_num2!(x, y, |x, y| cmp_loop(n, x, y, mask, |p, q| p.num_cmp(q))))
}

/// `a op b` for each logical row: Int 0/1, NULL where either side is NULL.
pub(super) fn compare(
    op: CmpOp,
    a: &Operand<'_>,
    b: &Operand<'_>,
    ctx: &Ctx<'_>,
) -> Result<Column, EvalError> {
    compare_vec(op, a, b, ctx).map(Column::Int)
}

/// `value IN (items...)` with SQL's NULL rules (see the module doc of [`crate::expr`]).
pub(super) fn in_list(
    value: &Operand<'_>,
    items: &[Operand<'_>],
    ctx: &Ctx<'_>,
) -> Result<Column, EvalError> {
    let n = ctx.n();
    let value_null = value.nulls(ctx)?;
    let mut found = vec![false; n];
    let mut saw_null = vec![false; n];
    for item in items {
        let eq = compare_vec(CmpOp::Eq, value, item, ctx)?;
        for (i, e) in eq.into_iter().enumerate() {
            match e {
                Some(1) => found[i] = true,
                None => saw_null[i] = true,
                _ => {}
            }
        }
    }
    Ok(Column::Int(
        (0..n)
            .map(|i| {
                if value_null[i] {
                    None
                } else if found[i] {
                    Some(1)
                } else if saw_null[i] {
                    None
                } else {
                    Some(0)
                }
            })
            .collect(),
    ))
}
