//! Light queries under a flood of heavy ones, local-only vs offloading: why offloading exists.
//!
//! Real processes on a local-directory store: one `stratus-worker` and two `stratus-server`s
//! holding the same table, one offloading heavy requests (min blocks size 1 MiB; load-aware
//! routing off, so every heavy query goes remote and the run measures the mechanism), one
//! never offloading. To stand in for separate machines on this 2-core box, both servers are
//! pinned to core 0 and the worker to core 1 (`taskset`; only one server is measured at a
//! time). The client threads run on core 0 too: on the worker's core their own scheduling
//! delays would count as server latency.
//!
//! * light query: `COUNT(1), SUM(v)` over 16 consecutive rows at a random offset (one block:
//!   no candidate, always local);
//! * heavy query: the same over the whole table (~20 MiB of blocks).
//!
//! Per server: a baseline phase of light clients alone, then phases adding 1, 2 and 4 heavy
//! clients. Reported: light p50/p99 and their ratio to the same server's baseline p99, and
//! heavy queries per second with the offloading server's as a ratio to the local one's. Every
//! answer is checked.

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use e2e::cluster::{Cluster, StoreKind};
use e2e::coprocessor::{location, request, rows};
use e2e::sample_table::SampleTable;
use e2e::server_proc::{ServerProc, ServerSetup};
use e2e::worker_proc::WorkerProc;
use rand::Rng;
use server::config::WalSync;
use types::{ReadableDuration, ReadableSize};
use wire::coprocessor::KeyRange;
use wire::datum::Datum;

use crate::offload_bench::load_rows;
use crate::workload::rng;

const TABLE: SampleTable = SampleTable { id: 9 };
/// ~140 bytes a row: about 20 MiB of blocks.
const ROWS: i64 = 150_000;
const LIGHT_ROWS: i64 = 16;
const LIGHT_CLIENTS: usize = 2;
const HEAVY_CLIENTS: [usize; 3] = [1, 2, 4];
const PHASE: Duration = Duration::from_secs(6);

struct Phase {
    heavy_clients: usize,
    light: Vec<Duration>,
    heavy_done: usize,
    elapsed: Duration,
}

impl Phase {
    fn pct(&self, p: f64) -> Duration {
        let mut v = self.light.clone();
        v.sort();
        v[((v.len() - 1) as f64 * p).round() as usize]
    }

    fn heavy_per_sec(&self) -> f64 {
        self.heavy_done as f64 / self.elapsed.as_secs_f64()
    }
}

fn pin(pid: Option<u32>, core: u32) {
    let pid = pid.expect("a running process").to_string();
    let status = Command::new("taskset")
        .args(["-a", "-cp", &core.to_string(), &pid])
        .stdout(std::process::Stdio::null())
        .status();
    if !matches!(status, Ok(s) if s.success()) {
        eprintln!("mixed: cannot pin {pid} to core {core} ({status:?}); results unpinned");
    }
}

/// `COUNT(1), SUM(v)` over handles `[from, to)`, checked against the loaded values
/// (v = handle % 1000); where it ran.
fn query(server: &ServerProc, ts: u64, from: i64, to: i64) -> String {
    let region = server.region_of(&TABLE.key(0));
    let range = KeyRange::new(TABLE.key(from), TABLE.key(to));
    let resp = server.coprocessor(&request(&TABLE.count_sum_dag(), vec![range], ts, &region));
    let got = rows(&resp).unwrap_or_else(|e| panic!("query failed: {e:?} {resp:?}"));
    let want = SampleTable::count_sum_rows((from..to).map(|h| h % 1000));
    assert_eq!(got, want, "[{from}, {to}) answered wrongly");
    if let [row] = got.as_slice() {
        assert_eq!(row[0], Datum::Int(to - from));
    }
    location(&resp).to_string()
}

fn phase(server: &ServerProc, ts: u64, heavy_clients: usize) -> Phase {
    let stop = AtomicBool::new(false);
    let t0 = Instant::now();
    let (light, heavy_done) = std::thread::scope(|s| {
        let lights: Vec<_> = (0..LIGHT_CLIENTS)
            .map(|i| {
                let stop = &stop;
                s.spawn(move || {
                    let mut r = rng(1000 + i as u64);
                    let mut lat = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        let from = r.random_range(0..ROWS - LIGHT_ROWS);
                        let t = Instant::now();
                        let at = query(server, ts, from, from + LIGHT_ROWS);
                        lat.push(t.elapsed());
                        assert_eq!(at, "local", "a light query is no candidate");
                    }
                    lat
                })
            })
            .collect();
        let heavies: Vec<_> = (0..heavy_clients)
            .map(|_| {
                let stop = &stop;
                s.spawn(move || {
                    let mut done = 0;
                    while !stop.load(Ordering::Relaxed) {
                        query(server, ts, 0, ROWS);
                        done += 1;
                    }
                    done
                })
            })
            .collect();
        std::thread::sleep(PHASE);
        stop.store(true, Ordering::Relaxed);
        let light: Vec<Duration> = lights
            .into_iter()
            .flat_map(|h| h.join().expect("light client"))
            .collect();
        let heavy: usize = heavies
            .into_iter()
            .map(|h| h.join().expect("heavy client"))
            .sum();
        (light, heavy)
    });
    Phase {
        heavy_clients,
        light,
        heavy_done,
        // Heavy queries finishing after the stop are counted: measure to the last one.
        elapsed: t0.elapsed(),
    }
}

fn server_config(cluster: &Cluster, name: &str, node_id: u16) -> ServerSetup {
    let mut c = cluster.server_config(name);
    c.server.node_id = node_id;
    c.kvengine.block_size = ReadableSize::kib(64);
    c.kvengine.memtable_size = ReadableSize::mib(512);
    c.kvengine.wal_sync = WalSync::Off;
    c
}

pub fn run() {
    let cluster = Cluster::new(StoreKind::Local);
    let worker = WorkerProc::start(&cluster.worker_config("worker"));
    let mut on_cfg = server_config(&cluster, "offload", 1);
    on_cfg.kvengine.remote_coprocessor_addr = worker.coprocessor_url();
    on_cfg.kvengine.remote_coprocessor_min_blocks_size = ReadableSize::mib(1);
    on_cfg.kvengine.remote_coprocessor_load_aware = false;
    on_cfg.kvengine.remote_coprocessor_timeout = ReadableDuration::secs(60);
    let on = ServerProc::start(&on_cfg);
    let mut off_cfg = server_config(&cluster, "local", 2);
    off_cfg.tso_from(&on);
    let off = ServerProc::start(&off_cfg);
    let t0 = Instant::now();
    load_rows(TABLE, &[&on, &off], 0..ROWS);
    for s in [&on, &off] {
        s.flush();
        s.compact();
    }
    let size = on.region_of(&TABLE.key(0)).approximate_size;
    eprintln!(
        "mixed: loaded {ROWS} rows ({:.1} MiB of blocks) in {:?}",
        size as f64 / (1 << 20) as f64,
        t0.elapsed()
    );
    pin(on.pid(), 0);
    pin(off.pid(), 0);
    pin(worker.pid(), 1);
    // The clients stand in for other machines too; left unpinned, the scheduler puts them on
    // the worker's busy core and their own waits show up as light-query latency. On the
    // servers' core they compete with the server they measure, in both modes alike.
    pin(Some(std::process::id()), 0);
    let ts = on.tso();
    // Warm both (block caches, the worker's file cache), and check where heavy queries run.
    assert_eq!(query(&on, ts, 0, ROWS), "remote");
    assert_eq!(query(&off, ts, 0, ROWS), "local");

    let mut results: Vec<(&str, Vec<Phase>)> = Vec::new();
    for (mode, server) in [("local only", &off), ("offload", &on)] {
        let mut phases = vec![phase(server, ts, 0)];
        for heavy in HEAVY_CLIENTS {
            phases.push(phase(server, ts, heavy));
        }
        results.push((mode, phases));
    }

    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "\n### mixed light and heavy queries (real processes; servers on core 0, worker on core 1)\n"
    );
    println!(
        "Table: {ROWS} rows, {:.1} MiB of blocks. Light: {LIGHT_CLIENTS} clients, COUNT/SUM over {LIGHT_ROWS} rows; heavy: COUNT/SUM over the whole table; {} s per phase.\n",
        size as f64 / (1 << 20) as f64,
        PHASE.as_secs()
    );
    println!(
        "| mode | heavy clients | light queries | light p50 | light p99 | light p99 / no-heavy p99 | heavy q/s | heavy q/s offload / local |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let local_heavy: Vec<f64> = results[0].1.iter().map(Phase::heavy_per_sec).collect();
    for (mode, phases) in &results {
        let base = phases[0].pct(0.99);
        for (i, p) in phases.iter().enumerate() {
            let versus = if p.heavy_clients == 0 {
                "—".to_string()
            } else {
                format!("{:.2}", p.heavy_per_sec() / local_heavy[i])
            };
            println!(
                "| {mode} | {} | {} | {:.2} ms | {:.2} ms | {:.2} | {:.1} | {versus} |",
                p.heavy_clients,
                p.light.len(),
                ms(p.pct(0.5)),
                ms(p.pct(0.99)),
                ms(p.pct(0.99)) / ms(base),
                p.heavy_per_sec(),
            );
        }
    }
}
