//! `eraftpb` (raft-rs, rust-protobuf 2) <-> [`wire::raft`] (prost), field by field.
//!
//! Why: rust-protobuf 2 has an unfixed advisory on parsing crafted input (RUSTSEC-2024-0437)
//! and raft-rs 0.7 links it whatever codec is chosen. So bytes from a peer are decoded by prost
//! into [`wire::raft`] and converted here in memory; rust-protobuf's parser is never handed
//! them. Every conversion destructures its source completely, so a field added to either side
//! fails to compile until it is carried over.
//!
//! Enumerations arrive as `i32`: a value this build does not know (a newer peer, a corrupted
//! sender) is a [`ConvertError::UnknownEnum`], never a panic.
//!
//! One gap remains in raft-rs itself: a leader that steps a `MsgPropose` parses the
//! conf-change entries in it with rust-protobuf (`Raft::step_leader`). Followers forward
//! proposals to their leader, so such a message can come from the network. Stratus proposes
//! only on the leader, and [`message_from_peer`] refuses `MsgPropose` (and the messages raft-rs
//! only generates locally), which closes it.

use raft::eraftpb;
use wire::raft as w;

/// A message from a peer that cannot be handed to raft-rs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConvertError {
    /// An enumeration value this build does not know.
    #[error("unknown enum value: field={field} value={value}")]
    UnknownEnum { field: &'static str, value: i32 },
    /// A message type peers never send each other (local to a node, or a forwarded proposal).
    #[error("message type not accepted from a peer: msg_type={msg_type:?}")]
    NotFromPeer { msg_type: w::MessageType },
    /// An envelope without its Raft message.
    #[error("raft envelope without a message: region_id={region_id} from_store={from_store}")]
    MissingMessage { region_id: u64, from_store: u64 },
}

fn unknown(field: &'static str, value: i32) -> ConvertError {
    ConvertError::UnknownEnum { field, value }
}

/// A message received from another server, ready for `RawNode::step`: the faithful
/// conversion of [`message_from_wire`], refusing what no peer may send (see the module docs):
/// `MsgPropose` and raft-rs's local messages (`MsgHup`, `MsgBeat`, `MsgUnreachable`,
/// `MsgSnapStatus`, `MsgCheckQuorum`).
pub fn message_from_peer(m: w::Message) -> Result<eraftpb::Message, ConvertError> {
    let m = message_from_wire(m)?;
    let t = m.msg_type;
    if t == eraftpb::MessageType::MsgPropose || raft::raw_node::is_local_msg(t) {
        return Err(ConvertError::NotFromPeer {
            msg_type: message_type_to_wire(t),
        });
    }
    Ok(m)
}

/// Takes the Raft message out of a received envelope, through [`message_from_peer`]; the
/// envelope keeps what routes it (region, stores, epoch, range).
pub fn take_message(envelope: &mut w::RaftMessage) -> Result<eraftpb::Message, ConvertError> {
    let m = envelope
        .message
        .take()
        .ok_or(ConvertError::MissingMessage {
            region_id: envelope.region_id,
            from_store: envelope.from_store,
        })?;
    message_from_peer(m)
}

/// `eraftpb::Message` -> wire, every field.
pub fn message_to_wire(m: eraftpb::Message) -> w::Message {
    let eraftpb::Message {
        msg_type,
        to,
        from,
        term,
        log_term,
        index,
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
        unknown_fields: _,
        cached_size: _,
    } = m;
    w::Message {
        msg_type: message_type_to_wire(msg_type) as i32,
        to,
        from,
        term,
        log_term,
        index,
        entries: entries.into_iter().map(entry_to_wire).collect(),
        commit,
        commit_term,
        snapshot: snapshot.into_option().map(snapshot_to_wire),
        request_snapshot,
        reject,
        reject_hint,
        context,
        deprecated_priority,
        priority,
    }
}

/// Wire -> `eraftpb::Message`, every field; an unknown enum value anywhere is an error.
pub fn message_from_wire(m: w::Message) -> Result<eraftpb::Message, ConvertError> {
    let w::Message {
        msg_type,
        to,
        from,
        term,
        log_term,
        index,
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
    } = m;
    let entries = entries
        .into_iter()
        .map(entry_from_wire)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(eraftpb::Message {
        msg_type: message_type_from_wire(msg_type)?,
        to,
        from,
        term,
        log_term,
        index,
        entries: entries.into(),
        commit,
        commit_term,
        snapshot: snapshot.map(snapshot_from_wire).into(),
        request_snapshot,
        reject,
        reject_hint,
        context,
        deprecated_priority,
        priority,
        ..eraftpb::Message::default()
    })
}

pub fn entry_to_wire(e: eraftpb::Entry) -> w::Entry {
    let eraftpb::Entry {
        entry_type,
        term,
        index,
        data,
        context,
        sync_log,
        unknown_fields: _,
        cached_size: _,
    } = e;
    w::Entry {
        entry_type: entry_type_to_wire(entry_type) as i32,
        term,
        index,
        data,
        context,
        sync_log,
    }
}

pub fn entry_from_wire(e: w::Entry) -> Result<eraftpb::Entry, ConvertError> {
    let w::Entry {
        entry_type,
        term,
        index,
        data,
        context,
        sync_log,
    } = e;
    Ok(eraftpb::Entry {
        entry_type: entry_type_from_wire(entry_type)?,
        term,
        index,
        data,
        context,
        sync_log,
        ..eraftpb::Entry::default()
    })
}

pub fn snapshot_to_wire(s: eraftpb::Snapshot) -> w::Snapshot {
    let eraftpb::Snapshot {
        data,
        metadata,
        unknown_fields: _,
        cached_size: _,
    } = s;
    w::Snapshot {
        data,
        metadata: metadata.into_option().map(snapshot_metadata_to_wire),
    }
}

/// Infallible: a snapshot has no enumeration.
pub fn snapshot_from_wire(s: w::Snapshot) -> eraftpb::Snapshot {
    let w::Snapshot { data, metadata } = s;
    eraftpb::Snapshot {
        data,
        metadata: metadata.map(snapshot_metadata_from_wire).into(),
        ..eraftpb::Snapshot::default()
    }
}

pub fn snapshot_metadata_to_wire(m: eraftpb::SnapshotMetadata) -> w::SnapshotMetadata {
    let eraftpb::SnapshotMetadata {
        conf_state,
        index,
        term,
        unknown_fields: _,
        cached_size: _,
    } = m;
    w::SnapshotMetadata {
        conf_state: conf_state.into_option().map(conf_state_to_wire),
        index,
        term,
    }
}

pub fn snapshot_metadata_from_wire(m: w::SnapshotMetadata) -> eraftpb::SnapshotMetadata {
    let w::SnapshotMetadata {
        conf_state,
        index,
        term,
    } = m;
    eraftpb::SnapshotMetadata {
        conf_state: conf_state.map(conf_state_from_wire).into(),
        index,
        term,
        ..eraftpb::SnapshotMetadata::default()
    }
}

pub fn conf_state_to_wire(c: eraftpb::ConfState) -> w::ConfState {
    let eraftpb::ConfState {
        voters,
        learners,
        voters_outgoing,
        learners_next,
        auto_leave,
        unknown_fields: _,
        cached_size: _,
    } = c;
    w::ConfState {
        voters,
        learners,
        voters_outgoing,
        learners_next,
        auto_leave,
    }
}

pub fn conf_state_from_wire(c: w::ConfState) -> eraftpb::ConfState {
    let w::ConfState {
        voters,
        learners,
        voters_outgoing,
        learners_next,
        auto_leave,
    } = c;
    eraftpb::ConfState {
        voters,
        learners,
        voters_outgoing,
        learners_next,
        auto_leave,
        ..eraftpb::ConfState::default()
    }
}

pub fn hard_state_to_wire(h: eraftpb::HardState) -> w::HardState {
    let eraftpb::HardState {
        term,
        vote,
        commit,
        unknown_fields: _,
        cached_size: _,
    } = h;
    w::HardState { term, vote, commit }
}

pub fn hard_state_from_wire(h: w::HardState) -> eraftpb::HardState {
    let w::HardState { term, vote, commit } = h;
    eraftpb::HardState {
        term,
        vote,
        commit,
        ..eraftpb::HardState::default()
    }
}

pub fn conf_change_to_wire(c: eraftpb::ConfChange) -> w::ConfChange {
    let eraftpb::ConfChange {
        change_type,
        node_id,
        context,
        id,
        unknown_fields: _,
        cached_size: _,
    } = c;
    w::ConfChange {
        change_type: conf_change_type_to_wire(change_type) as i32,
        node_id,
        context,
        id,
    }
}

/// The payload of an `EntryConfChange` entry, decoded with prost (`w::ConfChange::decode`),
/// as raft-rs wants it.
pub fn conf_change_from_wire(c: w::ConfChange) -> Result<eraftpb::ConfChange, ConvertError> {
    let w::ConfChange {
        change_type,
        node_id,
        context,
        id,
    } = c;
    Ok(eraftpb::ConfChange {
        change_type: conf_change_type_from_wire(change_type, "conf_change.change_type")?,
        node_id,
        context,
        id,
        ..eraftpb::ConfChange::default()
    })
}

pub fn conf_change_v2_to_wire(c: eraftpb::ConfChangeV2) -> w::ConfChangeV2 {
    let eraftpb::ConfChangeV2 {
        transition,
        changes,
        context,
        unknown_fields: _,
        cached_size: _,
    } = c;
    w::ConfChangeV2 {
        transition: conf_change_transition_to_wire(transition) as i32,
        changes: changes
            .into_iter()
            .map(|s| {
                let eraftpb::ConfChangeSingle {
                    change_type,
                    node_id,
                    unknown_fields: _,
                    cached_size: _,
                } = s;
                w::ConfChangeSingle {
                    change_type: conf_change_type_to_wire(change_type) as i32,
                    node_id,
                }
            })
            .collect(),
        context,
    }
}

/// The payload of an `EntryConfChangeV2` entry, decoded with prost (`w::ConfChangeV2::decode`),
/// as raft-rs wants it.
pub fn conf_change_v2_from_wire(c: w::ConfChangeV2) -> Result<eraftpb::ConfChangeV2, ConvertError> {
    let w::ConfChangeV2 {
        transition,
        changes,
        context,
    } = c;
    let changes = changes
        .into_iter()
        .map(|s| {
            let w::ConfChangeSingle {
                change_type,
                node_id,
            } = s;
            Ok(eraftpb::ConfChangeSingle {
                change_type: conf_change_type_from_wire(
                    change_type,
                    "conf_change_v2.changes.change_type",
                )?,
                node_id,
                ..eraftpb::ConfChangeSingle::default()
            })
        })
        .collect::<Result<Vec<_>, ConvertError>>()?;
    Ok(eraftpb::ConfChangeV2 {
        transition: conf_change_transition_from_wire(transition)?,
        changes: changes.into(),
        context,
        ..eraftpb::ConfChangeV2::default()
    })
}

pub fn message_type_to_wire(t: eraftpb::MessageType) -> w::MessageType {
    use eraftpb::MessageType as E;
    use w::MessageType as W;
    match t {
        E::MsgHup => W::MsgHup,
        E::MsgBeat => W::MsgBeat,
        E::MsgPropose => W::MsgPropose,
        E::MsgAppend => W::MsgAppend,
        E::MsgAppendResponse => W::MsgAppendResponse,
        E::MsgRequestVote => W::MsgRequestVote,
        E::MsgRequestVoteResponse => W::MsgRequestVoteResponse,
        E::MsgSnapshot => W::MsgSnapshot,
        E::MsgHeartbeat => W::MsgHeartbeat,
        E::MsgHeartbeatResponse => W::MsgHeartbeatResponse,
        E::MsgUnreachable => W::MsgUnreachable,
        E::MsgSnapStatus => W::MsgSnapStatus,
        E::MsgCheckQuorum => W::MsgCheckQuorum,
        E::MsgTransferLeader => W::MsgTransferLeader,
        E::MsgTimeoutNow => W::MsgTimeoutNow,
        E::MsgReadIndex => W::MsgReadIndex,
        E::MsgReadIndexResp => W::MsgReadIndexResp,
        E::MsgRequestPreVote => W::MsgRequestPreVote,
        E::MsgRequestPreVoteResponse => W::MsgRequestPreVoteResponse,
    }
}

pub fn message_type_from_wire(v: i32) -> Result<eraftpb::MessageType, ConvertError> {
    use eraftpb::MessageType as E;
    use w::MessageType as W;
    let t = W::try_from(v).map_err(|_| unknown("message.msg_type", v))?;
    Ok(match t {
        W::MsgHup => E::MsgHup,
        W::MsgBeat => E::MsgBeat,
        W::MsgPropose => E::MsgPropose,
        W::MsgAppend => E::MsgAppend,
        W::MsgAppendResponse => E::MsgAppendResponse,
        W::MsgRequestVote => E::MsgRequestVote,
        W::MsgRequestVoteResponse => E::MsgRequestVoteResponse,
        W::MsgSnapshot => E::MsgSnapshot,
        W::MsgHeartbeat => E::MsgHeartbeat,
        W::MsgHeartbeatResponse => E::MsgHeartbeatResponse,
        W::MsgUnreachable => E::MsgUnreachable,
        W::MsgSnapStatus => E::MsgSnapStatus,
        W::MsgCheckQuorum => E::MsgCheckQuorum,
        W::MsgTransferLeader => E::MsgTransferLeader,
        W::MsgTimeoutNow => E::MsgTimeoutNow,
        W::MsgReadIndex => E::MsgReadIndex,
        W::MsgReadIndexResp => E::MsgReadIndexResp,
        W::MsgRequestPreVote => E::MsgRequestPreVote,
        W::MsgRequestPreVoteResponse => E::MsgRequestPreVoteResponse,
    })
}

pub fn entry_type_to_wire(t: eraftpb::EntryType) -> w::EntryType {
    match t {
        eraftpb::EntryType::EntryNormal => w::EntryType::EntryNormal,
        eraftpb::EntryType::EntryConfChange => w::EntryType::EntryConfChange,
        eraftpb::EntryType::EntryConfChangeV2 => w::EntryType::EntryConfChangeV2,
    }
}

pub fn entry_type_from_wire(v: i32) -> Result<eraftpb::EntryType, ConvertError> {
    Ok(
        match w::EntryType::try_from(v).map_err(|_| unknown("entry.entry_type", v))? {
            w::EntryType::EntryNormal => eraftpb::EntryType::EntryNormal,
            w::EntryType::EntryConfChange => eraftpb::EntryType::EntryConfChange,
            w::EntryType::EntryConfChangeV2 => eraftpb::EntryType::EntryConfChangeV2,
        },
    )
}

fn conf_change_type_to_wire(t: eraftpb::ConfChangeType) -> w::ConfChangeType {
    match t {
        eraftpb::ConfChangeType::AddNode => w::ConfChangeType::AddNode,
        eraftpb::ConfChangeType::RemoveNode => w::ConfChangeType::RemoveNode,
        eraftpb::ConfChangeType::AddLearnerNode => w::ConfChangeType::AddLearnerNode,
    }
}

fn conf_change_type_from_wire(
    v: i32,
    field: &'static str,
) -> Result<eraftpb::ConfChangeType, ConvertError> {
    Ok(
        match w::ConfChangeType::try_from(v).map_err(|_| unknown(field, v))? {
            w::ConfChangeType::AddNode => eraftpb::ConfChangeType::AddNode,
            w::ConfChangeType::RemoveNode => eraftpb::ConfChangeType::RemoveNode,
            w::ConfChangeType::AddLearnerNode => eraftpb::ConfChangeType::AddLearnerNode,
        },
    )
}

fn conf_change_transition_to_wire(t: eraftpb::ConfChangeTransition) -> w::ConfChangeTransition {
    match t {
        eraftpb::ConfChangeTransition::Auto => w::ConfChangeTransition::Auto,
        eraftpb::ConfChangeTransition::Implicit => w::ConfChangeTransition::Implicit,
        eraftpb::ConfChangeTransition::Explicit => w::ConfChangeTransition::Explicit,
    }
}

fn conf_change_transition_from_wire(v: i32) -> Result<eraftpb::ConfChangeTransition, ConvertError> {
    Ok(
        match w::ConfChangeTransition::try_from(v)
            .map_err(|_| unknown("conf_change_v2.transition", v))?
        {
            w::ConfChangeTransition::Auto => eraftpb::ConfChangeTransition::Auto,
            w::ConfChangeTransition::Implicit => eraftpb::ConfChangeTransition::Implicit,
            w::ConfChangeTransition::Explicit => eraftpb::ConfChangeTransition::Explicit,
        },
    )
}
