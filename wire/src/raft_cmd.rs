//! The payload of a Raft log entry: one command to one region.
//!
//! An entry's `data` is a [`RaftCmd`]. It is stored in the Raft log on every replica's disk and
//! travels inside `Entry.data`, so it is a durable format: a tag never changes meaning, a new
//! command gets a new tag, and a decoder rejects an entry without a command (a typed error,
//! never a panic) instead of guessing. An entry with empty `data` is the no-op a new leader
//! appends; it is not a `RaftCmd`.
//!
//! Which commands check the region epoch at apply (`region_ver` against the region's current
//! `ver`) is decided by the apply side (`raftstore::apply`), in one place.

use prost::Message;

/// One command to the region the entry belongs to.
#[derive(Clone, PartialEq, Message)]
pub struct RaftCmd {
    /// The region's `ver` (split count) when the command was proposed. A write proposed before
    /// a split that applies after it is rejected on every replica alike (`EpochNotMatch`).
    #[prost(uint64, tag = "1")]
    pub region_ver: u64,
    #[prost(oneof = "Cmd", tags = "2, 3, 4, 5, 6")]
    pub cmd: Option<Cmd>,
}

/// The commands. Exactly one is set in a valid [`RaftCmd`].
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Cmd {
    /// A write batch (the engine's `WriteBatch` encoding): prewrite, commit, rollback, 1PC,
    /// lock resolution, raw load.
    #[prost(bytes = "vec", tag = "2")]
    Write(Vec<u8>),
    /// A ChangeSet (the `changeset` crate's encoding) made by the leader's flush or compaction;
    /// every replica applies it through the engine's one apply path.
    #[prost(bytes = "vec", tag = "3")]
    ChangeSet(Vec<u8>),
    /// Freeze the active memtable here, so every replica has the same memtable boundaries and a
    /// Flush ChangeSet drops the same frozen memtable everywhere.
    #[prost(message, tag = "4")]
    Freeze(Freeze),
    /// Split the region at `key`: the left child keeps the region id, the right one is
    /// `right_id`, on the same servers.
    #[prost(message, tag = "5")]
    Split(SplitCmd),
    /// Drop log entries at or below `index` (every replica has flushed past it).
    #[prost(message, tag = "6")]
    CompactLog(CompactLog),
}

#[derive(Clone, Copy, PartialEq, Eq, Message)]
pub struct Freeze {}

#[derive(Clone, PartialEq, Eq, Message)]
pub struct SplitCmd {
    #[prost(bytes = "vec", tag = "1")]
    pub key: Vec<u8>,
    #[prost(uint64, tag = "2")]
    pub right_id: u64,
}

#[derive(Clone, Copy, PartialEq, Eq, Message)]
pub struct CompactLog {
    #[prost(uint64, tag = "1")]
    pub index: u64,
    #[prost(uint64, tag = "2")]
    pub term: u64,
}

/// An entry whose bytes are not a command.
#[derive(Debug, thiserror::Error)]
pub enum RaftCmdDecodeError {
    #[error("undecodable raft command: {0}")]
    Protobuf(#[from] prost::DecodeError),
    #[error(
        "raft command without a command: expected one of write, change_set, freeze, split, compact_log, found none"
    )]
    Empty,
}

impl RaftCmd {
    pub fn new(region_ver: u64, cmd: Cmd) -> RaftCmd {
        RaftCmd {
            region_ver,
            cmd: Some(cmd),
        }
    }

    /// Decodes an entry's data; an entry without a command is an error.
    pub fn decode_entry(data: &[u8]) -> Result<(u64, Cmd), RaftCmdDecodeError> {
        let cmd = RaftCmd::decode(data)?;
        let region_ver = cmd.region_ver;
        cmd.cmd
            .map(|c| (region_ver, c))
            .ok_or(RaftCmdDecodeError::Empty)
    }
}

impl Cmd {
    /// The command's name, for logs, metrics and errors.
    pub fn as_str(&self) -> &'static str {
        match self {
            Cmd::Write(_) => "write",
            Cmd::ChangeSet(_) => "change_set",
            Cmd::Freeze(_) => "freeze",
            Cmd::Split(_) => "split",
            Cmd::CompactLog(_) => "compact_log",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The bytes of each command are pinned: entries written by one release are applied by the
    /// next, so a tag or a field type must never change.
    #[test]
    fn every_command_encodes_to_its_pinned_bytes_and_back() {
        let cases = [
            (Cmd::Write(vec![1, 2]), "0807120201 02"),
            (Cmd::ChangeSet(vec![9]), "08071a0109"),
            (Cmd::Freeze(Freeze {}), "08072200"),
            (
                Cmd::Split(SplitCmd {
                    key: b"k".to_vec(),
                    right_id: 3,
                }),
                "08072a050a016b1003",
            ),
            (
                Cmd::CompactLog(CompactLog { index: 5, term: 2 }),
                "080732040805 1002",
            ),
        ];
        for (cmd, want) in cases {
            let bytes = RaftCmd::new(7, cmd.clone()).encode_to_vec();
            assert_eq!(hex(&bytes), want.replace(' ', ""), "{}", cmd.as_str());
            let (ver, back) = RaftCmd::decode_entry(&bytes).unwrap();
            assert_eq!((ver, back), (7, cmd));
        }
    }

    #[test]
    fn an_entry_without_a_command_or_with_garbage_is_an_error() {
        let empty = RaftCmd {
            region_ver: 1,
            cmd: None,
        }
        .encode_to_vec();
        assert!(matches!(
            RaftCmd::decode_entry(&empty),
            Err(RaftCmdDecodeError::Empty)
        ));
        assert!(matches!(
            RaftCmd::decode_entry(&[0xff, 0xff, 0xff]),
            Err(RaftCmdDecodeError::Protobuf(_))
        ));
    }
}
