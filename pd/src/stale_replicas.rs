//! Replicas the routing table stopped listing: a server that was down while its replica of a
//! region was removed (its replicas rebuilt elsewhere after `max-store-down-time`) comes back
//! with that replica, which never learned of its removal (the leader's `Tombstone` went
//! nowhere). Raft keeps it harmless (no quorum counts it), but it holds memory and campaigns
//! in vain. The server's heartbeat lists every region it holds; one whose routing-table entry
//! (reported by the region's leader) has not named this server for `grace` is told to leave
//! (`StepKind::DestroyReplica`).
//!
//! The table is a reflection, and it lags (a replica just added is named from the leader's
//! next report on), so the placement driver only suggests: the step carries the URL of the
//! server the table names as the region's leader, and the server destroys its replica only
//! once that leader's own answer (`GET /regions`) leads the region without naming this server
//! (`server::pd_heartbeat::execute`): Raft's membership decides, never the table. The grace
//! (`node-lease-ttl`) keeps the suggestions rare.
//!
//! A replica just removed counts as held for `grace` too, before the server's next heartbeat
//! says so: it may not have applied its removal yet, and with store ids as Raft ids a new
//! replica added to that server at once would be the old one, whose progress the leader keeps
//! (it then sends a heartbeat committing past the log of the fresh replica that follows, and
//! the new replica never catches up). Found by the full run's `pd_scheduling`.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use wire::pd::{RegionStep, StepKind};
use wire::region::Region;

#[derive(Debug)]
pub struct StaleReplicas {
    grace: Duration,
    /// Each region's members and its leader's URL (empty: not registered) as the last
    /// scheduling round read the table.
    members: HashMap<u64, (HashSet<u64>, String)>,
    /// `(region, store)` pairs held by the store but not in the table, since when.
    unlisted_since: HashMap<(u64, u64), Instant>,
    /// `(region, store)` pairs the table stopped listing within `grace`, since when.
    removed_at: HashMap<(u64, u64), Instant>,
}

impl StaleReplicas {
    pub fn new(grace: Duration) -> StaleReplicas {
        StaleReplicas {
            grace,
            members: HashMap::new(),
            unlisted_since: HashMap::new(),
            removed_at: HashMap::new(),
        }
    }

    /// A new leadership: nothing is known yet.
    pub fn reset(&mut self) {
        self.members.clear();
        self.unlisted_since.clear();
        self.removed_at.clear();
    }

    /// The routing table as a scheduling round read it at `now`, and the registered servers'
    /// URLs. A member gone since the last round is noted as just removed.
    pub fn observe(&mut self, now: Instant, regions: &[Region], urls: &HashMap<u64, String>) {
        let grace = self.grace;
        self.removed_at
            .retain(|_, at| now.saturating_duration_since(*at) < grace);
        for r in regions {
            if let Some((before, _)) = self.members.get(&r.id) {
                for s in before {
                    if !r.peers.iter().any(|p| p.store_id == *s) {
                        self.removed_at.insert((r.id, *s), now);
                    }
                }
            }
        }
        self.members = regions
            .iter()
            .map(|r| {
                let url = urls.get(&r.leader_store_id).cloned().unwrap_or_default();
                (r.id, (r.peers.iter().map(|p| p.store_id).collect(), url))
            })
            .collect();
    }

    /// The regions `store` still holds a replica of that the table does not list (as of its
    /// last heartbeat), or was removed from within the grace: it must not receive a new
    /// replica of them yet.
    pub fn unlisted(&self, store: u64) -> std::collections::BTreeSet<u64> {
        self.unlisted_since
            .keys()
            .chain(self.removed_at.keys())
            .filter(|(_, s)| *s == store)
            .map(|(region, _)| *region)
            .collect()
    }

    /// The replicas `store` holds (`held`) that must leave now: a `DestroyReplica` step each.
    pub fn check(&mut self, now: Instant, store: u64, held: &[u64]) -> Vec<RegionStep> {
        let held: HashSet<u64> = held.iter().copied().collect();
        // Forget pairs the store no longer holds, or the table lists again.
        let members = &self.members;
        self.unlisted_since.retain(|(region, s), _| {
            *s != store
                || (held.contains(region)
                    && members.get(region).is_some_and(|(m, _)| !m.contains(s)))
        });
        let mut out = Vec::new();
        for region in held {
            // A region the table does not know (a split child not reported yet) is left alone.
            let Some((m, leader_url)) = self.members.get(&region) else {
                continue;
            };
            if m.contains(&store) || leader_url.is_empty() {
                continue;
            }
            let leader_url = leader_url.clone();
            let since = *self.unlisted_since.entry((region, store)).or_insert(now);
            if now.saturating_duration_since(since) >= self.grace {
                let mut step = RegionStep {
                    region_id: region,
                    store_id: store,
                    store_url: leader_url,
                    ..RegionStep::default()
                };
                step.set_kind(StepKind::DestroyReplica);
                out.push(step);
            }
        }
        out.sort_by_key(|s| s.region_id);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::region::Peer;

    fn urls() -> HashMap<u64, String> {
        (1..=4).map(|s| (s, format!("http://s{s}"))).collect()
    }

    fn region(id: u64, stores: &[u64]) -> Region {
        Region {
            id,
            leader_store_id: stores[0],
            peers: stores
                .iter()
                .map(|s| Peer {
                    store_id: *s,
                    ..Peer::default()
                })
                .collect(),
            ..Region::default()
        }
    }

    #[test]
    fn a_replica_the_table_stopped_listing_leaves_after_the_grace_and_not_before() {
        let t0 = Instant::now();
        let grace = Duration::from_secs(2);
        let mut stale = StaleReplicas::new(grace);
        stale.observe(t0, &[region(1, &[1, 3, 4]), region(2, &[1, 2, 3])], &urls());
        // Store 2 holds region 1 (removed while it was down) and region 2 (a member), and
        // region 9, which the table does not know.
        assert!(stale.check(t0, 2, &[1, 2, 9]).is_empty());
        assert!(stale.check(t0 + grace / 2, 2, &[1, 2, 9]).is_empty());
        let steps = stale.check(t0 + grace, 2, &[1, 2, 9]);
        assert_eq!(steps.len(), 1);
        assert_eq!((steps[0].region_id, steps[0].store_id), (1, 2));
        assert_eq!(steps[0].kind(), StepKind::DestroyReplica);
        // The server asks the leader the table names before it destroys anything.
        assert_eq!(steps[0].store_url, "http://s1");
    }

    #[test]
    fn a_replica_just_removed_counts_as_held_for_the_grace_before_any_heartbeat() {
        let t0 = Instant::now();
        let grace = Duration::from_secs(2);
        let mut stale = StaleReplicas::new(grace);
        stale.observe(t0, &[region(1, &[1, 2, 3])], &urls());
        assert!(stale.unlisted(2).is_empty());
        // Store 2 leaves region 1; its heartbeat has not said whether it still holds it.
        stale.observe(t0 + grace / 4, &[region(1, &[1, 3, 4])], &urls());
        assert_eq!(stale.unlisted(2).into_iter().collect::<Vec<_>>(), vec![1]);
        assert!(stale.unlisted(4).is_empty());
        // Still within the grace, then not.
        stale.observe(t0 + grace, &[region(1, &[1, 3, 4])], &urls());
        assert_eq!(stale.unlisted(2).len(), 1);
        stale.observe(t0 + grace * 2, &[region(1, &[1, 3, 4])], &urls());
        assert!(stale.unlisted(2).is_empty());
    }

    #[test]
    fn a_replica_listed_again_within_the_grace_starts_over() {
        let t0 = Instant::now();
        let grace = Duration::from_secs(2);
        let mut stale = StaleReplicas::new(grace);
        // Store 4 was just added: the leader has not reported it yet.
        stale.observe(t0, &[region(1, &[1, 2, 3])], &urls());
        assert!(stale.check(t0, 4, &[1]).is_empty());
        stale.observe(t0, &[region(1, &[1, 2, 3, 4])], &urls());
        assert!(stale.check(t0 + grace, 4, &[1]).is_empty());
        // Removed later: the clock starts again from then.
        stale.observe(t0, &[region(1, &[1, 2, 3])], &urls());
        let t1 = t0 + grace * 2;
        assert!(stale.check(t1, 4, &[1]).is_empty());
        assert!(stale.check(t1 + grace / 2, 4, &[1]).is_empty());
        assert_eq!(stale.check(t1 + grace, 4, &[1]).len(), 1);
    }
}
