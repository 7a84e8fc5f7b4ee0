//! Exact cases for every rule of the transaction commands: prewrite, commit, rollback (WRITE
//! record and EXTRA marker), check_txn_status, check_secondary_locks, resolve_lock, scan_locks,
//! 1PC, async commit, and data spread over two shards.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

mod common;

use common::{cluster, one_shard, two_shards};
use kvengine::ColumnFamily;
use kvengine::mvcc::{LockType, WriteKind, WriteMeta};
use server::txn::{
    CommitStage, Mode, Mutation, PrewriteRequest, PrewriteResponse, Storage, TxnError,
    TxnErrorKind, TxnStatus,
};
use types::Ts;

const TTL: u64 = 1000;

fn prewrite(
    s: &Storage,
    muts: Vec<Mutation>,
    start_ts: u64,
) -> server::txn::Result<PrewriteResponse> {
    s.prewrite(&PrewriteRequest::new(muts, start_ts, TTL))
}

fn async_prewrite(
    s: &Storage,
    muts: Vec<Mutation>,
    primary: &[u8],
    secondaries: &[&[u8]],
    start_ts: u64,
) -> server::txn::Result<PrewriteResponse> {
    let mut req = PrewriteRequest::new(muts, start_ts, TTL);
    req.primary = primary.to_vec();
    req.use_async_commit = true;
    req.secondaries = secondaries.iter().map(|k| k.to_vec()).collect();
    s.prewrite(&req)
}

fn keys(ks: &[&[u8]]) -> Vec<Vec<u8>> {
    ks.iter().map(|k| k.to_vec()).collect()
}

fn value_at(s: &Storage, key: &[u8], ts: u64) -> Option<Vec<u8>> {
    s.get(key, ts, &[]).unwrap().map(|e| e.value)
}

/// Writes `key = value` committed at `commit_ts` through prewrite + commit.
fn committed(s: &Storage, key: &[u8], value: &[u8], start_ts: u64, commit_ts: u64) {
    prewrite(s, vec![Mutation::put(key, value)], start_ts).unwrap();
    s.commit(&keys(&[key]), start_ts, commit_ts).unwrap();
}

fn write_meta_at(s: &Storage, key: &[u8], version: u64) -> Option<(WriteMeta, bool)> {
    let shard = s.shard_for_key(key).unwrap();
    let snap = s.engine().snapshot(shard).unwrap();
    snap.write_versions_since(key, version)
        .unwrap()
        .into_iter()
        .find(|v| v.version == version)
        .map(|v| (WriteMeta::decode(&v.user_meta).unwrap(), v.tombstone))
}

// ---- prewrite ----

#[test]
fn prewrite_on_a_key_locked_by_another_txn_fails_with_the_full_lock_info() {
    let c = one_shard(false);
    let s = &c.storage;
    prewrite(
        s,
        vec![Mutation::put("pk", "1"), Mutation::put("k", "1")],
        10,
    )
    .unwrap();
    let err = prewrite(s, vec![Mutation::put("k", "2")], 20).unwrap_err();
    let TxnError::KeyIsLocked(info) = err else {
        panic!("expected KeyIsLocked, found {err:?}");
    };
    assert_eq!(info.key, b"k");
    assert_eq!(info.primary, b"pk");
    assert_eq!(info.start_ts, 10);
    assert_eq!(info.ttl_ms, TTL);
    assert_eq!(info.lock_type, LockType::Put);
    assert_eq!(info.txn_size, 2);
    assert_eq!(info.min_commit_ts, 11);
    assert!(!info.use_async_commit);
}

#[test]
fn failed_prewrite_writes_no_lock_for_any_key() {
    let c = one_shard(false);
    let s = &c.storage;
    prewrite(s, vec![Mutation::put("b", "1")], 10).unwrap();
    let err = prewrite(
        s,
        vec![Mutation::put("a", "2"), Mutation::put("b", "2")],
        20,
    )
    .unwrap_err();
    assert!(matches!(err, TxnError::KeyIsLocked(_)), "{err:?}");
    assert!(
        s.scan_locks(b"", b"", u64::MAX, 0)
            .unwrap()
            .iter()
            .all(|l| l.key != b"a")
    );
}

#[test]
fn prewrite_below_a_newer_commit_is_a_write_conflict() {
    let c = one_shard(false);
    let s = &c.storage;
    committed(s, b"k", b"v1", 10, 30);
    let err = prewrite(s, vec![Mutation::put("k", "v2")], 20).unwrap_err();
    match err {
        TxnError::WriteConflict {
            key,
            start_ts,
            conflict_start_ts,
            conflict_commit_ts,
        } => {
            assert_eq!(key, b"k");
            assert_eq!(start_ts, 20);
            assert_eq!(conflict_start_ts, 10);
            assert_eq!(conflict_commit_ts, 30);
        }
        other => panic!("expected WriteConflict, found {other:?}"),
    }
}

#[test]
fn prewrite_at_a_start_ts_equal_to_another_commit_ts_is_not_a_conflict() {
    let c = one_shard(false);
    let s = &c.storage;
    committed(s, b"k", b"v1", 10, 30);
    // The commit at 30 is in the snapshot at 30: not concurrent with a transaction starting
    // there.
    assert_eq!(value_at(s, b"k", 30), Some(b"v1".to_vec()));
    prewrite(s, vec![Mutation::put("k", "v2")], 30).unwrap();
    // Rolling it back cannot put a record at 30 (taken): the marker goes to EXTRA.
    s.rollback(&keys(&[b"k"]), 30).unwrap();
    let (meta, _) = write_meta_at(s, b"k", 30).unwrap();
    assert_eq!(
        (meta.kind, meta.start_ts),
        (WriteKind::Put, 10),
        "the commit at 30 survives"
    );
    assert_eq!(value_at(s, b"k", 30), Some(b"v1".to_vec()));
    let err = prewrite(s, vec![Mutation::put("k", "v2")], 30).unwrap_err();
    assert!(
        matches!(err, TxnError::TxnAlreadyRolledBack { start_ts: 30, .. }),
        "{err:?}"
    );
    let err = s.commit(&keys(&[b"k"]), 30, 40).unwrap_err();
    assert!(
        matches!(err, TxnError::TxnAlreadyRolledBack { start_ts: 30, .. }),
        "{err:?}"
    );
}

#[test]
fn prewrite_at_a_start_ts_equal_to_another_commit_ts_commits_above_it() {
    let c = one_shard(false);
    let s = &c.storage;
    committed(s, b"k", b"v1", 10, 30);
    prewrite(s, vec![Mutation::put("k", "v2")], 30).unwrap();
    s.commit(&keys(&[b"k"]), 30, 31).unwrap();
    assert_eq!(value_at(s, b"k", 30), Some(b"v1".to_vec()));
    assert_eq!(value_at(s, b"k", 31), Some(b"v2".to_vec()));
}

#[test]
fn retried_prewrite_is_idempotent_and_reports_the_same_min_commit_ts() {
    let c = one_shard(false);
    let s = &c.storage;
    let first = prewrite(s, vec![Mutation::put("k", "v")], 10).unwrap();
    s.concurrency_manager().update_max_ts(500);
    let again = prewrite(s, vec![Mutation::put("k", "v")], 10).unwrap();
    assert_eq!(again.min_commit_ts, first.min_commit_ts);
    assert_eq!(first.min_commit_ts, 11);
}

#[test]
fn prewrite_min_commit_ts_is_above_max_ts() {
    let c = one_shard(false);
    let s = &c.storage;
    // A read at 100 raises max_ts.
    assert_eq!(value_at(s, b"k", 100), None);
    let r = prewrite(s, vec![Mutation::put("k", "v")], 10).unwrap();
    assert_eq!(r.min_commit_ts, 101);
    let err = s.commit(&keys(&[b"k"]), 10, 100).unwrap_err();
    assert!(
        matches!(
            err,
            TxnError::CommitTsExpired {
                commit_ts: 100,
                min_commit_ts: 101,
                ..
            }
        ),
        "{err:?}"
    );
    s.commit(&keys(&[b"k"]), 10, 101).unwrap();
    // The read at 100 stays repeatable.
    assert_eq!(value_at(s, b"k", 100), None);
    assert_eq!(value_at(s, b"k", 101), Some(b"v".to_vec()));
}

#[test]
fn prewrite_naming_a_key_twice_is_an_invalid_request() {
    let c = one_shard(false);
    let err = prewrite(
        &c.storage,
        vec![Mutation::put("k", "1"), Mutation::put("k", "2")],
        10,
    )
    .unwrap_err();
    assert!(err.to_string().contains("expected each key once"), "{err}");
}

#[test]
fn key_outside_every_shard_is_a_typed_error() {
    let c = cluster(&[(1, b"a", b"m")], false);
    let err = prewrite(&c.storage, vec![Mutation::put("z", "1")], 10).unwrap_err();
    assert!(
        matches!(err, TxnError::KeyOutsideShards { ref key } if key == b"z"),
        "{err:?}"
    );
    // A shard created later is found.
    c.create_region(2, b"m", b"");
    prewrite(&c.storage, vec![Mutation::put("z", "1")], 10).unwrap();
}

// ---- commit ----

#[test]
fn commit_writes_the_value_at_commit_ts_with_write_meta_and_removes_the_lock() {
    let c = one_shard(false);
    let s = &c.storage;
    committed(s, b"k", b"v", 10, 20);
    assert_eq!(value_at(s, b"k", 19), None);
    let e = s.get(b"k", 20, &[]).unwrap().unwrap();
    assert_eq!((e.value.as_slice(), e.commit_ts), (b"v".as_slice(), 20));
    let (meta, tombstone) = write_meta_at(s, b"k", 20).unwrap();
    assert_eq!(
        meta,
        WriteMeta {
            kind: WriteKind::Put,
            start_ts: 10,
            commit_ts: 20
        }
    );
    assert!(!tombstone);
    assert!(s.scan_locks(b"", b"", u64::MAX, 0).unwrap().is_empty());
}

#[test]
fn commit_twice_is_idempotent() {
    let c = one_shard(false);
    let s = &c.storage;
    committed(s, b"k", b"v", 10, 20);
    s.commit(&keys(&[b"k"]), 10, 20).unwrap();
    assert_eq!(value_at(s, b"k", 25), Some(b"v".to_vec()));
}

#[test]
fn commit_after_rollback_fails_with_already_rolled_back() {
    let c = one_shard(false);
    let s = &c.storage;
    prewrite(s, vec![Mutation::put("k", "v")], 10).unwrap();
    s.rollback(&keys(&[b"k"]), 10).unwrap();
    let err = s.commit(&keys(&[b"k"]), 10, 20).unwrap_err();
    assert!(
        matches!(err, TxnError::TxnAlreadyRolledBack { start_ts: 10, .. }),
        "{err:?}"
    );
    assert_eq!(value_at(s, b"k", 30), None);
}

#[test]
fn commit_without_prewrite_fails_with_lock_not_found() {
    let c = one_shard(false);
    let err = c.storage.commit(&keys(&[b"k"]), 10, 20).unwrap_err();
    assert!(
        matches!(err, TxnError::TxnLockNotFound { start_ts: 10, .. }),
        "{err:?}"
    );
}

#[test]
fn delete_commits_a_tombstone_and_lock_commits_a_record_reads_skip() {
    let c = one_shard(false);
    let s = &c.storage;
    committed(s, b"d", b"old", 1, 2);
    committed(s, b"l", b"kept", 1, 2);
    prewrite(s, vec![Mutation::delete("d"), Mutation::lock("l")], 10).unwrap();
    s.commit(&keys(&[b"d", b"l"]), 10, 20).unwrap();
    assert_eq!(value_at(s, b"d", 19), Some(b"old".to_vec()));
    assert_eq!(value_at(s, b"d", 20), None);
    let (meta, tombstone) = write_meta_at(s, b"d", 20).unwrap();
    assert_eq!((meta.kind, tombstone), (WriteKind::Delete, true));
    // The Lock record is skipped: the value committed at 2 stays visible.
    let e = s.get(b"l", 30, &[]).unwrap().unwrap();
    assert_eq!((e.value.as_slice(), e.commit_ts), (b"kept".as_slice(), 2));
    assert_eq!(write_meta_at(s, b"l", 20).unwrap().0.kind, WriteKind::Lock);
}

#[test]
fn commit_over_an_existing_record_at_commit_ts_is_detected() {
    let c = one_shard(false);
    let s = &c.storage;
    prewrite(s, vec![Mutation::put("k", "v")], 10).unwrap();
    // Something the rules never produce: a record of another transaction at exactly 20.
    let mut b = kvengine::WriteBatch::new();
    let meta = WriteMeta {
        kind: WriteKind::Put,
        start_ts: 15,
        commit_ts: 20,
    };
    b.put(ColumnFamily::Write, b"k", 20, &meta.encode(), b"other");
    s.router()
        .write(1, None, &b, std::time::Duration::from_secs(10))
        .unwrap();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        s.commit(&keys(&[b"k"]), 10, 20)
    }));
    if cfg!(debug_assertions) {
        assert!(r.is_err(), "debug builds assert");
    } else {
        let err = r.unwrap().unwrap_err();
        assert!(
            matches!(
                err,
                TxnError::CommitTsCollision {
                    found_version: 20,
                    found_start_ts: 15,
                    ..
                }
            ),
            "{err:?}"
        );
    }
    // Our lock is still there: nothing was written.
    assert_eq!(s.scan_locks(b"", b"", u64::MAX, 0).unwrap().len(), 1);
}

// ---- rollback ----

#[test]
fn late_prewrite_after_a_rollback_record_fails() {
    let c = one_shard(false);
    let s = &c.storage;
    // The prewrite never arrived; the rollback comes first and leaves a WRITE record.
    s.rollback(&keys(&[b"k"]), 10).unwrap();
    let (meta, _) = write_meta_at(s, b"k", 10).unwrap();
    assert_eq!(meta.kind, WriteKind::Rollback);
    let err = prewrite(s, vec![Mutation::put("k", "v")], 10).unwrap_err();
    assert!(
        matches!(err, TxnError::TxnAlreadyRolledBack { start_ts: 10, .. }),
        "{err:?}"
    );
}

#[test]
fn rollback_beside_another_txns_lock_goes_to_extra_and_that_txn_can_commit_at_the_same_ts() {
    let c = one_shard(false);
    let s = &c.storage;
    committed(s, b"k", b"v0", 1, 2);
    // A (start 50) holds the lock; B (start 60) is rolled back on the same key.
    prewrite(s, vec![Mutation::put("k", "a")], 50).unwrap();
    s.rollback(&keys(&[b"k"]), 60).unwrap();
    assert!(
        write_meta_at(s, b"k", 60).is_none(),
        "no WRITE record at 60"
    );
    // A commits at exactly B's start_ts: its record must not be lost.
    s.commit(&keys(&[b"k"]), 50, 60).unwrap();
    let e = s.get(b"k", 60, &[]).unwrap().unwrap();
    assert_eq!((e.value.as_slice(), e.commit_ts), (b"a".as_slice(), 60));
    // B stays rolled back, for commit and for a late prewrite.
    let err = s.commit(&keys(&[b"k"]), 60, 70).unwrap_err();
    assert!(
        matches!(err, TxnError::TxnAlreadyRolledBack { start_ts: 60, .. }),
        "{err:?}"
    );
    let err = prewrite(s, vec![Mutation::put("k", "b")], 60).unwrap_err();
    assert!(
        matches!(err, TxnError::TxnAlreadyRolledBack { start_ts: 60, .. }),
        "{err:?}"
    );
}

#[test]
fn late_prewrite_after_a_rollback_marker_fails_even_when_no_newer_write_exists() {
    let c = one_shard(false);
    let s = &c.storage;
    // A (start 50) holds the lock while B (start 60) is rolled back: the marker goes to
    // EXTRA. Then A rolls back too: the newest WRITE version (A's rollback at 50) is below
    // 60, so only the marker stops B's late prewrite.
    prewrite(s, vec![Mutation::put("k", "a")], 50).unwrap();
    s.rollback(&keys(&[b"k"]), 60).unwrap();
    s.rollback(&keys(&[b"k"]), 50).unwrap();
    let err = prewrite(s, vec![Mutation::put("k", "b")], 60).unwrap_err();
    assert!(
        matches!(err, TxnError::TxnAlreadyRolledBack { start_ts: 60, .. }),
        "{err:?}"
    );
}

#[test]
fn rollback_markers_arriving_newest_first_are_all_kept() {
    let c = one_shard(false);
    let s = &c.storage;
    prewrite(s, vec![Mutation::put("k", "a")], 10).unwrap();
    // The memtable ignores a version older than a key's newest; markers must survive that.
    for start_ts in [80, 70, 60] {
        s.rollback(&keys(&[b"k"]), start_ts).unwrap();
    }
    s.rollback(&keys(&[b"k"]), 10).unwrap();
    for start_ts in [60, 70, 80] {
        let err = prewrite(s, vec![Mutation::put("k", "b")], start_ts).unwrap_err();
        assert!(
            matches!(err, TxnError::TxnAlreadyRolledBack { .. }),
            "start_ts {start_ts}: {err:?}"
        );
    }
    // 65 was never rolled back.
    prewrite(s, vec![Mutation::put("k", "b")], 65).unwrap();
}

#[test]
fn rollback_markers_survive_a_flush_and_compaction() {
    let c = one_shard(false);
    let s = &c.storage;
    prewrite(s, vec![Mutation::put("k", "a")], 10).unwrap();
    s.rollback(&keys(&[b"k"]), 70).unwrap();
    s.engine().flush_shard(1).unwrap();
    s.rollback(&keys(&[b"k"]), 60).unwrap();
    s.engine().flush_shard(1).unwrap();
    s.engine().compact_shard(1, true).unwrap();
    s.rollback(&keys(&[b"k"]), 10).unwrap();
    for start_ts in [60, 70] {
        let err = s.commit(&keys(&[b"k"]), start_ts, 100).unwrap_err();
        assert!(
            matches!(err, TxnError::TxnAlreadyRolledBack { .. }),
            "{start_ts}: {err:?}"
        );
    }
}

#[test]
fn rollback_of_a_committed_txn_fails_with_already_committed() {
    let c = one_shard(false);
    let s = &c.storage;
    committed(s, b"k", b"v", 10, 20);
    let err = s.rollback(&keys(&[b"k"]), 10).unwrap_err();
    assert!(
        matches!(
            err,
            TxnError::TxnAlreadyCommitted {
                start_ts: 10,
                commit_ts: 20,
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn rollback_raises_max_ts_to_the_rolled_back_start_ts() {
    let c = one_shard(false);
    let s = &c.storage;
    s.rollback(&keys(&[b"k"]), 77).unwrap();
    assert!(s.concurrency_manager().max_ts() >= 77);
}

#[test]
fn rollback_twice_is_idempotent() {
    let c = one_shard(false);
    let s = &c.storage;
    prewrite(s, vec![Mutation::put("k", "v")], 10).unwrap();
    s.rollback(&keys(&[b"k"]), 10).unwrap();
    s.rollback(&keys(&[b"k"]), 10).unwrap();
    assert!(s.scan_locks(b"", b"", u64::MAX, 0).unwrap().is_empty());
}

// ---- check_txn_status ----

#[test]
fn check_txn_status_reports_locked_until_the_ttl_then_rolls_back_a_2pc_primary() {
    let c = one_shard(false);
    let s = &c.storage;
    let start = Ts::compose(1_000_000, 0).get();
    prewrite(
        s,
        vec![Mutation::put("pk", "v"), Mutation::put("sk", "v")],
        start,
    )
    .unwrap();
    let before = Ts::compose(1_000_000 + TTL - 1, 5).get();
    match s.check_txn_status(b"pk", start, 0, before, true).unwrap() {
        TxnStatus::Locked { lock, ttl_expired } => {
            assert!(!ttl_expired);
            assert_eq!(lock.start_ts, start);
            assert_eq!(lock.value.as_deref(), Some(b"v".as_slice()));
        }
        other => panic!("expected Locked, found {other:?}"),
    }
    let after = Ts::compose(1_000_000 + TTL, 0).get();
    assert_eq!(
        s.check_txn_status(b"pk", start, 0, after, true).unwrap(),
        TxnStatus::RolledBack
    );
    // The primary is rolled back: the transaction can no longer commit.
    let err = s.commit(&keys(&[b"pk"]), start, after).unwrap_err();
    assert!(
        matches!(err, TxnError::TxnAlreadyRolledBack { .. }),
        "{err:?}"
    );
    assert_eq!(
        s.check_txn_status(b"pk", start, 0, after, true).unwrap(),
        TxnStatus::RolledBack
    );
}

#[test]
fn check_txn_status_on_an_expired_async_primary_returns_the_lock_with_its_secondaries() {
    let c = one_shard(false);
    let s = &c.storage;
    let start = Ts::compose(1_000_000, 0).get();
    async_prewrite(
        s,
        vec![Mutation::put("pk", "v"), Mutation::put("s1", "v")],
        b"pk",
        &[b"s1", b"s2"],
        start,
    )
    .unwrap();
    let after = Ts::compose(1_000_000 + TTL + 1, 0).get();
    match s.check_txn_status(b"pk", start, 0, after, true).unwrap() {
        TxnStatus::Locked { lock, ttl_expired } => {
            assert!(ttl_expired);
            assert_eq!(lock.secondaries, Some(keys(&[b"s1", b"s2"])));
        }
        other => panic!("expected Locked, found {other:?}"),
    }
    // Not rolled back: the lock is still there.
    assert_eq!(s.scan_locks(b"pk", b"pl", u64::MAX, 0).unwrap().len(), 1);
}

#[test]
fn check_txn_status_reports_committed_with_the_commit_ts() {
    let c = one_shard(false);
    let s = &c.storage;
    committed(s, b"pk", b"v", 10, 20);
    assert_eq!(
        s.check_txn_status(b"pk", 10, 0, 30, true).unwrap(),
        TxnStatus::Committed { commit_ts: 20 }
    );
}

#[test]
fn check_txn_status_without_a_lock_rolls_back_only_when_asked() {
    let c = one_shard(false);
    let s = &c.storage;
    assert_eq!(
        s.check_txn_status(b"pk", 10, 0, 30, false).unwrap(),
        TxnStatus::LockNotExist
    );
    // The prewrite could still land...
    assert_eq!(
        s.check_txn_status(b"pk", 10, 0, 30, true).unwrap(),
        TxnStatus::LockNotExistRolledBack
    );
    // ...but not any more.
    let err = prewrite(s, vec![Mutation::put("pk", "v")], 10).unwrap_err();
    assert!(
        matches!(err, TxnError::TxnAlreadyRolledBack { .. }),
        "{err:?}"
    );
    assert_eq!(
        s.check_txn_status(b"pk", 10, 0, 30, false).unwrap(),
        TxnStatus::RolledBack
    );
}

#[test]
fn check_txn_status_raises_max_ts_to_the_caller_start_ts() {
    let c = one_shard(false);
    let s = &c.storage;
    prewrite(s, vec![Mutation::put("pk", "v")], 10).unwrap();
    s.check_txn_status(b"pk", 10, 900, 11, false).unwrap();
    assert!(s.concurrency_manager().max_ts() >= 900);
    let r = prewrite(s, vec![Mutation::put("other", "v")], 20).unwrap();
    assert_eq!(r.min_commit_ts, 901);
}

// ---- check_secondary_locks ----

#[test]
fn check_secondary_locks_when_all_locked_reports_the_max_min_commit_ts() {
    let c = two_shards(false);
    c.sync_max_ts();
    let b = c.ts();
    let s = &c.storage;
    let r1 = async_prewrite(s, vec![Mutation::put("a", "1")], b"a", &[b"x"], b + 10).unwrap();
    // A read raises max_ts on the way: the second prewrite gets a higher min_commit_ts.
    assert_eq!(value_at(s, b"q", b + 500), None);
    let r2 = async_prewrite(s, vec![Mutation::put("x", "1")], b"a", &[], b + 10).unwrap();
    assert_eq!((r1.min_commit_ts, r2.min_commit_ts), (b + 11, b + 501));
    let st = s.check_secondary_locks(&keys(&[b"x"]), b + 10).unwrap();
    assert!(st.all_locked);
    assert_eq!(st.commit_ts, None);
    assert_eq!(st.min_commit_ts, b + 501);
}

#[test]
fn check_secondary_locks_rolls_back_a_missing_key_so_its_prewrite_can_never_land() {
    let c = one_shard(false);
    let s = &c.storage;
    async_prewrite(s, vec![Mutation::put("a", "1")], b"a", &[b"b", b"c"], 10).unwrap();
    async_prewrite(s, vec![Mutation::put("b", "1")], b"a", &[], 10).unwrap();
    let st = s.check_secondary_locks(&keys(&[b"b", b"c"]), 10).unwrap();
    assert!(!st.all_locked);
    assert_eq!(st.commit_ts, None);
    let err = async_prewrite(s, vec![Mutation::put("c", "1")], b"a", &[], 10).unwrap_err();
    assert!(
        matches!(err, TxnError::TxnAlreadyRolledBack { .. }),
        "{err:?}"
    );
}

#[test]
fn check_secondary_locks_reports_a_commit_record() {
    let c = one_shard(false);
    c.sync_max_ts();
    let b = c.ts();
    let s = &c.storage;
    async_prewrite(
        s,
        vec![Mutation::put("a", "1"), Mutation::put("b", "1")],
        b"a",
        &[b"b"],
        b + 10,
    )
    .unwrap();
    s.commit(&keys(&[b"b"]), b + 10, b + 15).unwrap();
    let st = s.check_secondary_locks(&keys(&[b"b"]), b + 10).unwrap();
    assert_eq!(st.commit_ts, Some(b + 15));
}

// ---- resolve_lock and scan_locks ----

#[test]
fn resolve_lock_in_range_commits_every_lock_of_the_txn_and_nothing_else() {
    let c = two_shards(false);
    let s = &c.storage;
    prewrite(
        s,
        vec![
            Mutation::put("a", "1"),
            Mutation::put("n", "1"),
            Mutation::put("z", "1"),
        ],
        10,
    )
    .unwrap();
    prewrite(s, vec![Mutation::put("b", "2")], 12).unwrap();
    let n = s.resolve_lock_in_range(b"", b"", 10, 20).unwrap();
    assert_eq!(n, 3);
    let left = s.scan_locks(b"", b"", u64::MAX, 0).unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(
        (left[0].key.as_slice(), left[0].start_ts),
        (b"b".as_slice(), 12)
    );
    for k in [b"a", b"n", b"z"] {
        assert_eq!(value_at(s, k, 20), Some(b"1".to_vec()));
        assert_eq!(value_at(s, k, 19), None);
    }
}

#[test]
fn resolve_lock_in_range_rolls_back_only_inside_the_range() {
    let c = two_shards(false);
    let s = &c.storage;
    prewrite(
        s,
        vec![
            Mutation::put("a", "1"),
            Mutation::put("n", "1"),
            Mutation::put("z", "1"),
        ],
        10,
    )
    .unwrap();
    assert_eq!(s.resolve_lock_in_range(b"", b"y", 10, 0).unwrap(), 2);
    let left = s.scan_locks(b"", b"", u64::MAX, 0).unwrap();
    assert_eq!(
        left.iter().map(|l| l.key.clone()).collect::<Vec<_>>(),
        keys(&[b"z"])
    );
    for k in [b"a", b"n"] {
        let err = s.commit(&keys(&[k]), 10, 20).unwrap_err();
        assert!(
            matches!(err, TxnError::TxnAlreadyRolledBack { .. }),
            "{err:?}"
        );
    }
}

#[test]
fn scan_locks_filters_by_max_ts_and_stops_at_the_limit() {
    let c = two_shards(false);
    let s = &c.storage;
    prewrite(
        s,
        vec![Mutation::put("a", "1"), Mutation::put("p", "1")],
        10,
    )
    .unwrap();
    prewrite(
        s,
        vec![Mutation::put("b", "1"), Mutation::put("q", "1")],
        30,
    )
    .unwrap();
    let all = s.scan_locks(b"", b"", u64::MAX, 0).unwrap();
    assert_eq!(
        all.iter().map(|l| l.key.clone()).collect::<Vec<_>>(),
        keys(&[b"a", b"b", b"p", b"q"])
    );
    let old = s.scan_locks(b"", b"", 20, 0).unwrap();
    assert_eq!(
        old.iter().map(|l| l.key.clone()).collect::<Vec<_>>(),
        keys(&[b"a", b"p"])
    );
    assert_eq!(s.scan_locks(b"", b"", u64::MAX, 3).unwrap().len(), 3);
}

// ---- reads ----

#[test]
fn a_read_below_min_commit_ts_ignores_the_lock_and_one_above_meets_it() {
    let c = one_shard(false);
    let s = &c.storage;
    committed(s, b"k", b"old", 1, 2);
    assert_eq!(value_at(s, b"k", 50), Some(b"old".to_vec()));
    let r = prewrite(s, vec![Mutation::put("k", "new")], 10).unwrap();
    assert_eq!(r.min_commit_ts, 51);
    assert_eq!(value_at(s, b"k", 50), Some(b"old".to_vec()));
    let err = s.get(b"k", 51, &[]).unwrap_err();
    assert!(
        matches!(err, TxnError::KeyIsLocked(ref l) if l.start_ts == 10),
        "{err:?}"
    );
    // Bypassing the transaction reads past it.
    assert_eq!(s.get(b"k", 51, &[10]).unwrap().unwrap().value, b"old");
    let err = s.scan(b"", b"", 0, 51, false).unwrap_err();
    assert!(matches!(err, TxnError::KeyIsLocked(_)), "{err:?}");
}

// ---- 1PC and async commit ----

#[test]
fn one_pc_is_visible_at_its_commit_ts_and_not_before() {
    let c = one_shard(false);
    c.sync_max_ts();
    let b = c.ts();
    let s = &c.storage;
    let mut req = PrewriteRequest::new(
        vec![Mutation::put("a", "1"), Mutation::put("b", "2")],
        b + 10,
        TTL,
    );
    req.try_one_pc = true;
    assert_eq!(value_at(s, b"a", b + 40), None);
    let r = s.prewrite(&req).unwrap();
    assert_eq!(r.one_pc_commit_ts, Some(b + 41));
    assert_eq!(r.min_commit_ts, b + 41);
    assert!(
        s.scan_locks(b"", b"", u64::MAX, 0).unwrap().is_empty(),
        "1PC leaves no lock"
    );
    assert_eq!(value_at(s, b"a", b + 40), None);
    let got = s.scan(b"", b"", 0, b + 41, false).unwrap();
    assert_eq!(got.len(), 2);
    assert!(got.iter().all(|e| e.commit_ts == b + 41));
    assert_eq!(write_meta_at(s, b"b", b + 41).unwrap().0.start_ts, b + 10);
}

/// A 1PC prewrite whose commit ts would pass the caller's `max_commit_ts` (a statement past
/// its schema lease) locks its keys instead of committing, and one within it commits.
#[test]
fn one_pc_past_max_commit_ts_writes_locks_instead() {
    let c = one_shard(false);
    c.sync_max_ts();
    let b = c.ts();
    let s = &c.storage;
    let mut req = PrewriteRequest::new(vec![Mutation::put("a", "1")], b + 10, TTL);
    req.try_one_pc = true;
    req.max_commit_ts = b + 40;
    // A read at b + 40 puts the commit ts of a 1PC at b + 41.
    assert_eq!(value_at(s, b"a", b + 40), None);
    let r = s.prewrite(&req).unwrap();
    assert_eq!(r.one_pc_commit_ts, None);
    assert_eq!(r.min_commit_ts, b + 41);
    assert_eq!(s.scan_locks(b"", b"", u64::MAX, 0).unwrap().len(), 1);

    let mut req = PrewriteRequest::new(vec![Mutation::put("b", "2")], b + 50, TTL);
    req.try_one_pc = true;
    req.max_commit_ts = b + 51;
    let r = s.prewrite(&req).unwrap();
    assert_eq!(r.one_pc_commit_ts, Some(b + 51));
}

#[test]
fn async_commit_past_max_commit_ts_is_refused_and_locks_nothing() {
    let c = one_shard(false);
    c.sync_max_ts();
    let b = c.ts();
    let s = &c.storage;
    let async_prewrite = |key: &str, start_ts: u64, max_commit_ts: u64| {
        let mut req = PrewriteRequest::new(vec![Mutation::put(key, "1")], start_ts, TTL);
        req.use_async_commit = true;
        req.secondaries = vec![b"other".to_vec()];
        req.max_commit_ts = max_commit_ts;
        s.prewrite(&req)
    };
    // A read at b + 40 puts the min_commit_ts of a new lock at b + 41.
    assert_eq!(value_at(s, b"a", b + 40), None);
    let err = async_prewrite("a", b + 10, b + 40).unwrap_err();
    assert_eq!(err.kind(), TxnErrorKind::CommitTsTooLarge, "{err}");
    assert!(err.to_string().contains("max_commit_ts"), "{err}");
    assert!(s.scan_locks(b"", b"", u64::MAX, 0).unwrap().is_empty());
    // At the bound it locks, async.
    let r = async_prewrite("a", b + 10, b + 41).unwrap();
    assert_eq!(r.min_commit_ts, b + 41);
    let locks = s.scan_locks(b"", b"", u64::MAX, 0).unwrap();
    assert_eq!(locks.len(), 1);
    assert!(locks[0].use_async_commit, "an async-commit lock");
}

#[test]
fn one_pc_across_shards_falls_back_to_locks() {
    let c = two_shards(false);
    let s = &c.storage;
    let mut req = PrewriteRequest::new(
        vec![Mutation::put("a", "1"), Mutation::put("z", "2")],
        10,
        TTL,
    );
    req.try_one_pc = true;
    let r = s.prewrite(&req).unwrap();
    assert_eq!(r.one_pc_commit_ts, None);
    assert_eq!(s.scan_locks(b"", b"", u64::MAX, 0).unwrap().len(), 2);
}

#[test]
fn coordinator_one_pc_commits_without_locks_and_falls_back_to_2pc_across_shards() {
    let c = two_shards(false);
    let mut t = c.client.begin().unwrap();
    t.set("a", "1");
    t.set("b", "2");
    let done = t.commit(Mode::OnePc).unwrap();
    assert_eq!(done.mode, Mode::OnePc);
    assert_eq!(
        c.client.get(b"b", done.commit_ts).unwrap(),
        Some(b"2".to_vec())
    );
    assert_eq!(c.client.get(b"b", done.commit_ts - 1).unwrap(), None);

    let mut t = c.client.begin().unwrap();
    t.set("a", "3");
    t.set("z", "4");
    let done = t.commit(Mode::OnePc).unwrap();
    assert_eq!(done.mode, Mode::TwoPc);
    let ts = c.ts();
    assert_eq!(c.client.get(b"z", ts).unwrap(), Some(b"4".to_vec()));
    assert!(
        c.storage
            .scan_locks(b"", b"", u64::MAX, 0)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn async_commit_ts_is_the_max_min_commit_ts_and_above_every_earlier_read() {
    let c = two_shards(false);
    c.sync_max_ts();
    let mut t = c.client.begin().unwrap();
    t.set("a", "1");
    t.set("z", "2");
    // A reader starts after the transaction and reads one of its keys.
    let read_ts = c.ts();
    assert_eq!(c.client.get(b"z", read_ts).unwrap(), None);
    let done = t.commit(Mode::AsyncCommit).unwrap();
    assert_eq!(done.mode, Mode::AsyncCommit);
    assert!(
        done.commit_ts > read_ts,
        "commit {} <= read {read_ts}",
        done.commit_ts
    );
    assert_eq!(
        done.commit_ts,
        read_ts + 1,
        "max_ts + 1 with max_ts = the read's start_ts"
    );
    // The read stays repeatable; the commit is visible at its commit_ts.
    assert_eq!(c.client.get(b"z", read_ts).unwrap(), None);
    assert_eq!(
        c.client.get(b"a", done.commit_ts).unwrap(),
        Some(b"1".to_vec())
    );
    assert_eq!(
        c.client.get(b"z", done.commit_ts).unwrap(),
        Some(b"2".to_vec())
    );
}

#[test]
fn data_written_over_two_shards_lands_in_each_shard_and_reads_as_one() {
    let c = two_shards(false);
    let mut t = c.client.begin().unwrap();
    for k in ["a", "f", "m", "q"] {
        t.set(k, format!("v{k}"));
    }
    let done = t.commit(Mode::TwoPc).unwrap();
    for (shard, key) in [(1, b"a"), (1, b"f"), (2, b"m"), (2, b"q")] {
        let snap = c.engine().snapshot(shard).unwrap();
        assert!(
            snap.committed_value(key, done.commit_ts).unwrap().is_some(),
            "{key:?} in {shard}"
        );
    }
    let got = c.client.scan(b"", b"", 0, done.commit_ts).unwrap();
    let ks: Vec<_> = got.iter().map(|e| e.key.clone()).collect();
    assert_eq!(ks, keys(&[b"a", b"f", b"m", b"q"]));
    let rev = c.storage.scan(b"", b"", 3, done.commit_ts, true).unwrap();
    let ks: Vec<_> = rev.iter().map(|e| e.key.clone()).collect();
    assert_eq!(ks, keys(&[b"q", b"m", b"f"]));
}

// ---- lock resolution by readers ----

#[test]
fn reader_rolls_back_an_abandoned_2pc_txn_once_its_ttl_expired() {
    let c = cluster(&[(1, b"", b"")], true);
    let mut t = c.client.begin().unwrap();
    t.set("a", "1");
    t.set("b", "1");
    let ab = t
        .commit_stopping_after(Mode::TwoPc, CommitStage::Prewritten)
        .unwrap();
    assert_eq!(ab.committed_at, None);
    c.advance_ms(c.client.options().lock_ttl_ms);
    let ts = c.ts();
    assert_eq!(c.client.get(b"b", ts).unwrap(), None);
    // The primary is rolled back; the lock on "a" goes when a reader meets it.
    assert_eq!(c.client.get(b"a", ts).unwrap(), None);
    assert!(
        c.storage
            .scan_locks(b"", b"", u64::MAX, 0)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn reader_waits_for_a_live_lock_then_times_out() {
    let opts = server::txn::ClientOptions {
        lock_wait_timeout: std::time::Duration::from_millis(50),
        ..Default::default()
    };
    let c = common::cluster_with(&[(1, b"", b"")], true, opts);
    let mut t = c.client.begin().unwrap();
    t.set("a", "1");
    t.commit_stopping_after(Mode::TwoPc, CommitStage::Prewritten)
        .unwrap();
    let err = c.client.get(b"a", c.ts()).unwrap_err();
    assert!(matches!(err, TxnError::LockWaitTimeout { .. }), "{err:?}");
}

#[test]
fn reader_commits_the_secondaries_of_a_txn_whose_primary_committed() {
    let c = two_shards(false);
    let mut t = c.client.begin().unwrap();
    t.set("a", "1");
    t.set("z", "2");
    let ab = t
        .commit_stopping_after(Mode::TwoPc, CommitStage::PrimaryCommitted)
        .unwrap();
    let commit_ts = ab.committed_at.unwrap();
    let ts = c.ts();
    let e = c.client.get_entry(b"z", ts).unwrap().unwrap();
    assert_eq!(
        (e.value.as_slice(), e.commit_ts),
        (b"2".as_slice(), commit_ts)
    );
    assert!(
        c.storage
            .scan_locks(b"", b"", u64::MAX, 0)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn reader_commits_an_abandoned_async_txn_whose_keys_are_all_locked() {
    let c = cluster(&[(1, b"", b"m"), (2, b"m", b"")], true);
    let mut t = c.client.begin().unwrap();
    t.set("a", "1");
    t.set("z", "2");
    let ab = t
        .commit_stopping_after(Mode::AsyncCommit, CommitStage::Prewritten)
        .unwrap();
    let commit_ts = ab.committed_at.unwrap();
    c.advance_ms(c.client.options().lock_ttl_ms);
    let got = c.client.scan(b"", b"", 0, c.ts()).unwrap();
    assert_eq!(got.len(), 2);
    assert!(got.iter().all(|e| e.commit_ts == commit_ts), "{got:?}");
    assert!(
        c.storage
            .scan_locks(b"", b"", u64::MAX, 0)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn reader_rolls_back_an_async_txn_with_a_secondary_never_prewritten() {
    let c = cluster(&[(1, b"", b"")], true);
    let s = &c.storage;
    let start = c.ts();
    // The primary lists "b", but b's prewrite never arrived.
    async_prewrite(s, vec![Mutation::put("a", "1")], b"a", &[b"b"], start).unwrap();
    c.advance_ms(TTL);
    assert_eq!(c.client.get(b"a", c.ts()).unwrap(), None);
    let err = async_prewrite(s, vec![Mutation::put("b", "1")], b"a", &[], start).unwrap_err();
    assert!(
        matches!(err, TxnError::TxnAlreadyRolledBack { .. }),
        "{err:?}"
    );
    let err = s.commit(&keys(&[b"a"]), start, start + 10).unwrap_err();
    assert!(
        matches!(err, TxnError::TxnAlreadyRolledBack { .. }),
        "{err:?}"
    );
}

#[test]
fn resolve_locks_in_range_finishes_every_abandoned_txn() {
    let c = cluster(&[(1, b"", b"m"), (2, b"m", b"")], true);
    let mut expect = Vec::new();
    for (i, (mode, stage)) in [
        (Mode::TwoPc, CommitStage::Prewritten),
        (Mode::TwoPc, CommitStage::PrimaryCommitted),
        (Mode::AsyncCommit, CommitStage::Prewritten),
        (Mode::AsyncCommit, CommitStage::PrimaryCommitted),
    ]
    .into_iter()
    .enumerate()
    {
        let mut t = c.client.begin().unwrap();
        let (k1, k2) = (format!("a{i}"), format!("z{i}"));
        t.set(k1.clone(), "v");
        t.set(k2.clone(), "v");
        let ab = t.commit_stopping_after(mode, stage).unwrap();
        expect.push((k1, k2, ab.committed_at));
    }
    c.advance_ms(c.client.options().lock_ttl_ms);
    let n = c
        .client
        .resolve_locks_in_range(b"", b"", std::time::Duration::from_secs(5))
        .unwrap();
    assert!(n >= 4, "resolved {n}");
    assert!(
        c.storage
            .scan_locks(b"", b"", u64::MAX, 0)
            .unwrap()
            .is_empty()
    );
    let ts = c.ts();
    for (k1, k2, committed_at) in expect {
        for k in [k1, k2] {
            let got = c.storage.get(k.as_bytes(), ts, &[]).unwrap();
            assert_eq!(got.map(|e| e.commit_ts), committed_at, "{k}");
        }
    }
}

/// A new leader does not know the reads an earlier leader (on another server) served, which
/// raised that server's `max_ts`; an async-commit prewrite must still commit above them. So
/// the first write of a term raises `max_ts` to a fresh TSO timestamp.
#[test]
fn the_first_write_of_a_leaders_term_raises_max_ts_above_every_earlier_timestamp() {
    let c = one_shard(false);
    let cm = c.storage.concurrency_manager().clone();
    let before = c.ts();
    assert!(cm.max_ts() < before, "max_ts starts below the TSO");
    let start_ts = c.ts();
    let resp = async_prewrite(
        &c.storage,
        vec![Mutation::put(b"k".to_vec(), b"v".to_vec())],
        b"k",
        &[],
        start_ts,
    )
    .unwrap();
    let synced = cm.max_ts();
    assert!(
        synced > start_ts,
        "max_ts {synced} was not raised from the TSO (start_ts {start_ts})"
    );
    assert!(
        resp.min_commit_ts > synced,
        "min_commit_ts {} not above the synced max_ts {synced}",
        resp.min_commit_ts
    );
    // Once per term: a second write does not ask the TSO again.
    let again = c.ts();
    async_prewrite(
        &c.storage,
        vec![Mutation::put(b"k2".to_vec(), b"v".to_vec())],
        b"k2",
        &[],
        again,
    )
    .unwrap();
    assert!(cm.max_ts() < again, "max_ts synced twice in one term");
}

// ---- region epochs ----

/// A split that applies between a prewrite's checks (its snapshot) and its Raft entry moves
/// the prewrite's key to another region: the entry carries the epoch its snapshot had, so
/// apply refuses it (`EpochNotMatch`, which the client retries on the new region) instead of
/// writing a key its region no longer holds, and nothing is left behind.
#[test]
fn a_prewrite_whose_region_split_after_its_checks_fails_with_epoch_not_match_and_writes_nothing() {
    let c = one_shard(false);
    let s = c.storage.clone();
    let ver = s.engine().snapshot(1).unwrap().ver();
    let router = s.router().clone();
    let split_done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let once = split_done.clone();
    s.set_prewrite_hook(Some(Box::new(move |_point| {
        if !once.swap(true, std::sync::atomic::Ordering::SeqCst) {
            router
                .split(1, ver, b"m", 2, std::time::Duration::from_secs(10))
                .unwrap();
        }
    })));
    let err = prewrite(&s, vec![Mutation::put(b"x", b"v")], c.ts()).unwrap_err();
    s.set_prewrite_hook(None);
    assert!(split_done.load(std::sync::atomic::Ordering::SeqCst));
    assert!(
        matches!(
            err,
            TxnError::Raft(raftstore::RaftStoreError::EpochNotMatch { region_id: 1, .. })
        ),
        "{err:?}"
    );
    s.refresh_shards().unwrap();
    assert_eq!(s.shard_for_key(b"x").unwrap(), 2);
    s.raft()
        .wait_for_leaders(&[2], std::time::Duration::from_secs(10))
        .unwrap();
    // No lock was left on the key: another transaction prewrites it at once.
    let later = c.ts();
    prewrite(&s, vec![Mutation::put(b"x", b"w")], later).unwrap();
    s.commit(&keys(&[b"x"]), later, c.ts()).unwrap();
    assert_eq!(value_at(&s, b"x", c.ts()), Some(b"w".to_vec()));
}

// ---- GC safe point ----

#[test]
fn reads_and_prewrites_below_the_gc_safe_point_are_refused_with_both_timestamps() {
    let c = one_shard(false);
    let s = &c.storage;
    committed(s, b"k", b"old", 10, 20);
    committed(s, b"k", b"new", 30, 40);
    s.engine().set_gc_safe_point(35);
    for result in [
        s.get(b"k", 34, &[]).map(|_| ()),
        s.scan(b"", b"", 0, 34, false).map(|_| ()),
        prewrite(s, vec![Mutation::put("other", "v")], 34).map(|_| ()),
    ] {
        let err = result.unwrap_err();
        assert!(
            matches!(
                err,
                TxnError::BelowGcSafePoint {
                    ts: 34,
                    safe_point: 35
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("35"), "{err}");
    }
    // At and above it nothing changes.
    assert_eq!(value_at(s, b"k", 35), Some(b"old".to_vec()));
    assert_eq!(value_at(s, b"k", 40), Some(b"new".to_vec()));
    assert_eq!(s.scan(b"", b"", 0, 40, false).unwrap().len(), 1);
    prewrite(s, vec![Mutation::put("other", "v")], 50).unwrap();
}

#[test]
fn the_oldest_lock_is_reported_across_shards_and_goes_with_its_resolution() {
    let c = two_shards(false);
    let s = &c.storage;
    assert_eq!(s.oldest_lock_ts().unwrap(), None);
    prewrite(s, vec![Mutation::put("a", "1")], 70).unwrap();
    prewrite(s, vec![Mutation::put("z", "1")], 60).unwrap();
    assert_ne!(
        s.shard_for_key(b"a").unwrap(),
        s.shard_for_key(b"z").unwrap(),
        "the locks must be in two shards"
    );
    assert_eq!(s.oldest_lock_ts().unwrap(), Some(60));
    s.commit(&keys(&[b"z"]), 60, 80).unwrap();
    assert_eq!(s.oldest_lock_ts().unwrap(), Some(70));
    s.rollback(&keys(&[b"a"]), 70).unwrap();
    assert_eq!(s.oldest_lock_ts().unwrap(), None);
}
