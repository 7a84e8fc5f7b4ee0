//! The client's delegate path end to end: two servers (zones a and b) owning disjoint parts of
//! the key space, four workers (two per zone), an entry client in zone a. Table A lives only
//! on the zone-a server (three regions); table B is spread over both servers (one region on
//! the zone-a server, two on the zone-b server). With `stratus_remote_coprocessor` ON, a
//! session sends each region's pages to the worker that `tidb_tiflash_node_selection_policy`
//! (set GLOBAL by another entry node) allows, and the answer shows which worker served which
//! region, the rows, the selection's warnings, and the delegate bytes that crossed zones.
//!
//! The expected assignments are written out by hand from the node-selection rules (README
//! "Node selection policies", `client::node_selection`'s module doc for ties and order), never
//! computed by `select_nodes`: a test that asks the code under test for its expectation
//! cannot catch that code's mistakes.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::collections::BTreeMap;

use client::{CopResult, ErrorKind, Scope, ServedBy};
use e2e::cluster::{Cluster, StoreKind};
use e2e::entry_client::{EntryClient, handle_v_dag, handles};
use e2e::sample_table::SampleTable;
use e2e::server_proc::ServerProc;
use e2e::worker_proc::WorkerProc;
use e2e::zones::{server_zone, worker_zone, workers_delegate_bytes};
use wire::coprocessor::DagRequest;
use wire::datum::Datum;

const A: SampleTable = SampleTable { id: 41 };
const B: SampleTable = SampleTable { id: 42 };
const ROWS: i64 = 300;
const POLICY: &str = "tidb_tiflash_node_selection_policy";
const REMOTE: &str = "stratus_remote_coprocessor";

fn a_value(h: i64) -> i64 {
    h
}

fn b_value(h: i64) -> i64 {
    1000 + h
}

/// Worker ids are the client config's order: 0 and 1 in zone a, 2 and 3 in zone b.
const WORKER_ZONES: [&str; 4] = ["a", "a", "b", "b"];

/// Processes first: they stop before the cluster's directory goes.
struct Zoned {
    workers: Vec<WorkerProc>,
    server_b: ServerProc,
    server_a: ServerProc,
    _cluster: Cluster,
}

impl Zoned {
    fn start() -> Zoned {
        let cluster = Cluster::new(StoreKind::Local);
        let b_start = B.range().start;
        let mut a_cfg = cluster.server_config("server-a");
        server_zone(&mut a_cfg, "a");
        a_cfg.ranges(&[
            (Vec::new(), A.key(100)),
            (A.key(100), A.key(200)),
            (A.key(200), b_start.clone()),
            (b_start, B.key(100)),
        ]);
        let server_a = ServerProc::start(&a_cfg);
        let mut b_cfg = cluster.server_config("server-b");
        server_zone(&mut b_cfg, "b");
        b_cfg.server.node_id = 2;
        b_cfg
            .ranges(&[(B.key(100), B.key(200)), (B.key(200), Vec::new())])
            .tso_from(&server_a);
        let server_b = ServerProc::start(&b_cfg);
        let workers = WORKER_ZONES
            .iter()
            .enumerate()
            .map(|(i, zone)| {
                let mut cfg = cluster.worker_config(&format!("worker-{i}"));
                worker_zone(&mut cfg, zone);
                WorkerProc::start(&cfg)
            })
            .collect();
        // Half of each table in SSTs (read by the workers from the store), half in memtables
        // (shipped by the owning server).
        A.load(&server_a, 0..150, 16, a_value);
        B.load(&server_a, 0..50, 16, b_value);
        B.load(&server_b, 100..200, 16, b_value);
        server_a.flush();
        server_b.flush();
        A.load(&server_a, 150..ROWS, 16, a_value);
        B.load(&server_a, 50..100, 16, b_value);
        B.load(&server_b, 200..ROWS, 16, b_value);
        Zoned {
            workers,
            server_b,
            server_a,
            _cluster: cluster,
        }
    }

    /// An entry client in `zone` (none: no zone label) knowing both servers and every worker;
    /// small pages, so every region takes several.
    fn entry(&self, zone: Option<&str>) -> EntryClient {
        EntryClient::new(&[&self.server_a, &self.server_b], |cfg| {
            cfg.workers = self
                .workers
                .iter()
                .map(|w| w.base_url().to_string())
                .collect();
            if let Some(zone) = zone {
                cfg.labels.insert("zone".into(), zone.into());
            }
            cfg.paging.initial_size = 32;
            cfg.paging.max_size = 64;
        })
    }

    /// The regions of `table`'s range, in key order, each with its server's zone.
    fn regions(&self, table: SampleTable) -> Vec<Region> {
        let mut out = Vec::new();
        for (server, zone) in [(&self.server_a, "a"), (&self.server_b, "b")] {
            for r in server.regions().regions {
                let range = table.range();
                let overlaps = (r.end.is_empty() || range.start < r.end) && r.start < range.end;
                if overlaps {
                    out.push((
                        r.start.clone(),
                        Region {
                            id: r.region_id(),
                            zone,
                        },
                    ));
                }
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out.into_iter().map(|(_, r)| r).collect()
    }

    fn cross_bytes(&self) -> f64 {
        workers_delegate_bytes(&self.workers, "cross")
    }

    fn same_bytes(&self) -> f64 {
        workers_delegate_bytes(&self.workers, "same")
    }
}

/// A region of a table's range and the zone of the server that owns it (its one replica).
#[derive(Debug)]
struct Region {
    id: types::RegionId,
    zone: &'static str,
}

/// `SET GLOBAL policy` on `admin`, then a new session on `entry` with the delegate path ON
/// (SESSION) runs `dag` over `table`.
fn run_with_global_policy(
    admin: &EntryClient,
    entry: &EntryClient,
    policy: &str,
    table: SampleTable,
    dag: &DagRequest,
    start_ts: u64,
) -> Result<CopResult, client::Error> {
    admin.block_on(async {
        let mut s = admin.client.session().await.expect("admin session");
        s.set(Scope::Global, POLICY, policy)
            .await
            .expect("SET GLOBAL");
    });
    entry.block_on(async {
        let mut s = entry.client.session().await.expect("session");
        assert_eq!(
            s.get(Scope::Session, POLICY).await.unwrap(),
            policy,
            "a new session starts from the GLOBAL value another entry node set"
        );
        s.set(Scope::Session, REMOTE, "ON").await.expect("SET");
        let r = s.coprocessor(dag, vec![table.range()], start_ts).await;
        if let Ok(r) = &r {
            eprintln!(
                "table {} policy {policy}: worker -> regions {:?}, warnings {:?}",
                table.id,
                r.regions_by_worker(),
                r.warnings
            );
        }
        r
    })
}

/// The worker that served each region (every page of a region by one worker).
fn worker_of_region(r: &CopResult) -> BTreeMap<types::RegionId, u64> {
    let mut by = BTreeMap::new();
    for p in &r.pages {
        let w = p
            .served_by
            .worker_id()
            .unwrap_or_else(|| panic!("page served by a server: {p:?}"));
        assert_eq!(
            *by.entry(p.region_id).or_insert(w),
            w,
            "one worker per region"
        );
    }
    by
}

/// Every handle exactly once, with its value.
fn assert_rows(r: &CopResult, value: fn(i64) -> i64) {
    let mut got: Vec<(i64, Datum)> = handles(&r.rows)
        .into_iter()
        .zip(r.rows.iter().map(|row| row[1].clone()))
        .collect();
    got.sort_by_key(|(h, _)| *h);
    let want: Vec<(i64, Datum)> = (0..ROWS).map(|h| (h, Datum::Int(value(h)))).collect();
    assert_eq!(got, want);
}

/// Worker → the regions it served in key order, from hand-written pairs.
fn by_worker(pairs: &[(u64, &[types::RegionId])]) -> BTreeMap<u64, Vec<types::RegionId>> {
    pairs.iter().map(|(w, rs)| (*w, rs.to_vec())).collect()
}

fn ids(regions: &[Region]) -> Vec<types::RegionId> {
    regions.iter().map(|r| r.id).collect()
}

#[test]
fn table_a_is_read_by_zone_a_workers_under_every_policy_without_crossing_zones() {
    let z = Zoned::start();
    let admin = z.entry(Some("a"));
    let entry = z.entry(Some("a"));
    let regions = z.regions(A);
    assert_eq!(regions.len(), 3, "{regions:?}");
    assert!(regions.iter().all(|r| r.zone == "a"), "{regions:?}");
    let (r1, r2, r3) = (regions[0].id, regions[1].id, regions[2].id);
    // Every policy gives each region the zone-a workers 0 and 1 as candidates (all_nodes: the
    // alive workers reading it locally; the zone policies: the entry zone's workers, and every
    // region has a replica there). Three regions over two workers: loads 2 and 1, the tie to
    // the lowest id (worker 0 takes two), each worker a contiguous run in key order, workers in
    // id order.
    let want = by_worker(&[(0, &[r1, r2]), (1, &[r3])]);
    let start_ts = z.server_a.tso();
    for policy in [
        "all_nodes",
        "priority_local_zone_nodes",
        "only_local_zone_nodes",
    ] {
        let (cross, same) = (z.cross_bytes(), z.same_bytes());
        let r =
            run_with_global_policy(&admin, &entry, policy, A, &handle_v_dag(A, false), start_ts)
                .unwrap_or_else(|e| panic!("{policy}: {}", node::error_chain(&e)));
        assert_rows(&r, a_value);
        assert!(r.warnings.is_empty(), "{policy}: {:?}", r.warnings);
        let served = worker_of_region(&r);
        assert_eq!(served.keys().copied().collect::<Vec<_>>(), {
            let mut v = ids(&regions);
            v.sort_unstable();
            v
        });
        assert!(
            served.values().all(|w| WORKER_ZONES[*w as usize] == "a"),
            "{policy}: {served:?}"
        );
        assert_eq!(r.regions_by_worker(), want, "{policy}");
        // Three regions over two zone-a workers: 2 and 1.
        let mut counts: Vec<usize> = r.regions_by_worker().values().map(Vec::len).collect();
        counts.sort_unstable();
        assert_eq!(counts, vec![1, 2], "{policy}");
        assert!(
            r.pages.iter().any(|p| p.resumed),
            "small pages: regions take several"
        );
        assert_eq!(r.stats.cache_hits, 0, "a worker never answers a hit");
        assert_eq!(
            z.cross_bytes() - cross,
            0.0,
            "{policy}: no delegate byte crossed zones"
        );
        assert!(
            z.same_bytes() > same,
            "{policy}: the workers asked server a"
        );
    }
}

#[test]
fn table_b_follows_each_policy_and_only_local_reads_zone_b_regions_across_zones() {
    let z = Zoned::start();
    let admin = z.entry(Some("a"));
    let entry = z.entry(Some("a"));
    let regions = z.regions(B);
    let zones: Vec<&str> = regions.iter().map(|r| r.zone).collect();
    assert_eq!(zones, ["a", "b", "b"], "{regions:?}");
    let (r_a, r_b1, r_b2) = (regions[0].id, regions[1].id, regions[2].id);
    let total_warning =
        format!("Total 2 region(s) can not be accessed by TiFlash in the zone [a]: {r_b1}, {r_b2}");
    let start_ts = z.server_a.tso();
    let zone_of = |w: &u64| WORKER_ZONES[*w as usize];

    // all_nodes, and priority_local_zone_nodes alike (the zone-a region has a replica in the
    // entry zone, the zone-b ones follow all_nodes): the zone-a region's candidates are workers
    // 0 and 1 (the tie to the lowest id: 0), the zone-b regions' are 2 and 3, one each in key
    // order, workers in id order.
    let by_zone = by_worker(&[(0, &[r_a]), (2, &[r_b1]), (3, &[r_b2])]);
    // only_local_zone_nodes: all three go to workers 0 and 1. The zone-a group is handed out
    // first (same candidate count, first in key order): r_a to worker 0; then the zone-b pair
    // to the least loaded (1) and the tie (0), contiguous in key order, workers in id order.
    let only_local = by_worker(&[(0, &[r_a, r_b1]), (1, &[r_b2])]);

    // Runs the handle/v DAG under `policy` (a GLOBAL value, so a fresh session picks it up),
    // checks the rows and that the workers chosen are the ones the rules give.
    let run_policy = |policy: &str, want: &BTreeMap<u64, Vec<types::RegionId>>| {
        let r =
            run_with_global_policy(&admin, &entry, policy, B, &handle_v_dag(B, false), start_ts)
                .expect(policy);
        assert_rows(&r, b_value);
        assert_eq!(&r.regions_by_worker(), want, "{policy}");
        r
    };

    // all_nodes: each region to a worker of its server's zone; nothing crosses zones.
    let cross = z.cross_bytes();
    let r = run_policy("all_nodes", &by_zone);
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    let served = worker_of_region(&r);
    assert_eq!(
        [
            zone_of(&served[&r_a]),
            zone_of(&served[&r_b1]),
            zone_of(&served[&r_b2])
        ],
        ["a", "b", "b"]
    );
    assert_eq!(z.cross_bytes() - cross, 0.0);

    // priority_local_zone_nodes: the zone-a region to a zone-a worker, the others to zone b,
    // with the warning naming them.
    let cross = z.cross_bytes();
    let r = run_policy("priority_local_zone_nodes", &by_zone);
    assert_eq!(r.warnings, std::slice::from_ref(&total_warning));
    let served = worker_of_region(&r);
    assert_eq!(
        [
            zone_of(&served[&r_a]),
            zone_of(&served[&r_b1]),
            zone_of(&served[&r_b2])
        ],
        ["a", "b", "b"]
    );
    assert_eq!(z.cross_bytes() - cross, 0.0);

    // only_local_zone_nodes: zone-a workers read the zone-b regions remotely (2 <= 3 x 2), with
    // the same warning, and those bytes cross zones, counted on both sides.
    let cross = z.cross_bytes();
    let server_b_cross = e2e::zones::server_delegate_bytes(&z.server_b, "cross");
    let r = run_policy("only_local_zone_nodes", &only_local);
    assert_eq!(r.warnings, std::slice::from_ref(&total_warning));
    let served = worker_of_region(&r);
    assert!(served.values().all(|w| zone_of(w) == "a"), "{served:?}");
    assert_eq!(served.len(), 3);
    assert!(
        z.cross_bytes() > cross,
        "zone-a workers read zone-b regions"
    );
    assert!(e2e::zones::server_delegate_bytes(&z.server_b, "cross") > server_b_cross);

    // The final merge runs on the delegate path too: count and sum over the three regions.
    let r = run_with_global_policy(
        &admin,
        &entry,
        "only_local_zone_nodes",
        B,
        &B.count_sum_dag(),
        start_ts,
    )
    .expect("count/sum");
    assert_eq!(r.rows, SampleTable::count_sum_rows((0..ROWS).map(b_value)));
    assert_eq!(r.warnings, [total_warning]);
}

#[test]
fn the_switch_the_zone_label_and_selection_errors_decide_the_path() {
    let z = Zoned::start();
    let entry = z.entry(Some("a"));
    let start_ts = z.server_a.tso();
    let dag = handle_v_dag(B, false);

    // OFF (the default): every page goes to its server, no warning.
    let off = entry.block_on(async {
        let s = entry.client.session().await.unwrap();
        assert_eq!(s.get(Scope::Session, REMOTE).await.unwrap(), "OFF");
        s.coprocessor(&dag, vec![B.range()], start_ts).await
    });
    let off = off.expect("server path");
    assert_rows(&off, b_value);
    assert!(off.pages.iter().all(|p| p.served_by == ServedBy::Server));
    assert!(off.warnings.is_empty());

    // An entry node without a zone label: the policy is ignored, with its warning.
    let no_zone = z.entry(None);
    let r = no_zone.block_on(async {
        let mut s = no_zone.client.session().await.unwrap();
        s.set(Scope::Session, REMOTE, "on").await.unwrap();
        s.set(Scope::Session, POLICY, "only_local_zone_nodes")
            .await
            .unwrap();
        s.coprocessor(&dag, vec![B.range()], start_ts).await
    });
    let r = r.expect("policy ignored");
    assert_rows(&r, b_value);
    assert_eq!(
        r.warnings,
        ["The variable tidb_tiflash_node_selection_policy is ignored."]
    );
    // Ignored means all_nodes: each region to the workers of its server's zone, as above.
    let regions = ids(&z.regions(B));
    assert_eq!(
        r.regions_by_worker(),
        by_worker(&[(0, &[regions[0]]), (2, &[regions[1]]), (3, &[regions[2]])])
    );

    // An entry node in a zone without workers: only_local_zone_nodes fails, typed.
    let zone_c = z.entry(Some("c"));
    let e = zone_c
        .block_on(async {
            let mut s = zone_c.client.session().await.unwrap();
            s.set(Scope::Session, REMOTE, "ON").await.unwrap();
            s.set(Scope::Session, POLICY, "only_local_zone_nodes")
                .await
                .unwrap();
            s.coprocessor(&dag, vec![B.range()], start_ts).await
        })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NodeSelection);
    assert_eq!(e.to_string(), "No alive worker in the zone [c]");
}

#[test]
fn delegated_pages_are_cached_for_the_server_path_but_never_answered_from_the_cache() {
    let z = Zoned::start();
    let entry = z.entry(Some("a"));
    let start_ts = z.server_a.tso();
    let dag = handle_v_dag(A, false);
    let run = |remote: &str| {
        entry.block_on(async {
            let mut s = entry.client.session().await.unwrap();
            s.set(Scope::Session, REMOTE, remote).await.unwrap();
            s.coprocessor(&dag, vec![A.range()], start_ts).await
        })
    };
    let first = run("ON").expect("delegated");
    let again = run("ON").expect("delegated again");
    assert_eq!(again.stats.cache_hits, 0, "a worker never answers a hit");
    assert!(again.pages.iter().all(|p| !p.from_cache));
    assert!(
        !entry.client.cop_cache().is_empty(),
        "delegated pages were stored"
    );
    // The server path confirms the entries the workers' pages left (same data version).
    let off = run("OFF").expect("server path");
    assert!(off.stats.cache_hits > 0, "{:?}", off.stats);
    assert_rows(&first, a_value);
    assert_rows(&off, a_value);
}

#[test]
fn a_region_split_behind_the_clients_back_is_resplit_and_its_children_keep_the_parents_worker() {
    let z = Zoned::start();
    let entry = z.entry(Some("a"));
    let dag = handle_v_dag(A, false);
    let run = |start_ts: u64| {
        entry.block_on(async {
            let mut s = entry.client.session().await.unwrap();
            s.set(Scope::Session, REMOTE, "ON").await.unwrap();
            s.coprocessor(&dag, vec![A.range()], start_ts).await
        })
    };
    let before = run(z.server_a.tso()).expect("delegated");
    let parent = z.server_a.region_of(&A.key(150));
    let parent_worker = worker_of_region(&before)[&parent.region_id()];
    let split: wire::region::SplitResponse = e2e::http_client::post_proto(
        &z.server_a.url(wire::paths::SPLIT),
        &wire::region::SplitRequest {
            region_id: parent.id,
            split_key: A.key(150),
        },
    );
    assert!(
        split.error.is_empty() && split.region_error.is_none(),
        "{split:?}"
    );
    // The client still routes by the parent: the worker passes the server's region error back.
    let after = run(z.server_a.tso()).expect("delegated after the split");
    assert_rows(&after, a_value);
    assert!(after.stats.region_errors >= 1, "{:?}", after.stats);
    let left = z.server_a.region_of(&A.key(100)).id;
    let right = z.server_a.region_of(&A.key(150)).id;
    assert_ne!(left, right);
    let served = worker_of_region(&after);
    assert_eq!(
        (
            served[&types::RegionId(left)],
            served[&types::RegionId(right)]
        ),
        (parent_worker, parent_worker),
        "{served:?}"
    );
}
