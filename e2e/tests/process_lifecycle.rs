//! Start-up and shutdown of both binaries: a config error fails start-up naming the key; the
//! effective config is printed and served; SIGTERM is a clean exit 0 after which the server's
//! data (flushed or not) survives a restart, as it does a SIGKILL.
//!
//! SIGTERM and in-flight requests: a request is held in flight by freezing (SIGSTOP) the object
//! store a worker must read before it can answer, so it is known to be running when SIGTERM
//! arrives (the worker's in-flight gauge shows it) and finishes exactly when the test thaws the
//! store (SIGCONT), whatever the machine's load. On SIGTERM the process must refuse new
//! connections at once, keep serving the held request, answer it in full once it can, and exit
//! 0 right after it, well within `shutdown-grace`; a request still held when the grace ends
//! must not keep the process alive much past it.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::net::{SocketAddr, TcpStream};
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use e2e::cluster::{Cluster, StoreKind};
use e2e::coprocessor;
use e2e::http_client::{get, try_post};
use e2e::offload_body::BodyCapture;
use e2e::process::run_to_exit;
use e2e::sample_table::SampleTable;
use e2e::server_proc::{ServerProc, ServerSetup};
use e2e::transactions;
use e2e::worker_proc::WorkerProc;
use harness::supervisor::Signal;
use prost::Message;
use server::config::WalSync;
use types::{ReadableDuration, ReadableSize};

const EXIT_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs a binary that must refuse to start; its exit status and stderr.
fn refused(cmd: std::process::Command) -> (ExitStatus, String) {
    let (status, _stdout, stderr) = run_to_exit(cmd, EXIT_TIMEOUT);
    (status, stderr)
}

fn assert_refused_naming(status: ExitStatus, stderr: &str, key: &str) {
    assert!(
        !status.success(),
        "expected start-up to fail, found {status}\n{stderr}"
    );
    assert_eq!(
        status.code(),
        Some(2),
        "config errors exit with 2\n{stderr}"
    );
    assert!(
        stderr.contains(key),
        "stderr must name the key {key:?}:\n{stderr}"
    );
}

fn server_config(cluster: &Cluster) -> ServerSetup {
    cluster.server_config("server")
}

#[test]
fn server_rejects_an_unknown_key_naming_it() {
    let cluster = Cluster::new(StoreKind::Local);
    let cfg = server_config(&cluster);
    let (status, stderr) = refused(cfg.command_with_raw_key(
        "kvengine",
        "remote-coprocessor-adress",
        "http://127.0.0.1:1/coprocessor",
    ));
    assert_refused_naming(status, &stderr, "remote-coprocessor-adress");
}

#[test]
fn server_rejects_a_bad_value_naming_it() {
    let cluster = Cluster::new(StoreKind::Local);
    let cfg = server_config(&cluster);
    let (status, stderr) =
        refused(cfg.command_with_raw_key("kvengine", "remote-coprocessor-min-blocks-size", "lots"));
    assert_refused_naming(status, &stderr, "remote-coprocessor-min-blocks-size");
}

#[test]
fn server_rejects_a_value_that_cannot_work_naming_it() {
    let cluster = Cluster::new(StoreKind::Local);
    let mut cfg = server_config(&cluster);
    cfg.kvengine.remote_coprocessor_addr = "ftp://127.0.0.1:1/coprocessor".into();
    let (status, stderr) = refused(cfg.command());
    assert_refused_naming(status, &stderr, "remote-coprocessor-addr");
}

#[test]
fn worker_rejects_an_unknown_key_naming_it() {
    let cluster = Cluster::new(StoreKind::Local);
    let cfg = cluster.worker_config("worker");
    let (status, stderr) =
        refused(cfg.command_with_raw_key(Some("worker"), "max-request-sise", "1GiB"));
    assert_refused_naming(status, &stderr, "max-request-sise");
}

#[test]
fn worker_rejects_a_bad_value_naming_it() {
    let cluster = Cluster::new(StoreKind::Local);
    let cfg = cluster.worker_config("worker");
    let (status, stderr) =
        refused(cfg.command_with_raw_key(Some("worker"), "max-request-size", "huge"));
    assert_refused_naming(status, &stderr, "max-request-size");
}

#[test]
fn both_binaries_print_and_serve_their_effective_config() {
    let cluster = Cluster::new(StoreKind::Local);
    let mut wcfg = cluster.worker_config("worker");
    wcfg.worker.max_request_size = ReadableSize::mib(123);
    wcfg.worker.ship_buffer_pool_size = ReadableSize::mib(5);
    let worker = WorkerProc::start(&wcfg);
    let mut cfg = server_config(&cluster);
    cfg.kvengine.remote_coprocessor_max_retries = 7;
    cfg.kvengine.ship_buffer_pool_size = ReadableSize::mib(3);
    let server = ServerProc::start(&cfg);
    // A setting that acts on the process (not only shown): each binary's shipping-buffer
    // pool has the bound it was configured with.
    assert_eq!(
        server.metric("stratus_ship_buffer_pool_limit_bytes", &[]),
        f64::from(3u32 << 20)
    );
    assert_eq!(
        worker.metric("stratus_ship_buffer_pool_limit_bytes", &[]),
        f64::from(5u32 << 20)
    );

    let served = server.config_text();
    assert!(
        served.contains("remote-coprocessor-max-retries = 7"),
        "GET /config:\n{served}"
    );
    assert!(
        served.contains("remote-coprocessor-min-blocks-size"),
        "defaults are part of the effective config:\n{served}"
    );
    assert!(
        server
            .output()
            .contains("remote-coprocessor-max-retries = 7"),
        "printed at start:\n{}",
        server.output()
    );
    let status = server.status_text();
    assert!(
        status.trim_start().starts_with('{'),
        "GET /status is JSON: {status}"
    );

    let served = e2e::http_client::get_text(&worker.url("/config"));
    assert!(
        served.contains("max-request-size"),
        "worker GET /config:\n{served}"
    );
    assert!(
        served.contains("123MiB") || served.contains(&(123u64 << 20).to_string()),
        "worker GET /config shows the configured size:\n{served}"
    );
    let status = get(&worker.url("/status"));
    assert_eq!(status.status.as_u16(), 200);
}

const T: SampleTable = SampleTable { id: 11 };

/// Writes through both write paths (a transaction and a raw load), part of it flushed and
/// part only in the WAL; the values written per handle.
fn write_some(server: &ServerProc) -> Vec<(i64, i64)> {
    let mut values = Vec::new();
    let c = transactions::commit(
        server,
        &[server],
        &(0..20)
            .map(|h| transactions::put(&T.key(h), &SampleTable::value(h, 8)))
            .collect::<Vec<_>>(),
    );
    assert!(c.commit_ts > c.start_ts);
    values.extend((0..20).map(|h| (h, h)));
    T.load(server, 20..200, 8, |h| h);
    values.extend((20..200).map(|h| (h, h)));
    server.flush();
    // After the flush: only in the memtable and the WAL.
    T.load(server, 200..300, 8, |h| h);
    values.extend((200..300).map(|h| (h, h)));
    transactions::commit(
        server,
        &[server],
        &[
            transactions::put(&T.key(5), &SampleTable::value(500, 8)),
            transactions::delete(&T.key(6)),
        ],
    );
    values.retain(|(h, _)| *h != 6);
    for v in values.iter_mut() {
        if v.0 == 5 {
            v.1 = 500;
        }
    }
    values
}

/// Every written value reads back (point gets and a coprocessor count/sum).
fn assert_reads_back(server: &ServerProc, values: &[(i64, i64)], last_ts: u64) {
    let ts = server.tso();
    assert!(
        ts > last_ts,
        "the TSO went back after the restart: {ts} <= {last_ts}"
    );
    for &(h, v) in values.iter().step_by(7).chain(values.last()) {
        let r = server.get(&T.key(h), ts);
        assert!(r.error.is_none(), "{r:?}");
        assert!(r.found, "handle {h} lost");
        assert_eq!(r.value, SampleTable::value(v, 8), "handle {h}");
    }
    let gone = server.get(&T.key(6), ts);
    assert!(!gone.found, "a deleted row came back");
    let region = server.region_of(&T.key(0));
    let resp = server.coprocessor(&coprocessor::request(
        &T.count_sum_dag(),
        vec![T.range()],
        ts,
        &region,
    ));
    assert_eq!(
        coprocessor::rows(&resp).unwrap(),
        SampleTable::count_sum_rows(values.iter().map(|(_, v)| *v))
    );
}

#[test]
fn server_exits_zero_on_sigterm_and_keeps_its_data_across_a_restart() {
    let cluster = Cluster::new(StoreKind::Local);
    let cfg = server_config(&cluster);
    let mut server = ServerProc::start(&cfg);
    let values = write_some(&server);
    let last_ts = server.tso();
    let status = server.terminate();
    assert_eq!(
        status.code(),
        Some(0),
        "SIGTERM is a clean exit\n{}",
        server.output_report()
    );
    drop(server);

    let server = ServerProc::start(&cfg);
    assert_reads_back(&server, &values, last_ts);
}

#[test]
fn server_keeps_acknowledged_writes_after_sigkill() {
    let cluster = Cluster::new(StoreKind::Local);
    let mut cfg = server_config(&cluster);
    cfg.kvengine.wal_sync = WalSync::EveryBatch;
    let mut server = ServerProc::start(&cfg);
    let values = write_some(&server);
    let last_ts = server.tso();
    server.kill();
    drop(server);

    let server = ServerProc::start(&cfg);
    assert_reads_back(&server, &values, last_ts);
}

#[test]
fn a_restart_keeps_region_ids_and_epochs_and_never_moves_a_data_version_back() {
    let cluster = Cluster::new(StoreKind::Local);
    let cfg = server_config(&cluster);
    let mut server = ServerProc::start(&cfg);
    write_some(&server);
    let before = server.regions();
    assert_eq!(server.terminate().code(), Some(0));
    drop(server);
    let server = ServerProc::start(&cfg);
    let after = server.regions();
    let epochs = |r: &wire::region::RegionsResponse| {
        r.regions.iter().map(|r| (r.id, r.ver)).collect::<Vec<_>>()
    };
    assert_eq!(epochs(&after), epochs(&before), "(id, ver)");
    // The data version is the applied Raft index (plus a base): the shutdown flush and the
    // new leader's first entry move it on, never back.
    for (b, a) in before.regions.iter().zip(&after.regions) {
        assert!(
            a.data_version >= b.data_version,
            "region {}: {} before the restart, {} after",
            b.id,
            b.data_version,
            a.data_version
        );
    }
}

#[test]
fn worker_exits_zero_on_sigterm() {
    let cluster = Cluster::new(StoreKind::Local);
    let mut worker = WorkerProc::start(&cluster.worker_config("worker"));
    let status = worker.terminate();
    assert_eq!(
        status.code(),
        Some(0),
        "SIGTERM is a clean exit\n{}",
        worker.output_report()
    );
}

#[test]
fn a_server_on_s3_lists_its_initial_region_and_zone() {
    let cluster = Cluster::new(StoreKind::S3);
    let server = ServerProc::start(&server_config(&cluster));
    let regions = server.regions();
    assert_eq!(regions.regions.len(), 1, "{regions:?}");
    let r = &regions.regions[0];
    assert!(
        r.start.is_empty() && r.end.is_empty(),
        "one region over everything: {r:?}"
    );
    assert!(
        regions
            .labels
            .iter()
            .any(|l| l.key == "zone" && l.value == "a"),
        "{regions:?}"
    );
}

// -- SIGTERM with a request in flight ---------------------------------------------------------

/// Rows of `T` in the shutdown tests.
const HELD_ROWS: i64 = 2000;
/// A grace the held request never needs: exiting before it shows the process waited for the
/// request, not for the grace.
const LONG_GRACE: Duration = Duration::from_secs(60);
/// A grace the held request outlives.
const SHORT_GRACE: Duration = Duration::from_secs(2);
/// What a process may take past its grace to exit (the worker gives a request cut off at the
/// grace up to another grace to leave its blocking thread, then abandons it; both flush
/// nothing slow): generous for a loaded machine, far below the minutes a process waiting for
/// the held request would take.
const EXIT_MARGIN: Duration = Duration::from_secs(20);
/// How long a frozen store may keep an object-store call or an offload waiting before it
/// times out: longer than any test, so only the test's SIGCONT ends the wait.
const FROZEN_FOR: ReadableDuration = ReadableDuration::secs(600);

/// `127.0.0.1:PORT` of `http://127.0.0.1:PORT`.
fn socket_addr(base_url: &str) -> SocketAddr {
    base_url
        .trim_start_matches("http://")
        .parse()
        .unwrap_or_else(|e| panic!("not an address: {base_url}: {e}"))
}

/// Waits until a new connection to `addr` is refused (the listener is closed).
fn wait_until_refused(addr: SocketAddr) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match TcpStream::connect_timeout(&addr, Duration::from_secs(5)) {
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => return,
            other => assert!(
                Instant::now() < deadline,
                "{addr} still accepts connections after SIGTERM: {other:?}"
            ),
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits until `worker` has exactly `n` requests in flight.
fn wait_for_in_flight(worker: &WorkerProc, n: f64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let now = worker.in_flight();
        if now == n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the worker never had {n} requests in flight: {now}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A worker of `cluster` (S3) with `grace`, no file cached (its first request must read the
/// store) and object-store calls that wait for a frozen store.
fn held_worker(cluster: &Cluster, name: &str, grace: Duration) -> WorkerProc {
    let mut wcfg = cluster.worker_config(name);
    wcfg.dfs.s3_timeout = FROZEN_FOR;
    wcfg.worker.shutdown_grace = ReadableDuration(grace);
    WorkerProc::start(&wcfg)
}

/// Loads `T` (rows `0..HELD_ROWS`) into `server` and flushes it to the store.
fn load_held_table(server: &ServerProc) {
    T.load(server, 0..HELD_ROWS, 8, |h| h);
    server.flush();
}

/// The offload body of a count/sum over `T`, captured from a server of `cluster` that loaded
/// and flushed it.
fn held_body(cluster: &Cluster) -> e2e::offload_body::OffloadBody {
    let capture = BodyCapture::start(cluster, "capture", |c| c.dfs.s3_timeout = FROZEN_FOR);
    load_held_table(&capture.server);
    let region = capture.server.region_of(&T.key(0));
    let req = coprocessor::request(
        &T.count_sum_dag(),
        vec![T.range()],
        capture.server.tso(),
        &region,
    );
    let (local, body) = capture.capture(&req);
    assert_eq!(coprocessor::rows(&local).unwrap(), expected_rows());
    body
}

/// A server of `cluster` offloading every request to `worker` (waiting for it as long as the
/// store may stay frozen), with `grace`, that loaded and flushed `T`.
fn offloading_server(cluster: &Cluster, worker: &WorkerProc, grace: Duration) -> ServerProc {
    let mut cfg = cluster.server_config("server");
    cfg.dfs.s3_timeout = FROZEN_FOR;
    cfg.offload_all_to_worker(worker);
    cfg.kvengine.remote_coprocessor_timeout = FROZEN_FOR;
    cfg.server.shutdown_grace = ReadableDuration(grace);
    let server = ServerProc::start(&cfg);
    load_held_table(&server);
    server
}

fn expected_rows() -> Vec<Vec<wire::datum::Datum>> {
    SampleTable::count_sum_rows(0..HELD_ROWS)
}

/// The held request's answer: a 200 carrying every row of the held table.
fn answered_in_full(
    held: std::thread::JoinHandle<Result<harness::http::HttpReply, harness::http::HttpError>>,
) -> wire::coprocessor::Response {
    let reply = held
        .join()
        .unwrap()
        .expect("the in-flight request is answered");
    assert_eq!(
        reply.status.as_u16(),
        200,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    let resp = wire::coprocessor::Response::decode(reply.body.as_ref()).unwrap();
    assert_eq!(coprocessor::rows(&resp).unwrap(), expected_rows());
    resp
}

/// A node given SIGTERM at `terminated` exited 0 (`status`, waited for up to `LONG_GRACE`) as
/// soon as its request was done, not at the end of its grace.
fn exited_zero_before_the_grace_ended(
    who: &str,
    status: Option<ExitStatus>,
    terminated: Instant,
    report: impl FnOnce() -> String,
) {
    let status =
        status.unwrap_or_else(|| panic!("the {who} still runs {LONG_GRACE:?} after SIGTERM"));
    assert_eq!(status.code(), Some(0), "{}", report());
    assert!(
        terminated.elapsed() < LONG_GRACE,
        "exited when its request was done, not at the end of the grace"
    );
}

/// Freezes or thaws the cluster's object store.
fn store_signal(cluster: &mut Cluster, signal: Signal) {
    cluster.s3.as_mut().expect("an S3 cluster").signal(signal);
}

/// A worker given SIGTERM while one request waits for the frozen store: it refuses new
/// connections, answers the request in full once the store thaws, and exits 0 right after.
#[test]
fn sigterm_lets_the_worker_finish_an_in_flight_request_then_exit_zero() {
    let mut cluster = Cluster::new(StoreKind::S3);
    let body = held_body(&cluster);
    let mut worker = held_worker(&cluster, "worker", LONG_GRACE);
    let addr = socket_addr(worker.base_url());

    store_signal(&mut cluster, Signal::SIGSTOP);
    let url = worker.coprocessor_url();
    let held = std::thread::spawn(move || try_post(&url, body.encode()));
    wait_for_in_flight(&worker, 1.0);
    worker.signal(Signal::SIGTERM);
    let terminated = Instant::now();
    wait_until_refused(addr);
    assert_eq!(
        worker.try_exit(),
        None,
        "the worker exited with a request in flight"
    );
    store_signal(&mut cluster, Signal::SIGCONT);

    answered_in_full(held);
    let status = worker.wait_for_exit(LONG_GRACE);
    exited_zero_before_the_grace_ended("worker", status, terminated, || worker.output_report());
}

/// A worker given SIGTERM while a request waits for a store that stays frozen: it exits
/// within its grace (plus a margin), cutting the request off.
#[test]
fn a_request_still_running_when_the_grace_ends_does_not_keep_the_worker_alive() {
    let mut cluster = Cluster::new(StoreKind::S3);
    let body = held_body(&cluster);
    let mut worker = held_worker(&cluster, "worker", SHORT_GRACE);

    store_signal(&mut cluster, Signal::SIGSTOP);
    let url = worker.coprocessor_url();
    let held = std::thread::spawn(move || try_post(&url, body.encode()));
    wait_for_in_flight(&worker, 1.0);
    worker.signal(Signal::SIGTERM);
    let status = worker.wait_for_exit(SHORT_GRACE + EXIT_MARGIN);
    store_signal(&mut cluster, Signal::SIGCONT);
    let status = status.unwrap_or_else(|| {
        panic!(
            "the worker still runs {:?} after SIGTERM with a grace of {SHORT_GRACE:?}",
            SHORT_GRACE + EXIT_MARGIN
        )
    });
    assert_eq!(status.code(), Some(0), "{}", worker.output_report());
    let reply = held.join().unwrap();
    assert!(
        reply.is_err(),
        "a request cut off at the grace has no answer: {reply:?}"
    );
}

/// The server's half: SIGTERM while its offloaded request waits at a frozen worker (SIGSTOP,
/// after the request reached it); the server refuses new connections, answers the request in
/// full once the worker thaws, and exits 0 right after. The store is thawed before SIGTERM, so
/// the server's flush on the way out cannot be what keeps it alive until the answer.
#[test]
fn sigterm_lets_the_server_finish_an_in_flight_request_then_exit_zero() {
    let mut cluster = Cluster::new(StoreKind::S3);
    let mut worker = held_worker(&cluster, "worker", LONG_GRACE);
    let mut server = offloading_server(&cluster, &worker, LONG_GRACE);
    let region = server.region_of(&T.key(0));
    let req = coprocessor::request(&T.count_sum_dag(), vec![T.range()], server.tso(), &region);
    let addr = socket_addr(server.base_url());

    // Hold the request at the worker with the store, then freeze the worker itself and thaw
    // the store.
    store_signal(&mut cluster, Signal::SIGSTOP);
    let url = server.url(wire::paths::COPROCESSOR);
    let held = std::thread::spawn(move || try_post(&url, req.encode_to_vec()));
    wait_for_in_flight(&worker, 1.0);
    worker.signal(Signal::SIGSTOP);
    store_signal(&mut cluster, Signal::SIGCONT);

    server.signal(Signal::SIGTERM);
    let terminated = Instant::now();
    wait_until_refused(addr);
    assert_eq!(
        server.try_exit(),
        None,
        "the server exited with a request in flight"
    );
    worker.signal(Signal::SIGCONT);

    let resp = answered_in_full(held);
    assert_eq!(
        coprocessor::location(&resp),
        "remote",
        "{:?}",
        resp.exec_details
    );
    let status = server.wait_for_exit(LONG_GRACE);
    exited_zero_before_the_grace_ended("server", status, terminated, || server.output_report());
}

/// SIGTERM while the server's offloaded request waits at a worker that stays frozen (SIGSTOP,
/// after the request reached it): the server exits within its grace plus a margin, cutting
/// the request off, and still flushes and exits 0 (the store is not frozen).
#[test]
fn a_request_still_running_when_the_grace_ends_does_not_keep_the_server_alive() {
    let mut cluster = Cluster::new(StoreKind::S3);
    let mut worker = held_worker(&cluster, "worker", LONG_GRACE);
    let mut server = offloading_server(&cluster, &worker, SHORT_GRACE);
    let region = server.region_of(&T.key(0));
    let req = coprocessor::request(&T.count_sum_dag(), vec![T.range()], server.tso(), &region);

    // Hold the request at the worker with the store, then freeze the worker itself and thaw
    // the store (the server flushes to it on the way out).
    store_signal(&mut cluster, Signal::SIGSTOP);
    let url = server.url(wire::paths::COPROCESSOR);
    let held = std::thread::spawn(move || try_post(&url, req.encode_to_vec()));
    wait_for_in_flight(&worker, 1.0);
    worker.signal(Signal::SIGSTOP);
    store_signal(&mut cluster, Signal::SIGCONT);

    server.signal(Signal::SIGTERM);
    let status = server.wait_for_exit(SHORT_GRACE + EXIT_MARGIN);
    worker.signal(Signal::SIGCONT);
    let status = status.unwrap_or_else(|| {
        panic!(
            "the server still runs {:?} after SIGTERM with a grace of {SHORT_GRACE:?}",
            SHORT_GRACE + EXIT_MARGIN
        )
    });
    assert_eq!(status.code(), Some(0), "{}", server.output_report());
    let reply = held.join().unwrap();
    assert!(
        reply.is_err(),
        "a request cut off at the grace has no answer: {reply:?}"
    );
}

/// A `[security]` whose key file every user may read (mode 0644), from a throwaway CA.
fn world_readable_key(dir: &std::path::Path) -> node::tls::SecurityConfig {
    use std::os::unix::fs::PermissionsExt;
    let ca = harness::certs::ThrowawayCa::create(&dir.join("tls"), "test-ca").unwrap();
    let security = ca.issue("stratus-node").unwrap();
    std::fs::set_permissions(&security.key_path, std::fs::Permissions::from_mode(0o644)).unwrap();
    security
}

#[test]
fn every_node_refuses_to_start_with_a_key_file_others_can_read_naming_it() {
    let cluster = Cluster::new(StoreKind::Local);
    let security = world_readable_key(&cluster.path("certs"));
    let key = security.key_path.display().to_string();
    let check = |program: &str, cmd: std::process::Command| {
        let (status, stderr) = refused(cmd);
        assert!(!status.success(), "{program} started: {status}\n{stderr}");
        assert!(
            stderr.contains(&key) && stderr.contains("readable by every user"),
            "{program} must name the key file {key}:\n{stderr}"
        );
    };
    let mut server = server_config(&cluster);
    server.config.security = security.clone();
    check("server", server.command());
    // Refused before anything was created: the engine never opened.
    assert!(!server.config.server.data_dir.join("engine").exists());
    let mut worker = cluster.worker_config("worker");
    worker.config.security = security.clone();
    check("worker", worker.command());
    let mut pd = e2e::pd_proc::PdSetup::new(&cluster.path("pd"), "pd-1", 0, &[]);
    pd.config.security = security;
    check("placement driver", pd.command());
}

#[test]
fn an_admin_token_guards_raw_loads_and_config_shows_only_its_path() {
    use std::os::unix::fs::PermissionsExt;
    let cluster = Cluster::new(StoreKind::Local);
    let token_path = cluster.path("admin-token");
    std::fs::write(&token_path, "t0ken-n0t-t0-sh0w\n").unwrap();
    std::fs::set_permissions(&token_path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mut cfg = server_config(&cluster);
    cfg.config.security.admin_token_path = token_path.clone();
    let server = ServerProc::start(&cfg);
    let config = server.config_text();
    assert!(
        config.contains(&token_path.display().to_string()),
        "{config}"
    );
    assert!(
        !config.contains("t0ken-n0t-t0-sh0w"),
        "/config shows the token:\n{config}"
    );

    let url = format!("{}{}", server.base_url(), wire::paths::RAW_LOAD);
    let body = wire::region::RawLoadRequest {
        pairs: vec![wire::region::KvPair {
            key: SampleTable { id: 3 }.key(1),
            value: b"v".to_vec(),
        }],
    }
    .encode_to_vec();
    let refused = try_post(&url, body.clone()).unwrap();
    assert_eq!(
        refused.status,
        403,
        "{}",
        String::from_utf8_lossy(&refused.body)
    );
    let loaded = e2e::http_client::try_post_with_headers(
        &url,
        body,
        &[("authorization", "Bearer t0ken-n0t-t0-sh0w")],
    )
    .unwrap();
    assert_eq!(
        loaded.status,
        200,
        "{}",
        String::from_utf8_lossy(&loaded.body)
    );
}
