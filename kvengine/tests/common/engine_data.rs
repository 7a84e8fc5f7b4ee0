//! Writing and checking a known data set through the engine, and checking that every file the
//! manifest references is in the object store. Include it with
//! `#[path = "common/engine_data.rs"] mod engine_data;`.

#![allow(dead_code)]

use kvengine::FileId;
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use kvengine::manifest::{Manifest, ManifestOptions};
use kvengine::{ColumnFamily, Dfs, Engine, EngineOptions, SyncPolicy, WriteBatch};

pub const SHARD: u64 = 1;

/// Small memtables and WAL segments so that a few hundred writes make several L0 files.
pub fn options(dir: &Path) -> EngineOptions {
    let mut o = EngineOptions::new(dir.join("engine"));
    o.wal_sync = SyncPolicy::Off;
    o.memtable_size = 4096;
    o.wal_segment_size = 4096;
    o.block_size = 512;
    o
}

pub fn key(i: u64) -> Vec<u8> {
    format!("k{i:06}").into_bytes()
}

pub fn value(i: u64) -> Vec<u8> {
    vec![(i % 251) as u8; 300]
}

/// Writes keys `range` (key i at version i + 1), each as one acknowledged batch.
pub fn write(engine: &Engine, range: std::ops::Range<u64>) {
    for i in range {
        let mut b = WriteBatch::new();
        b.put(ColumnFamily::Write, &key(i), i + 1, b"", &value(i));
        engine.write(SHARD, &b).unwrap();
    }
}

/// Checks that exactly keys `0..n` are there with their values, by point gets and a scan.
pub fn assert_holds(engine: &Engine, n: u64) {
    let snap = engine.snapshot(SHARD).unwrap();
    for i in 0..n {
        let got = snap.get(ColumnFamily::Write, &key(i), u64::MAX).unwrap();
        assert_eq!(got.map(|it| it.value.to_vec()), Some(value(i)), "key={i}");
    }
    let mut it = snap
        .iter(ColumnFamily::Write, b"", b"", u64::MAX, false)
        .unwrap();
    let mut count = 0;
    while it.valid() {
        assert_eq!(it.key(), key(count).as_slice());
        count += 1;
        it.next().unwrap();
    }
    assert_eq!(count, n, "scan sees every key once");
}

/// The files the manifest in `dir` references (read with the engine closed), after checking
/// each is in `dfs`. Returns (referenced, stored).
pub fn assert_manifest_files_exist(dir: &Path, dfs: &dyn Dfs) -> (BTreeSet<u64>, BTreeSet<u64>) {
    let manifest =
        Manifest::open(ManifestOptions::new(dir.join("engine").join("manifest"))).unwrap();
    let live = manifest.live_file_ids();
    let stored: BTreeSet<u64> = dfs.list().unwrap().into_iter().map(FileId::get).collect();
    let missing: Vec<_> = live.difference(&stored).collect();
    assert!(
        missing.is_empty(),
        "manifest references missing files: {missing:?}"
    );
    for id in &live {
        dfs.get(FileId(*id)).unwrap();
    }
    (live, stored)
}

pub fn open(dir: &Path, dfs: Arc<dyn Dfs>) -> Engine {
    Engine::open(options(dir), dfs).unwrap()
}
