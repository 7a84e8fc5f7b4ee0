//! `stratus pd --config pd.toml`: every key of the placement driver, with its default.
//!
//! ```toml
//! [pd]
//! name = "pd-1"                          # this instance, in logs and `/pd/members`
//! addr = "127.0.0.1:2479"                # listen address (port 0 picks one)
//! advertise-url = ""                     # how others reach it (default http(s)://<bound addr>)
//! data-dir = "./stratus-data/pd"         # the embedded store's file lives here
//! etcd-endpoints = []                    # etcd client URLs; empty = the embedded store
//! cluster-name = "stratus"               # keys live under /stratus/<cluster-name>/
//! lease-ttl = "2s"                       # the leader's lease (etcd raises one below its minimum)
//! tso-window = "3s"                      # how far ahead of use the TSO mark is persisted
//! id-batch = 100                         # ids reserved per write of the id counter
//! node-lease-ttl = "10s"                 # a server or worker silent this long is unregistered
//! etcd-timeout = "1s"                    # per call and endpoint
//! shutdown-grace = "5s"
//! max-replicas = 3                       # voters per region
//! max-store-down-time = "30m"            # a server gone this long has its replicas rebuilt
//! max-moves-per-store = 2                # replica moves touching one server at once
//! min-size-gap = "64MiB"                 # size gaps up to this are never balanced
//! schedule-interval = "1s"               # how often the leader plans scheduling steps
//! gc-life-time = "10m"                   # versions this recent stay readable (the GC safe point trails now by it)
//!
//! [http]                                 # see node::http_limits
//!
//! [security]                             # see node::tls: TLS, who may call what, the admin token
//! ```

use std::path::{Path, PathBuf};

use node::config::ConfigError;
use node::http::HttpLimits;
use node::tls::SecurityConfig;
use serde::{Deserialize, Serialize};
use types::{ReadableDuration, ReadableSize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct PdConfig {
    pub pd: PdSection,
    /// Bounds on the clients of the placement driver's listener (`node::http_limits`).
    pub http: HttpLimits,
    /// TLS on the listener and every client of this node, and who may call what
    /// (`node::tls`). Off (plain HTTP) unless the paths are set.
    pub security: SecurityConfig,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct PdSection {
    /// This instance's name (logs, `GET /pd/members`).
    pub name: String,
    /// Listen address; port 0 picks a free one (printed as `stratus-pd listening on ...`).
    pub addr: String,
    /// The base URL other processes reach this instance at; empty = `http://` + the bound
    /// address (right on one machine; set it when binding 0.0.0.0).
    pub advertise_url: String,
    /// Where the embedded metadata store keeps its file (`meta` inside).
    pub data_dir: PathBuf,
    /// etcd client URLs (`http://host:2379`); empty = the embedded store, for one machine and
    /// one instance (it is not replicated: a cluster of machines needs etcd).
    pub etcd_endpoints: Vec<String>,
    /// Clusters sharing one etcd are told apart by this: keys live under
    /// `/stratus/<cluster-name>/`.
    pub cluster_name: String,
    /// The leader's lease: a dead leader is replaced about this long after it stopped
    /// renewing. etcd raises a lease below its minimum (2 s with its default timing).
    pub lease_ttl: ReadableDuration,
    /// How far ahead of use the TSO's mark is persisted: about three store writes per window
    /// (the mark is extended when less than two thirds of it is left), and the most the
    /// timestamps jump ahead of the clock after a failover.
    pub tso_window: ReadableDuration,
    /// Ids reserved per write of the id counter: a failover skips at most this many.
    pub id_batch: u64,
    /// A server or worker whose heartbeats stopped this long ago is no longer registered
    /// (etcd raises a lease below its minimum). Longer than the nodes' heartbeat interval.
    pub node_lease_ttl: ReadableDuration,
    /// Timeout of one call to one etcd endpoint (then the next endpoint is tried).
    pub etcd_timeout: ReadableDuration,
    /// On SIGTERM/SIGINT, how long in-flight requests may take.
    pub shutdown_grace: ReadableDuration,
    /// Voters every region should have (`pd::scheduler`): missing ones are added, extra ones
    /// removed, at most one per zone while there are enough zones.
    pub max_replicas: usize,
    /// A server unregistered this long has its replicas rebuilt on the others (shorter heals
    /// sooner; longer spares copying a whole server that only restarts).
    pub max_store_down_time: ReadableDuration,
    /// Scheduling operators touching one server at once: each added replica costs its target
    /// a snapshot install and its catch-up.
    pub max_moves_per_store: usize,
    /// Region sizes (the bytes of the regions a server holds a replica of) are balanced
    /// between servers more than a tenth of the mean size apart, and never between servers at
    /// most this far apart. A region's size is an estimate a flush shifts by up to a memtable,
    /// and a move costs a snapshot of the whole region: a small cluster should not trade
    /// replicas over that noise. 0 = a tenth of the mean only.
    pub min_size_gap: ReadableSize,
    /// How often the leader plans (steps go out with the answers to the servers' heartbeats,
    /// so a step takes up to one heartbeat interval more).
    pub schedule_interval: ReadableDuration,
    /// How long a version stays readable after a newer one replaced it: the leader keeps the
    /// GC safe point this far behind now (and below every lock, `pd::gc`), and servers refuse
    /// reads below the safe point. As TiDB's `tidb_gc_life_time`: longer than the longest
    /// transaction or read.
    pub gc_life_time: ReadableDuration,
}

impl Default for PdSection {
    fn default() -> Self {
        PdSection {
            name: "pd-1".into(),
            addr: "127.0.0.1:2479".into(),
            advertise_url: String::new(),
            data_dir: PathBuf::from("./stratus-data/pd"),
            etcd_endpoints: Vec::new(),
            cluster_name: "stratus".into(),
            lease_ttl: ReadableDuration::secs(2),
            tso_window: ReadableDuration::secs(3),
            id_batch: 100,
            node_lease_ttl: ReadableDuration::secs(10),
            etcd_timeout: ReadableDuration::secs(1),
            shutdown_grace: ReadableDuration::secs(5),
            max_replicas: 3,
            max_store_down_time: ReadableDuration::secs(30 * 60),
            max_moves_per_store: 2,
            min_size_gap: ReadableSize(crate::scheduler::DEFAULT_MIN_SIZE_GAP),
            schedule_interval: ReadableDuration::secs(1),
            gc_life_time: ReadableDuration::secs(10 * 60),
        }
    }
}

impl PdSection {
    /// The scheduler's knobs from these keys (the tolerances and the operator timeout are
    /// the scheduler's defaults).
    pub fn scheduler(&self) -> crate::scheduler::SchedulerConfig {
        crate::scheduler::SchedulerConfig {
            max_replicas: self.max_replicas,
            max_store_down_time: self.max_store_down_time.duration(),
            max_moves_per_store: self.max_moves_per_store,
            min_size_gap: self.min_size_gap.bytes(),
            ..crate::scheduler::SchedulerConfig::default()
        }
    }
}

impl PdConfig {
    /// Reads `path` (the defaults when `None`) and checks the values.
    pub fn load(path: Option<&Path>) -> Result<PdConfig, ConfigError> {
        let config: PdConfig = node::config::load(path)?;
        config.validate()?;
        Ok(config)
    }

    pub fn parse(text: &str, origin: &str) -> Result<PdConfig, ConfigError> {
        let config: PdConfig = node::config::parse(text, origin)?;
        config.validate()?;
        Ok(config)
    }

    pub fn render(&self) -> String {
        node::config::render(self)
    }

    /// Checks what parsing cannot; the error names the key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.http.validate()?;
        self.security.validate()?;
        let p = &self.pd;
        self.security
            .check_urls("pd.advertise-url", [p.advertise_url.as_str()])?;
        if p.name.is_empty() {
            return Err(ConfigError::invalid(
                "pd.name",
                "expected a name, found \"\"",
            ));
        }
        let port_ok = p
            .addr
            .rsplit_once(':')
            .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
        if !port_ok {
            return Err(ConfigError::invalid(
                "pd.addr",
                format!("expected HOST:PORT, found {:?}", p.addr),
            ));
        }
        for (key, url) in std::iter::once(("pd.advertise-url", &p.advertise_url))
            .filter(|(_, u)| !u.is_empty())
            .chain(p.etcd_endpoints.iter().map(|u| ("pd.etcd-endpoints", u)))
        {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(ConfigError::invalid(
                    key,
                    format!("expected an http:// or https:// URL, found {url:?}"),
                ));
            }
        }
        if p.cluster_name.is_empty() || p.cluster_name.contains('/') {
            return Err(ConfigError::invalid(
                "pd.cluster-name",
                format!("expected a name without '/', found {:?}", p.cluster_name),
            ));
        }
        for (key, d) in [
            ("pd.lease-ttl", p.lease_ttl),
            ("pd.tso-window", p.tso_window),
            ("pd.node-lease-ttl", p.node_lease_ttl),
            ("pd.etcd-timeout", p.etcd_timeout),
            ("pd.max-store-down-time", p.max_store_down_time),
            ("pd.schedule-interval", p.schedule_interval),
            ("pd.gc-life-time", p.gc_life_time),
        ] {
            if d.duration().is_zero() {
                return Err(ConfigError::invalid(key, "expected more than 0, found 0"));
            }
        }
        for (key, n) in [
            ("pd.max-replicas", p.max_replicas),
            ("pd.max-moves-per-store", p.max_moves_per_store),
        ] {
            if n == 0 {
                return Err(ConfigError::invalid(key, "expected at least 1, found 0"));
            }
        }
        if p.id_batch == 0 {
            return Err(ConfigError::invalid(
                "pd.id-batch",
                "expected at least 1, found 0",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_example_is_the_default() {
        let doc = include_str!("config.rs");
        let example: String = doc
            .lines()
            .skip_while(|l| !l.starts_with("//! [pd]"))
            .take_while(|l| !l.starts_with("//! ```"))
            .map(|l| l.trim_start_matches("//!").trim_start())
            .map(|l| format!("{l}\n"))
            .collect();
        let parsed = PdConfig::parse(&example, "doc").unwrap();
        assert_eq!(parsed, PdConfig::default());
    }

    #[test]
    fn an_unknown_key_and_a_bad_endpoint_are_refused_by_name() {
        let e = PdConfig::parse("[pd]\nlease = \"1s\"\n", "t").unwrap_err();
        assert!(e.to_string().contains("lease"), "{e}");
        let e = PdConfig::parse("[pd]\netcd-endpoints = [\"127.0.0.1:2379\"]\n", "t").unwrap_err();
        assert!(e.to_string().contains("pd.etcd-endpoints"), "{e}");
        let e = PdConfig::parse("[pd]\nid-batch = 0\n", "t").unwrap_err();
        assert!(e.to_string().contains("pd.id-batch"), "{e}");
    }

    #[test]
    fn min_size_gap_reaches_the_scheduler_and_a_bad_size_is_refused_by_name() {
        let c = PdConfig::parse("[pd]\nmin-size-gap = \"1GiB\"\n", "t").unwrap();
        assert_eq!(c.pd.scheduler().min_size_gap, 1 << 30);
        let c = PdConfig::parse("[pd]\nmin-size-gap = 0\n", "t").unwrap();
        assert_eq!(
            c.pd.scheduler().min_size_gap,
            0,
            "0: a share of the mean only"
        );
        let e = PdConfig::parse("[pd]\nmin-size-gap = \"big\"\n", "t").unwrap_err();
        assert!(e.to_string().contains("min-size-gap"), "{e}");
        let e = PdConfig::parse("[pd]\nmin-size-gap = -1\n", "t").unwrap_err();
        assert!(e.to_string().contains("min-size-gap"), "{e}");
    }
}
