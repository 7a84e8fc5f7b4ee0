//! Three `stratus-server` processes that replicate every region with Raft: each server lists
//! the three as `[raft] peers` (`replicas = 3`) and the same initial regions, so every region
//! has a voter on each server and a leader elected among them.
//!
//! * Ports are reserved before the first start ([`harness::ports::reserve`]): every config
//!   names every server's URL, and [`ReplicatedCluster::restart`] brings a server back on its
//!   own (same config file, same data dir, same log).
//! * `tick-interval = 50ms` (default 100 ms): an election after a leader's death takes about
//!   0.5 to 1 s (10 to 20 ticks) instead of 1 to 2 s, which keeps failover tests short.
//! * Server 1 ([`TSO`]) runs the timestamp oracle; the others take timestamps from it. Kill it
//!   and no server can write, so failover tests kill the others.
//! * The servers share one local-directory object store, as the other test clusters do, with
//!   node ids 1, 2, 3 as their SST file prefixes.
//!
//! Which server leads a region is found by asking: a server serves a read or a write of a
//! region only while it is the region's serving leader, and refuses it otherwise (a key error
//! saying the region is not led by it). So the first server that answers a read of a key is
//! the leader of the key's region (for the moment: leadership moves on its own). The probe is a
//! read at timestamp 1 of a key no test writes, not a write: it needs no timestamp from the TSO
//! and leaves nothing behind. One exception to "only the leader answers": a server frozen
//! (SIGSTOP) while it led, then resumed, answers as the leader for a moment, until it hears of
//! the term elected without it (see [`ReplicatedCluster::move_leaders_off`]).

use std::time::{Duration, Instant};

use server::config::PeerConfig;
use types::ReadableDuration;

use crate::cluster::{Cluster, StoreKind};
use crate::server_proc::{ServerProc, ServerSetup};

/// How many servers (and voters per region).
pub const SERVERS: usize = 3;
/// The index of the server running the TSO (node id 1).
pub const TSO: usize = 0;
/// The Raft tick of every server.
pub const TICK: Duration = Duration::from_millis(50);
/// The zones of the servers, in order.
const ZONES: [&str; SERVERS] = ["a", "b", "c"];
/// Time limit of one probe read: a live server answers at once (a follower refuses at once).
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// Pause between two rounds of tries over the servers.
const RETRY_PAUSE: Duration = Duration::from_millis(50);

/// The three servers and their directory; every server is SIGKILLed on drop.
pub struct ReplicatedCluster {
    /// Index `i` runs node id `i + 1`. Declared before `cluster`: dropped first.
    servers: Vec<ServerProc>,
    /// SIGSTOPped and not continued yet: a call to one would wait for its whole timeout.
    stopped: Vec<bool>,
    /// Region `i` is `[starts[i], starts[i + 1])`, the last one unbounded.
    starts: Vec<Vec<u8>>,
    pub cluster: Cluster,
}

impl ReplicatedCluster {
    /// Starts the three servers with regions cut at `cuts` (ascending keys; none: one region
    /// over the whole key space). It does not wait for leaders: see
    /// [`ReplicatedCluster::wait_until_every_region_has_a_leader`].
    pub fn start(cuts: &[Vec<u8>]) -> ReplicatedCluster {
        ReplicatedCluster::start_with_tick(cuts, TICK)
    }

    /// [`ReplicatedCluster::start`] with another Raft tick (benchmarks measure failover with
    /// the default one).
    pub fn start_with_tick(cuts: &[Vec<u8>], tick: Duration) -> ReplicatedCluster {
        ReplicatedCluster::start_configured(Cluster::new(StoreKind::Local), cuts, tick, |_, _| {})
    }

    /// [`ReplicatedCluster::start_with_tick`] in `cluster` (whose workers a server may offload
    /// to), with `configure(i, setup)` adjusting server `i`'s config last.
    pub fn start_configured(
        cluster: Cluster,
        cuts: &[Vec<u8>],
        tick: Duration,
        configure: impl Fn(usize, &mut ServerSetup),
    ) -> ReplicatedCluster {
        let ports = harness::ports::reserve(SERVERS).unwrap_or_else(|e| panic!("{e}"));
        let urls: Vec<String> = ports
            .iter()
            .map(|p| format!("http://127.0.0.1:{p}"))
            .collect();
        let peers: Vec<PeerConfig> = (0..SERVERS)
            .map(|i| PeerConfig {
                id: i as u64 + 1,
                addr: urls[i].clone(),
                zone: types::Zone::label(ZONES[i]),
            })
            .collect();
        let mut servers = Vec::new();
        for i in 0..SERVERS {
            let mut setup = cluster.server_config(&format!("s{}", i + 1));
            setup
                .node_id(i as u16 + 1)
                .listen_port(ports[i])
                .zone(ZONES[i])
                .peers(peers.clone())
                .regions_cut_at(cuts);
            setup.raft.tick_interval = ReadableDuration::millis(tick.as_millis() as u64);
            if i != TSO {
                setup.tso_at(&urls[TSO]);
            }
            configure(i, &mut setup);
            servers.push(ServerProc::start(&setup));
        }
        let mut starts = vec![Vec::new()];
        starts.extend(cuts.iter().cloned());
        ReplicatedCluster {
            servers,
            stopped: vec![false; SERVERS],
            starts,
            cluster,
        }
    }

    /// The setup of a server joining this cluster later as node `node_id` in `zone` on `port`:
    /// it lists the three founders and itself as peers, after the first three with three
    /// replicas, so it creates no region of its own and receives replicas from the placement
    /// driver. `node_id` 0: it lists the founders only, and its id comes from the placement
    /// driver's allocator (`server::store_ident`).
    pub fn joining_setup(
        &self,
        node_id: u16,
        zone: &str,
        port: u16,
        cuts: &[Vec<u8>],
    ) -> ServerSetup {
        let mut peers: Vec<PeerConfig> = self
            .urls()
            .into_iter()
            .enumerate()
            .map(|(i, addr)| PeerConfig {
                id: i as u64 + 1,
                addr,
                zone: types::Zone::label(ZONES[i]),
            })
            .collect();
        if node_id != 0 {
            peers.push(PeerConfig {
                id: u64::from(node_id),
                addr: format!("http://127.0.0.1:{port}"),
                zone: types::Zone::label(zone),
            });
        }
        let mut setup = self.cluster.server_config(&format!("s{node_id}"));
        setup
            .node_id(node_id)
            .listen_port(port)
            .zone(zone)
            .peers(peers)
            .regions_cut_at(cuts);
        // `peers` makes every listed server a voter; a joining one is not among the voters of
        // the initial regions (it would create its own copies of them with itself a voter).
        setup.raft.replicas = SERVERS;
        setup.raft.tick_interval = ReadableDuration::millis(TICK.as_millis() as u64);
        setup
    }

    /// Sends coprocessor request `req` to server `i` until it answers without a region error
    /// (a new leader serves once it applied its first entry; a follower once it knows the
    /// leader), at most `timeout`; the answer may still be `locked` or an error.
    pub fn coprocessor_until_served(
        &self,
        i: usize,
        req: &wire::coprocessor::Request,
        timeout: Duration,
    ) -> wire::coprocessor::Response {
        let deadline = Instant::now() + timeout;
        loop {
            let resp = self.servers[i].coprocessor(req);
            if resp.region_error.is_none() {
                return resp;
            }
            assert!(
                Instant::now() < deadline,
                "server {i} never served: {:?}",
                resp.region_error
            );
            std::thread::sleep(RETRY_PAUSE);
        }
    }

    pub fn server(&self, i: usize) -> &ServerProc {
        &self.servers[i]
    }

    /// Every server's `http://127.0.0.1:PORT`, by index.
    pub fn urls(&self) -> Vec<String> {
        self.servers
            .iter()
            .map(|s| s.base_url().to_string())
            .collect()
    }

    /// How many regions the servers were started with.
    pub fn regions(&self) -> usize {
        self.starts.len()
    }

    /// The index of the initial region holding `key`.
    pub fn region_of(&self, key: &[u8]) -> usize {
        self.starts
            .iter()
            .rposition(|start| start.as_slice() <= key)
            .unwrap_or(0)
    }

    /// A key of region `region` that tests do not write (its start followed by a zero byte).
    fn probe_key(&self, region: usize) -> Vec<u8> {
        let mut key = self.starts[region].clone();
        key.push(0);
        key
    }

    /// Whether a call to server `i` can be answered: it runs and is not stopped.
    pub fn reachable(&mut self, i: usize) -> bool {
        !self.stopped[i] && self.servers[i].try_exit().is_none()
    }

    /// SIGKILL server `i` (and reap it).
    pub fn kill(&mut self, i: usize) {
        self.servers[i].kill();
        self.stopped[i] = false;
    }

    /// SIGTERM server `i` and wait for its exit (it flushes what it must first); its status.
    pub fn terminate(&mut self, i: usize) -> std::process::ExitStatus {
        self.stopped[i] = false;
        self.servers[i].terminate()
    }

    /// Starts server `i` again after it died: same port, same data dir, same log.
    pub fn restart(&mut self, i: usize) {
        self.servers[i].restart();
    }

    /// SIGSTOP server `i`: it keeps its sockets but answers nothing (a hung process).
    pub fn stop(&mut self, i: usize) {
        self.servers[i].signal(harness::supervisor::Signal::SIGSTOP);
        self.stopped[i] = true;
    }

    /// SIGCONT server `i` after [`ReplicatedCluster::stop`].
    pub fn cont(&mut self, i: usize) {
        self.servers[i].signal(harness::supervisor::Signal::SIGCONT);
        self.stopped[i] = false;
    }

    /// A fresh timestamp from the TSO server.
    pub fn tso(&self) -> u64 {
        self.servers[TSO].tso()
    }

    /// Waits until a reachable server serves every region (it answers a read of a key of it
    /// that tests never write); the index of that server per region. Panics after `timeout`
    /// with each server's last refusal and the servers' logs.
    pub fn wait_until_every_region_has_a_leader(&mut self, timeout: Duration) -> Vec<usize> {
        let deadline = Instant::now() + timeout;
        (0..self.regions())
            .map(|region| {
                let key = self.probe_key(region);
                self.first_to_answer(deadline, &format!("a read of region {region}"), |s, t| {
                    leads(s, &key, t.min(PROBE_TIMEOUT))
                })
                .0
            })
            .collect()
    }

    /// The server leading each region as the servers report it (`GET /regions`: of the
    /// answers naming a leader, the one of the highest term wins), by region id; a region
    /// no reachable server knows a leader of is missing.
    pub fn reported_leaders(&mut self) -> std::collections::BTreeMap<u64, usize> {
        let mut best: std::collections::BTreeMap<u64, (u64, usize)> = Default::default();
        for i in 0..SERVERS {
            if !self.reachable(i) {
                continue;
            }
            for r in self.servers[i].regions().regions {
                if r.leader_store_id == 0 {
                    continue;
                }
                let leader = r.leader_store_id as usize - 1;
                let e = best.entry(r.id).or_insert((r.leader_term, leader));
                if r.leader_term > e.0 {
                    *e = (r.leader_term, leader);
                }
            }
        }
        best.into_iter().map(|(id, (_, l))| (id, l)).collect()
    }

    /// Moves the leadership of region `region_id` to server `to` (`POST
    /// /admin/transfer_leader` to its current leader, asked again while it has not moved) and
    /// returns once `to` serves it: it answers a read of the region. Panics after `timeout`.
    pub fn transfer_leader(&mut self, region_id: u64, to: usize, timeout: Duration) {
        if let Err(e) = self.try_transfer_leader(region_id, to, timeout) {
            panic!("{e}");
        }
    }

    /// [`ReplicatedCluster::transfer_leader`] that says why it failed instead of panicking:
    /// tests that move leaders while servers die expect some transfers not to finish (the
    /// target is catching up, or a new election wins first).
    pub fn try_transfer_leader(
        &mut self,
        region_id: u64,
        to: usize,
        timeout: Duration,
    ) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        let region = (0..self.regions())
            .find(|r| self.servers[to].region_of(&self.probe_key(*r)).id == region_id)
            .unwrap_or_else(|| panic!("no initial region has id {region_id}"));
        let key = self.probe_key(region);
        loop {
            if let Some(&from) = self.reported_leaders().get(&region_id)
                && from != to
            {
                let body = wire::region::TransferLeaderRequest {
                    region_id,
                    to_store_id: to as u64 + 1,
                };
                let url = self.servers[from].url(wire::paths::ADMIN_TRANSFER_LEADER);
                // 409 when leadership moved meanwhile: the next look finds where.
                let _ =
                    harness::http::post(&url, prost::Message::encode_to_vec(&body), PROBE_TIMEOUT);
            }
            if leads(&self.servers[to], &key, PROBE_TIMEOUT).is_ok() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "server {to} does not lead region {region_id} after {timeout:?}"
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Moves the leadership of every region off server `i`: SIGSTOPs it, waits until the
    /// others lead every region, and SIGCONTs it; the new leaders. (A crude leader transfer
    /// that needs no server API. Right after the SIGCONT the server may still take itself for
    /// a leader until it hears of the new term: its Raft ticks stood still while it was
    /// frozen.)
    pub fn move_leaders_off(&mut self, i: usize, timeout: Duration) -> Vec<usize> {
        self.stop(i);
        let leaders = self.wait_until_every_region_has_a_leader(timeout);
        self.cont(i);
        leaders
    }

    /// Raw-loads `pairs` (all in one region: a load over several regions could commit in
    /// some and fail in others) through the first reachable server that takes them, trying
    /// them in turn until `timeout`; that server's index and the commit ts. Panics after
    /// `timeout` with each server's last refusal.
    pub fn write(&mut self, pairs: Vec<(Vec<u8>, Vec<u8>)>, timeout: Duration) -> (usize, u64) {
        let regions: std::collections::BTreeSet<usize> =
            pairs.iter().map(|(k, _)| self.region_of(k)).collect();
        assert_eq!(regions.len(), 1, "a write must stay in one region");
        let deadline = Instant::now() + timeout;
        let what = format!("a raw load of {} pairs", pairs.len());
        self.first_to_answer(deadline, &what, |s, t| s.try_raw_load(pairs.clone(), t))
    }

    /// Reads `key` at `start_ts` from the first reachable server that serves it (the leader of
    /// its region), trying them in turn until `timeout`; that server's index and the value.
    pub fn read(
        &mut self,
        key: &[u8],
        start_ts: u64,
        timeout: Duration,
    ) -> (usize, Option<Vec<u8>>) {
        let deadline = Instant::now() + timeout;
        let what = format!("a read of {}", String::from_utf8_lossy(key));
        self.first_to_answer(deadline, &what, |s, t| s.try_get(key, start_ts, t))
    }

    /// Tries `call` (given the time left) on every reachable server in turn, round after
    /// round, until one succeeds; its index and answer. Panics at `deadline` with each
    /// server's last refusal.
    fn first_to_answer<T>(
        &mut self,
        deadline: Instant,
        what: &str,
        call: impl Fn(&ServerProc, Duration) -> Result<T, String>,
    ) -> (usize, T) {
        let mut last: Vec<String> = vec!["not tried".into(); SERVERS];
        loop {
            for (i, refusal) in last.iter_mut().enumerate() {
                if !self.reachable(i) {
                    *refusal = "down or stopped".into();
                    continue;
                }
                let left = deadline.saturating_duration_since(Instant::now());
                match call(&self.servers[i], left.max(RETRY_PAUSE)) {
                    Ok(answer) => return (i, answer),
                    Err(e) => *refusal = e,
                }
            }
            if Instant::now() >= deadline {
                let refusals: Vec<String> = last
                    .iter()
                    .enumerate()
                    .map(|(i, e)| format!("server {} ({}): {e}", i + 1, self.urls()[i]))
                    .collect();
                // The servers' logs follow: each ServerProc shows its own when a test fails.
                panic!("no server took {what} in time\n{}", refusals.join("\n"));
            }
            std::thread::sleep(RETRY_PAUSE);
        }
    }
}

/// `Ok` when `server` serves reads of `key`'s region (leads it, applied its own term), by a
/// read of `key` at 1: that raises no server's max_ts. On a placement driver the GC safe point
/// soon passes 1, and the refusal that says so comes only after the read barrier and the
/// snapshot: only a serving leader gives it.
fn leads(server: &ServerProc, key: &[u8], timeout: Duration) -> Result<(), String> {
    match server.try_get(key, 1, timeout) {
        Err(e) if !e.contains("below the GC safe point") => Err(e),
        _ => Ok(()),
    }
}
