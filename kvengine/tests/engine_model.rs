//! Model test: random writes, deletes, lock writes, reads and scans at random timestamps,
//! interleaved with flushes, compactions, splits, snapshots read later, and close/reopen,
//! against a BTreeMap oracle. After every step, the live state of every shard must be exactly
//! what the manifest on disk describes: the file list each live state was derived from equals
//! the one replaying the manifest file alone rebuilds, and the tables it has open are exactly
//! that list's files. It runs on a local-directory object store and (fewer cases) on S3
//! (s3s-fs in process).

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

#[path = "common/s3_server.rs"]
mod s3_server;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use kvengine::manifest::Manifest;
use kvengine::{
    ColumnFamily, Dfs, Engine, EngineOptions, LocalDfs, SnapAccess, SyncPolicy, WriteBatch,
};
use proptest::prelude::*;
use s3_server::S3Server;

const SHARD: u64 = 1;

#[derive(Debug, Clone)]
enum Op {
    Put(u8, u8),
    Delete(u8),
    Lock(u8, u8),
    Unlock(u8),
    Get(u8, u64),
    Scan(u8, u8, u64, bool),
    Flush,
    Snapshot,
    ReadSnapshot(usize, u8, u64),
    Reopen,
    Compact,
    /// A manual full compaction of every shard (all levels down into the deepest).
    CompactFull,
    /// Split the shard holding this key at it (if the key is strictly inside).
    Split(u8),
    /// Raise the GC safe point to this fraction (0..=100 %) of the newest version.
    SafePoint(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..20, any::<u8>()).prop_map(|(k, v)| Op::Put(k, v)),
        2 => (0u8..20).prop_map(Op::Delete),
        1 => (0u8..20, any::<u8>()).prop_map(|(k, v)| Op::Lock(k, v)),
        1 => (0u8..20).prop_map(Op::Unlock),
        3 => (0u8..20, 0u64..120).prop_map(|(k, ts)| Op::Get(k, ts)),
        2 => (0u8..21, 0u8..21, 0u64..120, any::<bool>()).prop_map(|(a, b, ts, r)| Op::Scan(a, b, ts, r)),
        1 => Just(Op::Flush),
        1 => Just(Op::Snapshot),
        2 => (0usize..8, 0u8..20, 0u64..120).prop_map(|(i, k, ts)| Op::ReadSnapshot(i, k, ts)),
        1 => Just(Op::Reopen),
        2 => Just(Op::Compact),
        1 => Just(Op::CompactFull),
        1 => (1u8..20).prop_map(Op::Split),
        1 => (0u8..=100).prop_map(Op::SafePoint),
    ]
}

fn key(k: u8) -> Vec<u8> {
    format!("key{k:03}").into_bytes()
}

type Versions = BTreeMap<u64, Option<Vec<u8>>>;

#[derive(Clone, Default)]
struct Oracle {
    data: BTreeMap<Vec<u8>, Versions>,
    locks: BTreeMap<Vec<u8>, Vec<u8>>,
}

impl Oracle {
    fn get(&self, k: &[u8], ts: u64) -> Option<Vec<u8>> {
        self.data.get(k)?.range(..=ts).next_back()?.1.clone()
    }

    fn scan(&self, a: &[u8], b: &[u8], ts: u64, reverse: bool) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out: Vec<_> = self
            .data
            .range(a.to_vec()..)
            .take_while(|(k, _)| b.is_empty() || k.as_slice() < b)
            .filter_map(|(k, _)| self.get(k, ts).map(|v| (k.clone(), v)))
            .collect();
        if reverse {
            out.reverse();
        }
        out
    }
}

/// Makes the object store of a test case; called again at every reopen, so it must return a
/// store holding the same files.
type DfsFactory = dyn Fn() -> Arc<dyn Dfs>;

fn local_dfs(dir: &Path) -> impl Fn() -> Arc<dyn Dfs> + use<> {
    let dir = dir.join("dfs");
    move || Arc::new(LocalDfs::open(&dir).unwrap())
}

/// One in-process S3 server for every S3 case of this test binary; each case gets its own prefix.
fn s3_dfs() -> impl Fn() -> Arc<dyn Dfs> {
    static SERVER: OnceLock<S3Server> = OnceLock::new();
    static CASE: AtomicU64 = AtomicU64::new(0);
    let server = SERVER.get_or_init(S3Server::start);
    let prefix = format!("model-{}/", CASE.fetch_add(1, Ordering::Relaxed));
    move || Arc::new(server.dfs(&prefix))
}

fn open(dir: &Path, dfs: &DfsFactory) -> Engine {
    let mut opts = EngineOptions::new(dir.join("engine"));
    opts.memtable_size = 2048;
    opts.wal_sync = SyncPolicy::Off;
    opts.wal_segment_size = 4096;
    opts.block_size = 256;
    // Small levels so that flushes lead to L0 → L1 and L1 → L2 compactions in a few ops.
    opts.l0_compaction_files = 2;
    opts.base_level_size = 4096;
    opts.target_file_size = 2048;
    opts.compaction_threads = 1;
    Engine::open(opts, dfs()).unwrap()
}

fn scan(snap: &SnapAccess, a: &[u8], b: &[u8], ts: u64, reverse: bool) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut it = snap.iter(ColumnFamily::Write, a, b, ts, reverse).unwrap();
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next().unwrap();
    }
    out
}

/// The test's own map of the shards: (start, end, id), sorted by start, tiling the key space.
#[derive(Clone)]
struct ShardMap(Vec<(Vec<u8>, Vec<u8>, u64)>);

impl ShardMap {
    fn route(&self, k: &[u8]) -> u64 {
        self.0
            .iter()
            .find(|(s, e, _)| k >= s.as_slice() && (e.is_empty() || k < e.as_slice()))
            .expect("shards tile the key space")
            .2
    }

    fn ids(&self) -> Vec<u64> {
        self.0.iter().map(|s| s.2).collect()
    }
}

/// Snapshots of every shard, in key order.
fn snapshot_all(engine: &Engine, map: &ShardMap) -> Vec<SnapAccess> {
    map.ids()
        .into_iter()
        .map(|id| engine.snapshot(id).unwrap())
        .collect()
}

fn scan_all(
    snaps: &[SnapAccess],
    a: &[u8],
    b: &[u8],
    ts: u64,
    reverse: bool,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    let order: Vec<&SnapAccess> = if reverse {
        snaps.iter().rev().collect()
    } else {
        snaps.iter().collect()
    };
    for snap in order {
        out.extend(scan(snap, a, b, ts, reverse));
    }
    out
}

fn snap_for<'a>(snaps: &'a [SnapAccess], k: &[u8]) -> &'a SnapAccess {
    snaps
        .iter()
        .find(|s| k >= s.start() && (s.end().is_empty() || k < s.end()))
        .expect("snapshots tile the key space")
}

/// How long background flushes and compactions may take to settle before a live state that
/// differs from the manifest is a failure.
const SETTLE: std::time::Duration = std::time::Duration::from_secs(5);

/// Checks that every live shard was derived from exactly the file list the manifest on disk
/// describes, and has exactly that list's tables open.
///
/// Background flushes and compactions commit to the manifest just before they swap the live
/// state, so a moment can show the manifest one change ahead: the check passes at the first
/// moment where the live lists read before and after the manifest agree with it, and fails if
/// none comes within [`SETTLE`].
fn live_state_matches_manifest(engine: &Engine, dir: &Path) -> Result<(), TestCaseError> {
    let manifest_dir = dir.join("engine").join("manifest");
    let live = || -> Vec<_> {
        engine
            .shard_ids()
            .into_iter()
            .filter_map(|id| engine.shard_files(id).ok())
            .collect()
    };
    let open_tables = |lists: &[changeset::ShardFiles]| -> Vec<_> {
        lists
            .iter()
            .map(|f| (engine.shard_table_ids(f.id()).ok(), Some(f.file_ids())))
            .collect()
    };
    let deadline = std::time::Instant::now() + SETTLE;
    loop {
        let before = live();
        let on_disk = Manifest::read_file_lists(&manifest_dir).unwrap();
        let after = live();
        let tables = open_tables(&on_disk);
        let tables_match = tables.iter().all(|(open, listed)| open == listed);
        if before == on_disk && after == on_disk && tables_match {
            return Ok(());
        }
        if std::time::Instant::now() > deadline {
            prop_assert_eq!(after, on_disk, "live file lists vs the manifest on disk");
            for (open, listed) in tables {
                prop_assert_eq!(open, listed, "open tables vs the file list");
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

fn run(ops: Vec<Op>, dfs: Option<&DfsFactory>) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let local = local_dfs(dir.path());
    let dfs = dfs.unwrap_or(&local);
    let mut engine = open(dir.path(), dfs);
    engine.create_shard(SHARD, b"", b"").unwrap();
    let mut map = ShardMap(vec![(Vec::new(), Vec::new(), SHARD)]);
    let mut next_id = SHARD + 1;
    let mut oracle = Oracle::default();
    let mut version = 0u64;
    // Reads below the GC safe point may see collected versions: every read is raised to it.
    let mut safe_point = 0u64;
    let mut snaps: Vec<(Vec<SnapAccess>, Oracle, u64)> = Vec::new();
    let write = |engine: &Engine, map: &ShardMap, k: u8, fill: &dyn Fn(&mut WriteBatch)| {
        let mut b = WriteBatch::new();
        fill(&mut b);
        engine.write(map.route(&key(k)), &b).unwrap();
    };
    for op in ops {
        live_state_matches_manifest(&engine, dir.path())?;
        match op {
            Op::Put(k, v) => {
                version += 1;
                write(&engine, &map, k, &|b| {
                    b.put(ColumnFamily::Write, &key(k), version, b"m", &[v; 3]);
                });
                oracle
                    .data
                    .entry(key(k))
                    .or_default()
                    .insert(version, Some(vec![v; 3]));
            }
            Op::Delete(k) => {
                version += 1;
                write(&engine, &map, k, &|b| {
                    b.delete(ColumnFamily::Write, &key(k), version, b"");
                });
                oracle.data.entry(key(k)).or_default().insert(version, None);
            }
            Op::Lock(k, v) => {
                write(&engine, &map, k, &|b| {
                    b.put_lock(&key(k), &[v]);
                });
                oracle.locks.insert(key(k), vec![v]);
            }
            Op::Unlock(k) => {
                write(&engine, &map, k, &|b| {
                    b.delete_lock(&key(k));
                });
                oracle.locks.remove(&key(k));
            }
            Op::Get(k, ts) => {
                let ts = ts.max(safe_point);
                let snap = engine.snapshot(map.route(&key(k))).unwrap();
                let got = snap
                    .get(ColumnFamily::Write, &key(k), ts)
                    .unwrap()
                    .map(|i| i.value.to_vec());
                prop_assert_eq!(&got, &oracle.get(&key(k), ts), "get key={} ts={}", k, ts);
                // The engine's point read without a snapshot reads the same state.
                let direct = engine
                    .get(map.route(&key(k)), ColumnFamily::Write, &key(k), ts)
                    .unwrap()
                    .map(|i| i.value.to_vec());
                prop_assert_eq!(direct, got, "Engine::get key={} ts={}", k, ts);
                let lock = snap.get_lock(&key(k)).unwrap().map(|i| i.value.to_vec());
                prop_assert_eq!(lock, oracle.locks.get(&key(k)).cloned(), "lock key={}", k);
            }
            Op::Scan(a, b, ts, reverse) => {
                let ts = ts.max(safe_point);
                let (a, b) = (key(a), if b == 20 { Vec::new() } else { key(b) });
                let all = snapshot_all(&engine, &map);
                prop_assert_eq!(
                    scan_all(&all, &a, &b, ts, reverse),
                    oracle.scan(&a, &b, ts, reverse)
                );
            }
            Op::Flush => {
                for id in map.ids() {
                    engine.flush_shard(id).unwrap();
                }
            }
            Op::Snapshot => {
                snaps.push((snapshot_all(&engine, &map), oracle.clone(), version));
                if snaps.len() > 8 {
                    snaps.remove(0);
                }
            }
            Op::ReadSnapshot(i, k, ts) => {
                if let Some((snap, old, at)) = snaps.get(i % snaps.len().max(1)) {
                    // Later writes have versions above `at`, so a read at ts <= at sees exactly
                    // the snapshot's data. The snapshot was taken at a version >= the safe
                    // point of that time; reads below the current safe point are skipped.
                    let ts = ts.min(*at).max(safe_point.min(*at));
                    if ts < safe_point {
                        continue;
                    }
                    let one = snap_for(snap, &key(k));
                    let got = one
                        .get(ColumnFamily::Write, &key(k), ts)
                        .unwrap()
                        .map(|i| i.value.to_vec());
                    prop_assert_eq!(got, old.get(&key(k), ts));
                    prop_assert_eq!(
                        scan_all(snap, b"", b"", ts, false),
                        old.scan(b"", b"", ts, false)
                    );
                    let lock = one.get_lock(&key(k)).unwrap().map(|i| i.value.to_vec());
                    prop_assert_eq!(
                        lock,
                        old.locks.get(&key(k)).cloned(),
                        "snapshot lock key={}",
                        k
                    );
                }
            }
            Op::Compact => {
                for id in map.ids() {
                    engine.compact_shard(id, true).unwrap();
                }
            }
            Op::CompactFull => {
                for id in map.ids() {
                    engine.compact_shard_full(id).unwrap();
                }
            }
            Op::Split(k) => {
                let at = key(k);
                let pos = map
                    .0
                    .iter()
                    .position(|(s, e, _)| at > *s && (e.is_empty() || at < *e));
                if let Some(pos) = pos {
                    let (start, end, id) = map.0[pos].clone();
                    engine.split(id, &at, next_id, next_id + 1).unwrap();
                    map.0.splice(
                        pos..=pos,
                        [(start, at.clone(), next_id), (at, end, next_id + 1)],
                    );
                    next_id += 2;
                }
            }
            Op::SafePoint(pct) => {
                safe_point = safe_point.max(version * u64::from(pct) / 100);
                engine.set_gc_safe_point(safe_point);
            }
            Op::Reopen => {
                let before: Vec<_> = map
                    .ids()
                    .into_iter()
                    .map(|id| engine.shard_info(id).unwrap())
                    .collect();
                engine.close(false).unwrap();
                drop(engine);
                engine = open(dir.path(), dfs);
                engine.set_gc_safe_point(safe_point);
                prop_assert_eq!(engine.shard_ids(), {
                    let mut ids = map.ids();
                    ids.sort();
                    ids
                });
                for b in before {
                    let after = engine.shard_info(b.id).unwrap();
                    prop_assert_eq!(b.write_sequence, after.write_sequence);
                    prop_assert_eq!(
                        b.snap_version(),
                        after.snap_version(),
                        "data version survives reopen"
                    );
                }
            }
        }
    }
    live_state_matches_manifest(&engine, dir.path())?;
    // Everything, at every timestamp, at the end.
    let all = snapshot_all(&engine, &map);
    for ts in [safe_point, version / 2, version] {
        let ts = ts.max(safe_point);
        prop_assert_eq!(
            scan_all(&all, b"", b"", ts, false),
            oracle.scan(b"", b"", ts, false)
        );
    }
    drop(all);
    engine.close(false).unwrap();
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn engine_matches_a_btreemap_oracle(ops in prop::collection::vec(op(), 1..120)) {
        run(ops, None)?;
    }
}

proptest! {
    // Each S3 request costs milliseconds, not microseconds: fewer, shorter cases.
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn engine_on_s3_matches_a_btreemap_oracle(ops in prop::collection::vec(op(), 1..80)) {
        run(ops, Some(&s3_dfs()))?;
    }
}

#[test]
fn writes_outside_the_shard_range_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path(), &local_dfs(dir.path()));
    engine.create_shard(2, b"b", b"d").unwrap();
    let mut b = WriteBatch::new();
    b.put(ColumnFamily::Write, b"a", 1, b"", b"v");
    assert!(matches!(
        engine.write(2, &b),
        Err(kvengine::Error::KeyNotInShard { .. })
    ));
    let mut b = WriteBatch::new();
    b.put(ColumnFamily::Write, b"d", 1, b"", b"v");
    assert!(matches!(
        engine.write(2, &b),
        Err(kvengine::Error::KeyNotInShard { .. })
    ));
    assert!(matches!(
        engine.write(3, &b),
        Err(kvengine::Error::ShardNotFound { .. })
    ));
}
