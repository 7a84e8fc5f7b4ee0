//! Who holds each region's replicas and where those servers are.
//!
//! Membership is Raft's (`raftstore::Router::membership`: voters and learners as this replica
//! applied them); addresses start from `[raft] peers` and grow with what the placement driver
//! says (its registered servers, and the target of each scheduling step), so a server added to
//! the cluster later is reachable without editing anyone's config. What is learned also goes
//! to the Raft transport.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::RwLock;
use raftstore::{RaftConfig, Router, Transport};
use wire::region::{Peer, PeerRole};

/// A server's base URL and zone label ("" = none).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Address {
    url: String,
    zone: String,
}

pub struct Members {
    book: RwLock<HashMap<u64, Address>>,
    transport: Arc<dyn Transport>,
}

impl Members {
    /// The addresses of `[raft] peers`, already known to `transport`.
    pub fn new(raft: &RaftConfig, transport: Arc<dyn Transport>) -> Members {
        let book = raft
            .peers
            .iter()
            .map(|p| {
                let zone = p.zone.as_ref().map(|z| z.to_string()).unwrap_or_default();
                (
                    p.id,
                    Address {
                        url: p.addr.clone(),
                        zone,
                    },
                )
            })
            .collect();
        Members {
            book: RwLock::new(book),
            transport,
        }
    }

    /// Server `store_id` is at `url` in `zone` now (`""`: keep the zone known, if any); Raft
    /// messages to it go there.
    pub fn learn(&self, store_id: u64, url: &str, zone: &str) {
        if url.is_empty() {
            return;
        }
        let known_zone = self.book.read().get(&store_id).map(|a| a.zone.clone());
        let now = Address {
            url: url.to_string(),
            zone: match (zone, known_zone) {
                ("", Some(known)) => known,
                (zone, _) => zone.to_string(),
            },
        };
        if self.book.read().get(&store_id) == Some(&now) {
            return;
        }
        self.transport.set_address(store_id, url);
        self.book.write().insert(store_id, now);
    }

    /// The replicas of `region_id` as this server's replica applied them, with the addresses
    /// known here (an unknown one has an empty `addr`), and which are not caught up as its
    /// leader sees them.
    pub fn peers_of(&self, router: &Router, region_id: u64) -> Vec<Peer> {
        let Some(m) = router.membership(region_id) else {
            return Vec::new();
        };
        let book = self.book.read();
        let peer = |store_id: u64, role: PeerRole| {
            let address = book.get(&store_id);
            Peer {
                store_id,
                addr: address.map(|a| a.url.clone()).unwrap_or_default(),
                zone: address.map(|a| a.zone.clone()).unwrap_or_default(),
                role: role as i32,
                pending: m.pending.contains(&store_id),
            }
        };
        m.voters
            .iter()
            .map(|id| peer(*id, PeerRole::Voter))
            .chain(m.learners.iter().map(|id| peer(*id, PeerRole::Learner)))
            .collect()
    }

    /// Whether some replica of a region held here is on a server whose address is unknown
    /// here (one that joined later): then the registrations are worth reading.
    pub fn misses_addresses(&self, router: &Router) -> bool {
        let own = router.store_id();
        let book = self.book.read();
        router.memberships().into_iter().any(|m| {
            m.voters
                .iter()
                .chain(&m.learners)
                .any(|s| *s != own && !book.contains_key(s))
        })
    }

    /// Whether `store_id` holds a voter of `region_id` here.
    pub fn is_voter(&self, router: &Router, region_id: u64, store_id: u64) -> bool {
        router
            .membership(region_id)
            .is_some_and(|m| m.voters.contains(&store_id))
    }
}
