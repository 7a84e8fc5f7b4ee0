//! Rebalancing onto a new server (issue 17): how long the placement driver takes to fill a
//! fourth server of a cluster of 200 regions, on real release processes.
//!
//! * **The cluster**: one `stratus-pd` on its embedded store (its default lease and window),
//!   three `stratus-server` in zones a, b and c (the e2e `ReplicatedCluster`, every region a
//!   voter on each, the Raft tick at its default) taking timestamps from it, `REGIONS`
//!   regions each holding `ROWS_PER_REGION` rows of a sample table, about `PAD` bytes each,
//!   written through Raft after the splits (a learner's snapshot carries real rows, and stays
//!   cheap). A server takes at most 100 initial ranges (`wire::pd::RESERVED_IDS`: replicated
//!   initial regions are numbered by position, below the ids the placement driver allocates),
//!   so the servers start with 100 regions of `2 × ROWS_PER_REGION` rows' key space and each is
//!   split in two (`POST /split` to its leader, the new ids from the placement driver). Before the timed part the placement driver's routing
//!   table must show every region with three voters and a leader, and no operator in flight
//!   (the leaders among the first three are balanced first).
//! * **Timed**: a fourth server in zone d (four zones, so the scheduler may give it a replica
//!   of any region; listed in no founder's config, so it starts empty) is started. From its
//!   start until the placement driver's routing table shows (a) the replica counts within the
//!   issue's criterion, largest minus smallest at most a quarter of the mean plus one, every
//!   region with three voters, no learner, a leader; (b) the scheduler at rest: no operator in
//!   flight (checked again after two more rounds and heartbeats), replica counts as in (a),
//!   leader counts within the criterion too (whether they are also within the
//!   scheduler's own leader tolerance is printed). The routing table and the operators are
//!   polled every `POLL`; progress goes to stderr every `PROGRESS_EVERY`.
//! * **Two timer settings**, `max-moves-per-store = 2` (the default) in both: the shipped
//!   defaults (server `pd-heartbeat-interval` 2 s, pd `schedule-interval` 1 s, `node-lease-ttl`
//!   10 s), then 200 ms for both timers (`node-lease-ttl` 2 s, as the scheduling e2e test),
//!   which separates the timers' pacing from the work (snapshots, catch-up, Raft).
//! * **Baseline, same run**: the first move's own time (from its operator's start, the pd's
//!   `age_ms`, to the first poll that no longer lists it: add learner, catch up, promote,
//!   remove, each step sent with a heartbeat answer and seen in the next report), times the
//!   moves done over `max-moves-per-store`. That is what a perfect pipeline would take if every
//!   move cost what the first did: `max-moves-per-store` moves into the new server always in
//!   flight, none waiting for a scheduling round. A ratio above 1 is time the pipeline loses
//!   (moves slowing down under load, gaps between one move's end and the next one's start); the
//!   first move, not the median of all, so the baseline does not include the slowdown it is
//!   there to show (the median is printed beside it). Also printed against the design bound
//!   from the config: moves / `max-moves-per-store` × 3 steps × `pd-heartbeat-interval`.
//!
//! Operators that end without their goal (a move given up after the scheduler's 60 s operator
//! timeout, whose learner is then removed) are counted and printed: they are a scheduling
//! failure, not noise.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use e2e::bank::{balanced, counts, describe, on_pd, view, zone_conflicts};
use e2e::cluster::{Cluster, StoreKind};
use e2e::pd_proc::{PdProc, PdSetup, block_on};
use e2e::replicated::ReplicatedCluster;
use e2e::sample_table::SampleTable;
use e2e::server_proc::ServerProc;
use pd::config::PdSection;
use prost::Message;
use server::config::{RaftConfig, ServerSection};
use types::ReadableDuration;
use wire::pd::{ClusterView, OperatorInfo, OperatorReason, StepKind};
use wire::region::{SplitRequest, SplitResponse};

use crate::report::{duration_row, table_header};

const REGIONS: usize = 200;
/// What the servers start with (the most a server's config takes); each is split in two.
const INITIAL_REGIONS: usize = REGIONS / 2;
const ROWS_PER_REGION: i64 = 4;
/// Padding per row: about 1 KiB of rows per region.
const PAD: usize = 200;
const TABLE: SampleTable = SampleTable { id: 17 };
/// The founders and the joining server.
const STORES: [u64; 4] = [1, 2, 3, 4];
const JOINING: u64 = 4;
const POLL: Duration = Duration::from_millis(250);
const PROGRESS_EVERY: Duration = Duration::from_secs(10);
/// Leaders of 200 regions on three servers, the rows written, the first balancing.
const SETUP_TIMEOUT: Duration = Duration::from_secs(600);
/// The longest a rebalance may run before it is reported as unfinished.
const REBALANCE_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// Steps of one move: add learner, promote, remove (a leader transfer first when the source
/// leads; balancing prefers followers).
const STEPS_PER_MOVE: u32 = 3;

/// One timer setting of the run.
struct Timers {
    name: &'static str,
    heartbeat: ReadableDuration,
    schedule_interval: ReadableDuration,
    node_lease_ttl: ReadableDuration,
}

fn settings() -> [Timers; 2] {
    let pd = PdSection::default();
    [
        Timers {
            name: "shipped defaults",
            heartbeat: ServerSection::default().pd_heartbeat_interval,
            schedule_interval: pd.schedule_interval,
            node_lease_ttl: pd.node_lease_ttl,
        },
        Timers {
            name: "fast timers",
            heartbeat: ReadableDuration::millis(200),
            schedule_interval: ReadableDuration::millis(200),
            node_lease_ttl: ReadableDuration::secs(2),
        },
    ]
}

/// An operator seen in flight, and when it reached each step.
#[derive(Debug, Clone)]
struct Seen {
    from: u64,
    to: u64,
    reason: OperatorReason,
    started: Instant,
    steps: Vec<(StepKind, Instant)>,
}

impl Seen {
    fn of(op: &OperatorInfo, at: Instant) -> Seen {
        let started = at
            .checked_sub(Duration::from_millis(op.age_ms))
            .unwrap_or(at);
        Seen {
            from: op.from_store,
            to: op.to_store,
            reason: op.reason(),
            started,
            steps: vec![(op.step(), at)],
        }
    }

    fn is_move(&self) -> bool {
        self.from != 0 && self.to != 0 && self.reason != OperatorReason::BalanceLeaders
    }

    /// Whether `op` is still this operator (same goal, and started when this one did).
    fn same(&self, op: &OperatorInfo, at: Instant) -> bool {
        let started = at
            .checked_sub(Duration::from_millis(op.age_ms))
            .unwrap_or(at);
        op.from_store == self.from
            && op.to_store == self.to
            && op.reason() == self.reason
            && started.saturating_duration_since(self.started) < Duration::from_secs(1)
    }
}

/// An operator that left the list.
#[derive(Debug, Clone)]
struct Ended {
    region: u64,
    seen: Seen,
    ended: Instant,
    /// Its goal held in the routing table when it left.
    reached: bool,
}

impl Ended {
    fn took(&self) -> Duration {
        self.ended.saturating_duration_since(self.seen.started)
    }
}

/// Whether `seen`'s goal holds in `region` now.
fn reached(seen: &Seen, region: Option<&wire::region::Region>) -> bool {
    let Some(r) = region else {
        return false;
    };
    if seen.reason == OperatorReason::BalanceLeaders {
        return r.leader_store_id == seen.to;
    }
    let to_ok = seen.to == 0
        || r.peers
            .iter()
            .any(|p| p.store_id == seen.to && !p.is_learner());
    let from_ok = seen.from == 0 || r.peers.iter().all(|p| p.store_id != seen.from);
    to_ok && from_ok
}

/// Splits the region holding `key` at `key` through whichever server leads it (each is tried
/// in turn until one takes it); panics after `SETUP_TIMEOUT`.
fn split_at(rc: &ReplicatedCluster, key: Vec<u8>) {
    let deadline = Instant::now() + SETUP_TIMEOUT;
    let region_id = rc.server(0).region_of(&key).id;
    let body = SplitRequest {
        region_id,
        split_key: key,
    }
    .encode_to_vec();
    let mut refusals = Vec::new();
    while Instant::now() < deadline {
        refusals.clear();
        for url in rc.urls() {
            let url = format!("{url}{}", wire::paths::SPLIT);
            let refusal = match harness::http::post(&url, body.clone(), Duration::from_secs(30)) {
                Ok(reply) if reply.status.is_success() => {
                    match SplitResponse::decode(reply.body.as_ref()) {
                        Ok(r) if r.error.is_empty() && r.region_error.is_none() => return,
                        Ok(r) => format!("{:?} {}", r.region_error, r.error),
                        Err(e) => format!("undecodable: {e}"),
                    }
                }
                Ok(reply) => format!("status {}", reply.status),
                Err(e) => e.to_string(),
            };
            refusals.push(format!("{url}: {refusal}"));
        }
        std::thread::sleep(POLL);
    }
    panic!("nobody split region {region_id}: {refusals:?}");
}

/// Every region has three voters (no learner) on `stores` in distinct zones, and a leader.
fn placed(v: &ClusterView, stores: &[u64]) -> bool {
    v.regions.len() == REGIONS
        && zone_conflicts(v).is_empty()
        && v.regions.iter().all(|r| {
            r.peers.len() == 3
                && r.peers
                    .iter()
                    .all(|p| !p.is_learner() && stores.contains(&p.store_id))
                && r.leader().is_some()
        })
}

/// The placement driver's operators in flight; `None` when it did not answer.
fn operators(client: &node::PdClient) -> Option<Vec<OperatorInfo>> {
    match block_on(client.operators()) {
        Ok(r) if r.error.is_empty() => Some(r.operators),
        Ok(r) => {
            eprintln!("operators: {}", r.error);
            None
        }
        Err(e) => {
            eprintln!("operators: {e}");
            None
        }
    }
}

/// `{1: 150, 2: 150, ...}` over `STORES`.
fn show(count: &BTreeMap<u64, usize>) -> String {
    let parts: Vec<String> = STORES
        .iter()
        .map(|s| format!("{s}: {}", count.get(s).copied().unwrap_or(0)))
        .collect();
    format!("{{{}}}", parts.join(", "))
}

/// Follows the operators from one poll to the next: what is in flight, what ended.
#[derive(Default)]
struct Tracker {
    live: HashMap<u64, Seen>,
    ended: Vec<Ended>,
}

impl Tracker {
    fn update(&mut self, ops: &[OperatorInfo], v: &ClusterView, at: Instant) {
        let regions: HashMap<u64, &wire::region::Region> =
            v.regions.iter().map(|r| (r.id, r)).collect();
        let mut next = HashMap::new();
        for op in ops {
            match self.live.remove(&op.region_id) {
                Some(mut seen) if seen.same(op, at) => {
                    if seen.steps.last().map(|(s, _)| *s) != Some(op.step()) {
                        seen.steps.push((op.step(), at));
                    }
                    next.insert(op.region_id, seen);
                }
                other => {
                    // A new operator on the region: the one before it ended between two polls
                    // (a timed-out move turns into the removal of its learner).
                    if let Some(seen) = other {
                        self.end(op.region_id, seen, &regions, at);
                    }
                    next.insert(op.region_id, Seen::of(op, at));
                }
            }
        }
        for (region, seen) in std::mem::replace(&mut self.live, next) {
            self.end(region, seen, &regions, at);
        }
    }

    fn end(
        &mut self,
        region: u64,
        seen: Seen,
        regions: &HashMap<u64, &wire::region::Region>,
        at: Instant,
    ) {
        let reached = reached(&seen, regions.get(&region).copied());
        if !reached {
            eprintln!(
                "operator on region {region} ({:?} {} -> {}, steps {:?}) ended after {:?} WITHOUT its goal; region now: {:?}",
                seen.reason,
                seen.from,
                seen.to,
                seen.steps
                    .iter()
                    .map(|(s, t)| (*s, t.saturating_duration_since(seen.started)))
                    .collect::<Vec<_>>(),
                at.saturating_duration_since(seen.started),
                regions.get(&region)
            );
        }
        self.ended.push(Ended {
            region,
            seen,
            ended: at,
            reached,
        });
    }

    fn moves_done(&self) -> usize {
        self.ended
            .iter()
            .filter(|e| e.reached && e.seen.is_move())
            .count()
    }
}

/// What one rebalance measured.
struct Outcome {
    /// Server 4's start to the replica counts within the criterion.
    to_criterion: Option<Duration>,
    moves_at_criterion: usize,
    /// Server 4's start to the scheduler at rest.
    to_rest: Option<Duration>,
    /// Server 4's start to the first operator seen.
    to_first_operator: Option<Duration>,
    ended: Vec<Ended>,
    final_view: ClusterView,
    /// How long the run was watched (the timeout when it never came to rest).
    watched: Duration,
}

impl Outcome {
    fn moves(&self) -> Vec<&Ended> {
        let mut m: Vec<&Ended> = self
            .ended
            .iter()
            .filter(|e| e.reached && e.seen.is_move())
            .collect();
        m.sort_by_key(|e| (e.seen.started, e.region));
        m
    }
}

fn start_pd(cluster: &Cluster, t: &Timers) -> PdProc {
    let mut setup = PdSetup::new(&cluster.path("pd"), "pd-1", 0, &[]);
    let d = PdSection::default();
    setup.pd.lease_ttl = d.lease_ttl;
    setup.pd.tso_window = d.tso_window;
    setup.pd.max_moves_per_store = d.max_moves_per_store;
    setup.pd.schedule_interval = t.schedule_interval;
    setup.pd.node_lease_ttl = t.node_lease_ttl;
    PdProc::start(&setup)
}

/// Waits until the routing table shows every region placed on `stores` and no operator has
/// been in flight for a few polls; panics with the table after `SETUP_TIMEOUT`.
fn wait_quiet(pd: &PdProc, client: &node::PdClient, stores: &[u64], quiet_for: Duration) {
    let deadline = Instant::now() + SETUP_TIMEOUT;
    let mut quiet_since: Option<Instant> = None;
    let mut last = ClusterView::default();
    while Instant::now() < deadline {
        if let (Some(v), Some(ops)) = (view(pd), operators(client)) {
            if placed(&v, stores) && ops.is_empty() {
                let since = *quiet_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= quiet_for {
                    return;
                }
            } else {
                quiet_since = None;
            }
            last = v;
        }
        std::thread::sleep(POLL);
    }
    panic!(
        "the first {} servers never settled in {SETUP_TIMEOUT:?}; last routing table:\n{}",
        stores.len(),
        describe(&last)
    );
}

/// Builds the three-server cluster with its rows, starts the fourth server and watches the
/// rebalance.
fn rebalance(t: &Timers) -> Outcome {
    let cluster = Cluster::new(StoreKind::Local);
    eprintln!(
        "rebalance [{}]: cluster in {} (logs there while it runs)",
        t.name,
        cluster.dir.path().display()
    );
    let pd = start_pd(&cluster, t);
    let pd_url = pd.base_url().to_string();
    let client = node::PdClient::new(std::slice::from_ref(&pd_url), Duration::from_secs(5));
    // 100 initial regions of two final ones each.
    let cuts: Vec<Vec<u8>> = (1..INITIAL_REGIONS as i64)
        .map(|i| TABLE.key(i * 2 * ROWS_PER_REGION))
        .collect();
    let tick = RaftConfig::default().tick_interval;
    let setup_start = Instant::now();
    let mut rc = ReplicatedCluster::start_configured(cluster, &cuts, tick.duration(), |_, s| {
        on_pd(s, &pd_url, t.heartbeat)
    });
    rc.wait_until_every_region_has_a_leader(SETUP_TIMEOUT);
    for i in 0..INITIAL_REGIONS as i64 {
        split_at(&rc, TABLE.key((2 * i + 1) * ROWS_PER_REGION));
    }
    for region in 0..REGIONS as i64 {
        let pairs = (region * ROWS_PER_REGION..(region + 1) * ROWS_PER_REGION)
            .map(|h| (TABLE.key(h), SampleTable::value(h, PAD)))
            .collect();
        rc.write(pairs, SETUP_TIMEOUT);
    }
    // Quiet for longer than a round plus a heartbeat: no operator is about to start.
    let quiet = (t.heartbeat.duration() + t.schedule_interval.duration()) * 2;
    wait_quiet(&pd, &client, &[1, 2, 3], quiet);
    eprintln!(
        "rebalance [{}]: {REGIONS} regions with {ROWS_PER_REGION} rows each on 3 servers, placed and quiet after {:.1?}",
        t.name,
        setup_start.elapsed()
    );

    let port = harness::ports::reserve(1).unwrap_or_else(|e| panic!("{e}"))[0];
    let mut setup4 = rc.joining_setup(JOINING as u16, "d", port, &cuts);
    on_pd(&mut setup4, &pd_url, t.heartbeat);
    setup4.raft.tick_interval = tick;

    let t0 = Instant::now();
    let s4 = ServerProc::start(&setup4);
    let outcome = watch(&pd, &client, t, t0);
    drop(s4);
    drop(pd);
    drop(rc);
    outcome
}

/// Polls the routing table and the operators from `t0` until the scheduler is at rest.
fn watch(pd: &PdProc, client: &node::PdClient, t: &Timers, t0: Instant) -> Outcome {
    let leader_gap = |leaders: &BTreeMap<u64, usize>| {
        let total: usize = STORES
            .iter()
            .map(|s| leaders.get(s).copied().unwrap_or(0))
            .sum();
        pd::scheduler::SchedulerConfig::default()
            .leader_tolerance
            .allowed_gap(total, STORES.len())
    };
    let confirm = (t.heartbeat.duration() + t.schedule_interval.duration()) * 2;
    let mut tracker = Tracker::default();
    let mut to_criterion = None;
    let mut moves_at_criterion = 0;
    let mut to_first_operator = None;
    let mut rest_candidate: Option<Instant> = None;
    let mut next_progress = t0 + PROGRESS_EVERY;
    let mut last = ClusterView::default();
    loop {
        let now = Instant::now();
        if now.duration_since(t0) > REBALANCE_TIMEOUT {
            eprintln!(
                "rebalance [{}]: NOT AT REST after {REBALANCE_TIMEOUT:?}; last routing table:\n{}",
                t.name,
                describe(&last)
            );
            return Outcome {
                to_criterion,
                moves_at_criterion,
                to_rest: None,
                to_first_operator,
                ended: tracker.ended,
                final_view: last,
                watched: now.duration_since(t0),
            };
        }
        let (Some(v), Some(ops)) = (view(pd), operators(client)) else {
            std::thread::sleep(POLL);
            continue;
        };
        let at = Instant::now();
        tracker.update(&ops, &v, at);
        if to_first_operator.is_none() && !ops.is_empty() {
            to_first_operator = Some(at.duration_since(t0));
        }
        let (replicas, leaders) = counts(&v);
        let spread = placed(&v, &STORES) && balanced(&replicas, &STORES);
        if to_criterion.is_none() && spread {
            to_criterion = Some(at.duration_since(t0));
            moves_at_criterion = tracker.moves_done();
            eprintln!(
                "rebalance [{}]: replica counts within a quarter of the mean + 1 after {:.1?} ({moves_at_criterion} moves): {}",
                t.name,
                at.duration_since(t0),
                show(&replicas)
            );
        }
        let at_rest = spread && ops.is_empty() && balanced(&leaders, &STORES);
        match (at_rest, rest_candidate) {
            (true, None) => rest_candidate = Some(at),
            (true, Some(since)) if at.duration_since(since) >= confirm => {
                let leader_values: Vec<usize> = STORES
                    .iter()
                    .map(|s| leaders.get(s).copied().unwrap_or(0))
                    .collect();
                let apart = leader_values.iter().max().unwrap_or(&0)
                    - leader_values.iter().min().unwrap_or(&0);
                eprintln!(
                    "rebalance [{}]: at rest after {:.1?}: replicas {}, leaders {} ({apart} apart; the scheduler's leader tolerance is {})",
                    t.name,
                    since.duration_since(t0),
                    show(&replicas),
                    show(&leaders),
                    leader_gap(&leaders)
                );
                return Outcome {
                    to_criterion,
                    moves_at_criterion,
                    to_rest: Some(since.duration_since(t0)),
                    to_first_operator,
                    ended: tracker.ended,
                    final_view: v,
                    watched: at.duration_since(t0),
                };
            }
            (true, Some(_)) => {}
            (false, _) => rest_candidate = None,
        }
        if at >= next_progress {
            next_progress += PROGRESS_EVERY;
            let mut steps: BTreeMap<String, usize> = BTreeMap::new();
            for op in &ops {
                *steps
                    .entry(format!("{:?}/{:?}", op.reason(), op.step()))
                    .or_default() += 1;
            }
            let failed = tracker.ended.iter().filter(|e| !e.reached).count();
            eprintln!(
                "rebalance [{}] {:>4.0} s: {} moves done, {} leader transfers, {failed} ended without their goal; {} in flight {steps:?}; replicas {}, leaders {}",
                t.name,
                at.duration_since(t0).as_secs_f64(),
                tracker.moves_done(),
                tracker
                    .ended
                    .iter()
                    .filter(|e| e.reached && e.seen.reason == OperatorReason::BalanceLeaders)
                    .count(),
                ops.len(),
                show(&replicas),
                show(&leaders)
            );
        }
        last = v;
        std::thread::sleep(POLL);
    }
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

/// The `p` quantile of the durations of `moves`.
fn quantile(moves: &[&Ended], p: f64) -> Duration {
    let mut d: Vec<Duration> = moves.iter().map(|e| e.took()).collect();
    d.sort_unstable();
    crate::report::percentile(&d, p)
}

/// The mean time a move spent waiting for each step (from the step's first sighting to the
/// next one's, or to the move's end).
fn step_means(moves: &[&Ended]) -> String {
    let mut sums: BTreeMap<String, (Duration, u32)> = BTreeMap::new();
    for e in moves {
        let s = &e.seen.steps;
        for (i, (kind, at)) in s.iter().enumerate() {
            let until = s.get(i + 1).map_or(e.ended, |(_, t)| *t);
            // The first step is counted from the operator's start, not from its first poll.
            let from = if i == 0 { e.seen.started } else { *at };
            let entry = sums.entry(format!("{kind:?}")).or_default();
            entry.0 += until.saturating_duration_since(from);
            entry.1 += 1;
        }
    }
    sums.iter()
        .map(|(k, (d, n))| format!("{k} {:.1} s ({n})", d.as_secs_f64() / f64::from(*n)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn report(t: &Timers, o: &Outcome, max_moves: usize) {
    let moves = o.moves();
    let n = moves.len();
    let leader_moves = o
        .ended
        .iter()
        .filter(|e| e.reached && e.seen.reason == OperatorReason::BalanceLeaders)
        .count();
    let failed: Vec<&Ended> = o.ended.iter().filter(|e| !e.reached).collect();
    let into_new = moves.iter().filter(|e| e.seen.to == JOINING).count();
    let hb = t.heartbeat.duration();
    let label = format!(
        "{} (pd-heartbeat-interval {}, schedule-interval {}, max-moves-per-store {max_moves})",
        t.name,
        secs(hb),
        secs(t.schedule_interval.duration())
    );
    table_header(&format!(
        "rebalance after adding a 4th server, {REGIONS} regions × 3 replicas, {label}"
    ));
    let Some(first) = moves.first() else {
        println!("| no move completed in {} | | | |", secs(o.watched));
        return;
    };
    let per_move = first.took();
    let scaled = |k: usize| per_move.mul_f64(k as f64 / max_moves as f64);
    let design = |k: usize| hb.mul_f64(k as f64 / max_moves as f64 * f64::from(STEPS_PER_MOVE));
    match o.to_criterion {
        Some(d) => {
            let k = o.moves_at_criterion;
            duration_row(
                &format!("server 4 start to replica counts within 25% + 1 ({k} moves)"),
                d,
                &format!("first move {} × {k} / {max_moves}", secs(per_move)),
                scaled(k),
            );
        }
        None => println!(
            "| replica counts within 25% + 1 | NOT REACHED in {} | | |",
            secs(o.watched)
        ),
    }
    match o.to_rest {
        Some(d) => {
            duration_row(
                &format!(
                    "server 4 start to the scheduler at rest ({n} moves, {leader_moves} leader transfers)"
                ),
                d,
                &format!("first move {} × {n} / {max_moves}", secs(per_move)),
                scaled(n),
            );
            duration_row(
                &format!("the same, against the design bound ({n} moves)"),
                d,
                &format!(
                    "{n} / {max_moves} × {STEPS_PER_MOVE} steps × {} heartbeat",
                    secs(hb)
                ),
                design(n),
            );
        }
        None => println!(
            "| scheduler at rest | NOT AT REST after {} ({n} moves done) | | |",
            secs(o.watched)
        ),
    }
    let (replicas, leaders) = counts(&o.final_view);
    println!(
        "\n{label}: {n} moves ({into_new} into server 4), {leader_moves} leader transfers, {} operators ended without their goal{}; server 4's first operator {} after its start",
        failed.len(),
        if failed.is_empty() {
            String::new()
        } else {
            format!(
                " (regions {:?})",
                failed.iter().map(|e| e.region).collect::<Vec<_>>()
            )
        },
        o.to_first_operator.map_or("never".into(), secs)
    );
    println!(
        "move durations: first {}, p50 {}, p90 {}, max {}; mean time per step: {}",
        secs(per_move),
        secs(quantile(&moves, 0.5)),
        secs(quantile(&moves, 0.9)),
        secs(quantile(&moves, 1.0)),
        step_means(&moves)
    );
    println!(
        "at the end: replicas {}, leaders {}",
        show(&replicas),
        show(&leaders)
    );
}

/// Runs every timer setting, or only `only` (`default`, `fast`).
pub fn run(only: Option<&str>) {
    let max_moves = PdSection::default().max_moves_per_store;
    for t in settings() {
        let wanted = match only {
            Some("default") => t.name == "shipped defaults",
            Some("fast") => t.name == "fast timers",
            _ => true,
        };
        if !wanted {
            continue;
        }
        let started = Instant::now();
        let outcome = rebalance(&t);
        eprintln!(
            "rebalance [{}]: the whole run (setup included) took {:.0?}",
            t.name,
            started.elapsed()
        );
        report(&t, &outcome, max_moves);
    }
}
