//! The client's coprocessor cache: a hit against a miss for the same request.
//!
//! A real `stratus-server` (local-directory store, one region) holding a flushed table, and two
//! entry clients (`client::Client`) in this process: one with the cache, one with capacity 0.
//! The cached client is warmed once; then both send the same request at the same start_ts, so
//! a hit differs from a miss only in what the server does: answer "unchanged" after comparing
//! data versions, or execute the DAG and ship its rows. Medians of several runs.

use std::time::{Duration, Instant};

use e2e::cluster::{Cluster, StoreKind};
use e2e::entry_client::{EntryClient, handle_v_dag};
use e2e::sample_table::SampleTable;
use e2e::server_proc::ServerProc;
use server::config::WalSync;
use types::ReadableSize;
use wire::coprocessor::{DagRequest, KeyRange};

use crate::offload_bench::load_rows;

const TABLE: SampleTable = SampleTable { id: 5 };
const ROWS: i64 = 100_000;
const RUNS: usize = 15;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn timed(c: &EntryClient, dag: &DagRequest, range: &KeyRange, ts: u64) -> (Duration, u64, usize) {
    let t = Instant::now();
    let r = c.coprocessor(dag, vec![range.clone()], ts);
    (t.elapsed(), r.stats.cache_hits, r.rows.len())
}

pub fn run() {
    let cluster = Cluster::new(StoreKind::Local);
    let mut cfg = cluster.server_config("server");
    cfg.kvengine.wal_sync = WalSync::Off;
    cfg.kvengine.memtable_size = ReadableSize::mib(512);
    let server = ServerProc::start(&cfg);
    load_rows(TABLE, &[&server], 0..ROWS);
    server.flush();
    server.compact();
    let size = server.region_of(&TABLE.key(0)).approximate_size;
    let ts = server.tso();
    let cached = EntryClient::new(&[&server], |_| {});
    let uncached = EntryClient::new(&[&server], |c| c.cop_cache.capacity_mb = 0);

    println!("\n### coprocessor cache (client → server, real server process)\n");
    println!(
        "Table: {ROWS} rows, {:.1} MiB of blocks, one region; medians of {RUNS} runs; the same request at the same start_ts.\n",
        size as f64 / (1 << 20) as f64
    );
    println!("| request | pages | hit | miss (baseline) | ratio (hit / miss) |");
    println!("|---|---|---|---|---|");
    let queries: [(&str, DagRequest, KeyRange); 3] = [
        (
            "COUNT(1), SUM(v) over the table",
            TABLE.count_sum_dag(),
            TABLE.range(),
        ),
        (
            "SELECT handle, v over 10,000 rows (paged)",
            handle_v_dag(TABLE, false),
            KeyRange::new(TABLE.key(0), TABLE.key(10_000)),
        ),
        (
            "SELECT handle, v over 100 rows",
            handle_v_dag(TABLE, false),
            KeyRange::new(TABLE.key(500), TABLE.key(600)),
        ),
    ];
    for (name, dag, range) in queries {
        let (_, _, want_rows) = timed(&cached, &dag, &range, ts);
        let mut hits = Vec::new();
        let mut misses = Vec::new();
        let mut pages = 0;
        for _ in 0..RUNS {
            let (d, hit_pages, rows) = timed(&cached, &dag, &range, ts);
            assert!(hit_pages > 0, "{name}: the warmed request hits");
            assert_eq!(rows, want_rows, "{name}: a hit returns every row");
            pages = hit_pages;
            hits.push(d);
            let (d, miss_hits, rows) = timed(&uncached, &dag, &range, ts);
            assert_eq!(miss_hits, 0, "{name}: capacity 0 never hits");
            assert_eq!(rows, want_rows);
            misses.push(d);
        }
        let (hit, miss) = (median(hits), median(misses));
        println!(
            "| {name} | {pages} | {:.2} ms | {:.2} ms | {:.3} |",
            hit.as_secs_f64() * 1e3,
            miss.as_secs_f64() * 1e3,
            hit.as_secs_f64() / miss.as_secs_f64()
        );
    }
}
