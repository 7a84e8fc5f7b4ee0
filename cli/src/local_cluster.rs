//! A whole Stratus cluster on this machine, as child processes of the `stratus` executable
//! (`stratus server` / `stratus worker`): what `stratus up`, `stratus demo` and `stratus bench`
//! run.
//!
//! Three zones, a, b and c, each with a server and two workers; every region replicated on
//! the three servers (a Raft group of three voters), and the placement rule `whole-replica`
//! (a whole replica of every region in each zone, [`WHOLE_REPLICA_RULE`]) set once the
//! leaders are placed, so a zone that lost its replica of a region gets it back:
//!
//! | node        | zone | role                                                            |
//! |-------------|------|-----------------------------------------------------------------|
//! | `pd`        | -    | the placement driver on its embedded metadata store: the TSO and the id allocator |
//! | `server-a`  | a    | leads the regions of `["", K)` once started                     |
//! | `server-b`  | b    | leads the regions of `[K, "")`                                  |
//! | `server-c`  | c    | a replica of every region, leads none at first                  |
//! | `worker-a1`, `worker-a2` | a | `server-a` offloads to them                        |
//! | `worker-b1`, `worker-b2` | b | `server-b` offloads to them                        |
//! | `worker-c1`, `worker-c2` | c | `server-c` offloads to them                        |
//!
//! Every server holds both initial regions (`["", K)` is region 1, `[K, "")` region 2, the same
//! ids on every replica) and lists the three servers as its `[raft] peers`. Raft elects the
//! leaders; [`LocalCluster::start`] then moves each region's leadership to the server named
//! above (`POST /admin/transfer_leader`, [`leader_placement`](crate::leader_placement)), so
//! that queries land as they did before replication: the regions of negative handles on
//! `server-a`, the others on `server-b`. A split child starts led by its parent's leader. When a
//! server dies its regions elect a new leader among the other two within seconds; the
//! supervisor restarts the dead one and it catches up from the others' logs (or a Raft
//! snapshot). Each server offloads to the workers of its own zone.
//!
//! K is the record key of table 1, handle 0 ([`split_key`]): the catalog allocates table ids
//! from 1, so the first table created is split across both regions by the sign of its handles
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
//! Servers and clients take timestamps (and servers new region ids) from `pd`, which keeps
//! its TSO mark and id counter in `<data>/pd/meta`: a cluster restarted on its data dir
//! goes on above every timestamp it handed out.
//!
//! Ports: with `--base-port P`, `server-a` listens on P, `server-b` on P+1, the workers on
//! P+2..=P+5, `server-c` on P+6, `pd` on P+7 and `worker-c1`, `worker-c2` on P+8 and P+9. With base port 0 every node still gets a fixed port, reserved before the first
//! node starts ([`harness::ports::reserve`]), so that a node restarted after it died comes back
//! on the URL its peers and clients know.
//!
//! A node that dies is restarted by [`LocalCluster::restart_dead`] (which `stratus up` calls
//! periodically) with the same command as its first start, after a delay that doubles with
//! each restart; after five restarts within a minute it gives up ([`RestartPolicy`]).
//!
//! Layout under the data dir: `<name>.toml` (each node's config, rewritten at every start),
//! `<name>/` (each node's own directory), `logs/<name>.log` (stdout and stderr of each node,
//! appended), `objects/` (the shared local object store, unless S3), `cpu-load`.
//!
//! Each node's config is its program's config struct, built from the defaults with the settings
//! above and written by [`harness::config_file`]; each node runs under
//! [`harness::supervisor`], as the end-to-end tests' nodes do. Every child runs in its own
//! process group, so the terminal's Ctrl-C reaches only the supervising `stratus`, which then
//! stops the nodes in order ([`LocalCluster::stop`]). Dropping a [`LocalCluster`] without `stop`
//! SIGKILLs every node; a supervisor killed with SIGKILL leaves its nodes running (the kernel
//! tells nobody).

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

use client::ClientConfig;
use harness::NodeConfig;
use harness::config_file::{self, ConfigFileError, write_atomically};
use harness::http::HttpError;
use harness::ports::{self, PortError};

use crate::leader_placement;
use harness::restart_policy::{RestartDecision, RestartPolicy};
use harness::supervisor::{Launch, NodeError, NodeProcess, exit_summary};
use kvengine::DfsSection;
use pd::PdConfig;
use pd::config::PdSection;
use server::config::{KvEngineSection, RangeConfig, ServerConfig, ServerSection, WorkerEndpoint};
use server::config::{PeerConfig, RaftConfig};
use types::{ReadableDuration, ReadableSize};
use worker::{WorkerConfig, WorkerSection};

/// How long a node may take to print its listening line.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a node may take to exit after SIGTERM (its shutdown grace plus a flush).
pub const STOP_TIMEOUT: Duration = Duration::from_secs(60);
/// How long [`LocalCluster::set_cpu_load`] waits for the servers to sample the new load (a
/// sample interval, plus a busy hold when the load drops; generous for a loaded machine).
const CPU_SAMPLE_TIMEOUT: Duration = Duration::from_secs(30);
/// How often servers sample the `cpu-load` file. A sample is stale after three intervals, so
/// an idle state survives a sampler thread scheduled up to two intervals late.
const CPU_SAMPLE_INTERVAL: ReadableDuration = ReadableDuration::secs(1);
/// How long a busy sample keeps a server busy: a busy state survives a sampler thread
/// scheduled up to two seconds late, and a drop of the load shows within this time.
const CPU_BUSY_HOLD: ReadableDuration = ReadableDuration::secs(3);
/// The servers' busy threshold (the default `remote-coprocessor-load-aware-cpu-threshold`).
const CPU_BUSY_THRESHOLD: f64 = 0.8;
/// Timeout of one HTTP call to a node.
const HTTP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long every node may take to finish in-flight requests after SIGTERM: `stratus up` stops
/// quickly on Ctrl-C.
const SHUTDOWN_GRACE: ReadableDuration = ReadableDuration::secs(5);

pub struct ClusterOptions {
    pub data_dir: PathBuf,
    /// None: a local directory object store (`<data>/objects`).
    pub s3: Option<S3Target>,
    /// 0: ephemeral ports (tests, demo, bench). Otherwise `server-a` listens on this port,
    /// `server-b` on the next, then `worker-a1`, `worker-a2`, `worker-b1`, `worker-b2`,
    /// `server-c`, `pd`, `worker-c1` and `worker-c2`.
    pub base_port: u16,
    /// true: servers read their CPU load from `<data>/cpu-load` (`file:` cpu source, 1 s
    /// sampling, 3 s hold) and the load-aware force thresholds are disabled, so
    /// [`LocalCluster::set_cpu_load`] alone decides whether an offload candidate runs local
    /// (`cpu_idle`) or remote (`cpu_busy`). false: the process CPU, as in production.
    pub cpu_load_file: bool,
    /// etcd client URLs for the placement driver's metadata (`stratus up --etcd`); empty: its
    /// embedded store in `<data>/pd/`.
    pub etcd: Vec<String>,
    /// `stratus up --tls`: a throwaway CA in `<data>/tls/` signs a certificate per role, every
    /// node listens and calls over mutual TLS, and the cluster file's client is the admin.
    pub tls: bool,
}

/// The common names of a TLS cluster's certificates ([`ClusterTls`]): every node's
/// `security.node-cn` lists the three node roles, `security.admin-cn` the admin.
pub const SERVER_CN: &str = "stratus-server";
pub const WORKER_CN: &str = "stratus-worker";
pub const PD_CN: &str = "stratus-pd";
/// The operator: `stratus up` itself, the cluster file's `stratus sql` and `stratus load`.
pub const ADMIN_CN: &str = "stratus-admin";

/// A TLS cluster's certificates: one per node role and the admin's, signed by a throwaway CA
/// kept for issuing more (a test's client).
pub struct ClusterTls {
    ca: harness::certs::ThrowawayCa,
    server: node::tls::SecurityConfig,
    worker: node::tls::SecurityConfig,
    pd: node::tls::SecurityConfig,
    admin: node::tls::SecurityConfig,
    /// `admin` loaded once: this process's calls to the placement driver.
    admin_tls: std::sync::Arc<node::tls::Tls>,
}

impl ClusterTls {
    fn create(dir: &Path) -> Result<ClusterTls, ClusterError> {
        let ca = harness::certs::ThrowawayCa::create(dir, "stratus-local-ca")?;
        let admin = ca.issue(ADMIN_CN)?;
        let admin_tls = admin
            .load()
            .map_err(|e| ClusterError::Identity(e.to_string()))?
            .ok_or_else(|| ClusterError::Identity("the admin certificate has no paths".into()))?;
        Ok(ClusterTls {
            server: ca.issue(SERVER_CN)?,
            worker: ca.issue(WORKER_CN)?,
            pd: ca.issue(PD_CN)?,
            admin,
            admin_tls,
            ca,
        })
    }

    /// `base` with this cluster's tiers: the node roles, the admin.
    fn tiered(base: &node::tls::SecurityConfig) -> node::tls::SecurityConfig {
        node::tls::SecurityConfig {
            node_cn: [SERVER_CN, WORKER_CN, PD_CN].map(String::from).to_vec(),
            admin_cn: vec![ADMIN_CN.to_string()],
            ..base.clone()
        }
    }
}

/// The `[security]` of a node of `role` (none without TLS).
fn security(tls: Option<&ClusterTls>, role: Role) -> node::tls::SecurityConfig {
    tls.map(|t| {
        ClusterTls::tiered(match role {
            Role::Server => &t.server,
            Role::Worker => &t.worker,
            Role::Pd => &t.pd,
        })
    })
    .unwrap_or_default()
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
    #[error(transparent)]
    ConfigFile(#[from] ConfigFileError),
    #[error("bad cluster options: {0}")]
    Options(String),
    #[error("cannot make the TLS certificates")]
    Certs(#[from] harness::certs::CertError),
    #[error("cannot use the admin certificate: {0}")]
    Identity(String),
    #[error("cannot find the stratus executable: cause={0}")]
    Exe(std::io::Error),
    /// A node did not start, died, or did not stop in time (with the tail of its log).
    #[error(transparent)]
    Node(#[from] NodeError),
    #[error("cannot set the cpu load: {0}")]
    CpuLoad(String),
    #[error("{node}: {cause}")]
    Http { node: String, cause: HttpError },
    #[error(transparent)]
    Ports(#[from] PortError),
    /// The regions did not elect leaders, or leadership did not move where it should.
    #[error("cannot place the region leaders: {0}")]
    Leaders(String),
    /// The placement driver refused or did not answer (setting a placement rule).
    #[error("placement driver: {0}")]
    Pd(String),
    /// A node died once too often in the restart window ([`RestartPolicy`]).
    #[error("gave up restarting {node}: restarts={restarts} window={window:?}; {last}")]
    GaveUp {
        node: String,
        restarts: usize,
        window: Duration,
        /// Its last death, with the tail of its log.
        last: Box<NodeError>,
    },
}

/// The split key between the two initial regions (led by `server-a` and `server-b`): the
/// record key of table 1, handle 0.
pub fn split_key() -> Vec<u8> {
    wire::codec::table::record_key(1, 0)
}

/// The store id that should lead `region` after a start: `server-a` below [`split_key`],
/// `server-b` from it on (a region split off later has its parent's side).
fn initial_leader(region: &wire::region::Region) -> u64 {
    if region.start < split_key() { 1 } else { 2 }
}

/// The running cluster (see the module docs).
pub struct LocalCluster {
    data_dir: PathBuf,
    /// The `stratus` executable every node runs.
    exe: PathBuf,
    cpu_load_file: bool,
    /// The placement driver (set once it started).
    pd: Option<NodeInfo>,
    servers: Vec<NodeInfo>,
    workers: Vec<NodeInfo>,
    /// In start order: the placement driver, the workers, then `server-a`, `server-b` and
    /// `server-c`. Dropping one SIGKILLs it.
    nodes: Vec<Member>,
    policy: RestartPolicy,
    /// The certificates of a TLS cluster.
    tls: Option<ClusterTls>,
}

/// A node of the running cluster, and what its restarts need.
struct Member {
    spec: &'static NodeSpec,
    process: NodeProcess,
    /// When each restart of it was attempted (failed ones too), for the policy.
    restarts: Vec<Instant>,
    /// Seen dead and waiting for its restart.
    down: Option<Down>,
}

/// A death seen by [`LocalCluster::restart_dead`], not yet followed by a restart.
struct Down {
    status: ExitStatus,
    seen: Instant,
    delay: Duration,
}

/// Which program a node runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Pd,
    Server,
    Worker,
}

impl Role {
    fn subcommand(self) -> &'static str {
        match self {
            Role::Pd => PdConfig::SUBCOMMAND,
            Role::Server => ServerConfig::SUBCOMMAND,
            Role::Worker => WorkerConfig::SUBCOMMAND,
        }
    }

    fn program(self) -> &'static str {
        match self {
            Role::Pd => PdConfig::PROGRAM,
            Role::Server => ServerConfig::PROGRAM,
            Role::Worker => WorkerConfig::PROGRAM,
        }
    }
}

/// What a node is, before it runs.
struct NodeSpec {
    name: &'static str,
    zone: &'static str,
    role: Role,
    /// Offset from the base port.
    port_offset: u16,
}

/// How many nodes the cluster has (ports to reserve).
const NODES: usize = 10;

static WORKERS: [NodeSpec; 6] = [
    NodeSpec {
        name: "worker-a1",
        zone: "a",
        role: Role::Worker,
        port_offset: 2,
    },
    NodeSpec {
        name: "worker-a2",
        zone: "a",
        role: Role::Worker,
        port_offset: 3,
    },
    NodeSpec {
        name: "worker-b1",
        zone: "b",
        role: Role::Worker,
        port_offset: 4,
    },
    NodeSpec {
        name: "worker-b2",
        zone: "b",
        role: Role::Worker,
        port_offset: 5,
    },
    // Added with the whole-replica rule, after the placement driver's port.
    NodeSpec {
        name: "worker-c1",
        zone: "c",
        role: Role::Worker,
        port_offset: 8,
    },
    NodeSpec {
        name: "worker-c2",
        zone: "c",
        role: Role::Worker,
        port_offset: 9,
    },
];

/// The placement rule `stratus up` sets: a whole replica of every region in each zone.
pub const WHOLE_REPLICA_RULE: &str = "whole-replica";

/// The zones of the local cluster, each with a server and two workers.
pub const ZONES: [&str; 3] = ["a", "b", "c"];

static SERVER_A: NodeSpec = NodeSpec {
    name: "server-a",
    zone: "a",
    role: Role::Server,
    port_offset: 0,
};

static SERVER_B: NodeSpec = NodeSpec {
    name: "server-b",
    zone: "b",
    role: Role::Server,
    port_offset: 1,
};

/// Added with replication, after the workers' ports: `--base-port` keeps the ports it gave
/// before.
static SERVER_C: NodeSpec = NodeSpec {
    name: "server-c",
    zone: "c",
    role: Role::Server,
    port_offset: 6,
};

/// The placement driver (one instance on the embedded metadata store), after `server-c`'s port.
static PD: NodeSpec = NodeSpec {
    name: "pd",
    zone: "",
    role: Role::Pd,
    port_offset: 7,
};

/// The servers in start order, with their store ids (`node-id`).
static SERVERS: [(&NodeSpec, u64); 3] = [(&SERVER_A, 1), (&SERVER_B, 2), (&SERVER_C, 3)];

/// How long the regions may take to elect their first leaders and move them where
/// [`LocalCluster::start`] wants them.
const LEADER_TIMEOUT: Duration = Duration::from_secs(60);

/// The deadline of one call to the placement driver (it retries within it).
const PD_CALL_TIMEOUT: Duration = Duration::from_secs(10);

impl LocalCluster {
    /// Writes every node's config, starts the workers, then `server-a`, `server-b` and
    /// `server-c`; returns when every node listens and each region is led by the server the
    /// module docs name. A node that fails to start is an error naming it, with
    /// the tail of its log; the nodes started so far are killed. With base port 0, a failed
    /// start is tried once more on freshly reserved ports (another process may have taken one
    /// between the reservation and the node's bind).
    pub fn start(opts: ClusterOptions) -> Result<LocalCluster, ClusterError> {
        if opts.base_port != 0 && opts.base_port.checked_add(NODES as u16 - 1).is_none() {
            return Err(ClusterError::Options(format!(
                "expected a base port of at most {}, found {}",
                u16::MAX - (NODES as u16 - 1),
                opts.base_port
            )));
        }
        let data_dir = absolute(&opts.data_dir)?;
        refuse_two_server_layout(&data_dir)?;
        let opts = ClusterOptions { data_dir, ..opts };
        create_dir(&opts.data_dir.join("logs"))?;
        if opts.s3.is_none() {
            create_dir(&opts.data_dir.join("objects"))?;
        }
        if opts.cpu_load_file {
            write_atomically(&cpu_load_path(&opts.data_dir), "0\n")?;
        }
        let exe = std::env::current_exe().map_err(ClusterError::Exe)?;
        let tls = || -> Result<Option<ClusterTls>, ClusterError> {
            if !opts.tls {
                return Ok(None);
            }
            let tls = ClusterTls::create(&opts.data_dir.join("tls"))?;
            // This process calls the nodes (leaders, status, metrics) as the admin.
            harness::http::use_identity(&tls.admin)
                .map_err(|e| ClusterError::Identity(e.to_string()))?;
            Ok(Some(tls))
        };
        match Self::start_on(&exe, &opts, &node_ports(opts.base_port)?, tls()?) {
            Err(ClusterError::Node(_)) if opts.base_port == 0 => {
                Self::start_on(&exe, &opts, &node_ports(0)?, tls()?)
            }
            started => started,
        }
    }

    /// [`LocalCluster::start`] with `ports` (indexed by [`NodeSpec::port_offset`]).
    fn start_on(
        exe: &Path,
        opts: &ClusterOptions,
        ports: &[u16],
        tls: Option<ClusterTls>,
    ) -> Result<LocalCluster, ClusterError> {
        let mut cluster = LocalCluster {
            data_dir: opts.data_dir.clone(),
            exe: exe.to_path_buf(),
            cpu_load_file: opts.cpu_load_file,
            pd: None,
            servers: Vec::new(),
            workers: Vec::new(),
            nodes: Vec::new(),
            policy: RestartPolicy::default(),
            tls,
        };
        let tls = cluster.tls.as_ref();
        let pd = cluster.launch(&PD, &pd_config(opts, ports, tls))?;
        let pd_url = pd.url.clone();
        cluster.pd = Some(pd);
        for spec in &WORKERS {
            let config = worker_config(opts, ports, spec, cluster.tls.as_ref());
            let info = cluster.launch(spec, &config)?;
            cluster.workers.push(info);
        }
        let endpoint = |w: &NodeInfo| WorkerEndpoint {
            addr: format!("{}/coprocessor", w.url),
            zone: types::Zone::label(w.zone.as_str()),
        };
        for &(spec, store_id) in &SERVERS {
            // A server offloads to the workers of its zone, or to all when its zone has none.
            let mut workers: Vec<WorkerEndpoint> = cluster
                .workers
                .iter()
                .filter(|w| w.zone == spec.zone)
                .map(endpoint)
                .collect();
            if workers.is_empty() {
                workers = cluster.workers.iter().map(endpoint).collect();
            }
            let tls = cluster.tls.as_ref();
            let config = server_config(opts, ports, spec, store_id, workers, &pd_url, tls);
            let info = cluster.launch(spec, &config)?;
            cluster.servers.push(info);
        }
        leader_placement::place(
            &cluster.server_urls(),
            &|region| initial_leader(region),
            LEADER_TIMEOUT,
        )
        .map_err(|e| ClusterError::Leaders(e.to_string()))?;
        cluster.set_rule(WHOLE_REPLICA_RULE, &ZONES, None)?;
        Ok(cluster)
    }

    /// Sets the placement rule `id`: a whole replica of `table`'s keys (none: every key) in
    /// each of `zones` (`stratus ctl rules set`).
    pub fn set_rule(
        &self,
        id: &str,
        zones: &[&str],
        table: Option<i64>,
    ) -> Result<(), ClusterError> {
        let (start, end) = table
            .map(wire::codec::table::table_range)
            .unwrap_or_default();
        self.set_rule_range(id, zones, start, end)
    }

    /// Sets the placement rule `id` over the keys `[start, end)`.
    pub fn set_rule_range(
        &self,
        id: &str,
        zones: &[&str],
        start: Vec<u8>,
        end: Vec<u8>,
    ) -> Result<(), ClusterError> {
        let rule = wire::pd::PlacementRule {
            id: id.to_string(),
            start,
            end,
            zones: zones.iter().map(|z| z.to_string()).collect(),
        };
        self.pd_call(|pd| async move { pd.put_rule(rule).await.map(|_| ()) })
    }

    /// Deletes the placement rule `id`.
    pub fn delete_rule(&self, id: &str) -> Result<(), ClusterError> {
        let id = id.to_string();
        self.pd_call(|pd| async move { pd.delete_rule(&id).await.map(|_| ()) })
    }

    /// The placement driver's view of the cluster (`stratus ctl`).
    pub fn pd_view(&self) -> Result<wire::pd::ClusterView, ClusterError> {
        self.pd_call(|pd| async move { pd.cluster().await })
    }

    /// Runs `call` against this cluster's placement driver on a runtime of its own.
    fn pd_call<T, F>(&self, call: impl FnOnce(node::PdClient) -> F) -> Result<T, ClusterError>
    where
        F: std::future::Future<Output = Result<T, node::PdClientError>>,
    {
        let url = self.pd.as_ref().map(|p| p.url.clone()).unwrap_or_default();
        let tls = self.tls.as_ref().map(|t| t.admin_tls.as_ref());
        let meter = node::Meter::unlabelled(wire::traffic::Role::Client);
        let pd = node::PdClient::metered(&[url], PD_CALL_TIMEOUT, meter, tls);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| ClusterError::Pd(e.to_string()))?;
        rt.block_on(call(pd))
            .map_err(|e| ClusterError::Pd(e.to_string()))
    }

    /// `(store id, URL)` of every server, in start order.
    pub fn server_urls(&self) -> Vec<(u64, String)> {
        SERVERS
            .iter()
            .zip(&self.servers)
            .map(|((_, id), info)| (*id, info.url.clone()))
            .collect()
    }

    /// Writes `<data>/<name>.toml`, creates `<data>/<name>/`, and starts the node
    /// ([`LocalCluster::launch_command`]) with its output appended to
    /// `<data>/logs/<name>.log`.
    fn launch<C: NodeConfig>(
        &mut self,
        spec: &'static NodeSpec,
        config: &C,
    ) -> Result<NodeInfo, ClusterError> {
        debug_assert_eq!(C::SUBCOMMAND, spec.role.subcommand());
        create_dir(&self.data_dir.join(spec.name))?;
        config_file::write(&self.config_path(spec), config)?;
        let log = self.log_path(spec);
        let mut launch = Launch::new(
            spec.name,
            self.launch_command(spec),
            spec.role.program(),
            &log,
        );
        launch.start_timeout = START_TIMEOUT;
        let process = NodeProcess::start(launch)?;
        let info = NodeInfo {
            name: spec.name.into(),
            zone: spec.zone.into(),
            url: process.url().to_string(),
            log,
        };
        self.nodes.push(Member {
            spec,
            process,
            restarts: Vec::new(),
            down: None,
        });
        Ok(info)
    }

    /// The command running the node of `spec` (`stratus server` or `stratus worker` with its
    /// config file) in its own process group: the first start and every restart run this.
    fn launch_command(&self, spec: &NodeSpec) -> Command {
        let mut command = Command::new(&self.exe);
        command
            .arg(spec.role.subcommand())
            .arg("--config")
            .arg(self.config_path(spec))
            // Its own process group: the terminal's Ctrl-C goes to the supervisor only.
            .process_group(0);
        command
    }

    fn config_path(&self, spec: &NodeSpec) -> PathBuf {
        self.data_dir.join(format!("{}.toml", spec.name))
    }

    fn log_path(&self, spec: &NodeSpec) -> PathBuf {
        self.data_dir
            .join("logs")
            .join(format!("{}.log", spec.name))
    }

    /// The placement driver.
    pub fn pd(&self) -> Option<&NodeInfo> {
        self.pd.as_ref()
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

    /// A client of this cluster: the three servers, the six workers, in zone `a`.
    pub fn client_config(&self) -> ClientConfig {
        self.client_config_in("a")
    }

    /// [`LocalCluster::client_config`] for an entry node in `zone`.
    pub fn client_config_in(&self, zone: &str) -> ClientConfig {
        ClientConfig {
            servers: self.servers.iter().map(|n| n.url.clone()).collect(),
            workers: self.workers.iter().map(|n| n.url.clone()).collect(),
            pd_endpoints: self.pd.iter().map(|n| n.url.clone()).collect(),
            labels: [("zone".to_string(), zone.to_string())].into(),
            security: self
                .tls
                .as_ref()
                .map(|t| t.admin.clone())
                .unwrap_or_default(),
            ..ClientConfig::default()
        }
    }

    /// A certificate with common name `cn` from a TLS cluster's CA, as a client's
    /// `[security]` (`None` without TLS): what the nodes' name lists make of it is its tier.
    pub fn issue_certificate(
        &self,
        cn: &str,
    ) -> Result<Option<node::tls::SecurityConfig>, ClusterError> {
        self.tls.as_ref().map(|t| Ok(t.ca.issue(cn)?)).transpose()
    }

    /// Writes the cluster file (`servers`, `workers`, `labels`) `sql` and `load` read.
    pub fn write_cluster_file(&self, path: &Path) -> Result<(), ClusterError> {
        let text = format!(
            "# The local cluster of `stratus up` (data: {}); removed when it stops.\n{}",
            self.data_dir.display(),
            render_cluster_file(&self.client_config()).map_err(|e| ClusterError::Files {
                path: path.to_path_buf(),
                reason: format!("cannot render the cluster file: {e}"),
            })?
        );
        Ok(write_atomically(path, &text)?)
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
                let json: serde_json::Value = serde_json::from_str(&status).map_err(|e| {
                    ClusterError::CpuLoad(format!("{}: GET /status is not JSON: {e}", server.name))
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
        let reply = harness::http::get_ok(&format!("{}{path}", node.url), HTTP_TIMEOUT).map_err(
            |cause| ClusterError::Http {
                node: node.name.clone(),
                cause,
            },
        )?;
        Ok(harness::http::text(&reply))
    }

    /// SIGKILLs the node named `name` (fault injection: the demo's failover step);
    /// [`LocalCluster::restart_dead`] brings it back.
    pub fn kill(&mut self, name: &str) -> Result<(), ClusterError> {
        let member = self
            .nodes
            .iter_mut()
            .find(|m| m.spec.name == name)
            .ok_or_else(|| {
                ClusterError::Options(format!("expected a node name, found {name:?}"))
            })?;
        member.process.kill()?;
        Ok(())
    }

    /// Restarts the nodes that died, each once its [`RestartPolicy`] delay has passed since its
    /// death was first seen here (so call this periodically: it never sleeps for a delay). A
    /// node is restarted with its first start's command and must come back on its URL. What
    /// happened, one line per restart attempted (`server-b exited (signal: 9); restarted on
    /// http://127.0.0.1:7001 after 0.5 s`); a restart that fails is reported and tried again on
    /// a later call. [`ClusterError::GaveUp`] once a node died too often within the window:
    /// the cluster should be stopped then.
    pub fn restart_dead(&mut self) -> Result<Vec<String>, ClusterError> {
        let mut said = Vec::new();
        for i in 0..self.nodes.len() {
            let now = Instant::now();
            let member = &mut self.nodes[i];
            if member.down.is_none() {
                let Some(status) = member.process.try_exit()? else {
                    continue;
                };
                match self.policy.next_delay(&member.restarts, now) {
                    RestartDecision::After(delay) => {
                        member.down = Some(Down {
                            status,
                            seen: now,
                            delay,
                        })
                    }
                    RestartDecision::GiveUp { restarts, window } => {
                        return Err(ClusterError::GaveUp {
                            node: member.spec.name.into(),
                            restarts,
                            window,
                            last: Box::new(member.process.exited(status)),
                        });
                    }
                }
            }
            let Some(down) = member.down.take_if(|d| now >= d.seen + d.delay) else {
                continue;
            };
            let spec = member.spec;
            let command = self.launch_command(spec);
            let member = &mut self.nodes[i];
            member.restarts.push(now);
            let exited = format!("{} exited ({})", spec.name, exit_summary(down.status));
            let after = format!("{:.1} s", down.delay.as_secs_f64());
            said.push(match member.process.restart(command) {
                Ok(()) => format!(
                    "{exited}; restarted on {} after {after}",
                    member.process.url()
                ),
                Err(e) => format!("{exited}; its restart after {after} failed: {e}"),
            });
        }
        Ok(said)
    }

    /// Stops every node with SIGTERM, servers first (`server-c`, `server-b`, then `server-a`),
    /// then the workers, then `pd` (whose TSO the others use), each within [`STOP_TIMEOUT`]
    /// (SIGKILL after it).
    /// Every node is stopped even when one fails; the first failure is the error: a node that
    /// exited before, or with a non-zero status, or not in time.
    pub fn stop(mut self) -> Result<(), ClusterError> {
        let nodes = std::mem::take(&mut self.nodes);
        let mut first_error = None;
        for mut node in nodes.into_iter().rev() {
            if let Err(e) = terminate(&mut node.process) {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// SIGTERM and wait; an error unless the node was running and exits 0 in time.
fn terminate(process: &mut NodeProcess) -> Result<(), ClusterError> {
    if let Some(status) = process.try_exit()? {
        return Err(process.exited(status).into());
    }
    let status = process.stop(STOP_TIMEOUT)?;
    if status.success() {
        Ok(())
    } else {
        Err(process.exited(status).into())
    }
}

/// The cluster file: the part of a [`ClientConfig`] that names a cluster. The other client
/// settings keep their defaults, so the file stays short enough to read.
#[derive(serde::Serialize)]
#[serde(rename_all = "kebab-case")]
struct ClusterFile<'a> {
    servers: &'a [String],
    workers: &'a [String],
    pd_endpoints: &'a [String],
    labels: &'a BTreeMap<String, String>,
    /// A TLS cluster's admin certificate (`stratus sql` and `stratus load` are the admin).
    #[serde(skip_serializing_if = "Option::is_none")]
    security: Option<&'a node::tls::SecurityConfig>,
}

fn render_cluster_file(cfg: &ClientConfig) -> Result<String, toml::ser::Error> {
    toml::to_string(&ClusterFile {
        servers: &cfg.servers,
        workers: &cfg.workers,
        pd_endpoints: &cfg.pd_endpoints,
        labels: &cfg.labels,
        security: cfg.security.enabled().then_some(&cfg.security),
    })
}

/// A data dir written by a `stratus up` of before replication (two servers, each the only
/// replica of its own regions) cannot be reopened as three replicas: its regions' Raft groups
/// have one voter. Refused with what to do, rather than started half-replicated.
fn refuse_two_server_layout(data_dir: &Path) -> Result<(), ClusterError> {
    let has = |spec: &NodeSpec| data_dir.join(spec.name).exists();
    if has(&SERVER_A) && !has(&SERVER_C) {
        return Err(ClusterError::Options(format!(
            "expected a data dir of three replicated servers, found one of two standalone \
             servers (no {}/): remove it or pass another --data-dir; path={}",
            SERVER_C.name,
            data_dir.display()
        )));
    }
    Ok(())
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

/// Every node's port, indexed by [`NodeSpec::port_offset`]: consecutive from `base_port`, or
/// reserved free ports when it is 0.
fn node_ports(base_port: u16) -> Result<Vec<u16>, ClusterError> {
    if base_port == 0 {
        return Ok(ports::reserve(NODES)?);
    }
    Ok((0..NODES as u16).map(|offset| base_port + offset).collect())
}

fn listen_addr(ports: &[u16], spec: &NodeSpec) -> String {
    format!("127.0.0.1:{}", ports[usize::from(spec.port_offset)])
}

fn zone_labels(zone: &str) -> BTreeMap<String, String> {
    [("zone".to_string(), zone.to_string())].into()
}

/// The `[dfs]` section every node shares.
fn dfs_section(opts: &ClusterOptions) -> DfsSection {
    match &opts.s3 {
        None => DfsSection {
            local_dir: opts.data_dir.join("objects"),
            ..DfsSection::default()
        },
        Some(s3) => DfsSection {
            s3_bucket: s3.bucket.clone(),
            s3_endpoint: s3.endpoint.clone(),
            s3_region: std::env::var("AWS_REGION")
                .ok()
                .filter(|r| !r.is_empty())
                .unwrap_or_else(|| "us-east-1".into()),
            s3_path_style: true,
            ..DfsSection::default()
        },
    }
}

fn worker_config(
    opts: &ClusterOptions,
    ports: &[u16],
    spec: &NodeSpec,
    tls: Option<&ClusterTls>,
) -> WorkerConfig {
    WorkerConfig {
        worker: WorkerSection {
            addr: listen_addr(ports, spec),
            pd_endpoints: vec![node_url(ports, &PD, tls)],
            pd_heartbeat_interval: ReadableDuration::secs(1),
            labels: zone_labels(spec.zone),
            cache_dir: opts.data_dir.join(spec.name).join("cache"),
            shutdown_grace: SHUTDOWN_GRACE,
            ..WorkerSection::default()
        },
        dfs: dfs_section(opts),
        security: security(tls, Role::Worker),
        ..WorkerConfig::default()
    }
}

/// `http://127.0.0.1:PORT` of the node of `spec` (`https://` with TLS).
fn node_url(ports: &[u16], spec: &NodeSpec, tls: Option<&ClusterTls>) -> String {
    let scheme = if tls.is_some() { "https" } else { "http" };
    format!("{scheme}://{}", listen_addr(ports, spec))
}

/// The placement driver's config: the embedded metadata store in `<data>/pd/`.
fn pd_config(opts: &ClusterOptions, ports: &[u16], tls: Option<&ClusterTls>) -> PdConfig {
    PdConfig {
        pd: PdSection {
            name: PD.name.into(),
            addr: listen_addr(ports, &PD),
            data_dir: opts.data_dir.join(PD.name),
            etcd_endpoints: opts.etcd.clone(),
            shutdown_grace: SHUTDOWN_GRACE,
            ..PdSection::default()
        },
        security: security(tls, Role::Pd),
        ..PdConfig::default()
    }
}

/// A server's config: both initial regions, replicated on the three servers; `workers` those
/// it offloads to; timestamps and new region ids from the placement driver at `pd`.
fn server_config(
    opts: &ClusterOptions,
    ports: &[u16],
    spec: &NodeSpec,
    node_id: u64,
    workers: Vec<WorkerEndpoint>,
    pd: &str,
    tls: Option<&ClusterTls>,
) -> ServerConfig {
    let key = node::config::escape_key(&split_key());
    let server = ServerSection {
        addr: listen_addr(ports, spec),
        data_dir: opts.data_dir.join(spec.name),
        node_id: node_id as u16,
        labels: zone_labels(spec.zone),
        ranges: vec![
            RangeConfig {
                start: String::new(),
                end: key.clone(),
            },
            RangeConfig {
                start: key,
                end: String::new(),
            },
        ],
        tso: false,
        tso_addr: String::new(),
        pd_endpoints: vec![pd.to_string()],
        pd_heartbeat_interval: ReadableDuration::secs(1),
        region_split_size: ReadableSize::mib(2),
        // Check every second (default 10 s): a freshly loaded table reaches its regions within
        // seconds, and the demo and bench wait for that before they measure.
        split_check_interval: ReadableDuration::secs(1),
        shutdown_grace: SHUTDOWN_GRACE,
    };
    let raft = RaftConfig {
        peers: SERVERS
            .iter()
            .map(|&(spec, id)| PeerConfig {
                id,
                addr: node_url(ports, spec, tls),
                zone: types::Zone::label(spec.zone),
            })
            .collect(),
        replicas: SERVERS.len(),
        ..RaftConfig::default()
    };
    let kvengine = KvEngineSection {
        remote_coprocessor_workers: workers,
        remote_coprocessor_min_blocks_size: ReadableSize::kib(32),
        // Every compaction of the local cluster runs on its workers (this zone's first).
        remote_compaction: true,
        remote_compaction_min_input_size: ReadableSize(0),
        ..KvEngineSection::default()
    };
    let kvengine = if opts.cpu_load_file {
        KvEngineSection {
            remote_coprocessor_load_aware_cpu_source: format!(
                "file:{}",
                cpu_load_path(&opts.data_dir).display()
            ),
            // Seconds, not milliseconds: between `set_cpu_load` and the queries that follow,
            // a late sampler thread must not turn the state stale (`no_cpu_signal`) or end a
            // busy hold (`cpu_idle`).
            remote_coprocessor_load_aware_sample_interval: CPU_SAMPLE_INTERVAL,
            remote_coprocessor_load_aware_hold_time: CPU_BUSY_HOLD,
            // Never forced: the file alone decides between cpu_idle and cpu_busy.
            remote_coprocessor_load_aware_force_blocks_size: ReadableSize(1 << 50),
            remote_coprocessor_load_aware_force_num_ranges: 1 << 40,
            ..kvengine
        }
    } else {
        KvEngineSection {
            // An idle demo server would keep every candidate local: force them remote.
            remote_coprocessor_load_aware_force_blocks_size: ReadableSize::kib(32),
            ..kvengine
        }
    };
    ServerConfig {
        server,
        kvengine,
        dfs: dfs_section(opts),
        raft,
        security: security(tls, Role::Server),
        ..ServerConfig::default()
    }
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
            etcd: Vec::new(),
            tls: false,
        }
    }

    /// What the server loads from the file the harness writes for `cfg` (checked to load back
    /// equal) after its own validation.
    fn written_server(cfg: &ServerConfig) -> ServerConfig {
        let text = config_file::render(cfg).unwrap();
        let loaded: ServerConfig = node::config::parse(&text, "generated").unwrap();
        loaded.validate().unwrap();
        loaded
    }

    /// Ports as `--base-port 7000` gives them.
    fn ports() -> Vec<u16> {
        node_ports(7000).unwrap()
    }

    fn workers(zone: &str) -> Vec<WorkerEndpoint> {
        vec![WorkerEndpoint {
            addr: "http://127.0.0.1:1/coprocessor".into(),
            zone: types::Zone::label(zone),
        }]
    }

    #[test]
    fn every_server_replicates_both_regions_split_at_table_one_handle_zero() {
        let key = split_key();
        let configs: Vec<ServerConfig> = SERVERS
            .iter()
            .map(|&(spec, id)| {
                written_server(&server_config(
                    &opts(false, 7000),
                    &ports(),
                    spec,
                    id,
                    workers(spec.zone),
                    "http://127.0.0.1:7007",
                    None,
                ))
            })
            .collect();
        let peers: Vec<(u64, &str, Option<types::Zone>)> = vec![
            (1, "http://127.0.0.1:7000", types::Zone::label("a")),
            (2, "http://127.0.0.1:7001", types::Zone::label("b")),
            (3, "http://127.0.0.1:7006", types::Zone::label("c")),
        ];
        for (cfg, (id, addr, zone)) in configs.iter().zip(&peers) {
            assert_eq!(
                cfg.initial_ranges().unwrap(),
                vec![(vec![], key.clone()), (key.clone(), vec![])]
            );
            assert_eq!(cfg.raft.replicas, 3);
            let listed: Vec<(u64, &str, Option<types::Zone>)> = cfg
                .raft
                .peers
                .iter()
                .map(|p| (p.id, p.addr.as_str(), p.zone.clone()))
                .collect();
            assert_eq!(listed, peers);
            assert_eq!(u64::from(cfg.server.node_id), *id);
            assert_eq!(format!("http://{}", cfg.server.addr), *addr);
            assert_eq!(&cfg.zone(), zone);
        }
        for cfg in &configs {
            assert!(!cfg.server.tso);
            assert_eq!(cfg.server.pd_endpoints, ["http://127.0.0.1:7007"]);
        }
        let pd = pd_config(&opts(false, 7000), &ports(), None);
        assert_eq!(pd.pd.addr, "127.0.0.1:7007");
        assert!(
            pd.pd.etcd_endpoints.is_empty(),
            "one machine: the embedded store"
        );
        let with_etcd = ClusterOptions {
            etcd: vec!["http://127.0.0.1:2379".into()],
            ..opts(false, 7000)
        };
        assert_eq!(
            pd_config(&with_etcd, &ports(), None).pd.etcd_endpoints,
            ["http://127.0.0.1:2379"]
        );
        assert!(wire::codec::table::record_key(1, -1) < key);
        assert!(wire::codec::table::record_key(1, 1) > key);
        let region = |start: Vec<u8>| wire::region::Region {
            start,
            ..Default::default()
        };
        assert_eq!(initial_leader(&region(Vec::new())), 1);
        assert_eq!(
            initial_leader(&region(wire::codec::table::record_key(1, -5))),
            1
        );
        assert_eq!(initial_leader(&region(key.clone())), 2);
        assert_eq!(
            initial_leader(&region(wire::codec::table::record_key(2, -5))),
            2
        );
    }

    #[test]
    fn the_cpu_load_file_replaces_the_process_cpu_and_the_force_thresholds() {
        let cfg = written_server(&server_config(
            &opts(true, 0),
            &ports(),
            &SERVER_A,
            1,
            Vec::new(),
            "http://127.0.0.1:9",
            None,
        ));
        assert_eq!(
            cfg.cpu_source().unwrap(),
            server::cpu_load::CpuSource::File(PathBuf::from("/d/cpu-load"))
        );
        let la = cfg.offload_policy().load_aware.unwrap();
        assert!(la.force_blocks_size >= 1 << 50);
        let cfg = written_server(&server_config(
            &opts(false, 0),
            &ports(),
            &SERVER_A,
            1,
            Vec::new(),
            "http://127.0.0.1:9",
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
        let o = opts(false, 7000);
        let text = config_file::render(&worker_config(
            &o,
            &node_ports(7000).unwrap(),
            &WORKERS[3],
            None,
        ))
        .unwrap();
        let cfg = WorkerConfig::parse(&text, "generated").unwrap();
        assert_eq!(cfg.worker.addr, "127.0.0.1:7005");
        assert_eq!(cfg.worker.labels.get("zone").map(String::as_str), Some("b"));
        assert_eq!(cfg.dfs.local_dir, PathBuf::from("/d/objects"));
        assert_eq!(cfg.worker.cache_dir, PathBuf::from("/d/worker-b2/cache"));
    }

    #[test]
    fn base_port_zero_gives_every_node_a_fixed_port_of_its_own() {
        let ports = node_ports(0).unwrap();
        assert_eq!(ports.len(), NODES);
        let distinct: std::collections::BTreeSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), NODES, "{ports:?}");
        assert!(!ports.contains(&0), "{ports:?}");
        let specs = WORKERS
            .iter()
            .chain(SERVERS.iter().map(|(spec, _)| *spec))
            .chain([&PD]);
        let addrs: std::collections::BTreeSet<String> =
            specs.map(|spec| listen_addr(&ports, spec)).collect();
        assert_eq!(addrs.len(), NODES, "{addrs:?}");
        let server = written_server(&server_config(
            &opts(false, 0),
            &ports,
            &SERVER_B,
            2,
            Vec::new(),
            "http://127.0.0.1:9",
            None,
        ));
        assert_eq!(server.server.addr, format!("127.0.0.1:{}", ports[1]));
    }

    /// A cluster in `dir` of one node, `worker-a1`, run by a fake `stratus` that announces
    /// `http://127.0.0.1:1` and sleeps, with `policy`.
    fn fake_cluster(dir: &Path, policy: RestartPolicy) -> LocalCluster {
        use std::os::unix::fs::PermissionsExt;
        let exe = dir.join("fake-stratus");
        std::fs::write(
            &exe,
            "#!/bin/sh\necho 'stratus-worker listening on http://127.0.0.1:1'\nexec sleep 30\n",
        )
        .unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut cluster = LocalCluster {
            data_dir: dir.to_path_buf(),
            exe,
            cpu_load_file: false,
            pd: None,
            servers: Vec::new(),
            workers: Vec::new(),
            nodes: Vec::new(),
            policy,
            tls: None,
        };
        let config = worker_config(&opts(false, 7000), &ports(), &WORKERS[0], None);
        // The script was just written: a process forked meanwhile by another test's thread
        // may still hold it open for writing until it execs, and the kernel refuses to run it
        // then (ETXTBSY). Try again a little later.
        let mut tries = 0;
        let info = loop {
            match cluster.launch(&WORKERS[0], &config) {
                Err(ClusterError::Node(NodeError::Spawn { cause, .. }))
                    if cause.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 100 =>
                {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(10));
                }
                launched => break launched.unwrap(),
            }
        };
        cluster.workers.push(info);
        cluster
    }

    fn kill_worker(cluster: &mut LocalCluster) {
        cluster.nodes[0].process.kill().unwrap();
    }

    #[test]
    fn restart_dead_waits_for_the_policys_delay_then_restarts_on_the_same_url() {
        let dir = tempfile::tempdir().unwrap();
        let policy = RestartPolicy {
            first_delay: Duration::from_millis(300),
            ..RestartPolicy::default()
        };
        let mut cluster = fake_cluster(dir.path(), policy);
        assert_eq!(cluster.restart_dead().unwrap(), Vec::<String>::new());
        let first_pid = cluster.nodes[0].process.pid().unwrap();
        kill_worker(&mut cluster);
        let seen = Instant::now();
        assert_eq!(
            cluster.restart_dead().unwrap(),
            Vec::<String>::new(),
            "no restart before the delay"
        );
        let said = loop {
            let said = cluster.restart_dead().unwrap();
            if !said.is_empty() {
                break said;
            }
            assert!(seen.elapsed() < Duration::from_secs(10), "never restarted");
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(seen.elapsed() >= Duration::from_millis(300));
        assert_eq!(
            said,
            ["worker-a1 exited (signal: 9); restarted on http://127.0.0.1:1 after 0.3 s"]
        );
        let process = &cluster.nodes[0].process;
        assert_ne!(process.pid(), Some(first_pid));
        assert!(process.pid().is_some());
        assert_eq!(process.restarts(), 1);
    }

    #[test]
    fn restart_dead_gives_up_once_the_policy_does_naming_the_node() {
        let dir = tempfile::tempdir().unwrap();
        let policy = RestartPolicy {
            first_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(2),
            max_restarts: 2,
            window: Duration::from_secs(60),
        };
        let mut cluster = fake_cluster(dir.path(), policy);
        let mut restarted = 0;
        let error = loop {
            if cluster.nodes[0].process.pid().is_some() {
                kill_worker(&mut cluster);
            }
            std::thread::sleep(Duration::from_millis(5));
            match cluster.restart_dead() {
                Ok(said) => restarted += said.len(),
                Err(e) => break e,
            }
            assert!(restarted <= 2, "restarted past the policy");
        };
        assert_eq!(restarted, 2);
        let text = error.to_string();
        assert!(
            matches!(&error, ClusterError::GaveUp { node, restarts: 2, .. } if node == "worker-a1"),
            "{text}"
        );
        assert!(
            text.starts_with("gave up restarting worker-a1: restarts=2 window=60s; "),
            "{text}"
        );
    }

    #[test]
    fn a_data_dir_of_two_standalone_servers_is_refused_naming_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        assert!(refuse_two_server_layout(dir.path()).is_ok(), "an empty dir");
        std::fs::create_dir(dir.path().join("server-a")).unwrap();
        let err = refuse_two_server_layout(dir.path())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("remove it or pass another --data-dir"),
            "{err}"
        );
        std::fs::create_dir(dir.path().join("server-c")).unwrap();
        assert!(
            refuse_two_server_layout(dir.path()).is_ok(),
            "three servers"
        );
    }

    #[test]
    fn s3_replaces_the_local_directory() {
        let mut o = opts(false, 0);
        o.s3 = Some(S3Target {
            endpoint: "http://127.0.0.1:9000".into(),
            bucket: "stratus".into(),
        });
        let dfs = dfs_section(&o);
        assert_eq!(dfs.s3_bucket, "stratus");
        assert_eq!(dfs.s3_endpoint, "http://127.0.0.1:9000");
        assert!(dfs.s3_path_style);
        assert!(dfs.to_dfs_config().is_ok());
    }

    #[test]
    fn the_cluster_file_loads_back_as_the_clusters_client_config() {
        let cfg = ClientConfig {
            servers: vec!["http://127.0.0.1:1".into(), "http://127.0.0.1:2".into()],
            workers: vec!["http://127.0.0.1:3".into()],
            pd_endpoints: vec!["http://127.0.0.1:4".into()],
            labels: zone_labels("a"),
            ..ClientConfig::default()
        };
        let text = render_cluster_file(&cfg).unwrap();
        assert_eq!(crate::cluster_file::parse(&text).unwrap(), cfg);
        assert_eq!(
            text,
            "servers = [\"http://127.0.0.1:1\", \"http://127.0.0.1:2\"]\n\
             workers = [\"http://127.0.0.1:3\"]\n\
             pd-endpoints = [\"http://127.0.0.1:4\"]\n\n[labels]\nzone = \"a\"\n"
        );
        // A TLS cluster's file carries the admin's certificate, and its https URLs.
        let https = |u: &Vec<String>| u.iter().map(|u| u.replace("http:", "https:")).collect();
        let tls = ClientConfig {
            servers: https(&cfg.servers),
            workers: https(&cfg.workers),
            pd_endpoints: https(&cfg.pd_endpoints),
            security: ClusterTls::tiered(&node::tls::SecurityConfig {
                ca_path: "/d/tls/ca.pem".into(),
                cert_path: "/d/tls/stratus-admin.pem".into(),
                key_path: "/d/tls/stratus-admin-key.pem".into(),
                ..node::tls::SecurityConfig::default()
            }),
            ..cfg
        };
        let text = render_cluster_file(&tls).unwrap();
        assert!(text.contains("[security]"), "{text}");
        assert_eq!(crate::cluster_file::parse(&text).unwrap(), tls);
    }
}
