//! stratus-worker: stateless remote coprocessor. A storage server POSTs an offload body (a cop
//! request, the memtable rows a read needs, and a ChangeSet naming the SST files); the worker
//! rebuilds a read-only snapshot over the shared object store and runs the request on it,
//! returning exactly what the server would have computed locally.
//!
//! Modules in the order a request flows through them:
//! * [`config`]: the TOML config (`[worker]`, `[dfs]`);
//! * [`state`]: what requests share: the object store, the block cache, counters;
//! * [`service`]: the HTTP router and handlers;
//! * [`coprocessor`]: decoding the body, rebuilding the snapshot, running the handler;
//! * [`metrics`]: the worker's prometheus metrics.

pub mod config;
pub mod coprocessor;
pub mod metrics;
pub mod service;
pub mod state;

pub use config::{WorkerConfig, WorkerSection};
pub use state::{StartError, WorkerState};

/// An error and each of its sources on one line, joined by `": "`: our errors never repeat
/// their source's text, so the chain is how a reason reaches a log line or an HTTP answer.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        source = inner.source();
    }
    s
}
