//! The placement driver's topology, pushed: one background task per client holds a long poll
//! on the placement leader (`POST /pd/watch`, `pd::watch`) and, whenever the servers, workers,
//! regions or leaders change, puts the routing table into the region cache and the workers'
//! registrations into node selection. A client of a changing cluster thus learns a new leader,
//! a split or a new worker when it happens, not on its next miss or registration read.
//!
//! The task starts on the client's first request (it needs the caller's Tokio runtime) and ends
//! with the client (it holds the caches weakly). While it is not answered (no leader, the
//! placement driver down), the per-query reads it replaces take over again: a cache miss loads
//! the routing table, and node selection reads the registrations at most once per
//! [`crate::paging::REGISTRATIONS_EVERY`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crate::config::base_url;
use crate::region_cache::{CachedRegion, RegionCache};
use crate::worker_liveness::WorkerLiveness;

/// How long one poll waits for a change.
const WAIT: Duration = Duration::from_secs(20);
/// The pause after a failed poll.
const RETRY: Duration = Duration::from_secs(1);

#[derive(Debug, Default)]
pub struct TopologyWatch {
    started: AtomicBool,
    /// The last poll was answered: the caches are current.
    live: Arc<AtomicBool>,
    /// [`TopologyWatch::stop`] was called: the task ends at its next poll's answer.
    stopped: Arc<AtomicBool>,
}

impl TopologyWatch {
    /// Starts the task once, inside the caller's runtime (no runtime: not yet).
    pub fn ensure_started(
        &self,
        pd: &node::PdClient,
        regions: &Arc<RegionCache>,
        workers: &Arc<WorkerLiveness>,
    ) {
        if self.started.load(Ordering::Acquire) || tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        if self.started.swap(true, Ordering::AcqRel) {
            return;
        }
        tokio::spawn(run(
            pd.clone(),
            Arc::downgrade(regions),
            Arc::downgrade(workers),
            self.live.clone(),
            self.stopped.clone(),
        ));
    }

    /// Ends the task (for a client that is never dropped, whose caches the task would keep
    /// polling for after the cluster is gone): it stops at its poll's answer, silently.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
    }

    /// Whether the last poll was answered (the registrations need no read of their own).
    pub fn is_live(&self) -> bool {
        self.live.load(Ordering::Acquire)
    }
}

async fn run(
    pd: node::PdClient,
    regions: Weak<RegionCache>,
    workers: Weak<WorkerLiveness>,
    live: Arc<AtomicBool>,
    stopped: Arc<AtomicBool>,
) {
    let mut token = 0;
    loop {
        let answer = pd.watch(token, WAIT).await;
        if stopped.load(Ordering::Acquire) {
            return;
        }
        let (Some(regions), Some(workers)) = (regions.upgrade(), workers.upgrade()) else {
            return; // the client is gone
        };
        match answer {
            Ok(resp) => {
                if let Some(view) = resp.view {
                    // Every answer, a timeout's too: a lapsed worker counts as dead only once
                    // it is missing from several views in a row.
                    let registered: Vec<(String, Option<types::Zone>)> = view
                        .workers
                        .iter()
                        .map(|w| (base_url(&w.url), w.zone()))
                        .collect();
                    workers.apply_registrations(&registered, Instant::now());
                    if resp.token != token {
                        for region in view.regions {
                            regions.insert(CachedRegion::from_answer(region, "", None));
                        }
                        crate::metrics::TOPOLOGY_UPDATES.inc();
                    }
                }
                token = resp.token;
                live.store(true, Ordering::Release);
            }
            Err(e) => {
                if live.swap(false, Ordering::AcqRel) {
                    tracing::warn!("the placement driver's topology watch failed: {e}");
                }
                drop((regions, workers));
                tokio::time::sleep(RETRY).await;
            }
        }
    }
}
