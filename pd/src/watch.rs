//! The topology watch (`POST /pd/watch`): the leader publishes the cluster view it reads each
//! scheduling round, tagged with a digest of what callers route by (servers' addresses, zones
//! and states; workers; the routing table's ranges, epochs, replicas and leaders), and a
//! watcher holding another digest is answered at once, one holding the current digest when it
//! changes or when its wait ends. Counts, sizes and heartbeat times are left out of the digest:
//! they change with every heartbeat, and a watch that fired on them would be a poll.
//!
//! A change is seen within one `schedule-interval` of reaching the metadata store, and the
//! leader reads the store once per round whatever the number of watchers.

use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use wire::pd::ClusterView;

/// The longest a watcher is kept waiting (then answered with the view it has).
pub const MAX_WAIT: Duration = Duration::from_secs(30);

/// The digest of what callers route by in `view` (never 0: 0 is "nothing yet").
pub fn token(view: &ClusterView) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for s in &view.stores {
        if let Some(hb) = &s.heartbeat {
            (hb.store_id, &hb.url, s.state).hash(&mut h);
            for l in &hb.labels {
                (&l.key, &l.value).hash(&mut h);
            }
        }
    }
    for w in &view.workers {
        (w.id, &w.url).hash(&mut h);
        for l in &w.labels {
            (&l.key, &l.value).hash(&mut h);
        }
    }
    for r in &view.regions {
        (
            r.id,
            &r.start,
            &r.end,
            r.ver,
            r.conf_ver,
            r.leader_store_id,
            r.leader_term,
        )
            .hash(&mut h);
        for p in &r.peers {
            (p.store_id, &p.addr, &p.zone, p.role, p.pending).hash(&mut h);
        }
    }
    h.finish().max(1)
}

/// The view the leader last published, with its token.
pub type Published = Option<Arc<(u64, ClusterView)>>;

/// Where the leader publishes and watchers wait.
#[derive(Debug)]
pub struct Topology {
    tx: watch::Sender<Published>,
}

impl Default for Topology {
    fn default() -> Self {
        Topology {
            tx: watch::channel(None).0,
        }
    }
}

impl Topology {
    /// Publishes `view` when its token differs from the published one (waking watchers).
    pub fn publish(&self, view: &ClusterView) {
        let t = token(view);
        self.tx.send_if_modified(|current| {
            if current.as_ref().is_some_and(|c| c.0 == t) {
                return false;
            }
            *current = Some(Arc::new((t, view.clone())));
            true
        });
    }

    /// Forgets the view (a leadership ended): watchers wait for the next leader's.
    pub fn clear(&self) {
        self.tx.send_replace(None);
    }

    /// The published view once its token differs from `known`, or whatever is published
    /// (maybe nothing) after `wait` (capped at [`MAX_WAIT`]); nothing at once when the view is
    /// cleared while waiting (the leadership ended: the caller goes to the next leader).
    pub async fn wait_change(&self, known: u64, wait: Duration) -> Published {
        let mut rx = self.tx.subscribe();
        let sleep = tokio::time::sleep(wait.min(MAX_WAIT));
        tokio::pin!(sleep);
        let mut seen = false;
        loop {
            {
                let now = rx.borrow_and_update();
                match now.as_ref() {
                    Some(p) if p.0 != known => return now.clone(),
                    Some(_) => seen = true,
                    None if seen => return None,
                    None => {}
                }
            }
            tokio::select! {
                changed = rx.changed() => {
                    if changed.is_err() {
                        return None;
                    }
                }
                () = &mut sleep => return rx.borrow().clone(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::block;
    use wire::pd::{StoreHeartbeat, StoreInfo};
    use wire::region::{Peer, Region};

    fn view(leader: u64, used_size: u64, last_heartbeat_ms: u64) -> ClusterView {
        ClusterView {
            stores: vec![StoreInfo {
                heartbeat: Some(StoreHeartbeat {
                    store_id: 1,
                    url: "http://s1".into(),
                    used_size,
                    ..StoreHeartbeat::default()
                }),
                last_heartbeat_ms,
                ..StoreInfo::default()
            }],
            regions: vec![Region {
                id: 7,
                leader_store_id: leader,
                approximate_size: used_size,
                peers: vec![Peer {
                    store_id: 1,
                    ..Peer::default()
                }],
                ..Region::default()
            }],
            ..ClusterView::default()
        }
    }

    #[test]
    fn the_token_follows_routing_and_ignores_sizes_and_heartbeat_times() {
        assert_eq!(token(&view(1, 10, 5)), token(&view(1, 99, 6)));
        assert_ne!(token(&view(1, 10, 5)), token(&view(2, 10, 5)));
        let mut joined = view(1, 10, 5);
        joined.stores.push(StoreInfo {
            heartbeat: Some(StoreHeartbeat {
                store_id: 2,
                url: "http://s2".into(),
                ..StoreHeartbeat::default()
            }),
            ..StoreInfo::default()
        });
        assert_ne!(token(&view(1, 10, 5)), token(&joined));
        assert_ne!(token(&ClusterView::default()), 0);
    }

    #[test]
    fn a_watcher_is_answered_at_once_on_a_change_and_after_its_wait_without_one() {
        block(async {
            let t = Arc::new(Topology::default());
            // Nothing published: the wait ends empty.
            assert!(t.wait_change(0, Duration::from_millis(20)).await.is_none());
            t.publish(&view(1, 10, 5));
            let first = t.wait_change(0, MAX_WAIT).await.expect("published");
            // The same topology (sizes moved): the watcher waits out its wait.
            let started = std::time::Instant::now();
            t.publish(&view(1, 50, 9));
            let same = t
                .wait_change(first.0, Duration::from_millis(100))
                .await
                .expect("still published");
            assert_eq!(same.0, first.0);
            assert!(started.elapsed() >= Duration::from_millis(100));
            // A leader change wakes a waiting watcher before its wait ends.
            let waiter = {
                let t = t.clone();
                let known = first.0;
                tokio::spawn(async move { t.wait_change(known, MAX_WAIT).await })
            };
            tokio::time::sleep(Duration::from_millis(20)).await;
            let started = std::time::Instant::now();
            t.publish(&view(2, 10, 5));
            let changed = waiter.await.expect("joined").expect("published");
            assert_ne!(changed.0, first.0);
            assert_eq!(changed.1.regions[0].leader_store_id, 2);
            assert!(started.elapsed() < Duration::from_secs(5));
        });
    }
}
