//! Where the binaries under test are: `stratus-server` and `stratus-worker` next to the test
//! executable's directory (`target/debug/`), and `stratus-test-s3` (this crate's binary, built
//! by cargo before its integration tests).
//!
//! Cargo builds only this package's binaries for its tests, not those of other packages. So when
//! a server or worker binary is missing, or older than a source file of the crates it is built
//! from, the first lookup runs `$CARGO build -p server -p worker --bins` (once per test
//! process): a test never runs a stale server, and up-to-date binaries cost no cargo run (a
//! nested cargo may resolve features differently from the outer one and rebuild for minutes).
//! The `stratus` command line is built the same way by its own `$CARGO build -p cli --bins`.
//!
//! The crates a binary is built from are read from the manifests (the package and every
//! workspace crate it depends on, transitively), not listed here: a list falls behind the first
//! time a crate is added or renamed, and then a change in that crate leaves the binary stale
//! without anyone noticing. A manifest that cannot be read counts as "stale": building is never
//! wrong, only slower.
//!
//! A nested build that fails fails every test that asked for its binaries, with cargo's
//! output. It never falls back to the binary already there: that one was built from other
//! sources, and a test passing against it would prove nothing about the code under test.
//!
//! With `E2E_NO_BUILD=1` the build runs only when a binary is missing.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::SystemTime;

pub const SERVER: &str = "stratus-server";
pub const WORKER: &str = "stratus-worker";
pub const PD: &str = "stratus-pd";
pub const TEST_S3: &str = "stratus-test-s3";
/// The `stratus` command line, from package `cli` (built like the server and worker).
pub const STRATUS: &str = "stratus";

/// The packages built for the server, worker and placement-driver binaries.
const SERVER_PACKAGES: [&str; 3] = ["server", "worker", "pd"];
/// The package built for `stratus`.
const CLI_PACKAGES: [&str; 1] = ["cli"];

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BinaryError {
    #[error(
        "{binary} is stale and rebuilding it failed, so the tests cannot run the code under test \
         (the older binary is not used): path={}\n{output}",
        path.display()
    )]
    BuildFailed {
        binary: String,
        path: PathBuf,
        output: String,
    },
    #[error(
        "{binary} not found: path={} (build it with `cargo build -p server -p worker -p pd --bins`; \
         stratus-test-s3 is built by `cargo test -p e2e`)",
        path.display()
    )]
    Missing { binary: String, path: PathBuf },
}

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

fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

fn read_manifest(path: &Path) -> Option<toml::Table> {
    std::fs::read_to_string(path).ok()?.parse().ok()
}

/// The directories of `packages` and of every workspace crate they depend on (normal and
/// build dependencies, transitively), from the manifests under `root`; `None` when a manifest
/// cannot be read or a package is not in the workspace.
fn source_dirs(root: &Path, packages: &[&str]) -> Option<BTreeSet<PathBuf>> {
    let workspace = read_manifest(&root.join("Cargo.toml"))?;
    let ws = workspace.get("workspace")?.as_table()?;
    // Package name -> directory, for every member.
    let mut dirs = std::collections::BTreeMap::new();
    for member in ws.get("members")?.as_array()? {
        let dir = root.join(member.as_str()?);
        let manifest = read_manifest(&dir.join("Cargo.toml"))?;
        let name = manifest.get("package")?.get("name")?.as_str()?.to_string();
        dirs.insert(name, dir);
    }
    let ws_deps = ws.get("dependencies").and_then(toml::Value::as_table);
    let mut seen = BTreeSet::new();
    let mut todo: Vec<String> = packages.iter().map(|p| p.to_string()).collect();
    while let Some(name) = todo.pop() {
        let dir = dirs.get(&name)?.clone();
        if !seen.insert(dir.clone()) {
            continue;
        }
        let manifest = read_manifest(&dir.join("Cargo.toml"))?;
        for section in ["dependencies", "build-dependencies"] {
            let Some(deps) = manifest.get(section).and_then(toml::Value::as_table) else {
                continue;
            };
            for (dep, spec) in deps {
                let inherited = spec.get("workspace").and_then(toml::Value::as_bool) == Some(true);
                let spec = if inherited {
                    ws_deps.and_then(|d| d.get(dep))
                } else {
                    Some(spec)
                };
                let is_path = spec.and_then(|s| s.get("path")).is_some();
                // A path dependency is a workspace crate (possibly renamed with `package`).
                if is_path {
                    let package = spec
                        .and_then(|s| s.get("package"))
                        .and_then(toml::Value::as_str)
                        .unwrap_or(dep);
                    todo.push(package.to_string());
                }
            }
        }
    }
    Some(seen)
}

/// The newest modification time among the sources and manifests of `dirs` and the workspace
/// manifest and lock file.
fn newest_source(root: &Path, dirs: &BTreeSet<PathBuf>) -> Option<SystemTime> {
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
    let mut newest = None;
    for f in ["Cargo.toml", "Cargo.lock"] {
        if let Ok(m) = std::fs::metadata(root.join(f)).and_then(|m| m.modified()) {
            newest = newest.max(Some(m));
        }
    }
    for dir in dirs {
        walk(&dir.join("src"), &mut newest);
        if let Ok(m) = std::fs::metadata(dir.join("Cargo.toml")).and_then(|m| m.modified()) {
            newest = newest.max(Some(m));
        }
    }
    newest
}

/// Missing, older than a source it is built from, or of unknown age.
fn needs_build(path: &Path, packages: &[&str]) -> bool {
    let Ok(built) = std::fs::metadata(path).and_then(|m| m.modified()) else {
        return true;
    };
    let root = workspace_root();
    let Some(dirs) = source_dirs(&root, packages) else {
        return true;
    };
    newest_source(&root, &dirs).is_none_or(|newest| newest > built)
}

/// The binary at `path`, given the outcome of the build that was needed for it (`None`: no
/// build needed). A failed build is an error with cargo's output, whether or not an older
/// binary is there.
fn resolve(
    name: &str,
    path: &Path,
    build: Option<&Result<(), String>>,
) -> Result<PathBuf, BinaryError> {
    if let Some(Err(output)) = build {
        return Err(BinaryError::BuildFailed {
            binary: name.to_string(),
            path: path.to_path_buf(),
            output: output.clone(),
        });
    }
    if !path.exists() {
        return Err(BinaryError::Missing {
            binary: name.to_string(),
            path: path.to_path_buf(),
        });
    }
    Ok(path.to_path_buf())
}

/// The path of binary `name`; a missing or stale server, worker or `stratus` is built first
/// (once per process). Panics when the build fails (with cargo's output) or the binary is
/// missing.
pub fn binary(name: &str) -> PathBuf {
    let path = target_dir().join(name);
    let no_build = std::env::var_os("E2E_NO_BUILD").is_some_and(|v| v == "1");
    let wanted = |packages: &[&str]| {
        if no_build {
            !path.exists()
        } else {
            needs_build(&path, packages)
        }
    };
    let build = match name {
        SERVER | WORKER | PD if wanted(&SERVER_PACKAGES) => {
            Some(BUILD.get_or_init(|| cargo_build(&SERVER_PACKAGES)))
        }
        STRATUS if wanted(&CLI_PACKAGES) => {
            Some(BUILD_CLI.get_or_init(|| cargo_build(&CLI_PACKAGES)))
        }
        _ => None,
    };
    resolve(name, &path, build).unwrap_or_else(|e| panic!("{e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_build_is_an_error_with_cargos_output_even_when_an_old_binary_exists() {
        let dir = tempfile::tempdir().unwrap();
        let old = dir.path().join(SERVER);
        std::fs::write(&old, b"an older build").unwrap();
        let failed: Result<(), String> = Err("error[E0425]: cannot find value `x`".into());
        let e = resolve(SERVER, &old, Some(&failed)).unwrap_err();
        assert!(matches!(e, BinaryError::BuildFailed { .. }), "{e}");
        assert!(e.to_string().contains("error[E0425]"), "{e}");
        let missing = dir.path().join(WORKER);
        assert!(matches!(
            resolve(WORKER, &missing, Some(&failed)),
            Err(BinaryError::BuildFailed { .. })
        ));
    }

    #[test]
    fn a_binary_is_used_after_a_successful_build_or_when_none_was_needed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(SERVER);
        assert!(matches!(
            resolve(SERVER, &path, None),
            Err(BinaryError::Missing { .. })
        ));
        std::fs::write(&path, b"fresh").unwrap();
        assert_eq!(resolve(SERVER, &path, Some(&Ok(()))).unwrap(), path);
        assert_eq!(resolve(SERVER, &path, None).unwrap(), path);
    }

    #[test]
    fn the_sources_of_a_binary_are_every_workspace_crate_it_depends_on() {
        let root = workspace_root();
        let names = |packages: &[&str]| -> BTreeSet<String> {
            source_dirs(&root, packages)
                .unwrap()
                .iter()
                .map(|d| d.file_name().unwrap().to_string_lossy().into_owned())
                .collect()
        };
        let server = names(&SERVER_PACKAGES);
        // `types` sits below sst and memtable: a change there must rebuild the server.
        for c in ["server", "worker", "kvengine", "sst", "memtable", "types"] {
            assert!(server.contains(c), "{c} missing from {server:?}");
        }
        assert!(
            !server.contains("client") && !server.contains("e2e"),
            "{server:?}"
        );
        let cli = names(&CLI_PACKAGES);
        for c in ["cli", "client", "harness", "server", "types"] {
            assert!(cli.contains(c), "{c} missing from {cli:?}");
        }
    }

    #[test]
    fn a_package_outside_the_workspace_has_unknown_sources() {
        assert_eq!(source_dirs(&workspace_root(), &["no-such-package"]), None);
    }
}
