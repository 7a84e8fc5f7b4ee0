//! The workers a server offloads to (`remote-coprocessor-workers`, or the single
//! `remote-coprocessor-addr`), whether each is alive, and the order an offload tries them in.
//!
//! The order ([`preference`], a pure function): alive workers of this server's zone, then
//! alive workers of other zones, then the dead ones (this zone first). Inside a group, the
//! worker with the fewest offloads in flight from this server comes first; ties go in turn
//! (round robin), so equal workers share the load. A server without a zone label puts every
//! worker in the first group; a worker without one is never in this server's zone.
//!
//! A worker that fails with a connection error, a timeout or a 503 is dead for
//! `remote-coprocessor-worker-dead-ttl`: it is tried only after every alive worker, so an
//! offload does not wait for it while another can answer, yet a server whose workers are all
//! dead still tries them (the old one-worker behaviour: retry, then run locally). An answer
//! brings a worker back at once.
//!
//! With a placement driver (`[server] pd-endpoints`) the pool also follows the workers'
//! registrations ([`WorkerPool::apply_registrations`], after each heartbeat): a registered
//! worker not configured is added, and one whose registration lapsed (it had registered before)
//! counts as dead. The pool only grows, so a worker's index stays valid for an offload in
//! flight.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use changeset::MemtableDataFormat;
use parking_lot::{Mutex, RwLock};
use types::{Zone, ZoneRelation};

use crate::config::WorkerEndpoint;

/// What [`preference`] knows of one worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    /// In this server's zone (or the server has no zone).
    pub local: bool,
    pub alive: bool,
    /// Offloads from this server not yet answered.
    pub in_flight: usize,
}

/// The order in which an offload tries `candidates` (indexes into it; see the module docs).
/// `turn` rotates the tie-break, so successive calls with equal loads start at successive
/// workers.
pub fn preference(candidates: &[Candidate], turn: usize) -> Vec<usize> {
    let key = |i: usize| {
        let c = &candidates[i];
        let group = match (c.alive, c.local) {
            (true, true) => 0,
            (true, false) => 1,
            (false, true) => 2,
            (false, false) => 3,
        };
        (group, c.in_flight)
    };
    let mut order: Vec<usize> = (0..candidates.len()).collect();
    order.sort_by_key(|&i| (key(i), i));
    // Rotate each run of equal workers by `turn`, so that they take turns.
    let mut start = 0;
    while start < order.len() {
        let k = key(order[start]);
        let len = order[start..].iter().take_while(|&&i| key(i) == k).count();
        order[start..start + len].rotate_left(turn % len);
        start += len;
    }
    order
}

struct PooledWorker {
    endpoint: WorkerEndpoint,
    local: bool,
    /// This server's zone relative to the worker's.
    relation: ZoneRelation,
    dead_until: Mutex<Option<Instant>>,
    in_flight: AtomicUsize,
    /// Seen in the placement driver's registrations: its lapse then means it is gone.
    registered: AtomicBool,
    /// Consecutive registration views it was missing from.
    missing_views: AtomicUsize,
    /// The newest memtable-data format it advertised on its last answer (0: none yet).
    memtable_data_format: AtomicU32,
}

/// A registered worker missing from this many consecutive views counts as gone (a placement
/// driver restarted on its embedded store lists nobody until the next heartbeats).
pub const LAPSED_AFTER_VIEWS: usize = 2;

impl PooledWorker {
    fn new(endpoint: WorkerEndpoint, server_zone: Option<&Zone>) -> PooledWorker {
        PooledWorker {
            local: server_zone.is_none() || endpoint.zone.as_ref() == server_zone,
            relation: ZoneRelation::of(server_zone, endpoint.zone.as_ref()),
            endpoint,
            dead_until: Mutex::new(None),
            in_flight: AtomicUsize::new(0),
            registered: AtomicBool::new(false),
            missing_views: AtomicUsize::new(0),
            memtable_data_format: AtomicU32::new(0),
        }
    }
}

pub struct WorkerPool {
    /// Append-only: indexes stay valid.
    workers: RwLock<Vec<Arc<PooledWorker>>>,
    server_zone: Option<Zone>,
    dead_ttl: Duration,
    turn: AtomicUsize,
}

impl WorkerPool {
    /// `endpoints` as seen from a server in `server_zone` (`None`: no zone).
    pub fn new(
        endpoints: Vec<WorkerEndpoint>,
        server_zone: Option<&Zone>,
        dead_ttl: Duration,
    ) -> Self {
        let workers = endpoints
            .into_iter()
            .map(|endpoint| Arc::new(PooledWorker::new(endpoint, server_zone)))
            .collect();
        WorkerPool {
            workers: RwLock::new(workers),
            server_zone: server_zone.cloned(),
            dead_ttl,
            turn: AtomicUsize::new(0),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.workers.read().is_empty()
    }

    fn worker(&self, i: usize) -> Arc<PooledWorker> {
        self.workers.read()[i].clone()
    }

    pub fn addr(&self, i: usize) -> String {
        self.worker(i).endpoint.addr.clone()
    }

    /// `same`, `cross` or `unknown`: the worker's zone relative to this server's.
    pub fn relation(&self, i: usize) -> ZoneRelation {
        self.worker(i).relation
    }

    fn alive(w: &PooledWorker, now: Instant) -> bool {
        w.dead_until.lock().is_none_or(|until| now >= until)
    }

    /// The order the next offload tries the workers in (each once).
    pub fn order(&self, now: Instant) -> Vec<usize> {
        let candidates: Vec<Candidate> = self
            .workers
            .read()
            .iter()
            .map(|w| Candidate {
                local: w.local,
                alive: Self::alive(w, now),
                in_flight: w.in_flight.load(Ordering::Relaxed),
            })
            .collect();
        preference(&candidates, self.turn.fetch_add(1, Ordering::Relaxed))
    }

    /// Whether any worker is alive now (none: the pool is empty or every one failed lately).
    pub fn any_alive(&self, now: Instant) -> bool {
        self.workers.read().iter().any(|w| Self::alive(w, now))
    }

    /// Worker `i` failed to answer: dead until `now + dead-ttl`.
    pub fn mark_dead(&self, i: usize, now: Instant) {
        *self.worker(i).dead_until.lock() = Some(now + self.dead_ttl);
    }

    /// Worker `i` answered: alive again.
    pub fn mark_alive(&self, i: usize) {
        *self.worker(i).dead_until.lock() = None;
    }

    /// The newest memtable-data format worker `i` reads, as it last advertised
    /// (`wire::offload::MEMTABLE_DATA_FORMAT_HEADER`); format 1, which every worker reads,
    /// until it answered with the header.
    pub fn memtable_data_format(&self, i: usize) -> MemtableDataFormat {
        MemtableDataFormat::agreed(self.worker(i).memtable_data_format.load(Ordering::Relaxed))
    }

    /// Records what worker `i` advertised on an answer (0: no header, a build before v2).
    pub fn learn_memtable_data_format(&self, i: usize, advertised: u32) {
        self.worker(i)
            .memtable_data_format
            .store(advertised, Ordering::Relaxed);
    }

    /// Counts an offload in flight on worker `i` until the guard drops.
    pub fn begin(&self, i: usize) -> InFlight {
        let worker = self.worker(i);
        worker.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight { worker }
    }

    /// Takes the placement driver's registrations (`registered`: each worker's coprocessor URL
    /// and zone): adds the workers not in the pool yet, and marks dead (for the TTL) those that
    /// registered before but are missing from [`LAPSED_AFTER_VIEWS`] views in a row. Workers
    /// configured but never registered keep their probe-based liveness.
    pub fn apply_registrations(&self, registered: &[WorkerEndpoint], now: Instant) {
        let mut workers = self.workers.write();
        for endpoint in registered {
            match workers.iter().find(|w| w.endpoint.addr == endpoint.addr) {
                Some(w) => {
                    w.registered.store(true, Ordering::Relaxed);
                    w.missing_views.store(0, Ordering::Relaxed);
                }
                None => {
                    let w = PooledWorker::new(endpoint.clone(), self.server_zone.as_ref());
                    w.registered.store(true, Ordering::Relaxed);
                    workers.push(Arc::new(w));
                }
            }
        }
        for w in workers.iter() {
            let listed = registered.iter().any(|e| e.addr == w.endpoint.addr);
            if listed || !w.registered.load(Ordering::Relaxed) {
                continue;
            }
            let missing = w.missing_views.fetch_add(1, Ordering::Relaxed) + 1;
            if missing >= LAPSED_AFTER_VIEWS && Self::alive(w, now) {
                *w.dead_until.lock() = Some(now + self.dead_ttl);
            }
        }
    }

    /// For `GET /status`: each worker's address, zone, liveness and offloads in flight.
    pub fn status(&self, now: Instant) -> serde_json::Value {
        self.workers
            .read()
            .iter()
            .map(|w| {
                serde_json::json!({
                    "addr": w.endpoint.addr,
                    "zone": types::zone::label(w.endpoint.zone.as_ref()),
                    "zone_relation": w.relation.as_str(),
                    "alive": Self::alive(w, now),
                    "in_flight": w.in_flight.load(Ordering::Relaxed),
                })
            })
            .collect()
    }
}

/// See [`WorkerPool::begin`].
pub struct InFlight {
    worker: Arc<PooledWorker>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.worker.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(local: bool, alive: bool, in_flight: usize) -> Candidate {
        Candidate {
            local,
            alive,
            in_flight,
        }
    }

    #[test]
    fn alive_workers_of_this_zone_come_before_other_zones() {
        let cands = [c(false, true, 0), c(true, true, 5), c(false, true, 0)];
        assert_eq!(preference(&cands, 0)[0], 1);
    }

    #[test]
    fn another_zone_is_chosen_only_when_no_local_worker_is_alive() {
        let cands = [c(true, false, 0), c(false, true, 3), c(true, false, 0)];
        let order = preference(&cands, 0);
        assert_eq!(order[0], 1, "the alive cross-zone worker first");
        assert_eq!(&order[1..], &[0, 2], "then the dead local ones");
    }

    #[test]
    fn dead_local_workers_come_before_dead_remote_ones() {
        let cands = [c(false, false, 0), c(true, false, 9)];
        assert_eq!(preference(&cands, 0), vec![1, 0]);
    }

    #[test]
    fn the_least_busy_local_worker_wins() {
        let cands = [c(true, true, 3), c(true, true, 1), c(true, true, 2)];
        assert_eq!(preference(&cands, 0), vec![1, 2, 0]);
    }

    #[test]
    fn equal_local_workers_take_turns() {
        let cands = [c(true, true, 0), c(true, true, 0), c(true, true, 0)];
        let firsts: Vec<usize> = (0..6).map(|t| preference(&cands, t)[0]).collect();
        assert_eq!(firsts, vec![0, 1, 2, 0, 1, 2]);
    }

    #[test]
    fn a_local_group_takes_turns_evenly_beside_other_zones() {
        let cands = [c(false, true, 0), c(true, true, 0), c(true, true, 0)];
        let firsts: Vec<usize> = (0..4).map(|t| preference(&cands, t)[0]).collect();
        assert_eq!(firsts, vec![1, 2, 1, 2]);
    }

    #[test]
    fn every_worker_appears_once() {
        let cands = [
            c(true, false, 1),
            c(false, true, 0),
            c(true, true, 2),
            c(false, false, 0),
        ];
        for turn in 0..8 {
            let mut order = preference(&cands, turn);
            order.sort();
            assert_eq!(order, vec![0, 1, 2, 3]);
        }
        assert!(preference(&[], 3).is_empty());
    }

    fn endpoint(addr: &str, zone: &str) -> WorkerEndpoint {
        WorkerEndpoint {
            addr: addr.into(),
            zone: Zone::label(zone),
        }
    }

    fn zone(label: &str) -> Option<Zone> {
        Zone::label(label)
    }

    #[test]
    fn a_dead_worker_is_skipped_until_its_ttl_passes() {
        let pool = WorkerPool::new(
            vec![endpoint("http://a", "a"), endpoint("http://b", "b")],
            zone("a").as_ref(),
            Duration::from_secs(10),
        );
        let t0 = Instant::now();
        assert_eq!(pool.order(t0), vec![0, 1]);
        assert_eq!(
            (pool.relation(0), pool.relation(1)),
            (ZoneRelation::Same, ZoneRelation::Cross)
        );
        pool.mark_dead(0, t0);
        assert_eq!(pool.order(t0 + Duration::from_secs(1)), vec![1, 0]);
        assert_eq!(pool.order(t0 + Duration::from_secs(10)), vec![0, 1]);
        pool.mark_dead(0, t0);
        pool.mark_alive(0);
        assert_eq!(pool.order(t0), vec![0, 1]);
    }

    #[test]
    fn offloads_in_flight_steer_the_next_choice() {
        let pool = WorkerPool::new(
            vec![endpoint("http://a1", "a"), endpoint("http://a2", "a")],
            zone("a").as_ref(),
            Duration::from_secs(10),
        );
        let now = Instant::now();
        let busy = pool.begin(0);
        assert_eq!(pool.order(now)[0], 1);
        assert_eq!(pool.order(now)[0], 1);
        drop(busy);
        let firsts = [pool.order(now)[0], pool.order(now)[0]];
        assert!(firsts.contains(&0) && firsts.contains(&1), "{firsts:?}");
    }

    #[test]
    fn registrations_add_workers_and_a_lapsed_one_counts_as_dead() {
        let pool = WorkerPool::new(
            vec![endpoint("http://configured", "a")],
            zone("a").as_ref(),
            Duration::from_secs(10),
        );
        let t0 = Instant::now();
        pool.apply_registrations(
            &[endpoint("http://b1", "b"), endpoint("http://a1", "a")],
            t0,
        );
        assert_eq!(pool.addr(1), "http://b1");
        assert_eq!(pool.relation(2), ZoneRelation::Same);
        assert_eq!(pool.order(t0)[2], 1, "the other zone's worker last");
        // a1's registration lapsed: tried only after the live ones; the configured worker, which
        // never registered, is not touched.
        pool.apply_registrations(&[endpoint("http://b1", "b")], t0);
        assert_eq!(pool.order(t0)[2], 1, "one view missing is not a lapse");
        pool.apply_registrations(&[endpoint("http://b1", "b")], t0);
        assert_eq!(pool.order(t0), vec![0, 1, 2]);
        let later = pool.order(t0 + Duration::from_secs(10));
        assert_eq!(
            later[2], 1,
            "after the TTL a1 is tried again before the other zone"
        );
    }

    #[test]
    fn a_server_without_zone_treats_every_worker_alike() {
        let pool = WorkerPool::new(
            vec![endpoint("http://a", "a"), endpoint("http://b", "")],
            zone("").as_ref(),
            Duration::from_secs(10),
        );
        assert_eq!(pool.relation(0), ZoneRelation::Unknown);
        let now = Instant::now();
        let firsts = [pool.order(now)[0], pool.order(now)[0]];
        assert!(firsts.contains(&0) && firsts.contains(&1), "{firsts:?}");
    }
}
