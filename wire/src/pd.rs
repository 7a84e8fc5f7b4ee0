//! What servers, workers, clients and `stratus ctl` ask the placement driver (`stratus pd`).
//!
//! Every instance answers; only the leader (elected through the metadata store) hands out
//! timestamps and ids. A follower answers with `error` set and `leader` naming the leader it
//! knows, so a caller configured with every instance's URL finds the leader in one hop.

use prost::Message;
use types::Zone;

use crate::region::Label;

/// Ids `1..=RESERVED_IDS` are never handed out by the allocator: a cluster's initial regions
/// (the configured ranges, numbered by position on every replica alike, before any server
/// could ask) use them, so an allocated id never collides with one.
pub const RESERVED_IDS: u64 = 100;

/// `POST /pd/alloc-id`: `count` new ids (at least 1), unique in the cluster for ever. Region,
/// server and worker ids come from here, so they stay small (`region 14`).
#[derive(Clone, PartialEq, Message)]
pub struct AllocIdRequest {
    #[prost(uint32, tag = "1")]
    pub count: u32,
}

/// The ids `first .. first + count`, or `error` (with `leader` when this instance does not lead).
#[derive(Clone, PartialEq, Message)]
pub struct AllocIdResponse {
    #[prost(uint64, tag = "1")]
    pub first: u64,
    #[prost(uint32, tag = "2")]
    pub count: u32,
    #[prost(string, tag = "3")]
    pub error: String,
    #[prost(string, tag = "4")]
    pub leader: String,
}

/// `GET /pd/members`: this instance and the leader it knows.
#[derive(Clone, PartialEq, Message)]
pub struct MembersResponse {
    /// This instance's name (`[pd] name`).
    #[prost(string, tag = "1")]
    pub name: String,
    /// This instance's advertised base URL.
    #[prost(string, tag = "2")]
    pub url: String,
    /// The leader's base URL; empty while none is elected.
    #[prost(string, tag = "3")]
    pub leader: String,
    /// The cluster id, fixed when the metadata store was first used.
    #[prost(uint64, tag = "4")]
    pub cluster_id: u64,
    /// Where the metadata lives (`etcd http://...`, `embedded /path`).
    #[prost(string, tag = "5")]
    pub store: String,
}

/// The `zone` label among `labels` (`None`: no label, or the empty one).
pub fn zone_of(labels: &[Label]) -> Option<Zone> {
    labels
        .iter()
        .find(|l| l.key == "zone")
        .and_then(|l| Zone::label(l.value.as_str()))
}

impl StoreHeartbeat {
    /// The server's zone label.
    pub fn zone(&self) -> Option<Zone> {
        zone_of(&self.labels)
    }
}

impl WorkerInfo {
    /// The worker's zone label.
    pub fn zone(&self) -> Option<Zone> {
        zone_of(&self.labels)
    }
}

/// `POST /pd/store-heartbeat`: a storage server says it is alive and what it holds. The
/// placement driver keeps it registered under a lease it renews on every heartbeat; a server
/// silent for longer than the lease is gone from `GET /pd/stores`.
#[derive(Clone, PartialEq, Message)]
pub struct StoreHeartbeat {
    /// The server's store id (`[server] node-id`).
    #[prost(uint64, tag = "1")]
    pub store_id: u64,
    /// Its base URL.
    #[prost(string, tag = "2")]
    pub url: String,
    #[prost(message, repeated, tag = "3")]
    pub labels: Vec<Label>,
    /// Regions with a replica here.
    #[prost(uint64, tag = "4")]
    pub region_count: u64,
    /// Regions led here.
    #[prost(uint64, tag = "5")]
    pub leader_count: u64,
    /// Bytes of the regions held here (memtables + files, an estimate).
    #[prost(uint64, tag = "6")]
    pub used_size: u64,
    /// The regions this server leads, as it knows them (range, epoch, replicas, term): the
    /// routing table is their reflection. Raft decides leadership; the table follows.
    #[prost(message, repeated, tag = "7")]
    pub led_regions: Vec<crate::region::Region>,
    /// Every region the server holds a replica of (led or not): the placement driver answers
    /// `DestroyReplica` for one the routing table has stopped listing on this server.
    #[prost(uint64, repeated, tag = "8")]
    pub held_regions: Vec<u64>,
    /// The smallest start_ts of the locks in the regions held here (0: none): the GC safe
    /// point stays below it (`pd::gc`).
    #[prost(uint64, tag = "9")]
    pub oldest_lock_ts: u64,
}

/// `POST /pd/worker-heartbeat`: a worker says it is alive. The first heartbeat of a URL gets a
/// new worker id; later ones keep it.
#[derive(Clone, PartialEq, Message)]
pub struct WorkerHeartbeat {
    #[prost(string, tag = "1")]
    pub url: String,
    #[prost(message, repeated, tag = "2")]
    pub labels: Vec<Label>,
}

/// The answer to a heartbeat: `error` (with `leader` when this instance does not lead), the
/// cluster id, and the id of a worker.
#[derive(Clone, PartialEq, Message)]
pub struct HeartbeatResponse {
    #[prost(string, tag = "1")]
    pub error: String,
    #[prost(string, tag = "2")]
    pub leader: String,
    #[prost(uint64, tag = "3")]
    pub cluster_id: u64,
    #[prost(uint64, tag = "4")]
    pub worker_id: u64,
    /// Scheduling steps for regions the server leads (answers to a store heartbeat): each is
    /// carried out by the region's leader when the region is still at the step's epoch.
    #[prost(message, repeated, tag = "5")]
    pub steps: Vec<RegionStep>,
    /// The GC safe point (answers to a store heartbeat; 0: none yet): the server's compactions
    /// may drop versions below it and it refuses reads below it.
    #[prost(uint64, tag = "6")]
    pub gc_safe_point: u64,
}

/// One step of moving a replica (the placement driver's operators, `pd::scheduler`): a
/// membership change proposed through the region's Raft log, or a leader transfer. A step
/// planned against another `(ver, conf_ver)` than the region's current one is dropped by the
/// server: the placement driver plans again from the next heartbeat.
#[derive(Clone, PartialEq, Message)]
pub struct RegionStep {
    #[prost(uint64, tag = "1")]
    pub region_id: u64,
    #[prost(uint64, tag = "2")]
    pub ver: u64,
    #[prost(uint64, tag = "3")]
    pub conf_ver: u64,
    #[prost(enumeration = "StepKind", tag = "4")]
    pub kind: i32,
    /// The store the step is about: the replica added, promoted, removed, or the new leader.
    #[prost(uint64, tag = "5")]
    pub store_id: u64,
    /// That store's base URL (for an added replica: where its Raft messages go).
    #[prost(string, tag = "6")]
    pub store_url: String,
    /// That store's zone (`""`: none), so the leader knows an added replica's zone at once:
    /// it reads the registrations only for servers whose address it lacks.
    #[prost(string, tag = "7")]
    pub store_zone: String,
}

/// What a [`RegionStep`] does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum StepKind {
    Unknown = 0,
    /// A new replica joins as a learner and catches up by snapshot.
    AddLearner = 1,
    /// A caught-up learner becomes a voter.
    PromoteLearner = 2,
    /// A replica leaves the group (a leader removing itself transfers leadership first).
    RemovePeer = 3,
    TransferLeader = 4,
    /// The replica on the heartbeat's own server is no longer a member (the routing table,
    /// from the region's leader, has not listed it for `node-lease-ttl`): it leaves. For a
    /// replica removed while its server was down, which never learned of it.
    DestroyReplica = 5,
}

/// A server's scheduling state, set by the operator (`stratus ctl server drain`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum StoreState {
    /// Takes replicas and leaders.
    Up = 0,
    /// Every replica is moved off; it receives none.
    Draining = 1,
}

/// `POST /pd/store-state`: sets a server's scheduling state (answered by a
/// [`HeartbeatResponse`] with only `error`/`leader`/`cluster_id` set).
#[derive(Clone, PartialEq, Message)]
pub struct StoreStateRequest {
    #[prost(uint64, tag = "1")]
    pub store_id: u64,
    #[prost(enumeration = "StoreState", tag = "2")]
    pub state: i32,
}

/// Why an operator moves a replica.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum OperatorReason {
    Unknown = 0,
    /// A replica's server has been gone longer than `max-store-down-time`.
    ReplaceDown = 1,
    /// Its server is draining.
    Drain = 2,
    /// Two replicas share a zone while another zone has none.
    Isolation = 3,
    /// Replica counts differ too much between servers.
    BalanceRegions = 4,
    /// Leader counts differ too much between servers.
    BalanceLeaders = 5,
    /// The region has fewer voters than the replica count.
    AddMissing = 6,
    /// Region sizes (the bytes of the regions each holds) differ too much between servers
    /// whose replica counts are even enough; the move keeps them so. Tag 7: the next free
    /// one (tags are never reused, an older `stratus ctl` shows it as `Unknown`).
    BalanceSize = 7,
    /// A placement rule wants a replica in a zone the region has none in (a learner once the
    /// voters are placed), or none in a zone it has one in.
    Placement = 8,
}

/// An operator in flight: moving one region's replica from one server to another, one step
/// at a time (add learner, promote, remove), or moving its leader.
#[derive(Clone, PartialEq, Message)]
pub struct OperatorInfo {
    #[prost(uint64, tag = "1")]
    pub region_id: u64,
    #[prost(enumeration = "OperatorReason", tag = "2")]
    pub reason: i32,
    /// The store losing the replica or the leadership (0: none, a replica is only added).
    #[prost(uint64, tag = "3")]
    pub from_store: u64,
    /// The store gaining it (0: none, a replica is only removed).
    #[prost(uint64, tag = "4")]
    pub to_store: u64,
    /// The step the operator waits for now.
    #[prost(enumeration = "StepKind", tag = "5")]
    pub step: i32,
    /// Milliseconds since the operator started.
    #[prost(uint64, tag = "6")]
    pub age_ms: u64,
}

/// `POST /pd/operators` (answered by the leader: operators live in its memory).
#[derive(Clone, PartialEq, Message)]
pub struct OperatorsRequest {}

/// The answer to an [`OperatorsRequest`].
#[derive(Clone, PartialEq, Message)]
pub struct OperatorsResponse {
    #[prost(message, repeated, tag = "1")]
    pub operators: Vec<OperatorInfo>,
    #[prost(string, tag = "2")]
    pub error: String,
    #[prost(string, tag = "3")]
    pub leader: String,
}

/// A registered storage server (`GET /pd/stores`): its last heartbeat.
#[derive(Clone, PartialEq, Message)]
pub struct StoreInfo {
    #[prost(message, optional, tag = "1")]
    pub heartbeat: Option<StoreHeartbeat>,
    /// Milliseconds since the Unix epoch of the last heartbeat the leader took.
    #[prost(uint64, tag = "2")]
    pub last_heartbeat_ms: u64,
    /// Its scheduling state.
    #[prost(enumeration = "StoreState", tag = "3")]
    pub state: i32,
}

/// A registered worker (`GET /pd/workers`).
#[derive(Clone, PartialEq, Message)]
pub struct WorkerInfo {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(string, tag = "2")]
    pub url: String,
    #[prost(message, repeated, tag = "3")]
    pub labels: Vec<Label>,
    #[prost(uint64, tag = "4")]
    pub last_heartbeat_ms: u64,
}

/// `GET /pd/stores`, `GET /pd/workers`, `GET /pd/regions`: the cluster as the placement driver
/// knows it, read from the metadata store at `revision`.
#[derive(Clone, PartialEq, Message)]
pub struct ClusterView {
    #[prost(message, repeated, tag = "1")]
    pub stores: Vec<StoreInfo>,
    #[prost(message, repeated, tag = "2")]
    pub workers: Vec<WorkerInfo>,
    /// The routing table, in key order.
    #[prost(message, repeated, tag = "3")]
    pub regions: Vec<crate::region::Region>,
    #[prost(uint64, tag = "4")]
    pub revision: u64,
    #[prost(string, tag = "5")]
    pub error: String,
    #[prost(string, tag = "6")]
    pub leader: String,
    /// The GC safe point persisted in the metadata store (0: none yet).
    #[prost(uint64, tag = "7")]
    pub gc_safe_point: u64,
    /// The placement rules, by id.
    #[prost(message, repeated, tag = "8")]
    pub rules: Vec<PlacementRule>,
}

/// A placement rule: the regions overlapping `[start, end)` (empty `end`: unbounded) keep one
/// replica in each of `zones` and none in any other zone, so that each listed zone holds a
/// whole replica of the range. The voters (at most `max-replicas`, at most one per zone) are
/// placed in listed zones; the listed zones left get Raft learners, which take no part in
/// quorums and serve follower reads. A region overlapping several rules follows the one
/// starting last, then ending first (so a table's rule wins over the whole-cluster one it lies
/// in), ties to the smaller id. The placement driver refuses a zone no registered server is in.
/// Regions no rule covers keep `max-replicas` voters, zone-isolated when the servers span
/// enough zones, and no learners.
#[derive(Clone, PartialEq, Eq, Message)]
pub struct PlacementRule {
    /// Names the rule; setting a rule with an existing id replaces it.
    #[prost(string, tag = "1")]
    pub id: String,
    #[prost(bytes = "vec", tag = "2")]
    pub start: Vec<u8>,
    #[prost(bytes = "vec", tag = "3")]
    pub end: Vec<u8>,
    /// Zone labels, each once, none empty.
    #[prost(string, repeated, tag = "4")]
    pub zones: Vec<String>,
}

impl PlacementRule {
    /// Whether the rule's range overlaps `[start, end)` (empty ends unbounded).
    pub fn overlaps(&self, start: &[u8], end: &[u8]) -> bool {
        (self.end.is_empty() || start < self.end.as_slice())
            && (end.is_empty() || self.start.as_slice() < end)
    }

    /// Why the rule cannot be kept: an id that is empty or not a plain name, no zone, an empty or repeated zone, or an
    /// empty range.
    pub fn validate(&self) -> Result<(), String> {
        let id = &self.id;
        let id_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
        if id.is_empty() || !id.chars().all(id_char) {
            return Err(format!(
                "expected a rule id of letters, digits, '-', '_' and '.', found {id:?}"
            ));
        }
        if self.zones.is_empty() {
            return Err(format!(
                "rule {id:?}: expected at least one zone, found none"
            ));
        }
        for (i, z) in self.zones.iter().enumerate() {
            if z.is_empty() {
                return Err(format!(
                    "rule {id:?}: expected zone labels, found an empty one"
                ));
            }
            if self.zones[..i].contains(z) {
                return Err(format!(
                    "rule {id:?}: expected each zone once, found {z:?} twice"
                ));
            }
        }
        if !self.end.is_empty() && self.start >= self.end {
            return Err(format!(
                "rule {id:?}: expected start < end, found start {} and end {}",
                hex(&self.start),
                hex(&self.end)
            ));
        }
        Ok(())
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `POST /pd/rules` (the leader answers): sets the rule `put` (replacing the one with its id),
/// deletes the rule named `delete`, or neither (a listing). Answered by a [`RulesResponse`]
/// with every rule after the change.
#[derive(Clone, PartialEq, Message)]
pub struct RulesRequest {
    #[prost(message, optional, tag = "1")]
    pub put: Option<PlacementRule>,
    #[prost(string, tag = "2")]
    pub delete: String,
}

#[derive(Clone, PartialEq, Message)]
pub struct RulesResponse {
    #[prost(message, repeated, tag = "1")]
    pub rules: Vec<PlacementRule>,
    #[prost(string, tag = "2")]
    pub error: String,
    #[prost(string, tag = "3")]
    pub leader: String,
}

/// `POST /pd/watch` (the leader answers): a long poll for the cluster's topology. The answer
/// comes as soon as the topology differs from the one `token` names (at once for token 0),
/// or after `wait_ms` without a change (then with the same token), so a caller learns of a new
/// server, worker, region or leader when it happens instead of polling for it.
#[derive(Clone, PartialEq, Message)]
pub struct WatchRequest {
    /// The token of the last answer the caller took (0: none yet).
    #[prost(uint64, tag = "1")]
    pub token: u64,
    /// How long to wait for a change (the leader caps it).
    #[prost(uint32, tag = "2")]
    pub wait_ms: u32,
}

/// The answer to a [`WatchRequest`]: the view and its token (a digest of the servers'
/// addresses, zones and states, the workers and the routing table's ranges, epochs, replicas
/// and leaders, not of counts, sizes or heartbeat times, which change all the time).
#[derive(Clone, PartialEq, Message)]
pub struct WatchResponse {
    #[prost(message, optional, tag = "1")]
    pub view: Option<ClusterView>,
    #[prost(uint64, tag = "2")]
    pub token: u64,
    #[prost(string, tag = "3")]
    pub error: String,
    #[prost(string, tag = "4")]
    pub leader: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(id: &str, start: &[u8], end: &[u8], zones: &[&str]) -> PlacementRule {
        PlacementRule {
            id: id.into(),
            start: start.to_vec(),
            end: end.to_vec(),
            zones: zones.iter().map(|z| z.to_string()).collect(),
        }
    }

    #[test]
    fn a_rule_is_refused_with_what_was_expected_and_found() {
        let cases = [
            (rule("", b"", b"", &["a"]), "found \"\""),
            (rule("a b", b"", b"", &["a"]), "found \"a b\""),
            (rule("r", b"", b"", &[]), "at least one zone"),
            (rule("r", b"", b"", &["a", ""]), "found an empty one"),
            (rule("r", b"", b"", &["a", "a"]), "found \"a\" twice"),
            (rule("r", b"b", b"a", &["a"]), "start 62 and end 61"),
        ];
        for (r, expected) in cases {
            let e = r.validate().unwrap_err();
            assert!(e.contains(expected), "{e} lacks {expected}");
        }
        assert_eq!(rule("whole-1.x", b"", b"", &["a", "b"]).validate(), Ok(()));
        assert_eq!(rule("t", b"a", b"", &["a"]).validate(), Ok(()));
    }

    #[test]
    fn a_rule_overlaps_the_ranges_it_shares_a_key_with() {
        let r = rule("t", b"b", b"d", &["a"]);
        assert!(r.overlaps(b"a", b"c"));
        assert!(r.overlaps(b"c", b""));
        assert!(r.overlaps(b"", b""));
        assert!(!r.overlaps(b"d", b"e"));
        assert!(!r.overlaps(b"a", b"b"));
        assert!(rule("all", b"", b"", &["a"]).overlaps(b"x", b"y"));
    }
}
