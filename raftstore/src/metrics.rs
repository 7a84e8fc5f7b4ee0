//! The Raft transport's metrics (default prometheus registry, registered on first use). Every
//! series of a labelled counter exists from the start at 0, as in the server's metrics: a
//! `rate()` sees the first event, and a test reads a missing series as the error it is.

use std::sync::LazyLock;

use prometheus::{IntCounter, IntCounterVec, Opts};

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
}
