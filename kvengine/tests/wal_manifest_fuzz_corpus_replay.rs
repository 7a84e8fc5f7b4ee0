//! Replays the `wal_record` and `manifest` fuzz corpora as ordinary tests, so an input that
//! once crashed a decoder stays fixed. The seeds are committed (written by
//! `examples/wal_manifest_fuzz_seeds.rs`); a missing corpus is a failure, not a skip. The
//! undamaged seeds double as format-version-1 fixtures that must keep decoding.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use kvengine::WriteBatch;
use kvengine::manifest::{MANIFEST_FILE_NAME, Manifest, ManifestOptions};
use kvengine::wal::frame::FramesEnd;
use kvengine::wal::{self, decode_segment};
use proptest::prelude::*;

#[path = "../../fuzz/replay_support.rs"]
mod replay_support;
use replay_support::*;

fn seed(name: &str, file: &str) -> Vec<u8> {
    std::fs::read(corpus(name).join(file)).unwrap_or_else(|e| panic!("seed {file}: {e}"))
}

#[test]
fn wal_record_corpus_replays_without_panicking() {
    for (path, data) in corpus_files("wal_record") {
        eprintln!("replaying {}", path.display());
        wal::fuzz_check(&data);
    }
}

#[test]
fn manifest_corpus_replays_without_panicking() {
    for (path, data) in corpus_files("manifest") {
        eprintln!("replaying {}", path.display());
        kvengine::manifest::fuzz_check(&data);
    }
}

#[test]
fn committed_v1_wal_seeds_still_decode() {
    let segment = seed("wal_record", "two_shards.wal");
    let decoded = decode_segment(&segment).unwrap();
    assert_eq!(decoded.end, FramesEnd::Clean);
    assert_eq!(decoded.records.len(), 9);
    let torn = seed("wal_record", "torn_last_record.wal");
    assert!(matches!(
        decode_segment(&torn).unwrap().end,
        FramesEnd::Torn { .. }
    ));
    let batch_segment = seed("wal_record", "write_batches.wal");
    let batches = decode_segment(&batch_segment).unwrap();
    assert_eq!(batches.end, FramesEnd::Clean);
    let ops: Vec<usize> = batches
        .records
        .iter()
        .map(|r| WriteBatch::decode(r.payload).unwrap().len())
        .collect();
    assert_eq!(ops, [3, 2, 0]);
    let first = WriteBatch::decode(batches.records[0].payload).unwrap();
    let deleted = first.ops().nth(2).unwrap();
    assert_eq!((deleted.key, deleted.value), (&b"t_1_r0003"[..], None));
    let corrupt = seed("wal_record", "corrupt_middle_record.wal");
    assert!(matches!(
        decode_segment(&corrupt).unwrap().end,
        FramesEnd::Corrupt { .. }
    ));
}

#[test]
fn committed_v1_manifest_seeds_still_open() {
    let open = |file: &str| {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(MANIFEST_FILE_NAME), seed("manifest", file)).unwrap();
        let m = Manifest::open(ManifestOptions::new(dir.path()));
        m.map(|m| (m.shards(), m.live_file_ids()))
    };
    let (shards, ids) = open("log.manifest").unwrap();
    assert_eq!(shards.iter().map(|s| s.id()).collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(ids.into_iter().collect::<Vec<_>>(), [103, 201, 301]);
    assert_eq!(open("rewritten.manifest").unwrap().0, shards);
    assert_eq!(open("torn_last_record.manifest").unwrap().0.len(), 3);
    assert!(open("corrupt_first_record.manifest").is_err());
}

#[test]
fn arbitrary_bytes_pass_the_fuzz_checks() {
    let inputs: [&[u8]; 7] = [
        b"",
        b"\x00",
        b"SWAL\x01\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00",
        b"SWAL\x01\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff\x00\x00\x00\x00",
        b"SMAN\x01\x00\x00\x00",
        b"SMAN\x01\x00\x00\x00\x10\x00\x00\x00",
        &[0xff; 64],
    ];
    for input in inputs {
        wal::fuzz_check(input);
        kvengine::manifest::fuzz_check(input);
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
        let wal_seeds = corpus_files("wal_record");
        let (_, data) = &wal_seeds[seed.index(wal_seeds.len())];
        wal::fuzz_check(&mutate(data.clone(), &mutations));
        let manifest_seeds = corpus_files("manifest");
        let (_, data) = &manifest_seeds[seed.index(manifest_seeds.len())];
        kvengine::manifest::fuzz_check(&mutate(data.clone(), &mutations));
    }
}
