//! Compiling a [`proto::Expr`] into a type-checked [`CompiledExpr`].

use super::{ArithOp, CmpOp, CompiledExpr, Func, LikePattern, Node};
use crate::batch::Column;
use crate::error::EvalError;
use wire::coprocessor::{self as proto, ExprType, ScalarFuncSig};
use wire::datum::EvalType;

/// Deeper expressions are rejected: evaluation recurses once per level. (Decoded DAGs are
/// already limited by prost's recursion limit; this also bounds hand-built ones.)
pub(super) const MAX_DEPTH: usize = 128;

pub(super) fn build(
    e: &proto::Expr,
    input: &[EvalType],
    depth: usize,
) -> Result<CompiledExpr, EvalError> {
    if depth > MAX_DEPTH {
        return Err(EvalError::type_error(format!(
            "expression too deep: expected at most {MAX_DEPTH} levels, found more"
        )));
    }
    let tp = ExprType::from_i32(e.tp).ok_or_else(|| {
        EvalError::type_error(format!(
            "unknown expression type: expected 0..=4, 10 or 20, found {}",
            e.tp
        ))
    })?;
    match tp {
        ExprType::Null
        | ExprType::Int64
        | ExprType::UInt64
        | ExprType::Float64
        | ExprType::Bytes => constant(e, tp),
        ExprType::ColumnRef => {
            no_children(e, "column reference")?;
            let offset = e.column_offset as usize;
            let tp = *input.get(offset).ok_or_else(|| {
                EvalError::type_error(format!(
                    "column offset out of range: expected < {}, found {offset}",
                    input.len()
                ))
            })?;
            Ok(CompiledExpr {
                node: Node::ColumnRef(offset),
                tp,
                null_literal: false,
            })
        }
        ExprType::ScalarFunc => scalar(e, input, depth),
        ExprType::Count | ExprType::Sum | ExprType::Min | ExprType::Max | ExprType::Avg => {
            Err(EvalError::type_error(format!(
                "expected a scalar expression, found aggregate {tp:?}"
            )))
        }
    }
}

fn no_children(e: &proto::Expr, what: &str) -> Result<(), EvalError> {
    if e.children.is_empty() {
        Ok(())
    } else {
        Err(EvalError::type_error(format!(
            "{what}: expected no children, found {}",
            e.children.len()
        )))
    }
}

fn eight_bytes(e: &proto::Expr, tp: ExprType) -> Result<[u8; 8], EvalError> {
    e.val.as_slice().try_into().map_err(|_| {
        EvalError::type_error(format!(
            "{tp:?} constant: expected 8 bytes, found {}",
            e.val.len()
        ))
    })
}

fn null_column(tp: EvalType) -> Column {
    let mut c = Column::with_capacity(tp, 1);
    // Pushing NULL into a column of any type cannot fail.
    let _ = c.push_datum(&wire::datum::Datum::Null);
    c
}

fn constant(e: &proto::Expr, tp: ExprType) -> Result<CompiledExpr, EvalError> {
    no_children(e, "constant")?;
    let column = match tp {
        ExprType::Null => {
            if !e.val.is_empty() {
                return Err(EvalError::type_error(format!(
                    "Null constant: expected 0 bytes, found {}",
                    e.val.len()
                )));
            }
            return Ok(CompiledExpr {
                node: Node::Constant(null_column(EvalType::Int)),
                tp: EvalType::Int,
                null_literal: true,
            });
        }
        ExprType::Int64 => Column::Int(vec![Some(i64::from_le_bytes(eight_bytes(e, tp)?))]),
        ExprType::UInt64 => Column::UInt(vec![Some(u64::from_le_bytes(eight_bytes(e, tp)?))]),
        ExprType::Float64 => {
            let v = f64::from_bits(u64::from_le_bytes(eight_bytes(e, tp)?));
            if v.is_nan() {
                return Err(EvalError::type_error(
                    "Float64 constant: expected a number, found NaN",
                ));
            }
            Column::Real(vec![Some(v)])
        }
        _ => Column::Bytes(vec![Some(e.val.clone())]),
    };
    Ok(CompiledExpr {
        tp: column.eval_type(),
        node: Node::Constant(column),
        null_literal: false,
    })
}

fn is_numeric(t: EvalType) -> bool {
    t != EvalType::Bytes
}

/// Gives NULL literals among `children` the type of the first other child (Int if all are
/// NULL), so that `bytes_col = NULL` type-checks like `bytes_col = 'x'`.
fn adopt_peer_type(children: &mut [CompiledExpr], fallback: EvalType) {
    let peer = children
        .iter()
        .find(|c| !c.null_literal)
        .map_or(fallback, |c| c.tp);
    for c in children.iter_mut().filter(|c| c.null_literal) {
        c.tp = peer;
        c.node = Node::Constant(null_column(peer));
    }
}

fn types(children: &[CompiledExpr]) -> String {
    children
        .iter()
        .map(|c| format!("{:?}", c.tp))
        .collect::<Vec<_>>()
        .join(", ")
}

fn scalar(e: &proto::Expr, input: &[EvalType], depth: usize) -> Result<CompiledExpr, EvalError> {
    use ScalarFuncSig as S;
    let sig = ScalarFuncSig::from_i32(e.sig).ok_or_else(|| {
        EvalError::type_error(format!(
            "unknown scalar function: expected a known signature, found {}",
            e.sig
        ))
    })?;
    let arity_ok = match sig {
        S::UnaryMinus | S::Not | S::IsNull => e.children.len() == 1,
        S::In => e.children.len() >= 2,
        _ => e.children.len() == 2,
    };
    if !arity_ok {
        let expected = match sig {
            S::UnaryMinus | S::Not | S::IsNull => "1 argument",
            S::In => "at least 2 arguments",
            _ => "2 arguments",
        };
        return Err(EvalError::type_error(format!(
            "{sig:?}: expected {expected}, found {}",
            e.children.len()
        )));
    }
    let mut children = e
        .children
        .iter()
        .map(|c| build(c, input, depth + 1))
        .collect::<Result<Vec<_>, _>>()?;

    let type_error = |children: &[CompiledExpr], expected: &str| {
        EvalError::type_error(format!(
            "{sig:?}: expected {expected}, found {}",
            types(children)
        ))
    };
    let all_numeric = |children: &[CompiledExpr]| children.iter().all(|c| is_numeric(c.tp));
    let all_bytes = |children: &[CompiledExpr]| children.iter().all(|c| c.tp == EvalType::Bytes);

    let (func, tp) = match sig {
        S::Lt | S::Le | S::Gt | S::Ge | S::Eq | S::Ne | S::In => {
            adopt_peer_type(&mut children, EvalType::Int);
            if !all_numeric(&children) && !all_bytes(&children) {
                return Err(type_error(&children, "all numbers or all byte strings"));
            }
            let func = match sig {
                S::Lt => Func::Compare(CmpOp::Lt),
                S::Le => Func::Compare(CmpOp::Le),
                S::Gt => Func::Compare(CmpOp::Gt),
                S::Ge => Func::Compare(CmpOp::Ge),
                S::Eq => Func::Compare(CmpOp::Eq),
                S::Ne => Func::Compare(CmpOp::Ne),
                _ => Func::In,
            };
            (func, EvalType::Int)
        }
        S::Plus | S::Minus | S::Multiply | S::Divide | S::IntDiv | S::Mod => {
            adopt_peer_type(&mut children, EvalType::Int);
            let op = match sig {
                S::Plus => ArithOp::Plus,
                S::Minus => ArithOp::Minus,
                S::Multiply => ArithOp::Multiply,
                S::Divide => ArithOp::Divide,
                S::IntDiv => ArithOp::IntDiv,
                _ => ArithOp::Mod,
            };
            let tp = op
                .result_type(children[0].tp, children[1].tp)
                .ok_or_else(|| type_error(&children, "two numbers"))?;
            (Func::Arith(op), tp)
        }
        S::UnaryMinus => {
            adopt_peer_type(&mut children, EvalType::Int);
            let tp = match children[0].tp {
                EvalType::Int | EvalType::UInt => EvalType::Int,
                EvalType::Real => EvalType::Real,
                EvalType::Bytes => return Err(type_error(&children, "a number")),
            };
            (Func::UnaryMinus, tp)
        }
        S::And | S::Or | S::Not => {
            adopt_peer_type(&mut children, EvalType::Int);
            if !all_numeric(&children) {
                return Err(type_error(&children, "numbers"));
            }
            let func = match sig {
                S::And => Func::And,
                S::Or => Func::Or,
                _ => Func::Not,
            };
            (func, EvalType::Int)
        }
        S::IsNull => (Func::IsNull, EvalType::Int),
        S::Like => {
            adopt_peer_type(&mut children, EvalType::Bytes);
            if !all_bytes(&children) {
                return Err(type_error(&children, "two byte strings"));
            }
            let pattern = match &children[1].node {
                Node::Constant(Column::Bytes(v)) => v
                    .first()
                    .and_then(|p| p.as_deref())
                    .map(LikePattern::compile),
                _ => None,
            };
            (Func::Like(pattern), EvalType::Int)
        }
    };
    Ok(CompiledExpr {
        node: Node::Func(func, children),
        tp,
        null_literal: false,
    })
}
