//! The operands a function node reads: its children's results, viewed without copying.
//!
//! A child's result is one of three shapes: a column it computed (one value per logical row),
//! an input column read through the logical rows, or a constant broadcast to every row.
//! [`Vals`] gives a function a uniform `get(i)` over all three, so each function is written
//! once as a loop over `0..n`.

use std::fmt::Display;

use crate::batch::Column;
use crate::error::EvalError;
use wire::datum::EvalType;

/// The batch being evaluated: the input columns and the logical rows to evaluate.
pub(super) struct Ctx<'a> {
    columns: &'a [Column],
    pub rows: &'a [usize],
    /// The largest logical row; every column read must be longer.
    max_row: Option<usize>,
}

impl<'a> Ctx<'a> {
    pub fn new(columns: &'a [Column], rows: &'a [usize]) -> Ctx<'a> {
        Ctx {
            columns,
            rows,
            max_row: rows.iter().copied().max(),
        }
    }

    /// Values per result: one per logical row.
    pub fn n(&self) -> usize {
        self.rows.len()
    }

    /// Input column `offset`, checked to have type `tp` and to hold every logical row.
    pub fn column(&self, offset: usize, tp: EvalType) -> Result<&'a Column, EvalError> {
        let col = self.columns.get(offset).ok_or_else(|| {
            EvalError::type_error(format!(
                "column offset out of range: expected < {}, found {offset}",
                self.columns.len()
            ))
        })?;
        if col.eval_type() != tp {
            return Err(EvalError::type_error(format!(
                "input column {offset}: expected {tp:?}, found {:?}",
                col.eval_type()
            )));
        }
        if let Some(max) = self.max_row
            && max >= col.len()
        {
            return Err(EvalError::type_error(format!(
                "logical row out of range: expected < {}, found {max}",
                col.len()
            )));
        }
        Ok(col)
    }
}

/// A child's result.
pub(super) enum Operand<'a> {
    /// Computed: one value per logical row.
    Owned(Column),
    /// An input column, read through the logical rows (checked to be in range by
    /// [`Ctx::column`]).
    Ref(&'a Column),
    /// A constant: a column of one value.
    Const(&'a Column),
}

/// Values of one type, one per logical row, whatever the operand's shape.
pub(super) enum Vals<'a, T> {
    Dense(&'a [Option<T>]),
    Gather(&'a [Option<T>], &'a [usize]),
    Const(&'a Option<T>),
}

impl<T> Clone for Vals<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Vals<'_, T> {}

impl<'a, T> Vals<'a, T> {
    /// The value of logical row `i` (`i < n`). In range by construction: a dense column has
    /// `n` values and a gathered column was checked to hold every logical row.
    #[inline(always)]
    pub fn get(&self, i: usize) -> Option<&'a T> {
        match *self {
            Vals::Dense(v) => v[i].as_ref(),
            Vals::Gather(v, rows) => v[rows[i]].as_ref(),
            Vals::Const(c) => c.as_ref(),
        }
    }
}

/// Numeric values of any of the three numeric types.
pub(super) enum NumVals<'a> {
    Int(Vals<'a, i64>),
    UInt(Vals<'a, u64>),
    Real(Vals<'a, f64>),
}

fn vals<'a, T>(v: &'a [Option<T>], shape: Shape<'a>) -> Result<Vals<'a, T>, EvalError> {
    Ok(match shape {
        Shape::Dense => Vals::Dense(v),
        Shape::Gather(rows) => Vals::Gather(v, rows),
        Shape::Const => Vals::Const(
            v.first()
                .ok_or_else(|| EvalError::type_error("constant: expected one value, found none"))?,
        ),
    })
}

#[derive(Clone, Copy)]
enum Shape<'a> {
    Dense,
    Gather(&'a [usize]),
    Const,
}

impl<'a> Operand<'a> {
    fn parts<'b>(&'b self, ctx: &Ctx<'b>) -> (&'b Column, Shape<'b>) {
        match self {
            Operand::Owned(c) => (c, Shape::Dense),
            Operand::Ref(c) => (c, Shape::Gather(ctx.rows)),
            Operand::Const(c) => (c, Shape::Const),
        }
    }

    pub fn eval_type(&self) -> EvalType {
        match self {
            Operand::Owned(c) => c.eval_type(),
            Operand::Ref(c) | Operand::Const(c) => c.eval_type(),
        }
    }

    /// The operand as numbers; bytes are a type error (build prevents it).
    pub fn num<'b>(&'b self, ctx: &Ctx<'b>, func: &str) -> Result<NumVals<'b>, EvalError> {
        let (col, shape) = self.parts(ctx);
        Ok(match col {
            Column::Int(v) => NumVals::Int(vals(v, shape)?),
            Column::UInt(v) => NumVals::UInt(vals(v, shape)?),
            Column::Real(v) => NumVals::Real(vals(v, shape)?),
            Column::Bytes(_) => {
                return Err(EvalError::type_error(format!(
                    "{func}: expected a numeric operand, found Bytes"
                )));
            }
        })
    }

    /// The operand as byte strings; numbers are a type error (build prevents it).
    pub fn bytes<'b>(&'b self, ctx: &Ctx<'b>, func: &str) -> Result<Vals<'b, Vec<u8>>, EvalError> {
        let (col, shape) = self.parts(ctx);
        match col {
            Column::Bytes(v) => vals(v, shape),
            other => Err(EvalError::type_error(format!(
                "{func}: expected a Bytes operand, found {:?}",
                other.eval_type()
            ))),
        }
    }

    /// Whether each logical row is NULL.
    pub fn nulls(&self, ctx: &Ctx<'_>) -> Result<Vec<bool>, EvalError> {
        fn each<T>(v: Vals<'_, T>, n: usize) -> Vec<bool> {
            (0..n).map(|i| v.get(i).is_none()).collect()
        }
        let (col, shape) = self.parts(ctx);
        let n = ctx.n();
        Ok(match col {
            Column::Int(v) => each(vals(v, shape)?, n),
            Column::UInt(v) => each(vals(v, shape)?, n),
            Column::Real(v) => each(vals(v, shape)?, n),
            Column::Bytes(v) => each(vals(v, shape)?, n),
        })
    }

    /// The operand as an owned column of one value per logical row.
    pub fn into_column(self, ctx: &Ctx<'_>) -> Result<Column, EvalError> {
        fn gather<T: Clone>(v: Vals<'_, T>, n: usize) -> Vec<Option<T>> {
            (0..n).map(|i| v.get(i).cloned()).collect()
        }
        if let Operand::Owned(c) = self {
            return Ok(c);
        }
        let (col, shape) = self.parts(ctx);
        let n = ctx.n();
        Ok(match col {
            Column::Int(v) => Column::Int(gather(vals(v, shape)?, n)),
            Column::UInt(v) => Column::UInt(gather(vals(v, shape)?, n)),
            Column::Real(v) => Column::Real(gather(vals(v, shape)?, n)),
            Column::Bytes(v) => Column::Bytes(gather(vals(v, shape)?, n)),
        })
    }
}

/// A numeric type of a column.
pub(super) trait Num: Copy + Display {
    fn to_f64(self) -> f64;
    /// SQL truth: non-zero is true.
    fn is_true(self) -> bool;
}

/// An integer type of a column: exact arithmetic goes through i128.
pub(super) trait IntNum: Num {
    fn to_i128(self) -> i128;
}

impl Num for i64 {
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self as f64
    }
    #[inline(always)]
    fn is_true(self) -> bool {
        self != 0
    }
}

impl Num for u64 {
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self as f64
    }
    #[inline(always)]
    fn is_true(self) -> bool {
        self != 0
    }
}

impl Num for f64 {
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self
    }
    #[inline(always)]
    fn is_true(self) -> bool {
        self != 0.0
    }
}

impl IntNum for i64 {
    #[inline(always)]
    fn to_i128(self) -> i128 {
        i128::from(self)
    }
}

impl IntNum for u64 {
    #[inline(always)]
    fn to_i128(self) -> i128 {
        i128::from(self)
    }
}

/// Runs `$body` with `$a` and `$b` bound to the typed views of two [`NumVals`], once per
/// combination of their types (so `$body` is monomorphized for each).
macro_rules! with_num2 {
    ($x:expr, $y:expr, |$a:ident, $b:ident| $body:expr) => {
        match ($x, $y) {
            ($crate::expr::operand::NumVals::Int($a), $crate::expr::operand::NumVals::Int($b)) => {
                $body
            }
            ($crate::expr::operand::NumVals::Int($a), $crate::expr::operand::NumVals::UInt($b)) => {
                $body
            }
            ($crate::expr::operand::NumVals::Int($a), $crate::expr::operand::NumVals::Real($b)) => {
                $body
            }
            ($crate::expr::operand::NumVals::UInt($a), $crate::expr::operand::NumVals::Int($b)) => {
                $body
            }
            (
                $crate::expr::operand::NumVals::UInt($a),
                $crate::expr::operand::NumVals::UInt($b),
            ) => $body,
            (
                $crate::expr::operand::NumVals::UInt($a),
                $crate::expr::operand::NumVals::Real($b),
            ) => $body,
            ($crate::expr::operand::NumVals::Real($a), $crate::expr::operand::NumVals::Int($b)) => {
                $body
            }
            (
                $crate::expr::operand::NumVals::Real($a),
                $crate::expr::operand::NumVals::UInt($b),
            ) => $body,
            (
                $crate::expr::operand::NumVals::Real($a),
                $crate::expr::operand::NumVals::Real($b),
            ) => $body,
        }
    };
}
pub(super) use with_num2;

/// Like [`with_num2`] for one operand.
macro_rules! with_num {
    ($x:expr, |$a:ident| $body:expr) => {
        match $x {
            $crate::expr::operand::NumVals::Int($a) => $body,
            $crate::expr::operand::NumVals::UInt($a) => $body,
            $crate::expr::operand::NumVals::Real($a) => $body,
        }
    };
}
pub(super) use with_num;
