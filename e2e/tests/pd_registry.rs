//! The placement driver's view of the cluster, built from heartbeats: servers and workers
//! register under leases (a killed one disappears), the routing table follows Raft (a leader
//! transfer and a split show up), and `stratus ctl` prints it all.

#![allow(clippy::unwrap_used)]

mod front_client;

use std::time::{Duration, Instant};

use e2e::cluster::{Cluster, StoreKind};
use e2e::pd_proc::{PdProc, PdSetup};
use e2e::replicated::ReplicatedCluster;
use e2e::worker_proc::{WorkerProc, WorkerSetup};
use node::PdClient;
use types::ReadableDuration;
use wire::pd::ClusterView;

fn view(pd: &PdProc) -> ClusterView {
    e2e::pd_proc::block_on(
        PdClient::new(&[pd.base_url().to_string()], Duration::from_secs(5)).cluster(),
    )
    .unwrap()
}

/// Waits up to `timeout` for `check` to hold on the cluster view; the view that passed.
fn wait_view(
    pd: &PdProc,
    timeout: Duration,
    what: &str,
    check: impl Fn(&ClusterView) -> bool,
) -> ClusterView {
    let started = Instant::now();
    loop {
        let v = view(pd);
        if check(&v) {
            return v;
        }
        assert!(
            started.elapsed() < timeout,
            "{what} not seen within {timeout:?}: {v:#?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn the_routing_table_follows_leader_transfers_and_splits_and_dead_nodes_unregister() {
    let cluster = Cluster::new(StoreKind::Local);
    let mut setup = PdSetup::new(&cluster.path("pd"), "pd-1", 0, &[]);
    setup.pd.node_lease_ttl = ReadableDuration::secs(1);
    let pd = PdProc::start(&setup);
    let pd_url = pd.base_url().to_string();
    let mut worker_setup = WorkerSetup::new(&cluster.path("w1"), &cluster.store);
    worker_setup.worker.pd_endpoints = vec![pd_url.clone()];
    worker_setup.worker.pd_heartbeat_interval = ReadableDuration::millis(200);
    let mut worker = WorkerProc::start(&worker_setup);
    let cut = b"m".to_vec();
    let mut rc = ReplicatedCluster::start_configured(
        cluster,
        std::slice::from_ref(&cut),
        Duration::from_millis(50),
        |_, s| {
            s.server.tso = false;
            s.server.tso_addr = String::new();
            s.server.pd_endpoints = vec![pd_url.clone()];
            s.server.pd_heartbeat_interval = ReadableDuration::millis(200);
        },
    );
    rc.wait_until_every_region_has_a_leader(Duration::from_secs(30));
    let v = wait_view(
        &pd,
        Duration::from_secs(20),
        "three servers, a worker, two led regions",
        |v| {
            v.stores.len() == 3
                && v.workers.len() == 1
                && v.regions.len() == 2
                && v.regions
                    .iter()
                    .all(|r| r.leader_store_id != 0 && r.peers.len() == 3)
        },
    );
    assert_eq!(v.workers[0].url, worker.base_url());
    assert!(
        v.workers[0].id > wire::pd::RESERVED_IDS,
        "{:?}",
        v.workers[0]
    );
    // Move region 1's leadership: the table follows.
    let region1 = v
        .regions
        .iter()
        .find(|r| r.start.is_empty())
        .unwrap()
        .clone();
    let to = (0..3)
        .find(|i| *i as u64 + 1 != region1.leader_store_id)
        .unwrap();
    rc.transfer_leader(region1.id, to, Duration::from_secs(20));
    wait_view(
        &pd,
        Duration::from_secs(20),
        "the new leader of region 1",
        |v| {
            v.regions.iter().any(|r| {
                r.id == region1.id
                    && r.leader_store_id == to as u64 + 1
                    && r.leader_term > region1.leader_term
            })
        },
    );
    // A split: a new small id and a higher epoch in the table.
    assert!(rc.server(to).split_at(b"f".to_vec()));
    let v = wait_view(&pd, Duration::from_secs(20), "the split", |v| {
        v.regions.len() == 3
    });
    let child = v.regions.iter().find(|r| r.start == b"f").unwrap();
    assert!(
        child.id > wire::pd::RESERVED_IDS && child.id < wire::pd::RESERVED_IDS + 100,
        "{child:?}"
    );
    let left = v.regions.iter().find(|r| r.id == region1.id).unwrap();
    assert!(left.ver > region1.ver && left.end == b"f", "{left:?}");
    // `stratus ctl` prints the same table, as JSON for scripts.
    let out = std::process::Command::new(e2e::binaries::binary(e2e::binaries::STRATUS))
        .args(["ctl", "regions", "--format", "json", "--pd", pd.base_url()])
        .output()
        .unwrap();
    let text = e2e::process::stdout_of_success(out);
    assert!(text.contains(&format!("\"id\":{}", child.id)), "{text}");
    assert_eq!(text.matches("\"id\":").count(), 3, "{text}");
    let out = std::process::Command::new(e2e::binaries::binary(e2e::binaries::STRATUS))
        .args(["ctl", "servers", "--pd", pd.base_url()])
        .output()
        .unwrap();
    let text = e2e::process::stdout_of_success(out);
    assert!(text.contains("(3 rows)"), "{text}");
    // A dead worker and a dead server leave the registrations once their leases end.
    worker.kill();
    rc.kill(2);
    wait_view(
        &pd,
        Duration::from_secs(20),
        "the dead nodes unregistered",
        |v| v.workers.is_empty() && v.stores.len() == 2,
    );
}

/// `stratus_worker_delegate_requests_total{result="ok"}` of `worker`.
fn delegated_ok(worker: &WorkerProc) -> f64 {
    ok_count(worker, "stratus_worker_delegate_requests_total")
}

/// The `result="ok"` series of counter `name` of `worker`.
fn ok_count(worker: &WorkerProc, name: &str) -> f64 {
    worker
        .metrics()
        .sum(name, &[("result", "ok")])
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_client_knowing_only_the_placement_driver_and_its_zone_runs_sql_and_delegates_to_registered_workers()
 {
    let cluster = Cluster::new(StoreKind::Local);
    let pd = PdProc::start(&PdSetup::new(&cluster.path("pd"), "pd-1", 0, &[]));
    let pd_url = pd.base_url().to_string();
    let mut worker_setup = WorkerSetup::new(&cluster.path("w1"), &cluster.store);
    worker_setup.worker.pd_endpoints = vec![pd_url.clone()];
    worker_setup.worker.pd_heartbeat_interval = ReadableDuration::millis(200);
    let worker = WorkerProc::start(&worker_setup);
    let mut rc =
        ReplicatedCluster::start_configured(cluster, &[], Duration::from_millis(50), |_, s| {
            s.server.tso = false;
            s.server.tso_addr = String::new();
            s.server.pd_endpoints = vec![pd_url.clone()];
            s.server.pd_heartbeat_interval = ReadableDuration::millis(200);
        });
    rc.wait_until_every_region_has_a_leader(Duration::from_secs(30));
    wait_view(
        &pd,
        Duration::from_secs(20),
        "a led region and a worker",
        |v| v.regions.len() == 1 && v.regions[0].leader_store_id != 0 && v.workers.len() == 1,
    );
    // The cluster file of issue 17: the placement driver and the client's zone, nothing else.
    let cfg: client::ClientConfig = toml::from_str(&format!(
        "pd-endpoints = [\"{pd_url}\"]\nrequest-timeout = \"30s\"\nlabels = {{ zone = \"a\" }}\n"
    ))
    .unwrap();
    let c = front_client::FrontClient::with_config(cfg);
    let mut e = c.session();
    let mut exec = |sql: &str| c.exec(&mut e, sql);
    exec("CREATE TABLE t (id BIGINT PRIMARY KEY, v BIGINT)");
    exec("INSERT INTO t VALUES (1, 10), (2, 20), (3, 30)");
    let sum = exec("SELECT COUNT(*), SUM(v) FROM t");
    assert_eq!(
        sum.rows,
        vec![vec![
            wire::datum::Datum::Int(3),
            wire::datum::Datum::Int(60)
        ]]
    );
    // The delegate path picks among the workers the placement driver lists.
    let before = delegated_ok(&worker);
    exec("SET stratus_remote_coprocessor = ON");
    let again = exec("SELECT COUNT(*), SUM(v) FROM t");
    assert_eq!(again.rows, sum.rows);
    assert!(
        delegated_ok(&worker) > before,
        "the registered worker served nothing"
    );
    let alive = c.client.alive_workers();
    assert_eq!(alive.len(), 1, "{alive:?}");
    assert_eq!(alive[0].zone, types::Zone::label("a"));
    // A delegate request naming an address the placement driver does not list is refused
    // before the worker calls anything: a client cannot point the worker's node identity at
    // any address it likes.
    let refused_before = worker
        .metrics()
        .sum(
            "stratus_worker_delegate_requests_total",
            &[("result", "unknown_server")],
        )
        .unwrap();
    let reply = harness::http::post_with_headers(
        &format!("{}{}", worker.base_url(), wire::paths::DELEGATE_COPROCESSOR),
        Vec::new(),
        &[(wire::delegate::REGION_SERVER_HEADER, "http://127.0.0.1:9")],
        Duration::from_secs(30),
    )
    .unwrap();
    assert_eq!(reply.status.as_u16(), 403, "{reply:?}");
    let text = String::from_utf8_lossy(&reply.body);
    assert!(text.contains("placement driver lists"), "{text}");
    let refused = worker
        .metrics()
        .sum(
            "stratus_worker_delegate_requests_total",
            &[("result", "unknown_server")],
        )
        .unwrap();
    assert_eq!(refused, refused_before + 1.0);
}

/// `stratus_worker_coprocessor_requests_total{result="ok"}` of `worker`.
fn offloads_ok(worker: &WorkerProc) -> f64 {
    ok_count(worker, "stratus_worker_coprocessor_requests_total")
}

#[test]
fn a_server_offloads_to_a_worker_it_learned_from_the_registrations() {
    let cluster = Cluster::new(StoreKind::Local);
    let pd = PdProc::start(&PdSetup::new(&cluster.path("pd"), "pd-1", 0, &[]));
    let pd_url = pd.base_url().to_string();
    let mut worker_setup = WorkerSetup::new(&cluster.path("w1"), &cluster.store);
    worker_setup.worker.pd_endpoints = vec![pd_url.clone()];
    worker_setup.worker.pd_heartbeat_interval = ReadableDuration::millis(200);
    let worker = WorkerProc::start(&worker_setup);
    // No worker in the server's config: offload everything to whichever registered.
    let mut setup = cluster.server_config("server");
    setup.server.tso = false;
    setup.server.pd_endpoints = vec![pd_url.clone()];
    setup.server.pd_heartbeat_interval = ReadableDuration::millis(200);
    setup.config.kvengine.remote_coprocessor_min_blocks_size = types::ReadableSize(0);
    let server = e2e::server_proc::ServerProc::start(&setup);
    let table = e2e::sample_table::SampleTable { id: 9 };
    table.load(&server, 0..500, 16, |h| h);
    server.flush();
    let ts = e2e::pd_proc::timestamp(std::slice::from_ref(&pd_url));
    let count_sum = |server: &e2e::server_proc::ServerProc| {
        let region = server.region_of(&table.range().start);
        let resp = server.coprocessor(&e2e::coprocessor::request(
            &table.count_sum_dag(),
            vec![table.range()],
            ts,
            &region,
        ));
        e2e::coprocessor::rows(&resp).expect("rows")
    };
    let started = Instant::now();
    let before = offloads_ok(&worker);
    loop {
        let rows = count_sum(&server);
        assert_eq!(
            rows,
            vec![vec![
                wire::datum::Datum::Int(500),
                wire::datum::Datum::Int(499 * 500 / 2)
            ]]
        );
        if offloads_ok(&worker) > before {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the server never offloaded to the registered worker"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
