//! The placement driver's topology watch on real processes: a client that made one request
//! (which starts its watch) learns, without any further request, that a region's leadership
//! moved and that a worker registered: the placement leader pushes the change through the long
//! poll (`POST /pd/watch`) within a scheduling round and a heartbeat.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::time::{Duration, Instant};

use e2e::bank::on_pd;
use e2e::cluster::{Cluster, StoreKind};
use e2e::pd_proc::{PdProc, PdSetup};
use e2e::replicated::ReplicatedCluster;
use e2e::worker_proc::{WorkerProc, WorkerSetup};
use types::ReadableDuration;

const TIMEOUT: Duration = Duration::from_secs(30);

/// Waits up to `TIMEOUT` for `done`, calling nothing on the client but its caches.
fn wait(what: &str, done: impl Fn() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(
            started.elapsed() < TIMEOUT,
            "{what} not seen in {TIMEOUT:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_client_learns_a_leader_transfer_and_a_new_worker_from_the_watch_without_asking() {
    let cluster = Cluster::new(StoreKind::Local);
    let mut pd_setup = PdSetup::new(&cluster.path("pd"), "pd-1", 0, &[]);
    pd_setup.pd.schedule_interval = ReadableDuration::millis(100);
    let pd = PdProc::start(&pd_setup);
    let pd_url = pd.base_url().to_string();
    let heartbeat = ReadableDuration::millis(200);
    let mut worker_setup = WorkerSetup::new(&cluster.path("w1"), &cluster.store);
    worker_setup.worker.pd_endpoints = vec![pd_url.clone()];
    worker_setup.worker.pd_heartbeat_interval = heartbeat;
    let mut rc =
        ReplicatedCluster::start_configured(cluster, &[], Duration::from_millis(50), |_, s| {
            on_pd(s, &pd_url, heartbeat)
        });
    let leader = rc.wait_until_every_region_has_a_leader(TIMEOUT)[0];

    // The watch runs on the caller's runtime: a multi-threaded one keeps it going between
    // requests, as a server's would.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut cfg = client::ClientConfig::new(rc.urls());
    cfg.pd_endpoints = vec![pd_url.clone()];
    let client = client::Client::new(cfg).unwrap();
    rt.block_on(client.probe_workers());
    let leader_store = |c: &client::Client| {
        c.region_cache()
            .regions()
            .first()
            .map(|r| r.leader().store_id)
    };
    wait("the routing table from the watch", || {
        leader_store(&client) == Some(leader as u64 + 1)
    });
    assert!(client.alive_workers().is_empty());
    let pushed = client::metrics::TOPOLOGY_UPDATES.get();

    // The leadership moves: the client is told.
    let to = (leader + 1) % rc.urls().len();
    let region_id = client.region_cache().regions()[0].region.id;
    rc.transfer_leader(region_id, to, TIMEOUT);
    wait("the leader transfer from the watch", || {
        leader_store(&client) == Some(to as u64 + 1)
    });

    // A worker registers: node selection sees it.
    let _worker = WorkerProc::start(&worker_setup);
    wait("the new worker from the watch", || {
        client.alive_workers().len() == 1
    });
    assert!(
        client::metrics::TOPOLOGY_UPDATES.get() >= pushed + 2,
        "two changes pushed"
    );
}
