//! Which workers are alive: a probe (`GET /status`) per worker; a failed probe marks the
//! worker dead for `dead-worker-ttl`, during which it is neither chosen nor probed again (a
//! dead node costs one timeout per TTL, not one per request). A worker never probed counts as
//! alive. The probe also learns the worker's `zone` label from its status.
//!
//! [`WorkerLiveness::alive_workers`] is what the node selection of the delegate path takes.

use std::time::{Duration, Instant};

use parking_lot::Mutex;
use types::Zone;
use wire::paths;

use crate::node_selection::WorkerNode;
use crate::transport::Transport;

/// One configured worker, as the client last saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerInfo {
    /// The worker's index in the config's `workers`: its id for node selection.
    pub id: u64,
    /// Base URL.
    pub addr: String,
    /// The zone from the last successful probe (`None`: none, or not probed yet).
    pub zone: Option<Zone>,
    /// Dead until this instant (after a failed probe).
    pub dead_until: Option<Instant>,
    /// Seen in the placement driver's registrations: only such a worker can lapse.
    pub registered: bool,
    /// Consecutive registration views it was missing from.
    pub missing_views: u32,
}

/// A registered worker missing from this many consecutive views counts as gone (one view is
/// not enough: a placement driver restarted on its embedded store lists nobody until the next
/// heartbeats).
pub const LAPSED_AFTER_VIEWS: u32 = 2;

impl WorkerInfo {
    pub fn is_alive(&self, now: Instant) -> bool {
        self.dead_until.is_none_or(|t| now >= t)
    }
}

#[derive(Debug)]
pub struct WorkerLiveness {
    ttl: Duration,
    workers: Mutex<Vec<WorkerInfo>>,
    /// When the registrations were last due (read from the placement driver).
    registrations_read: Mutex<Option<Instant>>,
}

impl WorkerLiveness {
    /// `addrs` are base URLs; ids follow their order.
    pub fn new(addrs: Vec<String>, ttl: Duration) -> WorkerLiveness {
        let workers = addrs
            .into_iter()
            .enumerate()
            .map(|(i, addr)| WorkerInfo {
                id: i as u64,
                addr,
                zone: None,
                dead_until: None,
                registered: false,
                missing_views: 0,
            })
            .collect();
        WorkerLiveness {
            ttl,
            workers: Mutex::new(workers),
            registrations_read: Mutex::new(None),
        }
    }

    pub fn workers(&self) -> Vec<WorkerInfo> {
        self.workers.lock().clone()
    }

    /// Marks worker `id` dead from `now` for the TTL.
    pub fn mark_dead(&self, id: u64, now: Instant) {
        if let Some(w) = self.workers.lock().iter_mut().find(|w| w.id == id) {
            w.dead_until = Some(now + self.ttl);
        }
    }

    /// Records a successful probe of worker `id`.
    pub fn mark_alive(&self, id: u64, zone: Option<Zone>) {
        if let Some(w) = self.workers.lock().iter_mut().find(|w| w.id == id) {
            w.dead_until = None;
            w.zone = zone;
        }
    }

    /// Whether the registrations should be read again at `now` (not within `every` of the last
    /// read); marks them read when they are.
    pub fn registrations_due(&self, now: Instant, every: Duration) -> bool {
        let mut last = self.registrations_read.lock();
        if last.is_some_and(|t| now < t + every) {
            return false;
        }
        *last = Some(now);
        true
    }

    /// Takes the placement driver's registrations (base URL and zone of every registered
    /// worker): a registered worker not known yet is added (the next id), a known one takes the
    /// registered zone, and one that registered before but is missing from
    /// [`LAPSED_AFTER_VIEWS`] views in a row (its lease ran out) counts as dead for the TTL.
    /// Configured workers that never registered keep their probe-based liveness, and a worker
    /// this client's own probe found dead stays dead until its TTL ends.
    pub fn apply_registrations(&self, registered: &[(String, Option<Zone>)], now: Instant) {
        let mut workers = self.workers.lock();
        for (addr, zone) in registered {
            match workers.iter_mut().find(|w| &w.addr == addr) {
                Some(w) => {
                    w.zone = zone.clone();
                    w.registered = true;
                    w.missing_views = 0;
                }
                None => {
                    let id = workers.iter().map(|w| w.id + 1).max().unwrap_or(0);
                    workers.push(WorkerInfo {
                        id,
                        addr: addr.clone(),
                        zone: zone.clone(),
                        dead_until: None,
                        registered: true,
                        missing_views: 0,
                    });
                }
            }
        }
        for w in workers.iter_mut() {
            if !w.registered || registered.iter().any(|(a, _)| a == &w.addr) {
                continue;
            }
            w.missing_views += 1;
            if w.missing_views >= LAPSED_AFTER_VIEWS && w.is_alive(now) {
                w.dead_until = Some(now + self.ttl);
            }
        }
    }

    /// Every worker, with whether it counts as alive at `now`.
    pub fn nodes_at(&self, now: Instant) -> Vec<WorkerNode> {
        self.workers
            .lock()
            .iter()
            .map(|w| WorkerNode {
                id: w.id,
                zone: w.zone.clone(),
                alive: w.is_alive(now),
            })
            .collect()
    }

    /// The workers that count as alive now.
    pub fn alive_workers(&self) -> Vec<WorkerNode> {
        let mut nodes = self.nodes_at(Instant::now());
        nodes.retain(|n| n.alive);
        nodes
    }

    /// Probes every worker not within its dead TTL; each failure marks that worker dead.
    pub async fn probe_all(&self, transport: &Transport) {
        let now = Instant::now();
        let due: Vec<WorkerInfo> = self
            .workers()
            .into_iter()
            .filter(|w| w.is_alive(now))
            .collect();
        for w in due {
            match probe(transport, &w.addr).await {
                Ok(zone) => self.mark_alive(w.id, zone),
                Err(e) => {
                    tracing::warn!(worker = %w.addr, error = %node::error_chain(&e), ttl = ?self.ttl, "worker probe failed; marked dead");
                    self.mark_dead(w.id, Instant::now());
                }
            }
        }
    }
}

/// Probe timeout: a live worker answers its status at once.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// `GET /status`; the worker's zone label.
async fn probe(transport: &Transport, addr: &str) -> crate::error::Result<Option<Zone>> {
    let body = transport.probe(addr, paths::STATUS, PROBE_TIMEOUT).await?;
    Ok(zone_of_status(&body))
}

/// `labels.zone` of a status JSON body, if present and not empty.
pub fn zone_of_status(body: &[u8]) -> Option<Zone> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    Zone::label(v.get("labels")?.get("zone")?.as_str()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_probe_marks_the_worker_dead_for_the_ttl() {
        let l = WorkerLiveness::new(
            vec!["http://w0".into(), "http://w1".into()],
            Duration::from_secs(10),
        );
        let t0 = Instant::now();
        assert!(
            l.nodes_at(t0).iter().all(|n| n.alive),
            "never probed = alive"
        );
        l.mark_dead(1, t0);
        let at = |d: u64| l.nodes_at(t0 + Duration::from_secs(d));
        assert_eq!(
            at(9).iter().map(|n| n.alive).collect::<Vec<_>>(),
            vec![true, false]
        );
        assert!(
            at(10).iter().all(|n| n.alive),
            "the TTL passed: probe again"
        );
        l.mark_alive(1, Zone::label("b"));
        assert_eq!(l.nodes_at(t0)[1].zone, Zone::label("b"));
        assert!(l.nodes_at(t0)[1].alive);
    }

    #[test]
    fn registrations_add_workers_and_a_lapsed_one_counts_as_dead() {
        let l = WorkerLiveness::new(vec!["http://w0".into()], Duration::from_secs(10));
        let t0 = Instant::now();
        l.apply_registrations(
            &[
                ("http://w0".into(), Zone::label("a")),
                ("http://w1".into(), Zone::label("b")),
            ],
            t0,
        );
        let nodes = l.nodes_at(t0);
        assert_eq!(nodes.len(), 2);
        assert!(nodes.iter().all(|n| n.alive));
        assert_eq!(nodes[1].zone, Zone::label("b"));
        assert_eq!(nodes[1].id, 1);
        // w0's registration lapsed: one view is not enough, two are; dead for the TTL.
        l.apply_registrations(&[("http://w1".into(), Zone::label("b"))], t0);
        assert!(l.nodes_at(t0)[0].alive);
        l.apply_registrations(&[("http://w1".into(), Zone::label("b"))], t0);
        assert!(!l.nodes_at(t0)[0].alive);
        assert!(l.nodes_at(t0 + Duration::from_secs(10))[0].alive);
        // A worker this client found dead stays dead while registered.
        l.mark_dead(1, t0);
        l.apply_registrations(&[("http://w1".into(), Zone::label("b"))], t0);
        assert!(!l.nodes_at(t0)[1].alive);
        // A configured worker that never registers is left to the probes.
        let c = WorkerLiveness::new(vec!["http://only-probed".into()], Duration::from_secs(10));
        for _ in 0..3 {
            c.apply_registrations(&[], t0);
        }
        assert!(c.nodes_at(t0)[0].alive);
    }

    #[test]
    fn registrations_are_read_at_most_once_per_interval() {
        let l = WorkerLiveness::new(Vec::new(), Duration::from_secs(10));
        let t0 = Instant::now();
        let every = Duration::from_secs(1);
        assert!(l.registrations_due(t0, every));
        assert!(!l.registrations_due(t0 + Duration::from_millis(999), every));
        assert!(l.registrations_due(t0 + every, every));
    }

    #[test]
    fn the_zone_comes_from_the_status_labels() {
        assert_eq!(
            zone_of_status(br#"{"role":"worker","labels":{"zone":"b"}}"#),
            Zone::label("b")
        );
        assert_eq!(zone_of_status(br#"{"labels":{"zone":""}}"#), None);
        assert_eq!(zone_of_status(b"not json"), None);
    }
}
