//! Each sync policy makes appends durable as documented, and concurrent appenders lose and
//! duplicate nothing.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::path::Path;
use std::sync::{Arc, Barrier};

use kvengine::wal::{SyncPolicy, Wal, WalOptions, WalRecord};

fn options(dir: &Path, sync: SyncPolicy) -> WalOptions {
    WalOptions {
        dir: dir.to_path_buf(),
        segment_size: 1 << 20,
        sync,
    }
}

fn replay(opts: WalOptions) -> Vec<WalRecord> {
    let mut records = Vec::new();
    Wal::open(opts, |r| {
        records.push(r);
        Ok(())
    })
    .unwrap();
    records
}

/// Appends `per_thread` records from each of `threads` threads at once (thread i writes shard
/// i, sequences 1..=per_thread), then checks every record replays exactly once and in order
/// within its shard.
fn append_concurrently(wal: Wal, threads: u64, per_thread: u64) -> Arc<Wal> {
    let wal = Arc::new(wal);
    let start = Arc::new(Barrier::new(threads as usize));
    let handles: Vec<_> = (0..threads)
        .map(|shard| {
            let (wal, start) = (wal.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                for sequence in 1..=per_thread {
                    wal.append(shard, sequence, format!("{shard}:{sequence}").as_bytes())
                        .unwrap();
                }
            })
        })
        .collect();
    handles.into_iter().for_each(|h| h.join().unwrap());
    wal
}

fn assert_each_shard_replays_once_in_order(records: &[WalRecord], threads: u64, per_thread: u64) {
    assert_eq!(records.len() as u64, threads * per_thread);
    for shard in 0..threads {
        let sequences: Vec<u64> = records
            .iter()
            .filter(|r| r.shard_id == shard)
            .map(|r| r.sequence)
            .collect();
        assert_eq!(
            sequences,
            (1..=per_thread).collect::<Vec<_>>(),
            "shard={shard}"
        );
    }
    for r in records {
        assert_eq!(
            r.payload,
            format!("{}:{}", r.shard_id, r.sequence).as_bytes()
        );
    }
}

#[test]
fn every_batch_syncs_once_per_append() {
    let dir = tempfile::tempdir().unwrap();
    let opts = options(dir.path(), SyncPolicy::EveryBatch);
    let wal = Wal::open(opts.clone(), |_| Ok(())).unwrap();
    for sequence in 1..=20 {
        wal.append(1, sequence, b"x").unwrap();
    }
    let stats = wal.stats();
    assert_eq!((stats.records, stats.fsyncs), (20, 20));
    drop(wal);
    assert_eq!(replay(opts).len(), 20);
}

#[test]
fn every_batch_concurrent_appends_replay_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let opts = options(dir.path(), SyncPolicy::EveryBatch);
    let wal = append_concurrently(Wal::open(opts.clone(), |_| Ok(())).unwrap(), 4, 50);
    assert_eq!(wal.stats().fsyncs, 200);
    drop(wal);
    assert_each_shard_replays_once_in_order(&replay(opts), 4, 50);
}

#[test]
fn group_commit_appends_every_record_exactly_once_with_fewer_fsyncs_than_records() {
    let dir = tempfile::tempdir().unwrap();
    let opts = options(dir.path(), SyncPolicy::GroupCommit);
    let (threads, per_thread) = (8, 150);
    let wal = append_concurrently(
        Wal::open(opts.clone(), |_| Ok(())).unwrap(),
        threads,
        per_thread,
    );
    let stats = wal.stats();
    assert_eq!(stats.records, threads * per_thread);
    assert!(
        stats.fsyncs < stats.records,
        "fsyncs={} records={}",
        stats.fsyncs,
        stats.records
    );
    assert!(stats.fsyncs > 0);
    drop(wal);
    assert_each_shard_replays_once_in_order(&replay(opts), threads, per_thread);
}

#[test]
fn group_commit_lone_writer_syncs_each_append() {
    let dir = tempfile::tempdir().unwrap();
    let wal = Wal::open(options(dir.path(), SyncPolicy::GroupCommit), |_| Ok(())).unwrap();
    for sequence in 1..=10 {
        wal.append(1, sequence, b"x").unwrap();
    }
    // Nobody to share with: every append needed its own sync.
    assert_eq!(wal.stats().fsyncs, 10);
}

#[test]
fn off_policy_never_syncs_yet_records_replay_after_a_process_restart() {
    let dir = tempfile::tempdir().unwrap();
    let opts = options(dir.path(), SyncPolicy::Off);
    let wal = append_concurrently(Wal::open(opts.clone(), |_| Ok(())).unwrap(), 4, 50);
    assert_eq!(wal.stats().fsyncs, 0);
    drop(wal);
    assert_each_shard_replays_once_in_order(&replay(opts), 4, 50);
}

#[test]
fn a_roll_seals_the_segment_with_an_fsync_even_when_sync_is_off() {
    let dir = tempfile::tempdir().unwrap();
    let wal = Wal::open(options(dir.path(), SyncPolicy::Off), |_| Ok(())).unwrap();
    wal.append(1, 1, b"x").unwrap();
    wal.roll().unwrap();
    assert_eq!(wal.stats().fsyncs, 1);
}

#[test]
fn stats_count_records_bytes_and_segments() {
    let dir = tempfile::tempdir().unwrap();
    let wal = Wal::open(options(dir.path(), SyncPolicy::Off), |_| Ok(())).unwrap();
    wal.append(1, 1, b"abc").unwrap();
    wal.append(2, 1, b"").unwrap();
    wal.roll().unwrap();
    let stats = wal.stats();
    assert_eq!(stats.records, 2);
    // Each record: 12-byte frame header + 16-byte shard id and sequence + payload.
    assert_eq!(stats.bytes_written, (28 + 3) + 28);
    assert_eq!(stats.segments, 2);
}

#[test]
fn each_append_can_choose_its_durability_over_the_policy() {
    use kvengine::wal::Durability;
    for policy in SyncPolicy::ALL {
        let dir = tempfile::tempdir().unwrap();
        let opts = options(dir.path(), policy);
        let wal = Wal::open(opts.clone(), |_| Ok(())).unwrap();
        let fsyncs = |wal: &Wal| wal.stats().fsyncs;
        wal.append_with(1, 1, b"a", Durability::Sync).unwrap();
        assert_eq!(fsyncs(&wal), 1, "{policy}: a synced write flushes");
        wal.append_with(1, 2, b"b", Durability::Buffered).unwrap();
        assert_eq!(fsyncs(&wal), 1, "{policy}: a buffered write does not");
        wal.append_with(1, 3, b"c", Durability::Policy).unwrap();
        let by_policy = u64::from(policy != SyncPolicy::Off);
        assert_eq!(fsyncs(&wal), 1 + by_policy, "{policy}: the policy's own");
        drop(wal);
        let payloads: Vec<Vec<u8>> = replay(opts)
            .into_iter()
            .map(|r| r.payload.to_vec())
            .collect();
        assert_eq!(
            payloads,
            [b"a".to_vec(), b"b".to_vec(), b"c".to_vec()],
            "{policy}"
        );
    }
}
