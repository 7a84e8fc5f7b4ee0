//! TLS on against TLS off, in the same run, with real processes: two server + worker pairs
//! over one shared local-directory store layout, identical but for `[security]` (mutual TLS
//! with a throwaway CA, node and admin tiers) on the second. Measured:
//!
//! * the offload path: `COUNT(1), SUM(v)` over a table the server offloads to its worker
//!   (client → server over HTTP(S), server → worker over HTTP(S)), median latency of warm runs,
//!   the two pairs interleaved run by run;
//! * the transaction path: 2PC transactions of two puts (TSO, prewrite, TSO, commit: four
//!   round trips to the server), one at a time;
//! * handshakes: how many TLS handshakes the server and the worker completed while serving
//!   1,000 queries (`stratus_tls_handshakes_total`): the clients pool connections, so the cost
//!   of a handshake is paid per connection, not per request.
//!
//! The bench process itself calls the TLS pair as its admin (`harness::http::use_identity`).

use std::time::{Duration, Instant};

use e2e::cluster::{Cluster, StoreKind};
use e2e::coprocessor::{location, request};
use e2e::sample_table::SampleTable;
use e2e::server_proc::{ServerProc, ServerSetup};
use e2e::transactions::{commit, put};
use e2e::worker_proc::{WorkerProc, WorkerSetup};
use node::tls::SecurityConfig;
use server::config::WalSync;
use types::{ReadableDuration, ReadableSize};

use crate::offload_bench::load_rows;

const TABLE: SampleTable = SampleTable { id: 9 };
/// Rows in SSTs, ~140 bytes each: about 8 MiB of blocks.
const ROWS: i64 = 60_000;
/// Timed queries per side (interleaved), and transactions per side.
const QUERIES: usize = 41;
const TXNS: usize = 300;
/// Queries whose handshakes are counted.
const HANDSHAKE_QUERIES: usize = 1_000;

/// A server that offloads everything to its worker.
struct Pair {
    server: ServerProc,
    worker: WorkerProc,
}

fn tiered(base: SecurityConfig) -> SecurityConfig {
    SecurityConfig {
        node_cn: vec!["stratus-server".into(), "stratus-worker".into()],
        admin_cn: vec!["stratus-admin".into()],
        ..base
    }
}

fn start(cluster: &Cluster, name: &str, tls: Option<&harness::certs::ThrowawayCa>) -> Pair {
    let mut worker_cfg: WorkerSetup = cluster.worker_config(&format!("{name}-worker"));
    let mut server_cfg: ServerSetup = cluster.server_config(&format!("{name}-server"));
    if let Some(ca) = tls {
        worker_cfg.config.security = tiered(ca.issue("stratus-worker").expect("cert"));
        server_cfg.config.security = tiered(ca.issue("stratus-server").expect("cert"));
    }
    let worker = WorkerProc::start(&worker_cfg);
    server_cfg.kvengine.block_size = ReadableSize::kib(64);
    server_cfg.kvengine.memtable_size = ReadableSize::mib(512);
    server_cfg.kvengine.wal_sync = WalSync::Off;
    server_cfg.kvengine.remote_coprocessor_timeout = ReadableDuration::secs(60);
    server_cfg.offload_all_to_worker(&worker);
    let server = ServerProc::start(&server_cfg);
    Pair { server, worker }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

pub fn run() {
    let cluster = Cluster::new(StoreKind::Local);
    let ca = harness::certs::ThrowawayCa::create(&cluster.path("tls"), "bench-ca").expect("CA");
    harness::http::use_identity(&ca.issue("stratus-admin").expect("admin cert"))
        .expect("admin identity");
    let plain = start(&cluster, "plain", None);
    let tls = start(&cluster, "tls", Some(&ca));
    assert!(tls.server.base_url().starts_with("https://"));
    let t0 = Instant::now();
    for p in [&plain, &tls] {
        load_rows(TABLE, &[&p.server], 0..ROWS);
        p.server.flush();
        p.server.compact();
    }
    eprintln!(
        "tls: loaded {ROWS} rows into both pairs in {:?}",
        t0.elapsed()
    );

    let dag = TABLE.count_sum_dag();
    let query = |p: &Pair| {
        let region = p.server.region_of(&TABLE.key(0));
        let req = request(&dag, vec![TABLE.range()], p.server.tso(), &region);
        let t = Instant::now();
        let resp = p.server.coprocessor(&req);
        let took = t.elapsed();
        assert!(
            resp.other_error.is_empty() && resp.region_error.is_none(),
            "{resp:?}"
        );
        assert_eq!(location(&resp), "remote", "the server offloaded it");
        took
    };
    // Warm both workers' caches and both connection pools.
    for _ in 0..3 {
        query(&plain);
        query(&tls);
    }
    let mut lat_plain = Vec::new();
    let mut lat_tls = Vec::new();
    for _ in 0..QUERIES {
        lat_plain.push(query(&plain));
        lat_tls.push(query(&tls));
    }
    let (q_plain, q_tls) = (median(lat_plain), median(lat_tls));

    let txns = |p: &Pair, base: u64| {
        let t = Instant::now();
        for i in 0..TXNS as u64 {
            let k = base + 2 * i;
            let a = TABLE.key(1_000_000 + k as i64);
            let b = TABLE.key(1_000_001 + k as i64);
            commit(
                &p.server,
                &[&p.server],
                &[put(&a, &[7; 150]), put(&b, &[8; 150])],
            );
        }
        t.elapsed()
    };
    // Interleaved halves, so that a noisy moment weighs on both sides.
    let (mut t_plain, mut t_tls) = (Duration::ZERO, Duration::ZERO);
    for half in 0..2u64 {
        t_plain += txns(&plain, half * 10 * TXNS as u64);
        t_tls += txns(&tls, half * 10 * TXNS as u64);
    }

    let handshakes = |p: &Pair| {
        p.server.metric("stratus_tls_handshakes_total", &[])
            + p.worker.metric("stratus_tls_handshakes_total", &[])
    };
    let before = handshakes(&tls);
    let t = Instant::now();
    for _ in 0..HANDSHAKE_QUERIES {
        query(&tls);
    }
    let thousand = t.elapsed();
    let during = handshakes(&tls) - before;

    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!("\n### TLS on against TLS off (real processes, same run)\n");
    println!(
        "Two identical server + worker pairs, the second with mutual TLS (`[security]`, node and \
         admin tiers); the server offloads every query to its worker. Table: {ROWS} rows \
         (~{:.1} MiB of blocks).\n",
        tls.server.region_of(&TABLE.key(0)).approximate_size as f64 / (1 << 20) as f64
    );
    println!("| measure | TLS on | TLS off (baseline) | ratio (on / off) |");
    println!("|---|---|---|---|");
    println!(
        "| offload query COUNT(1), SUM(v), median of {QUERIES} (client → server → worker) | {:.2} ms | {:.2} ms | {:.3} |",
        ms(q_tls),
        ms(q_plain),
        ms(q_tls) / ms(q_plain)
    );
    println!(
        "| 2PC transaction (two puts: TSO, prewrite, TSO, commit), mean of {} | {:.3} ms | {:.3} ms | {:.3} |",
        2 * TXNS,
        ms(t_tls) / (2 * TXNS) as f64,
        ms(t_plain) / (2 * TXNS) as f64,
        t_tls.as_secs_f64() / t_plain.as_secs_f64()
    );
    println!(
        "\nHandshakes: {HANDSHAKE_QUERIES} offloaded queries over TLS ({:.1} s) made {during} TLS \
         handshakes on the server and the worker together (each client pools its connections).",
        thousand.as_secs_f64()
    );
}
