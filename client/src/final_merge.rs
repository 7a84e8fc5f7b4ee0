//! The final merge: what the client does to the rows of every page so that the caller gets
//! the answer of the whole DAG, not one partial result per page.
//!
//! Planned from the DAG's **root** executor ([`FinalMerge::plan`]):
//!
//! * aggregation (simple or hash): the pages carry partial rows (a region's, or a page's when
//!   a hash aggregation paged by group count); rows with equal group-by values are merged,
//!   column by column: COUNT adds, SUM adds (integer sums in 128 bits, an overflow of the
//!   64-bit output is an evaluation error, as on the server; NULL is "no rows"), MIN / MAX
//!   keep the extreme non-NULL value, AVG's two partial columns (count, sum) merge as a
//!   COUNT and a SUM (the caller divides). Groups keep the order of first appearance. Every
//!   group-by column must be among the returned columns (`output_offsets`);
//! * TopN: every page's rows (a heap's top rows, or source rows a pass-through TopN
//!   forwarded) are sorted by the order-by items (column references; SQL order, NULL first)
//!   and cut at the limit;
//! * Limit: the first `limit` rows;
//! * anything else (scan, selection, projection): rows concatenated in page order.
//!
//! An aggregation, TopN or Limit below a different root (e.g. a projection over a TopN)
//! cannot be merged from its output and is refused.

use std::cmp::Ordering;
use std::collections::HashMap;

use wire::codec::datum::encode_datum;
use wire::coprocessor::{DagRequest, ExecType, Executor, ExprType};
use wire::datum::Datum;

use crate::error::{Error, Result};

/// How one column of an aggregation's output merges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergeColumn {
    Count,
    Sum,
    Min,
    Max,
    /// A group-by value: rows with equal ones merge.
    GroupKey,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinalMerge {
    Concat,
    Limit(u64),
    /// Sort keys as (returned column, descending), then the limit.
    TopN {
        order_by: Vec<(usize, bool)>,
        limit: u64,
    },
    /// One entry per returned column.
    Aggregate(Vec<MergeColumn>),
}

fn exec_type(e: &Executor) -> Option<ExecType> {
    ExecType::from_i32(e.tp)
}

fn is_reducing(t: Option<ExecType>) -> bool {
    matches!(
        t,
        Some(ExecType::HashAgg | ExecType::SimpleAgg | ExecType::TopN | ExecType::Limit)
    )
}

fn unsupported(what: impl Into<String>) -> Error {
    Error::UnsupportedMerge { what: what.into() }
}

impl FinalMerge {
    pub fn plan(dag: &DagRequest) -> Result<FinalMerge> {
        let Some(root) = dag.executors.last() else {
            return Err(unsupported("a DAG without executors"));
        };
        let below = &dag.executors[..dag.executors.len() - 1];
        let root_tp = exec_type(root);
        if !is_reducing(root_tp) {
            if let Some(e) = below.iter().find(|e| is_reducing(exec_type(e))) {
                return Err(unsupported(format!(
                    "a reducing executor below a row-preserving root: executor_tp={} root_tp={}",
                    e.tp, root.tp
                )));
            }
            return Ok(FinalMerge::Concat);
        }
        // Where each column of the root's output ends up among the returned columns.
        let position = |col: usize| -> Option<usize> {
            if dag.output_offsets.is_empty() {
                Some(col)
            } else {
                dag.output_offsets.iter().position(|&o| o as usize == col)
            }
        };
        match root_tp {
            Some(ExecType::Limit) => Ok(FinalMerge::Limit(
                root.limit.as_ref().map_or(0, |l| l.limit),
            )),
            Some(ExecType::TopN) => {
                let top = root
                    .top_n
                    .as_ref()
                    .ok_or_else(|| unsupported("a TopN without top_n"))?;
                let mut order_by = Vec::with_capacity(top.order_by.len());
                for item in &top.order_by {
                    let expr = item
                        .expr
                        .as_ref()
                        .ok_or_else(|| unsupported("an empty order-by item"))?;
                    if ExprType::from_i32(expr.tp) != Some(ExprType::ColumnRef) {
                        return Err(unsupported(format!(
                            "a TopN order-by item that is not a column: expr_tp={}",
                            expr.tp
                        )));
                    }
                    let col = position(expr.column_offset as usize).ok_or_else(|| {
                        unsupported(format!(
                            "a TopN order-by column that is not returned: column={}",
                            expr.column_offset
                        ))
                    })?;
                    order_by.push((col, item.desc));
                }
                Ok(FinalMerge::TopN {
                    order_by,
                    limit: top.limit,
                })
            }
            _ => {
                let agg = root
                    .aggregation
                    .as_ref()
                    .ok_or_else(|| unsupported("an aggregation without aggregation"))?;
                let mut roles = Vec::new();
                for f in &agg.agg_func {
                    match ExprType::from_i32(f.tp) {
                        Some(ExprType::Count) => roles.push(MergeColumn::Count),
                        Some(ExprType::Sum) => roles.push(MergeColumn::Sum),
                        Some(ExprType::Min) => roles.push(MergeColumn::Min),
                        Some(ExprType::Max) => roles.push(MergeColumn::Max),
                        Some(ExprType::Avg) => {
                            roles.extend([MergeColumn::Count, MergeColumn::Sum]);
                        }
                        _ => {
                            return Err(unsupported(format!(
                                "an aggregate function: expr_tp={}",
                                f.tp
                            )));
                        }
                    }
                }
                roles.extend(agg.group_by.iter().map(|_| MergeColumn::GroupKey));
                if dag.output_offsets.is_empty() {
                    return Ok(FinalMerge::Aggregate(roles));
                }
                for (col, role) in roles.iter().enumerate() {
                    if *role == MergeColumn::GroupKey && position(col).is_none() {
                        return Err(unsupported(format!(
                            "a group-by column that is not returned: column={col}"
                        )));
                    }
                }
                dag.output_offsets
                    .iter()
                    .map(|&o| {
                        roles.get(o as usize).copied().ok_or_else(|| {
                            unsupported(format!("an output offset out of range: offset={o}"))
                        })
                    })
                    .collect::<Result<Vec<_>>>()
                    .map(FinalMerge::Aggregate)
            }
        }
    }

    /// The final rows from every page's rows, in page order.
    pub fn apply(&self, rows: Vec<Vec<Datum>>) -> Result<Vec<Vec<Datum>>> {
        match self {
            FinalMerge::Concat => Ok(rows),
            FinalMerge::Limit(n) => {
                let mut rows = rows;
                rows.truncate(usize::try_from(*n).unwrap_or(usize::MAX));
                Ok(rows)
            }
            FinalMerge::TopN { order_by, limit } => {
                let mut rows = rows;
                rows.sort_by(|a, b| compare(a, b, order_by));
                rows.truncate(usize::try_from(*limit).unwrap_or(usize::MAX));
                Ok(rows)
            }
            FinalMerge::Aggregate(roles) => merge_aggregates(roles, rows),
        }
    }
}

/// SQL order of two rows by `order_by` ((column, descending) pairs; a missing column is
/// NULL).
pub(crate) fn compare(a: &[Datum], b: &[Datum], order_by: &[(usize, bool)]) -> Ordering {
    for &(col, desc) in order_by {
        let (x, y) = (
            a.get(col).unwrap_or(&Datum::Null),
            b.get(col).unwrap_or(&Datum::Null),
        );
        let o = x.sql_cmp(y);
        let o = if desc { o.reverse() } else { o };
        if o.is_ne() {
            return o;
        }
    }
    Ordering::Equal
}

/// A SUM being merged: integers in 128 bits until the end.
#[derive(Debug, Clone)]
enum SumAcc {
    Null,
    Int(i128),
    UInt(u128),
    Real(f64),
}

fn merge_aggregates(roles: &[MergeColumn], rows: Vec<Vec<Datum>>) -> Result<Vec<Vec<Datum>>> {
    let mut groups: HashMap<Vec<u8>, usize> = HashMap::new();
    // Per group: the merged row, and the sum accumulators by column.
    let mut merged: Vec<(Vec<Datum>, Vec<SumAcc>)> = Vec::new();
    for row in rows {
        if row.len() != roles.len() {
            return Err(unsupported(format!(
                "a partial row of another width: width={} expected={}",
                row.len(),
                roles.len()
            )));
        }
        let mut key = Vec::new();
        for (d, role) in row.iter().zip(roles) {
            if *role == MergeColumn::GroupKey {
                encode_datum(&mut key, d, false);
            }
        }
        let idx = match groups.get(&key) {
            Some(&i) => i,
            None => {
                groups.insert(key, merged.len());
                let sums = vec![SumAcc::Null; roles.len()];
                merged.push((row.iter().map(|_| Datum::Null).collect(), sums));
                let i = merged.len() - 1;
                for (c, role) in roles.iter().enumerate() {
                    match role {
                        MergeColumn::Count => merged[i].0[c] = Datum::Int(0),
                        MergeColumn::GroupKey => merged[i].0[c] = row[c].clone(),
                        _ => {}
                    }
                }
                i
            }
        };
        let (acc, sums) = &mut merged[idx];
        for (c, (d, role)) in row.into_iter().zip(roles).enumerate() {
            match role {
                MergeColumn::GroupKey => {}
                MergeColumn::Count => {
                    let (Datum::Int(total), Datum::Int(n)) = (&acc[c], &d) else {
                        return Err(unsupported(format!(
                            "a COUNT partial that is not an integer: {d:?}"
                        )));
                    };
                    acc[c] = Datum::Int(total + n);
                }
                MergeColumn::Sum => sums[c] = add(&sums[c], d)?,
                MergeColumn::Min | MergeColumn::Max => {
                    let better = match d.sql_cmp(&acc[c]) {
                        _ if d.is_null() => false,
                        _ if acc[c].is_null() => true,
                        Ordering::Less => *role == MergeColumn::Min,
                        Ordering::Greater => *role == MergeColumn::Max,
                        Ordering::Equal => false,
                    };
                    if better {
                        acc[c] = d;
                    }
                }
            }
        }
    }
    merged
        .into_iter()
        .map(|(mut row, sums)| {
            for (c, role) in roles.iter().enumerate() {
                if *role == MergeColumn::Sum {
                    row[c] = finish_sum(&sums[c])?;
                }
            }
            Ok(row)
        })
        .collect()
}

fn add(acc: &SumAcc, d: Datum) -> Result<SumAcc> {
    Ok(match (acc, d) {
        (acc, Datum::Null) => acc.clone(),
        (SumAcc::Null, Datum::Int(v)) => SumAcc::Int(v.into()),
        (SumAcc::Null, Datum::UInt(v)) => SumAcc::UInt(v.into()),
        (SumAcc::Null, Datum::Real(v)) => SumAcc::Real(v),
        (SumAcc::Int(a), Datum::Int(v)) => SumAcc::Int(a + i128::from(v)),
        (SumAcc::UInt(a), Datum::UInt(v)) => SumAcc::UInt(a + u128::from(v)),
        (SumAcc::Real(a), Datum::Real(v)) => SumAcc::Real(a + v),
        (acc, d) => {
            return Err(unsupported(format!(
                "SUM partials of different types: sum={acc:?} partial={d:?}"
            )));
        }
    })
}

fn finish_sum(acc: &SumAcc) -> Result<Datum> {
    let overflow = |s: String| Error::Eval {
        code: wire::coprocessor::eval_error_code::OVERFLOW,
        message: format!("value out of range: sum={s}"),
    };
    Ok(match acc {
        SumAcc::Null => Datum::Null,
        SumAcc::Int(s) => Datum::Int(i64::try_from(*s).map_err(|_| overflow(s.to_string()))?),
        SumAcc::UInt(s) => Datum::UInt(u64::try_from(*s).map_err(|_| overflow(s.to_string()))?),
        SumAcc::Real(s) => Datum::Real(*s),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::coprocessor::{Aggregation, ByItem, Expr, Limit, TopN};

    fn exec(tp: ExecType) -> Executor {
        Executor {
            tp: tp as i32,
            ..Executor::default()
        }
    }

    fn dag(executors: Vec<Executor>, output_offsets: Vec<u32>) -> DagRequest {
        DagRequest {
            executors,
            output_offsets,
            ..DagRequest::default()
        }
    }

    fn agg(tp: ExecType, funcs: Vec<ExprType>, group_by: usize) -> Executor {
        Executor {
            aggregation: Some(Aggregation {
                agg_func: funcs
                    .into_iter()
                    .map(|f| Expr::agg(f, Expr::column(0)))
                    .collect(),
                group_by: (0..group_by as u32).map(Expr::column).collect(),
            }),
            ..exec(tp)
        }
    }

    use Datum::{Int, Null, Real};

    #[test]
    fn simple_count_and_sum_partials_add_up() {
        let d = dag(
            vec![
                exec(ExecType::TableScan),
                agg(ExecType::SimpleAgg, vec![ExprType::Count, ExprType::Sum], 0),
            ],
            vec![],
        );
        let m = FinalMerge::plan(&d).unwrap();
        assert_eq!(
            m,
            FinalMerge::Aggregate(vec![MergeColumn::Count, MergeColumn::Sum])
        );
        let rows = vec![
            vec![Int(2), Int(10)],
            vec![Int(3), Null],
            vec![Int(1), Int(-4)],
        ];
        assert_eq!(m.apply(rows).unwrap(), vec![vec![Int(6), Int(6)]]);
        assert_eq!(m.apply(vec![]).unwrap(), Vec::<Vec<Datum>>::new());
    }

    #[test]
    fn a_sum_that_leaves_64_bits_is_an_overflow() {
        let m = FinalMerge::Aggregate(vec![MergeColumn::Sum]);
        let e = m
            .apply(vec![vec![Int(i64::MAX)], vec![Int(1)]])
            .unwrap_err();
        assert!(matches!(e, Error::Eval { .. }), "{e}");
        // Partials may overflow on the way and come back.
        let ok = m
            .apply(vec![vec![Int(i64::MAX)], vec![Int(1)], vec![Int(-2)]])
            .unwrap();
        assert_eq!(ok, vec![vec![Int(i64::MAX - 1)]]);
    }

    #[test]
    fn hash_aggregation_partials_merge_by_group() {
        let d = dag(
            vec![
                exec(ExecType::TableScan),
                agg(
                    ExecType::HashAgg,
                    vec![ExprType::Count, ExprType::Min, ExprType::Max, ExprType::Avg],
                    1,
                ),
            ],
            vec![],
        );
        let m = FinalMerge::plan(&d).unwrap();
        use MergeColumn::*;
        assert_eq!(
            m,
            FinalMerge::Aggregate(vec![Count, Min, Max, Count, Sum, GroupKey])
        );
        let rows = vec![
            vec![Int(1), Int(5), Int(5), Int(1), Real(5.0), Int(1)],
            vec![Int(2), Int(3), Int(9), Int(2), Real(12.0), Int(2)],
            vec![Int(2), Null, Int(7), Int(2), Real(1.5), Int(1)],
        ];
        assert_eq!(
            m.apply(rows).unwrap(),
            vec![
                vec![Int(3), Int(5), Int(7), Int(3), Real(6.5), Int(1)],
                vec![Int(2), Int(3), Int(9), Int(2), Real(12.0), Int(2)],
            ]
        );
    }

    #[test]
    fn group_by_columns_must_be_returned() {
        let d = dag(
            vec![
                exec(ExecType::TableScan),
                agg(ExecType::HashAgg, vec![ExprType::Count], 1),
            ],
            vec![0],
        );
        assert!(matches!(
            FinalMerge::plan(&d),
            Err(Error::UnsupportedMerge { .. })
        ));
        let d = dag(
            vec![
                exec(ExecType::TableScan),
                agg(ExecType::HashAgg, vec![ExprType::Count], 1),
            ],
            vec![1, 0],
        );
        assert_eq!(
            FinalMerge::plan(&d).unwrap(),
            FinalMerge::Aggregate(vec![MergeColumn::GroupKey, MergeColumn::Count])
        );
    }

    #[test]
    fn top_n_resorts_every_page_and_cuts_at_the_limit() {
        let top = Executor {
            top_n: Some(TopN {
                order_by: vec![ByItem {
                    expr: Some(Expr::column(1)),
                    desc: true,
                }],
                limit: 3,
            }),
            ..exec(ExecType::TopN)
        };
        let d = dag(vec![exec(ExecType::TableScan), top], vec![]);
        let m = FinalMerge::plan(&d).unwrap();
        let rows: Vec<Vec<Datum>> = [4, 9, 1, 7, 3, 8]
            .iter()
            .map(|&v| vec![Int(v * 10), Int(v)])
            .collect();
        let got: Vec<Datum> = m
            .apply(rows)
            .unwrap()
            .into_iter()
            .map(|r| r[1].clone())
            .collect();
        assert_eq!(got, vec![Int(9), Int(8), Int(7)]);
    }

    #[test]
    fn limit_keeps_the_first_rows_and_plain_scans_concatenate() {
        let limit = Executor {
            limit: Some(Limit { limit: 2 }),
            ..exec(ExecType::Limit)
        };
        let m =
            FinalMerge::plan(&dag(vec![exec(ExecType::TableScan), limit.clone()], vec![])).unwrap();
        let rows = vec![vec![Int(1)], vec![Int(2)], vec![Int(3)]];
        assert_eq!(m.apply(rows.clone()).unwrap(), rows[..2].to_vec());
        let scan = FinalMerge::plan(&dag(vec![exec(ExecType::TableScan)], vec![])).unwrap();
        assert_eq!(scan.apply(rows.clone()).unwrap(), rows);
        let bad = dag(
            vec![exec(ExecType::TableScan), limit, exec(ExecType::Projection)],
            vec![],
        );
        assert!(matches!(
            FinalMerge::plan(&bad),
            Err(Error::UnsupportedMerge { .. })
        ));
    }
}
