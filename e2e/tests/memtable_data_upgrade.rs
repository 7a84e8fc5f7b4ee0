//! Rolling upgrades of the memtable-data format: a server ships memtable rows in the newest
//! format both it and the worker read, so servers and workers can be upgraded in either order
//! (and a worker rolled back in place) with every offload still answered by the worker.
//!
//! "Older build" here is a build whose newest format is v1: `worker.memtable-data-format = 1`
//! (the worker then refuses v2 bodies with 400 and advertises 1, as a build from before v2
//! answers a format it does not know) or `kvengine.remote-coprocessor-memtable-data-format = 1`
//! (the server writes only v1). Real processes over HTTP; the rows stay in the memtable, so
//! every offload ships them.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use e2e::cluster::{Cluster, StoreKind};
use e2e::coprocessor::{self, location};
use e2e::sample_table::SampleTable;
use e2e::server_proc::ServerProc;
use e2e::worker_proc::{WorkerProc, WorkerSetup};
use wire::coprocessor::Response;
use wire::placement::FallbackCause;

const T: SampleTable = SampleTable { id: 5 };
const ROWS: i64 = 300;

fn count_sum(server: &ServerProc) -> Response {
    let region = server.region_of(&T.key(0));
    let req = coprocessor::request(&T.count_sum_dag(), vec![T.range()], server.tso(), &region);
    server.coprocessor(&req)
}

/// Offloads one COUNT/SUM and checks the worker answered it correctly.
fn offload_once(server: &ServerProc, worker: &WorkerProc) {
    let resp = count_sum(server);
    assert_eq!(
        location(&resp),
        "remote",
        "exec details {:?}\n{}\n{}",
        resp.exec_details,
        server.output_report(),
        worker.output_report()
    );
    assert_eq!(
        coprocessor::rows(&resp).unwrap(),
        SampleTable::count_sum_rows((0..ROWS).map(|h| 3 * h)),
    );
}

/// Snapshots the worker rebuilt from memtable rows in `format` (`v1`, `v2`).
fn received(worker: &WorkerProc, format: &str) -> f64 {
    worker.metric("stratus_worker_memtable_data_total", &[("format", format)])
}

fn fallbacks(server: &ServerProc) -> f64 {
    FallbackCause::ALL
        .iter()
        .map(|c| {
            server.metric(
                "stratus_server_offload_fallbacks_total",
                &[("cause", c.as_str())],
            )
        })
        .sum()
}

/// A server offloading everything to `worker`, writing memtable data up to `server_format`,
/// with `ROWS` rows left in its memtable.
fn server_for(cluster: &Cluster, worker: &WorkerProc, server_format: u8) -> ServerProc {
    let mut cfg = cluster.server_config("server");
    cfg.offload_all_to_worker(worker);
    cfg.kvengine.remote_coprocessor_memtable_data_format = server_format;
    let server = ServerProc::start(&cfg);
    T.load(&server, 0..ROWS, 50, |h| 3 * h);
    server
}

fn worker_with_format(cluster: &Cluster, format: u8) -> (WorkerSetup, WorkerProc) {
    let mut setup = cluster.worker_config("worker");
    setup.worker.memtable_data_format = format;
    let worker = WorkerProc::start(&setup);
    (setup, worker)
}

/// A worker reading up to `worker_format` and a server writing up to `server_format`, one of
/// them 1: three offloads, every one answered by the worker from v1 rows.
fn every_offload_ships_v1(worker_format: u8, server_format: u8) {
    let cluster = Cluster::new(StoreKind::Local);
    let (_, worker) = worker_with_format(&cluster, worker_format);
    let server = server_for(&cluster, &worker, server_format);
    for _ in 0..3 {
        offload_once(&server, &worker);
    }
    assert_eq!(received(&worker, "v1"), 3.0);
    assert_eq!(received(&worker, "v2"), 0.0);
    assert_eq!(fallbacks(&server), 0.0);
}

#[test]
fn an_upgraded_server_sends_v1_to_a_worker_not_yet_upgraded() {
    every_offload_ships_v1(1, 2);
}

#[test]
fn an_upgraded_worker_reads_v1_from_a_server_not_yet_upgraded() {
    every_offload_ships_v1(2, 1);
}

#[test]
fn upgraded_pairs_move_to_v2_after_the_first_answer_and_back_when_the_worker_is_rolled_back() {
    let cluster = Cluster::new(StoreKind::Local);
    let (mut setup, mut worker) = worker_with_format(&cluster, 2);
    let server = server_for(&cluster, &worker, 2);
    // The server has not heard from the worker yet: v1, which every build reads. Its answer
    // advertises v2.
    offload_once(&server, &worker);
    assert_eq!(received(&worker, "v1"), 1.0);
    for _ in 0..3 {
        offload_once(&server, &worker);
    }
    assert_eq!(received(&worker, "v2"), 3.0);
    assert_eq!(received(&worker, "v1"), 1.0);

    // The worker is rolled back in place (same address, reads only v1). The server still
    // believes v2: the worker refuses that body with 400 and advertises 1, and the server
    // asks it again at once in v1 instead of falling back to a local run.
    let addr = worker.base_url().trim_start_matches("http://").to_string();
    worker.terminate();
    setup.worker.addr = addr;
    setup.worker.memtable_data_format = 1;
    let worker = WorkerProc::start(&setup);
    for _ in 0..3 {
        offload_once(&server, &worker);
    }
    assert_eq!(received(&worker, "v1"), 3.0);
    assert_eq!(received(&worker, "v2"), 0.0);
    assert_eq!(
        worker.requests("bad_request"),
        1.0,
        "the v2 body sent before the server learned of the rollback"
    );
    assert_eq!(fallbacks(&server), 0.0);
}
