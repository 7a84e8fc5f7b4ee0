//! A running storage server's state, built from its config: the engine and its regions, the
//! TSO (local or remote), the transaction storage, the coprocessor endpoint, and the size
//! based split checker.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kvengine::raft_log::{RaftLog, RaftLogOptions};
use kvengine::{Engine, EngineOptions, LogMode, SyncPolicy};
use node::HttpClient;
use raftstore::{
    HttpTransport, HttpTransportOptions, InitialRegion, NoPeers, RaftStore, Transport,
};

use crate::config::{ServerConfig, WalSync};
use crate::coprocessor::Coprocessor;
use crate::cpu_load::{CpuMonitor, CpuSampler};
use crate::dispatcher::{DispatchSettings, RemoteDagDispatcher};
use crate::members::Members;
use crate::metrics::{self, SplitTrigger};
use crate::pd_source::{PdSource, RegionIdSource, TsoRegionIds};
use crate::remote_compaction::{RemoteCompaction, RemoteCompactionSettings};
use crate::remote_tso::RemoteTso;
use crate::tso::{TimestampSource, Tso, TsoError};
use crate::txn::Storage;
use crate::worker_pool::WorkerPool;

/// How long one call to the placement driver may retry (a failover takes a few seconds).
const PD_CALL_DEADLINE: Duration = Duration::from_secs(10);

/// In the data directory once the server created its initial regions (or found it had none
/// to create): it never creates them again.
const BOOTSTRAPPED_FILE: &str = "BOOTSTRAPPED";

#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error(transparent)]
    Config(#[from] node::ConfigError),
    #[error("cannot create the data directory {path}")]
    DataDir {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("engine failed")]
    Engine(#[from] kvengine::Error),
    #[error("timestamp oracle failed")]
    Tso(#[from] TsoError),
    #[error("transaction layer failed")]
    Txn(#[from] crate::txn::TxnError),
    #[error("cannot start the CPU sampler thread")]
    CpuSampler(#[source] std::io::Error),
    #[error("cannot split region {region_id}: {detail}")]
    Split { region_id: u64, detail: String },
    /// The request needs this server to lead the region (split), and it does not: the answer
    /// names the leader when known, so the caller can ask it.
    #[error("not the region's serving leader")]
    NotLeader(#[source] raftstore::RaftStoreError),
    #[error("replication failed to start")]
    Raft(#[from] raftstore::StartError),
    #[error("cannot settle this server's store id")]
    StoreId(#[from] crate::store_ident::StoreIdError),
    #[error("cannot set up TLS ([security])")]
    Tls(#[from] node::tls::TlsError),
}

pub struct Node {
    pub config: ServerConfig,
    /// Who holds each region's replicas, and where the other servers are.
    pub members: Members,
    pub storage: Arc<Storage>,
    /// The TSO when this server runs it.
    pub tso: Option<Arc<Tso>>,
    /// Where this server's own timestamps come from (the local TSO or the remote one).
    pub timestamps: Arc<dyn TimestampSource>,
    /// Where a split's new region id comes from (the placement driver's allocator, or the
    /// timestamps without one).
    pub region_ids: Arc<dyn RegionIdSource>,
    pub coprocessor: Arc<Coprocessor>,
    /// The CPU signal of load-aware offload routing, when it is on.
    pub cpu: Option<Arc<CpuMonitor>>,
    /// Stops sampling when the node is dropped.
    _cpu_sampler: Option<CpuSampler>,
    pub started: Instant,
    /// Splits one at a time (requests and the size checker).
    split_lock: parking_lot::Mutex<()>,
    /// `[security]` loaded: the listener's and every client's TLS (none: plain HTTP).
    pub tls: Option<Arc<node::tls::Tls>>,
    /// `security.admin-token-path` loaded: what admin paths accept besides an admin's
    /// certificate.
    pub admin_token: Option<node::tls::AdminToken>,
}

impl Node {
    /// Opens everything. Blocking (engine recovery, first-start region creation which may ask a
    /// remote TSO for region ids): call it from a blocking thread of `runtime`.
    pub fn open(
        mut config: ServerConfig,
        runtime: tokio::runtime::Handle,
    ) -> Result<Node, NodeError> {
        config.validate()?;
        metrics::register_all();
        // First: a bad key file stops the start before anything is created or asked.
        let tls = config.security.load()?;
        let admin_token = config.security.admin_token()?;
        std::fs::create_dir_all(&config.server.data_dir).map_err(|source| NodeError::DataDir {
            path: config.server.data_dir.clone(),
            source,
        })?;
        // Before anything uses it: the engine prefixes its files with it.
        config.server.node_id = crate::store_ident::resolve(
            config.server.node_id,
            &config.server.data_dir,
            &config.server.pd_endpoints,
            tls.as_deref(),
            &runtime,
            PD_CALL_DEADLINE,
        )?;
        let s = &config.server;
        let kv = &config.kvengine;
        let mut opts = EngineOptions::new(s.data_dir.join("engine"));
        // The Raft log is the write-ahead log: the engine applies committed entries at their
        // index and opens no WAL of its own.
        opts.log_mode = LogMode::External;
        opts.memtable_size = kv.memtable_size.bytes() as usize;
        opts.block_size = kv.block_size.bytes() as usize;
        opts.target_file_size = kv.target_file_size.bytes();
        opts.block_cache_size = kv.block_cache_size.bytes();
        opts.read_ahead = kv.read_ahead();
        kvengine::metrics::set_ship_buffer_pool_size(kv.ship_buffer_pool_size.bytes());
        // Checked by `ServerConfig::validate`.
        opts.table_format_version = kvengine::TableFormatVersion::from_u16(kv.sst_format_version)
            .unwrap_or(kvengine::TableFormatVersion::NEWEST);
        let sync = match kv.wal_sync {
            WalSync::EveryBatch => SyncPolicy::EveryBatch,
            WalSync::GroupCommit => SyncPolicy::GroupCommit,
            WalSync::Off => SyncPolicy::Off,
        };
        opts.wal_sync = sync;
        opts.flush_threads = kv.flush_threads;
        opts.compaction_threads = kv.compaction_threads;
        opts.node_id = s.node_id;
        let (read, written) = config.meter().object_store(config.dfs.zone.clone());
        let dfs = config
            .dfs_config()?
            .open_metered(Some(kvengine::DfsTraffic::new(read, written)))?;
        let engine = Engine::open(opts, dfs)?;
        let log = Arc::new(RaftLog::open(RaftLogOptions {
            sync,
            ..RaftLogOptions::new(s.data_dir.join("raft"))
        })?);

        let client = HttpClient::with_tls(
            kv.remote_coprocessor_max_response_size.bytes() as usize,
            tls.as_deref(),
        )
        .with_meter(config.meter());
        let mut region_ids: Option<Arc<dyn RegionIdSource>> = None;
        let (tso, timestamps): (Option<Arc<Tso>>, Arc<dyn TimestampSource>) =
            if !s.pd_endpoints.is_empty() {
                let pd = Arc::new(PdSource::new(
                    &s.pd_endpoints,
                    PD_CALL_DEADLINE,
                    config.meter(),
                    tls.as_deref(),
                    runtime.clone(),
                ));
                region_ids = Some(pd.clone());
                (None, pd)
            } else if s.tso {
                let tso = Arc::new(Tso::open(s.data_dir.join("tso"))?);
                (Some(tso.clone()), tso)
            } else {
                (
                    None,
                    Arc::new(RemoteTso::new(&s.tso_addr, client.clone(), runtime.clone())),
                )
            };
        let region_ids = region_ids.unwrap_or_else(|| Arc::new(TsoRegionIds(timestamps.clone())));
        let store_id = config.store_id();
        let bootstrapped = s.data_dir.join(BOOTSTRAPPED_FILE);
        if log.regions().is_empty() && !bootstrapped.exists() {
            // A first start (or one that died between creating the shards and writing their
            // logs: a shard with the range of a configured region is that region, and only an
            // untouched one can be adopted).
            let voters = config.raft.voters(store_id);
            let alone = config.raft.peers.is_empty();
            // A server among the peers but not among the first `replicas` of them joins an
            // existing cluster: it creates no region; replicas come to it by membership
            // changes (the placement driver's scheduling).
            let founding = voters.contains(&store_id);
            let mut existing = Vec::new();
            for id in engine.shard_ids() {
                let info = engine.shard_info(id)?;
                if info.data_sequence > 0 || info.write_sequence > 0 {
                    return Err(NodeError::Raft(raftstore::StartError::Inconsistent {
                        region_id: id,
                    }));
                }
                existing.push((info.start.to_vec(), info.end.to_vec(), id));
            }
            let mut regions = Vec::new();
            let ranges = if founding {
                config.initial_ranges()?
            } else {
                Vec::new()
            };
            for (i, (start, end)) in ranges.into_iter().enumerate() {
                let made = existing
                    .iter()
                    .find(|(s, e, _)| *s == start && *e == end)
                    .map(|(_, _, id)| *id);
                // Alone, ids come from the allocator (the placement driver's, or the TSO's
                // timestamps): unique across servers that each own their ranges. Replicated, every replica must derive the same id on its own: the
                // range's position.
                let id = match made {
                    Some(id) => id,
                    None if alone => region_ids.new_region_id()?,
                    None => i as u64 + 1,
                };
                tracing::info!(id, ?start, ?end, ?voters, "created initial region");
                regions.push(InitialRegion {
                    id,
                    start,
                    end,
                    voters: voters.clone(),
                });
            }
            RaftStore::bootstrap(&engine, &log, &regions)?;
        }
        if !bootstrapped.exists() {
            // Never bootstrap again: a server whose every replica moved away restarts with an
            // empty log, and must not create the initial regions a second time.
            kvengine::write_atomically(&bootstrapped, b"bootstrapped\n")?;
        }
        let transport: Arc<dyn Transport> = if config.raft.peers.is_empty() {
            Arc::new(NoPeers)
        } else {
            Arc::new(HttpTransport::start(
                &runtime,
                config.raft.peers.iter().map(|p| (p.id, p.addr.clone())),
                HttpTransportOptions {
                    zone: config.zone(),
                    tls: tls.clone(),
                    ..HttpTransportOptions::new(store_id, &config.raft)
                },
            ))
        };
        let members = Members::new(&config.raft, transport.clone());
        let raft = RaftStore::start(
            store_id,
            config.raft.clone(),
            engine.clone(),
            log,
            transport,
        )?;
        // Alone, every region elects this server at once (after replaying its log); replicated,
        // the regions elect once a quorum of servers is up and this one answers /raft/batch,
        // which it does only after this returns: nothing to wait for here.
        if config.raft.peers.is_empty() {
            raft.wait_for_leaders(&engine.shard_ids(), std::time::Duration::from_secs(60))?;
        }
        let mut storage = Storage::new(engine, timestamps.clone(), raft)?;
        storage.set_propose_timeout(config.raft.propose_timeout.duration());
        let storage = Arc::new(storage);
        let workers = config.offload_workers();
        // With a placement driver, workers also come from its registrations (the heartbeat
        // task adds them), so the dispatcher exists even before one registered.
        let discovers_workers = !config.server.pd_endpoints.is_empty();
        let dispatcher = (!workers.is_empty() || discovers_workers).then(|| {
            RemoteDagDispatcher::new(
                DispatchSettings {
                    timeout: kv.remote_coprocessor_timeout.duration(),
                    max_retries: kv.remote_coprocessor_max_retries,
                    retry_backoff: kv.remote_coprocessor_retry_backoff.duration(),
                    memtable_data_format: config.memtable_data_format(),
                },
                Arc::new(WorkerPool::new(
                    workers,
                    config.zone().as_ref(),
                    kv.remote_coprocessor_worker_dead_ttl.duration(),
                )),
                client.clone(),
            )
        });
        // The CPU signal matters only to a server that can offload with load-aware routing.
        let mut cpu_sampler = None;
        let cpu = if dispatcher.is_some()
            && (kv.remote_coprocessor_load_aware || kv.remote_compaction_load_aware)
        {
            let interval = kv.remote_coprocessor_load_aware_sample_interval.duration();
            let monitor = Arc::new(CpuMonitor::new(
                kv.remote_coprocessor_load_aware_cpu_threshold,
                kv.remote_coprocessor_load_aware_hold_time.duration(),
                interval,
            ));
            cpu_sampler = Some(
                CpuSampler::start(monitor.clone(), config.cpu_source()?, interval)
                    .map_err(NodeError::CpuSampler)?,
            );
            Some(monitor)
        } else {
            None
        };
        // Validated: remote compaction has workers, configured or registered.
        if kv.remote_compaction
            && let Some(d) = &dispatcher
        {
            storage
                .engine()
                .set_compaction_offload(Arc::new(RemoteCompaction::new(
                    RemoteCompactionSettings {
                        min_input_size: kv.remote_compaction_min_input_size.bytes(),
                        timeout: kv.remote_compaction_timeout.duration(),
                        load_aware: kv.remote_compaction_load_aware,
                    },
                    d.worker_pool().clone(),
                    client,
                    runtime.clone(),
                    cpu.clone(),
                )));
        }
        let coprocessor = Arc::new(Coprocessor::new(
            storage.clone(),
            dispatcher,
            config.offload_policy(),
            kv.remote_coprocessor_topn_max_pushdown_rows,
            cpu.clone().filter(|_| kv.remote_coprocessor_load_aware),
            config.raft.clone(),
        ));
        Ok(Node {
            config,
            members,
            storage,
            tso,
            timestamps,
            region_ids,
            coprocessor,
            cpu,
            _cpu_sampler: cpu_sampler,
            started: Instant::now(),
            split_lock: parking_lot::Mutex::new(()),
            tls,
            admin_token,
        })
    }

    pub fn engine(&self) -> &Engine {
        self.storage.engine()
    }

    /// Splits `region_id` at `key`: the left part keeps the id, the right part gets a fresh
    /// one (a TSO timestamp, unique across the cluster). The region is flushed first (a split
    /// is decided at apply, on every replica alike, and only over empty memtables); a write
    /// that lands between the flush and the split entry makes it rejected, and it is tried
    /// again. Blocking. Returns `(left, right)`.
    pub fn split(
        &self,
        region_id: u64,
        key: &[u8],
        trigger: SplitTrigger,
    ) -> Result<(u64, u64), NodeError> {
        let _one_at_a_time = self.split_lock.lock();
        // Writes to the region are refused while it splits, so the flush below leaves its
        // memtables empty for the split entry (a write proposed just before may still land:
        // the split is then rejected and tried again).
        let _no_writes = self.storage.start_split(region_id);
        let right = self.region_ids.new_region_id()?;
        let timeout = self.config.raft.propose_timeout.duration();
        // A region just made by a split elects its leader right after: give it that moment,
        // then only its leader splits it.
        let _ = self.storage.raft().wait_for_leaders(&[region_id], timeout);
        self.storage
            .check_leader(region_id)
            .map_err(NodeError::NotLeader)?;
        let mut last_reason = String::new();
        for _attempt in 0..5 {
            self.engine().flush_shard(region_id)?;
            let ver = self.engine().shard_info(region_id)?.ver;
            let applied = self
                .storage
                .router()
                .split(region_id, ver, key, right, timeout)
                .map_err(|e| NodeError::Split {
                    region_id,
                    detail: e.to_string(),
                })?;
            self.storage.refresh_shards()?;
            match applied.outcome {
                Some(kvengine::ApplyOutcome::Split { .. }) => {
                    // The right child's group elects here at once when this server leads the
                    // parent; answer once it serves, so the caller can use both halves.
                    let _ = self.storage.raft().wait_for_leaders(&[right], timeout);
                    metrics::SPLITS.with_label_values(&[trigger.as_str()]).inc();
                    tracing::info!(region_id, right, ?key, %trigger, "split region");
                    return Ok((region_id, right));
                }
                Some(kvengine::ApplyOutcome::Rejected { reason }) => last_reason = reason,
                other => last_reason = format!("unexpected outcome {other:?}"),
            }
        }
        Err(NodeError::Split {
            region_id,
            detail: format!("rejected five times, last: {last_reason}"),
        })
    }

    /// Approximate bytes of a region: its memtables plus its SST blocks.
    pub fn region_size(&self, region_id: u64) -> Result<u64, NodeError> {
        let info = self.engine().shard_info(region_id)?;
        let snap = self.engine().snapshot(region_id)?;
        let files = snap.range_blocks_size(&[(info.start.as_ref(), info.end.as_ref())]);
        Ok(files + info.memtable_size as u64)
    }

    /// The key near the middle of a region's data (by key + value bytes), or `None` when the
    /// region holds fewer than two distinct keys. One pass over the WRITE CF at the newest
    /// version, keeping a sample key per step so memory stays small.
    pub fn middle_key(&self, region_id: u64) -> Result<Option<Vec<u8>>, NodeError> {
        let snap = self.engine().snapshot(region_id)?;
        let mut it = snap.iter(
            kvengine::ColumnFamily::Write,
            snap.start(),
            snap.end(),
            u64::MAX,
            false,
        )?;
        let mut samples: Vec<Vec<u8>> = Vec::new();
        let (mut bytes, step) = (0u64, 256 * 1024u64);
        let mut next_sample = 0u64;
        while it.valid() {
            if bytes >= next_sample {
                samples.push(it.key().to_vec());
                next_sample = bytes + step;
            }
            bytes += (it.key().len() + it.value().len()) as u64;
            it.next()?;
        }
        if samples.len() < 2 {
            return Ok(None);
        }
        let mid = samples.swap_remove(samples.len() / 2);
        Ok((mid.as_slice() > snap.start()).then_some(mid))
    }

    /// One pass of the size checker: splits every region above `region-split-size`.
    pub fn check_splits(&self) -> Result<usize, NodeError> {
        let limit = self.config.server.region_split_size.bytes();
        if limit == 0 {
            return Ok(0);
        }
        let mut splits = 0;
        let router = self.storage.router();
        // Only a region's leader splits it; followers learn of the split from the log.
        let led = router.regions().into_iter().filter(|(_, s)| s.is_leader);
        for (id, _) in led {
            let size = match self.region_size(id) {
                Ok(s) => s,
                Err(NodeError::Engine(kvengine::Error::ShardNotFound { .. })) => continue,
                Err(e) => return Err(e),
            };
            if size < limit {
                continue;
            }
            match self.middle_key(id)? {
                Some(key) => match self.split(id, &key, SplitTrigger::Size) {
                    Ok(_) => splits += 1,
                    // Leadership moved since the list was taken: the new leader splits it.
                    Err(NodeError::NotLeader(e)) => tracing::debug!(id, %e, "split skipped"),
                    Err(e) => return Err(e),
                },
                None => tracing::debug!(id, size, "region above the split size has no middle key"),
            }
        }
        Ok(splits)
    }

    /// Stops the server's storage: alone, it flushes every region first (through the log, so
    /// the Raft store is still running); then it stops the Raft store, then the engine's
    /// threads.
    ///
    /// With replicas there is no shutdown flush: the writes are already durable in the Raft
    /// log, which the next start replays, and a flush needs a quorum that the last servers of
    /// a stopping cluster do not have (it would wait out `external_flush_timeout` per region).
    pub fn close(&self) -> Result<(), NodeError> {
        let mut flushed = Ok(());
        if self.config.raft.peers.is_empty() {
            for (id, status) in self.storage.router().regions() {
                if status.is_leader {
                    flushed = self.engine().flush_shard(id);
                    if flushed.is_err() {
                        break;
                    }
                }
            }
        }
        // The store stops before the engine closes, so no entry is applied to a closed engine.
        self.storage.raft().stop();
        self.engine().close(false)?;
        flushed?;
        Ok(())
    }
}
