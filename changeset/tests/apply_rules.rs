//! Exact tests of the rules of `ShardFiles::apply`, one rule per test.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use changeset::{
    Applied, ApplyError, Change, ChangeSet, ColumnFamily, Compaction, Flush, Ingest, L0Create,
    MalformedReason, ShardFiles, ShardSplitInfo, Snapshot, Split, TableCreate,
};

const SHARD: u64 = 7;
const VER: u64 = 3;

fn l0(id: u64, smallest: &str, biggest: &str) -> L0Create {
    L0Create {
        id,
        smallest: Bytes::copy_from_slice(smallest.as_bytes()),
        biggest: Bytes::copy_from_slice(biggest.as_bytes()),
        size: id * 10,
    }
}

fn table(id: u64, cf: ColumnFamily, level: u32, smallest: &str, biggest: &str) -> TableCreate {
    TableCreate {
        id,
        level,
        cf: cf.as_u32(),
        smallest: Bytes::copy_from_slice(smallest.as_bytes()),
        biggest: Bytes::copy_from_slice(biggest.as_bytes()),
        size: id * 10,
    }
}

fn changeset(sequence: u64, change: Change) -> ChangeSet {
    ChangeSet {
        shard_id: SHARD,
        shard_ver: VER,
        sequence,
        properties: BTreeMap::new(),
        change: Some(change),
    }
}

fn flush(sequence: u64, id: u64, data_sequence: u64) -> ChangeSet {
    changeset(
        sequence,
        Change::Flush(Flush {
            l0_create: Some(l0(id, "b", "x")),
            data_sequence,
            version: 1_000 + data_sequence,
        }),
    )
}

/// Shard [a, z) at meta_seq 10: L0s 31 (newest), 30; WRITE L1 20 [a, f], 21 [g, p], 22 [q, y];
/// LOCK L1 23 [c, d]; WRITE L2 10 [a, y].
fn shard() -> ShardFiles {
    let snapshot = Snapshot {
        start: Bytes::from_static(b"a"),
        end: Bytes::from_static(b"z"),
        base_version: 1_000,
        data_sequence: 50,
        l0_creates: vec![l0(31, "c", "h"), l0(30, "k", "r")],
        table_creates: vec![
            table(21, ColumnFamily::Write, 1, "g", "p"),
            table(20, ColumnFamily::Write, 1, "a", "f"),
            table(22, ColumnFamily::Write, 1, "q", "y"),
            table(23, ColumnFamily::Lock, 1, "c", "d"),
            table(10, ColumnFamily::Write, 2, "a", "y"),
        ],
    };
    ShardFiles::from_snapshot(SHARD, VER, 10, &snapshot).expect("valid snapshot")
}

fn ids(files: &[changeset::FileMeta]) -> Vec<u64> {
    files.iter().map(|f| f.id).collect()
}

fn malformed(result: Result<Applied, ApplyError>) -> MalformedReason {
    match result {
        Err(ApplyError::Malformed { reason, .. }) => reason,
        other => panic!("expected a malformed error, got {other:?}"),
    }
}

#[test]
fn shard_ver_mismatch_is_rejected_with_both_versions() {
    let mut shard = shard();
    let before = shard.clone();
    let mut change = flush(11, 40, 60);
    change.shard_ver = VER + 1;
    let err = shard.apply(&change).unwrap_err();
    assert_eq!(
        err,
        ApplyError::ShardVerMismatch {
            shard_id: SHARD,
            expected: VER,
            found: VER + 1
        }
    );
    let message = err.to_string();
    assert!(message.contains("expected_ver=3 found_ver=4"), "{message}");
    assert_eq!(shard, before);
}

#[test]
fn shard_id_mismatch_is_rejected() {
    let mut shard = shard();
    let before = shard.clone();
    let mut change = flush(11, 40, 60);
    change.shard_id = SHARD + 1;
    assert_eq!(
        shard.apply(&change),
        Err(ApplyError::ShardIdMismatch {
            expected: SHARD,
            found: SHARD + 1
        })
    );
    assert_eq!(shard, before);
}

#[test]
fn sequence_already_applied_is_skipped() {
    let mut shard = shard();
    let before = shard.clone();
    for sequence in [0, 9, 10] {
        assert_eq!(
            shard.apply(&flush(sequence, 40, 60)),
            Ok(Applied::Skipped { meta_seq: 10 })
        );
    }
    assert_eq!(shard, before);
}

#[test]
fn already_applied_sequence_is_skipped_even_with_an_old_shard_ver() {
    let mut shard = shard();
    let mut change = flush(5, 40, 60);
    change.shard_ver = VER - 1;
    assert_eq!(shard.apply(&change), Ok(Applied::Skipped { meta_seq: 10 }));
}

#[test]
fn applying_each_kind_twice_leaves_the_state_of_applying_it_once() {
    let changes = [
        flush(11, 40, 60),
        changeset(
            11,
            Change::Compaction(Compaction {
                cf: 0,
                level: 0,
                top_deletes: vec![30],
                bottom_deletes: vec![21, 22],
                table_creates: vec![table(41, ColumnFamily::Write, 1, "g", "y")],
                conflicted: false,
                safe_point: 0,
            }),
        ),
        changeset(
            11,
            Change::Ingest(Ingest {
                l0_creates: vec![l0(42, "a", "b")],
                table_creates: vec![table(43, ColumnFamily::Extra, 3, "a", "b")],
            }),
        ),
        changeset(11, Change::InitialFlush(shard().to_snapshot())),
    ];
    for change in changes {
        let mut once = shard();
        assert_eq!(once.apply(&change), Ok(Applied::Applied), "{change:?}");
        let mut twice = once.clone();
        assert_eq!(twice.apply(&change), Ok(Applied::Skipped { meta_seq: 11 }));
        assert_eq!(twice, once);
        assert_eq!(once.meta_seq(), 11);
    }
}

#[test]
fn flush_prepends_an_l0_and_advances_data_sequence() {
    let mut shard = shard();
    assert_eq!(shard.apply(&flush(11, 40, 60)), Ok(Applied::Applied));
    assert_eq!(ids(shard.l0s()), [40, 31, 30]);
    assert_eq!(shard.data_sequence(), 60);
    assert_eq!(shard.meta_seq(), 11);
}

#[test]
fn flush_of_an_empty_memtable_only_advances_data_sequence() {
    let mut shard = shard();
    let change = changeset(
        11,
        Change::Flush(Flush {
            l0_create: None,
            data_sequence: 70,
            version: 1_070,
        }),
    );
    assert_eq!(shard.apply(&change), Ok(Applied::Applied));
    assert_eq!(ids(shard.l0s()), [31, 30]);
    assert_eq!(shard.data_sequence(), 70);
}

#[test]
fn l0_compaction_replaces_inputs_with_sorted_outputs() {
    let mut shard = shard();
    let change = changeset(
        11,
        Change::Compaction(Compaction {
            cf: 0,
            level: 0,
            top_deletes: vec![30, 31],
            bottom_deletes: vec![20, 21, 22, 23],
            table_creates: vec![
                table(45, ColumnFamily::Write, 1, "m", "y"),
                table(44, ColumnFamily::Write, 1, "a", "l"),
                table(46, ColumnFamily::Lock, 1, "c", "h"),
            ],
            conflicted: false,
            safe_point: 0,
        }),
    );
    assert_eq!(shard.apply(&change), Ok(Applied::Applied));
    assert!(shard.l0s().is_empty());
    assert_eq!(ids(shard.level(ColumnFamily::Write, 1)), [44, 45]);
    assert_eq!(ids(shard.level(ColumnFamily::Lock, 1)), [46]);
    assert_eq!(ids(shard.level(ColumnFamily::Write, 2)), [10]);
}

#[test]
fn level_compaction_moving_a_file_down_keeps_its_id() {
    let mut shard = shard();
    let change = changeset(
        11,
        Change::Compaction(Compaction {
            cf: ColumnFamily::Lock.as_u32(),
            level: 1,
            top_deletes: vec![23],
            bottom_deletes: vec![],
            table_creates: vec![table(23, ColumnFamily::Lock, 2, "c", "d")],
            conflicted: false,
            safe_point: 0,
        }),
    );
    assert_eq!(shard.apply(&change), Ok(Applied::Applied));
    assert!(shard.level(ColumnFamily::Lock, 1).is_empty());
    assert_eq!(ids(shard.level(ColumnFamily::Lock, 2)), [23]);
}

#[test]
fn compaction_whose_inputs_are_gone_is_conflicted_and_changes_only_meta_seq() {
    let mut shard = shard();
    let before = shard.clone();
    let compaction = Compaction {
        cf: ColumnFamily::Write.as_u32(),
        level: 1,
        top_deletes: vec![20, 99],
        bottom_deletes: vec![10],
        table_creates: vec![table(47, ColumnFamily::Write, 2, "a", "y")],
        conflicted: false,
        safe_point: 0,
    };
    let change = changeset(11, Change::Compaction(compaction.clone()));
    let Ok(Applied::Conflicted(marked)) = shard.apply(&change) else {
        panic!("expected a conflict");
    };
    let expected = changeset(
        11,
        Change::Compaction(Compaction {
            conflicted: true,
            safe_point: 0,
            ..compaction
        }),
    );
    assert_eq!(*marked, expected);
    assert_eq!(shard.meta_seq(), 11);
    assert_eq!(shard.to_snapshot(), before.to_snapshot());
}

#[test]
fn recorded_conflicted_compaction_replays_as_conflicted_even_if_inputs_exist() {
    let mut shard = shard();
    let before = shard.clone();
    let change = changeset(
        11,
        Change::Compaction(Compaction {
            cf: ColumnFamily::Write.as_u32(),
            level: 1,
            top_deletes: vec![20],
            bottom_deletes: vec![],
            table_creates: vec![table(48, ColumnFamily::Write, 2, "a", "b")],
            conflicted: true,
            safe_point: 0,
        }),
    );
    assert_eq!(
        shard.apply(&change),
        Ok(Applied::Conflicted(Box::new(change.clone())))
    );
    assert_eq!(shard.to_snapshot(), before.to_snapshot());
}

#[test]
fn compaction_output_overlapping_a_remaining_file_is_rejected() {
    let mut shard = shard();
    let before = shard.clone();
    let change = changeset(
        11,
        Change::Compaction(Compaction {
            cf: 0,
            level: 0,
            top_deletes: vec![31],
            bottom_deletes: vec![20],
            table_creates: vec![table(49, ColumnFamily::Write, 1, "a", "h")],
            conflicted: false,
            safe_point: 0,
        }),
    );
    assert_eq!(
        malformed(shard.apply(&change)),
        MalformedReason::LevelOverlap {
            cf: ColumnFamily::Write,
            level: 1,
            id: 21,
            other: 49
        }
    );
    assert_eq!(shard, before);
}

#[test]
fn compaction_output_at_the_wrong_level_is_rejected() {
    let mut shard = shard();
    let change = changeset(
        11,
        Change::Compaction(Compaction {
            cf: ColumnFamily::Write.as_u32(),
            level: 1,
            top_deletes: vec![20],
            bottom_deletes: vec![],
            table_creates: vec![table(49, ColumnFamily::Write, 1, "a", "b")],
            conflicted: false,
            safe_point: 0,
        }),
    );
    assert!(matches!(
        malformed(shard.apply(&change)),
        MalformedReason::CompactionOutputMisplaced { id: 49, .. }
    ));
}

#[test]
fn missing_change_and_unknown_column_family_are_malformed() {
    let mut shard = shard();
    let mut missing = flush(11, 40, 60);
    missing.change = None;
    assert_eq!(
        malformed(shard.apply(&missing)),
        MalformedReason::MissingChange
    );

    let mut bad_cf = table(50, ColumnFamily::Write, 3, "a", "b");
    bad_cf.cf = 9;
    let ingest = changeset(
        11,
        Change::Ingest(Ingest {
            l0_creates: vec![],
            table_creates: vec![bad_cf],
        }),
    );
    let err = shard.apply(&ingest).unwrap_err();
    assert_eq!(
        err.to_string(),
        "malformed changeset: unknown column family cf=9 shard_id=7 sequence=11"
    );
    assert_eq!(shard.meta_seq(), 10);
}

#[test]
fn creating_an_id_already_referenced_is_rejected() {
    let mut shard = shard();
    let before = shard.clone();
    assert_eq!(
        malformed(shard.apply(&flush(11, 21, 60))),
        MalformedReason::DuplicateFile { id: 21 }
    );
    assert_eq!(shard, before);
}

#[test]
fn ingest_into_a_level_must_fit_between_existing_files() {
    let mut shard = shard();
    let before = shard.clone();
    let overlapping = changeset(
        11,
        Change::Ingest(Ingest {
            l0_creates: vec![l0(51, "a", "b")],
            table_creates: vec![table(52, ColumnFamily::Write, 1, "p", "q")],
        }),
    );
    assert!(matches!(
        malformed(shard.apply(&overlapping)),
        MalformedReason::LevelOverlap { .. }
    ));
    assert_eq!(shard, before);
}

#[test]
fn initial_flush_replaces_the_inherited_files() {
    let mut shard = shard();
    let own = Snapshot {
        start: Bytes::from_static(b"a"),
        end: Bytes::from_static(b"z"),
        base_version: 1_000,
        data_sequence: 80,
        l0_creates: vec![l0(60, "a", "y")],
        table_creates: vec![],
    };
    let change = changeset(11, Change::InitialFlush(own.clone()));
    assert_eq!(shard.apply(&change), Ok(Applied::Applied));
    assert_eq!(shard.to_snapshot(), own);
    assert_eq!(shard.file_ids(), BTreeSet::from([60]));

    let mut other_range = own;
    other_range.end = Bytes::from_static(b"y");
    let change = changeset(12, Change::InitialFlush(other_range));
    assert_eq!(
        malformed(shard.apply(&change)),
        MalformedReason::ShardRangeChanged
    );
}

#[test]
fn properties_are_merged_key_by_key() {
    let mut shard = shard();
    let mut first = flush(11, 40, 60);
    first.properties.insert("a".into(), b"1".to_vec());
    first.properties.insert("b".into(), b"2".to_vec());
    let mut second = flush(12, 41, 61);
    second.properties.insert("b".into(), b"3".to_vec());
    shard.apply(&first).unwrap();
    shard.apply(&second).unwrap();
    let expected = BTreeMap::from([
        ("a".to_owned(), b"1".to_vec()),
        ("b".to_owned(), b"3".to_vec()),
    ]);
    assert_eq!(shard.properties(), &expected);
}

fn split_at_m(base_version: u64) -> ChangeSet {
    changeset(
        11,
        Change::Split(Split {
            new_shards: vec![
                ShardSplitInfo {
                    id: 70,
                    start: Bytes::from_static(b"a"),
                    end: Bytes::from_static(b"m"),
                    base_version,
                    data_sequence: 0,
                },
                ShardSplitInfo {
                    id: 71,
                    start: Bytes::from_static(b"m"),
                    end: Bytes::from_static(b"z"),
                    base_version,
                    data_sequence: 0,
                },
            ],
        }),
    )
}

#[test]
fn split_children_share_the_files_overlapping_their_ranges_and_bump_ver() {
    let mut shard = shard();
    let Ok(Applied::Split(children)) = shard.apply(&split_at_m(2_000)) else {
        panic!("expected a split");
    };
    assert_eq!(children.len(), 2);
    let (left, right) = (&children[0], &children[1]);

    assert_eq!((left.id(), left.ver()), (70, VER + 1));
    assert_eq!((right.id(), right.ver()), (71, VER + 1));
    assert_eq!(
        (left.start().as_ref(), left.end().as_ref()),
        (&b"a"[..], &b"m"[..])
    );
    assert_eq!(
        (right.start().as_ref(), right.end().as_ref()),
        (&b"m"[..], &b"z"[..])
    );
    for child in &children {
        assert_eq!(child.base_version(), 2_000);
        assert_eq!(child.meta_seq(), 11);
        assert_eq!(child.data_sequence(), 50);
    }
    // L0 31 [c, h] is left only, 30 [k, r] spans both; L1 21 [g, p] spans both.
    assert_eq!(ids(left.l0s()), [31, 30]);
    assert_eq!(ids(right.l0s()), [30]);
    assert_eq!(ids(left.level(ColumnFamily::Write, 1)), [20, 21]);
    assert_eq!(ids(right.level(ColumnFamily::Write, 1)), [21, 22]);
    assert_eq!(ids(left.level(ColumnFamily::Lock, 1)), [23]);
    assert!(right.level(ColumnFamily::Lock, 1).is_empty());
    assert_eq!(ids(left.level(ColumnFamily::Write, 2)), [10]);
    assert_eq!(ids(right.level(ColumnFamily::Write, 2)), [10]);

    // The parent only advanced its meta_seq, so a repeated split is skipped.
    assert_eq!(shard.meta_seq(), 11);
    assert_eq!(
        shard.apply(&split_at_m(2_000)),
        Ok(Applied::Skipped { meta_seq: 11 })
    );
    // A change prepared for the parent's version is rejected by a child.
    let mut child = left.clone();
    let mut stale = flush(12, 40, 60);
    stale.shard_id = 70;
    assert!(matches!(
        child.apply(&stale),
        Err(ApplyError::ShardVerMismatch {
            expected: 4,
            found: 3,
            ..
        })
    ));
}

#[test]
fn split_children_must_tile_the_parent_range() {
    let mut shard = shard();
    let mut gap = split_at_m(2_000);
    if let Some(Change::Split(split)) = &mut gap.change {
        split.new_shards[1].start = Bytes::from_static(b"n");
    }
    assert_eq!(
        malformed(shard.apply(&gap)),
        MalformedReason::SplitRangesDoNotTile { index: 1 }
    );
    let mut short = split_at_m(2_000);
    if let Some(Change::Split(split)) = &mut short.change {
        split.new_shards[1].end = Bytes::from_static(b"y");
    }
    assert_eq!(
        malformed(shard.apply(&short)),
        MalformedReason::SplitRangesDoNotTile { index: 1 }
    );
    assert_eq!(shard.meta_seq(), 10);
}

#[test]
fn split_child_base_version_must_exceed_the_parent_snap_version_bound() {
    let mut shard = shard();
    // base_version 1000 + data_sequence 50.
    assert_eq!(
        malformed(shard.apply(&split_at_m(1_050))),
        MalformedReason::SplitBaseVersionTooLow {
            id: 70,
            base_version: 1_050,
            min_exclusive: 1_050
        }
    );
    assert!(matches!(
        shard.apply(&split_at_m(1_051)),
        Ok(Applied::Split(_))
    ));
}

fn stamped(mut cs: ChangeSet, data_sequence: u64) -> ChangeSet {
    if let Some(Change::Split(split)) = &mut cs.change {
        for child in &mut split.new_shards {
            child.data_sequence = data_sequence;
        }
    }
    cs
}

#[test]
fn split_children_start_at_the_data_sequence_the_split_names() {
    let mut shard = shard();
    // The parent flushed up to 50 but applied entries up to 70 (a log outside the engine).
    let Ok(Applied::Split(children)) = shard.apply(&stamped(split_at_m(1_071), 70)) else {
        panic!("expected a split");
    };
    for child in &children {
        assert_eq!(child.data_sequence(), 70);
        assert_eq!(child.base_version(), 1_071);
        assert_eq!(child.meta_seq(), 11);
    }
}

#[test]
fn split_child_base_version_must_exceed_the_parent_base_plus_the_named_data_sequence() {
    let mut shard = shard();
    // The parent handed out versions up to 1000 + 70.
    assert_eq!(
        malformed(shard.apply(&stamped(split_at_m(1_070), 70))),
        MalformedReason::SplitBaseVersionTooLow {
            id: 70,
            base_version: 1_070,
            min_exclusive: 1_070
        }
    );
    assert_eq!(shard.meta_seq(), 10);
}

#[test]
fn split_child_data_sequence_below_the_parent_is_malformed() {
    let mut shard = shard();
    assert_eq!(
        malformed(shard.apply(&stamped(split_at_m(2_000), 40))),
        MalformedReason::SplitDataSequenceBehind {
            id: 70,
            data_sequence: 40,
            parent: 50
        }
    );
    assert_eq!(shard.meta_seq(), 10);
}

#[test]
fn snapshot_changeset_rebuilds_an_equal_shard() {
    let mut shard = shard();
    shard.apply(&flush(11, 40, 60)).unwrap();
    let rebuilt = ShardFiles::from_changeset(&shard.to_changeset()).unwrap();
    assert_eq!(rebuilt, shard);
}

#[test]
fn snapshot_with_overlapping_level_files_is_rejected() {
    let mut snapshot = shard().to_snapshot();
    snapshot
        .table_creates
        .push(table(80, ColumnFamily::Write, 2, "x", "x"));
    let err = ShardFiles::from_snapshot(SHARD, VER, 10, &snapshot).unwrap_err();
    assert!(matches!(
        err,
        ApplyError::Malformed {
            reason: MalformedReason::LevelOverlap { level: 2, .. },
            ..
        }
    ));
}

#[test]
fn file_ids_lists_every_referenced_file() {
    let shard = shard();
    assert_eq!(
        shard.file_ids(),
        BTreeSet::from([10, 20, 21, 22, 23, 30, 31])
    );
    assert_eq!(shard.to_snapshot().file_ids(), shard.file_ids());
}

#[test]
fn split_of_a_shard_at_the_largest_version_is_rejected_instead_of_overflowing() {
    let mut shard = ShardFiles::new(
        SHARD,
        u64::MAX,
        Bytes::from_static(b"a"),
        Bytes::from_static(b"z"),
        0,
    );
    let mut split = split_at_m(2_000);
    split.shard_ver = u64::MAX;
    assert_eq!(
        malformed(shard.apply(&split)),
        MalformedReason::ShardVerOverflow { ver: u64::MAX }
    );
}
