//! The timestamp oracle of the placement leader: strictly increasing timestamps that survive the
//! loss of the instance handing them out.
//!
//! A timestamp is `physical_ms << 18 | logical` ([`types::Ts`]). The leader hands out
//! timestamps only below a **mark** (a physical millisecond value) it persisted in the metadata
//! store first (`tso/mark`): persist `now + window`, serve below it, extend it before it runs
//! out (the extension is a transaction fenced by the leader key, so only the current leader
//! extends). A new leader reads the mark and starts at it, above everything any previous leader
//! could have handed out; and a previous leader stops serving before its lease ends
//! ([`crate::election`]), before a new one can be elected. Hence timestamps are strictly
//! increasing across any failover, and a client never sees one smaller than one it saw before.
//!
//! When the store is unreachable the leader goes on serving below the persisted mark and fails
//! requests with [`PdError::WindowExhausted`] once it is used up.

use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Mutex as AsyncMutex;
use types::Ts;

use crate::election::Fence;
use crate::error::PdError;
use crate::keys::parse_u64;
use crate::meta::{Compare, MetaStore, Op, Txn};

/// Timestamps per physical millisecond.
pub const LOGICAL_PER_MS: u64 = Ts::LOGICAL_PER_MS;

/// Wall-clock milliseconds since the Unix epoch (0 before it: the TSO then runs on its mark).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The largest physical value a timestamp holds (46 bits of milliseconds).
pub const MAX_PHYSICAL_MS: u64 = Ts::MAX_PHYSICAL_MS;

#[derive(Debug, Default)]
struct State {
    /// Whether this instance serves (it leads and started from the persisted mark).
    serving: bool,
    /// The leadership it serves under: a request or an extension carrying another fence (one
    /// from a previous term, still in flight) is refused without stopping this one.
    fence: Option<Fence>,
    physical: u64,
    next_logical: u64,
    /// Every timestamp handed out has a physical part below this (persisted first).
    persisted_until: u64,
    /// The mark's value as last written or read (None: absent), for the next compare.
    stored: Option<Vec<u8>>,
}

/// The TSO of one placement-driver instance; idle until [`Tso::start`] after an election.
#[derive(Debug)]
pub struct Tso {
    key: Vec<u8>,
    window_ms: u64,
    state: Mutex<State>,
    /// One extension of the mark at a time.
    extending: AsyncMutex<()>,
}

impl Tso {
    pub fn new(key: Vec<u8>, window: Duration) -> Tso {
        Tso {
            key,
            window_ms: window.as_millis().max(1) as u64,
            state: Mutex::new(State::default()),
            extending: AsyncMutex::new(()),
        }
    }

    /// Starts serving as the new leader: reads the mark and persists a window above it. Every
    /// timestamp handed out from now on is above every one handed out by any earlier leader.
    pub async fn start<S: MetaStore>(&self, store: &S, fence: &Fence) -> Result<(), PdError> {
        self.stop();
        let _one = self.extending.lock().await;
        let stored = store.get(&self.key).await?;
        let mark = match &stored {
            Some(kv) => parse_u64(&self.key, &kv.value).map_err(PdError::Corrupt)?,
            None => 0,
        };
        let start = now_ms().max(mark);
        let new_mark = self.mark_after(start).ok_or_else(|| {
            PdError::Corrupt(format!(
                "expected a tso mark below {} ms at {}, found {mark}",
                MAX_PHYSICAL_MS - self.window_ms,
                String::from_utf8_lossy(&self.key)
            ))
        })?;
        let stored = stored.map(|kv| kv.value);
        self.persist(store, fence, &stored, new_mark).await?;
        let mut s = self.state.lock();
        *s = State {
            serving: true,
            fence: Some(fence.clone()),
            physical: start,
            next_logical: 0,
            persisted_until: new_mark,
            stored: Some(new_mark.to_string().into_bytes()),
        };
        tracing::info!(
            mark,
            start,
            new_mark,
            "tso started above the persisted mark"
        );
        Ok(())
    }

    /// Stops serving (leadership lost or given up).
    pub fn stop(&self) {
        let mut s = self.state.lock();
        s.serving = false;
        s.fence = None;
    }

    /// Whether it serves: a leader whose TSO stopped (a fenced write failed) must step down
    /// and be elected again, which re-reads the mark.
    pub fn is_serving(&self) -> bool {
        self.state.lock().serving
    }

    /// `physical + window`, when it fits the timestamp's physical bits.
    fn mark_after(&self, physical: u64) -> Option<u64> {
        physical
            .checked_add(self.window_ms)
            .filter(|m| *m <= MAX_PHYSICAL_MS)
    }

    /// Refuses a caller whose fence is not the one this TSO serves under.
    fn check_fence(s: &State, fence: &Fence) -> Result<(), PdError> {
        if s.serving && s.fence.as_ref() == Some(fence) {
            Ok(())
        } else {
            Err(PdError::NotLeader {
                leader: String::new(),
            })
        }
    }

    /// Writes `new_mark` if the mark still holds `expected` and `fence` still holds.
    async fn persist<S: MetaStore>(
        &self,
        store: &S,
        fence: &Fence,
        expected: &Option<Vec<u8>>,
        new_mark: u64,
    ) -> Result<(), PdError> {
        let mark_unchanged = match expected {
            Some(v) => Compare::value_is(self.key.clone(), v.clone()),
            None => Compare::absent(self.key.clone()),
        };
        let done = store
            .txn(
                Txn::when(vec![fence.compare(), mark_unchanged])
                    .then(vec![Op::put(self.key.clone(), new_mark.to_string())]),
            )
            .await?;
        if !done {
            self.stop();
            return Err(PdError::LeadershipLost {
                what: "the tso mark",
            });
        }
        crate::metrics::TSO_MARK_WRITES.inc();
        Ok(())
    }

    /// Extends the mark when less than two thirds of a window is left ahead of the clock (the
    /// leader's background tick calls this, so requests rarely wait for the store).
    pub async fn extend_ahead<S: MetaStore>(
        &self,
        store: &S,
        fence: &Fence,
        force: bool,
    ) -> Result<(), PdError> {
        let _one = self.extending.lock().await;
        let (expected, base) = {
            let s = self.state.lock();
            if !s.serving {
                return Ok(());
            }
            Self::check_fence(&s, fence)?;
            let base = now_ms().max(s.physical);
            if !force && s.persisted_until.saturating_sub(base) > self.window_ms * 2 / 3 {
                return Ok(());
            }
            (s.stored.clone(), base)
        };
        let Some(new_mark) = self.mark_after(base) else {
            return Err(PdError::WindowExhausted {
                physical_ms: base,
                cause: format!(
                    "the physical time reached the end of the timestamp range ({MAX_PHYSICAL_MS} ms)"
                ),
            });
        };
        self.persist(store, fence, &expected, new_mark).await?;
        let mut s = self.state.lock();
        if s.fence.as_ref() == Some(fence) {
            if s.persisted_until < new_mark {
                s.persisted_until = new_mark;
            }
            s.stored = Some(new_mark.to_string().into_bytes());
        }
        Ok(())
    }

    /// `count` consecutive timestamps (the first returned), all above every timestamp handed
    /// out before by any leader. Waits for an extension of the mark when the window is used up.
    pub async fn get_ts<S: MetaStore>(
        &self,
        store: &S,
        fence: &Fence,
        count: u32,
    ) -> Result<u64, PdError> {
        let count = u64::from(count);
        if count == 0 || count > LOGICAL_PER_MS {
            return Err(PdError::InvalidCount {
                found: count,
                max: LOGICAL_PER_MS,
            });
        }
        // At most two tries: one extension always makes room for a whole millisecond.
        for _ in 0..2 {
            match self.take(fence, count) {
                Ok(Some(first)) => return Ok(first),
                Ok(None) => {
                    if let Err(e) = self.extend_ahead(store, fence, true).await {
                        let physical_ms = self.state.lock().physical;
                        return Err(match e {
                            PdError::Meta(m) => PdError::WindowExhausted {
                                physical_ms,
                                cause: m.to_string(),
                            },
                            e => e,
                        });
                    }
                }
                Err(e) => return Err(e),
            }
        }
        let physical_ms = self.state.lock().physical;
        Err(PdError::WindowExhausted {
            physical_ms,
            cause: "the extended window was used up at once".into(),
        })
    }

    /// Takes `count` timestamps below the persisted mark; None when the mark is in the way.
    fn take(&self, fence: &Fence, count: u64) -> Result<Option<u64>, PdError> {
        let mut s = self.state.lock();
        Self::check_fence(&s, fence)?;
        let (physical, logical) = Ts::next_batch(s.physical, s.next_logical, now_ms(), count);
        if physical >= s.persisted_until {
            return Ok(None);
        }
        s.physical = physical;
        s.next_logical = logical + count;
        Ok(Some(Ts::compose(physical, logical).0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::embedded::EmbeddedStore;
    use crate::test_support::{block, fence_for};

    #[test]
    fn a_new_leader_starts_above_everything_the_old_one_handed_out() {
        let store = EmbeddedStore::in_memory();
        let fence = fence_for(&store);
        let old = Tso::new(b"mark".to_vec(), Duration::from_secs(3600));
        let new = Tso::new(b"mark".to_vec(), Duration::from_secs(3600));
        block(async {
            old.start(&store, &fence).await.unwrap();
            let mut last = 0;
            for _ in 0..1000 {
                let ts = old.get_ts(&store, &fence, 3).await.unwrap();
                assert!(ts > last);
                last = ts + 2;
            }
            new.start(&store, &fence).await.unwrap();
            let first = new.get_ts(&store, &fence, 1).await.unwrap();
            // The window is an hour ahead of the clock: the new leader starts at the mark.
            assert!(first > last, "{first} <= {last}");
            assert!(Ts(first).physical_millis() >= now_ms() + 3500 * 1000);
        });
    }

    #[test]
    fn a_fenced_out_leader_stops_serving() {
        let store = EmbeddedStore::in_memory();
        let fence = fence_for(&store);
        let tso = Tso::new(b"mark".to_vec(), Duration::from_millis(50));
        block(async {
            tso.start(&store, &fence).await.unwrap();
            tso.get_ts(&store, &fence, 1).await.unwrap();
            // Another instance takes the leader key.
            store
                .txn(Txn::default().then(vec![Op::put("leader", "other")]))
                .await
                .unwrap();
            tokio::time::sleep(Duration::from_millis(80)).await;
            let e = tso.get_ts(&store, &fence, 1).await.unwrap_err();
            assert!(matches!(e, PdError::LeadershipLost { .. }), "{e}");
            assert!(matches!(
                tso.get_ts(&store, &fence, 1).await.unwrap_err(),
                PdError::NotLeader { .. }
            ));
        });
    }

    #[test]
    fn a_request_of_a_previous_term_is_refused_without_stopping_the_current_one() {
        let store = EmbeddedStore::in_memory();
        let old = fence_for(&store);
        let new = fence_for(&store);
        assert_ne!(old, new);
        let tso = Tso::new(b"mark".to_vec(), Duration::from_secs(3));
        block(async {
            tso.start(&store, &new).await.unwrap();
            let e = tso.get_ts(&store, &old, 1).await.unwrap_err();
            assert!(matches!(e, PdError::NotLeader { .. }), "{e}");
            let e = tso.extend_ahead(&store, &old, true).await.unwrap_err();
            assert!(matches!(e, PdError::NotLeader { .. }), "{e}");
            assert!(tso.is_serving());
            tso.get_ts(&store, &new, 1).await.unwrap();
        });
    }

    #[test]
    fn a_mark_at_the_end_of_the_timestamp_range_is_refused() {
        let store = EmbeddedStore::in_memory();
        let fence = fence_for(&store);
        block(async {
            store
                .txn(Txn::default().then(vec![Op::put("mark", MAX_PHYSICAL_MS.to_string())]))
                .await
                .unwrap();
            let tso = Tso::new(b"mark".to_vec(), Duration::from_secs(1));
            let e = tso.start(&store, &fence).await.unwrap_err().to_string();
            assert!(e.contains("expected a tso mark below"), "{e}");
        });
    }

    #[test]
    fn a_corrupt_mark_is_refused_not_reset() {
        let store = EmbeddedStore::in_memory();
        let fence = fence_for(&store);
        block(async {
            store
                .txn(Txn::default().then(vec![Op::put("mark", "12x")]))
                .await
                .unwrap();
            let tso = Tso::new(b"mark".to_vec(), Duration::from_secs(1));
            let e = tso.start(&store, &fence).await.unwrap_err().to_string();
            assert!(e.contains("12x") && e.contains("mark"), "{e}");
        });
    }

    #[test]
    fn a_full_millisecond_runs_ahead_and_stays_increasing() {
        let store = EmbeddedStore::in_memory();
        let fence = fence_for(&store);
        let tso = Tso::new(b"mark".to_vec(), Duration::from_secs(3));
        block(async {
            tso.start(&store, &fence).await.unwrap();
            let a = tso
                .get_ts(&store, &fence, LOGICAL_PER_MS as u32)
                .await
                .unwrap();
            let b = tso.get_ts(&store, &fence, 1).await.unwrap();
            assert!(b >= a + LOGICAL_PER_MS, "{a} {b}");
            let e = tso
                .get_ts(&store, &fence, LOGICAL_PER_MS as u32 + 1)
                .await
                .unwrap_err();
            assert!(matches!(e, PdError::InvalidCount { .. }));
        });
    }
}
