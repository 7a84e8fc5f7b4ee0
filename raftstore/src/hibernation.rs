//! Hibernation: idle regions stop ticking, so a server's Raft cost follows its active regions,
//! not all of them (issue 16: 1,000 idle regions under 5% of a core).
//!
//! An awake leader sends a heartbeat to every follower every `heartbeat-ticks`, and every
//! replica ticks every `tick-interval`: with many regions that is most of an idle server's
//! work. TiKV's answer ("hibernate regions") is the model; the facts here are ours:
//!
//! * **A leader falls asleep** once its region was idle for [`HIBERNATE_AFTER_ELECTIONS`]
//!   election timeouts in a row: nothing proposed, read or transferred, every voter's log at the
//!   leader's last index, everything committed and applied. It sends each follower a
//!   `Hibernate` (`wire::raft::ExtraKind`) with its term and last index and stops ticking the
//!   region. A voter that is down or behind keeps the region awake (its log must catch up).
//! * **A follower falls asleep** on a `Hibernate` from the leader it follows, in its term, with
//!   its own log and commit at the same index. Otherwise it keeps ticking: its election timeout
//!   then sends a pre-vote, whose arrival wakes the leader, whose heartbeats keep it a follower
//!   (a follower that missed the message costs one wake-up, not an election).
//! * **Anything wakes a region**: a Raft message for it (but an acknowledgement, [`wakes`]), a
//!   proposal, a read, a leader transfer.
//!   A leader that wakes resets its election clock and pings its followers at once, so its
//!   quorum check (`check_quorum`) finds them active rather than stale.
//! * **A dead leader is noticed through its store.** Every store sends each other store a
//!   `StoreHeartbeat` every `heartbeat-ticks` ([`Liveness`]): one message per server pair, not
//!   per region. A sleeping follower whose leader's store was silent for an election timeout
//!   wakes with its election clock at the timeout, so it campaigns within one more
//!   (randomized) timeout: failover takes about as long as for an awake region.
//! * **File GC reports do not wake.** A sleeping region's file GC indexes travel alone in a
//!   `FileGc` extra message when they move (`file_gc`); like `Hibernate`, it steps no Raft
//!   message.
//!
//! Why sleeping followers never elect a leader behind a live one's back: not ticking, their
//! election clock stays within the lease (`check_quorum`), so they refuse pre-votes; a restarted
//! replica's pre-vote wakes the leader instead, whose heartbeat makes it a follower.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use raft::{RawNode, StateRole};

use crate::peer_storage::PeerStorage;

/// Election timeouts of idleness before a leader puts its region to sleep.
pub(crate) const HIBERNATE_AFTER_ELECTIONS: usize = 2;

/// When each other store was last heard from (any message, or its heartbeat), shared by the
/// router (inbound side) and the store loop.
#[derive(Clone)]
pub(crate) struct Liveness {
    heard: Arc<Mutex<HashMap<u64, Instant>>>,
    /// A store never heard from counts as heard at this instant (the loop's start): a server
    /// that starts gives its peers an election timeout to say they are alive.
    started: Instant,
}

impl Liveness {
    pub(crate) fn new() -> Liveness {
        Liveness {
            heard: Arc::new(Mutex::new(HashMap::new())),
            started: Instant::now(),
        }
    }

    /// Store `store_id` sent something now.
    pub(crate) fn heard_from(&self, store_id: u64) {
        self.heard.lock().insert(store_id, Instant::now());
    }

    /// Whether store `store_id` was silent for at least `timeout` before `now`.
    pub(crate) fn silent(&self, store_id: u64, timeout: Duration, now: Instant) -> bool {
        let last = self
            .heard
            .lock()
            .get(&store_id)
            .copied()
            .unwrap_or(self.started);
        now.saturating_duration_since(last) >= timeout
    }
}

/// Whether the leader `raw` may put its region to sleep now: every voter's log at its last
/// index, everything committed and applied, no transfer under way (`busy`: proposals or reads
/// waiting, which the caller knows).
pub(crate) fn leader_idle(raw: &RawNode<PeerStorage>, busy: bool) -> bool {
    let raft = &raw.raft;
    if busy || raft.state != StateRole::Leader || raft.lead_transferee.is_some() {
        return false;
    }
    let log = &raft.raft_log;
    let last = log.last_index();
    if log.committed != last || log.applied != last || raft.has_pending_conf() {
        return false;
    }
    raft.prs().iter().all(|(_, pr)| pr.matched == last)
}

/// Whether stepping `msg` into a sleeping region must wake it. Acknowledgements do not: a
/// leader falls asleep while answers to its last heartbeat or append are still on their way,
/// and waking for them would keep it awake for ever. Anything else is news (an append, a
/// heartbeat of a leader that woke, a vote, a rejection) and wakes it.
pub(crate) fn wakes(msg: &raft::eraftpb::Message) -> bool {
    use raft::eraftpb::MessageType;
    match msg.get_msg_type() {
        MessageType::MsgHeartbeatResponse => false,
        MessageType::MsgAppendResponse => msg.reject,
        _ => true,
    }
}

/// Whether a follower may sleep on a `Hibernate` from `from` at `(term, index)`: it follows
/// `from` in that term, and its log and commit are at `index`.
pub(crate) fn follower_may_sleep(
    raw: &RawNode<PeerStorage>,
    from: u64,
    term: u64,
    index: u64,
) -> bool {
    let raft = &raw.raft;
    raft.state == StateRole::Follower
        && raft.leader_id == from
        && raft.term == term
        && raft.raft_log.last_index() == index
        && raft.raft_log.committed == index
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_never_heard_from_is_silent_only_an_election_timeout_after_the_start() {
        let l = Liveness::new();
        let t = Duration::from_millis(1000);
        assert!(!l.silent(2, t, l.started + Duration::from_millis(999)));
        assert!(l.silent(2, t, l.started + t));
        l.heard_from(2);
        let now = Instant::now();
        assert!(!l.silent(2, t, now + Duration::from_millis(999)));
        assert!(l.silent(2, t, now + Duration::from_millis(1001)));
        assert!(l.silent(3, t, now + t), "another store stays as it was");
    }
}
