//! `And Or Not` (SQL three-valued logic) and `IsNull`.

use super::operand::{Ctx, Num, Operand, Vals, with_num};
use crate::batch::Column;
use crate::error::EvalError;

fn truths_of<T: Num>(v: Vals<'_, T>, n: usize) -> Vec<Option<bool>> {
    (0..n).map(|i| v.get(i).map(|x| x.is_true())).collect()
}

/// SQL truth of each logical row: `None` for NULL, non-zero numbers true.
fn truths(a: &Operand<'_>, ctx: &Ctx<'_>, func: &str) -> Result<Vec<Option<bool>>, EvalError> {
    let n = ctx.n();
    Ok(with_num!(a.num(ctx, func)?, |v| truths_of(v, n)))
}

fn to_int(b: Option<bool>) -> Option<i64> {
    b.map(i64::from)
}

/// `a AND b`: false if either is false, else NULL if either is NULL, else true.
pub(super) fn and(a: &Operand<'_>, b: &Operand<'_>, ctx: &Ctx<'_>) -> Result<Column, EvalError> {
    let (x, y) = (truths(a, ctx, "AND")?, truths(b, ctx, "AND")?);
    Ok(Column::Int(
        x.into_iter()
            .zip(y)
            .map(|p| {
                to_int(match p {
                    (Some(false), _) | (_, Some(false)) => Some(false),
                    (Some(true), Some(true)) => Some(true),
                    _ => None,
                })
            })
            .collect(),
    ))
}

/// `a OR b`: true if either is true, else NULL if either is NULL, else false.
pub(super) fn or(a: &Operand<'_>, b: &Operand<'_>, ctx: &Ctx<'_>) -> Result<Column, EvalError> {
    let (x, y) = (truths(a, ctx, "OR")?, truths(b, ctx, "OR")?);
    Ok(Column::Int(
        x.into_iter()
            .zip(y)
            .map(|p| {
                to_int(match p {
                    (Some(true), _) | (_, Some(true)) => Some(true),
                    (Some(false), Some(false)) => Some(false),
                    _ => None,
                })
            })
            .collect(),
    ))
}

/// `NOT a`: NULL stays NULL.
pub(super) fn not(a: &Operand<'_>, ctx: &Ctx<'_>) -> Result<Column, EvalError> {
    let x = truths(a, ctx, "NOT")?;
    Ok(Column::Int(
        x.into_iter().map(|t| to_int(t.map(|t| !t))).collect(),
    ))
}

/// `a IS NULL`: 1 or 0, never NULL.
pub(super) fn is_null(a: &Operand<'_>, ctx: &Ctx<'_>) -> Result<Column, EvalError> {
    Ok(Column::Int(
        a.nulls(ctx)?
            .into_iter()
            .map(|n| Some(i64::from(n)))
            .collect(),
    ))
}
