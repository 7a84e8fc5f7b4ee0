//! Bulk loading: rows committed at once, without a client-driven two-phase commit.
//!
//! The rows are grouped by region and each group goes through a one-phase commit (1PC) of the
//! transaction layer with a fresh start_ts: the same latches, conflict checks and memory locks
//! as any transaction, so a load never breaks a reader's snapshot or a concurrent
//! transaction, and each region's rows appear atomically. Rows in different regions commit
//! separately (a load is not one transaction across regions).

use std::collections::BTreeMap;

use crate::node::Node;
use crate::txn::{Mutation, PrewriteRequest, Result, TxnError};

/// Commits `pairs`; returns the highest commit_ts used.
pub fn raw_load(node: &Node, pairs: Vec<(Vec<u8>, Vec<u8>)>) -> Result<u64> {
    if pairs.is_empty() {
        return Err(TxnError::InvalidRequest {
            what: "raw load needs at least one pair, found none".into(),
        });
    }
    let storage = &node.storage;
    let mut by_region: BTreeMap<u64, Vec<Mutation>> = BTreeMap::new();
    for (k, v) in pairs {
        let id = storage.shard_for_key(&k)?;
        by_region.entry(id).or_default().push(Mutation::put(k, v));
    }
    let mut max_commit = 0;
    for (_, mutations) in by_region {
        let start_ts = node.timestamps.get_ts()?;
        let mut req = PrewriteRequest::new(mutations, start_ts, 3_000);
        req.try_one_pc = true;
        let resp = storage.prewrite(&req)?;
        let commit_ts = match resp.one_pc_commit_ts {
            Some(ts) => ts,
            None => {
                // One region, so 1PC only declines for a retried prewrite; finish in two phases.
                let commit_ts = node.timestamps.get_ts()?.max(resp.min_commit_ts);
                let keys: Vec<Vec<u8>> = req.mutations.iter().map(|m| m.key.clone()).collect();
                storage.commit(&keys, start_ts, commit_ts)?;
                commit_ts
            }
        };
        max_commit = max_commit.max(commit_ts);
    }
    Ok(max_commit)
}
