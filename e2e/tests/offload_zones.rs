//! Several workers on the offload path: a server in zone a prefers its own zone's workers,
//! shares the load between them, and crosses to zone b only when none of zone a is alive; every
//! answer stays exactly the local one.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use e2e::cluster::{Cluster, StoreKind};
use e2e::coprocessor::{self, location};
use e2e::sample_table::SampleTable;
use e2e::server_proc::{ServerCopCounters, ServerProc};
use e2e::worker_proc::WorkerProc;
use e2e::zones::{dispatches, offload_all_to_workers, server_zone, worker_zone};
use types::ReadableDuration;
use wire::coprocessor::Response;

const T: SampleTable = SampleTable { id: 5 };
const ROWS: i64 = 300;

fn start_worker(cluster: &Cluster, name: &str, zone: &str) -> WorkerProc {
    let mut cfg = cluster.worker_config(name);
    worker_zone(&mut cfg, zone);
    WorkerProc::start(&cfg)
}

fn count_sum(server: &ServerProc) -> Response {
    let region = server.region_of(&T.key(0));
    let req = coprocessor::request(&T.count_sum_dag(), vec![T.range()], server.tso(), &region);
    server.coprocessor(&req)
}

/// Runs a request that must be answered remotely and correctly; the worker URL that ran it.
fn remote_answer(server: &ServerProc) -> String {
    let resp = count_sum(server);
    coprocessor::assert_answered(&resp, "offloaded request");
    assert_eq!(location(&resp), "remote", "{:?}", resp.exec_details);
    assert_eq!(
        coprocessor::rows(&resp).unwrap(),
        SampleTable::count_sum_rows((0..ROWS).map(|h| 3 * h)),
    );
    resp.exec_details.unwrap().remote_addr
}

#[test]
fn offloads_stay_in_the_own_zone_and_cross_only_when_it_has_no_alive_worker() {
    let cluster = Cluster::new(StoreKind::Local);
    let mut worker_a = start_worker(&cluster, "worker-a", "a");
    let worker_b = start_worker(&cluster, "worker-b", "b");
    let mut cfg = cluster.server_config("server");
    server_zone(&mut cfg, "a");
    offload_all_to_workers(&mut cfg, &[(&worker_a, "a"), (&worker_b, "b")]);
    cfg.kvengine.remote_coprocessor_worker_dead_ttl = ReadableDuration::secs(60);
    let server = ServerProc::start(&cfg);
    T.load(&server, 0..ROWS, 16, |h| 3 * h);
    server.flush();

    for _ in 0..3 {
        assert_eq!(remote_answer(&server), worker_a.coprocessor_url());
    }
    assert_eq!(dispatches(&server, "same"), 3.0);
    assert_eq!(dispatches(&server, "cross"), 0.0);
    assert_eq!(worker_b.requests("ok"), 0.0, "zone b is not used");

    worker_a.kill();
    let before = ServerCopCounters::read(&server);
    // The first request finds worker a gone and moves on to b at once; the next ones skip the
    // dead worker.
    for _ in 0..3 {
        assert_eq!(remote_answer(&server), worker_b.coprocessor_url());
    }
    let delta = ServerCopCounters::read(&server).since(&before);
    assert_eq!(delta.fallbacks, 0.0, "{delta:?}");
    assert_eq!(delta.remote, 3.0, "{delta:?}");
    assert_eq!(
        delta.retries, 1.0,
        "one switch from the dead worker: {delta:?}"
    );
    assert_eq!(dispatches(&server, "cross"), 3.0);
    assert_eq!(dispatches(&server, "same"), 4.0, "one failed attempt on a");
    assert_eq!(worker_b.requests("ok"), 3.0);
    let status = server.status_text();
    assert!(status.contains("\"alive\":false"), "{status}");
}

#[test]
fn two_workers_of_the_own_zone_share_the_load_and_the_other_zone_gets_none() {
    let cluster = Cluster::new(StoreKind::Local);
    let worker_a1 = start_worker(&cluster, "worker-a1", "a");
    let worker_a2 = start_worker(&cluster, "worker-a2", "a");
    let worker_b = start_worker(&cluster, "worker-b", "b");
    let mut cfg = cluster.server_config("server");
    server_zone(&mut cfg, "a");
    offload_all_to_workers(
        &mut cfg,
        &[(&worker_b, "b"), (&worker_a1, "a"), (&worker_a2, "a")],
    );
    let server = ServerProc::start(&cfg);
    T.load(&server, 0..ROWS, 16, |h| 3 * h);

    for _ in 0..6 {
        remote_answer(&server);
    }
    assert_eq!(worker_a1.requests("ok"), 3.0);
    assert_eq!(worker_a2.requests("ok"), 3.0);
    assert_eq!(worker_b.requests("ok"), 0.0);
    assert_eq!(dispatches(&server, "same"), 6.0);
}
