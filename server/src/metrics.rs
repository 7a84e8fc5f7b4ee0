//! The server's metrics (default prometheus registry, registered on first use). Label values
//! are closed sets, listed next to each metric.

use std::sync::LazyLock;

use prometheus::{Histogram, HistogramOpts, IntCounter, IntCounterVec, Opts};

fn counter_vec(name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let c = IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric");
    prometheus::register(Box::new(c.clone())).expect("metric registered once");
    c
}

fn counter(name: &str, help: &str) -> IntCounter {
    let c = IntCounter::new(name, help).expect("valid metric");
    prometheus::register(Box::new(c.clone())).expect("metric registered once");
    c
}

fn histogram(name: &str, help: &str, buckets: Vec<f64>) -> Histogram {
    let h = Histogram::with_opts(HistogramOpts::new(name, help).buckets(buckets))
        .expect("valid metric");
    prometheus::register(Box::new(h.clone())).expect("metric registered once");
    h
}

/// Offload decisions, one per decided request, by where it was sent and the primary reason.
/// result: local | remote; reason: one of `offload_policy::reason::COUNTED` (num_ranges,
/// blocks_size, long_query_blocks_size, lazy_pattern_blocks_size, lazy_pattern_duration without
/// load-aware routing; load_aware_force_blocks_size, load_aware_force_num_ranges,
/// no_cpu_signal, cpu_busy (remote) or cpu_idle (local) with it). Requests that are no
/// candidate, cache hits and servers without a worker are not counted. See `offload_policy`.
pub static REMOTE_DECISIONS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec(
        "tikv_coprocessor_remote_decision_total",
        "Coprocessor requests by offload decision and its reason.",
        &["result", "reason"],
    )
});

/// Coprocessor requests by where they were answered. location: local | remote | fallback |
/// cache_hit | error (region error, lock, bad request: answered before execution).
pub static COP_REQUESTS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec(
        "stratus_server_coprocessor_requests_total",
        "Coprocessor requests by where they were answered.",
        &["location"],
    )
});

/// Offloaded requests that ran locally after all, by cause: connect | timeout | unavailable
/// (503 after the retries) | bad_status | worker_error | bad_response | encode.
pub static OFFLOAD_FALLBACKS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec(
        "stratus_server_offload_fallbacks_total",
        "Offloaded coprocessor requests executed locally after the worker failed.",
        &["cause"],
    )
});

pub static OFFLOAD_RETRIES: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "stratus_server_offload_retries_total",
        "Offload attempts repeated after a connection error, timeout or 503.",
    )
});

pub static OFFLOAD_BODY_BYTES: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "stratus_server_offload_body_bytes_total",
        "Bytes of offload bodies sent to workers (one count per request, not per attempt).",
    )
});

/// Bytes of each offload body section. section: request | memtable | changeset.
pub static OFFLOAD_SECTION_BYTES: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec(
        "stratus_server_offload_section_bytes_total",
        "Bytes of offload body sections sent to workers, by section.",
        &["section"],
    )
});

/// Offload attempts (bodies POSTed to a worker), by the worker's zone relative to this
/// server's. zone_relation: same | cross | unknown (either has no zone label). See
/// `worker_pool`: cross-zone attempts happen only while no worker of this zone is alive.
pub static OFFLOAD_DISPATCHES: LazyLock<IntCounterVec> = LazyLock::new(|| {
    let c = counter_vec(
        "stratus_server_offload_dispatches_total",
        "Offload attempts sent to workers, by the worker's zone relative to this server's.",
        &["zone_relation"],
    );
    for r in wire::delegate::ZONE_RELATIONS {
        c.with_label_values(&[r]);
    }
    c
});

/// `POST /delegate` answers by result: ok (a snapshot) | locked | region_error | error
/// (other_error: a bad request or a failure of this server).
pub static DELEGATE_REQUESTS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec(
        "stratus_server_delegate_requests_total",
        "Delegate requests from workers, by result.",
        &["result"],
    )
});

/// Bytes of encoded `DelegateResponse` bodies sent to workers, by the worker's zone (from the
/// request) relative to this server's. zone_relation: same | cross | unknown.
pub static DELEGATE_BYTES: LazyLock<IntCounterVec> = LazyLock::new(|| {
    let c = counter_vec(
        "stratus_server_delegate_bytes_total",
        "Bytes of delegate responses sent to workers, by zone relation.",
        &["zone_relation"],
    );
    for r in wire::delegate::ZONE_RELATIONS {
        c.with_label_values(&[r]);
    }
    c
});

pub static TOPN_PAGING: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "stratus_server_offload_topn_paging_total",
        "Offloaded TopN requests sent with paging below their limit.",
    )
});

pub static OFFLOAD_LOCKS_SEEN: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "stratus_server_offload_uncacheable_total",
        "Offloaded results marked uncacheable by the server (newer memtable versions filtered or non-conflicting locks in range).",
    )
});

pub static COP_DURATION: LazyLock<Histogram> = LazyLock::new(|| {
    histogram(
        "stratus_server_coprocessor_duration_seconds",
        "Coprocessor request time at the server, end to end.",
        prometheus::exponential_buckets(0.0005, 2.0, 16).expect("valid buckets"),
    )
});

/// Transaction API requests by command and outcome (ok | error).
pub static TXN_REQUESTS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec(
        "stratus_server_txn_requests_total",
        "Transaction API requests by command and outcome.",
        &["command", "outcome"],
    )
});

pub static SPLITS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec(
        "stratus_server_region_splits_total",
        "Region splits by trigger (request | size).",
        &["trigger"],
    )
});

/// Registers every metric above, so `/metrics` lists them (at zero) from the start.
pub fn register_all() {
    LazyLock::force(&REMOTE_DECISIONS);
    LazyLock::force(&COP_REQUESTS);
    LazyLock::force(&OFFLOAD_FALLBACKS);
    LazyLock::force(&OFFLOAD_RETRIES);
    LazyLock::force(&OFFLOAD_BODY_BYTES);
    LazyLock::force(&OFFLOAD_LOCKS_SEEN);
    LazyLock::force(&OFFLOAD_SECTION_BYTES);
    LazyLock::force(&OFFLOAD_DISPATCHES);
    LazyLock::force(&DELEGATE_REQUESTS);
    LazyLock::force(&DELEGATE_BYTES);
    LazyLock::force(&TOPN_PAGING);
    LazyLock::force(&COP_DURATION);
    LazyLock::force(&TXN_REQUESTS);
    LazyLock::force(&SPLITS);
}
