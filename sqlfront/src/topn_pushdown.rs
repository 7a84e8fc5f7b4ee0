//! TopN below the region fan-out: a physical optimizer rule that gives a Stratus scan under
//! a sort with a fetch (`ORDER BY ... LIMIT k`) a TopN in its DAG, so each region returns
//! at most `k` rows, its first in that order. DataFusion's sort stays above and picks the
//! first `k` of the regions' candidates, which hold every row of the answer.
//!
//! Pushed when every sort key is a column of the scan and its NULL placement is the
//! coprocessor's (NULL first ascending, last descending: `Datum::sql_cmp`), and the scan
//! returns plain rows (no aggregation pushed, no limit).

use std::sync::Arc;

use datafusion::common::config::ConfigOptions;
use datafusion::error::Result as DfResult;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::sorts::sort::SortExec;
use wire::coprocessor::{self as proto, ByItem};

use crate::table::{StratusScanExec, rewrite_up};

/// The rule (registered in every [`crate::FrontSession`]'s DataFusion session).
#[derive(Debug, Default)]
pub struct PushTopN;

impl PhysicalOptimizerRule for PushTopN {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        rewrite_up(plan, |p| Ok(push(p)))
    }

    fn name(&self) -> &str {
        "stratus_push_top_n"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

fn push(plan: &Arc<dyn ExecutionPlan>) -> Option<Arc<dyn ExecutionPlan>> {
    let sort = plan.downcast_ref::<SortExec>()?;
    let fetch = sort.fetch()?;
    let scan = StratusScanExec::under(sort.input())?;
    if !scan.accepts_pushdown() {
        return None;
    }
    let mut order_by = Vec::new();
    let mut texts = Vec::new();
    for key in sort.expr().iter() {
        let column = key.expr.downcast_ref::<Column>()?;
        let c = *scan.columns().get(column.index())?;
        let desc = key.options.descending;
        // The coprocessor puts NULL first ascending and last descending.
        if key.options.nulls_first == desc {
            return None;
        }
        order_by.push(ByItem {
            expr: Some(proto::Expr::column(c as u32)),
            desc,
        });
        let name = &scan.table().columns[c].name;
        texts.push(if desc {
            format!("{name} desc")
        } else {
            name.clone()
        });
    }
    let top_n = proto::TopN {
        order_by,
        limit: fetch as u64,
    };
    let text = format!("{} limit={fetch}", texts.join(", "));
    let pushed: Arc<dyn ExecutionPlan> = Arc::new(scan.with_top_n(top_n, text));
    Some(Arc::new(
        SortExec::new(sort.expr().clone(), pushed)
            .with_fetch(Some(fetch))
            .with_preserve_partitioning(sort.preserve_partitioning()),
    ))
}

#[cfg(test)]
mod tests {
    use crate::agg_pushdown::tests::plan;

    #[tokio::test]
    async fn order_by_with_a_limit_gives_each_region_a_top_n() {
        let p = plan("SELECT id, s FROM t WHERE g > 1 ORDER BY v DESC, id LIMIT 5").await;
        assert!(p.contains("top_n=[v desc, id limit=5]"), "{p}");
        assert!(p.contains("selection=["), "{p}");
        // DataFusion's sort still merges the regions' candidates.
        assert!(p.contains("SortExec: TopK(fetch=5)"), "{p}");
    }

    #[tokio::test]
    async fn a_null_placement_or_key_the_coprocessor_does_not_have_is_not_pushed() {
        for sql in [
            "SELECT id FROM t ORDER BY v NULLS LAST LIMIT 3",
            "SELECT id FROM t ORDER BY v DESC NULLS FIRST LIMIT 3",
            "SELECT id FROM t ORDER BY v + 1 LIMIT 3",
            "SELECT id FROM t ORDER BY v",
        ] {
            let p = plan(sql).await;
            assert!(!p.contains("top_n="), "{sql}: {p}");
        }
    }
}
