//! The write path of a server alone: one write batch (the two puts of a transaction, 24 + 150
//! bytes each) through the region's one-voter Raft group (`Router::write`: proposal, Raft log,
//! apply, answer), against the same batch through the engine's own WAL (`Engine::write` in
//! internal-log mode, written in the caller's thread), in the same run, with the same sync
//! policy on both sides: 1 and 2 writer threads on one region, and 1 writer on one region of a
//! server holding 1000 (what a round costs per region it does not write to).
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

/// `writes` batches (the two puts of transaction `i`) split over `threads` through `write`;
/// returns the wall time. The `txn` suite's baseline writes the same batches.
pub(crate) fn timed(writes: usize, threads: usize, write: impl Fn(&WriteBatch) + Sync) -> Duration {
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

/// `n` regions splitting the key space; the writes all go to region 1 (keys below "z").
fn regions(n: u64) -> Vec<(u64, Vec<u8>, Vec<u8>)> {
    let bound = |i: u64| format!("z{i:06}").into_bytes();
    (1..=n)
        .map(|i| {
            let start = if i == 1 { Vec::new() } else { bound(i) };
            let end = if i == n { Vec::new() } else { bound(i + 1) };
            (i, start, end)
        })
        .collect()
}

fn raft_run(sync: SyncPolicy, writes: usize, threads: usize, region_count: u64) -> Duration {
    let d = tempfile::tempdir().expect("tmp");
    let e = engine(d.path(), sync, LogMode::External);
    let raft = raftstore::start_standalone(
        e.clone(),
        kvengine::raft_log::RaftLogOptions {
            sync,
            segment_size: 256 * 1024 * 1024,
            ..kvengine::raft_log::RaftLogOptions::new(d.path().join("raft"))
        },
        &regions(region_count),
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

fn wal_run(sync: SyncPolicy, writes: usize, threads: usize, region_count: u64) -> Duration {
    let d = tempfile::tempdir().expect("tmp");
    let e = engine(d.path(), sync, LogMode::Internal);
    for (id, start, end) in regions(region_count) {
        e.create_shard(id, &start, &end).expect("shard");
    }
    let elapsed = timed(writes, threads, |b| {
        e.write(1, b).expect("engine write");
    });
    e.close(false).expect("close");
    elapsed
}

fn best(mut f: impl FnMut() -> Duration) -> Duration {
    (0..REPEATS).map(|_| f()).min().unwrap_or_default()
}

/// One row per `(threads, regions)`.
fn suite(sync: SyncPolicy, sync_name: &str, writes: usize, shapes: &[(usize, u64)]) {
    table_header(&format!(
        "one-voter Raft writes ({writes} batches of 2 puts to one region, log sync {sync_name} on both sides)"
    ));
    for &(threads, region_count) in shapes {
        let n = (writes / threads * threads) as f64;
        let raft = rate(n, best(|| raft_run(sync, writes, threads, region_count)));
        let wal = rate(n, best(|| wal_run(sync, writes, threads, region_count)));
        let th = if threads == 1 { "thread" } else { "threads" };
        let of = if region_count == 1 {
            String::new()
        } else {
            format!(", 1 of {region_count} regions")
        };
        row(
            &format!("Router::write, {threads} {th}{of}"),
            "batches/s",
            raft,
            "Engine::write through the engine WAL",
            wal,
        );
    }
}

pub fn run(_entries: usize) {
    suite(SyncPolicy::Off, "off", 20_000, &[(1, 1), (2, 1), (1, 1000)]);
    suite(
        SyncPolicy::EveryBatch,
        "every-batch",
        1_000,
        &[(1, 1), (2, 1)],
    );
}
