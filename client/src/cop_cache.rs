//! The coprocessor cache, client side: results of coprocessor requests kept by request, each
//! reused only after the owning server confirms that nothing in the region changed.
//!
//! Protocol (the server side is `cop::cache`):
//!
//! * every request carries `is_cache_enabled` (even with the cache disabled: the server then
//!   reports whether the result could be cached, which is cheap, and a cache later turned on
//!   starts from the same requests);
//! * it carries `cache_if_match_version` only when an entry exists for the same key **and the
//!   same region id**, stored at a start_ts <= this request's: a result cached at start_ts `S`
//!   holds for any later reader while the region's data version is unchanged (the server
//!   declared it free of versions newer than `S` and of locks), but not for an older reader,
//!   who must not see versions between its start_ts and `S`; and a region created by a split
//!   must not answer from its parent's entry;
//! * a hit answers the entry's rows and the entry's **resume range**, so a cached page
//!   continues its region exactly where the original page did; a hit for a request that sent
//!   no version (no local entry) is a protocol error;
//! * a miss is stored only if the server says `can_be_cached` with `cache_last_version > 0`
//!   and the admission rules pass ([`CopCacheConfig`]): result size, process time (a third of
//!   the minimum for pages after the first), number of ranges, page index.
//!
//! Process time is the server's `exec_details.processed_ns` (the handler's execution time,
//! filled on the local and the remote path); a response without it (an older server) falls
//! back to the wall time of the request as the client measured it.
//!
//! The key ([`CacheKey`]) is the request type, the DAG bytes, the ranges and a paging marker,
//! never start_ts or the page size. Entries live in an LRU bounded by bytes ([`lru`]).

pub mod key;
pub mod lru;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;
use types::{RegionId, Ts};
use wire::coprocessor::KeyRange;

pub use key::CacheKey;
use lru::Lru;

use crate::config::CopCacheConfig;
use crate::metrics;

/// One cached page.
#[derive(Debug, Clone, PartialEq)]
pub struct CacheEntry {
    /// The region the result was computed in.
    pub region_id: RegionId,
    /// The start_ts of the request that computed it.
    pub start_ts: Ts,
    /// The region's data version it holds for (`cache_last_version`).
    pub data_version: u64,
    /// The encoded `SelectResponse`.
    pub data: Bytes,
    /// The page's resume range (`None`: the page finished its region).
    pub range: Option<KeyRange>,
}

impl CacheEntry {
    /// Bytes charged against the capacity: the result, the key, the resume range and a
    /// fixed overhead for the bookkeeping.
    fn weight(&self, key: &CacheKey) -> u64 {
        let range = self
            .range
            .as_ref()
            .map_or(0, |r| r.start.len() + r.end.len());
        (self.data.len() + key.len() + range + 96) as u64
    }
}

/// Why a result was not stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejection {
    Disabled,
    /// The server did not declare it cacheable, or gave no data version.
    NotCacheable,
    TooLarge,
    TooFast,
    TooManyRanges,
    PageIndexTooHigh,
    /// Heavier than the whole capacity.
    NoRoom,
}

/// What one response offers to the cache.
#[derive(Debug, Clone, Copy)]
pub struct Candidate {
    pub page_index: u64,
    pub num_ranges: usize,
    pub result_bytes: usize,
    pub process_time: Duration,
    pub can_be_cached: bool,
    pub cache_last_version: u64,
}

/// The admission rules of [`CopCacheConfig`] (everything but the capacity).
pub fn admit(cfg: &CopCacheConfig, c: &Candidate) -> Result<(), Rejection> {
    if cfg.capacity_mb == 0 {
        return Err(Rejection::Disabled);
    }
    if !c.can_be_cached || c.cache_last_version == 0 {
        return Err(Rejection::NotCacheable);
    }
    if c.result_bytes as u64 > cfg.admission_max_result_size.bytes() {
        return Err(Rejection::TooLarge);
    }
    if c.process_time < cfg.min_process_time(c.page_index) {
        return Err(Rejection::TooFast);
    }
    if c.num_ranges > cfg.admission_max_ranges {
        return Err(Rejection::TooManyRanges);
    }
    if c.page_index > cfg.admission_max_page_index {
        return Err(Rejection::PageIndexTooHigh);
    }
    Ok(())
}

/// This cache's own counts (the process-wide ones are in [`crate::metrics`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub hits: u64,
    pub misses: u64,
    pub evictions: u64,
    /// Results stored.
    pub stored: u64,
    /// Results the admission rules or the capacity turned away.
    pub rejected: u64,
}

#[derive(Debug, Default)]
struct Counts {
    hits: AtomicU64,
    misses: AtomicU64,
    evictions: AtomicU64,
    stored: AtomicU64,
    rejected: AtomicU64,
}

#[derive(Debug)]
pub struct CopCache {
    cfg: CopCacheConfig,
    lru: Mutex<Lru<CacheKey, Arc<CacheEntry>>>,
    counts: Counts,
}

impl CopCache {
    pub fn new(cfg: CopCacheConfig) -> CopCache {
        let capacity = cfg.capacity_bytes();
        CopCache {
            cfg,
            lru: Mutex::new(Lru::new(capacity)),
            counts: Counts::default(),
        }
    }

    pub fn config(&self) -> &CopCacheConfig {
        &self.cfg
    }

    pub fn is_enabled(&self) -> bool {
        self.cfg.capacity_mb > 0
    }

    pub fn len(&self) -> usize {
        self.lru.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn used_bytes(&self) -> u64 {
        self.lru.lock().used()
    }

    pub fn stats(&self) -> CacheStats {
        let c = &self.counts;
        CacheStats {
            hits: c.hits.load(Ordering::Relaxed),
            misses: c.misses.load(Ordering::Relaxed),
            evictions: c.evictions.load(Ordering::Relaxed),
            stored: c.stored.load(Ordering::Relaxed),
            rejected: c.rejected.load(Ordering::Relaxed),
        }
    }

    /// The entry a request may ask the server to confirm: same key, same region id, stored
    /// at a start_ts <= `start_ts`. The caller sends its `data_version` as
    /// `cache_if_match_version` and keeps the entry until the answer arrives (so an eviction
    /// in between cannot turn a hit into a missing entry).
    pub fn lookup(
        &self,
        key: &CacheKey,
        region_id: RegionId,
        start_ts: Ts,
    ) -> Option<Arc<CacheEntry>> {
        if !self.is_enabled() {
            return None;
        }
        let lru = self.lru.lock();
        lru.peek(key)
            .filter(|e| e.region_id == region_id && e.start_ts <= start_ts)
            .cloned()
    }

    /// Records a hit on `key` (makes it the most recently used).
    pub fn record_hit(&self, key: &CacheKey) {
        self.lru.lock().get(key);
        self.counts.hits.fetch_add(1, Ordering::Relaxed);
        metrics::COP_CACHE_HITS.inc();
    }

    /// Records a miss: a response the cluster computed while the cache was enabled.
    pub fn record_miss(&self) {
        if self.is_enabled() {
            self.counts.misses.fetch_add(1, Ordering::Relaxed);
            metrics::COP_CACHE_MISSES.inc();
        }
    }

    /// Stores `entry` under `key` if `candidate` passes admission and it fits.
    pub fn offer(
        &self,
        key: CacheKey,
        entry: CacheEntry,
        candidate: &Candidate,
    ) -> Result<(), Rejection> {
        let decided = admit(&self.cfg, candidate).and_then(|()| {
            let weight = entry.weight(&key);
            let ins = self.lru.lock().insert(key, Arc::new(entry), weight);
            if ins.evicted > 0 {
                self.counts
                    .evictions
                    .fetch_add(ins.evicted, Ordering::Relaxed);
                metrics::COP_CACHE_EVICTIONS.inc_by(ins.evicted);
            }
            if ins.stored {
                Ok(())
            } else {
                Err(Rejection::NoRoom)
            }
        });
        match decided {
            Ok(()) => self.counts.stored.fetch_add(1, Ordering::Relaxed),
            Err(Rejection::Disabled) => 0,
            Err(_) => self.counts.rejected.fetch_add(1, Ordering::Relaxed),
        };
        decided
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use types::{ReadableDuration, ReadableSize};

    fn cfg() -> CopCacheConfig {
        CopCacheConfig::default()
    }

    fn candidate() -> Candidate {
        Candidate {
            page_index: 0,
            num_ranges: 1,
            result_bytes: 100,
            process_time: Duration::from_millis(6),
            can_be_cached: true,
            cache_last_version: 7,
        }
    }

    fn entry(region_id: u64, start_ts: u64, data: &[u8]) -> CacheEntry {
        CacheEntry {
            region_id: RegionId(region_id),
            start_ts: Ts(start_ts),
            data_version: 7,
            data: Bytes::copy_from_slice(data),
            range: Some(KeyRange::new("a", "b")),
        }
    }

    fn key(dag: &[u8]) -> CacheKey {
        CacheKey::new(103, dag, &[KeyRange::new("a", "z")], true)
    }

    #[test]
    fn admission_follows_each_limit() {
        let c = cfg();
        assert_eq!(admit(&c, &candidate()), Ok(()));
        let with = |f: &dyn Fn(&mut Candidate)| {
            let mut x = candidate();
            f(&mut x);
            admit(&c, &x)
        };
        assert_eq!(
            with(&|x| x.can_be_cached = false),
            Err(Rejection::NotCacheable)
        );
        assert_eq!(
            with(&|x| x.cache_last_version = 0),
            Err(Rejection::NotCacheable)
        );
        assert_eq!(
            with(&|x| x.result_bytes = (10 << 20) + 1),
            Err(Rejection::TooLarge)
        );
        assert_eq!(with(&|x| x.result_bytes = 10 << 20), Ok(()));
        assert_eq!(
            with(&|x| x.process_time = Duration::from_millis(4)),
            Err(Rejection::TooFast)
        );
        // Pages after the first need a third of the time.
        assert_eq!(
            with(&|x| {
                x.process_time = Duration::from_millis(2);
                x.page_index = 1;
            }),
            Ok(())
        );
        assert_eq!(
            with(&|x| {
                x.process_time = Duration::from_millis(1);
                x.page_index = 1;
            }),
            Err(Rejection::TooFast)
        );
        assert_eq!(with(&|x| x.num_ranges = 501), Err(Rejection::TooManyRanges));
        assert_eq!(with(&|x| x.num_ranges = 500), Ok(()));
        assert_eq!(
            with(&|x| x.page_index = 51),
            Err(Rejection::PageIndexTooHigh)
        );
        assert_eq!(with(&|x| x.page_index = 50), Ok(()));
        let off = CopCacheConfig {
            capacity_mb: 0,
            ..cfg()
        };
        assert_eq!(admit(&off, &candidate()), Err(Rejection::Disabled));
    }

    #[test]
    fn an_entry_is_offered_only_to_the_same_region_at_a_later_start_ts() {
        let cache = CopCache::new(cfg());
        cache
            .offer(key(b"d"), entry(1, 100, b"rows"), &candidate())
            .unwrap();
        let lookup = |region, ts| cache.lookup(&key(b"d"), RegionId(region), Ts(ts));
        assert!(lookup(1, 100).is_some(), "same start_ts");
        assert!(lookup(1, 150).is_some(), "later start_ts");
        assert!(lookup(1, 99).is_none(), "older start_ts");
        assert!(lookup(2, 150).is_none(), "another region");
        let other_key = cache.lookup(&key(b"e"), RegionId(1), Ts(150));
        assert!(other_key.is_none(), "another key");
        let hit = lookup(1, 150).unwrap();
        assert_eq!(
            hit.range,
            Some(KeyRange::new("a", "b")),
            "the resume range is kept"
        );
    }

    #[test]
    fn a_zero_capacity_disables_the_cache() {
        let cache = CopCache::new(CopCacheConfig {
            capacity_mb: 0,
            ..cfg()
        });
        assert!(!cache.is_enabled());
        assert_eq!(
            cache.offer(key(b"d"), entry(1, 1, b"x"), &candidate()),
            Err(Rejection::Disabled)
        );
        assert!(cache.lookup(&key(b"d"), RegionId(1), Ts(1)).is_none());
        cache.record_miss();
        assert_eq!(cache.stats(), CacheStats::default());
    }

    #[test]
    fn the_byte_budget_evicts_and_counts() {
        let cache = CopCache::new(CopCacheConfig {
            capacity_mb: 1,
            admission_max_result_size: ReadableSize(1 << 20),
            admission_min_process_time: ReadableDuration::millis(0),
            ..cfg()
        });
        let big = vec![0u8; 400 << 10];
        for i in 0..3u8 {
            cache
                .offer(key(&[i]), entry(1, 1, &big), &candidate())
                .unwrap();
        }
        assert_eq!(cache.len(), 2);
        assert!(cache.used_bytes() <= 1 << 20);
        assert_eq!(cache.stats().evictions, 1);
        assert_eq!(cache.stats().stored, 3);
        assert!(
            cache.lookup(&key(&[0]), RegionId(1), Ts(1)).is_none(),
            "the oldest went first"
        );
    }

    mod model {
        use super::*;
        use proptest::prelude::*;
        use std::collections::BTreeMap;

        #[derive(Debug, Clone)]
        enum Op {
            /// A computed page of (dag, region, start_ts), cacheable or not.
            Offer(u8, u64, u64, bool),
            /// A request for (dag, region, start_ts).
            Lookup(u8, u64, u64),
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                (0u8..3, 1u64..3, 1u64..6, any::<bool>())
                    .prop_map(|(d, r, ts, ok)| Op::Offer(d, r, ts, ok)),
                (0u8..3, 1u64..3, 1u64..6).prop_map(|(d, r, ts)| Op::Lookup(d, r, ts)),
            ]
        }

        proptest! {
            /// With room for everything, the cache is a map from key to the last cacheable
            /// page stored, and a lookup finds it only for the same region at a start_ts at
            /// or after the stored one.
            #[test]
            fn lookups_follow_the_reuse_rules(ops in proptest::collection::vec(op(), 0..40)) {
                let cache = CopCache::new(CopCacheConfig {
                    admission_min_process_time: types::ReadableDuration::millis(0),
                    ..cfg()
                });
                let mut model: BTreeMap<u8, (u64, u64)> = BTreeMap::new();
                for op in ops {
                    match op {
                        Op::Offer(d, region, ts, ok) => {
                            let c = Candidate { can_be_cached: ok, ..candidate() };
                            let stored = cache.offer(key(&[d]), entry(region, ts, b"rows"), &c);
                            prop_assert_eq!(stored.is_ok(), ok);
                            if ok {
                                model.insert(d, (region, ts));
                            }
                        }
                        Op::Lookup(d, region, ts) => {
                            let want = model
                                .get(&d)
                                .filter(|(r, stored_ts)| *r == region && *stored_ts <= ts);
                            let got = cache.lookup(&key(&[d]), RegionId(region), Ts(ts));
                            prop_assert_eq!(
                                got.map(|e| (e.region_id.get(), e.start_ts.get())),
                                want.copied()
                            );
                        }
                    }
                }
            }
        }
    }
}
