//! Replays the `lock_record` and `write_meta` fuzz corpora as ordinary tests, so an input that
//! once crashed a decoder stays fixed. The seeds are committed (written by
//! `examples/mvcc_record_fuzz_seeds.rs`); a missing corpus is a failure, not a skip. The
//! undamaged seeds double as format-version-1 fixtures that must keep decoding.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use kvengine::mvcc::fuzzing::{lock_record_check, write_meta_check};
use kvengine::mvcc::{Lock, LockType, WriteKind, WriteMeta};
use proptest::prelude::*;

#[path = "../../fuzz/replay_support.rs"]
mod replay_support;
use replay_support::*;

fn seed(name: &str, file: &str) -> Vec<u8> {
    std::fs::read(corpus(name).join(file)).unwrap_or_else(|e| panic!("seed {file}: {e}"))
}

#[test]
fn lock_record_corpus_replays_without_panicking() {
    for (path, data) in corpus_files("lock_record") {
        eprintln!("replaying {}", path.display());
        lock_record_check(&data);
    }
}

#[test]
fn write_meta_corpus_replays_without_panicking() {
    for (path, data) in corpus_files("write_meta") {
        eprintln!("replaying {}", path.display());
        write_meta_check(&data);
    }
}

#[test]
fn committed_v1_lock_seeds_still_decode() {
    let put = Lock::decode(&seed("lock_record", "put_2pc.lock")).unwrap();
    assert_eq!(put.lock_type, LockType::Put);
    assert_eq!(put.primary, b"t_1_r0001");
    assert_eq!(put.start_ts, 400_000 << 18);
    assert_eq!(put.min_commit_ts, (400_000 << 18) + 1);
    assert_eq!(put.ttl_ms, 3000);
    assert_eq!(put.value.as_deref(), Some(b"row value 1".as_slice()));
    assert!(put.secondaries.is_none());

    let delete = Lock::decode(&seed("lock_record", "delete_2pc.lock")).unwrap();
    assert_eq!((delete.lock_type, delete.value), (LockType::Delete, None));
    let lock = Lock::decode(&seed("lock_record", "lock_type_lock.lock")).unwrap();
    assert_eq!(lock.lock_type, LockType::Lock);
    let pessimistic = Lock::decode(&seed("lock_record", "pessimistic.lock")).unwrap();
    assert_eq!(pessimistic.lock_type, LockType::Pessimistic);
    let primary = Lock::decode(&seed("lock_record", "async_commit_primary.lock")).unwrap();
    assert_eq!(
        primary.secondaries,
        Some(vec![b"t_1_r0002".to_vec(), b"t_1_r0003".to_vec()])
    );
    let none = Lock::decode(&seed("lock_record", "async_commit_no_secondaries.lock")).unwrap();
    assert_eq!(none.secondaries, Some(Vec::new()));
    assert_eq!(none.value, Some(Vec::new()));
    let empty = Lock::decode(&seed("lock_record", "empty_primary.lock")).unwrap();
    assert!(empty.primary.is_empty());

    for damaged in [
        "truncated_half_put_2pc.lock",
        "truncated_last_async_commit_primary.lock",
        "unknown_version.lock",
        "unknown_type.lock",
        "unknown_flags.lock",
        "trailing_byte.lock",
        "huge_secondary_count.lock",
    ] {
        let err = Lock::decode(&seed("lock_record", damaged)).unwrap_err();
        assert_eq!(err.what, "lock", "{damaged}: {err}");
    }
}

#[test]
fn committed_v1_write_meta_seeds_still_decode() {
    let ts = 400_000u64 << 18;
    for (file, kind, commit_ts) in [
        ("put.meta", WriteKind::Put, ts + 5),
        ("delete.meta", WriteKind::Delete, ts + 5),
        ("lock.meta", WriteKind::Lock, ts + 5),
        ("rollback.meta", WriteKind::Rollback, ts),
    ] {
        let meta = WriteMeta::decode(&seed("write_meta", file)).unwrap();
        assert_eq!(
            meta,
            WriteMeta {
                kind,
                start_ts: ts,
                commit_ts
            },
            "{file}"
        );
    }
    for damaged in [
        "truncated.meta",
        "kind_only.meta",
        "trailing_byte.meta",
        "unknown_kind.meta",
    ] {
        assert!(
            WriteMeta::decode(&seed("write_meta", damaged)).is_err(),
            "{damaged}"
        );
    }
}

#[test]
fn arbitrary_bytes_pass_the_fuzz_checks() {
    let inputs: [&[u8]; 6] = [
        b"",
        b"\x00",
        b"\x01\x00\x00",
        &[0x01; 39],
        &[0xff; 64],
        &[0x00; 17],
    ];
    for input in inputs {
        lock_record_check(input);
        write_meta_check(input);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// A cheap stand-in for the fuzzer in ordinary test runs: mutated seeds never panic and
    /// whatever still decodes re-encodes to itself.
    #[test]
    fn mutated_seeds_pass_the_fuzz_checks(
        seed in any::<prop::sample::Index>(),
        mutations in prop::collection::vec(mutation(), 1..4),
    ) {
        let lock_seeds = corpus_files("lock_record");
        let (_, data) = &lock_seeds[seed.index(lock_seeds.len())];
        lock_record_check(&mutate(data.clone(), &mutations));
        let meta_seeds = corpus_files("write_meta");
        let (_, data) = &meta_seeds[seed.index(meta_seeds.len())];
        write_meta_check(&mutate(data.clone(), &mutations));
    }
}
