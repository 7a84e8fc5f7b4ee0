//! `eraftpb` <-> `wire::raft`: a random raft-rs message survives the trip through the wire's
//! bytes unchanged, every field of it; the mirror's tags are raft-rs's (each side decodes the
//! other's encoding; rust-protobuf parses here only bytes this test produced); and what a peer
//! may not send, or a value this build does not know, is a typed error.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use bytes::Bytes;
use proptest::prelude::*;
use prost::Message as _;
use protobuf::Message as _;
use raft::eraftpb;
use raftstore::convert::{
    self, ConvertError, conf_change_from_wire, conf_change_to_wire, conf_change_v2_from_wire,
    conf_change_v2_to_wire, hard_state_from_wire, hard_state_to_wire, message_from_peer,
    message_from_wire, message_to_wire,
};
use wire::raft as w;

const MESSAGE_TYPES: [eraftpb::MessageType; 19] = {
    use eraftpb::MessageType::*;
    [
        MsgHup,
        MsgBeat,
        MsgPropose,
        MsgAppend,
        MsgAppendResponse,
        MsgRequestVote,
        MsgRequestVoteResponse,
        MsgSnapshot,
        MsgHeartbeat,
        MsgHeartbeatResponse,
        MsgUnreachable,
        MsgSnapStatus,
        MsgCheckQuorum,
        MsgTransferLeader,
        MsgTimeoutNow,
        MsgReadIndex,
        MsgReadIndexResp,
        MsgRequestPreVote,
        MsgRequestPreVoteResponse,
    ]
};

const ENTRY_TYPES: [eraftpb::EntryType; 3] = [
    eraftpb::EntryType::EntryNormal,
    eraftpb::EntryType::EntryConfChange,
    eraftpb::EntryType::EntryConfChangeV2,
];

const CONF_CHANGE_TYPES: [eraftpb::ConfChangeType; 3] = [
    eraftpb::ConfChangeType::AddNode,
    eraftpb::ConfChangeType::RemoveNode,
    eraftpb::ConfChangeType::AddLearnerNode,
];

const TRANSITIONS: [eraftpb::ConfChangeTransition; 3] = [
    eraftpb::ConfChangeTransition::Auto,
    eraftpb::ConfChangeTransition::Implicit,
    eraftpb::ConfChangeTransition::Explicit,
];

fn bytes() -> impl Strategy<Value = Bytes> {
    prop::collection::vec(any::<u8>(), 0..24).prop_map(Bytes::from)
}

fn ids() -> impl Strategy<Value = Vec<u64>> {
    prop::collection::vec(any::<u64>(), 0..5)
}

fn entry() -> impl Strategy<Value = eraftpb::Entry> {
    (
        prop::sample::select(&ENTRY_TYPES[..]),
        any::<u64>(),
        any::<u64>(),
        bytes(),
        bytes(),
        any::<bool>(),
    )
        .prop_map(
            |(entry_type, term, index, data, context, sync_log)| eraftpb::Entry {
                entry_type,
                term,
                index,
                data,
                context,
                sync_log,
                ..eraftpb::Entry::default()
            },
        )
}

fn conf_state() -> impl Strategy<Value = eraftpb::ConfState> {
    (ids(), ids(), ids(), ids(), any::<bool>()).prop_map(
        |(voters, learners, voters_outgoing, learners_next, auto_leave)| eraftpb::ConfState {
            voters,
            learners,
            voters_outgoing,
            learners_next,
            auto_leave,
            ..eraftpb::ConfState::default()
        },
    )
}

fn snapshot() -> impl Strategy<Value = eraftpb::Snapshot> {
    let metadata = (prop::option::of(conf_state()), any::<u64>(), any::<u64>()).prop_map(
        |(conf_state, index, term)| eraftpb::SnapshotMetadata {
            conf_state: conf_state.into(),
            index,
            term,
            ..eraftpb::SnapshotMetadata::default()
        },
    );
    (bytes(), prop::option::of(metadata)).prop_map(|(data, metadata)| eraftpb::Snapshot {
        data,
        metadata: metadata.into(),
        ..eraftpb::Snapshot::default()
    })
}

/// Every field of raft-proto 0.7.0's `eraftpb::Message` (`msg_type` .. `priority`), each drawn
/// independently.
fn message() -> impl Strategy<Value = eraftpb::Message> {
    let header = (
        prop::sample::select(&MESSAGE_TYPES[..]),
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
    );
    let body = (
        prop::collection::vec(entry(), 0..4),
        any::<u64>(),
        any::<u64>(),
        prop::option::of(snapshot()),
        any::<u64>(),
        any::<bool>(),
        any::<u64>(),
        bytes(),
        any::<u64>(),
        any::<i64>(),
    );
    (header, body).prop_map(
        |(
            (msg_type, to, from, term, log_term, index),
            (
                entries,
                commit,
                commit_term,
                snapshot,
                request_snapshot,
                reject,
                reject_hint,
                context,
                deprecated_priority,
                priority,
            ),
        )| eraftpb::Message {
            msg_type,
            to,
            from,
            term,
            log_term,
            index,
            entries: entries.into(),
            commit,
            commit_term,
            snapshot: snapshot.into(),
            request_snapshot,
            reject,
            reject_hint,
            context,
            deprecated_priority,
            priority,
            ..eraftpb::Message::default()
        },
    )
}

fn conf_change() -> impl Strategy<Value = eraftpb::ConfChange> {
    (
        prop::sample::select(&CONF_CHANGE_TYPES[..]),
        any::<u64>(),
        bytes(),
        any::<u64>(),
    )
        .prop_map(|(change_type, node_id, context, id)| eraftpb::ConfChange {
            change_type,
            node_id,
            context,
            id,
            ..eraftpb::ConfChange::default()
        })
}

fn conf_change_v2() -> impl Strategy<Value = eraftpb::ConfChangeV2> {
    let single = (prop::sample::select(&CONF_CHANGE_TYPES[..]), any::<u64>()).prop_map(
        |(change_type, node_id)| eraftpb::ConfChangeSingle {
            change_type,
            node_id,
            ..eraftpb::ConfChangeSingle::default()
        },
    );
    (
        prop::sample::select(&TRANSITIONS[..]),
        prop::collection::vec(single, 0..4),
        bytes(),
    )
        .prop_map(|(transition, changes, context)| eraftpb::ConfChangeV2 {
            transition,
            changes: changes.into(),
            context,
            ..eraftpb::ConfChangeV2::default()
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn a_raft_message_round_trips_through_wire_bytes_unchanged(m in message()) {
        let bytes = message_to_wire(m.clone()).encode_to_vec();
        let back = message_from_wire(w::Message::decode(&bytes[..]).unwrap()).unwrap();
        prop_assert_eq!(back, m);
    }

    #[test]
    fn a_raft_message_in_an_envelope_round_trips_through_a_batch(m in message()) {
        let batch = w::RaftBatch {
            from_store: 1,
            messages: vec![w::RaftMessage {
                region_id: 9,
                from_store: 1,
                to_store: 2,
                message: Some(message_to_wire(m.clone())),
                ..w::RaftMessage::default()
            }],
        };
        let mut decoded = w::RaftBatch::decode(&batch.encode_to_vec()[..]).unwrap();
        let back = convert::take_message(&mut decoded.messages[0]);
        if m.msg_type == eraftpb::MessageType::MsgPropose
            || raft::raw_node::is_local_msg(m.msg_type)
        {
            let refused = matches!(back, Err(ConvertError::NotFromPeer { .. }));
            prop_assert!(refused, "{:?}", back);
        } else {
            prop_assert_eq!(back.unwrap(), m);
        }
        prop_assert_eq!(decoded.messages[0].region_id, 9);
        prop_assert!(decoded.messages[0].message.is_none());
    }

    /// The mirror's tags and types are raft-rs's: prost reads what rust-protobuf writes, and
    /// rust-protobuf reads what prost writes (bytes produced here, never from a peer).
    #[test]
    fn the_mirror_and_eraftpb_decode_each_others_bytes(m in message()) {
        let from_protobuf = w::Message::decode(&m.write_to_bytes().unwrap()[..]).unwrap();
        prop_assert_eq!(&from_protobuf, &message_to_wire(m.clone()));
        let from_prost = eraftpb::Message::parse_from_bytes(&from_protobuf.encode_to_vec()).unwrap();
        prop_assert_eq!(from_prost, m);
    }

    #[test]
    fn conf_changes_round_trip_and_decode_eraftpb_bytes(cc in conf_change(), cc2 in conf_change_v2()) {
        let wire = w::ConfChange::decode(&cc.write_to_bytes().unwrap()[..]).unwrap();
        prop_assert_eq!(&wire, &conf_change_to_wire(cc.clone()));
        prop_assert_eq!(conf_change_from_wire(wire).unwrap(), cc);
        let wire = w::ConfChangeV2::decode(&cc2.write_to_bytes().unwrap()[..]).unwrap();
        prop_assert_eq!(&wire, &conf_change_v2_to_wire(cc2.clone()));
        prop_assert_eq!(conf_change_v2_from_wire(wire).unwrap(), cc2);
    }

    #[test]
    fn hard_states_round_trip(term in any::<u64>(), vote in any::<u64>(), commit in any::<u64>()) {
        let hs = eraftpb::HardState { term, vote, commit, ..eraftpb::HardState::default() };
        let wire = w::HardState::decode(&hs.write_to_bytes().unwrap()[..]).unwrap();
        prop_assert_eq!(wire, hard_state_to_wire(hs.clone()));
        prop_assert_eq!(hard_state_from_wire(wire), hs);
    }
}

fn wire_message(msg_type: w::MessageType) -> w::Message {
    w::Message {
        msg_type: msg_type as i32,
        to: 2,
        from: 1,
        term: 3,
        ..w::Message::default()
    }
}

#[test]
fn an_unknown_message_type_is_a_typed_error() {
    let m = w::Message {
        msg_type: 19,
        ..wire_message(w::MessageType::MsgAppend)
    };
    assert_eq!(
        message_from_wire(m).unwrap_err(),
        ConvertError::UnknownEnum {
            field: "message.msg_type",
            value: 19
        }
    );
}

#[test]
fn an_unknown_entry_type_deep_in_a_message_is_a_typed_error() {
    let m = w::Message {
        entries: vec![
            w::Entry::default(),
            w::Entry {
                entry_type: -1,
                ..w::Entry::default()
            },
        ],
        ..wire_message(w::MessageType::MsgAppend)
    };
    assert_eq!(
        message_from_peer(m).unwrap_err(),
        ConvertError::UnknownEnum {
            field: "entry.entry_type",
            value: -1
        }
    );
}

#[test]
fn unknown_conf_change_values_are_typed_errors() {
    let cc = w::ConfChange {
        change_type: 3,
        ..w::ConfChange::default()
    };
    assert_eq!(
        conf_change_from_wire(cc).unwrap_err(),
        ConvertError::UnknownEnum {
            field: "conf_change.change_type",
            value: 3
        }
    );
    let cc2 = w::ConfChangeV2 {
        transition: 7,
        ..w::ConfChangeV2::default()
    };
    assert_eq!(
        conf_change_v2_from_wire(cc2).unwrap_err(),
        ConvertError::UnknownEnum {
            field: "conf_change_v2.transition",
            value: 7
        }
    );
    let cc2 = w::ConfChangeV2 {
        changes: vec![w::ConfChangeSingle {
            change_type: 9,
            node_id: 1,
        }],
        ..w::ConfChangeV2::default()
    };
    assert_eq!(
        conf_change_v2_from_wire(cc2).unwrap_err(),
        ConvertError::UnknownEnum {
            field: "conf_change_v2.changes.change_type",
            value: 9
        }
    );
}

/// A leader stepping a `MsgPropose` parses its conf-change entries with rust-protobuf, and
/// raft-rs rejects local messages only later: neither may come from a peer.
#[test]
fn proposals_and_local_messages_are_refused_from_peers() {
    use w::MessageType::*;
    for t in [
        MsgPropose,
        MsgHup,
        MsgBeat,
        MsgUnreachable,
        MsgSnapStatus,
        MsgCheckQuorum,
    ] {
        assert_eq!(
            message_from_peer(wire_message(t)).unwrap_err(),
            ConvertError::NotFromPeer { msg_type: t },
            "{t:?}"
        );
        assert!(message_from_wire(wire_message(t)).is_ok(), "{t:?}");
    }
    for t in [
        MsgAppend,
        MsgAppendResponse,
        MsgRequestVote,
        MsgRequestVoteResponse,
        MsgSnapshot,
        MsgHeartbeat,
        MsgHeartbeatResponse,
        MsgTransferLeader,
        MsgTimeoutNow,
        MsgReadIndex,
        MsgReadIndexResp,
        MsgRequestPreVote,
        MsgRequestPreVoteResponse,
    ] {
        let m = message_from_peer(wire_message(t)).unwrap();
        assert_eq!(convert::message_type_to_wire(m.msg_type), t);
    }
}

#[test]
fn an_envelope_without_a_message_is_a_typed_error() {
    let mut envelope = w::RaftMessage {
        region_id: 4,
        from_store: 2,
        ..w::RaftMessage::default()
    };
    assert_eq!(
        convert::take_message(&mut envelope).unwrap_err(),
        ConvertError::MissingMessage {
            region_id: 4,
            from_store: 2
        }
    );
}
