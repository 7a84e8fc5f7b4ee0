//! `Peer`: this server's replica of one region: its raft-rs node and the proposals it waits
//! to answer.

use std::collections::VecDeque;

use raft::{RawNode, StateRole};

use crate::apply::Applied;
use crate::error::RaftStoreError;
use crate::peer_storage::PeerStorage;
use crate::router::Callback;

/// A proposal waiting for its entry to apply.
struct Pending {
    index: u64,
    term: u64,
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
}

impl Peer {
    pub(crate) fn new(region_id: u64, raw: RawNode<PeerStorage>) -> Peer {
        Peer {
            region_id,
            raw,
            pending: VecDeque::new(),
            applied_own_term: false,
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

    /// Proposes `data`; `cb` is answered when its entry applies (or is known dropped).
    pub(crate) fn propose(&mut self, store_id: u64, data: Vec<u8>, cb: Callback) {
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
        // In (index, term) order: after a conflicting overwrite shortened this replica's log
        // and it led again, a new proposal can take an index below older pending ones.
        let term = self.term();
        let at = self
            .pending
            .partition_point(|p| (p.index, p.term) <= (index, term));
        self.pending.insert(at, Pending { index, term, cb });
    }

    /// Answers the proposal of the entry `(index, term)` that just applied with `result`, and
    /// every other proposal at this index or below (their entries were overwritten by another
    /// leader's) as stale.
    pub(crate) fn on_applied(
        &mut self,
        index: u64,
        term: u64,
        result: Result<Applied, RaftStoreError>,
    ) {
        if self.is_leader() && term == self.term() {
            self.applied_own_term = true;
        }
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
                (p.cb)(r);
                continue;
            }
            (p.cb)(Err(RaftStoreError::StaleCommand {
                region_id: self.region_id,
                index: p.index,
                term: p.term,
                found_term: term,
            }));
        }
    }

    /// The replica stepped down: its proposals may still commit under the new leader, so
    /// they stay until their index applies. Only the flag that lets it serve is reset.
    pub(crate) fn on_role_changed(&mut self) {
        self.applied_own_term = false;
    }

    /// Fails every waiting proposal (the store is stopping).
    pub(crate) fn fail_pending(&mut self, err: &RaftStoreError) {
        for p in self.pending.drain(..) {
            (p.cb)(Err(err.clone()));
        }
    }
}
