//! The offload decision of a real server, one reason at a time, each set up by exactly its
//! condition and read back from `tikv_coprocessor_remote_decision_total{result,reason}`:
//! * `num_ranges`, `blocks_size`, `long_query_blocks_size` (a start_ts 20 s in the past lowers
//!   the threshold by half), with load-aware routing off;
//! * `lazy_pattern_duration` (a pattern whose local runs were slow: memtable data the blocks
//!   estimate cannot see) and `lazy_pattern_blocks_size` (a pattern whose recent local runs —
//!   fallbacks from a failing worker — covered many blocks, now asked over a small range);
//! * under load-aware routing, with the CPU value injected through a `file:` source:
//!   `no_cpu_signal`, `cpu_idle`, `cpu_busy`, `load_aware_force_blocks_size`,
//!   `load_aware_force_num_ranges`.
//!
//! A request that is no candidate is never counted. In every phase the per-reason deltas must
//! equal what the test predicts from what it sent, and sum to the number of counted decisions.
//! A fresh server exports every valid (result, reason) series at 0, and every series of its
//! other closed label sets, so every read here is strict.
//!
//! Exact counts need a CPU state that cannot change during a phase. A state read from samples
//! a few hundred milliseconds apart can: a sampler thread scheduled late on a loaded machine
//! makes the sample stale (`no_cpu_signal`) or ends a busy hold (`cpu_idle`) between two
//! requests. So each CPU phase runs on a server started with the file already written, that
//! samples it at start and then once an hour: its state is fixed for the whole phase. That the
//! state follows the file while a server runs is a test of its own, which waits for each state
//! and counts nothing.

#![allow(clippy::unwrap_used)] // a test reports a failure by panicking

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use e2e::cluster::{Cluster, StoreKind};
use e2e::coprocessor::{location, request};
use e2e::fake_worker::FakeWorker;
use e2e::sample_table::SampleTable;
use e2e::server_proc::{ServerProc, ServerSetup};
use e2e::worker_proc::WorkerProc;
use server::metrics::{Answered, OffloadSection, SplitTrigger, TxnCommand, TxnOutcome};
use types::{ReadableDuration, ReadableSize, ZoneRelation};
use wire::coprocessor::KeyRange;
use wire::delegate::DelegateResult;
use wire::placement::{DecisionResult, FallbackCause, OffloadReason};

const T: SampleTable = SampleTable { id: 11 };
/// Another table: another pattern.
const OTHER: SampleTable = SampleTable { id: 12 };
const ROWS: i64 = 3000;

const DECISIONS: &str = "tikv_coprocessor_remote_decision_total";

/// Every label pair the counter carries: the counted reasons, each with its result.
fn series() -> Vec<(DecisionResult, OffloadReason)> {
    OffloadReason::decision_series().collect()
}

/// The counter's value per label pair, in [`series`] order. The server exports every pair
/// from its start, so a missing one fails the test.
fn counts(server: &ServerProc) -> Vec<f64> {
    series()
        .iter()
        .map(|(result, reason)| {
            server.metric(
                DECISIONS,
                &[("result", result.as_str()), ("reason", reason.as_str())],
            )
        })
        .collect()
}

/// Everything the counter holds, whatever the labels.
fn total(server: &ServerProc) -> f64 {
    server.metric(DECISIONS, &[])
}

/// Counts decisions between two snapshots and compares them with the test's prediction.
struct Tally {
    before: Vec<f64>,
    before_total: f64,
    expected: Vec<f64>,
}

impl Tally {
    fn start(server: &ServerProc) -> Tally {
        Tally {
            before: counts(server),
            before_total: total(server),
            expected: vec![0.0; series().len()],
        }
    }

    /// The test predicts one counted decision with `reason`.
    fn expect(&mut self, reason: OffloadReason) {
        let i = series()
            .iter()
            .position(|&(_, r)| r == reason)
            .unwrap_or_else(|| panic!("reason {reason} is not counted"));
        self.expected[i] += 1.0;
    }

    fn check(&self, server: &ServerProc) {
        let after = counts(server);
        let delta: Vec<f64> = after.iter().zip(&self.before).map(|(a, b)| a - b).collect();
        let named: Vec<_> = series()
            .into_iter()
            .zip(&delta)
            .filter(|(_, d)| **d != 0.0)
            .collect();
        assert_eq!(delta, self.expected, "per reason, got {named:?}");
        let predicted: f64 = self.expected.iter().sum();
        assert_eq!(
            total(server) - self.before_total,
            predicted,
            "the per-reason counts sum to the decisions the test predicted"
        );
    }
}

/// The `(labels, value)` of every series of `name` on the page, sorted.
fn all_series(server: &ServerProc, name: &str) -> Vec<(Vec<(String, String)>, f64)> {
    let mut out: Vec<_> = server
        .metrics()
        .matching(name, &[])
        .map(|s| {
            let mut labels = s.labels.clone();
            labels.sort();
            (labels, s.value)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Each label set of `want` at 0, sorted.
fn at_zero(
    want: impl IntoIterator<Item = Vec<(&'static str, &'static str)>>,
) -> Vec<(Vec<(String, String)>, f64)> {
    let mut out: Vec<_> = want
        .into_iter()
        .map(|labels| {
            let mut labels: Vec<(String, String)> = labels
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            labels.sort();
            (labels, 0.0)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn a_fresh_server_exports_exactly_the_valid_series_of_each_closed_label_set_at_zero() {
    let cluster = Cluster::new(StoreKind::Local);
    let worker = WorkerProc::start(&cluster.worker_config("worker"));
    let mut cfg = cluster.server_config("server");
    cfg.kvengine.remote_coprocessor_addr = worker.coprocessor_url();
    let server = ServerProc::start(&cfg);

    // Exactly the valid (result, reason) pairs: no local/cpu_busy, no uncounted reason.
    let decisions = all_series(&server, DECISIONS);
    assert_eq!(
        decisions,
        at_zero(
            OffloadReason::decision_series().map(|(result, reason)| vec![
                ("result", result.as_str()),
                ("reason", reason.as_str())
            ])
        )
    );
    assert_eq!(decisions.len(), 10);
    assert!(
        decisions.iter().all(
            |(labels, _)| labels.contains(&("result".into(), "local".into()))
                == labels.contains(&("reason".into(), "cpu_idle".into()))
        ),
        "only cpu_idle keeps a candidate local: {decisions:?}"
    );
    let one = |label: &'static str, values: Vec<&'static str>| {
        at_zero(values.into_iter().map(|v| vec![(label, v)]))
    };
    assert_eq!(
        all_series(&server, "stratus_server_coprocessor_requests_total"),
        one(
            "location",
            Answered::ALL.iter().map(|a| a.as_str()).collect()
        )
    );
    assert_eq!(
        all_series(&server, "stratus_server_offload_fallbacks_total"),
        one(
            "cause",
            FallbackCause::ALL.iter().map(|c| c.as_str()).collect()
        )
    );
    let relations: Vec<&str> = ZoneRelation::ALL.iter().map(|r| r.as_str()).collect();
    for name in [
        "stratus_server_offload_dispatches_total",
        "stratus_server_delegate_bytes_total",
    ] {
        assert_eq!(
            all_series(&server, name),
            one("zone_relation", relations.clone()),
            "{name}"
        );
    }
    assert_eq!(
        all_series(&server, "stratus_server_offload_section_bytes_total"),
        one(
            "section",
            OffloadSection::ALL.iter().map(|s| s.as_str()).collect()
        )
    );
    assert_eq!(
        all_series(&server, "stratus_server_delegate_requests_total"),
        one(
            "result",
            DelegateResult::ALL.iter().map(|r| r.as_str()).collect()
        )
    );
    assert_eq!(
        all_series(&server, "stratus_server_region_splits_total"),
        one(
            "trigger",
            SplitTrigger::ALL.iter().map(|t| t.as_str()).collect()
        )
    );
    // Transactions: every command with both outcomes (the server's start commits nothing).
    let txn = all_series(&server, "stratus_server_txn_requests_total");
    assert_eq!(
        txn.len(),
        TxnCommand::ALL.len() * TxnOutcome::ALL.len(),
        "{txn:?}"
    );
}

/// A timestamp `secs_ago` seconds in the past (physical ms << 18).
fn ts_ago(secs_ago: u64) -> u64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    (now - secs_ago * 1000) << 18
}

/// Sends `count(1), sum(v)` over `ranges` of `table`; where it ran.
fn send_to(server: &ServerProc, table: SampleTable, ranges: Vec<KeyRange>) -> String {
    send_at(server, table, ranges, server.tso())
}

fn send_at(server: &ServerProc, table: SampleTable, ranges: Vec<KeyRange>, ts: u64) -> String {
    let region = server.region_of(&table.key(0));
    let resp = server.coprocessor(&request(&table.count_sum_dag(), ranges, ts, &region));
    e2e::coprocessor::assert_answered(&resp, "decision request");
    location(&resp).to_string()
}

fn send(server: &ServerProc, ranges: Vec<KeyRange>) -> String {
    send_to(server, T, ranges)
}

/// `n` one-row ranges of `T`.
fn points(n: i64) -> Vec<KeyRange> {
    (0..n)
        .map(|i| KeyRange::new(T.key(i * 7), T.key(i * 7 + 1)))
        .collect()
}

/// The first half of `T`'s rows.
fn half() -> KeyRange {
    KeyRange::new(T.range().start, T.key(ROWS / 2))
}

/// Loads `T` into a server of `cfg` and flushes it; the table's blocks as the estimate sees
/// them.
fn load_and_measure(cfg: &ServerSetup) -> u64 {
    let mut server = ServerProc::start(cfg);
    T.load(&server, 0..ROWS, 64, |h| h);
    server.flush();
    let size = server.region_of(&T.key(0)).approximate_size;
    assert!(size > 10_000, "a table of many blocks: {size}");
    server.terminate();
    size
}

#[test]
fn size_count_and_age_reasons_are_counted_under_exactly_their_conditions() {
    let cluster = Cluster::new(StoreKind::Local);
    let worker = WorkerProc::start(&cluster.worker_config("worker"));
    let mut cfg = cluster.server_config("server");
    let size = load_and_measure(&cfg);

    // Threshold 1.5× the table: a fresh full scan stays local (not counted), one 20 s old
    // (threshold /2) goes remote; 8 ranges go remote by count, 7 small ones stay local.
    cfg.kvengine.remote_coprocessor_addr = worker.coprocessor_url();
    cfg.kvengine.remote_coprocessor_load_aware = false;
    cfg.kvengine.remote_coprocessor_min_blocks_size = ReadableSize(size * 3 / 2);
    cfg.kvengine.remote_coprocessor_num_ranges = 8;
    let mut server = ServerProc::start(&cfg);
    let mut tally = Tally::start(&server);
    assert_eq!(send(&server, vec![T.range()]), "local");
    assert_eq!(send_at(&server, T, vec![T.range()], ts_ago(20)), "remote");
    tally.expect(OffloadReason::LongQueryBlocksSize);
    assert_eq!(send(&server, points(8)), "remote");
    tally.expect(OffloadReason::NumRanges);
    assert_eq!(send(&server, points(7)), "local");
    tally.check(&server);
    server.terminate();

    // Threshold half the table: a fresh full scan goes remote by blocks size.
    cfg.kvengine.remote_coprocessor_min_blocks_size = ReadableSize(size / 2);
    let server = ServerProc::start(&cfg);
    let mut tally = Tally::start(&server);
    assert_eq!(send(&server, vec![T.range()]), "remote");
    tally.expect(OffloadReason::BlocksSize);
    tally.check(&server);
}

#[test]
fn a_pattern_slow_in_its_local_runs_goes_remote() {
    let cluster = Cluster::new(StoreKind::Local);
    let worker = WorkerProc::start(&cluster.worker_config("worker"));
    let mut cfg = cluster.server_config("server");
    cfg.kvengine.remote_coprocessor_addr = worker.coprocessor_url();
    cfg.kvengine.remote_coprocessor_load_aware = false;
    cfg.kvengine.remote_coprocessor_min_blocks_size = ReadableSize::gib(1);
    // Any local run of a few thousand rows takes this long.
    cfg.kvengine.remote_coprocessor_lazy_pattern_duration = ReadableDuration::millis(1);
    let server = ServerProc::start(&cfg);
    // In the memtable only: the blocks estimate sees nothing, the runs still cost.
    T.load(&server, 0..ROWS, 64, |h| h);
    OTHER.load(&server, 0..ROWS, 64, |h| h);
    let mut tally = Tally::start(&server);
    assert_eq!(send(&server, vec![T.range()]), "local", "first run");
    assert_eq!(send(&server, vec![T.range()]), "local", "second run");
    assert_eq!(
        send_to(&server, OTHER, vec![OTHER.range()]),
        "local",
        "another pattern has its own history"
    );
    // Two recorded runs: the pattern goes remote, now over any range of the table.
    assert_eq!(send(&server, vec![half()]), "remote");
    tally.expect(OffloadReason::LazyPatternDuration);
    assert_eq!(send(&server, points(3)), "remote");
    tally.expect(OffloadReason::LazyPatternDuration);
    tally.check(&server);
}

#[test]
fn a_pattern_that_covered_many_blocks_locally_goes_remote_over_a_small_range() {
    let cluster = Cluster::new(StoreKind::Local);
    // A worker that always fails: every offload falls back to a local run, which the pattern
    // history records (it is what the pattern costs here).
    let failing = FakeWorker::start(500, b"worker exploded");
    let mut cfg = cluster.server_config("server");
    cfg.kvengine.block_size = ReadableSize::kib(1);
    let size = load_and_measure(&cfg);
    cfg.kvengine.remote_coprocessor_addr = failing.coprocessor_url();
    cfg.kvengine.remote_coprocessor_load_aware = false;
    cfg.kvengine.remote_coprocessor_lazy_pattern_duration = ReadableDuration::millis(0);
    cfg.kvengine.remote_coprocessor_min_blocks_size = ReadableSize(size / 2);
    let server = ServerProc::start(&cfg);
    let mut tally = Tally::start(&server);
    assert_eq!(
        send_to(&server, OTHER, vec![OTHER.range()]),
        "local",
        "no candidate"
    );
    for _ in 0..2 {
        assert_eq!(send(&server, vec![T.range()]), "fallback");
        tally.expect(OffloadReason::BlocksSize);
    }
    // The same pattern over one row: its estimate is tiny, its recent runs were not.
    assert_eq!(send(&server, points(1)), "fallback");
    tally.expect(OffloadReason::LazyPatternBlocksSize);
    tally.check(&server);
    assert_eq!(
        failing.count(),
        3,
        "every remote decision reached the worker"
    );
}

/// The server's CPU state as `/status` reports it.
fn cpu_state(server: &ServerProc) -> String {
    let status: serde_json::Value = serde_json::from_str(&server.status_text()).unwrap();
    status["cpu"]["state"]
        .as_str()
        .unwrap_or_else(|| panic!("no CPU state in {status}"))
        .to_string()
}

/// Waits (generously) until `/status` reports `state`.
fn wait_for_cpu_state(server: &ServerProc, state: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let now = cpu_state(server);
        if now == state {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "CPU state never became {state}: {now}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Load-aware routing over `T` (loaded by [`load_and_measure`] with 4 KiB blocks, `size`
/// bytes): candidates from half the table (blocks_size) or 8 ranges (num_ranges), forced from
/// the whole table or 16 ranges; the CPU read from `cpu_file`, sampled every `interval`.
fn load_aware(
    cfg: &mut ServerSetup,
    worker: &WorkerProc,
    size: u64,
    cpu_file: &Path,
    interval: Duration,
) {
    let kv = &mut cfg.kvengine;
    kv.remote_coprocessor_addr = worker.coprocessor_url();
    kv.remote_coprocessor_min_blocks_size = ReadableSize(size / 4);
    kv.remote_coprocessor_load_aware_force_blocks_size = ReadableSize(size * 9 / 10);
    kv.remote_coprocessor_num_ranges = 8;
    kv.remote_coprocessor_load_aware_force_num_ranges = 16;
    kv.remote_coprocessor_load_aware_cpu_source = format!("file:{}", cpu_file.display());
    kv.remote_coprocessor_load_aware_sample_interval = ReadableDuration(interval);
    // A busy sample holds as long as a sample stays fresh (three intervals).
    kv.remote_coprocessor_load_aware_hold_time = ReadableDuration(interval * 3);
    // Local runs would make the pattern a lazy candidate; that has its own tests.
    kv.remote_coprocessor_lazy_pattern_duration = ReadableDuration::millis(0);
}

/// Sampled once at start, then once an hour: no state change during a test.
const FROZEN: Duration = Duration::from_secs(3600);

#[test]
fn load_aware_routing_follows_the_injected_cpu_signal_and_the_force_thresholds() {
    let cluster = Cluster::new(StoreKind::Local);
    let worker = WorkerProc::start(&cluster.worker_config("worker"));
    let mut cfg = cluster.server_config("server");
    // Small blocks: half the table estimates close to half its size.
    cfg.kvengine.block_size = ReadableSize::kib(4);
    let size = load_and_measure(&cfg);
    let cpu_file = cluster.path("cpu");
    load_aware(&mut cfg, &worker, size, &cpu_file, FROZEN);

    // Per CPU value in the file before the server starts (None: no file), the state the
    // server must settle in, and what a candidate then does. A garbled value is no sample.
    let phases: [(Option<&str>, &str, OffloadReason, &str); 4] = [
        (None, "NoSignal", OffloadReason::NoCpuSignal, "remote"),
        (Some("0.1"), "Idle", OffloadReason::CpuIdle, "local"),
        (Some("0.95"), "Busy", OffloadReason::CpuBusy, "remote"),
        (
            Some("garbage"),
            "NoSignal",
            OffloadReason::NoCpuSignal,
            "remote",
        ),
    ];
    for (value, state, cpu_reason, cpu_location) in phases {
        match value {
            Some(v) => std::fs::write(&cpu_file, v).unwrap(),
            None => {
                let _ = std::fs::remove_file(&cpu_file);
            }
        }
        let mut server = ServerProc::start(&cfg);
        // The sampler's first sample lands right after start: wait for it, not a time.
        wait_for_cpu_state(&server, state);
        let mut tally = Tally::start(&server);
        // A mixed workload: each kind of request, and one that is no candidate.
        assert_eq!(send(&server, vec![half()]), cpu_location, "{cpu_reason}");
        tally.expect(cpu_reason);
        assert_eq!(send(&server, points(8)), cpu_location, "{cpu_reason}");
        tally.expect(cpu_reason);
        assert_eq!(send(&server, vec![T.range()]), "remote");
        tally.expect(OffloadReason::LoadAwareForceBlocksSize);
        assert_eq!(send(&server, points(16)), "remote");
        tally.expect(OffloadReason::LoadAwareForceNumRanges);
        let empty = vec![OTHER.range()];
        assert_eq!(send_to(&server, OTHER, empty), "local", "no candidate");
        tally.check(&server);
        assert_eq!(
            cpu_state(&server),
            state,
            "the state held for the whole phase"
        );
        assert_eq!(server.terminate().code(), Some(0));
    }
}

#[test]
fn the_cpu_state_follows_the_injected_file_while_the_server_runs() {
    let cluster = Cluster::new(StoreKind::Local);
    let worker = WorkerProc::start(&cluster.worker_config("worker"));
    let mut cfg = cluster.server_config("server");
    let cpu_file = cluster.path("cpu");
    load_aware(
        &mut cfg,
        &worker,
        1 << 20,
        &cpu_file,
        Duration::from_millis(200),
    );
    let server = ServerProc::start(&cfg);
    assert_eq!(cpu_state(&server), "NoSignal", "no file yet");
    for (value, state) in [
        ("0.1", "Idle"),
        ("0.95", "Busy"),
        ("0.1", "Idle"),
        ("garbage", "NoSignal"),
        ("0.95", "Busy"),
    ] {
        std::fs::write(&cpu_file, value).unwrap();
        wait_for_cpu_state(&server, state);
    }
}
