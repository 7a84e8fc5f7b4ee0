//! Records appended to the WAL replay in order after reopening, across segment rolls.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::path::{Path, PathBuf};

use kvengine::ErrorKind;
use kvengine::wal::{SyncPolicy, Wal, WalOptions, WalRecord};
use proptest::prelude::*;

fn options(dir: &Path, segment_size: u64, sync: SyncPolicy) -> WalOptions {
    WalOptions {
        dir: dir.to_path_buf(),
        segment_size,
        sync,
    }
}

fn open_collect(opts: WalOptions) -> (Wal, Vec<WalRecord>) {
    let mut records = Vec::new();
    let wal = Wal::open(opts, |r| {
        records.push(r);
        Ok(())
    })
    .unwrap();
    (wal, records)
}

fn record(shard_id: u64, sequence: u64, payload: &[u8]) -> WalRecord {
    WalRecord {
        shard_id,
        sequence,
        payload: bytes::Bytes::copy_from_slice(payload),
    }
}

fn append(wal: &Wal, r: &WalRecord) {
    wal.append(r.shard_id, r.sequence, &r.payload).unwrap();
}

fn segment_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "wal"))
        .collect();
    files.sort();
    files
}

#[test]
fn records_round_trip_across_segment_rolls() {
    let dir = tempfile::tempdir().unwrap();
    let opts = options(dir.path(), 256, SyncPolicy::EveryBatch);
    let (wal, replayed) = open_collect(opts.clone());
    assert!(replayed.is_empty());
    let written: Vec<WalRecord> = (0..40u64)
        .map(|i| record(i % 3, i / 3 + 1, &vec![i as u8; (i as usize * 7) % 90]))
        .collect();
    written.iter().for_each(|r| append(&wal, r));
    assert!(wal.segment_count() > 5, "segments={}", wal.segment_count());
    assert_eq!(wal.segment_count(), segment_files(dir.path()).len());
    drop(wal);
    let (_wal, replayed) = open_collect(opts);
    assert_eq!(replayed, written);
}

#[test]
fn reopen_after_append_keeps_all_records_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let opts = options(dir.path(), 1 << 20, SyncPolicy::EveryBatch);
    let mut written = Vec::new();
    for round in 0..3u64 {
        let (wal, replayed) = open_collect(opts.clone());
        assert_eq!(replayed, written, "round={round}");
        for i in 0..10 {
            let r = record(
                7,
                round * 10 + i + 1,
                format!("batch {round}/{i}").as_bytes(),
            );
            append(&wal, &r);
            written.push(r);
        }
    }
    let (_wal, replayed) = open_collect(opts);
    assert_eq!(replayed, written);
}

#[test]
fn a_record_larger_than_the_segment_size_gets_its_own_segment() {
    let dir = tempfile::tempdir().unwrap();
    let opts = options(dir.path(), 64, SyncPolicy::EveryBatch);
    let (wal, _) = open_collect(opts.clone());
    let written = vec![record(1, 1, &[1; 500]), record(1, 2, &[2; 500])];
    written.iter().for_each(|r| append(&wal, r));
    assert_eq!(wal.segment_count(), 2);
    drop(wal);
    assert_eq!(open_collect(opts).1, written);
}

#[test]
fn roll_seals_the_active_segment_and_is_a_no_op_when_it_is_empty() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, _) = open_collect(options(dir.path(), 1 << 20, SyncPolicy::EveryBatch));
    wal.roll().unwrap();
    assert_eq!(wal.segment_count(), 1);
    append(&wal, &record(1, 1, b"a"));
    wal.roll().unwrap();
    assert_eq!(wal.segment_count(), 2);
    wal.roll().unwrap();
    assert_eq!(wal.segment_count(), 2);
}

#[test]
fn open_starts_a_new_segment_instead_of_appending_to_an_old_one() {
    let dir = tempfile::tempdir().unwrap();
    let opts = options(dir.path(), 1 << 20, SyncPolicy::EveryBatch);
    let (wal, _) = open_collect(opts.clone());
    append(&wal, &record(1, 1, b"a"));
    drop(wal);
    let old = segment_files(dir.path());
    let old_bytes = std::fs::read(&old[0]).unwrap();
    let (wal, _) = open_collect(opts);
    append(&wal, &record(1, 2, b"b"));
    assert_eq!(segment_files(dir.path()).len(), 2);
    assert_eq!(std::fs::read(&old[0]).unwrap(), old_bytes);
}

#[test]
fn an_error_from_the_replay_callback_stops_the_open() {
    let dir = tempfile::tempdir().unwrap();
    let opts = options(dir.path(), 1 << 20, SyncPolicy::EveryBatch);
    let (wal, _) = open_collect(opts.clone());
    append(&wal, &record(1, 1, b"a"));
    drop(wal);
    let err = Wal::open(opts, |_| {
        Err(kvengine::Error::Closed {
            reason: "test".into(),
        })
    })
    .err()
    .expect("open fails");
    assert_eq!(err.kind(), ErrorKind::Closed);
}

#[test]
fn a_segment_whose_header_names_another_segment_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let opts = options(dir.path(), 1 << 20, SyncPolicy::EveryBatch);
    let (wal, _) = open_collect(opts.clone());
    append(&wal, &record(1, 1, b"a"));
    drop(wal);
    let files = segment_files(dir.path());
    let renamed = dir.path().join("00000000000000ff.wal");
    std::fs::rename(&files[0], &renamed).unwrap();
    let err = Wal::open(opts, |_| Ok(())).err().expect("open fails");
    assert_eq!(err.kind(), ErrorKind::Corruption);
    assert!(err.to_string().contains("00000000000000ff.wal"), "{err}");
}

#[test]
fn an_oversized_payload_is_refused_without_writing() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, _) = open_collect(options(dir.path(), 1 << 20, SyncPolicy::Off));
    let huge = vec![0u8; kvengine::wal::segment_codec::MAX_PAYLOAD_LEN + 1];
    assert!(wal.append(1, 1, &huge).is_err());
    assert_eq!(wal.stats().records, 0);
}

proptest! {
    // Every roll and reopen costs a few fsyncs (file and directory): keep the count modest.
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Random records with random explicit rolls, restarts and roll threshold replay exactly.
    #[test]
    fn replay_equals_appended_records_for_any_roll_points(
        segment_size in 256u64..4096,
        ops in prop::collection::vec(
            (
                0..4u64,
                prop::collection::vec(any::<u8>(), 0..100),
                prop::bool::weighted(0.1),
                prop::bool::weighted(0.05),
            ),
            0..40,
        ),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let opts = options(dir.path(), segment_size, SyncPolicy::Off);
        let (mut wal, _) = open_collect(opts.clone());
        let mut written = Vec::new();
        let mut next_seq = [1u64; 4];
        for (shard, payload, roll, reopen) in ops {
            let r = record(shard, next_seq[shard as usize], &payload);
            next_seq[shard as usize] += 1;
            append(&wal, &r);
            written.push(r);
            if roll {
                wal.roll().unwrap();
            }
            if reopen {
                // A restart in the middle sees the same prefix, and appends continue after it.
                drop(wal);
                let (reopened, replayed) = open_collect(opts.clone());
                prop_assert_eq!(&replayed, &written);
                wal = reopened;
            }
        }
        drop(wal);
        prop_assert_eq!(open_collect(opts).1, written);
    }
}
