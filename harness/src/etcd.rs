//! etcd processes for tests and benchmarks: a real etcd (the Debian package `etcd-server`), one
//! member or several, on reserved ports of 127.0.0.1, each member SIGKILLable and restartable
//! on the same ports and data directory.
//!
//! The binary is `$STRATUS_ETCD` when set, else `etcd` on the `PATH`, else `/usr/bin/etcd`.
//! The README's test command installs the package when it is missing, so a missing binary is
//! an error naming the package, never a skipped test.
//!
//! etcd's timing is shortened for tests (heartbeat 50 ms, election 500 ms): its minimum lease
//! is then 1 s instead of 2 s, so a placement leader's lease can be short.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::ports;

#[derive(Debug, thiserror::Error)]
pub enum EtcdError {
    #[error(
        "etcd not found (looked at $STRATUS_ETCD, `etcd` on the PATH and /usr/bin/etcd): install the Debian package etcd-server (the README's test command does)"
    )]
    NotFound,
    #[error("cannot start etcd member {member}: {cause}")]
    Spawn { member: String, cause: String },
    #[error("etcd member {member} did not become healthy within {after:?}; log tail:\n{tail}")]
    NotHealthy {
        member: String,
        after: Duration,
        tail: String,
    },
}

/// The etcd binary to run.
pub fn binary() -> Result<PathBuf, EtcdError> {
    if let Some(p) = std::env::var_os("STRATUS_ETCD") {
        return Ok(PathBuf::from(p));
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join("etcd");
            if candidate.is_file() {
                return Ok(candidate);
            }
        }
    }
    let fallback = PathBuf::from("/usr/bin/etcd");
    if fallback.is_file() {
        return Ok(fallback);
    }
    Err(EtcdError::NotFound)
}

struct Member {
    name: String,
    client_port: u16,
    peer_port: u16,
    data_dir: PathBuf,
    log: PathBuf,
    child: Option<Child>,
}

/// A running etcd cluster; every member is SIGKILLed when it is dropped.
pub struct EtcdCluster {
    members: Vec<Member>,
    binary: PathBuf,
    initial_cluster: String,
    /// Client-side TLS (`--cert-file`, `--key-file`, `--client-cert-auth`,
    /// `--trusted-ca-file`): client URLs are https and every client needs a certificate the
    /// CA signed. Peers speak plain http among themselves.
    tls: Option<node::tls::SecurityConfig>,
}

impl EtcdCluster {
    /// Starts `n` members under `dir` and waits until each answers `/health`.
    pub fn start(dir: &Path, n: usize) -> Result<EtcdCluster, EtcdError> {
        EtcdCluster::start_with(dir, n, None)
    }

    /// [`EtcdCluster::start`] with client TLS from `tls` (a certificate for `127.0.0.1` and
    /// its CA, e.g. from [`crate::certs::ThrowawayCa`]); its `/health` is checked over https
    /// with the same certificate ([`crate::http::use_identity`]).
    pub fn start_with(
        dir: &Path,
        n: usize,
        tls: Option<node::tls::SecurityConfig>,
    ) -> Result<EtcdCluster, EtcdError> {
        let binary = binary()?;
        std::fs::create_dir_all(dir).map_err(|e| EtcdError::Spawn {
            member: "all".into(),
            cause: format!("directory {}: {e}", dir.display()),
        })?;
        let ports = ports::reserve(2 * n).map_err(|e| EtcdError::Spawn {
            member: "ports".into(),
            cause: e.to_string(),
        })?;
        let members: Vec<Member> = (0..n)
            .map(|i| Member {
                name: format!("etcd-{i}"),
                client_port: ports[2 * i],
                peer_port: ports[2 * i + 1],
                data_dir: dir.join(format!("etcd-{i}")),
                log: dir.join(format!("etcd-{i}.log")),
                child: None,
            })
            .collect();
        let initial_cluster = members
            .iter()
            .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer_port))
            .collect::<Vec<_>>()
            .join(",");
        if let Some(t) = &tls {
            crate::http::use_identity(t).map_err(|e| EtcdError::Spawn {
                member: "all".into(),
                cause: format!("the client certificate: {e}"),
            })?;
        }
        let mut cluster = EtcdCluster {
            members,
            binary,
            initial_cluster,
            tls,
        };
        for i in 0..n {
            cluster.spawn(i)?;
        }
        for i in 0..n {
            cluster.wait_healthy(i, Duration::from_secs(30))?;
        }
        Ok(cluster)
    }

    fn spawn(&mut self, i: usize) -> Result<(), EtcdError> {
        let scheme = self.scheme();
        let m = &mut self.members[i];
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&m.log)
            .map_err(|e| EtcdError::Spawn {
                member: m.name.clone(),
                cause: format!("log {}: {e}", m.log.display()),
            })?;
        let err_log = log.try_clone().map_err(|e| EtcdError::Spawn {
            member: m.name.clone(),
            cause: e.to_string(),
        })?;
        let client = format!("{scheme}://127.0.0.1:{}", m.client_port);
        let peer = format!("http://127.0.0.1:{}", m.peer_port);
        let mut cmd = Command::new(&self.binary);
        if let Some(t) = &self.tls {
            cmd.arg("--cert-file")
                .arg(&t.cert_path)
                .arg("--key-file")
                .arg(&t.key_path)
                .arg("--trusted-ca-file")
                .arg(&t.ca_path)
                .arg("--client-cert-auth");
        }
        let child = cmd
            .arg("--name")
            .arg(&m.name)
            .arg("--data-dir")
            .arg(&m.data_dir)
            .args(["--listen-client-urls", &client])
            .args(["--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &self.initial_cluster])
            .args(["--initial-cluster-state", "new"])
            .args(["--initial-cluster-token", "stratus-test"])
            .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(err_log))
            .spawn()
            .map_err(|e| EtcdError::Spawn {
                member: m.name.clone(),
                cause: format!("{}: {e}", self.binary.display()),
            })?;
        m.child = Some(child);
        Ok(())
    }

    fn wait_healthy(&self, i: usize, timeout: Duration) -> Result<(), EtcdError> {
        let m = &self.members[i];
        let url = format!("{}://127.0.0.1:{}/health", self.scheme(), m.client_port);
        let started = Instant::now();
        while started.elapsed() < timeout {
            if let Ok(reply) = crate::http::get(&url, Duration::from_secs(1))
                && reply.status.is_success()
                && crate::http::text(&reply).contains("true")
            {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let text = std::fs::read_to_string(&m.log).unwrap_or_default();
        Err(EtcdError::NotHealthy {
            member: m.name.clone(),
            after: timeout,
            tail: crate::supervisor::tail(&text, 30),
        })
    }

    fn scheme(&self) -> &'static str {
        if self.tls.is_some() { "https" } else { "http" }
    }

    /// Every member's client URL.
    pub fn endpoints(&self) -> Vec<String> {
        self.members
            .iter()
            .map(|m| format!("{}://127.0.0.1:{}", self.scheme(), m.client_port))
            .collect()
    }

    /// SIGKILLs member `i` (its data stays).
    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.members[i].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts member `i` again on its ports and data, and waits until the cluster is healthy
    /// through it.
    pub fn restart(&mut self, i: usize) -> Result<(), EtcdError> {
        self.kill(i);
        self.spawn(i)?;
        self.wait_healthy(i, Duration::from_secs(30))
    }

    /// The members' logs, for a failing test's report.
    pub fn logs(&self) -> String {
        self.members
            .iter()
            .map(|m| {
                let text = std::fs::read_to_string(&m.log).unwrap_or_default();
                format!("--- {} ---\n{}", m.name, crate::supervisor::tail(&text, 20))
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
    }
}
