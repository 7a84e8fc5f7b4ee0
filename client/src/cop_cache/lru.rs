//! A least-recently-used map bounded by a byte budget: each entry has a weight (its bytes),
//! and inserting evicts the least recently used entries until the total fits.
//!
//! `HashMap` for lookups (the hasher is a parameter so tests can force every key into one
//! bucket and show that lookups compare whole keys), a `BTreeMap` from a use counter to the key
//! for the recency order. Every operation is O(log n).

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasher, Hash, RandomState};

#[derive(Debug)]
struct Slot<V> {
    value: V,
    weight: u64,
    tick: u64,
}

/// What an insert did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Inserted {
    /// Whether the value is now in the map (false: heavier than the whole capacity).
    pub stored: bool,
    /// Other entries evicted to make room (a replaced entry of the same key is not counted).
    pub evicted: u64,
}

#[derive(Debug)]
pub struct Lru<K, V, S = RandomState> {
    map: HashMap<K, Slot<V>, S>,
    order: BTreeMap<u64, K>,
    next_tick: u64,
    capacity: u64,
    used: u64,
}

impl<K: Hash + Eq + Clone, V> Lru<K, V, RandomState> {
    pub fn new(capacity: u64) -> Self {
        Lru::with_hasher(capacity, RandomState::new())
    }
}

impl<K: Hash + Eq + Clone, V, S: BuildHasher> Lru<K, V, S> {
    pub fn with_hasher(capacity: u64, hasher: S) -> Self {
        Lru {
            map: HashMap::with_hasher(hasher),
            order: BTreeMap::new(),
            next_tick: 0,
            capacity,
            used: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Total weight of the entries.
    pub fn used(&self) -> u64 {
        self.used
    }

    fn tick(&mut self) -> u64 {
        self.next_tick += 1;
        self.next_tick
    }

    /// The value of `key`, made the most recently used.
    pub fn get(&mut self, key: &K) -> Option<&V> {
        let tick = self.tick();
        let slot = self.map.get_mut(key)?;
        let k = self
            .order
            .remove(&slot.tick)
            .expect("every slot is in the order");
        slot.tick = tick;
        self.order.insert(tick, k);
        Some(&slot.value)
    }

    /// The value of `key`, recency unchanged.
    pub fn peek(&self, key: &K) -> Option<&V> {
        self.map.get(key).map(|s| &s.value)
    }

    pub fn remove(&mut self, key: &K) -> Option<V> {
        let slot = self.map.remove(key)?;
        self.order.remove(&slot.tick);
        self.used -= slot.weight;
        Some(slot.value)
    }

    /// Inserts (or replaces) `key`, then evicts least recently used entries until the total
    /// weight fits the capacity. A value heavier than the capacity is not stored (and any old
    /// value of the key is removed).
    pub fn insert(&mut self, key: K, value: V, weight: u64) -> Inserted {
        self.remove(&key);
        if weight > self.capacity {
            return Inserted {
                stored: false,
                evicted: 0,
            };
        }
        let mut evicted = 0;
        while self.used + weight > self.capacity {
            let (_, oldest) = self.order.pop_first().expect("used > 0 means an entry");
            let slot = self.map.remove(&oldest).expect("ordered keys are mapped");
            self.used -= slot.weight;
            evicted += 1;
        }
        let tick = self.tick();
        self.order.insert(tick, key.clone());
        self.map.insert(
            key,
            Slot {
                value,
                weight,
                tick,
            },
        );
        self.used += weight;
        Inserted {
            stored: true,
            evicted,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::hash::BuildHasherDefault;

    /// Every key hashes to 0: one bucket, so only the full key comparison tells keys apart.
    #[derive(Default)]
    struct ZeroHasher;
    impl std::hash::Hasher for ZeroHasher {
        fn finish(&self) -> u64 {
            0
        }
        fn write(&mut self, _: &[u8]) {}
    }

    #[test]
    fn colliding_hashes_never_mix_up_keys() {
        let mut lru: Lru<Vec<u8>, u32, BuildHasherDefault<ZeroHasher>> =
            Lru::with_hasher(100, BuildHasherDefault::default());
        lru.insert(b"key-a".to_vec(), 1, 1);
        lru.insert(b"key-b".to_vec(), 2, 1);
        assert_eq!(lru.get(&b"key-a".to_vec()), Some(&1));
        assert_eq!(lru.get(&b"key-b".to_vec()), Some(&2));
        assert_eq!(lru.get(&b"key-c".to_vec()), None);
    }

    #[test]
    fn the_least_recently_used_entry_goes_first() {
        let mut lru = Lru::new(3);
        lru.insert("a", 1, 1);
        lru.insert("b", 2, 1);
        lru.insert("c", 3, 1);
        lru.get(&"a");
        let ins = lru.insert("d", 4, 1);
        assert_eq!(
            ins,
            Inserted {
                stored: true,
                evicted: 1
            }
        );
        assert_eq!(lru.peek(&"b"), None);
        assert!(lru.peek(&"a").is_some() && lru.peek(&"c").is_some());
        assert_eq!(
            lru.insert("big", 0, 4),
            Inserted {
                stored: false,
                evicted: 0
            }
        );
        assert_eq!(lru.used(), 3);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u8, u32, u64),
        Get(u8),
        Remove(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0u8..8, any::<u32>(), 0u64..12).prop_map(|(k, v, w)| Op::Insert(k, v, w)),
            2 => (0u8..8).prop_map(Op::Get),
            1 => (0u8..8).prop_map(Op::Remove),
        ]
    }

    proptest! {
        /// The model: a list ordered from least to most recently used.
        #[test]
        fn behaves_like_a_recency_list(capacity in 0u64..30, ops in proptest::collection::vec(op(), 0..60)) {
            let mut lru = Lru::new(capacity);
            let mut model: Vec<(u8, u32, u64)> = Vec::new();
            for op in ops {
                match op {
                    Op::Insert(k, v, w) => {
                        model.retain(|e| e.0 != k);
                        let got = lru.insert(k, v, w);
                        if w > capacity {
                            prop_assert_eq!(got, Inserted { stored: false, evicted: 0 });
                        } else {
                            let mut evicted = 0;
                            while model.iter().map(|e| e.2).sum::<u64>() + w > capacity {
                                model.remove(0);
                                evicted += 1;
                            }
                            model.push((k, v, w));
                            prop_assert_eq!(got, Inserted { stored: true, evicted });
                        }
                    }
                    Op::Get(k) => {
                        let want = model.iter().position(|e| e.0 == k).map(|i| model.remove(i));
                        if let Some(e) = want {
                            model.push(e);
                        }
                        prop_assert_eq!(lru.get(&k).copied(), want.map(|e| e.1));
                    }
                    Op::Remove(k) => {
                        let want = model.iter().position(|e| e.0 == k).map(|i| model.remove(i));
                        prop_assert_eq!(lru.remove(&k), want.map(|e| e.1));
                    }
                }
                prop_assert_eq!(lru.len(), model.len());
                prop_assert_eq!(lru.used(), model.iter().map(|e| e.2).sum::<u64>());
                prop_assert!(lru.used() <= capacity);
                for e in &model {
                    prop_assert_eq!(lru.peek(&e.0), Some(&e.1));
                }
            }
        }
    }
}
