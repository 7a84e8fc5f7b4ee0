//! `stratus-server` processes: their config (the server's own config struct, written by
//! [`harness::config_file`]) and their HTTP API, typed.

use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::time::Duration;

use harness::NodeConfig;
use harness::config_file;
use harness::http::HttpReply;
use harness::metrics::Metrics;
use harness::supervisor::{Launch, Signal};
use server::config::{KvEngineSection, PeerConfig, RangeConfig, ServerConfig, ServerSection};
use types::{ReadableDuration, ReadableSize};
use wire::coprocessor::{Request, Response};
use wire::paths;
use wire::placement::{DecisionResult, Location};
use wire::region::{
    KvPair, RawLoadRequest, RawLoadResponse, Region, RegionsResponse, SplitRequest, SplitResponse,
};
use wire::region::{TsoRequest, TsoResponse};
use wire::txn::{
    CommandResponse, CommitRequest, GetRequest, GetResponse, PrewriteRequest, PrewriteResponse,
    RollbackRequest, ScanRequest, ScanResponse,
};

use crate::binaries;
use crate::http_client::{get, get_text, post, post_proto};
use crate::process::{TestNode, log_path};
use crate::s3_proc::{Store, s3_env};
use crate::worker_proc::WorkerProc;

/// A server to start: its directory (config file, data dir, log) and its config (the server's
/// own [`ServerConfig`], which tests change field by field through `Deref`:
/// `setup.kvengine.block_size = ReadableSize::kib(4)`).
#[derive(Clone, Debug)]
pub struct ServerSetup {
    /// The server's own directory: config file, data dir, log.
    pub dir: PathBuf,
    pub config: ServerConfig,
}

impl Deref for ServerSetup {
    type Target = ServerConfig;
    fn deref(&self) -> &ServerConfig {
        &self.config
    }
}

impl DerefMut for ServerSetup {
    fn deref_mut(&mut self) -> &mut ServerConfig {
        &mut self.config
    }
}

impl ServerSetup {
    /// A one-server cluster in zone `a` (runs the TSO) on an ephemeral port, data in
    /// `dir/data`, SSTs in `store`; never offloads; small blocks (so a few thousand rows span
    /// many); no split by size (a split mid-test would change region epochs); fsync per batch.
    pub fn new(dir: &Path, store: &Store) -> ServerSetup {
        std::fs::create_dir_all(dir).expect("server dir");
        ServerSetup {
            dir: dir.to_path_buf(),
            config: ServerConfig {
                server: ServerSection {
                    addr: "127.0.0.1:0".into(),
                    data_dir: dir.join("data"),
                    node_id: 1,
                    labels: [("zone".to_string(), "a".to_string())].into(),
                    tso: true,
                    region_split_size: ReadableSize(0),
                    shutdown_grace: ReadableDuration::secs(5),
                    ..ServerSection::default()
                },
                kvengine: KvEngineSection {
                    block_size: ReadableSize::kib(1),
                    memtable_size: ReadableSize::mib(16),
                    remote_coprocessor_timeout: ReadableDuration::secs(10),
                    remote_coprocessor_retry_backoff: ReadableDuration::millis(20),
                    ..KvEngineSection::default()
                },
                dfs: store.dfs_section(),
                raft: Default::default(),
                http: Default::default(),
                security: Default::default(),
            },
        }
    }

    /// The initial regions (`[start, end)`, empty end = unbounded).
    pub fn ranges(&mut self, ranges: &[(Vec<u8>, Vec<u8>)]) -> &mut ServerSetup {
        self.config.server.ranges = ranges
            .iter()
            .map(|(start, end)| RangeConfig {
                start: node::config::escape_key(start),
                end: node::config::escape_key(end),
            })
            .collect();
        self
    }

    /// Initial regions cut at `cuts` (ascending keys): `["", c1), [c1, c2), ..., [cn, "")`.
    pub fn regions_cut_at(&mut self, cuts: &[Vec<u8>]) -> &mut ServerSetup {
        let mut bounds = vec![Vec::new()];
        bounds.extend(cuts.iter().cloned());
        bounds.push(Vec::new());
        let ranges: Vec<(Vec<u8>, Vec<u8>)> = bounds
            .windows(2)
            .map(|w| (w[0].clone(), w[1].clone()))
            .collect();
        self.ranges(&ranges)
    }

    /// Offload every coprocessor request (threshold 0) to `worker_url` (a full URL ending in
    /// `/coprocessor`).
    pub fn offload_all_to(&mut self, worker_url: &str) -> &mut ServerSetup {
        self.config.kvengine.remote_coprocessor_addr = worker_url.to_string();
        self.config.kvengine.remote_coprocessor_min_blocks_size = ReadableSize(0);
        self
    }

    pub fn offload_all_to_worker(&mut self, worker: &WorkerProc) -> &mut ServerSetup {
        let url = worker.coprocessor_url();
        self.offload_all_to(&url)
    }

    /// Take timestamps from `tso` instead of running a TSO.
    pub fn tso_from(&mut self, tso: &ServerProc) -> &mut ServerSetup {
        self.tso_at(tso.base_url())
    }

    /// Take timestamps from the server at `url` (`http://HOST:PORT`, which may not run yet)
    /// instead of running a TSO.
    pub fn tso_at(&mut self, url: &str) -> &mut ServerSetup {
        self.config.server.tso = false;
        self.config.server.tso_addr = url.to_string();
        self
    }

    /// The server's `node-id`: its SST file id prefix and, with peers, its Raft peer id.
    pub fn node_id(&mut self, id: u16) -> &mut ServerSetup {
        self.config.server.node_id = id;
        self
    }

    /// Listen on 127.0.0.1:`port` (a port known before the start, e.g. from
    /// [`harness::ports::reserve`]: peers name it, and a restart comes back on it).
    pub fn listen_port(&mut self, port: u16) -> &mut ServerSetup {
        self.config.server.addr = format!("127.0.0.1:{port}");
        self
    }

    /// The server's zone label.
    pub fn zone(&mut self, zone: &str) -> &mut ServerSetup {
        self.config
            .server
            .labels
            .insert("zone".to_string(), zone.to_string());
        self
    }

    /// Replicate every region on `peers` (`[raft] peers`; `replicas` = all of them). This
    /// server's `node_id` must be one of their ids.
    pub fn peers(&mut self, peers: Vec<PeerConfig>) -> &mut ServerSetup {
        self.config.raft.replicas = peers.len();
        self.config.raft.peers = peers;
        self
    }

    fn config_path(&self) -> PathBuf {
        self.dir.join("server.toml")
    }

    /// Writes the config file; its path.
    pub fn write(&self) -> PathBuf {
        let path = self.config_path();
        config_file::write(&path, &self.config).unwrap_or_else(|e| panic!("{e}"));
        path
    }

    /// The command running this server.
    pub fn command(&self) -> Command {
        self.command_for(&self.write())
    }

    /// The command running this server with one key the config struct cannot express (an
    /// unknown key, a value of the wrong type) set in `[section]`: for tests proving that the
    /// server refuses it.
    pub fn command_with_raw_key(
        &self,
        section: &str,
        key: &str,
        value: impl Into<toml::Value>,
    ) -> Command {
        let text = config_file::render_with_raw_key(&self.config, Some(section), key, value.into())
            .unwrap_or_else(|e| panic!("{e}"));
        let path = self.config_path();
        config_file::write_atomically(&path, &text).unwrap_or_else(|e| panic!("{e}"));
        self.command_for(&path)
    }

    fn command_for(&self, config: &Path) -> Command {
        let mut cmd = Command::new(binaries::binary(binaries::SERVER));
        cmd.arg("--config").arg(config);
        s3_env(&mut cmd);
        cmd
    }
}

/// A running `stratus-server`.
pub struct ServerProc {
    node: TestNode,
    pub config: ServerSetup,
}

impl ServerProc {
    pub fn start(setup: &ServerSetup) -> ServerProc {
        let name = format!(
            "{} {}",
            ServerConfig::PROGRAM,
            setup.dir.file_name().unwrap_or_default().to_string_lossy()
        );
        let launch = Launch::new(
            name,
            setup.command(),
            ServerConfig::PROGRAM,
            log_path(&setup.dir, "server"),
        );
        ServerProc {
            node: TestNode::start(launch),
            config: setup.clone(),
        }
    }

    /// The process id (None once it exited and was reaped).
    pub fn pid(&self) -> Option<u32> {
        self.node.pid()
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> &str {
        self.node.base_url()
    }

    pub fn url(&self, path: &str) -> String {
        self.node.url(path)
    }

    pub fn output_report(&self) -> String {
        self.node.output_report()
    }

    /// What the server wrote (stdout and stderr) since it started.
    pub fn output(&self) -> String {
        self.node.output()
    }

    /// SIGTERM; the exit status.
    pub fn terminate(&mut self) -> ExitStatus {
        self.node.terminate(Duration::from_secs(30))
    }

    /// SIGKILL.
    pub fn kill(&mut self) {
        self.node.kill()
    }

    /// Starts the server again after it exited (a SIGKILL, a SIGTERM), from the same config
    /// file and data dir, appending to the same log; panics unless it listens on the same URL.
    pub fn restart(&mut self) {
        let command = self.config.command();
        self.node.restart(command)
    }

    /// Sends `signal` (fault injection: SIGSTOP freezes the server, SIGCONT resumes it).
    pub fn signal(&mut self, signal: Signal) {
        self.node.signal(signal)
    }

    /// The exit status if the server has exited, `None` while it runs.
    pub fn try_exit(&mut self) -> Option<ExitStatus> {
        self.node.try_exit()
    }

    /// Waits up to `timeout` for the server to exit by itself (after a signal the test sent): its
    /// status, or `None` while it still runs.
    pub fn wait_for_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        self.node.wait_for_exit(timeout)
    }

    // -- cluster ---------------------------------------------------------------------------

    /// A fresh timestamp.
    pub fn tso(&self) -> u64 {
        let r: TsoResponse = post_proto(&self.url(paths::TSO), &TsoRequest { count: 1 });
        assert!(r.error.is_empty(), "tso: {}", r.error);
        r.first_ts
    }

    pub fn regions(&self) -> RegionsResponse {
        let reply = get(&self.url(paths::REGIONS));
        assert_eq!(reply.status.as_u16(), 200, "GET /regions: {reply:?}");
        prost::Message::decode(reply.body.as_ref()).expect("RegionsResponse")
    }

    /// The region holding `key`.
    pub fn region_of(&self, key: &[u8]) -> Region {
        self.regions()
            .regions
            .into_iter()
            .find(|r| r.start.as_slice() <= key && (r.end.is_empty() || key < r.end.as_slice()))
            .unwrap_or_else(|| panic!("no region holds {key:?}"))
    }

    /// Splits the region holding `key` at `key`; false (and nothing done) when `key` already
    /// starts a region.
    pub fn split_at(&self, key: Vec<u8>) -> bool {
        let region = self.region_of(&key);
        if region.start == key {
            return false;
        }
        let resp: SplitResponse = post_proto(
            &self.url(paths::SPLIT),
            &SplitRequest {
                region_id: region.id,
                split_key: key,
            },
        );
        assert!(
            resp.error.is_empty() && resp.region_error.is_none(),
            "{resp:?}"
        );
        true
    }

    /// Loads `pairs` at one fresh commit ts; that ts.
    pub fn raw_load(&self, pairs: Vec<(Vec<u8>, Vec<u8>)>) -> u64 {
        let req = RawLoadRequest {
            pairs: pairs
                .into_iter()
                .map(|(key, value)| KvPair { key, value })
                .collect(),
        };
        let r: RawLoadResponse = post_proto(&self.url(paths::RAW_LOAD), &req);
        assert!(r.error.is_none(), "raw load: {:?}", r.error);
        r.commit_ts
    }

    /// [`ServerProc::raw_load`] that reports instead of panicking: the commit ts, or why the
    /// server did not take the rows (its key error, a status other than 200, a transport error
    /// such as a refused connection or `timeout`).
    pub fn try_raw_load(
        &self,
        pairs: Vec<(Vec<u8>, Vec<u8>)>,
        timeout: Duration,
    ) -> Result<u64, String> {
        let req = RawLoadRequest {
            pairs: pairs
                .into_iter()
                .map(|(key, value)| KvPair { key, value })
                .collect(),
        };
        let r: RawLoadResponse = self.try_post_proto(paths::RAW_LOAD, &req, timeout)?;
        match r.error {
            None => Ok(r.commit_ts),
            Some(e) => Err(format!("key error: kind={} {}", e.kind, e.message)),
        }
    }

    /// [`ServerProc::get`] that reports instead of panicking: the value (None: absent), or why
    /// the server did not answer it (as [`ServerProc::try_raw_load`]).
    pub fn try_get(
        &self,
        key: &[u8],
        start_ts: u64,
        timeout: Duration,
    ) -> Result<Option<Vec<u8>>, String> {
        let req = GetRequest {
            key: key.to_vec(),
            start_ts,
            bypass_locks: Vec::new(),
        };
        let r: GetResponse = self.try_post_proto(paths::GET, &req, timeout)?;
        match r.error {
            None => Ok(r.found.then_some(r.value)),
            Some(e) => Err(format!("key error: kind={} {}", e.kind, e.message)),
        }
    }

    fn try_post_proto<Req: prost::Message, Resp: prost::Message + Default>(
        &self,
        path: &str,
        req: &Req,
        timeout: Duration,
    ) -> Result<Resp, String> {
        let url = self.url(path);
        let reply = harness::http::post_ok(&url, req.encode_to_vec(), timeout)
            .map_err(|e| e.to_string())?;
        Resp::decode(reply.body.as_ref())
            .map_err(|e| format!("POST {url}: the 200 body does not decode: {e}"))
    }

    pub fn prewrite(&self, req: &PrewriteRequest) -> PrewriteResponse {
        post_proto(&self.url(paths::PREWRITE), req)
    }

    pub fn commit(&self, req: &CommitRequest) -> CommandResponse {
        post_proto(&self.url(paths::COMMIT), req)
    }

    pub fn rollback(&self, req: &RollbackRequest) -> CommandResponse {
        post_proto(&self.url(paths::ROLLBACK), req)
    }

    pub fn get(&self, key: &[u8], start_ts: u64) -> GetResponse {
        post_proto(
            &self.url(paths::GET),
            &GetRequest {
                key: key.to_vec(),
                start_ts,
                bypass_locks: Vec::new(),
            },
        )
    }

    pub fn scan(&self, req: &ScanRequest) -> ScanResponse {
        post_proto(&self.url(paths::SCAN), req)
    }

    /// Flushes every region's memtables to L0.
    pub fn flush(&self) {
        let reply = post(&self.url(paths::ADMIN_FLUSH), Vec::new());
        assert_eq!(reply.status.as_u16(), 200, "flush: {reply:?}");
    }

    /// Flushes, then compacts L0 into the levels.
    pub fn compact(&self) {
        self.flush();
        let reply = post(&self.url(paths::ADMIN_COMPACT), Vec::new());
        assert_eq!(reply.status.as_u16(), 200, "compact: {reply:?}");
    }

    // -- coprocessor -----------------------------------------------------------------------

    /// POSTs raw bytes to `/coprocessor`.
    pub fn coprocessor_raw(&self, body: Vec<u8>) -> HttpReply {
        post(&self.url(paths::COPROCESSOR), body)
    }

    /// Sends one coprocessor request (its context must be set), expecting 200.
    pub fn coprocessor(&self, req: &Request) -> Response {
        post_proto(&self.url(paths::COPROCESSOR), req)
    }

    // -- observability ---------------------------------------------------------------------

    pub fn metrics_text(&self) -> String {
        get_text(&self.url(paths::METRICS))
    }

    /// `GET /metrics`, parsed (a page that does not parse fails the test).
    pub fn metrics(&self) -> Metrics {
        Metrics::parse(&self.metrics_text())
            .unwrap_or_else(|e| panic!("{}: GET /metrics: {e}", self.node.name()))
    }

    /// The sum of the series of `name` matching `labels`; fails the test when there is none.
    pub fn metric(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.metrics()
            .sum(name, labels)
            .unwrap_or_else(|e| panic!("{}: {e}", self.node.name()))
    }

    pub fn config_text(&self) -> String {
        get_text(&self.url(paths::CONFIG))
    }

    pub fn status_text(&self) -> String {
        get_text(&self.url(paths::STATUS))
    }
}

/// The metrics of a server's coprocessor path at one moment (to compare before and after).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ServerCopCounters {
    /// `tikv_coprocessor_remote_decision_total{result="remote"}`, every reason.
    pub decided_remote: f64,
    /// `tikv_coprocessor_remote_decision_total{result="local"}`, every reason.
    pub decided_local: f64,
    /// `stratus_server_offload_fallbacks_total`, every cause.
    pub fallbacks: f64,
    /// `stratus_server_offload_retries_total`.
    pub retries: f64,
    /// `stratus_server_coprocessor_requests_total{location=...}`.
    pub remote: f64,
    pub local: f64,
    pub fallback: f64,
    pub cache_hit: f64,
}

impl ServerCopCounters {
    /// The counters now, read strictly: the server exports every series of these closed
    /// label sets from its start (at 0), so a missing one fails the test.
    pub fn read(server: &ServerProc) -> ServerCopCounters {
        let page = server.metrics();
        let s = |name: &str, labels: &[(&str, &str)]| {
            page.sum(name, labels)
                .unwrap_or_else(|e| panic!("{}: {e}", server.node.name()))
        };
        let decisions = "tikv_coprocessor_remote_decision_total";
        let decided = |r: DecisionResult| s(decisions, &[("result", r.as_str())]);
        let requests = "stratus_server_coprocessor_requests_total";
        let answered = |l: Location| s(requests, &[("location", l.as_str())]);
        ServerCopCounters {
            decided_remote: decided(DecisionResult::Remote),
            decided_local: decided(DecisionResult::Local),
            fallbacks: s("stratus_server_offload_fallbacks_total", &[]),
            retries: s("stratus_server_offload_retries_total", &[]),
            remote: answered(Location::Remote),
            local: answered(Location::Local),
            fallback: answered(Location::Fallback),
            cache_hit: answered(Location::CacheHit),
        }
    }

    /// `self - before`, field by field.
    pub fn since(&self, before: &ServerCopCounters) -> ServerCopCounters {
        ServerCopCounters {
            decided_remote: self.decided_remote - before.decided_remote,
            decided_local: self.decided_local - before.decided_local,
            fallbacks: self.fallbacks - before.fallbacks,
            retries: self.retries - before.retries,
            remote: self.remote - before.remote,
            local: self.local - before.local,
            fallback: self.fallback - before.fallback,
            cache_hit: self.cache_hit - before.cache_hit,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_setups_tests_start_from_load_back_equal_and_valid_through_the_servers_loader() {
        let dir = tempfile::tempdir().unwrap();
        let s3 = Store::S3 {
            endpoint: "http://127.0.0.1:9".into(),
            prefix: "e2e/".into(),
            max_attempts: Some(1),
        };
        for store in [Store::Local(dir.path().join("dfs")), s3] {
            let mut setup = ServerSetup::new(&dir.path().join("server"), &store);
            setup.regions_cut_at(&[b"t\x80\x00".to_vec(), b"t\x81".to_vec()]);
            setup.offload_all_to("http://127.0.0.1:1/coprocessor");
            let text = std::fs::read_to_string(setup.write()).unwrap();
            let loaded: ServerConfig = node::config::parse(&text, "server.toml").unwrap();
            loaded.validate().unwrap();
            assert_eq!(loaded, setup.config);
            assert_eq!(loaded.initial_ranges().unwrap().len(), 3);
        }
    }
}
