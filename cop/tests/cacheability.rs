//! Cacheability: exact cases for `can_be_cached` (cache disabled; a newer version or a lock in
//! the scanned span; a clean scan), and the cache fast path (a hit only when the versions match,
//! only where hits are allowed, never on a worker's rebuilt snapshot).

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

mod common;

use common::*;
use cop::handler::{HandlerOptions, handle};
use wire::codec::table::record_key;
use wire::coprocessor::{DagRequest, Expr, KeyRange, Request, ScalarFuncSig};
use wire::datum::{Datum, FieldType};

const T: i64 = 3;

fn scan_dag() -> DagRequest {
    dag(vec![table_scan(
        T,
        vec![column(1, FieldType::Int64)],
        false,
    )])
}

fn cached_request(ranges: Vec<KeyRange>, start_ts: u64) -> Request {
    let mut req = request(&scan_dag(), ranges, start_ts);
    req.is_cache_enabled = true;
    req
}

/// Rows 1..=n at ts 10.
fn table(e: &TestEngine, n: i64) {
    for h in 1..=n {
        e.put_row(T, h, 10, &[(1, Datum::Int(h))]);
    }
}

fn can_be_cached(e: &TestEngine, req: &Request) -> bool {
    let resp = handle(req, &e.snap(), &HandlerOptions::origin());
    assert!(resp.other_error.is_empty(), "{resp:?}");
    resp.can_be_cached
}

#[test]
fn a_clean_scan_with_the_cache_enabled_can_be_cached() {
    let e = TestEngine::new();
    table(&e, 5);
    assert!(can_be_cached(&e, &cached_request(vec![table_range(T)], 20)));
    assert!(can_be_cached(&e, &cached_request(vec![point(T, 2)], 20)));
}

#[test]
fn a_result_is_never_cacheable_when_the_request_did_not_enable_the_cache() {
    let e = TestEngine::new();
    table(&e, 5);
    let mut req = cached_request(vec![table_range(T)], 20);
    req.is_cache_enabled = false;
    assert!(!can_be_cached(&e, &req));
}

#[test]
fn a_version_newer_than_start_ts_in_the_scanned_span_prevents_caching_wherever_it_lives() {
    let e = TestEngine::new();
    table(&e, 5);
    e.put_row(T, 3, 30, &[(1, Datum::Int(33))]);
    let req = cached_request(vec![table_range(T)], 20);
    assert!(!can_be_cached(&e, &req), "newer version in the memtable");
    e.flush();
    assert!(!can_be_cached(&e, &req), "newer version in an L0 file");
    e.compact();
    assert!(!can_be_cached(&e, &req), "newer version in a level");
    assert!(
        can_be_cached(&e, &cached_request(vec![table_range(T)], 30)),
        "at ts 30 nothing is newer"
    );
    // A point range on the newer key, and a newer delete.
    assert!(!can_be_cached(&e, &cached_request(vec![point(T, 3)], 20)));
    e.delete_row(T, 4, 40);
    assert!(!can_be_cached(
        &e,
        &cached_request(vec![table_range(T)], 35)
    ));
}

#[test]
fn a_newer_version_outside_the_requested_ranges_does_not_prevent_caching() {
    let e = TestEngine::new();
    table(&e, 5);
    e.put_row(T, 5, 30, &[(1, Datum::Int(55))]);
    assert!(can_be_cached(
        &e,
        &cached_request(vec![handle_range(T, 1, 4), point(T, 4)], 20)
    ));
}

#[test]
fn a_page_is_cacheable_when_the_newer_version_lies_beyond_what_it_scanned() {
    let e = TestEngine::new();
    table(&e, 20);
    e.put_row(T, 20, 30, &[(1, Datum::Int(200))]);
    let mut req = cached_request(vec![table_range(T)], 20);
    req.paging_size = 5;
    let resp = handle(&req, &e.snap(), &HandlerOptions::origin());
    assert!(resp.range.is_some());
    assert!(resp.can_be_cached);
    // The whole range meets it.
    req.paging_size = 0;
    assert!(!can_be_cached(&e, &req));
}

#[test]
fn any_lock_in_the_scanned_span_prevents_caching_even_one_the_read_ignores() {
    let e = TestEngine::new();
    table(&e, 5);
    // Started after the read: it does not block it, but a later reader may see its commit.
    e.lock(&record_key(T, 2), 25);
    let resp = handle(
        &cached_request(vec![table_range(T)], 20),
        &e.snap(),
        &HandlerOptions::origin(),
    );
    assert_eq!(rows(&resp).unwrap().len(), 5);
    assert!(!resp.can_be_cached);
    assert!(!can_be_cached(&e, &cached_request(vec![point(T, 2)], 20)));
    assert!(can_be_cached(&e, &cached_request(vec![point(T, 3)], 20)));
}

#[test]
fn a_blocking_lock_or_an_evaluation_error_is_never_cacheable() {
    let e = TestEngine::new();
    table(&e, 5);
    e.put_row(T, 6, 10, &[(1, Datum::Int(i64::MAX))]);
    let mut req = cached_request(vec![table_range(T)], 20);
    let plus = Expr::func(ScalarFuncSig::Plus, vec![Expr::column(0), Expr::int(1)]);
    req.data = prost::Message::encode_to_vec(&dag(vec![
        table_scan(T, vec![column(1, FieldType::Int64)], false),
        projection(vec![plus]),
    ]));
    let resp = handle(&req, &e.snap(), &HandlerOptions::origin());
    assert!(rows(&resp).is_err());
    assert!(!resp.can_be_cached);
    e.lock(&record_key(T, 2), 15);
    let resp = handle(
        &cached_request(vec![table_range(T)], 20),
        &e.snap(),
        &HandlerOptions::origin(),
    );
    assert!(resp.locked.is_some());
    assert!(!resp.can_be_cached);
}

#[test]
fn a_cache_hit_is_answered_only_when_the_data_version_matches() {
    let e = TestEngine::new();
    table(&e, 5);
    let snap = e.snap();
    let version = snap.data_version().unwrap();
    let mut req = cached_request(vec![table_range(T)], 20);
    req.cache_if_match_version = version;
    let hit = handle(&req, &snap, &HandlerOptions::origin());
    assert!(hit.is_cache_hit);
    assert_eq!(hit.cache_last_version, version);
    assert!(hit.data.is_empty());
    assert_eq!(hit.exec_details.unwrap().scanned_keys, 0);
    // After a write the version moved on: execute and report the new version.
    e.put_row(T, 9, 15, &[(1, Datum::Int(9))]);
    let snap = e.snap();
    let miss = handle(&req, &snap, &HandlerOptions::origin());
    assert!(!miss.is_cache_hit);
    assert_eq!(miss.cache_last_version, snap.data_version().unwrap());
    assert_ne!(miss.cache_last_version, version);
    assert_eq!(rows(&miss).unwrap().len(), 6);
}

#[test]
fn a_cache_hit_needs_the_cache_enabled_a_cached_entry_and_the_switch_on() {
    let e = TestEngine::new();
    table(&e, 5);
    let snap = e.snap();
    let version = snap.data_version().unwrap();
    let mut req = cached_request(vec![table_range(T)], 20);
    req.cache_if_match_version = version;
    let executed = |req: &Request, opts: &HandlerOptions| {
        let resp = handle(req, &snap, opts);
        assert!(!resp.is_cache_hit);
        assert_eq!(rows(&resp).unwrap().len(), 5);
    };
    // A worker's handler never answers a hit, even when the versions match.
    executed(&req, &HandlerOptions::worker());
    let mut disabled = req.clone();
    disabled.is_cache_enabled = false;
    executed(&disabled, &HandlerOptions::origin());
    let mut no_entry = req.clone();
    no_entry.cache_if_match_version = 0;
    executed(&no_entry, &HandlerOptions::origin());
}

#[test]
fn a_rebuilt_snapshot_never_answers_a_cache_hit_and_reports_version_zero() {
    let e = TestEngine::new();
    table(&e, 5);
    e.compact();
    e.put_row(T, 6, 10, &[(1, Datum::Int(6))]);
    let version = e.snap().data_version().unwrap();
    let ranges = vec![table_range(T)];
    let worker = e.worker_snap(&ranges, 20);
    let mut req = cached_request(ranges, 20);
    req.cache_if_match_version = version;
    // Even with the switch on (a misconfigured worker), there is no version to match.
    let resp = handle(&req, &worker, &HandlerOptions::origin());
    assert!(!resp.is_cache_hit);
    assert_eq!(resp.cache_last_version, 0);
    assert_eq!(rows(&resp).unwrap().len(), 6);
    assert!(resp.can_be_cached);
}
