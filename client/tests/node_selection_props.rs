//! Properties of node selection against a per-region model of the rules.
//!
//! The model computes, region by region and straight from the rules in the issue, each
//! region's candidate workers, whether they read it locally, the warnings and the error. The
//! properties check the implementation against it: same outcome, every region assigned once to
//! a legal candidate, and balance: on small inputs the load vector is as even as a brute-force
//! search finds; on larger ones no cost-reducing path exists (the optimality certificate of a
//! semi-matching) and a request whose regions share one candidate set spreads with max - min <= 1.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use client::node_selection::{
    NodeSelectionPolicy, POLICY_IGNORED_WARNING, RegionReplicas, Selection, WorkerNode,
    select_nodes,
};
use proptest::prelude::*;
use types::Zone;

/// Zones a region may have a replica in; "d" never has a worker.
const REPLICA_ZONES: [&str; 4] = ["a", "b", "c", "d"];

#[derive(Clone, Debug)]
struct Input {
    policy: NodeSelectionPolicy,
    entry: Option<String>,
    workers: Vec<WorkerNode>,
    regions: Vec<RegionReplicas>,
}

/// Per region: candidate worker ids and whether they read it locally.
type Candidates = Vec<(BTreeSet<u64>, bool)>;

fn policy() -> impl Strategy<Value = NodeSelectionPolicy> {
    prop::sample::select(NodeSelectionPolicy::ALL.to_vec())
}

fn worker_zone() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        3 => prop::sample::select(vec!["a", "b", "c"]).prop_map(|z| Some(z.to_string())),
        1 => Just(None),
        1 => Just(Some(String::new())),
    ]
}

fn entry_zone() -> impl Strategy<Value = Option<String>> {
    prop::sample::select(vec![None, Some(""), Some("a"), Some("b"), Some("d")])
        .prop_map(|z| z.map(str::to_string))
}

/// Workers with distinct ids, listed in a random order.
fn workers(max: usize) -> impl Strategy<Value = Vec<WorkerNode>> {
    prop::collection::vec((worker_zone(), prop::bool::weighted(0.8)), 0..=max).prop_flat_map(
        |spec| {
            let workers: Vec<WorkerNode> = spec
                .into_iter()
                .enumerate()
                .map(|(i, (zone, alive))| WorkerNode {
                    id: 100 + 7 * i as u64,
                    // The empty label is no zone, as config files write it.
                    zone: zone.and_then(Zone::label),
                    alive,
                })
                .collect();
            Just(workers).prop_shuffle()
        },
    )
}

/// Regions with distinct ids in an order unrelated to the ids; `zone_sets` limits how many
/// distinct replica-zone sets appear (1 = all regions share one).
fn regions(max: usize, zone_sets: usize) -> impl Strategy<Value = Vec<RegionReplicas>> {
    let set = prop::collection::btree_set(prop::sample::select(REPLICA_ZONES.to_vec()), 0..=3);
    (
        prop::collection::vec(set, 1..=zone_sets),
        prop::collection::vec(any::<prop::sample::Index>(), 0..=max),
    )
        .prop_flat_map(|(sets, picks)| {
            let regions: Vec<RegionReplicas> = picks
                .iter()
                .enumerate()
                .map(|(i, pick)| {
                    RegionReplicas::new(1000 + 3 * i as u64, pick.get(&sets).iter().copied())
                })
                .collect();
            Just(regions).prop_shuffle()
        })
}

fn input(max_workers: usize, max_regions: usize, zone_sets: usize) -> impl Strategy<Value = Input> {
    (
        policy(),
        entry_zone(),
        workers(max_workers),
        regions(max_regions, zone_sets),
    )
        .prop_map(|(policy, entry, workers, regions)| Input {
            policy,
            entry,
            workers,
            regions,
        })
}

/// Only alive workers in zones a, b, c and regions with replicas in one or two of them, under
/// `all_nodes`: many overlapping candidate sets, where a greedy order can go wrong.
fn overlapping_input() -> impl Strategy<Value = Input> {
    let zone = prop::sample::select(vec!["a", "b", "c"]);
    let set = prop::collection::btree_set(zone.clone(), 1..=2);
    (
        prop::collection::vec(zone, 2..=5),
        prop::collection::vec(set, 1..=7),
    )
        .prop_map(|(worker_zones, sets)| Input {
            policy: NodeSelectionPolicy::AllNodes,
            entry: Some("a".to_string()),
            workers: worker_zones
                .iter()
                .enumerate()
                .map(|(i, z)| WorkerNode::new(i as u64 + 1, Some(z), true))
                .collect(),
            regions: sets
                .iter()
                .enumerate()
                .map(|(i, s)| RegionReplicas::new(i as u64 + 10, s.iter().copied()))
                .collect(),
        })
}

/// 80 zones (so zone sets take two 64-bit words and zone names are looked up by hash), up to
/// 90 workers and regions with one to three replicas each (so there are many distinct zone
/// sets, looked up by hash too).
fn many_zones_input() -> impl Strategy<Value = Input> {
    let zone = (0..80u32).prop_map(|z| format!("z{z}"));
    (
        policy(),
        prop::option::weighted(0.9, zone.clone()),
        prop::collection::vec((zone.clone(), prop::bool::weighted(0.9)), 1..=90),
        prop::collection::vec(prop::collection::vec(zone, 1..=3), 0..=300),
    )
        .prop_map(|(policy, entry, workers, regions)| Input {
            policy,
            entry,
            workers: workers
                .into_iter()
                .enumerate()
                .map(|(i, (zone, alive))| WorkerNode {
                    id: i as u64 + 1,
                    zone: Zone::label(zone),
                    alive,
                })
                .collect(),
            regions: regions
                .into_iter()
                .enumerate()
                .map(|(i, zones)| RegionReplicas::new(i as u64 + 1, zones))
                .collect(),
        })
}

fn label(z: &Option<Zone>) -> Option<&str> {
    z.as_ref().map(Zone::as_str)
}

/// The entry node's zone label, the empty one being no zone.
fn entry_label(z: &Option<String>) -> Option<&str> {
    z.as_deref().filter(|z| !z.is_empty())
}

/// The rules of the issue, region by region: candidates and locality, warnings; or the error
/// text.
fn model(input: &Input) -> Result<(Candidates, Vec<String>), String> {
    let alive: Vec<&WorkerNode> = input.workers.iter().filter(|w| w.alive).collect();
    if alive.is_empty() {
        return Err(format!("no alive worker workers={}", input.workers.len()));
    }
    let reads_locally = |w: &WorkerNode, r: &RegionReplicas| {
        label(&w.zone).is_some_and(|z| r.replica_zones.iter().any(|rz| rz.as_str() == z))
    };
    let all_nodes = |r: &RegionReplicas| {
        let readers: BTreeSet<u64> = alive
            .iter()
            .filter(|w| reads_locally(w, r))
            .map(|w| w.id)
            .collect();
        if readers.is_empty() {
            (alive.iter().map(|w| w.id).collect(), false)
        } else {
            (readers, true)
        }
    };
    let has_replica_in =
        |r: &RegionReplicas, z: &str| r.replica_zones.iter().any(|rz| rz.as_str() == z);
    let mut warnings = Vec::new();
    let entry = entry_label(&input.entry);
    let (policy, zone) = match (input.policy, entry) {
        (NodeSelectionPolicy::AllNodes, _) => {
            return Ok((input.regions.iter().map(all_nodes).collect(), warnings));
        }
        (_, None) => {
            warnings.push(POLICY_IGNORED_WARNING.to_string());
            return Ok((input.regions.iter().map(all_nodes).collect(), warnings));
        }
        (p, Some(z)) => (p, z),
    };
    let local: BTreeSet<u64> = alive
        .iter()
        .filter(|w| label(&w.zone) == Some(zone))
        .map(|w| w.id)
        .collect();
    if policy == NodeSelectionPolicy::OnlyLocalZoneNodes && local.is_empty() {
        return Err(format!("No alive worker in the zone [{zone}]"));
    }
    let mut outside = Vec::new();
    let mut cands = Vec::new();
    for r in &input.regions {
        let in_zone = has_replica_in(r, zone);
        if policy == NodeSelectionPolicy::OnlyLocalZoneNodes {
            cands.push((local.clone(), in_zone));
        } else if in_zone && !local.is_empty() {
            cands.push((local.clone(), true));
        } else {
            cands.push(all_nodes(r));
        }
        if !in_zone || local.is_empty() {
            outside.push(r.id);
        }
    }
    if !outside.is_empty() {
        let ids = outside
            .iter()
            .take(3)
            .map(|id| id.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        let tolerance = 3 * local.len();
        if policy == NodeSelectionPolicy::OnlyLocalZoneNodes && outside.len() > tolerance {
            return Err(format!(
                "No less than {} region(s) can not be accessed by TiFlash in the zone [{zone}]: {ids}",
                tolerance + 1
            ));
        }
        warnings.push(format!(
            "Total {} region(s) can not be accessed by TiFlash in the zone [{zone}]: {ids}",
            outside.len()
        ));
    }
    Ok((cands, warnings))
}

fn select(input: &Input) -> Result<Selection, String> {
    let entry = input.entry.as_deref().and_then(Zone::label);
    select_nodes(input.policy, entry.as_ref(), &input.workers, &input.regions)
        .map_err(|e| e.to_string())
}

/// Same outcome as the model; every region once, in order, to a candidate, with the right
/// locality; the candidate list is the union of the model's candidates. Returns the selection
/// and the model's candidates when the request succeeds.
fn check_against_model(input: &Input) -> Result<Option<(Selection, Candidates)>, TestCaseError> {
    let got = select(input);
    let want = model(input);
    let (sel, (cands, warnings)) = match (got, want) {
        (Err(g), Err(w)) => {
            prop_assert_eq!(g, w);
            return Ok(None);
        }
        (Ok(sel), Ok(want)) => (sel, want),
        (got, want) => {
            return Err(TestCaseError::fail(format!(
                "outcome differs: got {got:?}, model {want:?}"
            )));
        }
    };
    prop_assert_eq!(&sel.warnings, &warnings);
    prop_assert_eq!(sel.assignments.len(), input.regions.len());
    for ((a, r), (c, local)) in sel.assignments.iter().zip(&input.regions).zip(&cands) {
        prop_assert_eq!(a.region_id, r.id);
        prop_assert!(
            c.contains(&a.worker_id),
            "region {} went to {}, candidates {:?}",
            r.id,
            a.worker_id,
            c
        );
        prop_assert_eq!(a.local, *local, "locality of region {}", r.id);
    }
    let union: BTreeSet<u64> = cands.iter().flat_map(|(c, _)| c.iter().copied()).collect();
    prop_assert_eq!(
        sel.candidates.iter().copied().collect::<BTreeSet<_>>(),
        union
    );
    Ok(Some((sel, cands)))
}

fn loads(sel: &Selection) -> Vec<usize> {
    sel.regions_per_worker().into_values().collect()
}

/// The smallest sum of squared loads and the smallest maximum load over every assignment of
/// the regions to their candidates.
fn brute_force(cands: &Candidates) -> (usize, usize) {
    fn go(
        i: usize,
        cands: &[Vec<u64>],
        load: &mut BTreeMap<u64, usize>,
        best: &mut (usize, usize),
    ) {
        if i == cands.len() {
            let squares = load.values().map(|l| l * l).sum();
            let max = load.values().copied().max().unwrap_or(0);
            best.0 = best.0.min(squares);
            best.1 = best.1.min(max);
            return;
        }
        for w in &cands[i] {
            *load.entry(*w).or_default() += 1;
            go(i + 1, cands, load, best);
            *load.get_mut(w).unwrap() -= 1;
        }
    }
    let lists: Vec<Vec<u64>> = cands
        .iter()
        .map(|(c, _)| c.iter().copied().collect())
        .collect();
    let mut best = (usize::MAX, usize::MAX);
    go(0, &lists, &mut BTreeMap::new(), &mut best);
    best
}

/// True if some worker could hand a region to another, and that one to another... ending at a
/// worker with at least 2 fewer regions (a cost-reducing path).
fn has_cost_reducing_path(sel: &Selection, cands: &Candidates) -> bool {
    let load = sel.regions_per_worker();
    let mut moves: BTreeMap<u64, BTreeSet<u64>> = BTreeMap::new();
    for (a, (c, _)) in sel.assignments.iter().zip(cands) {
        moves
            .entry(a.worker_id)
            .or_default()
            .extend(c.iter().copied());
    }
    let min = load.values().copied().min().unwrap_or(0);
    load.iter()
        .filter(|&(_, &lu)| lu >= min + 2)
        .any(|(&u, &lu)| {
            let mut seen = BTreeSet::from([u]);
            let mut queue = VecDeque::from([u]);
            while let Some(x) = queue.pop_front() {
                if load[&x] + 2 <= lu {
                    return true;
                }
                for &y in moves.get(&x).into_iter().flatten() {
                    if seen.insert(y) {
                        queue.push_back(y);
                    }
                }
            }
            false
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn small_requests_match_the_model_and_are_as_balanced_as_brute_force(
        input in input(5, 6, 4)
    ) {
        if let Some((sel, cands)) = check_against_model(&input)? {
            let (squares, max) = brute_force(&cands);
            let loads = loads(&sel);
            prop_assert_eq!(loads.iter().map(|l| l * l).sum::<usize>(), squares, "loads {:?}", loads);
            prop_assert_eq!(loads.iter().copied().max().unwrap_or(0), max);
        }
    }

    #[test]
    fn overlapping_candidate_sets_are_as_balanced_as_brute_force(input in overlapping_input()) {
        if let Some((sel, cands)) = check_against_model(&input)? {
            let (squares, max) = brute_force(&cands);
            let loads = loads(&sel);
            prop_assert_eq!(loads.iter().map(|l| l * l).sum::<usize>(), squares, "loads {:?}", loads);
            prop_assert_eq!(loads.iter().copied().max().unwrap_or(0), max);
        }
    }

    #[test]
    fn large_requests_match_the_model_and_leave_no_cost_reducing_path(
        input in input(12, 400, 6)
    ) {
        if let Some((sel, cands)) = check_against_model(&input)? {
            prop_assert!(!has_cost_reducing_path(&sel, &cands), "loads {:?}", sel.regions_per_worker());
        }
    }

    #[test]
    fn regions_sharing_one_candidate_set_spread_within_one(input in input(12, 400, 1)) {
        if let Some((sel, cands)) = check_against_model(&input)?
            && let Some((first, _)) = cands.first()
            && cands.iter().all(|(c, _)| c == first)
        {
            let loads = loads(&sel);
            let spread = loads.iter().max().unwrap() - loads.iter().min().unwrap();
            prop_assert!(spread <= 1, "loads {:?}", sel.regions_per_worker());
        }
    }

    #[test]
    fn listing_order_of_workers_does_not_change_the_selection(
        input in input(8, 60, 4),
        seed in any::<u64>(),
    ) {
        let mut shuffled = input.clone();
        shuffled.workers.sort_by_key(|w| (w.id ^ seed).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        prop_assert_eq!(select(&input), select(&shuffled));
    }

    #[test]
    fn policy_value_round_trips(policy in policy()) {
        prop_assert_eq!(policy.to_string().parse::<NodeSelectionPolicy>(), Ok(policy));
    }

    #[test]
    fn any_other_policy_value_is_rejected_with_variable_value_and_allowed_values(value in ".{0,30}") {
        prop_assume!(NodeSelectionPolicy::ALL.iter().all(|p| p.as_str() != value));
        let err = value.parse::<NodeSelectionPolicy>().unwrap_err();
        let text = err.to_string();
        prop_assert!(text.contains("tidb_tiflash_node_selection_policy"));
        let quoted = format!("value={:?}", value);
        prop_assert!(text.contains(&quoted));
        prop_assert!(text.contains("allowed=all_nodes,priority_local_zone_nodes,only_local_zone_nodes"));
        prop_assert_eq!(err.value, value);
    }
}

proptest! {
    // Fewer cases: each has up to 90 workers and 300 regions, and the checker is quadratic.
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn many_zones_and_zone_sets_match_the_model_and_leave_no_cost_reducing_path(
        input in many_zones_input()
    ) {
        if let Some((sel, cands)) = check_against_model(&input)? {
            prop_assert!(!has_cost_reducing_path(&sel, &cands), "loads {:?}", sel.regions_per_worker());
        }
    }
}
