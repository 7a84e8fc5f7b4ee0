//! The Raft log store (`kvengine::raft_log`, WAL format version 2) against a model: random
//! batches of appends (overwriting a suffix), hard and conf states, truncations below and above
//! the last index and region removals, interleaved with purges and reopens. After every step
//! the log's `regions`, `state`, `entries` and `term` agree with a `BTreeMap` per region, and
//! segments are small so that batches roll segments and purges delete them. Then single
//! behaviours: refused batches, gaps found at replay, what purge keeps, one write per round.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::cell::Cell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use kvengine::raft_log::record_codec::{
    encode_batch_record, encode_checkpoint_record, encode_segment_header,
};
use kvengine::raft_log::{
    BatchError, ConfState, EntryKind, HardState, LogBatch, LogEntry, LogOp, LogReadError, RaftLog,
    RaftLogOptions, RegionLogState,
};
use kvengine::wal::{SyncPolicy, Wal, WalOptions};
use kvengine::{Error, ErrorKind};
use proptest::prelude::*;
use proptest::test_runner::TestRunner;

const REGIONS: u64 = 3;

fn options(dir: &Path, segment_size: u64) -> RaftLogOptions {
    RaftLogOptions {
        dir: dir.to_path_buf(),
        segment_size,
        sync: SyncPolicy::Off,
    }
}

fn entry(index: u64, term: u64, data: &str) -> LogEntry {
    LogEntry {
        index,
        term,
        kind: EntryKind::Normal,
        data: Bytes::copy_from_slice(data.as_bytes()),
        context: Bytes::new(),
    }
}

fn entries(first: u64, count: u64, term: u64, tag: &str) -> Vec<LogEntry> {
    (first..first + count)
        .map(|i| entry(i, term, &format!("{tag}-{i}")))
        .collect()
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

// ---------------------------------------------------------------------------------------------
// The model.

/// One region's log as the API describes it, kept as simply as possible.
#[derive(Clone, Debug, Default, PartialEq)]
struct ModelLog {
    truncated: (u64, u64),
    last: u64,
    entries: BTreeMap<u64, LogEntry>,
    hard: HardState,
    conf: ConfState,
}

type Model = BTreeMap<u64, ModelLog>;

impl ModelLog {
    fn state(&self) -> RegionLogState {
        RegionLogState {
            hard_state: self.hard,
            conf_state: self.conf.clone(),
            truncated_index: self.truncated.0,
            truncated_term: self.truncated.1,
            last_index: self.last,
        }
    }
}

/// A batch operation, with its indexes still relative to the log it will meet.
#[derive(Clone, Debug)]
enum BatchOp {
    /// Append `count` entries starting at a first index picked in (truncated, last + 1].
    Append {
        region: u64,
        start: prop::sample::Index,
        count: u64,
        term_bump: u64,
        kind: u8,
        data_len: usize,
        context: bool,
    },
    HardState {
        region: u64,
        term: u64,
        vote: u64,
        commit: u64,
    },
    ConfState {
        region: u64,
        voters: Vec<u64>,
        learners: Vec<u64>,
        auto_leave: bool,
    },
    /// Truncate at an index picked in [0, last] (below) or in (last, last + 4] (above).
    Truncate {
        region: u64,
        above: bool,
        at: prop::sample::Index,
    },
    Remove {
        region: u64,
    },
}

#[derive(Clone, Debug)]
enum Step {
    Write(Vec<BatchOp>),
    Purge,
    Reopen,
}

fn region() -> impl Strategy<Value = u64> {
    1..=REGIONS
}

fn batch_op() -> impl Strategy<Value = BatchOp> {
    prop_oneof![
        8 => (region(), any::<prop::sample::Index>(), 1..6u64, 0..2u64, 0..3u8, 0..80usize, any::<bool>())
            .prop_map(|(region, start, count, term_bump, kind, data_len, context)| BatchOp::Append {
                region, start, count, term_bump, kind, data_len, context,
            }),
        3 => (region(), 0..20u64, 0..4u64, 0..50u64)
            .prop_map(|(region, term, vote, commit)| BatchOp::HardState { region, term, vote, commit }),
        1 => (region(), prop::collection::vec(1..6u64, 0..4), prop::collection::vec(6..9u64, 0..2), any::<bool>())
            .prop_map(|(region, voters, learners, auto_leave)| BatchOp::ConfState { region, voters, learners, auto_leave }),
        3 => (region(), any::<bool>(), any::<prop::sample::Index>())
            .prop_map(|(region, above, at)| BatchOp::Truncate { region, above, at }),
        1 => region().prop_map(|region| BatchOp::Remove { region }),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        8 => prop::collection::vec(batch_op(), 1..5).prop_map(Step::Write),
        2 => Just(Step::Purge),
        1 => Just(Step::Reopen),
    ]
}

/// Turns the abstract operations into a batch valid for `model`, applying them to it.
fn resolve(ops: &[BatchOp], model: &mut Model, nonce: &mut u64) -> LogBatch {
    let mut batch = LogBatch::default();
    for op in ops {
        match op {
            BatchOp::Append {
                region,
                start,
                count,
                term_bump,
                kind,
                data_len,
                context,
            } => {
                let log = model.entry(*region).or_default();
                let (t, last) = (log.truncated.0, log.last);
                let first = t + 1 + start.index((last - t + 1) as usize) as u64;
                let base_term = log
                    .entries
                    .get(&(first - 1))
                    .map_or(log.truncated.1, |e| e.term);
                *nonce += 1;
                let new: Vec<LogEntry> = (first..first + count)
                    .map(|index| LogEntry {
                        index,
                        term: base_term + term_bump,
                        kind: EntryKind::ALL[*kind as usize],
                        data: Bytes::from(
                            format!("r{region}i{index}n{nonce}-{}", "x".repeat(*data_len))
                                .into_bytes(),
                        ),
                        context: if *context {
                            Bytes::from(format!("ctx{nonce}").into_bytes())
                        } else {
                            Bytes::new()
                        },
                    })
                    .collect();
                log.entries.split_off(&first);
                for e in &new {
                    log.entries.insert(e.index, e.clone());
                }
                log.last = first + count - 1;
                batch.append(*region, new);
            }
            BatchOp::HardState {
                region,
                term,
                vote,
                commit,
            } => {
                let hs = HardState {
                    term: *term,
                    vote: *vote,
                    commit: *commit,
                };
                model.entry(*region).or_default().hard = hs;
                batch.set_hard_state(*region, hs);
            }
            BatchOp::ConfState {
                region,
                voters,
                learners,
                auto_leave,
            } => {
                let cs = ConfState {
                    voters: voters.clone(),
                    learners: learners.clone(),
                    voters_outgoing: voters.iter().map(|v| v + 100).collect(),
                    learners_next: learners.clone(),
                    auto_leave: *auto_leave,
                    // Both encodings: the plain one (index 0) and the one with a conf index.
                    index: if *auto_leave { region + 1 } else { 0 },
                };
                model.entry(*region).or_default().conf = cs.clone();
                batch.set_conf_state(*region, cs);
            }
            BatchOp::Truncate { region, above, at } => {
                let log = model.entry(*region).or_default();
                let index = if *above {
                    log.last + 1 + at.index(4) as u64
                } else {
                    at.index(log.last as usize + 1) as u64
                };
                let term = log.entries.get(&index).map_or(index * 7, |e| e.term);
                if index > log.truncated.0 {
                    log.entries = log.entries.split_off(&(index + 1));
                    log.truncated = (index, term);
                    log.last = log.last.max(index);
                }
                batch.truncate(*region, index, term);
            }
            BatchOp::Remove { region } => {
                model.remove(region);
                batch.remove_region(*region);
            }
        }
    }
    batch
}

/// Every read of the API agrees with the model.
fn check(log: &RaftLog, model: &Model) -> Result<(), TestCaseError> {
    prop_assert_eq!(log.regions(), model.keys().copied().collect::<Vec<_>>());
    for region_id in 1..=REGIONS + 1 {
        let Some(m) = model.get(&region_id) else {
            prop_assert_eq!(log.state(region_id), None);
            prop_assert_eq!(log.first_index(region_id), None);
            prop_assert_eq!(log.last_index(region_id), None);
            prop_assert_eq!(
                log.term(region_id, 0),
                Err(LogReadError::UnknownRegion { region_id })
            );
            continue;
        };
        prop_assert_eq!(log.state(region_id), Some(m.state()));
        let (t, last) = (m.truncated.0, m.last);
        prop_assert_eq!(log.first_index(region_id), Some(t + 1));
        prop_assert_eq!(log.last_index(region_id), Some(last));
        let expected: Vec<LogEntry> = m.entries.values().cloned().collect();
        prop_assert_eq!(
            log.entries(region_id, t + 1, last + 1, None).unwrap(),
            expected.clone()
        );
        prop_assert_eq!(log.term(region_id, t), Ok(m.truncated.1));
        for e in &expected {
            prop_assert_eq!(log.term(region_id, e.index), Ok(e.term));
        }
        if t > 0 {
            prop_assert_eq!(
                log.term(region_id, t - 1),
                Err(LogReadError::Compacted {
                    region_id,
                    index: t - 1,
                    truncated_index: t
                })
            );
        }
        prop_assert_eq!(
            log.term(region_id, last + 1),
            Err(LogReadError::Unavailable {
                region_id,
                index: last + 1,
                last_index: last
            })
        );
        prop_assert_eq!(
            log.entries(region_id, t, last + 1, None),
            Err(LogReadError::Compacted {
                region_id,
                index: t,
                truncated_index: t
            })
        );
        prop_assert_eq!(
            log.entries(region_id, t + 1, last + 2, None),
            Err(LogReadError::Unavailable {
                region_id,
                index: last + 1,
                last_index: last
            })
        );
        if !expected.is_empty() {
            prop_assert_eq!(
                log.entries(region_id, t + 1, last + 1, Some(0)).unwrap(),
                expected[..1].to_vec()
            );
        }
    }
    Ok(())
}

/// How far the generated cases reached, so that the test fails if they stop reaching it.
#[derive(Default)]
struct Reach {
    /// Segments deleted by purges.
    purged_segments: Cell<u64>,
    /// Reopens after a purge had deleted a segment: replay starts at a later checkpoint.
    reopens_after_purge: Cell<u64>,
    /// Appends that replaced entries already in the log.
    overwrites: Cell<u64>,
}

fn run_model(segment_size: u64, steps: &[Step], reach: &Reach) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let mut log = RaftLog::open(options(dir.path(), segment_size)).unwrap();
    let mut model = Model::new();
    let mut nonce = 0;
    let mut purged = false;
    let bump = |c: &Cell<u64>, n: u64| c.set(c.get() + n);
    for step in steps {
        match step {
            Step::Write(ops) => {
                let lasts: BTreeMap<u64, u64> = model.iter().map(|(r, m)| (*r, m.last)).collect();
                let batch = resolve(ops, &mut model, &mut nonce);
                for op in batch.ops() {
                    if let LogOp::Append(entries) = &op.op
                        && entries[0].index <= lasts.get(&op.region_id).copied().unwrap_or(0)
                    {
                        bump(&reach.overwrites, 1);
                    }
                }
                log.write(&batch).unwrap();
            }
            Step::Purge => {
                let n = log.purge().unwrap() as u64;
                purged |= n > 0;
                bump(&reach.purged_segments, n);
            }
            Step::Reopen => {
                drop(log);
                log = RaftLog::open(options(dir.path(), segment_size)).unwrap();
                bump(&reach.reopens_after_purge, u64::from(purged));
            }
        }
        check(&log, &model)?;
    }
    drop(log);
    let log = RaftLog::open(options(dir.path(), segment_size)).unwrap();
    check(&log, &model)?;
    // Purging everything purgeable, then reopening, still gives the model.
    log.purge().unwrap();
    drop(log);
    let log = RaftLog::open(options(dir.path(), segment_size)).unwrap();
    check(&log, &model)
}

#[test]
fn raft_log_agrees_with_the_model_across_purges_and_reopens() {
    let strategy = (
        prop_oneof![Just(200u64), Just(600), Just(1 << 20)],
        prop::collection::vec(step(), 1..40),
    );
    let reach = Reach::default();
    let mut runner = TestRunner::new(ProptestConfig::with_cases(512));
    if let Err(e) = runner.run(&strategy, |(segment_size, steps)| {
        run_model(segment_size, &steps, &reach)
    }) {
        panic!("{e}");
    }
    let (purged, reopens, overwrites) = (
        reach.purged_segments.get(),
        reach.reopens_after_purge.get(),
        reach.overwrites.get(),
    );
    eprintln!("purged segments={purged} reopens after a purge={reopens} overwrites={overwrites}");
    assert!(purged >= 400, "purges deleted only {purged} segments");
    assert!(reopens >= 60, "only {reopens} reopens after a purge");
    assert!(overwrites >= 400, "only {overwrites} overwriting appends");
}

// ---------------------------------------------------------------------------------------------
// Single behaviours.

fn open(dir: &Path) -> RaftLog {
    RaftLog::open(options(dir, 1 << 20)).unwrap()
}

fn write(log: &RaftLog, f: impl FnOnce(&mut LogBatch)) {
    let mut batch = LogBatch::default();
    f(&mut batch);
    log.write(&batch).unwrap();
}

fn all_entries(log: &RaftLog, region_id: u64) -> Vec<(u64, u64, Bytes)> {
    let s = log.state(region_id).unwrap();
    log.entries(region_id, s.truncated_index + 1, s.last_index + 1, None)
        .unwrap()
        .into_iter()
        .map(|e| (e.index, e.term, e.data))
        .collect()
}

#[test]
fn an_append_replaces_the_suffix_from_its_first_index_live_and_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path());
    write(&log, |b| b.append(1, entries(1, 5, 1, "a")));
    write(&log, |b| b.append(1, entries(3, 1, 2, "b")));
    let expected = vec![
        (1, 1, Bytes::from_static(b"a-1")),
        (2, 1, Bytes::from_static(b"a-2")),
        (3, 2, Bytes::from_static(b"b-3")),
    ];
    assert_eq!(all_entries(&log, 1), expected);
    assert_eq!(log.state(1).unwrap().last_index, 3);
    drop(log);
    assert_eq!(all_entries(&open(dir.path()), 1), expected);
}

#[test]
fn an_append_leaving_a_gap_refuses_the_whole_batch() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path());
    write(&log, |b| b.append(1, entries(1, 2, 1, "a")));
    let mut batch = LogBatch::default();
    batch.set_hard_state(
        2,
        HardState {
            term: 1,
            vote: 1,
            commit: 0,
        },
    );
    batch.append(1, entries(4, 1, 1, "gap"));
    let err = log.write(&batch).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Invalid);
    assert!(
        matches!(
            err,
            Error::RaftLogBatch(BatchError::OutOfRange {
                region_id: 1,
                first_index: 4,
                truncated_index: 0,
                last_index: 2
            })
        ),
        "{err:?}"
    );
    // Nothing of it, not even the other region's hard state, was applied or written.
    assert_eq!(log.regions(), [1]);
    drop(log);
    let log = open(dir.path());
    assert_eq!(log.regions(), [1]);
    assert_eq!(log.state(1).unwrap().last_index, 2);
}

#[test]
fn appends_at_or_below_the_truncated_index_and_unordered_entries_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path());
    write(&log, |b| b.truncate(1, 5, 5));
    let mut batch = LogBatch::default();
    batch.append(1, entries(5, 1, 5, "old"));
    assert!(matches!(
        log.write(&batch),
        Err(Error::RaftLogBatch(BatchError::OutOfRange {
            first_index: 5,
            truncated_index: 5,
            ..
        }))
    ));
    let mut batch = LogBatch::default();
    batch.append(1, vec![entry(6, 5, "x"), entry(8, 5, "y")]);
    assert!(matches!(
        log.write(&batch),
        Err(Error::RaftLogBatch(BatchError::NotConsecutive {
            region_id: 1,
            index: 8,
            expected: 7
        }))
    ));
    // Operations earlier in a batch count: a truncation then an append right after it fits.
    write(&log, |b| {
        b.truncate(1, 10, 6);
        b.append(1, entries(11, 2, 6, "new"));
    });
    let s = log.state(1).unwrap();
    assert_eq!(
        (s.truncated_index, s.truncated_term, s.last_index),
        (10, 6, 12)
    );
}

#[test]
fn truncating_above_the_last_index_empties_the_log_at_that_point() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path());
    write(&log, |b| b.append(1, entries(1, 3, 1, "a")));
    write(&log, |b| b.truncate(1, 20, 4));
    let s = log.state(1).unwrap();
    assert_eq!(
        (s.truncated_index, s.truncated_term, s.last_index),
        (20, 4, 20)
    );
    assert_eq!(log.term(1, 20), Ok(4));
    assert_eq!(log.entries(1, 21, 21, None), Ok(vec![]));
    // The next append continues at 21.
    write(&log, |b| b.append(1, entries(21, 1, 4, "b")));
    drop(log);
    assert_eq!(
        all_entries(&open(dir.path()), 1),
        [(21, 4, Bytes::from_static(b"b-21"))]
    );
}

/// Region 1's states are written once, in the first segment; region 2's appends then roll many
/// segments. After truncating both, purge deletes the old segments, and region 1's newest hard
/// state, conf state and truncated point survive (the checkpoints carry them).
#[test]
fn purge_deletes_old_segments_and_keeps_the_newest_hard_conf_and_truncated_state() {
    let dir = tempfile::tempdir().unwrap();
    let log = RaftLog::open(options(dir.path(), 512)).unwrap();
    let hs = HardState {
        term: 3,
        vote: 2,
        commit: 9,
    };
    let cs = ConfState {
        voters: vec![1, 2, 3],
        learners: vec![4],
        ..Default::default()
    };
    write(&log, |b| {
        b.append(1, entries(1, 10, 3, "one"));
        b.set_hard_state(1, hs);
        b.set_conf_state(1, cs.clone());
        b.truncate(1, 9, 3);
    });
    for i in 1..=60 {
        write(&log, |b| b.append(2, entries(i, 1, 1, &"two".repeat(10))));
    }
    let before = log.segment_count();
    assert!(before > 10, "segments={before}");
    // Region 1's entry 10 pins the first segment.
    assert_eq!(
        log.purge().unwrap(),
        0,
        "nothing is purgeable before truncation"
    );
    write(&log, |b| {
        b.truncate(1, 10, 3);
        b.truncate(2, 58, 1);
    });
    let purged = log.purge().unwrap();
    assert!(purged >= before - 3, "purged={purged} of {before}");
    assert_eq!(log.segment_count(), before - purged);
    let expect = |log: &RaftLog| {
        assert_eq!(
            log.state(1),
            Some(RegionLogState {
                hard_state: hs,
                conf_state: cs.clone(),
                truncated_index: 10,
                truncated_term: 3,
                last_index: 10
            })
        );
        assert_eq!(log.state(2).unwrap().truncated_index, 58);
        assert_eq!(
            all_entries(log, 2).iter().map(|e| e.0).collect::<Vec<_>>(),
            [59, 60]
        );
    };
    expect(&log);
    drop(log);
    let log = RaftLog::open(options(dir.path(), 512)).unwrap();
    expect(&log);
}

#[test]
fn purge_keeps_a_segment_while_one_of_its_entries_is_above_the_truncated_index() {
    let dir = tempfile::tempdir().unwrap();
    let log = RaftLog::open(options(dir.path(), 300)).unwrap();
    write(&log, |b| b.append(1, entries(1, 1, 1, &"x".repeat(200))));
    for i in 1..=10 {
        write(&log, |b| b.append(2, entries(i, 1, 1, &"y".repeat(200))));
    }
    write(&log, |b| b.truncate(2, 10, 1));
    log.purge().unwrap();
    let first = &segment_files(dir.path())[0];
    assert!(
        first.ends_with("0000000000000001.wal"),
        "the segment holding region 1's entry 1 is gone: {}",
        first.display()
    );
    write(&log, |b| b.truncate(1, 1, 1));
    log.purge().unwrap();
    assert!(!segment_files(dir.path())[0].ends_with("0000000000000001.wal"));
    drop(log);
    let log = open(dir.path());
    assert_eq!(log.state(1).unwrap().truncated_index, 1);
}

#[test]
fn a_removed_region_is_dropped_and_its_segments_purged() {
    let dir = tempfile::tempdir().unwrap();
    let log = RaftLog::open(options(dir.path(), 300)).unwrap();
    for i in 1..=10 {
        write(&log, |b| b.append(7, entries(i, 1, 1, &"z".repeat(200))));
    }
    write(&log, |b| b.remove_region(7));
    assert_eq!(log.state(7), None);
    let before = log.segment_count();
    assert!(before >= 10, "segments={before}");
    assert_eq!(log.purge().unwrap(), before - 1);
    assert_eq!(log.segment_count(), 1);
    drop(log);
    let log = open(dir.path());
    assert_eq!(log.regions(), Vec::<u64>::new());
    // A region created again with the same id starts afresh.
    write(&log, |b| b.append(7, entries(1, 1, 2, "again")));
    drop(log);
    assert_eq!(
        all_entries(&open(dir.path()), 7),
        [(1, 2, Bytes::from_static(b"again-1"))]
    );
}

#[test]
fn one_write_for_many_regions_is_one_record_and_one_fdatasync() {
    let dir = tempfile::tempdir().unwrap();
    let log = RaftLog::open(RaftLogOptions {
        sync: SyncPolicy::EveryBatch,
        ..options(dir.path(), 1 << 20)
    })
    .unwrap();
    let before = log.stats();
    write(&log, |b| {
        for region in 1..=50 {
            b.append(region, entries(1, 3, 1, "e"));
            b.set_hard_state(
                region,
                HardState {
                    term: 1,
                    vote: region,
                    commit: 3,
                },
            );
        }
    });
    let after = log.stats();
    assert_eq!(after.records - before.records, 1);
    assert_eq!(after.fsyncs - before.fsyncs, 1);
    assert_eq!(log.regions().len(), 50);
}

#[test]
fn entries_stop_at_max_size_but_return_at_least_one() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path());
    write(&log, |b| b.append(1, entries(1, 5, 1, "0123456789")));
    let size = log.entries(1, 1, 2, None).unwrap()[0].size();
    let count = |max| log.entries(1, 1, 6, max).unwrap().len();
    assert_eq!(count(None), 5);
    assert_eq!(count(Some(0)), 1);
    assert_eq!(count(Some(size)), 1);
    assert_eq!(count(Some(3 * size)), 3);
    assert_eq!(count(Some(3 * size + 1)), 3);
    assert_eq!(count(Some(u64::MAX)), 5);
}

/// A segment written with an append that skips indexes (no live write does: the batch would be
/// refused) stops the open with an error naming the region, the expected and found index, the
/// segment and the offset of the record.
#[test]
fn a_gap_found_at_replay_is_corruption_naming_region_indexes_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let mut data = encode_segment_header(1).to_vec();
    encode_checkpoint_record(&[], &mut data).unwrap();
    let mut batch = LogBatch::default();
    batch.append(3, entries(1, 2, 1, "a"));
    encode_batch_record(&batch, &mut data).unwrap();
    let offset = data.len() as u64;
    let mut batch = LogBatch::default();
    batch.append(3, entries(5, 1, 1, "b"));
    encode_batch_record(&batch, &mut data).unwrap();
    let path = dir.path().join("0000000000000001.wal");
    std::fs::write(&path, &data).unwrap();
    let err = RaftLog::open(options(dir.path(), 1 << 20)).err().unwrap();
    assert_eq!(err.kind(), ErrorKind::Corruption);
    match &err {
        Error::RaftLogGap {
            region_id,
            expected,
            found,
            path: p,
            offset: o,
        } => {
            assert_eq!((*region_id, *expected, *found, *o), (3, 3, 5, offset));
            assert_eq!(p, &path);
        }
        other => panic!("not a gap: {other:?}"),
    }
    let msg = err.to_string();
    for fact in [
        "region_id=3",
        "expected=3",
        "found=5",
        &format!("offset={offset}"),
    ] {
        assert!(msg.contains(fact), "{msg}");
    }
}

/// Deleting by hand a segment whose entries are still live is found at open (the checkpoint
/// after it names a last index replay cannot reach), never served as a shorter log.
#[test]
fn a_segment_deleted_by_hand_is_corruption_not_missing_entries() {
    let dir = tempfile::tempdir().unwrap();
    let log = RaftLog::open(options(dir.path(), 300)).unwrap();
    for i in 1..=6 {
        write(&log, |b| b.append(1, entries(i, 1, 1, &"m".repeat(200))));
    }
    drop(log);
    let files = segment_files(dir.path());
    assert!(files.len() >= 4, "{files:?}");
    std::fs::remove_file(&files[1]).unwrap();
    let err = RaftLog::open(options(dir.path(), 300)).err().unwrap();
    assert_eq!(err.kind(), ErrorKind::Corruption, "{err}");
    assert!(err.to_string().contains("region_id=1"), "{err}");
}

#[test]
fn each_log_refuses_the_other_logs_segments() {
    let dir = tempfile::tempdir().unwrap();
    let wal = Wal::open(WalOptions::new(dir.path()), |_| Ok(())).unwrap();
    wal.append(1, 1, b"engine record").unwrap();
    drop(wal);
    let err = RaftLog::open(options(dir.path(), 1 << 20)).err().unwrap();
    assert_eq!(err.kind(), ErrorKind::Corruption);
    assert!(err.to_string().contains("found=1 expected=2"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path());
    write(&log, |b| b.append(1, entries(1, 1, 1, "raft")));
    drop(log);
    let err = Wal::open(WalOptions::new(dir.path()), |_| Ok(()))
        .err()
        .unwrap();
    assert_eq!(err.kind(), ErrorKind::Corruption);
    assert!(err.to_string().contains("found=2 expected=1"), "{err}");
}

#[test]
fn a_checkpoint_reader_sees_regions_of_a_fully_purged_history() {
    // Regions whose every record was in purged segments come back from the checkpoint of the
    // first surviving segment alone.
    let dir = tempfile::tempdir().unwrap();
    let log = RaftLog::open(options(dir.path(), 300)).unwrap();
    write(&log, |b| {
        b.truncate(9, 5, 5);
        b.set_hard_state(
            9,
            HardState {
                term: 5,
                vote: 1,
                commit: 5,
            },
        );
    });
    for i in 1..=8 {
        write(&log, |b| {
            b.append(1, entries(i, 1, 1, &"p".repeat(200)));
            b.truncate(1, i, 1);
        });
    }
    assert!(log.purge().unwrap() >= 4);
    drop(log);
    let log = open(dir.path());
    assert_eq!(log.regions(), [1, 9]);
    let s = log.state(9).unwrap();
    assert_eq!(
        (s.truncated_index, s.last_index, s.hard_state.commit),
        (5, 5, 5)
    );
}

/// Writers on several threads share the log (group commit); what they made visible is what a
/// reopen replays, because memory is changed under the append lock, in file order.
#[test]
fn concurrent_writers_see_after_reopen_what_they_saw_live() {
    let dir = tempfile::tempdir().unwrap();
    let log = std::sync::Arc::new(
        RaftLog::open(RaftLogOptions {
            sync: SyncPolicy::GroupCommit,
            ..options(dir.path(), 2048)
        })
        .unwrap(),
    );
    let threads: Vec<_> = (1..=4u64)
        .map(|region| {
            let log = log.clone();
            std::thread::spawn(move || {
                for i in 1..=60u64 {
                    write(&log, |b| {
                        // Every third round overwrites the previous entry, every tenth truncates;
                        // region 0 is shared by every thread (last writer wins).
                        let first = if i % 3 == 0 { i - 1 } else { i };
                        b.append(
                            region,
                            entries(first, i + 1 - first, i, &format!("t{region}")),
                        );
                        b.set_hard_state(
                            0,
                            HardState {
                                term: i,
                                vote: region,
                                commit: i,
                            },
                        );
                        if i % 10 == 0 {
                            b.truncate(region, i - 5, i - 5);
                        }
                    });
                    if i % 20 == 0 {
                        log.purge().unwrap();
                    }
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    let live: Vec<_> = log
        .regions()
        .into_iter()
        .map(|r| {
            (
                r,
                log.state(r),
                if r == 0 { vec![] } else { all_entries(&log, r) },
            )
        })
        .collect();
    assert_eq!(live.len(), 5);
    drop(log);
    let log = open(dir.path());
    let replayed: Vec<_> = log
        .regions()
        .into_iter()
        .map(|r| {
            (
                r,
                log.state(r),
                if r == 0 { vec![] } else { all_entries(&log, r) },
            )
        })
        .collect();
    assert_eq!(replayed, live);
}
