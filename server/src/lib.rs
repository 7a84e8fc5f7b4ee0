//! The Stratus storage server.
//!
//! In the order a request meets them: [`config`] (the TOML file), [`node`] (the engine, its
//! regions, the TSO, the split checker; the `node` crate is the plumbing shared with the
//! worker and the client), [`api`] (the HTTP API), the transaction layer
//! ([`txn`]: 2PC, 1PC and async commit over kvengine, plus an in-process coordinator) with its
//! [`tso`], [`remote_tso`], [`concurrency_manager`] (max_ts and memory locks) and
//! [`latches`]; [`raw_load`] (bulk rows through 1PC); and the coprocessor path:
//! [`coprocessor`] (region checks, memory locks, cache fast path) with [`offload_policy`] (the
//! offload decision, fed by [`pattern_history`] and [`cpu_load`]) and [`dispatcher`] (shipping
//! a snapshot to a worker, retries, fallback) with TopN paging (`node::topn_paging`, shared
//! with the worker) and [`worker_pool`] (which worker, by zone and liveness); [`delegate`]
//! (`POST /delegate`: a worker's request for a snapshot), sharing [`remote_snapshot`] with the
//! dispatcher. [`metrics`] lists what the server exports. [`fuzzing`] holds the
//! `server_request` fuzz target: a body POSTed through the router to a node with a small engine.

pub mod api;
pub mod concurrency_manager;
pub mod config;
pub mod coprocessor;
pub mod cpu_load;
pub mod delegate;
pub mod dispatcher;
pub mod fuzzing;
pub mod latches;
pub mod launch;
pub mod members;
pub mod metrics;
pub mod node;
pub mod offload_policy;
pub mod pattern_history;
pub mod pd_heartbeat;
pub mod pd_source;
pub mod raw_load;
pub mod region_error;
pub mod remote_compaction;
pub mod remote_snapshot;
pub mod remote_tso;
pub mod store_ident;
pub mod tso;
pub mod txn;
pub mod worker_pool;

pub use concurrency_manager::ConcurrencyManager;
pub use tso::{Clock, ManualClock, SystemClock, TimestampSource, Tso, TsoError, TsoOptions};
pub use txn::{Storage, TxnClient, TxnError};
