//! Membership changes: which change fits a region's current members, what a conf-change entry
//! says, and which replicas a leader does not count as caught up.
//!
//! Changes are raft-rs's simple ones (`ConfChange`, one replica at a time), each safe on its
//! own: moving a replica is four of them in turn (add a learner, which catches up by snapshot;
//! promote it; transfer leadership if the old replica leads; remove the old one), planned by
//! the placement driver (`pd::scheduler`). raft-rs refuses a second change while one is not
//! applied, and so do we, with a clear error, before proposing.
//!
//! A replica on a store that never had the region is made by the first message its leader
//! sends it (`Store::maybe_create_peer`), with no log and no shard: the leader's log starts
//! after `RAFT_INIT_INDEX`, so it gets a snapshot (the region's file list: `peer_storage`),
//! which creates the shard with the snapshot's range. A replica whose removal applied leaves
//! at the end of the round: its shard leaves the engine (its files stay in the object store
//! for the other replicas), then its log. A removed follower may never learn that its removal
//! committed (its leader stops sending to it), so the leader tells it (`Tombstone`).

use prost::Message as _;
use raft::eraftpb::{self, ConfChangeType};
use raft::{ProgressState, RawNode};

use crate::error::RaftStoreError;
use crate::peer_storage::PeerStorage;
use crate::router::{ChangePeer, Membership};

/// A replica further behind its leader's commit index than this is pending (not caught up).
const PENDING_LAG: u64 = 64;

/// The membership `raw` applied, with the replicas it does not count as caught up when it
/// leads.
pub(crate) fn membership(raw: &RawNode<PeerStorage>) -> Membership {
    let conf = raw.raft.prs().conf();
    let mut voters: Vec<u64> = conf.voters().ids().iter().collect();
    let mut learners: Vec<u64> = conf.learners().iter().copied().collect();
    voters.sort_unstable();
    learners.sort_unstable();
    let mut pending = Vec::new();
    if raw.raft.state == raft::StateRole::Leader {
        let committed = raw.raft.raft_log.committed;
        for (id, pr) in raw.raft.prs().iter() {
            if *id == raw.raft.id {
                continue;
            }
            if pr.state != ProgressState::Replicate || pr.matched + PENDING_LAG < committed {
                pending.push(*id);
            }
        }
        pending.sort_unstable();
    }
    Membership {
        voters,
        learners,
        pending,
    }
}

/// The conf change carrying out `change` on `region_id` led by `leader` (this store), or why it
/// does not fit the members `now`: adding a replica that exists, promoting one that is not a
/// learner, removing one that is not there, the leader itself or the last voter.
pub(crate) fn conf_change_for(
    region_id: u64,
    leader: u64,
    now: &Membership,
    change: ChangePeer,
) -> Result<eraftpb::ConfChange, RaftStoreError> {
    let refuse = |detail: String| RaftStoreError::InvalidCommand { region_id, detail };
    let store = change.store();
    let is_voter = now.voters.contains(&store);
    let is_learner = now.learners.contains(&store);
    let change_type = match change {
        ChangePeer::AddLearner { .. } if is_voter || is_learner => {
            return Err(refuse(format!(
                "store {store} already holds a replica (voters={:?} learners={:?})",
                now.voters, now.learners
            )));
        }
        ChangePeer::AddLearner { .. } => ConfChangeType::AddLearnerNode,
        ChangePeer::Promote { .. } if !is_learner => {
            return Err(refuse(format!(
                "expected a learner on store {store} to promote, found learners={:?}",
                now.learners
            )));
        }
        ChangePeer::Promote { .. } => ConfChangeType::AddNode,
        ChangePeer::Remove { .. } if !is_voter && !is_learner => {
            return Err(refuse(format!(
                "store {store} holds no replica to remove (voters={:?} learners={:?})",
                now.voters, now.learners
            )));
        }
        ChangePeer::Remove { .. } if store == leader => {
            return Err(refuse(format!(
                "the leader (store {store}) cannot remove its own replica: transfer leadership first"
            )));
        }
        ChangePeer::Remove { .. } if is_voter && now.voters.len() <= 1 => {
            return Err(refuse(format!("store {store} holds the last voter")));
        }
        ChangePeer::Remove { .. } => ConfChangeType::RemoveNode,
    };
    Ok(eraftpb::ConfChange {
        change_type,
        node_id: store,
        ..eraftpb::ConfChange::default()
    })
}

/// The change a committed `EntryConfChange` entry carries (decoded with prost, never with the
/// protobuf 2 parser: the entry came over the network). `None` for an empty entry (nothing to
/// apply).
pub(crate) fn decode_conf_change(
    entry: &eraftpb::Entry,
) -> Result<Option<eraftpb::ConfChange>, String> {
    if entry.data.is_empty() {
        return Ok(None);
    }
    if entry.get_entry_type() != eraftpb::EntryType::EntryConfChange {
        return Err(format!(
            "expected a simple conf change at index {}, found {:?} (joint changes are never proposed here)",
            entry.index,
            entry.get_entry_type()
        ));
    }
    let wire = wire::raft::ConfChange::decode(&entry.data[..])
        .map_err(|e| format!("undecodable conf change at index {}: {e}", entry.index))?;
    crate::convert::conf_change_from_wire(wire)
        .map(Some)
        .map_err(|e| format!("invalid conf change at index {}: {e}", entry.index))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(voters: &[u64], learners: &[u64]) -> Membership {
        Membership {
            voters: voters.to_vec(),
            learners: learners.to_vec(),
            pending: Vec::new(),
        }
    }

    #[test]
    fn each_change_fits_only_the_membership_it_was_planned_for() {
        let m = members(&[1, 2, 3], &[4]);
        let ok = |c| conf_change_for(9, 1, &m, c).map(|cc| (cc.change_type, cc.node_id));
        assert_eq!(
            ok(ChangePeer::AddLearner { store: 5 }),
            Ok((ConfChangeType::AddLearnerNode, 5))
        );
        assert_eq!(
            ok(ChangePeer::Promote { store: 4 }),
            Ok((ConfChangeType::AddNode, 4))
        );
        assert_eq!(
            ok(ChangePeer::Remove { store: 3 }),
            Ok((ConfChangeType::RemoveNode, 3))
        );
        assert_eq!(
            ok(ChangePeer::Remove { store: 4 }),
            Ok((ConfChangeType::RemoveNode, 4))
        );
        for refused in [
            ChangePeer::AddLearner { store: 2 },
            ChangePeer::AddLearner { store: 4 },
            ChangePeer::Promote { store: 3 },
            ChangePeer::Promote { store: 7 },
            ChangePeer::Remove { store: 7 },
            ChangePeer::Remove { store: 1 },
        ] {
            let e = ok(refused).expect_err("does not fit");
            assert!(
                matches!(e, RaftStoreError::InvalidCommand { region_id: 9, .. }),
                "{refused:?}: {e}"
            );
        }
        let last = conf_change_for(9, 1, &members(&[1], &[2]), ChangePeer::Remove { store: 1 });
        assert!(last.is_err());
    }

    #[test]
    fn a_conf_change_entry_decodes_with_prost_and_an_empty_one_is_nothing() {
        let cc = eraftpb::ConfChange {
            change_type: ConfChangeType::AddLearnerNode,
            node_id: 4,
            ..eraftpb::ConfChange::default()
        };
        let entry = eraftpb::Entry {
            entry_type: eraftpb::EntryType::EntryConfChange,
            index: 7,
            data: crate::convert::conf_change_to_wire(cc.clone())
                .encode_to_vec()
                .into(),
            ..eraftpb::Entry::default()
        };
        let back = decode_conf_change(&entry)
            .expect("decodes")
            .expect("a change");
        assert_eq!((back.change_type, back.node_id), (cc.change_type, 4));
        let empty = eraftpb::Entry {
            entry_type: eraftpb::EntryType::EntryConfChange,
            ..eraftpb::Entry::default()
        };
        assert_eq!(decode_conf_change(&empty), Ok(None));
        let garbage = eraftpb::Entry {
            entry_type: eraftpb::EntryType::EntryConfChange,
            index: 8,
            data: vec![0xff, 0xff, 0xff].into(),
            ..eraftpb::Entry::default()
        };
        assert!(decode_conf_change(&garbage).is_err());
    }
}
