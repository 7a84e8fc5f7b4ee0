//! The one mapping from "this replica cannot take the request" to the wire's
//! [`RegionError`]: used by the transaction API (inside `KeyError`), the coprocessor, the
//! delegate path and split. The client refreshes its region cache from it and retries
//! elsewhere, so each answer carries what the server knows: the leader's store id and address
//! for `NotLeader`, the current version for `EpochNotMatch`.

use raftstore::{RaftConfig, RaftStoreError};
use wire::coprocessor::{RegionError, RegionErrorKind};

/// The region error for a Raft-store failure, or `None` when the failure is not about routing
/// (an apply failure or an invalid command: retrying elsewhere would not help).
///
/// `Timeout` becomes `StaleCommand`: a write waits while its replica leads in the term it
/// proposed in, so a timeout means this replica stepped down and the outcome is unknown; every
/// command that can get it is idempotent (raft_design §5), so the client sends it again to the
/// new leader. A stopped store is a `NotLeader` without a hint: another replica may lead.
pub fn from_raft(e: &RaftStoreError, raft: &RaftConfig) -> Option<RegionError> {
    let message = e.to_string();
    let error = match e {
        // A replica read the leader did not check goes to the leader, like any read.
        RaftStoreError::NotLeader {
            region_id, leader, ..
        }
        | RaftStoreError::ReadNotChecked { region_id, leader } => {
            let leader_store_id = leader.unwrap_or(0);
            RegionError {
                message,
                kind: RegionErrorKind::NotLeader as i32,
                region_id: *region_id,
                leader_store_id,
                leader_addr: raft
                    .peer(leader_store_id)
                    .map(|p| p.addr.clone())
                    .unwrap_or_default(),
                ..RegionError::default()
            }
        }
        RaftStoreError::EpochNotMatch {
            region_id, found, ..
        } => RegionError {
            message,
            kind: RegionErrorKind::EpochNotMatch as i32,
            region_id: *region_id,
            current_ver: *found,
            ..RegionError::default()
        },
        RaftStoreError::StaleCommand { region_id, .. }
        | RaftStoreError::Timeout { region_id, .. } => RegionError {
            message,
            kind: RegionErrorKind::StaleCommand as i32,
            region_id: *region_id,
            ..RegionError::default()
        },
        RaftStoreError::RegionNotFound { region_id, .. } => RegionError {
            message,
            kind: RegionErrorKind::RegionNotFound as i32,
            region_id: *region_id,
            ..RegionError::default()
        },
        RaftStoreError::Stopped { .. } => RegionError {
            message,
            kind: RegionErrorKind::NotLeader as i32,
            ..RegionError::default()
        },
        // A lock is the reader's to resolve (the caller answers it as `locked`), not a
        // routing error.
        RaftStoreError::Apply { .. }
        | RaftStoreError::InvalidCommand { .. }
        | RaftStoreError::ReadLocked { .. } => return None,
    };
    Some(error)
}

/// The region error for an engine failure that is about the region rather than the data:
/// a region busy (frozen memtables, a split in progress) is `ServerBusy`, a region that is
/// gone (split or never here) is `RegionNotFound`.
pub fn from_engine(e: &kvengine::Error) -> Option<RegionError> {
    let (kind, region_id) = match e {
        kvengine::Error::ShardBusy { shard_id, .. } => (RegionErrorKind::ServerBusy, *shard_id),
        kvengine::Error::ShardNotFound { shard_id } => (RegionErrorKind::RegionNotFound, *shard_id),
        _ => return None,
    };
    Some(RegionError {
        message: e.to_string(),
        kind: kind as i32,
        region_id,
        ..RegionError::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use raftstore::config::PeerConfig;

    fn config() -> RaftConfig {
        RaftConfig {
            peers: (1..=3)
                .map(|id| PeerConfig {
                    id,
                    addr: format!("http://127.0.0.1:700{id}"),
                    zone: None,
                })
                .collect(),
            ..RaftConfig::default()
        }
    }

    fn kind(e: &RaftStoreError) -> Option<RegionErrorKind> {
        from_raft(e, &config()).map(|r| r.kind().expect("a known kind"))
    }

    #[test]
    fn not_leader_names_the_leader_and_its_address_when_known() {
        let e = RaftStoreError::NotLeader {
            region_id: 7,
            store_id: 1,
            leader: Some(2),
        };
        let r = from_raft(&e, &config()).expect("a region error");
        assert_eq!(r.kind(), Some(RegionErrorKind::NotLeader));
        assert_eq!((r.region_id, r.leader_store_id), (7, 2));
        assert_eq!(r.leader_addr, "http://127.0.0.1:7002");
        let unknown = RaftStoreError::NotLeader {
            region_id: 7,
            store_id: 1,
            leader: None,
        };
        let r = from_raft(&unknown, &config()).expect("a region error");
        assert_eq!((r.leader_store_id, r.leader_addr.as_str()), (0, ""));
    }

    #[test]
    fn epoch_not_match_carries_the_current_version() {
        let e = RaftStoreError::EpochNotMatch {
            region_id: 7,
            expected: 3,
            found: 4,
        };
        let r = from_raft(&e, &config()).expect("a region error");
        assert_eq!(r.kind(), Some(RegionErrorKind::EpochNotMatch));
        assert_eq!(r.current_ver, 4);
    }

    #[test]
    fn a_dropped_or_timed_out_command_is_stale_and_a_stopped_store_is_not_leader() {
        let stale = RaftStoreError::StaleCommand {
            region_id: 7,
            index: 10,
            term: 2,
            found_term: 3,
        };
        let timeout = RaftStoreError::Timeout {
            region_id: 7,
            timeout_ms: 10,
        };
        let stopped = RaftStoreError::Stopped {
            store_id: 1,
            reason: "closing".into(),
        };
        let gone = RaftStoreError::RegionNotFound {
            region_id: 7,
            store_id: 1,
        };
        assert_eq!(kind(&stale), Some(RegionErrorKind::StaleCommand));
        assert_eq!(kind(&timeout), Some(RegionErrorKind::StaleCommand));
        assert_eq!(kind(&stopped), Some(RegionErrorKind::NotLeader));
        assert_eq!(kind(&gone), Some(RegionErrorKind::RegionNotFound));
    }

    #[test]
    fn apply_and_invalid_command_failures_are_not_routing_errors() {
        let apply = RaftStoreError::Apply {
            region_id: 7,
            detail: "x".into(),
        };
        let invalid = RaftStoreError::InvalidCommand {
            region_id: 7,
            detail: "x".into(),
        };
        assert_eq!(kind(&apply), None);
        assert_eq!(kind(&invalid), None);
    }
}
