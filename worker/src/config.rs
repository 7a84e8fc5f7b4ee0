//! The worker's TOML config: a `[worker]` section of its own, the `[dfs]` section it shares
//! with the servers (it must name the same store they write, or every rebuild fails with a
//! missing file), the `[cop-limiter]` section (memory back-pressure and per-keyspace
//! throughput, [`crate::cop_limiter`]) and one top-level key, `cop-topn-max-pushdown-rows`
//! (written before any section, as TOML requires).
//!
//! ```toml
//! cop-topn-max-pushdown-rows = 0
//!
//! [worker]
//! addr = "127.0.0.1:19000"
//! labels = { zone = "" }
//! max-request-size = "1GiB"
//! block-cache-size = "256MiB"
//! table-cache-size = "64MiB"        # open SST tables kept between rebuilds (0 = none)
//! ship-buffer-pool-size = "128MiB"  # received memtable rows' arenas kept for the next rebuild
//! read-ahead-blocks = 8             # blocks a scan has loaded ahead of it (0 = none)
//! read-ahead-threads = 1            # the block cache's loader threads (0 = none)
//! cache-dir = "./stratus-data/worker-cache"
//! cache-capacity = "10GiB"
//! shutdown-grace = "10s"
//! delegate-timeout = "10s"
//! pd-endpoints = []                # the placement driver: register here (empty: not registered)
//! pd-heartbeat-interval = "2s"
//! advertise-url = ""              # the URL it registers (empty: http:// + the bound address)
//!
//! [dfs]
//! local-dir = "./stratus-data/dfs"
//!
//! [cop-limiter]
//! high-mem-ratio = 0.8
//! wait-min-duration = "100ms"
//! wait-max-duration = "3s"
//! sample-ttl = "60s"
//! memory-limit = 0
//! memory-source = "auto"
//!
//! [http]                          # see node::http_limits
//! ```
//!
//! Every key is optional; an unknown key or a bad value is an error that names the key.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use changeset::MemtableDataFormat;
use kvengine::{CacheConfig, DfsConfig, DfsSection};
use node::ConfigError;
use node::http::HttpLimits;
use node::tls::SecurityConfig;
use serde::{Deserialize, Serialize};
use types::{ReadableDuration, ReadableSize};

/// The whole config file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct WorkerConfig {
    /// TopN paging for requests from servers that do not page large TopNs themselves (default
    /// 0 = off). When non-zero, a request that arrives without finite paging (`0 < paging_size
    /// < u32::MAX`) and whose DAG ends in a TopN with a limit above this many rows runs with
    /// `paging_size = limit - 1`: the worker answers resumable pages of source rows instead of
    /// holding the whole heap (see [`node::topn_paging`]). Requests with finite paging pass
    /// through untouched. Meant for rolling upgrades: set it on the workers, upgrade the
    /// servers (which then apply `remote-coprocessor-topn-max-pushdown-rows` themselves), then
    /// set it back to 0. A row-count heuristic, not a memory limit: wide rows want a lower one.
    ///
    /// The only top-level key: it comes first so that the rendered config stays valid TOML
    /// (plain keys must precede every `[section]`).
    pub cop_topn_max_pushdown_rows: u64,
    pub worker: WorkerSection,
    /// The object store holding the SST files: the same one the servers write.
    pub dfs: DfsSection,
    pub cop_limiter: CopLimiterSection,
    /// Bounds on the clients of the worker's listener (`node::http_limits`).
    pub http: HttpLimits,
    /// TLS on the listener and every client of this node, and who may call what
    /// (`node::tls`). Off (plain HTTP) unless the paths are set.
    pub security: SecurityConfig,
}

/// The `[worker]` section.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct WorkerSection {
    /// Address to listen on (default `"127.0.0.1:19000"`; port 0 picks a free port, and the
    /// bound address is printed as `stratus-worker listening on http://ADDR`).
    pub addr: String,
    /// Labels servers and clients select workers by, above all `zone` (default
    /// `{ zone = "" }`: no zone, so the worker is nobody's same-zone choice).
    pub labels: BTreeMap<String, String>,
    /// Largest `/coprocessor` body accepted (default `"1GiB"`); a larger one is answered 413
    /// without being read. The body holds the shipped memtable rows, so this bounds the memory
    /// one request can pin: raise it only together with the servers' limit on rows they ship,
    /// and mind that concurrent requests add up.
    pub max_request_size: ReadableSize,
    /// Bytes of decompressed SST blocks kept in memory, shared by all requests (default
    /// `"256MiB"`; 0 = no cache). Requests over the same region reuse each other's blocks; a
    /// bigger cache trades memory for fewer decompressions and local-file reads.
    pub block_cache_size: ReadableSize,
    /// Bytes of open SST tables kept between snapshot rebuilds (default `"64MiB"`; 0 = none):
    /// their decoded indexes, filters and properties, and whole files only when they were
    /// downloaded rather than read from local disk (`kvengine::TableCache`). Requests over the
    /// same region name the same files, so a kept table spares every later rebuild its open.
    /// Each table counts at least 256 KiB, which bounds the files kept open to this / 256
    /// KiB (256 by default); a table unused for 10 minutes is closed. A kept table whose file
    /// the store deleted holds its disk space until it is closed. The worker warns at start
    /// when these files and `[http] max-connections` exceed the process's open-file limit.
    pub table_cache_size: ReadableSize,
    /// Bytes of buffers kept for rebuilding the next snapshot's memtable rows (default
    /// `"128MiB"`, 0 = none), idle or in use (`changeset::ship_buffers`, process-wide): what
    /// it keeps stays resident, and what it saves is the kernel zeroing fresh pages for each
    /// rebuild.
    pub ship_buffer_pool_size: ReadableSize,
    /// Blocks of a compressed table a sequential scan keeps queued ahead of the one it reads
    /// (default 8, at most 256; 0 = none), for the block cache's loader threads to read and
    /// decompress on another core while the scan works (`kvengine::MokaBlockCache`). Held in
    /// the block cache like any block; no effect without one.
    pub read_ahead_blocks: usize,
    /// The block cache's loader threads (default 1, at most 64; 0 = no read-ahead). One keeps
    /// up with a scan; a worker running several cold requests at once may use more.
    pub read_ahead_threads: usize,
    /// A local directory of whole SST files in front of S3 (default
    /// `"./stratus-data/worker-cache"`). Used only when `[dfs]` is S3 and `dfs.cache-dir` is
    /// empty; empty = read S3 directly on every open (every rebuild then downloads its files).
    pub cache_dir: PathBuf,
    /// Bytes of files kept in `cache-dir` (default `"10GiB"`); least recently used files are
    /// evicted beyond it. It should hold the working set of the regions this worker serves, or
    /// each request re-downloads what the previous one evicted.
    pub cache_capacity: ReadableSize,
    /// On SIGTERM/SIGINT, how long in-flight requests may take to finish before they are cut
    /// off (default `"10s"`). Longer drains big scans; shorter restarts faster.
    pub shutdown_grace: ReadableDuration,
    /// Delegate path (`POST /delegate/coprocessor`): how long the worker waits for the owning
    /// server's `POST /delegate` answer (default `"10s"`; also bounded by the request's
    /// deadline). The answer carries the memtable rows a read needs, so a large memtable over
    /// a slow link needs longer; past it the client gets a 502 and retries elsewhere. Its size
    /// is bounded by `max-request-size`.
    pub delegate_timeout: ReadableDuration,
    /// The placement driver's instances (`http://host:port`): when set, the worker registers
    /// itself there (URL and labels, renewed every `pd-heartbeat-interval`), which is how
    /// servers and clients learn the live workers. Empty: not registered.
    pub pd_endpoints: Vec<String>,
    /// How often the worker renews its registration.
    pub pd_heartbeat_interval: ReadableDuration,
    /// The base URL servers and clients reach this worker at, as registered with the placement
    /// driver; empty = `http://` + the bound address (right unless it binds 0.0.0.0).
    pub advertise_url: String,
    /// The newest memtable-data format (`changeset::memtable_data::Format`) this worker reads
    /// and advertises to servers (default: the newest this build has, 4). Servers ship memtable
    /// rows in the newest format both sides read, so upgrades work in either order without it;
    /// set 1 to keep a cluster on the old format, e.g. while a rollback of servers is possible.
    /// A body in a newer format than this is refused (400), as an older build refuses it.
    pub memtable_data_format: u8,
    /// Compaction jobs (`POST /compact`) run at once (default 2); one more is answered 503 and
    /// its server goes to another worker or compacts itself. Each holds one output table and
    /// the input blocks it merges, and takes a core while it runs.
    pub max_compaction_jobs: usize,
}

impl WorkerConfig {
    /// The descriptors this config lets the worker hold open at once: a connection each
    /// (`[http] max-connections`) and a file for each table the table cache may keep
    /// (`worker.table-cache-size` over the least a table weighs).
    pub fn max_open_files(&self) -> u64 {
        let tables = self.worker.table_cache_size.bytes() / kvengine::MIN_TABLE_WEIGHT;
        (self.http.max_connections as u64).saturating_add(tables)
    }
}

impl WorkerSection {
    /// The block cache's read-ahead, from `read-ahead-blocks` and `read-ahead-threads`.
    pub fn read_ahead(&self) -> kvengine::ReadAhead {
        kvengine::ReadAhead {
            blocks: self.read_ahead_blocks,
            threads: self.read_ahead_threads,
        }
    }
}

impl Default for WorkerSection {
    fn default() -> Self {
        WorkerSection {
            addr: "127.0.0.1:19000".into(),
            labels: BTreeMap::from([("zone".to_string(), String::new())]),
            max_request_size: ReadableSize::gib(1),
            block_cache_size: ReadableSize::mib(256),
            table_cache_size: ReadableSize::mib(64),
            ship_buffer_pool_size: ReadableSize(changeset::ship_buffers::DEFAULT_MAX_BYTES as u64),
            read_ahead_blocks: kvengine::ReadAhead::DEFAULT.blocks,
            read_ahead_threads: kvengine::ReadAhead::DEFAULT.threads,
            cache_dir: PathBuf::from("./stratus-data/worker-cache"),
            cache_capacity: ReadableSize::gib(10),
            shutdown_grace: ReadableDuration::secs(10),
            delegate_timeout: ReadableDuration::secs(10),
            pd_endpoints: Vec::new(),
            pd_heartbeat_interval: ReadableDuration::secs(2),
            advertise_url: String::new(),
            memtable_data_format: MemtableDataFormat::NEWEST.as_u8(),
            max_compaction_jobs: 2,
        }
    }
}

/// The `[cop-limiter]` section: back-pressure on `/coprocessor` while the worker's memory is
/// high, and the per-keyspace throughput window (see [`crate::cop_limiter`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct CopLimiterSection {
    /// Memory use (resident set, or the cgroup's usage when a cgroup limits memory, over
    /// the memory limit) above which new requests wait before they run (default 0.8; in
    /// (0, 1], 1 = wait only when the limit itself is exceeded). Lower leaves more headroom
    /// for the requests already running, and the block cache, at the price of more waiting
    /// and more 503s under load.
    pub high_mem_ratio: f64,
    /// Shortest wait of one round (default `"100ms"`). Each round waits a random duration in
    /// [min, max], so that waiting requests do not all retry at the same moment.
    pub wait_min_duration: ReadableDuration,
    /// Longest wait of one round (default `"3s"`). Longer rounds spread retries out more but
    /// react later when memory drops.
    pub wait_max_duration: ReadableDuration,
    /// Window over which response sizes are summed per keyspace for the throughput metric and
    /// `GET /status` (default `"60s"`; whole seconds, at least 1s). Longer smooths more and
    /// keeps one counter per keyspace and second in the window.
    pub sample_ttl: ReadableDuration,
    /// The memory limit when no cgroup limits the process (default 0 = the machine's physical
    /// memory). Under `memory-source = "auto"` a cgroup (v2) limit takes precedence: it is what
    /// the kernel enforces.
    pub memory_limit: ReadableSize,
    /// Where memory use is read (default `"auto"`): `"auto"` reads the cgroup v2 working set
    /// over `memory.max` when a cgroup limits the worker, else the resident set over
    /// `memory-limit`; `"process"` always reads the resident set over `memory-limit` (or the
    /// physical memory), even under a cgroup. `"process"` suits a worker that shares its
    /// cgroup with other programs and should judge only its own memory, against a limit of
    /// its own.
    pub memory_source: MemorySourceKind,
}

/// `cop-limiter.memory-source`: which reading the limiter trusts (see
/// [`crate::cop_limiter::SystemMemory`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemorySourceKind {
    /// The cgroup v2 limit and working set when a cgroup limits the process, else the resident
    /// set over the configured (or physical) limit.
    #[default]
    Auto,
    /// The resident set over the configured (or physical) limit, whatever the cgroup says.
    Process,
}

impl MemorySourceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            MemorySourceKind::Auto => "auto",
            MemorySourceKind::Process => "process",
        }
    }
}

impl Default for CopLimiterSection {
    fn default() -> Self {
        CopLimiterSection {
            high_mem_ratio: 0.8,
            wait_min_duration: ReadableDuration::millis(100),
            wait_max_duration: ReadableDuration::secs(3),
            sample_ttl: ReadableDuration::secs(60),
            memory_limit: ReadableSize(0),
            memory_source: MemorySourceKind::Auto,
        }
    }
}

impl CopLimiterSection {
    /// Values that parse but cannot work, named by their full key.
    fn validate(&self) -> Result<(), ConfigError> {
        let ratio = self.high_mem_ratio;
        if !(ratio > 0.0 && ratio <= 1.0) {
            return Err(ConfigError::invalid(
                "cop-limiter.high-mem-ratio",
                format!("expected a ratio in (0, 1], found {ratio}"),
            ));
        }
        let (min, max) = (self.wait_min_duration, self.wait_max_duration);
        if min.duration() < Duration::from_millis(1) {
            return Err(ConfigError::invalid(
                "cop-limiter.wait-min-duration",
                format!("expected at least 1ms, found {min}"),
            ));
        }
        if min > max {
            return Err(ConfigError::invalid(
                "cop-limiter.wait-max-duration",
                format!("expected at least wait-min-duration ({min}), found {max}"),
            ));
        }
        if self.sample_ttl.duration() < Duration::from_secs(1) {
            return Err(ConfigError::invalid(
                "cop-limiter.sample-ttl",
                format!("expected at least 1s, found {}", self.sample_ttl),
            ));
        }
        Ok(())
    }
}

impl WorkerConfig {
    /// Reads `path` (or takes the defaults when `None`) and checks the values.
    pub fn load(path: Option<&Path>) -> Result<WorkerConfig, ConfigError> {
        let config: WorkerConfig = node::config::load(path)?;
        config.validate()?;
        Ok(config)
    }

    /// Parses config text (`origin` names it in errors) and checks the values.
    pub fn parse(text: &str, origin: &str) -> Result<WorkerConfig, ConfigError> {
        let config: WorkerConfig = node::config::parse(text, origin)?;
        config.validate()?;
        Ok(config)
    }

    /// The effective config as TOML (the start-up banner and `GET /config`).
    pub fn render(&self) -> String {
        node::config::render(self)
    }

    /// Checks what parsing cannot: values that parse but cannot work.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.http.validate()?;
        self.security.validate()?;
        let w = &self.worker;
        let sec = &self.security;
        sec.check_urls(
            "worker.pd-endpoints",
            w.pd_endpoints.iter().map(String::as_str),
        )?;
        sec.check_urls("worker.advertise-url", [w.advertise_url.as_str()])?;
        let port_ok = w
            .addr
            .rsplit_once(':')
            .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
        if !port_ok {
            return Err(ConfigError::invalid(
                "worker.addr",
                format!("expected HOST:PORT, found {:?}", w.addr),
            ));
        }
        if w.pd_heartbeat_interval.duration().is_zero() {
            return Err(ConfigError::invalid(
                "worker.pd-heartbeat-interval",
                "expected more than 0, found 0",
            ));
        }
        let is_http_url = |u: &str| u.starts_with("http://") || u.starts_with("https://");
        if !w.advertise_url.is_empty() && !is_http_url(&w.advertise_url) {
            return Err(ConfigError::invalid(
                "worker.advertise-url",
                format!(
                    "expected an http:// or https:// URL, found {:?}",
                    w.advertise_url
                ),
            ));
        }
        for url in &w.pd_endpoints {
            if !is_http_url(url) {
                return Err(ConfigError::invalid(
                    "worker.pd-endpoints",
                    format!("expected an http:// or https:// URL, found {url:?}"),
                ));
            }
        }
        if w.max_request_size.bytes() == 0 {
            return Err(ConfigError::invalid(
                "worker.max-request-size",
                "expected at least 1 byte, found 0",
            ));
        }
        if usize::try_from(w.max_request_size.bytes()).is_err() {
            return Err(ConfigError::invalid(
                "worker.max-request-size",
                format!(
                    "expected at most {} bytes, found {}",
                    usize::MAX,
                    w.max_request_size
                ),
            ));
        }
        if w.delegate_timeout.duration().is_zero() {
            return Err(ConfigError::invalid(
                "worker.delegate-timeout",
                "expected a positive duration, found 0",
            ));
        }
        if MemtableDataFormat::from_u8(w.memtable_data_format).is_none() {
            return Err(ConfigError::invalid(
                "worker.memtable-data-format",
                format!(
                    "expected 1 to {}, found {}",
                    MemtableDataFormat::NEWEST.as_u8(),
                    w.memtable_data_format
                ),
            ));
        }
        if let Err((setting, what)) = w.read_ahead().check() {
            return Err(ConfigError::invalid(
                &format!("worker.{}", setting.key()),
                what,
            ));
        }
        if w.max_compaction_jobs == 0 {
            return Err(ConfigError::invalid(
                "worker.max-compaction-jobs",
                "expected at least 1, found 0",
            ));
        }
        self.cop_limiter.validate()?;
        self.dfs_config().map(|_| ())
    }

    /// The object store to open: `[dfs]`, with the worker's own file cache in front of S3 when
    /// `[dfs]` names none (a worker reads the same files over and over; a server rarely does).
    pub fn dfs_config(&self) -> Result<DfsConfig, ConfigError> {
        let mut config = self
            .dfs
            .to_dfs_config()
            .map_err(|e| ConfigError::invalid(e.key, e.message))?;
        if let DfsConfig::S3 { cache, .. } = &mut config
            && cache.is_none()
            && !self.worker.cache_dir.as_os_str().is_empty()
        {
            *cache = Some(CacheConfig {
                dir: self.worker.cache_dir.clone(),
                budget_bytes: self.worker.cache_capacity.bytes(),
            });
        }
        Ok(config)
    }

    /// The worker's `zone` label (`None`: no label, or the empty one).
    pub fn zone(&self) -> Option<types::Zone> {
        self.worker.labels.get("zone").and_then(types::Zone::label)
    }

    /// Who this worker counts its network bytes as (its zone, the worker role): its router,
    /// its client of servers and of the placement driver carry it.
    pub fn meter(&self) -> ::node::Meter {
        ::node::Meter::new(self.zone(), wire::traffic::Role::Worker)
    }

    /// `worker.memtable-data-format` (checked by [`WorkerConfig::validate`]; the newest if not).
    pub fn memtable_data_format(&self) -> MemtableDataFormat {
        MemtableDataFormat::from_u8(self.worker.memtable_data_format)
            .unwrap_or(MemtableDataFormat::NEWEST)
    }

    /// `worker.max-request-size` in bytes (checked to fit by [`WorkerConfig::validate`]).
    pub fn max_request_bytes(&self) -> usize {
        usize::try_from(self.worker.max_request_size.bytes()).unwrap_or(usize::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_key_is_rejected_naming_it() {
        let err =
            WorkerConfig::parse("[worker]\nmax-request-sise = \"1MiB\"\n", "w.toml").unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("max-request-sise"), "{msg}");
        let err = WorkerConfig::parse("[workers]\n", "w.toml").unwrap_err();
        assert!(err.to_string().contains("workers"), "{err}");
    }

    #[test]
    fn a_bad_value_is_rejected_naming_the_key() {
        let err =
            WorkerConfig::parse("[worker]\nmax-request-size = \"lots\"\n", "w.toml").unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("max-request-size"), "{msg}");
        assert!(msg.contains("lots"), "{msg}");
        let err =
            WorkerConfig::parse("[worker]\nshutdown-grace = \"soon\"\n", "w.toml").unwrap_err();
        assert!(err.to_string().contains("shutdown-grace"), "{err}");
    }

    #[test]
    fn values_that_parse_but_cannot_work_name_their_key() {
        let err = WorkerConfig::parse("[worker]\nmax-request-size = 0\n", "w.toml").unwrap_err();
        assert!(err.to_string().contains("worker.max-request-size"), "{err}");
        let err = WorkerConfig::parse("[worker]\naddr = \"nowhere\"\n", "w.toml").unwrap_err();
        assert!(err.to_string().contains("worker.addr"), "{err}");
        let err = WorkerConfig::parse("[dfs]\ns3-bucket = \"ab\"\n", "w.toml").unwrap_err();
        assert!(err.to_string().contains("dfs.s3-bucket"), "{err}");
        let err = WorkerConfig::parse("[worker]\npd-heartbeat-interval = \"0s\"\n", "w.toml")
            .unwrap_err();
        assert!(
            err.to_string().contains("worker.pd-heartbeat-interval"),
            "{err}"
        );
        let err = WorkerConfig::parse("[worker]\npd-endpoints = [\"127.0.0.1:1\"]\n", "w.toml")
            .unwrap_err();
        assert!(err.to_string().contains("worker.pd-endpoints"), "{err}");
        let err = WorkerConfig::parse("[worker]\nadvertise-url = \"10.0.0.1:19000\"\n", "w.toml")
            .unwrap_err();
        assert!(err.to_string().contains("worker.advertise-url"), "{err}");
    }

    #[test]
    fn defaults_render_and_parse_back_to_the_same_config() {
        let defaults = WorkerConfig::default();
        let text = defaults.render();
        assert!(text.contains("max-request-size = \"1GiB\""), "{text}");
        assert!(text.contains("zone = \"\""), "{text}");
        assert_eq!(WorkerConfig::parse(&text, "rendered").unwrap(), defaults);
        assert_eq!(WorkerConfig::parse("", "empty").unwrap(), defaults);
    }

    #[test]
    fn the_cop_limiter_example_block_parses_as_written() {
        let c = WorkerConfig::parse(
            r#"
[cop-limiter]
high-mem-ratio = 0.8
wait-min-duration = "100ms"
wait-max-duration = "3s"
sample-ttl = "60s"
memory-source = "auto"
"#,
            "w.toml",
        )
        .unwrap();
        assert_eq!(c.cop_limiter, CopLimiterSection::default());
        assert_eq!(
            c.cop_limiter.wait_min_duration.duration(),
            Duration::from_millis(100)
        );
        assert_eq!(
            c.cop_limiter.wait_max_duration.duration(),
            Duration::from_secs(3)
        );
        assert_eq!(c.cop_limiter.sample_ttl.duration(), Duration::from_secs(60));
        assert_eq!(c.cop_limiter.memory_limit.bytes(), 0);
    }

    #[test]
    fn the_open_files_count_connections_and_the_tables_the_cache_may_keep() {
        let c = WorkerConfig::default();
        // 1,024 connections and 64 MiB of tables at 256 KiB at least each.
        assert_eq!(c.max_open_files(), 1024 + 256);
        let c = WorkerConfig::parse(
            "[worker]\ntable-cache-size = 0\n[http]\nmax-connections = 10\n",
            "w.toml",
        )
        .unwrap();
        assert_eq!(c.max_open_files(), 10);
    }

    #[test]
    fn the_readme_worker_example_parses() {
        let readme = include_str!("../../README.md");
        let start = readme
            .find("```toml\n# worker.toml\n")
            .expect("a worker.toml block in README.md");
        let block = &readme[start + "```toml\n".len()..];
        let block = &block[..block.find("```").expect("the block ends")];
        let c = WorkerConfig::parse(block, "README.md").unwrap();
        assert_eq!(c.cop_limiter, CopLimiterSection::default());
        assert_eq!(c.cop_topn_max_pushdown_rows, 0);
    }

    #[test]
    fn the_delegate_timeout_parses_and_zero_is_named() {
        let c = WorkerConfig::parse(
            "[worker]\ndelegate-timeout = \"250ms\"\nlabels = { zone = \"b\" }\n",
            "w.toml",
        )
        .unwrap();
        assert_eq!(c.worker.delegate_timeout, ReadableDuration::millis(250));
        assert_eq!(c.zone(), types::Zone::label("b"));
        let err =
            WorkerConfig::parse("[worker]\ndelegate-timeout = \"0s\"\n", "w.toml").unwrap_err();
        assert!(err.to_string().contains("worker.delegate-timeout"), "{err}");
    }

    #[test]
    fn max_compaction_jobs_parses_and_zero_is_named() {
        let c = WorkerConfig::parse("[worker]\nmax-compaction-jobs = 5\n", "w.toml").unwrap();
        assert_eq!(c.worker.max_compaction_jobs, 5);
        let err = WorkerConfig::parse("[worker]\nmax-compaction-jobs = 0\n", "w.toml").unwrap_err();
        assert!(
            err.to_string().contains("worker.max-compaction-jobs"),
            "{err}"
        );
    }

    #[test]
    fn the_top_level_topn_key_parses_before_the_sections() {
        let c = WorkerConfig::parse(
            "cop-topn-max-pushdown-rows = 50000\n\n[worker]\nblock-cache-size = 0\n\n\
             [cop-limiter]\nhigh-mem-ratio = 0.5\nmemory-limit = \"2GiB\"\n",
            "w.toml",
        )
        .unwrap();
        assert_eq!(c.cop_topn_max_pushdown_rows, 50_000);
        assert_eq!(c.cop_limiter.high_mem_ratio, 0.5);
        assert_eq!(c.cop_limiter.memory_limit, ReadableSize::gib(2));
        assert_eq!(WorkerConfig::default().cop_topn_max_pushdown_rows, 0);
        let err = WorkerConfig::parse("cop-topn-max-pushdown-rows = -1\n", "w.toml").unwrap_err();
        assert!(
            err.to_string().contains("cop-topn-max-pushdown-rows"),
            "{err}"
        );
    }

    #[test]
    fn a_config_with_every_new_key_set_renders_as_toml_that_parses_back() {
        let c = WorkerConfig {
            cop_topn_max_pushdown_rows: 1234,
            cop_limiter: CopLimiterSection {
                high_mem_ratio: 0.25,
                wait_min_duration: ReadableDuration::millis(20),
                wait_max_duration: ReadableDuration::millis(1500),
                sample_ttl: ReadableDuration::secs(600),
                memory_limit: ReadableSize::mib(512),
                memory_source: MemorySourceKind::Process,
            },
            ..WorkerConfig::default()
        };
        let text = c.render();
        assert!(
            text.starts_with("cop-topn-max-pushdown-rows = 1234\n"),
            "the top-level key comes before every section:\n{text}"
        );
        assert!(text.contains("[cop-limiter]"), "{text}");
        assert!(text.contains("memory-limit = \"512MiB\""), "{text}");
        assert!(text.contains("memory-source = \"process\""), "{text}");
        assert_eq!(WorkerConfig::parse(&text, "rendered").unwrap(), c);
    }

    #[test]
    fn cop_limiter_values_that_cannot_work_name_their_key() {
        let bad = |body: &str| {
            WorkerConfig::parse(&format!("[cop-limiter]\n{body}\n"), "w.toml")
                .unwrap_err()
                .to_string()
        };
        for ratio in ["0", "0.0", "-0.5", "1.01", "nan", "inf"] {
            let msg = bad(&format!("high-mem-ratio = {ratio}"));
            assert!(msg.contains("cop-limiter.high-mem-ratio"), "{ratio}: {msg}");
        }
        assert!(WorkerConfig::parse("[cop-limiter]\nhigh-mem-ratio = 1.0\n", "w").is_ok());
        let msg = bad("wait-min-duration = \"2s\"\nwait-max-duration = \"1s\"");
        assert!(msg.contains("cop-limiter.wait-max-duration"), "{msg}");
        let msg = bad("wait-min-duration = \"0ms\"");
        assert!(msg.contains("cop-limiter.wait-min-duration"), "{msg}");
        let msg = bad("sample-ttl = \"500ms\"");
        assert!(msg.contains("cop-limiter.sample-ttl"), "{msg}");
        let msg = bad("wait-min-duration = \"soon\"");
        assert!(msg.contains("wait-min-duration"), "{msg}");
        let msg = bad("high-mem-ratios = 0.5");
        assert!(msg.contains("high-mem-ratios"), "{msg}");
        let msg = bad("memory-limit = \"lots\"");
        assert!(msg.contains("memory-limit"), "{msg}");
        let msg = bad("memory-source = \"cgroup\"");
        assert!(msg.contains("memory-source"), "{msg}");
    }

    #[test]
    fn read_ahead_settings_parse_and_out_of_bounds_ones_are_named() {
        assert_eq!(
            WorkerSection::default().read_ahead(),
            kvengine::ReadAhead::DEFAULT
        );
        let c = WorkerConfig::parse(
            "[worker]\nread-ahead-blocks = 32\nread-ahead-threads = 0\n",
            "w.toml",
        )
        .unwrap();
        assert_eq!(
            c.worker.read_ahead(),
            kvengine::ReadAhead {
                blocks: 32,
                threads: 0
            }
        );
        let e = WorkerConfig::parse("[worker]\nread-ahead-blocks = 1000\n", "w.toml")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("worker.read-ahead-blocks") && e.contains("found=1000"),
            "{e}"
        );
    }

    #[test]
    fn a_partial_file_keeps_the_other_defaults() {
        let c = WorkerConfig::parse(
            "[worker]\nlabels = { zone = \"b\" }\nblock-cache-size = 0\n\
             ship-buffer-pool-size = \"8MiB\"\n",
            "w.toml",
        )
        .unwrap();
        assert_eq!(c.worker.labels["zone"], "b");
        assert_eq!(c.worker.block_cache_size.bytes(), 0);
        assert_eq!(c.worker.ship_buffer_pool_size.bytes(), 8 << 20);
        assert_eq!(
            WorkerSection::default().ship_buffer_pool_size.bytes(),
            changeset::ship_buffers::DEFAULT_MAX_BYTES as u64
        );
        assert_eq!(c.worker.addr, WorkerSection::default().addr);
        assert_eq!(c.dfs, DfsSection::default());
    }

    #[test]
    fn the_worker_cache_dir_goes_in_front_of_s3_only_when_dfs_names_none() {
        let mut c = WorkerConfig::default();
        c.dfs.s3_bucket = "stratus".into();
        match c.dfs_config().unwrap() {
            DfsConfig::S3 {
                cache: Some(cache), ..
            } => {
                assert_eq!(cache.dir, PathBuf::from("./stratus-data/worker-cache"));
                assert_eq!(cache.budget_bytes, 10 << 30);
            }
            other => panic!("expected S3 with the worker's cache, found {other:?}"),
        }
        c.dfs.cache_dir = "/tmp/dfs-cache".into();
        match c.dfs_config().unwrap() {
            DfsConfig::S3 {
                cache: Some(cache), ..
            } => {
                assert_eq!(cache.dir, PathBuf::from("/tmp/dfs-cache"))
            }
            other => panic!("expected S3 with the dfs cache, found {other:?}"),
        }
        let local = WorkerConfig::default();
        assert!(matches!(
            local.dfs_config().unwrap(),
            DfsConfig::Local { .. }
        ));
    }
}
