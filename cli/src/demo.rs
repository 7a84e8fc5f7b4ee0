//! `stratus demo`: the first command of the README. It starts a local cluster in a temporary
//! directory, loads the sample table and walks through what Stratus decides and why, in output
//! meant to be read by a person:
//!
//! 1. the nodes (two servers, four workers, zones `a` and `b`);
//! 2. the load of table `t` (progress bar on stderr, rows/s), then a flush of every server:
//!    the offload estimate counts SST blocks only, so data still in memtables would look small;
//! 3. local or offloaded, and why: a query over a small table stays local (too small to be
//!    worth shipping, even on a busy server); the whole-table aggregate stays local on an idle
//!    server (`cpu_idle`) and goes to a worker on a busy one (`cpu_busy`). The CPU load is the
//!    cluster's `cpu-load` file ([`LocalCluster::set_cpu_load`]), so the demo is the same on
//!    any machine;
//! 4. the coprocessor cache: the same aggregate again is answered from the cache
//!    (`cache_hit=true`), and how much faster that is;
//! 5. node selection on the delegate path: the same aggregate under each value of
//!    `tidb_tiflash_node_selection_policy`, which worker read which region, and `SHOW WARNINGS`;
//! 6. the servers' decision counters (`tikv_coprocessor_remote_decision_total`), counted
//!    from the first query of step 3 (the loads' own reads are left out);
//! 7. a clean stop of every node, and the total time.
//!
//! Every claim the demo prints is checked against what the cluster answered: a region that
//! ran elsewhere than the step says is a [`DemoError::Unexpected`], not a misleading line.
//!
//! The client admits every result to the coprocessor cache (admission minimum process time
//! 0 instead of 5 ms) so that step 4 shows a hit for every region even with few rows.
//!
//! The pieces both `demo` and `bench` need (a started and loaded cluster, EXPLAIN's region
//! rows, the decision counters) are here too, as [`LoadedCluster`], [`region_rows`] and
//! [`decision_counts`].

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use client::sql::{Engine, QueryResult, TableSchema};
use client::{Client, ClientConfig};
use cop::datum::Datum;

use crate::local_cluster::{ClusterError, ClusterOptions, LocalCluster, NodeInfo};
use crate::sample_table::{self, LoadError};
use crate::table_format;

/// The sample table's name in the demo and the benchmark.
pub const TABLE: &str = "t";

/// Rows per load transaction (the `stratus load` default).
const LOAD_BATCH: usize = 5000;

/// How long a flush of one server may take.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(600);

/// The whole-table aggregate of steps 3 to 5.
const AGGREGATE: &str = "SELECT grp, COUNT(*), SUM(v), AVG(v) FROM t GROUP BY grp ORDER BY grp";

/// The small table of step 3, and its rows: far below `remote-coprocessor-min-blocks-size`.
const SMALL_TABLE: &str = "t_small";
const SMALL_ROWS: u64 = 100;

/// The narrow query of step 3. (`WHERE id BETWEEN 0 AND 99` on `t` would not do: the
/// estimate counts whole SST blocks (64 KiB by default), so even the few blocks holding those
/// rows exceed the local cluster's `remote-coprocessor-min-blocks-size` of 32 KiB, and a busy
/// server ships it.)
const NARROW: &str = "SELECT COUNT(*), SUM(v) FROM t_small";

/// The policies of step 5, in the order shown.
const POLICIES: [&str; 3] = [
    "all_nodes",
    "priority_local_zone_nodes",
    "only_local_zone_nodes",
];

/// `stratus demo` options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DemoOptions {
    /// Rows of the sample table (fewer: a faster demo; tests use 20,000).
    pub rows: u64,
}

impl Default for DemoOptions {
    fn default() -> Self {
        DemoOptions { rows: 200_000 }
    }
}

/// A step shared by `demo` and `bench` failed.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    #[error("local cluster: {0}")]
    Cluster(#[from] ClusterError),
    #[error("loading the sample table: {0}")]
    Load(#[from] LoadError),
    #[error("cannot create the temporary data directory: path={path}: {source}")]
    TempDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot start the tokio runtime: {0}")]
    Runtime(std::io::Error),
    #[error("cannot start the client: {0}")]
    Client(String),
    #[error("statement failed: sql={sql:?} error={message}")]
    Statement { sql: String, message: String },
    #[error("flush failed: server={server} reason={reason}")]
    Flush { server: String, reason: String },
    #[error("regions did not settle: server={server} reason={reason}")]
    Regions { server: String, reason: String },
    #[error("EXPLAIN answered no column {column:?}: sql={sql:?}")]
    ExplainColumns { sql: String, column: &'static str },
    #[error("cannot write output: {0}")]
    Output(#[from] std::io::Error),
}

/// Why `stratus demo` failed (printed by `main` as `Error: ...`; exit code 1).
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error(transparent)]
    Step(#[from] StepError),
    /// The cluster did not behave as the step explains.
    #[error("{step}: expected {expected}, found {found}")]
    Unexpected {
        step: &'static str,
        expected: String,
        found: String,
    },
}

impl From<std::io::Error> for DemoError {
    fn from(e: std::io::Error) -> Self {
        DemoError::Step(StepError::Output(e))
    }
}

/// Runs the demo, printing to stdout (the load progress bar goes to stderr).
pub fn run(opts: DemoOptions) -> Result<(), DemoError> {
    let mut out = std::io::stdout().lock();
    run_to(&opts, &mut out)
}

/// [`run`], printing to `out`.
pub fn run_to(opts: &DemoOptions, out: &mut dyn Write) -> Result<(), DemoError> {
    let started = Instant::now();
    writeln!(
        out,
        "Stratus demo: a local cluster, {} rows, and what runs where.",
        opts.rows
    )?;
    heading(out, "1. the cluster")?;
    let lab = LoadedCluster::start(out)?;
    heading(out, "2. the sample table")?;
    lab.load(opts.rows, out)?;
    let names = NodeNames::of(&lab.cluster);
    let mut client_config = lab.cluster.client_config();
    client_config.cop_cache.admission_min_process_time = service::ReadableDuration::millis(0);
    let client = lab.client(client_config)?;
    let mut session = Session::new(&lab, &client);

    // 3. Local or offloaded, and why.
    heading(out, "3. local or offloaded, and why")?;
    writeln!(
        out,
        "The server decides per region: too few SST blocks to be worth shipping stays local; \
         a big one stays local while the server's CPU is idle and goes to a worker of its \
         zone when it is busy.\n"
    )?;
    session.execute("SET stratus_cop_cache = OFF")?;
    lab.load_table(SMALL_TABLE, SMALL_ROWS, out)?;
    // The decisions of step 6 are those of the queries from here on, not of the loads.
    let before = decision_counts(&lab.cluster)?;
    lab.cluster.set_cpu_load(1.0).map_err(StepError::from)?;
    writeln!(out, "\nCPU load 100%, a small table: {NARROW}")?;
    let narrow = session.explained(NARROW)?;
    print_regions(out, &narrow, &names)?;
    expect_all(&narrow, "small query", "every region local", |r| {
        r.place() == Place::Local && r.has_reason("below_min_blocks_size")
    })?;
    writeln!(
        out,
        "→ too small to be worth shipping (below remote-coprocessor-min-blocks-size): local \
         even on a busy server"
    )?;

    lab.cluster.set_cpu_load(0.0).map_err(StepError::from)?;
    writeln!(out, "\nCPU load 0%, whole-table aggregate: {AGGREGATE}")?;
    let idle = session.explained(AGGREGATE)?;
    print_regions(out, &idle, &names)?;
    expect_any(
        &idle,
        "idle server",
        "a local region with reason cpu_idle",
        |r| r.place() == Place::Local && r.has_reason("cpu_idle"),
    )?;
    let t = Instant::now();
    let answer = session.execute(AGGREGATE)?;
    writeln!(out, "\nThe answer ({}):", ms(t.elapsed()))?;
    out.write_all(table_format::render(&answer.columns, &answer.rows).as_bytes())?;

    lab.cluster.set_cpu_load(1.0).map_err(StepError::from)?;
    writeln!(out, "\nCPU load 100%, the same aggregate:")?;
    let busy = session.explained(AGGREGATE)?;
    print_regions(out, &busy, &names)?;
    expect_any(
        &busy,
        "busy server",
        "a remote region with reason cpu_busy",
        |r| r.place() == Place::Remote && r.has_reason("cpu_busy"),
    )?;
    writeln!(
        out,
        "\nidle: {} local; busy: {} offloaded to a worker",
        ms(idle.elapsed),
        ms(busy.elapsed)
    )?;

    // 4. The coprocessor cache.
    heading(out, "4. the coprocessor cache")?;
    writeln!(
        out,
        "A repeated request carries the version of its cached result; the server answers \
         \"still valid\" without running it while nothing in the region changed.\n"
    )?;
    session.execute("SET stratus_cop_cache = ON")?;
    let first = session.explained(AGGREGATE)?;
    writeln!(out, "first run ({}):", ms(first.elapsed))?;
    print_regions(out, &first, &names)?;
    let repeat = session.explained(AGGREGATE)?;
    writeln!(out, "\nrepeated run ({}):", ms(repeat.elapsed))?;
    print_regions(out, &repeat, &names)?;
    expect_all(
        &repeat,
        "repeated aggregate",
        "cache_hit=true on every region",
        |r| r.detail("cache_hit") == "true",
    )?;
    writeln!(
        out,
        "\nfirst {} → repeated {}: {:.1}× faster",
        ms(first.elapsed),
        ms(repeat.elapsed),
        ratio(first.elapsed, repeat.elapsed)
    )?;

    // 5. Node selection on the delegate path.
    heading(out, "5. node selection (the delegate path)")?;
    writeln!(
        out,
        "With stratus_remote_coprocessor = ON the client sends each region straight to a \
         worker chosen by tidb_tiflash_node_selection_policy. This client is in zone a; \
         each region has its one replica on the server owning it."
    )?;
    session.execute("SET stratus_cop_cache = OFF")?;
    session.execute("SET stratus_remote_coprocessor = ON")?;
    let owners = region_owners(&idle, &names);
    for policy in POLICIES {
        session.execute(&format!(
            "SET tidb_tiflash_node_selection_policy = {policy}"
        ))?;
        let run = session.explained(AGGREGATE)?;
        let warnings = session.execute("SHOW WARNINGS")?;
        writeln!(out, "\n{policy} ({}):", ms(run.elapsed))?;
        let placed = print_selection(out, &run, &owners, &names)?;
        out.write_all(table_format::render(&warnings.columns, &warnings.rows).as_bytes())?;
        let warned = !run.warnings.is_empty() || !warnings.rows.is_empty();
        writeln!(out, "→ {}", explain_policy(policy, &placed, warned)?)?;
    }
    session.execute("SET stratus_remote_coprocessor = OFF")?;

    // 6. Decision counts.
    heading(out, "6. the servers' decisions")?;
    writeln!(
        out,
        "tikv_coprocessor_remote_decision_total{{result,reason}} from each server's /metrics, \
         counted since the first query of step 3: one per region request a server decided (cache hits, \
         requests below the size threshold and delegated ones are not decisions):\n"
    )?;
    let after = decision_counts(&lab.cluster)?;
    out.write_all(render_decisions(&decision_delta(&before, &after)).as_bytes())?;

    // 7. Stop.
    drop(session);
    drop(client);
    heading(out, "7. stop")?;
    lab.stop()?;
    writeln!(out, "every node stopped cleanly")?;
    writeln!(
        out,
        "demo finished in {:.1} s",
        started.elapsed().as_secs_f64()
    )?;
    Ok(())
}

/// `== title ==` with a blank line before.
fn heading(out: &mut dyn Write, title: &str) -> std::io::Result<()> {
    writeln!(out, "\n== {title} ==")
}

/// `12.3 ms`.
pub(crate) fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// `a / b`, with a zero `b` counted as a microsecond.
pub(crate) fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64().max(1e-6)
}

/// A started local cluster, its temporary data directory, and the runtime clients run on.
pub struct LoadedCluster {
    /// Declared before `dir`: dropped (children killed) before the directory is removed.
    pub cluster: LocalCluster,
    pub rt: tokio::runtime::Runtime,
    dir: TempDir,
}

impl LoadedCluster {
    /// Starts a local cluster (ephemeral ports, CPU load from the `cpu-load` file) in a new
    /// temporary directory and prints its nodes to `log`.
    pub fn start(log: &mut dyn Write) -> Result<LoadedCluster, StepError> {
        let dir = TempDir::new()?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(StepError::Runtime)?;
        let t = Instant::now();
        let cluster = LocalCluster::start(ClusterOptions {
            data_dir: dir.path().to_path_buf(),
            s3: None,
            base_port: 0,
            cpu_load_file: true,
        })?;
        writeln!(
            log,
            "started {} servers and {} workers in {:.1} s (data in {}):",
            cluster.servers().len(),
            cluster.workers().len(),
            t.elapsed().as_secs_f64(),
            dir.path().display()
        )?;
        log.write_all(render_nodes(&cluster).as_bytes())?;
        Ok(LoadedCluster { cluster, rt, dir })
    }

    /// Creates [`TABLE`], loads `rows` rows with a progress bar on stderr, prints the load rate
    /// to `log`, then flushes every server so that the rows are in SST files.
    pub fn load(&self, rows: u64, log: &mut dyn Write) -> Result<TableSchema, StepError> {
        self.load_table(TABLE, rows, log)
    }

    /// [`LoadedCluster::load`] into the sample table `name`.
    pub fn load_table(
        &self,
        name: &str,
        rows: u64,
        log: &mut dyn Write,
    ) -> Result<TableSchema, StepError> {
        let client = self.client(self.cluster.client_config())?;
        let schema = self
            .rt
            .block_on(sample_table::ensure_table(&client, name))?;
        let bar = progress_bar(rows);
        let t = Instant::now();
        self.rt.block_on(sample_table::load(
            &client,
            &schema,
            rows,
            LOAD_BATCH,
            &mut |done| bar.set_position(done),
        ))?;
        bar.finish_and_clear();
        let secs = t.elapsed().as_secs_f64();
        writeln!(
            log,
            "loaded {rows} rows into {name} in {secs:.1} s ({:.0} rows/s)",
            rows as f64 / secs.max(1e-6)
        )?;
        let t = Instant::now();
        flush_servers(self.cluster.servers())?;
        writeln!(
            log,
            "flushed every server in {:.1} s: the rows are in SST files, which the offload \
             estimate counts",
            t.elapsed().as_secs_f64()
        )?;
        let t = Instant::now();
        let regions = settle_regions(self.cluster.servers())?;
        writeln!(
            log,
            "regions settled in {:.1} s: {}",
            t.elapsed().as_secs_f64(),
            regions
                .iter()
                .map(|(name, n)| format!("{name} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        )?;
        Ok(schema)
    }

    /// A new client (with its own, empty coprocessor cache) for `config`.
    pub fn client(&self, config: ClientConfig) -> Result<Client, StepError> {
        client_for(&self.rt, config)
    }

    /// Stops every node (an error if one exits badly), then removes the data directory.
    pub fn stop(self) -> Result<(), StepError> {
        let LoadedCluster { cluster, dir, .. } = self;
        cluster.stop()?;
        drop(dir);
        Ok(())
    }
}

fn client_for(rt: &tokio::runtime::Runtime, config: ClientConfig) -> Result<Client, StepError> {
    let _guard = rt.enter();
    Client::new(config).map_err(|e| StepError::Client(service::error_chain(&e)))
}

/// A bar on stderr (hidden when stderr is not a terminal).
fn progress_bar(rows: u64) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(rows);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{bar:40} {human_pos}/{human_len} rows, {per_sec}, {eta} left",
    ) {
        bar.set_style(style);
    }
    bar
}

/// How long the servers' region splitting may take to settle after a load.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(300);
/// Region counts unchanged over this many polls a second apart (the servers check splits
/// every second) count as settled.
const SETTLED_POLLS: usize = 3;

/// Waits until no server splits regions any more (a split changes a region's version and
/// so invalidates cached results and moves work between requests: measuring while it goes on
/// measures the splitting), and returns each server's region count.
fn settle_regions(servers: &[NodeInfo]) -> Result<Vec<(String, usize)>, StepError> {
    let started = Instant::now();
    let mut last: Vec<(String, usize)> = Vec::new();
    let mut same = 0;
    loop {
        let mut now = Vec::with_capacity(servers.len());
        for s in servers {
            let err = |reason: String| StepError::Regions {
                server: s.name.clone(),
                reason,
            };
            let reply = crate::node_http::get(&s.url, kvproto::paths::REGIONS, FLUSH_TIMEOUT)
                .map_err(err)?;
            if reply.status != 200 {
                return Err(err(format!("expected status 200, found {}", reply.status)));
            }
            let regions: kvproto::region::RegionsResponse =
                prost::Message::decode(reply.body.as_slice())
                    .map_err(|e| err(format!("undecodable /regions answer: {e}")))?;
            now.push((s.name.clone(), regions.regions.len()));
        }
        same = if now == last { same + 1 } else { 0 };
        if same + 1 >= SETTLED_POLLS {
            return Ok(now);
        }
        if started.elapsed() > SETTLE_TIMEOUT {
            return Err(StepError::Regions {
                server: "all".into(),
                reason: format!("still splitting after {SETTLE_TIMEOUT:?}: {now:?}"),
            });
        }
        last = now;
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// `POST /admin/flush` on every server: memtables to L0 SST files.
fn flush_servers(servers: &[NodeInfo]) -> Result<(), StepError> {
    for s in servers {
        let flush_err = |reason: String| StepError::Flush {
            server: s.name.clone(),
            reason,
        };
        let reply =
            crate::node_http::post_empty(&s.url, kvproto::paths::ADMIN_FLUSH, FLUSH_TIMEOUT)
                .map_err(flush_err)?;
        if reply.status != 200 {
            return Err(flush_err(format!(
                "expected status 200, found {}: {}",
                reply.status,
                reply.text().trim()
            )));
        }
    }
    Ok(())
}

/// name | zone | role | url.
fn render_nodes(cluster: &LocalCluster) -> String {
    let row =
        |n: &NodeInfo, role: &str| vec![text(&n.name), text(&n.zone), text(role), text(&n.url)];
    let rows: Vec<Vec<Datum>> = cluster
        .servers()
        .iter()
        .map(|n| row(n, "server"))
        .chain(cluster.workers().iter().map(|n| row(n, "worker")))
        .collect();
    table_format::render(&columns(&["name", "zone", "role", "url"]), &rows)
}

pub(crate) fn text(s: &str) -> Datum {
    Datum::Bytes(s.as_bytes().to_vec())
}

pub(crate) fn columns(names: &[&str]) -> Vec<String> {
    names.iter().map(|c| c.to_string()).collect()
}

/// An [`Engine`] on the loaded cluster's runtime; statements fail as [`StepError::Statement`].
pub struct Session<'a> {
    rt: &'a tokio::runtime::Runtime,
    engine: Engine<'a>,
}

/// A query run through `EXPLAIN` (which executes it): its region rows, warnings and time.
pub struct Explained {
    pub elapsed: Duration,
    pub regions: Vec<RegionRow>,
    pub warnings: Vec<String>,
}

impl<'a> Session<'a> {
    pub fn new(lab: &'a LoadedCluster, client: &'a Client) -> Session<'a> {
        Session {
            rt: &lab.rt,
            engine: Engine::new(client),
        }
    }

    pub fn execute(&mut self, sql: &str) -> Result<QueryResult, StepError> {
        self.rt
            .block_on(self.engine.execute(sql))
            .map_err(|e| StepError::Statement {
                sql: sql.to_string(),
                message: service::error_chain(&e),
            })
    }

    /// Runs `EXPLAIN sql` (timed: it executes the query) for its region rows.
    pub fn explained(&mut self, sql: &str) -> Result<Explained, StepError> {
        let explain = format!("EXPLAIN {sql}");
        let t = Instant::now();
        let plan = self.execute(&explain)?;
        let elapsed = t.elapsed();
        let regions = region_rows(&plan).map_err(|column| StepError::ExplainColumns {
            sql: explain,
            column,
        })?;
        Ok(Explained {
            elapsed,
            regions,
            warnings: plan.warnings,
        })
    }
}

/// One region row of `EXPLAIN`: `id` = `region <id>`, `task` = where it ran, `detail` =
/// `reason=<r> pages=<n> rows=<n> cache_hit=<bool>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionRow {
    pub region: String,
    pub task: String,
    pub detail: String,
}

/// Where a region ran, from EXPLAIN's task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// `server <url> local`: on its server.
    Local,
    /// `server <url> remote <worker>`: offloaded by its server.
    Remote,
    /// `worker <addr>`: sent to a worker by the client (the delegate path).
    Worker,
    /// Anything else (e.g. a fallback).
    Other,
}

impl RegionRow {
    /// The region id (the text after `region `).
    pub fn id(&self) -> &str {
        self.region
            .strip_prefix("region ")
            .unwrap_or(&self.region)
            .trim()
    }

    /// Where the region ran; a region whose pages ran in several places (comma-separated in
    /// the task) is placed by its first.
    pub fn place(&self) -> Place {
        let first = self.task.split(',').next().unwrap_or("");
        let words: Vec<&str> = first.split_whitespace().collect();
        match words.as_slice() {
            ["server", _, "local"] => Place::Local,
            ["server", _, "remote", ..] => Place::Remote,
            ["worker", ..] => Place::Worker,
            _ => Place::Other,
        }
    }

    /// The server URL of a `server ...` task, the worker URL of a `worker ...` task.
    pub fn node(&self) -> &str {
        self.task.split_whitespace().nth(1).unwrap_or("")
    }

    /// The worker of `server <url> remote <worker>`.
    pub fn remote_worker(&self) -> &str {
        self.task.split_whitespace().nth(3).unwrap_or("")
    }

    /// The value of `key=` in the detail (empty when absent).
    pub fn detail(&self, key: &str) -> &str {
        self.detail
            .split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .find(|(k, _)| *k == key)
            .map_or("", |(_, v)| v)
    }

    /// Whether `reason` is one of the region's reasons (comma-separated when its pages
    /// differed).
    pub fn has_reason(&self, reason: &str) -> bool {
        self.detail("reason").split(',').any(|r| r == reason)
    }
}

/// The region rows of an `EXPLAIN` answer (ids starting with `region`); `Err(column)` when a
/// column is missing.
pub fn region_rows(plan: &QueryResult) -> Result<Vec<RegionRow>, &'static str> {
    let col = |name: &'static str| {
        plan.columns
            .iter()
            .position(|c| c.eq_ignore_ascii_case(name))
            .ok_or(name)
    };
    let (id, task, detail) = (col("id")?, col("task")?, col("detail")?);
    let cell = |row: &[Datum], i: usize| {
        row.get(i)
            .and_then(crate::output_format::text)
            .unwrap_or_default()
    };
    Ok(plan
        .rows
        .iter()
        .filter(|row| cell(row, id).starts_with("region"))
        .map(|row| RegionRow {
            region: cell(row, id),
            task: cell(row, task),
            detail: cell(row, detail),
        })
        .collect())
}

/// Node URLs → names, to print `server-a` instead of `http://127.0.0.1:41234`.
pub struct NodeNames {
    by_url: BTreeMap<String, (String, String)>,
}

impl NodeNames {
    pub fn of(cluster: &LocalCluster) -> NodeNames {
        let by_url = cluster
            .servers()
            .iter()
            .chain(cluster.workers())
            .map(|n| (url_key(&n.url), (n.name.clone(), n.zone.clone())))
            .collect();
        NodeNames { by_url }
    }

    /// The name of the node at `url`, or `url` itself.
    pub fn name<'s>(&'s self, url: &'s str) -> &'s str {
        self.by_url.get(&url_key(url)).map_or(url, |(n, _)| n)
    }

    /// The zone of the node at `url` (`?` when unknown).
    pub fn zone(&self, url: &str) -> &str {
        self.by_url.get(&url_key(url)).map_or("?", |(_, z)| z)
    }

    /// `task` with every word that is a node URL replaced by the node's name.
    pub fn task(&self, task: &str) -> String {
        task.split_whitespace()
            .map(|w| self.name(w))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// The `scheme://host:port` of a URL (`http://` added when missing): a worker's coprocessor
/// URL (`.../coprocessor`) names the same node as its base URL.
fn url_key(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("http", url));
    let authority = rest.split('/').next().unwrap_or(rest);
    format!("{scheme}://{authority}")
}

/// region | task | detail, with node names for URLs.
fn print_regions(out: &mut dyn Write, run: &Explained, names: &NodeNames) -> std::io::Result<()> {
    let rows: Vec<Vec<Datum>> = run
        .regions
        .iter()
        .map(|r| vec![text(&r.region), text(&names.task(&r.task)), text(&r.detail)])
        .collect();
    out.write_all(table_format::render(&columns(&["region", "task", "detail"]), &rows).as_bytes())?;
    writeln!(out, "query time: {}", ms(run.elapsed))
}

/// Every region row must satisfy `ok` (and there must be one).
fn expect_all(
    run: &Explained,
    step: &'static str,
    expected: &str,
    ok: impl Fn(&RegionRow) -> bool,
) -> Result<(), DemoError> {
    if !run.regions.is_empty() && run.regions.iter().all(ok) {
        return Ok(());
    }
    Err(unexpected(run, step, expected))
}

/// At least one region row must satisfy `ok`.
fn expect_any(
    run: &Explained,
    step: &'static str,
    expected: &str,
    ok: impl Fn(&RegionRow) -> bool,
) -> Result<(), DemoError> {
    if run.regions.iter().any(ok) {
        return Ok(());
    }
    Err(unexpected(run, step, expected))
}

fn unexpected(run: &Explained, step: &'static str, expected: &str) -> DemoError {
    let found: Vec<String> = run
        .regions
        .iter()
        .map(|r| format!("[{} | {} | {}]", r.region, r.task, r.detail))
        .collect();
    DemoError::Unexpected {
        step,
        expected: expected.to_string(),
        found: if found.is_empty() {
            "no region rows".into()
        } else {
            found.join(" ")
        },
    }
}

/// Region id → (owning server name, its zone), from an EXPLAIN on the server path.
fn region_owners(run: &Explained, names: &NodeNames) -> BTreeMap<String, (String, String)> {
    run.regions
        .iter()
        .filter(|r| matches!(r.place(), Place::Local | Place::Remote))
        .map(|r| {
            (
                r.id().to_string(),
                (
                    names.name(r.node()).to_string(),
                    names.zone(r.node()).to_string(),
                ),
            )
        })
        .collect()
}

/// One region under a node selection policy: the zone of its replica and of its reader.
struct Placed {
    owner_zone: String,
    worker: String,
    worker_zone: String,
}

/// region | owner (zone) | worker (zone) | read; returns the placements.
fn print_selection(
    out: &mut dyn Write,
    run: &Explained,
    owners: &BTreeMap<String, (String, String)>,
    names: &NodeNames,
) -> Result<Vec<Placed>, DemoError> {
    let mut placed = Vec::new();
    let mut rows = Vec::new();
    for r in &run.regions {
        if r.place() != Place::Worker {
            return Err(unexpected(
                run,
                "node selection",
                "every region sent to a worker",
            ));
        }
        let (owner, owner_zone) = owners
            .get(r.id())
            .cloned()
            .unwrap_or_else(|| ("?".into(), "?".into()));
        let p = Placed {
            owner_zone,
            worker: names.name(r.node()).to_string(),
            worker_zone: names.zone(r.node()).to_string(),
        };
        let read = if p.owner_zone == p.worker_zone {
            "in its zone"
        } else {
            "across zones"
        };
        rows.push(vec![
            text(&r.region),
            text(&format!("{owner} ({})", p.owner_zone)),
            text(&format!("{} ({})", p.worker, p.worker_zone)),
            text(read),
            text(&r.detail),
        ]);
        placed.push(p);
    }
    let cols = columns(&["region", "replica on", "read by", "read", "detail"]);
    out.write_all(table_format::render(&cols, &rows).as_bytes())?;
    Ok(placed)
}

/// The one-line explanation of a policy's outcome, checked against what happened.
fn explain_policy(
    policy: &'static str,
    placed: &[Placed],
    warned: bool,
) -> Result<String, DemoError> {
    let workers = |zone: &str| {
        let mut w: Vec<&str> = placed
            .iter()
            .filter(|p| p.owner_zone == zone)
            .map(|p| p.worker.as_str())
            .collect();
        w.sort_unstable();
        w.dedup();
        w.join(", ")
    };
    let all = |f: &dyn Fn(&Placed) -> bool| !placed.is_empty() && placed.iter().all(f);
    let has_b = placed.iter().any(|p| p.owner_zone == "b");
    let (ok, expected, line) = match policy {
        "all_nodes" => (
            all(&|p| p.worker_zone == p.owner_zone) && !warned,
            "every region read in its own zone, no warning",
            format!(
                "all_nodes: every region is read by a worker of its own zone (zone a: {}; \
                 zone b: {}); no warning",
                workers("a"),
                workers("b")
            ),
        ),
        "priority_local_zone_nodes" => (
            all(&|p| p.worker_zone == p.owner_zone) && has_b && warned,
            "zone-a regions read in zone a, zone-b regions in zone b, with a warning",
            format!(
                "priority_local_zone_nodes: zone-a regions go to zone-a workers ({}); the \
                 zone-b regions have no replica in zone a, so they go to zone b ({}), and \
                 the warning says they cannot be read in zone a",
                workers("a"),
                workers("b")
            ),
        ),
        _ => (
            all(&|p| p.worker_zone == "a") && has_b && warned,
            "every region read by a zone-a worker, with a warning",
            format!(
                "only_local_zone_nodes: only zone-a workers read, so the zone-b regions are \
                 read across zones by {} (allowed up to 3 regions per local worker), with the \
                 same warning",
                workers("b")
            ),
        ),
    };
    if ok {
        Ok(line)
    } else {
        let found: Vec<String> = placed
            .iter()
            .map(|p| {
                format!(
                    "{} zone {} → zone {}",
                    p.worker, p.owner_zone, p.worker_zone
                )
            })
            .collect();
        Err(DemoError::Unexpected {
            step: policy,
            expected: expected.to_string(),
            found: format!("{} warned={warned}", found.join(", ")),
        })
    }
}

/// One series of `tikv_coprocessor_remote_decision_total` on one server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionCount {
    pub server: String,
    pub result: String,
    pub reason: String,
    pub count: u64,
}

/// The metric counting the servers' offload decisions.
pub const DECISION_METRIC: &str = "tikv_coprocessor_remote_decision_total";

/// Every server's decision counters, by server, then result and reason.
pub fn decision_counts(cluster: &LocalCluster) -> Result<Vec<DecisionCount>, StepError> {
    let mut all = Vec::new();
    for (server, text) in cluster.server_metrics()? {
        all.extend(parse_decisions(&server, &text));
    }
    all.sort_by(|a, b| (&a.server, &a.result, &a.reason).cmp(&(&b.server, &b.result, &b.reason)));
    Ok(all)
}

/// The decision series in one `/metrics` text (Prometheus exposition). The label values are a
/// closed set of plain words, so no escapes are handled.
pub fn parse_decisions(server: &str, metrics: &str) -> Vec<DecisionCount> {
    metrics
        .lines()
        .filter_map(|line| {
            let rest = line
                .trim()
                .strip_prefix(DECISION_METRIC)?
                .strip_prefix('{')?;
            let (labels, value) = rest.split_once('}')?;
            let value: f64 = value.split_whitespace().next()?.parse().ok()?;
            let label = |key: &str| {
                labels.split(',').find_map(|kv| {
                    let (k, v) = kv.split_once('=')?;
                    (k.trim() == key).then(|| v.trim().trim_matches('"').to_string())
                })
            };
            Some(DecisionCount {
                server: server.to_string(),
                result: label("result")?,
                reason: label("reason")?,
                count: value as u64,
            })
        })
        .collect()
}

/// `after - before` per server, result and reason; series that did not grow are left out.
pub fn decision_delta(before: &[DecisionCount], after: &[DecisionCount]) -> Vec<DecisionCount> {
    after
        .iter()
        .filter_map(|a| {
            let old = before
                .iter()
                .find(|b| (&b.server, &b.result, &b.reason) == (&a.server, &a.result, &a.reason))
                .map_or(0, |b| b.count);
            let count = a.count.saturating_sub(old);
            (count > 0).then(|| DecisionCount { count, ..a.clone() })
        })
        .collect()
}

/// server | result | reason | count.
pub fn render_decisions(counts: &[DecisionCount]) -> String {
    let rows: Vec<Vec<Datum>> = counts
        .iter()
        .map(|c| {
            vec![
                text(&c.server),
                text(&c.result),
                text(&c.reason),
                Datum::UInt(c.count),
            ]
        })
        .collect();
    table_format::render(&columns(&["server", "result", "reason", "count"]), &rows)
}

/// A directory under the system temp dir, removed (with its content) on drop. (The `tempfile`
/// crate is a dev-dependency of this crate only.)
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    fn new() -> Result<TempDir, StepError> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let path =
            std::env::temp_dir().join(format!("stratus-demo-{}-{nanos:09}", std::process::id()));
        std::fs::create_dir(&path).map_err(|source| StepError::TempDir {
            path: path.clone(),
            source,
        })?;
        Ok(TempDir { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        // Best effort: a leftover directory in /tmp is not worth failing the run for.
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decision_series_are_read_with_their_labels() {
        let metrics = "# HELP tikv_coprocessor_remote_decision_total decisions\n\
                       # TYPE tikv_coprocessor_remote_decision_total counter\n\
                       tikv_coprocessor_remote_decision_total{result=\"remote\",reason=\"cpu_busy\"} 4\n\
                       tikv_coprocessor_remote_decision_total{reason=\"cpu_idle\",result=\"local\"} 2\n\
                       tikv_coprocessor_remote_decision_totals{result=\"x\",reason=\"y\"} 9\n\
                       other_total 1\n";
        assert_eq!(
            parse_decisions("server-a", metrics),
            [
                DecisionCount {
                    server: "server-a".into(),
                    result: "remote".into(),
                    reason: "cpu_busy".into(),
                    count: 4
                },
                DecisionCount {
                    server: "server-a".into(),
                    result: "local".into(),
                    reason: "cpu_idle".into(),
                    count: 2
                },
            ]
        );
    }

    fn count(server: &str, result: &str, reason: &str, count: u64) -> DecisionCount {
        DecisionCount {
            server: server.into(),
            result: result.into(),
            reason: reason.into(),
            count,
        }
    }

    #[test]
    fn the_decision_delta_keeps_only_series_that_grew() {
        let before = [
            count("server-a", "local", "cpu_idle", 3),
            count("server-b", "local", "cpu_idle", 2),
        ];
        let after = [
            count("server-a", "local", "cpu_idle", 3),
            count("server-a", "remote", "cpu_busy", 4),
            count("server-b", "local", "cpu_idle", 5),
        ];
        assert_eq!(
            decision_delta(&before, &after),
            [
                count("server-a", "remote", "cpu_busy", 4),
                count("server-b", "local", "cpu_idle", 3),
            ]
        );
    }

    fn explain(rows: &[[&str; 3]]) -> QueryResult {
        QueryResult {
            columns: columns(&["id", "task", "detail"]),
            rows: rows
                .iter()
                .map(|r| r.iter().map(|c| text(c)).collect())
                .collect(),
            ..QueryResult::default()
        }
    }

    #[test]
    fn region_rows_say_where_each_region_ran_and_why() {
        let plan = explain(&[
            ["TableScan_1", "dag", "table=t"],
            [
                "region 2",
                "server http://127.0.0.1:7000 remote http://127.0.0.1:7100",
                "reason=cpu_busy pages=3 rows=16 cache_hit=false",
            ],
            [
                "region 3",
                "server http://127.0.0.1:7001 local",
                "reason=cpu_idle pages=1 rows=16 cache_hit=true",
            ],
            [
                "region 4",
                "worker http://127.0.0.1:7101",
                "reason= pages=1 rows=16 cache_hit=false",
            ],
            [
                "region 5",
                "server http://127.0.0.1:7001 local,server http://127.0.0.1:7001 cache_hit",
                "reason=cpu_idle,cpu_busy pages=2 rows=16 cache_hit=true",
            ],
        ]);
        let regions = region_rows(&plan).unwrap();
        assert_eq!(regions.len(), 4);
        assert_eq!(regions[3].place(), Place::Local);
        assert!(regions[3].has_reason("cpu_busy") && regions[3].has_reason("cpu_idle"));
        assert_eq!(regions[0].id(), "2");
        assert_eq!(regions[0].place(), Place::Remote);
        assert_eq!(regions[0].remote_worker(), "http://127.0.0.1:7100");
        assert!(regions[0].has_reason("cpu_busy"));
        assert_eq!(regions[1].place(), Place::Local);
        assert_eq!(regions[1].detail("cache_hit"), "true");
        assert_eq!(regions[2].place(), Place::Worker);
        assert_eq!(regions[2].node(), "http://127.0.0.1:7101");
        assert!(!regions[2].has_reason("cpu_busy"));
    }

    #[test]
    fn an_explain_without_a_detail_column_is_an_error() {
        let plan = QueryResult {
            columns: columns(&["id", "task"]),
            ..QueryResult::default()
        };
        assert_eq!(region_rows(&plan), Err("detail"));
    }

    #[test]
    fn node_urls_in_a_task_become_names_only_when_they_match_exactly() {
        let names = NodeNames {
            by_url: [
                (
                    "http://127.0.0.1:700".to_string(),
                    ("server-a".into(), "a".into()),
                ),
                (
                    "http://127.0.0.1:7001".to_string(),
                    ("worker-b1".into(), "b".into()),
                ),
            ]
            .into(),
        };
        assert_eq!(
            names.task("server http://127.0.0.1:700/ remote http://127.0.0.1:7001"),
            "server server-a remote worker-b1"
        );
        assert_eq!(names.task("worker 127.0.0.1:7001"), "worker worker-b1");
        assert_eq!(
            names.task("remote http://127.0.0.1:7001/coprocessor"),
            "remote worker-b1"
        );
        assert_eq!(
            names.task("worker http://127.0.0.1:70"),
            "worker http://127.0.0.1:70"
        );
        assert_eq!(names.zone("http://127.0.0.1:7001"), "b");
    }

    fn placed(owner_zone: &str, worker: &str, worker_zone: &str) -> Placed {
        Placed {
            owner_zone: owner_zone.into(),
            worker: worker.into(),
            worker_zone: worker_zone.into(),
        }
    }

    #[test]
    fn each_policy_line_is_checked_against_where_regions_were_read() {
        let in_zone = [placed("a", "worker-a1", "a"), placed("b", "worker-b1", "b")];
        let only_a = [placed("a", "worker-a1", "a"), placed("b", "worker-a2", "a")];
        assert!(explain_policy("all_nodes", &in_zone, false).is_ok());
        assert!(explain_policy("all_nodes", &in_zone, true).is_err());
        assert!(explain_policy("all_nodes", &only_a, false).is_err());
        assert!(explain_policy("priority_local_zone_nodes", &in_zone, true).is_ok());
        assert!(explain_policy("priority_local_zone_nodes", &in_zone, false).is_err());
        let line = explain_policy("only_local_zone_nodes", &only_a, true).unwrap();
        assert!(line.contains("across zones by worker-a2"), "{line}");
        assert!(explain_policy("only_local_zone_nodes", &in_zone, true).is_err());
    }

    #[test]
    fn the_temp_dir_is_removed_on_drop() {
        let dir = TempDir::new().unwrap();
        let path = dir.path().to_path_buf();
        std::fs::write(path.join("f"), b"x").unwrap();
        drop(dir);
        assert!(!path.exists());
    }
}
