//! Aggregate functions and their per-group states, shared by the simple and hash aggregations.
//!
//! Executors emit **partial** results that the client merges across regions and pages, so
//! each function emits what merges: COUNT a count, SUM a sum, MIN / MAX the extreme value,
//! AVG a count followed by a sum. Output types:
//!
//! | function | argument | partial columns |
//! |---|---|---|
//! | COUNT | any | Int |
//! | SUM | Int / UInt / Real | Int / UInt / Real (NULL when no non-NULL value) |
//! | MIN, MAX | any | the argument's type (NULL when no non-NULL value) |
//! | AVG | Int / UInt / Real | Int (count), then the SUM column |
//!
//! Integer sums accumulate in 128 bits, so they cannot overflow while accumulating; a sum that
//! does not fit the 64-bit output type is an overflow error when it is emitted. SUM and AVG of
//! bytes are type errors when the DAG is built.
//!
//! States are column-shaped (one vector per state, one slot per group) so an update is a
//! tight loop over a batch.

use std::cmp::Ordering;

use crate::batch::{Batch, Column};
use crate::error::{EvalError, Result};
use crate::executors::{Evaluated, Operand, ensure_identity};
use wire::coprocessor::{self as proto, ExprType};
use wire::datum::EvalType;

/// One state vector: slot `g` belongs to group `g`.
enum AggState {
    Count(Vec<i64>),
    SumInt(Vec<Option<i128>>),
    SumUInt(Vec<Option<u128>>),
    SumReal(Vec<Option<f64>>),
    Extreme { max: bool, values: Column },
}

impl AggState {
    fn sum(arg: EvalType) -> Result<AggState, EvalError> {
        Ok(match arg {
            EvalType::Int => AggState::SumInt(Vec::new()),
            EvalType::UInt => AggState::SumUInt(Vec::new()),
            EvalType::Real => AggState::SumReal(Vec::new()),
            EvalType::Bytes => {
                return Err(EvalError::type_error("cannot sum or average bytes"));
            }
        })
    }

    fn output_type(&self) -> EvalType {
        match self {
            AggState::Count(_) | AggState::SumInt(_) => EvalType::Int,
            AggState::SumUInt(_) => EvalType::UInt,
            AggState::SumReal(_) => EvalType::Real,
            AggState::Extreme { values, .. } => values.eval_type(),
        }
    }

    fn push_group(&mut self) {
        match self {
            AggState::Count(v) => v.push(0),
            AggState::SumInt(v) => v.push(None),
            AggState::SumUInt(v) => v.push(None),
            AggState::SumReal(v) => v.push(None),
            AggState::Extreme { values, .. } => match values {
                Column::Int(v) => v.push(None),
                Column::UInt(v) => v.push(None),
                Column::Real(v) => v.push(None),
                Column::Bytes(v) => v.push(None),
            },
        }
    }

    /// Folds the values `col[rows[j]]` into groups `groups[j]` (all into group 0 when
    /// `groups` is `None`).
    fn update(&mut self, col: &Column, rows: &[usize], groups: Option<&[usize]>) {
        let group = |j: usize| groups.map_or(0, |g| g[j]);
        match (self, col) {
            (AggState::Count(c), col) => {
                for (j, &p) in rows.iter().enumerate() {
                    if !col.is_null(p) {
                        c[group(j)] += 1;
                    }
                }
            }
            (AggState::SumInt(s), Column::Int(v)) => {
                for (j, &p) in rows.iter().enumerate() {
                    if let Some(x) = v[p] {
                        let e = &mut s[group(j)];
                        *e = Some(e.unwrap_or(0) + i128::from(x));
                    }
                }
            }
            (AggState::SumUInt(s), Column::UInt(v)) => {
                for (j, &p) in rows.iter().enumerate() {
                    if let Some(x) = v[p] {
                        let e = &mut s[group(j)];
                        *e = Some(e.unwrap_or(0) + u128::from(x));
                    }
                }
            }
            (AggState::SumReal(s), Column::Real(v)) => {
                for (j, &p) in rows.iter().enumerate() {
                    if let Some(x) = v[p] {
                        let e = &mut s[group(j)];
                        *e = Some(e.unwrap_or(0.0) + x);
                    }
                }
            }
            (AggState::Extreme { max, values }, col) => {
                let better = |o: Ordering| if *max { o.is_gt() } else { o.is_lt() };
                match (values, col) {
                    (Column::Int(s), Column::Int(v)) => {
                        extreme(s, v, rows, group, |a, b| better(a.cmp(b)))
                    }
                    (Column::UInt(s), Column::UInt(v)) => {
                        extreme(s, v, rows, group, |a, b| better(a.cmp(b)))
                    }
                    (Column::Real(s), Column::Real(v)) => {
                        extreme(s, v, rows, group, |a, b| better(a.total_cmp(b)))
                    }
                    (Column::Bytes(s), Column::Bytes(v)) => {
                        for (j, &p) in rows.iter().enumerate() {
                            if let Some(x) = &v[p] {
                                let e = &mut s[group(j)];
                                if e.as_ref().is_none_or(|c| better(x.as_slice().cmp(c))) {
                                    *e = Some(x.clone());
                                }
                            }
                        }
                    }
                    // The state's type is the argument's, fixed when the DAG is built.
                    _ => {}
                }
            }
            // Likewise: a sum state matches its argument's type.
            _ => {}
        }
    }

    /// The partial results of every group, in group order; the state is left empty.
    fn take_output(&mut self) -> Result<Column, EvalError> {
        Ok(match self {
            AggState::Count(v) => Column::Int(v.drain(..).map(Some).collect()),
            AggState::SumInt(v) => Column::Int(
                v.drain(..)
                    .map(|s| {
                        s.map(|s| {
                            i64::try_from(s).map_err(|_| EvalError::overflow(format!("sum={s}")))
                        })
                        .transpose()
                    })
                    .collect::<Result<_, _>>()?,
            ),
            AggState::SumUInt(v) => Column::UInt(
                v.drain(..)
                    .map(|s| {
                        s.map(|s| {
                            u64::try_from(s).map_err(|_| EvalError::overflow(format!("sum={s}")))
                        })
                        .transpose()
                    })
                    .collect::<Result<_, _>>()?,
            ),
            AggState::SumReal(v) => Column::Real(std::mem::take(v)),
            AggState::Extreme { values, .. } => {
                let empty = Column::with_capacity(values.eval_type(), 0);
                std::mem::replace(values, empty)
            }
        })
    }
}

fn extreme<T: Copy>(
    state: &mut [Option<T>],
    values: &[Option<T>],
    rows: &[usize],
    group: impl Fn(usize) -> usize,
    better: impl Fn(&T, &T) -> bool,
) {
    for (j, &p) in rows.iter().enumerate() {
        if let Some(x) = values[p] {
            let e = &mut state[group(j)];
            if e.as_ref().is_none_or(|c| better(&x, c)) {
                *e = Some(x);
            }
        }
    }
}

/// One aggregate function: its argument and its states (two for AVG).
struct AggFunction {
    arg: Operand,
    states: Vec<AggState>,
}

/// The aggregate functions of one aggregation executor, over a number of groups.
pub(crate) struct Aggregates {
    funcs: Vec<AggFunction>,
    groups: usize,
    identity: Vec<usize>,
}

impl Aggregates {
    pub(crate) fn build(exprs: &[proto::Expr], input: &[EvalType]) -> Result<Aggregates> {
        let mut funcs = Vec::with_capacity(exprs.len());
        for e in exprs {
            let kind = ExprType::from_i32(e.tp);
            let [child] = e.children.as_slice() else {
                return Err(crate::Error::InvalidRequest(format!(
                    "an aggregate function takes one argument, found={} tp={}",
                    e.children.len(),
                    e.tp
                )));
            };
            let arg = Operand::build(child, input)?;
            let t = arg.result_type();
            let states = match kind {
                Some(ExprType::Count) => vec![AggState::Count(Vec::new())],
                Some(ExprType::Sum) => vec![AggState::sum(t)?],
                Some(ExprType::Avg) => vec![AggState::Count(Vec::new()), AggState::sum(t)?],
                Some(ExprType::Min | ExprType::Max) => vec![AggState::Extreme {
                    max: kind == Some(ExprType::Max),
                    values: Column::with_capacity(t, 0),
                }],
                _ => {
                    return Err(crate::Error::InvalidRequest(format!(
                        "not an aggregate function: tp={}",
                        e.tp
                    )));
                }
            };
            funcs.push(AggFunction { arg, states });
        }
        Ok(Aggregates {
            funcs,
            groups: 0,
            identity: Vec::new(),
        })
    }

    /// The types of the partial result columns, in output order.
    pub(crate) fn output_types(&self) -> Vec<EvalType> {
        self.funcs
            .iter()
            .flat_map(|f| f.states.iter().map(AggState::output_type))
            .collect()
    }

    pub(crate) fn groups(&self) -> usize {
        self.groups
    }

    /// Adds a group with empty states; returns its index.
    pub(crate) fn push_group(&mut self) -> usize {
        for f in &mut self.funcs {
            for s in &mut f.states {
                s.push_group();
            }
        }
        self.groups += 1;
        self.groups - 1
    }

    /// Folds the batch's live rows into their groups: `groups[j]` is the group of logical row
    /// `j`, or every row goes to group 0 when `groups` is `None`.
    pub(crate) fn update(&mut self, batch: &Batch, groups: Option<&[usize]>) -> Result<()> {
        ensure_identity(&mut self.identity, batch.logical_rows.len());
        for f in &mut self.funcs {
            if let [AggState::Count(c)] = f.states.as_mut_slice()
                && let Some(k) = f.arg.constant()
            {
                // COUNT(1), the usual COUNT(*): every row counts (none for COUNT(NULL)),
                // without broadcasting the constant into a column first.
                if !k.is_null() {
                    for j in 0..batch.logical_rows.len() {
                        c[groups.map_or(0, |g| g[j])] += 1;
                    }
                }
                continue;
            }
            let evaluated: Evaluated = f.arg.eval(batch)?;
            let (col, rows) = evaluated.view(batch, &self.identity);
            for s in &mut f.states {
                s.update(col, rows, groups);
            }
        }
        Ok(())
    }

    /// The partial results of every group, one column per state; the groups are dropped.
    pub(crate) fn take_output(&mut self) -> Result<Vec<Column>, EvalError> {
        self.groups = 0;
        let mut out = Vec::new();
        for f in &mut self.funcs {
            for s in &mut f.states {
                out.push(s.take_output()?);
            }
        }
        Ok(out)
    }
}
