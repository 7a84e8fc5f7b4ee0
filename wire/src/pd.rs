//! What servers, workers, clients and `stratus ctl` ask the placement driver (`stratus pd`).
//!
//! Every instance answers; only the leader (elected through the metadata store) hands out
//! timestamps and ids. A follower answers with `error` set and `leader` naming the leader it
//! knows, so a caller configured with every instance's URL finds the leader in one hop.

use prost::Message;

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
