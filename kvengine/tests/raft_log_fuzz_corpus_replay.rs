//! The Raft log segment format (version 2) against its fuzz target: the committed seeds of
//! `fuzz/corpus/raft_log_segment` are generated here from a real [`RaftLog`] and must match
//! their generator (`STRATUS_BLESS=1` rewrites them after an intended format change); the
//! golden segments must keep decoding to the batches they were written from, which are spelled
//! out below, not derived from the decoder; and every corpus file, plus mutations of the seeds,
//! passes [`raft_log::fuzz_check`] without panicking. A missing corpus or seed is a failure.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::path::Path;

use bytes::Bytes;
use kvengine::raft_log::record_codec::{
    RaftRecord, RaftSegmentFault, RegionCheckpoint, decode_raft_segment, encode_batch_record,
    encode_checkpoint_record, encode_segment_header,
};
use kvengine::raft_log::{
    self, ConfState, EntryKind, HardState, LogBatch, LogEntry, RaftLog, RaftLogOptions,
    RegionLogState,
};
use kvengine::wal::SyncPolicy;
use kvengine::wal::frame::{FramesEnd, encode_frame};
use proptest::prelude::*;

#[path = "../../fuzz/replay_support.rs"]
mod replay_support;
use replay_support::*;

const TARGET: &str = "raft_log_segment";

fn entry(index: u64, term: u64, kind: EntryKind, data: &str, context: &str) -> LogEntry {
    LogEntry {
        index,
        term,
        kind,
        data: Bytes::copy_from_slice(data.as_bytes()),
        context: Bytes::copy_from_slice(context.as_bytes()),
    }
}

fn full_conf() -> ConfState {
    ConfState {
        voters: vec![1, 2, 3],
        learners: vec![4],
        voters_outgoing: vec![1, 2],
        learners_next: vec![5],
        auto_leave: true,
        index: 0,
    }
}

/// The batches of the golden segment: every operation, every entry kind, an overwrite, a
/// truncation and a removal.
fn golden_batches() -> Vec<LogBatch> {
    let mut b1 = LogBatch::default();
    b1.truncate(1, 5, 5);
    b1.set_conf_state(1, full_conf());
    b1.set_hard_state(
        1,
        HardState {
            term: 1,
            vote: 1,
            commit: 5,
        },
    );
    b1.truncate(2, 5, 5);
    b1.set_conf_state(
        2,
        ConfState {
            voters: vec![1, 2, 3],
            ..Default::default()
        },
    );
    let mut b2 = LogBatch::default();
    b2.append(
        1,
        vec![
            entry(6, 1, EntryKind::Normal, "put t_1_a=1", ""),
            entry(7, 1, EntryKind::ConfChange, "add learner 4", "cc-context"),
            entry(8, 1, EntryKind::ConfChangeV2, "enter joint", ""),
        ],
    );
    b2.set_hard_state(
        1,
        HardState {
            term: 1,
            vote: 1,
            commit: 7,
        },
    );
    b2.append(2, vec![entry(6, 1, EntryKind::Normal, "", "")]);
    let mut b3 = LogBatch::default();
    b3.append(
        1,
        vec![entry(8, 2, EntryKind::Normal, "new leader's entry", "")],
    );
    b3.set_hard_state(
        1,
        HardState {
            term: 2,
            vote: 2,
            commit: 8,
        },
    );
    let mut b4 = LogBatch::default();
    b4.truncate(2, 6, 1);
    b4.append(3, vec![entry(1, 1, EntryKind::Normal, "short-lived", "")]);
    b4.remove_region(3);
    vec![b1, b2, b3, b4]
}

/// The batch written after a reopen, into the second segment.
fn after_roll_batch() -> LogBatch {
    let mut b = LogBatch::default();
    b.append(1, vec![entry(9, 2, EntryKind::Normal, "after roll", "")]);
    b.set_hard_state(
        1,
        HardState {
            term: 2,
            vote: 2,
            commit: 9,
        },
    );
    b
}

fn options(dir: &Path) -> RaftLogOptions {
    RaftLogOptions {
        dir: dir.to_path_buf(),
        segment_size: 1 << 20,
        sync: SyncPolicy::Off,
    }
}

/// Writes the golden batches with a real log, reopens (the new segment starts with a
/// checkpoint), writes one more; returns the two segment files.
fn written_segments() -> (Vec<u8>, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let log = RaftLog::open(options(dir.path())).unwrap();
    for batch in golden_batches() {
        log.write(&batch).unwrap();
    }
    drop(log);
    let log = RaftLog::open(options(dir.path())).unwrap();
    log.write(&after_roll_batch()).unwrap();
    drop(log);
    let read = |seq: u64| std::fs::read(dir.path().join(format!("{seq:016x}.wal"))).unwrap();
    (read(1), read(2))
}

/// Every seed, by file name: the two golden segments, and what a crash or bit rot leaves.
fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    let (first, second) = written_segments();
    let mut torn = first.clone();
    torn.truncate(first.len() - 9);
    let mut zero_tail = second.clone();
    zero_tail.extend_from_slice(&[0; 200]);
    let mut corrupt = first.clone();
    // A byte inside the second frame (the first batch), with valid frames after it.
    corrupt[16 + 17 + 30] ^= 0x08;
    let mut unknown_kind = encode_segment_header(3).to_vec();
    encode_frame(&[9, 0, 0, 0, 0], &mut unknown_kind);
    vec![
        ("golden_first.wal", first.clone()),
        ("golden_after_roll.wal", second),
        ("header_only.wal", first[..16].to_vec()),
        ("torn_last_record.wal", torn),
        ("zero_tail.wal", zero_tail),
        ("corrupt_middle_record.wal", corrupt),
        ("record_of_unknown_kind.wal", unknown_kind),
    ]
}

#[test]
fn committed_seeds_match_their_generator_or_bless_rewrites_them() {
    for (file, bytes) in seeds() {
        check_or_bless_seed(TARGET, file, &bytes);
    }
}

fn committed(file: &str) -> Vec<u8> {
    std::fs::read(corpus(TARGET).join(file)).unwrap_or_else(|e| panic!("seed {file}: {e}"))
}

#[test]
fn committed_golden_v2_segments_decode_to_the_batches_they_were_written_from() {
    let first = decode_raft_segment(&committed("golden_first.wal")).unwrap();
    assert_eq!(first.segment_seq, 1);
    assert_eq!(first.end, FramesEnd::Clean);
    let mut expected = vec![RaftRecord::Checkpoint(vec![])];
    expected.extend(golden_batches().into_iter().map(RaftRecord::Batch));
    let records: Vec<RaftRecord> = first.records.into_iter().map(|(_, r)| r).collect();
    assert_eq!(records, expected);

    let second = decode_raft_segment(&committed("golden_after_roll.wal")).unwrap();
    assert_eq!(second.segment_seq, 2);
    let records: Vec<RaftRecord> = second.records.into_iter().map(|(_, r)| r).collect();
    assert_eq!(
        records,
        [
            RaftRecord::Checkpoint(vec![
                RegionCheckpoint {
                    region_id: 1,
                    truncated_index: 5,
                    truncated_term: 5,
                    last_index: 8,
                    hard_state: HardState {
                        term: 2,
                        vote: 2,
                        commit: 8
                    },
                    conf_state: full_conf(),
                },
                RegionCheckpoint {
                    region_id: 2,
                    truncated_index: 6,
                    truncated_term: 1,
                    last_index: 6,
                    hard_state: HardState::default(),
                    conf_state: ConfState {
                        voters: vec![1, 2, 3],
                        ..Default::default()
                    },
                },
            ]),
            RaftRecord::Batch(after_roll_batch()),
        ]
    );
}

#[test]
fn committed_golden_v2_segments_open_as_a_log() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("0000000000000001.wal"),
        committed("golden_first.wal"),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("0000000000000002.wal"),
        committed("golden_after_roll.wal"),
    )
    .unwrap();
    let log = RaftLog::open(options(dir.path())).unwrap();
    assert_eq!(log.regions(), [1, 2]);
    assert_eq!(
        log.state(1),
        Some(RegionLogState {
            hard_state: HardState {
                term: 2,
                vote: 2,
                commit: 9
            },
            conf_state: full_conf(),
            truncated_index: 5,
            truncated_term: 5,
            last_index: 9,
        })
    );
    let terms: Vec<(u64, u64, EntryKind)> = log
        .entries(1, 6, 10, None)
        .unwrap()
        .iter()
        .map(|e| (e.index, e.term, e.kind))
        .collect();
    assert_eq!(
        terms,
        [
            (6, 1, EntryKind::Normal),
            (7, 1, EntryKind::ConfChange),
            (8, 2, EntryKind::Normal),
            (9, 2, EntryKind::Normal),
        ]
    );
    assert_eq!(
        log.entries(1, 7, 8, None).unwrap()[0].context,
        Bytes::from_static(b"cc-context")
    );
    let s = log.state(2).unwrap();
    assert_eq!(
        (s.truncated_index, s.truncated_term, s.last_index),
        (6, 1, 6)
    );
}

#[test]
fn committed_damaged_seeds_are_torn_corrupt_or_refused() {
    let torn = decode_raft_segment(&committed("torn_last_record.wal")).unwrap();
    assert!(matches!(torn.end, FramesEnd::Torn { .. }));
    assert_eq!(torn.records.len(), 4, "checkpoint and three whole batches");
    let zero = decode_raft_segment(&committed("zero_tail.wal")).unwrap();
    assert!(matches!(zero.end, FramesEnd::Torn { .. }));
    let corrupt = decode_raft_segment(&committed("corrupt_middle_record.wal")).unwrap();
    assert!(
        matches!(corrupt.end, FramesEnd::Corrupt { offset: 33, .. }),
        "{:?}",
        corrupt.end
    );
    assert!(matches!(
        decode_raft_segment(&committed("record_of_unknown_kind.wal")),
        Err(RaftSegmentFault::Record { offset: 16, .. })
    ));
}

#[test]
fn raft_log_segment_corpus_replays_without_panicking() {
    let files = corpus_files(TARGET);
    assert!(files.len() >= 7, "{} corpus files", files.len());
    for (path, data) in files {
        eprintln!("replaying {}", path.display());
        raft_log::fuzz_check(&data);
    }
}

#[test]
fn arbitrary_bytes_pass_the_fuzz_check() {
    let inputs: [&[u8]; 6] = [
        b"",
        b"\x00",
        b"SWAL\x02\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00",
        b"SWAL\x01\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00",
        b"SWAL\x02\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff\x00\x00\x00\x00",
        &[0xff; 64],
    ];
    for input in inputs {
        raft_log::fuzz_check(input);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// A cheap stand-in for the fuzzer in ordinary test runs: mutated seeds never panic.
    #[test]
    fn mutated_seeds_pass_the_fuzz_check(
        seed in any::<prop::sample::Index>(),
        mutations in prop::collection::vec(mutation(), 1..4),
    ) {
        let seeds = corpus_files(TARGET);
        let (_, data) = &seeds[seed.index(seeds.len())];
        raft_log::fuzz_check(&mutate(data.clone(), &mutations));
    }
}

/// Indexes and terms: mostly small (so that appends fit and overwrite), else where arithmetic
/// can go wrong: near `u64::MAX`, anything.
fn edge_u64() -> impl Strategy<Value = u64> {
    prop_oneof![6 => 0..8u64, 1 => (u64::MAX - 8)..=u64::MAX, 1 => any::<u64>()]
}

fn arbitrary_record() -> impl Strategy<Value = RaftRecord> {
    let entries = (
        edge_u64(),
        prop::collection::vec((edge_u64(), 0..3usize), 1..4),
    )
        .prop_map(|(first, terms)| {
            terms
                .into_iter()
                .enumerate()
                .map(|(i, (term, kind))| LogEntry {
                    index: first.wrapping_add(i as u64),
                    term,
                    kind: EntryKind::ALL[kind],
                    data: Bytes::from(vec![kind as u8; i]),
                    context: Bytes::new(),
                })
                .collect::<Vec<_>>()
        });
    let op = (0..4u64, 0..5u8, entries, edge_u64(), edge_u64()).prop_map(
        |(region, kind, entries, a, b)| {
            let mut batch = LogBatch::default();
            match kind {
                0 => batch.append(region, entries),
                1 => batch.set_hard_state(
                    region,
                    HardState {
                        term: a,
                        vote: 1,
                        commit: b,
                    },
                ),
                2 => batch.set_conf_state(
                    region,
                    ConfState {
                        voters: vec![a],
                        ..Default::default()
                    },
                ),
                3 => batch.truncate(region, a, b),
                _ => batch.remove_region(region),
            }
            batch
        },
    );
    let batch = prop::collection::vec(op, 1..4).prop_map(|parts| {
        let mut batch = LogBatch::default();
        for part in parts {
            for op in part.ops() {
                match &op.op {
                    raft_log::LogOp::Append(e) => batch.append(op.region_id, e.clone()),
                    raft_log::LogOp::HardState(h) => batch.set_hard_state(op.region_id, *h),
                    raft_log::LogOp::ConfState(c) => batch.set_conf_state(op.region_id, c.clone()),
                    raft_log::LogOp::Truncate { index, term } => {
                        batch.truncate(op.region_id, *index, *term)
                    }
                    raft_log::LogOp::RemoveRegion => batch.remove_region(op.region_id),
                }
            }
        }
        RaftRecord::Batch(batch)
    });
    let checkpoint =
        prop::collection::btree_map(0..4u64, (edge_u64(), edge_u64(), edge_u64()), 0..4).prop_map(
            |regions| {
                RaftRecord::Checkpoint(
                    regions
                        .into_iter()
                        .map(|(region_id, (a, b, term))| RegionCheckpoint {
                            region_id,
                            truncated_index: a.min(b),
                            truncated_term: term,
                            last_index: a.max(b),
                            ..Default::default()
                        })
                        .collect(),
                )
            },
        );
    prop_oneof![4 => batch, 1 => checkpoint]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    /// Records with intact checksums but arbitrary content (indexes near 0 and `u64::MAX`,
    /// gaps, overwrites, truncations anywhere, checkpoints that disagree with what came before)
    /// reach the decoder and the replay rules, which must never panic. Byte mutations of the
    /// seeds rarely get past the checksums.
    #[test]
    fn arbitrary_records_pass_the_fuzz_check(
        records in prop::collection::vec(arbitrary_record(), 0..8),
    ) {
        let mut data = encode_segment_header(1).to_vec();
        for record in &records {
            match record {
                RaftRecord::Batch(batch) => encode_batch_record(batch, &mut data).unwrap(),
                RaftRecord::Checkpoint(regions) => encode_checkpoint_record(regions, &mut data).unwrap(),
            }
        }
        raft_log::fuzz_check(&data);
    }
}
