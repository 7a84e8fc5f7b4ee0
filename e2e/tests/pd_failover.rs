//! The placement driver on a real etcd, broken on purpose: its leader SIGKILLed and SIGSTOPped
//! while clients fetch timestamps and ids, a single instance restarted, etcd members killed.
//! What must hold: every client sees strictly increasing timestamps, no timestamp or id is ever
//! handed out twice, and another instance takes over within seconds.

#![allow(clippy::unwrap_used)]

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use e2e::pd_proc::{PdProc, PdSetup, block_on, timestamp, wait_for_leader};
use harness::etcd::EtcdCluster;
use harness::supervisor::Signal;
use node::PdClient;

/// Clients fetching timestamps until told to stop; each client's timestamps in order.
struct Fetchers {
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<(Vec<u64>, Vec<String>)>>,
    runtime: tokio::runtime::Runtime,
}

impl Fetchers {
    fn start(endpoints: &[String], clients: usize) -> Fetchers {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        // Each task is one client process's view: its own PdClient (own leader cache), several
        // concurrent callers batched by it.
        let tasks = (0..clients)
            .map(|_| {
                let client = PdClient::new(endpoints, Duration::from_secs(15));
                let stop = stop.clone();
                runtime.spawn(async move {
                    let mut seen = Vec::new();
                    let mut errors = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        // Four callers at once: they share one request.
                        let got = futures_join4(&client).await;
                        for r in got {
                            match r {
                                Ok(ts) => seen.push(ts),
                                Err(e) => errors.push(e.to_string()),
                            }
                        }
                        // Callers' timestamps within one batch are in arrival order; the
                        // assertion below checks increase across batches.
                    }
                    (seen, errors)
                })
            })
            .collect();
        Fetchers {
            stop,
            tasks,
            runtime,
        }
    }

    fn finish(self) -> Vec<(Vec<u64>, Vec<String>)> {
        self.stop.store(true, Ordering::Relaxed);
        let Fetchers { tasks, runtime, .. } = self;
        runtime.block_on(async {
            let mut out = Vec::new();
            for t in tasks {
                out.push(t.await.unwrap());
            }
            out
        })
    }
}

async fn futures_join4(client: &PdClient) -> Vec<Result<u64, node::PdClientError>> {
    let (a, b, c, d) = tokio::join!(
        client.get_ts(),
        client.get_ts(),
        client.get_ts(),
        client.get_ts()
    );
    vec![a, b, c, d]
}

/// Every client's timestamps strictly increase, batch after batch, and no timestamp appears
/// twice across clients.
fn assert_strictly_increasing_and_unique(results: &[(Vec<u64>, Vec<String>)]) -> usize {
    let mut all = HashSet::new();
    for (i, (seen, errors)) in results.iter().enumerate() {
        assert!(errors.is_empty(), "client {i} got errors: {errors:?}");
        for batch in seen.chunks(4) {
            let mut sorted = batch.to_vec();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(
                sorted.len(),
                batch.len(),
                "client {i}: a batch repeats a timestamp"
            );
        }
        for pair in seen.chunks(4).collect::<Vec<_>>().windows(2) {
            let prev_max = pair[0].iter().max().unwrap();
            let next_min = pair[1].iter().min().unwrap();
            assert!(
                next_min > prev_max,
                "client {i}: a later batch has {next_min} <= {prev_max} from an earlier one"
            );
        }
        for ts in seen {
            assert!(all.insert(*ts), "timestamp {ts} handed out twice");
        }
    }
    all.len()
}

fn start_three(dir: &std::path::Path, etcd: &EtcdCluster) -> Vec<PdProc> {
    let ports = harness::ports::reserve(3).unwrap();
    (0..3)
        .map(|i| {
            let setup = PdSetup::new(
                &dir.join(format!("pd-{i}")),
                &format!("pd-{i}"),
                ports[i],
                &etcd.endpoints(),
            );
            PdProc::start(&setup)
        })
        .collect()
}

fn index_of(pds: &[PdProc], url: &str) -> usize {
    pds.iter()
        .position(|p| p.base_url() == url)
        .unwrap_or_else(|| panic!("leader {url} is none of the instances"))
}

#[test]
fn timestamps_strictly_increase_across_sigkills_of_the_placement_leader() {
    let dir = tempfile::tempdir().unwrap();
    let etcd = EtcdCluster::start(&dir.path().join("etcd"), 1).unwrap();
    let mut pds = start_three(dir.path(), &etcd);
    let endpoints: Vec<String> = pds.iter().map(|p| p.base_url().to_string()).collect();
    let leader = wait_for_leader(&pds.iter().collect::<Vec<_>>(), Duration::from_secs(20));
    let fetchers = Fetchers::start(&endpoints, 3);
    let mut leader_idx = index_of(&pds, &leader);
    let mut failovers = Vec::new();
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(700));
        let killed_at = Instant::now();
        pds[leader_idx].kill();
        let rest: Vec<&PdProc> = pds
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != leader_idx)
            .map(|(_, p)| p)
            .collect();
        let next = wait_for_leader(&rest, Duration::from_secs(15));
        failovers.push(killed_at.elapsed());
        let killed = leader_idx;
        leader_idx = index_of(&pds, &next);
        assert_ne!(killed, leader_idx);
        pds[killed].restart();
    }
    std::thread::sleep(Duration::from_millis(500));
    let results = fetchers.finish();
    let total = assert_strictly_increasing_and_unique(&results);
    assert!(
        total > 100,
        "too few timestamps fetched to prove anything: {total}"
    );
    for f in &failovers {
        assert!(
            *f < Duration::from_secs(10),
            "a failover took {f:?}: {failovers:?}"
        );
    }
    drop(etcd);
}

#[test]
fn a_paused_leader_is_replaced_and_serves_nothing_stale_when_it_wakes() {
    let dir = tempfile::tempdir().unwrap();
    let etcd = EtcdCluster::start(&dir.path().join("etcd"), 1).unwrap();
    let mut pds = start_three(dir.path(), &etcd);
    let endpoints: Vec<String> = pds.iter().map(|p| p.base_url().to_string()).collect();
    let leader = wait_for_leader(&pds.iter().collect::<Vec<_>>(), Duration::from_secs(20));
    let idx = index_of(&pds, &leader);
    let fetchers = Fetchers::start(&endpoints, 2);
    std::thread::sleep(Duration::from_millis(500));
    pds[idx].signal(Signal::SIGSTOP);
    let rest: Vec<&PdProc> = pds
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != idx)
        .map(|(_, p)| p)
        .collect();
    let next = wait_for_leader(&rest, Duration::from_secs(15));
    assert_ne!(next, leader);
    // A timestamp from the new leader, then the old one wakes believing it leads until it
    // looks at its lease: asked directly, it must refuse (naming the new leader, which then
    // answers), never hand out a timestamp from its old window.
    let from_new = timestamp(std::slice::from_ref(&next));
    pds[idx].signal(Signal::SIGCONT);
    // Asked directly, at once: a refusal, naming the new leader or no one, never itself.
    let raw: wire::region::TsoResponse = prost::Message::decode(
        harness::http::post(
            &format!("{leader}{}", wire::paths::TSO),
            prost::Message::encode_to_vec(&wire::region::TsoRequest { count: 1 }),
            Duration::from_secs(5),
        )
        .unwrap()
        .body
        .as_ref(),
    )
    .unwrap();
    assert!(
        !raw.error.is_empty() && raw.first_ts == 0 && (raw.leader.is_empty() || raw.leader == next),
        "the woken leader answered {raw:?}"
    );
    let from_woken = timestamp(std::slice::from_ref(&leader));
    assert!(
        from_woken > from_new,
        "the woken leader answered {from_woken} <= {from_new}"
    );
    std::thread::sleep(Duration::from_millis(500));
    let results = fetchers.finish();
    let total = assert_strictly_increasing_and_unique(&results);
    assert!(total > 50, "too few timestamps: {total}");
    let all = pds.iter().collect::<Vec<_>>();
    assert_eq!(wait_for_leader(&all, Duration::from_secs(15)), next);
}

#[test]
fn a_restarted_single_instance_starts_above_everything_it_handed_out() {
    let dir = tempfile::tempdir().unwrap();
    let port = harness::ports::reserve(1).unwrap()[0];
    // The embedded store: what `stratus up` runs.
    let setup = PdSetup::new(&dir.path().join("pd"), "pd-1", port, &[]);
    let mut pd = PdProc::start(&setup);
    let endpoints = vec![pd.base_url().to_string()];
    // One runtime for the client: its timestamp dispatcher lives on it.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = PdClient::new(&endpoints, Duration::from_secs(15));
    let (max_before, ids_before) = rt.block_on(async {
        let mut max = 0;
        for _ in 0..200 {
            max = max.max(client.get_ts().await.unwrap());
        }
        // A batch bigger than a millisecond holds pushes the TSO ahead of the clock.
        max = max.max(client.get_ts_batch(200_000).await.unwrap() + 199_999);
        let ids: Vec<u64> = vec![
            client.alloc_ids(1).await.unwrap(),
            client.alloc_ids(5).await.unwrap(),
        ];
        (max, ids)
    });
    assert_eq!(
        ids_before[0],
        wire::pd::RESERVED_IDS + 1,
        "ids are small: {ids_before:?}"
    );
    pd.kill();
    pd.restart();
    let (after, id_after) = rt.block_on(async {
        (
            client.get_ts().await.unwrap(),
            client.alloc_ids(1).await.unwrap(),
        )
    });
    assert!(after > max_before, "{after} <= {max_before}");
    assert!(
        id_after > ids_before[1] + 4,
        "{id_after} repeats {ids_before:?}"
    );
    assert!(
        id_after < 1000,
        "ids stay small across restarts: {id_after}"
    );
}

#[test]
fn ids_are_never_repeated_across_failovers_and_stay_small() {
    let dir = tempfile::tempdir().unwrap();
    let etcd = EtcdCluster::start(&dir.path().join("etcd"), 1).unwrap();
    let mut pds = start_three(dir.path(), &etcd);
    let endpoints: Vec<String> = pds.iter().map(|p| p.base_url().to_string()).collect();
    let client = PdClient::new(&endpoints, Duration::from_secs(15));
    let mut ids = HashSet::new();
    for round in 0..2 {
        let got: Vec<u64> = block_on(async {
            let mut v = Vec::new();
            for _ in 0..20 {
                v.push(client.alloc_ids(1).await.unwrap());
            }
            v
        });
        for id in got {
            assert!(ids.insert(id), "id {id} handed out twice (round {round})");
        }
        let leader = wait_for_leader(&pds.iter().collect::<Vec<_>>(), Duration::from_secs(15));
        let idx = index_of(&pds, &leader);
        pds[idx].kill();
        pds[idx].restart();
    }
    let max = ids.iter().max().copied().unwrap();
    // Each failover skips at most one reserved batch (100 by default).
    assert!(
        max < wire::pd::RESERVED_IDS + 400,
        "ids grew too fast: {max}"
    );
}

#[test]
fn a_three_member_etcd_losing_one_member_does_not_disturb_the_tso() {
    let dir = tempfile::tempdir().unwrap();
    let mut etcd = EtcdCluster::start(&dir.path().join("etcd"), 3).unwrap();
    let pds = start_three(dir.path(), &etcd);
    let endpoints: Vec<String> = pds.iter().map(|p| p.base_url().to_string()).collect();
    wait_for_leader(&pds.iter().collect::<Vec<_>>(), Duration::from_secs(20));
    let fetchers = Fetchers::start(&endpoints, 2);
    std::thread::sleep(Duration::from_millis(500));
    etcd.kill(0);
    std::thread::sleep(Duration::from_secs(3));
    etcd.restart(0).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let results = fetchers.finish();
    let total = assert_strictly_increasing_and_unique(&results);
    assert!(
        total > 100,
        "too few timestamps: {total}; etcd:\n{}",
        etcd.logs()
    );
}

#[test]
fn a_server_on_the_placement_driver_names_split_regions_with_small_ids() {
    let cluster = e2e::cluster::Cluster::new(e2e::cluster::StoreKind::Local);
    let pd = PdProc::start(&PdSetup::new(&cluster.path("pd"), "pd-1", 0, &[]));
    let mut setup = e2e::server_proc::ServerSetup::new(&cluster.path("server"), &cluster.store);
    setup.server.tso = false;
    setup.server.pd_endpoints = vec![pd.base_url().to_string()];
    let server = e2e::server_proc::ServerProc::start(&setup);
    let first = server.regions().regions;
    assert_eq!(first.len(), 1, "{first:?}");
    assert!(
        first[0].id > wire::pd::RESERVED_IDS && first[0].id < wire::pd::RESERVED_IDS + 100,
        "a one-voter server's first region has an allocated id: {}",
        first[0].id
    );
    for key in [b"k3".to_vec(), b"k6".to_vec()] {
        assert!(server.split_at(key));
    }
    let mut ids: Vec<u64> = server.regions().regions.iter().map(|r| r.id).collect();
    ids.sort_unstable();
    assert_eq!(ids.len(), 3);
    assert!(
        ids.iter()
            .all(|id| *id > wire::pd::RESERVED_IDS && *id < wire::pd::RESERVED_IDS + 100),
        "{ids:?}"
    );
    // The server's own writes take their timestamps from the placement driver.
    let handed_out = |pd: &PdProc| -> u64 {
        harness::metrics::Metrics::parse(&pd.metrics_text())
            .and_then(|m| m.sum("stratus_pd_timestamps_total", &[]))
            .unwrap_or_else(|e| panic!("{e}")) as u64
    };
    let before = handed_out(&pd);
    server.raw_load(vec![(b"k1".to_vec(), b"v".to_vec())]);
    assert!(
        handed_out(&pd) >= before + 2,
        "a raw load takes a start and a commit timestamp"
    );
}

#[test]
fn etcd_down_for_ten_seconds_stops_new_timestamps_with_a_clear_error_but_not_the_raft_leaders() {
    let cluster = e2e::cluster::Cluster::new(e2e::cluster::StoreKind::Local);
    let mut etcd = EtcdCluster::start(&cluster.path("etcd"), 1).unwrap();
    let pd = PdProc::start(&PdSetup::new(
        &cluster.path("pd"),
        "pd-1",
        0,
        &etcd.endpoints(),
    ));
    let pd_url = pd.base_url().to_string();
    let mut rc = e2e::replicated::ReplicatedCluster::start_configured(
        cluster,
        &[],
        Duration::from_millis(50),
        |_, s| {
            s.server.tso = false;
            s.server.tso_addr = String::new();
            s.server.pd_endpoints = vec![pd_url.clone()];
        },
    );
    rc.wait_until_every_region_has_a_leader(Duration::from_secs(30));
    let (_, committed_at) = rc.write(
        vec![(b"k1".to_vec(), b"v1".to_vec())],
        Duration::from_secs(30),
    );
    let leaders_before = rc.reported_leaders();
    etcd.kill(0);
    let outage = Instant::now();
    // The TSO serves at most until its window runs out, then fails with a clear error.
    // One runtime for the client: its timestamp dispatcher lives on it.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = PdClient::new(std::slice::from_ref(&pd_url), Duration::from_secs(2));
    let mut served_in_outage = committed_at;
    let refused = loop {
        match rt.block_on(client.get_ts()) {
            Ok(ts) => {
                assert!(
                    outage.elapsed() < Duration::from_secs(5),
                    "timestamps served long after etcd died"
                );
                served_in_outage = served_in_outage.max(ts);
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => break e.to_string(),
        }
    };
    assert!(
        refused.contains("not the leader") || refused.contains("window exhausted"),
        "{refused}"
    );
    // Meanwhile the regions keep their leaders, which serve reads at timestamps taken before.
    while outage.elapsed() < Duration::from_secs(10) {
        let (_, value) = rc.read(b"k1", committed_at, Duration::from_secs(5));
        assert_eq!(value.as_deref(), Some(&b"v1"[..]));
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(
        rc.reported_leaders(),
        leaders_before,
        "the outage moved Raft leaders"
    );
    etcd.restart(0).unwrap();
    // Scheduling of timestamps resumes, above everything handed out before.
    let after =
        block_on(PdClient::new(std::slice::from_ref(&pd_url), Duration::from_secs(30)).get_ts())
            .unwrap();
    assert!(
        after > served_in_outage,
        "{after} <= {served_in_outage}, the last timestamp served as etcd went away"
    );
    let (_, later) = rc.write(
        vec![(b"k2".to_vec(), b"v2".to_vec())],
        Duration::from_secs(30),
    );
    assert!(later > after);
}
