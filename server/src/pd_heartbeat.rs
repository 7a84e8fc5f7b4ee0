//! The server's heartbeat to the placement driver (`[server] pd-endpoints`): every
//! `pd-heartbeat-interval` it registers itself (URL, labels, counts, size: its lease is renewed)
//! and reports the regions it leads (range, epoch, replicas, term, size), which is how the
//! placement driver's routing table follows Raft. A heartbeat that fails is logged and the
//! next one tries again: the server serves on whatever the placement driver's state.

use std::sync::Arc;
use std::time::Duration;

use node::PdClient;
use wire::pd::StoreHeartbeat;
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
    for id in node.engine().shard_ids() {
        let Ok(mut region) = crate::api::region_of(node, id) else {
            continue;
        };
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
async fn refresh_workers(node: &Node, client: &PdClient) {
    let Some(dispatcher) = node.coprocessor.dispatcher() else {
        return;
    };
    match client.workers().await {
        Ok(view) => {
            let registered: Vec<WorkerEndpoint> = view
                .workers
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
        Err(e) => tracing::debug!("cannot read the workers' registrations: {e}"),
    }
}

/// Sends a heartbeat every `every` until the task is dropped.
pub async fn run(node: Arc<Node>, url: String, endpoints: Vec<String>, every: Duration) {
    let client = PdClient::new(&endpoints, every.max(Duration::from_millis(500)));
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
            Ok(_) => {
                if failing {
                    tracing::info!("heartbeats to the placement driver go through again");
                    failing = false;
                }
                refresh_workers(&node, &client).await;
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
