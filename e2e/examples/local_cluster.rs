//! The main job: a local Stratus cluster on the embedded defaults — one `stratus-server`
//! (running the TSO, SSTs in a local directory) and one `stratus-worker` reading the same
//! directory — started as real processes, loaded, queried, and stopped with SIGTERM.
//!
//! `cargo run --release -p e2e --example local_cluster [-- ROWS]` (default 200000 rows).
//!
//! Every answer is checked against the sum computed here; a mismatch exits non-zero. What it
//! shows, in order: a whole-table aggregate offloaded to the worker (its ranges cover more
//! SST blocks than `remote-coprocessor-min-blocks-size`, lowered to 32 KiB so a demo table
//! qualifies, and than the load-aware force threshold, lowered alike because an idle demo
//! server would otherwise keep it local), a narrow range answered locally, the same request again as a cache hit answered
//! by the server alone, a write that turns it into a miss, and a killed worker: the server
//! falls back to local execution and the answer is still right.

use std::process::ExitCode;
use std::time::Instant;

use e2e::cluster::{Cluster, StoreKind};
use e2e::coprocessor::{location, request, rows};
use e2e::sample_table::SampleTable;
use e2e::server_proc::ServerProc;
use e2e::worker_proc::WorkerProc;
use types::ReadableSize;
use wire::coprocessor::{KeyRange, Request, Response};
use wire::datum::Datum;

const TABLE: SampleTable = SampleTable { id: 42 };
const PAD: usize = 48;

fn v_of(h: i64) -> i64 {
    h % 1000
}

fn main() -> ExitCode {
    let rows_arg = std::env::args().nth(1).map(|a| a.parse::<i64>());
    let n = match rows_arg {
        None => 200_000,
        Some(Ok(n)) if n >= 1000 => n,
        Some(_) => {
            eprintln!("usage: local_cluster [ROWS >= 1000]");
            return ExitCode::from(2);
        }
    };
    let cluster = Cluster::new(StoreKind::Local);
    println!("cluster directory: {}", cluster.dir.path().display());
    let mut worker = WorkerProc::start(&cluster.worker_config("worker"));
    let mut cfg = cluster.server_config("server");
    // The embedded defaults, but for ports, directories and the offload thresholds.
    let kv = &mut cfg.kvengine;
    kv.block_size = ReadableSize::kib(64);
    kv.memtable_size = ReadableSize::mib(64);
    kv.remote_coprocessor_addr = worker.coprocessor_url();
    kv.remote_coprocessor_min_blocks_size = ReadableSize::kib(32);
    // Load-aware routing (on by default) keeps candidates local while the server's CPU is
    // idle, which a demo server always is: force the offload at the same size.
    kv.remote_coprocessor_load_aware_force_blocks_size = ReadableSize::kib(32);
    let mut server = ServerProc::start(&cfg);
    println!(
        "server  {}\nworker  {}",
        server.base_url(),
        worker.base_url()
    );

    let t0 = Instant::now();
    let sst_rows = n - n / 100;
    TABLE.load(&server, 0..sst_rows, PAD, v_of);
    server.flush();
    server.compact();
    TABLE.load(&server, sst_rows..n, PAD, v_of);
    let region = server.region_of(&TABLE.key(0));
    println!(
        "loaded {n} rows in {:.1?} ({} in SSTs after compaction, {} in the memtable); region {} holds ~{:.1} MiB\n",
        t0.elapsed(),
        sst_rows,
        n - sst_rows,
        region.id,
        region.approximate_size as f64 / (1 << 20) as f64
    );

    let mut ok = true;
    let mut check =
        |what: &str, resp: &Response, want: Option<Vec<Vec<Datum>>>, want_at: &str, ms: f64| {
            let at = location(resp);
            let (answer, good) = match &want {
                None => ("(cache hit: no data)".to_string(), resp.is_cache_hit),
                Some(want) => match rows(resp) {
                    Ok(got) => (
                        format!("{:?}", got.first().unwrap_or(&Vec::new())),
                        &got == want,
                    ),
                    Err(e) => (format!("error {e:?}"), false),
                },
            };
            let good = good && at == want_at;
            ok &= good;
            let reason = resp.exec_details.as_ref().map_or("", |d| d.reason.as_str());
            let reason: String = reason.chars().take(60).collect();
            println!(
                "{:<34} {:<10} {:<10} {:>8.1} ms  {:<40} {reason}",
                what,
                at,
                if good { "ok" } else { "MISMATCH" },
                ms,
                answer
            );
        };
    println!(
        "{:<34} {:<10} {:<10} {:>11}  {:<40} reason",
        "query", "ran", "check", "time", "answer [count, sum]"
    );

    let dag = TABLE.count_sum_dag();
    let run = |server: &ServerProc, ranges: Vec<KeyRange>, cache_version: u64| -> (Response, f64) {
        let region = server.region_of(&TABLE.key(0));
        let mut req: Request = request(&dag, ranges, server.tso(), &region);
        req.is_cache_enabled = true;
        req.cache_if_match_version = cache_version;
        let t = Instant::now();
        let resp = server.coprocessor(&req);
        (resp, t.elapsed().as_secs_f64() * 1e3)
    };
    let whole = || vec![TABLE.range()];
    let want_all = SampleTable::count_sum_rows((0..n).map(v_of));

    let (first, ms) = run(&server, whole(), 0);
    check(
        "whole table (offloaded)",
        &first,
        Some(want_all.clone()),
        "remote",
        ms,
    );
    let narrow = vec![KeyRange::new(TABLE.key(10), TABLE.key(110))];
    let (resp, ms) = run(&server, narrow, 0);
    check(
        "100 rows (local)",
        &resp,
        Some(SampleTable::count_sum_rows((10..110).map(v_of))),
        "local",
        ms,
    );
    let (resp, ms) = run(&server, whole(), first.cache_last_version);
    check(
        "whole table again (cache hit)",
        &resp,
        None,
        "cache_hit",
        ms,
    );

    server.raw_load(vec![(TABLE.key(n), SampleTable::value(v_of(n), PAD))]);
    let want_more = SampleTable::count_sum_rows((0..=n).map(v_of));
    let (resp, ms) = run(&server, whole(), first.cache_last_version);
    check(
        "after a write (cache miss)",
        &resp,
        Some(want_more.clone()),
        "remote",
        ms,
    );

    worker.kill();
    let (resp, ms) = run(&server, whole(), 0);
    check(
        "worker killed (fallback)",
        &resp,
        Some(want_more),
        "fallback",
        ms,
    );

    let status = server.terminate();
    println!("\nserver stopped with SIGTERM: {status}");
    if ok && status.success() {
        println!("all answers checked");
        ExitCode::SUCCESS
    } else {
        eprintln!("a check failed");
        ExitCode::from(1)
    }
}
