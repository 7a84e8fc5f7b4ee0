//! The worker's cop-limiter on a real `stratus-worker`: a flood of concurrent heavy requests
//! (each a full scan answering ~24 MiB) against a worker whose threshold sits just above its
//! idle memory.
//!
//! The limit is the test's own: the workers run with `memory-source = "process"`, so the
//! limiter judges their resident set against the `memory-limit` the test derives from what it
//! measured, whether or not a cgroup limits the machine (as in CI containers).
//!
//! How the flood test is made meaningful, and independent of scheduling:
//! * **Budget** of one request: the growth of the worker's peak resident set (`VmHWM`, reset
//!   through `/proc/PID/clear_refs`) while that request runs alone on an idle worker. The
//!   request body is tiny (the rows are in SSTs): the memory is the response being built and
//!   encoded, so the body size would say nothing.
//! * **Held answer**: a heavy request whose answer the test does not read. Once the worker has
//!   built it, the encoded answer stays in the worker's memory (beyond what the socket buffers
//!   take) until the test reads it: memory above the threshold for exactly as long as the test
//!   wants, with no request running. Its size is measured on the control worker.
//! * **Control**: the same flood on a worker whose limiter never engages (ratio 1 of 1 TiB)
//!   runs many requests at once and peaks far above the bound asserted below.
//! * **Limited** worker: the threshold (`high-mem-ratio x memory-limit`) sits half a held answer
//!   above its idle resident set. The flood is sent while an answer is held, and released only
//!   once every request of it has found memory high and waited a round (a state the test waits
//!   for, not a time). From then on, the limiter alone decides who runs: the worker's
//!   `running_peak` (the most admitted requests running at once, from `GET /status`) must stay
//!   within [`MAX_RUNNING`] (one), and its peak resident set within the threshold plus one
//!   budget (and a quarter of one, for what two runs of the same request differ by). A limiter
//!   that lets even one extra request through fails the first; one that lets a few through
//!   fails both.
//! * `wait-min-duration` (which also spaces admissions while requests wait) is long next to the
//!   time an admitted request takes to show its memory (600 ms against tens of milliseconds),
//!   so a correct limiter runs one request at a time however the machine schedules it.
//! * The workers run with `MALLOC_MMAP_THRESHOLD_=131072`: glibc otherwise raises its mmap
//!   threshold after the first large free and keeps later large buffers in its arenas, so
//!   the resident set stays high after a request ends, and the limiter, reading it, would
//!   rightly keep every later request waiting until its deadline.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
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
use worker::cop_limiter::DEFAULT_WAIT_BUDGET;
use worker::{CopLimiterSection, MemorySourceKind};

const T: SampleTable = SampleTable { id: 11 };
/// 6000 rows of 4 KiB: a full scan answers ~24 MiB.
const ROWS: i64 = 6000;
const PAD: usize = 4096;
const FLOOD: usize = 16;
/// Of the flood, the last ones go through a server offloading to the worker.
const THROUGH_SERVER: usize = 4;
/// The most admitted requests the limited worker may run at once. A heavy request shows its
/// memory within a few tens of milliseconds of its admission (measured on a loaded 2-core
/// machine), and admissions are `wait-min-duration` apart while requests wait: a correct
/// limiter never admits a second request beside a running one.
const MAX_RUNNING: u64 = 1;
const HIGH_MEM_RATIO: f64 = 0.1;
const WAIT_MIN: Duration = Duration::from_millis(600);
const WAIT_MAX: Duration = Duration::from_millis(1200);
/// Deadline of the flood's requests: long enough for several to run one after the other.
const FLOOD_DEADLINE: Duration = Duration::from_secs(20);
/// Long enough for every response of a test to stay in the throughput window.
const SAMPLE_TTL_SECS: u64 = 600;
/// `cop-limiter.memory-limit` of the control worker: never reached.
const NO_LIMIT: u64 = 1 << 40;
const MIB: u64 = 1 << 20;
/// How long the test waits for a state of the worker before it fails.
const STATE_TIMEOUT: Duration = Duration::from_secs(120);

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

/// A worker judging its own resident set against `memory_limit`, whatever cgroup it runs in.
fn worker_config(cluster: &Cluster, name: &str, ratio: f64, memory_limit: u64) -> WorkerSetup {
    let mut c = cluster.worker_config(name);
    c.worker.block_cache_size = ReadableSize::mib(4);
    c.cop_limiter = CopLimiterSection {
        high_mem_ratio: ratio,
        memory_limit: ReadableSize(memory_limit),
        memory_source: MemorySourceKind::Process,
        wait_min_duration: ReadableDuration(WAIT_MIN),
        wait_max_duration: ReadableDuration(WAIT_MAX),
        sample_ttl: ReadableDuration::secs(SAMPLE_TTL_SECS),
    };
    c.env("MALLOC_MMAP_THRESHOLD_", "131072");
    c
}

/// The worker's limit is the configured `memory-limit`, never a cgroup's: the test placed it.
fn assert_limit_is_configured(worker: &WorkerProc, memory_limit: u64) {
    let status = worker.status();
    let limiter = &status["cop_limiter"];
    assert_eq!(limiter["limit_source"], "configured", "{limiter}");
    assert_eq!(
        limiter["memory_limit"].as_u64(),
        Some(memory_limit),
        "{limiter}"
    );
}

/// `running_peak` of the worker's `GET /status`: the most admitted requests run at once.
fn running_peak(worker: &WorkerProc) -> u64 {
    let status = worker.status();
    status["cop_limiter"]["running_peak"]
        .as_u64()
        .unwrap_or_else(|| panic!("no running_peak in {status}"))
}

/// `waiting` of the worker's `GET /status`: the requests waiting for memory now.
fn waiting(worker: &WorkerProc) -> u64 {
    let status = worker.status();
    status["cop_limiter"]["waiting"]
        .as_u64()
        .unwrap_or_else(|| panic!("no waiting in {status}"))
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

/// Waits until `f` holds, polling; fails with `what` after [`STATE_TIMEOUT`].
fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + STATE_TIMEOUT;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A request whose answer the test has not read: once the worker has built it, the answer
/// waits in the worker's memory (all but what the socket buffers take) until [`Held::read`].
struct Held {
    stream: TcpStream,
}

impl Held {
    /// Posts `body` over a connection of its own, and waits until the worker has built the
    /// answer (its count of `ok` requests grew).
    fn send(worker: &WorkerProc, body: &OffloadBody) -> Held {
        let ok_before = worker.requests("ok");
        let addr = worker.base_url().trim_start_matches("http://");
        let mut stream = TcpStream::connect(addr).expect("connect to the worker");
        let body = body.encode();
        let head = format!(
            "POST /coprocessor HTTP/1.1\r\nHost: {addr}\r\nContent-Type: {}\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n",
            wire::PROTOBUF_CONTENT_TYPE,
            body.len()
        );
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(&body).unwrap();
        stream.flush().unwrap();
        wait_until("the worker built the held answer", || {
            worker.requests("ok") > ok_before
        });
        Held { stream }
    }

    /// Reads the whole answer: its status and body.
    fn read(mut self) -> (u16, Vec<u8>) {
        let mut raw = Vec::new();
        self.stream
            .read_to_end(&mut raw)
            .expect("read the held answer");
        let split = raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("an HTTP head");
        let head = String::from_utf8_lossy(&raw[..split]).to_string();
        let status: u16 = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no status in {head}"));
        let body = raw[split + 4..].to_vec();
        let length = head
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse::<usize>().ok())
                    .flatten()
            })
            .unwrap_or_else(|| panic!("no content-length in {head}"));
        assert_eq!(body.len(), length, "the whole body");
        (status, body)
    }
}

/// The rows of a 200 answer.
fn answer_rows(status: u16, body: &[u8]) -> Vec<Vec<Datum>> {
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(body));
    rows(&proto::Response::decode(body).unwrap()).unwrap()
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

fn throttled_rounds(worker: &WorkerProc) -> f64 {
    worker.metric("stratus_worker_cop_limiter_throttled_rounds_total", &[])
}

#[test]
fn a_flood_of_heavy_requests_runs_one_at_a_time_within_the_memory_bound_and_none_is_lost() {
    let cluster = Cluster::new(StoreKind::Local);
    let capture = BodyCapture::start(&cluster, "server", |_| {});
    T.load(&capture.server, 0..ROWS, PAD, |h| h);
    capture.server.flush();
    let (local, heavy) = capture.capture(&routed(&capture.server, 0));
    let expected: Vec<Vec<Datum>> = rows(&local).unwrap();
    assert_eq!(expected.len(), ROWS as usize);

    // Control: a worker whose limiter never engages. What one request costs, what a held
    // answer keeps, and the flood.
    let mut control = WorkerProc::start(&worker_config(&cluster, "control", 1.0, NO_LIMIT));
    assert_limit_is_configured(&control, NO_LIMIT);
    let (idle, budget) = idle_and_budget(&control, &heavy);
    assert!(
        budget > 16 * MIB,
        "a heavy request grows the worker: {budget} bytes"
    );
    let before_held = control.proc_status_bytes("VmRSS");
    let held = Held::send(&control, &heavy);
    let held_bytes = control
        .proc_status_bytes("VmRSS")
        .saturating_sub(before_held);
    let (status, body) = held.read();
    assert_eq!(answer_rows(status, &body), expected);
    assert!(
        held_bytes > 8 * MIB,
        "a held answer keeps the worker's memory up: {held_bytes} bytes"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(control.reset_peak_rss());
    let replies = flood(&control, &vec![heavy.clone(); FLOOD]);
    assert!(replies.iter().all(|r| r.status.as_u16() == 200));
    let control_peak = control.proc_status_bytes("VmHWM");
    let control_running = running_peak(&control);
    control.kill();

    let threshold = idle + held_bytes / 2;
    let memory_limit = (threshold as f64 / HIGH_MEM_RATIO) as u64;
    let bound = threshold + MAX_RUNNING * budget + budget / 4;
    eprintln!(
        "idle {} MiB, budget {} MiB, held answer {} MiB, threshold {} MiB, memory-limit {} MiB, \
         bound {} MiB; control: peak {} MiB, {control_running} running at once",
        idle / MIB,
        budget / MIB,
        held_bytes / MIB,
        threshold / MIB,
        memory_limit / MIB,
        bound / MIB,
        control_peak / MIB,
    );
    assert!(
        control_running > MAX_RUNNING + 2,
        "without the limiter the flood runs many requests at once, or the bound on running \
         requests proves nothing: {control_running}"
    );
    assert!(
        control_peak > bound + budget,
        "without the limiter the flood exceeds the memory bound by more than a request, or the \
         bound proves nothing: peak {control_peak} <= {bound} + {budget}"
    );

    // The limited worker, and a server offloading to it (same table, its own files).
    let worker = WorkerProc::start(&worker_config(
        &cluster,
        "limited",
        HIGH_MEM_RATIO,
        memory_limit,
    ));
    assert_limit_is_configured(&worker, memory_limit);
    let mut via_cfg = cluster.server_config("via");
    via_cfg.server.node_id = 2;
    via_cfg.kvengine.remote_coprocessor_max_retries = 1;
    via_cfg.kvengine.remote_coprocessor_timeout = ReadableDuration(FLOOD_DEADLINE * 2);
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
    let rounds_before = throttled_rounds(&worker);

    // Memory high, nothing running: every request of the flood must wait.
    let held = Held::send(&worker, &for_keyspace(&heavy, 1, None));
    let held_rss = worker.proc_status_bytes("VmRSS");
    assert!(
        held_rss > threshold,
        "the held answer keeps the worker above its threshold: {held_rss} <= {threshold}"
    );
    let deadline = Some(FLOOD_DEADLINE);
    let (worker_ref, via_ref) = (&worker, &via);
    let (held_len, direct, via_server) = std::thread::scope(|s| {
        let direct: Vec<_> = (0..FLOOD - THROUGH_SERVER)
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
        // Every request of the flood found memory high and waits (or the limiter let one
        // run while memory was high: the assertion below says so at once).
        wait_until("every request of the flood waits for memory", || {
            waiting(worker_ref) == FLOOD as u64 || running_peak(worker_ref) > 1
        });
        assert_eq!(
            running_peak(worker_ref),
            1,
            "the limiter let a request of the flood run while the held answer kept memory high"
        );
        // Release: from now on the limiter alone decides who runs.
        let (status, body) = held.read();
        assert_eq!(answer_rows(status, &body), expected);
        (
            body.len() as u64,
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
    *sent.entry(1).or_default() += held_len;
    let peak = worker.proc_status_bytes("VmHWM");
    let running = running_peak(&worker);

    // Every direct request succeeded with the right rows, or got 503.
    let (mut ok, mut unavailable) = (0, 0);
    for (keyspace, reply) in direct {
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
    assert!(ok > 0, "some requests ran once memory dropped");
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
        "limited worker: {running} running at once, peak {} MiB (bound {} MiB); direct: {ok} \
         ok, {unavailable} 503; through the server: {locations:?}",
        peak / MIB,
        bound / MIB
    );
    assert!(
        running <= MAX_RUNNING,
        "{running} requests ran at once, more than {MAX_RUNNING}"
    );
    assert!(
        peak <= bound,
        "peak resident set {peak} above the threshold plus {MAX_RUNNING} budget(s) {bound}"
    );

    // Requests waited, each round within [min, max] (to the histogram's buckets: 0.512 below
    // the 0.6 s minimum, 1.024 below the 1.2 s maximum, 2.048 above it).
    let rounds = throttled_rounds(&worker) - rounds_before;
    let count = worker.metric("stratus_worker_cop_limiter_wait_seconds_count", &[]);
    let sum = worker.metric("stratus_worker_cop_limiter_wait_seconds_sum", &[]);
    assert!(rounds >= FLOOD as f64, "the flood waited: {rounds} rounds");
    assert_eq!(count, rounds, "one observation per round");
    assert_eq!(wait_bucket(&worker, "0.512"), 0.0, "a wait below wait-min");
    assert_eq!(
        wait_bucket(&worker, "2.048"),
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
    assert_limit_is_configured(&worker, MIB);
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
    let resp = server.coprocessor(&req);
    assert_eq!(location(&resp), "fallback", "{:?}", resp.exec_details);
    assert_eq!(
        rows(&resp).unwrap(),
        SampleTable::count_sum_rows((0..200).map(|h| 3 * h))
    );
    // The server fell back because the worker answered 503 (not because it timed out).
    assert_eq!(fallbacks(&server) - before, 1.0);
    assert_eq!(worker.requests("throttled"), 1.0);
    assert_eq!(worker.requests("ok"), 0.0);
    assert_eq!(
        worker.metric("stratus_worker_cop_limiter_rejections_total", &[]),
        1.0
    );
    // Without a deadline the worker's sleeps fit in its default budget (5 s): the sum of the
    // durations it drew, whatever the machine's load made of them.
    let slept = worker.metric("stratus_worker_cop_limiter_wait_seconds_sum", &[]);
    assert!(
        slept <= DEFAULT_WAIT_BUDGET.as_secs_f64(),
        "slept {slept} s, more than the default budget"
    );
    assert!(
        worker.metric("stratus_worker_cop_limiter_wait_seconds_count", &[]) >= 1.0,
        "the worker waited before answering 503"
    );
    let status = worker.status();
    assert!(status["cop_limiter"]["memory_ratio"].as_f64().unwrap() > 0.5);
    assert_eq!(status["cop_limiter"]["running_peak"], 0, "nothing ran");
    assert_eq!(
        status["keyspace_throughput"].as_object().map(|m| m.len()),
        Some(0),
        "nothing was answered"
    );
}
