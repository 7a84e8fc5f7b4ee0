//! The cop-limiter (`[cop-limiter]`): back-pressure on `/coprocessor` while the worker's memory
//! is high, and per-keyspace response throughput.
//!
//! **Memory use** is `used / limit` ([`SystemMemory`]):
//! * when a cgroup v2 memory limit applies (`memory.max` of the process's cgroup or an
//!   ancestor, `"max"` = none) and `cop-limiter.memory-source` is `"auto"` (the default): the
//!   cgroup's `memory.current` minus its reclaimable `inactive_file` page cache (the working
//!   set, as the kubelet computes it) over that limit;
//! * else the process's resident set (`VmRSS` of `/proc/self/status`) over
//!   `cop-limiter.memory-limit`, or over the physical memory (`MemTotal` of `/proc/meminfo`)
//!   when that is 0.
//!
//! A reading that fails (no `/proc`) admits the request: the limiter fails open.
//!
//! **Admission** ([`CopLimiter::admit`]), after the body is read and decoded and before the
//! snapshot is rebuilt: while memory use is above `high-mem-ratio`, the request sleeps a
//! random duration drawn uniformly from [`wait-min-duration`, `wait-max-duration`] (random so
//! that waiting requests do not all come back at once) and reads memory again. When the next
//! sleep would end past the request's deadline it is rejected instead, and the worker answers
//! 503 (the server retries with backoff, then runs the request locally). The deadline is the
//! cop request's `context.deadline_ms` (Unix milliseconds) when set, else
//! [`DEFAULT_WAIT_BUDGET`] after arrival. A waiting request holds its body (at most
//! `worker.max-request-size`), nothing else.
//!
//! **Pacing**: a reading only shows the memory of requests that already allocated it; one
//! admitted a moment ago has not yet. So while any request is waiting, admissions are at
//! least `wait-min-duration` apart: when memory drops, one waiting request runs, and the next
//! one reads memory again only after the first had time to show (a request that finds low
//! memory but the pace not yet due sleeps another round). With nobody waiting there is no
//! pacing, and a quiet worker admits at once. Requests that arrive together at a quiet worker
//! are all admitted: the limiter protects a worker under sustained load, it is no
//! per-request memory quota.
//!
//! **Throughput** ([`KeyspaceThroughput`]): every 200 answer's encoded size is added, under the
//! request's `context.keyspace_id` (0 without context), to a one-second bucket; the window
//! holds the last `sample-ttl` seconds (whole seconds, rounded up). Per keyspace, the bytes in
//! the window divided by `sample-ttl` are exported as
//! `stratus_worker_keyspace_throughput_bytes_per_second{keyspace}` and shown at `GET /status`.
//! Memory stays bounded: at most one bucket per keyspace and second of the window, and a
//! keyspace whose buckets all expired is dropped (its gauge series too).
//!
//! **Running**: an admitted request counts as running ([`CopLimiter::start_running`]) until its
//! answer is built (or its client goes away); `GET /status` shows how many wait, how many run
//! now and the most that ever ran at once (`waiting`, `running`, `running_peak`): what the
//! limiter let through, whatever memory did meanwhile.
//!
//! Metrics: `stratus_worker_cop_limiter_throttled_rounds_total` (sleeps),
//! `stratus_worker_cop_limiter_rejections_total` (503s),
//! `stratus_worker_cop_limiter_wait_seconds` (the drawn duration of each sleep),
//! `stratus_worker_cop_limiter_memory_ratio` (the last reading).

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::config::{CopLimiterSection, MemorySourceKind};
use crate::metrics;

/// How long a request without a deadline may wait for memory: half the servers' default
/// `remote-coprocessor-timeout` (10s), so that the server gets the 503, and retries or runs
/// the request locally, before its own attempt times out.
pub const DEFAULT_WAIT_BUDGET: Duration = Duration::from_secs(5);

// -- memory ------------------------------------------------------------------------------

/// Where the limit of a [`MemoryUse`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitSource {
    /// A cgroup v2 `memory.max`; `used` is the cgroup's working set.
    Cgroup,
    /// `cop-limiter.memory-limit`; `used` is the resident set.
    Configured,
    /// The machine's `MemTotal`; `used` is the resident set.
    Physical,
}

impl LimitSource {
    pub fn as_str(self) -> &'static str {
        match self {
            LimitSource::Cgroup => "cgroup",
            LimitSource::Configured => "configured",
            LimitSource::Physical => "physical",
        }
    }
}

/// One memory reading, in bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemoryUse {
    pub used: u64,
    pub limit: u64,
    pub source: LimitSource,
}

impl MemoryUse {
    /// `used / limit` (a zero limit reads as full).
    pub fn ratio(&self) -> f64 {
        if self.limit == 0 {
            return f64::INFINITY;
        }
        self.used as f64 / self.limit as f64
    }
}

/// Reads memory use; `None` when it cannot be read (the limiter then admits).
pub trait MemorySource: Send + Sync {
    fn read(&self) -> Option<MemoryUse>;
}

/// Reads a whole file; `None` when it does not exist or cannot be read.
type ReadFile = Box<dyn Fn(&Path) -> Option<String> + Send + Sync>;

/// The worker's memory as the module docs define it, from `/proc` and `/sys/fs/cgroup`.
pub struct SystemMemory {
    configured_limit: u64,
    kind: MemorySourceKind,
    read_file: ReadFile,
}

impl SystemMemory {
    /// Reads the real files; `configured_limit` is `cop-limiter.memory-limit` (0 = physical),
    /// `kind` is `cop-limiter.memory-source`.
    pub fn new(configured_limit: u64, kind: MemorySourceKind) -> SystemMemory {
        SystemMemory::with_files(configured_limit, kind, |p| std::fs::read_to_string(p).ok())
    }

    /// Reads files through `read_file` (tests pass file contents by path).
    pub fn with_files(
        configured_limit: u64,
        kind: MemorySourceKind,
        read_file: impl Fn(&Path) -> Option<String> + Send + Sync + 'static,
    ) -> SystemMemory {
        SystemMemory {
            configured_limit,
            kind,
            read_file: Box::new(read_file),
        }
    }

    fn read(&self, path: impl AsRef<Path>) -> Option<String> {
        (self.read_file)(path.as_ref())
    }

    /// The tightest cgroup v2 limit over the process's cgroup and its ancestors, with the
    /// working set of the cgroup that sets it.
    fn cgroup(&self) -> Option<MemoryUse> {
        let cgroups = self.read("/proc/self/cgroup")?;
        let relative = parse_cgroup_v2_path(&cgroups)?;
        let root = Path::new("/sys/fs/cgroup");
        let mut dir = root.join(relative.trim_start_matches('/'));
        let mut tightest: Option<(u64, PathBuf)> = None;
        loop {
            if let Some(limit) = self
                .read(dir.join("memory.max"))
                .and_then(|t| parse_cgroup_max(&t))
                && tightest.as_ref().is_none_or(|(l, _)| limit < *l)
            {
                tightest = Some((limit, dir.clone()));
            }
            if dir == root || !dir.pop() {
                break;
            }
        }
        let (limit, dir) = tightest?;
        let current: u64 = self.read(dir.join("memory.current"))?.trim().parse().ok()?;
        let inactive_file = self
            .read(dir.join("memory.stat"))
            .and_then(|t| parse_key_value(&t, "inactive_file"))
            .unwrap_or(0);
        Some(MemoryUse {
            used: current.saturating_sub(inactive_file),
            limit,
            source: LimitSource::Cgroup,
        })
    }
}

impl MemorySource for SystemMemory {
    fn read(&self) -> Option<MemoryUse> {
        if self.kind == MemorySourceKind::Auto
            && let Some(cgroup) = self.cgroup()
        {
            return Some(cgroup);
        }
        let used = parse_kib_field(&self.read("/proc/self/status")?, "VmRSS:")?;
        let (limit, source) = if self.configured_limit > 0 {
            (self.configured_limit, LimitSource::Configured)
        } else {
            let total = parse_kib_field(&self.read("/proc/meminfo")?, "MemTotal:")?;
            (total, LimitSource::Physical)
        };
        Some(MemoryUse {
            used,
            limit,
            source,
        })
    }
}

/// The cgroup v2 path of `/proc/self/cgroup` (the `0::PATH` line).
fn parse_cgroup_v2_path(text: &str) -> Option<&str> {
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(str::trim)
}

/// A `memory.max` value: bytes, or `None` for `max` (no limit) and anything unreadable.
fn parse_cgroup_max(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// `key value` lines (`memory.stat`): the value of `key`.
fn parse_key_value(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

/// A `Name:   1234 kB` line (`/proc/self/status`, `/proc/meminfo`): its value in bytes.
fn parse_kib_field(text: &str, name: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(name))?;
    let kib: u64 = line[name.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

// -- admission ---------------------------------------------------------------------------

/// The time source of [`CopLimiter::admit`]; tests pass one that records sleeps.
pub trait Clock: Send + Sync {
    fn now(&self) -> Instant;
    fn sleep(&self, d: Duration) -> impl Future<Output = ()> + Send;
}

/// Real time, tokio sleeps.
pub struct TokioClock;

impl Clock for TokioClock {
    /// tokio's clock (the same as the standard one, but in tests with paused time).
    fn now(&self) -> Instant {
        tokio::time::Instant::now().into_std()
    }
    fn sleep(&self, d: Duration) -> impl Future<Output = ()> + Send {
        tokio::time::sleep(d)
    }
}

/// What [`CopLimiter::admit`] decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Admission {
    /// Run the request, after `rounds` sleeps totalling `waited`.
    Admitted { rounds: u32, waited: Duration },
    /// Answer 503: memory stayed high (or, with `ratio` below the threshold, the pace of
    /// admissions was not due) until the next sleep would pass the deadline. `ratio` is the
    /// last reading.
    Rejected {
        rounds: u32,
        waited: Duration,
        ratio: f64,
    },
}

/// The deadline of a request whose `context.deadline_ms` is `deadline_ms` (0 = none), as an
/// instant: `now` plus what is left of it (nothing, once passed), or plus
/// [`DEFAULT_WAIT_BUDGET`] without one. `now_unix` is the wall clock at `now`.
pub fn deadline_of(deadline_ms: u64, now: Instant, now_unix: SystemTime) -> Instant {
    if deadline_ms == 0 {
        return now + DEFAULT_WAIT_BUDGET;
    }
    let deadline = UNIX_EPOCH + Duration::from_millis(deadline_ms);
    now + deadline.duration_since(now_unix).unwrap_or(Duration::ZERO)
}

/// Shared by every request (it lives in [`crate::WorkerState`]).
pub struct CopLimiter {
    high_mem_ratio: f64,
    wait_min: Duration,
    wait_max: Duration,
    memory: Box<dyn MemorySource>,
    rng: Mutex<XorShift64>,
    pacing: Mutex<Pacing>,
    throughput: Mutex<KeyspaceThroughput>,
    /// Admitted requests whose answer is not built yet, and the most there ever were.
    running: AtomicUsize,
    running_peak: AtomicUsize,
}

/// One admitted request, counted as running until dropped (see [`CopLimiter::start_running`]).
pub struct Running<'a> {
    running: &'a AtomicUsize,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.running.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Who is waiting, and when the last request was admitted (see "Pacing" in the module docs).
#[derive(Debug, Default)]
struct Pacing {
    waiting: usize,
    last_admitted: Option<Instant>,
}

/// One request's place among the waiting: counted from its first sleep until it is admitted,
/// rejected or dropped (a client that goes away drops the waiting future).
struct WaitingSlot<'a> {
    pacing: &'a Mutex<Pacing>,
    counted: bool,
}

impl WaitingSlot<'_> {
    fn lock(&self) -> std::sync::MutexGuard<'_, Pacing> {
        self.pacing.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Admits at `now` unless requests are waiting and the last admission is less than
    /// `pace` ago.
    fn try_admit(&mut self, now: Instant, pace: Duration) -> bool {
        let mut p = self.lock();
        let due = p.waiting == 0
            || p.last_admitted
                .is_none_or(|t| now.saturating_duration_since(t) >= pace);
        if due {
            p.last_admitted = Some(now);
        }
        due
    }

    fn count(&mut self) {
        if !self.counted {
            self.lock().waiting += 1;
            self.counted = true;
        }
    }
}

impl Drop for WaitingSlot<'_> {
    fn drop(&mut self) {
        if self.counted {
            self.lock().waiting -= 1;
        }
    }
}

impl CopLimiter {
    /// A limiter with `settings` (assumed valid) reading memory from `memory`; its throughput
    /// window starts at `epoch`.
    pub fn new(
        settings: &CopLimiterSection,
        memory: Box<dyn MemorySource>,
        epoch: Instant,
    ) -> CopLimiter {
        CopLimiter {
            high_mem_ratio: settings.high_mem_ratio,
            wait_min: settings.wait_min_duration.duration(),
            wait_max: settings.wait_max_duration.duration(),
            memory,
            rng: Mutex::new(XorShift64::from_entropy()),
            pacing: Mutex::new(Pacing::default()),
            throughput: Mutex::new(KeyspaceThroughput::new(
                settings.sample_ttl.duration(),
                epoch,
            )),
            running: AtomicUsize::new(0),
            running_peak: AtomicUsize::new(0),
        }
    }

    /// Counts an admitted request as running until the guard is dropped: the caller holds it
    /// from admission until the answer is built.
    pub fn start_running(&self) -> Running<'_> {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.running_peak.fetch_max(now, Ordering::SeqCst);
        Running {
            running: &self.running,
        }
    }

    /// Requests waiting for memory now (from their first sleep until admitted, rejected or
    /// dropped).
    pub fn waiting(&self) -> usize {
        self.pacing
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .waiting
    }

    /// (requests running now, the most that ran at once since the worker started).
    pub fn running(&self) -> (usize, usize) {
        (
            self.running.load(Ordering::SeqCst),
            self.running_peak.load(Ordering::SeqCst),
        )
    }

    /// Reads memory and records the ratio in the gauge.
    pub fn read_memory(&self) -> Option<MemoryUse> {
        let reading = self.memory.read();
        if let Some(m) = reading {
            metrics::COP_LIMITER_MEMORY_RATIO.set(m.ratio());
        }
        reading
    }

    /// Waits while memory use is above `high-mem-ratio` or the pace of admissions is not due
    /// (see the module docs), sleeping on `clock`, until the request may run or the next sleep
    /// would pass `deadline`.
    pub async fn admit(&self, clock: &impl Clock, deadline: Instant) -> Admission {
        let mut rounds = 0u32;
        let mut waited = Duration::ZERO;
        let mut slot = WaitingSlot {
            pacing: &self.pacing,
            counted: false,
        };
        loop {
            // No reading (no /proc): fail open, as if memory were low.
            let ratio = self.read_memory().map_or(0.0, |m| m.ratio());
            let now = clock.now();
            if ratio <= self.high_mem_ratio && slot.try_admit(now, self.wait_min) {
                return Admission::Admitted { rounds, waited };
            }
            let wait = self.draw_wait();
            if now + wait > deadline {
                metrics::COP_LIMITER_REJECTIONS.inc();
                return Admission::Rejected {
                    rounds,
                    waited,
                    ratio,
                };
            }
            slot.count();
            metrics::COP_LIMITER_THROTTLED_ROUNDS.inc();
            metrics::COP_LIMITER_WAIT_SECONDS.observe(wait.as_secs_f64());
            clock.sleep(wait).await;
            rounds += 1;
            waited += wait;
        }
    }

    /// A duration uniformly in [wait-min, wait-max] (microsecond steps).
    fn draw_wait(&self) -> Duration {
        let span = (self.wait_max - self.wait_min).as_micros() as u64;
        let r = self.rng.lock().unwrap_or_else(|e| e.into_inner()).next();
        self.wait_min + Duration::from_micros(r % (span + 1))
    }

    /// Records one answer of `bytes` for `keyspace` at `now`.
    pub fn record_response(&self, keyspace: u32, bytes: u64, now: Instant) {
        let mut t = self.throughput.lock().unwrap_or_else(|e| e.into_inner());
        t.record(keyspace, bytes, now);
        t.export(now);
    }

    /// Bytes per second per keyspace over the window ending at `now`; refreshes the gauges.
    pub fn throughput(&self, now: Instant) -> BTreeMap<u32, f64> {
        let mut t = self.throughput.lock().unwrap_or_else(|e| e.into_inner());
        t.export(now)
    }
}

/// xorshift64* (Vigna): enough to spread sleeps, no dependency.
struct XorShift64(u64);

impl XorShift64 {
    /// Seeded from the standard library's per-process random hash keys.
    fn from_entropy() -> XorShift64 {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(0x9e37_79b9_7f4a_7c15);
        XorShift64(h.finish() | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

// -- throughput --------------------------------------------------------------------------

/// Response bytes per keyspace over a sliding window of whole seconds (see the module docs).
///
/// A sample at `t` falls in second `s = floor(t - epoch)`; at `now` (second `n`) the window
/// holds the samples whose second `s` satisfies `n - ttl < s <= n`.
#[derive(Debug)]
pub struct KeyspaceThroughput {
    ttl_secs: u64,
    epoch: Instant,
    /// Per keyspace, (second, bytes) buckets in ascending seconds, none empty and none older
    /// than the window at the last call.
    buckets: HashMap<u32, VecDeque<(u64, u64)>>,
    /// Keyspaces with a gauge series, to remove the series once they leave the window.
    exported: BTreeSet<u32>,
}

impl KeyspaceThroughput {
    /// A window of `ttl` (rounded up to whole seconds, at least 1) starting at `epoch`.
    pub fn new(ttl: Duration, epoch: Instant) -> KeyspaceThroughput {
        let ttl_secs = ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0);
        KeyspaceThroughput {
            ttl_secs: ttl_secs.max(1),
            epoch,
            buckets: HashMap::new(),
            exported: BTreeSet::new(),
        }
    }

    /// The window length in seconds.
    pub fn ttl_secs(&self) -> u64 {
        self.ttl_secs
    }

    fn second(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.epoch).as_secs()
    }

    /// Adds `bytes` for `keyspace` at `now` (times must not go backwards).
    pub fn record(&mut self, keyspace: u32, bytes: u64, now: Instant) {
        let s = self.second(now);
        let q = self.buckets.entry(keyspace).or_default();
        match q.back_mut() {
            Some((last, sum)) if *last >= s => *sum += bytes,
            _ => q.push_back((s, bytes)),
        }
        self.prune(now);
    }

    /// Drops the buckets that left the window at `now`, and keyspaces left with none.
    fn prune(&mut self, now: Instant) {
        let n = self.second(now);
        let ttl = self.ttl_secs;
        self.buckets.retain(|_, q| {
            while q.front().is_some_and(|(s, _)| s + ttl <= n) {
                q.pop_front();
            }
            !q.is_empty()
        });
    }

    /// Bytes in the window ending at `now`, per keyspace with any.
    pub fn window_bytes(&mut self, now: Instant) -> BTreeMap<u32, u64> {
        self.prune(now);
        self.buckets
            .iter()
            .map(|(k, q)| (*k, q.iter().map(|(_, b)| b).sum()))
            .collect()
    }

    /// Bytes per second (window bytes / ttl) per keyspace, also set in the gauges (series of
    /// keyspaces that left the window are removed).
    pub fn export(&mut self, now: Instant) -> BTreeMap<u32, f64> {
        let ttl = self.ttl_secs as f64;
        let rates: BTreeMap<u32, f64> = self
            .window_bytes(now)
            .into_iter()
            .map(|(k, b)| (k, b as f64 / ttl))
            .collect();
        let gauge = &*metrics::KEYSPACE_THROUGHPUT;
        for gone in self.exported.iter().filter(|k| !rates.contains_key(k)) {
            let _ = gauge.remove_label_values(&[&gone.to_string()]);
        }
        for (k, rate) in &rates {
            gauge.with_label_values(&[&k.to_string()]).set(*rate);
        }
        self.exported = rates.keys().copied().collect();
        rates
    }

    /// Buckets held (for tests of the memory bound).
    pub fn bucket_count(&self) -> usize {
        self.buckets.values().map(VecDeque::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    // -- memory ------------------------------------------------------------------------

    /// `SystemMemory` (`memory-source = "auto"`) over the given files (path → contents).
    fn memory_with(configured: u64, files: &[(&str, &str)]) -> SystemMemory {
        memory_of_kind(configured, MemorySourceKind::Auto, files)
    }

    fn memory_of_kind(
        configured: u64,
        kind: MemorySourceKind,
        files: &[(&str, &str)],
    ) -> SystemMemory {
        let files: HashMap<PathBuf, String> = files
            .iter()
            .map(|(p, c)| (PathBuf::from(p), c.to_string()))
            .collect();
        SystemMemory::with_files(configured, kind, move |p| files.get(p).cloned())
    }

    const STATUS: &str = "Name:\tstratus-worker\nVmHWM:\t  300000 kB\nVmRSS:\t  204800 kB\n";
    const MEMINFO: &str = "MemTotal:       2048000 kB\nMemFree:        1000 kB\n";

    #[test]
    fn without_a_cgroup_limit_the_resident_set_is_divided_by_the_configured_limit() {
        let m = memory_with(
            1 << 30,
            &[
                ("/proc/self/cgroup", "0::/\n"),
                ("/sys/fs/cgroup/memory.max", "max\n"),
                ("/proc/self/status", STATUS),
                ("/proc/meminfo", MEMINFO),
            ],
        );
        let r = MemorySource::read(&m).unwrap();
        assert_eq!(r.used, 204_800 * 1024);
        assert_eq!(r.limit, 1 << 30);
        assert_eq!(r.source, LimitSource::Configured);
        assert!((r.ratio() - 0.1953125).abs() < 1e-9, "{}", r.ratio());
    }

    #[test]
    fn without_any_limit_the_physical_memory_is_the_limit() {
        // cgroup v1 only: no `0::` line.
        let m = memory_with(
            0,
            &[
                ("/proc/self/cgroup", "4:memory:/x\n"),
                ("/proc/self/status", STATUS),
                ("/proc/meminfo", MEMINFO),
            ],
        );
        let r = MemorySource::read(&m).unwrap();
        assert_eq!(r.limit, 2_048_000 * 1024);
        assert_eq!(r.source, LimitSource::Physical);
        assert_eq!(r.used, 204_800 * 1024);
    }

    #[test]
    fn a_cgroup_limit_takes_precedence_with_its_working_set() {
        let m = memory_with(
            1 << 30,
            &[
                ("/proc/self/cgroup", "0::/kubepods/pod1/worker\n"),
                ("/sys/fs/cgroup/kubepods/pod1/worker/memory.max", "max\n"),
                ("/sys/fs/cgroup/kubepods/pod1/memory.max", "1000000\n"),
                ("/sys/fs/cgroup/kubepods/pod1/memory.current", "700000\n"),
                (
                    "/sys/fs/cgroup/kubepods/pod1/memory.stat",
                    "anon 500000\nfile 200000\ninactive_file 100000\n",
                ),
                ("/sys/fs/cgroup/kubepods/memory.max", "4000000\n"),
                ("/sys/fs/cgroup/memory.max", "max\n"),
                ("/proc/self/status", STATUS),
                ("/proc/meminfo", MEMINFO),
            ],
        );
        let r = MemorySource::read(&m).unwrap();
        assert_eq!(r.source, LimitSource::Cgroup);
        assert_eq!(r.limit, 1_000_000, "the tightest ancestor's limit");
        assert_eq!(r.used, 600_000, "current minus inactive_file");
        assert!((r.ratio() - 0.6).abs() < 1e-9);
    }

    #[test]
    fn memory_source_process_ignores_a_cgroup_limit() {
        let files = [
            ("/proc/self/cgroup", "0::/worker\n"),
            ("/sys/fs/cgroup/worker/memory.max", "1000000\n"),
            ("/sys/fs/cgroup/worker/memory.current", "700000\n"),
            ("/proc/self/status", STATUS),
            ("/proc/meminfo", MEMINFO),
        ];
        let auto = MemorySource::read(&memory_with(1 << 30, &files)).unwrap();
        assert_eq!(auto.source, LimitSource::Cgroup);
        let process = memory_of_kind(1 << 30, MemorySourceKind::Process, &files);
        let r = MemorySource::read(&process).unwrap();
        assert_eq!(
            (r.used, r.limit, r.source),
            (204_800 * 1024, 1 << 30, LimitSource::Configured)
        );
        let physical = memory_of_kind(0, MemorySourceKind::Process, &files);
        let r = MemorySource::read(&physical).unwrap();
        assert_eq!(
            (r.limit, r.source),
            (2_048_000 * 1024, LimitSource::Physical)
        );
    }

    #[test]
    fn a_cgroup_at_the_namespace_root_is_read_there() {
        let m = memory_with(
            0,
            &[
                ("/proc/self/cgroup", "0::/\n"),
                ("/sys/fs/cgroup/memory.max", "2000\n"),
                ("/sys/fs/cgroup/memory.current", "1500\n"),
                ("/proc/self/status", STATUS),
                ("/proc/meminfo", MEMINFO),
            ],
        );
        let r = MemorySource::read(&m).unwrap();
        assert_eq!(
            (r.used, r.limit, r.source),
            (1500, 2000, LimitSource::Cgroup)
        );
    }

    #[test]
    fn unreadable_proc_files_give_no_reading() {
        assert_eq!(MemorySource::read(&memory_with(1 << 30, &[])), None);
        let m = memory_with(0, &[("/proc/self/status", STATUS)]);
        assert_eq!(
            MemorySource::read(&m),
            None,
            "no MemTotal and no configured limit"
        );
    }

    #[test]
    fn the_real_files_of_this_machine_give_a_plausible_reading() {
        let r = MemorySource::read(&SystemMemory::new(0, MemorySourceKind::Auto))
            .expect("a reading on Linux");
        assert!(r.used > 0 && r.limit > 0, "{r:?}");
        assert!(r.ratio() < 1.5, "{r:?}");
    }

    #[test]
    fn the_deadline_is_the_context_s_or_the_default_budget() {
        let now = Instant::now();
        let unix = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(deadline_of(0, now, unix), now + DEFAULT_WAIT_BUDGET);
        let in_2s = 1_700_000_002_000;
        assert_eq!(deadline_of(in_2s, now, unix), now + Duration::from_secs(2));
        assert_eq!(
            deadline_of(1_699_999_999_000, now, unix),
            now,
            "already passed"
        );
    }

    // -- admission ---------------------------------------------------------------------

    /// Memory above the ratio (0.9 of the limit) for the first `high_reads` readings, then
    /// 0.1.
    struct HighThenLow {
        high_reads: u32,
        reads: AtomicU32,
    }

    impl MemorySource for HighThenLow {
        fn read(&self) -> Option<MemoryUse> {
            let n = self.reads.fetch_add(1, Ordering::SeqCst);
            let used = if n < self.high_reads { 900 } else { 100 };
            Some(MemoryUse {
                used,
                limit: 1000,
                source: LimitSource::Configured,
            })
        }
    }

    /// Virtual time: `sleep` advances it at once and records the duration.
    struct FakeClock {
        now: Mutex<Instant>,
        sleeps: Mutex<Vec<Duration>>,
    }

    impl FakeClock {
        fn new() -> Arc<FakeClock> {
            Arc::new(FakeClock {
                now: Mutex::new(Instant::now()),
                sleeps: Mutex::new(Vec::new()),
            })
        }
        fn sleeps(&self) -> Vec<Duration> {
            self.sleeps.lock().unwrap().clone()
        }
    }

    impl Clock for FakeClock {
        fn now(&self) -> Instant {
            *self.now.lock().unwrap()
        }
        fn sleep(&self, d: Duration) -> impl Future<Output = ()> + Send {
            *self.now.lock().unwrap() += d;
            self.sleeps.lock().unwrap().push(d);
            std::future::ready(())
        }
    }

    fn settings(min_ms: u64, max_ms: u64) -> CopLimiterSection {
        CopLimiterSection {
            high_mem_ratio: 0.8,
            wait_min_duration: types::ReadableDuration::millis(min_ms),
            wait_max_duration: types::ReadableDuration::millis(max_ms),
            ..CopLimiterSection::default()
        }
    }

    fn limiter(high_reads: u32, min_ms: u64, max_ms: u64) -> CopLimiter {
        CopLimiter::new(
            &settings(min_ms, max_ms),
            Box::new(HighThenLow {
                high_reads,
                reads: AtomicU32::new(0),
            }),
            Instant::now(),
        )
    }

    /// Runs a future that never really waits (the fake clock's sleeps are ready at once).
    fn block_on<F: Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn memory_below_the_ratio_admits_at_once() {
        let clock = FakeClock::new();
        let l = limiter(0, 100, 3000);
        let got = block_on(l.admit(&*clock, clock.now() + Duration::from_secs(1)));
        assert_eq!(
            got,
            Admission::Admitted {
                rounds: 0,
                waited: Duration::ZERO
            }
        );
        assert!(clock.sleeps().is_empty());
    }

    #[test]
    fn high_memory_sleeps_one_round_per_high_reading_each_within_min_and_max() {
        for high_reads in [1, 3, 7] {
            let clock = FakeClock::new();
            let l = limiter(high_reads, 100, 3000);
            let got = block_on(l.admit(&*clock, clock.now() + Duration::from_secs(3600)));
            let sleeps = clock.sleeps();
            assert_eq!(sleeps.len(), high_reads as usize);
            for s in &sleeps {
                assert!(
                    (Duration::from_millis(100)..=Duration::from_secs(3)).contains(s),
                    "{s:?}"
                );
            }
            assert_eq!(
                got,
                Admission::Admitted {
                    rounds: high_reads,
                    waited: sleeps.iter().sum()
                }
            );
        }
    }

    #[test]
    fn sleeps_are_spread_over_the_whole_range() {
        let clock = FakeClock::new();
        let l = limiter(2000, 100, 300);
        block_on(l.admit(&*clock, clock.now() + Duration::from_secs(1_000_000)));
        let sleeps = clock.sleeps();
        assert_eq!(sleeps.len(), 2000);
        let below_150 = sleeps.iter().filter(|s| s.as_millis() < 150).count();
        let above_250 = sleeps.iter().filter(|s| s.as_millis() >= 250).count();
        // A quarter of the range each: about 500 of 2000.
        assert!((350..650).contains(&below_150), "{below_150}");
        assert!((350..650).contains(&above_250), "{above_250}");
        let min = sleeps.iter().min().unwrap();
        let max = sleeps.iter().max().unwrap();
        assert!(*min >= Duration::from_millis(100) && *max <= Duration::from_millis(300));
    }

    #[test]
    fn equal_min_and_max_sleep_exactly_that_long() {
        let clock = FakeClock::new();
        let l = limiter(4, 250, 250);
        block_on(l.admit(&*clock, clock.now() + Duration::from_secs(60)));
        assert_eq!(clock.sleeps(), vec![Duration::from_millis(250); 4]);
    }

    #[test]
    fn memory_that_stays_high_until_the_deadline_is_rejected_before_sleeping_past_it() {
        let clock = FakeClock::new();
        let start = clock.now();
        let deadline = start + Duration::from_secs(2);
        let l = limiter(u32::MAX, 100, 300);
        let got = block_on(l.admit(&*clock, deadline));
        let Admission::Rejected {
            rounds,
            waited,
            ratio,
        } = got
        else {
            panic!("expected a rejection, found {got:?}");
        };
        assert!((ratio - 0.9).abs() < 1e-9);
        assert_eq!(rounds as usize, clock.sleeps().len());
        assert!(rounds >= 6, "2s of sleeps of at most 300ms: {rounds}");
        assert!(clock.now() <= deadline, "never slept past the deadline");
        assert!(
            deadline - clock.now() < Duration::from_millis(300),
            "gave up only when the next sleep could not fit: {waited:?}"
        );
    }

    #[test]
    fn a_passed_deadline_rejects_high_memory_at_once_but_admits_low_memory() {
        let clock = FakeClock::new();
        let l = limiter(u32::MAX, 100, 300);
        let got = block_on(l.admit(&*clock, clock.now()));
        assert!(
            matches!(got, Admission::Rejected { rounds: 0, .. }),
            "{got:?}"
        );
        let l = limiter(0, 100, 300);
        let got = block_on(l.admit(&*clock, clock.now()));
        assert!(
            matches!(got, Admission::Admitted { rounds: 0, .. }),
            "{got:?}"
        );
    }

    #[test]
    fn an_unreadable_memory_source_admits() {
        struct Unreadable;
        impl MemorySource for Unreadable {
            fn read(&self) -> Option<MemoryUse> {
                None
            }
        }
        let clock = FakeClock::new();
        let l = CopLimiter::new(&settings(100, 300), Box::new(Unreadable), Instant::now());
        let got = block_on(l.admit(&*clock, clock.now()));
        assert!(matches!(got, Admission::Admitted { rounds: 0, .. }));
    }

    /// Memory high or low as the test says.
    struct Switch(std::sync::atomic::AtomicBool);

    impl MemorySource for Arc<Switch> {
        fn read(&self) -> Option<MemoryUse> {
            let high = self.0.load(Ordering::SeqCst);
            Some(MemoryUse {
                used: if high { 900 } else { 100 },
                limit: 1000,
                source: LimitSource::Configured,
            })
        }
    }

    #[tokio::test(start_paused = true)]
    async fn once_memory_drops_waiting_requests_are_admitted_at_least_wait_min_apart() {
        let memory = Arc::new(Switch(true.into()));
        let limiter = Arc::new(CopLimiter::new(
            &settings(100, 300),
            Box::new(memory.clone()),
            Instant::now(),
        ));
        let admitted = Arc::new(Mutex::new(Vec::new()));
        let tasks: Vec<_> = (0..6)
            .map(|_| {
                let (limiter, admitted) = (limiter.clone(), admitted.clone());
                tokio::spawn(async move {
                    let deadline = TokioClock.now() + Duration::from_secs(60);
                    let got = limiter.admit(&TokioClock, deadline).await;
                    admitted.lock().unwrap().push(TokioClock.now());
                    got
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(admitted.lock().unwrap().is_empty(), "memory is high");
        assert_eq!(limiter.pacing.lock().unwrap().waiting, 6);
        memory.0.store(false, Ordering::SeqCst);
        for t in tasks {
            let got = t.await.unwrap();
            assert!(
                matches!(got, Admission::Admitted { rounds, .. } if rounds > 0),
                "{got:?}"
            );
        }
        let mut times = admitted.lock().unwrap().clone();
        times.sort();
        for pair in times.windows(2) {
            assert!(
                pair[1] - pair[0] >= Duration::from_millis(100),
                "admissions {:?} apart",
                pair[1] - pair[0]
            );
        }
        assert_eq!(limiter.pacing.lock().unwrap().waiting, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn with_nobody_waiting_low_memory_admits_back_to_back() {
        let limiter = limiter(0, 100, 300);
        let start = TokioClock.now();
        for _ in 0..5 {
            let got = limiter
                .admit(&TokioClock, start + Duration::from_secs(1))
                .await;
            assert!(
                matches!(got, Admission::Admitted { rounds: 0, .. }),
                "{got:?}"
            );
        }
        assert_eq!(TokioClock.now(), start, "no pacing without waiters");
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_waiting_request_leaves_the_waiting_count() {
        let memory = Arc::new(Switch(true.into()));
        let limiter = Arc::new(CopLimiter::new(
            &settings(100, 300),
            Box::new(memory.clone()),
            Instant::now(),
        ));
        let waiting = {
            let limiter = limiter.clone();
            tokio::spawn(async move {
                limiter
                    .admit(&TokioClock, TokioClock.now() + Duration::from_secs(60))
                    .await
            })
        };
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(limiter.pacing.lock().unwrap().waiting, 1);
        waiting.abort();
        let _ = waiting.await;
        assert_eq!(limiter.pacing.lock().unwrap().waiting, 0);
        // Nobody waits any more: a new request finds low memory and runs at once.
        memory.0.store(false, Ordering::SeqCst);
        let got = limiter
            .admit(&TokioClock, TokioClock.now() + Duration::from_secs(1))
            .await;
        assert!(
            matches!(got, Admission::Admitted { rounds: 0, .. }),
            "{got:?}"
        );
    }

    #[test]
    fn running_counts_admitted_requests_until_dropped_and_keeps_the_peak() {
        let l = limiter(0, 100, 300);
        assert_eq!(l.running(), (0, 0));
        let a = l.start_running();
        let b = l.start_running();
        assert_eq!(l.running(), (2, 2));
        drop(a);
        assert_eq!(l.running(), (1, 2));
        let c = l.start_running();
        assert_eq!(l.running(), (2, 2));
        drop((b, c));
        assert_eq!(l.running(), (0, 2), "the peak stays");
    }

    // -- throughput --------------------------------------------------------------------

    #[test]
    fn throughput_is_window_bytes_over_the_ttl_and_expires() {
        let epoch = Instant::now();
        let at = |ms: u64| epoch + Duration::from_millis(ms);
        let mut t = KeyspaceThroughput::new(Duration::from_secs(10), epoch);
        t.record(1, 1000, at(0));
        t.record(1, 500, at(900));
        t.record(2, 4000, at(5_500));
        assert_eq!(
            t.window_bytes(at(9_999)),
            BTreeMap::from([(1, 1500), (2, 4000)])
        );
        let rates = t.export(at(9_999));
        assert_eq!(rates, BTreeMap::from([(1, 150.0), (2, 400.0)]));
        // Second 0 leaves the window at second 10.
        assert_eq!(t.window_bytes(at(10_000)), BTreeMap::from([(2, 4000)]));
        assert_eq!(t.window_bytes(at(16_000)), BTreeMap::new());
        assert_eq!(t.bucket_count(), 0, "expired keyspaces are dropped");
    }

    #[test]
    fn a_fractional_ttl_rounds_up_to_whole_seconds() {
        let t = KeyspaceThroughput::new(Duration::from_millis(1500), Instant::now());
        assert_eq!(t.ttl_secs(), 2);
        let t = KeyspaceThroughput::new(Duration::from_millis(10), Instant::now());
        assert_eq!(t.ttl_secs(), 1);
    }

    #[derive(Debug, Clone)]
    enum Op {
        /// Advance the clock by `ms`, then record `bytes` for `keyspace`.
        Record { ms: u64, keyspace: u32, bytes: u64 },
        /// Advance the clock by `ms`, then compare the window with the model.
        Check { ms: u64 },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0..1500u64, 0..4u32, 0..10_000u64)
                .prop_map(|(ms, keyspace, bytes)| Op::Record { ms, keyspace, bytes }),
            1 => (0..4000u64).prop_map(|ms| Op::Check { ms }),
        ]
    }

    proptest! {
        /// The window equals a brute-force sum over every sample ever recorded whose second
        /// is among the last ttl seconds, and holds at most ttl buckets per keyspace.
        #[test]
        fn the_window_matches_a_brute_force_sum_of_recent_samples(
            ttl_secs in 1..8u64,
            ops in proptest::collection::vec(op(), 1..200),
        ) {
            let epoch = Instant::now();
            let mut t = KeyspaceThroughput::new(Duration::from_secs(ttl_secs), epoch);
            let mut samples: Vec<(u64, u32, u64)> = Vec::new();
            let mut now_ms = 0u64;
            for op in ops {
                let ms = match op {
                    Op::Record { ms, .. } | Op::Check { ms } => ms,
                };
                now_ms += ms;
                let now = epoch + Duration::from_millis(now_ms);
                if let Op::Record { keyspace, bytes, .. } = op {
                    t.record(keyspace, bytes, now);
                    samples.push((now_ms, keyspace, bytes));
                }
                let n = now_ms / 1000;
                let mut want: BTreeMap<u32, u64> = BTreeMap::new();
                for &(at, k, b) in &samples {
                    if at / 1000 + ttl_secs > n {
                        *want.entry(k).or_default() += b;
                    }
                }
                let live: BTreeSet<u32> = samples
                    .iter()
                    .filter(|(at, _, _)| at / 1000 + ttl_secs > n)
                    .map(|(_, k, _)| *k)
                    .collect();
                let got = t.window_bytes(now);
                prop_assert_eq!(got.keys().copied().collect::<BTreeSet<_>>(), live);
                prop_assert_eq!(got, want);
                prop_assert!(t.bucket_count() <= 4 * ttl_secs as usize);
            }
        }
    }
}
