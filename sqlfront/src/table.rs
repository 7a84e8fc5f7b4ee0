//! A Stratus table as a DataFusion `TableProvider`, and its scan: one coprocessor request
//! over the table's regions, with what DataFusion pushed into it (filters, projection,
//! limit) in each region's DAG; when an equality binds a secondary index's leading columns
//! (`client::sql::index::choose`), an index lookup first, whose handles are then the only
//! rows the scan reads.
//!
//! The DAG of a scan: `TableScan` (every column, scan column `i` = table column `i`) →
//! `Selection` (the pushed filters, [`crate::pushdown`]) → `Projection` (the columns
//! DataFusion reads, when fewer than all) → `Limit` (when DataFusion gave one and every
//! filter was pushed). The request goes through `client::Session::coprocessor`, so the
//! session's variables choose the server path or the delegate path, and the paging driver,
//! the coprocessor cache, lock resolution, region retries and node selection do what they do
//! for every request.
//!
//! Inside a transaction that wrote to the table, the scan also overlays the transaction's
//! buffered rows on what the regions return (`client::sql::transaction::overlay`). Then the
//! regions return whole rows (the overlay needs the handle), a limit is not pushed (a row the
//! transaction deleted may be among the first), the filters are pushed but DataFusion checks
//! them again (`Inexact`: the buffered rows did not pass through the coprocessor), and neither
//! aggregation nor TopN is pushed (they would miss the buffered rows).

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use client::Variables;
use client::paging::Client;
use client::sql::TableSchema;
use client::sql::conditions::scan_executors;
use client::sql::explain::{RegionExplain, describe_dag, describe_regions};
use client::sql::transaction::{PendingRow, overlay};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::Session as DfSession;
use datafusion::common::DFSchema;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::datasource::{TableProvider, TableType};
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::TaskContext;
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_expr::expressions::Column as PhysicalColumn;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::coop::CooperativeExec;
use datafusion::physical_plan::execution_plan::{
    Boundedness, ChildrenPropertiesMode, EmissionType, ReplaceChildrenOptions,
};
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
    SendableRecordBatchStream,
};
use parking_lot::Mutex;
use wire::coprocessor::{self as proto, DagRequest, ExecType, Executor};

use crate::arrow_rows;
use crate::error::FrontError;
use crate::pushdown::{self, PushedFilters};

/// What every scan of one statement shares: the cluster, the connection's variables, the
/// statement's read timestamp, the rows its transaction buffered, and where the scans leave
/// their warnings.
#[derive(Debug)]
pub struct StatementContext {
    pub client: &'static Client,
    pub vars: Variables,
    pub start_ts: u64,
    /// The open transaction's buffered rows, by table id (tables it wrote to only).
    pending: std::collections::HashMap<i64, Arc<Vec<PendingRow>>>,
    warnings: Mutex<Vec<String>>,
    /// What each scan did, in the order they finished: kept only for `EXPLAIN ANALYZE`
    /// ([`StatementContext::reporting_scans`]), so a plain query describes nothing.
    scans: Option<Mutex<Vec<ScanReport>>>,
}

/// What one scan did, for `EXPLAIN ANALYZE`: its DAG, and per region where its pages ran,
/// why, how many rows they returned and how long they took.
#[derive(Debug, Clone)]
pub struct ScanReport {
    pub table: String,
    /// A line per DAG executor (`client::sql::explain::describe_dag`).
    pub executors: Vec<String>,
    /// A row per region, in the order the regions answered.
    pub regions: Vec<RegionExplain>,
    /// Body bytes the scan moved between zones, retried answers included.
    pub cross_zone_bytes: u64,
}

impl StatementContext {
    pub fn new(client: &'static Client, vars: Variables, start_ts: u64) -> StatementContext {
        StatementContext {
            client,
            vars,
            start_ts,
            pending: Default::default(),
            warnings: Mutex::new(Vec::new()),
            scans: None,
        }
    }

    /// This context with each scan reporting what it did ([`StatementContext::take_scans`]).
    pub fn reporting_scans(mut self) -> StatementContext {
        self.scans = Some(Mutex::new(Vec::new()));
        self
    }

    /// What the statement's scans did, in the order they finished (none unless
    /// [`StatementContext::reporting_scans`]).
    pub fn take_scans(&self) -> Vec<ScanReport> {
        self.scans
            .as_ref()
            .map(|s| std::mem::take(&mut *s.lock()))
            .unwrap_or_default()
    }

    /// This context with `rows` as the transaction's buffered rows of table `table_id`.
    pub fn with_pending(mut self, table_id: i64, rows: Vec<PendingRow>) -> StatementContext {
        if !rows.is_empty() {
            self.pending.insert(table_id, Arc::new(rows));
        }
        self
    }

    /// The warnings the statement's scans left (node selection's), each once.
    pub fn take_warnings(&self) -> Vec<String> {
        let mut w = std::mem::take(&mut *self.warnings.lock());
        let mut seen = std::collections::HashSet::new();
        w.retain(|m| seen.insert(m.clone()));
        w
    }
}

/// A Stratus table for one statement.
#[derive(Debug)]
pub struct StratusTable {
    table: TableSchema,
    schema: SchemaRef,
    /// The transaction's buffered rows of this table (module docs).
    pending: Option<Arc<Vec<PendingRow>>>,
    ctx: Arc<StatementContext>,
}

impl StratusTable {
    pub fn new(table: TableSchema, ctx: Arc<StatementContext>) -> StratusTable {
        StratusTable {
            schema: arrow_rows::table_schema(&table),
            pending: ctx.pending.get(&table.id).cloned(),
            table,
            ctx,
        }
    }
}

#[async_trait]
impl TableProvider for StratusTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DfResult<Vec<TableProviderFilterPushDown>> {
        Ok(filters
            .iter()
            .map(|f| {
                if !pushdown::pushable(&self.table, f) {
                    TableProviderFilterPushDown::Unsupported
                } else if self.pending.is_some() {
                    TableProviderFilterPushDown::Inexact
                } else {
                    TableProviderFilterPushDown::Exact
                }
            })
            .collect())
    }

    async fn scan(
        &self,
        state: &dyn DfSession,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let columns: Vec<usize> = match projection {
            Some(p) => p.clone(),
            None => (0..self.table.columns.len()).collect(),
        };
        let (pushed, left) = pushdown::push_filters(&self.table, filters);
        if !left.is_empty() {
            return self.scan_and_filter(state, columns, pushed, left);
        }
        // DataFusion passes only the filters this table called exact, so the limit holds
        // for the rows the regions return (never with an overlay: module docs).
        let exact = self.pending.is_none();
        let schema = Arc::new(self.schema.project(&columns)?);
        Ok(Arc::new(StratusScanExec::new(
            self.table.clone(),
            columns,
            schema,
            pushed,
            limit.filter(|_| exact),
            self.pending.clone(),
            self.ctx.clone(),
        )))
    }
}

impl StratusTable {
    /// The scan when some of the filters DataFusion passed could not be pushed after all:
    /// DataFusion was told they were exact (it asks before its simplifier rewrites them, and
    /// a rewritten filter may no longer plan, e.g. `a IN (1, NULL)`), so it will not evaluate
    /// them itself. The scan reads every column, a `FilterExec` evaluates what is `left`, and
    /// a projection keeps `columns`; no limit is pushed.
    fn scan_and_filter(
        &self,
        state: &dyn DfSession,
        columns: Vec<usize>,
        pushed: PushedFilters,
        left: Vec<Expr>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let every: Vec<usize> = (0..self.table.columns.len()).collect();
        let scan = Arc::new(StratusScanExec::new(
            self.table.clone(),
            every,
            self.schema.clone(),
            pushed,
            None,
            self.pending.clone(),
            self.ctx.clone(),
        ));
        let df_schema = DFSchema::try_from(self.schema.as_ref().clone())?;
        let Some(predicate) = conjunction(left) else {
            return Ok(scan);
        };
        let predicate = state.create_physical_expr(predicate, &df_schema)?;
        let filter = Arc::new(FilterExec::try_new(predicate, scan)?);
        let kept = columns.iter().map(|&c| {
            let name = self.table.columns[c].name.clone();
            let expr: Arc<dyn PhysicalExpr> = Arc::new(PhysicalColumn::new(&name, c));
            (expr, name)
        });
        Ok(Arc::new(ProjectionExec::try_new(kept, filter)?))
    }
}

/// The scan of one Stratus table: one partition, one coprocessor request (after an index
/// lookup, when the scan chose an index).
#[derive(Debug)]
pub struct StratusScanExec {
    table: TableSchema,
    /// The table's columns DataFusion reads, in its order.
    columns: Vec<usize>,
    schema: SchemaRef,
    pushed: PushedFilters,
    limit: Option<usize>,
    dag: DagRequest,
    /// Set when a partial aggregation was pushed into the DAG (`agg_pushdown`): what it
    /// computes, and for each output field the position of its value in a result row.
    partial: Option<PartialAggregation>,
    /// Set when a TopN was pushed into the DAG (`topn_pushdown`), with its EXPLAIN text. The
    /// DAG then ends at the TopN: its rows hold every column of the table (the client's final
    /// merge orders them by the TopN's columns), and the scan keeps `columns` of them.
    top_n: Option<(proto::TopN, String)>,
    /// The transaction's buffered rows of the table, overlaid on the regions' rows (module
    /// docs): the DAG then returns every column.
    pending: Option<Arc<Vec<PendingRow>>>,
    ctx: Arc<StatementContext>,
    properties: Arc<PlanProperties>,
}

/// A partial aggregation pushed into a scan's DAG.
#[derive(Debug, Clone)]
pub struct PartialAggregation {
    /// The DAG's Aggregation executor.
    pub executor: Executor,
    /// Output field `i` is column `sources[i]` of the coprocessor's rows.
    pub sources: Vec<usize>,
    /// For EXPLAIN: `count(1), sum(v) group_by=[g]`.
    pub text: String,
}

impl StratusScanExec {
    fn new(
        table: TableSchema,
        columns: Vec<usize>,
        schema: SchemaRef,
        pushed: PushedFilters,
        limit: Option<usize>,
        pending: Option<Arc<Vec<PendingRow>>>,
        ctx: Arc<StatementContext>,
    ) -> StratusScanExec {
        let every_column: Vec<usize> = (0..table.columns.len()).collect();
        let read = if pending.is_some() {
            &every_column
        } else {
            &columns
        };
        let dag = scan_dag(&table, read, &pushed, limit);
        let properties = plan_properties(&schema);
        StratusScanExec {
            table,
            columns,
            schema,
            pushed,
            limit,
            dag,
            partial: None,
            top_n: None,
            pending,
            ctx,
            properties,
        }
    }

    /// Whether an aggregation or a TopN may be pushed into this scan: it returns plain rows
    /// (none pushed yet), no limit was pushed (it would aggregate or order the first rows of
    /// each region), and no transaction's rows are overlaid on the regions' (module docs).
    pub fn accepts_pushdown(&self) -> bool {
        self.partial.is_none()
            && self.top_n.is_none()
            && self.limit.is_none()
            && self.pending.is_none()
    }

    /// This scan with `top_n` after its Selection: each region returns its first rows in
    /// that order (DataFusion's sort above merges the regions' candidates).
    pub fn with_top_n(&self, top_n: proto::TopN, text: String) -> StratusScanExec {
        let tail = Executor {
            tp: ExecType::TopN as i32,
            top_n: Some(top_n.clone()),
            ..Executor::default()
        };
        self.ending_with(tail, self.schema.clone(), None, Some((top_n, text)))
    }

    /// This scan with its DAG ending at `tail` after the Selection (instead of the
    /// projection and limit), answering rows of `schema`.
    fn ending_with(
        &self,
        tail: Executor,
        schema: SchemaRef,
        partial: Option<PartialAggregation>,
        top_n: Option<(proto::TopN, String)>,
    ) -> StratusScanExec {
        let mut executors = scan_executors(&self.table, self.pushed.conditions.clone());
        executors.push(tail);
        StratusScanExec {
            table: self.table.clone(),
            columns: self.columns.clone(),
            properties: plan_properties(&schema),
            schema,
            pushed: self.pushed.clone(),
            limit: None,
            dag: DagRequest {
                executors,
                ..DagRequest::default()
            },
            partial,
            top_n,
            pending: None,
            ctx: self.ctx.clone(),
        }
    }

    /// The table's columns this scan reads, in its output order (before any aggregation).
    pub fn columns(&self) -> &[usize] {
        &self.columns
    }

    pub fn table(&self) -> &TableSchema {
        &self.table
    }

    /// This scan with `partial` after its Selection: each region returns partial aggregates
    /// (the client's final merge combines regions) in the shape of `schema`, a partial
    /// aggregation's output.
    pub fn with_partial_aggregation(
        &self,
        partial: PartialAggregation,
        schema: SchemaRef,
    ) -> StratusScanExec {
        self.ending_with(partial.executor.clone(), schema, Some(partial), None)
    }
}

impl StratusScanExec {
    /// The scan under `input`: directly, or through what DataFusion puts over a source (a
    /// cooperative-scheduling wrapper, a round-robin repartition), which a rule replacing
    /// the scan by a pushed one may drop (the pushed scan answers in one partition).
    pub fn under(input: &Arc<dyn ExecutionPlan>) -> Option<&StratusScanExec> {
        if let Some(scan) = input.downcast_ref::<StratusScanExec>() {
            return Some(scan);
        }
        if let Some(coop) = input.downcast_ref::<CooperativeExec>() {
            return coop.input().downcast_ref::<StratusScanExec>();
        }
        let repartition = input.downcast_ref::<RepartitionExec>()?;
        if !matches!(repartition.partitioning(), Partitioning::RoundRobinBatch(_)) {
            return None;
        }
        repartition.input().downcast_ref::<StratusScanExec>()
    }
}

/// Applies `push` to every node of `plan`, bottom up, replacing the nodes it rewrites (the
/// walk of the pushdown rules).
pub(crate) fn rewrite_up(
    plan: Arc<dyn ExecutionPlan>,
    push: impl Fn(&Arc<dyn ExecutionPlan>) -> DfResult<Option<Arc<dyn ExecutionPlan>>>,
) -> DfResult<Arc<dyn ExecutionPlan>> {
    plan.transform_up(|p| {
        Ok(match push(&p)? {
            Some(pushed) => Transformed::yes(pushed),
            None => Transformed::no(p),
        })
    })
    .map(|t| t.data)
}

/// One partition, produced at once, bounded.
fn plan_properties(schema: &SchemaRef) -> Arc<PlanProperties> {
    Arc::new(PlanProperties::new(
        EquivalenceProperties::new(schema.clone()),
        Partitioning::UnknownPartitioning(1),
        EmissionType::Final,
        Boundedness::Bounded,
    ))
}

/// `TableScan → [Selection] → [Projection] → [Limit]` (module docs).
fn scan_dag(
    table: &TableSchema,
    columns: &[usize],
    pushed: &PushedFilters,
    limit: Option<usize>,
) -> DagRequest {
    let mut executors: Vec<Executor> = scan_executors(table, pushed.conditions.clone());
    let identity =
        columns.len() == table.columns.len() && columns.iter().enumerate().all(|(i, c)| i == *c);
    if !identity {
        executors.push(Executor {
            tp: ExecType::Projection as i32,
            projection: Some(proto::Projection {
                exprs: columns
                    .iter()
                    .map(|c| proto::Expr::column(*c as u32))
                    .collect(),
            }),
            ..Executor::default()
        });
    }
    if let Some(n) = limit {
        executors.push(Executor {
            tp: ExecType::Limit as i32,
            limit: Some(proto::Limit { limit: n as u64 }),
            ..Executor::default()
        });
    }
    DagRequest {
        executors,
        ..DagRequest::default()
    }
}

impl DisplayAs for StratusScanExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let names: Vec<&str> = self
            .columns
            .iter()
            .map(|c| self.table.columns[*c].name.as_str())
            .collect();
        write!(
            f,
            "StratusScanExec: table={} columns=[{}]",
            self.table.name,
            names.join(", ")
        )?;
        if !self.pushed.texts.is_empty() {
            write!(f, " selection=[{}]", self.pushed.texts.join(" AND "))?;
        }
        if let Some(n) = self.limit {
            write!(f, " limit={n}")?;
        }
        if let Some(p) = &self.partial {
            write!(f, " partial_aggregation=[{}]", p.text)?;
        }
        if let Some((_, text)) = &self.top_n {
            write!(f, " top_n=[{text}]")?;
        }
        if let Some(index) = &self.pushed.index {
            write!(f, " {}", index.text)?;
        }
        write!(f, " ranges={}", self.pushed.ranges.len())
    }
}

impl ExecutionPlan for StratusScanExec {
    fn name(&self) -> &str {
        "StratusScanExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        Vec::new()
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> DfResult<TreeNodeRecursion>,
    ) -> DfResult<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn replace_children(
        self: Arc<Self>,
        _: Vec<Arc<dyn ExecutionPlan>>,
        _: ReplaceChildrenOptions,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        self.replace_children(
            children,
            ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute),
        )
    }

    fn execute(
        &self,
        partition: usize,
        _context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        if partition != 0 {
            return Err(DataFusionError::Internal(format!(
                "StratusScanExec has one partition, asked for {partition}"
            )));
        }
        let ctx = self.ctx.clone();
        let dag = self.dag.clone();
        let ranges = self.pushed.ranges.clone();
        let index = self.pushed.index.clone();
        let table = self.table.clone();
        let columns = self.columns.clone();
        let schema = self.schema.clone();
        let limit = self.limit;
        let partial = self.partial.as_ref().map(|p| p.sources.clone());
        let pending = self.pending.clone();
        // The regions return every column (TopN, overlay) and the scan keeps `columns`.
        let whole_rows = self.top_n.is_some() || pending.is_some();
        let batch = async move {
            let session = ctx.client.session_with(ctx.vars);
            let client_error = |e| {
                DataFusionError::External(Box::new(FrontError::Sql(client::sql::SqlError::Client(
                    e,
                ))))
            };
            // An index lookup first: only the rows of the handles it finds (and that the
            // primary-key ranges allow) are read.
            let mut lookup = None;
            let ranges = match &index {
                Some(choice) => {
                    let (handles, found) = client::sql::index::lookup_handles(
                        &session,
                        &table,
                        &choice.index,
                        choice.ranges.clone(),
                        ctx.start_ts,
                    )
                    .await
                    .map_err(|e| DataFusionError::External(Box::new(FrontError::Sql(e))))?;
                    let keep: Vec<i64> = handles
                        .into_iter()
                        .filter(|&h| {
                            let key = wire::codec::table::record_key(table.id, h);
                            ranges
                                .iter()
                                .any(|r| r.start <= key && (r.end.is_empty() || key < r.end))
                        })
                        .collect();
                    lookup = Some((choice.text.clone(), keep.len(), found));
                    client::sql::index::handle_point_ranges(&table, &keep)
                }
                None => ranges,
            };
            let result = session
                .coprocessor(&dag, ranges, ctx.start_ts)
                .await
                .map_err(client_error)?;
            ctx.warnings.lock().extend(result.warnings);
            if let Some(scans) = &ctx.scans {
                let mut executors = describe_dag(&dag, &table);
                let mut regions = describe_regions(&result.pages);
                let mut cross_zone_bytes = result.stats.cross_zone_bytes;
                if let Some((text, handles, found)) = &lookup {
                    executors.insert(0, format!("IndexLookUp {text} handles={handles}"));
                    let mut index_regions = describe_regions(&found.pages);
                    index_regions.append(&mut regions);
                    regions = index_regions;
                    cross_zone_bytes += found.stats.cross_zone_bytes;
                }
                scans.lock().push(ScanReport {
                    table: table.name.clone(),
                    executors,
                    regions,
                    cross_zone_bytes,
                });
            }
            let mut rows = result.rows;
            if let Some(pending) = pending {
                rows = overlay(rows, table.pk, &pending);
            }
            if let Some(n) = limit {
                rows.truncate(n);
            }
            if whole_rows {
                rows = rows
                    .into_iter()
                    .map(|r| {
                        columns
                            .iter()
                            .map(|c| r.get(*c).cloned().unwrap_or(wire::datum::Datum::Null))
                            .collect()
                    })
                    .collect();
            }
            match partial {
                Some(sources) => arrow_rows::values_to_batch(schema, &sources, &rows),
                None => arrow_rows::rows_to_batch(&table, &columns, schema, &rows),
            }
            .map_err(|e| DataFusionError::External(Box::new(e)))
        };
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.schema.clone(),
            futures::stream::once(batch),
        )))
    }
}
