//! Raft replication of regions: every region is a Raft group, driven by one store loop per
//! server over the engine (in external-log mode) and the durable Raft log.
//!
//! Every region is a raft-rs 0.7 group, driven by one store loop per server. raft-rs speaks
//! `eraftpb` (rust-protobuf 2, whose parser has an unfixed advisory, RUSTSEC-2024-0437); the
//! network speaks [`wire::raft`] (prost). This crate keeps the two apart and holds what sits
//! around the groups, in the order a message flows:
//!
//! * [`config`]: `[raft]` of `server.toml` ([`RaftConfig`]), validated key by key, and the
//!   `raft::Config` of a group;
//! * [`logger`]: raft-rs's slog records as `tracing` events (target `raft`);
//! * [`convert`]: `eraftpb` <-> `wire::raft`, field by field, refusing what a peer may not send;
//! * [`transport`]: the [`Transport`] the store loop sends through: [`HttpTransport`] between
//!   processes (`POST /raft/batch`, batched per destination), [`ChannelTransport`] between
//!   stores of one test process;
//! * [`metrics`]: the transport's counters;
//! * [`fuzzing`]: the check of the `raft_batch` fuzz target (decode, convert, round trip);
//! * `store`: the loop ([`RaftStore`]): one round at a time ticks, steps and collects the `Ready`
//!   of every region, writes all their entries with one `RaftLog::write`, sends, and applies;
//!   the store thread runs rounds, and so does a writer that finds none running;
//! * `peer` / `peer_storage`: one region's raft-rs node, and raft-rs's `Storage` over the log;
//! * `apply`: what a committed entry does to the engine, decided in one place;
//! * `router` ([`Router`]): proposals and inbound messages into the loop, region status out;
//! * `hibernation`: idle regions stop ticking; stores tell each other they are alive;
//! * `replica_read`: follower reads: the read-index context a follower's read carries to the
//!   leader, and the leader's check of its memory locks and `max_ts` ([`ReplicaReadCheck`]);
//! * `file_gc`: the replicas' file GC indexes in the envelope, so a file a compaction retired
//!   leaves the object store only once no replica needs it;
//! * `sink`: the engine's leader-only flush and compaction results back into the log;
//! * `membership`: membership changes (add a learner, promote, remove), replicas made by a
//!   leader's message, replicas leaving;
//! * [`snapshot_install`]: a Raft snapshot's two durable halves (engine, then log), and the
//!   repair at start of an install a crash cut in two.

mod apply;
pub mod config;
pub mod convert;
mod error;
mod file_gc;
pub mod fuzzing;
mod hibernation;
mod log_convert;
pub mod logger;
mod membership;
pub mod metrics;
mod peer;
mod peer_storage;
mod replica_read;
mod router;
mod sink;
pub mod snapshot_install;
mod standalone;
mod store;
pub mod transport;

pub use apply::Applied;
pub use error::{RaftStoreError, StartError};
pub use replica_read::{ReplicaRead, ReplicaReadCheck};
pub use router::{Callback, ChangePeer, Membership, Proposal, RegionStatus, Router};
pub use standalone::{NoPeers, STANDALONE_STORE_ID, start_standalone};
pub use store::{InitialRegion, RAFT_INIT_INDEX, RAFT_INIT_TERM, RaftStore};

pub use config::{PeerConfig, RaftConfig};
pub use convert::ConvertError;
pub use logger::logger;
pub use transport::{
    ChannelNetwork, ChannelTransport, HttpTransport, HttpTransportOptions, Transport,
};
