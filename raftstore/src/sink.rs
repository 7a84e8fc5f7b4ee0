//! `RaftSink`: how the engine's leader-only jobs reach the log. A flush or compaction result
//! becomes a ChangeSet entry that every replica applies; a full memtable becomes a Freeze
//! entry, so every replica freezes at the same index.

use std::time::Duration;

use changeset::ChangeSet;
use kvengine::{ApplyOutcome, ChangeSetSink, SinkError};
use prost::Message;
use wire::raft_cmd::{Cmd, Freeze};

use crate::error::RaftStoreError;
use crate::router::Router;

pub(crate) struct RaftSink {
    router: Router,
    timeout: Duration,
}

impl RaftSink {
    pub(crate) fn new(router: Router, timeout: Duration) -> RaftSink {
        RaftSink { router, timeout }
    }
}

impl ChangeSetSink for RaftSink {
    fn propose_freeze(&self, shard_id: u64) {
        self.router
            .propose(shard_id, None, Cmd::Freeze(Freeze {}), Box::new(|_| {}));
    }

    fn propose_change_set(&self, cs: &ChangeSet) -> Result<ApplyOutcome, SinkError> {
        let cmd = Cmd::ChangeSet(cs.encode_to_vec());
        match self
            .router
            .propose_and_wait(cs.shard_id, None, cmd, self.timeout)
        {
            Ok(applied) => applied.outcome.ok_or_else(|| SinkError::Unknown {
                reason: "the change set applied without an outcome".into(),
            }),
            // Never appended, or its index was taken by another leader's entry: it will not
            // apply, so its outputs can go.
            Err(
                e @ (RaftStoreError::NotLeader { .. }
                | RaftStoreError::RegionNotFound { .. }
                | RaftStoreError::StaleCommand { .. }
                | RaftStoreError::InvalidCommand { .. }
                | RaftStoreError::EpochNotMatch { .. }
                | RaftStoreError::Apply { .. }),
            ) => Err(SinkError::Dropped {
                reason: e.to_string(),
            }),
            // Read errors never answer a proposal; were one to, the outcome is not known.
            Err(
                e @ (RaftStoreError::Timeout { .. }
                | RaftStoreError::Stopped { .. }
                | RaftStoreError::ReadLocked { .. }
                | RaftStoreError::ReadNotChecked { .. }),
            ) => Err(SinkError::Unknown {
                reason: e.to_string(),
            }),
        }
    }
}
