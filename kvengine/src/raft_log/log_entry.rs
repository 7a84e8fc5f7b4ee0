//! What the Raft log stores, without the `raft` crate: entries, the hard state and the
//! configuration of a region, and the summary [`RegionLogState`] a Raft `Storage` starts from.
//! The fields mirror raft-rs 0.7 `eraftpb::{Entry, HardState, ConfState}`; the Raft store
//! converts field by field.

use bytes::Bytes;

/// The type of a log entry (`eraftpb::EntryType`). Stored as one byte.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum EntryKind {
    /// A command for the state machine (or an empty entry a new leader appends).
    #[default]
    Normal,
    /// A membership change (`ConfChange`).
    ConfChange,
    /// A joint-consensus membership change (`ConfChangeV2`).
    ConfChangeV2,
}

impl EntryKind {
    /// Every kind, in the order of their byte values.
    pub const ALL: [EntryKind; 3] = [
        EntryKind::Normal,
        EntryKind::ConfChange,
        EntryKind::ConfChangeV2,
    ];

    /// The byte stored on disk: 0, 1, 2 (the `eraftpb::EntryType` numbers).
    pub fn as_u8(self) -> u8 {
        match self {
            EntryKind::Normal => 0,
            EntryKind::ConfChange => 1,
            EntryKind::ConfChangeV2 => 2,
        }
    }

    /// The kind stored as `byte`, if it is one.
    pub fn from_u8(byte: u8) -> Option<EntryKind> {
        EntryKind::ALL.into_iter().find(|k| k.as_u8() == byte)
    }
}

/// One entry of a region's log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogEntry {
    pub index: u64,
    pub term: u64,
    pub kind: EntryKind,
    /// The command, opaque to the log.
    pub data: Bytes,
    /// raft-rs's entry context, opaque to the log.
    pub context: Bytes,
}

impl LogEntry {
    /// The size an entry counts for in [`crate::raft_log::RaftLog::entries`]'s `max_size`: its
    /// encoded size in a record (term, kind, two lengths, data, context). raft-rs uses the
    /// protobuf size; both grow with the payload, which is what the limit is for.
    pub fn size(&self) -> u64 {
        (8 + 1 + 4 + 4 + self.data.len() + self.context.len()) as u64
    }
}

/// The persistent vote state of a region's Raft peer (`eraftpb::HardState`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct HardState {
    pub term: u64,
    pub vote: u64,
    pub commit: u64,
}

/// A region's membership (`eraftpb::ConfState`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ConfState {
    pub voters: Vec<u64>,
    pub learners: Vec<u64>,
    pub voters_outgoing: Vec<u64>,
    pub learners_next: Vec<u64>,
    pub auto_leave: bool,
    /// The log index of the last membership change this state includes (0: none known, the
    /// initial state). Not part of `eraftpb::ConfState`: a replica replaying its log skips the
    /// changes at or below it (they are in the state already), which matters when one server's
    /// replica was removed and later added again.
    pub index: u64,
}

/// What a Raft `Storage` over one region needs besides entries: `initial_state` is
/// `(hard_state, conf_state)`, `first_index` is `truncated_index + 1`, `last_index` is
/// `last_index`, and `term(truncated_index)` is `truncated_term`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegionLogState {
    pub hard_state: HardState,
    pub conf_state: ConfState,
    /// Entries up to here are gone (compacted, or covered by an installed snapshot).
    pub truncated_index: u64,
    /// The term of the entry at `truncated_index`.
    pub truncated_term: u64,
    /// The newest entry's index; `truncated_index` when the log is empty.
    pub last_index: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_kind_bytes_round_trip_and_others_are_rejected() {
        for kind in EntryKind::ALL {
            assert_eq!(EntryKind::from_u8(kind.as_u8()), Some(kind));
        }
        assert_eq!(EntryKind::ALL.map(EntryKind::as_u8), [0, 1, 2]);
        assert_eq!(EntryKind::from_u8(3), None);
    }
}
