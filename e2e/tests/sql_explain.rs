//! `EXPLAIN <select>` through the SQL engine against a real server that offloads by blocks
//! size: the executor rows describe the DAG, and the region rows say where each region ran and
//! why — a whole-table aggregate over a table of many flushed blocks runs `remote` on the
//! worker (reason `blocks_size`), a query over a tiny table stays `local`, and on the delegate
//! path the region rows name the worker the client sent the pages to.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use client::sql::{Engine, QueryResult};
use e2e::cluster::{Cluster, StoreKind};
use e2e::entry_client::EntryClient;
use e2e::server_proc::ServerProc;
use e2e::worker_proc::WorkerProc;
use types::ReadableSize;
use wire::codec::table::record_key;
use wire::datum::Datum;

const ROWS: i64 = 3000;
const BATCH: i64 = 500;

fn exec(c: &EntryClient, engine: &mut Engine<'_>, sql: &str) -> QueryResult {
    c.block_on(engine.execute(sql))
        .unwrap_or_else(|e| panic!("{sql}: {}", node::error_chain(&e)))
}

fn text(d: &Datum) -> String {
    match d {
        Datum::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        other => panic!("not text: {other:?}"),
    }
}

/// The rows as `(id, task, detail)` text.
fn explained(r: &QueryResult) -> Vec<(String, String, String)> {
    assert_eq!(r.columns, vec!["id", "task", "detail"]);
    r.rows
        .iter()
        .map(|row| (text(&row[0]), text(&row[1]), text(&row[2])))
        .collect()
}

fn region_rows(r: &QueryResult) -> Vec<(String, String, String)> {
    explained(r)
        .into_iter()
        .filter(|(id, _, _)| id.starts_with("region "))
        .collect()
}

/// Creates `big` (many blocks once flushed) and `tiny` (three rows) through SQL.
fn load(c: &EntryClient, engine: &mut Engine<'_>) {
    exec(
        c,
        engine,
        "CREATE TABLE big (id BIGINT PRIMARY KEY, g INT, v BIGINT, pad VARCHAR(64))",
    );
    for start in (0..ROWS).step_by(BATCH as usize) {
        let values: Vec<String> = (start..start + BATCH)
            .map(|id| format!("({id}, {}, {}, '{}')", id % 10, id * 3, "p".repeat(48)))
            .collect();
        let r = exec(
            c,
            engine,
            &format!("INSERT INTO big VALUES {}", values.join(", ")),
        );
        assert_eq!(r.affected_rows, BATCH as u64);
    }
    exec(
        c,
        engine,
        "CREATE TABLE tiny (id BIGINT PRIMARY KEY, v BIGINT)",
    );
    exec(
        c,
        engine,
        "INSERT INTO tiny VALUES (1, 10), (2, 20), (3, 30)",
    );
}

#[test]
fn explain_shows_the_dag_and_where_each_region_ran_and_why() {
    let cluster = Cluster::new(StoreKind::Local);
    let worker = WorkerProc::start(&cluster.worker_config("worker"));
    let mut cfg = cluster.server_config("server");

    // Load and flush on a server that never offloads; measure the table as the estimate
    // sees it.
    let mut server = ServerProc::start(&cfg);
    let c = EntryClient::new(&[&server], |_| {});
    let mut engine = Engine::new(&c.client);
    load(&c, &mut engine);
    server.flush();
    let big = c.block_on(engine.table("big")).unwrap().unwrap();
    let size = server.region_of(&record_key(big.id, 0)).approximate_size;
    assert!(size > 100_000, "a table of many blocks: {size}");
    server.terminate();
    drop(engine);
    drop(c);

    // Offload by blocks size above half the table; load-aware routing off, so the reason is
    // exactly the blocks size.
    cfg.kvengine.remote_coprocessor_addr = worker.coprocessor_url();
    cfg.kvengine.remote_coprocessor_load_aware = false;
    cfg.kvengine.remote_coprocessor_min_blocks_size = ReadableSize(size / 2);
    let server = ServerProc::start(&cfg);
    let c = EntryClient::new(&[&server], |cfg| {
        cfg.workers = vec![worker.base_url().to_string()];
    });
    let mut engine = Engine::new(&c.client);
    let e = &mut engine;

    let r = exec(&c, e, "EXPLAIN SELECT COUNT(*), SUM(v) FROM big");
    let rows = explained(&r);
    assert_eq!(
        rows[..2],
        [
            (
                "0".to_string(),
                "dag".to_string(),
                "TableScan table=big columns=id,g,v,pad".to_string()
            ),
            (
                "1".to_string(),
                "dag".to_string(),
                "SimpleAgg aggs=count(*),sum(v)".to_string()
            ),
        ]
    );
    let regions = region_rows(&r);
    assert_eq!(regions.len(), 1, "{rows:?}");
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
        "{rows:?}"
    );
    assert!(
        detail.starts_with("reason=blocks_size pages=")
            && detail.ends_with("cache_hit=false cross_zone_bytes=0"),
        "{detail}"
    );
    assert_eq!(
        r.rows.len(),
        4,
        "two executors, one region and the total, not the query's row"
    );
    assert_eq!(
        explained(&r)[3],
        (
            "query".to_string(),
            "total".to_string(),
            // No node has a zone label: nothing is cross-zone.
            "cross_zone_bytes=0".to_string()
        )
    );
    let answer = exec(&c, e, "SELECT COUNT(*), SUM(v) FROM big");
    assert_eq!(
        answer.rows,
        vec![vec![
            Datum::Int(ROWS),
            Datum::Int((0..ROWS).map(|id| id * 3).sum())
        ]]
    );

    // A narrow query (a three-row table: a block or two) runs where its data is.
    let r = exec(
        &c,
        e,
        "EXPLAIN SELECT id, v FROM tiny WHERE v > 15 ORDER BY v DESC LIMIT 2",
    );
    let rows = explained(&r);
    assert_eq!(
        rows.iter()
            .map(|r| r.2.as_str())
            .take(3)
            .collect::<Vec<_>>(),
        [
            "TableScan table=tiny columns=id,v",
            "Selection v > 15",
            "TopN order_by=v desc limit=2"
        ]
    );
    let regions = region_rows(&r);
    assert_eq!(regions.len(), 1, "{rows:?}");
    assert_eq!(
        regions[0].1,
        format!("server {} local", server.base_url()),
        "{rows:?}"
    );
    assert!(regions[0].2.contains("rows=2"), "{rows:?}");

    // The delegate path: the client sends the pages to the worker itself.
    exec(&c, e, "SET stratus_remote_coprocessor = ON");
    let r = exec(
        &c,
        e,
        "EXPLAIN ANALYZE SELECT g, COUNT(*) FROM big GROUP BY g",
    );
    assert_eq!(
        explained(&r)[1].2,
        "HashAgg group_by=g aggs=count(*)",
        "{:?}",
        explained(&r)
    );
    let regions = region_rows(&r);
    assert_eq!(regions.len(), 1);
    assert!(
        regions[0]
            .1
            .starts_with(&format!("worker {}", worker.base_url())),
        "{regions:?}"
    );
}
