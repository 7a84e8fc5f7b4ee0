//! raft-rs's log types <-> the raft-agnostic records of `kvengine::raft_log`. Entry data and
//! context are `bytes::Bytes` on both sides: a conversion shares them, never copies.

use kvengine::raft_log::{ConfState, EntryKind, HardState, LogEntry};
use raft::eraftpb;

pub(crate) fn entry_to_pb(e: &LogEntry) -> eraftpb::Entry {
    let mut out = eraftpb::Entry {
        index: e.index,
        term: e.term,
        data: e.data.clone(),
        context: e.context.clone(),
        ..Default::default()
    };
    out.set_entry_type(match e.kind {
        EntryKind::Normal => eraftpb::EntryType::EntryNormal,
        EntryKind::ConfChange => eraftpb::EntryType::EntryConfChange,
        EntryKind::ConfChangeV2 => eraftpb::EntryType::EntryConfChangeV2,
    });
    out
}

pub(crate) fn entry_from_pb(e: &eraftpb::Entry) -> LogEntry {
    LogEntry {
        index: e.index,
        term: e.term,
        kind: match e.get_entry_type() {
            eraftpb::EntryType::EntryNormal => EntryKind::Normal,
            eraftpb::EntryType::EntryConfChange => EntryKind::ConfChange,
            eraftpb::EntryType::EntryConfChangeV2 => EntryKind::ConfChangeV2,
        },
        data: e.data.clone(),
        context: e.context.clone(),
    }
}

pub(crate) fn hard_state_to_pb(hs: &HardState) -> eraftpb::HardState {
    eraftpb::HardState {
        term: hs.term,
        vote: hs.vote,
        commit: hs.commit,
        ..Default::default()
    }
}

pub(crate) fn hard_state_from_pb(hs: &eraftpb::HardState) -> HardState {
    HardState {
        term: hs.term,
        vote: hs.vote,
        commit: hs.commit,
    }
}

pub(crate) fn conf_state_to_pb(cs: &ConfState) -> eraftpb::ConfState {
    eraftpb::ConfState {
        voters: cs.voters.clone(),
        learners: cs.learners.clone(),
        voters_outgoing: cs.voters_outgoing.clone(),
        learners_next: cs.learners_next.clone(),
        auto_leave: cs.auto_leave,
        ..Default::default()
    }
}

pub(crate) fn conf_state_from_pb(cs: &eraftpb::ConfState) -> ConfState {
    ConfState {
        voters: cs.voters.clone(),
        learners: cs.learners.clone(),
        voters_outgoing: cs.voters_outgoing.clone(),
        learners_next: cs.learners_next.clone(),
        auto_leave: cs.auto_leave,
        // Not in eraftpb: the caller sets it when it knows it.
        index: 0,
    }
}
