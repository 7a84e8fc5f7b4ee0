//! Purge deletes exactly the sealed segments whose every record is covered, never the active
//! one.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use kvengine::wal::{SyncPolicy, Wal, WalOptions, WalRecord};

fn options(dir: &Path) -> WalOptions {
    WalOptions {
        dir: dir.to_path_buf(),
        segment_size: 1 << 20,
        sync: SyncPolicy::Off,
    }
}

fn open_collect(dir: &Path) -> (Wal, Vec<WalRecord>) {
    let mut records = Vec::new();
    let wal = Wal::open(options(dir), |r| {
        records.push(r);
        Ok(())
    })
    .unwrap();
    (wal, records)
}

fn segment_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "wal"))
        .collect();
    files.sort();
    files
}

fn keys(records: &[WalRecord]) -> Vec<(u64, u64)> {
    records.iter().map(|r| (r.shard_id, r.sequence)).collect()
}

/// Segments (oldest first), each a list of (shard, sequence); the last one stays active.
fn build(dir: &Path, segments: &[&[(u64, u64)]]) -> Wal {
    let (wal, _) = open_collect(dir);
    for (index, records) in segments.iter().enumerate() {
        for &(shard, sequence) in *records {
            wal.append(shard, sequence, b"batch").unwrap();
        }
        if index + 1 < segments.len() {
            wal.roll().unwrap();
        }
    }
    wal
}

#[test]
fn purge_deletes_exactly_the_covered_sealed_segments() {
    let dir = tempfile::tempdir().unwrap();
    let wal = build(
        dir.path(),
        &[
            &[(1, 1), (1, 2), (1, 3)], // covered
            &[(2, 1), (2, 2)],         // covered
            &[(1, 4), (2, 3)],         // shard 1 up to 4 is not covered
            &[(2, 4), (1, 5)],         // active: never deleted
        ],
    );
    let before = segment_files(dir.path());
    assert_eq!(before.len(), 4);
    let covered = BTreeMap::from([(1, 3), (2, 3)]);
    let deleted = wal.purge(&|shard| covered[&shard]).unwrap();
    assert_eq!(deleted, 2);
    assert_eq!(segment_files(dir.path()), before[2..]);
    assert_eq!(wal.segment_count(), 2);
    assert_eq!(wal.stats().segments, 2);
    // Nothing more is covered: a second purge deletes nothing.
    assert_eq!(wal.purge(&|shard| covered[&shard]).unwrap(), 0);
    drop(wal);
    let (_, records) = open_collect(dir.path());
    assert_eq!(keys(&records), [(1, 4), (2, 3), (2, 4), (1, 5)]);
}

#[test]
fn purge_never_deletes_the_active_segment() {
    let dir = tempfile::tempdir().unwrap();
    let wal = build(dir.path(), &[&[(1, 1)], &[(1, 2)]]);
    assert_eq!(wal.purge(&|_| u64::MAX).unwrap(), 1);
    assert_eq!(wal.segment_count(), 1);
    assert_eq!(segment_files(dir.path()).len(), 1);
    wal.append(1, 3, b"batch").unwrap();
    drop(wal);
    let (_, records) = open_collect(dir.path());
    assert_eq!(keys(&records), [(1, 2), (1, 3)]);
}

#[test]
fn a_segment_with_a_shard_not_covered_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let wal = build(dir.path(), &[&[(1, 1), (9, 1)], &[]]);
    // Shard 9 has nothing persisted yet.
    let deleted = wal
        .purge(&|shard| if shard == 9 { 0 } else { u64::MAX })
        .unwrap();
    assert_eq!(deleted, 0);
    assert_eq!(wal.segment_count(), 2);
}

#[test]
fn segments_replayed_at_open_are_purgeable_once_covered() {
    let dir = tempfile::tempdir().unwrap();
    let wal = build(dir.path(), &[&[(1, 1), (1, 2)], &[(1, 3)]]);
    drop(wal);
    let (wal, records) = open_collect(dir.path());
    assert_eq!(records.len(), 3);
    assert_eq!(wal.segment_count(), 3);
    assert_eq!(wal.purge(&|_| 2).unwrap(), 1);
    assert_eq!(wal.purge(&|_| 3).unwrap(), 1);
    assert_eq!(wal.segment_count(), 1);
}

#[test]
fn empty_sealed_segments_are_purged() {
    let dir = tempfile::tempdir().unwrap();
    for _ in 0..3 {
        drop(open_collect(dir.path()).0);
    }
    let (wal, _) = open_collect(dir.path());
    assert_eq!(wal.segment_count(), 4);
    assert_eq!(wal.purge(&|_| 0).unwrap(), 3);
    assert_eq!(segment_files(dir.path()).len(), 1);
}
