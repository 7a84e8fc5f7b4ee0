//! The servers' offload decision counters (`tikv_coprocessor_remote_decision_total` in each
//! server's `/metrics`): read, subtracted and printed. `stratus demo` shows what the servers
//! decided during its steps; `stratus bench` checks that each configuration made the decisions
//! it is named after.
//!
//! Read strictly ([`harness::metrics`]): a page that does not parse, a decision series
//! without its `result` or `reason` label or with a value that is no [`DecisionResult`] or
//! [`OffloadReason`], and (between two reads) a series that appeared or vanished are errors,
//! never a count of 0 that would make a step look as if nothing had been decided. A server
//! exports every valid (result, reason) series from its start, so none may be missing.

use std::cmp::Ordering;

use harness::metrics::{Metrics, MetricsError};
use wire::datum::Datum;
use wire::placement::{DecisionResult, OffloadReason, UnknownLabel};

use crate::loaded_cluster::StepError;
use crate::local_cluster::LocalCluster;
use crate::table_format::{self, column_names, text_cell};

/// One series of `tikv_coprocessor_remote_decision_total`: a result and its reason. Ordered
/// by their labels, as the printed tables list them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DecisionSeries {
    pub result: DecisionResult,
    pub reason: OffloadReason,
}

impl DecisionSeries {
    fn labels(&self) -> (&'static str, &'static str) {
        (self.result.as_str(), self.reason.as_str())
    }
}

impl Ord for DecisionSeries {
    fn cmp(&self, other: &Self) -> Ordering {
        self.labels().cmp(&other.labels())
    }
}

impl PartialOrd for DecisionSeries {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// One series of `tikv_coprocessor_remote_decision_total` on one server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionCount {
    pub server: String,
    pub series: DecisionSeries,
    pub count: u64,
}

/// Why a server's decision counters could not be read.
#[derive(Debug, thiserror::Error)]
pub enum DecisionReadError {
    #[error(transparent)]
    Metrics(#[from] MetricsError),
    #[error("a series of {DECISION_METRIC} has a label no server writes: {0}")]
    Label(#[from] UnknownLabel),
}

/// The metric counting the servers' offload decisions.
pub const DECISION_METRIC: &str = "tikv_coprocessor_remote_decision_total";

/// Every server's decision counters, by server, then result and reason.
pub fn decision_counts(cluster: &LocalCluster) -> Result<Vec<DecisionCount>, StepError> {
    let mut all = Vec::new();
    for (server, text) in cluster.server_metrics()? {
        let counts = parse_decisions(&server, &text).map_err(|e| StepError::Metrics {
            server: server.clone(),
            reason: e.to_string(),
        })?;
        all.extend(counts);
    }
    all.sort_by(|a, b| (&a.server, a.series).cmp(&(&b.server, b.series)));
    Ok(all)
}

/// The decision series in one `/metrics` page.
pub fn parse_decisions(
    server: &str,
    metrics: &str,
) -> Result<Vec<DecisionCount>, DecisionReadError> {
    Metrics::parse(metrics)?
        .matching(DECISION_METRIC, &[])
        .map(|s| {
            Ok(DecisionCount {
                server: server.to_string(),
                series: DecisionSeries {
                    result: s.required_label("result")?.parse()?,
                    reason: s.required_label("reason")?.parse()?,
                },
                count: s.value as u64,
            })
        })
        .collect()
}

/// `after - before` per server, result and reason; series that did not grow are left out.
///
/// Both reads must list the same series: a server exports every (result, reason) pair from
/// its start, so a series of `after` missing from `before` means the reads came from
/// different processes, and one of `before` missing from `after` that the server restarted;
/// either way the delta would mean nothing, and it is an error.
pub fn decision_delta(
    before: &[DecisionCount],
    after: &[DecisionCount],
) -> Result<Vec<DecisionCount>, StepError> {
    let key = |c: &DecisionCount| (c.server.clone(), c.series);
    let absent = |c: &DecisionCount, from: &[DecisionCount]| !from.iter().any(|o| key(o) == key(c));
    let changed = before
        .iter()
        .find(|b| absent(b, after))
        .map(|c| (c, "vanished"))
        .or_else(|| {
            after
                .iter()
                .find(|a| absent(a, before))
                .map(|c| (c, "appeared"))
        });
    if let Some((c, what)) = changed {
        return Err(StepError::Metrics {
            server: c.server.clone(),
            reason: format!(
                "the series of {DECISION_METRIC} with result={} reason={} {what} between two \
                 reads (did the server restart?)",
                c.series.result, c.series.reason
            ),
        });
    }
    Ok(after
        .iter()
        .filter_map(|a| {
            let old = before
                .iter()
                .find(|b| key(b) == key(a))
                .map_or(0, |b| b.count);
            let count = a.count.saturating_sub(old);
            (count > 0).then(|| DecisionCount { count, ..a.clone() })
        })
        .collect())
}

/// server | result | reason | count.
pub fn render_decisions(counts: &[DecisionCount]) -> String {
    let rows: Vec<Vec<Datum>> = counts
        .iter()
        .map(|c| {
            vec![
                text_cell(&c.server),
                text_cell(c.series.result.as_str()),
                text_cell(c.series.reason.as_str()),
                Datum::UInt(c.count),
            ]
        })
        .collect();
    table_format::render(
        &column_names(&["server", "result", "reason", "count"]),
        &rows,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decision_series_are_read_with_their_labels() {
        let metrics = "# HELP tikv_coprocessor_remote_decision_total decisions\n\
                       # TYPE tikv_coprocessor_remote_decision_total counter\n\
                       tikv_coprocessor_remote_decision_total{result=\"remote\",reason=\"cpu_busy\"} 4\n\
                       tikv_coprocessor_remote_decision_total{reason=\"cpu_idle\",result=\"local\"} 2\n\
                       tikv_coprocessor_remote_decision_totals{result=\"x\",reason=\"y\"} 9\n\
                       other_total 1\n";
        assert_eq!(
            parse_decisions("server-a", metrics).unwrap(),
            [
                count("server-a", "remote", "cpu_busy", 4),
                count("server-a", "local", "cpu_idle", 2),
            ]
        );
    }

    #[test]
    fn a_decision_series_without_its_reason_or_with_an_unknown_one_or_an_unreadable_page_is_an_error()
     {
        let e = parse_decisions(
            "server-a",
            "tikv_coprocessor_remote_decision_total{result=\"remote\"} 4\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("no label reason"), "{e}");
        let e = parse_decisions(
            "server-a",
            "tikv_coprocessor_remote_decision_total{result=\"remote\",reason=\"busy\"} 4\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("value=\"busy\""), "{e}");
        assert!(
            parse_decisions(
                "server-a",
                "tikv_coprocessor_remote_decision_total{result=remote} 4\n"
            )
            .is_err()
        );
    }

    fn count(server: &str, result: &str, reason: &str, count: u64) -> DecisionCount {
        DecisionCount {
            server: server.into(),
            series: DecisionSeries {
                result: result.parse().unwrap(),
                reason: reason.parse().unwrap(),
            },
            count,
        }
    }

    #[test]
    fn the_decision_delta_keeps_only_series_that_grew() {
        let before = [
            count("server-a", "local", "cpu_idle", 3),
            count("server-a", "remote", "cpu_busy", 0),
            count("server-b", "local", "cpu_idle", 2),
        ];
        let after = [
            count("server-a", "local", "cpu_idle", 3),
            count("server-a", "remote", "cpu_busy", 4),
            count("server-b", "local", "cpu_idle", 5),
        ];
        assert_eq!(
            decision_delta(&before, &after).unwrap(),
            [
                count("server-a", "remote", "cpu_busy", 4),
                count("server-b", "local", "cpu_idle", 3),
            ]
        );
    }

    #[test]
    fn a_series_that_vanished_or_appeared_between_two_reads_is_an_error() {
        let before = [count("server-b", "local", "cpu_idle", 2)];
        let e = decision_delta(&before, &[]).unwrap_err();
        assert!(e.to_string().contains("reason=cpu_idle vanished"), "{e}");
        let e = decision_delta(&[], &before).unwrap_err();
        assert!(e.to_string().contains("reason=cpu_idle appeared"), "{e}");
    }

    #[test]
    fn series_order_by_their_labels() {
        let busy = count("s", "remote", "cpu_busy", 0).series;
        let forced = count("s", "remote", "load_aware_force_blocks_size", 0).series;
        let idle = count("s", "local", "cpu_idle", 0).series;
        let mut all = vec![forced, busy, idle];
        all.sort();
        assert_eq!(all, [idle, busy, forced]);
    }
}
