//! Zone-aware node selection (`client::node_selection`): time per call and regions per worker
//! for a large multi-region request, per policy.
//!
//! 100,000 regions over 20 alive workers in 3 zones (a: 7, b: 7, c: 6), entry node in zone a.
//! Two region layouts:
//!
//! * one replica per region, in zone a, b or c with probability 40/40/20 (today's layout: the
//!   owning server's zone);
//! * a replica in each of a, b and c (the multi-replica layout to come).
//!
//! Baseline, in the same run: a naive round-robin of the same regions over all alive workers,
//! blind to zones and policy. Times are the median of several calls.
//!
//! Spread is max - min regions per worker among the *candidate* workers (those the policy lets
//! read at least one region; 0 counts for a candidate that got none). Where candidate sets
//! differ by zone (one replica per region) the spread over all candidates is what the candidates
//! force (a zone-c region may only go to a zone-c worker), so the spread within each zone is
//! shown too: workers of one zone have the same candidate regions there, and that is where
//! "at most 1 where candidates allow" applies.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use client::node_selection::{
    NodeSelectionPolicy, RegionReplicas, Selection, WorkerNode, select_nodes,
};
use rand::Rng;
use types::{RegionId, Zone};

use crate::workload::rng;

const REGIONS: u64 = 100_000;
const ZONES: [(&str, u64); 3] = [("a", 7), ("b", 7), ("c", 6)];
const ENTRY_ZONE: &str = "a";
/// Timed calls per measurement; the median counts.
const RUNS: usize = 15;
/// Untimed calls first (allocator, caches).
const WARMUP: usize = 3;
/// The target of issue 9.
const TARGET: Duration = Duration::from_millis(50);

fn workers() -> Vec<WorkerNode> {
    let mut workers = Vec::new();
    for (zone, count) in ZONES {
        for _ in 0..count {
            workers.push(WorkerNode::new(workers.len() as u64 + 1, Some(zone), true));
        }
    }
    workers
}

/// Region ids are not in start-key order (as after splits), so ids are shuffled-looking.
fn region_id(i: u64) -> u64 {
    (i * 7919) % REGIONS + 1
}

fn one_replica_layout() -> Vec<RegionReplicas> {
    let mut r = rng(9);
    (0..REGIONS)
        .map(|i| {
            let zone = match r.random_range(0..10) {
                0..4 => "a",
                4..8 => "b",
                _ => "c",
            };
            RegionReplicas::new(region_id(i), [zone])
        })
        .collect()
}

fn three_replica_layout() -> Vec<RegionReplicas> {
    (0..REGIONS)
        .map(|i| RegionReplicas::new(region_id(i), ["a", "b", "c"]))
        .collect()
}

fn median(mut f: impl FnMut()) -> Duration {
    for _ in 0..WARMUP {
        f();
    }
    let mut times: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    times.sort();
    times[RUNS / 2]
}

/// The naive baseline: region i to alive worker i mod n.
fn round_robin(workers: &[WorkerNode], regions: &[RegionReplicas]) -> Vec<(RegionId, u64)> {
    let alive: Vec<u64> = workers.iter().filter(|w| w.alive).map(|w| w.id).collect();
    regions
        .iter()
        .enumerate()
        .map(|(i, r)| (r.id, alive[i % alive.len()]))
        .collect()
}

fn spread<'a>(loads: impl Iterator<Item = &'a usize>) -> usize {
    let (min, max) = loads.fold((usize::MAX, 0), |(lo, hi), &l| (lo.min(l), hi.max(l)));
    max.saturating_sub(min)
}

/// (spread over candidates, largest spread among the candidates of one zone).
fn spreads(sel: &Selection, workers: &[WorkerNode]) -> (usize, usize) {
    let loads = sel.regions_per_worker();
    let mut by_zone: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for w in workers {
        if let Some(&l) = loads.get(&w.id) {
            by_zone
                .entry(types::zone::label(w.zone.as_ref()))
                .or_default()
                .push(l);
        }
    }
    let within = by_zone
        .values()
        .map(|l| spread(l.iter()))
        .max()
        .unwrap_or(0);
    (spread(loads.values()), within)
}

/// The message up to its region ids: enough to tell which rule fired.
fn headline(text: &str) -> String {
    text.split(':').next().unwrap_or(text).to_string()
}

pub fn run() {
    let workers = workers();
    let layouts = [
        ("one replica, 40/40/20 over a/b/c", one_replica_layout()),
        ("replicas in a, b and c", three_replica_layout()),
    ];
    println!(
        "\n### node selection ({REGIONS} regions, {} workers in zones a/b/c = {}/{}/{}, entry zone {ENTRY_ZONE})\n",
        workers.len(),
        ZONES[0].1,
        ZONES[1].1,
        ZONES[2].1
    );
    println!(
        "Time: median of {RUNS} calls. Baseline: round-robin over all alive workers, blind to zones. Spread: max - min regions per worker over the candidate workers, and the largest such spread within one zone.\n"
    );
    println!(
        "| layout | policy | outcome | time per call | round-robin | ratio (policy / round-robin) | under 50 ms | workers used / candidates | spread (candidates) | spread (within a zone) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let entry_zone = Zone::label(ENTRY_ZONE);
    for (layout, regions) in &layouts {
        let naive = median(|| {
            black_box(round_robin(black_box(&workers), black_box(regions)));
        });
        for policy in NodeSelectionPolicy::ALL {
            let call = || select_nodes(policy, entry_zone.as_ref(), &workers, regions);
            let time = median(|| {
                let _ = black_box(call());
            });
            let (outcome, used, spread_all, spread_zone) = match call() {
                Ok(sel) => {
                    let outcome = match sel.warnings.as_slice() {
                        [] => "ok".to_string(),
                        w => format!("ok, warning: {}", headline(&w.join("; "))),
                    };
                    let used = sel.regions_by_worker().len();
                    let (all, zone) = spreads(&sel, &workers);
                    (
                        outcome,
                        format!("{used} / {}", sel.candidates.len()),
                        all.to_string(),
                        zone.to_string(),
                    )
                }
                Err(e) => (
                    format!("error: {}", headline(&e.to_string())),
                    "—".into(),
                    "—".into(),
                    "—".into(),
                ),
            };
            println!(
                "| {layout} | {policy} | {outcome} | {:.2} ms | {:.3} ms | {:.1} | {} | {used} | {spread_all} | {spread_zone} |",
                ms(time),
                ms(naive),
                time.as_secs_f64() / naive.as_secs_f64(),
                if time < TARGET { "yes" } else { "NO" },
            );
        }
    }
}
