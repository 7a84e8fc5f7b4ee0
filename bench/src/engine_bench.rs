//! Engine write throughput per WAL sync policy, against plain file appends with the same
//! durability in the same run; and recovery time against WAL size, against reading the same
//! bytes.

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kvengine::{ColumnFamily, Engine, EngineOptions, LocalDfs, SyncPolicy, WriteBatch};

use crate::report::{rate, row, table_header};
use crate::workload::{key, rng, value};

fn engine(dir: &std::path::Path, sync: SyncPolicy, memtable_size: usize) -> Engine {
    let mut opts = EngineOptions::new(dir.join("engine"));
    opts.wal_sync = sync;
    opts.memtable_size = memtable_size;
    opts.wal_segment_size = 256 * 1024 * 1024;
    let e = Engine::open(
        opts,
        Arc::new(LocalDfs::open(dir.join("dfs")).expect("dfs")),
    )
    .expect("open");
    // Four independent shards: group commit batches fsyncs across shards (writers of one
    // shard are ordered by its write lock).
    if e.shard_ids().is_empty() {
        for id in 1..=4 {
            e.create_shard(id, b"", b"").expect("shard");
        }
    }
    e
}

/// Runs `threads` writers (writer t on shard t + 1) for `window`; returns batches per second.
fn write_rate(e: &Engine, threads: usize, window: Duration) -> f64 {
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (e, stop) = (e.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut r = rng(t as u64);
                let v = value(&mut r);
                let mut n = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let mut b = WriteBatch::new();
                    b.put(
                        ColumnFamily::Write,
                        &key(t * 100_000_000 + n as usize),
                        n + 1,
                        b"",
                        &v,
                    );
                    e.write(t as u64 + 1, &b).expect("write");
                    n += 1;
                }
                n
            })
        })
        .collect();
    let t0 = Instant::now();
    std::thread::sleep(window);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let total: u64 = handles.into_iter().map(|h| h.join().expect("writer")).sum();
    rate(total as f64, t0.elapsed())
}

/// Appends records of the same size to a plain file, fsyncing each (`sync`) or not.
fn plain_append_rate(dir: &std::path::Path, sync: bool, window: Duration) -> f64 {
    let mut f = std::fs::File::create(dir.join("plain.log")).expect("create");
    let rec = vec![1u8; 24 + 150 + 40];
    let t0 = Instant::now();
    let mut n = 0u64;
    while t0.elapsed() < window {
        f.write_all(&rec).expect("write");
        if sync {
            f.sync_data().expect("fsync");
        }
        n += 1;
    }
    rate(n as f64, t0.elapsed())
}

pub fn run(_entries: usize) {
    table_header("engine writes (1 put of 24 + 150 bytes per batch)");
    let window = Duration::from_secs(3);
    let plain_sync = {
        let d = tempfile::tempdir().expect("tmp");
        plain_append_rate(d.path(), true, window)
    };
    let plain_nosync = {
        let d = tempfile::tempdir().expect("tmp");
        plain_append_rate(d.path(), false, window)
    };
    for (name, sync, threads, base_name, base) in [
        (
            "every-batch, 1 writer",
            SyncPolicy::EveryBatch,
            1,
            "append + fdatasync per record",
            plain_sync,
        ),
        (
            "group-commit, 4 writers",
            SyncPolicy::GroupCommit,
            4,
            "append + fdatasync per record",
            plain_sync,
        ),
        (
            "off, 1 writer",
            SyncPolicy::Off,
            1,
            "append, no fsync",
            plain_nosync,
        ),
    ] {
        let d = tempfile::tempdir().expect("tmp");
        let e = engine(d.path(), sync, 64 * 1024 * 1024);
        let ours = write_rate(&e, threads, window);
        e.close(false).expect("close");
        row(name, "batches/s", ours, base_name, base);
    }

    table_header("engine recovery (WAL replay)");
    for mb in [16usize, 64, 256] {
        let d = tempfile::tempdir().expect("tmp");
        let e = engine(d.path(), SyncPolicy::Off, 1 << 30);
        let mut r = rng(9);
        let v = value(&mut r);
        let per = 24 + 150 + 40;
        let n = mb * 1024 * 1024 / per;
        for i in 0..n {
            let mut b = WriteBatch::new();
            b.put(ColumnFamily::Write, &key(i), i as u64 + 1, b"", &v);
            e.write(1, &b).expect("write");
        }
        e.close(false).expect("close");
        drop(e);
        let wal_bytes: u64 = std::fs::read_dir(d.path().join("engine/wal"))
            .expect("wal dir")
            .map(|f| f.expect("entry").metadata().expect("meta").len())
            .sum();
        let t0 = Instant::now();
        let e = engine(d.path(), SyncPolicy::Off, 1 << 30);
        let replay = t0.elapsed();
        assert_eq!(e.shard_info(1).expect("shard").write_sequence, n as u64);
        e.close(false).expect("close");
        // Baseline: reading the same WAL bytes (page cache warm, as for the replay).
        let t0 = Instant::now();
        let mut total = 0;
        for f in std::fs::read_dir(d.path().join("engine/wal")).expect("wal dir") {
            total += std::fs::read(f.expect("entry").path()).expect("read").len();
        }
        let read = t0.elapsed();
        assert!(
            total as u64 >= wal_bytes,
            "reopen starts a new segment; nothing is lost"
        );
        let mbs = wal_bytes as f64 / 1048576.0;
        row(
            &format!(
                "replay {mbs:.0} MiB of WAL ({n} batches) in {} ms",
                replay.as_millis()
            ),
            "MB/s",
            mbs / replay.as_secs_f64(),
            "read the WAL files",
            mbs / read.as_secs_f64(),
        );
    }
}
