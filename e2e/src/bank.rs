//! A bank workload over a cluster that the placement driver schedules: transfers between
//! accounts (each a transaction reading both balances at its start_ts), a reader checking at
//! fresh timestamps that the total never changes, and the checks that follow a run (every
//! acknowledged transfer reads back at its commit_ts). Also the routing-table predicates and
//! waits the scheduling tests share.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use client::paging::CopOptions;
use client::replica_read::ReplicaReadPolicy;
use client::sql::txn_write::{self, CommitOptions, RowWrite};
use rand::Rng;
use types::ReadableDuration;
use wire::datum::Datum;
use wire::pd::ClusterView;

use crate::entry_client::{EntryClient, handle_v_dag};
use crate::pd_proc::PdProc;
use crate::sample_table::SampleTable;

pub const TABLE: SampleTable = SampleTable { id: 1 };
pub const ACCOUNTS: i64 = 24;
pub const START_BALANCE: i64 = 100;
pub const TOTAL: i64 = ACCOUNTS * START_BALANCE;
/// Six regions of four accounts each.
pub const CUTS: [i64; 5] = [4, 8, 12, 16, 20];
const STATEMENT: &str = "bank";
/// How long a scheduling step may take to settle.
pub const SETTLE: Duration = Duration::from_secs(120);

/// Account handle → balance.
pub type Balances = BTreeMap<i64, i64>;

/// A transfer the client acknowledged: the balances it wrote, at its commit_ts.
#[derive(Debug, Clone)]
pub struct Acked {
    pub commit_ts: u64,
    pub wrote: [(i64, i64); 2],
}

/// What the workload saw.
#[derive(Default)]
pub struct Bank {
    pub acked: Mutex<Vec<Acked>>,
    /// Totals that were not `TOTAL`, or reads that returned a partial table: must stay empty.
    pub broken: Mutex<Vec<String>>,
    /// Transfers that failed, by error (conflicts are expected).
    pub failed: Mutex<Vec<String>>,
    pub totals_checked: AtomicU64,
}

fn push(list: &Mutex<Vec<String>>, what: String) {
    list.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(what);
}

impl Bank {
    pub fn acked(&self) -> Vec<Acked> {
        self.acked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn failed(&self) -> Vec<String> {
        self.failed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Acknowledged transfers so far.
    pub fn acked_count(&self) -> usize {
        self.acked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Panics unless the run kept the total, got at least `min_acked` transfers through and
    /// `min_totals` total checks done, and every acknowledged transfer reads back at its
    /// commit_ts (nothing acknowledged was lost); the total at a fresh timestamp is the
    /// starting one.
    pub fn verify(&self, c: &EntryClient, min_acked: usize, min_totals: u64) {
        let broken = self
            .broken
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        assert!(broken.is_empty(), "the bank broke: {broken:?}");
        let acked = self.acked();
        let failed = self.failed();
        assert!(
            acked.len() >= min_acked,
            "too few transfers went through ({}); failures: {:?}",
            acked.len(),
            &failed[..failed.len().min(20)]
        );
        let totals = self.totals_checked.load(Ordering::Relaxed);
        assert!(totals >= min_totals, "only {totals} total checks");
        for a in &acked {
            let at = read_all(c, a.commit_ts).unwrap_or_else(|e| panic!("{e}"));
            for (h, v) in a.wrote {
                assert_eq!(at.get(&h), Some(&v), "transfer {a:?} lost: {at:?}");
            }
        }
        let now = c
            .block_on(c.client.current_ts())
            .unwrap_or_else(|e| panic!("{e}"));
        let end = read_all(c, now).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(end.values().sum::<i64>(), TOTAL, "{end:?}");
    }
}

/// Points a server at the placement driver `pd_url` for timestamps and registration, with
/// heartbeats every `heartbeat`.
pub fn on_pd(s: &mut crate::server_proc::ServerSetup, pd_url: &str, heartbeat: ReadableDuration) {
    s.server.tso = false;
    s.server.tso_addr = String::new();
    s.server.pd_endpoints = vec![pd_url.to_string()];
    s.server.pd_heartbeat_interval = heartbeat;
}

/// An entry client taking timestamps and the routing table from the placement driver.
pub fn client(pd: &str, servers: &[String]) -> EntryClient {
    let mut cfg = client::ClientConfig::new(servers.iter().cloned());
    cfg.pd_endpoints = vec![pd.to_string()];
    cfg.request_timeout = ReadableDuration::secs(30);
    EntryClient::with_config(cfg)
}

/// Every account's balance at `ts`, read from the leaders.
pub fn read_all(c: &EntryClient, ts: u64) -> Result<Balances, String> {
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

/// The region boundaries of the accounts, as keys.
pub fn cut_keys() -> Vec<Vec<u8>> {
    CUTS.iter().map(|h| TABLE.key(*h)).collect()
}

/// Writes every account's starting balance in one transaction.
pub fn open_accounts(c: &EntryClient) {
    let start_ts = c
        .block_on(c.client.current_ts())
        .unwrap_or_else(|e| panic!("{e}"));
    let writes: Vec<RowWrite> = (0..ACCOUNTS).map(|h| put(h, START_BALANCE)).collect();
    c.block_on(txn_write::write(
        &c.client,
        &writes,
        start_ts,
        STATEMENT,
        CommitOptions::default(),
    ))
    .unwrap_or_else(|e| panic!("{e}"));
}

/// One transfer of a random amount between two random accounts.
pub fn transfer(c: &EntryClient, bank: &Bank, rng: &mut impl Rng) {
    let start_ts = match c.block_on(c.client.current_ts()) {
        Ok(ts) => ts,
        Err(e) => return push(&bank.failed, format!("tso: {e}")),
    };
    let balances = match read_all(c, start_ts) {
        Ok(b) => b,
        Err(e) => return push(&bank.failed, format!("read: {e}")),
    };
    let from = rng.random_range(0..ACCOUNTS);
    let to = (from + rng.random_range(1..ACCOUNTS)) % ACCOUNTS;
    let amount = rng.random_range(1..=10);
    let (Some(&a), Some(&b)) = (balances.get(&from), balances.get(&to)) else {
        return push(
            &bank.broken,
            format!("accounts missing at {start_ts}: {balances:?}"),
        );
    };
    let wrote = [(from, a - amount), (to, b + amount)];
    let writes = [put(from, a - amount), put(to, b + amount)];
    let opts = CommitOptions {
        async_commit: rng.random_bool(0.5),
        schema_lease: None,
    };
    match c.block_on(txn_write::write(
        &c.client, &writes, start_ts, STATEMENT, opts,
    )) {
        Ok(out) => match out.commit_ts {
            Some(commit_ts) => bank
                .acked
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(Acked { commit_ts, wrote }),
            None => push(
                &bank.broken,
                "a transfer acknowledged without a commit_ts".into(),
            ),
        },
        Err(e) => push(&bank.failed, node::error_chain(&e)),
    }
}

/// Reads every balance at a fresh timestamp and records a total that is not `TOTAL`.
pub fn check_total(c: &EntryClient, bank: &Bank) {
    let Ok(ts) = c.block_on(c.client.current_ts()) else {
        return;
    };
    match read_all(c, ts) {
        Ok(b) => {
            let total: i64 = b.values().sum();
            if b.len() != ACCOUNTS as usize || total != TOTAL {
                push(
                    &bank.broken,
                    format!(
                        "at {ts}: {} accounts, total {total} (expected {ACCOUNTS}, {TOTAL})",
                        b.len()
                    ),
                );
            }
            bank.totals_checked.fetch_add(1, Ordering::Relaxed);
        }
        Err(e) => push(&bank.failed, format!("total read: {e}")),
    }
}

/// Region replica counts per store, leader counts per store, from the routing table.
pub fn counts(view: &ClusterView) -> (BTreeMap<u64, usize>, BTreeMap<u64, usize>) {
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
pub fn balanced(count: &BTreeMap<u64, usize>, stores: &[u64]) -> bool {
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

/// The regions of `view` with two replicas in one zone.
pub fn zone_conflicts(view: &ClusterView) -> Vec<u64> {
    view.regions
        .iter()
        .filter(|r| {
            let mut zones: Vec<&str> = r.peers.iter().map(|p| p.zone.as_str()).collect();
            zones.sort_unstable();
            let n = zones.len();
            zones.dedup();
            zones.len() != n
        })
        .map(|r| r.id)
        .collect()
}

/// Every account region has three voters on `stores` (no learner), in distinct zones, and a
/// leader.
pub fn fully_replicated_on(view: &ClusterView, stores: &[u64]) -> bool {
    view.regions.len() == CUTS.len() + 1
        && zone_conflicts(view).is_empty()
        && view.regions.iter().all(|r| {
            r.peers.len() == 3
                && r.peers
                    .iter()
                    .all(|p| !p.is_learner() && stores.contains(&p.store_id))
                && r.leader_store_id != 0
        })
}

/// The routing table now.
pub fn view(pd: &PdProc) -> Option<ClusterView> {
    let client = node::PdClient::new(&[pd.base_url().to_string()], Duration::from_secs(5));
    crate::pd_proc::block_on(client.cluster()).ok()
}

/// Operators the placement driver has in flight now (`None`: it did not answer).
pub fn operators_in_flight(pd: &PdProc) -> Option<usize> {
    let client = node::PdClient::new(&[pd.base_url().to_string()], Duration::from_secs(5));
    crate::pd_proc::block_on(client.operators())
        .ok()
        .map(|r| r.operators.len())
}

/// Waits up to [`SETTLE`] for the routing table to satisfy `done`; panics showing the last
/// table otherwise.
pub fn wait_view(pd: &PdProc, what: &str, done: impl Fn(&ClusterView) -> bool) -> ClusterView {
    let deadline = Instant::now() + SETTLE;
    let mut last = ClusterView::default();
    while Instant::now() < deadline {
        if let Some(v) = view(pd) {
            if done(&v) {
                return v;
            }
            last = v;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!(
        "never reached: {what}; last routing table:\n{}",
        describe(&last)
    );
}

/// One line per region: id, leader, replicas (`L` marks a learner) with their zones.
pub fn describe(view: &ClusterView) -> String {
    let lines: Vec<String> = view
        .regions
        .iter()
        .map(|r| {
            let peers: Vec<String> = r
                .peers
                .iter()
                .map(|p| {
                    let learner = if p.is_learner() { "L" } else { "" };
                    format!("{}{learner}@{}", p.store_id, p.zone)
                })
                .collect();
            format!(
                "region {} leader {} peers {peers:?}",
                r.id, r.leader_store_id
            )
        })
        .collect();
    lines.join("\n")
}

/// `stratus ctl ARGS --pd URL`, which must succeed; its stdout.
pub fn ctl(pd: &PdProc, args: &[&str]) -> String {
    let out = std::process::Command::new(crate::binaries::binary(crate::binaries::STRATUS))
        .arg("ctl")
        .args(args)
        .args(["--pd", pd.base_url()])
        .output()
        .unwrap_or_else(|e| panic!("stratus ctl: {e}"));
    crate::process::stdout_of_success(out)
}

/// Starts the workload in `scope`: two transfer threads and one total checker, clients of
/// the placement driver at `pd` and of `servers`, until `stop` is set.
pub fn spawn_workload<'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    pd: &'scope str,
    servers: &'scope [String],
    bank: &'scope Bank,
    stop: &'scope AtomicBool,
) {
    for _ in 0..2 {
        scope.spawn(move || {
            let c = client(pd, servers);
            let mut rng = rand::rng();
            while !stop.load(Ordering::Acquire) {
                transfer(&c, bank, &mut rng);
            }
        });
    }
    scope.spawn(move || {
        let c = client(pd, servers);
        while !stop.load(Ordering::Acquire) {
            check_total(&c, bank);
            std::thread::sleep(Duration::from_millis(50));
        }
    });
}

/// Sets its flag when dropped (a panic in the scope included): stops the workload threads,
/// or a scope would wait for them for ever after a failed step.
pub struct StopOnDrop<'a>(pub &'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}
