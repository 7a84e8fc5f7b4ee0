//! `tidb_replica_read`: which replica of a region serves a coprocessor request the entry node
//! sends to a server (TiDB's variable, with its values `leader`, `follower` and
//! `leader-and-follower`).
//!
//! A request sent to a follower is marked as a replica read (`wire` `Context::replica_read`):
//! the follower asks the leader for a read index, the leader checks its memory locks for the
//! request's start_ts and ranges (raising its `max_ts`), and the follower answers once it
//! applied up to that index. So a follower read sees every write acknowledged before it and
//! is a cache hit or miss exactly as on the leader (the data version is the applied index, the
//! same on every replica). What it saves is the leader's CPU and, across zones, its network:
//! the zone-local reads of the next issues are built on it.
//!
//! The choice skips replicas marked down (a refused connection, `RegionCache::is_down`) and
//! falls back to the leader when no other replica is left. Requests of a session take turns
//! over the candidates, so a scan of many regions spreads over the followers.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::region_cache::CachedRegion;

types::label_enum! {
    /// The value of `tidb_replica_read`.
    #[derive(Default)]
    pub enum ReplicaReadPolicy: "tidb_replica_read value" {
        /// The leader only (the default).
        #[default]
        Leader = "leader",
        /// A follower (the leader when none is live).
        Follower = "follower",
        /// Any live replica, the leader included.
        LeaderAndFollower = "leader-and-follower",
    }
}

/// Where one request goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadTarget {
    /// The server's base URL.
    pub addr: String,
    /// Sent as a replica read: the target is not the leader the cache knows.
    pub replica_read: bool,
}

/// Turns taken over the candidates, shared by every request of this process.
static TURN: AtomicUsize = AtomicUsize::new(0);

/// The replica of `region` a request goes to under `policy`, skipping those `is_down` says
/// failed recently; `turn` picks among the candidates (see [`next_turn`]).
pub fn target(
    region: &CachedRegion,
    policy: ReplicaReadPolicy,
    is_down: impl Fn(&str) -> bool,
    turn: usize,
) -> ReadTarget {
    let leader = region.leader().addr.as_str();
    let to_leader = || ReadTarget {
        addr: leader.to_string(),
        replica_read: false,
    };
    let candidates: Vec<&str> = match policy {
        ReplicaReadPolicy::Leader => return to_leader(),
        ReplicaReadPolicy::Follower => region
            .replicas
            .iter()
            .filter(|r| !r.pending)
            .map(|r| r.addr.as_str())
            .filter(|a| *a != leader && !is_down(a))
            .collect(),
        ReplicaReadPolicy::LeaderAndFollower => region
            .replicas
            .iter()
            .filter(|r| !r.pending)
            .map(|r| r.addr.as_str())
            .filter(|a| !is_down(a))
            .collect(),
    };
    if candidates.is_empty() {
        return to_leader();
    }
    let addr = candidates[turn % candidates.len()];
    ReadTarget {
        addr: addr.to_string(),
        replica_read: addr != leader,
    }
}

/// The replica of `region` a worker in `zone` reads from on the delegate path: a caught-up
/// one (voter or learner, not `pending`) in its zone that `is_down` does not skip, the leader
/// first when it is there; else the leader (the read crosses zones). A target that is not the
/// leader is a replica read: it sees every write acknowledged before it, and its data version
/// is the leader's at the same applied index.
pub fn in_zone(
    region: &CachedRegion,
    zone: Option<&types::Zone>,
    is_down: impl Fn(&str) -> bool,
) -> ReadTarget {
    let leader = region.leader().addr.as_str();
    let local = zone.and_then(|zone| {
        region
            .replicas
            .iter()
            .filter(|r| !r.pending && r.zone.as_ref() == Some(zone) && !is_down(&r.addr))
            .min_by_key(|r| r.addr != leader)
    });
    let addr = local.map_or(leader, |r| r.addr.as_str());
    ReadTarget {
        addr: addr.to_string(),
        replica_read: addr != leader,
    }
}

/// The next turn (round robin over every request of this process).
pub fn next_turn() -> usize {
    TURN.fetch_add(1, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::region::{Peer, Region};

    fn region(leader: u64) -> CachedRegion {
        let peers = (1..=3)
            .map(|id| Peer {
                store_id: id,
                addr: format!("http://s{id}"),
                ..Peer::default()
            })
            .collect();
        CachedRegion::from_answer(
            Region {
                id: 7,
                peers,
                leader_store_id: leader,
                ..Region::default()
            },
            "http://s1",
            None,
        )
    }

    /// Replicas 1, 2, 3 in zones a, b, c; 3 a learner, pending when `pending`.
    fn zoned(leader: u64, pending: bool) -> CachedRegion {
        let peers = (1..=3u64)
            .map(|id| {
                let mut p = Peer {
                    store_id: id,
                    addr: format!("http://s{id}"),
                    zone: ["a", "b", "c"][usize::try_from(id).unwrap() - 1].into(),
                    pending: id == 3 && pending,
                    ..Peer::default()
                };
                if id == 3 {
                    p.set_role(wire::region::PeerRole::Learner);
                }
                p
            })
            .collect();
        let server = format!("http://s{leader}");
        CachedRegion::from_answer(
            Region {
                id: 7,
                peers,
                leader_store_id: leader,
                ..Region::default()
            },
            &server,
            None,
        )
    }

    #[test]
    fn a_worker_reads_from_the_caught_up_replica_of_its_zone_else_from_the_leader() {
        let zone = |z: &str| types::Zone::label(z);
        let r = zoned(1, false);
        let t = |r: &CachedRegion, z: &str, down: &[&str]| {
            let t = in_zone(r, zone(z).as_ref(), |a| down.contains(&a));
            (t.addr, t.replica_read)
        };
        assert_eq!(t(&r, "a", &[]), ("http://s1".into(), false));
        assert_eq!(t(&r, "b", &[]), ("http://s2".into(), true));
        // A learner serves replica reads.
        assert_eq!(t(&r, "c", &[]), ("http://s3".into(), true));
        // No replica in the zone, a replica down, a learner not caught up: the leader.
        assert_eq!(t(&r, "d", &[]), ("http://s1".into(), false));
        assert_eq!(t(&r, "b", &["http://s2"]), ("http://s1".into(), false));
        assert_eq!(t(&zoned(1, true), "c", &[]), ("http://s1".into(), false));
        let none = in_zone(&r, None, |_| false);
        assert_eq!(
            (none.addr.as_str(), none.replica_read),
            ("http://s1", false)
        );
    }

    #[test]
    fn a_pending_replica_is_no_local_zone_and_serves_no_follower_read() {
        assert_eq!(zoned(1, false).replica_zones().len(), 3);
        let pending = zoned(1, true);
        let zones: Vec<String> = pending
            .replica_zones()
            .iter()
            .map(|z| z.to_string())
            .collect();
        assert_eq!(zones, ["a", "b"]);
        for turn in 0..4 {
            let t = target(&pending, ReplicaReadPolicy::Follower, |_| false, turn);
            assert_eq!(t.addr, "http://s2");
        }
    }

    fn targets(r: &CachedRegion, policy: ReplicaReadPolicy, down: &[&str]) -> Vec<ReadTarget> {
        (0..6)
            .map(|turn| target(r, policy, |a| down.contains(&a), turn))
            .collect()
    }

    #[test]
    fn leader_policy_always_reads_from_the_leader_as_a_leader_read() {
        let r = region(2);
        for t in targets(&r, ReplicaReadPolicy::Leader, &[]) {
            assert_eq!(t.addr, "http://s2");
            assert!(!t.replica_read);
        }
    }

    #[test]
    fn follower_policy_takes_turns_over_live_followers_and_falls_back_to_the_leader() {
        let r = region(2);
        let picked: Vec<String> = targets(&r, ReplicaReadPolicy::Follower, &[])
            .into_iter()
            .map(|t| {
                assert!(t.replica_read, "{t:?}");
                t.addr
            })
            .collect();
        assert!(picked.contains(&"http://s1".to_string()), "{picked:?}");
        assert!(picked.contains(&"http://s3".to_string()), "{picked:?}");
        assert!(!picked.contains(&"http://s2".to_string()), "{picked:?}");
        for t in targets(&r, ReplicaReadPolicy::Follower, &["http://s1"]) {
            assert_eq!(t.addr, "http://s3");
        }
        for t in targets(&r, ReplicaReadPolicy::Follower, &["http://s1", "http://s3"]) {
            assert_eq!(
                t,
                ReadTarget {
                    addr: "http://s2".into(),
                    replica_read: false
                }
            );
        }
    }

    #[test]
    fn leader_and_follower_policy_marks_only_follower_targets_as_replica_reads() {
        let r = region(2);
        let all = targets(&r, ReplicaReadPolicy::LeaderAndFollower, &[]);
        for t in &all {
            assert_eq!(t.replica_read, t.addr != "http://s2", "{t:?}");
        }
        let addrs: std::collections::BTreeSet<&str> = all.iter().map(|t| t.addr.as_str()).collect();
        assert_eq!(addrs.len(), 3, "{all:?}");
    }

    #[test]
    fn the_variable_values_are_tidbs() {
        let labels: Vec<&str> = ReplicaReadPolicy::ALL.iter().map(|p| p.as_str()).collect();
        assert_eq!(labels, ["leader", "follower", "leader-and-follower"]);
        assert_eq!(ReplicaReadPolicy::default(), ReplicaReadPolicy::Leader);
    }
}
