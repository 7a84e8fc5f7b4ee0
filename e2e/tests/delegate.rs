//! The delegate path: a client's coprocessor request sent to a worker's
//! `POST /delegate/coprocessor` gives what the owning server computes locally (memtable and
//! SST data alike), with cache fields from the origin's evidence; locks and region errors come
//! back as the server would give them; delegate bytes are counted by zone relation on both
//! sides.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use e2e::cluster::{Cluster, StoreKind};
use e2e::coprocessor::{self, location};
use e2e::http_client::post_proto;
use e2e::sample_table::{SampleTable, V_COLUMN};
use e2e::server_proc::ServerProc;
use e2e::transactions;
use e2e::worker_proc::WorkerProc;
use e2e::zones::{
    delegate, post_delegate_raw, server_delegate_bytes, server_zone, worker_delegate_bytes,
    worker_zone,
};
use wire::coprocessor::{
    self as proto, ColumnInfo, DagRequest, ExecType, Executor, RegionErrorKind, Request,
};
use wire::datum::FieldType;
use wire::paths;
use wire::region::{SplitRequest, SplitResponse};

const T: SampleTable = SampleTable { id: 9 };

/// `SELECT v` over the whole table.
fn scan_dag() -> DagRequest {
    DagRequest {
        executors: vec![Executor {
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
        }],
        ..DagRequest::default()
    }
}

/// A server (zone a) and a worker in `zone`.
struct Setup {
    worker: WorkerProc,
    server: ServerProc,
    _cluster: Cluster,
}

fn setup(worker_zone_label: &str) -> Setup {
    let cluster = Cluster::new(StoreKind::Local);
    let mut cfg = cluster.server_config("server");
    server_zone(&mut cfg, "a");
    let server = ServerProc::start(&cfg);
    let mut wcfg = cluster.worker_config("worker");
    worker_zone(&mut wcfg, worker_zone_label);
    let worker = WorkerProc::start(&wcfg);
    Setup {
        worker,
        server,
        _cluster: cluster,
    }
}

fn request(server: &ServerProc, dag: &DagRequest, start_ts: u64) -> Request {
    let region = server.region_of(&T.key(0));
    let mut req = coprocessor::request(dag, vec![T.range()], start_ts, &region);
    req.is_cache_enabled = true;
    req
}

#[test]
fn a_delegated_request_equals_local_execution_over_memtable_and_sst_data() {
    let s = setup("a");
    // Rows 0..300 in an SST, 300..500 and new versions of 0..100 in the memtable.
    T.load(&s.server, 0..300, 16, |h| h);
    s.server.flush();
    T.load(&s.server, 300..500, 16, |h| h);
    T.load(&s.server, 0..100, 16, |h| 1000 + h);
    let ts = s.server.tso();
    for dag in [scan_dag(), T.count_sum_dag()] {
        let req = request(&s.server, &dag, ts);
        let local = s.server.coprocessor(&req);
        let remote = delegate(&s.worker, &s.server, &req);
        coprocessor::assert_answered(&remote, "delegated request");
        assert_eq!(location(&remote), "delegate", "{:?}", remote.exec_details);
        assert_eq!(
            remote.exec_details.as_ref().unwrap().remote_addr,
            s.server.base_url()
        );
        assert_eq!(
            coprocessor::sorted(coprocessor::rows(&remote).unwrap()),
            coprocessor::sorted(coprocessor::rows(&local).unwrap())
        );
        assert_eq!(remote.range, local.range);
        assert!(remote.can_be_cached, "nothing newer, no lock");
        assert_eq!(remote.cache_last_version, local.cache_last_version);
        assert!(remote.cache_last_version > 0);
    }
    let rows = coprocessor::rows(&delegate(
        &s.worker,
        &s.server,
        &request(&s.server, &T.count_sum_dag(), ts),
    ))
    .unwrap();
    assert_eq!(
        rows,
        SampleTable::count_sum_rows((0..500).map(|h| if h < 100 { 1000 + h } else { h }))
    );
}

#[test]
fn the_worker_never_answers_a_cache_hit_and_newer_versions_make_it_uncacheable() {
    let s = setup("a");
    T.load(&s.server, 0..200, 16, |h| h);
    let old_ts = s.server.tso();
    let req = request(&s.server, &T.count_sum_dag(), old_ts);
    let first = delegate(&s.worker, &s.server, &req);
    assert!(first.can_be_cached);
    // The client's entry matches the data version: a server would answer a hit; the worker runs.
    let mut again = req.clone();
    again.cache_if_match_version = first.cache_last_version;
    let second = delegate(&s.worker, &s.server, &again);
    assert!(!second.is_cache_hit);
    assert_eq!(
        coprocessor::rows(&second).unwrap(),
        coprocessor::rows(&first).unwrap()
    );

    // A newer version in the memtable, read at the old start_ts: the same rows, not cacheable.
    T.load(&s.server, 0..1, 16, |_| 77);
    let stale = delegate(&s.worker, &s.server, &req);
    assert_eq!(
        coprocessor::rows(&stale).unwrap(),
        coprocessor::rows(&first).unwrap()
    );
    assert!(!stale.can_be_cached, "the origin left a newer version out");
    assert!(stale.cache_last_version > first.cache_last_version);
}

#[test]
fn a_lock_on_the_range_answers_locked() {
    let s = setup("a");
    T.load(&s.server, 0..50, 16, |h| h);
    let (lock_ts, _) = transactions::prewrite(
        &s.server,
        &[&s.server],
        &[transactions::put(&T.key(7), &SampleTable::value(1, 4))],
    );
    let req = request(&s.server, &T.count_sum_dag(), s.server.tso());
    let resp = delegate(&s.worker, &s.server, &req);
    let locked = resp.locked.expect("a lock blocks the read");
    assert_eq!(locked.lock_version, lock_ts);
    assert_eq!(locked.key, T.key(7));
    assert!(resp.data.is_empty() && resp.region_error.is_none());
}

#[test]
fn a_region_error_after_a_split_is_passed_back() {
    let s = setup("a");
    T.load(&s.server, 0..100, 16, |h| h);
    let req = request(&s.server, &T.count_sum_dag(), s.server.tso());
    let parent = s.server.region_of(&T.key(0));
    let split: SplitResponse = post_proto(
        &s.server.url(paths::SPLIT),
        &SplitRequest {
            region_id: parent.id,
            split_key: T.key(50),
        },
    );
    assert!(
        split.error.is_empty() && split.region_error.is_none(),
        "{split:?}"
    );
    let resp = delegate(&s.worker, &s.server, &req);
    let err = resp.region_error.expect("the old region is gone");
    assert!(
        err.kind == RegionErrorKind::RegionNotFound as i32
            || err.kind == RegionErrorKind::EpochNotMatch as i32,
        "{err:?}"
    );
    assert_eq!(err.region_id, parent.id);
}

#[test]
fn cross_zone_delegate_bytes_are_counted_on_both_sides_and_same_zone_bytes_are_not() {
    let cluster = Cluster::new(StoreKind::Local);
    let mut cfg = cluster.server_config("server");
    server_zone(&mut cfg, "a");
    let server = ServerProc::start(&cfg);
    let start = |name: &str, zone: &str| {
        let mut wcfg = cluster.worker_config(name);
        worker_zone(&mut wcfg, zone);
        WorkerProc::start(&wcfg)
    };
    let worker_a = start("worker-a", "a");
    let worker_b = start("worker-b", "b");
    T.load(&server, 0..200, 16, |h| h);
    let req = request(&server, &T.count_sum_dag(), server.tso());

    coprocessor::assert_answered(&delegate(&worker_a, &server, &req), "same zone");
    let same = server_delegate_bytes(&server, "same");
    assert!(same > 0.0);
    assert_eq!(worker_delegate_bytes(&worker_a, "same"), same);
    assert_eq!(server_delegate_bytes(&server, "cross"), 0.0);
    assert_eq!(worker_delegate_bytes(&worker_a, "cross"), 0.0);

    coprocessor::assert_answered(&delegate(&worker_b, &server, &req), "cross zone");
    let cross = server_delegate_bytes(&server, "cross");
    assert!(cross > 0.0, "the memtable rows crossed zones");
    assert_eq!(worker_delegate_bytes(&worker_b, "cross"), cross);
    assert_eq!(worker_delegate_bytes(&worker_b, "same"), 0.0);
    assert_eq!(server_delegate_bytes(&server, "same"), same, "unchanged");
}

#[test]
fn a_request_without_the_region_server_header_is_a_bad_request() {
    let s = setup("a");
    let req = request(&s.server, &T.count_sum_dag(), s.server.tso());
    let body = prost::Message::encode_to_vec(&req);
    let reply = post_delegate_raw(&s.worker, None, &body);
    assert_eq!(
        reply.status,
        400,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    let reply = post_delegate_raw(&s.worker, Some("http://127.0.0.1:1"), &body);
    assert_eq!(reply.status, 502, "an unreachable server");
    assert_eq!(
        s.worker.metric(
            "stratus_worker_delegate_requests_total",
            &[("result", "origin_error")]
        ),
        1.0
    );
}
