//! Replays the `pd_meta_file` fuzz corpus (the embedded metadata store's file) as ordinary
//! tests, so an input that once crashed the decoder stays fixed. The seed is the file of a
//! running placement driver ([`pd::meta::embedded::fuzz_seed`]), committed; a missing or empty
//! corpus is a failure. To rewrite it after an intended format change:
//! `STRATUS_BLESS=1 cargo test -p pd --test fuzz_corpus_replay`.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use pd::meta::embedded::{fuzz_decode, fuzz_seed};
use proptest::prelude::*;

#[path = "../../fuzz/replay_support.rs"]
mod replay_support;
use replay_support::*;

const TARGET: &str = "pd_meta_file";

#[test]
fn the_committed_seed_matches_its_generator_or_bless_rewrites_it() {
    check_or_bless_seed(TARGET, "seed_meta.bin", &fuzz_seed());
}

#[test]
fn the_corpus_replays_without_panicking() {
    for (path, data) in corpus_files(TARGET) {
        eprintln!("replaying {}", path.display());
        fuzz_decode(&data);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// A cheap stand-in for the fuzzer in ordinary test runs: a mutated file never panics the
    /// decoder (the crc catches most; the rest must fail with a message).
    #[test]
    fn mutated_seeds_never_panic(mutations in prop::collection::vec(mutation(), 1..4)) {
        fuzz_decode(&mutate(fuzz_seed(), &mutations));
    }
}
