//! Replays the fuzz corpora as ordinary tests, so an input that once crashed a decoder stays
//! fixed. The corpus directories belong to `fuzz/` and are committed: a missing or empty one
//! fails the test rather than passing with nothing replayed.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use changeset::encode_changeset;
use changeset::fuzzing::{self, changeset_seeds, memtable_data_seeds};
use proptest::prelude::*;

#[path = "../../fuzz/replay_support.rs"]
mod replay_support;
use replay_support::*;

/// Runs `target` on every file of the corpus directory; returns how many ran.
fn replay(name: &str, target: fn(&[u8])) -> usize {
    let files = corpus_files(name);
    for (path, data) in &files {
        eprintln!("replaying {}", path.display());
        target(data);
    }
    files.len()
}

#[test]
fn changeset_decode_corpus_replays_without_panicking() {
    let count = replay("changeset_decode", fuzzing::changeset_decode);
    eprintln!("changeset_decode corpus files={count}");
}

#[test]
fn memtable_data_decode_corpus_replays_without_panicking() {
    let count = replay("memtable_data_decode", fuzzing::memtable_data_decode);
    eprintln!("memtable_data_decode corpus files={count}");
}

#[test]
fn compaction_job_corpus_replays_without_panicking() {
    let count = replay("compaction_job", fuzzing::compaction_job_decode);
    eprintln!("compaction_job corpus files={count}");
}

/// The committed corpus holds today's seeds (so a change to the job's layout shows here).
#[test]
fn compaction_job_corpus_holds_the_generated_seeds() {
    let files = corpus_files("compaction_job");
    for (name, seed) in fuzzing::compaction_job_seeds() {
        assert!(
            files.iter().any(|(_, data)| *data == seed),
            "seed {name} is not in the compaction_job corpus: write it to fuzz/corpus/compaction_job/{name}"
        );
    }
}

#[test]
fn generated_seeds_pass_the_fuzz_checks() {
    for (_, changeset) in changeset_seeds() {
        fuzzing::changeset_decode(&encode_changeset(&changeset));
    }
    for (_, blob) in memtable_data_seeds() {
        fuzzing::memtable_data_decode(&blob);
    }
}

#[test]
fn arbitrary_bytes_pass_the_fuzz_checks() {
    // A few inputs the decoders must reject or accept without panicking.
    let inputs: [&[u8]; 6] = [
        b"",
        b"\x00",
        b"SMTD\x01",
        b"SMTD\x01\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",
        &[0x08, 0x01, 0x10, 0x01, 0x18, 0x01, 0x52, 0x00],
        &[0xff; 64],
    ];
    for input in inputs {
        fuzzing::changeset_decode(input);
        fuzzing::memtable_data_decode(input);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// A cheap stand-in for the fuzzer in ordinary test runs: mutated seeds never panic.
    #[test]
    fn mutated_seeds_pass_the_fuzz_checks(
        seed in any::<prop::sample::Index>(),
        mutations in prop::collection::vec(mutation(), 1..4),
    ) {
        let changesets = changeset_seeds();
        let (_, changeset) = &changesets[seed.index(changesets.len())];
        fuzzing::changeset_decode(&mutate(encode_changeset(changeset), &mutations));
        let blobs = memtable_data_seeds();
        let (_, blob) = &blobs[seed.index(blobs.len())];
        fuzzing::memtable_data_decode(&mutate(blob.clone(), &mutations));
        let jobs = fuzzing::compaction_job_seeds();
        let (_, job) = &jobs[seed.index(jobs.len())];
        fuzzing::compaction_job_decode(&mutate(job.clone(), &mutations));
    }
}
