//! The block cache's loader threads (`MokaBlockCache::with_read_ahead`): a bounded queue that
//! refuses batches when full and runs every batch it accepted, a real scan that hands them
//! batches and reads exactly what a scan without them reads, and settings out of bounds
//! refused by the cache and by the engine.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

#[path = "common/compressed_table.rs"]
mod compressed_table;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use bytes::Bytes;
use kvengine::{Engine, EngineOptions, Error, LocalDfs, MokaBlockCache, ReadAhead};
use sst::{BlockCache, Table};

const ONE_LOADER: ReadAhead = ReadAhead {
    blocks: 4,
    threads: 1,
};

#[test]
fn a_busy_loader_queue_refuses_batches_and_runs_every_batch_it_accepted() {
    let cache = MokaBlockCache::with_read_ahead(1 << 20, ONE_LOADER).unwrap();
    assert_eq!(cache.read_ahead_blocks(), 4);
    // Hold the only loader inside a batch, so that what follows can only queue.
    let (started_tx, started) = mpsc::channel();
    let (release, released) = mpsc::channel::<()>();
    assert!(cache.read_ahead(Box::new(move || {
        started_tx.send(()).unwrap();
        released.recv().unwrap();
    })));
    started.recv_timeout(Duration::from_secs(10)).unwrap();

    let ran = Arc::new(AtomicUsize::new(0));
    let mut accepted = 0u64;
    let mut refused = 0u64;
    for _ in 0..1000 {
        let ran = ran.clone();
        match cache.read_ahead(Box::new(move || {
            ran.fetch_add(1, Ordering::SeqCst);
        })) {
            true if refused == 0 => accepted += 1,
            true => panic!("a batch was accepted after one was refused, with the loader busy"),
            false => refused += 1,
        }
    }
    assert_eq!(
        accepted,
        ReadAhead::QUEUE_PER_THREAD as u64,
        "the queue holds its bound's worth of batches, then refuses"
    );
    assert_eq!(refused, 1000 - accepted);
    let stats = cache.stats();
    assert_eq!(stats.read_ahead_queued, accepted + 1);
    assert_eq!(stats.read_ahead_refused, refused);

    release.send(()).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while (ran.load(Ordering::SeqCst) as u64) < accepted {
        assert!(
            std::time::Instant::now() < deadline,
            "only {} of {accepted} batches ran",
            ran.load(Ordering::SeqCst)
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_cache_without_loaders_refuses_every_batch() {
    for cache in [
        MokaBlockCache::new(1 << 20),
        MokaBlockCache::with_read_ahead(1 << 20, ReadAhead::OFF).unwrap(),
        MokaBlockCache::with_read_ahead(
            1 << 20,
            ReadAhead {
                blocks: 8,
                threads: 0,
            },
        )
        .unwrap(),
    ] {
        assert_eq!(cache.read_ahead_blocks(), 0);
        assert!(!cache.read_ahead(Box::new(|| panic!("no loader may run this"))));
    }
}

#[test]
fn read_ahead_settings_out_of_bounds_are_refused() {
    let too_deep = ReadAhead {
        blocks: ReadAhead::MAX_BLOCKS + 1,
        threads: 1,
    };
    let err = MokaBlockCache::with_read_ahead(1 << 20, too_deep)
        .err()
        .unwrap();
    assert!(err.to_string().contains("found=257"), "{err}");
    let too_many = ReadAhead {
        blocks: 8,
        threads: ReadAhead::MAX_THREADS + 1,
    };
    assert!(MokaBlockCache::with_read_ahead(1 << 20, too_many).is_err());

    let dir = tempfile::tempdir().unwrap();
    let mut o = EngineOptions::new(dir.path().join("engine"));
    o.read_ahead = too_deep;
    let dfs = Arc::new(LocalDfs::open(dir.path().join("dfs")).unwrap());
    match Engine::open(o, dfs) {
        Err(Error::Config { what }) => assert!(what.contains("read-ahead blocks"), "{what}"),
        Err(other) => panic!("expected a config error, found {other}"),
        Ok(_) => panic!("an engine opened with {too_deep:?}"),
    }
}

/// A positioned table of 5,000 rows in many compressed blocks, read through `cache`, and
/// the bytes of the same table for an in-memory reference.
fn table_in(dir: &std::path::Path, cache: Arc<MokaBlockCache>) -> (Table, Vec<u8>) {
    let (_, data) = compressed_table::build(5000, 1);
    let path = dir.join("42.sst");
    std::fs::write(&path, &data).unwrap();
    let table = Table::open_local(42, std::fs::File::open(&path).unwrap(), Some(cache)).unwrap();
    assert!(table.reads_positioned());
    (table, data)
}

#[test]
fn a_scan_through_real_loaders_reads_what_a_scan_without_them_reads() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Arc::new(MokaBlockCache::with_read_ahead(64 << 20, ONE_LOADER).unwrap());
    let (table, data) = table_in(dir.path(), cache.clone());
    let reference = Table::open(42, Bytes::from(data)).unwrap();
    let blocks = table.block_sizes().len() as u64;
    assert!(blocks > 20, "the test needs many blocks, found {blocks}");

    let scan = |t: &Table, lo: &[u8], hi: &[u8], reverse: bool| {
        let mut it = t.iter(u64::MAX);
        it.bound_read_ahead(lo, hi);
        let mut out = Vec::new();
        if reverse {
            it.seek_for_prev(hi).unwrap();
        } else {
            it.seek(lo).unwrap();
        }
        while it.valid() && it.key() >= lo && it.key() < hi {
            out.push((it.key().to_vec(), it.value().to_vec()));
            if reverse {
                it.prev().unwrap();
            } else {
                it.next().unwrap();
            }
        }
        out
    };
    for (lo, hi, reverse) in [
        (&b"key001000"[..], &b"key004000"[..], false),
        (b"key000000", b"key999999", true),
        (b"key000000", b"key999999", false),
    ] {
        assert_eq!(
            scan(&table, lo, hi, reverse),
            scan(&reference, lo, hi, reverse)
        );
    }
    let stats = cache.stats();
    // The first batch meets an empty queue, so at least one was handed over.
    assert!(stats.read_ahead_queued > 0, "{stats:?}");
    cache.run_pending_tasks();
    assert_eq!(
        cache.stats().entry_count,
        blocks,
        "every block read is cached"
    );
}

/// Holds the only loader of `cache` until the returned sender sends (or drops).
fn hold_loader(cache: &MokaBlockCache) -> mpsc::Sender<()> {
    let (started_tx, started) = mpsc::channel();
    let (release, released) = mpsc::channel::<()>();
    assert!(cache.read_ahead(Box::new(move || {
        started_tx.send(()).unwrap();
        let _ = released.recv();
    })));
    started.recv_timeout(Duration::from_secs(10)).unwrap();
    release
}

/// Waits until every batch queued so far ran (a batch queued last runs last on one loader).
fn drain(cache: &MokaBlockCache) {
    let (done_tx, done) = mpsc::channel();
    assert!(cache.read_ahead(Box::new(move || done_tx.send(()).unwrap())));
    done.recv_timeout(Duration::from_secs(10)).unwrap();
}

/// Scans `table` from its first row into its second block, and no further.
fn scan_into_the_second_block(table: &Table) {
    let second = table.block_first_keys()[1].clone();
    let mut it = table.iter(u64::MAX);
    it.bound_read_ahead(b"", b"");
    it.seek_to_first().unwrap();
    while it.key() <= second.as_slice() {
        it.next().unwrap();
    }
}

/// A table in `dir` behind a cache with one loader, which is held (the returned sender releases
/// it), and a scan that read into the table's second block: its first batch waits in the queue.
fn a_batch_queued_behind_a_held_loader(
    dir: &std::path::Path,
) -> (Arc<MokaBlockCache>, Table, mpsc::Sender<()>) {
    let cache = Arc::new(MokaBlockCache::with_read_ahead(64 << 20, ONE_LOADER).unwrap());
    let (table, _) = table_in(dir, cache.clone());
    let release = hold_loader(&cache);
    scan_into_the_second_block(&table);
    (cache, table, release)
}

#[test]
fn the_loader_loads_the_batch_a_scan_queued_when_it_moved_into_its_second_block() {
    let dir = tempfile::tempdir().unwrap();
    let (cache, table, release) = a_batch_queued_behind_a_held_loader(dir.path());
    cache.run_pending_tasks();
    assert_eq!(cache.stats().entry_count, 2, "the scan's own two blocks");
    release.send(()).unwrap();
    drain(&cache);
    cache.run_pending_tasks();
    // The first batch is the whole depth: blocks 2..6.
    assert_eq!(cache.stats().entry_count, 2 + ONE_LOADER.blocks as u64);
    let misses = cache.stats().misses;
    let mut it = table.iter(u64::MAX);
    it.seek(&table.block_first_keys()[2 + ONE_LOADER.blocks - 1])
        .unwrap();
    assert!(it.valid());
    assert_eq!(
        cache.stats().misses,
        misses,
        "the loaded blocks are read from the cache"
    );
}

#[test]
fn a_queued_batch_holds_no_handle_of_its_table_and_loads_nothing_once_it_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let (cache, table, release) = a_batch_queued_behind_a_held_loader(dir.path());
    assert_eq!(cache.stats().read_ahead_queued, 2, "{:?}", cache.stats());
    // File GC deletes a retired table once its handle is the last: the queued batch must not
    // count.
    assert_eq!(table.handle_count(), 1);
    drop(table);

    release.send(()).unwrap();
    drain(&cache);
    cache.run_pending_tasks();
    assert_eq!(
        cache.stats().entry_count,
        2,
        "only the scan's own two blocks: the batch of a dropped table loads nothing"
    );
}

#[test]
fn a_batch_that_panics_does_not_stop_its_loader() {
    let cache = MokaBlockCache::with_read_ahead(1 << 20, ONE_LOADER).unwrap();
    assert!(cache.read_ahead(Box::new(|| panic!("a bug in a batch"))));
    let (done_tx, done) = mpsc::channel();
    assert!(cache.read_ahead(Box::new(move || done_tx.send(()).unwrap())));
    done.recv_timeout(Duration::from_secs(10))
        .expect("the loader runs the batch after the one that panicked");
}
