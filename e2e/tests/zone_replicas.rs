//! A whole replica in every zone, on real processes: a placement driver (embedded store),
//! three founding servers in zones a, b and c (three voters per region), a fourth server in
//! zone d, two workers in zone d and one in zone a, and an entry client in zone d sending the
//! sample table's aggregate down the delegate path under each node-selection policy.
//!
//! 1. The rule `whole = a,b,c,d` is on, but the zone-d server is drained before it first
//!    starts: zone d holds no replica, so every region is inaccessible there
//!    (`priority_local_zone_nodes` warns with every region, `only_local_zone_nodes` errs: more
//!    regions than its tolerance).
//! 2. The zone-d server is SIGSTOPped and taken back up: the placement driver adds a learner
//!    of every region on it, which commit on the voters alone (writes go on) and stay
//!    `pending`: no snapshot can reach a stopped server. Through the running cluster, those
//!    regions are still not accessible in zone d (the same warning and error).
//! 3. SIGCONT: the learners apply their snapshots, and every policy plans every region on the
//!    zone-d workers with no warning. Each worker reads from the zone-d learner (a replica
//!    read), never from a leader, and the rows are right, including a write made after the
//!    learners caught up.
//! 4. Deleting the rule removes the learners, and zone d is inaccessible again.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use client::{CopResult, Scope};
use e2e::bank::{ctl, on_pd, wait_view};
use e2e::cluster::{Cluster, StoreKind};
use e2e::entry_client::EntryClient;
use e2e::pd_proc::{PdProc, PdSetup};
use e2e::replicated::ReplicatedCluster;
use e2e::sample_table::SampleTable;
use e2e::server_proc::ServerProc;
use e2e::worker_proc::WorkerProc;
use e2e::zones::worker_zone;
use harness::supervisor::Signal;
use types::ReadableDuration;
use wire::pd::ClusterView;

const T: SampleTable = SampleTable { id: 61 };
const ROWS: i64 = 400;
/// Eight regions: more than `only_local_zone_nodes` tolerates with two local workers (6).
const CUT_EVERY: i64 = 50;
const POLICY: &str = "tidb_tiflash_node_selection_policy";
const REMOTE: &str = "stratus_remote_coprocessor";
const POLICIES: [&str; 3] = [
    "all_nodes",
    "priority_local_zone_nodes",
    "only_local_zone_nodes",
];
/// The zone-d server's store id (configured: it is drained before it first registers).
const D: u64 = 4;
const TIMEOUT: Duration = Duration::from_secs(30);
/// Worker ids are the client config's order.
const WORKER_ZONES: [&str; 3] = ["d", "d", "a"];

fn value(h: i64) -> i64 {
    h * 7
}

/// The regions of the sample table, by the placement driver's table.
fn table_regions(v: &ClusterView) -> Vec<&wire::region::Region> {
    let range = T.range();
    v.regions
        .iter()
        .filter(|r| (r.end.is_empty() || range.start < r.end) && r.start < range.end)
        .collect()
}

/// Whether every region of the table has a learner on the zone-d server, `pending` or not.
fn learners_on_d(v: &ClusterView, pending: bool) -> bool {
    let regions = table_regions(v);
    regions.len() == 8
        && regions.iter().all(|r| {
            r.peers
                .iter()
                .any(|p| p.store_id == D && p.is_learner() && p.pending == pending)
                && r.peers.iter().filter(|p| !p.is_learner()).count() == 3
        })
}

fn no_replica_on_d(v: &ClusterView) -> bool {
    let regions = table_regions(v);
    regions.len() == 8
        && regions
            .iter()
            .all(|r| r.peers.iter().all(|p| p.store_id != D))
}

/// A new session of `entry` with the delegate path on runs the table's aggregate under
/// `policy`.
fn run(entry: &EntryClient, policy: &str) -> Result<CopResult, client::Error> {
    entry.block_on(async {
        let mut s = entry.client.session().await.expect("session");
        s.set(Scope::Session, POLICY, policy).await.expect("SET");
        s.set(Scope::Session, REMOTE, "ON").await.expect("SET");
        let ts = entry.client.current_ts().await.expect("timestamp");
        s.coprocessor(&T.count_sum_dag(), vec![T.range()], ts).await
    })
}

fn expected(rows: i64) -> Vec<Vec<wire::datum::Datum>> {
    SampleTable::count_sum_rows((0..rows).map(value))
}

/// Zone d lacks the table (no replica, or none caught up): the local policies say so.
fn assert_inaccessible_in_d(entry: &EntryClient, rows: i64) {
    let r = run(entry, "priority_local_zone_nodes").unwrap();
    assert_eq!(r.rows, expected(rows));
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    assert!(
        r.warnings[0]
            .starts_with("Total 8 region(s) can not be accessed by TiFlash in the zone [d]"),
        "{:?}",
        r.warnings
    );
    // The tolerance is 3 regions per alive local worker (6): the error counts one more.
    let e = run(entry, "only_local_zone_nodes").unwrap_err();
    assert!(
        e.to_string()
            .contains("No less than 7 region(s) can not be accessed by TiFlash in the zone [d]"),
        "{e}"
    );
}

/// The cluster of these tests; processes first, so they stop before the directory goes.
struct Zoned {
    workers: Vec<WorkerProc>,
    server_d: ServerProc,
    rc: ReplicatedCluster,
    pd: PdProc,
}

impl Zoned {
    /// The placement driver, three founders (zones a, b, c) with the table loaded, the rule
    /// `whole = a,b,c,d`, the zone-d server (drained before it first registers; taken up once
    /// the rule is set unless `drained`, so it gets learners only) and the workers.
    fn start(drained: bool) -> Zoned {
        let cluster = Cluster::new(StoreKind::Local);
        let mut pd_setup = PdSetup::new(&cluster.path("pd"), "pd-1", 0, &[]);
        // A SIGSTOPped server stays registered (and so gets learners).
        pd_setup.pd.node_lease_ttl = ReadableDuration::secs(60);
        pd_setup.pd.max_store_down_time = ReadableDuration::secs(600);
        pd_setup.pd.schedule_interval = ReadableDuration::millis(200);
        let pd = PdProc::start(&pd_setup);
        let pd_url = pd.base_url().to_string();
        let heartbeat = ReadableDuration::millis(200);
        let cuts: Vec<Vec<u8>> = (1..8).map(|i| T.key(i * CUT_EVERY)).collect();
        let mut rc = ReplicatedCluster::start_configured(
            cluster,
            &cuts,
            Duration::from_millis(50),
            |_, s| on_pd(s, &pd_url, heartbeat),
        );
        rc.wait_until_every_region_has_a_leader(TIMEOUT);
        for chunk in (0..ROWS).collect::<Vec<_>>().chunks(CUT_EVERY as usize) {
            let pairs = chunk
                .iter()
                .map(|h| (T.key(*h), SampleTable::value(value(*h), 16)))
                .collect();
            rc.write(pairs, TIMEOUT);
        }
        // A rule naming a zone no server is in yet is refused (a typo would otherwise cost
        // replicas).
        let refused = ctl_failure(&pd, &["rules", "set", "whole", "a,b,c,d"]);
        assert!(
            refused.contains("expected zones of registered servers (a, b, c), found \"d\""),
            "{refused}"
        );
        // Drained before it first registers, so no balancing move puts a voter there before the
        // rule (which can name zone d only once it is registered) makes it a learner's zone.
        assert!(ctl(&pd, &["server", "drain", "4"]).contains("draining"));
        let port = harness::ports::reserve(1).unwrap()[0];
        let mut setup_d = rc.joining_setup(D as u16, "d", port, &cuts);
        on_pd(&mut setup_d, &pd_url, heartbeat);
        let server_d = ServerProc::start(&setup_d);
        wait_view(&pd, "the zone-d server registered", |v| {
            v.stores.iter().any(|s| {
                s.heartbeat.as_ref().is_some_and(|h| h.store_id == D)
                    && s.state() == wire::pd::StoreState::Draining
            })
        });
        let rule = ctl(&pd, &["rules", "set", "whole", "a,b,c,d"]);
        assert!(rule.contains("a,b,c,d"), "{rule}");
        if !drained {
            ctl(&pd, &["server", "up", "4"]);
        }
        let workers = WORKER_ZONES
            .iter()
            .enumerate()
            .map(|(i, zone)| {
                let mut cfg = rc.cluster.worker_config(&format!("worker-{i}"));
                worker_zone(&mut cfg, zone);
                WorkerProc::start(&cfg)
            })
            .collect();
        Zoned {
            workers,
            server_d,
            rc,
            pd,
        }
    }

    /// An entry client in zone d knowing every server and worker, small pages; the cache
    /// admits every result.
    fn entry(&self) -> EntryClient {
        let mut cfg = client::ClientConfig::new(self.rc.urls());
        cfg.pd_endpoints = vec![self.pd.base_url().to_string()];
        cfg.request_timeout = ReadableDuration::secs(30);
        cfg.workers = self
            .workers
            .iter()
            .map(|w| w.base_url().to_string())
            .collect();
        cfg.labels.insert("zone".into(), "d".into());
        cfg.paging.initial_size = 16;
        cfg.paging.max_size = 32;
        cfg.cop_cache.admission_min_process_time = ReadableDuration::millis(0);
        EntryClient::with_config(cfg)
    }

    /// The zone of a server's base URL.
    fn zone_of(&self, url: &str) -> &'static str {
        if url == self.server_d.base_url().trim_end_matches('/') {
            return "d";
        }
        let i = self
            .rc
            .urls()
            .iter()
            .position(|u| u.trim_end_matches('/') == url)
            .unwrap_or_else(|| panic!("{url} is no server of the cluster"));
        ["a", "b", "c"][i]
    }
}

#[test]
fn zone_local_reads_follow_the_whole_replica_rule_and_wait_for_caught_up_learners() {
    // 1. The rule is on, the zone-d server drained before it registers: nothing goes there.
    let mut z = Zoned::start(true);
    let (pd, entry) = (&z.pd, z.entry());
    assert!(no_replica_on_d(&e2e::bank::view(pd).unwrap()));
    assert_inaccessible_in_d(&entry, ROWS);

    // 2. Stopped, then up: learners added on the voters alone, pending until it runs again.
    z.server_d.signal(Signal::SIGSTOP);
    ctl(pd, &["server", "up", "4"]);
    wait_view(pd, "a pending learner of every region in zone d", |v| {
        learners_on_d(v, true)
    });
    // Writes go on without the stopped learner (it takes no part in quorums).
    z.rc.write(
        vec![(T.key(ROWS), SampleTable::value(value(ROWS), 16))],
        TIMEOUT,
    );
    assert_inaccessible_in_d(&entry, ROWS + 1);

    // 3. Running again: every region caught up in zone d, read there under every policy.
    z.server_d.signal(Signal::SIGCONT);
    wait_view(pd, "every zone-d learner caught up", |v| {
        learners_on_d(v, false)
    });
    z.rc.write(
        vec![(T.key(ROWS + 1), SampleTable::value(value(ROWS + 1), 16))],
        TIMEOUT,
    );
    let deadline = Instant::now() + TIMEOUT;
    for policy in POLICIES {
        let r = loop {
            let r = run(&entry, policy).unwrap();
            // The client's routing table follows the placement driver's watch: a round or
            // two after the view above.
            if r.warnings.is_empty() || Instant::now() > deadline {
                break r;
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        assert!(r.warnings.is_empty(), "{policy}: {:?}", r.warnings);
        assert_eq!(r.rows, expected(ROWS + 2), "{policy}");
        // Every worker reads from the replica in its own zone (zone d's learner for the
        // zone-d workers), never across zones; the local policies use only zone-d workers.
        for p in &r.pages {
            let worker = p.served_by.worker_id().expect("a worker served the page");
            let worker_zone = WORKER_ZONES[usize::try_from(worker).unwrap()];
            let server = p.server.trim_end_matches('/');
            assert_eq!(
                z.zone_of(server),
                worker_zone,
                "{policy}: region {} read by worker {worker} from {server}",
                p.region_id
            );
            if policy != "all_nodes" {
                assert_eq!(worker_zone, "d", "{policy}: region {}", p.region_id);
            }
        }
    }

    // 4. Without the rule the learners go, and zone d lacks the table again.
    ctl(pd, &["rules", "delete", "whole"]);
    wait_view(pd, "the zone-d learners removed", no_replica_on_d);
    let deadline = Instant::now() + TIMEOUT;
    loop {
        // The client's table follows the placement driver's a round or two later.
        let r = run(&entry, "priority_local_zone_nodes").unwrap();
        let all_listed = r
            .warnings
            .iter()
            .any(|w| w.starts_with("Total 8 region(s)"));
        if all_listed || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_inaccessible_in_d(&entry, ROWS + 2);
    let rules = ctl(pd, &["rules"]);
    assert!(
        !rules.contains("whole"),
        "the rule is still listed: {rules}"
    );
}

/// `stratus ctl ARGS` that must fail; its stderr.
fn ctl_failure(pd: &PdProc, args: &[&str]) -> String {
    let out = std::process::Command::new(e2e::binaries::binary(e2e::binaries::STRATUS))
        .arg("ctl")
        .args(args)
        .args(["--pd", pd.base_url()])
        .output()
        .unwrap();
    assert!(!out.status.success(), "stratus ctl {args:?} succeeded");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Waits until every region has a caught-up learner in zone d and the client sees it (no
/// warning under `only_local_zone_nodes`).
fn wait_for_learners_in_d(z: &Zoned, entry: &EntryClient) {
    wait_view(&z.pd, "every zone-d learner caught up", |v| {
        learners_on_d(v, false)
    });
    let deadline = Instant::now() + TIMEOUT;
    while !run(entry, "only_local_zone_nodes").is_ok_and(|r| r.warnings.is_empty()) {
        assert!(
            Instant::now() < deadline,
            "the client never saw zone d's learners"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// One data version across replicas: a result computed on a zone-d worker from zone d's
/// learner is cached against the learner's data version (its applied index), and the
/// leaders, at the same applied index, answer the next request from that entry; after a
/// write the entry misses.
#[test]
fn a_result_cached_through_one_zones_replica_is_a_hit_through_another_zones_until_a_write() {
    let mut z = Zoned::start(false);
    let entry = z.entry();
    wait_for_learners_in_d(&z, &entry);
    // Nothing moving: a leader transfer appends an entry, and any entry moves the data version.
    let deadline = Instant::now() + TIMEOUT;
    let mut quiet = 0;
    while quiet < 3 {
        quiet = if e2e::bank::operators_in_flight(&z.pd) == Some(0) {
            quiet + 1
        } else {
            0
        };
        assert!(Instant::now() < deadline, "scheduling never came to rest");
        std::thread::sleep(Duration::from_millis(300));
    }
    let dag = T.count_sum_dag();
    let cop = |remote: bool| -> CopResult {
        entry.block_on(async {
            let mut s = entry.client.session().await.expect("session");
            s.set(Scope::Session, POLICY, "only_local_zone_nodes")
                .await
                .expect("SET");
            s.set(Scope::Session, REMOTE, if remote { "ON" } else { "OFF" })
                .await
                .expect("SET");
            s.set(Scope::Session, "stratus_cop_cache", "ON")
                .await
                .expect("SET");
            let ts = entry.client.current_ts().await.expect("timestamp");
            s.coprocessor(&dag, vec![T.range()], ts)
                .await
                .expect("query")
        })
    };
    // Filled through zone d: every page computed by a zone-d worker from the learner.
    let filled = cop(true);
    assert_eq!(filled.rows, expected(ROWS));
    for p in &filled.pages {
        assert_eq!(z.zone_of(p.server.trim_end_matches('/')), "d", "{p:?}");
        assert!(!p.from_cache);
    }
    // Through the leaders (zones a, b, c): every region a hit.
    let hit = cop(false);
    assert_eq!(hit.rows, expected(ROWS));
    for p in &hit.pages {
        assert_ne!(z.zone_of(p.server.trim_end_matches('/')), "d", "{p:?}");
        assert!(p.from_cache, "region {} missed: {p:?}", p.region_id);
    }
    // A write to the last region: that region misses (and sees it), the others still hit.
    z.rc.write(
        vec![(T.key(ROWS), SampleTable::value(value(ROWS), 16))],
        TIMEOUT,
    );
    let after = cop(false);
    assert_eq!(after.rows, expected(ROWS + 1));
    let written = z.rc.server(0).region_of(&T.key(ROWS)).region_id();
    for p in &after.pages {
        assert_eq!(p.from_cache, p.region_id != written, "{p:?}");
    }
}

/// Follower and learner reads never return data older than a write acknowledged before the
/// read started: one register (a row's value) written 1, 2, 3, ... through the leaders while
/// leadership moves among the voters every 300 ms; readers in zone d (a worker reading the
/// learner) and on the server path (`tidb_replica_read = follower`) each take a timestamp
/// after noting the last acknowledged value, and must read at least that value.
#[test]
fn replica_reads_in_every_zone_see_every_write_acknowledged_before_they_started() {
    let z = Zoned::start(false);
    let entry = z.entry();
    wait_for_learners_in_d(&z, &entry);
    let key = T.key(0);
    let range = wire::coprocessor::KeyRange::new(key.clone(), T.key(1));
    let acked = AtomicI64::new(value(0));
    let stop = AtomicBool::new(false);
    let urls = z.rc.urls();
    // The writer goes on past `writes` until each reader has checked `MIN_READS` reads (a
    // loaded machine reads slowly), within a bound.
    const MIN_READS: usize = 20;
    let writes = 120;
    let checked = [AtomicUsize::new(0), AtomicUsize::new(0)];
    let reads_due = Instant::now() + Duration::from_secs(180);
    let reads = std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            let enough_reads = || {
                checked
                    .iter()
                    .all(|c| c.load(Ordering::SeqCst) >= MIN_READS)
            };
            for i in 1.. {
                if i > writes && (enough_reads() || Instant::now() > reads_due) {
                    break;
                }
                let v = value(0) + i;
                let pairs = vec![(key.clone(), SampleTable::value(v, 16))];
                let deadline = Instant::now() + TIMEOUT;
                'write: loop {
                    for s in 0..3 {
                        if z.rc
                            .server(s)
                            .try_raw_load(pairs.clone(), TIMEOUT / 10)
                            .is_ok()
                        {
                            break 'write;
                        }
                    }
                    assert!(Instant::now() < deadline, "write {i} never acknowledged");
                    std::thread::sleep(Duration::from_millis(20));
                }
                acked.store(v, Ordering::SeqCst);
            }
            stop.store(true, Ordering::SeqCst);
        });
        let mover = scope.spawn(|| {
            let mut to = 0u64;
            while !stop.load(Ordering::SeqCst) {
                to = to % 3 + 1;
                let body = wire::region::TransferLeaderRequest {
                    region_id: 1,
                    to_store_id: to,
                };
                for url in &urls {
                    let url = format!("{url}{}", wire::paths::ADMIN_TRANSFER_LEADER);
                    // 409 from every server but the leader.
                    let _ = harness::http::post(
                        &url,
                        prost::Message::encode_to_vec(&body),
                        Duration::from_secs(2),
                    );
                }
                std::thread::sleep(Duration::from_millis(300));
            }
        });
        let reader = |remote: bool| {
            let (acked, stop, range) = (&acked, &stop, range.clone());
            let progress = &checked[usize::from(remote)];
            let z = &z;
            scope.spawn(move || {
                let entry = z.entry();
                let (mut checked, mut zone_d) = (0, 0);
                while !stop.load(Ordering::SeqCst) {
                    let floor = acked.load(Ordering::SeqCst);
                    let read = entry.block_on(async {
                        let mut s = entry.client.session().await.expect("session");
                        s.set(Scope::Session, POLICY, "only_local_zone_nodes")
                            .await?;
                        s.set(Scope::Session, REMOTE, if remote { "ON" } else { "OFF" })
                            .await?;
                        s.set(Scope::Session, "tidb_replica_read", "follower")
                            .await?;
                        let ts = entry.client.current_ts().await?;
                        s.coprocessor(&T.count_sum_dag(), vec![range.clone()], ts)
                            .await
                    });
                    // A read may fail while leadership moves; the next one tries again.
                    let Ok(r) = read else { continue };
                    let [row] = r.rows.as_slice() else {
                        panic!("one row expected: {:?}", r.rows)
                    };
                    let wire::datum::Datum::Int(v) = row[1] else {
                        panic!("an integer sum expected: {row:?}")
                    };
                    assert!(v >= floor, "read {v} after {floor} was acknowledged");
                    // A new leader reports every replica pending until its first append is
                    // acknowledged: a read then goes to the leader, in another zone.
                    let in_d = r
                        .pages
                        .iter()
                        .all(|p| z.zone_of(p.server.trim_end_matches('/')) == "d");
                    checked += 1;
                    zone_d += usize::from(in_d);
                    progress.store(checked, Ordering::SeqCst);
                }
                (checked, zone_d)
            })
        };
        let learner = reader(true);
        let follower = reader(false);
        writer.join().unwrap();
        mover.join().unwrap();
        (learner.join().unwrap(), follower.join().unwrap())
    });
    let ((learner, learner_in_d), (follower, _)) = reads;
    assert!(
        learner >= MIN_READS && follower >= MIN_READS,
        "too few reads checked: learner {learner} follower {follower}"
    );
    assert!(
        learner_in_d * 2 >= learner,
        "the zone-d worker read zone d's learner in only {learner_in_d} of {learner} reads"
    );
}
