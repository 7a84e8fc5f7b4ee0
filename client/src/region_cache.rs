//! Which servers hold which key, and which of them leads: the regions every server reports at
//! `GET /regions`, cached by start key, each with its replicas and the one the client sends to.
//!
//! Two topologies answer the same way:
//!
//! * **Replicated** (`[raft] peers`): every server holds a replica of every region and lists
//!   every region, with its peers (store id, base URL, zone), the leader it knows of and that
//!   leader's term. Only the leader serves reads and writes.
//! * **Standalone** servers (no peers): each owns a disjoint part of the key space and lists
//!   only its own regions, with no peers. The client then takes the answering server as the one
//!   replica and its leader, with the zone of the server's labels.
//!
//! Servers answer at different moments, so two answers may disagree. [`RegionCache::insert`]
//! keeps the newer: a region overlapping a cached one of a higher `ver` (a later split) is
//! dropped; one with a higher `ver` replaces every overlap; for the same region and `ver`, the
//! answer of the higher `conf_ver` (a later membership), then naming the leader of the higher
//! Raft term wins (one leader per term), then the leader's own answer (the placement driver's
//! table is made of those): only a leader knows which replicas are caught up, and the
//! followers report none as pending.
//!
//! Leaders move. A `NotLeader` answer names the new leader when the server knows it
//! ([`RegionCache::on_not_leader`]); without a hint the next replica is tried. A server that
//! cannot be reached is marked down for [`SERVER_DOWN_TTL`] and every region it led moves to
//! its next live replica ([`RegionCache::on_server_error`]). An epoch change replaces the region
//! by the answering server's current ones ([`RegionCache::on_epoch_not_match`]).

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use types::{RegionId, Zone};
use wire::coprocessor::KeyRange;
use wire::paths;
use wire::region::{Region, RegionsResponse};

use crate::config::base_url;
use crate::error::{Error, Result};
use crate::join::{BoxFuture, join_all};
use crate::transport::Transport;

/// How long a server that failed a request is skipped by leader guesses (it is still asked
/// when a hint names it).
pub const SERVER_DOWN_TTL: Duration = Duration::from_secs(2);

/// The store id a standalone server runs as (every one of them: replicas are told apart by
/// address, store ids only within one region's peer list).
pub const STANDALONE_STORE_ID: u64 = 1;

/// One server holding a replica of a region.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replica {
    pub store_id: u64,
    /// Its base URL (`http://host:port`).
    pub addr: String,
    pub zone: Option<Zone>,
    /// Not caught up as the leader last reported: a replica waiting for its snapshot (being
    /// added or moved) serves no read and makes its zone no local zone of the region.
    pub pending: bool,
}

/// A region, its replicas and the one requests go to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedRegion {
    pub region: Region,
    /// Never empty.
    pub replicas: Vec<Replica>,
    /// Index in `replicas` of the leader (known or guessed).
    leader: usize,
    /// The answer came from the leader it names (or the placement driver's table of the
    /// leaders' reports), so its `pending` marks are the leader's view.
    from_leader: bool,
}

impl CachedRegion {
    /// `region` as `server` (zone `zone`) reported it: its peers, or, when it lists none (a
    /// standalone server), `server` alone. The leader is the one named, else the first peer.
    pub fn from_answer(region: Region, server: &str, zone: Option<Zone>) -> CachedRegion {
        if region.peers.is_empty() {
            return CachedRegion::standalone(region, server, zone);
        }
        let replicas: Vec<Replica> = region
            .peers
            .iter()
            .map(|p| Replica {
                store_id: p.store_id,
                addr: base_url(&p.addr),
                zone: p.zone(),
                pending: p.pending,
            })
            .collect();
        let named = replicas
            .iter()
            .position(|r| region.leader_store_id != 0 && r.store_id == region.leader_store_id);
        let from_leader =
            server.is_empty() || named.is_some_and(|i| replicas[i].addr == base_url(server));
        CachedRegion {
            region,
            replicas,
            leader: named.unwrap_or(0),
            from_leader,
        }
    }

    /// `region` on one server, its only replica and leader.
    pub fn standalone(region: Region, server: &str, zone: Option<Zone>) -> CachedRegion {
        CachedRegion {
            region,
            replicas: vec![Replica {
                store_id: STANDALONE_STORE_ID,
                addr: base_url(server),
                zone,
                pending: false,
            }],
            leader: 0,
            from_leader: true,
        }
    }

    pub fn id(&self) -> RegionId {
        self.region.region_id()
    }

    /// The replica requests go to.
    pub fn leader(&self) -> &Replica {
        &self.replicas[self.leader]
    }

    /// The base URL of the replica requests go to (so of the server that answers a page).
    pub fn server(&self) -> &str {
        &self.leader().addr
    }

    /// The zones holding a caught-up replica (voter or learner, not `pending`), each once, in
    /// replica order: the zones where a worker reads the region locally.
    pub fn replica_zones(&self) -> Vec<Zone> {
        let mut zones: Vec<Zone> = Vec::new();
        let caught_up = self.replicas.iter().filter(|r| !r.pending);
        for z in caught_up.filter_map(|r| r.zone.clone()) {
            if !zones.contains(&z) {
                zones.push(z);
            }
        }
        zones
    }

    /// Whether `other` is the same region at the same place in the key space (region ids of
    /// disjoint standalone servers may repeat).
    fn same_region(&self, other: &CachedRegion) -> bool {
        self.region.id == other.region.id && self.region.start == other.region.start
    }

    fn contains(&self, key: &[u8]) -> bool {
        self.region.start.as_slice() <= key
            && (self.region.end.is_empty() || key < self.region.end.as_slice())
    }
}

/// The ranges of a request that fall in one region, ascending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionRanges {
    pub region: CachedRegion,
    pub ranges: Vec<KeyRange>,
}

/// What to do after a `NotLeader` answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Retry {
    /// The hint named a replica, now the leader: send again at once.
    Now,
    /// No hint: another replica is guessed; send again after a backoff.
    After,
    /// The hint names a server outside the region's peers (a newer membership): reload the
    /// regions from it, then send again.
    ReloadFrom(String),
}

/// Regions by start key, and the servers that failed lately.
#[derive(Debug, Default)]
pub struct RegionCache {
    seeds: Vec<String>,
    /// The placement driver, when configured: the routing table comes from it first.
    pd: Option<node::PdClient>,
    by_start: RwLock<BTreeMap<Vec<u8>, CachedRegion>>,
    /// Servers that failed a request, and when.
    down: Mutex<HashMap<String, Instant>>,
}

impl RegionCache {
    /// An empty cache asking `seeds` (base URLs); [`RegionCache::load`] fills it.
    pub fn new(seeds: Vec<String>) -> RegionCache {
        RegionCache::with_pd(seeds, None)
    }

    /// A cache that loads the placement driver's routing table (`pd`), and asks `seeds` (and
    /// the servers the placement driver lists) when it cannot.
    pub fn with_pd(seeds: Vec<String>, pd: Option<node::PdClient>) -> RegionCache {
        RegionCache {
            pd,
            seeds,
            by_start: RwLock::new(BTreeMap::new()),
            down: Mutex::new(HashMap::new()),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.by_start.read().is_empty()
    }

    /// Whether the cached regions cover the whole key space without a gap.
    pub fn covers_key_space(&self) -> bool {
        let map = self.by_start.read();
        let mut next: &[u8] = &[];
        for (start, r) in map.iter() {
            if start.as_slice() != next {
                return false;
            }
            if r.region.end.is_empty() {
                return true;
            }
            next = &r.region.end;
        }
        false
    }

    /// Every cached region, by start key.
    pub fn regions(&self) -> Vec<CachedRegion> {
        self.by_start.read().values().cloned().collect()
    }

    /// Asks every seed not marked down (every seed when all are) for its regions, at once, and
    /// merges the answers. A seed that does not answer is marked down; fails only when none
    /// answered (with the last failure).
    pub async fn load(&self, transport: &Transport) -> Result<()> {
        let mut seeds = self.seeds.clone();
        if let Some(pd) = &self.pd {
            match pd.cluster().await {
                Ok(view) => {
                    // The leaders' reports: every region with its replicas and leader.
                    for region in view.regions {
                        self.insert(CachedRegion::from_answer(region, "", None));
                    }
                    if self.covers_key_space() {
                        return Ok(());
                    }
                    // A gap: no report yet (a cluster just started, a split child whose
                    // leader has not reported): ask the registered servers too.
                    for s in view.stores.iter().filter_map(|s| s.heartbeat.as_ref()) {
                        let url = base_url(&s.url);
                        if !seeds.contains(&url) {
                            seeds.push(url);
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!("cannot read the routing table from the placement driver: {e}")
                }
            }
        }
        if seeds.is_empty() {
            return Err(Error::NoRegion { key: Vec::new() });
        }
        let mut asked: Vec<&String> = seeds.iter().filter(|s| !self.is_down(s)).collect();
        if asked.is_empty() {
            asked = seeds.iter().collect();
        }
        let calls: Vec<BoxFuture<'_, Result<()>>> = asked
            .into_iter()
            .map(|s| -> BoxFuture<'_, Result<()>> { Box::pin(self.reload_from(transport, s)) })
            .collect();
        let mut last_err = None;
        let mut answered = 0;
        for r in join_all(calls).await {
            match r {
                Ok(()) => answered += 1,
                Err(e) => last_err = Some(e),
            }
        }
        match (answered, last_err) {
            (0, Some(e)) => Err(e),
            _ => Ok(()),
        }
    }

    /// Merges what `server` reports now (marking it down when it does not answer).
    pub async fn reload_from(&self, transport: &Transport, server: &str) -> Result<()> {
        let resp: RegionsResponse = match transport
            .get(server, paths::REGIONS, "regions response")
            .await
        {
            Ok(r) => r,
            Err(e) => {
                if e.is_connection() {
                    self.mark_down(server);
                }
                return Err(e);
            }
        };
        self.insert_answer(server, resp);
        Ok(())
    }

    /// Merges one server's `GET /regions` answer.
    pub fn insert_answer(&self, server: &str, resp: RegionsResponse) {
        let zone = resp.zone();
        for region in resp.regions {
            self.insert(CachedRegion::from_answer(region, server, zone.clone()));
        }
    }

    /// Caches `r` unless a newer answer is cached (see the module docs).
    pub fn insert(&self, mut r: CachedRegion) {
        let mut map = self.by_start.write();
        let overlapping: Vec<&CachedRegion> = map
            .values()
            .filter(|c| overlaps(&c.region, &r.region))
            .collect();
        if overlapping.iter().any(|c| c.region.ver > r.region.ver) {
            return;
        }
        if let Some(same) = overlapping
            .iter()
            .find(|c| c.region.id == r.region.id && c.region.ver == r.region.ver)
        {
            let rank = |c: &CachedRegion| (c.region.conf_ver, c.region.leader_term, c.from_leader);
            let newer = match rank(&r).cmp(&rank(same)) {
                std::cmp::Ordering::Greater => true,
                std::cmp::Ordering::Equal => r.region.leader_store_id != 0,
                std::cmp::Ordering::Less => false,
            };
            if !newer {
                return;
            }
            // A follower knows no catch-up state (it reports nobody pending): a replica the
            // last answer did not show caught up stays pending until its leader says so.
            if !r.from_leader {
                for replica in &mut r.replicas {
                    let before = same
                        .replicas
                        .iter()
                        .find(|o| o.store_id == replica.store_id);
                    replica.pending |= before.is_none_or(|o| o.pending);
                }
            }
        }
        let starts: Vec<Vec<u8>> = overlapping.iter().map(|c| c.region.start.clone()).collect();
        for s in starts {
            map.remove(&s);
        }
        if r.region.leader_store_id == 0 {
            r.leader = self.next_live(&r, r.leader, true);
        }
        map.insert(r.region.start.clone(), r);
    }

    /// The cached entry of `r`'s region (same id, same start), with its current leader.
    pub fn current(&self, r: &CachedRegion) -> Option<CachedRegion> {
        self.by_start
            .read()
            .get(&r.region.start)
            .filter(|c| c.same_region(r))
            .cloned()
    }

    /// The first cached region with id `id`.
    pub fn get(&self, id: RegionId) -> Option<CachedRegion> {
        self.by_start
            .read()
            .values()
            .find(|c| c.id() == id)
            .cloned()
    }

    /// Forgets region `id`.
    pub fn invalidate(&self, id: RegionId) {
        self.by_start.write().retain(|_, r| r.id() != id);
    }

    /// The region holding `key`.
    pub fn lookup(&self, key: &[u8]) -> Option<CachedRegion> {
        region_of(&self.by_start.read(), key).cloned()
    }

    /// `ranges` (ascending, non-overlapping) cut at region boundaries, grouped by region in
    /// key order.
    pub fn split_ranges(&self, ranges: &[KeyRange]) -> Result<Vec<RegionRanges>> {
        split_by_regions(&self.by_start.read(), ranges)
    }

    /// `keys` grouped by the region holding each: the region and the indices of its keys
    /// (ascending), regions in key order. Fails on the first key no region holds.
    pub fn group_keys<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
    ) -> Result<Vec<(CachedRegion, Vec<usize>)>> {
        let map = self.by_start.read();
        let mut by_start: BTreeMap<Vec<u8>, (CachedRegion, Vec<usize>)> = BTreeMap::new();
        for (i, k) in keys.iter().enumerate() {
            let k = k.as_ref();
            let r = region_of(&map, k).ok_or_else(|| Error::NoRegion { key: k.to_vec() })?;
            by_start
                .entry(r.region.start.clone())
                .or_insert_with(|| (r.clone(), Vec::new()))
                .1
                .push(i);
        }
        Ok(by_start.into_values().collect())
    }

    /// `region`'s leader answered `NotLeader`, naming `hint_store`/`hint_addr` as the leader
    /// (0/"" = unknown). See [`Retry`].
    pub fn on_not_leader(&self, region: &CachedRegion, hint_store: u64, hint_addr: &str) -> Retry {
        let hint_addr = if hint_addr.is_empty() {
            String::new()
        } else {
            base_url(hint_addr)
        };
        let mut map = self.by_start.write();
        let Some(entry) = map
            .get_mut(&region.region.start)
            .filter(|c| c.same_region(region))
        else {
            // Replaced meanwhile: the caller re-reads the cache.
            return Retry::Now;
        };
        if hint_store != 0 || !hint_addr.is_empty() {
            let named = entry
                .replicas
                .iter()
                .position(|r| hint_store != 0 && r.store_id == hint_store)
                .or_else(|| {
                    entry
                        .replicas
                        .iter()
                        .position(|r| !hint_addr.is_empty() && r.addr == hint_addr)
                });
            return match named {
                Some(i) => {
                    entry.leader = i;
                    Retry::Now
                }
                None if !hint_addr.is_empty() => Retry::ReloadFrom(hint_addr),
                // A store id outside the peers, without an address: guess as without a hint.
                None => {
                    entry.leader = self.next_live(entry, entry.leader, false);
                    Retry::After
                }
            };
        }
        // The leader that answered is not down; try the next one that is not.
        let from = entry
            .replicas
            .iter()
            .position(|r| r.addr == region.server())
            .unwrap_or(entry.leader);
        entry.leader = self.next_live(entry, from, false);
        Retry::After
    }

    /// `region` changed its epoch: it is replaced by `current` (the answering server's regions
    /// over it, `server`'s view with `zone` for regions without peers). Returns whether
    /// `current` was empty, so the caller must reload from the answering server.
    pub fn on_epoch_not_match(
        &self,
        region: &CachedRegion,
        current: Vec<Region>,
        server: &str,
    ) -> bool {
        let zone = region
            .replicas
            .iter()
            .find(|r| r.addr == base_url(server))
            .and_then(|r| r.zone.clone());
        self.by_start.write().retain(|_, c| !c.same_region(region));
        let reload = current.is_empty();
        for r in current {
            self.insert(CachedRegion::from_answer(r, server, zone.clone()));
        }
        reload
    }

    /// `addr` could not be reached: it is marked down and every region it led moves to its
    /// next live replica.
    pub fn on_server_error(&self, addr: &str) {
        let addr = base_url(addr);
        self.mark_down(&addr);
        let mut map = self.by_start.write();
        for entry in map.values_mut() {
            if entry.server() == addr {
                entry.leader = self.next_live(entry, entry.leader, false);
            }
        }
    }

    /// Whether some cached region has every replica marked down: the cache has nowhere left to
    /// send its requests (a cluster restarted on new ports moves every replica at once), so
    /// the routing table has to be read again.
    pub fn has_region_without_live_replica(&self) -> bool {
        let map = self.by_start.read();
        map.values()
            .any(|r| !r.replicas.is_empty() && r.replicas.iter().all(|p| self.is_down(&p.addr)))
    }

    /// Marks `addr` down for [`SERVER_DOWN_TTL`].
    pub fn mark_down(&self, addr: &str) {
        self.down.lock().insert(base_url(addr), Instant::now());
    }

    /// Whether `addr` failed within [`SERVER_DOWN_TTL`].
    pub fn is_down(&self, addr: &str) -> bool {
        let mut down = self.down.lock();
        match down.get(addr) {
            Some(at) if at.elapsed() < SERVER_DOWN_TTL => true,
            Some(_) => {
                down.remove(addr);
                false
            }
            None => false,
        }
    }

    /// The index of the first replica of `r` not marked down, starting at `from` (`from`
    /// itself counts when `include_from`), cyclic; `from + 1` (or `from`) when every
    /// candidate is down.
    fn next_live(&self, r: &CachedRegion, from: usize, include_from: bool) -> usize {
        let n = r.replicas.len();
        let first = if include_from { 0 } else { 1 };
        (first..n + first)
            .map(|step| (from + step) % n)
            .find(|&i| !self.is_down(&r.replicas[i].addr))
            .unwrap_or((from + first) % n)
    }
}

fn overlaps(a: &Region, b: &Region) -> bool {
    let a_before_b_ends = b.end.is_empty() || a.start < b.end;
    let b_before_a_ends = a.end.is_empty() || b.start < a.end;
    a_before_b_ends && b_before_a_ends
}

fn region_of<'m>(map: &'m BTreeMap<Vec<u8>, CachedRegion>, key: &[u8]) -> Option<&'m CachedRegion> {
    map.range(..=key.to_vec())
        .next_back()
        .map(|(_, r)| r)
        .filter(|r| r.contains(key))
}

/// See [`RegionCache::split_ranges`].
pub fn split_by_regions(
    map: &BTreeMap<Vec<u8>, CachedRegion>,
    ranges: &[KeyRange],
) -> Result<Vec<RegionRanges>> {
    let mut out: Vec<RegionRanges> = Vec::new();
    for range in ranges {
        let mut start = range.start.clone();
        loop {
            let region =
                region_of(map, &start).ok_or_else(|| Error::NoRegion { key: start.clone() })?;
            let region_end = &region.region.end;
            // The piece ends at the range's end or the region's, whichever comes first.
            let range_ends_inside = !range.end.is_empty()
                && (region_end.is_empty() || range.end.as_slice() <= region_end.as_slice());
            let end = if range_ends_inside {
                range.end.clone()
            } else {
                region_end.clone()
            };
            let piece = KeyRange::new(start.clone(), end.clone());
            match out.last_mut() {
                Some(last) if last.region.same_region(region) => last.ranges.push(piece),
                _ => out.push(RegionRanges {
                    region: region.clone(),
                    ranges: vec![piece],
                }),
            }
            if range_ends_inside || end.is_empty() {
                break;
            }
            start = end;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::region::Peer;

    fn region(id: u64, start: &str, end: &str) -> Region {
        Region {
            id,
            ver: 1,
            start: start.as_bytes().to_vec(),
            end: end.as_bytes().to_vec(),
            ..Region::default()
        }
    }

    /// Region `id` over `[start, end)` at `ver`, on stores 1, 2, 3 (`http://s1`.. in zones
    /// a, b, c), led by `leader` (0 = unknown) in `term`.
    fn replicated(id: u64, start: &str, end: &str, ver: u64, leader: u64, term: u64) -> Region {
        Region {
            ver,
            peers: (1..=3)
                .map(|s| Peer {
                    store_id: s,
                    addr: format!("http://s{s}"),
                    zone: ["a", "b", "c"][s as usize - 1].into(),
                    ..Peer::default()
                })
                .collect(),
            leader_store_id: leader,
            leader_term: term,
            ..region(id, start, end)
        }
    }

    fn answer(regions: Vec<Region>) -> RegionsResponse {
        RegionsResponse {
            regions,
            ..RegionsResponse::default()
        }
    }

    #[test]
    fn a_followers_answer_keeps_the_leaders_catch_up_marks_and_a_later_membership_wins() {
        let c = RegionCache::new(Vec::new());
        let mut led = replicated(1, "", "", 1, 1, 5);
        led.peers[2].pending = true;
        c.insert_answer("http://s1", answer(vec![led.clone()]));
        let zones = |c: &RegionCache| -> Vec<String> {
            let r = c.lookup(b"k").unwrap();
            r.replica_zones().iter().map(|z| z.to_string()).collect()
        };
        assert_eq!(zones(&c), ["a", "b"]);
        // The follower on s2 knows the same leader and term but marks nobody pending.
        c.insert_answer("http://s2", answer(vec![replicated(1, "", "", 1, 1, 5)]));
        assert_eq!(zones(&c), ["a", "b"]);
        // The leader's next answer: caught up.
        c.insert_answer("http://s1", answer(vec![replicated(1, "", "", 1, 1, 5)]));
        assert_eq!(zones(&c), ["a", "b", "c"]);
        // A follower's answer at a later membership adding a replica on store 4: that new
        // replica counts as pending until the leader reports it.
        let mut grown = replicated(1, "", "", 1, 1, 5);
        grown.conf_ver = 3;
        grown.peers.push(Peer {
            store_id: 4,
            addr: "http://s4".into(),
            zone: "d".into(),
            ..Peer::default()
        });
        c.insert_answer("http://s2", answer(vec![grown]));
        assert_eq!(zones(&c), ["a", "b", "c"]);
        // A later membership (zone c's replica removed) replaces it even from a follower.
        let mut smaller = replicated(1, "", "", 1, 1, 5);
        smaller.conf_ver = 9;
        smaller.peers.pop();
        c.insert_answer("http://s2", answer(vec![smaller.clone()]));
        assert_eq!(zones(&c), ["a", "b"]);
        // And an older membership does not come back, whatever its term.
        let mut old = replicated(1, "", "", 1, 1, 6);
        old.conf_ver = 8;
        c.insert_answer("http://s1", answer(vec![old]));
        assert_eq!(zones(&c), ["a", "b"]);
    }

    /// Two disjoint standalone servers: s1 (zone a) holds `["", c)` and `[c, f)`, s2 `[f, "")`.
    fn cache() -> RegionCache {
        let c = RegionCache::new(vec!["http://s1".into(), "http://s2".into()]);
        for r in [region(1, "", "c"), region(2, "c", "f")] {
            c.insert(CachedRegion::standalone(r, "http://s1", Zone::label("a")));
        }
        c.insert(CachedRegion::standalone(
            region(3, "f", ""),
            "http://s2",
            None,
        ));
        c
    }

    fn r(s: &str, e: &str) -> KeyRange {
        KeyRange::new(s.as_bytes(), e.as_bytes())
    }

    fn leader_of(c: &RegionCache, key: &str) -> String {
        c.lookup(key.as_bytes()).unwrap().server().to_string()
    }

    #[test]
    fn lookup_finds_the_region_holding_a_key() {
        let c = cache();
        assert_eq!(c.lookup(b"").unwrap().id(), RegionId(1));
        assert_eq!(c.lookup(b"c").unwrap().id(), RegionId(2));
        assert_eq!(c.lookup(b"ez").unwrap().id(), RegionId(2));
        let last = c.lookup(b"zzz").unwrap();
        assert_eq!((last.id(), last.server()), (RegionId(3), "http://s2"));
        assert_eq!(
            c.lookup(b"a").unwrap().replica_zones(),
            vec![Zone::label("a").unwrap()]
        );
        assert!(last.replica_zones().is_empty());
    }

    #[test]
    fn ranges_are_cut_at_region_boundaries() {
        let c = cache();
        let split = c
            .split_ranges(&[r("a", "b"), r("bb", "g"), r("h", "")])
            .unwrap();
        let got: Vec<(u64, Vec<KeyRange>)> = split
            .into_iter()
            .map(|s| (s.region.id().get(), s.ranges))
            .collect();
        assert_eq!(
            got,
            vec![
                (1, vec![r("a", "b"), r("bb", "c")]),
                (2, vec![r("c", "f")]),
                (3, vec![r("f", "g"), r("h", "")]),
            ]
        );
    }

    #[test]
    fn keys_are_grouped_by_region_in_key_order() {
        let c = cache();
        let groups = c
            .group_keys(&[b"z".to_vec(), b"a".to_vec(), b"d".to_vec(), b"b".to_vec()])
            .unwrap();
        let got: Vec<(u64, Vec<usize>)> =
            groups.into_iter().map(|(r, i)| (r.id().get(), i)).collect();
        assert_eq!(got, vec![(1, vec![1, 3]), (2, vec![2]), (3, vec![0])]);
        c.invalidate(RegionId(2));
        assert!(matches!(c.group_keys(&[b"d"]), Err(Error::NoRegion { key }) if key == b"d"));
    }

    #[test]
    fn disjoint_standalone_servers_keep_all_regions() {
        let c = RegionCache::new(vec!["http://s1".into(), "http://s2".into()]);
        // Standalone servers may reuse region ids.
        c.insert_answer("http://s1", answer(vec![region(1, "", "m")]));
        c.insert_answer("http://s2", answer(vec![region(1, "m", "")]));
        let got: Vec<(u64, String)> = c
            .regions()
            .iter()
            .map(|r| (r.id().get(), r.server().to_string()))
            .collect();
        assert_eq!(
            got,
            vec![(1, "http://s1".to_string()), (1, "http://s2".to_string())]
        );
        // Reloading one server again changes nothing.
        c.insert_answer("http://s2", answer(vec![region(1, "m", "")]));
        assert_eq!(c.regions().len(), 2);
        let split = c.split_ranges(&[r("a", "z")]).unwrap();
        assert_eq!(
            split.len(),
            2,
            "regions with the same id on two servers stay apart"
        );
    }

    #[test]
    fn a_gap_left_by_an_unreported_split_child_is_seen() {
        let c = RegionCache::new(Vec::new());
        assert!(!c.covers_key_space(), "empty");
        c.insert_answer("http://s1", answer(vec![region(1, "", "m")]));
        assert!(!c.covers_key_space(), "nothing from m on");
        c.insert_answer("http://s1", answer(vec![region(3, "t", "")]));
        assert!(!c.covers_key_space(), "[m, t) missing");
        c.insert_answer("http://s1", answer(vec![region(2, "m", "t")]));
        assert!(c.covers_key_space());
    }

    #[test]
    fn a_region_needs_reloading_only_once_every_replica_is_down() {
        let c = RegionCache::new(Vec::new());
        c.insert_answer("http://s1", answer(vec![replicated(1, "", "", 1, 1, 1)]));
        assert!(!c.has_region_without_live_replica());
        c.on_server_error("http://s1");
        c.on_server_error("http://s2");
        assert!(!c.has_region_without_live_replica(), "s3 is left to try");
        assert_eq!(c.lookup(b"k").unwrap().server(), "http://s3");
        c.on_server_error("http://s3");
        assert!(c.has_region_without_live_replica());
    }

    #[test]
    fn a_higher_ver_replaces_overlaps_and_a_lower_one_is_ignored() {
        let c = RegionCache::new(Vec::new());
        c.insert_answer("http://s1", answer(vec![replicated(1, "", "", 1, 1, 1)]));
        // A split seen by s2: both children at ver 2.
        c.insert_answer(
            "http://s2",
            answer(vec![
                replicated(1, "", "m", 2, 1, 1),
                replicated(4, "m", "", 2, 1, 1),
            ]),
        );
        // A late answer from a server that had not applied the split yet.
        c.insert_answer("http://s3", answer(vec![replicated(1, "", "", 1, 2, 5)]));
        let got: Vec<(u64, u64)> = c
            .regions()
            .iter()
            .map(|r| (r.id().get(), r.region.ver))
            .collect();
        assert_eq!(got, vec![(1, 2), (4, 2)]);
    }

    #[test]
    fn equal_ver_keeps_the_higher_terms_leader() {
        let c = RegionCache::new(Vec::new());
        c.insert_answer("http://s1", answer(vec![replicated(1, "", "", 1, 2, 7)]));
        c.insert_answer("http://s3", answer(vec![replicated(1, "", "", 1, 1, 6)]));
        assert_eq!(
            leader_of(&c, "k"),
            "http://s2",
            "the older term's leader is ignored"
        );
        c.insert_answer("http://s3", answer(vec![replicated(1, "", "", 1, 0, 7)]));
        assert_eq!(
            leader_of(&c, "k"),
            "http://s2",
            "an unknown leader does not replace a known one"
        );
        c.insert_answer("http://s2", answer(vec![replicated(1, "", "", 1, 3, 8)]));
        assert_eq!(leader_of(&c, "k"), "http://s3");
        assert_eq!(c.regions().len(), 1);
    }

    #[test]
    fn a_hint_moves_the_leader_to_that_replica() {
        let c = RegionCache::new(Vec::new());
        c.insert_answer("http://s1", answer(vec![replicated(1, "", "", 1, 1, 1)]));
        let cached = c.lookup(b"k").unwrap();
        assert_eq!(c.on_not_leader(&cached, 3, "http://s3"), Retry::Now);
        assert_eq!(leader_of(&c, "k"), "http://s3");
        // An address alone is enough.
        let cached = c.lookup(b"k").unwrap();
        assert_eq!(c.on_not_leader(&cached, 0, "http://s2/"), Retry::Now);
        assert_eq!(leader_of(&c, "k"), "http://s2");
    }

    #[test]
    fn no_hint_tries_the_next_live_replica() {
        let c = RegionCache::new(Vec::new());
        c.insert_answer("http://s1", answer(vec![replicated(1, "", "", 1, 1, 1)]));
        c.mark_down("http://s2");
        let cached = c.lookup(b"k").unwrap();
        assert_eq!(c.on_not_leader(&cached, 0, ""), Retry::After);
        assert_eq!(leader_of(&c, "k"), "http://s3", "s2 is down: skipped");
        let cached = c.lookup(b"k").unwrap();
        assert_eq!(c.on_not_leader(&cached, 0, ""), Retry::After);
        assert_eq!(leader_of(&c, "k"), "http://s1", "cyclic");
        // A standalone region has nowhere else to go.
        let s = cache();
        let one = s.lookup(b"a").unwrap();
        assert_eq!(s.on_not_leader(&one, 0, ""), Retry::After);
        assert_eq!(leader_of(&s, "a"), "http://s1");
    }

    #[test]
    fn a_server_error_moves_every_region_it_led() {
        let c = RegionCache::new(Vec::new());
        c.insert_answer(
            "http://s1",
            answer(vec![
                replicated(1, "", "m", 1, 1, 1),
                replicated(2, "m", "", 1, 2, 1),
            ]),
        );
        c.on_server_error("http://s1");
        assert!(c.is_down("http://s1"));
        assert_eq!(leader_of(&c, "a"), "http://s2", "led by s1: moved");
        assert_eq!(leader_of(&c, "z"), "http://s2", "led by s2: kept");
        c.on_server_error("http://s2");
        assert_eq!(leader_of(&c, "a"), "http://s3");
        assert_eq!(leader_of(&c, "z"), "http://s3");
        // A region answered without a leader starts at a live replica.
        c.insert_answer("http://s3", answer(vec![replicated(2, "m", "", 2, 0, 2)]));
        assert_eq!(leader_of(&c, "z"), "http://s3");
    }

    #[test]
    fn a_hint_outside_the_peers_asks_for_a_reload() {
        let c = RegionCache::new(Vec::new());
        c.insert_answer("http://s1", answer(vec![replicated(1, "", "", 1, 1, 1)]));
        let cached = c.lookup(b"k").unwrap();
        assert_eq!(
            c.on_not_leader(&cached, 9, "http://s9"),
            Retry::ReloadFrom("http://s9".into())
        );
        assert_eq!(
            leader_of(&c, "k"),
            "http://s1",
            "unchanged until the reload"
        );
    }

    #[test]
    fn an_epoch_change_replaces_the_region_by_the_current_ones() {
        let c = cache();
        let old = c.lookup(b"a").unwrap();
        let current = vec![
            Region {
                ver: 2,
                ..region(1, "", "b")
            },
            Region {
                ver: 2,
                ..region(4, "b", "c")
            },
        ];
        assert!(!c.on_epoch_not_match(&old, current, "http://s1"));
        let ids: Vec<u64> = c.regions().iter().map(|r| r.id().get()).collect();
        assert_eq!(ids, vec![1, 4, 2, 3]);
        let child = c.lookup(b"bb").unwrap();
        assert_eq!(
            (child.server(), child.replica_zones()),
            ("http://s1", vec![Zone::label("a").unwrap()])
        );
        let gone = c.lookup(b"d").unwrap();
        assert!(
            c.on_epoch_not_match(&gone, Vec::new(), "http://s1"),
            "nothing known: reload"
        );
        assert!(matches!(
            c.split_ranges(&[r("a", "d")]),
            Err(Error::NoRegion { key }) if key == b"c"
        ));
    }
}
