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

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
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
}

pub struct WorkerPool {
    workers: Vec<PooledWorker>,
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
            .map(|endpoint| PooledWorker {
                local: server_zone.is_none() || endpoint.zone.as_ref() == server_zone,
                relation: ZoneRelation::of(server_zone, endpoint.zone.as_ref()),
                endpoint,
                dead_until: Mutex::new(None),
                in_flight: AtomicUsize::new(0),
            })
            .collect();
        WorkerPool {
            workers,
            dead_ttl,
            turn: AtomicUsize::new(0),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.workers.is_empty()
    }

    pub fn addr(&self, i: usize) -> &str {
        &self.workers[i].endpoint.addr
    }

    /// `same`, `cross` or `unknown`: the worker's zone relative to this server's.
    pub fn relation(&self, i: usize) -> ZoneRelation {
        self.workers[i].relation
    }

    fn is_alive(&self, i: usize, now: Instant) -> bool {
        self.workers[i]
            .dead_until
            .lock()
            .is_none_or(|until| now >= until)
    }

    /// The order the next offload tries the workers in (each once).
    pub fn order(&self, now: Instant) -> Vec<usize> {
        let candidates: Vec<Candidate> = (0..self.workers.len())
            .map(|i| Candidate {
                local: self.workers[i].local,
                alive: self.is_alive(i, now),
                in_flight: self.workers[i].in_flight.load(Ordering::Relaxed),
            })
            .collect();
        preference(&candidates, self.turn.fetch_add(1, Ordering::Relaxed))
    }

    /// Worker `i` failed to answer: dead until `now + dead-ttl`.
    pub fn mark_dead(&self, i: usize, now: Instant) {
        *self.workers[i].dead_until.lock() = Some(now + self.dead_ttl);
    }

    /// Worker `i` answered: alive again.
    pub fn mark_alive(&self, i: usize) {
        *self.workers[i].dead_until.lock() = None;
    }

    /// Counts an offload in flight on worker `i` until the guard drops.
    pub fn begin(&self, i: usize) -> InFlight<'_> {
        self.workers[i].in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight {
            counter: &self.workers[i].in_flight,
        }
    }

    /// For `GET /status`: each worker's address, zone, liveness and offloads in flight.
    pub fn status(&self, now: Instant) -> serde_json::Value {
        (0..self.workers.len())
            .map(|i| {
                let w = &self.workers[i];
                serde_json::json!({
                    "addr": w.endpoint.addr,
                    "zone": types::zone::label(w.endpoint.zone.as_ref()),
                    "zone_relation": w.relation.as_str(),
                    "alive": self.is_alive(i, now),
                    "in_flight": w.in_flight.load(Ordering::Relaxed),
                })
            })
            .collect()
    }
}

/// See [`WorkerPool::begin`].
pub struct InFlight<'a> {
    counter: &'a AtomicUsize,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.counter.fetch_sub(1, Ordering::Relaxed);
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
