//! The store loop: the Raft groups of every region on this server, driven one round at a time.
//!
//! Each round (TiKV's `RaftPoller`, reduced to one thread at a time):
//!
//! 1. drain the mailbox: inbound messages are stepped, proposals appended, admin requests run;
//! 2. on the tick clock, tick every peer;
//! 3. collect the `Ready` of every peer that has one among those touched since their last
//!    ready (a message, a proposal, a read or a tick reached them; the others cannot have
//!    one): send what a leader may send before its own append, apply the entries committed
//!    earlier, and gather every region's new entries and hard state into **one** `LogBatch`;
//! 4. write that batch with one `RaftLog::write` (one write(2) and one fdatasync for all
//!    regions), then send the messages that had to wait for it, advance every peer and apply
//!    what the advance committed (a single replica commits on its own append);
//! 5. publish the status of those regions for the router.
//!
//! **Who runs a round.** The `Store` sits behind one mutex, so rounds never overlap and run in
//! the order they take it. The store thread runs one whenever its mailbox has something or a
//! tick is due. A caller of [`Router::write`] or [`Router::propose_batch`] that finds the mutex
//! free runs a round itself instead of handing its proposal to the store thread: the mailbox
//! first (so anything this caller sent earlier stays ahead), then its own proposals, then
//! steps 3 to 5. In a one-voter group its entry commits on the round's own append, so it is
//! applied and answered before the caller's call returns, with no thread wake-up on either side
//! (measured in BENCHMARKS.md: the two wake-ups were most of a write's cost). A caller that finds
//! a round running posts to the mailbox as `Router::propose` does, and the next round takes
//! everything posted meanwhile in one batch (one write, one fdatasync): group commit. The
//! transport's receiving side does the same with inbound messages ([`Router::deliver_batch`]):
//! a follower's append and acknowledgement, and a leader's commit, apply and answers, run on
//! the thread that received the messages. Only the store thread ticks. What holds in every round holds in both: a round is the same code
//! whoever runs it.
//!
//! Apply runs in the round too: a write is a memtable insert, and a ChangeSet only opens the
//! tables it names (the flush threads wrote them). If applying an entry keeps failing for a
//! reason outside the entry (the object store), the store stops rather than skip it: a replica
//! that skipped an entry would serve different data at the same index.
//!
//! **Commit index on disk.** A commit index learned from a light ready is written with the next
//! batch, not at once (an extra fdatasync per round). After a crash the persisted commit may
//! be below what was applied and flushed; `start` clamps raft-rs's applied index to it, and the
//! engine skips the re-delivered entries it already holds (`index <= write_sequence`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Select, TryRecvError};
use kvengine::Engine;
use kvengine::raft_log::{HardState, LogBatch, RaftLog};
use parking_lot::{Mutex, RwLock};
use prost::Message as _;
use raft::RawNode;
use raft::eraftpb;
use wire::raft_cmd::RaftCmd;

use crate::apply::Applied;
use crate::apply::{Effect, apply_entry};
use crate::config::RaftConfig;
use crate::convert;
use crate::error::{RaftStoreError, StartError};
use crate::hibernation::{self, Liveness};
use crate::log_convert::{conf_state_from_pb, entry_from_pb, hard_state_from_pb};
use crate::membership;
use crate::peer::Peer;
use crate::peer_storage::PeerStorage;
use crate::replica_read::{self, ReplicaReadCheck};
use crate::router::{Callback, ChangePeer, RegionStatus, Router, StoreMsg};
use crate::sink::RaftSink;
use crate::transport::Transport;

/// The log index and term every region's log starts after (TiKV's `RAFT_INIT_LOG_INDEX`):
/// nothing is ever stored at or below it, so a leader never has entry 1 to send, and a
/// replica added later (an empty log) always starts from a snapshot instead of replaying a
/// history that began under another range.
pub const RAFT_INIT_INDEX: u64 = 5;
pub const RAFT_INIT_TERM: u64 = 5;

/// The log state every replica of a new region starts with: truncated at the initial index
/// and term, committed there, `voters` as members.
fn initial_log_state(batch: &mut LogBatch, region_id: u64, voters: &[u64]) {
    batch.truncate(region_id, RAFT_INIT_INDEX, RAFT_INIT_TERM);
    batch.set_conf_state(
        region_id,
        kvengine::raft_log::ConfState {
            voters: voters.to_vec(),
            ..Default::default()
        },
    );
    batch.set_hard_state(
        region_id,
        HardState {
            term: RAFT_INIT_TERM,
            vote: 0,
            commit: RAFT_INIT_INDEX,
        },
    );
}

/// A region to create when the server starts for the first time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitialRegion {
    pub id: u64,
    pub start: Vec<u8>,
    pub end: Vec<u8>,
    /// Store ids of its replicas.
    pub voters: Vec<u64>,
}

/// The running store: its router and its thread.
pub struct RaftStore {
    router: Router,
    stop: Arc<AtomicBool>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl RaftStore {
    /// Creates each of `regions` the log does not hold yet: an empty shard in the engine
    /// (unless a bootstrap interrupted by a crash already made it) and the initial log state.
    /// Every replica of a region writes the same initial state (a log truncated at
    /// `RAFT_INIT_INDEX`, the voters), so whichever wins the first election leads a group all
    /// replicas agree on. The
    /// engine goes first: a crash between the two leaves a shard the next bootstrap adopts.
    /// Returns how many regions it created.
    pub fn bootstrap(
        engine: &Engine,
        log: &RaftLog,
        regions: &[InitialRegion],
    ) -> Result<usize, StartError> {
        let in_log = log.regions();
        let in_engine = engine.shard_ids();
        let mut batch = LogBatch::default();
        let mut created = 0;
        for r in regions {
            if in_log.contains(&r.id) {
                continue;
            }
            if !in_engine.contains(&r.id) {
                engine
                    .create_shard_at(r.id, &r.start, &r.end, RAFT_INIT_INDEX)
                    .map_err(StartError::Engine)?;
            }
            initial_log_state(&mut batch, r.id, &r.voters);
            created += 1;
        }
        if !batch.is_empty() {
            log.write(&batch).map_err(StartError::Log)?;
        }
        Ok(created)
    }

    /// Starts the loop over every region found in `log` (bootstrap first on a new server).
    pub fn start(
        store_id: u64,
        config: RaftConfig,
        engine: Engine,
        log: Arc<RaftLog>,
        transport: Arc<dyn Transport>,
    ) -> Result<RaftStore, StartError> {
        crate::metrics::register_all();
        let (tx, rx) = crossbeam_channel::unbounded();
        let propose_timeout = config.propose_timeout.duration();
        let tick = config.tick_interval();
        // The router reaches the store weakly: the engine holds a router (its change-set
        // sink) and the store holds the engine, so a strong reference would keep both alive
        // after the store thread ended.
        let shared = Arc::new_cyclic(|weak: &Weak<Mutex<Store>>| {
            let router = Router {
                store_id,
                tx,
                status: Arc::new(RwLock::new(HashMap::new())),
                stopped: Arc::new(Mutex::new(None)),
                store: weak.clone(),
                liveness: Liveness::new(),
                membership: Arc::new(RwLock::new(HashMap::new())),
            };
            Mutex::new(Store {
                store_id,
                config,
                engine: engine.clone(),
                log: log.clone(),
                transport,
                peers: BTreeMap::new(),
                rx: Some(rx.clone()),
                router,
                deferred: LogBatch::default(),
                answers: Vec::new(),
                after_ready: Vec::new(),
                logger: crate::logger::logger(),
                touched: BTreeSet::new(),
                ticks: 0,
                halted: false,
                read_check: None,
                uninitialized: HashMap::new(),
                destroyed: HashMap::new(),
                to_destroy: Vec::new(),
                incarnations: 0,
            })
        });
        let mut store = shared.lock();
        let router = store.router.clone();
        let mut engine_ids = engine.shard_ids();
        let mut log_ids = log.regions();
        engine_ids.sort_unstable();
        log_ids.sort_unstable();
        // A region in the log only is the right child of a split whose log was written but
        // whose engine record was not (a crash between the two, `apply::ChildLog`): the split
        // entry is applied again and makes it again.
        let mut orphans = LogBatch::default();
        log_ids.retain(|id| {
            let known = engine_ids.binary_search(id).is_ok();
            if !known {
                tracing::warn!(
                    region_id = id,
                    "dropping the raft log of a split child the engine never recorded"
                );
                orphans.remove_region(*id);
            }
            known
        });
        // A replica added by a membership change whose first snapshot a crash cut short: its
        // log was written (truncated at the snapshot) and the engine has not installed the
        // files (`install_snapshot`, "a new replica"). It starts again from nothing: the
        // leader sends the snapshot again.
        log_ids.retain(|id| {
            let Ok(info) = engine.shard_info(*id) else {
                return true;
            };
            let truncated = log.state(*id).map_or(0, |s| s.truncated_index);
            if truncated <= info.write_sequence {
                return true;
            }
            tracing::warn!(
                region_id = id,
                truncated,
                applied = info.write_sequence,
                "dropping a new replica whose first raft snapshot was not installed"
            );
            orphans.remove_region(*id);
            if let Err(e) = engine.destroy_shard(*id) {
                tracing::warn!(region_id = id, error = %e, "cannot drop the shard of an unfinished replica");
            }
            false
        });
        engine_ids = engine.shard_ids();
        if !orphans.is_empty() {
            log.write(&orphans).map_err(StartError::Log)?;
        }
        if let Some(id) = engine_ids
            .iter()
            .find(|id| log_ids.binary_search(id).is_err())
        {
            return Err(StartError::Inconsistent { region_id: *id });
        }
        for id in log_ids {
            let write_sequence = engine
                .shard_info(id)
                .map_err(StartError::Engine)?
                .write_sequence;
            let last_index = log.state(id).map_or(0, |s| s.last_index);
            if write_sequence > last_index
                && !crate::snapshot_install::complete_interrupted(&engine, &log, id, write_sequence)
                    .map_err(StartError::Log)?
            {
                // The engine flushed entries the log no longer has (its tail was lost: no
                // fsync and a machine crash), and it is not a snapshot install a crash cut
                // short (completed above). New entries would take indexes the engine already
                // counts as applied and be skipped: refuse rather than lose them.
                return Err(StartError::LogBehindEngine {
                    region_id: id,
                    applied: write_sequence,
                    last_index,
                });
            }
            let commit = log.state(id).map_or(0, |s| s.hard_state.commit);
            store.add_peer(id, write_sequence.min(commit))?;
            if let Some(peer) = store.peers.get_mut(&id) {
                peer.last_split_index = last_split_in_log(&log, id);
            }
            store.campaign_if_first(id);
        }
        engine.set_change_set_sink(Arc::new(RaftSink::new(router.clone(), propose_timeout)));
        let all: Vec<u64> = store.peers.keys().copied().collect();
        store.publish(&all, true);
        store.publish_membership(None);
        drop(store);
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name(format!("stratus-raft-{store_id}"))
            .spawn(move || run(shared, rx, &stop2, tick))
            .map_err(StartError::Thread)?;
        Ok(RaftStore {
            router,
            stop,
            thread: Mutex::new(Some(thread)),
        })
    }

    pub fn router(&self) -> &Router {
        &self.router
    }

    /// Installs the leader's side of follower reads (`replica_read`): until then this server's
    /// leaders answer followers' replica reads unchecked, which the followers refuse to serve.
    pub fn set_replica_read_check(&self, check: Arc<dyn ReplicaReadCheck>) {
        if let Some(store) = self.router.store.upgrade() {
            store.lock().read_check = Some(check);
        }
    }

    /// Stops the loop and waits for it. Waiting proposals fail with `Stopped`. Idempotent.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        let thread = self.thread.lock().take();
        if let Some(t) = thread {
            let _ = t.join();
        }
    }

    /// Waits until every region in `regions` has a serving leader somewhere this server knows
    /// of (on this server for a one-voter group), at most `timeout`.
    pub fn wait_for_leaders(&self, regions: &[u64], timeout: Duration) -> Result<(), StartError> {
        let deadline = Instant::now() + timeout;
        for &id in regions {
            loop {
                match self.router.status(id) {
                    Some(s) if s.serving || (s.leader.is_some() && !s.is_leader) => break,
                    _ => {}
                }
                if let Some(reason) = self.router.stopped() {
                    return Err(StartError::NoLeader {
                        region_id: id,
                        detail: reason,
                    });
                }
                if Instant::now() >= deadline {
                    return Err(StartError::NoLeader {
                        region_id: id,
                        detail: format!("no leader after {} ms", timeout.as_millis()),
                    });
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        Ok(())
    }
}

impl Drop for RaftStore {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Every peer of this server and what a round needs; behind the mutex that serializes rounds
/// (module docs, "Who runs a round").
pub(crate) struct Store {
    store_id: u64,
    config: RaftConfig,
    engine: Engine,
    log: Arc<RaftLog>,
    transport: Arc<dyn Transport>,
    peers: BTreeMap<u64, Peer>,
    /// The mailbox; `None` once the store halted (what is posted later fails as stopped).
    rx: Option<Receiver<StoreMsg>>,
    router: Router,
    /// Records made outside a ready (commit indexes from light readies, log truncations), written
    /// with the next batch.
    deferred: LogBatch,
    /// Answers to proposals applied this round, delivered once the round published the
    /// status of their regions (`Peer::on_applied`).
    answers: Vec<crate::peer::Answer>,
    /// Messages of the store loop itself (`hibernation`), sent after this round's ready.
    after_ready: Vec<wire::raft::RaftMessage>,
    logger: slog::Logger,
    /// Peers something happened to since their last ready (a message, a proposal, a read, a
    /// tick, a new peer): a round checks only these for a `Ready` and republishes only their
    /// status, so a write to one region costs the same however many regions the server holds
    /// (TiKV polls only the state machines that got a message). Only those calls change a
    /// raft-rs node, and a peer still holding a ready after its round stays in.
    touched: BTreeSet<u64>,
    /// Ticks so far (the log GC runs every `LOG_GC_TICKS`).
    ticks: u64,
    /// Set once the store stopped (asked to, or a round failed): no round runs any more.
    halted: bool,
    /// The leader's side of follower reads, once the server installed it (`replica_read`).
    read_check: Option<Arc<dyn ReplicaReadCheck>>,
    /// Replicas created by a leader's message, with nothing of their own yet (no shard, no
    /// log state): they wait for their first snapshot. The tick they were created at; one
    /// that gets none within `UNINITIALIZED_TICKS` is dropped (a stray message made it).
    uninitialized: HashMap<u64, u64>,
    /// Regions whose replica left this server lately, and when: a message still in flight
    /// for one does not make it again (`DESTROYED_MEMORY` later, a new add may).
    destroyed: HashMap<u64, Instant>,
    /// Replicas whose removal applied this round, destroyed once the round is over.
    to_destroy: Vec<u64>,
    /// Peers made so far: the last one's `Peer::incarnation`.
    incarnations: u64,
}

/// Ticks a replica made by a message may wait for its first snapshot.
const UNINITIALIZED_TICKS: u64 = 600;
/// How long a message for a region whose replica left is not allowed to make it again.
const DESTROYED_MEMORY: Duration = Duration::from_secs(3);

/// The log side of a split (`apply::ChildLog`): the right child's initial state, written
/// before the engine records the split.
struct SplitChildLog<'a> {
    log: &'a RaftLog,
    /// The parent: the child starts on the same servers (its voters are read only for a
    /// split, not for every entry applied).
    parent: Option<&'a Peer>,
    /// Every peer, and which of them wait for their first snapshot: the child's leader may
    /// have made an empty replica of the child here already (`start_split_child`).
    peers: &'a BTreeMap<u64, Peer>,
    uninitialized: &'a HashMap<u64, u64>,
}

impl SplitChildLog<'_> {
    /// The child's first hard state. An empty replica the child's leader made here may have
    /// voted in a later term than the split's: its term and vote are kept (raft-rs holds
    /// them in memory before the ready persisting them), or the split's replica could vote
    /// again in that term and help elect a second leader.
    fn first_hard_state(&self, right_id: u64, index: u64, term: u64) -> HardState {
        let waiting = self
            .uninitialized
            .contains_key(&right_id)
            .then(|| self.peers.get(&right_id))
            .flatten()
            .map(|p| (p.raw.raft.term, p.raw.raft.vote))
            .filter(|(waiting_term, _)| *waiting_term >= term);
        let (term, vote) = waiting.unwrap_or((term, 0));
        HardState {
            term,
            vote,
            commit: index,
        }
    }
}

impl crate::apply::ChildLog for SplitChildLog<'_> {
    fn prepare(&mut self, right_id: u64, index: u64, term: u64) -> Result<(), String> {
        // The child's log starts at the split: the parent's membership changes so far are all
        // in the state.
        let conf = self
            .parent
            .map(|p| kvengine::raft_log::ConfState {
                index,
                ..conf_state_from_pb(&p.raw.raft.prs().conf().to_conf_state())
            })
            .unwrap_or_default();
        let mut batch = LogBatch::default();
        batch.truncate(right_id, index, term);
        batch.set_conf_state(right_id, conf);
        batch.set_hard_state(right_id, self.first_hard_state(right_id, index, term));
        self.log
            .write(&batch)
            .map_err(|e| format!("raft log write of split child {right_id} failed: {e}"))
    }

    fn abandon(&mut self, right_id: u64) -> Result<(), String> {
        let mut batch = LogBatch::default();
        batch.remove_region(right_id);
        self.log
            .write(&batch)
            .map_err(|e| format!("raft log write removing split child {right_id} failed: {e}"))
    }
}

/// The index of the last split entry `log` holds for `region_id` (0: none). `Peer::
/// last_split_index` lives in memory; after a restart the log itself says where the last split
/// is, so `compact_logs` still keeps it for a voter that was down when it happened. Entries are
/// read in chunks; a log that cannot be read answers its last index (keep everything).
fn last_split_in_log(log: &RaftLog, region_id: u64) -> u64 {
    const CHUNK_BYTES: u64 = 4 << 20;
    let (Some(first), Some(last)) = (log.first_index(region_id), log.last_index(region_id)) else {
        return 0;
    };
    let mut found = 0;
    let mut low = first;
    while low <= last {
        let entries = match log.entries(region_id, low, last + 1, Some(CHUNK_BYTES)) {
            Ok(entries) => entries,
            Err(e) => {
                tracing::warn!(region_id, error = %e, "raft log unreadable while looking for splits");
                return last;
            }
        };
        let Some(end) = entries.last().map(|e| e.index) else {
            break;
        };
        for e in &entries {
            if e.kind == kvengine::raft_log::EntryKind::Normal
                && matches!(
                    RaftCmd::decode_entry(&e.data),
                    Ok((_, wire::raft_cmd::Cmd::Split(_)))
                )
            {
                found = e.index;
            }
        }
        low = end + 1;
    }
    found
}

/// How often (in ticks) leaders look for log to truncate.
const LOG_GC_TICKS: u64 = 10;
/// Entries a truncation drops at least (fewer are not worth a proposal).
const LOG_GC_ENTRIES: u64 = 64;

/// Mailbox messages handled per round at most, so ticks and readies are never starved.
const MAX_MESSAGES_PER_ROUND: usize = 4096;

/// The store thread: whenever the mailbox has something or a tick is due, a round. It waits
/// without taking a message: the round drains the mailbox under the mutex, so messages are
/// handled in the order they were posted whoever runs the round.
fn run(shared: Arc<Mutex<Store>>, rx: Receiver<StoreMsg>, stop: &AtomicBool, tick: Duration) {
    let mut next_tick = Instant::now() + tick;
    loop {
        if stop.load(Ordering::Acquire) {
            shared.lock().shut_down("the store was stopped".to_string());
            return;
        }
        let wait = next_tick.saturating_duration_since(Instant::now());
        let mut mailbox = Select::new();
        mailbox.recv(&rx);
        // Ready, timed out or disconnected: the round tells which.
        let _ = mailbox.ready_timeout(wait.min(Duration::from_millis(50)));
        let mut store = shared.lock();
        if store.halted {
            return;
        }
        let tick_due = Instant::now() >= next_tick;
        if tick_due {
            next_tick = Instant::now() + tick;
        }
        HaltOnPanic::new(&mut store).round(Vec::new(), tick_due);
        if store.halted {
            return;
        }
    }
}

/// Runs a round on the calling thread with `own` messages handled after the mailbox, when no
/// round is running and the store has not stopped (module docs, "Who runs a round"); hands
/// `own` back otherwise.
pub(crate) fn try_run_round(
    store: &Weak<Mutex<Store>>,
    own: Vec<StoreMsg>,
) -> Result<(), Vec<StoreMsg>> {
    let Some(shared) = store.upgrade() else {
        return Err(own);
    };
    let Some(mut store) = shared.try_lock() else {
        return Err(own);
    };
    if store.halted {
        return Err(own);
    }
    HaltOnPanic::new(&mut store).round(own, false);
    Ok(())
}

/// Runs a round and stops the store when it fails, or when it panics: a round cut short may
/// leave a peer between its ready and its advance, so no later round may run (the store
/// thread would otherwise go on after a caller's round panicked).
struct HaltOnPanic<'a> {
    store: &'a mut Store,
}

impl<'a> HaltOnPanic<'a> {
    fn new(store: &'a mut Store) -> HaltOnPanic<'a> {
        HaltOnPanic { store }
    }

    fn round(self, own: Vec<StoreMsg>, tick: bool) {
        if let Err(reason) = self.store.round(own, tick) {
            self.store.shut_down(reason);
        }
    }
}

impl Drop for HaltOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.store
                .shut_down("a store round panicked (see the panic message)".to_string());
        }
    }
}

impl Store {
    fn add_peer(&mut self, region_id: u64, applied: u64) -> Result<(), StartError> {
        let cfg = self.config.to_raft_config(self.store_id, applied);
        let raft_err = |e: raft::Error| StartError::Raft {
            region_id,
            detail: e.to_string(),
        };
        cfg.validate().map_err(raft_err)?;
        let storage = PeerStorage::new(region_id, self.log.clone(), self.engine.clone());
        let raw = RawNode::new(&cfg, storage, &self.logger).map_err(raft_err)?;
        let mut peer = Peer::new(region_id, raw);
        self.incarnations += 1;
        peer.incarnation = self.incarnations;
        peer.conf_index = self.log.state(region_id).map_or(0, |s| s.conf_state.index);
        self.peers.insert(region_id, peer);
        self.touched.insert(region_id);
        Ok(())
    }

    /// Starts an election at once instead of after an election timeout when this store is
    /// the region's only voter (it can only win), or the first voter of a group that never
    /// had a leader (the others wait their timeout, so the first election is not split).
    fn campaign_if_first(&mut self, region_id: u64) {
        let store_id = self.store_id;
        let Some(p) = self.peers.get_mut(&region_id) else {
            return;
        };
        let voters: Vec<u64> = p.raw.raft.prs().conf().voters().ids().iter().collect();
        let first = voters.iter().min() == Some(&store_id);
        let alone = voters == [store_id];
        if (alone || (first && p.raw.raft.term == RAFT_INIT_TERM))
            && let Err(e) = p.raw.campaign()
        {
            tracing::warn!(region_id, error = %e, "first campaign failed");
        }
    }

    /// Creates a region here at run time: an empty shard in the engine, the initial log state
    /// (as `RaftStore::bootstrap` writes it) and its peer.
    fn create_region(&mut self, region: &InitialRegion) -> Result<(), RaftStoreError> {
        let failed = |detail: String| RaftStoreError::Apply {
            region_id: region.id,
            detail,
        };
        if self.peers.contains_key(&region.id) {
            return Err(failed("the region exists".into()));
        }
        self.engine
            .create_shard_at(region.id, &region.start, &region.end, RAFT_INIT_INDEX)
            .map_err(|e| failed(e.to_string()))?;
        let mut batch = LogBatch::default();
        initial_log_state(&mut batch, region.id, &region.voters);
        self.log.write(&batch).map_err(|e| failed(e.to_string()))?;
        self.add_peer(region.id, RAFT_INIT_INDEX)
            .map_err(|e| failed(e.to_string()))?;
        self.publish_membership(Some(region.id));
        self.campaign_if_first(region.id);
        Ok(())
    }

    /// Proposes a membership change of `region_id` (`membership` module docs); `cb` is answered
    /// when it applied here.
    fn propose_change_peer(&mut self, region_id: u64, change: ChangePeer, cb: Callback) {
        let store_id = self.store_id;
        let Some(peer) = self.peers.get_mut(&region_id) else {
            cb(Err(RaftStoreError::RegionNotFound {
                region_id,
                store_id,
            }));
            return;
        };
        peer.wake();
        if !peer.is_leader() || !peer.applied_own_term {
            cb(Err(peer.not_leader(store_id)));
            return;
        }
        if peer.raw.raft.pending_conf_index > peer.raw.raft.raft_log.applied {
            cb(Err(RaftStoreError::InvalidCommand {
                region_id,
                detail: format!(
                    "a membership change (index {}) is not applied yet",
                    peer.raw.raft.pending_conf_index
                ),
            }));
            return;
        }
        let now = membership::membership(&peer.raw);
        match membership::conf_change_for(region_id, store_id, &now, change) {
            Ok(cc) => {
                tracing::info!(region_id, ?change, "proposing a membership change");
                peer.propose_conf_change(store_id, cc, cb);
            }
            Err(e) => cb(Err(e)),
        }
    }

    /// Applies a committed conf-change entry: raft-rs takes the change, the new membership is
    /// written to the log at once (the engine's applied index may be flushed past the entry
    /// before the round's batch is written), the engine's applied index moves past the entry
    /// (every replica alike: the data version stays the same across replicas), and a leader
    /// that removed a replica tells it to leave. A replica that removed itself leaves at the
    /// end of the round.
    fn apply_conf_change(&mut self, region_id: u64, entry: &eraftpb::Entry) -> Result<(), String> {
        let store_id = self.store_id;
        let cc = membership::decode_conf_change(entry).map_err(|e| {
            format!(
                "cannot apply entry {} of region {region_id}: {e}",
                entry.index
            )
        })?;
        self.engine
            .apply_noop(region_id, entry.index)
            .map_err(|e| {
                format!(
                    "cannot apply entry {} of region {region_id}: {e}",
                    entry.index
                )
            })?;
        let Some(peer) = self.peers.get_mut(&region_id) else {
            return Ok(());
        };
        let applied = Applied {
            index: entry.index,
            outcome: None,
        };
        let Some(cc) = cc else {
            peer.on_applied(entry.index, entry.term, Ok(applied), &mut self.answers);
            return Ok(());
        };
        if entry.index <= peer.conf_index {
            // Replayed (after a restart, or after a snapshot whose membership is newer than
            // its data): the membership includes it already, and applying it again could undo
            // a later change, such as the removal of this server's earlier replica.
            peer.on_applied(entry.index, entry.term, Ok(applied), &mut self.answers);
            return Ok(());
        }
        let conf = peer.raw.apply_conf_change(&cc).map_err(|e| {
            format!(
                "raft-rs refused the conf change at index {} of region {region_id}: {e}",
                entry.index
            )
        })?;
        let mut batch = LogBatch::default();
        batch.set_conf_state(
            region_id,
            kvengine::raft_log::ConfState {
                index: entry.index,
                ..conf_state_from_pb(&conf)
            },
        );
        self.log.write(&batch).map_err(|e| {
            format!("raft log write of region {region_id}'s membership failed: {e}")
        })?;
        peer.conf_index = entry.index;
        let removed = cc.change_type == eraftpb::ConfChangeType::RemoveNode;
        let tombstone = (removed && peer.is_leader() && cc.node_id != store_id).then(|| {
            wire::raft::RaftMessage {
                region_id,
                from_store: store_id,
                to_store: cc.node_id,
                extra: Some(wire::raft::ExtraMessage {
                    kind: wire::raft::ExtraKind::Tombstone as i32,
                    term: peer.term(),
                    index: entry.index,
                }),
                ..Default::default()
            }
        });
        peer.on_applied(
            entry.index,
            entry.term,
            Ok(Applied {
                index: entry.index,
                outcome: None,
            }),
            &mut self.answers,
        );
        crate::metrics::CONF_CHANGES.inc();
        tracing::info!(region_id, index = entry.index, change = ?cc.change_type, store = cc.node_id, voters = ?conf.voters, learners = ?conf.learners, "membership changed");
        self.after_ready.extend(tombstone);
        if removed && cc.node_id == store_id {
            self.to_destroy.push(region_id);
        }
        self.publish_membership(Some(region_id));
        Ok(())
    }

    /// A message for a region this server has no replica of: when it is a leader's append,
    /// heartbeat or snapshot, the region added a replica here: it is created, empty, to wait
    /// for its first snapshot (`membership` module docs). True when a replica exists now.
    fn maybe_create_peer(&mut self, m: &wire::raft::RaftMessage) -> bool {
        use wire::raft::MessageType;
        let region_id = m.region_id;
        let Some(msg) = &m.message else {
            return false;
        };
        let from_leader = matches!(
            msg.msg_type(),
            MessageType::MsgAppend | MessageType::MsgHeartbeat | MessageType::MsgSnapshot
        );
        if !from_leader
            || msg.term == 0
            || self.engine.shard_ids().binary_search(&region_id).is_ok()
        {
            return false;
        }
        if self
            .destroyed
            .get(&region_id)
            .is_some_and(|at| at.elapsed() < DESTROYED_MEMORY)
        {
            return false;
        }
        if let Err(e) = self.add_peer(region_id, 0) {
            tracing::warn!(region_id, error = %e, "cannot create a replica for a leader's message");
            return false;
        }
        self.uninitialized.insert(region_id, self.ticks);
        tracing::info!(
            region_id,
            leader = m.from_store,
            "replica created for a leader's message; waiting for a snapshot"
        );
        true
    }

    /// Whether `m` carries a snapshot whose range overlaps a shard this engine holds (an
    /// undecodable one counts as overlapping: it is not installed either way).
    fn snapshot_overlaps(&self, m: &wire::raft::RaftMessage) -> bool {
        let Some(data) = m
            .message
            .as_ref()
            .and_then(|msg| msg.snapshot.as_ref())
            .map(|snap| &snap.data)
        else {
            return false;
        };
        let Ok(cs) = <changeset::ChangeSet as prost::Message>::decode(&data[..]) else {
            return true;
        };
        let Some(changeset::Change::Snapshot(snap)) = &cs.change else {
            return true;
        };
        self.engine.shard_ids().into_iter().any(|id| {
            self.engine.shard_info(id).is_ok_and(|i| {
                (i.end.is_empty() || snap.start < i.end)
                    && (snap.end.is_empty() || i.start < snap.end)
            })
        })
    }

    /// The region's leader removed this replica (`ExtraKind::Tombstone`): it leaves, unless it
    /// leads the region itself (a stale message from an old leader).
    fn on_tombstone(&mut self, m: &wire::raft::RaftMessage) {
        let region_id = m.region_id;
        let Some(peer) = self.peers.get(&region_id) else {
            return;
        };
        let term = m.extra.as_ref().map_or(0, |e| e.term);
        if peer.is_leader() || term < peer.term() {
            return;
        }
        tracing::info!(
            region_id,
            from = m.from_store,
            term,
            "the region's leader removed this replica"
        );
        self.to_destroy.push(region_id);
    }

    /// Removes the replica of `region_id` from this server: its waiting proposals fail, its
    /// shard leaves the engine (first: a crash after it leaves a log-only region, which
    /// `start` drops), then its log.
    fn destroy_peer(&mut self, region_id: u64) -> Result<(), String> {
        let Some(mut peer) = self.peers.remove(&region_id) else {
            return Ok(());
        };
        peer.fail_pending(&RaftStoreError::RegionNotFound {
            region_id,
            store_id: self.store_id,
        });
        self.engine.set_leader(region_id, false);
        if self.engine.shard_ids().binary_search(&region_id).is_ok() {
            self.engine
                .destroy_shard(region_id)
                .map_err(|e| format!("cannot drop the shard of removed region {region_id}: {e}"))?;
        }
        if self.log.state(region_id).is_some() {
            let mut batch = LogBatch::default();
            batch.remove_region(region_id);
            self.log.write(&batch).map_err(|e| {
                format!("cannot drop the raft log of removed region {region_id}: {e}")
            })?;
        }
        self.uninitialized.remove(&region_id);
        self.touched.remove(&region_id);
        self.destroyed.insert(region_id, Instant::now());
        self.router.status.write().remove(&region_id);
        self.router.membership.write().remove(&region_id);
        crate::metrics::REPLICAS_DESTROYED.inc();
        tracing::info!(
            region_id,
            store_id = self.store_id,
            "replica removed from this server"
        );
        Ok(())
    }

    /// Drops the replicas made by a message that got no snapshot in time, and forgets old
    /// removals.
    fn drop_stale_uninitialized(&mut self) {
        let ticks = self.ticks;
        let stale: Vec<u64> = self
            .uninitialized
            .iter()
            .filter(|(_, since)| ticks.saturating_sub(**since) > UNINITIALIZED_TICKS)
            .map(|(id, _)| *id)
            .collect();
        for id in stale {
            tracing::info!(
                region_id = id,
                "dropping a replica that never got its first snapshot"
            );
            self.uninitialized.remove(&id);
            self.peers.remove(&id);
            self.touched.remove(&id);
        }
        self.destroyed
            .retain(|_, at| at.elapsed() < DESTROYED_MEMORY);
    }

    /// Publishes the membership of `only` (or of every initialized replica) for the router.
    fn publish_membership(&self, only: Option<u64>) {
        let mut out = self.router.membership.write();
        let mut one = |id: u64, p: &Peer| {
            if !self.uninitialized.contains_key(&id) {
                out.insert(id, membership::membership(&p.raw));
            }
        };
        match only {
            Some(id) => {
                if let Some(p) = self.peers.get(&id) {
                    one(id, p);
                }
            }
            None => {
                for (id, p) in &self.peers {
                    one(*id, p);
                }
            }
        }
    }

    /// One round (module docs): the mailbox, then `own` (a calling thread's proposals), then
    /// the ticks when `tick`, the readies, the published status.
    fn round(&mut self, own: Vec<StoreMsg>, tick: bool) -> Result<(), String> {
        let drained = self.drain_mailbox()?;
        if drained {
            for msg in own {
                self.handle(msg);
            }
        } else {
            // The mailbox holds more than a round takes: `own` goes behind it, so what this
            // caller posted earlier is still handled first.
            for msg in own {
                self.post(msg);
            }
        }
        for id in &self.touched {
            // Reads arrive through the mailbox, which touched their peer.
            if let Some(p) = self.peers.get_mut(id) {
                p.send_reads(self.store_id);
            }
        }
        if tick {
            let read_timeout = self.config.election_timeout();
            // A sleeping region is not ticked (`hibernation`), nor touched by the tick.
            for (id, p) in self.peers.iter_mut().filter(|(_, p)| !p.hibernating) {
                p.raw.tick();
                p.expire_reads(self.store_id, read_timeout);
                self.touched.insert(*id);
            }
            self.ticks += 1;
            self.hibernation_tick(self.ticks);
            if self
                .ticks
                .is_multiple_of(self.config.heartbeat_ticks as u64)
            {
                self.file_gc_tick();
            }
            if self.ticks.is_multiple_of(LOG_GC_TICKS) {
                self.compact_logs();
            }
        }
        let readied = self.on_ready()?;
        for id in std::mem::take(&mut self.to_destroy) {
            self.destroy_peer(id)?;
        }
        if tick {
            self.drop_stale_uninitialized();
            if self
                .ticks
                .is_multiple_of(self.config.heartbeat_ticks as u64)
            {
                self.publish_membership(None);
            }
        }
        // The store loop's own messages go after the round's Raft messages (`hibernation`).
        if !self.after_ready.is_empty() {
            self.transport.send(std::mem::take(&mut self.after_ready));
        }
        self.publish(&readied, tick);
        self.deliver_answers();
        Ok(())
    }

    /// Answers the proposals this round applied (after its status is published).
    fn deliver_answers(&mut self) {
        for (cb, result) in self.answers.drain(..) {
            cb(result);
        }
    }

    /// Handles what the mailbox holds, at most `MAX_MESSAGES_PER_ROUND` messages so ticks
    /// and readies are never starved; `Ok(false)` when some were left.
    fn drain_mailbox(&mut self) -> Result<bool, String> {
        let Some(rx) = self.rx.take() else {
            return Ok(true);
        };
        let mut drained = Ok(false);
        for _ in 0..MAX_MESSAGES_PER_ROUND {
            match rx.try_recv() {
                Ok(msg) => self.handle(msg),
                Err(TryRecvError::Empty) => {
                    drained = Ok(true);
                    break;
                }
                Err(TryRecvError::Disconnected) => {
                    drained = Err("the router is gone".to_string());
                    break;
                }
            }
        }
        self.rx = Some(rx);
        drained
    }

    /// Puts `msg` at the back of the mailbox (a stopped store answers it at once).
    fn post(&self, msg: StoreMsg) {
        if let Err(crossbeam_channel::SendError(msg)) = self.router.tx.send(msg) {
            self.router.fail_stopped(msg);
        }
    }

    /// Stops the store for `reason`: nothing leads or serves here any more, every waiting
    /// proposal and read fails with `Stopped`, and no round runs again. Idempotent.
    fn shut_down(&mut self, reason: String) {
        if self.halted {
            return;
        }
        self.halted = true;
        tracing::info!(store_id = self.store_id, %reason, "raft store stopped");
        *self.router.stopped.lock() = Some(reason.clone());
        // Nothing here leads or serves any more.
        self.router.status.write().clear();
        // What applied before the round failed is in the engine: its writers learn so.
        self.deliver_answers();
        let err = RaftStoreError::Stopped {
            store_id: self.store_id,
            reason,
        };
        for (id, p) in self.peers.iter_mut() {
            p.fail_pending(&err);
            // The engine's leader-only jobs stop: their proposals could not go anywhere.
            self.engine.set_leader(*id, false);
        }
        // Later posts fail at once once the store thread's receiver is gone too.
        if let Some(rx) = self.rx.take() {
            for msg in rx.try_iter() {
                self.router.fail_stopped(msg);
            }
        }
    }

    fn handle(&mut self, msg: StoreMsg) {
        let region_id = match &msg {
            StoreMsg::Raft(m) => Some(m.region_id),
            StoreMsg::ReadIndex { region_id, .. }
            | StoreMsg::Propose { region_id, .. }
            | StoreMsg::TransferLeader { region_id, .. }
            | StoreMsg::Campaign { region_id } => Some(*region_id),
            StoreMsg::ChangePeer { region_id, .. } | StoreMsg::DestroyReplica { region_id } => {
                Some(*region_id)
            }
            // `add_peer` touches the new region.
            StoreMsg::CreateRegion { .. } => None,
        };
        if let Some(id) = region_id
            && self.peers.contains_key(&id)
        {
            self.touched.insert(id);
        }
        match msg {
            StoreMsg::Raft(m) => self.step(*m),
            StoreMsg::Propose {
                region_id,
                region_ver,
                cmd,
                cb,
            } => {
                let store_id = self.store_id;
                let Some(peer) = self.peers.get_mut(&region_id) else {
                    cb(Err(RaftStoreError::RegionNotFound {
                        region_id,
                        store_id,
                    }));
                    return;
                };
                let ver = match region_ver {
                    Some(v) => v,
                    None => match self.engine.snapshot(region_id) {
                        Ok(snap) => snap.ver(),
                        Err(e) => {
                            cb(Err(RaftStoreError::Apply {
                                region_id,
                                detail: e.to_string(),
                            }));
                            return;
                        }
                    },
                };
                let data = RaftCmd::new(ver, cmd).encode_to_vec();
                let limit = self.config.max_entry_size.bytes();
                if data.len() as u64 > limit {
                    cb(Err(RaftStoreError::InvalidCommand {
                        region_id,
                        detail: format!(
                            "entry too large: expected at most raft.max-entry-size={limit} bytes, found {}",
                            data.len()
                        ),
                    }));
                    return;
                }
                peer.propose(store_id, data, cb);
            }
            StoreMsg::ReadIndex {
                region_id,
                replica,
                cb,
            } => {
                let store_id = self.store_id;
                match self.peers.get_mut(&region_id) {
                    Some(peer) => peer.read(store_id, replica, cb),
                    None => cb(Err(RaftStoreError::RegionNotFound {
                        region_id,
                        store_id,
                    })),
                }
            }
            StoreMsg::TransferLeader { region_id, to } => {
                if let Some(p) = self.peers.get_mut(&region_id) {
                    p.wake();
                    p.raw.transfer_leader(to);
                }
            }
            StoreMsg::CreateRegion { region, cb } => {
                let r = self.create_region(&region);
                cb(r.map(|()| crate::apply::Applied {
                    index: 0,
                    outcome: None,
                }));
            }
            StoreMsg::ChangePeer {
                region_id,
                change,
                cb,
            } => self.propose_change_peer(region_id, change, cb),
            StoreMsg::DestroyReplica { region_id } => {
                if self.peers.get(&region_id).is_some_and(|p| !p.is_leader()) {
                    tracing::info!(
                        region_id,
                        "the placement driver says this replica is no longer a member"
                    );
                    self.to_destroy.push(region_id);
                }
            }
            StoreMsg::Campaign { region_id } => {
                if let Some(p) = self.peers.get_mut(&region_id) {
                    p.wake();
                    if let Err(e) = p.raw.campaign() {
                        tracing::debug!(region_id, error = %e, "campaign failed");
                    }
                }
            }
        }
    }

    /// Steps an inbound message into its region's peer. A message for a region this server
    /// has no replica of (a split not applied here yet) is dropped: the sender retries.
    fn step(&mut self, mut m: wire::raft::RaftMessage) {
        let region_id = m.region_id;
        if !self.peers.contains_key(&region_id) && !self.maybe_create_peer(&m) {
            tracing::debug!(
                region_id,
                from = m.from_store,
                "message for an unknown region dropped"
            );
            return;
        }
        if let (Some(msg), Some(peer)) = (&m.message, self.peers.get(&region_id))
            && msg.msg_type() == wire::raft::MessageType::MsgHeartbeat
            && msg.commit > peer.raw.raft.raft_log.last_index()
        {
            // A heartbeat committing past this replica's log: the leader's progress is that of
            // an earlier replica here (one waiting for its first snapshot, or one removed and
            // added again before the placement driver saw it leave). raft-rs would panic and
            // halt the store; dropped, the replica stays behind until the operator adding it
            // times out and removes it.
            tracing::warn!(
                region_id,
                commit = msg.commit,
                last_index = peer.raw.raft.raft_log.last_index(),
                "heartbeat committing past this replica's log dropped"
            );
            return;
        }
        if self.uninitialized.contains_key(&region_id) && self.snapshot_overlaps(&m) {
            // A split child this server will make itself when it applies the split (TiKV's
            // check of an uninitialized peer's snapshot against the regions it holds).
            tracing::debug!(
                region_id,
                "snapshot for a new replica overlaps a region held here; dropped"
            );
            return;
        }
        if m.extra
            .as_ref()
            .is_some_and(|e| e.kind() == wire::raft::ExtraKind::Tombstone)
        {
            self.on_tombstone(&m);
            return;
        }
        let Some(peer) = self.peers.get_mut(&region_id) else {
            return;
        };
        // Every envelope of a region may carry the sender's file GC indexes (`file_gc`): a
        // report for a leader, the group index for everyone. Neither wakes the region.
        if m.file_gc_safe_index > 0 {
            peer.file_gc.record(m.from_store, m.file_gc_safe_index);
        }
        if m.file_gc_group_index > 0 {
            self.engine
                .raise_file_gc_group_index(region_id, m.file_gc_group_index);
        }
        if let Some(extra) = &m.extra {
            // A sleeping leader's word: sleep too if this replica is where the leader is.
            if extra.kind() == wire::raft::ExtraKind::Hibernate
                && hibernation::follower_may_sleep(&peer.raw, m.from_store, extra.term, extra.index)
            {
                peer.hibernating = true;
            }
            return;
        }
        match convert::take_message(&mut m) {
            Ok(mut msg) => {
                if hibernation::wakes(&msg) {
                    peer.wake();
                }
                if msg.get_msg_type() == eraftpb::MessageType::MsgReadIndex && peer.is_leader() {
                    replica_read::check_forwarded(self.read_check.as_ref(), region_id, &mut msg);
                }
                if let Err(e) = peer.raw.step(msg) {
                    tracing::debug!(region_id, error = %e, "raft step failed");
                }
            }
            Err(e) => tracing::warn!(region_id, error = %e, "undecodable raft message dropped"),
        }
    }

    /// Whether the peer of `region_id` is still the one `incarnation` names.
    fn is_current(&self, region_id: u64, incarnation: u64) -> bool {
        self.peers
            .get(&region_id)
            .is_some_and(|p| p.incarnation == incarnation)
    }

    /// One ready round over the touched peers (module docs, steps 3 and 4); returns them.
    fn on_ready(&mut self) -> Result<Vec<u64>, String> {
        let mut batch = std::mem::take(&mut self.deferred);
        let mut readies = Vec::new();
        let ids: Vec<u64> = std::mem::take(&mut self.touched).into_iter().collect();
        for id in &ids {
            let Some(peer) = self.peers.get_mut(id) else {
                continue;
            };
            if !peer.raw.has_ready() {
                continue;
            }
            let mut rd = peer.raw.ready();
            if let Some(ss) = rd.ss() {
                let leader = ss.raft_state == raft::StateRole::Leader;
                peer.on_role_changed(self.store_id);
                self.engine.set_leader(*id, leader);
                tracing::info!(region_id = id, store_id = self.store_id, role = ?ss.raft_state, leader_id = ss.leader_id, term = peer.term(), "raft role changed");
            }
            let msgs = rd.take_messages();
            self.send_reporting_snapshots(*id, msgs);
            if !rd.snapshot().is_empty() {
                self.install_snapshot(*id, rd.snapshot(), &mut batch)?;
            }
            let committed = rd.take_committed_entries();
            self.apply(*id, committed)?;
            let Some(peer) = self.peers.get_mut(id) else {
                continue;
            };
            let read_states = rd.take_read_states();
            if !read_states.is_empty() {
                peer.on_read_states(read_states);
            }
            readies.push((*id, peer.incarnation, rd));
        }
        // A ready belongs to the peer it was taken from. Applying a split above may have
        // replaced a peer whose ready was already taken (an empty replica the split child's
        // leader created here, `start_split_child`): that ready's log records are not written
        // (they would put back the empty replica's hard state over the split's) and it is not
        // advanced below (raft-rs panics advancing a ready on another node).
        readies.retain(|(id, incarnation, _)| {
            let current = self.is_current(*id, *incarnation);
            if !current {
                tracing::info!(
                    region_id = id,
                    "ready of a replica the split replaced dropped"
                );
            }
            current
        });
        for (id, _, rd) in &readies {
            if !rd.entries().is_empty() {
                batch.append(*id, rd.entries().iter().map(entry_from_pb).collect());
            }
            if let Some(hs) = rd.hs() {
                batch.set_hard_state(*id, hard_state_from_pb(hs));
            }
        }
        if !batch.is_empty() {
            self.log
                .write(&batch)
                .map_err(|e| format!("raft log write failed: {e}"))?;
        }
        for (id, incarnation, mut rd) in readies {
            // Advancing an earlier region in this loop may have applied a split replacing
            // this one (as above): its ready is dropped, its messages unsent.
            if !self.is_current(id, incarnation) {
                tracing::info!(
                    region_id = id,
                    "ready of a replica the split replaced dropped"
                );
                continue;
            }
            let msgs = rd.take_persisted_messages();
            self.send(id, msgs);
            let Some(peer) = self.peers.get_mut(&id) else {
                continue;
            };
            let mut light = peer.raw.advance(rd);
            if let Some(commit) = light.commit_index() {
                let mut hs = peer.raw.raft.hard_state();
                hs.commit = commit;
                self.deferred.set_hard_state(id, hard_state_from_pb(&hs));
            }
            let msgs = light.take_messages();
            self.send(id, msgs);
            let committed = light.take_committed_entries();
            self.apply(id, committed)?;
            if let Some(peer) = self.peers.get_mut(&id) {
                peer.raw.advance_apply();
            }
        }
        for id in &ids {
            if self.peers.get(id).is_some_and(|p| p.raw.has_ready()) {
                self.touched.insert(*id);
            }
        }
        Ok(ids)
    }

    fn apply(&mut self, region_id: u64, entries: Vec<eraftpb::Entry>) -> Result<(), String> {
        if entries.is_empty() {
            return Ok(());
        }
        let _timer = crate::metrics::APPLY_DURATION.start_timer();
        for entry in entries {
            if entry.get_entry_type() != eraftpb::EntryType::EntryNormal {
                self.apply_conf_change(region_id, &entry)?;
                continue;
            }
            let mut child_log = SplitChildLog {
                log: &self.log,
                parent: self.peers.get(&region_id),
                peers: &self.peers,
                uninitialized: &self.uninitialized,
            };
            let (result, effect) = apply_entry(&self.engine, region_id, &entry, &mut child_log)
                .map_err(|e| {
                    format!(
                        "cannot apply entry {} of region {region_id} on this replica: {}",
                        entry.index, e.0
                    )
                })?;
            if let Some(peer) = self.peers.get_mut(&region_id) {
                peer.on_applied(entry.index, entry.term, result, &mut self.answers);
            }
            match effect {
                Effect::None => {}
                Effect::CompactLog { index, .. } => self.compact_log(region_id, index, entry.index),
                Effect::SplitRight { right_id } => {
                    if let Some(peer) = self.peers.get_mut(&region_id) {
                        peer.last_split_index = entry.index;
                    }
                    self.start_split_child(region_id, right_id, entry.index, entry.term)?
                }
            }
        }
        Ok(())
    }

    /// After each tick (`hibernation`): leaders idle long enough put their regions to sleep
    /// and tell their followers; sleeping followers whose leader's store went silent wake to
    /// elect; every `heartbeat-ticks`, one heartbeat to each other store.
    fn hibernation_tick(&mut self, ticks: u64) {
        if !self.config.hibernate_regions {
            return;
        }
        let now = Instant::now();
        let timeout = self.config.election_timeout();
        let sleep_after =
            hibernation::HIBERNATE_AFTER_ELECTIONS * self.config.election_timeout_ticks;
        let mut out = Vec::new();
        for (id, p) in self.peers.iter_mut() {
            if p.hibernating {
                let leader_silent = p.leader().is_some_and(|l| {
                    l != self.store_id && self.router.liveness.silent(l, timeout, now)
                });
                if !p.is_leader() && leader_silent {
                    tracing::info!(region_id = id, leader = ?p.leader(), "leader's store silent: waking to elect");
                    p.wake_to_elect();
                }
                continue;
            }
            if !hibernation::leader_idle(&p.raw, p.busy()) {
                p.idle_ticks = 0;
                continue;
            }
            p.idle_ticks += 1;
            if p.idle_ticks < sleep_after {
                continue;
            }
            p.hibernating = true;
            let extra = wire::raft::ExtraMessage {
                kind: wire::raft::ExtraKind::Hibernate as i32,
                term: p.term(),
                index: p.raw.raft.raft_log.last_index(),
            };
            let indexes = file_gc_indexes(&self.engine, self.store_id, *id, p);
            p.file_gc.sent(indexes);
            out.extend(to_other_voters(self.store_id, *id, p, extra, indexes));
        }
        if ticks.is_multiple_of(self.config.heartbeat_ticks as u64) {
            // The servers this one shares a region with (membership is static: read only
            // when a heartbeat goes, not every tick).
            let mut stores = std::collections::BTreeSet::new();
            for p in self.peers.values() {
                stores.extend(p.raw.raft.prs().conf().voters().ids().iter());
            }
            for store in stores.into_iter().filter(|s| *s != self.store_id) {
                out.push(wire::raft::RaftMessage {
                    from_store: self.store_id,
                    to_store: store,
                    extra: Some(wire::raft::ExtraMessage {
                        kind: wire::raft::ExtraKind::StoreHeartbeat as i32,
                        ..Default::default()
                    }),
                    ..Default::default()
                });
            }
        }
        // After this round's ready: a heartbeat raft-rs produced at this tick must not reach a
        // follower after the Hibernate and wake it again (the transport keeps the order).
        self.after_ready.extend(out);
    }

    /// Every `heartbeat-ticks` (`file_gc`): each awake leader raises its group index (a
    /// one-voter group sends no message that would), and each sleeping region whose indexes
    /// moved since they last went out sends them to the other voters in a `FileGc` extra
    /// message, which wakes nothing.
    fn file_gc_tick(&mut self) {
        let mut out = Vec::new();
        for (id, p) in self.peers.iter_mut() {
            if !p.hibernating && !p.is_leader() {
                continue;
            }
            let indexes = file_gc_indexes(&self.engine, self.store_id, *id, p);
            if p.hibernating && p.file_gc.changed(indexes) {
                p.file_gc.sent(indexes);
                let extra = wire::raft::ExtraMessage {
                    kind: wire::raft::ExtraKind::FileGc as i32,
                    ..Default::default()
                };
                out.extend(to_other_voters(self.store_id, *id, p, extra, indexes));
            }
        }
        self.after_ready.extend(out);
    }

    /// Log GC: each region's leader proposes `CompactLog` once the log holds `LOG_GC_ENTRIES`
    /// entries below the point every replica can do without, then sealed segments nothing
    /// needs are deleted. That point is the leader's `data_sequence` (what it flushed; a
    /// snapshot stands for exactly that index, `peer_storage`), lowered to what each
    /// recently active follower has appended (`matched`), so a live follower a little behind
    /// keeps getting entries rather than a snapshot. A follower that is down does not hold
    /// the log back (it catches up by snapshot when it returns), except below a split it has
    /// not appended (`Peer::last_split_index`). Every replica applies the
    /// entry by truncating only below its own `data_sequence` (`compact_log`), so no replica
    /// drops an entry it has not flushed.
    fn compact_logs(&mut self) {
        let store_id = self.store_id;
        for (id, p) in self.peers.iter_mut() {
            if !p.is_leader() {
                continue;
            }
            let mut to = self.engine.shard_info(*id).map_or(0, |i| i.data_sequence);
            for (peer_id, pr) in p.raw.raft.prs().iter() {
                if *peer_id == store_id {
                    continue;
                }
                if pr.recent_active {
                    to = to.min(pr.matched);
                }
                // A voter that has not appended the last split, even one that is down, must
                // get it from the log: a snapshot of the changed range cannot be installed
                // on its unsplit replica.
                if pr.matched < p.last_split_index {
                    to = to.min(p.last_split_index.saturating_sub(1));
                }
            }
            let truncated = self.log.state(*id).map_or(0, |s| s.truncated_index);
            if to < truncated + LOG_GC_ENTRIES {
                continue;
            }
            let cmd =
                wire::raft_cmd::Cmd::CompactLog(wire::raft_cmd::CompactLog { index: to, term: 0 });
            let data = RaftCmd::new(0, cmd).encode_to_vec();
            // The proposal wakes a sleeping region; its ready must be collected this round.
            p.propose(store_id, data, Box::new(|_| {}));
            self.touched.insert(*id);
        }
        match self.log.purge() {
            Ok(0) => {}
            Ok(n) => tracing::debug!(segments = n, "raft log segments purged"),
            Err(e) => tracing::warn!(error = %e, "raft log purge failed"),
        }
    }

    /// Drops log entries up to `to`, but never above what this replica has flushed: entries
    /// above its `data_sequence` are its only durable copy of memtable rows. `at` is the
    /// CompactLog entry's own index, which bounds `to` (a larger one is malformed).
    fn compact_log(&mut self, region_id: u64, to: u64, at: u64) {
        let flushed = self
            .engine
            .shard_info(region_id)
            .map_or(0, |i| i.data_sequence);
        let to = to.min(flushed).min(at.saturating_sub(1));
        match self.log.term(region_id, to) {
            Ok(term) if to > 0 => self.deferred.truncate(region_id, to, term),
            Ok(_) => {}
            Err(e) => tracing::debug!(region_id, to, error = %e, "log compaction skipped"),
        }
    }

    /// A split at `(index, term)` of `parent` created `right_id` in the engine (its log was
    /// written just before, `SplitChildLog`): its group starts here with the parent's voters
    /// and (if this server leads the parent) an election right away, so the child has a
    /// leader without waiting out an election timeout.
    fn start_split_child(
        &mut self,
        parent: u64,
        right_id: u64,
        index: u64,
        _term: u64,
    ) -> Result<(), String> {
        let Some(p) = self.peers.get(&parent) else {
            return Ok(());
        };
        let lead = p.is_leader();
        // The child's leader may have reached this server before the split did and made an
        // empty replica waiting for a snapshot: the split makes the real one.
        if self.uninitialized.remove(&right_id).is_some() {
            self.peers.remove(&right_id);
        }
        self.add_peer(right_id, index)
            .map_err(|e| format!("cannot start split child {right_id}: {e}"))?;
        if lead && let Some(child) = self.peers.get_mut(&right_id) {
            let _ = child.raw.campaign();
        }
        self.publish_membership(Some(right_id));
        tracing::info!(parent, right_id, index, "split child group started");
        Ok(())
    }

    /// Installs a Raft snapshot a leader sent (module docs of `peer_storage`): the engine
    /// takes the file list as the state at the snapshot's index, and this round's log batch
    /// drops every entry up to it and records the snapshot's membership. Failing to install
    /// stops the store: raft-rs already counts the snapshot as restored, so going on would
    /// leave the engine behind its log.
    fn install_snapshot(
        &mut self,
        region_id: u64,
        snap: &eraftpb::Snapshot,
        batch: &mut LogBatch,
    ) -> Result<(), String> {
        let meta = snap.get_metadata();
        let (index, term) = (meta.index, meta.term);
        let fail = |detail: String| {
            format!(
                "cannot install the raft snapshot of region {region_id} at index {index}: {detail}"
            )
        };
        let cs = <changeset::ChangeSet as prost::Message>::decode(&snap.data[..])
            .map_err(|e| fail(format!("undecodable changeset: {e}")))?;
        if cs.shard_id != region_id {
            return Err(fail(format!(
                "expected a changeset of region {region_id}, found one of {}",
                cs.shard_id
            )));
        }
        let conf = kvengine::raft_log::ConfState {
            index: crate::peer_storage::conf_index_of(&cs),
            ..conf_state_from_pb(meta.get_conf_state())
        };
        if self.uninitialized.contains_key(&region_id) {
            // A new replica: its log state first (a crash before the engine's install leaves
            // a log truncated above the engine, which `start` drops), then an empty shard of
            // the snapshot's range for the install below.
            let mut first = LogBatch::default();
            first.truncate(region_id, index, term);
            first.set_conf_state(region_id, conf.clone());
            first.set_hard_state(
                region_id,
                HardState {
                    term,
                    vote: 0,
                    commit: index,
                },
            );
            self.log
                .write(&first)
                .map_err(|e| fail(format!("raft log write failed: {e}")))?;
            self.engine
                .create_shard_for_raft_snapshot(&cs)
                .map_err(|e| fail(e.to_string()))?;
            self.uninitialized.remove(&region_id);
        }
        let outcome = crate::snapshot_install::install_in_engine(&self.engine, index, term, &cs)
            .map_err(|e| fail(e.to_string()))?;
        batch.truncate(region_id, index, term);
        let conf_index = conf.index;
        batch.set_conf_state(region_id, conf);
        if let Some(peer) = self.peers.get_mut(&region_id) {
            peer.on_snapshot_installed(index);
            peer.conf_index = peer.conf_index.max(conf_index);
        }
        self.publish_membership(Some(region_id));
        crate::metrics::SNAPSHOTS_RECEIVED.inc();
        tracing::info!(region_id, index, term, ?outcome, "raft snapshot installed");
        Ok(())
    }

    /// Sends a ready's messages; a snapshot among them is reported sent at once, so the
    /// leader goes back to probing the follower: if the snapshot is lost on the way, the probe
    /// finds the follower still behind the truncated log and a new snapshot goes (a lost one
    /// would otherwise pause the follower's progress for good).
    fn send_reporting_snapshots(&mut self, region_id: u64, msgs: Vec<eraftpb::Message>) {
        let snapshot_to: Vec<u64> = msgs
            .iter()
            .filter(|m| m.get_msg_type() == eraftpb::MessageType::MsgSnapshot)
            .map(|m| m.to)
            .collect();
        self.send(region_id, msgs);
        if let Some(peer) = self.peers.get_mut(&region_id) {
            for to in snapshot_to {
                peer.raw.report_snapshot(to, raft::SnapshotStatus::Finish);
            }
        }
    }

    /// Sends a ready's messages, each in an envelope with this replica's file GC indexes.
    fn send(&mut self, region_id: u64, msgs: Vec<eraftpb::Message>) {
        if msgs.is_empty() {
            return;
        }
        // The epoch only (a snapshot is two atomic loads; `shard_info` would count files).
        let ver = self.engine.snapshot(region_id).map_or(0, |s| s.ver());
        let (safe, group) = self.file_gc_indexes(region_id);
        let out = msgs
            .into_iter()
            .map(|m| wire::raft::RaftMessage {
                region_id,
                from_store: self.store_id,
                region_ver: ver,
                to_store: m.to,
                message: Some(convert::message_to_wire(m)),
                file_gc_safe_index: safe,
                file_gc_group_index: group,
                ..Default::default()
            })
            .collect();
        if let Some(peer) = self.peers.get_mut(&region_id) {
            peer.file_gc.sent((safe, group));
        }
        self.transport.send(out);
    }

    fn file_gc_indexes(&self, region_id: u64) -> (u64, u64) {
        match self.peers.get(&region_id) {
            Some(p) => file_gc_indexes(&self.engine, self.store_id, region_id, p),
            None => (0, 0),
        }
    }

    /// Publishes the status of `ids` (the peers a round readied: no other status changed) for
    /// the router. The gauges, which sum over every peer, are refreshed on ticks and when a
    /// region appeared or changed leader, not every round (the engine WAL's gauges too).
    fn publish(&self, ids: &[u64], tick: bool) {
        let mut reshaped = false;
        {
            let mut status = self.router.status.write();
            for id in ids {
                let Some(p) = self.peers.get(id) else {
                    continue;
                };
                if self.uninitialized.contains_key(id) {
                    continue;
                }
                let now = RegionStatus {
                    leader: p.leader(),
                    term: p.term(),
                    is_leader: p.is_leader(),
                    serving: p.is_leader() && p.applied_own_term,
                    applied: p.raw.raft.raft_log.applied,
                    hibernating: p.hibernating,
                    conf_index: p.conf_index,
                };
                let before = status.insert(*id, now);
                reshaped |= before.is_none_or(|b| b.is_leader != now.is_leader);
            }
            // Falling asleep needs no ready: on ticks, the flag of every region is checked.
            if tick {
                for (id, p) in &self.peers {
                    if let Some(s) = status.get_mut(id) {
                        s.hibernating = p.hibernating;
                    }
                }
            }
        }
        if tick || reshaped {
            self.publish_gauges();
        }
    }

    fn publish_gauges(&self) {
        // The Raft log is this server's write-ahead log: its counters are the WAL's.
        let stats = self.log.stats();
        kvengine::metrics::WAL_BYTES.set(stats.bytes_written as i64);
        kvengine::metrics::WAL_FSYNCS.set(stats.fsyncs as i64);
        let (mut leaders, mut lag) = (0i64, 0u64);
        for p in self.peers.values() {
            leaders += i64::from(p.is_leader());
            let log = &p.raw.raft.raft_log;
            lag += log.committed.saturating_sub(log.applied);
        }
        crate::metrics::LEADERS.set(leaders);
        crate::metrics::REPLICAS.set(self.peers.len() as i64);
        crate::metrics::APPLY_LAG.set(lag as i64);
        crate::metrics::HIBERNATED
            .set(self.peers.values().filter(|p| p.hibernating).count() as i64);
    }
}

/// The file GC indexes of `peer`'s replica of `region_id` on store `store_id`, to put on what
/// it sends (`file_gc`): its own safe index, and the highest group index it knows. A leader
/// first raises the engine's group index to the minimum over its voters' latest reports and
/// its own.
fn file_gc_indexes(engine: &Engine, store_id: u64, region_id: u64, peer: &Peer) -> (u64, u64) {
    let own = engine.file_gc_safe_index(region_id);
    if peer.is_leader() {
        let voters = peer.raw.raft.prs().iter().map(|(id, _)| *id);
        let group = peer.file_gc.group_index(store_id, own, voters);
        engine.raise_file_gc_group_index(region_id, group);
    }
    (own, engine.file_gc_group_index(region_id))
}

/// `extra` from store `store_id` to every other voter of `peer`'s region, each envelope with
/// the file GC `indexes` (safe, group).
fn to_other_voters(
    store_id: u64,
    region_id: u64,
    peer: &Peer,
    extra: wire::raft::ExtraMessage,
    (safe, group): (u64, u64),
) -> Vec<wire::raft::RaftMessage> {
    peer.raw
        .raft
        .prs()
        .iter()
        .map(|(voter, _)| *voter)
        .filter(|voter| *voter != store_id)
        .map(|voter| wire::raft::RaftMessage {
            region_id,
            from_store: store_id,
            to_store: voter,
            extra: Some(extra.clone()),
            file_gc_safe_index: safe,
            file_gc_group_index: group,
            ..Default::default()
        })
        .collect()
}
