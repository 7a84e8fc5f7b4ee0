//! Leader election through the metadata store, as PD does it: the leader is whoever created
//! the leader key, bound to a lease it keeps renewing. The key's value is the leader's URL (how
//! followers redirect); its `mod_revision` is the leader's **fence**: every write the leader
//! makes (the TSO mark, the id counter) is a transaction comparing it, so an instance that lost
//! the key (paused, cut off) cannot write anything after another was elected.
//!
//! A leader also stops *serving* before another can be elected: its lease deadline is counted
//! from when it sent the renewal that succeeded, minus a margin, so it is always earlier than
//! the moment the store expires the lease (which counts from when it received the renewal).

use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::meta::{Compare, LeaseId};

/// What a leader's writes compare: the leader key still at the revision that created it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fence {
    pub key: Vec<u8>,
    pub mod_revision: u64,
}

impl Fence {
    pub fn compare(&self) -> Compare {
        Compare::mod_revision_is(self.key.clone(), self.mod_revision)
    }
}

#[derive(Clone, Debug)]
enum Role {
    /// Following `leader` (empty: none known).
    Follower { leader: String },
    Leader {
        lease: LeaseId,
        fence: Fence,
        /// Serving stops at this instant unless a renewal moves it.
        deadline: Instant,
    },
}

/// This instance's view of the election; shared by the campaign loop and the request handlers.
#[derive(Debug)]
pub struct Leadership {
    me: String,
    role: Mutex<Role>,
}

/// The fraction of the lease a leader stops serving before it ends.
const LEASE_MARGIN_DIVISOR: u32 = 4;

/// The instant until which a leader whose renewal was *sent* at `sent` may serve.
pub fn serve_deadline(sent: Instant, ttl: Duration) -> Instant {
    sent + ttl - ttl / LEASE_MARGIN_DIVISOR
}

impl Leadership {
    pub fn new(me: String) -> Leadership {
        Leadership {
            me,
            role: Mutex::new(Role::Follower {
                leader: String::new(),
            }),
        }
    }

    /// This instance's URL.
    pub fn me(&self) -> &str {
        &self.me
    }

    /// The fence while this instance leads with a live lease; otherwise the leader to ask.
    pub fn fence(&self) -> Result<Fence, String> {
        match &*self.role.lock() {
            Role::Leader {
                fence, deadline, ..
            } if Instant::now() < *deadline => Ok(fence.clone()),
            Role::Leader { .. } => Err(String::new()),
            Role::Follower { leader } => Err(leader.clone()),
        }
    }

    /// The leader's URL as this instance knows it (itself while it leads).
    pub fn leader(&self) -> String {
        match &*self.role.lock() {
            Role::Leader { deadline, .. } if Instant::now() < *deadline => self.me.clone(),
            Role::Leader { .. } => String::new(),
            Role::Follower { leader } => leader.clone(),
        }
    }

    pub fn is_leader(&self) -> bool {
        self.fence().is_ok()
    }

    pub(crate) fn follow(&self, leader: String) {
        *self.role.lock() = Role::Follower { leader };
    }

    pub(crate) fn lead(&self, lease: LeaseId, fence: Fence, deadline: Instant) {
        *self.role.lock() = Role::Leader {
            lease,
            fence,
            deadline,
        };
    }

    /// Moves the deadline after a renewal sent at `sent` succeeded; false when this instance no
    /// longer leads under `lease`.
    pub(crate) fn renewed(&self, lease: LeaseId, deadline: Instant) -> bool {
        match &mut *self.role.lock() {
            Role::Leader {
                lease: l,
                deadline: d,
                ..
            } if *l == lease => {
                *d = deadline;
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leader_past_its_deadline_does_not_serve() {
        let l = Leadership::new("http://me".into());
        let fence = Fence {
            key: b"k".to_vec(),
            mod_revision: 3,
        };
        l.lead(7, fence.clone(), Instant::now() + Duration::from_secs(5));
        assert_eq!(l.fence().unwrap(), fence);
        assert_eq!(l.leader(), "http://me");
        l.lead(7, fence, Instant::now() - Duration::from_millis(1));
        assert!(!l.is_leader());
        assert_eq!(l.leader(), "");
    }

    #[test]
    fn the_serve_deadline_ends_before_the_lease() {
        let now = Instant::now();
        let ttl = Duration::from_secs(2);
        assert!(serve_deadline(now, ttl) < now + ttl);
        assert!(serve_deadline(now, ttl) > now + ttl / 2);
    }

    #[test]
    fn a_renewal_of_another_lease_is_ignored() {
        let l = Leadership::new("me".into());
        l.follow("http://other".into());
        assert!(!l.renewed(1, Instant::now()));
        assert_eq!(l.fence().unwrap_err(), "http://other");
    }
}
