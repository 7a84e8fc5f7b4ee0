//! Start and stop Stratus nodes on this machine: the one harness behind `stratus up`,
//! `stratus demo`, `stratus bench`, the bench crate's end-to-end suites and every end-to-end
//! test. Before it, the command line and the tests each had a supervisor, a way of writing node
//! configs (TOML tables built by hand) and a blocking HTTP client of their own, and they drifted
//! apart: one appended logs and killed stragglers, the other piped stdout; one wrote keys the
//! other had renamed.
//!
//! Modules, in the order a node's life uses them:
//!
//! * [`certs`]: a throwaway CA and node certificates for a TLS cluster (`stratus up --tls`);
//! * [`ports`]: free ports reserved before the nodes that need each other's addresses start;
//! * [`config_file`]: a node's config is its program's own config struct, serialized, and
//!   proven to load back equal before it is written;
//! * [`supervisor`]: spawn a node with its output in a log, wait for its listening line, stop
//!   it with SIGTERM and a deadline, SIGKILL it on drop, signal it for fault injection,
//!   restart it once it died;
//! * [`restart_policy`]: when to restart a node that died, and when to give up;
//! * [`http`]: blocking calls to a node, safe from any thread;
//! * [`metrics`]: a node's `/metrics` page, read strictly (a missing series is an error);
//! * [`etcd`]: a real etcd cluster (one member or several) for the placement driver's tests
//!   and benchmarks, each member SIGKILLable and restartable.
//!
//! Which nodes make a cluster (the six of `stratus up`, the pairs of a test) is the caller's
//! business: this crate knows how to run one node, not what a cluster is. The client library
//! never depends on it.

pub mod certs;
pub mod config_file;
pub mod etcd;
pub mod http;
pub mod metrics;
pub mod ports;
pub mod restart_policy;
pub mod supervisor;

pub use config_file::NodeConfig;
pub use restart_policy::{RestartDecision, RestartPolicy};
pub use supervisor::{Launch, NodeError, NodeProcess};
