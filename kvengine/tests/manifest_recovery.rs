//! The manifest survives reopening: flushes, compactions and splits replay to the same state,
//! rewrites shrink the file without changing it, a torn tail is truncated and damage in the
//! middle is an error.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use bytes::Bytes;
use changeset::{
    Applied, Change, ChangeSet, ColumnFamily, Compaction, Flush, L0Create, ShardFiles,
    ShardSplitInfo, Split, TableCreate,
};
use kvengine::manifest::{MANIFEST_FILE_NAME, Manifest, ManifestOptions};
use kvengine::{Error, ErrorKind};

fn key(k: u16) -> Bytes {
    Bytes::copy_from_slice(&k.to_be_bytes())
}

fn open(dir: &Path) -> kvengine::Result<Manifest> {
    Manifest::open(ManifestOptions {
        dir: dir.to_path_buf(),
        rewrite_after: 1_000_000,
    })
}

fn changeset(shard: &ShardFiles, change: Change) -> ChangeSet {
    ChangeSet {
        shard_id: shard.id(),
        shard_ver: shard.ver(),
        sequence: shard.meta_seq() + 1,
        properties: BTreeMap::new(),
        change: Some(change),
    }
}

fn flush(m: &Manifest, shard_id: u64, file_id: u64, lo: u16, hi: u16) -> Applied {
    let shard = m.shard(shard_id).unwrap();
    let l0 = L0Create {
        id: file_id,
        smallest: key(lo),
        biggest: key(hi),
        size: 100,
    };
    let data_sequence = shard.data_sequence() + 10;
    let cs = changeset(
        &shard,
        Change::Flush(Flush {
            l0_create: Some(l0),
            data_sequence,
            version: shard.base_version() + data_sequence,
        }),
    );
    m.record(&cs).unwrap().applied
}

/// Compacts the given L0 files into one WRITE file at L1.
fn compaction(shard: &ShardFiles, l0s: &[u64], output: u64, lo: u16, hi: u16) -> ChangeSet {
    changeset(
        shard,
        Change::Compaction(Compaction {
            cf: 0,
            level: 0,
            top_deletes: l0s.to_vec(),
            bottom_deletes: vec![],
            table_creates: vec![TableCreate {
                id: output,
                level: 1,
                cf: ColumnFamily::Write.as_u32(),
                smallest: key(lo),
                biggest: key(hi),
                size: 300,
            }],
            conflicted: false,
            safe_point: 0,
        }),
    )
}

fn split(shard: &ShardFiles, children: &[(u64, Bytes, Bytes)]) -> ChangeSet {
    let base = shard.base_version() + shard.data_sequence() + 1000;
    let new_shards = children
        .iter()
        .map(|(id, start, end)| ShardSplitInfo {
            id: *id,
            start: start.clone(),
            end: end.clone(),
            base_version: base,
            data_sequence: 0,
        })
        .collect();
    changeset(shard, Change::Split(Split { new_shards }))
}

/// Two shards with flushes, a compaction, a conflicted compaction and a split.
fn populate(m: &Manifest) {
    m.create_shard(&ShardFiles::new(1, 1, key(0), key(1000), 0))
        .unwrap();
    m.create_shard(&ShardFiles::new(2, 1, key(1000), Bytes::new(), 0))
        .unwrap();
    flush(m, 1, 101, 10, 200);
    flush(m, 1, 102, 100, 500);
    flush(m, 2, 201, 1000, 3000);
    let shard = m.shard(1).unwrap();
    assert_eq!(
        m.record(&compaction(&shard, &[101, 102], 103, 10, 500))
            .unwrap()
            .applied,
        Applied::Applied
    );
    // The inputs are gone now: recorded, but conflicted.
    let shard = m.shard(1).unwrap();
    let stale = compaction(&shard, &[101], 104, 10, 200);
    assert!(matches!(
        m.record(&stale).unwrap().applied,
        Applied::Conflicted(_)
    ));
    let shard = m.shard(2).unwrap();
    let applied = m
        .record(&split(
            &shard,
            &[(2, key(1000), key(2000)), (3, key(2000), Bytes::new())],
        ))
        .unwrap()
        .applied;
    assert!(matches!(applied, Applied::Split(ref children) if children.len() == 2));
    flush(m, 3, 301, 2500, 2600);
}

fn file_len(dir: &Path) -> u64 {
    fs::metadata(dir.join(MANIFEST_FILE_NAME)).unwrap().len()
}

#[test]
fn reopen_restores_shards_after_flushes_compactions_and_splits() {
    let dir = tempfile::tempdir().unwrap();
    let m = open(dir.path()).unwrap();
    populate(&m);
    let shards = m.shards();
    assert_eq!(shards.iter().map(|s| s.id()).collect::<Vec<_>>(), [1, 2, 3]);
    let ids = m.live_file_ids();
    assert_eq!(ids.into_iter().collect::<Vec<_>>(), [103, 201, 301]);
    drop(m);
    let m = open(dir.path()).unwrap();
    assert_eq!(m.shards(), shards);
    assert_eq!(
        m.live_file_ids(),
        shards.iter().flat_map(|s| s.file_ids()).collect()
    );
}

#[test]
fn a_conflicted_compaction_replays_as_conflicted() {
    let dir = tempfile::tempdir().unwrap();
    let m = open(dir.path()).unwrap();
    m.create_shard(&ShardFiles::new(1, 1, key(0), Bytes::new(), 0))
        .unwrap();
    flush(&m, 1, 11, 0, 10);
    let shard = m.shard(1).unwrap();
    let stale = compaction(&shard, &[99], 12, 0, 10);
    assert!(matches!(
        m.record(&stale).unwrap().applied,
        Applied::Conflicted(_)
    ));
    // Now make the input exist; replay must not apply the compaction after all.
    flush(&m, 1, 99, 20, 30);
    let before = m.shard(1).unwrap();
    drop(m);
    let m = open(dir.path()).unwrap();
    assert_eq!(m.shard(1).unwrap(), before);
    assert_eq!(m.live_file_ids().into_iter().collect::<Vec<_>>(), [11, 99]);
}

#[test]
fn rewrite_then_reopen_keeps_the_state_and_shrinks_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let m = open(dir.path()).unwrap();
    populate(&m);
    for i in 0..20 {
        flush(&m, 1, 1000 + i, 600 + i as u16, 600 + i as u16);
    }
    let shards = m.shards();
    let before = file_len(dir.path());
    m.rewrite().unwrap();
    let after = file_len(dir.path());
    assert!(after < before, "before={before} after={after}");
    assert_eq!(m.shards(), shards);
    // Appends after a rewrite go to the new file.
    flush(&m, 2, 5000, 1500, 1600);
    let shards = m.shards();
    drop(m);
    assert_eq!(open(dir.path()).unwrap().shards(), shards);
}

#[test]
fn the_file_is_rewritten_once_rewrite_after_records_accumulate() {
    let dir = tempfile::tempdir().unwrap();
    let opts = ManifestOptions {
        dir: dir.path().to_path_buf(),
        rewrite_after: 5,
    };
    let m = Manifest::open(opts.clone()).unwrap();
    m.create_shard(&ShardFiles::new(1, 1, key(0), Bytes::new(), 0))
        .unwrap();
    let mut lens = Vec::new();
    for i in 0..12 {
        flush(&m, 1, 100 + i, i as u16 * 10, i as u16 * 10 + 5);
        lens.push(file_len(dir.path()));
    }
    // The create and flushes 0..=3 make five records; flush 4 rewrites first, then appends
    // (one record since the rewrite); flush 9 is the next to find five and rewrite.
    let shrank: Vec<usize> = (1..lens.len()).filter(|&i| lens[i] < lens[i - 1]).collect();
    assert_eq!(shrank, [4, 9], "lens={lens:?}");
    let shards = m.shards();
    drop(m);
    assert_eq!(Manifest::open(opts).unwrap().shards(), shards);
}

#[test]
fn a_rejected_changeset_writes_nothing_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let m = open(dir.path()).unwrap();
    populate(&m);
    let (shards, len) = (m.shards(), file_len(dir.path()));

    let mut wrong_ver = compaction(&m.shard(1).unwrap(), &[103], 900, 0, 10);
    wrong_ver.shard_ver += 1;
    assert_eq!(m.record(&wrong_ver).unwrap_err().kind(), ErrorKind::Invalid);

    let mut unknown = wrong_ver.clone();
    unknown.shard_id = 77;
    assert!(matches!(
        m.record(&unknown).unwrap_err(),
        Error::ShardNotFound { shard_id: 77 }
    ));

    // A split child may not take the id of another live shard (1), though it may keep its
    // parent's (3).
    let shard = m.shard(3).unwrap();
    let clash = split(
        &shard,
        &[(3, key(2000), key(2500)), (1, key(2500), Bytes::new())],
    );
    assert_eq!(m.record(&clash).unwrap_err().kind(), ErrorKind::Invalid);

    assert_eq!(m.shards(), shards);
    assert_eq!(file_len(dir.path()), len);
}

#[test]
fn a_changeset_already_applied_is_skipped_without_writing() {
    let dir = tempfile::tempdir().unwrap();
    let m = open(dir.path()).unwrap();
    m.create_shard(&ShardFiles::new(1, 1, key(0), Bytes::new(), 0))
        .unwrap();
    let shard = m.shard(1).unwrap();
    let cs = changeset(
        &shard,
        Change::Flush(Flush {
            l0_create: None,
            data_sequence: 5,
            version: 5,
        }),
    );
    assert_eq!(m.record(&cs).unwrap().applied, Applied::Applied);
    let len = file_len(dir.path());
    assert!(matches!(
        m.record(&cs).unwrap().applied,
        Applied::Skipped { meta_seq: 1 }
    ));
    assert_eq!(file_len(dir.path()), len);
}

#[test]
fn creating_a_shard_that_exists_fails() {
    let dir = tempfile::tempdir().unwrap();
    let m = open(dir.path()).unwrap();
    let shard = ShardFiles::new(1, 1, key(0), Bytes::new(), 0);
    m.create_shard(&shard).unwrap();
    assert!(m.create_shard(&shard).is_err());
    assert_eq!(m.shards(), [shard]);
}

#[test]
fn a_torn_last_record_is_truncated_at_every_cut() {
    let original = tempfile::tempdir().unwrap();
    let m = open(original.path()).unwrap();
    populate(&m);
    let without_last = (m.shards(), file_len(original.path()));
    flush(&m, 1, 700, 700, 800);
    drop(m);
    let bytes = fs::read(original.path().join(MANIFEST_FILE_NAME)).unwrap();
    for cut in without_last.1 as usize..bytes.len() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(MANIFEST_FILE_NAME);
        fs::write(&path, &bytes[..cut]).unwrap();
        let m = open(dir.path()).unwrap_or_else(|e| panic!("cut={cut}: {e}"));
        assert_eq!(m.shards(), without_last.0, "cut={cut}");
        assert_eq!(file_len(dir.path()), without_last.1, "cut={cut}");
        flush(&m, 1, 701, 700, 800);
        let shards = m.shards();
        drop(m);
        assert_eq!(open(dir.path()).unwrap().shards(), shards, "cut={cut}");
    }
}

#[test]
fn a_flipped_byte_in_a_middle_record_fails_the_open_naming_path_and_offset() {
    let original = tempfile::tempdir().unwrap();
    let m = open(original.path()).unwrap();
    m.create_shard(&ShardFiles::new(1, 1, key(0), Bytes::new(), 0))
        .unwrap();
    let start = file_len(original.path());
    flush(&m, 1, 11, 0, 10);
    let end = file_len(original.path());
    flush(&m, 1, 12, 20, 30);
    drop(m);
    let bytes = fs::read(original.path().join(MANIFEST_FILE_NAME)).unwrap();
    for at in start as usize..end as usize {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(MANIFEST_FILE_NAME);
        let mut damaged = bytes.clone();
        damaged[at] ^= 0x08;
        fs::write(&path, &damaged).unwrap();
        match open(dir.path()) {
            Err(Error::Corruption {
                path: p, offset, ..
            }) => {
                assert_eq!(p, path, "at={at}");
                assert_eq!(offset, start, "at={at}");
            }
            Err(other) => panic!("at={at}: {other}"),
            Ok(_) => panic!("at={at}: opened"),
        }
        assert_eq!(
            fs::read(&path).unwrap(),
            damaged,
            "at={at}: the file changed"
        );
    }
}

#[test]
fn an_intact_record_that_does_not_apply_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let m = open(dir.path()).unwrap();
    m.create_shard(&ShardFiles::new(1, 1, key(0), Bytes::new(), 0))
        .unwrap();
    drop(m);
    let path = dir.path().join(MANIFEST_FILE_NAME);
    let offset = fs::metadata(&path).unwrap().len();
    // A flush for a shard that was never created, framed correctly.
    let orphan = changeset(
        &ShardFiles::new(9, 1, key(0), Bytes::new(), 0),
        Change::Flush(Flush {
            l0_create: None,
            data_sequence: 1,
            version: 1,
        }),
    );
    let mut bytes = fs::read(&path).unwrap();
    kvengine::manifest::file_format::encode_record(&orphan, &mut bytes).unwrap();
    fs::write(&path, &bytes).unwrap();
    match open(dir.path()) {
        Err(Error::Corruption {
            offset: o, detail, ..
        }) => {
            assert_eq!(o, offset);
            assert!(detail.contains("shard_id=9"), "{detail}");
        }
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("opened"),
    }
}

#[test]
fn a_missing_manifest_opens_empty_and_a_stale_rewrite_temp_file_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let m = open(dir.path()).unwrap();
    m.create_shard(&ShardFiles::new(1, 1, key(0), Bytes::new(), 0))
        .unwrap();
    drop(m);
    let tmp = dir.path().join("MANIFEST.tmp");
    fs::write(&tmp, b"half a rewrite").unwrap();
    let m = open(dir.path()).unwrap();
    assert_eq!(m.shards().len(), 1);
    assert!(!tmp.exists());

    let empty = tempfile::tempdir().unwrap();
    assert!(open(&empty.path().join("new")).unwrap().shards().is_empty());
}
