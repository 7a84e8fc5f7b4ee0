//! The servers' offload decision counters (`tikv_coprocessor_remote_decision_total` in each
//! server's `/metrics`): read, subtracted and printed. `stratus demo` shows what the servers
//! decided during its steps; `stratus bench` checks that each configuration made the decisions
//! it is named after.

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
        all.extend(parse_decisions(&server, &text));
    }
    all.sort_by(|a, b| (&a.server, &a.result, &a.reason).cmp(&(&b.server, &b.result, &b.reason)));
    Ok(all)
}

/// The decision series in one `/metrics` text (Prometheus exposition). The label values are a
/// closed set of plain words, so no escapes are handled.
pub fn parse_decisions(server: &str, metrics: &str) -> Vec<DecisionCount> {
    metrics
        .lines()
        .filter_map(|line| {
            let rest = line
                .trim()
                .strip_prefix(DECISION_METRIC)?
                .strip_prefix('{')?;
            let (labels, value) = rest.split_once('}')?;
            let value: f64 = value.split_whitespace().next()?.parse().ok()?;
            let label = |key: &str| {
                labels.split(',').find_map(|kv| {
                    let (k, v) = kv.split_once('=')?;
                    (k.trim() == key).then(|| v.trim().trim_matches('"').to_string())
                })
            };
            Some(DecisionCount {
                server: server.to_string(),
                result: label("result")?,
                reason: label("reason")?,
                count: value as u64,
            })
        })
        .collect()
}

/// `after - before` per server, result and reason; series that did not grow are left out.
pub fn decision_delta(before: &[DecisionCount], after: &[DecisionCount]) -> Vec<DecisionCount> {
    after
        .iter()
        .filter_map(|a| {
            let old = before
                .iter()
                .find(|b| (&b.server, &b.result, &b.reason) == (&a.server, &a.result, &a.reason))
                .map_or(0, |b| b.count);
            let count = a.count.saturating_sub(old);
            (count > 0).then(|| DecisionCount { count, ..a.clone() })
        })
        .collect()
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
            parse_decisions("server-a", metrics),
            [
                DecisionCount {
                    server: "server-a".into(),
                    result: "remote".into(),
                    reason: "cpu_busy".into(),
                    count: 4
                },
                DecisionCount {
                    server: "server-a".into(),
                    result: "local".into(),
                    reason: "cpu_idle".into(),
                    count: 2
                },
            ]
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
            decision_delta(&before, &after),
            [
                count("server-a", "remote", "cpu_busy", 4),
                count("server-b", "local", "cpu_idle", 3),
            ]
        );
    }
}
