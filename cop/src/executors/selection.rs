//! Selection: keeps the rows for which every condition is true (NULL and false drop the row).
//!
//! Rows are dropped by shrinking `logical_rows`; columns are never copied. Conditions are
//! evaluated in order, each only over the rows the previous ones kept, so a later condition
//! never sees (nor fails on) a row an earlier one dropped.

use crate::batch::Column;
use crate::error::{EvalError, Result};
use crate::executors::{BatchExecutor, BatchResult, Operand, ensure_identity};
use wire::coprocessor as proto;
use wire::datum::EvalType;

pub struct SelectionExecutor<'a> {
    src: Box<dyn BatchExecutor + 'a>,
    conditions: Vec<Operand>,
    identity: Vec<usize>,
}

impl<'a> SelectionExecutor<'a> {
    pub(crate) fn new(src: Box<dyn BatchExecutor + 'a>, sel: &proto::Selection) -> Result<Self> {
        let mut conditions = Vec::with_capacity(sel.conditions.len());
        for c in &sel.conditions {
            let op = Operand::build(c, src.schema())?;
            if op.result_type() == EvalType::Bytes {
                return Err(EvalError::type_error(
                    "a selection condition must be a number or a boolean, found bytes",
                )
                .into());
            }
            conditions.push(op);
        }
        Ok(SelectionExecutor {
            src,
            conditions,
            identity: Vec::new(),
        })
    }
}

/// SQL truth of a condition value: non-NULL and non-zero.
fn is_true(col: &Column, i: usize) -> bool {
    match col {
        Column::Int(v) => v[i].is_some_and(|x| x != 0),
        Column::UInt(v) => v[i].is_some_and(|x| x != 0),
        Column::Real(v) => v[i].is_some_and(|x| x != 0.0),
        // Rejected when the selection is built.
        Column::Bytes(_) => false,
    }
}

impl BatchExecutor for SelectionExecutor<'_> {
    fn schema(&self) -> &[EvalType] {
        self.src.schema()
    }

    fn next_batch(&mut self, scan_rows: usize) -> Result<BatchResult> {
        let mut r = self.src.next_batch(scan_rows)?;
        for cond in &self.conditions {
            if r.batch.logical_rows.is_empty() {
                break;
            }
            let evaluated = cond.eval(&r.batch)?;
            ensure_identity(&mut self.identity, r.batch.logical_rows.len());
            let (col, rows) = evaluated.view(&r.batch, &self.identity);
            let keep: Vec<usize> = r
                .batch
                .logical_rows
                .iter()
                .zip(rows)
                .filter(|&(_, &p)| is_true(col, p))
                .map(|(&l, _)| l)
                .collect();
            r.batch.logical_rows = keep;
        }
        Ok(r)
    }

    fn source(&self) -> Option<&dyn BatchExecutor> {
        Some(&*self.src)
    }
}
