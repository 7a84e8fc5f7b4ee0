//! A local cluster started in a temporary directory and loaded with the sample table: the
//! setup `stratus demo` and `stratus bench` share, so that both measure a cluster prepared the
//! same way (rows flushed to SST files, region splits settled) before their first query.
//!
//! [`LoadedCluster`] owns the cluster, the tokio runtime its clients run on and the
//! temporary directory holding its data; [`StepError`] is what any of these steps (and a statement run
//! on the cluster) fails with.

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use client::sql::TableSchema;
use client::{Client, ClientConfig};
use wire::datum::Datum;

use crate::leader_placement;
use crate::local_cluster::{ClusterError, ClusterOptions, LocalCluster, NodeInfo};
use crate::sample_table::{self, LoadError};
use crate::table_format::{self, column_names, text_cell};

/// The sample table's name in the demo and the benchmark.
pub const TABLE: &str = "t";

/// Rows per load transaction (the `stratus load` default).
const LOAD_BATCH: usize = 5000;

/// How long a flush of one server may take.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(600);

/// A step shared by `demo` and `bench` failed.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    #[error("local cluster: {0}")]
    Cluster(#[from] ClusterError),
    #[error("loading the sample table: {0}")]
    Load(#[from] LoadError),
    #[error("cannot create the temporary data directory: under={path}: {source}")]
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
    #[error("compaction failed: server={server} reason={reason}")]
    Compaction { server: String, reason: String },
    #[error("cannot read the metrics: server={server} reason={reason}")]
    Metrics { server: String, reason: String },
    #[error("regions did not settle: server={server} reason={reason}")]
    Regions { server: String, reason: String },
    #[error("cannot write output: {0}")]
    Output(#[from] std::io::Error),
}

/// A started local cluster, its temporary data directory, and the runtime clients run on.
pub struct LoadedCluster {
    /// Declared before `dir`: dropped (children killed) before the directory is removed.
    pub cluster: LocalCluster,
    pub rt: tokio::runtime::Runtime,
    dir: tempfile::TempDir,
}

impl LoadedCluster {
    /// Starts a local cluster (ephemeral ports, CPU load from the `cpu-load` file) in a new
    /// temporary directory and prints its nodes to `log`.
    pub fn start(log: &mut dyn Write) -> Result<LoadedCluster, StepError> {
        let dir = new_data_dir()?;
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
            etcd: Vec::new(),
            tls: false,
        })?;
        writeln!(
            log,
            "started a placement driver, {} servers and {} workers in {:.1} s (data in {}):",
            cluster.servers().len(),
            cluster.workers().len(),
            t.elapsed().as_secs_f64(),
            dir.path().display()
        )?;
        log.write_all(render_nodes(&cluster).as_bytes())?;
        let lab = LoadedCluster { cluster, rt, dir };
        writeln!(
            log,
            "every region has a replica on each server (Raft, 3 voters); leaders: {}",
            lab.leaders_per_server()?
                .iter()
                .map(|(name, n)| format!("{name} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        )?;
        Ok(lab)
    }

    /// Creates [`TABLE`], loads `rows` rows with a progress bar on stderr, prints the load rate
    /// to `log`, then flushes every server so that the rows are in SST files.
    pub fn load(&self, rows: u64, log: &mut dyn Write) -> Result<TableSchema, StepError> {
        self.load_table(TABLE, rows, log)
    }

    /// Compacts every region's L0 files into the levels (`POST /admin/compact` on every
    /// server: each compacts the regions it leads) and prints how many compactions ran and how
    /// many of them on the workers: the local cluster sends every compaction to a worker of
    /// the leader's zone (`remote-compaction`), so one that ran on a server is an error.
    pub fn compact(&self, log: &mut dyn Write) -> Result<(), StepError> {
        let t = Instant::now();
        let before = compaction_counts(&self.cluster)?;
        for s in self.cluster.servers() {
            let url = format!("{}{}", s.url, wire::paths::ADMIN_COMPACT);
            harness::http::post_ok(&url, Vec::new(), FLUSH_TIMEOUT).map_err(|e| {
                StepError::Compaction {
                    server: s.name.clone(),
                    reason: e.to_string(),
                }
            })?;
        }
        let after = compaction_counts(&self.cluster)?;
        let (all, remote) = (after.0 - before.0, after.1 - before.1);
        writeln!(
            log,
            "compacted every region in {:.1} s: {all} compactions, {remote} of them on a worker \
             (remote-compaction: the servers' cores stay for queries and writes)",
            t.elapsed().as_secs_f64()
        )?;
        if remote < all {
            return Err(StepError::Compaction {
                server: "every server".into(),
                reason: format!("expected every compaction on a worker, found {remote} of {all}"),
            });
        }
        Ok(())
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
        let leaders = self.leaders_per_server()?;
        writeln!(
            log,
            "regions settled in {:.1} s: {regions} regions, each replicated on all {} servers; \
             leaders: {}",
            t.elapsed().as_secs_f64(),
            self.cluster.servers().len(),
            leaders
                .iter()
                .map(|(name, n)| format!("{name} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        )?;
        Ok(schema)
    }

    /// How many regions each server leads (every server named, in start order; `none` counts
    /// regions no server knows a leader of, when there are any).
    pub fn leaders_per_server(&self) -> Result<Vec<(String, usize)>, StepError> {
        let urls = self.cluster.server_urls();
        let view = leader_placement::leaders(&urls).map_err(|e| StepError::Regions {
            server: "all".into(),
            reason: e.to_string(),
        })?;
        let mut counts: Vec<(String, usize)> = self
            .cluster
            .servers()
            .iter()
            .map(|s| (s.name.clone(), 0))
            .collect();
        let mut unknown = 0;
        for led in view.values() {
            let at = led
                .leader
                .and_then(|(store, _)| urls.iter().position(|(id, _)| *id == store));
            match at {
                Some(i) => counts[i].1 += 1,
                None => unknown += 1,
            }
        }
        if unknown > 0 {
            counts.push(("none".into(), unknown));
        }
        Ok(counts)
    }

    /// A new client (with its own, empty coprocessor cache) for `config`.
    pub fn client(&self, config: ClientConfig) -> Result<Client, StepError> {
        client_for(&self.rt, config)
    }

    /// A client for the rest of the process (what a SQL front session runs on).
    pub fn static_client(&self, config: ClientConfig) -> Result<&'static Client, StepError> {
        Ok(Box::leak(Box::new(self.client(config)?)))
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
    Client::new(config).map_err(|e| StepError::Client(node::error_chain(&e)))
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
/// measures the splitting) and every replica applied every split (each server lists as many
/// regions as the others), and returns that number.
fn settle_regions(servers: &[NodeInfo]) -> Result<usize, StepError> {
    let started = Instant::now();
    let mut last: Vec<(String, usize)> = Vec::new();
    let mut same = 0;
    loop {
        let mut now = Vec::with_capacity(servers.len());
        for s in servers {
            let regions = leader_placement::regions_of(&s.url).map_err(|e| StepError::Regions {
                server: s.name.clone(),
                reason: e.to_string(),
            })?;
            now.push((s.name.clone(), regions.regions.len()));
        }
        let agreed = now.windows(2).all(|w| w[0].1 == w[1].1);
        same = if now == last && agreed { same + 1 } else { 0 };
        if same + 1 >= SETTLED_POLLS {
            return Ok(now.first().map_or(0, |(_, n)| *n));
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

/// Compactions applied on every server, and how many of them a worker built
/// (`stratus_kvengine_compactions_total`, `stratus_kvengine_remote_compactions_total`).
fn compaction_counts(cluster: &LocalCluster) -> Result<(f64, f64), StepError> {
    let (mut all, mut remote) = (0.0, 0.0);
    for (server, text) in cluster.server_metrics()? {
        let read = |name: &str| {
            harness::metrics::Metrics::parse(&text)
                .and_then(|m| m.sum(name, &[]))
                .map_err(|e| StepError::Metrics {
                    server: server.clone(),
                    reason: e.to_string(),
                })
        };
        all += read("stratus_kvengine_compactions_total")?;
        remote += read("stratus_kvengine_remote_compactions_total")?;
    }
    Ok((all, remote))
}

/// `POST /admin/flush` on every server: memtables to L0 SST files.
fn flush_servers(servers: &[NodeInfo]) -> Result<(), StepError> {
    for s in servers {
        let flush_err = |reason: String| StepError::Flush {
            server: s.name.clone(),
            reason,
        };
        let url = format!("{}{}", s.url, wire::paths::ADMIN_FLUSH);
        harness::http::post_ok(&url, Vec::new(), FLUSH_TIMEOUT)
            .map_err(|e| flush_err(e.to_string()))?;
    }
    Ok(())
}

/// name | zone | role | url.
fn render_nodes(cluster: &LocalCluster) -> String {
    let row = |n: &NodeInfo, role: &str| {
        vec![
            text_cell(&n.name),
            text_cell(&n.zone),
            text_cell(role),
            text_cell(&n.url),
        ]
    };
    let rows: Vec<Vec<Datum>> = cluster
        .pd()
        .into_iter()
        .map(|n| row(n, "pd"))
        .chain(cluster.servers().iter().map(|n| row(n, "server")))
        .chain(cluster.workers().iter().map(|n| row(n, "worker")))
        .collect();
    table_format::render(&column_names(&["name", "zone", "role", "url"]), &rows)
}

/// A fresh directory under the system temp dir for the cluster's data, removed (with its
/// content) when dropped.
fn new_data_dir() -> Result<tempfile::TempDir, StepError> {
    tempfile::Builder::new()
        .prefix("stratus-demo-")
        .tempdir()
        .map_err(|source| StepError::TempDir {
            path: std::env::temp_dir(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_temp_dir_is_removed_on_drop() {
        let dir = new_data_dir().unwrap();
        let path = dir.path().to_path_buf();
        std::fs::write(path.join("f"), b"x").unwrap();
        drop(dir);
        assert!(!path.exists());
    }
}
