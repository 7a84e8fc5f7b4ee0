//! The test side of [`harness::supervisor`]: a node whose failures panic (a test has nothing
//! better to do with them) and whose log goes to the test's stderr when the test fails (the
//! log file dies with the test's temporary directory), plus small helpers about processes.

use std::path::Path;
use std::process::{Command, ExitStatus};
use std::time::Duration;

use harness::supervisor::{self, Finished, Launch, NodeProcess, Signal};

/// A number unique in this test process (for file names).
pub fn next_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
}

/// Lines of a node's output shown when its test fails.
const REPORT_LINES: usize = 200;

/// A running node of a test; SIGKILLed when dropped.
pub struct TestNode {
    process: NodeProcess,
    /// The output is already in a panic message.
    reported: bool,
}

impl TestNode {
    /// Starts the node and waits for its listening line; panics with the tail of its log when
    /// it exits first or stays silent.
    pub fn start(launch: Launch) -> TestNode {
        let process = NodeProcess::start(launch).unwrap_or_else(|e| panic!("{e}"));
        TestNode {
            process,
            reported: false,
        }
    }

    pub fn name(&self) -> &str {
        self.process.name()
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> &str {
        self.process.url()
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.process.url())
    }

    /// The process id; `None` once it exited and was reaped.
    pub fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    /// What the node wrote (stdout and stderr) since it started.
    pub fn output(&self) -> String {
        self.process.output()
    }

    /// The node's name, log file and the tail of its output, for assertion messages.
    pub fn output_report(&self) -> String {
        format!(
            "--- {} output ({}) ---\n{}",
            self.process.name(),
            self.process.log_path().display(),
            supervisor::tail(&self.output(), REPORT_LINES)
        )
    }

    /// SIGTERM, then waits up to `timeout` for the exit; panics (after a SIGKILL) when the node
    /// does not exit in time.
    pub fn terminate(&mut self, timeout: Duration) -> ExitStatus {
        match self.process.stop(timeout) {
            Ok(status) => status,
            Err(e) => {
                self.reported = true;
                panic!("{e}\n{}", self.output_report())
            }
        }
    }

    /// Starts the node again with `command` after it exited (see
    /// [`NodeProcess::restart`]: the same log, the same URL); panics with the tail of this
    /// run's output when it does not come back.
    pub fn restart(&mut self, command: Command) {
        if let Err(e) = self.process.restart(command) {
            self.reported = true;
            panic!("{e}\n{}", self.output_report())
        }
    }

    /// SIGKILL and reap.
    pub fn kill(&mut self) {
        if let Err(e) = self.process.kill() {
            panic!("{e}");
        }
    }

    /// Sends `signal` (fault injection: SIGSTOP, SIGCONT, ...).
    pub fn signal(&mut self, signal: Signal) {
        if let Err(e) = self.process.signal(signal) {
            panic!("{e}");
        }
    }

    /// The exit status if the node has exited.
    pub fn try_exit(&mut self) -> Option<ExitStatus> {
        self.process.try_exit().unwrap_or_else(|e| panic!("{e}"))
    }

    /// Waits up to `timeout` for the node to exit by itself (no signal sent): its status, or
    /// `None` while it still runs.
    pub fn wait_for_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Some(status) = self.try_exit() {
                return Some(status);
            }
            if std::time::Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for TestNode {
    /// When the test is failing, the node's output goes to the test's stderr; the node is then
    /// SIGKILLed by its [`NodeProcess`].
    fn drop(&mut self) {
        if std::thread::panicking() && !self.reported {
            eprintln!("{}", self.output_report());
        }
    }
}

/// Runs `cmd` to completion (it must not start serving): its exit status, stdout and stderr.
/// Panics if it runs longer than `timeout`.
pub fn run_to_exit(cmd: Command, timeout: Duration) -> (ExitStatus, String, String) {
    let Finished {
        status,
        stdout,
        stderr,
    } = supervisor::run_to_exit(cmd, timeout).unwrap_or_else(|e| panic!("{e}"));
    (status, stdout, stderr)
}

/// A `Name:   1234 kB` line of `/proc/PID/status` (`VmRSS`, `VmHWM`), in bytes; `None` when the
/// process or the line is gone.
pub fn proc_status_bytes(pid: u32, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = text.lines().find(|l| {
        l.strip_prefix(field)
            .is_some_and(|rest| rest.starts_with(':'))
    })?;
    let kib: u64 = line[field.len() + 1..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// The stdout of a finished command that must have exited 0; otherwise a panic showing its
/// status, stdout and stderr.
pub fn stdout_of_success(out: std::process::Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{:?}\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The log file of a node started from `dir`: `<dir>/<kind>-<n>.log`, one per start, so that
/// two starts never share a file.
pub fn log_path(dir: &Path, kind: &str) -> std::path::PathBuf {
    dir.join(format!("{kind}-{}.log", next_id()))
}
