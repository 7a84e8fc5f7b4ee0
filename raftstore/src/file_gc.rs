//! File GC across the replicas of a region: carrying the engine's indexes in the Raft envelope.
//!
//! The engine (`kvengine`'s `file_gc`) records every file an applied entry retires with the
//! entry's index, and computes this replica's **safe index** for the region: it needs no file
//! the region retired at or below it. A retired file may leave the object store only once every
//! replica is past its retirement, so:
//!
//! * every envelope a store sends for a region carries its replica's safe index
//!   (`RaftMessage::file_gc_safe_index`); the receiver keeps the highest it got from each store
//!   ([`FileGcReports::record`]): a report, once true, stays true (the engine's docs say why);
//! * the leader's **group index** is the minimum over every voter, its own safe index included,
//!   a voter never heard from counting as 0 ([`FileGcReports::group_index`]). It raises the
//!   engine's group index with it, and every envelope carries the highest group index the
//!   sender knows (`file_gc_group_index`), so followers learn it and delete too, and a follower
//!   that becomes leader continues from there;
//! * a sleeping region sends no Raft message (`hibernation`); its indexes move only if a
//!   snapshot holding a retired file is dropped, and then the store sends them alone in a
//!   `FileGc` extra message, which wakes nothing ([`FileGcReports::changed`]). A region that
//!   wakes reports again with its first messages.
//!
//! Reports are per region: a split child's group starts with none (its leader waits for its
//! voters' first messages).

use std::collections::HashMap;

/// One region's file GC reports, kept by its peer on this store.
#[derive(Debug, Default)]
pub(crate) struct FileGcReports {
    /// The highest safe index each other store reported for the region.
    reported: HashMap<u64, u64>,
    /// The (safe, group) indexes this store last put on an envelope of the region.
    sent: Option<(u64, u64)>,
}

impl FileGcReports {
    /// Store `store_id` said its replica needs no file retired at or below `safe`.
    pub(crate) fn record(&mut self, store_id: u64, safe: u64) {
        let known = self.reported.entry(store_id).or_insert(0);
        *known = (*known).max(safe);
    }

    /// The group index a leader on store `me` with safe index `own` computes over `voters`
    /// (its own id among them): the lowest safe index, 0 for a voter never heard from.
    pub(crate) fn group_index(
        &self,
        me: u64,
        own: u64,
        voters: impl IntoIterator<Item = u64>,
    ) -> u64 {
        voters
            .into_iter()
            .map(|v| {
                if v == me {
                    own
                } else {
                    self.reported.get(&v).copied().unwrap_or(0)
                }
            })
            .min()
            .unwrap_or(0)
    }

    /// Notes that `indexes` (safe, group) went out on an envelope.
    pub(crate) fn sent(&mut self, indexes: (u64, u64)) {
        self.sent = Some(indexes);
    }

    /// Whether `indexes` differ from what last went out (a sleeping region then sends them).
    pub(crate) fn changed(&self, indexes: (u64, u64)) -> bool {
        self.sent != Some(indexes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_group_index_is_the_lowest_voter_and_a_silent_voter_holds_it_at_zero() {
        let mut r = FileGcReports::default();
        assert_eq!(r.group_index(1, 50, [1, 2, 3]), 0, "nobody reported");
        r.record(2, 40);
        assert_eq!(r.group_index(1, 50, [1, 2, 3]), 0, "store 3 never reported");
        r.record(3, 45);
        assert_eq!(r.group_index(1, 50, [1, 2, 3]), 40);
        assert_eq!(
            r.group_index(1, 30, [1, 2, 3]),
            30,
            "the leader's own index counts"
        );
        // An older report arriving late does not lower what is known.
        r.record(2, 10);
        assert_eq!(r.group_index(1, 50, [1, 2, 3]), 40);
        assert_eq!(r.group_index(1, 50, [1]), 50, "a one-voter group");
    }

    #[test]
    fn indexes_count_as_changed_until_they_went_out() {
        let mut r = FileGcReports::default();
        assert!(r.changed((0, 0)), "nothing went out yet");
        r.sent((5, 3));
        assert!(!r.changed((5, 3)));
        assert!(r.changed((6, 3)));
        assert!(r.changed((5, 4)));
    }
}
