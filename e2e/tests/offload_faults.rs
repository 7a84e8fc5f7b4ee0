//! Offload failures: whatever happens to the worker or its object store, the server answers
//! correctly (falling back to local execution when the worker cannot), retries only what is
//! worth retrying, and the worker rejects bad bodies with 400.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::time::{Duration, Instant};

use e2e::cluster::{Cluster, StoreKind};
use e2e::coprocessor::{self, location};
use e2e::fake_worker::FakeWorker;
use e2e::s3_proc::S3Faults;
use e2e::sample_table::SampleTable;
use e2e::server_proc::{ServerCopCounters, ServerProc};
use e2e::worker_proc::WorkerProc;
use rand::{Rng, SeedableRng};
use types::ReadableDuration;
use wire::coprocessor::Response;
use wire::placement::FallbackCause;

const T: SampleTable = SampleTable { id: 3 };
const ROWS: i64 = 400;

/// Loads rows `0..ROWS` (`v = 2 * handle`), flushed to an SST when `flush`.
fn load(server: &ServerProc, flush: bool) {
    T.load(server, 0..ROWS, 32, |h| 2 * h);
    if flush {
        server.flush();
    }
}

fn count_sum(server: &ServerProc) -> Response {
    let region = server.region_of(&T.key(0));
    let req = coprocessor::request(&T.count_sum_dag(), vec![T.range()], server.tso(), &region);
    server.coprocessor(&req)
}

/// The answer every execution path must give.
fn assert_correct(resp: &Response) {
    assert_eq!(
        coprocessor::rows(resp).unwrap(),
        SampleTable::count_sum_rows((0..ROWS).map(|h| 2 * h)),
        "exec details {:?}",
        resp.exec_details
    );
}

fn fallbacks(server: &ServerProc, cause: FallbackCause) -> f64 {
    server.metric(
        "stratus_server_offload_fallbacks_total",
        &[("cause", cause.as_str())],
    )
}

#[test]
fn killing_the_worker_mid_request_falls_back_to_the_local_answer() {
    let cluster = Cluster::new(StoreKind::S3);
    // The worker reaches the bucket through an endpoint whose GETs take 3 s: a request stays
    // in flight long enough to kill the worker under it.
    let slow_s3 = cluster.s3_endpoint_with(S3Faults {
        get_delay_ms: 3000,
        ..S3Faults::default()
    });
    let worker_cfg =
        e2e::worker_proc::WorkerSetup::new(&cluster.path("worker"), &cluster.store_at(&slow_s3));
    let mut worker = WorkerProc::start(&worker_cfg);
    let mut cfg = cluster.server_config("server");
    cfg.offload_all_to_worker(&worker);
    let server = ServerProc::start(&cfg);
    load(&server, true);
    let before = ServerCopCounters::read(&server);

    let resp = std::thread::scope(|s| {
        let request = s.spawn(|| count_sum(&server));
        let deadline = Instant::now() + Duration::from_secs(20);
        while worker.in_flight() < 1.0 {
            assert!(
                Instant::now() < deadline,
                "the request never reached the worker\n{}",
                server.output_report()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        worker.kill();
        request.join().expect("request thread")
    });
    coprocessor::assert_answered(&resp, "request whose worker died");
    assert_eq!(location(&resp), "fallback", "{:?}", resp.exec_details);
    assert_correct(&resp);
    let delta = ServerCopCounters::read(&server).since(&before);
    assert_eq!(delta.fallbacks, 1.0, "{delta:?}");
    assert_eq!(delta.fallback, 1.0, "{delta:?}");
    // The broken connection, then max-retries = 2 refused connections.
    assert_eq!(delta.retries, 2.0, "{delta:?}");
    assert_eq!(fallbacks(&server, FallbackCause::Connect), 1.0);
}

#[test]
fn a_worker_answering_503_is_retried_then_the_server_falls_back() {
    let cluster = Cluster::new(StoreKind::Local);
    let fake = FakeWorker::start(503, b"busy");
    let mut cfg = cluster.server_config("server");
    cfg.offload_all_to(&fake.coprocessor_url());
    cfg.kvengine.remote_coprocessor_max_retries = 2;
    cfg.kvengine.remote_coprocessor_retry_backoff = ReadableDuration::millis(10);
    let server = ServerProc::start(&cfg);
    load(&server, false);
    let before = ServerCopCounters::read(&server);
    let unavailable_before = fallbacks(&server, FallbackCause::Unavailable);

    let resp = count_sum(&server);
    assert_eq!(location(&resp), "fallback", "{:?}", resp.exec_details);
    assert_correct(&resp);
    assert_eq!(fake.count(), 3, "one attempt and max-retries = 2 retries");
    let delta = ServerCopCounters::read(&server).since(&before);
    assert_eq!(delta.retries, 2.0, "{delta:?}");
    assert_eq!(delta.fallbacks, 1.0, "{delta:?}");
    assert_eq!(
        fallbacks(&server, FallbackCause::Unavailable) - unavailable_before,
        1.0
    );
}

#[test]
fn a_worker_answering_400_is_not_retried() {
    let cluster = Cluster::new(StoreKind::Local);
    let fake = FakeWorker::start(400, b"bad body");
    let mut cfg = cluster.server_config("server");
    cfg.offload_all_to(&fake.coprocessor_url());
    let server = ServerProc::start(&cfg);
    load(&server, false);
    let before = ServerCopCounters::read(&server);

    let resp = count_sum(&server);
    assert_eq!(location(&resp), "fallback", "{:?}", resp.exec_details);
    assert_correct(&resp);
    assert_eq!(fake.count(), 1, "a 400 is final: no retry");
    let delta = ServerCopCounters::read(&server).since(&before);
    assert_eq!(delta.retries, 0.0, "{delta:?}");
    assert_eq!(fallbacks(&server, FallbackCause::BadStatus), 1.0);
}

#[test]
fn garbage_and_truncated_bodies_to_the_worker_are_rejected_with_400() {
    let cluster = Cluster::new(StoreKind::Local);
    let worker = WorkerProc::start(&cluster.worker_config("worker"));
    // Capture a real offload body: the server sends it to a fake worker (which answers 400, so
    // the server falls back).
    let fake = FakeWorker::start(400, b"");
    let mut cfg = cluster.server_config("server");
    cfg.offload_all_to(&fake.coprocessor_url());
    let server = ServerProc::start(&cfg);
    load(&server, true);
    T.load(&server, ROWS..ROWS + 10, 8, |h| h); // memtable rows too
    assert_eq!(location(&count_sum(&server)), "fallback");
    let received = fake.received();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].method, "POST");
    assert_eq!(received[0].path, "/coprocessor");
    let body = received[0].body.clone();

    // The captured body itself is fine.
    let ok = worker.post_coprocessor(body.clone());
    assert_eq!(ok.status.as_u16(), 200, "{ok:?}");
    let resp: Response = prost::Message::decode(ok.body.as_ref()).expect("a Response");
    assert!(resp.other_error.is_empty(), "{resp:?}");

    let mut bad: Vec<(String, Vec<u8>)> = vec![("empty".into(), Vec::new())];
    for cut in [1, 3, 4, 7, 8, body.len() / 2, body.len() - 1] {
        bad.push((format!("truncated to {cut} bytes"), body[..cut].to_vec()));
    }
    let mut extended = body.clone();
    extended.push(0);
    bad.push(("a trailing byte".into(), extended));
    let mut version = body.clone();
    version[..4].copy_from_slice(&99u32.to_le_bytes());
    bad.push(("format version 99".into(), version));
    let mut huge = body.clone();
    huge[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
    bad.push(("a 4 GiB section length".into(), huge));
    // Valid framing around a request section that is not protobuf.
    bad.push((
        "a request section that does not decode".into(),
        wire::offload::encode(&[0xff; 16], &[], &[]),
    ));
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    for i in 0..5 {
        let len = rng.random_range(1..2048);
        let garbage: Vec<u8> = (0..len).map(|_| rng.random()).collect();
        bad.push((format!("random bytes #{i} ({len} bytes)"), garbage));
    }

    let bad_before = worker.requests("bad_request");
    for (what, bytes) in &bad {
        let reply = worker.post_coprocessor(bytes.clone());
        assert_eq!(
            reply.status.as_u16(),
            400,
            "{what}: expected 400, found {} {:?}",
            reply.status,
            String::from_utf8_lossy(&reply.body)
        );
    }
    assert_eq!(
        worker.requests("bad_request") - bad_before,
        bad.len() as f64,
        "every rejected body is counted"
    );
    // Still serving.
    let again = worker.post_coprocessor(body);
    assert_eq!(again.status.as_u16(), 200);
}

#[test]
fn a_failing_object_store_get_on_the_worker_is_retried() {
    let cluster = Cluster::new(StoreKind::S3);
    let flaky_s3 = cluster.s3_endpoint_with(S3Faults {
        fail_gets: 2,
        ..S3Faults::default()
    });
    let worker_cfg =
        e2e::worker_proc::WorkerSetup::new(&cluster.path("worker"), &cluster.store_at(&flaky_s3));
    let worker = WorkerProc::start(&worker_cfg);
    let mut cfg = cluster.server_config("server");
    cfg.offload_all_to_worker(&worker);
    let server = ServerProc::start(&cfg);
    load(&server, true);
    let before = ServerCopCounters::read(&server);

    let resp = count_sum(&server);
    coprocessor::assert_answered(&resp, "request over a flaky store");
    assert_eq!(location(&resp), "remote", "{:?}", resp.exec_details);
    assert_correct(&resp);
    let (gets, failed) = flaky_s3.get_stats();
    assert_eq!(failed, 2, "both injected GET failures were hit");
    assert!(gets > failed, "the GET was retried: {gets} GETs");
    let delta = ServerCopCounters::read(&server).since(&before);
    assert_eq!(delta.fallbacks, 0.0, "{delta:?}");
    assert_eq!(worker.requests("ok"), 1.0);
}

#[test]
fn a_worker_that_cannot_reach_the_object_store_falls_back() {
    let cluster = Cluster::new(StoreKind::S3);
    let mut worker_s3 = cluster.s3_endpoint_with(S3Faults::default());
    let worker_cfg = e2e::worker_proc::WorkerSetup::new(
        &cluster.path("worker"),
        &cluster.store_at(&worker_s3).with_max_attempts(1),
    );
    let worker = WorkerProc::start(&worker_cfg);
    let mut cfg = cluster.server_config("server");
    cfg.offload_all_to_worker(&worker);
    let server = ServerProc::start(&cfg);
    load(&server, true);
    // The worker's endpoint goes away: its port is closed.
    worker_s3.kill();
    let before = ServerCopCounters::read(&server);

    let resp = count_sum(&server);
    coprocessor::assert_answered(&resp, "request whose worker lost its store");
    assert_eq!(location(&resp), "fallback", "{:?}", resp.exec_details);
    assert_correct(&resp);
    let delta = ServerCopCounters::read(&server).since(&before);
    assert_eq!(delta.fallbacks, 1.0, "{delta:?}");
    assert_eq!(delta.retries, 0.0, "a store error is final: {delta:?}");
    assert_eq!(worker.requests("ok"), 0.0);
    assert_eq!(worker.requests("store_error"), 1.0);
}
