//! `stratus sql-server` as a process, and the real MySQL clients the tests talk to it with:
//! the `mysql` command-line client (Debian's `mariadb-client`) and Python drivers (PyMySQL,
//! mysql-connector-python) from PyPI. The README's test command (`scripts/test`) installs
//! them: the client with apt, the drivers into a virtualenv whose interpreter it exports as
//! `STRATUS_PYTHON`.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::binaries::{self, STRATUS};
use crate::cluster::{Cluster, StoreKind};
use crate::server_proc::ServerProc;

/// How long the endpoint may take to start (the client reads the cluster first).
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// The SQL user root's password on the clusters the tests start (given to the endpoint by
/// `--root-password-file`).
pub const ROOT_PASSWORD: &str = "e2e-root-pw";

/// A running `stratus sql-server`; killed on drop.
pub struct SqlEndpoint {
    child: Child,
    pub addr: SocketAddr,
    /// Its status listener (`GET /metrics`).
    pub status: SocketAddr,
}

impl SqlEndpoint {
    /// Starts the endpoint over the cluster of `cluster_file`, on a free port; a fresh
    /// cluster's root gets [`ROOT_PASSWORD`] (from a file beside the cluster file).
    pub fn start(cluster_file: &Path) -> SqlEndpoint {
        SqlEndpoint::start_with(cluster_file, &[])
    }

    /// [`SqlEndpoint::start`] with `extra` arguments (limits).
    pub fn start_with(cluster_file: &Path, extra: &[&str]) -> SqlEndpoint {
        let password_file = cluster_file.with_file_name("root-password");
        std::fs::write(&password_file, format!("{ROOT_PASSWORD}\n")).expect("write root password");
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&password_file, std::fs::Permissions::from_mode(0o600))
                .expect("chmod root password");
        }
        let mut child = Command::new(binaries::binary(STRATUS))
            .args(["sql-server", "--listen", "127.0.0.1:0"])
            .args(extra)
            .args(["--status-listen", "127.0.0.1:0", "--root-password-file"])
            .arg(&password_file)
            .arg("--config")
            .arg(cluster_file)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn stratus sql-server");
        let stdout = child.stdout.take().expect("stdout");
        // Killed if the start fails below (a panic before `SqlEndpoint` exists).
        let mut child = StartGuard(Some(child));
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(addr) = line.split("listening on ").nth(1) {
                    let _ = tx.send(addr.trim().to_string());
                }
            }
        });
        let deadline = Instant::now() + START_TIMEOUT;
        // The status listener's line comes first, then the endpoint's.
        let mut status = None;
        let addr = loop {
            if let Ok(a) = rx.recv_timeout(Duration::from_millis(100)) {
                match a.strip_prefix("http://") {
                    Some(s) => status = Some(s.parse().expect("a socket address")),
                    None => break a.parse().expect("a socket address"),
                }
                continue;
            }
            if let Ok(Some(status)) = child.get().try_wait() {
                panic!("stratus sql-server exited at start: {status}");
            }
            assert!(
                Instant::now() < deadline,
                "stratus sql-server did not start"
            );
        };
        let status = status.expect("the status listener's address before the endpoint's");
        SqlEndpoint {
            child: child.take(),
            addr,
            status,
        }
    }

    /// The endpoint's metrics (`GET /metrics` of its status listener).
    pub fn metrics(&self) -> harness::metrics::Metrics {
        let url = format!("http://{}/metrics", self.status);
        let reply = harness::http::get_ok(&url, Duration::from_secs(10)).expect("GET /metrics");
        let text = String::from_utf8(reply.body.to_vec()).expect("utf-8 metrics");
        harness::metrics::Metrics::parse(&text).expect("metrics parse")
    }

    /// `mysql --batch -e sql` as user root (tab-separated output, a header line per result).
    pub fn mysql(&self, sql: &str) -> Output {
        self.mysql_as("root", ROOT_PASSWORD, sql)
    }

    /// `mysql --batch -e sql` as `user` with `password` (empty: none).
    pub fn mysql_as(&self, user: &str, password: &str, sql: &str) -> Output {
        self.mysql_with(&[], user, password, sql)
    }

    /// [`SqlEndpoint::mysql_as`] with `options` first (`--ssl-ca=...`, `--skip-ssl`).
    pub fn mysql_with(&self, options: &[&str], user: &str, password: &str, sql: &str) -> Output {
        let mut cmd = Command::new("mysql");
        cmd.args(options)
            .args(["-h", &self.addr.ip().to_string()])
            .args(["-P", &self.addr.port().to_string()])
            .args(["-u", user]);
        if !password.is_empty() {
            cmd.arg(format!("--password={password}"));
        }
        cmd.args(["--batch", "--raw", "-e", sql])
            .stdin(Stdio::null())
            .output()
            .expect("run mysql (the Debian package mariadb-client; scripts/test installs it)")
    }

    /// Runs a Python `script` with `PORT` set to the endpoint's port and `PASSWORD` to
    /// root's password in its environment.
    pub fn python(&self, script: &str) -> Output {
        let python = std::env::var("STRATUS_PYTHON").unwrap_or_else(|_| "python3".into());
        Command::new(&python)
            .args(["-c", script])
            .env("PORT", self.addr.port().to_string())
            .env("PASSWORD", ROOT_PASSWORD)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| {
                panic!("run {python} (scripts/test makes a virtualenv with the drivers): {e}")
            })
    }
}

/// A server, a cluster file naming it and an endpoint over it: what the SQL endpoint's tests
/// start. Everything stops when it is dropped.
pub struct EndpointOverServer {
    pub endpoint: SqlEndpoint,
    pub server: ServerProc,
    _cluster: Cluster,
}

impl EndpointOverServer {
    /// Starts them, the endpoint with `extra` arguments (limits).
    pub fn start(extra: &[&str]) -> EndpointOverServer {
        let cluster = Cluster::new(StoreKind::Local);
        let server = ServerProc::start(&cluster.server_config("server"));
        let file = cluster.path("cluster.toml");
        std::fs::write(&file, format!("servers = [\"{}\"]\n", server.base_url()))
            .expect("write the cluster file");
        let endpoint = SqlEndpoint::start_with(&file, extra);
        EndpointOverServer {
            endpoint,
            server,
            _cluster: cluster,
        }
    }
}

/// A child process killed on drop unless taken.
struct StartGuard(Option<Child>);

impl StartGuard {
    fn get(&mut self) -> &mut Child {
        self.0.as_mut().expect("a child until taken")
    }

    fn take(&mut self) -> Child {
        self.0.take().expect("a child until taken")
    }
}

impl Drop for StartGuard {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for SqlEndpoint {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `ERROR code (state)` line the mysql client printed for a failed run (it echoes the
/// statement between dashes first); panics when the run succeeded.
pub fn error_line(out: &Output) -> String {
    assert!(!out.status.success(), "expected a failure, found success");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    stderr
        .lines()
        .find(|l| l.starts_with("ERROR"))
        .unwrap_or(&stderr)
        .to_string()
}

/// stdout of a successful run (panics with its stderr otherwise).
pub fn stdout_ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{:?}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).expect("utf-8 stdout")
}
