//! Proposals a caller's own round carries (`Router::propose_batch`, `Router::write`) on a
//! one-voter store. What it proves: concurrent writers, whichever thread runs the round that
//! carries their entry, are each answered with their own index, in the order of the log; a
//! proposal that fails in a batch fails alone; a lone writer is answered before its call
//! returns (no store-thread round trip); on a store of many regions, the status a writer reads
//! after its write already counts it, whichever region it wrote to; and a stopped store
//! answers `Stopped` at once.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use kvengine::raft_log::RaftLogOptions;
use kvengine::{ColumnFamily, Engine, EngineOptions, LocalDfs, LogMode, SyncPolicy, WriteBatch};
use raftstore::{Applied, Proposal, RaftConfig, RaftStore, RaftStoreError, start_standalone};
use wire::raft_cmd::Cmd;

const TIMEOUT: Duration = Duration::from_secs(10);

fn open(dir: &Path) -> (Engine, RaftStore) {
    open_regions(dir, &[(1, Vec::new(), Vec::new())])
}

fn open_regions(dir: &Path, regions: &[(u64, Vec<u8>, Vec<u8>)]) -> (Engine, RaftStore) {
    let mut opts = EngineOptions::new(dir.join("engine"));
    opts.log_mode = LogMode::External;
    let engine = Engine::open(opts, Arc::new(LocalDfs::open(dir.join("dfs")).unwrap())).unwrap();
    let store = start_standalone(
        engine.clone(),
        RaftLogOptions {
            sync: SyncPolicy::Off,
            ..RaftLogOptions::new(dir.join("raft"))
        },
        regions,
        RaftConfig {
            tick_interval: types::ReadableDuration::millis(10),
            ..RaftConfig::default()
        },
    )
    .unwrap();
    (engine, store)
}

fn put(key: &str, ts: u64) -> WriteBatch {
    let mut b = WriteBatch::new();
    b.put(ColumnFamily::Write, key.as_bytes(), ts, b"", b"v");
    b
}

type Answer = mpsc::Receiver<Result<Applied, RaftStoreError>>;

/// A proposal of `cmd` whose answer arrives on the returned receiver.
fn proposal(region_ver: Option<u64>, cmd: Cmd) -> (Proposal, Answer) {
    let (tx, rx) = mpsc::sync_channel(1);
    let p = Proposal {
        region_id: 1,
        region_ver,
        cmd,
        cb: Box::new(move |r| {
            let _ = tx.send(r);
        }),
    };
    (p, rx)
}

fn rows(engine: &Engine) -> usize {
    let snap = engine.snapshot(1).unwrap();
    let mut it = snap
        .iter(ColumnFamily::Write, b"", b"", u64::MAX, false)
        .unwrap();
    let mut n = 0;
    while it.valid() {
        n += 1;
        it.next().unwrap();
    }
    n
}

#[test]
fn concurrent_writers_each_get_their_own_index_in_log_order() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, store) = open(dir.path());
    let (threads, per_thread) = (4usize, 200usize);
    let router = store.router();
    let start = router.status(1).unwrap().applied;
    let indexes: Vec<Vec<u64>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    (0..per_thread)
                        .map(|i| {
                            let b = put(&format!("t{t}-{i:04}"), 10);
                            router.write(1, None, &b, TIMEOUT).unwrap().index
                        })
                        .collect::<Vec<u64>>()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (t, mine) in indexes.iter().enumerate() {
        // One writer's writes are sequential, so the log holds them in call order.
        assert!(
            mine.windows(2).all(|w| w[0] < w[1]),
            "writer {t} got indexes out of order: {mine:?}"
        );
    }
    let mut all: Vec<u64> = indexes.into_iter().flatten().collect();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), threads * per_thread, "two writes got one index");
    assert!(all[0] > start, "an index at or below the start {start}");
    // The router's status is published at the end of the round that applied the writes, just
    // after their callbacks answered (the round may run on another writer's thread).
    let last = *all.last().unwrap();
    let deadline = std::time::Instant::now() + TIMEOUT;
    while router.status(1).unwrap().applied < last {
        assert!(
            std::time::Instant::now() < deadline,
            "the status never showed index {last} applied"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert_eq!(rows(&engine), threads * per_thread);
}

#[test]
fn a_failing_proposal_in_a_batch_fails_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, store) = open(dir.path());
    let router = store.router();
    let ver = engine.snapshot(1).unwrap().ver();
    let (first, first_rx) = proposal(None, Cmd::Write(put("a", 10).encode()));
    // Applied as a no-op at its index (the epoch it names is not the region's).
    let (stale, stale_rx) = proposal(Some(ver + 7), Cmd::Write(put("b", 10).encode()));
    // Refused before it takes an index (above the 8 MiB default limit).
    let mut big = WriteBatch::new();
    big.put(ColumnFamily::Write, b"big", 10, b"", &vec![7u8; 9 << 20]);
    let (too_large, too_large_rx) = proposal(None, Cmd::Write(big.encode()));
    let (last, last_rx) = proposal(Some(ver), Cmd::Write(put("c", 10).encode()));
    router.propose_batch(vec![first, stale, too_large, last]);

    let first = first_rx.recv_timeout(TIMEOUT).unwrap().unwrap();
    let stale = stale_rx.recv_timeout(TIMEOUT).unwrap().unwrap_err();
    let too_large = too_large_rx.recv_timeout(TIMEOUT).unwrap().unwrap_err();
    let last = last_rx.recv_timeout(TIMEOUT).unwrap().unwrap();
    assert!(
        matches!(stale, RaftStoreError::EpochNotMatch { expected, found, .. } if expected == ver + 7 && found == ver),
        "{stale}"
    );
    assert!(
        matches!(&too_large, RaftStoreError::InvalidCommand { detail, .. } if detail.contains("raft.max-entry-size")),
        "{too_large}"
    );
    // In batch order, the stale entry's index between them.
    assert_eq!(last.index, first.index + 2);
    assert_eq!(rows(&engine), 2);
    let snap = engine.snapshot(1).unwrap();
    let holds = |key: &[u8]| {
        snap.get(ColumnFamily::Write, key, u64::MAX)
            .unwrap()
            .is_some()
    };
    assert!(holds(b"a") && !holds(b"b") && holds(b"c"));
}

#[test]
fn a_lone_writer_is_answered_before_propose_batch_returns() {
    let dir = tempfile::tempdir().unwrap();
    let (_engine, store) = open(dir.path());
    let router = store.router();
    router.write(1, None, &put("warm", 10), TIMEOUT).unwrap();
    // The store thread runs a round at least every tick (10 ms here, rounds take far less); a
    // write that meets one waits for the next round, so a few attempts may miss.
    let mut answered_at_once = 0;
    for i in 0..20 {
        let (p, rx) = proposal(None, Cmd::Write(put(&format!("k{i}"), 10).encode()));
        router.propose_batch(vec![p]);
        match rx.try_recv() {
            Ok(r) => {
                r.unwrap();
                answered_at_once += 1;
            }
            Err(_) => {
                rx.recv_timeout(TIMEOUT).unwrap().unwrap();
            }
        }
    }
    assert!(
        answered_at_once >= 15,
        "only {answered_at_once} of 20 writes were answered by their own caller's round"
    );
}

#[test]
fn on_a_store_of_many_regions_the_status_after_a_write_counts_it() {
    let dir = tempfile::tempdir().unwrap();
    let n = 20u64;
    let bound = |i: u64| format!("r{i:03}").into_bytes();
    let regions: Vec<(u64, Vec<u8>, Vec<u8>)> = (1..=n)
        .map(|i| {
            let start = if i == 1 { Vec::new() } else { bound(i) };
            let end = if i == n { Vec::new() } else { bound(i + 1) };
            (i, start, end)
        })
        .collect();
    let (_engine, store) = open_regions(dir.path(), &regions);
    let router = store.router();
    assert_eq!(router.regions().len(), n as usize);
    for round in 0..3 {
        for (id, start, _) in &regions {
            let mut key = start.clone();
            key.extend_from_slice(format!("-{round}").as_bytes());
            let mut b = WriteBatch::new();
            b.put(ColumnFamily::Write, &key, 10, b"", b"v");
            let at = router.write(*id, None, &b, TIMEOUT).unwrap().index;
            let status = router.status(*id).unwrap();
            assert!(
                status.applied >= at && status.serving,
                "region {id} published {status:?} after a write applied at {at}"
            );
        }
    }
}

#[test]
fn a_write_to_a_stopped_store_fails_as_stopped_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (_engine, store) = open(dir.path());
    store
        .router()
        .write(1, None, &put("a", 10), TIMEOUT)
        .unwrap();
    store.stop();
    let t0 = Instant::now();
    let err = store
        .router()
        .write(1, None, &put("b", 10), TIMEOUT)
        .unwrap_err();
    assert!(matches!(err, RaftStoreError::Stopped { .. }), "{err}");
    assert!(
        t0.elapsed() < TIMEOUT,
        "the write waited out its timeout instead of failing"
    );
}
