//! MVCC reads on a snapshot: lock checks, Lock/Rollback records skipped, newer-ts detection
//! (exact cases and a brute-force property), and the shard's data version.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::collections::BTreeMap;
use std::sync::Arc;

use kvengine::mvcc::{Lock, LockType, WriteKind, WriteMeta};
use kvengine::{ColumnFamily, Engine, EngineOptions, ErrorKind, LocalDfs, SyncPolicy, WriteBatch};
use proptest::prelude::*;

fn open(dir: &std::path::Path) -> Engine {
    let mut o = EngineOptions::new(dir.join("engine"));
    o.wal_sync = SyncPolicy::Off;
    o.memtable_size = 64 * 1024;
    o.block_size = 256;
    o.l0_compaction_files = 100;
    o.compaction_threads = 0;
    let dfs = Arc::new(LocalDfs::open(dir.join("dfs")).unwrap());
    let e = Engine::open(o, dfs).unwrap();
    if e.shard_ids().is_empty() {
        e.create_shard(1, b"", b"").unwrap();
    }
    e
}

fn meta(kind: WriteKind, start_ts: u64, commit_ts: u64) -> [u8; 17] {
    WriteMeta {
        kind,
        start_ts,
        commit_ts,
    }
    .encode()
}

fn commit_put(e: &Engine, key: &[u8], commit_ts: u64, value: &[u8]) {
    let mut b = WriteBatch::new();
    b.put(
        ColumnFamily::Write,
        key,
        commit_ts,
        &meta(WriteKind::Put, commit_ts - 1, commit_ts),
        value,
    );
    e.write(1, &b).unwrap();
}

fn commit_delete(e: &Engine, key: &[u8], commit_ts: u64) {
    let mut b = WriteBatch::new();
    b.delete(
        ColumnFamily::Write,
        key,
        commit_ts,
        &meta(WriteKind::Delete, commit_ts - 1, commit_ts),
    );
    e.write(1, &b).unwrap();
}

fn rollback(e: &Engine, key: &[u8], start_ts: u64) {
    let mut b = WriteBatch::new();
    b.put(
        ColumnFamily::Write,
        key,
        start_ts,
        &meta(WriteKind::Rollback, start_ts, start_ts),
        b"",
    );
    e.write(1, &b).unwrap();
}

fn lock(lock_type: LockType, start_ts: u64, min_commit_ts: u64) -> Lock {
    Lock {
        lock_type,
        primary: b"p".to_vec(),
        start_ts,
        ttl_ms: 3000,
        min_commit_ts,
        txn_size: 1,
        value: Some(b"locked".to_vec()),
        secondaries: None,
    }
}

fn put_lock(e: &Engine, key: &[u8], l: &Lock) {
    let mut b = WriteBatch::new();
    b.put_lock(key, &l.encode());
    e.write(1, &b).unwrap();
}

/// (key, commit_ts, value) rows of a scan.
type Rows = Vec<(Vec<u8>, u64, Vec<u8>)>;

/// key -> version -> (kind, value).
type Model = BTreeMap<Vec<u8>, BTreeMap<u64, (WriteKind, Vec<u8>)>>;

fn scan(e: &Engine, ts: u64, reverse: bool) -> (Rows, bool) {
    let snap = e.snapshot(1).unwrap();
    let mut s = snap.mvcc_scan(b"", b"", ts, reverse, &[]).unwrap();
    let mut out = Vec::new();
    while s.valid() {
        out.push((s.key().to_vec(), s.commit_ts(), s.value().to_vec()));
        s.next().unwrap();
    }
    let newer = s.met_newer_ts_data().unwrap();
    (out, newer)
}

#[test]
fn blocking_lock_fails_get_and_scan_with_full_lock_info() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(dir.path());
    commit_put(&e, b"a", 10, b"v10");
    put_lock(&e, b"a", &lock(LockType::Put, 20, 21));
    let snap = e.snapshot(1).unwrap();
    let err = snap.mvcc_get(b"a", 30, &[]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::KeyIsLocked);
    match err {
        kvengine::Error::KeyIsLocked { lock } => {
            assert_eq!(lock.key, b"a");
            assert_eq!(lock.primary, b"p");
            assert_eq!(lock.start_ts, 20);
            assert_eq!(lock.min_commit_ts, 21);
            assert_eq!(lock.ttl_ms, 3000);
        }
        other => panic!("expected KeyIsLocked, found {other}"),
    }
    let err = snap.mvcc_scan(b"", b"", 30, false, &[]).err().unwrap();
    assert_eq!(err.kind(), ErrorKind::KeyIsLocked);
}

#[test]
fn locks_a_read_may_ignore_are_ignored_but_make_the_scan_uncacheable() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(dir.path());
    commit_put(&e, b"a", 10, b"v10");
    commit_put(&e, b"b", 10, b"v10");
    commit_put(&e, b"c", 10, b"v10");
    commit_put(&e, b"d", 10, b"v10");
    // Newer than the read; min_commit_ts above the read; a Lock-type lock; a bypassed one.
    put_lock(&e, b"a", &lock(LockType::Put, 40, 41));
    put_lock(&e, b"b", &lock(LockType::Put, 20, 31));
    put_lock(&e, b"c", &lock(LockType::Lock, 20, 21));
    put_lock(&e, b"d", &lock(LockType::Delete, 25, 26));
    let snap = e.snapshot(1).unwrap();
    for k in [b"a", b"b", b"c"] {
        assert_eq!(snap.mvcc_get(k, 30, &[]).unwrap().unwrap().value, "v10");
    }
    assert_eq!(
        snap.mvcc_get(b"d", 30, &[]).unwrap_err().kind(),
        ErrorKind::KeyIsLocked
    );
    assert_eq!(
        snap.mvcc_get(b"d", 30, &[25]).unwrap().unwrap().value,
        "v10"
    );
    let mut s = snap.mvcc_scan(b"", b"", 30, false, &[25]).unwrap();
    let mut n = 0;
    while s.valid() {
        n += 1;
        s.next().unwrap();
    }
    assert_eq!(n, 4);
    assert!(
        s.met_newer_ts_data().unwrap(),
        "a lock in range means newer data"
    );
}

#[test]
fn rollback_and_lock_records_are_skipped_even_when_they_shadow_sst_versions() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(dir.path());
    commit_put(&e, b"a", 10, b"a10");
    commit_put(&e, b"b", 10, b"b10");
    e.flush_shard(1).unwrap();
    rollback(&e, b"a", 15);
    let mut b = WriteBatch::new();
    b.put(
        ColumnFamily::Write,
        b"b",
        16,
        &meta(WriteKind::Lock, 14, 16),
        b"",
    );
    e.write(1, &b).unwrap();
    // Only a rollback record: the key does not exist.
    rollback(&e, b"c", 12);
    let snap = e.snapshot(1).unwrap();
    assert_eq!(snap.mvcc_get(b"a", 20, &[]).unwrap().unwrap().version, 10);
    assert_eq!(snap.mvcc_get(b"b", 20, &[]).unwrap().unwrap().version, 10);
    assert_eq!(snap.mvcc_get(b"c", 20, &[]).unwrap(), None);
    for reverse in [false, true] {
        let (rows, _) = scan(&e, 20, reverse);
        let mut keys: Vec<_> = rows.iter().map(|r| (r.0.clone(), r.1)).collect();
        if reverse {
            keys.reverse();
        }
        assert_eq!(keys, vec![(b"a".to_vec(), 10), (b"b".to_vec(), 10)]);
    }
}

#[test]
fn newer_ts_detection_exact_cases() {
    // Nothing newer.
    let dir = tempfile::tempdir().unwrap();
    let e = open(dir.path());
    commit_put(&e, b"a", 10, b"v");
    commit_put(&e, b"b", 10, b"v");
    assert!(!scan(&e, 20, false).1);
    assert!(!scan(&e, 20, true).1);
    // Newer commit in the memtable.
    commit_put(&e, b"b", 30, b"v30");
    assert!(scan(&e, 20, false).1);
    assert!(scan(&e, 20, true).1);
    // ... in an L0 file.
    e.flush_shard(1).unwrap();
    assert_eq!(e.shard_info(1).unwrap().l0_files, 1);
    assert!(scan(&e, 20, false).1);
    // ... in a level.
    e.compact_shard(1, true).unwrap();
    let info = e.shard_info(1).unwrap();
    assert_eq!(info.l0_files, 0);
    assert!(scan(&e, 20, false).1);
    assert!(!scan(&e, 30, false).1, "at ts 30 nothing is newer");
    // A newer delete counts too.
    commit_delete(&e, b"a", 40);
    assert!(scan(&e, 35, false).1);
    // A lock on a scanned key.
    let dir2 = tempfile::tempdir().unwrap();
    let e2 = open(dir2.path());
    commit_put(&e2, b"a", 10, b"v");
    put_lock(&e2, b"a", &lock(LockType::Put, 50, 51));
    assert!(scan(&e2, 20, false).1);
}

#[test]
fn newer_ts_detection_only_looks_at_the_scanned_span() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(dir.path());
    for i in 0..10u8 {
        commit_put(&e, &[b'k', i], 10, b"v");
    }
    commit_put(&e, &[b'k', 9], 30, b"newer");
    let snap = e.snapshot(1).unwrap();
    let mut s = snap.mvcc_scan(b"", b"", 20, false, &[]).unwrap();
    for _ in 0..5 {
        s.next().unwrap();
    }
    assert!(
        !s.met_newer_ts_data().unwrap(),
        "k9 is beyond the scanned span"
    );
    while s.valid() {
        s.next().unwrap();
    }
    assert!(s.met_newer_ts_data().unwrap());
    // Reverse: starting from k9 it is met at once.
    let s = snap.mvcc_scan(b"", b"", 20, true, &[]).unwrap();
    assert!(s.met_newer_ts_data().unwrap());
}

#[test]
fn data_version_changes_on_writes_only_and_never_repeats_across_split() {
    let dir = tempfile::tempdir().unwrap();
    let mut seen = Vec::new();
    {
        let e = open(dir.path());
        let v0 = e.snapshot(1).unwrap().data_version().unwrap();
        commit_put(&e, b"a", 10, b"v");
        let v1 = e.snapshot(1).unwrap().data_version().unwrap();
        assert_ne!(v0, v1);
        commit_put(&e, b"m", 11, b"v");
        let v2 = e.snapshot(1).unwrap().data_version().unwrap();
        assert!(v2 > v1);
        e.flush_shard(1).unwrap();
        assert_eq!(e.snapshot(1).unwrap().data_version().unwrap(), v2);
        e.compact_shard(1, true).unwrap();
        assert_eq!(e.snapshot(1).unwrap().data_version().unwrap(), v2);
        seen.extend([v0, v1, v2]);
        e.close(false).unwrap();
    }
    let e = open(dir.path());
    let v = e.snapshot(1).unwrap().data_version().unwrap();
    assert_eq!(v, seen[2], "reopen keeps the data version");
    e.split(1, b"h", 2, 3).unwrap();
    for child in [2, 3] {
        let cv = e.snapshot(child).unwrap().data_version().unwrap();
        assert!(cv > v, "child {child} version {cv} must exceed parent {v}");
        seen.push(cv);
    }
    let mut b = WriteBatch::new();
    b.put(
        ColumnFamily::Write,
        b"x",
        20,
        &meta(WriteKind::Put, 19, 20),
        b"v",
    );
    e.write(3, &b).unwrap();
    seen.push(e.snapshot(3).unwrap().data_version().unwrap());
    // Every version recorded after a change is new for its shard lineage.
    let lineage3: Vec<u64> = vec![seen[0], seen[1], seen[2], seen[4], seen[5]];
    let mut sorted = lineage3.clone();
    sorted.dedup();
    assert_eq!(sorted.len(), lineage3.len(), "{lineage3:?}");
    assert!(lineage3.windows(2).all(|w| w[0] < w[1]), "{lineage3:?}");
}

/// One generated operation on the model.
#[derive(Debug, Clone)]
enum Op {
    Put(u8, u64),
    Delete(u8, u64),
    Rollback(u8, u64),
    LockRecord(u8, u64),
    Lock(u8, u64),
    Flush,
    Compact,
}

fn op() -> impl Strategy<Value = Op> {
    op_over(24)
}

/// Operations on `keys` distinct keys.
fn op_over(keys: u8) -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..keys, 1u64..60).prop_map(|(k, v)| Op::Put(k, v)),
        2 => (0..keys, 1u64..60).prop_map(|(k, v)| Op::Delete(k, v)),
        2 => (0..keys, 1u64..60).prop_map(|(k, v)| Op::Rollback(k, v)),
        1 => (0..keys, 1u64..60).prop_map(|(k, v)| Op::LockRecord(k, v)),
        1 => (0..keys, 1u64..60).prop_map(|(k, v)| Op::Lock(k, v)),
        1 => Just(Op::Flush),
        1 => Just(Op::Compact),
    ]
}

fn key(k: u8) -> Vec<u8> {
    format!("key{k:02}").into_bytes()
}

/// Applies `ops` to the engine and returns the model they build: key -> version -> (kind,
/// value), and the locks written.
fn apply(e: &Engine, ops: Vec<Op>) -> (Model, BTreeMap<Vec<u8>, Lock>) {
    // key -> version -> (kind, value); the memtable ignores non-newer versions per
    // memtable, so the model applies the same rule on the newest version only while the
    // key's newest lives in the same memtable. Simplest exact model: only accept
    // versions newer than the key's newest one anywhere.
    let mut model: Model = BTreeMap::new();
    let mut locks: BTreeMap<Vec<u8>, Lock> = BTreeMap::new();
    for op in ops {
        let (k, v, kind) = match op {
            Op::Put(k, v) => (k, v, WriteKind::Put),
            Op::Delete(k, v) => (k, v, WriteKind::Delete),
            Op::Rollback(k, v) => (k, v, WriteKind::Rollback),
            Op::LockRecord(k, v) => (k, v, WriteKind::Lock),
            Op::Lock(k, v) => {
                // Locks with min_commit_ts above every read ts never block.
                let l = lock(LockType::Put, v, 1000);
                put_lock(e, &key(k), &l);
                locks.insert(key(k), l);
                continue;
            }
            Op::Flush => {
                e.flush_shard(1).unwrap();
                continue;
            }
            Op::Compact => {
                e.flush_shard(1).unwrap();
                e.compact_shard(1, true).unwrap();
                continue;
            }
        };
        let versions = model.entry(key(k)).or_default();
        if versions
            .last_key_value()
            .is_some_and(|(newest, _)| *newest >= v)
        {
            continue;
        }
        let value = format!("{k}-{v}").into_bytes();
        let mut b = WriteBatch::new();
        let m = meta(kind, v.saturating_sub(1), v);
        match kind {
            WriteKind::Delete => {
                b.delete(ColumnFamily::Write, &key(k), v, &m);
            }
            WriteKind::Put => {
                b.put(ColumnFamily::Write, &key(k), v, &m, &value);
            }
            _ => {
                b.put(ColumnFamily::Write, &key(k), v, &m, b"");
            }
        }
        e.write(1, &b).unwrap();
        versions.insert(v, (kind, value));
    }
    (model, locks)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// `fill` (block at a time wherever a run is possible) hands out exactly the rows the
    /// row-at-a-time cursor visits, page by page, leaves the scanner on the row the cursor is
    /// on after as many rows, and counts the same scanned keys and last key: over memtable,
    /// L0 and level rows mixed, tombstones, Lock and Rollback records, old versions, locks (that
    /// do not block), many 256-byte blocks, both directions.
    #[test]
    fn fill_in_pages_visits_what_the_row_cursor_visits(
        ops in prop::collection::vec(op_over(200), 1..400),
        ts in 1u64..64,
        lo in 0u8..200,
        len in 1u8..=255,
        reverse in any::<bool>(),
        pages in prop::collection::vec(1usize..40, 1..8),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let e = open(dir.path());
        apply(&e, ops);
        let lower = key(lo);
        let upper = key(lo.saturating_add(len));
        let snap = e.snapshot(1).unwrap();
        let mut cursor = snap.mvcc_scan(&lower, &upper, ts, reverse, &[]).unwrap();
        let mut want = Vec::new();
        while cursor.valid() {
            want.push((cursor.key().to_vec(), cursor.value().to_vec()));
            cursor.next().unwrap();
        }
        let mut s = snap.mvcc_scan(&lower, &upper, ts, reverse, &[]).unwrap();
        let mut got = Vec::new();
        for page in pages.iter().cycle() {
            let n = s
                .fill(*page, |k, v| -> Result<(), kvengine::Error> {
                    got.push((k.to_vec(), v.to_vec()));
                    Ok(())
                })
                .unwrap();
            prop_assert!(n <= *page);
            prop_assert_eq!(got.len(), want.len().min(got.len()));
            // The last row handed out is what a caller resumes after.
            prop_assert_eq!(s.last_emitted(), got.last().map(|(k, _)| k.as_slice()));
            // The scanner sits on the row after the page, as the cursor would.
            match want.get(got.len()) {
                Some((k, v)) => {
                    prop_assert!(s.valid());
                    prop_assert_eq!((s.key(), s.value()), (k.as_slice(), v.as_slice()));
                    prop_assert_eq!(n, *page, "a page ends early only at the end");
                }
                None => prop_assert!(!s.valid()),
            }
            if !s.valid() {
                break;
            }
        }
        prop_assert_eq!(&got, &want);
        prop_assert_eq!(s.scanned_keys(), cursor.scanned_keys());
        prop_assert_eq!(s.last_key(), cursor.last_key());
    }

    /// Scans equal a model, and whenever met_newer_ts_data is false no version newer than
    /// start_ts and no lock exists on any key of the scanned span (checked by brute force).
    #[test]
    fn scan_matches_model_and_newer_ts_false_is_exact(
        ops in prop::collection::vec(op(), 1..80),
        ts in 1u64..64,
        lo in 0u8..24,
        len in 1u8..24,
        stop_after in 0usize..30,
        reverse in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let e = open(dir.path());
        let (model, locks) = apply(&e, ops);
        let lower = key(lo);
        let upper = key(lo.saturating_add(len));
        let snap = e.snapshot(1).unwrap();
        let mut s = snap.mvcc_scan(&lower, &upper, ts, reverse, &[]).unwrap();
        let mut got = Vec::new();
        while s.valid() && got.len() < stop_after {
            got.push((s.key().to_vec(), s.commit_ts(), s.value().to_vec()));
            s.next().unwrap();
        }
        let mut want: Rows = model
            .range(lower.clone()..upper.clone())
            .filter_map(|(k, versions)| {
                versions
                    .range(..=ts)
                    .rev()
                    .find(|(_, (kind, _))| !kind.is_skipped_by_reads())
                    .and_then(|(v, (kind, value))| {
                        (*kind == WriteKind::Put).then(|| (k.clone(), *v, value.clone()))
                    })
            })
            .collect();
        if reverse {
            want.reverse();
        }
        want.truncate(stop_after);
        prop_assert_eq!(&got, &want);
        if !s.met_newer_ts_data().unwrap() {
            // The scanned span: up to the current position, or the whole range at the end.
            let span = |k: &Vec<u8>| {
                if k < &lower || k >= &upper {
                    return false;
                }
                match (s.valid(), s.last_key()) {
                    (true, Some(last)) if reverse => k.as_slice() >= last,
                    (true, Some(last)) => k.as_slice() <= last,
                    _ => true,
                }
            };
            for (k, versions) in &model {
                if span(k) {
                    prop_assert!(
                        versions.keys().all(|v| *v <= ts),
                        "met_newer_ts_data false but {:?} has {:?} > {}", k, versions.keys(), ts
                    );
                    prop_assert!(snap.get_raw(ColumnFamily::Write, k, u64::MAX).unwrap().is_none_or(|v| v.version <= ts));
                }
            }
            for k in locks.keys() {
                prop_assert!(!span(k), "met_newer_ts_data false but {:?} is locked", k);
            }
        }
    }
}
