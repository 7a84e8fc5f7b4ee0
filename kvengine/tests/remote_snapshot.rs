//! Snapshot serialization for remote execution: `from_remote(to_remote(ranges, ts))` reads at
//! ts exactly like the origin (a property test over data spread across levels, L0 files, frozen
//! and active memtables), ships only what the ranges need, and rejects bad input with typed
//! errors.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::collections::BTreeSet;
use std::sync::Arc;

use bytes::Bytes;
use changeset::{
    Change, ChangeSet, ColumnFamily, MemRowRef, MemtableDataFormat, MemtableDataWriter,
};
use kvengine::mvcc::{Lock, LockType, WriteKind, WriteMeta};
use kvengine::{
    Dfs, DfsOp, Engine, EngineOptions, Error, ErrorKind, FaultDfs, LocalDfs, RemoteSnapshot,
    SnapAccess, SyncPolicy, WriteBatch,
};
use proptest::prelude::*;

const SHARD: u64 = 1;
const KEYS: u8 = 24;

struct Fixture {
    dir: tempfile::TempDir,
    dfs: Arc<FaultDfs<LocalDfs>>,
    engine: Engine,
}

impl Fixture {
    /// An engine with small memtables, no background compaction, and an object store whose
    /// puts can be made to fail (which keeps frozen memtables from flushing).
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let dfs = Arc::new(FaultDfs::new(
            LocalDfs::open(dir.path().join("dfs")).unwrap(),
        ));
        let mut o = EngineOptions::new(dir.path().join("engine"));
        o.wal_sync = SyncPolicy::Off;
        o.memtable_size = 1024;
        o.max_frozen_memtables = 64;
        o.block_size = 256;
        o.l0_compaction_files = 100;
        o.compaction_threads = 0;
        let engine = Engine::open(o, dfs.clone()).unwrap();
        engine.create_shard(SHARD, b"", b"").unwrap();
        Fixture { dir, dfs, engine }
    }

    /// What a worker opens: the same object store, through its own handle.
    fn worker_dfs(&self) -> Arc<dyn Dfs> {
        Arc::new(LocalDfs::open(self.dir.path().join("dfs")).unwrap())
    }

    fn rebuild(&self, remote: &RemoteSnapshot) -> SnapAccess {
        // Through the wire encoding, as a worker receives it.
        let cs = changeset::decode_changeset(Bytes::from(changeset::encode_changeset(
            &remote.changeset,
        )))
        .unwrap();
        let rows = remote.memtable_data.clone();
        SnapAccess::from_remote(&cs, &rows, self.worker_dfs(), None).unwrap()
    }

    /// Keeps later memtables in memory: every flush fails until `release_flushes`.
    fn hold_flushes(&self) {
        self.dfs.fail_next(DfsOp::Put, u32::MAX);
    }

    fn release_flushes(&self) {
        self.dfs.clear();
    }

    fn write(&self, rec: &Rec) {
        let mut b = WriteBatch::new();
        let k = key(rec.key);
        match rec.kind {
            RecKind::Put(fill) => b.put(
                ColumnFamily::Write,
                &k,
                rec.version,
                &meta(WriteKind::Put, rec.version - 1, rec.version),
                &value(rec.key, rec.version, fill),
            ),
            RecKind::Delete => b.delete(
                ColumnFamily::Write,
                &k,
                rec.version,
                &meta(WriteKind::Delete, rec.version - 1, rec.version),
            ),
            RecKind::Rollback => b.put(
                ColumnFamily::Write,
                &k,
                rec.version,
                &meta(WriteKind::Rollback, rec.version, rec.version),
                b"",
            ),
            RecKind::LockRecord => b.put(
                ColumnFamily::Write,
                &k,
                rec.version,
                &meta(WriteKind::Lock, rec.version - 1, rec.version),
                b"",
            ),
        };
        self.engine.write(SHARD, &b).unwrap();
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        // Lets a retrying flush succeed so the engine shuts down promptly.
        self.release_flushes();
    }
}

fn key(k: u8) -> Vec<u8> {
    format!("key{k:03}").into_bytes()
}

fn value(k: u8, version: u64, fill: u8) -> Vec<u8> {
    format!("v{k}-{version}-{}", "x".repeat(fill as usize % 40)).into_bytes()
}

fn meta(kind: WriteKind, start_ts: u64, commit_ts: u64) -> [u8; 17] {
    WriteMeta {
        kind,
        start_ts,
        commit_ts,
    }
    .encode()
}

#[derive(Debug, Clone, Copy)]
enum RecKind {
    Put(u8),
    Delete,
    Rollback,
    LockRecord,
}

#[derive(Debug, Clone, Copy)]
struct Rec {
    key: u8,
    version: u64,
    kind: RecKind,
}

fn rec(versions: std::ops::Range<u64>) -> impl Strategy<Value = Rec> {
    let kind = prop_oneof![
        5 => any::<u8>().prop_map(RecKind::Put),
        2 => Just(RecKind::Delete),
        2 => Just(RecKind::Rollback),
        1 => Just(RecKind::LockRecord),
    ];
    (0..KEYS, versions, kind).prop_map(|(key, version, kind)| Rec { key, version, kind })
}

/// A range over key indexes: index `KEYS` as an end means unbounded, 0 as a start means the
/// very beginning (the empty key). The strategy draws a start and a length, so most ranges are
/// not empty.
fn range_bytes(a: u8, b: u8) -> (Vec<u8>, Vec<u8>) {
    let start = if a == 0 { Vec::new() } else { key(a) };
    let end = if b >= KEYS { Vec::new() } else { key(b) };
    (start, end)
}

fn in_range(k: &[u8], (s, e): &(Vec<u8>, Vec<u8>)) -> bool {
    k >= s.as_slice() && (e.is_empty() || k < e.as_slice())
}

type Row = (Vec<u8>, Vec<u8>, u64);

fn scan(snap: &SnapAccess, (s, e): &(Vec<u8>, Vec<u8>), ts: u64, reverse: bool) -> Vec<Row> {
    let mut it = snap.mvcc_scan(s, e, ts, reverse, &[]).unwrap();
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec(), it.commit_ts()));
        it.next().unwrap();
    }
    out
}

fn committed(snap: &SnapAccess, k: &[u8], ts: u64) -> Option<(Vec<u8>, u64)> {
    snap.committed_value(k, ts)
        .unwrap()
        .map(|i| (i.value.to_vec(), i.version))
}

fn snapshot_of(cs: &ChangeSet) -> &changeset::Snapshot {
    match &cs.change {
        Some(Change::Snapshot(s)) => s,
        _ => panic!("to_remote must produce a snapshot changeset"),
    }
}

fn run_round_trip(
    levels: Vec<Rec>,
    l0: Vec<Rec>,
    mems: Vec<Rec>,
    ranges: Vec<(u8, u8)>,
    ts: u64,
    format: MemtableDataFormat,
) -> Result<(), TestCaseError> {
    let f = Fixture::new();
    for r in &levels {
        f.write(r);
    }
    f.engine.flush_shard(SHARD).unwrap();
    f.engine.compact_shard(SHARD, true).unwrap();
    for r in &l0 {
        f.write(r);
    }
    f.engine.flush_shard(SHARD).unwrap();
    // The rest stays in memtables: several frozen ones (1 KiB each) and the active one.
    f.hold_flushes();
    for r in &mems {
        f.write(r);
    }
    let ranges: Vec<(Vec<u8>, Vec<u8>)> = ranges.iter().map(|&(a, b)| range_bytes(a, b)).collect();
    let origin = f.engine.snapshot(SHARD).unwrap();
    let remote = origin.to_remote_as(&ranges, ts, format).unwrap();
    let rebuilt = f.rebuild(&remote);

    for r in &ranges {
        for reverse in [false, true] {
            prop_assert_eq!(
                scan(&rebuilt, r, ts, reverse),
                scan(&origin, r, ts, reverse),
                "range={:?} ts={} reverse={}",
                r,
                ts,
                reverse
            );
        }
    }
    for k in 0..KEYS {
        let k = key(k);
        if ranges.iter().any(|r| in_range(&k, r)) {
            prop_assert_eq!(
                committed(&rebuilt, &k, ts),
                committed(&origin, &k, ts),
                "key={:?} ts={}",
                String::from_utf8_lossy(&k),
                ts
            );
        }
    }

    // Shipped bytes are bounded: only memtable versions <= ts of keys in the ranges, each
    // (key, version) once.
    let in_ranges = |k: &[u8]| ranges.iter().any(|r| in_range(k, r));
    let mem_versions: BTreeSet<(Vec<u8>, u64)> = mems
        .iter()
        .map(|r| (key(r.key), r.version))
        .filter(|(k, _)| in_ranges(k))
        .collect();
    let rows = changeset::memtable_data::decode(&remote.memtable_data.clone()).unwrap();
    prop_assert_eq!(rows.len() as u64, remote.rows);
    prop_assert!(rows.len() <= mem_versions.len());
    for row in &rows {
        prop_assert!(in_ranges(&row.key), "row outside the ranges: {:?}", row.key);
        prop_assert!(row.version <= ts, "row newer than ts: {}", row.version);
        prop_assert!(
            mem_versions.contains(&(row.key.to_vec(), row.version)),
            "row not from a memtable: {:?}@{}",
            row.key,
            row.version
        );
    }
    // A version newer than ts that the memtable ignored implies a newer one it kept.
    let newer = mems
        .iter()
        .any(|r| r.version > ts && in_ranges(&key(r.key)));
    prop_assert_eq!(remote.filtered_newer, newer);
    // Every listed file overlaps a range (files hold WRITE rows only here).
    let snap = snapshot_of(&remote.changeset);
    let overlaps = |s: &[u8], b: &[u8]| {
        ranges
            .iter()
            .any(|(rs, re)| b >= rs.as_slice() && (re.is_empty() || s < re.as_slice()))
    };
    for l0 in &snap.l0_creates {
        prop_assert!(
            overlaps(&l0.smallest, &l0.biggest),
            "l0 {} ships needlessly",
            l0.id
        );
    }
    for t in &snap.table_creates {
        prop_assert!(
            overlaps(&t.smallest, &t.biggest),
            "table {} ships needlessly",
            t.id
        );
        prop_assert_eq!(t.cf, ColumnFamily::Write.as_u32());
    }
    prop_assert_eq!(rebuilt.data_version(), None);

    // A rebuilt snapshot ships again exactly what it received: the same rows and files, in
    // either format.
    let reshipped = rebuilt.to_remote_as(&ranges, ts, format).unwrap();
    prop_assert_eq!(&reshipped.memtable_data, &remote.memtable_data);
    prop_assert_eq!(&reshipped.changeset, &remote.changeset);
    prop_assert!(!reshipped.filtered_newer);
    for other in MemtableDataFormat::ALL {
        let reshipped = rebuilt.to_remote_as(&ranges, ts, other).unwrap();
        let transcoded = changeset::memtable_data::transcode(&remote.memtable_data, other).unwrap();
        prop_assert_eq!(&reshipped.memtable_data, &transcoded, "format={}", other);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn rebuilt_snapshot_reads_like_the_origin_at_start_ts(
        levels in prop::collection::vec(rec(1..30), 0..40),
        l0 in prop::collection::vec(rec(10..45), 0..30),
        mems in prop::collection::vec(rec(20..60), 0..50),
        ranges in prop::collection::vec((0..KEYS, 0..=KEYS), 1..4)
            .prop_map(|rs| rs.into_iter().map(|(a, len)| (a, a.saturating_add(len).min(KEYS))).collect()),
        ts in 0u64..65,
        format in prop::sample::select(MemtableDataFormat::ALL.to_vec()),
    ) {
        run_round_trip(levels, l0, mems, ranges, ts, format)?;
    }
}

fn put(f: &Fixture, k: &[u8], version: u64, v: &[u8]) {
    let mut b = WriteBatch::new();
    b.put(
        ColumnFamily::Write,
        k,
        version,
        &meta(WriteKind::Put, version - 1, version),
        v,
    );
    f.engine.write(SHARD, &b).unwrap();
}

fn put_kind(f: &Fixture, k: &[u8], version: u64, kind: WriteKind) {
    let mut b = WriteBatch::new();
    b.put(
        ColumnFamily::Write,
        k,
        version,
        &meta(kind, version, version),
        b"",
    );
    f.engine.write(SHARD, &b).unwrap();
}

/// The error a rebuild, or the first full scan of what it rebuilt, fails with (a v4 blob's
/// blocks are checked when a read reaches them).
fn rebuild_err(cs: &ChangeSet, rows: &Bytes, dfs: Arc<dyn Dfs>) -> Error {
    let snap = match SnapAccess::from_remote(cs, rows, dfs, None) {
        Ok(snap) => snap,
        Err(e) => return e,
    };
    let scanned = snap
        .mvcc_scan(b"", b"", u64::MAX, false, &[])
        .and_then(|mut it| {
            while it.valid() {
                it.next()?;
            }
            Ok(())
        });
    match scanned {
        Ok(()) => panic!("rebuild and scan succeeded on bad input"),
        Err(e) => e,
    }
}

fn decoded_rows(remote: &RemoteSnapshot) -> Vec<(Vec<u8>, u64, Option<WriteKind>)> {
    changeset::memtable_data::decode(&remote.memtable_data.clone())
        .unwrap()
        .into_iter()
        .map(|r| {
            let kind = (!r.tombstone).then(|| WriteMeta::decode(&r.user_meta).unwrap().kind);
            (r.key.to_vec(), r.version, kind)
        })
        .collect()
}

#[test]
fn ranges_that_touch_no_file_ship_an_empty_file_list() {
    let f = Fixture::new();
    put(&f, b"a", 5, b"va");
    put(&f, b"m", 6, b"vm");
    f.engine.flush_shard(SHARD).unwrap();
    f.engine.compact_shard(SHARD, true).unwrap();
    put(&f, b"c", 7, b"vc");
    f.engine.flush_shard(SHARD).unwrap();
    let snap = f.engine.snapshot(SHARD).unwrap();

    let remote = snap
        .to_remote(&[(b"x".as_slice(), b"z".as_slice())], 100)
        .unwrap();
    let s = snapshot_of(&remote.changeset);
    assert!(s.l0_creates.is_empty(), "{:?}", s.l0_creates);
    assert!(s.table_creates.is_empty(), "{:?}", s.table_creates);
    assert_eq!(remote.rows, 0);
    assert!(!remote.filtered_newer);

    // Between the level file [a, m] and the L0 file [c, c]: only the level file.
    let remote = snap
        .to_remote(&[(b"d".as_slice(), b"e".as_slice())], 100)
        .unwrap();
    let s = snapshot_of(&remote.changeset);
    assert!(s.l0_creates.is_empty());
    assert_eq!(s.table_creates.len(), 1);
    // The snapshot's identity travels with the list.
    let info = f.engine.shard_info(SHARD).unwrap();
    assert_eq!(remote.changeset.shard_id, SHARD);
    assert_eq!(remote.changeset.shard_ver, info.ver);
    assert_eq!(remote.changeset.sequence, info.meta_seq);
    assert_eq!(s.data_sequence, info.data_sequence);
    assert_eq!(s.base_version, info.base_version);
}

#[test]
fn filtered_newer_reports_memtable_versions_above_start_ts_in_the_ranges() {
    let f = Fixture::new();
    put(&f, b"a", 5, b"old");
    f.engine.flush_shard(SHARD).unwrap();
    put(&f, b"a", 20, b"sst-newer");
    f.engine.flush_shard(SHARD).unwrap();
    put(&f, b"b", 5, b"b5");
    put(&f, b"b", 9, b"b9");
    put(&f, b"q", 30, b"q30");
    let snap = f.engine.snapshot(SHARD).unwrap();
    let all: &[(&[u8], &[u8])] = &[(b"", b"")];

    let r = snap.to_remote(all, 9).unwrap();
    assert!(r.filtered_newer, "q@30 is in a memtable and above 9");
    let r = snap
        .to_remote(&[(b"a".as_slice(), b"c".as_slice())], 10)
        .unwrap();
    assert!(
        !r.filtered_newer,
        "a@20 is newer but in an SST; q@30 is outside the range"
    );
    assert_eq!(
        decoded_rows(&r),
        vec![(b"b".to_vec(), 9, Some(WriteKind::Put))]
    );
    let r = snap
        .to_remote(&[(b"a".as_slice(), b"c".as_slice())], 8)
        .unwrap();
    assert!(r.filtered_newer, "b@9 is above 8");
    assert_eq!(
        decoded_rows(&r),
        vec![(b"b".to_vec(), 5, Some(WriteKind::Put))]
    );
    let r = snap.to_remote(all, 40).unwrap();
    assert!(!r.filtered_newer);
}

#[test]
fn skipped_records_ship_down_to_the_next_put_or_delete() {
    let f = Fixture::new();
    put(&f, b"k", 5, b"v5");
    put_kind(&f, b"k", 8, WriteKind::Rollback);
    put_kind(&f, b"k", 9, WriteKind::Lock);
    put(&f, b"k", 12, b"v12");
    put_kind(&f, b"r", 7, WriteKind::Rollback);
    let snap = f.engine.snapshot(SHARD).unwrap();
    let remote = snap.to_remote(&[(b"", b"")], 10).unwrap();
    assert_eq!(
        decoded_rows(&remote),
        vec![
            (b"k".to_vec(), 5, Some(WriteKind::Put)),
            (b"k".to_vec(), 8, Some(WriteKind::Rollback)),
            (b"k".to_vec(), 9, Some(WriteKind::Lock)),
            // No Put below: the SSTs (none here) would show through.
            (b"r".to_vec(), 7, Some(WriteKind::Rollback)),
        ]
    );
    assert!(remote.filtered_newer);
    let rebuilt = f.rebuild(&remote);
    assert_eq!(committed(&rebuilt, b"k", 10), Some((b"v5".to_vec(), 5)));
    assert_eq!(committed(&rebuilt, b"r", 10), None);
}

#[test]
fn memtable_delete_and_rollback_shadow_sst_versions_remotely() {
    let f = Fixture::new();
    put(&f, b"d", 3, b"d3");
    put(&f, b"r", 3, b"r3");
    put(&f, b"r", 6, b"r6");
    f.engine.flush_shard(SHARD).unwrap();
    f.engine.compact_shard(SHARD, true).unwrap();
    let mut b = WriteBatch::new();
    b.delete(ColumnFamily::Write, b"d", 7, &meta(WriteKind::Delete, 6, 7));
    f.engine.write(SHARD, &b).unwrap();
    // The rollback sits above r@6 in the memtable; the read skips it and lands on the SST.
    put_kind(&f, b"r", 8, WriteKind::Rollback);
    let origin = f.engine.snapshot(SHARD).unwrap();
    let remote = origin.to_remote(&[(b"", b"")], 10).unwrap();
    let rebuilt = f.rebuild(&remote);
    assert_eq!(committed(&rebuilt, b"d", 10), None);
    assert_eq!(committed(&rebuilt, b"r", 10), Some((b"r6".to_vec(), 6)));
    assert_eq!(committed(&origin, b"r", 10), Some((b"r6".to_vec(), 6)));
    assert_eq!(remote.rows, 2);
}

#[test]
fn unsorted_overlapping_ranges_ship_each_row_once() {
    let f = Fixture::new();
    for (i, k) in [b"a", b"b", b"c", b"d", b"e"].iter().enumerate() {
        put(&f, *k, 10 + i as u64, b"v");
    }
    let snap = f.engine.snapshot(SHARD).unwrap();
    let ranges: &[(&[u8], &[u8])] = &[(b"c", b"e"), (b"a", b"b"), (b"b", b"d"), (b"c", b"c")];
    let remote = snap.to_remote(ranges, 100).unwrap();
    let keys: Vec<Vec<u8>> = decoded_rows(&remote).into_iter().map(|r| r.0).collect();
    assert_eq!(
        keys,
        vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec(), b"d".to_vec()]
    );
}

#[test]
fn frozen_and_active_memtables_merge_with_the_newer_memtable_winning_a_tie() {
    let f = Fixture::new();
    f.hold_flushes();
    put(&f, b"k", 5, b"frozen");
    // Fill the memtable past its 1 KiB threshold so it freezes.
    for i in 0..20u64 {
        put(&f, format!("z{i:02}").as_bytes(), 1, &[0; 64]);
    }
    assert!(f.engine.shard_info(SHARD).unwrap().frozen_memtables >= 1);
    put(&f, b"k", 5, b"active");
    put(&f, b"k", 3, b"active-old");
    let origin = f.engine.snapshot(SHARD).unwrap();
    let remote = origin
        .to_remote(&[(b"k".as_slice(), b"l".as_slice())], 10)
        .unwrap();
    assert_eq!(
        decoded_rows(&remote),
        vec![(b"k".to_vec(), 5, Some(WriteKind::Put))]
    );
    let rebuilt = f.rebuild(&remote);
    assert_eq!(committed(&origin, b"k", 10), Some((b"active".to_vec(), 5)));
    assert_eq!(committed(&rebuilt, b"k", 10), Some((b"active".to_vec(), 5)));
}

#[test]
fn rebuilt_snapshot_has_no_data_version_and_no_locks() {
    let f = Fixture::new();
    put(&f, b"k", 5, b"v");
    let lock = Lock {
        lock_type: LockType::Put,
        primary: b"k".to_vec(),
        start_ts: 6,
        ttl_ms: 3000,
        min_commit_ts: 7,
        txn_size: 1,
        value: Some(b"new".to_vec()),
        secondaries: None,
    };
    let mut b = WriteBatch::new();
    b.put_lock(b"k", &lock.encode());
    f.engine.write(SHARD, &b).unwrap();
    // The lock lands in the L0 file's LOCK section, which travels with the file.
    f.engine.flush_shard(SHARD).unwrap();
    let origin = f.engine.snapshot(SHARD).unwrap();
    assert!(origin.data_version().is_some());
    let err = origin.mvcc_get(b"k", 10, &[]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::KeyIsLocked);

    let remote = origin.to_remote(&[(b"", b"")], 10).unwrap();
    assert_eq!(snapshot_of(&remote.changeset).l0_creates.len(), 1);
    let rebuilt = f.rebuild(&remote);
    assert_eq!(rebuilt.data_version(), None);
    assert_eq!(rebuilt.write_sequence(), 0);
    assert_eq!(rebuilt.lock(b"k").unwrap(), None);
    assert_eq!(
        rebuilt.mvcc_get(b"k", 10, &[]).unwrap().map(|i| i.value),
        Some(Bytes::from_static(b"v"))
    );
    assert_eq!(
        (
            rebuilt.shard_id(),
            rebuilt.ver(),
            rebuilt.start(),
            rebuilt.end()
        ),
        (SHARD, origin.ver(), origin.start(), origin.end())
    );
}

#[test]
fn non_snapshot_changeset_is_a_typed_error() {
    let f = Fixture::new();
    let cs = ChangeSet {
        shard_id: SHARD,
        shard_ver: 1,
        sequence: 3,
        properties: Default::default(),
        change: Some(Change::Flush(changeset::Flush::default())),
    };
    let empty = MemtableDataWriter::new().finish();
    let err = rebuild_err(&cs, &empty, f.worker_dfs());
    assert!(matches!(err, Error::RemoteSnapshot { .. }), "{err:?}");
    assert_eq!(err.kind(), ErrorKind::Invalid);
    assert!(err.to_string().contains("found change=flush"), "{err}");

    let none = ChangeSet { change: None, ..cs };
    let err = rebuild_err(&none, &empty, f.worker_dfs());
    assert!(err.to_string().contains("found change=none"), "{err}");
}

#[test]
fn corrupt_or_foreign_memtable_data_is_a_typed_error() {
    let f = Fixture::new();
    put(&f, b"k", 5, b"v");
    let snap = f.engine.snapshot(SHARD).unwrap();
    let remote = snap.to_remote(&[(b"", b"")], 10).unwrap();

    let mut flipped = remote.memtable_data.to_vec();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x40;
    let err = rebuild_err(&remote.changeset, &Bytes::from(flipped), f.worker_dfs());
    assert!(matches!(err, Error::RemoteMemtableData { .. }), "{err:?}");
    assert_eq!(err.kind(), ErrorKind::Corruption);

    let truncated = Bytes::copy_from_slice(&remote.memtable_data[..remote.memtable_data.len() - 1]);
    let err = rebuild_err(&remote.changeset, &truncated, f.worker_dfs());
    assert_eq!(err.kind(), ErrorKind::Corruption);

    // Well-formed data a sender following the protocol never produces: a LOCK row.
    let mut w = MemtableDataWriter::new();
    w.push(MemRowRef {
        cf: ColumnFamily::Lock,
        key: b"k",
        version: 1,
        user_meta: b"",
        value: b"lock",
        tombstone: false,
    })
    .unwrap();
    let err = rebuild_err(&remote.changeset, &w.finish(), f.worker_dfs());
    assert!(matches!(err, Error::RemoteSnapshot { .. }), "{err:?}");
    assert!(err.to_string().contains("found cf=lock"), "{err}");

    // A key repeated out of order would be dropped silently by the memtable.
    let mut w = MemtableDataWriter::new();
    for (k, v) in [(b"a", 5), (b"b", 1), (b"a", 4)] {
        w.push(MemRowRef {
            cf: ColumnFamily::Write,
            key: k,
            version: v,
            user_meta: &meta(WriteKind::Put, v - 1, v),
            value: b"x",
            tombstone: false,
        })
        .unwrap();
    }
    let err = rebuild_err(&remote.changeset, &w.finish(), f.worker_dfs());
    assert!(matches!(err, Error::RemoteSnapshot { .. }), "{err:?}");
}

#[test]
fn missing_file_in_the_object_store_fails_the_rebuild() {
    let f = Fixture::new();
    put(&f, b"k", 5, b"v");
    f.engine.flush_shard(SHARD).unwrap();
    let remote = f
        .engine
        .snapshot(SHARD)
        .unwrap()
        .to_remote(&[(b"", b"")], 10)
        .unwrap();
    let empty_store: Arc<dyn Dfs> = Arc::new(LocalDfs::open(f.dir.path().join("other")).unwrap());
    let rows = remote.memtable_data.clone();
    let err = rebuild_err(&remote.changeset, &rows, empty_store);
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err:?}");
}

#[test]
fn rebuilt_snapshot_reports_shipped_rows_newer_than_a_lower_start_ts() {
    let f = Fixture::new();
    put(&f, b"k", 5, b"v");
    let origin = f.engine.snapshot(SHARD).unwrap();
    let rebuilt = f.rebuild(&origin.to_remote(&[(b"", b"")], 10).unwrap());
    assert!(!rebuilt.newer_ts_in_range(b"", b"", 10).unwrap());
    assert!(rebuilt.newer_ts_in_range(b"", b"", 4).unwrap());
    assert!(!rebuilt.newer_ts_in_range(b"l", b"", 4).unwrap());
    assert_eq!(committed(&rebuilt, b"k", 4), None);
    assert_eq!(committed(&rebuilt, b"k", 5), Some((b"v".to_vec(), 5)));
}
