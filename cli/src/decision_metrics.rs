//! The servers' offload decision counters (`tikv_coprocessor_remote_decision_total` in each
//! server's `/metrics`): read, subtracted and printed. `stratus demo` shows what the servers
//! decided during its steps; `stratus bench` checks that each configuration made the decisions
//! it is named after.
//!
//! Read strictly ([`harness::metrics`]): a page that does not parse, or a decision series
//! without its `result` or `reason` label, is an error, never a count of 0 that would make a
//! step look as if nothing had been decided.

use harness::metrics::{Metrics, MetricsError};
use wire::datum::Datum;

use crate::loaded_cluster::StepError;
use crate::local_cluster::LocalCluster;
use crate::table_format::{self, column_names, text_cell};

/// One series of `tikv_coprocessor_remote_decision_total` on one server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionCount {
    pub server: String,
    pub result: String,
    pub reason: String,
    pub count: u64,
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
    all.sort_by(|a, b| (&a.server, &a.result, &a.reason).cmp(&(&b.server, &b.result, &b.reason)));
    Ok(all)
}

/// The decision series in one `/metrics` page.
pub fn parse_decisions(server: &str, metrics: &str) -> Result<Vec<DecisionCount>, MetricsError> {
    Metrics::parse(metrics)?
        .matching(DECISION_METRIC, &[])
        .map(|s| {
            Ok(DecisionCount {
                server: server.to_string(),
                result: s.required_label("result")?.to_string(),
                reason: s.required_label("reason")?.to_string(),
                count: s.value as u64,
            })
        })
        .collect()
}

/// `after - before` per server, result and reason; series that did not grow are left out.
///
/// A series of `after` missing from `before` counts from 0, on purpose: today a server creates
/// the series of a (result, reason) pair at its first such decision, so "no series yet" is
/// "none decided yet". (Once the servers export every pair from their start, this can become
/// an error too.) A series of `before` missing from `after` is an error: counters never
/// vanish, unless the server restarted and the delta would mean nothing.
pub fn decision_delta(
    before: &[DecisionCount],
    after: &[DecisionCount],
) -> Result<Vec<DecisionCount>, StepError> {
    let key = |c: &DecisionCount| (c.server.clone(), c.result.clone(), c.reason.clone());
    if let Some(gone) = before
        .iter()
        .find(|b| !after.iter().any(|a| key(a) == key(b)))
    {
        return Err(StepError::Metrics {
            server: gone.server.clone(),
            reason: format!(
                "the series of {DECISION_METRIC} with result={} reason={} vanished (did the \
                 server restart?)",
                gone.result, gone.reason
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
                text_cell(&c.result),
                text_cell(&c.reason),
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
    fn a_decision_series_without_its_reason_or_an_unreadable_page_is_an_error() {
        let e = parse_decisions(
            "server-a",
            "tikv_coprocessor_remote_decision_total{result=\"remote\"} 4\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("no label reason"), "{e}");
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
            result: result.into(),
            reason: reason.into(),
            count,
        }
    }

    #[test]
    fn the_decision_delta_keeps_only_series_that_grew() {
        let before = [
            count("server-a", "local", "cpu_idle", 3),
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
    fn a_series_that_vanished_between_two_reads_is_an_error() {
        let before = [count("server-b", "local", "cpu_idle", 2)];
        let e = decision_delta(&before, &[]).unwrap_err();
        assert!(e.to_string().contains("reason=cpu_idle vanished"), "{e}");
    }
}
