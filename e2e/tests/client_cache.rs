//! The client's coprocessor cache against a real server: a repeated read is answered by the
//! server's cache fast path (no scan) and the client's entry; a write, an older start_ts or
//! another region id prevent reuse; the admission limits and capacity 0 keep results out; a
//! paged read, TopN pages included, repeats from the cache with every row.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::collections::BTreeSet;
use std::sync::Arc;

use client::{CacheStats, ClientConfig, CopCache, CopCacheConfig};
use e2e::cluster::{Cluster, StoreKind};
use e2e::entry_client::{EntryClient, handle_v_dag, handles, top_v_dag};
use e2e::http_client::post_proto;
use e2e::sample_table::SampleTable;
use e2e::server_proc::{ServerCopCounters, ServerProc};
use types::{ReadableDuration, ReadableSize};
use wire::coprocessor::KeyRange;
use wire::datum::Datum;
use wire::paths;
use wire::region::{SplitRequest, SplitResponse};

const T: SampleTable = SampleTable { id: 13 };
const ROWS: i64 = 2000;

fn v_of(h: i64) -> i64 {
    h * 7919 % 5003
}

struct Fixture {
    server: ServerProc,
    _cluster: Cluster,
}

/// One server (no worker: it executes locally and answers cache hits itself), regions cut at
/// the given handles, rows `0..ROWS`.
fn start(cuts: &[i64]) -> Fixture {
    let cluster = Cluster::new(StoreKind::Local);
    let mut cfg = cluster.server_config("server");
    cfg.regions_cut_at(&cuts.iter().map(|&h| T.key(h)).collect::<Vec<_>>());
    let server = ServerProc::start(&cfg);
    T.load(&server, 0..ROWS, 8, v_of);
    Fixture {
        server,
        _cluster: cluster,
    }
}

fn count_sum(c: &EntryClient, start_ts: u64) -> client::CopResult {
    c.coprocessor(&T.count_sum_dag(), vec![T.range()], start_ts)
}

fn want_count_sum(rows: std::ops::Range<i64>) -> Vec<Vec<Datum>> {
    SampleTable::count_sum_rows(rows.map(v_of))
}

#[test]
fn a_repeated_read_is_a_cache_hit_without_a_scan() {
    let f = start(&[]);
    let c = EntryClient::new(&[&f.server], |_| {});
    let first = count_sum(&c, f.server.tso());
    assert_eq!(first.rows, want_count_sum(0..ROWS));
    assert_eq!(first.stats.cache_hits, 0);
    assert_eq!(c.client.cop_cache().stats().stored, 1);

    let before = ServerCopCounters::read(&f.server);
    let again = count_sum(&c, f.server.tso());
    let delta = ServerCopCounters::read(&f.server).since(&before);
    assert_eq!(again.rows, first.rows);
    assert_eq!(again.stats.cache_hits, 1, "{:?}", again.stats);
    assert!(again.pages.iter().all(|p| p.from_cache));
    assert_eq!(delta.cache_hit, 1.0, "answered by the fast path: {delta:?}");
    assert_eq!(delta.local, 0.0, "nothing was scanned: {delta:?}");
    let stats = c.client.cop_cache().stats();
    assert_eq!((stats.hits, stats.misses), (1, 1), "{stats:?}");
}

#[test]
fn a_write_to_the_region_turns_the_next_read_into_a_miss() {
    let f = start(&[]);
    let c = EntryClient::new(&[&f.server], |_| {});
    count_sum(&c, f.server.tso());
    // One more row: the region's data version moves on.
    T.load(&f.server, ROWS..ROWS + 1, 8, v_of);
    let before = ServerCopCounters::read(&f.server);
    let after_write = count_sum(&c, f.server.tso());
    let delta = ServerCopCounters::read(&f.server).since(&before);
    assert_eq!(after_write.stats.cache_hits, 0);
    assert_eq!(
        after_write.rows,
        want_count_sum(0..ROWS + 1),
        "the new answer"
    );
    assert_eq!((delta.cache_hit, delta.local), (0.0, 1.0), "{delta:?}");
    // The new result replaced the entry: the next read hits again.
    let again = count_sum(&c, f.server.tso());
    assert_eq!(again.stats.cache_hits, 1);
    assert_eq!(again.rows, want_count_sum(0..ROWS + 1));
}

#[test]
fn an_entry_is_never_reused_at_an_older_start_ts() {
    let f = start(&[]);
    let c = EntryClient::new(&[&f.server], |_| {});
    let older = f.server.tso();
    let newer = f.server.tso();
    count_sum(&c, newer);
    let before = ServerCopCounters::read(&f.server);
    let r = count_sum(&c, older);
    let delta = ServerCopCounters::read(&f.server).since(&before);
    assert_eq!(r.stats.cache_hits, 0);
    assert_eq!(
        delta.cache_hit, 0.0,
        "no version was sent: the server would have confirmed it: {delta:?}"
    );
    assert_eq!(r.rows, want_count_sum(0..ROWS));
    // The entry now holds the older start_ts, which serves every later reader.
    assert_eq!(count_sum(&c, newer).stats.cache_hits, 1);
    assert_eq!(count_sum(&c, f.server.tso()).stats.cache_hits, 1);
}

#[test]
fn a_region_created_by_a_split_never_reuses_its_parents_entry() {
    let f = start(&[]);
    let c = EntryClient::new(&[&f.server], |_| {});
    // The read's ranges lie below the split key: after the split they are the left child's,
    // which keeps the parent's id (its Raft group goes on) under a new epoch, with the same
    // cache key.
    let ranges = vec![KeyRange::new(T.key(0), T.key(500))];
    let dag = T.count_sum_dag();
    let parent_region = f.server.region_of(&T.key(0));
    let parent = parent_region.id;
    c.coprocessor(&dag, ranges.clone(), f.server.tso());
    let resp: SplitResponse = post_proto(
        &f.server.url(paths::SPLIT),
        &SplitRequest {
            region_id: parent,
            split_key: T.key(1000),
        },
    );
    assert!(resp.error.is_empty(), "{resp:?}");
    let left = resp.left.expect("left child");
    let child = left.id;
    assert_eq!(child, parent, "the left child keeps the region id");
    assert!(
        left.ver > parent_region.ver,
        "{left:?} vs {parent_region:?}"
    );
    assert!(left.data_version > parent_region.data_version);

    let before = ServerCopCounters::read(&f.server);
    let r = c.coprocessor(&dag, ranges.clone(), f.server.tso());
    let delta = ServerCopCounters::read(&f.server).since(&before);
    assert_eq!(r.stats.cache_hits, 0);
    assert!(r.stats.region_errors >= 1, "the stale epoch: {:?}", r.stats);
    assert_eq!(
        r.pages
            .iter()
            .map(|p| p.region_id.get())
            .collect::<Vec<_>>(),
        vec![child]
    );
    assert_eq!((delta.cache_hit, delta.local), (0.0, 1.0), "{delta:?}");
    assert_eq!(r.rows, want_count_sum(0..500));
    // Stored again under the child's id, it is reused from now on.
    let again = c.coprocessor(&dag, ranges, f.server.tso());
    assert_eq!(again.stats.cache_hits, 1);
}

/// Two identical reads through a client with `tweak`; the second read's result and the
/// cache's counts.
fn read_twice(tweak: impl FnOnce(&mut ClientConfig)) -> (client::CopResult, CacheStats) {
    let f = start(&[]);
    let c = EntryClient::new(&[&f.server], tweak);
    let ranges = vec![
        KeyRange::new(T.key(0), T.key(1000)),
        KeyRange::new(T.key(1000), T.range().end),
    ];
    c.coprocessor(&T.count_sum_dag(), ranges.clone(), f.server.tso());
    let second = c.coprocessor(&T.count_sum_dag(), ranges, f.server.tso());
    assert_eq!(second.rows, want_count_sum(0..ROWS));
    (second, c.client.cop_cache().stats())
}

#[test]
fn a_result_above_the_size_limit_is_not_stored() {
    let (r, stats) = read_twice(|c| c.cop_cache.admission_max_result_size = ReadableSize(8));
    assert_eq!(r.stats.cache_hits, 0);
    assert_eq!((stats.stored, stats.rejected), (0, 2), "{stats:?}");
}

#[test]
fn a_result_faster_than_the_minimum_process_time_is_not_stored() {
    let (r, stats) =
        read_twice(|c| c.cop_cache.admission_min_process_time = ReadableDuration::secs(3600));
    assert_eq!(r.stats.cache_hits, 0);
    assert_eq!((stats.stored, stats.rejected), (0, 2), "{stats:?}");
}

#[test]
fn a_request_with_too_many_ranges_is_not_stored() {
    let (r, stats) = read_twice(|c| c.cop_cache.admission_max_ranges = 1);
    assert_eq!(r.stats.cache_hits, 0);
    assert_eq!((stats.stored, stats.rejected), (0, 2), "{stats:?}");
    // The same limit admits a request of one range.
    let (r, _) = read_twice(|c| c.cop_cache.admission_max_ranges = 2);
    assert_eq!(r.stats.cache_hits, 1);
}

#[test]
fn pages_beyond_the_max_page_index_are_not_stored() {
    let f = start(&[]);
    let c = EntryClient::new(&[&f.server], |c| {
        c.paging.initial_size = 100;
        c.paging.max_size = 100;
        c.cop_cache.admission_max_page_index = 3;
    });
    let dag = handle_v_dag(T, false);
    let first = c.coprocessor(&dag, vec![T.range()], f.server.tso());
    assert_eq!(first.pages.len(), 20);
    let second = c.coprocessor(&dag, vec![T.range()], f.server.tso());
    let from_cache: Vec<u64> = second
        .pages
        .iter()
        .filter(|p| p.from_cache)
        .map(|p| p.page_index)
        .collect();
    assert_eq!(from_cache, vec![0, 1, 2, 3], "pages 0..=3 only");
    assert_eq!(handles(&second.rows), (0..ROWS).collect::<Vec<_>>());
}

#[test]
fn a_zero_capacity_disables_the_cache() {
    let f = start(&[]);
    let c = EntryClient::new(&[&f.server], |c| c.cop_cache.capacity_mb = 0);
    count_sum(&c, f.server.tso());
    let before = ServerCopCounters::read(&f.server);
    let again = count_sum(&c, f.server.tso());
    let delta = ServerCopCounters::read(&f.server).since(&before);
    assert_eq!(again.stats.cache_hits, 0);
    assert_eq!((delta.cache_hit, delta.local), (0.0, 1.0), "{delta:?}");
    assert_eq!(c.client.cop_cache().stats(), CacheStats::default());
    assert!(c.client.cop_cache().is_empty());
    assert_eq!(again.rows, want_count_sum(0..ROWS));
}

#[test]
fn a_paged_read_repeated_from_the_cache_returns_every_row() {
    let f = start(&[700, 1400]);
    let c = EntryClient::new(&[&f.server], |c| {
        c.paging.initial_size = 16;
        c.paging.max_size = 64;
    });
    let dag = handle_v_dag(T, false);
    let first = c.coprocessor(&dag, vec![T.range()], f.server.tso());
    assert!(first.pages.len() > 20);
    let before = ServerCopCounters::read(&f.server);
    let second = c.coprocessor(&dag, vec![T.range()], f.server.tso());
    let delta = ServerCopCounters::read(&f.server).since(&before);
    assert!(second.pages.iter().all(|p| p.from_cache), "every page hits");
    assert_eq!(delta.cache_hit, second.pages.len() as f64, "{delta:?}");
    assert_eq!(delta.local, 0.0);
    assert_eq!(second.rows, first.rows);
    assert_eq!(handles(&second.rows), (0..ROWS).collect::<Vec<_>>());
}

/// The `limit` largest `v`, descending, with their handles.
fn want_top(limit: usize) -> Vec<(i64, i64)> {
    let mut all: Vec<(i64, i64)> = (0..ROWS).map(|h| (v_of(h), h)).collect();
    all.sort_by_key(|p| std::cmp::Reverse(p.0));
    all.truncate(limit);
    all
}

fn top_values(rows: &[Vec<Datum>]) -> Vec<i64> {
    rows.iter()
        .map(|r| match r.as_slice() {
            [Datum::Int(_), Datum::Int(v)] => *v,
            other => panic!("expected handle, v: {other:?}"),
        })
        .collect()
}

/// The key leaves out the page size, so a TopN's first page is stored under one key whether
/// it was a pass-through page (paging below the limit: source rows and a resume range) or the
/// heap's result (paging at or above the limit: the region's top rows, no resume range). A
/// client of either kind reusing the other's entry still gets the right answer, because the
/// entry keeps its resume range and the client applies the final TopN.
#[test]
fn top_n_pass_through_pages_and_heap_results_share_a_key_and_stay_correct() {
    const LIMIT: u64 = 50;
    let f = start(&[1000]);
    let want: Vec<i64> = want_top(LIMIT as usize).into_iter().map(|p| p.0).collect();
    let dag = top_v_dag(T, LIMIT);
    for pass_through_first in [true, false] {
        let cache = Arc::new(CopCache::new(CopCacheConfig {
            admission_min_process_time: ReadableDuration::millis(0),
            ..CopCacheConfig::default()
        }));
        let pass_through = EntryClient::sharing_cache(&[&f.server], cache.clone(), |c| {
            c.paging.initial_size = 16;
            c.paging.max_size = 32;
        });
        let heap = EntryClient::sharing_cache(&[&f.server], cache.clone(), |c| {
            c.paging.initial_size = 1000;
            c.paging.max_size = 1000;
        });
        let (writer, reader) = if pass_through_first {
            (&pass_through, &heap)
        } else {
            (&heap, &pass_through)
        };
        let stored = writer.coprocessor(&dag, vec![T.range()], f.server.tso());
        assert_eq!(top_values(&stored.rows), want);
        if pass_through_first {
            assert!(stored.pages.iter().all(|p| p.rows.len() <= 32));
            assert!(stored.pages[0].resumed, "a pass-through page resumes");
        } else {
            assert_eq!(stored.pages.len(), 2, "one heap result per region");
            assert!(stored.pages.iter().all(|p| !p.resumed));
        }
        let reused = reader.coprocessor(&dag, vec![T.range()], f.server.tso());
        assert!(
            reused
                .pages
                .iter()
                .filter(|p| p.page_index == 0)
                .all(|p| p.from_cache),
            "each region's first page comes from the other client's entry: {:?}",
            reused.stats
        );
        assert_eq!(
            top_values(&reused.rows),
            want,
            "pass_through_first={pass_through_first}"
        );
        let seen: BTreeSet<i64> = handles(&reused.rows).into_iter().collect();
        assert_eq!(seen.len(), LIMIT as usize);
    }
}

/// A server that answers every coprocessor request with a cache hit, whatever it was sent.
#[test]
fn a_cache_hit_for_a_request_without_a_local_entry_is_an_error() {
    use e2e::fake_worker::FakeWorker;
    use prost::Message;
    let hit = wire::coprocessor::Response {
        is_cache_hit: true,
        cache_last_version: 5,
        ..wire::coprocessor::Response::default()
    };
    let fake = FakeWorker::start(200, &hit.encode_to_vec());
    let base = fake
        .coprocessor_url()
        .trim_end_matches(paths::COPROCESSOR)
        .to_string();
    let c = EntryClient::with_config(ClientConfig::new([base.clone()]));
    // The fake cannot list regions: give the client one region covering everything.
    c.client
        .region_cache()
        .insert(client::region_cache::CachedRegion::standalone(
            wire::region::Region {
                id: 1,
                ver: 1,
                ..Default::default()
            },
            &base,
            None,
        ));
    let err = c
        .try_coprocessor(&T.count_sum_dag(), vec![T.range()], 100)
        .expect_err("a hit the client never asked for");
    assert!(
        matches!(
            err,
            client::Error::CacheHitWithoutEntry {
                region_id: types::RegionId(1)
            }
        ),
        "{err}"
    );
    assert_eq!(err.kind(), client::ErrorKind::CacheProtocol);
    // What the client sent: the cache enabled, no version (it holds no entry), the first
    // page's size.
    let sent = fake.received();
    assert_eq!(sent.len(), 1);
    let req = wire::coprocessor::Request::decode(sent[0].body.as_slice()).expect("a cop request");
    assert!(req.is_cache_enabled);
    assert_eq!(req.cache_if_match_version, 0);
    assert_eq!(req.paging_size, 128);
    assert_eq!(req.start_ts, 100);
}
