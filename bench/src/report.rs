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
