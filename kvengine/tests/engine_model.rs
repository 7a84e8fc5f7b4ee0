//! Model test: random writes, deletes, lock writes, reads and scans at random timestamps,
//! interleaved with flushes, snapshots read later, and close/reopen, against a BTreeMap oracle.

use std::collections::BTreeMap;
use std::sync::Arc;

use kvengine::{Cf, Engine, EngineOptions, LocalDfs, SnapAccess, SyncPolicy, WriteBatch};
use proptest::prelude::*;

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

fn open(dir: &std::path::Path) -> Engine {
    let mut opts = EngineOptions::new(dir.join("engine"));
    opts.memtable_size = 2048;
    opts.wal_sync = SyncPolicy::Off;
    opts.wal_segment_size = 4096;
    opts.block_size = 256;
    let dfs = Arc::new(LocalDfs::open(dir.join("dfs")).unwrap());
    Engine::open(opts, dfs).unwrap()
}

fn scan(snap: &SnapAccess, a: &[u8], b: &[u8], ts: u64, reverse: bool) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut it = snap.iter(Cf::Write, a, b, ts, reverse).unwrap();
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next().unwrap();
    }
    out
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = open(dir.path());
    engine.create_shard(SHARD, b"", b"").unwrap();
    let mut oracle = Oracle::default();
    let mut version = 0u64;
    let mut snaps: Vec<(SnapAccess, Oracle, u64)> = Vec::new();
    for op in ops {
        match op {
            Op::Put(k, v) => {
                version += 1;
                let mut b = WriteBatch::new();
                b.put(Cf::Write, &key(k), version, b"m", &[v; 3]);
                engine.write(SHARD, &b).unwrap();
                oracle
                    .data
                    .entry(key(k))
                    .or_default()
                    .insert(version, Some(vec![v; 3]));
            }
            Op::Delete(k) => {
                version += 1;
                let mut b = WriteBatch::new();
                b.delete(Cf::Write, &key(k), version, b"");
                engine.write(SHARD, &b).unwrap();
                oracle.data.entry(key(k)).or_default().insert(version, None);
            }
            Op::Lock(k, v) => {
                let mut b = WriteBatch::new();
                b.put_lock(&key(k), &[v]);
                engine.write(SHARD, &b).unwrap();
                oracle.locks.insert(key(k), vec![v]);
            }
            Op::Unlock(k) => {
                let mut b = WriteBatch::new();
                b.delete_lock(&key(k));
                engine.write(SHARD, &b).unwrap();
                oracle.locks.remove(&key(k));
            }
            Op::Get(k, ts) => {
                let snap = engine.snapshot(SHARD).unwrap();
                let got = snap
                    .get(Cf::Write, &key(k), ts)
                    .unwrap()
                    .map(|i| i.value.to_vec());
                prop_assert_eq!(got, oracle.get(&key(k), ts), "get key={} ts={}", k, ts);
                let lock = snap.get_lock(&key(k)).unwrap().map(|i| i.value.to_vec());
                prop_assert_eq!(lock, oracle.locks.get(&key(k)).cloned(), "lock key={}", k);
            }
            Op::Scan(a, b, ts, reverse) => {
                let (a, b) = (key(a), if b == 20 { Vec::new() } else { key(b) });
                let snap = engine.snapshot(SHARD).unwrap();
                prop_assert_eq!(
                    scan(&snap, &a, &b, ts, reverse),
                    oracle.scan(&a, &b, ts, reverse)
                );
            }
            Op::Flush => engine.flush_shard(SHARD).unwrap(),
            Op::Snapshot => {
                snaps.push((engine.snapshot(SHARD).unwrap(), oracle.clone(), version));
                if snaps.len() > 8 {
                    snaps.remove(0);
                }
            }
            Op::ReadSnapshot(i, k, ts) => {
                if let Some((snap, old, at)) = snaps.get(i % snaps.len().max(1)) {
                    // Later writes have versions above `at`: a read at ts <= at sees exactly
                    // the snapshot's data.
                    let ts = ts.min(*at);
                    let got = snap
                        .get(Cf::Write, &key(k), ts)
                        .unwrap()
                        .map(|i| i.value.to_vec());
                    prop_assert_eq!(got, old.get(&key(k), ts));
                    prop_assert_eq!(
                        scan(snap, b"", b"", ts, false),
                        old.scan(b"", b"", ts, false)
                    );
                    let lock = snap.get_lock(&key(k)).unwrap().map(|i| i.value.to_vec());
                    prop_assert_eq!(
                        lock,
                        old.locks.get(&key(k)).cloned(),
                        "snapshot lock key={}",
                        k
                    );
                }
            }
            Op::Reopen => {
                let before = engine.shard_info(SHARD).unwrap();
                engine.close(false).unwrap();
                drop(engine);
                engine = open(dir.path());
                let after = engine.shard_info(SHARD).unwrap();
                prop_assert_eq!(before.write_sequence, after.write_sequence);
            }
        }
    }
    // Everything, at every timestamp, at the end.
    let snap = engine.snapshot(SHARD).unwrap();
    for ts in [0, version / 2, version] {
        prop_assert_eq!(
            scan(&snap, b"", b"", ts, false),
            oracle.scan(b"", b"", ts, false)
        );
    }
    engine.close(false).unwrap();
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn engine_matches_a_btreemap_oracle(ops in prop::collection::vec(op(), 1..120)) {
        run(ops)?;
    }
}

#[test]
fn writes_outside_the_shard_range_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path());
    engine.create_shard(2, b"b", b"d").unwrap();
    let mut b = WriteBatch::new();
    b.put(Cf::Write, b"a", 1, b"", b"v");
    assert!(matches!(
        engine.write(2, &b),
        Err(kvengine::Error::KeyNotInShard { .. })
    ));
    let mut b = WriteBatch::new();
    b.put(Cf::Write, b"d", 1, b"", b"v");
    assert!(matches!(
        engine.write(2, &b),
        Err(kvengine::Error::KeyNotInShard { .. })
    ));
    assert!(matches!(
        engine.write(3, &b),
        Err(kvengine::Error::ShardNotFound { .. })
    ));
}
