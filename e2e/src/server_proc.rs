//! `stratus-server` processes: their config and their HTTP API, typed.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::time::Duration;

use node::HttpReply;
use wire::coprocessor::{Request, Response};
use wire::paths;
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
use crate::metrics;
use crate::process::{Proc, next_id};
use crate::s3_proc::{Store, s3_env};
use crate::worker_proc::WorkerProc;

/// A server's config file, as TOML sections; tests change keys with [`ServerConfig::set`].
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// The server's own directory: config file, data dir, stderr.
    pub dir: PathBuf,
    pub toml: toml::Table,
}

impl ServerConfig {
    /// A one-server cluster (runs the TSO) on an ephemeral port, data in `dir/data`, SSTs in
    /// `store`; never offloads; small blocks (so a few thousand rows span many); no split by
    /// size (a split mid-test would change region epochs); fsync per batch.
    pub fn new(dir: &Path, store: &Store) -> ServerConfig {
        std::fs::create_dir_all(dir).expect("server dir");
        let mut cfg = ServerConfig {
            dir: dir.to_path_buf(),
            toml: toml::Table::new(),
        };
        cfg.set("server", "addr", "127.0.0.1:0")
            .set("server", "data-dir", dir.join("data").display().to_string())
            .set("server", "node-id", 1)
            .set("server", "tso", true)
            .set("server", "region-split-size", 0)
            .set("server", "shutdown-grace", "5s")
            .set("kvengine", "block-size", "1KiB")
            .set("kvengine", "memtable-size", "16MiB")
            .set("kvengine", "remote-coprocessor-timeout", "10s")
            .set("kvengine", "remote-coprocessor-retry-backoff", "20ms");
        let mut labels = toml::Table::new();
        labels.insert("zone".into(), "a".into());
        cfg.set("server", "labels", labels);
        cfg.toml.insert("dfs".into(), store.dfs_table().into());
        cfg
    }

    pub fn set(
        &mut self,
        section: &str,
        key: &str,
        value: impl Into<toml::Value>,
    ) -> &mut ServerConfig {
        self.toml
            .entry(section)
            .or_insert_with(|| toml::Table::new().into())
            .as_table_mut()
            .expect("a section is a table")
            .insert(key.into(), value.into());
        self
    }

    /// The initial regions (`[start, end)`, empty end = unbounded), keys escaped for the file.
    pub fn ranges(&mut self, ranges: &[(Vec<u8>, Vec<u8>)]) -> &mut ServerConfig {
        let array: Vec<toml::Value> = ranges
            .iter()
            .map(|(start, end)| {
                let mut t = toml::Table::new();
                t.insert("start".into(), node::config::escape_key(start).into());
                t.insert("end".into(), node::config::escape_key(end).into());
                t.into()
            })
            .collect();
        self.set("server", "ranges", array)
    }

    /// Initial regions cut at `cuts` (ascending keys): `["", c1), [c1, c2), ..., [cn, "")`.
    pub fn regions_cut_at(&mut self, cuts: &[Vec<u8>]) -> &mut ServerConfig {
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
    pub fn offload_all_to(&mut self, worker_url: &str) -> &mut ServerConfig {
        self.set("kvengine", "remote-coprocessor-addr", worker_url)
            .set("kvengine", "remote-coprocessor-min-blocks-size", 0)
    }

    pub fn offload_all_to_worker(&mut self, worker: &WorkerProc) -> &mut ServerConfig {
        let url = worker.coprocessor_url();
        self.offload_all_to(&url)
    }

    /// Take timestamps from `tso` instead of running a TSO.
    pub fn tso_from(&mut self, tso: &ServerProc) -> &mut ServerConfig {
        self.set("server", "tso", false)
            .set("server", "tso-addr", tso.base_url().to_string())
    }

    /// Writes the file; its path.
    pub fn write(&self) -> PathBuf {
        let path = self.dir.join("server.toml");
        std::fs::write(&path, toml::to_string(&self.toml).expect("render toml")).expect("write");
        path
    }

    pub fn command(&self) -> Command {
        let mut cmd = Command::new(binaries::binary(binaries::SERVER));
        cmd.arg("--config").arg(self.write());
        s3_env(&mut cmd);
        cmd
    }
}

/// A running `stratus-server`.
pub struct ServerProc {
    proc: Proc,
    pub config: ServerConfig,
}

impl ServerProc {
    pub fn start(config: &ServerConfig) -> ServerProc {
        let stderr = config.dir.join(format!("server-{}.stderr", next_id()));
        let proc = Proc::spawn(
            "stratus-server",
            config.command(),
            "stratus-server listening on ",
            &stderr,
        );
        ServerProc {
            proc,
            config: config.clone(),
        }
    }

    /// `http://127.0.0.1:PORT`.
    /// The process id (None once it exited and was reaped).
    pub fn pid(&self) -> Option<u32> {
        self.proc.pid()
    }

    pub fn base_url(&self) -> &str {
        self.proc.base_url()
    }

    pub fn url(&self, path: &str) -> String {
        self.proc.url(path)
    }

    pub fn output_report(&self) -> String {
        self.proc.output_report()
    }

    pub fn stdout(&self) -> String {
        self.proc.stdout()
    }

    /// SIGTERM; the exit status.
    pub fn terminate(&mut self) -> ExitStatus {
        self.proc.terminate(Duration::from_secs(30))
    }

    /// SIGKILL.
    pub fn kill(&mut self) {
        self.proc.kill()
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

    /// The sum of the series of `name` matching `labels` (0 when absent).
    pub fn metric(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        metrics::sum(&self.metrics_text(), name, labels)
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
    pub fn read(server: &ServerProc) -> ServerCopCounters {
        let text = server.metrics_text();
        let s = |name: &str, labels: &[(&str, &str)]| metrics::sum(&text, name, labels);
        let requests = "stratus_server_coprocessor_requests_total";
        ServerCopCounters {
            decided_remote: s(
                "tikv_coprocessor_remote_decision_total",
                &[("result", "remote")],
            ),
            decided_local: s(
                "tikv_coprocessor_remote_decision_total",
                &[("result", "local")],
            ),
            fallbacks: s("stratus_server_offload_fallbacks_total", &[]),
            retries: s("stratus_server_offload_retries_total", &[]),
            remote: s(requests, &[("location", "remote")]),
            local: s(requests, &[("location", "local")]),
            fallback: s(requests, &[("location", "fallback")]),
            cache_hit: s(requests, &[("location", "cache_hit")]),
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
