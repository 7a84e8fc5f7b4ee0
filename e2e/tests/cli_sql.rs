//! `stratus sql` as a process against a real server: CREATE TABLE, INSERT and SELECT print
//! exactly the expected text in each format, bad SQL and a missing cluster file exit with 1
//! and say why on stderr, a usage error exits with 2.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use e2e::binaries::{self, STRATUS};
use e2e::cluster::{Cluster, StoreKind};
use e2e::server_proc::ServerProc;

/// A running server and a cluster file naming it.
struct Setup {
    _cluster: Cluster,
    _server: ServerProc,
    cluster_file: PathBuf,
}

fn start() -> Setup {
    let cluster = Cluster::new(StoreKind::Local);
    let server = ServerProc::start(&cluster.server_config("server"));
    let cluster_file = cluster.path("cluster.toml");
    std::fs::write(
        &cluster_file,
        format!(
            "servers = [\"{}\"]\nlabels = {{ zone = \"a\" }}\n",
            server.base_url()
        ),
    )
    .expect("write cluster file");
    Setup {
        _cluster: cluster,
        _server: server,
        cluster_file,
    }
}

fn stratus(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(binaries::binary(STRATUS))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn stratus");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write stdin");
    child.wait_with_output().expect("stratus output")
}

/// `stratus sql --cluster FILE -e SQL [extra...]`.
fn sql(cluster_file: &Path, statement: &str, extra: &[&str]) -> Output {
    let file = cluster_file.to_str().expect("utf-8 path");
    let mut args = vec!["sql", "--cluster", file, "-e", statement];
    args.extend_from_slice(extra);
    stratus(&args, "")
}

/// stdout of a run that must succeed with nothing on stderr.
fn ok(out: Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
    assert_eq!(stderr, "");
    String::from_utf8(out.stdout).expect("utf-8 stdout")
}

fn load_table(file: &Path) {
    let create = "CREATE TABLE people (id BIGINT PRIMARY KEY, name VARCHAR(32), score DOUBLE)";
    assert_eq!(ok(sql(file, create, &[])), "OK, 0 rows affected\n");
    let insert = "INSERT INTO people VALUES (1, 'ann', 2.5), (2, NULL, NULL), (3, '', 10.0), \
                  (10, 'o''neil, \"bob\"', -1.25)";
    assert_eq!(ok(sql(file, insert, &[])), "OK, 4 rows affected\n");
}

const SELECT: &str = "SELECT id, name, score FROM people ORDER BY id";

#[test]
fn select_prints_an_aligned_table_by_default() {
    let s = start();
    load_table(&s.cluster_file);
    assert_eq!(
        ok(sql(&s.cluster_file, SELECT, &[])),
        " id | name          | score\n\
         ----+---------------+-------\n\
         \x20 1 | ann           |   2.5\n\
         \x20 2 | NULL          |  NULL\n\
         \x20 3 |               |  10.0\n\
         \x2010 | o'neil, \"bob\" | -1.25\n\
         (4 rows)\n"
    );
}

#[test]
fn select_prints_csv_with_null_apart_from_the_empty_string() {
    let s = start();
    load_table(&s.cluster_file);
    assert_eq!(
        ok(sql(&s.cluster_file, SELECT, &["--format", "csv"])),
        "id,name,score\r\n\
         1,ann,2.5\r\n\
         2,,\r\n\
         3,\"\",10.0\r\n\
         10,\"o'neil, \"\"bob\"\"\",-1.25\r\n"
    );
}

#[test]
fn select_prints_a_json_array_of_objects() {
    let s = start();
    load_table(&s.cluster_file);
    assert_eq!(
        ok(sql(&s.cluster_file, SELECT, &["--format", "json"])),
        "[\n\
         \x20 {\"id\":1,\"name\":\"ann\",\"score\":2.5},\n\
         \x20 {\"id\":2,\"name\":null,\"score\":null},\n\
         \x20 {\"id\":3,\"name\":\"\",\"score\":10.0},\n\
         \x20 {\"id\":10,\"name\":\"o'neil, \\\"bob\\\"\",\"score\":-1.25}\n\
         ]\n"
    );
}

#[test]
fn statements_from_stdin_run_in_order() {
    let s = start();
    let file = s.cluster_file.to_str().unwrap();
    let script = "CREATE TABLE t (\n  id INT PRIMARY KEY,\n  v INT\n);\n\
                  INSERT INTO t VALUES (1, 5), (2, 7);\n\
                  SELECT COUNT(*), SUM(v) FROM t;\n";
    let out = stratus(&["sql", "--cluster", file, "--format", "csv"], script);
    assert_eq!(
        ok(out),
        "OK, 0 rows affected\nOK, 2 rows affected\nCOUNT(*),SUM(v)\r\n2,12\r\n"
    );
}

#[test]
fn bad_sql_exits_1_with_the_error_on_stderr() {
    let s = start();
    let out = sql(&s.cluster_file, "SELEC nonsense", &[]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("Error: sql does not parse"),
        "stderr: {stderr}"
    );

    let out = sql(&s.cluster_file, "SELECT * FROM missing", &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("unknown table: table=missing"),
        "stderr: {stderr}"
    );
}

#[test]
fn a_missing_cluster_file_exits_1_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-cluster.toml");
    let out = sql(&missing, "SELECT 1", &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cannot read cluster file")
            && stderr.contains(&missing.display().to_string()),
        "stderr: {stderr}"
    );
}

#[test]
fn an_invalid_cluster_file_exits_1_naming_the_file_and_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cluster.toml");
    std::fs::write(&file, "servers = []\n").unwrap();
    let out = sql(&file, "SELECT 1", &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&file.display().to_string()) && stderr.contains("no servers"),
        "stderr: {stderr}"
    );
}

#[test]
fn a_usage_error_exits_2() {
    let out = stratus(&["sql", "--format", "xml", "--cluster", "x.toml"], "");
    assert_eq!(out.status.code(), Some(2));
    let out = stratus(&["load", "--rows", "1"], "");
    assert_eq!(out.status.code(), Some(2), "--table is required");
}
