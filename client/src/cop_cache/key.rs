//! The cache key of a coprocessor request: what decides its result apart from the data.
//!
//! Layout, version 1 (all integers little-endian, every variable part length-prefixed so that
//! two different requests never share key bytes):
//!
//! ```text
//! u8 version = 1 | i64 tp | u64 dag_len | dag bytes | u64 n_ranges
//!   | n_ranges × (u64 start_len | start | u64 end_len | end) | u8 paged (0 or 1)
//! ```
//!
//! Left out on purpose: `start_ts` (checked separately against the entry's stored start_ts,
//! so one entry serves every later reader) and the page size (a page's result is valid for its
//! ranges whatever the size asked: the entry keeps the page's resume range, and the final merge
//! takes pages of any size). The region id is not in the key either: it is checked against the
//! entry, so that a region replaced by a split never reuses its parent's entry. The
//! paging marker keeps a paged result (which may stop early with a resume range) apart from an
//! unpaged one.

use wire::coprocessor::KeyRange;

const KEY_FORMAT_VERSION: u8 = 1;

/// The full key bytes; lookups compare all of them (a hash only picks the bucket).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CacheKey(Vec<u8>);

impl CacheKey {
    pub fn new(tp: i64, dag: &[u8], ranges: &[KeyRange], paged: bool) -> CacheKey {
        let len: usize = ranges
            .iter()
            .map(|r| 16 + r.start.len() + r.end.len())
            .sum();
        let mut b = Vec::with_capacity(1 + 8 + 8 + dag.len() + 8 + len + 1);
        b.push(KEY_FORMAT_VERSION);
        b.extend_from_slice(&tp.to_le_bytes());
        put_bytes(&mut b, dag);
        b.extend_from_slice(&(ranges.len() as u64).to_le_bytes());
        for r in ranges {
            put_bytes(&mut b, &r.start);
            put_bytes(&mut b, &r.end);
        }
        b.push(u8::from(paged));
        CacheKey(b)
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

fn put_bytes(b: &mut Vec<u8>, data: &[u8]) {
    b.extend_from_slice(&(data.len() as u64).to_le_bytes());
    b.extend_from_slice(data);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    type Parts = (i64, Vec<u8>, Vec<(Vec<u8>, Vec<u8>)>, bool);

    fn key(p: &Parts) -> CacheKey {
        let ranges: Vec<KeyRange> =
            p.2.iter()
                .map(|(s, e)| KeyRange::new(s.clone(), e.clone()))
                .collect();
        CacheKey::new(p.0, &p.1, &ranges, p.3)
    }

    fn parts() -> impl Strategy<Value = Parts> {
        let bytes = || proptest::collection::vec(0u8..4, 0..4);
        (
            prop_oneof![Just(103i64), Just(104i64)],
            bytes(),
            proptest::collection::vec((bytes(), bytes()), 0..3),
            any::<bool>(),
        )
    }

    proptest! {
        /// Small alphabets and lengths make near-collisions (a byte moved from the DAG into a
        /// range, a range split in two) likely; the key still tells them apart.
        #[test]
        fn keys_are_equal_iff_the_requests_are(a in parts(), b in parts()) {
            prop_assert_eq!(key(&a) == key(&b), a == b);
        }
    }

    #[test]
    fn moving_bytes_between_fields_changes_the_key() {
        let r = |s: &str, e: &str| KeyRange::new(s.as_bytes(), e.as_bytes());
        assert_ne!(
            CacheKey::new(103, b"ab", &[r("c", "d")], true),
            CacheKey::new(103, b"a", &[r("bc", "d")], true)
        );
        assert_ne!(
            CacheKey::new(103, b"", &[r("a", "b"), r("c", "d")], true),
            CacheKey::new(103, b"", &[r("a", "d")], true)
        );
        assert_ne!(
            CacheKey::new(103, b"x", &[r("a", "b")], true),
            CacheKey::new(103, b"x", &[r("a", "b")], false)
        );
    }
}
