//! Deterministic keys and values shared by the benchmarks: 24-byte keys, 150-byte values.

use rand::{Rng, SeedableRng, rngs::StdRng};

pub const KEY_LEN: usize = 24;
pub const VALUE_LEN: usize = 150;

/// Key `i` in sorted order: "t0000001_r" + 14 zero-padded digits (24 bytes), shaped like a
/// record key so the shared-prefix compression sees what it sees in production.
pub fn key(i: usize) -> Vec<u8> {
    let k = format!("t0000001_r{i:014}").into_bytes();
    debug_assert_eq!(k.len(), KEY_LEN);
    k
}

/// A value with some redundancy (half random bytes, half repeated), like encoded rows.
pub fn value(rng: &mut StdRng) -> Vec<u8> {
    let mut v = vec![0u8; VALUE_LEN];
    rng.fill(&mut v[..VALUE_LEN / 2]);
    for (i, b) in v[VALUE_LEN / 2..].iter_mut().enumerate() {
        *b = b'a' + (i % 26) as u8;
    }
    v
}

pub fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

/// A random permutation of 0..n.
pub fn shuffled(n: usize, seed: u64) -> Vec<usize> {
    let mut rng = rng(seed);
    let mut v: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = rng.random_range(0..=i);
        v.swap(i, j);
    }
    v
}
