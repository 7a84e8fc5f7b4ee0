//! After a restart whose WAL replay froze several memtables of one shard, every one of them is
//! flushed: `flush_shard` (and so `close(true)`) returns instead of waiting forever.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

#[path = "common/engine_data.rs"]
mod engine_data;

use std::sync::Arc;
use std::time::Duration;

use engine_data::{SHARD, assert_holds, open, write};
use kvengine::LocalDfs;

#[test]
fn replay_that_freezes_several_memtables_flushes_them_all() {
    let dir = tempfile::tempdir().unwrap();
    let dfs = || Arc::new(LocalDfs::open(dir.path().join("dfs")).unwrap());
    let engine = open(dir.path(), dfs());
    engine.create_shard(SHARD, b"", b"").unwrap();
    // ~16 KiB of writes with 4 KiB memtables, closed without flushing: replay refreezes them.
    write(&engine, 0..50);
    engine.close(false).unwrap();
    drop(engine);
    let engine = open(dir.path(), dfs());
    let (tx, rx) = std::sync::mpsc::channel();
    let e = engine.clone();
    std::thread::spawn(move || {
        let _ = tx.send(e.flush_shard(SHARD).map(|()| e.shard_info(SHARD).unwrap()));
    });
    let info = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("flush_shard never returned: replay-frozen memtables were not all flushed")
        .unwrap();
    assert_eq!((info.frozen_memtables, info.data_sequence), (0, 50));
    assert_holds(&engine, 50);
}
