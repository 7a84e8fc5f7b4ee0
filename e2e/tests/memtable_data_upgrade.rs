//! Rolling upgrades of the memtable-data format: a server ships memtable rows in the newest
//! format both it and the worker read, so servers and workers can be upgraded in either order
//! (and a worker rolled back in place) with every offload still answered by the worker.
//!
//! "Older build" here is a build whose newest format is an older one:
//! `worker.memtable-data-format = N` (the worker then refuses newer bodies with 400 and
//! advertises N, as a build from before them answers a format it does not know) or
//! `kvengine.remote-coprocessor-memtable-data-format = N` (the server writes at most vN). Real
//! processes over HTTP; the rows stay in the memtable, so every offload ships them.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use changeset::MemtableDataFormat as Format;
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

/// Snapshots the worker rebuilt from memtable rows in `format`.
fn received(worker: &WorkerProc, format: Format) -> f64 {
    worker.metric(
        "stratus_worker_memtable_data_total",
        &[("format", format.as_str())],
    )
}

/// The same count for every format: what the worker received in each.
fn received_by_format(worker: &WorkerProc) -> Vec<(Format, f64)> {
    Format::ALL
        .into_iter()
        .map(|f| (f, received(worker, f)))
        .collect()
}

/// `n` offloads in `format` and none in another.
fn only(format: Format, n: f64) -> Vec<(Format, f64)> {
    Format::ALL
        .into_iter()
        .map(|f| (f, if f == format { n } else { 0.0 }))
        .collect()
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

/// A worker reading up to `worker_format` and a server writing up to `server_format`: the
/// first offload ships v1 (the server has not heard from the worker yet), the next three the
/// older of the two formats, every one answered by the worker.
fn offloads_ship_the_older_format(worker_format: Format, server_format: Format) {
    let cluster = Cluster::new(StoreKind::Local);
    let (_, worker) = worker_with_format(&cluster, worker_format.as_u8());
    let server = server_for(&cluster, &worker, server_format.as_u8());
    offload_once(&server, &worker);
    assert_eq!(received_by_format(&worker), only(Format::V1, 1.0));
    for _ in 0..3 {
        offload_once(&server, &worker);
    }
    let agreed = worker_format.min(server_format);
    let mut want = only(agreed, 3.0);
    want[0].1 += 1.0;
    assert_eq!(received_by_format(&worker), want);
    assert_eq!(fallbacks(&server), 0.0);
    assert_eq!(
        worker.requests("bad_request"),
        0.0,
        "no body in a format the worker does not read"
    );
}

#[test]
fn an_upgraded_server_sends_v1_to_a_worker_not_yet_upgraded() {
    offloads_ship_the_older_format(Format::V1, Format::NEWEST);
}

#[test]
fn an_upgraded_worker_reads_v1_from_a_server_not_yet_upgraded() {
    offloads_ship_the_older_format(Format::NEWEST, Format::V1);
}

#[test]
fn an_upgraded_server_sends_v2_to_a_v2_worker_and_an_upgraded_worker_reads_v2() {
    offloads_ship_the_older_format(Format::V2, Format::NEWEST);
    offloads_ship_the_older_format(Format::NEWEST, Format::V2);
}

/// An upgraded pair moves to the newest format after the first answer; then the worker is
/// rolled back in place to a build whose newest format is `rolled_back`.
fn upgraded_pair_then_worker_rolled_back_to(rolled_back: Format) {
    let newest = Format::NEWEST;
    let cluster = Cluster::new(StoreKind::Local);
    let (mut setup, mut worker) = worker_with_format(&cluster, newest.as_u8());
    let server = server_for(&cluster, &worker, newest.as_u8());
    // The server has not heard from the worker yet: v1, which every build reads. Its answer
    // advertises the newest format.
    offload_once(&server, &worker);
    assert_eq!(received(&worker, Format::V1), 1.0);
    for _ in 0..3 {
        offload_once(&server, &worker);
    }
    assert_eq!(received(&worker, newest), 3.0);
    assert_eq!(received(&worker, Format::V1), 1.0);

    // The worker is rolled back in place (same address, reads up to `rolled_back`). The server
    // still believes the newest: the worker refuses that body with 400 and advertises its own,
    // and the server asks it again at once in that format instead of falling back to a local
    // run.
    let addr = worker.base_url().trim_start_matches("http://").to_string();
    worker.terminate();
    setup.worker.addr = addr;
    setup.worker.memtable_data_format = rolled_back.as_u8();
    let worker = WorkerProc::start(&setup);
    for _ in 0..3 {
        offload_once(&server, &worker);
    }
    assert_eq!(received_by_format(&worker), only(rolled_back, 3.0));
    assert_eq!(
        worker.requests("bad_request"),
        1.0,
        "the newest-format body sent before the server learned of the rollback"
    );
    assert_eq!(fallbacks(&server), 0.0);
}

#[test]
fn upgraded_pairs_move_to_the_newest_format_and_to_v1_when_the_worker_is_rolled_back() {
    upgraded_pair_then_worker_rolled_back_to(Format::V1);
}

#[test]
fn upgraded_pairs_move_to_the_newest_format_and_to_v2_when_the_worker_is_rolled_back() {
    upgraded_pair_then_worker_rolled_back_to(Format::V2);
}

#[test]
fn an_upgraded_server_sends_v3_to_a_v3_worker_and_an_upgraded_worker_reads_v3() {
    offloads_ship_the_older_format(Format::V3, Format::NEWEST);
    offloads_ship_the_older_format(Format::NEWEST, Format::V3);
}

#[test]
fn upgraded_pairs_move_to_the_newest_format_and_to_v3_when_the_worker_is_rolled_back() {
    upgraded_pair_then_worker_rolled_back_to(Format::V3);
}
