//! `PeerStorage`: raft-rs's `Storage` over the durable multi-region Raft log.
//!
//! raft-rs reads the persisted log through this trait; the store loop writes it (one
//! `RaftLog::write` per round for every region). The log's truncated point plays the part of
//! raft-rs's snapshot metadata: `first_index = truncated_index + 1`, and `term(truncated_index)`
//! answers the truncated term.
//!
//! **Snapshots** (for a replica behind the truncated point) are the region's file list at its
//! `data_sequence` (`Engine::raft_snapshot`, module docs of `kvengine::raft_snapshot`): the
//! metadata's index is that `data_sequence`, whose term the log still answers because it is
//! never truncated above what this replica flushed. The receiver reads the SSTs from the object
//! store and gets every later entry from the log.

use std::sync::Arc;

use kvengine::raft_log::{LogReadError, RaftLog};
use raft::eraftpb::{Entry, Snapshot};
use raft::{GetEntriesContext, RaftState, StorageError};

use crate::log_convert::{conf_state_to_pb, entry_to_pb, hard_state_to_pb};

/// The snapshot ChangeSet's property holding the log index of the last membership change its
/// `ConfState` includes (8 bytes, big-endian): the snapshot's file list stands for its
/// `data_sequence`, but its membership is the leader's current one, which may include changes
/// after it.
pub(crate) const CONF_INDEX_PROPERTY: &str = "raft_conf_index";

/// The conf index a snapshot ChangeSet carries (0 when it carries none).
pub(crate) fn conf_index_of(cs: &changeset::ChangeSet) -> u64 {
    cs.properties
        .get(CONF_INDEX_PROPERTY)
        .and_then(|b| b.as_slice().try_into().ok())
        .map_or(0, u64::from_be_bytes)
}

pub(crate) struct PeerStorage {
    region_id: u64,
    log: Arc<RaftLog>,
    engine: kvengine::Engine,
}

impl PeerStorage {
    pub(crate) fn new(region_id: u64, log: Arc<RaftLog>, engine: kvengine::Engine) -> PeerStorage {
        PeerStorage {
            region_id,
            log,
            engine,
        }
    }

    /// The region's log state; a replica made by a leader's message has none yet (no entries,
    /// no members, nothing truncated: `membership`), which reads as the default.
    fn state(&self) -> raft::Result<kvengine::raft_log::RegionLogState> {
        Ok(self.log.state(self.region_id).unwrap_or_default())
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
        if idx == 0 && self.log.state(self.region_id).is_none() {
            // The term before the first entry of an empty log.
            return Ok(0);
        }
        self.log.term(self.region_id, idx).map_err(read_error)
    }

    /// 1 for a replica with no log yet (an empty log).
    fn first_index(&self) -> raft::Result<u64> {
        Ok(self.log.first_index(self.region_id).unwrap_or(1))
    }

    /// 0 for a replica with no log yet.
    fn last_index(&self) -> raft::Result<u64> {
        Ok(self.log.last_index(self.region_id).unwrap_or(0))
    }

    /// The region's file list at its `data_sequence` (module docs). A failure is
    /// "temporarily unavailable": raft-rs asks again on a later round.
    fn snapshot(&self, _request_index: u64, to: u64) -> raft::Result<Snapshot> {
        let unavailable = |detail: String| {
            tracing::warn!(region_id = self.region_id, to, %detail, "raft snapshot not built");
            raft::Error::Store(StorageError::SnapshotTemporarilyUnavailable)
        };
        let cs = self
            .engine
            .raft_snapshot(self.region_id)
            .map_err(|e| unavailable(e.to_string()))?;
        let Some(changeset::Change::Snapshot(files)) = &cs.change else {
            return Err(unavailable(
                "the shard's file list is not a snapshot".into(),
            ));
        };
        let index = files.data_sequence;
        let file_count = files.file_ids().len();
        let term = self
            .log
            .term(self.region_id, index)
            .map_err(|e| unavailable(format!("no term for index {index}: {e}")))?;
        let st = self.state()?;
        // The membership travels as of its own index (`CONF_INDEX_PROPERTY`): the receiver
        // skips the membership changes at or below it when it replays the log after `index`.
        let mut cs = cs;
        cs.properties.insert(
            CONF_INDEX_PROPERTY.to_string(),
            st.conf_state.index.to_be_bytes().to_vec(),
        );
        let mut snap = Snapshot {
            data: prost::Message::encode_to_vec(&cs).into(),
            ..Snapshot::default()
        };
        let meta = snap.mut_metadata();
        meta.index = index;
        meta.term = term;
        meta.set_conf_state(conf_state_to_pb(&st.conf_state));
        crate::metrics::SNAPSHOTS_SENT.inc();
        tracing::info!(
            region_id = self.region_id,
            to,
            index,
            term,
            files = file_count,
            "raft snapshot built"
        );
        Ok(snap)
    }
}
