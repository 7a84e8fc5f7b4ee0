//! stratus-worker: stateless remote coprocessor. A storage server POSTs an offload body (a cop
//! request, the memtable rows a read needs, and a ChangeSet naming the SST files); the worker
//! rebuilds a read-only snapshot over the shared object store and runs the request on it,
//! returning exactly what the server would have computed locally.
//!
//! Modules in the order a request flows through them:
//! * [`config`]: the TOML config (`[worker]`, `[dfs]`, `[cop-limiter]`,
//!   `cop-topn-max-pushdown-rows`);
//! * [`state`]: what requests share: the object store, the block cache, the limiter, counters;
//! * [`service`]: the HTTP router and handlers;
//! * [`coprocessor`]: decoding the body, rebuilding the snapshot, running the handler;
//! * [`delegate`]: the delegate path, a client's request run on a snapshot asked from the
//!   owning server;
//! * [`topn_paging`]: paging large TopNs from servers that do not;
//! * [`cop_limiter`]: waiting (or 503) while memory is high, per-keyspace throughput;
//! * [`metrics`]: the worker's prometheus metrics;
//! * [`fuzzing`]: the `offload_body` fuzz target, the whole of the above but the HTTP.

pub mod compaction;
pub mod config;
pub mod cop_limiter;
pub mod coprocessor;
pub mod delegate;
pub mod fuzzing;
pub mod known_servers;
pub mod launch;
pub mod metrics;
pub mod service;
pub mod state;
pub mod topn_paging;

pub use config::{CopLimiterSection, MemorySourceKind, WorkerConfig, WorkerSection};
pub use state::{StartError, WorkerState};

pub use ::node::error_chain;
