//! The worker's TOML config: a `[worker]` section of its own and the `[dfs]` section it shares
//! with the servers (it must name the same store they write, or every rebuild fails with a
//! missing file).
//!
//! ```toml
//! [worker]
//! addr = "127.0.0.1:19000"
//! labels = { zone = "" }
//! max-request-size = "1GiB"
//! block-cache-size = "256MiB"
//! cache-dir = "./stratus-data/worker-cache"
//! cache-capacity = "10GiB"
//! shutdown-grace = "10s"
//!
//! [dfs]
//! local-dir = "./stratus-data/dfs"
//! ```
//!
//! Every key is optional; an unknown key or a bad value is an error that names the key.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kvengine::{CacheConfig, DfsConfig};
use serde::{Deserialize, Serialize};
use service::{ConfigError, DfsSection, ReadableDuration, ReadableSize};

/// The whole config file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct WorkerConfig {
    pub worker: WorkerSection,
    /// The object store holding the SST files: the same one the servers write.
    pub dfs: DfsSection,
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
}

impl Default for WorkerSection {
    fn default() -> Self {
        WorkerSection {
            addr: "127.0.0.1:19000".into(),
            labels: BTreeMap::from([("zone".to_string(), String::new())]),
            max_request_size: ReadableSize::gib(1),
            block_cache_size: ReadableSize::mib(256),
            cache_dir: PathBuf::from("./stratus-data/worker-cache"),
            cache_capacity: ReadableSize::gib(10),
            shutdown_grace: ReadableDuration::secs(10),
        }
    }
}

impl WorkerConfig {
    /// Reads `path` (or takes the defaults when `None`) and checks the values.
    pub fn load(path: Option<&Path>) -> Result<WorkerConfig, ConfigError> {
        let config: WorkerConfig = service::config::load(path)?;
        config.validate()?;
        Ok(config)
    }

    /// Parses config text (`origin` names it in errors) and checks the values.
    pub fn parse(text: &str, origin: &str) -> Result<WorkerConfig, ConfigError> {
        let config: WorkerConfig = service::config::parse(text, origin)?;
        config.validate()?;
        Ok(config)
    }

    /// The effective config as TOML (the start-up banner and `GET /config`).
    pub fn render(&self) -> String {
        service::config::render(self)
    }

    /// Checks what parsing cannot: values that parse but cannot work.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let w = &self.worker;
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
        self.dfs_config().map(|_| ())
    }

    /// The object store to open: `[dfs]`, with the worker's own file cache in front of S3 when
    /// `[dfs]` names none (a worker reads the same files over and over; a server rarely does).
    pub fn dfs_config(&self) -> Result<DfsConfig, ConfigError> {
        let mut config = self.dfs.to_dfs_config()?;
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
    fn a_partial_file_keeps_the_other_defaults() {
        let c = WorkerConfig::parse(
            "[worker]\nlabels = { zone = \"b\" }\nblock-cache-size = 0\n",
            "w.toml",
        )
        .unwrap();
        assert_eq!(c.worker.labels["zone"], "b");
        assert_eq!(c.worker.block_cache_size.bytes(), 0);
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
