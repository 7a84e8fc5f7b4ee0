//! The CPU signal of load-aware offload routing.
//!
//! A sampler thread measures this server's CPU use once per interval (default 1 s) as a
//! fraction of the machine's cores and hands it to a [`CpuMonitor`]. The monitor turns samples
//! into a [`CpuState`]:
//! * `NoSignal` when there is no sample younger than three intervals (the sampler failed or
//!   stalled): the policy then fails open and offloads;
//! * `Busy` when a sample reached the busy threshold within the last `hold` (a burst of load
//!   keeps offloading allowed for a while instead of flapping every second);
//! * `Idle` otherwise.
//!
//! Sources: `process` (the default) reads utime + stime of `/proc/self/stat` (in USER_HZ ticks,
//! 100 per second on Linux whatever the kernel's HZ); `file:<path>` reads a number in [0, 1]
//! from a file on every sample — an operator's override, and how tests inject a CPU value into
//! a real server without touching the decision code.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// What the policy sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuState {
    NoSignal,
    Busy,
    Idle,
}

/// Where samples come from (`remote-coprocessor-load-aware-cpu-source`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CpuSource {
    Process,
    File(PathBuf),
}

impl CpuSource {
    /// Parses `"process"` or `"file:<path>"`.
    pub fn parse(s: &str) -> Result<CpuSource, String> {
        match s {
            "process" => Ok(CpuSource::Process),
            _ => match s.strip_prefix("file:") {
                Some(p) if !p.is_empty() => Ok(CpuSource::File(PathBuf::from(p))),
                _ => Err(format!(
                    "expected \"process\" or \"file:<path>\", found {s:?}"
                )),
            },
        }
    }
}

/// Turns samples into a [`CpuState`]; pure apart from its own memory, so tests feed it samples
/// and instants.
pub struct CpuMonitor {
    busy_threshold: f64,
    hold: Duration,
    stale_after: Duration,
    state: Mutex<Samples>,
}

#[derive(Default)]
struct Samples {
    last: Option<(Instant, f64)>,
    last_busy: Option<Instant>,
}

impl CpuMonitor {
    /// `interval` is the sampling period: a sample older than three of them is stale.
    pub fn new(busy_threshold: f64, hold: Duration, interval: Duration) -> CpuMonitor {
        CpuMonitor {
            busy_threshold,
            hold,
            stale_after: interval * 3,
            state: Mutex::new(Samples::default()),
        }
    }

    /// Records a sample (`cpu` = used fraction of all cores) taken at `at`.
    pub fn observe(&self, cpu: f64, at: Instant) {
        let mut s = self.state.lock();
        s.last = Some((at, cpu));
        if cpu >= self.busy_threshold {
            s.last_busy = Some(at);
        }
    }

    /// The state at `now`.
    pub fn state(&self, now: Instant) -> CpuState {
        let s = self.state.lock();
        match s.last {
            None => CpuState::NoSignal,
            Some((at, _)) if now.saturating_duration_since(at) > self.stale_after => {
                CpuState::NoSignal
            }
            Some(_) => match s.last_busy {
                Some(b) if now.saturating_duration_since(b) <= self.hold => CpuState::Busy,
                _ => CpuState::Idle,
            },
        }
    }

    /// The last sample's value, if any (for `/status`).
    pub fn last_sample(&self) -> Option<f64> {
        self.state.lock().last.map(|(_, v)| v)
    }
}

/// The sampler thread; stops (and is joined) on drop.
pub struct CpuSampler {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl CpuSampler {
    /// Starts sampling `source` into `monitor` every `interval`.
    pub fn start(
        monitor: Arc<CpuMonitor>,
        source: CpuSource,
        interval: Duration,
    ) -> std::io::Result<CpuSampler> {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::Builder::new()
            .name("cpu-sampler".into())
            .spawn(move || {
                let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
                let mut prev: Option<(Instant, f64)> = None;
                while !stopped.load(Ordering::Relaxed) {
                    let now = Instant::now();
                    let sample = match &source {
                        CpuSource::File(path) => read_fraction(path),
                        CpuSource::Process => process_cpu_seconds().and_then(|cpu| {
                            let frac = prev.map(|(t, c)| {
                                let wall = now.duration_since(t).as_secs_f64();
                                if wall > 0.0 {
                                    (cpu - c) / wall / cores
                                } else {
                                    0.0
                                }
                            });
                            prev = Some((now, cpu));
                            frac
                        }),
                    };
                    if let Some(v) = sample {
                        monitor.observe(v, now);
                    }
                    // Sleep in short steps so a stop is prompt.
                    let until = now + interval;
                    while !stopped.load(Ordering::Relaxed) {
                        let left = until.saturating_duration_since(Instant::now());
                        if left.is_zero() {
                            break;
                        }
                        std::thread::sleep(left.min(Duration::from_millis(50)));
                    }
                }
            })?;
        Ok(CpuSampler {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for CpuSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A number in [0, 1] from `path` (whitespace ignored), or `None` when unreadable or out of
/// range (a bad override gives no signal rather than a wrong one).
fn read_fraction(path: &Path) -> Option<f64> {
    let text = std::fs::read_to_string(path).ok()?;
    parse_fraction(&text)
}

fn parse_fraction(text: &str) -> Option<f64> {
    let v: f64 = text.trim().parse().ok()?;
    (0.0..=1.0).contains(&v).then_some(v)
}

/// Seconds of CPU this process has used (user + system).
fn process_cpu_seconds() -> Option<f64> {
    parse_proc_stat_cpu(&std::fs::read_to_string("/proc/self/stat").ok()?)
}

/// Seconds of CPU process `pid` has used (user + system; benchmarks read a server's).
pub fn cpu_seconds_of(pid: u32) -> Option<f64> {
    parse_proc_stat_cpu(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// utime + stime (fields 14 and 15) of a `/proc/<pid>/stat` line, in seconds. The command
/// name (field 2) may hold spaces and parentheses, so fields are counted after its last `)`.
fn parse_proc_stat_cpu(stat: &str) -> Option<f64> {
    const USER_HZ: f64 = 100.0;
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    // `rest` starts at field 3 (state); utime is field 14.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some((utime + stime) as f64 / USER_HZ)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_sample_or_a_stale_one_is_no_signal() {
        let m = CpuMonitor::new(0.8, Duration::from_secs(5), Duration::from_secs(1));
        let t0 = Instant::now();
        assert_eq!(m.state(t0), CpuState::NoSignal);
        m.observe(0.1, t0);
        assert_eq!(m.state(t0 + Duration::from_secs(3)), CpuState::Idle);
        assert_eq!(
            m.state(t0 + Duration::from_millis(3001)),
            CpuState::NoSignal
        );
    }

    #[test]
    fn a_busy_sample_holds_for_the_hold_time() {
        let m = CpuMonitor::new(0.8, Duration::from_secs(5), Duration::from_secs(1));
        let t0 = Instant::now();
        m.observe(0.8, t0);
        assert_eq!(m.state(t0), CpuState::Busy);
        // Idle samples keep coming, but the burst holds the state.
        for s in 1..=5 {
            let t = t0 + Duration::from_secs(s);
            m.observe(0.1, t);
            assert_eq!(m.state(t), CpuState::Busy, "{s}s after the burst");
        }
        let t = t0 + Duration::from_millis(5001);
        m.observe(0.1, t);
        assert_eq!(m.state(t), CpuState::Idle);
    }

    #[test]
    fn sources_parse_and_reject_other_words() {
        assert_eq!(CpuSource::parse("process"), Ok(CpuSource::Process));
        assert_eq!(
            CpuSource::parse("file:/tmp/cpu"),
            Ok(CpuSource::File("/tmp/cpu".into()))
        );
        for bad in ["", "file:", "proc", "/tmp/cpu"] {
            assert!(CpuSource::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn fractions_outside_zero_to_one_are_no_sample() {
        assert_eq!(parse_fraction(" 0.5\n"), Some(0.5));
        assert_eq!(parse_fraction("1"), Some(1.0));
        assert_eq!(parse_fraction("1.5"), None);
        assert_eq!(parse_fraction("-0.1"), None);
        assert_eq!(parse_fraction("busy"), None);
    }

    #[test]
    fn proc_stat_cpu_counts_fields_after_the_command_name() {
        // pid (comm with ") (" inside) state ppid ... utime=250 stime=50 ...
        let line = "42 (a) (b c) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 1 0 100 0 0";
        assert_eq!(parse_proc_stat_cpu(line), Some(3.0));
        assert_eq!(parse_proc_stat_cpu("42 (x) S 1"), None);
    }

    #[test]
    fn the_process_source_measures_this_process() {
        let cpu = process_cpu_seconds().expect("/proc/self/stat readable");
        let t = Instant::now();
        let mut x = 0u64;
        while t.elapsed() < Duration::from_millis(300) {
            x = x.wrapping_mul(31).wrapping_add(1);
        }
        std::hint::black_box(x);
        let after = process_cpu_seconds().unwrap();
        assert!(after - cpu >= 0.1, "spent {} s of CPU", after - cpu);
    }

    #[test]
    fn the_sampler_feeds_the_monitor_from_a_file_and_stops_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cpu");
        std::fs::write(&path, "0.95").unwrap();
        let interval = Duration::from_millis(20);
        let m = Arc::new(CpuMonitor::new(0.8, Duration::ZERO, interval));
        let sampler =
            CpuSampler::start(m.clone(), CpuSource::File(path.clone()), interval).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while m.last_sample() != Some(0.95) {
            assert!(Instant::now() < deadline, "no sample from the file");
            std::thread::sleep(interval);
        }
        std::fs::write(&path, "0.1").unwrap();
        while m.last_sample() != Some(0.1) {
            assert!(Instant::now() < deadline, "the new value was not sampled");
            std::thread::sleep(interval);
        }
        drop(sampler);
        std::thread::sleep(interval * 4);
        assert_eq!(
            m.state(Instant::now()),
            CpuState::NoSignal,
            "sampling stopped"
        );
    }
}
