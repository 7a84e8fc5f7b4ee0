//! Replica scheduling: which replica of which region moves where, one step at a time.
//!
//! This is the pure decision logic of the placement driver's scheduling (TiKV PD's replica and
//! rule checkers, balance-region and balance-leader schedulers): no I/O, no clock reads (`now`
//! is passed in), no async. Each round ([`Scheduler::schedule`]) reads the routing table and
//! the registered servers, advances the operators in flight and starts new ones; a server's
//! heartbeat is answered with the steps of the regions it leads ([`Scheduler::steps_for`]).
//!
//! # Operators and their steps
//!
//! An operator is a goal for one region (one operator per region at a time):
//!
//! * `MoveReplica { from, to }`: add a learner on `to`, wait until it is no longer `pending`
//!   (caught up), promote it, move the leadership off `from` if `from` leads, remove `from`;
//! * `AddReplica { to }`: add a learner, promote it (or only promote a learner already there);
//! * `AddLearner { to }`: add a learner a placement rule wants, never promoted;
//! * `RemoveReplica { from }`: move the leadership off `from` if it leads, remove it;
//! * `TransferLeader { to }`.
//!
//! The step an operator waits for is never remembered: it is derived each round from the
//! region's current replicas (is `to` absent, a learner, a voter? is `from` still there, does it
//! lead?). So a step lost on the way, or carried out twice, costs nothing: the next round asks
//! for whatever is still missing, and every step names the `(ver, conf_ver)` it was planned
//! against, which a server compares before acting. An operator is done when its goal holds.
//!
//! # Safety
//!
//! Replicas are added before they are removed, and a removal is asked only when it leaves at
//! least as many voters on registered servers as the region had when the operator started
//! (capped at `max_replicas`, so an extra voter can still go): a server dying in the middle of a
//! move stops the move instead of compounding the loss. The leader is never asked to remove
//! itself: the leadership moves first, to a caught-up voter on an `Up` server.
//!
//! # Priorities
//!
//! Each round, regions without an operator are examined in this order (a region with a problem
//! is never balanced, even when its repair has to wait):
//!
//! 1. a replica on a server gone longer than `max_store_down_time` is replaced (`ReplaceDown`);
//! 2. a replica on a `Draining` server is moved off (`Drain`); a draining leader whose replica
//!    cannot move yet at least hands its leadership away;
//! 3. fewer voters than `max_replicas`: one is added (`AddMissing`); more: one is removed, the
//!    one on a gone server first, then a draining one, then one sharing its zone, then the most
//!    loaded (the operator's reason says which);
//! 4. the region's placement rule ([`PlacementRule`]: a whole replica in each listed zone, none
//!    elsewhere) is not met (`Placement`): a replica in an unlisted zone leaves (a learner is
//!    removed, a voter moves, onto a learner in a listed zone without a voter when there is
//!    one: it is only promoted), a learner sharing its zone with another replica is removed,
//!    of two voters in one zone one moves, a listed zone without a replica gets a learner. A rule listing fewer zones than
//!    `max_replicas` lowers the region's voter count to one per listed zone (rule 3 then
//!    removes the extra voter, the one in an unlisted zone first). Without a rule, a region
//!    has no learners: one no operator knows of (a rule was deleted, a move of an earlier
//!    leadership was cut off) is removed;
//! 5. two voters in one zone while another zone has an `Up` server and no replica of the region
//!    (`Isolation`);
//! 6. region counts of `Up` servers too far apart ([`Tolerance`]): a replica moves from a more
//!    loaded server to a less loaded one (`BalanceRegions`);
//! 7. once no count move is left, region sizes of `Up` servers too far apart (the sum of the
//!    `approximate_size` of the regions a server holds; [`Tolerance`], at least
//!    `min_size_gap`): a replica smaller than the difference moves from the larger server to
//!    the smaller, if counts stay as rule 6 wants them (`BalanceSize`);
//! 8. leader counts too far apart: leaderships move, along a chain of regions when the most
//!    led server shares no region with the least led ones (`BalanceLeaders`).
//!
//! Regions whose leader is unknown, not among their replicas or not registered get no new
//! operator (their replicas still count for loads and down clocks): nobody would carry a step
//! out, and Raft is electing a leader that will report the region.
//!
//! # Zones
//!
//! Zone isolation is in play when the registered `Up` servers span at least `max_replicas`
//! zones. Then no region gets two replicas (voters or learners, the one being replaced aside)
//! in one zone. Servers without a zone label form one anonymous zone (a zone key `""`): three
//! unlabelled servers are not three zones. When zones are not in play, a new replica still
//! prefers a zone the region has no replica in, and a balancing move never lowers the number
//! of zones a region spans.
//!
//! # Why balancing settles
//!
//! Loads count the routing table as every operator in flight will leave it (`to` +1, `from` −1).
//! A balancing move goes from a server with `a` units to one with `b` units only when
//! `a − b > gap`, with `gap ≥ 1` ([`Tolerance::allowed_gap`]); it lowers the sum of the squared
//! loads by `2(a − b) − 2 > 0`. That sum is a non-negative integer, so balancing stops, and a
//! move never swaps two servers one apart back and forth.
//!
//! Size moves (rule 7) change counts, and count moves change sizes, so neither sum alone falls
//! with every move of both rules. What does is the pair (count excess, sum of the squared
//! sizes), compared in that order. The count excess is `E = Σ max(0, |a − b| − gap)` over the
//! pairs of `Up` servers, `a` and `b` their region counts (a move between `Up` servers keeps
//! the total, so `gap` stays). A count move lowers `E`: its own pair's excess falls, and for
//! every third server, its distances to the two ends move toward each other, which a convex
//! function of the distance does not raise. A size move leaves `E` no higher: afterwards its
//! target is at most `gap` above every `Up` server, its source at most `gap` below every one,
//! and the two within `gap` of each other, so no pair of counts it touches ends further apart
//! than `gap` unless it was and came closer. And it lowers the squared sizes by `2s(d − s) > 0`
//! (a region of `s` bytes, `0 < s < d`, between servers `d` bytes apart). So the two rules
//! never undo each other for ever, and a giant region that would only carry the gap over to
//! the other side never moves. The repairs (1–5) are finite too:
//! nothing is ever moved onto a gone or draining server, or into a zone the region already
//! has, so each repair removes a problem no later move recreates. Moving a region's leader
//! replica perturbs leader counts, but region moves are finite, and leader balancing then
//! settles by the same argument (a chain of transfers `s → u → t` leaves `u` even: one unit
//! from `s` to `t`). At rest, any two `Up` servers that a move could even out (servers of one
//! zone always can) are at most `max(1, mean × percent / 100)` apart in regions, and a server
//! leads at most that many more regions than any server it can reach through a chain. Two
//! servers more than `max(min_size_gap, mean × percent / 100)` bytes apart are left so only
//! when no region smaller than their difference can move between them within the count gap.
//!
//! # Limits and timeouts
//!
//! At most `max_moves_per_store` operators touch one registered server at a time (as source or
//! target; a gone server does no work and has no limit, so its replicas are replaced as fast as
//! the targets allow), and at most `max_moves_per_store × registered servers` are in flight. An
//! operator older than `operator_timeout` is dropped; if it had added a learner that was never
//! promoted, it becomes a `RemoveReplica` of that learner (same reason, a fresh clock), so a
//! stuck move leaves nothing behind. Learners no operator knows of are removed unless the
//! region's placement rule wants them (rule 4).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use types::Zone;
use wire::pd::{OperatorInfo, OperatorReason, PlacementRule, RegionStep, StepKind, StoreState};
use wire::region::{Peer, Region};

/// How far apart two `Up` servers' counts (of regions, or of leaders) or region sizes may be
/// before a balancer evens them out.
///
/// A gap proportional to the mean keeps a large cluster from moving replicas over differences
/// nobody notices; the floor of one unit keeps a small one from swapping a replica between two
/// servers one apart for ever (for sizes, the floor is `min_size_gap` bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tolerance {
    /// The gap left alone, in percent of the mean count per server.
    pub percent_of_mean: u32,
}

impl Tolerance {
    /// The largest difference left alone when `total` units are spread over `stores` servers:
    /// `max(1, total × percent / (100 × stores))`.
    pub fn allowed_gap(self, total: usize, stores: usize) -> usize {
        let stores = u128::try_from(stores.max(1)).unwrap_or(u128::MAX);
        let total = u128::try_from(total).unwrap_or(u128::MAX);
        let gap = total.saturating_mul(u128::from(self.percent_of_mean)) / (100 * stores);
        usize::try_from(gap).unwrap_or(usize::MAX).max(1)
    }

    /// The largest difference in bytes left alone when `total` bytes are spread over `stores`
    /// servers: `max(floor, total × percent / (100 × stores))`.
    pub fn allowed_size_gap(self, total: u128, stores: usize, floor: u64) -> u64 {
        let stores = u128::try_from(stores.max(1)).unwrap_or(u128::MAX);
        let gap = total.saturating_mul(u128::from(self.percent_of_mean)) / (100 * stores);
        u64::try_from(gap).unwrap_or(u64::MAX).max(floor)
    }
}

/// The scheduling knobs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchedulerConfig {
    /// Voters every region should have (at least 1).
    pub max_replicas: usize,
    /// How long a server may be gone before its replicas are rebuilt elsewhere: shorter heals
    /// sooner, longer spares a full copy when a server only restarts.
    pub max_store_down_time: Duration,
    /// Operators touching one server at once (as source or target, at least 1): each added
    /// replica is a snapshot the target receives, so this bounds the extra load of scheduling.
    pub max_moves_per_store: usize,
    /// An operator older than this is given up (a learner it added is then removed).
    pub operator_timeout: Duration,
    /// When region counts are uneven enough to move replicas.
    pub region_tolerance: Tolerance,
    /// When leader counts are uneven enough to move leaderships.
    pub leader_tolerance: Tolerance,
    /// When region sizes (bytes of the regions a server holds a replica of) are uneven enough
    /// to move replicas, once counts are even.
    pub size_tolerance: Tolerance,
    /// The floor of the size gap `size_tolerance` allows, in bytes: two servers closer than
    /// this are never balanced by size, however small the mean. A region's size is an
    /// estimate that a flush or a compaction shifts by up to a memtable (64 MiB by default),
    /// and a move costs a snapshot of the whole region, so a small cluster should not trade
    /// replicas over its noise. Named for what it bounds: the size gap is never below it, as
    /// the count gap is never below one region.
    pub min_size_gap: u64,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            max_replicas: 3,
            max_store_down_time: Duration::from_secs(30 * 60),
            max_moves_per_store: 2,
            operator_timeout: Duration::from_secs(60),
            region_tolerance: Tolerance {
                percent_of_mean: 10,
            },
            leader_tolerance: Tolerance {
                percent_of_mean: 10,
            },
            size_tolerance: Tolerance {
                percent_of_mean: 10,
            },
            min_size_gap: DEFAULT_MIN_SIZE_GAP,
        }
    }
}

/// `SchedulerConfig::min_size_gap` by default: 64 MiB, one memtable.
pub const DEFAULT_MIN_SIZE_GAP: u64 = 64 << 20;

/// A registered (alive) server, as the placement driver's registry knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreView {
    pub id: u64,
    pub url: String,
    pub zone: Option<Zone>,
    pub state: StoreState,
    /// Regions the server still holds a replica of that the routing table does not list
    /// (removed while it was down, not dropped yet: `crate::stale_replicas`). It receives no
    /// new replica of those until it dropped the old one: Raft ids are store ids, and the old
    /// replica would take the new one's place, then apply its own old removal.
    pub stale: BTreeSet<u64>,
}

/// What an operator does to its region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OperatorKind {
    MoveReplica {
        from: u64,
        to: u64,
    },
    AddReplica {
        to: u64,
    },
    /// A learner a placement rule wants: added, never promoted.
    AddLearner {
        to: u64,
    },
    RemoveReplica {
        from: u64,
    },
    TransferLeader {
        from: u64,
        to: u64,
    },
}

impl OperatorKind {
    /// The server losing a replica or the leadership.
    fn losing(self) -> Option<u64> {
        match self {
            OperatorKind::MoveReplica { from, .. }
            | OperatorKind::RemoveReplica { from }
            | OperatorKind::TransferLeader { from, .. } => Some(from),
            OperatorKind::AddReplica { .. } | OperatorKind::AddLearner { .. } => None,
        }
    }

    /// The server gaining a replica or the leadership.
    fn gaining(self) -> Option<u64> {
        match self {
            OperatorKind::MoveReplica { to, .. }
            | OperatorKind::AddReplica { to }
            | OperatorKind::AddLearner { to }
            | OperatorKind::TransferLeader { to, .. } => Some(to),
            OperatorKind::RemoveReplica { .. } => None,
        }
    }
}

/// One region's operator in flight.
#[derive(Clone, Debug)]
struct Operator {
    kind: OperatorKind,
    reason: OperatorReason,
    started: Instant,
    /// The fewest voters on registered servers a removal may leave: as many as the region had
    /// when the operator started, at most `max_replicas`.
    keep_live_voters: usize,
    /// The replica it gains was not there when it started: on a timeout, a learner it added
    /// is removed, never one it only meant to promote (a placement rule's).
    adds_replica: bool,
    /// The step the operator waits for, as the last round derived it.
    waiting: StepKind,
    /// That step with the leader to hand it to, when it can be taken now.
    ready: Option<(u64, RegionStep)>,
}

/// Where an operator stands against its region's current replicas.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Progress {
    /// The goal holds.
    Done,
    /// The goal can no longer be reached (its target is gone or draining, or the region moved
    /// on without it).
    Stale,
    /// The next step: `ready` when it can be asked now (a learner caught up, a leader target
    /// exists, a removal is safe).
    Next {
        kind: StepKind,
        store: u64,
        ready: bool,
    },
}

/// The registered servers of one round.
struct Cluster<'a> {
    stores: BTreeMap<u64, &'a StoreView>,
    /// The `Up` servers span at least `max_replicas` zones: no region gets two replicas in one.
    zones_in_play: bool,
    /// The placement rules ([`Cluster::placement`]).
    rules: &'a [PlacementRule],
    max_replicas: usize,
}

impl<'a> Cluster<'a> {
    fn new(
        stores: &'a [StoreView],
        max_replicas: usize,
        rules: &'a [PlacementRule],
    ) -> Cluster<'a> {
        let stores: BTreeMap<u64, &StoreView> = stores.iter().map(|s| (s.id, s)).collect();
        let zones: BTreeSet<&str> = stores
            .values()
            .filter(|s| s.state == StoreState::Up)
            .map(|s| types::zone::label(s.zone.as_ref()))
            .collect();
        Cluster {
            stores,
            zones_in_play: zones.len() >= max_replicas,
            rules,
            max_replicas,
        }
    }

    /// The rule `region` follows: of the rules overlapping it, the one starting last, then
    /// ending first (so a table's rule wins over the whole-cluster one it lies in), then the
    /// smallest id.
    fn placement(&self, region: &Region) -> Option<&'a PlacementRule> {
        // An empty end is unbounded: it sorts after every bounded one.
        let end_key = |r: &'a PlacementRule| (r.end.is_empty(), r.end.as_slice());
        self.rules
            .iter()
            .filter(|r| r.overlaps(&region.start, &region.end))
            .min_by(|a, b| {
                b.start
                    .cmp(&a.start)
                    .then_with(|| end_key(a).cmp(&end_key(b)))
                    .then_with(|| a.id.cmp(&b.id))
            })
    }

    /// The voters `region` should have: `max_replicas`, or as many as its rule lists zones when
    /// fewer (one replica per listed zone). Counted from the rule, not from where servers are
    /// now: a zone whose server restarts must not cost its voter, and a listed zone nobody is
    /// in only goes without its replica (the placement driver refuses a rule naming a zone no
    /// registered server is in).
    fn max_voters(&self, region: &Region) -> usize {
        self.placement(region)
            .map_or(self.max_replicas, |r| r.zones.len().min(self.max_replicas))
            .max(1)
    }

    /// Whether `region` may have a replica in the zone keyed `zone`: every zone when no rule
    /// covers it, the rule's zones otherwise.
    fn zone_allowed(&self, region: &Region, zone: &str) -> bool {
        rule_allows(self.placement(region), zone)
    }

    /// Whether `region` may have at most one replica per zone: zones are in play, or a rule
    /// covers it.
    fn one_per_zone(&self, region: &Region) -> bool {
        self.zones_in_play || self.placement(region).is_some()
    }

    fn is_registered(&self, store: u64) -> bool {
        self.stores.contains_key(&store)
    }

    fn is_up(&self, store: u64) -> bool {
        self.stores
            .get(&store)
            .is_some_and(|s| s.state == StoreState::Up)
    }

    fn is_draining(&self, store: u64) -> bool {
        self.stores
            .get(&store)
            .is_some_and(|s| s.state == StoreState::Draining)
    }

    /// Whether `store` still holds an old replica of `region` (`StoreView::stale`).
    fn holds_stale(&self, store: u64, region: u64) -> bool {
        self.stores
            .get(&store)
            .is_some_and(|s| s.stale.contains(&region))
    }

    fn up(&self) -> impl Iterator<Item = &'a StoreView> + '_ {
        self.stores
            .values()
            .copied()
            .filter(|s| s.state == StoreState::Up)
    }

    fn url(&self, store: u64) -> String {
        self.stores
            .get(&store)
            .map(|s| s.url.clone())
            .unwrap_or_default()
    }

    /// A registered server's zone key (`""`: the anonymous zone).
    fn store_zone(&self, store: u64) -> &'a str {
        self.stores
            .get(&store)
            .map_or("", |s| types::zone::label(s.zone.as_ref()))
    }

    /// A replica's zone key: its server's registered zone, or (for a gone server) the label
    /// the replica was reported with.
    fn zone<'p>(&self, peer: &'p Peer) -> &'p str
    where
        'a: 'p,
    {
        match self.stores.get(&peer.store_id) {
            Some(s) => types::zone::label(s.zone.as_ref()),
            None => peer.zone.as_str(),
        }
    }

    /// Whether `region` may get a new operator: its replicas are well formed (distinct,
    /// non-zero servers) and its leader is a voter on a registered server.
    fn schedulable(&self, region: &Region) -> bool {
        let mut seen = BTreeSet::new();
        let distinct = region
            .peers
            .iter()
            .all(|p| p.store_id != 0 && seen.insert(p.store_id));
        distinct && self.leader_ok(region)
    }

    /// The region's leader is known, a voter, and on a registered server (so its steps reach
    /// someone).
    fn leader_ok(&self, region: &Region) -> bool {
        region
            .leader()
            .is_some_and(|l| !l.is_learner() && self.is_registered(l.store_id))
    }
}

/// Whether `rule` (none: no rule) lets its regions have a replica in the zone keyed `zone`.
fn rule_allows(rule: Option<&PlacementRule>, zone: &str) -> bool {
    rule.is_none_or(|r| r.zones.iter().any(|z| z == zone))
}

fn peer_on(region: &Region, store: u64) -> Option<&Peer> {
    region.peers.iter().find(|p| p.store_id == store)
}

fn holds(region: &Region, store: u64) -> bool {
    peer_on(region, store).is_some()
}

fn voters(region: &Region) -> impl Iterator<Item = &Peer> {
    region.peers.iter().filter(|p| !p.is_learner())
}

fn live_voters(region: &Region, cluster: &Cluster<'_>) -> usize {
    voters(region)
        .filter(|p| cluster.is_registered(p.store_id))
        .count()
}

fn count(map: &HashMap<u64, usize>, store: u64) -> usize {
    map.get(&store).copied().unwrap_or(0)
}

fn bump(map: &mut HashMap<u64, usize>, store: u64, up: bool) {
    let n = map.entry(store).or_insert(0);
    *n = if up {
        n.saturating_add(1)
    } else {
        n.saturating_sub(1)
    };
}

/// The voter to hand the leadership to when `away_from` must lose it: caught up, on an `Up`
/// server, leading the fewest regions (ties: lowest id).
fn leader_target(
    region: &Region,
    away_from: u64,
    cluster: &Cluster<'_>,
    leaders: &HashMap<u64, usize>,
) -> Option<u64> {
    voters(region)
        .filter(|p| p.store_id != away_from && !p.pending && cluster.is_up(p.store_id))
        .min_by_key(|p| (count(leaders, p.store_id), p.store_id))
        .map(|p| p.store_id)
}

/// A learner of `region` a voter may be made of instead of adding a new replica: caught up (a
/// pending one could hold the repair up for the operator's whole timeout), on an `Up` server,
/// in a zone the region's rule allows, with no voter but `instead_of` in its zone; the lowest
/// id.
fn promotable_learner(
    region: &Region,
    instead_of: Option<u64>,
    cluster: &Cluster<'_>,
) -> Option<u64> {
    region
        .peers
        .iter()
        .filter(|p| p.is_learner() && !p.pending && cluster.is_up(p.store_id))
        .filter(|p| cluster.zone_allowed(region, cluster.zone(p)))
        .filter(|p| {
            !voters(region)
                .any(|v| Some(v.store_id) != instead_of && cluster.zone(v) == cluster.zone(p))
        })
        .min_by_key(|p| p.store_id)
        .map(|p| p.store_id)
}

/// Whether moving one replica from `from` to `to` keeps the region counts of the `Up` servers
/// `up` as rule 6 wants them: afterwards `to` is at most `gap` above every server, `from` at
/// most `gap` below every one, and the two within `gap` of each other.
///
/// So no pair of counts the move touches ends more than `gap` apart unless it already was and
/// came closer: rule 6 finds nothing new to undo, and the count excess that its own moves
/// lower never rises (the module's "Why balancing settles"). Only the two ends are checked,
/// not every pair: a pair the move does not touch may stay as uneven as rule 6 could not help.
fn counts_allow(up: &[u64], loads: &Loads, from: u64, to: u64, gap: usize) -> bool {
    let after = |store: u64| {
        let n = loads.regions(store);
        match store {
            s if s == from => n.saturating_sub(1),
            s if s == to => n.saturating_add(1),
            _ => n,
        }
    };
    let (from_after, to_after) = (after(from), after(to));
    let least = up.iter().map(|s| after(*s)).min().unwrap_or(to_after);
    let most = up.iter().map(|s| after(*s)).max().unwrap_or(from_after);
    to_after <= least.saturating_add(gap)
        && most <= from_after.saturating_add(gap)
        && from_after <= to_after.saturating_add(gap)
}

fn to_u64(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// The step `kind` waits for in `region` as it is now.
fn progress(
    kind: OperatorKind,
    keep_live_voters: usize,
    region: &Region,
    cluster: &Cluster<'_>,
    leaders: &HashMap<u64, usize>,
) -> Progress {
    // Until `to` is a voter: add it, then promote it once caught up (never onto a server that
    // is gone or draining).
    let grow = |to: u64| -> Option<Progress> {
        let next = |kind, ready| Progress::Next {
            kind,
            store: to,
            ready,
        };
        match peer_on(region, to) {
            Some(p) if !p.is_learner() => None,
            _ if !cluster.is_up(to) => Some(Progress::Stale),
            None => Some(next(StepKind::AddLearner, true)),
            Some(p) => Some(next(StepKind::PromoteLearner, !p.pending)),
        }
    };
    // Until `from` is gone: move the leadership off it, then remove it when that is safe.
    let shrink = |from: u64| -> Progress {
        let Some(peer) = peer_on(region, from) else {
            return Progress::Done;
        };
        if region.leader_store_id == from {
            let to = leader_target(region, from, cluster, leaders);
            return Progress::Next {
                kind: StepKind::TransferLeader,
                store: to.unwrap_or(0),
                ready: to.is_some(),
            };
        }
        let left = live_voters(region, cluster)
            - usize::from(!peer.is_learner() && cluster.is_registered(from));
        Progress::Next {
            kind: StepKind::RemovePeer,
            store: from,
            ready: peer.is_learner() || left >= keep_live_voters,
        }
    };
    match kind {
        OperatorKind::TransferLeader { to, .. } => match peer_on(region, to) {
            _ if region.leader_store_id == to => Progress::Done,
            Some(p) if !p.is_learner() && cluster.is_up(to) => Progress::Next {
                kind: StepKind::TransferLeader,
                store: to,
                ready: !p.pending,
            },
            _ => Progress::Stale,
        },
        OperatorKind::AddReplica { to } => grow(to).unwrap_or(Progress::Done),
        OperatorKind::AddLearner { to } => match peer_on(region, to) {
            Some(_) => Progress::Done,
            None if !cluster.is_up(to) => Progress::Stale,
            None => Progress::Next {
                kind: StepKind::AddLearner,
                store: to,
                ready: true,
            },
        },
        OperatorKind::RemoveReplica { from } => shrink(from),
        OperatorKind::MoveReplica { from, to } => {
            if !holds(region, to) && !holds(region, from) {
                return Progress::Stale;
            }
            grow(to).unwrap_or_else(|| shrink(from))
        }
    }
}

/// Loads of one round: the routing table as the operators in flight will leave it.
#[derive(Debug, Default)]
struct Loads {
    /// Replicas (voters and learners) per server.
    regions: HashMap<u64, usize>,
    /// Bytes of those replicas per server (each at its region's `approximate_size`, as its
    /// leader last reported it): what a replica's disk holds, learners included.
    sizes: HashMap<u64, u64>,
    /// Leaderships per server.
    leaders: HashMap<u64, usize>,
    /// Operators touching each registered server.
    busy: HashMap<u64, usize>,
    operators: usize,
}

impl Loads {
    fn of(
        table: &BTreeMap<u64, &Region>,
        operators: &BTreeMap<u64, Operator>,
        cluster: &Cluster<'_>,
    ) -> Loads {
        let mut loads = Loads {
            leaders: table_leaders(table),
            ..Loads::default()
        };
        for region in table.values() {
            for p in &region.peers {
                loads.gain(p.store_id, region);
            }
        }
        for (id, op) in operators {
            if let Some(region) = table.get(id) {
                loads.add(op.kind, region, cluster);
            }
        }
        loads
    }

    /// Counts what `kind` will have changed once done.
    fn add(&mut self, kind: OperatorKind, region: &Region, cluster: &Cluster<'_>) {
        match kind {
            OperatorKind::MoveReplica { from, to } => {
                if !holds(region, to) {
                    self.gain(to, region);
                }
                if holds(region, from) {
                    self.lose(from, region);
                }
            }
            OperatorKind::AddReplica { to } | OperatorKind::AddLearner { to } => {
                if !holds(region, to) {
                    self.gain(to, region);
                }
            }
            OperatorKind::RemoveReplica { from } => {
                if holds(region, from) {
                    self.lose(from, region);
                }
            }
            OperatorKind::TransferLeader { to, .. } => {
                if region.leader_store_id != to {
                    bump(&mut self.leaders, region.leader_store_id, false);
                    bump(&mut self.leaders, to, true);
                }
            }
        }
        for store in [kind.losing(), kind.gaining()].into_iter().flatten() {
            if cluster.is_registered(store) {
                bump(&mut self.busy, store, true);
            }
        }
        self.operators += 1;
    }

    /// One more replica of `region` on `store`.
    fn gain(&mut self, store: u64, region: &Region) {
        bump(&mut self.regions, store, true);
        let size = self.sizes.entry(store).or_insert(0);
        *size = size.saturating_add(region.approximate_size);
    }

    /// One replica of `region` fewer on `store`.
    fn lose(&mut self, store: u64, region: &Region) {
        bump(&mut self.regions, store, false);
        let size = self.sizes.entry(store).or_insert(0);
        *size = size.saturating_sub(region.approximate_size);
    }

    fn regions(&self, store: u64) -> usize {
        count(&self.regions, store)
    }

    /// `regions(store)` in the unit of sizes, to rank servers either way.
    fn region_count(&self, store: u64) -> u64 {
        to_u64(self.regions(store))
    }

    fn size(&self, store: u64) -> u64 {
        self.sizes.get(&store).copied().unwrap_or(0)
    }

    fn leaders(&self, store: u64) -> usize {
        count(&self.leaders, store)
    }
}

fn table_leaders(table: &BTreeMap<u64, &Region>) -> HashMap<u64, usize> {
    let mut leaders = HashMap::new();
    for region in table.values() {
        if let Some(l) = region.leader() {
            bump(&mut leaders, l.store_id, true);
        }
    }
    leaders
}

/// The repair rules (priorities 1–5), in priority order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Rule {
    ReplaceDown,
    Drain,
    ReplicaCount,
    Placement,
    Isolation,
}

/// What a region needs, before a target is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Want {
    Move {
        from: u64,
    },
    Add,
    /// A learner in a zone the region's rule lists and it has no replica in.
    AddLearner,
    Remove {
        from: u64,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Repair {
    rule: Rule,
    reason: OperatorReason,
    want: Want,
}

/// The replica scheduler of one placement-driver leadership.
#[derive(Debug)]
pub struct Scheduler {
    config: SchedulerConfig,
    /// At most one per region.
    operators: BTreeMap<u64, Operator>,
    /// Servers named by a replica but not registered, since the round that first noticed.
    down_since: HashMap<u64, Instant>,
    /// The placement rules the rounds plan by ([`Scheduler::set_rules`]).
    rules: Vec<PlacementRule>,
}

impl Scheduler {
    /// A scheduler with nothing in flight. `max_replicas` and `max_moves_per_store` below 1
    /// are taken as 1.
    pub fn new(mut config: SchedulerConfig) -> Scheduler {
        config.max_replicas = config.max_replicas.max(1);
        config.max_moves_per_store = config.max_moves_per_store.max(1);
        Scheduler {
            config,
            operators: BTreeMap::new(),
            down_since: HashMap::new(),
            rules: Vec::new(),
        }
    }

    /// The placement rules the next rounds plan by (read from the metadata store each round).
    pub fn set_rules(&mut self, rules: Vec<PlacementRule>) {
        self.rules = rules;
    }

    pub fn config(&self) -> &SchedulerConfig {
        &self.config
    }

    /// A new leadership: forget operators and down clocks (they are rebuilt from the table).
    pub fn reset(&mut self) {
        self.operators.clear();
        self.down_since.clear();
    }

    /// One scheduling round over the routing table `regions` and the registered `stores`:
    /// advances or finishes operators whose region moved on, drops timed-out ones, and creates
    /// new ones.
    pub fn schedule(&mut self, now: Instant, stores: &[StoreView], regions: &[Region]) {
        let rules = std::mem::take(&mut self.rules);
        let cluster = Cluster::new(stores, self.config.max_replicas, &rules);
        let table: BTreeMap<u64, &Region> = regions.iter().map(|r| (r.id, r)).collect();
        self.track_down_stores(now, &cluster, &table);
        self.advance(now, &cluster, &table);
        let mut loads = Loads::of(&table, &self.operators, &cluster);
        let needy = self.repair(now, &cluster, &table, &mut loads);
        self.balance_regions(now, &cluster, &table, &mut loads, &needy);
        self.balance_sizes(now, &cluster, &table, &mut loads, &needy);
        self.balance_leaders(now, &cluster, &table, &mut loads, &needy);
        self.rules = rules;
    }

    /// The step each operator waits for, for the regions `leader_store` leads (as the last
    /// `schedule` saw the table): what the placement driver answers to that server's heartbeat.
    pub fn steps_for(&self, leader_store: u64) -> Vec<RegionStep> {
        self.operators
            .values()
            .filter_map(|op| op.ready.as_ref())
            .filter(|(leader, _)| *leader == leader_store)
            .map(|(_, step)| step.clone())
            .collect()
    }

    /// The operators in flight, by region id.
    pub fn operators(&self, now: Instant) -> Vec<OperatorInfo> {
        self.operators
            .iter()
            .map(|(id, op)| {
                let age = now.saturating_duration_since(op.started).as_millis();
                let mut info = OperatorInfo {
                    region_id: *id,
                    from_store: op.kind.losing().unwrap_or(0),
                    to_store: op.kind.gaining().unwrap_or(0),
                    age_ms: u64::try_from(age).unwrap_or(u64::MAX),
                    ..OperatorInfo::default()
                };
                info.set_reason(op.reason);
                info.set_step(op.waiting);
                info
            })
            .collect()
    }

    /// Starts the down clock of every server a replica names that is not registered, and
    /// forgets the clocks of servers registered again or named by no replica any more.
    fn track_down_stores(
        &mut self,
        now: Instant,
        cluster: &Cluster<'_>,
        table: &BTreeMap<u64, &Region>,
    ) {
        let named: BTreeSet<u64> = table
            .values()
            .flat_map(|r| r.peers.iter().map(|p| p.store_id))
            .filter(|s| !cluster.is_registered(*s))
            .collect();
        self.down_since.retain(|s, _| named.contains(s));
        for store in named {
            self.down_since.entry(store).or_insert(now);
        }
    }

    fn down_for_good(&self, store: u64, now: Instant) -> bool {
        self.down_since.get(&store).is_some_and(|since| {
            now.saturating_duration_since(*since) >= self.config.max_store_down_time
        })
    }

    /// Re-derives every operator's step from its region; drops the done, the stale and the
    /// timed out (a timed-out operator that left an unpromoted learner removes it instead).
    fn advance(&mut self, now: Instant, cluster: &Cluster<'_>, table: &BTreeMap<u64, &Region>) {
        let leaders = table_leaders(table);
        let timeout = self.config.operator_timeout;
        self.operators.retain(|id, op| {
            let Some(region) = table.get(id) else {
                return false;
            };
            let next = progress(op.kind, op.keep_live_voters, region, cluster, &leaders);
            if matches!(next, Progress::Done | Progress::Stale) {
                return false;
            }
            if now.saturating_duration_since(op.started) < timeout {
                return op.observe(region, next, cluster);
            }
            let learner = op
                .kind
                .gaining()
                .filter(|_| op.adds_replica)
                .filter(|to| peer_on(region, *to).is_some_and(Peer::is_learner));
            let Some(learner) = learner else {
                return false;
            };
            op.kind = OperatorKind::RemoveReplica { from: learner };
            op.started = now;
            let next = progress(op.kind, op.keep_live_voters, region, cluster, &leaders);
            op.observe(region, next, cluster)
        });
    }

    /// Rules 1–5: every region with a problem, worst problems first. Returns the regions that
    /// have one, started or not (they are not balanced).
    fn repair(
        &mut self,
        now: Instant,
        cluster: &Cluster<'_>,
        table: &BTreeMap<u64, &Region>,
        loads: &mut Loads,
    ) -> BTreeSet<u64> {
        let mut wants: Vec<(&Region, Repair)> = table
            .values()
            .filter(|r| !self.operators.contains_key(&r.id) && cluster.schedulable(r))
            .filter_map(|r| self.diagnose(now, r, cluster, loads).map(|w| (*r, w)))
            .collect();
        wants.sort_by_key(|(r, w)| (w.rule, r.id));
        let needy = wants.iter().map(|(r, _)| r.id).collect();
        for (region, repair) in wants {
            let kind = match repair.want {
                Want::Move { from } => promotable_learner(region, Some(from), cluster)
                    .filter(|to| self.has_room(*to, cluster, loads))
                    .or_else(|| self.target(region, Some(from), cluster, loads))
                    .filter(|_| self.has_room(from, cluster, loads))
                    .map(|to| OperatorKind::MoveReplica { from, to })
                    .or_else(|| {
                        // A draining leader whose replica must wait still hands its
                        // leadership away.
                        let draining_leader =
                            repair.rule == Rule::Drain && region.leader_store_id == from;
                        draining_leader
                            .then(|| leader_target(region, from, cluster, &loads.leaders))
                            .flatten()
                            .filter(|to| self.has_room(*to, cluster, loads))
                            .filter(|_| self.has_room(from, cluster, loads))
                            .map(|to| OperatorKind::TransferLeader { from, to })
                    }),
                Want::Add => promotable_learner(region, None, cluster)
                    .filter(|to| self.has_room(*to, cluster, loads))
                    .or_else(|| self.target(region, None, cluster, loads))
                    .map(|to| OperatorKind::AddReplica { to }),
                Want::AddLearner => self
                    .learner_target(region, cluster, loads)
                    .map(|to| OperatorKind::AddLearner { to }),
                Want::Remove { from } => self
                    .has_room(from, cluster, loads)
                    .then_some(OperatorKind::RemoveReplica { from }),
            };
            if let Some(kind) = kind {
                self.start(now, region, kind, repair.reason, cluster, loads);
            }
        }
        needy
    }

    /// The worst problem of `region` (rules 1–5), if any.
    fn diagnose(
        &self,
        now: Instant,
        region: &Region,
        cluster: &Cluster<'_>,
        loads: &Loads,
    ) -> Option<Repair> {
        let max = cluster.max_voters(region);
        let voter_count = voters(region).count();
        // A replica on a gone or draining server leaves: a learner or an extra voter is only
        // removed, a needed voter is replaced.
        let leave = |rule, reason, peer: &Peer| Repair {
            rule,
            reason,
            want: if peer.is_learner() || voter_count > max {
                Want::Remove {
                    from: peer.store_id,
                }
            } else {
                Want::Move {
                    from: peer.store_id,
                }
            },
        };
        if let Some(p) = region
            .peers
            .iter()
            .find(|p| self.down_for_good(p.store_id, now))
        {
            return Some(leave(Rule::ReplaceDown, OperatorReason::ReplaceDown, p));
        }
        if let Some(p) = region
            .peers
            .iter()
            .find(|p| cluster.is_draining(p.store_id))
        {
            return Some(leave(Rule::Drain, OperatorReason::Drain, p));
        }
        let zone_shared = |peer: &Peer| {
            region
                .peers
                .iter()
                .any(|q| q.store_id != peer.store_id && cluster.zone(q) == cluster.zone(peer))
        };
        if voter_count < max {
            return Some(Repair {
                rule: Rule::ReplicaCount,
                reason: OperatorReason::AddMissing,
                want: Want::Add,
            });
        }
        if voter_count > max {
            // The extra voter: on a gone server, a draining one, sharing a zone, the most
            // loaded; the leader last.
            let extra = voters(region).min_by_key(|p| {
                (
                    cluster.is_registered(p.store_id),
                    cluster.is_up(p.store_id),
                    cluster.zone_allowed(region, cluster.zone(p)),
                    !zone_shared(p),
                    p.store_id == region.leader_store_id,
                    Reverse(loads.regions(p.store_id)),
                    Reverse(p.store_id),
                )
            })?;
            let reason = if !cluster.is_registered(extra.store_id) {
                OperatorReason::ReplaceDown
            } else if !cluster.is_up(extra.store_id) {
                OperatorReason::Drain
            } else if !cluster.zone_allowed(region, cluster.zone(extra)) {
                OperatorReason::Placement
            } else if zone_shared(extra) {
                OperatorReason::Isolation
            } else {
                OperatorReason::BalanceRegions
            };
            return Some(Repair {
                rule: Rule::ReplicaCount,
                reason,
                want: Want::Remove {
                    from: extra.store_id,
                },
            });
        }
        if let Some(repair) = Self::placement_problem(region, cluster) {
            return Some(repair);
        }
        if cluster.zones_in_play {
            let free_zone = cluster.up().any(|s| {
                let zone = types::zone::label(s.zone.as_ref());
                region.peers.iter().all(|p| cluster.zone(p) != zone)
            });
            let doubled = voters(region)
                .filter(|p| {
                    voters(region)
                        .any(|q| q.store_id != p.store_id && cluster.zone(q) == cluster.zone(p))
                })
                .min_by_key(|p| {
                    (
                        p.store_id == region.leader_store_id,
                        Reverse(loads.regions(p.store_id)),
                        Reverse(p.store_id),
                    )
                });
            if let (true, Some(from)) = (free_zone, doubled) {
                return Some(Repair {
                    rule: Rule::Isolation,
                    reason: OperatorReason::Isolation,
                    want: Want::Move {
                        from: from.store_id,
                    },
                });
            }
        }
        None
    }

    /// What the region's placement rule (or, without one, "no learners") asks of a region
    /// whose voter count is right: a replica in a zone the rule does not list leaves (a learner
    /// is removed, a voter moves); a learner sharing its zone with another replica, or any
    /// learner without a rule, is removed; of two voters in one zone, one moves; a listed zone
    /// without a replica gets a learner.
    /// Learners of an operator in flight are never seen here (a region with an operator is not
    /// diagnosed).
    fn placement_problem(region: &Region, cluster: &Cluster<'_>) -> Option<Repair> {
        let repair = |want| Repair {
            rule: Rule::Placement,
            reason: OperatorReason::Placement,
            want,
        };
        let Some(rule) = cluster.placement(region) else {
            return region
                .peers
                .iter()
                .find(|p| p.is_learner())
                .map(|p| repair(Want::Remove { from: p.store_id }));
        };
        let outside = |p: &&Peer| !cluster.zone_allowed(region, cluster.zone(p));
        if let Some(p) = region.peers.iter().find(|p| p.is_learner() && outside(p)) {
            return Some(repair(Want::Remove { from: p.store_id }));
        }
        if let Some(p) = region.peers.iter().find(outside) {
            return Some(repair(Want::Move { from: p.store_id }));
        }
        let doubled_learner = region.peers.iter().find(|p| {
            p.is_learner()
                && region
                    .peers
                    .iter()
                    .any(|q| q.store_id != p.store_id && cluster.zone(q) == cluster.zone(p))
        });
        if let Some(p) = doubled_learner {
            return Some(repair(Want::Remove { from: p.store_id }));
        }
        // Two voters in one zone: one moves (onto a listed zone's learner when there is one);
        // a follower rather than the leader.
        let doubled_voter = voters(region)
            .filter(|p| {
                voters(region)
                    .any(|q| q.store_id != p.store_id && cluster.zone(q) == cluster.zone(p))
            })
            .min_by_key(|p| (p.store_id == region.leader_store_id, p.store_id));
        if let Some(p) = doubled_voter {
            return Some(repair(Want::Move { from: p.store_id }));
        }
        let missing = rule.zones.iter().any(|z| {
            !region.peers.iter().any(|p| cluster.zone(p) == z.as_str())
                && cluster.up().any(|s| cluster.store_zone(s.id) == z.as_str())
        });
        missing.then(|| repair(Want::AddLearner))
    }

    /// The server to receive a learner of `region` in a zone its rule lists and it has no
    /// replica in: `Up`, with room, no old replica of the region; the fewest replicas, then the
    /// lowest id.
    fn learner_target(&self, region: &Region, cluster: &Cluster<'_>, loads: &Loads) -> Option<u64> {
        let rule = cluster.placement(region)?;
        cluster
            .up()
            .filter(|s| {
                let zone = cluster.store_zone(s.id);
                rule.zones.iter().any(|z| z == zone)
                    && !region.peers.iter().any(|p| cluster.zone(p) == zone)
                    && !s.stale.contains(&region.id)
                    && self.has_room(s.id, cluster, loads)
            })
            .min_by_key(|s| (loads.regions(s.id), s.id))
            .map(|s| s.id)
    }

    /// Whether another operator may touch `store` (a server that is not registered does no
    /// work: no limit) and another may start at all.
    fn has_room(&self, store: u64, cluster: &Cluster<'_>, loads: &Loads) -> bool {
        self.room_for(store, 1, cluster, loads)
    }

    /// Whether `n` more operators may touch `store`, and `n` more start at all.
    fn room_for(&self, store: u64, n: usize, cluster: &Cluster<'_>, loads: &Loads) -> bool {
        let limit = self.config.max_moves_per_store;
        let store_ok =
            !cluster.is_registered(store) || count(&loads.busy, store).saturating_add(n) <= limit;
        store_ok && self.total_room(n, cluster, loads)
    }

    /// Whether `n` more operators may be in flight at all.
    fn total_room(&self, n: usize, cluster: &Cluster<'_>, loads: &Loads) -> bool {
        let total = self
            .config
            .max_moves_per_store
            .saturating_mul(cluster.stores.len().max(1));
        loads.operators.saturating_add(n) <= total
    }

    /// The server to receive a new replica of `region` (replacing the one on `from`, if any):
    /// `Up`, without a replica of the region, with room; when zones are in play, in a zone
    /// with no other replica of the region. Prefers a zone the region is not in, then the
    /// fewest replicas, then the lowest id.
    fn target(
        &self,
        region: &Region,
        from: Option<u64>,
        cluster: &Cluster<'_>,
        loads: &Loads,
    ) -> Option<u64> {
        let others: Vec<&str> = region
            .peers
            .iter()
            .filter(|p| Some(p.store_id) != from)
            .map(|p| cluster.zone(p))
            .collect();
        // The region's rule once, not once per candidate server.
        let rule = cluster.placement(region);
        let one_per_zone = cluster.zones_in_play || rule.is_some();
        cluster
            .up()
            .filter(|s| {
                !holds(region, s.id)
                    && !s.stale.contains(&region.id)
                    && self.has_room(s.id, cluster, loads)
            })
            .filter(|s| rule_allows(rule, cluster.store_zone(s.id)))
            .map(|s| (others.contains(&cluster.store_zone(s.id)), s.id))
            .filter(|(shared, _)| !(one_per_zone && *shared))
            .min_by_key(|(shared, id)| (*shared, loads.regions(*id), *id))
            .map(|(_, id)| id)
    }

    /// A region a balancer may touch: no operator, no problem, a reachable leader, every
    /// replica registered and caught up.
    fn balanceable(&self, region: &Region, cluster: &Cluster<'_>, needy: &BTreeSet<u64>) -> bool {
        !self.operators.contains_key(&region.id)
            && !needy.contains(&region.id)
            && cluster.schedulable(region)
            && region
                .peers
                .iter()
                .all(|p| cluster.is_registered(p.store_id) && !p.pending)
    }

    /// Whether moving `region`'s replica from `from` to `to` keeps it placed as well: when
    /// zones are in play, `to`'s zone has no other replica; otherwise the region spans no
    /// fewer zones.
    fn zones_allow(region: &Region, from: u64, to: u64, cluster: &Cluster<'_>) -> bool {
        let others: BTreeSet<&str> = region
            .peers
            .iter()
            .filter(|p| p.store_id != from)
            .map(|p| cluster.zone(p))
            .collect();
        let to_zone = cluster.store_zone(to);
        if !cluster.zone_allowed(region, to_zone) {
            return false;
        }
        if cluster.one_per_zone(region) {
            return !others.contains(to_zone);
        }
        let before: BTreeSet<&str> = region.peers.iter().map(|p| cluster.zone(p)).collect();
        others.len() + usize::from(!others.contains(to_zone)) >= before.len()
    }

    /// The regions a balancing move may take off each server: per server, the balanceable
    /// regions with a voter there, followers first (a follower moves without a leader
    /// transfer), then by id.
    fn movable_replicas<'r>(
        &self,
        cluster: &Cluster<'_>,
        table: &BTreeMap<u64, &'r Region>,
        needy: &BTreeSet<u64>,
    ) -> HashMap<u64, Vec<&'r Region>> {
        let mut by_store: HashMap<u64, Vec<&Region>> = HashMap::new();
        for region in table.values() {
            if self.balanceable(region, cluster, needy) {
                for p in voters(region) {
                    by_store.entry(p.store_id).or_default().push(region);
                }
            }
        }
        for (store, regions) in by_store.iter_mut() {
            regions.sort_by_key(|r| (r.leader_store_id == *store, r.id));
        }
        by_store
    }

    /// Whether a balancer may move `region`'s replica from `from` to `to` now: no operator
    /// started on it this round, `to` holds no replica of it (nor an old one), and the region
    /// stays placed as well.
    fn may_move(&self, region: &Region, from: u64, to: u64, cluster: &Cluster<'_>) -> bool {
        !self.operators.contains_key(&region.id)
            && !holds(region, to)
            && !cluster.holds_stale(to, region.id)
            && Self::zones_allow(region, from, to, cluster)
    }

    /// Rule 6: while some pair of `Up` servers is more than the tolerated gap apart and a
    /// region can move between them, move one (most loaded source, least loaded target first).
    fn balance_regions(
        &mut self,
        now: Instant,
        cluster: &Cluster<'_>,
        table: &BTreeMap<u64, &Region>,
        loads: &mut Loads,
        needy: &BTreeSet<u64>,
    ) {
        let up: Vec<u64> = cluster.up().map(|s| s.id).collect();
        if up.len() < 2 {
            return;
        }
        let by_store = self.movable_replicas(cluster, table, needy);
        loop {
            let gap = self.count_gap(&up, loads);
            let chosen = self
                .uneven_pairs(&up, cluster, loads, Loads::region_count, to_u64(gap))
                .find_map(|(from, to)| {
                    by_store
                        .get(&from)?
                        .iter()
                        .find(|r| self.may_move(r, from, to, cluster))
                        .map(|r| (*r, from, to))
                });
            let Some((region, from, to)) = chosen else {
                return;
            };
            let kind = OperatorKind::MoveReplica { from, to };
            self.start(
                now,
                region,
                kind,
                OperatorReason::BalanceRegions,
                cluster,
                loads,
            );
        }
    }

    /// The region-count gap rule 6 leaves alone among the `Up` servers `up`.
    fn count_gap(&self, up: &[u64], loads: &Loads) -> usize {
        let total: usize = up.iter().map(|s| loads.regions(*s)).sum();
        self.config.region_tolerance.allowed_gap(total, up.len())
    }

    /// The size gap (bytes) rule 7 leaves alone among the `Up` servers `up`.
    fn size_gap(&self, up: &[u64], loads: &Loads) -> u64 {
        let total: u128 = up.iter().map(|s| u128::from(loads.size(*s))).sum();
        self.config
            .size_tolerance
            .allowed_size_gap(total, up.len(), self.config.min_size_gap)
    }

    /// Rule 7, once rule 6 found nothing to move: while some pair of `Up` servers' sizes are
    /// more than the tolerated size gap apart, move a replica from the larger to the smaller
    /// (largest source, smallest target first) when
    ///
    /// * it is smaller than their difference: the pair ends closer, so the sum of the squared
    ///   sizes falls and a region too big to even the pair (it would only carry the gap over to
    ///   the other side, and back) never moves;
    /// * counts stay as rule 6 wants them ([`counts_allow`]), so rule 6 never moves it back.
    ///
    /// Of the regions that qualify, the one evening the pair best (its size nearest half the
    /// difference), then a follower, then the lowest id. Evening comes before sparing a leader
    /// transfer: every size move spends some of the count gap, which bounds how many bytes a
    /// server can shed while counts stay even, and a leader transfer is cheap beside the
    /// snapshot that any move costs.
    fn balance_sizes(
        &mut self,
        now: Instant,
        cluster: &Cluster<'_>,
        table: &BTreeMap<u64, &Region>,
        loads: &mut Loads,
        needy: &BTreeSet<u64>,
    ) {
        let up: Vec<u64> = cluster.up().map(|s| s.id).collect();
        if up.len() < 2 {
            return;
        }
        let by_store = self.movable_replicas(cluster, table, needy);
        loop {
            let count_gap = self.count_gap(&up, loads);
            let size_gap = self.size_gap(&up, loads);
            let chosen = self
                .uneven_pairs(&up, cluster, loads, Loads::size, size_gap)
                .filter(|(from, to)| counts_allow(&up, loads, *from, *to, count_gap))
                .find_map(|(from, to)| {
                    let apart = loads.size(from).saturating_sub(loads.size(to));
                    by_store
                        .get(&from)?
                        .iter()
                        .filter(|r| (1..apart).contains(&r.approximate_size))
                        .filter(|r| self.may_move(r, from, to, cluster))
                        .min_by_key(|r| {
                            let uneven_after = apart.abs_diff(r.approximate_size.saturating_mul(2));
                            (uneven_after, r.leader_store_id == from, r.id)
                        })
                        .map(|r| (*r, from, to))
                });
            let Some((region, from, to)) = chosen else {
                return;
            };
            let kind = OperatorKind::MoveReplica { from, to };
            self.start(
                now,
                region,
                kind,
                OperatorReason::BalanceSize,
                cluster,
                loads,
            );
        }
    }

    /// Rule 8: while a server leads more than the tolerated gap above another it can reach,
    /// move leaderships along the shortest chain between them.
    ///
    /// A leadership moves only to a voter of the same region, so a server may have nobody
    /// below it to hand one to directly (every region it leads has its other replicas on
    /// servers leading about as many). A chain `s → u → … → t` (each hop a region the previous
    /// server leads with a caught-up voter on the next) leaves every server in between even
    /// and moves one leadership from `s` to `t`: the same decrease of the squared loads as a
    /// direct transfer, so it settles by the same argument.
    fn balance_leaders(
        &mut self,
        now: Instant,
        cluster: &Cluster<'_>,
        table: &BTreeMap<u64, &Region>,
        loads: &mut Loads,
        needy: &BTreeSet<u64>,
    ) {
        let up: Vec<u64> = cluster.up().map(|s| s.id).collect();
        if up.len() < 2 {
            return;
        }
        let mut by_leader: HashMap<u64, Vec<&Region>> = HashMap::new();
        for region in table.values() {
            if self.balanceable(region, cluster, needy) {
                by_leader
                    .entry(region.leader_store_id)
                    .or_default()
                    .push(region);
            }
        }
        loop {
            let total: usize = up.iter().map(|s| loads.leaders(*s)).sum();
            let gap = self.config.leader_tolerance.allowed_gap(total, up.len());
            let Some(chain) = self.leader_chain(&up, cluster, loads, gap, &by_leader) else {
                return;
            };
            for (region, from, to) in chain {
                let kind = OperatorKind::TransferLeader { from, to };
                self.start(
                    now,
                    region,
                    kind,
                    OperatorReason::BalanceLeaders,
                    cluster,
                    loads,
                );
            }
        }
    }

    /// The transfers of the best chain for [`Self::balance_leaders`]: from the most led server
    /// first, to the nearest server more than `gap` below it (then the least led, then the
    /// lowest id). Every server on the chain has room for its operators (one at the ends, two
    /// in between).
    fn leader_chain<'r>(
        &self,
        up: &[u64],
        cluster: &Cluster<'_>,
        loads: &Loads,
        gap: usize,
        by_leader: &HashMap<u64, Vec<&'r Region>>,
    ) -> Option<Vec<(&'r Region, u64, u64)>> {
        let mut sources: Vec<u64> = up
            .iter()
            .copied()
            .filter(|s| self.has_room(*s, cluster, loads))
            .collect();
        sources.sort_by_key(|s| (Reverse(loads.leaders(*s)), *s));
        for source in sources {
            let top = loads.leaders(source);
            // Breadth first: how each reached server was reached (region, previous server),
            // and its distance.
            let mut reached: HashMap<u64, (&Region, u64, usize)> = HashMap::new();
            let mut queue = std::collections::VecDeque::from([(source, 0usize)]);
            let mut best: Option<(usize, usize, u64)> = None;
            while let Some((at, depth)) = queue.pop_front() {
                if best.is_some_and(|(d, _, _)| depth >= d) {
                    break;
                }
                let led = by_leader.get(&at).map(Vec::as_slice).unwrap_or_default();
                for region in led.iter().filter(|r| !self.operators.contains_key(&r.id)) {
                    for next in voters(region).map(|p| p.store_id) {
                        if next == source || reached.contains_key(&next) || !cluster.is_up(next) {
                            continue;
                        }
                        if !self.has_room(next, cluster, loads) {
                            continue;
                        }
                        reached.insert(next, (region, at, depth + 1));
                        let below = top > loads.leaders(next).saturating_add(gap);
                        let key = (depth + 1, loads.leaders(next), next);
                        if below && best.is_none_or(|b| key < b) {
                            best = Some(key);
                        }
                        if self.room_for(next, 2, cluster, loads) {
                            queue.push_back((next, depth + 1));
                        }
                    }
                }
            }
            let Some((depth, _, target)) = best else {
                continue;
            };
            if !self.total_room(depth, cluster, loads) {
                continue;
            }
            let mut chain = Vec::with_capacity(depth);
            let mut at = target;
            while at != source {
                let (region, from, _) = *reached.get(&at)?;
                chain.push((region, from, at));
                at = from;
            }
            chain.reverse();
            return Some(chain);
        }
        None
    }

    /// The pairs `(from, to)` of `Up` servers with room whose `load` (region counts, or sizes)
    /// differs by more than `gap`: most loaded source first, then least loaded target (ties:
    /// lowest id).
    fn uneven_pairs<'s>(
        &'s self,
        up: &[u64],
        cluster: &'s Cluster<'_>,
        loads: &'s Loads,
        load: fn(&Loads, u64) -> u64,
        gap: u64,
    ) -> impl Iterator<Item = (u64, u64)> + 's {
        let mut by_load: Vec<u64> = up
            .iter()
            .copied()
            .filter(|s| self.has_room(*s, cluster, loads))
            .collect();
        by_load.sort_by_key(|s| (load(loads, *s), *s));
        let sources: Vec<u64> = by_load.iter().rev().copied().collect();
        sources.into_iter().flat_map(move |from| {
            by_load
                .clone()
                .into_iter()
                .take_while(move |to| load(loads, from) > load(loads, *to).saturating_add(gap))
                .map(move |to| (from, to))
        })
    }

    /// Starts `kind` on `region` and counts its effects.
    fn start(
        &mut self,
        now: Instant,
        region: &Region,
        kind: OperatorKind,
        reason: OperatorReason,
        cluster: &Cluster<'_>,
        loads: &mut Loads,
    ) {
        let keep_live_voters = live_voters(region, cluster).min(cluster.max_voters(region));
        let mut op = Operator {
            kind,
            reason,
            started: now,
            keep_live_voters,
            adds_replica: kind.gaining().is_some_and(|to| !holds(region, to)),
            waiting: StepKind::Unknown,
            ready: None,
        };
        let next = progress(kind, keep_live_voters, region, cluster, &loads.leaders);
        if op.observe(region, next, cluster) {
            loads.add(kind, region, cluster);
            self.operators.insert(region.id, op);
        }
    }
}

impl Operator {
    /// Records the step `next` of this operator in `region`; false when there is none (done or
    /// stale).
    fn observe(&mut self, region: &Region, next: Progress, cluster: &Cluster<'_>) -> bool {
        let Progress::Next { kind, store, ready } = next else {
            return false;
        };
        self.waiting = kind;
        self.ready = (ready && cluster.leader_ok(region)).then(|| {
            let mut step = RegionStep {
                region_id: region.id,
                ver: region.ver,
                conf_ver: region.conf_ver,
                store_id: store,
                store_url: cluster.url(store),
                store_zone: cluster.store_zone(store).to_string(),
                ..RegionStep::default()
            };
            step.set_kind(kind);
            (region.leader_store_id, step)
        });
        true
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use wire::region::PeerRole;

    use super::*;

    /// Simulated time per round.
    const ROUND: Duration = Duration::from_secs(1);
    const DOWN_TIME: Duration = Duration::from_secs(10);

    fn config() -> SchedulerConfig {
        SchedulerConfig {
            max_store_down_time: DOWN_TIME,
            ..SchedulerConfig::default()
        }
    }

    fn url(store: u64) -> String {
        format!("http://s{store}")
    }

    fn store(id: u64, zone: &str, state: StoreState) -> StoreView {
        StoreView {
            id,
            url: url(id),
            zone: Zone::label(zone),
            state,
            stale: BTreeSet::new(),
        }
    }

    #[test]
    fn a_server_still_holding_an_old_replica_of_a_region_gets_no_new_one_of_it() {
        // Three zones, a fourth server in a fourth zone: region 1 would move to it, but it
        // still holds an old replica of region 1 (removed while it was down).
        let mut stores = vec![
            store(1, "a", StoreState::Up),
            store(2, "b", StoreState::Up),
            store(3, "c", StoreState::Draining),
            store(4, "d", StoreState::Up),
        ];
        stores[3].stale.insert(1);
        let regions = vec![Region {
            id: 1,
            ver: 1,
            peers: [0, 1, 2]
                .iter()
                .map(|i| peer(&stores[*i], PeerRole::Voter, false))
                .collect(),
            leader_store_id: 1,
            leader_term: 1,
            ..Region::default()
        }];
        let mut s = Scheduler::new(SchedulerConfig::default());
        s.schedule(Instant::now(), &stores, &regions);
        assert!(
            s.steps_for(1).is_empty(),
            "a step toward a server holding an old replica: {:?}",
            s.steps_for(1)
        );
        // Once it dropped it, the drain goes on to it.
        stores[3].stale.clear();
        s.schedule(Instant::now(), &stores, &regions);
        let steps = s.steps_for(1);
        assert_eq!(steps.len(), 1, "{steps:?}");
        assert_eq!(
            (steps[0].kind(), steps[0].store_id),
            (StepKind::AddLearner, 4)
        );
    }

    fn peer(s: &StoreView, role: PeerRole, pending: bool) -> Peer {
        let mut p = Peer {
            store_id: s.id,
            addr: s.url.clone(),
            zone: types::zone::label(s.zone.as_ref()).to_string(),
            pending,
            ..Peer::default()
        };
        p.set_role(role);
        p
    }

    /// A cluster the way servers would carry steps out: a step at another epoch than the
    /// region's is ignored, an added learner stays pending through one scheduling round, every
    /// membership change bumps `conf_ver`. It asserts, as it applies them, what no step may do.
    struct Sim {
        /// Every server, registered or not.
        all: Vec<StoreView>,
        /// Servers that are not registered (gone).
        down: BTreeSet<u64>,
        regions: Vec<Region>,
        /// The round each still-pending learner was added in.
        added: HashMap<(u64, u64), usize>,
        /// Voters on registered servers per region at the start.
        start_live: HashMap<u64, usize>,
        round: usize,
        t0: Instant,
        scheduler: Scheduler,
        /// Every step carried out, with its round.
        log: Vec<(usize, RegionStep)>,
        /// Steps are handed out but not carried out (a cluster that stopped answering).
        frozen: bool,
    }

    impl Sim {
        /// `placements`: per region (ids from 1), its voters' stores, the first registered one
        /// leading.
        fn new(
            all: Vec<StoreView>,
            down: &[u64],
            placements: &[Vec<u64>],
            config: SchedulerConfig,
        ) -> Sim {
            let by_id: HashMap<u64, StoreView> = all.iter().map(|s| (s.id, s.clone())).collect();
            let down: BTreeSet<u64> = down.iter().copied().collect();
            let regions: Vec<Region> = placements
                .iter()
                .zip(1u64..)
                .map(|(stores, id)| Region {
                    id,
                    ver: 1,
                    conf_ver: 1,
                    start: id.to_be_bytes().to_vec(),
                    end: (id + 1).to_be_bytes().to_vec(),
                    peers: stores
                        .iter()
                        .map(|s| peer(&by_id[s], PeerRole::Voter, false))
                        .collect(),
                    leader_store_id: *stores.iter().find(|s| !down.contains(s)).unwrap(),
                    leader_term: 1,
                    ..Region::default()
                })
                .collect();
            let start_live = regions
                .iter()
                .map(|r| {
                    let live = voters(r).filter(|p| !down.contains(&p.store_id)).count();
                    (r.id, live)
                })
                .collect();
            Sim {
                all,
                down,
                regions,
                added: HashMap::new(),
                start_live,
                round: 0,
                t0: Instant::now(),
                scheduler: Scheduler::new(config),
                log: Vec::new(),
                frozen: false,
            }
        }

        fn registered(&self) -> Vec<StoreView> {
            self.all
                .iter()
                .filter(|s| !self.down.contains(&s.id))
                .cloned()
                .collect()
        }

        fn now(&self) -> Instant {
            self.t0 + ROUND * u32::try_from(self.round).unwrap()
        }

        fn region(&self, id: u64) -> &Region {
            self.regions.iter().find(|r| r.id == id).unwrap()
        }

        fn is_up(&self, store: u64) -> bool {
            !self.down.contains(&store)
                && self
                    .all
                    .iter()
                    .any(|s| s.id == store && s.state == StoreState::Up)
        }

        /// One round: learners added two rounds ago catch up, regions led by a gone server
        /// elect another leader, the scheduler plans, each registered server gets and carries
        /// out the steps of the regions it leads.
        fn round(&mut self) {
            let round = self.round;
            self.added.retain(|(region, store), at| {
                if *at + 2 > round {
                    return true;
                }
                let r = self.regions.iter_mut().find(|r| r.id == *region).unwrap();
                if let Some(p) = r.peers.iter_mut().find(|p| p.store_id == *store) {
                    p.pending = false;
                }
                false
            });
            // Raft elects a new leader where the old one is gone.
            for r in &mut self.regions {
                if self.down.contains(&r.leader_store_id) {
                    let live = voters(r).find(|p| !self.down.contains(&p.store_id));
                    r.leader_store_id = live.unwrap().store_id;
                    r.leader_term += 1;
                }
            }
            let now = self.now();
            let registered = self.registered();
            self.scheduler.schedule(now, &registered, &self.regions);
            for s in &registered {
                for step in self.scheduler.steps_for(s.id) {
                    let leader = self.region(step.region_id).leader_store_id;
                    assert_eq!(leader, s.id, "a step goes to the region's leader: {step:?}");
                    if !self.frozen {
                        self.apply(&step);
                    }
                }
            }
            self.check_voters_kept();
            self.round += 1;
        }

        fn apply(&mut self, step: &RegionStep) {
            let kind = step.kind();
            if kind != StepKind::RemovePeer {
                assert!(
                    self.is_up(step.store_id),
                    "a step targets a server not up: {step:?}"
                );
            }
            let store = self.all.iter().find(|s| s.id == step.store_id).cloned();
            let round = self.round;
            let r = self
                .regions
                .iter_mut()
                .find(|r| r.id == step.region_id)
                .unwrap();
            if (step.ver, step.conf_ver) != (r.ver, r.conf_ver) {
                return;
            }
            let at = r.peers.iter().position(|p| p.store_id == step.store_id);
            match kind {
                StepKind::AddLearner => {
                    assert!(at.is_none(), "a learner added twice: {step:?}");
                    let store = store.unwrap();
                    assert_eq!(step.store_url, store.url);
                    r.peers.push(peer(&store, PeerRole::Learner, true));
                    self.added.insert((r.id, store.id), round);
                    r.conf_ver += 1;
                }
                StepKind::PromoteLearner => {
                    let p = &mut r.peers[at.unwrap()];
                    assert!(p.is_learner() && !p.pending, "promoted too early: {step:?}");
                    p.set_role(PeerRole::Voter);
                    r.conf_ver += 1;
                }
                StepKind::RemovePeer => {
                    assert_ne!(
                        r.leader_store_id, step.store_id,
                        "removes the leader: {step:?}"
                    );
                    r.peers.remove(at.unwrap());
                    r.conf_ver += 1;
                }
                StepKind::TransferLeader => {
                    let p = &r.peers[at.unwrap()];
                    assert!(
                        !p.is_learner() && !p.pending,
                        "leader to a learner: {step:?}"
                    );
                    r.leader_store_id = step.store_id;
                    r.leader_term += 1;
                }
                StepKind::Unknown | StepKind::DestroyReplica => {
                    panic!("a step the scheduler never plans: {step:?}")
                }
            }
            self.log.push((round, step.clone()));
        }

        /// New placement rules; the voters each region has now are the floor from here on (a
        /// rule listing fewer zones lowers it on purpose).
        fn set_rules(&mut self, rules: Vec<PlacementRule>) {
            self.scheduler.set_rules(rules);
            for r in &self.regions {
                let live = voters(r)
                    .filter(|p| !self.down.contains(&p.store_id))
                    .count();
                self.start_live.insert(r.id, live);
            }
        }

        /// No region ever has fewer voters on registered servers than it started with
        /// (capped at the replica count, or at the zones its placement rule lists).
        fn check_voters_kept(&self) {
            let registered = self.registered();
            let max = self.scheduler.config().max_replicas;
            let cluster = Cluster::new(&registered, max, &self.scheduler.rules);
            for r in &self.regions {
                let live = voters(r)
                    .filter(|p| !self.down.contains(&p.store_id))
                    .count();
                let floor = self.start_live[&r.id].min(cluster.max_voters(r));
                assert!(live >= floor, "region {} lost a voter: {r:?}", r.id);
            }
        }

        /// Rounds until no operator is left (and gone servers have been gone long enough to be
        /// replaced); panics after `max_rounds`.
        fn settle(&mut self, max_rounds: usize) {
            for _ in 0..max_rounds {
                let now = self.now();
                self.round();
                let idle = self.scheduler.operators(now).is_empty();
                if idle && now >= self.t0 + DOWN_TIME {
                    return;
                }
            }
            panic!(
                "not settled after {max_rounds} rounds: {:?}",
                self.scheduler.operators(self.now())
            );
        }

        /// Replicas (voters and learners) per server.
        fn region_counts(&self) -> BTreeMap<u64, usize> {
            let mut counts: BTreeMap<u64, usize> = self.all.iter().map(|s| (s.id, 0)).collect();
            for r in &self.regions {
                for p in &r.peers {
                    *counts.entry(p.store_id).or_default() += 1;
                }
            }
            counts
        }

        /// Bytes of the replicas (voters and learners) per server, each at its region's size.
        fn region_sizes(&self) -> BTreeMap<u64, u64> {
            let mut sizes: BTreeMap<u64, u64> = self.all.iter().map(|s| (s.id, 0)).collect();
            for r in &self.regions {
                for p in &r.peers {
                    *sizes.entry(p.store_id).or_default() += r.approximate_size;
                }
            }
            sizes
        }

        /// Sets every region's size, by id.
        fn set_sizes(&mut self, size: impl Fn(u64) -> u64) {
            for r in &mut self.regions {
                r.approximate_size = size(r.id);
            }
        }

        /// The reasons of the operators in flight.
        fn reasons(&self) -> BTreeSet<OperatorReason> {
            self.scheduler
                .operators(self.now())
                .iter()
                .map(OperatorInfo::reason)
                .collect()
        }

        fn leader_counts(&self) -> BTreeMap<u64, usize> {
            let mut counts: BTreeMap<u64, usize> = self.all.iter().map(|s| (s.id, 0)).collect();
            for r in &self.regions {
                *counts.entry(r.leader_store_id).or_default() += 1;
            }
            counts
        }

        /// The steps carried out for `region`, in order.
        fn steps_of(&self, region: u64) -> Vec<(StepKind, u64)> {
            self.log
                .iter()
                .filter(|(_, s)| s.region_id == region)
                .map(|(_, s)| (s.kind(), s.store_id))
                .collect()
        }
    }

    fn spread(max: usize, min: usize) -> usize {
        max - min
    }

    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;

    /// Largest minus smallest of `values`.
    fn range<T: Ord + Copy + std::ops::Sub<Output = T>>(values: impl Iterator<Item = T>) -> T {
        let values: Vec<T> = values.collect();
        *values.iter().max().unwrap() - *values.iter().min().unwrap()
    }

    /// `n` regions on stores `stores`, round robin over the rotations (leaders rotate too).
    fn on(stores: &[u64], n: usize) -> Vec<Vec<u64>> {
        (0..n)
            .map(|i| {
                let mut v = stores.to_vec();
                v.rotate_left(i % stores.len());
                v.truncate(3);
                v
            })
            .collect()
    }

    fn rule(id: &str, start: &[u8], end: &[u8], zones: &[&str]) -> PlacementRule {
        PlacementRule {
            id: id.into(),
            start: start.to_vec(),
            end: end.to_vec(),
            zones: zones.iter().map(|z| z.to_string()).collect(),
        }
    }

    /// Per region: its voters' zones and its learners' zones, sorted.
    fn zones_by_role(sim: &Sim) -> Vec<(Vec<String>, Vec<String>)> {
        sim.regions
            .iter()
            .map(|r| {
                let mut v: Vec<String> = voters(r).map(|p| p.zone.clone()).collect();
                let mut l: Vec<String> = r
                    .peers
                    .iter()
                    .filter(|p| p.is_learner())
                    .map(|p| p.zone.clone())
                    .collect();
                v.sort();
                l.sort();
                (v, l)
            })
            .collect()
    }

    fn strings(zones: &[&str]) -> Vec<String> {
        zones.iter().map(|z| z.to_string()).collect()
    }

    #[test]
    fn a_whole_replica_rule_adds_a_learner_in_each_listed_zone_beyond_the_voters_and_removing_it_removes_them()
     {
        let all: Vec<StoreView> = ["a", "b", "c", "d"]
            .iter()
            .zip(1..)
            .map(|(z, i)| store(i, z, StoreState::Up))
            .collect();
        let mut sim = Sim::new(all, &[], &on(&[1, 2, 3], 6), config());
        sim.set_rules(vec![rule("whole", b"", b"", &["a", "b", "c", "d"])]);
        sim.settle(100);
        for (voters, learners) in zones_by_role(&sim) {
            assert_eq!(voters, strings(&["a", "b", "c"]));
            assert_eq!(learners, strings(&["d"]));
        }
        assert!(
            sim.log
                .iter()
                .all(|(_, s)| s.kind() != StepKind::PromoteLearner),
            "a rule's learner was promoted: {:?}",
            sim.log
        );
        // Without the rule: three voters in three zones (balancing may now use zone d), and no
        // learner.
        sim.set_rules(Vec::new());
        sim.settle(100);
        for (voters, learners) in zones_by_role(&sim) {
            assert_eq!(
                voters.iter().collect::<BTreeSet<_>>().len(),
                3,
                "{voters:?}"
            );
            assert!(learners.is_empty(), "{learners:?}");
        }
    }

    #[test]
    fn a_tables_rule_without_a_zone_removes_that_zones_replicas_of_its_regions_only() {
        let all: Vec<StoreView> = ["a", "b", "c"]
            .iter()
            .zip(1..)
            .map(|(z, i)| store(i, z, StoreState::Up))
            .collect();
        // Regions 1..=4 span [1, 5) in 8-byte big-endian keys; the table is regions 2 and 3.
        let mut sim = Sim::new(all, &[], &on(&[1, 2, 3], 4), config());
        let table = rule("t", &2u64.to_be_bytes(), &4u64.to_be_bytes(), &["a", "b"]);
        let whole = rule("whole", b"", b"", &["a", "b", "c"]);
        sim.set_rules(vec![whole.clone(), table]);
        sim.settle(100);
        let placed = zones_by_role(&sim);
        for (i, (voters, learners)) in placed.iter().enumerate() {
            let expected: &[&str] = if (1..=2).contains(&i) {
                &["a", "b"]
            } else {
                &["a", "b", "c"]
            };
            assert_eq!(voters, &strings(expected), "region {}", i + 1);
            assert!(learners.is_empty());
        }
        // Deleting the table's rule brings zone c back (a voter: `max_replicas` is 3).
        sim.set_rules(vec![whole]);
        sim.settle(100);
        for (voters, _) in zones_by_role(&sim) {
            assert_eq!(voters, strings(&["a", "b", "c"]));
        }
    }

    #[test]
    fn a_voter_in_an_unlisted_zone_moves_onto_the_learner_of_a_listed_one() {
        let all: Vec<StoreView> = ["a", "b", "c", "d"]
            .iter()
            .zip(1..)
            .map(|(z, i)| store(i, z, StoreState::Up))
            .collect();
        let mut sim = Sim::new(all.clone(), &[], &[vec![1, 2, 4]], config());
        sim.regions[0]
            .peers
            .push(peer(&all[2], PeerRole::Learner, false));
        sim.set_rules(vec![rule("abc", b"", b"", &["a", "b", "c"])]);
        sim.settle(100);
        assert_eq!(
            zones_by_role(&sim),
            vec![(strings(&["a", "b", "c"]), Vec::new())]
        );
        // Zone c's learner was promoted, not a new replica added beside it.
        let kinds: Vec<(StepKind, u64)> = sim
            .log
            .iter()
            .map(|(_, s)| (s.kind(), s.store_id))
            .collect();
        assert!(kinds.contains(&(StepKind::PromoteLearner, 3)), "{kinds:?}");
        assert!(!kinds.contains(&(StepKind::AddLearner, 3)), "{kinds:?}");
    }

    #[test]
    fn a_region_follows_the_narrowest_rule_overlapping_it() {
        let stores = [
            store(1, "a", StoreState::Up),
            store(2, "b", StoreState::Up),
            store(3, "c", StoreState::Up),
        ];
        let rules = vec![
            rule("whole", b"", b"", &["a"]),
            rule("table", b"t1", b"t2", &["a", "b"]),
            rule("index", b"t1_i", b"t1_j", &["a", "b", "c"]),
        ];
        let cluster = Cluster::new(&stores, 3, &rules);
        let region = |start: &[u8], end: &[u8]| Region {
            start: start.to_vec(),
            end: end.to_vec(),
            ..Region::default()
        };
        let id = |r: &Region| cluster.placement(r).map(|p| p.id.clone());
        assert_eq!(id(&region(b"a", b"b")).as_deref(), Some("whole"));
        assert_eq!(id(&region(b"t1_r", b"t1_s")).as_deref(), Some("table"));
        assert_eq!(id(&region(b"t1_i1", b"t1_i2")).as_deref(), Some("index"));
        // Straddling the table's start: the table's rule, not the whole-cluster one.
        assert_eq!(id(&region(b"s", b"t1_a")).as_deref(), Some("table"));
        assert_eq!(cluster.max_voters(&region(b"t1_r", b"t1_s")), 2);
        assert_eq!(cluster.max_voters(&region(b"a", b"b")), 1);
        assert!(
            Cluster::new(&stores, 3, &[])
                .placement(&region(b"a", b"b"))
                .is_none()
        );
    }

    #[test]
    fn a_rule_naming_a_zone_nobody_is_in_keeps_the_voters_of_the_others() {
        let all: Vec<StoreView> = ["a", "b", "c"]
            .iter()
            .zip(1..)
            .map(|(z, i)| store(i, z, StoreState::Up))
            .collect();
        let mut sim = Sim::new(all, &[], &on(&[1, 2, 3], 3), config());
        sim.set_rules(vec![rule("half-typo", b"", b"", &["a", "b", "c", "x"])]);
        sim.settle(50);
        for (voters, learners) in zones_by_role(&sim) {
            assert_eq!(voters, strings(&["a", "b", "c"]));
            assert!(learners.is_empty(), "{learners:?}");
        }
    }

    #[test]
    fn a_learner_no_rule_wants_is_removed() {
        let all: Vec<StoreView> = ["a", "b", "c", "d"]
            .iter()
            .zip(1..)
            .map(|(z, i)| store(i, z, StoreState::Up))
            .collect();
        let mut sim = Sim::new(all.clone(), &[], &[vec![1, 2, 3]], config());
        sim.regions[0]
            .peers
            .push(peer(&all[3], PeerRole::Learner, false));
        sim.settle(100);
        assert_eq!(
            zones_by_role(&sim),
            vec![(strings(&["a", "b", "c"]), Vec::new())]
        );
    }

    #[test]
    fn a_down_stores_replicas_move_after_max_store_down_time_and_not_before() {
        let all = (1..=4).map(|i| store(i, "", StoreState::Up)).collect();
        let mut sim = Sim::new(all, &[4], &on(&[1, 2, 4], 9), config());
        while sim.now() < sim.t0 + DOWN_TIME {
            sim.round();
            assert!(
                sim.log.is_empty(),
                "moved before the down time: {:?}",
                sim.log
            );
        }
        sim.settle(200);
        let counts = sim.region_counts();
        assert_eq!(counts[&4], 0);
        assert_eq!(counts[&3], 9);
        assert!(sim.regions.iter().all(|r| voters(r).count() == 3));
        for op in sim
            .log
            .iter()
            .filter(|(_, s)| s.kind() == StepKind::AddLearner)
        {
            assert!(op.0 >= 10, "added at round {}", op.0);
        }
    }

    #[test]
    fn a_store_registering_again_stops_its_down_clock() {
        let all = (1..=5).map(|i| store(i, "", StoreState::Up)).collect();
        let mut sim = Sim::new(all, &[5], &on(&[1, 2, 3, 4, 5], 5), config());
        for _ in 0..8 {
            sim.round();
        }
        sim.down.clear();
        sim.round();
        sim.down.insert(5);
        // Gone again from round 9: the clock starts over, rounds 9..=18 are not enough.
        for _ in 0..10 {
            sim.round();
        }
        let moved = |sim: &Sim| {
            sim.log
                .iter()
                .any(|(_, s)| s.kind() != StepKind::TransferLeader)
        };
        assert!(!moved(&sim), "{:?}", sim.log);
        sim.round();
        assert!(moved(&sim), "gone for the down time again");
        sim.settle(200);
        assert_eq!(sim.region_counts()[&5], 0);
    }

    #[test]
    fn a_draining_store_ends_empty_and_hands_its_leaderships_over_before_removal() {
        let mut all: Vec<StoreView> = (1..=4).map(|i| store(i, "", StoreState::Up)).collect();
        all[0].state = StoreState::Draining;
        let mut sim = Sim::new(all, &[], &on(&[1, 2, 3], 12), config());
        let led_by_1: Vec<u64> = sim
            .regions
            .iter()
            .filter(|r| r.leader_store_id == 1)
            .map(|r| r.id)
            .collect();
        assert!(!led_by_1.is_empty());
        sim.settle(300);
        assert_eq!(sim.region_counts()[&1], 0);
        assert_eq!(sim.leader_counts()[&1], 0);
        for id in led_by_1 {
            let steps = sim.steps_of(id);
            let transfer = steps
                .iter()
                .position(|(k, _)| *k == StepKind::TransferLeader)
                .unwrap();
            let removal = steps
                .iter()
                .position(|s| *s == (StepKind::RemovePeer, 1))
                .unwrap();
            assert!(transfer < removal, "region {id}: {steps:?}");
        }
    }

    #[test]
    fn a_draining_leader_without_a_target_still_hands_its_leadership_over() {
        let mut all: Vec<StoreView> = (1..=3).map(|i| store(i, "", StoreState::Up)).collect();
        all[0].state = StoreState::Draining;
        let mut sim = Sim::new(all, &[], &on(&[1, 2, 3], 3), config());
        sim.settle(50);
        assert_eq!(sim.leader_counts()[&1], 0);
        assert_eq!(
            sim.region_counts()[&1],
            3,
            "no server to move the replicas to"
        );
    }

    #[test]
    fn a_fourth_empty_store_receives_regions_until_balanced() {
        let all = (1..=4).map(|i| store(i, "", StoreState::Up)).collect();
        let mut sim = Sim::new(all, &[], &on(&[1, 2, 3], 40), config());
        sim.settle(500);
        let counts = sim.region_counts();
        let (max, min) = (
            *counts.values().max().unwrap(),
            *counts.values().min().unwrap(),
        );
        // 120 replicas on 4 servers: 30 each, 10% of the mean tolerated.
        assert!(spread(max, min) <= 3, "{counts:?}");
        let leaders = sim.leader_counts();
        let (max, min) = (
            *leaders.values().max().unwrap(),
            *leaders.values().min().unwrap(),
        );
        assert!(spread(max, min) <= 1, "{leaders:?}");
    }

    #[test]
    fn no_region_gets_two_peers_in_one_zone_when_three_zones_exist() {
        let zones = ["a", "a", "b", "b", "c", "c"];
        let all = (1..=6)
            .map(|i| store(i, zones[i as usize - 1], StoreState::Up))
            .collect();
        // Every region starts with two replicas in zone a.
        let mut sim = Sim::new(all, &[], &on(&[1, 2, 3, 5], 20), config());
        let doubled = |sim: &Sim| {
            let moving: BTreeMap<u64, u64> = sim
                .scheduler
                .operators(sim.now())
                .iter()
                .map(|o| (o.region_id, o.from_store))
                .collect();
            sim.regions.iter().any(|r| {
                let zones: Vec<&str> = r
                    .peers
                    .iter()
                    .filter(|p| moving.get(&r.id) != Some(&p.store_id))
                    .map(|p| p.zone.as_str())
                    .collect();
                zones.iter().collect::<BTreeSet<_>>().len() < zones.len()
            })
        };
        let before: usize = sim
            .regions
            .iter()
            .filter(|r| r.replica_zones().len() < 3)
            .count();
        assert!(before > 0);
        sim.settle(500);
        for r in &sim.regions {
            assert_eq!(r.replica_zones().len(), 3, "{r:?}");
        }
        // Once isolated, no later move doubles a zone up again (the replaced replica aside).
        for _ in 0..20 {
            assert!(!doubled(&sim));
            sim.round();
        }
    }

    #[test]
    fn steps_carry_the_regions_epoch_and_the_targets_url_and_zone() {
        let all: Vec<StoreView> = (1..=4)
            .map(|i| store(i, ["a", "b", "c", "d"][i as usize - 1], StoreState::Up))
            .collect();
        let mut sim = Sim::new(all.clone(), &[], &[vec![1, 2, 3]], config());
        sim.regions[0].ver = 7;
        sim.regions[0].conf_ver = 5;
        let mut stores = all;
        stores[0].state = StoreState::Draining;
        sim.scheduler.schedule(sim.now(), &stores, &sim.regions);
        let steps = sim.scheduler.steps_for(1);
        assert_eq!(steps.len(), 1, "{steps:?}");
        let step = &steps[0];
        assert_eq!((step.region_id, step.ver, step.conf_ver), (1, 7, 5));
        assert_eq!(step.kind(), StepKind::AddLearner);
        assert_eq!(
            (
                step.store_id,
                step.store_url.as_str(),
                step.store_zone.as_str()
            ),
            (4, "http://s4", "d")
        );
        assert!(
            sim.scheduler.steps_for(2).is_empty(),
            "only the leader is asked"
        );
    }

    #[test]
    fn a_removal_never_happens_before_the_promotion() {
        let mut all: Vec<StoreView> = (1..=5).map(|i| store(i, "", StoreState::Up)).collect();
        all[1].state = StoreState::Draining;
        let mut sim = Sim::new(all, &[], &on(&[1, 2, 3], 6), config());
        sim.settle(200);
        for r in &sim.regions {
            let steps = sim.steps_of(r.id);
            let promoted = steps
                .iter()
                .position(|(k, _)| *k == StepKind::PromoteLearner)
                .unwrap();
            let removed = steps
                .iter()
                .position(|(k, _)| *k == StepKind::RemovePeer)
                .unwrap();
            assert!(promoted < removed, "region {}: {steps:?}", r.id);
        }
        // And the promotion waited for the learner to catch up (the simulation keeps a new
        // learner pending through one round and refuses an early promotion).
        let added = sim
            .log
            .iter()
            .find(|(_, s)| s.kind() == StepKind::AddLearner);
        let promoted = sim
            .log
            .iter()
            .find(|(_, s)| s.kind() == StepKind::PromoteLearner);
        assert!(promoted.unwrap().0 >= added.unwrap().0 + 2);
    }

    #[test]
    fn timed_out_operators_are_dropped_and_their_learner_removed() {
        let mut all: Vec<StoreView> = (1..=4).map(|i| store(i, "", StoreState::Up)).collect();
        all[2].state = StoreState::Draining;
        let mut cfg = config();
        cfg.operator_timeout = Duration::from_secs(5);
        let mut sim = Sim::new(all, &[], &[vec![1, 2, 3]], cfg);
        sim.round();
        sim.round();
        // The learner is added, then never catches up.
        assert_eq!(sim.region(1).peers.len(), 4);
        sim.added.clear();
        for _ in 0..3 {
            sim.round();
        }
        let ops = sim.scheduler.operators(sim.now());
        assert_eq!(ops.len(), 1);
        assert_eq!(ops[0].step(), StepKind::PromoteLearner);
        assert_eq!((ops[0].from_store, ops[0].to_store), (3, 4));
        // Round 5: timed out; the learner is removed in its place.
        sim.round();
        let ops = sim.scheduler.operators(sim.now());
        assert_eq!((ops[0].from_store, ops[0].to_store), (4, 0), "{ops:?}");
        assert_eq!(ops[0].reason(), OperatorReason::Drain);
        assert_eq!(sim.region(1).peers.len(), 3, "the learner is removed");
        // A stuck operator without a learner of its own is simply dropped.
        sim.frozen = true;
        for _ in 0..6 {
            sim.round();
        }
        let ops = sim.scheduler.operators(sim.now());
        assert!(ops.iter().all(|o| o.age_ms < 6000), "{ops:?}");
    }

    #[test]
    fn a_region_without_a_known_leader_gets_no_operator() {
        let all: Vec<StoreView> = (1..=4).map(|i| store(i, "", StoreState::Up)).collect();
        let mut sim = Sim::new(all, &[], &[vec![1, 2]], config());
        sim.regions[0].leader_store_id = 0;
        sim.round();
        assert!(sim.scheduler.operators(sim.now()).is_empty());
        sim.regions[0].leader_store_id = 1;
        sim.settle(20);
        assert_eq!(voters(sim.region(1)).count(), 3);
    }

    #[test]
    fn no_store_takes_part_in_more_than_max_moves_per_store_operators() {
        let all = (1..=4).map(|i| store(i, "", StoreState::Up)).collect();
        let mut sim = Sim::new(all, &[], &on(&[1, 2, 3], 30), config());
        while sim.round < 200 {
            sim.round();
            let mut busy: BTreeMap<u64, usize> = BTreeMap::new();
            for op in sim.scheduler.operators(sim.now()) {
                for s in [op.from_store, op.to_store].into_iter().filter(|s| *s != 0) {
                    *busy.entry(s).or_default() += 1;
                }
            }
            assert!(busy.values().all(|n| *n <= 2), "{busy:?}");
        }
    }

    #[test]
    fn a_new_leadership_forgets_operators_and_down_clocks() {
        let all = (1..=4).map(|i| store(i, "", StoreState::Up)).collect();
        let mut sim = Sim::new(all, &[4], &on(&[1, 2, 4], 3), config());
        for _ in 0..DOWN_TIME.as_secs() + 1 {
            sim.round();
        }
        assert!(!sim.scheduler.operators(sim.now()).is_empty());
        sim.scheduler.reset();
        assert!(sim.scheduler.operators(sim.now()).is_empty());
        assert!(sim.scheduler.steps_for(1).is_empty());
        let log = sim.log.len();
        sim.frozen = true;
        sim.round();
        // The learners the cut-off moves left are removed (no rule wants them), but nothing
        // replaces the gone server's replicas yet: its down clock started over.
        let ops = sim.scheduler.operators(sim.now());
        assert!(
            ops.iter()
                .all(|o| o.reason() == OperatorReason::Placement && o.to_store == 0),
            "the down clock started over: {ops:?}"
        );
        assert_eq!(sim.log.len(), log);
    }

    #[test]
    fn the_tolerated_gap_is_a_share_of_the_mean_and_at_least_one() {
        let t = Tolerance {
            percent_of_mean: 10,
        };
        assert_eq!(t.allowed_gap(0, 0), 1);
        assert_eq!(t.allowed_gap(30, 3), 1);
        assert_eq!(t.allowed_gap(600, 3), 20);
        assert_eq!(t.allowed_gap(usize::MAX, 1), usize::MAX / 10);
    }

    #[test]
    fn the_tolerated_size_gap_is_a_share_of_the_mean_and_at_least_the_floor() {
        let t = Tolerance {
            percent_of_mean: 10,
        };
        assert_eq!(t.allowed_size_gap(0, 0, 64 * MIB), 64 * MIB);
        assert_eq!(t.allowed_size_gap(0, 3, 0), 0);
        assert_eq!(
            t.allowed_size_gap(u128::from(300 * GIB), 3, 64 * MIB),
            10 * GIB
        );
        assert_eq!(
            t.allowed_size_gap(u128::from(300 * MIB), 3, 64 * MIB),
            64 * MIB
        );
        assert_eq!(t.allowed_size_gap(u128::MAX, 1, 0), u64::MAX);
    }

    #[test]
    fn big_regions_move_from_the_heavy_servers_to_the_light_one_until_sizes_are_within_tolerance() {
        let all = (1..=4).map(|i| store(i, "", StoreState::Up)).collect();
        // 80 regions, 60 replicas on each server: counts are even (a gap of 6 is tolerated).
        // Regions 1, 5, 9 and 13 (on servers 1, 2 and 3) hold 1 GiB each, the others 8 MiB:
        // server 4 has none of the big ones, almost 4 GiB less than the others.
        let mut sim = Sim::new(all, &[], &on(&[1, 2, 3, 4], 80), config());
        sim.set_sizes(|id| {
            if id <= 13 && id % 4 == 1 {
                GIB
            } else {
                8 * MIB
            }
        });
        let sizes = sim.region_sizes();
        assert_eq!(sizes[&1] - sizes[&4], 4 * GIB - 4 * 8 * MIB);
        let mut rounds_moving = 0;
        while sim.round < 100 {
            sim.round();
            let counts = sim.region_counts();
            assert!(range(counts.values().copied()) <= 6, "{counts:?}");
            let reasons = sim.reasons();
            assert!(
                !reasons.contains(&OperatorReason::BalanceRegions),
                "{reasons:?}"
            );
            rounds_moving += usize::from(reasons.contains(&OperatorReason::BalanceSize));
        }
        assert!(sim.scheduler.operators(sim.now()).is_empty());
        assert!(rounds_moving > 0);
        // Each server holds three of the twelve big replicas; sizes are within a tenth of the
        // mean (about 345 MiB).
        let sizes = sim.region_sizes();
        let mean = sizes.values().sum::<u64>() / 4;
        assert!(range(sizes.values().copied()) <= mean / 10, "{sizes:?}");
        for s in 1..=4 {
            let big = sim
                .regions
                .iter()
                .filter(|r| r.approximate_size == GIB && holds(r, s))
                .count();
            assert_eq!(big, 3, "server {s}: {sizes:?}");
        }
    }

    #[test]
    fn a_region_too_big_to_narrow_the_gap_never_moves_and_scheduling_comes_to_rest() {
        let all: Vec<StoreView> = (1..=4).map(|i| store(i, "", StoreState::Up)).collect();
        // 40 regions, 30 replicas on each server. Region 1 (servers 1, 2 and 3) holds 10 GiB,
        // the others nothing: server 4 is 10 GiB lighter than the others, region 1's size, so
        // moving region 1 there would only carry the gap over to server 4 (and back).
        let mut sim = Sim::new(all.clone(), &[], &on(&[1, 2, 3, 4], 40), config());
        sim.set_sizes(|id| if id == 1 { 10 * GIB } else { 0 });
        for _ in 0..30 {
            sim.round();
            assert!(sim.scheduler.operators(sim.now()).is_empty());
        }
        assert!(sim.log.is_empty(), "{:?}", sim.log);
        // The others hold 1 MiB: server 4 is 10 GiB − 1 MiB lighter, still less than region 1.
        // Small regions move to it, as far as the count gap (3) allows, then nothing does.
        let mut sim = Sim::new(all, &[], &on(&[1, 2, 3, 4], 40), config());
        sim.set_sizes(|id| if id == 1 { 10 * GIB } else { MIB });
        sim.settle(100);
        let rest = sim.log.len();
        for _ in 0..20 {
            sim.round();
            assert!(sim.scheduler.operators(sim.now()).is_empty());
        }
        assert_eq!(sim.log.len(), rest, "{:?}", &sim.log[rest..]);
        assert!(
            sim.steps_of(1)
                .iter()
                .all(|(k, _)| *k == StepKind::TransferLeader),
            "{:?}",
            sim.steps_of(1)
        );
        assert_eq!(sim.region(1).peers.len(), 3);
        assert!(!holds(sim.region(1), 4));
        let counts = sim.region_counts();
        assert!(counts[&4] > 30, "{counts:?}");
        assert!(range(counts.values().copied()) <= 3, "{counts:?}");
    }

    #[test]
    fn sizes_closer_than_min_size_gap_are_left_alone() {
        let all: Vec<StoreView> = (1..=4).map(|i| store(i, "", StoreState::Up)).collect();
        // Servers 1, 2 and 3 hold 40 MiB more than server 4: above a tenth of the mean (6 MiB),
        // below the 64 MiB floor.
        let sizes = |id| if id == 1 { 41 * MIB } else { MIB };
        let mut sim = Sim::new(all.clone(), &[], &on(&[1, 2, 3, 4], 40), config());
        sim.set_sizes(sizes);
        for _ in 0..5 {
            sim.round();
        }
        assert!(sim.log.is_empty(), "{:?}", sim.log);
        // Without the floor, 1 MiB regions go to server 4.
        let mut cfg = config();
        cfg.min_size_gap = 0;
        let mut sim = Sim::new(all, &[], &on(&[1, 2, 3, 4], 40), cfg);
        sim.set_sizes(sizes);
        sim.round();
        assert_eq!(sim.reasons(), BTreeSet::from([OperatorReason::BalanceSize]));
    }

    /// A random cluster: 3–6 servers in 1–4 zones, maybe one gone, maybe one draining, 1–60
    /// regions of 3 voters on distinct servers, led by one on a registered server, each empty,
    /// small (below the 64 MiB floor of the size gap) or large (up to 4 GiB).
    #[derive(Clone, Debug)]
    struct Layout {
        zones: Vec<u8>,
        down: Option<usize>,
        draining: Option<usize>,
        /// Per region: a shuffled list of store indexes (the first 3 hold it), which of the
        /// live ones leads, and its size.
        regions: Vec<(Vec<usize>, prop::sample::Index, u64)>,
    }

    fn region_size() -> impl Strategy<Value = u64> {
        prop_oneof![Just(0), 1..64 * MIB, 64 * MIB..=4 * GIB]
    }

    fn layouts() -> impl Strategy<Value = Layout> {
        (3usize..=6, 1u8..=4).prop_flat_map(|(n, zones)| {
            (
                proptest::collection::vec(0..zones, n),
                proptest::option::of(0..n),
                proptest::option::of(0..n),
                proptest::collection::vec(
                    (
                        Just((0..n).collect::<Vec<_>>()).prop_shuffle(),
                        any::<prop::sample::Index>(),
                        region_size(),
                    ),
                    1..=60,
                ),
            )
                .prop_map(|(zones, down, draining, regions)| Layout {
                    zones,
                    down,
                    draining: draining.filter(|d| Some(*d) != down),
                    regions,
                })
        })
    }

    fn sim_of(layout: &Layout) -> Sim {
        let ids = |i: usize| u64::try_from(i).unwrap() + 1;
        let all: Vec<StoreView> = layout
            .zones
            .iter()
            .enumerate()
            .map(|(i, z)| {
                let state = if layout.draining == Some(i) {
                    StoreState::Draining
                } else {
                    StoreState::Up
                };
                store(ids(i), &format!("z{z}"), state)
            })
            .collect();
        let down: Vec<u64> = layout.down.map(ids).into_iter().collect();
        let placements: Vec<Vec<u64>> = layout
            .regions
            .iter()
            .map(|(order, leader, _)| {
                let mut stores: Vec<u64> = order[..3].iter().map(|i| ids(*i)).collect();
                let live: Vec<usize> = (0..3).filter(|i| !down.contains(&stores[*i])).collect();
                stores.swap(0, live[leader.index(live.len())]);
                stores
            })
            .collect();
        let mut sim = Sim::new(all, &down, &placements, config());
        let sizes: Vec<u64> = layout.regions.iter().map(|(_, _, size)| *size).collect();
        sim.set_sizes(|id| sizes[usize::try_from(id).unwrap() - 1]);
        sim
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn scheduling_settles_safely_into_a_placed_and_balanced_cluster(layout in layouts()) {
            let mut sim = sim_of(&layout);
            // Safety is asserted at every step of every round.
            sim.settle(500);
            check_settled(&sim)?;
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// A whole-cluster rule over a random cluster: every step stays safe (the simulation
        /// asserts it), planning comes to rest, and when each listed zone has an `Up` server
        /// the rule holds: one replica per listed zone, none elsewhere, voters in as many of
        /// them as `max_replicas` allows and learners in the rest.
        #[test]
        fn scheduling_under_a_rule_settles_into_a_whole_replica_per_listed_zone(
            layout in layouts(),
            listed in proptest::collection::btree_set(0u8..4, 1..=4),
        ) {
            let mut sim = sim_of(&layout);
            let zones: Vec<String> = listed.iter().map(|z| format!("z{z}")).collect();
            let names: Vec<&str> = zones.iter().map(String::as_str).collect();
            sim.set_rules(vec![rule("whole", b"", b"", &names)]);
            sim.settle(500);
            let up_zones: BTreeSet<&str> = sim
                .all
                .iter()
                .filter(|s| sim.is_up(s.id))
                .map(|s| types::zone::label(s.zone.as_ref()))
                .collect();
            if !names.iter().all(|z| up_zones.contains(z)) {
                return Ok(());
            }
            for r in &sim.regions {
                let mut placed: Vec<&str> = r.peers.iter().map(|p| p.zone.as_str()).collect();
                placed.sort_unstable();
                prop_assert_eq!(&placed, &names, "{:?}", r);
                prop_assert_eq!(voters(r).count(), names.len().min(3), "{:?}", r);
                prop_assert!(r.peers.iter().all(|p| sim.is_up(p.store_id)), "{:?}", r);
            }
        }
    }

    /// What a settled cluster looks like, when enough servers are up to place every replica.
    fn check_settled(sim: &Sim) -> Result<(), TestCaseError> {
        let up: Vec<&StoreView> = sim.all.iter().filter(|s| sim.is_up(s.id)).collect();
        let up_zones: BTreeSet<&str> = up
            .iter()
            .map(|s| types::zone::label(s.zone.as_ref()))
            .collect();
        if up.len() < 3 {
            return Ok(());
        }
        for r in &sim.regions {
            prop_assert_eq!(voters(r).count(), 3, "{:?}", r);
            prop_assert!(r.peers.iter().all(|p| !p.is_learner()), "{:?}", r);
            prop_assert!(r.peers.iter().all(|p| sim.is_up(p.store_id)), "{:?}", r);
            if up_zones.len() >= 3 {
                prop_assert_eq!(r.replica_zones().len(), 3, "{:?}", r);
            }
        }
        // Servers of one zone can always trade replicas, so each zone is balanced; across
        // zones, isolation may forbid it (a zone with one server holds every region).
        let counts = sim.region_counts();
        let total: usize = up.iter().map(|s| counts[&s.id]).sum();
        let bound = total / up.len() / 4 + 1;
        for zone in &up_zones {
            let in_zone: Vec<usize> = up
                .iter()
                .filter(|s| types::zone::label(s.zone.as_ref()) == *zone)
                .map(|s| counts[&s.id])
                .collect();
            let spread = in_zone.iter().max().unwrap() - in_zone.iter().min().unwrap();
            prop_assert!(
                spread <= bound,
                "zone {} {:?} bound {}",
                zone,
                counts,
                bound
            );
        }
        let leaders = sim.leader_counts();
        let led: Vec<usize> = up.iter().map(|s| leaders[&s.id]).collect();
        let bound = sim.regions.len() / up.len() / 4 + 1;
        let spread = led.iter().max().unwrap() - led.iter().min().unwrap();
        prop_assert!(spread <= bound, "leaders {:?} bound {}", leaders, bound);
        check_sizes_settled(sim, &up)
    }

    /// Two servers of one zone (so zones never forbid a move between them) further apart in
    /// size than the size gap have no region left that one move could bring closer: every
    /// region of the larger that the smaller lacks is empty, at least their difference, or
    /// its move would leave a count more than the count gap from another it got further from.
    fn check_sizes_settled(sim: &Sim, up: &[&StoreView]) -> Result<(), TestCaseError> {
        let config = sim.scheduler.config();
        let counts = sim.region_counts();
        let sizes = sim.region_sizes();
        let total: usize = up.iter().map(|s| counts[&s.id]).sum();
        let count_gap = config.region_tolerance.allowed_gap(total, up.len());
        let bytes: u128 = up.iter().map(|s| u128::from(sizes[&s.id])).sum();
        let size_gap = config
            .size_tolerance
            .allowed_size_gap(bytes, up.len(), config.min_size_gap);
        let zone = |s: &StoreView| types::zone::label(s.zone.as_ref()).to_string();
        for a in up {
            for b in up.iter().filter(|b| zone(b) == zone(a)) {
                let Some(apart) = sizes[&a.id].checked_sub(sizes[&b.id]) else {
                    continue;
                };
                if apart <= size_gap {
                    continue;
                }
                let within_counts = || one_move_keeps_counts(&counts, up, a.id, b.id, count_gap);
                for r in sim
                    .regions
                    .iter()
                    .filter(|r| holds(r, a.id) && !holds(r, b.id))
                {
                    prop_assert!(
                        !(0 < r.approximate_size && r.approximate_size < apart && within_counts()),
                        "region {} ({} bytes) could move from {} to {}: sizes {:?} (gap {}) \
                         counts {:?} (gap {})",
                        r.id,
                        r.approximate_size,
                        a.id,
                        b.id,
                        sizes,
                        size_gap,
                        counts,
                        count_gap
                    );
                }
            }
        }
        Ok(())
    }

    /// Whether moving one replica from `from` to `to` leaves both within `gap` of each other,
    /// and each within `gap` of every `Up` server or closer to it than before: what a size
    /// move may do to counts (`counts_allow`, said the other way round).
    fn one_move_keeps_counts(
        counts: &BTreeMap<u64, usize>,
        up: &[&StoreView],
        from: u64,
        to: u64,
        gap: usize,
    ) -> bool {
        let after = |s: u64| match s {
            s if s == from => counts[&s] - 1,
            s if s == to => counts[&s] + 1,
            _ => counts[&s],
        };
        let fine = |x: u64, w: u64| {
            let now = after(x).abs_diff(after(w));
            now <= gap || now < counts[&x].abs_diff(counts[&w])
        };
        after(from).abs_diff(after(to)) <= gap
            && up.iter().all(|w| fine(from, w.id) && fine(to, w.id))
    }
}
