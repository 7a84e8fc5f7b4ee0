//! Entry points for fuzzing the decoders, and realistic seed inputs.
//!
//! The cargo-fuzz targets in `fuzz/` call these functions, and so does the corpus replay test,
//! so a crash found by the fuzzer becomes an ordinary failing test once its input is added to
//! the corpus. Each function must return normally for every input: decode errors are expected,
//! panics are bugs (the asserts below state properties every accepted input must have).

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::error::MemtableDataError;
use crate::memtable_data::{self, MemRow, MemtableDataWriter};
use crate::messages::{
    Change, ChangeSet, Compaction, Flush, Ingest, L0Create, ShardSplitInfo, Snapshot, Split,
    TableCreate, decode_changeset, encode_changeset,
};
use crate::shard_files::{Applied, ShardFiles};
use types::ColumnFamily;

/// Decodes a ChangeSet. For an accepted input: re-encoding decodes to the same value; applying
/// it to an empty shard either fails cleanly or leaves a file list that survives a snapshot
/// round trip, and applying it again changes nothing; a snapshot ChangeSet builds a shard
/// directly.
pub fn changeset_decode(data: &[u8]) {
    let Ok(changeset) = decode_changeset(Bytes::copy_from_slice(data)) else {
        return;
    };
    let encoded = encode_changeset(&changeset);
    let again = decode_changeset(&encoded[..]).expect("a re-encoded changeset decodes");
    assert!(again == changeset, "re-encoding changed the changeset");

    let mut shard = ShardFiles::new(
        changeset.shard_id,
        changeset.shard_ver,
        Bytes::new(),
        Bytes::new(),
        0,
    );
    let before = shard.clone();
    match shard.apply(&changeset) {
        Err(_) => assert!(shard == before, "a failed apply changed the shard"),
        Ok(applied) => {
            check_snapshot_round_trip(&shard);
            if let Applied::Split(children) = &applied {
                children.iter().for_each(check_snapshot_round_trip);
            }
            let after = shard.clone();
            let second = shard
                .apply(&changeset)
                .expect("a repeated apply is skipped");
            assert!(
                matches!(second, Applied::Skipped { .. }),
                "a repeated apply was not skipped"
            );
            assert!(shard == after, "a repeated apply changed the shard");
        }
    }
    if let Ok(shard) = ShardFiles::from_changeset(&changeset) {
        check_snapshot_round_trip(&shard);
    }
}

/// Decodes memtable data. For an accepted input: re-encoding the rows in the input's format
/// gives the input bytes back (each format has one encoding per content), walking the rows
/// with the cursor gives the same rows, and transcoding to every other format and back keeps
/// the rows. A v4 input is also read as a receiver reads it, each block on its own: that never
/// panics, and for an accepted input it reads the same rows.
pub fn memtable_data_decode(data: &[u8]) {
    let blob = Bytes::copy_from_slice(data);
    let by_block = memtable_data_by_block(data);
    let Ok(rows) = memtable_data::decode(&blob) else {
        return;
    };
    if let Some(by_block) = by_block {
        assert!(
            by_block.as_ref() == Ok(&rows),
            "reading the blocks one by one disagrees with decode: {by_block:?}"
        );
    }
    let format = memtable_data::rows(data)
        .expect("a decoded blob has a valid header")
        .format();
    let mut writer = MemtableDataWriter::with_format(format, 0);
    if let Ok(index) = memtable_data::blocks(data) {
        writer =
            writer.with_block_target(usize::try_from(index.block_target()).unwrap_or(usize::MAX));
    }
    for row in &rows {
        writer
            .push(row.as_ref())
            .expect("decoded rows satisfy the writer's order");
    }
    assert!(writer.finish() == data, "re-encoding changed the bytes");
    let mut walked = memtable_data::rows(data).expect("a decoded blob has a valid header");
    let mut i = 0;
    while let Some(row) = walked.next_row() {
        let row = row.expect("the cursor accepts what decode accepts");
        assert!(
            rows.get(i).map(MemRow::as_ref) == Some(row),
            "cursor and decode disagree"
        );
        i += 1;
    }
    assert!(i == rows.len(), "the cursor yielded fewer rows than decode");
    for other in memtable_data::Format::ALL {
        let there = memtable_data::transcode(&blob, other).expect("valid rows transcode");
        let back = memtable_data::decode(&there).expect("a transcoded blob decodes");
        assert!(back == rows, "transcoding to {other} changed the rows");
    }
}

/// The rows of a v4 blob read block by block, each block on its own (`None` when `data` is not
/// a v4 blob with a valid index).
fn memtable_data_by_block(data: &[u8]) -> Option<Result<Vec<MemRow>, MemtableDataError>> {
    let index = memtable_data::blocks(data).ok()?;
    let mut rows = Vec::new();
    let read = (0..index.len()).try_for_each(|b| {
        let first_key = index.first_key(data, b);
        let mut cursor = index.rows(data, b)?;
        let mut first = true;
        while let Some(row) = cursor.next_row() {
            let row = row?;
            assert!(
                !first || row.key == first_key,
                "a block's first row is not its index key"
            );
            first = false;
            rows.push(row.to_row());
        }
        Ok(())
    });
    Some(read.map(|()| rows))
}

fn check_snapshot_round_trip(shard: &ShardFiles) {
    let rebuilt =
        ShardFiles::from_changeset(&shard.to_changeset()).expect("a shard's own snapshot is valid");
    assert!(&rebuilt == shard, "snapshot round trip changed the shard");
}

/// Realistic ChangeSets, one or more of each kind, named for the corpus file they seed.
pub fn changeset_seeds() -> Vec<(&'static str, ChangeSet)> {
    let l0 = |id: u64, smallest: &str, biggest: &str| L0Create {
        id,
        smallest: Bytes::copy_from_slice(smallest.as_bytes()),
        biggest: Bytes::copy_from_slice(biggest.as_bytes()),
        size: 4 << 20,
    };
    let table =
        |id: u64, level: u32, cf: ColumnFamily, smallest: &str, biggest: &str| TableCreate {
            id,
            level,
            cf: cf.as_u32(),
            smallest: Bytes::copy_from_slice(smallest.as_bytes()),
            biggest: Bytes::copy_from_slice(biggest.as_bytes()),
            size: 8 << 20,
        };
    let changeset = |sequence: u64, change: Change| ChangeSet {
        shard_id: 7,
        shard_ver: 3,
        sequence,
        properties: BTreeMap::new(),
        change: Some(change),
    };
    let snapshot = Snapshot {
        start: Bytes::from_static(b"t_100_"),
        end: Bytes::from_static(b"t_200_"),
        base_version: 1_000,
        data_sequence: 420,
        l0_creates: vec![l0(31, "t_100_a", "t_150_z"), l0(30, "t_120_b", "t_199_y")],
        table_creates: vec![
            table(20, 1, ColumnFamily::Write, "t_100_a", "t_140_z"),
            table(21, 1, ColumnFamily::Write, "t_141_a", "t_199_z"),
            table(22, 1, ColumnFamily::Lock, "t_110_a", "t_111_z"),
            table(10, 2, ColumnFamily::Write, "t_100_a", "t_199_z"),
            table(11, 1, ColumnFamily::Extra, "t_100_a", "t_100_b"),
        ],
    };
    let mut with_properties = changeset(
        2,
        Change::Flush(Flush {
            l0_create: Some(l0(33, "t_101_a", "t_102_a")),
            data_sequence: 450,
            version: 1_450,
        }),
    );
    with_properties
        .properties
        .insert("split_keys".to_owned(), b"t_150_".to_vec());
    vec![
        ("snapshot", changeset(1, Change::Snapshot(snapshot.clone()))),
        (
            "snapshot_unbounded_empty",
            ChangeSet {
                shard_id: 1,
                shard_ver: 1,
                sequence: 0,
                properties: BTreeMap::new(),
                change: Some(Change::Snapshot(Snapshot::default())),
            },
        ),
        (
            "initial_flush",
            changeset(2, Change::InitialFlush(snapshot)),
        ),
        (
            "flush",
            changeset(
                3,
                Change::Flush(Flush {
                    l0_create: Some(l0(32, "t_100_c", "t_180_d")),
                    data_sequence: 440,
                    version: 1_440,
                }),
            ),
        ),
        (
            "flush_empty_memtable",
            changeset(
                4,
                Change::Flush(Flush {
                    l0_create: None,
                    data_sequence: 441,
                    version: 1_441,
                }),
            ),
        ),
        ("flush_with_properties", with_properties),
        (
            "compaction_l0_to_l1",
            changeset(
                5,
                Change::Compaction(Compaction {
                    cf: 0,
                    level: 0,
                    top_deletes: vec![30, 31],
                    bottom_deletes: vec![20, 21, 22],
                    table_creates: vec![
                        table(40, 1, ColumnFamily::Write, "t_100_a", "t_150_z"),
                        table(41, 1, ColumnFamily::Write, "t_151_a", "t_199_z"),
                        table(42, 1, ColumnFamily::Lock, "t_110_a", "t_130_z"),
                    ],
                    conflicted: false,
                    safe_point: 0,
                }),
            ),
        ),
        (
            "compaction_l1_to_l2",
            changeset(
                6,
                Change::Compaction(Compaction {
                    cf: ColumnFamily::Write.as_u32(),
                    level: 1,
                    top_deletes: vec![20],
                    bottom_deletes: vec![10],
                    table_creates: vec![table(43, 2, ColumnFamily::Write, "t_100_a", "t_199_z")],
                    conflicted: false,
                    safe_point: 0,
                }),
            ),
        ),
        (
            "compaction_conflicted",
            changeset(
                7,
                Change::Compaction(Compaction {
                    cf: ColumnFamily::Write.as_u32(),
                    level: 1,
                    top_deletes: vec![99],
                    bottom_deletes: vec![],
                    table_creates: vec![table(44, 2, ColumnFamily::Write, "t_100_a", "t_101_z")],
                    conflicted: true,
                    safe_point: 0,
                }),
            ),
        ),
        (
            "split",
            changeset(
                8,
                Change::Split(Split {
                    new_shards: vec![
                        ShardSplitInfo {
                            id: 8,
                            start: Bytes::from_static(b"t_100_"),
                            end: Bytes::from_static(b"t_150_"),
                            base_version: 5_000,
                            data_sequence: 0,
                        },
                        ShardSplitInfo {
                            id: 9,
                            start: Bytes::from_static(b"t_150_"),
                            end: Bytes::from_static(b"t_200_"),
                            base_version: 5_000,
                            data_sequence: 0,
                        },
                    ],
                }),
            ),
        ),
        (
            "split_unbounded_shard",
            ChangeSet {
                shard_id: 1,
                shard_ver: 1,
                sequence: 1,
                properties: BTreeMap::new(),
                change: Some(Change::Split(Split {
                    new_shards: vec![
                        ShardSplitInfo {
                            id: 2,
                            start: Bytes::new(),
                            end: Bytes::from_static(b"m"),
                            base_version: 10,
                            data_sequence: 0,
                        },
                        ShardSplitInfo {
                            id: 3,
                            start: Bytes::from_static(b"m"),
                            end: Bytes::new(),
                            base_version: 10,
                            data_sequence: 0,
                        },
                    ],
                })),
            },
        ),
        (
            "ingest",
            changeset(
                9,
                Change::Ingest(Ingest {
                    l0_creates: vec![l0(50, "t_160_a", "t_170_z")],
                    table_creates: vec![table(51, 3, ColumnFamily::Write, "t_100_a", "t_199_z")],
                }),
            ),
        ),
        (
            "missing_change",
            ChangeSet {
                shard_id: 7,
                shard_ver: 3,
                sequence: 10,
                properties: BTreeMap::new(),
                change: None,
            },
        ),
    ]
}

/// Realistic memtable-data blobs in every format, named for the corpus file they seed
/// (`<content>_v<format>`).
pub fn memtable_data_seeds() -> Vec<(String, Vec<u8>)> {
    let row = |cf, key: &'static [u8], version, value: &'static [u8], tombstone| MemRow {
        cf,
        key: Bytes::from_static(key),
        version,
        // WRITE rows carry the engine's WRITE meta (kind, start_ts, commit_ts = version),
        // which v2 stores compactly; the others an opaque meta.
        user_meta: match cf {
            ColumnFamily::Write => Bytes::copy_from_slice(
                &[
                    &[b'P'][..],
                    &(version - 5).to_le_bytes(),
                    &version.to_le_bytes(),
                ]
                .concat(),
            ),
            _ => Bytes::copy_from_slice(
                &[&(version - 5).to_le_bytes()[..], &version.to_le_bytes()[..]].concat(),
            ),
        },
        value: Bytes::from_static(value),
        tombstone,
    };
    let versions_of_one_key = vec![
        row(ColumnFamily::Write, b"t_100_r1", 105, b"v1", false),
        row(ColumnFamily::Write, b"t_100_r1", 110, b"v2", false),
        row(ColumnFamily::Write, b"t_100_r1", 120, b"", true),
    ];
    let mixed = vec![
        row(ColumnFamily::Write, b"t_100_r1", 105, b"alice", false),
        row(ColumnFamily::Write, b"t_100_r2", 106, b"bob", false),
        row(ColumnFamily::Lock, b"t_100_r3", 107, b"lock-record", false),
        row(ColumnFamily::Extra, b"txn_107", 108, b"committed", false),
    ];
    let empty_key = vec![row(ColumnFamily::Write, b"", 9, b"", false)];
    let large_value = vec![MemRow {
        value: Bytes::from(vec![b'x'; 4096]),
        ..row(ColumnFamily::Write, b"t_100_blob", 200, b"", false)
    }];
    let many_rows: Vec<MemRow> = (0..64u64)
        .map(|i| MemRow {
            key: Bytes::from(format!("t_100_r{:03}", i / 2)),
            ..row(ColumnFamily::Write, b"", 300 + i, b"v", i % 7 == 6)
        })
        .collect();
    let contents: [(&str, &[MemRow]); 6] = [
        ("empty", &[]),
        ("versions_of_one_key", &versions_of_one_key),
        ("mixed_column_families", &mixed),
        ("empty_key_and_value", &empty_key),
        ("large_value", &large_value),
        ("many_rows", &many_rows),
    ];
    let mut seeds = Vec::new();
    for format in memtable_data::Format::ALL {
        for (name, rows) in contents {
            let blob = memtable_data::encode_as(format, rows).expect("seed rows are ordered");
            // v1's seeds kept their names from before v2 existed.
            let name = match format {
                memtable_data::Format::V1 => name.to_owned(),
                _ => format!("{name}_{format}"),
            };
            seeds.push((name, blob));
        }
    }
    // Values long enough for v4 to cut blocks (the other formats' seeds cover their rows).
    let several_blocks: Vec<MemRow> = (0..40u64)
        .map(|i| MemRow {
            key: Bytes::from(format!("t_100_r{i:03}")),
            value: Bytes::from(vec![b'v'; 1_000]),
            ..row(ColumnFamily::Write, b"", 400 + i, b"", false)
        })
        .collect();
    let format = memtable_data::Format::V4;
    let blob = memtable_data::encode_as(format, &several_blocks).expect("seed rows are ordered");
    seeds.push((format!("several_blocks_{format}"), blob));
    seeds
}

/// Decodes a compaction job and a compaction result from the same bytes (a worker decodes
/// the first from a server, a server the second from a worker). For an accepted job: the
/// check never panics, and re-encoding decodes to the same job.
pub fn compaction_job_decode(data: &[u8]) {
    use crate::compaction_job::{CompactionJob, CompactionResult};
    use prost::Message;
    if let Ok(job) = CompactionJob::decode(data) {
        let _ = job.check();
        let again = CompactionJob::decode(job.encode_to_bytes()).expect("a re-encoded job decodes");
        assert!(again == job, "re-encoding changed the job");
    }
    let _ = CompactionJob::decode_checked(Bytes::copy_from_slice(data));
    if let Ok(result) = CompactionResult::decode_bytes(Bytes::copy_from_slice(data)) {
        let again = CompactionResult::decode_bytes(Bytes::from(result.encode_to_vec()))
            .expect("a re-encoded result decodes");
        assert!(again == result, "re-encoding changed the result");
    }
}

/// Realistic jobs and results: the seeds of the `compaction_job` corpus.
pub fn compaction_job_seeds() -> Vec<(&'static str, Vec<u8>)> {
    use crate::compaction_job::{
        CfInputs, CompactionJob, CompactionResult, InputFile, OutputOptions,
    };
    use prost::Message;
    let job = CompactionJob {
        shard_id: 3,
        shard_ver: 1,
        start: Bytes::from_static(b"t\x80\x00\x00\x00\x00\x00\x00\x01"),
        end: Bytes::new(),
        level: 0,
        safe_point: 440_000_000_000,
        cfs: vec![
            CfInputs {
                cf: ColumnFamily::Write.as_u32(),
                bottommost: true,
                inputs: vec![
                    InputFile {
                        id: 9,
                        l0: true,
                        ..Default::default()
                    },
                    InputFile {
                        id: 4,
                        l0: false,
                        ..Default::default()
                    },
                ],
            },
            CfInputs {
                cf: ColumnFamily::Lock.as_u32(),
                bottommost: false,
                inputs: vec![InputFile {
                    id: 9,
                    l0: true,
                    ..Default::default()
                }],
            },
        ],
        options: Some(OutputOptions {
            block_size: 65536,
            compression: 1,
            zstd_level: 3,
            filter_bits_per_key: 10,
            target_file_size: 8 << 20,
            // Absent on the wire, as from a server before the field: format version 1.
            table_format_version: 0,
        }),
        output_ids: vec![1 << 48 | 20, 1 << 48 | 21, 1 << 48 | 22],
        deadline_ms: 1_790_000_000_000,
    };
    let result = CompactionResult {
        outputs: vec![TableCreate {
            id: 1 << 48 | 20,
            level: 1,
            cf: ColumnFamily::Write.as_u32(),
            smallest: Bytes::from_static(b"a"),
            biggest: Bytes::from_static(b"z"),
            size: 4096,
        }],
        input_bytes: 8192,
        merge_ms: 3,
    };
    vec![
        ("job_l0", job.encode_to_vec()),
        (
            "job_level",
            CompactionJob {
                level: 2,
                cfs: vec![CfInputs {
                    cf: ColumnFamily::Extra.as_u32(),
                    bottommost: true,
                    inputs: vec![
                        InputFile {
                            id: 5,
                            l0: false,
                            ..Default::default()
                        },
                        InputFile {
                            id: 6,
                            l0: false,
                            ..Default::default()
                        },
                    ],
                }],
                ..job.clone()
            }
            .encode_to_vec(),
        ),
        ("result", result.encode_to_vec()),
    ]
}
