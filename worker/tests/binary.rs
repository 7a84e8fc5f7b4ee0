//! The `stratus-worker` process: exit code 2 and the key's name for a bad config, and a clean
//! start (effective config printed, bound address announced) and a clean stop on SIGTERM.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_stratus-worker");

fn run_with_config(text: &str) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("worker.toml");
    std::fs::write(&path, text).unwrap();
    Command::new(BIN)
        .arg("--config")
        .arg(&path)
        .output()
        .unwrap()
}

#[test]
fn an_unknown_key_exits_2_naming_it() {
    let out = run_with_config("[worker]\nblock-cache-sise = \"1MiB\"\n");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("block-cache-sise"), "{stderr}");
}

#[test]
fn a_bad_value_exits_2_naming_the_key() {
    let out = run_with_config("[worker]\nmax-request-size = \"lots\"\n");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("max-request-size"), "{stderr}");
}

#[test]
fn an_unexpected_argument_exits_2() {
    let out = Command::new(BIN).arg("--verbose").output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--verbose"));
}

/// Kills the child if the test fails before stopping it.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn http_get(addr: &str, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn the_process_prints_its_config_serves_and_exits_0_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("worker.toml");
    let dfs = dir.path().join("dfs");
    std::fs::write(
        &path,
        format!(
            "[worker]\naddr = \"127.0.0.1:0\"\nlabels = {{ zone = \"z1\" }}\n\n[dfs]\nlocal-dir = {:?}\n",
            dfs.display().to_string()
        ),
    )
    .unwrap();
    let child = Command::new(BIN)
        .arg("--config")
        .arg(&path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut running = Running(child);
    let stdout = running.0.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let mut printed = String::new();
    let addr = loop {
        let line = lines
            .next()
            .unwrap_or_else(|| panic!("stdout ended before the listening line:\n{printed}"))
            .unwrap();
        printed.push_str(&line);
        printed.push('\n');
        if let Some(addr) = line.strip_prefix("stratus-worker listening on http://") {
            break addr.to_string();
        }
    };
    assert!(printed.contains("max-request-size = \"1GiB\""), "{printed}");
    assert!(printed.contains("zone = \"z1\""), "{printed}");

    let status = http_get(&addr, "/status");
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    assert!(status.contains("\"role\":\"worker\""), "{status}");
    assert!(status.contains("\"zone\":\"z1\""), "{status}");

    let pid = running.0.id().to_string();
    let killed = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(killed.success());
    let t0 = Instant::now();
    let code = loop {
        if let Some(status) = running.0.try_wait().unwrap() {
            break status.code();
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the worker did not exit after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(code, Some(0));
}

/// Started with fewer open files allowed than its connections and kept tables may take, the
/// worker says so before it serves (here it then fails to bind an address already taken, so
/// that the test needs no shutdown).
#[test]
fn a_worker_whose_open_file_limit_is_below_its_config_warns_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("worker.toml");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    std::fs::write(
        &path,
        format!(
            "[worker]\naddr = \"{addr}\"\n\n[dfs]\nlocal-dir = {:?}\n",
            dir.path().join("dfs").display().to_string()
        ),
    )
    .unwrap();
    let run = |limit: u32| {
        // The shell's `ulimit` lowers the limit for the worker it then becomes.
        let script = format!("ulimit -n {limit} && exec \"$0\" --config \"$1\"");
        Command::new("sh")
            .args(["-c", &script, BIN])
            .arg(&path)
            .env("STRATUS_LOG", "warn")
            .output()
            .unwrap()
    };
    let low = run(400);
    assert_eq!(low.status.code(), Some(1), "the bind fails: {low:?}");
    let stderr = String::from_utf8_lossy(&low.stderr);
    // The defaults: 1,024 connections and 256 kept tables, plus the process's own 64.
    assert!(
        stderr.contains("the open-file limit is 400, below the 1344 descriptors"),
        "{stderr}"
    );
    let high = run(4096);
    assert_eq!(high.status.code(), Some(1), "the bind fails: {high:?}");
    let stderr = String::from_utf8_lossy(&high.stderr);
    assert!(!stderr.contains("open-file limit"), "{stderr}");
}
