//! Golden bytes of `POST /raft/batch`: a batch with every field of every Raft message type set,
//! committed as `wire/tests/data/raft_batch_v1.bin`, so that neither the envelope's tags nor
//! the `eraftpb` mirror's can drift silently (servers of two releases exchange these during a
//! rolling upgrade, and the mirror's tags must stay raft-rs's).
//!
//! The encoder must reproduce the committed bytes, and the committed bytes must decode to the
//! listed value. To (re)write the file after an intended change: `STRATUS_BLESS=1 cargo test -p
//! wire --test raft_golden`, then review the diff.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::path::PathBuf;

use bytes::Bytes;
use prost::Message as _;
use wire::raft::{
    ConfChangeSingle, ConfChangeTransition, ConfChangeType, ConfChangeV2, ConfState, Entry,
    EntryType, ExtraKind, ExtraMessage, HardState, Message, MessageType, RaftBatch, RaftMessage,
    Snapshot, SnapshotMetadata,
};

const FILE: &str = "raft_batch_v1.bin";

fn path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(FILE)
}

fn conf_change_v2() -> ConfChangeV2 {
    ConfChangeV2 {
        transition: ConfChangeTransition::Explicit as i32,
        changes: vec![
            ConfChangeSingle {
                change_type: ConfChangeType::AddLearnerNode as i32,
                node_id: 4,
            },
            ConfChangeSingle {
                change_type: ConfChangeType::RemoveNode as i32,
                node_id: 3,
            },
        ],
        context: Bytes::from_static(b"cc-ctx"),
    }
}

/// A batch from store 1 to store 2: an append with a normal and a conf-change entry, a
/// snapshot with metadata, and a read-index response carrying every scalar field.
fn batch() -> RaftBatch {
    let envelope = |message| RaftMessage {
        region_id: 42,
        from_store: 1,
        to_store: 2,
        region_ver: 7,
        region_conf_ver: 3,
        start_key: b"t\x80\x00".to_vec(),
        end_key: b"t\x81".to_vec(),
        message: Some(message),
        extra: None,
        // The file GC indexes (tags 10, 11) came after this file: they stay 0 here, so the
        // v1 bytes are what a server of that release sends, and have a test of their own.
        file_gc_safe_index: 0,
        file_gc_group_index: 0,
    };
    let append = Message {
        msg_type: MessageType::MsgAppend as i32,
        to: 2,
        from: 1,
        term: 5,
        log_term: 5,
        index: 100,
        entries: vec![
            Entry {
                entry_type: EntryType::EntryNormal as i32,
                term: 5,
                index: 101,
                data: Bytes::from_static(b"write batch"),
                context: Bytes::from_static(b"ctx"),
                sync_log: false,
            },
            Entry {
                entry_type: EntryType::EntryConfChangeV2 as i32,
                term: 5,
                index: 102,
                data: Bytes::from(conf_change_v2().encode_to_vec()),
                context: Bytes::new(),
                sync_log: true,
            },
        ],
        commit: 100,
        commit_term: 5,
        ..Message::default()
    };
    let snapshot = Message {
        msg_type: MessageType::MsgSnapshot as i32,
        to: 2,
        from: 1,
        term: 6,
        snapshot: Some(Snapshot {
            data: Bytes::from_static(b"region snapshot"),
            metadata: Some(SnapshotMetadata {
                conf_state: Some(ConfState {
                    voters: vec![1, 2, 3],
                    learners: vec![4],
                    voters_outgoing: vec![1, 2, 5],
                    learners_next: vec![5],
                    auto_leave: true,
                }),
                index: 200,
                term: 6,
            }),
        }),
        ..Message::default()
    };
    let every_scalar = Message {
        msg_type: MessageType::MsgReadIndexResp as i32,
        to: 2,
        from: 1,
        term: u64::MAX,
        log_term: 9,
        index: 1 << 40,
        commit: 300,
        commit_term: 8,
        request_snapshot: 250,
        reject: true,
        reject_hint: 299,
        context: Bytes::from_static(b"read ctx"),
        deprecated_priority: 11,
        priority: -3,
        ..Message::default()
    };
    RaftBatch {
        from_store: 1,
        messages: vec![envelope(append), envelope(snapshot), envelope(every_scalar)],
    }
}

#[test]
fn the_encoder_reproduces_the_golden_batch_or_bless_rewrites_it() {
    let bytes = batch().encode_to_vec();
    if std::env::var("STRATUS_BLESS").is_ok_and(|v| v == "1") {
        std::fs::create_dir_all(path().parent().unwrap()).unwrap();
        std::fs::write(path(), &bytes).unwrap();
    }
    let committed = std::fs::read(path()).unwrap_or_else(|e| {
        panic!(
            "golden file {} is missing ({e}); write it with STRATUS_BLESS=1",
            path().display()
        )
    });
    assert_eq!(committed, bytes, "{FILE} differs from the encoder's output");
}

#[test]
fn the_golden_batch_decodes_to_its_messages() {
    let committed = std::fs::read(path()).unwrap();
    let decoded = RaftBatch::decode(&committed[..]).unwrap();
    assert_eq!(decoded, batch());
    let types: Vec<Option<MessageType>> = decoded.messages.iter().map(|m| m.msg_type()).collect();
    assert_eq!(
        types,
        [
            Some(MessageType::MsgAppend),
            Some(MessageType::MsgSnapshot),
            Some(MessageType::MsgReadIndexResp)
        ]
    );
    let cc = &decoded.messages[0].message.as_ref().unwrap().entries[1].data;
    assert_eq!(ConfChangeV2::decode(&cc[..]).unwrap(), conf_change_v2());
}

/// A small batch spelled out byte by byte, so a reader sees the tags (field number << 3 | wire
/// type) the envelope and the mirror put on the wire.
#[test]
fn a_small_batch_has_the_documented_layout() {
    let batch = RaftBatch {
        from_store: 1,
        messages: vec![RaftMessage {
            region_id: 3,
            from_store: 1,
            to_store: 2,
            message: Some(Message {
                msg_type: MessageType::MsgHeartbeat as i32,
                to: 20,
                from: 10,
                term: 4,
                commit: 9,
                ..Message::default()
            }),
            ..RaftMessage::default()
        }],
    };
    #[rustfmt::skip]
    let expected: Vec<u8> = [
        &[0x08u8, 1][..],          // RaftBatch.from_store (1, varint) = 1
        &[0x12, 18],               // RaftBatch.messages (2, bytes), 18 bytes
        &[0x08, 3],                //   RaftMessage.region_id (1) = 3
        &[0x10, 1],                //   from_store (2) = 1
        &[0x18, 2],                //   to_store (3) = 2
        &[0x42, 10],               //   message (8, bytes), 10 bytes
        &[0x08, 8],                //     Message.msg_type (1) = MsgHeartbeat
        &[0x10, 20],               //     to (2)
        &[0x18, 10],               //     from (3)
        &[0x20, 4],                //     term (4)
        &[0x40, 9],                //     commit (8)
    ]
    .concat();
    assert_eq!(batch.encode_to_vec(), expected);
    assert_eq!(
        HardState {
            term: 1,
            vote: 2,
            commit: 3
        }
        .encode_to_vec(),
        [0x08, 1, 0x10, 2, 0x18, 3]
    );
}

#[test]
fn a_store_heartbeat_is_an_envelope_with_an_extra_message_and_no_region() {
    let batch = RaftBatch {
        from_store: 1,
        messages: vec![RaftMessage {
            from_store: 1,
            to_store: 2,
            extra: Some(ExtraMessage {
                kind: ExtraKind::StoreHeartbeat as i32,
                ..ExtraMessage::default()
            }),
            ..RaftMessage::default()
        }],
    };
    #[rustfmt::skip]
    let expected: Vec<u8> = [
        &[0x08u8, 1][..],          // RaftBatch.from_store (1, varint) = 1
        &[0x12, 8],                // RaftBatch.messages (2, bytes), 8 bytes
        &[0x10, 1],                //   from_store (2) = 1
        &[0x18, 2],                //   to_store (3) = 2
        &[0x4a, 2],                //   extra (9, bytes), 2 bytes
        &[0x08, 2],                //     ExtraMessage.kind (1) = StoreHeartbeat
    ]
    .concat();
    assert_eq!(batch.encode_to_vec(), expected);
    let back = RaftBatch::decode(expected.as_slice()).unwrap();
    assert_eq!(back, batch);
    let extra = back.messages[0].extra.as_ref().unwrap();
    assert_eq!(extra.kind(), ExtraKind::StoreHeartbeat);
    // A kind a newer peer sends decodes, and reads as Unknown.
    let newer = ExtraMessage {
        kind: 99,
        ..ExtraMessage::default()
    };
    let newer = ExtraMessage::decode(newer.encode_to_vec().as_slice()).unwrap();
    assert_eq!(newer.kind(), ExtraKind::Unknown);
}

/// The file GC indexes ride on any envelope of a region (tags 10 and 11), beside a Raft
/// message or alone in a `FileGc` extra message; a server of the release before them skips
/// both tags.
#[test]
fn file_gc_indexes_are_envelope_tags_10_and_11() {
    let batch = RaftBatch {
        from_store: 1,
        messages: vec![RaftMessage {
            region_id: 3,
            from_store: 1,
            to_store: 2,
            extra: Some(ExtraMessage {
                kind: ExtraKind::FileGc as i32,
                ..ExtraMessage::default()
            }),
            file_gc_safe_index: 300,
            file_gc_group_index: 7,
            ..RaftMessage::default()
        }],
    };
    #[rustfmt::skip]
    let expected: Vec<u8> = [
        &[0x08u8, 1][..],          // RaftBatch.from_store (1, varint) = 1
        &[0x12, 15],               // RaftBatch.messages (2, bytes), 15 bytes
        &[0x08, 3],                //   RaftMessage.region_id (1) = 3
        &[0x10, 1],                //   from_store (2) = 1
        &[0x18, 2],                //   to_store (3) = 2
        &[0x4a, 2],                //   extra (9, bytes), 2 bytes
        &[0x08, 3],                //     ExtraMessage.kind (1) = FileGc
        &[0x50, 0xac, 0x02],       //   file_gc_safe_index (10, varint) = 300
        &[0x58, 7],                //   file_gc_group_index (11, varint) = 7
    ]
    .concat();
    assert_eq!(batch.encode_to_vec(), expected);
    assert_eq!(RaftBatch::decode(expected.as_slice()).unwrap(), batch);
    // What a server of the release before them sees: the envelope without the two tags.
    #[derive(Clone, PartialEq, prost::Message)]
    struct EnvelopeBefore {
        #[prost(uint64, tag = "1")]
        region_id: u64,
        #[prost(message, optional, tag = "9")]
        extra: Option<ExtraMessage>,
    }
    let before = EnvelopeBefore::decode(batch.messages[0].encode_to_vec().as_slice()).unwrap();
    assert_eq!(before.region_id, 3);
    assert_eq!(before.extra.unwrap().kind(), ExtraKind::FileGc);
}
