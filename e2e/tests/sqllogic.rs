//! A sqllogictest suite run through the MySQL endpoint (`stratus sql-server`): every record of
//! `e2e/sqllogic/*.slt` (DDL and the catalog statements, INSERT and SELECT, NULL semantics,
//! aggregates, joins, subqueries, window functions, CASE and scalar functions, UPDATE and
//! DELETE, errors, session variables, the INT/BIGINT/DOUBLE/VARCHAR types) goes over a real
//! MySQL connection (the `mysql_async` driver, text protocol) to an endpoint over a real
//! server, and its answer must be the one the file expects, row for row.
//!
//! The expectations are not the endpoint's own answers written down: the second test runs
//! them through SQLite (`sqlite_check.py`), an engine that shares no code with DataFusion or
//! Stratus, and fails on any disagreement. Records whose answer differs between MySQL and
//! SQLite on purpose (MySQL-only statements, `/` giving a decimal, error messages, ...) are
//! marked `skipif sqlite`; this runner's engine label is `mysql`, so it runs them.
//!
//! Each file gets its own connection (its own session variables) and creates and drops its
//! own tables. A mismatch fails the test with the runner's diff; every record of every file
//! runs, so one failure does not hide the next.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use e2e::cluster::{Cluster, StoreKind};
use e2e::server_proc::ServerProc;
use e2e::sql_endpoint::SqlEndpoint;
use mysql_async::prelude::Queryable;
use sqllogictest::{DB, DBOutput, DefaultColumnType, Record, Runner};

/// The fewest records the suite may hold (`statement` and `query` records of all files).
const MIN_RECORDS: usize = 450;

/// The directory of the `.slt` files and of the SQLite checker.
fn suite_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("sqllogic")
}

/// Every `.slt` file of the suite, in name order.
fn slt_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(suite_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "slt"))
        .collect();
    files.sort();
    files
}

/// One MySQL connection to the endpoint, as a sqllogictest database (engine label `mysql`).
struct MysqlDb {
    rt: Arc<tokio::runtime::Runtime>,
    conn: Option<mysql_async::Conn>,
}

impl MysqlDb {
    fn connect(
        rt: Arc<tokio::runtime::Runtime>,
        addr: SocketAddr,
    ) -> Result<Self, mysql_async::Error> {
        let opts = mysql_async::OptsBuilder::default()
            .ip_or_hostname(addr.ip().to_string())
            .tcp_port(addr.port())
            .user(Some("root"))
            .pass(Some(e2e::sql_endpoint::ROOT_PASSWORD))
            .db_name(Some("test"))
            // Known settings: the driver would otherwise ask the server for them.
            .prefer_socket(false)
            .max_allowed_packet(Some(16 << 20))
            .wait_timeout(Some(28_800));
        let conn = rt.block_on(mysql_async::Conn::new(opts))?;
        Ok(MysqlDb {
            rt,
            conn: Some(conn),
        })
    }
}

/// A value as the text protocol sent it: NULL as `NULL`, the empty string as `(empty)`
/// (sqllogictest's spelling, since an empty cell cannot be written in a file).
fn cell_text(v: mysql_async::Value) -> String {
    use mysql_async::Value;
    match v {
        Value::NULL => "NULL".into(),
        Value::Bytes(b) if b.is_empty() => "(empty)".into(),
        Value::Bytes(b) => String::from_utf8_lossy(&b).into_owned(),
        Value::Int(i) => i.to_string(),
        Value::UInt(u) => u.to_string(),
        Value::Float(f) => f.to_string(),
        Value::Double(d) => d.to_string(),
        other => other.as_sql(true),
    }
}

async fn run_sql(
    conn: &mut mysql_async::Conn,
    sql: &str,
) -> Result<DBOutput<DefaultColumnType>, mysql_async::Error> {
    let mut result = conn.query_iter(sql).await?;
    let ncols = result.columns().map_or(0, |c| c.len());
    if ncols == 0 {
        let affected = result.affected_rows();
        result.drop_result().await?;
        return Ok(DBOutput::StatementComplete(affected));
    }
    let rows: Vec<mysql_async::Row> = result.collect().await?;
    Ok(DBOutput::Rows {
        types: vec![DefaultColumnType::Any; ncols],
        rows: rows
            .into_iter()
            .map(|r| r.unwrap().into_iter().map(cell_text).collect())
            .collect(),
    })
}

impl DB for MysqlDb {
    type Error = mysql_async::Error;
    type ColumnType = DefaultColumnType;

    fn run(&mut self, sql: &str) -> Result<DBOutput<DefaultColumnType>, mysql_async::Error> {
        let conn = self.conn.as_mut().expect("an open connection");
        self.rt.block_on(run_sql(conn, sql))
    }

    fn shutdown(&mut self) {
        if let Some(conn) = self.conn.take() {
            let _ = self.rt.block_on(conn.disconnect());
        }
    }

    fn engine_name(&self) -> &str {
        "mysql"
    }

    fn error_sql_state(err: &mysql_async::Error) -> Option<String> {
        match err {
            mysql_async::Error::Server(e) => Some(e.state.clone()),
            _ => None,
        }
    }
}

#[test]
fn every_sqllogic_record_gives_the_expected_answer_through_the_mysql_endpoint() {
    let cluster = Cluster::new(StoreKind::Local);
    let _server = ServerProc::start(&cluster.server_config("server"));
    let file = cluster.path("cluster.toml");
    std::fs::write(&file, format!("servers = [\"{}\"]\n", _server.base_url())).unwrap();
    let endpoint = SqlEndpoint::start(&file);
    let addr = endpoint.addr;
    let rt = Arc::new(
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap(),
    );

    let started = Instant::now();
    let files = slt_files();
    let mut records = 0;
    let mut failures = Vec::new();
    for path in &files {
        let rt = rt.clone();
        let mut runner =
            Runner::new(move || std::future::ready(MysqlDb::connect(rt.clone(), addr)));
        let parsed = sqllogictest::parse_file::<DefaultColumnType>(path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for record in parsed {
            if matches!(record, Record::Statement { .. } | Record::Query { .. }) {
                records += 1;
            }
            if let Err(e) = runner.run(record) {
                failures.push(e.display(false).to_string());
            }
        }
        runner.shutdown();
    }
    println!(
        "{records} records in {} files in {:.1?}",
        files.len(),
        started.elapsed()
    );
    assert!(
        failures.is_empty(),
        "{} of {records} records failed:\n\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(
        records >= MIN_RECORDS,
        "the suite holds {records} records, fewer than {MIN_RECORDS}"
    );
}

#[test]
fn the_expected_answers_agree_with_sqlite() {
    let script = suite_dir().join("sqlite_check.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(suite_dir())
        .output()
        .unwrap_or_else(|e| panic!("run python3 {}: {e}", script.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "SQLite disagrees with the suite ({:?}):\n{stdout}\n{stderr}",
        out.status
    );
}
