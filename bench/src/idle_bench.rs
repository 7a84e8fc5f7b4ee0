//! Idle regions on three real server processes (`e2e::replicated::ReplicatedCluster`, default
//! `[raft]` settings: 100 ms ticks, heartbeats every 2 ticks): the CPU each server spends
//! while nothing is written or read, with `REGIONS` regions against one region (the baseline,
//! same run, same code). Issue 16's target: under 5% of a core for 1,000 idle regions.
//!
//! The CPU is each process's utime + stime (`/proc/<pid>/stat`) over `WINDOW`, after the
//! elections and the first log truncations settled (`SETTLE`); the row gives the busiest
//! server (every region's first voter wins its first election, so one server leads them all)
//! and the mean of the three.

use std::time::{Duration, Instant};

use e2e::replicated::{ReplicatedCluster, SERVERS};

use crate::report::table_header;

const REGIONS: usize = 1000;
const SETTLE: Duration = Duration::from_secs(5);
const WINDOW: Duration = Duration::from_secs(20);
const TIMEOUT: Duration = Duration::from_secs(120);
const TICK: Duration = Duration::from_millis(100);

/// Split keys giving `n` regions.
fn cuts(n: usize) -> Vec<Vec<u8>> {
    (1..n).map(|i| format!("r{i:06}").into_bytes()).collect()
}

/// CPU seconds of every server now.
fn cpu(c: &ReplicatedCluster) -> Vec<f64> {
    (0..SERVERS)
        .map(|i| {
            let pid = c.server(i).pid().expect("server running");
            server::cpu_load::cpu_seconds_of(pid).expect("/proc/<pid>/stat readable")
        })
        .collect()
}

/// Each server's share of one core while `n` regions sit idle.
fn idle_share(n: usize) -> Vec<f64> {
    let mut c = ReplicatedCluster::start_with_tick(&cuts(n), TICK);
    c.wait_until_every_region_has_a_leader(TIMEOUT);
    std::thread::sleep(SETTLE);
    let before = cpu(&c);
    let t0 = Instant::now();
    std::thread::sleep(WINDOW);
    let after = cpu(&c);
    let secs = t0.elapsed().as_secs_f64();
    before
        .iter()
        .zip(&after)
        .map(|(b, a)| (a - b) / secs)
        .collect()
}

fn row(what: &str, now: &[f64], base: &[f64]) {
    let max = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let pct = |x: f64| format!("{:.1}% of a core", x * 100.0);
    println!(
        "| {what} | {} (mean {}) | {} (mean {}, 1 region) | {:.1} |",
        pct(max(now)),
        pct(mean(now)),
        pct(max(base)),
        pct(mean(base)),
        max(now) / max(base).max(1e-6)
    );
}

pub fn run() {
    table_header(&format!(
        "idle regions: CPU per server, {REGIONS} regions vs 1 (busiest of 3 servers)"
    ));
    let base = idle_share(1);
    let many = idle_share(REGIONS);
    row(
        &format!("CPU per server, {} s idle, 100 ms ticks", WINDOW.as_secs()),
        &many,
        &base,
    );
}
