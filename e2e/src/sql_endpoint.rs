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

/// How long the endpoint may take to start (the client reads the cluster first).
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A running `stratus sql-server`; killed on drop.
pub struct SqlEndpoint {
    child: Child,
    pub addr: SocketAddr,
}

impl SqlEndpoint {
    /// Starts the endpoint over the cluster of `cluster_file`, on a free port.
    pub fn start(cluster_file: &Path) -> SqlEndpoint {
        let mut child = Command::new(binaries::binary(STRATUS))
            .args(["sql-server", "--listen", "127.0.0.1:0", "--config"])
            .arg(cluster_file)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn stratus sql-server");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(addr) = line.split("listening on ").nth(1) {
                    let _ = tx.send(addr.trim().to_string());
                }
            }
        });
        let deadline = Instant::now() + START_TIMEOUT;
        let addr = loop {
            if let Ok(a) = rx.recv_timeout(Duration::from_millis(100)) {
                break a.parse().expect("a socket address");
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("stratus sql-server exited at start: {status}");
            }
            assert!(
                Instant::now() < deadline,
                "stratus sql-server did not start"
            );
        };
        SqlEndpoint { child, addr }
    }

    /// `mysql --batch -e sql` as user root (tab-separated output, a header line per result).
    pub fn mysql(&self, sql: &str) -> Output {
        Command::new("mysql")
            .args(["-h", &self.addr.ip().to_string()])
            .args(["-P", &self.addr.port().to_string()])
            .args(["-u", "root", "--batch", "--raw", "-e", sql])
            .stdin(Stdio::null())
            .output()
            .expect("run mysql (the Debian package mariadb-client; scripts/test installs it)")
    }

    /// Runs a Python `script` with `PORT` set to the endpoint's port in its environment.
    pub fn python(&self, script: &str) -> Output {
        let python = std::env::var("STRATUS_PYTHON").unwrap_or_else(|_| "python3".into());
        Command::new(&python)
            .args(["-c", script])
            .env("PORT", self.addr.port().to_string())
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| {
                panic!("run {python} (scripts/test makes a virtualenv with the drivers): {e}")
            })
    }
}

impl Drop for SqlEndpoint {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
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
