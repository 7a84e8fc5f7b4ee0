//! The delegate path ("first way", issue 9 items 4 and 5): with the session variable
//! `stratus_remote_coprocessor` ON, [`Session::coprocessor`] sends each region's requests to a
//! worker instead of the server owning the region.
//!
//! 1. Every configured worker not within its dead TTL is probed (`GET /status`: liveness and
//!    the worker's `zone` label).
//! 2. The ranges are cut at region boundaries (the region cache gives each region's replicas,
//!    their zones and the leader). [`select_nodes`] chooses one worker per region under the
//!    session's `tidb_tiflash_node_selection_policy`, the entry node's zone (the config's
//!    `labels.zone`) and, per region, its replica zones: the zones of its caught-up replicas,
//!    voters and learners, as the routing table (the placement driver's, or the leaders'
//!    answers) reports them; a replica still being added (`pending`) does not count (on
//!    standalone servers, the one owning server's zone, none when it has no zone label). A selection error fails the
//!    request with [`crate::Error::NodeSelection`]; the selection's warnings are returned in
//!    [`CopResult::warnings`].
//! 3. Each region task then runs the ordinary paging driver ([`crate::paging`]) with its pages
//!    sent to `POST {worker}/delegate/coprocessor` (a plain cop request) with the header
//!    `x-stratus-region-server: {a replica's base URL}`: a caught-up replica in the worker's
//!    own zone when the region has one, as a replica read (`context.replica_read`: the
//!    replica gets a read index from the leader, which checks its memory locks, and waits
//!    until it applied it), else the leader ([`crate::replica_read::in_zone`]). The worker
//!    fetches what the read needs from that server and executes. Resume ranges, region errors (the worker passes
//!    the origin's back: a `NotLeader` moves the header to the new leader; an epoch change
//!    re-splits what is left, the children keeping their parent's worker), an origin the
//!    worker could not reach (its 502: the next replica is tried as on the server path), `locked` answers (resolved through the server's
//!    transaction API) and the final merge are exactly as on the server path. Every page
//!    records the worker that served it ([`crate::PageRows::served_by`]).
//!
//! The coprocessor cache on this path: a worker never answers a cache hit, so the client does
//! not look its cache up and sends no `cache_if_match_version` (a hit answered anyway is the
//! protocol error [`crate::Error::CacheHitWithoutEntry`]). It still sends `is_cache_enabled`, and a
//! computed page is offered to the cache under the same admission rules: the worker sets
//! `cache_last_version` to the owning server's data version and clears `can_be_cached` when
//! that server saw newer versions or locks, so the entry means what a server-computed one
//! means, and a later request on the server path can be answered by a hit from it.
//!
//! A worker that cannot be reached fails the request with a transport error (the next
//! request's probe marks it dead and selection avoids it).

use std::collections::HashMap;
use std::time::Instant;

use wire::coprocessor::{DagRequest, KeyRange};

use crate::error::Result;
use crate::node_selection::{NodeSelectionPolicy, RegionReplicas, select_nodes};
use crate::paging::{Client, CopOptions, CopResult, Dispatch, ServedBy};
use crate::region_cache::RegionRanges;
use crate::variables::Session;

impl Client {
    /// Runs `dag` over `ranges` at `start_ts` on the delegate path, workers chosen under
    /// `policy` (see the module docs).
    pub async fn delegate_coprocessor(
        &self,
        dag: &DagRequest,
        ranges: Vec<KeyRange>,
        start_ts: u64,
        policy: NodeSelectionPolicy,
    ) -> Result<CopResult> {
        let opts = CopOptions::from_config(self.config());
        self.delegate_coprocessor_with(dag, ranges, start_ts, policy, opts)
            .await
    }

    /// [`Client::delegate_coprocessor`] with `opts` instead of the config's paging sizes and
    /// cache use.
    pub async fn delegate_coprocessor_with(
        &self,
        dag: &DagRequest,
        ranges: Vec<KeyRange>,
        start_ts: u64,
        policy: NodeSelectionPolicy,
        opts: CopOptions,
    ) -> Result<CopResult> {
        self.drive(
            dag,
            ranges,
            start_ts,
            Dispatch::Workers(policy),
            opts,
            &mut |_| {},
        )
        .await
    }

    /// One worker per region of `split` (in its order) under `policy`, and the selection's
    /// warnings. Probes the workers first.
    pub(crate) async fn choose_workers(
        &self,
        policy: NodeSelectionPolicy,
        split: &[RegionRanges],
    ) -> Result<(Vec<ServedBy>, Vec<String>)> {
        self.probe_workers().await;
        let liveness = self.worker_liveness();
        let nodes = liveness.nodes_at(Instant::now());
        let addrs: HashMap<u64, String> = liveness
            .workers()
            .into_iter()
            .map(|w| (w.id, w.addr))
            .collect();
        let zones: HashMap<u64, Option<types::Zone>> =
            nodes.iter().map(|n| (n.id, n.zone.clone())).collect();
        let replicas: Vec<RegionReplicas> = split
            .iter()
            .map(|rr| RegionReplicas {
                id: rr.region.id(),
                replica_zones: rr.region.replica_zones(),
            })
            .collect();
        let entry_zone = self.config().zone();
        let selection = select_nodes(policy, entry_zone.as_ref(), &nodes, &replicas)?;
        let targets = selection
            .assignments
            .iter()
            .map(|a| ServedBy::Worker {
                id: a.worker_id,
                addr: addrs
                    .get(&a.worker_id)
                    .cloned()
                    .expect("node selection chooses among the listed workers"),
                zone: zones.get(&a.worker_id).cloned().flatten(),
            })
            .collect();
        Ok((targets, selection.warnings))
    }
}

impl Session<'_> {
    /// Runs `dag` over `ranges` (ascending, non-overlapping) at `start_ts`, as the session's
    /// variables say: `stratus_remote_coprocessor` OFF is [`Client::coprocessor`] (each region
    /// to its server); ON is [`Client::delegate_coprocessor`] under the session's
    /// `tidb_tiflash_node_selection_policy`. Either way with the session's paging sizes
    /// (`stratus_paging_initial_size`, `stratus_paging_max_size`) and cache use
    /// (`stratus_cop_cache`).
    pub async fn coprocessor(
        &self,
        dag: &DagRequest,
        ranges: Vec<KeyRange>,
        start_ts: u64,
    ) -> Result<CopResult> {
        let vars = self.variables();
        let opts = vars.cop_options();
        if vars.remote_coprocessor {
            self.client
                .delegate_coprocessor_with(dag, ranges, start_ts, vars.node_selection_policy, opts)
                .await
        } else {
            self.client
                .coprocessor_with(dag, ranges, start_ts, opts)
                .await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ClientConfig;
    use crate::node_selection::NodeSelectionError;
    use crate::region_cache::CachedRegion;
    use wire::region::Region;

    fn split_of(client: &Client, zones: &[Option<&str>]) -> Vec<RegionRanges> {
        let cache = client.region_cache();
        for (i, zone) in zones.iter().enumerate() {
            let start = if i == 0 { Vec::new() } else { vec![i as u8] };
            let end = if i + 1 == zones.len() {
                Vec::new()
            } else {
                vec![i as u8 + 1]
            };
            cache.insert(CachedRegion::standalone(
                Region {
                    id: 10 + i as u64,
                    ver: 1,
                    start,
                    end,
                    ..Region::default()
                },
                &format!("http://s{i}"),
                zone.and_then(types::Zone::label),
            ));
        }
        cache
            .split_ranges(&[KeyRange::new(Vec::new(), Vec::new())])
            .unwrap()
    }

    /// The worker's probe fails (nothing listens on port 9), so it is dead and selection fails
    /// with the typed error before any page is sent.
    #[tokio::test]
    async fn no_alive_worker_fails_with_a_typed_selection_error() {
        let mut cfg = ClientConfig::new(["127.0.0.1:9"]);
        cfg.workers = vec!["127.0.0.1:9".into()];
        cfg.labels.insert("zone".into(), "a".into());
        let client = Client::new(cfg).unwrap();
        let split = split_of(&client, &[Some("a"), Some("b")]);
        let e = client
            .choose_workers(NodeSelectionPolicy::AllNodes, &split)
            .await
            .unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::NodeSelection);
        assert!(
            matches!(
                e,
                crate::Error::NodeSelection(NodeSelectionError::NoAliveWorker { workers: 1 })
            ),
            "{e}"
        );
    }
}
