//! `stratus-server`'s TOML config. Every key is optional (the defaults run a one-node cluster
//! on local directories); an unknown key fails start-up with its name.
//!
//! ```toml
//! [server]
//! addr = "127.0.0.1:20160"
//! data-dir = "./stratus-data/server"   # WAL, manifest, TSO high-water mark
//! node-id = 1                          # store id and file-id prefix (distinct per server sharing a store); 0 = allocated by the placement driver
//! labels = { zone = "a" }
//! ranges = [{ start = "", end = "" }]  # initial regions, first start only ('t\x80' escapes)
//! tso = true                           # exactly one server per cluster runs the TSO
//! tso-addr = ""                        # http://host:port of that server when tso = false
//! pd-endpoints = []                    # placement-driver URLs: timestamps and region ids from it (tso = false)
//! pd-heartbeat-interval = "2s"         # how often this server registers and reports its led regions
//! region-split-size = "256MiB"         # a region above this splits in two (0 = never)
//! split-check-interval = "10s"
//! shutdown-grace = "10s"               # in-flight requests get this long after SIGTERM
//!
//! [kvengine]
//! remote-coprocessor-addr = ""         # the worker's URL, e.g. http://127.0.0.1:19000/coprocessor
//! remote-coprocessor-workers = []      # or several: [{ addr = "http://…/coprocessor", zone = "a" }, …]
//! remote-coprocessor-worker-dead-ttl = "10s"   # a worker that failed is tried last this long
//! remote-coprocessor-min-blocks-size = "32MiB"
//! remote-coprocessor-num-ranges = 2048           # this many ranges go remote (0 = never by count)
//! remote-coprocessor-long-query-after = ["15s", "30s", "60s"]   # older queries: threshold /2, /4, /8
//! remote-coprocessor-timeout = "10s"   # one attempt
//! remote-coprocessor-max-retries = 2   # after a connection error, timeout or 503
//! remote-coprocessor-retry-backoff = "50ms"   # doubles per retry
//! remote-coprocessor-topn-max-pushdown-rows = 50000   # larger offloaded TopNs page (0 = off)
//! remote-coprocessor-lazy-pattern-duration = "30ms"    # patterns this slow locally go remote
//! remote-coprocessor-load-aware = true                 # candidates stay local while the CPU is idle
//! remote-coprocessor-load-aware-cpu-threshold = 0.8    # busy: this fraction of all cores
//! remote-coprocessor-load-aware-hold-time = "5s"       # a busy sample keeps offloading on this long
//! remote-coprocessor-load-aware-force-blocks-size = 0  # 0 = 4x min-blocks-size: remote regardless
//! remote-coprocessor-load-aware-force-num-ranges = 0   # 0 = 4x num-ranges: remote regardless
//! remote-coprocessor-load-aware-cpu-source = "process" # or "file:<path>" holding a number in [0, 1]
//! remote-coprocessor-load-aware-sample-interval = "1s"
//! memtable-size = "64MiB"
//! block-size = "64KiB"
//! block-cache-size = "256MiB"
//! ship-buffer-pool-size = "128MiB"     # memtable-data buffers kept for the next offload (0 = none)
//! read-ahead-blocks = 8                # blocks a scan has loaded ahead of it (0 = none)
//! read-ahead-threads = 1               # the block cache's loader threads (0 = none)
//! sst-format-version = 2               # 1 while nodes of a build before version 2 may still read the tables
//! wal-sync = "every-batch"             # "group-commit" (shared fsyncs) or "off" (a machine crash loses acknowledged writes)
//! flush-threads = 1
//! compaction-threads = 1
//!
//! [dfs]                                # see kvengine::dfs_section
//!
//! [raft]                               # see raftstore::config
//!
//! [http]                               # see node::http_limits
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;

use changeset::MemtableDataFormat;
use kvengine::{DfsConfig, DfsSection};
use node::config::{ConfigError, parse_escaped_key};
use node::http::HttpLimits;
use node::tls::SecurityConfig;
pub use raftstore::config::{PeerConfig, RaftConfig};
use serde::{Deserialize, Serialize};
use types::{ReadableDuration, ReadableSize, Zone};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct ServerConfig {
    pub server: ServerSection,
    pub kvengine: KvEngineSection,
    pub dfs: DfsSection,
    /// Replication: every region is a Raft group over the servers in `peers` (none: this
    /// server alone, every region a one-voter group).
    pub raft: RaftConfig,
    /// Bounds on the clients of the server's listener (`node::http_limits`).
    pub http: HttpLimits,
    /// TLS on the listener and every client of this node, and who may call what
    /// (`node::tls`). Off (plain HTTP) unless the paths are set.
    pub security: SecurityConfig,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct ServerSection {
    /// Listen address; port 0 picks a free one (printed at start).
    pub addr: String,
    /// Local directory of the WAL, the manifest and the TSO's high-water mark.
    pub data_dir: PathBuf,
    /// This server's store id, and the prefix of every SST file id it allocates (1..=65535):
    /// servers that share an object store need distinct ids. 0 with `pd-endpoints`: allocated
    /// by the placement driver on the first start and kept in `<data-dir>/STORE_ID` (a server
    /// joining a cluster whose founders name each other in `[raft] peers`).
    pub node_id: u16,
    /// Labels, `zone` among them: clients prefer compute nodes in their own zone.
    pub labels: BTreeMap<String, String>,
    /// The regions created on the first start (an engine that already has regions keeps its
    /// own). Keys may use `\xNN` escapes; ranges must not overlap.
    pub ranges: Vec<RangeConfig>,
    /// Whether this server runs the cluster's timestamp oracle.
    pub tso: bool,
    /// Base URL (`http://host:port`) of the server running the TSO, when `tso = false`.
    pub tso_addr: String,
    /// The placement driver's instances (`http://host:port`, every one of them): when set,
    /// timestamps come from its leader (batched) and new region ids from its allocator, so
    /// `tso` must be false and `tso-addr` empty.
    pub pd_endpoints: Vec<String>,
    /// How often the server sends the placement driver its heartbeat (registration, counts,
    /// the regions it leads). Shorter: the routing table follows leader changes sooner; the
    /// placement driver's `node-lease-ttl` must be several of these.
    pub pd_heartbeat_interval: ReadableDuration,
    /// A region whose data (memtables + files) exceeds this splits at its middle key (0 =
    /// never split by size).
    pub region_split_size: ReadableSize,
    pub split_check_interval: ReadableDuration,
    pub shutdown_grace: ReadableDuration,
}

impl Default for ServerSection {
    fn default() -> Self {
        ServerSection {
            addr: "127.0.0.1:20160".into(),
            data_dir: PathBuf::from("./stratus-data/server"),
            node_id: 1,
            labels: BTreeMap::new(),
            ranges: vec![RangeConfig::default()],
            tso: true,
            tso_addr: String::new(),
            pd_endpoints: Vec::new(),
            pd_heartbeat_interval: ReadableDuration::secs(2),
            region_split_size: ReadableSize::mib(256),
            split_check_interval: ReadableDuration::secs(10),
            shutdown_grace: ReadableDuration::secs(10),
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct RangeConfig {
    pub start: String,
    /// Exclusive; empty = unbounded.
    pub end: String,
}

/// One entry of `remote-coprocessor-workers`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct WorkerEndpoint {
    /// The worker's full URL, e.g. `http://10.0.0.5:19000/coprocessor`.
    pub addr: String,
    /// The worker's zone label ("" = none: never this server's zone).
    #[serde(with = "types::zone::optional")]
    pub zone: Option<Zone>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WalSync {
    /// fsync before every acknowledgement.
    EveryBatch,
    /// The same guarantee; concurrent writers share fsyncs.
    GroupCommit,
    /// Never fsync: a crash loses what the OS had not written back.
    Off,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct KvEngineSection {
    /// The worker's full URL; empty = never offload (unless `remote-coprocessor-workers` lists
    /// some). Kept for one-worker setups; set this or the list, not both.
    pub remote_coprocessor_addr: String,
    /// Several workers, each with its zone. An offload goes to an alive worker in this server's
    /// zone (`server.labels.zone`), the least busy (fewest offloads in flight from this server,
    /// ties in turn); to another zone only when no worker of this zone is alive; a server
    /// without a zone label treats all alike. Cross-zone offloads pay for the transfer of the
    /// shipped snapshot (and its latency) but keep the CPU off this server.
    pub remote_coprocessor_workers: Vec<WorkerEndpoint>,
    /// A worker that failed to answer (connection error, timeout, 503) counts as dead this
    /// long: it is tried only after every alive worker. Longer keeps traffic off a flapping
    /// worker; shorter brings a restarted same-zone worker back sooner.
    pub remote_coprocessor_worker_dead_ttl: ReadableDuration,
    /// Requests whose ranges cover at least this many bytes of SST blocks run remotely.
    pub remote_coprocessor_min_blocks_size: ReadableSize,
    /// Requests with at least this many ranges run remotely without a blocks estimate (0 =
    /// never by range count).
    pub remote_coprocessor_num_ranges: usize,
    /// Query ages after which the blocks-size threshold halves again (a query older than the
    /// first needs half the blocks, older than the second a quarter, ...); ascending.
    pub remote_coprocessor_long_query_after: Vec<ReadableDuration>,
    /// Time limit of one offload attempt (also bounded by the request's deadline).
    pub remote_coprocessor_timeout: ReadableDuration,
    /// Retries after a connection error, a timeout or a 503, before running locally.
    pub remote_coprocessor_max_retries: u32,
    /// Backoff before the first retry; doubles per retry.
    pub remote_coprocessor_retry_backoff: ReadableDuration,
    /// Largest worker response accepted (a bigger one falls back to local execution).
    pub remote_coprocessor_max_response_size: ReadableSize,
    /// An offloaded DAG whose root is a TopN with a limit above this many rows is sent with
    /// `paging_size = limit - 1` (unless the request pages below the limit already), so the
    /// worker answers resumable pages instead of building the whole heap; 0 disables. A
    /// row-count heuristic, not a memory limit: choose lower values for wide rows.
    pub remote_coprocessor_topn_max_pushdown_rows: u64,
    /// A DAG pattern whose recent local runs (at least 2 of the last 5) took this long on
    /// average is offloaded (`lazy_pattern_duration`; 0 disables). Its blocks twin,
    /// `lazy_pattern_blocks_size`, uses the min blocks size.
    pub remote_coprocessor_lazy_pattern_duration: ReadableDuration,
    /// Load-aware routing: a candidate for offloading stays local while this server's CPU is
    /// idle (`cpu_idle`), and goes remote when it is busy, when there is no CPU signal, or when
    /// it is big enough to force it. Off: every candidate goes remote.
    pub remote_coprocessor_load_aware: bool,
    /// Fraction of all cores (0..=1] this server must use to count as busy.
    pub remote_coprocessor_load_aware_cpu_threshold: f64,
    /// After a busy sample, candidates keep going remote for this long.
    pub remote_coprocessor_load_aware_hold_time: ReadableDuration,
    /// A candidate with a blocks estimate of at least this goes remote whatever the CPU says
    /// (0 = 4× `remote-coprocessor-min-blocks-size`).
    pub remote_coprocessor_load_aware_force_blocks_size: ReadableSize,
    /// A candidate with at least this many ranges goes remote whatever the CPU says (0 = 4×
    /// `remote-coprocessor-num-ranges`).
    pub remote_coprocessor_load_aware_force_num_ranges: usize,
    /// Where the CPU signal comes from: `"process"` (this process's CPU time) or
    /// `"file:<path>"` (a number in [0, 1] read from the file: an operator override).
    pub remote_coprocessor_load_aware_cpu_source: String,
    /// How often the CPU is sampled; a sample older than three periods is no signal.
    pub remote_coprocessor_load_aware_sample_interval: ReadableDuration,
    /// The newest memtable-data format (`changeset::memtable_data::Format`) this server writes
    /// (default: the newest this build has, 4). Each worker is sent the newest format both it
    /// and this server read (it advertises its own on every answer), so upgrades work in either
    /// order without this; set 1 to keep shipping the old format, e.g. while a rollback of
    /// workers is possible.
    pub remote_coprocessor_memtable_data_format: u8,
    /// Run this server's compactions on the workers (`remote_compaction`): the offload's
    /// workers (`remote-coprocessor-addr`/`-workers`, or the placement driver's
    /// registrations), this zone's first; a failed job costs one retry on another worker,
    /// then compacts here. Off (the default): every compaction runs here.
    pub remote_compaction: bool,
    /// Compactions whose inputs are smaller than this stay here (default `"1MiB"`): sending
    /// a job costs a round trip and the worker's reads of the inputs.
    pub remote_compaction_min_input_size: ReadableSize,
    /// How long a compaction job may take on the workers, both attempts together (default
    /// `"60s"`); past it the server compacts here. A worker stores no output after it, and
    /// the outputs of a failed job are deleted once it passed twice over.
    pub remote_compaction_timeout: ReadableDuration,
    /// Keep compactions here while this server's CPU is idle (the offload's CPU signal,
    /// `remote-coprocessor-load-aware-*`); off (the default): always send them.
    pub remote_compaction_load_aware: bool,
    pub memtable_size: ReadableSize,
    pub block_size: ReadableSize,
    /// A compaction cuts its output tables at about this size (default `"32MiB"`, at least
    /// 4KiB). Smaller files make a compaction touch less of the next level and stream its
    /// outputs to the object store sooner; more files mean more object-store calls and open
    /// tables.
    pub target_file_size: ReadableSize,
    pub block_cache_size: ReadableSize,
    /// Bytes of buffers kept for writing the next offload's memtable rows (default `"128MiB"`,
    /// 0 = none), idle or in use (`changeset::ship_buffers`, process-wide): what it keeps stays
    /// resident, and what it saves is the kernel zeroing fresh pages for each offload.
    pub ship_buffer_pool_size: ReadableSize,
    /// Blocks of a compressed table a sequential scan keeps queued ahead of the one it reads
    /// (default 8, at most 256; 0 = none), for the block cache's loader threads to read and
    /// decompress on another core while the scan works (`kvengine::MokaBlockCache`). Held in
    /// the block cache like any block.
    pub read_ahead_blocks: usize,
    /// The block cache's loader threads (default 1, at most 64; 0 = no read-ahead). One keeps
    /// up with a scan; a server running several cold scans at once may use more.
    pub read_ahead_threads: usize,
    /// The SST format version this server's flushes and compactions write, local or on a
    /// worker (default: the newest this build has, 2: ~8 bytes less per entry than 1). Tables
    /// are not negotiated: every server and worker that may open them (replicas share the
    /// object store) must read the version. During a rolling upgrade from a build that reads
    /// only 1, set 1 until every node runs this build.
    pub sst_format_version: u16,
    pub wal_sync: WalSync,
    pub flush_threads: usize,
    pub compaction_threads: usize,
}

impl KvEngineSection {
    /// The block cache's read-ahead, from `read-ahead-blocks` and `read-ahead-threads`.
    pub fn read_ahead(&self) -> kvengine::ReadAhead {
        kvengine::ReadAhead {
            blocks: self.read_ahead_blocks,
            threads: self.read_ahead_threads,
        }
    }
}

impl Default for KvEngineSection {
    fn default() -> Self {
        KvEngineSection {
            remote_coprocessor_addr: String::new(),
            remote_coprocessor_workers: Vec::new(),
            remote_coprocessor_worker_dead_ttl: ReadableDuration::secs(10),
            remote_coprocessor_min_blocks_size: ReadableSize::mib(32),
            remote_coprocessor_num_ranges: 2048,
            remote_coprocessor_long_query_after: vec![
                ReadableDuration::secs(15),
                ReadableDuration::secs(30),
                ReadableDuration::secs(60),
            ],
            remote_coprocessor_timeout: ReadableDuration::secs(10),
            remote_coprocessor_max_retries: 2,
            remote_coprocessor_retry_backoff: ReadableDuration::millis(50),
            remote_coprocessor_max_response_size: ReadableSize::mib(256),
            remote_coprocessor_topn_max_pushdown_rows: 50_000,
            remote_coprocessor_lazy_pattern_duration: ReadableDuration::millis(30),
            remote_coprocessor_load_aware: true,
            remote_coprocessor_load_aware_cpu_threshold: 0.8,
            remote_coprocessor_load_aware_hold_time: ReadableDuration::secs(5),
            remote_coprocessor_load_aware_force_blocks_size: ReadableSize(0),
            remote_coprocessor_load_aware_force_num_ranges: 0,
            remote_coprocessor_load_aware_cpu_source: "process".into(),
            remote_coprocessor_load_aware_sample_interval: ReadableDuration::secs(1),
            remote_coprocessor_memtable_data_format: MemtableDataFormat::NEWEST.as_u8(),
            remote_compaction: false,
            remote_compaction_min_input_size: ReadableSize::mib(1),
            remote_compaction_timeout: ReadableDuration::secs(60),
            remote_compaction_load_aware: false,
            memtable_size: ReadableSize::mib(64),
            block_size: ReadableSize::kib(64),
            target_file_size: ReadableSize::mib(32),
            block_cache_size: ReadableSize::mib(256),
            ship_buffer_pool_size: ReadableSize(changeset::ship_buffers::DEFAULT_MAX_BYTES as u64),
            read_ahead_blocks: kvengine::ReadAhead::DEFAULT.blocks,
            read_ahead_threads: kvengine::ReadAhead::DEFAULT.threads,
            sst_format_version: kvengine::TableFormatVersion::NEWEST.as_u16(),
            wal_sync: WalSync::EveryBatch,
            flush_threads: 1,
            compaction_threads: 1,
        }
    }
}

impl ServerConfig {
    /// The offload decision's settings.
    pub fn offload_policy(&self) -> crate::offload_policy::OffloadPolicy {
        let kv = &self.kvengine;
        crate::offload_policy::OffloadPolicy {
            min_blocks_size: kv.remote_coprocessor_min_blocks_size.bytes(),
            num_ranges: kv.remote_coprocessor_num_ranges,
            long_query_after: kv
                .remote_coprocessor_long_query_after
                .iter()
                .map(|d| d.duration())
                .collect(),
            lazy_pattern_duration: kv.remote_coprocessor_lazy_pattern_duration.duration(),
            load_aware: kv.remote_coprocessor_load_aware.then(|| {
                let or_4x = |v: u64, base: u64| if v == 0 { base.saturating_mul(4) } else { v };
                crate::offload_policy::LoadAware {
                    force_blocks_size: or_4x(
                        kv.remote_coprocessor_load_aware_force_blocks_size.bytes(),
                        kv.remote_coprocessor_min_blocks_size.bytes(),
                    ),
                    force_num_ranges: or_4x(
                        kv.remote_coprocessor_load_aware_force_num_ranges as u64,
                        kv.remote_coprocessor_num_ranges as u64,
                    ) as usize,
                }
            }),
        }
    }

    /// The workers this server offloads to: `remote-coprocessor-workers`, or the single
    /// `remote-coprocessor-addr` (no zone); empty = never offload.
    /// `kvengine.remote-coprocessor-memtable-data-format` (checked by
    /// [`ServerConfig::validate`]; the newest if not).
    pub fn memtable_data_format(&self) -> MemtableDataFormat {
        MemtableDataFormat::from_u8(self.kvengine.remote_coprocessor_memtable_data_format)
            .unwrap_or(MemtableDataFormat::NEWEST)
    }

    pub fn offload_workers(&self) -> Vec<WorkerEndpoint> {
        let kv = &self.kvengine;
        if kv.remote_coprocessor_addr.is_empty() {
            kv.remote_coprocessor_workers.clone()
        } else {
            vec![WorkerEndpoint {
                addr: kv.remote_coprocessor_addr.clone(),
                zone: None,
            }]
        }
    }

    /// This server's `zone` label (`None`: no label, or the empty one).
    pub fn zone(&self) -> Option<Zone> {
        self.server.labels.get("zone").and_then(Zone::label)
    }

    /// Who this server counts its network bytes as (its zone, the server role): every HTTP
    /// client it uses and its router carry it.
    pub fn meter(&self) -> node::Meter {
        node::Meter::new(self.zone(), wire::traffic::Role::Server)
    }

    /// The CPU signal's source (validated by [`ServerConfig::validate`]).
    pub fn cpu_source(&self) -> Result<crate::cpu_load::CpuSource, ConfigError> {
        crate::cpu_load::CpuSource::parse(&self.kvengine.remote_coprocessor_load_aware_cpu_source)
            .map_err(|e| {
                ConfigError::invalid("kvengine.remote-coprocessor-load-aware-cpu-source", e)
            })
    }

    /// Checks what parsing cannot: values that parse but cannot work.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.http.validate()?;
        self.security.validate()?;
        let sec = &self.security;
        sec.check_urls(
            "server.pd-endpoints",
            self.server.pd_endpoints.iter().map(String::as_str),
        )?;
        sec.check_urls("server.tso-addr", [self.server.tso_addr.as_str()])?;
        sec.check_urls(
            "raft.peers",
            self.raft.peers.iter().map(|p| p.addr.as_str()),
        )?;
        sec.check_urls(
            "kvengine.remote-coprocessor-addr",
            [self.kvengine.remote_coprocessor_addr.as_str()],
        )?;
        sec.check_urls(
            "kvengine.remote-coprocessor-workers",
            self.kvengine
                .remote_coprocessor_workers
                .iter()
                .map(|w| w.addr.as_str()),
        )?;
        let format = self.kvengine.remote_coprocessor_memtable_data_format;
        if MemtableDataFormat::from_u8(format).is_none() {
            return Err(ConfigError::invalid(
                "kvengine.remote-coprocessor-memtable-data-format",
                format!(
                    "expected 1 to {}, found {format}",
                    MemtableDataFormat::NEWEST.as_u8()
                ),
            ));
        }
        let kv = &self.kvengine;
        if kvengine::TableFormatVersion::from_u16(kv.sst_format_version).is_none() {
            return Err(ConfigError::invalid(
                "kvengine.sst-format-version",
                format!(
                    "expected 1 to {}, found {}",
                    kvengine::TableFormatVersion::NEWEST.as_u16(),
                    kv.sst_format_version
                ),
            ));
        }
        if kv.remote_compaction
            && self.offload_workers().is_empty()
            && self.server.pd_endpoints.is_empty()
        {
            return Err(ConfigError::invalid(
                "kvengine.remote-compaction",
                "expected workers to send compactions to (kvengine.remote-coprocessor-addr, \
                 kvengine.remote-coprocessor-workers, or server.pd-endpoints to learn them), \
                 found none",
            ));
        }
        if kv.remote_compaction_timeout.duration().is_zero() {
            return Err(ConfigError::invalid(
                "kvengine.remote-compaction-timeout",
                "expected a positive duration, found 0",
            ));
        }
        if self.server.pd_heartbeat_interval.duration().is_zero() {
            return Err(ConfigError::invalid(
                "server.pd-heartbeat-interval",
                "expected more than 0, found 0",
            ));
        }
        for url in &self.server.pd_endpoints {
            if !is_http_url(url) {
                return Err(ConfigError::invalid(
                    "server.pd-endpoints",
                    format!("expected an http:// or https:// URL, found {url:?}"),
                ));
            }
        }
        if !self.server.pd_endpoints.is_empty() {
            if self.server.tso {
                return Err(ConfigError::invalid(
                    "server.tso",
                    "expected false when server.pd-endpoints is set (the placement driver runs the TSO), found true",
                ));
            }
            if !self.server.tso_addr.is_empty() {
                return Err(ConfigError::invalid(
                    "server.tso-addr",
                    format!(
                        "expected nothing when server.pd-endpoints is set, found {:?}",
                        self.server.tso_addr
                    ),
                ));
            }
        } else if !self.server.tso && self.server.tso_addr.is_empty() {
            return Err(ConfigError::invalid(
                "server.tso-addr",
                "expected the TSO server's URL (or server.pd-endpoints) when server.tso = false, found nothing",
            ));
        }
        if !self.server.tso_addr.is_empty() && !is_http_url(&self.server.tso_addr) {
            return Err(ConfigError::invalid(
                "server.tso-addr",
                format!(
                    "expected an http:// or https:// URL, found {:?}",
                    self.server.tso_addr
                ),
            ));
        }
        let addr = &self.kvengine.remote_coprocessor_addr;
        if !addr.is_empty() && !is_http_url(addr) {
            return Err(ConfigError::invalid(
                "kvengine.remote-coprocessor-addr",
                format!("expected an http:// or https:// URL, found {addr:?}"),
            ));
        }
        let workers = &self.kvengine.remote_coprocessor_workers;
        if !addr.is_empty() && !workers.is_empty() {
            return Err(ConfigError::invalid(
                "kvengine.remote-coprocessor-workers",
                "expected either remote-coprocessor-addr or remote-coprocessor-workers, found both",
            ));
        }
        for (i, w) in workers.iter().enumerate() {
            if !is_http_url(&w.addr) {
                return Err(ConfigError::invalid(
                    &format!("kvengine.remote-coprocessor-workers[{i}].addr"),
                    format!("expected an http:// or https:// URL, found {:?}", w.addr),
                ));
            }
        }
        let after = &self.kvengine.remote_coprocessor_long_query_after;
        if after.windows(2).any(|w| w[0] >= w[1]) {
            return Err(ConfigError::invalid(
                "kvengine.remote-coprocessor-long-query-after",
                format!(
                    "expected ascending durations, found [{}]",
                    after
                        .iter()
                        .map(|d| d.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
        let ratio = self.kvengine.remote_coprocessor_load_aware_cpu_threshold;
        if !(ratio > 0.0 && ratio <= 1.0) {
            return Err(ConfigError::invalid(
                "kvengine.remote-coprocessor-load-aware-cpu-threshold",
                format!("expected a fraction in (0, 1], found {ratio}"),
            ));
        }
        if self
            .kvengine
            .remote_coprocessor_load_aware_sample_interval
            .duration()
            .is_zero()
        {
            return Err(ConfigError::invalid(
                "kvengine.remote-coprocessor-load-aware-sample-interval",
                "expected a positive duration, found 0",
            ));
        }
        self.cpu_source()?;
        if self.kvengine.memtable_size.bytes() < 1024 {
            return Err(ConfigError::invalid(
                "kvengine.memtable-size",
                format!(
                    "expected at least 1KiB, found {}",
                    self.kvengine.memtable_size
                ),
            ));
        }
        if self.kvengine.block_size.bytes() < 256 {
            return Err(ConfigError::invalid(
                "kvengine.block-size",
                format!("expected at least 256B, found {}", self.kvengine.block_size),
            ));
        }
        if self.kvengine.target_file_size.bytes() < 4096 {
            return Err(ConfigError::invalid(
                "kvengine.target-file-size",
                format!(
                    "expected at least 4KiB, found {}",
                    self.kvengine.target_file_size
                ),
            ));
        }
        if let Err((setting, what)) = self.kvengine.read_ahead().check() {
            return Err(ConfigError::invalid(
                &format!("kvengine.{}", setting.key()),
                what,
            ));
        }
        if self.kvengine.flush_threads == 0 {
            return Err(ConfigError::invalid(
                "kvengine.flush-threads",
                "expected at least 1, found 0",
            ));
        }
        self.initial_ranges()?;
        self.dfs_config()?;
        self.raft.validate()?;
        if !self.raft.peers.is_empty() {
            // 0: allocated by the placement driver on the first start (`store_ident`), for a
            // server joining the founders listed in `peers`.
            if self.server.node_id == 0 {
                if self.server.pd_endpoints.is_empty() {
                    return Err(ConfigError::invalid(
                        "server.node-id",
                        "expected the id this server has in raft.peers (1 or more), or 0 with pd-endpoints set, found 0 without pd-endpoints",
                    ));
                }
            } else {
                self.raft.check_member(self.store_id())?;
            }
        }
        Ok(())
    }

    /// This server's Raft store id: its `node-id` when it has peers, 1 when it is alone.
    pub fn store_id(&self) -> u64 {
        if self.raft.peers.is_empty() {
            raftstore::STANDALONE_STORE_ID
        } else {
            u64::from(self.server.node_id)
        }
    }

    /// The object store to open: `[dfs]`.
    pub fn dfs_config(&self) -> Result<DfsConfig, ConfigError> {
        self.dfs
            .to_dfs_config()
            .map_err(|e| ConfigError::invalid(e.key, e.message))
    }

    /// `[server] ranges` as bytes, sorted, checked for overlaps and empty ranges.
    pub fn initial_ranges(&self) -> Result<Vec<KeySpan>, ConfigError> {
        let mut out = Vec::new();
        for (i, r) in self.server.ranges.iter().enumerate() {
            let key = |what: &str, s: &str| {
                parse_escaped_key(s)
                    .map_err(|e| ConfigError::invalid(&format!("server.ranges[{i}].{what}"), e))
            };
            let (start, end) = (key("start", &r.start)?, key("end", &r.end)?);
            if !end.is_empty() && start >= end {
                return Err(ConfigError::invalid(
                    &format!("server.ranges[{i}]"),
                    format!(
                        "expected start < end, found start={:?} end={:?}",
                        r.start, r.end
                    ),
                ));
            }
            out.push((start, end));
        }
        if out.len() as u64 > wire::pd::RESERVED_IDS {
            // Replicated regions are numbered by position: those numbers must stay below the
            // ids the placement driver allocates.
            return Err(ConfigError::invalid(
                "server.ranges",
                format!(
                    "expected at most {} initial ranges, found {}",
                    wire::pd::RESERVED_IDS,
                    out.len()
                ),
            ));
        }
        out.sort();
        for w in out.windows(2) {
            if w[0].1.is_empty() || w[0].1 > w[1].0 {
                return Err(ConfigError::invalid(
                    "server.ranges",
                    "expected ranges that do not overlap, found two that do",
                ));
            }
        }
        Ok(out)
    }
}

/// `[start, end)` as bytes; empty end = unbounded.
pub type KeySpan = (Vec<u8>, Vec<u8>);

fn is_http_url(s: &str) -> bool {
    s.starts_with("http://") || s.starts_with("https://")
}

#[cfg(test)]
mod tests {
    use super::*;
    use node::config::{parse, render};

    #[test]
    fn defaults_are_valid_and_render_back() {
        let c = ServerConfig::default();
        c.validate().unwrap();
        let again: ServerConfig = parse(&render(&c), "rendered").unwrap();
        assert_eq!(again, c);
    }

    #[test]
    fn read_ahead_settings_reach_the_engine_and_out_of_bounds_ones_are_named() {
        assert_eq!(
            ServerConfig::default().kvengine.read_ahead(),
            kvengine::ReadAhead::DEFAULT
        );
        let c: ServerConfig = parse(
            "[kvengine]\nread-ahead-blocks = 0\nread-ahead-threads = 2\n",
            "s.toml",
        )
        .unwrap();
        c.validate().unwrap();
        assert_eq!(
            c.kvengine.read_ahead(),
            kvengine::ReadAhead {
                blocks: 0,
                threads: 2
            }
        );
        let c: ServerConfig = parse("[kvengine]\nread-ahead-blocks = 300\n", "s.toml").unwrap();
        let e = c.validate().unwrap_err().to_string();
        assert!(
            e.contains("kvengine.read-ahead-blocks") && e.contains("found=300"),
            "{e}"
        );
        let c: ServerConfig = parse("[kvengine]\nread-ahead-threads = 65\n", "s.toml").unwrap();
        let e = c.validate().unwrap_err().to_string();
        assert!(
            e.contains("kvengine.read-ahead-threads") && e.contains("found=65"),
            "{e}"
        );
    }

    #[test]
    fn the_ship_buffer_pool_size_is_a_size_and_defaults_to_the_pools_bound() {
        let c = ServerConfig::default();
        assert_eq!(
            c.kvengine.ship_buffer_pool_size.bytes(),
            changeset::ship_buffers::DEFAULT_MAX_BYTES as u64
        );
        let c: ServerConfig =
            parse("[kvengine]\nship-buffer-pool-size = \"16MiB\"\n", "s.toml").unwrap();
        assert_eq!(c.kvengine.ship_buffer_pool_size.bytes(), 16 << 20);
        let e = parse::<ServerConfig>("[kvengine]\nship-buffer-pool-size = \"lots\"\n", "s.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("ship-buffer-pool-size"), "{e}");
    }

    #[test]
    fn unknown_keys_are_named() {
        let e = parse::<ServerConfig>("[kvengine]\nremote-coprocesor-addr = \"\"\n", "s.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("remote-coprocesor-addr"), "{e}");
        let e = parse::<ServerConfig>("[serverr]\n", "s.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("serverr"), "{e}");
    }

    #[test]
    fn bad_values_are_named() {
        let e = parse::<ServerConfig>(
            "[kvengine]\nremote-coprocessor-min-blocks-size = \"huge\"\n",
            "s.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("remote-coprocessor-min-blocks-size"), "{e}");
        let c: ServerConfig = parse(
            "[kvengine]\nremote-coprocessor-addr = \"127.0.0.1:1\"\n",
            "s.toml",
        )
        .unwrap();
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("kvengine.remote-coprocessor-addr"), "{e}");
        let c: ServerConfig = parse("[server]\ntso = false\n", "s.toml").unwrap();
        assert!(
            c.validate()
                .unwrap_err()
                .to_string()
                .contains("server.tso-addr")
        );
    }

    #[test]
    fn the_sst_format_version_is_one_this_build_writes() {
        let c: ServerConfig = parse("[kvengine]\nsst-format-version = 3\n", "s.toml").unwrap();
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("kvengine.sst-format-version"), "{e}");
        assert!(e.contains("expected 1 to 2, found 3"), "{e}");
        let c: ServerConfig = parse("[kvengine]\nsst-format-version = 1\n", "s.toml").unwrap();
        c.validate().unwrap();
        assert_eq!(c.kvengine.sst_format_version, 1);
        assert_eq!(
            ServerConfig::default().kvengine.sst_format_version,
            kvengine::TableFormatVersion::NEWEST.as_u16()
        );
    }

    #[test]
    fn pd_endpoints_replace_the_servers_own_tso() {
        let with_tso: ServerConfig = parse(
            "[server]\npd-endpoints = [\"http://127.0.0.1:2479\"]\n",
            "s.toml",
        )
        .unwrap();
        let e = with_tso.validate().unwrap_err().to_string();
        assert!(
            e.contains("server.tso") && e.contains("placement driver"),
            "{e}"
        );
        let ok: ServerConfig = parse(
            "[server]\ntso = false\npd-endpoints = [\"http://127.0.0.1:2479\"]\n",
            "s.toml",
        )
        .unwrap();
        ok.validate().unwrap();
        let bad: ServerConfig = parse(
            "[server]\ntso = false\npd-endpoints = [\"127.0.0.1:2479\"]\n",
            "s.toml",
        )
        .unwrap();
        let e = bad.validate().unwrap_err().to_string();
        assert!(e.contains("server.pd-endpoints"), "{e}");
        let zero: ServerConfig = parse(
            "[server]\ntso = false\npd-endpoints = [\"http://127.0.0.1:2479\"]\npd-heartbeat-interval = \"0s\"\n",
            "s.toml",
        )
        .unwrap();
        let e = zero.validate().unwrap_err().to_string();
        assert!(e.contains("server.pd-heartbeat-interval"), "{e}");
    }

    #[test]
    fn a_bad_dfs_section_fails_validation_with_its_key_and_reason() {
        let c: ServerConfig = parse("[dfs]\ns3-bucket = \"ab\"\n", "s.toml").unwrap();
        assert_eq!(
            c.validate().unwrap_err().to_string(),
            "invalid config value dfs.s3-bucket: expected a bucket name of at least 3 \
             characters, found \"ab\""
        );
    }

    #[test]
    fn remote_compaction_needs_workers_and_a_timeout() {
        let none: ServerConfig = parse("[kvengine]\nremote-compaction = true\n", "s.toml").unwrap();
        let e = none.validate().unwrap_err().to_string();
        assert!(
            e.contains("kvengine.remote-compaction") && e.contains("found none"),
            "{e}"
        );
        let with_worker: ServerConfig = parse(
            "[kvengine]\nremote-compaction = true\nremote-coprocessor-addr = \"http://127.0.0.1:1/coprocessor\"\n",
            "s.toml",
        )
        .unwrap();
        with_worker.validate().unwrap();
        let learned: ServerConfig = parse(
            "[server]\npd-endpoints = [\"http://127.0.0.1:2479\"]\ntso = false\n[kvengine]\nremote-compaction = true\n",
            "s.toml",
        )
        .unwrap();
        learned.validate().unwrap();
        let zero: ServerConfig =
            parse("[kvengine]\nremote-compaction-timeout = \"0s\"\n", "s.toml").unwrap();
        let e = zero.validate().unwrap_err().to_string();
        assert!(e.contains("kvengine.remote-compaction-timeout"), "{e}");
        let tiny: ServerConfig =
            parse("[kvengine]\ntarget-file-size = \"1KiB\"\n", "s.toml").unwrap();
        let e = tiny.validate().unwrap_err().to_string();
        assert!(e.contains("kvengine.target-file-size"), "{e}");
    }

    #[test]
    fn the_issue_example_block_parses() {
        let c: ServerConfig = parse(
            "[kvengine]\nremote-coprocessor-addr = \"http://127.0.0.1:19000/coprocessor\"\nremote-coprocessor-min-blocks-size = 32000000\nremote-coprocessor-topn-max-pushdown-rows = 50000\n",
            "s.toml",
        )
        .unwrap();
        c.validate().unwrap();
        assert_eq!(
            c.kvengine.remote_coprocessor_min_blocks_size.bytes(),
            32_000_000
        );
        assert_eq!(c.kvengine.remote_coprocessor_topn_max_pushdown_rows, 50_000);
    }

    #[test]
    fn several_workers_parse_with_their_zones() {
        let c: ServerConfig = parse(
            "[server]\nlabels = { zone = \"a\" }\n[kvengine]\nremote-coprocessor-workers = [{ addr = \"http://127.0.0.1:1/coprocessor\", zone = \"a\" }, { addr = \"http://127.0.0.1:2/coprocessor\", zone = \"b\" }]\nremote-coprocessor-worker-dead-ttl = \"3s\"\n",
            "s.toml",
        )
        .unwrap();
        c.validate().unwrap();
        assert_eq!(c.zone(), Zone::label("a"));
        let workers = c.offload_workers();
        assert_eq!(workers.len(), 2);
        assert_eq!(workers[1].zone, Zone::label("b"));
        let again: ServerConfig = parse(&render(&c), "rendered").unwrap();
        assert_eq!(again, c);
    }

    #[test]
    fn the_single_worker_address_is_a_worker_without_zone() {
        let c: ServerConfig = parse(
            "[kvengine]\nremote-coprocessor-addr = \"http://127.0.0.1:1/coprocessor\"\n",
            "s.toml",
        )
        .unwrap();
        assert_eq!(
            c.offload_workers(),
            vec![WorkerEndpoint {
                addr: "http://127.0.0.1:1/coprocessor".into(),
                zone: None
            }]
        );
    }

    #[test]
    fn workers_and_a_single_address_together_or_bad_urls_are_named() {
        let c: ServerConfig = parse(
            "[kvengine]\nremote-coprocessor-addr = \"http://127.0.0.1:1/coprocessor\"\nremote-coprocessor-workers = [{ addr = \"http://127.0.0.1:2/coprocessor\" }]\n",
            "s.toml",
        )
        .unwrap();
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("kvengine.remote-coprocessor-workers"), "{e}");
        let c: ServerConfig = parse(
            "[kvengine]\nremote-coprocessor-workers = [{ addr = \"127.0.0.1:2\", zone = \"a\" }]\n",
            "s.toml",
        )
        .unwrap();
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("remote-coprocessor-workers[0].addr"), "{e}");
    }

    #[test]
    fn ranges_parse_escapes_and_reject_overlaps() {
        let c: ServerConfig = parse(
            "[server]\nranges = [{ start = '', end = 't\\x80' }, { start = 't\\x80', end = '' }]\n",
            "s.toml",
        )
        .unwrap();
        assert_eq!(
            c.initial_ranges().unwrap(),
            vec![(vec![], b"t\x80".to_vec()), (b"t\x80".to_vec(), vec![])]
        );
        let c: ServerConfig = parse(
            "[server]\nranges = [{ start = '', end = 'b' }, { start = 'a', end = '' }]\n",
            "s.toml",
        )
        .unwrap();
        assert!(
            c.validate()
                .unwrap_err()
                .to_string()
                .contains("server.ranges")
        );
    }
}
