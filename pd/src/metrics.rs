//! The placement driver's metrics (default prometheus registry, `GET /metrics`).

use std::sync::LazyLock;

use prometheus::{IntCounter, IntCounterVec, IntGauge, Opts};

fn register<C: prometheus::core::Collector + Clone + 'static>(c: C) -> C {
    // A second registration (two services in one test process) keeps the first.
    let _ = prometheus::default_registry().register(Box::new(c.clone()));
    c
}

/// 1 while this instance leads with a live lease.
pub static IS_LEADER: LazyLock<IntGauge> = LazyLock::new(|| {
    register(
        IntGauge::new("stratus_pd_is_leader", "1 while this instance leads.")
            .expect("valid metric"),
    )
});

/// Elections this instance won.
pub static ELECTIONS_WON: LazyLock<IntCounter> = LazyLock::new(|| {
    register(
        IntCounter::new(
            "stratus_pd_elections_won_total",
            "Elections this placement-driver instance won.",
        )
        .expect("valid metric"),
    )
});

/// Writes of the TSO mark (about three per window while serving: it is extended when less
/// than two thirds of a window is left).
pub static TSO_MARK_WRITES: LazyLock<IntCounter> = LazyLock::new(|| {
    register(
        IntCounter::new(
            "stratus_pd_tso_mark_writes_total",
            "Writes of the TSO high-water mark to the metadata store.",
        )
        .expect("valid metric"),
    )
});

/// Requests by kind (`tso`, `alloc_id`) and result (`ok`, `not_leader`, `error`).
pub static REQUESTS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register(
        IntCounterVec::new(
            Opts::new(
                "stratus_pd_requests_total",
                "Placement-driver requests by kind and result.",
            ),
            &["kind", "result"],
        )
        .expect("valid metric"),
    )
});

/// Timestamps handed out.
pub static TIMESTAMPS: LazyLock<IntCounter> = LazyLock::new(|| {
    register(
        IntCounter::new(
            "stratus_pd_timestamps_total",
            "Timestamps handed out by this instance.",
        )
        .expect("valid metric"),
    )
});

/// The GC safe point this leader last persisted (a timestamp: physical ms << 18).
pub static GC_SAFE_POINT: LazyLock<IntGauge> = LazyLock::new(|| {
    register(
        IntGauge::new(
            "stratus_pd_gc_safe_point",
            "The GC safe point this placement-driver leader last persisted.",
        )
        .expect("valid metric"),
    )
});

pub fn register_all() {
    LazyLock::force(&IS_LEADER);
    LazyLock::force(&ELECTIONS_WON);
    LazyLock::force(&TSO_MARK_WRITES);
    LazyLock::force(&REQUESTS);
    LazyLock::force(&TIMESTAMPS);
    LazyLock::force(&GC_SAFE_POINT);
}
