//! Node plumbing: what the processes of a Stratus cluster share at their edges, so that the
//! storage server, the worker and the entry node (the client) behave the same way there. No
//! engine: the client links this crate, and `.ci/run` fails if the engine ever comes with it.
//!
//! In the order a process meets them:
//!
//! * [`config`]: `--config path`, TOML with every key optional and unknown keys rejected by
//!   name, the effective config printed back (sizes and durations are `types::units`; the
//!   `[dfs]` section is `kvengine::dfs_section`, read only by the nodes that open a store);
//! * [`logging`]: `tracing` events to stderr, filtered by `STRATUS_LOG`;
//! * [`http`]: binding, serving until SIGTERM with a grace period within the listener bounds
//!   of [`http_limits`] (`[http]`), protobuf bodies, `/metrics`;
//! * [`tls`]: `[security]`, TLS with a cluster CA on both ends of every connection (mutual:
//!   certificates checked against the CA, peers' names against `cert-allowed-cn`), each
//!   peer a node, an admin or a client by its name; [`access`]: every request's path checked
//!   against that tier (`wire::access`);
//! * [`client`]: the HTTP client (http and https) processes use to call each other;
//! * [`pd_client`]: the placement driver's client (leader following, batched timestamps);
//! * [`traffic`]: network bytes by path and zone, counted by that client and by every node's
//!   HTTP server (`stratus_network_bytes_total`, `stratus_network_cross_zone_bytes_total`);
//! * the rules both ends of an offload apply to the same request, written once: [`topn_paging`]
//!   (a large TopN goes to a worker in pages: the server applies it before shipping, the worker
//!   to requests from servers that predate it) and [`remote_answer`] (a result computed on a
//!   shipped snapshot answers as its origin would: the server stamps offloaded results, the
//!   worker delegate ones);
//! * [`fuzzing`]: what the fuzz targets that POST bodies through a node's router share (the
//!   endpoint table, the in-process call, the check every answer must pass).

pub mod access;
pub mod client;
pub mod config;
pub mod fuzzing;
pub mod http;
pub mod http_limits;
pub mod logging;
pub mod open_files;
pub mod pd_client;
pub mod remote_answer;
pub mod tls;
pub mod topn_paging;
pub mod traffic;

pub use client::{ClientError, HttpClient, HttpReply};
pub use config::ConfigError;
pub use pd_client::{PdClient, PdClientError};
pub use traffic::{Exchange, Meter};

/// An error and each of its sources on one line, joined by `": "`: our errors never repeat
/// their source's text, so the chain is how a reason reaches a log line or an HTTP answer.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        source = inner.source();
    }
    s
}
