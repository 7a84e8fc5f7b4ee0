//! One server alone: every region a one-voter Raft group on store 1. No message ever leaves
//! the server, but a write still goes through the log (the Raft log is the write-ahead log),
//! so a standalone server and a replicated one run the same code.

use std::sync::Arc;
use std::time::Duration;

use kvengine::Engine;
use kvengine::raft_log::{RaftLog, RaftLogOptions};
use wire::raft::RaftMessage;

use crate::config::RaftConfig;
use crate::error::StartError;
use crate::store::{InitialRegion, RaftStore};
use crate::transport::Transport;

/// The store id of a standalone server.
pub const STANDALONE_STORE_ID: u64 = 1;

/// A transport with nobody to talk to: a one-voter group sends nothing, so anything handed
/// to it is a bug worth a log line, not a crash.
pub struct NoPeers;

impl Transport for NoPeers {
    fn send(&self, msgs: Vec<RaftMessage>) {
        if let Some(m) = msgs.first() {
            tracing::warn!(
                count = msgs.len(),
                to_store = m.to_store,
                region_id = m.region_id,
                "a standalone store has no peer to send raft messages to"
            );
        }
    }
}

/// Opens the Raft log (`log`), creates the `regions` the engine and the log do not have
/// yet (each a one-voter group), starts the store and waits until it leads every region.
/// `engine` must be open in external-log mode.
pub fn start_standalone(
    engine: Engine,
    log: RaftLogOptions,
    regions: &[(u64, Vec<u8>, Vec<u8>)],
    config: RaftConfig,
) -> Result<RaftStore, StartError> {
    let log = RaftLog::open(log).map_err(StartError::Log)?;
    let log = Arc::new(log);
    let initial: Vec<InitialRegion> = regions
        .iter()
        .map(|(id, start, end)| InitialRegion {
            id: *id,
            start: start.clone(),
            end: end.clone(),
            voters: vec![STANDALONE_STORE_ID],
        })
        .collect();
    RaftStore::bootstrap(&engine, &log, &initial)?;
    let store = RaftStore::start(
        STANDALONE_STORE_ID,
        config,
        engine.clone(),
        log,
        Arc::new(NoPeers),
    )?;
    store.wait_for_leaders(&engine.shard_ids(), Duration::from_secs(10))?;
    Ok(store)
}
