//! Recent local runs per query pattern: what the lazy-pattern offload reasons look at.
//!
//! The blocks estimate judges a request by its ranges alone. Some requests it judges badly:
//! thousands of small ranges, a selection with a limit, data that sits in the memtable (the
//! estimate counts SST blocks only). What such a request costs shows when its *pattern* runs:
//! the same DAG shape over the same table, with other constants and other ranges. This module
//! keeps, per pattern digest, the last [`RUNS_KEPT`] local runs (their blocks estimate and
//! duration); `offload_policy` offloads a pattern whose average over at least [`MIN_RUNS`] of
//! them reaches a threshold.
//!
//! A pattern is the executor kinds in order, the scanned table (and index) id, the scanned
//! column ids, and the column offsets the selection filters on — not the constants, limits or
//! ranges, so a query re-run with new parameters is the same pattern.
//!
//! Memory is bounded: at most `capacity` patterns; the least recently recorded one is
//! forgotten first.

use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::time::Duration;

use parking_lot::Mutex;
use wire::coprocessor::{DagRequest, ExecType, Expr, ExprType};

/// Local runs remembered per pattern.
pub const RUNS_KEPT: usize = 5;
/// Runs a pattern needs before its averages count.
pub const MIN_RUNS: usize = 2;

/// One local execution of a pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    /// The blocks estimate of its ranges, if one was made (a request decided by its range
    /// count skips the estimate).
    pub blocks_size: Option<u64>,
    pub duration: Duration,
}

/// Averages over a pattern's remembered runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PatternStats {
    pub runs: usize,
    /// Average over the runs that have an estimate, if at least [`MIN_RUNS`] do.
    pub avg_blocks_size: Option<u64>,
    pub avg_duration: Duration,
}

/// The digest of a DAG's pattern (see the module docs), or `None` for an undecodable DAG.
pub fn digest(dag_bytes: &[u8]) -> Option<u64> {
    use prost::Message;
    let dag = DagRequest::decode(dag_bytes).ok()?;
    Some(digest_dag(&dag))
}

/// [`digest`] of a decoded DAG.
pub fn digest_dag(dag: &DagRequest) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for e in &dag.executors {
        e.tp.hash(&mut h);
        match ExecType::from_i32(e.tp) {
            Some(ExecType::TableScan) => {
                if let Some(s) = &e.tbl_scan {
                    s.table_id.hash(&mut h);
                    s.desc.hash(&mut h);
                    for c in &s.columns {
                        c.column_id.hash(&mut h);
                    }
                }
            }
            Some(ExecType::IndexScan) => {
                if let Some(s) = &e.idx_scan {
                    (s.table_id, s.index_id, s.desc).hash(&mut h);
                    for c in &s.columns {
                        c.column_id.hash(&mut h);
                    }
                }
            }
            Some(ExecType::Selection) => {
                if let Some(s) = &e.selection {
                    let mut columns = Vec::new();
                    for c in &s.conditions {
                        column_offsets(c, &mut columns);
                    }
                    columns.sort_unstable();
                    columns.dedup();
                    columns.hash(&mut h);
                }
            }
            _ => {}
        }
    }
    h.finish()
}

fn column_offsets(e: &Expr, out: &mut Vec<u32>) {
    if ExprType::from_i32(e.tp) == Some(ExprType::ColumnRef) {
        out.push(e.column_offset);
    }
    for c in &e.children {
        column_offsets(c, out);
    }
}

/// Per-pattern run history, shared by all requests of a server.
pub struct PatternHistory {
    capacity: usize,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    runs: HashMap<u64, VecDeque<Run>>,
    /// Digests by last record, oldest first (may hold stale entries; see `record`).
    order: VecDeque<(u64, u64)>,
    /// Record counter: an `order` entry is current when it matches `stamps[digest]`.
    stamps: HashMap<u64, u64>,
    clock: u64,
}

impl PatternHistory {
    pub fn new(capacity: usize) -> PatternHistory {
        PatternHistory {
            capacity: capacity.max(1),
            inner: Mutex::new(Inner::default()),
        }
    }

    /// Remembers a local run of `digest`, dropping its oldest run past [`RUNS_KEPT`] and the
    /// least recently recorded pattern past the capacity.
    pub fn record(&self, digest: u64, run: Run) {
        let mut g = self.inner.lock();
        let inner = &mut *g;
        inner.clock += 1;
        let stamp = inner.clock;
        let runs = inner.runs.entry(digest).or_default();
        runs.push_back(run);
        if runs.len() > RUNS_KEPT {
            runs.pop_front();
        }
        inner.stamps.insert(digest, stamp);
        inner.order.push_back((digest, stamp));
        while inner.runs.len() > self.capacity {
            let Some((old, old_stamp)) = inner.order.pop_front() else {
                break;
            };
            if inner.stamps.get(&old) == Some(&old_stamp) {
                inner.runs.remove(&old);
                inner.stamps.remove(&old);
            }
        }
        // Stale entries (patterns recorded again since) are dropped lazily; keep the queue
        // from growing without bound when a few patterns repeat forever.
        if inner.order.len() > 4 * self.capacity + 16 {
            let stamps = &inner.stamps;
            inner.order.retain(|(d, s)| stamps.get(d) == Some(s));
        }
    }

    /// The averages of `digest`'s remembered runs, if it has at least [`MIN_RUNS`].
    pub fn stats(&self, digest: u64) -> Option<PatternStats> {
        let g = self.inner.lock();
        let runs = g.runs.get(&digest)?;
        if runs.len() < MIN_RUNS {
            return None;
        }
        let total: Duration = runs.iter().map(|r| r.duration).sum();
        let sizes: Vec<u64> = runs.iter().filter_map(|r| r.blocks_size).collect();
        let avg_blocks_size = (sizes.len() >= MIN_RUNS)
            .then(|| (sizes.iter().map(|&s| s as u128).sum::<u128>() / sizes.len() as u128) as u64);
        Some(PatternStats {
            runs: runs.len(),
            avg_blocks_size,
            avg_duration: total / runs.len() as u32,
        })
    }

    /// Patterns remembered (for tests and `/status`).
    pub fn len(&self) -> usize {
        self.inner.lock().runs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use wire::coprocessor::{ColumnInfo, Executor, Limit, Selection, TableScan};

    fn scan(table_id: i64, columns: &[i64]) -> Executor {
        Executor {
            tp: ExecType::TableScan as i32,
            tbl_scan: Some(TableScan {
                table_id,
                columns: columns
                    .iter()
                    .map(|&column_id| ColumnInfo {
                        column_id,
                        ..ColumnInfo::default()
                    })
                    .collect(),
                desc: false,
            }),
            ..Executor::default()
        }
    }

    fn filter(column: u32, constant: i64) -> Executor {
        let col = Expr {
            tp: ExprType::ColumnRef as i32,
            column_offset: column,
            ..Expr::default()
        };
        let val = Expr {
            tp: ExprType::Int64 as i32,
            val: constant.to_le_bytes().to_vec(),
            ..Expr::default()
        };
        Executor {
            tp: ExecType::Selection as i32,
            selection: Some(Selection {
                conditions: vec![Expr {
                    tp: ExprType::ScalarFunc as i32,
                    children: vec![col, val],
                    ..Expr::default()
                }],
            }),
            ..Executor::default()
        }
    }

    fn limit(n: u64) -> Executor {
        Executor {
            tp: ExecType::Limit as i32,
            limit: Some(Limit { limit: n }),
            ..Executor::default()
        }
    }

    fn dag(executors: Vec<Executor>) -> DagRequest {
        DagRequest {
            executors,
            ..DagRequest::default()
        }
    }

    #[test]
    fn constants_and_limits_do_not_change_the_pattern() {
        let a = digest_dag(&dag(vec![scan(7, &[1, 2]), filter(1, 10), limit(5)]));
        let b = digest_dag(&dag(vec![scan(7, &[1, 2]), filter(1, 99), limit(50)]));
        assert_eq!(a, b);
    }

    #[test]
    fn table_columns_filters_and_executors_change_the_pattern() {
        let base = digest_dag(&dag(vec![scan(7, &[1, 2]), filter(1, 10)]));
        for other in [
            dag(vec![scan(8, &[1, 2]), filter(1, 10)]),
            dag(vec![scan(7, &[1, 3]), filter(1, 10)]),
            dag(vec![scan(7, &[1, 2]), filter(0, 10)]),
            dag(vec![scan(7, &[1, 2]), filter(1, 10), limit(1)]),
            dag(vec![scan(7, &[1, 2])]),
        ] {
            assert_ne!(digest_dag(&other), base, "{other:?}");
        }
    }

    #[test]
    fn an_undecodable_dag_has_no_pattern() {
        assert_eq!(digest(&[0xff, 0xff, 0xff]), None);
    }

    fn run(blocks: u64, ms: u64) -> Run {
        Run {
            blocks_size: Some(blocks),
            duration: Duration::from_millis(ms),
        }
    }

    #[test]
    fn averages_need_two_runs_and_keep_the_last_five() {
        let h = PatternHistory::new(10);
        h.record(1, run(100, 10));
        assert_eq!(h.stats(1), None, "one run is no pattern yet");
        h.record(1, run(300, 30));
        let s = h.stats(1).unwrap();
        assert_eq!(s.runs, 2);
        assert_eq!(s.avg_blocks_size, Some(200));
        assert_eq!(s.avg_duration, Duration::from_millis(20));
        for _ in 0..5 {
            h.record(1, run(1000, 50));
        }
        let s = h.stats(1).unwrap();
        assert_eq!((s.runs, s.avg_blocks_size), (5, Some(1000)));
    }

    #[test]
    fn runs_without_an_estimate_count_for_duration_only() {
        let h = PatternHistory::new(10);
        h.record(
            1,
            Run {
                blocks_size: None,
                duration: Duration::from_millis(40),
            },
        );
        h.record(1, run(100, 20));
        let s = h.stats(1).unwrap();
        assert_eq!(s.avg_blocks_size, None, "only one run has an estimate");
        assert_eq!(s.avg_duration, Duration::from_millis(30));
    }

    proptest! {
        /// Against a model: a map of the last five runs per pattern, and a recency list.
        #[test]
        fn matches_a_model(ops in prop::collection::vec((0u64..6, 0u64..1000, 0u64..100), 1..200)) {
            let cap = 3;
            let h = PatternHistory::new(cap);
            let mut model: Vec<(u64, Vec<Run>)> = Vec::new(); // most recent last
            for (d, blocks, ms) in ops {
                h.record(d, run(blocks, ms));
                let mut runs = match model.iter().position(|(x, _)| *x == d) {
                    Some(i) => model.remove(i).1,
                    None => Vec::new(),
                };
                runs.push(run(blocks, ms));
                if runs.len() > RUNS_KEPT {
                    runs.remove(0);
                }
                model.push((d, runs));
                if model.len() > cap {
                    model.remove(0);
                }
                prop_assert_eq!(h.len(), model.len());
                for d in 0..6 {
                    let want = model.iter().find(|(x, _)| *x == d).and_then(|(_, runs)| {
                        (runs.len() >= MIN_RUNS).then(|| PatternStats {
                            runs: runs.len(),
                            avg_blocks_size: Some(runs.iter().map(|r| r.blocks_size.unwrap()).sum::<u64>() / runs.len() as u64),
                            avg_duration: runs.iter().map(|r| r.duration).sum::<Duration>() / runs.len() as u32,
                        })
                    });
                    prop_assert_eq!(h.stats(d), want);
                }
            }
        }
    }
}
