//! `stratus-worker` processes: their config and what tests read from them.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::time::Duration;

use node::HttpReply;

use crate::binaries;
use crate::http_client::{get_text, post};
use crate::metrics;
use crate::process::{Proc, next_id};
use crate::s3_proc::{Store, s3_env};

/// A worker's config file, as TOML sections, and the environment it starts with.
#[derive(Clone, Debug)]
pub struct WorkerConfig {
    pub dir: PathBuf,
    pub toml: toml::Table,
    /// Extra environment variables of the process.
    pub env: Vec<(String, String)>,
}

impl WorkerConfig {
    /// A worker on an ephemeral port reading SSTs from `store`, with a file cache in `dir`.
    pub fn new(dir: &Path, store: &Store) -> WorkerConfig {
        std::fs::create_dir_all(dir).expect("worker dir");
        let mut cfg = WorkerConfig {
            dir: dir.to_path_buf(),
            toml: toml::Table::new(),
            env: Vec::new(),
        };
        cfg.set("worker", "addr", "127.0.0.1:0")
            .set(
                "worker",
                "cache-dir",
                dir.join("cache").display().to_string(),
            )
            .set("worker", "shutdown-grace", "5s");
        let mut labels = toml::Table::new();
        labels.insert("zone".into(), "a".into());
        cfg.set("worker", "labels", labels);
        cfg.toml.insert("dfs".into(), store.dfs_table().into());
        cfg
    }

    pub fn set(
        &mut self,
        section: &str,
        key: &str,
        value: impl Into<toml::Value>,
    ) -> &mut WorkerConfig {
        self.toml
            .entry(section)
            .or_insert_with(|| toml::Table::new().into())
            .as_table_mut()
            .expect("a section is a table")
            .insert(key.into(), value.into());
        self
    }

    /// A top-level key (`cop-topn-max-pushdown-rows`); the file lists it before the sections.
    pub fn set_top(&mut self, key: &str, value: impl Into<toml::Value>) -> &mut WorkerConfig {
        self.toml.insert(key.into(), value.into());
        self
    }

    /// An environment variable of the process.
    pub fn env(&mut self, key: &str, value: &str) -> &mut WorkerConfig {
        self.env.push((key.into(), value.into()));
        self
    }

    pub fn write(&self) -> PathBuf {
        let path = self.dir.join("worker.toml");
        std::fs::write(&path, toml::to_string(&self.toml).expect("render toml")).expect("write");
        path
    }

    pub fn command(&self) -> Command {
        let mut cmd = Command::new(binaries::binary(binaries::WORKER));
        cmd.arg("--config").arg(self.write());
        s3_env(&mut cmd);
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        cmd
    }
}

/// A running `stratus-worker`.
pub struct WorkerProc {
    proc: Proc,
}

impl WorkerProc {
    pub fn start(config: &WorkerConfig) -> WorkerProc {
        let stderr = config.dir.join(format!("worker-{}.stderr", next_id()));
        let proc = Proc::spawn(
            "stratus-worker",
            config.command(),
            "stratus-worker listening on ",
            &stderr,
        );
        WorkerProc { proc }
    }

    pub fn base_url(&self) -> &str {
        self.proc.base_url()
    }

    /// The process id (None once it exited and was reaped).
    pub fn pid(&self) -> Option<u32> {
        self.proc.pid()
    }

    /// A `VmRSS:`-style line of `/proc/PID/status` (`VmRSS`, `VmHWM`), in bytes.
    pub fn proc_status_bytes(&self, field: &str) -> u64 {
        let pid = self.pid().expect("a running worker");
        crate::process::proc_status_bytes(pid, field)
            .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
    }

    pub fn url(&self, path: &str) -> String {
        self.proc.url(path)
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
        self.proc.output_report()
    }

    pub fn terminate(&mut self) -> ExitStatus {
        self.proc.terminate(Duration::from_secs(30))
    }

    pub fn kill(&mut self) {
        self.proc.kill()
    }

    pub fn metrics_text(&self) -> String {
        get_text(&self.url("/metrics"))
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

    pub fn metric(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        metrics::sum(&self.metrics_text(), name, labels)
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
