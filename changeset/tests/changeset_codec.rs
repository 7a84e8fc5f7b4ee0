//! ChangeSet protobuf encoding: round trips, errors, zero-copy decoding.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::collections::BTreeMap;

use bytes::Bytes;
use changeset::{
    Change, ChangeSet, ChangeSetDecodeError, Compaction, Flush, Ingest, L0Create, ShardSplitInfo,
    Snapshot, Split, TableCreate, decode_changeset, encode_changeset,
};
use proptest::prelude::*;

fn key() -> impl Strategy<Value = Bytes> {
    prop::collection::vec(any::<u8>(), 0..12).prop_map(Bytes::from)
}

fn l0_create() -> impl Strategy<Value = L0Create> {
    (any::<u64>(), key(), key(), any::<u64>()).prop_map(|(id, smallest, biggest, size)| L0Create {
        id,
        smallest,
        biggest,
        size,
    })
}

fn table_create() -> impl Strategy<Value = TableCreate> {
    (
        any::<u64>(),
        any::<u32>(),
        any::<u32>(),
        key(),
        key(),
        any::<u64>(),
    )
        .prop_map(|(id, level, cf, smallest, biggest, size)| TableCreate {
            id,
            level,
            cf,
            smallest,
            biggest,
            size,
        })
}

fn snapshot() -> impl Strategy<Value = Snapshot> {
    (
        key(),
        key(),
        any::<u64>(),
        any::<u64>(),
        prop::collection::vec(l0_create(), 0..4),
        prop::collection::vec(table_create(), 0..4),
    )
        .prop_map(
            |(start, end, base_version, data_sequence, l0_creates, table_creates)| Snapshot {
                start,
                end,
                base_version,
                data_sequence,
                l0_creates,
                table_creates,
            },
        )
}

fn ids() -> impl Strategy<Value = Vec<u64>> {
    prop::collection::vec(any::<u64>(), 0..4)
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        snapshot().prop_map(Change::Snapshot),
        snapshot().prop_map(Change::InitialFlush),
        (prop::option::of(l0_create()), any::<u64>(), any::<u64>()).prop_map(
            |(l0_create, data_sequence, version)| Change::Flush(Flush {
                l0_create,
                data_sequence,
                version,
            })
        ),
        (
            any::<u32>(),
            any::<u32>(),
            ids(),
            ids(),
            prop::collection::vec(table_create(), 0..4),
            any::<bool>()
        )
            .prop_map(
                |(cf, level, top_deletes, bottom_deletes, table_creates, conflicted)| {
                    Change::Compaction(Compaction {
                        cf,
                        level,
                        top_deletes,
                        bottom_deletes,
                        table_creates,
                        conflicted,
                        safe_point: u64::from(level) * 7,
                    })
                }
            ),
        prop::collection::vec(
            (any::<u64>(), key(), key(), any::<u64>(), any::<u64>()).prop_map(
                |(id, start, end, base_version, data_sequence)| ShardSplitInfo {
                    id,
                    start,
                    end,
                    base_version,
                    data_sequence,
                }
            ),
            0..4
        )
        .prop_map(|new_shards| Change::Split(Split { new_shards })),
        (
            prop::collection::vec(l0_create(), 0..4),
            prop::collection::vec(table_create(), 0..4)
        )
            .prop_map(|(l0_creates, table_creates)| Change::Ingest(Ingest {
                l0_creates,
                table_creates,
            })),
    ]
}

fn changeset() -> impl Strategy<Value = ChangeSet> {
    (
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
        prop::collection::btree_map(
            "[a-z_]{0,8}",
            prop::collection::vec(any::<u8>(), 0..8),
            0..3,
        ),
        prop::option::of(change()),
    )
        .prop_map(
            |(shard_id, shard_ver, sequence, properties, change)| ChangeSet {
                shard_id,
                shard_ver,
                sequence,
                properties,
                change,
            },
        )
}

proptest! {
    #[test]
    fn changeset_encode_decode_round_trips(changeset in changeset()) {
        let encoded = encode_changeset(&changeset);
        let from_slice = decode_changeset(&encoded[..]).unwrap();
        prop_assert_eq!(&from_slice, &changeset);
        let from_bytes = decode_changeset(Bytes::from(encoded.clone())).unwrap();
        prop_assert_eq!(&from_bytes, &changeset);
        prop_assert_eq!(encode_changeset(&from_bytes), encoded);
    }
}

#[test]
fn invalid_protobuf_is_an_error_naming_the_length() {
    // Field 1 as a length-delimited field announcing more bytes than follow.
    let err = decode_changeset(&[0x0a, 0x05, 0x01][..]).unwrap_err();
    let ChangeSetDecodeError::Protobuf { len, .. } = &err;
    assert_eq!(*len, 3);
    assert_eq!(err.to_string(), "changeset is not valid protobuf len=3");
    assert!(std::error::Error::source(&err).is_some());
}

#[test]
fn decoding_from_bytes_slices_keys_instead_of_copying() {
    let changeset = ChangeSet {
        shard_id: 1,
        shard_ver: 1,
        sequence: 1,
        properties: BTreeMap::new(),
        change: Some(Change::Snapshot(Snapshot {
            start: Bytes::from_static(b"a rather long start key"),
            ..Snapshot::default()
        })),
    };
    let encoded = Bytes::from(encode_changeset(&changeset));
    let decoded = decode_changeset(encoded.clone()).unwrap();
    let Some(Change::Snapshot(snapshot)) = &decoded.change else {
        panic!("not a snapshot");
    };
    let input = encoded.as_ptr_range();
    assert!(
        input.contains(&snapshot.start.as_ptr()),
        "start key was copied"
    );
}

/// `ShardSplitInfo` as it was before tag 5 (`data_sequence`) existed: what every split in a
/// manifest written by an older build is.
#[derive(Clone, PartialEq, prost::Message)]
struct SplitInfoBeforeTag5 {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(bytes = "bytes", tag = "2")]
    start: Bytes,
    #[prost(bytes = "bytes", tag = "3")]
    end: Bytes,
    #[prost(uint64, tag = "4")]
    base_version: u64,
}

#[derive(Clone, PartialEq, prost::Message)]
struct SplitBeforeTag5 {
    #[prost(message, repeated, tag = "1")]
    new_shards: Vec<SplitInfoBeforeTag5>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct SplitChangeSetBeforeTag5 {
    #[prost(uint64, tag = "1")]
    shard_id: u64,
    #[prost(uint64, tag = "2")]
    shard_ver: u64,
    #[prost(uint64, tag = "3")]
    sequence: u64,
    #[prost(message, optional, tag = "13")]
    split: Option<SplitBeforeTag5>,
}

#[test]
fn a_split_written_before_the_data_sequence_tag_decodes_with_zero_and_reencodes_identically() {
    use prost::Message;
    let info = |id, start: &'static [u8], end: &'static [u8]| SplitInfoBeforeTag5 {
        id,
        start: Bytes::from_static(start),
        end: Bytes::from_static(end),
        base_version: 5_000,
    };
    let old = SplitChangeSetBeforeTag5 {
        shard_id: 8,
        shard_ver: 3,
        sequence: 12,
        split: Some(SplitBeforeTag5 {
            new_shards: vec![info(8, b"a", b"m"), info(9, b"m", b"")],
        }),
    };
    let bytes = old.encode_to_vec();
    let decoded = decode_changeset(Bytes::from(bytes.clone())).unwrap();
    let Some(Change::Split(split)) = &decoded.change else {
        panic!("expected a split, got {decoded:?}");
    };
    assert_eq!(
        split
            .new_shards
            .iter()
            .map(|c| (c.id, c.base_version, c.data_sequence))
            .collect::<Vec<_>>(),
        [(8, 5_000, 0), (9, 5_000, 0)]
    );
    assert_eq!(encode_changeset(&decoded), bytes);
}

#[test]
fn a_stamped_split_data_sequence_round_trips() {
    let cs = ChangeSet {
        shard_id: 8,
        shard_ver: 3,
        sequence: 12,
        properties: BTreeMap::new(),
        change: Some(Change::Split(Split {
            new_shards: vec![ShardSplitInfo {
                id: 8,
                start: Bytes::from_static(b"a"),
                end: Bytes::new(),
                base_version: 5_013,
                data_sequence: 12,
            }],
        })),
    };
    let decoded = decode_changeset(Bytes::from(encode_changeset(&cs))).unwrap();
    assert_eq!(decoded, cs);
}
