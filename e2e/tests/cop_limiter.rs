//! The worker's cop-limiter on a real `stratus-worker`: a flood of concurrent heavy requests
//! (each a full scan answering ~24 MiB) against a worker whose `high-mem-ratio` is low.
//!
//! How the flood test is made meaningful:
//! * **Budget** of one request: the growth of the worker's peak resident set (`VmHWM`, reset
//!   through `/proc/PID/clear_refs`) while that request runs alone on an idle worker. The
//!   request body is tiny (the rows are in SSTs): the memory is the response being built and
//!   encoded, so the body size would say nothing.
//! * **Control**: the same flood on a worker whose limiter never engages (ratio 1 of 1 TiB)
//!   must peak above `memory-limit + budget`: without the limiter, the bound asserted below
//!   fails.
//! * **Limited** worker: the threshold (`high-mem-ratio x memory-limit`) sits a quarter of a
//!   budget above its idle resident set, with ratio 0.1 (so `memory-limit` is ten times the
//!   threshold). A leader request is sent alone, and the rest of the flood only once the
//!   worker's resident set passed the threshold: requests that arrive together at a quiet
//!   worker are all admitted by design (the limiter judges memory already in use), and the
//!   test is about a worker under load. Its peak must stay within `memory-limit + budget`.
//! * The workers run with `MALLOC_MMAP_THRESHOLD_=131072`: glibc otherwise raises its mmap
//!   threshold after the first large free and keeps later large buffers in its arenas, so
//!   the resident set stays high after a request ends, and the limiter, reading it, would
//!   rightly keep every later request waiting until its deadline.
//!
//! A cgroup v2 memory limit takes precedence over `memory-limit`: under one, the limited
//! worker cannot be set up this way and the tests say so and return.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use e2e::cluster::{Cluster, StoreKind};
use e2e::coprocessor::{self, location, rows};
use e2e::offload_body::{self, BodyCapture, OffloadBody};
use e2e::sample_table::{PAD_COLUMN, SampleTable, V_COLUMN};
use e2e::server_proc::ServerProc;
use e2e::worker_proc::{WorkerProc, WorkerSetup};
use prost::Message;
use types::{ReadableDuration, ReadableSize};
use wire::coprocessor::{
    self as proto, ColumnInfo, Context, DagRequest, ExecType, Executor, Request,
};
use wire::datum::{Datum, FieldType};
use worker::CopLimiterSection;

const T: SampleTable = SampleTable { id: 11 };
/// 6000 rows of 4 KiB: a full scan answers ~24 MiB.
const ROWS: i64 = 6000;
const PAD: usize = 4096;
const FLOOD: usize = 16;
/// Of the flood after the leader, the last ones go through a server offloading to the worker.
const THROUGH_SERVER: usize = 4;
const HIGH_MEM_RATIO: f64 = 0.1;
const WAIT_MIN: Duration = Duration::from_millis(150);
const WAIT_MAX: Duration = Duration::from_secs(1);
/// Long enough for every response of a test to stay in the throughput window.
const SAMPLE_TTL_SECS: u64 = 600;
/// `cop-limiter.memory-limit` of the control worker: never reached.
const NO_LIMIT: u64 = 1 << 40;
const MIB: u64 = 1 << 20;

/// `SELECT v, pad FROM t`.
fn heavy_dag() -> DagRequest {
    let column = |id, tp: FieldType| ColumnInfo {
        column_id: id,
        tp: tp as i32,
        pk_handle: false,
        default_val: Vec::new(),
    };
    DagRequest {
        executors: vec![Executor {
            tp: ExecType::TableScan as i32,
            tbl_scan: Some(proto::TableScan {
                table_id: T.id,
                columns: vec![
                    column(V_COLUMN, FieldType::Int64),
                    column(PAD_COLUMN, FieldType::Bytes),
                ],
                desc: false,
            }),
            ..Executor::default()
        }],
        ..DagRequest::default()
    }
}

fn routed(server: &ServerProc, keyspace_id: u32) -> Request {
    let region = server.region_of(&T.key(0));
    let mut req = coprocessor::request(&heavy_dag(), vec![T.range()], server.tso(), &region);
    req.context.get_or_insert_with(Context::default).keyspace_id = keyspace_id;
    req
}

fn unix_ms_in(d: Duration) -> u64 {
    (SystemTime::now() + d)
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// `body` for `keyspace_id`, with a deadline `in` from now (None: no deadline).
fn for_keyspace(
    body: &OffloadBody,
    keyspace_id: u32,
    deadline_in: Option<Duration>,
) -> OffloadBody {
    body.with_request(|r| {
        let ctx = r.context.get_or_insert_with(Context::default);
        ctx.keyspace_id = keyspace_id;
        ctx.deadline_ms = deadline_in.map_or(0, unix_ms_in);
    })
}

fn worker_config(cluster: &Cluster, name: &str, ratio: f64, memory_limit: u64) -> WorkerSetup {
    let mut c = cluster.worker_config(name);
    c.worker.block_cache_size = ReadableSize::mib(4);
    c.cop_limiter = CopLimiterSection {
        high_mem_ratio: ratio,
        memory_limit: ReadableSize(memory_limit),
        wait_min_duration: ReadableDuration(WAIT_MIN),
        wait_max_duration: ReadableDuration(WAIT_MAX),
        sample_ttl: ReadableDuration::secs(SAMPLE_TTL_SECS),
    };
    c.env("MALLOC_MMAP_THRESHOLD_", "131072");
    c
}

/// Whether the worker's limit is its configured `memory-limit` (not a cgroup's).
fn limit_is_configured(worker: &WorkerProc) -> bool {
    let status = worker.status();
    let source = &status["cop_limiter"]["limit_source"];
    if source != "configured" {
        eprintln!(
            "skipping: the worker's memory limit comes from {source}, not from memory-limit \
             (a cgroup v2 limit applies), so this test cannot place its threshold"
        );
        return false;
    }
    true
}

/// The worker's resident set once settled after a warm-up request: (idle bytes, budget bytes)
/// where the budget is the largest peak growth over two requests run alone.
fn idle_and_budget(worker: &WorkerProc, body: &OffloadBody) -> (u64, u64) {
    offload_body::run(worker, body);
    std::thread::sleep(Duration::from_millis(300));
    let idle = worker.proc_status_bytes("VmRSS");
    let mut budget = 0;
    for _ in 0..2 {
        let before = worker.proc_status_bytes("VmRSS");
        assert!(worker.reset_peak_rss(), "cannot reset VmHWM");
        offload_body::run(worker, body);
        budget = budget.max(worker.proc_status_bytes("VmHWM").saturating_sub(before));
        std::thread::sleep(Duration::from_millis(200));
    }
    (idle, budget)
}

/// Posts every body at once; the replies in order.
fn flood(worker: &WorkerProc, bodies: &[OffloadBody]) -> Vec<node::HttpReply> {
    std::thread::scope(|s| {
        let threads: Vec<_> = bodies
            .iter()
            .map(|b| s.spawn(|| offload_body::post(worker, b)))
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    })
}

/// `le` bucket of `stratus_worker_cop_limiter_wait_seconds`.
fn wait_bucket(worker: &WorkerProc, le: &str) -> f64 {
    worker.metric(
        "stratus_worker_cop_limiter_wait_seconds_bucket",
        &[("le", le)],
    )
}

#[test]
fn a_flood_of_heavy_requests_stays_within_the_limit_plus_one_request_and_none_is_lost() {
    let cluster = Cluster::new(StoreKind::Local);
    let capture = BodyCapture::start(&cluster, "server", |_| {});
    T.load(&capture.server, 0..ROWS, PAD, |h| h);
    capture.server.flush();
    let (local, heavy) = capture.capture(&routed(&capture.server, 0));
    let expected: Vec<Vec<Datum>> = rows(&local).unwrap();
    assert_eq!(expected.len(), ROWS as usize);

    // Control: the flood on a worker whose limiter never engages.
    let mut control = WorkerProc::start(&worker_config(&cluster, "control", 1.0, NO_LIMIT));
    if !limit_is_configured(&control) {
        return;
    }
    let (idle, budget) = idle_and_budget(&control, &heavy);
    assert!(
        budget > 16 * MIB,
        "a heavy request grows the worker: {budget} bytes"
    );
    assert!(control.reset_peak_rss());
    let replies = flood(&control, &vec![heavy.clone(); FLOOD]);
    assert!(replies.iter().all(|r| r.status.as_u16() == 200));
    let control_peak = control.proc_status_bytes("VmHWM");
    control.kill();

    let threshold = idle + budget / 4;
    let memory_limit = (threshold as f64 / HIGH_MEM_RATIO) as u64;
    let bound = memory_limit + budget;
    eprintln!(
        "idle {} MiB, budget {} MiB, threshold {} MiB, memory-limit {} MiB, bound {} MiB, \
         control peak {} MiB",
        idle / MIB,
        budget / MIB,
        threshold / MIB,
        memory_limit / MIB,
        bound / MIB,
        control_peak / MIB
    );
    assert!(
        control_peak > bound,
        "without the limiter the flood must exceed memory-limit + budget, or the bound proves \
         nothing: peak {control_peak} <= {bound}"
    );

    // The limited worker, and a server offloading to it (same table, its own files).
    let worker = WorkerProc::start(&worker_config(
        &cluster,
        "limited",
        HIGH_MEM_RATIO,
        memory_limit,
    ));
    let mut via_cfg = cluster.server_config("via");
    via_cfg.server.node_id = 2;
    via_cfg.kvengine.remote_coprocessor_max_retries = 1;
    via_cfg.offload_all_to_worker(&worker);
    let via = ServerProc::start(&via_cfg);
    T.load(&via, 0..ROWS, PAD, |h| h);
    via.flush();

    let mut sent: BTreeMap<u32, u64> = BTreeMap::new();
    let warm = offload_body::post(&worker, &for_keyspace(&heavy, 9, None));
    assert_eq!(warm.status.as_u16(), 200);
    *sent.entry(9).or_default() += warm.body.len() as u64;
    std::thread::sleep(Duration::from_millis(300));
    let idle_limited = worker.proc_status_bytes("VmRSS");
    assert!(
        idle_limited < threshold,
        "the idle worker ({idle_limited} bytes) must be below the threshold ({threshold}), or \
         every request would wait"
    );
    assert!(worker.reset_peak_rss());
    let rounds_before = worker.metric("stratus_worker_cop_limiter_throttled_rounds_total", &[]);

    let deadline = Some(Duration::from_secs(20));
    let (worker_ref, via_ref) = (&worker, &via);
    let (leader, direct, via_server) = std::thread::scope(|s| {
        let leader_body = for_keyspace(&heavy, 1, deadline);
        let leader = s.spawn(move || offload_body::post(worker_ref, &leader_body));
        // The rest of the flood once the leader's memory shows.
        let started = Instant::now();
        while worker.proc_status_bytes("VmRSS") <= threshold {
            assert!(
                !leader.is_finished(),
                "the leader finished before the worker's memory passed the threshold"
            );
            assert!(started.elapsed() < Duration::from_secs(10));
            std::thread::sleep(Duration::from_millis(1));
        }
        let direct: Vec<_> = (0..FLOOD - 1 - THROUGH_SERVER)
            .map(|i| {
                let body = for_keyspace(&heavy, 1 + (i % 2) as u32, deadline);
                let keyspace = body.request.context.as_ref().unwrap().keyspace_id;
                (
                    keyspace,
                    s.spawn(move || offload_body::post(worker_ref, &body)),
                )
            })
            .collect();
        let via_server: Vec<_> = (0..THROUGH_SERVER)
            .map(|_| s.spawn(move || via_ref.coprocessor(&routed(via_ref, 3))))
            .collect();
        (
            leader.join().unwrap(),
            direct
                .into_iter()
                .map(|(k, t)| (k, t.join().unwrap()))
                .collect::<Vec<_>>(),
            via_server
                .into_iter()
                .map(|t| t.join().unwrap())
                .collect::<Vec<_>>(),
        )
    });
    let peak = worker.proc_status_bytes("VmHWM");

    // Every direct request succeeded with the right rows, or got 503.
    let (mut ok, mut unavailable) = (0, 0);
    for (keyspace, reply) in std::iter::once((1, leader)).chain(direct) {
        match reply.status.as_u16() {
            200 => {
                let resp = proto::Response::decode(reply.body.as_ref()).unwrap();
                assert_eq!(rows(&resp).unwrap(), expected, "a corrupted answer");
                *sent.entry(keyspace).or_default() += reply.body.len() as u64;
                ok += 1;
            }
            503 => {
                let reason = String::from_utf8_lossy(&reply.body);
                assert!(reason.contains("high-mem-ratio"), "{reason}");
                unavailable += 1;
            }
            other => panic!(
                "expected 200 or 503, found {other}: {}",
                String::from_utf8_lossy(&reply.body)
            ),
        }
    }
    assert_eq!(ok + unavailable, FLOOD - THROUGH_SERVER);
    // Through the server: remote, or local after 503s; always the right rows.
    let mut locations = BTreeMap::<String, usize>::new();
    for resp in &via_server {
        assert_eq!(rows(resp).unwrap(), expected, "{:?}", resp.exec_details);
        *locations.entry(location(resp).to_string()).or_default() += 1;
    }
    assert!(
        locations.keys().all(|l| l == "remote" || l == "fallback"),
        "{locations:?}"
    );
    eprintln!(
        "limited worker: peak {} MiB (bound {} MiB); direct: {ok} ok, {unavailable} 503; \
         through the server: {locations:?}",
        peak / MIB,
        bound / MIB
    );
    assert!(
        peak <= bound,
        "peak resident set {peak} above memory-limit + one request's budget {bound}"
    );

    // Requests waited, each round within [min, max] (to the histogram's buckets: 128 ms below
    // the 150 ms minimum, 1.024 s above the 1 s maximum).
    let rounds =
        worker.metric("stratus_worker_cop_limiter_throttled_rounds_total", &[]) - rounds_before;
    let count = worker.metric("stratus_worker_cop_limiter_wait_seconds_count", &[]);
    let sum = worker.metric("stratus_worker_cop_limiter_wait_seconds_sum", &[]);
    assert!(
        rounds >= (FLOOD - 1 - THROUGH_SERVER) as f64,
        "the flood waited: {rounds} rounds"
    );
    assert_eq!(count, rounds, "one observation per round");
    assert_eq!(wait_bucket(&worker, "0.128"), 0.0, "a wait below wait-min");
    assert_eq!(
        wait_bucket(&worker, "1.024"),
        count,
        "a wait above wait-max"
    );
    let mean = sum / count;
    assert!(
        (WAIT_MIN.as_secs_f64()..=WAIT_MAX.as_secs_f64()).contains(&mean),
        "mean wait {mean}"
    );
    let rejections = worker.metric("stratus_worker_cop_limiter_rejections_total", &[]);
    assert!(rejections >= unavailable as f64);
    assert_eq!(worker.requests("throttled"), rejections);

    // Throughput per keyspace: what the test received, over the window.
    let status = worker.status();
    let throughput = &status["keyspace_throughput"];
    for (keyspace, bytes) in &sent {
        let rate = throughput[keyspace.to_string()].as_f64().unwrap_or(0.0);
        assert!(
            (rate * SAMPLE_TTL_SECS as f64 - *bytes as f64).abs() < 1.0,
            "keyspace {keyspace}: {rate} bytes/s over {SAMPLE_TTL_SECS}s, received {bytes} bytes"
        );
    }
    if locations.contains_key("remote") {
        assert!(
            throughput["3"].as_f64().unwrap_or(0.0) > 0.0,
            "{throughput}"
        );
    }
}

#[test]
fn a_worker_over_its_memory_ratio_answers_503_and_the_server_answers_locally() {
    let cluster = Cluster::new(StoreKind::Local);
    // 1 MiB of memory: the worker's own resident set is far over any ratio.
    let worker = WorkerProc::start(&worker_config(&cluster, "worker", 0.5, MIB));
    if !limit_is_configured(&worker) {
        return;
    }
    let mut cfg = cluster.server_config("server");
    cfg.offload_all_to_worker(&worker);
    cfg.kvengine.remote_coprocessor_max_retries = 0;
    let server = ServerProc::start(&cfg);
    T.load(&server, 0..200, 16, |h| 3 * h);
    server.flush();
    let fallbacks = |s: &ServerProc| {
        s.metric(
            "stratus_server_offload_fallbacks_total",
            &[("cause", "unavailable")],
        )
    };
    let before = fallbacks(&server);

    let region = server.region_of(&T.key(0));
    let req = coprocessor::request(&T.count_sum_dag(), vec![T.range()], server.tso(), &region);
    let started = Instant::now();
    let resp = server.coprocessor(&req);
    let took = started.elapsed();
    assert_eq!(location(&resp), "fallback", "{:?}", resp.exec_details);
    assert_eq!(
        rows(&resp).unwrap(),
        SampleTable::count_sum_rows((0..200).map(|h| 3 * h))
    );
    assert_eq!(fallbacks(&server) - before, 1.0);
    assert_eq!(worker.requests("throttled"), 1.0);
    assert_eq!(worker.requests("ok"), 0.0);
    // Without a deadline the worker waits at most its default budget (5 s).
    assert!(took < Duration::from_secs(8), "{took:?}");
    let status = worker.status();
    assert!(status["cop_limiter"]["memory_ratio"].as_f64().unwrap() > 0.5);
    assert_eq!(
        status["keyspace_throughput"].as_object().map(|m| m.len()),
        Some(0),
        "nothing was answered"
    );
}
