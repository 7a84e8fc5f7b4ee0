//! Remote compaction against local compaction, in the same run, with real processes: one
//! server writing random overwrites into one region much larger than its memtable (so it
//! flushes and compacts throughout), once compacting itself (the baseline) and once sending
//! its compactions to a worker. The server is pinned to core 0 and the worker to core 1
//! (`taskset`); the load generator and the point reader share core 1 with the worker.
//!
//! Measured per side, over the same fixed number of written bytes:
//!
//! * server CPU seconds (utime + stime of its process) per MiB written;
//! * write throughput (MiB of keys and values per second of wall time);
//! * point reads (a reader thread getting random keys at a fresh timestamp while the writes
//!   run): p50 and p99 latency;
//! * compactions applied, and how many ran on the worker
//!   (`stratus_kvengine_compactions_total`, `stratus_kvengine_remote_compactions_total`),
//!   and the worker's CPU seconds.

use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use e2e::cluster::{Cluster, StoreKind};
use e2e::sample_table::SampleTable;
use e2e::server_proc::{ServerProc, ServerSetup};
use e2e::worker_proc::WorkerProc;
use rand::Rng;
use server::config::{WalSync, WorkerEndpoint};
use types::{ReadableDuration, ReadableSize};

use crate::report;

const TABLE: SampleTable = SampleTable { id: 21 };
/// Distinct keys the overwrites land on (~46 MiB of live data at 150-byte values).
const KEYS: i64 = 300_000;
/// Rows per raw-load batch.
const BATCH: usize = 2_000;
const VALUE_LEN: usize = 150;

struct Side {
    name: &'static str,
    cpu_per_mib: f64,
    mib_per_sec: f64,
    read_p50: Duration,
    read_p99: Duration,
    reads: usize,
    compactions: f64,
    remote: f64,
    worker_cpu: f64,
}

fn pin(pid: Option<u32>, core: u32) {
    let Some(pid) = pid else { return };
    let ok = Command::new("taskset")
        .args(["-a", "-cp", &core.to_string(), &pid.to_string()])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("compaction: taskset could not pin pid {pid} to core {core}; running unpinned");
    }
}

fn run_side(cluster: &Cluster, name: &'static str, remote: bool, write_mib: u64) -> Side {
    let worker = WorkerProc::start(&cluster.worker_config(&format!("{name}-worker")));
    let mut setup: ServerSetup = cluster.server_config(&format!("{name}-server"));
    setup.kvengine.memtable_size = ReadableSize::mib(4);
    setup.kvengine.block_size = ReadableSize::kib(16);
    setup.kvengine.target_file_size = ReadableSize::mib(8);
    setup.kvengine.wal_sync = WalSync::Off;
    if remote {
        setup.kvengine.remote_coprocessor_workers = vec![WorkerEndpoint {
            addr: worker.coprocessor_url(),
            zone: types::Zone::label("a"),
        }];
        setup.kvengine.remote_coprocessor_min_blocks_size = ReadableSize(1 << 50);
        setup.kvengine.remote_coprocessor_num_ranges = 0;
        setup.kvengine.remote_compaction = true;
        setup.kvengine.remote_compaction_min_input_size = ReadableSize(0);
        setup.kvengine.remote_compaction_timeout = ReadableDuration::secs(120);
    }
    let server = ServerProc::start(&setup);
    pin(server.pid(), 0);
    pin(worker.pid(), 1);
    pin(Some(std::process::id()), 1);

    let stop = AtomicBool::new(false);
    let latencies = Mutex::new(Vec::new());
    let cpu0 = server::cpu_load::cpu_seconds_of(server.pid().unwrap_or(0)).unwrap_or(0.0);
    let wcpu0 = server::cpu_load::cpu_seconds_of(worker.pid().unwrap_or(0)).unwrap_or(0.0);
    let started = Instant::now();
    let written = std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut rng = rand::rng();
            let mut local = Vec::new();
            while !stop.load(Ordering::Acquire) {
                let key = TABLE.key(rng.random_range(0..KEYS));
                let ts = server.tso();
                let t = Instant::now();
                if server.try_get(&key, ts, Duration::from_secs(10)).is_ok() {
                    local.push(t.elapsed());
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            latencies
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend(local);
        });
        let mut rng = rand::rng();
        let mut written = 0u64;
        while written < write_mib << 20 {
            // A batch writes each key once (one transaction).
            let handles: std::collections::BTreeSet<i64> =
                (0..BATCH).map(|_| rng.random_range(0..KEYS)).collect();
            let pairs: Vec<(Vec<u8>, Vec<u8>)> = handles
                .into_iter()
                .map(|h| (TABLE.key(h), SampleTable::value(h, VALUE_LEN)))
                .collect();
            written += pairs
                .iter()
                .map(|(k, v)| (k.len() + v.len()) as u64)
                .sum::<u64>();
            server.raw_load(pairs);
        }
        stop.store(true, Ordering::Release);
        written
    });
    let wall = started.elapsed();
    let cpu = server::cpu_load::cpu_seconds_of(server.pid().unwrap_or(0)).unwrap_or(0.0) - cpu0;
    let worker_cpu =
        server::cpu_load::cpu_seconds_of(worker.pid().unwrap_or(0)).unwrap_or(0.0) - wcpu0;
    let mut lat = latencies.into_inner().unwrap_or_else(|e| e.into_inner());
    lat.sort();
    let mib = written as f64 / (1 << 20) as f64;
    Side {
        name,
        cpu_per_mib: cpu / mib,
        mib_per_sec: mib / wall.as_secs_f64(),
        read_p50: report::percentile(&lat, 0.50),
        read_p99: report::percentile(&lat, 0.99),
        reads: lat.len(),
        compactions: server.metric("stratus_kvengine_compactions_total", &[]),
        remote: server.metric("stratus_kvengine_remote_compactions_total", &[]),
        worker_cpu,
    }
}

pub fn run(write_mib: u64) {
    let cluster = Cluster::new(StoreKind::Local);
    let local = run_side(&cluster, "local", false, write_mib);
    let remote = run_side(&cluster, "remote", true, write_mib);
    println!(
        "\n## compaction: local vs remote (`stratus-bench compaction`), {write_mib} MiB of random overwrites over {KEYS} keys\n"
    );
    println!(
        "| measure | remote compaction | local compaction (baseline) | ratio (remote / local) |"
    );
    println!("|---|---|---|---|");
    let row = |m: &str, r: f64, l: f64| {
        println!(
            "| {m} | {r:.3} | {l:.3} | {:.3} |",
            r / l.max(f64::MIN_POSITIVE)
        );
    };
    row(
        "server CPU seconds per MiB written",
        remote.cpu_per_mib,
        local.cpu_per_mib,
    );
    row(
        "write throughput, MiB/s",
        remote.mib_per_sec,
        local.mib_per_sec,
    );
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    row(
        "point read p50, ms",
        ms(remote.read_p50),
        ms(local.read_p50),
    );
    row(
        "point read p99, ms",
        ms(remote.read_p99),
        ms(local.read_p99),
    );
    for s in [&remote, &local] {
        println!(
            "\n{}: {} compactions ({} on the worker), worker CPU {:.1} s, {} point reads",
            s.name, s.compactions, s.remote, s.worker_cpu, s.reads
        );
    }
}
