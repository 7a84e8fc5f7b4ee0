//! A write chooses its own durability (`Engine::write_with`), whatever the engine's WAL
//! policy: an fsync for one batch and not the next, and every acknowledged batch replays
//! after a restart of the process.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

#[path = "common/engine_data.rs"]
mod engine_data;

use std::sync::Arc;

use engine_data::{SHARD, key, value};
use kvengine::{ColumnFamily, Dfs, Durability, Engine, LocalDfs, SyncPolicy, WriteBatch};

fn batch(i: u64) -> WriteBatch {
    let mut b = WriteBatch::new();
    b.put(ColumnFamily::Write, &key(i), i + 1, b"", &value(i));
    b
}

fn open(dir: &std::path::Path, dfs: &Arc<dyn Dfs>, policy: SyncPolicy) -> Engine {
    let mut o = engine_data::options(dir);
    o.wal_sync = policy;
    // Large enough that nothing is flushed: every batch must come back from the WAL.
    o.memtable_size = 64 << 20;
    Engine::open(o, dfs.clone()).unwrap()
}

fn fsyncs(e: &Engine) -> u64 {
    e.wal_stats().unwrap().fsyncs
}

#[test]
fn a_write_fsyncs_when_it_asks_whatever_the_engine_policy_and_every_write_replays() {
    let dir = tempfile::tempdir().unwrap();
    let dfs: Arc<dyn Dfs> = Arc::new(LocalDfs::open(dir.path().join("dfs")).unwrap());

    let engine = open(dir.path(), &dfs, SyncPolicy::Off);
    engine.create_shard(SHARD, b"", b"").unwrap();
    let before = fsyncs(&engine);
    engine
        .write_with(SHARD, &batch(0), Durability::Sync)
        .unwrap();
    assert_eq!(
        fsyncs(&engine),
        before + 1,
        "a synced batch on an engine that never syncs"
    );
    engine.write(SHARD, &batch(1)).unwrap();
    assert_eq!(
        fsyncs(&engine),
        before + 1,
        "the policy's own write: no fsync"
    );
    drop(engine);

    let engine = open(dir.path(), &dfs, SyncPolicy::EveryBatch);
    let before = fsyncs(&engine);
    engine
        .write_with(SHARD, &batch(2), Durability::Buffered)
        .unwrap();
    assert_eq!(
        fsyncs(&engine),
        before,
        "a buffered batch on an engine that syncs each"
    );
    engine.write(SHARD, &batch(3)).unwrap();
    assert_eq!(fsyncs(&engine), before + 1);
    drop(engine);

    let engine = open(dir.path(), &dfs, SyncPolicy::EveryBatch);
    engine_data::assert_holds(&engine, 4);
}
