//! Every rule and corner case of zone-aware node selection, one table row each: policy, entry
//! zone, workers (zone, alive) and regions (replica zones) in, exact assignment, warnings and
//! error text out.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use client::node_selection::{
    NodeSelectionPolicy, POLICY_IGNORED_WARNING, RegionReplicas, WorkerNode, select_nodes,
};
use types::{RegionId, Zone};

use NodeSelectionPolicy::{AllNodes, OnlyLocalZoneNodes, PriorityLocalZoneNodes};

fn up(id: u64, zone: &str) -> WorkerNode {
    WorkerNode::new(id, Some(zone), true)
}

fn down(id: u64, zone: &str) -> WorkerNode {
    WorkerNode::new(id, Some(zone), false)
}

fn region(id: u64, zones: &[&str]) -> RegionReplicas {
    RegionReplicas::new(id, zones.iter().copied())
}

/// `count` regions with consecutive ids from `first`, each with one replica in `zone`.
fn regions_in(zone: &str, first: u64, count: u64) -> Vec<RegionReplicas> {
    (first..first + count)
        .map(|id| region(id, &[zone]))
        .collect()
}

enum Expect {
    /// (region, worker, local) in region order, then the warnings.
    Ok(Vec<(u64, u64, bool)>, Vec<&'static str>),
    Err(&'static str),
}

struct Case {
    name: &'static str,
    policy: NodeSelectionPolicy,
    entry: Option<&'static str>,
    workers: Vec<WorkerNode>,
    regions: Vec<RegionReplicas>,
    expect: Expect,
}

const L: bool = true;
const R: bool = false;

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "all_nodes: each region goes to an alive worker that reads it locally, any zone",
            policy: AllNodes,
            entry: Some("a"),
            workers: vec![up(1, "a"), up(2, "a"), up(3, "b")],
            regions: vec![
                region(10, &["a"]),
                region(11, &["a"]),
                region(12, &["b"]),
                region(13, &["b"]),
            ],
            expect: Expect::Ok(vec![(10, 1, L), (11, 2, L), (12, 3, L), (13, 3, L)], vec![]),
        },
        Case {
            name: "all_nodes: a region no alive worker reads locally goes to any alive worker, remotely",
            policy: AllNodes,
            entry: Some("a"),
            workers: vec![up(1, "a"), up(2, "b"), down(3, "c")],
            regions: vec![region(10, &["c"]), region(11, &["c"]), region(12, &["a"])],
            expect: Expect::Ok(vec![(10, 1, R), (11, 2, R), (12, 1, L)], vec![]),
        },
        Case {
            name: "all_nodes: an entry node without zone gets no warning",
            policy: AllNodes,
            entry: None,
            workers: vec![up(1, "a"), up(2, "b")],
            regions: vec![region(10, &["a"]), region(11, &["b"])],
            expect: Expect::Ok(vec![(10, 1, L), (11, 2, L)], vec![]),
        },
        Case {
            name: "all_nodes: a region with replicas in several zones may go to the workers of each",
            policy: AllNodes,
            entry: Some("a"),
            workers: vec![up(1, "a"), up(2, "b"), up(3, "c")],
            regions: vec![
                region(10, &["a", "b"]),
                region(11, &["b", "a"]),
                region(12, &["a", "b"]),
                region(13, &["a", "b", "b"]),
            ],
            expect: Expect::Ok(vec![(10, 1, L), (11, 1, L), (12, 2, L), (13, 2, L)], vec![]),
        },
        Case {
            name: "balance: a region with one candidate goes to it and the others fill around it",
            policy: AllNodes,
            entry: Some("a"),
            workers: vec![up(1, "a"), up(2, "b")],
            regions: vec![
                region(10, &["a", "b"]),
                region(11, &["a"]),
                region(12, &["a"]),
                region(13, &["a", "b"]),
            ],
            expect: Expect::Ok(vec![(10, 2, L), (11, 1, L), (12, 1, L), (13, 2, L)], vec![]),
        },
        Case {
            // Greedy alone gives 10 -> 1 (tie), then 11, 12 -> 3 and 1: loads 2, 0, 1. Moving
            // region 10 to worker 2 gives 1, 1, 1.
            name: "balance: an unlucky greedy order is repaired along an alternating path",
            policy: AllNodes,
            entry: Some("a"),
            workers: vec![up(1, "a"), up(2, "b"), up(3, "c")],
            regions: vec![
                region(10, &["a", "b"]),
                region(11, &["a", "c"]),
                region(12, &["a", "c"]),
            ],
            expect: Expect::Ok(vec![(10, 2, L), (11, 1, L), (12, 3, L)], vec![]),
        },
        Case {
            name: "dead workers are never chosen, even as the only local reader",
            policy: AllNodes,
            entry: Some("a"),
            workers: vec![down(1, "a"), up(2, "a"), up(3, "b")],
            regions: vec![region(10, &["a"]), region(11, &["a"])],
            expect: Expect::Ok(vec![(10, 2, L), (11, 2, L)], vec![]),
        },
        Case {
            name: "zone labels: a worker without zone (None or empty) reads nothing locally; an empty replica zone is ignored",
            policy: AllNodes,
            entry: Some("a"),
            workers: vec![
                WorkerNode::new(1, None, true),
                up(2, "a"),
                WorkerNode::new(3, Some(""), true),
            ],
            regions: vec![
                region(10, &["a"]),
                region(11, &["a"]),
                region(12, &["z"]),
                region(13, &[""]),
            ],
            expect: Expect::Ok(vec![(10, 2, L), (11, 2, L), (12, 1, R), (13, 3, R)], vec![]),
        },
        Case {
            name: "priority_local: regions with a local replica stay in the zone, the others go to other zones with the Total warning",
            policy: PriorityLocalZoneNodes,
            entry: Some("a"),
            workers: vec![up(1, "a"), up(2, "a"), up(3, "b"), up(4, "c")],
            regions: vec![
                region(10, &["a"]),
                region(11, &["b"]),
                region(12, &["c"]),
                region(13, &["b"]),
                region(14, &["b"]),
                region(15, &["a"]),
                region(16, &["a", "b"]),
            ],
            expect: Expect::Ok(
                vec![
                    (10, 1, L),
                    (11, 3, L),
                    (12, 4, L),
                    (13, 3, L),
                    (14, 3, L),
                    (15, 2, L),
                    (16, 1, L),
                ],
                vec![
                    "Total 4 region(s) can not be accessed by TiFlash in the zone [a]: 11, 12, 13",
                ],
            ),
        },
        Case {
            name: "priority_local: a region no alive worker reads locally goes to any alive worker, local ones included",
            policy: PriorityLocalZoneNodes,
            entry: Some("a"),
            workers: vec![up(1, "a"), up(2, "b")],
            regions: vec![
                region(10, &["a"]),
                region(11, &["d"]),
                region(12, &["d"]),
                region(13, &["d"]),
            ],
            expect: Expect::Ok(
                vec![(10, 1, L), (11, 1, R), (12, 2, R), (13, 2, R)],
                vec![
                    "Total 3 region(s) can not be accessed by TiFlash in the zone [a]: 11, 12, 13",
                ],
            ),
        },
        Case {
            name: "priority_local: without an alive local worker every region goes elsewhere, with the Total warning",
            policy: PriorityLocalZoneNodes,
            entry: Some("a"),
            workers: vec![down(1, "a"), up(2, "b")],
            regions: vec![region(10, &["a"]), region(11, &["b"])],
            expect: Expect::Ok(
                vec![(10, 2, R), (11, 2, L)],
                vec!["Total 2 region(s) can not be accessed by TiFlash in the zone [a]: 10, 11"],
            ),
        },
        Case {
            name: "priority_local: every region has a local replica, so local workers only and no warning",
            policy: PriorityLocalZoneNodes,
            entry: Some("a"),
            workers: vec![up(1, "a"), up(2, "b")],
            regions: vec![region(10, &["a"]), region(11, &["a", "b"])],
            expect: Expect::Ok(vec![(10, 1, L), (11, 1, L)], vec![]),
        },
        Case {
            name: "message ids follow start-key (input) order, not numeric order, and stop at three",
            policy: PriorityLocalZoneNodes,
            entry: Some("a"),
            workers: vec![up(1, "a"), up(2, "b")],
            regions: vec![
                region(30, &["b"]),
                region(5, &["b"]),
                region(20, &["b"]),
                region(1, &["b"]),
            ],
            expect: Expect::Ok(
                vec![(30, 2, L), (5, 2, L), (20, 2, L), (1, 2, L)],
                vec!["Total 4 region(s) can not be accessed by TiFlash in the zone [a]: 30, 5, 20"],
            ),
        },
        Case {
            name: "only_local: regions with a local replica go to local workers only",
            policy: OnlyLocalZoneNodes,
            entry: Some("a"),
            workers: vec![up(1, "a"), up(2, "a"), up(3, "b")],
            regions: vec![
                region(10, &["a", "b"]),
                region(11, &["a"]),
                region(12, &["a", "b"]),
            ],
            expect: Expect::Ok(vec![(10, 1, L), (11, 1, L), (12, 2, L)], vec![]),
        },
        Case {
            name: "only_local: fewer than three inaccessible regions are all listed",
            policy: OnlyLocalZoneNodes,
            entry: Some("a"),
            workers: vec![up(1, "a"), up(3, "b")],
            regions: vec![region(10, &["a"]), region(11, &["b"]), region(12, &["c"])],
            expect: Expect::Ok(
                vec![(10, 1, L), (11, 1, R), (12, 1, R)],
                vec!["Total 2 region(s) can not be accessed by TiFlash in the zone [a]: 11, 12"],
            ),
        },
        Case {
            name: "only_local: three inaccessible regions per alive local worker are read remotely, with the Total warning",
            policy: OnlyLocalZoneNodes,
            entry: Some("a"),
            workers: vec![up(1, "a"), down(2, "a"), up(3, "b")],
            regions: vec![
                region(10, &["b"]),
                region(11, &["a"]),
                region(12, &["b"]),
                region(13, &["c"]),
            ],
            expect: Expect::Ok(
                vec![(10, 1, R), (11, 1, L), (12, 1, R), (13, 1, R)],
                vec![
                    "Total 3 region(s) can not be accessed by TiFlash in the zone [a]: 10, 12, 13",
                ],
            ),
        },
        Case {
            name: "only_local: one inaccessible region beyond the tolerance fails with No less than",
            policy: OnlyLocalZoneNodes,
            entry: Some("a"),
            workers: vec![up(1, "a"), down(2, "a"), up(3, "b")],
            regions: vec![
                region(10, &["b"]),
                region(11, &["a"]),
                region(12, &["b"]),
                region(13, &["c"]),
                region(14, &["b"]),
            ],
            expect: Expect::Err(
                "No less than 4 region(s) can not be accessed by TiFlash in the zone [a]: 10, 12, 13",
            ),
        },
        Case {
            name: "only_local: the tolerance is three per alive local worker (two alive: six pass)",
            policy: OnlyLocalZoneNodes,
            entry: Some("a"),
            workers: vec![up(1, "a"), up(2, "a"), down(3, "a"), up(4, "b")],
            regions: regions_in("b", 20, 6),
            expect: Expect::Ok(
                vec![
                    (20, 1, R),
                    (21, 1, R),
                    (22, 1, R),
                    (23, 2, R),
                    (24, 2, R),
                    (25, 2, R),
                ],
                vec![
                    "Total 6 region(s) can not be accessed by TiFlash in the zone [a]: 20, 21, 22",
                ],
            ),
        },
        Case {
            name: "only_local: the tolerance is three per alive local worker (two alive: seven fail)",
            policy: OnlyLocalZoneNodes,
            entry: Some("a"),
            workers: vec![up(1, "a"), up(2, "a"), down(3, "a"), up(4, "b")],
            regions: regions_in("b", 20, 7),
            expect: Expect::Err(
                "No less than 7 region(s) can not be accessed by TiFlash in the zone [a]: 20, 21, 22",
            ),
        },
        Case {
            name: "only_local: no alive local worker fails",
            policy: OnlyLocalZoneNodes,
            entry: Some("a"),
            workers: vec![down(1, "a"), up(2, "b")],
            regions: vec![region(10, &["a"])],
            expect: Expect::Err("No alive worker in the zone [a]"),
        },
        Case {
            name: "only_local: an entry zone that no worker has fails even with no region",
            policy: OnlyLocalZoneNodes,
            entry: Some("d"),
            workers: vec![up(1, "a")],
            regions: vec![],
            expect: Expect::Err("No alive worker in the zone [d]"),
        },
        Case {
            name: "entry node without zone: priority_local is ignored with a warning",
            policy: PriorityLocalZoneNodes,
            entry: None,
            workers: vec![up(1, "a"), up(2, "b")],
            regions: vec![region(10, &["a"]), region(11, &["b"]), region(12, &["c"])],
            expect: Expect::Ok(
                vec![(10, 1, L), (11, 2, L), (12, 1, R)],
                vec![POLICY_IGNORED_WARNING],
            ),
        },
        Case {
            name: "entry node without zone: only_local is ignored with a warning, however many regions are remote",
            policy: OnlyLocalZoneNodes,
            entry: None,
            workers: vec![up(1, "a"), up(2, "b")],
            regions: regions_in("c", 10, 5),
            expect: Expect::Ok(
                vec![(10, 1, R), (11, 1, R), (12, 1, R), (13, 2, R), (14, 2, R)],
                vec![POLICY_IGNORED_WARNING],
            ),
        },
        Case {
            name: "entry node with an empty zone label counts as without zone",
            policy: OnlyLocalZoneNodes,
            entry: Some(""),
            workers: vec![up(1, "a"), up(2, "b")],
            regions: vec![region(10, &["b"])],
            expect: Expect::Ok(vec![(10, 2, L)], vec![POLICY_IGNORED_WARNING]),
        },
        Case {
            name: "no alive worker fails whatever the policy, before the zone check",
            policy: OnlyLocalZoneNodes,
            entry: Some("a"),
            workers: vec![down(1, "a"), down(2, "b")],
            regions: vec![region(10, &["a"])],
            expect: Expect::Err("no alive worker workers=2"),
        },
        Case {
            name: "no worker at all fails",
            policy: AllNodes,
            entry: Some("a"),
            workers: vec![],
            regions: vec![region(10, &["a"])],
            expect: Expect::Err("no alive worker workers=0"),
        },
        Case {
            name: "a duplicate worker id is rejected, dead or alive",
            policy: AllNodes,
            entry: Some("a"),
            workers: vec![up(1, "a"), down(1, "b")],
            regions: vec![region(10, &["a"])],
            expect: Expect::Err("duplicate worker id worker_id=1"),
        },
        Case {
            name: "a duplicate region id is rejected",
            policy: AllNodes,
            entry: Some("a"),
            workers: vec![up(1, "a")],
            regions: vec![region(10, &["a"]), region(11, &["a"]), region(10, &["b"])],
            expect: Expect::Err("duplicate region id region_id=10"),
        },
        Case {
            name: "no region: an empty assignment and no warning",
            policy: PriorityLocalZoneNodes,
            entry: Some("a"),
            workers: vec![up(1, "a")],
            regions: vec![],
            expect: Expect::Ok(vec![], vec![]),
        },
    ]
}

#[test]
fn node_selection_follows_every_rule() {
    for case in cases() {
        let entry = case.entry.and_then(Zone::label);
        let got = select_nodes(case.policy, entry.as_ref(), &case.workers, &case.regions);
        match (&case.expect, got) {
            (Expect::Ok(want, warnings), Ok(sel)) => {
                let got: Vec<(u64, u64, bool)> = sel
                    .assignments
                    .iter()
                    .map(|a| (a.region_id.get(), a.worker_id, a.local))
                    .collect();
                assert_eq!(&got, want, "assignment: {}", case.name);
                assert_eq!(&sel.warnings, warnings, "warnings: {}", case.name);
            }
            (Expect::Err(want), Err(e)) => assert_eq!(e.to_string(), *want, "{}", case.name),
            (Expect::Ok(..), Err(e)) => panic!("{}: unexpected error {e}", case.name),
            (Expect::Err(want), Ok(sel)) => {
                panic!("{}: expected error {want:?}, got {sel:?}", case.name)
            }
        }
    }
}

#[test]
fn candidates_are_the_workers_eligible_for_some_region() {
    // only_local: the other zones' workers are not candidates, even though they are alive.
    let workers = vec![up(1, "a"), up(2, "a"), up(3, "b"), down(4, "a")];
    let regions = regions_in("a", 10, 1);
    let a = Zone::label("a");
    let sel = select_nodes(OnlyLocalZoneNodes, a.as_ref(), &workers, &regions).unwrap();
    assert_eq!(sel.candidates, vec![1, 2]);
    assert_eq!(
        sel.regions_per_worker().into_iter().collect::<Vec<_>>(),
        vec![(1, 1), (2, 0)]
    );
    assert_eq!(
        sel.regions_by_worker().into_iter().collect::<Vec<_>>(),
        vec![(1, vec![RegionId(10)])]
    );
}

#[test]
fn default_policy_is_all_nodes() {
    assert_eq!(NodeSelectionPolicy::default(), AllNodes);
    assert_eq!(NodeSelectionPolicy::default().to_string(), "all_nodes");
}

#[test]
fn unknown_policy_value_names_the_variable_the_value_and_the_allowed_values() {
    let err = "ALL_NODES".parse::<NodeSelectionPolicy>().unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown value of variable tidb_tiflash_node_selection_policy \
         allowed=all_nodes,priority_local_zone_nodes,only_local_zone_nodes value=\"ALL_NODES\""
    );
    assert_eq!(err.value, "ALL_NODES");
}
