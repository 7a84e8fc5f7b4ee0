//! Flush behaviour: stalls when the queue is full, WAL purge after flush, L0 contents.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kvengine::{
    ColumnFamily, Dfs, Engine, EngineOptions, FileId, LocalDfs, SyncPolicy, WriteBatch,
};
use parking_lot::{Condvar, Mutex};

/// An object store whose puts wait until the test opens the gate (fault injection).
struct GatedDfs {
    inner: LocalDfs,
    open: Mutex<bool>,
    cv: Condvar,
}

impl GatedDfs {
    fn set_open(&self, open: bool) {
        *self.open.lock() = open;
        self.cv.notify_all();
    }
}

impl Dfs for GatedDfs {
    fn put(&self, file_id: FileId, data: Bytes) -> kvengine::Result<()> {
        let mut g = self.open.lock();
        while !*g {
            self.cv.wait(&mut g);
        }
        drop(g);
        self.inner.put(file_id, data)
    }
    fn get(&self, file_id: FileId) -> kvengine::Result<Bytes> {
        self.inner.get(file_id)
    }
    fn get_range(&self, file_id: FileId, offset: u64, len: u64) -> kvengine::Result<Bytes> {
        self.inner.get_range(file_id, offset, len)
    }
    fn delete(&self, file_id: FileId) -> kvengine::Result<()> {
        self.inner.delete(file_id)
    }
    fn list(&self) -> kvengine::Result<Vec<FileId>> {
        self.inner.list()
    }
}

fn opts(dir: &std::path::Path) -> EngineOptions {
    let mut o = EngineOptions::new(dir.join("engine"));
    o.wal_sync = SyncPolicy::Off;
    o.memtable_size = 4096;
    o.max_frozen_memtables = 1;
    o.wal_segment_size = 4096;
    // These tests count L0 files: no background compaction.
    o.compaction_threads = 0;
    o
}

fn put(engine: &Engine, i: u64) {
    let mut b = WriteBatch::new();
    b.put(
        ColumnFamily::Write,
        format!("k{i:06}").as_bytes(),
        i,
        b"",
        &[1u8; 500],
    );
    engine.write(1, &b).unwrap();
}

#[test]
fn writes_stall_while_the_flush_queue_is_full_and_resume_after_flush() {
    let dir = tempfile::tempdir().unwrap();
    let dfs = Arc::new(GatedDfs {
        inner: LocalDfs::open(dir.path().join("dfs")).unwrap(),
        open: Mutex::new(false),
        cv: Condvar::new(),
    });
    let engine = Engine::open(opts(dir.path()), dfs.clone()).unwrap();
    engine.create_shard(1, b"", b"").unwrap();
    let stalls_before = kvengine::metrics::STALLS.get();
    let writer = {
        let engine = engine.clone();
        std::thread::spawn(move || {
            for i in 1..=40 {
                put(&engine, i);
            }
        })
    };
    // With puts blocked, one memtable freezes, the next fills, and the writer must stall.
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        !writer.is_finished(),
        "writer should be stalled behind the full flush queue"
    );
    assert!(
        kvengine::metrics::STALLS.get() > stalls_before,
        "stall not counted"
    );
    let info = engine.shard_info(1).unwrap();
    assert_eq!(info.frozen_memtables, 1);
    dfs.set_open(true);
    writer.join().unwrap();
    engine.flush_shard(1).unwrap();
    let info = engine.shard_info(1).unwrap();
    assert_eq!(info.write_sequence, 40);
    assert_eq!(info.data_sequence, 40);
    let snap = engine.snapshot(1).unwrap();
    for i in 1..=40 {
        assert!(
            snap.get(ColumnFamily::Write, format!("k{i:06}").as_bytes(), u64::MAX)
                .unwrap()
                .is_some()
        );
    }
    engine.close(false).unwrap();
}

#[test]
fn flush_purges_wal_segments_it_covers() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = opts(dir.path());
    o.max_frozen_memtables = 4;
    let engine =
        Engine::open(o, Arc::new(LocalDfs::open(dir.path().join("dfs")).unwrap())).unwrap();
    engine.create_shard(1, b"", b"").unwrap();
    for i in 1..=100 {
        put(&engine, i);
    }
    engine.flush_shard(1).unwrap();
    // Everything is flushed: only the active segment may remain.
    assert!(
        engine.wal_segments() <= 1,
        "segments left: {}",
        engine.wal_segments()
    );
    let info = engine.shard_info(1).unwrap();
    assert_eq!(info.data_sequence, 100);
    assert!(info.l0_files >= 2);
    engine.close(false).unwrap();
}

#[test]
fn flush_keeps_only_the_newest_lock_and_reopen_sees_it() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(
        opts(dir.path()),
        Arc::new(LocalDfs::open(dir.path().join("dfs")).unwrap()),
    )
    .unwrap();
    engine.create_shard(1, b"", b"").unwrap();
    for v in [b"first".as_slice(), b"second", b"third"] {
        let mut b = WriteBatch::new();
        b.put_lock(b"k", v);
        engine.write(1, &b).unwrap();
    }
    let mut b = WriteBatch::new();
    b.put_lock(b"gone", b"x");
    engine.write(1, &b).unwrap();
    let mut b = WriteBatch::new();
    b.delete_lock(b"gone");
    engine.write(1, &b).unwrap();
    let before = engine.snapshot(1).unwrap();
    engine.flush_shard(1).unwrap();
    engine.close(false).unwrap();
    drop(engine);
    let engine = Engine::open(
        opts(dir.path()),
        Arc::new(LocalDfs::open(dir.path().join("dfs")).unwrap()),
    )
    .unwrap();
    let snap = engine.snapshot(1).unwrap();
    assert_eq!(
        snap.snap_version(),
        before.snap_version(),
        "flush and reopen keep the data version"
    );
    assert_eq!(
        snap.get_lock(b"k").unwrap().unwrap().value.as_ref(),
        b"third"
    );
    assert!(snap.get_lock(b"gone").unwrap().is_none());
    // The L0 file holds one LOCK record per key.
    let dfs = LocalDfs::open(dir.path().join("dfs")).unwrap();
    let ids = dfs.list().unwrap();
    assert_eq!(ids.len(), 1);
    let l0 = sst::L0Table::open(ids[0].get(), dfs.get(ids[0]).unwrap()).unwrap();
    let lock = l0.cf(ColumnFamily::Lock).unwrap();
    assert_eq!(lock.properties().entries, 2);
    assert_eq!(lock.properties().old_entries, 0);
    engine.close(false).unwrap();
}

#[test]
fn a_second_engine_on_the_same_directory_is_refused_until_the_first_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let dfs = || Arc::new(LocalDfs::open(dir.path().join("dfs")).unwrap());
    let first = Engine::open(opts(dir.path()), dfs()).unwrap();
    first.create_shard(1, b"", b"").unwrap();
    put(&first, 1);
    let err = Engine::open(opts(dir.path()), dfs())
        .err()
        .expect("directory is locked");
    assert!(matches!(err, kvengine::Error::Locked { .. }), "{err}");
    // Dropping every handle (no close) shuts the engine down and releases the directory.
    let clone = first.clone();
    drop(first);
    drop(clone);
    let again = Engine::open(opts(dir.path()), dfs()).unwrap();
    assert_eq!(again.shard_info(1).unwrap().write_sequence, 1);
}
