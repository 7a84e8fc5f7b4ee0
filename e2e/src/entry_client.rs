//! The entry node's library (`client::Client`) driven from blocking tests: a client on its own
//! runtime, configured for the servers a test started, and DAGs whose rows name their handle
//! (so a test can check that every row arrives exactly once).

use client::{Client, ClientConfig, CopResult};
use wire::coprocessor::{
    self as proto, ByItem, ColumnInfo, DagRequest, ExecType, Executor, Expr, KeyRange,
};
use wire::datum::{Datum, FieldType};

use crate::sample_table::{SampleTable, V_COLUMN};
use crate::server_proc::ServerProc;

/// A [`Client`] and the runtime its calls run on.
pub struct EntryClient {
    pub client: Client,
    rt: tokio::runtime::Runtime,
}

impl EntryClient {
    /// A client for `servers` (the first runs the TSO), with `tweak` applied to the config.
    /// The cache admits results of any process time unless `tweak` says otherwise: test
    /// tables are small and answer in well under the default 5 ms.
    pub fn new(servers: &[&ServerProc], tweak: impl FnOnce(&mut ClientConfig)) -> EntryClient {
        let mut cfg = ClientConfig::new(servers.iter().map(|s| s.base_url().to_string()));
        cfg.cop_cache.admission_min_process_time = types::ReadableDuration::millis(0);
        tweak(&mut cfg);
        EntryClient::with_config(cfg)
    }

    pub fn with_config(cfg: ClientConfig) -> EntryClient {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio runtime");
        let client = Client::new(cfg).expect("valid client config");
        EntryClient { client, rt }
    }

    /// Runs `fut` on the client's runtime.
    pub fn block_on<F: std::future::Future>(&self, fut: F) -> F::Output {
        self.rt.block_on(fut)
    }

    pub fn try_coprocessor(
        &self,
        dag: &DagRequest,
        ranges: Vec<KeyRange>,
        start_ts: u64,
    ) -> Result<CopResult, client::Error> {
        self.rt
            .block_on(self.client.coprocessor(dag, ranges, start_ts))
    }

    pub fn coprocessor(&self, dag: &DagRequest, ranges: Vec<KeyRange>, start_ts: u64) -> CopResult {
        self.try_coprocessor(dag, ranges, start_ts)
            .unwrap_or_else(|e| panic!("client coprocessor: {}", node::error_chain(&e)))
    }
}

fn column(column_id: i64, pk_handle: bool) -> ColumnInfo {
    ColumnInfo {
        column_id,
        tp: FieldType::Int64 as i32,
        pk_handle,
        default_val: Vec::new(),
    }
}

/// `SELECT handle, v FROM t` (ascending, or descending with `desc`).
pub fn handle_v_dag(table: SampleTable, desc: bool) -> DagRequest {
    let scan = Executor {
        tp: ExecType::TableScan as i32,
        tbl_scan: Some(proto::TableScan {
            table_id: table.id,
            columns: vec![column(1, true), column(V_COLUMN, false)],
            desc,
        }),
        ..Executor::default()
    };
    DagRequest {
        executors: vec![scan],
        ..DagRequest::default()
    }
}

/// `SELECT handle, v FROM t ORDER BY v DESC LIMIT limit`.
pub fn top_v_dag(table: SampleTable, limit: u64) -> DagRequest {
    let mut dag = handle_v_dag(table, false);
    dag.executors.push(Executor {
        tp: ExecType::TopN as i32,
        top_n: Some(proto::TopN {
            order_by: vec![ByItem {
                expr: Some(Expr::column(1)),
                desc: true,
            }],
            limit,
        }),
        ..Executor::default()
    });
    dag
}

/// The handles of rows `[handle, v, ...]`, in order.
pub fn handles(rows: &[Vec<Datum>]) -> Vec<i64> {
    rows.iter()
        .map(|r| match r.first() {
            Some(Datum::Int(h)) => *h,
            other => panic!("expected a handle first, found {other:?}"),
        })
        .collect()
}

impl EntryClient {
    /// [`EntryClient::coprocessor`] with `on_page` called between pages (see
    /// `Client::coprocessor_observed`). `on_page` runs inside the client's runtime: blocking
    /// calls to the test processes must go through [`outside_runtime`].
    pub fn coprocessor_observed(
        &self,
        dag: &DagRequest,
        ranges: Vec<KeyRange>,
        start_ts: u64,
        on_page: &mut (dyn FnMut(&client::PageRows) + Send),
    ) -> CopResult {
        self.rt
            .block_on(
                self.client
                    .coprocessor_observed(dag, ranges, start_ts, on_page),
            )
            .unwrap_or_else(|e| panic!("client coprocessor: {}", node::error_chain(&e)))
    }
}

/// Runs blocking `f` on a fresh thread and waits for it: the harness's blocking HTTP calls
/// cannot run on a thread that is inside a runtime.
pub fn outside_runtime<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| s.spawn(f).join().expect("helper thread"))
}

impl EntryClient {
    /// A client for `servers` sharing `cache` (see `Client::with_cop_cache`).
    pub fn sharing_cache(
        servers: &[&ServerProc],
        cache: std::sync::Arc<client::CopCache>,
        tweak: impl FnOnce(&mut ClientConfig),
    ) -> EntryClient {
        let mut cfg = ClientConfig::new(servers.iter().map(|s| s.base_url().to_string()));
        tweak(&mut cfg);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio runtime");
        let client = Client::with_cop_cache(cfg, cache).expect("valid client config");
        EntryClient { client, rt }
    }
}
