//! Markdown output of benchmark results.

use std::time::Duration;

pub fn header(entries: usize) {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!("machine: {cpu}, {cores} cores; entries: {entries} (24-byte keys, 150-byte values)\n");
}

pub fn table_header(title: &str) {
    println!("\n### {title}\n");
    println!("| benchmark | stratus | baseline | ratio (stratus / baseline) |");
    println!("|---|---|---|---|");
}

/// One row: both sides as a rate, higher is better.
pub fn row(name: &str, unit: &str, ours: f64, base_name: &str, base: f64) {
    println!(
        "| {name} | {} {unit} | {} {unit} ({base_name}) | {} |",
        fmt(ours),
        fmt(base),
        fmt_ratio(ours / base)
    );
}

/// Two decimals, or three significant digits when that would print 0.00 (a network round trip
/// against an in-process atomic).
fn fmt_ratio(r: f64) -> String {
    if r.abs() >= 0.01 || r == 0.0 {
        format!("{r:.2}")
    } else {
        format!("{r:.2e}")
    }
}

pub fn rate(count: f64, d: Duration) -> f64 {
    count / d.as_secs_f64()
}

fn fmt(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{v:.1}")
    }
}

/// One row of latencies: lower is better, the ratio is ours / baseline.
pub fn latency_row(name: &str, ours: Duration, base_name: &str, base: Duration) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "| {name} | {:.2} ms | {:.2} ms ({base_name}) | {:.2} |",
        ms(ours),
        ms(base),
        ms(ours) / ms(base).max(1e-9)
    );
}

/// The `p` quantile (0..=1) of `sorted` (ascending), nearest rank; zero when empty.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(i).copied().unwrap_or_default()
}

/// One row of long durations (minutes), in seconds: lower is better, the ratio is ours /
/// baseline.
pub fn duration_row(name: &str, ours: Duration, base_name: &str, base: Duration) {
    let s = |d: Duration| d.as_secs_f64();
    println!(
        "| {name} | {:.1} s | {:.1} s ({base_name}) | {:.2} |",
        s(ours),
        s(base),
        s(ours) / s(base).max(1e-9)
    );
}

/// Bytes of the files under `p`, recursively (what cannot be read counts 0).
pub fn dir_size(p: &std::path::Path) -> u64 {
    let mut total = 0;
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            let Ok(m) = e.metadata() else { continue };
            if m.is_dir() {
                total += dir_size(&e.path());
            } else {
                total += m.len();
            }
        }
    }
    total
}

/// A field of `/proc/self/status` in kB (`VmHWM`, `RssAnon`, `RssFile`, ...), 0 if absent.
pub fn proc_status_kb(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.strip_prefix(field).is_some_and(|r| r.starts_with(':')))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// The memory of this bench process after its suites: the peak RSS and the resident memory
/// now, split into anonymous (heap, caches) and file-backed (mapped files), so every suite's
/// report carries its memory beside its settings. Suites that start node processes (servers,
/// workers) report those in their own tables; this is the bench process alone, and with
/// `all` it is the peak over every suite run.
pub fn memory_footer(suite: &str) {
    let mib = |kb: u64| kb as f64 / 1024.0;
    println!();
    println!(
        "bench process memory ({suite}): peak RSS (VmHWM) {:.0} MiB; resident at the end: anonymous {:.0} MiB, file-backed {:.0} MiB",
        mib(proc_status_kb("VmHWM")),
        mib(proc_status_kb("RssAnon")),
        mib(proc_status_kb("RssFile")),
    );
}
