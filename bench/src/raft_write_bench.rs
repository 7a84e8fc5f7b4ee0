//! The write path of a server alone: one write batch (the two puts of a transaction, 24 + 150
//! bytes each) through the region's one-voter Raft group (`Router::write`: proposal, Raft log,
//! apply, answer), against the same batch through the engine's own WAL (`Engine::write` in
//! internal-log mode, written in the caller's thread), in the same run, with the same sync
//! policy on both sides, 1 and 2 writer threads on one region.
//!
//! This is the part of every transaction row of `txn` that changed when writes became Raft
//! proposals; the `txn` suite measures the whole commit.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kvengine::{ColumnFamily, Engine, EngineOptions, LocalDfs, LogMode, SyncPolicy, WriteBatch};

use crate::report::{rate, row, table_header};
use crate::workload::{key, rng, value};

/// Timed repetitions on fresh engines; the best one counts.
const REPEATS: usize = 3;

fn engine(dir: &std::path::Path, sync: SyncPolicy, log_mode: LogMode) -> Engine {
    let mut opts = EngineOptions::new(dir.join("engine"));
    opts.log_mode = log_mode;
    opts.wal_sync = sync;
    opts.wal_segment_size = 256 * 1024 * 1024;
    Engine::open(
        opts,
        Arc::new(LocalDfs::open(dir.join("dfs")).expect("dfs")),
    )
    .expect("open")
}

/// The two puts of transaction `i`.
fn batch(i: usize, v: &[u8]) -> WriteBatch {
    let mut b = WriteBatch::new();
    for k in [2 * i, 2 * i + 1] {
        b.put(ColumnFamily::Write, &key(k), 2 * i as u64 + 2, b"", v);
    }
    b
}

/// `writes` batches split over `threads` through `write`; returns the wall time.
fn timed(writes: usize, threads: usize, write: impl Fn(&WriteBatch) + Sync) -> Duration {
    let per_thread = writes / threads;
    let write = &write;
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                let v = value(&mut rng(t as u64));
                for i in t * per_thread..(t + 1) * per_thread {
                    write(&batch(i, &v));
                }
            });
        }
    });
    t0.elapsed()
}

fn raft_run(sync: SyncPolicy, writes: usize, threads: usize) -> Duration {
    let d = tempfile::tempdir().expect("tmp");
    let e = engine(d.path(), sync, LogMode::External);
    let raft = raftstore::start_standalone(
        e.clone(),
        kvengine::raft_log::RaftLogOptions {
            sync,
            segment_size: 256 * 1024 * 1024,
            ..kvengine::raft_log::RaftLogOptions::new(d.path().join("raft"))
        },
        &[(1, Vec::new(), Vec::new())],
        raftstore::RaftConfig::default(),
    )
    .expect("raft store");
    let router = raft.router().clone();
    let elapsed = timed(writes, threads, |b| {
        router
            .write(1, None, b, Duration::from_secs(10))
            .expect("raft write");
    });
    raft.stop();
    e.close(false).expect("close");
    elapsed
}

fn wal_run(sync: SyncPolicy, writes: usize, threads: usize) -> Duration {
    let d = tempfile::tempdir().expect("tmp");
    let e = engine(d.path(), sync, LogMode::Internal);
    e.create_shard(1, b"", b"").expect("shard");
    let elapsed = timed(writes, threads, |b| {
        e.write(1, b).expect("engine write");
    });
    e.close(false).expect("close");
    elapsed
}

fn best(mut f: impl FnMut() -> Duration) -> Duration {
    (0..REPEATS).map(|_| f()).min().unwrap_or_default()
}

fn suite(sync: SyncPolicy, sync_name: &str, writes: usize, thread_counts: &[usize]) {
    table_header(&format!(
        "one-voter Raft writes ({writes} batches of 2 puts in one region, log sync {sync_name} on both sides)"
    ));
    for &threads in thread_counts {
        let n = (writes / threads * threads) as f64;
        let raft = rate(n, best(|| raft_run(sync, writes, threads)));
        let wal = rate(n, best(|| wal_run(sync, writes, threads)));
        let th = if threads == 1 { "thread" } else { "threads" };
        row(
            &format!("Router::write, {threads} {th}"),
            "batches/s",
            raft,
            "Engine::write through the engine WAL",
            wal,
        );
    }
}

pub fn run(_entries: usize) {
    suite(SyncPolicy::Off, "off", 20_000, &[1, 2]);
    suite(SyncPolicy::EveryBatch, "every-batch", 1_000, &[1, 2]);
}
