//! The worker's metrics, registered once per process in the default prometheus registry (the
//! object store, cachefs and block cache metrics come from kvengine and show up at the same
//! `GET /metrics`).

use std::sync::LazyLock;

use prometheus::{
    Gauge, GaugeVec, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, Opts,
};

use crate::topn_paging::TopnPagingAction;

/// How a `/coprocessor` request ended: the closed label set of
/// `stratus_worker_coprocessor_requests_total{result}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestResult {
    /// 200 with a cop response (which may itself carry an error field).
    Ok,
    /// 400: the body is not an offload body a server following the protocol sends.
    BadRequest,
    /// 502: the object store failed while the snapshot was rebuilt.
    StoreError,
    /// 413: the body is larger than `worker.max-request-size`.
    TooLarge,
    /// 500: the worker itself failed (a bug: the handler panicked).
    Internal,
    /// 503: memory stayed above `cop-limiter.high-mem-ratio` until the request's deadline.
    Throttled,
    /// 502 on the delegate path only: the owning server could not be asked, or its answer
    /// was unusable.
    OriginError,
    /// 403 on the delegate path only: the header names no server the placement driver lists
    /// (`crate::known_servers`).
    UnknownServer,
}

impl RequestResult {
    pub const ALL: [RequestResult; 8] = [
        RequestResult::Ok,
        RequestResult::BadRequest,
        RequestResult::StoreError,
        RequestResult::TooLarge,
        RequestResult::Internal,
        RequestResult::Throttled,
        RequestResult::OriginError,
        RequestResult::UnknownServer,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RequestResult::Ok => "ok",
            RequestResult::BadRequest => "bad_request",
            RequestResult::StoreError => "store_error",
            RequestResult::TooLarge => "too_large",
            RequestResult::Internal => "internal",
            RequestResult::Throttled => "throttled",
            RequestResult::OriginError => "origin_error",
            RequestResult::UnknownServer => "unknown_server",
        }
    }
}

types::label_enum! {
    /// How a `POST /compact` job ended: the label of
    /// `stratus_worker_compaction_jobs_total{result}`.
    pub enum CompactionJobResult: "compaction job result" {
        /// 200: the outputs are stored and described.
        Ok = "ok",
        /// 400: not a job a server following the protocol sends, or one that cannot run as
        /// described.
        BadRequest = "bad_request",
        /// 413: larger than `worker.max-request-size`.
        TooLarge = "too_large",
        /// 503: `max-compaction-jobs` run already, or memory is high.
        Busy = "busy",
        /// 502: the object store failed.
        StoreError = "store_error",
        /// 504: the job's deadline passed before its last output was stored.
        DeadlinePassed = "deadline_passed",
        /// 500: the handler panicked.
        Internal = "internal",
    }
}

pub static COMPACTION_JOBS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    let c = register(
        IntCounterVec::new(
            Opts::new(
                "stratus_worker_compaction_jobs_total",
                "Compaction jobs from servers (POST /compact) by how they ended.",
            ),
            &["result"],
        )
        .expect("valid metric"),
    );
    for r in CompactionJobResult::ALL {
        c.with_label_values(&[r.as_str()]);
    }
    c
});

pub static COMPACTION_RUNNING: LazyLock<IntGauge> = LazyLock::new(|| {
    register(
        IntGauge::new(
            "stratus_worker_compaction_running",
            "Compaction jobs running now (at most worker.max-compaction-jobs).",
        )
        .expect("valid metric"),
    )
});

/// `stratus_worker_compaction_bytes_total{direction}`: `read` (input table bytes) and
/// `written` (output table bytes) of the jobs that succeeded.
pub static COMPACTION_BYTES: LazyLock<IntCounterVec> = LazyLock::new(|| {
    let c = register(
        IntCounterVec::new(
            Opts::new(
                "stratus_worker_compaction_bytes_total",
                "Table bytes compaction jobs read and wrote.",
            ),
            &["direction"],
        )
        .expect("valid metric"),
    );
    for d in ["read", "written"] {
        c.with_label_values(&[d]);
    }
    c
});

fn register<C: prometheus::core::Collector + Clone + 'static>(c: C) -> C {
    prometheus::default_registry()
        .register(Box::new(c.clone()))
        .expect("metric registered once");
    c
}

pub static COPROCESSOR_REQUESTS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    let c = register(
        IntCounterVec::new(
            Opts::new(
                "stratus_worker_coprocessor_requests_total",
                "Offloaded coprocessor requests by how they ended.",
            ),
            &["result"],
        )
        .expect("valid metric"),
    );
    // Every label value exists from the start, so a rate over a result that never happened
    // yet is 0 rather than absent.
    for r in RequestResult::ALL {
        c.with_label_values(&[r.as_str()]);
    }
    c
});

/// `stratus_worker_delegate_requests_total{result}`: `POST /delegate/coprocessor` requests by
/// how they ended (the labels of [`RequestResult`]; `origin_error` when the owning server could
/// not be asked or answered something unusable).
pub static DELEGATE_REQUESTS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    let c = register(
        IntCounterVec::new(
            Opts::new(
                "stratus_worker_delegate_requests_total",
                "Delegate-path coprocessor requests from clients by how they ended.",
            ),
            &["result"],
        )
        .expect("valid metric"),
    );
    for r in RequestResult::ALL {
        c.with_label_values(&[r.as_str()]);
    }
    c
});

/// `stratus_worker_delegate_bytes_total{zone_relation}`: bytes of `DelegateResponse` bodies
/// received from servers, by the server's zone (from the answer) relative to this worker's:
/// same | cross | unknown (either has no zone label).
pub static DELEGATE_BYTES: LazyLock<IntCounterVec> = LazyLock::new(|| {
    let c = register(
        IntCounterVec::new(
            Opts::new(
                "stratus_worker_delegate_bytes_total",
                "Bytes of delegate responses received from servers, by zone relation.",
            ),
            &["zone_relation"],
        )
        .expect("valid metric"),
    );
    for r in types::ZoneRelation::ALL {
        c.with_label_values(&[r.as_str()]);
    }
    c
});

/// `stratus_worker_memtable_data_total{format}`: snapshots rebuilt (offload and delegate paths)
/// by the format their memtable rows came in (`v1` to `v4`): shows when a rolling upgrade has
/// moved every server to the newest format.
pub static MEMTABLE_DATA_FORMATS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    let c = register(
        IntCounterVec::new(
            Opts::new(
                "stratus_worker_memtable_data_total",
                "Snapshots rebuilt, by the format of their shipped memtable rows.",
            ),
            &["format"],
        )
        .expect("valid metric"),
    );
    for f in changeset::MemtableDataFormat::ALL {
        c.with_label_values(&[f.as_str()]);
    }
    c
});

pub static REQUEST_BYTES: LazyLock<IntCounter> = LazyLock::new(|| {
    register(
        IntCounter::new(
            "stratus_worker_request_bytes_total",
            "Bytes of offload bodies read (cop request, memtable rows and ChangeSet).",
        )
        .expect("valid metric"),
    )
});

pub static RESPONSE_BYTES: LazyLock<IntCounter> = LazyLock::new(|| {
    register(
        IntCounter::new(
            "stratus_worker_response_bytes_total",
            "Bytes of encoded cop responses sent.",
        )
        .expect("valid metric"),
    )
});

pub static SNAPSHOT_REBUILD_SECONDS: LazyLock<Histogram> = LazyLock::new(|| {
    register(
        Histogram::with_opts(
            HistogramOpts::new(
                "stratus_worker_snapshot_rebuild_seconds",
                "Time to rebuild a shipped snapshot: index the shipped memtable rows (a v4 \
                 blob's block index only: its blocks are decoded as the request reads them) \
                 and open the listed files (downloads included); failed rebuilds too.",
            )
            // 0.25 ms (rows only, files cached) up to ~16 s (large downloads from S3).
            .buckets(prometheus::exponential_buckets(0.000_25, 2.0, 17).expect("valid buckets")),
        )
        .expect("valid metric"),
    )
});

pub static IN_FLIGHT_REQUESTS: LazyLock<IntGauge> = LazyLock::new(|| {
    register(
        IntGauge::new(
            "stratus_worker_in_flight_requests",
            "Offloaded coprocessor requests being read, rebuilt or executed.",
        )
        .expect("valid metric"),
    )
});

/// `stratus_worker_topn_paging_total{action}`: requests seen while `cop-topn-max-pushdown-rows`
/// is non-zero, by what the worker did with their paging: `applied` (paging set to the TopN's
/// limit - 1), `passed_through` (the request already paged), `not_applicable` (no paging, but
/// no TopN above the threshold at the root). See [`crate::topn_paging`].
pub static TOPN_PAGING: LazyLock<IntCounterVec> = LazyLock::new(|| {
    let c = register(
        IntCounterVec::new(
            Opts::new(
                "stratus_worker_topn_paging_total",
                "Requests seen with cop-topn-max-pushdown-rows set, by action: applied, \
                 passed_through (already paging), not_applicable.",
            ),
            &["action"],
        )
        .expect("valid metric"),
    );
    for a in TopnPagingAction::ALL {
        c.with_label_values(&[a.as_str()]);
    }
    c
});

pub static COP_LIMITER_THROTTLED_ROUNDS: LazyLock<IntCounter> = LazyLock::new(|| {
    register(
        IntCounter::new(
            "stratus_worker_cop_limiter_throttled_rounds_total",
            "Sleeps of requests waiting for memory: use above cop-limiter.high-mem-ratio, or \
             admissions paced while other requests wait.",
        )
        .expect("valid metric"),
    )
});

pub static COP_LIMITER_REJECTIONS: LazyLock<IntCounter> = LazyLock::new(|| {
    register(
        IntCounter::new(
            "stratus_worker_cop_limiter_rejections_total",
            "Requests answered 503 because memory use stayed high until their deadline.",
        )
        .expect("valid metric"),
    )
});

pub static COP_LIMITER_WAIT_SECONDS: LazyLock<Histogram> = LazyLock::new(|| {
    register(
        Histogram::with_opts(
            HistogramOpts::new(
                "stratus_worker_cop_limiter_wait_seconds",
                "Duration of each sleep of a request waiting for memory (drawn from \
                 [wait-min-duration, wait-max-duration]).",
            )
            // 1 ms up to ~65 s.
            .buckets(prometheus::exponential_buckets(0.001, 2.0, 17).expect("valid buckets")),
        )
        .expect("valid metric"),
    )
});

pub static COP_LIMITER_MEMORY_RATIO: LazyLock<Gauge> = LazyLock::new(|| {
    register(
        Gauge::new(
            "stratus_worker_cop_limiter_memory_ratio",
            "Last memory reading of the cop-limiter: used / limit (resident set or cgroup \
             working set over the cgroup, configured or physical limit).",
        )
        .expect("valid metric"),
    )
});

/// `stratus_worker_keyspace_throughput_bytes_per_second{keyspace}`: a series per keyspace with
/// answers in the `cop-limiter.sample-ttl` window, removed once it has none (the label set is
/// the keyspaces currently served, not every keyspace ever seen).
pub static KEYSPACE_THROUGHPUT: LazyLock<GaugeVec> = LazyLock::new(|| {
    register(
        GaugeVec::new(
            Opts::new(
                "stratus_worker_keyspace_throughput_bytes_per_second",
                "Encoded response bytes per keyspace over the cop-limiter.sample-ttl window, \
                 divided by its length.",
            ),
            &["keyspace"],
        )
        .expect("valid metric"),
    )
});

/// Touches every metric so that they are registered (and exported) before the first request.
pub fn init() {
    LazyLock::force(&COPROCESSOR_REQUESTS);
    LazyLock::force(&DELEGATE_REQUESTS);
    LazyLock::force(&DELEGATE_BYTES);
    LazyLock::force(&MEMTABLE_DATA_FORMATS);
    LazyLock::force(&REQUEST_BYTES);
    LazyLock::force(&RESPONSE_BYTES);
    LazyLock::force(&SNAPSHOT_REBUILD_SECONDS);
    LazyLock::force(&IN_FLIGHT_REQUESTS);
    LazyLock::force(&TOPN_PAGING);
    LazyLock::force(&COP_LIMITER_THROTTLED_ROUNDS);
    LazyLock::force(&COP_LIMITER_REJECTIONS);
    LazyLock::force(&COP_LIMITER_WAIT_SECONDS);
    LazyLock::force(&COP_LIMITER_MEMORY_RATIO);
    LazyLock::force(&KEYSPACE_THROUGHPUT);
    LazyLock::force(&COMPACTION_JOBS);
    LazyLock::force(&COMPACTION_RUNNING);
    LazyLock::force(&COMPACTION_BYTES);
}

/// Counts one finished `/coprocessor` request.
pub fn request_finished(result: RequestResult) {
    COPROCESSOR_REQUESTS
        .with_label_values(&[result.as_str()])
        .inc();
}
