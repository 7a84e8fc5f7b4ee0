//! Scheduling through Raft membership changes, on real processes: a placement driver (the
//! embedded store), three servers in zones a, b and c with three replicas per region, and a
//! bank workload (transfers between 24 accounts, each a transaction reading both balances at
//! its start_ts) running throughout, with a reader checking at fresh timestamps that the
//! total never changes.
//!
//! 1. A fourth server (zone d, listed in no founding config) starts: replicas and leaders
//!    move to it until the largest and smallest counts per server differ by at most a
//!    quarter of the mean plus one.
//! 2. `stratus ctl server drain 4`: the fourth server ends with no replica; then `server up`.
//! 3. Server 2 is SIGKILLed: within `max-store-down-time` plus the scheduling delay, every
//!    region has three voters again, on live servers in three distinct zones.
//! 4. Server 2 restarts with the replicas removed while it was down: it is told to drop them
//!    (it ends holding exactly what the routing table lists it in), and it is filled again
//!    until balanced.
//!
//! After the run, every acknowledged transfer is read back at its commit_ts (nothing
//! acknowledged was lost), and the total is still the starting one.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use client::paging::CopOptions;
use client::replica_read::ReplicaReadPolicy;
use client::sql::txn_write::{self, CommitOptions, RowWrite};
use e2e::cluster::{Cluster, StoreKind};
use e2e::entry_client::{EntryClient, handle_v_dag};
use e2e::pd_proc::{PdProc, PdSetup};
use e2e::replicated::ReplicatedCluster;
use e2e::sample_table::SampleTable;
use e2e::server_proc::ServerProc;
use rand::Rng;
use server::config::PeerConfig;
use types::ReadableDuration;
use wire::datum::Datum;
use wire::pd::ClusterView;

const TABLE: SampleTable = SampleTable { id: 1 };
const ACCOUNTS: i64 = 24;
const START_BALANCE: i64 = 100;
const TOTAL: i64 = ACCOUNTS * START_BALANCE;
/// Six regions of four accounts each: 18 replicas, 4.5 per server once there are four.
const CUTS: [i64; 5] = [4, 8, 12, 16, 20];
const STATEMENT: &str = "bank";
const SETTLE: Duration = Duration::from_secs(120);

/// Account handle → balance.
type Balances = BTreeMap<i64, i64>;

/// A transfer the client acknowledged: the balances it wrote, at its commit_ts.
#[derive(Debug, Clone)]
struct Acked {
    commit_ts: u64,
    wrote: [(i64, i64); 2],
}

#[derive(Default)]
struct Bank {
    acked: Mutex<Vec<Acked>>,
    /// Totals that were not `TOTAL`, or reads that returned a partial table: must stay empty.
    broken: Mutex<Vec<String>>,
    /// Transfers that failed, by error (conflicts are expected).
    failed: Mutex<Vec<String>>,
    totals_checked: std::sync::atomic::AtomicU64,
}

fn client(pd: &str, servers: &[String]) -> EntryClient {
    let mut cfg = client::ClientConfig::new(servers.iter().cloned());
    cfg.pd_endpoints = vec![pd.to_string()];
    cfg.request_timeout = ReadableDuration::secs(30);
    EntryClient::with_config(cfg)
}

fn read_all(c: &EntryClient, ts: u64) -> Result<Balances, String> {
    let opts = CopOptions {
        replica_read: ReplicaReadPolicy::Leader,
        ..CopOptions::from_config(c.client.config())
    };
    let result = c
        .block_on(c.client.coprocessor_with(
            &handle_v_dag(TABLE, false),
            vec![TABLE.range()],
            ts,
            opts,
        ))
        .map_err(|e| node::error_chain(&e))?;
    let mut out = Balances::new();
    for r in &result.rows {
        match r.as_slice() {
            [Datum::Int(h), Datum::Int(v)] => {
                out.insert(*h, *v);
            }
            other => return Err(format!("expected [handle, v], found {other:?}")),
        }
    }
    Ok(out)
}

fn put(h: i64, v: i64) -> RowWrite {
    RowWrite::Put {
        key: TABLE.key(h),
        value: SampleTable::value(v, 0),
    }
}

fn transfer(c: &EntryClient, bank: &Bank, rng: &mut impl Rng) {
    let start_ts = match c.block_on(c.client.current_ts()) {
        Ok(ts) => ts,
        Err(e) => {
            bank.failed.lock().unwrap().push(format!("tso: {e}"));
            return;
        }
    };
    let balances = match read_all(c, start_ts) {
        Ok(b) => b,
        Err(e) => {
            bank.failed.lock().unwrap().push(format!("read: {e}"));
            return;
        }
    };
    let from = rng.random_range(0..ACCOUNTS);
    let to = (from + rng.random_range(1..ACCOUNTS)) % ACCOUNTS;
    let amount = rng.random_range(1..=10);
    let (Some(&a), Some(&b)) = (balances.get(&from), balances.get(&to)) else {
        bank.broken
            .lock()
            .unwrap()
            .push(format!("accounts missing at {start_ts}: {balances:?}"));
        return;
    };
    let wrote = [(from, a - amount), (to, b + amount)];
    let writes = [put(from, a - amount), put(to, b + amount)];
    let opts = CommitOptions {
        async_commit: rng.random_bool(0.5),
    };
    match c.block_on(txn_write::write(
        &c.client, &writes, start_ts, STATEMENT, opts,
    )) {
        Ok(out) => match out.commit_ts {
            Some(commit_ts) => bank.acked.lock().unwrap().push(Acked { commit_ts, wrote }),
            None => bank
                .broken
                .lock()
                .unwrap()
                .push("a transfer acknowledged without a commit_ts".into()),
        },
        Err(e) => bank.failed.lock().unwrap().push(node::error_chain(&e)),
    }
}

fn check_total(c: &EntryClient, bank: &Bank) {
    let Ok(ts) = c.block_on(c.client.current_ts()) else {
        return;
    };
    match read_all(c, ts) {
        Ok(b) => {
            let total: i64 = b.values().sum();
            if b.len() != ACCOUNTS as usize || total != TOTAL {
                bank.broken.lock().unwrap().push(format!(
                    "at {ts}: {} accounts, total {total} (expected {ACCOUNTS}, {TOTAL})",
                    b.len()
                ));
            }
            bank.totals_checked.fetch_add(1, Ordering::Relaxed);
        }
        Err(e) => bank.failed.lock().unwrap().push(format!("total read: {e}")),
    }
}

/// Region replica counts per store, leader counts per store, from the routing table.
fn counts(view: &ClusterView) -> (BTreeMap<u64, usize>, BTreeMap<u64, usize>) {
    let mut replicas = BTreeMap::new();
    let mut leaders = BTreeMap::new();
    for r in &view.regions {
        for p in &r.peers {
            *replicas.entry(p.store_id).or_insert(0) += 1;
        }
        *leaders.entry(r.leader_store_id).or_insert(0) += 1;
    }
    (replicas, leaders)
}

/// Whether the values over `stores` differ by at most a quarter of their mean plus one.
fn balanced(count: &BTreeMap<u64, usize>, stores: &[u64]) -> bool {
    let values: Vec<usize> = stores
        .iter()
        .map(|s| count.get(s).copied().unwrap_or(0))
        .collect();
    let (Some(max), Some(min)) = (values.iter().max(), values.iter().min()) else {
        return false;
    };
    let mean = values.iter().sum::<usize>() as f64 / values.len() as f64;
    (max - min) as f64 <= mean / 4.0 + 1.0
}

/// Every region has `voters` voters on `stores` (no learner), in distinct zones.
fn fully_replicated_on(view: &ClusterView, stores: &[u64]) -> bool {
    view.regions.len() == CUTS.len() + 1
        && view.regions.iter().all(|r| {
            let mut zones: Vec<&str> = r.peers.iter().map(|p| p.zone.as_str()).collect();
            zones.sort_unstable();
            zones.dedup();
            r.peers.len() == 3
                && zones.len() == 3
                && r.peers
                    .iter()
                    .all(|p| !p.is_learner() && stores.contains(&p.store_id))
                && r.leader_store_id != 0
        })
}

fn wait_view(pd: &PdProc, what: &str, done: impl Fn(&ClusterView) -> bool) -> ClusterView {
    let deadline = Instant::now() + SETTLE;
    let mut last = ClusterView::default();
    let client = node::PdClient::new(&[pd.base_url().to_string()], Duration::from_secs(5));
    while Instant::now() < deadline {
        if let Ok(v) = e2e::pd_proc::block_on(client.cluster()) {
            if done(&v) {
                return v;
            }
            last = v;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let table: Vec<String> = last
        .regions
        .iter()
        .map(|r| {
            let peers: Vec<String> = r
                .peers
                .iter()
                .map(|p| format!("{}{}", p.store_id, if p.is_learner() { "L" } else { "" }))
                .collect();
            format!(
                "region {} leader {} peers {peers:?}",
                r.id, r.leader_store_id
            )
        })
        .collect();
    panic!(
        "never reached: {what}; last routing table:\n{}",
        table.join("\n")
    );
}

fn ctl(pd: &PdProc, args: &[&str]) -> String {
    let out = std::process::Command::new(e2e::binaries::binary(e2e::binaries::STRATUS))
        .arg("ctl")
        .args(args)
        .args(["--pd", pd.base_url()])
        .output()
        .unwrap();
    e2e::process::stdout_of_success(out)
}

/// Stops the workload when dropped (a panic in the scope included).
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

#[test]
fn replicas_rebalance_onto_a_new_server_leave_a_drained_one_heal_after_a_death_and_a_return() {
    let cluster = Cluster::new(StoreKind::Local);
    let mut pd_setup = PdSetup::new(&cluster.path("pd"), "pd-1", 0, &[]);
    pd_setup.pd.node_lease_ttl = ReadableDuration::secs(2);
    pd_setup.pd.max_store_down_time = ReadableDuration::secs(2);
    pd_setup.pd.schedule_interval = ReadableDuration::millis(200);
    let pd = PdProc::start(&pd_setup);
    let pd_url = pd.base_url().to_string();
    let cuts: Vec<Vec<u8>> = CUTS.iter().map(|h| TABLE.key(*h)).collect();
    let heartbeat = ReadableDuration::millis(200);
    let mut rc =
        ReplicatedCluster::start_configured(cluster, &cuts, Duration::from_millis(50), |_, s| {
            s.server.tso = false;
            s.server.tso_addr = String::new();
            s.server.pd_endpoints = vec![pd_url.clone()];
            s.server.pd_heartbeat_interval = heartbeat;
        });
    rc.wait_until_every_region_has_a_leader(Duration::from_secs(30));
    let mut urls = rc.urls();
    // The accounts, in one transaction.
    let c = client(&pd_url, &urls);
    let start_ts = c.block_on(c.client.current_ts()).unwrap();
    let writes: Vec<RowWrite> = (0..ACCOUNTS).map(|h| put(h, START_BALANCE)).collect();
    c.block_on(txn_write::write(
        &c.client,
        &writes,
        start_ts,
        STATEMENT,
        CommitOptions::default(),
    ))
    .unwrap();

    // The fourth server: in the peers list of its own config only (not among the first three,
    // so it creates no region), zone d.
    let port = harness::ports::reserve(1).unwrap()[0];
    let url4 = format!("http://127.0.0.1:{port}");
    let mut peers: Vec<PeerConfig> = (0..3)
        .map(|i| PeerConfig {
            id: i as u64 + 1,
            addr: urls[i].clone(),
            zone: types::Zone::label(["a", "b", "c"][i]),
        })
        .collect();
    peers.push(PeerConfig {
        id: 4,
        addr: url4.clone(),
        zone: types::Zone::label("d"),
    });
    let mut setup4 = rc.cluster.server_config("s4");
    setup4
        .node_id(4)
        .listen_port(port)
        .zone("d")
        .peers(peers)
        .regions_cut_at(&cuts);
    setup4.raft.tick_interval = ReadableDuration::millis(50);
    setup4.server.tso = false;
    setup4.server.tso_addr = String::new();
    setup4.server.pd_endpoints = vec![pd_url.clone()];
    setup4.server.pd_heartbeat_interval = heartbeat;
    urls.push(url4);

    let bank = Bank::default();
    let stop = AtomicBool::new(false);
    let _s4 = std::thread::scope(|scope| {
        // A failed step must still stop the workload, or the scope would wait for it for ever.
        let _stop_on_exit = StopOnDrop(&stop);
        for _ in 0..2 {
            scope.spawn(|| {
                let c = client(&pd_url, &urls);
                let mut rng = rand::rng();
                while !stop.load(Ordering::Acquire) {
                    transfer(&c, &bank, &mut rng);
                }
            });
        }
        scope.spawn(|| {
            let c = client(&pd_url, &urls);
            while !stop.load(Ordering::Acquire) {
                check_total(&c, &bank);
                std::thread::sleep(Duration::from_millis(50));
            }
        });

        // 1. A fourth server joins: replicas and leaders spread to it.
        let s4 = ServerProc::start(&setup4);
        let v = wait_view(&pd, "four servers balanced", |v| {
            let (replicas, leaders) = counts(v);
            fully_replicated_on(v, &[1, 2, 3, 4])
                && balanced(&replicas, &[1, 2, 3, 4])
                && balanced(&leaders, &[1, 2, 3, 4])
        });
        assert!(counts(&v).0.get(&4).copied().unwrap_or(0) >= 3, "{v:?}");

        // 2. Drain it: it ends with no replica; then it takes replicas again.
        let text = ctl(&pd, &["server", "drain", "4"]);
        assert!(text.contains("draining"), "{text}");
        wait_view(&pd, "server 4 drained", |v| {
            fully_replicated_on(v, &[1, 2, 3])
        });
        let servers = ctl(&pd, &["servers"]);
        assert!(servers.contains("draining"), "{servers}");
        ctl(&pd, &["server", "up", "4"]);

        // 3. Server 2 dies for good: its replicas are rebuilt on 1, 3 and 4 (zones a, c, d).
        rc.kill(1);
        wait_view(&pd, "every region on servers 1, 3, 4", |v| {
            fully_replicated_on(v, &[1, 3, 4])
        });

        // 4. Server 2 comes back with the replicas it held, which were removed while it was
        // down: it is told to drop them, then receives replicas again until balanced.
        rc.restart(1);
        wait_view(&pd, "server 2 back and the servers balanced", |v| {
            let (replicas, _) = counts(v);
            fully_replicated_on(v, &[1, 2, 3, 4]) && balanced(&replicas, &[1, 2, 3, 4])
        });
        let deadline = Instant::now() + SETTLE;
        loop {
            let v = e2e::pd_proc::block_on(
                node::PdClient::new(std::slice::from_ref(&pd_url), Duration::from_secs(5))
                    .cluster(),
            )
            .unwrap();
            let listed: std::collections::BTreeSet<u64> = v
                .regions
                .iter()
                .filter(|r| r.peers.iter().any(|p| p.store_id == 2))
                .map(|r| r.id)
                .collect();
            let held: std::collections::BTreeSet<u64> = rc
                .server(1)
                .regions()
                .regions
                .iter()
                .map(|r| r.id)
                .collect();
            if held == listed {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "server 2 holds {held:?}, the routing table lists it in {listed:?}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        stop.store(true, Ordering::Release);
        s4
    });

    let broken = bank.broken.lock().unwrap().clone();
    assert!(broken.is_empty(), "the bank broke: {broken:?}");
    let acked = bank.acked.lock().unwrap().clone();
    let failed = bank.failed.lock().unwrap().clone();
    assert!(
        acked.len() >= 20,
        "too few transfers went through ({}); failures: {:?}",
        acked.len(),
        &failed[..failed.len().min(20)]
    );
    assert!(bank.totals_checked.load(Ordering::Relaxed) >= 10);
    // Every acknowledged transfer is there at its commit_ts, on the servers left.
    let live = urls.clone();
    let c = client(&pd_url, &live);
    for a in &acked {
        let at = read_all(&c, a.commit_ts).unwrap();
        for (h, v) in a.wrote {
            assert_eq!(at.get(&h), Some(&v), "transfer {a:?} lost: {at:?}");
        }
    }
    let now = c.block_on(c.client.current_ts()).unwrap();
    let end = read_all(&c, now).unwrap();
    assert_eq!(end.values().sum::<i64>(), TOTAL, "{end:?}");
}
