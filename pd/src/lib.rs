//! The placement driver (`stratus pd`): the cluster's metadata on a proven store, one leader
//! elected through it, and what only one process may hand out (timestamps, ids).
//!
//! * [`meta`]: the metadata store interface (etcd's v3 subset: compare-and-write transactions,
//!   leases) with etcd ([`meta::etcd`]) and an embedded store ([`meta::embedded`]) behind it;
//! * [`keys`]: where each item lives in the store;
//! * [`election`]: the leader key, its lease and the fence every leader write compares;
//! * [`tso`]: timestamps below a persisted mark, strictly increasing across failovers;
//! * [`id_alloc`]: small ids, never repeated;
//! * [`gc`]: the GC safe point, advanced by the leader below every reported lock;
//! * [`registry`]: servers and workers registered under leases, the routing table;
//! * [`stale_replicas`]: replicas the routing table stopped listing (removed while their
//!   server was down), told to leave through the heartbeat answer;
//! * [`scheduler`]: replica scheduling, pure decisions: which replica or leadership of which
//!   region moves where, one step per heartbeat (repairs, drains, zone isolation, balance);
//! * [`watch`]: the topology long poll: the view of each scheduling round, pushed to watchers
//!   when what they route by changed;
//! * [`service`]: one instance: the election loop and the HTTP API;
//! * [`config`], [`launch`]: `stratus pd --config pd.toml`;
//! * [`fuzzing`]: the `pd_request` fuzz target's fixture (every request body the API decodes).

pub mod config;
pub mod election;
pub mod error;
pub mod fuzzing;
pub mod gc;
pub mod id_alloc;
pub mod keys;
pub mod launch;
pub mod meta;
pub mod metrics;
pub mod registry;
pub mod scheduler;
pub mod service;
pub mod stale_replicas;
#[cfg(test)]
mod test_support;
pub mod tso;
pub mod watch;

pub use config::PdConfig;
pub use error::PdError;
