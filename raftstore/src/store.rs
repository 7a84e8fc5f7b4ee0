//! The store loop: one thread drives the Raft groups of every region on this server.
//!
//! Each round (TiKV's `RaftPoller`, reduced to one thread):
//!
//! 1. drain the mailbox: inbound messages are stepped, proposals appended, admin requests run;
//! 2. on the tick clock, tick every peer;
//! 3. collect the `Ready` of every peer that has one: send what a leader may send before its
//!    own append, apply the entries committed earlier, and gather every region's new entries
//!    and hard state into **one** `LogBatch`;
//! 4. write that batch with one `RaftLog::write` (one write(2) and one fdatasync for all
//!    regions), then send the messages that had to wait for it, advance every peer and apply
//!    what the advance committed (a single replica commits on its own append);
//! 5. publish each region's status for the router.
//!
//! Apply runs on this thread too: a write is a memtable insert, and a ChangeSet only opens the
//! tables it names (the flush threads wrote them). If applying an entry keeps failing for a
//! reason outside the entry (the object store), the store stops rather than skip it: a replica
//! that skipped an entry would serve different data at the same index.
//!
//! **Commit index on disk.** A commit index learned from a light ready is written with the next
//! batch, not at once (an extra fdatasync per round). After a crash the persisted commit may
//! be below what was applied and flushed; `start` clamps raft-rs's applied index to it, and the
//! engine skips the re-delivered entries it already holds (`index <= write_sequence`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use kvengine::Engine;
use kvengine::raft_log::{HardState, LogBatch, RaftLog};
use parking_lot::{Mutex, RwLock};
use prost::Message as _;
use raft::RawNode;
use raft::eraftpb;
use wire::raft_cmd::RaftCmd;

use crate::apply::{Effect, apply_entry};
use crate::config::RaftConfig;
use crate::convert;
use crate::error::{RaftStoreError, StartError};
use crate::log_convert::{conf_state_from_pb, entry_from_pb, hard_state_from_pb};
use crate::peer::Peer;
use crate::peer_storage::PeerStorage;
use crate::router::{RegionStatus, Router, StoreMsg};
use crate::sink::RaftSink;
use crate::transport::Transport;

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
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl RaftStore {
    /// Creates `regions` in the engine and the log when both are empty (a new server). Every
    /// replica of a region writes the same initial state (an empty log, term 0, the voters),
    /// so whichever wins the first election leads a group all replicas agree on.
    pub fn bootstrap(
        engine: &Engine,
        log: &RaftLog,
        regions: &[InitialRegion],
    ) -> Result<bool, StartError> {
        if !engine.shard_ids().is_empty() || !log.regions().is_empty() {
            return Ok(false);
        }
        let mut batch = LogBatch::default();
        for r in regions {
            engine
                .create_shard(r.id, &r.start, &r.end)
                .map_err(StartError::Engine)?;
            batch.set_conf_state(
                r.id,
                kvengine::raft_log::ConfState {
                    voters: r.voters.clone(),
                    ..Default::default()
                },
            );
            batch.set_hard_state(r.id, HardState::default());
        }
        log.write(&batch).map_err(StartError::Log)?;
        Ok(true)
    }

    /// Starts the loop over every region found in `log` (bootstrap first on a new server).
    pub fn start(
        store_id: u64,
        config: RaftConfig,
        engine: Engine,
        log: Arc<RaftLog>,
        transport: Arc<dyn Transport>,
    ) -> Result<RaftStore, StartError> {
        let (tx, rx) = mpsc::channel();
        let router = Router {
            store_id,
            tx,
            status: Arc::new(RwLock::new(HashMap::new())),
            stopped: Arc::new(Mutex::new(None)),
        };
        let propose_timeout = config.propose_timeout.duration();
        let mut store = Store {
            store_id,
            config,
            engine: engine.clone(),
            log: log.clone(),
            transport,
            peers: BTreeMap::new(),
            rx,
            router: router.clone(),
            deferred: LogBatch::default(),
            logger: crate::logger::logger(),
        };
        let mut engine_ids = engine.shard_ids();
        let mut log_ids = log.regions();
        engine_ids.sort_unstable();
        log_ids.sort_unstable();
        if let Some(id) = engine_ids
            .iter()
            .chain(&log_ids)
            .find(|id| engine_ids.binary_search(id).is_err() || log_ids.binary_search(id).is_err())
        {
            return Err(StartError::Inconsistent { region_id: *id });
        }
        for id in log_ids {
            let write_sequence = engine
                .shard_info(id)
                .map_err(StartError::Engine)?
                .write_sequence;
            let commit = log.state(id).map_or(0, |s| s.hard_state.commit);
            store.add_peer(id, write_sequence.min(commit))?;
        }
        engine.set_change_set_sink(Arc::new(RaftSink::new(router.clone(), propose_timeout)));
        store.publish();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name(format!("stratus-raft-{store_id}"))
            .spawn(move || store.run(&stop2))
            .map_err(StartError::Thread)?;
        Ok(RaftStore {
            router,
            stop,
            thread: Some(thread),
        })
    }

    pub fn router(&self) -> &Router {
        &self.router
    }

    /// Stops the loop and waits for it. Waiting proposals fail with `Stopped`.
    pub fn stop(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for RaftStore {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

struct Store {
    store_id: u64,
    config: RaftConfig,
    engine: Engine,
    log: Arc<RaftLog>,
    transport: Arc<dyn Transport>,
    peers: BTreeMap<u64, Peer>,
    rx: mpsc::Receiver<StoreMsg>,
    router: Router,
    /// Records made outside a ready (commit indexes from light readies, log truncations), written
    /// with the next batch.
    deferred: LogBatch,
    logger: slog::Logger,
}

/// Mailbox messages handled per round at most, so ticks and readies are never starved.
const MAX_MESSAGES_PER_ROUND: usize = 4096;

impl Store {
    fn add_peer(&mut self, region_id: u64, applied: u64) -> Result<(), StartError> {
        let cfg = self.config.to_raft_config(self.store_id, applied);
        let raft_err = |e: raft::Error| StartError::Raft {
            region_id,
            detail: e.to_string(),
        };
        cfg.validate().map_err(raft_err)?;
        let storage = PeerStorage::new(region_id, self.log.clone());
        let raw = RawNode::new(&cfg, storage, &self.logger).map_err(raft_err)?;
        self.peers.insert(region_id, Peer::new(region_id, raw));
        Ok(())
    }

    fn run(mut self, stop: &std::sync::atomic::AtomicBool) {
        let tick = self.config.tick_interval();
        let mut next_tick = Instant::now() + tick;
        let reason = loop {
            if stop.load(std::sync::atomic::Ordering::Acquire) {
                break "the store was stopped".to_string();
            }
            let wait = next_tick.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(wait.min(Duration::from_millis(50))) {
                Ok(msg) => {
                    self.handle(msg);
                    let more: Vec<StoreMsg> =
                        self.rx.try_iter().take(MAX_MESSAGES_PER_ROUND).collect();
                    for msg in more {
                        self.handle(msg);
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break "the router is gone".into(),
            }
            if Instant::now() >= next_tick {
                for p in self.peers.values_mut() {
                    p.raw.tick();
                }
                next_tick = Instant::now() + tick;
            }
            if let Err(reason) = self.on_ready() {
                break reason;
            }
            self.publish();
        };
        tracing::info!(store_id = self.store_id, %reason, "raft store stopped");
        *self.router.stopped.lock() = Some(reason.clone());
        let err = RaftStoreError::Stopped {
            store_id: self.store_id,
            reason,
        };
        for p in self.peers.values_mut() {
            p.fail_pending(&err);
        }
        for msg in self.rx.try_iter() {
            if let StoreMsg::Propose { cb, .. } = msg {
                cb(Err(err.clone()));
            }
        }
    }

    fn handle(&mut self, msg: StoreMsg) {
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
                    None => match self.engine.shard_info(region_id) {
                        Ok(info) => info.ver,
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
                peer.propose(store_id, data, cb);
            }
            StoreMsg::TransferLeader { region_id, to } => {
                if let Some(p) = self.peers.get_mut(&region_id) {
                    p.raw.transfer_leader(to);
                }
            }
            StoreMsg::Campaign { region_id } => {
                if let Some(p) = self.peers.get_mut(&region_id)
                    && let Err(e) = p.raw.campaign()
                {
                    tracing::debug!(region_id, error = %e, "campaign failed");
                }
            }
        }
    }

    /// Steps an inbound message into its region's peer. A message for a region this server
    /// has no replica of (a split not applied here yet) is dropped: the sender retries.
    fn step(&mut self, mut m: wire::raft::RaftMessage) {
        let region_id = m.region_id;
        let Some(peer) = self.peers.get_mut(&region_id) else {
            tracing::debug!(
                region_id,
                from = m.from_store,
                "message for an unknown region dropped"
            );
            return;
        };
        match convert::take_message(&mut m) {
            Ok(msg) => {
                if let Err(e) = peer.raw.step(msg) {
                    tracing::debug!(region_id, error = %e, "raft step failed");
                }
            }
            Err(e) => tracing::warn!(region_id, error = %e, "undecodable raft message dropped"),
        }
    }

    /// One ready round over every peer (module docs, steps 3 and 4).
    fn on_ready(&mut self) -> Result<(), String> {
        let mut batch = std::mem::take(&mut self.deferred);
        let mut readies = Vec::new();
        let ids: Vec<u64> = self.peers.keys().copied().collect();
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
                peer.on_role_changed();
                self.engine.set_leader(*id, leader);
                tracing::info!(region_id = id, store_id = self.store_id, role = ?ss.raft_state, leader_id = ss.leader_id, term = peer.term(), "raft role changed");
            }
            let msgs = rd.take_messages();
            self.send(*id, msgs);
            if !rd.snapshot().is_empty() {
                return Err(format!(
                    "region {id} received a raft snapshot, which this version cannot install"
                ));
            }
            let committed = rd.take_committed_entries();
            self.apply(*id, committed)?;
            let Some(peer) = self.peers.get_mut(id) else {
                continue;
            };
            if !rd.entries().is_empty() {
                batch.append(*id, rd.entries().iter().map(entry_from_pb).collect());
            }
            if let Some(hs) = rd.hs() {
                batch.set_hard_state(*id, hard_state_from_pb(hs));
            }
            let _ = peer;
            readies.push((*id, rd));
        }
        if !batch.is_empty() {
            self.log
                .write(&batch)
                .map_err(|e| format!("raft log write failed: {e}"))?;
        }
        for (id, mut rd) in readies {
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
        Ok(())
    }

    fn apply(&mut self, region_id: u64, entries: Vec<eraftpb::Entry>) -> Result<(), String> {
        for entry in entries {
            let (result, effect) = apply_entry(&self.engine, region_id, &entry).map_err(|e| {
                format!(
                    "applying entry {} of region {region_id} keeps failing: {}",
                    entry.index, e.0
                )
            })?;
            if let Some(peer) = self.peers.get_mut(&region_id) {
                peer.on_applied(entry.index, entry.term, result);
            }
            match effect {
                Effect::None => {}
                Effect::CompactLog { index, term } => {
                    self.deferred.truncate(region_id, index, term)
                }
                Effect::SplitRight { right_id } => {
                    self.start_split_child(region_id, right_id, entry.index, entry.term)?
                }
            }
        }
        Ok(())
    }

    /// A split at `(index, term)` of `parent` created `right_id` in the engine: its group
    /// starts here with an empty log truncated at the split's index, the parent's voters, and
    /// (if this server leads the parent) an election right away, so the child has a leader
    /// without waiting out an election timeout.
    fn start_split_child(
        &mut self,
        parent: u64,
        right_id: u64,
        index: u64,
        term: u64,
    ) -> Result<(), String> {
        let Some(p) = self.peers.get(&parent) else {
            return Ok(());
        };
        let conf = conf_state_from_pb(&p.raw.raft.prs().conf().to_conf_state());
        let lead = p.is_leader();
        let mut batch = LogBatch::default();
        batch.truncate(right_id, index, term);
        batch.set_conf_state(right_id, conf);
        batch.set_hard_state(
            right_id,
            HardState {
                term,
                vote: 0,
                commit: index,
            },
        );
        self.log
            .write(&batch)
            .map_err(|e| format!("raft log write of split child {right_id} failed: {e}"))?;
        self.add_peer(right_id, index)
            .map_err(|e| format!("cannot start split child {right_id}: {e}"))?;
        if lead && let Some(child) = self.peers.get_mut(&right_id) {
            let _ = child.raw.campaign();
        }
        tracing::info!(parent, right_id, index, "split child group started");
        Ok(())
    }

    fn send(&self, region_id: u64, msgs: Vec<eraftpb::Message>) {
        if msgs.is_empty() {
            return;
        }
        let ver = self
            .engine
            .shard_info(region_id)
            .map(|i| i.ver)
            .unwrap_or(0);
        let out = msgs
            .into_iter()
            .map(|m| wire::raft::RaftMessage {
                region_id,
                from_store: self.store_id,
                region_ver: ver,
                to_store: m.to,
                message: Some(convert::message_to_wire(m)),
                ..Default::default()
            })
            .collect();
        self.transport.send(out);
    }

    fn publish(&self) {
        let mut status = self.router.status.write();
        status.clear();
        for (id, p) in &self.peers {
            status.insert(
                *id,
                RegionStatus {
                    leader: p.leader(),
                    term: p.term(),
                    is_leader: p.is_leader(),
                    serving: p.is_leader() && p.applied_own_term,
                    applied: p.raw.raft.raft_log.applied,
                },
            );
        }
    }
}
