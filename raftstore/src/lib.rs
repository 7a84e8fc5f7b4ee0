//! Raft replication of regions (issue 16): the parts of the store that need no engine and no
//! Raft log, on which the store loop is built.
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
//! * [`fuzzing`]: the check of the `raft_batch` fuzz target (decode, convert, round trip).

pub mod config;
pub mod convert;
pub mod fuzzing;
pub mod logger;
pub mod metrics;
pub mod transport;

pub use config::{PeerConfig, RaftConfig};
pub use convert::ConvertError;
pub use logger::logger;
pub use transport::{
    ChannelNetwork, ChannelTransport, HttpTransport, HttpTransportOptions, Transport,
};
