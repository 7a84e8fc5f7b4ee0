//! The server's heartbeat to the placement driver (`[server] pd-endpoints`): every
//! `pd-heartbeat-interval` it registers itself (URL, labels, counts, size: its lease is renewed)
//! and reports the regions it leads (range, epoch, replicas, term, size), which is how the
//! placement driver's routing table follows Raft. A heartbeat that fails is logged and the
//! next one tries again: the server serves on whatever the placement driver's state.
//!
//! The heartbeat also reports the oldest lock held here, and the answer carries the GC safe
//! point (`pd::gc`): the engine's compactions use it, and reads below it are refused.
//!
//! The answer carries scheduling steps for regions this server leads (`pd::scheduler`): each
//! is carried out here when it still fits (the region is led here at the step's epoch, and
//! the change fits its members: `raftstore`'s own check), otherwise dropped; the placement
//! driver plans again from the next report. When a member of a region held here is on a server
//! whose address is unknown here, the registered servers' addresses go to `Members` after the
//! heartbeat, so replicas on a server that joined later are reachable.
//!
//! Beside the heartbeat, a long poll on the placement leader's topology watch (`pd::watch`)
//! hands the offload pool the registered workers and `Members` the servers' addresses as soon
//! as they change, instead of a read per heartbeat.

use std::sync::Arc;
use std::time::Duration;

use node::PdClient;
use raftstore::ChangePeer;
use wire::pd::{RegionStep, StepKind, StoreHeartbeat};
use wire::region::Peer;

use crate::config::WorkerEndpoint;
use crate::node::Node;

/// What the heartbeat of `node` (reachable at `url`) says now. Blocking (reads every shard).
pub fn build(node: &Node, url: &str) -> StoreHeartbeat {
    let store_id = node.config.store_id();
    let zone = types::zone::label(node.config.zone().as_ref()).to_string();
    let mut hb = StoreHeartbeat {
        store_id,
        url: url.to_string(),
        labels: wire::region::labels(&node.config.server.labels),
        ..StoreHeartbeat::default()
    };
    match node.storage.oldest_lock_ts() {
        Ok(oldest) => hb.oldest_lock_ts = oldest.unwrap_or(0),
        // 0 would say "no locks" and let the safe point pass them: report the oldest that
        // can exist instead (the safe point waits).
        Err(e) => {
            tracing::warn!("cannot read the locks for the heartbeat: {e}");
            hb.oldest_lock_ts = 1;
        }
    }
    for id in node.engine().shard_ids() {
        let Ok(mut region) = crate::api::region_of(node, id) else {
            continue;
        };
        hb.held_regions.push(id);
        hb.region_count += 1;
        hb.used_size += region.approximate_size;
        if region.leader_store_id == store_id {
            hb.leader_count += 1;
            if region.peers.is_empty() {
                // A one-voter region: this server is its only replica.
                region.peers.push(Peer {
                    store_id,
                    addr: url.to_string(),
                    zone: zone.clone(),
                    ..Peer::default()
                });
            }
            hb.led_regions.push(region);
        }
    }
    hb
}

/// Gives the offload dispatcher the workers registered now (their coprocessor URLs and zones).
fn apply_workers(node: &Node, workers: &[wire::pd::WorkerInfo]) {
    let Some(dispatcher) = node.coprocessor.dispatcher() else {
        return;
    };
    let registered: Vec<WorkerEndpoint> = workers
        .iter()
        .map(|w| WorkerEndpoint {
            addr: format!(
                "{}{}",
                w.url.trim_end_matches('/'),
                wire::paths::COPROCESSOR
            ),
            zone: w.zone(),
        })
        .collect();
    dispatcher
        .workers()
        .apply_registrations(&registered, std::time::Instant::now());
}

/// How long one topology poll waits for a change.
const WATCH_WAIT: Duration = Duration::from_secs(20);

/// Keeps the offload pool's workers and the other servers' addresses current from the
/// placement leader's topology watch (`pd::watch`: a long poll answered when servers, workers,
/// regions or leaders change), until the task is dropped.
async fn watch_topology(node: Arc<Node>, client: PdClient) {
    let mut token = 0;
    loop {
        match client.watch(token, WATCH_WAIT).await {
            Ok(resp) => {
                // Every answer, a timeout's too: a lapsed worker counts as dead only once it
                // is missing from several views in a row.
                if let Some(view) = &resp.view {
                    apply_workers(&node, &view.workers);
                    if resp.token != token {
                        learn_addresses(&node, view);
                    }
                }
                token = resp.token;
            }
            Err(e) => {
                tracing::debug!("the placement driver's topology watch failed: {e}");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// Aborts a task when dropped (the heartbeat's own task is aborted at shutdown).
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Carries out `step` if it still fits (module docs). Blocking (a membership change waits for
/// its entry to apply). Returns what happened, for the log.
pub fn execute(node: &Node, step: &RegionStep) -> Result<(), String> {
    let router = node.storage.router();
    let region_id = step.region_id;
    if step.kind() == StepKind::DestroyReplica {
        let own = node.config.store_id();
        if step.store_id != own {
            return Err(format!("a replica of store {} is not here", step.store_id));
        }
        // The table only suggests it (`pd::stale_replicas`): the region's leader decides.
        let term = router.status(region_id).map_or(0, |s| s.term);
        confirm_not_a_member(node, &step.store_url, region_id, own, term)?;
        // The store refuses when this replica leads.
        router.destroy_replica(region_id);
        return Ok(());
    }
    let status = router
        .status(region_id)
        .ok_or_else(|| format!("region {region_id} has no replica here"))?;
    if !status.serving {
        return Err(format!("region {region_id} is not led here"));
    }
    let ver = node
        .engine()
        .shard_info(region_id)
        .map_err(|e| e.to_string())?
        .ver;
    if (ver, status.conf_index) != (step.ver, step.conf_ver) {
        return Err(format!(
            "region {region_id} is at epoch (ver {ver}, conf_ver {}), the step was planned at (ver {}, conf_ver {})",
            status.conf_index, step.ver, step.conf_ver
        ));
    }
    let store = step.store_id;
    let timeout = node.config.raft.propose_timeout.duration();
    let change = match step.kind() {
        StepKind::AddLearner => {
            // Its Raft messages must reach it, and zone-aware reads need its zone: the leader
            // learns both from the step.
            node.members.learn(store, &step.store_url, &step.store_zone);
            ChangePeer::AddLearner { store }
        }
        StepKind::PromoteLearner => ChangePeer::Promote { store },
        StepKind::RemovePeer => ChangePeer::Remove { store },
        StepKind::TransferLeader => {
            if !node.members.is_voter(router, region_id, store) {
                return Err(format!(
                    "store {store} holds no voter of region {region_id}"
                ));
            }
            router.transfer_leader(region_id, store);
            return Ok(());
        }
        StepKind::DestroyReplica | StepKind::Unknown => {
            return Err(format!("an unexpected step kind {}", step.kind));
        }
    };
    router
        .change_peer(region_id, change, timeout)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Asks the server at `leader_url` about `region_id`: Ok only when it leads the region in a
/// term at least `term` (the one this replica knows: an old leader cut off could have missed
/// this replica's addition) and its members do not include store `own`. Blocking (call it from
/// a blocking thread of a runtime).
fn confirm_not_a_member(
    node: &Node,
    leader_url: &str,
    region_id: u64,
    own: u64,
    term: u64,
) -> Result<(), String> {
    let url = format!(
        "{}{}",
        leader_url.trim_end_matches('/'),
        wire::paths::REGIONS
    );
    let client = node::HttpClient::with_tls(64 << 20, node.tls.as_deref());
    let reply = tokio::runtime::Handle::current()
        .block_on(client.get(&url, Duration::from_secs(5)))
        .map_err(|e| format!("cannot ask the leader at {leader_url}: {e}"))?;
    if !reply.status.is_success() {
        return Err(format!(
            "the leader at {leader_url} answered {}",
            reply.status
        ));
    }
    let regions = <wire::region::RegionsResponse as prost::Message>::decode(reply.body.as_ref())
        .map_err(|e| format!("the leader at {leader_url} sent undecodable regions: {e}"))?;
    let Some(region) = regions.regions.iter().find(|r| r.id == region_id) else {
        return Err(format!(
            "{leader_url} holds no replica of region {region_id}"
        ));
    };
    let same = |a: &str| a.trim_end_matches('/') == leader_url.trim_end_matches('/');
    let leads = region.leader_store_id != own
        && region.leader_term >= term
        && region
            .peers
            .iter()
            .any(|p| p.store_id == region.leader_store_id && same(&p.addr));
    if !leads || region.peers.iter().any(|p| p.store_id == own) {
        return Err(format!(
            "the replica at {leader_url} does not confirm: leader {} members {:?}",
            region.leader_store_id,
            region.peers.iter().map(|p| p.store_id).collect::<Vec<_>>()
        ));
    }
    Ok(())
}

/// Learns the registered servers' addresses in `view`.
fn learn_addresses(node: &Node, view: &wire::pd::ClusterView) {
    for s in view.stores.iter().filter_map(|s| s.heartbeat.as_ref()) {
        let zone = s.zone().map(|z| z.to_string()).unwrap_or_default();
        node.members.learn(s.store_id, &s.url, &zone);
    }
}

/// Learns the registered servers' addresses (module docs).
async fn refresh_addresses(node: &Node, client: &PdClient) {
    match client.cluster().await {
        Ok(view) => learn_addresses(node, &view),
        Err(e) => tracing::debug!("cannot read the registered servers: {e}"),
    }
}

/// Sends a heartbeat every `every` until the task is dropped.
pub async fn run(node: Arc<Node>, url: String, endpoints: Vec<String>, every: Duration) {
    let client = PdClient::metered(
        &endpoints,
        every.max(Duration::from_millis(500)),
        node.config.meter(),
        node.tls.as_deref(),
    );
    let _watch =
        AbortOnDrop(tokio::spawn(watch_topology(node.clone(), client.clone())).abort_handle());
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failing = false;
    loop {
        tick.tick().await;
        let (n, u) = (node.clone(), url.clone());
        let Ok(hb) = tokio::task::spawn_blocking(move || build(&n, &u)).await else {
            continue;
        };
        // A refusal comes back as an error (the client retries it until its deadline).
        match client.store_heartbeat(&hb).await {
            Ok(answer) => {
                // Only ever raised (`Engine::set_gc_safe_point` keeps the maximum).
                node.engine().set_gc_safe_point(answer.gc_safe_point);
                if failing {
                    tracing::info!("heartbeats to the placement driver go through again");
                    failing = false;
                }
                // The whole cluster view only when a member's address is missing here (a
                // server that joined since), not every heartbeat.
                if node.members.misses_addresses(node.storage.router()) {
                    refresh_addresses(&node, &client).await;
                }
                if !answer.steps.is_empty() {
                    let n = node.clone();
                    // One region's steps in order; a membership change waits for its apply.
                    let carried_out = tokio::task::spawn_blocking(move || {
                        let mut any = false;
                        for step in &answer.steps {
                            match execute(&n, step) {
                                Ok(()) => {
                                    // A membership change only: a leader transfer is only
                                    // asked, and PD sends it again until it happened.
                                    any |= matches!(
                                        step.kind(),
                                        StepKind::AddLearner
                                            | StepKind::PromoteLearner
                                            | StepKind::RemovePeer
                                    );
                                    tracing::info!(region_id = step.region_id, kind = ?step.kind(), store = step.store_id, "scheduling step carried out");
                                }
                                // Steps come again with every heartbeat until the routing table shows them done:
                                // a dropped one is routine.
                                Err(why) => tracing::debug!(region_id = step.region_id, kind = ?step.kind(), store = step.store_id, %why, "scheduling step dropped"),
                            }
                        }
                        any
                    })
                    .await
                    .unwrap_or(false);
                    if carried_out {
                        // Report the new membership now, not a heartbeat later: the next step
                        // of the move is planned from the routing table, so each step would
                        // otherwise cost two heartbeats (measured: `stratus-bench rebalance`).
                        tick.reset_immediately();
                    }
                }
            }
            Err(e) => {
                if !failing {
                    tracing::warn!("cannot send a heartbeat to the placement driver: {e}");
                    failing = true;
                }
            }
        }
    }
}
