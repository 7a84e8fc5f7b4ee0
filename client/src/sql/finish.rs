//! Running a [`SelectPlan`] and finishing its rows in the client: the DAG runs through
//! [`Session::coprocessor`] over the table's record range (every region, with the final merge of
//! partial aggregates, TopN and Limit), then [`finish_rows`] turns the merged rows into slots
//! (AVG = sum / count), sorts them by `ORDER BY` (NULL first ascending, as MySQL), cuts at
//! `LIMIT` and projects the output columns in select-list order.

use wire::datum::Datum;

use super::select::{AggKind, SelectPlan, Slots};
use super::{QueryResult, Result, SqlError};
use crate::variables::Session;

/// Runs `plan` through `session` (its variables choose the server or the delegate path, the
/// paging sizes and the cache use) at a fresh timestamp, and finishes the rows.
pub async fn run(session: &Session<'_>, plan: &SelectPlan) -> Result<QueryResult> {
    if plan.limit == Some(0) {
        return Ok(QueryResult {
            columns: plan.columns.clone(),
            ..QueryResult::default()
        });
    }
    let ts = session.client.current_ts().await?;
    let r = session
        .coprocessor(&plan.dag, plan.ranges.clone(), ts)
        .await?;
    Ok(QueryResult {
        columns: plan.columns.clone(),
        rows: finish_rows(plan, r.rows)?,
        affected_rows: 0,
        warnings: r.warnings,
    })
}

/// The final rows from the merged rows of the DAG.
pub fn finish_rows(plan: &SelectPlan, rows: Vec<Vec<Datum>>) -> Result<Vec<Vec<Datum>>> {
    let mut slots: Vec<Vec<Datum>> = match &plan.slots {
        Slots::Scan => rows,
        Slots::Aggregate { aggs, groups } => {
            let width: usize = aggs
                .iter()
                .map(|a| if a.kind == AggKind::Avg { 2 } else { 1 })
                .sum::<usize>()
                + groups;
            let mut out = Vec::with_capacity(rows.len());
            for row in rows {
                if row.len() != width {
                    return Err(SqlError::Client(crate::error::Error::UnsupportedMerge {
                        what: format!(
                            "an aggregate row of the wrong width: expected={width} found={}",
                            row.len()
                        ),
                    }));
                }
                let mut it = row.into_iter();
                let mut slot = Vec::with_capacity(aggs.len() + groups);
                for a in aggs {
                    let first = it.next().unwrap_or(Datum::Null);
                    if a.kind == AggKind::Avg {
                        let sum = it.next().unwrap_or(Datum::Null);
                        slot.push(avg(&first, &sum));
                    } else {
                        slot.push(first);
                    }
                }
                slot.extend(it);
                out.push(slot);
            }
            // An aggregate without GROUP BY over no rows is one row: COUNT 0, the rest NULL.
            if out.is_empty() && *groups == 0 {
                out.push(
                    aggs.iter()
                        .map(|a| match a.kind {
                            AggKind::Count => Datum::Int(0),
                            _ => Datum::Null,
                        })
                        .collect(),
                );
            }
            out
        }
    };
    if !plan.order_by.is_empty() {
        slots.sort_by(|a, b| crate::final_merge::compare(a, b, &plan.order_by));
    }
    if let Some(n) = plan.limit {
        slots.truncate(usize::try_from(n).unwrap_or(usize::MAX));
    }
    Ok(slots
        .into_iter()
        .map(|s| plan.outputs.iter().map(|&o| s[o].clone()).collect())
        .collect())
}

fn avg(count: &Datum, sum: &Datum) -> Datum {
    let n = match count {
        Datum::Int(n) if *n > 0 => *n as f64,
        _ => return Datum::Null,
    };
    match sum {
        Datum::Int(s) => Datum::Real(*s as f64 / n),
        Datum::UInt(s) => Datum::Real(*s as f64 / n),
        Datum::Real(s) => Datum::Real(s / n),
        _ => Datum::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::select::tests::select;

    #[test]
    fn avg_is_sum_over_count_and_order_by_sorts_aggregates() {
        let p =
            select("select g, avg(v), count(*) as n from t group by g order by n desc, g").unwrap();
        // Merged rows: avg's (count, sum), count(*), group g.
        let rows = vec![
            vec![
                Datum::Int(2),
                Datum::Real(3.0),
                Datum::Int(2),
                Datum::Int(10),
            ],
            vec![Datum::Int(0), Datum::Null, Datum::Int(5), Datum::Int(20)],
            vec![Datum::Int(4), Datum::Real(2.0), Datum::Int(5), Datum::Null],
        ];
        let out = finish_rows(&p, rows).unwrap();
        assert_eq!(
            out,
            vec![
                vec![Datum::Null, Datum::Real(0.5), Datum::Int(5)],
                vec![Datum::Int(20), Datum::Null, Datum::Int(5)],
                vec![Datum::Int(10), Datum::Real(1.5), Datum::Int(2)],
            ]
        );
    }

    #[test]
    fn aggregates_over_no_rows_are_one_row_of_zero_count_and_nulls() {
        let p = select("select count(*), sum(v), avg(g) from t").unwrap();
        let out = finish_rows(&p, Vec::new()).unwrap();
        assert_eq!(out, vec![vec![Datum::Int(0), Datum::Null, Datum::Null]]);
        let p = select("select g, count(*) from t group by g").unwrap();
        assert!(finish_rows(&p, Vec::new()).unwrap().is_empty());
    }

    #[test]
    fn plain_rows_are_sorted_cut_and_projected() {
        let p = select("select s, id from t order by g desc limit 2").unwrap();
        let row = |id: i64, g: Option<i64>| {
            vec![
                Datum::Int(id),
                g.map_or(Datum::Null, Datum::Int),
                Datum::Null,
                Datum::Bytes(vec![b'a' + id as u8]),
            ]
        };
        let out = finish_rows(&p, vec![row(1, None), row(2, Some(5)), row(3, Some(7))]).unwrap();
        assert_eq!(
            out,
            vec![
                vec![Datum::Bytes(b"d".to_vec()), Datum::Int(3)],
                vec![Datum::Bytes(b"c".to_vec()), Datum::Int(2)],
            ]
        );
    }
}
