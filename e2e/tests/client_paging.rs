//! The client's paging driver against real servers: a table over several regions (and
//! servers) read in small pages returns every row exactly once, also while regions split
//! between two pages; a scan that meets the lock of an abandoned transaction resolves it and
//! returns the committed data.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::collections::BTreeSet;

use e2e::cluster::{Cluster, StoreKind};
use e2e::entry_client::{EntryClient, handle_v_dag, handles, outside_runtime};
use e2e::sample_table::SampleTable;
use e2e::server_proc::ServerProc;
use wire::coprocessor::KeyRange;
use wire::txn::CommitRequest;

const T: SampleTable = SampleTable { id: 11 };
const ROWS: i64 = 3000;

fn v_of(h: i64) -> i64 {
    h * 13 % 97
}

/// One server whose key space starts as regions cut at the given handles of `T`.
fn server_with_regions(cluster: &Cluster, cuts: &[i64]) -> ServerProc {
    let mut cfg = cluster.server_config("server");
    cfg.regions_cut_at(&cuts.iter().map(|&h| T.key(h)).collect::<Vec<_>>());
    ServerProc::start(&cfg)
}

fn small_pages(cfg: &mut client::ClientConfig) {
    cfg.paging.initial_size = 16;
    cfg.paging.max_size = 64;
}

/// Every handle of `0..ROWS` exactly once.
fn assert_every_row_once(got: &[i64]) {
    let unique: BTreeSet<i64> = got.iter().copied().collect();
    assert_eq!(unique.len(), got.len(), "a row came twice");
    assert_eq!(
        unique,
        (0..ROWS).collect::<BTreeSet<_>>(),
        "rows are missing"
    );
}

#[test]
fn a_table_over_three_regions_read_in_small_pages_returns_every_row_once() {
    let cluster = Cluster::new(StoreKind::Local);
    let server = server_with_regions(&cluster, &[1000, 2000]);
    T.load(&server, 0..ROWS, 8, v_of);
    let c = EntryClient::new(&[&server], small_pages);

    let r = c.coprocessor(&handle_v_dag(T, false), vec![T.range()], server.tso());
    assert_eq!(
        handles(&r.rows),
        (0..ROWS).collect::<Vec<_>>(),
        "ascending, region after region"
    );
    let regions: BTreeSet<u64> = r.pages.iter().map(|p| p.region_id.get()).collect();
    assert_eq!(regions.len(), 3, "three region tasks");
    // Each region's first page has the initial size, then pages double up to the maximum.
    for p in r.pages.iter().filter(|p| p.page_index == 0) {
        assert_eq!(p.rows.len(), 16, "{p:?}");
    }
    assert!(r.pages.iter().all(|p| p.rows.len() <= 64));
    assert!(r.pages.iter().any(|p| p.rows.len() == 64));
    assert!(r.pages.len() > 3 * (1000 / 64), "pages={}", r.pages.len());

    let desc = c.coprocessor(&handle_v_dag(T, true), vec![T.range()], server.tso());
    assert_every_row_once(&handles(&desc.rows));

    // The final merge adds the partial aggregates of every region.
    let agg = c.coprocessor(&T.count_sum_dag(), vec![T.range()], server.tso());
    assert_eq!(agg.rows, SampleTable::count_sum_rows((0..ROWS).map(v_of)));
    assert_eq!(agg.pages.len(), 3, "one partial row per region");
}

#[test]
fn a_table_over_two_servers_is_read_from_both() {
    let cluster = Cluster::new(StoreKind::Local);
    let mut a_cfg = cluster.server_config("a");
    a_cfg.ranges(&[(Vec::new(), T.key(1500))]);
    let a = ServerProc::start(&a_cfg);
    let mut b_cfg = cluster.server_config("b");
    b_cfg.server.node_id = 2;
    b_cfg.ranges(&[(T.key(1500), Vec::new())]).tso_from(&a);
    let b = ServerProc::start(&b_cfg);
    T.load(&a, 0..1500, 8, v_of);
    T.load(&b, 1500..ROWS, 8, v_of);
    let c = EntryClient::new(&[&a, &b], small_pages);

    // Two ranges, the second crossing from server a to server b.
    let ranges = vec![
        KeyRange::new(T.key(0), T.key(700)),
        KeyRange::new(T.key(700), T.range().end),
    ];
    let r = c.coprocessor(&handle_v_dag(T, false), ranges, a.tso());
    assert_eq!(handles(&r.rows), (0..ROWS).collect::<Vec<_>>());
    let a_region = a.region_of(&T.key(0)).id;
    let b_region = b.region_of(&T.key(ROWS - 1)).id;
    let read: BTreeSet<u64> = r.pages.iter().map(|p| p.region_id.get()).collect();
    assert_eq!(read, BTreeSet::from([a_region, b_region]));
    let agg = c.coprocessor(&T.count_sum_dag(), vec![T.range()], a.tso());
    assert_eq!(agg.rows, SampleTable::count_sum_rows((0..ROWS).map(v_of)));
}

#[test]
fn regions_split_between_pages_lose_and_duplicate_no_rows() {
    let cluster = Cluster::new(StoreKind::Local);
    let server = server_with_regions(&cluster, &[]);
    T.load(&server, 0..ROWS, 8, v_of);
    let c = EntryClient::new(&[&server], |cfg| {
        cfg.paging.initial_size = 16;
        cfg.paging.max_size = 32;
    });
    let mut pages_seen = 0;
    let mut splits = 0;
    // Set on the chosen pages; the split happens on the first of them, or after them, that has
    // rows: a page may come back empty (its region's rest past the resume point held none, as
    // when an earlier split landed right at a page's end), and there is no key to split ahead
    // of then.
    let mut split_due = false;
    let mut on_page = |p: &client::PageRows| {
        pages_seen += 1;
        split_due |= [2, 5, 9, 14, 20, 30].contains(&pages_seen);
        if !split_due {
            return;
        }
        let Some(&last) = handles(&p.rows).last() else {
            return;
        };
        split_due = false;
        // Split the region being read just ahead of the next page, and one further on.
        for ahead in [10, 600] {
            if last + ahead < ROWS {
                splits += usize::from(outside_runtime(|| server.split_at(T.key(last + ahead))));
            }
        }
    };
    let r = c.coprocessor_observed(
        &handle_v_dag(T, false),
        vec![T.range()],
        server.tso(),
        &mut on_page,
    );
    assert!(splits >= 6, "splits={splits}");
    assert!(
        r.stats.region_errors >= 6,
        "every split of the region being read costs a region error: {:?}",
        r.stats
    );
    assert_every_row_once(&handles(&r.rows));
    assert_eq!(handles(&r.rows), (0..ROWS).collect::<Vec<_>>());
    assert!(server.regions().regions.len() > 6);
}

#[test]
fn a_scan_meeting_an_abandoned_lock_resolves_it_and_returns_committed_data() {
    let cluster = Cluster::new(StoreKind::Local);
    let server = server_with_regions(&cluster, &[1000]);
    T.load(&server, 0..ROWS, 8, v_of);
    // A transaction prewrites two rows with a short TTL and is never heard of again.
    let start_ts = server.tso();
    e2e::transactions::abandoned_prewrite(
        &server,
        vec![
            e2e::transactions::put(&T.key(5), &SampleTable::value(-1, 8)),
            e2e::transactions::put(&T.key(1500), &SampleTable::value(-1, 8)),
        ],
        start_ts,
        300,
    );
    let c = EntryClient::new(&[&server], small_pages);
    let r = c.coprocessor(&handle_v_dag(T, false), vec![T.range()], server.tso());
    // At least the first lock met is resolved by this reader. The second may already be gone
    // when the reader reaches it (the other region's resolution rolled back the primary while
    // this region backed off), so the count is not fixed; what is fixed is that both are gone.
    assert!(r.stats.locks_resolved >= 1, "{:?}", r.stats);
    let want: Vec<Vec<wire::datum::Datum>> = (0..ROWS)
        .map(|h| vec![wire::datum::Datum::Int(h), wire::datum::Datum::Int(v_of(h))])
        .collect();
    assert_eq!(r.rows, want, "the abandoned writes are rolled back");
    for h in [5, 1500] {
        let get = server.get(&T.key(h), server.tso());
        assert!(
            get.error.is_none(),
            "the lock on handle {h} is gone: {get:?}"
        );
    }
}

#[test]
fn a_lock_whose_primary_committed_is_committed_by_the_reader() {
    let cluster = Cluster::new(StoreKind::Local);
    let server = server_with_regions(&cluster, &[1000]);
    T.load(&server, 0..ROWS, 8, v_of);
    let start_ts = server.tso();
    let prewrite = e2e::transactions::abandoned_prewrite(
        &server,
        vec![
            e2e::transactions::put(&T.key(1), &SampleTable::value(-10, 8)),
            e2e::transactions::put(&T.key(1700), &SampleTable::value(-17, 8)),
        ],
        start_ts,
        60_000,
    );
    // The coordinator commits the primary, then dies before the secondary.
    let commit_ts = server.tso().max(prewrite.min_commit_ts);
    let commit = server.commit(&CommitRequest {
        keys: vec![T.key(1)],
        start_ts,
        commit_ts,
    });
    assert!(commit.error.is_none(), "{commit:?}");
    let c = EntryClient::new(&[&server], small_pages);
    let r = c.coprocessor(&T.count_sum_dag(), vec![T.range()], server.tso());
    assert!(r.stats.locks_resolved >= 1, "{:?}", r.stats);
    let want = (0..ROWS).map(|h| match h {
        1 => -10,
        1700 => -17,
        h => v_of(h),
    });
    assert_eq!(r.rows, SampleTable::count_sum_rows(want));
}
