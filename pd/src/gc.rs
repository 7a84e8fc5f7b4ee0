//! The GC safe point: the timestamp below which no reader may read, so compaction may drop
//! every version older than the newest one at or below it (`kvengine::compaction`).
//!
//! The leader keeps it at `gc/safe-point` (decimal) and advances it every scheduling round to
//! [`candidate`]: `gc-life-time` before now, held back below the oldest lock any server reports
//! and paused while a region's leader is not registered. It never moves back: every write is a
//! transaction fenced by the leader key and comparing the value read, and a lower candidate
//! leaves it as it is. Servers learn it from the answers to their heartbeats, hand it to their
//! engine's compactions, and refuse reads and prewrites below it (`TxnError::BelowGcSafePoint`):
//! a read that old could miss versions compaction dropped and return a wrong answer.
//!
//! **Why the oldest lock holds it back.** A lock's transaction is resolved by reading its
//! primary's commit or rollback record at or above the lock's start_ts. Were the safe point to
//! pass the lock, compaction could drop that record under a newer write to the primary, and the
//! resolver would roll back secondaries of a committed transaction. TiDB resolves such locks
//! before it moves the safe point; here the safe point waits for readers to resolve them (a
//! lock older than its TTL is resolved by the first read that meets it).
//!
//! **What it does not cover.** A transaction with a start_ts older than `gc-life-time` that
//! has not written a lock yet may have its reads refused or its prewrite refused; it must
//! restart with a new start_ts (TiDB: "GC life time is shorter than transaction duration").

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use types::Ts;
use wire::pd::ClusterView;

use crate::election::Fence;
use crate::error::PdError;
use crate::keys::parse_u64;
use crate::meta::{Compare, MetaStore, Op, Txn};

/// Why the safe point does not advance this round (for the log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Held {
    /// A region's leader is not registered: its locks are unknown.
    UnknownLeader { region_id: u64, store_id: u64 },
}

impl std::fmt::Display for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Held::UnknownLeader {
                region_id,
                store_id,
            } => write!(
                f,
                "region {region_id}'s leader (store {store_id}) is not registered: its locks are unknown"
            ),
        }
    }
}

/// The safe point the cluster may move to at `now_ms` (ms since the Unix epoch): `life`
/// before now, below every lock the registered servers report (`oldest_lock_ts`), or `Held`
/// when a region in the routing table has a leader that is not registered.
pub fn candidate(now_ms: u64, life: Duration, view: &ClusterView) -> Result<u64, Held> {
    let registered: std::collections::HashSet<u64> = view
        .stores
        .iter()
        .filter_map(|s| s.heartbeat.as_ref().map(|h| h.store_id))
        .collect();
    if let Some(r) = view
        .regions
        .iter()
        .find(|r| !registered.contains(&r.leader_store_id))
    {
        return Err(Held::UnknownLeader {
            region_id: r.id,
            store_id: r.leader_store_id,
        });
    }
    let life_ms = u64::try_from(life.as_millis()).unwrap_or(u64::MAX);
    let by_time = Ts::compose(now_ms.saturating_sub(life_ms), 0).get();
    let below_locks = view
        .stores
        .iter()
        .filter_map(|s| s.heartbeat.as_ref())
        .filter(|h| h.oldest_lock_ts != 0)
        .map(|h| h.oldest_lock_ts - 1)
        .min()
        .unwrap_or(u64::MAX);
    Ok(by_time.min(below_locks))
}

/// The persisted safe point and the leader's copy of it.
#[derive(Debug)]
pub struct GcSafePoint {
    key: Vec<u8>,
    /// The last value read or written by this instance (0: none yet).
    known: AtomicU64,
}

impl GcSafePoint {
    pub fn new(key: Vec<u8>) -> GcSafePoint {
        GcSafePoint {
            key,
            known: AtomicU64::new(0),
        }
    }

    /// The value this instance last read or wrote (what heartbeat answers carry).
    pub fn known(&self) -> u64 {
        self.known.load(Ordering::Acquire)
    }

    /// Reads the persisted value (0 when none was ever written).
    pub async fn load<S: MetaStore>(&self, store: &S) -> Result<u64, PdError> {
        let value = match store.get(&self.key).await? {
            Some(kv) => parse_u64(&self.key, &kv.value).map_err(PdError::Corrupt)?,
            None => 0,
        };
        self.known.fetch_max(value, Ordering::AcqRel);
        Ok(value)
    }

    /// Moves the safe point up to `to` (a lower `to` changes nothing); the value it holds
    /// afterwards. Fails with `LeadershipLost` when the fence or the value changed meanwhile.
    pub async fn advance<S: MetaStore>(
        &self,
        store: &S,
        fence: &Fence,
        to: u64,
    ) -> Result<u64, PdError> {
        let stored = store.get(&self.key).await?;
        let (current, unchanged) = match &stored {
            Some(kv) => (
                parse_u64(&self.key, &kv.value).map_err(PdError::Corrupt)?,
                Compare::value_is(self.key.clone(), kv.value.clone()),
            ),
            None => (0, Compare::absent(self.key.clone())),
        };
        if to <= current {
            self.known.fetch_max(current, Ordering::AcqRel);
            return Ok(current);
        }
        let done = store
            .txn(
                Txn::when(vec![fence.compare(), unchanged])
                    .then(vec![Op::put(self.key.clone(), to.to_string())]),
            )
            .await?;
        if !done {
            return Err(PdError::LeadershipLost {
                what: "the GC safe point",
            });
        }
        self.known.fetch_max(to, Ordering::AcqRel);
        Ok(to)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::embedded::EmbeddedStore;
    use crate::test_support::{block, fence_for};
    use wire::pd::{StoreHeartbeat, StoreInfo};
    use wire::region::Region;

    const MINUTE: Duration = Duration::from_secs(60);

    fn store(id: u64, oldest_lock_ts: u64) -> StoreInfo {
        StoreInfo {
            heartbeat: Some(StoreHeartbeat {
                store_id: id,
                oldest_lock_ts,
                ..StoreHeartbeat::default()
            }),
            ..StoreInfo::default()
        }
    }

    fn region(id: u64, leader: u64) -> Region {
        Region {
            id,
            leader_store_id: leader,
            ..Region::default()
        }
    }

    #[test]
    fn the_candidate_is_the_life_time_before_now_without_locks() {
        let view = ClusterView {
            stores: vec![store(1, 0), store(2, 0)],
            regions: vec![region(1, 1), region(2, 2)],
            ..ClusterView::default()
        };
        let now = 1_000_000_000;
        let c = candidate(now, 10 * MINUTE, &view).unwrap();
        assert_eq!(c, Ts::compose(now - 600_000, 0).get());
    }

    #[test]
    fn the_oldest_reported_lock_holds_the_candidate_below_it() {
        let now = 1_000_000_000;
        let old_lock = Ts::compose(now - 3_600_000, 7).get();
        let view = ClusterView {
            stores: vec![store(1, 0), store(2, old_lock), store(3, old_lock + 50)],
            regions: vec![region(1, 1)],
            ..ClusterView::default()
        };
        assert_eq!(candidate(now, 10 * MINUTE, &view).unwrap(), old_lock - 1);
        // A lock newer than the life-time bound changes nothing.
        let young = Ts::compose(now - 1_000, 0).get();
        let view = ClusterView {
            stores: vec![store(1, young)],
            ..ClusterView::default()
        };
        assert_eq!(
            candidate(now, 10 * MINUTE, &view).unwrap(),
            Ts::compose(now - 600_000, 0).get()
        );
    }

    #[test]
    fn a_region_led_by_an_unregistered_server_holds_the_safe_point() {
        let view = ClusterView {
            stores: vec![store(1, 0)],
            regions: vec![region(1, 1), region(9, 4)],
            ..ClusterView::default()
        };
        assert_eq!(
            candidate(1_000_000_000, MINUTE, &view),
            Err(Held::UnknownLeader {
                region_id: 9,
                store_id: 4
            })
        );
    }

    #[test]
    fn the_safe_point_never_moves_back_and_a_new_leader_reads_it() {
        let store = EmbeddedStore::in_memory();
        let fence = fence_for(&store);
        block(async {
            let a = GcSafePoint::new(b"gc".to_vec());
            assert_eq!(a.load(&store).await.unwrap(), 0);
            assert_eq!(a.advance(&store, &fence, 500).await.unwrap(), 500);
            assert_eq!(a.advance(&store, &fence, 400).await.unwrap(), 500);
            assert_eq!(a.known(), 500);
            let b = GcSafePoint::new(b"gc".to_vec());
            assert_eq!(b.known(), 0);
            assert_eq!(b.load(&store).await.unwrap(), 500);
            assert_eq!(b.known(), 500);
        });
    }

    #[test]
    fn an_old_leader_cannot_advance_the_safe_point() {
        let store = EmbeddedStore::in_memory();
        let old = fence_for(&store);
        let _new = fence_for(&store);
        block(async {
            let gc = GcSafePoint::new(b"gc".to_vec());
            let e = gc.advance(&store, &old, 10).await.unwrap_err();
            assert!(matches!(e, PdError::LeadershipLost { .. }), "{e}");
            assert_eq!(gc.load(&store).await.unwrap(), 0);
        });
    }
}
