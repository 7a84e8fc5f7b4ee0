//! The `stratus` binary's own surface: its commands, and the errors it gives for usage it does
//! not take, run as a real process.
//!
//! This file is also why `cargo test` builds `target/debug/stratus` (cargo builds a package's
//! binaries only for its integration tests): the end-to-end tests that run the binary then find
//! it built with the same features as everything else, instead of running a nested `cargo
//! build -p cli` that resolves features differently and recompiles for minutes.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::process::{Command, Output};

fn stratus(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stratus"))
        .args(args)
        .env_remove("STRATUS_CLUSTER")
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn help_lists_every_command() {
    let out = stratus(&["--help"]);
    assert!(out.status.success(), "{out:?}");
    let help = text(&out.stdout);
    for command in [
        "sql", "load", "up", "demo", "bench", "server", "worker", "ctl", "pd",
    ] {
        assert!(
            help.lines()
                .any(|l| l.trim_start().starts_with(&format!("{command} "))),
            "`{command}` missing from:\n{help}"
        );
    }
}

#[test]
fn a_value_of_the_wrong_type_is_a_usage_error_naming_the_flag_and_the_value() {
    let out = stratus(&["demo", "--rows", "many"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = text(&out.stderr);
    assert!(
        err.contains("--rows") && err.contains("many"),
        "stderr: {err}"
    );
}

#[test]
fn an_unknown_command_is_a_usage_error_naming_it() {
    let out = stratus(&["frobnicate"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(text(&out.stderr).contains("frobnicate"), "{out:?}");
}

#[test]
fn a_missing_cluster_file_is_an_error_naming_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-cluster.toml");
    let out = stratus(&[
        "sql",
        "-e",
        "SELECT 1",
        "--cluster",
        missing.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = text(&out.stderr);
    assert!(err.contains("no-such-cluster.toml"), "stderr: {err}");
    assert!(out.stdout.is_empty(), "stdout: {}", text(&out.stdout));
}
