//! A child process under test: spawned with piped stdout, its listening line parsed for the
//! address, its stderr kept in a file (shown when it fails to start), SIGKILLed on drop.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A number unique in this test process (for file names).
pub fn next_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
}

/// How long a process may take to print its listening line.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A running child process.
pub struct Proc {
    name: String,
    child: Option<Child>,
    /// `http://127.0.0.1:PORT`.
    base_url: String,
    stdout: Arc<Mutex<String>>,
    stderr_path: PathBuf,
    exit: Option<ExitStatus>,
    /// The output is already in a panic message.
    reported: bool,
}

impl Proc {
    /// Spawns `cmd` (its stdout and stderr are set here; stderr goes to `stderr_path`) and
    /// waits for a stdout line `{prefix}http://ADDR`. Panics with the process's output when it
    /// exits or stays silent for [`START_TIMEOUT`].
    pub fn spawn(name: &str, mut cmd: Command, prefix: &str, stderr_path: &Path) -> Proc {
        let stderr = File::create(stderr_path).expect("stderr file");
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr));
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name} ({cmd:?}): {e}"));
        let stdout = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = mpsc::channel();
        {
            let pipe = child.stdout.take().expect("piped stdout");
            let stdout = stdout.clone();
            let prefix = prefix.to_string();
            // Drains stdout for the process's whole life, so a chatty child never blocks.
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines() {
                    let Ok(line) = line else { break };
                    if let Some(rest) = line.trim().strip_prefix(prefix.as_str()) {
                        let _ = tx.send(rest.trim().to_string());
                    }
                    let mut out = stdout.lock().unwrap();
                    out.push_str(&line);
                    out.push('\n');
                }
            });
        }
        let mut proc = Proc {
            name: name.to_string(),
            child: Some(child),
            base_url: String::new(),
            stdout,
            stderr_path: stderr_path.to_path_buf(),
            exit: None,
            reported: false,
        };
        match rx.recv_timeout(START_TIMEOUT) {
            Ok(url) => proc.base_url = url.trim_end_matches('/').to_string(),
            Err(_) => {
                let status = proc
                    .child
                    .as_mut()
                    .and_then(|c| c.try_wait().ok().flatten());
                let report = proc.output_report();
                proc.reported = true;
                panic!(
                    "{name} did not print `{prefix}http://...` within {START_TIMEOUT:?} \
                     (exit status: {status:?})\n{report}"
                );
            }
        }
        proc
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url)
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// What the process printed so far (stdout, then stderr).
    pub fn output_report(&self) -> String {
        let stderr = std::fs::read_to_string(&self.stderr_path).unwrap_or_default();
        format!(
            "--- {} stdout ---\n{}--- {} stderr ---\n{}",
            self.name,
            self.stdout.lock().unwrap(),
            self.name,
            tail(&stderr, 8 * 1024)
        )
    }

    /// Stdout so far.
    pub fn stdout(&self) -> String {
        self.stdout.lock().unwrap().clone()
    }

    /// SIGTERM, then waits up to `timeout` for the exit (SIGKILL after that, and a panic).
    pub fn terminate(&mut self, timeout: Duration) -> ExitStatus {
        if let Some(status) = self.exit {
            return status;
        }
        let pid = self.pid().expect("a running child");
        let sent = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .expect("run kill");
        assert!(sent.success(), "kill -TERM {pid} failed");
        let deadline = Instant::now() + timeout;
        loop {
            let child = self.child.as_mut().expect("a running child");
            if let Some(status) = child.try_wait().expect("wait for child") {
                self.exit = Some(status);
                return status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                self.reported = true;
                panic!(
                    "{} did not exit within {timeout:?} of SIGTERM\n{}",
                    self.name,
                    self.output_report()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL and reap.
    pub fn kill(&mut self) {
        if let Some(child) = self.child.as_mut()
            && self.exit.is_none()
        {
            let _ = child.kill();
            self.exit = child.wait().ok();
        }
    }

    /// The exit status if the process has exited.
    pub fn try_exit(&mut self) -> Option<ExitStatus> {
        if self.exit.is_none() {
            self.exit = self.child.as_mut()?.try_wait().ok().flatten();
        }
        self.exit
    }
}

impl Drop for Proc {
    /// SIGKILL; when the test is failing, the process's output goes to the test's stderr (the
    /// files die with the test's temporary directory).
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() && !self.reported {
            eprintln!("{}", self.output_report());
        }
    }
}

fn tail(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// Runs `cmd` to completion (it must not start serving): the exit status and stderr. Panics if
/// it runs longer than `timeout`.
pub fn run_to_exit(mut cmd: Command, timeout: Duration) -> (ExitStatus, String, String) {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    let deadline = Instant::now() + timeout;
    loop {
        if child.try_wait().expect("wait").is_some() {
            let out = child.wait_with_output().expect("output");
            return (
                out.status,
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            );
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "{cmd:?} still running after {timeout:?} (expected it to exit)\nstdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
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
