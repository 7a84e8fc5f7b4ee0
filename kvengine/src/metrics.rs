//! Engine metrics, registered once per process in the default prometheus registry.

use std::sync::LazyLock;

use prometheus::{IntCounter, IntCounterVec, IntGauge, Opts};

/// Registers a counter in the default registry (once per process: call from a `LazyLock`).
pub(crate) fn counter(name: &str, help: &str) -> IntCounter {
    let c = IntCounter::new(name, help).expect("valid metric");
    prometheus::default_registry()
        .register(Box::new(c.clone()))
        .expect("metric registered once");
    c
}

/// Registers a gauge in the default registry (once per process: call from a `LazyLock`).
pub(crate) fn gauge(name: &str, help: &str) -> IntGauge {
    let g = IntGauge::new(name, help).expect("valid metric");
    prometheus::default_registry()
        .register(Box::new(g.clone()))
        .expect("metric registered once");
    g
}

pub static WRITES: LazyLock<IntCounter> =
    LazyLock::new(|| counter("stratus_kvengine_writes_total", "Write batches applied."));
pub static WRITE_BYTES: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "stratus_kvengine_write_bytes_total",
        "Bytes of write batches applied.",
    )
});
pub static WAL_BYTES: LazyLock<IntGauge> = LazyLock::new(|| {
    gauge(
        "stratus_kvengine_wal_bytes",
        "Bytes appended to the WAL since start.",
    )
});
pub static WAL_FSYNCS: LazyLock<IntGauge> =
    LazyLock::new(|| gauge("stratus_kvengine_wal_fsyncs", "WAL fsyncs since start."));
pub static FLUSHES: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "stratus_kvengine_flushes_total",
        "Memtables flushed to L0 files.",
    )
});
pub static FLUSH_BYTES: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "stratus_kvengine_flush_bytes_total",
        "Bytes of L0 files written.",
    )
});
pub static COMPACTIONS: LazyLock<IntCounter> =
    LazyLock::new(|| counter("stratus_kvengine_compactions_total", "Compactions applied."));
pub static REMOTE_COMPACTIONS: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "stratus_kvengine_remote_compactions_total",
        "Compactions applied whose outputs another process (a worker) built.",
    )
});
pub static DOOMED_FILES_DELETED: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "stratus_kvengine_doomed_files_deleted_total",
        "Output ids of failed or refused compactions and flushes file GC deleted from the object store (an id nothing was stored under counts too).",
    )
});
pub static FILES_DELETED: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "stratus_kvengine_files_deleted_total",
        "Retired files file GC deleted from the object store.",
    )
});
pub static FILES_PENDING_DELETE: LazyLock<IntGauge> = LazyLock::new(|| {
    gauge(
        "stratus_kvengine_files_pending_delete",
        "Retired files waiting for file GC: a snapshot, a shard or (Raft) a replica may still need them.",
    )
});
pub static STALLS: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "stratus_kvengine_write_stalls_total",
        "Writes that waited because the flush queue was full.",
    )
});
pub static DFS_REQUESTS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    let c = IntCounterVec::new(
        Opts::new(
            "stratus_kvengine_dfs_requests_total",
            "Object store requests by operation.",
        ),
        &["op"],
    )
    .expect("valid metric");
    prometheus::default_registry()
        .register(Box::new(c.clone()))
        .expect("metric registered once");
    c
});

/// Counts one object-store request. `op` is one of put, get, get_range, delete, list.
/// Registers the compaction and file GC counters at zero, so `/metrics` lists them before the
/// first compaction (called when an engine opens).
pub(crate) fn register_compaction() {
    LazyLock::force(&COMPACTIONS);
    LazyLock::force(&REMOTE_COMPACTIONS);
    LazyLock::force(&DOOMED_FILES_DELETED);
    LazyLock::force(&FILES_DELETED);
}

pub fn dfs_request(op: &'static str) {
    DFS_REQUESTS.with_label_values(&[op]).inc();
}

/// The process's pool of shipping buffers (`changeset::ship_buffers::SHIP_BUFFERS`), read at
/// each scrape: the pool itself is pure and keeps no metrics, and its counts change on every
/// transfer, so reading them when asked costs nothing between scrapes.
///
/// * `stratus_ship_buffer_pool_bytes{state="idle"}`: capacity of the buffers waiting for the
///   next transfer (resident memory the pool keeps);
/// * `stratus_ship_buffer_pool_bytes{state="lent"}`: capacity of the pool's buffers in use by
///   a transfer now;
/// * `stratus_ship_buffer_pool_limit_bytes`: the bound on both together
///   (`ship-buffer-pool-size`).
struct ShipBufferPoolCollector {
    bytes: prometheus::IntGaugeVec,
    limit: IntGauge,
}

impl prometheus::core::Collector for ShipBufferPoolCollector {
    fn desc(&self) -> Vec<&prometheus::core::Desc> {
        let mut d = self.bytes.desc();
        d.extend(self.limit.desc());
        d
    }

    fn collect(&self) -> Vec<prometheus::proto::MetricFamily> {
        let usage = changeset::ship_buffers::SHIP_BUFFERS.usage();
        let as_i64 = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        self.bytes
            .with_label_values(&["idle"])
            .set(as_i64(usage.idle_bytes));
        self.bytes
            .with_label_values(&["lent"])
            .set(as_i64(usage.lent_bytes));
        self.limit.set(as_i64(usage.max_bytes));
        let mut families = self.bytes.collect();
        families.extend(self.limit.collect());
        families
    }
}

static SHIP_BUFFER_POOL: LazyLock<()> = LazyLock::new(|| {
    let collector = ShipBufferPoolCollector {
        bytes: prometheus::IntGaugeVec::new(
            Opts::new(
                "stratus_ship_buffer_pool_bytes",
                "Capacity of the memtable-data shipping buffers the pool owns, by state: idle \
                 (kept resident for the next transfer) or lent (in use by a transfer).",
            ),
            &["state"],
        )
        .expect("valid metric"),
        limit: IntGauge::new(
            "stratus_ship_buffer_pool_limit_bytes",
            "Bound on the shipping-buffer pool's idle and lent bytes (ship-buffer-pool-size).",
        )
        .expect("valid metric"),
    };
    prometheus::default_registry()
        .register(Box::new(collector))
        .expect("metric registered once");
});

/// Sets the process's shipping-buffer pool bound (a server's `kvengine.ship-buffer-pool-size`,
/// a worker's `worker.ship-buffer-pool-size`) and registers its metrics. The pool is
/// process-wide, so the last caller's bound holds.
pub fn set_ship_buffer_pool_size(bytes: u64) {
    LazyLock::force(&SHIP_BUFFER_POOL);
    changeset::ship_buffers::SHIP_BUFFERS
        .set_max_bytes(usize::try_from(bytes).unwrap_or(usize::MAX));
}
