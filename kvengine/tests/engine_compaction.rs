//! Compaction: L0 into levels with every read unchanged, GC at the safe point, and deletion of
//! replaced files only after the last snapshot reading them is gone.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::collections::BTreeSet;
use std::sync::Arc;

use kvengine::{
    ColumnFamily, Dfs, Engine, EngineOptions, FileId, LocalDfs, SyncPolicy, TableFormatVersion,
    WriteBatch,
};

fn open(dir: &std::path::Path) -> (Engine, Arc<LocalDfs>) {
    open_with(dir, |_| {})
}

/// [`open`] with `tune` applied to the options last.
fn open_with(
    dir: &std::path::Path,
    tune: impl FnOnce(&mut EngineOptions),
) -> (Engine, Arc<LocalDfs>) {
    let mut o = EngineOptions::new(dir.join("engine"));
    o.wal_sync = SyncPolicy::Off;
    o.memtable_size = 8 * 1024;
    o.block_size = 512;
    o.l0_compaction_files = 100; // only explicit compactions
    o.base_level_size = 1 << 30;
    o.target_file_size = 4 * 1024;
    o.compaction_threads = 0;
    tune(&mut o);
    let dfs = Arc::new(LocalDfs::open(dir.join("dfs")).unwrap());
    let e = Engine::open(o, dfs.clone()).unwrap();
    if e.shard_ids().is_empty() {
        e.create_shard(1, b"", b"").unwrap();
    }
    (e, dfs)
}

fn key(i: u64) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

/// Writes versions 10, 20, 30 of 300 keys (every 7th deleted at 30), flushing between rounds.
fn load(e: &Engine) {
    for round in 1..=3u64 {
        for i in 0..300u64 {
            let mut b = WriteBatch::new();
            if round == 3 && i % 7 == 0 {
                b.delete(ColumnFamily::Write, &key(i), round * 10, b"");
            } else {
                b.put(
                    ColumnFamily::Write,
                    &key(i),
                    round * 10,
                    b"",
                    format!("v{round}-{i}").as_bytes(),
                );
            }
            e.write(1, &b).unwrap();
        }
        e.flush_shard(1).unwrap();
    }
}

fn expected(i: u64, ts: u64) -> Option<Vec<u8>> {
    let round = (ts / 10).min(3);
    if round == 0 || (round == 3 && i.is_multiple_of(7)) {
        return None;
    }
    Some(format!("v{round}-{i}").into_bytes())
}

fn check_reads(e: &Engine, timestamps: &[u64]) {
    let snap = e.snapshot(1).unwrap();
    for &ts in timestamps {
        let mut it = snap.iter(ColumnFamily::Write, b"", b"", ts, false).unwrap();
        let mut got = Vec::new();
        while it.valid() {
            got.push((it.key().to_vec(), it.value().to_vec()));
            it.next().unwrap();
        }
        let want: Vec<_> = (0..300)
            .filter_map(|i| expected(i, ts).map(|v| (key(i), v)))
            .collect();
        assert_eq!(got, want, "scan at ts={ts}");
        for i in (0..300).step_by(13) {
            let got = snap
                .get(ColumnFamily::Write, &key(i), ts)
                .unwrap()
                .map(|it| it.value.to_vec());
            assert_eq!(got, expected(i, ts), "get key={i} ts={ts}");
        }
    }
}

#[test]
fn compaction_moves_l0_into_levels_without_changing_any_read() {
    let dir = tempfile::tempdir().unwrap();
    let (e, _) = open(dir.path());
    load(&e);
    let before = e.shard_info(1).unwrap();
    assert!(before.l0_files >= 3);
    check_reads(&e, &[5, 15, 25, 35]);
    assert!(e.compact_shard(1, true).unwrap() >= 1);
    let after = e.shard_info(1).unwrap();
    assert_eq!(after.l0_files, 0);
    assert!(
        after.level_files[ColumnFamily::Write.index()][0] >= 2,
        "outputs are cut by target size"
    );
    assert_eq!(
        after.snap_version(),
        before.snap_version(),
        "compaction keeps the data version"
    );
    check_reads(&e, &[5, 15, 25, 35]);
    // And after a reopen.
    e.close(false).unwrap();
    drop(e);
    let (e, _) = open(dir.path());
    check_reads(&e, &[5, 15, 25, 35]);
}

#[test]
fn gc_at_the_safe_point_keeps_reads_above_it_and_drops_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let (e, dfs) = open(dir.path());
    load(&e);
    e.set_gc_safe_point(30);
    e.compact_shard(1, true).unwrap();
    check_reads(&e, &[30, 35, 100]);
    // Only the newest version at or below 30 survives, and deleted keys vanish at the bottom.
    let mut entries = 0;
    let mut old = 0;
    let mut tombstones = 0;
    for id in e.live_file_ids() {
        let t = sst::Table::open(id, dfs.get(FileId(id)).unwrap()).unwrap();
        entries += t.properties().entries;
        old += t.properties().old_entries;
        tombstones += t.properties().tombstones;
    }
    let deleted = (0..300u64).filter(|i| i % 7 == 0).count() as u64;
    assert_eq!(entries, 300 - deleted);
    assert_eq!(old, 0);
    assert_eq!(tombstones, 0);
}

#[test]
fn a_snapshot_from_before_a_compaction_still_reads_and_holds_its_files() {
    let dir = tempfile::tempdir().unwrap();
    let (e, dfs) = open(dir.path());
    load(&e);
    let old_files: BTreeSet<u64> = e.live_file_ids();
    let snap = e.snapshot(1).unwrap();
    e.set_gc_safe_point(30);
    e.compact_shard(1, true).unwrap();
    e.collect_garbage();
    // The replaced files are still in the object store: the snapshot reads them.
    let stored: BTreeSet<u64> = dfs.list().unwrap().into_iter().map(FileId::get).collect();
    assert!(
        old_files.is_subset(&stored),
        "a file the snapshot reads was deleted"
    );
    assert!(e.pending_deletes() > 0);
    for i in (0..300u64).step_by(11) {
        let got = snap
            .get(ColumnFamily::Write, &key(i), 15)
            .unwrap()
            .map(|it| it.value.to_vec());
        assert_eq!(got, expected(i, 15), "old snapshot get key={i}");
    }
    drop(snap);
    e.collect_garbage();
    assert_eq!(e.pending_deletes(), 0);
    let stored: BTreeSet<u64> = dfs.list().unwrap().into_iter().map(FileId::get).collect();
    assert_eq!(
        stored,
        e.live_file_ids(),
        "replaced files deleted once unused"
    );
}

/// Counts the entries and tombstones of every live table.
fn live_entries_and_tombstones(e: &Engine, dfs: &LocalDfs) -> (u64, u64) {
    let (mut entries, mut tombstones) = (0, 0);
    for id in e.live_file_ids() {
        let t = sst::Table::open(id, dfs.get(FileId(id)).unwrap()).unwrap();
        entries += t.properties().entries;
        tombstones += t.properties().tombstones;
    }
    (entries, tombstones)
}

#[test]
fn a_full_compaction_drops_the_tombstones_that_a_due_compaction_keeps_above_deeper_data() {
    let dir = tempfile::tempdir().unwrap();
    // Rounds 1 and 2 go down to L2: a tiny L1 target pushes L1's tables on.
    let mut o = EngineOptions::new(dir.path().join("engine"));
    o.wal_sync = SyncPolicy::Off;
    o.memtable_size = 8 * 1024;
    o.block_size = 512;
    o.l0_compaction_files = 100;
    o.base_level_size = 1024;
    o.target_file_size = 1024;
    o.compaction_threads = 0;
    let dfs = Arc::new(LocalDfs::open(dir.path().join("dfs")).unwrap());
    let e = Engine::open(o, dfs.clone()).unwrap();
    e.create_shard(1, b"", b"").unwrap();
    for round in 1..=2u64 {
        for i in 0..300u64 {
            let mut b = WriteBatch::new();
            let v = format!("v{round}-{i}");
            b.put(ColumnFamily::Write, &key(i), round * 10, b"", v.as_bytes());
            e.write(1, &b).unwrap();
        }
        e.flush_shard(1).unwrap();
    }
    e.compact_shard(1, true).unwrap();
    let write = ColumnFamily::Write.index();
    assert!(
        e.shard_info(1).unwrap().level_files[write][1] > 0,
        "the setup puts data in L2"
    );
    e.close(false).unwrap();
    drop(e);

    // Round 3 (every 7th key deleted) with the usual large levels: its due compaction lands in
    // L1, above L2's older versions, so it must keep its tombstones.
    let (e, dfs) = open(dir.path());
    for i in 0..300u64 {
        let mut b = WriteBatch::new();
        if i % 7 == 0 {
            b.delete(ColumnFamily::Write, &key(i), 30, b"");
        } else {
            let v = format!("v3-{i}");
            b.put(ColumnFamily::Write, &key(i), 30, b"", v.as_bytes());
        }
        e.write(1, &b).unwrap();
    }
    e.flush_shard(1).unwrap();
    e.set_gc_safe_point(30);
    e.compact_shard(1, true).unwrap();
    let info = e.shard_info(1).unwrap();
    assert!(info.level_files[write][0] > 0 && info.level_files[write][1] > 0);
    let deleted = (0..300u64).filter(|i| i % 7 == 0).count() as u64;
    let (_, tombstones) = live_entries_and_tombstones(&e, &dfs);
    assert_eq!(tombstones, deleted, "L1 keeps tombstones above L2");

    let n = e.compact_shard_full(1).unwrap();
    assert!(n >= 1, "a full compaction ran");
    // Each step collects what it replaced: nothing else is left to delete the files later
    // (no background threads here).
    let stored: BTreeSet<u64> = dfs.list().unwrap().into_iter().map(FileId::get).collect();
    assert_eq!(
        stored,
        e.live_file_ids(),
        "the full compaction left replaced files"
    );
    let info = e.shard_info(1).unwrap();
    assert_eq!(info.l0_files, 0);
    assert_eq!(levels_used(&e), 1, "every table in one level: {info:?}");
    assert_eq!(
        live_entries_and_tombstones(&e, &dfs),
        (300 - deleted, 0),
        "only the newest live version of each key is left"
    );
    check_reads(&e, &[30, 35, 100]);
    assert_eq!(
        e.compact_shard_full(1).unwrap(),
        0,
        "a compacted shard has nothing more to do"
    );
    e.collect_garbage();
    let stored: BTreeSet<u64> = dfs.list().unwrap().into_iter().map(FileId::get).collect();
    assert_eq!(stored, e.live_file_ids(), "the replaced files are deleted");
}

/// The levels of the WRITE column family that hold tables.
fn levels_used(e: &Engine) -> usize {
    e.shard_info(1).unwrap().level_files[ColumnFamily::Write.index()]
        .iter()
        .filter(|&&f| f > 0)
        .count()
}

#[test]
fn a_shard_already_in_one_level_gets_its_space_back_once_the_safe_point_passes_the_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let (e, dfs) = open(dir.path());
    load(&e);
    // A due compaction with no safe point yet: L1 keeps every version and the tombstones.
    e.compact_shard(1, true).unwrap();
    assert_eq!(levels_used(&e), 1);
    let deleted = (0..300u64).filter(|i| i % 7 == 0).count() as u64;
    assert_eq!(live_entries_and_tombstones(&e, &dfs).1, deleted);

    // Nothing GC may drop below the safe point yet: nothing is rewritten.
    e.set_gc_safe_point(5);
    assert_eq!(e.compact_shard_full(1).unwrap(), 0);

    e.set_gc_safe_point(30);
    assert_eq!(e.compact_shard_full(1).unwrap(), 1);
    assert_eq!(levels_used(&e), 1);
    assert_eq!(
        live_entries_and_tombstones(&e, &dfs),
        (300 - deleted, 0),
        "the deleted keys and the versions under the safe point are gone"
    );
    check_reads(&e, &[30, 35, 100]);
    assert_eq!(e.compact_shard_full(1).unwrap(), 0, "nothing left to drop");
}

#[test]
fn a_full_compaction_ends_while_a_writer_keeps_flushing() {
    let dir = tempfile::tempdir().unwrap();
    let (e, _) = open(dir.path());
    load(&e);
    e.set_gc_safe_point(30);
    let e = Arc::new(e);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (e, stop) = (e.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut version = 100;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let mut b = WriteBatch::new();
                for i in 300..340u64 {
                    b.put(ColumnFamily::Write, &key(i), version, b"", b"later");
                }
                e.write(1, &b).unwrap();
                e.flush_shard(1).unwrap();
                version += 1;
            }
        })
    };
    // Each call is one pass over the files it started with, however many flushes land.
    for _ in 0..3 {
        e.compact_shard_full(1).unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().unwrap();
    check_reads(&e, &[30, 35]);
}

fn live_formats(e: &Engine, dfs: &LocalDfs) -> BTreeSet<TableFormatVersion> {
    e.live_file_ids()
        .into_iter()
        .map(|id| {
            let data = dfs.get(FileId(id)).unwrap();
            // L0 files hold one table section per column family; level files are one table.
            match sst::L0Table::open(id, data.clone()) {
                Ok(l0) => l0.cf(ColumnFamily::Write).unwrap().format_version(),
                Err(_) => sst::Table::open(id, data).unwrap().format_version(),
            }
        })
        .collect()
}

#[test]
fn tables_of_a_pinned_older_format_stay_readable_and_are_rewritten_in_the_newest() {
    let dir = tempfile::tempdir().unwrap();
    {
        // A node pinned to version 1 during a rolling upgrade.
        let (e, dfs) = open_with(dir.path(), |o| {
            o.table_format_version = TableFormatVersion::V1
        });
        load(&e);
        e.compact_shard(1, true).unwrap();
        assert_eq!(
            live_formats(&e, &dfs),
            BTreeSet::from([TableFormatVersion::V1])
        );
        check_reads(&e, &[10, 20, 30, 35]);
    }
    // The upgrade done: the same files open under the default, and what it writes is new.
    let (e, dfs) = open(dir.path());
    check_reads(&e, &[10, 20, 30, 35]);
    e.set_gc_safe_point(30);
    assert!(e.compact_shard_full(1).unwrap() > 0);
    assert_eq!(
        live_formats(&e, &dfs),
        BTreeSet::from([TableFormatVersion::NEWEST])
    );
    check_reads(&e, &[30, 35]);
}

#[test]
fn a_full_compaction_reaches_the_bottom_while_background_compactions_are_due() {
    for round in 0..4 {
        let dir = tempfile::tempdir().unwrap();
        // Small levels and a background thread: compactions keep coming due while the load
        // flushes, and are still running when the full compaction starts.
        let (e, dfs) = open_with(dir.path(), |o| {
            o.compaction_threads = 1;
            o.l0_compaction_files = 2;
            o.base_level_size = 8 * 1024;
        });
        load(&e);
        e.set_gc_safe_point(30);
        e.compact_shard_full(1).unwrap();
        let deleted = (0..300u64).filter(|i| i % 7 == 0).count() as u64;
        assert_eq!(
            live_entries_and_tombstones(&e, &dfs),
            (300 - deleted, 0),
            "round {round}: the last step was not bottommost"
        );
        check_reads(&e, &[30, 35]);
    }
}

/// A compaction offload for shard 1 only that holds the job until the test lets it go, then
/// declines it (the engine compacts here): a manual compaction of shard 1 parked mid-call.
struct ParkedOffload {
    started: std::sync::mpsc::SyncSender<()>,
    release: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
}

impl kvengine::CompactionOffload for ParkedOffload {
    fn wants(&self, shard_id: u64, _input_bytes: u64) -> bool {
        shard_id == 1
    }

    fn timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(60)
    }

    fn run(
        &self,
        _job: &changeset::CompactionJob,
        _retry: &mut dyn FnMut() -> Option<changeset::CompactionJob>,
    ) -> Result<changeset::CompactionResult, String> {
        self.started.send(()).unwrap();
        // A closed channel means the test failed and is unwinding: let the call end.
        let _ = self.release.lock().unwrap().recv();
        Err("released by the test".to_owned())
    }

    fn finished(&self, _shard_id: u64, _outcome: kvengine::OffloadOutcome<'_>) {}
}

#[test]
fn background_compaction_serves_other_shards_while_a_full_compaction_holds_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = EngineOptions::new(dir.path().join("engine"));
    o.wal_sync = SyncPolicy::Off;
    o.block_size = 512;
    o.l0_compaction_files = 2;
    o.base_level_size = 1 << 30;
    o.target_file_size = 4 * 1024;
    // One thread for every shard: if it waits for shard 1, nothing else compacts.
    o.compaction_threads = 1;
    let dfs = Arc::new(LocalDfs::open(dir.path().join("dfs")).unwrap());
    let e = Arc::new(Engine::open(o, dfs).unwrap());
    e.create_shard(1, b"", b"m").unwrap();
    e.create_shard(2, b"m", b"").unwrap();
    let (started_tx, started) = std::sync::mpsc::sync_channel(1);
    let (release, release_rx) = std::sync::mpsc::channel();
    e.set_compaction_offload(Arc::new(ParkedOffload {
        started: started_tx,
        release: std::sync::Mutex::new(release_rx),
    }));
    let flush_rows = |shard: u64, prefix: &str, ts: u64| {
        let mut b = WriteBatch::new();
        for i in 0..50u64 {
            b.put(
                ColumnFamily::Write,
                format!("{prefix}{i:04}").as_bytes(),
                ts,
                b"",
                b"value",
            );
        }
        e.write(shard, &b).unwrap();
        e.flush_shard(shard).unwrap();
    };
    // One L0 file: not due, so only the full compaction below compacts shard 1.
    flush_rows(1, "a", 10);
    let full = {
        let e = e.clone();
        std::thread::spawn(move || e.compact_shard_full(1))
    };
    started
        .recv_timeout(std::time::Duration::from_secs(10))
        .unwrap();
    // The background thread wakes at least every 200 ms: by now it has met shard 1 held.
    std::thread::sleep(std::time::Duration::from_millis(600));
    for ts in [10, 20, 30] {
        flush_rows(2, "n", ts);
    }
    let level_tables = |shard: u64| -> usize {
        e.shard_info(shard)
            .unwrap()
            .level_files
            .iter()
            .flatten()
            .sum()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while level_tables(2) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "shard 2's due compaction did not run while shard 1's full compaction was held: {} L0 files",
            e.shard_info(2).unwrap().l0_files
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(
        (e.shard_info(1).unwrap().l0_files, level_tables(1)),
        (1, 0),
        "shard 1 is still held mid-call"
    );
    release.send(()).unwrap();
    assert!(full.join().unwrap().unwrap() >= 1);
    assert_eq!(
        (e.shard_info(1).unwrap().l0_files, level_tables(1)),
        (0, 1),
        "the full compaction moved shard 1's L0 file into a level"
    );
    e.close(false).unwrap();
}
