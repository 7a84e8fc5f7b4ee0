//! What the client learns about the cluster: regions and their server's zone from each
//! server's `GET /regions`, and which workers are alive from `GET /status` probes (a failed
//! probe marks a worker dead for the configured TTL).

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::time::{Duration, Instant};

use e2e::cluster::{Cluster, StoreKind};
use e2e::entry_client::EntryClient;
use e2e::sample_table::SampleTable;
use e2e::server_proc::ServerProc;
use e2e::worker_proc::WorkerProc;
use e2e::zones::{server_zone, worker_zone};
use types::ReadableDuration;

const T: SampleTable = SampleTable { id: 17 };

#[test]
fn regions_and_their_zones_come_from_each_servers_region_list() {
    let cluster = Cluster::new(StoreKind::Local);
    let mut a_cfg = cluster.server_config("a");
    a_cfg.ranges(&[(Vec::new(), T.key(100))]);
    let a = ServerProc::start(&a_cfg);
    let mut b_cfg = cluster.server_config("b");
    b_cfg.server.node_id = 2;
    server_zone(&mut b_cfg, "b");
    b_cfg.ranges(&[(T.key(100), Vec::new())]).tso_from(&a);
    let b = ServerProc::start(&b_cfg);
    let c = EntryClient::new(&[&a, &b], |_| {});
    c.block_on(c.client.refresh_regions()).expect("regions");
    let cache = c.client.region_cache();
    let low = cache.lookup(&T.key(5)).expect("a region holds key 5");
    let high = cache.lookup(&T.key(500)).expect("a region holds key 500");
    let zones = |r: &client::region_cache::CachedRegion| -> Vec<String> {
        r.replica_zones()
            .iter()
            .map(|z| z.as_str().to_string())
            .collect()
    };
    // Standalone servers list no peers: the answering server is the one replica.
    assert_eq!(
        (low.server(), zones(&low)),
        (a.base_url(), vec!["a".into()])
    );
    assert_eq!(
        (high.server(), zones(&high)),
        (b.base_url(), vec!["b".into()])
    );
    assert_eq!(low.region.id, a.region_of(&T.key(5)).id);
    assert_eq!(cache.regions().len(), 2);
}

#[test]
fn a_worker_that_fails_its_probe_is_dead_for_the_ttl() {
    let cluster = Cluster::new(StoreKind::Local);
    let server = ServerProc::start(&cluster.server_config("server"));
    let mut w_cfg = cluster.worker_config("worker");
    worker_zone(&mut w_cfg, "b");
    let mut worker = WorkerProc::start(&w_cfg);
    // A port nothing listens on: bind one, then free it.
    let dead_addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let c = EntryClient::new(&[&server], |cfg| {
        cfg.workers = vec![worker.base_url().to_string(), dead_addr];
        cfg.dead_worker_ttl = ReadableDuration::secs(10);
    });
    let liveness = c.client.worker_liveness();
    c.block_on(c.client.probe_workers());
    let alive = c.client.alive_workers();
    assert_eq!(alive.len(), 1, "{alive:?}");
    assert_eq!(
        (alive[0].id, alive[0].zone.as_ref().map(types::Zone::as_str)),
        (0, Some("b"))
    );

    worker.kill();
    let probed = Instant::now();
    c.block_on(c.client.probe_workers());
    assert!(c.client.alive_workers().is_empty());
    // Within the TTL both stay dead; after it they are candidates again (until the next probe).
    let nodes = liveness.nodes_at(probed + Duration::from_secs(5));
    assert!(nodes.iter().all(|n| !n.alive), "{nodes:?}");
    let nodes = liveness.nodes_at(Instant::now() + Duration::from_secs(11));
    assert!(nodes.iter().all(|n| n.alive), "{nodes:?}");
}
