//! The `raft_batch` fuzz target's check, shared with the corpus replay under `cargo test`
//! (`tests/fuzz_corpus_replay.rs`): what a peer POSTs to `/raft/batch` goes through prost and
//! the conversion to `eraftpb`, never through rust-protobuf, and must never panic.

use prost::Message as _;
use wire::raft::RaftBatch;
use wire::read_index::ReadIndexContext;

use crate::convert;

/// Decodes `data` as a [`RaftBatch`] and converts each message as the store loop would. For an
/// accepted input: the batch re-encodes to a value that decodes the same, and a message that
/// converts converts back to itself (nothing is lost on the way to raft-rs).
pub fn raft_batch(data: &[u8]) {
    let Some(batch) = wire::fuzzing::round_trip::<RaftBatch>(data) else {
        return;
    };
    for mut envelope in batch.messages {
        let original = envelope.message.clone();
        let Ok(m) = convert::take_message(&mut envelope) else {
            continue;
        };
        let back = convert::message_to_wire(m);
        assert_eq!(
            Some(&back),
            original.as_ref(),
            "a converted message converts back to itself"
        );
        // A read-index context (a follower read's start_ts, ranges, and the leader's lock
        // check) is decoded with prost by the leader and by the follower it comes back to.
        let read_index = matches!(
            wire::raft::MessageType::try_from(back.msg_type),
            Ok(wire::raft::MessageType::MsgReadIndex | wire::raft::MessageType::MsgReadIndexResp)
        );
        if read_index
            && let Some(entry) = back.entries.first()
            && let Some(ctx) = ReadIndexContext::decode_from(&entry.data)
        {
            let again = ReadIndexContext::decode_from(&ctx.encode_to_bytes());
            assert_eq!(again, Some(ctx), "a read-index context round-trips");
        }
        // Conf-change payloads are decoded with prost too, by whoever applies the entry.
        for entry in &back.entries {
            match wire::raft::EntryType::try_from(entry.entry_type) {
                Ok(wire::raft::EntryType::EntryConfChange) => {
                    let decoded = wire::raft::ConfChange::decode(entry.data.clone());
                    if let Ok(cc) = decoded
                        && let Ok(e) = convert::conf_change_from_wire(cc.clone())
                    {
                        assert_eq!(convert::conf_change_to_wire(e), cc);
                    }
                }
                Ok(wire::raft::EntryType::EntryConfChangeV2) => {
                    let decoded = wire::raft::ConfChangeV2::decode(entry.data.clone());
                    if let Ok(cc) = decoded
                        && let Ok(e) = convert::conf_change_v2_from_wire(cc.clone())
                    {
                        assert_eq!(convert::conf_change_v2_to_wire(e), cc);
                    }
                }
                // A normal entry's data is a command the apply side decodes (the empty
                // no-op of a new leader is not one): prost again, and it round-trips.
                _ => {
                    if let Ok((ver, cmd)) = wire::raft_cmd::RaftCmd::decode_entry(&entry.data) {
                        let again = wire::raft_cmd::RaftCmd::new(ver, cmd.clone()).encode_to_vec();
                        let decoded = wire::raft_cmd::RaftCmd::decode_entry(&again);
                        assert_eq!(decoded.ok(), Some((ver, cmd)), "a command round-trips");
                    }
                }
            }
        }
    }
}

/// Seed batches for the fuzzer and the corpus replay: (name, batch). One per kind of traffic a
/// server receives (heartbeats of many regions, appends with normal and conf-change entries,
/// a snapshot with its metadata, votes, read-index with context), plus what must be refused
/// (a forwarded proposal, an unknown message type), the empty batch, the store loops' own
/// messages (hibernation, store heartbeat) and the file GC indexes (on a Raft message, and
/// alone in an extra message).
pub fn raft_batch_seeds() -> Vec<(&'static str, RaftBatch)> {
    use bytes::Bytes;
    use wire::raft::{
        ConfChange, ConfChangeSingle, ConfChangeTransition, ConfChangeType, ConfChangeV2,
        ConfState, Entry, EntryType, ExtraKind, ExtraMessage, Message, MessageType, RaftMessage,
        Snapshot, SnapshotMetadata,
    };

    let envelope = |region_id: u64, message: Message| RaftMessage {
        region_id,
        from_store: 1,
        to_store: 2,
        region_ver: 3,
        region_conf_ver: 1,
        start_key: format!("t{region_id:04}").into_bytes(),
        end_key: format!("t{:04}", region_id + 1).into_bytes(),
        message: Some(message),
        extra: None,
        file_gc_safe_index: 0,
        file_gc_group_index: 0,
    };
    let extra = |region_id: u64, kind: ExtraKind, term: u64, index: u64| RaftMessage {
        region_id,
        from_store: 1,
        to_store: 2,
        extra: Some(ExtraMessage {
            kind: kind as i32,
            term,
            index,
        }),
        ..RaftMessage::default()
    };
    let message = |msg_type: MessageType| Message {
        msg_type: msg_type as i32,
        to: 2,
        from: 1,
        term: 7,
        ..Message::default()
    };
    let batch = |messages: Vec<RaftMessage>| RaftBatch {
        from_store: 1,
        messages,
    };
    let entry = |index: u64, entry_type: EntryType, data: Vec<u8>| Entry {
        entry_type: entry_type as i32,
        term: 7,
        index,
        data: Bytes::from(data),
        ..Entry::default()
    };
    let conf_state = ConfState {
        voters: vec![1, 2, 3],
        learners: vec![4],
        ..ConfState::default()
    };

    let heartbeats = (1..=20)
        .map(|r| {
            envelope(
                r,
                Message {
                    commit: 100 + r,
                    ..message(MessageType::MsgHeartbeat)
                },
            )
        })
        .collect();
    let cc = ConfChange {
        change_type: ConfChangeType::AddLearnerNode as i32,
        node_id: 4,
        context: Bytes::from_static(b"learner"),
        id: 1,
    };
    let cc2 = ConfChangeV2 {
        transition: ConfChangeTransition::Auto as i32,
        changes: vec![ConfChangeSingle {
            change_type: ConfChangeType::RemoveNode as i32,
            node_id: 3,
        }],
        context: Bytes::new(),
    };
    let append = Message {
        log_term: 7,
        index: 41,
        commit: 40,
        commit_term: 7,
        entries: vec![
            entry(42, EntryType::EntryNormal, b"write batch 42".to_vec()),
            entry(43, EntryType::EntryConfChange, cc.encode_to_vec()),
            entry(44, EntryType::EntryConfChangeV2, cc2.encode_to_vec()),
            entry(45, EntryType::EntryNormal, Vec::new()),
        ],
        ..message(MessageType::MsgAppend)
    };
    let rejection = Message {
        reject: true,
        reject_hint: 30,
        log_term: 6,
        index: 41,
        ..message(MessageType::MsgAppendResponse)
    };
    let snapshot = Message {
        snapshot: Some(Snapshot {
            data: Bytes::from_static(b"region snapshot description"),
            metadata: Some(SnapshotMetadata {
                conf_state: Some(conf_state),
                index: 500,
                term: 7,
            }),
        }),
        ..message(MessageType::MsgSnapshot)
    };
    let votes = vec![
        envelope(
            9,
            Message {
                log_term: 6,
                index: 90,
                priority: 2,
                deprecated_priority: 2,
                ..message(MessageType::MsgRequestPreVote)
            },
        ),
        envelope(
            9,
            Message {
                reject: true,
                ..message(MessageType::MsgRequestVoteResponse)
            },
        ),
    ];
    let read_index = vec![
        envelope(
            5,
            Message {
                entries: vec![Entry {
                    data: Bytes::from_static(b"start_ts=400"),
                    ..Entry::default()
                }],
                ..message(MessageType::MsgReadIndex)
            },
        ),
        envelope(
            5,
            Message {
                index: 77,
                request_snapshot: 0,
                context: Bytes::from_static(b"read ctx"),
                ..message(MessageType::MsgReadIndexResp)
            },
        ),
    ];
    // A follower's replica read on its way to the leader, and back checked with a lock.
    let asked = ReadIndexContext {
        store_id: 2,
        id: 9,
        start_ts: 400,
        ranges: vec![wire::coprocessor::KeyRange {
            start: b"t0005".to_vec(),
            end: b"t0006".to_vec(),
        }],
        ..ReadIndexContext::default()
    };
    let answered = ReadIndexContext {
        checked: true,
        locked: Some(wire::coprocessor::LockInfo {
            key: b"t0005_r01".to_vec(),
            primary_lock: b"t0005_r01".to_vec(),
            lock_version: 390,
            lock_ttl: 3000,
            use_async_commit: true,
            min_commit_ts: 401,
            ..wire::coprocessor::LockInfo::default()
        }),
        ..asked.clone()
    };
    let replica_read = vec![
        envelope(
            5,
            Message {
                entries: vec![Entry {
                    data: Bytes::from(asked.encode_to_bytes()),
                    ..Entry::default()
                }],
                ..message(MessageType::MsgReadIndex)
            },
        ),
        envelope(
            5,
            Message {
                index: 78,
                entries: vec![Entry {
                    data: Bytes::from(answered.encode_to_bytes()),
                    ..Entry::default()
                }],
                ..message(MessageType::MsgReadIndexResp)
            },
        ),
    ];
    let proposal = Message {
        entries: vec![entry(0, EntryType::EntryConfChange, cc.encode_to_vec())],
        ..message(MessageType::MsgPropose)
    };
    // File GC indexes (`file_gc`) on a follower's heartbeat answer, and alone in the extra
    // message of a sleeping region.
    let file_gc_report = RaftMessage {
        file_gc_safe_index: 120,
        file_gc_group_index: 97,
        ..envelope(
            10,
            Message {
                commit: 130,
                ..message(MessageType::MsgHeartbeatResponse)
            },
        )
    };
    let file_gc_extra = RaftMessage {
        file_gc_safe_index: 121,
        file_gc_group_index: 120,
        ..extra(10, ExtraKind::FileGc, 0, 0)
    };
    let unknown = Message {
        msg_type: 42,
        ..message(MessageType::MsgHeartbeat)
    };
    vec![
        ("heartbeats", batch(heartbeats)),
        ("append_with_conf_changes", batch(vec![envelope(3, append)])),
        ("append_rejected", batch(vec![envelope(3, rejection)])),
        ("snapshot", batch(vec![envelope(4, snapshot)])),
        ("votes", batch(votes)),
        ("read_index", batch(read_index)),
        ("replica_read", batch(replica_read)),
        ("refused_proposal", batch(vec![envelope(6, proposal)])),
        ("unknown_message_type", batch(vec![envelope(7, unknown)])),
        ("empty", batch(Vec::new())),
        // The store loops' own messages (`hibernation`): no Raft message, never converted.
        (
            "hibernate",
            batch(vec![extra(8, ExtraKind::Hibernate, 7, 42)]),
        ),
        (
            "store_heartbeat",
            batch(vec![extra(0, ExtraKind::StoreHeartbeat, 0, 0)]),
        ),
        ("file_gc_report", batch(vec![file_gc_report])),
        ("file_gc_extra", batch(vec![file_gc_extra])),
    ]
}
