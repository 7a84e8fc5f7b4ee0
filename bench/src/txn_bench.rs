//! Transaction commit throughput through the coordinator (`TxnClient`): begin (a TSO
//! timestamp), two puts of 24 + 150 bytes on keys of one shard, commit. 2PC (prewrite, a TSO
//! commit_ts, commit of the primary, then of the secondary) against 1PC (the prewrite commits)
//! on the same keys in the same order, each run on a fresh engine; and 2PC against plain engine
//! writes of the same two puts, one batch per transaction.
//!
//! Both sides of every row use the same WAL sync policy (stated in the table title): `off`
//! measures the transaction layer's CPU cost, `every-batch` what a durable commit costs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kvengine::{Engine, EngineOptions, LocalDfs, SyncPolicy};
use server::tso::Tso;
use server::txn::{Mode, Storage, TxnClient};

use crate::report::{rate, row, table_header};
use crate::workload::{key, rng, value};

/// Timed repetitions on fresh engines; the best one counts.
const REPEATS: usize = 3;

fn storage(dir: &std::path::Path, sync: SyncPolicy) -> Arc<Storage> {
    let mut opts = EngineOptions::new(dir.join("engine"));
    opts.log_mode = kvengine::LogMode::External;
    let e = Engine::open(
        opts,
        Arc::new(LocalDfs::open(dir.join("dfs")).expect("dfs")),
    )
    .expect("open");
    // One region, a one-voter Raft group: every commit goes through the Raft log.
    let raft = raftstore::start_standalone(
        e.clone(),
        kvengine::raft_log::RaftLogOptions {
            sync,
            segment_size: 256 * 1024 * 1024,
            ..kvengine::raft_log::RaftLogOptions::new(dir.join("raft"))
        },
        &[(1, Vec::new(), Vec::new())],
        raftstore::RaftConfig::default(),
    )
    .expect("raft store");
    let tso = Arc::new(Tso::open(dir.join("tso")).expect("tso"));
    Arc::new(Storage::new(e, tso, raft).expect("storage"))
}

/// Runs `txns` transactions split over `threads` (thread t writes keys 2i, 2i + 1 for its
/// own i); returns the wall time.
fn commit_run(sync: SyncPolicy, mode: Mode, txns: usize, threads: usize) -> Duration {
    let d = tempfile::tempdir().expect("tmp");
    let storage = storage(d.path(), sync);
    let client = TxnClient::new(storage.clone());
    let per_thread = txns / threads;
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let client = client.clone();
            s.spawn(move || {
                let v = value(&mut rng(t as u64));
                for i in t * per_thread..(t + 1) * per_thread {
                    let mut txn = client.begin().expect("begin");
                    txn.set(key(2 * i), v.clone());
                    txn.set(key(2 * i + 1), v.clone());
                    let c = txn.commit(mode).expect("commit");
                    debug_assert_eq!(c.mode, mode);
                }
            });
        }
    });
    let elapsed = t0.elapsed();
    storage.engine().close(false).expect("close");
    elapsed
}

/// The baseline: the same two puts per transaction as one write batch each through the
/// region's Raft group (the engine's write path on a server), no transaction.
fn engine_run(sync: SyncPolicy, txns: usize, threads: usize) -> Duration {
    let d = tempfile::tempdir().expect("tmp");
    let storage = storage(d.path(), sync);
    let router = storage.router();
    let elapsed = crate::raft_write_bench::timed(txns, threads, |b| {
        router
            .write(1, None, b, Duration::from_secs(10))
            .expect("write");
    });
    storage.engine().close(false).expect("close");
    elapsed
}

fn best(mut f: impl FnMut() -> Duration) -> Duration {
    (0..REPEATS).map(|_| f()).min().unwrap_or_default()
}

fn suite(sync: SyncPolicy, sync_name: &str, txns: usize, thread_counts: &[usize]) {
    table_header(&format!(
        "transaction commits ({txns} txns of 2 puts in one shard, WAL sync {sync_name} on both sides)"
    ));
    for &threads in thread_counts {
        let n = (txns / threads * threads) as f64;
        let two_pc = rate(n, best(|| commit_run(sync, Mode::TwoPc, txns, threads)));
        let one_pc = rate(n, best(|| commit_run(sync, Mode::OnePc, txns, threads)));
        let async_commit = rate(
            n,
            best(|| commit_run(sync, Mode::AsyncCommit, txns, threads)),
        );
        let engine = rate(n, best(|| engine_run(sync, txns, threads)));
        let th = if threads == 1 { "thread" } else { "threads" };
        row(
            &format!("2PC prewrite + commit, {threads} {th}"),
            "txns/s",
            two_pc,
            "engine write of the same 2 puts, 1 batch per txn",
            engine,
        );
        row(
            &format!("1PC, {threads} {th}"),
            "txns/s",
            one_pc,
            "2PC",
            two_pc,
        );
        row(
            &format!("async commit, {threads} {th}"),
            "txns/s",
            async_commit,
            "2PC",
            two_pc,
        );
    }
}

pub fn run(_entries: usize) {
    suite(SyncPolicy::Off, "off", 20_000, &[1, 2]);
    // Every engine write waits for its own fdatasync (milliseconds on some disks): fewer
    // transactions, one thread.
    suite(SyncPolicy::EveryBatch, "every-batch", 300, &[1]);
}
