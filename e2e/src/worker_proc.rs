//! `stratus-worker` processes: their config and what tests read from them.

use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::time::Duration;

use harness::NodeConfig;
use harness::config_file;
use harness::http::HttpReply;
use harness::metrics::Metrics;
use harness::supervisor::{Launch, Signal};
use types::ReadableDuration;
use worker::{WorkerConfig, WorkerSection};

use crate::binaries;
use crate::http_client::{get_text, post};
use crate::process::{TestNode, log_path};
use crate::s3_proc::{Store, s3_env};

/// A worker to start: its directory (config file, file cache, log), its config (the worker's
/// own [`WorkerConfig`], which tests change field by field through `Deref`) and the
/// environment it starts with.
#[derive(Clone, Debug)]
pub struct WorkerSetup {
    pub dir: PathBuf,
    pub config: WorkerConfig,
    /// Extra environment variables of the process.
    pub env: Vec<(String, String)>,
}

impl Deref for WorkerSetup {
    type Target = WorkerConfig;
    fn deref(&self) -> &WorkerConfig {
        &self.config
    }
}

impl DerefMut for WorkerSetup {
    fn deref_mut(&mut self) -> &mut WorkerConfig {
        &mut self.config
    }
}

impl WorkerSetup {
    /// A worker in zone `a` on an ephemeral port reading SSTs from `store`, with a file cache
    /// in `dir`.
    pub fn new(dir: &Path, store: &Store) -> WorkerSetup {
        std::fs::create_dir_all(dir).expect("worker dir");
        WorkerSetup {
            dir: dir.to_path_buf(),
            config: WorkerConfig {
                worker: WorkerSection {
                    addr: "127.0.0.1:0".into(),
                    labels: [("zone".to_string(), "a".to_string())].into(),
                    cache_dir: dir.join("cache"),
                    shutdown_grace: ReadableDuration::secs(5),
                    ..WorkerSection::default()
                },
                dfs: store.dfs_section(),
                ..WorkerConfig::default()
            },
            env: Vec::new(),
        }
    }

    /// An environment variable of the process.
    pub fn env(&mut self, key: &str, value: &str) -> &mut WorkerSetup {
        self.env.push((key.into(), value.into()));
        self
    }

    fn config_path(&self) -> PathBuf {
        self.dir.join("worker.toml")
    }

    /// Writes the config file; its path.
    pub fn write(&self) -> PathBuf {
        let path = self.config_path();
        config_file::write(&path, &self.config).unwrap_or_else(|e| panic!("{e}"));
        path
    }

    /// The command running this worker.
    pub fn command(&self) -> Command {
        self.command_for(&self.write())
    }

    /// The command running this worker with one key the config struct cannot express (an
    /// unknown key, a value of the wrong type) set in `[section]`: for tests proving that the
    /// worker refuses it.
    pub fn command_with_raw_key(
        &self,
        section: Option<&str>,
        key: &str,
        value: impl Into<toml::Value>,
    ) -> Command {
        let text = config_file::render_with_raw_key(&self.config, section, key, value.into())
            .unwrap_or_else(|e| panic!("{e}"));
        let path = self.config_path();
        config_file::write_atomically(&path, &text).unwrap_or_else(|e| panic!("{e}"));
        self.command_for(&path)
    }

    fn command_for(&self, config: &Path) -> Command {
        let mut cmd = Command::new(binaries::binary(binaries::WORKER));
        cmd.arg("--config").arg(config);
        s3_env(&mut cmd);
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        cmd
    }
}

/// A running `stratus-worker`.
pub struct WorkerProc {
    node: TestNode,
}

impl WorkerProc {
    pub fn start(setup: &WorkerSetup) -> WorkerProc {
        let name = format!(
            "{} {}",
            WorkerConfig::PROGRAM,
            setup.dir.file_name().unwrap_or_default().to_string_lossy()
        );
        let launch = Launch::new(
            name,
            setup.command(),
            WorkerConfig::PROGRAM,
            log_path(&setup.dir, "worker"),
        );
        WorkerProc {
            node: TestNode::start(launch),
        }
    }

    pub fn base_url(&self) -> &str {
        self.node.base_url()
    }

    /// The process id (None once it exited and was reaped).
    pub fn pid(&self) -> Option<u32> {
        self.node.pid()
    }

    /// A `VmRSS:`-style line of `/proc/PID/status` (`VmRSS`, `VmHWM`), in bytes.
    pub fn proc_status_bytes(&self, field: &str) -> u64 {
        let pid = self.pid().expect("a running worker");
        crate::process::proc_status_bytes(pid, field)
            .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
    }

    pub fn url(&self, path: &str) -> String {
        self.node.url(path)
    }

    /// The URL a server offloads to.
    pub fn coprocessor_url(&self) -> String {
        self.url("/coprocessor")
    }

    /// POSTs raw bytes to `/coprocessor`.
    pub fn post_coprocessor(&self, body: Vec<u8>) -> HttpReply {
        post(&self.coprocessor_url(), body)
    }

    pub fn output_report(&self) -> String {
        self.node.output_report()
    }

    pub fn terminate(&mut self) -> ExitStatus {
        self.node.terminate(Duration::from_secs(30))
    }

    pub fn kill(&mut self) {
        self.node.kill()
    }

    /// Sends `signal` (fault injection: SIGSTOP freezes the worker, SIGCONT resumes it).
    pub fn signal(&mut self, signal: Signal) {
        self.node.signal(signal)
    }

    /// The exit status if the worker has exited, `None` while it runs.
    pub fn try_exit(&mut self) -> Option<ExitStatus> {
        self.node.try_exit()
    }

    /// Waits up to `timeout` for the worker to exit by itself (after a signal the test sent): its
    /// status, or `None` while it still runs.
    pub fn wait_for_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        self.node.wait_for_exit(timeout)
    }

    pub fn metrics_text(&self) -> String {
        get_text(&self.url("/metrics"))
    }

    /// `GET /metrics`, parsed (a page that does not parse fails the test).
    pub fn metrics(&self) -> Metrics {
        Metrics::parse(&self.metrics_text())
            .unwrap_or_else(|e| panic!("{}: GET /metrics: {e}", self.node.name()))
    }

    /// Resets the process's peak resident set (`VmHWM`) to its current one (`echo 5 >
    /// /proc/PID/clear_refs`); false when the kernel refuses.
    pub fn reset_peak_rss(&self) -> bool {
        let pid = self.pid().expect("a running worker");
        std::fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok()
    }

    /// `GET /status`, parsed.
    pub fn status(&self) -> serde_json::Value {
        let text = get_text(&self.url("/status"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("GET /status: {e}: {text}"))
    }

    /// The sum of the series of `name` matching `labels`; fails the test when there is none
    /// (the worker exports every series of its metrics from its start).
    pub fn metric(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.metrics()
            .sum(name, labels)
            .unwrap_or_else(|e| panic!("{}: {e}", self.node.name()))
    }

    /// `stratus_worker_coprocessor_requests_total{result}`.
    pub fn requests(&self, result: &str) -> f64 {
        self.metric(
            "stratus_worker_coprocessor_requests_total",
            &[("result", result)],
        )
    }

    /// `stratus_worker_in_flight_requests`.
    pub fn in_flight(&self) -> f64 {
        self.metric("stratus_worker_in_flight_requests", &[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_setups_tests_start_from_load_back_equal_and_valid_through_the_workers_loader() {
        let dir = tempfile::tempdir().unwrap();
        let s3 = Store::S3 {
            endpoint: "http://127.0.0.1:9".into(),
            prefix: "e2e/".into(),
            max_attempts: None,
        };
        for store in [Store::Local(dir.path().join("dfs")), s3] {
            let mut setup = WorkerSetup::new(&dir.path().join("worker"), &store);
            setup.cop_topn_max_pushdown_rows = 100;
            let loaded = WorkerConfig::load(Some(&setup.write())).unwrap();
            assert_eq!(loaded, setup.config);
        }
    }
}
