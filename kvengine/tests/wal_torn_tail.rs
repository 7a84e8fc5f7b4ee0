//! Opening after a crash: a torn tail of the newest segment is truncated, damage anywhere else
//! stops the open with a corruption error naming the segment and offset.
//!
//! The rule (see `kvengine::wal::frame`): at the first record that does not decode, the rest
//! of the segment is searched for a valid record. None found: a torn tail, truncated. Found:
//! corruption. So a damaged last record — cut short, or complete but failing its checksum —
//! is torn; a damaged record followed by a valid one is corruption.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::fs;
use std::path::{Path, PathBuf};

use kvengine::ErrorKind;
use kvengine::wal::{SyncPolicy, Wal, WalOptions, WalRecord};

fn options(dir: &Path) -> WalOptions {
    WalOptions {
        dir: dir.to_path_buf(),
        segment_size: 1 << 20,
        sync: SyncPolicy::EveryBatch,
    }
}

fn open_collect(dir: &Path) -> kvengine::Result<(Wal, Vec<WalRecord>)> {
    let mut records = Vec::new();
    let wal = Wal::open(options(dir), |r| {
        records.push(r);
        Ok(())
    })?;
    Ok((wal, records))
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

fn payload(sequence: u64) -> Vec<u8> {
    format!("write batch number {sequence} with some bytes").into_bytes()
}

/// Writes `count` records of shard 1 (sequences 1..=count) into one segment and closes the
/// WAL. Returns the segment's path and the offset where each record starts.
fn write_segment(dir: &Path, count: u64) -> (PathBuf, Vec<u64>) {
    let (wal, _) = open_collect(dir).unwrap();
    let mut offsets = Vec::new();
    let mut offset = 16;
    for sequence in 1..=count {
        offsets.push(offset);
        let p = payload(sequence);
        offset += (12 + 16 + p.len()) as u64;
        wal.append(1, sequence, &p).unwrap();
    }
    drop(wal);
    let files = segment_files(dir);
    assert_eq!(files.len(), 1);
    assert_eq!(fs::metadata(&files[0]).unwrap().len(), offset);
    (files[0].clone(), offsets)
}

fn sequences(records: &[WalRecord]) -> Vec<u64> {
    records.iter().map(|r| r.sequence).collect()
}

fn copy_dir(from: &Path, to: &Path) {
    for entry in fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        fs::copy(&path, to.join(path.file_name().unwrap())).unwrap();
    }
}

#[test]
fn truncation_at_every_offset_inside_the_last_record_keeps_exactly_the_complete_records() {
    let original = tempfile::tempdir().unwrap();
    let (segment, offsets) = write_segment(original.path(), 3);
    let bytes = fs::read(&segment).unwrap();
    let last_start = offsets[2] as usize;
    for cut in last_start..bytes.len() {
        let dir = tempfile::tempdir().unwrap();
        copy_dir(original.path(), dir.path());
        let copy = dir.path().join(segment.file_name().unwrap());
        fs::write(&copy, &bytes[..cut]).unwrap();

        let (wal, records) = open_collect(dir.path()).unwrap_or_else(|e| panic!("cut={cut}: {e}"));
        assert_eq!(sequences(&records), [1, 2], "cut={cut}");
        assert_eq!(
            fs::metadata(&copy).unwrap().len(),
            last_start as u64,
            "cut={cut}"
        );

        wal.append(1, 3, b"after the crash").unwrap();
        drop(wal);
        let (_, records) = open_collect(dir.path()).unwrap();
        assert_eq!(sequences(&records), [1, 2, 3], "cut={cut}");
        assert_eq!(records[2].payload, &b"after the crash"[..], "cut={cut}");
    }
}

#[test]
fn zero_fill_after_the_last_record_is_truncated() {
    let dir = tempfile::tempdir().unwrap();
    let (segment, _) = write_segment(dir.path(), 2);
    let len = fs::metadata(&segment).unwrap().len();
    let mut bytes = fs::read(&segment).unwrap();
    bytes.extend_from_slice(&[0; 4096]);
    fs::write(&segment, &bytes).unwrap();

    let (_, records) = open_collect(dir.path()).unwrap();
    assert_eq!(sequences(&records), [1, 2]);
    assert_eq!(fs::metadata(&segment).unwrap().len(), len);
}

#[test]
fn a_flipped_byte_anywhere_in_a_middle_record_fails_the_open_naming_path_and_offset() {
    let original = tempfile::tempdir().unwrap();
    let (segment, offsets) = write_segment(original.path(), 3);
    let bytes = fs::read(&segment).unwrap();
    for at in offsets[1] as usize..offsets[2] as usize {
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join(segment.file_name().unwrap());
        let mut damaged = bytes.clone();
        damaged[at] ^= 0x10;
        fs::write(&copy, &damaged).unwrap();

        let err = open_collect(dir.path())
            .err()
            .unwrap_or_else(|| panic!("at={at}: opened"));
        assert_eq!(err.kind(), ErrorKind::Corruption, "at={at}: {err}");
        match &err {
            kvengine::Error::Corruption { path, offset, .. } => {
                assert_eq!(path, &copy, "at={at}");
                assert_eq!(*offset, offsets[1], "at={at}");
            }
            other => panic!("at={at}: {other}"),
        }
        // Nothing was truncated or created.
        assert_eq!(fs::read(&copy).unwrap(), damaged, "at={at}");
        assert_eq!(segment_files(dir.path()).len(), 1, "at={at}");
    }
}

/// Decision: a complete last record failing its checksum is what a power loss leaves when the
/// record's data blocks never reached the disk, so it is treated as torn (the record was not
/// acknowledged: acknowledging it needed the fsync that did not finish).
#[test]
fn a_flipped_byte_in_the_last_record_is_treated_as_a_torn_tail() {
    let original = tempfile::tempdir().unwrap();
    let (segment, offsets) = write_segment(original.path(), 3);
    let bytes = fs::read(&segment).unwrap();
    for at in offsets[2] as usize..bytes.len() {
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join(segment.file_name().unwrap());
        let mut damaged = bytes.clone();
        damaged[at] ^= 0x01;
        fs::write(&copy, &damaged).unwrap();

        let (_, records) = open_collect(dir.path()).unwrap_or_else(|e| panic!("at={at}: {e}"));
        assert_eq!(sequences(&records), [1, 2], "at={at}");
        assert_eq!(fs::metadata(&copy).unwrap().len(), offsets[2], "at={at}");
    }
}

#[test]
fn a_torn_tail_in_a_sealed_segment_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let (segment, offsets) = write_segment(dir.path(), 3);
    let bytes = fs::read(&segment).unwrap();
    fs::write(&segment, &bytes[..bytes.len() - 1]).unwrap();
    // A newer segment exists, so the damaged one was sealed (fsync'd) before the crash.
    let (wal, _) = open_collect(dir.path()).unwrap();
    drop(wal);
    // That open truncated the tail; damage it again now that it is not the newest.
    fs::write(&segment, &bytes[..bytes.len() - 1]).unwrap();
    let err = open_collect(dir.path()).err().expect("open fails");
    match err {
        kvengine::Error::Corruption { path, offset, .. } => {
            assert_eq!(path, segment);
            assert_eq!(offset, offsets[2]);
        }
        other => panic!("{other}"),
    }
}

#[test]
fn a_newest_segment_without_a_header_is_deleted() {
    let dir = tempfile::tempdir().unwrap();
    write_segment(dir.path(), 2);
    let headerless = dir.path().join("00000000000000ff.wal");
    fs::write(&headerless, b"SWA").unwrap();
    let (_, records) = open_collect(dir.path()).unwrap();
    assert_eq!(sequences(&records), [1, 2]);
    assert!(!headerless.exists());
}

#[test]
fn a_sealed_segment_without_a_header_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let (segment, _) = write_segment(dir.path(), 2);
    let headerless = dir.path().join("0000000000000000.wal");
    fs::write(&headerless, [0u8; 40]).unwrap();
    let err = open_collect(dir.path()).err().expect("open fails");
    assert_eq!(err.kind(), ErrorKind::Corruption);
    assert!(err.to_string().contains("0000000000000000.wal"), "{err}");
    assert!(segment.exists());
}
