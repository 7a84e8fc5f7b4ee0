//! What a worker process shares between requests: its config, the object store (opened once,
//! so S3 connections and the cachefs index are reused), the block cache, the tables rebuilds
//! opened (`kvengine::TableCache`), the cop-limiter, and the counters `GET /status` reports.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use kvengine::{Dfs, MokaBlockCache, TableCache};
use node::{ConfigError, HttpClient};

use crate::config::WorkerConfig;
use crate::cop_limiter::{CopLimiter, MemorySource, SystemMemory};
use crate::metrics;

/// Why a worker could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("invalid config")]
    Config(#[from] ConfigError),
    #[error("cannot open the object store")]
    Dfs(#[source] kvengine::Error),
    #[error("cannot set up TLS ([security])")]
    Tls(#[from] ::node::tls::TlsError),
}

impl StartError {
    /// Config errors exit with code 2 (fix the file); other start failures with 1.
    pub fn is_config(&self) -> bool {
        matches!(self, StartError::Config(_))
    }
}

/// Shared by every request (behind an `Arc`).
pub struct WorkerState {
    config: WorkerConfig,
    /// The effective config as TOML, rendered once.
    config_text: String,
    /// The object store and the block cache, and the tables rebuilds opened through them,
    /// kept for the next ones (`worker.table-cache-size`).
    tables: TableCache,
    limiter: CopLimiter,
    started: Instant,
    /// The address actually listened on (set once serving starts; `worker.addr` may say port 0).
    bound: OnceLock<SocketAddr>,
    /// `/coprocessor` requests received since start.
    requests: AtomicU64,
    /// `/coprocessor` requests not yet answered.
    in_flight: AtomicI64,
    /// Calls servers on the delegate path (made on first use; answers up to
    /// `worker.max-request-size`).
    client: OnceLock<HttpClient>,
    /// `[security]` loaded: the listener's and the clients' TLS (none: plain HTTP).
    tls: Option<Arc<::node::tls::Tls>>,
    /// The bound on compaction jobs running at once (`worker.max-compaction-jobs`).
    compaction_slots: crate::compaction::CompactionSlots,
    /// The servers the delegate path may call (made on first use, after `tls` is set).
    known_servers: OnceLock<crate::known_servers::KnownServers>,
}

impl WorkerState {
    /// Opens the object store `config` names and allocates the block cache.
    pub fn open(config: WorkerConfig) -> Result<WorkerState, StartError> {
        config.validate()?;
        // First: a bad key file stops the start before the store is opened.
        let tls = config.security.load()?;
        let (read, written) = config.meter().object_store(config.dfs.zone.clone());
        let dfs = config
            .dfs_config()?
            .open_metered(Some(kvengine::DfsTraffic::new(read, written)))
            .map_err(StartError::Dfs)?;
        if let Some(warning) = ::node::open_files::warning(
            ::node::open_files::soft_limit(),
            config.max_open_files(),
            "[http] max-connections and worker.table-cache-size",
        ) {
            tracing::warn!("{warning}");
        }
        Ok(WorkerState {
            tls,
            ..WorkerState::with_dfs(config, dfs)
        })
    }

    /// A worker reading `dfs` instead of the store `config` names: tests pass a fault
    /// injecting or shared store. `config` is assumed valid.
    pub fn with_dfs(config: WorkerConfig, dfs: Arc<dyn Dfs>) -> WorkerState {
        let limiter = &config.cop_limiter;
        let memory = Box::new(SystemMemory::new(
            limiter.memory_limit.bytes(),
            limiter.memory_source,
        ));
        WorkerState::with_parts(config, dfs, memory)
    }

    /// A worker reading `dfs` whose cop-limiter reads memory from `memory`: tests pass a
    /// source that reports high or low memory. `config` is assumed valid.
    pub fn with_parts(
        config: WorkerConfig,
        dfs: Arc<dyn Dfs>,
        memory: Box<dyn MemorySource>,
    ) -> WorkerState {
        metrics::init();
        kvengine::metrics::set_ship_buffer_pool_size(config.worker.ship_buffer_pool_size.bytes());
        let cache_bytes = config.worker.block_cache_size.bytes();
        let block_cache = (cache_bytes > 0).then(|| {
            let read_ahead = config.worker.read_ahead();
            // `config` is validated (`WorkerConfig::validate` checks the read-ahead settings),
            // so the cache refuses nothing here; were it to (a caller skipped validation),
            // say so, and scans load their own blocks.
            let cache = MokaBlockCache::with_read_ahead(cache_bytes, read_ahead)
                .unwrap_or_else(|e| {
                    tracing::error!(error = %e, "block read-ahead settings refused; scans load their own blocks");
                    MokaBlockCache::new(cache_bytes)
                });
            Arc::new(cache) as Arc<dyn sst::BlockCache>
        });
        let tables = TableCache::new(dfs, block_cache, config.worker.table_cache_size.bytes());
        let started = Instant::now();
        WorkerState {
            tables,
            config_text: config.render(),
            limiter: CopLimiter::new(&config.cop_limiter, memory, started),
            compaction_slots: crate::compaction::CompactionSlots::new(
                config.worker.max_compaction_jobs,
            ),
            config,
            started,
            bound: OnceLock::new(),
            requests: AtomicU64::new(0),
            in_flight: AtomicI64::new(0),
            client: OnceLock::new(),
            tls: None,
            known_servers: OnceLock::new(),
        }
    }

    pub fn config(&self) -> &WorkerConfig {
        &self.config
    }

    /// The effective config as TOML.
    pub fn config_text(&self) -> &str {
        &self.config_text
    }

    pub fn dfs(&self) -> &Arc<dyn Dfs> {
        self.tables.dfs()
    }

    pub fn block_cache(&self) -> Option<&Arc<dyn sst::BlockCache>> {
        self.tables.block_cache()
    }

    /// The open tables snapshot rebuilds take their files from.
    pub fn tables(&self) -> &TableCache {
        &self.tables
    }

    /// The HTTP client the delegate path asks servers with.
    pub fn client(&self) -> &HttpClient {
        self.client.get_or_init(|| {
            HttpClient::with_tls(self.config.max_request_bytes(), self.tls.as_deref())
                .with_meter(self.config.meter())
        })
    }

    /// TLS of the listener and the clients (`[security]`); none: plain HTTP.
    /// The servers the delegate path may call (`crate::known_servers`).
    pub fn known_servers(&self) -> &crate::known_servers::KnownServers {
        self.known_servers.get_or_init(|| {
            crate::known_servers::KnownServers::new(
                &self.config.worker.pd_endpoints,
                self.config.meter(),
                self.tls.as_ref(),
            )
        })
    }

    pub fn tls(&self) -> Option<&Arc<::node::tls::Tls>> {
        self.tls.as_ref()
    }

    pub fn compaction_slots(&self) -> &crate::compaction::CompactionSlots {
        &self.compaction_slots
    }

    pub fn limiter(&self) -> &CopLimiter {
        &self.limiter
    }

    /// `"local"` or `"s3"`: the kind of store the config names.
    pub fn dfs_kind(&self) -> &'static str {
        if self.config.dfs.s3_bucket.is_empty() {
            "local"
        } else {
            "s3"
        }
    }

    /// Records the address the listener is bound to (the first call wins).
    pub fn set_bound_addr(&self, addr: SocketAddr) {
        let _ = self.bound.set(addr);
    }

    /// The bound address once serving, else `worker.addr` as configured.
    pub fn addr(&self) -> String {
        match self.bound.get() {
            Some(a) => a.to_string(),
            None => self.config.worker.addr.clone(),
        }
    }

    pub fn uptime_secs(&self) -> u64 {
        self.started.elapsed().as_secs()
    }

    /// `/coprocessor` requests received since start.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// `/coprocessor` requests not yet answered.
    pub fn in_flight(&self) -> i64 {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Counts a request as received and in flight until the guard drops (also when the client
    /// goes away and the request's future is dropped).
    pub fn begin_request(self: &Arc<Self>) -> InFlight {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        metrics::IN_FLIGHT_REQUESTS.inc();
        InFlight {
            state: Arc::clone(self),
        }
    }
}

/// A request in flight; see [`WorkerState::begin_request`].
pub struct InFlight {
    state: Arc<WorkerState>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.state.in_flight.fetch_sub(1, Ordering::Relaxed);
        metrics::IN_FLIGHT_REQUESTS.dec();
    }
}
