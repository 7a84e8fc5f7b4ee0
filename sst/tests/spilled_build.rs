//! A builder that hands its finished main blocks to a writer as it goes (`TableBuilder::spill`,
//! how a flush streams its L0 file) produces exactly the bytes of one that keeps everything in
//! memory, wherever the spills fall.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

mod common;

use common::{Oracle, options_strategy, oracle_strategy};
use proptest::prelude::*;
use sst::TableBuilder;

/// Builds `oracle`, spilling to a buffer after every add at which the builder holds at least
/// `spill_at` bytes of finished blocks; the writer's bytes then the tail, and the table.
fn build_spilling(
    oracle: &Oracle,
    opts: sst::BuilderOptions,
    spill_at: usize,
) -> (Vec<u8>, sst::BuiltTable) {
    let mut b = TableBuilder::new(opts).unwrap();
    let mut written = Vec::new();
    for (k, versions) in oracle {
        for (v, (meta, value, tomb)) in versions.iter().rev() {
            b.add(k, *v, meta, value, *tomb).unwrap();
            if b.buffered() >= spill_at {
                b.spill(&mut written).unwrap();
            }
        }
    }
    let built = b.finish();
    assert_eq!(built.spilled, written.len() as u64);
    written.extend_from_slice(&built.data);
    (written, built)
}

proptest! {
    #[test]
    fn a_spilled_table_has_the_bytes_of_one_built_in_memory(
        oracle in oracle_strategy(120),
        opts in options_strategy(),
        spill_at in prop::sample::select(vec![0usize, 1, 200, 4096]),
    ) {
        let whole = common::build(&oracle, opts.clone());
        prop_assert_eq!(whole.spilled, 0);
        let (streamed, built) = build_spilling(&oracle, opts, spill_at);
        prop_assert_eq!(built.len(), whole.data.len() as u64);
        prop_assert_eq!(streamed, whole.data);
        prop_assert_eq!(built.properties, whole.properties);
    }
}

#[test]
fn spilling_after_every_block_hands_out_everything_but_the_tail() {
    let oracle: Oracle = (0..2000u32)
        .map(|i| {
            let key = format!("key{i:06}").into_bytes();
            let versions = [(5u64, (vec![1], vec![b'v'; 50], false))]
                .into_iter()
                .collect();
            (key, versions)
        })
        .collect();
    let opts = sst::BuilderOptions {
        block_size: 512,
        ..sst::BuilderOptions::default()
    };
    let (streamed, built) = build_spilling(&oracle, opts.clone(), 1);
    // Nearly all the main blocks went out before `finish`; only the last block, the indexes,
    // the filter and the footer were left.
    assert!(built.spilled > 100_000, "spilled={}", built.spilled);
    assert!(
        built.data.len() < built.spilled as usize / 4,
        "tail={}",
        built.data.len()
    );
    let table = sst::Table::open(1, bytes::Bytes::from(streamed)).unwrap();
    assert_eq!(table.properties().entries, 2000);
}
