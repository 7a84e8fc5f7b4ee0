//! The one supervisor of the node processes this machine starts: `stratus up`, `stratus demo`
//! and `stratus bench` start their six nodes through it, and so does every end-to-end test
//! (servers, workers and the test S3 server).
//!
//! A node is a child process that announces itself on stdout with `{NAME} listening on
//! http://ADDR` ([`node::http::bind`] prints it once the socket is bound, so the port is
//! known even when the config asked for port 0). The supervisor:
//!
//! * appends the node's stdout **and** stderr to one log file. A file, not a pipe: a chatty
//!   node can never block on a full pipe nobody drains, the log outlives the supervisor (for a
//!   person reading `logs/<name>.log` after `stratus up` stopped), and a test shows the same file
//!   when it fails;
//! * waits for the listening line in the part of the log this start wrote (the log is appended
//!   to across restarts, so the offset at spawn time is where this start begins), up to a
//!   timeout. A node that exits first, or stays silent, is an error carrying the tail of its
//!   log: that is where a node says why it could not start;
//! * stops a node with SIGTERM and a deadline, then SIGKILL (the nodes flush their memtables on
//!   SIGTERM, which may take a while, but never forever);
//! * SIGKILLs a node still running when its [`NodeProcess`] is dropped, so neither a failing
//!   test nor an early error path leaves processes behind. (A supervisor killed with SIGKILL
//!   leaves its nodes running: the kernel tells nobody.)
//!
//! The command is the caller's: program, arguments, environment and process group. `stratus up`
//! puts each node in a process group of its own so that the terminal's Ctrl-C reaches only
//! `stratus`, which then stops the nodes in order; tests leave nodes in their own group, so that
//! a Ctrl-C on `cargo test` stops the nodes with it.
//!
//! A node that has exited (and was reaped) can be started again with
//! [`NodeProcess::restart`]: the same name, log and listening line, a command the caller
//! rebuilds (a [`Command`] spawns once). Its output is appended to the same log from a new
//! offset, so [`NodeProcess::output`] and the wait for the listening line read the new run
//! only, and it must come back on the same URL: its peers and clients know it by that URL.
//! When to restart is [`RestartPolicy`]'s decision, a pure function of the restart history,
//! so that a node dying at every start is given up on instead of restarted forever.
//!
//! The pid stays available for fault injection ([`NodeProcess::signal`]: SIGSTOP, SIGCONT,
//! SIGKILL) until the node is reaped, and no signal is sent after that: the pid may already
//! belong to another process.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

pub use nix::sys::signal::Signal;

/// How long a node may take to print its listening line unless [`Launch::start_timeout`] says
/// otherwise (a debug build opening a large WAL is slow).
pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(60);

/// How many lines of a node's log an error shows.
pub const TAIL_LINES: usize = 40;

/// How often the log and the child are polled while waiting.
const POLL: Duration = Duration::from_millis(20);

/// What to start: the node's name, its command and where its output goes.
#[derive(Debug)]
pub struct Launch {
    /// The node's name in messages (`server-a`, `stratus-worker`).
    pub name: String,
    /// Program, arguments, environment, process group. Stdin, stdout and stderr are set by
    /// [`NodeProcess::start`].
    pub command: Command,
    /// The program's name in its listening line: `{announce} listening on http://ADDR`.
    pub announce: String,
    /// The log file, appended to (created with its directory if missing).
    pub log: PathBuf,
    pub start_timeout: Duration,
}

impl Launch {
    pub fn new(
        name: impl Into<String>,
        command: Command,
        announce: impl Into<String>,
        log: impl Into<PathBuf>,
    ) -> Launch {
        Launch {
            name: name.into(),
            command,
            announce: announce.into(),
            log: log.into(),
            start_timeout: DEFAULT_START_TIMEOUT,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("cannot open the log of {node}: path={} cause={cause}", path.display())]
    Log {
        node: String,
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("cannot start {node}: {program}: {cause}")]
    Spawn {
        node: String,
        program: String,
        cause: std::io::Error,
    },
    #[error("{node} did not print its listening line: nothing within {timeout:?}; log={}\n{tail}", log.display())]
    NotListening {
        node: String,
        timeout: Duration,
        log: PathBuf,
        tail: String,
    },
    #[error("{node} exited: status={status} log={}\n{tail}", log.display())]
    Exited {
        node: String,
        status: ExitStatus,
        log: PathBuf,
        tail: String,
    },
    #[error("{node} did not exit within {timeout:?} of SIGTERM and was killed: log={}", log.display())]
    StopTimeout {
        node: String,
        timeout: Duration,
        log: PathBuf,
    },
    #[error(
        "cannot signal {node}: it was reaped already (its pid may belong to another process): signal={signal}"
    )]
    Reaped { node: String, signal: Signal },
    #[error("cannot signal {node}: signal={signal} pid={pid} cause={cause}")]
    Signal {
        node: String,
        signal: Signal,
        pid: u32,
        cause: nix::Error,
    },
    #[error("cannot wait for {node}: cause={cause}")]
    Wait { node: String, cause: std::io::Error },
    /// [`NodeProcess::restart`] of a child that has not exited (or not been reaped) yet.
    #[error("cannot restart {node}: it is still running: pid={pid}")]
    StillRunning { node: String, pid: u32 },
    /// A restarted node announced another URL than its first start: nobody would find it.
    #[error("{node} came back on another url: before={before} after={after} log={}", log.display())]
    MovedOnRestart {
        node: String,
        before: String,
        after: String,
        log: PathBuf,
    },
    #[error(
        "{command} still running after {timeout:?} (expected it to exit) and was killed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    )]
    RunTimeout {
        command: String,
        timeout: Duration,
        stdout: String,
        stderr: String,
    },
}

/// A started node: listening when [`NodeProcess::start`] returned it.
#[derive(Debug)]
pub struct NodeProcess {
    name: String,
    child: Child,
    /// `http://HOST:PORT`, from the listening line.
    url: String,
    log: PathBuf,
    /// The log's length when this start began: its output is what follows.
    log_offset: u64,
    /// Set once the child is reaped; no signal is sent after that.
    exit: Option<ExitStatus>,
    /// The start of its listening line: `{announce} listening on `.
    listening_prefix: String,
    start_timeout: Duration,
    /// Successful restarts since the first start.
    restarts: u32,
}

impl NodeProcess {
    /// Spawns the node with its output appended to its log and waits for its listening line.
    /// A node that exits first, or stays silent for [`Launch::start_timeout`], is an error with
    /// the tail of what it wrote, and is killed.
    pub fn start(launch: Launch) -> Result<NodeProcess, NodeError> {
        let Launch {
            name,
            command,
            announce,
            log,
            start_timeout,
        } = launch;
        let (child, log_offset) = spawn(&name, command, &log)?;
        let mut node = NodeProcess {
            name,
            child,
            url: String::new(),
            log,
            log_offset,
            exit: None,
            listening_prefix: format!("{announce} listening on "),
            start_timeout,
            restarts: 0,
        };
        // On error, `node` is dropped here, which kills the child.
        node.url = node.wait_listening()?;
        Ok(node)
    }

    /// Starts the node again with `command` (the caller rebuilds it: a [`Command`] spawns
    /// once), after it exited and was reaped ([`NodeProcess::try_exit`] returned its status):
    /// a child that still runs is [`NodeError::StillRunning`], never a second copy. Its output
    /// is appended to the same log from a new offset, and it must print its listening line
    /// within the start timeout, with the URL of its first start
    /// ([`NodeError::MovedOnRestart`] otherwise). On error the new child is killed, so the
    /// node can be restarted again.
    pub fn restart(&mut self, command: Command) -> Result<(), NodeError> {
        if self.try_exit()?.is_none() {
            return Err(NodeError::StillRunning {
                node: self.name.clone(),
                pid: self.child.id(),
            });
        }
        let (child, log_offset) = spawn(&self.name, command, &self.log)?;
        // The old child was reaped: replacing it leaks nothing.
        self.child = child;
        self.log_offset = log_offset;
        self.exit = None;
        let url = match self.wait_listening() {
            Ok(url) => url,
            Err(e) => {
                self.kill()?;
                return Err(e);
            }
        };
        if url != self.url {
            self.kill()?;
            return Err(NodeError::MovedOnRestart {
                node: self.name.clone(),
                before: self.url.clone(),
                after: url,
                log: self.log.clone(),
            });
        }
        self.restarts += 1;
        Ok(())
    }

    /// How many times [`NodeProcess::restart`] brought the node back.
    pub fn restarts(&self) -> u32 {
        self.restarts
    }

    /// Waits for the listening line and the node's URL in this start's output.
    fn wait_listening(&mut self) -> Result<String, NodeError> {
        let timeout = self.start_timeout;
        let deadline = Instant::now() + timeout;
        loop {
            let text = self.output();
            if let Some(url) = listening_url(&text, &self.listening_prefix) {
                return Ok(url);
            }
            if let Some(status) = self.try_exit()? {
                return Err(self.exited(status));
            }
            if Instant::now() > deadline {
                return Err(NodeError::NotListening {
                    node: self.name.clone(),
                    timeout,
                    log: self.log.clone(),
                    tail: tail(&text, TAIL_LINES),
                });
            }
            std::thread::sleep(POLL);
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// `http://HOST:PORT`, as the node announced it.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The node's log file (stdout and stderr, appended across starts).
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// What the node wrote since this start ("" when the log cannot be read: this is for
    /// messages and polls only).
    pub fn output(&self) -> String {
        read_from(&self.log, self.log_offset)
    }

    /// The process id; `None` once the node was reaped.
    pub fn pid(&self) -> Option<u32> {
        self.exit.is_none().then(|| self.child.id())
    }

    /// Sends `signal` (fault injection: SIGSTOP, SIGCONT, SIGKILL, ...). An error once the node
    /// was reaped, rather than signalling whatever process has its pid now.
    pub fn signal(&mut self, signal: Signal) -> Result<(), NodeError> {
        let Some(pid) = self.pid() else {
            return Err(NodeError::Reaped {
                node: self.name.clone(),
                signal,
            });
        };
        let raw = i32::try_from(pid).map_err(|_| NodeError::Signal {
            node: self.name.clone(),
            signal,
            pid,
            cause: nix::Error::EINVAL,
        })?;
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), signal).map_err(|cause| {
            NodeError::Signal {
                node: self.name.clone(),
                signal,
                pid,
                cause,
            }
        })
    }

    /// The exit status if the node has exited (reaping it), `None` while it runs.
    pub fn try_exit(&mut self) -> Result<Option<ExitStatus>, NodeError> {
        if self.exit.is_none() {
            self.exit = self.child.try_wait().map_err(|cause| NodeError::Wait {
                node: self.name.clone(),
                cause,
            })?;
        }
        Ok(self.exit)
    }

    /// An error saying the node exited with `status`, with the tail of this start's output.
    pub fn exited(&self, status: ExitStatus) -> NodeError {
        NodeError::Exited {
            node: self.name.clone(),
            status,
            log: self.log.clone(),
            tail: tail(&self.output(), TAIL_LINES),
        }
    }

    /// SIGTERM, then waits up to `timeout` for the exit; past it, SIGKILL and
    /// [`NodeError::StopTimeout`]. The status of a node that had exited already is returned
    /// as is (whether it exited cleanly is the caller's judgement).
    pub fn stop(&mut self, timeout: Duration) -> Result<ExitStatus, NodeError> {
        if let Some(status) = self.try_exit()? {
            return Ok(status);
        }
        self.signal(Signal::SIGTERM)?;
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.try_exit()? {
                return Ok(status);
            }
            if Instant::now() > deadline {
                self.kill()?;
                return Err(NodeError::StopTimeout {
                    node: self.name.clone(),
                    timeout,
                    log: self.log.clone(),
                });
            }
            std::thread::sleep(POLL);
        }
    }

    /// SIGKILL and reap; the exit status.
    pub fn kill(&mut self) -> Result<ExitStatus, NodeError> {
        if let Some(status) = self.try_exit()? {
            return Ok(status);
        }
        let wait_err = |cause| NodeError::Wait {
            node: self.name.clone(),
            cause,
        };
        self.child.kill().map_err(wait_err)?;
        let status = self.child.wait().map_err(wait_err)?;
        self.exit = Some(status);
        Ok(status)
    }
}

impl Drop for NodeProcess {
    /// SIGKILL a node still running: never leave processes behind.
    fn drop(&mut self) {
        if self.exit.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Spawns `command` with stdin closed and stdout and stderr appended to `log` (created with
/// its directory if missing); the child and the log's length before it wrote anything.
fn spawn(name: &str, mut command: Command, log: &Path) -> Result<(Child, u64), NodeError> {
    let log_err = |cause: std::io::Error| NodeError::Log {
        node: name.to_string(),
        path: log.to_path_buf(),
        cause,
    };
    if let Some(dir) = log.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(log_err)?;
    }
    let out = OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(log_err)?;
    let log_offset = out.metadata().map_err(log_err)?.len();
    let err = out.try_clone().map_err(log_err)?;
    let child = command
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(|cause| NodeError::Spawn {
            node: name.to_string(),
            program: command.get_program().to_string_lossy().into_owned(),
            cause,
        })?;
    Ok((child, log_offset))
}

/// How a node ended, for one line of a message: `exit status: 1` or `signal: 9`
/// ([`ExitStatus`]'s own text adds the signal's name in some Rust versions).
pub fn exit_summary(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status: {code}"),
        (None, Some(signal)) => format!("signal: {signal}"),
        (None, None) => status.to_string(),
    }
}

/// The URL on the first line of `text` that starts (after blanks) with `prefix`.
fn listening_url(text: &str, prefix: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.trim().strip_prefix(prefix))
        .map(|u| u.trim().trim_end_matches('/').to_string())
}

/// The file's text from byte `offset` ("" when unreadable).
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
pub fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// What a command that ran to its end printed.
#[derive(Debug, Clone)]
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `command` (stdin closed, stdout and stderr captured) until it exits: for a node that
/// must refuse to start. One still running after `timeout` is killed and is an error with its
/// output so far.
pub fn run_to_exit(mut command: Command, timeout: Duration) -> Result<Finished, NodeError> {
    let name = format!("{command:?}");
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|cause| NodeError::Spawn {
            node: name.clone(),
            program: command.get_program().to_string_lossy().into_owned(),
            cause,
        })?;
    // Drained while the command runs, so that it never blocks on a full pipe.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut text);
            }
            String::from_utf8_lossy(&text).into_owned()
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let wait_err = |cause| NodeError::Wait {
        node: name.clone(),
        cause,
    };
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait().map_err(wait_err)? {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(POLL);
    };
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    match status {
        Some(status) => Ok(Finished {
            status,
            stdout,
            stderr,
        }),
        None => Err(NodeError::RunTimeout {
            command: name,
            timeout,
            stdout,
            stderr,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut c = Command::new("sh");
        c.args(["-c", script]);
        c
    }

    fn launch(dir: &Path, script: &str) -> Launch {
        launch_command(dir, sh(script))
    }

    fn launch_command(dir: &Path, command: Command) -> Launch {
        let mut l = Launch::new("fake", command, "fake", dir.join("logs/fake.log"));
        l.start_timeout = Duration::from_secs(10);
        l
    }

    #[test]
    fn the_listening_url_is_read_from_this_starts_output_only() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("logs")).unwrap();
        std::fs::write(
            dir.path().join("logs/fake.log"),
            "fake listening on http://127.0.0.1:1/\n",
        )
        .unwrap();
        let node = NodeProcess::start(launch(
            dir.path(),
            "echo starting >&2; echo 'fake listening on http://127.0.0.1:2/'; exec sleep 30",
        ))
        .unwrap();
        assert_eq!(node.url(), "http://127.0.0.1:2");
        assert!(node.output().contains("starting"), "{}", node.output());
        assert!(!node.output().contains(":1/"), "{}", node.output());
    }

    #[test]
    fn a_node_that_exits_before_listening_is_an_error_with_its_output() {
        let dir = tempfile::tempdir().unwrap();
        let e = NodeProcess::start(launch(dir.path(), "echo 'bad key: kvengine.x' >&2; exit 2"))
            .unwrap_err();
        let text = e.to_string();
        assert!(matches!(e, NodeError::Exited { .. }), "{text}");
        assert!(text.contains("bad key: kvengine.x"), "{text}");
        assert!(text.contains("exit status: 2"), "{text}");
    }

    #[test]
    fn a_silent_node_is_an_error_after_the_start_timeout_and_is_killed() {
        let dir = tempfile::tempdir().unwrap();
        let mut l = launch(dir.path(), "echo $$ > pid; echo quiet; exec sleep 30");
        l.command.current_dir(dir.path());
        l.start_timeout = Duration::from_millis(300);
        let e = NodeProcess::start(l).unwrap_err();
        assert!(matches!(e, NodeError::NotListening { .. }), "{e}");
        assert!(e.to_string().contains("quiet"), "{e}");
        let pid = std::fs::read_to_string(dir.path().join("pid")).unwrap();
        assert!(
            !Path::new(&format!("/proc/{}", pid.trim())).exists(),
            "the silent node still runs"
        );
    }

    #[test]
    fn stop_sends_sigterm_and_returns_the_exit_status() {
        let dir = tempfile::tempdir().unwrap();
        let mut node = NodeProcess::start(launch(
            dir.path(),
            "trap 'echo bye; exit 0' TERM; echo 'fake listening on http://h:1'; \
             while true; do sleep 0.05; done",
        ))
        .unwrap();
        let status = node.stop(Duration::from_secs(10)).unwrap();
        assert_eq!(status.code(), Some(0));
        assert!(node.output().contains("bye"));
        assert_eq!(node.pid(), None);
        assert!(matches!(
            node.signal(Signal::SIGKILL),
            Err(NodeError::Reaped { .. })
        ));
    }

    /// The state letter of `/proc/PID/stat` (`T` stopped, `S` sleeping, ...).
    fn proc_state(pid: u32) -> char {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let (_, rest) = stat.rsplit_once(')').unwrap();
        rest.trim_start().chars().next().unwrap()
    }

    fn wait_for_state(pid: u32, want: impl Fn(char) -> bool) -> char {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let state = proc_state(pid);
            if want(state) || Instant::now() > deadline {
                return state;
            }
            std::thread::sleep(POLL);
        }
    }

    #[test]
    fn sigstop_freezes_a_node_and_sigcont_resumes_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut node = NodeProcess::start(launch(
            dir.path(),
            "echo 'fake listening on http://h:1'; exec sleep 30",
        ))
        .unwrap();
        let pid = node.pid().unwrap();
        node.signal(Signal::SIGSTOP).unwrap();
        assert_eq!(wait_for_state(pid, |s| s == 'T'), 'T');
        node.signal(Signal::SIGCONT).unwrap();
        assert_ne!(wait_for_state(pid, |s| s != 'T'), 'T');
    }

    #[test]
    fn a_node_ignoring_sigterm_is_killed_at_the_deadline() {
        let dir = tempfile::tempdir().unwrap();
        let mut node = NodeProcess::start(launch(
            dir.path(),
            "trap '' TERM; echo 'fake listening on http://h:1'; while true; do sleep 0.05; done",
        ))
        .unwrap();
        let e = node.stop(Duration::from_millis(300)).unwrap_err();
        assert!(matches!(e, NodeError::StopTimeout { .. }), "{e}");
        assert_eq!(node.pid(), None, "killed and reaped");
    }

    #[test]
    fn dropping_a_running_node_kills_it() {
        let dir = tempfile::tempdir().unwrap();
        let node = NodeProcess::start(launch(
            dir.path(),
            "echo 'fake listening on http://h:1'; exec sleep 30",
        ))
        .unwrap();
        let pid = node.pid().unwrap();
        drop(node);
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "pid {pid} outlived its NodeProcess"
        );
    }

    /// A node announcing `url` that writes `marker` first, then runs until killed.
    fn announcing(url: &str, marker: &str) -> Command {
        sh(&format!(
            "echo {marker}; echo 'fake listening on {url}'; exec sleep 30"
        ))
    }

    #[test]
    fn restart_reuses_the_log_and_refuses_a_running_child() {
        let dir = tempfile::tempdir().unwrap();
        let mut node = NodeProcess::start(launch_command(
            dir.path(),
            announcing("http://h:1", "first-run"),
        ))
        .unwrap();
        let first_pid = node.pid().unwrap();
        let e = node
            .restart(announcing("http://h:1", "never-started"))
            .unwrap_err();
        assert!(
            matches!(&e, NodeError::StillRunning { pid, .. } if *pid == first_pid),
            "{e}"
        );
        assert_eq!(node.pid(), Some(first_pid), "the running child is kept");

        node.signal(Signal::SIGKILL).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while node.try_exit().unwrap().is_none() {
            assert!(Instant::now() < deadline, "SIGKILL did not end the child");
            std::thread::sleep(POLL);
        }
        node.restart(announcing("http://h:1", "second-run"))
            .unwrap();
        assert_eq!(node.restarts(), 1);
        assert_eq!(node.url(), "http://h:1");
        let second_pid = node.pid().unwrap();
        assert_ne!(second_pid, first_pid);
        assert!(node.output().contains("second-run"), "{}", node.output());
        assert!(!node.output().contains("first-run"), "{}", node.output());
        let log = std::fs::read_to_string(node.log_path()).unwrap();
        assert!(
            log.find("first-run") < log.find("second-run"),
            "both runs, in order, in one log:\n{log}"
        );
        assert!(!log.contains("never-started"), "{log}");
    }

    #[test]
    fn a_restart_on_another_url_is_refused_and_its_child_killed() {
        let dir = tempfile::tempdir().unwrap();
        let mut node = NodeProcess::start(launch_command(
            dir.path(),
            announcing("http://h:1", "first"),
        ))
        .unwrap();
        node.kill().unwrap();
        let e = node.restart(announcing("http://h:2", "moved")).unwrap_err();
        assert!(
            matches!(&e, NodeError::MovedOnRestart { before, after, .. }
                if before == "http://h:1" && after == "http://h:2"),
            "{e}"
        );
        assert_eq!(node.pid(), None, "the moved child was killed and reaped");
        assert_eq!(node.restarts(), 0);
        assert_eq!(node.url(), "http://h:1");
    }

    #[test]
    fn a_restart_that_exits_before_listening_is_an_error_and_can_be_retried() {
        let dir = tempfile::tempdir().unwrap();
        let mut node = NodeProcess::start(launch_command(
            dir.path(),
            announcing("http://h:1", "first"),
        ))
        .unwrap();
        node.kill().unwrap();
        let e = node
            .restart(sh("echo 'address in use' >&2; exit 4"))
            .unwrap_err();
        assert!(matches!(e, NodeError::Exited { .. }), "{e}");
        assert!(e.to_string().contains("address in use"), "{e}");
        assert!(
            !e.to_string().contains("first"),
            "this run's output only: {e}"
        );
        node.restart(announcing("http://h:1", "third")).unwrap();
        assert_eq!(node.restarts(), 1);
        assert!(node.pid().is_some());
    }

    #[test]
    fn the_exit_summary_names_the_code_or_the_signal() {
        let dir = tempfile::tempdir().unwrap();
        let mut node = NodeProcess::start(launch(
            dir.path(),
            "echo 'fake listening on http://h:1'; exec sleep 30",
        ))
        .unwrap();
        assert_eq!(exit_summary(node.kill().unwrap()), "signal: 9");
        let done = run_to_exit(sh("exit 3"), Duration::from_secs(10)).unwrap();
        assert_eq!(exit_summary(done.status), "exit status: 3");
    }

    #[test]
    fn run_to_exit_captures_both_streams_and_kills_what_does_not_exit() {
        let done = run_to_exit(
            sh("echo out; echo err >&2; exit 3"),
            Duration::from_secs(10),
        )
        .unwrap();
        assert_eq!(
            (
                done.status.code(),
                done.stdout.as_str(),
                done.stderr.as_str()
            ),
            (Some(3), "out\n", "err\n")
        );
        let e = run_to_exit(
            sh("echo started; exec sleep 30"),
            Duration::from_millis(300),
        )
        .unwrap_err();
        assert!(matches!(e, NodeError::RunTimeout { .. }), "{e}");
        assert!(e.to_string().contains("started"), "{e}");
    }
}
