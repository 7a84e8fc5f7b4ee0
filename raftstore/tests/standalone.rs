//! One server alone (`start_standalone`): every region a one-voter group. What it proves:
//! writes go through the Raft log and survive a restart, and the log does not grow without
//! bound: once the engine flushed, the leader truncates the log and its old segments go.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kvengine::raft_log::RaftLogOptions;
use kvengine::{
    ColumnFamily, Dfs, Engine, EngineOptions, LocalDfs, LogMode, SyncPolicy, WriteBatch,
};
use raftstore::{RaftConfig, RaftStore, start_standalone};

const TIMEOUT: Duration = Duration::from_secs(10);

fn open(dir: &Path) -> (Engine, RaftStore) {
    open_with(
        dir,
        RaftConfig {
            tick_interval: types::ReadableDuration::millis(10),
            ..RaftConfig::default()
        },
    )
}

fn open_with(dir: &Path, config: RaftConfig) -> (Engine, RaftStore) {
    let mut opts = EngineOptions::new(dir.join("engine"));
    opts.log_mode = LogMode::External;
    opts.memtable_size = 16 * 1024;
    let engine = Engine::open(opts, Arc::new(LocalDfs::open(dir.join("dfs")).unwrap())).unwrap();
    let store = start_standalone(
        engine.clone(),
        RaftLogOptions {
            sync: SyncPolicy::Off,
            segment_size: 32 * 1024,
            ..RaftLogOptions::new(dir.join("raft"))
        },
        &[(1, Vec::new(), Vec::new())],
        config,
    )
    .unwrap();
    (engine, store)
}

fn segments(dir: &Path) -> usize {
    std::fs::read_dir(dir.join("raft")).unwrap().count()
}

#[test]
fn the_log_is_truncated_after_flushes_and_every_write_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, store) = open(dir.path());
    let mut most = 0;
    for i in 0..2000u64 {
        let mut batch = WriteBatch::new();
        batch.put(
            ColumnFamily::Write,
            format!("k{i:05}").as_bytes(),
            10 + i,
            b"",
            &[b'v'; 200],
        );
        store.router().write(1, None, &batch, TIMEOUT).unwrap();
        most = most.max(segments(dir.path()));
    }
    // 2000 entries of ~230 bytes fill ~14 segments of 32 KiB.
    assert!(most >= 10, "the writes never filled many segments: {most}");
    engine.flush_shard(1).unwrap();
    let deadline = Instant::now() + TIMEOUT;
    while segments(dir.path()) > 3 {
        assert!(
            Instant::now() < deadline,
            "the log kept {} segments after every write was flushed",
            segments(dir.path())
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let before = engine.shard_info(1).unwrap();
    store.stop();
    engine.close(false).unwrap();
    drop(engine);

    let (engine, _store) = open(dir.path());
    let snap = engine.snapshot(1).unwrap();
    let mut it = snap
        .iter(ColumnFamily::Write, b"", b"", u64::MAX, false)
        .unwrap();
    let mut rows = 0;
    while it.valid() {
        rows += 1;
        it.next().unwrap();
    }
    assert_eq!(rows, 2000);
    let after = engine.shard_info(1).unwrap();
    assert!(after.write_sequence >= before.data_sequence);
}

#[test]
fn a_log_that_lost_what_the_engine_flushed_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, store) = open(dir.path());
    for i in 0..50u64 {
        let mut batch = WriteBatch::new();
        batch.put(
            ColumnFamily::Write,
            format!("k{i:03}").as_bytes(),
            10 + i,
            b"",
            b"v",
        );
        store.router().write(1, None, &batch, TIMEOUT).unwrap();
    }
    engine.flush_shard(1).unwrap();
    assert!(engine.shard_info(1).unwrap().data_sequence > 0);
    store.stop();
    engine.close(false).unwrap();
    drop(engine);
    // What a machine crash without fsync can leave: the engine's manifest, but no log.
    std::fs::remove_dir_all(dir.path().join("raft")).unwrap();

    let mut opts = EngineOptions::new(dir.path().join("engine"));
    opts.log_mode = LogMode::External;
    let engine = Engine::open(
        opts,
        Arc::new(LocalDfs::open(dir.path().join("dfs")).unwrap()),
    )
    .unwrap();
    let err = start_standalone(
        engine,
        RaftLogOptions::new(dir.path().join("raft")),
        &[(1, Vec::new(), Vec::new())],
        RaftConfig::default(),
    )
    .err()
    .expect("a start over a log behind the engine");
    assert!(
        matches!(
            err,
            raftstore::StartError::LogBehindEngine { region_id: 1, .. }
        ),
        "{err}"
    );
}

#[test]
fn a_one_voter_read_index_covers_the_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let (_engine, store) = open(dir.path());
    store.wait_for_leaders(&[1], TIMEOUT).unwrap();
    for i in 0..20u64 {
        let mut batch = WriteBatch::new();
        batch.put(ColumnFamily::Write, b"k", 10 + i, b"", b"v");
        let acked = store
            .router()
            .write(1, None, &batch, TIMEOUT)
            .unwrap()
            .index;
        let at = store.router().read_index(1, TIMEOUT).unwrap();
        assert!(at >= acked, "read index {at} below the write at {acked}");
    }
}

/// A one-voter group sends no Raft message, so nothing carries its file GC indexes: its leader
/// raises its group index itself, and a compaction's inputs leave the object store. (Awake:
/// a region falling asleep would raise it on its way.)
#[test]
fn a_one_voter_group_deletes_a_compactions_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, store) = open_with(
        dir.path(),
        RaftConfig {
            tick_interval: types::ReadableDuration::millis(10),
            hibernate_regions: false,
            ..RaftConfig::default()
        },
    );
    for round in 0..2u64 {
        for i in 0..20u64 {
            let mut batch = WriteBatch::new();
            let key = format!("k{i:05}");
            batch.put(
                ColumnFamily::Write,
                key.as_bytes(),
                10 + round * 100 + i,
                b"",
                b"v",
            );
            store.router().write(1, None, &batch, TIMEOUT).unwrap();
        }
        engine.flush_shard(1).unwrap();
    }
    let inputs = engine.shard_table_ids(1).unwrap();
    assert_eq!(inputs.len(), 2, "two flushes, two L0 files");
    assert!(engine.compact_shard(1, true).unwrap() >= 1);
    let dfs = LocalDfs::open(dir.path().join("dfs")).unwrap();
    let deadline = Instant::now() + TIMEOUT;
    loop {
        engine.collect_garbage();
        let stored: Vec<u64> = dfs.list().unwrap().into_iter().map(|f| f.get()).collect();
        if inputs.iter().all(|f| !stored.contains(f)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the inputs {inputs:?} are still stored: {stored:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(engine.pending_deletes(), 0);
}
