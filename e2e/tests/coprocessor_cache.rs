//! The coprocessor cache protocol through a server that offloads every request to a worker:
//! the server answers a cache-valid request itself (the worker never sees it), any write to
//! the region invalidates it, and a remote result that a newer version or a lock could change
//! is never declared cacheable. `cache_last_version` is the region's data version.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use e2e::cluster::{Cluster, StoreKind};
use e2e::coprocessor::{self, location};
use e2e::sample_table::SampleTable;
use e2e::server_proc::{ServerCopCounters, ServerProc};
use e2e::transactions;
use e2e::worker_proc::WorkerProc;
use wire::coprocessor::{Request, Response};
use wire::datum::Datum;
use wire::txn::RollbackRequest;

const T: SampleTable = SampleTable { id: 7 };
const ROWS: i64 = 300;

struct Fixture {
    server: ServerProc,
    worker: WorkerProc,
    _cluster: Cluster,
}

/// A worker, a server offloading everything to it, and rows `0..ROWS` with `v = handle`.
fn start(flush: bool) -> Fixture {
    let cluster = Cluster::new(StoreKind::Local);
    let worker = WorkerProc::start(&cluster.worker_config("worker"));
    let mut cfg = cluster.server_config("server");
    cfg.offload_all_to_worker(&worker);
    let server = ServerProc::start(&cfg);
    T.load(&server, 0..ROWS, 16, |h| h);
    if flush {
        server.flush();
    }
    Fixture {
        server,
        worker,
        _cluster: cluster,
    }
}

/// `count(1), sum(v)` over the table, cache enabled, at `start_ts`.
fn cached_request(f: &Fixture, start_ts: u64, if_match_version: u64) -> Request {
    let region = f.server.region_of(&T.key(0));
    let mut req = coprocessor::request(&T.count_sum_dag(), vec![T.range()], start_ts, &region);
    req.is_cache_enabled = true;
    req.cache_if_match_version = if_match_version;
    req
}

fn send(f: &Fixture, req: &Request) -> Response {
    let resp = f.server.coprocessor(req);
    coprocessor::assert_answered(&resp, "cache test request");
    resp
}

fn data_version(f: &Fixture) -> u64 {
    f.server.region_of(&T.key(0)).data_version
}

fn expected(values: impl IntoIterator<Item = i64>) -> Vec<Vec<Datum>> {
    SampleTable::count_sum_rows(values)
}

#[test]
fn a_repeated_request_is_a_cache_hit_answered_by_the_server() {
    let f = start(true);
    let version = data_version(&f);
    let first = send(&f, &cached_request(&f, f.server.tso(), 0));
    assert_eq!(location(&first), "remote", "{:?}", first.exec_details);
    assert!(first.can_be_cached, "a clean remote result is cacheable");
    assert!(!first.is_cache_hit);
    assert_eq!(
        first.cache_last_version, version,
        "the region's data version"
    );
    assert_eq!(coprocessor::rows(&first).unwrap(), expected(0..ROWS));

    let worker_ok = f.worker.requests("ok");
    let before = ServerCopCounters::read(&f.server);
    let again = send(
        &f,
        &cached_request(&f, f.server.tso(), first.cache_last_version),
    );
    assert!(again.is_cache_hit, "unchanged region: a hit; {again:?}");
    assert_eq!(location(&again), "cache_hit", "{:?}", again.exec_details);
    assert_eq!(again.cache_last_version, version);
    assert_eq!(
        f.worker.requests("ok"),
        worker_ok,
        "a cache hit must not reach the worker"
    );
    let delta = ServerCopCounters::read(&f.server).since(&before);
    assert_eq!(delta.cache_hit, 1.0, "{delta:?}");
    assert_eq!(delta.decided_remote, 0.0, "{delta:?}");
}

#[test]
fn flush_and_compaction_advance_the_data_version_and_a_cached_entry_misses_with_equal_rows() {
    // The data version is the region's applied Raft index: the Freeze, Flush and Compaction
    // entries a flush and a compaction go through advance it like a write does (a miss, never
    // a wrong hit).
    let f = start(false);
    let first = send(&f, &cached_request(&f, f.server.tso(), 0));
    assert!(first.can_be_cached, "{first:?}");
    f.server.compact();
    assert!(
        data_version(&f) > first.cache_last_version,
        "a flush and a compaction are log entries: the data version moves on"
    );
    let again = send(
        &f,
        &cached_request(&f, f.server.tso(), first.cache_last_version),
    );
    assert!(!again.is_cache_hit, "{again:?}");
    assert_eq!(
        coprocessor::rows(&again).unwrap(),
        coprocessor::rows(&first).unwrap()
    );
    // The new version is cached and serves the next read.
    let third = send(
        &f,
        &cached_request(&f, f.server.tso(), again.cache_last_version),
    );
    assert!(third.is_cache_hit, "{third:?}");
}

#[test]
fn a_write_to_the_region_turns_a_cached_version_into_a_miss() {
    let f = start(true);
    let first = send(&f, &cached_request(&f, f.server.tso(), 0));
    assert!(first.can_be_cached);
    let old_version = first.cache_last_version;

    // A row of another table in the same region: the cached rows are unchanged, yet the region
    // changed, so the version no longer matches.
    let other = SampleTable { id: 8 };
    assert_eq!(
        f.server.region_of(&other.key(0)).id,
        f.server.region_of(&T.key(0)).id
    );
    other.load(&f.server, 0..1, 4, |_| 1);
    let new_version = data_version(&f);
    assert!(
        new_version > old_version,
        "{new_version} after {old_version}"
    );

    let worker_ok = f.worker.requests("ok");
    let again = send(&f, &cached_request(&f, f.server.tso(), old_version));
    assert!(!again.is_cache_hit, "the region changed: a miss; {again:?}");
    assert_eq!(location(&again), "remote", "{:?}", again.exec_details);
    assert_eq!(again.cache_last_version, new_version);
    assert!(again.can_be_cached);
    assert_eq!(coprocessor::rows(&again).unwrap(), expected(0..ROWS));
    assert_eq!(f.worker.requests("ok"), worker_ok + 1.0);

    // A write to the cached rows themselves: a miss with the new answer.
    T.load(&f.server, ROWS..ROWS + 1, 4, |h| h);
    let third = send(&f, &cached_request(&f, f.server.tso(), new_version));
    assert!(!third.is_cache_hit);
    assert_eq!(third.cache_last_version, data_version(&f));
    assert_eq!(coprocessor::rows(&third).unwrap(), expected(0..ROWS + 1));
}

/// A read at `read_ts`, then a newer version of row 5 (v = 1000); the remote result at
/// `read_ts` is the old answer and not cacheable.
fn newer_version_makes_the_result_uncacheable(flush_newer: bool) {
    let f = start(true);
    let read_ts = f.server.tso();
    T.load(&f.server, 5..6, 16, |_| 1000);
    if flush_newer {
        f.server.flush();
    }
    let resp = send(&f, &cached_request(&f, read_ts, 0));
    assert_eq!(location(&resp), "remote", "{:?}", resp.exec_details);
    assert!(
        !resp.can_be_cached,
        "a version newer than start_ts is in range: the result must not be cacheable"
    );
    assert_eq!(coprocessor::rows(&resp).unwrap(), expected(0..ROWS));
    // At a fresh ts the same request sees the new version and is cacheable.
    let fresh = send(&f, &cached_request(&f, f.server.tso(), 0));
    assert!(fresh.can_be_cached, "{fresh:?}");
    assert_eq!(
        coprocessor::rows(&fresh).unwrap(),
        expected((0..ROWS).map(|h| if h == 5 { 1000 } else { h }))
    );
}

#[test]
fn a_newer_version_in_the_memtable_makes_the_remote_result_uncacheable() {
    newer_version_makes_the_result_uncacheable(false);
}

#[test]
fn a_newer_version_in_an_sst_makes_the_remote_result_uncacheable() {
    newer_version_makes_the_result_uncacheable(true);
}

#[test]
fn a_non_conflicting_lock_in_range_makes_the_remote_result_uncacheable() {
    let f = start(true);
    let read_ts = f.server.tso();
    // A lock of a transaction that started after the read: it does not block the read.
    let (lock_ts, _) = transactions::prewrite(
        &f.server,
        &[&f.server],
        &[transactions::put(&T.key(9), &SampleTable::value(-1, 4))],
    );
    assert!(lock_ts > read_ts);
    let resp = send(&f, &cached_request(&f, read_ts, 0));
    assert_eq!(location(&resp), "remote", "{:?}", resp.exec_details);
    assert!(
        !resp.can_be_cached,
        "a lock is in range: the result must not be cacheable"
    );
    assert_eq!(coprocessor::rows(&resp).unwrap(), expected(0..ROWS));
    let r = f.server.rollback(&RollbackRequest {
        keys: vec![T.key(9)],
        start_ts: lock_ts,
    });
    assert!(r.error.is_none(), "{r:?}");
}

#[test]
fn a_conflicting_lock_is_reported_without_contacting_the_worker() {
    let f = start(true);
    let (lock_ts, _) = transactions::prewrite(
        &f.server,
        &[&f.server],
        &[transactions::put(&T.key(9), &SampleTable::value(-1, 4))],
    );
    let read_ts = f.server.tso();
    let worker_total = f
        .worker
        .metric("stratus_worker_coprocessor_requests_total", &[]);
    let resp = f.server.coprocessor(&cached_request(&f, read_ts, 0));
    let locked = resp
        .locked
        .as_ref()
        .unwrap_or_else(|| panic!("a lock below start_ts must be reported; {resp:?}"));
    assert_eq!(locked.lock_version, lock_ts);
    assert_eq!(locked.key, T.key(9));
    assert!(!resp.can_be_cached);
    assert_eq!(
        f.worker
            .metric("stratus_worker_coprocessor_requests_total", &[]),
        worker_total,
        "nothing is sent to the worker"
    );
}
