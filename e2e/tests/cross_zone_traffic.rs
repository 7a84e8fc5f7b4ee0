//! Cross-zone traffic, metered: one server in zone b holding a SQL table, a worker in each of
//! zones a and b, and entry nodes in zones a and b sending their queries' pages to the worker
//! of their own zone (the delegate path) or to the server.
//!
//! * A delegate query from zone a (entry a → worker a → server b): the worker's fetch from the
//!   server crosses zones, and the same number of bytes shows in the worker's
//!   `stratus_network_cross_zone_bytes_total{path="delegate"}` and in `EXPLAIN ANALYZE`'s
//!   `cross_zone_bytes` (the SQL front's scan reports), while the client's own hop (a → a) adds nothing.
//! * The same query from zone b (b → b → b) moves nothing across zones.
//! * A page sent by the zone-a entry node straight to the server: the client's own hop is
//!   cross-zone, and the server counts at least those bytes (it also answers the catalog
//!   reads).

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

mod front_client;

use e2e::cluster::{Cluster, StoreKind};
use e2e::server_proc::ServerProc;
use e2e::worker_proc::WorkerProc;
use e2e::zones::{server_zone, worker_zone};
use front_client::FrontClient;
use harness::metrics::Metrics;

const CROSS: &str = "stratus_network_cross_zone_bytes_total";
const BYTES: &str = "stratus_network_bytes_total";
const QUERY: &str = "SELECT g, COUNT(*), SUM(v) FROM t GROUP BY g";

/// Processes first: they stop before the cluster's directory goes.
struct Zoned {
    worker_a: WorkerProc,
    worker_b: WorkerProc,
    server: ServerProc,
    _cluster: Cluster,
}

impl Zoned {
    /// The server (zone b) with table `t` of 400 rows, half of them flushed; a worker in
    /// each zone.
    fn start() -> Zoned {
        let cluster = Cluster::new(StoreKind::Local);
        let mut cfg = cluster.server_config("server-b");
        server_zone(&mut cfg, "b");
        let server = ServerProc::start(&cfg);
        let worker = |name: &str, zone: &str| {
            let mut cfg = cluster.worker_config(name);
            worker_zone(&mut cfg, zone);
            WorkerProc::start(&cfg)
        };
        let (worker_a, worker_b) = (worker("worker-a", "a"), worker("worker-b", "b"));
        let zoned = Zoned {
            worker_a,
            worker_b,
            server,
            _cluster: cluster,
        };
        let c = zoned.entry("b", &zoned.worker_b);
        let engine = &mut c.session();
        c.exec(
            engine,
            "CREATE TABLE t (id BIGINT PRIMARY KEY, g INT, v BIGINT)",
        );
        for start in (0..400).step_by(200) {
            let values: Vec<String> = (start..start + 200)
                .map(|id| format!("({id}, {}, {})", id % 7, id * 2))
                .collect();
            c.exec(
                engine,
                &format!("INSERT INTO t VALUES {}", values.join(", ")),
            );
            if start == 0 {
                zoned.server.flush();
            }
        }
        zoned
    }

    /// An entry node in `zone` whose only worker is `worker`.
    fn entry(&self, zone: &str, worker: &WorkerProc) -> FrontClient {
        FrontClient::new(&[&self.server], |cfg| {
            cfg.workers = vec![worker.base_url().to_string()];
            cfg.labels.insert("zone".into(), zone.into());
        })
    }
}

/// `CROSS{path}`, both directions.
fn cross(metrics: &Metrics, path: &str) -> f64 {
    metrics.sum(CROSS, &[("path", path)]).unwrap()
}

/// `BYTES{path, zone, peer_zone}`, both directions; 0 before the first such byte.
fn bytes(metrics: &Metrics, path: &str, zone: &str, peer: &str) -> f64 {
    metrics
        .sum(
            BYTES,
            &[("path", path), ("zone", zone), ("peer_zone", peer)],
        )
        .unwrap_or(0.0)
}

#[test]
fn a_delegate_read_of_a_server_in_another_zone_is_cross_zone_in_metrics_and_explain() {
    let zoned = Zoned::start();
    let c = zoned.entry("a", &zoned.worker_a);
    let engine = &mut c.session();
    c.exec(engine, "SET stratus_remote_coprocessor = ON");
    let before = zoned.worker_a.metrics();
    let explained = c.analyze(engine, QUERY);
    let after = zoned.worker_a.metrics();

    // Every region went through worker a, which fetched its snapshot from server b.
    assert!(explained.regions().next().is_some());
    for region in explained.regions() {
        assert!(
            region
                .task()
                .starts_with(&format!("worker {}", zoned.worker_a.base_url())),
            "{}",
            region.task()
        );
        assert!(region.cross_zone_bytes > 0, "{}", region.detail());
    }
    let fetched = cross(&after, "delegate") - cross(&before, "delegate");
    assert!(
        fetched > 0.0,
        "the worker's fetch from zone b crossed zones"
    );
    // The client's own hop is a → a: EXPLAIN reports exactly the worker's fetches.
    assert_eq!(explained.cross_zone_bytes() as f64, fetched);
    assert_eq!(
        cross(&after, "client_worker"),
        cross(&before, "client_worker"),
        "entry a → worker a is the same zone"
    );
    assert_eq!(
        bytes(&after, "delegate", "a", "b") - bytes(&before, "delegate", "a", "b"),
        fetched,
        "every delegate byte was with zone b"
    );
}

#[test]
fn a_same_zone_read_moves_nothing_across_zones_and_a_cross_zone_page_counts_its_own_hop() {
    let zoned = Zoned::start();

    // b → worker b → server b: nothing crosses.
    let c = zoned.entry("b", &zoned.worker_b);
    let engine = &mut c.session();
    c.exec(engine, "SET stratus_remote_coprocessor = ON");
    let before = zoned.worker_b.metrics();
    let explained = c.analyze(engine, QUERY);
    let after = zoned.worker_b.metrics();
    assert_eq!(explained.cross_zone_bytes(), 0, "{:?}", explained.scans);
    assert_eq!(cross(&after, "delegate"), cross(&before, "delegate"));
    assert!(
        bytes(&after, "delegate", "b", "b") > bytes(&before, "delegate", "b", "b"),
        "the worker did fetch, within its zone"
    );

    // a → server b, no worker: the client's own requests and answers cross zones.
    let c = zoned.entry("a", &zoned.worker_a);
    let engine = &mut c.session();
    let before = zoned.server.metrics();
    let explained = c.analyze(engine, QUERY);
    let after = zoned.server.metrics();
    assert!(explained.cross_zone_bytes() > 0);
    let served = cross(&after, "client_server") - cross(&before, "client_server");
    assert!(
        served >= explained.cross_zone_bytes() as f64,
        "the server counts the pages (and the catalog reads): {served} vs {}",
        explained.cross_zone_bytes()
    );
}
