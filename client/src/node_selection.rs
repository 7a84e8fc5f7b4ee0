//! Zone-aware choice of the worker that reads each region of a multi-region analytic request
//! (issue 9, item 5).
//!
//! The entry node dispatches a request that spans many regions to workers through the delegate
//! path. Which workers may read a region depends on the session variable
//! `tidb_tiflash_node_selection_policy` ([`NodeSelectionPolicy`]), on the zone labels of the
//! entry node and of the workers, and on the zones that hold a replica of the region. A worker
//! reads a region *locally* iff its zone is one of the region's replica zones; otherwise it reads
//! it *remotely* (across zones). Workers that are not alive are never chosen.
//!
//! # Rules
//!
//! Let `Z` be the entry node's zone and `L` the alive workers whose zone is `Z` (the *local
//! workers*).
//!
//! * `all_nodes`: a region's candidates are the alive workers, in any zone, that read it
//!   locally; if there are none, every alive worker (reading it remotely).
//! * `priority_local_zone_nodes`: a region with a replica in `Z` goes to `L`. Every other region
//!   is "not accessible in `Z`" and follows the `all_nodes` rule, so it goes to the workers of
//!   other zones that read it locally, or, if no alive worker reads it locally, to any alive
//!   worker (local ones included: every worker reads it remotely then). If `L` is empty, every
//!   region is not accessible in `Z` and the whole request follows `all_nodes`. If any region is
//!   not accessible the warning `Total N region(s) can not be accessed by TiFlash in the zone
//!   [Z]: IDS` is attached (N = all of them).
//! * `only_local_zone_nodes`: every region goes to `L`. `L` empty fails with
//!   [`NodeSelectionError::NoAliveWorkerInZone`]. Regions without a replica in `Z` are read
//!   remotely by `L` as long as there are at most `T = 3 × |L|` of them, with the same `Total`
//!   warning; more fail with [`NodeSelectionError::TooManyInaccessibleRegions`].
//! * An entry node without a zone label (`None`; a [`Zone`] is never empty) makes
//!   `priority_local_zone_nodes` and `only_local_zone_nodes` fall back to `all_nodes`, with the
//!   warning [`POLICY_IGNORED_WARNING`].
//! * A worker without a zone label (`None`) belongs to no zone: it never reads a region locally
//!   and is never a local worker. The constructors of [`WorkerNode`] and [`RegionReplicas`]
//!   take label text and read the empty label as no zone, as config files write it.
//! * In messages, IDS is the first `min(3, count)` ids of the regions concerned, in the order the
//!   regions were given (start-key order), in decimal, joined by `, `. The message texts are
//!   verbatim, "TiFlash" included, because operators search logs for them; they are the only
//!   messages of this crate that do not follow the lowercase `key=value` style.
//!
//! Checks run in this order, so that one input gives one answer: duplicate worker ids,
//! duplicate region ids, no alive worker at all ([`NodeSelectionError::NoAliveWorker`], whatever
//! the policy), no alive local worker, too many inaccessible regions. The topology checks apply
//! even to a request with no region.
//!
//! # Balance
//!
//! Once every region has its candidates, regions are spread by load (module `balance`): a region
//! with one candidate goes to it, then groups of regions with the fewest candidates are handed
//! out first, each region to the least-loaded candidate (ties to the lowest worker id), and the
//! result is then improved along alternating paths until none helps. The outcome is an optimal
//! semi-matching: no other assignment of the regions to their candidates has a smaller maximum
//! load, a larger minimum load among the candidate workers, or a smaller sum of squared loads.
//! In particular, whenever the candidates allow the regions-per-worker counts of the candidate
//! workers to differ by at most one, they do.
//!
//! Within a group of regions with the same replica zones, each worker receives a contiguous run
//! of that group's regions in start-key order, workers in id order. The result depends only on
//! the inputs, not on the order in which workers are listed.
//!
//! # Cost
//!
//! The work per region is a lookup of its replica zones in a small table and a comparison of a
//! bit set; candidate lists are built once per distinct set of replica zones, of which a cluster
//! has few. Nothing is allocated per region except the output entry.

mod balance;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::str::FromStr;

use thiserror::Error;
use types::{RegionId, Zone};

/// The name of the session/global variable that holds the policy.
pub const POLICY_VARIABLE: &str = "tidb_tiflash_node_selection_policy";

/// The warning attached when the policy cannot apply because the entry node has no zone label.
pub const POLICY_IGNORED_WARNING: &str =
    "The variable tidb_tiflash_node_selection_policy is ignored.";

/// Regions without a local replica that each alive local worker may read remotely under
/// `only_local_zone_nodes`; the tolerance is this times the number of alive local workers.
pub const REMOTE_REGIONS_PER_LOCAL_WORKER: usize = 3;

/// How many region ids a message lists at most.
const IDS_IN_MESSAGE: usize = 3;

/// The value of `tidb_tiflash_node_selection_policy`: which workers a multi-region request may
/// be dispatched to. See the [module documentation](self) for the exact rules.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum NodeSelectionPolicy {
    /// `all_nodes` (the default): any alive worker that reads the region locally, in any zone.
    #[default]
    AllNodes,
    /// `priority_local_zone_nodes`: workers of the entry node's zone for regions with a replica
    /// there, workers of other zones for the rest, with a warning.
    PriorityLocalZoneNodes,
    /// `only_local_zone_nodes`: only workers of the entry node's zone; a few regions without a
    /// local replica are read remotely, more fail the request.
    OnlyLocalZoneNodes,
}

impl NodeSelectionPolicy {
    /// Every policy, in the order of the allowed values.
    pub const ALL: [NodeSelectionPolicy; 3] = [
        NodeSelectionPolicy::AllNodes,
        NodeSelectionPolicy::PriorityLocalZoneNodes,
        NodeSelectionPolicy::OnlyLocalZoneNodes,
    ];

    /// The variable's value for this policy.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeSelectionPolicy::AllNodes => "all_nodes",
            NodeSelectionPolicy::PriorityLocalZoneNodes => "priority_local_zone_nodes",
            NodeSelectionPolicy::OnlyLocalZoneNodes => "only_local_zone_nodes",
        }
    }
}

impl fmt::Display for NodeSelectionPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for NodeSelectionPolicy {
    type Err = UnknownPolicyError;

    /// Parses exactly one of the three values (lowercase, no surrounding spaces).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        NodeSelectionPolicy::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| UnknownPolicyError {
                value: s.to_string(),
            })
    }
}

/// A value of `tidb_tiflash_node_selection_policy` that is none of the allowed ones.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error(
    "unknown value of variable tidb_tiflash_node_selection_policy allowed=all_nodes,priority_local_zone_nodes,only_local_zone_nodes value={value:?}"
)]
pub struct UnknownPolicyError {
    /// The rejected value.
    pub value: String,
}

/// A compute node, as the client's topology knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerNode {
    /// The worker's id, unique in the cluster.
    pub id: u64,
    /// The worker's zone; `None`: no zone.
    pub zone: Option<Zone>,
    /// Whether the last liveness probe succeeded.
    pub alive: bool,
}

impl WorkerNode {
    /// A worker with the given id, zone label (`None` or `""`: no zone) and liveness.
    pub fn new(id: u64, zone: Option<&str>, alive: bool) -> Self {
        WorkerNode {
            id,
            zone: zone.and_then(Zone::label),
            alive,
        }
    }
}

/// A region of the request and the zones that hold one of its replicas.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegionReplicas {
    /// The region's id, unique among the regions of a request.
    pub id: RegionId,
    /// The zones holding a replica; order and repetition do not matter. The zones of the
    /// region's peers (every server of a replicated cluster), or, on standalone servers, the
    /// owning server's zone.
    pub replica_zones: Vec<Zone>,
}

impl RegionReplicas {
    /// A region with replicas in the zones of the given labels (empty labels are no zone, and
    /// ignored).
    pub fn new<S: AsRef<str>>(
        id: impl Into<RegionId>,
        replica_zones: impl IntoIterator<Item = S>,
    ) -> Self {
        RegionReplicas {
            id: id.into(),
            replica_zones: replica_zones
                .into_iter()
                .filter_map(|z| Zone::label(z.as_ref()))
                .collect(),
        }
    }
}

/// The worker chosen for one region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Assignment {
    /// The region.
    pub region_id: RegionId,
    /// The worker that reads it.
    pub worker_id: u64,
    /// Whether the worker's zone holds a replica of the region (a local read); `false` means
    /// the read crosses zones.
    pub local: bool,
}

/// The answer of [`select_nodes`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selection {
    /// One entry per region, in the order the regions were given (start-key order).
    pub assignments: Vec<Assignment>,
    /// The ids of the workers that were a candidate for at least one region, ascending. The
    /// balance guarantee is stated over these workers.
    pub candidates: Vec<u64>,
    /// Warnings for the caller (and later `SHOW WARNINGS`), in the order they arose.
    pub warnings: Vec<String>,
}

impl Selection {
    /// Regions per worker for every candidate worker (0 for a candidate that got none).
    pub fn regions_per_worker(&self) -> BTreeMap<u64, usize> {
        let mut counts: BTreeMap<u64, usize> = self.candidates.iter().map(|&w| (w, 0)).collect();
        for a in &self.assignments {
            *counts.entry(a.worker_id).or_default() += 1;
        }
        counts
    }

    /// The region ids each worker reads, in start-key order; only workers that got a region.
    pub fn regions_by_worker(&self) -> BTreeMap<u64, Vec<RegionId>> {
        let mut by: BTreeMap<u64, Vec<RegionId>> = BTreeMap::new();
        for a in &self.assignments {
            by.entry(a.worker_id).or_default().push(a.region_id);
        }
        by
    }
}

/// Why no assignment could be made.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum NodeSelectionError {
    /// Two workers share an id: the topology is inconsistent.
    #[error("duplicate worker id worker_id={worker_id}")]
    DuplicateWorker {
        /// The repeated id.
        worker_id: u64,
    },
    /// Two regions of the request share an id: the region list is inconsistent.
    #[error("duplicate region id region_id={region_id}")]
    DuplicateRegion {
        /// The repeated id.
        region_id: RegionId,
    },
    /// No worker at all is alive, whatever the policy.
    #[error("no alive worker workers={workers}")]
    NoAliveWorker {
        /// How many workers the topology lists (all dead).
        workers: usize,
    },
    /// `only_local_zone_nodes` and no alive worker in the entry node's zone. Text verbatim from
    /// the issue.
    #[error("No alive worker in the zone [{zone}]")]
    NoAliveWorkerInZone {
        /// The entry node's zone.
        zone: Zone,
    },
    /// `only_local_zone_nodes` and more regions without a local replica than the tolerance.
    /// Text verbatim from the issue.
    #[error(
        "No less than {count} region(s) can not be accessed by TiFlash in the zone [{zone}]: {ids}",
        ids = join_ids(.region_ids)
    )]
    TooManyInaccessibleRegions {
        /// Tolerance + 1, where the tolerance is 3 × the alive local workers.
        count: usize,
        /// The entry node's zone.
        zone: Zone,
        /// The first (up to 3) such regions in start-key order.
        region_ids: Vec<RegionId>,
    },
}

/// The `Total ...` warning text.
fn total_warning(count: usize, zone: &Zone, region_ids: &[RegionId]) -> String {
    format!(
        "Total {count} region(s) can not be accessed by TiFlash in the zone [{zone}]: {}",
        join_ids(region_ids)
    )
}

fn join_ids(ids: &[RegionId]) -> String {
    ids.iter()
        .map(RegionId::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The rule actually applied, after the entry node's zone is taken into account.
#[derive(Clone, Copy)]
enum Rule<'a> {
    AllNodes,
    PriorityLocal(&'a Zone),
    OnlyLocal(&'a Zone),
}

/// Chooses one worker for every region.
///
/// `regions` must be in start-key order (message ids and contiguous runs follow it). Returns
/// one [`Assignment`] per region in that order, the candidate workers and the warnings, or an
/// error; see the [module documentation](self) for the rules and the balance guarantee.
///
/// ```
/// use client::node_selection::{NodeSelectionPolicy, RegionReplicas, WorkerNode, select_nodes};
///
/// let workers = [WorkerNode::new(1, Some("a"), true), WorkerNode::new(2, Some("b"), true)];
/// let regions = [RegionReplicas::new(10, ["a"]), RegionReplicas::new(11, ["b"])];
/// let policy: NodeSelectionPolicy = "priority_local_zone_nodes".parse().unwrap();
/// let entry_zone = types::Zone::label("a");
/// let selection = select_nodes(policy, entry_zone.as_ref(), &workers, &regions).unwrap();
/// let chosen: Vec<u64> = selection.assignments.iter().map(|a| a.worker_id).collect();
/// assert_eq!(chosen, [1, 2]);
/// assert_eq!(
///     selection.warnings,
///     ["Total 1 region(s) can not be accessed by TiFlash in the zone [a]: 11"]
/// );
/// ```
pub fn select_nodes(
    policy: NodeSelectionPolicy,
    entry_zone: Option<&Zone>,
    workers: &[WorkerNode],
    regions: &[RegionReplicas],
) -> Result<Selection, NodeSelectionError> {
    let mut by_id: Vec<&WorkerNode> = workers.iter().collect();
    by_id.sort_unstable_by_key(|w| w.id);
    if let Some(pair) = by_id.windows(2).find(|p| p[0].id == p[1].id) {
        return Err(NodeSelectionError::DuplicateWorker {
            worker_id: pair[0].id,
        });
    }
    check_unique_regions(regions)?;
    // Workers are indexed by ascending id from here on: ties go to the lowest id.
    let alive: Vec<&WorkerNode> = by_id.into_iter().filter(|w| w.alive).collect();
    if alive.is_empty() {
        return Err(NodeSelectionError::NoAliveWorker {
            workers: workers.len(),
        });
    }

    let mut warnings = Vec::new();
    let rule = match (policy, entry_zone) {
        (NodeSelectionPolicy::AllNodes, _) => Rule::AllNodes,
        (_, None) => {
            warnings.push(POLICY_IGNORED_WARNING.to_string());
            Rule::AllNodes
        }
        (NodeSelectionPolicy::PriorityLocalZoneNodes, Some(z)) => Rule::PriorityLocal(z),
        (NodeSelectionPolicy::OnlyLocalZoneNodes, Some(z)) => Rule::OnlyLocal(z),
    };

    // Zone 0 is the entry node's zone when it has one, so "has a replica in the entry zone" is
    // bit 0 of a region's zone set.
    let zones = ZoneTable::new(entry_zone, &alive);
    let worker_zone: Vec<Option<usize>> = alive
        .iter()
        .map(|w| w.zone.as_ref().and_then(|z| zones.get(z.as_str())))
        .collect();
    let local_workers: Vec<usize> = match entry_zone {
        Some(_) => (0..alive.len())
            .filter(|&w| worker_zone[w] == Some(ENTRY_ZONE))
            .collect(),
        None => Vec::new(),
    };
    if let Rule::OnlyLocal(z) = rule
        && local_workers.is_empty()
    {
        return Err(NodeSelectionError::NoAliveWorkerInZone { zone: z.clone() });
    }

    let grouped = group_by_zone_set(&zones, regions);
    let all_workers: Vec<usize> = (0..alive.len()).collect();
    let groups: Vec<GroupPlan> = grouped
        .keys
        .iter()
        .map(|key| {
            let has = |zone: usize| key[zone / 64] & (1 << (zone % 64)) != 0;
            let all_nodes = || {
                let readers: Vec<usize> = (0..alive.len())
                    .filter(|&w| worker_zone[w].is_some_and(has))
                    .collect();
                if readers.is_empty() {
                    GroupPlan::new(all_workers.clone(), false, true)
                } else {
                    GroupPlan::new(readers, true, true)
                }
            };
            match rule {
                Rule::AllNodes => all_nodes(),
                Rule::PriorityLocal(_) if has(ENTRY_ZONE) && !local_workers.is_empty() => {
                    GroupPlan::new(local_workers.clone(), true, true)
                }
                Rule::PriorityLocal(_) => GroupPlan {
                    accessible: false,
                    ..all_nodes()
                },
                Rule::OnlyLocal(_) => {
                    GroupPlan::new(local_workers.clone(), has(ENTRY_ZONE), has(ENTRY_ZONE))
                }
            }
        })
        .collect();

    let inaccessible: usize = groups
        .iter()
        .zip(&grouped.sizes)
        .filter(|(g, _)| !g.accessible)
        .map(|(_, &n)| n)
        .sum();
    if inaccessible > 0 {
        let first_ids: Vec<RegionId> = regions
            .iter()
            .zip(&grouped.region_group)
            .filter(|(_, g)| !groups[**g as usize].accessible)
            .take(IDS_IN_MESSAGE)
            .map(|(r, _)| r.id)
            .collect();
        match rule {
            Rule::OnlyLocal(z) => {
                let tolerance = REMOTE_REGIONS_PER_LOCAL_WORKER * local_workers.len();
                if inaccessible > tolerance {
                    return Err(NodeSelectionError::TooManyInaccessibleRegions {
                        count: tolerance + 1,
                        zone: z.clone(),
                        region_ids: first_ids,
                    });
                }
                warnings.push(total_warning(inaccessible, z, &first_ids));
            }
            Rule::PriorityLocal(z) => warnings.push(total_warning(inaccessible, z, &first_ids)),
            Rule::AllNodes => unreachable!("all_nodes makes every region accessible"),
        }
    }

    let candidates: Vec<&[usize]> = groups.iter().map(|g| g.candidates.as_slice()).collect();
    let mut counts = balance::balance(&grouped.sizes, &candidates, alive.len());

    // Hand out each group's regions in start-key order: a contiguous run per worker, workers in
    // id order.
    let mut cursor = vec![0usize; groups.len()];
    let mut assignments = Vec::with_capacity(regions.len());
    for (region, &g) in regions.iter().zip(&grouped.region_group) {
        let g = g as usize;
        let cands = &groups[g].candidates;
        let worker = loop {
            let w = cands[cursor[g]];
            let left = counts.get_mut(g, w);
            if *left > 0 {
                *left -= 1;
                break w;
            }
            cursor[g] += 1;
        };
        assignments.push(Assignment {
            region_id: region.id,
            worker_id: alive[worker].id,
            local: groups[g].local,
        });
    }

    let mut is_candidate = vec![false; alive.len()];
    for g in &groups {
        for &w in &g.candidates {
            is_candidate[w] = true;
        }
    }
    let candidates = (0..alive.len())
        .filter(|&w| is_candidate[w])
        .map(|w| alive[w].id)
        .collect();
    Ok(Selection {
        assignments,
        candidates,
        warnings,
    })
}

/// What one group of regions (same replica zones) gets under the rule.
struct GroupPlan {
    /// Indexes into the alive workers (sorted by id), ascending.
    candidates: Vec<usize>,
    /// Whether the candidates read these regions locally.
    local: bool,
    /// Whether these regions count as accessible in the entry node's zone (always true under
    /// `all_nodes`).
    accessible: bool,
}

impl GroupPlan {
    fn new(candidates: Vec<usize>, local: bool, accessible: bool) -> Self {
        GroupPlan {
            candidates,
            local,
            accessible,
        }
    }
}

/// Index of the entry node's zone in the [`ZoneTable`] (when it has one).
const ENTRY_ZONE: usize = 0;

/// The zones that matter: the entry node's (index 0, if any) and those of alive workers. A
/// replica in any other zone cannot be read locally by anyone, so it is ignored.
struct ZoneTable<'a> {
    names: Vec<&'a str>,
    /// Built only when there are too many zones for a linear scan to win.
    index: Option<HashMap<&'a str, usize>>,
}

/// Up to this many zones a linear scan is faster than hashing the name.
const LINEAR_ZONES: usize = 8;

impl<'a> ZoneTable<'a> {
    fn new(entry_zone: Option<&'a Zone>, alive: &[&'a WorkerNode]) -> Self {
        let mut names: Vec<&str> = entry_zone.map(Zone::as_str).into_iter().collect();
        let mut seen: HashSet<&str> = names.iter().copied().collect();
        for w in alive {
            if let Some(z) = &w.zone
                && seen.insert(z.as_str())
            {
                names.push(z.as_str());
            }
        }
        let index = (names.len() > LINEAR_ZONES)
            .then(|| names.iter().enumerate().map(|(i, &z)| (z, i)).collect());
        ZoneTable { names, index }
    }

    fn len(&self) -> usize {
        self.names.len()
    }

    fn get(&self, zone: &str) -> Option<usize> {
        match &self.index {
            Some(index) => index.get(zone).copied(),
            None => self.names.iter().position(|&z| z == zone),
        }
    }
}

/// Regions grouped by the set of relevant zones that hold one of their replicas.
struct Grouped {
    /// Per region, in input order: its group.
    region_group: Vec<u32>,
    /// Per group: the zone set as a bit set over [`ZoneTable`] indexes.
    keys: Vec<Box<[u64]>>,
    /// Per group: how many regions.
    sizes: Vec<usize>,
}

/// Up to this many groups a linear scan of their keys is faster than a hash lookup.
const LINEAR_GROUPS: usize = 16;

fn group_by_zone_set(zones: &ZoneTable<'_>, regions: &[RegionReplicas]) -> Grouped {
    let words = zones.len().div_ceil(64).max(1);
    let mut scratch = vec![0u64; words];
    let mut lookup: HashMap<Box<[u64]>, u32> = HashMap::new();
    let mut grouped = Grouped {
        region_group: Vec::with_capacity(regions.len()),
        keys: Vec::new(),
        sizes: Vec::new(),
    };
    // Neighbouring regions often share replica zones: remember the last group.
    let mut last: Option<u32> = None;
    for region in regions {
        scratch.fill(0);
        for zone in &region.replica_zones {
            if let Some(i) = zones.get(zone.as_str()) {
                scratch[i / 64] |= 1 << (i % 64);
            }
        }
        let found = match last {
            Some(g) if *grouped.keys[g as usize] == *scratch => Some(g),
            // Few groups: comparing one or two words each beats hashing the key.
            _ if grouped.keys.len() <= LINEAR_GROUPS => grouped
                .keys
                .iter()
                .position(|k| **k == *scratch)
                .map(|g| g as u32),
            _ => lookup.get(scratch.as_slice()).copied(),
        };
        let g = found.unwrap_or_else(|| {
            let g = grouped.keys.len() as u32;
            let key: Box<[u64]> = scratch.clone().into_boxed_slice();
            lookup.insert(key.clone(), g);
            grouped.keys.push(key);
            grouped.sizes.push(0);
            g
        });
        last = Some(g);
        grouped.sizes[g as usize] += 1;
        grouped.region_group.push(g);
    }
    grouped
}

fn check_unique_regions(regions: &[RegionReplicas]) -> Result<(), NodeSelectionError> {
    let mut seen: HashSet<RegionId, BuildHasherDefault<IdHasher>> =
        HashSet::with_capacity_and_hasher(regions.len(), Default::default());
    for r in regions {
        if !seen.insert(r.id) {
            return Err(NodeSelectionError::DuplicateRegion { region_id: r.id });
        }
    }
    Ok(())
}

/// A multiplicative hash for region ids: the default SipHash would cost more than the whole
/// selection, and ids are not attacker-controlled.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        // Fibonacci hashing; fold the high bits down because hashbrown uses the top 7 bits as
        // the control byte and the low bits as the bucket index.
        let h = (self.0 ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = h ^ (h >> 32);
    }
}
