//! The coprocessor on three replicas across a leader change: the cache protocol and paged
//! answers.
//!
//! * A cached result is valid for the data version it names, which is the region's applied
//!   Raft index, the same on every replica at that index. A new leader's first entry (of its
//!   own term) advances the version: the old entry misses there, with equal rows, and the new
//!   one hits. A deposed leader never answers, let alone with a cache hit: it refuses with a
//!   region error naming the new leader.
//! * Paged and unpaged answers at one start_ts are the same before and after the leader
//!   changed, and after later writes.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::time::{Duration, Instant};

use e2e::coprocessor::{self, page_rows, rows, run_pages};
use e2e::replicated::{ReplicatedCluster, SERVERS};
use e2e::sample_table::SampleTable;
use wire::coprocessor::{RegionErrorKind, Request, Response};
use wire::region::Region;

const T: SampleTable = SampleTable { id: 7 };
const ROWS: i64 = 300;
const TIMEOUT: Duration = Duration::from_secs(30);

/// Server `i`'s answer to `req` once it serves (`ReplicatedCluster::coprocessor_until_served`),
/// which must be rows.
fn answer_on(c: &ReplicatedCluster, i: usize, req: &Request) -> Response {
    let resp = c.coprocessor_until_served(i, req, TIMEOUT);
    coprocessor::assert_answered(&resp, "request to the leader");
    resp
}

/// `count(1), sum(v)`, cache enabled.
fn cached(region: &Region, start_ts: u64, if_match_version: u64) -> Request {
    let mut req = coprocessor::request(&T.count_sum_dag(), vec![T.range()], start_ts, region);
    req.is_cache_enabled = true;
    req.cache_if_match_version = if_match_version;
    req
}

/// The region's data version on every server, once they all agree.
fn agreed_data_version(c: &ReplicatedCluster) -> u64 {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let versions: Vec<u64> = (0..SERVERS)
            .map(|i| c.server(i).region_of(&T.key(0)).data_version)
            .collect();
        if versions.windows(2).all(|w| w[0] == w[1]) {
            return versions[0];
        }
        assert!(
            Instant::now() < deadline,
            "replicas never agreed: {versions:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_cached_result_is_checked_against_the_new_leaders_data_version_and_the_old_leader_refuses() {
    let mut c = ReplicatedCluster::start(&[]);
    let l1 = c.wait_until_every_region_has_a_leader(TIMEOUT)[0];
    T.load(c.server(l1), 0..ROWS, 16, |h| h);
    let region = c.server(l1).region_of(&T.key(0));

    let first = answer_on(&c, l1, &cached(&region, c.tso(), 0));
    assert!(first.can_be_cached, "{first:?}");
    assert!(!first.is_cache_hit);
    assert_eq!(rows(&first).unwrap(), SampleTable::count_sum_rows(0..ROWS));
    let v1 = first.cache_last_version;
    let hit = answer_on(&c, l1, &cached(&region, c.tso(), v1));
    assert!(hit.is_cache_hit, "same leader, same version: {hit:?}");
    // Every replica that applied the same index reports the same data version.
    assert_eq!(agreed_data_version(&c), v1);

    let l2 = (0..SERVERS).find(|i| *i != l1).unwrap();
    c.transfer_leader(region.id, l2, TIMEOUT);
    let refused = c.server(l1).coprocessor(&cached(&region, c.tso(), v1));
    let error = refused
        .region_error
        .as_ref()
        .unwrap_or_else(|| panic!("the deposed leader answered: {refused:?}"));
    assert_eq!(error.kind(), Some(RegionErrorKind::NotLeader), "{error:?}");
    assert_eq!(error.leader_store_id, l2 as u64 + 1, "{error:?}");
    assert!(!refused.is_cache_hit);

    let second = answer_on(&c, l2, &cached(&region, c.tso(), v1));
    assert!(
        !second.is_cache_hit,
        "the new leader's own entry moved the data version: {second:?}"
    );
    assert!(second.cache_last_version > v1, "{second:?}");
    assert_eq!(rows(&second).unwrap(), rows(&first).unwrap());
    let v2 = second.cache_last_version;
    let third = answer_on(&c, l2, &cached(&region, c.tso(), v2));
    assert!(third.is_cache_hit, "{third:?}");

    // A write through the new leader: the cached version misses, with the new rows.
    T.load(c.server(l2), ROWS..ROWS + 10, 16, |h| h);
    let fourth = answer_on(&c, l2, &cached(&region, c.tso(), v2));
    assert!(!fourth.is_cache_hit, "{fourth:?}");
    assert_eq!(
        rows(&fourth).unwrap(),
        SampleTable::count_sum_rows(0..ROWS + 10)
    );
    let stale = c.server(l1).coprocessor(&cached(&region, c.tso(), v2));
    assert!(
        stale.region_error.is_some() && !stale.is_cache_hit,
        "the old leader must refuse, not confirm the old version: {stale:?}"
    );
}

#[test]
fn paged_and_unpaged_answers_at_one_start_ts_survive_a_leader_change_and_later_writes() {
    let mut c = ReplicatedCluster::start(&[]);
    let l1 = c.wait_until_every_region_has_a_leader(TIMEOUT)[0];
    T.load(c.server(l1), 0..ROWS, 16, |h| h * 3);
    let region = c.server(l1).region_of(&T.key(0));
    let ts = c.tso();
    let mut scan = T.count_sum_dag();
    scan.executors.truncate(1);
    let unpaged = coprocessor::request(&scan, vec![T.range()], ts, &region);
    let mut paged = unpaged.clone();
    paged.paging_size = 32;

    let whole = rows(&answer_on(&c, l1, &unpaged)).unwrap();
    assert_eq!(whole.len(), ROWS as usize);
    let pages = run_pages(c.server(l1), &paged, false);
    assert!(pages.len() > 1, "paging_size 32 over {ROWS} rows pages");
    assert_eq!(page_rows(&pages).unwrap(), whole);

    let l2 = (0..SERVERS).find(|i| *i != l1).unwrap();
    c.transfer_leader(region.id, l2, TIMEOUT);
    T.load(c.server(l2), 0..ROWS, 16, |h| h * 5);
    assert_eq!(rows(&answer_on(&c, l2, &unpaged)).unwrap(), whole);
    assert_eq!(
        page_rows(&run_pages(c.server(l2), &paged, false)).unwrap(),
        whole
    );
    // The later writes are there for a later start_ts.
    let now = coprocessor::request(&scan, vec![T.range()], c.tso(), &region);
    assert_ne!(rows(&answer_on(&c, l2, &now)).unwrap(), whole);
}
