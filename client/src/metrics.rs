//! The client's metrics (default prometheus registry, registered on first use, once per
//! process). Every [`crate::cop_cache::CopCache`] of the process adds to the same counters;
//! each cache also keeps its own counts ([`crate::cop_cache::CacheStats`]).

use std::sync::LazyLock;

use prometheus::{IntCounter, IntCounterVec, Opts};

fn counter(name: &str, help: &str) -> IntCounter {
    let c = IntCounter::new(name, help).expect("valid metric");
    prometheus::register(Box::new(c.clone())).expect("metric registered once");
    c
}

/// Responses answered from the coprocessor cache (the server confirmed the entry's version).
pub static COP_CACHE_HITS: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "stratus_client_cop_cache_hits_total",
        "Coprocessor responses served from the client's cache.",
    )
});

/// Cache-enabled responses that were not hits (no entry, or the region changed).
pub static COP_CACHE_MISSES: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "stratus_client_cop_cache_misses_total",
        "Coprocessor responses computed by the cluster while the client's cache was enabled.",
    )
});

/// Topology changes the placement driver's watch delivered (`crate::topology_watch`).
pub static TOPOLOGY_UPDATES: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "stratus_client_topology_updates_total",
        "Cluster topology changes (servers, workers, regions, leaders) pushed by the placement driver's watch.",
    )
});

/// Entries evicted to make room for new ones.
pub static COP_CACHE_EVICTIONS: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "stratus_client_cop_cache_evictions_total",
        "Coprocessor cache entries evicted by the byte budget.",
    )
});

/// Requests sent again, by why (`crate::backoff::RetryReason::as_str`: not_leader,
/// epoch_not_match, stale_command, server_busy, region_not_found, connection).
pub static RETRIES: LazyLock<IntCounterVec> = LazyLock::new(|| {
    let c = IntCounterVec::new(
        Opts::new(
            "stratus_client_retries_total",
            "Requests the client sent again after a region error or a failed connection, by reason.",
        ),
        &["reason"],
    )
    .expect("valid metric");
    prometheus::register(Box::new(c.clone())).expect("metric registered once");
    c
});
