//! A worker's cache of open tables (`TableCache`, `SnapAccess::from_remote_cached`): a rebuild
//! through it reads exactly what a rebuild from the store reads, a second rebuild of the same
//! files reads nothing from the store, a failed open is not kept, and what it keeps stays
//! within its capacity.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::sync::Arc;

use bytes::Bytes;
use kvengine::mvcc::{WriteKind, WriteMeta};
use kvengine::{
    ColumnFamily, Dfs, DfsOp, Engine, EngineOptions, FaultDfs, LocalDfs, MIN_TABLE_WEIGHT,
    RemoteSnapshot, SnapAccess, SyncPolicy, TableCache, WriteBatch,
};

const SHARD: u64 = 1;

/// An engine whose shard has level tables, L0 files and memtable rows, and a snapshot of all
/// of it shipped for a read at ts 1,000.
struct Fixture {
    dir: tempfile::TempDir,
    _engine: Engine,
    remote: RemoteSnapshot,
    origin: Vec<(Vec<u8>, Vec<u8>)>,
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

fn put(engine: &Engine, keys: std::ops::Range<u32>, version: u64) {
    let mut b = WriteBatch::new();
    for i in keys {
        let meta = WriteMeta {
            kind: WriteKind::Put,
            start_ts: version - 1,
            commit_ts: version,
        };
        b.put(
            ColumnFamily::Write,
            &key(i),
            version,
            &meta.encode(),
            format!("value {i} at {version}").as_bytes(),
        );
    }
    engine.write(SHARD, &b).unwrap();
}

/// Every committed row a read at ts 1,000 sees, forward.
fn scan(snap: &SnapAccess) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut it = snap.mvcc_scan(b"", b"", 1_000, false, &[]).unwrap();
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next().unwrap();
    }
    out
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let dfs = Arc::new(LocalDfs::open(dir.path().join("dfs")).unwrap());
        let mut o = EngineOptions::new(dir.path().join("engine"));
        o.wal_sync = SyncPolicy::Off;
        o.block_size = 256;
        o.l0_compaction_files = 100;
        o.compaction_threads = 0;
        let engine = Engine::open(o, dfs).unwrap();
        engine.create_shard(SHARD, b"", b"").unwrap();
        // Two flushes compacted into the levels, two more left in L0, one in the memtable.
        for (round, version) in [10u64, 20, 30, 40, 50].into_iter().enumerate() {
            let round = round as u32;
            put(&engine, round * 40..round * 40 + 300, version);
            match round {
                0 | 2 | 3 => engine.flush_shard(SHARD).unwrap(),
                1 => {
                    engine.flush_shard(SHARD).unwrap();
                    engine.compact_shard_full(SHARD).unwrap();
                }
                _ => {}
            }
        }
        let snap = engine.snapshot(SHARD).unwrap();
        let remote = snap.to_remote(&[(b"", b"")], 1_000).unwrap();
        let origin = scan(&snap);
        Fixture {
            dir,
            _engine: engine,
            remote,
            origin,
        }
    }

    /// What a worker opens: the same object store through its own handle, whose reads can be
    /// made to fail.
    fn worker_dfs(&self) -> Arc<FaultDfs<LocalDfs>> {
        Arc::new(FaultDfs::new(
            LocalDfs::open(self.dir.path().join("dfs")).unwrap(),
        ))
    }

    /// How many files the shipped snapshot names (L0 files and level tables).
    fn files(&self) -> u64 {
        match &self.remote.changeset.change {
            Some(changeset::Change::Snapshot(s)) => {
                (s.l0_creates.len() + s.table_creates.len()) as u64
            }
            other => panic!("expected a snapshot, found {other:?}"),
        }
    }

    fn rebuild(&self, tables: &TableCache) -> kvengine::Result<SnapAccess> {
        let rows: Bytes = self.remote.memtable_data.clone();
        SnapAccess::from_remote_cached(&self.remote.changeset, &rows, tables)
    }
}

#[test]
fn the_fixture_ships_level_tables_l0_files_and_rows() {
    let f = Fixture::new();
    let Some(changeset::Change::Snapshot(s)) = &f.remote.changeset.change else {
        panic!("expected a snapshot");
    };
    assert!(!s.l0_creates.is_empty(), "L0 files");
    assert!(!s.table_creates.is_empty(), "level tables");
    assert!(f.remote.rows > 0, "memtable rows");
    assert_eq!(f.origin.len(), 460);
}

#[test]
fn a_cached_rebuild_reads_what_the_origin_reads_and_the_second_reads_nothing_from_the_store() {
    let f = Fixture::new();
    let dfs = f.worker_dfs();
    let tables = TableCache::new(dfs.clone(), None, 64 << 20);
    let first = f.rebuild(&tables).unwrap();
    assert_eq!(scan(&first), f.origin);
    let gets = dfs.stats(DfsOp::Get).calls;
    assert_eq!(gets, f.files(), "one read per file");
    assert_eq!(tables.stats().misses, f.files());

    // Every read of the store now fails: the second rebuild must not need one.
    dfs.fail_next(DfsOp::Get, u32::MAX);
    let second = f.rebuild(&tables).unwrap();
    assert_eq!(scan(&second), f.origin);
    assert_eq!(dfs.stats(DfsOp::Get).calls, gets, "no read of the store");
    assert_eq!(tables.stats().hits, f.files());

    // The same answer as a rebuild that opens everything itself.
    let plain = SnapAccess::from_remote(
        &f.remote.changeset,
        &f.remote.memtable_data,
        f.worker_dfs() as Arc<dyn Dfs>,
        None,
    )
    .unwrap();
    assert_eq!(scan(&plain), f.origin);
}

#[test]
fn a_failed_open_is_not_kept_and_the_files_opened_before_it_are() {
    let f = Fixture::new();
    let dfs = f.worker_dfs();
    let tables = TableCache::new(dfs.clone(), None, 64 << 20);
    // The last file a rebuild opens (L0 files come first, then the level tables in order)
    // goes missing for a moment.
    let Some(changeset::Change::Snapshot(s)) = &f.remote.changeset.change else {
        panic!("expected a snapshot");
    };
    let last = s.table_creates.last().unwrap().id;
    let path = dfs.inner().path_of(kvengine::FileId(last));
    let aside = path.with_extension("aside");
    std::fs::rename(&path, &aside).unwrap();
    let Err(err) = f.rebuild(&tables) else {
        panic!("the rebuild opened a missing file");
    };
    assert_eq!(err.kind(), kvengine::ErrorKind::NotFound, "{err:?}");
    assert_eq!(tables.stats().misses, f.files());

    std::fs::rename(&aside, &path).unwrap();
    let rebuilt = f.rebuild(&tables).unwrap();
    assert_eq!(scan(&rebuilt), f.origin);
    let stats = tables.stats();
    assert_eq!(
        stats.hits,
        f.files() - 1,
        "the files opened before the failure: {stats:?}"
    );
    assert_eq!(
        stats.misses,
        f.files() + 1,
        "the failed one, opened again: {stats:?}"
    );
}

#[test]
fn released_pages_of_the_kept_mapped_tables_read_back_the_same() {
    let f = Fixture::new();
    let tables = TableCache::new(f.worker_dfs(), None, 64 << 20);
    let rebuilt = f.rebuild(&tables).unwrap();
    assert_eq!(scan(&rebuilt), f.origin);
    // The local store maps every file; the scan made their pages resident.
    assert!(rebuilt.release_pages() > 0, "nothing was released");
    assert_eq!(scan(&rebuilt), f.origin);
    drop(rebuilt);
    // The next request over the same files finds them open, and reads the same.
    assert_eq!(scan(&f.rebuild(&tables).unwrap()), f.origin);
    assert_eq!(tables.stats().hits, f.files());
}

#[test]
fn a_cache_of_no_capacity_keeps_nothing() {
    let f = Fixture::new();
    let dfs = f.worker_dfs();
    let tables = TableCache::new(dfs.clone(), None, 0);
    for _ in 0..2 {
        assert_eq!(scan(&f.rebuild(&tables).unwrap()), f.origin);
    }
    assert_eq!(dfs.stats(DfsOp::Get).calls, 2 * f.files());
    assert_eq!(tables.stats().hits, 0);
    tables.run_pending_tasks();
    assert_eq!(tables.stats().entry_count, 0);
}

#[test]
fn the_tables_kept_stay_within_the_capacity() {
    let f = Fixture::new();
    assert!(f.files() > 2, "more files than the cache keeps");
    let dfs = f.worker_dfs();
    // Each small table weighs the minimum: room for two.
    let tables = TableCache::new(dfs.clone(), None, 2 * MIN_TABLE_WEIGHT);
    for _ in 0..3 {
        assert_eq!(scan(&f.rebuild(&tables).unwrap()), f.origin);
        tables.run_pending_tasks();
        let stats = tables.stats();
        assert!((1..=2).contains(&stats.entry_count), "{stats:?}");
        assert!(stats.weighted_size <= 2 * MIN_TABLE_WEIGHT, "{stats:?}");
    }
}

/// The worker's store as seen by the disk cache in front of S3: which files were noted as
/// used without a read.
struct NotingDfs {
    inner: LocalDfs,
    noted: std::sync::Mutex<Vec<u64>>,
}

impl Dfs for NotingDfs {
    fn put(&self, file_id: kvengine::FileId, data: Bytes) -> kvengine::Result<()> {
        self.inner.put(file_id, data)
    }
    fn get(&self, file_id: kvengine::FileId) -> kvengine::Result<Bytes> {
        self.inner.get(file_id)
    }
    fn get_range(&self, file_id: kvengine::FileId, off: u64, len: u64) -> kvengine::Result<Bytes> {
        self.inner.get_range(file_id, off, len)
    }
    fn note_use(&self, file_id: kvengine::FileId) {
        self.noted.lock().unwrap().push(file_id.get());
    }
    fn delete(&self, file_id: kvengine::FileId) -> kvengine::Result<()> {
        self.inner.delete(file_id)
    }
    fn list(&self) -> kvengine::Result<Vec<kvengine::FileId>> {
        self.inner.list()
    }
}

#[test]
fn every_file_found_open_is_noted_as_used_with_the_store() {
    let f = Fixture::new();
    let dfs = Arc::new(NotingDfs {
        inner: LocalDfs::open(f.dir.path().join("dfs")).unwrap(),
        noted: Default::default(),
    });
    let tables = TableCache::new(dfs.clone(), None, 64 << 20);
    f.rebuild(&tables).unwrap();
    assert!(
        dfs.noted.lock().unwrap().is_empty(),
        "opened, not found open"
    );
    f.rebuild(&tables).unwrap();
    let Some(changeset::Change::Snapshot(s)) = &f.remote.changeset.change else {
        panic!("expected a snapshot");
    };
    let mut expected: Vec<u64> = s.l0_creates.iter().map(|c| c.id).collect();
    expected.extend(s.table_creates.iter().map(|c| c.id));
    let mut noted = dfs.noted.lock().unwrap().clone();
    noted.sort_unstable();
    expected.sort_unstable();
    assert_eq!(noted, expected);
}
