//! `stratus up`: the local cluster ([`crate::local_cluster`]) in the foreground.
//!
//! Starts the ten nodes (a placement driver, three servers replicating every region, six
//! workers: a server and two workers in each of zones a, b and c, a whole replica in each zone), prints a table of them (name, zone, URL, log), writes the cluster file
//! (`<state dir>/cluster.toml`, which `stratus sql` and `stratus load` then find by themselves),
//! starts the SQL endpoint (MySQL protocol, `--sql-port`, default 4000, [`crate::sql_server`])
//! in this process and waits. Ctrl-C (SIGINT) or SIGTERM removes the cluster file, stops every node with
//! SIGTERM (servers first) and exits 0. A node that dies meanwhile is restarted on its port
//! ([`LocalCluster::restart_dead`], checked every 250 ms), and the restart is named on stderr
//! (`server-b exited (signal: 9); restarted on http://127.0.0.1:7001 after 0.5 s`). Only when
//! a node dies too often (five restarts within a minute) are the others stopped, and `up`
//! exits 1.
//!
//! The signal handlers are installed before the first node starts, so a Ctrl-C during the
//! start stops the cluster as soon as it is up instead of leaving nodes behind.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::local_cluster::{ClusterError, ClusterOptions, LocalCluster, NodeInfo, S3Target};
use crate::state_dir::{self, StateDirError};

/// The default `--base-port`: server-a 7000, server-b 7001, workers 7002..=7005, server-c 7006,
/// pd 7007, workers 7008 and 7009.
pub const DEFAULT_BASE_PORT: u16 = 7000;

/// How often `up` looks for nodes that died (and restarts those whose delay has passed).
const RESTART_CHECK_INTERVAL: Duration = Duration::from_millis(250);

/// `stratus up`'s options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpOptions {
    /// None: `<state dir>/data`.
    pub data_dir: Option<PathBuf>,
    /// An S3 endpoint instead of the local object store.
    pub s3: Option<String>,
    pub s3_bucket: String,
    pub base_port: u16,
    /// etcd client URLs for the placement driver (empty: its embedded store).
    pub etcd: Vec<String>,
    /// The SQL endpoint's port on 127.0.0.1 (0: a free one).
    pub sql_port: u16,
    /// Mutual TLS between every node, with a throwaway CA (`--tls`).
    pub tls: bool,
    /// The SQL user root's password on a fresh cluster (`--root-password-file`); `None`: a
    /// random one, printed once.
    pub root_password_file: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum UpError {
    #[error(transparent)]
    StateDir(#[from] StateDirError),
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    #[error("cannot wait for signals: {0}")]
    Signals(std::io::Error),
    #[error("cannot remove the cluster file: path={} reason={reason}", path.display())]
    RemoveClusterFile { path: PathBuf, reason: String },
    #[error(transparent)]
    SqlServer(#[from] crate::sql_server::SqlServerError),
    #[error("cannot write output: {0}")]
    Output(#[from] std::io::Error),
}

/// Runs the cluster until SIGINT or SIGTERM; progress goes to `out`.
pub fn run(opts: UpOptions, out: &mut dyn Write) -> Result<(), UpError> {
    let state = state_dir::state_dir()?;
    let data_dir = opts.data_dir.unwrap_or_else(|| state.join("data"));
    let cluster_file = state_dir::cluster_file_in(&state);
    let (rt, mut interrupt, mut terminate) =
        crate::sql_server::runtime_with_stop_signals().map_err(UpError::Signals)?;
    if cluster_file.exists() {
        eprintln!(
            "Warning: replacing the cluster file of an earlier `stratus up` that did not stop \
             cleanly: path={}",
            cluster_file.display()
        );
    }
    // Read before any node starts: a bad file fails here, with nothing to stop.
    let root_password = crate::sql_server::root_password(opts.root_password_file.as_deref())?;
    // Bound before any node starts: a taken SQL port fails here, with nothing to stop.
    let sql_listener = crate::sql_server::bind(&rt, &format!("127.0.0.1:{}", opts.sql_port))?;
    writeln!(out, "starting a local cluster in {}", data_dir.display())?;
    out.flush()?;
    let mut cluster = LocalCluster::start(ClusterOptions {
        data_dir,
        s3: opts.s3.map(|endpoint| S3Target {
            endpoint,
            bucket: opts.s3_bucket,
        }),
        base_port: opts.base_port,
        cpu_load_file: false,
        etcd: opts.etcd,
        tls: opts.tls,
    })?;
    let nodes: Vec<&NodeInfo> = cluster
        .pd()
        .into_iter()
        .chain(cluster.servers())
        .chain(cluster.workers())
        .collect();
    write_nodes(out, &nodes)?;
    cluster.write_cluster_file(&cluster_file)?;
    let sql = match crate::cluster_file::load(&cluster_file)
        .map_err(crate::sql_server::SqlServerError::from)
        .and_then(|cfg| {
            crate::sql_server::serve(
                &rt,
                cfg,
                sql_listener,
                sqlfront::mysql::MysqlLimits::default(),
                None,
                root_password.as_deref(),
            )
        }) {
        Ok((sql, bootstrap)) => {
            for line in crate::sql_server::bootstrap_lines(&bootstrap) {
                writeln!(out, "{line}")?;
            }
            sql
        }
        Err(e) => {
            // The nodes are up: stop them cleanly and take the cluster file back.
            let _ = remove_cluster_file(&cluster_file);
            let _ = cluster.stop();
            return Err(e.into());
        }
    };
    writeln!(out, "\ncluster file: {}", cluster_file.display())?;
    writeln!(
        out,
        "sql endpoint (MySQL protocol): {sql}  try: mysql -h {} -P {} -u root -p",
        sql.ip(),
        sql.port()
    )?;
    writeln!(
        out,
        "try: stratus load --table t --rows 100000 && stratus sql\nCtrl-C stops the cluster."
    )?;
    out.flush()?;
    let died = rt.block_on(async {
        loop {
            tokio::select! {
                _ = interrupt.recv() => return None,
                _ = terminate.recv() => return None,
                _ = tokio::time::sleep(RESTART_CHECK_INTERVAL) => {
                    match cluster.restart_dead() {
                        Ok(said) => {
                            for line in said {
                                eprintln!("{line}");
                            }
                        }
                        Err(e) => return Some(e),
                    }
                }
            }
        }
    });
    let removed = remove_cluster_file(&cluster_file);
    match died {
        None => {
            writeln!(out, "stopping the cluster")?;
            out.flush()?;
            cluster.stop()?;
            removed?;
            writeln!(out, "stopped")?;
            Ok(())
        }
        Some(e) => {
            eprintln!("Error: {e}\nstopping the other nodes");
            // The dead node makes `stop` fail too; the death is what to report.
            let _ = cluster.stop();
            Err(e.into())
        }
    }
}

fn remove_cluster_file(path: &Path) -> Result<(), UpError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(UpError::RemoveClusterFile {
            path: path.to_path_buf(),
            reason: e.to_string(),
        }),
    }
}

/// The table of nodes.
pub fn write_nodes(out: &mut dyn Write, nodes: &[&NodeInfo]) -> std::io::Result<()> {
    let name_w = nodes.iter().map(|n| n.name.len()).max().unwrap_or(0).max(4);
    let url_w = nodes.iter().map(|n| n.url.len()).max().unwrap_or(0).max(3);
    writeln!(out, "{:<name_w$}  ZONE  {:<url_w$}  LOG", "NODE", "URL")?;
    for n in nodes {
        let zone = if n.zone.is_empty() {
            "-"
        } else {
            n.zone.as_str()
        };
        writeln!(
            out,
            "{:<name_w$}  {:<4}  {:<url_w$}  {}",
            n.name,
            zone,
            n.url,
            n.log.display()
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_node_table_aligns_its_columns() {
        let node = |name: &str, zone: &str, url: &str| NodeInfo {
            name: name.into(),
            zone: zone.into(),
            url: url.into(),
            log: PathBuf::from(format!("/d/logs/{name}.log")),
        };
        let mut out = Vec::new();
        write_nodes(
            &mut out,
            &[
                &node("pd", "", "http://127.0.0.1:7007"),
                &node("server-a", "a", "http://127.0.0.1:7000"),
                &node("worker-b2", "b", "http://127.0.0.1:7005"),
            ],
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "NODE       ZONE  URL                    LOG\n\
             pd         -     http://127.0.0.1:7007  /d/logs/pd.log\n\
             server-a   a     http://127.0.0.1:7000  /d/logs/server-a.log\n\
             worker-b2  b     http://127.0.0.1:7005  /d/logs/worker-b2.log\n"
        );
    }
}
