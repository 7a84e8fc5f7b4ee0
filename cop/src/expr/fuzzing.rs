//! Entry point of the `cop_dag` fuzz target (`fuzz/fuzz_targets/cop_dag.rs`), kept in the
//! library so that the committed corpus replays as an ordinary test
//! (`cop/tests/fuzz_corpus_replay.rs`) through the very same code.

use prost::Message;

use super::Expr;
use crate::batch::Column;
use wire::coprocessor::{self as proto, DagRequest};
use wire::datum::{EvalType, FieldType};

/// The schema every expression is also built against, whatever the DAG's scan declares.
const FIXED_SCHEMA: [EvalType; 6] = [
    EvalType::Int,
    EvalType::UInt,
    EvalType::Real,
    EvalType::Bytes,
    EvalType::Int,
    EvalType::Bytes,
];

/// Five rows of awkward values of a type: zero, negatives, extremes, `-0.0`, LIKE
/// metacharacters, and NULL.
fn sample_column(tp: EvalType) -> Column {
    match tp {
        EvalType::Int => Column::Int(vec![
            Some(0),
            Some(-1),
            Some(i64::MAX),
            Some(i64::MIN),
            None,
        ]),
        EvalType::UInt => Column::UInt(vec![Some(0), Some(1), Some(u64::MAX), Some(1 << 63), None]),
        EvalType::Real => Column::Real(vec![Some(0.0), Some(-1.5), Some(1e308), Some(-0.0), None]),
        EvalType::Bytes => Column::Bytes(vec![
            Some(Vec::new()),
            Some(b"a%".to_vec()),
            Some(b"abc".to_vec()),
            Some(b"\\".to_vec()),
            None,
        ]),
    }
}

/// Every expression of an executor, aggregate arguments included.
fn expressions(exec: &proto::Executor) -> Vec<&proto::Expr> {
    let mut out = Vec::new();
    if let Some(s) = &exec.selection {
        out.extend(&s.conditions);
    }
    if let Some(a) = &exec.aggregation {
        out.extend(&a.group_by);
        // The aggregate itself is not a scalar (build rejects it); its arguments are.
        out.extend(&a.agg_func);
        out.extend(a.agg_func.iter().flat_map(|f| &f.children));
    }
    if let Some(t) = &exec.top_n {
        out.extend(t.order_by.iter().filter_map(|b| b.expr.as_ref()));
    }
    if let Some(p) = &exec.projection {
        out.extend(&p.exprs);
    }
    out
}

/// The `cop_dag` target: decodes a [`DagRequest`] and builds every expression in it against a
/// fixed schema and against the scan's own columns; each expression that builds is evaluated
/// over a small batch of awkward values. Nothing may panic, and a result must have one value
/// per logical row, of the type the build promised.
pub fn dag(data: &[u8]) {
    let Ok(dag) = DagRequest::decode(data) else {
        return;
    };
    let mut schemas = vec![FIXED_SCHEMA.to_vec()];
    if let Some(first) = dag.executors.first() {
        let columns = first
            .tbl_scan
            .iter()
            .flat_map(|s| &s.columns)
            .chain(first.idx_scan.iter().flat_map(|s| &s.columns));
        schemas.push(
            columns
                .map(|c| FieldType::from_i32(c.tp).map_or(EvalType::Int, FieldType::eval_type))
                .collect(),
        );
    }
    let batches: Vec<Vec<Column>> = schemas
        .iter()
        .map(|s| s.iter().map(|t| sample_column(*t)).collect())
        .collect();
    for exec in &dag.executors {
        for e in expressions(exec) {
            for (schema, columns) in schemas.iter().zip(&batches) {
                let Ok(compiled) = Expr::build(e, schema) else {
                    continue;
                };
                for rows in [&[0usize, 1, 2, 3, 4][..], &[4, 1], &[]] {
                    if let Ok(out) = compiled.eval(columns, rows) {
                        assert_eq!(out.len(), rows.len());
                        assert_eq!(out.eval_type(), compiled.result_type());
                    }
                }
            }
        }
    }
}
