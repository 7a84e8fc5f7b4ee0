//! Partial aggregation below the region fan-out: a physical optimizer rule that moves
//! DataFusion's first aggregation phase over a Stratus scan into the scan's DAG, so each
//! region's coprocessor returns partial aggregates (one row per group it holds) instead of its
//! rows, the client's final merge combines the regions, and DataFusion's final phase finishes
//! (AVG from its count and sum, then HAVING, ORDER BY and everything above).
//!
//! The rule rewrites `AggregateExec(Partial)` (or `Single`, which it splits into a pushed
//! partial phase and a `Final` one) whose input is a `StratusScanExec` (directly or through a
//! round-robin repartition) when every part has a coprocessor equivalent:
//!
//! * group by plain columns (no grouping sets);
//! * `count`, `sum`, `min`, `max`, `avg` of a column, of a column cast to `Int64` or
//!   `Float64` (DataFusion widens `INT` for `SUM` and numbers for `AVG`; the coprocessor sums
//!   integers exactly in 128 bits), or of a literal for `count` (`COUNT(*)`); no `DISTINCT`,
//!   no `FILTER`, no `ORDER BY` inside the aggregate;
//! * a scan with no pushed limit (a limit would aggregate the first rows of each region);
//! * partial results of types the coprocessor's datums convert to.
//!
//! The coprocessor emits each aggregate's partial columns (AVG: count, then sum), then the
//! group columns; DataFusion's partial phase emits the group columns, then the states. The
//! pushed scan maps one onto the other.

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::error::Result as DfResult;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::aggregate::AggregateFunctionExpr;
use datafusion::physical_expr::expressions::{CastExpr, Column, Literal};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use wire::coprocessor::{self as proto, ExecType, Executor, ExprType};

use crate::arrow_rows;
use crate::table::{PartialAggregation, StratusScanExec, rewrite_up};

/// The rule (registered in every [`crate::FrontSession`]'s DataFusion session).
#[derive(Debug, Default)]
pub struct PushAggregates;

impl PhysicalOptimizerRule for PushAggregates {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        rewrite_up(plan, push)
    }

    fn name(&self) -> &str {
        "stratus_push_partial_aggregation"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// `plan` with its partial aggregation pushed into the scan, if it can be.
fn push(plan: &Arc<dyn ExecutionPlan>) -> DfResult<Option<Arc<dyn ExecutionPlan>>> {
    let Some(agg) = plan.downcast_ref::<AggregateExec>() else {
        return Ok(None);
    };
    let mode = *agg.mode();
    if !matches!(mode, AggregateMode::Partial | AggregateMode::Single) {
        return Ok(None);
    }
    let Some(scan) = StratusScanExec::under(agg.input()) else {
        return Ok(None);
    };
    if !scan.accepts_pushdown() || agg.filter_expr().iter().any(Option::is_some) {
        return Ok(None);
    }
    let partial_schema = match mode {
        AggregateMode::Partial => agg.schema(),
        _ => AggregateExec::try_new(
            AggregateMode::Partial,
            agg.group_expr().clone(),
            agg.aggr_expr().to_vec(),
            agg.filter_expr().to_vec(),
            agg.input().clone(),
            agg.input_schema(),
        )?
        .schema(),
    };
    if !partial_schema
        .fields()
        .iter()
        .all(|f| arrow_rows::convertible(f.data_type()))
    {
        return Ok(None);
    }
    let Some(partial) = plan_partial(scan, agg) else {
        return Ok(None);
    };
    if partial.sources.len() != partial_schema.fields().len() {
        return Ok(None);
    }
    let pushed: Arc<dyn ExecutionPlan> =
        Arc::new(scan.with_partial_aggregation(partial, partial_schema));
    Ok(Some(match mode {
        AggregateMode::Partial => pushed,
        _ => Arc::new(AggregateExec::try_new(
            AggregateMode::Final,
            agg.group_expr().as_final(),
            agg.aggr_expr().to_vec(),
            agg.filter_expr().to_vec(),
            pushed,
            agg.input_schema(),
        )?),
    }))
}

/// The table column a scan output column is.
fn table_column(scan: &StratusScanExec, e: &Arc<dyn PhysicalExpr>) -> Option<usize> {
    let c = e.downcast_ref::<Column>()?;
    scan.columns().get(c.index()).copied()
}

/// The coprocessor argument of an aggregate: a column (also through a widening cast), or
/// the constant 1 of `COUNT(*)`.
fn argument(
    scan: &StratusScanExec,
    kind: ExprType,
    e: &Arc<dyn PhysicalExpr>,
) -> Option<(proto::Expr, String)> {
    if let Some(c) = table_column(scan, e) {
        return Some((
            proto::Expr::column(c as u32),
            scan.table().columns[c].name.clone(),
        ));
    }
    if let Some(cast) = e.downcast_ref::<CastExpr>()
        && matches!(kind, ExprType::Sum | ExprType::Avg | ExprType::Count)
    {
        let c = table_column(scan, cast.expr())?;
        let ty = scan.table().columns[c].ty;
        // Only a widening cast: the coprocessor aggregates the stored values, so a cast
        // that changes them (a DOUBLE to BIGINT truncates) must stay in DataFusion.
        let widening = match cast.cast_type() {
            DataType::Int64 => ty.is_integer(),
            DataType::Float64 => ty.is_numeric(),
            _ => false,
        };
        return widening.then(|| {
            (
                proto::Expr::column(c as u32),
                scan.table().columns[c].name.clone(),
            )
        });
    }
    if kind == ExprType::Count
        && let Some(lit) = e.downcast_ref::<Literal>()
        && !lit.value().is_null()
    {
        return Some((proto::Expr::int(1), "1".into()));
    }
    None
}

/// The coprocessor's Aggregation for `agg` over `scan`, and where each of DataFusion's
/// partial fields is in its rows; `None` when a part has no coprocessor equivalent.
fn plan_partial(scan: &StratusScanExec, agg: &AggregateExec) -> Option<PartialAggregation> {
    let group_by = agg.group_expr();
    if !group_by.is_single() || !group_by.null_expr().is_empty() {
        return None;
    }
    let mut groups = Vec::new();
    let mut group_names = Vec::new();
    for (e, _) in group_by.expr() {
        let c = table_column(scan, e)?;
        groups.push(proto::Expr::column(c as u32));
        group_names.push(scan.table().columns[c].name.clone());
    }
    let mut funcs = Vec::new();
    let mut texts = Vec::new();
    // Partial columns each aggregate takes in the coprocessor's row.
    let mut widths = Vec::new();
    for a in agg.aggr_expr() {
        let (kind, width) = function(a)?;
        let [arg] = a.expressions().try_into().ok()?;
        let (expr, arg_text) = argument(scan, kind, &arg)?;
        if a.state_fields().ok()?.len() != width {
            return None;
        }
        funcs.push(proto::Expr::agg(kind, expr));
        texts.push(format!("{}({arg_text})", a.fun().name()));
        widths.push(width);
    }
    // A grouping with no aggregate (DataFusion's rewrite of `COUNT(DISTINCT g)`) stays in
    // DataFusion: the coprocessor's aggregations always compute a function.
    if funcs.is_empty() {
        return None;
    }
    let partial_columns: usize = widths.iter().sum();
    // DataFusion's order: groups, then each aggregate's states.
    let mut sources: Vec<usize> = (0..groups.len()).map(|g| partial_columns + g).collect();
    sources.extend(0..partial_columns);
    let tp = if groups.is_empty() {
        ExecType::SimpleAgg
    } else {
        ExecType::HashAgg
    };
    let mut text = texts.join(", ");
    if !group_names.is_empty() {
        text.push_str(&format!(" group_by=[{}]", group_names.join(", ")));
    }
    Some(PartialAggregation {
        executor: Executor {
            tp: tp as i32,
            aggregation: Some(proto::Aggregation {
                group_by: groups,
                agg_func: funcs,
            }),
            ..Executor::default()
        },
        sources,
        text,
    })
}

/// The coprocessor function of an aggregate and how many partial columns it emits.
fn function(a: &AggregateFunctionExpr) -> Option<(ExprType, usize)> {
    if a.is_distinct() || !a.order_bys().is_empty() || a.ignore_nulls() {
        return None;
    }
    Some(match a.fun().name() {
        "count" => (ExprType::Count, 1),
        "sum" => (ExprType::Sum, 1),
        "min" => (ExprType::Min, 1),
        "max" => (ExprType::Max, 1),
        "avg" => (ExprType::Avg, 2),
        _ => return None,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::table::{StatementContext, StratusTable};
    use client::sql::{SqlType, TableSchema};
    use client::{Client, ClientConfig};
    use datafusion::physical_plan::displayable;

    fn table() -> TableSchema {
        crate::test_table(
            1,
            &[
                ("id", SqlType::BigInt),
                ("g", SqlType::Int),
                ("v", SqlType::Double),
                ("s", SqlType::Varchar),
            ],
        )
    }

    /// The physical plan of `sql` over table `t` (planned only: nothing is sent anywhere).
    pub(crate) async fn plan(sql: &str) -> String {
        let client: &'static Client = Box::leak(Box::new(
            Client::new(ClientConfig::new(["http://127.0.0.1:1".to_string()])).unwrap(),
        ));
        let ctx = crate::session::datafusion_context();
        let stmt = Arc::new(StatementContext::new(
            client,
            client::Variables::default(),
            1,
        ));
        ctx.register_table("t", Arc::new(StratusTable::new(table(), stmt)))
            .unwrap();
        let plan = ctx
            .sql(sql)
            .await
            .unwrap()
            .create_physical_plan()
            .await
            .unwrap();
        displayable(plan.as_ref()).indent(true).to_string()
    }

    #[tokio::test]
    async fn a_grouped_aggregate_runs_its_partial_phase_in_the_coprocessor() {
        let p = plan("SELECT g, COUNT(*), SUM(v), MIN(s), AVG(g) FROM t WHERE v > 1 GROUP BY g HAVING COUNT(*) > 2").await;
        assert!(
            p.contains("partial_aggregation=[count(1), sum(v), min(s), avg(g) group_by=[g]]"),
            "{p}"
        );
        assert!(p.contains("selection=[(`v` > 1.0)]"), "{p}");
        assert!(
            !p.contains("mode=Partial") && !p.contains("mode=Single"),
            "{p}"
        );
        assert!(p.contains("AggregateExec: mode=Final"), "{p}");
    }

    #[tokio::test]
    async fn an_aggregate_without_groups_is_pushed_as_a_simple_aggregation() {
        let p = plan("SELECT COUNT(v), MAX(id) FROM t").await;
        assert!(p.contains("partial_aggregation=[count(v), max(id)]"), "{p}");
    }

    #[tokio::test]
    async fn what_the_coprocessor_cannot_compute_stays_in_datafusion() {
        for sql in [
            "SELECT COUNT(DISTINCT g) FROM t",
            "SELECT g, SUM(v) FROM t WHERE abs(v) > 1 GROUP BY g",
            "SELECT g + 1, COUNT(*) FROM t GROUP BY g + 1",
            "SELECT SUM(v * 2) FROM t",
            "SELECT SUM(CAST(v AS BIGINT)) FROM t",
        ] {
            let p = plan(sql).await;
            assert!(!p.contains("partial_aggregation"), "{sql}: {p}");
        }
    }
}
