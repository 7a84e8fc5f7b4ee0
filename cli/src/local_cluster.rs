//! A whole Stratus cluster on this machine, as child processes of the `stratus` executable
//! (`stratus server` / `stratus worker`): what `stratus up`, `stratus demo` and `stratus bench`
//! run.
//!
//! Two zones, each with one server and two workers:
//!
//! | node        | zone | role                                                            |
//! |-------------|------|-----------------------------------------------------------------|
//! | `server-a`  | a    | runs the TSO; owns the keys `["", K)`                           |
//! | `server-b`  | b    | timestamps from `server-a`; owns `[K, "")`                      |
//! | `worker-a1`, `worker-a2` | a | `server-a` offloads to them                        |
//! | `worker-b1`, `worker-b2` | b | `server-b` offloads to them                        |
//!
//! K is the record key of table 1, handle 0 ([`split_key`]): the catalog allocates table ids
//! from 1, so the first table created is split across both servers by the sign of its handles
//! (and `stratus load` centres its handles on 0).
//!
//! Settings that differ from the embedded defaults, and why:
//! * `remote-coprocessor-min-blocks-size = 32KiB`: a demo table of a few MiB per region must be
//!   a candidate for offloading (the default, 32 MiB, suits production regions);
//! * `region-split-size = 2MiB` (default 256 MiB): so that a 200,000-row sample table (about
//!   7 MiB per server) has a few regions per server, as a real table does;
//! * the load-aware force thresholds: with the process CPU as signal, `32KiB` (an idle demo
//!   server would otherwise keep every candidate local); with the `cpu-load` file
//!   ([`ClusterOptions::cpu_load_file`]), never, so the file alone decides;
//! * `shutdown-grace = 5s`: `stratus up` stops quickly on Ctrl-C.
//!
//! Layout under the data dir: `<name>.toml` (each node's config, rewritten at every start),
//! `<name>/` (each node's own directory), `logs/<name>.log` (stdout and stderr of each node,
//! appended), `objects/` (the shared local object store, unless S3), `cpu-load`.
//!
//! Every child runs in its own process group, so the terminal's Ctrl-C reaches only the
//! supervising `stratus`, which then stops the nodes in order ([`LocalCluster::stop`]).
//! Dropping a [`LocalCluster`] without `stop` SIGKILLs every node; a supervisor killed with
//! SIGKILL leaves its nodes running (the kernel tells nobody).

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use client::ClientConfig;

use crate::node_http;

/// How long a node may take to print its listening line.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a node may take to exit after SIGTERM (its shutdown grace plus a flush).
pub const STOP_TIMEOUT: Duration = Duration::from_secs(60);
/// How long [`LocalCluster::set_cpu_load`] waits for the servers to sample the new load.
const CPU_SAMPLE_TIMEOUT: Duration = Duration::from_secs(10);
/// The servers' busy threshold (the default `remote-coprocessor-load-aware-cpu-threshold`).
const CPU_BUSY_THRESHOLD: f64 = 0.8;
/// Timeout of one HTTP call to a node.
const HTTP_TIMEOUT: Duration = Duration::from_secs(30);

pub struct ClusterOptions {
    pub data_dir: PathBuf,
    /// None: a local directory object store (`<data>/objects`).
    pub s3: Option<S3Target>,
    /// 0: ephemeral ports (tests, demo, bench). Otherwise `server-a` listens on this port,
    /// `server-b` on the next, then `worker-a1`, `worker-a2`, `worker-b1`, `worker-b2`.
    pub base_port: u16,
    /// true: servers read their CPU load from `<data>/cpu-load` (`file:` cpu source, 100 ms
    /// sampling, short hold) and the load-aware force thresholds are disabled, so
    /// [`LocalCluster::set_cpu_load`] alone decides whether an offload candidate runs local
    /// (`cpu_idle`) or remote (`cpu_busy`). false: the process CPU, as in production.
    pub cpu_load_file: bool,
}

/// An S3-compatible object store; credentials come from the usual AWS environment variables
/// (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`), which the nodes inherit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Target {
    pub endpoint: String,
    pub bucket: String,
}

/// A node of the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    pub name: String,
    pub zone: String,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// stdout and stderr of the node.
    pub log: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("cannot prepare the cluster files: path={} reason={reason}", path.display())]
    Files { path: PathBuf, reason: String },
    #[error("bad cluster options: {0}")]
    Options(String),
    #[error("cannot start {node}: {reason}")]
    Spawn { node: String, reason: String },
    #[error("{node} did not print its listening line: {reason}; log={}\n{tail}", log.display())]
    NotListening {
        node: String,
        reason: String,
        log: PathBuf,
        tail: String,
    },
    #[error("{node} exited: status={status} log={}\n{tail}", log.display())]
    Exited {
        node: String,
        status: String,
        log: PathBuf,
        tail: String,
    },
    #[error("{node} did not exit within {timeout:?} of SIGTERM and was killed: log={}", log.display())]
    StopTimeout {
        node: String,
        timeout: Duration,
        log: PathBuf,
    },
    #[error("cannot set the cpu load: {0}")]
    CpuLoad(String),
    #[error("{node}: {reason}")]
    Http { node: String, reason: String },
}

/// The split key between `server-a` and `server-b`: the record key of table 1, handle 0.
pub fn split_key() -> Vec<u8> {
    wire::codec::table::record_key(1, 0)
}

/// A running node process.
struct NodeProcess {
    info: NodeInfo,
    child: Child,
}

/// The running cluster (see the module docs).
pub struct LocalCluster {
    data_dir: PathBuf,
    cpu_load_file: bool,
    servers: Vec<NodeInfo>,
    workers: Vec<NodeInfo>,
    /// In start order: workers, then `server-a`, then `server-b`.
    nodes: Vec<NodeProcess>,
}

/// What a node is, before it runs.
struct NodeSpec {
    name: &'static str,
    zone: &'static str,
    kind: Kind,
    /// Offset from the base port.
    port_offset: u16,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Server,
    Worker,
}

impl Kind {
    fn subcommand(self) -> &'static str {
        match self {
            Kind::Server => "server",
            Kind::Worker => "worker",
        }
    }

    fn listening_prefix(self) -> &'static str {
        match self {
            Kind::Server => "stratus-server listening on ",
            Kind::Worker => "stratus-worker listening on ",
        }
    }
}

const WORKERS: [NodeSpec; 4] = [
    NodeSpec {
        name: "worker-a1",
        zone: "a",
        kind: Kind::Worker,
        port_offset: 2,
    },
    NodeSpec {
        name: "worker-a2",
        zone: "a",
        kind: Kind::Worker,
        port_offset: 3,
    },
    NodeSpec {
        name: "worker-b1",
        zone: "b",
        kind: Kind::Worker,
        port_offset: 4,
    },
    NodeSpec {
        name: "worker-b2",
        zone: "b",
        kind: Kind::Worker,
        port_offset: 5,
    },
];

const SERVER_A: NodeSpec = NodeSpec {
    name: "server-a",
    zone: "a",
    kind: Kind::Server,
    port_offset: 0,
};

const SERVER_B: NodeSpec = NodeSpec {
    name: "server-b",
    zone: "b",
    kind: Kind::Server,
    port_offset: 1,
};

impl LocalCluster {
    /// Writes every node's config, starts the workers, then `server-a`, then `server-b`;
    /// returns when every node listens. A node that fails to start is an error naming it, with
    /// the tail of its log; the nodes started so far are killed.
    pub fn start(opts: ClusterOptions) -> Result<LocalCluster, ClusterError> {
        if opts.base_port != 0 && opts.base_port.checked_add(5).is_none() {
            return Err(ClusterError::Options(format!(
                "expected a base port of at most {}, found {}",
                u16::MAX - 5,
                opts.base_port
            )));
        }
        let data_dir = absolute(&opts.data_dir)?;
        let opts = ClusterOptions { data_dir, ..opts };
        create_dir(&opts.data_dir.join("logs"))?;
        if opts.s3.is_none() {
            create_dir(&opts.data_dir.join("objects"))?;
        }
        if opts.cpu_load_file {
            write_atomically(&cpu_load_path(&opts.data_dir), "0\n")?;
        }
        let exe = std::env::current_exe().map_err(|e| ClusterError::Spawn {
            node: "any node".into(),
            reason: format!("cannot find the stratus executable: {e}"),
        })?;
        let mut cluster = LocalCluster {
            data_dir: opts.data_dir.clone(),
            cpu_load_file: opts.cpu_load_file,
            servers: Vec::new(),
            workers: Vec::new(),
            nodes: Vec::new(),
        };
        for spec in &WORKERS {
            let config = worker_config(&opts, spec);
            let info = cluster.launch(&exe, &opts, spec, &config)?;
            cluster.workers.push(info);
        }
        let zone_workers = |zone: &str| -> Vec<(String, String)> {
            cluster
                .workers
                .iter()
                .filter(|w| w.zone == zone)
                .map(|w| (format!("{}/coprocessor", w.url), w.zone.clone()))
                .collect()
        };
        let (a_workers, b_workers) = (zone_workers("a"), zone_workers("b"));
        let key = split_key();
        let config = server_config(&opts, &SERVER_A, 1, (&[], &key), &a_workers, None);
        let a = cluster.launch(&exe, &opts, &SERVER_A, &config)?;
        let config = server_config(&opts, &SERVER_B, 2, (&key, &[]), &b_workers, Some(&a.url));
        cluster.servers.push(a);
        let b = cluster.launch(&exe, &opts, &SERVER_B, &config)?;
        cluster.servers.push(b);
        Ok(cluster)
    }

    /// Writes `<data>/<name>.toml`, spawns the node with its output appended to its log, and
    /// waits for its listening line.
    fn launch(
        &mut self,
        exe: &Path,
        opts: &ClusterOptions,
        spec: &NodeSpec,
        config: &toml::Table,
    ) -> Result<NodeInfo, ClusterError> {
        create_dir(&opts.data_dir.join(spec.name))?;
        let config_path = opts.data_dir.join(format!("{}.toml", spec.name));
        let text = toml::to_string(config).map_err(|e| ClusterError::Files {
            path: config_path.clone(),
            reason: format!("cannot render the config: {e}"),
        })?;
        write_atomically(&config_path, &text)?;
        let log = opts
            .data_dir
            .join("logs")
            .join(format!("{}.log", spec.name));
        let files_err = |e: std::io::Error| ClusterError::Files {
            path: log.clone(),
            reason: e.to_string(),
        };
        let out = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(files_err)?;
        let offset = out.metadata().map_err(files_err)?.len();
        let err = out.try_clone().map_err(files_err)?;
        let child = Command::new(exe)
            .arg(spec.kind.subcommand())
            .arg("--config")
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            // Its own process group: the terminal's Ctrl-C goes to the supervisor only.
            .process_group(0)
            .spawn()
            .map_err(|e| ClusterError::Spawn {
                node: spec.name.into(),
                reason: format!("{}: {e}", exe.display()),
            })?;
        self.nodes.push(NodeProcess {
            info: NodeInfo {
                name: spec.name.into(),
                zone: spec.zone.into(),
                url: String::new(),
                log: log.clone(),
            },
            child,
        });
        let node = self.nodes.last_mut().expect("just pushed");
        let url = wait_listening(node, spec.kind.listening_prefix(), offset)?;
        node.info.url = url;
        Ok(node.info.clone())
    }

    pub fn servers(&self) -> &[NodeInfo] {
        &self.servers
    }

    pub fn workers(&self) -> &[NodeInfo] {
        &self.workers
    }

    /// The data dir (absolute).
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// A client of this cluster: both servers, the four workers, in zone `a`.
    pub fn client_config(&self) -> ClientConfig {
        ClientConfig {
            servers: self.servers.iter().map(|n| n.url.clone()).collect(),
            workers: self.workers.iter().map(|n| n.url.clone()).collect(),
            labels: [("zone".to_string(), "a".to_string())].into(),
            ..ClientConfig::default()
        }
    }

    /// Writes the cluster file (`servers`, `workers`, `labels`) `sql` and `load` read.
    pub fn write_cluster_file(&self, path: &Path) -> Result<(), ClusterError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            create_dir(dir)?;
        }
        let cfg = self.client_config();
        let mut t = toml::Table::new();
        t.insert("servers".into(), strings(&cfg.servers));
        t.insert("workers".into(), strings(&cfg.workers));
        let mut labels = toml::Table::new();
        labels.insert("zone".into(), "a".into());
        t.insert("labels".into(), labels.into());
        let text = format!(
            "# The local cluster of `stratus up` (data: {}); removed when it stops.\n{}",
            self.data_dir.display(),
            toml::to_string(&t).map_err(|e| ClusterError::Files {
                path: path.to_path_buf(),
                reason: format!("cannot render the cluster file: {e}"),
            })?
        );
        write_atomically(path, &text)
    }

    /// Sets the CPU load (a fraction of all cores, in [0, 1]) both servers read from
    /// `<data>/cpu-load`, and waits until both have sampled it: at or above 0.8 they are busy
    /// (offload candidates go remote, `cpu_busy`), below it idle (`cpu_idle`). Only for a
    /// cluster started with [`ClusterOptions::cpu_load_file`].
    pub fn set_cpu_load(&self, fraction: f64) -> Result<(), ClusterError> {
        if !self.cpu_load_file {
            return Err(ClusterError::CpuLoad(
                "the servers read their process CPU (start the cluster with cpu_load_file)".into(),
            ));
        }
        if !(0.0..=1.0).contains(&fraction) {
            return Err(ClusterError::CpuLoad(format!(
                "expected a fraction in [0, 1], found {fraction}"
            )));
        }
        write_atomically(&cpu_load_path(&self.data_dir), &format!("{fraction}\n"))?;
        let want_state = if fraction >= CPU_BUSY_THRESHOLD {
            "Busy"
        } else {
            "Idle"
        };
        let deadline = Instant::now() + CPU_SAMPLE_TIMEOUT;
        for server in &self.servers {
            loop {
                let status = self.get(server, wire::paths::STATUS)?;
                let json: serde_json::Value =
                    serde_json::from_str(&status).map_err(|e| ClusterError::Http {
                        node: server.name.clone(),
                        reason: format!("GET /status is not JSON: {e}"),
                    })?;
                let cpu = &json["cpu"];
                let sampled = cpu["last_sample"]
                    .as_f64()
                    .is_some_and(|s| (s - fraction).abs() < 1e-9);
                let state = cpu["state"].as_str().unwrap_or("");
                if sampled && state == want_state {
                    break;
                }
                if Instant::now() > deadline {
                    return Err(ClusterError::CpuLoad(format!(
                        "{} did not sample {fraction} within {CPU_SAMPLE_TIMEOUT:?}: \
                         expected state {want_state}, found cpu={cpu}",
                        server.name
                    )));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Ok(())
    }

    /// `(server name, GET /metrics text)` of each server.
    pub fn server_metrics(&self) -> Result<Vec<(String, String)>, ClusterError> {
        self.servers
            .iter()
            .map(|s| Ok((s.name.clone(), self.get(s, wire::paths::METRICS)?)))
            .collect()
    }

    /// The body of a 200 answer to `GET path` on `node`.
    fn get(&self, node: &NodeInfo, path: &str) -> Result<String, ClusterError> {
        let http = |reason: String| ClusterError::Http {
            node: node.name.clone(),
            reason,
        };
        let reply = node_http::get(&node.url, path, HTTP_TIMEOUT).map_err(http)?;
        if reply.status != 200 {
            return Err(http(format!(
                "GET {path}: expected status 200, found {}: {}",
                reply.status,
                reply.text().trim()
            )));
        }
        Ok(reply.text())
    }

    /// An error naming the first node that has exited (the cluster should be stopped then).
    pub fn check_running(&mut self) -> Result<(), ClusterError> {
        for node in &mut self.nodes {
            if let Ok(Some(status)) = node.child.try_wait() {
                return Err(exited(&node.info, status, 0));
            }
        }
        Ok(())
    }

    /// Stops every node with SIGTERM, servers first (`server-b`, then `server-a`, whose TSO
    /// `server-b` uses), then the workers, each within [`STOP_TIMEOUT`] (SIGKILL after it).
    /// Every node is stopped even when one fails; the first failure is the error: a node that
    /// exited before, or with a non-zero status, or not in time.
    pub fn stop(mut self) -> Result<(), ClusterError> {
        let nodes = std::mem::take(&mut self.nodes);
        let mut first_error = None;
        for mut node in nodes.into_iter().rev() {
            if let Err(e) = terminate(&mut node) {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

impl Drop for LocalCluster {
    /// SIGKILL every node still running (never leaves processes behind).
    fn drop(&mut self) {
        for node in &mut self.nodes {
            let _ = node.child.kill();
            let _ = node.child.wait();
        }
    }
}

/// SIGTERM and wait; an error unless the node exits 0 in time.
fn terminate(node: &mut NodeProcess) -> Result<(), ClusterError> {
    if let Ok(Some(status)) = node.child.try_wait() {
        return Err(exited(&node.info, status, 0));
    }
    let pid = i32::try_from(node.child.id()).map_err(|_| ClusterError::Spawn {
        node: node.info.name.clone(),
        reason: format!("a process id out of range: {}", node.child.id()),
    })?;
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    );
    let deadline = Instant::now() + STOP_TIMEOUT;
    loop {
        match node.child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(status)) => return Err(exited(&node.info, status, 0)),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = node.child.kill();
                let _ = node.child.wait();
                return Err(ClusterError::StopTimeout {
                    node: node.info.name.clone(),
                    timeout: STOP_TIMEOUT,
                    log: node.info.log.clone(),
                });
            }
        }
    }
}

/// Waits for `prefix` followed by the node's URL in its log past `offset` (this start's
/// output); an error with the log's tail when the node exits first or stays silent.
fn wait_listening(
    node: &mut NodeProcess,
    prefix: &str,
    offset: u64,
) -> Result<String, ClusterError> {
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        let text = read_from(&node.info.log, offset);
        if let Some(url) = text
            .lines()
            .find_map(|l| l.trim().strip_prefix(prefix))
            .map(|u| u.trim().trim_end_matches('/').to_string())
        {
            return Ok(url);
        }
        if let Ok(Some(status)) = node.child.try_wait() {
            return Err(exited(&node.info, status, offset));
        }
        if Instant::now() > deadline {
            return Err(ClusterError::NotListening {
                node: node.info.name.clone(),
                reason: format!("nothing within {START_TIMEOUT:?}"),
                log: node.info.log.clone(),
                tail: tail(&text, 40),
            });
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

fn exited(info: &NodeInfo, status: ExitStatus, offset: u64) -> ClusterError {
    ClusterError::Exited {
        node: info.name.clone(),
        status: status.to_string(),
        log: info.log.clone(),
        tail: tail(&read_from(&info.log, offset), 40),
    }
}

/// The file's text from byte `offset` ("" when unreadable: only used in messages and polls).
fn read_from(path: &Path, offset: u64) -> String {
    let mut text = Vec::new();
    if let Ok(mut f) = File::open(path)
        && f.seek(SeekFrom::Start(offset)).is_ok()
    {
        let _ = f.read_to_end(&mut text);
    }
    String::from_utf8_lossy(&text).into_owned()
}

/// The last `lines` lines of `text`.
fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn cpu_load_path(data_dir: &Path) -> PathBuf {
    data_dir.join("cpu-load")
}

fn absolute(path: &Path) -> Result<PathBuf, ClusterError> {
    std::path::absolute(path).map_err(|e| ClusterError::Files {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })
}

fn create_dir(dir: &Path) -> Result<(), ClusterError> {
    std::fs::create_dir_all(dir).map_err(|e| ClusterError::Files {
        path: dir.to_path_buf(),
        reason: e.to_string(),
    })
}

/// Writes to a temporary name and renames, so a reader (a server sampling `cpu-load`, a
/// `stratus sql` reading the cluster file) never sees half a file.
fn write_atomically(path: &Path, text: &str) -> Result<(), ClusterError> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| ClusterError::Files {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })
}

fn strings(items: &[String]) -> toml::Value {
    toml::Value::Array(items.iter().map(|s| s.clone().into()).collect())
}

fn listen_addr(opts: &ClusterOptions, spec: &NodeSpec) -> String {
    let port = if opts.base_port == 0 {
        0
    } else {
        opts.base_port + spec.port_offset
    };
    format!("127.0.0.1:{port}")
}

fn zone_labels(zone: &str) -> toml::Value {
    let mut labels = toml::Table::new();
    labels.insert("zone".into(), zone.into());
    labels.into()
}

/// The `[dfs]` section every node shares.
fn dfs_table(opts: &ClusterOptions) -> toml::Table {
    let mut t = toml::Table::new();
    match &opts.s3 {
        None => {
            let dir = opts.data_dir.join("objects");
            t.insert("local-dir".into(), dir.display().to_string().into());
        }
        Some(s3) => {
            let region = std::env::var("AWS_REGION")
                .ok()
                .filter(|r| !r.is_empty())
                .unwrap_or_else(|| "us-east-1".into());
            t.insert("s3-bucket".into(), s3.bucket.clone().into());
            t.insert("s3-endpoint".into(), s3.endpoint.clone().into());
            t.insert("s3-region".into(), region.into());
            t.insert("s3-path-style".into(), true.into());
        }
    }
    t
}

fn worker_config(opts: &ClusterOptions, spec: &NodeSpec) -> toml::Table {
    let dir = opts.data_dir.join(spec.name);
    let mut worker = toml::Table::new();
    worker.insert("addr".into(), listen_addr(opts, spec).into());
    worker.insert("labels".into(), zone_labels(spec.zone));
    worker.insert(
        "cache-dir".into(),
        dir.join("cache").display().to_string().into(),
    );
    worker.insert("shutdown-grace".into(), "5s".into());
    let mut t = toml::Table::new();
    t.insert("worker".into(), worker.into());
    t.insert("dfs".into(), dfs_table(opts).into());
    t
}

/// A server's config: `range` is `(start, end)` (empty end = unbounded), `workers` the
/// `(coprocessor URL, zone)` it offloads to, `tso` the URL of the TSO server (None: runs it).
fn server_config(
    opts: &ClusterOptions,
    spec: &NodeSpec,
    node_id: u16,
    range: (&[u8], &[u8]),
    workers: &[(String, String)],
    tso: Option<&str>,
) -> toml::Table {
    let mut server = toml::Table::new();
    server.insert("addr".into(), listen_addr(opts, spec).into());
    server.insert(
        "data-dir".into(),
        opts.data_dir.join(spec.name).display().to_string().into(),
    );
    server.insert("node-id".into(), i64::from(node_id).into());
    server.insert("labels".into(), zone_labels(spec.zone));
    let mut r = toml::Table::new();
    r.insert("start".into(), node::config::escape_key(range.0).into());
    r.insert("end".into(), node::config::escape_key(range.1).into());
    server.insert("ranges".into(), toml::Value::Array(vec![r.into()]));
    server.insert("tso".into(), tso.is_none().into());
    if let Some(url) = tso {
        server.insert("tso-addr".into(), url.into());
    }
    server.insert("region-split-size".into(), "2MiB".into());
    // Check every second (default 10 s): a freshly loaded table reaches its regions within
    // seconds, and the demo and bench wait for that before they measure.
    server.insert("split-check-interval".into(), "1s".into());
    server.insert("shutdown-grace".into(), "5s".into());

    let mut kv = toml::Table::new();
    let list = workers
        .iter()
        .map(|(addr, zone)| {
            let mut w = toml::Table::new();
            w.insert("addr".into(), addr.clone().into());
            w.insert("zone".into(), zone.clone().into());
            w.into()
        })
        .collect();
    kv.insert(
        "remote-coprocessor-workers".into(),
        toml::Value::Array(list),
    );
    kv.insert("remote-coprocessor-min-blocks-size".into(), "32KiB".into());
    if opts.cpu_load_file {
        let source = format!("file:{}", cpu_load_path(&opts.data_dir).display());
        kv.insert(
            "remote-coprocessor-load-aware-cpu-source".into(),
            source.into(),
        );
        kv.insert(
            "remote-coprocessor-load-aware-sample-interval".into(),
            "100ms".into(),
        );
        kv.insert(
            "remote-coprocessor-load-aware-hold-time".into(),
            "200ms".into(),
        );
        // Never forced: the file alone decides between cpu_idle and cpu_busy.
        kv.insert(
            "remote-coprocessor-load-aware-force-blocks-size".into(),
            "1024TiB".into(),
        );
        kv.insert(
            "remote-coprocessor-load-aware-force-num-ranges".into(),
            (1i64 << 40).into(),
        );
    } else {
        // An idle demo server would keep every candidate local: force them remote.
        kv.insert(
            "remote-coprocessor-load-aware-force-blocks-size".into(),
            "32KiB".into(),
        );
    }
    let mut t = toml::Table::new();
    t.insert("server".into(), server.into());
    t.insert("kvengine".into(), kv.into());
    t.insert("dfs".into(), dfs_table(opts).into());
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(cpu_load_file: bool, base_port: u16) -> ClusterOptions {
        ClusterOptions {
            data_dir: PathBuf::from("/d"),
            s3: None,
            base_port,
            cpu_load_file,
        }
    }

    fn parse_server(t: &toml::Table) -> server::config::ServerConfig {
        let text = toml::to_string(t).unwrap();
        let cfg: server::config::ServerConfig = node::config::parse(&text, "generated").unwrap();
        cfg.validate().unwrap();
        cfg
    }

    #[test]
    fn the_servers_split_the_key_space_at_table_one_handle_zero() {
        let key = split_key();
        let workers = vec![("http://127.0.0.1:1/coprocessor".into(), "a".into())];
        let a = parse_server(&server_config(
            &opts(false, 0),
            &SERVER_A,
            1,
            (&[], &key),
            &workers,
            None,
        ));
        let b = parse_server(&server_config(
            &opts(false, 0),
            &SERVER_B,
            2,
            (&key, &[]),
            &workers,
            Some("http://127.0.0.1:9"),
        ));
        assert_eq!(a.initial_ranges().unwrap(), vec![(vec![], key.clone())]);
        assert_eq!(b.initial_ranges().unwrap(), vec![(key.clone(), vec![])]);
        assert!(a.server.tso && !b.server.tso);
        assert_eq!(b.server.tso_addr, "http://127.0.0.1:9");
        assert_eq!((a.zone(), b.zone()), ("a", "b"));
        assert_ne!(a.server.node_id, b.server.node_id);
        assert!(wire::codec::table::record_key(1, -1) < key);
        assert!(wire::codec::table::record_key(1, 1) > key);
    }

    #[test]
    fn the_cpu_load_file_replaces_the_process_cpu_and_the_force_thresholds() {
        let key = split_key();
        let cfg = parse_server(&server_config(
            &opts(true, 0),
            &SERVER_A,
            1,
            (&[], &key),
            &[],
            None,
        ));
        assert_eq!(
            cfg.cpu_source().unwrap(),
            server::cpu_load::CpuSource::File(PathBuf::from("/d/cpu-load"))
        );
        let la = cfg.offload_policy().load_aware.unwrap();
        assert!(la.force_blocks_size >= 1 << 50);
        let cfg = parse_server(&server_config(
            &opts(false, 0),
            &SERVER_A,
            1,
            (&[], &key),
            &[],
            None,
        ));
        assert_eq!(
            cfg.cpu_source().unwrap(),
            server::cpu_load::CpuSource::Process
        );
        assert_eq!(cfg.offload_policy().min_blocks_size, 32 * 1024);
    }

    #[test]
    fn workers_get_their_zone_the_shared_store_and_consecutive_ports() {
        let t = worker_config(&opts(false, 7000), &WORKERS[3]);
        let text = toml::to_string(&t).unwrap();
        let cfg: worker::WorkerConfig = node::config::parse(&text, "generated").unwrap();
        assert_eq!(cfg.worker.addr, "127.0.0.1:7005");
        assert_eq!(cfg.worker.labels.get("zone").map(String::as_str), Some("b"));
        assert_eq!(cfg.dfs.local_dir, PathBuf::from("/d/objects"));
    }

    #[test]
    fn s3_replaces_the_local_directory() {
        let mut o = opts(false, 0);
        o.s3 = Some(S3Target {
            endpoint: "http://127.0.0.1:9000".into(),
            bucket: "stratus".into(),
        });
        let t = dfs_table(&o);
        assert_eq!(t["s3-bucket"].as_str(), Some("stratus"));
        assert_eq!(t["s3-endpoint"].as_str(), Some("http://127.0.0.1:9000"));
        assert!(!t.contains_key("local-dir"));
    }
}
