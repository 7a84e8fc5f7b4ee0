//! The client's settings: plain serde data (kebab-case keys, every key optional) with the
//! trade-off of each knob next to it. [`ClientConfig::validate`] names the offending field.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use types::{ReadableDuration, ReadableSize};

use crate::error::ConfigError;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct ClientConfig {
    /// Storage servers, as `host:port` or a base URL (`http://host:port`). The client learns
    /// every region from each server's `GET /regions`.
    pub servers: Vec<String>,
    /// Compute workers (same forms), probed for liveness; the node selection of the delegate
    /// path chooses among the alive ones.
    pub workers: Vec<String>,
    /// The server that runs the TSO (timestamps for lock resolution); empty = the first server.
    /// Not used with `pd-endpoints`.
    pub tso_server: String,
    /// The placement driver's instances (same forms, every one of them): when set, timestamps
    /// come from its leader, batched with this process's concurrent requests.
    pub pd_endpoints: Vec<String>,
    /// The client's own labels; `zone` is the entry node's zone.
    pub labels: BTreeMap<String, String>,
    pub paging: PagingConfig,
    pub cop_cache: CopCacheConfig,
    /// How long a worker whose liveness probe failed counts as dead before it is probed again.
    /// Longer: fewer probes of a dead node, slower return of a recovered one.
    pub dead_worker_ttl: ReadableDuration,
    /// How long one logical request may take, retries included: a page, a transaction
    /// command or a timestamp is sent again (to the region's new leader, another replica, a
    /// restarted server) until this much time passed since its first try. Longer: rides out
    /// longer outages; shorter: fails sooner when the cluster is down.
    pub request_timeout: ReadableDuration,
    /// How long a read waits for the transaction holding a lock it met to finish (or for its
    /// TTL to pass) before it fails with `LockWaitTimeout`.
    pub lock_wait_timeout: ReadableDuration,
    /// How many times one region task re-splits after an epoch change before it gives up
    /// (each split or epoch change in flight costs one; leader changes and busy servers are
    /// bounded by `request-timeout` instead).
    pub max_region_retries: u32,
    /// The largest response body accepted from a server.
    pub max_response_size: ReadableSize,
    /// Region tasks of one request in flight at once. More: a request over many regions
    /// finishes sooner; fewer: less load (and fewer buffered pages) per request.
    pub region_task_concurrency: usize,
    /// TLS to every node (`node::tls`): with it, the addresses above are `https://` URLs and
    /// this entry node shows `cert-path` (its tier, a client or an admin, is the name the
    /// nodes' `[security]` lists give it).
    pub security: node::tls::SecurityConfig,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            servers: Vec::new(),
            workers: Vec::new(),
            tso_server: String::new(),
            pd_endpoints: Vec::new(),
            labels: BTreeMap::new(),
            paging: PagingConfig::default(),
            cop_cache: CopCacheConfig::default(),
            dead_worker_ttl: ReadableDuration::secs(10),
            request_timeout: ReadableDuration::secs(60),
            lock_wait_timeout: ReadableDuration::secs(20),
            max_region_retries: 20,
            max_response_size: ReadableSize(1 << 30),
            region_task_concurrency: 8,
            security: node::tls::SecurityConfig::default(),
        }
    }
}

/// Paging of coprocessor requests: each region task starts at `initial-size` rows per page and
/// doubles up to `max-size`. Small first pages answer a LIMIT fast and bound the memory of a
/// region that turns out big; large later pages cut the number of round trips.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct PagingConfig {
    pub initial_size: u64,
    pub max_size: u64,
}

impl Default for PagingConfig {
    fn default() -> Self {
        PagingConfig {
            initial_size: 128,
            max_size: 50_000,
        }
    }
}

/// The coprocessor cache (see [`crate::cop_cache`]) and what it admits. Admission keeps out
/// results that are cheap to recompute (short process time), that would crowd out many others
/// (large), or whose key costs more than it saves (many ranges, deep page indexes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct CopCacheConfig {
    /// Capacity in MiB (keys and results); 0 disables the cache.
    pub capacity_mb: u64,
    /// Results larger than this are not stored.
    pub admission_max_result_size: ReadableSize,
    /// Results that took less than this to compute on the server are not stored (a hit
    /// still costs a round trip). Pages after the first are admitted at a third of it, since
    /// a paged read repeated from the cache saves every page's round of work.
    pub admission_min_process_time: ReadableDuration,
    /// Requests with more ranges than this are not stored.
    pub admission_max_ranges: usize,
    /// Pages with a higher index within their region task (0 = first page) are not stored.
    pub admission_max_page_index: u64,
}

impl Default for CopCacheConfig {
    fn default() -> Self {
        CopCacheConfig {
            capacity_mb: 1000,
            admission_max_result_size: ReadableSize(10 << 20),
            admission_min_process_time: ReadableDuration::millis(5),
            admission_max_ranges: 500,
            admission_max_page_index: 50,
        }
    }
}

impl CopCacheConfig {
    pub fn capacity_bytes(&self) -> u64 {
        self.capacity_mb.saturating_mul(1 << 20)
    }

    /// The minimum process time for a page at `page_index` (a third after the first page).
    pub fn min_process_time(&self, page_index: u64) -> Duration {
        let t = self.admission_min_process_time.duration();
        if page_index == 0 { t } else { t / 3 }
    }
}

impl ClientConfig {
    /// A config for `servers` with every other setting at its default.
    pub fn new(servers: impl IntoIterator<Item = impl Into<String>>) -> ClientConfig {
        ClientConfig {
            servers: servers.into_iter().map(Into::into).collect(),
            ..ClientConfig::default()
        }
    }

    /// The entry node's zone (`labels.zone`), if set and not empty.
    pub fn zone(&self) -> Option<types::Zone> {
        self.labels.get("zone").and_then(types::Zone::label)
    }

    /// Who this entry node counts its network bytes as (its zone, the client role).
    pub fn meter(&self) -> node::Meter {
        node::Meter::new(self.zone(), wire::traffic::Role::Client)
    }

    /// Checks every field; the error names the first wrong one.
    pub fn validate(&self) -> Result<(), ConfigError> {
        fn err(field: &'static str, reason: impl Into<String>) -> Result<(), ConfigError> {
            Err(ConfigError {
                field,
                reason: reason.into(),
            })
        }
        if self.servers.is_empty() && self.pd_endpoints.is_empty() {
            return err(
                "servers",
                "at least one server address is needed (or pd-endpoints, to learn them)",
            );
        }
        for s in &self.servers {
            if let Err(reason) = check_addr(s) {
                return err("servers", reason);
            }
        }
        for w in &self.workers {
            if let Err(reason) = check_addr(w) {
                return err("workers", reason);
            }
        }
        if !self.tso_server.is_empty()
            && let Err(reason) = check_addr(&self.tso_server)
        {
            return err("tso-server", reason);
        }
        for p in &self.pd_endpoints {
            if let Err(reason) = check_addr(p) {
                return err("pd-endpoints", reason);
            }
        }
        if let Err(e) = self.security.validate() {
            return err("security", e.to_string());
        }
        // With TLS every address must be https: the one rule nodes apply to their configs.
        for (field, addrs) in [
            ("servers", self.servers.as_slice()),
            ("workers", self.workers.as_slice()),
            ("pd-endpoints", self.pd_endpoints.as_slice()),
            ("tso-server", std::slice::from_ref(&self.tso_server)),
        ] {
            if let Err(e) = self
                .security
                .check_urls(field, addrs.iter().map(String::as_str))
            {
                return err(field, e.to_string());
            }
        }
        if !self.pd_endpoints.is_empty() && !self.tso_server.is_empty() {
            return err(
                "tso-server",
                "expected no tso-server with pd-endpoints (the placement driver runs the TSO)",
            );
        }
        if self.paging.initial_size == 0 {
            return err("paging.initial-size", "must be at least 1");
        }
        if self.paging.max_size < self.paging.initial_size {
            return err(
                "paging.max-size",
                format!(
                    "must be at least paging.initial-size: max_size={} initial_size={}",
                    self.paging.max_size, self.paging.initial_size
                ),
            );
        }
        if self.cop_cache.capacity_mb > (1 << 24) {
            return err(
                "cop-cache.capacity-mb",
                format!(
                    "too large: capacity_mb={} max=16777216",
                    self.cop_cache.capacity_mb
                ),
            );
        }
        if self.request_timeout.duration().is_zero() {
            return err("request-timeout", "must be positive");
        }
        if self.dead_worker_ttl.duration().is_zero() {
            return err("dead-worker-ttl", "must be positive");
        }
        if self.max_response_size.bytes() == 0 {
            return err("max-response-size", "must be positive");
        }
        if self.region_task_concurrency == 0 {
            return err("region-task-concurrency", "must be at least 1");
        }
        Ok(())
    }
}

/// A base URL for an address given as `host:port` or `http(s)://host:port`.
pub fn base_url(addr: &str) -> String {
    let addr = addr.trim_end_matches('/');
    if addr.starts_with("http://") || addr.starts_with("https://") {
        addr.to_string()
    } else {
        format!("http://{addr}")
    }
}

fn check_addr(addr: &str) -> Result<(), String> {
    let host = addr
        .strip_prefix("http://")
        .or_else(|| addr.strip_prefix("https://"))
        .unwrap_or(addr)
        .trim_end_matches('/');
    if host.is_empty() || host.contains('/') || host.contains(char::is_whitespace) {
        return Err(format!(
            "expected host:port or http(s)://host:port: addr={addr:?}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_the_issue() {
        let c = ClientConfig::new(["127.0.0.1:1"]);
        assert_eq!(c.paging.initial_size, 128);
        assert_eq!(c.paging.max_size, 50_000);
        assert_eq!(c.cop_cache.capacity_mb, 1000);
        assert_eq!(c.cop_cache.admission_max_result_size.bytes(), 10 << 20);
        assert_eq!(c.cop_cache.min_process_time(0), Duration::from_millis(5));
        assert_eq!(
            c.cop_cache.min_process_time(1),
            Duration::from_millis(5) / 3
        );
        assert_eq!(c.cop_cache.admission_max_ranges, 500);
        assert_eq!(c.cop_cache.admission_max_page_index, 50);
        assert!(c.validate().is_ok());
    }

    #[test]
    fn validation_names_the_wrong_field() {
        let ok = ClientConfig::new(["127.0.0.1:1"]);
        type Change = Box<dyn Fn(&mut ClientConfig)>;
        let cases: Vec<(&str, Change)> = vec![
            ("servers", Box::new(|c| c.servers.clear())),
            ("servers", Box::new(|c| c.servers.push("http://".into()))),
            ("workers", Box::new(|c| c.workers.push("a:1/x".into()))),
            ("tso-server", Box::new(|c| c.tso_server = "https://".into())),
            (
                "pd-endpoints",
                Box::new(|c| c.pd_endpoints.push("a:1/x".into())),
            ),
            (
                "tso-server",
                Box::new(|c| {
                    c.pd_endpoints.push("127.0.0.1:2".into());
                    c.tso_server = "127.0.0.1:3".into();
                }),
            ),
            (
                "paging.initial-size",
                Box::new(|c| c.paging.initial_size = 0),
            ),
            ("paging.max-size", Box::new(|c| c.paging.max_size = 5)),
            (
                "cop-cache.capacity-mb",
                Box::new(|c| c.cop_cache.capacity_mb = u64::MAX),
            ),
            (
                "request-timeout",
                Box::new(|c| c.request_timeout = ReadableDuration::millis(0)),
            ),
            (
                "dead-worker-ttl",
                Box::new(|c| c.dead_worker_ttl = ReadableDuration::millis(0)),
            ),
            (
                "max-response-size",
                Box::new(|c| c.max_response_size = ReadableSize(0)),
            ),
            (
                "region-task-concurrency",
                Box::new(|c| c.region_task_concurrency = 0),
            ),
        ];
        for (field, change) in cases {
            let mut c = ok.clone();
            change(&mut c);
            let e = c.validate().expect_err(field);
            assert_eq!(e.field, field, "{e}");
            assert!(e.to_string().contains(field), "{e}");
        }
    }

    #[test]
    fn a_capacity_of_zero_is_valid_and_means_disabled() {
        let mut c = ClientConfig::new(["127.0.0.1:1"]);
        c.cop_cache.capacity_mb = 0;
        assert!(c.validate().is_ok());
        assert_eq!(c.cop_cache.capacity_bytes(), 0);
    }

    #[test]
    fn addresses_become_base_urls() {
        assert_eq!(base_url("127.0.0.1:5"), "http://127.0.0.1:5");
        assert_eq!(base_url("https://h:5/"), "https://h:5");
    }
}
