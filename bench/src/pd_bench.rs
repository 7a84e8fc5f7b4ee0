//! The placement driver (issue 17): release `stratus-pd` processes on 127.0.0.1
//! (`e2e::pd_proc`), a real etcd from `harness::etcd` (one member, 50 ms heartbeat, 500 ms
//! election timeout: its minimum lease is 1 s).
//!
//! * **TSO throughput**: 1 and 8 client threads, each calling `get_ts()` in a loop on one
//!   shared `node::PdClient` (which batches concurrent callers into one `POST /tso`), for
//!   `RUN` after `WARMUP`, against one `stratus-pd` on its embedded store and one on a
//!   one-member etcd (the pd's default lease and window). Baseline, same run: an
//!   in-process `AtomicU64::fetch_add` on one shared counter (the loop's own count) driven by
//!   the same number of threads for the same time.
//!   The mean batch (timestamps per request) is read from the pd's `/metrics`.
//! * **Failover**: three `stratus-pd` instances on the one-member etcd, with `lease-ttl` and
//!   `tso-window` both 1 s (the harness etcd's minimum lease), then at the shipped defaults
//!   (issue 17's target, p99 under 3 s, is for the default lease). `KILLS` times each: SIGKILL
//!   the leader, time until a client of all three instances gets its first timestamp, restart
//!   the killed one, wait until all three agree on a leader. Beside it, the time until a
//!   surviving instance says it leads (asked every 5 ms while the client retries): the election
//!   alone, without the client's retry pauses (20 ms doubling to 200 ms). The baseline is the
//!   lease TTL: a dead leader's lease must expire before another instance can be elected, so no
//!   failover is much shorter (its last renewal came up to a third of the TTL and a tick before
//!   the kill: the 3 s lease's failovers went down to 0.98 of it). Every timestamp the client
//!   got is checked to be strictly greater than the one before, across all the failovers; the
//!   suite panics when one is not.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use e2e::pd_proc::{PdProc, PdSetup, wait_for_leader};
use harness::etcd::EtcdCluster;
use harness::metrics::Metrics;
use node::PdClient;
use pd::config::PdSection;
use prost::Message;
use types::ReadableDuration;
use wire::pd::MembersResponse;

use crate::report::{latency_row, percentile, rate, row, table_header};

const WARMUP: Duration = Duration::from_millis(500);
const RUN: Duration = Duration::from_secs(3);
const THREADS: [usize; 2] = [1, 8];
const KILLS: usize = 20;
/// The failover clusters' leases (and TSO windows): the harness etcd's minimum lease, then the
/// pd's default (`PdSection::default().lease_ttl`).
fn lease_ttls() -> [Duration; 2] {
    [
        Duration::from_secs(1),
        PdSection::default().lease_ttl.duration(),
    ]
}
/// Issue 17's target for the failover's p99.
const TARGET: Duration = Duration::from_secs(3);
/// One client call's budget, retries included.
const CLIENT_DEADLINE: Duration = Duration::from_secs(15);
const LEADER_TIMEOUT: Duration = Duration::from_secs(30);

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("cannot build the client runtime: {e}"))
}

/// Runs `op` in a loop on `threads` threads for `WARMUP + RUN`; the operations per second over
/// `RUN`, and what `probe` returned at the start and at the end of `RUN`.
fn drive<T>(
    threads: usize,
    op: impl Fn() + Send + Sync + 'static,
    mut probe: impl FnMut() -> T,
) -> (f64, T, T) {
    let op = Arc::new(op);
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (op, stop, done) = (op.clone(), stop.clone(), done.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    op();
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    std::thread::sleep(WARMUP);
    let (t0, n0, p0) = (Instant::now(), done.load(Ordering::Relaxed), probe());
    std::thread::sleep(RUN);
    let (n1, p1, elapsed) = (done.load(Ordering::Relaxed), probe(), t0.elapsed());
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        if let Err(e) = h.join() {
            std::panic::resume_unwind(e);
        }
    }
    (rate((n1 - n0) as f64, elapsed), p0, p1)
}

/// `(timestamps handed out, successful TSO requests)` from the instance's `/metrics`.
fn tso_counters(pd: &PdProc) -> (f64, f64) {
    let text = pd.metrics_text();
    let m = Metrics::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", pd.name()));
    let get = |name: &str, labels: &[(&str, &str)]| {
        m.sum(name, labels)
            .unwrap_or_else(|e| panic!("{}: {e}", pd.name()))
    };
    (
        get("stratus_pd_timestamps_total", &[]),
        get(
            "stratus_pd_requests_total",
            &[("kind", "tso"), ("result", "ok")],
        ),
    )
}

/// Timestamps per second from `threads` threads sharing one client of `pd`, and the mean
/// number of timestamps per request the pd saw meanwhile.
fn tso_rate(pd: &PdProc, threads: usize) -> (f64, f64) {
    let rt = runtime();
    let client = PdClient::new(&[pd.base_url().to_string()], CLIENT_DEADLINE);
    let handle = rt.handle().clone();
    let op = move || {
        // Each caller's timestamps increase: every call's request is sent after it began.
        thread_local!(static LAST: std::cell::Cell<u64> = const { std::cell::Cell::new(0) });
        let ts = handle
            .block_on(client.get_ts())
            .unwrap_or_else(|e| panic!("get_ts: {e}"));
        LAST.with(|last| {
            assert!(ts > last.get(), "a caller got {ts} after {}", last.get());
            last.set(ts);
        });
    };
    let (per_sec, (ts0, req0), (ts1, req1)) = drive(threads, op, || tso_counters(pd));
    (per_sec, (ts1 - ts0) / (req1 - req0).max(1.0))
}

/// The pd's own defaults for lease and window (what a deployment runs).
fn with_defaults(mut setup: PdSetup) -> PdSetup {
    let d = PdSection::default();
    setup.pd.lease_ttl = d.lease_ttl;
    setup.pd.tso_window = d.tso_window;
    setup
}

fn throughput(dir: &std::path::Path) {
    // The loop's own shared counter is the baseline's oracle: one `fetch_add` per timestamp.
    let baselines: Vec<f64> = THREADS
        .iter()
        .map(|&threads| drive(threads, || {}, || ()).0)
        .collect();

    let embedded = PdProc::start(&with_defaults(PdSetup::new(
        &dir.join("pd-embedded"),
        "pd-embedded",
        0,
        &[],
    )));
    let etcd = EtcdCluster::start(&dir.join("etcd-tso"), 1)
        .unwrap_or_else(|e| panic!("cannot start etcd: {e}"));
    let on_etcd = PdProc::start(&with_defaults(PdSetup::new(
        &dir.join("pd-etcd"),
        "pd-etcd",
        0,
        &etcd.endpoints(),
    )));
    let mut rows = Vec::new();
    for (store, pd) in [("embedded store", &embedded), ("1-member etcd", &on_etcd)] {
        wait_for_leader(&[pd], LEADER_TIMEOUT);
        for (i, &threads) in THREADS.iter().enumerate() {
            let (per_sec, batch) = tso_rate(pd, threads);
            eprintln!(
                "tso, {store}, {}: {per_sec:.0}/s, mean batch {batch:.2}",
                threads_label(threads)
            );
            rows.push((store, threads, per_sec, batch, baselines[i]));
        }
    }
    table_header(&format!(
        "TSO throughput (one release stratus-pd on 127.0.0.1, default lease {:?} and window {:?}; threads calling get_ts() on one shared PdClient; {} s after {} ms warm-up)",
        PdSection::default().lease_ttl.duration(),
        PdSection::default().tso_window.duration(),
        RUN.as_secs(),
        WARMUP.as_millis()
    ));
    for (store, threads, per_sec, batch, base) in &rows {
        let threads = threads_label(*threads);
        row(
            &format!("get_ts, {store}, {threads}, mean batch {batch:.2}"),
            "ts/s",
            *per_sec,
            &format!("AtomicU64::fetch_add, {threads}"),
            *base,
        );
    }
}

fn threads_label(n: usize) -> String {
    if n == 1 {
        "1 thread".into()
    } else {
        format!("{n} threads")
    }
}

/// Checks that `ts` is above every timestamp before it; panics loudly when it is not.
fn push_increasing(seen: &mut Vec<u64>, ts: u64, when: &str) {
    if let Some(&prev) = seen.last() {
        assert!(
            ts > prev,
            "TIMESTAMP WENT BACKWARDS {when}: {ts} after {prev} ({} timestamps before it)",
            seen.len()
        );
    }
    seen.push(ts);
}

/// How often the survivors are asked who leads while a failover is timed.
const CLAIM_POLL: Duration = Duration::from_millis(5);

/// The time from `killed_at` until one of `survivors` says it leads (`GET /pd/members`: its
/// own URL is the leader's), asking every `CLAIM_POLL`. The instance names itself leader just
/// before it starts its TSO (one read and one write of the mark), so this is the election
/// alone, without the client's retry pauses.
fn first_claim(survivors: &[String], killed_at: Instant) -> Duration {
    loop {
        for url in survivors {
            if let Ok(reply) = harness::http::get(
                &format!("{url}{}", wire::paths::PD_MEMBERS),
                Duration::from_secs(1),
            ) && reply.status.is_success()
                && let Ok(m) = MembersResponse::decode(reply.body.as_ref())
                && !m.leader.is_empty()
                && m.leader == m.url
            {
                return killed_at.elapsed();
            }
        }
        assert!(
            killed_at.elapsed() < LEADER_TIMEOUT,
            "no survivor of {survivors:?} leads {LEADER_TIMEOUT:?} after the kill"
        );
        std::thread::sleep(CLAIM_POLL);
    }
}

fn failover(dir: &std::path::Path, lease_ttl: Duration) {
    let secs = lease_ttl.as_secs_f64();
    let dir = dir.join(format!("failover-{}ms", lease_ttl.as_millis()));
    let etcd = EtcdCluster::start(&dir.join("etcd"), 1)
        .unwrap_or_else(|e| panic!("cannot start etcd: {e}"));
    let ports = harness::ports::reserve(3).unwrap_or_else(|e| panic!("{e}"));
    let mut pds: Vec<PdProc> = ports
        .iter()
        .enumerate()
        .map(|(i, &port)| {
            let mut setup = PdSetup::new(
                &dir.join(format!("pd-{i}")),
                &format!("pd-{i}"),
                port,
                &etcd.endpoints(),
            );
            setup.pd.lease_ttl = ReadableDuration(lease_ttl);
            setup.pd.tso_window = ReadableDuration(lease_ttl);
            PdProc::start(&setup)
        })
        .collect();
    let endpoints: Vec<String> = pds.iter().map(|p| p.base_url().to_string()).collect();
    let rt = runtime();
    let client = PdClient::new(&endpoints, CLIENT_DEADLINE);
    let get_ts = |when: &str| {
        rt.block_on(client.get_ts())
            .unwrap_or_else(|e| panic!("get_ts {when}: {e}"))
    };
    let mut seen = Vec::new();
    let mut took = Vec::new();
    let mut claims = Vec::new();
    for round in 0..KILLS {
        let leader = wait_for_leader(&pds.iter().collect::<Vec<_>>(), LEADER_TIMEOUT);
        let idx = pds
            .iter()
            .position(|p| p.base_url() == leader)
            .unwrap_or_else(|| panic!("leader {leader} is none of {endpoints:?}"));
        // The client knows the leader it is about to lose, as a busy client would.
        push_increasing(
            &mut seen,
            get_ts("before a kill"),
            &format!("before kill {round}"),
        );
        let survivors: Vec<String> = endpoints
            .iter()
            .filter(|e| **e != leader)
            .cloned()
            .collect();
        let killed_at = Instant::now();
        pds[idx].kill();
        let (ts, t, elected) = std::thread::scope(|s| {
            let watcher = s.spawn(|| first_claim(&survivors, killed_at));
            let ts = get_ts("after a kill");
            let t = killed_at.elapsed();
            let elected = watcher
                .join()
                .unwrap_or_else(|e| std::panic::resume_unwind(e));
            (ts, t, elected)
        });
        push_increasing(&mut seen, ts, &format!("after kill {round}"));
        took.push(t);
        claims.push(elected);
        eprintln!(
            "lease {secs} s, kill {round}: {} killed, a survivor leads after {elected:?}, the client's first timestamp after {t:?}",
            pds[idx].name()
        );
        pds[idx].restart();
    }
    wait_for_leader(&pds.iter().collect::<Vec<_>>(), LEADER_TIMEOUT);
    push_increasing(&mut seen, get_ts("at the end"), "at the end");
    drop(etcd);

    let mut sorted = took.clone();
    sorted.sort_unstable();
    table_header(&format!(
        "placement-leader failover (3 release stratus-pd on a 1-member etcd, lease-ttl {secs} s, tso-window {secs} s; {KILLS} SIGKILLs of the leader; baseline: the lease TTL, the floor)"
    ));
    let p99 = percentile(&sorted, 0.99);
    for (name, d) in [
        (
            "min".to_string(),
            sorted.first().copied().unwrap_or_default(),
        ),
        ("p50".to_string(), percentile(&sorted, 0.5)),
        (format!("p99 (= max: {KILLS} samples)"), p99),
    ] {
        latency_row(
            &format!("kill to the client's first timestamp, {name}"),
            d,
            "lease TTL",
            lease_ttl,
        );
    }
    claims.sort_unstable();
    for (name, d) in [
        ("p50".to_string(), percentile(&claims, 0.5)),
        (
            format!("p99 (= max: {KILLS} samples)"),
            percentile(&claims, 0.99),
        ),
    ] {
        latency_row(
            &format!(
                "kill to a surviving instance saying it leads (polled every {} ms), {name}",
                CLAIM_POLL.as_millis()
            ),
            d,
            "lease TTL",
            lease_ttl,
        );
    }
    let verdict = if p99 < TARGET { "met" } else { "NOT met" };
    println!(
        "\nlease {secs} s: target p99 < {} s: {verdict} (p99 {:.0} ms); samples, sorted (ms): {}",
        TARGET.as_secs(),
        p99.as_secs_f64() * 1e3,
        sorted
            .iter()
            .map(|d| format!("{:.0}", d.as_secs_f64() * 1e3))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "lease {secs} s: timestamps strictly increasing across all {KILLS} failovers: yes ({} fetched, each above the one before)",
        seen.len()
    );
}

pub fn run() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("cannot create a temp dir: {e}"));
    throughput(dir.path());
    for lease_ttl in lease_ttls() {
        failover(dir.path(), lease_ttl);
    }
}
