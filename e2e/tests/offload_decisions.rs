//! The offload decision of a real server, one reason at a time, each set up by exactly its
//! condition and read back from `tikv_coprocessor_remote_decision_total{result,reason}`:
//! `num_ranges` (many ranges), `blocks_size` (enough SST blocks), `long_query_blocks_size` (a
//! start_ts 20 s in the past lowers the threshold by half), `below_min_blocks_size` (neither).
//! The per-reason counts must add up to exactly the requests the test sent.

use std::time::{SystemTime, UNIX_EPOCH};

use cop::proto::KeyRange;
use e2e::cluster::{Cluster, StoreKind};
use e2e::coprocessor::{location, request};
use e2e::sample_table::SampleTable;
use e2e::server_proc::ServerProc;
use e2e::worker_proc::WorkerProc;

const T: SampleTable = SampleTable { id: 11 };
const ROWS: i64 = 3000;
const REASONS: [(&str, &str); 4] = [
    ("remote", "num_ranges"),
    ("remote", "blocks_size"),
    ("remote", "long_query_blocks_size"),
    ("local", "below_min_blocks_size"),
];

fn counts(server: &ServerProc) -> Vec<f64> {
    REASONS
        .iter()
        .map(|&(result, reason)| {
            server.metric(
                "tikv_coprocessor_remote_decision_total",
                &[("result", result), ("reason", reason)],
            )
        })
        .collect()
}

/// A timestamp `secs_ago` seconds in the past (physical ms << 18).
fn ts_ago(secs_ago: u64) -> u64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    (now - secs_ago * 1000) << 18
}

fn send(server: &ServerProc, ranges: Vec<KeyRange>, start_ts: u64) -> String {
    let region = server.region_of(&T.key(0));
    let resp = server.coprocessor(&request(&T.count_sum_dag(), ranges, start_ts, &region));
    e2e::coprocessor::assert_answered(&resp, "decision request");
    location(&resp).to_string()
}

#[test]
fn each_reason_is_counted_under_exactly_its_condition() {
    let cluster = Cluster::new(StoreKind::Local);
    let worker = WorkerProc::start(&cluster.worker_config("worker"));
    let mut cfg = cluster.server_config("server");
    let mut server = ServerProc::start(&cfg);
    T.load(&server, 0..ROWS, 64, |h| h);
    server.flush();
    // The table's blocks, as the estimate sees them (the memtable is empty after the flush).
    let size = server.region_of(&T.key(0)).approximate_size;
    assert!(size > 10_000, "a table of many blocks: {size}");
    server.terminate();

    // Threshold 1.5× the table: a fresh full scan stays local, one 20 s old (threshold /2)
    // goes remote; 8 ranges go remote by count.
    cfg.set(
        "kvengine",
        "remote-coprocessor-addr",
        worker.coprocessor_url(),
    )
    .set(
        "kvengine",
        "remote-coprocessor-min-blocks-size",
        (size * 3 / 2) as i64,
    )
    .set("kvengine", "remote-coprocessor-num-ranges", 8);
    let mut server = ServerProc::start(&cfg);
    let before = counts(&server);
    let points: Vec<KeyRange> = (0..8)
        .map(|i| KeyRange::new(T.key(i * 100), T.key(i * 100 + 1)))
        .collect();
    let seven = points[..7].to_vec();
    assert_eq!(send(&server, vec![T.range()], server.tso()), "local");
    assert_eq!(send(&server, vec![T.range()], ts_ago(20)), "remote");
    assert_eq!(send(&server, points, server.tso()), "remote");
    assert_eq!(send(&server, seven, server.tso()), "local");
    let after = counts(&server);
    let delta: Vec<f64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    assert_eq!(delta, vec![1.0, 0.0, 1.0, 2.0], "per reason {REASONS:?}");
    assert_eq!(
        delta.iter().sum::<f64>(),
        4.0,
        "every decision counted once"
    );
    server.terminate();

    // Threshold half the table: a fresh full scan goes remote by blocks size.
    cfg.set(
        "kvengine",
        "remote-coprocessor-min-blocks-size",
        (size / 2) as i64,
    );
    let server = ServerProc::start(&cfg);
    let before = counts(&server);
    assert_eq!(send(&server, vec![T.range()], server.tso()), "remote");
    let after = counts(&server);
    let delta: Vec<f64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    assert_eq!(delta, vec![0.0, 1.0, 0.0, 0.0], "per reason {REASONS:?}");
}
