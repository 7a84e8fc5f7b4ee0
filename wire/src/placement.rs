//! Where a coprocessor request ran and why: the vocabulary of the exec details a server (or a
//! worker on the delegate path) answers with, and of the metrics that count the same events.
//!
//! * [`Location`]: where a request ran (`ExecDetails.location`, the server's
//!   `stratus_server_coprocessor_requests_total{location}`);
//! * [`OffloadReason`]: why the server decided where to run it (`ExecDetails.reason` of a
//!   local or remote run, `tikv_coprocessor_remote_decision_total{reason}`), and the
//!   [`DecisionResult`] each reason implies (`{result}`);
//! * [`FallbackCause`]: why an offloaded request ran locally after all
//!   (`stratus_server_offload_fallbacks_total{cause}`).
//!
//! **Compatibility.** The protobuf fields stay strings, so old and new processes still read
//! each other: a sender writes `as_str()`, a reader `parse()`s and gets a typed
//! [`types::UnknownLabel`] for text it does not know (a newer peer's), which it may show as
//! text but never mistakes for a known value. The labels are exactly the strings the metrics
//! and the README have always used.

use crate::coprocessor::ExecDetails;

pub use types::UnknownLabel;

types::label_enum! {
    /// Where a coprocessor request ran (`ExecDetails.location`).
    pub enum Location: "location" {
        /// On the server owning the region: the offload policy kept it there, or the server
        /// has no worker.
        Local = "local",
        /// Offloaded by the server to a worker (`ExecDetails.remote_addr` names it).
        Remote = "remote",
        /// Offloaded, the worker failed, and the server ran it locally.
        Fallback = "fallback",
        /// Not run: the result the client cached is still valid (the region's data version is
        /// unchanged).
        CacheHit = "cache_hit",
        /// Sent to a worker by the client (the delegate path; `remote_addr` names the owning
        /// server).
        Delegate = "delegate",
    }
}

types::label_enum! {
    /// Whether a counted offload decision sent the request to a worker
    /// (`tikv_coprocessor_remote_decision_total{result}`).
    pub enum DecisionResult: "decision result" {
        Local = "local",
        Remote = "remote",
    }
}

types::label_enum! {
    /// Why the server ran a request where it did (see `server::offload_policy` for the rules
    /// and their order). The first ten are counted decisions; the last two are not decisions.
    pub enum OffloadReason: "offload reason" {
        /// At least `remote-coprocessor-num-ranges` ranges.
        NumRanges = "num_ranges",
        /// The SST blocks the ranges cover reach `remote-coprocessor-min-blocks-size`.
        BlocksSize = "blocks_size",
        /// An old query whose blocks reach the threshold lowered for its age.
        LongQueryBlocksSize = "long_query_blocks_size",
        /// A DAG pattern whose recent local runs averaged enough blocks.
        LazyPatternBlocksSize = "lazy_pattern_blocks_size",
        /// A DAG pattern whose recent local runs were slow.
        LazyPatternDuration = "lazy_pattern_duration",
        /// Load-aware routing: blocks above the force size, whatever the CPU says.
        LoadAwareForceBlocksSize = "load_aware_force_blocks_size",
        /// Load-aware routing: ranges above the force count, whatever the CPU says.
        LoadAwareForceNumRanges = "load_aware_force_num_ranges",
        /// Load-aware routing: no fresh CPU sample (fail open: remote).
        NoCpuSignal = "no_cpu_signal",
        /// Load-aware routing: the CPU is busy.
        CpuBusy = "cpu_busy",
        /// Load-aware routing: the CPU is idle, the candidate stays local.
        CpuIdle = "cpu_idle",
        /// Not counted: no candidate reason held.
        BelowMinBlocksSize = "below_min_blocks_size",
        /// Not counted: the server has no worker.
        NoRemoteAddr = "no_remote_addr",
    }
}

impl OffloadReason {
    /// Whether a decision for this reason is counted in
    /// `tikv_coprocessor_remote_decision_total` (false: the request was no candidate, or the
    /// server has no worker).
    pub const fn is_counted(self) -> bool {
        !matches!(
            self,
            OffloadReason::BelowMinBlocksSize | OffloadReason::NoRemoteAddr
        )
    }

    /// Where a request decided for this reason goes: each reason implies one result (only
    /// `cpu_idle` keeps a candidate local; the uncounted reasons are local too).
    pub const fn result(self) -> DecisionResult {
        match self {
            OffloadReason::CpuIdle
            | OffloadReason::BelowMinBlocksSize
            | OffloadReason::NoRemoteAddr => DecisionResult::Local,
            _ => DecisionResult::Remote,
        }
    }

    /// Every `(result, reason)` series `tikv_coprocessor_remote_decision_total` can have: the
    /// counted reasons, each with the result it implies.
    pub fn decision_series() -> impl Iterator<Item = (DecisionResult, OffloadReason)> {
        OffloadReason::ALL
            .iter()
            .filter(|r| r.is_counted())
            .map(|&r| (r.result(), r))
    }
}

types::label_enum! {
    /// Why an offloaded request ran locally after all
    /// (`stratus_server_offload_fallbacks_total{cause}`).
    pub enum FallbackCause: "fallback cause" {
        /// No connection to any worker, after the retries.
        Connect = "connect",
        /// The attempt or the request's deadline timed out.
        Timeout = "timeout",
        /// Every worker answered 503, after the retries.
        Unavailable = "unavailable",
        /// A worker answered another non-success status (not retried).
        BadStatus = "bad_status",
        /// The worker's answer carried an error, a region error or a lock.
        WorkerError = "worker_error",
        /// The worker's answer did not decode, or the exchange failed otherwise.
        BadResponse = "bad_response",
        /// The offload body could not be built.
        Encode = "encode",
    }
}

impl ExecDetails {
    /// Where the request ran: `Ok(None)` when the answer says nothing (an old peer, or a
    /// response that was never run), `Err` for a location this build does not know.
    pub fn location(&self) -> Result<Option<Location>, UnknownLabel> {
        if self.location.is_empty() {
            return Ok(None);
        }
        self.location.parse().map(Some)
    }

    /// Sets where the request ran, and why (`reason` is free text: an offload reason's label,
    /// or a sentence for a fallback, a cache hit or the delegate path).
    pub fn set_location(&mut self, location: Location, reason: impl Into<String>) {
        self.location = location.as_str().to_string();
        self.reason = reason.into();
    }

    /// The offload reason, when `reason` is exactly one (a local or remote decision); `None`
    /// for the sentences of other locations, or a reason this build does not know.
    pub fn offload_reason(&self) -> Option<OffloadReason> {
        self.reason.parse().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels<T: Copy>(all: &[T], f: impl Fn(T) -> &'static str) -> Vec<&'static str> {
        all.iter().map(|&v| f(v)).collect()
    }

    #[test]
    fn labels_are_exactly_the_strings_metrics_and_the_readme_use() {
        assert_eq!(
            labels(Location::ALL, Location::as_str),
            ["local", "remote", "fallback", "cache_hit", "delegate"]
        );
        assert_eq!(
            labels(DecisionResult::ALL, DecisionResult::as_str),
            ["local", "remote"]
        );
        assert_eq!(
            labels(OffloadReason::ALL, OffloadReason::as_str),
            [
                "num_ranges",
                "blocks_size",
                "long_query_blocks_size",
                "lazy_pattern_blocks_size",
                "lazy_pattern_duration",
                "load_aware_force_blocks_size",
                "load_aware_force_num_ranges",
                "no_cpu_signal",
                "cpu_busy",
                "cpu_idle",
                "below_min_blocks_size",
                "no_remote_addr",
            ]
        );
        assert_eq!(
            labels(FallbackCause::ALL, FallbackCause::as_str),
            [
                "connect",
                "timeout",
                "unavailable",
                "bad_status",
                "worker_error",
                "bad_response",
                "encode"
            ]
        );
    }

    #[test]
    fn every_label_parses_back_to_its_value() {
        for v in Location::ALL {
            assert_eq!(v.as_str().parse::<Location>(), Ok(*v));
        }
        for v in DecisionResult::ALL {
            assert_eq!(v.as_str().parse::<DecisionResult>(), Ok(*v));
        }
        for v in OffloadReason::ALL {
            assert_eq!(v.as_str().parse::<OffloadReason>(), Ok(*v));
        }
        for v in FallbackCause::ALL {
            assert_eq!(v.as_str().parse::<FallbackCause>(), Ok(*v));
        }
        let e = "Remote".parse::<Location>().unwrap_err();
        assert_eq!(e.kind, "location");
    }

    #[test]
    fn the_decision_series_are_the_counted_reasons_with_their_result() {
        let series: Vec<(&str, &str)> = OffloadReason::decision_series()
            .map(|(result, reason)| (result.as_str(), reason.as_str()))
            .collect();
        assert_eq!(
            series,
            [
                ("remote", "num_ranges"),
                ("remote", "blocks_size"),
                ("remote", "long_query_blocks_size"),
                ("remote", "lazy_pattern_blocks_size"),
                ("remote", "lazy_pattern_duration"),
                ("remote", "load_aware_force_blocks_size"),
                ("remote", "load_aware_force_num_ranges"),
                ("remote", "no_cpu_signal"),
                ("remote", "cpu_busy"),
                ("local", "cpu_idle"),
            ]
        );
        assert!(!OffloadReason::BelowMinBlocksSize.is_counted());
        assert_eq!(OffloadReason::NoRemoteAddr.result(), DecisionResult::Local);
    }

    #[test]
    fn exec_details_read_back_what_was_set_and_reject_unknown_locations() {
        let mut d = ExecDetails::default();
        assert_eq!(d.location(), Ok(None));
        d.set_location(Location::Remote, OffloadReason::CpuBusy.as_str());
        assert_eq!(d.location, "remote");
        assert_eq!(d.location(), Ok(Some(Location::Remote)));
        assert_eq!(d.offload_reason(), Some(OffloadReason::CpuBusy));
        d.set_location(Location::CacheHit, "data version unchanged");
        assert_eq!(d.offload_reason(), None);
        d.location = "moon".into();
        assert_eq!(
            d.location(),
            Err(UnknownLabel {
                kind: "location",
                value: "moon".into()
            })
        );
    }
}
