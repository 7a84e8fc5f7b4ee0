//! Regions split on request (`POST /split`) and by size (the server's split checker): the
//! children cover the parent's range with a higher epoch, requests routed with the old epoch
//! get a region error, and every row stays readable through the children.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::time::{Duration, Instant};

use e2e::cluster::{Cluster, StoreKind};
use e2e::coprocessor::{request, rows};
use e2e::http_client::post_proto;
use e2e::sample_table::SampleTable;
use e2e::server_proc::ServerProc;
use types::{ReadableDuration, ReadableSize};
use wire::coprocessor::RegionErrorKind;
use wire::paths;
use wire::region::{KvPair, RawLoadRequest, RawLoadResponse, SplitRequest, SplitResponse};
use wire::txn::ErrorKind;
use wire::txn::ScanRequest;

const TABLE: SampleTable = SampleTable { id: 5 };

fn v_of(h: i64) -> i64 {
    h * 3 % 101
}

/// count(1), sum(v) over the whole table, asked region by region.
fn count_sum(server: &ServerProc) -> (i64, i64) {
    let ts = server.tso();
    let (mut count, mut sum) = (0, 0);
    let table = TABLE.range();
    for region in server.regions().regions {
        let start = table.start.clone().max(region.start.clone());
        let end = if region.end.is_empty() {
            table.end.clone()
        } else {
            table.end.clone().min(region.end.clone())
        };
        if start >= end {
            continue;
        }
        let resp = server.coprocessor(&request(
            &TABLE.count_sum_dag(),
            vec![wire::coprocessor::KeyRange::new(start, end)],
            ts,
            &region,
        ));
        for row in rows(&resp).expect("answer") {
            match (&row[0], &row[1]) {
                (wire::datum::Datum::Int(c), wire::datum::Datum::Int(s)) => {
                    count += c;
                    sum += s;
                }
                other => panic!("unexpected row {other:?}"),
            }
        }
    }
    (count, sum)
}

#[test]
fn a_split_request_gives_two_children_and_stales_the_old_epoch() {
    let cluster = Cluster::new(StoreKind::Local);
    let server = ServerProc::start(&cluster.server_config("server"));
    TABLE.load(&server, 0..3000, 16, v_of);
    let parent = server.region_of(&TABLE.key(0));
    let split_key = TABLE.key(1500);
    let resp: SplitResponse = post_proto(
        &server.url(paths::SPLIT),
        &SplitRequest {
            region_id: parent.id,
            split_key: split_key.clone(),
        },
    );
    assert!(
        resp.error.is_empty() && resp.region_error.is_none(),
        "{resp:?}"
    );
    let (left, right) = (resp.left.unwrap(), resp.right.unwrap());
    assert_eq!(
        (left.start.as_slice(), left.end.as_slice()),
        (parent.start.as_slice(), split_key.as_slice())
    );
    assert_eq!(
        (right.start.as_slice(), right.end.as_slice()),
        (split_key.as_slice(), parent.end.as_slice())
    );
    assert!(left.ver > parent.ver && right.ver > parent.ver);

    // The parent's id and epoch are gone.
    let stale = server.coprocessor(&request(
        &TABLE.count_sum_dag(),
        vec![TABLE.range()],
        server.tso(),
        &parent,
    ));
    let err = stale
        .region_error
        .expect("a region error for the old epoch");
    assert!(
        err.kind == RegionErrorKind::RegionNotFound as i32
            || err.kind == RegionErrorKind::EpochNotMatch as i32,
        "{err:?}"
    );
    // A split key outside the region is refused with a message.
    let bad: SplitResponse = post_proto(
        &server.url(paths::SPLIT),
        &SplitRequest {
            region_id: left.id,
            split_key: TABLE.key(2000),
        },
    );
    assert!(!bad.error.is_empty(), "{bad:?}");

    let want = (3000, (0..3000).map(v_of).sum::<i64>());
    assert_eq!(count_sum(&server), want);
}

#[test]
fn a_region_above_the_split_size_splits_by_itself_and_keeps_every_row() {
    let cluster = Cluster::new(StoreKind::Local);
    let mut cfg = cluster.server_config("server");
    cfg.server.region_split_size = ReadableSize::kib(512);
    cfg.server.split_check_interval = ReadableDuration::millis(200);
    let server = ServerProc::start(&cfg);
    // The checker may split while rows arrive: a write to a splitting region answers Busy,
    // which a loader retries.
    for chunk in (0..6000i64).collect::<Vec<_>>().chunks(500) {
        let req = RawLoadRequest {
            pairs: chunk
                .iter()
                .map(|&h| KvPair {
                    key: TABLE.key(h),
                    value: SampleTable::value(v_of(h), 100),
                })
                .collect(),
        };
        let t = Instant::now();
        loop {
            let r: RawLoadResponse = post_proto(&server.url(paths::RAW_LOAD), &req);
            match r.error {
                None => break,
                Some(e) if e.kind == ErrorKind::Busy as i32 => {
                    assert!(
                        t.elapsed() < Duration::from_secs(30),
                        "busy for 30 s: {e:?}"
                    );
                    std::thread::sleep(Duration::from_millis(50));
                }
                Some(e) => panic!("raw load: {e:?}"),
            }
        }
    }
    // No flush here: the checker counts memtable bytes too, and a flush could meet a split.
    let t0 = Instant::now();
    while server.regions().regions.len() < 2 {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "no size split after 30 s: {:?}",
            server.regions()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Splits go on until every region is below the limit; then the region list stays put (so
    // no split races the reads below).
    let mut regions = server.regions().regions;
    loop {
        std::thread::sleep(Duration::from_millis(800));
        let again = server.regions().regions;
        if again == regions {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "splits never settle: {again:?}"
        );
        regions = again;
    }
    for r in &regions {
        assert!(
            r.approximate_size < 512 * 1024,
            "a region above the limit stayed: {r:?}"
        );
    }
    for w in regions.windows(2) {
        assert_eq!(w[0].end, w[1].start, "children are contiguous: {regions:?}");
    }
    assert!(regions.first().unwrap().start.is_empty() && regions.last().unwrap().end.is_empty());
    assert!(server.metric("stratus_server_region_splits_total", &[("trigger", "size")]) >= 1.0);

    let want = (6000, (0..6000).map(v_of).sum::<i64>());
    assert_eq!(count_sum(&server), want);
    let scan = server.scan(&ScanRequest {
        start: TABLE.range().start,
        end: TABLE.range().end,
        limit: 0,
        start_ts: server.tso(),
        reverse: false,
    });
    assert!(scan.error.is_none(), "{scan:?}");
    assert_eq!(
        scan.entries.len(),
        6000,
        "a transactional scan crosses the split"
    );
}
