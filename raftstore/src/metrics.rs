//! The Raft transport's metrics (default prometheus registry, registered on first use). Every
//! series of a labelled counter exists from the start at 0, as in the server's metrics: a
//! `rate()` sees the first event, and a test reads a missing series as the error it is.

use std::sync::LazyLock;

use prometheus::{Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, Opts};

types::label_enum! {
    /// Why a Raft message was not delivered
    /// (`stratus_raft_messages_dropped_total{reason}`). Raft retransmits what is lost, so a
    /// drop costs latency, never correctness.
    pub enum DropReason: "raft drop reason" {
        /// The destination's queue was full (it is slow or down): the oldest message went.
        QueueFull = "queue_full",
        /// The request carrying it failed (connection error, timeout, an error status).
        SendFailed = "send_failed",
        /// No address is known for the destination store.
        UnknownStore = "unknown_store",
    }
}

types::label_enum! {
    /// What became of a replica read's read index on this server
    /// (`stratus_raft_replica_reads_total{result}`).
    pub enum ReplicaReadResult: "replica read result" {
        /// This server leads the region: it served the read as its own.
        Leader = "leader",
        /// A follower got its read point from the leader (checked there).
        Follower = "follower",
        /// The leader found a memory lock in the read's ranges: the reader resolves it.
        Locked = "locked",
        /// The leader did not check (an older build): the read goes to the leader instead.
        Unchecked = "unchecked",
    }
}

/// `POST /raft/batch` requests answered with success.
pub static BATCHES_SENT: LazyLock<IntCounter> = LazyLock::new(|| {
    let c = IntCounter::new(
        "stratus_raft_batches_sent_total",
        "Raft message batches delivered to another server (one request each).",
    )
    .expect("valid metric");
    prometheus::register(Box::new(c.clone())).expect("metric registered once");
    c
});

/// Raft messages not delivered, by [`DropReason`].
pub static MESSAGES_DROPPED: LazyLock<IntCounterVec> = LazyLock::new(|| {
    let c = IntCounterVec::new(
        Opts::new(
            "stratus_raft_messages_dropped_total",
            "Raft messages not delivered, by reason (Raft retransmits them).",
        ),
        &["reason"],
    )
    .expect("valid metric");
    prometheus::register(Box::new(c.clone())).expect("metric registered once");
    for reason in DropReason::ALL {
        c.with_label_values(&[reason.as_str()]);
    }
    c
});

fn counter(name: &str, help: &str) -> IntCounter {
    let c = IntCounter::new(name, help).expect("valid metric");
    prometheus::register(Box::new(c.clone())).expect("metric registered once");
    c
}

fn gauge(name: &str, help: &str) -> IntGauge {
    let g = IntGauge::new(name, help).expect("valid metric");
    prometheus::register(Box::new(g.clone())).expect("metric registered once");
    g
}

/// Seconds, 0.5 ms to about 16 s.
fn histogram(name: &str, help: &str) -> Histogram {
    let buckets = prometheus::exponential_buckets(0.0005, 2.0, 16).expect("valid buckets");
    let h = Histogram::with_opts(HistogramOpts::new(name, help).buckets(buckets))
        .expect("valid metric");
    prometheus::register(Box::new(h.clone())).expect("metric registered once");
    h
}

/// Commands proposed by this server's leaders (writes, ChangeSets, splits, log compactions).
pub static PROPOSALS: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "stratus_raft_proposals_total",
        "Commands proposed to a Raft group this server leads.",
    )
});

/// From a proposal to its entry applied on the leader: commit by a quorum (append, fsync and
/// a round trip to the followers), then apply, which follows in the same store round.
pub static PROPOSE_DURATION: LazyLock<Histogram> = LazyLock::new(|| {
    histogram(
        "stratus_raft_propose_duration_seconds",
        "Time from proposing a command to its entry being committed by a quorum and applied (leader).",
    )
});

/// Applying one batch of committed entries of one region.
pub static APPLY_DURATION: LazyLock<Histogram> = LazyLock::new(|| {
    histogram(
        "stratus_raft_apply_duration_seconds",
        "Time to apply one batch of committed entries of one region to the engine.",
    )
});

/// From a read-index request to its answer (a quorum confirmed the leader, and this replica
/// applied up to the index).
pub static READ_INDEX_DURATION: LazyLock<Histogram> = LazyLock::new(|| {
    histogram(
        "stratus_raft_read_index_duration_seconds",
        "Time from a read-index request to the read being allowed on this replica.",
    )
});

/// Regions this server leads.
pub static LEADERS: LazyLock<IntGauge> = LazyLock::new(|| {
    gauge(
        "stratus_raft_leaders",
        "Regions whose Raft leader is this server.",
    )
});

/// Regions this server holds a replica of.
pub static REPLICAS: LazyLock<IntGauge> = LazyLock::new(|| {
    gauge(
        "stratus_raft_replicas",
        "Regions this server holds a replica of (leader or follower).",
    )
});

/// Regions sleeping here (`hibernation`).
pub static HIBERNATED: LazyLock<IntGauge> = LazyLock::new(|| {
    gauge(
        "stratus_raft_hibernated_regions",
        "Regions whose replica on this server sleeps (idle: not ticking, no heartbeats).",
    )
});

/// Committed entries not yet applied, summed over this server's replicas.
pub static APPLY_LAG: LazyLock<IntGauge> = LazyLock::new(|| {
    gauge(
        "stratus_raft_apply_lag_entries",
        "Committed Raft entries not applied yet, summed over this server's replicas.",
    )
});

/// Raft snapshots this server's leaders built for a lagging replica.
pub static SNAPSHOTS_SENT: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "stratus_raft_snapshots_sent_total",
        "Raft snapshots (a region's file list) built for a lagging or new replica.",
    )
});

/// Raft snapshots this server's replicas installed.
pub static SNAPSHOTS_RECEIVED: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "stratus_raft_snapshots_received_total",
        "Raft snapshots installed by a replica on this server.",
    )
});

/// Membership changes applied by a replica on this server.
pub static CONF_CHANGES: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "stratus_raft_conf_changes_total",
        "Membership changes (add learner, promote, remove) applied by a replica on this server.",
    )
});

/// Replicas that left this server (their removal applied, or their leader said so).
pub static REPLICAS_DESTROYED: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "stratus_raft_replicas_destroyed_total",
        "Replicas removed from this server by a membership change.",
    )
});

/// Replica reads by [`ReplicaReadResult`].
pub static REPLICA_READS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    let c = IntCounterVec::new(
        Opts::new(
            "stratus_raft_replica_reads_total",
            "Replica reads' read indexes on this server, by result (served as leader, by a follower, blocked by a lock at the leader, unchecked by the leader).",
        ),
        &["result"],
    )
    .expect("valid metric");
    prometheus::register(Box::new(c.clone())).expect("metric registered once");
    for result in ReplicaReadResult::ALL {
        c.with_label_values(&[result.as_str()]);
    }
    c
});

/// Leaders' checks of a follower's read (memory locks, `max_ts`) before its read index.
pub static REPLICA_READ_CHECKS: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "stratus_raft_replica_read_checks_total",
        "Follower reads this server's leaders checked (max_ts raised, memory locks looked up) before answering their read index.",
    )
});

/// Counts one replica read ending as `result`.
pub fn count_replica_read(result: ReplicaReadResult) {
    REPLICA_READS.with_label_values(&[result.as_str()]).inc();
}

/// Counts `n` messages dropped for `reason`.
pub fn count_dropped(reason: DropReason, n: usize) {
    if n > 0 {
        MESSAGES_DROPPED
            .with_label_values(&[reason.as_str()])
            .inc_by(n as u64);
    }
}

/// Registers every series at 0 (call at start-up so that `/metrics` lists them before the
/// first batch).
pub fn register_all() {
    LazyLock::force(&BATCHES_SENT);
    LazyLock::force(&MESSAGES_DROPPED);
    LazyLock::force(&PROPOSALS);
    LazyLock::force(&PROPOSE_DURATION);
    LazyLock::force(&APPLY_DURATION);
    LazyLock::force(&READ_INDEX_DURATION);
    LazyLock::force(&LEADERS);
    LazyLock::force(&REPLICAS);
    LazyLock::force(&APPLY_LAG);
    LazyLock::force(&HIBERNATED);
    LazyLock::force(&SNAPSHOTS_SENT);
    LazyLock::force(&SNAPSHOTS_RECEIVED);
    LazyLock::force(&REPLICA_READS);
    LazyLock::force(&REPLICA_READ_CHECKS);
    LazyLock::force(&CONF_CHANGES);
    LazyLock::force(&REPLICAS_DESTROYED);
}
