//! `PeerStorage`: raft-rs's `Storage` over the durable multi-region Raft log.
//!
//! raft-rs reads the persisted log through this trait; the store loop writes it (one
//! `RaftLog::write` per round for every region). The log's truncated point plays the part of
//! raft-rs's snapshot metadata: `first_index = truncated_index + 1`, and `term(truncated_index)`
//! answers the truncated term.

use std::sync::Arc;

use kvengine::raft_log::{LogReadError, RaftLog};
use raft::eraftpb::{Entry, Snapshot};
use raft::{GetEntriesContext, RaftState, StorageError};

use crate::log_convert::{conf_state_to_pb, entry_to_pb, hard_state_to_pb};

pub(crate) struct PeerStorage {
    region_id: u64,
    log: Arc<RaftLog>,
}

impl PeerStorage {
    pub(crate) fn new(region_id: u64, log: Arc<RaftLog>) -> PeerStorage {
        PeerStorage { region_id, log }
    }

    fn state(&self) -> raft::Result<kvengine::raft_log::RegionLogState> {
        self.log
            .state(self.region_id)
            .ok_or(raft::Error::Store(StorageError::Unavailable))
    }
}

fn read_error(e: LogReadError) -> raft::Error {
    raft::Error::Store(match e {
        LogReadError::Compacted { .. } => StorageError::Compacted,
        LogReadError::Unavailable { .. } | LogReadError::UnknownRegion { .. } => {
            StorageError::Unavailable
        }
    })
}

impl raft::Storage for PeerStorage {
    fn initial_state(&self) -> raft::Result<RaftState> {
        let st = self.state()?;
        Ok(RaftState::new(
            hard_state_to_pb(&st.hard_state),
            conf_state_to_pb(&st.conf_state),
        ))
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        _context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        let entries = self
            .log
            .entries(self.region_id, low, high, max_size.into())
            .map_err(read_error)?;
        Ok(entries.iter().map(entry_to_pb).collect())
    }

    fn term(&self, idx: u64) -> raft::Result<u64> {
        self.log.term(self.region_id, idx).map_err(read_error)
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(self.state()?.truncated_index + 1)
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(self.state()?.last_index)
    }

    /// Raft snapshots (a ChangeSet plus memtable rows) are not built yet: a replica that
    /// needs entries below the truncated point waits. The log is truncated only below what
    /// every replica has flushed, so only a replica that lost its disk needs one.
    fn snapshot(&self, _request_index: u64, _to: u64) -> raft::Result<Snapshot> {
        Err(raft::Error::Store(
            StorageError::SnapshotTemporarilyUnavailable,
        ))
    }
}
