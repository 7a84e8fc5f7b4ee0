//! TopN paging on the offload path: a TopN whose limit is above
//! `remote-coprocessor-topn-max-pushdown-rows` reaches the worker with `paging_size = limit - 1`,
//! so the worker answers resumable pages of source rows instead of the whole heap, and the
//! final TopN over those pages (the client's job) equals local execution. A smaller TopN is one
//! heap answer.
//!
//! The worker's own `cop-topn-max-pushdown-rows` does the same for bodies shaped like an older
//! server's (paging_size 0), sent straight to a real worker, and leaves requests that already
//! page alone.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use e2e::cluster::{Cluster, OffloadPair, StoreKind};
use e2e::coprocessor::{location, page_rows, request, rows, run_pages};
use e2e::offload_body::{self, BodyCapture};
use e2e::sample_table::{SampleTable, V_COLUMN};
use e2e::worker_proc::WorkerProc;
use wire::coprocessor::{
    self as proto, ByItem, ColumnInfo, DagRequest, ExecType, Executor, Expr, Request,
};
use wire::datum::{Datum, FieldType};

const T: SampleTable = SampleTable { id: 9 };
const ROWS: i64 = 3000;
const THRESHOLD: u64 = 100;

fn v_of(h: i64) -> i64 {
    h * 7919 % 5003
}

/// `SELECT v FROM t ORDER BY v DESC LIMIT limit`.
fn top_n_dag(limit: u64) -> DagRequest {
    let scan = Executor {
        tp: ExecType::TableScan as i32,
        tbl_scan: Some(proto::TableScan {
            table_id: T.id,
            columns: vec![ColumnInfo {
                column_id: V_COLUMN,
                tp: FieldType::Int64 as i32,
                pk_handle: false,
                default_val: Vec::new(),
            }],
            desc: false,
        }),
        ..Executor::default()
    };
    let top = Executor {
        tp: ExecType::TopN as i32,
        top_n: Some(proto::TopN {
            order_by: vec![ByItem {
                expr: Some(Expr::column(0)),
                desc: true,
            }],
            limit,
        }),
        ..Executor::default()
    };
    DagRequest {
        executors: vec![scan, top],
        ..DagRequest::default()
    }
}

/// The client's final TopN: the `limit` largest values, descending.
fn final_top_n(rows: Vec<Vec<Datum>>, limit: usize) -> Vec<i64> {
    let mut v: Vec<i64> = rows
        .into_iter()
        .map(|r| match r.as_slice() {
            [Datum::Int(v)] => *v,
            other => panic!("expected one int column, found {other:?}"),
        })
        .collect();
    v.sort_unstable_by(|a, b| b.cmp(a));
    v.truncate(limit);
    v
}

fn start() -> OffloadPair {
    let pair = OffloadPair::start(StoreKind::Local, |c| {
        c.kvengine.remote_coprocessor_topn_max_pushdown_rows = THRESHOLD;
    });
    for s in pair.both() {
        T.load(s, 0..ROWS, 8, v_of);
        s.flush();
    }
    pair
}

fn routed(pair: &OffloadPair, dag: &DagRequest, on_remote: bool) -> Request {
    let server = if on_remote { &pair.remote } else { &pair.local };
    let region = server.region_of(&T.key(0));
    request(dag, vec![T.range()], pair.remote.tso(), &region)
}

#[test]
fn a_topn_above_the_threshold_comes_back_in_resumable_pages_that_merge_to_the_local_answer() {
    let pair = start();
    let limit = 500u64;
    let dag = top_n_dag(limit);
    let before = pair
        .remote
        .metric("stratus_server_offload_topn_paging_total", &[]);

    let first = pair.remote.coprocessor(&routed(&pair, &dag, true));
    assert_eq!(location(&first), "remote", "{:?}", first.exec_details);
    assert!(
        first.range.is_some(),
        "a resumable page, not the whole heap"
    );
    let first_rows = rows(&first).unwrap();
    assert!(
        first_rows.len() < limit as usize,
        "a page holds at most limit - 1 source rows, found {}",
        first_rows.len()
    );

    let pages = run_pages(&pair.remote, &routed(&pair, &dag, true), false);
    assert!(pages.len() > 1, "the scan took several pages");
    assert!(pages.iter().all(|p| location(p) == "remote"));
    let after = pair
        .remote
        .metric("stratus_server_offload_topn_paging_total", &[]);
    assert_eq!(
        after - before,
        (1 + pages.len()) as f64,
        "every page went out with TopN paging"
    );
    let remote = final_top_n(page_rows(&pages).unwrap(), limit as usize);

    let local = pair.local.coprocessor(&routed(&pair, &dag, false));
    assert_eq!(location(&local), "local");
    assert!(
        local.range.is_none(),
        "the local TopN answers its heap at once"
    );
    let local = final_top_n(rows(&local).unwrap(), limit as usize);
    assert_eq!(local.len(), limit as usize);
    assert_eq!(
        remote, local,
        "the final TopN over the pages equals local execution"
    );
    let mut want: Vec<i64> = (0..ROWS).map(v_of).collect();
    want.sort_unstable_by(|a, b| b.cmp(a));
    want.truncate(limit as usize);
    assert_eq!(local, want);
}

#[test]
fn a_topn_within_the_threshold_is_one_heap_answer_from_the_worker() {
    let pair = start();
    let limit = THRESHOLD / 2;
    let dag = top_n_dag(limit);
    let before = pair
        .remote
        .metric("stratus_server_offload_topn_paging_total", &[]);
    let resp = pair.remote.coprocessor(&routed(&pair, &dag, true));
    assert_eq!(location(&resp), "remote");
    assert!(resp.range.is_none(), "one answer, no resume range");
    let got = rows(&resp).unwrap();
    assert_eq!(got.len(), limit as usize);
    let local = pair.local.coprocessor(&routed(&pair, &dag, false));
    assert_eq!(
        final_top_n(got, limit as usize),
        final_top_n(rows(&local).unwrap(), limit as usize)
    );
    assert_eq!(
        pair.remote
            .metric("stratus_server_offload_topn_paging_total", &[]),
        before,
        "no TopN paging for a small limit"
    );
}

#[test]
fn a_request_paging_below_the_limit_keeps_its_own_page_size() {
    let pair = start();
    let dag = top_n_dag(500);
    let mut req = routed(&pair, &dag, true);
    req.paging_size = 64;
    let resp = pair.remote.coprocessor(&req);
    assert_eq!(location(&resp), "remote");
    assert!(resp.range.is_some());
    assert_eq!(
        rows(&resp).unwrap().len(),
        64,
        "the request's own page of 64 rows"
    );
}

/// A worker with `cop-topn-max-pushdown-rows = THRESHOLD`, and a server that does no TopN
/// paging itself (`remote-coprocessor-topn-max-pushdown-rows = 0`, as a server older than the
/// policy) whose offload bodies are captured. Fields drop in order: processes, then files.
struct OlderServer {
    worker: WorkerProc,
    capture: BodyCapture,
    _cluster: Cluster,
}

impl OlderServer {
    fn start() -> OlderServer {
        let cluster = Cluster::new(StoreKind::Local);
        let mut worker_cfg = cluster.worker_config("worker");
        worker_cfg.cop_topn_max_pushdown_rows = THRESHOLD;
        let worker = WorkerProc::start(&worker_cfg);
        let capture = BodyCapture::start(&cluster, "older-server", |c| {
            c.kvengine.remote_coprocessor_topn_max_pushdown_rows = 0;
        });
        T.load(&capture.server, 0..ROWS, 8, v_of);
        capture.server.flush();
        OlderServer {
            worker,
            capture,
            _cluster: cluster,
        }
    }

    /// The server's local answer to `dag` over the table, and the body it would have sent.
    fn capture(&self, dag: &DagRequest) -> (proto::Response, offload_body::OffloadBody) {
        let server = &self.capture.server;
        let region = server.region_of(&T.key(0));
        let req = request(dag, vec![T.range()], server.tso(), &region);
        let (local, body) = self.capture.capture(&req);
        assert_eq!(location(&local), "fallback", "{:?}", local.exec_details);
        (local, body)
    }

    fn paging_actions(&self, action: &str) -> f64 {
        self.worker
            .metric("stratus_worker_topn_paging_total", &[("action", action)])
    }
}

#[test]
fn a_worker_with_the_topn_setting_pages_a_large_topn_sent_the_old_way() {
    let setup = OlderServer::start();
    let limit = 500u64;
    let (local, body) = setup.capture(&top_n_dag(limit));
    assert_eq!(
        body.request.paging_size, 0,
        "an older server sends the request's own paging"
    );
    assert!(
        local.range.is_none(),
        "the local TopN answers its heap at once"
    );
    let applied_before = setup.paging_actions("applied");

    let first = offload_body::run(&setup.worker, &body);
    assert!(
        first.range.is_some(),
        "a resumable page, not the whole heap"
    );
    let first_rows = rows(&first).unwrap();
    assert!(
        first_rows.len() < limit as usize,
        "a page holds at most limit - 1 source rows, found {}",
        first_rows.len()
    );

    let pages = offload_body::run_pages(&setup.worker, &body, false);
    assert!(pages.len() > 1, "the scan took several pages");
    assert_eq!(
        setup.paging_actions("applied") - applied_before,
        (1 + pages.len()) as f64,
        "the worker set the paging of every page"
    );
    let remote = final_top_n(page_rows(&pages).unwrap(), limit as usize);
    let local = final_top_n(rows(&local).unwrap(), limit as usize);
    assert_eq!(local.len(), limit as usize);
    assert_eq!(
        remote, local,
        "the final TopN over the pages equals local execution"
    );
}

#[test]
fn a_worker_with_the_topn_setting_passes_through_requests_that_already_page() {
    let setup = OlderServer::start();
    let (_, body) = setup.capture(&top_n_dag(500));
    let before = [
        setup.paging_actions("applied"),
        setup.paging_actions("passed_through"),
        setup.paging_actions("not_applicable"),
    ];

    let paged = offload_body::run(&setup.worker, &body.with_request(|r| r.paging_size = 64));
    assert!(paged.range.is_some());
    assert_eq!(
        rows(&paged).unwrap().len(),
        64,
        "the request's own page of 64 rows"
    );
    // A TopN within the threshold, without paging: one heap answer.
    let small = THRESHOLD / 2;
    let (local_small, small_body) = setup.capture(&top_n_dag(small));
    let heap = offload_body::run(&setup.worker, &small_body);
    assert!(heap.range.is_none(), "one answer, no resume range");
    assert_eq!(
        final_top_n(rows(&heap).unwrap(), small as usize),
        final_top_n(rows(&local_small).unwrap(), small as usize)
    );

    let after = [
        setup.paging_actions("applied"),
        setup.paging_actions("passed_through"),
        setup.paging_actions("not_applicable"),
    ];
    assert_eq!(
        [
            after[0] - before[0],
            after[1] - before[1],
            after[2] - before[2]
        ],
        [0.0, 1.0, 1.0],
        "applied, passed_through, not_applicable"
    );
}
