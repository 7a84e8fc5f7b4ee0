//! Start-up and shutdown of both binaries: a config error fails start-up naming the key; the
//! effective config is printed and served; SIGTERM is a clean exit 0 after which the server's
//! data (flushed or not) survives a restart, as it does a SIGKILL.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::process::ExitStatus;
use std::time::Duration;

use e2e::cluster::{Cluster, StoreKind};
use e2e::coprocessor;
use e2e::http_client::get;
use e2e::process::run_to_exit;
use e2e::sample_table::SampleTable;
use e2e::server_proc::{ServerProc, ServerSetup};
use e2e::transactions;
use e2e::worker_proc::WorkerProc;
use server::config::WalSync;
use types::ReadableSize;

const EXIT_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs a binary that must refuse to start; its exit status and stderr.
fn refused(cmd: std::process::Command) -> (ExitStatus, String) {
    let (status, _stdout, stderr) = run_to_exit(cmd, EXIT_TIMEOUT);
    (status, stderr)
}

fn assert_refused_naming(status: ExitStatus, stderr: &str, key: &str) {
    assert!(
        !status.success(),
        "expected start-up to fail, found {status}\n{stderr}"
    );
    assert_eq!(
        status.code(),
        Some(2),
        "config errors exit with 2\n{stderr}"
    );
    assert!(
        stderr.contains(key),
        "stderr must name the key {key:?}:\n{stderr}"
    );
}

fn server_config(cluster: &Cluster) -> ServerSetup {
    cluster.server_config("server")
}

#[test]
fn server_rejects_an_unknown_key_naming_it() {
    let cluster = Cluster::new(StoreKind::Local);
    let cfg = server_config(&cluster);
    let (status, stderr) = refused(cfg.command_with_raw_key(
        "kvengine",
        "remote-coprocessor-adress",
        "http://127.0.0.1:1/coprocessor",
    ));
    assert_refused_naming(status, &stderr, "remote-coprocessor-adress");
}

#[test]
fn server_rejects_a_bad_value_naming_it() {
    let cluster = Cluster::new(StoreKind::Local);
    let cfg = server_config(&cluster);
    let (status, stderr) =
        refused(cfg.command_with_raw_key("kvengine", "remote-coprocessor-min-blocks-size", "lots"));
    assert_refused_naming(status, &stderr, "remote-coprocessor-min-blocks-size");
}

#[test]
fn server_rejects_a_value_that_cannot_work_naming_it() {
    let cluster = Cluster::new(StoreKind::Local);
    let mut cfg = server_config(&cluster);
    cfg.kvengine.remote_coprocessor_addr = "ftp://127.0.0.1:1/coprocessor".into();
    let (status, stderr) = refused(cfg.command());
    assert_refused_naming(status, &stderr, "remote-coprocessor-addr");
}

#[test]
fn worker_rejects_an_unknown_key_naming_it() {
    let cluster = Cluster::new(StoreKind::Local);
    let cfg = cluster.worker_config("worker");
    let (status, stderr) =
        refused(cfg.command_with_raw_key(Some("worker"), "max-request-sise", "1GiB"));
    assert_refused_naming(status, &stderr, "max-request-sise");
}

#[test]
fn worker_rejects_a_bad_value_naming_it() {
    let cluster = Cluster::new(StoreKind::Local);
    let cfg = cluster.worker_config("worker");
    let (status, stderr) =
        refused(cfg.command_with_raw_key(Some("worker"), "max-request-size", "huge"));
    assert_refused_naming(status, &stderr, "max-request-size");
}

#[test]
fn both_binaries_print_and_serve_their_effective_config() {
    let cluster = Cluster::new(StoreKind::Local);
    let mut wcfg = cluster.worker_config("worker");
    wcfg.worker.max_request_size = ReadableSize::mib(123);
    let worker = WorkerProc::start(&wcfg);
    let mut cfg = server_config(&cluster);
    cfg.kvengine.remote_coprocessor_max_retries = 7;
    let server = ServerProc::start(&cfg);

    let served = server.config_text();
    assert!(
        served.contains("remote-coprocessor-max-retries = 7"),
        "GET /config:\n{served}"
    );
    assert!(
        served.contains("remote-coprocessor-min-blocks-size"),
        "defaults are part of the effective config:\n{served}"
    );
    assert!(
        server
            .output()
            .contains("remote-coprocessor-max-retries = 7"),
        "printed at start:\n{}",
        server.output()
    );
    let status = server.status_text();
    assert!(
        status.trim_start().starts_with('{'),
        "GET /status is JSON: {status}"
    );

    let served = e2e::http_client::get_text(&worker.url("/config"));
    assert!(
        served.contains("max-request-size"),
        "worker GET /config:\n{served}"
    );
    assert!(
        served.contains("123MiB") || served.contains(&(123u64 << 20).to_string()),
        "worker GET /config shows the configured size:\n{served}"
    );
    let status = get(&worker.url("/status"));
    assert_eq!(status.status.as_u16(), 200);
}

const T: SampleTable = SampleTable { id: 11 };

/// Writes through both write paths (a transaction and a raw load), part of it flushed and
/// part only in the WAL; the values written per handle.
fn write_some(server: &ServerProc) -> Vec<(i64, i64)> {
    let mut values = Vec::new();
    let c = transactions::commit(
        server,
        &[server],
        &(0..20)
            .map(|h| transactions::put(&T.key(h), &SampleTable::value(h, 8)))
            .collect::<Vec<_>>(),
    );
    assert!(c.commit_ts > c.start_ts);
    values.extend((0..20).map(|h| (h, h)));
    T.load(server, 20..200, 8, |h| h);
    values.extend((20..200).map(|h| (h, h)));
    server.flush();
    // After the flush: only in the memtable and the WAL.
    T.load(server, 200..300, 8, |h| h);
    values.extend((200..300).map(|h| (h, h)));
    transactions::commit(
        server,
        &[server],
        &[
            transactions::put(&T.key(5), &SampleTable::value(500, 8)),
            transactions::delete(&T.key(6)),
        ],
    );
    values.retain(|(h, _)| *h != 6);
    for v in values.iter_mut() {
        if v.0 == 5 {
            v.1 = 500;
        }
    }
    values
}

/// Every written value reads back (point gets and a coprocessor count/sum).
fn assert_reads_back(server: &ServerProc, values: &[(i64, i64)], last_ts: u64) {
    let ts = server.tso();
    assert!(
        ts > last_ts,
        "the TSO went back after the restart: {ts} <= {last_ts}"
    );
    for &(h, v) in values.iter().step_by(7).chain(values.last()) {
        let r = server.get(&T.key(h), ts);
        assert!(r.error.is_none(), "{r:?}");
        assert!(r.found, "handle {h} lost");
        assert_eq!(r.value, SampleTable::value(v, 8), "handle {h}");
    }
    let gone = server.get(&T.key(6), ts);
    assert!(!gone.found, "a deleted row came back");
    let region = server.region_of(&T.key(0));
    let resp = server.coprocessor(&coprocessor::request(
        &T.count_sum_dag(),
        vec![T.range()],
        ts,
        &region,
    ));
    assert_eq!(
        coprocessor::rows(&resp).unwrap(),
        SampleTable::count_sum_rows(values.iter().map(|(_, v)| *v))
    );
}

#[test]
fn server_exits_zero_on_sigterm_and_keeps_its_data_across_a_restart() {
    let cluster = Cluster::new(StoreKind::Local);
    let cfg = server_config(&cluster);
    let mut server = ServerProc::start(&cfg);
    let values = write_some(&server);
    let last_ts = server.tso();
    let status = server.terminate();
    assert_eq!(
        status.code(),
        Some(0),
        "SIGTERM is a clean exit\n{}",
        server.output_report()
    );
    drop(server);

    let server = ServerProc::start(&cfg);
    assert_reads_back(&server, &values, last_ts);
}

#[test]
fn server_keeps_acknowledged_writes_after_sigkill() {
    let cluster = Cluster::new(StoreKind::Local);
    let mut cfg = server_config(&cluster);
    cfg.kvengine.wal_sync = WalSync::EveryBatch;
    let mut server = ServerProc::start(&cfg);
    let values = write_some(&server);
    let last_ts = server.tso();
    server.kill();
    drop(server);

    let server = ServerProc::start(&cfg);
    assert_reads_back(&server, &values, last_ts);
}

#[test]
fn the_region_data_version_is_unchanged_by_a_restart() {
    let cluster = Cluster::new(StoreKind::Local);
    let cfg = server_config(&cluster);
    let mut server = ServerProc::start(&cfg);
    write_some(&server);
    let before = server.regions();
    assert_eq!(server.terminate().code(), Some(0));
    drop(server);
    let server = ServerProc::start(&cfg);
    let after = server.regions();
    let versions = |r: &wire::region::RegionsResponse| {
        r.regions
            .iter()
            .map(|r| (r.id, r.ver, r.data_version))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        versions(&after),
        versions(&before),
        "(id, ver, data_version)"
    );
}

#[test]
fn worker_exits_zero_on_sigterm() {
    let cluster = Cluster::new(StoreKind::Local);
    let mut worker = WorkerProc::start(&cluster.worker_config("worker"));
    let status = worker.terminate();
    assert_eq!(
        status.code(),
        Some(0),
        "SIGTERM is a clean exit\n{}",
        worker.output_report()
    );
}

#[test]
fn a_server_on_s3_lists_its_initial_region_and_zone() {
    let cluster = Cluster::new(StoreKind::S3);
    let server = ServerProc::start(&server_config(&cluster));
    let regions = server.regions();
    assert_eq!(regions.regions.len(), 1, "{regions:?}");
    let r = &regions.regions[0];
    assert!(
        r.start.is_empty() && r.end.is_empty(),
        "one region over everything: {r:?}"
    );
    assert!(
        regions
            .labels
            .iter()
            .any(|l| l.key == "zone" && l.value == "a"),
        "{regions:?}"
    );
}
