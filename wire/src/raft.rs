//! Raft messages between storage servers: `POST /raft/batch` ([`crate::paths::RAFT_BATCH`])
//! carries one [`RaftBatch`] per destination server, each message in a [`RaftMessage`]
//! envelope that names the region it belongs to.
//!
//! **Why a mirror.** The servers run raft-rs 0.7 (`raft` crate), whose messages are
//! `eraftpb` types generated for rust-protobuf 2. That parser has an unfixed advisory
//! (RUSTSEC-2024-0437: uncontrolled recursion on crafted input), and raft-rs 0.7 links it
//! unconditionally. So rust-protobuf must never see bytes from the network: messages travel
//! as the prost structs below and are converted field by field to `eraftpb` in memory
//! (`raftstore::convert`), and what a peer sends is decoded here, by prost, behind a fuzz
//! target (`fuzz/fuzz_targets/raft_batch.rs`).
//!
//! The mirror is field for field: same names, same protobuf types, same tags as raft-proto
//! 0.7.0's `proto/eraftpb.proto` (the tag of each field is in its doc comment). The bytes are
//! therefore those `eraftpb` would produce for the same message, up to field order, and the
//! `raftstore` tests check that each side decodes the other's encoding. Enumerations travel as
//! `i32`, as everywhere in this crate: a value a newer peer sends that this one does not know
//! decodes, and the conversion turns it into a typed error instead of a decode failure.
//!
//! Rolling upgrades: the `eraftpb` tags are raft-rs's and never change here; the envelope's
//! tags follow the rules of the crate (never renumbered or reused).
//!
//! Entry payloads (`Entry.data`) stay opaque bytes here. A configuration-change entry's
//! payload is an encoded [`ConfChange`] or [`ConfChangeV2`]: they are mirrored too, so that a
//! server reading one from a peer's entry decodes it with prost as well.

use bytes::Bytes;
use prost::Message as _;

/// `eraftpb.EntryType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum EntryType {
    EntryNormal = 0,
    /// `data` is an encoded [`ConfChange`].
    EntryConfChange = 1,
    /// `data` is an encoded [`ConfChangeV2`].
    EntryConfChangeV2 = 2,
}

/// `eraftpb.Entry`: one log entry.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Entry {
    /// Tag 1, one of [`EntryType`].
    #[prost(enumeration = "EntryType", tag = "1")]
    pub entry_type: i32,
    /// Tag 2.
    #[prost(uint64, tag = "2")]
    pub term: u64,
    /// Tag 3.
    #[prost(uint64, tag = "3")]
    pub index: u64,
    /// Tag 4: the payload (for Stratus, a `RaftCmd`; for a conf change, the change).
    #[prost(bytes = "bytes", tag = "4")]
    pub data: Bytes,
    /// Tag 6.
    #[prost(bytes = "bytes", tag = "6")]
    pub context: Bytes,
    /// Tag 5; deprecated in raft-rs, kept so that nothing is lost in a round trip.
    #[prost(bool, tag = "5")]
    pub sync_log: bool,
}

/// `eraftpb.SnapshotMetadata`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SnapshotMetadata {
    /// Tag 1: the configuration at `index`.
    #[prost(message, optional, tag = "1")]
    pub conf_state: Option<ConfState>,
    /// Tag 2: the applied index the snapshot was taken at.
    #[prost(uint64, tag = "2")]
    pub index: u64,
    /// Tag 3: the term of `index`.
    #[prost(uint64, tag = "3")]
    pub term: u64,
}

/// `eraftpb.Snapshot`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Snapshot {
    /// Tag 1: the application's snapshot (Stratus sends the body on its own request; what
    /// rides in a message is small).
    #[prost(bytes = "bytes", tag = "1")]
    pub data: Bytes,
    /// Tag 2.
    #[prost(message, optional, tag = "2")]
    pub metadata: Option<SnapshotMetadata>,
}

/// `eraftpb.MessageType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum MessageType {
    MsgHup = 0,
    MsgBeat = 1,
    MsgPropose = 2,
    MsgAppend = 3,
    MsgAppendResponse = 4,
    MsgRequestVote = 5,
    MsgRequestVoteResponse = 6,
    MsgSnapshot = 7,
    MsgHeartbeat = 8,
    MsgHeartbeatResponse = 9,
    MsgUnreachable = 10,
    MsgSnapStatus = 11,
    MsgCheckQuorum = 12,
    MsgTransferLeader = 13,
    MsgTimeoutNow = 14,
    MsgReadIndex = 15,
    MsgReadIndexResp = 16,
    MsgRequestPreVote = 17,
    MsgRequestPreVoteResponse = 18,
}

/// `eraftpb.Message`: what one Raft peer sends another.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Message {
    /// Tag 1, one of [`MessageType`].
    #[prost(enumeration = "MessageType", tag = "1")]
    pub msg_type: i32,
    /// Tag 2: the receiving peer's id.
    #[prost(uint64, tag = "2")]
    pub to: u64,
    /// Tag 3: the sending peer's id.
    #[prost(uint64, tag = "3")]
    pub from: u64,
    /// Tag 4.
    #[prost(uint64, tag = "4")]
    pub term: u64,
    /// Tag 5: the term of the entry at `index` (appends and their rejections).
    #[prost(uint64, tag = "5")]
    pub log_term: u64,
    /// Tag 6.
    #[prost(uint64, tag = "6")]
    pub index: u64,
    /// Tag 7.
    #[prost(message, repeated, tag = "7")]
    pub entries: Vec<Entry>,
    /// Tag 8.
    #[prost(uint64, tag = "8")]
    pub commit: u64,
    /// Tag 15.
    #[prost(uint64, tag = "15")]
    pub commit_term: u64,
    /// Tag 9.
    #[prost(message, optional, tag = "9")]
    pub snapshot: Option<Snapshot>,
    /// Tag 13.
    #[prost(uint64, tag = "13")]
    pub request_snapshot: u64,
    /// Tag 10.
    #[prost(bool, tag = "10")]
    pub reject: bool,
    /// Tag 11.
    #[prost(uint64, tag = "11")]
    pub reject_hint: u64,
    /// Tag 12 (read-index requests carry their request context here).
    #[prost(bytes = "bytes", tag = "12")]
    pub context: Bytes,
    /// Tag 14; raft-rs reads it when `priority` is 0.
    #[prost(uint64, tag = "14")]
    pub deprecated_priority: u64,
    /// Tag 16.
    #[prost(int64, tag = "16")]
    pub priority: i64,
}

/// `eraftpb.HardState`: what a peer persists before it answers.
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct HardState {
    /// Tag 1.
    #[prost(uint64, tag = "1")]
    pub term: u64,
    /// Tag 2.
    #[prost(uint64, tag = "2")]
    pub vote: u64,
    /// Tag 3.
    #[prost(uint64, tag = "3")]
    pub commit: u64,
}

/// `eraftpb.ConfState`: the voters and learners of a group.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct ConfState {
    /// Tag 1 (packed).
    #[prost(uint64, repeated, tag = "1")]
    pub voters: Vec<u64>,
    /// Tag 2 (packed).
    #[prost(uint64, repeated, tag = "2")]
    pub learners: Vec<u64>,
    /// Tag 3 (packed): the outgoing voters of a joint configuration.
    #[prost(uint64, repeated, tag = "3")]
    pub voters_outgoing: Vec<u64>,
    /// Tag 4 (packed): learners once the outgoing configuration is left.
    #[prost(uint64, repeated, tag = "4")]
    pub learners_next: Vec<u64>,
    /// Tag 5.
    #[prost(bool, tag = "5")]
    pub auto_leave: bool,
}

/// `eraftpb.ConfChangeTransition`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum ConfChangeTransition {
    Auto = 0,
    Implicit = 1,
    Explicit = 2,
}

/// `eraftpb.ConfChangeType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum ConfChangeType {
    AddNode = 0,
    RemoveNode = 1,
    AddLearnerNode = 2,
}

/// `eraftpb.ConfChange`: the payload of an [`EntryType::EntryConfChange`] entry.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ConfChange {
    /// Tag 2, one of [`ConfChangeType`].
    #[prost(enumeration = "ConfChangeType", tag = "2")]
    pub change_type: i32,
    /// Tag 3.
    #[prost(uint64, tag = "3")]
    pub node_id: u64,
    /// Tag 4.
    #[prost(bytes = "bytes", tag = "4")]
    pub context: Bytes,
    /// Tag 1.
    #[prost(uint64, tag = "1")]
    pub id: u64,
}

/// `eraftpb.ConfChangeSingle`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ConfChangeSingle {
    /// Tag 1, one of [`ConfChangeType`].
    #[prost(enumeration = "ConfChangeType", tag = "1")]
    pub change_type: i32,
    /// Tag 2.
    #[prost(uint64, tag = "2")]
    pub node_id: u64,
}

/// `eraftpb.ConfChangeV2`: the payload of an [`EntryType::EntryConfChangeV2`] entry.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ConfChangeV2 {
    /// Tag 1, one of [`ConfChangeTransition`].
    #[prost(enumeration = "ConfChangeTransition", tag = "1")]
    pub transition: i32,
    /// Tag 2.
    #[prost(message, repeated, tag = "2")]
    pub changes: Vec<ConfChangeSingle>,
    /// Tag 3.
    #[prost(bytes = "bytes", tag = "3")]
    pub context: Bytes,
}

/// One Raft message and the region it belongs to: the receiving server finds (or creates)
/// the region's peer from the envelope, and drops a message whose epoch is older than its own.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RaftMessage {
    /// Tag 1: the region (Raft group).
    #[prost(uint64, tag = "1")]
    pub region_id: u64,
    /// Tag 2: the sending server's store id.
    #[prost(uint64, tag = "2")]
    pub from_store: u64,
    /// Tag 3: the receiving server's store id.
    #[prost(uint64, tag = "3")]
    pub to_store: u64,
    /// Tag 4: the region's version (raised by every split) at the sender.
    #[prost(uint64, tag = "4")]
    pub region_ver: u64,
    /// Tag 5: the region's configuration version (raised by every membership change) at the
    /// sender.
    #[prost(uint64, tag = "5")]
    pub region_conf_ver: u64,
    /// Tag 6: the region's first key at the sender.
    #[prost(bytes = "vec", tag = "6")]
    pub start_key: Vec<u8>,
    /// Tag 7: the region's end key at the sender (exclusive; empty = unbounded).
    #[prost(bytes = "vec", tag = "7")]
    pub end_key: Vec<u8>,
    /// Tag 8: the Raft message itself.
    #[prost(message, optional, tag = "8")]
    pub message: Option<Message>,
    /// Tag 9: a message between the stores' loops rather than between raft-rs nodes
    /// (hibernation of idle regions; a store's heartbeat; a sleeping region's file GC
    /// indexes). An envelope carries `message` or `extra`, not both.
    #[prost(message, optional, tag = "9")]
    pub extra: Option<ExtraMessage>,
    /// Tag 10: file GC across replicas, the sender's **safe index** for the region: its replica
    /// needs no file the region retired (a compaction's inputs, say) at or below this log
    /// index. Set on every envelope of a region (0: nothing to say); the leader keeps the
    /// latest of each voter.
    #[prost(uint64, tag = "10")]
    pub file_gc_safe_index: u64,
    /// Tag 11: file GC across replicas, the region's **group index** as the sender knows it:
    /// no replica needs a file the region retired at or below it (the leader's minimum over
    /// every voter's safe index, its own included). Every replica deletes such files.
    #[prost(uint64, tag = "11")]
    pub file_gc_group_index: u64,
}

/// What an [`ExtraMessage`] says (Stratus's own, not raft-rs's; TiKV's `ExtraMessageType`
/// plays the same part).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum ExtraKind {
    /// A kind this build does not know (sent by a newer peer): ignored.
    Unknown = 0,
    /// The region's leader (`term`) goes to sleep with its log at `index`: a follower whose
    /// log and commit are there too stops ticking the region until a message for it arrives.
    Hibernate = 1,
    /// The sending store is alive (`region_id` 0): a follower of a sleeping region wakes when
    /// its leader's store has not been heard from for an election timeout.
    StoreHeartbeat = 2,
    /// Only the envelope's file GC indexes, for a sleeping region whose indexes moved (a
    /// snapshot holding a retired file was dropped): Raft messages, which carry them
    /// otherwise, stopped. Does not wake the region.
    FileGc = 3,
    /// From the region's leader (`term`) to a replica it removed at `index`: that replica
    /// leaves (a removed follower may never learn that its removal committed, since the
    /// leader stops sending it entries).
    Tombstone = 4,
}

/// A message between two stores' loops (see [`ExtraKind`]).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ExtraMessage {
    /// Tag 1, one of [`ExtraKind`] (`kind()` reads a value this build does not know as
    /// `Unknown`).
    #[prost(enumeration = "ExtraKind", tag = "1")]
    pub kind: i32,
    /// Tag 2: the sender's Raft term of the region.
    #[prost(uint64, tag = "2")]
    pub term: u64,
    /// Tag 3: the sender's last log index of the region.
    #[prost(uint64, tag = "3")]
    pub index: u64,
}

impl RaftMessage {
    /// The Raft message's type, if the sender set a message and its type is one this build
    /// knows (for logs and metrics; the conversion reports unknown values as errors).
    pub fn msg_type(&self) -> Option<MessageType> {
        self.message
            .as_ref()
            .and_then(|m| MessageType::try_from(m.msg_type).ok())
    }

    /// Bytes this envelope adds to a [`RaftBatch`] (its encoding with the field header), the
    /// unit of the transports' size limits.
    pub fn batch_len(&self) -> usize {
        let len = self.encoded_len();
        // tag 2, wire type 2: one byte; then the length as a varint.
        1 + prost::length_delimiter_len(len) + len
    }
}

/// The body of `POST /raft/batch`: every message one server has for another, in the order it
/// produced them.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RaftBatch {
    /// Tag 1: the sending server's store id.
    #[prost(uint64, tag = "1")]
    pub from_store: u64,
    /// Tag 2.
    #[prost(message, repeated, tag = "2")]
    pub messages: Vec<RaftMessage>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_len_is_what_each_message_adds_to_the_encoded_batch() {
        let small = RaftMessage {
            region_id: 7,
            to_store: 2,
            ..RaftMessage::default()
        };
        let large = RaftMessage {
            message: Some(Message {
                entries: vec![Entry {
                    data: Bytes::from(vec![7u8; 300]),
                    ..Entry::default()
                }],
                ..Message::default()
            }),
            ..small.clone()
        };
        let empty = RaftBatch {
            from_store: 1,
            messages: Vec::new(),
        };
        let batch = RaftBatch {
            messages: vec![small.clone(), large.clone()],
            ..empty.clone()
        };
        assert_eq!(
            batch.encoded_len(),
            empty.encoded_len() + small.batch_len() + large.batch_len()
        );
    }

    #[test]
    fn msg_type_is_none_for_a_value_this_build_does_not_know() {
        let mut m = RaftMessage {
            message: Some(Message {
                msg_type: MessageType::MsgAppend as i32,
                ..Message::default()
            }),
            ..RaftMessage::default()
        };
        assert_eq!(m.msg_type(), Some(MessageType::MsgAppend));
        if let Some(inner) = m.message.as_mut() {
            inner.msg_type = 99;
        }
        assert_eq!(m.msg_type(), None);
        assert_eq!(RaftMessage::default().msg_type(), None);
    }
}
