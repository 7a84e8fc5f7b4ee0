//! `estimate_blocks_size` answers from the index alone; it is checked against the exact sum of
//! the sizes of blocks that hold at least one key of the ranges (read block by block).

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

mod common;

use common::*;
use proptest::prelude::*;
use sst::BuilderOptions;

fn range_strategy() -> impl Strategy<Value = (Vec<u8>, Vec<u8>)> {
    (key_strategy(), prop::option::of(key_strategy())).prop_map(|(a, b)| (a, b.unwrap_or_default()))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn estimate_is_never_under_and_over_by_at_most_one_block_per_range(
        oracle in oracle_strategy(120),
        block_size in 32usize..600,
        ranges in prop::collection::vec(range_strategy(), 1..6),
    ) {
        let t = open(&oracle, BuilderOptions { block_size, ..Default::default() });
        let sizes = t.block_sizes();
        let mut exact = 0u64;
        for (i, size) in sizes.iter().enumerate() {
            let keys = t.block_keys(i).unwrap();
            let touched = keys.iter().any(|k| {
                ranges.iter().any(|(s, e)| k >= s && (e.is_empty() || k < e))
            });
            if touched {
                exact += size;
            }
        }
        let est = t.estimate_blocks_size(&ranges);
        let max_block = sizes.iter().copied().max().unwrap_or(0);
        prop_assert!(est >= exact, "under: est={} exact={}", est, exact);
        prop_assert!(
            est - exact <= ranges.len() as u64 * max_block,
            "over by more than one block per range: est={} exact={} ranges={}", est, exact, ranges.len()
        );
    }
}

#[test]
fn estimate_counts_a_shared_block_once_and_is_exact_on_block_boundaries() {
    let oracle = multi_block_oracle(2000);
    let t = open(
        &oracle,
        BuilderOptions {
            block_size: 1024,
            ..Default::default()
        },
    );
    let keys = t.block_first_keys();
    let sizes = t.block_sizes();
    assert!(keys.len() > 10);
    // [first key of block 2, first key of block 5) touches exactly blocks 2, 3 and 4.
    let r = [(keys[2].clone(), keys[5].clone())];
    assert_eq!(t.estimate_blocks_size(&r), sizes[2..5].iter().sum::<u64>());
    // The same range twice counts once.
    let r2 = [r[0].clone(), r[0].clone()];
    assert_eq!(t.estimate_blocks_size(&r2), sizes[2..5].iter().sum::<u64>());
    // Unbounded end reaches the last block.
    let all = [(Vec::new(), Vec::new())];
    assert_eq!(t.estimate_blocks_size(&all), sizes.iter().sum::<u64>());
    // A range past the biggest key touches nothing.
    assert_eq!(t.estimate_blocks_size(&[(b"z".to_vec(), Vec::new())]), 0);
}
