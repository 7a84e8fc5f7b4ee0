//! The id allocator: small ids, unique in the cluster for ever (split regions' and workers'
//! ids; servers keep their configured `node-id` until membership comes from the placement
//! driver).
//!
//! The leader reserves a batch (`id/alloc` = the highest id reserved, raised by a transaction
//! fenced by the leader key) and hands ids out of it from memory; a new leader starts after
//! the persisted value, so a failover skips at most one batch and never repeats an id. Ids up
//! to [`wire::pd::RESERVED_IDS`] are never handed out (the initial regions have them).

use parking_lot::Mutex;
use tokio::sync::Mutex as AsyncMutex;

use crate::election::Fence;
use crate::error::PdError;
use crate::keys::parse_u64;
use crate::meta::{Compare, MetaStore, Op, Txn};

/// The most ids one request may take.
pub const MAX_IDS_PER_REQUEST: u64 = 10_000;

#[derive(Debug, Default)]
struct State {
    /// Whether the batch below was reserved under the current leadership.
    serving: bool,
    /// The next id to hand out.
    next: u64,
    /// The last id reserved (`next > end`: the batch is used up).
    end: u64,
}

#[derive(Debug)]
pub struct IdAllocator {
    key: Vec<u8>,
    batch: u64,
    state: Mutex<State>,
    reserving: AsyncMutex<()>,
}

impl IdAllocator {
    pub fn new(key: Vec<u8>, batch: u64) -> IdAllocator {
        IdAllocator {
            key,
            batch: batch.max(1),
            state: Mutex::new(State::default()),
            reserving: AsyncMutex::new(()),
        }
    }

    /// Starts under a new leadership: the next batch is read from the store.
    pub fn start(&self) {
        *self.state.lock() = State {
            serving: true,
            next: 1,
            end: 0,
        };
    }

    pub fn stop(&self) {
        self.state.lock().serving = false;
    }

    /// Whether it serves (a failed fenced write stops it: the leader must step down).
    pub fn is_serving(&self) -> bool {
        self.state.lock().serving
    }

    /// `count` consecutive new ids (the first returned).
    pub async fn alloc<S: MetaStore>(
        &self,
        store: &S,
        fence: &Fence,
        count: u32,
    ) -> Result<u64, PdError> {
        let count = u64::from(count);
        if count == 0 || count > MAX_IDS_PER_REQUEST {
            return Err(PdError::InvalidCount {
                found: count,
                max: MAX_IDS_PER_REQUEST,
            });
        }
        loop {
            {
                let mut s = self.state.lock();
                if !s.serving {
                    return Err(PdError::NotLeader {
                        leader: String::new(),
                    });
                }
                if s.next + count - 1 <= s.end {
                    let first = s.next;
                    s.next += count;
                    return Ok(first);
                }
            }
            self.reserve(store, fence, count).await?;
        }
    }

    /// Reserves the next batch (at least `count` ids) after what the store holds.
    async fn reserve<S: MetaStore>(
        &self,
        store: &S,
        fence: &Fence,
        count: u64,
    ) -> Result<(), PdError> {
        let _one = self.reserving.lock().await;
        {
            let s = self.state.lock();
            if s.serving && s.next + count - 1 <= s.end {
                return Ok(()); // another request reserved meanwhile
            }
        }
        let stored = store.get(&self.key).await?;
        let (base, unchanged) = match &stored {
            Some(kv) => (
                parse_u64(&self.key, &kv.value).map_err(PdError::Corrupt)?,
                Compare::value_is(self.key.clone(), kv.value.clone()),
            ),
            None => (0, Compare::absent(self.key.clone())),
        };
        // The reserved ids belong to the initial regions.
        let base = base.max(wire::pd::RESERVED_IDS);
        let end = base.checked_add(self.batch.max(count)).ok_or_else(|| {
            PdError::Corrupt(format!(
                "expected an id counter below {}, found {base} at {}",
                u64::MAX - self.batch.max(count),
                String::from_utf8_lossy(&self.key)
            ))
        })?;
        let done = store
            .txn(
                Txn::when(vec![fence.compare(), unchanged])
                    .then(vec![Op::put(self.key.clone(), end.to_string())]),
            )
            .await?;
        if !done {
            self.stop();
            return Err(PdError::LeadershipLost {
                what: "the id counter",
            });
        }
        let mut s = self.state.lock();
        if s.serving {
            s.next = base + 1;
            s.end = end;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::embedded::EmbeddedStore;
    use crate::test_support::{block, fence_for};

    #[test]
    fn ids_are_small_and_a_new_leader_never_repeats_one() {
        let store = EmbeddedStore::in_memory();
        let fence = fence_for(&store);
        block(async {
            let a = IdAllocator::new(b"ids".to_vec(), 10);
            a.start();
            let mut seen = Vec::new();
            for _ in 0..15 {
                seen.push(a.alloc(&store, &fence, 1).await.unwrap());
            }
            let first = wire::pd::RESERVED_IDS + 1;
            assert_eq!(seen, (first..first + 15).collect::<Vec<_>>());
            let b = IdAllocator::new(b"ids".to_vec(), 10);
            b.start();
            let next = b.alloc(&store, &fence, 3).await.unwrap();
            assert_eq!(
                next,
                first + 20,
                "the new leader starts after the reserved batch"
            );
            let big = b.alloc(&store, &fence, 50).await.unwrap();
            assert!(big > next + 2);
            // The first allocator's next batch starts after the second's reservations.
            let later = a.alloc(&store, &fence, 10).await.unwrap();
            assert!(later > big + 49, "{later} {big}");
        });
    }
}
