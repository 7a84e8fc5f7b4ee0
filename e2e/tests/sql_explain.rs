//! `EXPLAIN ANALYZE <select>` through the SQL front (DataFusion, `sqlfront`) against a real server that offloads by blocks
//! size: the executor rows describe the DAG, and the region rows say where each region ran and
//! why — a whole-table aggregate over a table of many flushed blocks runs `remote` on the
//! worker (reason `blocks_size`), a query over a tiny table stays `local`, and on the delegate
//! path the region rows name the worker the client sent the pages to.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

mod front_client;

use client::sql::QueryResult;
use e2e::cluster::{Cluster, StoreKind};
use e2e::server_proc::ServerProc;
use e2e::worker_proc::WorkerProc;
use front_client::FrontClient;
use sqlfront::{Analyzed, FrontSession};
use types::ReadableSize;
use wire::codec::table::record_key;
use wire::datum::Datum;

const ROWS: i64 = 3000;
const BATCH: i64 = 500;

/// A cell as text (integers and the decimal text of an exact sum alike).
fn text(d: &Datum) -> String {
    match d {
        Datum::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        Datum::Int(v) => v.to_string(),
        other => panic!("not text: {other:?}"),
    }
}

fn texts(r: &QueryResult) -> Vec<Vec<String>> {
    r.rows
        .iter()
        .map(|row| row.iter().map(text).collect())
        .collect()
}

/// The one scan's DAG lines.
fn dag(a: &Analyzed) -> Vec<String> {
    assert_eq!(a.scans.len(), 1, "{a:?}");
    a.scans[0].executors.clone()
}

/// `(id, task, detail)` per region, as EXPLAIN ANALYZE prints them (without the time).
fn region_rows(a: &Analyzed) -> Vec<(String, String, String)> {
    a.regions()
        .map(|r| (r.id_text(), r.task(), r.detail()))
        .collect()
}

/// Creates `big` (many blocks once flushed) and `tiny` (three rows) through SQL.
fn load(c: &FrontClient, s: &mut FrontSession) {
    c.exec(
        s,
        "CREATE TABLE big (id BIGINT PRIMARY KEY, g INT, v BIGINT, pad VARCHAR(64))",
    );
    for start in (0..ROWS).step_by(BATCH as usize) {
        let values: Vec<String> = (start..start + BATCH)
            .map(|id| format!("({id}, {}, {}, '{}')", id % 10, id * 3, "p".repeat(48)))
            .collect();
        let r = c.exec(s, &format!("INSERT INTO big VALUES {}", values.join(", ")));
        assert_eq!(r.affected_rows, BATCH as u64);
    }
    c.exec(s, "CREATE TABLE tiny (id BIGINT PRIMARY KEY, v BIGINT)");
    c.exec(s, "INSERT INTO tiny VALUES (1, 10), (2, 20), (3, 30)");
}

#[test]
fn explain_shows_the_dag_and_where_each_region_ran_and_why() {
    let cluster = Cluster::new(StoreKind::Local);
    let worker = WorkerProc::start(&cluster.worker_config("worker"));
    let mut cfg = cluster.server_config("server");

    // Load and flush on a server that never offloads; measure the table as the estimate
    // sees it.
    let mut server = ServerProc::start(&cfg);
    let c = FrontClient::new(&[&server], |_| {});
    let mut s = c.session();
    load(&c, &mut s);
    server.flush();
    let big = c
        .block_on(client::sql::catalog::load(c.client, "big"))
        .unwrap()
        .unwrap();
    let size = server.region_of(&record_key(big.id, 0)).approximate_size;
    assert!(size > 100_000, "a table of many blocks: {size}");
    server.terminate();
    drop(s);
    drop(c);

    // Offload by blocks size above half the table; load-aware routing off, so the reason is
    // exactly the blocks size.
    cfg.kvengine.remote_coprocessor_addr = worker.coprocessor_url();
    cfg.kvengine.remote_coprocessor_load_aware = false;
    cfg.kvengine.remote_coprocessor_min_blocks_size = ReadableSize(size / 2);
    let server = ServerProc::start(&cfg);
    let c = FrontClient::new(&[&server], |cfg| {
        cfg.workers = vec![worker.base_url().to_string()];
    });
    let s = &mut c.session();

    let a = c.analyze(s, "SELECT COUNT(*), SUM(v) FROM big");
    let lines = dag(&a);
    assert!(lines[0].starts_with("TableScan table=big"), "{lines:?}");
    assert_eq!(
        lines.last().map(String::as_str),
        Some("SimpleAgg aggs=count(*),sum(v)"),
        "the aggregate runs in the region: {lines:?}"
    );
    let regions = region_rows(&a);
    assert_eq!(regions.len(), 1, "{regions:?}");
    let (id, task, detail) = &regions[0];
    let region = server.region_of(&record_key(big.id, 0));
    assert_eq!(id, &format!("region {}", region.id));
    assert_eq!(
        task,
        &format!(
            "server {} remote {}",
            server.base_url(),
            worker.coprocessor_url()
        ),
        "{regions:?}"
    );
    assert!(
        detail.starts_with("reason=blocks_size pages=")
            && detail.ends_with("cache_hit=false cross_zone_bytes=0"),
        "{detail}"
    );
    // No node has a zone label: nothing is cross-zone.
    assert_eq!(a.cross_zone_bytes(), 0);
    assert_eq!(a.rows, 1, "one answer row");
    let answer = c.exec(s, "SELECT COUNT(*), SUM(v) FROM big");
    assert_eq!(
        texts(&answer),
        vec![vec![
            ROWS.to_string(),
            (0..ROWS).map(|id| id * 3).sum::<i64>().to_string()
        ]]
    );

    // A narrow query (a three-row table: a block or two) runs where its data is.
    let a = c.analyze(
        s,
        "SELECT id, v FROM tiny WHERE v > 15 ORDER BY v DESC LIMIT 2",
    );
    let lines = dag(&a);
    assert!(lines[0].starts_with("TableScan table=tiny"), "{lines:?}");
    assert!(lines.contains(&"Selection v > 15".to_string()), "{lines:?}");
    assert!(
        lines
            .last()
            .is_some_and(|l| l.starts_with("TopN") && l.ends_with("limit=2")),
        "the region returns its top 2 only: {lines:?}"
    );
    let regions = region_rows(&a);
    assert_eq!(regions.len(), 1, "{regions:?}");
    assert_eq!(
        regions[0].1,
        format!("server {} local", server.base_url()),
        "{regions:?}"
    );
    assert!(regions[0].2.contains("rows=2"), "{regions:?}");

    // The delegate path: the client sends the pages to the worker itself.
    c.exec(s, "SET stratus_remote_coprocessor = ON");
    let a = c.analyze(s, "SELECT g, COUNT(*) FROM big GROUP BY g");
    let lines = dag(&a);
    assert!(
        lines
            .last()
            .is_some_and(|l| l.starts_with("HashAgg group_by=g")),
        "{lines:?}"
    );
    let regions = region_rows(&a);
    assert_eq!(regions.len(), 1);
    assert!(
        regions[0]
            .1
            .starts_with(&format!("worker {}", worker.base_url())),
        "{regions:?}"
    );
    assert!(regions[0].2.contains("rows=10"), "ten groups: {regions:?}");
}
