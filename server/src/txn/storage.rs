//! `Storage`: what every transaction command runs against on one server: the engine (with key
//! → shard routing), the Raft store its writes go through, the concurrency manager, the
//! latches and the TSO.
//!
//! A command takes the latches of its keys, then a snapshot of every shard it touches (so its
//! checks see every write made before it got the latches), checks, builds one write batch per
//! shard, proposes them to the shards' Raft groups and waits until each is committed and
//! applied here, and releases the latches. Only a serving leader takes snapshots for a command
//! (`snapshots`): a follower answers `NotLeader`. The commands themselves live in the sibling
//! modules (`prewrite`, `commit`, `rollback`, `txn_status`, `reads`).

use std::collections::BTreeMap;
use std::sync::Arc;

use std::time::Duration;

use arc_swap::ArcSwapOption;
use kvengine::{Engine, SnapAccess, WriteBatch};
use raftstore::{RaftStore, RaftStoreError, Router};

use super::error::{Result, TxnError};
use super::shard_map::{ShardMap, ShardRange};
use crate::concurrency_manager::ConcurrencyManager;
use crate::latches::Latches;
use crate::tso::TimestampSource;

/// What a prewrite hook is told: the point between `lock_keys` (memory locks in place,
/// min_commit_ts fixed) and the engine write.
#[derive(Debug, Clone)]
pub struct PrewriteHookPoint {
    pub start_ts: u64,
    pub min_commit_ts: u64,
    /// Keys whose locks (or 1PC records) are about to be written.
    pub keys: Vec<Vec<u8>>,
    pub one_pc: bool,
}

/// A test hook (see [`Storage::set_prewrite_hook`]).
pub type PrewriteHook = Box<dyn Fn(&PrewriteHookPoint) + Send + Sync>;

pub struct Storage {
    pub(crate) engine: Engine,
    /// Every write goes through it; stopped when the storage is dropped.
    raft: RaftStore,
    /// How long a write waits for its entry before it checks that this replica still leads
    /// in the term it proposed in (it keeps waiting while it does).
    propose_timeout: Duration,
    /// Regions being split: their writes are refused (`ShardBusy`) until the split entry
    /// applied, so the flush before it leaves empty memtables (`Node::split`).
    splitting: parking_lot::Mutex<std::collections::BTreeSet<u64>>,
    /// The Raft term in which `max_ts` was last raised from the TSO for each region this
    /// server leads (see [`Storage::sync_max_ts`]).
    max_ts_synced: parking_lot::Mutex<std::collections::HashMap<u64, u64>>,
    shards: ShardMap,
    pub(crate) cm: Arc<ConcurrencyManager>,
    pub(crate) latches: Latches,
    pub(crate) tso: Arc<dyn TimestampSource>,
    prewrite_hook: ArcSwapOption<PrewriteHook>,
}

impl std::fmt::Debug for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Storage")
            .field("shards", &self.shards)
            .field("max_ts", &self.cm.max_ts())
            .finish_non_exhaustive()
    }
}

/// Snapshots of the shards a command touches, and which shard each of its keys is in.
pub(crate) struct Snapshots {
    by_shard: BTreeMap<u64, SnapAccess>,
    shard_of_key: Vec<u64>,
}

impl Snapshots {
    /// The snapshot holding key number `i` of the command.
    pub(crate) fn of(&self, i: usize) -> &SnapAccess {
        &self.by_shard[&self.shard_of_key[i]]
    }

    pub(crate) fn shard(&self, i: usize) -> u64 {
        self.shard_of_key[i]
    }

    pub(crate) fn shard_count(&self) -> usize {
        self.by_shard.len()
    }

    /// The shards the command touches, ascending.
    pub(crate) fn shard_ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.by_shard.keys().copied()
    }
}

/// One write batch per shard, written in shard order, each with the region epoch (`ver`)
/// of the snapshot its command read.
///
/// The epoch goes with the proposal, and apply refuses a write whose epoch changed
/// (`EpochNotMatch`, a region error the client retries on): a split applied between the
/// command's snapshot and its entry may have moved some of its keys to another region, and
/// the state the command checked (locks, write conflicts) is no longer the whole truth.
#[derive(Default)]
pub(crate) struct Batches(BTreeMap<u64, (u64, WriteBatch)>);

impl Batches {
    /// The batch of the shard holding key number `i` of the command.
    pub(crate) fn get(&mut self, snaps: &Snapshots, i: usize) -> &mut WriteBatch {
        let ver = snaps.of(i).ver();
        &mut self
            .0
            .entry(snaps.shard(i))
            .or_insert_with(|| (ver, WriteBatch::default()))
            .1
    }

    /// Proposes every non-empty batch to its shard's Raft group, all in one store round
    /// (`Router::propose_batch`), then waits for each to be committed and applied here: one
    /// round trip for many shards, not one each.
    /// Batches of different shards are not atomic together: if one fails, the others may stay
    /// (prewrite locks and rollback records are safe to leave; commit records left by a failed
    /// commit are what a retry or resolver would write).
    ///
    /// **Why the wait has no deadline while this replica leads.** The caller holds latches
    /// and memory locks; releasing them while the entry may still apply here would let another
    /// command (a resolver's rollback, a reader at a later ts) act on a state the late entry
    /// then changes. So a write waits for its answer (applied, stale or stopped) as long as
    /// this replica leads in the term it proposed in; once it stepped down (or stopped), no
    /// command here can act on its state (reads and writes need a serving leader), and the
    /// outcome is reported unknown.
    pub(crate) fn write(self, storage: &Storage) -> Result<()> {
        let router = storage.raft.router();
        let mut waiting = Vec::new();
        {
            let splitting = storage.splitting.lock();
            if let Some(shard) = self.0.keys().find(|s| splitting.contains(s)) {
                return Err(TxnError::Engine(kvengine::Error::ShardBusy {
                    shard_id: *shard,
                    reason: "splitting",
                }));
            }
        }
        let mut proposals = Vec::new();
        for (shard, (ver, batch)) in self.0 {
            if batch.is_empty() {
                continue;
            }
            let term = router.status(shard).map_or(0, |s| s.term);
            let (tx, rx) = std::sync::mpsc::sync_channel(1);
            proposals.push(raftstore::Proposal {
                region_id: shard,
                region_ver: Some(ver),
                cmd: wire::raft_cmd::Cmd::Write(batch.into_bytes()),
                cb: Box::new(move |r| {
                    let _ = tx.send(r);
                }),
            });
            waiting.push((shard, term, rx));
        }
        // One store round for every shard; on this thread when no round is running, so a
        // one-voter group has answered before the waits below.
        router.propose_batch(proposals);
        let mut first_error = None;
        for (shard, term, rx) in waiting {
            if let Err(e) = wait_for_apply(router, shard, term, &rx, storage.propose_timeout) {
                first_error.get_or_insert(TxnError::Raft(e));
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// Waits for a proposal's answer while this replica still leads `shard` in `term` (see
/// [`Batches::write`]).
fn wait_for_apply(
    router: &Router,
    shard: u64,
    term: u64,
    rx: &std::sync::mpsc::Receiver<std::result::Result<raftstore::Applied, RaftStoreError>>,
    check_every: Duration,
) -> std::result::Result<(), RaftStoreError> {
    let started = std::time::Instant::now();
    loop {
        match rx.recv_timeout(check_every) {
            Ok(r) => return r.map(|_| ()),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                let leads = router
                    .status(shard)
                    .is_some_and(|s| s.is_leader && s.term == term);
                if !leads || router.stopped().is_some() {
                    return Err(RaftStoreError::Timeout {
                        region_id: shard,
                        timeout_ms: started.elapsed().as_millis() as u64,
                    });
                }
                tracing::warn!(
                    region_id = shard,
                    waited_ms = started.elapsed().as_millis() as u64,
                    "a write is still waiting for its raft entry"
                );
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(RaftStoreError::Stopped {
                    store_id: router.store_id(),
                    reason: router.stopped().unwrap_or_default(),
                });
            }
        }
    }
}

impl Storage {
    /// Storage over every shard `engine` has now (and later ones, found on demand), writing
    /// through `raft`, the Raft store over the same engine.
    pub fn new(engine: Engine, tso: Arc<dyn TimestampSource>, raft: RaftStore) -> Result<Storage> {
        let shards = ShardMap::default();
        shards.refresh(&engine)?;
        let cm = ConcurrencyManager::new();
        // Followers' reads are checked against this server's memory locks while it leads.
        raft.set_replica_read_check(cm.clone());
        Ok(Storage {
            engine,
            raft,
            propose_timeout: Duration::from_secs(10),
            splitting: parking_lot::Mutex::new(std::collections::BTreeSet::new()),
            max_ts_synced: parking_lot::Mutex::new(std::collections::HashMap::new()),
            shards,
            cm,
            latches: Latches::default(),
            tso,
            prewrite_hook: ArcSwapOption::empty(),
        })
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Proposals and region status of the Raft store.
    pub fn router(&self) -> &Router {
        self.raft.router()
    }

    /// The Raft store (to stop it after the engine's last flush went through it).
    pub fn raft(&self) -> &RaftStore {
        &self.raft
    }

    /// How long a write waits for its entry (`[raft] propose-timeout`).
    pub fn set_propose_timeout(&mut self, timeout: Duration) {
        self.propose_timeout = timeout;
    }

    /// `Ok` when this server's replica of `region_id` is a serving leader: it has applied an
    /// entry of its own term, so its data holds every write acknowledged by earlier leaders.
    pub fn check_leader(&self, region_id: u64) -> std::result::Result<(), RaftStoreError> {
        let router = self.raft.router();
        match router.status(region_id) {
            Some(s) if s.serving => Ok(()),
            Some(s) => Err(RaftStoreError::NotLeader {
                region_id,
                store_id: router.store_id(),
                leader: s.leader.filter(|l| *l != router.store_id()),
            }),
            None => Err(RaftStoreError::RegionNotFound {
                region_id,
                store_id: router.store_id(),
            }),
        }
    }

    /// Call before taking a snapshot to read from (not for writes: a write's checks run on
    /// the leader's snapshot and its entry commits only if that leader still leads). `Ok`
    /// once a quorum confirmed this replica still leads and it applied up to the read index
    /// (`Router::read_index`): a snapshot taken after it holds every write acknowledged
    /// before the call, even if this server was paused or cut off while another leader took
    /// writes (its `serving` flag alone could be stale then).
    pub fn read_barrier(&self, region_id: u64) -> std::result::Result<(), RaftStoreError> {
        self.check_leader(region_id)?;
        self.raft
            .router()
            .read_index(region_id, self.propose_timeout)
            .map(|_| ())
    }

    /// The read barrier of a replica read (`raftstore::replica_read`), which any replica may
    /// serve: on a follower, `Ok` once the leader confirmed the read point, raised its
    /// `max_ts` to `start_ts` and found no memory lock in `ranges` (one it found is
    /// `ReadLocked`), and this replica applied up to the point; on the leader, the same as
    /// [`Storage::read_barrier`] (the caller checks this server's memory locks after it, as
    /// for any read).
    pub fn replica_read_barrier(
        &self,
        region_id: u64,
        start_ts: u64,
        ranges: &[wire::coprocessor::KeyRange],
    ) -> std::result::Result<(), RaftStoreError> {
        if start_ts == 0 {
            // The leader checks locks against start_ts; 0 would mean "nothing to check".
            return Err(RaftStoreError::InvalidCommand {
                region_id,
                detail: "a replica read needs its start_ts: expected a timestamp above 0, found 0"
                    .into(),
            });
        }
        let read = raftstore::ReplicaRead {
            start_ts,
            ranges: ranges.to_vec(),
        };
        self.raft
            .router()
            .replica_read_index(region_id, read, self.propose_timeout)
            .map(|_| ())
    }

    pub fn tso(&self) -> &Arc<dyn TimestampSource> {
        &self.tso
    }

    pub fn concurrency_manager(&self) -> &Arc<ConcurrencyManager> {
        &self.cm
    }

    /// Reloads the shard ranges from the engine (after a split or a new shard).
    pub fn refresh_shards(&self) -> Result<()> {
        self.shards.refresh(&self.engine)
    }

    /// Reloads the key-to-shard map when the engine's shards are others than the map's (a
    /// split, a new or a destroyed replica since): the cheap look after a routing refusal.
    pub fn refresh_shards_if_changed(&self) -> Result<()> {
        self.shards.refresh_if_changed(&self.engine)
    }

    /// The shard owning `key`.
    pub fn shard_for_key(&self, key: &[u8]) -> Result<u64> {
        self.shards.route(&self.engine, key)
    }

    /// The shards overlapping `[start, end)` (empty end = unbounded), in key order, after
    /// picking up shards created or split since the last look.
    pub fn shards_in_range(&self, start: &[u8], end: &[u8]) -> Result<Vec<ShardRange>> {
        self.shards.refresh_if_changed(&self.engine)?;
        Ok(self.shards.overlapping(start, end))
    }

    /// Test hook: `hook` runs inside every prewrite after its memory locks are in place and
    /// before its engine write (latches held). `None` removes it. When unset, a prewrite pays
    /// one atomic load.
    #[doc(hidden)]
    pub fn set_prewrite_hook(&self, hook: Option<PrewriteHook>) {
        self.prewrite_hook.store(hook.map(Arc::new));
    }

    pub(crate) fn fire_prewrite_hook(&self, point: impl FnOnce() -> PrewriteHookPoint) {
        if let Some(hook) = self.prewrite_hook.load().as_ref() {
            hook(&point());
        }
    }

    /// Once per Raft term of a region this server leads, before its first prewrite of the term
    /// (the only command that takes a timestamp from `max_ts`; reads must not wait for the
    /// TSO):
    /// raises `max_ts` to a fresh TSO timestamp. `max_ts` is what async commit and 1PC take
    /// their `min_commit_ts` from (above every read that may have passed a key unlocked); reads
    /// served by an earlier leader on another server raised that server's `max_ts`, not ours,
    /// and every such read's ts is below a timestamp the TSO hands out now.
    pub fn sync_max_ts(&self, region_id: u64) -> Result<()> {
        let Some(term) = self.raft.router().status(region_id).map(|s| s.term) else {
            return Ok(());
        };
        if self.max_ts_synced.lock().get(&region_id) == Some(&term) {
            return Ok(());
        }
        let ts = self.tso.get_ts()?;
        self.cm.update_max_ts(ts);
        self.max_ts_synced.lock().insert(region_id, term);
        tracing::debug!(
            region_id,
            term,
            max_ts = ts,
            "max_ts synced from the TSO for a new term"
        );
        Ok(())
    }

    /// Snapshots of the shards holding `keys` (taken now: call with the latches held). A shard
    /// retired by a split since routing is re-routed once.
    pub(crate) fn snapshots<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Snapshots> {
        let mut refreshed = false;
        'retry: loop {
            let mut shard_of_key = Vec::with_capacity(keys.len());
            for k in keys {
                shard_of_key.push(self.shard_for_key(k.as_ref())?);
            }
            let mut by_shard = BTreeMap::new();
            for &id in &shard_of_key {
                if by_shard.contains_key(&id) {
                    continue;
                }
                if let Err(e) = self.check_leader(id) {
                    // A map made before a split this replica applied routes the right child's
                    // keys to the left child (the parent's id), which another server may lead:
                    // look again once before refusing.
                    if matches!(
                        e,
                        RaftStoreError::RegionNotFound { .. } | RaftStoreError::NotLeader { .. }
                    ) && !refreshed
                    {
                        refreshed = true;
                        self.refresh_shards_if_changed()?;
                        continue 'retry;
                    }
                    return Err(TxnError::Raft(e));
                }
                match self.engine.snapshot(id) {
                    Ok(s) => {
                        by_shard.insert(id, s);
                    }
                    Err(kvengine::Error::ShardNotFound { .. }) if !refreshed => {
                        refreshed = true;
                        self.refresh_shards()?;
                        continue 'retry;
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            // The left child of a split keeps the parent's id: a key routed by a map made
            // before the split may now belong to the right child. Look again once.
            let moved = keys.iter().zip(&shard_of_key).any(|(k, id)| {
                let s = &by_shard[id];
                let k = k.as_ref();
                k < s.start() || (!s.end().is_empty() && k >= s.end())
            });
            if moved {
                if refreshed {
                    return Err(TxnError::InvalidRequest {
                        what: "a key's region changed twice while the command ran; retry".into(),
                    });
                }
                refreshed = true;
                self.refresh_shards()?;
                continue 'retry;
            }
            return Ok(Snapshots {
                by_shard,
                shard_of_key,
            });
        }
    }

    /// `Ok` when `ts` is at or above this server's GC safe point (from the placement driver,
    /// `pd::gc`): below it, compaction may have dropped versions a read at `ts` needs. Call it
    /// after taking the snapshot: a compaction reads the safe point when it starts, so every
    /// file a snapshot holds was written with a safe point at most the one checked here.
    pub fn check_gc_safe_point(&self, ts: u64) -> Result<()> {
        let safe_point = self.engine.gc_safe_point();
        if ts < safe_point {
            return Err(TxnError::BelowGcSafePoint { ts, safe_point });
        }
        Ok(())
    }

    /// A snapshot of shard `id` to read from (after a read barrier).
    pub(crate) fn snapshot(&self, id: u64) -> Result<SnapAccess> {
        self.read_barrier(id)?;
        Ok(self.engine.snapshot(id)?)
    }

    /// Marks `region_id` as splitting (writes to it are refused) until the guard drops.
    pub fn start_split(&self, region_id: u64) -> SplitGuard<'_> {
        self.splitting.lock().insert(region_id);
        SplitGuard {
            storage: self,
            region_id,
        }
    }
}

/// Refuses writes to a region while it splits (see [`Storage::start_split`]).
pub struct SplitGuard<'a> {
    storage: &'a Storage,
    region_id: u64,
}

impl Drop for SplitGuard<'_> {
    fn drop(&mut self) {
        self.storage.splitting.lock().remove(&self.region_id);
    }
}

/// Sorted, deduplicated copies of `keys`: commands treat a key named twice once.
pub(crate) fn unique_keys(keys: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut keys = keys.to_vec();
    keys.sort();
    keys.dedup();
    keys
}

/// Rejects a request that names no key.
pub(crate) fn require_keys(keys: &[Vec<u8>], what: &str) -> Result<()> {
    if keys.is_empty() {
        return Err(TxnError::InvalidRequest {
            what: format!("{what}: expected at least one key, found none"),
        });
    }
    Ok(())
}
