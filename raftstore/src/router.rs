//! `Router`: how the rest of the server talks to the store loop: proposals, inbound Raft
//! messages, leader transfers, and the published state of every region.
//!
//! The store loop owns every `Peer`; nothing else touches raft-rs. Callers send a message to
//! its mailbox and (for proposals) get a callback when the entry applied. A caller that will
//! block for the answer anyway ([`Router::write`], [`Router::propose_batch`]) runs the loop's
//! round itself when none is running, rather than waking the store thread and being woken
//! back (module docs of `store`). What the loop knows about each region (leader, term, applied
//! index, whether it serves) is published after every round in a map the router reads without
//! a round trip.

use std::collections::HashMap;
use std::sync::mpsc;
use std::sync::{Arc, Weak};
use std::time::Duration;

use kvengine::WriteBatch;
use parking_lot::{Mutex, RwLock};
use wire::raft_cmd::{Cmd, SplitCmd};

use crate::apply::Applied;
use crate::error::RaftStoreError;
use crate::hibernation::Liveness;
use crate::replica_read::ReplicaRead;
use crate::store::{Store, try_run_round};

/// Answers a proposal, on the thread running the store round (the store thread or a writer's):
/// keep it short (send on a channel).
pub type Callback = Box<dyn FnOnce(Result<Applied, RaftStoreError>) + Send>;

/// Answers a read-index request with the index to read at (applied here already), on the
/// thread running the store round: keep it short.
pub type ReadCallback = Box<dyn FnOnce(Result<u64, RaftStoreError>) + Send>;

pub(crate) enum StoreMsg {
    Raft(Box<wire::raft::RaftMessage>),
    ReadIndex {
        region_id: u64,
        /// A replica read (a follower may serve it, checked at the leader); `None` = a
        /// leader's read.
        replica: Option<ReplicaRead>,
        cb: ReadCallback,
    },
    Propose {
        region_id: u64,
        /// The epoch the proposer routed with; `None` = the region's current one.
        region_ver: Option<u64>,
        cmd: Cmd,
        cb: Callback,
    },
    TransferLeader {
        region_id: u64,
        to: u64,
    },
    Campaign {
        region_id: u64,
    },
    CreateRegion {
        region: crate::store::InitialRegion,
        cb: Callback,
    },
    ChangePeer {
        region_id: u64,
        change: ChangePeer,
        cb: Callback,
    },
    DestroyReplica {
        region_id: u64,
    },
}

/// A membership change of one region (one replica at a time: raft-rs's simple changes, each
/// safe on its own). Moving a replica is add a learner, let it catch up, promote it, remove
/// the old one (`pd::scheduler` plans the steps).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangePeer {
    /// A replica on `store` joins as a learner: it gets the log (a snapshot first) and takes
    /// no part in quorums.
    AddLearner { store: u64 },
    /// The learner on `store` becomes a voter.
    Promote { store: u64 },
    /// The replica on `store` leaves (not the leader's own: transfer leadership first).
    Remove { store: u64 },
}

impl ChangePeer {
    pub fn store(&self) -> u64 {
        match *self {
            ChangePeer::AddLearner { store }
            | ChangePeer::Promote { store }
            | ChangePeer::Remove { store } => store,
        }
    }
}

/// A region's replicas as this server's replica of it applied them, and (on its leader) which
/// of them are not caught up.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Membership {
    pub voters: Vec<u64>,
    pub learners: Vec<u64>,
    /// Replicas the leader has not seen caught up (waiting for a snapshot, probing, or far
    /// behind its log); empty on a follower, which does not know.
    pub pending: Vec<u64>,
}

impl StoreMsg {
    fn propose(p: Proposal) -> StoreMsg {
        StoreMsg::Propose {
            region_id: p.region_id,
            region_ver: p.region_ver,
            cmd: p.cmd,
            cb: p.cb,
        }
    }
}

/// A proposal for [`Router::propose_batch`]: what [`Router::propose`] takes.
pub struct Proposal {
    pub region_id: u64,
    /// The epoch the proposer routed with; `None` = the region's current one.
    pub region_ver: Option<u64>,
    pub cmd: Cmd,
    /// Answered when the entry applied here, or with the reason it will not be.
    pub cb: Callback,
}

/// One region as this server's replica sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RegionStatus {
    /// The leader's store id, when known.
    pub leader: Option<u64>,
    pub term: u64,
    pub is_leader: bool,
    /// A leader that has applied an entry of its own term: what it reads includes every write
    /// acknowledged by earlier leaders.
    pub serving: bool,
    /// The applied index (the region's `write_sequence`).
    pub applied: u64,
    /// Asleep: idle, not ticking (`hibernation`).
    pub hibernating: bool,
    /// The log index of the last membership change applied here (0: the initial members): the
    /// same on every replica that applied it, and only ever raised, so it serves as the
    /// region's `conf_ver` (TiKV bumps a counter; an index orders the same way).
    pub conf_index: u64,
}

/// A cheap handle to the store loop (clone it freely).
#[derive(Clone)]
pub struct Router {
    pub(crate) store_id: u64,
    pub(crate) tx: crossbeam_channel::Sender<StoreMsg>,
    /// The loop's state, to run a round on the caller's thread (weak: the store holds the
    /// engine, which holds a router).
    pub(crate) store: Weak<Mutex<Store>>,
    pub(crate) status: Arc<RwLock<HashMap<u64, RegionStatus>>>,
    /// Why the loop stopped, once it has.
    pub(crate) stopped: Arc<Mutex<Option<String>>>,
    /// When each other store was last heard from (`hibernation`).
    pub(crate) liveness: Liveness,
    /// Every region's membership, published on ticks and after each membership change.
    pub(crate) membership: Arc<RwLock<HashMap<u64, Membership>>>,
}

impl Router {
    pub fn store_id(&self) -> u64 {
        self.store_id
    }

    /// Hands a Raft message from another server to the loop's mailbox (the transport's
    /// inbound side); never blocks. [`Router::deliver_batch`] saves the store thread's wake-up.
    pub fn deliver(&self, msg: wire::raft::RaftMessage) {
        if let Some(msg) = self.inbound(msg) {
            // A stopped loop drops messages, as a dead server would.
            let _ = self.tx.send(msg);
        }
    }

    /// Hands Raft messages from another server to the loop, in order, and when no round of
    /// the store loop is running, runs one on the calling thread with them (as
    /// [`Router::propose_batch`] does with proposals): a follower appends and acknowledges, a
    /// leader commits, applies and answers its proposers, without waking the store thread.
    /// On a replicated write that thread hand-off happened twice (follower and leader), ~25 µs
    /// each on an idle VM (BENCHMARKS.md, "Replication"). Otherwise they go to the mailbox,
    /// as with [`Router::deliver`], behind anything posted earlier.
    ///
    /// May block for a round (its log write and fdatasync, applies): call it from a thread
    /// that may block and that no store round waits for. The transports never make a round
    /// wait for the receiving side (`Transport::send` only queues), so a round running here
    /// cannot deadlock on another store's.
    pub fn deliver_batch(&self, msgs: Vec<wire::raft::RaftMessage>) {
        let msgs: Vec<StoreMsg> = msgs.into_iter().filter_map(|m| self.inbound(m)).collect();
        if msgs.is_empty() {
            return;
        }
        if let Err(msgs) = try_run_round(&self.store, msgs) {
            for msg in msgs {
                let _ = self.tx.send(msg);
            }
        }
    }

    /// What an inbound message becomes for the loop: `None` for a store heartbeat, which
    /// only says the sender is alive (`hibernation`).
    fn inbound(&self, msg: wire::raft::RaftMessage) -> Option<StoreMsg> {
        self.liveness.heard_from(msg.from_store);
        if msg
            .extra
            .as_ref()
            .is_some_and(|e| e.kind() == wire::raft::ExtraKind::StoreHeartbeat)
        {
            return None;
        }
        Some(StoreMsg::Raft(Box::new(msg)))
    }

    /// Proposes `cmd` to `region_id`; `cb` is answered when its entry applied here, or with
    /// the reason it will not be.
    pub fn propose(&self, region_id: u64, region_ver: Option<u64>, cmd: Cmd, cb: Callback) {
        let msg = StoreMsg::Propose {
            region_id,
            region_ver,
            cmd,
            cb,
        };
        if let Err(crossbeam_channel::SendError(msg)) = self.tx.send(msg) {
            self.fail_stopped(msg);
        }
    }

    /// Proposes every one of `proposals`, in order, one entry each. When no round of the store
    /// loop is running, the calling thread runs one with all of them (one log write): a
    /// one-voter group then applies and answers every proposal before this returns, without
    /// waking the store thread. Otherwise they go to the mailbox, as with [`Router::propose`],
    /// and the next round takes them with everything else posted meanwhile (group commit).
    /// Each callback is answered on its own: a proposal that fails (not leader, epoch changed,
    /// too large) fails alone.
    ///
    /// May block for a round (the log write and its fdatasync, the apply of every committed
    /// entry): call it from a thread that may block, as for [`Router::write`].
    pub fn propose_batch(&self, proposals: Vec<Proposal>) {
        let msgs: Vec<StoreMsg> = proposals.into_iter().map(StoreMsg::propose).collect();
        if msgs.is_empty() {
            return;
        }
        if let Err(msgs) = try_run_round(&self.store, msgs) {
            for msg in msgs {
                if let Err(crossbeam_channel::SendError(msg)) = self.tx.send(msg) {
                    self.fail_stopped(msg);
                }
            }
        }
    }

    /// Proposes and waits for the entry to apply on this server, at most `timeout`.
    pub fn propose_and_wait(
        &self,
        region_id: u64,
        region_ver: Option<u64>,
        cmd: Cmd,
        timeout: Duration,
    ) -> Result<Applied, RaftStoreError> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.propose(
            region_id,
            region_ver,
            cmd,
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        );
        self.wait_answer(&rx, region_id, timeout)
    }

    /// Writes `batch` to `region_id` through its log: returns once a quorum holds it and this
    /// (leader) replica applied it. Runs the store round on this thread when none is running
    /// ([`Router::propose_batch`]).
    pub fn write(
        &self,
        region_id: u64,
        region_ver: Option<u64>,
        batch: &WriteBatch,
        timeout: Duration,
    ) -> Result<Applied, RaftStoreError> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.propose_batch(vec![Proposal {
            region_id,
            region_ver,
            cmd: Cmd::Write(batch.encode()),
            cb: Box::new(move |r| {
                let _ = tx.send(r);
            }),
        }]);
        self.wait_answer(&rx, region_id, timeout)
    }

    /// A linearizable read point for `region_id` on this replica (Raft's read index, the
    /// `Safe` option: no clock assumption). The leader confirms it still leads with one
    /// heartbeat round to a quorum (shared by every read that arrived in the same store
    /// round); any other replica answers `NotLeader`. Returns once this replica has applied up to the
    /// returned index, so a snapshot taken now holds every write acknowledged before the
    /// call. A leader that was partitioned away (or paused) cannot confirm and answers
    /// `NotLeader`: it never serves a stale read.
    pub fn read_index(&self, region_id: u64, timeout: Duration) -> Result<u64, RaftStoreError> {
        self.read_index_for(region_id, None, timeout)
    }

    /// [`Router::read_index`] for a replica read: a follower may answer it too, once the leader
    /// confirmed the read point and checked its memory locks for `read` (raising its `max_ts`
    /// to the read's start_ts; module `replica_read`), and this replica applied up to it. A
    /// lock found there is [`RaftStoreError::ReadLocked`]; a leader that did not check is
    /// [`RaftStoreError::ReadNotChecked`]. On the leader it is [`Router::read_index`] (the
    /// caller checks the leader's memory locks after it, as for any read).
    pub fn replica_read_index(
        &self,
        region_id: u64,
        read: ReplicaRead,
        timeout: Duration,
    ) -> Result<u64, RaftStoreError> {
        self.read_index_for(region_id, Some(read), timeout)
    }

    fn read_index_for(
        &self,
        region_id: u64,
        replica: Option<ReplicaRead>,
        timeout: Duration,
    ) -> Result<u64, RaftStoreError> {
        let _timer = crate::metrics::READ_INDEX_DURATION.start_timer();
        self.ask(region_id, timeout, |cb| StoreMsg::ReadIndex {
            region_id,
            replica,
            cb,
        })
    }

    /// Posts the message `msg` builds around its answer callback and waits for the answer,
    /// at most `timeout` (a stopped loop answers `Stopped` at once).
    fn ask<T: Send + 'static>(
        &self,
        region_id: u64,
        timeout: Duration,
        msg: impl FnOnce(Box<dyn FnOnce(Result<T, RaftStoreError>) + Send>) -> StoreMsg,
    ) -> Result<T, RaftStoreError> {
        let (tx, rx) = mpsc::sync_channel(1);
        let cb = Box::new(move |r| {
            let _ = tx.send(r);
        });
        if let Err(crossbeam_channel::SendError(msg)) = self.tx.send(msg(cb)) {
            self.fail_stopped(msg);
        }
        self.wait_answer(&rx, region_id, timeout)
    }

    /// Splits `region_id` (at epoch `region_ver`) at `key`: the left part keeps the id, the
    /// right one becomes `right_id`. The split is rejected (the outcome says why) while the
    /// region holds unflushed writes: flush it first.
    pub fn split(
        &self,
        region_id: u64,
        region_ver: u64,
        key: &[u8],
        right_id: u64,
        timeout: Duration,
    ) -> Result<Applied, RaftStoreError> {
        let cmd = Cmd::Split(SplitCmd {
            key: key.to_vec(),
            right_id,
        });
        self.propose_and_wait(region_id, Some(region_ver), cmd, timeout)
    }

    /// Asks the leader of `region_id` (if this server) to hand leadership to store `to`.
    pub fn transfer_leader(&self, region_id: u64, to: u64) {
        let _ = self.tx.send(StoreMsg::TransferLeader { region_id, to });
    }

    /// Creates a new, empty region on this server (its replicas on the other voters are
    /// created by their own servers the same way). Blocking.
    pub fn create_region(
        &self,
        region: crate::store::InitialRegion,
        timeout: Duration,
    ) -> Result<(), RaftStoreError> {
        let region_id = region.id;
        self.ask(region_id, timeout, |cb| StoreMsg::CreateRegion {
            region,
            cb,
        })
        .map(|_| ())
    }

    /// Proposes a membership change of `region_id` (led here) and waits until it applied
    /// here, at most `timeout`. Refused (`InvalidCommand`) when the change does not fit the
    /// current membership (adding a replica that exists, promoting a voter, removing the
    /// leader's own replica or the last voter) or while another change is not applied yet.
    pub fn change_peer(
        &self,
        region_id: u64,
        change: ChangePeer,
        timeout: Duration,
    ) -> Result<Applied, RaftStoreError> {
        self.ask(region_id, timeout, |cb| StoreMsg::ChangePeer {
            region_id,
            change,
            cb,
        })
    }

    /// Every region's membership as the replicas here applied them.
    pub fn memberships(&self) -> Vec<Membership> {
        self.membership.read().values().cloned().collect()
    }

    /// Removes this server's replica of `region_id` unless it leads the region: the placement
    /// driver found the region's members no longer include this server (a removal this
    /// replica never learned of, `pd::stale_replicas`).
    pub fn destroy_replica(&self, region_id: u64) {
        let _ = self.tx.send(StoreMsg::DestroyReplica { region_id });
    }

    /// The membership of `region_id` as this replica applied it.
    pub fn membership(&self, region_id: u64) -> Option<Membership> {
        self.membership.read().get(&region_id).cloned()
    }

    /// Starts an election for `region_id` on this server now.
    pub fn campaign(&self, region_id: u64) {
        let _ = self.tx.send(StoreMsg::Campaign { region_id });
    }

    pub fn status(&self, region_id: u64) -> Option<RegionStatus> {
        self.status.read().get(&region_id).copied()
    }

    /// Every region this server has a replica of, in id order.
    pub fn regions(&self) -> Vec<(u64, RegionStatus)> {
        let mut v: Vec<_> = self.status.read().iter().map(|(k, s)| (*k, *s)).collect();
        v.sort_unstable_by_key(|(k, _)| *k);
        v
    }

    /// Why the loop stopped, if it has.
    pub fn stopped(&self) -> Option<String> {
        self.stopped.lock().clone()
    }

    /// The store loop's answer on `rx`, or `Timeout` after `timeout`, or `Stopped` when the
    /// loop dropped the callback.
    fn wait_answer<T>(
        &self,
        rx: &mpsc::Receiver<Result<T, RaftStoreError>>,
        region_id: u64,
        timeout: Duration,
    ) -> Result<T, RaftStoreError> {
        match rx.recv_timeout(timeout) {
            Ok(r) => r,
            Err(mpsc::RecvTimeoutError::Timeout) => Err(RaftStoreError::Timeout {
                region_id,
                timeout_ms: timeout.as_millis() as u64,
            }),
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(self.stopped_error()),
        }
    }

    /// Answers `msg` (if it waits for an answer) with `Stopped`.
    pub(crate) fn fail_stopped(&self, msg: StoreMsg) {
        match msg {
            StoreMsg::Propose { cb, .. }
            | StoreMsg::CreateRegion { cb, .. }
            | StoreMsg::ChangePeer { cb, .. } => cb(Err(self.stopped_error())),
            StoreMsg::ReadIndex { cb, .. } => cb(Err(self.stopped_error())),
            StoreMsg::Raft(_)
            | StoreMsg::TransferLeader { .. }
            | StoreMsg::Campaign { .. }
            | StoreMsg::DestroyReplica { .. } => {}
        }
    }

    fn stopped_error(&self) -> RaftStoreError {
        RaftStoreError::Stopped {
            store_id: self.store_id,
            reason: self.stopped().unwrap_or_else(|| "stopped".into()),
        }
    }
}
