//! Stratus client: the library of the entry node, the process that receives an analytic query
//! and fans it out over the cluster.
//!
//! When complete (issue 9) the client knows the cluster (servers and workers, each with a `zone`
//! label), routes coprocessor requests by region, drives paging, keeps a coprocessor cache,
//! merges partial results and chooses the compute nodes (workers) that read each region. Today
//! it holds the last of those, as a pure function with no I/O:
//!
//! * [`node_selection`]: the `tidb_tiflash_node_selection_policy` variable and the choice of
//!   one worker per region of a multi-region request, by zone, liveness and load.

pub mod node_selection;

pub use node_selection::{
    Assignment, NodeSelectionError, NodeSelectionPolicy, RegionReplicas, Selection,
    UnknownPolicyError, WorkerNode, select_nodes,
};
