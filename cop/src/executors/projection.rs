//! Projection: evaluates one expression per output column over the live rows.

use crate::batch::{Batch, Column};
use crate::error::{EvalError, Result};
use crate::executors::{BatchExecutor, BatchResult, Evaluated, Operand};
use wire::coprocessor as proto;
use wire::datum::EvalType;

pub struct ProjectionExecutor<'a> {
    src: Box<dyn BatchExecutor + 'a>,
    exprs: Vec<Operand>,
    schema: Vec<EvalType>,
}

impl<'a> ProjectionExecutor<'a> {
    pub(crate) fn new(src: Box<dyn BatchExecutor + 'a>, p: &proto::Projection) -> Result<Self> {
        let exprs = p
            .exprs
            .iter()
            .map(|e| Operand::build(e, src.schema()))
            .collect::<Result<Vec<_>, EvalError>>()?;
        let schema = exprs.iter().map(|e| e.result_type()).collect();
        Ok(ProjectionExecutor { src, exprs, schema })
    }
}

impl BatchExecutor for ProjectionExecutor<'_> {
    fn schema(&self) -> &[EvalType] {
        &self.schema
    }

    fn next_batch(&mut self, scan_rows: usize) -> Result<BatchResult> {
        let r = self.src.next_batch(scan_rows)?;
        let n = r.batch.logical_rows.len();
        let mut columns = Vec::with_capacity(self.exprs.len());
        for (e, t) in self.exprs.iter().zip(&self.schema) {
            let col = match e.eval(&r.batch)? {
                Evaluated::Dense(col) => col,
                // A column reference: gather its live rows.
                Evaluated::InPlace(i) => {
                    let src = &r.batch.columns[i];
                    let mut col = Column::with_capacity(*t, n);
                    for &p in &r.batch.logical_rows {
                        if !col.push_from(src, p) {
                            return Err(EvalError::type_error(format!(
                                "column of type {:?} where {t:?} was declared",
                                src.eval_type()
                            ))
                            .into());
                        }
                    }
                    col
                }
            };
            columns.push(col);
        }
        Ok(BatchResult {
            batch: Batch {
                columns,
                logical_rows: (0..n).collect(),
            },
            is_drained: r.is_drained,
        })
    }

    fn source(&self) -> Option<&dyn BatchExecutor> {
        Some(&*self.src)
    }
}
