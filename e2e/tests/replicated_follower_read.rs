//! Follower reads (replica reads) on three real server processes: a coprocessor request with
//! `context.replica_read` is served by a follower once the leader confirmed the read point and
//! checked its memory locks, and the follower applied up to it.
//!
//! * Nothing acknowledged is missed: a write the leader acknowledged is in the follower's very
//!   next read.
//! * One data version across replicas: a result cached from the leader is a hit on a follower
//!   at the same applied index, and the other way round; a write makes both miss.
//! * Locks are seen: a prewritten lock on the leader blocks a follower's read (answered as
//!   `locked`, the reader resolves it), and after its rollback the read goes through.
//! * Without the flag a follower still refuses, naming the leader.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::time::Duration;

use e2e::coprocessor::{self, rows};
use e2e::replicated::{ReplicatedCluster, SERVERS};
use e2e::sample_table::SampleTable;
use wire::coprocessor::{RegionErrorKind, Request};
use wire::region::Region;
use wire::txn::{Mutation, Op, PrewriteRequest, RollbackRequest};

const T: SampleTable = SampleTable { id: 7 };
const ROWS: i64 = 200;
const TIMEOUT: Duration = Duration::from_secs(30);

/// `count(1), sum(v)`, cache enabled; a replica read when `replica`.
fn count_sum(region: &Region, start_ts: u64, if_match_version: u64, replica: bool) -> Request {
    let mut req = coprocessor::request(&T.count_sum_dag(), vec![T.range()], start_ts, region);
    req.is_cache_enabled = true;
    req.cache_if_match_version = if_match_version;
    req.context.as_mut().unwrap().replica_read = replica;
    req
}

fn loaded_cluster() -> (ReplicatedCluster, usize, usize, Region) {
    let mut c = ReplicatedCluster::start(&[]);
    let leader = c.wait_until_every_region_has_a_leader(TIMEOUT)[0];
    T.load(c.server(leader), 0..ROWS, 16, |h| h);
    let region = c.server(leader).region_of(&T.key(0));
    let follower = (0..SERVERS).find(|i| *i != leader).unwrap();
    (c, leader, follower, region)
}

#[test]
fn a_follower_read_sees_every_acknowledged_write_and_shares_cache_entries_with_the_leader() {
    let (c, leader, follower, region) = loaded_cluster();

    // Without the flag the follower refuses, naming the leader.
    let refused = c
        .server(follower)
        .coprocessor(&count_sum(&region, c.tso(), 0, false));
    let error = refused.region_error.as_ref().expect("a follower refuses");
    assert_eq!(error.kind(), Some(RegionErrorKind::NotLeader), "{error:?}");
    assert_eq!(error.leader_store_id, leader as u64 + 1, "{error:?}");

    // Filled on the leader, a hit on the follower at the same applied index.
    let filled =
        c.coprocessor_until_served(leader, &count_sum(&region, c.tso(), 0, false), TIMEOUT);
    coprocessor::assert_answered(&filled, "the leader's read");
    assert_eq!(rows(&filled).unwrap(), SampleTable::count_sum_rows(0..ROWS));
    let v1 = filled.cache_last_version;
    let hit = c.coprocessor_until_served(follower, &count_sum(&region, c.tso(), v1, true), TIMEOUT);
    assert!(
        hit.is_cache_hit,
        "same applied index on the follower: {hit:?}"
    );

    // A write the leader acknowledged is in the follower's next read, which misses the cache.
    T.load(c.server(leader), ROWS..ROWS + 10, 16, |h| h);
    let after =
        c.coprocessor_until_served(follower, &count_sum(&region, c.tso(), v1, true), TIMEOUT);
    coprocessor::assert_answered(&after, "the follower's read after the write");
    assert!(!after.is_cache_hit, "{after:?}");
    assert_eq!(
        rows(&after).unwrap(),
        SampleTable::count_sum_rows(0..ROWS + 10),
        "the follower missed an acknowledged write"
    );
    let v2 = after.cache_last_version;
    assert!(v2 > v1, "the write moved the data version: {v1} -> {v2}");
    // The follower's entry is a hit on the leader: one data version across replicas.
    let back = c.coprocessor_until_served(leader, &count_sum(&region, c.tso(), v2, false), TIMEOUT);
    assert!(
        back.is_cache_hit,
        "the follower's version on the leader: {back:?}"
    );

    // The follower served them as a follower, the leader checked them.
    let served = c.server(follower).metric(
        "stratus_raft_replica_reads_total",
        &[("result", "follower")],
    );
    assert!(served >= 2.0, "follower reads served: {served}");
    let checked = c
        .server(leader)
        .metric("stratus_raft_replica_read_checks_total", &[]);
    assert!(checked >= 2.0, "reads the leader checked: {checked}");
}

#[test]
fn a_follower_read_meets_a_prewritten_lock_and_reads_past_it_after_the_rollback() {
    let (c, leader, follower, region) = loaded_cluster();
    let key = T.key(5);
    let lock_ts = c.tso();
    let prewrite = c.server(leader).prewrite(&PrewriteRequest {
        mutations: vec![Mutation {
            op: Op::Put as i32,
            key: key.clone(),
            value: b"not a row".to_vec(),
        }],
        primary: key.clone(),
        start_ts: lock_ts,
        lock_ttl_ms: 60_000,
        txn_size: 1,
        ..PrewriteRequest::default()
    });
    assert!(prewrite.error.is_none(), "{prewrite:?}");

    let read = c.coprocessor_until_served(follower, &count_sum(&region, c.tso(), 0, true), TIMEOUT);
    let lock = read
        .locked
        .as_ref()
        .unwrap_or_else(|| panic!("the follower read past a lock: {read:?}"));
    assert_eq!(lock.key, key);
    assert_eq!(lock.lock_version, lock_ts);

    let rollback = c.server(leader).rollback(&RollbackRequest {
        keys: vec![key.clone()],
        start_ts: lock_ts,
    });
    assert!(rollback.error.is_none(), "{rollback:?}");
    let read = c.coprocessor_until_served(follower, &count_sum(&region, c.tso(), 0, true), TIMEOUT);
    coprocessor::assert_answered(&read, "the follower's read after the rollback");
    assert_eq!(rows(&read).unwrap(), SampleTable::count_sum_rows(0..ROWS));
}
