//! `Peer`: this server's replica of one region: its raft-rs node and the proposals it waits
//! to answer.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use raft::{RawNode, StateRole};

use crate::apply::Applied;
use crate::error::RaftStoreError;
use crate::file_gc::FileGcReports;
use crate::metrics::{ReplicaReadResult, count_replica_read};
use crate::peer_storage::PeerStorage;
use crate::replica_read::ReplicaRead;
use crate::router::{Callback, ReadCallback};
use wire::read_index::ReadIndexContext;

/// Reads that asked raft-rs for one read index together (one request context).
struct InflightRead {
    /// The context's id ([`ReadIndexContext::id`]).
    id: u64,
    sent: Instant,
    cbs: Vec<ReadCallback>,
}

/// A proposal's answer, delivered at the end of the store round that applied its entry.
pub(crate) type Answer = (Callback, Result<Applied, RaftStoreError>);

/// A proposal waiting for its entry to apply.
struct Pending {
    index: u64,
    term: u64,
    proposed: Instant,
    cb: Callback,
}

pub(crate) struct Peer {
    pub(crate) region_id: u64,
    pub(crate) raw: RawNode<PeerStorage>,
    /// Proposals in index order.
    pending: VecDeque<Pending>,
    /// A leader serves only once it has applied an entry of its own term: everything
    /// acknowledged by earlier leaders is then applied here.
    pub(crate) applied_own_term: bool,
    /// The last index applied here (answered reads wait for it to reach their read index).
    applied: u64,
    /// Reads that arrived this round: they share one read-index request (one heartbeat round
    /// for all of them), sent by [`Peer::send_reads`].
    unsent_reads: Vec<ReadCallback>,
    /// Replica reads that arrived at this follower this round: each sends its own request (its
    /// start_ts and ranges are checked at the leader, `replica_read`).
    unsent_replica_reads: Vec<(ReplicaRead, ReadCallback)>,
    /// Read-index requests raft-rs has not answered yet, oldest first.
    inflight_reads: VecDeque<InflightRead>,
    /// Reads whose index a quorum confirmed, waiting until this replica applied that far.
    confirmed_reads: VecDeque<(u64, Vec<ReadCallback>)>,
    next_read_ctx: u64,
    /// The index of the last split entry this replica applied, or found in its log at start
    /// (`store::last_split_in_log`; 0: none): the log is not truncated past it while a voter
    /// has not appended it, because a replica that missed a split cannot catch up by snapshot
    /// (the range changed).
    pub(crate) last_split_index: u64,
    /// Not ticking: the region is idle (`hibernation`).
    pub(crate) hibernating: bool,
    /// Consecutive ticks this leader found its region idle.
    pub(crate) idle_ticks: usize,
    /// The other replicas' file GC reports (`file_gc`).
    pub(crate) file_gc: FileGcReports,
    /// The log index of the last membership change the replica's membership includes
    /// (`ConfState::index`): replaying the log, changes at or below it are not applied again.
    pub(crate) conf_index: u64,
    /// Which `Peer` of its region this is, unique in the store's life (`Store::add_peer`): a
    /// split may replace a region's empty replica by a new peer in the middle of a ready
    /// round, and the round must not hand the old peer's ready to the new one.
    pub(crate) incarnation: u64,
}

impl Peer {
    pub(crate) fn new(region_id: u64, raw: RawNode<PeerStorage>) -> Peer {
        Peer {
            region_id,
            applied: raw.raft.raft_log.applied,
            raw,
            pending: VecDeque::new(),
            applied_own_term: false,
            unsent_reads: Vec::new(),
            unsent_replica_reads: Vec::new(),
            inflight_reads: VecDeque::new(),
            confirmed_reads: VecDeque::new(),
            next_read_ctx: 1,
            last_split_index: 0,
            hibernating: false,
            idle_ticks: 0,
            file_gc: FileGcReports::default(),
            conf_index: 0,
            incarnation: 0,
        }
    }

    /// Proposals or reads are waiting here: the region is not idle.
    pub(crate) fn busy(&self) -> bool {
        !(self.pending.is_empty()
            && self.unsent_reads.is_empty()
            && self.unsent_replica_reads.is_empty()
            && self.inflight_reads.is_empty()
            && self.confirmed_reads.is_empty())
    }

    /// Something happened to the region: it ticks again. A leader that slept restarts its
    /// election clock and pings its followers at once, so that its next quorum check
    /// (`check_quorum`, one election timeout on) finds them active.
    pub(crate) fn wake(&mut self) {
        self.idle_ticks = 0;
        if !self.hibernating {
            return;
        }
        self.hibernating = false;
        if self.is_leader() {
            self.raw.raft.election_elapsed = 0;
            self.raw.ping();
        }
    }

    /// The leader's store went silent while this follower slept: tick again with the election
    /// clock at the timeout, so it campaigns within one more randomized timeout (and grants
    /// the other follower's vote, being out of the leader's lease).
    pub(crate) fn wake_to_elect(&mut self) {
        self.hibernating = false;
        self.idle_ticks = 0;
        self.raw.raft.election_elapsed = self.raw.raft.election_timeout();
    }

    /// Queues a read: it is answered with an index such that every write acknowledged before
    /// the read arrived is at or below it, once this replica applied that far.
    ///
    /// A serving leader takes every read (a replica read too: the server checks its own
    /// memory locks after the read point). A follower takes only a replica read, whose
    /// start_ts and ranges go to the leader to be checked against its memory locks and
    /// `max_ts` (`replica_read`); a plain read would be checked against this server's, which
    /// knows neither. Anything else is `NotLeader`.
    pub(crate) fn read(&mut self, store_id: u64, replica: Option<ReplicaRead>, cb: ReadCallback) {
        self.wake();
        if self.is_leader() {
            if !self.applied_own_term {
                cb(Err(self.not_leader(store_id)));
                return;
            }
            if replica.is_some() {
                count_replica_read(ReplicaReadResult::Leader);
            }
            self.unsent_reads.push(cb);
            return;
        }
        match replica {
            // Without a known leader raft-rs would drop the request: say so now.
            Some(r) if self.leader().is_some() => self.unsent_replica_reads.push((r, cb)),
            _ => cb(Err(self.not_leader(store_id))),
        }
    }

    fn next_context(&mut self, store_id: u64) -> ReadIndexContext {
        let id = self.next_read_ctx;
        self.next_read_ctx += 1;
        ReadIndexContext {
            store_id,
            id,
            ..ReadIndexContext::default()
        }
    }

    /// Sends this round's reads: the leader's as one read-index request (it confirms it still
    /// leads with a heartbeat round to a quorum), a follower's replica reads one request each
    /// (raft-rs forwards them to the leader). Contexts carry the store id, so requests of
    /// different replicas never collide at the leader, which keys pending reads by context.
    pub(crate) fn send_reads(&mut self, store_id: u64) {
        if !self.unsent_replica_reads.is_empty() && self.is_leader() {
            // Became leader since they arrived: they are its own reads now (or fail, before
            // its first entry of the term applied).
            for (_, cb) in std::mem::take(&mut self.unsent_replica_reads) {
                self.read(store_id, None, cb);
            }
        }
        if !self.unsent_reads.is_empty() {
            let ctx = self.next_context(store_id);
            self.raw.read_index(ctx.encode_to_bytes());
            self.inflight_reads.push_back(InflightRead {
                id: ctx.id,
                sent: Instant::now(),
                cbs: std::mem::take(&mut self.unsent_reads),
            });
        }
        for (read, cb) in std::mem::take(&mut self.unsent_replica_reads) {
            let ctx = ReadIndexContext {
                start_ts: read.start_ts,
                ranges: read.ranges,
                ..self.next_context(store_id)
            };
            self.raw.read_index(ctx.encode_to_bytes());
            self.inflight_reads.push_back(InflightRead {
                id: ctx.id,
                sent: Instant::now(),
                cbs: vec![cb],
            });
        }
    }

    /// Read indexes raft-rs answered (from a ready): those reads now wait for apply. A replica
    /// read's answer says whether the leader checked it and found a lock (`replica_read`).
    pub(crate) fn on_read_states(&mut self, states: Vec<raft::ReadState>) {
        for rs in states {
            let Some(ctx) = ReadIndexContext::decode_from(&rs.request_ctx) else {
                continue;
            };
            let Some(at) = self.inflight_reads.iter().position(|r| r.id == ctx.id) else {
                continue;
            };
            let Some(r) = self.inflight_reads.remove(at) else {
                continue;
            };
            let refused = if !ctx.needs_check() {
                None
            } else if !ctx.checked {
                count_replica_read(ReplicaReadResult::Unchecked);
                Some(RaftStoreError::ReadNotChecked {
                    region_id: self.region_id,
                    leader: self.leader(),
                })
            } else if let Some(lock) = ctx.locked {
                count_replica_read(ReplicaReadResult::Locked);
                Some(RaftStoreError::ReadLocked {
                    region_id: self.region_id,
                    start_ts: ctx.start_ts,
                    lock: Box::new(lock),
                })
            } else {
                count_replica_read(ReplicaReadResult::Follower);
                None
            };
            match refused {
                Some(e) => {
                    for cb in r.cbs {
                        cb(Err(e.clone()));
                    }
                }
                None => self.confirmed_reads.push_back((rs.index, r.cbs)),
            }
        }
        self.answer_reads();
    }

    /// A Raft snapshot at `index` was installed: the engine is at `index`.
    pub(crate) fn on_snapshot_installed(&mut self, index: u64) {
        self.applied = self.applied.max(index);
        self.answer_reads();
    }

    /// Answers the confirmed reads this replica has applied far enough for.
    fn answer_reads(&mut self) {
        while let Some((index, _)) = self.confirmed_reads.front() {
            if *index > self.applied {
                // Indexes arrive in order of the requests; a later one is never lower.
                return;
            }
            if let Some((index, cbs)) = self.confirmed_reads.pop_front() {
                for cb in cbs {
                    cb(Ok(index));
                }
            }
        }
    }

    /// Fails the read-index requests older than `timeout` (raft-rs drops a request silently
    /// when leadership moves under it): the caller retries, elsewhere if need be.
    pub(crate) fn expire_reads(&mut self, store_id: u64, timeout: Duration) {
        while let Some(r) = self.inflight_reads.front() {
            if r.sent.elapsed() < timeout {
                return;
            }
            if let Some(r) = self.inflight_reads.pop_front() {
                for cb in r.cbs {
                    cb(Err(self.not_leader(store_id)));
                }
            }
        }
    }

    pub(crate) fn is_leader(&self) -> bool {
        self.raw.raft.state == StateRole::Leader
    }

    /// The leader this replica knows of (`None` while an election runs).
    pub(crate) fn leader(&self) -> Option<u64> {
        let id = self.raw.raft.leader_id;
        (id != raft::INVALID_ID).then_some(id)
    }

    pub(crate) fn term(&self) -> u64 {
        self.raw.raft.term
    }

    pub(crate) fn not_leader(&self, store_id: u64) -> RaftStoreError {
        RaftStoreError::NotLeader {
            region_id: self.region_id,
            store_id,
            leader: self.leader(),
        }
    }

    /// Proposes the membership change `cc` (checked by the caller, `membership`); `cb` is
    /// answered when its entry applies, as for any proposal.
    pub(crate) fn propose_conf_change(
        &mut self,
        store_id: u64,
        cc: raft::eraftpb::ConfChange,
        cb: Callback,
    ) {
        let before = self.raw.raft.raft_log.last_index();
        if self.raw.propose_conf_change(Vec::new(), cc).is_err()
            || self.raw.raft.raft_log.last_index() == before
        {
            cb(Err(self.not_leader(store_id)));
            return;
        }
        self.track(self.raw.raft.raft_log.last_index(), cb);
    }

    /// Proposes `data`; `cb` is answered when its entry applies (or is known dropped).
    pub(crate) fn propose(&mut self, store_id: u64, data: Vec<u8>, cb: Callback) {
        self.wake();
        if !self.is_leader() {
            cb(Err(self.not_leader(store_id)));
            return;
        }
        let before = self.raw.raft.raft_log.last_index();
        if self.raw.propose(Vec::new(), data).is_err() {
            // Dropped by raft-rs (a leader transfer is under way).
            cb(Err(self.not_leader(store_id)));
            return;
        }
        let index = self.raw.raft.raft_log.last_index();
        if index == before {
            cb(Err(self.not_leader(store_id)));
            return;
        }
        self.track(index, cb);
    }

    /// Waits for the entry just proposed at `index` in this term to apply, to answer `cb`.
    fn track(&mut self, index: u64, cb: Callback) {
        // In (index, term) order: after a conflicting overwrite shortened this replica's log
        // and it led again, a new proposal can take an index below older pending ones.
        let term = self.term();
        let at = self
            .pending
            .partition_point(|p| (p.index, p.term) <= (index, term));
        crate::metrics::PROPOSALS.inc();
        let proposed = Instant::now();
        self.pending.insert(
            at,
            Pending {
                index,
                term,
                proposed,
                cb,
            },
        );
    }

    /// Answers the proposal of the entry `(index, term)` that just applied with `result`, and
    /// every other proposal at this index or below (their entries were overwritten by another
    /// leader's) as stale. The answers go to `answers`, which the store delivers after it
    /// published the round's status: a writer that reads the status next sees its write.
    pub(crate) fn on_applied(
        &mut self,
        index: u64,
        term: u64,
        result: Result<Applied, RaftStoreError>,
        answers: &mut Vec<Answer>,
    ) {
        if self.is_leader() && term == self.term() {
            self.applied_own_term = true;
        }
        self.applied = self.applied.max(index);
        self.answer_reads();
        let mut result = Some(result);
        while let Some(p) = self.pending.front() {
            if p.index > index {
                return;
            }
            let Some(p) = self.pending.pop_front() else {
                return;
            };
            if p.index == index
                && p.term == term
                && let Some(r) = result.take()
            {
                crate::metrics::PROPOSE_DURATION.observe(p.proposed.elapsed().as_secs_f64());
                answers.push((p.cb, r));
                continue;
            }
            answers.push((
                p.cb,
                Err(RaftStoreError::StaleCommand {
                    region_id: self.region_id,
                    index: p.index,
                    term: p.term,
                    found_term: term,
                }),
            ));
        }
    }

    /// The replica's role changed: its proposals may still commit under the new leader, so
    /// they stay until their index applies. The flag that lets it serve is reset, and reads
    /// not yet confirmed fail (raft-rs drops a read-index request a leader change crosses);
    /// confirmed ones stay valid (their index was current when a quorum answered).
    pub(crate) fn on_role_changed(&mut self, store_id: u64) {
        self.applied_own_term = false;
        let unconfirmed: Vec<ReadCallback> = self
            .inflight_reads
            .drain(..)
            .flat_map(|r| r.cbs)
            .chain(self.unsent_reads.drain(..))
            .chain(self.unsent_replica_reads.drain(..).map(|(_, cb)| cb))
            .collect();
        for cb in unconfirmed {
            cb(Err(self.not_leader(store_id)));
        }
    }

    /// Fails every waiting proposal and read (the store is stopping).
    pub(crate) fn fail_pending(&mut self, err: &RaftStoreError) {
        for p in self.pending.drain(..) {
            (p.cb)(Err(err.clone()));
        }
        let reads = self
            .inflight_reads
            .drain(..)
            .flat_map(|r| r.cbs)
            .chain(self.unsent_reads.drain(..))
            .chain(self.unsent_replica_reads.drain(..).map(|(_, cb)| cb))
            .chain(self.confirmed_reads.drain(..).flat_map(|(_, cbs)| cbs));
        for cb in reads {
            cb(Err(err.clone()));
        }
    }
}
