//! The server's metrics (default prometheus registry, registered on first use). Label values
//! are closed sets, each an enum (`wire::placement` for where a request ran and why,
//! [`types::ZoneRelation`], the enums below), and every series of a labelled counter exists
//! from the start at 0 ([`register_all`]): a `rate()` sees the first event, and a test or the
//! CLI can read a missing series as the error it is.

use std::sync::LazyLock;

use prometheus::{Histogram, HistogramOpts, IntCounter, IntCounterVec, Opts};
use types::ZoneRelation;
use wire::delegate::DelegateResult;
use wire::placement::{FallbackCause, Location, OffloadReason};

/// Where a coprocessor request was answered
/// (`stratus_server_coprocessor_requests_total{location}`): where it ran, or `error` for an
/// answer given before execution (region error, lock, bad request).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answered {
    Ran(Location),
    Error,
}

impl Answered {
    /// Every label value: the places a server runs a request (never `delegate`: that is a
    /// worker's answer), and `error`.
    pub const ALL: [Answered; 5] = [
        Answered::Ran(Location::Local),
        Answered::Ran(Location::Remote),
        Answered::Ran(Location::Fallback),
        Answered::Ran(Location::CacheHit),
        Answered::Error,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Answered::Ran(location) => location.as_str(),
            Answered::Error => "error",
        }
    }
}

types::label_enum! {
    /// A section of the offload body (`stratus_server_offload_section_bytes_total{section}`).
    pub enum OffloadSection: "offload section" {
        /// The cop request the worker runs.
        Request = "request",
        /// The memtable rows a read at start_ts needs.
        Memtable = "memtable",
        /// The snapshot's ChangeSet (its files).
        Changeset = "changeset",
    }
}

types::label_enum! {
    /// What made a region split (`stratus_server_region_splits_total{trigger}`).
    pub enum SplitTrigger: "split trigger" {
        /// `POST /split`.
        Request = "request",
        /// The region grew past `region-split-size`.
        Size = "size",
    }
}

types::label_enum! {
    /// A transaction API command (`stratus_server_txn_requests_total{command}`).
    pub enum TxnCommand: "txn command" {
        RawLoad = "raw_load",
        Prewrite = "prewrite",
        Commit = "commit",
        Rollback = "rollback",
        CheckTxnStatus = "check_txn_status",
        CheckSecondaryLocks = "check_secondary_locks",
        ResolveLock = "resolve_lock",
        ScanLock = "scan_lock",
        Get = "get",
        Scan = "scan",
    }
}

types::label_enum! {
    /// How a transaction API command ended (`stratus_server_txn_requests_total{outcome}`).
    pub enum TxnOutcome: "txn outcome" {
        Ok = "ok",
        Error = "error",
    }
}

types::label_enum! {
    /// Where a planned compaction runs and why
    /// (`stratus_server_compaction_remote_decisions_total{reason}`; `remote_compaction`).
    pub enum CompactionDecision: "compaction decision" {
        /// Sent to a worker.
        Remote = "remote",
        /// Its inputs are below `remote-compaction-min-input-size`.
        SmallInput = "small_input",
        /// No worker is alive.
        NoWorker = "no_worker",
        /// `remote-compaction-load-aware` and this server's CPU is idle.
        ServerIdle = "server_idle",
    }
}

types::label_enum! {
    /// How one attempt of a compaction job on a worker ended
    /// (`stratus_server_compaction_remote_attempts_total{outcome}`).
    pub enum CompactionAttempt: "compaction attempt" {
        Ok = "ok",
        /// 503: the worker is full or its memory high.
        Unavailable = "unavailable",
        Timeout = "timeout",
        Connect = "connect",
        /// 400: the worker found the job malformed (not retried).
        BadRequest = "bad_request",
        /// Another error status (502, 504, ...).
        BadStatus = "bad_status",
        /// A 200 whose body does not decode.
        BadResponse = "bad_response",
    }
}

types::label_enum! {
    /// How a compaction sent to the workers ended
    /// (`stratus_server_compaction_remote_jobs_total{result}`).
    pub enum CompactionJobResult: "compaction job result" {
        /// The first worker's result came back.
        Ok = "ok",
        /// The second worker's did, after the first failed.
        Retried = "retried",
        /// No worker's did: compacted here.
        FellBack = "fell_back",
        /// A result came back but failed the engine's check: compacted here.
        Rejected = "rejected",
    }
}

pub static COMPACTION_DECISIONS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    let c = counter_vec(
        "stratus_server_compaction_remote_decisions_total",
        "Compactions this server planned, by where they ran and why (remote or the reason they stayed).",
        &["reason"],
    );
    for r in CompactionDecision::ALL {
        c.with_label_values(&[r.as_str()]);
    }
    c
});

pub static COMPACTION_ATTEMPTS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    let c = counter_vec(
        "stratus_server_compaction_remote_attempts_total",
        "Compaction jobs POSTed to workers, by how each attempt ended.",
        &["outcome"],
    );
    for o in CompactionAttempt::ALL {
        c.with_label_values(&[o.as_str()]);
    }
    c
});

pub static COMPACTION_JOBS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    let c = counter_vec(
        "stratus_server_compaction_remote_jobs_total",
        "Compactions sent to workers, by how they ended.",
        &["result"],
    );
    for r in CompactionJobResult::ALL {
        c.with_label_values(&[r.as_str()]);
    }
    c
});

/// Creates every remote compaction series (at 0), so a rate over one that never moved is 0.
pub fn init_compaction() {
    LazyLock::force(&COMPACTION_DECISIONS);
    LazyLock::force(&COMPACTION_ATTEMPTS);
    LazyLock::force(&COMPACTION_JOBS);
}

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
/// result: local | remote; reason: a counted [`OffloadReason`] (num_ranges, blocks_size,
/// long_query_blocks_size, lazy_pattern_blocks_size, lazy_pattern_duration without load-aware
/// routing; load_aware_force_blocks_size, load_aware_force_num_ranges, no_cpu_signal, cpu_busy
/// (remote) or cpu_idle (local) with it). Exactly the valid pairs exist
/// ([`OffloadReason::decision_series`]), at 0 from the start. Requests that are no candidate,
/// cache hits and servers without a worker are not counted. See `offload_policy`.
pub static REMOTE_DECISIONS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    let c = counter_vec(
        "tikv_coprocessor_remote_decision_total",
        "Coprocessor requests by offload decision and its reason.",
        &["result", "reason"],
    );
    for (result, reason) in OffloadReason::decision_series() {
        c.with_label_values(&[result.as_str(), reason.as_str()]);
    }
    c
});

/// Counts a decision for `reason` (an uncounted reason counts nothing).
pub fn count_decision(reason: OffloadReason) {
    if reason.is_counted() {
        REMOTE_DECISIONS
            .with_label_values(&[reason.result().as_str(), reason.as_str()])
            .inc();
    }
}

/// Coprocessor requests by where they were answered ([`Answered`]). location: local | remote |
/// fallback | cache_hit | error (region error, lock, bad request: answered before execution).
pub static COP_REQUESTS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    let c = counter_vec(
        "stratus_server_coprocessor_requests_total",
        "Coprocessor requests by where they were answered.",
        &["location"],
    );
    for a in Answered::ALL {
        c.with_label_values(&[a.as_str()]);
    }
    c
});

/// Counts a request answered at `answered`.
pub fn count_answered(answered: Answered) {
    COP_REQUESTS.with_label_values(&[answered.as_str()]).inc();
}

/// Offloaded requests that ran locally after all, by [`FallbackCause`]: connect | timeout |
/// unavailable (503 after the retries) | bad_status | worker_error | bad_response | encode.
pub static OFFLOAD_FALLBACKS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    let c = counter_vec(
        "stratus_server_offload_fallbacks_total",
        "Offloaded coprocessor requests executed locally after the worker failed.",
        &["cause"],
    );
    for cause in FallbackCause::ALL {
        c.with_label_values(&[cause.as_str()]);
    }
    c
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

/// Bytes of each offload body section ([`OffloadSection`]): request | memtable | changeset.
pub static OFFLOAD_SECTION_BYTES: LazyLock<IntCounterVec> = LazyLock::new(|| {
    let c = counter_vec(
        "stratus_server_offload_section_bytes_total",
        "Bytes of offload body sections sent to workers, by section.",
        &["section"],
    );
    for section in OffloadSection::ALL {
        c.with_label_values(&[section.as_str()]);
    }
    c
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
    for r in ZoneRelation::ALL {
        c.with_label_values(&[r.as_str()]);
    }
    c
});

/// `POST /delegate` answers by [`DelegateResult`]: ok (a snapshot) | locked | region_error |
/// error (other_error: a bad request or a failure of this server).
pub static DELEGATE_REQUESTS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    let c = counter_vec(
        "stratus_server_delegate_requests_total",
        "Delegate requests from workers, by result.",
        &["result"],
    );
    for r in DelegateResult::ALL {
        c.with_label_values(&[r.as_str()]);
    }
    c
});

/// Bytes of encoded `DelegateResponse` bodies sent to workers, by the worker's zone (from the
/// request) relative to this server's. zone_relation: same | cross | unknown.
pub static DELEGATE_BYTES: LazyLock<IntCounterVec> = LazyLock::new(|| {
    let c = counter_vec(
        "stratus_server_delegate_bytes_total",
        "Bytes of delegate responses sent to workers, by zone relation.",
        &["zone_relation"],
    );
    for r in ZoneRelation::ALL {
        c.with_label_values(&[r.as_str()]);
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

/// Transaction API requests by [`TxnCommand`] and [`TxnOutcome`] (ok | error).
pub static TXN_REQUESTS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    let c = counter_vec(
        "stratus_server_txn_requests_total",
        "Transaction API requests by command and outcome.",
        &["command", "outcome"],
    );
    for command in TxnCommand::ALL {
        for outcome in TxnOutcome::ALL {
            c.with_label_values(&[command.as_str(), outcome.as_str()]);
        }
    }
    c
});

/// Prewrite requests that asked for async commit and succeeded (their locks written, or found
/// from an earlier try): how a test or an operator sees that clients use async commit.
pub static ASYNC_COMMIT_PREWRITES: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "stratus_server_txn_async_commit_prewrites_total",
        "Prewrite requests with async commit that succeeded.",
    )
});

/// Region splits by [`SplitTrigger`] (request | size).
pub static SPLITS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    let c = counter_vec(
        "stratus_server_region_splits_total",
        "Region splits by trigger (request | size).",
        &["trigger"],
    );
    for trigger in SplitTrigger::ALL {
        c.with_label_values(&[trigger.as_str()]);
    }
    c
});

/// Registers every metric above, so `/metrics` lists them, and every series of their closed
/// label sets, at zero from the start.
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
    LazyLock::force(&ASYNC_COMMIT_PREWRITES);
    LazyLock::force(&SPLITS);
    init_compaction();
}

#[cfg(test)]
mod tests {
    use prometheus::core::Collector;

    use super::*;

    /// The label sets of every series `c` exports, each as `name=value` pairs in label order.
    fn series(c: &IntCounterVec) -> Vec<Vec<String>> {
        let mut out: Vec<Vec<String>> = c
            .collect()
            .iter()
            .flat_map(|family| family.get_metric())
            .map(|m| {
                m.get_label()
                    .iter()
                    .map(|l| format!("{}={}", l.name(), l.value()))
                    .collect()
            })
            .collect();
        out.sort();
        out
    }

    fn expected<'a>(pairs: impl IntoIterator<Item = Vec<(&'a str, &'a str)>>) -> Vec<Vec<String>> {
        let mut out: Vec<Vec<String>> = pairs
            .into_iter()
            .map(|labels| labels.iter().map(|(k, v)| format!("{k}={v}")).collect())
            .collect();
        out.sort();
        out
    }

    #[test]
    fn every_valid_decision_series_exists_from_the_start_and_no_other() {
        register_all();
        let want = expected(OffloadReason::decision_series().map(|(result, reason)| {
            vec![("reason", reason.as_str()), ("result", result.as_str())]
        }));
        assert_eq!(series(&REMOTE_DECISIONS), want);
        assert!(want.contains(&vec!["reason=cpu_idle".into(), "result=local".into()]));
        assert!(
            !want
                .iter()
                .any(|s| s.contains(&"reason=below_min_blocks_size".into()))
        );
    }

    #[test]
    fn every_closed_label_set_is_exported_from_the_start() {
        register_all();
        let one = |label: &'static str, values: Vec<&'static str>| {
            expected(values.into_iter().map(|v| vec![(label, v)]))
        };
        assert_eq!(
            series(&COP_REQUESTS),
            one(
                "location",
                vec!["cache_hit", "error", "fallback", "local", "remote"]
            )
        );
        assert_eq!(
            series(&OFFLOAD_FALLBACKS),
            one(
                "cause",
                FallbackCause::ALL.iter().map(|c| c.as_str()).collect()
            )
        );
        let relations = vec!["cross", "same", "unknown"];
        assert_eq!(
            series(&OFFLOAD_DISPATCHES),
            one("zone_relation", relations.clone())
        );
        assert_eq!(series(&DELEGATE_BYTES), one("zone_relation", relations));
        assert_eq!(
            series(&OFFLOAD_SECTION_BYTES),
            one("section", vec!["changeset", "memtable", "request"])
        );
        assert_eq!(
            series(&DELEGATE_REQUESTS),
            one("result", vec!["error", "locked", "ok", "region_error"])
        );
        assert_eq!(series(&SPLITS), one("trigger", vec!["request", "size"]));
        assert_eq!(series(&TXN_REQUESTS).len(), TxnCommand::ALL.len() * 2);
    }
}
