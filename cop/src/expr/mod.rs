//! Expressions compiled from the DAG and evaluated over column batches.
//!
//! [`Expr::build`] turns a [`proto::Expr`] into a [`CompiledExpr`]: a tree whose every node
//! knows its [`EvalType`], checked once against the types of the input columns, so that a
//! malformed or ill-typed expression fails before any row is read. [`CompiledExpr::eval`] is
//! vectorized: each function node evaluates its children to whole columns (one value per
//! logical row) and then runs one tight loop over them. A column reference is read in place
//! through the batch's logical rows and a constant is broadcast, so neither is copied on the
//! way into a function.
//!
//! # Semantics (what a reference evaluator must reproduce)
//!
//! * **NULL** propagates through comparisons and arithmetic: any NULL operand gives NULL.
//!   A NULL literal takes the type of its peer operand (`bytes_col = NULL` is legal).
//! * **Comparisons** `Lt Le Gt Ge Eq Ne` take two numbers (Int, UInt, Real in any mix) or two
//!   byte strings (compared bytewise); a number against bytes is a type error at build time.
//!   Int against UInt compares exactly (`-1 < u64::MAX`); an integer against a Real compares
//!   the integer converted to f64 (as MySQL compares with doubles, and as
//!   [`Datum::sql_cmp`](wire::datum::Datum::sql_cmp) does); Reals compare by IEEE value
//!   (`-0.0 = 0.0`). Result: Int 0/1 or NULL.
//! * **Arithmetic** `Plus Minus Multiply`: with a Real operand the result is Real; otherwise
//!   the result is UInt when either operand is UInt (MySQL), else Int, and a result outside
//!   the result type is an overflow error (`i64::MAX + 1`, `0u - 1u`, `-1 + 0u`). A Real result
//!   that is not finite is an overflow error too (MySQL: "DOUBLE value is out of range").
//! * `Divide` is always Real; a zero divisor gives NULL. Finite operands can give a quotient
//!   beyond the DOUBLE range (`1e300 / 1e-300`): an overflow error too, as in MySQL and TiDB.
//! * `IntDiv` truncates toward zero: Int, or UInt when either operand is UInt, with overflow
//!   errors (`i64::MIN DIV -1`); with a Real operand the truncated quotient must fit Int.
//!   A zero divisor gives NULL.
//! * `Mod` has the sign of the dividend; with a Real operand it is Real (`fmod`), otherwise it
//!   has the dividend's type (UInt iff the left operand is UInt, as in MySQL), which always
//!   fits. A zero divisor gives NULL.
//! * `UnaryMinus`: Int → Int (`-i64::MIN` overflows), UInt → Int (values above 2^63
//!   overflow), Real → Real.
//! * `And Or Not` use SQL three-valued logic on numbers (non-zero, reals included, is true):
//!   `false AND NULL = false`, `true OR NULL = true`, otherwise NULL wins. Both operands are
//!   always evaluated, so an error in either is an error of the whole expression. Result Int.
//! * `IsNull`: Int 1 if NULL else 0, never NULL; any operand type.
//! * `In(v, l1, l2, ...)`: NULL if `v` is NULL; 1 if some `li = v`; else NULL if some `li` is
//!   NULL; else 0. Equality as for comparisons (all numbers or all bytes).
//! * `Like(v, pattern)`: bytewise; `%` matches any run of bytes, `_` exactly one byte, `\`
//!   makes the next byte literal (a trailing `\` is a literal backslash). NULL if either is
//!   NULL. A constant pattern is compiled once; `abc%` becomes a prefix check.

mod arithmetic;
mod build;
mod compare;
pub mod fuzzing;
mod like;
mod logic;
mod operand;

use crate::batch::Column;
use crate::error::EvalError;
use wire::coprocessor as proto;
use wire::datum::{Datum, EvalType};

pub use like::{LikePattern, LikeToken};

use operand::{Ctx, Operand};

/// The name executors use: `Expr::build(&proto_expr, &input_types)`.
pub type Expr = CompiledExpr;

/// A type-checked expression, ready to evaluate over batches whose columns have the types it
/// was built against.
#[derive(Debug, Clone)]
pub struct CompiledExpr {
    node: Node,
    tp: EvalType,
    /// A NULL literal: its type is only a placeholder until the parent gives it the peer's.
    null_literal: bool,
}

#[derive(Debug, Clone)]
enum Node {
    ColumnRef(usize),
    /// A column of exactly one value, broadcast to every row.
    Constant(Column),
    Func(Func, Vec<CompiledExpr>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CmpOp {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ArithOp {
    Plus,
    Minus,
    Multiply,
    Divide,
    IntDiv,
    Mod,
}

#[derive(Debug, Clone)]
enum Func {
    Compare(CmpOp),
    Arith(ArithOp),
    UnaryMinus,
    And,
    Or,
    Not,
    IsNull,
    In,
    /// The pattern compiled at build time when it is a constant.
    Like(Option<LikePattern>),
}

impl CompiledExpr {
    /// Compiles `e` for input columns of the types `input` (column ref `i` reads `input[i]`).
    ///
    /// Rejects an unknown expression type or function signature, a wrong number of arguments,
    /// a column offset outside `input`, a constant whose `val` has the wrong length, an
    /// aggregate (executors build an aggregate's argument, not the aggregate), and operand
    /// types the function does not take.
    pub fn build(e: &proto::Expr, input: &[EvalType]) -> Result<CompiledExpr, EvalError> {
        build::build(e, input, 0)
    }

    /// The type of the column [`CompiledExpr::eval`] returns.
    pub fn result_type(&self) -> EvalType {
        self.tp
    }

    /// The input column offset when the expression is a bare column reference (executors
    /// read such a column without evaluating anything).
    pub fn as_column_ref(&self) -> Option<usize> {
        match self.node {
            Node::ColumnRef(i) => Some(i),
            _ => None,
        }
    }

    /// The value when the expression is a constant.
    pub fn as_constant(&self) -> Option<Datum> {
        match &self.node {
            Node::Constant(c) if !c.is_empty() => Some(c.datum(0)),
            _ => None,
        }
    }

    /// Evaluates the expression for each of `logical_rows` (physical indexes into `columns`),
    /// returning a column of [`Self::result_type`] with one value per logical row, in order.
    ///
    /// `columns` must have the types the expression was built against and every logical row
    /// must be within them; a mismatch is an error, not a panic.
    pub fn eval(&self, columns: &[Column], logical_rows: &[usize]) -> Result<Column, EvalError> {
        let ctx = Ctx::new(columns, logical_rows);
        let out = self.eval_operand(&ctx)?;
        out.into_column(&ctx)
    }

    fn eval_operand<'a>(&'a self, ctx: &Ctx<'a>) -> Result<Operand<'a>, EvalError> {
        match &self.node {
            Node::ColumnRef(offset) => Ok(Operand::Ref(ctx.column(*offset, self.tp)?)),
            Node::Constant(c) => Ok(Operand::Const(c)),
            Node::Func(f, children) => {
                let args = children
                    .iter()
                    .map(|c| c.eval_operand(ctx))
                    .collect::<Result<Vec<_>, _>>()?;
                let out = match f {
                    Func::Compare(op) => compare::compare(*op, &args[0], &args[1], ctx)?,
                    Func::Arith(op) => arithmetic::binary(*op, self.tp, &args[0], &args[1], ctx)?,
                    Func::UnaryMinus => arithmetic::unary_minus(&args[0], ctx)?,
                    Func::And => logic::and(&args[0], &args[1], ctx)?,
                    Func::Or => logic::or(&args[0], &args[1], ctx)?,
                    Func::Not => logic::not(&args[0], ctx)?,
                    Func::IsNull => logic::is_null(&args[0], ctx)?,
                    Func::In => compare::in_list(&args[0], &args[1..], ctx)?,
                    Func::Like(pattern) => like::like(pattern.as_ref(), &args[0], &args[1], ctx)?,
                };
                Ok(Operand::Owned(out))
            }
        }
    }
}
