//! Replays the `raft_batch` fuzz corpus as ordinary tests, through the check the fuzz target
//! runs ([`raftstore::fuzzing::raft_batch`]: prost decode, conversion to `eraftpb`, round
//! trip), so an input that once crashed it stays fixed. The seeds (`seed_*.bin`) are generated
//! by [`raft_batch_seeds`] and committed; a missing corpus or seed is a failure, not a skip.
//! To rewrite them after an intended change: `STRATUS_BLESS=1 cargo test -p raftstore --test
//! fuzz_corpus_replay`.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use proptest::prelude::*;
use prost::Message as _;
use raftstore::convert;
use raftstore::fuzzing::{raft_batch, raft_batch_seeds};

#[path = "../../fuzz/replay_support.rs"]
mod replay_support;
use replay_support::*;

const TARGET: &str = "raft_batch";

#[test]
fn committed_seeds_match_their_generator_or_bless_rewrites_them() {
    for (name, batch) in raft_batch_seeds() {
        check_or_bless_seed(TARGET, &format!("seed_{name}.bin"), &batch.encode_to_vec());
    }
}

/// The seeds reach raft-rs's side except the two meant to be refused and the three that are
/// not Raft messages (the store loops' own: hibernation, store heartbeat, file GC indexes).
#[test]
fn seeds_convert_except_the_refused_ones() {
    let mut refused = Vec::new();
    for (name, batch) in raft_batch_seeds() {
        for mut envelope in batch.messages {
            if convert::take_message(&mut envelope).is_err() {
                refused.push(name);
            }
        }
    }
    // The store loops' own messages carry no Raft message: the loop reads them first.
    assert_eq!(
        refused,
        [
            "refused_proposal",
            "unknown_message_type",
            "hibernate",
            "store_heartbeat",
            "file_gc_extra"
        ]
    );
}

#[test]
fn corpus_replays_without_panicking() {
    let files = corpus_files(TARGET);
    for (path, data) in &files {
        eprintln!("replaying {}", path.display());
        raft_batch(data);
    }
    eprintln!("{TARGET} corpus files={}", files.len());
}

#[test]
fn arbitrary_bytes_pass_the_fuzz_check() {
    let inputs: [&[u8]; 7] = [
        b"",
        b"\x00",
        b"\x08\x01",
        b"\x12\x00",
        b"\x12\x04\x42\x02\x08\x63",
        b"\x12\x02\x42\xff",
        &[0xff; 64],
    ];
    for input in inputs {
        raft_batch(input);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// A cheap stand-in for the fuzzer in ordinary test runs: mutated seeds never panic.
    #[test]
    fn mutated_seeds_pass_the_fuzz_check(
        seed in any::<prop::sample::Index>(),
        mutations in prop::collection::vec(mutation(), 1..4),
    ) {
        let seeds = raft_batch_seeds();
        let (_, batch) = &seeds[seed.index(seeds.len())];
        raft_batch(&mutate(batch.encode_to_vec(), &mutations));
    }
}
