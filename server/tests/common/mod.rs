//! Shared test setup: an engine in a temp dir with the given shards, a TSO, a Storage and a
//! client over them.

#![allow(dead_code)]

use std::sync::Arc;

use kvengine::raft_log::RaftLogOptions;
use kvengine::{Engine, EngineOptions, LocalDfs, LogMode, SyncPolicy};
use raftstore::{InitialRegion, RaftConfig, STANDALONE_STORE_ID};
use server::tso::{Clock, ManualClock, Tso, TsoOptions};
use server::txn::{ClientOptions, Storage, TxnClient};

pub struct Cluster {
    pub dir: tempfile::TempDir,
    pub storage: Arc<Storage>,
    pub client: TxnClient,
    /// Set when the cluster runs on a manual clock.
    pub clock: Option<Arc<ManualClock>>,
}

impl Cluster {
    pub fn engine(&self) -> &Engine {
        self.storage.engine()
    }

    pub fn ts(&self) -> u64 {
        self.storage.tso().get_ts().unwrap()
    }

    /// Creates an empty region at run time (a one-voter group, like the others) and waits
    /// until this server leads it.
    pub fn create_region(&self, id: u64, start: &[u8], end: &[u8]) {
        self.storage
            .router()
            .create_region(
                InitialRegion {
                    id,
                    start: start.to_vec(),
                    end: end.to_vec(),
                    voters: vec![STANDALONE_STORE_ID],
                },
                std::time::Duration::from_secs(10),
            )
            .unwrap();
        self.storage
            .raft()
            .wait_for_leaders(&[id], std::time::Duration::from_secs(10))
            .unwrap();
    }

    /// Does now what the first 1PC or async-commit prewrite of each region's term would do:
    /// raise `max_ts` to a fresh TSO timestamp. Tests that check `min_commit_ts` arithmetic
    /// call it first, then take their timestamps from the TSO above it.
    pub fn sync_max_ts(&self) {
        for (id, _) in self.storage.router().regions() {
            self.storage.sync_max_ts(id).unwrap();
        }
    }

    /// Moves the manual clock forward.
    pub fn advance_ms(&self, ms: u64) {
        self.clock.as_ref().expect("manual clock").advance(ms);
    }
}

pub fn engine_options(dir: &std::path::Path) -> EngineOptions {
    let mut opts = EngineOptions::new(dir.join("engine"));
    // Writes go through a (one-voter) Raft log, as on a server.
    opts.log_mode = LogMode::External;
    opts.memtable_size = 256 * 1024;
    opts.block_cache_size = 8 * 1024 * 1024;
    opts.compaction_threads = 0;
    opts
}

/// Shards `(id, start, end)`; `manual_clock` runs the TSO on a clock the test moves.
pub fn cluster(shards: &[(u64, &[u8], &[u8])], manual_clock: bool) -> Cluster {
    cluster_with(shards, manual_clock, ClientOptions::default())
}

pub fn cluster_with(
    shards: &[(u64, &[u8], &[u8])],
    manual_clock: bool,
    client_opts: ClientOptions,
) -> Cluster {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(
        engine_options(dir.path()),
        Arc::new(LocalDfs::open(dir.path().join("dfs")).unwrap()),
    )
    .unwrap();
    let regions: Vec<(u64, Vec<u8>, Vec<u8>)> = shards
        .iter()
        .map(|&(id, start, end)| (id, start.to_vec(), end.to_vec()))
        .collect();
    // Durability is not what these tests are about.
    let raft = raftstore::start_standalone(
        engine.clone(),
        RaftLogOptions {
            sync: SyncPolicy::Off,
            ..RaftLogOptions::new(dir.path().join("raft"))
        },
        &regions,
        RaftConfig::default(),
    )
    .unwrap();
    let clock = manual_clock.then(|| Arc::new(ManualClock::new(1_700_000_000_000)));
    let clock_dyn: Arc<dyn Clock> = match &clock {
        Some(c) => c.clone(),
        None => Arc::new(server::tso::SystemClock),
    };
    let tso =
        Arc::new(Tso::open_with(dir.path().join("tso"), clock_dyn, TsoOptions::default()).unwrap());
    let storage = Arc::new(Storage::new(engine, tso, raft).unwrap());
    let client = TxnClient::with_options(storage.clone(), client_opts);
    Cluster {
        dir,
        storage,
        client,
        clock,
    }
}

/// One shard owning everything.
pub fn one_shard(manual_clock: bool) -> Cluster {
    cluster(&[(1, b"", b"")], manual_clock)
}

/// Two shards split at "m".
pub fn two_shards(manual_clock: bool) -> Cluster {
    cluster(&[(1, b"", b"m"), (2, b"m", b"")], manual_clock)
}
