//! Opening the Raft log after a crash: a batch is one frame, so a torn last batch is cut off
//! whole (never half applied), and damage anywhere else stops the open with a corruption
//! error, never a silent skip. The torn-tail rule itself is the engine WAL's (`wal/frame.rs`).

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::fs;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use kvengine::ErrorKind;
use kvengine::raft_log::{EntryKind, HardState, LogBatch, LogEntry, RaftLog, RaftLogOptions};
use kvengine::wal::SyncPolicy;

fn options(dir: &Path, segment_size: u64) -> RaftLogOptions {
    RaftLogOptions {
        dir: dir.to_path_buf(),
        segment_size,
        sync: SyncPolicy::EveryBatch,
    }
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

/// Batch `n`: entry `n` of regions 1..=3 and a hard state committing it, as one ready round.
fn round(n: u64) -> LogBatch {
    let mut batch = LogBatch::default();
    for region in 1..=3 {
        batch.append(
            region,
            vec![LogEntry {
                index: n,
                term: 1,
                kind: EntryKind::Normal,
                data: Bytes::from(format!("region {region} entry {n}").into_bytes()),
                context: Bytes::new(),
            }],
        );
        batch.set_hard_state(
            region,
            HardState {
                term: 1,
                vote: 1,
                commit: n,
            },
        );
    }
    batch
}

/// Every region holds entries 1..=n and commits n; nothing of round n + 1 is there.
fn assert_rounds(log: &RaftLog, n: u64, context: &str) {
    for region in 1..=3 {
        let s = log.state(region).unwrap();
        assert_eq!(s.last_index, n, "{context}: region {region} last index");
        assert_eq!(s.hard_state.commit, n, "{context}: region {region} commit");
        let entries = log.entries(region, 1, n + 1, None).unwrap();
        assert_eq!(entries.len() as u64, n, "{context}");
    }
}

/// Copies `segments` (name, bytes) into a fresh directory.
fn directory_with(segments: &[(PathBuf, Vec<u8>)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, bytes) in segments {
        fs::write(dir.path().join(path.file_name().unwrap()), bytes).unwrap();
    }
    dir
}

#[test]
fn a_torn_last_batch_is_whole_or_absent_at_every_cut() {
    let dir = tempfile::tempdir().unwrap();
    let log = RaftLog::open(options(dir.path(), 1 << 20)).unwrap();
    for n in 1..=4 {
        log.write(&round(n)).unwrap();
    }
    let segment = segment_files(dir.path()).pop().unwrap();
    let start = fs::metadata(&segment).unwrap().len() as usize;
    log.write(&round(5)).unwrap();
    drop(log);
    let full = fs::read(&segment).unwrap();
    assert!(
        full.len() > start + 100,
        "the last batch is {} bytes",
        full.len() - start
    );
    for cut in start..full.len() {
        let dir = directory_with(&[(segment.clone(), full[..cut].to_vec())]);
        let log = RaftLog::open(options(dir.path(), 1 << 20))
            .unwrap_or_else(|e| panic!("cut={cut}: reopen failed: {e}"));
        assert_rounds(&log, 4, &format!("cut={cut}"));
        // The log goes on after the truncated tail.
        log.write(&round(5)).unwrap();
        drop(log);
        let log = RaftLog::open(options(dir.path(), 1 << 20)).unwrap();
        assert_rounds(&log, 5, &format!("cut={cut}, rewritten"));
    }
    let dir = directory_with(&[(segment.clone(), full)]);
    assert_rounds(
        &RaftLog::open(options(dir.path(), 1 << 20)).unwrap(),
        5,
        "whole",
    );
}

#[test]
fn a_flipped_byte_in_a_sealed_segment_is_corruption_at_every_offset() {
    let dir = tempfile::tempdir().unwrap();
    let log = RaftLog::open(options(dir.path(), 400)).unwrap();
    for n in 1..=6 {
        log.write(&round(n)).unwrap();
    }
    drop(log);
    let segments: Vec<(PathBuf, Vec<u8>)> = segment_files(dir.path())
        .into_iter()
        .map(|p| {
            let bytes = fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect();
    assert!(segments.len() >= 3, "{} segments", segments.len());
    // The second segment: sealed, starts with a checkpoint, holds batches.
    let target = 1;
    for offset in 0..segments[target].1.len() {
        let mut damaged = segments.clone();
        damaged[target].1[offset] ^= 0x20;
        let dir = directory_with(&damaged);
        match RaftLog::open(options(dir.path(), 400)) {
            Err(e) => assert_eq!(e.kind(), ErrorKind::Corruption, "offset={offset}: {e}"),
            Ok(_) => panic!("offset={offset}: a flipped byte in a sealed segment went unnoticed"),
        }
    }
}

#[test]
fn a_damaged_batch_followed_by_a_valid_one_in_the_newest_segment_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let log = RaftLog::open(options(dir.path(), 1 << 20)).unwrap();
    log.write(&round(1)).unwrap();
    let segment = segment_files(dir.path()).pop().unwrap();
    let second = fs::metadata(&segment).unwrap().len() as usize;
    log.write(&round(2)).unwrap();
    log.write(&round(3)).unwrap();
    drop(log);
    let mut bytes = fs::read(&segment).unwrap();
    bytes[second + 40] ^= 0x01;
    let dir = directory_with(&[(segment, bytes)]);
    let err = RaftLog::open(options(dir.path(), 1 << 20)).err().unwrap();
    assert_eq!(err.kind(), ErrorKind::Corruption);
    assert!(
        err.to_string().contains(&format!("offset={second}")),
        "{err}"
    );
}
