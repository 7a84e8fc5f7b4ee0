//! Cluster plumbing: timestamps, the regions a server owns, split, and raw bulk load.

use prost::Message;
use types::{RegionId, Zone};

/// `POST /tso`: `count` consecutive timestamps (at least 1).
#[derive(Clone, PartialEq, Message)]
pub struct TsoRequest {
    #[prost(uint32, tag = "1")]
    pub count: u32,
}

/// The first of `count` consecutive timestamps: `first_ts .. first_ts + count`.
#[derive(Clone, PartialEq, Message)]
pub struct TsoResponse {
    #[prost(uint64, tag = "1")]
    pub first_ts: u64,
    #[prost(uint32, tag = "2")]
    pub count: u32,
    #[prost(string, tag = "3")]
    pub error: String,
    /// Set by a placement-driver instance that is not the leader (with `error`): the base URL
    /// of the leader it knows, empty when none is elected. A client retries there.
    #[prost(string, tag = "4")]
    pub leader: String,
}

/// One region (shard) of a server: `[start, end)`, empty end = unbounded.
#[derive(Clone, PartialEq, Eq, Message)]
pub struct Region {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// The epoch: raised by every split; a request routed with another one gets a region error.
    #[prost(uint64, tag = "2")]
    pub ver: u64,
    #[prost(bytes = "vec", tag = "3")]
    pub start: Vec<u8>,
    #[prost(bytes = "vec", tag = "4")]
    pub end: Vec<u8>,
    /// The data version a cache hit would be checked against (informational).
    #[prost(uint64, tag = "5")]
    pub data_version: u64,
    /// Bytes in memtables and SST files (an estimate).
    #[prost(uint64, tag = "6")]
    pub approximate_size: u64,
    /// The conf version: the Raft log index of the last membership change the answering
    /// replica applied (0: the initial members), so it only grows and is the same on every
    /// replica at the same membership. Reports are ordered by `(ver, conf_ver, leader_term)`.
    /// A scheduling step names the `(ver, conf_ver)` it was planned at, and the leader drops
    /// it unless the region is still there.
    #[prost(uint64, tag = "7")]
    pub conf_ver: u64,
    /// The servers holding a replica: the voters and learners of the region's Raft group as
    /// the answering replica applied them (or the one answering server when it runs alone).
    #[prost(message, repeated, tag = "8")]
    pub peers: Vec<Peer>,
    /// The store id of the leader as the answering server knows it (0: unknown).
    #[prost(uint64, tag = "9")]
    pub leader_store_id: u64,
    /// The Raft term `leader_store_id` leads in: of two answers naming different leaders, the
    /// higher term is the newer.
    #[prost(uint64, tag = "10")]
    pub leader_term: u64,
}

impl Region {
    /// The id, typed (the field stays `u64` on the wire).
    pub fn region_id(&self) -> RegionId {
        RegionId(self.id)
    }

    /// The peer named as leader, when it is one of `peers`.
    pub fn leader(&self) -> Option<&Peer> {
        match self.leader_store_id {
            0 => None,
            id => self.peers.iter().find(|p| p.store_id == id),
        }
    }

    /// The zones holding a replica, each once, in peer order.
    pub fn replica_zones(&self) -> Vec<Zone> {
        let mut zones: Vec<Zone> = Vec::new();
        for z in self.peers.iter().filter_map(Peer::zone) {
            if !zones.contains(&z) {
                zones.push(z);
            }
        }
        zones
    }
}

/// One replica of a region: the server holding it.
#[derive(Clone, PartialEq, Eq, Message)]
pub struct Peer {
    /// The server's Raft store id (unique within the cluster; 1 for every standalone server).
    #[prost(uint64, tag = "1")]
    pub store_id: u64,
    /// The server's base URL, `http://host:port`.
    #[prost(string, tag = "2")]
    pub addr: String,
    /// The server's zone label ("" = none).
    #[prost(string, tag = "3")]
    pub zone: String,
    /// Voter or learner (a learner receives the log but takes no part in quorums).
    #[prost(enumeration = "PeerRole", tag = "4")]
    pub role: i32,
    /// Not caught up, as the leader sees it: a replica still waiting for its snapshot or
    /// further behind the leader's log than a live follower would be. Reported by leaders
    /// only; a scheduler promotes a learner only once it is no longer pending.
    #[prost(bool, tag = "5")]
    pub pending: bool,
}

/// The part a replica takes in its region's Raft group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum PeerRole {
    Voter = 0,
    Learner = 1,
}

impl Peer {
    pub fn zone(&self) -> Option<Zone> {
        Zone::label(self.zone.as_str())
    }

    pub fn is_learner(&self) -> bool {
        self.role() == PeerRole::Learner
    }
}

/// `POST /admin/transfer_leader`: ask the region's leader on this server to hand leadership to
/// the replica on `to_store_id`. Answers 204 once the transfer is started (not finished: poll
/// `/regions`); a region this server does not lead gets 409.
#[derive(Clone, PartialEq, Message)]
pub struct TransferLeaderRequest {
    #[prost(uint64, tag = "1")]
    pub region_id: u64,
    #[prost(uint64, tag = "2")]
    pub to_store_id: u64,
}

#[derive(Clone, PartialEq, Message)]
pub struct Label {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(string, tag = "2")]
    pub value: String,
}

/// A node's configured labels (`key = value` pairs) as they travel.
pub fn labels<'a>(pairs: impl IntoIterator<Item = (&'a String, &'a String)>) -> Vec<Label> {
    pairs
        .into_iter()
        .map(|(key, value)| Label {
            key: key.clone(),
            value: value.clone(),
        })
        .collect()
}

/// `GET /regions`.
#[derive(Clone, PartialEq, Message)]
pub struct RegionsResponse {
    /// Sorted by start key.
    #[prost(message, repeated, tag = "1")]
    pub regions: Vec<Region>,
    /// The server's labels (`zone` among them), sorted by key.
    #[prost(message, repeated, tag = "2")]
    pub labels: Vec<Label>,
    /// The address the server listens on.
    #[prost(string, tag = "3")]
    pub addr: String,
}

impl RegionsResponse {
    /// The server's `zone` label (`None`: no label, or the empty one).
    pub fn zone(&self) -> Option<Zone> {
        crate::pd::zone_of(&self.labels)
    }
}

/// `POST /split`: split `region_id` at `split_key` (which must be strictly inside it).
#[derive(Clone, PartialEq, Message)]
pub struct SplitRequest {
    #[prost(uint64, tag = "1")]
    pub region_id: u64,
    #[prost(bytes = "vec", tag = "2")]
    pub split_key: Vec<u8>,
}

#[derive(Clone, PartialEq, Message)]
pub struct SplitResponse {
    /// `[start, split_key)` and `[split_key, end)`.
    #[prost(message, optional, tag = "1")]
    pub left: Option<Region>,
    #[prost(message, optional, tag = "2")]
    pub right: Option<Region>,
    #[prost(message, optional, tag = "3")]
    pub region_error: Option<crate::coprocessor::RegionError>,
    #[prost(string, tag = "4")]
    pub error: String,
}

#[derive(Clone, PartialEq, Eq, Message)]
pub struct KvPair {
    #[prost(bytes = "vec", tag = "1")]
    pub key: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub value: Vec<u8>,
}

/// `POST /raw/load`: bulk data committed at one fresh timestamp, bypassing two-phase commit
/// (meant for loading data no transaction is touching; a key locked by a transaction fails
/// the whole request with `locked`, nothing written).
#[derive(Clone, PartialEq, Message)]
pub struct RawLoadRequest {
    #[prost(message, repeated, tag = "1")]
    pub pairs: Vec<KvPair>,
}

#[derive(Clone, PartialEq, Message)]
pub struct RawLoadResponse {
    /// The commit_ts every pair was written at.
    #[prost(uint64, tag = "1")]
    pub commit_ts: u64,
    #[prost(message, optional, tag = "2")]
    pub error: Option<crate::txn::KeyError>,
}
