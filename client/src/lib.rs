//! Stratus client: the library of the entry node, the process that receives an analytic query
//! and fans it out over the cluster (issue 9).
//!
//! It speaks the protocol of the `wire` crate (requests, responses, datums, key and row codecs,
//! paging ranges) over the HTTP plumbing of `node`, and links no engine: `.ci/run` fails when
//! `cargo tree -p client -e normal` reaches `kvengine`, `sst`, `memtable` or `aws-sdk-s3`.
//!
//! Modules in the order a request uses them:
//!
//! * [`config`]: [`ClientConfig`] (servers, workers, own labels, paging, cache, TTLs), validated
//!   with errors that name the field;
//! * [`region_cache`]: regions learned from each server's `GET /regions`, with their replicas
//!   and leader, looked up by key, updated on region errors and unreachable servers;
//!   [`backoff`]: the one retry policy (a deadline per logical request); `region_rpc`: the
//!   reactions to region errors and the driver of keyed transaction commands; [`worker_liveness`]: workers probed at `GET /status`, a failed
//!   probe marks one dead for a TTL;
//! * [`paging`]: [`Client::coprocessor`], the paging driver: splits ranges by region, pages
//!   each region 128 → 50,000 rows, follows resume ranges, re-splits on region errors, resolves
//!   locks ([`lock_resolver`]) and applies the final merge ([`final_merge`]);
//! * [`cop_cache`]: the coprocessor cache (key, admission, LRU by bytes, hit protocol);
//! * [`replica_read`]: the `tidb_replica_read` variable: which replica of a region a request
//!   sent to a server goes to (a follower serves it as a replica read);
//! * [`node_selection`]: the `tidb_tiflash_node_selection_policy` variable and the choice of
//!   one worker per region of a multi-region request, by zone, liveness and load (pure, no
//!   I/O);
//! * [`variables`]: the session's system variables (`stratus_remote_coprocessor`,
//!   `tidb_tiflash_node_selection_policy`, `stratus_paging_initial_size`,
//!   `stratus_paging_max_size`, `stratus_cop_cache`, `tidb_enable_async_commit`,
//!   `tidb_replica_read`), GLOBAL
//!   values stored in the cluster;
//! * [`delegate`]: the delegate path: with `stratus_remote_coprocessor` ON,
//!   [`Session::coprocessor`] sends each region's pages to the worker node selection chose, at
//!   its `POST /delegate/coprocessor`, through the same paging driver;
//! * [`transport`]: protobuf over HTTP; [`metrics`]; [`error`].
//! * [`sql`]: the SQL front (CREATE TABLE, INSERT, UPDATE, DELETE, SELECT over one table,
//!   EXPLAIN, SET, SHOW VARIABLES, SHOW WARNINGS) on a [`Session`].

pub mod backoff;
pub mod config;
pub mod cop_cache;
pub mod delegate;
pub mod error;
pub mod final_merge;
mod join;
pub mod lock_resolver;
pub mod metrics;
pub mod node_selection;
pub mod paging;
pub mod region_cache;
mod region_rpc;
pub mod replica_read;
pub mod sql;
pub mod topology_watch;
pub mod transport;
pub mod variables;
pub mod worker_liveness;

pub use config::{ClientConfig, CopCacheConfig, PagingConfig};
pub use cop_cache::{CacheStats, CopCache};
pub use error::{ConfigError, Error, ErrorKind};
pub use final_merge::FinalMerge;
pub use node_selection::{
    Assignment, NodeSelectionError, NodeSelectionPolicy, RegionReplicas, Selection,
    UnknownPolicyError, WorkerNode, select_nodes,
};
pub use paging::{Client, CopOptions, CopResult, CopStats, PageRows, ServedBy};
pub use variables::{Scope, Session, Setting, VariableError, Variables};
