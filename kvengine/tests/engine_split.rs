//! Split: children share the parent's files, read only their own range, start above the
//! parent's data version, survive reopen, and compaction rewrites the shared files per child.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::collections::BTreeSet;
use std::sync::Arc;

use kvengine::{
    ColumnFamily, Dfs, Engine, EngineOptions, Error, FileId, LocalDfs, SyncPolicy, WriteBatch,
};

fn open(dir: &std::path::Path) -> (Engine, Arc<LocalDfs>) {
    let mut o = EngineOptions::new(dir.join("engine"));
    o.wal_sync = SyncPolicy::Off;
    o.memtable_size = 8 * 1024;
    o.block_size = 512;
    o.l0_compaction_files = 100;
    o.compaction_threads = 0;
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

fn put(e: &Engine, shard: u64, i: u64, version: u64) -> kvengine::Result<u64> {
    let mut b = WriteBatch::new();
    b.put(
        ColumnFamily::Write,
        &key(i),
        version,
        b"",
        format!("v{version}-{i}").as_bytes(),
    );
    e.write(shard, &b)
}

fn scan_keys(e: &Engine, shard: u64) -> Vec<Vec<u8>> {
    let snap = e.snapshot(shard).unwrap();
    let mut it = snap
        .iter(ColumnFamily::Write, b"", b"", u64::MAX, false)
        .unwrap();
    let mut out = Vec::new();
    while it.valid() {
        out.push(it.key().to_vec());
        it.next().unwrap();
    }
    out
}

#[test]
fn split_children_share_files_and_each_reads_only_its_range() {
    let dir = tempfile::tempdir().unwrap();
    let (e, dfs) = open(dir.path());
    for v in 1..=2 {
        for i in 0..300 {
            put(&e, 1, i, v).unwrap();
        }
        e.flush_shard(1).unwrap();
    }
    for i in 0..50 {
        put(&e, 1, i, 3).unwrap(); // still in the memtable when the split starts
    }
    let parent = e.shard_info(1).unwrap();
    e.split(1, &key(150), 2, 3).unwrap();
    assert_eq!(e.shard_ids(), vec![2, 3]);
    assert!(matches!(
        put(&e, 1, 1, 9),
        Err(Error::ShardNotFound { shard_id: 1 })
    ));
    for (id, range) in [(2u64, 0..150u64), (3, 150..300)] {
        let info = e.shard_info(id).unwrap();
        assert_eq!(info.ver, parent.ver + 1);
        assert!(
            info.snap_version() > parent.snap_version(),
            "child data version must start above the parent's"
        );
        assert_eq!(
            scan_keys(&e, id),
            range.clone().map(key).collect::<Vec<_>>()
        );
    }
    let snap = e.snapshot(2).unwrap();
    assert!(matches!(
        snap.get(ColumnFamily::Write, &key(200), u64::MAX),
        Err(Error::KeyNotInShard { .. })
    ));
    assert_eq!(
        snap.get(ColumnFamily::Write, &key(10), u64::MAX)
            .unwrap()
            .unwrap()
            .value
            .as_ref(),
        b"v3-10"
    );
    assert_eq!(
        snap.get(ColumnFamily::Write, &key(10), 2)
            .unwrap()
            .unwrap()
            .value
            .as_ref(),
        b"v2-10"
    );
    drop(snap);
    // Writes go to the children now; the key must be in the child's range.
    put(&e, 3, 299, 4).unwrap();
    assert!(matches!(put(&e, 3, 1, 4), Err(Error::KeyNotInShard { .. })));

    // Reopen: the manifest holds the children, the parent's WAL records are skipped.
    e.close(false).unwrap();
    drop(e);
    let (e, _) = open(dir.path());
    assert_eq!(e.shard_ids(), vec![2, 3]);
    assert_eq!(scan_keys(&e, 2), (0..150).map(key).collect::<Vec<_>>());
    let snap = e.snapshot(3).unwrap();
    assert_eq!(
        snap.get(ColumnFamily::Write, &key(299), u64::MAX)
            .unwrap()
            .unwrap()
            .value
            .as_ref(),
        b"v4-299"
    );
    drop(snap);

    // Compaction rewrites the shared files per child; once both did, the parent's are gone.
    let shared: BTreeSet<u64> = e.live_file_ids();
    e.compact_shard(2, true).unwrap();
    assert_eq!(
        scan_keys(&e, 3),
        (150..300).map(key).collect::<Vec<_>>(),
        "sibling still reads the shared files"
    );
    e.compact_shard(3, true).unwrap();
    e.collect_garbage();
    let stored: BTreeSet<u64> = dfs.list().unwrap().into_iter().map(FileId::get).collect();
    assert!(
        shared.is_disjoint(&stored),
        "shared files deleted once no child references them"
    );
    assert_eq!(scan_keys(&e, 2), (0..150).map(key).collect::<Vec<_>>());
    assert_eq!(scan_keys(&e, 3), (150..300).map(key).collect::<Vec<_>>());
}

#[test]
fn a_file_shared_by_split_children_is_deleted_once_both_compacted_it_away_without_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (e, dfs) = open(dir.path());
    for i in 0..300 {
        put(&e, 1, i, 1).unwrap();
    }
    e.flush_shard(1).unwrap();
    e.split(1, &key(150), 2, 3).unwrap();
    // Both children hold the very table handles the parent had open.
    let shared: BTreeSet<u64> = e.live_file_ids();
    e.compact_shard(2, true).unwrap();
    e.compact_shard(3, true).unwrap();
    e.collect_garbage();
    let stored: BTreeSet<u64> = dfs.list().unwrap().into_iter().map(FileId::get).collect();
    assert!(
        shared.is_disjoint(&stored),
        "shared files left in the store: {:?}",
        shared.intersection(&stored).collect::<Vec<_>>()
    );
    assert_eq!(e.pending_deletes(), 0);
    assert_eq!(scan_keys(&e, 2), (0..150).map(key).collect::<Vec<_>>());
    assert_eq!(scan_keys(&e, 3), (150..300).map(key).collect::<Vec<_>>());
}

#[test]
fn acknowledged_writes_racing_a_split_land_in_a_child() {
    let dir = tempfile::tempdir().unwrap();
    let (e, _) = open(dir.path());
    let writer = {
        let e = e.clone();
        std::thread::spawn(move || {
            let mut acked = Vec::new();
            for i in 0..2000u64 {
                let shard = if e.shard_ids() == vec![1] {
                    1
                } else if i % 1000 < 500 {
                    2
                } else {
                    3
                };
                match put(&e, shard, i % 1000, i + 1) {
                    Ok(_) => acked.push(i),
                    Err(
                        Error::ShardBusy { .. }
                        | Error::ShardNotFound { .. }
                        | Error::KeyNotInShard { .. },
                    ) => {}
                    Err(other) => panic!("unexpected write error: {other}"),
                }
            }
            acked
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(20));
    e.split(1, &key(500), 2, 3).unwrap();
    let acked = writer.join().unwrap();
    assert!(!acked.is_empty());
    for i in acked {
        let k = i % 1000;
        let shard = if k < 500 { 2 } else { 3 };
        let got = e
            .snapshot(shard)
            .unwrap()
            .get(ColumnFamily::Write, &key(k), u64::MAX)
            .unwrap();
        assert!(
            got.is_some(),
            "acknowledged write {i} lost across the split"
        );
    }
}

#[test]
fn split_rejects_a_key_outside_the_range_and_existing_child_ids() {
    let dir = tempfile::tempdir().unwrap();
    let (e, _) = open(dir.path());
    e.create_shard(9, b"z", b"").unwrap();
    assert!(matches!(
        e.split(1, b"", 2, 3),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(matches!(
        e.split(1, b"m", 9, 3),
        Err(Error::ShardExists { shard_id: 9 })
    ));
    assert!(matches!(
        e.split(1, b"m", 2, 2),
        Err(Error::InvalidArgument { .. })
    ));
    e.split(1, b"m", 2, 3).unwrap();
}
