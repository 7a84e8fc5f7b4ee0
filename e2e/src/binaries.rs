//! Where the binaries under test are: `stratus-server` and `stratus-worker` next to the test
//! executable's directory (`target/debug/`), and `stratus-test-s3` (this crate's binary, built
//! by cargo before its integration tests).
//!
//! Cargo builds only this package's binaries for its tests, not those of other packages. So when
//! a server or worker binary is missing, or older than a source file of the crates it is built
//! from, the first lookup runs `$CARGO build -p server -p worker --bins` (once per test
//! process): a test never runs a stale server, and up-to-date binaries cost no cargo run (a
//! nested cargo may resolve features differently from the outer one and rebuild for minutes).
//! With `E2E_NO_BUILD=1` the build runs only when a binary is missing. The `stratus` command line
//! is built the same way by its own `$CARGO build -p cli --bins`, stale when a source of the
//! crates it links (client and below) or of `cli` is newer.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::SystemTime;

pub const SERVER: &str = "stratus-server";
pub const WORKER: &str = "stratus-worker";
pub const TEST_S3: &str = "stratus-test-s3";
/// The `stratus` command line, from package `cli` (built like the server and worker).
pub const STRATUS: &str = "stratus";

/// `target/<profile>/`: the directory of the running executable, or its parent when that is
/// `deps/` (tests) or `examples/` (examples).
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current test executable");
    let deps = exe.parent().expect("test executable directory");
    if deps
        .file_name()
        .is_some_and(|n| n == "deps" || n == "examples")
    {
        deps.parent()
            .expect("target profile directory")
            .to_path_buf()
    } else {
        deps.to_path_buf()
    }
}

/// The outcome of the one server-and-worker build per process: `Err(output)` when cargo
/// failed.
static BUILD: OnceLock<Result<(), String>> = OnceLock::new();
/// The outcome of the one `stratus` build per process.
static BUILD_CLI: OnceLock<Result<(), String>> = OnceLock::new();

/// `cargo build -p <each package> --bins`, in the profile the caller runs in (a release
/// example or benchmark runs release binaries).
fn cargo_build(packages: &[&str]) -> Result<(), String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let release = target_dir().file_name().is_some_and(|n| n == "release");
    let mut args = vec!["build"];
    for p in packages {
        args.extend(["-p", p]);
    }
    args.push("--bins");
    if release {
        args.push("--release");
    }
    // A cold build takes minutes: say what the wait is for.
    eprintln!(
        "building {}: {cargo} {}",
        packages.join(", "),
        args.join(" ")
    );
    let out = Command::new(&cargo)
        .args(&args)
        .current_dir(workspace_root())
        .output()
        .map_err(|e| format!("cannot run {cargo}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`{cargo} {}` failed ({}):\n{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// The crates `stratus` is built from (its sources decide staleness).
const CLI_SOURCE_CRATES: [&str; 12] = [
    "types",
    "wire",
    "sst",
    "memtable",
    "changeset",
    "kvengine",
    "cop",
    "node",
    "client",
    "server",
    "worker",
    "cli",
];

/// The crates the server and worker are built from (their sources decide staleness).
const SOURCE_CRATES: [&str; 10] = [
    "types",
    "wire",
    "sst",
    "memtable",
    "changeset",
    "kvengine",
    "cop",
    "node",
    "server",
    "worker",
];

fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// The newest modification time among the server and worker sources, manifests and the lock
/// file.
fn newest_source() -> Option<SystemTime> {
    newest_source_of(&SOURCE_CRATES)
}

/// The newest modification time among the sources and manifests of `crates` and the
/// workspace manifest and lock file.
fn newest_source_of(crates: &[&str]) -> Option<SystemTime> {
    fn walk(dir: &Path, newest: &mut Option<SystemTime>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, newest);
            } else if let Ok(m) = e.metadata().and_then(|m| m.modified()) {
                *newest = (*newest).max(Some(m));
            }
        }
    }
    let root = workspace_root();
    let mut newest = None;
    for f in ["Cargo.toml", "Cargo.lock"] {
        if let Ok(m) = std::fs::metadata(root.join(f)).and_then(|m| m.modified()) {
            newest = newest.max(Some(m));
        }
    }
    for c in crates {
        walk(&root.join(c).join("src"), &mut newest);
        if let Ok(m) = std::fs::metadata(root.join(c).join("Cargo.toml")).and_then(|m| m.modified())
        {
            newest = newest.max(Some(m));
        }
    }
    newest
}

/// Missing, or older than a source it is built from.
fn needs_build(path: &Path) -> bool {
    let Ok(built) = std::fs::metadata(path).and_then(|m| m.modified()) else {
        return true;
    };
    let newest = if path.file_name().is_some_and(|n| n == STRATUS) {
        newest_source_of(&CLI_SOURCE_CRATES)
    } else {
        newest_source()
    };
    newest.is_some_and(|newest| newest > built)
}

/// The path of binary `name`; a missing or stale server, worker or `stratus` is built first
/// (once per process).
pub fn binary(name: &str) -> PathBuf {
    let path = target_dir().join(name);
    let no_build = std::env::var_os("E2E_NO_BUILD").is_some_and(|v| v == "1");
    let wanted = if no_build {
        !path.exists()
    } else {
        needs_build(&path)
    };
    let build = match name {
        _ if !wanted => None,
        SERVER | WORKER => Some(BUILD.get_or_init(|| cargo_build(&["server", "worker"]))),
        STRATUS => Some(BUILD_CLI.get_or_init(|| cargo_build(&["cli"]))),
        _ => None,
    };
    match build {
        None | Some(Ok(())) => {}
        // A failed build with binaries present: run them, but say so.
        Some(Err(e)) if path.exists() => {
            eprintln!("warning: running a possibly stale {name}: {e}");
        }
        Some(Err(e)) => panic!("{name} is missing from {}: {e}", path.display()),
    }
    assert!(
        path.exists(),
        "{name} not found at {} (build it with `cargo build -p server -p worker --bins`; \
         stratus-test-s3 is built by `cargo test -p e2e`)",
        path.display()
    );
    path
}
